/*
 * backend_cpu_rwkv.h -- the CPU backend's operations for recurrent layers
 * (backend.h, "recurrent layers"): RWKV-6's in backend_cpu_rwkv.c, Gated
 * DeltaNet's in backend_cpu_deltanet.c.
 */
#ifndef HEARTH_BACKEND_CPU_RWKV_H
#define HEARTH_BACKEND_CPU_RWKV_H

#include "backend.h"

/* Run fn(arg) as one OpenMP parallel region of n_threads threads, or
 * directly on this thread when n_threads is 1 (fn shares its loops out
 * with orphaned "omp for" directives); the calling thread's index within
 * the region (0 outside one).  In backend_cpu.c. */
void cpu_run_parallel(int n_threads, void (*fn)(void *), void *arg);
int cpu_thread_index(void);

hearth_status cpu_norm(struct hearth_backend *be, struct act *out, const struct act *in, int64_t group,
                       const float *w, const float *b, float eps);
hearth_status cpu_token_shift(struct hearth_backend *be, struct act *prev, const struct act *x,
                              struct rstate *rs, int il, int which, const struct batch_pos *bp);
hearth_status cpu_lerp(struct hearth_backend *be, struct act *out, const struct act *x, const struct act *prev,
                       const float *mu, const struct act *mix, int64_t mix_col);
hearth_status cpu_map(struct hearth_backend *be, struct act *out, const struct act *in, enum map_fn fn,
                      float arg);
hearth_status cpu_mul(struct hearth_backend *be, struct act *out, const struct act *a, const struct act *b);
hearth_status cpu_copy_cols(struct hearth_backend *be, struct act *dst, const struct act *src, int64_t first,
                            int64_t n_cols);
hearth_status cpu_wkv(struct hearth_backend *be, struct act *out, const struct act *r, const struct act *k,
                      const struct act *v, const struct act *lw, const float *u, float scale, int32_t n_head,
                      int32_t n_head_kv, int32_t head_size, struct rstate *rs, int il, int32_t chunk_size,
                      const struct batch_pos *bp);

/* Gated DeltaNet layers (backend_cpu_deltanet.c). */
hearth_status cpu_conv_causal(struct hearth_backend *be, struct act *out, const struct act *x, const float *w,
                              int32_t K, bool silu, struct rstate *rs, int il, size_t offset,
                              const struct batch_pos *bp);
hearth_status cpu_gated_delta(struct hearth_backend *be, struct act *out, const struct act *qkv,
                              const struct act *beta, const struct act *alpha, const struct deltanet_params *p,
                              struct rstate *rs, int il, int32_t chunk_size, const struct batch_pos *bp);

#endif /* HEARTH_BACKEND_CPU_RWKV_H */

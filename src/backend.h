/*
 * backend.h -- the seam between the model code and the hardware.
 *
 * A transformer layer (models/<family>.c) is written as a short sequence of
 * operations on activation buffers: matrix product with a weight, RMS norm,
 * RoPE, attention over the KV cache, elementwise add and SwiGLU.  A backend
 * executes those operations where its layers live: the CPU backend
 * (backend_cpu.c) on host memory with the kernels of simd/, the OpenCL
 * backend on a device.  Each layer of a context is assigned one backend;
 * only the hidden state crosses between them.
 */
#ifndef HEARTH_BACKEND_H
#define HEARTH_BACKEND_H

#include "internal.h"
#include "model.h"

struct hearth_backend;
struct kv_cache;

/* An activation buffer of `rows` tokens by `width` floats, row-major.
 * host is valid on the CPU backend; dev is a device backend's handle. */
struct act {
    float *host;
    void *dev;
    int64_t rows;
    int64_t width;
    int64_t capacity;   /* floats allocated */
};

/* The positions of the tokens of a batch (one sequence). */
struct batch_pos {
    const int32_t *pos; /* pos[t] for each row t */
    int64_t n_tokens;
};

struct backend_ops {
    const char *name;
    /* Activation buffers of up to rows x width floats. */
    hearth_status (*act_alloc)(struct hearth_backend *be, struct act *a, int64_t rows, int64_t width);
    void (*act_free)(struct hearth_backend *be, struct act *a);
    /* Copy rows between host memory and the backend's buffer. */
    hearth_status (*act_upload)(struct hearth_backend *be, struct act *dst, const float *src, int64_t rows);
    hearth_status (*act_download)(struct hearth_backend *be, float *dst, const struct act *src, int64_t rows);

    /* out[t][r] = sum_k w[r][k] * in[t][k] for every row t of in. */
    hearth_status (*matmul)(struct hearth_backend *be, struct act *out, const struct weight *w,
                            const struct act *in);
    /* outs[i] = ws[i] x in for each i < n (n <= MATMUL_SET_MAX): products of
     * one input, which the backend may run as one step; the outputs are
     * distinct buffers, none of them in.  NULL: backend_matmul_set runs
     * them one by one with matmul. */
    hearth_status (*matmul_set)(struct hearth_backend *be, int n, struct act *const outs[],
                                const struct weight *const ws[], const struct act *in);
    /* x[t][i] += bias[i] */
    hearth_status (*add_bias)(struct hearth_backend *be, struct act *x, const struct weight *bias);
    /* out[t] = in[t] / rms(in[t]) * w  (rms with eps inside the root) */
    hearth_status (*rmsnorm)(struct hearth_backend *be, struct act *out, const struct act *in,
                             const struct weight *w, float eps);
    /* Rotate each head of x (heads of head_dim) by its token's position. */
    hearth_status (*rope)(struct hearth_backend *be, struct act *x, int32_t n_heads, int32_t head_dim,
                          const struct rope_params *rope, const struct batch_pos *bp);
    /* Store k and v of the batch in the layer's cache at their positions,
     * then out = causal softmax(q k^T / sqrt(head_dim)) v per head, grouped
     * query heads sharing key/value heads. */
    hearth_status (*attention)(struct hearth_backend *be, struct act *out, const struct act *q,
                               const struct act *k, const struct act *v, struct kv_cache *kv,
                               int il, const struct hparams *hp, const struct batch_pos *bp);
    /* out = a + b (elementwise) */
    hearth_status (*add)(struct hearth_backend *be, struct act *out, const struct act *a,
                         const struct act *b);
    /* out = silu(gate) * up */
    hearth_status (*swiglu)(struct hearth_backend *be, struct act *out, const struct act *gate,
                            const struct act *up);
    /* dst rows 0 .. n_rows-1 = src rows first .. first+n_rows-1 (dst and
     * src distinct buffers). */
    hearth_status (*copy_rows)(struct hearth_backend *be, struct act *dst, const struct act *src,
                               int64_t first, int64_t n_rows);
};

struct hearth_backend {
    const struct backend_ops *ops;
    int n_threads;
    void *impl;
};

/* The most products one matmul_set takes (a layer's q, k and v). */
#define MATMUL_SET_MAX 3

/* outs[i] = ws[i] x in for each i < n, as one step where the backend can. */
static inline hearth_status backend_matmul_set(struct hearth_backend *be, int n, struct act *const outs[],
                                               const struct weight *const ws[], const struct act *in)
{
    if (be->ops->matmul_set) return be->ops->matmul_set(be, n, outs, ws, in);
    for (int i = 0; i < n; i++) {
        hearth_status st = be->ops->matmul(be, outs[i], ws[i], in);
        if (st) return st;
    }
    return HEARTH_OK;
}

/* The CPU backend (always available). */
hearth_status backend_cpu_new(int n_threads, struct hearth_backend **out);
void backend_cpu_free(struct hearth_backend *be);

/* The OpenCL backend (opencl/): runs the layers the model offloaded
 * (model->offload), whose weights are already on the device, and keeps
 * their KV cache in device memory (allocated here for kv's layers from
 * model->offload.first_layer on).  Before allocating anything it checks
 * that the KV cache and the buffers of batches of up to n_batch tokens
 * fit the device memory left (HEARTH_E_NOMEM naming the bytes needed and
 * available when not).  Without OpenCL support in the build it fails with
 * HEARTH_E_UNSUPPORTED. */
hearth_status backend_opencl_new(const hearth_model *model, struct kv_cache *kv, int32_t n_batch,
                                 struct hearth_backend **out);
void backend_opencl_free(struct hearth_backend *be);

#endif /* HEARTH_BACKEND_H */

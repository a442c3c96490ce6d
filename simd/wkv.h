/*
 * wkv.h -- the recurrences of linear-attention layers (RWKV-6's WKV and
 * gated linear attention) for one head of one sequence: token by token
 * (decode) and chunk-parallel (prefill), chosen at run time like the
 * matrix kernels (one table per instruction set; wkv_impl.h is the body
 * every path compiles, the scalar one being the twin the tests compare
 * with).
 *
 * Per head the state S is N x N floats, row i belonging to key channel i
 * and column j to value channel j.  With the log-decay l_t (every element
 * <= 0) and w_t = exp(l_t):
 *
 *   RWKV-6:  y_t = r_t^T (S_{t-1} + diag(u) k_t v_t^T)
 *            S_t = diag(w_t) S_{t-1} + k_t v_t^T
 *   GLA:     S_t = diag(w_t) S_{t-1} + (k_t * (1 - w_t)) v_t^T
 *            y_t = scale * r_t^T S_t
 *
 * The chunked form computes the same thing C tokens at a time (DESIGN.md,
 * "Chunk-parallel prefill").  Columns of S (and of y) evolve
 * independently, so a call may take a block of value columns j0 .. j1-1.
 */
#ifndef HEARTH_WKV_H
#define HEARTH_WKV_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

/* Log-decays below this are taken as this: exp(-200) is 0 in float, so
 * nothing changes but the cumulative sums stay finite (a decay of exactly
 * 0 has the log-decay -inf, whose differences would be NaN). */
#define WKV_LOG_DECAY_MIN (-200.0)

/* The chunk size unless the caller chooses, the most tokens of a chunk,
 * and the sub-chunk of the diagonal blocks.  Chunks of one token are the
 * token-by-token kernel run over each head's rows of the batch, which
 * measured faster than every chunk size of the chunked form
 * (BENCHMARKS.md), so it is the default. */
#define WKV_CHUNK_DEFAULT 1
#define WKV_CHUNK_MAX 4096
#define WKV_SUB 16

/* The largest head size (models/rwkv6.c refuses larger ones), and the
 * value columns the token-by-token kernel keeps in registers at once. */
#define WKV_HEAD_MAX 1024
#define WKV_TILE 64

/* One head of one sequence over n tokens.  Row t of r, k, v and lw is at
 * r + t * stride (each array its own stride); the head's N elements are
 * contiguous. */
struct wkv_head {
    int64_t n;            /* tokens */
    int32_t N;            /* head size */
    const float *r, *k, *v, *lw;
    int64_t r_stride, k_stride, v_stride, lw_stride;
    const float *u;       /* the bonus (RWKV-6), or NULL: gated linear attention */
    float scale;          /* GLA's output scale (unused for RWKV-6) */
    float *y;             /* out: row t at y + t * y_stride (columns j0 .. j1-1) */
    int64_t y_stride;
    float *S;             /* the N x N state, row-major, updated in place */
    int32_t j0, j1;       /* the value columns of this call */
};

/* Token by token, in float, as the reference engine does. */
typedef void (*wkv_recurrent_fn)(const struct wkv_head *h);
/* Chunks of C tokens (the last one ragged); scratch of
 * wkv_chunk_scratch_bytes(C, N) bytes, 64-byte aligned. */
typedef void (*wkv_chunked_fn)(const struct wkv_head *h, int32_t C, void *scratch);

/* The elementwise maps of the RWKV-6 layers, vectorized with the
 * recurrences: tanh x, 1 / (1 + e^-x), x / (1 + e^-x), -e^x (the log of
 * the decay e^{-e^x}) and max(x, 0)^2 (0 for NaN). */
enum wkv_map { WKV_MAP_TANH, WKV_MAP_SIGMOID, WKV_MAP_SILU, WKV_MAP_LOG_DECAY, WKV_MAP_RELU_SQR };
/* y[i] = f(x[i]) for i < n; y may be x. */
typedef void (*wkv_map_fn)(enum wkv_map kind, const float *x, float *y, int64_t n);

/* The token shift's interpolation: y[i] = a[i] + (p[i] - a[i]) * (mu[i] +
 * m[i]), or with mu[i] alone when m is NULL; y may be a. */
typedef void (*wkv_lerp_fn)(const float *a, const float *p, const float *mu, const float *m, float *y, int64_t n);

struct wkv_kernels {
    const char *name;
    wkv_recurrent_fn recurrent;
    wkv_chunked_fn chunked;
    wkv_map_fn map;
    wkv_lerp_fn lerp;
};

size_t wkv_chunk_scratch_bytes(int32_t C, int32_t N);

/* The kernels of the path whose matrix kernels are k (the scalar twin when
 * no vector path matches). */
const struct wkv_kernels *wkv_kernels_matching(const hearth_kernels *k);
const struct wkv_kernels *wkv_kernels_scalar(void);
const struct wkv_kernels *wkv_kernels_avx2(void);

/* Test-only: 1 drops the incoming-state term of every chunk, 2 lets each
 * token of a chunk read the next token (a mask off by one); 0 (always,
 * outside tests) computes the recurrence.  The tests set it to show that
 * they fail on either bug. */
extern int wkv_inject_bug;

#endif /* HEARTH_WKV_H */

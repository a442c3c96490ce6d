/*
 * attention.c -- the parts of attention shared by every path: the table of
 * each instruction set, starting softmax states and merging the partial
 * states of disjoint key ranges (attention.h gives the equations).
 */
#include "internal.h"

#include <math.h>

#include "attention.h"

const struct attn_kernels *attn_kernels_for_path(kernel_path path)
{
    if (!kernel_path_table(path, NULL)) return NULL;
    switch (path) {
    case KERNEL_PATH_SCALAR: return attn_kernels_scalar();
#ifdef HAVE_KERNELS_AVX2
    case KERNEL_PATH_AVX2: return attn_kernels_avx2();
#endif
#ifdef HAVE_KERNELS_AVX512
    /* The VNNI instructions have no use in float attention. */
    case KERNEL_PATH_AVX512:
    case KERNEL_PATH_AVX512VNNI: return attn_kernels_avx512();
#endif
#ifdef HAVE_KERNELS_NEON
    /* Nor the dot-product ones. */
    case KERNEL_PATH_NEON:
    case KERNEL_PATH_NEON_DOTPROD: return attn_kernels_neon();
#endif
    default: return attn_kernels_scalar();
    }
}

const struct attn_kernels *attn_kernels_matching(const hearth_kernels *k)
{
    for (int p = 0; p < KERNEL_PATH_COUNT; p++)
        if (kernel_path_table((kernel_path)p, NULL) == k) return attn_kernels_for_path((kernel_path)p);
    return attn_kernels_scalar();
}

void attn_state_init(int32_t n_rows, int32_t v_dim, float *max, float *sum, float *acc)
{
    for (int32_t r = 0; r < n_rows; r++) {
        max[r] = -INFINITY;
        sum[r] = 0.0f;
    }
    for (int64_t i = 0; i < (int64_t)n_rows * v_dim; i++) acc[i] = 0.0f;
}

void attn_merge(int32_t v_dim, int32_t n_parts, const float *max, const float *sum,
                size_t stride_ms, const float *acc, size_t stride_acc, float sink, float *out)
{
    float m = -INFINITY;
    for (int32_t p = 0; p < n_parts; p++)
        if (max[p * stride_ms] > m) m = max[p * stride_ms];
    float l = 0.0f;
    for (int32_t i = 0; i < v_dim; i++) out[i] = 0.0f;
    for (int32_t p = 0; p < n_parts; p++) {
        const float mp = max[p * stride_ms];
        if (mp == -INFINITY) continue; /* this range had no key for the row */
        const float alpha = expf(mp - m);
        l += alpha * sum[p * stride_ms];
        const float *a = acc + p * stride_acc;
        for (int32_t i = 0; i < v_dim; i++) out[i] += alpha * a[i];
    }
    if (sink > m) { /* the sink is the largest score: everything relative to it */
        const float alpha = expf(m - sink);
        l = l * alpha + 1.0f;
        for (int32_t i = 0; i < v_dim; i++) out[i] *= alpha;
    } else if (sink != -INFINITY) {
        l += expf(sink - m);
    }
    const float inv = 1.0f / l;
    for (int32_t i = 0; i < v_dim; i++) out[i] *= inv;
}

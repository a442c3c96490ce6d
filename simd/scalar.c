/*
 * scalar.c -- the scalar reference kernels: plain C, every type, the twin
 * that each SIMD kernel is tested against.
 */
#include "internal.h"

#include "kernels.h"
#include "quant.h"

/* ---- float weights: activations stay F32 ---------------------------------- */

static void act_f32(const float *x, void *y, int64_t n)
{
    float *out = y;
    for (int64_t i = 0; i < n; i++) out[i] = x[i];
}

static void vec_dot_f32(int64_t n, float *s, const void *w, const void *x)
{
    const float *a = w, *b = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += a[i] * b[i];
    *s = sum;
}

static void vec_dot_f16(int64_t n, float *s, const void *w, const void *x)
{
    const hearth_f16 *a = w;
    const float *b = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += hearth_f16_to_f32(a[i]) * b[i];
    *s = sum;
}

static void vec_dot_bf16(int64_t n, float *s, const void *w, const void *x)
{
    const hearth_bf16 *a = w;
    const float *b = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += hearth_bf16_to_f32(a[i]) * b[i];
    *s = sum;
}

static const hearth_kernels scalar_kernels = {
    .name = "scalar",
    .act_type = {
        [HEARTH_TYPE_F32] = HEARTH_TYPE_F32,
        [HEARTH_TYPE_F16] = HEARTH_TYPE_F32,
        [HEARTH_TYPE_BF16] = HEARTH_TYPE_F32,
    },
    .act_convert = {
        [HEARTH_TYPE_F32] = act_f32,
    },
    .vec_dot = {
        [HEARTH_TYPE_F32] = vec_dot_f32,
        [HEARTH_TYPE_F16] = vec_dot_f16,
        [HEARTH_TYPE_BF16] = vec_dot_bf16,
    },
};

const hearth_kernels *hearth_kernels_scalar(void)
{
    return &scalar_kernels;
}

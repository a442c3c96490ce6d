/*
 * attention_neon.c -- the attention block kernel (attention_vec.h) in
 * 4-lane Advanced SIMD vectors, for every AArch64 processor.  Attention is
 * float work, so the neon-dotprod path uses this table too.
 */
#include "internal.h"

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "attention.h"
#include "quant.h"

#define FORCE_INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

typedef float32x4_t vf;
#define VL 4
/* 4 x 4 score accumulators, 4 keys and a query slice: 21 of 32 registers;
 * values: 8 accumulators (16 would double the work of a group of 4 or 8
 * query heads, the usual size, since a ragged tile repeats its last row) */
#define SCORE_ROWS 4
#define SCORE_KEYS 4
#define VALUE_ROWS 8

FORCE_INLINE vf v_zero(void) { return vdupq_n_f32(0.0f); }
FORCE_INLINE vf v_set1(float x) { return vdupq_n_f32(x); }
FORCE_INLINE vf v_fma(vf a, vf b, vf c) { return vfmaq_f32(c, a, b); }
FORCE_INLINE vf v_mul(vf a, vf b) { return vmulq_f32(a, b); }
FORCE_INLINE vf v_add(vf a, vf b) { return vaddq_f32(a, b); }
FORCE_INLINE vf v_sub(vf a, vf b) { return vsubq_f32(a, b); }
FORCE_INLINE vf v_max(vf a, vf b) { return vmaxq_f32(a, b); }
FORCE_INLINE vf v_div(vf a, vf b) { return vdivq_f32(a, b); }
FORCE_INLINE vf v_loadf(const float *p) { return vld1q_f32(p); }
FORCE_INLINE void v_storef(float *p, vf x) { vst1q_f32(p, x); }
FORCE_INLINE float v_hsum(vf x) { return vaddvq_f32(x); }
FORCE_INLINE float v_hmax(vf x) { return vmaxvq_f32(x); }

FORCE_INLINE vf v_loadf_n(const float *p, int n)
{
    float buf[VL] = {0};
    memcpy(buf, p, (size_t)n * sizeof(float));
    return vld1q_f32(buf);
}

FORCE_INLINE void v_storef_n(float *p, vf x, int n)
{
    float buf[VL];
    vst1q_f32(buf, x);
    memcpy(p, buf, (size_t)n * sizeof(float));
}

FORCE_INLINE vf v_load_f16(const hearth_f16 *p)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

FORCE_INLINE vf v_load_f16_n(const hearth_f16 *p, int n)
{
    hearth_f16 buf[VL] = {0};
    memcpy(buf, p, (size_t)n * sizeof(hearth_f16));
    return v_load_f16(buf);
}

/* Four bytes only: a wider load at the end of a block would read past the
 * last entry of the cache. */
FORCE_INLINE vf v_load_i8(const int8_t *p)
{
    int32_t four;
    memcpy(&four, p, sizeof four);
    const int16x8_t h = vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(four)));
    return vcvtq_f32_s32(vmovl_s16(vget_low_s16(h)));
}

FORCE_INLINE float half_to_float(hearth_f16 h)
{
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

/* e^x = 2^n e^r with n = round(x / ln 2) and |r| <= ln(2) / 2, e^r from
 * the same degree-7 polynomial as the x86 paths; 2^n is built in the
 * exponent bits.  Inputs below -87.3 (where float underflows) give 0. */
FORCE_INLINE vf v_exp(vf x)
{
    const uint32x4_t under = vcltq_f32(x, vdupq_n_f32(-87.3f));
    x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-87.3f)), vdupq_n_f32(88.3f));
    const vf n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
    vf r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    vf p = vdupq_n_f32(1.9875691500e-4f);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    const uint32x4_t y = vreinterpretq_u32_f32(vmulq_f32(p, vreinterpretq_f32_s32(e)));
    return vreinterpretq_f32_u32(vbicq_u32(y, under));
}

#include "attention_vec.h"

static const struct attn_kernels neon_attn = {
    .name = "neon",
    .block = {
        [HEARTH_TYPE_F32] = attn_block_f32,
        [HEARTH_TYPE_F16] = attn_block_f16,
        [HEARTH_TYPE_Q8_0] = attn_block_q8_0,
    },
};

const struct attn_kernels *attn_kernels_neon(void)
{
    return &neon_attn;
}

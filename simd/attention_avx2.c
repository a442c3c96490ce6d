/*
 * attention_avx2.c -- the attention block kernel (attention_vec.h) in
 * 8-lane vectors, for processors with AVX2, FMA and F16C.
 */
#include "internal.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attention.h"
#include "quant.h"

#define FORCE_INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

typedef __m256 vf;
#define VL 8
/* 4 x 2 score accumulators, 2 keys and a query slice: 11 of 16 registers */
#define SCORE_ROWS 4
#define SCORE_KEYS 2
#define VALUE_ROWS 8

FORCE_INLINE vf v_zero(void) { return _mm256_setzero_ps(); }
FORCE_INLINE vf v_set1(float x) { return _mm256_set1_ps(x); }
FORCE_INLINE vf v_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
FORCE_INLINE vf v_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
FORCE_INLINE vf v_add(vf a, vf b) { return _mm256_add_ps(a, b); }
FORCE_INLINE vf v_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
FORCE_INLINE vf v_max(vf a, vf b) { return _mm256_max_ps(a, b); }
FORCE_INLINE vf v_div(vf a, vf b) { return _mm256_div_ps(a, b); }
FORCE_INLINE vf v_loadf(const float *p) { return _mm256_loadu_ps(p); }
FORCE_INLINE void v_storef(float *p, vf x) { _mm256_storeu_ps(p, x); }

FORCE_INLINE vf v_loadf_n(const float *p, int n)
{
    float buf[VL] = {0};
    memcpy(buf, p, (size_t)n * sizeof(float));
    return _mm256_loadu_ps(buf);
}

FORCE_INLINE void v_storef_n(float *p, vf x, int n)
{
    float buf[VL];
    _mm256_storeu_ps(buf, x);
    memcpy(p, buf, (size_t)n * sizeof(float));
}

FORCE_INLINE vf v_load_f16(const hearth_f16 *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

FORCE_INLINE vf v_load_f16_n(const hearth_f16 *p, int n)
{
    hearth_f16 buf[VL] = {0};
    memcpy(buf, p, (size_t)n * sizeof(hearth_f16));
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)buf));
}

FORCE_INLINE vf v_load_i8(const int8_t *p)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}

FORCE_INLINE float half_to_float(hearth_f16 h) { return _cvtsh_ss(h); }

FORCE_INLINE float v_hsum(vf x)
{
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

FORCE_INLINE float v_hmax(vf x)
{
    const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    return _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)));
}

/* e^x = 2^n e^r with n = round(x / ln 2) and |r| <= ln(2) / 2, e^r from
 * its degree-7 Taylor-like polynomial (the minimax coefficients of the
 * classic single-precision exp); 2^n is built in the exponent bits. */
FORCE_INLINE vf v_exp(vf x)
{
    const vf under = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
    const vf n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    vf r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    vf p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

#include "attention_vec.h"

static const struct attn_kernels avx2_attn = {
    .name = "avx2",
    .block = {
        [HEARTH_TYPE_F32] = attn_block_f32,
        [HEARTH_TYPE_F16] = attn_block_f16,
        [HEARTH_TYPE_Q8_0] = attn_block_q8_0,
    },
};

const struct attn_kernels *attn_kernels_avx2(void)
{
    return &avx2_attn;
}

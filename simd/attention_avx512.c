/*
 * attention_avx512.c -- the attention block kernel (attention_vec.h) in
 * 16-lane vectors, for processors with AVX-512 F, BW and VL; ragged head
 * slices are loaded and stored under a mask.
 */
#include "internal.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attention.h"
#include "quant.h"

#define FORCE_INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

typedef __m512 vf;
#define VL 16
/* 8 x 2 score accumulators: every key slice is converted once for a
 * group of 8 query heads; 26 of 32 registers */
#define SCORE_ROWS 8
#define SCORE_KEYS 2
#define VALUE_ROWS 8

FORCE_INLINE vf v_zero(void) { return _mm512_setzero_ps(); }
FORCE_INLINE vf v_set1(float x) { return _mm512_set1_ps(x); }
FORCE_INLINE vf v_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
FORCE_INLINE vf v_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
FORCE_INLINE vf v_add(vf a, vf b) { return _mm512_add_ps(a, b); }
FORCE_INLINE vf v_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
FORCE_INLINE vf v_max(vf a, vf b) { return _mm512_max_ps(a, b); }
FORCE_INLINE vf v_div(vf a, vf b) { return _mm512_div_ps(a, b); }
FORCE_INLINE vf v_loadf(const float *p) { return _mm512_loadu_ps(p); }
FORCE_INLINE void v_storef(float *p, vf x) { _mm512_storeu_ps(p, x); }

FORCE_INLINE __mmask16 first_n(int n)
{
    return (__mmask16)((1u << n) - 1u);
}

FORCE_INLINE vf v_loadf_n(const float *p, int n) { return _mm512_maskz_loadu_ps(first_n(n), p); }
FORCE_INLINE void v_storef_n(float *p, vf x, int n) { _mm512_mask_storeu_ps(p, first_n(n), x); }

FORCE_INLINE vf v_load_f16(const hearth_f16 *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

FORCE_INLINE vf v_load_f16_n(const hearth_f16 *p, int n)
{
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(first_n(n), p));
}

FORCE_INLINE vf v_load_i8(const int8_t *p)
{
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}

FORCE_INLINE float half_to_float(hearth_f16 h) { return _cvtsh_ss(h); }

FORCE_INLINE float v_hsum(vf x)
{
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(x),
                                    _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

FORCE_INLINE float v_hmax(vf x)
{
    return _mm512_reduce_max_ps(x);
}

/* e^x as in attention_avx2.c, 16 lanes; 2^n applied with vscalefps. */
FORCE_INLINE vf v_exp(vf x)
{
    const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_GE_OQ);
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.3f));
    const vf n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    vf r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    vf p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_maskz_scalef_ps(keep, p, n);
}

#include "attention_vec.h"

static const struct attn_kernels avx512_attn = {
    .name = "avx512",
    .block = {
        [HEARTH_TYPE_F32] = attn_block_f32,
        [HEARTH_TYPE_F16] = attn_block_f16,
        [HEARTH_TYPE_Q8_0] = attn_block_q8_0,
    },
};

const struct attn_kernels *attn_kernels_avx512(void)
{
    return &avx512_attn;
}

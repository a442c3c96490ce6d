/*
 * avx2.c -- the kernels for x86-64 processors with AVX2, FMA and F16C.
 *
 * Compiled with -mavx2 -mfma -mf16c and used only when dispatch.c has
 * found those extensions (and the operating system's support for the
 * 256-bit registers).  The integer formats come from x86_int.h; the float
 * types are here: one 8-lane accumulator per dot product, elements i going
 * to lane i % 8, so that a tile and vec_dot add in the same order.
 */
#include "internal.h"

#include <immintrin.h>
#include <string.h>

#include "kernels.h"
#include "quant.h"

#define DOT_U8S8(acc, u, s) \
    _mm256_add_epi32((acc), _mm256_madd_epi16(_mm256_maddubs_epi16((u), (s)), _mm256_set1_epi16(1)))
#define DOT_S16(acc, a, b) _mm256_add_epi32((acc), _mm256_madd_epi16((a), (b)))
#define HAVE_DPBUSD 0
/* 16 vector registers: 4 x 3 tiles leave room for the unpacked rows. */
#define INT_TILE_ROWS 4
#define INT_TILE_TOKS 3
#define PACKED_TILE_TOKS 2
#include "x86_int.h"

/* ---- float weights ------------------------------------------------------------- */

#define FLOAT_TILE_ROWS 4
#define FLOAT_TILE_TOKS 3

/* Eight weights from element i on, as floats. */
FORCE_INLINE __m256 load_weights8(enum float_format f, const uint8_t *row, int64_t i)
{
    switch (f) {
    case FLOAT_F32: return _mm256_loadu_ps((const float *)row + i);
    case FLOAT_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const hearth_f16 *)row + i)));
    default: {
        const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const hearth_bf16 *)row + i)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
    }
    }
}

/* The last n - i (< 8) weights, zero-padded. */
FORCE_INLINE __m256 load_weights_tail(enum float_format f, const uint8_t *row, int64_t i, int64_t n)
{
    float buf[8] = {0};
    for (int64_t j = i; j < n; j++) {
        switch (f) {
        case FLOAT_F32: buf[j - i] = ((const float *)row)[j]; break;
        case FLOAT_F16: buf[j - i] = hearth_f16_to_f32(((const hearth_f16 *)row)[j]); break;
        default: buf[j - i] = hearth_bf16_to_f32(((const hearth_bf16 *)row)[j]); break;
        }
    }
    return _mm256_loadu_ps(buf);
}

FORCE_INLINE __m256 load_floats_tail(const float *x, int64_t i, int64_t n)
{
    float buf[8] = {0};
    memcpy(buf, x + i, (size_t)(n - i) * sizeof(float));
    return _mm256_loadu_ps(buf);
}

typedef __m256 fvec;
#define FVEC_LANES 8
#define FLOAT_TILE_PREFETCH 1
#ifndef FLOAT_PACKED_PREFETCH /* (0 from the build's flags, to measure without) */
#define FLOAT_PACKED_PREFETCH 1
#endif
FORCE_INLINE fvec fvec_zero(void) { return _mm256_setzero_ps(); }
FORCE_INLINE fvec fvec_load(const float *p) { return _mm256_loadu_ps(p); }
FORCE_INLINE fvec fvec_fma(fvec acc, fvec w, fvec x) { return _mm256_fmadd_ps(w, x, acc); }
FORCE_INLINE float fvec_total(fvec v) { return lanes_total(v); }
#define load_weights load_weights8
#include "float_tiles_impl.h"

static const hearth_kernels avx2_kernels = {
    .name = "avx2",
    VECTOR_KERNEL_ENTRIES,
    .gemm_packed = {INT_KERNEL_PACKED_TABLE, FLOAT_KERNEL_PACKED_TABLE},
};

const hearth_kernels *hearth_kernels_avx2(void)
{
    return &avx2_kernels;
}

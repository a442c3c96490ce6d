/*
 * avx512.c -- the kernels for x86-64 processors with AVX-512 F, BW and VL
 * (on top of AVX2, FMA and F16C).
 *
 * This file is compiled twice: as the "avx512" path, and with
 * -mavx512vnni and KERNELS_VNNI defined as the "avx512vnni" path, whose
 * byte and word dot products (vpdpbusd, vpdpwssd) replace the
 * multiply-add pairs of AVX2.  dispatch.c picks the one the CPU runs.
 *
 * The integer formats (x86_int.h) keep to 256-bit vectors: they gain the
 * 32 registers of AVX-512 (larger tiles) and VNNI, while 512-bit integer
 * work would only split into halves on processors that execute it at
 * 256-bit width, and would need a second layout of the summation order.
 * One exception, on the VNNI path: products of several tokens with packed
 * weights (Q4_0, Q5_0, Q8_0, MXFP4 and the K-quants Q2_K to Q6_K) take two
 * row groups per 512-bit register (each half is the 256-bit tile's
 * register, so the order is the same), which halves the instructions each
 * token costs; the eight-row tiles were bound by issue, not by the dot
 * products (x86_int.h, packed_pair_tile and the K-quant pair tiles).
 * The float types use 512-bit vectors: one 16-lane accumulator per dot
 * product, elements i going to lane i % 16, tails loaded under a mask.
 */
#include "internal.h"

#include <immintrin.h>
#include <string.h>

#include "kernels.h"
#include "quant.h"

#ifdef KERNELS_VNNI
#define DOT_U8S8(acc, u, s) _mm256_dpbusd_epi32((acc), (u), (s))
#define DOT_S16(acc, a, b) _mm256_dpwssd_epi32((acc), (a), (b))
#define HAVE_DPBUSD 1
#define PACKED_PAIR_TILE 1
#define PACKED_PAIR_TOKS 8
#define PATH_NAME "avx512vnni"
#define PATH_TABLE hearth_kernels_avx512vnni
#else
#define DOT_U8S8(acc, u, s) \
    _mm256_add_epi32((acc), _mm256_madd_epi16(_mm256_maddubs_epi16((u), (s)), _mm256_set1_epi16(1)))
#define DOT_S16(acc, a, b) _mm256_add_epi32((acc), _mm256_madd_epi16((a), (b)))
#define HAVE_DPBUSD 0
#define PATH_NAME "avx512"
#define PATH_TABLE hearth_kernels_avx512
#endif
#define INT_TILE_ROWS 4
#define INT_TILE_TOKS 4
#define PACKED_TILE_TOKS 4
#include "x86_int.h"

/* ---- float weights ------------------------------------------------------------- */

#define FLOAT_TILE_ROWS 4
#define FLOAT_TILE_TOKS 4

/* Sixteen weights from element i on (those under mask; zero elsewhere). */
FORCE_INLINE __m512 load_weights16(enum float_format f, const uint8_t *row, int64_t i, __mmask16 mask)
{
    switch (f) {
    case FLOAT_F32: return _mm512_maskz_loadu_ps(mask, (const float *)row + i);
    case FLOAT_F16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, (const hearth_f16 *)row + i));
    default: {
        const __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, (const hearth_bf16 *)row + i));
        return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
    }
    }
}

/* 16 lanes: the two halves added, then the 8-lane tree of x86_int.h. */
FORCE_INLINE float lanes16_total(__m512 v)
{
    return lanes_total(_mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

/* The last n - i (< 16) of them: masked loads, zero elsewhere. */
FORCE_INLINE __mmask16 tail_mask(int64_t i, int64_t n)
{
    return (__mmask16)((1u << (n - i)) - 1);
}

typedef __m512 fvec;
#define FVEC_LANES 16
#define FLOAT_TILE_PREFETCH 1
#ifndef FLOAT_PACKED_PREFETCH /* (0 from the build's flags, to measure without) */
#define FLOAT_PACKED_PREFETCH 1
#endif
FORCE_INLINE fvec fvec_zero(void) { return _mm512_setzero_ps(); }
FORCE_INLINE fvec fvec_load(const float *p) { return _mm512_loadu_ps(p); }
FORCE_INLINE fvec fvec_fma(fvec acc, fvec w, fvec x) { return _mm512_fmadd_ps(w, x, acc); }
FORCE_INLINE float fvec_total(fvec v) { return lanes16_total(v); }
FORCE_INLINE fvec load_weights(enum float_format f, const uint8_t *row, int64_t i)
{
    return load_weights16(f, row, i, (__mmask16)0xffff);
}
FORCE_INLINE fvec load_weights_tail(enum float_format f, const uint8_t *row, int64_t i, int64_t n)
{
    return load_weights16(f, row, i, tail_mask(i, n));
}
FORCE_INLINE fvec load_floats_tail(const float *x, int64_t i, int64_t n)
{
    return _mm512_maskz_loadu_ps(tail_mask(i, n), x + i);
}
#include "float_tiles_impl.h"

static const hearth_kernels avx512_kernels = {
    .name = PATH_NAME,
    VECTOR_KERNEL_ENTRIES,
    .gemm_packed = {INT_KERNEL_PACKED_TABLE, FLOAT_KERNEL_PACKED_TABLE},
};

const hearth_kernels *PATH_TABLE(void)
{
    return &avx512_kernels;
}

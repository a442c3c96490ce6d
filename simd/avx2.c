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

FORCE_INLINE void float_tile(enum float_format f, const int TR, const int TT, int64_t n, const uint8_t *w,
                             size_t w_stride, const uint8_t *x, size_t x_stride, float *out,
                             int64_t out_stride)
{
    __m256 acc[FLOAT_TILE_ROWS][FLOAT_TILE_TOKS];
    UNROLL
    for (int r = 0; r < TR; r++)
        UNROLL
        for (int t = 0; t < TT; t++) acc[r][t] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 xv[FLOAT_TILE_TOKS];
        UNROLL
        for (int t = 0; t < TT; t++) xv[t] = _mm256_loadu_ps((const float *)(x + (size_t)t * x_stride) + i);
        UNROLL
        for (int r = 0; r < TR; r++) {
            const uint8_t *row = w + (size_t)r * w_stride;
            const __m256 wv = load_weights8(f, row, i);
            UNROLL
            for (int t = 0; t < TT; t++) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
            /* once per cache line, the next tile's rows (see avx512.c) */
            const size_t off = (size_t)i * float_bytes(f);
            if (TT < FLOAT_TILE_TOKS && off % 64 == 0) prefetch_next_rows(row + off, w_stride, TR);
        }
    }
    if (i < n) {
        __m256 xv[FLOAT_TILE_TOKS];
        UNROLL
        for (int t = 0; t < TT; t++) xv[t] = load_floats_tail((const float *)(x + (size_t)t * x_stride), i, n);
        UNROLL
        for (int r = 0; r < TR; r++) {
            const __m256 wv = load_weights_tail(f, w + (size_t)r * w_stride, i, n);
            UNROLL
            for (int t = 0; t < TT; t++) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
        }
    }
    UNROLL
    for (int t = 0; t < TT; t++)
        UNROLL
        for (int r = 0; r < TR; r++) out[t * out_stride + r] = lanes_total(acc[r][t]);
}

#define DEFINE_FLOAT_GEMM(name, fmt) \
    DEFINE_TILED_GEMM(name, float_tile, fmt, FLOAT_TILE_ROWS, FLOAT_TILE_TOKS, 1)

DEFINE_FLOAT_GEMM(f32, FLOAT_F32)
DEFINE_FLOAT_GEMM(f16, FLOAT_F16)
DEFINE_FLOAT_GEMM(bf16, FLOAT_BF16)

static const hearth_kernels avx2_kernels = {
    .name = "avx2",
    VECTOR_KERNEL_ENTRIES,
    .gemm_packed = {INT_KERNEL_PACKED_TABLE},
};

const hearth_kernels *hearth_kernels_avx2(void)
{
    return &avx2_kernels;
}

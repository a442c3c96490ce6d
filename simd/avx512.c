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
 * Q4_0 and Q8_0 take two row groups per 512-bit register (each half is
 * the 256-bit tile's register, so the order is the same), which halves
 * the instructions each token costs; that tile was bound by issue, not
 * by the dot products (x86_int.h, packed_pair_tile).
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

FORCE_INLINE void float_tile(enum float_format f, const int TR, const int TT, int64_t n, const uint8_t *w,
                             size_t w_stride, const uint8_t *x, size_t x_stride, float *out,
                             int64_t out_stride)
{
    __m512 acc[FLOAT_TILE_ROWS][FLOAT_TILE_TOKS];
    UNROLL
    for (int r = 0; r < TR; r++)
        UNROLL
        for (int t = 0; t < TT; t++) acc[r][t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 mask = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 xv[FLOAT_TILE_TOKS];
        UNROLL
        for (int t = 0; t < TT; t++) xv[t] = _mm512_maskz_loadu_ps(mask, (const float *)(x + (size_t)t * x_stride) + i);
        UNROLL
        for (int r = 0; r < TR; r++) {
            const uint8_t *row = w + (size_t)r * w_stride;
            const __m512 wv = load_weights16(f, row, i, mask);
            UNROLL
            for (int t = 0; t < TT; t++) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
            /* Once per cache line, the next tile's rows at this place, as
             * the integer row kernels do: one thread's decode of F16 rows
             * streamed at 16-17 GB/s without it and 17-21 with it
             * (tools/kbench, membw 28 GB/s), and the RWKV-6 1.6B F16
             * decode went from 4.8-5.3 to 6.1-6.8 tokens/s on one thread
             * and from 7.3-7.6 to 9.2-9.9 on two (BENCHMARKS.md).  Only in
             * the narrow tiles (a few tokens, whose rows are read once):
             * a prefill's full tiles read their rows again for every tile
             * of tokens, from the cache, and lost 5% to the extra
             * instructions. */
            const size_t off = (size_t)i * float_bytes(f);
            if (TT < FLOAT_TILE_TOKS && off % 64 == 0) prefetch_next_rows(row + off, w_stride, TR);
        }
    }
    UNROLL
    for (int t = 0; t < TT; t++)
        UNROLL
        for (int r = 0; r < TR; r++) out[t * out_stride + r] = lanes16_total(acc[r][t]);
}

#define DEFINE_FLOAT_GEMM(name, fmt) \
    DEFINE_TILED_GEMM(name, float_tile, fmt, FLOAT_TILE_ROWS, FLOAT_TILE_TOKS, 1)

DEFINE_FLOAT_GEMM(f32, FLOAT_F32)
DEFINE_FLOAT_GEMM(f16, FLOAT_F16)
DEFINE_FLOAT_GEMM(bf16, FLOAT_BF16)

static const hearth_kernels avx512_kernels = {
    .name = PATH_NAME,
    VECTOR_KERNEL_ENTRIES,
    .gemm_packed = {INT_KERNEL_PACKED_TABLE},
};

const hearth_kernels *PATH_TABLE(void)
{
    return &avx512_kernels;
}

/*
 * neon.c -- the kernels for 64-bit Arm processors: Advanced SIMD ("NEON"),
 * which every AArch64 processor has.
 *
 * This file is compiled twice: as the "neon" path with the compiler's
 * baseline flags, and with -march=armv8.2-a+dotprod and KERNELS_DOTPROD
 * defined as the "neon-dotprod" path, whose SDOT instruction forms a
 * 32-bit lane's four byte products in one step.  dispatch.c picks the one
 * the CPU runs (cpu.c reads the dot-product extension from the hardware
 * capabilities the kernel reports).
 *
 * The integer formats follow the summation order of kernels.h exactly, in
 * 128-bit halves: the eight lanes of a block are two vectors of four 32-bit
 * lanes, lane k of the first holding the products of elements
 * 32c + 4k .. 32c + 4k + 3 (the first 16 elements of each 32-element
 * chunk), lane k of the second those of elements 32c + 16 + 4k ...  Each
 * lane's integer sum is exact however it is formed (SDOT, or widening
 * multiplies and pairwise additions); the float work is one fused
 * multiply-add per lane per block and term, then kernels.h's tree.  The
 * results are therefore bit-identical to the scalar kernels on both paths.
 *
 * The float types keep two 4-lane accumulators per dot product, element i
 * going to lane i % 8 (as on AVX2), and are totalled by the same tree.
 *
 * A tile computes TR weight rows times TT tokens from registers (32 of
 * them: a row-token pair needs two for its running sums), unpacking each
 * row's quants once per block for all the tile's tokens.
 */
#include "internal.h"

#include <arm_neon.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "quant.h"
#include "tiles.h"

#ifdef KERNELS_DOTPROD
#define PATH_NAME "neon-dotprod"
#define PATH_TABLE hearth_kernels_neon_dotprod
#else
#define PATH_NAME "neon"
#define PATH_TABLE hearth_kernels_neon
#endif

/* Tiles: rows x tokens.  4 x 2 pairs keep 16 registers of running sums
 * and leave 16 for the unpacked rows and a token's activations. */
#define FLOAT_TILE_ROWS 4
#define FLOAT_TILE_TOKS 2
#define INT_TILE_ROWS 4
#define INT_TILE_TOKS 2

/* Eight lanes: elements (or lanes) 0-3 and 4-7. */
typedef struct {
    float32x4_t lo, hi;
} f32x8;
typedef struct {
    int32x4_t lo, hi;
} i32x8;

FORCE_INLINE f32x8 f32x8_zero(void)
{
    return (f32x8){vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
}

FORCE_INLINE f32x8 f32x8_from_lanes(i32x8 v)
{
    return (f32x8){vcvtq_f32_s32(v.lo), vcvtq_f32_s32(v.hi)};
}

/* run + scale * v per lane, one rounding (the fmaf of scalar.c). */
FORCE_INLINE f32x8 f32x8_fma(f32x8 run, f32x8 v, float scale)
{
    return (f32x8){vfmaq_n_f32(run.lo, v.lo, scale), vfmaq_n_f32(run.hi, v.hi, scale)};
}

/* ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7)), as kernels.h defines. */
FORCE_INLINE float lanes_total(f32x8 run)
{
    const float32x4_t s4 = vaddq_f32(run.lo, run.hi);
    const float32x2_t s2 = vadd_f32(vget_low_f32(s4), vget_high_f32(s4));
    return vget_lane_f32(vpadd_f32(s2, s2), 0);
}

FORCE_INLINE float half_to_float(hearth_f16 h)
{
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

/* Rows are short streams (a few KB): to hide the start of each new one,
 * a tile fetches the rows of the next tile at the place it is reading.
 * Past the last row that address lies outside the weights, which a
 * prefetch may touch harmlessly; it is formed as an integer because
 * pointer arithmetic may not leave the array. */
FORCE_INLINE void prefetch_next_rows(const uint8_t *p, size_t w_stride, int rows)
{
    __builtin_prefetch((const void *)((uintptr_t)p + (size_t)rows * w_stride));
}

/* ==========================================================================
 * Integer dot products of 16 bytes
 * ========================================================================== */

/* Per 32-bit lane, the sum of the four products of the signed bytes of a
 * and b at its positions, for any bytes.  Without SDOT the products are
 * widened to 16 bits (|a b| <= 2^14 fits) and added pairwise twice. */
FORCE_INLINE int32x4_t dot_lanes(int8x16_t a, int8x16_t b)
{
#ifdef KERNELS_DOTPROD
    return vdotq_s32(vdupq_n_s32(0), a, b);
#else
    const int16x8_t p0 = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    const int16x8_t p1 = vmull_high_s8(a, b);
    return vpaddq_s32(vpaddlq_s16(p0), vpaddlq_s16(p1));
#endif
}

/* The same for |a| < 64: then two products add up within 16 bits, which
 * saves a widening step without SDOT. */
FORCE_INLINE int32x4_t dot_lanes_small(int8x16_t a, int8x16_t b)
{
#ifdef KERNELS_DOTPROD
    return vdotq_s32(vdupq_n_s32(0), a, b);
#else
    const int16x8_t p0 = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    const int16x8_t p1 = vmull_high_s8(a, b);
    return vpaddlq_s16(vpaddq_s16(p0, p1));
#endif
}

/* Per 32-bit lane, the sum of its four signed bytes. */
FORCE_INLINE int32x4_t byte_lane_sums(int8x16_t y)
{
#ifdef KERNELS_DOTPROD
    return vdotq_s32(vdupq_n_s32(0), vdupq_n_s8(1), y);
#else
    return vpaddlq_s16(vpaddlq_s8(y));
#endif
}

/* acc plus the lanes of one 32-element chunk of quants q (unsigned, below
 * 64) times activations y, weighted by the integer scales of its halves:
 * sc_lo for elements 0-15 (lanes 0-3), sc_hi for 16-31 (lanes 4-7).
 * Without SDOT the four-product sums (at most 4 * 63 * 128) stay in 16
 * bits until the widening multiply by the scale. */
FORCE_INLINE i32x8 chunk_lanes_add(i32x8 acc, const int8x16_t q[2], const int8x16_t y[2], int16_t sc_lo,
                                   int16_t sc_hi)
{
#ifdef KERNELS_DOTPROD
    acc.lo = vmlaq_n_s32(acc.lo, vdotq_s32(vdupq_n_s32(0), q[0], y[0]), sc_lo);
    acc.hi = vmlaq_n_s32(acc.hi, vdotq_s32(vdupq_n_s32(0), q[1], y[1]), sc_hi);
#else
    const int16x8_t p0 = vpaddq_s16(vmull_s8(vget_low_s8(q[0]), vget_low_s8(y[0])), vmull_high_s8(q[0], y[0]));
    const int16x8_t p1 = vpaddq_s16(vmull_s8(vget_low_s8(q[1]), vget_low_s8(y[1])), vmull_high_s8(q[1], y[1]));
    const int16x8_t sums = vpaddq_s16(p0, p1); /* lanes 0-7 */
    acc.lo = vmlal_n_s16(acc.lo, vget_low_s16(sums), sc_lo);
    acc.hi = vmlal_high_n_s16(acc.hi, sums, sc_hi);
#endif
    return acc;
}

/* ==========================================================================
 * Activation conversions: the bytes of the reference quantizers in quant.c
 * ========================================================================== */

/* Largest |x| of n (a multiple of 16) floats; NaN when any is NaN, since
 * FMAX and FMAXV propagate NaN. */
FORCE_INLINE float absmax(const float *x, int n)
{
    float32x4_t m0 = vdupq_n_f32(0.0f), m1 = m0, m2 = m0, m3 = m0;
    for (int j = 0; j < n; j += 16) {
        m0 = vmaxq_f32(m0, vabsq_f32(vld1q_f32(x + j)));
        m1 = vmaxq_f32(m1, vabsq_f32(vld1q_f32(x + j + 4)));
        m2 = vmaxq_f32(m2, vabsq_f32(vld1q_f32(x + j + 8)));
        m3 = vmaxq_f32(m3, vabsq_f32(vld1q_f32(x + j + 12)));
    }
    return vmaxvq_f32(vmaxq_f32(vmaxq_f32(m0, m1), vmaxq_f32(m2, m3)));
}

/* 16 floats from x as quants: for Q8_K first scaled by the powers of two
 * f1 and f2 (exact, in that order, as quant.c normalises a block), then
 * times inv, clamped to +-127 and rounded by the format's rule (Q8_0:
 * halves away from zero, as roundf; Q8_K: halves to even). */
FORCE_INLINE int8x16_t quantize16(const float *x, bool q8k, float f1, float f2, float inv)
{
    const float32x4_t lo = vdupq_n_f32(-127.0f), hi = vdupq_n_f32(127.0f);
    int32x4_t q[4];
    UNROLL
    for (int j = 0; j < 4; j++) {
        float32x4_t v = vld1q_f32(x + 4 * j);
        if (q8k) v = vmulq_n_f32(vmulq_n_f32(v, f1), f2);
        const float32x4_t s = vminq_f32(vmaxq_f32(vmulq_n_f32(v, inv), lo), hi);
        q[j] = q8k ? vcvtnq_s32_f32(s) : vcvtaq_s32_f32(s);
    }
    const int16x8_t h0 = vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1]));
    const int16x8_t h1 = vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]));
    return vcombine_s8(vmovn_s16(h0), vmovn_s16(h1));
}

/* One 32-element block by the Q8_0 rule of quant.c's q8_block(): the half
 * d, the quants (roundf: halves away from zero), and their sum. */
FORCE_INLINE hearth_f16 q8_block_neon(const float *x, int8_t qs[32], int *sum_out)
{
    const float m = absmax(x, 32);
    memset(qs, 0, 32);
    *sum_out = 0;
    if (!(m <= FLT_MAX)) return 0x7e00; /* NaN or infinity: a poisoned block */
    const float d = m / 127.0f;
    hearth_f16 dh = hearth_f32_to_f16(d);
    float inv = d > 0.0f ? 1.0f / d : 0.0f;
    if ((dh & 0x7fff) == 0x7c00) { /* d overflows a half: saturate */
        dh = hearth_f32_to_f16(65504.0f);
        inv = 1.0f / 65504.0f;
    }
    if (isinf(inv)) return dh;
    const int8x16_t q0 = quantize16(x, false, 1.0f, 1.0f, inv), q1 = quantize16(x + 16, false, 1.0f, 1.0f, inv);
    vst1q_s8(qs, q0);
    vst1q_s8(qs + 16, q1);
    *sum_out = vaddlvq_s8(q0) + vaddlvq_s8(q1);
    return dh;
}

DEFINE_ACT_Q8_LEGACY(q8_block_neon)

/* Q8_K, as quant.c's q8k_quantize_row: the block is scaled by 2^-e
 * (exactly) so that its largest magnitude lies in [0.5, 1), d = max / 127
 * there, and the quants round halves to even.  Blocks whose scale is
 * extreme enough for that function's special cases (zero, non-finite,
 * near the float range's ends) are handed to it. */
static void act_q8_k(const float *x, void *y, int64_t n)
{
    block_q8_K *out = y;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        const float m = absmax(x, QK_K);
        if (!(m >= 0x1p-100f && m <= 0x1p100f)) {
            q8k_quantize_row(x, &out[b], QK_K);
            continue;
        }
        int e;
        (void)frexpf(m, &e);
        const float f1 = ldexpf(1.0f, -e / 2), f2 = ldexpf(1.0f, -e - (-e / 2));
        const float d = m * f1 * f2 / 127.0f; /* the normalised scale, a normal float */
        out[b].d = ldexpf(d, e);
        const float inv = 1.0f / d;
        for (int g = 0; g < QK_K / 16; g++) {
            const int8x16_t q = quantize16(x + 16 * g, true, f1, f2, inv);
            vst1q_s8(out[b].qs + 16 * g, q);
            out[b].bsums[g] = vaddlvq_s8(q);
        }
    }
}

/* ==========================================================================
 * Float weights (activations stay F32)
 * ========================================================================== */

/* Eight weights from element i on, as floats: halves by the conversion
 * instructions (exact), bfloat16 as the top half of a float. */
FORCE_INLINE f32x8 load_weights8(enum float_format f, const uint8_t *row, int64_t i)
{
    const uint8_t *p = row + (size_t)i * float_bytes(f);
    switch (f) {
    case FLOAT_F32: return (f32x8){vld1q_f32((const float *)p), vld1q_f32((const float *)p + 4)};
    case FLOAT_F16: {
        const float16x8_t h = vreinterpretq_f16_u8(vld1q_u8(p));
        return (f32x8){vcvt_f32_f16(vget_low_f16(h)), vcvt_high_f32_f16(h)};
    }
    default: {
        const uint16x8_t h = vreinterpretq_u16_u8(vld1q_u8(p));
        return (f32x8){vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)),
                       vreinterpretq_f32_u32(vshll_high_n_u16(h, 16))};
    }
    }
}

/* The last n - i (< 8) weights, zero-padded. */
FORCE_INLINE f32x8 load_weights_tail(enum float_format f, const uint8_t *row, int64_t i, int64_t n)
{
    float buf[8] = {0};
    for (int64_t j = i; j < n; j++) {
        switch (f) {
        case FLOAT_F32: memcpy(&buf[j - i], row + 4 * (size_t)j, sizeof(float)); break;
        case FLOAT_F16: {
            hearth_f16 h;
            memcpy(&h, row + 2 * (size_t)j, 2);
            buf[j - i] = hearth_f16_to_f32(h);
            break;
        }
        default: {
            hearth_bf16 h;
            memcpy(&h, row + 2 * (size_t)j, 2);
            buf[j - i] = hearth_bf16_to_f32(h);
            break;
        }
        }
    }
    return (f32x8){vld1q_f32(buf), vld1q_f32(buf + 4)};
}

FORCE_INLINE f32x8 load_floats_tail(const float *x, int64_t i, int64_t n)
{
    float buf[8] = {0};
    memcpy(buf, x + i, (size_t)(n - i) * sizeof(float));
    return (f32x8){vld1q_f32(buf), vld1q_f32(buf + 4)};
}

FORCE_INLINE f32x8 f32x8_fma_vec(f32x8 acc, f32x8 a, f32x8 b)
{
    return (f32x8){vfmaq_f32(acc.lo, a.lo, b.lo), vfmaq_f32(acc.hi, a.hi, b.hi)};
}

FORCE_INLINE void float_tile(enum float_format f, const int TR, const int TT, int64_t n, const uint8_t *w,
                             size_t w_stride, const uint8_t *x, size_t x_stride, float *out,
                             int64_t out_stride)
{
    f32x8 acc[FLOAT_TILE_ROWS][FLOAT_TILE_TOKS];
    UNROLL
    for (int r = 0; r < TR; r++)
        UNROLL
        for (int t = 0; t < TT; t++) acc[r][t] = f32x8_zero();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        f32x8 xv[FLOAT_TILE_TOKS];
        UNROLL
        for (int t = 0; t < TT; t++) {
            const float *xt = (const float *)(x + (size_t)t * x_stride) + i;
            xv[t] = (f32x8){vld1q_f32(xt), vld1q_f32(xt + 4)};
        }
        UNROLL
        for (int r = 0; r < TR; r++) {
            const f32x8 wv = load_weights8(f, w + (size_t)r * w_stride, i);
            UNROLL
            for (int t = 0; t < TT; t++) acc[r][t] = f32x8_fma_vec(acc[r][t], wv, xv[t]);
        }
    }
    if (i < n) {
        f32x8 xv[FLOAT_TILE_TOKS];
        UNROLL
        for (int t = 0; t < TT; t++) xv[t] = load_floats_tail((const float *)(x + (size_t)t * x_stride), i, n);
        UNROLL
        for (int r = 0; r < TR; r++) {
            const f32x8 wv = load_weights_tail(f, w + (size_t)r * w_stride, i, n);
            UNROLL
            for (int t = 0; t < TT; t++) acc[r][t] = f32x8_fma_vec(acc[r][t], wv, xv[t]);
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

/* ==========================================================================
 * Legacy formats: 32-element blocks times Q8_0 / Q8_1
 * ========================================================================== */

enum legacy_format { LEGACY_Q4_0, LEGACY_Q4_1, LEGACY_Q5_0, LEGACY_Q5_1, LEGACY_Q8_0 };

FORCE_INLINE size_t legacy_block_bytes(enum legacy_format f)
{
    switch (f) {
    case LEGACY_Q4_0: return sizeof(block_q4_0);
    case LEGACY_Q4_1: return sizeof(block_q4_1);
    case LEGACY_Q5_0: return sizeof(block_q5_0);
    case LEGACY_Q5_1: return sizeof(block_q5_1);
    default: return sizeof(block_q8_0);
    }
}

FORCE_INLINE bool legacy_affine(enum legacy_format f)
{
    return f == LEGACY_Q4_1 || f == LEGACY_Q5_1;
}

/* 16 bytes of nibbles: the low nibbles are elements 0-15, the high ones
 * 16-31. */
FORCE_INLINE void unpack_nibbles(const uint8_t qs[16], uint8x16_t q[2])
{
    const uint8x16_t raw = vld1q_u8(qs);
    q[0] = vandq_u8(raw, vdupq_n_u8(0x0f));
    q[1] = vshrq_n_u8(raw, 4);
}

/* The fifth bits of Q5 added to the nibbles: bit e of the 32-bit qh
 * becomes 0x10 in byte e. */
FORCE_INLINE void add_q5_high(const uint8_t qh[4], uint8x16_t q[2])
{
    static const uint8_t spread[2][16] = {{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
                                          {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3}};
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint32_t bits;
    memcpy(&bits, qh, 4);
    const uint8x16_t all = vreinterpretq_u8_u32(vdupq_n_u32(bits));
    UNROLL
    for (int h = 0; h < 2; h++) {
        const uint8x16_t set = vtstq_u8(vqtbl1q_u8(all, vld1q_u8(spread[h])), vld1q_u8(bit));
        q[h] = vorrq_u8(q[h], vandq_u8(set, vdupq_n_u8(0x10)));
    }
}

/* A weight block's quants as signed bytes with the format's offset taken
 * off (Q4_0: q - 8, Q5_0: q - 16), so that their products with the
 * activations are the terms of scalar.c's lanes; Q4_1 and Q5_1 keep q
 * (their offset is the min, a separate term). */
FORCE_INLINE void legacy_quants(enum legacy_format f, const uint8_t *blk, int8x16_t q[2])
{
    uint8x16_t u[2];
    switch (f) {
    case LEGACY_Q4_0: unpack_nibbles(((const block_q4_0 *)blk)->qs, u); break;
    case LEGACY_Q4_1: unpack_nibbles(((const block_q4_1 *)blk)->qs, u); break;
    case LEGACY_Q5_0: {
        const block_q5_0 *b = (const block_q5_0 *)blk;
        unpack_nibbles(b->qs, u);
        add_q5_high(b->qh, u);
        break;
    }
    case LEGACY_Q5_1: {
        const block_q5_1 *b = (const block_q5_1 *)blk;
        unpack_nibbles(b->qs, u);
        add_q5_high(b->qh, u);
        break;
    }
    default: {
        const int8_t *qs = ((const block_q8_0 *)blk)->qs;
        q[0] = vld1q_s8(qs);
        q[1] = vld1q_s8(qs + 16);
        return;
    }
    }
    const int8x16_t bias = vdupq_n_s8(f == LEGACY_Q4_0 ? 8 : f == LEGACY_Q5_0 ? 16 : 0);
    UNROLL
    for (int h = 0; h < 2; h++) q[h] = vsubq_s8(vreinterpretq_s8_u8(u[h]), bias);
}

/* One row-token pair of a block: the integer lanes of kernels.h. */
FORCE_INLINE i32x8 legacy_lanes(enum legacy_format f, const int8x16_t q[2], const int8x16_t y[2])
{
    if (f == LEGACY_Q8_0) return (i32x8){dot_lanes(q[0], y[0]), dot_lanes(q[1], y[1])};
    return (i32x8){dot_lanes_small(q[0], y[0]), dot_lanes_small(q[1], y[1])};
}

FORCE_INLINE void legacy_tile(enum legacy_format f, const int TR, const int TT, int64_t n_blocks,
                              const uint8_t *w, size_t w_stride, const uint8_t *x, size_t x_stride,
                              float *out, int64_t out_stride)
{
    const size_t wb = legacy_block_bytes(f);
    const size_t xb = legacy_affine(f) ? sizeof(block_q8_1) : sizeof(block_q8_0);
    f32x8 run[INT_TILE_ROWS][INT_TILE_TOKS];
    UNROLL
    for (int r = 0; r < TR; r++)
        UNROLL
        for (int t = 0; t < TT; t++) run[r][t] = f32x8_zero();
    for (int64_t i = 0; i < n_blocks; i++) {
        int8x16_t q[INT_TILE_ROWS][2];
        float dw[INT_TILE_ROWS], mw[INT_TILE_ROWS];
        UNROLL
        for (int r = 0; r < TR; r++) {
            const uint8_t *blk = w + (size_t)r * w_stride + (size_t)i * wb;
            prefetch_next_rows(blk, w_stride, TR);
            legacy_quants(f, blk, q[r]);
            hearth_f16 d, m = 0;
            memcpy(&d, blk, 2);
            if (legacy_affine(f)) memcpy(&m, blk + 2, 2);
            dw[r] = half_to_float(d);
            mw[r] = half_to_float(m);
        }
        UNROLL
        for (int t = 0; t < TT; t++) {
            const uint8_t *blk = x + (size_t)t * x_stride + (size_t)i * xb;
            const int8_t *qs = (const int8_t *)(blk + (legacy_affine(f) ? 4 : 2));
            const int8x16_t y[2] = {vld1q_s8(qs), vld1q_s8(qs + 16)};
            hearth_f16 dyh;
            memcpy(&dyh, blk, 2);
            const float dy = half_to_float(dyh);
            f32x8 ysum = f32x8_zero();
            if (legacy_affine(f)) ysum = f32x8_from_lanes((i32x8){byte_lane_sums(y[0]), byte_lane_sums(y[1])});
            UNROLL
            for (int r = 0; r < TR; r++) {
                const f32x8 lanes = f32x8_from_lanes(legacy_lanes(f, q[r], y));
                run[r][t] = f32x8_fma(run[r][t], lanes, dw[r] * dy);
                if (legacy_affine(f)) run[r][t] = f32x8_fma(run[r][t], ysum, mw[r] * dy);
            }
        }
    }
    UNROLL
    for (int t = 0; t < TT; t++)
        UNROLL
        for (int r = 0; r < TR; r++) out[t * out_stride + r] = lanes_total(run[r][t]);
}

/* ==========================================================================
 * K-quants: 256-element super-blocks times Q8_K
 * ========================================================================== */

enum kquant_format { KQ_Q2_K, KQ_Q3_K, KQ_Q4_K, KQ_Q5_K, KQ_Q6_K };

FORCE_INLINE size_t kquant_block_bytes(enum kquant_format f)
{
    switch (f) {
    case KQ_Q2_K: return sizeof(block_q2_K);
    case KQ_Q3_K: return sizeof(block_q3_K);
    case KQ_Q4_K: return sizeof(block_q4_K);
    case KQ_Q5_K: return sizeof(block_q5_K);
    default: return sizeof(block_q6_K);
    }
}

/* What a tile keeps of one row's super-block between its chunks. */
struct kq_row {
    int16_t sc[16];      /* integer scale of each 16-element sub-block */
    int16x8_t bsum_w[2]; /* weights of Q8_K's bsums 0-7, 8-15: mins, or bias x scales */
    float d, dmin;       /* float scales (dmin 0 where there is no min) */
};

/* Bytes to 16-bit lanes: the scales of sub-blocks 0-15 stored in order. */
FORCE_INLINE void store_scales16(int8x16_t s, int16_t sc[16])
{
    vst1q_s16(sc, vmovl_s8(vget_low_s8(s)));
    vst1q_s16(sc + 8, vmovl_high_s8(s));
}

/* The 6-bit scales and mins of Q4_K/Q5_K (8 each) as bytes, from the
 * 12 packed bytes (see q4k_unpack_scales in quant.c). */
FORCE_INLINE void unpack_q4k_scales(const uint8_t p[12], uint8x8_t *scales, uint8x8_t *mins)
{
    uint32_t u0, u1, u2;
    memcpy(&u0, p, 4);
    memcpy(&u1, p + 4, 4);
    memcpy(&u2, p + 8, 4);
    const uint32_t sc_lo = u0 & 0x3f3f3f3f, mn_lo = u1 & 0x3f3f3f3f;
    const uint32_t sc_hi = (u2 & 0x0f0f0f0f) | ((u0 >> 6) & 0x03030303) << 4;
    const uint32_t mn_hi = ((u2 >> 4) & 0x0f0f0f0f) | ((u1 >> 6) & 0x03030303) << 4;
    *scales = vcreate_u8(sc_lo | (uint64_t)sc_hi << 32);
    *mins = vcreate_u8(mn_lo | (uint64_t)mn_hi << 32);
}

/* The 16 signed 6-bit scales of Q3_K (see q3k_unpack_scales in quant.c). */
FORCE_INLINE int8x16_t unpack_q3k_scales(const uint8_t p[12])
{
    uint32_t a0, a1, a2;
    memcpy(&a0, p, 4);
    memcpy(&a1, p + 4, 4);
    memcpy(&a2, p + 8, 4);
    const uint32_t s0 = (a0 & 0x0f0f0f0f) | (a2 & 0x03030303) << 4;
    const uint32_t s1 = (a1 & 0x0f0f0f0f) | ((a2 >> 2) & 0x03030303) << 4;
    const uint32_t s2 = ((a0 >> 4) & 0x0f0f0f0f) | ((a2 >> 4) & 0x03030303) << 4;
    const uint32_t s3 = ((a1 >> 4) & 0x0f0f0f0f) | ((a2 >> 6) & 0x03030303) << 4;
    const uint8x16_t u = vreinterpretq_u8_u64(
        vcombine_u64(vcreate_u64(s0 | (uint64_t)s1 << 32), vcreate_u64(s2 | (uint64_t)s3 << 32)));
    return vsubq_s8(vreinterpretq_s8_u8(u), vdupq_n_s8(32));
}

FORCE_INLINE void kquant_row(enum kquant_format f, const uint8_t *blk, struct kq_row *row)
{
    switch (f) {
    case KQ_Q2_K: {
        const block_q2_K *b = (const block_q2_K *)blk;
        const uint8x16_t raw = vld1q_u8(b->scales);
        const uint8x16_t mins = vshrq_n_u8(raw, 4);
        store_scales16(vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(0x0f))), row->sc);
        row->bsum_w[0] = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins)));
        row->bsum_w[1] = vreinterpretq_s16_u16(vmovl_high_u8(mins));
        row->d = half_to_float(b->d);
        row->dmin = half_to_float(b->dmin);
        break;
    }
    case KQ_Q3_K: {
        const block_q3_K *b = (const block_q3_K *)blk;
        const int8x16_t sc = unpack_q3k_scales(b->scales);
        store_scales16(sc, row->sc);
        row->bsum_w[0] = vshlq_n_s16(vmovl_s8(vget_low_s8(sc)), 2); /* 4 sc: u - 4 */
        row->bsum_w[1] = vshlq_n_s16(vmovl_high_s8(sc), 2);
        row->d = half_to_float(b->d);
        row->dmin = 0.0f;
        break;
    }
    case KQ_Q4_K:
    case KQ_Q5_K: {
        const block_q4_K *b4 = (const block_q4_K *)blk;
        const block_q5_K *b5 = (const block_q5_K *)blk;
        uint8x8_t sc, mn;
        unpack_q4k_scales(f == KQ_Q4_K ? b4->scales : b5->scales, &sc, &mn);
        /* one scale and min per 32-element chunk: each for two sub-blocks */
        const uint8x16_t sc2 = vcombine_u8(vzip1_u8(sc, sc), vzip2_u8(sc, sc));
        const uint8x16_t mn2 = vcombine_u8(vzip1_u8(mn, mn), vzip2_u8(mn, mn));
        store_scales16(vreinterpretq_s8_u8(sc2), row->sc);
        row->bsum_w[0] = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mn2)));
        row->bsum_w[1] = vreinterpretq_s16_u16(vmovl_high_u8(mn2));
        row->d = half_to_float(f == KQ_Q4_K ? b4->d : b5->d);
        row->dmin = half_to_float(f == KQ_Q4_K ? b4->dmin : b5->dmin);
        break;
    }
    default: {
        const block_q6_K *b = (const block_q6_K *)blk;
        const int8x16_t sc = vld1q_s8(b->scales);
        store_scales16(sc, row->sc);
        row->bsum_w[0] = vshlq_n_s16(vmovl_s8(vget_low_s8(sc)), 5); /* 32 sc: u - 32 */
        row->bsum_w[1] = vshlq_n_s16(vmovl_high_s8(sc), 5);
        row->d = half_to_float(b->d);
        row->dmin = 0.0f;
        break;
    }
    }
}

/* v >> bits per byte (a register shift: bits need not be a constant until
 * the chunk loop is unrolled). */
FORCE_INLINE uint8x16_t shift_right(uint8x16_t v, int bits)
{
    return vshlq_u8(v, vdupq_n_s8((int8_t)-bits));
}

/* mask where bit b of each byte of v is set, else 0 */
FORCE_INLINE uint8x16_t bit_as(uint8x16_t v, int b, uint8_t mask)
{
    return vandq_u8(vtstq_u8(v, vdupq_n_u8((uint8_t)(1u << b))), vdupq_n_u8(mask));
}

/* The unsigned quants of chunk c (elements 32c .. 32c + 31), below 64. */
FORCE_INLINE void kquant_chunk(enum kquant_format f, const uint8_t *blk, int c, int8x16_t q[2])
{
    const uint8x16_t m2 = vdupq_n_u8(3), m4 = vdupq_n_u8(0x0f);
    uint8x16_t u[2];
    switch (f) {
    case KQ_Q2_K: {
        const uint8_t *qs = ((const block_q2_K *)blk)->qs + 32 * (c / 4);
        UNROLL
        for (int h = 0; h < 2; h++) u[h] = vandq_u8(shift_right(vld1q_u8(qs + 16 * h), 2 * (c % 4)), m2);
        break;
    }
    case KQ_Q3_K: {
        const block_q3_K *b = (const block_q3_K *)blk;
        const uint8_t *qs = b->qs + 32 * (c / 4);
        UNROLL
        for (int h = 0; h < 2; h++) {
            const uint8x16_t low = vandq_u8(shift_right(vld1q_u8(qs + 16 * h), 2 * (c % 4)), m2);
            u[h] = vorrq_u8(low, bit_as(vld1q_u8(b->hmask + 16 * h), c, 4));
        }
        break;
    }
    case KQ_Q4_K: {
        const uint8_t *qs = ((const block_q4_K *)blk)->qs + 32 * (c / 2);
        UNROLL
        for (int h = 0; h < 2; h++) u[h] = vandq_u8(shift_right(vld1q_u8(qs + 16 * h), 4 * (c % 2)), m4);
        break;
    }
    case KQ_Q5_K: {
        const block_q5_K *b = (const block_q5_K *)blk;
        const uint8_t *qs = b->qs + 32 * (c / 2);
        UNROLL
        for (int h = 0; h < 2; h++) {
            const uint8x16_t low = vandq_u8(shift_right(vld1q_u8(qs + 16 * h), 4 * (c % 2)), m4);
            u[h] = vorrq_u8(low, bit_as(vld1q_u8(b->qh + 16 * h), c, 0x10));
        }
        break;
    }
    default: {
        const block_q6_K *b = (const block_q6_K *)blk;
        const int half = c / 4, k = c % 4;
        const uint8_t *ql = b->ql + 64 * half + 32 * (k % 2), *qh = b->qh + 32 * half;
        UNROLL
        for (int h = 0; h < 2; h++) {
            const uint8x16_t low = vandq_u8(shift_right(vld1q_u8(ql + 16 * h), 4 * (k / 2)), m4);
            const uint8x16_t high = vandq_u8(shift_right(vld1q_u8(qh + 16 * h), 2 * k), m2);
            u[h] = vorrq_u8(low, vshlq_n_u8(high, 4));
        }
        break;
    }
    }
    q[0] = vreinterpretq_s8_u8(u[0]);
    q[1] = vreinterpretq_s8_u8(u[1]);
}

/* The bsum terms of a row-token pair: lane k gets
 * w_2k bsum_2k + w_2k+1 bsum_2k+1 (32-bit products, pairs added). */
FORCE_INLINE i32x8 bsum_lanes(const int16x8_t bsums[2], const int16x8_t w[2])
{
    i32x8 v;
    v.lo = vpaddq_s32(vmull_s16(vget_low_s16(bsums[0]), vget_low_s16(w[0])), vmull_high_s16(bsums[0], w[0]));
    v.hi = vpaddq_s32(vmull_s16(vget_low_s16(bsums[1]), vget_low_s16(w[1])), vmull_high_s16(bsums[1], w[1]));
    return v;
}

FORCE_INLINE void kquant_tile(enum kquant_format f, const int TR, const int TT, int64_t n_blocks,
                              const uint8_t *w, size_t w_stride, const uint8_t *x, size_t x_stride,
                              float *out, int64_t out_stride)
{
    const size_t wb = kquant_block_bytes(f);
    const bool has_min = f == KQ_Q2_K || f == KQ_Q4_K || f == KQ_Q5_K;
    f32x8 run[INT_TILE_ROWS][INT_TILE_TOKS];
    UNROLL
    for (int r = 0; r < TR; r++)
        UNROLL
        for (int t = 0; t < TT; t++) run[r][t] = f32x8_zero();
    for (int64_t i = 0; i < n_blocks; i++) {
        struct kq_row row[INT_TILE_ROWS];
        const uint8_t *wblk[INT_TILE_ROWS];
        const block_q8_K *yblk[INT_TILE_TOKS];
        UNROLL
        for (int r = 0; r < TR; r++) {
            wblk[r] = w + (size_t)r * w_stride + (size_t)i * wb;
            prefetch_next_rows(wblk[r], w_stride, TR);
            prefetch_next_rows(wblk[r] + 64, w_stride, TR);
            if (wb > 128) prefetch_next_rows(wblk[r] + 128, w_stride, TR);
            kquant_row(f, wblk[r], &row[r]);
        }
        UNROLL
        for (int t = 0; t < TT; t++) yblk[t] = (const block_q8_K *)(x + (size_t)t * x_stride) + i;
        i32x8 acc[INT_TILE_ROWS][INT_TILE_TOKS];
        UNROLL
        for (int r = 0; r < TR; r++)
            UNROLL
            for (int t = 0; t < TT; t++) acc[r][t] = (i32x8){vdupq_n_s32(0), vdupq_n_s32(0)};
        UNROLL
        for (int c = 0; c < QK_K / 32; c++) {
            int8x16_t q[INT_TILE_ROWS][2];
            UNROLL
            for (int r = 0; r < TR; r++) kquant_chunk(f, wblk[r], c, q[r]);
            UNROLL
            for (int t = 0; t < TT; t++) {
                const int8x16_t y[2] = {vld1q_s8(yblk[t]->qs + 32 * c), vld1q_s8(yblk[t]->qs + 32 * c + 16)};
                UNROLL
                for (int r = 0; r < TR; r++)
                    acc[r][t] = chunk_lanes_add(acc[r][t], q[r], y, row[r].sc[2 * c], row[r].sc[2 * c + 1]);
            }
        }
        UNROLL
        for (int t = 0; t < TT; t++) {
            const int16x8_t bsums[2] = {vld1q_s16(yblk[t]->bsums), vld1q_s16(yblk[t]->bsums + 8)};
            const float dy = yblk[t]->d;
            UNROLL
            for (int r = 0; r < TR; r++) {
                const i32x8 paired = bsum_lanes(bsums, row[r].bsum_w);
                i32x8 lanes = acc[r][t];
                if (!has_min) lanes = (i32x8){vsubq_s32(lanes.lo, paired.lo), vsubq_s32(lanes.hi, paired.hi)};
                run[r][t] = f32x8_fma(run[r][t], f32x8_from_lanes(lanes), dy * row[r].d);
                if (has_min) run[r][t] = f32x8_fma(run[r][t], f32x8_from_lanes(paired), -(dy * row[r].dmin));
            }
        }
    }
    UNROLL
    for (int t = 0; t < TT; t++)
        UNROLL
        for (int r = 0; r < TR; r++) out[t * out_stride + r] = lanes_total(run[r][t]);
}

/* ==========================================================================
 * Entry points and the table
 * ========================================================================== */

#define DEFINE_INT_GEMM(name, TILE, fmt, block_elems) \
    DEFINE_TILED_GEMM(name, TILE, fmt, INT_TILE_ROWS, INT_TILE_TOKS, block_elems)

DEFINE_INT_GEMM(q4_0, legacy_tile, LEGACY_Q4_0, QK4_0)
DEFINE_INT_GEMM(q4_1, legacy_tile, LEGACY_Q4_1, QK4_1)
DEFINE_INT_GEMM(q5_0, legacy_tile, LEGACY_Q5_0, QK5_0)
DEFINE_INT_GEMM(q5_1, legacy_tile, LEGACY_Q5_1, QK5_1)
DEFINE_INT_GEMM(q8_0, legacy_tile, LEGACY_Q8_0, QK8_0)
DEFINE_INT_GEMM(q2_k, kquant_tile, KQ_Q2_K, QK_K)
DEFINE_INT_GEMM(q3_k, kquant_tile, KQ_Q3_K, QK_K)
DEFINE_INT_GEMM(q4_k, kquant_tile, KQ_Q4_K, QK_K)
DEFINE_INT_GEMM(q5_k, kquant_tile, KQ_Q5_K, QK_K)
DEFINE_INT_GEMM(q6_k, kquant_tile, KQ_Q6_K, QK_K)

static const hearth_kernels neon_kernels = {
    .name = PATH_NAME,
    VECTOR_KERNEL_ENTRIES,
};

const hearth_kernels *PATH_TABLE(void)
{
    return &neon_kernels;
}

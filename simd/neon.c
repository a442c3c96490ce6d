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
 * The integer formats' register tiles are int_tiles_impl.h's, built from
 * the primitives here: a block's quants as two 16-byte halves, signed
 * with the offset of Q4_0 and Q5_0 already taken off.  A tile computes TR
 * weight rows times TT tokens from registers (32 of them: a row-token pair
 * needs two for its running sums).
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

/* Eight lanes: elements (or lanes) 0-3 and 4-7; 32 bytes and 16 words:
 * elements 0-15 and 16-31, 0-7 and 8-15. */
typedef struct {
    float32x4_t lo, hi;
} f32x8;
typedef struct {
    int32x4_t lo, hi;
} i32x8;
typedef struct {
    int8x16_t lo, hi;
} i8x32;
typedef struct {
    int16x8_t lo, hi;
} i16x16;

/* The types of int_tiles_impl.h: a block's float scales are multiplied
 * as floats, a row's sub-block scales are kept as 16-bit integers and
 * read one chunk's pair at a time. */
typedef f32x8 flanes;
typedef i32x8 ilanes;
typedef float fscale;
typedef i8x32 bytes32;
typedef int8x16_t bytes16;
typedef i16x16 words16;
typedef struct {
    int16_t sc[16];
} kq_scales;
typedef struct {
    int16_t lo, hi;
} kq_pair;

FORCE_INLINE f32x8 flanes_zero(void)
{
    return (f32x8){vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
}

FORCE_INLINE i32x8 ilanes_zero(void)
{
    return (i32x8){vdupq_n_s32(0), vdupq_n_s32(0)};
}

FORCE_INLINE f32x8 flanes_from(i32x8 v)
{
    return (f32x8){vcvtq_f32_s32(v.lo), vcvtq_f32_s32(v.hi)};
}

FORCE_INLINE i32x8 ilanes_sub(i32x8 a, i32x8 b)
{
    return (i32x8){vsubq_s32(a.lo, b.lo), vsubq_s32(a.hi, b.hi)};
}

/* run + scale * v per lane, one rounding (the fmaf of scalar.c). */
FORCE_INLINE f32x8 flanes_fma(f32x8 run, f32x8 v, float scale)
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

FORCE_INLINE float scale_half(hearth_f16 h)
{
    return half_to_float(h);
}

FORCE_INLINE float scale_float(float f)
{
    return f;
}

FORCE_INLINE float scale_mul(float a, float b)
{
    return a * b;
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

FORCE_INLINE i32x8 byte_sums(i8x32 y)
{
    return (i32x8){byte_lane_sums(y.lo), byte_lane_sums(y.hi)};
}

FORCE_INLINE i8x32 load_bytes32(const void *p)
{
    return (i8x32){vld1q_s8((const int8_t *)p), vld1q_s8((const int8_t *)p + 16)};
}

/* acc plus the lanes of one 32-element chunk of quants q (unsigned, below
 * 64) times activations y, weighted by the integer scales of its halves:
 * sc.lo for elements 0-15 (lanes 0-3), sc.hi for 16-31 (lanes 4-7).
 * Without SDOT the four-product sums (at most 4 * 63 * 128) stay in 16
 * bits until the widening multiply by the scale. */
FORCE_INLINE i32x8 kq_chunk_add(i32x8 acc, i8x32 q, i8x32 y, kq_pair sc)
{
#ifdef KERNELS_DOTPROD
    acc.lo = vmlaq_n_s32(acc.lo, vdotq_s32(vdupq_n_s32(0), q.lo, y.lo), sc.lo);
    acc.hi = vmlaq_n_s32(acc.hi, vdotq_s32(vdupq_n_s32(0), q.hi, y.hi), sc.hi);
#else
    const int16x8_t p0 = vpaddq_s16(vmull_s8(vget_low_s8(q.lo), vget_low_s8(y.lo)), vmull_high_s8(q.lo, y.lo));
    const int16x8_t p1 = vpaddq_s16(vmull_s8(vget_low_s8(q.hi), vget_low_s8(y.hi)), vmull_high_s8(q.hi, y.hi));
    const int16x8_t sums = vpaddq_s16(p0, p1); /* lanes 0-7 */
    acc.lo = vmlal_n_s16(acc.lo, vget_low_s16(sums), sc.lo);
    acc.hi = vmlal_high_n_s16(acc.hi, sums, sc.hi);
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
    float inv;
    const hearth_f16 dh = q8_block_scale(m, &inv);
    if (isinf(inv)) return dh;
    const int8x16_t q0 = quantize16(x, false, 1.0f, 1.0f, inv), q1 = quantize16(x + 16, false, 1.0f, 1.0f, inv);
    vst1q_s8(qs, q0);
    vst1q_s8(qs + 16, q1);
    *sum_out = vaddlvq_s8(q0) + vaddlvq_s8(q1);
    return dh;
}

DEFINE_ACT_Q8_LEGACY(q8_block_neon)

/* Q8_K (DEFINE_ACT_Q8_K): the largest magnitude of a block (NaN where
 * one is NaN), and its quants and bsums. */
FORCE_INLINE bool q8k_absmax_neon(const float *x, float *m)
{
    *m = absmax(x, QK_K);
    return true;
}

FORCE_INLINE void q8k_block_neon(const float *x, float f1, float f2, float inv, block_q8_K *out)
{
    for (int g = 0; g < QK_K / 16; g++) {
        const int8x16_t q = quantize16(x + 16 * g, true, f1, f2, inv);
        vst1q_s8(out->qs + 16 * g, q);
        out->bsums[g] = vaddlvq_s8(q);
    }
}

DEFINE_ACT_Q8_K(q8k_absmax_neon, q8k_block_neon)

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

typedef f32x8 fvec;
#define FVEC_LANES 8
/* not measured on NEON yet: the tiles read rows without prefetching */
#define FLOAT_TILE_PREFETCH 0
#define FLOAT_PACKED_PREFETCH 0
FORCE_INLINE fvec fvec_zero(void) { return flanes_zero(); }
FORCE_INLINE fvec fvec_load(const float *p) { return (f32x8){vld1q_f32(p), vld1q_f32(p + 4)}; }
FORCE_INLINE fvec fvec_fma(fvec acc, fvec w, fvec x)
{
    return (f32x8){vfmaq_f32(acc.lo, w.lo, x.lo), vfmaq_f32(acc.hi, w.hi, x.hi)};
}
FORCE_INLINE float fvec_total(fvec v) { return lanes_total(v); }
#define load_weights load_weights8
#include "float_tiles_impl.h"

/* ==========================================================================
 * Legacy formats: the quants of a 32-element block
 * ========================================================================== */

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
 * off (Q4_0: q - 8, Q5_0: q - 16; MXFP4: its doubled E2M1 values), so that their products with the
 * activations are the terms of scalar.c's lanes; Q4_1 and Q5_1 keep q
 * (their offset is the min, a separate term). */
FORCE_INLINE i8x32 legacy_quants(enum legacy_format f, const uint8_t *blk)
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
    case LEGACY_MXFP4: {
        unpack_nibbles(((const block_mxfp4 *)blk)->qs, u);
        const int8x16_t lut = vld1q_s8(mxfp4_values);
        return (i8x32){vqtbl1q_s8(lut, u[0]), vqtbl1q_s8(lut, u[1])};
    }
    default: return load_bytes32(((const block_q8_0 *)blk)->qs);
    }
    const int8x16_t bias = vdupq_n_s8(f == LEGACY_Q4_0 ? 8 : f == LEGACY_Q5_0 ? 16 : 0);
    return (i8x32){vsubq_s8(vreinterpretq_s8_u8(u[0]), bias), vsubq_s8(vreinterpretq_s8_u8(u[1]), bias)};
}

/* The quants carry no offset: a token's block starts from zero. */
FORCE_INLINE i32x8 legacy_start(enum legacy_format f, i8x32 y)
{
    return ilanes_zero();
}

/* One row-token pair of a block: the integer lanes of kernels.h. */
FORCE_INLINE i32x8 legacy_lanes(enum legacy_format f, i8x32 q, i8x32 y, i32x8 start)
{
    if (f == LEGACY_Q8_0)
        return (i32x8){vaddq_s32(start.lo, dot_lanes(q.lo, y.lo)), vaddq_s32(start.hi, dot_lanes(q.hi, y.hi))};
    return (i32x8){vaddq_s32(start.lo, dot_lanes_small(q.lo, y.lo)),
                   vaddq_s32(start.hi, dot_lanes_small(q.hi, y.hi))};
}

/* ==========================================================================
 * K-quants: the scales of a super-block, and the bits of its quants
 * ========================================================================== */

/* The 16 signed 6-bit scales of Q3_K. */
FORCE_INLINE int8x16_t unpack_q3k_scales(const uint8_t p[12])
{
    uint32_t s[4];
    unpack_q3k_scale_words(p, s);
    const uint8x16_t u = vreinterpretq_u8_u64(
        vcombine_u64(vcreate_u64(s[0] | (uint64_t)s[1] << 32), vcreate_u64(s[2] | (uint64_t)s[3] << 32)));
    return vsubq_s8(vreinterpretq_s8_u8(u), vdupq_n_s8(32));
}

FORCE_INLINE int8x16_t load_bytes16(const void *p)
{
    return vld1q_s8((const int8_t *)p);
}

FORCE_INLINE int8x16_t nibbles16(int8x16_t v, bool high)
{
    const uint8x16_t u = vreinterpretq_u8_s8(v);
    return vreinterpretq_s8_u8(high ? vshrq_n_u8(u, 4) : vandq_u8(u, vdupq_n_u8(0x0f)));
}

FORCE_INLINE i16x16 widen_u8(int8x16_t v)
{
    const uint8x16_t u = vreinterpretq_u8_s8(v);
    return (i16x16){vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(u))), vreinterpretq_s16_u16(vmovl_high_u8(u))};
}

/* (a register shift: k need not be a constant until the call is inlined) */
FORCE_INLINE i16x16 widen_s8_shl(int8x16_t v, int k)
{
    const int16x8_t by = vdupq_n_s16((int16_t)k);
    return (i16x16){vshlq_s16(vmovl_s8(vget_low_s8(v)), by), vshlq_s16(vmovl_high_s8(v), by)};
}

/* The eight bytes of w, each twice: one per 16-element sub-block. */
FORCE_INLINE int8x16_t bytes_doubled(uint64_t w)
{
    const uint8x8_t b = vcreate_u8(w);
    return vreinterpretq_s8_u8(vcombine_u8(vzip1_u8(b, b), vzip2_u8(b, b)));
}

FORCE_INLINE i16x16 widen_u8_pairs(uint64_t w)
{
    return widen_u8(bytes_doubled(w));
}

FORCE_INLINE kq_scales kq_sub_scales(int8x16_t v)
{
    kq_scales s;
    vst1q_s16(s.sc, vmovl_s8(vget_low_s8(v)));
    vst1q_s16(s.sc + 8, vmovl_high_s8(v));
    return s;
}

FORCE_INLINE kq_scales kq_chunk_scale_bytes(uint64_t w)
{
    return kq_sub_scales(bytes_doubled(w));
}

FORCE_INLINE kq_pair kq_chunk_scales(const kq_scales *s, int c)
{
    return (kq_pair){s->sc[2 * c], s->sc[2 * c + 1]};
}

FORCE_INLINE i16x16 load_words16(const int16_t *p)
{
    return (i16x16){vld1q_s16(p), vld1q_s16(p + 8)};
}

/* The bsum terms of a row-token pair: lane k gets
 * w_2k bsum_2k + w_2k+1 bsum_2k+1 (32-bit products, pairs added). */
FORCE_INLINE i32x8 bsum_lanes(i16x16 bsums, i16x16 w)
{
    i32x8 v;
    v.lo = vpaddq_s32(vmull_s16(vget_low_s16(bsums.lo), vget_low_s16(w.lo)), vmull_high_s16(bsums.lo, w.lo));
    v.hi = vpaddq_s32(vmull_s16(vget_low_s16(bsums.hi), vget_low_s16(w.hi)), vmull_high_s16(bsums.hi, w.hi));
    return v;
}

/* Per byte, v shifted left by `left` bits (right where negative), under
 * mask.  A register shift: the counts need not be constants until the
 * chunk loop is unrolled. */
FORCE_INLINE i8x32 shifted_under(i8x32 v, int left, uint8_t mask)
{
    const int8x16_t by = vdupq_n_s8((int8_t)left);
    const uint8x16_t m = vdupq_n_u8(mask);
    return (i8x32){vreinterpretq_s8_u8(vandq_u8(vshlq_u8(vreinterpretq_u8_s8(v.lo), by), m)),
                   vreinterpretq_s8_u8(vandq_u8(vshlq_u8(vreinterpretq_u8_s8(v.hi), by), m))};
}

FORCE_INLINE i8x32 bits_at(i8x32 v, int shift, uint8_t mask)
{
    return shifted_under(v, -shift, mask);
}

FORCE_INLINE i8x32 bit_moved(i8x32 v, int b, int to, uint8_t mask)
{
    return shifted_under(v, to - b, mask);
}

FORCE_INLINE i8x32 bytes32_or(i8x32 a, i8x32 b)
{
    return (i8x32){vorrq_s8(a.lo, b.lo), vorrq_s8(a.hi, b.hi)};
}

#include "int_tiles_impl.h"

/* ==========================================================================
 * The table
 * ========================================================================== */

static const hearth_kernels neon_kernels = {
    .name = PATH_NAME,
    VECTOR_KERNEL_ENTRIES,
    .gemm_packed = {FLOAT_KERNEL_PACKED_TABLE},
};

const hearth_kernels *PATH_TABLE(void)
{
    return &neon_kernels;
}

/*
 * x86_int.h -- the integer-format kernels for x86 on 256-bit vectors: the
 * activation conversions to Q8_0, Q8_1 and Q8_K, the primitives with which
 * int_tiles_impl.h builds the register tiles of every quantized weight
 * type, and the tiles of packed Q4_0, Q5_0, Q8_0 and Q2_K to Q6_K.
 *
 * Included by avx2.c and avx512.c, each compiled with its own
 * instruction-set flags, after they define
 *   DOT_U8S8(acc, u, s)  acc plus, in each 32-bit lane, the sum of the
 *                        four products of unsigned bytes u and signed bytes s
 *   DOT_S16(acc, a, b)   acc plus, in each 32-bit lane, the sum of the two
 *                        products of signed 16-bit lanes a and b
 *   HAVE_DPBUSD          1 when DOT_U8S8 is one instruction (VNNI): then
 *                        signed weights are offset to unsigned ones
 *   INT_TILE_ROWS, INT_TILE_TOKS   the register tile of gemm
 *   PACKED_TILE_TOKS     the tokens of a packed-weight tile (one row group)
 *   PACKED_PAIR_TILE     defined where DOT_U8S8 is VNNI and AVX-512 F and
 *                        BW are on: packed products of several tokens
 *                        (every packed format, the K-quants included)
 *                        then take two row groups at a time in 512-bit
 *                        registers, PACKED_PAIR_TOKS tokens at a time
 *
 * Everything follows the summation order of kernels.h exactly: a 256-bit
 * multiply-add of one 32-element chunk leaves lane k's products in its
 * 32-bit lane k, so the integer lane sums are those of scalar.c however
 * they are formed, and the float work (one fused multiply-add per lane per
 * block and term, then the fixed tree) is the same operations in the same
 * order.  The results are therefore bit-identical to the scalar kernels.
 *
 * The row tiles (int_tiles_impl.h) hold the unsigned quants of a block
 * in one register, with the offset of Q4_0 and Q5_0 (and on VNNI of
 * Q8_0) taken off per lane through the token's lane sums.  The tile grid
 * is walked by tiles.h's DEFINE_TILED_GEMM, which also serves the float
 * kernels of the including files.
 */
#ifndef HEARTH_X86_INT_H
#define HEARTH_X86_INT_H

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "quant.h"
#include "tiles.h"

FORCE_INLINE float half_to_float(hearth_f16 h)
{
    return _cvtsh_ss(h);
}

/* A half in all 8 lanes.  Converted as a vector (vcvtph2ps of a
 * broadcast): the products of two such vectors then cost one vector
 * multiply per row-token pair, where a compiler that sees two broadcast
 * floats would multiply in scalar and broadcast the result, two steps. */
FORCE_INLINE __m256 broadcast_half(hearth_f16 h)
{
    return _mm256_cvtph_ps(_mm_set1_epi16((short)h));
}

/* ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7)), as kernels.h defines. */
FORCE_INLINE float lanes_total(__m256 run)
{
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(run), _mm256_extractf128_ps(run, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

/* Rows are short streams (a few KB): to hide the start of each new one,
 * a tile fetches the rows of the next tile at the place it is reading,
 * into the second-level cache (the first level has its own prefetcher).
 * Past the last row that address lies outside the weights, which a
 * prefetch may touch harmlessly; it is formed as an integer because
 * pointer arithmetic may not leave the array. */
FORCE_INLINE void prefetch_next_rows(const uint8_t *p, size_t w_stride, int rows)
{
    _mm_prefetch((const char *)((uintptr_t)p + (size_t)rows * w_stride), _MM_HINT_T1);
}

/* Per 32-bit lane, the sum of the four signed bytes of y. */
FORCE_INLINE __m256i byte_sums(__m256i y)
{
    return DOT_U8S8(_mm256_setzero_si256(), _mm256_set1_epi8(1), y);
}

/* The types and primitives of int_tiles_impl.h: eight lanes are one
 * 256-bit register, a block's float scales are multiplied as vectors
 * (broadcast_half). */
typedef __m256 flanes;
typedef __m256i ilanes;
typedef __m256 fscale;
typedef __m256i bytes32;
typedef __m128i bytes16;
typedef __m256i words16;
typedef __m256i kq_scales;
typedef __m256i kq_pair;

FORCE_INLINE __m256 flanes_zero(void)
{
    return _mm256_setzero_ps();
}

FORCE_INLINE __m256i ilanes_zero(void)
{
    return _mm256_setzero_si256();
}

FORCE_INLINE __m256 flanes_from(__m256i v)
{
    return _mm256_cvtepi32_ps(v);
}

FORCE_INLINE __m256i ilanes_sub(__m256i a, __m256i b)
{
    return _mm256_sub_epi32(a, b);
}

FORCE_INLINE __m256 flanes_fma(__m256 run, __m256 v, __m256 scale)
{
    return _mm256_fmadd_ps(scale, v, run);
}

FORCE_INLINE __m256 scale_half(hearth_f16 h)
{
    return broadcast_half(h);
}

FORCE_INLINE __m256 scale_float(float f)
{
    return _mm256_set1_ps(f);
}

FORCE_INLINE __m256 scale_mul(__m256 a, __m256 b)
{
    return _mm256_mul_ps(a, b);
}

FORCE_INLINE __m256i load_bytes32(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

/* ==========================================================================
 * Activation conversions: the bytes of the reference quantizers in quant.c
 * ========================================================================== */

/* Largest |x| of 8 floats per lane-wise max, and whether any is NaN or
 * infinite (x * 0 is NaN exactly then). */
FORCE_INLINE void absmax_update(__m256 v, __m256 *amax, __m256 *bad)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    *amax = _mm256_max_ps(*amax, _mm256_andnot_ps(sign, v));
    const __m256 z = _mm256_mul_ps(v, _mm256_setzero_ps());
    *bad = _mm256_or_ps(*bad, _mm256_cmp_ps(z, z, _CMP_UNORD_Q));
}

FORCE_INLINE float hmax8(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* roundf: to nearest, halves away from zero (the Q8_0/Q8_1 rule).  The
 * fraction v - trunc(v) is exact, so the comparison decides correctly. */
FORCE_INLINE __m256 round_half_away(__m256 v)
{
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 frac = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_sub_ps(v, t));
    const __m256 step = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
    return _mm256_add_ps(t, _mm256_and_ps(step, _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ)));
}

/* Four vectors of 8 int32 (each in -127..127) to 32 int8 in order. */
FORCE_INLINE __m256i pack_32_bytes(__m256i a, __m256i b, __m256i c, __m256i d)
{
    const __m256i ab = _mm256_packs_epi32(a, b); /* a0-3 b0-3 | a4-7 b4-7 */
    const __m256i cd = _mm256_packs_epi32(c, d);
    const __m256i abcd = _mm256_packs_epi16(ab, cd); /* a0-3 b0-3 c0-3 d0-3 | a4-7 ... */
    return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* One 32-element block by the Q8_0 rule of quant.c's q8_block(): the half
 * d, the quants, and their sum. */
FORCE_INLINE hearth_f16 q8_block_avx(const float *x, int8_t qs[32], int *sum_out)
{
    __m256 v[4], amax = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    UNROLL
    for (int j = 0; j < 4; j++) {
        v[j] = _mm256_loadu_ps(x + 8 * j);
        absmax_update(v[j], &amax, &bad);
    }
    memset(qs, 0, 32);
    *sum_out = 0;
    if (_mm256_movemask_ps(bad)) return 0x7e00; /* NaN: a poisoned block */
    float inv;
    const hearth_f16 dh = q8_block_scale(hmax8(amax), &inv);
    if (isinf(inv)) return dh;
    const __m256 vinv = _mm256_set1_ps(inv), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    __m256i q[4];
    UNROLL
    for (int j = 0; j < 4; j++) {
        const __m256 s = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[j], vinv), lo), hi);
        q[j] = _mm256_cvttps_epi32(round_half_away(s));
    }
    const __m256i bytes = pack_32_bytes(q[0], q[1], q[2], q[3]);
    _mm256_storeu_si256((__m256i *)qs, bytes);
    const __m256i s32 = byte_sums(bytes);
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    *sum_out = _mm_cvtsi128_si32(s);
    return dh;
}

DEFINE_ACT_Q8_LEGACY(q8_block_avx)

/* Q8_K (DEFINE_ACT_Q8_K): the largest magnitude of a block, and whether
 * none is NaN or infinite. */
FORCE_INLINE bool q8k_absmax_avx(const float *x, float *m)
{
    __m256 amax = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    for (int j = 0; j < QK_K; j += 8) absmax_update(_mm256_loadu_ps(x + j), &amax, &bad);
    *m = hmax8(amax);
    return !_mm256_movemask_ps(bad);
}

FORCE_INLINE void q8k_block_avx(const float *x, float f1, float f2, float inv, block_q8_K *out)
{
    const __m256 vf1 = _mm256_set1_ps(f1), vf2 = _mm256_set1_ps(f2), vinv = _mm256_set1_ps(inv);
    const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    UNROLL
    for (int c = 0; c < QK_K / 32; c++) {
        __m256i q[4];
        UNROLL
        for (int j = 0; j < 4; j++) {
            const __m256 xn = _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * c + 8 * j), vf1), vf2);
            const __m256 s = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(xn, vinv), lo), hi);
            q[j] = _mm256_cvtps_epi32(_mm256_round_ps(s, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        }
        const __m256i bytes = pack_32_bytes(q[0], q[1], q[2], q[3]);
        _mm256_storeu_si256((__m256i *)(out->qs + 32 * c), bytes);
        /* two sums of 16: 16-bit pair sums, then the two halves' totals */
        __m256i p = _mm256_maddubs_epi16(_mm256_set1_epi8(1), bytes);
        p = _mm256_hadd_epi16(p, p); /* per half: 4 sums of 4, twice */
        p = _mm256_hadd_epi16(p, p);
        p = _mm256_hadd_epi16(p, p);
        out->bsums[2 * c] = (int16_t)_mm256_extract_epi16(p, 0);
        out->bsums[2 * c + 1] = (int16_t)_mm256_extract_epi16(p, 8);
    }
}

DEFINE_ACT_Q8_K(q8k_absmax_avx, q8k_block_avx)

/* ==========================================================================
 * Legacy formats: 32-element blocks times Q8_0 / Q8_1
 * ========================================================================== */

/* 16 bytes of nibbles to 32 bytes: the low nibbles (elements 0-15), then
 * the high ones (16-31). */
FORCE_INLINE __m256i unpack_nibbles(const uint8_t *qs)
{
    const __m128i raw = _mm_loadu_si128((const __m128i *)qs);
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

/* The fifth bits of Q5: bit e of the 32-bit qh, as 0x10 in byte e. */
FORCE_INLINE __m256i unpack_q5_high(const uint8_t qh[4])
{
    uint32_t bits;
    memcpy(&bits, qh, 4);
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits),
                                               _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202,
                                                                  0x0303030303030303));
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

/* The fifth bits of a packed Q5_0 group's quants for register k of
 * packed_tile (elements 4k .. 4k + 3 of every row, k < 4; 16 + 4(k - 4)
 * .. for k >= 4, which are bits 4k .. 4k + 3 of the row's qh either
 * way), as 0x10 in byte j of the row's lane: hv holds the rows' qh, one
 * 32-bit lane each, so those four bits are nibble k % 2 of byte k / 2,
 * which one shuffle spreads over the lane's four bytes. */
FORCE_INLINE __m256i packed_q5_high(__m256i hv, int k)
{
    const char b = (char)(k / 2);
    const __m256i pick = _mm256_setr_epi8(b, b, b, b, 4 + b, 4 + b, 4 + b, 4 + b, 8 + b, 8 + b, 8 + b, 8 + b, 12 + b,
                                          12 + b, 12 + b, 12 + b, b, b, b, b, 4 + b, 4 + b, 4 + b, 4 + b, 8 + b, 8 + b,
                                          8 + b, 8 + b, 12 + b, 12 + b, 12 + b, 12 + b);
    const __m256i bit = _mm256_set1_epi32((int)(0x08040201u << (4 * (k % 2))));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(hv, pick), bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

/* MXFP4's doubled E2M1 values plus 12 (0..24, unsigned), by code, in
 * both 128-bit halves for a byte shuffle. */
FORCE_INLINE __m256i mxfp4_lut(void)
{
    return _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,
                            12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
}

/* The scales 2^(e - 128) of eight MXFP4 exponents e[0..7] (quant.h's
 * mxfp4_scale, lane by lane): (e - 1) << 23 as float bits, the two
 * subnormals 0x00200000 << e for e < 2, and NaN for 0xff. */
FORCE_INLINE __m256 mxfp4_scales8(const uint8_t *e)
{
    int64_t raw;
    memcpy(&raw, e, 8);
    const __m256i v = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(raw));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(v, _mm256_set1_epi32(1)), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), v);
    __m256i bits = _mm256_blendv_epi8(normal, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), v));
    bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x7fc00000), _mm256_cmpeq_epi32(v, _mm256_set1_epi32(0xff)));
    return _mm256_castsi256_ps(bits);
}

/* A weight block's quants as the DOT_U8S8 operand: unsigned (0..15 or
 * 0..31) for the 4- and 5-bit formats, MXFP4's values plus 12 (0..24);
 * Q8_0's signed bytes are offset by 128 for dpbusd, or kept signed for
 * the sign trick of maddubs. */
FORCE_INLINE __m256i legacy_quants(enum legacy_format f, const uint8_t *blk)
{
    switch (f) {
    case LEGACY_MXFP4: return _mm256_shuffle_epi8(mxfp4_lut(), unpack_nibbles(((const block_mxfp4 *)blk)->qs));
    case LEGACY_Q4_0: return unpack_nibbles(((const block_q4_0 *)blk)->qs);
    case LEGACY_Q4_1: return unpack_nibbles(((const block_q4_1 *)blk)->qs);
    case LEGACY_Q5_0: {
        const block_q5_0 *b = (const block_q5_0 *)blk;
        return _mm256_or_si256(unpack_nibbles(b->qs), unpack_q5_high(b->qh));
    }
    case LEGACY_Q5_1: {
        const block_q5_1 *b = (const block_q5_1 *)blk;
        return _mm256_or_si256(unpack_nibbles(b->qs), unpack_q5_high(b->qh));
    }
    default: {
        const __m256i q = _mm256_loadu_si256((const __m256i *)((const block_q8_0 *)blk)->qs);
        return HAVE_DPBUSD ? _mm256_xor_si256(q, _mm256_set1_epi8((char)0x80)) : q;
    }
    }
}

/* The offset of the stored quants, taken off per lane after the unsigned
 * product: sum (q - bias) y = sum q y - bias sum y. */
FORCE_INLINE int legacy_bias(enum legacy_format f)
{
    switch (f) {
    case LEGACY_Q4_0: return 8;
    case LEGACY_Q5_0: return 16;
    case LEGACY_MXFP4: return 12;
    case LEGACY_Q8_0: return HAVE_DPBUSD ? 128 : 0;
    default: return 0;
    }
}

/* One row-token pair of a block: the integer lanes of kernels.h. */
FORCE_INLINE __m256i legacy_lanes(enum legacy_format f, __m256i q, __m256i y, __m256i start)
{
    if (f == LEGACY_Q8_0 && !HAVE_DPBUSD) /* |q| times y with q's sign */
        return DOT_U8S8(start, _mm256_abs_epi8(q), _mm256_sign_epi8(y, q));
    return DOT_U8S8(start, q, y);
}

/* The lanes a token's block starts from: less the bias times the
 * token's lane sums. */
FORCE_INLINE __m256i legacy_start(enum legacy_format f, __m256i y)
{
    const int bias = legacy_bias(f);
    __m256i start = _mm256_setzero_si256();
    if (bias) start = _mm256_sub_epi32(start, DOT_U8S8(start, _mm256_set1_epi8((char)bias), y));
    return start;
}

/* ==========================================================================
 * K-quants: 256-element super-blocks times Q8_K
 * ========================================================================== */

/* The 16 signed 6-bit scales of Q3_K. */
FORCE_INLINE __m128i unpack_q3k_scales(const uint8_t p[12])
{
    uint32_t s[4];
    unpack_q3k_scale_words(p, s);
    return _mm_sub_epi8(_mm_setr_epi32((int)s[0], (int)s[1], (int)s[2], (int)s[3]), _mm_set1_epi8(32));
}

/* 16 scales of 16-element sub-blocks, bytes in order, to 16-bit lanes
 * with the even sub-blocks in the low half and the odd ones in the high
 * half: then chunk c's two scales sit at word c of each half. */
FORCE_INLINE __m256i spread_scales16(__m128i bytes)
{
    const __m128i even_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(bytes, even_odd));
}

FORCE_INLINE __m128i load_bytes16(const void *p)
{
    return _mm_loadu_si128((const __m128i *)p);
}

FORCE_INLINE __m128i nibbles16(__m128i v, bool high)
{
    const __m128i m4 = _mm_set1_epi8(0x0f);
    return high ? _mm_and_si128(_mm_srli_epi16(v, 4), m4) : _mm_and_si128(v, m4);
}

FORCE_INLINE __m256i widen_u8(__m128i v)
{
    return _mm256_cvtepu8_epi16(v);
}

FORCE_INLINE __m256i widen_s8_shl(__m128i v, int k)
{
    return _mm256_slli_epi16(_mm256_cvtepi8_epi16(v), k);
}

FORCE_INLINE __m256i widen_u8_pairs(uint64_t w)
{
    const __m128i m8 = _mm_cvtsi64_si128((long long)w);
    return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
}

/* A row's sub-block scales as 16-bit lanes laid out for kq_chunk_scales:
 * spread_scales16's, or for one scale per chunk (Q4_K, Q5_K) the same
 * word c in both halves. */
FORCE_INLINE __m256i kq_sub_scales(__m128i v)
{
    return spread_scales16(v);
}

FORCE_INLINE __m256i kq_chunk_scale_bytes(uint64_t w)
{
    return _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)w)));
}

/* The scales of chunk c as 16-bit lanes: sub-block 2c's for elements
 * 0-15, 2c + 1's for 16-31 (for Q4_K and Q5_K the chunk's one scale). */
FORCE_INLINE __m256i kq_chunk_scales(const __m256i *scales, int c)
{
    return _mm256_shuffle_epi8(*scales, _mm256_set1_epi16((short)((2 * c + 1) << 8 | 2 * c)));
}

FORCE_INLINE __m256i kq_chunk_add(__m256i acc, __m256i q, __m256i y, __m256i sc)
{
    return DOT_S16(acc, _mm256_maddubs_epi16(q, y), sc);
}

FORCE_INLINE __m256i load_words16(const int16_t *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

FORCE_INLINE __m256i bsum_lanes(__m256i bsums, __m256i w)
{
    return _mm256_madd_epi16(bsums, w);
}

/* Bit b of each byte of v moved to bit `to` (16-bit shifts: no bit of the
 * other byte reaches bit `to`, see the callers' ranges). */
FORCE_INLINE __m256i move_bit(__m256i v, int b, int to)
{
    return b <= to ? _mm256_slli_epi16(v, to - b) : _mm256_srli_epi16(v, b - to);
}

FORCE_INLINE __m256i bits_at(__m256i v, int shift, uint8_t mask)
{
    return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8((char)mask));
}

FORCE_INLINE __m256i bit_moved(__m256i v, int b, int to, uint8_t mask)
{
    return _mm256_and_si256(move_bit(v, b, to), _mm256_set1_epi8((char)mask));
}

FORCE_INLINE __m256i bytes32_or(__m256i a, __m256i b)
{
    return _mm256_or_si256(a, b);
}

/* ==========================================================================
 * Packed weights (kernels.h): eight rows per register, one block at a time
 * ========================================================================== */

/* A thread reads its packed row groups as one stream, front to back.  Left
 * to the hardware prefetchers, a core waits on memory at nearly every
 * block of Q6_K, whose kernel reads each block's qh before its ql, and
 * its arithmetic and the transfer take turns instead of overlapping
 * (tools/kbench, one Zen 4 core, weights in huge pages as in a model:
 * 7.6 GB/s streamed against 42 GB/s from L2).  Asking for the lines
 * PACKED_PREFETCH_AHEAD bytes ahead, into L2 so that they neither take
 * the L1's few miss buffers nor evict the block in use, brings Q6_K to
 * 30-32 GB/s, what one core reads at best (tools/membw); 4 KiB ahead gave
 * 22, 8 KiB 28-30, 32 KiB the same as 16 KiB.  Q4_0 and Q4_K, read in
 * address order, stream at 23-32 and 28-29 GB/s without it and 29-34 and
 * 30-34 with it.  Q8_0, the fastest kernel per byte, streams best without
 * it (31-35 GB/s against 23-25: the prefetches only add work), so its
 * kernel does not prefetch.  Past the end of the matrix the prefetch is
 * harmless (an integer address, as in prefetch_next_rows).  With two or
 * more tokens a pass, Q8_0's arithmetic per byte doubles and the same
 * turn-taking appears, so from there its kernel prefetches too (kbench,
 * one core, streamed: 2 tokens 18.0 GB/s without, 21.0 with; 4 tokens 15.2
 * and 19.2; a decode step of 2 and 4 sequences of the 0.8B Qwen3.5 shape
 * 20% and 29% faster). */
#define PACKED_PREFETCH_AHEAD 16384

FORCE_INLINE void prefetch_packed_block(const uint8_t *blk, size_t block_bytes)
{
    for (size_t off = 0; off < block_bytes; off += 64)
        _mm_prefetch((const char *)((uintptr_t)blk + PACKED_PREFETCH_AHEAD + off), _MM_HINT_T1);
}

/* A tile of one packed group (PACK_ROWS rows) times TT tokens: per block
 * the group's quants are unpacked once into eight registers, register c
 * holding elements 4c .. 4c + 3 of every row (for Q4_0 the low nibbles of
 * pieces 0-3 are elements 0-15, the high ones 16-31: again 4c .. 4c + 3),
 * and each token's piece c, broadcast, multiplies register c.  The lanes
 * are then the rows' exact block sums, less the bias times the token's
 * block sum, and one fused multiply-add per block adds them to the rows'
 * running sums. */
FORCE_INLINE void packed_tile(enum legacy_format f, const int TT, int64_t nb, const uint8_t *wg,
                              const uint8_t *x, size_t x_stride, const int32_t *x_sums, float *out,
                              int64_t out_stride)
{
    const size_t pb = PACK_ROWS * legacy_block_bytes(f);
    const int bias = legacy_bias(f);
    __m256 run[PACKED_TILE_TOKS];
    UNROLL
    for (int t = 0; t < TT; t++) run[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *blk = wg + (size_t)i * pb;
        if (f != LEGACY_Q8_0 || TT > 1) prefetch_packed_block(blk, pb);
        const __m256 dw = f == LEGACY_MXFP4 ? mxfp4_scales8(blk) : _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
        __m256i q[8];
        if (f == LEGACY_Q4_0 || f == LEGACY_MXFP4) {
            const __m256i m4 = _mm256_set1_epi8(0x0f);
            const size_t at = f == LEGACY_MXFP4 ? PACK_ROWS : 2 * PACK_ROWS;
            UNROLL
            for (int c = 0; c < 4; c++) {
                const __m256i raw = _mm256_loadu_si256((const __m256i *)(blk + at + 32 * c));
                q[c] = _mm256_and_si256(raw, m4);
                q[c + 4] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
                if (f == LEGACY_MXFP4) {
                    q[c] = _mm256_shuffle_epi8(mxfp4_lut(), q[c]);
                    q[c + 4] = _mm256_shuffle_epi8(mxfp4_lut(), q[c + 4]);
                }
            }
        } else if (f == LEGACY_Q5_0) { /* the scales, the qh (one lane a row), then the qs as Q4_0's */
            const __m256i m4 = _mm256_set1_epi8(0x0f);
            const __m256i hv = _mm256_loadu_si256((const __m256i *)(blk + 2 * PACK_ROWS));
            UNROLL
            for (int c = 0; c < 4; c++) {
                const __m256i raw = _mm256_loadu_si256((const __m256i *)(blk + 6 * PACK_ROWS + 32 * c));
                q[c] = _mm256_or_si256(_mm256_and_si256(raw, m4), packed_q5_high(hv, c));
                q[c + 4] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4), packed_q5_high(hv, c + 4));
            }
        } else {
            UNROLL
            for (int c = 0; c < 8; c++) {
                q[c] = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * c));
                if (HAVE_DPBUSD) q[c] = _mm256_xor_si256(q[c], _mm256_set1_epi8((char)0x80));
            }
        }
        UNROLL
        for (int t = 0; t < TT; t++) {
            const block_q8_0 *xb = (const block_q8_0 *)(x + (size_t)t * x_stride) + i;
            __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
            if (bias) acc0 = _mm256_set1_epi32(-bias * x_sums[t * nb + i]);
            UNROLL
            for (int c = 0; c < 8; c += 2) {
                int32_t p0, p1;
                memcpy(&p0, xb->qs + 4 * c, 4);
                memcpy(&p1, xb->qs + 4 * c + 4, 4);
                const __m256i y0 = _mm256_set1_epi32(p0), y1 = _mm256_set1_epi32(p1);
                acc0 = legacy_lanes(f, q[c], y0, acc0);
                acc1 = legacy_lanes(f, q[c + 1], y1, acc1);
            }
            const __m256 scale = _mm256_mul_ps(dw, broadcast_half(xb->d));
            run[t] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(_mm256_add_epi32(acc0, acc1)), run[t]);
        }
    }
    UNROLL
    for (int t = 0; t < TT; t++) _mm256_storeu_ps(out + t * out_stride, run[t]);
}

#ifdef PACKED_PAIR_TILE
/* Two consecutive packed groups (2 * PACK_ROWS rows) times TT tokens, in
 * 512-bit registers with VNNI: the low half of every register is
 * packed_tile's register for the first group, the high half the
 * second's, so each lane forms the same integer sums and then the same
 * multiply and fused multiply-add as packed_tile, and the results are
 * bit-identical to it and to scalar.c.  What changes is the work per
 * token: its pieces (broadcast from memory inside the dot products), its
 * bias and its scale now serve sixteen rows instead of eight.  In the
 * eight-row tile that work was half of the instructions, about 4.7 per
 * vpdpbusd, more than a Zen 4 core issues in the time it runs the dot
 * products, so the tile was bound by issue and not by arithmetic.  Up to
 * PACKED_PAIR_TOKS tokens, one integer accumulator each (the sums are
 * exact, so their order is free): a step of eight decode tokens reads
 * its weights in one pass (tools/kbench -k 8 Q4_0 258-264 G
 * multiply-adds a second against 248-250 with four tokens a pass, Q8_0
 * 249-259 against 195-207). */
FORCE_INLINE void packed_pair_tile(enum legacy_format f, const int TT, int64_t nb, const uint8_t *wg, size_t group,
                                   const uint8_t *x, size_t x_stride, const int32_t *x_sums, float *out,
                                   int64_t out_stride)
{
    const size_t pb = PACK_ROWS * legacy_block_bytes(f);
    const int bias = legacy_bias(f);
    __m512 run[PACKED_PAIR_TOKS];
    UNROLL
    for (int t = 0; t < TT; t++) run[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *ba = wg + (size_t)i * pb, *bb = ba + group;
        if (f != LEGACY_Q8_0 || TT > 1) {
            prefetch_packed_block(ba, pb);
            prefetch_packed_block(bb, pb);
        }
        __m512 dw;
        if (f == LEGACY_MXFP4) {
            dw = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(mxfp4_scales8(ba))),
                                                     _mm256_castps_pd(mxfp4_scales8(bb)), 1));
        } else {
            const __m256i halves = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)ba)),
                                                           _mm_loadu_si128((const __m128i *)bb), 1);
            dw = _mm512_cvtph_ps(halves);
        }
        __m512i q[8];
        if (f == LEGACY_Q4_0 || f == LEGACY_MXFP4) {
            const __m512i m4 = _mm512_set1_epi8(0x0f);
            const size_t at = f == LEGACY_MXFP4 ? PACK_ROWS : 2 * PACK_ROWS;
            const __m512i lut = _mm512_broadcast_i32x4(_mm256_castsi256_si128(mxfp4_lut()));
            UNROLL
            for (int c = 0; c < 4; c++) {
                const __m512i raw =
                    _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(ba + at + 32 * c))),
                                       _mm256_loadu_si256((const __m256i *)(bb + at + 32 * c)), 1);
                q[c] = _mm512_and_si512(raw, m4);
                q[c + 4] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
                if (f == LEGACY_MXFP4) {
                    q[c] = _mm512_shuffle_epi8(lut, q[c]);
                    q[c + 4] = _mm512_shuffle_epi8(lut, q[c + 4]);
                }
            }
        } else if (f == LEGACY_Q5_0) {
            /* as packed_tile, the fifth bits added under a byte mask */
            const __m512i m4 = _mm512_set1_epi8(0x0f), sixteen = _mm512_set1_epi8(0x10);
            const __m512i hv =
                _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(ba + 2 * PACK_ROWS))),
                                   _mm256_loadu_si256((const __m256i *)(bb + 2 * PACK_ROWS)), 1);
            UNROLL
            for (int c = 0; c < 4; c++) {
                const __m512i raw = _mm512_inserti64x4(
                    _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(ba + 6 * PACK_ROWS + 32 * c))),
                    _mm256_loadu_si256((const __m256i *)(bb + 6 * PACK_ROWS + 32 * c)), 1);
                q[c] = _mm512_and_si512(raw, m4);
                q[c + 4] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
            }
            UNROLL
            for (int k = 0; k < 8; k++) {
                const char b = (char)(k / 2);
                const __m512i pick = _mm512_broadcast_i32x4(
                    _mm_setr_epi8(b, b, b, b, 4 + b, 4 + b, 4 + b, 4 + b, 8 + b, 8 + b, 8 + b, 8 + b, 12 + b, 12 + b,
                                  12 + b, 12 + b));
                const __m512i bit = _mm512_set1_epi32((int)(0x08040201u << (4 * (k % 2))));
                const __mmask64 high = _mm512_test_epi8_mask(_mm512_shuffle_epi8(hv, pick), bit);
                q[k] = _mm512_mask_add_epi8(q[k], high, q[k], sixteen);
            }
        } else {
            UNROLL
            for (int c = 0; c < 8; c++) {
                const __m512i raw =
                    _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(ba + 16 + 32 * c))),
                                       _mm256_loadu_si256((const __m256i *)(bb + 16 + 32 * c)), 1);
                q[c] = _mm512_xor_si512(raw, _mm512_set1_epi8((char)0x80));
            }
        }
        UNROLL
        for (int t = 0; t < TT; t++) {
            const block_q8_0 *xb = (const block_q8_0 *)(x + (size_t)t * x_stride) + i;
            __m512i acc = bias ? _mm512_set1_epi32(-bias * x_sums[t * nb + i]) : _mm512_setzero_si512();
            UNROLL
            for (int c = 0; c < 8; c++) {
                int32_t p;
                memcpy(&p, xb->qs + 4 * c, 4);
                acc = _mm512_dpbusd_epi32(acc, q[c], _mm512_set1_epi32(p));
            }
            const __m512 scale = _mm512_mul_ps(dw, _mm512_cvtph_ps(_mm256_set1_epi16((short)xb->d)));
            run[t] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(acc), run[t]);
        }
    }
    UNROLL
    for (int t = 0; t < TT; t++) _mm512_storeu_ps(out + t * out_stride, run[t]);
}
#define PACKED_PAIRS 1
#else
#define PACKED_PAIRS 0
#define PACKED_PAIR_TOKS PACKED_TILE_TOKS
#define packed_pair_tile(...) ((void)0)
#endif

/* The eight-row tile over tokens t0 .. t0 + tt - 1 of one group, in
 * tiles of PACKED_TILE_TOKS. */
#define PACKED_GROUP_TOKENS(fmt, nb, wg, tt, xt, xs, sums, out, ys) \
    for (int64_t u = 0; u < (tt); u += PACKED_TILE_TOKS) { \
        const int64_t uu = HEARTH_MIN(PACKED_TILE_TOKS, (tt) - u); \
        const uint8_t *xu = (xt) + (size_t)u * (xs); \
        const int32_t *su = (sums) + u * (nb); \
        float *ou = (out) + u * (ys); \
        if (uu == PACKED_TILE_TOKS) \
            packed_tile(fmt, PACKED_TILE_TOKS, nb, wg, xu, xs, su, ou, ys); \
        else if (PACKED_TILE_TOKS > 3 && uu == 3) \
            packed_tile(fmt, 3, nb, wg, xu, xs, su, ou, ys); \
        else if (PACKED_TILE_TOKS > 2 && uu == 2) \
            packed_tile(fmt, 2, nb, wg, xu, xs, su, ou, ys); \
        else \
            packed_tile(fmt, 1, nb, wg, xu, xs, su, ou, ys); \
    }

/* Tokens in steps of PACKED_PAIR_TOKS; within a step, two groups at a
 * time with the pair tile where it exists, two remain and there are
 * several tokens, else one group with the eight-row tile.  A lone token
 * (decode of one sequence) is bound by memory, not by issue, and reads
 * its weights as one stream with the eight-row tile: from two streams
 * at once one core read 20 GB/s where it reads 23-31 from one
 * (tools/kbench -k 1, streamed). */
#define DEFINE_PACKED_GEMM(name, fmt) \
    static void gemm_packed_##name(int64_t n, int64_t n_rows, int64_t n_tok, const void *wp, const void *x, \
                                   size_t xs, const int32_t *x_sums, float *y, int64_t ys) \
    { \
        const int64_t nb = n / 32; \
        const size_t group = (size_t)nb * PACK_ROWS * legacy_block_bytes(fmt); \
        const int64_t n_groups = n_rows / PACK_ROWS; \
        const uint8_t *xp = x; \
        for (int64_t t = 0; t < n_tok; t += PACKED_PAIR_TOKS) { \
            const int64_t tt = HEARTH_MIN(PACKED_PAIR_TOKS, n_tok - t); \
            const int32_t *sums = x_sums + t * nb; \
            const uint8_t *xt = xp + (size_t)t * xs; \
            for (int64_t g = 0; g < n_groups;) { \
                const uint8_t *wg = (const uint8_t *)wp + (size_t)g * group; \
                float *out = y + t * ys + g * PACK_ROWS; \
                if (PACKED_PAIRS && tt > 1 && n_groups - g >= 2) { \
                    switch (tt) { \
                    case 2: packed_pair_tile(fmt, 2, nb, wg, group, xt, xs, sums, out, ys); break; \
                    case 3: packed_pair_tile(fmt, 3, nb, wg, group, xt, xs, sums, out, ys); break; \
                    case 4: packed_pair_tile(fmt, 4, nb, wg, group, xt, xs, sums, out, ys); break; \
                    case 5: packed_pair_tile(fmt, 5, nb, wg, group, xt, xs, sums, out, ys); break; \
                    case 6: packed_pair_tile(fmt, 6, nb, wg, group, xt, xs, sums, out, ys); break; \
                    case 7: packed_pair_tile(fmt, 7, nb, wg, group, xt, xs, sums, out, ys); break; \
                    default: packed_pair_tile(fmt, PACKED_PAIR_TOKS, nb, wg, group, xt, xs, sums, out, ys); break; \
                    } \
                    g += 2; \
                } else { \
                    PACKED_GROUP_TOKENS(fmt, nb, wg, tt, xt, xs, sums, out, ys) \
                    g += 1; \
                } \
            } \
        } \
    }

DEFINE_PACKED_GEMM(q4_0, LEGACY_Q4_0)
DEFINE_PACKED_GEMM(q5_0, LEGACY_Q5_0)
DEFINE_PACKED_GEMM(q8_0, LEGACY_Q8_0)
DEFINE_PACKED_GEMM(mxfp4, LEGACY_MXFP4)

/* The quants of one chunk from its eight 4-byte pieces of every row: bits
 * shift and up of the pieces at qp, under mask, and where the format has
 * a high bit (hp not NULL), bit c of the pieces at hp moved to bit top. */
FORCE_INLINE void unpack_pieces(const uint8_t *qp, int shift, __m256i mask, const uint8_t *hp, int c, int top,
                                __m256i u[8])
{
    UNROLL
    for (int p = 0; p < 8; p++) {
        const __m256i raw = _mm256_loadu_si256((const __m256i *)(qp + 32 * p));
        u[p] = _mm256_and_si256(_mm256_srli_epi16(raw, shift), mask);
        if (hp) {
            const __m256i hb = _mm256_loadu_si256((const __m256i *)(hp + 32 * p));
            u[p] = _mm256_or_si256(u[p], _mm256_and_si256(move_bit(hb, c, top), _mm256_set1_epi8((char)(1 << top))));
        }
    }
}

/* Per 32-bit lane (row) of v, its bytes b0 and b1 as the two 16-bit
 * halves, unsigned (byte_pair_low) or as their high bytes (the low bytes
 * zero; byte_pair_high).  One shuffle each. */
FORCE_INLINE __m256i byte_pair_low(__m256i v, int b0, int b1)
{
    const __m256i pick = _mm256_setr_epi8(b0, -1, b1, -1, 4 + b0, -1, 4 + b1, -1, 8 + b0, -1, 8 + b1, -1, 12 + b0,
                                          -1, 12 + b1, -1, b0, -1, b1, -1, 4 + b0, -1, 4 + b1, -1, 8 + b0, -1, 8 + b1,
                                          -1, 12 + b0, -1, 12 + b1, -1);
    return _mm256_shuffle_epi8(v, pick);
}

FORCE_INLINE __m256i byte_pair_high(__m256i v, int b0, int b1)
{
    const __m256i pick = _mm256_setr_epi8(-1, b0, -1, b1, -1, 4 + b0, -1, 4 + b1, -1, 8 + b0, -1, 8 + b1, -1,
                                          12 + b0, -1, 12 + b1, -1, b0, -1, b1, -1, 4 + b0, -1, 4 + b1, -1, 8 + b0,
                                          -1, 8 + b1, -1, 12 + b0, -1, 12 + b1);
    return _mm256_shuffle_epi8(v, pick);
}

/* Per 32-bit lane (row) of v, its signed bytes b0 and b1 as the two
 * 16-bit halves. */
FORCE_INLINE __m256i signed_byte_pair(__m256i v, int b0, int b1)
{
    return _mm256_srai_epi16(byte_pair_high(v, b0, b1), 8);
}

/* A tile of one packed Q4_K (five false) or Q5_K (five true) group times
 * TT tokens.  The three 4-byte pieces of the rows' 6-bit scales and mins
 * are unpacked for all eight rows at once (as unpack_q4k_scales does for
 * one); quants piece j holds bytes 4j .. 4j + 3 of every row's qs, whose
 * low nibbles are elements 4j' .. 4j' + 3 of chunk 2 (j / 8) and high
 * nibbles those of chunk 2 (j / 8) + 1 (j' = j % 8); Q5_K's qh piece j'
 * holds the fifth bits of those elements of every chunk, bit c for chunk
 * c.  Per chunk, the byte products of a piece register with the token's
 * broadcast piece are summed in 16 bits, eight pieces for Q4_K (at most
 * 8 x 2 x 15 x 128 in size) and four at a time for Q5_K (4 x 2 x 31 x
 * 128), and then weighted by the rows' chunk scales into 32 bits; the
 * mins meet the pair sums of the bsums. */
FORCE_INLINE void packed_q45k_tile(const bool five, const int TT, int64_t nb, const uint8_t *wg,
                                   const uint8_t *x, size_t x_stride, float *out, int64_t out_stride)
{
    const size_t pb = PACK_ROWS * (five ? sizeof(block_q5_K) : sizeof(block_q4_K));
    const int group = five ? 4 : 8; /* pieces summed in 16 bits */
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 run[PACKED_TILE_TOKS];
    UNROLL
    for (int t = 0; t < TT; t++) run[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *blk = wg + (size_t)i * pb;
        prefetch_packed_block(blk, pb);
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
        const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16)));
        const __m256i u0 = _mm256_loadu_si256((const __m256i *)(blk + 32));
        const __m256i u1 = _mm256_loadu_si256((const __m256i *)(blk + 64));
        const __m256i u2 = _mm256_loadu_si256((const __m256i *)(blk + 96));
        const __m256i m6 = _mm256_set1_epi8(0x3f), m2 = _mm256_set1_epi8(3);
        /* per row lane: scale (min) bytes 0-3 and 4-7 of its sub-blocks */
        const __m256i sc_lo = _mm256_and_si256(u0, m6), mn_lo = _mm256_and_si256(u1, m6);
        const __m256i sc_hi = _mm256_or_si256(_mm256_and_si256(u2, m4),
                                              _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u0, 6), m2), 4));
        const __m256i mn_hi =
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), m4),
                            _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u1, 6), m2), 4));
        const uint8_t *qh = blk + 128, *qs = five ? qh + 8 * 32 : qh;
        __m256i acc[PACKED_TILE_TOKS];
        UNROLL
        for (int t = 0; t < TT; t++) acc[t] = _mm256_setzero_si256();
        UNROLL
        for (int c = 0; c < 8; c++) {
            /* chunk c's scale of each row in both 16-bit halves of its lane */
            const int b = c % 4;
            const __m256i sc = byte_pair_low(c < 4 ? sc_lo : sc_hi, b, b);
            __m256i q[8];
            unpack_pieces(qs + 32 * 8 * (c / 2), 4 * (c % 2), m4, five ? qh : NULL, c, 4, q);
            UNROLL
            for (int t = 0; t < TT; t++) {
                const int8_t *xq = ((const block_q8_K *)(x + (size_t)t * x_stride) + i)->qs + 32 * c;
                /* one loop with constant bounds, which unrolls fully (the
                 * quants stay in registers) */
                __m256i s16 = _mm256_setzero_si256();
                UNROLL
                for (int p = 0; p < 8; p++) {
                    int32_t piece;
                    memcpy(&piece, xq + 4 * p, 4);
                    s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(q[p], _mm256_set1_epi32(piece)));
                    if (p % group == group - 1) {
                        acc[t] = DOT_S16(acc[t], s16, sc);
                        s16 = _mm256_setzero_si256();
                    }
                }
            }
        }
        /* mins as 16-bit pairs (m_2j, m_2j+1) per row lane, j = 0..3 */
        const __m256i mp0 = byte_pair_low(mn_lo, 0, 1), mp1 = byte_pair_low(mn_lo, 2, 3);
        const __m256i mp2 = byte_pair_low(mn_hi, 0, 1), mp3 = byte_pair_low(mn_hi, 2, 3);
        UNROLL
        for (int t = 0; t < TT; t++) {
            const block_q8_K *xb = (const block_q8_K *)(x + (size_t)t * x_stride) + i;
            /* the eight pair sums bsum_2k + bsum_2k+1, two to a 32-bit word */
            const __m128i bp = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)xb->bsums),
                                              _mm_loadu_si128((const __m128i *)(xb->bsums + 8)));
            __m256i m = _mm256_madd_epi16(mp0, _mm256_broadcastd_epi32(bp));
            m = _mm256_add_epi32(m, _mm256_madd_epi16(mp1, _mm256_broadcastd_epi32(_mm_shuffle_epi32(bp, 1))));
            m = _mm256_add_epi32(m, _mm256_madd_epi16(mp2, _mm256_broadcastd_epi32(_mm_shuffle_epi32(bp, 2))));
            m = _mm256_add_epi32(m, _mm256_madd_epi16(mp3, _mm256_broadcastd_epi32(_mm_shuffle_epi32(bp, 3))));
            const __m256 dy = _mm256_set1_ps(xb->d);
            run[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dy), _mm256_cvtepi32_ps(acc[t]), run[t]);
            run[t] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, dy), _mm256_cvtepi32_ps(m), run[t]);
        }
    }
    UNROLL
    for (int t = 0; t < TT; t++) _mm256_storeu_ps(out + t * out_stride, run[t]);
}

/* Per row lane, sum_j of the two products of the 16-bit pair pairs[j]
 * with the token's bsums 2j and 2j + 1. */
FORCE_INLINE __m256i pair_bsums(const __m256i pairs[8], const block_q8_K *xb)
{
    __m256i m = _mm256_setzero_si256();
    UNROLL
    for (int j = 0; j < 8; j++) {
        int32_t bs;
        memcpy(&bs, xb->bsums + 2 * j, 4);
        m = _mm256_add_epi32(m, _mm256_madd_epi16(pairs[j], _mm256_set1_epi32(bs)));
    }
    return m;
}

/* Sum of the byte products of the quants of four 4-byte pieces (u[0..3])
 * with the token's pieces at xq, in 16 bits: at most 4 x 2 x 7 x 128. */
FORCE_INLINE __m256i four_pieces(const __m256i u[4], const int8_t *xq)
{
    __m256i s16 = _mm256_setzero_si256();
    UNROLL
    for (int p = 0; p < 4; p++) {
        int32_t piece;
        memcpy(&piece, xq + 4 * p, 4);
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(u[p], _mm256_set1_epi32(piece)));
    }
    return s16;
}

/* A tile of one packed Q2_K (three false) or Q3_K (three true) group
 * times TT tokens.  Quants piece 8h + p holds bytes 4p .. 4p + 3 of
 * every row's 32-byte half h of qs: bits 2j, 2j + 1 of its bytes are
 * elements 4p .. 4p + 3 of chunk 4h + j; Q3_K's hmask piece p holds their
 * third bits, bit c for chunk c.  Chunk c is sub-blocks 2c and 2c + 1, the
 * first four and the last four pieces, each summed in 16 bits and weighted
 * by its sub-block's scale into 32 bits.  Q2_K's scales piece k holds the
 * scale (low nibble) and min (high nibble) bytes of sub-blocks 4k .. 4k +
 * 3; Q3_K's three 4-byte pieces of 6-bit scales are unpacked for all
 * eight rows at once (as q3k_unpack_scales does for one), less the bias of
 * 32.  Q2_K's mins and Q3_K's offset of -4 meet the bsums. */
FORCE_INLINE void packed_q23k_tile(const bool three, const int TT, int64_t nb, const uint8_t *wg,
                                   const uint8_t *x, size_t x_stride, float *out, int64_t out_stride)
{
    const size_t pb = PACK_ROWS * (three ? sizeof(block_q3_K) : sizeof(block_q2_K));
    const __m256i m2 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi8(0x0f), low4 = _mm256_set1_epi16(0x0f);
    __m256 run[PACKED_TILE_TOKS];
    UNROLL
    for (int t = 0; t < TT; t++) run[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *blk = wg + (size_t)i * pb;
        prefetch_packed_block(blk, pb);
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
        const __m256 dmin = three ? _mm256_setzero_ps() : _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16)));
        /* per row lane: the scale bytes of sub-blocks 4k .. 4k + 3 */
        __m256i sp[4];
        const uint8_t *hmask, *qs;
        if (three) {
            const __m256i p0 = _mm256_loadu_si256((const __m256i *)(blk + 16));
            const __m256i p1 = _mm256_loadu_si256((const __m256i *)(blk + 48));
            const __m256i p2 = _mm256_loadu_si256((const __m256i *)(blk + 80));
            sp[0] = _mm256_and_si256(p0, m4);
            sp[1] = _mm256_and_si256(p1, m4);
            sp[2] = _mm256_and_si256(_mm256_srli_epi16(p0, 4), m4);
            sp[3] = _mm256_and_si256(_mm256_srli_epi16(p1, 4), m4);
            UNROLL
            for (int k = 0; k < 4; k++)
                sp[k] = _mm256_sub_epi8(
                    _mm256_or_si256(sp[k], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(p2, 2 * k), m2), 4)),
                    _mm256_set1_epi8(32));
            hmask = blk + 112;
            qs = hmask + 8 * 32;
        } else {
            UNROLL
            for (int k = 0; k < 4; k++) sp[k] = _mm256_loadu_si256((const __m256i *)(blk + 32 + 32 * k));
            hmask = NULL;
            qs = blk + 160;
        }
        __m256i acc[PACKED_TILE_TOKS];
        UNROLL
        for (int t = 0; t < TT; t++) acc[t] = _mm256_setzero_si256();
        UNROLL
        for (int c = 0; c < 8; c++) {
            const int b = 2 * (c % 2); /* sub-blocks 2c and 2c + 1: bytes b and b + 1 of piece c / 2 */
            __m256i sc0, sc1;
            if (three) {
                sc0 = signed_byte_pair(sp[c / 2], b, b);
                sc1 = signed_byte_pair(sp[c / 2], b + 1, b + 1);
            } else {
                sc0 = _mm256_and_si256(byte_pair_low(sp[c / 2], b, b), low4);
                sc1 = _mm256_and_si256(byte_pair_low(sp[c / 2], b + 1, b + 1), low4);
            }
            __m256i u[8];
            unpack_pieces(qs + 32 * 8 * (c / 4), 2 * (c % 4), m2, three ? hmask : NULL, c, 2, u);
            UNROLL
            for (int t = 0; t < TT; t++) {
                const int8_t *xq = ((const block_q8_K *)(x + (size_t)t * x_stride) + i)->qs + 32 * c;
                acc[t] = DOT_S16(acc[t], four_pieces(u, xq), sc0);
                acc[t] = DOT_S16(acc[t], four_pieces(u + 4, xq + 16), sc1);
            }
        }
        /* per row lane, 16-bit pairs for bsums 2j and 2j + 1: Q3_K's
         * scales, Q2_K's mins */
        __m256i pairs[8];
        UNROLL
        for (int j = 0; j < 8; j++) {
            const int b = 2 * (j % 2);
            pairs[j] = three ? signed_byte_pair(sp[j / 2], b, b + 1)
                             : _mm256_srli_epi16(byte_pair_low(sp[j / 2], b, b + 1), 4);
        }
        UNROLL
        for (int t = 0; t < TT; t++) {
            const block_q8_K *xb = (const block_q8_K *)(x + (size_t)t * x_stride) + i;
            const __m256i m = pair_bsums(pairs, xb);
            const __m256 dy = _mm256_set1_ps(xb->d);
            if (three) {
                const __m256i q = _mm256_sub_epi32(acc[t], _mm256_slli_epi32(m, 2));
                run[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dy), _mm256_cvtepi32_ps(q), run[t]);
            } else {
                run[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dy), _mm256_cvtepi32_ps(acc[t]), run[t]);
                run[t] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, dy), _mm256_cvtepi32_ps(m), run[t]);
            }
        }
    }
    UNROLL
    for (int t = 0; t < TT; t++) _mm256_storeu_ps(out + t * out_stride, run[t]);
}

/* A tile of one packed Q6_K group times TT tokens.  Scales piece j holds
 * the signed scales of sub-blocks 4j .. 4j + 3 of every row; ql piece
 * 16h + 8(k % 2) + p and qh piece 8h + p give elements 4p .. 4p + 3 of
 * chunk 4h + k (low or high nibbles of ql as k < 2 or not, bits 2k and
 * 2k + 1 of qh), as in the unpacked format.  Two pieces' byte products
 * are summed in 16 bits (at most 2 x 2 x 63 x 128), then weighted by their
 * sub-block's scale into 32 bits; the -32 offset meets the bsums. */
FORCE_INLINE void packed_q6k_tile(const int TT, int64_t nb, const uint8_t *wg, const uint8_t *x,
                                  size_t x_stride, float *out, int64_t out_stride)
{
    const size_t pb = PACK_ROWS * sizeof(block_q6_K);
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2hi = _mm256_set1_epi8(0x30);
    __m256 run[PACKED_TILE_TOKS];
    UNROLL
    for (int t = 0; t < TT; t++) run[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *blk = wg + (size_t)i * pb;
        prefetch_packed_block(blk, pb);
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
        const uint8_t *scales = blk + 2 * PACK_ROWS;
        const uint8_t *ql = scales + QK_K / 16 * PACK_ROWS, *qh = ql + QK_K / 2 * PACK_ROWS;
        __m256i acc[PACKED_TILE_TOKS];
        UNROLL
        for (int t = 0; t < TT; t++) acc[t] = _mm256_setzero_si256();
        UNROLL
        for (int c = 0; c < 8; c++) {
            const int h = c / 4, k = c % 4;
            const __m256i sp = _mm256_loadu_si256((const __m256i *)(scales + 32 * (c / 2)));
            const int b = 2 * (c % 2); /* sub-blocks 2c and 2c + 1: bytes b and b + 1 of the piece */
            const __m256i sc0 = signed_byte_pair(sp, b, b), sc1 = signed_byte_pair(sp, b + 1, b + 1);
            __m256i u[8];
            UNROLL
            for (int p = 0; p < 8; p++) {
                const __m256i lo = _mm256_loadu_si256((const __m256i *)(ql + 32 * (16 * h + 8 * (k % 2) + p)));
                const __m256i hi = _mm256_loadu_si256((const __m256i *)(qh + 32 * (8 * h + p)));
                u[p] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo, 4 * (k / 2)), m4),
                                       _mm256_and_si256(move_bit(hi, 2 * k, 4), m2hi));
            }
            UNROLL
            for (int t = 0; t < TT; t++) {
                const int8_t *xq = ((const block_q8_K *)(x + (size_t)t * x_stride) + i)->qs + 32 * c;
                __m256i prod[8];
                UNROLL
                for (int p = 0; p < 8; p++) {
                    int32_t piece;
                    memcpy(&piece, xq + 4 * p, 4);
                    prod[p] = _mm256_maddubs_epi16(u[p], _mm256_set1_epi32(piece));
                }
                acc[t] = DOT_S16(acc[t], _mm256_add_epi16(prod[0], prod[1]), sc0);
                acc[t] = DOT_S16(acc[t], _mm256_add_epi16(prod[2], prod[3]), sc0);
                acc[t] = DOT_S16(acc[t], _mm256_add_epi16(prod[4], prod[5]), sc1);
                acc[t] = DOT_S16(acc[t], _mm256_add_epi16(prod[6], prod[7]), sc1);
            }
        }
        /* the scales as 16-bit pairs (sc_2j, sc_2j+1) per row lane */
        __m256i pairs[8];
        UNROLL
        for (int j = 0; j < 8; j++)
            pairs[j] = signed_byte_pair(_mm256_loadu_si256((const __m256i *)(scales + 32 * (j / 2))), 2 * (j % 2),
                                        2 * (j % 2) + 1);
        UNROLL
        for (int t = 0; t < TT; t++) {
            const block_q8_K *xb = (const block_q8_K *)(x + (size_t)t * x_stride) + i;
            const __m256i m = pair_bsums(pairs, xb);
            const __m256i q = _mm256_sub_epi32(acc[t], _mm256_slli_epi32(m, 5));
            run[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(xb->d)), _mm256_cvtepi32_ps(q), run[t]);
        }
    }
    UNROLL
    for (int t = 0; t < TT; t++) _mm256_storeu_ps(out + t * out_stride, run[t]);
}

#ifdef PACKED_PAIR_TILE
/* ==========================================================================
 * Packed K-quants, two row groups per 512-bit register (VNNI)
 * ========================================================================== */

/* As packed_pair_tile does for the legacy formats: the low half of every
 * register is the eight-row tile's register for group g, the high half
 * group g + 1's, so that a token's activation pieces (broadcast from
 * memory inside the dot products), bsums and scale serve sixteen rows.
 * In the eight-row tiles that per-token work was about half of the
 * instructions.  The sub-blocks' integer sums are formed with vpdpbusd
 * (four byte products a lane) instead of 16-bit pair sums and vpdpwssd:
 * the sums are exact, so the integers are the eight-row tiles' whatever
 * the instructions, and the float work per lane is the same operations
 * in the same order.  tools/kbench, one core, G multiply-adds a second,
 * eight-row tiles -> pair tiles (medians of three): Q4_K 92 -> 174 with
 * 2 tokens, 125 -> 276 with 8, 93 -> 254 with 64; Q5_K 75 -> 129, 93 ->
 * 156, 115 -> 173; Q6_K 77 -> 82, 84 -> 133, 83 -> 154. */

/* 32 bytes at a (the first group's) in the low half, 32 at b in the high. */
FORCE_INLINE __m512i load_group_pair(const uint8_t *a, const uint8_t *b)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}

/* The eight halves at a, then the eight at b, as sixteen floats. */
FORCE_INLINE __m512 halves_group_pair(const uint8_t *a, const uint8_t *b)
{
    const __m128i lo = _mm_loadu_si128((const __m128i *)a), hi = _mm_loadu_si128((const __m128i *)b);
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

/* A byte shuffle of every 128-bit quarter of v by the same 16 indices. */
FORCE_INLINE __m512i shuffle_quarters(__m512i v, __m128i pick)
{
    return _mm512_shuffle_epi8(v, _mm512_broadcast_i32x4(pick));
}

/* Per 32-bit lane (row) of v, its bytes b0 and b1 as the two 16-bit
 * halves, unsigned (byte_pair_low's 512-bit twin), or signed. */
FORCE_INLINE __m512i byte_pair_low512(__m512i v, int b0, int b1)
{
    return shuffle_quarters(v, _mm_setr_epi8(b0, -1, b1, -1, 4 + b0, -1, 4 + b1, -1, 8 + b0, -1, 8 + b1, -1, 12 + b0,
                                             -1, 12 + b1, -1));
}

FORCE_INLINE __m512i signed_byte_pair512(__m512i v, int b0, int b1)
{
    return _mm512_srai_epi16(shuffle_quarters(v, _mm_setr_epi8(-1, b0, -1, b1, -1, 4 + b0, -1, 4 + b1, -1, 8 + b0, -1,
                                                               8 + b1, -1, 12 + b0, -1, 12 + b1)),
                             8);
}

/* Per 32-bit lane (row) of v, its byte b as a 32-bit integer: unsigned,
 * or signed. */
FORCE_INLINE __m512i byte_lane512(__m512i v, int b)
{
    return shuffle_quarters(v, _mm_setr_epi8(b, -1, -1, -1, 4 + b, -1, -1, -1, 8 + b, -1, -1, -1, 12 + b, -1, -1, -1));
}

FORCE_INLINE __m512i signed_byte_lane512(__m512i v, int b)
{
    return _mm512_srai_epi32(
        shuffle_quarters(v, _mm_setr_epi8(-1, -1, -1, b, -1, -1, -1, 4 + b, -1, -1, -1, 8 + b, -1, -1, -1, 12 + b)),
        24);
}

/* acc plus, per row lane, the byte products of the quants of the four
 * pieces u[0..3] with the token's four pieces at xq: exact 32-bit sums. */
FORCE_INLINE __m512i four_pieces512(__m512i acc, const __m512i u[4], const int8_t *xq)
{
    UNROLL
    for (int p = 0; p < 4; p++) {
        int32_t piece;
        memcpy(&piece, xq + 4 * p, 4);
        acc = _mm512_dpbusd_epi32(acc, u[p], _mm512_set1_epi32(piece));
    }
    return acc;
}

/* Per row lane, sum_j of the two products of the 16-bit pair pairs[j]
 * with the token's bsums 2j and 2j + 1 (pair_bsums's 512-bit twin). */
FORCE_INLINE __m512i pair_bsums512(const __m512i pairs[8], const block_q8_K *xb)
{
    __m512i m = _mm512_setzero_si512();
    UNROLL
    for (int j = 0; j < 8; j++) {
        int32_t bs;
        memcpy(&bs, xb->bsums + 2 * j, 4);
        m = _mm512_dpwssd_epi32(m, pairs[j], _mm512_set1_epi32(bs));
    }
    return m;
}

/* Two consecutive packed Q4_K (five false) or Q5_K (five true) groups
 * times TT tokens: packed_q45k_tile with the first group's registers in
 * the low halves and the second's in the high halves.  The integers of a
 * row lane are the same exact sums, formed with byte dot products
 * (vpdpbusd) instead of 16-bit pair sums: per chunk, the sixteen elements
 * of pieces 0-3 and those of 4-7 each in one 32-bit sum, then weighted by
 * the chunk's scale -- for Q4_K through a 16-bit dot product (a sum of
 * sixteen products of at most 15 x 128 fits the low half of the lane,
 * the scale sits in the low half of the other operand, zero in the high
 * half), for Q5_K (up to 31 x 128 a product) through a 32-bit multiply.
 * The float work per row lane is packed_q45k_tile's: the same multiplies
 * and fused multiply-adds in the same order, so the results are
 * bit-identical to it. */
FORCE_INLINE void packed_q45k_pair_tile(const bool five, const int TT, int64_t nb, const uint8_t *wg, size_t group,
                                        const uint8_t *x, size_t x_stride, float *out, int64_t out_stride)
{
    const size_t pb = PACK_ROWS * (five ? sizeof(block_q5_K) : sizeof(block_q4_K));
    const __m512i m4 = _mm512_set1_epi8(0x0f), m6 = _mm512_set1_epi8(0x3f), m2 = _mm512_set1_epi8(3);
    __m512 run[PACKED_PAIR_TOKS];
    UNROLL
    for (int t = 0; t < TT; t++) run[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *ba = wg + (size_t)i * pb, *bb = ba + group;
        prefetch_packed_block(ba, pb);
        prefetch_packed_block(bb, pb);
        const __m512 dw = halves_group_pair(ba, bb);
        const __m512 dmin = halves_group_pair(ba + 16, bb + 16);
        const __m512i u0 = load_group_pair(ba + 32, bb + 32);
        const __m512i u1 = load_group_pair(ba + 64, bb + 64);
        const __m512i u2 = load_group_pair(ba + 96, bb + 96);
        const __m512i sc_lo = _mm512_and_si512(u0, m6), mn_lo = _mm512_and_si512(u1, m6);
        const __m512i sc_hi = _mm512_or_si512(_mm512_and_si512(u2, m4),
                                              _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), m2), 4));
        const __m512i mn_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), m4),
                                              _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), m2), 4));
        const size_t at_qs = five ? 128 + 8 * 32 : 128;
        __m512i acc[PACKED_PAIR_TOKS];
        UNROLL
        for (int t = 0; t < TT; t++) acc[t] = _mm512_setzero_si512();
        UNROLL
        for (int c = 0; c < 8; c++) {
            const __m512i sc = byte_lane512(c < 4 ? sc_lo : sc_hi, c % 4);
            __m512i u[8];
            UNROLL
            for (int p = 0; p < 8; p++) {
                const size_t at = at_qs + 32 * (8 * (c / 2) + p);
                u[p] = _mm512_and_si512(_mm512_srli_epi16(load_group_pair(ba + at, bb + at), 4 * (c % 2)), m4);
                if (five) {
                    const __m512i hb = load_group_pair(ba + 128 + 32 * p, bb + 128 + 32 * p);
                    const __m512i b = c <= 4 ? _mm512_slli_epi16(hb, 4 - c) : _mm512_srli_epi16(hb, c - 4);
                    u[p] = _mm512_or_si512(u[p], _mm512_and_si512(b, _mm512_set1_epi8(0x10)));
                }
            }
            UNROLL
            for (int t = 0; t < TT; t++) {
                const int8_t *xq = ((const block_q8_K *)(x + (size_t)t * x_stride) + i)->qs + 32 * c;
                const __m512i s0 = four_pieces512(_mm512_setzero_si512(), u, xq);
                const __m512i s1 = four_pieces512(_mm512_setzero_si512(), u + 4, xq + 16);
                if (five) {
                    acc[t] = _mm512_add_epi32(acc[t], _mm512_mullo_epi32(_mm512_add_epi32(s0, s1), sc));
                } else {
                    acc[t] = _mm512_dpwssd_epi32(acc[t], s0, sc);
                    acc[t] = _mm512_dpwssd_epi32(acc[t], s1, sc);
                }
            }
        }
        /* the mins as 16-bit pairs (m_k, m_k) per row lane, for bsums 2k
         * and 2k + 1 */
        __m512i pairs[8];
        UNROLL
        for (int k = 0; k < 8; k++) pairs[k] = byte_pair_low512(k < 4 ? mn_lo : mn_hi, k % 4, k % 4);
        UNROLL
        for (int t = 0; t < TT; t++) {
            const block_q8_K *xb = (const block_q8_K *)(x + (size_t)t * x_stride) + i;
            const __m512i m = pair_bsums512(pairs, xb);
            const __m512 dy = _mm512_set1_ps(xb->d);
            run[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dy), _mm512_cvtepi32_ps(acc[t]), run[t]);
            run[t] = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, dy), _mm512_cvtepi32_ps(m), run[t]);
        }
    }
    UNROLL
    for (int t = 0; t < TT; t++) _mm512_storeu_ps(out + t * out_stride, run[t]);
}

/* Per 32-bit lane (row) of v, its signed byte b as the low 16-bit half,
 * the high half zero. */
FORCE_INLINE __m512i signed_byte_word512(__m512i v, int b)
{
    return _mm512_srai_epi16(
        shuffle_quarters(v, _mm_setr_epi8(-1, b, -1, -1, -1, 4 + b, -1, -1, -1, 8 + b, -1, -1, -1, 12 + b, -1, -1)), 8);
}

/* move_bit on 512 bits. */
FORCE_INLINE __m512i move_bit512(__m512i v, int b, int to)
{
    return b <= to ? _mm512_slli_epi16(v, to - b) : _mm512_srli_epi16(v, b - to);
}

/* Two consecutive packed Q2_K (three false) or Q3_K (three true) groups
 * times TT tokens: packed_q23k_tile with the first group's registers in
 * the low halves and the second's in the high halves.  Each sub-block's
 * sixteen byte products are summed into one 32-bit lane by vpdpbusd (at
 * most 16 x 7 x 128, so the sum fits the lane's low 16 bits) and weighted
 * by a 16-bit dot product with the sub-block's scale in the low half of
 * the other operand, zero in the high half.  The integers are the same
 * exact sums as packed_q23k_tile's, and the float work per lane the same
 * operations in the same order: the results are bit-identical to it. */
FORCE_INLINE void packed_q23k_pair_tile(const bool three, const int TT, int64_t nb, const uint8_t *wg, size_t group,
                                        const uint8_t *x, size_t x_stride, float *out, int64_t out_stride)
{
    const size_t pb = PACK_ROWS * (three ? sizeof(block_q3_K) : sizeof(block_q2_K));
    const __m512i m2 = _mm512_set1_epi8(3), m4 = _mm512_set1_epi8(0x0f);
    __m512 run[PACKED_PAIR_TOKS];
    UNROLL
    for (int t = 0; t < TT; t++) run[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *ba = wg + (size_t)i * pb, *bb = ba + group;
        prefetch_packed_block(ba, pb);
        prefetch_packed_block(bb, pb);
        const __m512 dw = halves_group_pair(ba, bb);
        const __m512 dmin = three ? _mm512_setzero_ps() : halves_group_pair(ba + 16, bb + 16);
        /* per row lane: the scale bytes of sub-blocks 4k .. 4k + 3 */
        __m512i sp[4];
        size_t at_hmask = 0, at_qs;
        if (three) {
            const __m512i p0 = load_group_pair(ba + 16, bb + 16);
            const __m512i p1 = load_group_pair(ba + 48, bb + 48);
            const __m512i p2 = load_group_pair(ba + 80, bb + 80);
            sp[0] = _mm512_and_si512(p0, m4);
            sp[1] = _mm512_and_si512(p1, m4);
            sp[2] = _mm512_and_si512(_mm512_srli_epi16(p0, 4), m4);
            sp[3] = _mm512_and_si512(_mm512_srli_epi16(p1, 4), m4);
            UNROLL
            for (int k = 0; k < 4; k++)
                sp[k] = _mm512_sub_epi8(
                    _mm512_or_si512(sp[k], _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(p2, 2 * k), m2), 4)),
                    _mm512_set1_epi8(32));
            at_hmask = 112;
            at_qs = at_hmask + 8 * 32;
        } else {
            UNROLL
            for (int k = 0; k < 4; k++) sp[k] = load_group_pair(ba + 32 + 32 * k, bb + 32 + 32 * k);
            at_qs = 160;
        }
        __m512i acc[PACKED_PAIR_TOKS];
        UNROLL
        for (int t = 0; t < TT; t++) acc[t] = _mm512_setzero_si512();
        UNROLL
        for (int c = 0; c < 8; c++) {
            const int b = 2 * (c % 2); /* sub-blocks 2c and 2c + 1: bytes b and b + 1 of piece c / 2 */
            __m512i sc0, sc1;
            if (three) {
                sc0 = signed_byte_word512(sp[c / 2], b);
                sc1 = signed_byte_word512(sp[c / 2], b + 1);
            } else {
                sc0 = _mm512_and_si512(byte_lane512(sp[c / 2], b), m4);
                sc1 = _mm512_and_si512(byte_lane512(sp[c / 2], b + 1), m4);
            }
            __m512i u[8];
            UNROLL
            for (int p = 0; p < 8; p++) {
                const size_t at = at_qs + 32 * (8 * (c / 4) + p);
                u[p] = _mm512_and_si512(_mm512_srli_epi16(load_group_pair(ba + at, bb + at), 2 * (c % 4)), m2);
                if (three) {
                    const __m512i hb = load_group_pair(ba + at_hmask + 32 * p, bb + at_hmask + 32 * p);
                    u[p] = _mm512_or_si512(u[p], _mm512_and_si512(move_bit512(hb, c, 2), _mm512_set1_epi8(4)));
                }
            }
            UNROLL
            for (int t = 0; t < TT; t++) {
                const int8_t *xq = ((const block_q8_K *)(x + (size_t)t * x_stride) + i)->qs + 32 * c;
                acc[t] = _mm512_dpwssd_epi32(acc[t], four_pieces512(_mm512_setzero_si512(), u, xq), sc0);
                acc[t] = _mm512_dpwssd_epi32(acc[t], four_pieces512(_mm512_setzero_si512(), u + 4, xq + 16), sc1);
            }
        }
        /* per row lane, 16-bit pairs for bsums 2j and 2j + 1: Q3_K's
         * scales, Q2_K's mins */
        __m512i pairs[8];
        UNROLL
        for (int j = 0; j < 8; j++) {
            const int b = 2 * (j % 2);
            pairs[j] = three ? signed_byte_pair512(sp[j / 2], b, b + 1)
                             : _mm512_srli_epi16(byte_pair_low512(sp[j / 2], b, b + 1), 4);
        }
        UNROLL
        for (int t = 0; t < TT; t++) {
            const block_q8_K *xb = (const block_q8_K *)(x + (size_t)t * x_stride) + i;
            const __m512i m = pair_bsums512(pairs, xb);
            const __m512 dy = _mm512_set1_ps(xb->d);
            if (three) {
                const __m512i q = _mm512_sub_epi32(acc[t], _mm512_slli_epi32(m, 2));
                run[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dy), _mm512_cvtepi32_ps(q), run[t]);
            } else {
                run[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dy), _mm512_cvtepi32_ps(acc[t]), run[t]);
                run[t] = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, dy), _mm512_cvtepi32_ps(m), run[t]);
            }
        }
    }
    UNROLL
    for (int t = 0; t < TT; t++) _mm512_storeu_ps(out + t * out_stride, run[t]);
}

/* Two consecutive packed Q6_K groups times TT tokens: packed_q6k_tile
 * with the first group's registers in the low halves and the second's in
 * the high halves.  Each sub-block's sixteen byte products are summed
 * into one 32-bit lane by vpdpbusd and multiplied by its signed scale (a
 * 32-bit multiply: the sum reaches 16 x 63 x 128); the integers are the
 * same exact sums as packed_q6k_tile's, and the float work per lane the
 * same operations in the same order: the results are bit-identical to
 * it. */
FORCE_INLINE void packed_q6k_pair_tile(const int TT, int64_t nb, const uint8_t *wg, size_t group, const uint8_t *x,
                                       size_t x_stride, float *out, int64_t out_stride)
{
    const size_t pb = PACK_ROWS * sizeof(block_q6_K);
    const size_t at_scales = 2 * PACK_ROWS, at_ql = at_scales + QK_K / 16 * PACK_ROWS;
    const size_t at_qh = at_ql + QK_K / 2 * PACK_ROWS;
    const __m512i m4 = _mm512_set1_epi8(0x0f), m2hi = _mm512_set1_epi8(0x30);
    __m512 run[PACKED_PAIR_TOKS];
    UNROLL
    for (int t = 0; t < TT; t++) run[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *ba = wg + (size_t)i * pb, *bb = ba + group;
        prefetch_packed_block(ba, pb);
        prefetch_packed_block(bb, pb);
        const __m512 dw = halves_group_pair(ba, bb);
        __m512i acc[PACKED_PAIR_TOKS];
        UNROLL
        for (int t = 0; t < TT; t++) acc[t] = _mm512_setzero_si512();
        UNROLL
        for (int c = 0; c < 8; c++) {
            const int h = c / 4, k = c % 4;
            const __m512i sp = load_group_pair(ba + at_scales + 32 * (c / 2), bb + at_scales + 32 * (c / 2));
            const int b = 2 * (c % 2); /* sub-blocks 2c and 2c + 1: bytes b and b + 1 of the piece */
            const __m512i sc0 = signed_byte_lane512(sp, b), sc1 = signed_byte_lane512(sp, b + 1);
            __m512i u[8];
            UNROLL
            for (int p = 0; p < 8; p++) {
                const size_t at_lo = at_ql + 32 * (16 * h + 8 * (k % 2) + p), at_hi = at_qh + 32 * (8 * h + p);
                const __m512i lo = load_group_pair(ba + at_lo, bb + at_lo);
                const __m512i hi = load_group_pair(ba + at_hi, bb + at_hi);
                u[p] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lo, 4 * (k / 2)), m4),
                                       _mm512_and_si512(move_bit512(hi, 2 * k, 4), m2hi));
            }
            UNROLL
            for (int t = 0; t < TT; t++) {
                const int8_t *xq = ((const block_q8_K *)(x + (size_t)t * x_stride) + i)->qs + 32 * c;
                const __m512i s0 = four_pieces512(_mm512_setzero_si512(), u, xq);
                const __m512i s1 = four_pieces512(_mm512_setzero_si512(), u + 4, xq + 16);
                acc[t] = _mm512_add_epi32(acc[t],
                                          _mm512_add_epi32(_mm512_mullo_epi32(s0, sc0), _mm512_mullo_epi32(s1, sc1)));
            }
        }
        /* the scales as 16-bit pairs (sc_2j, sc_2j+1) per row lane */
        __m512i pairs[8];
        UNROLL
        for (int j = 0; j < 8; j++) {
            const size_t at = at_scales + 32 * (j / 2);
            pairs[j] = signed_byte_pair512(load_group_pair(ba + at, bb + at), 2 * (j % 2), 2 * (j % 2) + 1);
        }
        UNROLL
        for (int t = 0; t < TT; t++) {
            const block_q8_K *xb = (const block_q8_K *)(x + (size_t)t * x_stride) + i;
            const __m512i m = pair_bsums512(pairs, xb);
            const __m512i q = _mm512_sub_epi32(acc[t], _mm512_slli_epi32(m, 5));
            run[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(xb->d)), _mm512_cvtepi32_ps(q), run[t]);
        }
    }
    UNROLL
    for (int t = 0; t < TT; t++) _mm512_storeu_ps(out + t * out_stride, run[t]);
}
#else
#define packed_q23k_pair_tile(...) ((void)0)
#define packed_q45k_pair_tile(...) ((void)0)
#define packed_q6k_pair_tile(...) ((void)0)
#endif

/* The row groups and token tiles of a packed K-quant product, as
 * DEFINE_PACKED_GEMM walks them: tokens in steps of PACKED_PAIR_TOKS, and
 * within a step two groups at a time with the pair tile PAIR where the
 * path builds it, two remain and there are several tokens, else one group
 * with the eight-row tile TILE in tiles of PACKED_TILE_TOKS (a lone token
 * streams its weights with TILE, as DEFINE_PACKED_GEMM says why).  The
 * tiles take the arguments after PAIR (a format flag, or none) first. */
#define DEFINE_PACKED_KQ_GEMM(name, block, TILE, PAIR, ...) \
    static void gemm_packed_##name(int64_t n, int64_t n_rows, int64_t n_tok, const void *wp, const void *x, \
                                   size_t xs, const int32_t *x_sums, float *y, int64_t ys) \
    { \
        (void)x_sums; \
        const int64_t nb = n / QK_K; \
        const size_t group = (size_t)nb * PACK_ROWS * sizeof(block); \
        const int64_t n_groups = n_rows / PACK_ROWS; \
        for (int64_t t = 0; t < n_tok; t += PACKED_PAIR_TOKS) { \
            const int64_t tt = HEARTH_MIN(PACKED_PAIR_TOKS, n_tok - t); \
            const uint8_t *xt = (const uint8_t *)x + (size_t)t * xs; \
            for (int64_t g = 0; g < n_groups;) { \
                const uint8_t *wg = (const uint8_t *)wp + (size_t)g * group; \
                float *out = y + t * ys + g * PACK_ROWS; \
                if (PACKED_PAIRS && tt > 1 && n_groups - g >= 2) { \
                    switch (tt) { \
                    case 2: PAIR(__VA_ARGS__ 2, nb, wg, group, xt, xs, out, ys); break; \
                    case 3: PAIR(__VA_ARGS__ 3, nb, wg, group, xt, xs, out, ys); break; \
                    case 4: PAIR(__VA_ARGS__ 4, nb, wg, group, xt, xs, out, ys); break; \
                    case 5: PAIR(__VA_ARGS__ 5, nb, wg, group, xt, xs, out, ys); break; \
                    case 6: PAIR(__VA_ARGS__ 6, nb, wg, group, xt, xs, out, ys); break; \
                    case 7: PAIR(__VA_ARGS__ 7, nb, wg, group, xt, xs, out, ys); break; \
                    default: PAIR(__VA_ARGS__ PACKED_PAIR_TOKS, nb, wg, group, xt, xs, out, ys); break; \
                    } \
                    g += 2; \
                    continue; \
                } \
                for (int64_t u = 0; u < tt; u += PACKED_TILE_TOKS) { \
                    const int64_t uu = HEARTH_MIN(PACKED_TILE_TOKS, tt - u); \
                    const uint8_t *xu = xt + (size_t)u * xs; \
                    float *ou = out + u * ys; \
                    if (uu == PACKED_TILE_TOKS) \
                        TILE(__VA_ARGS__ PACKED_TILE_TOKS, nb, wg, xu, xs, ou, ys); \
                    else if (PACKED_TILE_TOKS > 3 && uu == 3) \
                        TILE(__VA_ARGS__ 3, nb, wg, xu, xs, ou, ys); \
                    else if (PACKED_TILE_TOKS > 2 && uu == 2) \
                        TILE(__VA_ARGS__ 2, nb, wg, xu, xs, ou, ys); \
                    else \
                        TILE(__VA_ARGS__ 1, nb, wg, xu, xs, ou, ys); \
                } \
                g += 1; \
            } \
        } \
    }

DEFINE_PACKED_KQ_GEMM(q2_k, block_q2_K, packed_q23k_tile, packed_q23k_pair_tile, false, )
DEFINE_PACKED_KQ_GEMM(q3_k, block_q3_K, packed_q23k_tile, packed_q23k_pair_tile, true, )
DEFINE_PACKED_KQ_GEMM(q4_k, block_q4_K, packed_q45k_tile, packed_q45k_pair_tile, false, )
DEFINE_PACKED_KQ_GEMM(q5_k, block_q5_K, packed_q45k_tile, packed_q45k_pair_tile, true, )
DEFINE_PACKED_KQ_GEMM(q6_k, block_q6_K, packed_q6k_tile, packed_q6k_pair_tile, )

#include "int_tiles_impl.h"

/* The packed-weight table entries, for the including file's table. */
#define INT_KERNEL_PACKED_TABLE \
    [HEARTH_TYPE_Q4_0] = gemm_packed_q4_0, [HEARTH_TYPE_Q5_0] = gemm_packed_q5_0, \
    [HEARTH_TYPE_Q8_0] = gemm_packed_q8_0, \
    [HEARTH_TYPE_MXFP4] = gemm_packed_mxfp4, \
    [HEARTH_TYPE_Q2_K] = gemm_packed_q2_k, [HEARTH_TYPE_Q3_K] = gemm_packed_q3_k, \
    [HEARTH_TYPE_Q4_K] = gemm_packed_q4_k, [HEARTH_TYPE_Q5_K] = gemm_packed_q5_k, \
    [HEARTH_TYPE_Q6_K] = gemm_packed_q6_k

#endif /* HEARTH_X86_INT_H */

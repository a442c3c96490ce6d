/*
 * tiles.h -- what the kernel files of every instruction set share: the
 * integer formats' block sizes and scale unpacking, the walk of a gemm
 * over its grid of register tiles, and the table entries.
 *
 * Each instruction set's file supplies tile kernels (a fixed number of
 * weight rows times a fixed number of tokens, computed from registers);
 * DEFINE_TILED_GEMM turns one into the gemm and vec_dot entries of
 * kernels.h.  Because every call shape runs the same tile code, a row-token
 * pair gives the same bits whatever tile it falls in (see kernels.h).
 */
#ifndef HEARTH_TILES_H
#define HEARTH_TILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "quant.h"

#define FORCE_INLINE static inline __attribute__((always_inline))

/* The loops over a tile's rows, tokens and chunks must be unrolled for its
 * vectors to live in registers. */
#define UNROLL _Pragma("GCC unroll 16")

/* The float weight types every path's float tiles read (activations stay
 * F32), and the bytes of one weight. */
enum float_format { FLOAT_F32, FLOAT_F16, FLOAT_BF16 };

FORCE_INLINE size_t float_bytes(enum float_format f)
{
    return f == FLOAT_F32 ? sizeof(float) : sizeof(uint16_t);
}

/* The integer formats of the row tiles: the legacy 32-element blocks and
 * MXFP4's (times Q8_0, or Q8_1 where the format has a min) and the K-quants'
 * 256-element super-blocks (times Q8_K). */
enum legacy_format { LEGACY_Q4_0, LEGACY_Q4_1, LEGACY_Q5_0, LEGACY_Q5_1, LEGACY_Q8_0, LEGACY_MXFP4 };

FORCE_INLINE size_t legacy_block_bytes(enum legacy_format f)
{
    switch (f) {
    case LEGACY_Q4_0: return sizeof(block_q4_0);
    case LEGACY_Q4_1: return sizeof(block_q4_1);
    case LEGACY_Q5_0: return sizeof(block_q5_0);
    case LEGACY_Q5_1: return sizeof(block_q5_1);
    case LEGACY_MXFP4: return sizeof(block_mxfp4);
    default: return sizeof(block_q8_0);
    }
}

FORCE_INLINE bool legacy_affine(enum legacy_format f)
{
    return f == LEGACY_Q4_1 || f == LEGACY_Q5_1;
}

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

/* The 6-bit scales and mins of Q4_K/Q5_K (8 each) as the bytes of two
 * words, from the 12 packed bytes (see q4k_unpack_scales in quant.c). */
FORCE_INLINE void unpack_q4k_scales(const uint8_t p[12], uint64_t *scales, uint64_t *mins)
{
    uint32_t u0, u1, u2;
    memcpy(&u0, p, 4);
    memcpy(&u1, p + 4, 4);
    memcpy(&u2, p + 8, 4);
    const uint32_t sc_lo = u0 & 0x3f3f3f3f, mn_lo = u1 & 0x3f3f3f3f;
    const uint32_t sc_hi = (u2 & 0x0f0f0f0f) | ((u0 >> 6) & 0x03030303) << 4;
    const uint32_t mn_hi = ((u2 >> 4) & 0x0f0f0f0f) | ((u1 >> 6) & 0x03030303) << 4;
    *scales = sc_lo | (uint64_t)sc_hi << 32;
    *mins = mn_lo | (uint64_t)mn_hi << 32;
}

/* The 16 6-bit scales of Q3_K as the bytes of four words, still biased by
 * 32 (see q3k_unpack_scales in quant.c). */
FORCE_INLINE void unpack_q3k_scale_words(const uint8_t p[12], uint32_t s[4])
{
    uint32_t a0, a1, a2;
    memcpy(&a0, p, 4);
    memcpy(&a1, p + 4, 4);
    memcpy(&a2, p + 8, 4);
    s[0] = (a0 & 0x0f0f0f0f) | (a2 & 0x03030303) << 4;
    s[1] = (a1 & 0x0f0f0f0f) | ((a2 >> 2) & 0x03030303) << 4;
    s[2] = ((a0 >> 4) & 0x0f0f0f0f) | ((a2 >> 4) & 0x03030303) << 4;
    s[3] = ((a1 >> 4) & 0x0f0f0f0f) | ((a2 >> 6) & 0x03030303) << 4;
}

/* gemm walks full tiles of TROWS x TTOKS, token tiles outermost so that a
 * tile's activations stay in cache while all the rows pass them; the
 * leftover tokens (fewer than TTOKS, at most 3) form one narrower tile, and
 * leftover rows are done one at a time.  All of them run the same tile
 * code, so every call shape computes a row-token pair alike.
 * TILE(fmt, rows, tokens, n_blocks, w, w_stride, x, x_stride, out,
 * out_stride) is a tile kernel. */
#define TILE_ROWS_PASS(TILE, fmt, TROWS, TOKS, t) \
    do { \
        int64_t r = 0; \
        for (; r + (TROWS) <= n_rows; r += (TROWS)) \
            TILE(fmt, TROWS, TOKS, nb, wp + (size_t)r * ws, ws, xp + (size_t)(t) * xs, xs, y + (t) * ys + r, ys); \
        for (; r < n_rows; r++) \
            TILE(fmt, 1, TOKS, nb, wp + (size_t)r * ws, ws, xp + (size_t)(t) * xs, xs, y + (t) * ys + r, ys); \
    } while (0)

/* k leftover tokens, as a tile width: only widths below the full tile's
 * occur, so the others need no tile of their own (1 is never used there). */
#define LEFTOVER_TOKS(k, TTOKS) ((k) < (TTOKS) ? (k) : 1)

#define DEFINE_TILED_GEMM(name, TILE, fmt, TROWS, TTOKS, block_elems) \
    _Static_assert((TTOKS) >= 1 && (TTOKS) <= 4, "leftover tokens are dispatched up to 3"); \
    static void gemm_##name(int64_t n, int64_t n_rows, int64_t n_tok, const void *w, size_t ws, \
                            const void *x, size_t xs, float *y, int64_t ys) \
    { \
        const uint8_t *wp = w, *xp = x; \
        const int64_t nb = n / (block_elems); \
        int64_t t = 0; \
        for (; t + (TTOKS) <= n_tok; t += (TTOKS)) TILE_ROWS_PASS(TILE, fmt, TROWS, TTOKS, t); \
        switch (n_tok - t) { \
        case 3: TILE_ROWS_PASS(TILE, fmt, TROWS, LEFTOVER_TOKS(3, TTOKS), t); break; \
        case 2: TILE_ROWS_PASS(TILE, fmt, TROWS, LEFTOVER_TOKS(2, TTOKS), t); break; \
        case 1: TILE_ROWS_PASS(TILE, fmt, TROWS, 1, t); break; \
        default: break; \
        } \
    } \
    static void vec_dot_##name(int64_t n, float *s, const void *w, const void *x) \
    { \
        gemm_##name(n, 1, 1, w, 0, x, 0, s, 0); \
    }

/* The scale of a Q8_0 block whose largest magnitude m is finite, as
 * quant.c's q8_block(): the half d, and in *inv the factor that takes the
 * block to its quants (0 for an all-zero block, infinite where d is too
 * small to invert: then the quants are 0). */
FORCE_INLINE hearth_f16 q8_block_scale(float m, float *inv)
{
    const float d = m / 127.0f;
    hearth_f16 dh = hearth_f32_to_f16(d);
    *inv = d > 0.0f ? 1.0f / d : 0.0f;
    if ((dh & 0x7fff) == 0x7c00) { /* d overflows a half: saturate */
        dh = hearth_f32_to_f16(65504.0f);
        *inv = 1.0f / 65504.0f;
    }
    return dh;
}

/* act_q8_0 and act_q8_1 from a path's block quantizer
 * `hearth_f16 block_fn(const float *x, int8_t qs[32], int *sum)` (returns the
 * block's F16 scale and the sum of its quants).  Q8_1's s is half(d * sum),
 * saturating, as quant.c's q8_1_quantize_row.  The including file provides
 * half_to_float() and hearth_f32_to_f16(). */
#define DEFINE_ACT_Q8_LEGACY(block_fn) \
    static void act_q8_0(const float *x, void *y, int64_t n) \
    { \
        block_q8_0 *out = y; \
        int sum; \
        for (int64_t b = 0; b < n / QK8_0; b++) out[b].d = block_fn(x + 32 * b, out[b].qs, &sum); \
    } \
    static void act_q8_1(const float *x, void *y, int64_t n) \
    { \
        block_q8_1 *out = y; \
        for (int64_t b = 0; b < n / QK8_1; b++) { \
            int sum; \
            out[b].d = block_fn(x + 32 * b, out[b].qs, &sum); \
            float s = half_to_float(out[b].d) * (float)sum; \
            if (s == s) s = s > 65504.0f ? 65504.0f : s < -65504.0f ? -65504.0f : s; \
            out[b].s = hearth_f32_to_f16(s); \
        } \
    }

/* act_q8_k from a path's `bool max_fn(const float *x, float *m)` (*m the
 * largest magnitude of the QK_K floats at x; false, or *m NaN, where one
 * is NaN or infinite) and `void block_fn(const float *x, float f1, float
 * f2, float inv, block_q8_K *out)` (the quants of x * f1 * f2 * inv,
 * each product rounded in that order, halves to even, and the bsums), as
 * quant.c's q8k_quantize_row: the block is scaled by 2^-e (exactly, as
 * f1 f2) so that its largest magnitude lies in [0.5, 1), and d = max / 127
 * there.  Blocks whose scale is extreme enough for that function's special
 * cases (zero, non-finite, near the float range's ends) are handed to it. */
#define DEFINE_ACT_Q8_K(max_fn, block_fn) \
    static void act_q8_k(const float *x, void *y, int64_t n) \
    { \
        block_q8_K *out = y; \
        for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) { \
            float m; \
            if (!max_fn(x, &m) || !(m >= 0x1p-100f && m <= 0x1p100f)) { \
                q8k_quantize_row(x, &out[b], QK_K); \
                continue; \
            } \
            int e; \
            (void)frexpf(m, &e); \
            const float f1 = ldexpf(1.0f, -e / 2), f2 = ldexpf(1.0f, -e - (-e / 2)); \
            const float d = m * f1 * f2 / 127.0f; /* the normalised scale, a normal float */ \
            out[b].d = ldexpf(d, e); \
            block_fn(x, f1, f2, 1.0f / d, &out[b]); \
        } \
    }

/* Table entries of the integer formats, for the including file's table. */
#define INT_KERNEL_ACT_TYPES \
    [HEARTH_TYPE_Q4_0] = HEARTH_TYPE_Q8_0, [HEARTH_TYPE_Q4_1] = HEARTH_TYPE_Q8_1, \
    [HEARTH_TYPE_Q5_0] = HEARTH_TYPE_Q8_0, [HEARTH_TYPE_Q5_1] = HEARTH_TYPE_Q8_1, \
    [HEARTH_TYPE_Q8_0] = HEARTH_TYPE_Q8_0, [HEARTH_TYPE_MXFP4] = HEARTH_TYPE_Q8_0, \
    [HEARTH_TYPE_Q2_K] = HEARTH_TYPE_Q8_K, \
    [HEARTH_TYPE_Q3_K] = HEARTH_TYPE_Q8_K, [HEARTH_TYPE_Q4_K] = HEARTH_TYPE_Q8_K, \
    [HEARTH_TYPE_Q5_K] = HEARTH_TYPE_Q8_K, [HEARTH_TYPE_Q6_K] = HEARTH_TYPE_Q8_K
#define INT_KERNEL_ACT_CONVERTS \
    [HEARTH_TYPE_Q8_0] = act_q8_0, [HEARTH_TYPE_Q8_1] = act_q8_1, [HEARTH_TYPE_Q8_K] = act_q8_k
#define INT_KERNEL_TABLE(fn) \
    [HEARTH_TYPE_Q4_0] = fn##_q4_0, [HEARTH_TYPE_Q4_1] = fn##_q4_1, [HEARTH_TYPE_Q5_0] = fn##_q5_0, \
    [HEARTH_TYPE_Q5_1] = fn##_q5_1, [HEARTH_TYPE_Q8_0] = fn##_q8_0, [HEARTH_TYPE_MXFP4] = fn##_mxfp4, \
    [HEARTH_TYPE_Q2_K] = fn##_q2_k, \
    [HEARTH_TYPE_Q3_K] = fn##_q3_k, [HEARTH_TYPE_Q4_K] = fn##_q4_k, [HEARTH_TYPE_Q5_K] = fn##_q5_k, \
    [HEARTH_TYPE_Q6_K] = fn##_q6_k

static inline void act_f32(const float *x, void *y, int64_t n)
{
    memcpy(y, x, (size_t)n * sizeof(float));
}

/* The entries of a vector path's table (kernels.h) after its name: the
 * float types, read against F32 activations, and the integer formats.
 * The path's file defines the float kernels, its integer header the rest. */
#define VECTOR_KERNEL_ENTRIES \
    .act_type = {[HEARTH_TYPE_F32] = HEARTH_TYPE_F32, [HEARTH_TYPE_F16] = HEARTH_TYPE_F32, \
                 [HEARTH_TYPE_BF16] = HEARTH_TYPE_F32, INT_KERNEL_ACT_TYPES}, \
    .act_convert = {[HEARTH_TYPE_F32] = act_f32, INT_KERNEL_ACT_CONVERTS}, \
    .vec_dot = {[HEARTH_TYPE_F32] = vec_dot_f32, [HEARTH_TYPE_F16] = vec_dot_f16, \
                [HEARTH_TYPE_BF16] = vec_dot_bf16, INT_KERNEL_TABLE(vec_dot)}, \
    .gemm = {[HEARTH_TYPE_F32] = gemm_f32, [HEARTH_TYPE_F16] = gemm_f16, [HEARTH_TYPE_BF16] = gemm_bf16, \
             INT_KERNEL_TABLE(gemm)}

#endif /* HEARTH_TILES_H */

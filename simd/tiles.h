/*
 * tiles.h -- what the kernel files of every instruction set share: the
 * walk of a gemm over its grid of register tiles, and the table entries.
 *
 * Each instruction set's file supplies tile kernels (a fixed number of
 * weight rows times a fixed number of tokens, computed from registers);
 * DEFINE_TILED_GEMM turns one into the gemm and vec_dot entries of
 * kernels.h.  Because every call shape runs the same tile code, a row-token
 * pair gives the same bits whatever tile it falls in (see kernels.h).
 */
#ifndef HEARTH_TILES_H
#define HEARTH_TILES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

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

/* Table entries of the integer formats, for the including file's table. */
#define INT_KERNEL_ACT_TYPES \
    [HEARTH_TYPE_Q4_0] = HEARTH_TYPE_Q8_0, [HEARTH_TYPE_Q4_1] = HEARTH_TYPE_Q8_1, \
    [HEARTH_TYPE_Q5_0] = HEARTH_TYPE_Q8_0, [HEARTH_TYPE_Q5_1] = HEARTH_TYPE_Q8_1, \
    [HEARTH_TYPE_Q8_0] = HEARTH_TYPE_Q8_0, [HEARTH_TYPE_Q2_K] = HEARTH_TYPE_Q8_K, \
    [HEARTH_TYPE_Q3_K] = HEARTH_TYPE_Q8_K, [HEARTH_TYPE_Q4_K] = HEARTH_TYPE_Q8_K, \
    [HEARTH_TYPE_Q5_K] = HEARTH_TYPE_Q8_K, [HEARTH_TYPE_Q6_K] = HEARTH_TYPE_Q8_K
#define INT_KERNEL_ACT_CONVERTS \
    [HEARTH_TYPE_Q8_0] = act_q8_0, [HEARTH_TYPE_Q8_1] = act_q8_1, [HEARTH_TYPE_Q8_K] = act_q8_k
#define INT_KERNEL_TABLE(fn) \
    [HEARTH_TYPE_Q4_0] = fn##_q4_0, [HEARTH_TYPE_Q4_1] = fn##_q4_1, [HEARTH_TYPE_Q5_0] = fn##_q5_0, \
    [HEARTH_TYPE_Q5_1] = fn##_q5_1, [HEARTH_TYPE_Q8_0] = fn##_q8_0, [HEARTH_TYPE_Q2_K] = fn##_q2_k, \
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

/*
 * float_tiles_impl.h -- the register tile of the float weight formats
 * (F32, F16, BF16 rows times F32 activations), written once for every
 * vector path; tiles.h's DEFINE_TILED_GEMM walks the grid.
 *
 * Included by avx2.c, avx512.c and neon.c, each compiled with its own
 * instruction-set flags, after they define FLOAT_TILE_ROWS,
 * FLOAT_TILE_TOKS, FLOAT_TILE_PREFETCH (whether the narrow tiles prefetch
 * the next tile's rows) and these (all FORCE_INLINE):
 *
 *   fvec, FVEC_LANES           a vector of float lanes and how many
 *   fvec_zero(), fvec_load(p)  zeros; FVEC_LANES floats from p
 *   fvec_fma(acc, w, x)        acc + w x per lane, one rounding
 *   fvec_total(v)              the lanes' sum, in the path's fixed tree
 *   load_weights(f, row, i)    FVEC_LANES weights of a row from element
 *                              i on, as floats (exact conversions)
 *   load_weights_tail(f, row, i, n), load_floats_tail(x, i, n)
 *                              the last n - i (< FVEC_LANES) of them,
 *                              zero-padded
 *   prefetch_next_rows(p, w_stride, rows)
 *
 * and FLOAT_PACKED_PREFETCH, whether the packed tiles (of a few tokens)
 * ask for their stream ahead.
 *
 * Each row-token pair sums FVEC_LANES partial sums by fused
 * multiply-adds along the row, then adds the lanes up; a pair is computed
 * the same way wherever it falls in the grid (edge tiles run the same code
 * with fewer rows or tokens), so a row's result does not depend on the
 * tile or the batch it is in.
 */
#ifndef HEARTH_FLOAT_TILES_IMPL_H
#define HEARTH_FLOAT_TILES_IMPL_H

FORCE_INLINE void float_tile(enum float_format f, const int TR, const int TT, int64_t n, const uint8_t *w,
                             size_t w_stride, const uint8_t *x, size_t x_stride, float *out,
                             int64_t out_stride)
{
    fvec acc[FLOAT_TILE_ROWS][FLOAT_TILE_TOKS];
    UNROLL
    for (int r = 0; r < TR; r++)
        UNROLL
        for (int t = 0; t < TT; t++) acc[r][t] = fvec_zero();
    int64_t i = 0;
    for (; i + FVEC_LANES <= n; i += FVEC_LANES) {
        fvec xv[FLOAT_TILE_TOKS];
        UNROLL
        for (int t = 0; t < TT; t++) xv[t] = fvec_load((const float *)(x + (size_t)t * x_stride) + i);
        UNROLL
        for (int r = 0; r < TR; r++) {
            const uint8_t *row = w + (size_t)r * w_stride;
            const fvec wv = load_weights(f, row, i);
            UNROLL
            for (int t = 0; t < TT; t++) acc[r][t] = fvec_fma(acc[r][t], wv, xv[t]);
            /* Once per cache line, the next tile's rows at this place, as
             * the integer row kernels do: on AVX-512, one thread's decode
             * of F16 rows streamed at 16-17 GB/s without it and 17-21 with
             * it (tools/kbench, membw 28 GB/s), and the RWKV-6 1.6B F16
             * decode went from 4.8-5.3 to 6.1-6.8 tokens/s on one thread
             * and from 7.3-7.6 to 9.2-9.9 on two (BENCHMARKS.md).  Only in
             * the narrow tiles (a few tokens, whose rows are read once):
             * a prefill's full tiles read their rows again for every tile
             * of tokens, from the cache, and lost 5% to the extra
             * instructions. */
            const size_t off = (size_t)i * float_bytes(f);
            if (FLOAT_TILE_PREFETCH && TT < FLOAT_TILE_TOKS && off % 64 == 0)
                prefetch_next_rows(row + off, w_stride, TR);
        }
    }
    if (i < n) {
        fvec xv[FLOAT_TILE_TOKS];
        UNROLL
        for (int t = 0; t < TT; t++) xv[t] = load_floats_tail((const float *)(x + (size_t)t * x_stride), i, n);
        UNROLL
        for (int r = 0; r < TR; r++) {
            const fvec wv = load_weights_tail(f, w + (size_t)r * w_stride, i, n);
            UNROLL
            for (int t = 0; t < TT; t++) acc[r][t] = fvec_fma(acc[r][t], wv, xv[t]);
        }
    }
    UNROLL
    for (int t = 0; t < TT; t++)
        UNROLL
        for (int r = 0; r < TR; r++) out[t * out_stride + r] = fvec_total(acc[r][t]);
}

#define DEFINE_FLOAT_GEMM(name, fmt) \
    DEFINE_TILED_GEMM(name, float_tile, fmt, FLOAT_TILE_ROWS, FLOAT_TILE_TOKS, 1)

DEFINE_FLOAT_GEMM(f32, FLOAT_F32)
DEFINE_FLOAT_GEMM(f16, FLOAT_F16)
DEFINE_FLOAT_GEMM(bf16, FLOAT_BF16)

/* ---- packed float weights (kernels.h) ---------------------------------------- */

_Static_assert(FLOAT_PACK_ROWS == FLOAT_TILE_ROWS, "a tile reads one packed group");
_Static_assert(FLOAT_PACK_CHUNK % FVEC_LANES == 0, "a chunk is whole vectors");

/* Whether and how far ahead a packed tile asks for its stream, into the
 * second-level cache, once per cache line.  Packed rows are one stream,
 * which the hardware prefetchers follow: for one token the prefetches
 * only cost (tools/kbench, F16 and BF16, one thread, two rounds on one
 * AVX-512 core whose tools/membw is 28-33 GB/s: streamed 26.5-31.2 GB/s
 * without them, 19.5-26.9 asking 4 KiB ahead, 22.1-26.0 at 1 KiB,
 * 24.1-26.5 at 16 KiB; in cache 101-105 GB/s without, 67-94 with; the
 * unpacked rows 21-22 streamed).  With two or three tokens a pass
 * the arithmetic per byte doubles and asking ahead helps again, as it
 * does Q8_0 (streamed 16-22 GB/s without, 19-22 at 4 KiB, 21-23 at 16
 * KiB, the unpacked rows 19-26), so only those tiles ask, 16 KiB ahead as
 * the integer kernels do.  A prefill's full tiles read from the cache
 * and do not ask. */
#ifndef FLOAT_PACKED_PREFETCH_AHEAD
#define FLOAT_PACKED_PREFETCH_AHEAD 16384
#endif

/* TR rows (a whole group, FLOAT_PACK_ROWS, or a row after the last
 * group) times TT tokens, g the group's first byte: float_tile's
 * arithmetic in the same order, each load taken from the chunk that holds
 * it.  A full chunk holds FLOAT_PACK_CHUNK elements of each row, the last
 * one m = n % FLOAT_PACK_CHUNK; its whole vectors and its tail are loaded
 * as float_tile loads the row's last elements, so every pair adds the
 * same products in the same order. */
FORCE_INLINE void float_packed_tile(enum float_format f, const int TR, const int TT, int64_t n, const uint8_t *g,
                                    const uint8_t *x, size_t x_stride, float *out, int64_t out_stride)
{
    const size_t eb = float_bytes(f), chunk_bytes = (size_t)TR * FLOAT_PACK_CHUNK * eb;
    fvec acc[FLOAT_TILE_ROWS][FLOAT_TILE_TOKS];
    UNROLL
    for (int r = 0; r < TR; r++)
        UNROLL
        for (int t = 0; t < TT; t++) acc[r][t] = fvec_zero();
    int64_t i = 0;
    for (; i + FLOAT_PACK_CHUNK <= n; i += FLOAT_PACK_CHUNK, g += chunk_bytes) {
        if (FLOAT_PACKED_PREFETCH && TT > 1 && TT < FLOAT_TILE_TOKS)
            for (size_t off = 0; off < chunk_bytes; off += 64)
                __builtin_prefetch((const void *)((uintptr_t)g + FLOAT_PACKED_PREFETCH_AHEAD + off), 0, 2);
        UNROLL
        for (int j = 0; j < FLOAT_PACK_CHUNK; j += FVEC_LANES) {
            fvec xv[FLOAT_TILE_TOKS];
            UNROLL
            for (int t = 0; t < TT; t++) xv[t] = fvec_load((const float *)(x + (size_t)t * x_stride) + i + j);
            UNROLL
            for (int r = 0; r < TR; r++) {
                const fvec wv = load_weights(f, g + (size_t)r * FLOAT_PACK_CHUNK * eb, j);
                UNROLL
                for (int t = 0; t < TT; t++) acc[r][t] = fvec_fma(acc[r][t], wv, xv[t]);
            }
        }
    }
    const int64_t m = n - i;
    int64_t j = 0;
    for (; j + FVEC_LANES <= m; j += FVEC_LANES) {
        fvec xv[FLOAT_TILE_TOKS];
        UNROLL
        for (int t = 0; t < TT; t++) xv[t] = fvec_load((const float *)(x + (size_t)t * x_stride) + i + j);
        UNROLL
        for (int r = 0; r < TR; r++) {
            const fvec wv = load_weights(f, g + (size_t)r * (size_t)m * eb, j);
            UNROLL
            for (int t = 0; t < TT; t++) acc[r][t] = fvec_fma(acc[r][t], wv, xv[t]);
        }
    }
    if (j < m) {
        fvec xv[FLOAT_TILE_TOKS];
        UNROLL
        for (int t = 0; t < TT; t++) xv[t] = load_floats_tail((const float *)(x + (size_t)t * x_stride) + i, j, m);
        UNROLL
        for (int r = 0; r < TR; r++) {
            const fvec wv = load_weights_tail(f, g + (size_t)r * (size_t)m * eb, j, m);
            UNROLL
            for (int t = 0; t < TT; t++) acc[r][t] = fvec_fma(acc[r][t], wv, xv[t]);
        }
    }
    UNROLL
    for (int t = 0; t < TT; t++)
        UNROLL
        for (int r = 0; r < TR; r++) out[t * out_stride + r] = fvec_total(acc[r][t]);
}

/* The groups of n_rows packed rows times TT tokens from token t: whole
 * groups, then the rows after them one at a time. */
#define FLOAT_PACKED_ROWS_PASS(fmt, TT, t) \
    do { \
        int64_t r = 0; \
        for (; r + FLOAT_PACK_ROWS <= n_rows; r += FLOAT_PACK_ROWS) \
            float_packed_tile(fmt, FLOAT_PACK_ROWS, TT, n, wp + (size_t)r * row_bytes, xp + (size_t)(t) * xs, xs, \
                              y + (t) * ys + r, ys); \
        for (; r < n_rows; r++) \
            float_packed_tile(fmt, 1, TT, n, wp + (size_t)r * row_bytes, xp + (size_t)(t) * xs, xs, \
                              y + (t) * ys + r, ys); \
    } while (0)

/* The walk of DEFINE_TILED_GEMM over packed rows (x_sums unused). */
#define DEFINE_FLOAT_PACKED_GEMM(name, fmt) \
    static void gemm_packed_##name(int64_t n, int64_t n_rows, int64_t n_tok, const void *w, const void *x, \
                                   size_t xs, const int32_t *x_sums, float *y, int64_t ys) \
    { \
        (void)x_sums; \
        const uint8_t *wp = w, *xp = x; \
        const size_t row_bytes = (size_t)n * float_bytes(fmt); \
        int64_t t = 0; \
        for (; t + FLOAT_TILE_TOKS <= n_tok; t += FLOAT_TILE_TOKS) FLOAT_PACKED_ROWS_PASS(fmt, FLOAT_TILE_TOKS, t); \
        switch (n_tok - t) { \
        case 3: FLOAT_PACKED_ROWS_PASS(fmt, LEFTOVER_TOKS(3, FLOAT_TILE_TOKS), t); break; \
        case 2: FLOAT_PACKED_ROWS_PASS(fmt, LEFTOVER_TOKS(2, FLOAT_TILE_TOKS), t); break; \
        case 1: FLOAT_PACKED_ROWS_PASS(fmt, 1, t); break; \
        default: break; \
        } \
    }

DEFINE_FLOAT_PACKED_GEMM(f32, FLOAT_F32)
DEFINE_FLOAT_PACKED_GEMM(f16, FLOAT_F16)
DEFINE_FLOAT_PACKED_GEMM(bf16, FLOAT_BF16)

/* The packed float entries of a path's gemm_packed table. */
#define FLOAT_KERNEL_PACKED_TABLE \
    [HEARTH_TYPE_F32] = gemm_packed_f32, [HEARTH_TYPE_F16] = gemm_packed_f16, [HEARTH_TYPE_BF16] = gemm_packed_bf16

#endif /* HEARTH_FLOAT_TILES_IMPL_H */

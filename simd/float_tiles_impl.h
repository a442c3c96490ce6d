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

#endif /* HEARTH_FLOAT_TILES_IMPL_H */

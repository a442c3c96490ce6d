/*
 * int_tiles_impl.h -- the register tiles of the integer formats, written
 * once for every vector path: the legacy formats' 32-element blocks times
 * Q8_0 / Q8_1, the K-quants' super-blocks times Q8_K, and their gemm and
 * vec_dot entries (tiles.h walks the grid).
 *
 * Included by x86_int.h (AVX2, AVX-512) and neon.c (NEON, NEON with
 * SDOT), each compiled with its own instruction-set flags, after they
 * define INT_TILE_ROWS and INT_TILE_TOKS and these types and primitives
 * (all FORCE_INLINE):
 *
 *   flanes   eight float lanes, a row-token pair's running sums
 *   ilanes   eight 32-bit integer lanes, a block's lane sums (kernels.h)
 *   fscale   a float scale as the path multiplies it into the lanes
 *   bytes32  the 32 bytes of a block's (or chunk's) quants
 *   bytes16  16 bytes (a super-block's sub-block scales)
 *   words16  16 16-bit lanes (Q8_K's bsums, or their weights)
 *   kq_scales, kq_pair   a row's sub-block scales, and one chunk's pair
 *
 *   flanes_zero(), ilanes_zero(), flanes_from(ilanes), ilanes_sub(a, b)
 *   flanes_fma(run, v, s)      run + v s per lane, one rounding (fmaf)
 *   lanes_total(run)           kernels.h's tree of the eight lanes
 *   scale_half(h), scale_float(f), scale_mul(a, b)
 *   half_to_float(h), prefetch_next_rows(p, w_stride, rows)
 *   load_bytes32(p), load_bytes16(p), load_words16(p)
 *   byte_sums(y)               per lane, the sum of its four signed bytes
 *   legacy_quants(f, blk)      a weight block's quants, as the path's
 *                              legacy_lanes takes them
 *   legacy_start(f, y)         the lanes a token's block starts from (what
 *                              the path's weight offset takes off)
 *   legacy_lanes(f, q, y, start)   start plus a row-token pair's lanes
 *   bits_at(v, shift, mask)    per byte, (v >> shift) & mask
 *   bit_moved(v, b, to, mask)  per byte, bit b moved to bit `to`, & mask
 *   bytes32_or(a, b)
 *   nibbles16(v, high)         the low (or high) nibble of each byte
 *   widen_u8(v), widen_s8_shl(v, k)   bytes to 16-bit lanes (times 2^k)
 *   widen_u8_pairs(w)          the eight bytes of w, each twice, as 16 bits
 *   kq_sub_scales(v)           the 16 signed sub-block scales of v
 *   kq_chunk_scale_bytes(w)    one unsigned scale per chunk, bytes of w
 *   kq_chunk_scales(&s, c)     chunk c's pair: sub-blocks 2c and 2c + 1
 *   kq_chunk_add(acc, q, y, sc)    acc plus chunk lanes of q times y,
 *                              elements 0-15 by sc's first scale, 16-31 by
 *                              its second
 *   bsum_lanes(bsums, w)       lane k: w_2k bsum_2k + w_2k+1 bsum_2k+1
 *
 * Every path follows the summation order of kernels.h: the integer lanes
 * are exact however a path forms them, and the float work is the same
 * fused multiply-adds in the same order, so the results are bit-identical
 * to the scalar kernels.
 *
 * A tile computes TR weight rows times TT tokens: per block it unpacks each
 * row's quants once and loads each token's activations once, then forms
 * every row-token pair from registers.  Edge tiles use the same code with
 * fewer rows or tokens, so each dot product is computed the same way
 * wherever it falls.
 */
#ifndef HEARTH_INT_TILES_IMPL_H
#define HEARTH_INT_TILES_IMPL_H

/* ==========================================================================
 * Legacy formats: 32-element blocks times Q8_0 / Q8_1
 * ========================================================================== */

FORCE_INLINE void legacy_tile(enum legacy_format f, const int TR, const int TT, int64_t n_blocks,
                              const uint8_t *w, size_t w_stride, const uint8_t *x, size_t x_stride,
                              float *out, int64_t out_stride)
{
    const size_t wb = legacy_block_bytes(f);
    const size_t xb = legacy_affine(f) ? sizeof(block_q8_1) : sizeof(block_q8_0);
    flanes run[INT_TILE_ROWS][INT_TILE_TOKS];
    UNROLL
    for (int r = 0; r < TR; r++)
        UNROLL
        for (int t = 0; t < TT; t++) run[r][t] = flanes_zero();
    for (int64_t i = 0; i < n_blocks; i++) {
        bytes32 q[INT_TILE_ROWS];
        fscale dw[INT_TILE_ROWS], mw[INT_TILE_ROWS];
        UNROLL
        for (int r = 0; r < TR; r++) {
            const uint8_t *blk = w + (size_t)r * w_stride + (size_t)i * wb;
            prefetch_next_rows(blk, w_stride, TR);
            q[r] = legacy_quants(f, blk);
            hearth_f16 d, m = 0;
            memcpy(&d, blk, 2);
            if (legacy_affine(f)) memcpy(&m, blk + 2, 2);
            dw[r] = f == LEGACY_MXFP4 ? scale_float(mxfp4_scale(blk[0])) : scale_half(d);
            mw[r] = scale_half(m);
        }
        UNROLL
        for (int t = 0; t < TT; t++) {
            const uint8_t *blk = x + (size_t)t * x_stride + (size_t)i * xb;
            const bytes32 y = load_bytes32(blk + (legacy_affine(f) ? 4 : 2));
            hearth_f16 dyh;
            memcpy(&dyh, blk, 2);
            const fscale dy = scale_half(dyh);
            const ilanes start = legacy_start(f, y);
            flanes ysum = flanes_zero();
            if (legacy_affine(f)) ysum = flanes_from(byte_sums(y));
            UNROLL
            for (int r = 0; r < TR; r++) {
                const ilanes lanes = legacy_lanes(f, q[r], y, start);
                run[r][t] = flanes_fma(run[r][t], flanes_from(lanes), scale_mul(dw[r], dy));
                if (legacy_affine(f)) run[r][t] = flanes_fma(run[r][t], ysum, scale_mul(mw[r], dy));
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

/* What a tile keeps of one row's super-block between its chunks. */
struct kq_row {
    kq_scales scales; /* integer sub-block scales, as kq_chunk_scales reads them */
    words16 bsum_w;   /* weights of Q8_K's bsums: mins, or bias x scales */
    float d, dmin;    /* float scales (dmin 0 where there is no min) */
};

FORCE_INLINE void kquant_row(enum kquant_format f, const uint8_t *blk, struct kq_row *row)
{
    switch (f) {
    case KQ_Q2_K: {
        const block_q2_K *b = (const block_q2_K *)blk;
        const bytes16 raw = load_bytes16(b->scales);
        row->scales = kq_sub_scales(nibbles16(raw, false));
        row->bsum_w = widen_u8(nibbles16(raw, true));
        row->d = half_to_float(b->d);
        row->dmin = half_to_float(b->dmin);
        break;
    }
    case KQ_Q3_K: {
        const block_q3_K *b = (const block_q3_K *)blk;
        const bytes16 sc = unpack_q3k_scales(b->scales);
        row->scales = kq_sub_scales(sc);
        row->bsum_w = widen_s8_shl(sc, 2); /* 4 sc: u - 4 */
        row->d = half_to_float(b->d);
        row->dmin = 0.0f;
        break;
    }
    case KQ_Q4_K:
    case KQ_Q5_K: {
        const block_q4_K *b4 = (const block_q4_K *)blk;
        const block_q5_K *b5 = (const block_q5_K *)blk;
        uint64_t sc, mn;
        unpack_q4k_scales(f == KQ_Q4_K ? b4->scales : b5->scales, &sc, &mn);
        /* one scale per 32-element chunk, and m_k for bsums 2k, 2k + 1 */
        row->scales = kq_chunk_scale_bytes(sc);
        row->bsum_w = widen_u8_pairs(mn);
        row->d = half_to_float(f == KQ_Q4_K ? b4->d : b5->d);
        row->dmin = half_to_float(f == KQ_Q4_K ? b4->dmin : b5->dmin);
        break;
    }
    default: {
        const block_q6_K *b = (const block_q6_K *)blk;
        const bytes16 sc = load_bytes16(b->scales);
        row->scales = kq_sub_scales(sc);
        row->bsum_w = widen_s8_shl(sc, 5); /* 32 sc: u - 32 */
        row->d = half_to_float(b->d);
        row->dmin = 0.0f;
        break;
    }
    }
}

/* The unsigned quants of chunk c (elements 32c .. 32c + 31), below 64. */
FORCE_INLINE bytes32 kquant_chunk(enum kquant_format f, const uint8_t *blk, int c)
{
    switch (f) {
    case KQ_Q2_K: {
        const block_q2_K *b = (const block_q2_K *)blk;
        return bits_at(load_bytes32(b->qs + 32 * (c / 4)), 2 * (c % 4), 3);
    }
    case KQ_Q3_K: {
        const block_q3_K *b = (const block_q3_K *)blk;
        const bytes32 low = bits_at(load_bytes32(b->qs + 32 * (c / 4)), 2 * (c % 4), 3);
        return bytes32_or(low, bit_moved(load_bytes32(b->hmask), c, 2, 4));
    }
    case KQ_Q4_K: {
        const block_q4_K *b = (const block_q4_K *)blk;
        return bits_at(load_bytes32(b->qs + 32 * (c / 2)), 4 * (c % 2), 0x0f);
    }
    case KQ_Q5_K: {
        const block_q5_K *b = (const block_q5_K *)blk;
        const bytes32 low = bits_at(load_bytes32(b->qs + 32 * (c / 2)), 4 * (c % 2), 0x0f);
        return bytes32_or(low, bit_moved(load_bytes32(b->qh), c, 4, 0x10));
    }
    default: {
        const block_q6_K *b = (const block_q6_K *)blk;
        const int h = c / 4, k = c % 4;
        const bytes32 low = bits_at(load_bytes32(b->ql + 64 * h + 32 * (k % 2)), 4 * (k / 2), 0x0f);
        return bytes32_or(low, bit_moved(load_bytes32(b->qh + 32 * h), 2 * k, 4, 0x30));
    }
    }
}

FORCE_INLINE void kquant_tile(enum kquant_format f, const int TR, const int TT, int64_t n_blocks,
                              const uint8_t *w, size_t w_stride, const uint8_t *x, size_t x_stride,
                              float *out, int64_t out_stride)
{
    const size_t wb = kquant_block_bytes(f);
    const bool has_min = f == KQ_Q2_K || f == KQ_Q4_K || f == KQ_Q5_K;
    flanes run[INT_TILE_ROWS][INT_TILE_TOKS];
    UNROLL
    for (int r = 0; r < TR; r++)
        UNROLL
        for (int t = 0; t < TT; t++) run[r][t] = flanes_zero();
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
        ilanes acc[INT_TILE_ROWS][INT_TILE_TOKS];
        UNROLL
        for (int r = 0; r < TR; r++)
            UNROLL
            for (int t = 0; t < TT; t++) acc[r][t] = ilanes_zero();
        UNROLL
        for (int c = 0; c < QK_K / 32; c++) {
            bytes32 q[INT_TILE_ROWS];
            kq_pair sc[INT_TILE_ROWS];
            UNROLL
            for (int r = 0; r < TR; r++) {
                q[r] = kquant_chunk(f, wblk[r], c);
                sc[r] = kq_chunk_scales(&row[r].scales, c);
            }
            UNROLL
            for (int t = 0; t < TT; t++) {
                const bytes32 y = load_bytes32(yblk[t]->qs + 32 * c);
                UNROLL
                for (int r = 0; r < TR; r++) acc[r][t] = kq_chunk_add(acc[r][t], q[r], y, sc[r]);
            }
        }
        UNROLL
        for (int t = 0; t < TT; t++) {
            const words16 bsums = load_words16(yblk[t]->bsums);
            const float dy = yblk[t]->d;
            UNROLL
            for (int r = 0; r < TR; r++) {
                const ilanes paired = bsum_lanes(bsums, row[r].bsum_w);
                ilanes lanes = acc[r][t];
                if (!has_min) lanes = ilanes_sub(lanes, paired);
                run[r][t] = flanes_fma(run[r][t], flanes_from(lanes), scale_float(dy * row[r].d));
                if (has_min) run[r][t] = flanes_fma(run[r][t], flanes_from(paired), scale_float(-(dy * row[r].dmin)));
            }
        }
    }
    UNROLL
    for (int t = 0; t < TT; t++)
        UNROLL
        for (int r = 0; r < TR; r++) out[t * out_stride + r] = lanes_total(run[r][t]);
}

/* ==========================================================================
 * Entry points: gemm walks the tile grid (tiles.h), vec_dot is its 1 x 1 case
 * ========================================================================== */

#define DEFINE_INT_GEMM(name, TILE, fmt, block_elems) \
    DEFINE_TILED_GEMM(name, TILE, fmt, INT_TILE_ROWS, INT_TILE_TOKS, block_elems)

DEFINE_INT_GEMM(q4_0, legacy_tile, LEGACY_Q4_0, QK4_0)
DEFINE_INT_GEMM(q4_1, legacy_tile, LEGACY_Q4_1, QK4_1)
DEFINE_INT_GEMM(q5_0, legacy_tile, LEGACY_Q5_0, QK5_0)
DEFINE_INT_GEMM(q5_1, legacy_tile, LEGACY_Q5_1, QK5_1)
DEFINE_INT_GEMM(q8_0, legacy_tile, LEGACY_Q8_0, QK8_0)
DEFINE_INT_GEMM(mxfp4, legacy_tile, LEGACY_MXFP4, QK_MXFP4)
DEFINE_INT_GEMM(q2_k, kquant_tile, KQ_Q2_K, QK_K)
DEFINE_INT_GEMM(q3_k, kquant_tile, KQ_Q3_K, QK_K)
DEFINE_INT_GEMM(q4_k, kquant_tile, KQ_Q4_K, QK_K)
DEFINE_INT_GEMM(q5_k, kquant_tile, KQ_Q5_K, QK_K)
DEFINE_INT_GEMM(q6_k, kquant_tile, KQ_Q6_K, QK_K)

#endif /* HEARTH_INT_TILES_IMPL_H */

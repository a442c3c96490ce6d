/*
 * attention_vec.h -- the attention block kernel (attention.h) for the
 * vector paths (AVX2, AVX-512, NEON), written once over a small vector
 * vocabulary that the including file defines for its register width:
 *
 *   vf, VL                  the float vector type and its lanes
 *   v_zero, v_set1, v_fma, v_mul, v_add, v_sub, v_max, v_div
 *   v_hsum, v_hmax          horizontal sum and maximum
 *   v_loadf, v_storef       VL floats
 *   v_loadf_n, v_storef_n   the first n < VL floats (zero-padded)
 *   v_load_f16, v_load_f16_n  halves, converted
 *   v_load_i8               VL signed bytes, converted
 *   half_to_float           one half (a Q8_0 block's scale), converted
 *   v_exp                   e^x, 0 below -87.3 (where float underflows)
 *   SCORE_ROWS, SCORE_KEYS  the register tile of the q.k products
 *   VALUE_ROWS              rows accumulating values at once
 *
 * Scores: a tile of SCORE_ROWS query rows by SCORE_KEYS keys keeps one
 * accumulator per pair, so that each key chunk is converted from the
 * cache format once for all the rows of the tile (the query heads of a
 * group) and each query chunk loaded once for all the keys.  Values: for
 * each VL-wide slice of the head, VALUE_ROWS accumulators stay in
 * registers while every key of the block adds its weighted value slice.
 * A ragged tile repeats its last row or key (computing it twice and
 * storing the same result twice) instead of needing a smaller variant.
 */

/* VL elements of a cache entry (one head of one position) from element i
 * on, i + VL <= head_dim. */
FORCE_INLINE vf load_entry(hearth_type t, const uint8_t *e, int32_t i)
{
    switch (t) {
    case HEARTH_TYPE_F32: return v_loadf((const float *)e + i);
    case HEARTH_TYPE_F16: return v_load_f16((const hearth_f16 *)e + i);
    default: {
        /* VL divides a Q8_0 block's 32 elements */
        const block_q8_0 *b = (const block_q8_0 *)e + i / QK8_0;
        return v_mul(v_load_i8(b->qs + i % QK8_0), v_set1(half_to_float(b->d)));
    }
    }
}

/* The last n < VL elements of an F32 or F16 entry from element i on
 * (Q8_0 heads are whole blocks, so have no tail). */
FORCE_INLINE vf load_entry_n(hearth_type t, const uint8_t *e, int32_t i, int n)
{
    if (t == HEARTH_TYPE_F32) return v_loadf_n((const float *)e + i, n);
    return v_load_f16_n((const hearth_f16 *)e + i, n);
}

/* scores[r][jj] = q_r . k_(j0 + jj) for the rows r0 .. r0 + nr - 1 and the
 * keys jj0 .. jj0 + nk - 1 of the block. */
FORCE_INLINE void score_tile(hearth_type t, const struct attn_rows *rows, int32_t r0, int nr,
                             const uint8_t *k, size_t row_bytes, int32_t j0, int32_t jj0, int nk)
{
    const int32_t hd = rows->head_dim;
    const float *qp[SCORE_ROWS];
    const uint8_t *kp[SCORE_KEYS];
    UNROLL
    for (int a = 0; a < SCORE_ROWS; a++) qp[a] = rows->q + (int64_t)(r0 + HEARTH_MIN(a, nr - 1)) * hd;
    UNROLL
    for (int b = 0; b < SCORE_KEYS; b++) kp[b] = k + (size_t)(j0 + jj0 + HEARTH_MIN(b, nk - 1)) * row_bytes;
    vf acc[SCORE_ROWS][SCORE_KEYS];
    UNROLL
    for (int a = 0; a < SCORE_ROWS; a++)
        UNROLL
        for (int b = 0; b < SCORE_KEYS; b++) acc[a][b] = v_zero();
    int32_t i = 0;
    for (; i + VL <= hd; i += VL) {
        vf kv[SCORE_KEYS];
        UNROLL
        for (int b = 0; b < SCORE_KEYS; b++) kv[b] = load_entry(t, kp[b], i);
        UNROLL
        for (int a = 0; a < SCORE_ROWS; a++) {
            const vf qv = v_loadf(qp[a] + i);
            UNROLL
            for (int b = 0; b < SCORE_KEYS; b++) acc[a][b] = v_fma(qv, kv[b], acc[a][b]);
        }
    }
    if (i < hd) {
        const int n = hd - i;
        vf kv[SCORE_KEYS];
        UNROLL
        for (int b = 0; b < SCORE_KEYS; b++) kv[b] = load_entry_n(t, kp[b], i, n);
        UNROLL
        for (int a = 0; a < SCORE_ROWS; a++) {
            const vf qv = v_loadf_n(qp[a] + i, n);
            UNROLL
            for (int b = 0; b < SCORE_KEYS; b++) acc[a][b] = v_fma(qv, kv[b], acc[a][b]);
        }
    }
    UNROLL
    for (int a = 0; a < SCORE_ROWS; a++)
        UNROLL
        for (int b = 0; b < SCORE_KEYS; b++)
            if (a < nr && b < nk) rows->scores[(size_t)(r0 + a) * ATTN_KEY_BLOCK + jj0 + b] = v_hsum(acc[a][b]);
}

/* acc_r += sum_jj p[r][jj] v_(j0 + jj) for rows r0 .. r0 + nr - 1 and
 * jj < nk, slice by slice of the value (v_dim elements). */
FORCE_INLINE void value_tile(hearth_type t, const struct attn_rows *rows, int32_t r0, int nr,
                             const uint8_t *v, size_t row_bytes, int32_t j0, int32_t nk)
{
    const int32_t vd = rows->v_dim;
    float *ap[VALUE_ROWS];
    const float *pp[VALUE_ROWS];
    UNROLL
    for (int a = 0; a < VALUE_ROWS; a++) {
        const int32_t r = r0 + HEARTH_MIN(a, nr - 1);
        ap[a] = rows->acc + (int64_t)r * vd;
        pp[a] = rows->scores + (size_t)r * ATTN_KEY_BLOCK;
    }
    const uint8_t *v0 = v + (size_t)j0 * row_bytes;
    int32_t i = 0;
    for (; i + VL <= vd; i += VL) {
        vf acc[VALUE_ROWS];
        UNROLL
        for (int a = 0; a < VALUE_ROWS; a++) acc[a] = v_loadf(ap[a] + i);
        for (int32_t jj = 0; jj < nk; jj++) {
            const vf vv = load_entry(t, v0 + (size_t)jj * row_bytes, i);
            UNROLL
            for (int a = 0; a < VALUE_ROWS; a++) acc[a] = v_fma(v_set1(pp[a][jj]), vv, acc[a]);
        }
        UNROLL
        for (int a = 0; a < VALUE_ROWS; a++) v_storef(ap[a] + i, acc[a]);
    }
    if (i < vd) {
        const int n = vd - i;
        vf acc[VALUE_ROWS];
        UNROLL
        for (int a = 0; a < VALUE_ROWS; a++) acc[a] = v_loadf_n(ap[a] + i, n);
        for (int32_t jj = 0; jj < nk; jj++) {
            const vf vv = load_entry_n(t, v0 + (size_t)jj * row_bytes, i, n);
            UNROLL
            for (int a = 0; a < VALUE_ROWS; a++) acc[a] = v_fma(v_set1(pp[a][jj]), vv, acc[a]);
        }
        UNROLL
        for (int a = 0; a < VALUE_ROWS; a++) v_storef_n(ap[a] + i, acc[a], n);
    }
}

/* Turn row r's valid scores lo .. n-1 of the block (lo < n) into weights
 * exp(s - m') (soft-capped first where the rows ask) and update its max,
 * sum and (rescaled) accumulator; the weights of the masked keys up to
 * `width` become 0. */
FORCE_INLINE void softmax_row(const struct attn_rows *rows, int32_t r, int32_t lo, int32_t n, int32_t width)
{
    float *s = rows->scores + (size_t)r * ATTN_KEY_BLOCK;
    const int32_t padded = (width + VL - 1) / VL * VL;
    if (rows->softcap > 0.0f) {
        /* cap tanh(s / cap), tanh(z) = 1 - 2 / (e^2z + 1) (v_exp saturates
         * at both ends, so tanh does); lanes outside lo .. n-1 are masked
         * below */
        const vf cap = v_set1(rows->softcap), inv2 = v_set1(2.0f / rows->softcap);
        const vf one = v_set1(1.0f), two = v_set1(2.0f);
        for (int32_t jj = 0; jj < padded; jj += VL) {
            const vf e = v_exp(v_mul(v_loadf(s + jj), inv2));
            v_storef(s + jj, v_mul(cap, v_sub(one, v_div(two, v_add(e, one)))));
        }
    }
    for (int32_t jj = 0; jj < lo; jj++) s[jj] = -INFINITY;
    for (int32_t jj = n; jj < padded; jj++) s[jj] = -INFINITY;
    vf vmax = v_set1(-INFINITY);
    for (int32_t jj = 0; jj < padded; jj += VL) vmax = v_max(vmax, v_loadf(s + jj));
    const float bmax = v_hmax(vmax);
    const float m_old = rows->max[r];
    const float m_new = bmax > m_old ? bmax : m_old;
    const vf mv = v_set1(m_new);
    vf vsum = v_zero();
    for (int32_t jj = 0; jj < padded; jj += VL) {
        const vf e = v_exp(v_sub(v_loadf(s + jj), mv));
        v_storef(s + jj, e);
        vsum = v_add(vsum, e);
    }
    const float l = v_hsum(vsum);
    if (m_old == -INFINITY) {
        rows->sum[r] = l;
    } else {
        const float alpha = expf(m_old - m_new);
        rows->sum[r] = rows->sum[r] * alpha + l;
        if (alpha != 1.0f) {
            const int32_t vd = rows->v_dim;
            float *a = rows->acc + (int64_t)r * vd;
            const vf av = v_set1(alpha);
            int32_t i = 0;
            for (; i + VL <= vd; i += VL) v_storef(a + i, v_mul(v_loadf(a + i), av));
            if (i < vd) v_storef_n(a + i, v_mul(v_loadf_n(a + i, vd - i), av), vd - i);
        }
    }
    rows->max[r] = m_new;
}

/* Ask for the block's key and value entries (keys j0 .. j0 + width - 1)
 * before reading them.  A position's row holds every key/value head, so
 * one head's entries lie a row apart (1 KiB for 8 heads of 64 in F16):
 * a stride the hardware prefetchers follow late, which left decode at a
 * depth of 4096 waiting on the loads of keys for most of its attention
 * time.  Asking for all of them at once keeps many lines in flight. */
FORCE_INLINE void prefetch_entries(hearth_type t, const uint8_t *k, const uint8_t *v, size_t row_bytes,
                                   int32_t head_dim, int32_t v_dim, int32_t j0, int32_t width)
{
    const size_t kb = hearth_type_row_bytes(t, head_dim), vb = hearth_type_row_bytes(t, v_dim);
    for (int32_t jj = 0; jj < width; jj++) {
        const uint8_t *e = k + (size_t)(j0 + jj) * row_bytes;
        for (size_t off = 0; off < kb; off += 64) __builtin_prefetch(e + off, 0, 3);
    }
    if (v == k) return;
    for (int32_t jj = 0; jj < width; jj++) {
        const uint8_t *e = v + (size_t)(j0 + jj) * row_bytes;
        for (size_t off = 0; off < vb; off += 64) __builtin_prefetch(e + off, 0, 3);
    }
}

FORCE_INLINE void block_kernel(hearth_type t, const struct attn_rows *rows, const uint8_t *k, const uint8_t *v,
                             size_t row_bytes, int32_t j0, int32_t j1)
{
    const int32_t n_rows = rows->n_rows;
    /* the keys any row sees: the block's width after the mask */
    int32_t width = 0;
    for (int32_t r = 0; r < n_rows; r++)
        width = HEARTH_MAX(width, HEARTH_MIN(j1, rows->n_visible[r]) - j0);
    if (width <= 0) return;
    prefetch_entries(t, k, v, row_bytes, rows->head_dim, rows->v_dim, j0, width);

    for (int32_t r0 = 0; r0 < n_rows; r0 += SCORE_ROWS) {
        const int nr = (int)HEARTH_MIN(SCORE_ROWS, n_rows - r0);
        int32_t tile_width = 0;
        for (int a = 0; a < nr; a++)
            tile_width = HEARTH_MAX(tile_width, HEARTH_MIN(j1, rows->n_visible[r0 + a]) - j0);
        for (int32_t jj = 0; jj < tile_width; jj += SCORE_KEYS)
            score_tile(t, rows, r0, nr, k, row_bytes, j0, jj, (int)HEARTH_MIN(SCORE_KEYS, tile_width - jj));
    }
    for (int32_t r = 0; r < n_rows; r++) {
        const int32_t n = HEARTH_MIN(j1, rows->n_visible[r]) - j0;
        const int32_t lo = rows->first_visible ? HEARTH_MAX(rows->first_visible[r] - j0, 0) : 0;
        if (n > lo) {
            softmax_row(rows, r, lo, n, width);
        } else {
            float *s = rows->scores + (size_t)r * ATTN_KEY_BLOCK;
            for (int32_t jj = 0; jj < width; jj++) s[jj] = 0.0f;
        }
    }
    for (int32_t r0 = 0; r0 < n_rows; r0 += VALUE_ROWS) {
        const int nr = (int)HEARTH_MIN(VALUE_ROWS, n_rows - r0);
        int32_t tile_width = 0;
        for (int a = 0; a < nr; a++)
            tile_width = HEARTH_MAX(tile_width, HEARTH_MIN(j1, rows->n_visible[r0 + a]) - j0);
        if (tile_width > 0) value_tile(t, rows, r0, nr, v, row_bytes, j0, tile_width);
    }
}

static void attn_block_f32(const struct attn_rows *rows, const uint8_t *k, const uint8_t *v, size_t row_bytes,
                      int32_t j0, int32_t j1)
{
    block_kernel(HEARTH_TYPE_F32, rows, k, v, row_bytes, j0, j1);
}

static void attn_block_f16(const struct attn_rows *rows, const uint8_t *k, const uint8_t *v, size_t row_bytes,
                      int32_t j0, int32_t j1)
{
    block_kernel(HEARTH_TYPE_F16, rows, k, v, row_bytes, j0, j1);
}

static void attn_block_q8_0(const struct attn_rows *rows, const uint8_t *k, const uint8_t *v, size_t row_bytes,
                       int32_t j0, int32_t j1)
{
    block_kernel(HEARTH_TYPE_Q8_0, rows, k, v, row_bytes, j0, j1);
}

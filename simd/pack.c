/*
 * pack.c -- the row-interleaved ("packed") weight layout of kernels.h,
 * made once when a model is loaded, and the block sums of the activations
 * that the packed kernels take with them.
 *
 * The layout is the same for every instruction-set path, so a packed copy
 * made at load time serves whichever path is chosen.  The original rows
 * stay where they were (in the mapped file) for every other use.
 */
#include "internal.h"

#include <stddef.h>
#include <string.h>

#include "kernels.h"
#include "quant.h"

/* A field of a weight block: where it lies in the row's block, and its
 * bytes (1: MXFP4's exponent, and 2: a half, kept whole; otherwise a
 * multiple of 4, cut into 4-byte pieces). */
struct packed_field {
    size_t offset, bytes;
};

#define FIELD(block, member) {offsetof(block, member), sizeof(((block *)0)->member)}

/* The fields of each packed type, in the order of the packed block. */
static const struct packed_field fields_q4_0[] = {FIELD(block_q4_0, d), FIELD(block_q4_0, qs)};
static const struct packed_field fields_q5_0[] = {FIELD(block_q5_0, d), FIELD(block_q5_0, qh),
                                                  FIELD(block_q5_0, qs)};
static const struct packed_field fields_q8_0[] = {FIELD(block_q8_0, d), FIELD(block_q8_0, qs)};
static const struct packed_field fields_mxfp4[] = {FIELD(block_mxfp4, e), FIELD(block_mxfp4, qs)};
static const struct packed_field fields_q2_k[] = {FIELD(block_q2_K, d), FIELD(block_q2_K, dmin),
                                                  FIELD(block_q2_K, scales), FIELD(block_q2_K, qs)};
static const struct packed_field fields_q3_k[] = {FIELD(block_q3_K, d), FIELD(block_q3_K, scales),
                                                  FIELD(block_q3_K, hmask), FIELD(block_q3_K, qs)};
static const struct packed_field fields_q4_k[] = {FIELD(block_q4_K, d), FIELD(block_q4_K, dmin),
                                                  FIELD(block_q4_K, scales), FIELD(block_q4_K, qs)};
static const struct packed_field fields_q5_k[] = {FIELD(block_q5_K, d), FIELD(block_q5_K, dmin),
                                                  FIELD(block_q5_K, scales), FIELD(block_q5_K, qh),
                                                  FIELD(block_q5_K, qs)};
static const struct packed_field fields_q6_k[] = {FIELD(block_q6_K, d), FIELD(block_q6_K, scales),
                                                  FIELD(block_q6_K, ql), FIELD(block_q6_K, qh)};

static size_t packed_fields(hearth_type t, const struct packed_field **out)
{
    switch (t) {
    case HEARTH_TYPE_Q4_0: *out = fields_q4_0; return HEARTH_ARRAY_LEN(fields_q4_0);
    case HEARTH_TYPE_Q5_0: *out = fields_q5_0; return HEARTH_ARRAY_LEN(fields_q5_0);
    case HEARTH_TYPE_Q8_0: *out = fields_q8_0; return HEARTH_ARRAY_LEN(fields_q8_0);
    case HEARTH_TYPE_MXFP4: *out = fields_mxfp4; return HEARTH_ARRAY_LEN(fields_mxfp4);
    case HEARTH_TYPE_Q2_K: *out = fields_q2_k; return HEARTH_ARRAY_LEN(fields_q2_k);
    case HEARTH_TYPE_Q3_K: *out = fields_q3_k; return HEARTH_ARRAY_LEN(fields_q3_k);
    case HEARTH_TYPE_Q4_K: *out = fields_q4_k; return HEARTH_ARRAY_LEN(fields_q4_k);
    case HEARTH_TYPE_Q5_K: *out = fields_q5_k; return HEARTH_ARRAY_LEN(fields_q5_k);
    case HEARTH_TYPE_Q6_K: *out = fields_q6_k; return HEARTH_ARRAY_LEN(fields_q6_k);
    default: *out = NULL; return 0;
    }
}

static bool is_float(hearth_type t)
{
    return t == HEARTH_TYPE_F32 || t == HEARTH_TYPE_F16 || t == HEARTH_TYPE_BF16;
}

bool hearth_pack_supported(hearth_type t)
{
    const struct packed_field *f;
    return is_float(t) || packed_fields(t, &f) != 0;
}

bool hearth_pack_reorders(hearth_type t)
{
    return !is_float(t);
}

bool hearth_kernels_read_packed(const hearth_kernels *k, hearth_type t, int64_t n_out, int64_t n_in)
{
    if ((unsigned)t >= HEARTH_TYPE_COUNT || !hearth_pack_supported(t) || !k->gemm_packed[t]) return false;
    if (is_float(t)) return n_out > 0 && n_in > 0;
    return n_out % PACK_ROWS == 0 && n_in % 32 == 0;
}

/* The float layout (kernels.h): each row's chunks copied into place. */
static void float_pack_rows(size_t elem, const uint8_t *src, size_t row_bytes, int64_t n_rows, int64_t n,
                            uint8_t *dst)
{
    for (int64_t r0 = 0; r0 < n_rows;) {
        const int64_t gr = hearth_float_group_rows(n_rows, r0);
        uint8_t *grp = dst + (size_t)r0 * (size_t)n * elem;
        for (int64_t r = 0; r < gr; r++)
            for (int64_t c0 = 0; c0 < n; c0 += FLOAT_PACK_CHUNK)
                memcpy(grp + hearth_float_packed_index(n, gr, r, c0) * elem,
                       src + (size_t)(r0 + r) * row_bytes + (size_t)c0 * elem,
                       (size_t)HEARTH_MIN(FLOAT_PACK_CHUNK, n - c0) * elem);
        r0 += gr;
    }
}

size_t hearth_packed_bytes(hearth_type t, int64_t n_rows, int64_t n_in)
{
    return (size_t)n_rows * hearth_type_row_bytes(t, n_in);
}

void hearth_pack_rows(hearth_type t, const void *src, size_t row_bytes, int64_t n_rows, int64_t n_in,
                      void *dst)
{
    if (is_float(t)) {
        float_pack_rows(hearth_type_row_bytes(t, 1), src, row_bytes, n_rows, n_in, dst);
        return;
    }
    const struct packed_field *fields;
    const size_t n_fields = packed_fields(t, &fields);
    const size_t block = hearth_type_block_bytes(t);
    const int64_t nb = n_in / hearth_type_block_elems(t);
    uint8_t *out = dst;
    for (int64_t g = 0; g < n_rows / PACK_ROWS; g++) {
        const uint8_t *rows = (const uint8_t *)src + (size_t)g * PACK_ROWS * row_bytes;
        for (int64_t b = 0; b < nb; b++) {
            for (size_t fi = 0; fi < n_fields; fi++) {
                const uint8_t *at = rows + (size_t)b * block + fields[fi].offset;
                /* fixed-size copies, which compile to single moves: the
                 * packing of a whole model is a measurable part of loading */
                if (fields[fi].bytes == 1) {
                    for (int r = 0; r < PACK_ROWS; r++, out++) *out = at[(size_t)r * row_bytes];
                    continue;
                }
                if (fields[fi].bytes == 2) {
                    for (int r = 0; r < PACK_ROWS; r++, out += 2) memcpy(out, at + (size_t)r * row_bytes, 2);
                    continue;
                }
                for (size_t k = 0; k < fields[fi].bytes; k += 4)
                    for (int r = 0; r < PACK_ROWS; r++, out += 4) memcpy(out, at + (size_t)r * row_bytes + k, 4);
            }
        }
    }
}

void hearth_unpack_row(hearth_type t, const void *packed, int64_t n_rows, int64_t row, int64_t n_in, void *dst)
{
    if (is_float(t)) {
        const size_t elem = hearth_type_row_bytes(t, 1);
        const int64_t gr = hearth_float_group_rows(n_rows, row), r0 = row - row % gr;
        /* the row's group alone: a copy of its row r into row 0 of dst */
        const uint8_t *grp = (const uint8_t *)packed + (size_t)r0 * (size_t)n_in * elem;
        for (int64_t c0 = 0; c0 < n_in; c0 += FLOAT_PACK_CHUNK)
            memcpy((uint8_t *)dst + (size_t)c0 * elem, grp + hearth_float_packed_index(n_in, gr, row - r0, c0) * elem,
                   (size_t)HEARTH_MIN(FLOAT_PACK_CHUNK, n_in - c0) * elem);
        return;
    }
    const struct packed_field *fields;
    const size_t n_fields = packed_fields(t, &fields);
    const size_t block = hearth_type_block_bytes(t), row_bytes = hearth_type_row_bytes(t, n_in);
    const int64_t nb = n_in / hearth_type_block_elems(t);
    const size_t r = (size_t)(row % PACK_ROWS);
    /* the group's bytes in hearth_pack_rows' order; row r's piece of each */
    const uint8_t *in = (const uint8_t *)packed + (size_t)(row / PACK_ROWS) * PACK_ROWS * row_bytes;
    uint8_t *out = dst;
    for (int64_t b = 0; b < nb; b++) {
        for (size_t fi = 0; fi < n_fields; fi++) {
            uint8_t *at = out + (size_t)b * block + fields[fi].offset;
            const size_t piece = fields[fi].bytes < 4 ? fields[fi].bytes : 4;
            for (size_t k = 0; k < fields[fi].bytes; k += piece, in += piece * PACK_ROWS)
                memcpy(at + k, in + r * piece, piece);
        }
    }
}

void hearth_q8_0_block_sums(const void *x, int64_t n_blocks, int32_t *sums)
{
    const block_q8_0 *b = x;
    for (int64_t i = 0; i < n_blocks; i++) {
        int32_t s = 0;
        for (int j = 0; j < QK8_0; j++) s += b[i].qs[j];
        sums[i] = s;
    }
}

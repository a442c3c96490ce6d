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

#include <string.h>

#include "kernels.h"
#include "quant.h"

/* Bytes of quants per row and block. */
static size_t packed_quant_bytes(hearth_type t)
{
    switch (t) {
    case HEARTH_TYPE_Q4_0: return QK4_0 / 2;
    case HEARTH_TYPE_Q8_0: return QK8_0;
    default: return 0;
    }
}

bool hearth_pack_supported(hearth_type t)
{
    return packed_quant_bytes(t) != 0;
}

size_t hearth_packed_bytes(hearth_type t, int64_t n_rows, int64_t n_in)
{
    return (size_t)n_rows * hearth_type_row_bytes(t, n_in);
}

void hearth_pack_rows(hearth_type t, const void *src, size_t row_bytes, int64_t n_rows, int64_t n_in,
                      void *dst)
{
    const size_t qb = packed_quant_bytes(t);
    const size_t block = sizeof(hearth_f16) + qb; /* one row's block: d, then the quants */
    const int64_t nb = n_in / 32;
    uint8_t *out = dst;
    for (int64_t g = 0; g < n_rows / PACK_ROWS; g++) {
        const uint8_t *rows = (const uint8_t *)src + (size_t)g * PACK_ROWS * row_bytes;
        for (int64_t b = 0; b < nb; b++) {
            for (int r = 0; r < PACK_ROWS; r++) memcpy(out + 2 * r, rows + (size_t)r * row_bytes + b * block, 2);
            out += 2 * PACK_ROWS;
            for (size_t k = 0; k < qb / 4; k++)
                for (int r = 0; r < PACK_ROWS; r++, out += 4)
                    memcpy(out, rows + (size_t)r * row_bytes + b * block + 2 + 4 * k, 4);
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

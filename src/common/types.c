/*
 * types.c -- the table of GGUF tensor types: names, block sizes and block
 * byte sizes, as published with the GGUF format (ggml block layouts).
 */
#include "internal.h"

#include <string.h>
#include <strings.h>

#include "quant.h"

struct type_info {
    const char *name;
    int64_t block_elems;
    size_t block_bytes;
    bool computes; /* weights hearth computes with (every backend's kernels) */
};

/* Block sizes: QK = 32 for the legacy formats and MXFP4, QK_K = 256 for the K-quants
 * and i-quants.  The byte counts are those of the packed block structs.
 * Q8_1 and Q8_K are activation formats only. */
static const struct type_info type_table[HEARTH_TYPE_COUNT] = {
    [HEARTH_TYPE_F32] = {"F32", 1, 4, true},
    [HEARTH_TYPE_F16] = {"F16", 1, 2, true},
    [HEARTH_TYPE_Q4_0] = {"Q4_0", QK4_0, sizeof(block_q4_0), true},
    [HEARTH_TYPE_Q4_1] = {"Q4_1", QK4_1, sizeof(block_q4_1), true},
    [HEARTH_TYPE_Q5_0] = {"Q5_0", QK5_0, sizeof(block_q5_0), true},
    [HEARTH_TYPE_Q5_1] = {"Q5_1", QK5_1, sizeof(block_q5_1), true},
    [HEARTH_TYPE_Q8_0] = {"Q8_0", QK8_0, sizeof(block_q8_0), true},
    [HEARTH_TYPE_Q8_1] = {"Q8_1", QK8_1, sizeof(block_q8_1), false},
    [HEARTH_TYPE_Q2_K] = {"Q2_K", QK_K, sizeof(block_q2_K), true},
    [HEARTH_TYPE_Q3_K] = {"Q3_K", QK_K, sizeof(block_q3_K), true},
    [HEARTH_TYPE_Q4_K] = {"Q4_K", QK_K, sizeof(block_q4_K), true},
    [HEARTH_TYPE_Q5_K] = {"Q5_K", QK_K, sizeof(block_q5_K), true},
    [HEARTH_TYPE_Q6_K] = {"Q6_K", QK_K, sizeof(block_q6_K), true},
    [HEARTH_TYPE_Q8_K] = {"Q8_K", QK_K, sizeof(block_q8_K), false},
    /* i-quants and ternary types: known so that files holding them can be
     * read and inspected; the engine does not compute with them. */
    [HEARTH_TYPE_IQ2_XXS] = {"IQ2_XXS", QK_K, 2 + QK_K / 8 * 2, false},
    [HEARTH_TYPE_IQ2_XS] = {"IQ2_XS", QK_K, 2 + QK_K / 8 * 2 + QK_K / 32, false},
    [HEARTH_TYPE_IQ3_XXS] = {"IQ3_XXS", QK_K, 2 + 3 * (QK_K / 8), false},
    [HEARTH_TYPE_IQ1_S] = {"IQ1_S", QK_K, 2 + QK_K / 8 + QK_K / 16, false},
    [HEARTH_TYPE_IQ4_NL] = {"IQ4_NL", 32, 2 + 16, false},
    [HEARTH_TYPE_IQ3_S] = {"IQ3_S", QK_K, 2 + 13 * (QK_K / 32) + QK_K / 64, false},
    [HEARTH_TYPE_IQ2_S] = {"IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 16, false},
    [HEARTH_TYPE_IQ4_XS] = {"IQ4_XS", QK_K, 2 + 2 + QK_K / 64 + QK_K / 2, false},
    [HEARTH_TYPE_I8] = {"I8", 1, 1, false},
    [HEARTH_TYPE_I16] = {"I16", 1, 2, false},
    [HEARTH_TYPE_I32] = {"I32", 1, 4, false},
    [HEARTH_TYPE_I64] = {"I64", 1, 8, false},
    [HEARTH_TYPE_F64] = {"F64", 1, 8, false},
    [HEARTH_TYPE_IQ1_M] = {"IQ1_M", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32, false},
    [HEARTH_TYPE_BF16] = {"BF16", 1, 2, true},
    [HEARTH_TYPE_TQ1_0] = {"TQ1_0", QK_K, 2 + QK_K / 64 + (QK_K - 4 * QK_K / 64) / 5, false},
    [HEARTH_TYPE_TQ2_0] = {"TQ2_0", QK_K, 2 + QK_K / 4, false},
    [HEARTH_TYPE_MXFP4] = {"MXFP4", QK_MXFP4, sizeof(block_mxfp4), true},
};

static const struct type_info *type_info(hearth_type type)
{
    if ((unsigned)type >= HEARTH_TYPE_COUNT || !type_table[type].name) return NULL;
    return &type_table[type];
}

const char *hearth_type_name(hearth_type type)
{
    const struct type_info *t = type_info(type);
    return t ? t->name : NULL;
}

hearth_status hearth_type_from_name(const char *name, hearth_type *out)
{
    for (int i = 0; i < HEARTH_TYPE_COUNT; i++) {
        if (type_table[i].name && strcasecmp(type_table[i].name, name) == 0) {
            *out = (hearth_type)i;
            return HEARTH_OK;
        }
    }
    return hearth_error(HEARTH_E_NOT_FOUND, "unknown tensor type '%s'", name);
}

int64_t hearth_type_block_elems(hearth_type type)
{
    const struct type_info *t = type_info(type);
    return t ? t->block_elems : 0;
}

size_t hearth_type_block_bytes(hearth_type type)
{
    const struct type_info *t = type_info(type);
    return t ? t->block_bytes : 0;
}

size_t hearth_type_row_bytes(hearth_type type, int64_t n)
{
    const struct type_info *t = type_info(type);
    if (!t || n < 0 || n % t->block_elems != 0) return 0;
    size_t bytes;
    if (hearth_mul_overflow((size_t)(n / t->block_elems), t->block_bytes, &bytes)) return 0;
    return bytes;
}

bool hearth_type_can_compute(hearth_type type)
{
    const struct type_info *t = type_info(type);
    return t && t->computes;
}

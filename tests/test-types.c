/*
 * test-types.c -- the tensor type table and the float <-> half/bfloat16
 * conversions.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

#include "fp16.h"
#include "testutil.h"

START_TEST(test_block_sizes)
{
    /* Bytes per block as published for the GGUF format. */
    static const struct { hearth_type t; int64_t elems; size_t bytes; } want[] = {
        {HEARTH_TYPE_F32, 1, 4},      {HEARTH_TYPE_F16, 1, 2},      {HEARTH_TYPE_BF16, 1, 2},
        {HEARTH_TYPE_Q4_0, 32, 18},   {HEARTH_TYPE_Q4_1, 32, 20},   {HEARTH_TYPE_Q5_0, 32, 22},
        {HEARTH_TYPE_Q5_1, 32, 24},   {HEARTH_TYPE_Q8_0, 32, 34},   {HEARTH_TYPE_Q8_1, 32, 36},
        {HEARTH_TYPE_Q2_K, 256, 84},  {HEARTH_TYPE_Q3_K, 256, 110}, {HEARTH_TYPE_Q4_K, 256, 144},
        {HEARTH_TYPE_Q5_K, 256, 176}, {HEARTH_TYPE_Q6_K, 256, 210}, {HEARTH_TYPE_Q8_K, 256, 292},
        {HEARTH_TYPE_IQ2_XXS, 256, 66}, {HEARTH_TYPE_IQ2_XS, 256, 74}, {HEARTH_TYPE_IQ3_XXS, 256, 98},
        {HEARTH_TYPE_IQ1_S, 256, 50}, {HEARTH_TYPE_IQ4_NL, 32, 18}, {HEARTH_TYPE_IQ3_S, 256, 110},
        {HEARTH_TYPE_IQ2_S, 256, 82}, {HEARTH_TYPE_IQ4_XS, 256, 136}, {HEARTH_TYPE_IQ1_M, 256, 56},
        {HEARTH_TYPE_TQ1_0, 256, 54}, {HEARTH_TYPE_TQ2_0, 256, 66}, {HEARTH_TYPE_MXFP4, 32, 17},
        {HEARTH_TYPE_I8, 1, 1}, {HEARTH_TYPE_I16, 1, 2}, {HEARTH_TYPE_I32, 1, 4},
        {HEARTH_TYPE_I64, 1, 8}, {HEARTH_TYPE_F64, 1, 8},
    };
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(want); i++) {
        ck_assert_msg(hearth_type_name(want[i].t) != NULL, "type %d has no name", want[i].t);
        ck_assert_int_eq(hearth_type_block_elems(want[i].t), want[i].elems);
        ck_assert_uint_eq(hearth_type_block_bytes(want[i].t), want[i].bytes);
    }
    /* removed and out-of-range values are unknown */
    ck_assert_ptr_null(hearth_type_name((hearth_type)4));
    ck_assert_ptr_null(hearth_type_name((hearth_type)31));
    ck_assert_ptr_null(hearth_type_name(HEARTH_TYPE_COUNT));
    ck_assert_ptr_null(hearth_type_name((hearth_type)-1));
    ck_assert_uint_eq(hearth_type_block_bytes((hearth_type)33), 0);
}
END_TEST

START_TEST(test_row_bytes)
{
    ck_assert_uint_eq(hearth_type_row_bytes(HEARTH_TYPE_Q4_K, 4096), 16 * 144);
    ck_assert_uint_eq(hearth_type_row_bytes(HEARTH_TYPE_F16, 3), 6);
    ck_assert_uint_eq(hearth_type_row_bytes(HEARTH_TYPE_Q4_0, 33), 0);   /* not a whole block */
    ck_assert_uint_eq(hearth_type_row_bytes(HEARTH_TYPE_Q4_0, -32), 0);
    ck_assert_uint_eq(hearth_type_row_bytes(HEARTH_TYPE_F32, INT64_MAX), 0); /* overflow */
}
END_TEST

START_TEST(test_names)
{
    hearth_type t;
    ck_assert_int_eq(hearth_type_from_name("q4_k", &t), HEARTH_OK);
    ck_assert_int_eq(t, HEARTH_TYPE_Q4_K);
    ck_assert_int_eq(hearth_type_from_name("BF16", &t), HEARTH_OK);
    ck_assert_int_eq(t, HEARTH_TYPE_BF16);
    ck_assert_int_eq(hearth_type_from_name("Q4_2", &t), HEARTH_E_NOT_FOUND);
    ck_assert_str_eq(hearth_last_error(), "unknown tensor type 'Q4_2'");
}
END_TEST

START_TEST(test_f16_exhaustive)
{
    /* Every half value converts to float and back unchanged (NaN payloads
     * aside, which stay NaN). */
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = hearth_f16_to_f32((hearth_f16)h);
        hearth_f16 back = hearth_f32_to_f16(f);
        if (isnan(f)) {
            ck_assert_msg((back & 0x7c00) == 0x7c00 && (back & 0x3ff), "NaN %04x lost", h);
        } else {
            ck_assert_msg(back == h, "half %04x -> %a -> %04x", h, f, back);
        }
    }
    ck_assert(hearth_f16_to_f32(0x3c00) == 1.0f);
    ck_assert(hearth_f16_to_f32(0x0001) == 0x1p-24f);
    ck_assert(hearth_f16_to_f32(0x7bff) == 65504.0f);
}
END_TEST

START_TEST(test_f16_rounding)
{
    /* round to nearest, ties to even */
    ck_assert_uint_eq(hearth_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);          /* tie -> even */
    ck_assert_uint_eq(hearth_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);      /* tie -> even */
    ck_assert_uint_eq(hearth_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
    ck_assert_uint_eq(hearth_f32_to_f16(65519.0f), 0x7bff);
    ck_assert_uint_eq(hearth_f32_to_f16(65520.0f), 0x7c00);                 /* overflow */
    ck_assert_uint_eq(hearth_f32_to_f16(-1e10f), 0xfc00);
    ck_assert_uint_eq(hearth_f32_to_f16(0x1p-25f), 0x0000);                 /* tie -> even 0 */
    ck_assert_uint_eq(hearth_f32_to_f16(0x1p-25f + 0x1p-35f), 0x0001);
    ck_assert_uint_eq(hearth_f32_to_f16(3 * 0x1p-25f), 0x0002);             /* tie -> even */
    ck_assert_uint_eq(hearth_f32_to_f16(0x1p-14f - 0x1p-25f), 0x0400);      /* rounds up to normal */
    ck_assert_uint_eq(hearth_f32_to_f16(-0.0f), 0x8000);
    /* against a double-precision model of rounding, on random floats */
    test_rng rng;
    test_rng_seed(&rng, 1);
    for (int i = 0; i < 200000; i++) {
        float f = (float)(test_rng_normal(&rng) * ldexp(1.0, (int)(test_rng_next(&rng) % 40) - 28));
        hearth_f16 h = hearth_f32_to_f16(f);
        float back = hearth_f16_to_f32(h);
        /* no other half is closer */
        float up = hearth_f16_to_f32((hearth_f16)(h + 1));
        float down = hearth_f16_to_f32((hearth_f16)(h - 1));
        if (isinf(back)) continue;
        double err = fabs((double)back - f);
        if ((h & 0x7fff) != 0x7bff && (h & 0x7fff) != 0)
            ck_assert_msg(err <= fabs((double)up - f) && err <= fabs((double)down - f),
                          "%a rounded to %04x", f, h);
    }
}
END_TEST

START_TEST(test_bf16)
{
    ck_assert_uint_eq(hearth_f32_to_bf16(1.0f), 0x3f80);
    ck_assert(hearth_bf16_to_f32(0x3f80) == 1.0f);
    ck_assert_uint_eq(hearth_f32_to_bf16(hearth_f32_from_bits(0x3f808000u)), 0x3f80); /* tie -> even */
    ck_assert_uint_eq(hearth_f32_to_bf16(hearth_f32_from_bits(0x3f818000u)), 0x3f82); /* tie -> even */
    ck_assert_uint_eq(hearth_f32_to_bf16(hearth_f32_from_bits(0x3f808001u)), 0x3f81);
    ck_assert(isnan(hearth_bf16_to_f32(hearth_f32_to_bf16(NAN))));
    ck_assert(isinf(hearth_bf16_to_f32(hearth_f32_to_bf16(INFINITY))));
    for (uint32_t b = 0; b < 0x10000; b++) {
        float f = hearth_bf16_to_f32((hearth_bf16)b);
        if (!isnan(f)) ck_assert_uint_eq(hearth_f32_to_bf16(f), b);
    }
}
END_TEST

static Suite *types_suite(void)
{
    Suite *s = suite_create("types");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_block_sizes);
    tcase_add_test(tc, test_row_bytes);
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_f16_exhaustive);
    tcase_add_test(tc, test_f16_rounding);
    tcase_add_test(tc, test_bf16);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return test_run_suite(types_suite());
}

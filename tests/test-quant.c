/*
 * test-quant.c -- the scalar reference conversions between float and the
 * tensor types (quant.c).
 *
 * - Block layouts: the dequantizers against per-element formulas written
 *   here from the format description, on random block bytes.
 * - Round trips on random data with ragged numbers of blocks, within an
 *   error bound derived from each type's bits; all-zero, non-finite, huge
 *   and tiny input behave as quant.h documents.
 * - The shared models: every tensor of every quantized file dequantizes
 *   close to the F32 model; quantizing the F32 tensors reproduces the shared
 *   Q8_0, F16 and BF16 bytes exactly and is at least as accurate (within
 *   3%) as the shared files for every other type.
 */
#include "internal.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "quant_bounds.h"
#include "testutil.h"

/* Every type quant.c converts. */
static const hearth_type all_types[] = {
    HEARTH_TYPE_F32,  HEARTH_TYPE_F16,  HEARTH_TYPE_BF16, HEARTH_TYPE_Q4_0, HEARTH_TYPE_Q4_1,
    HEARTH_TYPE_Q5_0, HEARTH_TYPE_Q5_1, HEARTH_TYPE_Q8_0, HEARTH_TYPE_Q8_1, HEARTH_TYPE_Q2_K,
    HEARTH_TYPE_Q3_K, HEARTH_TYPE_Q4_K, HEARTH_TYPE_Q5_K, HEARTH_TYPE_Q6_K, HEARTH_TYPE_Q8_K,
    HEARTH_TYPE_MXFP4,
};
#define N_TYPES ((int)HEARTH_ARRAY_LEN(all_types))

#define HALF_MAX_VALUE 65504.0f /* the largest finite half */

/* ------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------ */

static int64_t block_elems(hearth_type t)
{
    return hearth_type_block_elems(t);
}

static void *quantize_new(hearth_type t, const float *x, int64_t n)
{
    size_t bytes = hearth_type_row_bytes(t, n);
    void *q = malloc(bytes ? bytes : 1);
    ck_assert_ptr_nonnull(q);
    memset(q, 0xa5, bytes); /* quantizers must write every byte they own */
    ck_assert_msg(quant_quantize_row(t, x, q, n), "quantize %s n=%lld", hearth_type_name(t),
                  (long long)n);
    return q;
}

static float *dequantize_new(hearth_type t, const void *q, int64_t n)
{
    float *y = malloc((size_t)n * sizeof *y + 1);
    ck_assert_ptr_nonnull(y);
    ck_assert(quant_dequantize_row(t, q, y, n));
    return y;
}

static float *roundtrip(hearth_type t, const float *x, int64_t n)
{
    void *q = quantize_new(t, x, n);
    float *y = dequantize_new(t, q, n);
    free(q);
    return y;
}

static void fill_normal(test_rng *rng, float *x, int64_t n, double sigma)
{
    for (int64_t i = 0; i < n; i++) x[i] = (float)(sigma * test_rng_normal(rng));
}

static hearth_f16 random_half(test_rng *rng)
{
    return hearth_f32_to_f16((float)(4.0 * test_rng_uniform(rng) - 2.0));
}

/* ------------------------------------------------------------------------
 * Block layouts: element e of a block, written directly from the format
 * description, one formula per type.
 * ------------------------------------------------------------------------ */

static float spec_element(hearth_type t, const void *block, int e)
{
    switch (t) {
    case HEARTH_TYPE_Q4_0: {
        const block_q4_0 *b = block;
        int q = e < 16 ? b->qs[e] & 15 : b->qs[e - 16] >> 4;
        return (float)(q - 8) * hearth_f16_to_f32(b->d);
    }
    case HEARTH_TYPE_Q4_1: {
        const block_q4_1 *b = block;
        int q = e < 16 ? b->qs[e] & 15 : b->qs[e - 16] >> 4;
        return (float)q * hearth_f16_to_f32(b->d) + hearth_f16_to_f32(b->m);
    }
    case HEARTH_TYPE_Q5_0: {
        const block_q5_0 *b = block;
        int q = e < 16 ? b->qs[e] & 15 : b->qs[e - 16] >> 4;
        q |= ((b->qh[e / 8] >> (e % 8)) & 1) << 4;
        return (float)(q - 16) * hearth_f16_to_f32(b->d);
    }
    case HEARTH_TYPE_Q5_1: {
        const block_q5_1 *b = block;
        int q = e < 16 ? b->qs[e] & 15 : b->qs[e - 16] >> 4;
        q |= ((b->qh[e / 8] >> (e % 8)) & 1) << 4;
        return (float)q * hearth_f16_to_f32(b->d) + hearth_f16_to_f32(b->m);
    }
    case HEARTH_TYPE_Q8_0: {
        const block_q8_0 *b = block;
        return (float)b->qs[e] * hearth_f16_to_f32(b->d);
    }
    case HEARTH_TYPE_Q8_1: {
        const block_q8_1 *b = block;
        return (float)b->qs[e] * hearth_f16_to_f32(b->d);
    }
    case HEARTH_TYPE_Q2_K: {
        const block_q2_K *b = block;
        int sc = b->scales[e / 16] & 15, mn = b->scales[e / 16] >> 4;
        int q = (b->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
        return hearth_f16_to_f32(b->d) * (float)sc * (float)q -
               hearth_f16_to_f32(b->dmin) * (float)mn;
    }
    case HEARTH_TYPE_Q3_K: {
        const block_q3_K *b = block;
        int k = e / 16;
        int low = k < 8 ? b->scales[k] & 15 : b->scales[k - 8] >> 4;
        int high = (b->scales[8 + k % 4] >> (2 * (k / 4))) & 3;
        int sc = (low | high << 4) - 32;
        int q = (b->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
        int hbit = (b->hmask[e % 32] >> (e / 32)) & 1;
        return hearth_f16_to_f32(b->d) * (float)sc * (float)(q + 4 * hbit - 4);
    }
    case HEARTH_TYPE_Q4_K:
    case HEARTH_TYPE_Q5_K: {
        const uint8_t *s;
        const uint8_t *qs;
        hearth_f16 d, dmin;
        int q;
        if (t == HEARTH_TYPE_Q4_K) {
            const block_q4_K *b = block;
            s = b->scales, qs = b->qs, d = b->d, dmin = b->dmin;
            q = (qs[32 * (e / 64) + e % 32] >> (4 * ((e / 32) % 2))) & 15;
        } else {
            const block_q5_K *b = block;
            s = b->scales, qs = b->qs, d = b->d, dmin = b->dmin;
            q = (qs[32 * (e / 64) + e % 32] >> (4 * ((e / 32) % 2))) & 15;
            q |= ((b->qh[e % 32] >> (e / 32)) & 1) << 4;
        }
        int j = e / 32, sc, mn;
        if (j < 4) {
            sc = s[j] & 63;
            mn = s[j + 4] & 63;
        } else {
            sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
            mn = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
        }
        return hearth_f16_to_f32(d) * (float)sc * (float)q - hearth_f16_to_f32(dmin) * (float)mn;
    }
    case HEARTH_TYPE_Q6_K: {
        const block_q6_K *b = block;
        int k = (e % 128) / 32;
        int low = (b->ql[64 * (e / 128) + 32 * (k % 2) + e % 32] >> (4 * (k / 2))) & 15;
        int high = (b->qh[32 * (e / 128) + e % 32] >> (2 * k)) & 3;
        return hearth_f16_to_f32(b->d) * (float)b->scales[e / 16] * (float)((low | high << 4) - 32);
    }
    case HEARTH_TYPE_Q8_K: {
        const block_q8_K *b = block;
        return b->d * (float)b->qs[e];
    }
    case HEARTH_TYPE_MXFP4: {
        /* E2M1: sign bit 3, exponent bits 2-1 (bias 1), mantissa bit 0,
         * subnormal at exponent 0; E8M0 scale 2^(e - 127), 0xff NaN */
        const block_mxfp4 *b = block;
        const int code = e < 16 ? b->qs[e] & 15 : b->qs[e - 16] >> 4;
        const int ex = (code >> 1) & 3, m = code & 1;
        const double mag = ex == 0 ? 0.5 * m : (1.0 + 0.5 * m) * ldexp(1.0, ex - 1);
        if (b->e == 0xff) return NAN;
        return (float)((code & 8 ? -mag : mag) * ldexp(1.0, b->e - 127));
    }
    default:
        ck_abort_msg("no layout formula for %s", hearth_type_name(t));
        return 0.0f;
    }
}

/* Random block bytes with finite, nonzero scale fields. */
static void random_block(test_rng *rng, hearth_type t, void *block)
{
    uint8_t *bytes = block;
    size_t size = hearth_type_block_bytes(t);
    for (size_t i = 0; i < size; i++) bytes[i] = (uint8_t)test_rng_next(rng);
    switch (t) {
    case HEARTH_TYPE_Q4_0: ((block_q4_0 *)block)->d = random_half(rng); break;
    case HEARTH_TYPE_Q4_1:
        ((block_q4_1 *)block)->d = random_half(rng);
        ((block_q4_1 *)block)->m = random_half(rng);
        break;
    case HEARTH_TYPE_Q5_0: ((block_q5_0 *)block)->d = random_half(rng); break;
    case HEARTH_TYPE_Q5_1:
        ((block_q5_1 *)block)->d = random_half(rng);
        ((block_q5_1 *)block)->m = random_half(rng);
        break;
    case HEARTH_TYPE_Q8_0: ((block_q8_0 *)block)->d = random_half(rng); break;
    case HEARTH_TYPE_Q8_1:
        ((block_q8_1 *)block)->d = random_half(rng);
        ((block_q8_1 *)block)->s = random_half(rng);
        break;
    case HEARTH_TYPE_Q2_K:
        ((block_q2_K *)block)->d = random_half(rng);
        ((block_q2_K *)block)->dmin = random_half(rng);
        break;
    case HEARTH_TYPE_Q3_K: ((block_q3_K *)block)->d = random_half(rng); break;
    case HEARTH_TYPE_Q4_K:
        ((block_q4_K *)block)->d = random_half(rng);
        ((block_q4_K *)block)->dmin = random_half(rng);
        break;
    case HEARTH_TYPE_Q5_K:
        ((block_q5_K *)block)->d = random_half(rng);
        ((block_q5_K *)block)->dmin = random_half(rng);
        break;
    case HEARTH_TYPE_Q6_K: ((block_q6_K *)block)->d = random_half(rng); break;
    case HEARTH_TYPE_Q8_K: ((block_q8_K *)block)->d = (float)test_rng_normal(rng); break;
    case HEARTH_TYPE_MXFP4: ((block_mxfp4 *)block)->e = (uint8_t)(test_rng_next(rng) % 255); break;
    default: break;
    }
}

START_TEST(test_block_layout)
{
    const hearth_type t = all_types[_i];
    if (is_float_type(t)) return;
    const int64_t qk = block_elems(t);
    const size_t bb = hearth_type_block_bytes(t);
    const int n_blocks = 5;
    uint8_t *blocks = malloc(bb * n_blocks);
    float *y = malloc(sizeof(float) * (size_t)qk * n_blocks);
    test_rng rng;
    test_rng_seed(&rng, 100 + (uint64_t)t);
    for (int trial = 0; trial < 40; trial++) {
        for (int b = 0; b < n_blocks; b++) random_block(&rng, t, blocks + b * bb);
        ck_assert(quant_dequantize_row(t, blocks, y, qk * n_blocks));
        for (int b = 0; b < n_blocks; b++)
            for (int e = 0; e < qk; e++) {
                float want = spec_element(t, blocks + b * bb, e);
                if (y[b * qk + e] != want)
                    ck_abort_msg("%s block %d element %d: %a, format says %a",
                                 hearth_type_name(t), b, e, y[b * qk + e], want);
            }
    }
    free(blocks);
    free(y);
}
END_TEST

START_TEST(test_scale_packing)
{
    /* Packed scales read back as the format defines them (checked against
     * spec_element above); here, the unpack helpers against known bytes. */
    const uint8_t q4k[12] = {0xc1, 0x42, 0x03, 0x84, 0x45, 0xc6, 0x07, 0x88,
                             0x9a, 0xbc, 0xde, 0xf0};
    uint8_t sc[8], mn[8];
    q4k_unpack_scales(q4k, sc, mn);
    const uint8_t want_sc[8] = {1, 2, 3, 4, 0x3a, 0x1c, 0x0e, 0x20};
    const uint8_t want_mn[8] = {5, 6, 7, 8, 0x19, 0x3b, 0x0d, 0x2f};
    for (int j = 0; j < 8; j++) {
        ck_assert_uint_eq(sc[j], want_sc[j]);
        ck_assert_uint_eq(mn[j], want_mn[j]);
    }
    /* Q3_K: every 6-bit value 0x3f except scale 5 = 0 and scale 14 = 0x21. */
    uint8_t q3k[12];
    memset(q3k, 0xff, sizeof q3k);
    q3k[5] &= 0xf0;   /* low bits of scale 5 */
    q3k[9] &= ~0x04;  /* high bits of scale 5: byte 8 + 5 % 4, field 5 / 4 */
    q3k[9] &= ~0x08;
    q3k[6] = (uint8_t)((q3k[6] & 0x0f) | 0x10); /* low bits of scale 14 */
    q3k[10] &= (uint8_t)~0xc0;                  /* high bits of scale 14: byte 10, field 3 */
    q3k[10] |= 0x80;
    int8_t s3[16];
    q3k_unpack_scales(q3k, s3);
    for (int k = 0; k < 16; k++) {
        int want = k == 5 ? 0 - 32 : k == 14 ? 0x21 - 32 : 0x3f - 32;
        ck_assert_int_eq(s3[k], want);
    }
}
END_TEST

/* ------------------------------------------------------------------------
 * Round trips
 * ------------------------------------------------------------------------ */

static const int ragged_blocks[] = {1, 2, 3, 7, 16};

START_TEST(test_roundtrip_random)
{
    const hearth_type t = all_types[_i];
    const double bound = roundtrip_bound(t);
    /* Float types are tested with the sizes of the block types. */
    const int64_t qk = is_float_type(t) ? 32 : block_elems(t);
    test_rng rng;
    test_rng_seed(&rng, 7 + (uint64_t)t);
    double worst = 0.0;
    for (size_t r = 0; r < HEARTH_ARRAY_LEN(ragged_blocks); r++) {
        for (int dist = 0; dist < 2; dist++) {
            const int64_t n = qk * ragged_blocks[r];
            float *x = malloc((size_t)n * sizeof *x);
            /* standard normal, or uniform in [-1, 1) (a smaller span for
             * its RMS, so within the same bound) */
            for (int64_t i = 0; i < n; i++)
                x[i] = dist == 0 ? (float)test_rng_normal(&rng)
                                 : (float)(2.0 * test_rng_uniform(&rng) - 1.0);
            float *y = roundtrip(t, x, n);
            double rel = test_rmse(x, y, (size_t)n) / test_rms(x, (size_t)n);
            worst = HEARTH_MAX(worst, rel);
            ck_assert_msg(rel <= bound, "%s, %lld values (%s): relative RMSE %.5f > %.5f",
                          hearth_type_name(t), (long long)n, dist ? "uniform" : "normal", rel,
                          bound);

            /* Blocks are independent: quantizing block by block gives the
             * same bytes (what a parallel or SIMD quantizer must match). */
            size_t row_bytes = hearth_type_row_bytes(t, n);
            size_t block_bytes = hearth_type_row_bytes(t, qk);
            uint8_t *whole = quantize_new(t, x, n);
            for (int b = 0; b < ragged_blocks[r]; b++) {
                uint8_t *one = quantize_new(t, x + b * qk, qk);
                ck_assert_msg(memcmp(one, whole + b * block_bytes, block_bytes) == 0,
                              "%s: block %d differs when quantized alone", hearth_type_name(t), b);
                free(one);
            }
            /* and deterministically */
            uint8_t *again = quantize_new(t, x, n);
            ck_assert(memcmp(whole, again, row_bytes) == 0);
            free(again);
            free(whole);
            free(x);
            free(y);
        }
    }
    printf("round trip %-5s worst relative RMSE %.5f (bound %.5f)\n", hearth_type_name(t), worst,
           bound);
}
END_TEST

START_TEST(test_roundtrip_zero)
{
    const hearth_type t = all_types[_i];
    const int64_t n = 3 * HEARTH_MAX(block_elems(t), 32);
    float *x = calloc((size_t)n, sizeof *x);
    x[5] = -0.0f;
    float *y = roundtrip(t, x, n);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(y[i] == 0.0f, "%s: zero row gives %a at %lld", hearth_type_name(t), y[i],
                      (long long)i);
    free(x);
    free(y);
}
END_TEST

/* Blocks holding NaN or an infinity dequantize to NaN everywhere; the other
 * blocks of the row are not affected. */
START_TEST(test_nonfinite)
{
    const hearth_type t = all_types[_i];
    const int64_t qk = is_float_type(t) ? 32 : block_elems(t);
    const int64_t n = 4 * qk;
    test_rng rng;
    test_rng_seed(&rng, 11);
    float *x = malloc((size_t)n * sizeof *x);
    fill_normal(&rng, x, n, 1.0);
    x[qk + 5] = NAN;           /* block 1 */
    x[2 * qk] = INFINITY;      /* block 2, first value */
    x[4 * qk - 1] = -INFINITY; /* block 3, last value */
    float *y = roundtrip(t, x, n);
    if (is_float_type(t)) {
        /* value by value, IEEE: NaN stays NaN, infinities stay */
        ck_assert(isnan(y[qk + 5]));
        ck_assert(isinf(y[2 * qk]) && y[2 * qk] > 0);
        ck_assert(isinf(y[4 * qk - 1]) && y[4 * qk - 1] < 0);
        for (int64_t i = 0; i < n; i++) {
            if (i == qk + 5 || i == 2 * qk || i == 4 * qk - 1) continue;
            ck_assert(fabsf(y[i] - x[i]) <= (float)expected_rel_rmse(t) * fabsf(x[i]));
        }
    } else {
        for (int64_t i = qk; i < n; i++)
            ck_assert_msg(isnan(y[i]), "%s: value %lld of a non-finite block is %a",
                          hearth_type_name(t), (long long)i, y[i]);
        double rel = test_rmse(x, y, (size_t)qk) / test_rms(x, (size_t)qk);
        ck_assert_msg(rel <= roundtrip_bound(t), "%s: finite block disturbed (%.4f)",
                      hearth_type_name(t), rel);
    }
    free(x);
    free(y);
}
END_TEST

/* Finite values beyond a half scale saturate: outputs stay finite and the
 * largest values keep their sign and come out at least as large as the
 * largest half.  F16 rounds them to infinity instead, BF16 (float's
 * exponent range) keeps 1e30 but rounds FLT_MAX up to infinity. */
START_TEST(test_huge)
{
    const hearth_type t = all_types[_i];
    const int64_t qk = is_float_type(t) ? 32 : block_elems(t);
    const int64_t n = 3 * qk;
    test_rng rng;
    test_rng_seed(&rng, 12);
    float *x = malloc((size_t)n * sizeof *x);
    fill_normal(&rng, x, n, 1.0);
    for (int64_t i = 0; i < qk; i++) x[i] *= 1e30f; /* block 0: all huge */
    x[qk + 3] = FLT_MAX;                            /* block 1: both extremes */
    x[qk + 4] = -FLT_MAX;
    float *y = roundtrip(t, x, n);
    if (t == HEARTH_TYPE_F16 || t == HEARTH_TYPE_BF16) {
        ck_assert(isinf(y[qk + 3]) && y[qk + 3] > 0);
        ck_assert(isinf(y[qk + 4]) && y[qk + 4] < 0);
        for (int64_t i = 0; i < qk; i++) {
            if (t == HEARTH_TYPE_F16) ck_assert(isinf(y[i]) && signbit(y[i]) == signbit(x[i]));
            else ck_assert(fabsf(y[i] - x[i]) <= 0x1p-8f * fabsf(x[i]));
        }
    } else {
        for (int b = 0; b < 2; b++) {
            const float *xb = x + b * qk, *yb = y + b * qk;
            float amax = 0.0f;
            for (int64_t i = 0; i < qk; i++) amax = HEARTH_MAX(amax, fabsf(xb[i]));
            for (int64_t i = 0; i < qk; i++) {
                ck_assert_msg(isfinite(yb[i]), "%s: block %d value %lld = %a from finite %a",
                              hearth_type_name(t), b, (long long)i, yb[i], xb[i]);
                if (fabsf(xb[i]) >= 0.5f * amax)
                    ck_assert_msg(signbit(yb[i]) == signbit(xb[i]) &&
                                      fabsf(yb[i]) >= HALF_MAX_VALUE,
                                  "%s: %a saturated to %a", hearth_type_name(t), xb[i], yb[i]);
            }
        }
    }
    /* the ordinary block after them is untouched */
    double rel = test_rmse(x + 2 * qk, y + 2 * qk, (size_t)qk) / test_rms(x + 2 * qk, (size_t)qk);
    ck_assert_msg(rel <= roundtrip_bound(t), "%s: ordinary block disturbed (%.4f)",
                  hearth_type_name(t), rel);
    free(x);
    free(y);
}
END_TEST

/* Scale does not matter while the scales stay normal halves: the bound
 * holds from 1e-2 to 1e3 times unit data.  Far smaller blocks lose
 * precision gracefully; subnormal floats quantize to zero under a half
 * scale (Q8_K's float scale keeps them). */
START_TEST(test_magnitudes)
{
    const hearth_type t = all_types[_i];
    const int64_t qk = is_float_type(t) ? 32 : block_elems(t);
    const int64_t n = 4 * qk;
    test_rng rng;
    test_rng_seed(&rng, 13);
    float *x = malloc((size_t)n * sizeof *x);
    static const double ok_scales[] = {1e-2, 0.1, 10.0, 1e3};
    for (size_t s = 0; s < HEARTH_ARRAY_LEN(ok_scales); s++) {
        fill_normal(&rng, x, n, ok_scales[s]);
        float *y = roundtrip(t, x, n);
        double rel = test_rmse(x, y, (size_t)n) / test_rms(x, (size_t)n);
        ck_assert_msg(rel <= roundtrip_bound(t), "%s at scale %g: relative RMSE %.5f > %.5f",
                      hearth_type_name(t), ok_scales[s], rel, roundtrip_bound(t));
        free(y);
    }
    static const double tiny_scales[] = {1e-5, 1e-8, 1e-20, 1e-39, 1e-44};
    for (size_t s = 0; s < HEARTH_ARRAY_LEN(tiny_scales); s++) {
        fill_normal(&rng, x, n, tiny_scales[s]);
        float *y = roundtrip(t, x, n);
        float amax = 0.0f;
        for (int64_t i = 0; i < n; i++) amax = HEARTH_MAX(amax, fabsf(x[i]));
        for (int64_t i = 0; i < n; i++) {
            ck_assert_msg(isfinite(y[i]) && fabsf(y[i] - x[i]) <= 2.0f * amax,
                          "%s at scale %g: %a -> %a", hearth_type_name(t), tiny_scales[s], x[i],
                          y[i]);
            bool half_scale = !is_float_type(t) && t != HEARTH_TYPE_Q8_K && t != HEARTH_TYPE_MXFP4;
            if (half_scale && tiny_scales[s] <= 1e-20) ck_assert(y[i] == 0.0f);
        }
        /* Q8_K's float scale and MXFP4's exponent (down to 2^-128) keep
         * such blocks whole */
        if ((t == HEARTH_TYPE_Q8_K || t == HEARTH_TYPE_MXFP4) && tiny_scales[s] >= 1e-20) {
            double rel = test_rmse(x, y, (size_t)n) / test_rms(x, (size_t)n);
            ck_assert_msg(rel <= roundtrip_bound(t), "%s at scale %g: %.5f", hearth_type_name(t),
                          tiny_scales[s], rel);
        }
        free(y);
    }
    free(x);
}
END_TEST

/* ------------------------------------------------------------------------
 * The 8-bit rules
 * ------------------------------------------------------------------------ */

START_TEST(test_q8_rules)
{
    test_rng rng;
    test_rng_seed(&rng, 14);
    float x[QK_K];
    for (int trial = 0; trial < 200; trial++) {
        fill_normal(&rng, x, QK_K, trial % 2 ? 1.0 : 3e-3);
        /* Q8_0 and Q8_1: d = half(max|x| / 127), q = roundf(x * (1 / d)) with
         * the unrounded d. */
        block_q8_0 b0[QK_K / QK8_0];
        block_q8_1 b1[QK_K / QK8_1];
        ck_assert(quant_quantize_row(HEARTH_TYPE_Q8_0, x, b0, QK_K));
        ck_assert(quant_quantize_row(HEARTH_TYPE_Q8_1, x, b1, QK_K));
        for (int b = 0; b < QK_K / QK8_0; b++) {
            float amax = 0.0f;
            for (int j = 0; j < QK8_0; j++) amax = HEARTH_MAX(amax, fabsf(x[32 * b + j]));
            const float d = amax / 127.0f, inv = 1.0f / d;
            ck_assert_uint_eq(b0[b].d, hearth_f32_to_f16(d));
            ck_assert_uint_eq(b1[b].d, hearth_f32_to_f16(d));
            int sum = 0;
            for (int j = 0; j < QK8_0; j++) {
                int want = (int)roundf(x[32 * b + j] * inv);
                ck_assert_int_eq(b0[b].qs[j], want);
                ck_assert_int_eq(b1[b].qs[j], want);
                sum += want;
            }
            ck_assert_uint_eq(b1[b].s, hearth_f32_to_f16(hearth_f16_to_f32(b1[b].d) * (float)sum));
        }
        /* Q8_K: d = max|x| / 127 as a float, q the nearest level, bsums the
         * sums of 16 quants. */
        block_q8_K bk;
        ck_assert(quant_quantize_row(HEARTH_TYPE_Q8_K, x, &bk, QK_K));
        float amax = 0.0f;
        for (int j = 0; j < QK_K; j++) amax = HEARTH_MAX(amax, fabsf(x[j]));
        ck_assert(bk.d == amax / 127.0f);
        for (int j = 0; j < QK_K; j++)
            ck_assert_msg(fabsf((float)bk.qs[j] - x[j] / bk.d) <= 0.5f + 1e-4f, "Q8_K q[%d]", j);
        for (int g = 0; g < QK_K / 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += bk.qs[16 * g + j];
            ck_assert_int_eq(bk.bsums[g], sum);
        }
    }
    /* Halves round away from zero: with max 127, d = 1 and 2.5 -> 3. */
    float h[QK8_0] = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 1.49f};
    block_q8_0 b;
    ck_assert(quant_quantize_row(HEARTH_TYPE_Q8_0, h, &b, QK8_0));
    ck_assert_uint_eq(b.d, 0x3c00);
    ck_assert_int_eq(b.qs[0], 127);
    ck_assert_int_eq(b.qs[1], 3);
    ck_assert_int_eq(b.qs[2], -3);
    ck_assert_int_eq(b.qs[3], 1);
    ck_assert_int_eq(b.qs[4], -1);
    ck_assert_int_eq(b.qs[5], 1);
}
END_TEST

START_TEST(test_dispatch)
{
    float x[64] = {1.0f}, y[64];
    uint8_t buf[4 * 292];
    memset(buf, 0x5a, sizeof buf);
    for (int i = 0; i < 64; i++) y[i] = 42.0f;
    /* not a whole number of blocks, negative, unsupported types */
    ck_assert(!quant_quantize_row(HEARTH_TYPE_Q4_0, x, buf, 33));
    ck_assert(!quant_quantize_row(HEARTH_TYPE_Q4_K, x, buf, 64));
    ck_assert(!quant_quantize_row(HEARTH_TYPE_F16, x, buf, -1));
    ck_assert(!quant_quantize_row(HEARTH_TYPE_IQ2_XXS, x, buf, 256));
    ck_assert(!quant_quantize_row((hearth_type)4, x, buf, 32));
    ck_assert(!quant_quantize_row(HEARTH_TYPE_COUNT, x, buf, 32));
    for (size_t i = 0; i < sizeof buf; i++) ck_assert_uint_eq(buf[i], 0x5a);
    ck_assert(!quant_dequantize_row(HEARTH_TYPE_Q8_0, buf, y, 16));
    ck_assert(!quant_dequantize_row(HEARTH_TYPE_IQ4_NL, buf, y, 32));
    ck_assert(!quant_dequantize_row(HEARTH_TYPE_I32, buf, y, 32));
    for (int i = 0; i < 64; i++) ck_assert(y[i] == 42.0f);
    /* zero elements is a valid, empty row */
    ck_assert(quant_quantize_row(HEARTH_TYPE_Q6_K, x, buf, 0));
    ck_assert(quant_dequantize_row(HEARTH_TYPE_Q6_K, buf, y, 0));
    /* every type the engine computes with converts */
    for (int t = 0; t < HEARTH_TYPE_COUNT; t++) {
        if (!hearth_type_can_compute((hearth_type)t)) continue;
        bool listed = false;
        for (int k = 0; k < N_TYPES; k++) listed |= all_types[k] == (hearth_type)t;
        ck_assert_msg(listed, "%s is computable but not converted", hearth_type_name(t));
    }
}
END_TEST

/* ------------------------------------------------------------------------
 * The shared models
 * ------------------------------------------------------------------------ */

static const char *const model_families[] = {"micro-llama", "micro-qwen2"};
static const char *const shared_variants[] = {
    "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
    "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K",
};
#define N_VARIANTS ((int)HEARTH_ARRAY_LEN(shared_variants))
#define N_SHARED (2 * N_VARIANTS)

/* Types whose conversion has one right answer (round to nearest), so our
 * bytes must equal the shared file's. */
static bool exact_type(hearth_type t)
{
    return t == HEARTH_TYPE_Q8_0 || t == HEARTH_TYPE_F16 || t == HEARTH_TYPE_BF16;
}

struct shared_pair {
    char name[64];
    hearth_gguf *f32;
    hearth_gguf *quant;
};

static bool open_shared(int index, struct shared_pair *p)
{
    if (!test_require_data()) return false;
    const char *family = model_families[index / N_VARIANTS];
    char rel[256];
    snprintf(p->name, sizeof p->name, "%s-%s", family, shared_variants[index % N_VARIANTS]);
    snprintf(rel, sizeof rel, "models/%s-f32.gguf", family);
    const char *path = test_data_path(rel);
    ck_assert_msg(path != NULL, "missing %s", rel);
    ck_assert_msg(hearth_gguf_open(path, &p->f32) == HEARTH_OK, "%s", hearth_last_error());
    snprintf(rel, sizeof rel, "models/%s.gguf", p->name);
    path = test_data_path(rel);
    ck_assert_msg(path != NULL, "missing %s", rel);
    ck_assert_msg(hearth_gguf_open(path, &p->quant) == HEARTH_OK, "%s", hearth_last_error());
    return true;
}

static void close_shared(struct shared_pair *p)
{
    hearth_gguf_close(p->f32);
    hearth_gguf_close(p->quant);
}

/* The F32 tensor matching t, as an aligned copy. */
static float *f32_twin(const struct shared_pair *p, const hearth_gguf_tensor *t, int64_t *n_out)
{
    const hearth_gguf_tensor *f = hearth_gguf_find_tensor(p->f32, t->name);
    ck_assert_msg(f != NULL, "%s: %s not in the F32 model", p->name, t->name);
    ck_assert_int_eq(f->type, HEARTH_TYPE_F32);
    int64_t n = 1;
    for (int d = 0; d < 4; d++) {
        ck_assert_int_eq(f->ne[d], t->ne[d]);
        n *= t->ne[d];
    }
    ck_assert_uint_eq(f->bytes, (size_t)n * sizeof(float));
    float *x = malloc(f->bytes);
    ck_assert_ptr_nonnull(x);
    memcpy(x, f->data, f->bytes);
    *n_out = n;
    return x;
}

/* Dequantize a tensor row by row (rows of ne[0] elements). */
static float *dequantize_tensor(hearth_type type, const void *data, int64_t row_n, int64_t n)
{
    const size_t row_bytes = hearth_type_row_bytes(type, row_n);
    ck_assert_uint_gt(row_bytes, 0);
    float *y = malloc((size_t)n * sizeof *y);
    ck_assert_ptr_nonnull(y);
    bool ok = true;
    for (int64_t r = 0; r < n / row_n; r++)
        ok &= quant_dequantize_row(type, (const uint8_t *)data + r * row_bytes, y + r * row_n, row_n);
    ck_assert(ok);
    return y;
}

/* Test 2: every tensor, in its own type, is close to the F32 tensor. */
START_TEST(test_shared_dequantize)
{
    struct shared_pair p;
    if (!open_shared(_i, &p)) return;
    for (int64_t k = 0; k < hearth_gguf_n_tensors(p.quant); k++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(p.quant, k);
        int64_t n;
        float *x = f32_twin(&p, t, &n);
        ck_assert_uint_eq(t->bytes, hearth_type_row_bytes(t->type, t->ne[0]) * (size_t)(n / t->ne[0]));
        float *y = dequantize_tensor(t->type, t->data, t->ne[0], n);
        double rel = test_rmse(x, y, (size_t)n) / test_rms(x, (size_t)n);
        ck_assert_msg(rel <= tensor_bound(t->type), "%s: %s (%s) relative RMSE %.5f > %.5f",
                      p.name, t->name, hearth_type_name(t->type), rel, tensor_bound(t->type));
        free(x);
        free(y);
    }
    close_shared(&p);
}
END_TEST

/* Test 3: quantizing the F32 tensors to each tensor's type reproduces the
 * exact types' bytes and is no less accurate than the shared file. */
START_TEST(test_shared_quantize)
{
    struct shared_pair p;
    if (!open_shared(_i, &p)) return;
    double worst[HEARTH_TYPE_COUNT] = {0};
    int count[HEARTH_TYPE_COUNT] = {0};
    for (int64_t k = 0; k < hearth_gguf_n_tensors(p.quant); k++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(p.quant, k);
        if (t->type == HEARTH_TYPE_F32) continue;
        int64_t n;
        float *x = f32_twin(&p, t, &n);
        const int64_t row_n = t->ne[0];
        const size_t row_bytes = hearth_type_row_bytes(t->type, row_n);
        uint8_t *ours = malloc(t->bytes);
        ck_assert_ptr_nonnull(ours);
        bool ok = true;
        for (int64_t r = 0; r < n / row_n; r++)
            ok &= quant_quantize_row(t->type, x + r * row_n, ours + r * row_bytes, row_n);
        ck_assert(ok);
        if (exact_type(t->type)) {
            const uint8_t *theirs = t->data;
            for (size_t i = 0; i < t->bytes; i++)
                if (ours[i] != theirs[i])
                    ck_abort_msg("%s: %s (%s) differs at byte %zu: %02x, file %02x", p.name,
                                 t->name, hearth_type_name(t->type), i, ours[i], theirs[i]);
        } else {
            float *y_ours = dequantize_tensor(t->type, ours, row_n, n);
            float *y_theirs = dequantize_tensor(t->type, t->data, row_n, n);
            double e_ours = test_rmse(x, y_ours, (size_t)n);
            double e_theirs = test_rmse(x, y_theirs, (size_t)n);
            double ratio = e_ours / e_theirs;
            ck_assert_msg(e_ours <= 1.03 * e_theirs,
                          "%s: %s (%s) our RMSE %.6g is %.4f times the file's %.6g", p.name,
                          t->name, hearth_type_name(t->type), e_ours, ratio, e_theirs);
            worst[t->type] = HEARTH_MAX(worst[t->type], ratio);
            count[t->type]++;
            free(y_ours);
            free(y_theirs);
        }
        free(ours);
        free(x);
    }
    for (int ty = 0; ty < HEARTH_TYPE_COUNT; ty++)
        if (count[ty])
            printf("%s: %s, %d tensors: RMSE ours / file at most %.4f\n", p.name,
                   hearth_type_name(ty), count[ty], worst[ty]);
    close_shared(&p);
}
END_TEST

static Suite *quant_suite(void)
{
    Suite *s = suite_create("quant");
    TCase *tc = tcase_create("blocks");
    tcase_add_loop_test(tc, test_block_layout, 0, N_TYPES);
    tcase_add_test(tc, test_scale_packing);
    tcase_add_loop_test(tc, test_roundtrip_random, 0, N_TYPES);
    tcase_add_loop_test(tc, test_roundtrip_zero, 0, N_TYPES);
    tcase_add_loop_test(tc, test_nonfinite, 0, N_TYPES);
    tcase_add_loop_test(tc, test_huge, 0, N_TYPES);
    tcase_add_loop_test(tc, test_magnitudes, 0, N_TYPES);
    tcase_add_test(tc, test_q8_rules);
    tcase_add_test(tc, test_dispatch);
    suite_add_tcase(s, tc);
    TCase *models = tcase_create("shared models");
    tcase_add_loop_test(models, test_shared_dequantize, 0, N_SHARED);
    tcase_add_loop_test(models, test_shared_quantize, 0, N_SHARED);
    suite_add_tcase(s, models);
    return s;
}

int main(void)
{
    return test_run_suite(quant_suite());
}

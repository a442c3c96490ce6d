/*
 * test-kernels.c -- the matrix-product kernels of simd/.
 *
 * - The scalar reference: for every weight type, vec_dot on random rows
 *   with ragged numbers of blocks against a double-precision dot product of
 *   the dequantized weight row and the dequantized activation row.  These
 *   are the same numbers, so the bound only allows for float rounding.
 * - Activation conversions produce exactly the reference quantizers' bytes.
 * - A block holding NaN poisons the dot product.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "quant.h"
#include "testutil.h"

/* Every weight type with a matrix product. */
static const hearth_type weight_types[] = {
    HEARTH_TYPE_F32,  HEARTH_TYPE_F16,  HEARTH_TYPE_BF16, HEARTH_TYPE_Q4_0, HEARTH_TYPE_Q4_1,
    HEARTH_TYPE_Q5_0, HEARTH_TYPE_Q5_1, HEARTH_TYPE_Q8_0, HEARTH_TYPE_Q2_K, HEARTH_TYPE_Q3_K,
    HEARTH_TYPE_Q4_K, HEARTH_TYPE_Q5_K, HEARTH_TYPE_Q6_K,
};
#define N_WEIGHT_TYPES ((int)HEARTH_ARRAY_LEN(weight_types))

/* Ragged numbers of blocks: below, at and above multiples of DOT_LANES. */
static const int block_counts[] = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 23, 33};
#define N_BLOCK_COUNTS ((int)HEARTH_ARRAY_LEN(block_counts))

static bool is_float_type(hearth_type t)
{
    return t == HEARTH_TYPE_F32 || t == HEARTH_TYPE_F16 || t == HEARTH_TYPE_BF16;
}

/* Elements per "block" for the tests: float rows get ragged lengths too. */
static int64_t test_block_elems(hearth_type t)
{
    return is_float_type(t) ? 37 : hearth_type_block_elems(t);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

static void fill_normal(test_rng *rng, float *x, int64_t n, double sigma)
{
    for (int64_t i = 0; i < n; i++) x[i] = (float)(sigma * test_rng_normal(rng));
}

/* A random half of moderate size (either sign). */
static hearth_f16 random_half(test_rng *rng, double magnitude)
{
    return hearth_f32_to_f16((float)(magnitude * test_rng_normal(rng)));
}

/* Random bytes for every quant bit of a row, with the float fields set to
 * moderate values: every bit pattern of the quants and the integer scales
 * is reached, which quantizing random floats would not do. */
static void random_row_bytes(test_rng *rng, hearth_type t, void *row, int64_t n_blocks)
{
    const size_t bb = hearth_type_block_bytes(t);
    uint8_t *p = row;
    for (size_t i = 0; i < bb * (size_t)n_blocks; i++) p[i] = (uint8_t)test_rng_next(rng);
    for (int64_t b = 0; b < n_blocks; b++) {
        void *blk = p + (size_t)b * bb;
        switch (t) {
        case HEARTH_TYPE_Q4_0: ((block_q4_0 *)blk)->d = random_half(rng, 0.1); break;
        case HEARTH_TYPE_Q5_0: ((block_q5_0 *)blk)->d = random_half(rng, 0.1); break;
        case HEARTH_TYPE_Q8_0: ((block_q8_0 *)blk)->d = random_half(rng, 0.01); break;
        case HEARTH_TYPE_Q4_1:
            ((block_q4_1 *)blk)->d = random_half(rng, 0.1);
            ((block_q4_1 *)blk)->m = random_half(rng, 1.0);
            break;
        case HEARTH_TYPE_Q5_1:
            ((block_q5_1 *)blk)->d = random_half(rng, 0.1);
            ((block_q5_1 *)blk)->m = random_half(rng, 1.0);
            break;
        case HEARTH_TYPE_Q2_K:
            ((block_q2_K *)blk)->d = random_half(rng, 0.1);
            ((block_q2_K *)blk)->dmin = random_half(rng, 0.1);
            break;
        case HEARTH_TYPE_Q3_K: ((block_q3_K *)blk)->d = random_half(rng, 0.01); break;
        case HEARTH_TYPE_Q4_K:
            ((block_q4_K *)blk)->d = random_half(rng, 0.01);
            ((block_q4_K *)blk)->dmin = random_half(rng, 0.01);
            break;
        case HEARTH_TYPE_Q5_K:
            ((block_q5_K *)blk)->d = random_half(rng, 0.01);
            ((block_q5_K *)blk)->dmin = random_half(rng, 0.01);
            break;
        case HEARTH_TYPE_Q6_K: ((block_q6_K *)blk)->d = random_half(rng, 0.001); break;
        default: ck_abort_msg("no random bytes for %s", hearth_type_name(t));
        }
    }
}

/* The row with its scales zeroed, so that it dequantizes to the per-element
 * offsets (the mins of the affine formats, zero for the others). */
static void zero_scales(hearth_type t, void *row, int64_t n_blocks)
{
    const size_t bb = hearth_type_block_bytes(t);
    for (int64_t b = 0; b < n_blocks; b++) {
        void *blk = (uint8_t *)row + (size_t)b * bb;
        switch (t) {
        case HEARTH_TYPE_Q4_0: ((block_q4_0 *)blk)->d = 0; break;
        case HEARTH_TYPE_Q4_1: ((block_q4_1 *)blk)->d = 0; break;
        case HEARTH_TYPE_Q5_0: ((block_q5_0 *)blk)->d = 0; break;
        case HEARTH_TYPE_Q5_1: ((block_q5_1 *)blk)->d = 0; break;
        case HEARTH_TYPE_Q8_0: ((block_q8_0 *)blk)->d = 0; break;
        case HEARTH_TYPE_Q2_K: ((block_q2_K *)blk)->d = 0; break;
        case HEARTH_TYPE_Q3_K: ((block_q3_K *)blk)->d = 0; break;
        case HEARTH_TYPE_Q4_K: ((block_q4_K *)blk)->d = 0; break;
        case HEARTH_TYPE_Q5_K: ((block_q5_K *)blk)->d = 0; break;
        case HEARTH_TYPE_Q6_K: ((block_q6_K *)blk)->d = 0; break;
        default: memset(blk, 0, bb); break;
        }
    }
}

/* A weight row and an activation row in the kernels' formats. */
struct dot_case {
    hearth_type type, act_type;
    int64_t n, n_blocks;
    void *w;   /* weight row */
    void *x;   /* activation row, converted */
    float *xf; /* activation row, float */
};

static void make_case(const hearth_kernels *k, hearth_type t, int64_t n_blocks, bool random_bytes,
                      uint64_t seed, struct dot_case *c)
{
    test_rng rng;
    test_rng_seed(&rng, seed);
    c->type = t;
    c->act_type = k->act_type[t];
    c->n_blocks = n_blocks;
    c->n = n_blocks * test_block_elems(t);
    c->w = xmalloc(hearth_type_row_bytes(t, c->n));
    c->x = xmalloc(hearth_type_row_bytes(c->act_type, c->n));
    c->xf = xmalloc((size_t)c->n * sizeof(float));
    if (random_bytes && !is_float_type(t)) {
        random_row_bytes(&rng, t, c->w, n_blocks);
    } else {
        float *wf = xmalloc((size_t)c->n * sizeof(float));
        fill_normal(&rng, wf, c->n, 0.05);
        ck_assert(quant_quantize_row(t, wf, c->w, c->n));
        free(wf);
    }
    fill_normal(&rng, c->xf, c->n, 1.0);
    ck_assert_ptr_nonnull(k->act_convert[c->act_type]);
    k->act_convert[c->act_type](c->xf, c->x, c->n);
}

static void free_case(struct dot_case *c)
{
    free(c->w);
    free(c->x);
    free(c->xf);
}

/* The dot product of the dequantized rows in double precision, and the
 * magnitude its rounding error scales with: sum |w_i x_i| plus, for the
 * affine formats, sum |offset_i x_i| (the kernels add the scaled and the
 * offset parts separately, so they may cancel). */
static double reference_dot(const struct dot_case *c, double *magnitude)
{
    const size_t wbytes = hearth_type_row_bytes(c->type, c->n);
    float *w = xmalloc((size_t)c->n * sizeof(float));
    float *x = xmalloc((size_t)c->n * sizeof(float));
    float *off = xmalloc((size_t)c->n * sizeof(float));
    void *wz = xmalloc(wbytes);
    ck_assert(quant_dequantize_row(c->type, c->w, w, c->n));
    ck_assert(quant_dequantize_row(c->act_type, c->x, x, c->n));
    memcpy(wz, c->w, wbytes);
    zero_scales(c->type, wz, c->n_blocks);
    ck_assert(quant_dequantize_row(c->type, wz, off, c->n));
    double dot = 0.0, mag = 0.0;
    for (int64_t i = 0; i < c->n; i++) {
        dot += (double)w[i] * x[i];
        mag += fabs((double)w[i] * x[i]) + fabs((double)off[i] * x[i]);
    }
    free(w);
    free(x);
    free(off);
    free(wz);
    *magnitude = mag;
    return dot;
}

/* Float rounding allowed between a kernel and the exact dot product: a few
 * roundings per block contribution and one per addition into the partial
 * sums (per element for the float types, per block otherwise). */
static double rounding_bound(const struct dot_case *c, double magnitude)
{
    const double adds = is_float_type(c->type) ? (double)c->n : (double)c->n_blocks;
    return (adds + 8.0) * 0x1p-24 * magnitude;
}

static void check_against_reference(hearth_type t, bool random_bytes)
{
    const hearth_kernels *k = hearth_kernels_scalar();
    ck_assert_msg(hearth_kernels_supports(k, t), "no scalar kernel for %s", hearth_type_name(t));
    for (int i = 0; i < N_BLOCK_COUNTS; i++) {
        struct dot_case c;
        make_case(k, t, block_counts[i], random_bytes, 1000u * (uint64_t)t + (uint64_t)i, &c);
        double mag;
        const double ref = reference_dot(&c, &mag);
        float got = NAN;
        k->vec_dot[t](c.n, &got, c.w, c.x);
        const double err = fabs((double)got - ref), bound = rounding_bound(&c, mag);
        ck_assert_msg(err <= bound, "%s, %lld blocks%s: vec_dot %.9g, reference %.9g: error %.3g > %.3g",
                      hearth_type_name(t), (long long)c.n_blocks, random_bytes ? " (random bytes)" : "",
                      (double)got, ref, err, bound);
        ck_assert_msg(mag > 0.0, "%s: degenerate test row", hearth_type_name(t));
        free_case(&c);
    }
}

START_TEST(test_scalar_vec_dot_quantized_floats)
{
    check_against_reference(weight_types[_i], false);
}
END_TEST

START_TEST(test_scalar_vec_dot_random_bytes)
{
    if (is_float_type(weight_types[_i])) return;
    check_against_reference(weight_types[_i], true);
}
END_TEST

/* Zero-length rows give 0. */
START_TEST(test_scalar_vec_dot_empty)
{
    const hearth_kernels *k = hearth_kernels_scalar();
    const hearth_type t = weight_types[_i];
    uint8_t dummy[16] = {0};
    float s = 42.0f;
    k->vec_dot[t](0, &s, dummy, dummy);
    ck_assert_msg(s == 0.0f, "%s: empty dot %g", hearth_type_name(t), (double)s);
}
END_TEST

/* A weight block holding NaN (poisoned by the quantizer) makes the result
 * NaN, whichever partial sum it lands in. */
START_TEST(test_scalar_vec_dot_nan_block)
{
    const hearth_kernels *k = hearth_kernels_scalar();
    const hearth_type t = weight_types[_i];
    const int64_t be = test_block_elems(t), n_blocks = 11;
    for (int64_t bad = 0; bad < n_blocks; bad += 5) {
        struct dot_case c;
        make_case(k, t, n_blocks, false, 77 + (uint64_t)bad, &c);
        float *wf = xmalloc((size_t)c.n * sizeof(float));
        ck_assert(quant_dequantize_row(t, c.w, wf, c.n));
        wf[bad * be + 3] = NAN;
        ck_assert(quant_quantize_row(t, wf, c.w, c.n));
        float s = 0.0f;
        k->vec_dot[t](c.n, &s, c.w, c.x);
        ck_assert_msg(isnan(s), "%s: NaN in block %lld gave %g", hearth_type_name(t), (long long)bad,
                      (double)s);
        free(wf);
        free_case(&c);
    }
}
END_TEST

/* The activation conversions give the reference quantizers' bytes, on
 * ordinary rows and on rows with zero, huge, tiny and non-finite blocks. */
START_TEST(test_scalar_act_convert)
{
    static const hearth_type act_types[] = {HEARTH_TYPE_F32, HEARTH_TYPE_Q8_0, HEARTH_TYPE_Q8_1,
                                            HEARTH_TYPE_Q8_K};
    const hearth_kernels *k = hearth_kernels_scalar();
    test_rng rng;
    test_rng_seed(&rng, 5);
    for (size_t a = 0; a < HEARTH_ARRAY_LEN(act_types); a++) {
        const hearth_type t = act_types[a];
        const int64_t be = t == HEARTH_TYPE_F32 ? 1 : hearth_type_block_elems(t);
        const int64_t n = 9 * (t == HEARTH_TYPE_Q8_K ? be : 32);
        float *x = xmalloc((size_t)n * sizeof(float));
        fill_normal(&rng, x, n, 1.0);
        for (int64_t i = be; i < 2 * be; i++) x[i] = 0.0f;
        for (int64_t i = 2 * be; i < 3 * be; i++) x[i] *= 1e30f;
        for (int64_t i = 3 * be; i < 4 * be; i++) x[i] *= 1e-40f;
        x[4 * be + 1] = NAN;
        x[5 * be + 2] = -INFINITY;
        const size_t bytes = hearth_type_row_bytes(t, n);
        uint8_t *got = xmalloc(bytes), *want = xmalloc(bytes);
        memset(got, 0xa5, bytes);
        memset(want, 0x5a, bytes);
        k->act_convert[t](x, got, n);
        ck_assert(quant_quantize_row(t, x, want, n));
        ck_assert_msg(memcmp(got, want, bytes) == 0, "act_convert %s differs from the quantizer",
                      hearth_type_name(t));
        free(x);
        free(got);
        free(want);
    }
}
END_TEST

/* The table covers every computable type, with a conversion for each
 * activation type it names. */
START_TEST(test_scalar_table)
{
    const hearth_kernels *k = hearth_kernels_scalar();
    for (int t = 0; t < HEARTH_TYPE_COUNT; t++) {
        const bool computable = hearth_type_can_compute((hearth_type)t);
        ck_assert_msg(hearth_kernels_supports(k, (hearth_type)t) == computable,
                      "%s: computable %d, kernel %d", hearth_type_name(t), computable,
                      hearth_kernels_supports(k, (hearth_type)t));
        if (computable) ck_assert_ptr_nonnull(k->act_convert[k->act_type[t]]);
    }
}
END_TEST

static Suite *kernels_suite(void)
{
    Suite *s = suite_create("kernels");
    TCase *tc = tcase_create("scalar");
    tcase_add_test(tc, test_scalar_table);
    tcase_add_loop_test(tc, test_scalar_vec_dot_quantized_floats, 0, N_WEIGHT_TYPES);
    tcase_add_loop_test(tc, test_scalar_vec_dot_random_bytes, 0, N_WEIGHT_TYPES);
    tcase_add_loop_test(tc, test_scalar_vec_dot_empty, 0, N_WEIGHT_TYPES);
    tcase_add_loop_test(tc, test_scalar_vec_dot_nan_block, 0, N_WEIGHT_TYPES);
    tcase_add_test(tc, test_scalar_act_convert);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return test_run_suite(kernels_suite());
}

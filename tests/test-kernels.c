/*
 * test-kernels.c -- the matrix-product kernels of simd/.
 *
 * - The scalar reference: for every weight type, vec_dot on random rows
 *   with ragged numbers of blocks against a double-precision dot product of
 *   the dequantized weight row and the dequantized activation row.  These
 *   are the same numbers, so the bound only allows for float rounding.
 * - Every instruction-set path this build has and this CPU runs (the others
 *   are skipped with a note) against its scalar twin: activation
 *   conversions give the same bytes, vec_dot of the integer formats the
 *   same bits (kernels.h fixes their summation order), of the float types
 *   the same value within the rounding bound; gemm on ragged tiles gives
 *   exactly vec_dot's result for every row and token.
 * - A block holding NaN poisons the dot product.
 * - The CPU backend's matrix product gives the same bits for any number of
 *   threads and any batch: a token alone equals that token in a batch.
 * - Packed weights: rows unpacked from the packing are the originals; the
 *   scalar packed kernel (with the packing) against the double-precision
 *   reference, every path's packed kernel against it bit for bit (on one
 *   to five row groups, so that the tiles of two groups at a time meet a
 *   group left over, and with a token alone against it in a batch), and
 *   the backend's product with packed weights likewise for any threads
 *   and batch.
 * - Choosing a path by name: unknown and unavailable names are errors.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu.h"
#include "kernels.h"
#include "quant.h"
#include "testutil.h"

/* Every weight type with a matrix product. */
static const hearth_type weight_types[] = {
    HEARTH_TYPE_F32,  HEARTH_TYPE_F16,  HEARTH_TYPE_BF16, HEARTH_TYPE_Q4_0, HEARTH_TYPE_Q4_1,
    HEARTH_TYPE_Q5_0, HEARTH_TYPE_Q5_1, HEARTH_TYPE_Q8_0, HEARTH_TYPE_Q2_K, HEARTH_TYPE_Q3_K,
    HEARTH_TYPE_Q4_K, HEARTH_TYPE_Q5_K, HEARTH_TYPE_Q6_K, HEARTH_TYPE_MXFP4,
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
        case HEARTH_TYPE_MXFP4: {
            /* moderate exponents, and now and then the two subnormal
             * scales and the smallest normal one (NaN's code: below) */
            const uint64_t r = test_rng_next(rng);
            ((block_mxfp4 *)blk)->e = r % 16 == 0 ? (uint8_t)((r >> 4) % 3) : (uint8_t)(118 + (r >> 8) % 12);
            break;
        }
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
    c->w = test_malloc(hearth_type_row_bytes(t, c->n));
    c->x = test_malloc(hearth_type_row_bytes(c->act_type, c->n));
    c->xf = test_malloc((size_t)c->n * sizeof(float));
    if (random_bytes && !is_float_type(t)) {
        random_row_bytes(&rng, t, c->w, n_blocks);
    } else {
        float *wf = test_malloc((size_t)c->n * sizeof(float));
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
    float *w = test_malloc((size_t)c->n * sizeof(float));
    float *x = test_malloc((size_t)c->n * sizeof(float));
    float *off = test_malloc((size_t)c->n * sizeof(float));
    void *wz = test_malloc(wbytes);
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
        float *wf = test_malloc((size_t)c.n * sizeof(float));
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
        float *x = test_malloc((size_t)n * sizeof(float));
        fill_normal(&rng, x, n, 1.0);
        for (int64_t i = be; i < 2 * be; i++) x[i] = 0.0f;
        for (int64_t i = 2 * be; i < 3 * be; i++) x[i] *= 1e30f;
        for (int64_t i = 3 * be; i < 4 * be; i++) x[i] *= 1e-40f;
        x[4 * be + 1] = NAN;
        x[5 * be + 2] = -INFINITY;
        const size_t bytes = hearth_type_row_bytes(t, n);
        uint8_t *got = test_malloc(bytes), *want = test_malloc(bytes);
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

/* ------------------------------------------------------------------------
 * Every path against the scalar twin
 * ------------------------------------------------------------------------ */

static bool is_integer_type(hearth_type t)
{
    return !is_float_type(t);
}

/* Bit-identical, or both NaN. */
static bool same_float(float a, float b)
{
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

/* The table of a path, or NULL when it cannot run here (main() notes
 * which paths are skipped and why). */
static const hearth_kernels *path_or_note(int p)
{
    return kernel_path_table((kernel_path)p, NULL);
}

START_TEST(test_paths_vec_dot)
{
    const hearth_type t = weight_types[_i];
    const hearth_kernels *ref = hearth_kernels_scalar();
    for (int p = 0; p < KERNEL_PATH_COUNT; p++) {
        const hearth_kernels *k = path_or_note(p);
        if (!k) continue;
        ck_assert_msg(hearth_kernels_supports(k, t), "%s: no kernel for %s", k->name, hearth_type_name(t));
        ck_assert_int_eq(k->act_type[t], ref->act_type[t]);
        for (int rb = 0; rb < 2; rb++)
            for (int i = 0; i < N_BLOCK_COUNTS; i++) {
                struct dot_case c;
                make_case(ref, t, block_counts[i], rb, 3000u * (uint64_t)t + 50u * (uint64_t)rb + (uint64_t)i, &c);
                float want = NAN, got = NAN;
                ref->vec_dot[t](c.n, &want, c.w, c.x);
                k->vec_dot[t](c.n, &got, c.w, c.x);
                if (is_integer_type(t)) {
                    ck_assert_msg(same_float(got, want), "%s %s, %lld blocks%s: %.9g, scalar %.9g", k->name,
                                  hearth_type_name(t), (long long)c.n_blocks, rb ? " (random bytes)" : "",
                                  (double)got, (double)want);
                } else {
                    double mag;
                    const double exact = reference_dot(&c, &mag);
                    const double err = fabs((double)got - exact), bound = rounding_bound(&c, mag);
                    ck_assert_msg(err <= bound, "%s %s, n %lld: %.9g, exact %.9g: error %.3g > %.3g", k->name,
                                  hearth_type_name(t), (long long)c.n, (double)got, exact, err, bound);
                }
                free_case(&c);
            }
    }
}
END_TEST

/* gemm on every tile shape, with ragged rows and tokens, equals vec_dot of
 * the same path for every output; outputs outside the tile stay as they
 * were. */
START_TEST(test_paths_gemm)
{
    const hearth_type t = weight_types[_i];
    const int64_t n_blocks = is_float_type(t) ? 3 : 5;
    const int64_t n = n_blocks * test_block_elems(t);
    const int max_rows = 11, max_tok = 9;
    for (int p = 0; p < KERNEL_PATH_COUNT; p++) {
        const hearth_kernels *k = path_or_note(p);
        if (!k) continue;
        test_rng rng;
        test_rng_seed(&rng, 99 + (uint64_t)t);
        const hearth_type at = k->act_type[t];
        const size_t w_row = hearth_type_row_bytes(t, n), x_row = hearth_type_row_bytes(at, n);
        uint8_t *w = test_malloc(w_row * (size_t)max_rows), *x = test_malloc(x_row * (size_t)max_tok);
        float *f = test_malloc((size_t)n * sizeof(float));
        for (int r = 0; r < max_rows; r++) {
            if (is_integer_type(t) && r % 2) {
                random_row_bytes(&rng, t, w + (size_t)r * w_row, n_blocks);
            } else {
                fill_normal(&rng, f, n, 0.05);
                ck_assert(quant_quantize_row(t, f, w + (size_t)r * w_row, n));
            }
        }
        for (int tok = 0; tok < max_tok; tok++) {
            fill_normal(&rng, f, n, 1.0);
            k->act_convert[at](f, x + (size_t)tok * x_row, n);
        }
        const int64_t y_stride = max_rows + 3;
        float *y = test_malloc((size_t)(y_stride * max_tok) * sizeof(float));
        for (int rows = 1; rows <= max_rows; rows++)
            for (int toks = 1; toks <= max_tok; toks++) {
                for (int64_t i = 0; i < y_stride * max_tok; i++) y[i] = -7.0f;
                k->gemm[t](n, rows, toks, w, w_row, x, x_row, y, y_stride);
                for (int tok = 0; tok < max_tok; tok++)
                    for (int r = 0; r < y_stride; r++) {
                        const float got = y[tok * y_stride + r];
                        if (tok >= toks || r >= rows) {
                            ck_assert_msg(got == -7.0f, "%s %s gemm %dx%d wrote outside its tile at %d,%d", k->name,
                                          hearth_type_name(t), rows, toks, r, tok);
                            continue;
                        }
                        float want;
                        k->vec_dot[t](n, &want, w + (size_t)r * w_row, x + (size_t)tok * x_row);
                        ck_assert_msg(same_float(got, want), "%s %s gemm %dx%d, row %d token %d: %.9g, vec_dot %.9g",
                                      k->name, hearth_type_name(t), rows, toks, r, tok, (double)got, (double)want);
                    }
            }
        free(w);
        free(x);
        free(f);
        free(y);
    }
}
END_TEST

/* Activation conversions of every path give the scalar quantizers' bytes,
 * on rows of ordinary, zero, huge, tiny, subnormal-mixed and non-finite
 * blocks, and on values at rounding ties. */
START_TEST(test_paths_act_convert)
{
    static const hearth_type act_types[] = {HEARTH_TYPE_F32, HEARTH_TYPE_Q8_0, HEARTH_TYPE_Q8_1, HEARTH_TYPE_Q8_K};
    const hearth_type t = act_types[_i];
    const hearth_kernels *ref = hearth_kernels_scalar();
    const int64_t be = t == HEARTH_TYPE_Q8_K ? QK_K : 32;
    const int64_t n = 14 * be;
    test_rng rng;
    test_rng_seed(&rng, 11 + (uint64_t)t);
    float *x = test_malloc((size_t)n * sizeof(float));
    fill_normal(&rng, x, n, 1.0);
    for (int64_t i = be; i < 2 * be; i++) x[i] = 0.0f;
    for (int64_t i = 2 * be; i < 3 * be; i++) x[i] *= 1e30f;
    for (int64_t i = 3 * be; i < 4 * be; i++) x[i] *= 1e-40f;
    x[4 * be + 1] = NAN;
    x[5 * be + 2] = -INFINITY;
    for (int64_t i = 6 * be; i < 7 * be; i++) x[i] *= 3e38f;
    for (int64_t i = 7 * be; i < 8 * be; i++) x[i] = (float)((int64_t)(test_rng_next(&rng) % 255) - 127);
    for (int64_t i = 8 * be; i < 9 * be; i++) x[i] = (float)((int64_t)(test_rng_next(&rng) % 509) - 254) * 0.5f;
    for (int64_t i = 9 * be; i < 10 * be; i++) x[i] *= (i % 3) ? 1e-41f : 1e-3f;
    for (int64_t i = 10 * be; i < 11 * be; i++) x[i] *= 1e-27f;
    for (int64_t i = 11 * be; i < 12 * be; i++) x[i] *= 3e27f;
    x[12 * be] = 1e10f;
    const size_t bytes = hearth_type_row_bytes(t, n);
    uint8_t *got = test_malloc(bytes), *want = test_malloc(bytes);
    memset(want, 0x5a, bytes);
    ref->act_convert[t](x, want, n);
    for (int p = 0; p < KERNEL_PATH_COUNT; p++) {
        const hearth_kernels *k = path_or_note(p);
        if (!k) continue;
        ck_assert_ptr_nonnull(k->act_convert[t]);
        for (int64_t len = be; len <= n; len += be == 32 ? 13 * be : be) {
            memset(got, 0xa5, bytes);
            k->act_convert[t](x, got, len);
            const size_t lb = hearth_type_row_bytes(t, len);
            for (size_t i = 0; i < lb; i++)
                ck_assert_msg(got[i] == want[i], "%s act_convert %s, %lld elements: byte %zu (block %zu) is %u, "
                              "scalar %u", k->name, hearth_type_name(t), (long long)len, i,
                              i / hearth_type_block_bytes(t), got[i], want[i]);
            ck_assert_msg(lb == bytes || got[lb] == 0xa5, "%s act_convert %s wrote past the row", k->name,
                          hearth_type_name(t));
        }
    }
    free(x);
    free(got);
    free(want);
}
END_TEST

/* The backend's matrix product with the kernels chosen for this CPU:
 * identical for 1, 2, 3 and 5 threads, equal to vec_dot for every output,
 * and a token's outputs are the same alone as in a batch of 13 (so decode
 * and prefill agree exactly).  n_out is not a multiple of the row chunk. */
START_TEST(test_backend_matmul_deterministic)
{
    const hearth_type t = weight_types[_i];
    const hearth_kernels *k;
    ck_assert_int_eq(hearth_kernels_select(&k), HEARTH_OK);
    const int64_t n_in = is_float_type(t) ? 301 : 2 * hearth_type_block_elems(t), n_out = 83, n_tok = 13;
    test_rng rng;
    test_rng_seed(&rng, 1234 + (uint64_t)t);
    const size_t w_row = hearth_type_row_bytes(t, n_in);
    uint8_t *wdata = test_malloc(w_row * (size_t)n_out);
    float *f = test_malloc((size_t)(n_in * n_tok) * sizeof(float));
    for (int64_t r = 0; r < n_out; r++) {
        fill_normal(&rng, f, n_in, 0.05);
        ck_assert(quant_quantize_row(t, f, wdata + (size_t)r * w_row, n_in));
    }
    fill_normal(&rng, f, n_in * n_tok, 1.0);
    struct weight w = {.name = "test.weight", .type = t, .n_in = n_in, .n_out = n_out,
                       .row_bytes = w_row, .data = wdata};
    float *first = NULL;
    static const int threads[] = {1, 2, 3, 5};
    for (size_t ti = 0; ti < HEARTH_ARRAY_LEN(threads); ti++) {
        struct hearth_backend *be;
        ck_assert_int_eq(backend_cpu_new(threads[ti], &be), HEARTH_OK);
        struct act in, out, one_in, one_out;
        ck_assert_int_eq(be->ops->act_alloc(be, &in, n_tok, n_in), HEARTH_OK);
        ck_assert_int_eq(be->ops->act_alloc(be, &out, n_tok, n_out), HEARTH_OK);
        ck_assert_int_eq(be->ops->act_alloc(be, &one_in, 1, n_in), HEARTH_OK);
        ck_assert_int_eq(be->ops->act_alloc(be, &one_out, 1, n_out), HEARTH_OK);
        ck_assert_int_eq(be->ops->act_upload(be, &in, f, n_tok), HEARTH_OK);
        ck_assert_int_eq(be->ops->matmul(be, &out, &w, &in), HEARTH_OK);
        if (!first) {
            first = test_malloc((size_t)(n_out * n_tok) * sizeof(float));
            memcpy(first, out.host, (size_t)(n_out * n_tok) * sizeof(float));
        }
        for (int64_t i = 0; i < n_out * n_tok; i++)
            ck_assert_msg(same_float(out.host[i], first[i]), "%s: %d threads differ at %lld", hearth_type_name(t),
                          threads[ti], (long long)i);
        for (int64_t tok = 0; tok < n_tok; tok += 4) {
            ck_assert_int_eq(be->ops->act_upload(be, &one_in, f + tok * n_in, 1), HEARTH_OK);
            ck_assert_int_eq(be->ops->matmul(be, &one_out, &w, &one_in), HEARTH_OK);
            for (int64_t r = 0; r < n_out; r++)
                ck_assert_msg(same_float(one_out.host[r], first[tok * n_out + r]),
                              "%s: token %lld alone differs from the batch at row %lld", hearth_type_name(t),
                              (long long)tok, (long long)r);
        }
        be->ops->act_free(be, &in);
        be->ops->act_free(be, &out);
        be->ops->act_free(be, &one_in);
        be->ops->act_free(be, &one_out);
        backend_cpu_free(be);
    }
    /* every output is vec_dot of the same table */
    const hearth_type at = k->act_type[t];
    const size_t x_row = hearth_type_row_bytes(at, n_in);
    uint8_t *xq = test_malloc(x_row);
    for (int64_t tok = 0; tok < n_tok; tok++) {
        k->act_convert[at](f + tok * n_in, xq, n_in);
        for (int64_t r = 0; r < n_out; r++) {
            float want;
            k->vec_dot[t](n_in, &want, wdata + (size_t)r * w_row, xq);
            ck_assert_msg(same_float(first[tok * n_out + r], want), "%s: matmul differs from vec_dot",
                          hearth_type_name(t));
        }
    }
    free(xq);
    free(first);
    free(wdata);
    free(f);
}
END_TEST

/* ---- packed weights ------------------------------------------------------------ */

static const hearth_type packed_types[] = {HEARTH_TYPE_Q4_0, HEARTH_TYPE_Q5_0, HEARTH_TYPE_Q8_0, HEARTH_TYPE_MXFP4,
                                           HEARTH_TYPE_Q2_K, HEARTH_TYPE_Q3_K, HEARTH_TYPE_Q4_K,
                                           HEARTH_TYPE_Q5_K, HEARTH_TYPE_Q6_K};
#define N_PACKED_TYPES ((int)HEARTH_ARRAY_LEN(packed_types))

/* n_rows rows of n_blocks blocks of type t (odd rows random bytes, even
 * rows quantized floats) and n_tok tokens converted to t's activation
 * format by the scalar table, with their block sums if that is Q8_0 (else
 * sums is NULL); the weights also packed. */
struct packed_case {
    int64_t n, n_blocks, n_rows, n_tok;
    hearth_type act;
    size_t w_row, x_row;
    uint8_t *w, *wp, *x;
    int32_t *sums;
    float *xf;
};

static void make_packed_case(hearth_type t, int64_t n_blocks, int64_t n_rows, int64_t n_tok, uint64_t seed,
                             struct packed_case *c)
{
    test_rng rng;
    test_rng_seed(&rng, seed);
    c->n_blocks = n_blocks;
    c->n = n_blocks * hearth_type_block_elems(t);
    c->n_rows = n_rows;
    c->n_tok = n_tok;
    c->act = hearth_kernels_scalar()->act_type[t];
    c->w_row = hearth_type_row_bytes(t, c->n);
    c->x_row = hearth_type_row_bytes(c->act, c->n);
    c->w = test_malloc(c->w_row * (size_t)n_rows);
    c->wp = test_malloc(hearth_packed_bytes(t, n_rows, c->n));
    c->x = test_malloc(c->x_row * (size_t)n_tok);
    c->sums = c->act == HEARTH_TYPE_Q8_0 ? test_malloc((size_t)(n_blocks * n_tok) * sizeof(int32_t)) : NULL;
    c->xf = test_malloc((size_t)(c->n * n_tok) * sizeof(float));
    float *f = test_malloc((size_t)c->n * sizeof(float));
    for (int64_t r = 0; r < n_rows; r++) {
        if (r % 2) {
            random_row_bytes(&rng, t, c->w + (size_t)r * c->w_row, n_blocks);
        } else {
            fill_normal(&rng, f, c->n, 0.05);
            ck_assert(quant_quantize_row(t, f, c->w + (size_t)r * c->w_row, c->n));
        }
    }
    free(f);
    fill_normal(&rng, c->xf, c->n * n_tok, 1.0);
    for (int64_t tok = 0; tok < n_tok; tok++) {
        hearth_kernels_scalar()->act_convert[c->act](c->xf + tok * c->n, c->x + (size_t)tok * c->x_row, c->n);
        if (c->sums) hearth_q8_0_block_sums(c->x + (size_t)tok * c->x_row, n_blocks, c->sums + tok * n_blocks);
    }
    hearth_pack_rows(t, c->w, c->w_row, n_rows, c->n, c->wp);
}

static void free_packed_case(struct packed_case *c)
{
    free(c->w);
    free(c->wp);
    free(c->x);
    free(c->sums);
    free(c->xf);
}

/* Row r's weights in two parts whose sum is the dequantized row: for the
 * formats with mins (Q2_K, Q4_K, Q5_K) the scaled quants (dmin set to 0)
 * and the mins (d set to 0), so that an error bound can be taken relative
 * to both, whatever the cancellation between them; otherwise the row and
 * zeros. */
static void dequantize_parts(hearth_type t, const uint8_t *row, int64_t n, float *wq, float *wm)
{
    _Static_assert(offsetof(block_q4_K, dmin) == offsetof(block_q5_K, dmin), "d, dmin lead both blocks");
    size_t at_d = offsetof(block_q4_K, d), at_dmin = offsetof(block_q4_K, dmin);
    if (t == HEARTH_TYPE_Q2_K) {
        at_d = offsetof(block_q2_K, d);
        at_dmin = offsetof(block_q2_K, dmin);
    } else if (t != HEARTH_TYPE_Q4_K && t != HEARTH_TYPE_Q5_K) {
        ck_assert(quant_dequantize_row(t, row, wq, n));
        for (int64_t e = 0; e < n; e++) wm[e] = 0.0f;
        return;
    }
    const int64_t nb = n / QK_K;
    const size_t bb = hearth_type_block_bytes(t), bytes = hearth_type_row_bytes(t, n);
    uint8_t *b = test_malloc(bytes);
    memcpy(b, row, bytes);
    for (int64_t i = 0; i < nb; i++) memset(b + (size_t)i * bb + at_dmin, 0, 2);
    ck_assert(quant_dequantize_row(t, b, wq, n));
    memcpy(b, row, bytes);
    for (int64_t i = 0; i < nb; i++) memset(b + (size_t)i * bb + at_d, 0, 2);
    ck_assert(quant_dequantize_row(t, b, wm, n));
    free(b);
}

/* Each row unpacked from the packed copy is the original row, byte for
 * byte (an embedding the output layer shares is read that way). */
START_TEST(test_unpack_row)
{
    const hearth_type t = packed_types[_i];
    for (int i = 0; i < N_BLOCK_COUNTS; i++) {
        struct packed_case c;
        make_packed_case(t, block_counts[i], 3 * PACK_ROWS, 1, 900u + 10u * (uint64_t)t + (uint64_t)i, &c);
        uint8_t *row = test_malloc(c.w_row);
        for (int64_t r = 0; r < c.n_rows; r++) {
            memset(row, 0xa5, c.w_row);
            hearth_unpack_row(t, c.wp, c.n_rows, r, c.n, row);
            ck_assert_msg(memcmp(row, c.w + (size_t)r * c.w_row, c.w_row) == 0, "%s, %lld blocks: row %lld",
                          hearth_type_name(t), (long long)c.n_blocks, (long long)r);
        }
        free(row);
        free_packed_case(&c);
    }
}
END_TEST

/* The scalar packed kernel against the double-precision dot products of
 * the dequantized original rows (so the packing is checked too), with
 * ragged numbers of blocks and several row groups; the block sums (of
 * Q8_0 activations) against a plain count; and the scalar unpacked kernel
 * within the same bound. */
START_TEST(test_scalar_packed)
{
    const hearth_type t = packed_types[_i];
    const hearth_kernels *k = hearth_kernels_scalar();
    ck_assert(hearth_pack_supported(t));
    ck_assert_ptr_nonnull(k->gemm_packed[t]);
    for (int i = 0; i < N_BLOCK_COUNTS; i++) {
        struct packed_case c;
        make_packed_case(t, block_counts[i], 3 * PACK_ROWS, 3, 500u + 10u * (uint64_t)t + (uint64_t)i, &c);
        for (int64_t tok = 0; c.sums && tok < c.n_tok; tok++) {
            const block_q8_0 *xb = (const void *)(c.x + (size_t)tok * c.x_row);
            for (int64_t b = 0; b < c.n_blocks; b++) {
                int32_t s = 0;
                for (int j = 0; j < 32; j++) s += xb[b].qs[j];
                ck_assert_int_eq(c.sums[tok * c.n_blocks + b], s);
            }
        }
        float *y = test_malloc((size_t)(c.n_rows * c.n_tok) * sizeof(float));
        k->gemm_packed[t](c.n, c.n_rows, c.n_tok, c.wp, c.x, c.x_row, c.sums, y, c.n_rows);
        float *w = test_malloc((size_t)c.n * sizeof(float)), *wm = test_malloc((size_t)c.n * sizeof(float));
        float *x = test_malloc((size_t)c.n * sizeof(float));
        for (int64_t tok = 0; tok < c.n_tok; tok++) {
            ck_assert(quant_dequantize_row(c.act, c.x + (size_t)tok * c.x_row, x, c.n));
            for (int64_t r = 0; r < c.n_rows; r++) {
                dequantize_parts(t, c.w + (size_t)r * c.w_row, c.n, w, wm);
                double dot = 0.0, mag = 0.0;
                for (int64_t e = 0; e < c.n; e++) {
                    dot += ((double)w[e] + wm[e]) * x[e];
                    mag += fabs((double)w[e] * x[e]) + fabs((double)wm[e] * x[e]);
                }
                /* a few roundings per block, and those of the dequantized
                 * reference (the float scales' products) */
                const double bound = (2.0 * (double)c.n_blocks + 8.0) * 0x1p-24 * mag;
                const double got = y[tok * c.n_rows + r];
                ck_assert_msg(fabs(got - dot) <= bound,
                              "%s packed, %lld blocks, row %lld token %lld: %.9g, reference %.9g",
                              hearth_type_name(t), (long long)c.n_blocks, (long long)r, (long long)tok, got, dot);
                float unpacked;
                k->vec_dot[t](c.n, &unpacked, c.w + (size_t)r * c.w_row, c.x + (size_t)tok * c.x_row);
                ck_assert_msg(fabs(got - unpacked) <= 2.0 * bound,
                              "%s packed, %lld blocks, row %lld token %lld: %.9g, unpacked %.9g",
                              hearth_type_name(t), (long long)c.n_blocks, (long long)r, (long long)tok, got,
                              (double)unpacked);
            }
        }
        free(w);
        free(wm);
        free(x);
        free(y);
        free_packed_case(&c);
    }
}
END_TEST

/* Every path's packed kernel gives its scalar twin's bits, for one to
 * five row groups (a lone group, pairs of groups, a pair and a group left
 * over: where a path takes two groups at a time) and numbers of tokens
 * up to past the largest tiles, with ragged block counts; nothing outside
 * the tile is written.  A token computed alone (by the one-group tile)
 * gives the bits it gets in every batch. */
START_TEST(test_paths_packed)
{
    const hearth_type t = packed_types[_i];
    const hearth_kernels *ref = hearth_kernels_scalar();
    static const int nbs[] = {1, 3, 8, 17};
    static const int groups[] = {1, 2, 3, 5};
    static const int toks_list[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17};
    const int max_groups = 5, max_tok = 17;
    for (size_t bi = 0; bi < HEARTH_ARRAY_LEN(nbs); bi++) {
        struct packed_case c;
        make_packed_case(t, nbs[bi], max_groups * PACK_ROWS, max_tok, 700u + 10u * (uint64_t)t + bi, &c);
        const int64_t ys = c.n_rows + 5;
        float *want = test_malloc((size_t)(ys * max_tok) * sizeof(float));
        float *got = test_malloc((size_t)(ys * max_tok) * sizeof(float));
        float *alone = test_malloc((size_t)(ys * max_tok) * sizeof(float));
        ref->gemm_packed[t](c.n, c.n_rows, c.n_tok, c.wp, c.x, c.x_row, c.sums, want, ys);
        for (int p = 0; p < KERNEL_PATH_COUNT; p++) {
            const hearth_kernels *k = path_or_note(p);
            if (!k || !k->gemm_packed[t]) continue;
            for (int tok = 0; tok < max_tok; tok++)
                k->gemm_packed[t](c.n, c.n_rows, 1, c.wp, c.x + (size_t)tok * c.x_row, c.x_row,
                                  c.sums ? c.sums + tok * c.n_blocks : NULL, alone + tok * ys, ys);
            for (size_t gi = 0; gi < HEARTH_ARRAY_LEN(groups); gi++)
                for (size_t ti = 0; ti < HEARTH_ARRAY_LEN(toks_list); ti++) {
                    const int g = groups[gi], toks = toks_list[ti];
                    for (int64_t i = 0; i < ys * max_tok; i++) got[i] = -7.0f;
                    k->gemm_packed[t](c.n, g * PACK_ROWS, toks, c.wp, c.x, c.x_row, c.sums, got, ys);
                    for (int tok = 0; tok < max_tok; tok++)
                        for (int r = 0; r < ys; r++) {
                            const float v = got[tok * ys + r];
                            if (tok >= toks || r >= g * PACK_ROWS) {
                                ck_assert_msg(v == -7.0f, "%s %s packed %dx%d wrote outside its tile at %d,%d",
                                              k->name, hearth_type_name(t), g * PACK_ROWS, toks, r, tok);
                                continue;
                            }
                            ck_assert_msg(memcmp(&v, &want[tok * ys + r], sizeof v) == 0,
                                          "%s %s packed, %d blocks, %dx%d, row %d token %d: %.9g, scalar %.9g",
                                          k->name, hearth_type_name(t), nbs[bi], g * PACK_ROWS, toks, r, tok,
                                          (double)v, (double)want[tok * ys + r]);
                            ck_assert_msg(memcmp(&v, &alone[tok * ys + r], sizeof v) == 0,
                                          "%s %s packed, %d blocks, %dx%d, row %d token %d: %.9g, alone %.9g",
                                          k->name, hearth_type_name(t), nbs[bi], g * PACK_ROWS, toks, r, tok,
                                          (double)v, (double)alone[tok * ys + r]);
                        }
                }
        }
        free(want);
        free(got);
        free(alone);
        free_packed_case(&c);
    }
}
END_TEST

/* The backend's product with packed weights (rows a multiple of the group,
 * not of the row chunk): the same bits for any number of threads and for a
 * token alone or in a batch, and the scalar packed kernel's values. */
START_TEST(test_backend_matmul_packed)
{
    const hearth_type t = packed_types[_i];
    const hearth_kernels *k;
    ck_assert_int_eq(hearth_kernels_select(&k), HEARTH_OK);
    if (!k->gemm_packed[t]) return;
    struct packed_case c;
    make_packed_case(t, 6, 11 * PACK_ROWS, 13, 4321u + (uint64_t)t, &c);
    struct weight w = {.name = "test.weight", .type = t, .n_in = c.n, .n_out = c.n_rows,
                       .row_bytes = c.w_row, .data = c.w, .packed = c.wp};
    float *want = test_malloc((size_t)(c.n_rows * c.n_tok) * sizeof(float));
    uint8_t *xq = test_malloc(c.x_row * (size_t)c.n_tok);
    int32_t *sums = c.sums ? test_malloc((size_t)(c.n_blocks * c.n_tok) * sizeof(int32_t)) : NULL;
    for (int64_t tok = 0; tok < c.n_tok; tok++) {
        k->act_convert[c.act](c.xf + tok * c.n, xq + (size_t)tok * c.x_row, c.n);
        if (sums) hearth_q8_0_block_sums(xq + (size_t)tok * c.x_row, c.n_blocks, sums + tok * c.n_blocks);
    }
    hearth_kernels_scalar()->gemm_packed[t](c.n, c.n_rows, c.n_tok, c.wp, xq, c.x_row, sums, want, c.n_rows);
    static const int threads[] = {1, 2, 3, 5};
    for (size_t ti = 0; ti < HEARTH_ARRAY_LEN(threads); ti++) {
        struct hearth_backend *be;
        ck_assert_int_eq(backend_cpu_new(threads[ti], &be), HEARTH_OK);
        struct act in, out, one_in, one_out;
        ck_assert_int_eq(be->ops->act_alloc(be, &in, c.n_tok, c.n), HEARTH_OK);
        ck_assert_int_eq(be->ops->act_alloc(be, &out, c.n_tok, c.n_rows), HEARTH_OK);
        ck_assert_int_eq(be->ops->act_alloc(be, &one_in, 1, c.n), HEARTH_OK);
        ck_assert_int_eq(be->ops->act_alloc(be, &one_out, 1, c.n_rows), HEARTH_OK);
        ck_assert_int_eq(be->ops->act_upload(be, &in, c.xf, c.n_tok), HEARTH_OK);
        ck_assert_int_eq(be->ops->matmul(be, &out, &w, &in), HEARTH_OK);
        for (int64_t i = 0; i < c.n_rows * c.n_tok; i++)
            ck_assert_msg(same_float(out.host[i], want[i]), "%s packed, %d threads: %.9g at %lld, scalar %.9g",
                          hearth_type_name(t), threads[ti], (double)out.host[i], (long long)i, (double)want[i]);
        for (int64_t tok = 0; tok < c.n_tok; tok += 4) {
            ck_assert_int_eq(be->ops->act_upload(be, &one_in, c.xf + tok * c.n, 1), HEARTH_OK);
            ck_assert_int_eq(be->ops->matmul(be, &one_out, &w, &one_in), HEARTH_OK);
            for (int64_t r = 0; r < c.n_rows; r++)
                ck_assert_msg(same_float(one_out.host[r], want[tok * c.n_rows + r]),
                              "%s packed: token %lld alone differs at row %lld", hearth_type_name(t),
                              (long long)tok, (long long)r);
        }
        be->ops->act_free(be, &in);
        be->ops->act_free(be, &out);
        be->ops->act_free(be, &one_in);
        be->ops->act_free(be, &one_out);
        backend_cpu_free(be);
    }
    free(want);
    free(xq);
    free(sums);
    free_packed_case(&c);
}
END_TEST

/* ---- packed float weights ---------------------------------------------------- */

static const hearth_type float_types[] = {HEARTH_TYPE_F32, HEARTH_TYPE_F16, HEARTH_TYPE_BF16};
#define N_FLOAT_TYPES ((int)HEARTH_ARRAY_LEN(float_types))

/* Row lengths below, at and above multiples of the vectors (8, 16) and of
 * the chunk (32); row counts below, at and above whole groups (4). */
static const int64_t float_lengths[] = {1, 5, 8, 15, 16, 17, 31, 32, 33, 47, 64, 100, 111, 257};
static const int64_t float_row_counts[] = {1, 3, 4, 5, 8, 9, 13};

/* n_rows rows of n normal floats in type t (its rounding of them). */
static uint8_t *float_rows(test_rng *rng, hearth_type t, int64_t n_rows, int64_t n)
{
    const size_t row = hearth_type_row_bytes(t, n);
    uint8_t *w = test_malloc(row * (size_t)n_rows);
    float *f = test_malloc((size_t)n * sizeof(float));
    for (int64_t r = 0; r < n_rows; r++) {
        fill_normal(rng, f, n, 0.05);
        ck_assert(quant_quantize_row(t, f, w + (size_t)r * row, n));
    }
    free(f);
    return w;
}

static uint8_t *float_packed(hearth_type t, const uint8_t *w, int64_t n_rows, int64_t n)
{
    ck_assert(hearth_pack_supported(t));
    ck_assert_uint_eq(hearth_packed_bytes(t, n_rows, n), hearth_type_row_bytes(t, n) * (size_t)n_rows);
    uint8_t *wp = test_malloc(hearth_packed_bytes(t, n_rows, n));
    hearth_pack_rows(t, w, hearth_type_row_bytes(t, n), n_rows, n, wp);
    return wp;
}

/* The float layout of kernels.h, spelled out for a few elements; every row
 * unpacks to its original; and a matrix packed in parts that begin at
 * whole groups (as a model is packed, in pieces) is the matrix packed
 * whole. */
START_TEST(test_float_pack_layout)
{
    const hearth_type t = float_types[_i];
    const size_t eb = hearth_type_row_bytes(t, 1);
    test_rng rng;
    test_rng_seed(&rng, 4400u + (uint64_t)_i);
    {
        /* 9 rows of 70: groups of rows 0-3 and 4-7, then row 8 alone;
         * chunks of 32, 32 and 6 elements */
        const int64_t n = 70, n_rows = 9;
        uint8_t *w = float_rows(&rng, t, n_rows, n), *wp = float_packed(t, w, n_rows, n);
        static const struct {
            int64_t r, i;
            size_t at; /* in elements */
        } spots[] = {
            {0, 0, 0},
            {1, 0, 32},
            {2, 40, 4 * 32 + 2 * 32 + 8},
            {3, 31, 3 * 32 + 31},
            {3, 65, 4 * 64 + 3 * 6 + 1},
            {5, 3, 4 * 70 + 32 + 3},
            {7, 69, 4 * 70 + 4 * 64 + 3 * 6 + 5},
            {8, 0, 8 * 70},
            {8, 69, 8 * 70 + 69},
        };
        for (size_t k = 0; k < HEARTH_ARRAY_LEN(spots); k++)
            ck_assert_msg(memcmp(wp + spots[k].at * eb, w + ((size_t)spots[k].r * (size_t)n + (size_t)spots[k].i) * eb,
                                 eb) == 0,
                          "%s: row %lld element %lld is not at %zu", hearth_type_name(t), (long long)spots[k].r,
                          (long long)spots[k].i, spots[k].at);
        free(w);
        free(wp);
    }
    for (size_t li = 0; li < HEARTH_ARRAY_LEN(float_lengths); li++)
        for (size_t ri = 0; ri < HEARTH_ARRAY_LEN(float_row_counts); ri++) {
            const int64_t n = float_lengths[li], n_rows = float_row_counts[ri];
            const size_t row_bytes = hearth_type_row_bytes(t, n);
            uint8_t *w = float_rows(&rng, t, n_rows, n), *wp = float_packed(t, w, n_rows, n);
            uint8_t *row = test_malloc(row_bytes);
            for (int64_t r = 0; r < n_rows; r++) {
                memset(row, 0xa5, row_bytes);
                hearth_unpack_row(t, wp, n_rows, r, n, row);
                ck_assert_msg(memcmp(row, w + (size_t)r * row_bytes, row_bytes) == 0, "%s, %lld x %lld: row %lld",
                              hearth_type_name(t), (long long)n_rows, (long long)n, (long long)r);
            }
            uint8_t *parts = test_malloc(row_bytes * (size_t)n_rows);
            for (int64_t r0 = 0; r0 < n_rows; r0 += 2 * FLOAT_PACK_ROWS) {
                const int64_t rows = HEARTH_MIN(2 * FLOAT_PACK_ROWS, n_rows - r0);
                hearth_pack_rows(t, w + (size_t)r0 * row_bytes, row_bytes, rows, n, parts + (size_t)r0 * row_bytes);
            }
            ck_assert(memcmp(parts, wp, row_bytes * (size_t)n_rows) == 0);
            free(parts);
            free(row);
            free(w);
            free(wp);
        }
}
END_TEST

/* Every path's packed float kernel (the scalar one included) gives the
 * bits of the same path's gemm on the unpacked rows, for ragged row
 * lengths and row counts and any number of tokens, a token alone and in
 * any batch alike; nothing outside the tile is written.  (Across paths the
 * float types agree within rounding only, which test_paths_vec_dot
 * checks.) */
START_TEST(test_paths_float_packed)
{
    const hearth_type t = float_types[_i];
    const int max_tok = 9;
    test_rng rng;
    test_rng_seed(&rng, 4500u + (uint64_t)_i);
    for (size_t li = 0; li < HEARTH_ARRAY_LEN(float_lengths); li++) {
        const int64_t n = float_lengths[li], max_rows = 13;
        uint8_t *w = float_rows(&rng, t, max_rows, n);
        float *x = test_malloc((size_t)(n * max_tok) * sizeof(float));
        fill_normal(&rng, x, n * max_tok, 1.0);
        const size_t xs = (size_t)n * sizeof(float), row_bytes = hearth_type_row_bytes(t, n);
        const int64_t ys = max_rows + 3;
        float *want = test_malloc((size_t)(ys * max_tok) * sizeof(float));
        float *got = test_malloc((size_t)(ys * max_tok) * sizeof(float));
        float *alone = test_malloc((size_t)(ys * max_tok) * sizeof(float));
        for (size_t ri = 0; ri < HEARTH_ARRAY_LEN(float_row_counts); ri++) {
            const int64_t n_rows = float_row_counts[ri];
            uint8_t *wp = float_packed(t, w, n_rows, n);
            for (int p = 0; p < KERNEL_PATH_COUNT; p++) {
                const hearth_kernels *k = path_or_note(p);
                if (!k) continue;
                ck_assert_msg(k->gemm_packed[t] != NULL, "%s: no packed %s kernel", k->name, hearth_type_name(t));
                ck_assert(hearth_kernels_read_packed(k, t, n_rows, n));
                k->gemm[t](n, n_rows, max_tok, w, row_bytes, x, xs, want, ys);
                for (int tok = 0; tok < max_tok; tok++)
                    k->gemm_packed[t](n, n_rows, 1, wp, x + tok * n, xs, NULL, alone + tok * ys, ys);
                for (int toks = 1; toks <= max_tok; toks++) {
                    for (int64_t i = 0; i < ys * max_tok; i++) got[i] = -7.0f;
                    k->gemm_packed[t](n, n_rows, toks, wp, x, xs, NULL, got, ys);
                    for (int tok = 0; tok < max_tok; tok++)
                        for (int64_t r = 0; r < ys; r++) {
                            const float v = got[tok * ys + r];
                            if (tok >= toks || r >= n_rows) {
                                ck_assert_msg(v == -7.0f, "%s %s packed %lldx%d wrote outside its tile at %lld,%d",
                                              k->name, hearth_type_name(t), (long long)n_rows, toks, (long long)r,
                                              tok);
                                continue;
                            }
                            ck_assert_msg(memcmp(&v, &want[tok * ys + r], sizeof v) == 0,
                                          "%s %s packed, n %lld, %lldx%d, row %lld token %d: %.9g, unpacked %.9g",
                                          k->name, hearth_type_name(t), (long long)n, (long long)n_rows, toks,
                                          (long long)r, tok, (double)v, (double)want[tok * ys + r]);
                            ck_assert_msg(memcmp(&v, &alone[tok * ys + r], sizeof v) == 0,
                                          "%s %s packed, n %lld, %lldx%d, row %lld token %d: %.9g, alone %.9g",
                                          k->name, hearth_type_name(t), (long long)n, (long long)n_rows, toks,
                                          (long long)r, tok, (double)v, (double)alone[tok * ys + r]);
                        }
                }
            }
            free(wp);
        }
        free(want);
        free(got);
        free(alone);
        free(x);
        free(w);
    }
}
END_TEST

/* The backend's product with packed float weights (rows neither a
 * multiple of the row chunk nor of the group, a ragged length, enough work
 * for the threads even for one token): the bits of the unpacked matrix,
 * for any number of threads and for a token alone or in a batch. */
START_TEST(test_backend_matmul_float_packed)
{
    const hearth_type t = float_types[_i];
    const int64_t n = 301, n_rows = 229, n_tok = 13;
    test_rng rng;
    test_rng_seed(&rng, 4600u + (uint64_t)_i);
    uint8_t *wd = float_rows(&rng, t, n_rows, n), *wp = float_packed(t, wd, n_rows, n);
    float *x = test_malloc((size_t)(n * n_tok) * sizeof(float));
    fill_normal(&rng, x, n * n_tok, 1.0);
    const struct weight plain = {.name = "test.weight", .type = t, .n_in = n, .n_out = n_rows,
                                 .row_bytes = hearth_type_row_bytes(t, n), .data = wd};
    struct weight packed = plain;
    packed.packed = wp;
    static const int threads[] = {1, 2, 3};
    for (size_t ti = 0; ti < HEARTH_ARRAY_LEN(threads); ti++) {
        struct hearth_backend *be;
        ck_assert_int_eq(backend_cpu_new(threads[ti], &be), HEARTH_OK);
        struct act in, want, got, one_in, one_out;
        ck_assert_int_eq(be->ops->act_alloc(be, &in, n_tok, n), HEARTH_OK);
        ck_assert_int_eq(be->ops->act_alloc(be, &want, n_tok, n_rows), HEARTH_OK);
        ck_assert_int_eq(be->ops->act_alloc(be, &got, n_tok, n_rows), HEARTH_OK);
        ck_assert_int_eq(be->ops->act_alloc(be, &one_in, 1, n), HEARTH_OK);
        ck_assert_int_eq(be->ops->act_alloc(be, &one_out, 1, n_rows), HEARTH_OK);
        ck_assert_int_eq(be->ops->act_upload(be, &in, x, n_tok), HEARTH_OK);
        ck_assert_int_eq(be->ops->matmul(be, &want, &plain, &in), HEARTH_OK);
        ck_assert_int_eq(be->ops->matmul(be, &got, &packed, &in), HEARTH_OK);
        for (int64_t i = 0; i < n_rows * n_tok; i++)
            ck_assert_msg(same_float(got.host[i], want.host[i]), "%s packed, %d threads: %.9g at %lld, unpacked %.9g",
                          hearth_type_name(t), threads[ti], (double)got.host[i], (long long)i,
                          (double)want.host[i]);
        for (int64_t tok = 0; tok < n_tok; tok += 3) {
            ck_assert_int_eq(be->ops->act_upload(be, &one_in, x + tok * n, 1), HEARTH_OK);
            ck_assert_int_eq(be->ops->matmul(be, &one_out, &packed, &one_in), HEARTH_OK);
            for (int64_t r = 0; r < n_rows; r++)
                ck_assert_msg(same_float(one_out.host[r], want.host[tok * n_rows + r]),
                              "%s packed: token %lld alone differs at row %lld", hearth_type_name(t),
                              (long long)tok, (long long)r);
        }
        be->ops->act_free(be, &in);
        be->ops->act_free(be, &want);
        be->ops->act_free(be, &got);
        be->ops->act_free(be, &one_in);
        be->ops->act_free(be, &one_out);
        backend_cpu_free(be);
    }
    free(x);
    free(wd);
    free(wp);
}
END_TEST

/* Products of one input run as one step (a layer's q/k/v, gate/up): the
 * same bits as each product alone, for sets that share an activation
 * format and sets that mix them, packed and unpacked weights, row counts
 * that are not a multiple of the chunk, decode and prefill token counts
 * and any number of threads. */
struct set_weight {
    hearth_type type;
    int64_t n_out;
    bool pack;
};

static const struct set_weight matmul_sets[][MATMUL_SET_MAX] = {
    {{HEARTH_TYPE_Q4_K, 5 * PACK_ROWS, true}, {HEARTH_TYPE_Q5_K, 3 * PACK_ROWS, true},
     {HEARTH_TYPE_Q6_K, 2 * PACK_ROWS, true}},
    {{HEARTH_TYPE_Q8_0, 4 * PACK_ROWS, true}, {HEARTH_TYPE_Q4_0, 83, false}, {HEARTH_TYPE_F16, 37, false}},
    {{HEARTH_TYPE_Q4_0, 6 * PACK_ROWS, true}, {HEARTH_TYPE_Q5_K, 19, false}, {HEARTH_TYPE_BF16, 29, true}},
    {{HEARTH_TYPE_F16, 37, true}, {HEARTH_TYPE_F32, 11, true}, {HEARTH_TYPE_COUNT, 0, false}},
    {{HEARTH_TYPE_Q2_K, 21, false}, {HEARTH_TYPE_Q8_0, 2 * PACK_ROWS, true}, {HEARTH_TYPE_Q4_K, 45, false}},
};

START_TEST(test_backend_matmul_set)
{
    const struct set_weight *spec = matmul_sets[_i];
    const int64_t n_in = 2 * QK_K, max_tok = 13;
    int n = 0;
    while (n < MATMUL_SET_MAX && spec[n].type != HEARTH_TYPE_COUNT) n++;
    test_rng rng;
    test_rng_seed(&rng, 9100u + (uint64_t)_i);
    struct weight ws[MATMUL_SET_MAX];
    float *f = test_malloc((size_t)(n_in * max_tok) * sizeof(float));
    for (int i = 0; i < n; i++) {
        const hearth_type t = spec[i].type;
        const size_t w_row = hearth_type_row_bytes(t, n_in);
        uint8_t *wd = test_malloc(w_row * (size_t)spec[i].n_out);
        for (int64_t r = 0; r < spec[i].n_out; r++) {
            fill_normal(&rng, f, n_in, 0.05);
            ck_assert(quant_quantize_row(t, f, wd + (size_t)r * w_row, n_in));
        }
        uint8_t *wp = NULL;
        if (spec[i].pack) {
            ck_assert(hearth_pack_supported(t));
            wp = test_malloc(hearth_packed_bytes(t, spec[i].n_out, n_in));
            hearth_pack_rows(t, wd, w_row, spec[i].n_out, n_in, wp);
        }
        ws[i] = (struct weight){.name = "test.weight", .type = t, .n_in = n_in, .n_out = spec[i].n_out,
                                .row_bytes = w_row, .data = wd, .packed = wp};
    }
    fill_normal(&rng, f, n_in * max_tok, 1.0);
    static const int threads[] = {1, 2, 3};
    static const int64_t toks[] = {1, 3, max_tok};
    for (size_t ti = 0; ti < HEARTH_ARRAY_LEN(threads); ti++) {
        struct hearth_backend *be;
        ck_assert_int_eq(backend_cpu_new(threads[ti], &be), HEARTH_OK);
        ck_assert_ptr_nonnull(be->ops->matmul_set);
        struct act in, alone[MATMUL_SET_MAX], set[MATMUL_SET_MAX];
        struct act *outs[MATMUL_SET_MAX];
        const struct weight *wps[MATMUL_SET_MAX];
        ck_assert_int_eq(be->ops->act_alloc(be, &in, max_tok, n_in), HEARTH_OK);
        for (int i = 0; i < n; i++) {
            ck_assert_int_eq(be->ops->act_alloc(be, &alone[i], max_tok, ws[i].n_out), HEARTH_OK);
            ck_assert_int_eq(be->ops->act_alloc(be, &set[i], max_tok, ws[i].n_out), HEARTH_OK);
            outs[i] = &set[i];
            wps[i] = &ws[i];
        }
        for (size_t k = 0; k < HEARTH_ARRAY_LEN(toks); k++) {
            const int64_t n_tok = toks[k];
            ck_assert_int_eq(be->ops->act_upload(be, &in, f, n_tok), HEARTH_OK);
            for (int i = 0; i < n; i++) {
                ck_assert_int_eq(be->ops->matmul(be, &alone[i], &ws[i], &in), HEARTH_OK);
                for (int64_t e = 0; e < n_tok * ws[i].n_out; e++) set[i].host[e] = -7.0f;
            }
            ck_assert_int_eq(be->ops->matmul_set(be, n, outs, wps, &in), HEARTH_OK);
            if (k == 0) { /* a backend without the step: backend_matmul_set runs them one by one */
                const struct backend_ops *ops = be->ops;
                struct backend_ops one_by_one = *ops;
                one_by_one.matmul_set = NULL;
                be->ops = &one_by_one;
                struct act other[MATMUL_SET_MAX];
                struct act *other_outs[MATMUL_SET_MAX];
                for (int i = 0; i < n; i++) {
                    ck_assert_int_eq(be->ops->act_alloc(be, &other[i], 1, ws[i].n_out), HEARTH_OK);
                    other_outs[i] = &other[i];
                }
                ck_assert_int_eq(backend_matmul_set(be, n, other_outs, wps, &in), HEARTH_OK);
                for (int i = 0; i < n; i++) {
                    ck_assert_int_eq(memcmp(other[i].host, alone[i].host, (size_t)ws[i].n_out * sizeof(float)), 0);
                    be->ops->act_free(be, &other[i]);
                }
                be->ops = ops;
            }
            for (int i = 0; i < n; i++) {
                ck_assert_int_eq(set[i].rows, n_tok);
                ck_assert_int_eq(set[i].width, ws[i].n_out);
                for (int64_t e = 0; e < n_tok * ws[i].n_out; e++)
                    ck_assert_msg(same_float(set[i].host[e], alone[i].host[e]),
                                  "set %d, product %d (%s), %d threads, %lld tokens: %.9g at %lld, alone %.9g", _i,
                                  i, hearth_type_name(ws[i].type), threads[ti], (long long)n_tok,
                                  (double)set[i].host[e], (long long)e, (double)alone[i].host[e]);
            }
        }
        be->ops->act_free(be, &in);
        for (int i = 0; i < n; i++) {
            be->ops->act_free(be, &alone[i]);
            be->ops->act_free(be, &set[i]);
        }
        backend_cpu_free(be);
    }
    for (int i = 0; i < n; i++) {
        free((void *)ws[i].data);
        free((void *)ws[i].packed);
    }
    free(f);
}
END_TEST

/* A set refuses a weight whose rows do not match the input. */
START_TEST(test_backend_matmul_set_bad_width)
{
    struct hearth_backend *be;
    ck_assert_int_eq(backend_cpu_new(2, &be), HEARTH_OK);
    const int64_t n_in = 64;
    uint8_t *wd = calloc(1, hearth_type_row_bytes(HEARTH_TYPE_Q8_0, 2 * n_in) * 16);
    ck_assert_ptr_nonnull(wd);
    struct weight good = {.name = "good.weight", .type = HEARTH_TYPE_Q8_0, .n_in = n_in, .n_out = 16,
                          .row_bytes = hearth_type_row_bytes(HEARTH_TYPE_Q8_0, n_in), .data = wd};
    struct weight bad = good;
    bad.name = "bad.weight";
    bad.n_in = 2 * n_in;
    struct act in, o1, o2;
    ck_assert_int_eq(be->ops->act_alloc(be, &in, 1, n_in), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &o1, 1, 16), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &o2, 1, 16), HEARTH_OK);
    float x[64] = {0};
    ck_assert_int_eq(be->ops->act_upload(be, &in, x, 1), HEARTH_OK);
    struct act *outs[] = {&o1, &o2};
    const struct weight *wps[] = {&good, &bad};
    ck_assert_int_eq(be->ops->matmul_set(be, 2, outs, wps, &in), HEARTH_E_INTERNAL);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "bad.weight"));
    ck_assert_int_eq(be->ops->matmul_set(be, MATMUL_SET_MAX + 1, outs, wps, &in), HEARTH_E_INTERNAL);
    be->ops->act_free(be, &in);
    be->ops->act_free(be, &o1);
    be->ops->act_free(be, &o2);
    backend_cpu_free(be);
    free(wd);
}
END_TEST

/* Choosing a path by HEARTH_CPU's value. */
START_TEST(test_path_choice)
{
    const hearth_kernels *k = NULL;
    ck_assert_int_eq(kernel_path_choose(NULL, &k), HEARTH_OK);
    const hearth_kernels *best = k;
    ck_assert_int_eq(kernel_path_choose("auto", &k), HEARTH_OK);
    ck_assert_ptr_eq(k, best);
    ck_assert_int_eq(kernel_path_choose("", &k), HEARTH_OK);
    ck_assert_ptr_eq(k, best);
    /* the best is the last runnable path */
    for (int p = KERNEL_PATH_COUNT - 1; p >= 0; p--) {
        const hearth_kernels *t = kernel_path_table((kernel_path)p, NULL);
        if (!t) continue;
        ck_assert_ptr_eq(t, best);
        break;
    }
    for (int p = 0; p < KERNEL_PATH_COUNT; p++) {
        const char *why = NULL;
        const hearth_kernels *t = kernel_path_table((kernel_path)p, &why);
        hearth_status st = kernel_path_choose(kernel_path_name((kernel_path)p), &k);
        if (t) {
            ck_assert_int_eq(st, HEARTH_OK);
            ck_assert_ptr_eq(k, t);
            ck_assert_str_eq(k->name, kernel_path_name((kernel_path)p));
        } else {
            ck_assert_int_eq(st, HEARTH_E_UNSUPPORTED);
            ck_assert_ptr_nonnull(strstr(hearth_last_error(), why));
            ck_assert_ptr_nonnull(strstr(hearth_last_error(), "available here: scalar"));
        }
    }
    ck_assert_int_eq(kernel_path_choose("SCALAR", &k), HEARTH_OK);
    ck_assert_ptr_eq(k, hearth_kernels_scalar());
    ck_assert_int_eq(kernel_path_choose("sse9", &k), HEARTH_E_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "HEARTH_CPU=sse9: unknown kernel path"));
    ck_assert_ptr_eq(kernel_path_table(KERNEL_PATH_COUNT, NULL), NULL);
    /* the public names */
    const char *name = NULL;
    ck_assert_int_eq(hearth_cpu_kernels(&name), HEARTH_OK);
    ck_assert_ptr_nonnull(name);
    ck_assert_ptr_nonnull(hearth_cpu_features());
    printf("CPU features: %s; kernels: %s\n", hearth_cpu_features(), name);
}
END_TEST

/* A HEARTH_CPU the CPU cannot honour makes the CPU backend (and so a
 * context) fail with a message, rather than run other kernels.  The choice
 * is made once per process: this needs the fresh process Check forks for
 * each test. */
START_TEST(test_backend_bad_hearth_cpu)
{
    const char *fork_mode = getenv("CK_FORK");
    if (fork_mode && strcmp(fork_mode, "no") == 0) return;
    setenv("HEARTH_CPU", "avx9", 1);
    struct hearth_backend *be = NULL;
    ck_assert_int_eq(backend_cpu_new(1, &be), HEARTH_E_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "HEARTH_CPU=avx9: unknown kernel path"));
    const char *name = NULL;
    ck_assert_int_eq(hearth_cpu_kernels(&name), HEARTH_E_UNSUPPORTED);
    setenv("HEARTH_CPU", "scalar", 1);
    ck_assert_int_eq(hearth_cpu_kernels(&name), HEARTH_OK);
    ck_assert_str_eq(name, "scalar");
    /* fixed once chosen */
    setenv("HEARTH_CPU", "auto", 1);
    ck_assert_int_eq(hearth_cpu_kernels(&name), HEARTH_OK);
    ck_assert_str_eq(name, "scalar");
    unsetenv("HEARTH_CPU");
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
    tcase_add_loop_test(tc, test_scalar_packed, 0, N_PACKED_TYPES);
    tcase_add_loop_test(tc, test_unpack_row, 0, N_PACKED_TYPES);
    tcase_add_loop_test(tc, test_float_pack_layout, 0, N_FLOAT_TYPES);
    suite_add_tcase(s, tc);
    TCase *paths = tcase_create("paths");
    tcase_add_loop_test(paths, test_paths_vec_dot, 0, N_WEIGHT_TYPES);
    tcase_add_loop_test(paths, test_paths_gemm, 0, N_WEIGHT_TYPES);
    tcase_add_loop_test(paths, test_paths_act_convert, 0, 4);
    tcase_add_test(paths, test_path_choice);
    tcase_add_test(paths, test_backend_bad_hearth_cpu);
    tcase_add_loop_test(paths, test_backend_matmul_deterministic, 0, N_WEIGHT_TYPES);
    tcase_add_loop_test(paths, test_paths_packed, 0, N_PACKED_TYPES);
    tcase_add_loop_test(paths, test_backend_matmul_packed, 0, N_PACKED_TYPES);
    tcase_add_loop_test(paths, test_paths_float_packed, 0, N_FLOAT_TYPES);
    tcase_add_loop_test(paths, test_backend_matmul_float_packed, 0, N_FLOAT_TYPES);
    tcase_add_loop_test(paths, test_backend_matmul_set, 0, (int)HEARTH_ARRAY_LEN(matmul_sets));
    tcase_add_test(paths, test_backend_matmul_set_bad_width);
    suite_add_tcase(s, paths);
    return s;
}

int main(void)
{
    for (int p = 0; p < KERNEL_PATH_COUNT; p++) {
        const char *why;
        if (!kernel_path_table((kernel_path)p, &why))
            fprintf(stderr, "note: kernel path %s is skipped: %s\n", kernel_path_name((kernel_path)p), why);
    }
    return test_run_suite(kernels_suite());
}

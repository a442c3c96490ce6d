/*
 * test-mla.c -- the operations of multi-head latent attention
 * (models/deepseek2.c) and DeepSeek's routing.
 *
 * - matmul_heads, the products per head that map queries into the latent
 *   space and the latent outputs back: every head's outputs equal bit for
 *   bit the same head's slice run through matmul alone (each output is one
 *   dot product in the kernels' order), with the other columns of the
 *   output untouched; float and quantized heads, ragged row counts and
 *   strides, one to three threads, on every kernel path this CPU runs.
 * - copy_heads: the slices land where they should, nothing else moves.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "kernels.h"
#include "quant.h"
#include "testutil.h"

static void fill_normal(test_rng *rng, float *x, int64_t n, double std)
{
    for (int64_t i = 0; i < n; i++) x[i] = (float)(test_rng_normal(rng) * std);
}

/* n_heads matrices of n_out x n_in of type t, one allocation as the
 * slices of a 3-D tensor. */
static void *make_heads(test_rng *rng, struct weight *w, int32_t n_heads, hearth_type t, int64_t n_in, int64_t n_out)
{
    const size_t row = hearth_type_row_bytes(t, n_in);
    uint8_t *d = test_malloc(row * (size_t)n_out * (size_t)n_heads);
    float *f = test_malloc((size_t)n_in * sizeof(float));
    for (int64_t r = 0; r < n_out * n_heads; r++) {
        fill_normal(rng, f, n_in, 0.1);
        ck_assert(quant_quantize_row(t, f, d + (size_t)r * row, n_in));
    }
    free(f);
    for (int32_t h = 0; h < n_heads; h++)
        w[h] = (struct weight){.name = "blk.0.attn_k_b.weight", .type = t, .n_in = n_in, .n_out = n_out,
                               .row_bytes = row, .data = d + (size_t)h * row * (size_t)n_out};
    return d;
}

struct heads_case {
    hearth_type type;
    int32_t n_heads;
    int64_t n_in, n_out;
    int64_t in_stride, in_first, out_stride, out_first;
};

static const struct heads_case heads_cases[] = {
    /* DeepSeek's absorption (q_nope 128 -> latent 512, into [rope | latent]
     * rows of 576) and its way back (latent 512 -> values of 128), scaled
     * down, and ragged float ones */
    {HEARTH_TYPE_F32, 4, 32, 64, 48, 0, 80, 16},
    {HEARTH_TYPE_F16, 3, 64, 16, 64, 0, 16, 0},
    {HEARTH_TYPE_Q8_0, 5, 64, 128, 96, 0, 160, 32},
    {HEARTH_TYPE_Q8_0, 2, 128, 40, 128, 0, 40, 0},
    {HEARTH_TYPE_F32, 3, 7, 13, 9, 2, 17, 3},
    {HEARTH_TYPE_F16, 6, 5, 3, 11, 6, 3, 0},
    {HEARTH_TYPE_Q4_0, 2, 64, 24, 70, 6, 30, 5},
};

static bool same_bits(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof(float)) == 0;
}

static void check_heads(const hearth_kernels *kernels, const char *path, const struct heads_case *hc, int n_threads,
                        int64_t n_tok, uint64_t seed)
{
    struct hearth_backend *be;
    ck_assert_int_eq(backend_cpu_new_with(n_threads, kernels, &be), HEARTH_OK);
    test_rng rng;
    test_rng_seed(&rng, seed);
    struct weight w[8];
    void *mem = make_heads(&rng, w, hc->n_heads, hc->type, hc->n_in, hc->n_out);
    const int64_t in_width = (hc->n_heads - 1) * hc->in_stride + hc->in_first + hc->n_in + 3;
    const int64_t out_width = hc->n_heads * hc->out_stride;
    struct act in, out, x, y;
    ck_assert_int_eq(be->ops->act_alloc(be, &in, n_tok, in_width), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &out, n_tok, out_width), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &x, n_tok, hc->n_in), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &y, n_tok, hc->n_out), HEARTH_OK);
    fill_normal(&rng, in.host, n_tok * in_width, 1.0);
    in.rows = n_tok;
    /* a pattern in the columns the op must leave alone */
    for (int64_t i = 0; i < n_tok * out_width; i++) out.host[i] = (float)i;
    out.rows = n_tok;
    out.width = out_width;
    ck_assert_int_eq(be->ops->matmul_heads(be, &out, hc->out_stride, hc->out_first, w, hc->n_heads, &in,
                                           hc->in_stride, hc->in_first),
                     HEARTH_OK);
    ck_assert_int_eq(out.rows, n_tok);
    ck_assert_int_eq(out.width, out_width);
    for (int32_t h = 0; h < hc->n_heads; h++) {
        for (int64_t t = 0; t < n_tok; t++)
            memcpy(x.host + t * hc->n_in, in.host + t * in_width + h * hc->in_stride + hc->in_first,
                   (size_t)hc->n_in * sizeof(float));
        x.rows = n_tok;
        x.width = hc->n_in;
        ck_assert_int_eq(be->ops->matmul(be, &y, &w[h], &x), HEARTH_OK);
        for (int64_t t = 0; t < n_tok; t++) {
            const float *row = out.host + t * out_width + h * hc->out_stride;
            ck_assert_msg(same_bits(row + hc->out_first, y.host + t * hc->n_out, (size_t)hc->n_out),
                          "%s, %s, %d threads, %lld rows: head %d row %lld differs from its own product", path,
                          hearth_type_name(hc->type), n_threads, (long long)n_tok, h, (long long)t);
            for (int64_t i = 0; i < hc->out_stride; i++)
                if (i < hc->out_first || i >= hc->out_first + hc->n_out)
                    ck_assert_msg(row[i] == (float)(t * out_width + h * hc->out_stride + i),
                                  "head %d row %lld: column %lld was written", h, (long long)t, (long long)i);
        }
    }
    be->ops->act_free(be, &in);
    be->ops->act_free(be, &out);
    be->ops->act_free(be, &x);
    be->ops->act_free(be, &y);
    free(mem);
    backend_cpu_free(be);
}

START_TEST(test_matmul_heads)
{
    const struct heads_case *hc = &heads_cases[_i];
    static const int64_t tokens[] = {1, 2, 5, 13, 40};
    for (int p = 0; p < KERNEL_PATH_COUNT; p++) {
        const hearth_kernels *kernels = kernel_path_table((kernel_path)p, NULL);
        if (!kernels) continue;
        for (int n_threads = 1; n_threads <= 3; n_threads += 2)
            for (size_t t = 0; t < HEARTH_ARRAY_LEN(tokens); t++)
                check_heads(kernels, kernel_path_name((kernel_path)p), hc, n_threads, tokens[t],
                            100 * (uint64_t)_i + t);
    }
}
END_TEST

START_TEST(test_copy_heads)
{
    struct hearth_backend *be;
    ck_assert_int_eq(backend_cpu_new(1, &be), HEARTH_OK);
    enum { ROWS = 3, HEADS = 4, SRC = 10, DST = 7 };
    struct act src, dst;
    ck_assert_int_eq(be->ops->act_alloc(be, &src, ROWS, HEADS * SRC), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &dst, ROWS, HEADS * DST), HEARTH_OK);
    for (int i = 0; i < ROWS * HEADS * SRC; i++) src.host[i] = (float)i;
    for (int i = 0; i < ROWS * HEADS * DST; i++) dst.host[i] = -1.0f;
    src.rows = ROWS;
    /* elements 6 .. 8 of each source head to 2 .. 4 of each destination head */
    ck_assert_int_eq(be->ops->copy_heads(be, &dst, DST, 2, &src, SRC, 6, HEADS, 3), HEARTH_OK);
    ck_assert_int_eq(dst.rows, ROWS);
    ck_assert_int_eq(dst.width, HEADS * DST);
    for (int t = 0; t < ROWS; t++)
        for (int h = 0; h < HEADS; h++)
            for (int i = 0; i < DST; i++) {
                const float want = i >= 2 && i < 5 ? (float)(t * HEADS * SRC + h * SRC + 6 + i - 2) : -1.0f;
                ck_assert_msg(dst.host[t * HEADS * DST + h * DST + i] == want, "row %d head %d element %d", t, h, i);
            }
    /* a slice past the source's rows is refused */
    ck_assert_int_eq(be->ops->copy_heads(be, &dst, DST, 0, &src, SRC, 8, HEADS, 3), HEARTH_E_INTERNAL);
    be->ops->act_free(be, &src);
    be->ops->act_free(be, &dst);
    backend_cpu_free(be);
}
END_TEST

static Suite *mla_suite(void)
{
    Suite *s = suite_create("mla");
    TCase *tc = tcase_create("operations");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_matmul_heads, 0, (int)HEARTH_ARRAY_LEN(heads_cases));
    tcase_add_test(tc, test_copy_heads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return test_run_suite(mla_suite());
}

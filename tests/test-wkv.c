/*
 * test-wkv.c -- the recurrences of linear-attention layers (simd/wkv.h)
 * and the CPU backend's wkv operation.
 *
 * - Chunk-parallel prefill equals the recurrence: outputs and final
 *   states of every kernel path, chunked with C = 1, 2, 3, 16, 63, 64, 65,
 *   128 and the whole prompt (ragged last chunks), within 1e-5 (relative
 *   to the largest value) of a double-precision token-by-token
 *   reference, for RWKV-6 (bonus u) and gated linear attention, zero and
 *   non-zero incoming states, weak decays, strong ones, decays that
 *   underflow to 0 (log-decay -inf) and ones that round to 1.  The float
 *   token-by-token kernel meets the same bound.
 * - Blocks of value columns computed apart equal the whole head.
 * - Each vector path against its scalar twin; the token-by-token kernel
 *   bit for bit, over whole and ragged tiles of value columns.
 * - The elementwise maps (tanh, sigmoid, SiLU, the log-decay, squared
 *   ReLU) against libm within 1e-6 relative, and every path bit for bit
 *   against the scalar twin, in place and not, at ragged lengths and
 *   with overflowing, underflowing, infinite and NaN inputs; the token
 *   shift's interpolation likewise.
 * - The backend operation (chunks of 16, and of one token: the
 *   token-by-token kernel over each head's rows) over a batch of several
 *   sequences of different lengths (grouped key/value heads, state slots,
 *   a sequence continuing from a state left by an earlier batch, one
 *   starting fresh at position 0) against the reference per sequence.
 * - The checks are shown to guard what they claim: with the test-only
 *   switch wkv_inject_bug set to drop the incoming-state term, or to let
 *   a token read the next token of its chunk, the same checks fail.
 * - Models: decode after a chunked prefill continues as after a
 *   token-by-token prefill (the same greedy tokens, logits within
 *   tolerance), for rwkv6 and rwkv6qwen2; chunk sizes change the logits
 *   only by rounding; rewinding follows the snapshot rules.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "kernels.h"
#include "rstate.h"
#include "testutil.h"
#include "wkv.h"

#define TOL 1e-5

enum decay_kind { DECAY_WEAK, DECAY_STRONG, DECAY_EXTREME, DECAY_COUNT };

/* One head's problem: n tokens of r, k, v, lw (rows of N), u, S0. */
struct problem {
    int64_t n;
    int32_t N;
    bool gla;
    float *r, *k, *v, *lw, *u, *S0;
};

static void problem_make(struct problem *p, int64_t n, int32_t N, bool gla, enum decay_kind decay,
                         bool state, uint64_t seed)
{
    test_rng rng;
    test_rng_seed(&rng, seed);
    p->n = n;
    p->N = N;
    p->gla = gla;
    const size_t nn = (size_t)n * N;
    p->r = test_malloc(nn * sizeof(float));
    p->k = test_malloc(nn * sizeof(float));
    p->v = test_malloc(nn * sizeof(float));
    p->lw = test_malloc(nn * sizeof(float));
    p->u = test_malloc((size_t)N * sizeof(float));
    p->S0 = test_malloc((size_t)N * N * sizeof(float));
    for (size_t i = 0; i < nn; i++) {
        p->r[i] = (float)test_rng_normal(&rng);
        p->k[i] = (float)test_rng_normal(&rng);
        p->v[i] = (float)test_rng_normal(&rng);
        double d;
        switch (decay) {
        case DECAY_WEAK: d = -6.0 + test_rng_normal(&rng); break;        /* w ~ 0.998 */
        case DECAY_STRONG: d = 0.5 + 1.5 * test_rng_normal(&rng); break; /* w down to ~e^-150 */
        default: {
            /* a mix: decays that round to 1, ordinary ones, ones that
             * underflow to 0, and the log-decay -inf itself */
            const double x = test_rng_uniform(&rng);
            d = x < 0.25 ? -30.0 : x < 0.6 ? -1.0 + test_rng_normal(&rng) : x < 0.85 ? 5.0 : 200.0;
            break;
        }
        }
        p->lw[i] = -expf((float)d);
    }
    for (int32_t i = 0; i < N; i++) p->u[i] = (float)test_rng_normal(&rng);
    for (size_t i = 0; i < (size_t)N * N; i++) p->S0[i] = state ? (float)(3.0 * test_rng_normal(&rng)) : 0.0f;
}

static void problem_free(struct problem *p)
{
    free(p->r);
    free(p->k);
    free(p->v);
    free(p->lw);
    free(p->u);
    free(p->S0);
}

/* The recurrence in double precision, token by token (wkv.h). */
static void reference(const struct problem *p, float scale, double *y, double *S)
{
    const int32_t N = p->N;
    for (size_t i = 0; i < (size_t)N * N; i++) S[i] = p->S0[i];
    for (int64_t t = 0; t < p->n; t++) {
        const float *r = p->r + t * N, *k = p->k + t * N, *v = p->v + t * N, *lw = p->lw + t * N;
        double *yt = y + t * N;
        for (int32_t j = 0; j < N; j++) yt[j] = 0.0;
        for (int32_t i = 0; i < N; i++) {
            const double l = lw[i] < WKV_LOG_DECAY_MIN ? WKV_LOG_DECAY_MIN : (double)lw[i];
            const double w = exp(l);
            double *Si = S + (size_t)i * N;
            if (p->gla) {
                const double kk = (double)k[i] * -expm1(l);
                for (int32_t j = 0; j < N; j++) {
                    Si[j] = Si[j] * w + kk * v[j];
                    yt[j] += (double)r[i] * scale * Si[j];
                }
            } else {
                for (int32_t j = 0; j < N; j++) {
                    yt[j] += (double)r[i] * (Si[j] + (double)p->u[i] * k[i] * v[j]);
                    Si[j] = Si[j] * w + (double)k[i] * v[j];
                }
            }
        }
    }
}

/* max |a - b| / max |b| */
static double rel_err(const float *a, const double *b, size_t n)
{
    double m = 0.0, d = 0.0;
    for (size_t i = 0; i < n; i++) {
        m = fmax(m, fabs(b[i]));
        d = fmax(d, fabs((double)a[i] - b[i]));
        if (isnan(a[i])) return INFINITY;
    }
    return d / (m > 0.0 ? m : 1.0);
}

/* Run p through kernels k (C = 0: token by token) in column blocks of
 * width cols; returns the larger relative error of y and S. */
static double run_kernel(const struct wkv_kernels *k, const struct problem *p, int32_t C, int32_t cols,
                         float *y, float *S)
{
    const int32_t N = p->N;
    const float scale = p->gla ? 1.0f / sqrtf((float)N) : 1.0f;
    memcpy(S, p->S0, (size_t)N * N * sizeof(float));
    void *scratch = C > 0 ? hearth_aligned_alloc(64, wkv_chunk_scratch_bytes(C, N), "test") : NULL;
    for (int32_t j0 = 0; j0 < N; j0 += cols) {
        struct wkv_head h = {
            .n = p->n, .N = N, .r = p->r, .k = p->k, .v = p->v, .lw = p->lw,
            .r_stride = N, .k_stride = N, .v_stride = N, .lw_stride = N,
            .u = p->gla ? NULL : p->u, .scale = scale, .y = y, .y_stride = N, .S = S,
            .j0 = j0, .j1 = HEARTH_MIN(j0 + cols, N),
        };
        if (C > 0) k->chunked(&h, C, scratch);
        else k->recurrent(&h);
    }
    hearth_aligned_free(scratch);
    return 0.0;
}

static const int32_t chunk_sizes[] = {1, 2, 3, 16, 63, 64, 65, 128, 0 /* the whole prompt */};
static const int64_t lengths[] = {1, 5, 64, 130, 200};

/* The largest relative error of kernels k over every length, chunk size,
 * decay, state and both recurrences (head size N). */
static double worst_error(const struct wkv_kernels *k, int32_t N, bool report)
{
    double worst = 0.0;
    uint64_t seed = 1;
    for (int gla = 0; gla < 2; gla++)
        for (int decay = 0; decay < DECAY_COUNT; decay++)
            for (int state = 0; state < 2; state++)
                for (size_t li = 0; li < HEARTH_ARRAY_LEN(lengths); li++) {
                    struct problem p;
                    const int64_t n = lengths[li];
                    problem_make(&p, n, N, gla, (enum decay_kind)decay, state, seed++);
                    double *yr = test_malloc((size_t)n * N * sizeof(double));
                    double *Sr = test_malloc((size_t)N * N * sizeof(double));
                    float *y = test_malloc((size_t)n * N * sizeof(float));
                    float *S = test_malloc((size_t)N * N * sizeof(float));
                    reference(&p, gla ? 1.0f / sqrtf((float)N) : 1.0f, yr, Sr);
                    for (size_t ci = 0; ci <= HEARTH_ARRAY_LEN(chunk_sizes); ci++) {
                        /* the last round: token by token */
                        const int32_t C = ci == HEARTH_ARRAY_LEN(chunk_sizes) ? 0
                                          : chunk_sizes[ci] ? chunk_sizes[ci] : (int32_t)n;
                        run_kernel(k, &p, C, N, y, S);
                        const double e = fmax(rel_err(y, yr, (size_t)n * N), rel_err(S, Sr, (size_t)N * N));
                        if (report && e > TOL)
                            fprintf(stderr, "%s %s decay %d state %d n %lld C %d: error %.3g\n", k->name,
                                    gla ? "gla" : "wkv6", decay, state, (long long)n, C, e);
                        worst = fmax(worst, e);
                    }
                    free(yr);
                    free(Sr);
                    free(y);
                    free(S);
                    problem_free(&p);
                }
    return worst;
}

static const struct wkv_kernels *path_kernels(int p)
{
    const hearth_kernels *t = kernel_path_table((kernel_path)p, NULL);
    if (!t) return NULL;
    return p == KERNEL_PATH_SCALAR ? wkv_kernels_scalar() : wkv_kernels_matching(t);
}

START_TEST(test_chunked_equals_recurrence)
{
    static const int32_t sizes[] = {64, 8, 24};
    for (int p = 0; p < KERNEL_PATH_COUNT; p++) {
        const struct wkv_kernels *k = path_kernels(p);
        if (!k) continue;
        const double e = worst_error(k, sizes[_i], true);
        ck_assert_msg(e <= TOL, "%s, head size %d: worst relative error %.3g", k->name, sizes[_i], e);
    }
}
END_TEST

/* The two classic bugs of chunked linear attention make the same check
 * fail. */
START_TEST(test_injected_bugs_are_caught)
{
    const struct wkv_kernels *k = wkv_kernels_scalar();
    for (int bug = 1; bug <= 2; bug++) {
        wkv_inject_bug = bug;
        const double e = worst_error(k, 16, false);
        wkv_inject_bug = 0;
        ck_assert_msg(e > 100 * TOL, "bug %d injected: the check still passes (worst error %.3g)", bug, e);
    }
    ck_assert_double_le(worst_error(k, 16, false), TOL);
}
END_TEST

START_TEST(test_column_blocks)
{
    struct problem p;
    problem_make(&p, 77, 64, _i, DECAY_STRONG, true, 99);
    float *y1 = test_malloc(77 * 64 * sizeof(float)), *y2 = test_malloc(77 * 64 * sizeof(float));
    float *S1 = test_malloc(64 * 64 * sizeof(float)), *S2 = test_malloc(64 * 64 * sizeof(float));
    const struct wkv_kernels *k = wkv_kernels_scalar();
    for (int C = 0; C <= 16; C += 16) {
        run_kernel(k, &p, C, 64, y1, S1);
        run_kernel(k, &p, C, 16, y2, S2);
        ck_assert_mem_eq(y1, y2, 77 * 64 * sizeof(float));
        ck_assert_mem_eq(S1, S2, 64 * 64 * sizeof(float));
    }
    free(y1);
    free(y2);
    free(S1);
    free(S2);
    problem_free(&p);
}
END_TEST

/* Each vector path's table is its own, and agrees with the scalar twin
 * (within float rounding: the vector code contracts multiply-adds). */
START_TEST(test_paths_against_scalar)
{
    ck_assert_ptr_eq(wkv_kernels_matching(kernel_path_table(KERNEL_PATH_SCALAR, NULL)), wkv_kernels_scalar());
    for (int p = KERNEL_PATH_SCALAR + 1; p < KERNEL_PATH_COUNT; p++) {
        const struct wkv_kernels *k = path_kernels(p);
        if (!k) continue;
        ck_assert_ptr_ne(k, wkv_kernels_scalar());
        for (int gla = 0; gla < 2; gla++) {
            struct problem pr;
            problem_make(&pr, 150, 64, gla, DECAY_EXTREME, true, 7 + (uint64_t)gla);
            float *y1 = test_malloc(150 * 64 * sizeof(float)), *y2 = test_malloc(150 * 64 * sizeof(float));
            float *S1 = test_malloc(64 * 64 * sizeof(float)), *S2 = test_malloc(64 * 64 * sizeof(float));
            for (int C = 0; C <= 64; C += 32) {
                run_kernel(wkv_kernels_scalar(), &pr, C, 64, y1, S1);
                run_kernel(k, &pr, C, 64, y2, S2);
                double m = 0, d = 0;
                /* Comparisons, not fmax: GCC 12 for AArch64 fails
                 * (internal compiler error) to vectorise this loop as
                 * two fmax reductions. */
                for (int i = 0; i < 150 * 64; i++) {
                    const double a = fabs(y1[i]), e = fabs((double)y1[i] - y2[i]);
                    if (a > m) m = a;
                    if (e > d) d = e;
                }
                ck_assert_msg(d <= 1e-5 * m, "%s against scalar, C = %d: %.3g of %.3g", k->name, C, d, m);
            }
            free(y1);
            free(y2);
            free(S1);
            free(S2);
            problem_free(&pr);
        }
    }
}
END_TEST

/* The token-by-token kernel of each vector path gives its scalar twin's
 * bits (no contraction, the same operations in the same order), for head
 * sizes that fill whole tiles of WKV_TILE value columns and ragged ones,
 * and for column blocks that end inside a tile. */
START_TEST(test_recurrent_paths_bit_exact)
{
    static const int32_t sizes[] = {8, 24, 64, 80, 100, 128, 192};
    for (int p = KERNEL_PATH_SCALAR + 1; p < KERNEL_PATH_COUNT; p++) {
        const struct wkv_kernels *k = path_kernels(p);
        if (!k) continue;
        for (size_t si = 0; si < HEARTH_ARRAY_LEN(sizes); si++)
            for (int gla = 0; gla < 2; gla++) {
                const int32_t N = sizes[si], n = 37;
                struct problem pr;
                problem_make(&pr, n, N, gla, gla ? DECAY_EXTREME : DECAY_STRONG, true, 31 + si * 2 + (uint64_t)gla);
                float *y1 = test_malloc((size_t)n * N * sizeof(float)), *y2 = test_malloc((size_t)n * N * sizeof(float));
                float *S1 = test_malloc((size_t)N * N * sizeof(float)), *S2 = test_malloc((size_t)N * N * sizeof(float));
                const int32_t cols[] = {N, 48, 72};
                for (size_t c = 0; c < HEARTH_ARRAY_LEN(cols); c++) {
                    run_kernel(wkv_kernels_scalar(), &pr, 0, cols[c], y1, S1);
                    run_kernel(k, &pr, 0, cols[c], y2, S2);
                    ck_assert_msg(memcmp(y1, y2, (size_t)n * N * sizeof(float)) == 0,
                                  "%s, head size %d, blocks of %d: outputs differ from the scalar twin", k->name, N,
                                  cols[c]);
                    ck_assert_msg(memcmp(S1, S2, (size_t)N * N * sizeof(float)) == 0,
                                  "%s, head size %d, blocks of %d: states differ from the scalar twin", k->name, N,
                                  cols[c]);
                }
                free(y1);
                free(y2);
                free(S1);
                free(S2);
                problem_free(&pr);
            }
    }
}
END_TEST

/* The backend's wkv over several sequences at once: grouped heads, state
 * slots in another order, sequence 1 continuing from an earlier batch. */
START_TEST(test_backend_batch)
{
    /* _i & 1: gated linear attention; _i & 2: chunks of one token (the
     * token-by-token kernel over each head's rows), else of 16 */
    const int32_t N = 16, n_head = 4, n_head_kv = (_i & 1) ? 2 : 4, group = n_head / n_head_kv;
    const bool gla = _i & 1;
    const int32_t chunk = (_i & 2) ? 1 : 16;
    const int32_t lens[] = {37, 1, 70, 5};
    const int32_t n_seqs = 4;
    const int32_t slots[] = {2, 0, 3, 1};
    const int32_t start_pos[] = {0, 9, 0, 130};
    int32_t seq_start[5] = {0};
    for (int s = 0; s < n_seqs; s++) seq_start[s + 1] = seq_start[s] + lens[s];
    const int32_t n = seq_start[n_seqs];
    struct hearth_backend *be;
    ck_assert_int_eq(backend_cpu_new(3, &be), HEARTH_OK);
    struct act r, k, v, lw, out;
    ck_assert_int_eq(be->ops->act_alloc(be, &r, n, n_head * N), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &lw, n, n_head * N), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &out, n, n_head * N), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &k, n, n_head_kv * N), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &v, n, n_head_kv * N), HEARTH_OK);
    struct rstate *rs;
    const size_t layer_floats = 7 + (size_t)n_head * N * N; /* something before the WKV state */
    ck_assert_int_eq(rstate_new(4, 1, layer_floats, NULL, &rs), HEARTH_OK);
    test_rng rng;
    test_rng_seed(&rng, 5);
    for (int64_t i = 0; i < (int64_t)n * n_head * N; i++) {
        r.host[i] = (float)test_rng_normal(&rng);
        lw.host[i] = -expf((float)(-2.0 + 2.0 * test_rng_normal(&rng)));
    }
    for (int64_t i = 0; i < (int64_t)n * n_head_kv * N; i++) {
        k.host[i] = (float)test_rng_normal(&rng);
        v.host[i] = (float)test_rng_normal(&rng);
    }
    float *u = test_malloc((size_t)n_head * N * sizeof(float));
    for (int i = 0; i < n_head * N; i++) u[i] = (float)test_rng_normal(&rng);
    for (size_t i = 0; i < rs->layer_floats * 4; i++) rs->data[i] = (float)test_rng_normal(&rng);
    /* the states as they were before the batch (position 0 starts from zeros) */
    float *before = test_malloc(rs->layer_floats * 4 * sizeof(float));
    memcpy(before, rs->data, rs->layer_floats * 4 * sizeof(float));
    int32_t *pos = test_malloc((size_t)n * sizeof(int32_t));
    for (int s = 0; s < n_seqs; s++)
        for (int t = 0; t < lens[s]; t++) pos[seq_start[s] + t] = start_pos[s] + t;
    struct batch_pos bp = {.pos = pos, .n_tokens = n, .n_seqs = n_seqs, .seq_start = seq_start, .state_slot = slots};
    const float scale = gla ? 0.25f : 1.0f;
    ck_assert_int_eq(be->ops->wkv(be, &out, &r, &k, &v, &lw, gla ? NULL : u, scale, n_head, n_head_kv, N, rs, 0,
                                  chunk, &bp),
                     HEARTH_OK);
    for (int s = 0; s < n_seqs; s++)
        for (int h = 0; h < n_head; h++) {
            struct problem p = {.n = lens[s], .N = N, .gla = gla};
            const size_t nn = (size_t)lens[s] * N;
            p.r = test_malloc(nn * sizeof(float));
            p.k = test_malloc(nn * sizeof(float));
            p.v = test_malloc(nn * sizeof(float));
            p.lw = test_malloc(nn * sizeof(float));
            p.u = test_malloc((size_t)N * sizeof(float));
            p.S0 = test_malloc((size_t)N * N * sizeof(float));
            for (int t = 0; t < lens[s]; t++) {
                const int64_t row = seq_start[s] + t;
                memcpy(p.r + t * N, r.host + row * r.width + h * N, N * sizeof(float));
                memcpy(p.lw + t * N, lw.host + row * lw.width + h * N, N * sizeof(float));
                memcpy(p.k + t * N, k.host + row * k.width + (h / group) * N, N * sizeof(float));
                memcpy(p.v + t * N, v.host + row * v.width + (h / group) * N, N * sizeof(float));
            }
            memcpy(p.u, u + h * N, N * sizeof(float));
            const float *S0 = before + rs->layer_floats * (size_t)slots[s] + 7 + (size_t)h * N * N;
            for (int i = 0; i < N * N; i++) p.S0[i] = start_pos[s] == 0 ? 0.0f : S0[i];
            double *yr = test_malloc(nn * sizeof(double)), *Sr = test_malloc((size_t)N * N * sizeof(double));
            reference(&p, scale, yr, Sr);
            float *y = test_malloc(nn * sizeof(float));
            for (int t = 0; t < lens[s]; t++)
                memcpy(y + t * N, out.host + (int64_t)(seq_start[s] + t) * out.width + h * N, N * sizeof(float));
            ck_assert_double_le(rel_err(y, yr, nn), TOL);
            const float *S = rstate_layer(rs, slots[s], 0) + 7 + (size_t)h * N * N;
            ck_assert_double_le(rel_err(S, Sr, (size_t)N * N), TOL);
            free(yr);
            free(Sr);
            free(y);
            problem_free(&p);
        }
    /* the floats before the WKV state are not touched */
    for (int s = 0; s < 4; s++)
        ck_assert_mem_eq(rstate_layer(rs, s, 0), before + rs->layer_floats * (size_t)s, 7 * sizeof(float));
    free(before);
    free(pos);
    free(u);
    rstate_free(rs);
    struct act *acts[] = {&r, &k, &v, &lw, &out};
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(acts); i++) be->ops->act_free(be, acts[i]);
    backend_cpu_free(be);
}
END_TEST

/* ---- models ------------------------------------------------------------------------------ */

static const char *const recurrent_models[] = {"models/micro-rwkv6-f32.gguf", "models/micro-rwkv6qwen2-f32.gguf"};

static hearth_context *new_ctx(const hearth_model *m, int32_t chunk, int32_t n_batch)
{
    hearth_context_params cp;
    hearth_context_default_params(&cp);
    cp.n_ctx = 256;
    cp.n_batch = n_batch;
    cp.n_threads = 2;
    cp.chunk_size = chunk;
    hearth_context *ctx;
    ck_assert_int_eq(hearth_context_new(m, &cp, &ctx), HEARTH_OK);
    return ctx;
}

static int32_t argmax(const float *x, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static double logits_rel(const float *a, const float *b, int32_t n)
{
    double m = 0, d = 0;
    for (int32_t i = 0; i < n; i++) {
        m = fmax(m, fabs(b[i]));
        d = fmax(d, fabs((double)a[i] - b[i]));
    }
    return d / (m > 0 ? m : 1);
}

/* Greedy decode of n_gen tokens after the prompt already evaluated;
 * tokens and the logits of each step into the arrays. */
static void decode(hearth_context *ctx, int32_t n_vocab, int n_gen, int32_t *tokens, float *logits)
{
    const float *l = hearth_context_logits(ctx, 0);
    ck_assert_ptr_nonnull(l);
    for (int i = 0; i < n_gen; i++) {
        memcpy(logits + (size_t)i * n_vocab, l, (size_t)n_vocab * sizeof(float));
        tokens[i] = argmax(l, n_vocab);
        ck_assert_int_eq(hearth_eval(ctx, &tokens[i], 1, 1), HEARTH_OK);
        l = hearth_context_logits(ctx, 0);
    }
}

START_TEST(test_decode_after_chunked_prefill)
{
    if (!test_require_data()) return;
    hearth_model *m;
    ck_assert_int_eq(hearth_model_load(test_data_path(recurrent_models[_i]), NULL, &m), HEARTH_OK);
    ck_assert(hearth_model_is_recurrent(m));
    const int32_t V = hearth_model_n_vocab(m), n_prompt = 150, n_gen = 12;
    int32_t prompt[150];
    test_rng rng;
    test_rng_seed(&rng, 11);
    for (int i = 0; i < n_prompt; i++) prompt[i] = (int32_t)(test_rng_next(&rng) % (uint64_t)V);
    int32_t tok_ref[12], tok[12];
    float *log_ref = test_malloc((size_t)n_gen * V * sizeof(float)), *log = test_malloc((size_t)n_gen * V * sizeof(float));

    /* token by token */
    hearth_context *ctx = new_ctx(m, 0, 64);
    for (int i = 0; i < n_prompt; i++) ck_assert_int_eq(hearth_eval(ctx, &prompt[i], 1, 1), HEARTH_OK);
    decode(ctx, V, n_gen, tok_ref, log_ref);
    ck_assert_uint_gt(hearth_context_kv_bytes(ctx), 0);
    hearth_context_free(ctx);

    static const int32_t chunks[] = {1, 16, 63, 64, 100, 4096};
    for (size_t c = 0; c < HEARTH_ARRAY_LEN(chunks); c++) {
        ctx = new_ctx(m, chunks[c], 128); /* the prompt in batches of 128 and 22 */
        ck_assert_int_eq(hearth_eval(ctx, prompt, n_prompt, 1), HEARTH_OK);
        decode(ctx, V, n_gen, tok, log);
        ck_assert_mem_eq(tok, tok_ref, sizeof tok);
        for (int i = 0; i < n_gen; i++) {
            const double e = logits_rel(log + (size_t)i * V, log_ref + (size_t)i * V, V);
            ck_assert_msg(e < 1e-4, "chunk %d, step %d: logits differ by %.3g", chunks[c], i, e);
        }
        hearth_context_free(ctx);
    }
    free(log_ref);
    free(log);
    hearth_model_free(m);
}
END_TEST

START_TEST(test_rewind_rules)
{
    if (!test_require_data()) return;
    hearth_model *m;
    ck_assert_int_eq(hearth_model_load(test_data_path(recurrent_models[0]), NULL, &m), HEARTH_OK);
    const int32_t V = hearth_model_n_vocab(m);
    hearth_context *ctx = new_ctx(m, 16, 64);
    const int32_t toks[6] = {5, 17, 200, 33, 4, 99};
    ck_assert_int_eq(hearth_eval(ctx, toks, 3, 1), HEARTH_OK);
    ck_assert_int_eq(hearth_context_snapshot(ctx), HEARTH_OK);
    ck_assert_int_eq(hearth_eval(ctx, toks + 3, 3, 1), HEARTH_OK);
    float *after = test_malloc((size_t)V * sizeof(float));
    memcpy(after, hearth_context_logits(ctx, 0), (size_t)V * sizeof(float));
    /* no snapshot at 2 or 4: refused, nothing changes */
    ck_assert_int_eq(hearth_context_rewind(ctx, 2), HEARTH_E_UNSUPPORTED);
    ck_assert_int_eq(hearth_context_rewind(ctx, 4), HEARTH_E_UNSUPPORTED);
    ck_assert_int_eq(hearth_context_n_past(ctx), 6);
    /* back to the snapshot: the same continuation */
    ck_assert_int_eq(hearth_context_rewind(ctx, 3), HEARTH_OK);
    ck_assert_int_eq(hearth_eval(ctx, toks + 3, 3, 1), HEARTH_OK);
    ck_assert_mem_eq(hearth_context_logits(ctx, 0), after, (size_t)V * sizeof(float));
    /* back to 0: a fresh state */
    ck_assert_int_eq(hearth_context_rewind(ctx, 0), HEARTH_OK);
    ck_assert_int_eq(hearth_eval(ctx, toks, 6, 1), HEARTH_OK);
    ck_assert_double_le(logits_rel(hearth_context_logits(ctx, 0), after, V), 1e-5);
    free(after);
    hearth_context_free(ctx);
    hearth_model_free(m);
}
END_TEST

/* A copy of a shared model with one metadata key dropped (drop_key), one
 * key set to a value (set_key), and one tensor dropped or one added (a
 * copy of an existing one under a new name); the load must fail naming
 * what is wrong. */
struct edit {
    const char *model, *drop_key, *set_key;
    uint32_t set_value;
    const char *drop_tensor, *add_tensor, *add_from;
    hearth_status want;
    const char *message;
};

static void check_refused(const struct edit *ed, const char *path)
{
    hearth_gguf *g;
    ck_assert_int_eq(hearth_gguf_open(test_data_path(ed->model), &g), HEARTH_OK);
    hearth_gguf_writer *w;
    ck_assert_int_eq(hearth_gguf_writer_new(&w), HEARTH_OK);
    for (int64_t i = 0; i < hearth_gguf_n_kv(g); i++) {
        const char *key = hearth_gguf_kv_key(g, i);
        if ((ed->drop_key && strcmp(key, ed->drop_key) == 0) || (ed->set_key && strcmp(key, ed->set_key) == 0))
            continue;
        ck_assert_int_eq(hearth_gguf_writer_copy_kv(w, g, i), HEARTH_OK);
    }
    if (ed->set_key) ck_assert_int_eq(hearth_gguf_writer_set_u32(w, ed->set_key, ed->set_value), HEARTH_OK);
    for (int64_t i = 0; i < hearth_gguf_n_tensors(g); i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(g, i);
        if (ed->drop_tensor && strcmp(t->name, ed->drop_tensor) == 0) continue;
        ck_assert_int_eq(hearth_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->bytes),
                         HEARTH_OK);
        if (ed->add_from && strcmp(t->name, ed->add_from) == 0)
            ck_assert_int_eq(hearth_gguf_writer_add_tensor(w, ed->add_tensor, t->type, t->n_dims, t->ne, t->data,
                                                           t->bytes),
                             HEARTH_OK);
    }
    ck_assert_int_eq(hearth_gguf_writer_write(w, path), HEARTH_OK);
    hearth_gguf_writer_free(w);
    hearth_gguf_close(g);
    hearth_model *m = NULL;
    hearth_status st = hearth_model_load(path, NULL, &m);
    ck_assert_msg(st == ed->want, "%s: status %d (%s), expected %d", ed->message, st, hearth_last_error(), ed->want);
    ck_assert_msg(strstr(hearth_last_error(), ed->message) != NULL, "error '%s' does not say '%s'",
                  hearth_last_error(), ed->message);
    hearth_model_free(m);
    remove(path);
}

START_TEST(test_inconsistent_files_refused)
{
    if (!test_require_data()) return;
    static const struct edit edits[] = {
        {"models/micro-rwkv6qwen2-f32.gguf", "rwkv6qwen2.attention.head_count_kv", NULL, 0, NULL, NULL, NULL,
         HEARTH_E_FORMAT, "rwkv6qwen2.attention.head_count_kv' is missing"},
        {"models/micro-rwkv6qwen2-f32.gguf", NULL, NULL, 0, NULL, "blk.0.time_mix_first.weight",
         "blk.0.time_mix_decay.weight", HEARTH_E_FORMAT, "has none"},
        {"models/micro-rwkv6qwen2-f32.gguf", NULL, "rwkv6qwen2.attention.head_count_kv", 3, NULL, NULL, NULL,
         HEARTH_E_FORMAT, "cannot share 3 key/value heads"},
        {"models/micro-rwkv6-f32.gguf", NULL, NULL, 0, "blk.1.time_mix_first.weight", NULL, NULL, HEARTH_E_FORMAT,
         "tensor 'blk.1.time_mix_first.weight' is missing"},
        {"models/micro-rwkv6-f32.gguf", NULL, "rwkv6.wkv.head_size", 48, NULL, NULL, NULL, HEARTH_E_FORMAT,
         "not a multiple of the WKV head size 48"},
        {"models/micro-rwkv6-f32.gguf", NULL, "rwkv6.token_shift_count", 1, NULL, NULL, NULL, HEARTH_E_FORMAT,
         "token_shift_count is 1"},
        {"models/micro-rwkv6-f32.gguf", "rwkv6.time_mix_extra_dim", NULL, 0, NULL, NULL, NULL, HEARTH_E_FORMAT,
         "rwkv6.time_mix_extra_dim' is missing"},
        {"models/micro-rwkv6-f32.gguf", NULL, "rwkv6.attention.head_count_kv", 2, NULL, NULL, NULL,
         HEARTH_E_FORMAT, "no grouped key/value heads"},
    };
    char path[64];
    snprintf(path, sizeof path, "test-wkv-%d.gguf", (int)getpid());
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(edits); i++) check_refused(&edits[i], path);
}
END_TEST

/* Recurrent layers are not offloaded: asking fails clearly, or with the
 * fallback runs on the CPU saying why. */
START_TEST(test_offload_refused)
{
    if (!test_require_data()) return;
    hearth_model_params mp;
    hearth_model_default_params(&mp);
    mp.n_gpu_layers = 99;
    hearth_model *m = NULL;
    ck_assert_int_eq(hearth_model_load(test_data_path(recurrent_models[0]), &mp, &m), HEARTH_E_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "cannot be offloaded"));
    mp.gpu_fallback = true;
    ck_assert_int_eq(hearth_model_load(test_data_path(recurrent_models[0]), &mp, &m), HEARTH_OK);
    ck_assert_int_eq(hearth_model_n_gpu_layers(m), 0);
    hearth_model_free(m);
}
END_TEST

/* The maps with an exponential (wkv.h), on every path: against libm in
 * double, and each path bit for bit against the scalar twin, over ragged
 * lengths, in place and not, including the values where the exponential
 * overflows or underflows, infinities and NaN. */
static double map_reference(enum wkv_map kind, double x)
{
    switch (kind) {
    case WKV_MAP_TANH: return tanh(x);
    case WKV_MAP_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case WKV_MAP_SILU: return x / (1.0 + exp(-x));
    case WKV_MAP_LOG_DECAY: return -exp(x);
    case WKV_MAP_RELU_SQR: return x > 0.0 ? x * x : 0.0;
    }
    return NAN;
}

START_TEST(test_maps)
{
    static const float special[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-6f, 0.49999997f, 0.5f, -0.5f, 20.0f, -20.0f,
                                    88.0f, 88.72f, 88.8f, 89.0f, -87.0f, -103.0f, -103.5f, -200.0f, 1e30f,
                                    -1e30f, INFINITY, -INFINITY, NAN};
    const int64_t n_special = (int64_t)(sizeof special / sizeof special[0]);
    const int64_t n_max = 1000 + n_special;
    float *x = test_malloc((size_t)n_max * sizeof(float));
    float *y = test_malloc((size_t)n_max * sizeof(float));
    float *ys = test_malloc((size_t)n_max * sizeof(float));
    float *in_place = test_malloc((size_t)n_max * sizeof(float));
    test_rng rng;
    test_rng_seed(&rng, 12345);
    for (int64_t i = 0; i < n_max; i++) {
        const float u = (float)test_rng_uniform(&rng); /* [0, 1) */
        /* spread over the range the layers see, most near zero */
        x[i] = i < n_special ? special[i] : (i % 3 == 0 ? (u - 0.5f) * 2.0f : (u - 0.5f) * 60.0f);
    }
    static const int64_t lengths_m[] = {1, 7, 8, 9, 33, 1000};
    const struct wkv_kernels *sc = wkv_kernels_scalar();
    for (int kind = WKV_MAP_TANH; kind <= WKV_MAP_RELU_SQR; kind++) {
        /* the twin against libm: relative error, or absolute where the
         * value is tiny or underflows */
        sc->map((enum wkv_map)kind, x, ys, n_max);
        for (int64_t i = 0; i < n_max; i++) {
            const double ref = map_reference((enum wkv_map)kind, (double)x[i]);
            if (isnan(ref)) {
                ck_assert_msg(isnan(ys[i]), "map %d of NaN gave %g", kind, (double)ys[i]);
                continue;
            }
            const double rf = (double)(float)ref; /* the float the result should round to */
            if (isinf(rf)) {
                ck_assert_msg(isinf(ys[i]) && (ys[i] < 0) == (rf < 0), "map %d of %g: %g, expected %g", kind,
                              (double)x[i], (double)ys[i], rf);
                continue;
            }
            const double err = fabs((double)ys[i] - ref);
            ck_assert_msg(err <= 1e-6 * fabs(ref) || err <= 1e-37, "map %d of %.9g: %.9g, libm %.9g", kind,
                          (double)x[i], (double)ys[i], ref);
        }
        for (int p = 0; p < KERNEL_PATH_COUNT; p++) {
            const struct wkv_kernels *k = path_kernels(p);
            if (!k) continue;
            for (size_t l = 0; l < sizeof lengths_m / sizeof lengths_m[0]; l++) {
                const int64_t n = lengths_m[l], off = (int64_t)l % 3; /* ragged starts too */
                sc->map((enum wkv_map)kind, x + off, ys, n);
                k->map((enum wkv_map)kind, x + off, y, n);
                memcpy(in_place, x + off, (size_t)n * sizeof(float));
                k->map((enum wkv_map)kind, in_place, in_place, n);
                for (int64_t i = 0; i < n; i++) {
                    ck_assert_msg(memcmp(&y[i], &ys[i], sizeof(float)) == 0 || (isnan(y[i]) && isnan(ys[i])),
                                  "%s map %d of %.9g: %.9g, scalar %.9g", k->name, kind, (double)x[off + i],
                                  (double)y[i], (double)ys[i]);
                    ck_assert_msg(memcmp(&in_place[i], &y[i], sizeof(float)) == 0 ||
                                      (isnan(y[i]) && isnan(in_place[i])),
                                  "%s map %d in place differs at %lld", k->name, kind, (long long)i);
                }
            }
        }
    }
    free(x);
    free(y);
    free(ys);
    free(in_place);
}
END_TEST

/* The token shift's interpolation on every path: bit for bit the scalar
 * twin's, with and without the data-dependent part, in place and not, at
 * ragged lengths; the twin against the formula in double. */
START_TEST(test_lerp)
{
    const int64_t n_max = 1003; /* the longest call, 1000, from offset 2 */
    float *buf[6];
    for (int i = 0; i < 6; i++) buf[i] = test_malloc((size_t)n_max * sizeof(float));
    float *a = buf[0], *p = buf[1], *mu = buf[2], *m = buf[3], *y = buf[4], *ys = buf[5];
    test_rng rng;
    test_rng_seed(&rng, 777);
    for (int i = 0; i < 4; i++)
        for (int64_t e = 0; e < n_max; e++)
            buf[i][e] = (float)(test_rng_uniform(&rng) - 0.5) * (i >= 2 ? 2.0f : 20.0f);
    const struct wkv_kernels *sc = wkv_kernels_scalar();
    static const int64_t lens[] = {1, 7, 8, 9, 64, 1000};
    for (int with_m = 0; with_m < 2; with_m++) {
        const float *mm = with_m ? m : NULL;
        sc->lerp(a, p, mu, mm, ys, n_max);
        for (int64_t e = 0; e < n_max; e++) {
            const double f = (double)mu[e] + (with_m ? (double)m[e] : 0.0);
            const double ref = (double)a[e] + ((double)p[e] - (double)a[e]) * f;
            const double scale = fabs((double)a[e]) + fabs((double)p[e] - (double)a[e]) * fabs(f);
            ck_assert_msg(fabs((double)ys[e] - ref) <= 1e-6 * scale, "lerp at %lld: %.9g, expected %.9g",
                          (long long)e, (double)ys[e], ref);
        }
        for (int pth = 0; pth < KERNEL_PATH_COUNT; pth++) {
            const struct wkv_kernels *k = path_kernels(pth);
            if (!k) continue;
            for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
                const int64_t n = lens[l], off = (int64_t)l % 3;
                sc->lerp(a + off, p + off, mu + off, mm ? mm + off : NULL, ys, n);
                k->lerp(a + off, p + off, mu + off, mm ? mm + off : NULL, y, n);
                ck_assert_msg(memcmp(y, ys, (size_t)n * sizeof(float)) == 0, "%s lerp differs from the twin, n %lld",
                              k->name, (long long)n);
                float *in_place = test_malloc((size_t)n * sizeof(float));
                memcpy(in_place, a + off, (size_t)n * sizeof(float));
                k->lerp(in_place, p + off, mu + off, mm ? mm + off : NULL, in_place, n);
                ck_assert_msg(memcmp(in_place, ys, (size_t)n * sizeof(float)) == 0, "%s lerp in place differs",
                              k->name);
                free(in_place);
            }
        }
    }
    for (int i = 0; i < 6; i++) free(buf[i]);
}
END_TEST

static Suite *wkv_suite(void)
{
    Suite *s = suite_create("wkv");
    TCase *tc = tcase_create("wkv");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_chunked_equals_recurrence, 0, 3);
    tcase_add_test(tc, test_injected_bugs_are_caught);
    tcase_add_loop_test(tc, test_column_blocks, 0, 2);
    tcase_add_test(tc, test_paths_against_scalar);
    tcase_add_test(tc, test_recurrent_paths_bit_exact);
    tcase_add_test(tc, test_maps);
    tcase_add_test(tc, test_lerp);
    tcase_add_loop_test(tc, test_backend_batch, 0, 4);
    tcase_add_loop_test(tc, test_decode_after_chunked_prefill, 0, 2);
    tcase_add_test(tc, test_rewind_rules);
    tcase_add_test(tc, test_inconsistent_files_refused);
    tcase_add_test(tc, test_offload_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return test_run_suite(wkv_suite());
}

/*
 * test-delta.c -- the gated delta rule (simd/delta.h).
 *
 * - Chunk-parallel prefill equals the recurrence: outputs and final
 *   states, chunked with C = 1, 2, 3, 16, 63, 64, 65, 128 and the whole
 *   prompt (ragged last chunks), within 1e-5 (relative to the largest
 *   value) of a double-precision token-by-token reference, for zero and
 *   non-zero incoming states, weak decays, strong ones, and a mix with
 *   decays that round to 1 and ones that underflow to 0 (log-decay
 *   -inf), at head sizes 128 x 128 and ragged 40 x 24.  The float
 *   token-by-token kernel meets the same bound.
 * - Each vector path (AVX2, also the AVX-512 paths') gives its scalar
 *   twin's results bit for bit, token by token and chunked, at ragged head
 *   sizes.
 * - Blocks of value rows computed apart equal the whole head, bit for
 *   bit; a prompt taken in two calls (the second continuing from the
 *   state the first left) equals it taken in one.
 * - The checks are shown to guard what they claim: with the test-only
 *   switch delta_inject_bug set to drop the incoming-state term, or to
 *   let a token read the next token of its chunk, the same checks fail.
 * - The backend's operations over a batch of sequences of different
 *   lengths (state slots in another order; one continuing from an earlier
 *   batch, one starting at position 0): the causal convolution against a
 *   direct sum over each sequence's saved and new rows, its saved rows
 *   afterwards, and the gated delta rule (value heads reading key heads
 *   h mod n_k, the L2 norms and the gates) against the double-precision
 *   recurrence per sequence and head, chunked and token by token.
 */
#include "internal.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "kernels.h"
#include "delta.h"
#include "rstate.h"
#include "testutil.h"

#define TOL 1e-5

enum decay_kind { DECAY_WEAK, DECAY_STRONG, DECAY_EXTREME, DECAY_COUNT };

/* One head's problem: n tokens of q, k (unit length, q scaled by
 * 1/sqrt(dk) as the layer does), v, g, b, and the incoming state S0. */
struct problem {
    int64_t n;
    int32_t dk, dv;
    float *q, *k, *v, *g, *b, *S0;
};

static void unit(float *x, int32_t n, float scale)
{
    double ss = 0.0;
    for (int32_t j = 0; j < n; j++) ss += (double)x[j] * x[j];
    const double inv = ss > 0.0 ? scale / sqrt(ss) : 0.0;
    for (int32_t j = 0; j < n; j++) x[j] = (float)(x[j] * inv);
}

static void problem_make(struct problem *p, int64_t n, int32_t dk, int32_t dv, enum decay_kind decay, bool state,
                         uint64_t seed)
{
    test_rng rng;
    test_rng_seed(&rng, seed);
    p->n = n;
    p->dk = dk;
    p->dv = dv;
    p->q = test_malloc((size_t)n * dk * sizeof(float));
    p->k = test_malloc((size_t)n * dk * sizeof(float));
    p->v = test_malloc((size_t)n * dv * sizeof(float));
    p->g = test_malloc((size_t)n * sizeof(float));
    p->b = test_malloc((size_t)n * sizeof(float));
    p->S0 = test_malloc((size_t)dv * dk * sizeof(float));
    for (int64_t t = 0; t < n; t++) {
        for (int32_t j = 0; j < dk; j++) {
            p->q[t * dk + j] = (float)test_rng_normal(&rng);
            p->k[t * dk + j] = (float)test_rng_normal(&rng);
        }
        unit(p->q + t * dk, dk, 1.0f / sqrtf((float)dk));
        unit(p->k + t * dk, dk, 1.0f);
        for (int32_t i = 0; i < dv; i++) p->v[t * dv + i] = (float)test_rng_normal(&rng);
        double g;
        switch (decay) {
        case DECAY_WEAK: g = -0.002 * test_rng_uniform(&rng); break; /* a ~ 0.999 */
        case DECAY_STRONG: g = -1.0 - 9.0 * test_rng_uniform(&rng); break;
        default: {
            /* decays that round to 1, ordinary ones, ones that underflow
             * to 0, and the log-decay -inf itself */
            const double x = test_rng_uniform(&rng);
            g = x < 0.25 ? -1e-9 : x < 0.6 ? -test_rng_uniform(&rng) : x < 0.85 ? -150.0 : -INFINITY;
            break;
        }
        }
        p->g[t] = (float)g;
        p->b[t] = (float)test_rng_uniform(&rng);
    }
    for (size_t i = 0; i < (size_t)dv * dk; i++) p->S0[i] = state ? (float)test_rng_normal(&rng) : 0.0f;
}

static void problem_free(struct problem *p)
{
    free(p->q);
    free(p->k);
    free(p->v);
    free(p->g);
    free(p->b);
    free(p->S0);
}

/* The recurrence in double precision, token by token (delta.h). */
static void reference(const struct problem *p, double *o, double *S)
{
    const int32_t dk = p->dk, dv = p->dv;
    for (size_t i = 0; i < (size_t)dv * dk; i++) S[i] = p->S0[i];
    for (int64_t t = 0; t < p->n; t++) {
        const float *q = p->q + t * dk, *k = p->k + t * dk, *v = p->v + t * dv;
        const double a = exp(p->g[t] < DELTA_LOG_DECAY_MIN ? DELTA_LOG_DECAY_MIN : (double)p->g[t]);
        for (int32_t i = 0; i < dv; i++) {
            double *s = S + (size_t)i * dk, sk = 0.0, sq = 0.0;
            for (int32_t j = 0; j < dk; j++) sk += s[j] * k[j];
            const double u = p->b[t] * (v[i] - a * sk);
            for (int32_t j = 0; j < dk; j++) {
                s[j] = a * s[j] + u * k[j];
                sq += s[j] * q[j];
            }
            o[t * dv + i] = sq;
        }
    }
}

static struct delta_head head_of(const struct problem *p, float *o, float *S, int32_t i0, int32_t i1)
{
    return (struct delta_head){
        .n = p->n, .dk = p->dk, .dv = p->dv,
        .q = p->q, .k = p->k, .v = p->v, .g = p->g, .b = p->b,
        .q_stride = p->dk, .k_stride = p->dk, .v_stride = p->dv, .g_stride = 1, .b_stride = 1,
        .o = o, .o_stride = p->dv, .S = S, .i0 = i0, .i1 = i1,
    };
}

/* Run chunk size C (0: the token-by-token kernel) over p; the worst error
 * of outputs and final state relative to the largest reference value. */
static double run_error(const struct delta_kernels *kern, const struct problem *p, int32_t C)
{
    const size_t no = (size_t)p->n * p->dv, ns = (size_t)p->dv * p->dk;
    double *ro = test_malloc(no * sizeof *ro), *rS = test_malloc(ns * sizeof *rS);
    float *o = test_malloc(no * sizeof *o), *S = test_malloc(ns * sizeof *S);
    reference(p, ro, rS);
    memcpy(S, p->S0, ns * sizeof *S);
    struct delta_head h = head_of(p, o, S, 0, p->dv);
    if (C == 0) {
        kern->recurrent(&h);
    } else {
        void *scratch = aligned_alloc(64, delta_chunk_scratch_bytes(C, p->dk, p->dv));
        ck_assert_ptr_nonnull(scratch);
        kern->chunked(&h, C, scratch);
        free(scratch);
    }
    double big_o = 0.0, big_s = 0.0, err_o = 0.0, err_s = 0.0;
    for (size_t i = 0; i < no; i++) {
        big_o = fmax(big_o, fabs(ro[i]));
        err_o = fmax(err_o, isfinite(o[i]) ? fabs(o[i] - ro[i]) : INFINITY);
    }
    for (size_t i = 0; i < ns; i++) {
        big_s = fmax(big_s, fabs(rS[i]));
        err_s = fmax(err_s, isfinite(S[i]) ? fabs(S[i] - rS[i]) : INFINITY);
    }
    free(ro);
    free(rS);
    free(o);
    free(S);
    return fmax(err_o / fmax(big_o, 1e-30), err_s / fmax(big_s, 1e-30));
}

/* The worst error over decays and incoming states at chunk size C. */
static double worst_error(const struct delta_kernels *kern, int32_t C, int64_t n, int32_t dk, int32_t dv)
{
    double worst = 0.0;
    for (int d = 0; d < DECAY_COUNT; d++)
        for (int state = 0; state < 2; state++) {
            struct problem p;
            problem_make(&p, n, dk, dv, (enum decay_kind)d, state, 1000u * (unsigned)d + (unsigned)state + 7u);
            worst = fmax(worst, run_error(kern, &p, C == -1 ? (int32_t)n : C));
            problem_free(&p);
        }
    return worst;
}

static const struct delta_kernels *path_kernels(int p)
{
    const hearth_kernels *t = kernel_path_table((kernel_path)p, NULL);
    if (!t) return NULL;
    return p == KERNEL_PATH_SCALAR ? delta_kernels_scalar() : delta_kernels_matching(t);
}

START_TEST(test_chunked_equals_recurrence)
{
    static const int32_t sizes[] = {0, 1, 2, 3, 16, 63, 64, 65, 128, -1};
    for (int path = 0; path < KERNEL_PATH_COUNT; path++) {
        const struct delta_kernels *k = path_kernels(path);
        if (!k) continue;
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            const double e1 = worst_error(k, sizes[i], 150, 40, 24);
            ck_assert_msg(e1 <= TOL, "%s, C = %d, 40 x 24 heads: error %.3g", k->name, sizes[i], e1);
            const double e2 = worst_error(k, sizes[i], 70, 128, 128);
            ck_assert_msg(e2 <= TOL, "%s, C = %d, 128 x 128 heads: error %.3g", k->name, sizes[i], e2);
        }
    }
}
END_TEST

/* Every path computes the scalar twin's arithmetic in the same order. */
START_TEST(test_paths_bit_exact)
{
    static const int32_t dims[][2] = {{40, 24}, {128, 128}, {17, 33}};
    for (int path = 0; path < KERNEL_PATH_COUNT; path++) {
        const struct delta_kernels *k = path_kernels(path), *s = delta_kernels_scalar();
        if (!k || k == s) continue;
        for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
            for (int C = 0; C <= 16; C += 16) {
                struct problem p;
                problem_make(&p, 45, dims[d][0], dims[d][1], DECAY_EXTREME, true, 77 + d);
                const size_t no = (size_t)p.n * p.dv, ns = (size_t)p.dv * p.dk;
                float *o[2], *S[2];
                const struct delta_kernels *both[2] = {s, k};
                void *scratch = aligned_alloc(64, delta_chunk_scratch_bytes(16, p.dk, p.dv));
                ck_assert_ptr_nonnull(scratch);
                for (int w = 0; w < 2; w++) {
                    o[w] = test_malloc(no * sizeof(float));
                    S[w] = test_malloc(ns * sizeof(float));
                    memcpy(S[w], p.S0, ns * sizeof(float));
                    struct delta_head h = head_of(&p, o[w], S[w], 0, p.dv);
                    if (C) both[w]->chunked(&h, C, scratch);
                    else both[w]->recurrent(&h);
                }
                ck_assert_msg(memcmp(o[0], o[1], no * sizeof(float)) == 0, "%s, %d x %d, C %d: outputs", k->name,
                              p.dk, p.dv, C);
                ck_assert_msg(memcmp(S[0], S[1], ns * sizeof(float)) == 0, "%s: states", k->name);
                for (int w = 0; w < 2; w++) {
                    free(o[w]);
                    free(S[w]);
                }
                free(scratch);
                problem_free(&p);
            }
    }
}
END_TEST

/* Value rows taken in blocks equal the whole head, and a prompt in two
 * calls equals it in one, bit for bit. */
START_TEST(test_rows_and_calls_compose)
{
    const struct delta_kernels *k = delta_kernels_scalar();
    struct problem p;
    problem_make(&p, 97, 40, 24, DECAY_STRONG, true, 99);
    const size_t no = (size_t)p.n * p.dv, ns = (size_t)p.dv * p.dk;
    float *o1 = test_malloc(no * sizeof(float)), *o2 = test_malloc(no * sizeof(float));
    float *S1 = test_malloc(ns * sizeof(float)), *S2 = test_malloc(ns * sizeof(float));
    void *scratch = aligned_alloc(64, delta_chunk_scratch_bytes(16, p.dk, p.dv));
    ck_assert_ptr_nonnull(scratch);
    for (int chunked = 0; chunked < 2; chunked++) {
        memcpy(S1, p.S0, ns * sizeof(float));
        memcpy(S2, p.S0, ns * sizeof(float));
        struct delta_head whole = head_of(&p, o1, S1, 0, p.dv);
        if (chunked) k->chunked(&whole, 16, scratch);
        else k->recurrent(&whole);
        static const int32_t cuts[] = {0, 5, 13, 24};
        for (int b = 0; b < 3; b++) {
            struct delta_head part = head_of(&p, o2, S2, cuts[b], cuts[b + 1]);
            if (chunked) k->chunked(&part, 16, scratch);
            else k->recurrent(&part);
        }
        ck_assert(memcmp(o1, o2, no * sizeof(float)) == 0);
        ck_assert(memcmp(S1, S2, ns * sizeof(float)) == 0);
        /* 32 tokens, then the rest from the state they left: the chunks
         * fall at the same places */
        memcpy(S2, p.S0, ns * sizeof(float));
        struct delta_head first = head_of(&p, o2, S2, 0, p.dv);
        first.n = 32;
        struct delta_head rest = first;
        rest.n = p.n - 32;
        rest.q += 32 * p.dk;
        rest.k += 32 * p.dk;
        rest.v += 32 * p.dv;
        rest.g += 32;
        rest.b += 32;
        rest.o += 32 * p.dv;
        if (chunked) {
            k->chunked(&first, 16, scratch);
            k->chunked(&rest, 16, scratch);
        } else {
            k->recurrent(&first);
            k->recurrent(&rest);
        }
        ck_assert(memcmp(o1, o2, no * sizeof(float)) == 0);
        ck_assert(memcmp(S1, S2, ns * sizeof(float)) == 0);
    }
    free(scratch);
    free(o1);
    free(o2);
    free(S1);
    free(S2);
    problem_free(&p);
}
END_TEST

START_TEST(test_injected_bugs_are_caught)
{
    const struct delta_kernels *k = delta_kernels_scalar();
    for (int bug = 1; bug <= 2; bug++) {
        delta_inject_bug = bug;
        const double e = worst_error(k, 16, 150, 40, 24);
        delta_inject_bug = 0;
        ck_assert_msg(e > 100 * TOL, "bug %d injected: the check still passes (worst error %.3g)", bug, e);
    }
    ck_assert_double_le(worst_error(k, 16, 150, 40, 24), TOL);
}
END_TEST

/* ---- the backend's operations ---------------------------------------------------- */

enum { NK = 2, NV = 4, D = 8, KT = 4, NSEQ = 4 };
static const int32_t lens[NSEQ] = {37, 1, 70, 2};
static const int32_t slots[NSEQ] = {2, 0, 3, 1};
static const int32_t start_pos[NSEQ] = {0, 9, 0, 130};

struct batch {
    int32_t seq_start[NSEQ + 1], n, *pos;
    struct batch_pos bp;
};

static void batch_make(struct batch *b)
{
    b->seq_start[0] = 0;
    for (int s = 0; s < NSEQ; s++) b->seq_start[s + 1] = b->seq_start[s] + lens[s];
    b->n = b->seq_start[NSEQ];
    b->pos = test_malloc((size_t)b->n * sizeof(int32_t));
    for (int s = 0; s < NSEQ; s++)
        for (int t = 0; t < lens[s]; t++) b->pos[b->seq_start[s] + t] = start_pos[s] + t;
    b->bp = (struct batch_pos){.pos = b->pos, .n_tokens = b->n, .n_seqs = NSEQ, .seq_start = b->seq_start,
                               .state_slot = slots};
}

START_TEST(test_backend_conv)
{
    const int64_t C = 24;
    struct batch b;
    batch_make(&b);
    struct hearth_backend *be;
    ck_assert_int_eq(backend_cpu_new(3, &be), HEARTH_OK);
    struct act x, out;
    ck_assert_int_eq(be->ops->act_alloc(be, &x, b.n, C), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &out, b.n, C), HEARTH_OK);
    struct rstate *rs;
    const size_t offset = 5; /* something before the saved rows */
    ck_assert_int_eq(rstate_new(4, 1, offset + (KT - 1) * C + 3, NULL, &rs), HEARTH_OK);
    test_rng rng;
    test_rng_seed(&rng, 11);
    float w[24 * KT];
    for (int i = 0; i < 24 * KT; i++) w[i] = (float)test_rng_normal(&rng);
    for (int64_t i = 0; i < b.n * C; i++) x.host[i] = (float)test_rng_normal(&rng);
    for (size_t i = 0; i < rs->layer_floats * 4; i++) rs->data[i] = (float)test_rng_normal(&rng);
    float *before = test_malloc(rs->layer_floats * 4 * sizeof(float));
    memcpy(before, rs->data, rs->layer_floats * 4 * sizeof(float));
    for (int silu = 0; silu < 2; silu++) {
        memcpy(rs->data, before, rs->layer_floats * 4 * sizeof(float));
        ck_assert_int_eq(be->ops->conv_causal(be, &out, &x, w, KT, silu, rs, 0, offset, &b.bp), HEARTH_OK);
        for (int s = 0; s < NSEQ; s++) {
            const float *saved = before + rs->layer_floats * (size_t)slots[s] + offset;
            /* the window's rows: KT - 1 saved (zeros at position 0), then the batch's */
            const int32_t n_all = KT - 1 + lens[s];
            double *all = test_malloc((size_t)n_all * C * sizeof(double));
            for (int i = 0; i < KT - 1; i++)
                for (int64_t c = 0; c < C; c++) all[i * C + c] = start_pos[s] == 0 ? 0.0 : saved[i * C + c];
            for (int t = 0; t < lens[s]; t++)
                for (int64_t c = 0; c < C; c++) all[(KT - 1 + t) * C + c] = x.host[(b.seq_start[s] + t) * C + c];
            for (int t = 0; t < lens[s]; t++)
                for (int64_t c = 0; c < C; c++) {
                    double acc = 0.0;
                    for (int k = 0; k < KT; k++) acc += (double)w[c * KT + k] * all[(t + k) * C + c];
                    if (silu) acc = acc / (1.0 + exp(-acc));
                    const float got = out.host[(b.seq_start[s] + t) * C + c];
                    ck_assert_msg(fabs(got - acc) <= 1e-5 * (1.0 + fabs(acc)), "seq %d row %d ch %lld: %g, want %g",
                                  s, t, (long long)c, (double)got, acc);
                }
            const float *after = rstate_layer(rs, slots[s], 0) + offset;
            for (int i = 0; i < KT - 1; i++)
                for (int64_t c = 0; c < C; c++)
                    ck_assert_float_eq(after[i * C + c], (float)all[(lens[s] + i) * C + c]);
            /* the floats around the saved rows are not touched */
            ck_assert_mem_eq(rstate_layer(rs, slots[s], 0), before + rs->layer_floats * (size_t)slots[s],
                             offset * sizeof(float));
            ck_assert_mem_eq(after + (KT - 1) * C, saved + (KT - 1) * C, 3 * sizeof(float));
            free(all);
        }
    }
    free(before);
    free(b.pos);
    rstate_free(rs);
    be->ops->act_free(be, &x);
    be->ops->act_free(be, &out);
    backend_cpu_free(be);
}
END_TEST

START_TEST(test_backend_gated_delta)
{
    const int32_t chunk = (_i & 1) ? 1 : 16;
    const int64_t key_dim = NK * D, width = 2 * key_dim + NV * D;
    struct batch b;
    batch_make(&b);
    struct hearth_backend *be;
    ck_assert_int_eq(backend_cpu_new(3, &be), HEARTH_OK);
    struct act qkv, beta, alpha, out;
    ck_assert_int_eq(be->ops->act_alloc(be, &qkv, b.n, width), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &beta, b.n, NV), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &alpha, b.n, NV), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &out, b.n, NV * D), HEARTH_OK);
    test_rng rng;
    test_rng_seed(&rng, 13);
    for (int64_t i = 0; i < b.n * width; i++) qkv.host[i] = (float)test_rng_normal(&rng);
    for (int64_t i = 0; i < b.n * NV; i++) {
        beta.host[i] = (float)(2.0 * test_rng_normal(&rng));
        alpha.host[i] = (float)(2.0 * test_rng_normal(&rng));
    }
    float dt_bias[NV], a[NV];
    for (int h = 0; h < NV; h++) {
        dt_bias[h] = (float)test_rng_normal(&rng);
        a[h] = -expf((float)test_rng_normal(&rng));
    }
    const size_t offset = 9;
    struct rstate *rs;
    ck_assert_int_eq(rstate_new(4, 1, offset + NV * D * D, NULL, &rs), HEARTH_OK);
    for (size_t i = 0; i < rs->layer_floats * 4; i++) rs->data[i] = (float)(0.3 * test_rng_normal(&rng));
    float *before = test_malloc(rs->layer_floats * 4 * sizeof(float));
    memcpy(before, rs->data, rs->layer_floats * 4 * sizeof(float));
    const float eps = 1e-6f;
    const struct deltanet_params p = {.n_k_heads = NK, .n_v_heads = NV, .head_dim = D, .dt_bias = dt_bias, .a = a,
                                      .eps = eps, .state_offset = offset};
    ck_assert_int_eq(be->ops->gated_delta(be, &out, &qkv, &beta, &alpha, &p, rs, 0, chunk, &b.bp), HEARTH_OK);
    for (int s = 0; s < NSEQ; s++)
        for (int h = 0; h < NV; h++) {
            const int kh = h % NK;
            double S[D * D];
            const float *S0 = before + rs->layer_floats * (size_t)slots[s] + offset + (size_t)h * D * D;
            for (int i = 0; i < D * D; i++) S[i] = start_pos[s] == 0 ? 0.0 : S0[i];
            double err = 0.0, big = 0.0;
            for (int t = 0; t < lens[s]; t++) {
                const int64_t row = b.seq_start[s] + t;
                const float *x = qkv.host + row * width;
                double q[D], k[D], nq = 0.0, nk = 0.0;
                for (int j = 0; j < D; j++) {
                    q[j] = x[kh * D + j];
                    k[j] = x[key_dim + kh * D + j];
                    nq += q[j] * q[j];
                    nk += k[j] * k[j];
                }
                nq = fmax(sqrt(nq), eps) * sqrt((double)D);
                nk = fmax(sqrt(nk), eps);
                for (int j = 0; j < D; j++) q[j] /= nq, k[j] /= nk;
                const double bt = 1.0 / (1.0 + exp(-(double)beta.host[row * NV + h]));
                const double z = (double)alpha.host[row * NV + h] + dt_bias[h];
                const double g = (z > 20.0 ? z : log1p(exp(z))) * a[h];
                const double decay = exp(g);
                for (int i = 0; i < D; i++) {
                    double *Si = S + i * D, sk = 0.0, o = 0.0;
                    for (int j = 0; j < D; j++) sk += Si[j] * k[j];
                    const double u = bt * (x[2 * key_dim + h * D + i] - decay * sk);
                    for (int j = 0; j < D; j++) {
                        Si[j] = decay * Si[j] + u * k[j];
                        o += Si[j] * q[j];
                    }
                    err = fmax(err, fabs(out.host[row * NV * D + h * D + i] - o));
                    big = fmax(big, fabs(o));
                }
            }
            ck_assert_msg(err <= TOL * fmax(big, 1.0), "seq %d head %d: error %.3g of %.3g", s, h, err, big);
            const float *Sg = rstate_layer(rs, slots[s], 0) + offset + (size_t)h * D * D;
            for (int i = 0; i < D * D; i++) ck_assert_msg(fabs(Sg[i] - S[i]) <= TOL * (1.0 + fabs(S[i])), "state");
        }
    for (int s = 0; s < 4; s++)
        ck_assert_mem_eq(rstate_layer(rs, s, 0), before + rs->layer_floats * (size_t)s, offset * sizeof(float));
    free(before);
    free(b.pos);
    rstate_free(rs);
    struct act *acts[] = {&qkv, &beta, &alpha, &out};
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(acts); i++) be->ops->act_free(be, acts[i]);
    backend_cpu_free(be);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("delta");
    TCase *tc = tcase_create("delta");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_chunked_equals_recurrence);
    tcase_add_test(tc, test_paths_bit_exact);
    tcase_add_test(tc, test_rows_and_calls_compose);
    tcase_add_test(tc, test_injected_bugs_are_caught);
    tcase_add_test(tc, test_backend_conv);
    tcase_add_loop_test(tc, test_backend_gated_delta, 0, 2);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}

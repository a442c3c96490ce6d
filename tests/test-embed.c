/*
 * test-embed.c -- embeddings: the pooling and the unit-length scaling
 * against a plain reference on random rows of ragged widths; embedding
 * requests in the serving engine give the same vector bit for bit alone
 * and beside other embeddings and generating requests, whatever the
 * step's budget, the prompt's chunks, the prefix cache and preemption;
 * the vector is the raw one scaled to unit length; mean, CLS and last
 * pooling of one position agree; requests that cannot be embeddings are
 * refused.  (That the vector is the model's pooled hidden state is
 * tests/cli-embed.sh's oracle check.)
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "pooling.h"
#include "engine_drain.h"
#include "testutil.h"

/* ---- pooling against a reference ------------------------------------------------- */

/* The reference: the mean (or the one row) in long double, then divided
 * by its Euclidean length. */
static void reference_pool(hearth_pooling pooling, const float *rows, int32_t n_rows, int64_t n, bool normalize,
                           long double *out)
{
    for (int64_t i = 0; i < n; i++) {
        long double s = 0;
        if (pooling == HEARTH_POOLING_MEAN) {
            for (int32_t r = 0; r < n_rows; r++) s += rows[(size_t)r * (size_t)n + (size_t)i];
            s /= n_rows;
        } else {
            s = rows[(size_t)(pooling == HEARTH_POOLING_CLS ? 0 : n_rows - 1) * (size_t)n + (size_t)i];
        }
        out[i] = s;
    }
    if (!normalize) return;
    long double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += out[i] * out[i];
    if (ss > 0)
        for (int64_t i = 0; i < n; i++) out[i] /= sqrtl(ss);
}

START_TEST(test_pooling_reference)
{
    test_rng rng;
    test_rng_seed(&rng, 42);
    static const int64_t widths[] = {1, 3, 7, 64, 255, 1024, 1031};
    static const int32_t counts[] = {1, 2, 5, 33};
    static const hearth_pooling kinds[] = {HEARTH_POOLING_MEAN, HEARTH_POOLING_CLS, HEARTH_POOLING_LAST};
    for (size_t wi = 0; wi < HEARTH_ARRAY_LEN(widths); wi++)
        for (size_t ci = 0; ci < HEARTH_ARRAY_LEN(counts); ci++)
            for (size_t ki = 0; ki < HEARTH_ARRAY_LEN(kinds); ki++)
                for (int norm = 0; norm < 2; norm++) {
                    const int64_t n = widths[wi];
                    const int32_t n_rows = counts[ci];
                    const hearth_pooling kind = kinds[ki];
                    float *rows = malloc((size_t)n_rows * (size_t)n * sizeof *rows);
                    double *sum = calloc((size_t)n, sizeof *sum);
                    float *got = malloc((size_t)n * sizeof *got);
                    long double *want = malloc((size_t)n * sizeof *want);
                    ck_assert(rows && sum && got && want);
                    for (int64_t i = 0; i < n_rows * n; i++) rows[i] = (float)(test_rng_normal(&rng) * 3.0 + 0.5);
                    /* the rows the pooling reads, in position order */
                    int32_t added = 0;
                    for (int32_t r = 0; r < n_rows; r++)
                        if (pooling_wants(kind, r, n_rows)) {
                            pooling_add_row(sum, rows + (size_t)r * (size_t)n, n);
                            added++;
                        }
                    ck_assert_int_eq(added, kind == HEARTH_POOLING_MEAN ? n_rows : 1);
                    pooling_finish(kind, sum, added, norm, got, n);
                    reference_pool(kind, rows, n_rows, n, norm, want);
                    double worst = 0, len2 = 0;
                    for (int64_t i = 0; i < n; i++) {
                        const double scale = norm ? 1.0 : fmax(1.0, fabs((double)want[i]));
                        worst = fmax(worst, fabs((double)got[i] - (double)want[i]) / scale);
                        len2 += (double)got[i] * got[i];
                    }
                    /* one rounding to float of an exactly computed value */
                    ck_assert_msg(worst <= 1.2e-7 * (norm ? 1.0 : 4.0), "%s pooling of %d rows of %lld%s: error %g",
                                  hearth_pooling_name(kind), n_rows, (long long)n, norm ? ", normalized" : "",
                                  worst);
                    if (norm) ck_assert_msg(fabs(len2 - 1.0) < 1e-5, "length^2 %g", len2);
                    /* the public scaling agrees with the pooling's own */
                    if (!norm) {
                        hearth_embedding_normalize(got, (size_t)n);
                        float *again = malloc((size_t)n * sizeof *again);
                        ck_assert_ptr_nonnull(again);
                        pooling_finish(kind, sum, added, true, again, n);
                        for (int64_t i = 0; i < n; i++)
                            ck_assert_msg(fabs(got[i] - again[i]) <= 2.4e-7, "normalize: %g vs %g at %lld",
                                          (double)got[i], (double)again[i], (long long)i);
                        free(again);
                    }
                    free(rows);
                    free(sum);
                    free(got);
                    free(want);
                }
    /* zeros stay zeros */
    float z[5] = {0};
    hearth_embedding_normalize(z, 5);
    for (int i = 0; i < 5; i++) ck_assert(z[i] == 0.0f);
    double zs[5] = {0};
    pooling_finish(HEARTH_POOLING_MEAN, zs, 3, true, z, 5);
    for (int i = 0; i < 5; i++) ck_assert(z[i] == 0.0f);
    ck_assert_str_eq(hearth_pooling_name(HEARTH_POOLING_LAST), "last");
    ck_assert_ptr_null(hearth_pooling_name((hearth_pooling)9));
}
END_TEST

/* ---- the engine ------------------------------------------------------------------- */

#define MAX_EMBD 1024

struct vec_out {
    float v[MAX_EMBD];
    int32_t n;
    bool got;
    hearth_finish_reason finish;
    int32_t n_generated;
};

static void on_event(void *user, const hearth_event *ev)
{
    struct vec_out *o = user;
    if (ev->finish == HEARTH_FINISH_NONE) {
        ck_assert_ptr_null(ev->embedding);
        o->n_generated++;
        return;
    }
    ck_assert_int_eq(o->finish, HEARTH_FINISH_NONE);
    o->finish = ev->finish;
    if (ev->embedding) {
        memcpy(o->v, ev->embedding, (size_t)o->n * sizeof(float));
        o->got = true;
    }
}

static hearth_engine *new_engine(const hearth_model *m, int32_t n_batch, int64_t kv_tokens, bool prefix)
{
    hearth_engine_params p;
    hearth_engine_default_params(&p);
    p.n_ctx = 512;
    p.n_batch = n_batch;
    p.kv_tokens = kv_tokens;
    p.block_tokens = 16;
    p.n_threads = 2;
    p.no_prefix_cache = !prefix;
    hearth_engine *e;
    hearth_status st = hearth_engine_new(m, &p, &e);
    ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
    return e;
}

static void make_prompt(const hearth_model *m, uint64_t seed, int32_t *tokens, int32_t len)
{
    test_rng rng;
    test_rng_seed(&rng, seed);
    const int32_t V = hearth_model_n_vocab(m);
    tokens[0] = 1;
    /* the first 20 tokens are shared, so the prefix cache has something */
    for (int32_t i = 1; i < len; i++) {
        if (i == 20) test_rng_seed(&rng, seed + 1000);
        tokens[i] = (int32_t)(3 + test_rng_next(&rng) % (uint64_t)(V - 3));
    }
}

static void submit(hearth_engine *e, const int32_t *prompt, int32_t n, hearth_pooling pooling, bool raw,
                   int32_t max_tokens, struct vec_out *o)
{
    hearth_request r;
    hearth_request_default(&r);
    r.prompt = prompt;
    r.n_prompt = (size_t)n;
    r.pooling = pooling;
    r.no_normalize = raw;
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    r.on_event = on_event;
    r.user = o;
    hearth_status st = hearth_engine_submit(e, &r, NULL);
    ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
}

static void run_checked(hearth_engine *e)
{
    test_engine_drain(e, 100000);
}

#define N_EMB 6
static const int32_t emb_lens[N_EMB] = {1, 17, 40, 129, 300, 64};
static const hearth_pooling emb_pool[N_EMB] = {HEARTH_POOLING_MEAN, HEARTH_POOLING_LAST, HEARTH_POOLING_CLS,
                                               HEARTH_POOLING_MEAN, HEARTH_POOLING_LAST, HEARTH_POOLING_MEAN};

/* Each embedding alone, then all of them at once beside generating
 * requests, with step budgets that cut the prompts into chunks, and the
 * prefix cache warm in a second round: the same vectors bit for bit. */
static void check_invariance(const char *model)
{
    hearth_model *m = test_load_model(model);
    const int32_t E = hearth_model_n_embd(m);
    ck_assert_int_le(E, MAX_EMBD);
    static int32_t prompts[N_EMB][320];
    for (int i = 0; i < N_EMB; i++) make_prompt(m, 70 + (uint64_t)i, prompts[i], emb_lens[i]);
    static struct vec_out alone[N_EMB], raw[N_EMB], together[N_EMB], gen[3];

    hearth_engine *e = new_engine(m, 512, 2048, false);
    for (int i = 0; i < N_EMB; i++) {
        alone[i] = (struct vec_out){.n = E};
        raw[i] = (struct vec_out){.n = E};
        submit(e, prompts[i], emb_lens[i], emb_pool[i], false, -1, &alone[i]);
        run_checked(e);
        submit(e, prompts[i], emb_lens[i], emb_pool[i], true, -1, &raw[i]);
        run_checked(e);
        ck_assert(alone[i].got && raw[i].got);
        ck_assert_int_eq(alone[i].finish, HEARTH_FINISH_LENGTH);
        ck_assert_int_eq(alone[i].n_generated, 0);
        /* unit length, and the raw vector's direction */
        double l2 = 0, r2 = 0;
        for (int32_t k = 0; k < E; k++) l2 += (double)alone[i].v[k] * alone[i].v[k];
        for (int32_t k = 0; k < E; k++) r2 += (double)raw[i].v[k] * raw[i].v[k];
        ck_assert_msg(fabs(l2 - 1.0) < 1e-5, "%s request %d: length^2 %g", model, i, l2);
        ck_assert(r2 > 0);
        for (int32_t k = 0; k < E; k++)
            ck_assert_msg(fabs(alone[i].v[k] - raw[i].v[k] / sqrt(r2)) < 1e-6, "%s request %d: normalized", model, i);
    }
    /* mean pooling of one position is that position's CLS and last pooling */
    {
        struct vec_out c = {.n = E}, l = {.n = E};
        submit(e, prompts[0], 1, HEARTH_POOLING_CLS, false, -1, &c);
        submit(e, prompts[0], 1, HEARTH_POOLING_LAST, false, -1, &l);
        run_checked(e);
        ck_assert(memcmp(c.v, alone[0].v, (size_t)E * sizeof(float)) == 0);
        ck_assert(memcmp(l.v, alone[0].v, (size_t)E * sizeof(float)) == 0);
    }
    hearth_engine_free(e);

    static const int32_t budgets[] = {7, 64, 512};
    static const int64_t pools[] = {2048, 2048, 2048};
    for (size_t bi = 0; bi < HEARTH_ARRAY_LEN(budgets); bi++) {
        e = new_engine(m, budgets[bi], pools[bi], true);
        for (int round = 0; round < 2; round++) {
            int32_t gen_prompt[24];
            make_prompt(m, 5, gen_prompt, 24);
            for (int g = 0; g < 3; g++) {
                gen[g] = (struct vec_out){.n = E};
                submit(e, gen_prompt, 10 + 7 * g, HEARTH_POOLING_NONE, false, 9, &gen[g]);
            }
            for (int i = 0; i < N_EMB; i++) {
                together[i] = (struct vec_out){.n = E};
                submit(e, prompts[i], emb_lens[i], emb_pool[i], false, -1, &together[i]);
                if (i % 2) {
                    bool w;
                    ck_assert_int_eq(hearth_engine_step(e, &w), HEARTH_OK);
                }
            }
            run_checked(e);
            for (int g = 0; g < 3; g++) {
                ck_assert_int_eq(gen[g].n_generated, 9);
                ck_assert(!gen[g].got);
            }
            for (int i = 0; i < N_EMB; i++) {
                ck_assert_msg(together[i].got, "%s budget %d round %d request %d: no vector (%s)", model,
                              budgets[bi], round, i, hearth_finish_reason_name(together[i].finish));
                ck_assert_msg(memcmp(together[i].v, alone[i].v, (size_t)E * sizeof(float)) == 0,
                              "%s budget %d, pool %lld, round %d, request %d (%s pooling of %d): differs from alone",
                              model, budgets[bi], (long long)pools[bi], round, i, hearth_pooling_name(emb_pool[i]),
                              emb_lens[i]);
            }
        }
        hearth_engine_stats s;
        hearth_engine_get_stats(e, &s);
        ck_assert_int_eq(s.blocks_used, 0);
        hearth_engine_free(e);
    }
    hearth_model_free(m);
}

START_TEST(test_invariance_f32)
{
    check_invariance("micro-qwen2-f32.gguf");
}
END_TEST

START_TEST(test_invariance_quantized)
{
    check_invariance("micro-llama-Q4_K_M.gguf");
}
END_TEST

START_TEST(test_invariance_recurrent)
{
    check_invariance("micro-rwkv6-Q8_0.gguf");
}
END_TEST

/* An embedding in prefill preempted by decoding sequences that need its
 * blocks (a pool of 22 blocks, steps of 4 rows: three sequences decode
 * while it takes one position a step, and they need 21 blocks at their
 * end) is computed again from its start and reads each position once:
 * the vector it has alone. */
START_TEST(test_preempted)
{
    hearth_model *m = test_load_model("micro-llama-Q8_0.gguf");
    const int32_t E = hearth_model_n_embd(m);
    int32_t prompt[129], gen_prompt[8];
    make_prompt(m, 91, prompt, 129);
    make_prompt(m, 92, gen_prompt, 8);
    static const hearth_pooling kinds[] = {HEARTH_POOLING_MEAN, HEARTH_POOLING_LAST};
    for (size_t ki = 0; ki < HEARTH_ARRAY_LEN(kinds); ki++) {
        static struct vec_out alone, busy, gen[3];
        alone = (struct vec_out){.n = E};
        busy = (struct vec_out){.n = E};
        hearth_engine *e = new_engine(m, 512, 2048, false);
        submit(e, prompt, 129, kinds[ki], false, -1, &alone);
        run_checked(e);
        hearth_engine_free(e);
        e = new_engine(m, 4, 352, true);
        for (int g = 0; g < 3; g++) {
            gen[g] = (struct vec_out){.n = E};
            submit(e, gen_prompt, 8, HEARTH_POOLING_NONE, false, 100, &gen[g]);
        }
        for (int k = 0; k < 10; k++) ck_assert_int_eq(hearth_engine_step(e, NULL), HEARTH_OK);
        submit(e, prompt, 129, kinds[ki], false, -1, &busy);
        run_checked(e);
        hearth_engine_stats s;
        hearth_engine_get_stats(e, &s);
        ck_assert_msg(s.preemptions > 0, "%s pooling: nothing was preempted", hearth_pooling_name(kinds[ki]));
        ck_assert(alone.got && busy.got);
        ck_assert_msg(memcmp(alone.v, busy.v, (size_t)E * sizeof(float)) == 0,
                      "%s pooling: the preempted embedding differs from alone", hearth_pooling_name(kinds[ki]));
        for (int g = 0; g < 3; g++) ck_assert_int_eq(gen[g].n_generated, 100);
        hearth_engine_free(e);
    }
    hearth_model_free(m);
}
END_TEST

START_TEST(test_refusals)
{
    hearth_model *m = test_load_model("micro-llama-Q8_0.gguf");
    ck_assert_int_eq(hearth_model_pooling(m), HEARTH_POOLING_NONE);
    hearth_engine *e = new_engine(m, 64, 1024, true);
    int32_t prompt[8];
    make_prompt(m, 3, prompt, 8);
    hearth_request r;
    hearth_request_default(&r);
    r.prompt = prompt;
    r.n_prompt = 8;
    r.pooling = HEARTH_POOLING_RANK;
    ck_assert_int_eq(hearth_engine_submit(e, &r, NULL), HEARTH_E_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "rank pooling"));
    r.pooling = (hearth_pooling)7;
    ck_assert_int_eq(hearth_engine_submit(e, &r, NULL), HEARTH_E_INVALID);
    r.pooling = HEARTH_POOLING_MEAN;
    r.n = 2;
    ck_assert_int_eq(hearth_engine_submit(e, &r, NULL), HEARTH_E_INVALID);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "one vector"));
    /* max_tokens means nothing to an embedding: a pool that holds the
     * prompt is enough */
    r.n = 1;
    r.max_tokens = 100000;
    ck_assert_int_eq(hearth_engine_submit(e, &r, NULL), HEARTH_OK);
    run_checked(e);
    hearth_engine_free(e);
    hearth_model_free(m);
}
END_TEST

static Suite *embed_suite(void)
{
    Suite *s = suite_create("embed");
    TCase *tc = tcase_create("embed");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_pooling_reference);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_preempted);
    tcase_add_test(tc, test_invariance_f32);
    tcase_add_test(tc, test_invariance_quantized);
    tcase_add_test(tc, test_invariance_recurrent);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return test_run_suite(embed_suite());
}

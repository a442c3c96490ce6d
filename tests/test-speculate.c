/*
 * test-speculate.c -- speculative decoding in the serving engine: greedy
 * output is the same tokens and logits with and without speculation, for
 * the shared models, with draft models that are always right (the model
 * itself), mostly wrong (another random model of the same vocabulary) and
 * partly right (a quantized copy), and with prompt lookup; rejections
 * forced at every draft position leave the KV exactly as if nothing had
 * been drafted; sampled tokens have the same distribution with and
 * without speculation (a seeded chi-square test); speculative and plain
 * requests share steps; cancellation during a verification; a draft
 * whose vocabulary differs is refused naming the token; and the pieces
 * of speculate.c on their own.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "engine_impl.h"
#include "speculate.h"
#include "testutil.h"

#define MAX_OUT 160
struct out {
    int32_t tokens[MAX_OUT];
    uint64_t logits_hash[MAX_OUT];
    int32_t n;
    hearth_finish_reason finish;
    hearth_request_stats stats;
    int32_t n_vocab;
    /* cancel the request at this token (-1: never) */
    int32_t cancel_at;
    hearth_engine *engine;
    uint64_t id;
};

static void on_event(void *user, const hearth_event *ev)
{
    struct out *o = user;
    ck_assert_int_eq(o->finish, HEARTH_FINISH_NONE);
    if (ev->token >= 0 && o->n < MAX_OUT && ev->finish == HEARTH_FINISH_NONE) {
        o->tokens[o->n] = ev->token;
        o->logits_hash[o->n] = ev->logits ? test_fnv1a(ev->logits, (size_t)o->n_vocab * sizeof(float)) : 0;
        o->n++;
        if (o->n == o->cancel_at) ck_assert_int_eq(hearth_engine_cancel(o->engine, o->id), HEARTH_OK);
    }
    if (ev->finish != HEARTH_FINISH_NONE) {
        o->finish = ev->finish;
        o->stats = *ev->stats;
    }
}

/* The tests' engine parameters, which a test may change before
 * engine_from(). */
static hearth_engine_params engine_params(const hearth_model *draft, int32_t n_seq_max)
{
    hearth_engine_params p;
    hearth_engine_default_params(&p);
    p.n_ctx = 512;
    p.n_batch = 128;
    p.kv_tokens = 4096;
    p.block_tokens = 16; /* rollbacks cross block ends often */
    p.n_threads = 2;
    p.n_seq_max = n_seq_max;
    p.draft_model = draft;
    return p;
}

static hearth_engine *engine_from(const hearth_model *m, const hearth_engine_params *p)
{
    hearth_engine *e;
    hearth_status st = hearth_engine_new(m, p, &e);
    ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
    return e;
}

static hearth_engine *new_engine(const hearth_model *m, const hearth_model *draft, int32_t n_seq_max)
{
    const hearth_engine_params p = engine_params(draft, n_seq_max);
    return engine_from(m, &p);
}

static void request_init(hearth_request *r, const int32_t *prompt, int32_t n_prompt, int32_t max_tokens,
                         float temp, uint64_t seed, struct out *o)
{
    hearth_request_default(r);
    r->prompt = prompt;
    r->n_prompt = (size_t)n_prompt;
    r->max_tokens = max_tokens;
    r->sampling.temperature = temp;
    r->sampling.seed = seed;
    r->ignore_eos = true;
    r->on_event = on_event;
    r->user = o;
}

static uint64_t submit(hearth_engine *e, const hearth_request *r, struct out *o, int32_t n_vocab)
{
    memset(o, 0, sizeof *o);
    o->n_vocab = n_vocab;
    o->cancel_at = -1;
    o->engine = e;
    hearth_status st = hearth_engine_submit(e, r, &o->id);
    ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
    return o->id;
}

static void run_checked(hearth_engine *e)
{
    for (int guard = 0; guard < 1000000; guard++) {
        bool worked;
        hearth_status st = hearth_engine_step(e, &worked);
        ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
        st = engine_check(e);
        ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
        hearth_engine_stats s;
        hearth_engine_get_stats(e, &s);
        if (!worked && s.running == 0 && s.waiting == 0) {
            ck_assert_int_eq(s.blocks_used, 0);
            return;
        }
    }
    ck_abort_msg("the engine did not finish");
}

/* One greedy request alone, without drafts, in an engine of n_seq_max
 * sequences: the reference a speculative run is compared with. */
static void run_plain(hearth_model *m, const int32_t *prompt, int32_t n_prompt, int32_t max_tokens,
                      int32_t n_seq_max, struct out *o)
{
    hearth_engine *e = new_engine(m, NULL, n_seq_max);
    hearth_request r;
    request_init(&r, prompt, n_prompt, max_tokens, 0.0f, 0, o);
    submit(e, &r, o, hearth_model_n_vocab(m));
    run_checked(e);
    hearth_engine_free(e);
}

static void expect_same(const struct out *a, const struct out *b, const char *what)
{
    ck_assert_msg(a->n == b->n, "%s: %d tokens, without speculation %d", what, a->n, b->n);
    for (int32_t i = 0; i < a->n; i++) {
        ck_assert_msg(a->tokens[i] == b->tokens[i], "%s: token %d is %d, without speculation %d", what, i,
                      a->tokens[i], b->tokens[i]);
        ck_assert_msg(a->logits_hash[i] == b->logits_hash[i],
                      "%s: the logits of token %d differ from those without speculation", what, i);
    }
    ck_assert_int_eq(a->finish, b->finish);
}

/* A prompt that repeats itself (prompt lookup finds n-grams in it). */
static void make_prompt(int32_t n_vocab, uint64_t seed, int32_t *tokens, int32_t len, bool repeating)
{
    test_rng rng;
    test_rng_seed(&rng, seed);
    tokens[0] = 1;
    for (int32_t i = 1; i < len; i++) {
        if (repeating && i >= 24) tokens[i] = tokens[i - 23];
        else tokens[i] = (int32_t)(3 + test_rng_next(&rng) % (uint64_t)(n_vocab - 3));
    }
}

/* ---- greedy: the same tokens and logits ------------------------------------------- */

static void greedy_case(const char *target, const char *draft_name, int32_t lookup, bool fixed,
                        float repeat_penalty)
{
    hearth_model *m = test_load_model(target);
    hearth_model *d = draft_name ? (strcmp(draft_name, target) == 0 ? m : test_load_model(draft_name)) : NULL;
    const int32_t V = hearth_model_n_vocab(m);
    enum { N = 3, GEN = 60 };
    static int32_t prompts[N][80];
    const int32_t lens[N] = {7, 70, 33};
    for (int i = 0; i < N; i++) make_prompt(V, 40 + (uint64_t)i, prompts[i], lens[i], i != 0);
    static struct out plain[N], spec[N];

    hearth_engine *e = new_engine(m, NULL, 8);
    for (int i = 0; i < N; i++) {
        hearth_request r;
        request_init(&r, prompts[i], lens[i], GEN, 0.0f, 0, &plain[i]);
        r.sampling.repeat_penalty = repeat_penalty;
        submit(e, &r, &plain[i], V);
    }
    run_checked(e);
    hearth_engine_free(e);

    e = new_engine(m, d, 8);
    for (int i = 0; i < N; i++) {
        hearth_request r;
        request_init(&r, prompts[i], lens[i], GEN, 0.0f, 0, &spec[i]);
        r.sampling.repeat_penalty = repeat_penalty;
        r.speculation.draft_max = 2 + i * 3;
        r.speculation.lookup = lookup;
        r.speculation.fixed = fixed;
        submit(e, &r, &spec[i], V);
    }
    run_checked(e);
    int32_t drafted = 0;
    for (int i = 0; i < N; i++) {
        char what[200];
        snprintf(what, sizeof what, "%s, draft %s, lookup %d%s, request %d", target, draft_name ? draft_name : "none",
                 lookup, fixed ? ", fixed length" : "", i);
        expect_same(&spec[i], &plain[i], what);
        ck_assert_int_le(spec[i].stats.n_accepted, spec[i].stats.n_drafted);
        ck_assert_int_le(spec[i].stats.n_steps, plain[i].stats.n_steps);
        drafted += spec[i].stats.n_drafted;
        if (draft_name && strcmp(draft_name, target) == 0 && fixed) {
            /* the model itself as its draft: every drafted token is kept */
            ck_assert_int_eq(spec[i].stats.n_accepted, spec[i].stats.n_drafted);
            ck_assert_int_lt(spec[i].stats.n_steps, plain[i].stats.n_steps);
        }
    }
    ck_assert_int_gt(drafted, 0);
    hearth_engine_free(e);
    if (d && d != m) hearth_model_free(d);
    hearth_model_free(m);
}

static const char *const shared_models[] = {
    "stories260K.gguf",       "micro-llama-f32.gguf", "micro-llama-Q8_0.gguf",   "micro-llama-Q4_K_M.gguf",
    "micro-llama-Q2_K.gguf",  "micro-qwen2-F16.gguf", "micro-qwen2-Q4_0.gguf",   "micro-qwen2-Q6_K.gguf",
};

START_TEST(test_greedy_self_draft)
{
    if (!test_require_data()) return;
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(shared_models); i++)
        greedy_case(shared_models[i], shared_models[i], 0, true, 1.0f);
    /* adaptive length, and the penalties in both chains */
    greedy_case("stories260K.gguf", "stories260K.gguf", 0, false, 1.3f);
}
END_TEST

START_TEST(test_greedy_other_drafts)
{
    if (!test_require_data()) return;
    /* mostly wrong: another random model of the same vocabulary */
    greedy_case("micro-llama-Q8_0.gguf", "micro-qwen2-Q8_0.gguf", 0, true, 1.0f);
    greedy_case("micro-qwen2-F16.gguf", "stories260K.gguf", 0, true, 1.0f);
    greedy_case("stories260K.gguf", "micro-llama-Q4_0.gguf", 0, false, 1.0f);
    /* partly right: a coarser quantization of the same weights */
    greedy_case("micro-llama-f32.gguf", "micro-llama-Q2_K.gguf", 0, true, 1.0f);
    greedy_case("micro-qwen2-Q8_0.gguf", "micro-qwen2-Q3_K_M.gguf", 0, false, 1.2f);
}
END_TEST

START_TEST(test_greedy_lookup)
{
    if (!test_require_data()) return;
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(shared_models); i++)
        greedy_case(shared_models[i], NULL, 3, i % 2 == 0, 1.0f);
    greedy_case("stories260K.gguf", NULL, 1, false, 1.3f);
}
END_TEST

/* ---- forced rejections --------------------------------------------------------- */

/* Replace the drafted token at position (call count mod n) by another, so
 * that over the run every position is rejected somewhere. */
struct corrupt {
    int calls;
    int corrupted;
    int32_t n_vocab;
};

static void corrupt_hook(void *user, uint64_t request, int32_t index, int32_t *draft, int32_t n)
{
    (void)request;
    (void)index;
    struct corrupt *c = user;
    const int32_t j = c->calls++ % n;
    draft[j] = (draft[j] + 1 + c->calls % 7) % c->n_vocab;
    c->corrupted++;
}

START_TEST(test_forced_rejections)
{
    if (!test_require_data()) return;
    const char *models[] = {"stories260K.gguf", "micro-llama-Q4_K_M.gguf", "micro-qwen2-Q8_0.gguf"};
    for (size_t mi = 0; mi < HEARTH_ARRAY_LEN(models); mi++) {
        hearth_model *m = test_load_model(models[mi]);
        const int32_t V = hearth_model_n_vocab(m);
        int32_t prompt[40];
        make_prompt(V, 77, prompt, 40, false);
        static struct out plain, spec;
        run_plain(m, prompt, 40, 100, 4, &plain);

        for (int k = 1; k <= 7; k += 3) {
            /* the model drafts for itself: only the corruption is rejected */
            hearth_engine *e = new_engine(m, m, 4);
            struct corrupt c = {0, 0, V};
            engine_set_draft_hook(e, corrupt_hook, &c);
            hearth_request r;
            request_init(&r, prompt, 40, 100, 0.0f, 0, &spec);
            r.speculation.draft_max = k;
            r.speculation.fixed = true;
            submit(e, &r, &spec, V);
            run_checked(e);
            char what[128];
            snprintf(what, sizeof what, "%s, %d drafted, one rejected each step", models[mi], k);
            expect_same(&spec, &plain, what);
            ck_assert_int_ge(c.corrupted, 2 * k);
            /* each verification keeps the tokens before the corrupted one */
            ck_assert_int_lt(spec.stats.n_accepted, spec.stats.n_drafted);
            hearth_engine_free(e);
        }
        hearth_model_free(m);
    }
}
END_TEST

/* ---- sampled: the same distribution ---------------------------------------------- */

/* Chi-square test of homogeneity of two histograms over n bins, bins with
 * few counts pooled; true when the hypothesis of one distribution
 * survives at the 0.0005 level (Wilson-Hilferty approximation). */
static bool same_distribution(const int32_t *a, const int32_t *b, int32_t n, double *chi2_out, int *df_out)
{
    double na = 0, nb = 0;
    for (int32_t i = 0; i < n; i++) {
        na += a[i];
        nb += b[i];
    }
    double chi2 = 0, pa = 0, pb = 0;
    int df = -1;
    for (int32_t i = 0; i <= n; i++) {
        if (i < n) {
            pa += a[i];
            pb += b[i];
        }
        /* pool until a bin expects at least 10 of each (the last bin takes
         * the rest) */
        const double tot = pa + pb;
        if (i < n && (tot * na / (na + nb) < 10 || tot * nb / (na + nb) < 10)) continue;
        if (tot == 0) continue;
        const double ea = tot * na / (na + nb), eb = tot * nb / (na + nb);
        chi2 += (pa - ea) * (pa - ea) / ea + (pb - eb) * (pb - eb) / eb;
        df++;
        pa = pb = 0;
    }
    if (df < 1) df = 1;
    /* chi2 / df is about normal with mean 1 - 2/(9 df) and variance 2/(9 df)
     * after a cube root; z = 3.3 is the 0.0005 point */
    const double v = 2.0 / (9.0 * df);
    const double z = (cbrt(chi2 / df) - (1.0 - v)) / sqrt(v);
    *chi2_out = chi2;
    *df_out = df;
    return z < 3.3;
}

/* The second and third generated tokens of many requests (seeds 0, 1,
 * ...) over one prompt, with and without speculation, as histograms. */
/* A prompt of the model's own greedy text from the start of a sequence:
 * the tokens it samples after it are mostly among the prompt's, so prompt
 * lookup drafts after a sampled token too, and not only where a prompt's
 * last token happens to be computed on its own (where a chunk of the
 * prompt ends one token short, which the planner's budgets decide). */
static void model_prompt(hearth_model *m, int32_t *tokens, int32_t len)
{
    static struct out o;
    const int32_t start = 1;
    run_plain(m, &start, 1, len - 1, 1, &o);
    ck_assert_int_eq(o.n, len - 1);
    tokens[0] = start;
    memcpy(tokens + 1, o.tokens, (size_t)(len - 1) * sizeof *tokens);
}

static void sampled_case(hearth_model *m, hearth_model *draft, int32_t lookup, float temp, int32_t top_k,
                         float top_p, float repeat_penalty)
{
    const int32_t V = hearth_model_n_vocab(m);
    /* under the sanitizers (many times slower) a fifth of the draws: the
     * same code, a test of less power */
    enum { DRAWS = TEST_UNDER_SANITIZERS ? 240 : 1200, GEN = 4, BATCH = 48 };
    int32_t prompt[30];
    if (lookup > 0) model_prompt(m, prompt, 30);
    else make_prompt(V, 5, prompt, 30, true);
    int32_t *hist[2][2];
    for (int s = 0; s < 2; s++)
        for (int t = 0; t < 2; t++) hist[s][t] = calloc((size_t)V, sizeof(int32_t));
    static struct out outs[BATCH];
    int64_t drafted = 0, accepted = 0;
    for (int s = 0; s < 2; s++) {
        hearth_engine *e = new_engine(m, s ? draft : NULL, BATCH);
        for (int base = 0; base < DRAWS; base += BATCH) {
            for (int i = 0; i < BATCH; i++) {
                hearth_request r;
                /* different seeds with and without: independent samples */
                request_init(&r, prompt, 30, GEN, temp, (uint64_t)(base + i) + (s ? 1000003u : 0u), &outs[i]);
                r.sampling.top_k = top_k;
                r.sampling.top_p = top_p;
                r.sampling.min_p = 0.0f;
                r.sampling.repeat_penalty = repeat_penalty;
                if (s) {
                    r.speculation.draft_max = 3;
                    r.speculation.lookup = lookup;
                    r.speculation.fixed = true;
                }
                submit(e, &r, &outs[i], V);
            }
            run_checked(e);
            for (int i = 0; i < BATCH; i++) {
                ck_assert_int_eq(outs[i].n, GEN);
                hist[s][0][outs[i].tokens[1]]++;
                hist[s][1][outs[i].tokens[2]]++;
                drafted += outs[i].stats.n_drafted;
                accepted += outs[i].stats.n_accepted;
            }
        }
        hearth_engine_free(e);
    }
    ck_assert_msg(drafted > 0 && accepted < drafted, "drafted %lld, accepted %lld: the test checks nothing",
                  (long long)drafted, (long long)accepted);
    for (int t = 0; t < 2; t++) {
        double chi2;
        int df;
        const bool same = same_distribution(hist[0][t], hist[1][t], V, &chi2, &df);
        ck_assert_msg(same, "temperature %g top-k %d top-p %g penalty %g lookup %d: token %d: chi-square %.1f with "
                      "%d degrees of freedom", (double)temp, top_k, (double)top_p, (double)repeat_penalty, lookup,
                      t + 1, chi2, df);
    }
    for (int s = 0; s < 2; s++)
        for (int t = 0; t < 2; t++) free(hist[s][t]);
}

START_TEST(test_sampled_distribution)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("stories260K.gguf");
    hearth_model *d = test_load_model("micro-llama-Q8_0.gguf");
    sampled_case(m, d, 0, 1.0f, 0, 1.0f, 1.0f);
    sampled_case(m, d, 0, 0.7f, 40, 0.9f, 1.3f);
    sampled_case(m, d, 0, 1.5f, 20, 1.0f, 1.0f);
    sampled_case(m, NULL, 2, 0.8f, 10, 0.95f, 1.0f);
    hearth_model_free(d);
    hearth_model_free(m);
}
END_TEST

/* ---- the serving core -------------------------------------------------------------- */

/* Speculative (by the draft model and by lookup) and plain requests in the
 * same steps, with parallel samples: each gives what it gives alone. */
START_TEST(test_mixed_batch)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("micro-llama-Q8_0.gguf");
    hearth_model *d = test_load_model("micro-llama-Q4_0.gguf");
    const int32_t V = hearth_model_n_vocab(m);
    enum { N = 6 };
    static int32_t prompts[N][100];
    const int32_t lens[N] = {12, 90, 40, 17, 64, 33};
    for (int i = 0; i < N; i++) make_prompt(V, 300 + (uint64_t)i, prompts[i], lens[i], i % 2 == 1);
    static struct out alone[N], together[N];
    const float temps[N] = {0.0f, 0.0f, 0.0f, 0.9f, 0.0f, 0.0f};
    hearth_engine *e = new_engine(m, d, 8);
    for (int round = 0; round < 2; round++) {
        struct out *o = round ? together : alone;
        for (int i = 0; i < N; i++) {
            hearth_request r;
            request_init(&r, prompts[i], lens[i], 40, temps[i], 11 + (uint64_t)i, &o[i]);
            /* requests 0 and 3 plain, 1 and 4 by lookup, 2 and 5 by the draft */
            if (i % 3) {
                r.speculation.draft_max = 4;
                r.speculation.lookup = i % 3 == 1 ? 2 : 0;
            }
            if (round == 0 && temps[i] > 0) continue; /* compared by its seed below */
            submit(e, &r, &o[i], V);
            if (round == 0) run_checked(e);
            else if (i % 2) {
                bool w;
                ck_assert_int_eq(hearth_engine_step(e, &w), HEARTH_OK);
            }
        }
        run_checked(e);
    }
    for (int i = 0; i < N; i++) {
        if (temps[i] > 0) continue;
        char what[64];
        snprintf(what, sizeof what, "mixed batch, request %d", i);
        expect_same(&together[i], &alone[i], what);
    }
    /* a plain sampled request is the same with or without speculative
     * neighbours */
    hearth_engine *e2 = new_engine(m, NULL, 8);
    static struct out single;
    hearth_request r;
    request_init(&r, prompts[3], lens[3], 40, temps[3], 14, &single);
    submit(e2, &r, &single, V);
    run_checked(e2);
    expect_same(&together[3], &single, "a plain sampled request beside speculative ones");
    hearth_engine_stats s;
    hearth_engine_get_stats(e, &s);
    ck_assert(s.drafted_tokens > 0 && s.verify_steps > 0 && s.draft_steps > 0);
    ck_assert(s.accepted_tokens <= s.drafted_tokens);
    hearth_engine_free(e2);
    hearth_engine_free(e);
    hearth_model_free(d);
    hearth_model_free(m);
}
END_TEST

/* A cancellation from the event of a token in the middle of a
 * verification ends the request at once: no token after it, every block
 * back. */
START_TEST(test_cancel_in_verification)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("stories260K.gguf");
    const int32_t V = hearth_model_n_vocab(m);
    int32_t prompt[20];
    make_prompt(V, 9, prompt, 20, false);
    hearth_engine *e = new_engine(m, m, 4);
    for (int at = 2; at <= 6; at++) {
        static struct out o;
        hearth_request r;
        request_init(&r, prompt, 20, 50, 0.0f, 0, &o);
        r.speculation.draft_max = 8;
        r.speculation.fixed = true;
        submit(e, &r, &o, V);
        o.cancel_at = at;
        run_checked(e);
        ck_assert_int_eq(o.finish, HEARTH_FINISH_CANCELLED);
        ck_assert_int_eq(o.n, at);
    }
    hearth_engine_free(e);
    hearth_model_free(m);
}
END_TEST

/* The samples of a request of n > 1 all begin with the prompt's logits.
 * A prompt whose prefill leaves one token for a later step (chunks of
 * n_batch tokens) has that token scheduled like a decode row, but it must
 * not draft before the samples are forked: it had, and the samples forked
 * later took the first one's computed positions. */
static void on_event_by_index(void *user, const hearth_event *ev)
{
    struct out *o = user;
    ck_assert_int_lt(ev->index, 2);
    on_event(&o[ev->index], ev);
}

START_TEST(test_samples_after_chunked_prompt)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("stories260K.gguf");
    const int32_t V = hearth_model_n_vocab(m);
    enum { LEN = 2 * 16 + 1, GEN = 40 };
    int32_t prompt[LEN];
    make_prompt(V, 77, prompt, LEN, true);
    /* without the prefix cache the second request computes its prompt
     * again, in chunks of 16 */
    hearth_engine_params p = engine_params(NULL, 4);
    p.n_batch = 16;
    p.no_prefix_cache = true;
    hearth_engine *e = engine_from(m, &p);
    for (int32_t lookup = 1; lookup <= 3; lookup += 2) {
        static struct out plain, samples[2];
        hearth_request r;
        request_init(&r, prompt, LEN, GEN, 0.0f, 0, &plain);
        submit(e, &r, &plain, V);
        run_checked(e);
        request_init(&r, prompt, LEN, GEN, 0.0f, 0, samples);
        r.n = 2;
        r.on_event = on_event_by_index;
        r.speculation.draft_max = 4;
        r.speculation.lookup = lookup;
        r.speculation.fixed = true;
        submit(e, &r, samples, V);
        samples[1] = samples[0];
        run_checked(e);
        for (int k = 0; k < 2; k++) {
            char what[80];
            snprintf(what, sizeof what, "lookup %d, sample %d of 2 after a chunked prompt", lookup, k);
            expect_same(&samples[k], &plain, what);
        }
        ck_assert_int_gt(samples[0].stats.n_drafted + samples[1].stats.n_drafted, 0);
    }
    hearth_engine_free(e);
    hearth_model_free(m);
}
END_TEST

/* A seeded random mix of speculative and plain submissions,
 * cancellations and steps in a small pool (preemptions): every block is
 * accounted for after every step. */
START_TEST(test_stress)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("stories260K.gguf");
    hearth_model *d = test_load_model("micro-llama-Q4_0.gguf");
    const int32_t V = hearth_model_n_vocab(m);
    hearth_engine_params p = engine_params(d, 6);
    p.n_ctx = 256;
    p.n_batch = 40;
    p.kv_tokens = 512;
    hearth_engine *e = engine_from(m, &p);
    test_rng rng;
    test_rng_seed(&rng, 2024);
    enum { N = 40 };
    static struct out outs[N];
    static int32_t prompts[N][120];
    uint64_t ids[N];
    for (int i = 0; i < N; i++) {
        const int32_t len = 1 + (int32_t)(test_rng_next(&rng) % 110);
        make_prompt(V, 500 + (uint64_t)i, prompts[i], len, i % 2 == 0);
        hearth_request r;
        request_init(&r, prompts[i], len, 1 + (int32_t)(test_rng_next(&rng) % 60),
                     test_rng_next(&rng) % 2 ? 0.0f : 0.8f, (uint64_t)i, &outs[i]);
        r.n = test_rng_next(&rng) % 4 == 0 ? 2 : 1;
        const int mode = (int)(test_rng_next(&rng) % 3);
        if (mode) {
            r.speculation.draft_max = 1 + (int32_t)(test_rng_next(&rng) % 8);
            r.speculation.lookup = mode == 1 ? 3 : 0;
            /* fixed or adaptive draft lengths: the adaptive length
             * follows measured step times, so the schedule depends on the
             * machine; the accounting must hold for every schedule */
            r.speculation.fixed = test_rng_next(&rng) % 2;
        }
        /* the samples of a request report into one out: only n = 1 is
         * checked for its events */
        memset(&outs[i], 0, sizeof outs[i]);
        outs[i].n_vocab = V;
        outs[i].cancel_at = -1;
        outs[i].engine = e;
        r.on_event = NULL;
        ck_assert_int_eq(hearth_engine_submit(e, &r, &ids[i]), HEARTH_OK);
        const int steps = (int)(test_rng_next(&rng) % 4);
        for (int k = 0; k < steps; k++) {
            bool w;
            ck_assert_int_eq(hearth_engine_step(e, &w), HEARTH_OK);
            ck_assert_msg(engine_check(e) == HEARTH_OK, "%s", hearth_last_error());
        }
        if (test_rng_next(&rng) % 5 == 0) ck_assert_int_eq(hearth_engine_cancel(e, ids[test_rng_next(&rng) % (uint64_t)(i + 1)]), HEARTH_OK);
    }
    run_checked(e);
    hearth_engine_stats s;
    hearth_engine_get_stats(e, &s);
    ck_assert(s.drafted_tokens > 0);
    hearth_engine_free(e);
    hearth_model_free(d);
    hearth_model_free(m);
}
END_TEST

/* ---- the learned confidence limit ---------------------------------------------- */

/* One greedy request of GEN tokens, drafting fixed lengths of 4 with the
 * confidence limit p_min (negative: learned, weighing cost), against the
 * same request without drafts: the same output; its statistics. */
static hearth_request_stats learned_case(hearth_model *m, hearth_model *d, float p_min, double cost)
{
    const int32_t V = hearth_model_n_vocab(m);
    enum { GEN = 120 };
    int32_t prompt[30];
    make_prompt(V, 61, prompt, 30, false);
    static struct out plain, spec;
    run_plain(m, prompt, 30, GEN, 2, &plain);
    hearth_engine *e = new_engine(m, d, 2);
    hearth_request r;
    engine_set_spec_cost(e, cost);
    request_init(&r, prompt, 30, GEN, 0.0f, 0, &spec);
    r.speculation.draft_max = 4;
    r.speculation.fixed = true;
    r.speculation.draft_p_min = p_min;
    submit(e, &r, &spec, V);
    run_checked(e);
    char what[96];
    snprintf(what, sizeof what, "draft_p_min %g, cost %g", (double)p_min, cost);
    expect_same(&spec, &plain, what);
    hearth_engine_free(e);
    return spec.stats;
}

/* With no confidence limit given, each sequence learns from what is
 * verified which of its draft's confidences pay for their rows (the cost
 * fixed here, so that nothing depends on timing): a draft always right
 * drafts on where the prior alone would stop it, and one seldom right is
 * stopped where a limit of 0 drafts everything. */
START_TEST(test_learned_p_min)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("micro-llama-Q8_0.gguf");
    hearth_model *wrong = test_load_model("micro-qwen2-Q8_0.gguf");
    /* the model drafting for itself, every token kept: at a cost of 0.55
     * no token pays by the prior (one half), so only the probes draft at
     * first; what they teach opens their confidences */
    const hearth_request_stats all = learned_case(m, m, 0.0f, 0.55);
    const hearth_request_stats self = learned_case(m, m, -1.0f, 0.55);
    ck_assert_int_eq(self.n_accepted, self.n_drafted);
    ck_assert_msg(2 * self.n_drafted > all.n_drafted, "a draft always right: %d drafted, %d without a limit",
                  self.n_drafted, all.n_drafted);
    /* and the limit weighs what the tokens before cost: at a cost of 0.3
     * nearly every step drafts all 4 */
    const hearth_request_stats cheap = learned_case(m, m, -1.0f, 0.3);
    ck_assert_msg(10 * cheap.n_drafted > 9 * all.n_drafted, "a draft always right, cost 0.3: %d drafted, %d "
                  "without a limit", cheap.n_drafted, all.n_drafted);
    /* another random model: the tokens it drafts are seldom kept, so
     * their confidences shut and it drafts little more than the probes */
    const hearth_request_stats wall = learned_case(m, wrong, 0.0f, 0.3);
    const hearth_request_stats wlearn = learned_case(m, wrong, -1.0f, 0.3);
    ck_assert_msg(wall.n_accepted * 3 < wall.n_drafted, "the wrong draft keeps %d of %d", wall.n_accepted,
                  wall.n_drafted);
    ck_assert_msg(4 * wlearn.n_drafted < wall.n_drafted, "a draft seldom right: %d drafted, %d without a limit",
                  wlearn.n_drafted, wall.n_drafted);
    hearth_model_free(wrong);
    hearth_model_free(m);
}
END_TEST

/* ---- refusals ------------------------------------------------------------------- */

START_TEST(test_refusals)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("micro-llama-f32.gguf");
    /* a copy whose vocabulary differs at token 300 */
    const hearth_vocab *v = hearth_model_vocab(m);
    const int32_t V = hearth_model_n_vocab(m);
    const char **texts = calloc((size_t)V, sizeof *texts);
    char **owned = calloc((size_t)V, sizeof *owned);
    for (int32_t t = 0; t < V; t++) {
        size_t len;
        const char *s = hearth_vocab_token_text(v, t, &len);
        owned[t] = strndup(t == 300 ? "zzqx" : s, t == 300 ? 4 : len);
        texts[t] = owned[t];
    }
    const hearth_gguf *src = hearth_model_gguf(m);
    hearth_gguf_writer *w;
    ck_assert_int_eq(hearth_gguf_writer_new(&w), HEARTH_OK);
    for (int64_t i = 0; i < hearth_gguf_n_kv(src); i++) ck_assert_int_eq(hearth_gguf_writer_copy_kv(w, src, i), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", texts, (uint64_t)V), HEARTH_OK);
    for (int64_t i = 0; i < hearth_gguf_n_tensors(src); i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(src, i);
        ck_assert_int_eq(hearth_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->bytes),
                         HEARTH_OK);
    }
    char path[] = "/tmp/hearth-draft-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    ck_assert_int_eq(hearth_gguf_writer_write(w, path), HEARTH_OK);
    hearth_gguf_writer_free(w);
    for (int32_t t = 0; t < V; t++) free(owned[t]);
    free(owned);
    free(texts);
    hearth_model *d;
    ck_assert_int_eq(hearth_model_load(path, NULL, &d), HEARTH_OK);
    unlink(path);
    hearth_engine_params p;
    hearth_engine_default_params(&p);
    p.n_ctx = 256;
    p.n_threads = 1;
    p.draft_model = d;
    hearth_engine *e;
    ck_assert_int_eq(hearth_engine_new(m, &p, &e), HEARTH_E_INVALID);
    ck_assert_msg(strstr(hearth_last_error(), "token 300") && strstr(hearth_last_error(), "zzqx"), "%s",
                  hearth_last_error());
    hearth_model_free(d);

    /* multi-token prediction: the model has no prediction layer; and
     * not with a draft model */
    p.draft_model = NULL;
    p.mtp = true;
    ck_assert_int_eq(hearth_engine_new(m, &p, &e), HEARTH_E_INVALID);
    ck_assert_msg(strstr(hearth_last_error(), "no prediction layers"), "%s", hearth_last_error());
    ck_assert_int_eq(hearth_model_mtp_layers(m), 0);
    p.mtp = false;

    /* requests: speculation without a draft model, bad parameters */
    ck_assert_int_eq(hearth_engine_new(m, &p, &e), HEARTH_OK);
    int32_t prompt[4] = {1, 5, 6, 7};
    hearth_request r;
    static struct out o;
    request_init(&r, prompt, 4, 4, 0.0f, 0, &o);
    r.speculation.draft_max = 4;
    ck_assert_int_eq(hearth_engine_submit(e, &r, NULL), HEARTH_E_INVALID);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "neither a draft model nor multi-token prediction"));
    r.speculation.lookup = 65;
    ck_assert_int_eq(hearth_engine_submit(e, &r, NULL), HEARTH_E_INVALID);
    r.speculation.lookup = 2;
    r.speculation.draft_min = 5;
    ck_assert_int_eq(hearth_engine_submit(e, &r, NULL), HEARTH_E_INVALID);
    r.speculation.draft_min = 0;
    r.speculation.draft_p_min = 1.5f;
    ck_assert_int_eq(hearth_engine_submit(e, &r, NULL), HEARTH_E_INVALID);
    r.speculation.draft_p_min = 0.5f;
    r.speculation.draft_max = 100000;
    ck_assert_int_eq(hearth_engine_submit(e, &r, NULL), HEARTH_E_INVALID);
    r.speculation.draft_max = 4;
    ck_assert_int_eq(hearth_engine_submit(e, &r, NULL), HEARTH_OK);
    run_checked(e);
    hearth_engine_free(e);
    hearth_model_free(m);
}
END_TEST

/* ---- speculate.c alone ------------------------------------------------------------ */

START_TEST(test_lookup)
{
    const int32_t t[] = {5, 6, 7, 8, 9, 5, 6, 7};
    int32_t out[8];
    /* the trigram 5 6 7 occurred at 0: 8 9 5 follow */
    ck_assert_int_eq(spec_lookup(t, 8, 3, 3, out), 3);
    ck_assert_int_eq(out[0], 8);
    ck_assert_int_eq(out[1], 9);
    ck_assert_int_eq(out[2], 5);
    /* cut at the end of the text */
    ck_assert_int_eq(spec_lookup(t, 8, 3, 10, out), 5);
    /* no earlier occurrence of any suffix */
    const int32_t u[] = {1, 2, 3, 4};
    ck_assert_int_eq(spec_lookup(u, 4, 3, 4, out), 0);
    /* the latest occurrence wins: 1 2 | 1 3 | 1 -> 3 */
    const int32_t w[] = {1, 2, 1, 3, 1};
    ck_assert_int_eq(spec_lookup(w, 5, 2, 1, out), 1);
    ck_assert_int_eq(out[0], 3);
    ck_assert_int_eq(spec_lookup(w, 5, 2, 0, out), 0);
    ck_assert_int_eq(spec_lookup(w, 1, 2, 4, out), 0);
}
END_TEST

START_TEST(test_gain)
{
    ck_assert(fabs(spec_expected_tokens(0.5, 3) - 1.875) < 1e-12);
    ck_assert(fabs(spec_expected_tokens(1.0, 4) - 5.0) < 1e-12);
    ck_assert(fabs(spec_expected_tokens(0.0, 4) - 1.0) < 1e-12);
    /* a draft that is always right and free: as long as allowed */
    ck_assert_int_eq(spec_best_length(1.0, 8, 1.0, 0.01, 0.0), 8);
    /* never right: nothing */
    ck_assert_int_eq(spec_best_length(0.0, 8, 1.0, 0.01, 0.0), 0);
    /* a compute-bound step (a row costs a token's time): nothing pays */
    ck_assert_int_eq(spec_best_length(0.9, 8, 1.0, 1.0, 0.0), 0);
    /* a costly draft shortens the draft */
    const int32_t cheap = spec_best_length(0.8, 16, 1.0, 0.02, 0.02);
    const int32_t dear = spec_best_length(0.8, 16, 1.0, 0.02, 0.2);
    ck_assert_int_gt(cheap, dear);
    ck_assert_int_gt(dear, 0);
}
END_TEST

START_TEST(test_fit)
{
    struct spec_fit f = {0};
    double a, b;
    ck_assert(!spec_fit_line(&f, &a, &b));
    spec_fit_add(&f, 1, 2.0);
    ck_assert(spec_fit_line(&f, &a, &b));
    ck_assert(fabs(a * (1 + SPEC_ROW_PRIOR) - 2.0) < 1e-12);
    for (int i = 0; i < 50; i++) spec_fit_add(&f, 1 + i % 7, 3.0 + 0.5 * (1 + i % 7));
    ck_assert(spec_fit_line(&f, &a, &b));
    ck_assert(fabs(b - 0.5) < 0.05);
    ck_assert(fabs(a - 3.0) < 0.2);
    /* a long stretch of one x (steps without drafts): what a row costs
     * is remembered, not the prior's */
    for (int i = 0; i < 300; i++) spec_fit_add(&f, 1, 3.5);
    ck_assert(spec_fit_line(&f, &a, &b));
    ck_assert(fabs(a + b - 3.5) < 1e-3);
    ck_assert(fabs(b / a - 0.5 / 3.0) < 0.03);
    /* a row as dear as the rest of the step, seen in a probe of 2 rows
     * among 40 of 1 */
    struct spec_fit g = {0};
    for (int i = 0; i < 40; i++) spec_fit_add(&g, 1, 1.0);
    spec_fit_add(&g, 2, 2.0);
    ck_assert(spec_fit_line(&g, &a, &b));
    ck_assert(fabs(b - 1.0) < 0.01);
    for (int i = 0; i < 300; i++) spec_fit_add(&g, 1, 1.0);
    ck_assert(spec_fit_line(&g, &a, &b));
    ck_assert(b > 0.9 * a);
}
END_TEST

/* The acceptance by confidence and the limit learned from it. */
START_TEST(test_conf_learning)
{
    struct spec_conf c = {0};
    ck_assert_int_eq(spec_conf_bin(-0.5), 0);
    ck_assert_int_eq(spec_conf_bin(0.0), 0);
    ck_assert_int_eq(spec_conf_bin(0.12), 2);
    ck_assert_int_eq(spec_conf_bin(1.0), SPEC_CONF_BINS - 1);
    /* nothing learned: every bin has the prior's rate, one half; a cost
     * below lets every confidence draft, one above none */
    ck_assert(fabs(spec_conf_rate(&c, 0.3) - 0.5) < 1e-12);
    ck_assert(spec_conf_threshold(&c, 0.2) == 0.0);
    ck_assert(spec_conf_threshold(&c, 0.6) == 1.0);
    /* tokens of confidence 0.10-0.15 always rejected, of 0.60-0.65 always
     * kept: the first bin stops paying and the limit rises above it; the
     * bins not seen do as the draft does overall (half kept) */
    for (int i = 0; i < 30; i++) {
        spec_conf_add(&c, 0.12, false);
        spec_conf_add(&c, 0.62, true);
    }
    ck_assert(spec_conf_rate(&c, 0.12) < 0.1);
    ck_assert(spec_conf_rate(&c, 0.62) > 0.9);
    ck_assert(fabs(spec_conf_rate(&c, 0.4) - 0.5) < 0.01);
    ck_assert(!spec_conf_pays(&c, 0.12, 1.0, 0.2));
    ck_assert(spec_conf_pays(&c, 0.4, 1.0, 0.2));
    ck_assert(fabs(spec_conf_threshold(&c, 0.2) - 0.15) < 1e-12);
    /* at a cost of 0.6 only the bin kept pays: the limit is the top */
    ck_assert(spec_conf_pays(&c, 0.62, 1.0, 0.6));
    ck_assert(spec_conf_threshold(&c, 0.6) == 1.0);
    /* then the low tokens always kept: the bin pays again and the limit
     * falls back to 0 */
    for (int i = 0; i < 30; i++) spec_conf_add(&c, 0.12, true);
    ck_assert(spec_conf_rate(&c, 0.12) > 0.7);
    ck_assert(spec_conf_threshold(&c, 0.2) == 0.0);
    /* a draft that is right although unsure, at a cost of 0.55: tokens
     * of confidence 0.30-0.35 kept and of 0.20-0.25 rejected, half in
     * all, open only their bin; kept more often, they raise the rate of
     * the bins not seen above the cost, and the limit falls to the bin
     * above the rejected one */
    struct spec_conf d = {0};
    for (int i = 0; i < 20; i++) {
        spec_conf_add(&d, 0.32, true);
        spec_conf_add(&d, 0.22, false);
    }
    ck_assert(spec_conf_pays(&d, 0.32, 1.0, 0.55));
    ck_assert(spec_conf_threshold(&d, 0.55) == 1.0);
    for (int i = 0; i < 20; i++) spec_conf_add(&d, 0.32, true);
    ck_assert(fabs(spec_conf_threshold(&d, 0.55) - 0.25) < 1e-12);
    /* the tokens drafted before weigh in: a token kept 4 times in 5 pays
     * for a cost of 0.6 first and after one like it, not after two */
    struct spec_conf f = {0};
    for (int i = 0; i < 100; i++) spec_conf_add(&f, 0.55, i % 5 != 0);
    const double rate = spec_conf_rate(&f, 0.55);
    ck_assert(rate > 0.75 && rate < 0.85);
    ck_assert(spec_conf_pays(&f, 0.55, 1.0, 0.6));
    ck_assert(spec_conf_pays(&f, 0.55, rate, 0.6));
    ck_assert(!spec_conf_pays(&f, 0.55, rate * rate, 0.6));
    /* old tokens count less: after a long run kept, a shorter run
     * rejected shuts the bin */
    for (int i = 0; i < 40; i++) spec_conf_add(&f, 0.55, false);
    ck_assert(!spec_conf_pays(&f, 0.55, 1.0, 0.6));
}
END_TEST

START_TEST(test_residual)
{
    const float p[4] = {0.5f, 0.25f, 0.25f, 0.0f};
    const float q[4] = {0.25f, 0.5f, 0.0f, 0.25f};
    float r[4];
    const double sum = spec_residual(p, q, -1, 4, r);
    ck_assert(fabs(sum - 0.5) < 1e-7);
    ck_assert(r[0] == 0.25f && r[1] == 0.0f && r[2] == 0.25f && r[3] == 0.0f);
    /* the point mass on x: p without x */
    ck_assert(fabs(spec_residual(p, NULL, 0, 4, r) - 0.5) < 1e-7);
    ck_assert(r[0] == 0.0f && r[1] == 0.25f);
    ck_assert_int_eq(spec_draw(r, 4, 0.5, 0.0), 1);
    ck_assert_int_eq(spec_draw(r, 4, 0.5, 0.75), 2);
    ck_assert_int_eq(spec_draw(r, 4, 0.5, 0.999999), 2);
    const float z[2] = {0, 0};
    ck_assert_int_eq(spec_draw(z, 2, 0.0, 0.5), -1);
    ck_assert(spec_keep(0.99, 0.5f, 0.5f));
    ck_assert(!spec_keep(0.5, 0.1f, 0.2f));
    ck_assert(spec_keep(0.49, 0.1f, 0.2f));
    ck_assert(!spec_keep(0.0, 0.0f, 0.2f));
}
END_TEST

/* A draft model larger than its target cannot pay (a decode step reads
 * every weight): before a step is timed it is not tried, and a probe
 * waits until the time since pays for it, which takes more than
 * SPEC_PROBE_STEPS steps; a smaller draft of the same pair's kind drafts
 * from the first steps.  Both give the target's tokens. */
START_TEST(test_larger_draft_waits)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("stories260K.gguf");
    const char *const drafts[] = {"micro-llama-Q8_0.gguf", "micro-llama-Q4_0.gguf"};
    const int32_t V = hearth_model_n_vocab(m);
    enum { GEN = SPEC_PROBE_STEPS - 1 };
    int32_t prompt[40];
    make_prompt(V, 71, prompt, 40, true);
    static struct out plain, spec;
    run_plain(m, prompt, 40, GEN, 2, &plain);
    for (int i = 0; i < 2; i++) {
        hearth_model *d = test_load_model(drafts[i]);
        const bool larger = hearth_model_size_bytes(d) > hearth_model_size_bytes(m);
        ck_assert_msg(larger == (i == 0), "%s: the test wants it %s than stories260K", drafts[i],
                      i == 0 ? "larger" : "smaller");
        hearth_engine *e = new_engine(m, d, 2);
        hearth_request r;
        request_init(&r, prompt, 40, GEN, 0.0f, 0, &spec);
        r.speculation.draft_max = 4;
        submit(e, &r, &spec, V);
        run_checked(e);
        expect_same(&spec, &plain, drafts[i]);
        hearth_engine_stats s;
        hearth_engine_get_stats(e, &s);
        if (larger)
            ck_assert_msg(spec.stats.n_drafted == 0 && s.draft_steps == 0,
                          "%s, larger than its target: %d drafted in %lld draft passes", drafts[i],
                          spec.stats.n_drafted, (long long)s.draft_steps);
        else
            ck_assert_msg(spec.stats.n_drafted > 0, "%s, smaller than its target: nothing drafted", drafts[i]);
        hearth_engine_free(e);
        hearth_model_free(d);
    }
    hearth_model_free(m);
}
END_TEST

static Suite *speculate_suite(void)
{
    Suite *s = suite_create("speculate");
    const struct { const char *name; const TTest *test; } tests[] = {
        {"lookup", test_lookup},
        {"gain", test_gain},
        {"fit", test_fit},
        {"residual", test_residual},
        {"conf_learning", test_conf_learning},
        {"learned_p_min", test_learned_p_min},
        {"larger_draft_waits", test_larger_draft_waits},
        {"refusals", test_refusals},
        {"forced_rejections", test_forced_rejections},
        {"greedy_self_draft", test_greedy_self_draft},
        {"greedy_other_drafts", test_greedy_other_drafts},
        {"greedy_lookup", test_greedy_lookup},
        {"cancel_in_verification", test_cancel_in_verification},
        {"mixed_batch", test_mixed_batch},
        {"samples_after_chunked_prompt", test_samples_after_chunked_prompt},
        {"stress", test_stress},
        {"sampled_distribution", test_sampled_distribution},
    };
    /* one case per test: CK_RUN_CASE=NAME runs one */
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(tests); i++) {
        TCase *tc = tcase_create(tests[i].name);
        tcase_set_timeout(tc, 1200);
        tcase_add_test(tc, tests[i].test);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    return test_run_suite(speculate_suite());
}

/*
 * test-serving.c -- the serving engine: requests run together give the
 * logits and tokens they give alone, bit for bit, whatever the step's
 * composition, the prompt's chunking and the prefix cache; parallel
 * samples equal single requests with their seeds; cancellation and
 * preemption free every block; a seeded random stress of submissions,
 * cancellations, preemptions and steps keeps every block accounted for,
 * one step at a time and with groups of steps in flight (as on a
 * pipeline's rank 0), where every sequence still gets its own logits;
 * bad requests are refused with the limit named.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "engine_drain.h"
#include "testutil.h"

/* What one sample produced: its tokens, and a fingerprint of the logits
 * of every step (FNV-1a over their bytes), the finish reason. */
#define MAX_OUT 256
struct sample_out {
    int32_t tokens[MAX_OUT];
    uint64_t logits_hash[MAX_OUT];
    int32_t n;
    hearth_finish_reason finish;
    hearth_request_stats stats;
    char text[4096];
    size_t text_len;
};

struct collector {
    struct sample_out *out; /* n samples */
    int32_t n;
    int32_t n_vocab;
    int finished;
};

static void on_event(void *user, const hearth_event *ev)
{
    struct collector *c = user;
    ck_assert_int_lt(ev->index, c->n);
    struct sample_out *o = &c->out[ev->index];
    ck_assert_int_eq(o->finish, HEARTH_FINISH_NONE); /* nothing after the end */
    if (ev->token >= 0 && o->n < MAX_OUT) {
        o->tokens[o->n] = ev->token;
        o->logits_hash[o->n] = ev->logits ? test_fnv1a(ev->logits, (size_t)c->n_vocab * sizeof(float)) : 0;
        o->n++;
    }
    if (ev->len && o->text_len + ev->len < sizeof o->text) {
        memcpy(o->text + o->text_len, ev->text, ev->len);
        o->text_len += ev->len;
    }
    if (ev->finish != HEARTH_FINISH_NONE) {
        ck_assert_ptr_nonnull(ev->stats);
        o->finish = ev->finish;
        o->stats = *ev->stats;
        c->finished++;
    }
}

/* An engine of contexts of 512 on 2 threads, at most n_seq_max sequences
 * at once (0: the default), prompts taking prefill_share of a step with
 * decode rows (0: the default). */
static hearth_engine *new_engine_share(const hearth_model *m, int32_t n_batch, int64_t kv_tokens, int32_t block,
                                       hearth_type cache, bool prefix, int32_t n_seq_max, float prefill_share)
{
    hearth_engine_params p;
    hearth_engine_default_params(&p);
    p.n_ctx = 512;
    p.n_seq_max = n_seq_max;
    p.n_batch = n_batch;
    p.kv_tokens = kv_tokens;
    p.block_tokens = block;
    p.n_threads = 2;
    p.cache_type = cache;
    p.no_prefix_cache = !prefix;
    p.prefill_share = prefill_share;
    hearth_engine *e;
    hearth_status st = hearth_engine_new(m, &p, &e);
    ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
    return e;
}

static hearth_engine *new_engine_seqs(const hearth_model *m, int32_t n_batch, int64_t kv_tokens, int32_t block,
                                      hearth_type cache, bool prefix, int32_t n_seq_max)
{
    return new_engine_share(m, n_batch, kv_tokens, block, cache, prefix, n_seq_max, 0.0f);
}

static hearth_engine *new_engine(const hearth_model *m, int32_t n_batch, int64_t kv_tokens, int32_t block,
                                 hearth_type cache, bool prefix)
{
    return new_engine_seqs(m, n_batch, kv_tokens, block, cache, prefix, 0);
}

/* Request i of a test: a prompt of len tokens from seed, BOS first; with
 * shared > 0 its first `shared` tokens are the same for every i. */
static void make_prompt(const hearth_model *m, uint64_t seed, int32_t shared, int32_t *tokens, int32_t len)
{
    test_rng rng;
    const int32_t V = hearth_model_n_vocab(m);
    test_rng_seed(&rng, 1000);
    tokens[0] = 1;
    for (int32_t i = 1; i < len; i++) {
        if (i == shared) test_rng_seed(&rng, seed);
        tokens[i] = (int32_t)(3 + test_rng_next(&rng) % (uint64_t)(V - 3));
    }
    if (shared <= 1) {
        test_rng_seed(&rng, seed);
        for (int32_t i = 1; i < len; i++) tokens[i] = (int32_t)(3 + test_rng_next(&rng) % (uint64_t)(V - 3));
    }
}

static uint64_t submit(hearth_engine *e, const int32_t *prompt, int32_t n_prompt, int32_t max_tokens,
                       float temp, uint64_t seed, int32_t n, struct collector *c)
{
    hearth_request r;
    hearth_request_default(&r);
    r.prompt = prompt;
    r.n_prompt = (size_t)n_prompt;
    r.max_tokens = max_tokens;
    r.n = n;
    r.sampling.temperature = temp;
    r.sampling.seed = seed;
    r.ignore_eos = true;
    r.on_event = on_event;
    r.user = c;
    uint64_t id;
    hearth_status st = hearth_engine_submit(e, &r, &id);
    ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
    return id;
}

static void run_checked(hearth_engine *e)
{
    test_engine_drain(e, 100000);
}

static void expect_same(const struct sample_out *a, const struct sample_out *b, const char *what)
{
    ck_assert_msg(a->n == b->n, "%s: %d tokens, alone %d", what, a->n, b->n);
    for (int32_t i = 0; i < a->n; i++) {
        ck_assert_msg(a->tokens[i] == b->tokens[i], "%s: token %d is %d, alone %d", what, i, a->tokens[i],
                      b->tokens[i]);
        ck_assert_msg(a->logits_hash[i] == b->logits_hash[i], "%s: the logits of token %d differ from alone",
                      what, i);
    }
}

#define N_REQ 7
/* one of them past 256 positions, where attention splits its keys */
static const int32_t prompt_lens[N_REQ] = {5, 70, 33, 129, 1, 64, 300};

/* Every request alone (one at a time, nothing cached), then all at once
 * with a small step budget (prompts chunked and mixed with decode rows),
 * then all at once again with the prefix cache warm: the same logits bit
 * for bit. */
static void check_invariance(const char *model, hearth_type cache, int32_t block)
{
    hearth_model *m = test_load_model(model);
    const int32_t V = hearth_model_n_vocab(m);
    static int32_t prompts[N_REQ][320];
    for (int i = 0; i < N_REQ; i++) make_prompt(m, 50 + (uint64_t)i, i % 2 ? 40 : 0, prompts[i], prompt_lens[i]);
    static struct sample_out alone[N_REQ], together[N_REQ];
    memset(alone, 0, sizeof alone);

    hearth_engine *e = new_engine(m, 512, 2048, block, cache, false);
    for (int i = 0; i < N_REQ; i++) {
        struct collector c = {&alone[i], 1, V, 0};
        submit(e, prompts[i], prompt_lens[i], 12, i % 3 ? 0.8f : 0.0f, 7 + (uint64_t)i, 1, &c);
        run_checked(e);
        ck_assert_int_eq(c.finished, 1);
        ck_assert_int_eq(alone[i].n, 12);
        ck_assert_int_eq(alone[i].finish, HEARTH_FINISH_LENGTH);
    }
    hearth_engine_free(e);

    /* with the prompts' share of a step at the default, all of it (decode
     * rows wait for the prompts) and a tenth */
    const int32_t budgets[] = {7, 64, 16};
    const float shares[] = {0.0f, 1.0f, 0.1f};
    for (size_t bi = 0; bi < HEARTH_ARRAY_LEN(budgets); bi++) {
        e = new_engine_share(m, budgets[bi], 2048, block, cache, true, 0, shares[bi]);
        for (int round = 0; round < 2; round++) {
            memset(together, 0, sizeof together);
            struct collector c[N_REQ];
            for (int i = 0; i < N_REQ; i++) {
                c[i] = (struct collector){&together[i], 1, V, 0};
                submit(e, prompts[i], prompt_lens[i], 12, i % 3 ? 0.8f : 0.0f, 7 + (uint64_t)i, 1, &c[i]);
                /* later requests join while the first ones run */
                if (i % 2) {
                    bool w;
                    ck_assert_int_eq(hearth_engine_step(e, &w), HEARTH_OK);
                }
            }
            run_checked(e);
            for (int i = 0; i < N_REQ; i++) {
                char what[160];
                snprintf(what, sizeof what, "%s %s cache, blocks of %d, budget %d, prefill share %g, round %d, "
                         "request %d", model, hearth_type_name(cache), block, budgets[bi], (double)shares[bi], round, i);
                expect_same(&together[i], &alone[i], what);
                if (round == 1 && prompt_lens[i] > block)
                    ck_assert_msg(together[i].stats.n_cached > 0, "%s: no prefix-cache hit", what);
            }
        }
        hearth_engine_stats s;
        hearth_engine_get_stats(e, &s);
        ck_assert_int_eq(s.blocks_used, 0);
        ck_assert(s.prefix_hits > 0);
        hearth_engine_free(e);
    }
    hearth_model_free(m);
}

START_TEST(test_invariance_stories)
{
    if (!test_require_data()) return;
    check_invariance("stories260K.gguf", HEARTH_TYPE_F16, 16);
    check_invariance("stories260K.gguf", HEARTH_TYPE_F32, 64);
}
END_TEST

START_TEST(test_invariance_quantized)
{
    if (!test_require_data()) return;
    check_invariance("micro-llama-Q4_K_M.gguf", HEARTH_TYPE_Q8_0, 64);
    check_invariance("micro-qwen2-Q8_0.gguf", HEARTH_TYPE_F16, 32);
    check_invariance("micro-llama-Q4_0.gguf", HEARTH_TYPE_F16, 128);
}
END_TEST

/* Recurrent models: the prefix cache resumes from the states kept at
 * block boundaries, and every request still gives, bit for bit, what it
 * gives alone with nothing cached. */
START_TEST(test_invariance_recurrent)
{
    if (!test_require_data()) return;
    check_invariance("micro-rwkv6-Q8_0.gguf", HEARTH_TYPE_F16, 16);
    check_invariance("micro-rwkv6qwen2-f32.gguf", HEARTH_TYPE_F16, 64);
}
END_TEST

/* The snapshots are bounded: with one sequence at a time an engine
 * keeps two, the least recently used goes first, and a request whose
 * prefix lost its snapshot is computed again, to the same bits. */
START_TEST(test_snapshot_eviction)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("micro-rwkv6-Q8_0.gguf");
    const int32_t V = hearth_model_n_vocab(m);
    static int32_t a[70], b[70];
    make_prompt(m, 61, 0, a, 70);
    make_prompt(m, 62, 0, b, 70);
    static struct sample_out alone, out[5];
    memset(&alone, 0, sizeof alone);
    memset(out, 0, sizeof out);
    hearth_engine *e = new_engine(m, 512, 1024, 16, HEARTH_TYPE_F16, false);
    struct collector c = {&alone, 1, V, 0};
    submit(e, a, 70, 12, 0.0f, 1, 1, &c);
    run_checked(e);
    hearth_engine_free(e);

    e = new_engine_seqs(m, 0, 1024, 16, HEARTH_TYPE_F16, true, 1);
    /* a, a again (its prompt's snapshot), b (both of a's snapshots go),
     * a (computed again), a (its snapshot again) */
    const int32_t *order[5] = {a, a, b, a, a};
    static const int32_t cached[5] = {0, 64, 0, 0, 64};
    for (int i = 0; i < 5; i++) {
        c = (struct collector){&out[i], 1, V, 0};
        submit(e, order[i], 70, 12, 0.0f, 1, 1, &c);
        run_checked(e);
        ck_assert_msg(out[i].stats.n_cached == cached[i], "request %d: %d positions cached, expected %d", i,
                      out[i].stats.n_cached, cached[i]);
        if (order[i] == a) expect_same(&out[i], &alone, "a request resumed from a snapshot");
    }
    hearth_engine_free(e);
    hearth_model_free(m);
}
END_TEST

/* The engine computes what a context computes: the logits of a prompt
 * prefilled by hearth_eval and of the engine's first sample are the same
 * bits (blocks of any multiple of 64 positions). */
START_TEST(test_engine_matches_context)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("micro-llama-Q8_0.gguf");
    const int32_t V = hearth_model_n_vocab(m);
    int32_t prompt[100];
    make_prompt(m, 3, 0, prompt, 100);
    hearth_context_params cp;
    hearth_context_default_params(&cp);
    cp.n_ctx = 512;
    cp.n_threads = 2;
    hearth_context *ctx;
    ck_assert_int_eq(hearth_context_new(m, &cp, &ctx), HEARTH_OK);
    ck_assert_int_eq(hearth_eval(ctx, prompt, 100, 1), HEARTH_OK);
    const uint64_t want = test_fnv1a(hearth_context_logits(ctx, 0), (size_t)V * sizeof(float));
    hearth_context_free(ctx);
    static struct sample_out o;
    memset(&o, 0, sizeof o);
    struct collector c = {&o, 1, V, 0};
    hearth_engine *e = new_engine(m, 37, 1024, 64, HEARTH_TYPE_F16, true);
    submit(e, prompt, 100, 1, 0.0f, 0, 1, &c);
    run_checked(e);
    ck_assert_int_eq(o.n, 1);
    ck_assert_msg(o.logits_hash[0] == want, "the engine's logits differ from the context's");
    hearth_engine_free(e);
    hearth_model_free(m);
}
END_TEST

/* Recurrent models (rwkv6, rwkv6qwen2): several sequences at once, each
 * with its own fixed-size state, give the greedy tokens each gives alone;
 * forked samples continue from one prompt state; the pool reports the
 * states' bytes; prompts that share only a block or two resume from no
 * snapshot (one is kept at a prompt's last block boundary alone). */
START_TEST(test_recurrent_sequences)
{
    if (!test_require_data()) return;
    static const char *const models[] = {"micro-rwkv6-Q8_0.gguf", "micro-rwkv6qwen2-f32.gguf"};
    hearth_model *m = test_load_model(models[_i]);
    ck_assert(hearth_model_is_recurrent(m));
    const int32_t V = hearth_model_n_vocab(m);
    enum { N = 4 };
    static const int32_t lens[N] = {3, 90, 40, 150};
    static int32_t prompts[N][160];
    for (int i = 0; i < N; i++) make_prompt(m, 300 + (uint64_t)i, i % 2 ? 20 : 0, prompts[i], lens[i]);
    static struct sample_out alone[N], together[N], fork[3], fork_alone[3];
    memset(alone, 0, sizeof alone);
    memset(together, 0, sizeof together);
    hearth_engine *e = new_engine(m, 512, 2048, 16, HEARTH_TYPE_F16, true);
    hearth_engine_stats s;
    hearth_engine_get_stats(e, &s);
    ck_assert_uint_gt(s.state_bytes_per_seq, 0);
    ck_assert_uint_eq(s.bytes_per_token, 0);
    for (int i = 0; i < N; i++) {
        struct collector c = {&alone[i], 1, V, 0};
        submit(e, prompts[i], lens[i], 10, 0.0f, 1, 1, &c);
        run_checked(e);
        ck_assert_int_eq(alone[i].n, 10);
    }
    hearth_engine_free(e);
    e = new_engine(m, 23, 2048, 16, HEARTH_TYPE_F16, true);
    struct collector c[N];
    for (int i = 0; i < N; i++) {
        c[i] = (struct collector){&together[i], 1, V, 0};
        submit(e, prompts[i], lens[i], 10, 0.0f, 1, 1, &c[i]);
        bool w;
        ck_assert_int_eq(hearth_engine_step(e, &w), HEARTH_OK);
    }
    run_checked(e);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(together[i].n, 10);
        ck_assert_mem_eq(together[i].tokens, alone[i].tokens, 10 * sizeof(int32_t));
        ck_assert_int_eq(together[i].stats.n_cached, 0);
    }
    /* three samples of one prompt, and each alone */
    memset(fork, 0, sizeof fork);
    memset(fork_alone, 0, sizeof fork_alone);
    for (int i = 0; i < 3; i++) {
        struct collector ca = {&fork_alone[i], 1, V, 0};
        submit(e, prompts[3], lens[3], 12, 1.0f, 40 + (uint64_t)i, 1, &ca);
        run_checked(e);
    }
    struct collector cf = {fork, 3, V, 0};
    submit(e, prompts[3], lens[3], 12, 1.0f, 40, 3, &cf);
    run_checked(e);
    ck_assert_int_eq(cf.finished, 3);
    for (int i = 0; i < 3; i++) expect_same(&fork[i], &fork_alone[i], "a recurrent sample");
    hearth_engine_free(e);
    hearth_model_free(m);
}
END_TEST

/* n samples of one prompt share its blocks and equal n requests with
 * seeds seed, seed + 1, ... */
START_TEST(test_parallel_samples)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("stories260K.gguf");
    const int32_t V = hearth_model_n_vocab(m);
    int32_t prompt[40];
    make_prompt(m, 9, 0, prompt, 40); /* the last block is shared part-full: copy-on-write */
    enum { N = 4 };
    static struct sample_out alone[N], fork[N];
    memset(alone, 0, sizeof alone);
    memset(fork, 0, sizeof fork);
    hearth_engine *e = new_engine(m, 64, 1024, 16, HEARTH_TYPE_F16, false);
    for (int i = 0; i < N; i++) {
        struct collector c = {&alone[i], 1, V, 0};
        submit(e, prompt, 40, 20, 1.0f, 100 + (uint64_t)i, 1, &c);
        run_checked(e);
    }
    struct collector c = {fork, N, V, 0};
    submit(e, prompt, 40, 20, 1.0f, 100, N, &c);
    /* after the prompt's step the samples hold its 3 blocks together */
    bool w;
    ck_assert_int_eq(hearth_engine_step(e, &w), HEARTH_OK);
    hearth_engine_stats s;
    hearth_engine_get_stats(e, &s);
    ck_assert_int_eq(s.running, N);
    ck_assert_int_eq(s.blocks_used, 3);
    run_checked(e);
    ck_assert_int_eq(c.finished, N);
    bool differ = false;
    for (int i = 0; i < N; i++) {
        char what[64];
        snprintf(what, sizeof what, "sample %d", i);
        expect_same(&fork[i], &alone[i], what);
        if (i && memcmp(fork[i].tokens, fork[0].tokens, sizeof fork[0].tokens)) differ = true;
    }
    ck_assert_msg(differ, "the samples are all the same: the seeds are not applied");
    hearth_engine_free(e);
    hearth_model_free(m);
}
END_TEST

/* n_running requests of 4-token prompts decode on an engine of step
 * budget n_batch whose prompts take `share` of a step; then a request of
 * an n_new-token prompt arrives.  Returns the steps until its first
 * token; *decoded: the tokens the others generated in those steps. */
static int32_t steps_to_first_token(const hearth_model *m, int32_t n_batch, float share, int32_t n_running,
                                    int32_t n_new, int32_t *decoded)
{
    const int32_t V = hearth_model_n_vocab(m);
    enum { MAX_RUNNING = 7 };
    ck_assert_int_le(n_running, MAX_RUNNING);
    static struct sample_out out[MAX_RUNNING + 1];
    memset(out, 0, sizeof out);
    struct collector c[MAX_RUNNING + 1];
    int32_t prompts[MAX_RUNNING + 1][128];
    uint64_t ids[MAX_RUNNING];
    ck_assert_int_le(n_new, 128);
    hearth_engine *e = new_engine_share(m, n_batch, 4096, 16, HEARTH_TYPE_F16, false, MAX_RUNNING + 1, share);
    for (int i = 0; i < n_running; i++) {
        make_prompt(m, 300 + (uint64_t)i, 0, prompts[i], 4);
        c[i] = (struct collector){&out[i], 1, V, 0};
        ids[i] = submit(e, prompts[i], 4, 200, 0.0f, 1, 1, &c[i]);
    }
    /* until every one of them decodes */
    for (int guard = 0;; guard++) {
        ck_assert_int_lt(guard, 100);
        int ready = 0;
        for (int i = 0; i < n_running; i++) ready += out[i].n > 0;
        if (ready == n_running) break;
        bool w;
        ck_assert_int_eq(hearth_engine_step(e, &w), HEARTH_OK);
    }
    int32_t before = 0;
    for (int i = 0; i < n_running; i++) before += out[i].n;
    make_prompt(m, 399, 0, prompts[n_running], n_new);
    c[n_running] = (struct collector){&out[n_running], 1, V, 0};
    submit(e, prompts[n_running], n_new, 1, 0.0f, 1, 1, &c[n_running]);
    int32_t steps = 0;
    while (out[n_running].n == 0) {
        ck_assert_int_lt(steps, 100);
        bool w;
        ck_assert_int_eq(hearth_engine_step(e, &w), HEARTH_OK);
        steps++;
    }
    *decoded = -before;
    for (int i = 0; i < n_running; i++) *decoded += out[i].n;
    for (int i = 0; i < n_running; i++) ck_assert_int_eq(hearth_engine_cancel(e, ids[i]), HEARTH_OK);
    run_checked(e);
    hearth_engine_free(e);
    return steps;
}

/* The prompts' share of a step (hearth_engine_params.prefill_share): while
 * sequences decode, a new prompt takes at most its share of each step and
 * the decode rows fill the rest; the share is kept from the decode rows
 * while the prompt lasts; all of it makes the decode rows wait. */
START_TEST(test_prefill_share)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("stories260K.gguf");
    int32_t decoded;
    /* one sequence decoding, a prompt of 64 in steps of 64: 16 rows a step
     * (4 steps, a token of the other each), not the 63 the decode row
     * leaves (2 steps) */
    ck_assert_int_eq(steps_to_first_token(m, 64, 0.25f, 1, 64, &decoded), 4);
    ck_assert_int_eq(decoded, 4);
    /* all of the step: the prompt at once, the decode row waiting */
    ck_assert_int_eq(steps_to_first_token(m, 64, 1.0f, 1, 64, &decoded), 1);
    ck_assert_int_eq(decoded, 0);
    /* six sequences decoding in steps of 8: half of each step is the
     * prompt's (2 steps for 8 tokens, 4 decode rows each), not the 2 rows
     * the decode rows leave (4 steps) */
    ck_assert_int_eq(steps_to_first_token(m, 8, 0.5f, 6, 8, &decoded), 2);
    ck_assert_int_eq(decoded, 8);
    /* a prompt shorter than its share gives the rest back to the decode
     * rows: 3 prompt rows and all 6 decode rows in one step */
    ck_assert_int_eq(steps_to_first_token(m, 16, 0.75f, 6, 3, &decoded), 1);
    ck_assert_int_eq(decoded, 6);
    hearth_model_free(m);
}
END_TEST

/* A pool too small for everything at once: sequences are preempted and
 * recomputed, and still give what they give alone. */
START_TEST(test_preemption)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("stories260K.gguf");
    const int32_t V = hearth_model_n_vocab(m);
    enum { N = 5 };
    int32_t prompts[N][48];
    static struct sample_out alone[N], together[N];
    memset(alone, 0, sizeof alone);
    memset(together, 0, sizeof together);
    for (int i = 0; i < N; i++) make_prompt(m, 200 + (uint64_t)i, 0, prompts[i], 30 + i);
    hearth_engine *e = new_engine(m, 64, 1024, 16, HEARTH_TYPE_F16, false);
    for (int i = 0; i < N; i++) {
        struct collector c = {&alone[i], 1, V, 0};
        submit(e, prompts[i], 30 + i, 60, 0.7f, (uint64_t)i, 1, &c);
        run_checked(e);
    }
    hearth_engine_free(e);
    /* 12 blocks of 16: each sequence grows to 6 */
    e = new_engine(m, 64, 12 * 16, 16, HEARTH_TYPE_F16, true);
    struct collector c[N];
    for (int i = 0; i < N; i++) {
        c[i] = (struct collector){&together[i], 1, V, 0};
        submit(e, prompts[i], 30 + i, 60, 0.7f, (uint64_t)i, 1, &c[i]);
    }
    run_checked(e);
    hearth_engine_stats s;
    hearth_engine_get_stats(e, &s);
    ck_assert_msg(s.preemptions > 0, "the pool was never short");
    int32_t preempted = 0;
    for (int i = 0; i < N; i++) {
        char what[64];
        snprintf(what, sizeof what, "request %d", i);
        expect_same(&together[i], &alone[i], what);
        preempted += together[i].stats.n_preempted;
    }
    ck_assert_int_eq(preempted, (int32_t)s.preemptions);
    ck_assert_int_eq(s.blocks_used, 0);
    hearth_engine_free(e);
    hearth_model_free(m);
}
END_TEST

/* Seeded random operations: submissions (shared prefixes, n samples),
 * cancellations at any point, steps, on a small pool; after every step
 * every block is accounted for; at the end every request that was not
 * cancelled gave what it gives alone. */
START_TEST(test_scheduler_stress)
{
    if (!test_require_data()) return;
    /* _i: the groups of steps in flight */
    const int32_t groups = 1 + _i;
    hearth_model *m = test_load_model("stories260K.gguf");
    const int32_t V = hearth_model_n_vocab(m);
    enum { N = 60, MAXS = 3 };
    static int32_t prompts[N][120];
    static int32_t lens[N], n_samples[N], max_tokens[N];
    static bool cancelled[N];
    static uint64_t ids[N];
    static struct sample_out outs[N][MAXS], alone[N][MAXS];
    static struct collector cols[N];
    memset(outs, 0, sizeof outs);
    memset(alone, 0, sizeof alone);
    test_rng rng;
    test_rng_seed(&rng, 4242);
    for (int i = 0; i < N; i++) {
        lens[i] = 1 + (int32_t)(test_rng_next(&rng) % 110);
        n_samples[i] = 1 + (int32_t)(test_rng_next(&rng) % MAXS);
        max_tokens[i] = 1 + (int32_t)(test_rng_next(&rng) % 40);
        make_prompt(m, 300 + (uint64_t)(i % 7), (i % 3) ? 33 : 0, prompts[i], lens[i]);
        cancelled[i] = false;
    }
    hearth_engine *e = new_engine(m, 48, 20 * 16, 16, HEARTH_TYPE_F16, true);
    ck_assert_int_eq(engine_set_groups(e, groups), HEARTH_OK);
    int submitted = 0, ops = 0, most_in_flight = 0;
    while (submitted < N || ops < 3000) {
        const uint64_t op = test_rng_next(&rng) % 10;
        ops++;
        if (op < 3 && submitted < N) {
            const int i = submitted++;
            cols[i] = (struct collector){outs[i], n_samples[i], V, 0};
            ids[i] = submit(e, prompts[i], lens[i], max_tokens[i], 0.9f, (uint64_t)i * 10, n_samples[i], &cols[i]);
        } else if (op == 3 && submitted > 0) {
            const int i = (int)(test_rng_next(&rng) % (uint64_t)submitted);
            if (!cancelled[i] && cols[i].finished < n_samples[i]) {
                ck_assert_int_eq(hearth_engine_cancel(e, ids[i]), HEARTH_OK);
                cancelled[i] = true;
            }
        } else {
            bool w;
            ck_assert_msg(hearth_engine_step(e, &w) == HEARTH_OK, "%s", hearth_last_error());
            hearth_status st = engine_check(e);
            ck_assert_msg(st == HEARTH_OK, "after %d operations: %s", ops, hearth_last_error());
            most_in_flight = HEARTH_MAX(most_in_flight, engine_steps_in_flight(e));
        }
    }
    ck_assert_int_eq(most_in_flight, groups > 1 ? groups : 0);
    run_checked(e);
    hearth_engine_stats s;
    hearth_engine_get_stats(e, &s);
    ck_assert_int_eq(s.blocks_used, 0);
    ck_assert_int_eq(s.running + s.waiting, 0);
    ck_assert_msg(s.preemptions > 0, "no preemption in the stress run");
    hearth_engine_free(e);

    /* the survivors alone */
    e = new_engine(m, 512, 4096, 16, HEARTH_TYPE_F16, false);
    int checked = 0;
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(cols[i].finished, n_samples[i]); /* every sample ended */
        if (cancelled[i]) continue;
        struct collector c = {alone[i], n_samples[i], V, 0};
        submit(e, prompts[i], lens[i], max_tokens[i], 0.9f, (uint64_t)i * 10, n_samples[i], &c);
        run_checked(e);
        for (int k = 0; k < n_samples[i]; k++) {
            char what[64];
            snprintf(what, sizeof what, "request %d sample %d", i, k);
            ck_assert_int_eq(outs[i][k].finish, HEARTH_FINISH_LENGTH);
            expect_same(&outs[i][k], &alone[i][k], what);
        }
        checked++;
    }
    /* with groups a step runs fewer sequences: more of them are
     * cancelled before they end */
    ck_assert_int_gt(checked, groups > 1 ? N / 4 : N / 2);
    hearth_engine_free(e);
    hearth_model_free(m);
}
END_TEST

/* Eight requests at once with groups of steps in flight (a pipeline's
 * rank 0 runs them so: engine_impl.h): each sequence's logits and tokens
 * are those it has alone, bit for bit -- a step's results given to
 * another group's sequences would differ -- with as many steps in flight
 * as groups; speculation keeps one step at a time and gives the same
 * tokens. */
START_TEST(test_groups_in_flight)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("stories260K.gguf");
    const int32_t V = hearth_model_n_vocab(m);
    enum { N = 8 };
    static int32_t prompts[N][80];
    static struct sample_out alone[N], together[N];
    memset(alone, 0, sizeof alone);
    int32_t lens[N];
    for (int i = 0; i < N; i++) {
        lens[i] = 3 + 9 * i;
        make_prompt(m, 700 + (uint64_t)i, i % 2 ? 20 : 0, prompts[i], lens[i]);
    }
    hearth_engine *e = new_engine(m, 512, 4096, 16, HEARTH_TYPE_F16, false);
    for (int i = 0; i < N; i++) {
        struct collector c = {&alone[i], 1, V, 0};
        submit(e, prompts[i], lens[i], 20 + i, i % 3 ? 0.8f : 0.0f, 11 + (uint64_t)i, 1, &c);
        run_checked(e);
        ck_assert_int_eq(alone[i].n, 20 + i);
    }
    hearth_engine_free(e);
    for (int32_t groups = 2; groups <= 4; groups++) {
        for (int spec = 0; spec < 2; spec++) {
            memset(together, 0, sizeof together);
            /* steps of 24 rows: the prompts take several */
            e = new_engine(m, 24, 4096, 16, HEARTH_TYPE_F16, true);
            ck_assert_int_eq(engine_set_groups(e, groups), HEARTH_OK);
            struct collector c[N];
            int most = 0;
            for (int i = 0; i < N; i++) {
                c[i] = (struct collector){&together[i], 1, V, 0};
                hearth_request r;
                hearth_request_default(&r);
                r.prompt = prompts[i];
                r.n_prompt = (size_t)lens[i];
                r.max_tokens = 20 + i;
                r.sampling.temperature = i % 3 ? 0.8f : 0.0f;
                r.sampling.seed = 11 + (uint64_t)i;
                r.ignore_eos = true;
                r.on_event = on_event;
                r.user = &c[i];
                /* one greedy request drafts by prompt lookup */
                if (spec && i == 3) {
                    r.speculation.draft_max = 4;
                    r.speculation.lookup = 2;
                }
                ck_assert_int_eq(hearth_engine_submit(e, &r, NULL), HEARTH_OK);
                /* the later ones join while the first ones run */
                if (i >= N / 2) {
                    bool w;
                    ck_assert_int_eq(hearth_engine_step(e, &w), HEARTH_OK);
                    most = HEARTH_MAX(most, engine_steps_in_flight(e));
                }
            }
            for (int guard = 0; guard < 100000; guard++) {
                bool w;
                ck_assert_msg(hearth_engine_step(e, &w) == HEARTH_OK, "%s", hearth_last_error());
                ck_assert_msg(engine_check(e) == HEARTH_OK, "%s", hearth_last_error());
                most = HEARTH_MAX(most, engine_steps_in_flight(e));
                hearth_engine_stats s;
                hearth_engine_get_stats(e, &s);
                if (!w && s.running == 0 && s.waiting == 0) break;
            }
            for (int i = 0; i < N; i++) {
                char what[96];
                snprintf(what, sizeof what, "%d groups%s, request %d", groups, spec ? ", speculation" : "", i);
                ck_assert_msg(c[i].finished == 1, "%s: did not finish", what);
                expect_same(&together[i], &alone[i], what);
            }
            /* speculation keeps one step at a time while it runs */
            if (!spec) ck_assert_int_eq(most, groups);
            hearth_engine_stats s;
            hearth_engine_get_stats(e, &s);
            ck_assert_int_eq(s.blocks_used, 0);
            if (spec) ck_assert_int_gt(s.drafted_tokens, 0);
            hearth_engine_free(e);
        }
    }
    hearth_model_free(m);
}
END_TEST

/* Cancellation while waiting, in prefill and decoding frees the blocks at
 * the next step and reports the reason. */
START_TEST(test_cancel)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("stories260K.gguf");
    const int32_t V = hearth_model_n_vocab(m);
    int32_t prompt[200];
    make_prompt(m, 5, 0, prompt, 200);
    hearth_engine *e = new_engine(m, 32, 1024, 16, HEARTH_TYPE_F16, false);
    for (int phase = 0; phase < 3; phase++) {
        static struct sample_out o;
        memset(&o, 0, sizeof o);
        struct collector c = {&o, 1, V, 0};
        const uint64_t id = submit(e, prompt, 200, 100, 0.0f, 0, 1, &c);
        const int steps = phase == 0 ? 0 : phase == 1 ? 2 : 9; /* waiting, prefill (32 a step), decode */
        for (int s = 0; s < steps; s++) {
            bool w;
            ck_assert_int_eq(hearth_engine_step(e, &w), HEARTH_OK);
        }
        hearth_engine_stats st;
        hearth_engine_get_stats(e, &st);
        if (phase > 0) ck_assert_int_gt(st.blocks_used, 0);
        if (phase == 2) ck_assert_int_gt(o.n, 0);
        ck_assert_int_eq(hearth_engine_cancel(e, id), HEARTH_OK);
        run_checked(e);
        ck_assert_int_eq(o.finish, HEARTH_FINISH_CANCELLED);
        hearth_engine_get_stats(e, &st);
        ck_assert_int_eq(st.blocks_used, 0);
    }
    ck_assert_int_eq(hearth_engine_cancel(e, 999), HEARTH_E_NOT_FOUND);
    hearth_engine_free(e);
    hearth_model_free(m);
}
END_TEST

/* Requests that can never run are refused, naming the limit. */
START_TEST(test_refusals)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("stories260K.gguf");
    hearth_engine *e = new_engine(m, 64, 256, 16, HEARTH_TYPE_F16, true);
    int32_t prompt[600];
    make_prompt(m, 1, 0, prompt, 600);
    hearth_request r;
    hearth_request_default(&r);
    r.prompt = prompt;
    r.n_prompt = 600;
    ck_assert_int_eq(hearth_engine_submit(e, &r, NULL), HEARTH_E_RANGE);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "at most 512 positions"));
    r.n_prompt = 300;
    ck_assert_int_eq(hearth_engine_submit(e, &r, NULL), HEARTH_E_RANGE);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "KV pool holds only 256"));
    r.n_prompt = 0;
    ck_assert_int_eq(hearth_engine_submit(e, &r, NULL), HEARTH_E_INVALID);
    r.n_prompt = 10;
    prompt[3] = 100000;
    ck_assert_int_eq(hearth_engine_submit(e, &r, NULL), HEARTH_E_INVALID);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "outside the vocabulary"));
    prompt[3] = 5;
    r.n = 1000;
    ck_assert_int_eq(hearth_engine_submit(e, &r, NULL), HEARTH_E_INVALID);
    r.n = 1;
    r.sampling.temperature = -1;
    ck_assert_int_eq(hearth_engine_submit(e, &r, NULL), HEARTH_E_INVALID);
    r.sampling.temperature = 0;

    /* alone, a sequence may fill the pool: it ends with "context" when its
     * next token finds no block (250 prompt positions, 6 more computed) */
    const int32_t V = hearth_model_n_vocab(m);
    static struct sample_out o;
    memset(&o, 0, sizeof o);
    struct collector c = {&o, 1, V, 0};
    submit(e, prompt, 250, -1, 0.0f, 0, 1, &c);
    run_checked(e);
    ck_assert_int_eq(o.finish, HEARTH_FINISH_CONTEXT);
    ck_assert_int_eq(o.n, 7);
    /* so a max_tokens the pool cannot hold is refused, not cut short: 7
     * tokens fit, 8 would need 257 positions */
    memset(&o, 0, sizeof o);
    c = (struct collector){&o, 1, V, 0};
    submit(e, prompt, 250, 7, 0.0f, 0, 1, &c);
    run_checked(e);
    ck_assert_int_eq(o.finish, HEARTH_FINISH_LENGTH);
    ck_assert_int_eq(o.n, 7);
    hearth_request_default(&r);
    r.prompt = prompt;
    r.n_prompt = 250;
    r.max_tokens = 8;
    ck_assert_int_eq(hearth_engine_submit(e, &r, NULL), HEARTH_E_RANGE);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "need 257 positions but the KV pool holds only 256"));
    hearth_engine_free(e);

    /* the context: a prompt of n_ctx - 2 tokens leaves 3 to generate, the
     * last of them never computed (a larger max_tokens needs no more of
     * the pool than the context) */
    e = new_engine(m, 64, 1024, 16, HEARTH_TYPE_F16, true);
    memset(&o, 0, sizeof o);
    c = (struct collector){&o, 1, V, 0};
    submit(e, prompt, 510, 1 << 20, 0.0f, 0, 1, &c);
    run_checked(e);
    ck_assert_int_eq(o.finish, HEARTH_FINISH_CONTEXT);
    ck_assert_int_eq(o.n, 3);
    memset(&o, 0, sizeof o);
    c = (struct collector){&o, 1, V, 0};
    submit(e, prompt, 512, -1, 0.0f, 0, 1, &c); /* a whole context of prompt: one token */
    run_checked(e);
    ck_assert_int_eq(o.n, 1);
    hearth_engine_free(e);

    /* the pool as reported: bytes a position times the positions allocated */
    e = new_engine(m, 64, 1000, 16, HEARTH_TYPE_F16, true);
    hearth_engine_stats s;
    hearth_engine_get_stats(e, &s);
    ck_assert_int_eq(s.n_blocks, 63); /* 1000 positions rounded up to blocks of 16 */
    ck_assert_int_eq(s.block_tokens, 16);
    /* keys and values of every layer: 4 kv heads of 64 / 8 halves (the
     * 640 bytes hearth inspect reports) */
    const uint64_t hd = (uint64_t)hearth_model_n_embd(m) / 8, n_kv_heads = 4;
    ck_assert_uint_eq(s.bytes_per_token, 2 * (uint64_t)hearth_model_n_layer(m) * n_kv_heads * hd * 2);
    ck_assert_uint_eq(s.bytes_per_token, 640);
    ck_assert_uint_eq(s.kv_bytes, s.bytes_per_token * 63 * 16);
    ck_assert_int_eq(s.max_full_sequences, 1); /* 512 positions need 32 of the 63 blocks */
    hearth_engine_free(e);

    hearth_engine_params p;
    hearth_engine_default_params(&p);
    p.block_tokens = 48;
    ck_assert_int_eq(hearth_engine_new(m, &p, &e), HEARTH_E_INVALID);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "power of two"));
    p.block_tokens = 0;
    p.kv_bytes = 10;
    ck_assert_int_eq(hearth_engine_new(m, &p, &e), HEARTH_E_INVALID);
    hearth_model_free(m);
}
END_TEST

/* Stop strings and end-of-generation with text: the text of the events
 * is the text a detokenizer gives, stop strings withheld. */
START_TEST(test_text_and_stop)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("stories260K.gguf");
    const int32_t V = hearth_model_n_vocab(m);
    const hearth_vocab *vocab = hearth_model_vocab(m);
    hearth_engine *e = new_engine(m, 64, 1024, 16, HEARTH_TYPE_F16, true);
    static struct sample_out o, o2;
    memset(&o, 0, sizeof o);
    struct collector c = {&o, 1, V, 0};
    hearth_request r;
    hearth_request_default(&r);
    r.prompt_text = "Once upon a time";
    r.prompt_text_len = strlen(r.prompt_text);
    r.tokenize_flags = HEARTH_TOKENIZE_ADD_SPECIAL;
    r.sampling.temperature = 0;
    r.max_tokens = 60;
    r.on_event = on_event;
    r.user = &c;
    ck_assert_int_eq(hearth_engine_submit(e, &r, NULL), HEARTH_OK);
    run_checked(e);
    ck_assert_int_gt(o.n, 5);
    char want[4096];
    size_t n;
    ck_assert_int_eq(hearth_detokenize(vocab, o.tokens, (size_t)o.n, HEARTH_DECODE_CONTINUATION, want, sizeof want,
                                       &n), HEARTH_OK);
    ck_assert_uint_eq(o.text_len, n);
    ck_assert(memcmp(o.text, want, n) == 0);
    /* stop at a word of that text: what comes before it, and nothing after */
    const char *word = strstr(want + 5, " ");
    ck_assert_ptr_nonnull(word);
    char stop[16];
    snprintf(stop, sizeof stop, "%.4s", word);
    const char *stops[1] = {stop};
    memset(&o2, 0, sizeof o2);
    c = (struct collector){&o2, 1, V, 0};
    r.stop = stops;
    r.n_stop = 1;
    ck_assert_int_eq(hearth_engine_submit(e, &r, NULL), HEARTH_OK);
    run_checked(e);
    ck_assert_int_eq(o2.finish, HEARTH_FINISH_STOP);
    ck_assert_int_eq(o2.stats.stop_index, 0);
    const size_t before = (size_t)(strstr(want, stop) - want);
    ck_assert_uint_eq(o2.text_len, before);
    ck_assert(memcmp(o2.text, want, before) == 0);
    hearth_engine_free(e);
    hearth_model_free(m);
}
END_TEST

/* The limits of one sequence: it uses every position of its context (a
 * prompt of n_ctx tokens gets one token, sampled from the logits of the
 * last position), max_tokens 0 computes the prompt (into the prefix cache)
 * and samples nothing, a batch larger than n_ctx x n_seq_max is cut, and
 * decode_flags choose how the text starts. */
START_TEST(test_limits)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("stories260K.gguf");
    const int32_t V = hearth_model_n_vocab(m);
    const hearth_vocab *vocab = hearth_model_vocab(m);
    hearth_engine_params p;
    hearth_engine_default_params(&p);
    p.n_ctx = 64;
    p.n_seq_max = 1;
    p.block_tokens = 16;
    p.n_threads = 2;
    hearth_engine *e;
    ck_assert_msg(hearth_engine_new(m, &p, &e) == HEARTH_OK, "%s", hearth_last_error());
    hearth_engine_params got;
    hearth_engine_get_params(e, &got);
    ck_assert_int_eq(got.n_ctx, 64);
    ck_assert_int_eq(got.n_batch, 64);
    ck_assert_int_eq(got.kv_tokens, 64);
    ck_assert_int_gt(got.n_threads, 0);
    ck_assert_int_eq(hearth_engine_n_gpu_layers(e), 0);
    ck_assert_ptr_null(hearth_engine_gpu_fallback(e));

    static int32_t prompt[65];
    make_prompt(m, 3, 0, prompt, 65);
    static struct sample_out o;
    struct collector c = {&o, 1, V, 0};
    const int32_t lens[3] = {64, 5, 40};
    for (int k = 0; k < 3; k++) {
        memset(&o, 0, sizeof o);
        c = (struct collector){&o, 1, V, 0};
        submit(e, prompt, lens[k], -1, 0.9f, 1, 1, &c);
        run_checked(e);
        ck_assert_int_eq(o.finish, HEARTH_FINISH_CONTEXT);
        ck_assert_int_eq(o.n, 64 - lens[k] + 1);
        ck_assert_int_eq(o.stats.n_generated, 64 - lens[k] + 1);
    }
    hearth_request r;
    hearth_request_default(&r);
    r.prompt = prompt;
    r.n_prompt = 65;
    ck_assert_int_eq(hearth_engine_submit(e, &r, NULL), HEARTH_E_RANGE);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "at most 64 positions"));

    /* max_tokens 0: nothing sampled; the same prompt then finds its whole
     * blocks cached */
    make_prompt(m, 4, 0, prompt, 40);
    for (int k = 0; k < 2; k++) {
        memset(&o, 0, sizeof o);
        c = (struct collector){&o, 1, V, 0};
        submit(e, prompt, 40, k == 0 ? 0 : 1, 0.9f, 1, 1, &c);
        run_checked(e);
        ck_assert_int_eq(o.finish, HEARTH_FINISH_LENGTH);
        ck_assert_int_eq(o.n, k);
        ck_assert_int_eq(o.stats.n_generated, k);
        ck_assert_int_eq(o.stats.n_prompt, 40);
        ck_assert_int_eq(o.stats.n_cached, k == 0 ? 0 : 32);
    }

    /* decode flags: without HEARTH_DECODE_CONTINUATION the text starts
     * without SentencePiece's space */
    for (int k = 0; k < 2; k++) {
        memset(&o, 0, sizeof o);
        c = (struct collector){&o, 1, V, 0};
        hearth_request_default(&r);
        ck_assert_uint_eq(r.decode_flags, HEARTH_DECODE_CONTINUATION);
        r.prompt_text = "Once upon a time,"; /* greedy: " there" */
        r.prompt_text_len = strlen(r.prompt_text);
        r.tokenize_flags = HEARTH_TOKENIZE_ADD_SPECIAL;
        r.sampling.temperature = 0;
        r.max_tokens = 20;
        r.decode_flags = k == 0 ? 0u : HEARTH_DECODE_CONTINUATION;
        r.on_event = on_event;
        r.user = &c;
        ck_assert_int_eq(hearth_engine_submit(e, &r, NULL), HEARTH_OK);
        run_checked(e);
        char want[4096];
        size_t n;
        ck_assert_int_eq(hearth_detokenize(vocab, o.tokens, (size_t)o.n, r.decode_flags, want, sizeof want, &n),
                         HEARTH_OK);
        ck_assert_uint_eq(o.text_len, n);
        ck_assert(memcmp(o.text, want, n) == 0);
        if (k == 1) ck_assert_int_eq(o.text[0], ' ');
        else ck_assert_int_ne(o.text[0], ' ');
    }
    hearth_engine_free(e);

    /* the batch is cut to every sequence's whole context, no further */
    p.n_seq_max = 4;
    p.n_batch = 1000;
    ck_assert_msg(hearth_engine_new(m, &p, &e) == HEARTH_OK, "%s", hearth_last_error());
    hearth_engine_get_params(e, &got);
    ck_assert_int_eq(got.n_batch, 256);
    hearth_engine_free(e);
    hearth_model_free(m);
}
END_TEST

static Suite *serving_suite(void)
{
    Suite *s = suite_create("serving");
    TCase *tc = tcase_create("engine");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_engine_matches_context);
    tcase_add_test(tc, test_invariance_stories);
    tcase_add_test(tc, test_prefill_share);
    tcase_add_test(tc, test_invariance_quantized);
    tcase_add_test(tc, test_parallel_samples);
    tcase_add_loop_test(tc, test_recurrent_sequences, 0, 2);
    tcase_add_test(tc, test_invariance_recurrent);
    tcase_add_test(tc, test_snapshot_eviction);
    tcase_add_test(tc, test_preemption);
    tcase_add_test(tc, test_cancel);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_text_and_stop);
    tcase_add_test(tc, test_limits);
    tcase_add_loop_test(tc, test_scheduler_stress, 0, 3);
    tcase_add_test(tc, test_groups_in_flight);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return test_run_suite(serving_suite());
}

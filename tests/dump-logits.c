/*
 * dump-logits.c -- the logits of every position of a token sequence, for
 * the architecture oracle (tests/archs-oracle.sh, tests/oracle-forward.py).
 *
 *     dump-logits [-c N_CTX] [-b N_BATCH] [-e N_GEN] [-k TYPE] [-m MTP.f32] [-P N] [-T N] MODEL OUT.f32 TOKEN...
 *
 * runs the tokens as one prompt (in batches of N_BATCH, default 7, so that
 * a prompt spans several batches) with an F32 KV cache (-k: of TYPE) and writes the
 * n_tokens x n_vocab logits to OUT as float32.  It then runs the same
 * tokens one at a time (decode) in a fresh sequence and fails unless
 * every logit equals the prompt's bit for bit.  With -m, a model with a
 * prediction ("NextN") layer also writes that layer's logits over the
 * same tokens to MTP.f32 (row i fed token i and the trunk's hidden state
 * of row i - 1), for the oracle; without such a layer, no file.
 *
 * With -e, the serving engine (blocks of 64 positions, two greedy samples
 * of the tokens as a prompt, N_GEN tokens each, in steps of 48 tokens)
 * must give every sampled token's logits bit for bit as the context does
 * for the same sequence, keep its pool consistent (engine_check) after
 * every step, and -- for a model whose every layer slides -- hold no more
 * blocks than the window needs (a model mixing sliding and full layers:
 * no more in its sliding layers' pool, fewer than its full layers hold,
 * while the context it equals keeps every position); then resume from the prefix cache (the
 * same prompt again, and a chat's next turn) and speculate (drafts
 * accepted and rejected, a recurrent state rolled back) with the same
 * bits.
 *
 * Then eight requests of different prompts (the tokens rotated and cut),
 * submitted together, must each give the context's logits bit for bit.
 *
 * With -P N, started by mpirun as N ranks (hearth-mpi(7)), the model runs
 * as a pipeline of N ranks, each holding its share of the layers: rank 0
 * does all of the above and writes OUT, and its logits must be those of
 * one process, bit for bit (tests/cli-mpi.sh compares the files).  The
 * eight requests then run in N groups of steps in flight (at most 8; an
 * attention model), and every group's step must have been in flight at
 * once.  With
 * -T N as well (or alone), each stage runs on N ranks in tensor parallel
 * (the job has P x N ranks), with the same bits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <math.h>

#include "engine.h"
#include "hearth.h"
#include "model.h"
#include "runner.h"

static int die(const char *what)
{
    fprintf(stderr, "dump-logits: %s: %s\n", what, hearth_last_error());
    return 1;
}

struct gen {
    int32_t V, n_gen;
    int32_t *tokens[2];   /* the samples' tokens */
    float *logits[2];     /* and the logits each was drawn from */
    int32_t n[2];
    int32_t max_blocks;   /* most blocks held at once */
    int32_t max_wblocks;  /* and of a window space's pool */
    hearth_engine *engine;
};

static void on_event(void *user, const hearth_event *ev)
{
    struct gen *g = user;
    if (ev->token < 0 || ev->index > 1) return;
    const int k = ev->index;
    if (g->n[k] < g->n_gen) {
        g->tokens[k][g->n[k]] = ev->token;
        memcpy(g->logits[k] + (size_t)g->n[k] * g->V, ev->logits, (size_t)g->V * sizeof(float));
        g->n[k]++;
    }
    hearth_engine_stats st;
    hearth_engine_get_stats(g->engine, &st);
    if (st.blocks_used > g->max_blocks) g->max_blocks = st.blocks_used;
    if (st.window_blocks_used > g->max_wblocks) g->max_wblocks = st.window_blocks_used;
}

/* A request of run_one(): its tokens and logits go to slot 1 of g. */
struct one {
    struct gen *g;
    hearth_request_stats stats;
};

static void on_event_one(void *user, const hearth_event *ev)
{
    struct one *o = user;
    struct gen *g = o->g;
    if (ev->token >= 0 && g->n[1] < g->n_gen) {
        g->tokens[1][g->n[1]] = ev->token;
        memcpy(g->logits[1] + (size_t)g->n[1] * g->V, ev->logits, (size_t)g->V * sizeof(float));
        g->n[1]++;
    }
    if (ev->stats) o->stats = *ev->stats;
}

/* The engine part of the check (see the top of the file). */
/* One greedy request of n_gen tokens in g's engine; its logits in
 * g->logits[1], its statistics in *stats; with lookup > 0, speculating
 * by prompt lookup (n-grams of that many tokens, up to 4 drafts), with
 * lookup < 0 by the engine's prediction layer (4 drafts, whatever their
 * probability). */
static int run_one_spec(struct gen *g, const int32_t *prompt, int n, int lookup, hearth_request_stats *stats)
{
    struct one o = {g, {0}};
    g->n[1] = 0;
    hearth_request rq;
    hearth_request_default(&rq);
    rq.prompt = prompt;
    rq.n_prompt = (size_t)n;
    rq.sampling.temperature = 0.0f;
    rq.max_tokens = g->n_gen;
    rq.ignore_eos = true;
    rq.on_event = on_event_one;
    rq.user = &o;
    if (lookup != 0) {
        rq.speculation.draft_max = 4;
        rq.speculation.lookup = lookup > 0 ? lookup : 0;
        rq.speculation.fixed = true;
    }
    uint64_t id;
    if (hearth_engine_submit(g->engine, &rq, &id)) return die("submit");
    for (;;) {
        bool did = false;
        if (hearth_engine_step(g->engine, &did)) return die("engine step");
        if (engine_check(g->engine)) return die("engine check");
        if (!did) break;
    }
    *stats = o.stats;
    return g->n[1] == g->n_gen ? 0 : (fprintf(stderr, "dump-logits: %d tokens of %d\n", g->n[1], g->n_gen), 1);
}

static int run_one(struct gen *g, const int32_t *prompt, int n, hearth_request_stats *stats)
{
    return run_one_spec(g, prompt, n, 0, stats);
}

/* The drafts of check_speculation(): plain decoding's tokens, every
 * third of them replaced, so that verifications accept some drafts and
 * reject others whatever the model. */
struct drafts {
    const struct gen *g;
    const int32_t *want; /* plain decoding's n_gen tokens */
    int count;
};

static void set_drafts(void *user, uint64_t request, int32_t index, int32_t *draft, int32_t n)
{
    (void)request;
    (void)index;
    struct drafts *d = user;
    const int32_t at = d->g->n[1]; /* the tokens taken so far: draft[0] is the next */
    for (int32_t i = 0; i < n; i++) {
        if (at + i < d->g->n_gen) draft[i] = d->want[at + i];
        if (++d->count % 3 == 0) draft[i] = (draft[i] + 1) % 7 + 3;
    }
}

/* Speculative decoding: on a prompt that repeats itself (so that prompt
 * lookup drafts, its drafts then replaced by set_drafts()), with drafts
 * accepted and rejected, the greedy tokens and
 * their logits are those of plain decoding, bit for bit; for a recurrent
 * model, a rejection rolls the state back to the checkpoint after the
 * last accepted token. */
static int check_speculation(struct gen *g, const int32_t *prompt, int n)
{
    const int32_t V = g->V, n_gen = g->n_gen;
    const int half = n / 2;
    int32_t *rep = malloc((size_t)(2 * half) * sizeof *rep);
    float *plain = malloc((size_t)n_gen * V * sizeof *plain);
    int32_t *plain_tokens = malloc((size_t)n_gen * sizeof *plain_tokens);
    if (!rep || !plain || !plain_tokens) return 1;
    memcpy(rep, prompt, (size_t)half * sizeof *rep);
    memcpy(rep + half, prompt, (size_t)half * sizeof *rep);
    hearth_request_stats st;
    int bad = run_one(g, rep, 2 * half, &st);
    if (!bad) {
        memcpy(plain, g->logits[1], (size_t)n_gen * V * sizeof *plain);
        memcpy(plain_tokens, g->tokens[1], (size_t)n_gen * sizeof *plain_tokens);
    }
    struct drafts d = {g, plain_tokens, 0};
    engine_set_draft_hook(g->engine, set_drafts, &d);
    if (!bad) bad = run_one_spec(g, rep, 2 * half, 1, &st);
    engine_set_draft_hook(g->engine, NULL, NULL);
    if (!bad && (st.n_drafted == 0 || st.n_accepted == 0 || st.n_accepted == st.n_drafted)) {
        fprintf(stderr, "dump-logits: speculation: %d drafted, %d accepted: no test of a partial rejection\n",
                st.n_drafted, st.n_accepted);
        bad = 1;
    }
    for (int i = 0; i < n_gen && !bad; i++)
        if (g->tokens[1][i] != plain_tokens[i] ||
            memcmp(g->logits[1] + (size_t)i * V, plain + (size_t)i * V, (size_t)V * sizeof(float))) {
            fprintf(stderr, "dump-logits: speculation, token %d: not what plain decoding gives\n", i);
            bad = 1;
        }
    if (!bad) printf("engine: speculation: %d drafted, %d accepted, the tokens and logits of plain decoding\n",
                     st.n_drafted, st.n_accepted);
    free(rep);
    free(plain);
    free(plain_tokens);
    return bad;
}

/* The prefix cache: the same prompt again resumes from the cached prefix
 * (for a recurrent model, from the state kept at its last block
 * boundary) and gives sample 0's logits again, bit for bit; a next turn
 * (the prompt, sample 0's tokens and more) resumes from the boundary
 * sample 0 reached and gives the context's logits. */
static int check_resume(struct gen *g, hearth_context *ctx, const int32_t *prompt, int n)
{
    const int32_t B = 64, V = g->V, n_gen = g->n_gen;
    hearth_request_stats st;
    if (run_one(g, prompt, n, &st)) return 1;
    const int32_t want = (n - 1) / B * B;
    if (st.n_cached != want) {
        fprintf(stderr, "dump-logits: the same prompt again: %d positions from the cache, expected %d\n",
                st.n_cached, want);
        return 1;
    }
    if (memcmp(g->logits[0], g->logits[1], (size_t)n_gen * V * sizeof(float))) {
        fprintf(stderr, "dump-logits: the same prompt from the cache gives other logits\n");
        return 1;
    }
    const int n2 = n + n_gen + 5;
    int32_t *turn = malloc((size_t)(n2 + n_gen) * sizeof *turn);
    if (!turn) return 1;
    memcpy(turn, prompt, (size_t)n * sizeof *turn);
    memcpy(turn + n, g->tokens[0], (size_t)n_gen * sizeof *turn);
    memcpy(turn + n + n_gen, prompt, 5 * sizeof *turn);
    int bad = run_one(g, turn, n2, &st);
    /* sample 0 computed all but its last token */
    const int32_t want2 = (n + n_gen - 1) / B * B;
    if (!bad && st.n_cached != want2) {
        fprintf(stderr, "dump-logits: the next turn: %d positions from the cache, expected %d\n", st.n_cached,
                want2);
        bad = 1;
    }
    memcpy(turn + n2, g->tokens[1], (size_t)n_gen * sizeof *turn);
    if (!bad && (hearth_context_rewind(ctx, 0) || hearth_eval(ctx, turn, n2 + n_gen - 1, n_gen))) bad = die("context");
    for (int i = 0; i < n_gen && !bad; i++)
        if (memcmp(hearth_context_logits(ctx, i), g->logits[1] + (size_t)i * V, (size_t)V * sizeof(float))) {
            fprintf(stderr, "dump-logits: the next turn, token %d: logits differ from the context's\n", i);
            bad = 1;
        }
    if (!bad) printf("engine: prefix cache: %d and %d positions resumed\n", want, want2);
    free(turn);
    return bad;
}

static int check_mtp(hearth_model *m, struct gen *g0, const int32_t *prompt, int n, int n_ctx);
static int mtp_from_scratch(hearth_model *m, const int32_t *all, int n, int n_ctx, float *out);


/* The engines of the checks: blocks of 64 positions, steps of 48 rows, an
 * F32 cache. */
/* The KV cache's type (-k; F32 unless asked). */
static hearth_type cache_type = HEARTH_TYPE_F32;

static void engine_params(hearth_engine_params *ep, int n_ctx)
{
    hearth_engine_default_params(ep);
    ep->n_ctx = n_ctx;
    ep->n_batch = 48;
    ep->block_tokens = 64;
    ep->kv_tokens = 2 * (int64_t)n_ctx;
    ep->n_threads = 2;
    ep->cache_type = cache_type;
}

/* Requests of check_window_pool() and check_groups(), by submission:
 * each one's generated tokens and their logits. */
#define POOL_REQUESTS 3
#define GROUP_REQUESTS 8
#define MANY_MAX 8
struct many {
    int32_t V, n_gen, n_req;
    uint64_t id[MANY_MAX];
    int32_t *tokens[MANY_MAX];
    float *logits[MANY_MAX];
    int32_t n[MANY_MAX];
};

static void on_event_many(void *user, const hearth_event *ev)
{
    struct many *g = user;
    for (int k = 0; k < g->n_req; k++)
        if (ev->request == g->id[k] && ev->token >= 0 && g->n[k] < g->n_gen) {
            g->tokens[k][g->n[k]] = ev->token;
            memcpy(g->logits[k] + (size_t)g->n[k] * g->V, ev->logits, (size_t)g->V * sizeof(float));
            g->n[k]++;
        }
}

/* A model mixing sliding and full layers, its sliding layers' pool sized
 * for two sequences at once (n_seq_max 2) while the other pool holds
 * many: three requests of different prompts, submitted together, run
 * two at a time with the pool consistent after every step, never more
 * of its blocks held than it has, and each request's tokens and logits
 * those of the context (which keeps every position), bit for bit. */
static int check_window_pool(hearth_model *m, hearth_context *ctx, const int32_t *prompt, int n, int n_gen,
                             int n_ctx)
{
    const int32_t V = hearth_model_n_vocab(m);
    hearth_engine_params ep;
    engine_params(&ep, n_ctx);
    ep.n_seq_max = 2;
    ep.kv_tokens = 4 * (int64_t)n_ctx;
    hearth_engine *e;
    if (hearth_engine_new(m, &ep, &e)) return die("engine");
    hearth_engine_stats es;
    hearth_engine_get_stats(e, &es);
    struct many g = {.V = V, .n_gen = n_gen, .n_req = POOL_REQUESTS};
    int32_t *prompts = malloc((size_t)POOL_REQUESTS * (size_t)n * sizeof *prompts);
    int32_t *all = malloc((size_t)(n + n_gen) * sizeof *all);
    int bad = !prompts || !all;
    for (int k = 0; k < POOL_REQUESTS && !bad; k++) {
        g.tokens[k] = calloc((size_t)n_gen, sizeof(int32_t));
        g.logits[k] = malloc((size_t)n_gen * (size_t)V * sizeof(float));
        bad = !g.tokens[k] || !g.logits[k];
        /* the prompt rotated: the same tokens in another order */
        for (int i = 0; i < n && !bad; i++) prompts[k * n + i] = prompt[(i + 7 * k) % n];
        hearth_request rq;
        hearth_request_default(&rq);
        rq.prompt = prompts + k * n;
        rq.n_prompt = (size_t)n;
        rq.sampling.temperature = 0.0f;
        rq.max_tokens = n_gen;
        rq.ignore_eos = true;
        rq.on_event = on_event_many;
        rq.user = &g;
        if (!bad && hearth_engine_submit(e, &rq, &g.id[k])) bad = die("submit");
    }
    int32_t max_w = 0, max_running = 0;
    for (bool did = true; did && !bad;) {
        if (hearth_engine_step(e, &did)) bad = die("engine step");
        else if (engine_check(e)) bad = die("engine check");
        hearth_engine_get_stats(e, &es);
        if (es.window_blocks_used > max_w) max_w = es.window_blocks_used;
        if (es.running > max_running) max_running = es.running;
    }
    if (!bad && (max_w > es.window_blocks || es.window_blocks >= es.n_blocks || max_running != 2)) {
        fprintf(stderr, "dump-logits: the sliding layers' pool: %d of %d blocks held (the other pool: %d), %d "
                "sequences at once\n", max_w, es.window_blocks, es.n_blocks, max_running);
        bad = 1;
    }
    for (int k = 0; k < POOL_REQUESTS && !bad; k++) {
        if (g.n[k] != n_gen) {
            fprintf(stderr, "dump-logits: request %d: %d tokens of %d\n", k, g.n[k], n_gen);
            bad = 1;
            break;
        }
        memcpy(all, prompts + k * n, (size_t)n * sizeof *all);
        memcpy(all + n, g.tokens[k], (size_t)n_gen * sizeof *all);
        if (hearth_context_rewind(ctx, 0) || hearth_eval(ctx, all, n + n_gen - 1, n_gen)) bad = die("context");
        for (int i = 0; i < n_gen && !bad; i++)
            if (memcmp(hearth_context_logits(ctx, i), g.logits[k] + (size_t)i * V, (size_t)V * sizeof(float))) {
                fprintf(stderr, "dump-logits: request %d, token %d: logits differ from the context's\n", k, i);
                bad = 1;
            }
    }
    if (!bad)
        printf("engine: %d requests, 2 at a time, in %d blocks of the sliding layers (at most %d held); ",
               POOL_REQUESTS, es.window_blocks, max_w);
    hearth_engine_free(e);
    for (int k = 0; k < POOL_REQUESTS; k++) {
        free(g.tokens[k]);
        free(g.logits[k]);
    }
    free(prompts);
    free(all);
    return bad;
}

/* Eight greedy requests of different prompts submitted together: with
 * steps in flight (groups > 1: a pipeline's rank 0), as many at once as
 * groups; each request's tokens and logits those of the context, bit for
 * bit (a step's logits given to another group's sequences would not be). */
static int check_groups(hearth_model *m, hearth_context *ctx, const int32_t *prompt, int n, int n_gen, int n_ctx,
                        int groups)
{
    if (n < GROUP_REQUESTS + 1) return 0;
    const int32_t V = hearth_model_n_vocab(m);
    if (n_gen > 10) n_gen = 10;
    hearth_engine_params ep;
    engine_params(&ep, n_ctx);
    ep.n_seq_max = GROUP_REQUESTS;
    ep.kv_tokens = GROUP_REQUESTS * (int64_t)n_ctx;
    hearth_engine *e;
    if (hearth_engine_new(m, &ep, &e)) return die("engine");
    struct many g = {.V = V, .n_gen = n_gen, .n_req = GROUP_REQUESTS};
    int32_t *prompts = malloc((size_t)GROUP_REQUESTS * (size_t)n * sizeof *prompts);
    int32_t *all = malloc((size_t)(n + n_gen) * sizeof *all);
    int bad = !prompts || !all;
    for (int k = 0; k < GROUP_REQUESTS && !bad; k++) {
        g.tokens[k] = calloc((size_t)n_gen, sizeof(int32_t));
        g.logits[k] = malloc((size_t)n_gen * (size_t)V * sizeof(float));
        bad = !g.tokens[k] || !g.logits[k];
        for (int i = 0; i < n && !bad; i++) prompts[k * n + i] = prompt[(i + 5 * k) % n];
        hearth_request rq;
        hearth_request_default(&rq);
        rq.prompt = prompts + k * n;
        rq.n_prompt = (size_t)(n - k);
        rq.sampling.temperature = 0.0f;
        rq.max_tokens = n_gen;
        rq.ignore_eos = true;
        rq.on_event = on_event_many;
        rq.user = &g;
        if (!bad && hearth_engine_submit(e, &rq, &g.id[k])) bad = die("submit");
    }
    int32_t most = 0;
    for (bool did = true; did && !bad;) {
        if (hearth_engine_step(e, &did)) bad = die("engine step");
        else if (engine_check(e)) bad = die("engine check");
        if (engine_steps_in_flight(e) > most) most = engine_steps_in_flight(e);
    }
    const int32_t want = groups > 1 ? groups : 0;
    if (!bad && most != want) {
        fprintf(stderr, "dump-logits: at most %d steps in flight at once, %d expected\n", most, want);
        bad = 1;
    }
    for (int k = 0; k < GROUP_REQUESTS && !bad; k++) {
        if (g.n[k] != n_gen) {
            fprintf(stderr, "dump-logits: request %d: %d tokens of %d\n", k, g.n[k], n_gen);
            bad = 1;
            break;
        }
        memcpy(all, prompts + k * n, (size_t)(n - k) * sizeof *all);
        memcpy(all + n - k, g.tokens[k], (size_t)n_gen * sizeof *all);
        if (hearth_context_rewind(ctx, 0) || hearth_eval(ctx, all, n - k + n_gen - 1, n_gen)) bad = die("context");
        for (int i = 0; i < n_gen && !bad; i++)
            if (memcmp(hearth_context_logits(ctx, i), g.logits[k] + (size_t)i * V, (size_t)V * sizeof(float))) {
                fprintf(stderr, "dump-logits: request %d of %d together, token %d: logits differ from the "
                        "context's\n", k, GROUP_REQUESTS, i);
                bad = 1;
            }
    }
    if (!bad)
        printf("engine: %d requests together, %d steps in flight at most: the context's logits\n",
               GROUP_REQUESTS, most);
    hearth_engine_free(e);
    for (int k = 0; k < GROUP_REQUESTS; k++) {
        free(g.tokens[k]);
        free(g.logits[k]);
    }
    free(prompts);
    free(all);
    return bad;
}

static int check_engine(hearth_model *m, hearth_context *ctx, const int32_t *prompt, int n, int n_gen, int n_ctx)
{
    const int32_t V = hearth_model_n_vocab(m);
    struct gen g = {.V = V, .n_gen = n_gen};
    for (int k = 0; k < 2; k++) {
        g.tokens[k] = calloc((size_t)n_gen, sizeof(int32_t));
        g.logits[k] = malloc((size_t)n_gen * (size_t)V * sizeof(float));
        if (!g.tokens[k] || !g.logits[k]) return 1;
    }
    hearth_engine_params ep;
    engine_params(&ep, n_ctx);
    if (hearth_engine_new(m, &ep, &g.engine)) return die("engine");
    hearth_request rq;
    hearth_request_default(&rq);
    rq.prompt = prompt;
    rq.n_prompt = (size_t)n;
    rq.sampling.temperature = 0.0f;
    rq.max_tokens = n_gen;
    rq.n = 2;
    rq.ignore_eos = true;
    rq.on_event = on_event;
    rq.user = &g;
    uint64_t id;
    if (hearth_engine_submit(g.engine, &rq, &id)) return die("submit");
    for (;;) {
        bool did = false;
        if (hearth_engine_step(g.engine, &did)) return die("engine step");
        if (engine_check(g.engine)) return die("engine check");
        if (!did) break;
    }
    int bad = 0;
    for (int k = 0; k < 2 && !bad; k++) {
        if (g.n[k] != n_gen) {
            fprintf(stderr, "dump-logits: sample %d: %d tokens, expected %d\n", k, g.n[k], n_gen);
            return 1;
        }
        /* the context over prompt + sampled tokens */
        int32_t *all = malloc((size_t)(n + n_gen) * sizeof *all);
        if (!all) return 1;
        memcpy(all, prompt, (size_t)n * sizeof *all);
        memcpy(all + n, g.tokens[k], (size_t)n_gen * sizeof *all);
        if (hearth_context_rewind(ctx, 0) || hearth_eval(ctx, all, n + n_gen - 1, n_gen))
            return die("context");
        for (int i = 0; i < n_gen && !bad; i++)
            if (memcmp(hearth_context_logits(ctx, i), g.logits[k] + (size_t)i * V, (size_t)V * sizeof(float))) {
                fprintf(stderr, "dump-logits: engine sample %d, token %d: logits differ from the context's\n", k, i);
                bad = 1;
            }
        free(all);
    }
    /* every layer slides: at most the window's blocks, the block being
     * written and one of each sample's own, beyond what the window needs;
     * the same of the sliding layers' pool when the layers mix */
    const int32_t window = hparams_max_window(&m->hp);
    const int32_t total_blocks = (n + n_gen + 63) / 64;
    hearth_engine_stats es;
    hearth_engine_get_stats(g.engine, &es);
    if (es.window > 0) {
        const int32_t bound = 2 * ((es.window + 63) / 64 + 1) + 1;
        printf("engine: sliding layers' window %d, at most %d of their %d blocks held (the full layers': %d, "
               "a sample's whole sequence: %d); ", es.window, g.max_wblocks, es.window_blocks, g.max_blocks,
               total_blocks);
        /* and fewer than the full layers' blocks: the window's went back */
        if (g.max_wblocks > bound || g.max_wblocks == 0 || g.max_wblocks >= g.max_blocks) {
            fprintf(stderr, "dump-logits: %d window blocks held, the window's bound is %d, the full layers "
                    "held %d\n", g.max_wblocks, bound, g.max_blocks);
            bad = 1;
        }
        if (g.max_blocks < total_blocks) {
            fprintf(stderr, "dump-logits: the full layers held %d blocks, fewer than a sequence's %d\n",
                    g.max_blocks, total_blocks);
            bad = 1;
        }
        if (!bad) bad = check_window_pool(m, ctx, prompt, n, n_gen, n_ctx);
    } else if (!hearth_model_is_recurrent(m) && m->hp.n_swa > 0 && m->hp.n_swa < n_ctx && window == 0) {
        fprintf(stderr, "dump-logits: a model mixing sliding and full layers without a window pool\n");
        bad = 1;
    }
    if (window > 0) {
        const int32_t bound = 2 * ((window + 63) / 64 + 1) + 1;
        printf("engine: window %d, at most %d blocks held (a sample's whole sequence: %d)\n", window,
               g.max_blocks, total_blocks);
        if (g.max_blocks > bound) {
            fprintf(stderr, "dump-logits: %d blocks held, more than the window's %d\n", g.max_blocks, bound);
            bad = 1;
        }
    }
    /* the checks below need the first 60 tokens of a generation at most
     * (past a block boundary of an 80-token prompt) */
    if (g.n_gen > 60) g.n_gen = 60;
    if (!bad) bad = check_resume(&g, ctx, prompt, n);
    if (!bad) bad = check_speculation(&g, prompt, n);
    if (!bad && hearth_model_mtp_layers(m) > 0) bad = check_mtp(m, &g, prompt, n, n_ctx);
    hearth_engine_free(g.engine);
    for (int k = 0; k < 2; k++) {
        free(g.tokens[k]);
        free(g.logits[k]);
    }
    return bad;
}



/* The prediction layer's logits of the draft passes, by pass (0, 1) and
 * position. */
struct mtp_seen {
    int32_t V, n_pos;
    float *logits[2];
    bool *seen[2];
};

static void on_mtp(void *user, int32_t pass, int32_t pos, const float *logits)
{
    struct mtp_seen *m = user;
    if (pass > 1 || pos < 0 || pos >= m->n_pos) return;
    memcpy(m->logits[pass] + (size_t)pos * m->V, logits, (size_t)m->V * sizeof(float));
    m->seen[pass][pos] = true;
}

/* One run of check_speculation()'s request, drafting with the prediction
 * layer (its drafts then replaced by set_drafts()), into *seen. */
static int run_mtp(struct gen *g, const int32_t *rep, int n, const int32_t *plain_tokens, struct mtp_seen *seen,
                   hearth_request_stats *st)
{
    struct drafts d = {g, plain_tokens, 0};
    for (int k = 0; k < 2; k++) memset(seen->seen[k], 0, (size_t)seen->n_pos * sizeof(bool));
    engine_set_draft_hook(g->engine, set_drafts, &d);
    engine_set_mtp_hook(g->engine, on_mtp, seen);
    int bad = run_one_spec(g, rep, n, -1, st);
    engine_set_draft_hook(g->engine, NULL, NULL);
    engine_set_mtp_hook(g->engine, NULL, NULL);
    return bad;
}

/* The prediction layer over prompt + tokens from scratch (one sequence,
 * one step each for the trunk and the layer, a fresh runner): its logits
 * at every position, into out (n x V). */
static int mtp_from_scratch(hearth_model *m, const int32_t *all, int n, int n_ctx, float *out)
{
    const int32_t B = 64, V = hearth_model_n_vocab(m), E = hearth_model_n_embd(m);
    const struct runner_params rp = {
        .n_batch = n, .n_ctx = n_ctx, .n_threads = 2, .cache_type = HEARTH_TYPE_F32,
        .block_tokens = B, .n_blocks = (n_ctx + B - 1) / B, .n_states = 1, .mtp = true,
    };
    struct runner *r;
    if (runner_new(m, &rp, &r)) return die("runner");
    int32_t *pos = malloc((size_t)n * sizeof *pos), *rows = malloc((size_t)n * sizeof *rows);
    int32_t *blocks = malloc((size_t)rp.n_blocks * sizeof *blocks);
    float *h = calloc((size_t)n * (size_t)E, sizeof *h);
    int bad = !pos || !rows || !blocks || !h;
    for (int i = 0; !bad && i < n; i++) pos[i] = rows[i] = i;
    for (int i = 0; !bad && i < rp.n_blocks; i++) blocks[i] = i;
    const int32_t seq_start[2] = {0, n}, table_start[1] = {0}, state_slot[1] = {0};
    struct runner_step step = {
        .tokens = all,
        .bp = {.pos = pos, .slot = pos, .n_tokens = n, .n_seqs = 1, .seq_start = seq_start, .blocks = blocks,
               .table_start = table_start, .state_slot = state_slot},
    };
    if (!bad && runner_eval(r, &step)) bad = die("trunk");
    for (int i = 1; !bad && i < n; i++) memcpy(h + (size_t)i * E, runner_hidden(r, i - 1), (size_t)E * sizeof *h);
    step.logit_rows = rows;
    step.n_logits = n;
    if (!bad && runner_eval_mtp(r, &step, h)) bad = die("prediction layer");
    for (int i = 0; !bad && i < n; i++) memcpy(out + (size_t)i * V, runner_logits(r, i), (size_t)V * sizeof *out);
    runner_free(r);
    free(pos);
    free(rows);
    free(blocks);
    free(h);
    return bad;
}

/* Multi-token prediction (a model with a prediction layer): an engine
 * drafting with it gives plain decoding's tokens and logits bit for bit
 * (drafts accepted and rejected, as check_speculation()); the layer
 * running beside the trunk changes none of the trunk's logits; each
 * first draft's logits are those of the layer computed from scratch over
 * the whole sequence (so its keys and values, kept across prefill,
 * verifications, rejections and a snapshot resume, are right); and
 * without the prefix cache the drafts' logits are the same bits. */
static int check_mtp(hearth_model *m, struct gen *g0, const int32_t *prompt, int n, int n_ctx)
{
    const int32_t V = g0->V, n_gen = g0->n_gen;
    const int half = n / 2, n_all = 2 * half + n_gen;
    struct gen g = {.V = V, .n_gen = n_gen};
    int32_t *rep = malloc((size_t)n_all * sizeof *rep);
    float *plain = malloc((size_t)n_gen * V * sizeof *plain);
    float *scratch = malloc((size_t)n_all * V * sizeof *scratch);
    int32_t *plain_tokens = malloc((size_t)n_gen * sizeof *plain_tokens);
    struct mtp_seen seen[2];
    for (int k = 0; k < 2; k++) {
        g.tokens[k] = calloc((size_t)n_gen, sizeof(int32_t));
        g.logits[k] = malloc((size_t)n_gen * V * sizeof(float));
        seen[k] = (struct mtp_seen){.V = V, .n_pos = n_all};
        for (int p = 0; p < 2; p++) {
            seen[k].logits[p] = malloc((size_t)n_all * V * sizeof(float));
            seen[k].seen[p] = calloc((size_t)n_all, sizeof(bool));
            if (!seen[k].logits[p] || !seen[k].seen[p]) return 1;
        }
        if (!g.tokens[k] || !g.logits[k]) return 1;
    }
    if (!rep || !plain || !scratch || !plain_tokens) return 1;
    memcpy(rep, prompt, (size_t)half * sizeof *rep);
    memcpy(rep + half, prompt, (size_t)half * sizeof *rep);
    hearth_engine_params ep;
    engine_params(&ep, n_ctx);
    ep.mtp = true;
    int bad = 0;
    hearth_request_stats st;
    /* plain decoding in an engine without the layer, then with it */
    if (run_one(g0, rep, 2 * half, &st)) return 1;
    memcpy(plain, g0->logits[1], (size_t)n_gen * V * sizeof *plain);
    memcpy(plain_tokens, g0->tokens[1], (size_t)n_gen * sizeof *plain_tokens);
    if (hearth_engine_new(m, &ep, &g.engine)) return die("engine with the prediction layer");
    if (run_one(&g, rep, 2 * half, &st)) return 1;
    if (memcmp(g.logits[1], plain, (size_t)n_gen * V * sizeof *plain)) {
        fprintf(stderr, "dump-logits: prediction layer: the trunk's logits change beside it\n");
        bad = 1;
    }
    /* drafting with it, from the snapshot the plain run kept */
    if (!bad) bad = run_mtp(&g, rep, 2 * half, plain_tokens, &seen[0], &st);
    if (!bad && st.n_cached == 0 && (2 * half - 1) / 64 > 0) {
        fprintf(stderr, "dump-logits: prediction layer: the same prompt again took nothing from the cache\n");
        bad = 1;
    }
    if (!bad && (st.n_drafted == 0 || st.n_accepted == 0 || st.n_accepted == st.n_drafted)) {
        fprintf(stderr, "dump-logits: prediction layer: %d drafted, %d accepted: no test of a partial rejection\n",
                st.n_drafted, st.n_accepted);
        bad = 1;
    }
    for (int i = 0; i < n_gen && !bad; i++)
        if (g.tokens[1][i] != plain_tokens[i] ||
            memcmp(g.logits[1] + (size_t)i * V, plain + (size_t)i * V, (size_t)V * sizeof(float))) {
            fprintf(stderr, "dump-logits: prediction layer drafting, token %d: not what plain decoding gives\n", i);
            bad = 1;
        }
    /* the first drafts against the layer from scratch */
    memcpy(rep + 2 * half, plain_tokens, (size_t)n_gen * sizeof *rep);
    if (!bad) bad = mtp_from_scratch(m, rep, 2 * half + n_gen - 1, n_ctx, scratch);
    int n_first = 0;
    double worst = 0.0;
    for (int p = 0; p < n_all - 1 && !bad; p++) {
        if (!seen[0].seen[0][p]) continue;
        n_first++;
        const float *a = seen[0].logits[0] + (size_t)p * V, *b = scratch + (size_t)p * V;
        double mx = 1.0, d = 0.0;
        for (int32_t t = 0; t < V; t++) {
            mx = fmax(mx, fabs((double)b[t]));
            d = fmax(d, fabs((double)a[t] - (double)b[t]));
        }
        worst = fmax(worst, d / mx);
        if (d > 1e-4 * mx) {
            fprintf(stderr, "dump-logits: prediction layer, first draft at position %d: logits differ from the "
                    "layer's from scratch by %g (of %g)\n", p, d, mx);
            bad = 1;
        }
    }
    if (!bad && n_first == 0) {
        fprintf(stderr, "dump-logits: prediction layer: no first draft seen\n");
        bad = 1;
    }
    hearth_engine_free(g.engine);
    g.engine = NULL;
    /* without the prefix cache: the same drafts, the same bits */
    ep.no_prefix_cache = true;
    if (!bad && hearth_engine_new(m, &ep, &g.engine)) bad = die("engine without the prefix cache");
    if (!bad) bad = run_mtp(&g, rep, 2 * half, plain_tokens, &seen[1], &st);
    for (int p = 0; p < 2 && !bad; p++)
        for (int i = 0; i < n_all && !bad; i++) {
            if (seen[0].seen[p][i] != seen[1].seen[p][i] ||
                (seen[0].seen[p][i] && memcmp(seen[0].logits[p] + (size_t)i * V, seen[1].logits[p] + (size_t)i * V,
                                              (size_t)V * sizeof(float)))) {
                fprintf(stderr, "dump-logits: prediction layer, pass %d at position %d: other drafts without the "
                        "prefix cache\n", p, i);
                bad = 1;
            }
        }
    if (!bad)
        printf("engine: prediction layer: %d drafted, %d accepted, the tokens and logits of plain decoding; %d "
               "first drafts within %.2g of the layer from scratch\n", st.n_drafted, st.n_accepted, n_first, worst);
    hearth_engine_free(g.engine);
    for (int k = 0; k < 2; k++) {
        free(g.tokens[k]);
        free(g.logits[k]);
        for (int p = 0; p < 2; p++) {
            free(seen[k].logits[p]);
            free(seen[k].seen[p]);
        }
    }
    free(rep);
    free(plain);
    free(scratch);
    free(plain_tokens);
    return bad;
}

/* n floats to path; 1 (after a message) when it cannot. */
static int write_floats(const char *path, const float *x, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(x, sizeof *x, n, f) != n || fclose(f)) {
        fprintf(stderr, "dump-logits: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int n_ctx = 512, n_batch = 7, n_gen = 0, n_ranks = 0, n_tp = 0, opt;
    const char *mtp_path = NULL;
    while ((opt = getopt(argc, argv, "c:b:e:k:m:P:T:")) != -1) {
        if (opt == 'c') n_ctx = atoi(optarg);
        else if (opt == 'P') n_ranks = atoi(optarg);
        else if (opt == 'T') n_tp = atoi(optarg);
        else if (opt == 'k') {
            if (hearth_type_from_name(optarg, &cache_type)) return die(optarg);
        }
        else if (opt == 'b') n_batch = atoi(optarg);
        else if (opt == 'e') n_gen = atoi(optarg);
        else if (opt == 'm') mtp_path = optarg;
        else return 2;
    }
    if (argc - optind < 3) {
        fprintf(stderr, "usage: dump-logits [-c N_CTX] [-b N_BATCH] [-e N_GEN] [-k CACHE_TYPE] [-m MTP.f32] [-P N_RANKS] [-T N_TP] MODEL "
                "OUT.f32 TOKEN...\n");
        return 2;
    }
    const char *model_path = argv[optind], *out_path = argv[optind + 1];
    const int n = argc - optind - 2;
    int32_t *tokens = calloc((size_t)n, sizeof *tokens);
    if (!tokens) return 1;
    for (int i = 0; i < n; i++) tokens[i] = atoi(argv[optind + 2 + i]);

    hearth_model *m;
    hearth_model_params mp;
    hearth_model_default_params(&mp);
    if (n_tp > 1 && hearth_pipeline_open_tp(n_ranks > 1 ? n_ranks : 1, n_tp, 0, &mp.pipeline)) return die("pipeline");
    if (n_tp <= 1 && n_ranks > 1 && hearth_pipeline_open(n_ranks, 0, &mp.pipeline)) return die("pipeline");
    if (hearth_model_load(model_path, &mp, &m)) {
        die(model_path);
        hearth_pipeline_close(mp.pipeline, true);
        return 1;
    }
    if (mp.pipeline) {
        if (hearth_pipeline_handshake(mp.pipeline, m, "dump-logits")) {
            die("handshake");
            hearth_pipeline_close(mp.pipeline, true);
        }
        if (hearth_pipeline_rank(mp.pipeline) > 0) {
            /* the other ranks run their layers until rank 0 is done */
            const bool failed = hearth_pipeline_serve(mp.pipeline, m, 2) != HEARTH_OK;
            if (failed) die("serve");
            hearth_model_free(m);
            hearth_pipeline_close(mp.pipeline, failed);
            free(tokens);
            return 0;
        }
    }
    const int32_t V = hearth_model_n_vocab(m);
    hearth_context_params cp;
    hearth_context_default_params(&cp);
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_threads = 2;
    cp.cache_type = cache_type;
    hearth_context *ctx;
    if (hearth_context_new(m, &cp, &ctx)) return die("context");
    if (hearth_eval(ctx, tokens, n, n)) return die("prompt");
    float *prefill = malloc((size_t)n * (size_t)V * sizeof *prefill);
    if (!prefill) return 1;
    for (int i = 0; i < n; i++) memcpy(prefill + (size_t)i * V, hearth_context_logits(ctx, i), (size_t)V * sizeof(float));
    if (write_floats(out_path, prefill, (size_t)n * V)) return 1;
    /* decode: one token at a time gives the same bits */
    if (hearth_context_rewind(ctx, 0)) return die("rewind");
    int bad = 0;
    for (int i = 0; i < n; i++) {
        if (hearth_eval(ctx, tokens + i, 1, 1)) return die("decode");
        if (memcmp(hearth_context_logits(ctx, 0), prefill + (size_t)i * V, (size_t)V * sizeof(float)) != 0) {
            if (!bad) fprintf(stderr, "dump-logits: position %d: decode differs from the prompt\n", i);
            bad = 1;
        }
    }
    if (!bad && mtp_path && hearth_model_mtp_layers(m) > 0) {
        /* the prediction layer's logits over the tokens, for the oracle
         * (in the prompt's buffer, compared already) */
        if (mtp_from_scratch(m, tokens, n, n_ctx, prefill) || write_floats(mtp_path, prefill, (size_t)n * V))
            return 1;
    }
    if (!bad && n_gen > 0) bad = check_engine(m, ctx, tokens, n, n_gen, n_ctx);
    /* steps in flight: a pipeline of stages without tensor parallelism,
     * an attention model's engine */
    const int groups = n_ranks > 1 && n_tp <= 1 && !hearth_model_is_recurrent(m) ? (n_ranks < 8 ? n_ranks : 8) : 1;
    if (!bad && n_gen > 0) bad = check_groups(m, ctx, tokens, n, n_gen, n_ctx, groups);
    hearth_context_free(ctx);
    hearth_model_free(m);
    hearth_pipeline_close(mp.pipeline, false);
    free(prefill);
    free(tokens);
    return bad;
}

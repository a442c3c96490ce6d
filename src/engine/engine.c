/*
 * engine.c -- the serving engine (hearth.h, "serving engine"): requests
 * and their sequences, the scheduler that builds each step's batch, the
 * prefix cache's use of the pool, and the sampling and text of every
 * sequence.
 *
 * A sequence is the tokens it knows (prompt and generated so far), how
 * many of them have keys and values in the pool (n_computed), and its
 * block table.  Every sequence in the running set has work in each step:
 * the tokens it knows but has not computed.  A decoding sequence has one
 * (the token it sampled last); a sequence in prefill has the rest of its
 * prompt, of which a step takes a chunk.  When a step computes a
 * sequence's last known token, its logits are sampled and the sequence
 * knows one token more.  Prefill and decode are the same operation, which
 * is also how a preempted sequence is recomputed: it is put back with
 * n_computed 0 and runs its whole known text again, through the prefix
 * cache where its blocks are still there.
 *
 * Each step (schedule()):
 *   1. running sequences with one token to compute (decode), oldest
 *      admission first, each taking a row of the budget; one that needs a
 *      new block and finds none preempts the most recently admitted
 *      running sequence (itself if that is the newest);
 *   2. running sequences in prefill, oldest first, each taking a chunk of
 *      what is left of the budget and of the free blocks;
 *   3. waiting sequences, in order, admitted while the running set has
 *      room and the pool has blocks for their whole prompt: their cached
 *      prefix is taken from the pool, and their first chunk joins the step.
 *
 * Speculation (hearth.h, hearth_speculation): a decoding sequence whose
 * request asks for it plans k drafted tokens in step 1 (the length chosen
 * from its acceptance rate and the measured costs, speculate.h) and takes
 * room for 1 + k rows.  Before the forward pass the drafts are made (by
 * prompt lookup, or by the draft model in passes of its own over all the
 * drafting sequences, which first catch its KV up with the tokens the
 * sequence knows), and the sequence's rows are its last token and the
 * drafts, every row with logits.  Verification then takes tokens one by
 * one (greedy match or the rejection rule) until one differs from the
 * draft; the keys and values of the rejected rows are dropped by
 * truncating the block tables (seq_truncate(): n_computed goes back and
 * the blocks past it return to the pool), of the model and of the draft.
 * Positions past n_computed are never read: attention sees only
 * positions up to a row's own, which the row writes first.
 */
#include "internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "kv_cache.h"
#include "kv_pool.h"
#include "model.h"
#include "rng.h"
#include "rstate.h"
#include "runner.h"
#include "speculate.h"

#define DEFAULT_N_SEQ_MAX 64
#define MAX_SAMPLES 64
#define MAX_DRAFT 256          /* most drafted tokens per step */
#define MAX_LOOKUP_NGRAM 64
/* A sequence whose drafts do not pay drafts again after this many decode
 * steps, to measure its acceptance rate again. */
#define SPEC_PROBE_STEPS 16
/* The decay of a sequence's acceptance counts at every verification. */
#define SPEC_ALPHA_DECAY 0.9

struct request;

struct seq {
    struct request *req;
    int32_t index;               /* sample of the request */
    hearth_token *tokens;        /* prompt, then generated tokens */
    int32_t n_tokens, tokens_cap;
    int32_t n_computed;          /* positions with keys and values in the pool */
    int32_t *table;              /* block table; -1: a block given back because
                                  * it lies wholly before every layer's window */
    int32_t n_table, table_cap;
    int32_t n_dropped;           /* leading table entries given back so */
    uint64_t *hashes;            /* chain hash of each full block so far (as
                                  * many allocated as table_cap) */
    int32_t n_hashed;
    hearth_sampler *sampler;
    hearth_text_stream *stream;
    hearth_request_stats stats;
    double t_first, t_last;      /* first and latest token, s */
    int32_t state_slot;          /* recurrent models: its state (rstate.h); -1: none */
    bool running;
    bool finished;
    /* this step */
    int32_t chunk;               /* tokens scheduled */
    struct seq *prev, *next;     /* in the waiting or running list */
    /* speculation */
    int32_t *draft;              /* this step's drafted tokens, positions
                                  * n_tokens .. n_tokens + n_draft - 1 */
    int32_t n_draft;
    int32_t k_plan;              /* tokens to draft this step */
    float *draft_q;              /* the draft's distribution of each drafted
                                  * token (sampled requests with a draft
                                  * model), n_vocab floats each; NULL: the
                                  * drafts are point masses */
    bool drafting;               /* in this step's draft passes */
    int32_t d_chunk;             /* rows in the current draft pass */
    int32_t *dtable;             /* the draft model's block table */
    int32_t n_dtable, dtable_cap;
    int32_t d_computed;          /* positions with keys and values in the
                                  * draft's pool */
    hearth_sampler *dsampler;    /* the request's sampling chain over the
                                  * draft's logits */
    hearth_rng rng;              /* draws of drafts, acceptances, residuals */
    double acc_w, tested_w;      /* decayed counts: drafted tokens accepted
                                  * and tested */
    int32_t idle;                /* decode steps without drafting */
};

struct request {
    uint64_t id;
    hearth_request params;       /* with the arrays below */
    char **stop;                 /* copies of the stop strings */
    hearth_logit_bias *bias;
    hearth_grammar *grammar;     /* the reference this request holds */
    hearth_token *prompt;
    int32_t n_prompt;
    int32_t n;                   /* samples */
    struct seq **seqs;           /* n; seqs[i] NULL until forked */
    bool forked;
    double t_submit;
    struct request *next_new;    /* in the submission queue */
};

struct seq_list {
    struct seq *head, *tail;
    int32_t n;
};

struct hearth_engine {
    const hearth_model *model;
    const hearth_vocab *vocab;
    hearth_engine_params params;
    struct runner *runner;
    struct kv_pool *pool;
    uint64_t identity;
    int32_t B;                   /* positions per block */
    int32_t window;              /* hparams_max_window: when every layer slides,
                                  * the positions a sequence must keep; 0: all */
    int32_t *refs_scratch;       /* engine_check */

    struct seq_list waiting, running; /* running: in admission order */

    /* the step's batch */
    int32_t *tokens, *pos, *slot, *seq_start, *table_start, *logit_rows;
    int32_t *blocks;
    size_t blocks_cap;
    /* recurrent models: the free state slots (n_seq_max in all) and the
     * step's sequences' slots */
    int32_t *free_states;
    int32_t n_free_states;
    int32_t *state_slot;
    struct seq **step_seqs;
    struct seq **logit_seqs;

    /* speculation */
    const hearth_model *draft_model;
    struct runner *drunner;      /* the draft model's forward pass and KV */
    struct kv_pool *dpool;       /* its blocks (no prefix cache) */
    int32_t *drefs_scratch;
    struct seq **draft_seqs;     /* this step's drafting sequences */
    float *p_buf, *r_buf;        /* n_vocab each: the model's distribution,
                                  * the residual */
    struct spec_fit target_fit;  /* a step's time by its rows */
    struct spec_fit draft_fit;   /* a draft pass's time by its rows */
    void (*draft_hook)(void *user, uint64_t request, int32_t index, int32_t *draft, int32_t n);
    void *draft_hook_user;

    /* submissions and cancellations from other threads */
    pthread_mutex_t lock;
    struct request *new_head, *new_tail;
    uint64_t *cancels;
    size_t n_cancels, cancels_cap;
    uint64_t next_id;
    hearth_engine_stats stats;   /* the snapshot hearth_engine_get_stats() reads */
    uint64_t steps, preemptions, prompt_tokens, generated_tokens;
    uint64_t draft_steps, drafted_tokens, accepted_tokens, verify_steps;
    /* requests not finished, for cancellation: all that were taken in */
    struct request **live;
    size_t n_live, live_cap;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *hearth_finish_reason_name(hearth_finish_reason reason)
{
    switch (reason) {
    case HEARTH_FINISH_STOP: return "stop";
    case HEARTH_FINISH_EOS: return "eos";
    case HEARTH_FINISH_LENGTH: return "length";
    case HEARTH_FINISH_CONTEXT: return "context";
    case HEARTH_FINISH_CANCELLED: return "cancelled";
    case HEARTH_FINISH_ERROR: return "error";
    case HEARTH_FINISH_NONE: break;
    }
    return "none";
}

void hearth_engine_default_params(hearth_engine_params *p)
{
    memset(p, 0, sizeof *p);
    p->cache_type = HEARTH_TYPE_F16;
}

void hearth_request_default(hearth_request *r)
{
    memset(r, 0, sizeof *r);
    hearth_sampler_params_default(&r->sampling);
    r->max_tokens = -1;
    r->n = 1;
    r->decode_flags = HEARTH_DECODE_CONTINUATION;
}

/* ---- lists ----------------------------------------------------------------------- */

static void list_remove(struct seq_list *l, struct seq *s)
{
    if (s->prev) s->prev->next = s->next;
    else l->head = s->next;
    if (s->next) s->next->prev = s->prev;
    else l->tail = s->prev;
    s->prev = s->next = NULL;
    l->n--;
}

static void list_append(struct seq_list *l, struct seq *s)
{
    s->prev = l->tail;
    s->next = NULL;
    if (l->tail) l->tail->next = s;
    else l->head = s;
    l->tail = s;
    l->n++;
}

static void list_prepend(struct seq_list *l, struct seq *s)
{
    s->prev = NULL;
    s->next = l->head;
    if (l->head) l->head->prev = s;
    else l->tail = s;
    l->head = s;
    l->n++;
}

/* ---- the identity key ------------------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + UINT64_C(0x9e3779b97f4a7c15) + (h << 6) + (h >> 2);
    h = (h ^ (h >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    h = (h ^ (h >> 27)) * UINT64_C(0x94d049bb133111eb);
    return h ^ (h >> 31);
}

static uint64_t mix_bytes(uint64_t h, const void *data, size_t n)
{
    const uint8_t *p = data;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = mix(h, v);
        p += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, p, n);
    return mix(h, v ^ ((uint64_t)n << 56));
}

static uint64_t mix_float(uint64_t h, float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return mix(h, u);
}

/* Everything that changes the keys and values of a token at a position:
 * the weights (every tensor's name, type, shape and place, and samples of
 * its data: the first, middle and last 256 bytes), the cache type and
 * block size, RoPE with its scaling and frequency factors.  Sampling
 * parameters change no key or value and are not part of it. */
static uint64_t identity_key(const hearth_engine *e)
{
    const hearth_gguf *g = e->model->gguf;
    uint64_t h = mix(0, UINT64_C(0x6865617274680001)); /* "hearth", version 1 of the key */
    h = mix(h, hearth_gguf_file_size(g));
    const int64_t n = hearth_gguf_n_tensors(g);
    for (int64_t i = 0; i < n; i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(g, i);
        h = mix_bytes(h, t->name, strlen(t->name));
        h = mix(h, (uint64_t)t->type);
        for (int d = 0; d < 4; d++) h = mix(h, (uint64_t)t->ne[d]);
        h = mix(h, t->offset);
        const size_t sample = t->bytes < 256 ? t->bytes : 256;
        const uint8_t *data = t->data;
        h = mix_bytes(h, data, sample);
        h = mix_bytes(h, data + (t->bytes - sample) / 2, sample);
        h = mix_bytes(h, data + t->bytes - sample, sample);
    }
    const struct rope_params *r = &e->model->hp.rope;
    h = mix(h, (uint64_t)r->style);
    h = mix(h, (uint64_t)r->n_dims);
    h = mix_float(h, r->freq_base);
    h = mix_float(h, r->freq_scale);
    if (r->freq_factors)
        for (int32_t i = 0; i < r->n_dims / 2; i++) h = mix_float(h, r->freq_factors[i]);
    h = mix(h, (uint64_t)e->params.cache_type);
    h = mix(h, (uint64_t)e->B);
    return h;
}

uint64_t engine_identity(const hearth_engine *e) { return e->identity; }

/* ---- creation ----------------------------------------------------------------------- */

static hearth_status check_params(const hearth_model *model, hearth_engine_params *p)
{
    const struct hparams *hp = &model->hp;
    HEARTH_TRY(runner_resolve_sizes(model, &p->n_ctx, &p->n_batch, &p->n_threads));
    if (p->n_batch > 65536) return hearth_error(HEARTH_E_INVALID, "batch size %d is too large (at most 65536)",
                                                p->n_batch);
    if (p->n_seq_max < 0 || p->n_seq_max > 4096)
        return hearth_error(HEARTH_E_INVALID, "%d parallel sequences: the limit is 1 to 4096", p->n_seq_max);
    if (p->n_seq_max == 0) p->n_seq_max = DEFAULT_N_SEQ_MAX;
    if (p->chunk_size < 0 || p->chunk_size > 4096)
        return hearth_error(HEARTH_E_INVALID, "chunk size %d: 1 to 4096 tokens (0: the default)",
                            p->chunk_size);
    /* no step can have more rows than every sequence's whole context */
    if (p->n_ctx > 0 && (int64_t)p->n_batch > (int64_t)p->n_ctx * p->n_seq_max)
        p->n_batch = p->n_ctx * p->n_seq_max;
    if (p->block_tokens == 0) p->block_tokens = HEARTH_KV_BLOCK_DEFAULT;
    if (p->block_tokens < 16 || p->block_tokens > 1024 || (p->block_tokens & (p->block_tokens - 1)))
        return hearth_error(HEARTH_E_INVALID, "KV block size %d: a power of two from 16 to 1024 positions",
                            p->block_tokens);
    if (p->kv_tokens < 0) return hearth_error(HEARTH_E_INVALID, "KV pool of %lld positions", (long long)p->kv_tokens);
    const size_t per_token = kv_cache_bytes_per_token(p->cache_type, hp->n_layer, hp->n_head_kv, hp->head_dim);
    if (per_token == 0)
        return kv_cache_check(p->cache_type, p->block_tokens, 1, hp->n_head_kv, hp->head_dim);
    if (p->kv_tokens == 0) {
        if (p->kv_bytes > 0) {
            p->kv_tokens = (int64_t)(p->kv_bytes / per_token);
            if (p->kv_tokens < p->block_tokens)
                return hearth_error(HEARTH_E_INVALID, "a KV pool of %llu bytes holds less than one block of %d "
                                    "positions (%zu bytes a position)", (unsigned long long)p->kv_bytes,
                                    p->block_tokens, per_token);
        } else {
            p->kv_tokens = p->n_ctx;
        }
    }
    if (p->kv_tokens > INT32_MAX - p->block_tokens)
        return hearth_error(HEARTH_E_INVALID, "KV pool of %lld positions is too large", (long long)p->kv_tokens);
    return HEARTH_OK;
}

static void request_free(struct request *r);

void hearth_engine_free(hearth_engine *e)
{
    if (!e) return;
    for (size_t i = 0; i < e->n_live; i++) request_free(e->live[i]);
    free(e->live);
    for (struct request *r = e->new_head; r;) {
        struct request *next = r->next_new;
        request_free(r);
        r = next;
    }
    runner_free(e->runner);
    kv_pool_free(e->pool);
    runner_free(e->drunner);
    kv_pool_free(e->dpool);
    free(e->drefs_scratch);
    free(e->draft_seqs);
    free(e->p_buf);
    free(e->r_buf);
    free(e->refs_scratch);
    free(e->tokens);
    free(e->pos);
    free(e->slot);
    free(e->seq_start);
    free(e->table_start);
    free(e->logit_rows);
    free(e->blocks);
    free(e->free_states);
    free(e->state_slot);
    free(e->step_seqs);
    free(e->logit_seqs);
    free(e->cancels);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

static void pool_stats(hearth_engine *e);
static void update_stats_locked(hearth_engine *e);

/* A draft model must share the model's vocabulary: the same size and the
 * same text of every token. */
static hearth_status check_draft(const hearth_model *model, const hearth_model *draft)
{
    const int32_t n = hearth_model_n_vocab(model), nd = hearth_model_n_vocab(draft);
    if (n != nd)
        return hearth_error(HEARTH_E_INVALID, "the draft model has a vocabulary of %d tokens, the model %d", nd, n);
    const hearth_vocab *v = hearth_model_vocab(model), *vd = hearth_model_vocab(draft);
    if (!v || !vd) {
        if (v != vd)
            return hearth_error(HEARTH_E_INVALID, "the %s has a tokenizer and the %s none",
                                v ? "model" : "draft model", v ? "draft model" : "model");
        return HEARTH_OK;
    }
    for (int32_t t = 0; t < n; t++) {
        size_t len, lend;
        const char *a = hearth_vocab_token_text(v, t, &len);
        const char *b = hearth_vocab_token_text(vd, t, &lend);
        if (!a || !b || len != lend || memcmp(a, b, len) != 0)
            return hearth_error(HEARTH_E_INVALID, "the draft model's vocabulary differs from the model's at "
                                "token %d: '%.*s' in the draft, '%.*s' in the model", t,
                                b ? (int)HEARTH_MIN(lend, 64) : 0, b ? b : "", a ? (int)HEARTH_MIN(len, 64) : 0,
                                a ? a : "");
    }
    return HEARTH_OK;
}

hearth_status hearth_engine_new(const hearth_model *model, const hearth_engine_params *params,
                                hearth_engine **out)
{
    if (!model || !out) return hearth_error(HEARTH_E_INVALID, "hearth_engine_new: NULL argument");
    hearth_engine_params p;
    if (params) p = *params;
    else hearth_engine_default_params(&p);
    HEARTH_TRY(check_params(model, &p));
    const int32_t B = p.block_tokens;
    const int32_t n_blocks = (int32_t)((p.kv_tokens + B - 1) / B);
    const int32_t n_batch = p.n_batch;

    hearth_engine *e = hearth_calloc(1, sizeof *e, "the engine");
    if (!e) return HEARTH_E_NOMEM;
    pthread_mutex_init(&e->lock, NULL);
    e->model = model;
    e->vocab = hearth_model_vocab(model);
    p.kv_tokens = (int64_t)n_blocks * B;
    e->params = p;
    e->B = B;
    e->window = hparams_max_window(&model->hp);
    e->next_id = 1;
    struct runner_params rp = {
        .n_batch = n_batch,
        .n_ctx = p.n_ctx,
        .n_threads = p.n_threads,
        .cache_type = p.cache_type,
        .block_tokens = B,
        .n_blocks = n_blocks,
        .n_states = p.n_seq_max,
        .chunk_size = p.chunk_size,
    };
    hearth_status st = runner_new(model, &rp, &e->runner);
    if (!st && runner_rstate(e->runner)) {
        /* A recurrent sequence's memory is its state, in a slot of its
         * own for as long as it runs; blocks only count its positions.
         * A state summarizes the whole prefix and cannot be shared or cut,
         * so the prefix cache does not apply. */
        e->params.no_prefix_cache = true;
        p.no_prefix_cache = true;
        e->free_states = hearth_calloc((size_t)p.n_seq_max, sizeof *e->free_states, "the state slots");
        e->state_slot = hearth_calloc((size_t)n_batch, sizeof *e->state_slot, "the step's state slots");
        if (!e->free_states || !e->state_slot) st = HEARTH_E_NOMEM;
        for (int32_t i = 0; !st && i < p.n_seq_max; i++) e->free_states[i] = p.n_seq_max - 1 - i;
        e->n_free_states = p.n_seq_max;
    }
    if (!st) st = kv_pool_new(n_blocks, B, &e->pool);
    if (!st && p.draft_model) {
        e->draft_model = p.draft_model;
        st = check_draft(model, p.draft_model);
        if (!st && hearth_model_is_recurrent(p.draft_model))
            st = hearth_error(HEARTH_E_UNSUPPORTED, "a recurrent model (%s) cannot be a draft model: its "
                              "state cannot be rolled back", hearth_model_arch(p.draft_model));
        if (!st) st = runner_new(p.draft_model, &rp, &e->drunner);
        if (!st) st = kv_pool_new(n_blocks, B, &e->dpool);
        if (!st) {
            e->drefs_scratch = hearth_calloc((size_t)n_blocks, sizeof *e->drefs_scratch, "the pool check");
            if (!e->drefs_scratch) st = HEARTH_E_NOMEM;
        }
    }
    if (!st) {
        const size_t V = (size_t)hearth_model_n_vocab(model);
        e->p_buf = hearth_calloc(V, sizeof *e->p_buf, "the verification's distribution");
        e->r_buf = hearth_calloc(V, sizeof *e->r_buf, "the verification's distribution");
        e->draft_seqs = hearth_calloc((size_t)n_batch, sizeof *e->draft_seqs, "the drafting sequences");
        if (!e->p_buf || !e->r_buf || !e->draft_seqs) st = HEARTH_E_NOMEM;
    }
    if (!st) {
        const size_t nb = (size_t)n_batch;
        e->tokens = hearth_calloc(nb, sizeof *e->tokens, "the step's tokens");
        e->pos = hearth_calloc(nb, sizeof *e->pos, "the step's positions");
        e->slot = hearth_calloc(nb, sizeof *e->slot, "the step's slots");
        e->seq_start = hearth_calloc(nb + 1, sizeof *e->seq_start, "the step's sequences");
        e->table_start = hearth_calloc(nb, sizeof *e->table_start, "the step's sequences");
        e->logit_rows = hearth_calloc(nb, sizeof *e->logit_rows, "the step's logit rows");
        e->step_seqs = hearth_calloc(nb, sizeof *e->step_seqs, "the step's sequences");
        e->logit_seqs = hearth_calloc(nb, sizeof *e->logit_seqs, "the step's sequences");
        e->refs_scratch = hearth_calloc((size_t)n_blocks, sizeof *e->refs_scratch, "the pool check");
        if (!e->tokens || !e->pos || !e->slot || !e->seq_start || !e->table_start || !e->logit_rows ||
            !e->step_seqs || !e->logit_seqs || !e->refs_scratch)
            st = HEARTH_E_NOMEM;
    }
    if (st) {
        hearth_engine_free(e);
        return st;
    }
    e->identity = identity_key(e);
    pool_stats(e); /* no other thread knows the engine yet */
    update_stats_locked(e);
    *out = e;
    return HEARTH_OK;
}

/* ---- submission -------------------------------------------------------------------- */

static void seq_free(struct seq *s)
{
    if (!s) return;
    free(s->tokens);
    free(s->table);
    free(s->hashes);
    hearth_sampler_free(s->sampler);
    hearth_text_stream_free(s->stream);
    free(s->draft);
    free(s->draft_q);
    free(s->dtable);
    hearth_sampler_free(s->dsampler);
    free(s);
}

static void request_free(struct request *r)
{
    if (!r) return;
    if (r->seqs)
        for (int32_t k = 0; k < r->n; k++) seq_free(r->seqs[k]);
    if (r->stop)
        for (size_t k = 0; k < r->params.n_stop; k++) free(r->stop[k]);
    free(r->stop);
    free(r->bias);
    hearth_grammar_free(r->grammar);
    free(r->prompt);
    free(r->seqs);
    free(r);
}

/* A sequence of sample `index` of r with the prompt as its known tokens. */
static hearth_status seq_new(hearth_engine *e, struct request *r, int32_t index, struct seq **out)
{
    struct seq *s = hearth_calloc(1, sizeof *s, "a sequence");
    if (!s) return HEARTH_E_NOMEM;
    s->req = r;
    s->index = index;
    s->state_slot = -1;
    s->stats.stop_index = -1;
    s->stats.n_prompt = r->n_prompt;
    s->tokens_cap = r->n_prompt + 16;
    s->tokens = hearth_calloc((size_t)s->tokens_cap, sizeof *s->tokens, "a sequence's tokens");
    hearth_status st = s->tokens ? HEARTH_OK : HEARTH_E_NOMEM;
    if (!st) {
        memcpy(s->tokens, r->prompt, (size_t)r->n_prompt * sizeof *s->tokens);
        s->n_tokens = r->n_prompt;
        hearth_sampler_params sp = r->params.sampling;
        sp.seed += (uint64_t)index;
        st = hearth_sampler_new(&sp, hearth_model_n_vocab(e->model), &s->sampler);
        const hearth_speculation *spec = &r->params.speculation;
        if (!st && spec->draft_max > 0) {
            /* a stream of its own, apart from the sampler's */
            hearth_rng_seed(&s->rng, sp.seed ^ UINT64_C(0x73706563756c6174));
            s->draft = hearth_calloc((size_t)spec->draft_max, sizeof *s->draft, "the drafted tokens");
            if (!s->draft) st = HEARTH_E_NOMEM;
            if (!st && spec->lookup == 0)
                st = hearth_sampler_new(&sp, hearth_model_n_vocab(e->model), &s->dsampler);
        }
    }
    for (int32_t i = 0; !st && i < r->n_prompt; i++)
        st = hearth_sampler_accept_prompt(s->sampler, r->prompt[i]);
    if (!st) {
        hearth_text_stream_options o = {
            .decode_flags = r->params.decode_flags,
            .stop = (const char *const *)r->stop,
            .n_stop = r->params.n_stop,
        };
        st = hearth_text_stream_new(e->vocab, &o, &s->stream);
    }
    if (st) {
        seq_free(s);
        return st;
    }
    *out = s;
    return HEARTH_OK;
}

static hearth_status check_speculation(const hearth_engine *e, const hearth_speculation *sp)
{
    if (sp->draft_max < 0 || sp->draft_max > MAX_DRAFT)
        return hearth_error(HEARTH_E_INVALID, "draft_max = %d: the limit is 0 to %d tokens", sp->draft_max, MAX_DRAFT);
    if (sp->draft_max == 0) return HEARTH_OK;
    if (sp->draft_max >= e->params.n_batch)
        return hearth_error(HEARTH_E_INVALID, "draft_max = %d: a step holds at most %d tokens (the batch)",
                            sp->draft_max, e->params.n_batch);
    if (sp->draft_min < 0 || sp->draft_min > sp->draft_max)
        return hearth_error(HEARTH_E_INVALID, "draft_min = %d: the limit is 0 to draft_max (%d)", sp->draft_min,
                            sp->draft_max);
    if (!(sp->draft_p_min >= 0.0f && sp->draft_p_min <= 1.0f))
        return hearth_error(HEARTH_E_INVALID, "draft_p_min = %g: the limit is 0 to 1", (double)sp->draft_p_min);
    if (sp->lookup < 0 || sp->lookup > MAX_LOOKUP_NGRAM)
        return hearth_error(HEARTH_E_INVALID, "lookup = %d: n-grams of 0 to %d tokens", sp->lookup,
                            MAX_LOOKUP_NGRAM);
    if (hearth_model_is_recurrent(e->model))
        return hearth_error(HEARTH_E_UNSUPPORTED, "speculative decoding rolls the keys and values of "
                            "rejected tokens back; a recurrent model (%s) keeps a state that cannot be "
                            "rolled back", hearth_model_arch(e->model));
    if (sp->lookup == 0 && !e->draft_model)
        return hearth_error(HEARTH_E_INVALID, "speculation by a draft model was asked for, but the engine has "
                            "no draft model");
    return HEARTH_OK;
}

static hearth_status copy_request(hearth_engine *e, const hearth_request *q, struct request *r)
{
    r->params = *q;
    r->n = q->n > 0 ? q->n : 1;
    if (q->n < 0 || r->n > MAX_SAMPLES || r->n > e->params.n_seq_max)
        return hearth_error(HEARTH_E_INVALID, "n = %d samples: the limit is 1 to %d", q->n,
                            HEARTH_MIN(MAX_SAMPLES, e->params.n_seq_max));
    HEARTH_TRY(hearth_sampler_params_check(&q->sampling));
    HEARTH_TRY(check_speculation(e, &q->speculation));
    r->grammar = hearth_grammar_ref(q->sampling.grammar);
    /* A grammar's state follows the tokens taken one by one; a request
     * with one decodes without speculation (hearth-speculation(7)). */
    if (q->sampling.grammar) r->params.speculation.draft_max = 0;
    if (q->n_stop > 0 && !q->stop) return hearth_error(HEARTH_E_INVALID, "%zu stop strings but no array", q->n_stop);
    if (q->n_stop > 64) return hearth_error(HEARTH_E_INVALID, "%zu stop strings: at most 64", q->n_stop);
    if (q->n_stop) {
        r->stop = hearth_calloc(q->n_stop, sizeof *r->stop, "stop strings");
        if (!r->stop) return HEARTH_E_NOMEM;
        for (size_t i = 0; i < q->n_stop; i++) {
            if (!q->stop[i]) return hearth_error(HEARTH_E_INVALID, "stop string %zu is NULL", i);
            r->stop[i] = hearth_strdup(q->stop[i], "a stop string");
            if (!r->stop[i]) return HEARTH_E_NOMEM;
        }
    }
    r->params.stop = (const char *const *)r->stop;
    if (q->sampling.n_logit_bias) {
        if (!q->sampling.logit_bias)
            return hearth_error(HEARTH_E_INVALID, "%zu logit biases but no array", q->sampling.n_logit_bias);
        r->bias = hearth_calloc(q->sampling.n_logit_bias, sizeof *r->bias, "logit biases");
        if (!r->bias) return HEARTH_E_NOMEM;
        memcpy(r->bias, q->sampling.logit_bias, q->sampling.n_logit_bias * sizeof *r->bias);
    }
    r->params.sampling.logit_bias = r->bias;

    /* the prompt */
    const int32_t n_vocab = hearth_model_n_vocab(e->model);
    if (q->prompt) {
        if (q->n_prompt > (size_t)INT32_MAX) return hearth_error(HEARTH_E_RANGE, "a prompt of %zu tokens", q->n_prompt);
        r->n_prompt = (int32_t)q->n_prompt;
        r->prompt = hearth_calloc(q->n_prompt ? q->n_prompt : 1, sizeof *r->prompt, "the prompt");
        if (!r->prompt) return HEARTH_E_NOMEM;
        memcpy(r->prompt, q->prompt, q->n_prompt * sizeof *r->prompt);
    } else if (q->prompt_text) {
        if (!e->vocab) return hearth_error(HEARTH_E_INVALID, "the model has no tokenizer for a text prompt");
        size_t n;
        hearth_status st = hearth_tokenize_alloc(e->vocab, q->prompt_text, q->prompt_text_len,
                                                 q->tokenize_flags, &r->prompt, &n);
        if (st) return st;
        if (n > (size_t)INT32_MAX) return hearth_error(HEARTH_E_RANGE, "a prompt of %zu tokens", n);
        r->n_prompt = (int32_t)n;
    }
    r->params.prompt = r->prompt;
    r->params.n_prompt = (size_t)r->n_prompt;
    r->params.prompt_text = NULL;
    if (r->n_prompt == 0) return hearth_error(HEARTH_E_INVALID, "the prompt is empty");
    for (int32_t i = 0; i < r->n_prompt; i++)
        if (r->prompt[i] < 0 || r->prompt[i] >= n_vocab)
            return hearth_error(HEARTH_E_INVALID, "prompt token %d at index %d is outside the vocabulary "
                                "(0..%d)", r->prompt[i], i, n_vocab - 1);
    if (r->n_prompt > e->params.n_ctx)
        return hearth_error(HEARTH_E_RANGE, "the prompt has %d tokens but a sequence holds at most %d "
                            "positions (the context)", r->n_prompt, e->params.n_ctx);
    const int64_t pool_tokens = (int64_t)runner_kv(e->runner)->n_blocks * e->B;
    if (r->n_prompt > pool_tokens)
        return hearth_error(HEARTH_E_RANGE, "the prompt has %d tokens but the KV pool holds only %lld "
                            "positions", r->n_prompt, (long long)pool_tokens);
    /* A sample of max_tokens holds n_prompt + max_tokens - 1 positions at
     * its end (its last token is sampled, never computed), at most the
     * context; alone in a pool smaller than that it would be cut short, so
     * it can never run as asked.  Without max_tokens it runs until the
     * context or the pool is full (HEARTH_FINISH_CONTEXT). */
    if (q->max_tokens > 0) {
        int64_t need = (int64_t)r->n_prompt + q->max_tokens - 1;
        if (need > e->params.n_ctx) need = e->params.n_ctx;
        if (need > pool_tokens)
            return hearth_error(HEARTH_E_RANGE, "the prompt (%d tokens) and max_tokens (%d) need %lld "
                                "positions but the KV pool holds only %lld", r->n_prompt, q->max_tokens,
                                (long long)need, (long long)pool_tokens);
    }
    r->seqs = hearth_calloc((size_t)r->n, sizeof *r->seqs, "the samples");
    if (!r->seqs) return HEARTH_E_NOMEM;
    return seq_new(e, r, 0, &r->seqs[0]);
}

hearth_status hearth_engine_submit(hearth_engine *e, const hearth_request *q, uint64_t *id)
{
    if (!e || !q) return hearth_error(HEARTH_E_INVALID, "hearth_engine_submit: NULL argument");
    struct request *r = hearth_calloc(1, sizeof *r, "a request");
    if (!r) return HEARTH_E_NOMEM;
    hearth_status st = copy_request(e, q, r);
    if (st) {
        request_free(r);
        return st;
    }
    r->t_submit = now_s();
    pthread_mutex_lock(&e->lock);
    r->id = e->next_id++;
    if (e->new_tail) e->new_tail->next_new = r;
    else e->new_head = r;
    e->new_tail = r;
    e->stats.waiting += r->n;
    pthread_mutex_unlock(&e->lock);
    if (id) *id = r->id;
    return HEARTH_OK;
}

hearth_status hearth_engine_cancel(hearth_engine *e, uint64_t id)
{
    pthread_mutex_lock(&e->lock);
    bool known = id > 0 && id < e->next_id;
    if (known && e->n_cancels == e->cancels_cap) {
        size_t cap = e->cancels_cap ? 2 * e->cancels_cap : 16;
        uint64_t *c = hearth_realloc(e->cancels, cap * sizeof *c, "cancellations");
        if (!c) {
            pthread_mutex_unlock(&e->lock);
            return HEARTH_E_NOMEM;
        }
        e->cancels = c;
        e->cancels_cap = cap;
    }
    if (known) e->cancels[e->n_cancels++] = id;
    pthread_mutex_unlock(&e->lock);
    if (!known) return hearth_error(HEARTH_E_NOT_FOUND, "no request has id %llu", (unsigned long long)id);
    return HEARTH_OK;
}

/* ---- events and the end of a sample ------------------------------------------------- */

static void emit(hearth_engine *e, struct seq *s, hearth_token token, const float *logits, const char *text,
                 size_t len, hearth_finish_reason finish, hearth_status status)
{
    (void)e;
    struct request *r = s->req;
    if (!r->params.on_event) return;
    const hearth_event ev = {
        .request = r->id,
        .index = s->index,
        .token = token,
        .logits = logits,
        .text = text ? text : "",
        .len = len,
        .finish = finish,
        .stats = finish != HEARTH_FINISH_NONE ? &s->stats : NULL,
        .status = status,
    };
    r->params.on_event(r->params.user, &ev);
}

/* Give back every block of s's table (and its recurrent state). */
static void release_blocks(hearth_engine *e, struct seq *s)
{
    if (s->state_slot >= 0) {
        e->free_states[e->n_free_states++] = s->state_slot;
        s->state_slot = -1;
    }
    for (int32_t i = 0; i < s->n_table; i++)
        if (s->table[i] >= 0) kv_pool_release(e->pool, s->table[i]);
    s->n_table = 0;
    s->n_dropped = 0;
    s->n_computed = 0;
    s->n_hashed = 0;
    for (int32_t i = 0; i < s->n_dtable; i++) kv_pool_release(e->dpool, s->dtable[i]);
    s->n_dtable = 0;
    s->d_computed = 0;
    s->n_draft = 0;
}

/* KV rollback: forget s's keys and values from position n on (n_computed
 * becomes at most n) and give back the blocks wholly past n.  The block
 * holding position n, when kept, is written next only after a copy if it
 * is shared or registered (make_room()); the chain hashes of the blocks
 * past n are dropped. */
static void seq_truncate(hearth_engine *e, struct seq *s, int32_t n)
{
    if (n < s->n_computed) s->n_computed = n;
    const int32_t keep = (n + e->B - 1) / e->B;
    while (s->n_table > keep) kv_pool_release(e->pool, s->table[--s->n_table]);
    if (s->n_hashed > s->n_computed / e->B) s->n_hashed = s->n_computed / e->B;
}

/* The same for the draft model's KV. */
static void draft_truncate(hearth_engine *e, struct seq *s, int32_t n)
{
    if (n < s->d_computed) s->d_computed = n;
    const int32_t keep = (n + e->B - 1) / e->B;
    while (s->n_dtable > keep) kv_pool_release(e->dpool, s->dtable[--s->n_dtable]);
}

/* End sample s: its blocks go back at once, its last text and the finish
 * reason go to the client. */
static void finish_seq(hearth_engine *e, struct seq *s, hearth_token token, const float *logits,
                       hearth_finish_reason why, hearth_status status)
{
    struct request *r = s->req;
    release_blocks(e, s);
    if (s->running) list_remove(&e->running, s);
    else if (s->prev || s->next || e->waiting.head == s) list_remove(&e->waiting, s);
    s->running = false;
    s->finished = true;
    /* the statistics show the blocks given back before the client hears
     * of the end (a /metrics read after a response sees them free) */
    pthread_mutex_lock(&e->lock);
    update_stats_locked(e);
    pthread_mutex_unlock(&e->lock);
    const double t = now_s();
    s->stats.total_ms = (t - r->t_submit) * 1e3;
    if (s->stats.n_generated > 1) s->stats.tpot_ms = (s->t_last - s->t_first) * 1e3 / (s->stats.n_generated - 1);
    const char *text = NULL;
    size_t len = 0;
    if (why != HEARTH_FINISH_STOP && hearth_text_stream_finish(s->stream, &text, &len) != HEARTH_OK) {
        text = NULL;
        len = 0;
    }
    emit(e, s, token, logits, text, len, why, status);
    if (s->index == 0 && !r->forked && r->n > 1 && r->params.on_event) {
        /* the other samples end with the first before they began */
        for (int32_t k = 1; k < r->n; k++) {
            const hearth_event ev = {
                .request = r->id, .index = k, .token = -1, .text = "", .finish = why,
                .stats = &s->stats, .status = status,
            };
            r->params.on_event(r->params.user, &ev);
        }
    }
}

/* ---- prefix cache and blocks ------------------------------------------------------ */

static hearth_status grow_array(void **p, int32_t *cap, int32_t need, size_t elem, const char *what)
{
    if (need <= *cap) return HEARTH_OK;
    int32_t c = *cap ? *cap : 8;
    while (c < need) c *= 2;
    void *n = hearth_realloc(*p, (size_t)c * elem, what);
    if (!n) return HEARTH_E_NOMEM;
    *p = n;
    *cap = c;
    return HEARTH_OK;
}

/* Room for n blocks in s's table, and for their chain hashes (a block
 * is hashed only once the table holds it). */
static hearth_status table_reserve(struct seq *s, int32_t n)
{
    if (n <= s->table_cap) return HEARTH_OK;
    int32_t cap = s->table_cap;
    HEARTH_TRY(grow_array((void **)&s->table, &cap, n, sizeof *s->table, "a block table"));
    uint64_t *h = hearth_realloc(s->hashes, (size_t)cap * sizeof *h, "block hashes");
    if (!h) return HEARTH_E_NOMEM; /* table_cap stays: the hashes have the old room */
    s->hashes = h;
    s->table_cap = cap;
    return HEARTH_OK;
}

static hearth_status table_push(struct seq *s, int32_t b)
{
    HEARTH_TRY(table_reserve(s, s->n_table + 1));
    s->table[s->n_table++] = b;
    return HEARTH_OK;
}

/* The chain hash of s's full block i, and its parent's in *parent. */
static uint64_t block_hash(const hearth_engine *e, const struct seq *s, int32_t i, uint64_t *parent)
{
    *parent = i == 0 ? e->identity : s->hashes[i - 1];
    return kv_pool_hash(*parent, s->tokens + (size_t)i * e->B, e->B);
}

/* Take the cached blocks of s's known tokens, leaving at least the last
 * token to compute (its logits are needed).  Returns the positions
 * covered. */
static hearth_status take_prefix(hearth_engine *e, struct seq *s)
{
    const int32_t B = e->B;
    const int32_t n_full = (s->n_tokens - 1) / B;
    if (e->params.no_prefix_cache || n_full == 0) return HEARTH_OK;
    for (int32_t i = 0; i < n_full; i++) {
        uint64_t parent;
        const uint64_t h = block_hash(e, s, i, &parent);
        const int32_t b = kv_pool_lookup(e->pool, parent, h, s->tokens + (size_t)i * B);
        if (b < 0) break;
        kv_pool_ref(e->pool, b);
        hearth_status st = table_push(s, b);
        if (st) {
            kv_pool_release(e->pool, b);
            return st;
        }
        s->hashes[i] = h;
        s->n_hashed = i + 1;
        s->n_computed = (i + 1) * B;
    }
    return HEARTH_OK;
}

/* Register the blocks s has filled since the last call. */
static hearth_status register_full_blocks(hearth_engine *e, struct seq *s)
{
    const int32_t B = e->B;
    const int32_t n_full = s->n_computed / B;
    if (e->params.no_prefix_cache || n_full <= s->n_hashed) return HEARTH_OK;
    for (int32_t i = s->n_hashed; i < n_full; i++) {
        uint64_t parent;
        s->hashes[i] = block_hash(e, s, i, &parent);
        kv_pool_register(e->pool, s->table[i], parent, s->hashes[i], s->tokens + (size_t)i * B);
    }
    s->n_hashed = n_full;
    return HEARTH_OK;
}

/* A model whose layers all slide (window W) reads, for its next row at
 * position n_computed, keys from n_computed + 1 - W on, and the CPU
 * attention starts reading at the block holding that position (see
 * cpu_attention): every block wholly before it goes back to the pool (to
 * the prefix cache when registered), its table entry -1. */
static void drop_outside_window(hearth_engine *e, struct seq *s)
{
    if (e->window <= 0) return;
    const int32_t lo = s->n_computed + 1 - e->window;
    const int32_t n_old = lo > 0 ? HEARTH_MIN(lo / e->B, s->n_table) : 0;
    for (; s->n_dropped < n_old; s->n_dropped++) {
        kv_pool_release(e->pool, s->table[s->n_dropped]);
        s->table[s->n_dropped] = -1;
    }
}

/* Make room in s's table for positions n_computed .. n_computed + n - 1:
 * new blocks where the table ends, a private copy of a shared block that
 * would be written (copy-on-write).  Stops at the first block it cannot
 * get; returns how many of the n positions have room. */
static hearth_status make_room(hearth_engine *e, struct seq *s, int32_t n, int32_t *n_room)
{
    const int32_t B = e->B;
    const int32_t first = s->n_computed, end = s->n_computed + n;
    *n_room = 0;
    for (int32_t bi = first / B; bi * B < end; bi++) {
        const int32_t have_to = HEARTH_MIN(end, (bi + 1) * B);
        if (bi < s->n_table) {
            const int32_t old = s->table[bi];
            /* a registered block is written only after a rollback into it:
             * its cached contents must stay */
            if (kv_pool_refs(e->pool, old) > 1 || kv_pool_registered(e->pool, old)) {
                const int32_t b = kv_pool_alloc(e->pool);
                if (b < 0) return HEARTH_OK;
                hearth_status st = runner_copy_block(e->runner, old, b, first - bi * B);
                if (st) {
                    kv_pool_release(e->pool, b);
                    return st;
                }
                kv_pool_release(e->pool, old);
                s->table[bi] = b;
                if (s->n_hashed > bi) s->n_hashed = bi;
            }
        } else {
            const int32_t b = kv_pool_alloc(e->pool);
            if (b < 0) return HEARTH_OK;
            hearth_status st = table_push(s, b);
            if (st) {
                kv_pool_release(e->pool, b);
                return st;
            }
        }
        *n_room = have_to - first;
    }
    return HEARTH_OK;
}

/* ---- scheduling ------------------------------------------------------------------- */

/* A running sequence of a recurrent model holds a state slot: there are
 * as many as sequences may run at once. */
static void take_state(hearth_engine *e, struct seq *s)
{
    if (!e->free_states || s->state_slot >= 0 || e->n_free_states == 0) return;
    s->state_slot = e->free_states[--e->n_free_states];
}

/* Put running sequence s back in the waiting queue, first in line: its
 * blocks are freed and it will be recomputed. */
static void preempt(hearth_engine *e, struct seq *s)
{
    release_blocks(e, s);
    list_remove(&e->running, s);
    s->running = false;
    s->chunk = 0;
    s->k_plan = 0;
    s->stats.n_preempted++;
    e->preemptions++;
    list_prepend(&e->waiting, s);
}

struct step_plan {
    int32_t n_rows;
    int32_t n_seqs;
    int32_t budget;
};

static void plan_add(hearth_engine *e, struct step_plan *p, struct seq *s, int32_t n)
{
    s->chunk = n;
    e->step_seqs[p->n_seqs++] = s;
    p->n_rows += n;
    p->budget -= n;
}

/* The newest running sequence: the running list is in admission order. */
static struct seq *newest_running(hearth_engine *e)
{
    return e->running.tail;
}

/* The tokens s drafts this step (0: none): as many as the request allows
 * where the context and max_tokens leave room, and, unless the request
 * fixed it, the length that saves the most time by the measured costs
 * (speculate.h), with n_decode sequences decoding in a step of about
 * n_rows rows.  A sequence whose drafts do not pay tries a short one
 * every SPEC_PROBE_STEPS steps, to see whether they pay again. */
static int32_t plan_draft(hearth_engine *e, struct seq *s, int32_t n_decode, int32_t n_rows)
{
    const struct request *r = s->req;
    const hearth_speculation *sp = &r->params.speculation;
    if (sp->draft_max <= 0) return 0;
    /* the first logits of a request of n samples are sampled n times, for
     * the samples forked from it (fork_samples()): nothing is drafted
     * before, even when its prompt's last token is computed on its own */
    if (r->n > 1 && !r->forked) return 0;
    int32_t k = HEARTH_MIN(sp->draft_max, e->params.n_ctx - 1 - s->n_computed);
    if (r->params.max_tokens >= 0) k = HEARTH_MIN(k, r->params.max_tokens - s->stats.n_generated - 1);
    const int32_t k_min = HEARTH_MAX(1, sp->draft_min);
    if (k < k_min) return 0;
    if (sp->fixed) return k;
    double a, b;
    if (!spec_fit_line(&e->target_fit, &a, &b)) return HEARTH_MIN(k, 4);
    const double step = a + b * n_rows;
    const double per_token = step / HEARTH_MAX(1, n_decode);
    double draft_cost = 0.0;
    if (sp->lookup == 0) {
        double da, db;
        draft_cost = spec_fit_line(&e->draft_fit, &da, &db)
                         ? (da + db * n_decode) / HEARTH_MAX(1, n_decode)
                         : 0.1 * per_token;
    }
    /* the acceptance rate, a prior of one half weighing one token */
    const double alpha = (s->acc_w + 0.5) / (s->tested_w + 1.0);
    const int32_t best = spec_best_length(alpha, k, per_token, b, draft_cost);
    if (best >= k_min) {
        s->idle = 0;
        return best;
    }
    if (++s->idle >= SPEC_PROBE_STEPS) {
        s->idle = 0;
        return k_min;
    }
    return 0;
}

static hearth_status schedule(hearth_engine *e, struct step_plan *p)
{
    p->n_rows = p->n_seqs = 0;
    p->budget = e->params.n_batch;
    /* the step's expected size, for the drafts' cost */
    int32_t n_decode = 0;
    int64_t n_pending = 0;
    for (struct seq *s = e->running.head; s; s = s->next) {
        const int32_t pending = s->n_tokens - s->n_computed;
        n_decode += pending == 1;
        n_pending += pending;
    }
    const int32_t n_rows_est = (int32_t)HEARTH_MIN(n_pending, (int64_t)e->params.n_batch);
    /* 1. decode rows, oldest admission first (the running list is in
     * admission order), with room for their drafts */
    for (struct seq *s = e->running.head, *next; s && p->budget > 0; s = next) {
        next = s->next;
        if (s->n_tokens - s->n_computed != 1) continue;
        const int32_t k = HEARTH_MIN(plan_draft(e, s, n_decode, n_rows_est), p->budget - 1);
        for (;;) {
            int32_t room;
            HEARTH_TRY(make_room(e, s, 1 + k, &room));
            if (room >= 1) {
                plan_add(e, p, s, room);
                s->k_plan = room - 1;
                break;
            }
            struct seq *victim = newest_running(e);
            if (victim == s && e->running.n == 1) {
                /* alone and the pool is full: nothing else can give way */
                finish_seq(e, s, -1, NULL, HEARTH_FINISH_CONTEXT, HEARTH_OK);
                break;
            }
            if (victim == next) next = next->next;
            preempt(e, victim);
            if (victim == s) break;
        }
    }
    /* 2. prefill chunks of running sequences */
    for (struct seq *s = e->running.head; s && p->budget > 0; s = s->next) {
        const int32_t pending = s->n_tokens - s->n_computed;
        if (pending <= 1) continue; /* decode rows had their turn */
        int32_t room;
        HEARTH_TRY(make_room(e, s, HEARTH_MIN(pending, p->budget), &room));
        if (room > 0) plan_add(e, p, s, room);
    }
    /* 3. admission */
    while (e->waiting.head && p->budget > 0 && e->running.n < e->params.n_seq_max) {
        struct seq *s = e->waiting.head;
        struct request *r = s->req;
        /* a request's samples are forked from the first: keep room for them */
        const int32_t want_slots = (!r->forked && s->index == 0) ? r->n : 1;
        if (e->running.n > 0 && e->running.n + want_slots > e->params.n_seq_max) break;
        /* a waiting sequence holds no blocks */
        const int32_t total = (s->n_tokens + e->B - 1) / e->B;
        HEARTH_TRY(take_prefix(e, s));
        if (total - s->n_table > kv_pool_available(e->pool)) {
            /* give the prefix back; wait for room (first come, first served) */
            release_blocks(e, s);
            if (e->running.n == 0 && total > kv_pool_available(e->pool)) {
                /* cannot happen for a prompt the submission accepted, but
                 * never spin on it */
                list_remove(&e->waiting, s);
                finish_seq(e, s, -1, NULL, HEARTH_FINISH_CONTEXT, HEARTH_OK);
                continue;
            }
            break;
        }
        list_remove(&e->waiting, s);
        list_append(&e->running, s);
        s->running = true;
        take_state(e, s);
        if (s->stats.n_preempted == 0) { /* its first admission */
            s->stats.queue_ms = (now_s() - r->t_submit) * 1e3;
            s->stats.n_cached = s->n_computed;
        }
        const int32_t pending = s->n_tokens - s->n_computed;
        int32_t room;
        HEARTH_TRY(make_room(e, s, HEARTH_MIN(pending, p->budget), &room));
        if (room > 0) plan_add(e, p, s, room);
    }
    return HEARTH_OK;
}

/* ---- sampling --------------------------------------------------------------------- */

static hearth_status seq_push_token(struct seq *s, hearth_token t)
{
    HEARTH_TRY(grow_array((void **)&s->tokens, &s->tokens_cap, s->n_tokens + 1, sizeof *s->tokens,
                          "a sequence's tokens"));
    s->tokens[s->n_tokens++] = t;
    return HEARTH_OK;
}

/* Samples 1 .. n-1 of r, sharing the blocks of sample 0 (whose prompt is
 * computed): they take references, and the first write into a shared
 * block copies it. */
static hearth_status fork_samples(hearth_engine *e, struct request *r)
{
    struct seq *s0 = r->seqs[0];
    r->forked = true;
    for (int32_t i = 1; i < r->n; i++) {
        struct seq *s;
        HEARTH_TRY(seq_new(e, r, i, &s));
        r->seqs[i] = s;
        HEARTH_TRY(table_reserve(s, s0->n_table));
        for (int32_t k = 0; k < s0->n_table; k++) {
            if (s0->table[k] >= 0) kv_pool_ref(e->pool, s0->table[k]);
            s->table[k] = s0->table[k];
        }
        s->n_table = s0->n_table;
        s->n_dropped = s0->n_dropped;
        memcpy(s->hashes, s0->hashes, (size_t)s0->n_hashed * sizeof *s->hashes);
        s->n_hashed = s0->n_hashed;
        s->n_computed = s0->n_computed;
        take_state(e, s);
        if (s->state_slot >= 0) {
            /* the prompt's state, computed once, continues in each sample */
            struct rstate *rs = runner_rstate(e->runner);
            memcpy(rstate_layer(rs, s->state_slot, 0), rstate_layer(rs, s0->state_slot, 0),
                   rstate_bytes_per_seq(rs));
        }
        s->stats.queue_ms = s0->stats.queue_ms;
        s->stats.n_cached = s0->stats.n_cached;
        /* admitted now: the running list stays in admission order */
        s->running = true;
        list_append(&e->running, s);
    }
    return HEARTH_OK;
}

/* s takes token t, drawn from logits: its statistics, the end of
 * generation, the text, stop strings, the limits.  *alive is false when
 * the sample has finished. */
static hearth_status take_token(hearth_engine *e, struct seq *s, hearth_token t, const float *logits, bool *alive)
{
    struct request *r = s->req;
    *alive = false;
    const double now = now_s();
    if (s->stats.n_generated == 0) {
        s->t_first = now;
        s->stats.ttft_ms = (now - r->t_submit) * 1e3;
    }
    s->t_last = now;
    s->stats.n_generated++;
    e->generated_tokens++;
    if (!r->params.ignore_eos && e->vocab && hearth_vocab_is_eog(e->vocab, t)) {
        finish_seq(e, s, t, logits, HEARTH_FINISH_EOS, HEARTH_OK);
        return HEARTH_OK;
    }
    HEARTH_TRY(hearth_sampler_accept(s->sampler, t));
    HEARTH_TRY(seq_push_token(s, t));
    const char *text = NULL;
    size_t len = 0;
    if (e->vocab) HEARTH_TRY(hearth_text_stream_push_token(s->stream, t, &text, &len));
    const int stop = hearth_text_stream_stop_index(s->stream);
    if (stop >= 0) {
        s->stats.stop_index = stop;
        emit(e, s, t, logits, text, len, HEARTH_FINISH_NONE, HEARTH_OK);
        finish_seq(e, s, -1, NULL, HEARTH_FINISH_STOP, HEARTH_OK);
        return HEARTH_OK;
    }
    emit(e, s, t, logits, text, len, HEARTH_FINISH_NONE, HEARTH_OK);
    if (r->params.max_tokens >= 0 && s->stats.n_generated >= r->params.max_tokens)
        finish_seq(e, s, -1, NULL, HEARTH_FINISH_LENGTH, HEARTH_OK);
    else if (s->n_tokens > e->params.n_ctx) /* t has no position to be computed at */
        finish_seq(e, s, -1, NULL, HEARTH_FINISH_CONTEXT, HEARTH_OK);
    else
        *alive = true;
    return HEARTH_OK;
}

/* s has computed its last known token: sample the next one from logits. */
static hearth_status sample_seq(hearth_engine *e, struct seq *s, const float *logits)
{
    struct request *r = s->req;
    if (r->params.max_tokens == 0) {
        /* only the prompt was wanted */
        finish_seq(e, s, -1, NULL, HEARTH_FINISH_LENGTH, HEARTH_OK);
        return HEARTH_OK;
    }
    hearth_token t;
    if (hearth_sampler_grammar_done(s->sampler)) {
        /* the grammar is complete and allows nothing more */
        finish_seq(e, s, -1, NULL, HEARTH_FINISH_STOP, HEARTH_OK);
        return HEARTH_OK;
    }
    HEARTH_TRY(hearth_sampler_sample(s->sampler, logits, &t));
    s->stats.n_steps++;
    bool alive;
    return take_token(e, s, t, logits, &alive);
}

/* Whether r was cancelled since the step began (from an event callback
 * or another thread): its verification stops releasing tokens. */
static bool cancel_pending(hearth_engine *e, const struct request *r)
{
    bool found = false;
    pthread_mutex_lock(&e->lock);
    for (size_t i = 0; i < e->n_cancels && !found; i++) found = e->cancels[i] == r->id;
    pthread_mutex_unlock(&e->lock);
    return found;
}

/* s computed its last known token and its n_draft drafted ones, with
 * logits from row `first` of the step's logits: take the tokens the
 * target confirms, then its own next one; roll the KV of both models back
 * to what was kept. */
static hearth_status verify_seq(hearth_engine *e, struct seq *s, int32_t first)
{
    struct request *r = s->req;
    const int32_t V = hearth_model_n_vocab(e->model);
    const int32_t base = s->n_computed; /* the last known token's position */
    const int32_t k = s->n_draft;
    const bool greedy = r->params.sampling.temperature == 0.0f;
    int32_t accepted = 0, tested = 0;
    bool alive = true;
    s->stats.n_steps++;
    e->verify_steps++;
    for (int32_t j = 0; j <= k; j++) {
        const float *logits = runner_logits(e->runner, first + j);
        hearth_token t;
        bool keep = false;
        if (j == k || greedy) {
            HEARTH_TRY(hearth_sampler_sample(s->sampler, logits, &t));
            keep = j < k && t == s->draft[j];
        } else {
            const int32_t x = s->draft[j];
            const float *q = s->draft_q ? s->draft_q + (size_t)j * (size_t)V : NULL;
            HEARTH_TRY(hearth_sampler_probs(s->sampler, logits, e->p_buf));
            keep = spec_keep(hearth_rng_uniform(&s->rng), e->p_buf[x], q ? q[x] : 1.0f);
            if (keep) {
                t = x;
            } else {
                const double sum = spec_residual(e->p_buf, q, x, V, e->r_buf);
                const double u = hearth_rng_uniform(&s->rng);
                t = sum > 0.0 ? spec_draw(e->r_buf, V, sum, u) : -1;
                /* p <= q everywhere only by rounding: p itself */
                if (t < 0) HEARTH_TRY(hearth_sampler_sample(s->sampler, logits, &t));
            }
        }
        if (j < k) {
            tested++;
            accepted += keep;
        }
        HEARTH_TRY(take_token(e, s, t, logits, &alive));
        if (alive && j < k && keep && cancel_pending(e, r)) {
            finish_seq(e, s, -1, NULL, HEARTH_FINISH_CANCELLED, HEARTH_OK);
            alive = false;
        }
        if (!alive || !keep) break;
    }
    s->stats.n_drafted += k;
    s->stats.n_accepted += accepted;
    e->drafted_tokens += (uint64_t)k;
    e->accepted_tokens += (uint64_t)accepted;
    s->acc_w = s->acc_w * SPEC_ALPHA_DECAY + accepted;
    s->tested_w = s->tested_w * SPEC_ALPHA_DECAY + tested;
    s->n_draft = 0;
    if (!alive) return HEARTH_OK; /* its blocks are gone */
    /* positions base .. base + accepted hold the kept tokens */
    s->n_computed = base + 1 + accepted;
    seq_truncate(e, s, s->n_computed);
    draft_truncate(e, s, s->n_computed);
    return register_full_blocks(e, s);
}

/* ---- drafting ------------------------------------------------------------------- */

/* Room in s's draft table for positions up to end - 1; false when the
 * draft's pool has no block left. */
static hearth_status draft_room(hearth_engine *e, struct seq *s, int32_t end, bool *ok)
{
    *ok = true;
    while (s->n_dtable * e->B < end) {
        if (s->n_dtable == s->dtable_cap)
            HEARTH_TRY(grow_array((void **)&s->dtable, &s->dtable_cap, s->n_dtable + 1, sizeof *s->dtable,
                                  "a draft block table"));
        const int32_t b = kv_pool_alloc(e->dpool);
        if (b < 0) {
            *ok = false;
            return HEARTH_OK;
        }
        s->dtable[s->n_dtable++] = b;
    }
    return HEARTH_OK;
}

/* The token at position pos of what s knows and has drafted. */
static int32_t known_token(const struct seq *s, int32_t pos)
{
    return pos < s->n_tokens ? s->tokens[pos] : s->draft[pos - s->n_tokens];
}

/* The draft model's next token for s from its logits, or -1 to stop
 * drafting (the draft is not confident enough). */
static hearth_status draft_token(hearth_engine *e, struct seq *s, const float *logits, int32_t *out)
{
    const struct request *r = s->req;
    const int32_t V = hearth_model_n_vocab(e->model);
    const float p_min = r->params.speculation.draft_p_min;
    *out = -1;
    if (r->params.sampling.temperature == 0.0f) {
        hearth_token t;
        HEARTH_TRY(hearth_sampler_sample(s->dsampler, logits, &t));
        if (p_min > 0.0f) {
            /* the draft's own confidence: its softmax at temperature 1 */
            float mx = logits[0];
            for (int32_t i = 1; i < V; i++) mx = logits[i] > mx ? logits[i] : mx;
            double sum = 0.0;
            for (int32_t i = 0; i < V; i++) sum += exp((double)logits[i] - (double)mx);
            if (exp((double)logits[t] - (double)mx) / sum < (double)p_min) return HEARTH_OK;
        }
        *out = t;
        return HEARTH_OK;
    }
    if (!s->draft_q) {
        s->draft_q = hearth_calloc((size_t)r->params.speculation.draft_max * (size_t)V, sizeof *s->draft_q,
                                   "the draft's distributions");
        if (!s->draft_q) return HEARTH_E_NOMEM;
    }
    float *q = s->draft_q + (size_t)s->n_draft * (size_t)V;
    HEARTH_TRY(hearth_sampler_probs(s->dsampler, logits, q));
    double sum = 0.0;
    float q_max = 0.0f;
    for (int32_t i = 0; i < V; i++) {
        sum += (double)q[i];
        q_max = q[i] > q_max ? q[i] : q_max;
    }
    /* stopping on the distribution, never on the token drawn, keeps the
     * drafted token distributed as q */
    if (q_max < p_min) return HEARTH_OK;
    *out = spec_draw(q, V, sum, hearth_rng_uniform(&s->rng));
    return HEARTH_OK;
}

/* Draft for the n sequences of e->draft_seqs with the draft model, each up
 * to its k_plan tokens: passes over all of them, the first catching each
 * one's draft KV up with what it knows (in chunks within the batch). */
static hearth_status draft_with_model(hearth_engine *e, int32_t n)
{
    const int32_t B = e->B;
    for (int32_t i = 0; i < n; i++) {
        struct seq *s = e->draft_seqs[i];
        const struct request *r = s->req;
        /* the draft's sampling chain sees the same recent tokens */
        hearth_sampler_reset(s->dsampler);
        const int32_t last_n = r->params.sampling.repeat_last_n;
        for (int32_t pos = HEARTH_MAX(0, s->n_tokens - last_n); pos < s->n_tokens; pos++)
            HEARTH_TRY(hearth_sampler_accept(s->dsampler, s->tokens[pos]));
        s->drafting = true;
    }
    for (;;) {
        int32_t row = 0, nl = 0, n_seqs = 0;
        size_t n_blocks = 0;
        for (int32_t i = 0; i < n; i++) e->draft_seqs[i]->d_chunk = 0;
        for (int32_t i = 0; i < n; i++) {
            struct seq *s = e->draft_seqs[i];
            if (!s->drafting) continue;
            const int32_t known = s->n_tokens + s->n_draft;
            const int32_t chunk = HEARTH_MIN(known - s->d_computed, e->params.n_batch - row);
            if (chunk <= 0) break;
            bool ok;
            HEARTH_TRY(draft_room(e, s, s->d_computed + chunk, &ok));
            if (!ok) {
                /* no room in the draft's pool: this one drafts no more now */
                s->drafting = false;
                continue;
            }
            s->d_chunk = chunk;
            e->step_seqs[n_seqs] = s; /* the target's list is built after the drafts */
            n_blocks += (size_t)s->n_dtable;
            n_seqs++;
            row += chunk;
        }
        if (row == 0) break;
        if (n_blocks > e->blocks_cap) {
            int32_t *b = hearth_realloc(e->blocks, n_blocks * sizeof *b, "the step's block tables");
            if (!b) return HEARTH_E_NOMEM;
            e->blocks = b;
            e->blocks_cap = n_blocks;
        }
        row = 0;
        size_t tb = 0;
        for (int32_t i = 0; i < n_seqs; i++) {
            struct seq *s = e->step_seqs[i];
            e->seq_start[i] = row;
            e->table_start[i] = (int32_t)tb;
            memcpy(e->blocks + tb, s->dtable, (size_t)s->n_dtable * sizeof *s->dtable);
            tb += (size_t)s->n_dtable;
            for (int32_t k = 0; k < s->d_chunk; k++, row++) {
                const int32_t pos = s->d_computed + k;
                e->tokens[row] = known_token(s, pos);
                e->pos[row] = pos;
                e->slot[row] = s->dtable[pos / B] * B + pos % B;
            }
            if (s->d_computed + s->d_chunk == s->n_tokens + s->n_draft) {
                e->logit_rows[nl] = row - 1;
                e->logit_seqs[nl++] = s;
            }
        }
        e->seq_start[n_seqs] = row;
        const struct runner_step step = {
            .tokens = e->tokens,
            .bp = {
                .pos = e->pos,
                .slot = e->slot,
                .n_tokens = row,
                .n_seqs = n_seqs,
                .seq_start = e->seq_start,
                .blocks = e->blocks,
                .table_start = e->table_start,
            },
            .logit_rows = e->logit_rows,
            .n_logits = nl,
        };
        const double t0 = now_s();
        HEARTH_TRY(runner_eval(e->drunner, &step));
        spec_fit_add(&e->draft_fit, row, now_s() - t0);
        e->draft_steps++;
        for (int32_t i = 0; i < n_seqs; i++) {
            struct seq *s = e->step_seqs[i];
            s->d_computed += s->d_chunk;
        }
        for (int32_t i = 0; i < nl; i++) {
            struct seq *s = e->logit_seqs[i];
            int32_t t;
            HEARTH_TRY(draft_token(e, s, runner_logits(e->drunner, i), &t));
            if (t < 0) {
                s->drafting = false;
                continue;
            }
            s->draft[s->n_draft++] = t;
            HEARTH_TRY(hearth_sampler_accept(s->dsampler, t));
            if (s->n_draft == s->k_plan) s->drafting = false;
        }
    }
    return HEARTH_OK;
}

/* Make the drafts of the step's decoding sequences that planned some,
 * then fit their rows to what was drafted. */
static hearth_status make_drafts(hearth_engine *e, struct step_plan *p)
{
    int32_t n_model = 0;
    for (int32_t i = 0; i < p->n_seqs; i++) {
        struct seq *s = e->step_seqs[i];
        s->n_draft = 0;
        if (s->k_plan <= 0) continue;
        const hearth_speculation *sp = &s->req->params.speculation;
        if (sp->lookup > 0)
            s->n_draft = spec_lookup(s->tokens, s->n_tokens, sp->lookup, s->k_plan, s->draft);
        else
            e->draft_seqs[n_model++] = s;
    }
    if (n_model > 0) {
        /* draft passes use the step's arrays: keep the plan's list */
        struct seq **plan_seqs = hearth_calloc((size_t)p->n_seqs, sizeof *plan_seqs, "the step's sequences");
        if (!plan_seqs) return HEARTH_E_NOMEM;
        memcpy(plan_seqs, e->step_seqs, (size_t)p->n_seqs * sizeof *plan_seqs);
        hearth_status st = draft_with_model(e, n_model);
        memcpy(e->step_seqs, plan_seqs, (size_t)p->n_seqs * sizeof *plan_seqs);
        free(plan_seqs);
        if (st) return st;
    }
    for (int32_t i = 0; i < p->n_seqs; i++) {
        struct seq *s = e->step_seqs[i];
        if (s->k_plan <= 0) continue;
        if (s->n_draft < s->req->params.speculation.draft_min) s->n_draft = 0;
        if (s->n_draft > 0 && e->draft_hook)
            e->draft_hook(e->draft_hook_user, s->req->id, s->index, s->draft, s->n_draft);
        const int32_t rows = 1 + s->n_draft;
        p->n_rows -= s->chunk - rows;
        s->chunk = rows;
        s->k_plan = 0;
        /* the room planned for drafts not made goes back */
        seq_truncate(e, s, s->n_computed + rows);
    }
    return HEARTH_OK;
}

void engine_set_draft_hook(hearth_engine *e,
                           void (*hook)(void *user, uint64_t request, int32_t index, int32_t *draft, int32_t n),
                           void *user)
{
    e->draft_hook = hook;
    e->draft_hook_user = user;
}

/* ---- the step -------------------------------------------------------------------- */

static hearth_status live_add(hearth_engine *e, struct request *r)
{
    if (e->n_live == e->live_cap) {
        size_t cap = e->live_cap ? 2 * e->live_cap : 16;
        struct request **l = hearth_realloc(e->live, cap * sizeof *l, "the requests");
        if (!l) return HEARTH_E_NOMEM;
        e->live = l;
        e->live_cap = cap;
    }
    e->live[e->n_live++] = r;
    return HEARTH_OK;
}

/* Whether every sample of r has finished (samples not forked yet never
 * will be once the first has). */
static bool request_done(const struct request *r)
{
    if (!r->forked) return r->seqs[0]->finished;
    for (int32_t k = 0; k < r->n; k++)
        if (!r->seqs[k]->finished) return false;
    return true;
}

/* Free the requests whose samples have all finished. */
static void reap(hearth_engine *e)
{
    size_t k = 0;
    for (size_t i = 0; i < e->n_live; i++) {
        struct request *r = e->live[i];
        if (request_done(r)) request_free(r);
        else e->live[k++] = r;
    }
    e->n_live = k;
}

/* Its finished samples are left as they are. */
static void cancel_request(hearth_engine *e, struct request *r)
{
    for (int32_t k = 0; k < r->n; k++) {
        struct seq *s = r->seqs[k];
        if (s && !s->finished) finish_seq(e, s, -1, NULL, HEARTH_FINISH_CANCELLED, HEARTH_OK);
    }
}

/* What the statistics say of the pool itself, once. */
static void pool_stats(hearth_engine *e)
{
    hearth_engine_stats *st = &e->stats;
    const struct kv_cache *kv = runner_kv(e->runner);
    const struct hparams *hp = &e->model->hp;
    st->n_ctx = e->params.n_ctx;
    st->block_tokens = e->B;
    st->n_blocks = kv->n_blocks;
    st->kv_bytes = kv_cache_bytes(kv);
    st->bytes_per_token = kv_cache_bytes_per_token(kv->type, hp->n_layer, hp->n_head_kv, hp->head_dim);
    const struct rstate *rs = runner_rstate(e->runner);
    if (rs) {
        /* recurrent: the states are all a sequence keeps, whatever its length */
        st->kv_bytes = runner_memory_bytes(e->runner);
        st->bytes_per_token = 0;
        st->state_bytes_per_seq = rstate_bytes_per_seq(rs);
    }
    st->max_full_sequences = kv->n_blocks / ((e->params.n_ctx + e->B - 1) / e->B);
}

/* The counts that change with every step. */
static void update_stats_locked(hearth_engine *e)
{
    hearth_engine_stats *st = &e->stats;
    struct kv_pool_counts c;
    kv_pool_counts(e->pool, &c);
    st->blocks_used = c.n_held;
    st->blocks_cached = c.n_cached;
    st->running = e->running.n;
    int32_t queued = 0;
    for (struct request *r = e->new_head; r; r = r->next_new) queued += r->n;
    st->waiting = e->waiting.n + queued;
    st->prefix_queries = c.hits + c.misses;
    st->prefix_hits = c.hits;
    st->evictions = c.evictions;
    st->preemptions = e->preemptions;
    st->steps = e->steps;
    st->prompt_tokens = e->prompt_tokens;
    st->generated_tokens = e->generated_tokens;
    st->draft_steps = e->draft_steps;
    st->drafted_tokens = e->drafted_tokens;
    st->accepted_tokens = e->accepted_tokens;
    st->verify_steps = e->verify_steps;
}

void hearth_engine_get_params(const hearth_engine *e, hearth_engine_params *out)
{
    *out = e->params;
}

int32_t hearth_engine_n_gpu_layers(const hearth_engine *e) { return runner_n_gpu_layers(e->runner); }
const char *hearth_engine_gpu_fallback(const hearth_engine *e) { return runner_gpu_fallback(e->runner); }

void hearth_engine_get_stats(hearth_engine *e, hearth_engine_stats *out)
{
    pthread_mutex_lock(&e->lock);
    *out = e->stats;
    pthread_mutex_unlock(&e->lock);
}

/* Take in what other threads submitted and cancelled. */
static hearth_status take_submissions(hearth_engine *e)
{
    pthread_mutex_lock(&e->lock);
    struct request *list = e->new_head;
    e->new_head = e->new_tail = NULL;
    uint64_t *cancels = e->cancels;
    size_t n_cancels = e->n_cancels;
    e->cancels = NULL;
    e->n_cancels = e->cancels_cap = 0;
    pthread_mutex_unlock(&e->lock);

    hearth_status st = HEARTH_OK;
    while (list) {
        struct request *r = list;
        list = r->next_new;
        r->next_new = NULL;
        if (st || (st = live_add(e, r))) {
            /* out of memory: the request ends here */
            finish_seq(e, r->seqs[0], -1, NULL, HEARTH_FINISH_ERROR, st);
            request_free(r);
            continue;
        }
        list_append(&e->waiting, r->seqs[0]);
    }
    for (size_t i = 0; i < n_cancels; i++)
        for (size_t k = 0; k < e->n_live; k++)
            if (e->live[k]->id == cancels[i]) cancel_request(e, e->live[k]);
    free(cancels);
    return st;
}

/* The step's batch from the plan: rows of each sequence in the plan's
 * order, block tables back to back. */
static hearth_status build_batch(hearth_engine *e, const struct step_plan *p, struct runner_step *step,
                                 int32_t *n_logits)
{
    size_t n_blocks = 0;
    for (int32_t i = 0; i < p->n_seqs; i++) n_blocks += (size_t)e->step_seqs[i]->n_table;
    if (n_blocks > e->blocks_cap) {
        int32_t *b = hearth_realloc(e->blocks, n_blocks * sizeof *b, "the step's block tables");
        if (!b) return HEARTH_E_NOMEM;
        e->blocks = b;
        e->blocks_cap = n_blocks;
    }
    int32_t row = 0, nl = 0;
    size_t tb = 0;
    for (int32_t i = 0; i < p->n_seqs; i++) {
        struct seq *s = e->step_seqs[i];
        e->seq_start[i] = row;
        e->table_start[i] = (int32_t)tb;
        if (e->state_slot) e->state_slot[i] = s->state_slot;
        memcpy(e->blocks + tb, s->table, (size_t)s->n_table * sizeof *s->table);
        tb += (size_t)s->n_table;
        for (int32_t k = 0; k < s->chunk; k++, row++) {
            const int32_t pos = s->n_computed + k;
            e->tokens[row] = known_token(s, pos);
            e->pos[row] = pos;
            e->slot[row] = s->table[pos / e->B] * e->B + pos % e->B;
            if (s->n_draft > 0) {
                /* every row of a draft's verification: the sequence at
                 * its first, the others marked by NULL */
                e->logit_rows[nl] = row;
                e->logit_seqs[nl++] = k == 0 ? s : NULL;
            }
        }
        if (s->n_draft == 0 && s->n_computed + s->chunk == s->n_tokens) {
            e->logit_rows[nl] = row - 1;
            e->logit_seqs[nl++] = s;
        }
    }
    e->seq_start[p->n_seqs] = row;
    *step = (struct runner_step){
        .tokens = e->tokens,
        .bp = {
            .pos = e->pos,
            .slot = e->slot,
            .n_tokens = row,
            .n_seqs = p->n_seqs,
            .seq_start = e->seq_start,
            .blocks = e->blocks,
            .table_start = e->table_start,
            .state_slot = e->state_slot,
        },
        .logit_rows = e->logit_rows,
        .n_logits = nl,
    };
    *n_logits = nl;
    return HEARTH_OK;
}

/* A failure ends every sequence of the step (and its request). */
static void fail_step(hearth_engine *e, const struct step_plan *p, hearth_status st)
{
    for (int32_t i = 0; i < p->n_seqs; i++) {
        struct seq *s = e->step_seqs[i];
        if (!s->finished) {
            finish_seq(e, s, -1, NULL, HEARTH_FINISH_ERROR, st);
        }
        s->chunk = 0;
        s->k_plan = 0;
        s->n_draft = 0;
    }
}

hearth_status hearth_engine_step(hearth_engine *e, bool *did_work)
{
    if (did_work) *did_work = false;
    hearth_status st = take_submissions(e);
    struct step_plan plan = {0};
    /* When nothing at all could be scheduled, the running sequences are
     * stuck in prefill on a full pool: the newest gives way (or, alone,
     * it cannot fit). */
    while (!st) {
        st = schedule(e, &plan);
        if (st || plan.n_rows > 0 || e->running.n == 0) break;
        if (e->running.n == 1) finish_seq(e, e->running.head, -1, NULL, HEARTH_FINISH_CONTEXT, HEARTH_OK);
        else preempt(e, newest_running(e));
    }
    if (st) {
        fail_step(e, &plan, st);
    } else if (plan.n_rows > 0) {
        struct runner_step step;
        int32_t n_logits = 0;
        st = make_drafts(e, &plan);
        if (!st) st = build_batch(e, &plan, &step, &n_logits);
        const double t0 = now_s();
        if (!st) st = runner_eval(e->runner, &step);
        if (st) {
            fail_step(e, &plan, st);
        } else {
            spec_fit_add(&e->target_fit, step.bp.n_tokens, now_s() - t0);
            e->steps++;
            if (did_work) *did_work = true;
            for (int32_t i = 0; i < plan.n_seqs; i++) {
                struct seq *s = e->step_seqs[i];
                if (s->n_draft > 0) {
                    /* verification counts what it keeps */
                    s->chunk = 0;
                    continue;
                }
                const int32_t before = s->n_computed;
                s->n_computed += s->chunk;
                if (before < s->req->n_prompt)
                    e->prompt_tokens += (uint64_t)(HEARTH_MIN(s->n_computed, s->req->n_prompt) - before);
                s->chunk = 0;
                if (!st) st = register_full_blocks(e, s);
                drop_outside_window(e, s);
            }
            for (int32_t i = 0; i < n_logits && !st; i++) {
                struct seq *s = e->logit_seqs[i];
                if (!s) continue; /* a verification's later row */
                struct request *r = s->req;
                const float *logits = runner_logits(e->runner, i);
                if (s->n_draft > 0) {
                    st = verify_seq(e, s, i);
                } else if (r->n > 1 && !r->forked) {
                    st = fork_samples(e, r);
                    for (int32_t k = 0; k < r->n && !st; k++) st = sample_seq(e, r->seqs[k], logits);
                } else {
                    st = sample_seq(e, s, logits);
                }
                if (st) {
                    for (int32_t k = 0; k < r->n; k++)
                        if (r->seqs[k] && !r->seqs[k]->finished)
                            finish_seq(e, r->seqs[k], -1, NULL, HEARTH_FINISH_ERROR, st);
                    st = HEARTH_OK; /* this request's failure; the others go on */
                }
            }
        }
    }
    reap(e);
    pthread_mutex_lock(&e->lock);
    update_stats_locked(e);
    pthread_mutex_unlock(&e->lock);
    return st;
}

hearth_status hearth_engine_run(hearth_engine *e)
{
    for (;;) {
        bool worked;
        HEARTH_TRY(hearth_engine_step(e, &worked));
        if (!worked) {
            pthread_mutex_lock(&e->lock);
            const bool idle = !e->new_head && !e->n_cancels && e->waiting.n == 0 && e->running.n == 0;
            pthread_mutex_unlock(&e->lock);
            if (idle) return HEARTH_OK;
        }
    }
}

hearth_status engine_check(hearth_engine *e)
{
    const int32_t n_blocks = runner_kv(e->runner)->n_blocks;
    memset(e->refs_scratch, 0, (size_t)n_blocks * sizeof *e->refs_scratch);
    if (e->drefs_scratch) memset(e->drefs_scratch, 0, (size_t)n_blocks * sizeof *e->drefs_scratch);
    int32_t n_running = 0, n_waiting = 0;
    for (size_t i = 0; i < e->n_live; i++) {
        struct request *r = e->live[i];
        for (int32_t k = 0; k < r->n; k++) {
            const struct seq *s = r->seqs[k];
            if (!s || s->finished) {
                if (s && s->n_table)
                    return hearth_error(HEARTH_E_INTERNAL, "a finished sequence holds %d blocks", s->n_table);
                continue;
            }
            n_running += s->running;
            n_waiting += !s->running;
            if (s->n_table * e->B < s->n_computed || s->n_computed > s->n_tokens)
                return hearth_error(HEARTH_E_INTERNAL, "a sequence of %d tokens has %d computed and %d blocks",
                                    s->n_tokens, s->n_computed, s->n_table);
            if (!s->running && s->n_table)
                return hearth_error(HEARTH_E_INTERNAL, "a waiting sequence holds %d blocks", s->n_table);
            for (int32_t b = 0; b < s->n_table; b++) {
                if ((s->table[b] < 0) != (b < s->n_dropped))
                    return hearth_error(HEARTH_E_INTERNAL, "block %d of a sequence's table is %d, %d dropped",
                                        b, s->table[b], s->n_dropped);
                if (s->table[b] >= 0) e->refs_scratch[s->table[b]]++;
            }
            if (s->n_dtable * e->B < s->d_computed || s->d_computed > s->n_tokens)
                return hearth_error(HEARTH_E_INTERNAL, "a sequence of %d tokens has %d computed by the draft "
                                    "and %d draft blocks", s->n_tokens, s->d_computed, s->n_dtable);
            if (!s->running && s->n_dtable)
                return hearth_error(HEARTH_E_INTERNAL, "a waiting sequence holds %d draft blocks", s->n_dtable);
            if (s->n_dtable && !e->dpool)
                return hearth_error(HEARTH_E_INTERNAL, "draft blocks without a draft model");
            for (int32_t b = 0; b < s->n_dtable; b++) e->drefs_scratch[s->dtable[b]]++;
        }
    }
    if (n_running != e->running.n || n_waiting != e->waiting.n)
        return hearth_error(HEARTH_E_INTERNAL, "%d running and %d waiting sequences, lists of %d and %d",
                            n_running, n_waiting, e->running.n, e->waiting.n);
    HEARTH_TRY(kv_pool_check(e->pool, e->refs_scratch));
    return e->dpool ? kv_pool_check(e->dpool, e->drefs_scratch) : HEARTH_OK;
}

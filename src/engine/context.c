/*
 * context.c -- an inference context: one sequence over a runner
 * (engine/runner.h) whose KV pool holds exactly that sequence, its blocks
 * in order.
 *
 * hearth_eval() appends tokens to the sequence.  A prompt (prefill) goes
 * through in batches of up to n_batch tokens, each weight matrix applied to
 * the whole batch at once; a generated token (decode) is a batch of one.
 * Both write the same cache, and a row's results do not depend on the
 * other rows of its batch, so prefill of n tokens and n single-token steps
 * give the same logits bit for bit.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "kv_cache.h"
#include "model.h"
#include "rstate.h"
#include "runner.h"

#define DEFAULT_N_BATCH 512

struct hearth_context {
    const hearth_model *model;
    hearth_context_params params;
    struct runner *runner;
    int32_t n_used;                /* positions 0 .. n_used-1 hold valid entries */
    int32_t *blocks;               /* the block table: block i holds positions i*B .. */
    int32_t *pos;                  /* positions of the current batch */
    int32_t *slot;                 /* their cache slots */
    int32_t *logit_rows;           /* rows of the batch whose logits are wanted */
    float *logits;                 /* n_logits rows of n_vocab */
    int32_t n_logits;              /* rows valid after the last eval */
    int32_t logits_capacity;       /* rows allocated */
};

void hearth_context_default_params(hearth_context_params *p)
{
    memset(p, 0, sizeof *p);
    p->n_ctx = 0;
    p->n_batch = DEFAULT_N_BATCH;
    p->n_threads = 0;
    p->cache_type = HEARTH_TYPE_F16;
}

void hearth_context_free(hearth_context *ctx)
{
    if (!ctx) return;
    runner_free(ctx->runner);
    free(ctx->blocks);
    free(ctx->pos);
    free(ctx->slot);
    free(ctx->logit_rows);
    hearth_aligned_free(ctx->logits);
    free(ctx);
}

hearth_status hearth_context_new(const hearth_model *model, const hearth_context_params *params,
                                 hearth_context **out)
{
    if (!model || !out) return hearth_error(HEARTH_E_INVALID, "hearth_context_new: NULL argument");
    if (model_embedding_only(model))
        return hearth_error(HEARTH_E_UNSUPPORTED, "the model (%s) is an embedding model: it has no output layer, so "
                            "no logits; it computes embeddings in the serving engine (hearth embed, /v1/embeddings)",
                            hearth_model_arch(model));
    hearth_context_params p;
    if (params) p = *params;
    else hearth_context_default_params(&p);
    if (p.chunk_size < 0 || p.chunk_size > 4096)
        return hearth_error(HEARTH_E_INVALID, "chunk size %d: 1 to 4096 tokens (0: the default)",
                            p.chunk_size);
    HEARTH_TRY(runner_resolve_sizes(model, &p.n_ctx, &p.n_batch, &p.n_threads));
    if (p.n_batch > p.n_ctx) p.n_batch = p.n_ctx;

    hearth_context *ctx = hearth_calloc(1, sizeof *ctx, "a context");
    if (!ctx) return HEARTH_E_NOMEM;
    ctx->model = model;
    ctx->params = p;
    /* One block holds the whole sequence.  Attention cuts its key blocks
     * at multiples of 64 positions either way, so this computes exactly
     * what an engine with blocks of any multiple of 64 computes. */
    struct runner_params rp = {
        .n_batch = p.n_batch,
        .n_ctx = p.n_ctx,
        .n_threads = p.n_threads,
        .cache_type = p.cache_type,
        .block_tokens = p.n_ctx,
        .n_blocks = 1,
        .n_states = 1,
        .chunk_size = p.chunk_size,
    };
    hearth_status st = runner_new(model, &rp, &ctx->runner);
    uint64_t available;
    if (!st) st = model_memory_check(model, NULL, runner_host_bytes(ctx->runner), "the KV cache", &available);
    if (!st) {
        ctx->blocks = hearth_calloc((size_t)rp.n_blocks, sizeof *ctx->blocks, "the block table");
        ctx->pos = hearth_calloc((size_t)p.n_batch, sizeof *ctx->pos, "token positions");
        ctx->slot = hearth_calloc((size_t)p.n_batch, sizeof *ctx->slot, "token slots");
        ctx->logit_rows = hearth_calloc((size_t)p.n_batch, sizeof *ctx->logit_rows, "logit rows");
        if (!ctx->blocks || !ctx->pos || !ctx->slot || !ctx->logit_rows) st = HEARTH_E_NOMEM;
    }
    if (st) {
        hearth_context_free(ctx);
        return st;
    }
    for (int32_t i = 0; i < rp.n_blocks; i++) ctx->blocks[i] = i;
    *out = ctx;
    return HEARTH_OK;
}

int32_t hearth_context_n_ctx(const hearth_context *ctx) { return ctx->params.n_ctx; }
int32_t hearth_context_n_batch(const hearth_context *ctx) { return ctx->params.n_batch; }
int32_t hearth_context_n_threads(const hearth_context *ctx) { return ctx->params.n_threads; }
int32_t hearth_context_n_past(const hearth_context *ctx) { return ctx->n_used; }
size_t hearth_context_kv_bytes(const hearth_context *ctx) { return runner_memory_bytes(ctx->runner); }
int32_t hearth_context_n_gpu_layers(const hearth_context *ctx) { return runner_n_gpu_layers(ctx->runner); }
const char *hearth_context_gpu_fallback(const hearth_context *ctx) { return runner_gpu_fallback(ctx->runner); }
size_t hearth_context_kv_device_bytes(const hearth_context *ctx) { return runner_kv_device_bytes(ctx->runner); }
hearth_type hearth_context_cache_type(const hearth_context *ctx) { return runner_kv(ctx->runner)->type; }

hearth_status hearth_context_rewind(hearth_context *ctx, int32_t n_past)
{
    if (n_past < 0 || n_past > ctx->n_used)
        return hearth_error(HEARTH_E_INVALID, "cannot rewind to position %d: the context holds %d "
                            "tokens", n_past, ctx->n_used);
    struct rstate *rs = runner_rstate(ctx->runner);
    if (rs && n_past != 0 && n_past != ctx->n_used) {
        /* position 0 starts a fresh state by itself */
        if (n_past != rs->snapshot_pos)
            return hearth_error(HEARTH_E_UNSUPPORTED, "cannot rewind a recurrent model's state to "
                                "position %d: only to 0, to the current position %d or to a snapshot "
                                "(%s)", n_past, ctx->n_used,
                                rs->snapshot_pos >= 0 ? "saved at another position" : "none saved");
        rstate_restore(rs, 0);
    }
    ctx->n_used = n_past;
    ctx->n_logits = 0;
    return HEARTH_OK;
}

hearth_status hearth_context_snapshot(hearth_context *ctx)
{
    struct rstate *rs = runner_rstate(ctx->runner);
    if (!rs) return HEARTH_OK;
    return rstate_save(rs, 0, ctx->n_used);
}

void hearth_context_set_abort(hearth_context *ctx, bool (*should_abort)(void *data), void *data)
{
    runner_set_abort(ctx->runner, should_abort, data);
}

const float *hearth_context_logits(const hearth_context *ctx, int32_t i)
{
    if (i < 0 || i >= ctx->n_logits) return NULL;
    return ctx->logits + (size_t)i * (size_t)ctx->model->hp.n_vocab;
}

/* Run one batch of at most n_batch tokens; logits for its last n_logits
 * tokens go to ctx->logits from row logits_row. */
static hearth_status eval_batch(hearth_context *ctx, const int32_t *tokens, int32_t n, int32_t n_logits,
                                int32_t logits_row)
{
    const int32_t n_past = ctx->n_used;
    for (int32_t t = 0; t < n; t++) ctx->pos[t] = ctx->slot[t] = n_past + t;
    for (int32_t i = 0; i < n_logits; i++) ctx->logit_rows[i] = n - n_logits + i;
    const int32_t seq_start[2] = {0, n}, table_start[1] = {0};
    const struct runner_step step = {
        .tokens = tokens,
        .bp = {
            .pos = ctx->pos,
            .slot = ctx->slot,
            .n_tokens = n,
            .n_seqs = 1,
            .seq_start = seq_start,
            .blocks = ctx->blocks,
            .table_start = table_start,
        },
        .logit_rows = ctx->logit_rows,
        .n_logits = n_logits,
    };
    HEARTH_TRY(runner_eval(ctx->runner, &step));
    ctx->n_used = n_past + n;
    const size_t V = (size_t)ctx->model->hp.n_vocab;
    if (n_logits > 0)
        memcpy(ctx->logits + (size_t)logits_row * V, runner_logits(ctx->runner, 0),
               (size_t)n_logits * V * sizeof(float));
    return HEARTH_OK;
}

hearth_status hearth_eval(hearth_context *ctx, const int32_t *tokens, int32_t n_tokens,
                          int32_t n_logits)
{
    const hearth_model *m = ctx->model;
    if (n_tokens <= 0)
        return hearth_error(HEARTH_E_INVALID, "hearth_eval: %d tokens given", n_tokens);
    if (n_logits < 0 || n_logits > n_tokens)
        return hearth_error(HEARTH_E_INVALID, "hearth_eval: %d logits requested for %d tokens",
                            n_logits, n_tokens);
    if (n_tokens > ctx->params.n_ctx - ctx->n_used)
        return hearth_error(HEARTH_E_RANGE, "%d tokens do not fit in the context: %d of %d "
                            "positions are used", n_tokens, ctx->n_used, ctx->params.n_ctx);
    for (int32_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= m->hp.n_vocab)
            return hearth_error(HEARTH_E_INVALID, "token id %d at index %d is outside the "
                                "vocabulary (0..%d)", tokens[i], i, m->hp.n_vocab - 1);

    if (n_logits > ctx->logits_capacity) {
        float *l = hearth_aligned_alloc(64, (size_t)n_logits * (size_t)m->hp.n_vocab * sizeof(float),
                                        "logits");
        if (!l) return HEARTH_E_NOMEM;
        hearth_aligned_free(ctx->logits);
        ctx->logits = l;
        ctx->logits_capacity = n_logits;
    }
    ctx->n_logits = 0;
    const int32_t first_logit = n_tokens - n_logits;
    const int32_t start_pos = ctx->n_used;
    for (int32_t done = 0; done < n_tokens;) {
        const int32_t n = HEARTH_MIN(ctx->params.n_batch, n_tokens - done);
        /* rows of this batch at or after first_logit */
        const int32_t want_from = HEARTH_MAX(first_logit, done);
        const int32_t nl = done + n > want_from ? done + n - want_from : 0;
        hearth_status st = eval_batch(ctx, tokens + done, n, nl, want_from - first_logit);
        if (st) {
            /* A failed batch leaves no half-written positions behind. */
            ctx->n_used = start_pos + done;
            return st;
        }
        done += n;
    }
    ctx->n_logits = n_logits;
    return HEARTH_OK;
}

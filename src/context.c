/*
 * context.c -- an inference context: one sequence's KV cache, the
 * activation buffers, and the forward pass that runs tokens through the
 * model.
 *
 * hearth_eval() appends tokens to the sequence.  A prompt (prefill) goes
 * through in batches of up to n_batch tokens, each weight matrix applied to
 * the whole batch at once; a generated token (decode) is a batch of one.
 * Both write the same cache, so prefill of n tokens and n single-token
 * steps give the same results.
 *
 * When the model offloaded its last layers to a device, the layers before
 * them run on the CPU backend and those on the device backend, each with
 * its own buffers and its part of the KV cache; the hidden state crosses
 * once per batch, and the logits come back from wherever the output layer
 * is.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend.h"
#include "forward.h"
#include "kv_cache.h"
#include "model.h"
#include "quant.h"

#define DEFAULT_N_CTX_CAP 4096
#define DEFAULT_N_BATCH 512

struct hearth_context {
    const hearth_model *model;
    hearth_context_params params;
    struct hearth_backend *cpu;
    struct hearth_backend *gpu;    /* offloaded layers, or NULL */
    struct kv_cache *kv;
    struct forward fw;             /* buffers on the CPU backend */
    struct forward fw_gpu;         /* buffers on the device */
    struct act gpu_logits;         /* logits computed on the device */
    int32_t first_gpu_layer;       /* n_layer when nothing is offloaded */
    bool output_on_gpu;
    char *gpu_fallback;            /* why the device was not used, or NULL */
    int32_t *pos;                  /* positions of the current batch */
    float *embd;                   /* host staging for the embeddings */
    float *logits;                 /* n_logits rows of n_vocab */
    int32_t n_logits;              /* rows valid after the last eval */
    int32_t logits_capacity;       /* rows allocated */
    bool (*abort_cb)(void *);
    void *abort_data;
};

void hearth_context_default_params(hearth_context_params *p)
{
    memset(p, 0, sizeof *p);
    p->n_ctx = 0;
    p->n_batch = DEFAULT_N_BATCH;
    p->n_threads = 0;
    p->cache_type = HEARTH_TYPE_F16;
}

static int default_threads(void)
{
#ifdef _OPENMP
    return omp_get_num_procs();
#else
    return 1;
#endif
}

static void free_forward(struct forward *f)
{
    if (!f->be) return;
    struct act *bufs[] = {&f->x, &f->cur, &f->q, &f->k, &f->v, &f->att, &f->gate, &f->up};
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(bufs); i++)
        if (bufs[i]->host || bufs[i]->dev) f->be->ops->act_free(f->be, bufs[i]);
}

static hearth_status alloc_forward(struct forward *f, int64_t rows)
{
    const struct hparams *hp = &f->model->hp;
    const int64_t n_q = (int64_t)hp->n_head * hp->head_dim;
    const int64_t n_kv = (int64_t)hp->n_head_kv * hp->head_dim;
    const struct backend_ops *op = f->be->ops;
    HEARTH_TRY(op->act_alloc(f->be, &f->x, rows, hp->n_embd));
    HEARTH_TRY(op->act_alloc(f->be, &f->cur, rows, hp->n_embd > n_q ? hp->n_embd : n_q));
    HEARTH_TRY(op->act_alloc(f->be, &f->q, rows, n_q));
    HEARTH_TRY(op->act_alloc(f->be, &f->k, rows, n_kv));
    HEARTH_TRY(op->act_alloc(f->be, &f->v, rows, n_kv));
    HEARTH_TRY(op->act_alloc(f->be, &f->att, rows, n_q));
    HEARTH_TRY(op->act_alloc(f->be, &f->gate, rows, hp->n_ff));
    HEARTH_TRY(op->act_alloc(f->be, &f->up, rows, hp->n_ff));
    return HEARTH_OK;
}

/* Drop the device side: its buffers, its KV cache and the backend. */
static void free_gpu(hearth_context *ctx)
{
    free_forward(&ctx->fw_gpu);
    if (ctx->gpu_logits.dev) ctx->gpu->ops->act_free(ctx->gpu, &ctx->gpu_logits);
    backend_opencl_free(ctx->gpu);
    memset(&ctx->fw_gpu, 0, sizeof ctx->fw_gpu);
    ctx->gpu = NULL;
}

void hearth_context_free(hearth_context *ctx)
{
    if (!ctx) return;
    free_forward(&ctx->fw);
    free_gpu(ctx);
    backend_cpu_free(ctx->cpu);
    kv_cache_free(ctx->kv);
    free(ctx->gpu_fallback);
    free(ctx->pos);
    hearth_aligned_free(ctx->embd);
    hearth_aligned_free(ctx->logits);
    free(ctx);
}

/* The device part: the KV cache split between host and device, the
 * device backend and its buffers.  When that fails and the model allows
 * it, the context runs on the CPU alone and keeps the reason. */
static hearth_status setup_gpu(hearth_context *ctx)
{
    const hearth_model *m = ctx->model;
    const struct hparams *hp = &m->hp;
    const hearth_context_params *p = &ctx->params;
    const int32_t first = m->offload.first_layer;
    bool *on_host = hearth_calloc((size_t)hp->n_layer, sizeof *on_host, "the KV cache layout");
    if (!on_host) return HEARTH_E_NOMEM;
    for (int32_t il = 0; il < first; il++) on_host[il] = true;
    hearth_status st = kv_cache_new(p->cache_type, p->n_ctx, hp->n_layer, hp->n_head_kv,
                                    hp->head_dim, on_host, &ctx->kv);
    free(on_host);
    if (st) return st;
    st = backend_opencl_new(m, ctx->kv, p->n_batch, &ctx->gpu);
    if (!st) {
        ctx->fw_gpu.model = m;
        ctx->fw_gpu.be = ctx->gpu;
        ctx->fw_gpu.kv = ctx->kv;
        st = alloc_forward(&ctx->fw_gpu, p->n_batch);
    }
    if (!st) {
        ctx->first_gpu_layer = first;
        ctx->output_on_gpu = m->offload.output;
        return HEARTH_OK;
    }
    if (ctx->gpu) free_gpu(ctx);
    kv_cache_free(ctx->kv);
    ctx->kv = NULL;
    if (!m->params.gpu_fallback) return st;
    ctx->gpu_fallback = hearth_strdup(hearth_last_error(), "the offload fallback reason");
    return ctx->gpu_fallback ? HEARTH_OK : HEARTH_E_NOMEM;
}

hearth_status hearth_context_new(const hearth_model *model, const hearth_context_params *params,
                                 hearth_context **out)
{
    if (!model || !out) return hearth_error(HEARTH_E_INVALID, "hearth_context_new: NULL argument");
    hearth_context_params p;
    if (params) p = *params;
    else hearth_context_default_params(&p);
    const struct hparams *hp = &model->hp;

    if (p.n_ctx < 0) return hearth_error(HEARTH_E_INVALID, "context size %d is negative", p.n_ctx);
    if (p.n_ctx == 0) p.n_ctx = hp->n_ctx_train < DEFAULT_N_CTX_CAP ? hp->n_ctx_train : DEFAULT_N_CTX_CAP;
    if (p.n_ctx > (1 << 24))
        return hearth_error(HEARTH_E_INVALID, "context size %d is too large (at most %d)", p.n_ctx,
                            1 << 24);
    if (p.n_batch < 0) return hearth_error(HEARTH_E_INVALID, "batch size %d is negative", p.n_batch);
    if (p.n_batch == 0) p.n_batch = DEFAULT_N_BATCH;
    if (p.n_batch > p.n_ctx) p.n_batch = p.n_ctx;
    if (p.n_threads < 0) return hearth_error(HEARTH_E_INVALID, "thread count %d is negative", p.n_threads);
    if (p.n_threads == 0) p.n_threads = default_threads();
    if (p.n_threads > 1024) return hearth_error(HEARTH_E_INVALID, "thread count %d is too large", p.n_threads);

    hearth_context *ctx = hearth_calloc(1, sizeof *ctx, "a context");
    if (!ctx) return HEARTH_E_NOMEM;
    ctx->model = model;
    ctx->params = p;
    ctx->first_gpu_layer = hp->n_layer;
    hearth_status st = backend_cpu_new(p.n_threads, &ctx->cpu);
    if (!st && model->offload.ocl) st = setup_gpu(ctx);
    if (!st && !ctx->gpu)
        st = kv_cache_new(p.cache_type, p.n_ctx, hp->n_layer, hp->n_head_kv, hp->head_dim, NULL,
                          &ctx->kv);
    if (!st && (ctx->first_gpu_layer > 0 || !ctx->output_on_gpu)) {
        ctx->fw.model = model;
        ctx->fw.be = ctx->cpu;
        ctx->fw.kv = ctx->kv;
        st = alloc_forward(&ctx->fw, p.n_batch);
    }
    if (!st) {
        ctx->pos = hearth_calloc((size_t)p.n_batch, sizeof *ctx->pos, "token positions");
        ctx->embd = hearth_aligned_alloc(64, (size_t)p.n_batch * (size_t)hp->n_embd * sizeof(float),
                                         "embeddings");
        if (!ctx->pos || !ctx->embd) st = HEARTH_E_NOMEM;
    }
    if (st) {
        hearth_context_free(ctx);
        return st;
    }
    *out = ctx;
    return HEARTH_OK;
}

int32_t hearth_context_n_ctx(const hearth_context *ctx) { return ctx->params.n_ctx; }
int32_t hearth_context_n_batch(const hearth_context *ctx) { return ctx->params.n_batch; }
int32_t hearth_context_n_threads(const hearth_context *ctx) { return ctx->params.n_threads; }
int32_t hearth_context_n_past(const hearth_context *ctx) { return ctx->kv->n_used; }
size_t hearth_context_kv_bytes(const hearth_context *ctx) { return kv_cache_bytes(ctx->kv); }
int32_t hearth_context_n_gpu_layers(const hearth_context *ctx) { return ctx->model->hp.n_layer - ctx->first_gpu_layer; }
const char *hearth_context_gpu_fallback(const hearth_context *ctx) { return ctx->gpu_fallback; }

size_t hearth_context_kv_device_bytes(const hearth_context *ctx)
{
    return 2 * ctx->kv->row_bytes * (size_t)ctx->kv->n_ctx *
           (size_t)hearth_context_n_gpu_layers(ctx);
}
hearth_type hearth_context_cache_type(const hearth_context *ctx) { return ctx->kv->type; }

hearth_status hearth_context_rewind(hearth_context *ctx, int32_t n_past)
{
    if (n_past < 0 || n_past > ctx->kv->n_used)
        return hearth_error(HEARTH_E_INVALID, "cannot rewind to position %d: the context holds %d "
                            "tokens", n_past, ctx->kv->n_used);
    ctx->kv->n_used = n_past;
    ctx->n_logits = 0;
    return HEARTH_OK;
}

void hearth_context_set_abort(hearth_context *ctx, bool (*should_abort)(void *data), void *data)
{
    ctx->abort_cb = should_abort;
    ctx->abort_data = data;
}

const float *hearth_context_logits(const hearth_context *ctx, int32_t i)
{
    if (i < 0 || i >= ctx->n_logits) return NULL;
    return ctx->logits + (size_t)i * (size_t)ctx->model->hp.n_vocab;
}

/* Token embeddings: row `token` of token_embd, dequantized. */
static hearth_status embed(hearth_context *ctx, const int32_t *tokens, int64_t n)
{
    const struct weight *e = &ctx->model->tok_embd;
    const int64_t n_embd = ctx->model->hp.n_embd;
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *row = (const uint8_t *)e->data + (size_t)tokens[t] * e->row_bytes;
        if (!quant_dequantize_row(e->type, row, ctx->embd + t * n_embd, n_embd))
            return hearth_error(HEARTH_E_UNSUPPORTED, "token_embd.weight: type %s cannot be read",
                                hearth_type_name(e->type));
    }
    return HEARTH_OK;
}

/* Hand the hidden state of n tokens from one backend's buffers to the
 * other's, through the host staging buffer. */
static hearth_status move_hidden(hearth_context *ctx, const struct forward *from, struct forward *to,
                                 int64_t n)
{
    HEARTH_TRY(from->be->ops->act_download(from->be, ctx->embd, &from->x, n));
    HEARTH_TRY(to->be->ops->act_upload(to->be, &to->x, ctx->embd, n));
    to->x.rows = n;
    return HEARTH_OK;
}

/* Final norm and LM head for the last n_logits of the n rows in f->x,
 * into ctx->logits from row logits_row. */
static hearth_status output_head(hearth_context *ctx, struct forward *f, int64_t n, int64_t n_logits,
                                 int64_t logits_row)
{
    const hearth_model *m = ctx->model;
    struct hearth_backend *be = f->be;
    const struct backend_ops *op = be->ops;
    const int64_t V = m->hp.n_vocab;
    HEARTH_TRY(op->copy_rows(be, &f->cur, &f->x, n - n_logits, n_logits));
    HEARTH_TRY(op->rmsnorm(be, &f->cur, &f->cur, &m->output_norm, m->hp.norm_eps));
    float *dst = ctx->logits + logits_row * V;
    if (be == ctx->cpu) {
        struct act logits = {dst, NULL, n_logits, V, n_logits * V};
        return op->matmul(be, &logits, &m->output, &f->cur);
    }
    if (ctx->gpu_logits.capacity < n_logits * V) {
        if (ctx->gpu_logits.dev) op->act_free(be, &ctx->gpu_logits);
        HEARTH_TRY(op->act_alloc(be, &ctx->gpu_logits, n_logits, V));
    }
    HEARTH_TRY(op->matmul(be, &ctx->gpu_logits, &m->output, &f->cur));
    return op->act_download(be, dst, &ctx->gpu_logits, n_logits);
}

/* Run one batch of at most n_batch tokens; compute logits for its last
 * n_logits tokens into ctx->logits starting at row logits_row. */
static hearth_status eval_batch(hearth_context *ctx, const int32_t *tokens, int64_t n,
                                int64_t n_logits, int64_t logits_row)
{
    const hearth_model *m = ctx->model;
    const int32_t n_past = ctx->kv->n_used;

    for (int64_t t = 0; t < n; t++) ctx->pos[t] = n_past + (int32_t)t;
    struct forward *f = ctx->first_gpu_layer == 0 ? &ctx->fw_gpu : &ctx->fw;
    ctx->fw.bp.pos = ctx->fw_gpu.bp.pos = ctx->pos;
    ctx->fw.bp.n_tokens = ctx->fw_gpu.bp.n_tokens = n;
    HEARTH_TRY(embed(ctx, tokens, n));
    HEARTH_TRY(f->be->ops->act_upload(f->be, &f->x, ctx->embd, n));
    f->x.rows = n;

    for (int il = 0; il < m->hp.n_layer; il++) {
        if (ctx->abort_cb && ctx->abort_cb(ctx->abort_data))
            return hearth_error(HEARTH_E_INTERRUPTED, "evaluation interrupted");
        if (il == ctx->first_gpu_layer && f != &ctx->fw_gpu) {
            HEARTH_TRY(move_hidden(ctx, f, &ctx->fw_gpu, n));
            f = &ctx->fw_gpu;
        }
        HEARTH_TRY(m->arch->layer(f, il));
    }
    ctx->kv->n_used = n_past + (int32_t)n;

    if (n_logits > 0) {
        if (f == &ctx->fw_gpu && !ctx->output_on_gpu) {
            HEARTH_TRY(move_hidden(ctx, f, &ctx->fw, n));
            f = &ctx->fw;
        }
        HEARTH_TRY(output_head(ctx, f, n, n_logits, logits_row));
    }
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
    if (n_tokens > ctx->params.n_ctx - ctx->kv->n_used)
        return hearth_error(HEARTH_E_RANGE, "%d tokens do not fit in the context: %d of %d "
                            "positions are used", n_tokens, ctx->kv->n_used, ctx->params.n_ctx);
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
    const int32_t start_pos = ctx->kv->n_used;
    for (int32_t done = 0; done < n_tokens;) {
        const int32_t n = HEARTH_MIN(ctx->params.n_batch, n_tokens - done);
        /* rows of this batch at or after first_logit */
        const int32_t want_from = HEARTH_MAX(first_logit, done);
        const int32_t nl = done + n > want_from ? done + n - want_from : 0;
        hearth_status st = eval_batch(ctx, tokens + done, n, nl, want_from - first_logit);
        if (st) {
            /* A failed batch leaves no half-written positions behind. */
            ctx->kv->n_used = start_pos + done;
            return st;
        }
        done += n;
    }
    ctx->n_logits = n_logits;
    return HEARTH_OK;
}

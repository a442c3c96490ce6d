/*
 * runner.c -- the forward pass of one batch of rows from any number of
 * sequences (runner.h).
 *
 * When the model offloaded its last layers to a device, the layers before
 * them run on the CPU backend and those on the device backend, each with
 * its own buffers and its part of the KV cache; the hidden state crosses
 * once per step, and the logits come back from wherever the output layer
 * is.
 *
 * A model loaded as a rank of a pipeline (model.h, stage_first; the
 * messages in dist/pipeline.h) runs only its layers: rank 0 embeds the
 * tokens, runs its layers and hands the step on; the other ranks run
 * theirs in runner_eval_stage(); the last rank's logits come back to rank
 * 0's runner_eval().  Each rank keeps the keys and values of its own
 * layers, in blocks numbered as rank 0's pool numbers them.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend.h"
#include "forward.h"
#include "kernels.h"
#include "kv_cache.h"
#include "model.h"
#include "pipeline.h"
#include "quant.h"
#include "rstate.h"
#include "runner.h"

struct runner {
    const hearth_model *model;
    struct runner_params params;
    struct hearth_backend *cpu;
    struct hearth_backend *gpu;    /* offloaded layers, or NULL */
    struct kv_cache *kv;
    struct rstate *rs;             /* recurrent models' states, or NULL */
    struct forward fw;             /* buffers on the CPU backend */
    struct forward fw_gpu;         /* buffers on the device */
    struct act gpu_logits;         /* logits computed on the device */
    int32_t first_gpu_layer;       /* n_layer when nothing is offloaded */
    bool output_on_gpu;
    char *gpu_fallback;            /* why the device was not used, or NULL */
    float *embd;                   /* host staging for the embeddings */
    /* params.mtp: the trunk's output-normed hidden state of the last
     * step's rows, the prediction layer's input [e | h] (2 n_embd wide)
     * and its output-normed hidden state */
    struct act hid, mtp_cat, mtp_out;
    float *hidden;                 /* the step's hidden_rows, output-normed,
                                    * n_embd each (hidden_capacity rows) */
    int32_t hidden_capacity;
    float *logits;                 /* n_logits rows of n_vocab */
    int32_t n_logits;              /* rows valid after the last step */
    int32_t logits_capacity;       /* rows allocated */
    bool (*abort_cb)(void *);
    void *abort_data;
    bool peers;                    /* rank 0 of a pipeline: the other ranks
                                    * hold runners of this one (pipe_setup()) */
    int32_t pipe_id;               /* which, in the messages */
    /* steps submitted and not collected (runner_submit()), oldest at
     * fl_first: what each wants back and, without a pipeline, what came */
    struct flight {
        int32_t n_logits, n_hidden;
        float *logits, *hidden;    /* no pipeline: the step's results */
        int32_t logits_cap, hidden_cap; /* rows */
    } fl[RUNNER_IN_FLIGHT_MAX];
    int32_t fl_first, fl_n;
};

#define DEFAULT_N_CTX_CAP 4096
#define DEFAULT_N_BATCH 512

hearth_status runner_resolve_sizes(const hearth_model *model, int32_t *n_ctx, int32_t *n_batch,
                                   int32_t *n_threads)
{
    const struct hparams *hp = &model->hp;
    if (*n_ctx < 0) return hearth_error(HEARTH_E_INVALID, "context size %d is negative", *n_ctx);
    if (*n_ctx == 0) *n_ctx = hp->n_ctx_train < DEFAULT_N_CTX_CAP ? hp->n_ctx_train : DEFAULT_N_CTX_CAP;
    if (*n_ctx > (1 << 24))
        return hearth_error(HEARTH_E_INVALID, "context size %d is too large (at most %d)", *n_ctx, 1 << 24);
    if (*n_batch < 0) return hearth_error(HEARTH_E_INVALID, "batch size %d is negative", *n_batch);
    if (*n_batch == 0) *n_batch = DEFAULT_N_BATCH;
    if (*n_threads < 0) return hearth_error(HEARTH_E_INVALID, "thread count %d is negative", *n_threads);
#ifdef _OPENMP
    if (*n_threads == 0) *n_threads = omp_get_num_procs();
#else
    if (*n_threads == 0) *n_threads = 1;
#endif
    if (*n_threads > 1024) return hearth_error(HEARTH_E_INVALID, "thread count %d is too large", *n_threads);
    return HEARTH_OK;
}

static void free_forward(struct forward *f)
{
    if (!f->be) return;
    struct act *bufs[] = {&f->x,    &f->cur,     &f->q,          &f->k,         &f->v,
                          &f->att,  &f->gate,    &f->up,         &f->router,    &f->moe_out,
                          &f->moe_shared, &f->shared_gate};
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(bufs); i++)
        if (bufs[i]->host || bufs[i]->dev) f->be->ops->act_free(f->be, bufs[i]);
    for (int i = 0; i < FORWARD_EXTRA_MAX; i++)
        if (f->extra[i].host || f->extra[i].dev) f->be->ops->act_free(f->be, &f->extra[i]);
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
    const int64_t n_ff = hp->n_ff > hp->n_ff_shexp ? hp->n_ff : hp->n_ff_shexp;
    HEARTH_TRY(op->act_alloc(f->be, &f->gate, rows, n_ff));
    HEARTH_TRY(op->act_alloc(f->be, &f->up, rows, n_ff));
    if (hp->n_expert > 0) {
        HEARTH_TRY(op->act_alloc(f->be, &f->router, rows, hp->n_expert));
        HEARTH_TRY(op->act_alloc(f->be, &f->moe_out, rows, hp->n_embd));
        if (hp->n_ff_shexp > 0) {
            HEARTH_TRY(op->act_alloc(f->be, &f->moe_shared, rows, hp->n_embd));
            HEARTH_TRY(op->act_alloc(f->be, &f->shared_gate, rows, 1));
        }
    }
    if (f->model->arch->extra_widths) {
        int64_t widths[FORWARD_EXTRA_MAX] = {0};
        f->model->arch->extra_widths(f->model, widths);
        for (int i = 0; i < FORWARD_EXTRA_MAX; i++)
            if (widths[i] > 0) HEARTH_TRY(op->act_alloc(f->be, &f->extra[i], rows, widths[i]));
    }
    return HEARTH_OK;
}

/* Drop the device side: its buffers, its KV cache and the backend. */
static void free_gpu(struct runner *r)
{
    free_forward(&r->fw_gpu);
    if (r->gpu_logits.dev) r->gpu->ops->act_free(r->gpu, &r->gpu_logits);
    backend_opencl_free(r->gpu);
    memset(&r->fw_gpu, 0, sizeof r->fw_gpu);
    r->gpu = NULL;
}

void runner_free(struct runner *r)
{
    if (!r) return;
    /* rank 0's runner: the other ranks free theirs */
    if (r->peers) {
        /* the answers of steps in flight come first */
        while (r->fl_n > 0) (void)runner_collect(r);
        pipe_release(r->model->pipe, r->pipe_id);
    }
    for (int i = 0; i < RUNNER_IN_FLIGHT_MAX; i++) {
        hearth_aligned_free(r->fl[i].logits);
        hearth_aligned_free(r->fl[i].hidden);
    }
    free_forward(&r->fw);
    struct act *mtp[] = {&r->hid, &r->mtp_cat, &r->mtp_out};
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(mtp); i++)
        if (mtp[i]->host) r->cpu->ops->act_free(r->cpu, mtp[i]);
    free_gpu(r);
    backend_cpu_free(r->cpu);
    kv_cache_free(r->kv);
    rstate_free(r->rs);
    free(r->gpu_fallback);
    hearth_aligned_free(r->embd);
    hearth_aligned_free(r->hidden);
    hearth_aligned_free(r->logits);
    free(r);
}

static hearth_status new_kv(struct runner *r, const bool *on_host)
{
    const struct hparams *hp = &r->model->hp;
    const struct runner_params *p = &r->params;
    const struct kv_shape shape = kv_shape_of_model(r->model);
    /* the prediction layer's keys and values after the trunk's */
    const int32_t n_kv = hp->n_layer + (p->mtp ? r->model->n_mtp : 0);
    if (r->model->rec) {
        /* Recurrent layers keep no keys and values: a cache with the
         * pool's shape for the bookkeeping, none of its layers allocated
         * but the attention layers of a hybrid family, and a state per
         * sequence instead. */
        bool *attn = hearth_calloc((size_t)n_kv, sizeof *attn, "the KV cache layout");
        if (!attn) return HEARTH_E_NOMEM;
        for (int32_t il = 0; r->model->rec->has_kv && il < n_kv; il++)
            attn[il] = r->model->rec->has_kv(r->model, il);
        hearth_status st = kv_cache_new(p->cache_type, p->block_tokens, p->n_blocks, n_kv, &shape, attn, &r->kv);
        /* the attention layers keep keys and values, the others a state */
        if (!st)
            st = rstate_new(p->n_states > 0 ? p->n_states : 1, hp->n_layer, r->model->rec->state_floats(r->model),
                            attn, &r->rs);
        free(attn);
        return st;
    }
    if (r->model->pipe) {
        /* a pipeline's rank: its own layers, the sliding ones in the window
         * space when there is one */
        bool *mine = hearth_calloc(2 * (size_t)hp->n_layer, sizeof *mine, "the KV cache layout");
        if (!mine) return HEARTH_E_NOMEM;
        bool *window = mine + hp->n_layer;
        for (int32_t il = r->model->stage_first; il < r->model->stage_end; il++) {
            mine[il] = true;
            window[il] = p->n_blocks_window > 0 && hparams_layer_window(hp, il) > 0;
        }
        hearth_status st = kv_cache_new_split(p->cache_type, p->block_tokens, p->n_blocks,
                                              p->n_blocks_window > 0 ? p->n_blocks_window : 0, hp->n_layer, &shape,
                                              mine, p->n_blocks_window > 0 ? window : NULL, &r->kv);
        free(mine);
        return st;
    }
    if (on_host || p->n_blocks_window <= 0)
        return kv_cache_new(p->cache_type, p->block_tokens, p->n_blocks, on_host ? hp->n_layer : n_kv, &shape,
                            on_host, &r->kv);
    /* every layer on the host: the sliding ones in the window space (the
     * prediction layer's keys and values stay in the other) */
    bool *window = hearth_calloc((size_t)n_kv, sizeof *window, "the KV cache layout");
    if (!window) return HEARTH_E_NOMEM;
    for (int32_t il = 0; il < hp->n_layer; il++) window[il] = hparams_layer_window(hp, il) > 0;
    hearth_status st = kv_cache_new_split(p->cache_type, p->block_tokens, p->n_blocks, p->n_blocks_window, n_kv,
                                          &shape, NULL, window, &r->kv);
    free(window);
    return st;
}

/* The device part: the KV cache split between host and device, the
 * device backend and its buffers.  When that fails and the model allows
 * it, the runner uses the CPU alone and keeps the reason. */
static hearth_status setup_gpu(struct runner *r)
{
    const hearth_model *m = r->model;
    const struct hparams *hp = &m->hp;
    const struct runner_params *p = &r->params;
    const int32_t first = m->offload.first_layer;
    bool *on_host = hearth_calloc((size_t)hp->n_layer, sizeof *on_host, "the KV cache layout");
    if (!on_host) return HEARTH_E_NOMEM;
    for (int32_t il = 0; il < first; il++) on_host[il] = true;
    hearth_status st = new_kv(r, on_host);
    free(on_host);
    if (st) return st;
    st = backend_opencl_new(m, r->kv, p->n_batch, p->n_ctx, &r->gpu);
    if (!st) {
        r->fw_gpu.model = m;
        r->fw_gpu.be = r->gpu;
        r->fw_gpu.kv = r->kv;
        st = alloc_forward(&r->fw_gpu, p->n_batch);
    }
    if (!st) {
        r->first_gpu_layer = first;
        r->output_on_gpu = m->offload.output;
        return HEARTH_OK;
    }
    if (r->gpu) free_gpu(r);
    kv_cache_free(r->kv);
    r->kv = NULL;
    if (!m->params.gpu_fallback) return st;
    r->gpu_fallback = hearth_strdup(hearth_last_error(), "the offload fallback reason");
    return r->gpu_fallback ? HEARTH_OK : HEARTH_E_NOMEM;
}

hearth_status runner_new(const hearth_model *model, const struct runner_params *params,
                         struct runner **out)
{
    const struct hparams *hp = &model->hp;
    struct runner *r = hearth_calloc(1, sizeof *r, "a forward-pass runner");
    if (!r) return HEARTH_E_NOMEM;
    r->model = model;
    r->params = *params;
    r->first_gpu_layer = hp->n_layer;
    if (params->mtp && model->pipe) {
        free(r);
        return hearth_error(HEARTH_E_UNSUPPORTED, "multi-token prediction does not run in a pipeline yet");
    }
    if (params->mtp && (model->n_mtp == 0 || model->offload.ocl)) {
        free(r);
        return hearth_error(HEARTH_E_UNSUPPORTED, model->n_mtp == 0
                                ? "the model has no multi-token-prediction layer"
                                : "multi-token prediction runs on the CPU: offload no layers");
    }
    hearth_status st = backend_cpu_new(params->n_threads, &r->cpu);
    if (!st && model->offload.ocl) st = setup_gpu(r);
    if (!st && !r->gpu) st = new_kv(r, NULL);
    if (!st && (r->first_gpu_layer > 0 || !r->output_on_gpu)) {
        r->fw.model = model;
        r->fw.be = r->cpu;
        r->fw.kv = r->kv;
        r->fw.rs = r->rs;
        r->fw.chunk_size = params->chunk_size;
        st = alloc_forward(&r->fw, params->n_batch);
    }
    if (!st) {
        r->embd = hearth_aligned_alloc(64, (size_t)params->n_batch * (size_t)hp->n_embd * sizeof(float),
                                       "embeddings");
        if (!r->embd) st = HEARTH_E_NOMEM;
    }
    if (!st && params->mtp) {
        const struct backend_ops *op = r->cpu->ops;
        st = op->act_alloc(r->cpu, &r->hid, params->n_batch, hp->n_embd);
        if (!st) st = op->act_alloc(r->cpu, &r->mtp_cat, params->n_batch, 2 * (int64_t)hp->n_embd);
        if (!st) st = op->act_alloc(r->cpu, &r->mtp_out, params->n_batch, hp->n_embd);
    }
    if (!st && model->pipe && pipe_rank(model->pipe) == 0) {
        /* the other ranks make theirs; a failure there frees them again */
        const struct pipe_setup setup = {
            .n_batch = params->n_batch, .n_ctx = params->n_ctx, .cache_type = params->cache_type,
            .block_tokens = params->block_tokens, .n_blocks = params->n_blocks,
            .n_blocks_window = params->n_blocks_window, .chunk_size = params->chunk_size,
        };
        st = pipe_setup(model->pipe, &setup, &r->pipe_id);
        r->peers = !st;
    }
    if (st) {
        runner_free(r);
        return st;
    }
    *out = r;
    return HEARTH_OK;
}

const struct kv_cache *runner_kv(const struct runner *r) { return r->kv; }
struct rstate *runner_rstate(const struct runner *r) { return r->rs; }

int32_t runner_kv_layers(const struct runner *r)
{
    /* a pipeline's rank holds its own layers' keys and values only */
    if (!r->rs && !r->model->pipe) return r->kv->n_layer;
    int32_t n = 0;
    for (int32_t il = 0; il < r->kv->n_layer; il++) n += r->kv->layers[il].k != NULL;
    return n;
}

size_t runner_memory_bytes(const struct runner *r)
{
    if (!r->rs) return r->model->pipe ? kv_cache_bytes_held(r->kv) : kv_cache_bytes(r->kv);
    /* the states, and the keys and values of a hybrid's attention layers */
    return rstate_bytes_per_seq(r->rs) * (size_t)r->rs->n_slots +
           2 * r->kv->block_bytes * (size_t)r->kv->n_blocks * (size_t)runner_kv_layers(r);
}
const struct runner_params *runner_params(const struct runner *r) { return &r->params; }
int32_t runner_n_gpu_layers(const struct runner *r) { return r->model->hp.n_layer - r->first_gpu_layer; }
const char *runner_gpu_fallback(const struct runner *r) { return r->gpu_fallback; }

size_t runner_kv_device_bytes(const struct runner *r)
{
    return 2 * r->kv->block_bytes * (size_t)r->kv->n_blocks * (size_t)runner_n_gpu_layers(r);
}

size_t runner_host_bytes(const struct runner *r)
{
    const size_t all = runner_memory_bytes(r), device = runner_kv_device_bytes(r);
    return all > device ? all - device : 0;
}

void runner_set_abort(struct runner *r, bool (*should_abort)(void *data), void *data)
{
    r->abort_cb = should_abort;
    r->abort_data = data;
}

const float *runner_logits(const struct runner *r, int32_t i)
{
    if (i < 0 || i >= r->n_logits) return NULL;
    return r->logits + (size_t)i * (size_t)r->model->hp.n_vocab;
}

hearth_status runner_copy_block(struct runner *r, int32_t src, int32_t dst, int32_t n_rows, bool window)
{
    if (r->peers) HEARTH_TRY(pipe_copy_block(r->model->pipe, r->pipe_id, src, dst, n_rows, window));
    if (r->first_gpu_layer > 0) HEARTH_TRY(r->cpu->ops->kv_copy_block(r->cpu, r->kv, src, dst, n_rows, window));
    if (r->gpu) HEARTH_TRY(r->gpu->ops->kv_copy_block(r->gpu, r->kv, src, dst, n_rows, window));
    return HEARTH_OK;
}

/* x[0 .. n) += row `row` of w, dequantized into tmp. */
static hearth_status add_embedding_row(const struct weight *w, int64_t row, float *x, float *tmp, int64_t n)
{
    if (row < 0 || row >= w->n_out)
        return hearth_error(HEARTH_E_RANGE, "%s: row %lld of %lld", w->name, (long long)row, (long long)w->n_out);
    if (!quant_dequantize_row(w->type, (const uint8_t *)w->data + (size_t)row * w->row_bytes, tmp, n))
        return hearth_error(HEARTH_E_UNSUPPORTED, "%s: type %s cannot be read", w->name, hearth_type_name(w->type));
    for (int64_t i = 0; i < n; i++) x[i] += tmp[i];
    return HEARTH_OK;
}

/* Token embeddings: row `token` of e (token_embd), dequantized; for an
 * encoder (pos not NULL), plus the row of the token's position and of
 * token type 0 where the model has them. */
static hearth_status embed(struct runner *r, const struct weight *e, const int32_t *tokens, const int32_t *pos,
                           int64_t n)
{
    const int64_t n_embd = r->model->hp.n_embd;
    /* An embedding the output layer shares is read from its packed copy,
     * whose rows stand in for the mapped ones (model.c, pack_weights). */
    uint8_t *unpacked = NULL;
    if (e->packed && !(unpacked = hearth_malloc(e->row_bytes, "an embedding row"))) return HEARTH_E_NOMEM;
    hearth_status st = HEARTH_OK;
    for (int64_t t = 0; t < n && !st; t++) {
        const uint8_t *row = (const uint8_t *)e->data + (size_t)tokens[t] * e->row_bytes;
        if (unpacked) {
            hearth_unpack_row(e->type, e->packed, e->n_out, tokens[t], e->n_in, unpacked);
            row = unpacked;
        }
        float *x = r->embd + t * n_embd;
        if (!quant_dequantize_row(e->type, row, x, n_embd))
            st = hearth_error(HEARTH_E_UNSUPPORTED, "%s: type %s cannot be read", e->name,
                              hearth_type_name(e->type));
        const float scale = r->model->hp.embd_scale;
        if (scale != 0.0f && scale != 1.0f) /* 0: not set by the family, none */
            for (int64_t i = 0; i < n_embd; i++) x[i] *= scale;
    }
    free(unpacked);
    const hearth_model *m = r->model;
    if (st || !pos || (!m->type_embd.data && !m->pos_embd.data)) return st;
    float *tmp = hearth_malloc((size_t)n_embd * sizeof *tmp, "an embedding row");
    if (!tmp) return HEARTH_E_NOMEM;
    for (int64_t t = 0; t < n && !st; t++) {
        float *x = r->embd + t * n_embd;
        if (m->type_embd.data) st = add_embedding_row(&m->type_embd, 0, x, tmp, n_embd);
        if (!st && m->pos_embd.data) st = add_embedding_row(&m->pos_embd, pos[t], x, tmp, n_embd);
    }
    free(tmp);
    return st;
}

/* Hand the hidden state of n tokens from one backend's buffers to the
 * other's, through the host staging buffer. */
static hearth_status move_hidden(struct runner *r, const struct forward *from, struct forward *to, int64_t n)
{
    HEARTH_TRY(from->be->ops->act_download(from->be, r->embd, &from->x, n));
    HEARTH_TRY(to->be->ops->act_upload(to->be, &to->x, r->embd, n));
    to->x.rows = n;
    return HEARTH_OK;
}

/* Final logit soft-capping (Gemma 2): z = cap * tanh(z / cap), on the
 * host copy of the logits. */
static void softcap_logits(struct runner *r, int32_t n_logits)
{
    const float cap = r->model->hp.final_softcap, inv = 1.0f / cap;
    const int64_t n = (int64_t)n_logits * r->model->hp.n_vocab;
    float *z = r->logits;
#pragma omp parallel for num_threads(r->params.n_threads) schedule(static) if (n >= 65536)
    for (int64_t i = 0; i < n; i++) z[i] = cap * tanhf(z[i] * inv);
}

/* Room in r->logits for n rows of n_vocab. */
/* Room for n rows of width floats in *buf, which holds *cap rows (its
 * contents are not kept). */
static hearth_status reserve_rows(float **buf, int32_t *cap, int32_t n, int64_t width, const char *what)
{
    if (n <= *cap) return HEARTH_OK;
    float *b = hearth_aligned_alloc(64, (size_t)n * (size_t)width * sizeof(float), what);
    if (!b) return HEARTH_E_NOMEM;
    hearth_aligned_free(*buf);
    *buf = b;
    *cap = n;
    return HEARTH_OK;
}

static hearth_status reserve_logits(struct runner *r, int32_t n)
{
    return reserve_rows(&r->logits, &r->logits_capacity, n, r->model->hp.n_vocab, "logits");
}

/* Rows rows[0 .. n) of src (increasing) into rows 0 .. n - 1 of dst, a run
 * of consecutive ones at a time. */
static hearth_status gather_rows(struct hearth_backend *be, struct act *dst, const struct act *src,
                                 const int32_t *rows, int32_t n)
{
    for (int32_t i = 0; i < n;) {
        int32_t j = i + 1;
        while (j < n && rows[j] == rows[j - 1] + 1) j++;
        HEARTH_TRY(be->ops->copy_rows(be, dst, i, src, rows[i], j - i));
        i = j;
    }
    return HEARTH_OK;
}

/* Room in r->hidden for n rows of n_embd. */
static hearth_status reserve_hidden(struct runner *r, int32_t n)
{
    return reserve_rows(&r->hidden, &r->hidden_capacity, n, r->model->hp.n_embd, "hidden states");
}

/* The final norm of the wanted rows of f->x, into r->hidden: what the
 * output layer reads, gathered and normed as output_head() does. */
static hearth_status output_hidden(struct runner *r, struct forward *f, const int32_t *rows, int32_t n)
{
    const hearth_model *m = r->model;
    struct hearth_backend *be = f->be;
    HEARTH_TRY(reserve_hidden(r, n));
    HEARTH_TRY(gather_rows(be, &f->cur, &f->x, rows, n));
    if (m->rec) HEARTH_TRY(m->rec->output_norm(f, &f->cur));
    else if (m->output_norm.data) /* an encoder's last layer ends normed */
        HEARTH_TRY(be->ops->rmsnorm(be, &f->cur, &f->cur, &m->output_norm, m->hp.norm_eps));
    return be->ops->act_download(be, r->hidden, &f->cur, n);
}

/* Final norm and LM head for the wanted rows of f->x, into r->logits. */
static hearth_status output_head(struct runner *r, struct forward *f, const int32_t *rows, int32_t n_logits)
{
    const hearth_model *m = r->model;
    struct hearth_backend *be = f->be;
    const struct backend_ops *op = be->ops;
    const int64_t V = m->hp.n_vocab;
    HEARTH_TRY(gather_rows(be, &f->cur, &f->x, rows, n_logits));
    if (m->rec) HEARTH_TRY(m->rec->output_norm(f, &f->cur));
    else HEARTH_TRY(op->rmsnorm(be, &f->cur, &f->cur, &m->output_norm, m->hp.norm_eps));
    if (be == r->cpu) {
        struct act logits = {r->logits, NULL, n_logits, V, n_logits * V};
        return op->matmul(be, &logits, &m->output, &f->cur);
    }
    if (r->gpu_logits.capacity < n_logits * V) {
        if (r->gpu_logits.dev) op->act_free(be, &r->gpu_logits);
        HEARTH_TRY(op->act_alloc(be, &r->gpu_logits, n_logits, V));
    }
    HEARTH_TRY(op->matmul(be, &r->gpu_logits, &m->output, &f->cur));
    return op->act_download(be, r->logits, &r->gpu_logits, n_logits);
}

static hearth_status eval_rest(struct runner *r, const struct runner_step *step, struct forward *f, bool tp,
                               bool post, bool *stage_done);

/* runner_eval(); submit: runner_submit()'s, where rank 0 of a pipeline
 * hands the step on without waiting for its answer. */
static hearth_status eval(struct runner *r, const struct runner_step *step, bool submit)
{
    const hearth_model *m = r->model;
    const int64_t n = step->bp.n_tokens;
    if (n <= 0 || n > r->params.n_batch)
        return hearth_error(HEARTH_E_INTERNAL, "a step of %lld rows (at most %d)", (long long)n,
                            r->params.n_batch);
    if (r->fl_n > 0 && !submit)
        return hearth_error(HEARTH_E_INTERNAL, "a step run while %d are in flight", r->fl_n);
    const bool post = submit && runner_max_in_flight(r) > 1;
    HEARTH_TRY(reserve_logits(r, step->n_logits));
    r->n_logits = 0;

    struct forward *f = r->first_gpu_layer == 0 ? &r->fw_gpu : &r->fw;
    r->fw.bp = r->fw_gpu.bp = step->bp;
    r->fw.n_ctx = r->fw_gpu.n_ctx = r->params.n_ctx;
    if (step->n_logits > 0 && model_embedding_only(m))
        return hearth_error(HEARTH_E_INTERNAL, "logits asked of an embedding model");
    HEARTH_TRY(embed(r, &m->tok_embd, step->tokens, step->bp.pos, n));
    HEARTH_TRY(f->be->ops->act_upload(f->be, &f->x, r->embd, n));
    f->x.rows = n;
    if (m->tok_norm.data) /* an encoder's input norm */
        HEARTH_TRY(f->be->ops->norm(f->be, &f->x, &f->x, m->hp.n_embd, m->tok_norm.data, m->tok_norm_b.data,
                                    m->hp.norm_eps));

    const bool tp = m->pipe && pipe_tp(m->pipe) > 1;
    if (tp) {
        /* the stage's other ranks run the step alongside, from here: they
         * take part in every product of its layers, so the step is not
         * interrupted once they have it, and a failure midway leaves them
         * out of step (the pipeline breaks) */
        if (r->abort_cb && r->abort_cb(r->abort_data))
            return hearth_error(HEARTH_E_INTERRUPTED, "evaluation interrupted");
        if (m->tok_norm.data) HEARTH_TRY(f->be->ops->act_download(f->be, r->embd, &f->x, n));
        HEARTH_TRY(pipe_send_peers(m->pipe, r->pipe_id, &(struct pipe_step){step->bp, step->logit_rows,
                                                                            step->n_logits, step->hidden_rows,
                                                                            step->n_hidden, r->embd,
                                                                            m->hp.n_embd},
                                   r->kv->block_tokens));
        bool stage_done = false;
        hearth_status st = eval_rest(r, step, f, true, false, &stage_done);
        if (st && !stage_done) pipe_break(m->pipe, st);
        return st;
    }
    bool stage_done;
    return eval_rest(r, step, f, false, post, &stage_done);
}

hearth_status runner_eval(struct runner *r, const struct runner_step *step)
{
    return eval(r, step, false);
}

int32_t runner_max_in_flight(const struct runner *r)
{
    const struct hearth_pipeline *p = r->model->pipe;
    if (!p || pipe_stages(p) < 2 || pipe_tp(p) > 1 || r->params.mtp) return 1;
    return HEARTH_MIN(pipe_stages(p), RUNNER_IN_FLIGHT_MAX);
}

int32_t runner_in_flight(const struct runner *r) { return r->fl_n; }

hearth_status runner_submit(struct runner *r, const struct runner_step *step)
{
    if (r->fl_n == RUNNER_IN_FLIGHT_MAX)
        return hearth_error(HEARTH_E_INTERNAL, "a step submitted while %d are in flight", r->fl_n);
    struct flight *fl = &r->fl[(r->fl_first + r->fl_n) % RUNNER_IN_FLIGHT_MAX];
    const hearth_model *m = r->model;
    HEARTH_TRY(eval(r, step, true));
    if (runner_max_in_flight(r) == 1) {
        /* in one process the step ran whole; its results wait in the
         * flight's buffers for runner_collect() */
        const size_t nl = (size_t)step->n_logits * (size_t)m->hp.n_vocab;
        const size_t nh = (size_t)step->n_hidden * (size_t)m->hp.n_embd;
        HEARTH_TRY(reserve_rows(&fl->logits, &fl->logits_cap, step->n_logits, m->hp.n_vocab, "a step's logits"));
        HEARTH_TRY(reserve_rows(&fl->hidden, &fl->hidden_cap, step->n_hidden, m->hp.n_embd,
                                "a step's hidden states"));
        if (nl) memcpy(fl->logits, r->logits, nl * sizeof(float));
        if (nh) memcpy(fl->hidden, r->hidden, nh * sizeof(float));
    }
    fl->n_logits = step->n_logits;
    fl->n_hidden = step->n_hidden;
    r->fl_n++;
    return HEARTH_OK;
}

hearth_status runner_collect(struct runner *r)
{
    if (r->fl_n == 0) return hearth_error(HEARTH_E_INTERNAL, "a step collected, but none is in flight");
    struct flight *fl = &r->fl[r->fl_first];
    r->fl_first = (r->fl_first + 1) % RUNNER_IN_FLIGHT_MAX;
    r->fl_n--;
    r->n_logits = 0;
    const hearth_model *m = r->model;
    const int64_t V = m->hp.n_vocab, E = m->hp.n_embd;
    HEARTH_TRY(reserve_logits(r, fl->n_logits));
    HEARTH_TRY(reserve_hidden(r, fl->n_hidden));
    if (runner_max_in_flight(r) > 1) {
        HEARTH_TRY(pipe_recv_out(m->pipe, r->logits, (int64_t)fl->n_logits * V, r->hidden,
                                 (int64_t)fl->n_hidden * E));
    } else {
        if (fl->n_logits) memcpy(r->logits, fl->logits, (size_t)fl->n_logits * (size_t)V * sizeof(float));
        if (fl->n_hidden) memcpy(r->hidden, fl->hidden, (size_t)fl->n_hidden * (size_t)E * sizeof(float));
    }
    r->n_logits = fl->n_logits;
    return HEARTH_OK;
}

/* runner_eval() from the layers on, f holding the rows' input; tp: in a
 * tensor-parallel stage (not interrupted).  *stage_done: the stage's
 * products are all made (what fails later leaves its ranks in step). */
static hearth_status eval_rest(struct runner *r, const struct runner_step *step, struct forward *f, bool tp,
                               bool post, bool *stage_done)
{
    *stage_done = false;
    const hearth_model *m = r->model;
    const int64_t n = step->bp.n_tokens;
    /* a pipeline's rank 0: its own layers only */
    const int32_t end = m->pipe ? m->stage_end : m->hp.n_layer;
    for (int il = 0; il < end; il++) {
        if (!tp && r->abort_cb && r->abort_cb(r->abort_data))
            return hearth_error(HEARTH_E_INTERRUPTED, "evaluation interrupted");
        /* the sends of the steps in flight go on between the layers */
        if (r->fl_n > 0 && m->pipe) pipe_progress(m->pipe);
        if (il == r->first_gpu_layer && f != &r->fw_gpu) {
            HEARTH_TRY(move_hidden(r, f, &r->fw_gpu, n));
            f = &r->fw_gpu;
        }
        HEARTH_TRY(m->arch->layer(f, il));
    }
    if (m->pipe && pipe_stages(m->pipe) > 1) {
        *stage_done = true;
        /* rank 0 of a pipeline: the other ranks run the other layers and
         * the output layer; the last one answers with what was asked */
        const int64_t E = m->hp.n_embd;
        HEARTH_TRY(f->be->ops->act_download(f->be, r->embd, &f->x, n));
        const struct pipe_step ps = {step->bp,          step->logit_rows, step->n_logits, step->hidden_rows,
                                     step->n_hidden,    r->embd,          E};
        /* in flight: runner_collect() takes the answer */
        if (post) return pipe_post_step(m->pipe, r->pipe_id, &ps, r->kv->block_tokens);
        HEARTH_TRY(pipe_send_step(m->pipe, r->pipe_id, &ps, r->kv->block_tokens));
        HEARTH_TRY(reserve_hidden(r, step->n_hidden));
        HEARTH_TRY(pipe_recv_out(m->pipe, r->logits, (int64_t)step->n_logits * m->hp.n_vocab, r->hidden,
                                 (int64_t)step->n_hidden * E));
        r->n_logits = step->n_logits;
        return HEARTH_OK;
    }

    if (r->params.mtp) {
        /* the prediction layer's input: every row's final hidden state */
        HEARTH_TRY(f->be->ops->copy_rows(f->be, &r->hid, 0, &f->x, 0, n));
        r->hid.rows = n;
        if (m->rec) HEARTH_TRY(m->rec->output_norm(f, &r->hid));
        else HEARTH_TRY(f->be->ops->rmsnorm(f->be, &r->hid, &r->hid, &m->output_norm, m->hp.norm_eps));
    }
    /* the output norm and layer where the output layer is */
    if ((step->n_hidden > 0 || step->n_logits > 0) && f == &r->fw_gpu && !r->output_on_gpu) {
        HEARTH_TRY(move_hidden(r, f, &r->fw, n));
        f = &r->fw;
    }
    if (step->n_hidden > 0) HEARTH_TRY(output_hidden(r, f, step->hidden_rows, step->n_hidden));
    if (step->n_logits > 0) {
        HEARTH_TRY(output_head(r, f, step->logit_rows, step->n_logits));
        if (m->hp.final_softcap > 0.0f) softcap_logits(r, step->n_logits);
    }
    r->n_logits = step->n_logits;
    return HEARTH_OK;
}

hearth_status runner_eval_stage(struct runner *r, int32_t id, const struct runner_step *step, const float *x)
{
    const hearth_model *m = r->model;
    const int64_t n = step->bp.n_tokens, E = m->hp.n_embd;
    if (!m->pipe || n <= 0 || n > r->params.n_batch)
        return hearth_error(HEARTH_E_INTERNAL, "a pipeline step of %lld rows (at most %d)", (long long)n,
                            r->params.n_batch);
    struct forward *f = &r->fw;
    const struct backend_ops *op = f->be->ops;
    f->bp = step->bp;
    f->n_ctx = r->params.n_ctx;
    HEARTH_TRY(op->act_upload(f->be, &f->x, x, n));
    f->x.rows = n;
    for (int il = m->stage_first; il < m->stage_end; il++) {
        /* the sends of the steps posted before go on between the layers */
        pipe_progress(m->pipe);
        HEARTH_TRY(m->arch->layer(f, il));
    }
    if (pipe_tp_rank(m->pipe) > 0) {
        /* another rank of a tensor-parallel stage: its part of the output
         * layer's product on the last stage; the stage's first rank
         * answers */
        if (m->stage_end < m->hp.n_layer || step->n_logits == 0) return HEARTH_OK;
        HEARTH_TRY(reserve_logits(r, step->n_logits));
        return output_head(r, f, step->logit_rows, step->n_logits);
    }
    if (m->stage_end < m->hp.n_layer) {
        HEARTH_TRY(op->act_download(f->be, r->embd, &f->x, n));
        const struct pipe_step ps = {step->bp, step->logit_rows, step->n_logits, step->hidden_rows,
                                     step->n_hidden, r->embd, E};
        /* a rank in the middle goes on to the next step while this one
         * waits for the next rank (steps in flight) */
        if (pipe_tp(m->pipe) == 1) return pipe_post_step(m->pipe, id, &ps, r->kv->block_tokens);
        return pipe_send_step(m->pipe, id, &ps, r->kv->block_tokens);
    }
    /* the last rank: the output layer, and the answer to rank 0 */
    HEARTH_TRY(reserve_logits(r, step->n_logits));
    if (step->n_hidden > 0) HEARTH_TRY(output_hidden(r, f, step->hidden_rows, step->n_hidden));
    if (step->n_logits > 0) {
        HEARTH_TRY(output_head(r, f, step->logit_rows, step->n_logits));
        if (m->hp.final_softcap > 0.0f) softcap_logits(r, step->n_logits);
    }
    return pipe_send_out(m->pipe, r->logits, (int64_t)step->n_logits * m->hp.n_vocab, r->hidden,
                         (int64_t)step->n_hidden * E);
}

hearth_status runner_eval_mtp(struct runner *r, const struct runner_step *step, const float *h)
{
    const hearth_model *m = r->model;
    const struct mtp_weights *w = &m->mtp;
    const int64_t n = step->bp.n_tokens, E = m->hp.n_embd, V = m->hp.n_vocab;
    const float eps = m->hp.norm_eps;
    struct forward *f = &r->fw;
    struct hearth_backend *be = r->cpu;
    const struct backend_ops *op = be->ops;
    if (!r->params.mtp || n <= 0 || n > r->params.n_batch)
        return hearth_error(HEARTH_E_INTERNAL, "a prediction step of %lld rows (at most %d)", (long long)n,
                            r->params.mtp ? r->params.n_batch : 0);
    HEARTH_TRY(reserve_logits(r, step->n_logits));
    f->bp = step->bp;
    f->n_ctx = r->params.n_ctx;
    /* x = eh_proj [rmsnorm(e) enorm | rmsnorm(h) hnorm] */
    HEARTH_TRY(embed(r, &w->embd, step->tokens, NULL, n));
    HEARTH_TRY(op->act_upload(be, &f->x, r->embd, n));
    f->x.rows = n;
    HEARTH_TRY(op->act_upload(be, &r->mtp_out, h, n));
    r->mtp_out.rows = n;
    HEARTH_TRY(op->rmsnorm(be, &f->x, &f->x, &w->enorm, eps));
    HEARTH_TRY(op->rmsnorm(be, &r->mtp_out, &r->mtp_out, &w->hnorm, eps));
    float *cat = r->mtp_cat.host;
    for (int64_t i = 0; i < n; i++) {
        memcpy(cat + (size_t)(2 * i) * (size_t)E, f->x.host + (size_t)i * (size_t)E, (size_t)E * sizeof *cat);
        memcpy(cat + (size_t)(2 * i + 1) * (size_t)E, r->mtp_out.host + (size_t)i * (size_t)E,
               (size_t)E * sizeof *cat);
    }
    r->mtp_cat.rows = n;
    HEARTH_TRY(op->matmul(be, &f->x, &w->eh_proj, &r->mtp_cat));
    if (r->abort_cb && r->abort_cb(r->abort_data))
        return hearth_error(HEARTH_E_INTERRUPTED, "evaluation interrupted");
    /* the layer, as the trunk's are run, with keys and values of its own */
    HEARTH_TRY(m->arch->layer(f, m->hp.n_layer));
    HEARTH_TRY(op->rmsnorm(be, &r->mtp_out, &f->x, &w->head_norm, eps));
    if (step->n_logits == 0) return HEARTH_OK;
    HEARTH_TRY(gather_rows(be, &f->cur, &r->mtp_out, step->logit_rows, step->n_logits));
    struct act logits = {r->logits, NULL, step->n_logits, V, step->n_logits * V};
    HEARTH_TRY(op->matmul(be, &logits, &w->head, &f->cur));
    if (m->hp.final_softcap > 0.0f) softcap_logits(r, step->n_logits);
    r->n_logits = step->n_logits;
    return HEARTH_OK;
}

const float *runner_hidden(const struct runner *r, int32_t i)
{
    return r->hid.host + (size_t)i * (size_t)r->model->hp.n_embd;
}

const float *runner_mtp_hidden(const struct runner *r, int32_t i)
{
    return r->mtp_out.host + (size_t)i * (size_t)r->model->hp.n_embd;
}

const float *runner_output_hidden(const struct runner *r, int32_t i)
{
    return r->hidden + (size_t)i * (size_t)r->model->hp.n_embd;
}

/*
 * engine.c -- the serving engine's life and its step (hearth.h, "serving
 * engine"): creation and parameters, the statistics, and
 * hearth_engine_step(), which takes in submissions, schedules a batch
 * (schedule.c), drafts (draft.c), runs the forward pass and hands every
 * row with logits to sampling or verification (sample.c).  What a
 * sequence is and how a step is built: engine_impl.h.
 */
#include "engine_impl.h"

static void pool_stats(hearth_engine *e);

double engine_now_s(void)
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
    r->reasoning_budget = -1;
    r->speculation.draft_p_min = -1.0f; /* learned */
}

/* ---- creation ----------------------------------------------------------------------- */

/* The window of a model whose layers mix sliding-window and full
 * attention, when its sliding layers get a pool of their own (the
 * window space, kv_cache.h): every layer on the host, no recurrent
 * state, a window shorter than the context, and not swa_full.  0: none. */
static int32_t window_space(const hearth_model *model, const hearth_engine_params *p, int32_t *n_layers)
{
    const struct hparams *hp = &model->hp;
    *n_layers = 0;
    if (p->swa_full || hp->n_swa <= 0 || hp->n_swa >= p->n_ctx || hparams_max_window(hp) > 0 || model->rec ||
        model->offload.ocl)
        return 0;
    for (int32_t il = 0; il < hp->n_layer; il++) *n_layers += hparams_layer_window(hp, il) > 0;
    return *n_layers > 0 ? hp->n_swa : 0;
}

/* Blocks of the window space: each of n_seq_max sequences holds its
 * window's blocks, one more where the window starts inside a block and
 * the one it writes; a step's prompt chunks (n_batch rows in all) need
 * as many blocks again. */
static int64_t window_blocks(const hearth_engine_params *p, int32_t window)
{
    const int64_t B = p->block_tokens;
    return (int64_t)p->n_seq_max * ((window + B - 1) / B + 2) + (p->n_batch + B - 1) / B;
}

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
    if (!(p->prefill_share >= 0.0f && p->prefill_share <= 1.0f))
        return hearth_error(HEARTH_E_INVALID, "prefill share %g: above 0, at most 1 (0: the default, %g)",
                            (double)p->prefill_share, (double)DEFAULT_PREFILL_SHARE);
    if (p->prefill_share == 0.0f) p->prefill_share = DEFAULT_PREFILL_SHARE;
    /* no step can have more rows than every sequence's whole context */
    if (p->n_ctx > 0 && (int64_t)p->n_batch > (int64_t)p->n_ctx * p->n_seq_max)
        p->n_batch = p->n_ctx * p->n_seq_max;
    if (p->block_tokens == 0) p->block_tokens = HEARTH_KV_BLOCK_DEFAULT;
    if (p->block_tokens < 16 || p->block_tokens > 1024 || (p->block_tokens & (p->block_tokens - 1)))
        return hearth_error(HEARTH_E_INVALID, "KV block size %d: a power of two from 16 to 1024 positions",
                            p->block_tokens);
    if (p->kv_tokens < 0) return hearth_error(HEARTH_E_INVALID, "KV pool of %lld positions", (long long)p->kv_tokens);
    /* the prediction layer keeps keys and values too; the sliding layers
     * of a window space count apart */
    int32_t n_win = 0;
    const int32_t window = window_space(model, p, &n_win);
    const struct kv_shape shape = kv_shape_of_model(model);
    const size_t per_token = kv_cache_bytes_per_token(p->cache_type,
                                                      hp->n_layer - n_win + (p->mtp ? model->n_mtp : 0), &shape);
    const size_t per_token_w = kv_cache_bytes_per_token(p->cache_type, n_win, &shape);
    if (per_token == 0) return kv_cache_check(p->cache_type, p->block_tokens, 1, &shape);
    if (p->kv_tokens == 0) {
        if (p->kv_bytes > 0) {
            /* a window space takes its share of the budget first, unless
             * the rest would hold fewer positions than it: then both have
             * as many blocks */
            const uint64_t wbytes = (uint64_t)window_blocks(p, window) * (uint64_t)p->block_tokens * per_token_w;
            if (window > 0 && p->kv_bytes > wbytes &&
                (p->kv_bytes - wbytes) / per_token >= (uint64_t)window_blocks(p, window) * p->block_tokens)
                p->kv_tokens = (int64_t)((p->kv_bytes - wbytes) / per_token);
            else
                p->kv_tokens = (int64_t)(p->kv_bytes / (per_token + per_token_w));
            if (p->kv_tokens < p->block_tokens)
                return hearth_error(HEARTH_E_INVALID, "a KV pool of %llu bytes holds less than one block of %d "
                                    "positions (%zu bytes a position)", (unsigned long long)p->kv_bytes,
                                    p->block_tokens, per_token + per_token_w);
        } else {
            p->kv_tokens = p->n_ctx;
        }
    }
    if (p->mtp && model->n_mtp == 0)
        return hearth_error(HEARTH_E_INVALID, "multi-token prediction was asked for, but the model (%s) has no "
                            "prediction layers", model->arch->name);
    if (p->mtp && p->draft_model)
        return hearth_error(HEARTH_E_INVALID, "a draft model and multi-token prediction: give one of them");
    if (p->kv_tokens > INT32_MAX - p->block_tokens)
        return hearth_error(HEARTH_E_INVALID, "KV pool of %lld positions is too large", (long long)p->kv_tokens);
    return HEARTH_OK;
}

void hearth_engine_free(hearth_engine *e)
{
    if (!e) return;
    disk_cache_close(e->disk); /* what is queued is written first */
    for (size_t i = 0; i < e->n_live; i++) engine_request_free(e->live[i]);
    free(e->live);
    for (struct request *r = e->new_head; r;) {
        struct request *next = r->next_new;
        engine_request_free(r);
        r = next;
    }
    /* the steps in flight are taken first (runner_free()) */
    runner_free(e->runner);
    for (int i = 0; i < RUNNER_IN_FLIGHT_MAX; i++) {
        free(e->flights[i].seqs);
        free(e->flights[i].logit_seqs);
    }
    kv_pool_free(e->pool);
    kv_pool_free(e->wpool);
    free(e->wslot);
    free(e->wtable_start);
    free(e->wblocks);
    free(e->wrefs_scratch);
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
    free(e->hidden_rows);
    free(e->hidden_seqs);
    free(e->blocks);
    free(e->free_states);
    free(e->state_slot);
    free(e->snaps);
    free(e->snap_h);
    free(e->block_h);
    free(e->mtp_in);
    rstate_free(e->ckpt);
    free(e->ckpt_slot);
    free(e->step_seqs);
    free(e->logit_seqs);
    free(e->cancels);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

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

/* The prefix cache's disk tier, for an engine whose blocks hold every
 * layer's keys and values on the host and, for a recurrent or hybrid
 * model, whose snapshots hold every recurrent layer's state: a window
 * space, layers offloaded to a device (or another rank's) and a
 * prediction layer's hidden state of each block would each need more in
 * a file than a block's rows (a snapshot carries its own). */
static hearth_status open_disk_tier(hearth_engine *e)
{
    const hearth_engine_params *p = &e->params;
    const struct kv_cache *kv = runner_kv(e->runner);
    const struct rstate *rs = runner_rstate(e->runner);
    const char *why = NULL;
    if (p->no_prefix_cache) why = "without the prefix cache";
    else if (e->wpool) why = "with a pool of its own for the sliding layers (swa_full keeps them with the others)";
    else if (p->mtp && !e->snaps)
        why = "with multi-token prediction on a model without a recurrent state (the prediction layer's input "
              "at each block is not written)";
    /* a recurrent model runs on the CPU alone, in one process (offload.c,
     * model.c): the layers without keys are those that keep a state */
    for (int32_t il = 0; !why && !rs && il < kv->n_layer; il++)
        if (!kv->layers[il].k)
            why = "with layers whose keys and values are not in this process's memory (offloaded to a device, "
                  "or another rank's)";
    if (why)
        return hearth_error(HEARTH_E_UNSUPPORTED, "the prefix cache's disk tier (cache directory %s) is not "
                            "supported %s", p->cache_dir, why);
    const struct disk_layout l = {
        .identity = e->identity,
        .cache_type = (uint32_t)kv->type,
        .block_tokens = (uint32_t)kv->block_tokens,
        .n_layer = (uint32_t)kv->n_layer,
        .flags = kv->values_in_keys ? DISK_VALUES_IN_KEYS : 0,
        .row_bytes = kv->row_bytes,
        .payload_bytes = kv_cache_block_save_bytes(kv),
    };
    struct disk_state_layout sl = {0};
    if (e->snaps) {
        const size_t E = e->snap_h ? (size_t)hearth_model_n_embd(e->model) : 0;
        sl = (struct disk_state_layout){
            .identity = e->identity,
            .block_tokens = (uint32_t)e->B,
            .n_layer = (uint32_t)rs->n_layer,
            .n_state_layers = (uint32_t)rs->n_state_layers,
            .layer_floats = rs->layer_floats,
            .hidden_floats = E,
            .payload_bytes = rstate_bytes_per_seq(rs) + E * sizeof(float),
        };
    }
    const uint64_t max_bytes = p->cache_disk_bytes ? p->cache_disk_bytes : (uint64_t)1 << 30;
    /* the writer's queue: blocks copied out of the pool and not yet
     * written; beyond it a block is not written (the step never waits) */
    const uint64_t file_max = HEARTH_MAX(disk_file_bytes(&l), e->snaps ? disk_state_file_bytes(&sl) : 0);
    const uint64_t queue_bytes = HEARTH_MAX((uint64_t)64 << 20, 4 * file_max);
    HEARTH_TRY(disk_cache_open(p->cache_dir, max_bytes, queue_bytes, &l, e->snaps ? &sl : NULL, &e->disk));
    e->params.cache_dir = disk_cache_dir(e->disk);
    e->params.cache_disk_bytes = max_bytes;
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
        .mtp = p.mtp,
    };
    int32_t n_win_layers;
    const int32_t window = window_space(model, &p, &n_win_layers);
    if (window > 0) rp.n_blocks_window = (int32_t)HEARTH_MIN((int64_t)n_blocks, window_blocks(&p, window));
    /* a recurrent model with the prefix cache keeps two snapshots for
     * every sequence that may run (its prompt's and its generation's:
     * prefix.c), in state slots after theirs */
    const int32_t n_snaps = hearth_model_is_recurrent(model) && !p.no_prefix_cache ? 2 * p.n_seq_max : 0;
    rp.n_states += n_snaps;
    hearth_status st = runner_new(model, &rp, &e->runner);
    if (!st && runner_rstate(e->runner)) {
        /* A recurrent sequence's memory is its state, in a slot of its
         * own for as long as it runs; blocks count its positions (and
         * hold a hybrid's keys and values).  A state summarizes the whole
         * prefix and cannot be shared or cut: the prefix cache resumes
         * from snapshots kept at block boundaries (prefix.c). */
        e->free_states = hearth_calloc((size_t)p.n_seq_max, sizeof *e->free_states, "the state slots");
        e->state_slot = hearth_calloc((size_t)n_batch, sizeof *e->state_slot, "the step's state slots");
        if (!e->free_states || !e->state_slot) st = HEARTH_E_NOMEM;
        for (int32_t i = 0; !st && i < p.n_seq_max; i++) e->free_states[i] = p.n_seq_max - 1 - i;
        e->n_free_states = p.n_seq_max;
        if (!st && n_snaps > 0) {
            e->snaps = hearth_calloc((size_t)n_snaps, sizeof *e->snaps, "the state snapshots");
            if (!e->snaps) st = HEARTH_E_NOMEM;
            for (int32_t i = 0; !st && i < n_snaps; i++) e->snaps[i].slot = p.n_seq_max + i;
            e->n_snaps = n_snaps;
        }
    }
    if (!st && p.mtp) {
        const size_t E = (size_t)model->hp.n_embd;
        e->mtp_in = hearth_calloc((size_t)n_batch * E, sizeof *e->mtp_in, "the prediction layer's input");
        if (!e->mtp_in) st = HEARTH_E_NOMEM;
        if (!st && e->n_snaps > 0) {
            e->snap_h = hearth_calloc((size_t)e->n_snaps * E, sizeof *e->snap_h, "the snapshots' hidden states");
            if (!e->snap_h) st = HEARTH_E_NOMEM;
        } else if (!st && !runner_rstate(e->runner) && !p.no_prefix_cache) {
            e->block_h = hearth_calloc((size_t)n_blocks * E, sizeof *e->block_h, "the blocks' hidden states");
            if (!e->block_h) st = HEARTH_E_NOMEM;
        }
    }
    if (!st) st = kv_pool_new(n_blocks, B, &e->pool);
    const int32_t n_wblocks = st ? 0 : runner_kv(e->runner)->n_blocks_window;
    if (n_wblocks > 0) {
        e->wwindow = model->hp.n_swa;
        st = kv_pool_new(n_wblocks, B, &e->wpool);
        const size_t nb = (size_t)n_batch;
        e->wslot = hearth_calloc(nb, sizeof *e->wslot, "the step's window slots");
        e->wtable_start = hearth_calloc(nb, sizeof *e->wtable_start, "the step's window tables");
        e->wrefs_scratch = hearth_calloc((size_t)n_wblocks, sizeof *e->wrefs_scratch, "the pool check");
        if (!st && (!e->wslot || !e->wtable_start || !e->wrefs_scratch)) st = HEARTH_E_NOMEM;
    }
    e->draft_prior = SPEC_DRAFT_PRIOR;
    if (!st && p.draft_model) {
        e->draft_model = p.draft_model;
        /* until a draft pass is timed, it is thought cheap, so that the
         * first drafts time it; but a decode step reads every weight once,
         * so a draft model larger than its target costs at least as much
         * again, and no kept token could pay for that */
        const double ratio = (double)hearth_model_size_bytes(p.draft_model) /
                             (double)HEARTH_MAX(1, hearth_model_size_bytes(model));
        if (ratio > 1.0) e->draft_prior = ratio;
        st = check_draft(model, p.draft_model);
        if (!st && hearth_model_is_recurrent(p.draft_model))
            st = hearth_error(HEARTH_E_UNSUPPORTED, "a recurrent model (%s) cannot be a draft model: its "
                              "state cannot be rolled back", hearth_model_arch(p.draft_model));
        rp.n_blocks_window = 0; /* the draft keeps every position */
        if (!st) st = runner_new(p.draft_model, &rp, &e->drunner);
        if (!st) st = kv_pool_new(n_blocks, B, &e->dpool);
        if (!st) {
            e->drefs_scratch = hearth_calloc((size_t)n_blocks, sizeof *e->drefs_scratch, "the pool check");
            if (!e->drefs_scratch) st = HEARTH_E_NOMEM;
        }
    }
    if (!st) {
        /* the pool's memory is taken as its blocks fill: whether it will
         * fit beside the weights is known now, not after hours of serving */
        const uint64_t kv = runner_host_bytes(e->runner) + (e->drunner ? runner_host_bytes(e->drunner) : 0);
        st = model_memory_check(model, p.draft_model, kv, "the KV pool", &e->memory_available);
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
        e->hidden_rows = hearth_calloc(nb, sizeof *e->hidden_rows, "the step's hidden rows");
        e->hidden_seqs = hearth_calloc(nb, sizeof *e->hidden_seqs, "the step's sequences");
        e->step_seqs = hearth_calloc(nb, sizeof *e->step_seqs, "the step's sequences");
        e->logit_seqs = hearth_calloc(nb, sizeof *e->logit_seqs, "the step's sequences");
        e->refs_scratch = hearth_calloc((size_t)n_blocks, sizeof *e->refs_scratch, "the pool check");
        if (!e->tokens || !e->pos || !e->slot || !e->seq_start || !e->table_start || !e->logit_rows ||
            !e->step_seqs || !e->logit_seqs || !e->refs_scratch || !e->hidden_rows || !e->hidden_seqs)
            st = HEARTH_E_NOMEM;
    }
    if (st) {
        hearth_engine_free(e);
        return st;
    }
    /* steps in flight on a pipeline's rank 0, where nothing keeps one
     * step at a time for good (engine_impl.h) */
    e->sched_group = -1;
    e->n_groups = 1;
    if (!e->drunner && !p.mtp && !runner_rstate(e->runner) && p.n_seq_max > 1)
        e->n_groups = runner_max_in_flight(e->runner);
    e->identity = engine_identity_key(e);
    if (p.cache_dir) st = open_disk_tier(e);
    if (st) {
        hearth_engine_free(e);
        return st;
    }
    pool_stats(e); /* no other thread knows the engine yet */
    engine_update_stats_locked(e);
    *out = e;
    return HEARTH_OK;
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
    const struct kv_shape shape = kv_shape_of_model(e->model);
    st->kv_bytes = runner_memory_bytes(e->runner);
    st->bytes_per_token =
        kv_cache_bytes_per_token(kv->type, e->model->pipe ? runner_kv_layers(e->runner) : hp->n_layer, &shape);
    const struct rstate *rs = runner_rstate(e->runner);
    if (rs) {
        /* recurrent: the states, whatever a sequence's length, and the
         * keys and values of a hybrid's attention layers */
        st->kv_bytes = runner_memory_bytes(e->runner);
        st->bytes_per_token = kv_cache_bytes_per_token(kv->type, runner_kv_layers(e->runner), &shape);
        st->state_bytes_per_seq = rstate_bytes_per_seq(rs);
    }
    st->max_full_sequences = kv->n_blocks / ((e->params.n_ctx + e->B - 1) / e->B);
    st->weights_bytes = hearth_model_resident_bytes(e->model) +
                        (e->draft_model ? hearth_model_resident_bytes(e->draft_model) : 0);
    st->memory_available = e->memory_available;
    if (e->wpool) {
        /* (a pipeline's rank: its own layers) */
        int32_t n_win = 0, n_full = 0;
        for (int32_t il = 0; il < kv->n_layer; il++) {
            if (e->model->pipe && !kv->layers[il].k) continue;
            n_win += kv->layers[il].window;
            n_full += !kv->layers[il].window;
        }
        st->bytes_per_token = kv_cache_bytes_per_token(kv->type, n_full, &shape);
        st->window = e->wwindow;
        st->window_blocks = kv->n_blocks_window;
        st->window_bytes_per_token = kv_cache_bytes_per_token(kv->type, n_win, &shape);
        /* a sequence of n_ctx holds its window's blocks of that pool too */
        const int32_t per_seq = HEARTH_MIN((e->wwindow + e->B - 1) / e->B + 2, (e->params.n_ctx + e->B - 1) / e->B);
        st->max_full_sequences = HEARTH_MIN(st->max_full_sequences, kv->n_blocks_window / per_seq);
    }
}

/* The counts that change with every step. */
void engine_update_stats_locked(hearth_engine *e)
{
    hearth_engine_stats *st = &e->stats;
    struct kv_pool_counts c;
    kv_pool_counts(e->pool, &c);
    st->blocks_used = c.n_held;
    st->blocks_cached = c.n_cached;
    if (e->wpool) {
        struct kv_pool_counts w;
        kv_pool_counts(e->wpool, &w);
        st->window_blocks_used = w.n_held;
        st->window_blocks_cached = w.n_cached;
    }
    st->running = e->running.n;
    int32_t queued = 0;
    for (struct request *r = e->new_head; r; r = r->next_new) queued += r->n;
    st->waiting = e->waiting.n + queued;
    st->prefix_queries = c.hits + c.misses;
    st->prefix_hits = c.hits;
    if (e->disk) {
        struct disk_cache_counts d;
        disk_cache_counts(e->disk, &d);
        st->prefix_hits += d.hits;
        st->disk_hits = d.hits;
        st->disk_writes = d.writes;
        st->disk_rejected = d.rejected;
        st->disk_dropped = d.dropped;
        st->disk_write_errors = d.write_errors;
        st->disk_evictions = d.evictions;
        st->disk_bytes = d.bytes;
        st->disk_files = d.files;
        st->disk_snapshot_hits = d.state_hits;
        st->disk_snapshot_writes = d.state_writes;
    }
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

/* The step's batch from the plan: rows of each sequence in the plan's
 * order, block tables back to back. */
static hearth_status build_batch(hearth_engine *e, const struct step_plan *p, struct runner_step *step,
                                 int32_t *n_logits, int32_t *n_hidden)
{
    size_t n_blocks = 0;
    for (int32_t i = 0; i < p->n_seqs; i++) n_blocks += (size_t)e->step_seqs[i]->n_table;
    HEARTH_TRY(engine_reserve_blocks(e, n_blocks));
    if (e->wpool && n_blocks > e->wblocks_cap) {
        /* the window tables have as many entries as the others */
        int32_t *b = hearth_realloc(e->wblocks, n_blocks * sizeof *b, "the step's window tables");
        if (!b) return HEARTH_E_NOMEM;
        e->wblocks = b;
        e->wblocks_cap = n_blocks;
    }
    int32_t row = 0, nl = 0, nh = 0, n_ckpt = 0;
    size_t tb = 0;
    for (int32_t i = 0; i < p->n_seqs; i++) {
        struct seq *s = e->step_seqs[i];
        e->seq_start[i] = row;
        e->table_start[i] = (int32_t)tb;
        if (e->state_slot) e->state_slot[i] = s->state_slot;
        if (e->ckpt_slot) {
            /* a recurrent verification keeps its state after each row
             * but the last, to roll back to (engine_verify_seq()) */
            e->ckpt_slot[i] = -1;
            if (s->n_draft > 0) {
                s->ckpt = e->ckpt_slot[i] = n_ckpt;
                n_ckpt += s->n_draft;
            }
        }
        memcpy(e->blocks + tb, s->table, (size_t)s->n_table * sizeof *s->table);
        if (e->wpool) {
            e->wtable_start[i] = (int32_t)tb;
            memcpy(e->wblocks + tb, s->wtable, (size_t)s->n_wtable * sizeof *s->wtable);
        }
        tb += (size_t)s->n_table;
        for (int32_t k = 0; k < s->chunk; k++, row++) {
            const int32_t pos = s->n_computed + k;
            e->tokens[row] = engine_known_token(s, pos);
            e->pos[row] = pos;
            e->slot[row] = s->table[pos / e->B] * e->B + pos % e->B;
            if (e->wpool) e->wslot[row] = s->wtable[pos / e->B] * e->B + pos % e->B;
            if (s->n_draft > 0) {
                /* every row of a draft's verification: the sequence at
                 * its first, the others marked by NULL */
                e->logit_rows[nl] = row;
                e->logit_seqs[nl++] = k == 0 ? s : NULL;
            }
        }
        if (engine_seq_embeds(s)) {
            engine_embed_rows(e, s, e->seq_start[i], &nh);
        } else if (s->n_draft == 0 && s->n_computed + s->chunk == s->n_tokens) {
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
            .wslot = e->wpool ? e->wslot : NULL,
            .wblocks = e->wpool ? e->wblocks : NULL,
            .wtable_start = e->wpool ? e->wtable_start : NULL,
            .state_slot = e->state_slot,
            .ckpt = e->ckpt,
            .ckpt_slot = e->ckpt_slot,
        },
        .logit_rows = e->logit_rows,
        .n_logits = nl,
        .hidden_rows = e->hidden_rows,
        .n_hidden = nh,
    };
    *n_logits = nl;
    *n_hidden = nh;
    return HEARTH_OK;
}

/* A failure ends every sequence of the step (and its request). */
static void fail_step(hearth_engine *e, const struct step_plan *p, hearth_status st)
{
    for (int32_t i = 0; i < p->n_seqs; i++) {
        struct seq *s = e->step_seqs[i];
        if (!s->finished) {
            engine_finish_seq(e, s, -1, NULL, HEARTH_FINISH_ERROR, st);
        }
        s->chunk = 0;
        s->k_plan = 0;
        s->n_draft = 0;
    }
}

/* After a step's forward pass: its sequences' computed positions and
 * blocks, then every row with logits to sampling or verification.  The
 * step's sequences are e->step_seqs, those of its logits e->logit_seqs;
 * a sequence that finished meanwhile (cancelled while its step was in
 * flight) is passed over. */
static hearth_status take_results(hearth_engine *e, const struct step_plan *plan, int32_t n_logits,
                                  int32_t n_hidden)
{
    hearth_status st = HEARTH_OK;
    e->steps++;
    engine_embed_pool(e, n_hidden);
    for (int32_t i = 0; i < plan->n_seqs; i++) {
        struct seq *s = e->step_seqs[i];
        if (s->n_draft > 0 || s->finished) {
            /* verification counts what it keeps */
            s->chunk = 0;
            continue;
        }
        const int32_t before = s->n_computed;
        s->n_computed += s->chunk;
        if (before < s->req->n_prompt)
            e->prompt_tokens += (uint64_t)(HEARTH_MIN(s->n_computed, s->req->n_prompt) - before);
        s->chunk = 0;
        if (!st) st = engine_register_full_blocks(e, s);
        if (!st) engine_keep_snapshot(e, s);
        engine_drop_outside_window(e, s);
        /* an embedding ends with its prompt */
        if (!st && engine_seq_embeds(s) && s->n_computed == s->n_tokens) engine_embed_finish(e, s);
    }
    /* the statistics show the step's blocks before a client hears of its
     * tokens (a /metrics read after a first token sees the blocks its
     * sequence holds) */
    pthread_mutex_lock(&e->lock);
    engine_update_stats_locked(e);
    pthread_mutex_unlock(&e->lock);
    for (int32_t i = 0; i < n_logits && !st; i++) {
        struct seq *s = e->logit_seqs[i];
        if (!s || s->finished) continue; /* a verification's later row, or cancelled */
        struct request *r = s->req;
        const float *logits = runner_logits(e->runner, i);
        if (s->n_draft > 0) {
            st = engine_verify_seq(e, s, i);
        } else if (r->n > 1 && !r->forked) {
            st = engine_fork_samples(e, r);
            for (int32_t k = 0; k < r->n && !st; k++) st = engine_sample_seq(e, r->seqs[k], logits);
        } else {
            st = engine_sample_seq(e, s, logits);
        }
        if (st) {
            for (int32_t k = 0; k < r->n; k++)
                if (r->seqs[k] && !r->seqs[k]->finished)
                    engine_finish_seq(e, r->seqs[k], -1, NULL, HEARTH_FINISH_ERROR, st);
            st = HEARTH_OK; /* this request's failure; the others go on */
        }
    }
    return st;
}

/* The groups whose steps may be in flight now: one where a request
 * speculates or embeds (engine_impl.h). */
static int32_t engine_depth(const hearth_engine *e)
{
    if (e->n_groups <= 1) return 1;
    for (size_t i = 0; i < e->n_live; i++) {
        const hearth_request *q = &e->live[i]->params;
        if (q->speculation.draft_max > 0 || q->pooling != HEARTH_POOLING_NONE) return 1;
    }
    return e->n_groups;
}

static bool group_in_flight(const hearth_engine *e, int32_t g)
{
    for (int32_t i = 0; i < e->fl_n; i++)
        if (e->flights[(e->fl_first + i) % RUNNER_IN_FLIGHT_MAX].group == g) return true;
    return false;
}

/* The step of the first group, from e->next_group on, that has no step in
 * flight and has rows to run: planned, handed to the runner and kept in
 * flight.  *submitted: one was (its failure fails its sequences). */
static hearth_status submit_group(hearth_engine *e, bool *submitted)
{
    *submitted = false;
    const size_t nb = (size_t)e->params.n_batch;
    for (int32_t k = 0; k < e->n_groups; k++) {
        const int32_t g = (e->next_group + k) % e->n_groups;
        if (group_in_flight(e, g)) continue;
        struct step_plan plan = {0};
        e->sched_group = g;
        hearth_status st = engine_schedule(e, &plan);
        e->sched_group = -1;
        if (st) {
            fail_step(e, &plan, st);
            return st;
        }
        if (plan.n_rows == 0) continue;
        *submitted = true;
        e->next_group = (g + 1) % e->n_groups;
        struct engine_flight *f = &e->flights[(e->fl_first + e->fl_n) % RUNNER_IN_FLIGHT_MAX];
        if (!f->seqs) f->seqs = hearth_calloc(nb, sizeof *f->seqs, "a step in flight");
        if (!f->logit_seqs) f->logit_seqs = hearth_calloc(nb, sizeof *f->logit_seqs, "a step in flight");
        struct runner_step step;
        int32_t n_logits = 0, n_hidden = 0;
        st = f->seqs && f->logit_seqs ? HEARTH_OK : HEARTH_E_NOMEM;
        if (!st) st = build_batch(e, &plan, &step, &n_logits, &n_hidden);
        if (!st) st = runner_submit(e->runner, &step);
        if (st) {
            fail_step(e, &plan, st);
            return st;
        }
        f->plan = plan;
        f->group = g;
        f->n_logits = n_logits;
        memcpy(f->seqs, e->step_seqs, (size_t)plan.n_seqs * sizeof *f->seqs);
        memcpy(f->logit_seqs, e->logit_seqs, (size_t)n_logits * sizeof *f->logit_seqs);
        for (int32_t i = 0; i < plan.n_seqs; i++) f->seqs[i]->in_flight = true;
        e->fl_n++;
        return HEARTH_OK;
    }
    return HEARTH_OK;
}

/* The results of the oldest step in flight, taken as a step's. */
static hearth_status collect_group(hearth_engine *e)
{
    struct engine_flight *f = &e->flights[e->fl_first];
    e->fl_first = (e->fl_first + 1) % RUNNER_IN_FLIGHT_MAX;
    e->fl_n--;
    memcpy(e->step_seqs, f->seqs, (size_t)f->plan.n_seqs * sizeof *e->step_seqs);
    memcpy(e->logit_seqs, f->logit_seqs, (size_t)f->n_logits * sizeof *e->logit_seqs);
    for (int32_t i = 0; i < f->plan.n_seqs; i++) f->seqs[i]->in_flight = false;
    hearth_status st = runner_collect(e->runner);
    if (st) {
        fail_step(e, &f->plan, st);
        return st;
    }
    return take_results(e, &f->plan, f->n_logits, 0);
}

hearth_status engine_set_groups(hearth_engine *e, int32_t n)
{
    if (n < 1 || n > RUNNER_IN_FLIGHT_MAX || e->steps > 0 || e->fl_n > 0)
        return hearth_error(HEARTH_E_INVALID, "%d groups of steps in flight (1 to %d, before the first step)", n,
                            RUNNER_IN_FLIGHT_MAX);
    e->n_groups = n;
    return HEARTH_OK;
}

int32_t engine_steps_in_flight(const hearth_engine *e) { return e->fl_n; }

hearth_status hearth_engine_step(hearth_engine *e, bool *did_work)
{
    if (did_work) *did_work = false;
    hearth_status st = engine_take_submissions(e);
    struct step_plan plan = {0};
    if (!st && e->n_groups > 1) {
        /* steps in flight: the next group's step while there is room for
         * it, else the oldest step's results; one at a time, those in
         * flight are taken first */
        const int32_t depth = engine_depth(e);
        bool submitted = false;
        if (depth > 1 && e->fl_n < depth) st = submit_group(e, &submitted);
        if (st || submitted) {
            if (did_work) *did_work = true;
            goto done;
        }
        if (e->fl_n > 0) {
            st = collect_group(e);
            if (did_work) *did_work = true;
            goto done;
        }
        /* nothing in flight and no group's step has rows: one step of
         * every sequence, which gives way where the pool is full */
    }
    /* When nothing at all could be scheduled, the running sequences are
     * stuck in prefill on a full pool: the newest gives way (or, alone,
     * it cannot fit). */
    while (!st) {
        st = engine_schedule(e, &plan);
        if (st || plan.n_rows > 0 || e->running.n == 0) break;
        if (e->running.n == 1) engine_finish_seq(e, e->running.head, -1, NULL, HEARTH_FINISH_CONTEXT, HEARTH_OK);
        else engine_preempt(e, engine_newest_running(e));
    }
    if (st) {
        fail_step(e, &plan, st);
    } else if (plan.n_rows > 0) {
        struct runner_step step;
        int32_t n_logits = 0, n_hidden = 0;
        st = engine_make_drafts(e, &plan);
        if (!st) st = build_batch(e, &plan, &step, &n_logits, &n_hidden);
        const double t0 = engine_now_s();
        if (!st) st = runner_eval(e->runner, &step);
        /* the prediction layer follows the trunk over the same rows */
        if (!st && e->mtp_in) st = engine_mtp_follow(e, &step);
        if (st) {
            fail_step(e, &plan, st);
        } else {
            spec_fit_add(&e->target_fit, step.bp.n_tokens, engine_now_s() - t0);
            if (did_work) *did_work = true;
            st = take_results(e, &plan, n_logits, n_hidden);
        }
    }
done:
    engine_reap(e);
    pthread_mutex_lock(&e->lock);
    engine_update_stats_locked(e);
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
    if (e->wpool)
        memset(e->wrefs_scratch, 0, (size_t)runner_kv(e->runner)->n_blocks_window * sizeof *e->wrefs_scratch);
    if (e->drefs_scratch) memset(e->drefs_scratch, 0, (size_t)n_blocks * sizeof *e->drefs_scratch);
    int32_t n_running = 0, n_waiting = 0;
    for (size_t i = 0; i < e->n_live; i++) {
        struct request *r = e->live[i];
        for (int32_t k = 0; k < r->n; k++) {
            const struct seq *s = r->seqs[k];
            if (!s || s->finished) {
                if (s && (s->n_table || s->n_wtable))
                    return hearth_error(HEARTH_E_INTERNAL, "a finished sequence holds %d blocks and %d of the "
                                        "window's", s->n_table, s->n_wtable);
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
            if (e->wpool ? s->n_wtable > s->n_table || s->n_wtable * e->B < s->n_computed : s->n_wtable != 0)
                return hearth_error(HEARTH_E_INTERNAL, "a sequence of %d computed positions has %d blocks and %d "
                                    "of the window's", s->n_computed, s->n_table, s->n_wtable);
            /* the blocks before the window's first are given back */
            const int32_t lo = e->wpool ? HEARTH_MAX(0, s->n_computed + 1 - e->wwindow) / e->B : 0;
            for (int32_t b = 0; b < s->n_wtable; b++) {
                if ((s->wtable[b] < 0) != (b < s->n_wdropped) || s->n_wdropped > lo)
                    return hearth_error(HEARTH_E_INTERNAL, "window block %d of a sequence's table is %d, %d "
                                        "dropped, the window from block %d", b, s->wtable[b], s->n_wdropped, lo);
                if (s->wtable[b] >= 0) e->wrefs_scratch[s->wtable[b]]++;
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
    if (e->wpool) HEARTH_TRY(kv_pool_check(e->wpool, e->wrefs_scratch));
    return e->dpool ? kv_pool_check(e->dpool, e->drefs_scratch) : HEARTH_OK;
}

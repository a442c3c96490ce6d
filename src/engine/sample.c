/*
 * sample.c -- what a sequence does with its logits: sampling a token,
 * forking a request's samples after the shared prompt, verifying drafts
 * (greedy match or the rejection rule), and the events and end of a
 * sample.
 */
#include "engine_impl.h"

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
        .embedding = finish == HEARTH_FINISH_LENGTH ? s->embedding : NULL,
        .finish = finish,
        .stats = finish != HEARTH_FINISH_NONE ? &s->stats : NULL,
        .status = status,
    };
    r->params.on_event(r->params.user, &ev);
}

/* Give back every block of s's table (and its recurrent state). */
void engine_release_blocks(hearth_engine *e, struct seq *s)
{
    if (s->state_slot >= 0) {
        e->free_states[e->n_free_states++] = s->state_slot;
        s->state_slot = -1;
    }
    s->resume = -1;
    for (int32_t i = 0; i < s->n_table; i++)
        if (s->table[i] >= 0) kv_pool_release(e->pool, s->table[i]);
    s->n_table = 0;
    s->n_dropped = 0;
    for (int32_t i = 0; i < s->n_wtable; i++)
        if (s->wtable[i] >= 0) kv_pool_release(e->wpool, s->wtable[i]);
    s->n_wtable = 0;
    s->n_wdropped = 0;
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
 * is shared or registered (engine_make_room()); the chain hashes of the blocks
 * past n are dropped. */
void engine_seq_truncate(hearth_engine *e, struct seq *s, int32_t n)
{
    if (n < s->n_computed) s->n_computed = n;
    const int32_t keep = (n + e->B - 1) / e->B;
    while (s->n_table > keep) kv_pool_release(e->pool, s->table[--s->n_table]);
    /* never into the blocks given back: n is past the window's start */
    while (s->n_wtable > HEARTH_MAX(keep, s->n_wdropped)) kv_pool_release(e->wpool, s->wtable[--s->n_wtable]);
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
void engine_finish_seq(hearth_engine *e, struct seq *s, hearth_token token, const float *logits,
                       hearth_finish_reason why, hearth_status status)
{
    struct request *r = s->req;
    engine_snapshot_to_disk(e, s);
    engine_release_blocks(e, s);
    if (s->running) list_remove(&e->running, s);
    else if (s->prev || s->next || e->waiting.head == s) list_remove(&e->waiting, s);
    s->running = false;
    s->finished = true;
    /* the statistics show the blocks given back before the client hears
     * of the end (a /metrics read after a response sees them free) */
    pthread_mutex_lock(&e->lock);
    engine_update_stats_locked(e);
    pthread_mutex_unlock(&e->lock);
    const double t = engine_now_s();
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

/* ---- sampling --------------------------------------------------------------------- */

static hearth_status seq_push_token(struct seq *s, hearth_token t)
{
    HEARTH_TRY(engine_grow_array((void **)&s->tokens, &s->tokens_cap, s->n_tokens + 1, sizeof *s->tokens,
                          "a sequence's tokens"));
    s->tokens[s->n_tokens++] = t;
    return HEARTH_OK;
}

/* Samples 1 .. n-1 of r, sharing the blocks of sample 0 (whose prompt is
 * computed): they take references, and the first write into a shared
 * block copies it. */
hearth_status engine_fork_samples(hearth_engine *e, struct request *r)
{
    struct seq *s0 = r->seqs[0];
    r->forked = true;
    for (int32_t i = 1; i < r->n; i++) {
        struct seq *s;
        HEARTH_TRY(engine_seq_new(e, r, i, &s));
        r->seqs[i] = s;
        HEARTH_TRY(engine_table_reserve(s, s0->n_table));
        for (int32_t k = 0; k < s0->n_table; k++) {
            if (s0->table[k] >= 0) kv_pool_ref(e->pool, s0->table[k]);
            s->table[k] = s0->table[k];
        }
        s->n_table = s0->n_table;
        s->n_dropped = s0->n_dropped;
        for (int32_t k = 0; k < s0->n_wtable; k++) {
            if (s0->wtable[k] >= 0) kv_pool_ref(e->wpool, s0->wtable[k]);
            s->wtable[k] = s0->wtable[k];
        }
        s->n_wtable = s0->n_wtable;
        s->n_wdropped = s0->n_wdropped;
        memcpy(s->hashes, s0->hashes, (size_t)s0->n_hashed * sizeof *s->hashes);
        s->n_hashed = s0->n_hashed;
        s->n_computed = s0->n_computed;
        engine_take_state(e, s);
        /* the prompt's state, computed once, continues in each sample */
        if (s->state_slot >= 0) rstate_copy(runner_rstate(e->runner), s->state_slot, s0->state_slot);
        if (s->mtp_h) {
            memcpy(s->mtp_h, s0->mtp_h, (size_t)hearth_model_n_embd(e->model) * sizeof *s->mtp_h);
            s->mtp_pos = s0->mtp_pos;
        }
        s->stats.queue_ms = s0->stats.queue_ms;
        s->stats.n_cached = s0->stats.n_cached;
        s->stats.n_cached_disk = s0->stats.n_cached_disk;
        /* admitted now: the running list stays in admission order; in
         * its first sample's group */
        s->running = true;
        s->group = s0->group;
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
    const double now = engine_now_s();
    if (s->stats.n_generated == 0) {
        s->t_first = now;
        s->stats.ttft_ms = (now - r->t_submit) * 1e3;
    }
    s->t_last = now;
    s->stats.n_generated++;
    e->generated_tokens++;
    if (!r->params.ignore_eos && e->vocab && hearth_vocab_is_eog(e->vocab, t)) {
        engine_finish_seq(e, s, t, logits, HEARTH_FINISH_EOS, HEARTH_OK);
        return HEARTH_OK;
    }
    HEARTH_TRY(hearth_sampler_accept(s->sampler, t));
    HEARTH_TRY(seq_push_token(s, t));
    HEARTH_TRY(engine_thinking_take(s, t));
    const char *text = NULL;
    size_t len = 0;
    if (e->vocab) HEARTH_TRY(hearth_text_stream_push_token(s->stream, t, &text, &len));
    const int stop = hearth_text_stream_stop_index(s->stream);
    if (stop >= 0) {
        s->stats.stop_index = stop;
        emit(e, s, t, logits, text, len, HEARTH_FINISH_NONE, HEARTH_OK);
        engine_finish_seq(e, s, -1, NULL, HEARTH_FINISH_STOP, HEARTH_OK);
        return HEARTH_OK;
    }
    emit(e, s, t, logits, text, len, HEARTH_FINISH_NONE, HEARTH_OK);
    if (r->params.max_tokens >= 0 && s->stats.n_generated >= r->params.max_tokens)
        engine_finish_seq(e, s, -1, NULL, HEARTH_FINISH_LENGTH, HEARTH_OK);
    else if (s->n_tokens > e->params.n_ctx) /* t has no position to be computed at */
        engine_finish_seq(e, s, -1, NULL, HEARTH_FINISH_CONTEXT, HEARTH_OK);
    else
        *alive = true;
    return HEARTH_OK;
}

/* s has computed its last known token: sample the next one from logits. */
hearth_status engine_sample_seq(hearth_engine *e, struct seq *s, const float *logits)
{
    struct request *r = s->req;
    if (r->params.max_tokens == 0) {
        /* only the prompt was wanted */
        engine_finish_seq(e, s, -1, NULL, HEARTH_FINISH_LENGTH, HEARTH_OK);
        return HEARTH_OK;
    }
    /* a reasoning budget spent writes the reasoning's end instead */
    hearth_token t = engine_thinking_next(s);
    if (t < 0 && hearth_sampler_grammar_done(s->sampler)) {
        /* the grammar is complete and allows nothing more */
        engine_finish_seq(e, s, -1, NULL, HEARTH_FINISH_STOP, HEARTH_OK);
        return HEARTH_OK;
    }
    if (t < 0) HEARTH_TRY(engine_thinking_sample(e, s, logits, &t));
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
hearth_status engine_verify_seq(hearth_engine *e, struct seq *s, int32_t first)
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
        /* a token the reasoning budget writes is the one token the model
         * may have here: a drafted token is kept when it is that one */
        hearth_token t = engine_thinking_next(s);
        bool keep = false;
        if (t >= 0) {
            keep = j < k && t == s->draft[j];
        } else if (j == k || greedy) {
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
            /* what the draft's confidence is worth */
            if (s->draft_conf && r->params.speculation.draft_p_min < 0.0f)
                spec_conf_add(&s->conf, s->draft_conf[j], keep);
        }
        HEARTH_TRY(take_token(e, s, t, logits, &alive));
        if (alive && j < k && keep && cancel_pending(e, r)) {
            engine_finish_seq(e, s, -1, NULL, HEARTH_FINISH_CANCELLED, HEARTH_OK);
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
    /* positions base .. base + accepted hold the kept tokens; a recurrent
     * state goes back to its checkpoint after them */
    if (accepted < k && s->state_slot >= 0)
        rstate_copy_from(runner_rstate(e->runner), s->state_slot, e->ckpt, s->ckpt + accepted);
    s->n_computed = base + 1 + accepted;
    /* the prediction layer goes on from the last kept row */
    if (s->mtp_h) engine_mtp_keep(e, s, e->logit_rows[first] + accepted);
    engine_seq_truncate(e, s, s->n_computed);
    draft_truncate(e, s, s->n_computed);
    HEARTH_TRY(engine_register_full_blocks(e, s));
    engine_keep_snapshot(e, s);
    engine_drop_outside_window(e, s);
    return HEARTH_OK;
}

/*
 * requests.c -- requests entering the serving engine: their validation
 * and copy at submission, the queue and the cancellations that other
 * threads hand to the engine's thread, and the list of requests still
 * alive until their last sample ends.
 */
#include "engine_impl.h"
#include "sampler.h"

/* ---- submission -------------------------------------------------------------------- */

static void seq_free(struct seq *s)
{
    if (!s) return;
    free(s->tokens);
    free(s->table);
    free(s->wtable);
    free(s->hashes);
    hearth_sampler_free(s->sampler);
    hearth_text_stream_free(s->stream);
    free(s->draft);
    free(s->draft_q);
    free(s->draft_conf);
    free(s->dtable);
    hearth_sampler_free(s->dsampler);
    free(s->mtp_h);
    free(s->pool_sum);
    free(s->embedding);
    engine_thinking_seq_free(s);
    free(s);
}

void engine_request_free(struct request *r)
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
    engine_thinking_request_free(r);
    free(r);
}

/* A sequence of sample `index` of r with the prompt as its known tokens. */
hearth_status engine_seq_new(hearth_engine *e, struct request *r, int32_t index, struct seq **out)
{
    struct seq *s = hearth_calloc(1, sizeof *s, "a sequence");
    if (!s) return HEARTH_E_NOMEM;
    s->req = r;
    s->index = index;
    s->state_slot = -1;
    s->resume = -1;
    s->own_snap = -1;
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
        st = sampler_new_checked(&sp, hearth_model_n_vocab(e->model), &s->sampler);
        const hearth_speculation *spec = &r->params.speculation;
        if (!st && spec->draft_max > 0) {
            /* a stream of its own, apart from the sampler's */
            hearth_rng_seed(&s->rng, sp.seed ^ UINT64_C(0x73706563756c6174));
            s->draft = hearth_calloc((size_t)spec->draft_max, sizeof *s->draft, "the drafted tokens");
            if (!s->draft) st = HEARTH_E_NOMEM;
            if (!st && spec->lookup == 0)
                st = sampler_new_checked(&sp, hearth_model_n_vocab(e->model), &s->dsampler);
            if (!st && spec->lookup == 0) {
                s->draft_conf = hearth_calloc((size_t)spec->draft_max, sizeof *s->draft_conf,
                                              "the drafted tokens' confidence");
                if (!s->draft_conf) st = HEARTH_E_NOMEM;
            }
        }
        if (!st && e->mtp_in) {
            s->mtp_h = hearth_calloc((size_t)hearth_model_n_embd(e->model), sizeof *s->mtp_h,
                                     "a sequence's hidden state");
            if (!s->mtp_h) st = HEARTH_E_NOMEM;
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
    if (!st) st = engine_thinking_seq_new(e, s);
    if (!st) st = engine_embed_seq_new(e, s);
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
    /* negative: learned */
    if (!(sp->draft_p_min <= 1.0f))
        return hearth_error(HEARTH_E_INVALID, "draft_p_min = %g: the limit is 0 to 1 (negative: learned)",
                            (double)sp->draft_p_min);
    if (sp->lookup < 0 || sp->lookup > MAX_LOOKUP_NGRAM)
        return hearth_error(HEARTH_E_INVALID, "lookup = %d: n-grams of 0 to %d tokens", sp->lookup,
                            MAX_LOOKUP_NGRAM);
    if (e->model->rec && !e->model->rec->checkpoints)
        return hearth_error(HEARTH_E_UNSUPPORTED, "speculative decoding rolls the keys and values of "
                            "rejected tokens back; a recurrent model (%s) keeps a state that cannot be "
                            "rolled back", hearth_model_arch(e->model));
    if (sp->lookup == 0 && !e->draft_model && !e->params.mtp)
        return hearth_error(HEARTH_E_INVALID, "speculation by a draft model was asked for, but the engine has "
                            "neither a draft model nor multi-token prediction");
    return HEARTH_OK;
}

static hearth_status copy_request(hearth_engine *e, const hearth_request *q, struct request *r)
{
    r->params = *q;
    r->n = q->n > 0 ? q->n : 1;
    if (q->n < 0 || r->n > MAX_SAMPLES || r->n > e->params.n_seq_max)
        return hearth_error(HEARTH_E_INVALID, "n = %d samples: the limit is 1 to %d", q->n,
                            HEARTH_MIN(MAX_SAMPLES, e->params.n_seq_max));
    HEARTH_TRY(engine_embed_request(e, r));
    HEARTH_TRY(hearth_sampler_params_check(&q->sampling));
    HEARTH_TRY(check_speculation(e, &r->params.speculation));
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
    HEARTH_TRY(engine_embed_prompt(e, r));
    const int64_t pool_tokens = (int64_t)runner_kv(e->runner)->n_blocks * e->B;
    if (r->n_prompt > pool_tokens)
        return hearth_error(HEARTH_E_RANGE, "the prompt has %d tokens but the KV pool holds only %lld "
                            "positions", r->n_prompt, (long long)pool_tokens);
    /* A sample of max_tokens holds n_prompt + max_tokens - 1 positions at
     * its end (its last token is sampled, never computed), at most the
     * context; alone in a pool smaller than that it would be cut short, so
     * it can never run as asked.  Without max_tokens it runs until the
     * context or the pool is full (HEARTH_FINISH_CONTEXT). */
    if (r->params.max_tokens > 0) {
        int64_t need = (int64_t)r->n_prompt + r->params.max_tokens - 1;
        if (need > e->params.n_ctx) need = e->params.n_ctx;
        if (need > pool_tokens)
            return hearth_error(HEARTH_E_RANGE, "the prompt (%d tokens) and max_tokens (%d) need %lld "
                                "positions but the KV pool holds only %lld", r->n_prompt, r->params.max_tokens,
                                (long long)need, (long long)pool_tokens);
    }
    HEARTH_TRY(engine_thinking_request(e, r));
    r->seqs = hearth_calloc((size_t)r->n, sizeof *r->seqs, "the samples");
    if (!r->seqs) return HEARTH_E_NOMEM;
    return engine_seq_new(e, r, 0, &r->seqs[0]);
}

hearth_status hearth_engine_submit(hearth_engine *e, const hearth_request *q, uint64_t *id)
{
    if (!e || !q) return hearth_error(HEARTH_E_INVALID, "hearth_engine_submit: NULL argument");
    struct request *r = hearth_calloc(1, sizeof *r, "a request");
    if (!r) return HEARTH_E_NOMEM;
    hearth_status st = copy_request(e, q, r);
    if (st) {
        engine_request_free(r);
        return st;
    }
    r->t_submit = engine_now_s();
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
    /* a sample cancelled while a step of it is in flight is kept until
     * the step's results are taken */
    if (!r->forked) return r->seqs[0]->finished && !r->seqs[0]->in_flight;
    for (int32_t k = 0; k < r->n; k++)
        if (!r->seqs[k]->finished || r->seqs[k]->in_flight) return false;
    return true;
}

/* Free the requests whose samples have all finished. */
void engine_reap(hearth_engine *e)
{
    size_t k = 0;
    for (size_t i = 0; i < e->n_live; i++) {
        struct request *r = e->live[i];
        if (request_done(r)) engine_request_free(r);
        else e->live[k++] = r;
    }
    e->n_live = k;
}

/* Its finished samples are left as they are. */
static void cancel_request(hearth_engine *e, struct request *r)
{
    for (int32_t k = 0; k < r->n; k++) {
        struct seq *s = r->seqs[k];
        if (s && !s->finished) engine_finish_seq(e, s, -1, NULL, HEARTH_FINISH_CANCELLED, HEARTH_OK);
    }
}

/* Take in what other threads submitted and cancelled. */
hearth_status engine_take_submissions(hearth_engine *e)
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
            engine_finish_seq(e, r->seqs[0], -1, NULL, HEARTH_FINISH_ERROR, st);
            engine_request_free(r);
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

/*
 * draft.c -- drafts for speculative decoding: by prompt lookup, or by the
 * draft model in passes of its own over the drafting sequences, which
 * first catch its KV up with what each sequence knows.
 */
#include "engine_impl.h"

/* ---- drafting ------------------------------------------------------------------- */

/* Room in s's draft table for positions up to end - 1; false when the
 * draft's pool has no block left. */
static hearth_status draft_room(hearth_engine *e, struct seq *s, int32_t end, bool *ok)
{
    *ok = true;
    while (s->n_dtable * e->B < end) {
        if (s->n_dtable == s->dtable_cap)
            HEARTH_TRY(engine_grow_array((void **)&s->dtable, &s->dtable_cap, s->n_dtable + 1, sizeof *s->dtable,
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
int32_t engine_known_token(const struct seq *s, int32_t pos)
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
                e->tokens[row] = engine_known_token(s, pos);
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
        const double t0 = engine_now_s();
        HEARTH_TRY(runner_eval(e->drunner, &step));
        spec_fit_add(&e->draft_fit, row, engine_now_s() - t0);
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
hearth_status engine_make_drafts(hearth_engine *e, struct step_plan *p)
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
        engine_seq_truncate(e, s, s->n_computed + rows);
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

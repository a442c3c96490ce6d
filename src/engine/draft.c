/*
 * draft.c -- drafts for speculative decoding: by prompt lookup, by the
 * draft model in passes of its own over the drafting sequences, which
 * first catch its KV up with what each sequence knows, or by the model's
 * own prediction layer (multi-token prediction), which follows the trunk
 * in every step and drafts in passes of one row per sequence.
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

/* Whether s drafts a token where its draft's confidence (its probability
 * of its most likely token) is conf: at or above the request's limit, or,
 * with none given (draft_p_min negative), where the sequence learned that
 * tokens of that confidence pay for their row (the draft pass that gave
 * the token is spent already); one of every SPEC_PROBE_STEPS tokens that
 * would stop is drafted all the same, to measure its confidence's rate
 * again. */
static bool draft_confident(struct seq *s, double conf)
{
    const float p_min = s->req->params.speculation.draft_p_min;
    if (p_min >= 0.0f) return conf >= (double)p_min;
    if (s->d_cost <= 0.0) return true; /* nothing measured yet, or a fixed length */
    const double rate = spec_conf_rate(&s->conf, conf);
    if (s->d_chain * rate < s->d_row && ++s->conf_cut < SPEC_PROBE_STEPS) return false;
    if (s->d_chain * rate < s->d_row) s->conf_cut = 0;
    s->d_chain *= rate;
    return true;
}

/* After s drafted a token with a learned limit: whether another draft
 * pass is worth its cost and its row, the next token expected to be kept
 * at the rate of all its drafts. */
static bool draft_goes_on(const struct seq *s)
{
    if (s->req->params.speculation.draft_p_min >= 0.0f || s->d_cost <= 0.0) return true;
    return s->d_chain * spec_conf_all(&s->conf) >= s->d_cost;
}

/* The draft model's next token for s from its logits, or -1 to stop
 * drafting (the draft is not confident enough), with its confidence in
 * s->draft_conf. */
static hearth_status draft_token(hearth_engine *e, struct seq *s, const float *logits, int32_t *out)
{
    const struct request *r = s->req;
    const int32_t V = hearth_model_n_vocab(e->model);
    const float p_min = r->params.speculation.draft_p_min;
    *out = -1;
    if (r->params.sampling.temperature == 0.0f) {
        hearth_token t;
        HEARTH_TRY(hearth_sampler_sample(s->dsampler, logits, &t));
        if (p_min != 0.0f) {
            /* the draft's own confidence: its softmax at temperature 1 */
            float mx = logits[0];
            for (int32_t i = 1; i < V; i++) mx = logits[i] > mx ? logits[i] : mx;
            double sum = 0.0;
            for (int32_t i = 0; i < V; i++) sum += exp((double)logits[i] - (double)mx);
            const double conf = exp((double)logits[t] - (double)mx) / sum;
            if (!draft_confident(s, conf)) return HEARTH_OK;
            s->draft_conf[s->n_draft] = (float)conf;
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
    if (!draft_confident(s, q_max)) return HEARTH_OK;
    s->draft_conf[s->n_draft] = q_max;
    *out = spec_draw(q, V, sum, hearth_rng_uniform(&s->rng));
    return HEARTH_OK;
}

/* Before a step's draft passes: the n sequences of e->draft_seqs draft,
 * each one's sampling chain over the draft's logits seeing the same recent
 * tokens as its own. */
static hearth_status drafts_begin(hearth_engine *e, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        struct seq *s = e->draft_seqs[i];
        const struct request *r = s->req;
        hearth_sampler_reset(s->dsampler);
        s->d_chain = 1.0;
        const int32_t last_n = r->params.sampling.repeat_last_n;
        for (int32_t pos = HEARTH_MAX(0, s->n_tokens - last_n); pos < s->n_tokens; pos++)
            HEARTH_TRY(hearth_sampler_accept(s->dsampler, s->tokens[pos]));
        s->drafting = true;
    }
    return HEARTH_OK;
}

/* One draft pass, number `pass` of the step, over the step's arrays (rows
 * rows of n_seqs sequences): by the prediction layer when the engine has
 * one (e->mtp_in), else by the draft model; then each sequence of
 * e->logit_seqs[0 .. n_logits) drafts a token from its row's logits, or
 * stops drafting. */
static hearth_status draft_pass(hearth_engine *e, int32_t rows, int32_t n_seqs, int32_t n_logits, int32_t pass)
{
    struct runner *r = e->mtp_in ? e->runner : e->drunner;
    const struct runner_step step = {
        .tokens = e->tokens,
        .bp = {
            .pos = e->pos,
            .slot = e->slot,
            .n_tokens = rows,
            .n_seqs = n_seqs,
            .seq_start = e->seq_start,
            .blocks = e->blocks,
            .table_start = e->table_start,
        },
        .logit_rows = e->logit_rows,
        .n_logits = n_logits,
    };
    const double t0 = engine_now_s();
    HEARTH_TRY(e->mtp_in ? runner_eval_mtp(r, &step, e->mtp_in) : runner_eval(r, &step));
    spec_fit_add(&e->draft_fit, rows, engine_now_s() - t0);
    e->draft_steps++;
    for (int32_t i = 0; i < n_logits; i++) {
        struct seq *s = e->logit_seqs[i];
        const float *logits = runner_logits(r, i);
        if (e->mtp_hook && e->mtp_in) e->mtp_hook(e->mtp_hook_user, pass, e->pos[e->logit_rows[i]], logits);
        int32_t t;
        HEARTH_TRY(draft_token(e, s, logits, &t));
        if (t < 0) {
            s->drafting = false;
            continue;
        }
        s->draft[s->n_draft++] = t;
        HEARTH_TRY(hearth_sampler_accept(s->dsampler, t));
        if (s->n_draft == s->k_plan || !draft_goes_on(s)) s->drafting = false;
    }
    return HEARTH_OK;
}

/* Draft for the n sequences of e->draft_seqs with the draft model, each up
 * to its k_plan tokens: passes over all of them, the first catching each
 * one's draft KV up with what it knows (in chunks within the batch). */
static hearth_status draft_with_model(hearth_engine *e, int32_t n)
{
    const int32_t B = e->B;
    HEARTH_TRY(drafts_begin(e, n));
    for (int32_t pass = 0;; pass++) {
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
        HEARTH_TRY(engine_reserve_blocks(e, n_blocks));
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
        /* the pass computes the chunks it was given */
        for (int32_t i = 0; i < n_seqs; i++) {
            struct seq *s = e->step_seqs[i];
            s->d_computed += s->d_chunk;
        }
        HEARTH_TRY(draft_pass(e, row, n_seqs, nl, pass));
    }
    return HEARTH_OK;
}

/* ---- multi-token prediction ----------------------------------------------------------
 *
 * The prediction layer's row at position p reads the token at p and the
 * trunk's output-normed hidden state at p - 1, and its logits predict the
 * token at p + 1, as the trunk's at p do.  Its keys and values sit in the
 * sequence's own blocks (one layer more of the cache), so the prefix
 * cache, copy-on-write and truncation treat them as the trunk's.  Every
 * step's rows pass through it after the trunk: row p of a sequence takes
 * the trunk's hidden state of the row before, the first row the
 * sequence's mtp_h.  A verification's rejected rows write keys and values
 * that the next step writes again, like the trunk's. */

/* Keep row `row` of the last step's trunk hidden states as s's input at
 * n_computed (what the next step or draft reads). */
void engine_mtp_keep(hearth_engine *e, struct seq *s, int32_t row)
{
    memcpy(s->mtp_h, runner_hidden(e->runner, row), (size_t)hearth_model_n_embd(e->model) * sizeof *s->mtp_h);
    s->mtp_pos = s->n_computed;
}

/* The hidden-state input of s's first row at position pos: mtp_h where it
 * belongs there, else zeros (position 0, or a resume that kept none);
 * only the drafts' quality depends on it. */
static void mtp_first_input(const hearth_engine *e, const struct seq *s, int32_t pos, float *out)
{
    const size_t E = (size_t)hearth_model_n_embd(e->model);
    if (pos > 0 && s->mtp_pos == pos) memcpy(out, s->mtp_h, E * sizeof *out);
    else memset(out, 0, E * sizeof *out);
}

hearth_status engine_mtp_follow(hearth_engine *e, const struct runner_step *step)
{
    const size_t E = (size_t)hearth_model_n_embd(e->model);
    const struct batch_pos *bp = &step->bp;
    for (int32_t i = 0; i < bp->n_seqs; i++) {
        const struct seq *s = e->step_seqs[i];
        const int32_t first = bp->seq_start[i], end = bp->seq_start[i + 1];
        mtp_first_input(e, s, bp->pos[first], e->mtp_in + (size_t)first * E);
        for (int32_t row = first + 1; row < end; row++)
            memcpy(e->mtp_in + (size_t)row * E, runner_hidden(e->runner, row - 1), E * sizeof *e->mtp_in);
        /* a block's last hidden state goes with its keys and values: a
         * sequence that resumes from the block in the prefix cache reads
         * it (engine_take_prefix()) */
        for (int32_t row = first; e->block_h && row < end; row++) {
            const int32_t pos = bp->pos[row], b = s->table[pos / e->B];
            if ((pos + 1) % e->B == 0 && b >= 0)
                memcpy(e->block_h + (size_t)b * E, runner_hidden(e->runner, row), E * sizeof *e->block_h);
        }
    }
    struct runner_step follow = *step;
    follow.n_logits = 0;
    HEARTH_TRY(runner_eval_mtp(e->runner, &follow, e->mtp_in));
    /* the last row's hidden state is the next step's input (a
     * verification moves it to its last kept row) */
    for (int32_t i = 0; i < bp->n_seqs; i++) {
        struct seq *s = e->step_seqs[i];
        const int32_t last = bp->seq_start[i + 1] - 1;
        memcpy(s->mtp_h, runner_hidden(e->runner, last), E * sizeof *s->mtp_h);
        s->mtp_pos = bp->pos[last] + 1;
    }
    return HEARTH_OK;
}

/* Draft for the n sequences of e->draft_seqs with the prediction layer:
 * pass j gives each sequence still drafting one row at position
 * n_computed + j, the token there (its last known one, then its drafts)
 * and the hidden state before it (the trunk's, then the prediction
 * layer's own of the pass before), in the room the plan made for its
 * verification. */
static hearth_status draft_with_mtp(hearth_engine *e, int32_t n)
{
    const int32_t B = e->B;
    const size_t E = (size_t)hearth_model_n_embd(e->model);
    size_t n_blocks = 0;
    HEARTH_TRY(drafts_begin(e, n));
    for (int32_t i = 0; i < n; i++) n_blocks += (size_t)e->draft_seqs[i]->n_table;
    HEARTH_TRY(engine_reserve_blocks(e, n_blocks));
    for (int32_t pass = 0;; pass++) {
        int32_t row = 0;
        size_t tb = 0;
        for (int32_t i = 0; i < n; i++) {
            struct seq *s = e->draft_seqs[i];
            if (!s->drafting) continue;
            const int32_t pos = s->n_computed + pass;
            e->seq_start[row] = row;
            e->table_start[row] = (int32_t)tb;
            memcpy(e->blocks + tb, s->table, (size_t)s->n_table * sizeof *s->table);
            tb += (size_t)s->n_table;
            e->tokens[row] = engine_known_token(s, pos);
            e->pos[row] = pos;
            e->slot[row] = s->table[pos / B] * B + pos % B;
            float *h = e->mtp_in + (size_t)row * E;
            if (pass == 0) mtp_first_input(e, s, pos, h);
            else memcpy(h, runner_mtp_hidden(e->runner, s->mtp_row), E * sizeof *h);
            e->logit_rows[row] = row;
            e->logit_seqs[row] = s;
            s->mtp_row = row;
            row++;
        }
        if (row == 0) break;
        e->seq_start[row] = row;
        HEARTH_TRY(draft_pass(e, row, row, row, pass));
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
        hearth_status st = e->mtp_in ? draft_with_mtp(e, n_model) : draft_with_model(e, n_model);
        memcpy(e->step_seqs, plan_seqs, (size_t)p->n_seqs * sizeof *plan_seqs);
        free(plan_seqs);
        if (st) return st;
    }
    for (int32_t i = 0; i < p->n_seqs; i++) {
        struct seq *s = e->step_seqs[i];
        if (s->k_plan <= 0) continue;
        const hearth_speculation *sp = &s->req->params.speculation;
        if (s->n_draft < sp->draft_min) s->n_draft = 0;
        if (s->n_draft == 0 && sp->lookup == 0) {
            /* a draft pass that gave nothing to verify (the confidence
             * limit stopped it at once) cost its time for nothing: it counts as a
             * rejected token, or the planner, never seeing a verification,
             * would go on planning drafts at the prior's rate */
            s->acc_w *= SPEC_ALPHA_DECAY;
            s->tested_w = s->tested_w * SPEC_ALPHA_DECAY + 1.0;
        }
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

void engine_set_mtp_hook(hearth_engine *e,
                         void (*hook)(void *user, int32_t pass, int32_t pos, const float *logits), void *user)
{
    e->mtp_hook = hook;
    e->mtp_hook_user = user;
}

void engine_set_spec_cost(hearth_engine *e, double cost)
{
    e->spec_cost = cost;
}

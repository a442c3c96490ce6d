/*
 * schedule.c -- the scheduler: which sequences a step runs and how many
 * rows each takes (the order is in engine_impl.h), admission from the
 * waiting list, and preemption when the pool runs out of blocks.
 */
#include "engine_impl.h"

/* ---- scheduling ------------------------------------------------------------------- */

/* A running sequence of a recurrent model holds a state slot: there are
 * as many as sequences may run at once.  One that resumes from a
 * snapshot (engine_take_prefix()) starts from a copy of it; the others
 * start from zero at position 0. */
void engine_take_state(hearth_engine *e, struct seq *s)
{
    if (!e->free_states || s->state_slot >= 0 || e->n_free_states == 0) return;
    s->state_slot = e->free_states[--e->n_free_states];
    if (s->resume >= 0) {
        struct snapshot *sn = &e->snaps[s->resume];
        rstate_copy(runner_rstate(e->runner), s->state_slot, sn->slot);
        if (e->snap_h) {
            const size_t E = (size_t)hearth_model_n_embd(e->model);
            memcpy(s->mtp_h, e->snap_h + (size_t)s->resume * E, E * sizeof *s->mtp_h);
            s->mtp_pos = sn->n_pos;
        }
        sn->used = ++e->snap_tick;
        s->resume = -1;
    }
}

/* Put running sequence s back in the waiting queue, first in line: its
 * blocks are freed and it will be recomputed. */
void engine_preempt(hearth_engine *e, struct seq *s)
{
    engine_release_blocks(e, s);
    list_remove(&e->running, s);
    s->running = false;
    s->chunk = 0;
    s->k_plan = 0;
    s->stats.n_preempted++;
    e->preemptions++;
    list_prepend(&e->waiting, s);
}

static void plan_add(hearth_engine *e, struct step_plan *p, struct seq *s, int32_t n)
{
    s->chunk = n;
    e->step_seqs[p->n_seqs++] = s;
    p->n_rows += n;
    p->budget -= n;
}

/* Whether the plan passes s over: a step of it is in flight, or the plan
 * is another group's (engine_impl.h, steps in flight). */
static bool not_planned(const hearth_engine *e, const struct seq *s)
{
    return s->in_flight || (e->sched_group >= 0 && s->group != e->sched_group);
}

/* The newest running sequence the plan may preempt: the running list is
 * in admission order. */
struct seq *engine_newest_running(hearth_engine *e)
{
    struct seq *s = e->running.tail;
    while (s && not_planned(e, s)) s = s->prev;
    return s;
}

/* The running sequences of each group, into count (n_groups). */
static void group_counts(const hearth_engine *e, int32_t *count)
{
    for (int32_t g = 0; g < e->n_groups; g++) count[g] = 0;
    for (const struct seq *s = e->running.head; s; s = s->next) count[s->group]++;
}

/* The group a sequence admitted now joins; -1: none, it waits (a group's
 * step admits while the group holds no more than its share). */
static int32_t admission_group(const hearth_engine *e)
{
    if (e->n_groups <= 1) return 0;
    int32_t count[RUNNER_IN_FLIGHT_MAX];
    group_counts(e, count);
    if (e->sched_group >= 0) {
        const int32_t share = (e->running.n + e->waiting.n + e->n_groups - 1) / e->n_groups;
        return count[e->sched_group] < share ? e->sched_group : -1;
    }
    int32_t best = 0;
    for (int32_t g = 1; g < e->n_groups; g++)
        if (count[g] < count[best]) best = g;
    return best;
}

/* The checkpoints of a recurrent model's verifications: allocated at the
 * first sequence that drafts (SPEC_CHECKPOINTS states); false when there
 * is no room for them, and the sequence decodes without drafting. */
static bool reserve_checkpoints(hearth_engine *e)
{
    if (e->ckpt) return true;
    struct rstate *ck;
    if (rstate_new_like(runner_rstate(e->runner), SPEC_CHECKPOINTS, &ck) != HEARTH_OK) return false;
    e->ckpt_slot = hearth_calloc((size_t)e->params.n_batch, sizeof *e->ckpt_slot, "the step's checkpoints");
    if (!e->ckpt_slot) {
        rstate_free(ck);
        return false;
    }
    e->ckpt = ck;
    return true;
}

/* The tokens s drafts this step (0: none): as many as the request allows
 * where the context and max_tokens leave room, and, unless the request
 * fixed it, the length that saves the most time by the measured costs
 * (speculate.h), with n_decode sequences decoding in a step of about
 * n_rows rows.  A sequence whose drafts do not pay tries a short one
 * every SPEC_PROBE_STEPS steps or more (engine_impl.h), to see whether
 * they pay again. */
static int32_t plan_draft(hearth_engine *e, struct seq *s, int32_t n_decode, int32_t n_rows)
{
    const struct request *r = s->req;
    const hearth_speculation *sp = &r->params.speculation;
    if (sp->draft_max <= 0) return 0;
    /* the first logits of a request of n samples are sampled n times, for
     * the samples forked from it (engine_fork_samples()): nothing is drafted
     * before, even when its prompt's last token is computed on its own */
    if (r->n > 1 && !r->forked) return 0;
    int32_t k = HEARTH_MIN(sp->draft_max, e->params.n_ctx - 1 - s->n_computed);
    if (r->params.max_tokens >= 0) k = HEARTH_MIN(k, r->params.max_tokens - s->stats.n_generated - 1);
    const int32_t k_min = HEARTH_MAX(1, sp->draft_min);
    if (k < k_min) return 0;
    if (e->model->rec) {
        /* a recurrent state rolls back to checkpoints, as many as the
         * step has left */
        if (!reserve_checkpoints(e)) return 0;
        k = HEARTH_MIN(k, HEARTH_MIN(SPEC_RECURRENT_DRAFT, SPEC_CHECKPOINTS - e->ckpt_planned));
        if (k < k_min) return 0;
    }
    s->d_row = s->d_cost = e->spec_cost;
    if (sp->fixed) return k;
    double a, b;
    if (!spec_fit_line(&e->target_fit, &a, &b)) {
        /* nothing timed yet: a few tokens, unless a draft model larger
         * than its target could not pay even if every token were kept
         * (it then drafts only when a probe below is cheap enough) */
        if (sp->lookup == 0 && e->draft_prior > 1.0) return 0;
        return HEARTH_MIN(k, 4);
    }
    const double step = a + b * n_rows;
    const double per_token = step / HEARTH_MAX(1, n_decode);
    double draft_cost = 0.0;
    if (sp->lookup == 0) {
        double da, db;
        draft_cost = spec_fit_line(&e->draft_fit, &da, &db)
                         ? (da + db * n_decode) / HEARTH_MAX(1, n_decode)
                         : e->draft_prior * per_token;
    }
    /* what a drafted token's row, and a row and a draft pass, cost over a
     * token's time, for a learned confidence limit (draft.c) */
    if (e->spec_cost <= 0.0 && per_token > 0.0) {
        s->d_row = b / per_token;
        s->d_cost = (b + draft_cost) / per_token;
    }
    const double alpha = engine_seq_alpha(s);
    const int32_t best = spec_best_length(alpha, k, per_token, b, draft_cost);
    if (best >= k_min) {
        s->idle = 0;
        s->idle_s = 0.0;
        return best;
    }
    s->idle_s += per_token;
    /* a probe by the draft model first catches its keys and values up
     * with the tokens since its last draft */
    double probe = k_min * (b + draft_cost), da, db;
    if (sp->lookup == 0 && !e->mtp_in) {
        if (!spec_fit_line(&e->draft_fit, &da, &db)) db = e->draft_prior * b;
        probe += db * (s->n_tokens - s->d_computed);
    }
    if (++s->idle >= SPEC_PROBE_STEPS && s->idle_s * SPEC_PROBE_SHARE >= probe) {
        s->idle = 0;
        s->idle_s = 0.0;
        /* nor does a learned confidence limit stop the probe's first token */
        s->conf_cut = SPEC_PROBE_STEPS - 1;
        return k_min;
    }
    return 0;
}

/* Decode rows, oldest admission first (the running list is in admission
 * order), with room for their drafts, within p->budget; a sequence
 * already in the plan is passed over. */
static hearth_status plan_decode(hearth_engine *e, struct step_plan *p, int32_t n_decode, int32_t n_rows_est)
{
    for (struct seq *s = e->running.head, *next; s && p->budget > 0; s = next) {
        next = s->next;
        if (s->n_tokens - s->n_computed != 1 || s->chunk > 0 || not_planned(e, s)) continue;
        const int32_t k = HEARTH_MIN(plan_draft(e, s, n_decode, n_rows_est), p->budget - 1);
        /* a recurrent sequence's drafts take as many checkpoints */
        if (e->model->rec) e->ckpt_planned += k;
        for (;;) {
            int32_t room;
            HEARTH_TRY(engine_make_room(e, s, 1 + k, &room));
            if (room >= 1) {
                plan_add(e, p, s, room);
                s->k_plan = room - 1;
                break;
            }
            struct seq *victim = engine_newest_running(e);
            if (!victim || (victim == s && e->running.n == 1)) {
                /* alone and the pool is full: nothing else can give way */
                engine_finish_seq(e, s, -1, NULL, HEARTH_FINISH_CONTEXT, HEARTH_OK);
                break;
            }
            if (victim == next) next = next->next;
            engine_preempt(e, victim);
            if (victim == s) break;
        }
    }
    return HEARTH_OK;
}

/* Prompt chunks within p->budget: those of running sequences in prefill,
 * oldest first, then waiting sequences admitted in order. */
static hearth_status plan_prefill(hearth_engine *e, struct step_plan *p)
{
    /* running sequences in prefill; an encoder's input whole (embed.c) */
    const bool whole = e->model->hp.bidirectional;
    for (struct seq *s = e->running.head; s && p->budget > 0; s = s->next) {
        const int32_t pending = s->n_tokens - s->n_computed;
        if (pending <= 1 || not_planned(e, s)) continue; /* decode rows had their turn */
        if (whole && pending > p->budget) continue;
        int32_t room;
        HEARTH_TRY(engine_make_room(e, s, engine_prefill_chunk(e, s, HEARTH_MIN(pending, p->budget)), &room));
        if (room > 0 && (!whole || room == pending)) plan_add(e, p, s, room);
    }
    /* admission */
    while (e->waiting.head && p->budget > 0 && e->running.n < e->params.n_seq_max) {
        struct seq *s = e->waiting.head;
        struct request *r = s->req;
        /* an encoder's input waits for a step with room for all of it */
        if (whole && s->n_tokens - s->n_computed > p->budget) break;
        /* a request's samples are forked from the first: keep room for them */
        const int32_t want_slots = (!r->forked && s->index == 0) ? r->n : 1;
        if (e->running.n > 0 && e->running.n + want_slots > e->params.n_seq_max) break;
        const int32_t group = admission_group(e);
        if (group < 0) break;
        /* a waiting sequence holds no blocks */
        const int32_t total = (s->n_tokens + e->B - 1) / e->B;
        HEARTH_TRY(engine_take_prefix(e, s));
        /* with a window space, the window blocks of its first chunk */
        const int32_t chunk_end = s->n_computed + HEARTH_MIN(s->n_tokens - s->n_computed, p->budget);
        const int32_t need_w = e->wpool ? (chunk_end - 1) / e->B + 1 - s->n_wtable : 0;
        if (total - s->n_table > kv_pool_available(e->pool) ||
            (need_w > 0 && need_w > kv_pool_available(e->wpool))) {
            /* give the prefix back; wait for room (first come, first served) */
            engine_release_blocks(e, s);
            if (e->running.n == 0 && total > kv_pool_available(e->pool)) {
                /* cannot happen for a prompt the submission accepted, but
                 * never spin on it */
                list_remove(&e->waiting, s);
                engine_finish_seq(e, s, -1, NULL, HEARTH_FINISH_CONTEXT, HEARTH_OK);
                continue;
            }
            break;
        }
        list_remove(&e->waiting, s);
        list_append(&e->running, s);
        s->running = true;
        s->group = group;
        engine_take_state(e, s);
        if (s->stats.n_preempted == 0) { /* its first admission */
            s->stats.queue_ms = (engine_now_s() - r->t_submit) * 1e3;
            s->stats.n_cached = s->n_computed;
            s->stats.n_cached_disk = HEARTH_MIN(s->n_disk, s->n_computed);
        }
        const int32_t pending = s->n_tokens - s->n_computed;
        int32_t room;
        HEARTH_TRY(engine_make_room(e, s, engine_prefill_chunk(e, s, HEARTH_MIN(pending, p->budget)), &room));
        if (room > 0 && (!whole || room == pending)) plan_add(e, p, s, room);
    }
    return HEARTH_OK;
}

/* Run one stage of the plan within at most `limit` rows of what is left
 * of the step's budget. */
#define PLAN_WITHIN(p, limit, call)                                                                    \
    do {                                                                                               \
        const int32_t rest_ = (p)->budget - HEARTH_MAX(0, HEARTH_MIN((p)->budget, (limit)));           \
        (p)->budget -= rest_;                                                                          \
        const hearth_status st_ = (call);                                                              \
        (p)->budget += rest_;                                                                          \
        if (st_ != HEARTH_OK) return st_;                                                              \
    } while (0)

hearth_status engine_schedule(hearth_engine *e, struct step_plan *p)
{
    const int32_t n_batch = e->params.n_batch;
    p->n_rows = p->n_seqs = 0;
    p->budget = n_batch;
    e->ckpt_planned = 0;
    /* the step's expected size, for the drafts' cost */
    int32_t n_decode = 0;
    int64_t n_pending = 0, n_prompt = 0;
    for (struct seq *s = e->running.head; s; s = s->next) {
        const int32_t pending = s->n_tokens - s->n_computed;
        n_decode += pending == 1;
        n_pending += pending;
        if (pending > 1) n_prompt += pending;
    }
    /* prompts that may be admitted: the waiting ones while the running set
     * has room (an estimate; admission decides) */
    int32_t n_slots = e->params.n_seq_max - e->running.n;
    for (struct seq *s = e->waiting.head; s && n_slots > 0 && n_prompt < n_batch; s = s->next, n_slots--)
        n_prompt += s->n_tokens - s->n_computed;
    const int32_t n_rows_est = (int32_t)HEARTH_MIN(n_pending, (int64_t)n_batch);
    /* the prompts' share of a step with decode rows (hearth_engine_params.
     * prefill_share): kept from the decode rows while prompts wait, and
     * all they may take while sequences decode */
    const int32_t share = HEARTH_MAX(1, (int32_t)lroundf(e->params.prefill_share * (float)n_batch));
    const int32_t kept = (int32_t)HEARTH_MIN((int64_t)share, n_prompt);
    /* 1. decode rows, leaving the prompts' share */
    PLAN_WITHIN(p, n_batch - kept, plan_decode(e, p, n_decode, n_rows_est));
    /* 2. prompt chunks: their share while sequences decode, else all */
    PLAN_WITHIN(p, n_decode > 0 ? share : n_batch, plan_prefill(e, p));
    /* 3. what the prompts left of their share, to the decode rows passed over */
    if (kept > 0) PLAN_WITHIN(p, p->budget, plan_decode(e, p, n_decode, n_rows_est));
    return HEARTH_OK;
}

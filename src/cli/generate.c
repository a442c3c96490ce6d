/*
 * generate.c -- the generation shared by `hearth run` and `hearth chat`
 * (see generate.h): a request to the engine, stepped on this thread, its
 * events streamed to the output.
 */
#include "config.h"

#include "generate.h"

#include "cli.h"
#include "model_options.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *gen_finish_name(enum finish_reason reason)
{
    switch (reason) {
    case FINISH_STOP: return "stop";
    case FINISH_EOS: return "eos";
    case FINISH_LENGTH: return "length";
    case FINISH_INTERRUPTED: return "interrupted";
    case FINISH_NONE: break;
    }
    return "none";
}

int gen_engine_new(const char *cmd, const hearth_model *model, const hearth_model *draft, bool mtp,
                   const struct cli_context_opts *opts, hearth_engine **out)
{
    hearth_engine_params p;
    hearth_engine_default_params(&p);
    cli_engine_apply(opts, &p);
    p.draft_model = draft;
    p.mtp = mtp;
    p.n_seq_max = 1; /* one request at a time; the pool holds its whole context */
    hearth_status st = hearth_engine_new(model, &p, out);
    if (st) {
        cli_fail(cmd, st);
        if (st == HEARTH_E_NOMEM) fprintf(stderr, "hearth: %s: a smaller context (-c) needs less\n", cmd);
        return CLI_EXIT_FAILURE;
    }
    cli_model_report_engine_offload(stderr, cmd, model, *out);
    return CLI_EXIT_OK;
}

/* One request in flight: what the event callback needs. */
struct gen_state {
    hearth_engine *engine;
    const struct gen_request *req;
    struct gen_stats *stats;
    uint64_t id;
    bool cancelled;           /* hearth_engine_cancel() was called */
    hearth_status failure;    /* a failure of ours that cancelled the request */
    bool done;                /* the final event came */
    hearth_finish_reason why;
    hearth_status status;     /* with HEARTH_FINISH_ERROR */
    hearth_request_stats rs;
    hearth_reasoning_split *split; /* NULL: all of the text is the answer */
    bool dim;                 /* reasoning on a terminal: dimmed */
    char last_reasoning;      /* the last byte of reasoning shown, 0 before any */
};

static hearth_status remember(const struct gen_request *req, hearth_token token)
{
    if (!req->tokens) return HEARTH_OK;
    if (*req->n_tokens == *req->tokens_cap) {
        size_t cap = *req->tokens_cap ? *req->tokens_cap * 2 : 256;
        hearth_token *t = realloc(*req->tokens, cap * sizeof *t);
        if (!t) return HEARTH_E_NOMEM; /* reported as "out of memory" */
        *req->tokens = t;
        *req->tokens_cap = cap;
    }
    (*req->tokens)[(*req->n_tokens)++] = token;
    return HEARTH_OK;
}

/* The request ends at the next step, with HEARTH_FINISH_CANCELLED. */
static void cancel(struct gen_state *g)
{
    if (g->cancelled) return;
    g->cancelled = true;
    hearth_engine_cancel(g->engine, g->id);
}

static void show_reasoning(struct gen_state *g, const char *text, size_t len)
{
    if (len == 0 || g->req->hide_reasoning) return;
    if (g->dim) fputs("\033[2m", stderr);
    fwrite(text, 1, len, stderr);
    if (g->dim) fputs("\033[0m", stderr);
    fflush(stderr);
    g->last_reasoning = text[len - 1];
}

static void show_answer(struct gen_state *g, const char *text, size_t len)
{
    struct gen_stats *s = g->stats;
    if (len == 0) return;
    if (g->last_reasoning && g->last_reasoning != '\n') fputc('\n', stderr); /* the thinking's line ends */
    g->last_reasoning = 0;
    fwrite(text, 1, len, g->req->out);
    fflush(g->req->out);
    s->n_bytes += len;
    s->last_byte = text[len - 1];
}

/* Text of the request, through the reasoning split when there is one
 * (at_end: its end, releasing what the split held back). */
static void show_text(struct gen_state *g, const char *text, size_t len, bool at_end)
{
    if (!g->split) {
        show_answer(g, text, len);
        return;
    }
    hearth_reasoning_text t;
    hearth_status st = hearth_reasoning_split_push(g->split, text, len, &t);
    if (!st) {
        show_reasoning(g, t.reasoning, t.reasoning_len);
        show_answer(g, t.answer, t.answer_len);
        if (at_end) st = hearth_reasoning_split_finish(g->split, &t);
        if (!st && at_end) {
            show_reasoning(g, t.reasoning, t.reasoning_len);
            show_answer(g, t.answer, t.answer_len);
        }
    }
    if (st && !g->failure) {
        g->failure = st;
        cancel(g);
    }
}

static void on_event(void *user, const hearth_event *ev)
{
    struct gen_state *g = user;
    show_text(g, ev->text, ev->len, ev->finish != HEARTH_FINISH_NONE);
    if (ev->finish == HEARTH_FINISH_NONE) {
        /* a generated token; an end-of-generation one comes with the
         * final event and is not part of the text */
        if (!g->failure && ev->token >= 0) g->failure = remember(g->req, ev->token);
        if (g->failure || cli_interrupted()) cancel(g);
        return;
    }
    g->done = true;
    g->why = ev->finish;
    g->status = ev->status;
    if (ev->stats) g->rs = *ev->stats;
}

/* Record a failure for the caller: print it and keep its status. */
static int failed(const char *cmd, struct gen_stats *stats, hearth_status st)
{
    stats->status = st;
    return cli_fail(cmd, st);
}

int gen_run(const char *cmd, hearth_engine *engine, const struct gen_request *req, struct gen_stats *stats)
{
    memset(stats, 0, sizeof *stats);
    stats->n_reasoning = -1;
    stats->stop_index = -1;
    struct gen_state g = {.engine = engine, .req = req, .stats = stats};
    hearth_request r;
    hearth_request_default(&r);
    r.prompt = req->prompt;
    r.n_prompt = req->n_prompt;
    r.sampling = *req->sampling;
    if (req->speculation) r.speculation = *req->speculation;
    r.stop = req->stop;
    r.n_stop = req->n_stop;
    r.max_tokens = req->n_predict;
    r.decode_flags = req->decode_flags;
    r.on_event = on_event;
    r.user = &g;
    hearth_status st = HEARTH_OK;
    if (req->reasoning != HEARTH_REASONING_NONE) {
        /* the prompt's end says where the text starts (inside <think>) */
        const size_t n_tail = req->n_prompt < 32 ? req->n_prompt : 32;
        char *tail = NULL;
        size_t tail_len = 0;
        st = hearth_detokenize_alloc(req->vocab, req->prompt + req->n_prompt - n_tail, n_tail,
                                     HEARTH_DECODE_SPECIAL | HEARTH_DECODE_CONTINUATION, &tail, &tail_len);
        if (!st) st = hearth_reasoning_split_new(req->reasoning, tail, tail_len, &g.split);
        hearth_free(tail);
        if (st) return failed(cmd, stats, st);
        /* harmony's markers are control tokens */
        if (req->reasoning == HEARTH_REASONING_HARMONY) r.decode_flags |= HEARTH_DECODE_SPECIAL;
        /* the engine follows the reasoning too: a grammar applies to the
         * answer alone, and the budget ends the reasoning */
        r.reasoning = req->reasoning;
        r.reasoning_budget = req->reasoning_budget;
        g.dim = isatty(STDERR_FILENO);
    }
    st = hearth_engine_submit(engine, &r, &g.id);
    bool stalled = false;
    while (!st && !g.done) {
        if (cli_interrupted()) cancel(&g);
        bool worked;
        st = hearth_engine_step(engine, &worked);
        if (g.done) st = HEARTH_OK; /* the request ended: what the step says after it does not matter */
        else if (!st && !worked) stalled = true;
        if (stalled) break;
    }
    hearth_reasoning_split_free(g.split);
    if (st) return failed(cmd, stats, st);
    if (stalled) {
        stats->status = HEARTH_E_INTERNAL;
        return cli_error(cmd, "the engine stopped before the request ended");
    }

    switch (g.why) {
    case HEARTH_FINISH_STOP:
        stats->finish = FINISH_STOP;
        stats->stop_index = g.rs.stop_index;
        break;
    case HEARTH_FINISH_EOS: stats->finish = FINISH_EOS; break;
    case HEARTH_FINISH_LENGTH: stats->finish = FINISH_LENGTH; break;
    case HEARTH_FINISH_CONTEXT:
        stats->finish = FINISH_LENGTH;
        stats->context_full = true;
        break;
    case HEARTH_FINISH_CANCELLED:
        if (g.failure) return failed(cmd, stats, g.failure);
        stats->finish = FINISH_INTERRUPTED;
        break;
    case HEARTH_FINISH_ERROR:
    case HEARTH_FINISH_NONE:
        return failed(cmd, stats, g.status ? g.status : HEARTH_E_INTERNAL);
    }

    const hearth_request_stats *rs = &g.rs;
    stats->n_gen = rs->n_generated;
    stats->n_steps = rs->n_steps;
    stats->n_drafted = rs->n_drafted;
    stats->n_accepted = rs->n_accepted;
    stats->n_reasoning = req->reasoning != HEARTH_REASONING_NONE ? rs->n_reasoning : -1;
    stats->ttft_s = rs->ttft_ms * 1e-3;
    if (rs->n_generated > 1) stats->gen_s = rs->tpot_ms * (rs->n_generated - 1) * 1e-3;
    /* The prompt was processed when a token came (or none was wanted):
     * from the admission to the first token, or to the end. */
    if (rs->n_generated > 0 || stats->finish != FINISH_INTERRUPTED) {
        stats->n_prompt = rs->n_prompt;
        stats->n_cached = rs->n_cached;
        const double end_ms = rs->n_generated > 0 ? rs->ttft_ms : rs->total_ms;
        stats->prompt_s = (end_ms - rs->queue_ms) * 1e-3;
    }
    return CLI_EXIT_OK;
}

void gen_print_stats(const char *cmd, const struct gen_stats *s, const hearth_sampler_params *sampling)
{
    if (s->n_prompt > 0) {
        /* Prefill speed: the tokens computed, not those from the cache. */
        const int32_t computed = s->n_prompt - s->n_cached;
        fprintf(stderr, "hearth: %s: prompt: %d tokens (%d from the cache), %.2f tokens/s\n", cmd,
                s->n_prompt, s->n_cached, s->prompt_s > 0 ? computed / s->prompt_s : 0.0);
    }
    if (s->n_gen > 0) {
        /* Decode speed: the tokens after the first, each one evaluation,
         * over the time between the first and the last. */
        double per_token = s->n_gen > 1 ? s->gen_s / (s->n_gen - 1) : 0.0;
        fprintf(stderr, "hearth: %s: time to first token: %.2f ms\n", cmd, s->ttft_s * 1e3);
        fprintf(stderr, "hearth: %s: generated: %d tokens, %.2f tokens/s, %.2f ms per output token\n",
                cmd, s->n_gen, per_token > 0 ? 1.0 / per_token : 0.0, per_token * 1e3);
    } else {
        fprintf(stderr, "hearth: %s: generated: 0 tokens\n", cmd);
    }
    if (s->n_reasoning >= 0) fprintf(stderr, "hearth: %s: reasoning: %d tokens\n", cmd, s->n_reasoning);
    const char *why = "";
    if (s->finish == FINISH_LENGTH) why = s->context_full ? " (the context is full)" : " (token limit)";
    fprintf(stderr, "hearth: %s: finish reason: %s%s\n", cmd, gen_finish_name(s->finish), why);
    if (sampling) {
        char line[512];
        hearth_sampler_params_format(sampling, line, sizeof line);
        fprintf(stderr, "hearth: %s: sampling: %s\n", cmd, line);
    }
}

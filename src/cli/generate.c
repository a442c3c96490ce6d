/*
 * generate.c -- the generation loop shared by `hearth run` and `hearth
 * chat` (see generate.h).
 */
#include "config.h"

#include "generate.h"

#include "cli.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t sigint_seen;

static void on_sigint(int sig)
{
    sigint_seen = 1;
    /* A second ^C kills the program the usual way. */
    signal(sig, SIG_DFL);
}

void gen_install_sigint(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

bool gen_interrupted(void)
{
    return sigint_seen != 0;
}

void gen_clear_interrupt(void)
{
    sigint_seen = 0;
    gen_install_sigint();
}

bool gen_should_abort(void *unused)
{
    (void)unused;
    return sigint_seen != 0;
}

double gen_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

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

static void emit(FILE *out, const char *text, size_t len)
{
    if (len == 0) return;
    fwrite(text, 1, len, out);
    fflush(out);
}

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

/* Record a failure for the caller: print it and keep its status. */
static int failed(const char *cmd, struct gen_stats *stats, hearth_status st)
{
    stats->status = st;
    return cli_fail(cmd, st);
}

int gen_run(const char *cmd, hearth_context *ctx, hearth_sampler *sampler, const hearth_vocab *vocab,
            const struct gen_request *req, struct gen_stats *stats)
{
    memset(stats, 0, sizeof *stats);
    stats->stop_index = -1;
    const int32_t n_ctx = hearth_context_n_ctx(ctx);
    const double t_start = gen_now_s();
    hearth_status st;

    if (req->n_prompt > 0) {
        int32_t n_past = hearth_context_n_past(ctx);
        if (req->n_prompt > (size_t)(n_ctx - n_past)) {
            stats->status = HEARTH_E_RANGE;
            if (n_past == 0)
                return cli_error(cmd, "the prompt has %zu tokens but the context holds %d; use a "
                                 "larger --ctx-size or a shorter prompt", req->n_prompt, n_ctx);
            return cli_error(cmd, "%zu more tokens do not fit: %d of the context's %d positions "
                             "are used", req->n_prompt, n_past, n_ctx);
        }
        st = hearth_eval(ctx, req->prompt, (int32_t)req->n_prompt, 1);
        if (st == HEARTH_E_INTERRUPTED) {
            stats->finish = FINISH_INTERRUPTED;
            return CLI_EXIT_OK;
        }
        if (st) return failed(cmd, stats, st);
        for (size_t i = 0; i < req->n_prompt; i++) {
            st = hearth_sampler_accept(sampler, req->prompt[i]);
            if (st) return failed(cmd, stats, st);
        }
        stats->n_prompt = (int32_t)req->n_prompt;
    } else if (!hearth_context_logits(ctx, 0)) {
        stats->status = HEARTH_E_INVALID;
        return cli_error(cmd, "nothing to generate from: the prompt is empty");
    }
    stats->prompt_s = gen_now_s() - t_start;

    double t_first = 0.0;
    const char *text;
    size_t len;
    for (;;) {
        if (gen_interrupted()) {
            stats->finish = FINISH_INTERRUPTED;
            break;
        }
        if (req->n_predict >= 0 && stats->n_gen >= req->n_predict) {
            stats->finish = FINISH_LENGTH;
            break;
        }
        hearth_token token;
        st = hearth_sampler_sample(sampler, hearth_context_logits(ctx, 0), &token);
        if (st) return failed(cmd, stats, st);
        if (stats->n_gen == 0) {
            t_first = gen_now_s();
            stats->ttft_s = t_first - t_start;
        }
        stats->n_gen++;
        if (hearth_vocab_is_eog(vocab, token)) {
            stats->finish = FINISH_EOS;
            break;
        }
        if ((st = hearth_sampler_accept(sampler, token)) || (st = remember(req, token)) ||
            (st = hearth_text_stream_push_token(req->stream, token, &text, &len)))
            return failed(cmd, stats, st);
        emit(req->out, text, len);
        if (hearth_text_stream_stop_index(req->stream) >= 0) {
            stats->finish = FINISH_STOP;
            stats->stop_index = hearth_text_stream_stop_index(req->stream);
            break;
        }
        if (hearth_context_n_past(ctx) >= n_ctx) {
            stats->finish = FINISH_LENGTH;
            stats->context_full = true;
            break;
        }
        if (req->n_predict >= 0 && stats->n_gen >= req->n_predict) {
            /* the last token needs no evaluation */
            stats->finish = FINISH_LENGTH;
            break;
        }
        st = hearth_eval(ctx, &token, 1, 1);
        if (st == HEARTH_E_INTERRUPTED) {
            stats->finish = FINISH_INTERRUPTED;
            break;
        }
        if (st) return failed(cmd, stats, st);
    }
    if (stats->n_gen > 0) stats->gen_s = gen_now_s() - t_first;
    if (stats->finish != FINISH_STOP) {
        st = hearth_text_stream_finish(req->stream, &text, &len);
        if (st) return failed(cmd, stats, st);
        emit(req->out, text, len);
    }
    return CLI_EXIT_OK;
}

void gen_print_stats(const char *cmd, const struct gen_stats *s, const hearth_sampler_params *sampling)
{
    if (s->n_prompt > 0)
        fprintf(stderr, "hearth: %s: prompt: %d tokens, %.2f tokens/s\n", cmd, s->n_prompt,
                s->prompt_s > 0 ? s->n_prompt / s->prompt_s : 0.0);
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
    const char *why = "";
    if (s->finish == FINISH_LENGTH) why = s->context_full ? " (the context is full)" : " (token limit)";
    fprintf(stderr, "hearth: %s: finish reason: %s%s\n", cmd, gen_finish_name(s->finish), why);
    if (sampling) {
        char line[512];
        hearth_sampler_params_format(sampling, line, sizeof line);
        fprintf(stderr, "hearth: %s: sampling: %s\n", cmd, line);
    }
}

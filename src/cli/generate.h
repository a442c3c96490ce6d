/*
 * generate.h -- the generation loop shared by `hearth run` and `hearth
 * chat`: prefill new prompt tokens, then sample, evaluate and stream text
 * until an end-of-generation token, a stop string, the token limit, the end
 * of the context or SIGINT; and the statistics every request reports.
 */
#ifndef HEARTH_CLI_GENERATE_H
#define HEARTH_CLI_GENERATE_H

#include <stdbool.h>
#include <stdio.h>

#include "hearth.h"

enum finish_reason {
    FINISH_NONE,
    FINISH_STOP,        /* a stop string */
    FINISH_EOS,         /* an end-of-generation token */
    FINISH_LENGTH,      /* the token limit or the end of the context */
    FINISH_INTERRUPTED  /* SIGINT */
};

struct gen_stats {
    int32_t n_prompt;      /* tokens prefilled for this request */
    double prompt_s;       /* prefill time */
    double ttft_s;         /* from the start to the first generated token */
    int32_t n_gen;         /* tokens generated */
    double gen_s;          /* time from the first to the last generated token */
    enum finish_reason finish;
    bool context_full;     /* FINISH_LENGTH because the context ran out */
    int stop_index;        /* which stop string, for FINISH_STOP */
    hearth_status status;  /* after a failure: the library's status */
};

struct gen_request {
    const hearth_token *prompt;   /* tokens to prefill (appended to the context) */
    size_t n_prompt;
    int32_t n_predict;            /* most tokens to generate; < 0: no limit */
    hearth_text_stream *stream;   /* decodes tokens, holds back stop strings */
    FILE *out;                    /* where text goes (flushed per token) */
    /* Generated tokens are appended here when not NULL (grown with realloc). */
    hearth_token **tokens;
    size_t *n_tokens;
    size_t *tokens_cap;
};

/* Install the SIGINT handler that makes generation stop after the current
 * token (a second SIGINT terminates as usual). */
void gen_install_sigint(void);
/* Whether SIGINT was received; clear it for the next request. */
bool gen_interrupted(void);
void gen_clear_interrupt(void);
/* For hearth_context_set_abort(): true once SIGINT was received. */
bool gen_should_abort(void *unused);

/* Run one request.  Returns CLI_EXIT_OK when generation ended by a finish
 * reason (see stats->finish), CLI_EXIT_FAILURE after printing an error
 * (its status in stats->status). */
int gen_run(const char *cmd, hearth_context *ctx, hearth_sampler *sampler,
            const hearth_vocab *vocab, const struct gen_request *req, struct gen_stats *stats);

const char *gen_finish_name(enum finish_reason reason);

/* Print the statistics block on stderr. */
void gen_print_stats(const char *cmd, const struct gen_stats *stats,
                     const hearth_sampler_params *sampling);

double gen_now_s(void);

#endif /* HEARTH_CLI_GENERATE_H */

/*
 * generate.h -- the generation shared by `hearth run` and `hearth chat`:
 * one engine per program run (hearth.h, "serving engine"), each request a
 * prompt whose text is streamed as the engine generates it, until an
 * end-of-generation token, a stop string, the token limit, the end of the
 * context or SIGINT; and the statistics every request reports.
 */
#ifndef HEARTH_CLI_GENERATE_H
#define HEARTH_CLI_GENERATE_H

#include <stdbool.h>
#include <stdio.h>

#include "hearth.h"
#include "prompt.h"

enum finish_reason {
    FINISH_NONE,
    FINISH_STOP,        /* a stop string */
    FINISH_EOS,         /* an end-of-generation token */
    FINISH_LENGTH,      /* the token limit or the end of the context */
    FINISH_INTERRUPTED  /* SIGINT */
};

struct gen_stats {
    int32_t n_prompt;      /* prompt tokens; 0 when interrupted before the
                              prompt was processed */
    int32_t n_cached;      /* of those, taken from the prefix cache */
    double prompt_s;       /* prefill time of the others */
    double ttft_s;         /* from the submission to the first generated token */
    int32_t n_gen;         /* tokens generated */
    double gen_s;          /* time from the first to the last generated token */
    enum finish_reason finish;
    bool context_full;     /* FINISH_LENGTH because the context ran out */
    int stop_index;        /* which stop string, for FINISH_STOP */
    hearth_status status;  /* after a failure: the library's status */
    int32_t n_steps;       /* forward passes of the model that yielded tokens */
    int32_t n_drafted;     /* speculation: tokens drafted and verified */
    int32_t n_accepted;    /* of those, accepted */
    int32_t n_reasoning;   /* of n_gen, tokens of reasoning; -1 without a
                              reasoning format */
    size_t n_bytes;        /* bytes of generated text written (the answer's) */
    char last_byte;        /* the last of them */
};

struct gen_request {
    const hearth_token *prompt;   /* the whole prompt, at most the context (the
                                     engine refuses more); a prefix the engine
                                     has cached is not computed again */
    size_t n_prompt;
    int32_t n_predict;            /* most tokens to generate; < 0: no limit */
    const hearth_sampler_params *sampling;
    const hearth_speculation *speculation; /* NULL: none */
    const char *const *stop;      /* stop strings, held back from the text */
    size_t n_stop;
    unsigned decode_flags;        /* HEARTH_DECODE_* for the text */
    FILE *out;                    /* where text goes (flushed per token) */
    /* A reasoning model's thinking: the text is split in this format
     * (HEARTH_REASONING_NONE: all of it is the answer), where the text of
     * the prompt's last tokens in vocab says it starts; the answer goes to
     * out, the reasoning to stderr (dimmed on a terminal), or nowhere with
     * hide_reasoning. */
    hearth_reasoning_format reasoning;
    const hearth_vocab *vocab;
    bool hide_reasoning;
    /* With a reasoning format: the most tokens of reasoning (< 0: no
     * limit); the engine then ends it (hearth_request.reasoning_budget). */
    int32_t reasoning_budget;
    /* Generated tokens are appended here when not NULL (grown with realloc). */
    hearth_token **tokens;
    size_t *n_tokens;
    size_t *tokens_cap;
};

/* The engine of a generating command: context size, batch, threads and
 * cache type from the options, one sequence at a time in a KV pool of one
 * context, drafting with draft (may be NULL) or the model's prediction
 * layer (mtp).  Reports where the model runs (cli_model_report_engine_offload)
 * and returns CLI_EXIT_OK, or prints the error and returns
 * CLI_EXIT_FAILURE. */
int gen_engine_new(const char *cmd, const hearth_model *model, const hearth_model *draft, bool mtp,
                   const struct cli_context_opts *opts, hearth_engine **out);

/* Run one request to the end (it stops after the current token once
 * cli_interrupted() says SIGINT arrived).  Returns CLI_EXIT_OK when
 * generation ended by a finish reason (see stats->finish),
 * CLI_EXIT_FAILURE after printing an error (its status in
 * stats->status). */
int gen_run(const char *cmd, hearth_engine *engine, const struct gen_request *req, struct gen_stats *stats);

const char *gen_finish_name(enum finish_reason reason);

/* Print the statistics block on stderr. */
void gen_print_stats(const char *cmd, const struct gen_stats *stats,
                     const hearth_sampler_params *sampling);

#endif /* HEARTH_CLI_GENERATE_H */

/*
 * run_options.h -- hearth run's command line: its options, read and
 * checked against each other before anything is read or printed.  Apart
 * from the command (run.c) so that the fuzz target of the option parsers
 * runs this very table and loop.
 */
#ifndef HEARTH_CLI_RUN_OPTIONS_H
#define HEARTH_CLI_RUN_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "cli.h"
#include "model_options.h"
#include "pp_options.h"
#include "prompt.h"
#include "sampling_options.h"
#include "spec_options.h"

#define RUN_MAX_STOP 64

/* The grammar options, one at most. */
enum run_grammar_kind { RUN_NO_GRAMMAR, RUN_GRAMMAR, RUN_GRAMMAR_FILE, RUN_JSON_SCHEMA, RUN_JSON };

struct run_options {
    struct cli_model_source src;
    struct cli_sampling sampling;
    struct cli_spec spec;
    struct cli_context_opts copts;
    struct cli_pipeline_opts pp;   /* --pp, --pp-timeout */
    const char *prompt_arg, *prompt_file, *system, *template_spec;
    const char *stops[RUN_MAX_STOP];
    size_t n_stop;
    int n_predict;                 /* -1: up to the context */
    bool chat, special, echo, verbose;
    bool hide_reasoning;           /* --reasoning hide */
    int32_t reasoning_budget;      /* --reasoning-budget; -1: no limit */
    bool reasoning_budget_given;
    enum run_grammar_kind grammar_kind;
    const char *grammar_arg;       /* its text, file or schema (NULL for --json) */
};

/* What run_options_parse() gives besides CLI_EXIT_OK and CLI_EXIT_USAGE:
 * --help was asked for (the caller prints the usage). */
#define RUN_OPTIONS_HELP (-1)

/* Read argv (the arguments after the command's name) into o and check
 * them against each other; messages name cmd.  Whatever it returns, o is
 * to be freed with run_options_free(). */
int run_options_parse(const char *cmd, int argc, char **argv, struct run_options *o);
void run_options_free(struct run_options *o);

#endif /* HEARTH_CLI_RUN_OPTIONS_H */

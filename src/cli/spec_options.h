/*
 * spec_options.h -- the speculative-decoding flags that hearth run, chat
 * and serve share: the draft model (-md FILE, --gpu-layers-draft N),
 * --draft-max N, --draft-min N, --draft-p-min P, --draft-fixed and prompt
 * lookup (--lookup N), parsed and documented in one place, and the
 * statistics line a request's speculation reports.
 *
 * A command calls cli_spec_normalize_args() before getopt_long() (the
 * single-dash -md and -ngld), puts CLI_SPEC_LONG_OPTIONS in its table,
 * offers each option to cli_spec_option(), calls cli_spec_finish() after
 * the loop, loads the draft with cli_spec_load_draft() and puts
 * spec.speculation into each request.
 */
#ifndef HEARTH_CLI_SPEC_OPTIONS_H
#define HEARTH_CLI_SPEC_OPTIONS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include "hearth.h"

enum {
    CLI_OPT_DRAFT_MODEL = 0x1200,
    CLI_OPT_DRAFT_MAX,
    CLI_OPT_DRAFT_MIN,
    CLI_OPT_DRAFT_P_MIN,
    CLI_OPT_DRAFT_FIXED,
    CLI_OPT_DRAFT_GPU_LAYERS,
    CLI_OPT_LOOKUP,
    CLI_OPT_MTP,
    CLI_OPT_NO_MTP
};

#define CLI_SPEC_LONG_OPTIONS                                              \
    {"model-draft", required_argument, NULL, CLI_OPT_DRAFT_MODEL},         \
    {"md", required_argument, NULL, CLI_OPT_DRAFT_MODEL},                  \
    {"draft-max", required_argument, NULL, CLI_OPT_DRAFT_MAX},             \
    {"draft-min", required_argument, NULL, CLI_OPT_DRAFT_MIN},             \
    {"draft-p-min", required_argument, NULL, CLI_OPT_DRAFT_P_MIN},         \
    {"draft-fixed", no_argument, NULL, CLI_OPT_DRAFT_FIXED},               \
    {"gpu-layers-draft", required_argument, NULL, CLI_OPT_DRAFT_GPU_LAYERS}, \
    {"ngld", required_argument, NULL, CLI_OPT_DRAFT_GPU_LAYERS},           \
    {"lookup", required_argument, NULL, CLI_OPT_LOOKUP},                   \
    {"mtp", no_argument, NULL, CLI_OPT_MTP},                               \
    {"no-mtp", no_argument, NULL, CLI_OPT_NO_MTP}

struct cli_spec {
    const char *draft_path;          /* -md */
    int draft_gpu_layers;            /* -ngld */
    bool draft_max_given;
    int mtp;                         /* --mtp 1, --no-mtp 0, neither -1 */
    hearth_speculation speculation;  /* for every request; draft_max 0: none */
};

void cli_spec_init(struct cli_spec *spec);

/* Rewrite each "-md" and "-ngld" before a "--" to "--md" and "--ngld". */
void cli_spec_normalize_args(int argc, char **argv);

/* 1 when opt was one of the flags (valid), 0 when not one, -1 after a
 * usage error. */
int cli_spec_option(const char *cmd, struct cli_spec *spec, int opt, const char *arg);

/* After the loop: the defaults that depend on what was given (with -md
 * or --lookup and no --draft-max, 16 or 10 drafted tokens), and the
 * checks between flags.  CLI_EXIT_OK or, after printing, CLI_EXIT_USAGE. */
int cli_spec_finish(const char *cmd, struct cli_spec *spec);

/* After the model is loaded: whether to draft with its multi-token-
 * prediction layer.  With --mtp, the model must have one; with neither
 * --mtp nor --no-mtp, by_default (hearth serve) turns it on where the
 * model has one and no other draft was asked for.  Sets *use (for
 * hearth_engine_params.mtp) and the speculation's draft length; a CLI
 * exit status. */
int cli_spec_use_mtp(const char *cmd, struct cli_spec *spec, const hearth_model *model, bool by_default,
                     bool *use);

/* Load the draft model (NULL when -md was not given), offloading
 * --gpu-layers-draft layers on the device of model_params.  Returns a CLI
 * exit status. */
int cli_spec_load_draft(const char *cmd, const struct cli_spec *spec, const hearth_model_params *model_params,
                        hearth_model **out);

void cli_spec_help(FILE *out);

/* "hearth: CMD: speculation: D drafted, A accepted (alpha 0.83), 2.91
 * tokens per step" on stderr, when the request asked for speculation. */
void cli_spec_print_stats(const char *cmd, const struct cli_spec *spec, int32_t n_generated, int32_t n_steps,
                          int32_t n_drafted, int32_t n_accepted);

#endif /* HEARTH_CLI_SPEC_OPTIONS_H */

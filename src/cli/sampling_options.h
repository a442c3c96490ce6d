/*
 * sampling_options.h -- the sampling flags that hearth run, chat and serve
 * share (--temp, --top-k, ... --logit-bias), parsed in one place so that
 * every command spells, checks and documents them the same way.
 *
 * A command puts CLI_SAMPLING_LONG_OPTIONS into its getopt_long() table
 * and offers each option to cli_sampling_option() in its loop:
 *
 *     int r = cli_sampling_option("run", &sampling, opt, optarg);
 *     if (r < 0) return CLI_EXIT_USAGE;
 *     if (r > 0) continue;
 *
 * then calls cli_sampling_finish() once the loop is done.
 */
#ifndef HEARTH_CLI_SAMPLING_OPTIONS_H
#define HEARTH_CLI_SAMPLING_OPTIONS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "hearth.h"

/* getopt_long() values of the sampling flags, above any short option. */
enum {
    CLI_OPT_TEMP = 0x1000,
    CLI_OPT_TOP_K,
    CLI_OPT_TOP_P,
    CLI_OPT_MIN_P,
    CLI_OPT_REPEAT_PENALTY,
    CLI_OPT_REPEAT_LAST_N,
    CLI_OPT_PRESENCE_PENALTY,
    CLI_OPT_FREQUENCY_PENALTY,
    CLI_OPT_SEED,
    CLI_OPT_LOGIT_BIAS
};

#define CLI_SAMPLING_LONG_OPTIONS                                               \
    {"temp", required_argument, NULL, CLI_OPT_TEMP},                            \
    {"top-k", required_argument, NULL, CLI_OPT_TOP_K},                          \
    {"top-p", required_argument, NULL, CLI_OPT_TOP_P},                          \
    {"min-p", required_argument, NULL, CLI_OPT_MIN_P},                          \
    {"repeat-penalty", required_argument, NULL, CLI_OPT_REPEAT_PENALTY},        \
    {"repeat-last-n", required_argument, NULL, CLI_OPT_REPEAT_LAST_N},          \
    {"presence-penalty", required_argument, NULL, CLI_OPT_PRESENCE_PENALTY},    \
    {"frequency-penalty", required_argument, NULL, CLI_OPT_FREQUENCY_PENALTY},  \
    {"seed", required_argument, NULL, CLI_OPT_SEED},                            \
    {"logit-bias", required_argument, NULL, CLI_OPT_LOGIT_BIAS}

struct cli_sampling {
    hearth_sampler_params params;  /* params.logit_bias points at bias */
    hearth_logit_bias *bias;
    size_t n_bias;
    size_t bias_capacity;
    bool seed_given;               /* --seed was on the command line */
};

/* The library defaults, no logit bias, no seed chosen yet. */
void cli_sampling_init(struct cli_sampling *sampling);
void cli_sampling_free(struct cli_sampling *sampling);

/* Handle one getopt_long() result.  Returns 1 when opt was a sampling flag
 * and arg was valid, 0 when opt is not a sampling flag, -1 after printing a
 * usage error naming the flag and the value. */
int cli_sampling_option(const char *cmd, struct cli_sampling *sampling, int opt,
                        const char *arg);

/* After option parsing: without --seed, pick a fresh random seed so that
 * runs differ (seed_given stays false); the seed is part of the reported
 * sampling tuple, so any run can be repeated with --seed. */
void cli_sampling_finish(struct cli_sampling *sampling);

/* Once the model is loaded, before any output: whether the sampler takes
 * the options for this model's vocabulary (a --logit-bias token id beyond
 * it), asked of the library by creating one.  Returns CLI_EXIT_OK or,
 * after printing, CLI_EXIT_USAGE. */
int cli_sampling_check_model(const char *cmd, const struct cli_sampling *sampling,
                             const hearth_model *model);

/* The flags' lines for a command's --help. */
void cli_sampling_help(FILE *out);

#endif /* HEARTH_CLI_SAMPLING_OPTIONS_H */

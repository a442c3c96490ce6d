/*
 * model_options.h -- where a command's model comes from, shared by every
 * command that loads one: -m PATH, -hf OWNER/REPO[:FILE] or --url URL.
 * The last two download into the cache (see hearth-pull(1)), drawing a
 * progress bar on stderr when it is a terminal.
 *
 * A command calls cli_model_normalize_args() before getopt_long() (so that
 * the single-dash -hf is read as --hf), puts CLI_MODEL_LONG_OPTIONS in its
 * table and "m:" in its short options, offers each option to
 * cli_model_option(), and after the loop calls cli_model_check() and
 * cli_model_resolve().
 */
#ifndef HEARTH_CLI_MODEL_OPTIONS_H
#define HEARTH_CLI_MODEL_OPTIONS_H

#include <getopt.h>
#include <stdbool.h>

enum {
    CLI_OPT_HF = 0x1100,
    CLI_OPT_URL
};

/* Only the download sources (hearth pull). */
#define CLI_DOWNLOAD_LONG_OPTIONS                              \
    {"hf", required_argument, NULL, CLI_OPT_HF},               \
    {"url", required_argument, NULL, CLI_OPT_URL}

#define CLI_MODEL_LONG_OPTIONS                                 \
    {"model", required_argument, NULL, 'm'},                   \
    CLI_DOWNLOAD_LONG_OPTIONS

struct cli_model_source {
    const char *path;        /* -m */
    const char *hf;          /* -hf OWNER/REPO[:FILE] */
    const char *url;         /* --url */
    bool quiet;              /* no progress display */
    int stall_timeout_s;     /* 0: the library's default */
};

void cli_model_source_init(struct cli_model_source *src);

/* Rewrite each "-hf" argument before a "--" to "--hf". */
void cli_model_normalize_args(int argc, char **argv);

/* Handle one getopt_long() result: 1 when opt was -m, --hf or --url, 0 when
 * it is not one of them, -1 after a usage error (a second source). */
int cli_model_option(const char *cmd, struct cli_model_source *src, int opt, const char *arg);

/* After option parsing: exactly one source (or none when !required).
 * Returns CLI_EXIT_OK or, after printing, CLI_EXIT_USAGE. */
int cli_model_check(const char *cmd, const struct cli_model_source *src, bool required);

/* The local path of the model (malloc'ed), downloading it into the cache
 * when needed.  Returns a CLI exit status; on CLI_EXIT_OK *path_out is set. */
int cli_model_resolve(const char *cmd, const struct cli_model_source *src, char **path_out);

#endif /* HEARTH_CLI_MODEL_OPTIONS_H */

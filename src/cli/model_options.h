/*
 * model_options.h -- where a command's model comes from and how it is
 * loaded, shared by every command that loads one: -m PATH,
 * -hf OWNER/REPO[:FILE] or --url URL, and the offload options
 * --gpu-layers N (-ngl N), --device N and --gpu-fallback.  The download
 * sources fetch into the cache (see hearth-pull(1)), drawing a progress
 * bar on stderr when it is a terminal.
 *
 * A command calls cli_model_normalize_args() before getopt_long() (so that
 * the single-dash -hf and -ngl are read as --hf and --ngl), puts
 * CLI_MODEL_LONG_OPTIONS in its table and "m:" in its short options,
 * offers each option to cli_model_option(), and after the loop calls
 * cli_model_check() and cli_model_resolve() (or cli_model_load()).  It
 * loads the model with src.params and, after creating its context (or
 * engine), prints cli_model_report_offload() (or
 * cli_model_report_engine_offload()) on stderr.
 */
#ifndef HEARTH_CLI_MODEL_OPTIONS_H
#define HEARTH_CLI_MODEL_OPTIONS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include "hearth.h"

enum {
    CLI_OPT_HF = 0x1100,
    CLI_OPT_URL,
    CLI_OPT_DEVICE,
    CLI_OPT_GPU_LAYERS,
    CLI_OPT_GPU_FALLBACK
};

/* Only the download sources (hearth pull). */
#define CLI_DOWNLOAD_LONG_OPTIONS                              \
    {"hf", required_argument, NULL, CLI_OPT_HF},               \
    {"url", required_argument, NULL, CLI_OPT_URL}

/* Where the layers run (hearth_model_params). */
#define CLI_OFFLOAD_LONG_OPTIONS                                       \
    {"device", required_argument, NULL, CLI_OPT_DEVICE},               \
    {"gpu-layers", required_argument, NULL, CLI_OPT_GPU_LAYERS},       \
    {"ngl", required_argument, NULL, CLI_OPT_GPU_LAYERS},              \
    {"gpu-fallback", no_argument, NULL, CLI_OPT_GPU_FALLBACK}

#define CLI_MODEL_LONG_OPTIONS                                 \
    {"model", required_argument, NULL, 'm'},                   \
    CLI_DOWNLOAD_LONG_OPTIONS,                                 \
    CLI_OFFLOAD_LONG_OPTIONS

struct cli_model_source {
    const char *path;        /* -m */
    const char *hf;          /* -hf OWNER/REPO[:FILE] */
    const char *url;         /* --url */
    bool quiet;              /* no progress display */
    int stall_timeout_s;     /* 0: the library's default */
    hearth_model_params params; /* offload options, for hearth_model_load() */
    bool offload_given;      /* any offload option was given */
};

void cli_model_source_init(struct cli_model_source *src);

/* Rewrite each "-hf" and "-ngl" argument before a "--" to "--hf" and
 * "--ngl". */
void cli_model_normalize_args(int argc, char **argv);

/* Handle one getopt_long() result: 1 when opt was -m, --hf, --url or an
 * offload option, 0 when it is not one of them, -1 after a usage error (a
 * second source, a bad number). */
int cli_model_option(const char *cmd, struct cli_model_source *src, int opt, const char *arg);

/* After option parsing: exactly one source (or none when !required).
 * Returns CLI_EXIT_OK or, after printing, CLI_EXIT_USAGE. */
int cli_model_check(const char *cmd, const struct cli_model_source *src, bool required);

/* The local path of the model (malloc'ed), downloading it into the cache
 * when needed.  Returns a CLI exit status; on CLI_EXIT_OK *path_out is set. */
int cli_model_resolve(const char *cmd, const struct cli_model_source *src, char **path_out);

/* cli_model_resolve(), then load the model with the model options given
 * (src->params: the offload options).
 * Returns a CLI exit status; on CLI_EXIT_OK *path_out and *model_out are
 * set (free them with free() and hearth_model_free()). */
int cli_model_load(const char *cmd, const struct cli_model_source *src, char **path_out,
                   hearth_model **model_out);

/* The model and offload options' lines for a command's --help. */
void cli_model_help(FILE *out);

/* Where the model runs, one line without a newline:
 *   "2 of 2 layers and the output layer on OpenCL device 0 (NAME), 4.80 MiB uploaded"
 *   "1 of 22 layers on OpenCL device 0 (NAME), 30.2 MiB uploaded; 21 layers and
 *    the output layer on the CPU"
 *   "all 22 layers on the CPU (offload failed: REASON)"
 *   "all 22 layers on the CPU"
 * ctx may be NULL; when given, a context that fell back to the CPU is
 * reported as such. */
void cli_model_format_offload(char *buf, size_t size, const hearth_model *model,
                              const hearth_context *ctx);

/* "hearth: CMD: offload: ..." on out when offload was asked for (or fell
 * back); nothing for a run on the CPU alone. */
void cli_model_report_offload(FILE *out, const char *cmd, const hearth_model *model,
                              const hearth_context *ctx);
/* The same for an engine over the model (never NULL). */
void cli_model_report_engine_offload(FILE *out, const char *cmd, const hearth_model *model,
                                     const hearth_engine *engine);

/* "hearth: CMD: memory: weights 9.87 GiB resident (9.87 GiB in the file),
 * KV pool 2.00 GiB, of 21.3 GiB available" on out: the memory the weights
 * (and a draft model's) and the engine's KV pool take once in use, and
 * what the engine checked them against (hearth_engine_new). */
void cli_model_report_memory(FILE *out, const char *cmd, const hearth_model *model, hearth_engine *engine);

#endif /* HEARTH_CLI_MODEL_OPTIONS_H */

/*
 * gpu_options.h -- the offload options every command that loads a model
 * shares: --device N, --gpu-layers N (or -ngl N) and --gpu-fallback, and
 * the report of where the model's layers run.
 *
 * A command calls cli_gpu_normalize_args() before getopt_long() (so that
 * the single-dash -ngl is read as --ngl), puts CLI_GPU_LONG_OPTIONS in its
 * option table, offers each option to cli_gpu_option(), and after loading
 * the model (and creating its context) prints cli_gpu_report() on stderr.
 */
#ifndef HEARTH_CLI_GPU_OPTIONS_H
#define HEARTH_CLI_GPU_OPTIONS_H

#include <getopt.h>
#include <stdio.h>

#include "hearth.h"

enum {
    CLI_OPT_DEVICE = 0x1200,
    CLI_OPT_GPU_LAYERS,
    CLI_OPT_GPU_FALLBACK
};

#define CLI_GPU_LONG_OPTIONS                                           \
    {"device", required_argument, NULL, CLI_OPT_DEVICE},               \
    {"gpu-layers", required_argument, NULL, CLI_OPT_GPU_LAYERS},       \
    {"ngl", required_argument, NULL, CLI_OPT_GPU_LAYERS},              \
    {"gpu-fallback", no_argument, NULL, CLI_OPT_GPU_FALLBACK}

/* The usage lines of these options, for a command's --help. */
#define CLI_GPU_USAGE                                                                  \
    "  --gpu-layers N, -ngl N  offload the last N layers to an OpenCL device\n"        \
    "                          (more than the model has: the output layer too)\n"      \
    "  --device N              the device to use (see hearth devices; default 0)\n"    \
    "  --gpu-fallback          run on the CPU if offloading fails, saying why\n"

/* Rewrite each "-ngl" argument before a "--" to "--ngl". */
void cli_gpu_normalize_args(int argc, char **argv);

/* Handle one getopt_long() result: 1 when opt was one of these options
 * (stored in params), 0 when it is not, -1 after a usage error. */
int cli_gpu_option(const char *cmd, hearth_model_params *params, int opt, const char *arg);

/* Format where the model runs, one line without a newline:
 *   "2 of 2 layers and the output layer on OpenCL device 0 (NAME), 4.8 MiB uploaded"
 *   "1 of 22 layers on OpenCL device 0 (NAME), 30 MiB uploaded; 21 layers and
 *    the output layer on the CPU"
 *   "all 22 layers on the CPU (offload failed: REASON)"
 *   "all 22 layers on the CPU"
 * ctx may be NULL; when given, a context that fell back to the CPU is
 * reported as such. */
void cli_gpu_format(char *buf, size_t size, const hearth_model *model, const hearth_context *ctx);

/* "hearth: CMD: offload: ..." on out when offload was requested (or fell
 * back); nothing for a CPU-only run. */
void cli_gpu_report(FILE *out, const char *cmd, const hearth_model *model, const hearth_context *ctx);

#endif /* HEARTH_CLI_GPU_OPTIONS_H */

/*
 * fuzz-cli.c -- fuzz target for the command line's option parsing: the
 * input, split at NUL bytes, is an argument vector that goes through the
 * same code a command's option loop runs (cli_getopt() with the single-dash
 * rewrites of -hf, -ngl, -md and -ngld, and the shared handlers of the
 * model, offload, sampling, speculation and context options, then their
 * checks after the loop), with a table of long options as large as
 * hearth run's.  Nothing is loaded or read: every outcome must be a
 * handled option or a usage error, never a crash, a hang or a leak.
 */
#include "config.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "model_options.h"
#include "prompt.h"
#include "sampling_options.h"
#include "spec_options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The program's global state, defined by main.c, which is not linked. */
int cli_verbose = 0;

#define MAX_ARGS 64

enum { OPT_STOP = 0x2000, OPT_CHAT, OPT_CACHE_TYPE, OPT_GRAMMAR, OPT_JSON };

/* One parse, as a command runs it; returns the exit status it would have. */
static int parse(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"prompt", required_argument, NULL, 'p'},
        {"file", required_argument, NULL, 'f'},
        {"n-predict", required_argument, NULL, 'n'},
        {"ctx-size", required_argument, NULL, 'c'},
        {"batch", required_argument, NULL, 'b'},
        {"threads", required_argument, NULL, 't'},
        {"cache-type", required_argument, NULL, OPT_CACHE_TYPE},
        CLI_CHUNK_SIZE_LONG_OPTION,
        {"stop", required_argument, NULL, OPT_STOP},
        {"chat", no_argument, NULL, OPT_CHAT},
        {"grammar", required_argument, NULL, OPT_GRAMMAR},
        {"json", no_argument, NULL, OPT_JSON},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        CLI_MODEL_LONG_OPTIONS,
        CLI_SAMPLING_LONG_OPTIONS,
        CLI_SPEC_LONG_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    struct cli_model_source src;
    struct cli_sampling sampling;
    struct cli_spec spec;
    struct cli_context_opts copts = CLI_CONTEXT_OPTS_INIT;
    cli_model_source_init(&src);
    cli_sampling_init(&sampling);
    cli_spec_init(&spec);
    cli_model_normalize_args(argc, argv);
    cli_spec_normalize_args(argc, argv);
    int rc = CLI_EXIT_OK, c, n;
    optind = 0;
    while (rc == CLI_EXIT_OK && (c = cli_getopt(argc, argv, ":m:p:f:n:c:b:t:vh", longopts)) != -1) {
        int r = cli_model_option("fuzz", &src, c, optarg);
        if (r == 0) r = cli_sampling_option("fuzz", &sampling, c, optarg);
        if (r == 0) r = cli_spec_option("fuzz", &spec, c, optarg);
        if (r == 0) r = cli_context_option("fuzz", &copts, OPT_CACHE_TYPE, c, optarg);
        if (r < 0) rc = CLI_EXIT_USAGE;
        if (r != 0) continue;
        switch (c) {
        case 'p': case 'f': case OPT_STOP: case OPT_GRAMMAR:
            if (!optarg) abort(); /* getopt_long promised the argument */
            break;
        case 'n':
            if (!cli_parse_int("fuzz", "--n-predict", optarg, -1, 1 << 30, &n)) rc = CLI_EXIT_USAGE;
            break;
        case OPT_CHAT: case OPT_JSON: case 'v': break;
        case 'h': rc = -1; break;
        default: rc = cli_option_error("fuzz", c, argv);
        }
    }
    if (rc == CLI_EXIT_OK) rc = cli_model_check("fuzz", &src, false);
    if (rc == CLI_EXIT_OK) {
        cli_sampling_finish(&sampling);
        rc = cli_spec_finish("fuzz", &spec);
    }
    cli_sampling_free(&sampling);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096) return 0;
    /* argv[0] is the command; the words follow, each NUL-terminated */
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    static char command[] = "fuzz";
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = command;
    for (size_t i = 0; i <= size && argc <= MAX_ARGS;) {
        argv[argc++] = text + i;
        i += strlen(text + i) + 1;
    }
    argv[argc] = NULL;
    int rc = parse(argc, argv);
    if (rc != CLI_EXIT_OK && rc != CLI_EXIT_USAGE && rc != -1) abort();
    free(text);
    return 0;
}

/*
 * fuzz-cli.c -- fuzz target for the command line's option parsing: the
 * input, split at NUL bytes, is an argument vector that goes through
 * hearth run's own option table and loop (run_options_parse(): cli_getopt()
 * with the single-dash rewrites of -hf, -ngl, -md and -ngld, the shared
 * handlers of the model, offload, sampling, speculation and context
 * options, and the checks after the loop).  Nothing is loaded or read:
 * every outcome must be a parsed command line, --help or a usage error,
 * never a crash, a hang or a leak.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The program's global state, defined by main.c, which is not linked. */
int cli_verbose = 0;

#define MAX_ARGS 64

/* One parse, as hearth run makes it; returns the exit status it would
 * have (RUN_OPTIONS_HELP for --help). */
static int parse(int argc, char **argv)
{
    struct run_options o;
    int rc = run_options_parse("fuzz", argc, argv, &o);
    run_options_free(&o);
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
    if (rc != CLI_EXIT_OK && rc != CLI_EXIT_USAGE && rc != RUN_OPTIONS_HELP) abort();
    free(text);
    return 0;
}

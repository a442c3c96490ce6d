/*
 * main.c -- the hearth program: global options and dispatch to the
 * subcommand named by the first argument.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "hearth.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
#define HEARTH_COMMAND(name, summary) {#name, cmd_##name, summary},
#include "commands.def"
#undef HEARTH_COMMAND
    {NULL, NULL, NULL}
};

static void print_usage(FILE *out)
{
    fprintf(out,
            "usage: hearth [--version [-v]] [--help] COMMAND [ARGS...]\n"
            "\n"
            "hearth runs GGUF language models on the CPU.  Commands:\n\n");
    for (const struct command *c = commands; c->name; c++)
        fprintf(out, "  %-12s %s\n", c->name, c->summary);
    fprintf(out,
            "\n"
            "'hearth COMMAND --help' summarises a command's options;\n"
            "'man hearth-COMMAND' documents them.\n");
}

static void print_version(bool verbose)
{
    printf("hearth %s (library %s)\n", PACKAGE_VERSION, hearth_version());
    if (!verbose) return;
    printf("features:");
#ifdef _OPENMP
    printf(" openmp");
#endif
#ifdef HAVE_PCRE2
    printf(" pcre2");
#endif
#ifdef HAVE_CURL
    printf(" curl");
#endif
#ifdef HAVE_OPENCL
    printf(" opencl");
#endif
#ifdef HEARTH_HAVE_SERVER
    printf(" server");
#endif
    printf("\n");
    const char *features = hearth_cpu_features();
    printf("cpu: %s\n", *features ? features : "(no SIMD extensions the kernels use)");
    const char *path;
    if (hearth_cpu_kernels(&path) == HEARTH_OK) printf("kernels: %s\n", path);
    else printf("kernels: unavailable: %s\n", hearth_last_error());
}

int cli_verbose = 0;

/* Threads that wait for the others at the end of a parallel step spin
 * briefly, then sleep (GOMP_SPINCOUNT=20000, some tens of microseconds),
 * unless the environment chooses.  The OpenMP runtime's default spins far
 * longer: on a machine whose processors are shared, a spinning thread takes
 * the processor from the thread it waits for, which made decoding dozens of
 * times slower under load; sleeping at once (OMP_WAIT_POLICY=passive) cost
 * a quarter of the decode speed on an idle machine, where the short spin
 * loses nothing measurable.  The runtime reads its environment before main
 * runs, so the program restarts itself once with the variable set (and
 * runs on as it is if that fails). */
static void default_wait_policy(char **argv)
{
#ifdef _OPENMP
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    if (setenv("GOMP_SPINCOUNT", "20000", 1) != 0) return;
    execv("/proc/self/exe", argv);
#else
    (void)argv;
#endif
}

int main(int argc, char **argv)
{
    default_wait_policy(argv);
    bool want_version = false;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
            want_version = true;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            cli_verbose++;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            print_usage(stdout);
            return CLI_EXIT_OK;
        } else {
            fprintf(stderr, "hearth: unknown option '%s'\n", a);
            print_usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (want_version) {
        print_version(cli_verbose > 0);
        return CLI_EXIT_OK;
    }
    if (i >= argc) {
        print_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[i];
    if (strcmp(name, "help") == 0) {
        if (i + 1 >= argc) {
            print_usage(stdout);
            return CLI_EXIT_OK;
        }
        char page[128];
        snprintf(page, sizeof page, "hearth-%s", argv[i + 1]);
        execlp("man", "man", page, (char *)NULL);
        fprintf(stderr, "hearth: cannot run man for %s\n", page);
        return CLI_EXIT_FAILURE;
    }
    opterr = 0; /* commands report option errors through cli_option_error() */
    for (const struct command *c = commands; c->name; c++) {
        if (strcmp(c->name, name) == 0) {
            fflush(stdout);
            return c->run(argc - i, argv + i);
        }
    }
    fprintf(stderr, "hearth: '%s' is not a hearth command; see 'hearth --help'\n", name);
    return CLI_EXIT_USAGE;
}

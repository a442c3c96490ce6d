/*
 * main.c -- the hearth program: global options and dispatch to the
 * subcommand named by the first argument.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
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

/* The pages of section 7, hearth-TOPIC(7). */
static const char *const topics[] = {"grammar", "sampling", "speculation", NULL};

static void print_usage(FILE *out)
{
    fprintf(out,
            "usage: hearth [--version [-v]] [--help] COMMAND [ARGS...]\n"
            "       hearth help [COMMAND | TOPIC]\n"
            "\n"
            "hearth runs GGUF language models on the CPU.  Commands:\n\n");
    for (const struct command *c = commands; c->name; c++)
        fprintf(out, "  %-12s %s\n", c->name, c->summary);
    fprintf(out, "  %-12s %s\n", "help", "show the manual page of a command or a topic");
    fprintf(out,
            "\n"
            "'hearth COMMAND --help' summarises a command's options;\n"
            "'hearth help COMMAND' (man hearth-COMMAND) documents them.  Topics:");
    for (const char *const *t = topics; *t; t++) fprintf(out, " %s", *t);
    fprintf(out, ".\n");
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
#ifdef HAVE_MPI
    printf(" mpi");
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

/* The page of a command or topic in the build tree the program runs from,
 * if it does: the program is src/hearth (or libtool's src/.libs/hearth)
 * beside a man/ folder holding the pages.  Installed, the program has no
 * such neighbour and man finds the pages on its own path. */
static bool build_tree_page(const char *name, const char *section, char *out, size_t size)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return false;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return false;
    *slash = '\0';
    size_t len = strlen(exe);
    if (len >= 6 && strcmp(exe + len - 6, "/.libs") == 0) exe[len - 6] = '\0';
    int w = snprintf(out, size, "%s/../man/hearth-%s.%s", exe, name, section);
    return w > 0 && (size_t)w < size && access(out, R_OK) == 0;
}

/* hearth help NAME: the manual page of a command or topic, through man. */
static int help(const char *name)
{
    const char *section = NULL;
    for (const struct command *c = commands; c->name && !section; c++)
        if (strcmp(c->name, name) == 0) section = "1";
    for (const char *const *t = topics; *t && !section; t++)
        if (strcmp(*t, name) == 0) section = "7";
    if (!section) {
        fprintf(stderr, "hearth: help: '%s' is not a hearth command or topic; see 'hearth --help'\n",
                name);
        return CLI_EXIT_USAGE;
    }
    char page[PATH_MAX + 64];
    fflush(stdout);
    if (build_tree_page(name, section, page, sizeof page)) {
        execlp("man", "man", "-l", page, (char *)NULL);
    } else {
        snprintf(page, sizeof page, "hearth-%s", name);
        execlp("man", "man", section, page, (char *)NULL);
    }
    fprintf(stderr, "hearth: help: cannot run man: %s\n", strerror(errno));
    return CLI_EXIT_FAILURE;
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
        if (i + 2 < argc) {
            fprintf(stderr, "hearth: help: one command or topic expected; see 'hearth --help'\n");
            return CLI_EXIT_USAGE;
        }
        return help(argv[i + 1]);
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

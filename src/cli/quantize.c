/*
 * quantize.c -- `hearth quantize IN OUT TYPE`: convert a model to another
 * weight type with one of the recipes of hearth_quantize_model(), showing
 * each tensor's conversion and every fallback on stderr.
 */
#include "config.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "hearth.h"

#define CMD "quantize"

struct quantize_opts {
    const char *in, *out, *type_name;
    hearth_ftype ftype;
    int threads;
    bool dry_run;
    bool quiet;
};

/* What the progress function has seen. */
struct tally {
    const struct quantize_opts *opts;
    uint64_t bytes_in, bytes_out, n_elems;
    int64_t n_tensors, n_fallback, n_requantized;
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: hearth quantize [-t N] [-q] IN OUT TYPE\n"
            "       hearth quantize --dry-run IN TYPE\n"
            "\n"
            "Convert the model IN to TYPE and write it to OUT.  TYPE is one of\n"
            "  Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q4_K_S Q4_K_M Q5_K_S\n"
            "  Q5_K_M Q6_K F16 BF16 F32\n"
            "(the _S and _M recipes give some tensors more bits; see hearth-quantize(1)).\n"
            "  -t, --threads N   threads converting rows (default: one per processor)\n"
            "  -n, --dry-run     print the type each tensor would get; write nothing\n"
            "  -q, --quiet       no line per tensor on stderr\n");
}

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "512 B", "3.40 MiB", "1.21 GiB" */
static void format_size(char *buf, size_t size, uint64_t bytes)
{
    if (bytes < 1024) snprintf(buf, size, "%llu B", (unsigned long long)bytes);
    else if (bytes < (1u << 20)) snprintf(buf, size, "%.2f KiB", (double)bytes / 1024);
    else if (bytes < (1u << 30)) snprintf(buf, size, "%.2f MiB", (double)bytes / (1 << 20));
    else snprintf(buf, size, "%.2f GiB", (double)bytes / (1 << 30));
}

static void format_shape(char *buf, size_t size, const hearth_quantize_tensor *t)
{
    int n = snprintf(buf, size, "%lld", (long long)t->ne[0]);
    for (uint32_t d = 1; d < t->n_dims && n > 0 && (size_t)n < size; d++)
        n += snprintf(buf + n, size - (size_t)n, " x %lld", (long long)t->ne[d]);
}

static bool is_plain_float(hearth_type t)
{
    return t == HEARTH_TYPE_F32 || t == HEARTH_TYPE_F16 || t == HEARTH_TYPE_BF16;
}

static bool on_tensor(void *user, const hearth_quantize_tensor *t)
{
    struct tally *s = user;
    const struct quantize_opts *o = s->opts;
    if (interrupted) return false;
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) n *= (uint64_t)t->ne[d];
    s->n_elems += n;
    s->bytes_in += t->bytes_in;
    s->bytes_out += t->bytes_out;
    s->n_tensors++;

    const char *in = hearth_type_name(t->type_in), *out = hearth_type_name(t->type_out);
    const char *chosen = hearth_type_name(t->type_chosen);
    char shape[96];
    format_shape(shape, sizeof shape, t);
    if (t->type_out != t->type_chosen) {
        s->n_fallback++;
        fprintf(stderr, "hearth: %s: %s: rows of %lld elements do not fill %s's %lld-element "
                        "blocks; using %s\n", CMD, t->name, (long long)t->ne[0], chosen,
                (long long)hearth_type_block_elems(t->type_chosen), out);
    }
    if (!is_plain_float(t->type_in) && t->type_in != t->type_out) {
        if (s->n_requantized++ == 0)
            fprintf(stderr, "hearth: %s: warning: %s holds quantized tensors (%s first); they "
                            "are dequantized and quantized again, which adds the errors of both "
                            "types: convert from an F32, F16 or BF16 file when you can\n",
                    CMD, o->in, in);
    }
    if (o->dry_run) {
        printf("%-32s %-5s -> %-5s %s\n", t->name, in, out, shape);
    } else if (!o->quiet) {
        fprintf(stderr, "hearth: %s: [%*lld/%lld] %-28s %-5s -> %-5s %s\n", CMD,
                t->n_tensors >= 1000 ? 4 : 3, (long long)t->index + 1, (long long)t->n_tensors,
                t->name, in, out, shape);
    }
    return true;
}

static int parse_args(int argc, char **argv, struct quantize_opts *o)
{
    static const struct option longopts[] = {
        {"threads", required_argument, NULL, 't'},
        {"dry-run", no_argument, NULL, 'n'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    optind = 0;
    while ((c = cli_getopt(argc, argv, ":t:nqh", longopts)) != -1) {
        switch (c) {
        case 't':
            if (!cli_parse_int(CMD, "--threads", optarg, 1, 1024, &o->threads)) return CLI_EXIT_USAGE;
            break;
        case 'n': o->dry_run = true; break;
        case 'q': o->quiet = true; break;
        case 'h': usage(stdout); return -1;
        default: return cli_option_error(CMD, c, argv);
        }
    }
    const int n_args = argc - optind;
    if (o->dry_run && n_args == 2) {
        o->in = argv[optind];
        o->type_name = argv[optind + 1];
    } else if (n_args == 3) {
        o->in = argv[optind];
        o->out = argv[optind + 1];
        o->type_name = argv[optind + 2];
    } else {
        return cli_usage_error(CMD, n_args < 3 ? "expected IN OUT TYPE" : "too many arguments");
    }
    if (hearth_ftype_from_name(o->type_name, &o->ftype) != HEARTH_OK)
        return cli_usage_error(CMD, "%s", hearth_last_error());
    if (o->out && strcmp(o->in, o->out) == 0)
        return cli_usage_error(CMD, "the output file must differ from the input file");
    return CLI_EXIT_OK;
}

int cmd_quantize(int argc, char **argv)
{
    struct quantize_opts o = {0};
    int rc = parse_args(argc, argv, &o);
    if (rc < 0) return CLI_EXIT_OK;
    if (rc != CLI_EXIT_OK) return rc;

    struct tally tally = {.opts = &o};
    hearth_quantize_params params;
    hearth_quantize_default_params(&params);
    params.ftype = o.ftype;
    params.n_threads = o.threads;
    params.dry_run = o.dry_run;
    params.progress = on_tensor;
    params.progress_user = &tally;

    struct sigaction sa, old_sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_sa);
    if (old_sa.sa_handler == SIG_IGN) sigaction(SIGINT, &old_sa, NULL);
    const double t0 = now_s();
    hearth_status st = hearth_quantize_model(o.in, o.out, &params);
    const double seconds = now_s() - t0;
    sigaction(SIGINT, &old_sa, NULL);
    if (st == HEARTH_E_INTERRUPTED) {
        cli_error(CMD, "interrupted; %s was not written", o.out ? o.out : "nothing");
        return CLI_EXIT_INTERRUPTED;
    }
    if (st) return cli_fail(CMD, st);

    char in_s[32], out_s[32];
    format_size(in_s, sizeof in_s, tally.bytes_in);
    format_size(out_s, sizeof out_s, tally.bytes_out);
    const double bpw = tally.n_elems ? 8.0 * (double)tally.bytes_out / (double)tally.n_elems : 0;
    char fallbacks[64] = "";
    if (tally.n_fallback)
        snprintf(fallbacks, sizeof fallbacks, ", %lld fallback%s", (long long)tally.n_fallback,
                 tally.n_fallback == 1 ? "" : "s");
    if (o.dry_run) {
        printf("%s: %lld tensors, %s -> %s, %.2f bits per weight%s\n", hearth_ftype_name(o.ftype),
               (long long)tally.n_tensors, in_s, out_s, bpw, fallbacks);
    } else {
        fprintf(stderr, "hearth: %s: wrote %s (%s): %lld tensors, %s -> %s, %.2f bits per "
                        "weight%s, %.1f s\n", CMD, o.out, hearth_ftype_name(o.ftype),
                (long long)tally.n_tensors, in_s, out_s, bpw, fallbacks, seconds);
    }
    return CLI_EXIT_OK;
}

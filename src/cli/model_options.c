/*
 * model_options.c -- turning -m, -hf or --url into a local model file,
 * with the download progress display (a bar on a terminal, a line every
 * tenth otherwise) and Ctrl-C leaving a resumable partial file; the
 * offload options, and the reports of where the layers run and of the
 * memory they take.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "hearth.h"
#include "model_options.h"

void cli_model_source_init(struct cli_model_source *src)
{
    memset(src, 0, sizeof *src);
    hearth_model_default_params(&src->params);
}

void cli_model_normalize_args(int argc, char **argv)
{
    static char long_hf[] = "--hf";
    static char long_ngl[] = "--ngl";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) break;
        if (strcmp(argv[i], "-hf") == 0) argv[i] = long_hf;
        if (strcmp(argv[i], "-ngl") == 0) argv[i] = long_ngl;
    }
}

/* --gpu-layers, --device, --gpu-fallback: 1 handled, 0 not one of them,
 * -1 after a usage error. */
static int offload_option(const char *cmd, struct cli_model_source *src, int opt, const char *arg)
{
    int v;
    switch (opt) {
    case CLI_OPT_DEVICE:
        if (!cli_parse_int(cmd, "--device", arg, 0, 1 << 20, &v)) return -1;
        src->params.device = v;
        break;
    case CLI_OPT_GPU_LAYERS:
        if (!cli_parse_int(cmd, "--gpu-layers", arg, 0, 1 << 20, &v)) return -1;
        src->params.n_gpu_layers = v;
        break;
    case CLI_OPT_GPU_FALLBACK:
        src->params.gpu_fallback = true;
        break;
    default:
        return 0;
    }
    src->offload_given = true;
    return 1;
}

static const char *source_flag(const struct cli_model_source *src)
{
    return src->path ? "-m" : src->hf ? "-hf" : src->url ? "--url" : NULL;
}

int cli_model_option(const char *cmd, struct cli_model_source *src, int opt, const char *arg)
{
    int r = offload_option(cmd, src, opt, arg);
    if (r != 0) return r;
    const char **slot;
    const char *flag;
    switch (opt) {
    case 'm': slot = &src->path; flag = "-m"; break;
    case CLI_OPT_HF: slot = &src->hf; flag = "-hf"; break;
    case CLI_OPT_URL: slot = &src->url; flag = "--url"; break;
    default: return 0;
    }
    const char *before = source_flag(src);
    if (before) {
        cli_usage_error(cmd, "%s: the model was already given with %s; give only one of -m, -hf "
                             "and --url",
                        flag, before);
        return -1;
    }
    if (!*arg) {
        cli_usage_error(cmd, "%s: empty argument", flag);
        return -1;
    }
    *slot = arg;
    return 1;
}

int cli_model_check(const char *cmd, const struct cli_model_source *src, bool required)
{
    if (required && !source_flag(src))
        return cli_usage_error(cmd, "no model given: use -m PATH, -hf OWNER/REPO[:FILE] or --url URL");
    return CLI_EXIT_OK;
}

/* ------------------------------------------------------------------------
 * Progress display
 * ------------------------------------------------------------------------ */

struct progress {
    const char *cmd;
    const char *label;
    bool tty;
    bool quiet;
    bool shown;               /* something was drawn or printed */
    bool drew_complete;       /* the bar was drawn at 100% */
    double start_s, last_draw_s;
    uint64_t start_bytes;
    int last_tenth;           /* plain lines: the last tenth reported */
    uint64_t last_line_bytes; /* plain lines, size unknown */
    char part_label[512];     /* a split model: the part being fetched */
};

static void draw_bar(struct progress *p, uint64_t done, uint64_t total, double t)
{
    char done_s[32], total_s[32], rate_s[48] = "", bar[31];
    double elapsed = t - p->start_s;
    cli_format_bytes(done_s, sizeof done_s, (double)done);
    if (elapsed >= 0.5) {
        cli_format_bytes(rate_s + 2, sizeof rate_s - 2, (double)(done - p->start_bytes) / elapsed);
        memcpy(rate_s, "  ", 2);
        strcat(rate_s, "/s");
    }
    if (total > 0) {
        int filled = (int)((double)done / (double)total * 30.0);
        if (filled > 30) filled = 30;
        memset(bar, '=', (size_t)filled);
        memset(bar + filled, ' ', (size_t)(30 - filled));
        if (filled < 30 && filled > 0) bar[filled - 1] = '>';
        bar[30] = '\0';
        cli_format_bytes(total_s, sizeof total_s, (double)total);
        fprintf(stderr, "\r%s %3d%% [%s] %s / %s%s\033[K", p->label,
                (int)((double)done * 100.0 / (double)total), bar, done_s, total_s, rate_s);
    } else {
        fprintf(stderr, "\r%s %s%s\033[K", p->label, done_s, rate_s);
    }
    fflush(stderr);
}

static bool on_progress(void *user, uint64_t done, uint64_t total)
{
    struct progress *p = user;
    if (cli_interrupted()) return false;
    if (p->quiet) return true;
    if (total == 0 && done == 0) return true;     /* nothing to tell yet */
    double t = cli_now_s();
    if (p->start_s == 0) {
        p->start_s = t;
        p->start_bytes = done;
        p->last_tenth = -1;
        p->last_line_bytes = done;
    }
    if (p->tty) {
        /* at most ten redraws a second, and the final one */
        bool complete = total > 0 && done == total;
        if (complete ? p->drew_complete : t - p->last_draw_s < 0.1) return true;
        p->drew_complete = complete;
        p->last_draw_s = t;
        draw_bar(p, done, total, t);
        p->shown = true;
        return true;
    }
    char done_s[32], total_s[32];
    if (total > 0) {
        int tenth = (int)(done * 10 / total);
        if (tenth == p->last_tenth && p->shown) return true;
        p->last_tenth = tenth;
        cli_format_bytes(done_s, sizeof done_s, (double)done);
        cli_format_bytes(total_s, sizeof total_s, (double)total);
        fprintf(stderr, "hearth: %s: %s: %d%% (%s of %s)\n", p->cmd, p->label, tenth * 10, done_s,
                total_s);
    } else {
        if (done - p->last_line_bytes < (100u << 20)) return true;
        p->last_line_bytes = done;
        cli_format_bytes(done_s, sizeof done_s, (double)done);
        fprintf(stderr, "hearth: %s: %s: %s\n", p->cmd, p->label, done_s);
    }
    p->shown = true;
    return true;
}

/* The next part of a split model: its own progress, under its name. */
static void on_part(void *user, const char *file, int part, int n_parts)
{
    struct progress *p = user;
    if (p->tty && p->shown) fputc('\n', stderr);
    snprintf(p->part_label, sizeof p->part_label, "%s (part %d of %d)", file, part, n_parts);
    p->label = p->part_label;
    p->start_s = 0;
    p->shown = p->drew_complete = false;
}

/* ------------------------------------------------------------------------
 * Resolution
 * ------------------------------------------------------------------------ */

int cli_model_resolve(const char *cmd, const struct cli_model_source *src, char **path_out)
{
    *path_out = NULL;
    if (src->path) {
        *path_out = strdup(src->path);
        return *path_out ? CLI_EXIT_OK : cli_error(cmd, "out of memory");
    }
    if (!src->hf && !src->url) return cli_model_check(cmd, src, true);

    struct progress prog = {.cmd = cmd, .label = src->hf ? src->hf : src->url,
                            .tty = isatty(STDERR_FILENO) != 0, .quiet = src->quiet};
    hearth_download_options opts;
    hearth_download_options_default(&opts);
    opts.progress = on_progress;
    opts.part = on_part;
    opts.progress_user = &prog;
    opts.stall_timeout_s = src->stall_timeout_s;

    cli_interrupt_catch();
    hearth_status st = src->hf ? hearth_download_hf(src->hf, &opts, path_out)
                               : hearth_download_url(src->url, &opts, path_out);
    cli_interrupt_release();

    if (prog.tty && prog.shown) fputc('\n', stderr);
    if (st == HEARTH_OK) return CLI_EXIT_OK;
    if (st == HEARTH_E_INTERRUPTED) {
        cli_error(cmd, "interrupted; the partial download is kept and the next attempt resumes it");
        return CLI_EXIT_INTERRUPTED;
    }
    if (st == HEARTH_E_INVALID) return cli_usage_error(cmd, "%s", hearth_last_error());
    return cli_fail(cmd, st);
}

int cli_model_load(const char *cmd, const struct cli_model_source *src, char **path_out,
                   hearth_model **model_out)
{
    *model_out = NULL;
    int rc = cli_model_resolve(cmd, src, path_out);
    if (rc != CLI_EXIT_OK) return rc;
    hearth_status st = hearth_model_load(*path_out, &src->params, model_out);
    if (st) {
        free(*path_out);
        *path_out = NULL;
        return cli_fail(cmd, st);
    }
    return CLI_EXIT_OK;
}

void cli_model_help(FILE *out)
{
    fprintf(out,
            "Model:\n"
            "  -m, --model FILE         a GGUF model file\n"
            "  -hf, --hf OWNER/REPO[:FILE]  a model from the Hugging Face hub (downloaded\n"
            "                           into the cache on first use)\n"
            "  --url URL                a model from a URL (downloaded into the cache)\n"
            "Offload:\n"
            "  -ngl, --gpu-layers N     offload the last N layers to an OpenCL device\n"
            "                           (more than the model has: the output layer too)\n"
            "  --device N               the device (see hearth devices; default 0)\n"
            "  --gpu-fallback           run on the CPU if offloading fails, saying why\n");
}

/* ------------------------------------------------------------------------
 * Offload report
 * ------------------------------------------------------------------------ */

/* The line for a model whose context or engine runs n_gpu layers on the
 * device, having fallen back to the CPU for run_fallback (or NULL). */
static void format_offload(char *buf, size_t size, const hearth_model *m, int32_t n_gpu,
                           const char *run_fallback)
{
    const int32_t n_layer = hearth_model_n_layer(m);
    const char *reason = hearth_model_gpu_fallback(m);
    if (!reason) reason = run_fallback;
    /* the output layer is only offloaded with every layer */
    if (n_gpu == 0) {
        if (reason) snprintf(buf, size, "all %d layers on the CPU (offload failed: %s)", n_layer, reason);
        else snprintf(buf, size, "all %d layers on the CPU", n_layer);
        return;
    }
    const bool output = hearth_model_output_on_gpu(m);
    char bytes[32];
    cli_format_bytes(bytes, sizeof bytes, (double)hearth_model_gpu_bytes(m));
    int n = snprintf(buf, size, "%d of %d layers%s on OpenCL device %d (%s), %s uploaded", n_gpu,
                     n_layer, output ? " and the output layer" : "", hearth_model_device(m),
                     hearth_model_device_name(m), bytes);
    if (n < 0 || (size_t)n >= size) return;
    const int32_t n_cpu = n_layer - n_gpu;
    if (n_cpu > 0)
        snprintf(buf + n, size - (size_t)n, "; %d layer%s and the output layer on the CPU", n_cpu,
                 n_cpu == 1 ? "" : "s");
    else if (!output)
        snprintf(buf + n, size - (size_t)n, "; the output layer on the CPU");
}

void cli_model_format_offload(char *buf, size_t size, const hearth_model *m,
                              const hearth_context *ctx)
{
    format_offload(buf, size, m, ctx ? hearth_context_n_gpu_layers(ctx) : hearth_model_n_gpu_layers(m),
                   ctx ? hearth_context_gpu_fallback(ctx) : NULL);
}

static void report_offload(FILE *out, const char *cmd, const hearth_model *m, int32_t n_gpu,
                           const char *run_fallback)
{
    const bool asked = hearth_model_n_gpu_layers(m) > 0 || hearth_model_gpu_fallback(m) || run_fallback;
    if (!asked) return;
    char line[1536];
    format_offload(line, sizeof line, m, n_gpu, run_fallback);
    fprintf(out, "hearth: %s: offload: %s\n", cmd, line);
}

void cli_model_report_offload(FILE *out, const char *cmd, const hearth_model *m,
                              const hearth_context *ctx)
{
    report_offload(out, cmd, m, ctx ? hearth_context_n_gpu_layers(ctx) : hearth_model_n_gpu_layers(m),
                   ctx ? hearth_context_gpu_fallback(ctx) : NULL);
}

void cli_model_report_engine_offload(FILE *out, const char *cmd, const hearth_model *m,
                                     const hearth_engine *engine)
{
    report_offload(out, cmd, m, hearth_engine_n_gpu_layers(engine), hearth_engine_gpu_fallback(engine));
}

/* ------------------------------------------------------------------------
 * Memory report
 * ------------------------------------------------------------------------ */

void cli_model_report_memory(FILE *out, const char *cmd, const hearth_model *m, hearth_engine *engine)
{
    hearth_engine_stats es;
    hearth_engine_get_stats(engine, &es);
    char weights[32], file[32], pool[32], avail[48] = "";
    cli_format_bytes(weights, sizeof weights, (double)es.weights_bytes);
    cli_format_bytes(file, sizeof file, (double)hearth_model_size_bytes(m));
    cli_format_bytes(pool, sizeof pool, (double)es.kv_bytes);
    if (es.memory_available) {
        memcpy(avail, ", of ", 5);
        cli_format_bytes(avail + 5, sizeof avail - 16, (double)es.memory_available);
        strcat(avail, " available");
    }
    fprintf(out, "hearth: %s: memory: weights %s resident (%s in the file), KV pool %s%s\n", cmd, weights, file,
            pool, avail);
}

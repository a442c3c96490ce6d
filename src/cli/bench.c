/*
 * bench.c -- `hearth bench -m MODEL`: prompt-processing and generation
 * speed measured the way the common benchmark tool of GGUF engines
 * measures it, so that the two tables can be read side by side.
 *
 * A test is one combination of the listed thread counts, batch sizes and
 * prompt or generation lengths:
 *   ppN  evaluate N random prompt tokens from an empty cache (in batches
 *        of at most n_batch), the logits of the last one computed;
 *   tgN  generate N tokens one at a time from an empty cache, each a
 *        batch of one with its logits.
 * Each test runs once to warm up (the whole prompt, or one generated
 * token), then REPS times from an empty cache; the result is the mean and
 * the sample standard deviation of the REPS speeds, in tokens per second.
 * Token ids are pseudo-random (a fixed seed) with BOS first when the
 * vocabulary puts one in front of a text: no tokenizer is involved.
 *
 * With --parallel B,... the engine runs B sequences at once instead
 * (bench_parallel.c), reported in the batched benchmark tool's layout.
 *
 * With -ngl the model's last layers run on an OpenCL device (the shared
 * model options); each row says which device ran it, since a context
 * that could not set up the device falls back to the CPU only when
 * --gpu-fallback allowed it, and says so on stderr.
 */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_parallel.h"
#include "cli.h"
#include "hearth.h"
#include "model_options.h"
#include "pp_options.h"

#define CMD "bench"
#define MAX_LIST 64
#define DEFAULT_N_PROMPT 512
/* A row running longer than this reports each repetition (as -v does). */
#define PROGRESS_AFTER_NS 2000000000ull
#define DEFAULT_N_GEN 128
#define DEFAULT_N_BATCH 512
#define DEFAULT_REPS 5
#define DEFAULT_PARALLEL_PROMPT 128
#define DEFAULT_PARALLEL_GEN 128

enum output_format { OUTPUT_MD, OUTPUT_CSV, OUTPUT_JSON };

/* A comma-separated option that may also be repeated. */
struct int_list {
    int v[MAX_LIST];
    int n;
};

struct bench_opts {
    struct cli_model_source src;
    struct int_list n_prompt, n_gen, threads, batch;
    struct int_list depth;      /* -d: tokens already in the cache */
    struct int_list parallel;   /* --parallel: batch sizes of sequences */
    int shared_prefix;          /* --shared-prefix N */
    int kv_block;               /* --kv-block N */
    bool reps_given;
    int parallel_batch;         /* -b with --parallel; 0: every prompt in one step */
    int chunk_size;             /* --chunk-size (recurrent models); 0: the default */
    int reps;
    hearth_type cache_type;
    enum output_format format;
    bool quiet;
    struct cli_pipeline_opts pp; /* --pp, --pp-timeout */
};

/* One row of the result table. */
struct result {
    int n_prompt, n_gen, n_threads, n_batch;
    int n_depth;             /* tokens in the cache before the test */
    int n_gpu_layers;        /* layers the test ran on the device */
    char test_time[32];
    double *samples_ns;
    int n_samples;
    double avg_ns, stddev_ns, avg_ts, stddev_ts;
};

/* What every row shares. */
struct bench_info {
    const char *model_path;
    const char *model_desc;
    uint64_t model_bytes, n_params;
    char backend[64];
    const char *kernels;
    char cpu_info[128];
    hearth_type cache_type;
    int n_gpu_layers;        /* as asked for (-ngl), as the common tool shows it */
    int device;              /* the device's index, -1 when nothing is offloaded */
    const char *device_name; /* NULL when nothing is offloaded */
};

static void usage(FILE *out)
{
    fputs("usage: hearth bench -m MODEL [-p N,...] [-n N,...] [-d N,...] [-t N,...]\n"
          "                    [-b N,...] [-r REPS] [-o md|csv|json] [--cache-type TYPE] [-q]\n"
          "                    [-ngl N] [--device N] [--gpu-fallback] [--pp N]\n"
          "       hearth bench -m MODEL --parallel B,... [-p P] [-n G] [-t N] [-b N]\n"
          "                    [--shared-prefix N] [--kv-block N] [-r REPS] [-o md|json]\n"
          "\n"
          "Measure prompt processing (ppN: N prompt tokens at once) and generation\n"
          "(tgN: N tokens one at a time) from an empty cache (or after -d tokens),\n"
          "REPS times after a warm-up, for every combination of the values listed.\n"
          "The table goes to standard output; progress to standard error.\n"
          "  -m, --model FILE        the model (or -hf OWNER/REPO[:FILE], --url URL)\n"
          "  -p, --n-prompt N,...    prompt lengths (default 512; 0: no pp test)\n"
          "  -n, --n-gen N,...       generation lengths (default 128; 0: no tg test)\n"
          "  -d, --n-depth N,...     tokens already in the cache when each test starts\n"
          "                          (default 0): speed at that depth of context\n"
          "  -t, --threads N,...     thread counts (default: one per processor)\n"
          "  -b, --batch-size N,...  most tokens per forward pass (default 512)\n"
          "  --chunk-size N          recurrent models: tokens per chunk of the prefill (default 1)\n"
          "  -r, --repetitions N     measured runs per test (default 5)\n"
          "  -o, --output FORMAT     md (default), csv or json\n"
          "      --cache-type TYPE   KV cache: f16 (default), f32 or q8_0\n"
          "  -q, --quiet             no progress on standard error\n"
          "  -ngl, --gpu-layers N    offload the last N layers to an OpenCL device\n"
          "                          (more than the model has: the output layer too)\n"
          "  --device N              the device (see hearth devices; default 0)\n"
          "  --gpu-fallback          run on the CPU if offloading fails, saying why\n"
          "  --parallel B,...        B sequences at once, each a prompt of P tokens (-p,\n"
          "                          default 128) and G generated (-n, default 128):\n"
          "                          prefill and aggregate decode speed per B\n"
          "  --shared-prefix N       with --parallel: B requests sharing an N-token\n"
          "                          prefix (questions of -p tokens): the prefix cache\n"
          "  --kv-block N            with --parallel: positions per KV block (default 64)\n",
          out);
    cli_pipeline_help(out);
}

/* ------------------------------------------------------------------------
 * Options
 * ------------------------------------------------------------------------ */

static bool parse_list(const char *opt, const char *arg, int min, int max, struct int_list *list)
{
    char buf[32];
    const char *p = arg;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0 || len >= sizeof buf) {
            cli_usage_error(CMD, "%s: expected comma-separated integers, got '%s'", opt, arg);
            return false;
        }
        memcpy(buf, p, len);
        buf[len] = '\0';
        if (list->n == MAX_LIST) {
            cli_usage_error(CMD, "%s: more than %d values", opt, MAX_LIST);
            return false;
        }
        if (!cli_parse_int(CMD, opt, buf, min, max, &list->v[list->n])) return false;
        list->n++;
        if (!comma) return true;
        p = comma + 1;
    }
}

static int parse_args(int argc, char **argv, struct bench_opts *o)
{
    enum { OPT_CACHE_TYPE = 0x2000, OPT_PARALLEL, OPT_SHARED_PREFIX, OPT_KV_BLOCK, OPT_CHUNK_SIZE };
    static const struct option longopts[] = {
        CLI_MODEL_LONG_OPTIONS,
        {"n-prompt", required_argument, NULL, 'p'},
        {"n-gen", required_argument, NULL, 'n'},
        {"n-depth", required_argument, NULL, 'd'},
        {"threads", required_argument, NULL, 't'},
        {"batch-size", required_argument, NULL, 'b'},
        {"repetitions", required_argument, NULL, 'r'},
        {"output", required_argument, NULL, 'o'},
        {"cache-type", required_argument, NULL, OPT_CACHE_TYPE},
        {"parallel", required_argument, NULL, OPT_PARALLEL},
        {"shared-prefix", required_argument, NULL, OPT_SHARED_PREFIX},
        {"kv-block", required_argument, NULL, OPT_KV_BLOCK},
        {"chunk-size", required_argument, NULL, OPT_CHUNK_SIZE},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        CLI_PIPELINE_LONG_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    cli_model_normalize_args(argc, argv);
    optind = 0;
    int c;
    while ((c = cli_getopt(argc, argv, ":m:p:n:d:t:b:r:o:qh", longopts)) != -1) {
        int r = cli_model_option(CMD, &o->src, c, optarg);
        if (r == 0) r = cli_pipeline_option(CMD, &o->pp, c, optarg);
        if (r < 0) return CLI_EXIT_USAGE;
        if (r > 0) continue;
        switch (c) {
        case 'p':
            if (!parse_list("--n-prompt", optarg, 0, 1 << 20, &o->n_prompt)) return CLI_EXIT_USAGE;
            break;
        case 'n':
            if (!parse_list("--n-gen", optarg, 0, 1 << 20, &o->n_gen)) return CLI_EXIT_USAGE;
            break;
        case 'd':
            if (!parse_list("--n-depth", optarg, 0, 1 << 20, &o->depth)) return CLI_EXIT_USAGE;
            break;
        case 't':
            if (!parse_list("--threads", optarg, 1, 1024, &o->threads)) return CLI_EXIT_USAGE;
            break;
        case 'b':
            if (!parse_list("--batch-size", optarg, 1, 1 << 20, &o->batch)) return CLI_EXIT_USAGE;
            break;
        case OPT_CHUNK_SIZE:
            if (!cli_parse_int(CMD, "--chunk-size", optarg, 1, 4096, &o->chunk_size)) return CLI_EXIT_USAGE;
            break;
        case 'r':
            if (!cli_parse_int(CMD, "--repetitions", optarg, 1, 1000, &o->reps))
                return CLI_EXIT_USAGE;
            o->reps_given = true;
            break;
        case OPT_PARALLEL:
            if (!parse_list("--parallel", optarg, 1, 4096, &o->parallel)) return CLI_EXIT_USAGE;
            break;
        case OPT_KV_BLOCK:
            if (!cli_parse_int(CMD, "--kv-block", optarg, 16, 1024, &o->kv_block)) return CLI_EXIT_USAGE;
            if (o->kv_block & (o->kv_block - 1))
                return cli_usage_error(CMD, "--kv-block: expected a power of two from 16 to 1024, got %d",
                                       o->kv_block);
            break;
        case OPT_SHARED_PREFIX:
            if (!cli_parse_int(CMD, "--shared-prefix", optarg, 1, 1 << 20, &o->shared_prefix))
                return CLI_EXIT_USAGE;
            break;
        case 'o':
            if (strcmp(optarg, "md") == 0) o->format = OUTPUT_MD;
            else if (strcmp(optarg, "csv") == 0) o->format = OUTPUT_CSV;
            else if (strcmp(optarg, "json") == 0) o->format = OUTPUT_JSON;
            else return cli_usage_error(CMD, "--output: expected md, csv or json, got '%s'", optarg);
            break;
        case OPT_CACHE_TYPE:
            if (hearth_type_from_name(optarg, &o->cache_type) != HEARTH_OK ||
                (o->cache_type != HEARTH_TYPE_F16 && o->cache_type != HEARTH_TYPE_F32 &&
                 o->cache_type != HEARTH_TYPE_Q8_0))
                return cli_usage_error(CMD, "--cache-type: expected f16, f32 or q8_0, got '%s'",
                                       optarg);
            break;
        case 'q': o->quiet = true; break;
        case 'h': usage(stdout); return -1;
        default: return cli_option_error(CMD, c, argv);
        }
    }
    if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    int rc = cli_model_check(CMD, &o->src, true);
    if (rc != CLI_EXIT_OK) return rc;
    if (o->shared_prefix && !o->parallel.n)
        return cli_usage_error(CMD, "--shared-prefix needs --parallel");
    if (o->kv_block && !o->parallel.n) return cli_usage_error(CMD, "--kv-block needs --parallel");
    if (o->parallel.n) {
        if (o->n_prompt.n > 1 || o->n_gen.n > 1 || o->threads.n > 1 || o->batch.n > 1)
            return cli_usage_error(CMD, "--parallel takes one value of -p, -n, -t and -b");
        if (o->depth.n) return cli_usage_error(CMD, "--parallel does not take -d (--shared-prefix "
                                                    "gives the sequences a context in common)");
        if (o->format == OUTPUT_CSV) return cli_usage_error(CMD, "--parallel prints md or json");
        if (o->n_prompt.n == 0) o->n_prompt.v[o->n_prompt.n++] = DEFAULT_PARALLEL_PROMPT;
        if (o->n_gen.n == 0) o->n_gen.v[o->n_gen.n++] = DEFAULT_PARALLEL_GEN;
        if (o->n_prompt.v[0] == 0 && !o->shared_prefix)
            return cli_usage_error(CMD, "--parallel needs prompts of at least one token (-p)");
        if (!o->reps_given) o->reps = 1;
        o->parallel_batch = o->batch.n ? o->batch.v[0] : 0;
    }
    if (o->n_prompt.n == 0) o->n_prompt.v[o->n_prompt.n++] = DEFAULT_N_PROMPT;
    if (o->n_gen.n == 0) o->n_gen.v[o->n_gen.n++] = DEFAULT_N_GEN;
    if (o->threads.n == 0) o->threads.v[o->threads.n++] = 0;
    if (o->batch.n == 0) o->batch.v[o->batch.n++] = DEFAULT_N_BATCH;
    if (o->depth.n == 0) o->depth.v[o->depth.n++] = 0;
    return CLI_EXIT_OK;
}

/* ------------------------------------------------------------------------
 * Measuring
 * ------------------------------------------------------------------------ */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct token_source {
    uint64_t state;
    int32_t n_vocab;
    int32_t bos;             /* HEARTH_TOKEN_NONE when no BOS goes first */
};

static int32_t random_token(struct token_source *s)
{
    return (int32_t)(bench_next_random(&s->state) % (uint64_t)s->n_vocab);
}

/* n random tokens through the model at once; the first is BOS where the
 * model wants one and the tokens begin the context (at_start). */
static hearth_status run_prompt(hearth_context *ctx, struct token_source *s, int32_t *tokens,
                                int n, bool at_start)
{
    for (int i = 0; i < n; i++) tokens[i] = random_token(s);
    if (at_start && s->bos != HEARTH_TOKEN_NONE) tokens[0] = s->bos;
    return hearth_eval(ctx, tokens, n, 1);
}

static hearth_status run_generation(hearth_context *ctx, struct token_source *s, int n,
                                    bool at_start)
{
    int32_t token = at_start && s->bos != HEARTH_TOKEN_NONE ? s->bos : random_token(s);
    for (int i = 0; i < n; i++) {
        hearth_status st = hearth_eval(ctx, &token, 1, 1);
        if (st) return st;
        token = random_token(s);
    }
    return HEARTH_OK;
}

static void utc_now(char *buf, size_t size)
{
    time_t t = time(NULL);
    struct tm tm;
    if (gmtime_r(&t, &tm)) strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
    else snprintf(buf, size, "?");
}

static void summarise(struct result *r)
{
    const double n_tokens = r->n_prompt + r->n_gen;
    double sum_ns = 0, sum_ts = 0;
    for (int i = 0; i < r->n_samples; i++) {
        sum_ns += r->samples_ns[i];
        sum_ts += n_tokens * 1e9 / r->samples_ns[i];
    }
    r->avg_ns = sum_ns / r->n_samples;
    r->avg_ts = sum_ts / r->n_samples;
    double var_ns = 0, var_ts = 0;
    for (int i = 0; i < r->n_samples; i++) {
        double ts = n_tokens * 1e9 / r->samples_ns[i];
        var_ns += (r->samples_ns[i] - r->avg_ns) * (r->samples_ns[i] - r->avg_ns);
        var_ts += (ts - r->avg_ts) * (ts - r->avg_ts);
    }
    r->stddev_ns = r->n_samples > 1 ? sqrt(var_ns / (r->n_samples - 1)) : 0;
    r->stddev_ts = r->n_samples > 1 ? sqrt(var_ts / (r->n_samples - 1)) : 0;
}

/* The positions a test's context holds: its depth, prompt and generation. */
static int row_tokens(const struct result *r)
{
    return r->n_depth + r->n_prompt + r->n_gen;
}

/* Run one test into r (n_prompt or n_gen set, the other 0). */
static hearth_status run_test(const hearth_model *model, const struct bench_opts *o,
                              struct result *r, struct token_source *tokens_src,
                              int *n_threads_used)
{
    hearth_context_params cp;
    hearth_context_default_params(&cp);
    cp.n_ctx = row_tokens(r);
    cp.n_batch = r->n_batch;
    cp.n_threads = r->n_threads;
    cp.cache_type = o->cache_type;
    cp.chunk_size = o->chunk_size;
    hearth_context *ctx;
    hearth_status st = hearth_context_new(model, &cp, &ctx);
    if (st) return st;
    hearth_context_set_abort(ctx, cli_should_abort, NULL);
    *n_threads_used = hearth_context_n_threads(ctx);
    r->n_gpu_layers = hearth_context_n_gpu_layers(ctx);
    /* Not silent even with -q: this row ran on the CPU instead. */
    if (hearth_context_gpu_fallback(ctx)) cli_model_report_offload(stderr, CMD, model, ctx);
    int32_t *tokens = NULL;
    const int n_tokens = r->n_depth > r->n_prompt ? r->n_depth : r->n_prompt;
    if (n_tokens > 0) {
        tokens = malloc((size_t)n_tokens * sizeof *tokens);
        if (!tokens) st = HEARTH_E_NOMEM;
    }
    r->samples_ns = calloc((size_t)o->reps, sizeof *r->samples_ns);
    if (!r->samples_ns) st = HEARTH_E_NOMEM;
    utc_now(r->test_time, sizeof r->test_time);

    const uint64_t row_start = now_ns();
    /* The depth is filled once, not timed; every run (the warm-up too)
     * starts from it.  A snapshot lets a recurrent model return there. */
    const bool at_start = r->n_depth == 0;
    if (!st && r->n_depth > 0) {
        st = run_prompt(ctx, tokens_src, tokens, r->n_depth, true);
        if (!st) st = hearth_context_snapshot(ctx);
        if (!st && (cli_verbose || (!o->quiet && now_ns() - row_start > PROGRESS_AFTER_NS)))
            fprintf(stderr, "hearth: %s:   depth of %d tokens filled in %.3f ms\n", CMD,
                    r->n_depth, (double)(now_ns() - row_start) / 1e6);
    }
    if (!st) st = r->n_prompt > 0 ? run_prompt(ctx, tokens_src, tokens, r->n_prompt, at_start)
                                  : run_generation(ctx, tokens_src, 1, at_start);
    for (int rep = 0; rep < o->reps && !st; rep++) {
        st = hearth_context_rewind(ctx, r->n_depth);
        if (st) break;
        uint64_t t0 = now_ns();
        st = r->n_prompt > 0 ? run_prompt(ctx, tokens_src, tokens, r->n_prompt, at_start)
                             : run_generation(ctx, tokens_src, r->n_gen, at_start);
        uint64_t t1 = now_ns();
        r->samples_ns[rep] = (double)(t1 > t0 ? t1 - t0 : 1);
        r->n_samples = rep + 1;
        /* a long row says how far it is, so that it is not taken for a hang */
        if (!st && (cli_verbose || (!o->quiet && t1 - row_start > PROGRESS_AFTER_NS)))
            fprintf(stderr, "hearth: %s:   run %d/%d: %.3f ms\n", CMD, rep + 1, o->reps,
                    r->samples_ns[rep] / 1e6);
    }
    if (!st) summarise(r);
    free(tokens);
    hearth_context_free(ctx);
    return st;
}

/* ------------------------------------------------------------------------
 * Output
 * ------------------------------------------------------------------------ */

/* ppN or tgN, with " @ dD" after a depth (as the common tool names it). */
static void format_test_name(char *buf, size_t size, const struct result *r)
{
    int n = r->n_prompt > 0 ? snprintf(buf, size, "pp%d", r->n_prompt)
                            : snprintf(buf, size, "tg%d", r->n_gen);
    if (r->n_depth > 0 && n > 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, " @ d%d", r->n_depth);
}

static void format_model_size(char *buf, size_t size, uint64_t bytes)
{
    if (bytes < (1ull << 30)) snprintf(buf, size, "%.2f MiB", (double)bytes / (1 << 20));
    else snprintf(buf, size, "%.2f GiB", (double)bytes / (1 << 30));
}

static void format_params(char *buf, size_t size, uint64_t n)
{
    if (n < 1000000000ull) snprintf(buf, size, "%.2f M", (double)n / 1e6);
    else snprintf(buf, size, "%.2f B", (double)n / 1e9);
}

static const char *cache_type_name(hearth_type t)
{
    return t == HEARTH_TYPE_F32 ? "f32" : t == HEARTH_TYPE_Q8_0 ? "q8_0" : "f16";
}

enum column { COL_MODEL, COL_SIZE, COL_PARAMS, COL_BACKEND, COL_NGL, COL_DEVICE, COL_THREADS,
              COL_BATCH, COL_CACHE, COL_TEST, COL_TS, N_COLUMNS };

struct column_info {
    const char *title;
    int width;
    bool right;   /* numbers are right-aligned */
};

static const struct column_info columns[N_COLUMNS] = {
    [COL_MODEL] = {"model", 30, false},      [COL_SIZE] = {"size", 10, true},
    [COL_PARAMS] = {"params", 10, true},     [COL_BACKEND] = {"backend", 10, false},
    [COL_NGL] = {"ngl", 3, true},            [COL_DEVICE] = {"device", 6, false},
    [COL_THREADS] = {"threads", 7, true},
    [COL_BATCH] = {"n_batch", 7, true},      [COL_CACHE] = {"type_k", 6, false},
    [COL_TEST] = {"test", 13, true},         [COL_TS] = {"t/s", 20, true},
};

static void cell(enum column c, const struct bench_info *info, const struct result *r, char *buf,
                 size_t size)
{
    switch (c) {
    case COL_MODEL: snprintf(buf, size, "%s", info->model_desc); break;
    case COL_SIZE: format_model_size(buf, size, info->model_bytes); break;
    case COL_PARAMS: format_params(buf, size, info->n_params); break;
    case COL_BACKEND:
        if (r->n_gpu_layers > 0) snprintf(buf, size, "OpenCL+%s", info->backend);
        else snprintf(buf, size, "%s", info->backend);
        break;
    case COL_NGL: snprintf(buf, size, "%d", info->n_gpu_layers); break;
    case COL_DEVICE:
        if (r->n_gpu_layers > 0) snprintf(buf, size, "%d: %s", info->device, info->device_name);
        else snprintf(buf, size, "CPU");
        break;
    case COL_THREADS: snprintf(buf, size, "%d", r->n_threads); break;
    case COL_BATCH: snprintf(buf, size, "%d", r->n_batch); break;
    case COL_CACHE: snprintf(buf, size, "%s", cache_type_name(info->cache_type)); break;
    case COL_TEST: format_test_name(buf, size, r); break;
    case COL_TS: snprintf(buf, size, "%.2f \xc2\xb1 %.2f", r->avg_ts, r->stddev_ts); break;
    case N_COLUMNS: buf[0] = '\0'; break;
    }
}

static int max_int(int a, int b)
{
    return a > b ? a : b;
}

/* Display width of UTF-8 text: one column per character. */
static int text_width(const char *s)
{
    int w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80) w++;
    return w;
}

static void print_padded(const char *text, int width, bool right)
{
    int pad = width - text_width(text);
    if (pad < 0) pad = 0;
    if (right) printf(" %*s%s |", pad, "", text);
    else printf(" %s%*s |", text, pad, "");
}

static void print_markdown(const struct bench_opts *o, const struct bench_info *info,
                           const struct result *rows, int n_rows)
{
    bool shown[N_COLUMNS];
    for (int c = 0; c < N_COLUMNS; c++) shown[c] = true;
    shown[COL_NGL] = info->n_gpu_layers > 0;
    shown[COL_DEVICE] = info->n_gpu_layers > 0;
    shown[COL_BATCH] = !(o->batch.n == 1 && o->batch.v[0] == DEFAULT_N_BATCH);
    shown[COL_CACHE] = info->cache_type != HEARTH_TYPE_F16;
    int width[N_COLUMNS];
    char buf[256];
    for (int c = 0; c < N_COLUMNS; c++) {
        width[c] = max_int(columns[c].width, text_width(columns[c].title));
        for (int i = 0; i < n_rows; i++) {
            cell((enum column)c, info, &rows[i], buf, sizeof buf);
            width[c] = max_int(width[c], text_width(buf));
        }
    }
    putchar('|');
    for (int c = 0; c < N_COLUMNS; c++)
        if (shown[c]) print_padded(columns[c].title, width[c], columns[c].right);
    printf("\n|");
    for (int c = 0; c < N_COLUMNS; c++) {
        if (!shown[c]) continue;
        putchar(' ');
        for (int k = 0; k < width[c] - (columns[c].right ? 1 : 0); k++) putchar('-');
        printf("%s |", columns[c].right ? ":" : "");
    }
    putchar('\n');
    for (int i = 0; i < n_rows; i++) {
        putchar('|');
        for (int c = 0; c < N_COLUMNS; c++) {
            if (!shown[c]) continue;
            cell((enum column)c, info, &rows[i], buf, sizeof buf);
            print_padded(buf, width[c], columns[c].right);
        }
        putchar('\n');
    }
}

/* Text as a quoted CSV field (quotes doubled). */
static void csv_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"') putchar('"');
        putchar(*s);
    }
    putchar('"');
}

/* Text as a JSON string. */
static void json_string(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p == '\n') fputs("\\n", stdout);
        else if (*p == '\t') fputs("\\t", stdout);
        else if (*p < 0x20 || *p == 0x7f) printf("\\u%04x", *p);
        else putchar(*p);
    }
    putchar('"');
}

/* The fields of one row, shared by CSV and JSON: name and value, strings
 * quoted.  The names are those of the common benchmark tool where it has
 * the same quantity. */
struct field {
    const char *name;
    bool is_string;
    char value[160];
};

#define N_FIELDS 24

static void row_fields(const struct bench_info *info, const struct result *r,
                       struct field f[N_FIELDS])
{
    int k = 0;
#define FIELD(nm, str, ...) \
    do { \
        f[k].name = nm; \
        f[k].is_string = str; \
        snprintf(f[k].value, sizeof f[k].value, __VA_ARGS__); \
        k++; \
    } while (0)
    FIELD("hearth_version", true, "%s", hearth_version());
    FIELD("cpu_info", true, "%s", info->cpu_info);
    FIELD("backends", true, "%s", r->n_gpu_layers > 0 ? "OpenCL,CPU" : "CPU");
    FIELD("kernels", true, "%s", info->kernels);
    FIELD("gpu_info", true, "%s", r->n_gpu_layers > 0 ? info->device_name : "");
    FIELD("model_filename", true, "%s", info->model_path);
    FIELD("model_type", true, "%s", info->model_desc);
    FIELD("model_size", false, "%llu", (unsigned long long)info->model_bytes);
    FIELD("model_n_params", false, "%llu", (unsigned long long)info->n_params);
    FIELD("n_batch", false, "%d", r->n_batch);
    FIELD("n_threads", false, "%d", r->n_threads);
    FIELD("type_k", true, "%s", cache_type_name(info->cache_type));
    FIELD("type_v", true, "%s", cache_type_name(info->cache_type));
    FIELD("n_gpu_layers", false, "%d", info->n_gpu_layers);
    FIELD("main_gpu", false, "%d", r->n_gpu_layers > 0 ? info->device : -1);
    FIELD("n_prompt", false, "%d", r->n_prompt);
    FIELD("n_gen", false, "%d", r->n_gen);
    FIELD("n_depth", false, "%d", r->n_depth);
    char test[48];
    format_test_name(test, sizeof test, r);
    FIELD("test", true, "%s", test);
    FIELD("test_time", true, "%s", r->test_time);
    FIELD("avg_ns", false, "%.0f", r->avg_ns);
    FIELD("stddev_ns", false, "%.0f", r->stddev_ns);
    FIELD("avg_ts", false, "%.6f", r->avg_ts);
    FIELD("stddev_ts", false, "%.6f", r->stddev_ts);
#undef FIELD
}

static void print_csv(const struct bench_info *info, const struct result *rows, int n_rows)
{
    struct field f[N_FIELDS];
    for (int i = 0; i < n_rows; i++) {
        row_fields(info, &rows[i], f);
        if (i == 0)
            for (int k = 0; k < N_FIELDS; k++) printf("%s%s", k ? "," : "", f[k].name);
        if (i == 0) putchar('\n');
        for (int k = 0; k < N_FIELDS; k++) {
            if (k) putchar(',');
            csv_string(f[k].value);
        }
        putchar('\n');
    }
}

static void print_json(const struct bench_info *info, const struct result *rows, int n_rows)
{
    struct field f[N_FIELDS];
    printf("[");
    for (int i = 0; i < n_rows; i++) {
        const struct result *r = &rows[i];
        row_fields(info, r, f);
        printf("%s\n  {\n", i ? "," : "");
        for (int k = 0; k < N_FIELDS; k++) {
            printf("    \"%s\": ", f[k].name);
            if (f[k].is_string) json_string(f[k].value);
            else fputs(f[k].value, stdout);
            printf(",\n");
        }
        printf("    \"samples_ns\": [");
        for (int s = 0; s < r->n_samples; s++) printf("%s%.0f", s ? ", " : " ", r->samples_ns[s]);
        printf(" ],\n    \"samples_ts\": [");
        for (int s = 0; s < r->n_samples; s++)
            printf("%s%.6f", s ? ", " : " ", (r->n_prompt + r->n_gen) * 1e9 / r->samples_ns[s]);
        printf(" ]\n  }");
    }
    printf("\n]\n");
}

/* ------------------------------------------------------------------------
 * The command
 * ------------------------------------------------------------------------ */

/* The processor's name from /proc/cpuinfo where there is one. */
static void read_cpu_info(char *buf, size_t size)
{
    buf[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *colon = strchr(line, ':');
        if (!colon) continue;
        colon++;
        while (*colon == ' ' || *colon == '\t') colon++;
        snprintf(buf, size, "%s", colon);
        buf[strcspn(buf, "\n")] = '\0';
        break;
    }
    fclose(f);
}

static void fill_info(struct bench_info *info, const struct bench_opts *o, const char *path,
                      const hearth_model *model, const char *kernels)
{
    memset(info, 0, sizeof *info);
    info->model_path = path;
    info->model_desc = hearth_model_desc(model);
    info->model_bytes = hearth_model_size_bytes(model);
    info->n_params = hearth_model_n_params(model);
    info->kernels = kernels;
    snprintf(info->backend, sizeof info->backend, "CPU/%s", kernels);
    read_cpu_info(info->cpu_info, sizeof info->cpu_info);
    info->cache_type = o->cache_type;
    info->n_gpu_layers = o->src.params.n_gpu_layers;
    info->device = hearth_model_device(model);
    info->device_name = hearth_model_device_name(model);
}

/* Every test in the order the common tool runs them: for each batch size,
 * thread count and depth, the prompt tests and then the generation tests. */
static int plan_tests(const struct bench_opts *o, struct result **rows_out)
{
    int n = 0;
    const int per = o->n_prompt.n + o->n_gen.n;
    struct result *rows =
        calloc((size_t)(o->batch.n * o->threads.n * o->depth.n * per), sizeof *rows);
    if (!rows) return -1;
    for (int b = 0; b < o->batch.n; b++) {
        for (int t = 0; t < o->threads.n; t++) {
            for (int d = 0; d < o->depth.n; d++) {
                const struct result base = {.n_threads = o->threads.v[t], .n_batch = o->batch.v[b],
                                            .n_depth = o->depth.v[d]};
                for (int i = 0; i < o->n_prompt.n; i++) {
                    if (o->n_prompt.v[i] == 0) continue;
                    rows[n] = base;
                    rows[n++].n_prompt = o->n_prompt.v[i];
                }
                for (int i = 0; i < o->n_gen.n; i++) {
                    if (o->n_gen.v[i] == 0) continue;
                    rows[n] = base;
                    rows[n++].n_gen = o->n_gen.v[i];
                }
            }
        }
    }
    *rows_out = rows;
    return n;
}

/* A test longer than the model's context measures nothing the model would
 * do, and takes minutes on its way to failing: refused before it runs. */
static int check_fits(const hearth_model *model, int n_tokens)
{
    const int32_t n_ctx = hearth_model_n_ctx_train(model);
    if (n_ctx > 0 && n_tokens > n_ctx)
        return cli_usage_error(CMD, "a test of %d tokens does not fit the model's context of %d "
                                    "tokens; give smaller -p and -n values", n_tokens, (int)n_ctx);
    return CLI_EXIT_OK;
}

/* --parallel: load the model and hand over to bench_parallel.c. */
static int run_parallel(struct bench_opts *o)
{
    o->src.quiet = o->quiet;
    char *path = NULL;
    int rc = cli_model_resolve(CMD, &o->src, &path);
    if (rc != CLI_EXIT_OK) return rc;
    hearth_model *model = NULL;
    hearth_pipeline *pipe = NULL;
    rc = cli_pipeline_open(CMD, &o->pp, &o->src, &pipe);
    hearth_status st = rc == CLI_EXIT_OK ? hearth_model_load(path, &o->src.params, &model) : HEARTH_OK;
    free(path);
    if (rc == CLI_EXIT_OK && st) rc = cli_fail(CMD, st);
    const int n_threads = o->threads.v[0] > 0 ? o->threads.v[0] : (int)sysconf(_SC_NPROCESSORS_ONLN);
    /* In a pipeline the other ranks run their layers for rank 0's
     * engines, which it makes and frees for each B. */
    struct cli_context_opts copts = {.n_batch = o->parallel_batch, .n_threads = n_threads,
                                     .cache_type = o->cache_type};
    bool served = false;
    if (rc == CLI_EXIT_OK) rc = cli_pipeline_start(CMD, pipe, &o->pp, &copts, model, &served);
    if (rc == CLI_EXIT_OK && !served)
        rc = check_fits(model, o->shared_prefix + o->n_prompt.v[0] + o->n_gen.v[0]);
    if (rc != CLI_EXIT_OK || served) {
        hearth_model_free(model);
        cli_pipeline_close(pipe, rc);
        return rc;
    }
    if (!o->quiet || hearth_model_gpu_fallback(model)) cli_model_report_offload(stderr, CMD, model, NULL);
    struct parallel_opts po = {
        .parallel = o->parallel.v,
        .n_parallel = o->parallel.n,
        .n_prompt = o->n_prompt.v[0],
        .n_gen = o->n_gen.v[0],
        .n_threads = n_threads,
        .n_batch = o->parallel_batch,
        .reps = o->reps,
        .shared_prefix = o->shared_prefix,
        .kv_block = o->kv_block,
        .cache_type = o->cache_type,
        .json = o->format == OUTPUT_JSON,
        .quiet = o->quiet,
    };
    cli_interrupt_catch();
    if (pipe && !o->quiet) cli_pipeline_report(stderr, CMD, pipe, model);
    rc = bench_parallel(CMD, model, &po);
    cli_interrupt_release();
    hearth_model_free(model);
    cli_pipeline_close(pipe, rc);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    struct bench_opts o;
    memset(&o, 0, sizeof o);
    cli_model_source_init(&o.src);
    o.reps = DEFAULT_REPS;
    o.cache_type = HEARTH_TYPE_F16;
    int rc = parse_args(argc, argv, &o);
    if (rc < 0) return CLI_EXIT_OK;
    if (rc != CLI_EXIT_OK) return rc;

    if (o.parallel.n) return run_parallel(&o);
    struct result *rows = NULL;
    const int n_rows = plan_tests(&o, &rows);
    if (n_rows < 0) return cli_error(CMD, "out of memory");
    if (n_rows == 0) {
        free(rows);
        return cli_usage_error(CMD, "nothing to measure: every -p and -n value is 0");
    }
    /* The kernel path goes into every row; an unusable HEARTH_CPU is an
     * error before anything is loaded. */
    const char *kernels;
    hearth_status st = hearth_cpu_kernels(&kernels);
    if (st) {
        free(rows);
        return cli_fail(CMD, st);
    }
    o.src.quiet = o.quiet;
    char *path = NULL;
    rc = cli_model_resolve(CMD, &o.src, &path);
    if (rc != CLI_EXIT_OK) {
        free(rows);
        return rc;
    }
    hearth_model *model = NULL;
    hearth_pipeline *pipe = NULL;
    rc = cli_pipeline_open(CMD, &o.pp, &o.src, &pipe);
    st = rc == CLI_EXIT_OK ? hearth_model_load(path, &o.src.params, &model) : HEARTH_OK;
    if (rc == CLI_EXIT_OK && st) rc = cli_fail(CMD, st);
    /* the other ranks of a pipeline run their layers for rank 0's rows */
    struct cli_context_opts copts = {
        .n_batch = o.batch.n ? o.batch.v[0] : 0, .n_threads = o.threads.n ? o.threads.v[0] : 0,
        .cache_type = o.cache_type, .chunk_size = o.chunk_size,
    };
    bool served = false;
    if (rc == CLI_EXIT_OK) rc = cli_pipeline_start(CMD, pipe, &o.pp, &copts, model, &served);
    if (rc != CLI_EXIT_OK || served) {
        hearth_model_free(model);
        cli_pipeline_close(pipe, rc);
        free(path);
        free(rows);
        return rc;
    }
    int longest = 0;
    for (int i = 0; i < n_rows; i++)
        if (row_tokens(&rows[i]) > longest) longest = row_tokens(&rows[i]);
    rc = check_fits(model, longest);
    if (rc != CLI_EXIT_OK) {
        hearth_model_free(model);
        cli_pipeline_close(pipe, rc);
        free(path);
        free(rows);
        return rc;
    }
    /* Where the layers run; a fallback to the CPU is said even with -q. */
    if (!o.quiet || hearth_model_gpu_fallback(model))
        cli_model_report_offload(stderr, CMD, model, NULL);
    /* and over which ranks */
    if (!o.quiet) cli_pipeline_report(stderr, CMD, pipe, model);
    struct bench_info info;
    fill_info(&info, &o, path, model, kernels);
    struct token_source tokens = {.state = 1, .n_vocab = hearth_model_n_vocab(model),
                                  .bos = bench_bos(model)};

    cli_interrupt_catch();

    for (int i = 0; i < n_rows && !st; i++) {
        struct result *r = &rows[i];
        char name[48];
        format_test_name(name, sizeof name, r);
        int threads_used = 0;
        st = run_test(model, &o, r, &tokens, &threads_used);
        r->n_threads = threads_used;
        if (!st && !o.quiet)
            fprintf(stderr, "hearth: %s: [%d/%d] %s, %d thread%s, batch %d: %.2f \xc2\xb1 %.2f "
                            "t/s\n", CMD, i + 1, n_rows, name, r->n_threads,
                    r->n_threads == 1 ? "" : "s", r->n_batch, r->avg_ts, r->stddev_ts);
    }
    cli_interrupt_release();
    if (st == HEARTH_E_INTERRUPTED) {
        cli_error(CMD, "interrupted");
        rc = CLI_EXIT_INTERRUPTED;
    } else if (st) {
        rc = cli_fail(CMD, st);
    } else {
        if (o.format == OUTPUT_MD) {
            print_markdown(&o, &info, rows, n_rows);
            fflush(stdout);
            bench_print_version(CMD, 0, o.quiet);
        }
        else if (o.format == OUTPUT_CSV) print_csv(&info, rows, n_rows);
        else print_json(&info, rows, n_rows);
        if (fflush(stdout) != 0 || ferror(stdout))
            rc = cli_error(CMD, "cannot write to standard output");
    }
    for (int i = 0; i < n_rows; i++) free(rows[i].samples_ns);
    free(rows);
    hearth_model_free(model);
    cli_pipeline_close(pipe, rc);
    free(path);
    return rc;
}

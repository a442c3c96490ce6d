/*
 * embed.c -- `hearth embed -m MODEL [-f FILE | TEXT...]`: one embedding
 * per input (each TEXT argument, or each line of FILE or of standard
 * input), computed in the serving engine so that the inputs run batched
 * together, written as JSON (an array of arrays), JSON lines or
 * tab-separated values.
 *
 * The pooling is the model's (ARCH.pooling_type) unless --pooling forces
 * one; a model that declares none is a generative model and is refused
 * without --pooling.  Vectors are scaled to unit length unless
 * --no-normalize.  Components are printed with nine significant digits,
 * which give back the same float32.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hearth.h"
#include "model_options.h"
#include "prompt.h"

#define CMD "embed"

enum output_format { OUTPUT_JSON, OUTPUT_JSONL, OUTPUT_TSV };

struct input {
    const char *text;   /* not owned: an argument or a line of the read buffer */
    size_t len;
    size_t line;        /* its line (1-based), or argument number */
    hearth_token *tokens;
    size_t n_tokens;
};

/* What the engine's events fill. */
struct results {
    float *vectors;     /* n_inputs x n_embd */
    bool *done;
    int32_t n_embd;
    size_t n_finished;
    size_t n_failed;
    hearth_status failure;
    char error[256];
};

struct event_ref {
    struct results *res;
    size_t index;
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: hearth embed (-m MODEL | -hf OWNER/REPO[:FILE] | --url URL)\n"
            "                    [--format json|jsonl|tsv] [--pooling mean|cls|last]\n"
            "                    [--no-normalize] [-c CTX] [-b BATCH] [-t THREADS]\n"
            "                    [--parallel N] [--cache-type f32|f16|q8_0] [-f FILE | TEXT...]\n"
            "\n"
            "Write the embedding of each TEXT, or of each line of FILE ('-' or no\n"
            "input at all: standard input), in the order given.\n"
            "  -f, --file FILE       one input per line ('-': standard input)\n"
            "      --format FORMAT   json (default): one JSON array of the vectors;\n"
            "                        jsonl: one JSON array per line; tsv: one line per\n"
            "                        input, the components separated by tabs\n"
            "      --pooling KIND    mean, cls or last: pool so, whatever the model\n"
            "                        declares (needed for a model that declares none)\n"
            "      --no-normalize    the pooled vectors as they are (default: unit length)\n"
            "  -c, --ctx-size N      most tokens of one input (default: the model's\n"
            "                        training context, at most 4096)\n"
            "  -b, --batch N         tokens per forward pass (default 512)\n"
            "  -t, --threads N       threads (default: all processors)\n"
            "      --parallel N      inputs computed at once (default 8)\n"
            "      --cache-type TYPE KV cache type (default f16)\n");
    cli_model_help(out);
}

static void on_event(void *user, const hearth_event *ev)
{
    struct event_ref *ref = user;
    struct results *res = ref->res;
    if (ev->finish == HEARTH_FINISH_NONE) return;
    res->n_finished++;
    if (ev->embedding) {
        memcpy(res->vectors + ref->index * (size_t)res->n_embd, ev->embedding,
               (size_t)res->n_embd * sizeof(float));
        res->done[ref->index] = true;
        return;
    }
    if (res->n_failed++ == 0) {
        const char *why = ev->finish == HEARTH_FINISH_ERROR ? hearth_last_error() : NULL;
        res->failure = ev->status ? ev->status : HEARTH_E_INTERNAL;
        snprintf(res->error, sizeof res->error, "input %zu: %s", ref->index + 1,
                 why && *why ? why : hearth_finish_reason_name(ev->finish));
    }
}

/* The lines of text[0 .. len) as inputs (a last line without a newline
 * counts; a carriage return before the newline is not part of the line). */
static int split_lines(char *text, size_t len, struct input **out, size_t *n_out)
{
    size_t n = 0, cap = 0;
    struct input *in = NULL;
    for (size_t i = 0, line = 1; i < len; line++) {
        size_t end = i;
        while (end < len && text[end] != '\n') end++;
        size_t stop = end;
        if (stop > i && text[stop - 1] == '\r') stop--;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            struct input *p = realloc(in, cap * sizeof *p);
            if (!p) {
                free(in);
                return cli_error(CMD, "out of memory");
            }
            in = p;
        }
        in[n++] = (struct input){.text = text + i, .len = stop - i, .line = line};
        i = end + 1;
    }
    *out = in;
    *n_out = n;
    return CLI_EXIT_OK;
}

static void print_vectors(enum output_format format, const float *v, size_t n, int32_t dim)
{
    if (format == OUTPUT_JSON) putchar('[');
    for (size_t i = 0; i < n; i++) {
        const float *x = v + i * (size_t)dim;
        if (format == OUTPUT_JSON && i > 0) putchar(',');
        if (format != OUTPUT_TSV) putchar('[');
        for (int32_t k = 0; k < dim; k++) {
            if (k > 0) putchar(format == OUTPUT_TSV ? '\t' : ',');
            printf("%.9g", (double)x[k]);
        }
        if (format != OUTPUT_TSV) putchar(']');
        if (format != OUTPUT_JSON) putchar('\n');
    }
    if (format == OUTPUT_JSON) puts("]");
}

int cmd_embed(int argc, char **argv)
{
    enum { OPT_FORMAT = 1000, OPT_POOLING, OPT_NO_NORMALIZE, OPT_PARALLEL, OPT_CACHE_TYPE };
    static const struct option longopts[] = {
        {"file", required_argument, NULL, 'f'},
        {"format", required_argument, NULL, OPT_FORMAT},
        {"pooling", required_argument, NULL, OPT_POOLING},
        {"no-normalize", no_argument, NULL, OPT_NO_NORMALIZE},
        {"ctx-size", required_argument, NULL, 'c'},
        {"batch", required_argument, NULL, 'b'},
        {"batch-size", required_argument, NULL, 'b'},
        {"threads", required_argument, NULL, 't'},
        {"parallel", required_argument, NULL, OPT_PARALLEL},
        {"cache-type", required_argument, NULL, OPT_CACHE_TYPE},
        {"help", no_argument, NULL, 'h'},
        CLI_MODEL_LONG_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    struct cli_model_source src;
    cli_model_source_init(&src);
    const char *file = NULL;
    enum output_format format = OUTPUT_JSON;
    hearth_pooling pooling = HEARTH_POOLING_NONE; /* NONE: the model's */
    bool normalize = true;
    int n_ctx = 0, n_batch = 0, n_threads = 0, parallel = 8;
    hearth_type cache_type = HEARTH_TYPE_F16;
    int c;
    cli_model_normalize_args(argc, argv);
    optind = 0;
    while ((c = cli_getopt(argc, argv, ":m:f:c:b:t:h", longopts)) != -1) {
        int handled = cli_model_option(CMD, &src, c, optarg);
        if (handled < 0) return CLI_EXIT_USAGE;
        if (handled) continue;
        switch (c) {
        case 'f': file = optarg; break;
        case OPT_FORMAT:
            if (strcmp(optarg, "json") == 0) format = OUTPUT_JSON;
            else if (strcmp(optarg, "jsonl") == 0) format = OUTPUT_JSONL;
            else if (strcmp(optarg, "tsv") == 0) format = OUTPUT_TSV;
            else return cli_usage_error(CMD, "--format '%s': json, jsonl or tsv", optarg);
            break;
        case OPT_POOLING:
            if (!cli_parse_pooling(CMD, optarg, &pooling)) return CLI_EXIT_USAGE;
            break;
        case OPT_NO_NORMALIZE: normalize = false; break;
        case 'c':
            if (!cli_parse_int(CMD, "--ctx-size", optarg, 1, 1 << 24, &n_ctx)) return CLI_EXIT_USAGE;
            break;
        case 'b':
            if (!cli_parse_int(CMD, "--batch", optarg, 1, 65536, &n_batch)) return CLI_EXIT_USAGE;
            break;
        case 't':
            if (!cli_parse_int(CMD, "--threads", optarg, 1, 1024, &n_threads)) return CLI_EXIT_USAGE;
            break;
        case OPT_PARALLEL:
            if (!cli_parse_int(CMD, "--parallel", optarg, 1, 4096, &parallel)) return CLI_EXIT_USAGE;
            break;
        case OPT_CACHE_TYPE:
            if (!cli_parse_cache_type(CMD, optarg, &cache_type)) return CLI_EXIT_USAGE;
            break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        default: return cli_option_error(CMD, c, argv);
        }
    }
    if (cli_model_check(CMD, &src, true) != CLI_EXIT_OK) return CLI_EXIT_USAGE;
    if (file && optind < argc)
        return cli_usage_error(CMD, "give the inputs as arguments or with -f, not both");

    /* the inputs */
    char *text = NULL;
    struct input *inputs = NULL;
    size_t n_inputs = 0;
    if (optind < argc) {
        n_inputs = (size_t)(argc - optind);
        inputs = calloc(n_inputs, sizeof *inputs);
        if (!inputs) return cli_error(CMD, "out of memory");
        for (size_t i = 0; i < n_inputs; i++)
            inputs[i] = (struct input){.text = argv[optind + (int)i], .len = strlen(argv[optind + (int)i]),
                                       .line = i + 1};
    } else {
        size_t len;
        text = cli_read_file(CMD, file ? file : "-", &len);
        if (!text) return CLI_EXIT_FAILURE;
        if (split_lines(text, len, &inputs, &n_inputs) != CLI_EXIT_OK) {
            free(text);
            return CLI_EXIT_FAILURE;
        }
    }
    const char *what = optind < argc ? "argument" : "line";

    int rc = CLI_EXIT_FAILURE;
    hearth_model *model = NULL;
    hearth_engine *engine = NULL;
    char *model_path = NULL;
    struct results res = {0};
    struct event_ref *refs = NULL;
    if (n_inputs == 0) {
        cli_error(CMD, "no input: give TEXT arguments or lines on standard input or in -f FILE");
        goto done;
    }
    for (size_t i = 0; i < n_inputs; i++)
        if (inputs[i].len == 0) {
            cli_error(CMD, "%s %zu is empty: an embedding needs some text", what, inputs[i].line);
            goto done;
        }
    if (cli_model_load(CMD, &src, &model_path, &model) != CLI_EXIT_OK) goto done;
    const hearth_pooling declared = hearth_model_pooling(model);
    if (pooling == HEARTH_POOLING_NONE) {
        if (declared == HEARTH_POOLING_NONE) {
            cli_error(CMD, "%s is not an embedding model (it declares no pooling); --pooling mean, cls or "
                      "last pools its hidden states anyway", model_path);
            goto done;
        }
        if (declared == HEARTH_POOLING_RANK) {
            cli_error(CMD, "%s is a reranker (rank pooling), which is not supported; --pooling mean, cls "
                      "or last pools its hidden states instead", model_path);
            goto done;
        }
        pooling = declared;
    }
    const hearth_vocab *vocab = hearth_model_vocab(model);
    if (!vocab) {
        cli_error(CMD, "%s has no tokenizer", model_path);
        goto done;
    }

    hearth_engine_params ep;
    hearth_engine_default_params(&ep);
    ep.n_ctx = n_ctx;
    ep.n_batch = n_batch;
    ep.n_threads = n_threads;
    ep.n_seq_max = parallel;
    ep.cache_type = cache_type;
    hearth_status st = hearth_engine_new(model, &ep, &engine);
    if (st) {
        cli_fail(CMD, st);
        goto done;
    }
    cli_model_report_engine_offload(stderr, CMD, model, engine);
    hearth_engine_get_params(engine, &ep);

    for (size_t i = 0; i < n_inputs; i++) {
        struct input *in = &inputs[i];
        if (cli_tokenize(CMD, vocab, in->text, in->len, HEARTH_TOKENIZE_ADD_SPECIAL, &in->tokens,
                         &in->n_tokens) != CLI_EXIT_OK)
            goto done;
        if (in->n_tokens == 0) {
            cli_error(CMD, "%s %zu has no tokens", what, in->line);
            goto done;
        }
        if (in->n_tokens > (size_t)ep.n_ctx) {
            cli_error(CMD, "%s %zu has %zu tokens, more than the context of %d (--ctx-size)", what, in->line,
                      in->n_tokens, ep.n_ctx);
            goto done;
        }
    }

    res.n_embd = hearth_model_n_embd(model);
    res.vectors = calloc(n_inputs * (size_t)res.n_embd, sizeof *res.vectors);
    res.done = calloc(n_inputs, sizeof *res.done);
    refs = calloc(n_inputs, sizeof *refs);
    if (!res.vectors || !res.done || !refs) {
        cli_error(CMD, "out of memory");
        goto done;
    }
    double t0 = cli_now_s();
    size_t n_tokens = 0;
    for (size_t i = 0; i < n_inputs; i++) {
        hearth_request q;
        hearth_request_default(&q);
        q.prompt = inputs[i].tokens;
        q.n_prompt = inputs[i].n_tokens;
        q.pooling = pooling;
        q.no_normalize = !normalize;
        q.on_event = on_event;
        refs[i] = (struct event_ref){&res, i};
        q.user = &refs[i];
        st = hearth_engine_submit(engine, &q, NULL);
        if (st) {
            cli_error(CMD, "%s %zu: %s", what, inputs[i].line, hearth_last_error());
            goto done;
        }
        n_tokens += inputs[i].n_tokens;
    }
    cli_interrupt_catch();
    while (res.n_finished < n_inputs) {
        if (cli_interrupted()) {
            fprintf(stderr, "hearth: %s: interrupted\n", CMD);
            rc = CLI_EXIT_INTERRUPTED;
            goto done;
        }
        st = hearth_engine_step(engine, NULL);
        if (st) {
            cli_fail(CMD, st);
            goto done;
        }
    }
    if (res.n_failed > 0) {
        cli_error(CMD, "%s", res.error);
        goto done;
    }
    for (size_t i = 0; i < n_inputs; i++)
        if (!res.done[i]) {
            cli_error(CMD, "%s %zu got no vector", what, inputs[i].line);
            goto done;
        }
    const double dt = cli_now_s() - t0;
    print_vectors(format, res.vectors, n_inputs, res.n_embd);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error(CMD, "cannot write the vectors");
        goto done;
    }
    if (cli_verbose)
        fprintf(stderr, "hearth: %s: %zu inputs, %zu tokens, %s pooling, %.3f s, %.1f tokens/s\n", CMD, n_inputs,
                n_tokens, hearth_pooling_name(pooling), dt, dt > 0 ? (double)n_tokens / dt : 0.0);
    rc = CLI_EXIT_OK;
done:
    cli_interrupt_release();
    hearth_engine_free(engine);
    hearth_model_free(model);
    free(model_path);
    for (size_t i = 0; inputs && i < n_inputs; i++) hearth_free(inputs[i].tokens);
    free(inputs);
    free(text);
    free(res.vectors);
    free(res.done);
    free(refs);
    return rc;
}

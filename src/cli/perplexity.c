/*
 * perplexity.c -- `hearth perplexity`: how well a model predicts a text.
 *
 * The common method, so results compare with other engines: tokenize the
 * whole text once (BOS first when the vocabulary adds one), cut it into
 * floor(n / ctx) chunks of ctx tokens, evaluate each chunk from an empty
 * cache with its first token replaced by BOS, and score the second half:
 * the logits at positions ctx/2 .. ctx-2 each predict the chunk's next
 * token.  PPL = exp(mean negative log-likelihood) over every scored token.
 */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "hearth.h"
#include "model_options.h"
#include "prompt.h"

#define CMD "perplexity"

/* -log softmax(logits)[target], computed stably in double precision. */
static double token_nll(const float *logits, int32_t n_vocab, int32_t target)
{
    float max = logits[0];
    for (int32_t i = 1; i < n_vocab; i++)
        if (logits[i] > max) max = logits[i];
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - max);
    return -((double)logits[target] - max - log(sum));
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: hearth perplexity -m MODEL -f TEXT [-c CTX] [-b BATCH] [--chunks N]\n"
            "                         [-t THREADS] [--cache-type f32|f16|q8_0] [--chunk-size N]\n"
            "\n"
            "Compute the perplexity of MODEL on the text in TEXT.\n"
            "  -c, --ctx-size N      tokens per chunk (default 512)\n"
            "  -b, --batch N         tokens per forward pass (default: the chunk)\n"
            "  --chunks N            evaluate only the first N chunks\n"
            "  -t, --threads N       threads (default: all processors)\n"
            "  --cache-type TYPE     KV cache type (default f16)\n"
            "  --chunk-size N        recurrent models: tokens per chunk of the prefill (default 1)\n");
    cli_model_help(out);
}

int cmd_perplexity(int argc, char **argv)
{
    enum { OPT_CHUNKS = 1000, OPT_CACHE_TYPE, OPT_CHUNK_SIZE };
    static const struct option longopts[] = {
        {"file", required_argument, NULL, 'f'},
        {"ctx-size", required_argument, NULL, 'c'},
        {"batch", required_argument, NULL, 'b'},
        {"batch-size", required_argument, NULL, 'b'},
        {"threads", required_argument, NULL, 't'},
        {"chunks", required_argument, NULL, OPT_CHUNKS},
        {"cache-type", required_argument, NULL, OPT_CACHE_TYPE},
        {"chunk-size", required_argument, NULL, OPT_CHUNK_SIZE},
        {"help", no_argument, NULL, 'h'},
        CLI_MODEL_LONG_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    struct cli_model_source src;
    cli_model_source_init(&src);
    const char *text_path = NULL;
    int n_ctx = 512, n_batch = 0, n_threads = 0, chunk_size = 0;
    long max_chunks = -1;
    hearth_type cache_type = HEARTH_TYPE_F16;
    int c;
    cli_model_normalize_args(argc, argv);
    optind = 0;
    while ((c = cli_getopt(argc, argv, ":m:f:c:b:t:h", longopts)) != -1) {
        int handled = cli_model_option(CMD, &src, c, optarg);
        if (handled < 0) return CLI_EXIT_USAGE;
        if (handled) continue;
        switch (c) {
        case 'f': text_path = optarg; break;
        case 'c':
            if (!cli_parse_int(CMD, "--ctx-size", optarg, 4, 1 << 20, &n_ctx)) return CLI_EXIT_USAGE;
            break;
        case 'b':
            if (!cli_parse_int(CMD, "--batch", optarg, 1, 1 << 20, &n_batch)) return CLI_EXIT_USAGE;
            break;
        case 't':
            if (!cli_parse_int(CMD, "--threads", optarg, 1, 1024, &n_threads)) return CLI_EXIT_USAGE;
            break;
        case OPT_CHUNKS:
            if (!cli_parse_long(CMD, "--chunks", optarg, 1, 1L << 30, &max_chunks)) return CLI_EXIT_USAGE;
            break;
        case OPT_CACHE_TYPE:
            if (!cli_parse_cache_type(CMD, optarg, &cache_type)) return CLI_EXIT_USAGE;
            break;
        case OPT_CHUNK_SIZE:
            if (!cli_parse_int(CMD, "--chunk-size", optarg, 1, 4096, &chunk_size)) return CLI_EXIT_USAGE;
            break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        default: return cli_option_error(CMD, c, argv);
        }
    }
    if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (cli_model_check(CMD, &src, true) != CLI_EXIT_OK) return CLI_EXIT_USAGE;
    if (!text_path) return cli_usage_error(CMD, "no text given (-f FILE)");

    size_t text_len;
    char *text = cli_read_file(CMD, text_path, &text_len);
    if (!text) return CLI_EXIT_FAILURE;

    int rc = CLI_EXIT_FAILURE;
    hearth_model *model = NULL;
    hearth_context *ctx = NULL;
    hearth_token *tokens = NULL;
    char *model_path = NULL;
    size_t n_tokens = 0;
    hearth_status st;
    if (cli_model_load(CMD, &src, &model_path, &model) != CLI_EXIT_OK) goto done;
    const hearth_vocab *vocab = hearth_model_vocab(model);
    if (!vocab) {
        cli_error(CMD, "%s has no tokenizer", model_path);
        goto done;
    }
    double t0 = cli_now_s();
    if (cli_tokenize(CMD, vocab, text, text_len, HEARTH_TOKENIZE_ADD_SPECIAL, &tokens, &n_tokens) !=
        CLI_EXIT_OK)
        goto done;
    double t_tok = cli_now_s() - t0;
    if (n_tokens < 2 * (size_t)n_ctx) {
        cli_error(CMD, "the text has %zu tokens; at least %d (two chunks of --ctx-size %d) are "
                  "needed", n_tokens, 2 * n_ctx, n_ctx);
        goto done;
    }
    long n_chunks = (long)(n_tokens / (size_t)n_ctx);
    if (max_chunks > 0 && max_chunks < n_chunks) n_chunks = max_chunks;

    hearth_context_params cp;
    hearth_context_default_params(&cp);
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch > 0 ? n_batch : n_ctx;
    cp.n_threads = n_threads;
    cp.cache_type = cache_type;
    cp.chunk_size = chunk_size;
    st = hearth_context_new(model, &cp, &ctx);
    if (st) {
        cli_fail(CMD, st);
        goto done;
    }
    cli_model_report_offload(stderr, CMD, model, ctx);
    cli_interrupt_catch();
    hearth_context_set_abort(ctx, cli_should_abort, NULL);

    const hearth_token bos = hearth_vocab_special(vocab, HEARTH_SPECIAL_BOS);
    const int32_t n_vocab = hearth_model_n_vocab(model);
    const int first = n_ctx / 2;
    fprintf(stderr, "hearth: %s: %s, %zu tokens (tokenized in %.3f s), %ld chunks of %d, batch %d, %d thread%s\n",
            CMD, hearth_model_desc(model), n_tokens, t_tok, n_chunks, n_ctx,
            hearth_context_n_batch(ctx), hearth_context_n_threads(ctx),
            hearth_context_n_threads(ctx) == 1 ? "" : "s");

    double nll_sum = 0.0, nll_sq = 0.0;
    long count = 0;
    double t_eval = cli_now_s();
    for (long ch = 0; ch < n_chunks; ch++) {
        hearth_token *chunk = tokens + (size_t)ch * (size_t)n_ctx;
        const hearth_token saved = chunk[0];
        if (bos != HEARTH_TOKEN_NONE) chunk[0] = bos;
        hearth_context_rewind(ctx, 0);
        st = hearth_eval(ctx, chunk, n_ctx, n_ctx - first);
        chunk[0] = saved;
        if (st) {
            if (st == HEARTH_E_INTERRUPTED) {
                printf("\n");
                fprintf(stderr, "hearth: %s: interrupted after %ld chunks\n", CMD, ch);
                rc = CLI_EXIT_INTERRUPTED;
            } else {
                cli_fail(CMD, st);
            }
            goto done;
        }
        for (int i = first; i < n_ctx - 1; i++) {
            double nll = token_nll(hearth_context_logits(ctx, i - first), n_vocab, chunk[i + 1]);
            nll_sum += nll;
            nll_sq += nll * nll;
            count++;
        }
        printf("[%ld]%.4f,", ch + 1, exp(nll_sum / (double)count));
        fflush(stdout);
        if (ch == 0) {
            double per_chunk = cli_now_s() - t_eval;
            fprintf(stderr, "hearth: %s: %.2f s per chunk, about %.0f s in all\n", CMD, per_chunk,
                    per_chunk * (double)n_chunks);
        }
    }
    double mean = nll_sum / (double)count;
    /* standard error of the mean NLL, carried to PPL = exp(mean) */
    double var = count > 1 ? (nll_sq / (double)count - mean * mean) * (double)count / (double)(count - 1) : 0.0;
    double ppl = exp(mean);
    double err = ppl * sqrt(var > 0 ? var / (double)count : 0.0);
    double elapsed = cli_now_s() - t_eval;
    printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, err);
    fprintf(stderr, "hearth: %s: %ld tokens scored, %.2f s, %.1f tokens/s evaluated\n", CMD, count, elapsed,
            (double)n_chunks * n_ctx / elapsed);
    rc = CLI_EXIT_OK;
done:
    hearth_context_free(ctx);
    hearth_model_free(model);
    free(model_path);
    hearth_free(tokens);
    free(text);
    return rc;
}

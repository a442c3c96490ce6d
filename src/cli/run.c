/*
 * run.c -- `hearth run`: generate text from a prompt and stream it to
 * stdout, then report the request's statistics on stderr.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "generate.h"
#include "hearth.h"
#include "model_options.h"
#include "prompt.h"
#include "sampling_options.h"

#define CMD "run"
#define MAX_STOP 64

static void usage(FILE *out)
{
    fprintf(out,
            "usage: hearth run (-m MODEL | -hf OWNER/REPO[:FILE] | --url URL)\n"
            "                  (-p PROMPT | -f FILE) [options]\n"
            "\n"
            "Generate text from a prompt; the text goes to stdout, statistics to stderr.\n"
            "  -p, --prompt TEXT        the prompt\n"
            "  -f, --file FILE          read the prompt from FILE ('-': stdin)\n"
            "  -n, --n-predict N        generate at most N tokens (default: until the end)\n"
            "  -c, --ctx-size N         context size (default: the model's, at most 4096)\n"
            "  -b, --batch N            prompt tokens per forward pass (default 512)\n"
            "  -t, --threads N          threads (default: all processors)\n"
            "  --cache-type TYPE        KV cache type: f32, f16 (default), q8_0\n"
            "  --stop TEXT              stop when TEXT is generated (repeatable)\n"
            "  --chat                   apply the chat template to the prompt\n"
            "  --system TEXT            system message for --chat\n"
            "  --chat-template NAME|FILE  use this template instead of the model's\n"
            "  --special                parse special-token text in the prompt and\n"
            "                           show special tokens in the output\n"
            "  --no-echo                do not print the prompt before the output\n"
            "  -v, --verbose            report the model, context and cache\n");
    cli_model_help(out);
    cli_sampling_help(out);
}

int cmd_run(int argc, char **argv)
{
    enum {
        OPT_STOP = 0x2000, OPT_CHAT, OPT_SYSTEM, OPT_CHAT_TEMPLATE, OPT_SPECIAL, OPT_NO_ECHO,
        OPT_CACHE_TYPE
    };
    static const struct option longopts[] = {
        {"prompt", required_argument, NULL, 'p'},
        {"file", required_argument, NULL, 'f'},
        {"n-predict", required_argument, NULL, 'n'},
        {"ctx-size", required_argument, NULL, 'c'},
        {"batch", required_argument, NULL, 'b'},
        {"batch-size", required_argument, NULL, 'b'},
        {"threads", required_argument, NULL, 't'},
        {"cache-type", required_argument, NULL, OPT_CACHE_TYPE},
        {"stop", required_argument, NULL, OPT_STOP},
        {"chat", no_argument, NULL, OPT_CHAT},
        {"system", required_argument, NULL, OPT_SYSTEM},
        {"chat-template", required_argument, NULL, OPT_CHAT_TEMPLATE},
        {"special", no_argument, NULL, OPT_SPECIAL},
        {"no-echo", no_argument, NULL, OPT_NO_ECHO},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        CLI_MODEL_LONG_OPTIONS,
        CLI_SAMPLING_LONG_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    struct cli_model_source src;
    struct cli_sampling sampling;
    cli_model_source_init(&src);
    cli_sampling_init(&sampling);
    const char *prompt_arg = NULL, *prompt_file = NULL, *system = NULL, *template_spec = NULL;
    const char *stops[MAX_STOP];
    size_t n_stop = 0;
    int n_predict = -1;
    struct cli_context_opts copts = CLI_CONTEXT_OPTS_INIT;
    bool chat = false, special = false, echo = true, verbose = cli_verbose > 0;
    int rc = CLI_EXIT_USAGE;

    cli_model_normalize_args(argc, argv);
    int c;
    while ((c = getopt_long(argc, argv, ":m:p:f:n:c:b:t:vh", longopts, NULL)) != -1) {
        int r = cli_model_option(CMD, &src, c, optarg);
        if (r == 0) r = cli_sampling_option(CMD, &sampling, c, optarg);
        if (r == 0) r = cli_context_option(CMD, &copts, OPT_CACHE_TYPE, c, optarg);
        if (r < 0) goto done;
        if (r > 0) continue;
        switch (c) {
        case 'p': prompt_arg = optarg; break;
        case 'f': prompt_file = optarg; break;
        case 'n':
            if (!cli_parse_int(CMD, "--n-predict", optarg, -1, 1 << 30, &n_predict)) goto done;
            break;
        case OPT_STOP:
            if (!*optarg) {
                cli_usage_error(CMD, "--stop: the stop string is empty");
                goto done;
            }
            if (n_stop == MAX_STOP) {
                cli_usage_error(CMD, "--stop: at most %d stop strings", MAX_STOP);
                goto done;
            }
            stops[n_stop++] = optarg;
            break;
        case OPT_CHAT: chat = true; break;
        case OPT_SYSTEM: system = optarg; break;
        case OPT_CHAT_TEMPLATE: template_spec = optarg; break;
        case OPT_SPECIAL: special = true; break;
        case OPT_NO_ECHO: echo = false; break;
        case 'v': verbose = true; break;
        case 'h':
            usage(stdout);
            rc = CLI_EXIT_OK;
            goto done;
        default:
            rc = cli_option_error(CMD, c, argv);
            goto done;
        }
    }
    if (optind < argc) {
        cli_usage_error(CMD, "unexpected argument '%s' (the prompt goes after -p)", argv[optind]);
        goto done;
    }
    if (cli_model_check(CMD, &src, true) != CLI_EXIT_OK) goto done;
    if (!prompt_arg == !prompt_file) {
        cli_usage_error(CMD, "give the prompt with one of -p TEXT or -f FILE");
        goto done;
    }
    if ((system || template_spec) && !chat) {
        cli_usage_error(CMD, "--system and --chat-template need --chat");
        goto done;
    }
    cli_sampling_finish(&sampling);

    char *model_path = NULL, *prompt_buf = NULL;
    hearth_model *model = NULL;
    hearth_context *ctx = NULL;
    hearth_sampler *sampler = NULL;
    hearth_text_stream *stream = NULL;
    hearth_token *tokens = NULL;
    size_t n_tokens = 0;
    struct chat_prompt cp = {0};
    hearth_status st;
    rc = CLI_EXIT_FAILURE;

    size_t prompt_len;
    if (prompt_file) {
        prompt_buf = cli_read_file(CMD, prompt_file, &prompt_len);
        if (!prompt_buf) goto cleanup;
    } else {
        prompt_len = strlen(prompt_arg);
    }
    const char *prompt = prompt_file ? prompt_buf : prompt_arg;

    if (cli_model_load(CMD, &src, &model_path, &model) != CLI_EXIT_OK) goto cleanup;
    const hearth_vocab *vocab = hearth_model_vocab(model);
    if (!vocab) {
        cli_error(CMD, "%s has no tokenizer", model_path);
        goto cleanup;
    }

    if (chat) {
        if (chat_prompt_load(CMD, template_spec, hearth_model_gguf(model), vocab, &cp) != CLI_EXIT_OK) goto cleanup;
        hearth_chat_message msgs[2];
        size_t n = 0;
        if (system) msgs[n++] = (hearth_chat_message){"system", system};
        msgs[n++] = (hearth_chat_message){"user", prompt};
        if (chat_prompt_tokens(CMD, &cp, vocab, msgs, n, true, &tokens, &n_tokens) != CLI_EXIT_OK)
            goto cleanup;
    } else {
        unsigned flags = HEARTH_TOKENIZE_ADD_SPECIAL | (special ? HEARTH_TOKENIZE_PARSE_SPECIAL : 0u);
        if (cli_tokenize(CMD, vocab, prompt, prompt_len, flags, &tokens, &n_tokens) != CLI_EXIT_OK)
            goto cleanup;
    }
    if (n_tokens == 0) {
        cli_error(CMD, "the prompt is empty");
        goto cleanup;
    }

    hearth_context_params cparams;
    hearth_context_default_params(&cparams);
    cli_context_apply(&copts, &cparams);
    st = hearth_context_new(model, &cparams, &ctx);
    if (st) {
        cli_fail(CMD, st);
        goto cleanup;
    }
    cli_model_report_offload(stderr, CMD, model, ctx);
    if (n_tokens > (size_t)hearth_context_n_ctx(ctx)) {
        cli_error(CMD, "the prompt has %zu tokens but the context holds %d; use a larger "
                  "--ctx-size (the model was trained with %d)", n_tokens,
                  hearth_context_n_ctx(ctx), hearth_model_n_ctx_train(model));
        goto cleanup;
    }
    if (verbose) {
        fprintf(stderr, "hearth: %s: model %s: %s, %.2f MiB of weights\n", CMD, model_path,
                hearth_model_desc(model), hearth_model_size_bytes(model) / 1048576.0);
        const char *kernels = "?";
        hearth_cpu_kernels(&kernels);
        fprintf(stderr, "hearth: %s: context %d tokens, batch %d, %d threads, %s kernels\n", CMD,
                hearth_context_n_ctx(ctx), hearth_context_n_batch(ctx),
                hearth_context_n_threads(ctx), kernels);
        fprintf(stderr, "hearth: %s: KV cache %s, %zu bytes (%.2f MiB)\n", CMD,
                hearth_type_name(hearth_context_cache_type(ctx)), hearth_context_kv_bytes(ctx),
                hearth_context_kv_bytes(ctx) / 1048576.0);
        fprintf(stderr, "hearth: %s: prompt %zu tokens%s\n", CMD, n_tokens, chat ? " (chat template)" : "");
    }

    st = hearth_sampler_new(&sampling.params, hearth_model_n_vocab(model), &sampler);
    if (st) {
        cli_fail(CMD, st);
        goto cleanup;
    }
    hearth_text_stream_options so = {
        HEARTH_DECODE_CONTINUATION | (special ? HEARTH_DECODE_SPECIAL : 0u), stops, n_stop};
    st = hearth_text_stream_new(vocab, &so, &stream);
    if (st) {
        cli_fail(CMD, st);
        goto cleanup;
    }

    cli_interrupt_catch();
    hearth_context_set_abort(ctx, cli_should_abort, NULL);
    if (echo && !chat) {
        fwrite(prompt, 1, prompt_len, stdout);
        fflush(stdout);
    }
    struct gen_request req = {tokens, n_tokens, n_predict, stream, stdout, NULL, NULL, NULL};
    struct gen_stats stats;
    int gen_rc = gen_run(CMD, ctx, sampler, vocab, &req, &stats);
    if (isatty(STDOUT_FILENO)) fputc('\n', stdout);
    fflush(stdout);
    if (gen_rc != CLI_EXIT_OK) goto cleanup;
    if (ferror(stdout)) {
        cli_error(CMD, "cannot write to standard output");
        goto cleanup;
    }
    gen_print_stats(CMD, &stats, &sampling.params);
    if (stats.finish == FINISH_STOP)
        fprintf(stderr, "hearth: %s: stopped by --stop '%s'\n", CMD, stops[stats.stop_index]);
    if (stats.context_full)
        fprintf(stderr, "hearth: %s: the context of %d tokens is full; use a larger --ctx-size "
                "for longer output\n", CMD, hearth_context_n_ctx(ctx));
    rc = stats.finish == FINISH_INTERRUPTED ? CLI_EXIT_INTERRUPTED : CLI_EXIT_OK;

cleanup:
    hearth_text_stream_free(stream);
    hearth_sampler_free(sampler);
    hearth_context_free(ctx);
    hearth_model_free(model);
    chat_prompt_free(&cp);
    free(tokens);
    free(prompt_buf);
    free(model_path);
done:
    cli_sampling_free(&sampling);
    return rc;
}

/*
 * run.c -- `hearth run`: generate text from a prompt and stream it to
 * stdout, then report the request's statistics on stderr.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "generate.h"
#include "hearth.h"
#include "model_options.h"
#include "prompt.h"
#include "sampling_options.h"
#include "spec_options.h"

#define CMD "run"
#define MAX_STOP 64

enum {
    OPT_STOP = 0x2000, OPT_CHAT, OPT_SYSTEM, OPT_CHAT_TEMPLATE, OPT_SPECIAL, OPT_NO_ECHO,
    OPT_CACHE_TYPE, OPT_GRAMMAR, OPT_GRAMMAR_FILE, OPT_JSON_SCHEMA, OPT_JSON
};

/* The constraint of --grammar, --grammar-file, --json-schema or --json. */
struct run_grammar {
    int kind;          /* OPT_GRAMMAR, OPT_GRAMMAR_FILE, OPT_JSON_SCHEMA, OPT_JSON or 0 */
    const char *what;  /* the option or the file, for messages */
    const char *text;  /* GBNF or schema text (not for --json) */
    size_t len;
    char *buf;         /* text read from a file */
};

/* Read the grammar or schema and check it with the library's own parser,
 * before the model is loaded and anything is printed: text that cannot
 * compile is a usage error.  Returns a CLI exit status. */
static int run_grammar_read(int kind, const char *arg, struct run_grammar *g)
{
    g->kind = kind;
    g->what = kind == OPT_JSON ? "--json" : kind == OPT_JSON_SCHEMA ? "--json-schema" : "--grammar";
    g->text = arg;
    bool from_file = kind == OPT_GRAMMAR_FILE;
    if (kind == OPT_JSON_SCHEMA) {
        const char *p = arg;
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        from_file = *p != '{'; /* not a schema's text: a file */
    }
    if (from_file) {
        g->what = arg;
        g->text = g->buf = cli_read_file(CMD, arg, &g->len);
        if (!g->buf) return CLI_EXIT_FAILURE;
    } else if (g->text) {
        g->len = strlen(g->text);
    }
    if (kind == OPT_JSON) return CLI_EXIT_OK;
    hearth_status st;
    if (kind == OPT_JSON_SCHEMA) {
        char *gbnf = NULL;
        st = hearth_json_schema_to_gbnf(g->text, g->len, &gbnf);
        if (st == HEARTH_OK) st = hearth_grammar_check(gbnf, strlen(gbnf));
        hearth_free(gbnf);
    } else {
        st = hearth_grammar_check(g->text, g->len);
    }
    if (st != HEARTH_OK) return cli_usage_error(CMD, "%s: %s", g->what, hearth_last_error());
    return CLI_EXIT_OK;
}

/* Compile the checked grammar for the model's vocabulary. */
static int run_grammar_compile(const hearth_vocab *vocab, const struct run_grammar *g,
                               hearth_grammar **out)
{
    hearth_status st;
    if (g->kind == OPT_JSON) st = hearth_grammar_json_object(vocab, out);
    else if (g->kind == OPT_JSON_SCHEMA) st = hearth_grammar_from_json_schema(vocab, g->text, g->len, out);
    else st = hearth_grammar_new(vocab, g->text, g->len, out);
    if (st != HEARTH_OK) return cli_error(CMD, "%s: %s", g->what, hearth_last_error());
    return CLI_EXIT_OK;
}

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
            CLI_CHUNK_SIZE_HELP
            "  --stop TEXT              stop when TEXT is generated (repeatable)\n"
            "  --chat                   apply the chat template to the prompt\n"
            "  --system TEXT            system message for --chat\n"
            "  --chat-template NAME|FILE  use this template instead of the model's\n"
            "  --special                parse special-token text in the prompt and\n"
            "                           show special tokens in the output\n"
            "  --no-echo                do not print the prompt before the output\n"
            "  --grammar TEXT           constrain the output to a GBNF grammar\n"
            "  --grammar-file FILE      ... read from FILE\n"
            "  --json-schema FILE|TEXT  ... to JSON valid for a JSON Schema\n"
            "  --json                   ... to a JSON object (see hearth-grammar(7))\n"
            "  -v, --verbose            report the model, context and cache\n");
    cli_model_help(out);
    cli_sampling_help(out);
    cli_spec_help(out);
}

int cmd_run(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"prompt", required_argument, NULL, 'p'},
        {"file", required_argument, NULL, 'f'},
        {"n-predict", required_argument, NULL, 'n'},
        {"ctx-size", required_argument, NULL, 'c'},
        {"batch", required_argument, NULL, 'b'},
        {"batch-size", required_argument, NULL, 'b'},
        {"threads", required_argument, NULL, 't'},
        {"cache-type", required_argument, NULL, OPT_CACHE_TYPE},
        CLI_CHUNK_SIZE_LONG_OPTION,
        {"stop", required_argument, NULL, OPT_STOP},
        {"chat", no_argument, NULL, OPT_CHAT},
        {"system", required_argument, NULL, OPT_SYSTEM},
        {"chat-template", required_argument, NULL, OPT_CHAT_TEMPLATE},
        {"special", no_argument, NULL, OPT_SPECIAL},
        {"no-echo", no_argument, NULL, OPT_NO_ECHO},
        {"grammar", required_argument, NULL, OPT_GRAMMAR},
        {"grammar-file", required_argument, NULL, OPT_GRAMMAR_FILE},
        {"json-schema", required_argument, NULL, OPT_JSON_SCHEMA},
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
    cli_spec_init(&spec);
    cli_model_source_init(&src);
    cli_sampling_init(&sampling);
    const char *prompt_arg = NULL, *prompt_file = NULL, *system = NULL, *template_spec = NULL;
    const char *stops[MAX_STOP];
    size_t n_stop = 0;
    int n_predict = -1;
    struct cli_context_opts copts = CLI_CONTEXT_OPTS_INIT;
    bool chat = false, special = false, echo = true, verbose = cli_verbose > 0;
    int grammar_kind = 0; /* OPT_GRAMMAR, OPT_GRAMMAR_FILE, OPT_JSON_SCHEMA or OPT_JSON */
    const char *grammar_arg = NULL;
    struct run_grammar grammar_src = {0};
    int rc = CLI_EXIT_USAGE;

    cli_model_normalize_args(argc, argv);
    cli_spec_normalize_args(argc, argv);
    int c;
    optind = 0;
    while ((c = cli_getopt(argc, argv, ":m:p:f:n:c:b:t:vh", longopts)) != -1) {
        int r = cli_model_option(CMD, &src, c, optarg);
        if (r == 0) r = cli_sampling_option(CMD, &sampling, c, optarg);
        if (r == 0) r = cli_spec_option(CMD, &spec, c, optarg);
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
        case OPT_GRAMMAR: case OPT_GRAMMAR_FILE: case OPT_JSON_SCHEMA: case OPT_JSON:
            if (grammar_kind) {
                cli_usage_error(CMD, "give at most one of --grammar, --grammar-file, "
                                "--json-schema and --json");
                goto done;
            }
            grammar_kind = c;
            grammar_arg = optarg;
            break;
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
    if (cli_spec_finish(CMD, &spec) != CLI_EXIT_OK) goto done;
    if (grammar_kind) {
        rc = run_grammar_read(grammar_kind, grammar_arg, &grammar_src);
        if (rc != CLI_EXIT_OK) goto done;
    }

    char *model_path = NULL, *prompt_buf = NULL;
    hearth_model *model = NULL, *draft = NULL;
    hearth_engine *engine = NULL;
    hearth_token *tokens = NULL;
    size_t n_tokens = 0;
    struct chat_prompt cp = {0};
    hearth_grammar *grammar = NULL;
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

    rc = cli_sampling_check_model(CMD, &sampling, model);
    if (rc != CLI_EXIT_OK) goto cleanup;
    rc = CLI_EXIT_FAILURE;
    if (grammar_kind && run_grammar_compile(vocab, &grammar_src, &grammar) != CLI_EXIT_OK)
        goto cleanup;
    sampling.params.grammar = grammar;

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

    if (cli_spec_load_draft(CMD, &spec, &src.params, &draft) != CLI_EXIT_OK) goto cleanup;
    if (gen_engine_new(CMD, model, draft, &copts, &engine) != CLI_EXIT_OK) goto cleanup;
    hearth_engine_params ep;
    hearth_engine_get_params(engine, &ep);
    if (n_tokens > (size_t)ep.n_ctx) {
        cli_error(CMD, "the prompt has %zu tokens but the context holds %d; use a larger "
                  "--ctx-size (the model was trained with %d)", n_tokens, ep.n_ctx,
                  hearth_model_n_ctx_train(model));
        goto cleanup;
    }
    if (verbose) {
        hearth_engine_stats es;
        hearth_engine_get_stats(engine, &es);
        fprintf(stderr, "hearth: %s: model %s: %s, %.2f MiB of weights\n", CMD, model_path,
                hearth_model_desc(model), hearth_model_size_bytes(model) / 1048576.0);
        const char *kernels = "?";
        hearth_cpu_kernels(&kernels);
        fprintf(stderr, "hearth: %s: context %d tokens, batch %d, %d thread%s, %s kernels\n", CMD,
                ep.n_ctx, ep.n_batch, ep.n_threads, ep.n_threads == 1 ? "" : "s", kernels);
        fprintf(stderr, "hearth: %s: KV cache %s, %llu bytes (%.2f MiB)\n", CMD,
                hearth_type_name(ep.cache_type), (unsigned long long)es.kv_bytes, es.kv_bytes / 1048576.0);
        fprintf(stderr, "hearth: %s: prompt %zu tokens%s\n", CMD, n_tokens, chat ? " (chat template)" : "");
    }

    cli_interrupt_catch();
    /* The last byte on stdout, to end the text's line before the
     * statistics; -1 before any. */
    int last = -1;
    if (echo && !chat && prompt_len > 0) {
        fwrite(prompt, 1, prompt_len, stdout);
        fflush(stdout);
        last = (unsigned char)prompt[prompt_len - 1];
    }
    struct gen_request req = {
        .prompt = tokens,
        .n_prompt = n_tokens,
        .n_predict = n_predict,
        .sampling = &sampling.params,
        .speculation = &spec.speculation,
        .stop = stops,
        .n_stop = n_stop,
        .decode_flags = HEARTH_DECODE_CONTINUATION | (special ? HEARTH_DECODE_SPECIAL : 0u),
        .out = stdout,
    };
    struct gen_stats stats;
    int gen_rc = gen_run(CMD, engine, &req, &stats);
    if (stats.n_bytes > 0) last = (unsigned char)stats.last_byte;
    if (last >= 0 && last != '\n') fputc('\n', stdout);
    fflush(stdout);
    if (gen_rc != CLI_EXIT_OK) goto cleanup;
    if (ferror(stdout)) {
        cli_error(CMD, "cannot write to standard output");
        goto cleanup;
    }
    gen_print_stats(CMD, &stats, &sampling.params);
    cli_spec_print_stats(CMD, &spec, stats.n_gen, stats.n_steps, stats.n_drafted, stats.n_accepted);
    if (stats.finish == FINISH_STOP && stats.stop_index >= 0)
        fprintf(stderr, "hearth: %s: stopped by --stop '%s'\n", CMD, stops[stats.stop_index]);
    else if (stats.finish == FINISH_STOP)
        fprintf(stderr, "hearth: %s: the grammar is complete\n", CMD);
    if (stats.context_full)
        fprintf(stderr, "hearth: %s: the context of %d tokens is full; use a larger --ctx-size "
                "for longer output\n", CMD, ep.n_ctx);
    rc = stats.finish == FINISH_INTERRUPTED ? CLI_EXIT_INTERRUPTED : CLI_EXIT_OK;

cleanup:
    hearth_engine_free(engine);
    hearth_grammar_free(grammar);
    hearth_model_free(model);
    hearth_model_free(draft);
    chat_prompt_free(&cp);
    hearth_free(tokens);
    free(prompt_buf);
    free(model_path);
done:
    free(grammar_src.buf);
    cli_sampling_free(&sampling);
    return rc;
}

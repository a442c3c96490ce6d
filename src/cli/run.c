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
#include "pp_options.h"
#include "prompt.h"
#include "run_options.h"

#define CMD "run"
/* The constraint of --grammar, --grammar-file, --json-schema or --json. */
struct run_grammar {
    enum run_grammar_kind kind;
    const char *what;  /* the option or the file, for messages */
    const char *text;  /* GBNF or schema text (not for --json) */
    size_t len;
    char *buf;         /* text read from a file */
};

/* Read the grammar or schema and check it with the library's own parser,
 * before the model is loaded and anything is printed: text that cannot
 * compile is a usage error.  Returns a CLI exit status. */
static int run_grammar_read(enum run_grammar_kind kind, const char *arg, struct run_grammar *g)
{
    g->kind = kind;
    g->what = kind == RUN_JSON ? "--json" : kind == RUN_JSON_SCHEMA ? "--json-schema" : "--grammar";
    g->text = arg;
    bool from_file = kind == RUN_GRAMMAR_FILE;
    if (kind == RUN_JSON_SCHEMA) {
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
    if (kind == RUN_JSON) return CLI_EXIT_OK;
    hearth_status st;
    if (kind == RUN_JSON_SCHEMA) {
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
    if (g->kind == RUN_JSON) st = hearth_grammar_json_object(vocab, out);
    else if (g->kind == RUN_JSON_SCHEMA) st = hearth_grammar_from_json_schema(vocab, g->text, g->len, out);
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
            CLI_SWA_FULL_HELP
            CLI_CHUNK_SIZE_HELP
            "  --stop TEXT              stop when TEXT is generated (repeatable)\n"
            "  --chat                   apply the chat template to the prompt\n"
            "  --system TEXT            system message for --chat\n"
            "  --chat-template NAME|FILE  use this template instead of the model's\n"
            "  --reasoning show|hide    with --chat, a reasoning model's thinking goes to\n"
            "                           standard error (dimmed on a terminal), or nowhere\n"
            "  --reasoning-budget N     with --chat, end the thinking after N tokens\n"
            "                           (0: at once; default -1: no limit)\n"
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
    cli_pipeline_help(out);
}

int cmd_run(int argc, char **argv)
{
    struct run_options o;
    struct run_grammar grammar_src = {0};
    int rc = run_options_parse(CMD, argc, argv, &o);
    if (rc == RUN_OPTIONS_HELP) {
        usage(stdout);
        rc = CLI_EXIT_OK;
        goto done;
    }
    if (rc != CLI_EXIT_OK) goto done;
    if (o.grammar_kind) {
        rc = run_grammar_read(o.grammar_kind, o.grammar_arg, &grammar_src);
        if (rc != CLI_EXIT_OK) goto done;
    }

    char *model_path = NULL, *prompt_buf = NULL;
    hearth_model *model = NULL, *draft = NULL;
    hearth_pipeline *pipe = NULL;
    hearth_engine *engine = NULL;
    hearth_token *tokens = NULL;
    size_t n_tokens = 0;
    struct chat_prompt cp = {0};
    hearth_grammar *grammar = NULL;
    rc = CLI_EXIT_FAILURE;

    size_t prompt_len;
    if (o.prompt_file) {
        prompt_buf = cli_read_file(CMD, o.prompt_file, &prompt_len);
        if (!prompt_buf) goto cleanup;
    } else {
        prompt_len = strlen(o.prompt_arg);
    }
    const char *prompt = o.prompt_file ? prompt_buf : o.prompt_arg;

    if (cli_pipeline_open(CMD, &o.pp, &o.src, &pipe) != CLI_EXIT_OK) goto cleanup;
    if (cli_model_load(CMD, &o.src, &model_path, &model) != CLI_EXIT_OK) goto cleanup;
    /* the other ranks of a pipeline run their layers for rank 0, here
     * (each says which with -v; rank 0 below, with its context) */
    if (o.verbose && pipe && hearth_pipeline_rank(pipe) != 0) cli_pipeline_report(stderr, CMD, pipe, model);
    bool served;
    rc = cli_pipeline_start(CMD, pipe, &o.pp, &o.copts, model, &served);
    if (rc != CLI_EXIT_OK || served) goto cleanup;
    rc = CLI_EXIT_FAILURE;
    const hearth_vocab *vocab = hearth_model_vocab(model);
    if (!vocab) {
        cli_error(CMD, "%s has no tokenizer", model_path);
        goto cleanup;
    }

    rc = cli_sampling_check_model(CMD, &o.sampling, model);
    if (rc != CLI_EXIT_OK) goto cleanup;
    rc = CLI_EXIT_FAILURE;
    if (o.grammar_kind && run_grammar_compile(vocab, &grammar_src, &grammar) != CLI_EXIT_OK)
        goto cleanup;
    o.sampling.params.grammar = grammar;

    if (o.chat) {
        if (chat_prompt_load(CMD, o.template_spec, hearth_model_gguf(model), vocab, &cp) != CLI_EXIT_OK) goto cleanup;
        hearth_chat_message msgs[2];
        size_t n = 0;
        if (o.system) msgs[n++] = (hearth_chat_message){"system", o.system};
        msgs[n++] = (hearth_chat_message){"user", prompt};
        if (chat_prompt_tokens(CMD, &cp, vocab, msgs, n, true, &tokens, &n_tokens) != CLI_EXIT_OK)
            goto cleanup;
    } else {
        unsigned flags = HEARTH_TOKENIZE_ADD_SPECIAL | (o.special ? HEARTH_TOKENIZE_PARSE_SPECIAL : 0u);
        if (cli_tokenize(CMD, vocab, prompt, prompt_len, flags, &tokens, &n_tokens) != CLI_EXIT_OK)
            goto cleanup;
    }
    if (n_tokens == 0) {
        cli_error(CMD, "the prompt is empty");
        goto cleanup;
    }

    bool mtp;
    rc = cli_spec_use_mtp(CMD, &o.spec, model, false, &mtp);
    if (rc != CLI_EXIT_OK) goto cleanup;
    rc = CLI_EXIT_FAILURE;
    if (cli_spec_load_draft(CMD, &o.spec, &o.src.params, &draft) != CLI_EXIT_OK) goto cleanup;
    if (gen_engine_new(CMD, model, draft, mtp, &o.copts, &engine) != CLI_EXIT_OK) goto cleanup;
    hearth_engine_params ep;
    hearth_engine_get_params(engine, &ep);
    if (n_tokens > (size_t)ep.n_ctx) {
        cli_error(CMD, "the prompt has %zu tokens but the context holds %d; use a larger "
                  "--ctx-size (the model was trained with %d)", n_tokens, ep.n_ctx,
                  hearth_model_n_ctx_train(model));
        goto cleanup;
    }
    if (o.verbose) {
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
        cli_model_report_memory(stderr, CMD, model, engine);
        cli_pipeline_report(stderr, CMD, pipe, model);
        if (es.window > 0)
            fprintf(stderr, "hearth: %s: sliding-window layers: their own %d blocks of %d positions for a "
                    "window of %d (--swa-full: the whole context)\n", CMD, es.window_blocks, es.block_tokens,
                    es.window);
        fprintf(stderr, "hearth: %s: prompt %zu tokens%s\n", CMD, n_tokens, o.chat ? " (chat template)" : "");
    }

    cli_interrupt_catch();
    /* The last byte on stdout, to end the text's line before the
     * statistics; -1 before any. */
    int last = -1;
    if (o.echo && !o.chat && prompt_len > 0) {
        fwrite(prompt, 1, prompt_len, stdout);
        fflush(stdout);
        last = (unsigned char)prompt[prompt_len - 1];
    }
    struct gen_request req = {
        .prompt = tokens,
        .n_prompt = n_tokens,
        .n_predict = o.n_predict,
        .sampling = &o.sampling.params,
        .speculation = &o.spec.speculation,
        .stop = o.stops,
        .n_stop = o.n_stop,
        .decode_flags = HEARTH_DECODE_CONTINUATION | (o.special ? HEARTH_DECODE_SPECIAL : 0u),
        .out = stdout,
        /* the chat template says how the model marks its thinking */
        .reasoning = o.chat && cp.text ? hearth_reasoning_format_detect(cp.text, strlen(cp.text))
                                       : HEARTH_REASONING_NONE,
        .vocab = vocab,
        .hide_reasoning = o.hide_reasoning,
        .reasoning_budget = o.reasoning_budget,
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
    gen_print_stats(CMD, &stats, &o.sampling.params);
    cli_spec_print_stats(CMD, &o.spec, stats.n_gen, stats.n_steps, stats.n_drafted, stats.n_accepted);
    if (stats.finish == FINISH_STOP && stats.stop_index >= 0)
        fprintf(stderr, "hearth: %s: stopped by --stop '%s'\n", CMD, o.stops[stats.stop_index]);
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
    cli_pipeline_close(pipe, rc);
done:
    free(grammar_src.buf);
    run_options_free(&o);
    return rc;
}

/*
 * chat.c -- `hearth chat`: an interactive conversation on the model's chat
 * template.
 *
 * Each turn renders the whole conversation with the template, tokenizes
 * it and submits it to the engine as a new request; the engine's prefix
 * cache still holds the blocks of the turns before, so only the new turn
 * is prefilled.  (Rendering the whole conversation, rather than appending
 * text, keeps templates that rewrite earlier turns correct: the cache
 * serves the blocks up to where they differ.)
 */
#include "config.h"

#include <errno.h>
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
#include "spec_options.h"

#define CMD "chat"

struct conversation {
    hearth_chat_message *msgs;
    char **owned;            /* the strings behind msgs, freed with them */
    size_t n, cap;
};

static int conv_add(struct conversation *cv, const char *role, const char *content, size_t len)
{
    if (cv->n == cv->cap) {
        size_t cap = cv->cap ? cv->cap * 2 : 16;
        hearth_chat_message *m = realloc(cv->msgs, cap * sizeof *m);
        if (!m) return -1;
        cv->msgs = m;
        char **o = realloc(cv->owned, cap * sizeof *o);
        if (!o) return -1;
        cv->owned = o;
        cv->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return -1;
    memcpy(copy, content, len);
    copy[len] = '\0';
    cv->owned[cv->n] = copy;
    cv->msgs[cv->n] = (hearth_chat_message){role, copy};
    cv->n++;
    return 0;
}

static void conv_clear(struct conversation *cv, size_t keep)
{
    while (cv->n > keep) free(cv->owned[--cv->n]);
}

static void conv_free(struct conversation *cv)
{
    conv_clear(cv, 0);
    free(cv->msgs);
    free(cv->owned);
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: hearth chat (-m MODEL | -hf OWNER/REPO[:FILE] | --url URL) [options]\n"
            "\n"
            "Chat with a model.  Type a message and press Enter; /reset starts over,\n"
            "/exit or end of input (Ctrl-D) quits.  Ctrl-C stops the current reply.\n"
            "  --system TEXT            the system message\n"
            "  --chat-template NAME|FILE  use this template instead of the model's\n"
            "  --reasoning show|hide    a reasoning model's thinking goes to standard\n"
            "                           error (dimmed on a terminal), or nowhere\n"
            "  --reasoning-budget N     end the thinking after N tokens (0: at once;\n"
            "                           default -1: no limit)\n"
            "  -n, --n-predict N        at most N tokens per reply (default: no limit)\n"
            "  -c, --ctx-size N         context size (default: the model's, at most 4096)\n"
            "  -b, --batch N            prompt tokens per forward pass (default 512)\n"
            "  -t, --threads N          threads (default: all processors)\n"
            "  --cache-type TYPE        KV cache type: f32, f16 (default), q8_0\n"
            CLI_SWA_FULL_HELP
            CLI_CHUNK_SIZE_HELP
            "  -v, --verbose            statistics after every reply\n");
    cli_model_help(out);
    cli_sampling_help(out);
    cli_spec_help(out);
}

/* Read one message: a line, where a trailing backslash continues it on the
 * next line.  Returns the length, or -1 at end of input. */
static ssize_t read_message(char **buf, size_t *cap, bool interactive)
{
    size_t len = 0;
    char *line = NULL;
    size_t line_cap = 0;
    for (;;) {
        if (interactive) {
            fputs(len ? ". " : "> ", stderr);
            fflush(stderr);
        }
        errno = 0;
        ssize_t n = getline(&line, &line_cap, stdin);
        if (n < 0) {
            free(line);
            return len ? (ssize_t)len : -1;
        }
        if (n > 0 && line[n - 1] == '\n') line[--n] = '\0';
        bool more = n > 0 && line[n - 1] == '\\';
        if (more) line[--n] = '\n';
        if (len + (size_t)n + 1 > *cap) {
            size_t c = (len + (size_t)n + 1) * 2;
            char *b = realloc(*buf, c);
            if (!b) {
                free(line);
                return -1;
            }
            *buf = b;
            *cap = c;
        }
        memcpy(*buf + len, line, (size_t)n);
        len += (size_t)n;
        (*buf)[len] = '\0';
        if (!more) break;
    }
    free(line);
    return (ssize_t)len;
}

int cmd_chat(int argc, char **argv)
{
    enum { OPT_SYSTEM = 0x2000, OPT_CHAT_TEMPLATE, OPT_REASONING, OPT_REASONING_BUDGET };
    static const struct option longopts[] = {
        {"system", required_argument, NULL, OPT_SYSTEM},
        {"chat-template", required_argument, NULL, OPT_CHAT_TEMPLATE},
        {"reasoning", required_argument, NULL, OPT_REASONING},
        {"reasoning-budget", required_argument, NULL, OPT_REASONING_BUDGET},
        {"n-predict", required_argument, NULL, 'n'},
        CLI_CONTEXT_LONG_OPTIONS,
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
    const char *system = NULL, *template_spec = NULL;
    int n_predict = -1;
    int32_t reasoning_budget = -1;
    struct cli_context_opts copts = CLI_CONTEXT_OPTS_INIT;
    bool verbose = cli_verbose > 0, hide_reasoning = false;
    int rc = CLI_EXIT_USAGE;

    cli_model_normalize_args(argc, argv);
    cli_spec_normalize_args(argc, argv);
    int c;
    optind = 0;
    while ((c = cli_getopt(argc, argv, ":m:n:c:b:t:vh", longopts)) != -1) {
        int r = cli_model_option(CMD, &src, c, optarg);
        if (r == 0) r = cli_sampling_option(CMD, &sampling, c, optarg);
        if (r == 0) r = cli_spec_option(CMD, &spec, c, optarg);
        if (r == 0) r = cli_context_option(CMD, &copts, c, optarg);
        if (r < 0) goto done;
        if (r > 0) continue;
        switch (c) {
        case OPT_SYSTEM: system = optarg; break;
        case OPT_CHAT_TEMPLATE: template_spec = optarg; break;
        case OPT_REASONING:
            if (!cli_parse_reasoning(CMD, optarg, &hide_reasoning)) goto done;
            break;
        case OPT_REASONING_BUDGET:
            if (!cli_parse_reasoning_budget(CMD, optarg, &reasoning_budget)) goto done;
            break;
        case 'n':
            if (!cli_parse_int(CMD, "--n-predict", optarg, -1, 1 << 30, &n_predict)) goto done;
            break;
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
        cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
        goto done;
    }
    if (cli_model_check(CMD, &src, true) != CLI_EXIT_OK) goto done;
    cli_sampling_finish(&sampling);
    if (cli_spec_finish(CMD, &spec) != CLI_EXIT_OK) goto done;

    char *model_path = NULL, *input = NULL;
    size_t input_cap = 0;
    hearth_model *model = NULL, *draft = NULL;
    hearth_engine *engine = NULL;
    hearth_token *tokens = NULL, *reply = NULL;
    size_t n_reply = 0, reply_cap = 0;
    struct conversation cv = {0};
    struct chat_prompt cp = {0};
    rc = CLI_EXIT_FAILURE;

    if (cli_model_load(CMD, &src, &model_path, &model) != CLI_EXIT_OK) goto cleanup;
    const hearth_vocab *vocab = hearth_model_vocab(model);
    if (!vocab) {
        cli_error(CMD, "%s has no tokenizer", model_path);
        goto cleanup;
    }
    rc = cli_sampling_check_model(CMD, &sampling, model);
    if (rc != CLI_EXIT_OK) goto cleanup;
    rc = CLI_EXIT_FAILURE;
    if (chat_prompt_load(CMD, template_spec, hearth_model_gguf(model), vocab, &cp) != CLI_EXIT_OK) goto cleanup;

    bool mtp;
    rc = cli_spec_use_mtp(CMD, &spec, model, false, &mtp);
    if (rc != CLI_EXIT_OK) goto cleanup;
    rc = CLI_EXIT_FAILURE;
    if (cli_spec_load_draft(CMD, &spec, &src.params, &draft) != CLI_EXIT_OK) goto cleanup;
    if (gen_engine_new(CMD, model, draft, mtp, &copts, &engine) != CLI_EXIT_OK) goto cleanup;
    hearth_engine_params ep;
    hearth_engine_get_params(engine, &ep);
    if (system && conv_add(&cv, "system", system, strlen(system)) != 0) goto nomem;

    const bool interactive = isatty(STDIN_FILENO);
    if (interactive)
        fprintf(stderr, "hearth: %s: chatting with %s (%s); context %d tokens. /exit quits, /reset "
                "starts over.\n", CMD, model_path, hearth_model_desc(model), ep.n_ctx);
    cli_interrupt_catch();
    /* every turn draws afresh: the session's seed starts the turns' seeds */
    const uint64_t session_seed = sampling.params.seed;
    uint64_t turn = 0;

    for (;;) {
        ssize_t len = read_message(&input, &input_cap, interactive);
        if (len < 0) {
            if (cli_interrupted()) rc = CLI_EXIT_INTERRUPTED;
            else rc = CLI_EXIT_OK;
            break;
        }
        if (len == 0) continue;
        if (strcmp(input, "/exit") == 0 || strcmp(input, "/quit") == 0) {
            rc = CLI_EXIT_OK;
            break;
        }
        if (strcmp(input, "/reset") == 0) {
            conv_clear(&cv, system ? 1 : 0);
            if (interactive) fprintf(stderr, "hearth: %s: conversation reset\n", CMD);
            continue;
        }
        if (conv_add(&cv, "user", input, (size_t)len) != 0) goto nomem;

        size_t n_tokens;
        hearth_free(tokens);
        tokens = NULL;
        if (chat_prompt_tokens(CMD, &cp, vocab, cv.msgs, cv.n, true, &tokens, &n_tokens) != CLI_EXIT_OK) {
            conv_clear(&cv, cv.n - 1);
            continue;
        }
        /* The whole conversation is the prompt: the prefix cache has the
         * blocks it shares with the turns before.  The reply is a text of
         * its own (no leading space). */
        n_reply = 0;
        cli_interrupt_catch();
        sampling.params.seed = hearth_seed_derive(session_seed, turn++);
        struct gen_request req = {
            .prompt = tokens,
            .n_prompt = n_tokens,
            .n_predict = n_predict,
            .sampling = &sampling.params,
            .speculation = &spec.speculation,
            .decode_flags = 0,
            .out = stdout,
            .reasoning = cp.text ? hearth_reasoning_format_detect(cp.text, strlen(cp.text))
                                 : HEARTH_REASONING_NONE,
            .vocab = vocab,
            .hide_reasoning = hide_reasoning,
            .reasoning_budget = reasoning_budget,
            .tokens = &reply,
            .n_tokens = &n_reply,
            .tokens_cap = &reply_cap,
        };
        struct gen_stats stats;
        int gen_rc;
        if (n_tokens > (size_t)ep.n_ctx)
            gen_rc = cli_error(CMD, "the conversation has %zu tokens but the context holds %d; /reset "
                               "to start over", n_tokens, ep.n_ctx);
        else
            gen_rc = gen_run(CMD, engine, &req, &stats);
        fputc('\n', stdout);
        fflush(stdout);
        if (gen_rc != CLI_EXIT_OK) {
            conv_clear(&cv, cv.n - 1);
            continue;
        }
        if (verbose) {
            gen_print_stats(CMD, &stats, &sampling.params);
            cli_spec_print_stats(CMD, &spec, stats.n_gen, stats.n_steps, stats.n_drafted, stats.n_accepted);
        }
        if (stats.context_full)
            fprintf(stderr, "hearth: %s: the context is full; /reset to start over\n", CMD);

        /* The reply as the assistant's message (without SentencePiece's
         * leading space). */
        char *text;
        size_t text_len;
        if (hearth_detokenize_alloc(vocab, reply, n_reply, 0, &text, &text_len) == HEARTH_E_NOMEM)
            goto nomem;
        int added = conv_add(&cv, "assistant", text ? text : "", text_len);
        hearth_free(text);
        if (added != 0) goto nomem;
        if (stats.finish == FINISH_INTERRUPTED && interactive)
            fprintf(stderr, "hearth: %s: reply interrupted\n", CMD);
    }
    goto cleanup;
nomem:
    cli_error(CMD, "out of memory");
    rc = CLI_EXIT_FAILURE;
cleanup:
    hearth_engine_free(engine);
    hearth_model_free(model);
    hearth_model_free(draft);
    chat_prompt_free(&cp);
    conv_free(&cv);
    hearth_free(tokens);
    free(reply);
    free(input);
    free(model_path);
done:
    cli_sampling_free(&sampling);
    return rc;
}

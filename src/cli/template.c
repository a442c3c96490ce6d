/*
 * template.c -- `hearth template`: render a chat template for a
 * conversation and print exactly the resulting text, to see what a model
 * will be prompted with.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hearth.h"
#include "model_options.h"

static const char *const cmd = "template";

static void usage(FILE *out)
{
    fprintf(out,
            "usage: hearth template (-m MODEL | -hf OWNER/REPO[:FILE] | --url URL |\n"
            "                        --chat-template NAME|FILE) [--messages FILE.json]\n"
            "                       [--no-generation-prompt] [--bos TEXT] [--eos TEXT]\n"
            "                       [--tools FILE.json] [--date DATE] [--vars JSON]\n"
            "\n"
            "Render a chat template for a conversation and print the text, without a\n"
            "trailing newline.\n"
            "\n"
            "  -m, --model MODEL        the template of a GGUF model (tokenizer.chat_template)\n"
            "  -hf, --hf OWNER/REPO[:FILE]  ... of a model from the Hugging Face hub\n"
            "      --url URL            ... of a model from a URL (both downloaded into the cache)\n"
            "  -t, --chat-template T    a built-in template (");
    for (const char *const *n = hearth_template_builtin_names(); *n; n++)
        fprintf(out, "%s%s", *n, n[1] ? ", " : "");
    fprintf(out,
            ")\n"
            "                           or a file of Jinja text\n"
            "  -f, --messages FILE      JSON array of messages ('-' for standard input);\n"
            "                           default: one user message\n"
            "  -n, --no-generation-prompt  do not end with the start of an assistant turn\n"
            "      --bos TEXT, --eos TEXT  text of the BOS and EOS tokens\n"
            "      --tools FILE         JSON array of tool definitions\n"
            "      --date DATE          the date, \"29 Nov 2026\" or \"2026-11-29\" (default: today)\n"
            "      --vars JSON          further template variables, as a JSON object\n"
            "  -h, --help               show this help\n");
}

static const char default_messages[] = "[{\"role\": \"user\", \"content\": \"Hello!\"}]";

/* The text of the token whose id is the value of key (bos or eos), NULL
 * when the model names none.  Returns false after printing an error.  It
 * is read straight from the metadata rather than through a loaded
 * vocabulary, so that templates can be shown for vocabularies this build
 * cannot tokenize with (an unknown pre-tokenizer, no PCRE2). */
static bool token_text(const char *model, const hearth_gguf *g, const char *key, char **out)
{
    *out = NULL;
    uint32_t id;
    hearth_status st = hearth_gguf_get_u32(g, key, &id);
    if (st == HEARTH_E_NOT_FOUND) return true;
    if (st != HEARTH_OK) {
        cli_fail(cmd, st);
        return false;
    }
    hearth_gguf_value tokens, piece;
    st = hearth_gguf_get_array(g, "tokenizer.ggml.tokens", &tokens);
    if (st != HEARTH_OK) {
        cli_error(cmd, "%s: %s is %u but there is no token list (tokenizer.ggml.tokens)", model, key, id);
        return false;
    }
    if (tokens.v.arr.elem_type != HEARTH_GGUF_STRING || id >= tokens.v.arr.n) {
        cli_error(cmd, "%s: %s is %u, which is not in the token list of %llu strings", model, key, id,
                  (unsigned long long)tokens.v.arr.n);
        return false;
    }
    st = hearth_gguf_array_get(g, &tokens, id, &piece);
    if (st != HEARTH_OK) {
        cli_fail(cmd, st);
        return false;
    }
    *out = malloc((size_t)piece.v.str.len + 1);
    if (!*out) {
        cli_error(cmd, "out of memory");
        return false;
    }
    memcpy(*out, piece.v.str.ptr, (size_t)piece.v.str.len);
    (*out)[piece.v.str.len] = '\0';
    return true;
}

/* A model's template and its BOS and EOS token texts. */
static int load_model(const char *model, hearth_template **tmpl, char **bos, char **eos)
{
    hearth_gguf *g;
    hearth_status st = hearth_gguf_open(model, &g);
    if (st != HEARTH_OK) return cli_fail(cmd, st);
    int rc = CLI_EXIT_OK;
    st = hearth_template_from_gguf(g, tmpl);
    if (st != HEARTH_OK) rc = cli_fail(cmd, st);
    if (rc == CLI_EXIT_OK && (!token_text(model, g, "tokenizer.ggml.bos_token_id", bos) ||
                              !token_text(model, g, "tokenizer.ggml.eos_token_id", eos)))
        rc = CLI_EXIT_FAILURE;
    hearth_gguf_close(g);
    return rc;
}

/* Whether --date, --vars and the token texts are what the library takes,
 * asked of the library itself by rendering an empty template with them:
 * a bad option is a usage error, found before any model is read. */
static int check_options(const hearth_chat_options *opts)
{
    hearth_template *empty;
    hearth_status st = hearth_template_parse("", 0, &empty);
    if (st != HEARTH_OK) return cli_fail(cmd, st);
    char *text = NULL;
    st = hearth_template_render(empty, "[]", 2, opts, &text, NULL);
    hearth_free(text);
    hearth_template_free(empty);
    if (st != HEARTH_OK) return cli_usage_error(cmd, "%s", hearth_last_error());
    return CLI_EXIT_OK;
}

/* A built-in template by name, else a file of template text. */
static int load_template(const char *spec, hearth_template **out)
{
    for (const char *const *n = hearth_template_builtin_names(); *n; n++) {
        if (strcmp(*n, spec) == 0) {
            hearth_status st = hearth_template_builtin(spec, out);
            return st == HEARTH_OK ? CLI_EXIT_OK : cli_fail(cmd, st);
        }
    }
    size_t len;
    char *text = cli_read_file(cmd, spec, &len);
    if (!text) return CLI_EXIT_FAILURE;
    hearth_status st = hearth_template_parse(text, len, out);
    free(text);
    if (st != HEARTH_OK) return cli_error(cmd, "%s: %s", spec, hearth_last_error());
    return CLI_EXIT_OK;
}

int cmd_template(int argc, char **argv)
{
    enum { OPT_BOS = 256, OPT_EOS, OPT_TOOLS, OPT_DATE, OPT_VARS };
    static const struct option longopts[] = {
        {"model", required_argument, NULL, 'm'},
        CLI_DOWNLOAD_LONG_OPTIONS,
        {"chat-template", required_argument, NULL, 't'},
        {"messages", required_argument, NULL, 'f'},
        {"no-generation-prompt", no_argument, NULL, 'n'},
        {"bos", required_argument, NULL, OPT_BOS},
        {"eos", required_argument, NULL, OPT_EOS},
        {"tools", required_argument, NULL, OPT_TOOLS},
        {"date", required_argument, NULL, OPT_DATE},
        {"vars", required_argument, NULL, OPT_VARS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct cli_model_source src;
    cli_model_source_init(&src);
    const char *chat_template = NULL, *messages_path = NULL, *tools_path = NULL;
    hearth_chat_options opts = {true, NULL, NULL, NULL, NULL, NULL};
    bool bos_given = false, eos_given = false;
    cli_model_normalize_args(argc, argv);
    optind = 0;
    int c;
    while ((c = cli_getopt(argc, argv, ":m:t:f:nh", longopts)) != -1) {
        int r = cli_model_option(cmd, &src, c, optarg);
        if (r < 0) return CLI_EXIT_USAGE;
        if (r > 0) continue;
        switch (c) {
        case 't': chat_template = optarg; break;
        case 'f': messages_path = optarg; break;
        case 'n': opts.add_generation_prompt = false; break;
        case OPT_BOS: opts.bos_token = optarg; bos_given = true; break;
        case OPT_EOS: opts.eos_token = optarg; eos_given = true; break;
        case OPT_TOOLS: tools_path = optarg; break;
        case OPT_DATE: opts.date = optarg; break;
        case OPT_VARS: opts.extra_json = optarg; break;
        case 'h':
            usage(stdout);
            return CLI_EXIT_OK;
        default:
            return cli_option_error(cmd, c, argv);
        }
    }
    if (optind < argc) return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    const bool from_model = src.path || src.hf || src.url;
    if (from_model == !!chat_template)
        return cli_usage_error(cmd, "give one of -m MODEL, -hf OWNER/REPO[:FILE], --url URL or "
                                    "--chat-template NAME|FILE");
    int rc = check_options(&opts);
    if (rc != CLI_EXIT_OK) return rc;

    hearth_template *tmpl = NULL;
    char *model_bos = NULL, *model_eos = NULL;
    char *model_path = NULL;
    if (from_model) rc = cli_model_resolve(cmd, &src, &model_path);
    if (rc == CLI_EXIT_OK)
        rc = from_model ? load_model(model_path, &tmpl, &model_bos, &model_eos)
                        : load_template(chat_template, &tmpl);
    if (!bos_given) opts.bos_token = model_bos;
    if (!eos_given) opts.eos_token = model_eos;

    char *messages = NULL, *tools = NULL;
    size_t messages_len = sizeof default_messages - 1;
    if (rc == CLI_EXIT_OK && messages_path) {
        messages = cli_read_file(cmd, messages_path, &messages_len);
        if (!messages) rc = CLI_EXIT_FAILURE;
    }
    if (rc == CLI_EXIT_OK && tools_path) {
        tools = cli_read_file(cmd, tools_path, NULL);
        if (!tools) rc = CLI_EXIT_FAILURE;
        opts.tools_json = tools;
    }
    if (rc == CLI_EXIT_OK) {
        char *text;
        size_t len;
        hearth_status st = hearth_template_render(tmpl, messages ? messages : default_messages,
                                                  messages_len, &opts, &text, &len);
        if (st != HEARTH_OK) {
            rc = cli_fail(cmd, st);
        } else {
            if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0)
                rc = cli_error(cmd, "cannot write the output");
            hearth_free(text);
        }
    }
    free(messages);
    free(tools);
    free(model_bos);
    free(model_eos);
    free(model_path);
    hearth_template_free(tmpl);
    return rc;
}

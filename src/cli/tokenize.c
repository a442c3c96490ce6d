/*
 * tokenize.c -- `hearth tokenize -m MODEL TEXT`: the tokens a model's
 * vocabulary makes of a text, one per line with its piece, as a line of
 * ids, or only their count; with --chat, of the text a chat template
 * renders for a one-message conversation, exactly as `hearth run --chat`
 * would feed it to the model.
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

#define CMD "tokenize"

enum output_format { OUTPUT_PIECES, OUTPUT_IDS, OUTPUT_COUNT };

struct tokenize_opts {
    struct cli_model_source src; /* -m, -hf or --url */
    const char *file;
    const char *text;
    enum output_format format;
    bool parse_special;
    bool add_special;
    bool default_pretokenizer;
    bool chat;
    const char *system;
    const char *template_spec;
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: hearth tokenize (-m MODEL | -hf OWNER/REPO[:FILE] | --url URL)\n"
            "                       [--ids | --count] [--special] [--no-bos]\n"
            "                       [--chat [--system TEXT] [--chat-template NAME|FILE]]\n"
            "                       [--default-pretokenizer] (TEXT | -f FILE)\n"
            "\n"
            "Show the tokens MODEL's vocabulary makes of TEXT (or of FILE, '-' for\n"
            "standard input): one per line, its id and its piece in quotes.\n"
            "  -m, --model FILE          GGUF model or vocabulary file\n"
            "  -hf, --hf OWNER/REPO[:FILE]  a model from the Hugging Face hub (downloaded\n"
            "                            into the cache on first use)\n"
            "      --url URL             a model from a URL (downloaded into the cache)\n"
            "  -f, --file FILE           read the text from FILE\n"
            "      --ids                 print only the ids, on one line\n"
            "      --count               print only the number of tokens\n"
            "      --special             match special tokens' text (\"<|im_start|>\")\n"
            "      --no-bos              do not add the BOS/EOS tokens the vocabulary adds\n"
            "      --chat                render TEXT as a user message with the chat template\n"
            "                            first (special tokens parsed, as hearth run --chat)\n"
            "      --system TEXT         a system message before it (with --chat)\n"
            "      --chat-template NAME|FILE  this template instead of the model's\n"
            "      --default-pretokenizer  use the default pre-tokenizer when the model's\n"
            "                            is unknown\n");
}

/* Bytes of the well-formed UTF-8 character at p[0..n), or 0 (the
 * Unicode Standard's table 3-7: second-byte ranges exclude overlong
 * forms, surrogates and code points above U+10FFFF). */
static size_t whole_character(const unsigned char *p, size_t n)
{
    unsigned char b = p[0], lo = 0x80, hi = 0xBF;
    size_t len;
    if (b >= 0xC2 && b <= 0xDF) {
        len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
        len = 3;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        len = 4;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (n < len || p[1] < lo || p[1] > hi) return 0;
    for (size_t k = 2; k < len; k++)
        if (p[k] < 0x80 || p[k] > 0xBF) return 0;
    return len;
}

/* The piece in double quotes, escaped so that whitespace, control bytes
 * and bytes that are not whole UTF-8 characters are visible. */
static void print_piece(const char *p, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)p[i];
        size_t len;
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else if (c < 0x80) putchar(c);
        else if ((len = whole_character((const unsigned char *)p + i, n - i)) > 0) {
            fwrite(p + i, 1, len, stdout);
            i += len;
            continue;
        } else printf("\\x%02x", c);
        i++;
    }
    putchar('"');
}

static int parse_args(int argc, char **argv, struct tokenize_opts *o)
{
    enum { OPT_IDS = 256, OPT_COUNT, OPT_SPECIAL, OPT_NO_BOS, OPT_DEFAULT_PRE, OPT_CHAT,
           OPT_SYSTEM, OPT_CHAT_TEMPLATE };
    static const struct option longopts[] = {
        {"model", required_argument, NULL, 'm'},
        CLI_DOWNLOAD_LONG_OPTIONS,
        {"file", required_argument, NULL, 'f'},
        {"ids", no_argument, NULL, OPT_IDS},
        {"count", no_argument, NULL, OPT_COUNT},
        {"special", no_argument, NULL, OPT_SPECIAL},
        {"no-bos", no_argument, NULL, OPT_NO_BOS},
        {"default-pretokenizer", no_argument, NULL, OPT_DEFAULT_PRE},
        {"chat", no_argument, NULL, OPT_CHAT},
        {"system", required_argument, NULL, OPT_SYSTEM},
        {"chat-template", required_argument, NULL, OPT_CHAT_TEMPLATE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    bool ids = false, count = false;
    cli_model_normalize_args(argc, argv);
    optind = 0;
    while ((c = cli_getopt(argc, argv, ":m:f:h", longopts)) != -1) {
        int r = cli_model_option(CMD, &o->src, c, optarg);
        if (r < 0) return CLI_EXIT_USAGE;
        if (r > 0) continue;
        switch (c) {
        case 'f': o->file = optarg; break;
        case OPT_IDS: ids = true; break;
        case OPT_COUNT: count = true; break;
        case OPT_SPECIAL: o->parse_special = true; break;
        case OPT_NO_BOS: o->add_special = false; break;
        case OPT_DEFAULT_PRE: o->default_pretokenizer = true; break;
        case OPT_CHAT: o->chat = true; break;
        case OPT_SYSTEM: o->system = optarg; break;
        case OPT_CHAT_TEMPLATE: o->template_spec = optarg; break;
        case 'h': usage(stdout); return -1;
        default: return cli_option_error(CMD, c, argv);
        }
    }
    if (ids && count) return cli_usage_error(CMD, "--ids and --count exclude each other");
    if ((o->system || o->template_spec) && !o->chat)
        return cli_usage_error(CMD, "--system and --chat-template need --chat");
    if (o->chat && (o->parse_special || !o->add_special))
        return cli_usage_error(CMD, "--chat decides special-token parsing and BOS itself; "
                                    "drop --special and --no-bos");
    o->format = ids ? OUTPUT_IDS : count ? OUTPUT_COUNT : OUTPUT_PIECES;
    int rc = cli_model_check(CMD, &o->src, true);
    if (rc != CLI_EXIT_OK) return rc;
    int n_args = argc - optind;
    if (o->file && n_args > 0)
        return cli_usage_error(CMD, "give either TEXT or -f FILE, not both");
    if (!o->file && n_args != 1)
        return cli_usage_error(CMD, n_args == 0 ? "no TEXT given (or -f FILE)"
                                                : "one TEXT expected (quote it)");
    if (!o->file) o->text = argv[optind];
    return CLI_EXIT_OK;
}

static hearth_status load_vocab(const struct tokenize_opts *o, const char *path,
                                hearth_gguf **gguf, hearth_vocab **vocab)
{
    hearth_status st = hearth_gguf_open(path, gguf);
    if (st) return st;
    hearth_vocab_options vo = {o->default_pretokenizer};
    return hearth_vocab_load(*gguf, &vo, vocab);
}

/* The tokens of the one- (or, with --system, two-) message conversation
 * rendered by the chat template.  Returns a CLI exit status. */
static int chat_tokens(const struct tokenize_opts *o, const hearth_gguf *gguf,
                       const hearth_vocab *v, const char *text, size_t len,
                       hearth_token **tokens, size_t *n)
{
    char *user = malloc(len + 1);
    if (!user) return cli_error(CMD, "out of memory");
    memcpy(user, text, len);
    user[len] = '\0';
    if (strlen(user) != len) {
        free(user);
        return cli_error(CMD, "the text contains a NUL byte; a chat message cannot");
    }
    struct chat_prompt cp;
    int rc = chat_prompt_load(CMD, o->template_spec, gguf, v, &cp);
    if (rc == CLI_EXIT_OK) {
        hearth_chat_message msgs[2];
        size_t k = 0;
        if (o->system) msgs[k++] = (hearth_chat_message){"system", o->system};
        msgs[k++] = (hearth_chat_message){"user", user};
        rc = chat_prompt_tokens(CMD, &cp, v, msgs, k, true, tokens, n);
        chat_prompt_free(&cp);
    }
    free(user);
    return rc;
}

static void print_tokens(const hearth_vocab *v, const struct tokenize_opts *o,
                         const hearth_token *tokens, size_t n)
{
    if (o->format == OUTPUT_COUNT) {
        printf("%zu\n", n);
    } else if (o->format == OUTPUT_IDS) {
        for (size_t i = 0; i < n; i++) printf("%s%ld", i ? " " : "", (long)tokens[i]);
        putchar('\n');
    } else {
        for (size_t i = 0; i < n; i++) {
            size_t len;
            const char *piece = hearth_token_piece(v, tokens[i], HEARTH_DECODE_SPECIAL, &len);
            printf("%ld\t", (long)tokens[i]);
            print_piece(piece, len);
            putchar('\n');
        }
    }
}

int cmd_tokenize(int argc, char **argv)
{
    struct tokenize_opts o = {0};
    o.add_special = true;
    int rc = parse_args(argc, argv, &o);
    if (rc < 0) return CLI_EXIT_OK;
    if (rc) return rc;

    char *model_path = NULL, *file_text = NULL;
    size_t len;
    const char *text = o.text;
    if (o.file) {
        if (!(file_text = cli_read_file(CMD, o.file, &len))) return CLI_EXIT_FAILURE;
        text = file_text;
    } else {
        len = strlen(text);
    }

    hearth_gguf *g = NULL;
    hearth_vocab *v = NULL;
    hearth_token *tokens = NULL;
    size_t n = 0;
    unsigned flags = (o.add_special ? HEARTH_TOKENIZE_ADD_SPECIAL : 0) |
                     (o.parse_special ? HEARTH_TOKENIZE_PARSE_SPECIAL : 0);
    rc = cli_model_resolve(CMD, &o.src, &model_path);
    if (rc != CLI_EXIT_OK) {
        free(file_text);
        return rc;
    }
    hearth_status st = load_vocab(&o, model_path, &g, &v);
    if (st == HEARTH_E_UNSUPPORTED && strstr(hearth_last_error(), "pre-tokenizer '")) {
        rc = cli_fail(CMD, st);
        fprintf(stderr, "hearth: %s: --default-pretokenizer tokenizes with the default one "
                        "anyway (tokens may then differ from the model's)\n", CMD);
    } else if (st) {
        rc = cli_fail(CMD, st);
    } else if (o.chat) {
        rc = chat_tokens(&o, g, v, text, len, &tokens, &n);
    } else if ((st = hearth_tokenize_alloc(v, text, len, flags, &tokens, &n))) {
        rc = cli_fail(CMD, st);
    }
    if (rc == CLI_EXIT_OK) {
        print_tokens(v, &o, tokens, n);
        if (fflush(stdout) != 0 || ferror(stdout))
            rc = cli_error(CMD, "cannot write to standard output");
    }
    hearth_free(tokens);
    hearth_vocab_free(v);
    hearth_gguf_close(g);
    free(file_text);
    free(model_path);
    return rc;
}

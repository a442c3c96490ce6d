/*
 * prompt.h -- turning user text into the tokens a model is fed, shared by
 * the commands that generate: plain tokenization, and the chat template
 * (the model's own, or one named or given with --chat-template).
 */
#ifndef HEARTH_CLI_PROMPT_H
#define HEARTH_CLI_PROMPT_H

#include <stdbool.h>
#include <stddef.h>

#include "hearth.h"

/* hearth_tokenize_alloc() (free *tokens with hearth_free()), returning a
 * CLI exit status (after printing on failure). */
int cli_tokenize(const char *cmd, const hearth_vocab *vocab, const char *text, size_t len,
                 unsigned flags, hearth_token **tokens, size_t *n_tokens);

struct chat_prompt {
    hearth_template *tmpl;
    const char *source;     /* "the model's template", a built-in name or a file */
    char *text;             /* the template's source; NULL for a built-in */
    char *bos_text;         /* text of the BOS/EOS tokens, "" when none */
    char *eos_text;
};

/* The template to use: `spec` (a built-in name or a file; NULL for the
 * tokenizer.chat_template of `gguf`, the model's file).  Returns a CLI
 * exit status. */
int chat_prompt_load(const char *cmd, const char *spec, const hearth_gguf *gguf,
                     const hearth_vocab *vocab, struct chat_prompt *cp);
void chat_prompt_free(struct chat_prompt *cp);

/* Render the conversation and tokenize the result (special-token text is
 * parsed, BOS added unless the template wrote it) as cli_tokenize() does.
 * Returns a CLI exit status. */
int chat_prompt_tokens(const char *cmd, const struct chat_prompt *cp, const hearth_vocab *vocab,
                       const hearth_chat_message *messages, size_t n_messages,
                       bool add_generation_prompt, hearth_token **tokens, size_t *n_tokens);

/* Parse a --cache-type argument (f32, f16, q8_0). */
bool cli_parse_cache_type(const char *cmd, const char *arg, hearth_type *out);

/* The context options of the generating commands: -c/--ctx-size,
 * -b/--batch, -t/--threads, --swa-full and --cache-type (whose getopt value the
 * command chose: cache_type_opt).  Zero sizes mean the library's
 * defaults. */
struct cli_context_opts {
    int n_ctx, n_batch, n_threads;
    hearth_type cache_type;
    int chunk_size;         /* --chunk-size (recurrent models); 0: the default */
    bool swa_full;          /* --swa-full */
};
#define CLI_CONTEXT_OPTS_INIT {0, 0, 0, HEARTH_TYPE_F16, 0, false}

/* The getopt values of --cache-type and --chunk-size, and the long
 * options cli_context_option() handles, for a command's table (with "c:",
 * "b:" and "t:" in its short options). */
#define CLI_OPT_CHUNK_SIZE 0x3c00
#define CLI_OPT_CACHE_TYPE 0x3c01
#define CLI_OPT_SWA_FULL 0x3c02
#define CLI_CHUNK_SIZE_LONG_OPTION {"chunk-size", required_argument, NULL, CLI_OPT_CHUNK_SIZE}
#define CLI_CONTEXT_LONG_OPTIONS \
    {"ctx-size", required_argument, NULL, 'c'}, \
    {"batch", required_argument, NULL, 'b'}, \
    {"batch-size", required_argument, NULL, 'b'}, \
    {"threads", required_argument, NULL, 't'}, \
    {"cache-type", required_argument, NULL, CLI_OPT_CACHE_TYPE}, \
    {"swa-full", no_argument, NULL, CLI_OPT_SWA_FULL}, \
    CLI_CHUNK_SIZE_LONG_OPTION
#define CLI_SWA_FULL_HELP \
    "  --swa-full               keep the sliding-window layers' keys and values\n" \
    "                           for the whole context (default: their own pool,\n" \
    "                           given back as positions leave the window)\n"
#define CLI_CHUNK_SIZE_HELP \
    "  --chunk-size N           recurrent models (RWKV-6): tokens per chunk of the\n" \
    "                           chunk-parallel prefill (default 1: token by token)\n"

/* Handle one getopt_long() result: 1 when it was a context option with a
 * valid value, 0 when it is not one, -1 after printing a usage error. */
int cli_context_option(const char *cmd, struct cli_context_opts *o, int opt, const char *arg);

/* Set the fields of p the options control. */
void cli_engine_apply(const struct cli_context_opts *o, hearth_engine_params *p);

#endif /* HEARTH_CLI_PROMPT_H */

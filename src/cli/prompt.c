/*
 * prompt.c -- tokenization and chat templates for the generating commands
 * (see prompt.h).
 */
#include "config.h"

#include "prompt.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"

int cli_tokenize(const char *cmd, const hearth_vocab *vocab, const char *text, size_t len,
                 unsigned flags, hearth_token **tokens, size_t *n_tokens)
{
    hearth_status st = hearth_tokenize_alloc(vocab, text, len, flags, tokens, n_tokens);
    if (st == HEARTH_E_NOMEM) return cli_error(cmd, "out of memory tokenizing %zu bytes", len);
    if (st) return cli_fail(cmd, st);
    return CLI_EXIT_OK;
}

static char *token_text(const hearth_vocab *vocab, hearth_special_token which)
{
    hearth_token t = hearth_vocab_special(vocab, which);
    size_t len = 0;
    const char *s = t == HEARTH_TOKEN_NONE ? "" : hearth_vocab_token_text(vocab, t, &len);
    char *copy = malloc(len + 1);
    if (copy) {
        memcpy(copy, s ? s : "", len);
        copy[len] = '\0';
    }
    return copy;
}

int chat_prompt_load(const char *cmd, const char *spec, const hearth_gguf *gguf,
                     const hearth_vocab *vocab, struct chat_prompt *cp)
{
    memset(cp, 0, sizeof *cp);
    hearth_status st;
    if (spec) {
        for (const char *const *n = hearth_template_builtin_names(); *n; n++) {
            if (strcmp(*n, spec) == 0) {
                st = hearth_template_builtin(spec, &cp->tmpl);
                if (st) return cli_fail(cmd, st);
                cp->source = spec;
                break;
            }
        }
        if (!cp->tmpl) {
            size_t len;
            char *text = cli_read_file(cmd, spec, &len);
            if (!text) return CLI_EXIT_FAILURE;
            st = hearth_template_parse(text, len, &cp->tmpl);
            if (st) {
                free(text);
                return cli_error(cmd, "%s: %s", spec, hearth_last_error());
            }
            cp->text = text;
            cp->source = spec;
        }
    } else {
        const char *text;
        st = hearth_gguf_get_str(gguf, "tokenizer.chat_template", &text);
        if (st == HEARTH_E_NOT_FOUND)
            return cli_error(cmd, "the model has no chat template; give one with --chat-template "
                             "NAME|FILE");
        if (st) return cli_fail(cmd, st);
        st = hearth_template_parse(text, strlen(text), &cp->tmpl);
        if (st) return cli_error(cmd, "the model's chat template: %s", hearth_last_error());
        cp->source = "the model's template";
        cp->text = strdup(text);
    }
    cp->bos_text = token_text(vocab, HEARTH_SPECIAL_BOS);
    cp->eos_text = token_text(vocab, HEARTH_SPECIAL_EOS);
    if (!cp->bos_text || !cp->eos_text || (!spec && !cp->text)) {
        chat_prompt_free(cp);
        return cli_error(cmd, "out of memory");
    }
    return CLI_EXIT_OK;
}

void chat_prompt_free(struct chat_prompt *cp)
{
    hearth_template_free(cp->tmpl);
    free(cp->text);
    free(cp->bos_text);
    free(cp->eos_text);
    memset(cp, 0, sizeof *cp);
}

int chat_prompt_tokens(const char *cmd, const struct chat_prompt *cp, const hearth_vocab *vocab,
                       const hearth_chat_message *messages, size_t n_messages,
                       bool add_generation_prompt, hearth_token **tokens, size_t *n_tokens)
{
    hearth_chat_options opts;
    memset(&opts, 0, sizeof opts);
    opts.add_generation_prompt = add_generation_prompt;
    opts.bos_token = cp->bos_text;
    opts.eos_token = cp->eos_text;
    char *text;
    size_t len;
    hearth_status st = hearth_template_render_messages(cp->tmpl, messages, n_messages, &opts, &text, &len);
    if (st) return cli_error(cmd, "chat template (%s): %s", cp->source, hearth_last_error());
    int rc = cli_tokenize(cmd, vocab, text, len, hearth_chat_tokenize_flags(vocab, text, len),
                          tokens, n_tokens);
    hearth_free(text);
    return rc;
}

int cli_context_option(const char *cmd, struct cli_context_opts *o, int opt, const char *arg)
{
    bool ok;
    if (opt == 'c') ok = cli_parse_int(cmd, "--ctx-size", arg, 1, 1 << 24, &o->n_ctx);
    else if (opt == 'b') ok = cli_parse_int(cmd, "--batch", arg, 1, 1 << 20, &o->n_batch);
    else if (opt == 't') ok = cli_parse_int(cmd, "--threads", arg, 1, 1024, &o->n_threads);
    else if (opt == CLI_OPT_CACHE_TYPE) ok = cli_parse_cache_type(cmd, arg, &o->cache_type);
    else if (opt == CLI_OPT_CHUNK_SIZE) ok = cli_parse_int(cmd, "--chunk-size", arg, 1, 4096, &o->chunk_size);
    else if (opt == CLI_OPT_SWA_FULL) ok = o->swa_full = true;
    else return 0;
    return ok ? 1 : -1;
}

void cli_engine_apply(const struct cli_context_opts *o, hearth_engine_params *p)
{
    p->n_ctx = o->n_ctx;
    p->n_batch = o->n_batch;
    p->n_threads = o->n_threads;
    p->cache_type = o->cache_type;
    p->chunk_size = o->chunk_size;
    p->swa_full = o->swa_full;
}

bool cli_parse_cache_type(const char *cmd, const char *arg, hearth_type *out)
{
    if (strcasecmp(arg, "f32") == 0) *out = HEARTH_TYPE_F32;
    else if (strcasecmp(arg, "f16") == 0) *out = HEARTH_TYPE_F16;
    else if (strcasecmp(arg, "q8_0") == 0) *out = HEARTH_TYPE_Q8_0;
    else {
        cli_usage_error(cmd, "--cache-type: '%s' is not one of f32, f16, q8_0", arg);
        return false;
    }
    return true;
}

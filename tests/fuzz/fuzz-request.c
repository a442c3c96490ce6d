/*
 * fuzz-request.c -- fuzz target for hearth serve's request parsing and
 * checks (src/server/request.c): the first byte of an input picks the
 * endpoint (modulo 4: chat completions, completions, tokenize,
 * detokenize; but 4 modulo 16 picks the Responses API and 12 modulo 16
 * embeddings), the rest is the request body.  Every body goes first
 * through srv_request_peek() (the model it names, whether it streams),
 * which must accept whatever a full parse accepts and agree with it on
 * the stream.  A body that is accepted must give
 * parameters the engine accepts (hearth_sampler_params_check) and, for
 * chat, messages the built-in ChatML template renders, and tool calls
 * read or forced only where tools were given.  Every refusal must be a
 * 4xx with a message naming the problem; nothing may crash, hang or
 * leak.
 *
 * Run (see configure --enable-fuzzing) with a corpus directory seeded
 * from tests/fuzz/regressions-request:
 *   tests/fuzz/fuzz-request -max_len=65536 corpus
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hearth.h"
#include "request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_error(const struct srv_error *e)
{
    if (e->status < 400 || e->status > 599 || !e->type || !e->message[0]) abort();
    if (hearth_utf8_valid_prefix(e->message, strlen(e->message)) != strlen(e->message)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    const char *body = (const char *)data + 1;
    const size_t len = size - 1;
    struct srv_error e;
    memset(&e, 0, sizeof e);
    hearth_sampler_params defaults;
    hearth_sampler_params_default(&defaults);
    const struct srv_limits lim = {512, 1024, &defaults, -1};
    /* what the server reads before the model's limits are known */
    char *model = NULL;
    bool stream = false;
    const bool peeked = srv_request_peek(body, len, &model, &stream, &e);
    if (!peeked) check_error(&e);
    else if (model && strlen(model) > len) abort();
    free(model);
    memset(&e, 0, sizeof e);
    if (data[0] % 16 == 12) {
        /* an accepted request has 1 .. SRV_MAX_EMBED_INPUTS inputs, none
         * empty, token ids in the vocabulary, dimensions 0 or 1 .. 256 */
        struct srv_embeddings em;
        if (!srv_embeddings_parse(body, len, 512, 256, &em, &e)) {
            check_error(&e);
            return 0;
        }
        if (em.n_inputs < 1 || em.n_inputs > SRV_MAX_EMBED_INPUTS || em.dimensions < 0 || em.dimensions > 256) abort();
        for (size_t i = 0; i < em.n_inputs; i++) {
            const struct srv_prompt *in = &em.inputs[i];
            if (in->text ? in->len == 0 || in->tokens : in->n_tokens == 0) abort();
            for (size_t k = 0; k < in->n_tokens; k++)
                if (in->tokens[k] < 0 || in->tokens[k] >= 512) abort();
        }
        srv_embeddings_free(&em);
        return 0;
    }
    const int endpoint = data[0] % 16 == 4 ? 4 : data[0] % 4;
    switch (endpoint) {
    case 0:
    case 1:
    case 4: {
        struct srv_request r;
        const enum srv_kind kind = endpoint == 4 ? SRV_RESPONSES : endpoint == 0 ? SRV_CHAT : SRV_COMPLETION;
        if (!srv_request_parse(kind, body, len, &lim, &r, &e)) {
            check_error(&e);
            break;
        }
        if (!peeked || stream != r.stream) abort();
        if (hearth_sampler_params_check(&r.sampling) != HEARTH_OK) abort();
        if (r.n < 1 || r.n > SRV_MAX_N || r.max_tokens == 0 || r.max_tokens > 1024) abort();
        for (size_t i = 0; i < r.n_stop; i++)
            if (!r.stop[i][0]) abort();
        /* a call is read or forced only with tools, named only with a name */
        if (r.tool_choice != SRV_TOOL_NONE && !r.tools_json) abort();
        if ((r.tool_choice == SRV_TOOL_NAMED) != (r.tool_name != NULL)) abort();
        /* a response repeats fields of its request: an object */
        if ((kind == SRV_RESPONSES) != (r.echo_json != NULL) || r.n_instructions > 1) abort();
        if (r.echo_json && (r.echo_json[0] != '{' || r.n != 1)) abort();
        if (srv_kind_chat(kind)) {
            hearth_template *t;
            if (hearth_template_builtin("chatml", &t) != HEARTH_OK) abort();
            char *text = NULL;
            hearth_chat_options o;
            memset(&o, 0, sizeof o);
            o.add_generation_prompt = true;
            /* the messages were written by the parser: they must read back */
            hearth_status st = hearth_template_render(t, r.messages_json, strlen(r.messages_json), &o,
                                                      &text, NULL);
            if (st == HEARTH_E_FORMAT) abort();
            hearth_free(text);
            hearth_template_free(t);
        } else if (r.n_prompts < 1 || r.n_prompts > SRV_MAX_PROMPTS) {
            abort();
        }
        srv_request_free(&r);
        break;
    }
    case 2: {
        struct srv_tokenize t;
        if (srv_tokenize_parse(body, len, &t, &e)) srv_tokenize_free(&t);
        else check_error(&e);
        break;
    }
    default: {
        struct srv_detokenize d;
        if (srv_detokenize_parse(body, len, 512, &d, &e)) {
            for (size_t i = 0; i < d.n_tokens; i++)
                if (d.tokens[i] < 0 || d.tokens[i] >= 512) abort();
            srv_detokenize_free(&d);
        } else {
            check_error(&e);
        }
        break;
    }
    }
    return 0;
}

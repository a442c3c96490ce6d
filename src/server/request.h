/*
 * request.h -- the body of an OpenAI API request turned into generation
 * parameters, with every field checked: the first step of a request's
 * path through hearth serve (request -> server -> engine).
 *
 * Parsing needs no model: the limits it checks against (vocabulary size,
 * the max_tokens cap, the sampling defaults) come in a srv_limits.  A
 * field hearth does not know is ignored; a known field of the wrong type
 * or out of range is an error naming it, as the OpenAI API does.
 */
#ifndef HEARTH_SERVER_REQUEST_H
#define HEARTH_SERVER_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"

/* The endpoint: chat completions, completions, or the Responses API,
 * whose input becomes a chat's messages (a chat to everything after the
 * parser but the JSON the server sends). */
enum srv_kind { SRV_CHAT, SRV_COMPLETION, SRV_RESPONSES };

/* Whether requests of kind are chats (a template renders their messages). */
static inline bool srv_kind_chat(enum srv_kind kind)
{
    return kind != SRV_COMPLETION;
}

/* Most prompts in one completions request, samples per prompt, stop
 * strings, top log probabilities. */
#define SRV_MAX_PROMPTS 16
#define SRV_MAX_N 16
#define SRV_MAX_STOP 16
#define SRV_MAX_TOP_LOGPROBS 20
/* The largest reasoning budget, as hearth serve's --reasoning-budget. */
#define SRV_MAX_REASONING_BUDGET (1 << 30)

/* An error for the client: HTTP status and the OpenAI error object. */
struct srv_error {
    int status;               /* 400, 413, ... */
    const char *type;         /* "invalid_request_error", ... */
    const char *code;         /* "invalid_value", ... or NULL */
    char param[96];           /* the field at fault, "" for none */
    char message[512];
};

/* Fill err and return false (for `return srv_fail(...)`). */
bool srv_fail(struct srv_error *err, int status, const char *type, const char *code,
              const char *param, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;

/* One prompt of a completions request: text or token ids. */
struct srv_prompt {
    char *text;               /* NUL-terminated, or NULL for tokens */
    size_t len;
    hearth_token *tokens;
    size_t n_tokens;
};

/* What constrains the output (response_format, or the grammar extension). */
enum srv_grammar {
    SRV_GRAMMAR_NONE = 0,
    SRV_GRAMMAR_JSON_OBJECT,  /* response_format json_object */
    SRV_GRAMMAR_JSON_SCHEMA,  /* response_format json_schema: grammar_text is the schema */
    SRV_GRAMMAR_GBNF          /* "grammar": grammar_text is GBNF */
};

/* What tool_choice asks for (tools given; SRV_TOOL_NONE otherwise). */
enum srv_tool_choice {
    SRV_TOOL_NONE = 0,        /* no tool calls are read from the output */
    SRV_TOOL_AUTO,            /* calls the model writes are read */
    SRV_TOOL_REQUIRED,        /* a grammar forces a call of one of the tools */
    SRV_TOOL_NAMED            /* ... of the tool tool_name */
};

struct srv_request {
    enum srv_kind kind;
    /* chat: the messages as a JSON array for the template, every content
     * a string (text parts joined, null as "") */
    char *messages_json;
    /* completions: the prompts (one at least) */
    struct srv_prompt prompts[SRV_MAX_PROMPTS];
    size_t n_prompts;
    hearth_sampler_params sampling;  /* sampling.logit_bias -> bias */
    bool seed_given;
    hearth_logit_bias *bias;
    size_t n_bias;
    char *stop[SRV_MAX_STOP];
    size_t n_stop;
    int32_t max_tokens;       /* as in hearth_request: the one given, else
                               * the cap (< 0: no limit) */
    int32_t n;                /* samples per prompt */
    bool logprobs;            /* log probabilities of the tokens */
    int32_t top_logprobs;     /* alternatives per token, 0 .. 20 */
    bool stream;
    bool include_usage;       /* stream_options.include_usage */
    bool echo;                /* completions: the prompt before the text */
    bool ignore_eos;          /* hearth: go on past end-of-generation tokens */
    char *user;
    enum srv_grammar grammar; /* checked here; compiled by the server, which
                               * puts it in sampling.grammar (freed here) */
    char *grammar_text;
    char *schema_gbnf;        /* json_schema: the schema as GBNF, translated
                               * once here and compiled by the server */
    /* chat: the tools as a JSON array for the template, checked (NULL:
     * none given, or tool_choice "none"), and what tool_choice asks */
    char *tools_json;
    enum srv_tool_choice tool_choice;
    char *tool_name;          /* SRV_TOOL_NAMED */
    /* chat: "low", "medium" or "high" (a static string), NULL when not
     * given: the template's variable reasoning_effort */
    const char *reasoning_effort;
    /* chat: the most tokens of reasoning (thinking_budget_tokens, else the
     * server's), as hearth_request.reasoning_budget (< 0: no limit) */
    int32_t reasoning_budget;
    /* responses: the first n_instructions (0 or 1) of the messages are the
     * instructions, which a later response does not inherit */
    size_t n_instructions;
    char *previous_response_id; /* NULL: none */
    bool store;               /* keep the response for previous_response_id */
    bool parallel_tool_calls; /* false: at most one call is read */
    /* responses: the request's fields a response object repeats
     * (instructions, tools, tool_choice, text, ...), a JSON object */
    char *echo_json;
};

struct srv_limits {
    int32_t n_vocab;                    /* token ids 0 .. n_vocab-1; 0: unchecked */
    int32_t max_tokens_cap;             /* most max_tokens a request may ask */
    const hearth_sampler_params *defaults; /* the server's sampling flags */
    int32_t reasoning_budget;           /* a chat request's unless it gives
                                         * one (--reasoning-budget); -1: no
                                         * limit */
};

/* Parse and check a request body of len bytes.  On failure *err says why
 * (status 400) and out holds nothing to free. */
bool srv_request_parse(enum srv_kind kind, const char *body, size_t len,
                       const struct srv_limits *limits, struct srv_request *out,
                       struct srv_error *err);
void srv_request_free(struct srv_request *r);

/* The field a request's grammar comes from ("grammar", "response_format"
 * or "tools" for a forced tool call), NULL without one: the parameter an
 * error of the grammar names. */
const char *srv_request_grammar_param(const struct srv_request *r);

/* POST /v1/embeddings: "input" (a string, an array of strings, an array
 * of token ids or an array of arrays of token ids; each one input,
 * none empty), "model", "encoding_format" ("float", the default, or
 * "base64": the little-endian float32 bytes), "dimensions" (1 to n_embd:
 * the vector cut to its first components and scaled to unit length
 * again) and "user".  Any other field is refused, naming it. */
#define SRV_MAX_EMBED_INPUTS 2048
struct srv_embeddings {
    struct srv_prompt *inputs;
    size_t n_inputs;
    bool base64;
    int32_t dimensions;       /* 0: not given (every component) */
    char *user;
};
bool srv_embeddings_parse(const char *body, size_t len, int32_t n_vocab, int32_t n_embd,
                          struct srv_embeddings *out, struct srv_error *err);
void srv_embeddings_free(struct srv_embeddings *e);

/* What a request body says before it can be checked in full, which
 * needs its model's limits: the model it names (*model malloc'ed, NULL
 * when it names none) and whether it asks for a stream (false unless
 * "stream" is true).  false with the body's error: not a JSON object,
 * a "model" that is not a string. */
bool srv_request_peek(const char *body, size_t len, char **model, bool *stream, struct srv_error *err);

/* POST /tokenize: {"content", "add_special", "parse_special", "with_pieces"}
 * (and "model", read by srv_request_peek()). */
struct srv_tokenize {
    char *content;
    size_t len;
    bool add_special, parse_special, with_pieces;
};
bool srv_tokenize_parse(const char *body, size_t len, struct srv_tokenize *out,
                        struct srv_error *err);
void srv_tokenize_free(struct srv_tokenize *t);

/* POST /detokenize: {"tokens": [ids]}. */
struct srv_detokenize {
    hearth_token *tokens;
    size_t n_tokens;
};
bool srv_detokenize_parse(const char *body, size_t len, int32_t n_vocab,
                          struct srv_detokenize *out, struct srv_error *err);
void srv_detokenize_free(struct srv_detokenize *d);

#endif /* HEARTH_SERVER_REQUEST_H */

/*
 * request.c -- OpenAI request bodies to generation parameters (see
 * request.h).  Every check names the field, in the JSON path a client
 * wrote ("messages[2].content", "logit_bias"), and a null field is the
 * same as an absent one, as the official clients send them.
 */
#include "request.h"

#include <errno.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LOGIT_BIAS 1024

/* Messages quote what clients sent, and snprintf may cut a character:
 * every byte that is not part of valid UTF-8 becomes '?'. */
static void repair_utf8(char *s)
{
    const size_t n = strlen(s);
    for (size_t i = hearth_utf8_valid_prefix(s, n); i < n; i += hearth_utf8_valid_prefix(s + i, n - i))
        s[i++] = '?';
}

bool srv_fail(struct srv_error *err, int status, const char *type, const char *code,
              const char *param, const char *fmt, ...)
{
    err->status = status;
    err->type = type;
    err->code = code;
    snprintf(err->param, sizeof err->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    repair_utf8(err->message);
    repair_utf8(err->param);
    return false;
}

static bool bad(struct srv_error *err, const char *param, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static bool bad(struct srv_error *err, const char *param, const char *fmt, ...)
{
    char msg[sizeof err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return srv_fail(err, 400, "invalid_request_error", "invalid_value", param, "%s", msg);
}


/* Whether the JSON text before byte `end` (where the parser stopped on a
 * number) is the key "seed" and its colon. */
static bool names_seed(const char *body, size_t end)
{
    size_t i = end;
    while (i > 0 && (body[i - 1] >= '0' && body[i - 1] <= '9')) i--; /* the number read so far */
    while (i > 0 && strchr(" \t\r\n", body[i - 1])) i--;
    if (i == 0 || body[--i] != ':') return false;
    while (i > 0 && strchr(" \t\r\n", body[i - 1])) i--;
    return i >= 6 && memcmp(body + i - 6, "\"seed\"", 6) == 0;
}

/* The body as a JSON object. */
static json_t *load_object(const char *body, size_t len, struct srv_error *err)
{
    if (len == 0) {
        bad(err, NULL, "the request body is empty; a JSON object was expected");
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loadb(body, len, 0, &je);
    if (!root && json_error_code(&je) == json_error_numeric_overflow && names_seed(body, je.position)) {
        bad(err, "seed", "'seed' must be from 0 to %llu (leave it out for a random one)",
            (unsigned long long)HEARTH_SEED_MAX);
        return NULL;
    }
    if (!root) {
        srv_fail(err, 400, "invalid_request_error", "invalid_json", NULL,
                 "the request body is not valid JSON: %s (line %d, column %d)", je.text, je.line,
                 je.column);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        bad(err, NULL, "the request body must be a JSON object");
        return NULL;
    }
    return root;
}

/* A field, NULL when absent or null. */
static json_t *field(json_t *obj, const char *name)
{
    json_t *v = json_object_get(obj, name);
    return v && !json_is_null(v) ? v : NULL;
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

static bool get_bool(json_t *obj, const char *name, bool *out, struct srv_error *err)
{
    json_t *v = field(obj, name);
    if (!v) return true;
    if (!json_is_boolean(v)) return bad(err, name, "'%s' must be a boolean, not %s", name, type_name(v));
    *out = json_is_true(v);
    return true;
}

/* A number within [lo, hi]; *given says whether it was there. */
static bool get_number(json_t *obj, const char *name, double lo, double hi, double *out,
                       bool *given, struct srv_error *err)
{
    json_t *v = field(obj, name);
    if (given) *given = v != NULL;
    if (!v) return true;
    if (!json_is_number(v)) return bad(err, name, "'%s' must be a number, not %s", name, type_name(v));
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi)
        return bad(err, name, "'%s' is %g; it must be from %g to %g", name, x, lo, hi);
    *out = x;
    return true;
}

static bool get_float(json_t *obj, const char *name, double lo, double hi, float *out,
                      struct srv_error *err)
{
    double x = 0;
    bool given;
    if (!get_number(obj, name, lo, hi, &x, &given, err)) return false;
    if (given) *out = (float)x;
    return true;
}

/* An integer (or a number with an integral value) within [lo, hi]. */
static bool get_int(json_t *obj, const char *name, int64_t lo, int64_t hi, int64_t *out,
                    bool *given, struct srv_error *err)
{
    json_t *v = field(obj, name);
    if (given) *given = v != NULL;
    if (!v) return true;
    int64_t x = 0;
    if (json_is_integer(v)) {
        x = json_integer_value(v);
    } else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
               fabs(json_real_value(v)) < 9e15) {
        x = (int64_t)json_real_value(v);
    } else {
        return bad(err, name, "'%s' must be an integer, not %s", name, type_name(v));
    }
    if (x < lo || x > hi)
        return bad(err, name, "'%s' is %lld; it must be from %lld to %lld", name, (long long)x,
                   (long long)lo, (long long)hi);
    *out = x;
    return true;
}

static char *dup_n(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

static bool oom(struct srv_error *err)
{
    return srv_fail(err, 500, "server_error", NULL, NULL, "out of memory");
}

/* The text of a message's content: a string, null, or an array of parts
 * of which only text parts are understood. */
static bool content_text(json_t *content, size_t index, json_t **out, struct srv_error *err)
{
    char param[64];
    snprintf(param, sizeof param, "messages[%zu].content", index);
    if (!content || json_is_null(content)) {
        *out = json_string("");
        return *out ? true : oom(err);
    }
    if (json_is_string(content)) {
        *out = json_incref(content);
        return true;
    }
    if (!json_is_array(content))
        return bad(err, param, "'%s' must be a string or an array of content parts, not %s", param,
                   type_name(content));
    size_t total = 0, i;
    json_t *part;
    json_array_foreach(content, i, part) {
        char pp[96];
        snprintf(pp, sizeof pp, "%s[%zu]", param, i);
        if (!json_is_object(part)) return bad(err, pp, "'%s' must be an object", pp);
        json_t *type = json_object_get(part, "type");
        if (!json_is_string(type)) return bad(err, pp, "'%s' has no string 'type'", pp);
        if (strcmp(json_string_value(type), "text") != 0)
            return bad(err, pp, "content parts of type '%s' are not supported (only 'text')",
                       json_string_value(type));
        json_t *text = json_object_get(part, "text");
        if (!json_is_string(text)) return bad(err, pp, "'%s.text' must be a string", pp);
        total += json_string_length(text) + 1;
    }
    char *buf = malloc(total + 1), *w = buf;
    if (!buf) return oom(err);
    json_array_foreach(content, i, part) {
        json_t *text = json_object_get(part, "text");
        if (i > 0) *w++ = '\n';
        memcpy(w, json_string_value(text), json_string_length(text));
        w += json_string_length(text);
    }
    *out = json_stringn(buf, (size_t)(w - buf));
    free(buf);
    return *out ? true : oom(err);
}

/* An assistant message's tool_calls as templates read them: a null list
 * is none (templates test whether the key is there), and each
 * function.arguments that is a JSON string of an object (as the API
 * sends it) becomes that object (as templates write it out). */
static bool tool_calls_for_template(json_t *m, size_t index, struct srv_error *err)
{
    json_t *calls = json_object_get(m, "tool_calls");
    if (!calls) return true;
    if (json_is_null(calls)) {
        json_object_del(m, "tool_calls");
        return true;
    }
    char param[64];
    snprintf(param, sizeof param, "messages[%zu].tool_calls", index);
    if (!json_is_array(calls)) return bad(err, param, "'%s' must be an array, not %s", param, type_name(calls));
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c) {
        json_t *fn = json_is_object(c) ? json_object_get(c, "function") : NULL;
        if (!json_is_object(fn) || !json_is_string(json_object_get(fn, "name"))) {
            snprintf(param, sizeof param, "messages[%zu].tool_calls[%zu]", index, i);
            return bad(err, param, "'%s' must be an object with a 'function' that has a 'name'", param);
        }
        json_t *args = json_object_get(fn, "arguments");
        if (json_is_string(args)) {
            json_t *v = json_loadb(json_string_value(args), json_string_length(args), 0, NULL);
            if (json_is_object(v)) json_object_set_new(fn, "arguments", v);
            else json_decref(v);
        }
    }
    return true;
}

static bool parse_messages(json_t *root, struct srv_request *r, struct srv_error *err)
{
    json_t *msgs = field(root, "messages");
    if (!msgs)
        return srv_fail(err, 400, "invalid_request_error", "missing_required_parameter", "messages",
                        "'messages' is required");
    if (!json_is_array(msgs))
        return bad(err, "messages", "'messages' must be an array, not %s", type_name(msgs));
    if (json_array_size(msgs) == 0) return bad(err, "messages", "'messages' is empty");
    json_t *out = json_array();
    if (!out) return oom(err);
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        char param[64];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(m)) {
            json_decref(out);
            return bad(err, param, "'%s' must be an object, not %s", param, type_name(m));
        }
        json_t *role = json_object_get(m, "role");
        if (!json_is_string(role) || json_string_length(role) == 0) {
            json_decref(out);
            snprintf(param, sizeof param, "messages[%zu].role", i);
            return bad(err, param, "'%s' must be a non-empty string", param);
        }
        static const char *const roles[] = {"system", "developer", "user", "assistant", "tool",
                                            "function", "ipython"};
        bool known = false;
        for (size_t k = 0; k < sizeof roles / sizeof roles[0]; k++)
            known |= strcmp(json_string_value(role), roles[k]) == 0;
        if (!known) {
            json_decref(out);
            snprintf(param, sizeof param, "messages[%zu].role", i);
            return bad(err, param, "'%s' is '%.40s', not one of system, developer, user, assistant, "
                       "tool, function, ipython", param, json_string_value(role));
        }
        json_t *name = json_object_get(m, "name");
        if (name && !json_is_null(name) && !json_is_string(name)) {
            json_decref(out);
            snprintf(param, sizeof param, "messages[%zu].name", i);
            return bad(err, param, "'%s' must be a string, not %s", param, type_name(name));
        }
        json_t *text = NULL;
        if (!content_text(json_object_get(m, "content"), i, &text, err)) {
            json_decref(out);
            return false;
        }
        json_t *copy = json_copy(m);
        /* the role newer clients give the system prompt */
        if (copy && strcmp(json_string_value(role), "developer") == 0)
            json_object_set_new(copy, "role", json_string("system"));
        if (!copy || json_object_set_new(copy, "content", text) || json_array_append_new(out, copy)) {
            json_decref(copy);
            json_decref(out);
            return oom(err);
        }
        if (!tool_calls_for_template(copy, i, err)) {
            json_decref(out);
            return false;
        }
    }
    r->messages_json = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    return r->messages_json ? true : oom(err);
}

/* An array of token ids, each in the vocabulary. */
static bool token_array(json_t *a, const char *param, int32_t n_vocab, hearth_token **out,
                        size_t *n_out, struct srv_error *err)
{
    size_t n = json_array_size(a), i;
    if (n == 0) return bad(err, param, "'%s' is an empty list of tokens", param);
    hearth_token *t = malloc(n * sizeof *t);
    if (!t) return oom(err);
    json_t *v;
    json_array_foreach(a, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            (n_vocab > 0 && json_integer_value(v) >= n_vocab) || json_integer_value(v) > INT32_MAX) {
            free(t);
            if (!json_is_integer(v))
                return bad(err, param, "'%s[%zu]' must be a token id, not %s", param, i, type_name(v));
            return bad(err, param, "'%s[%zu]' is %lld, not a token id (0 to %d)", param, i,
                       (long long)json_integer_value(v), n_vocab - 1);
        }
        t[i] = (hearth_token)json_integer_value(v);
    }
    *out = t;
    *n_out = n;
    return true;
}

static bool parse_prompts(json_t *root, struct srv_request *r, int32_t n_vocab,
                          struct srv_error *err)
{
    json_t *p = field(root, "prompt");
    if (!p)
        return srv_fail(err, 400, "invalid_request_error", "missing_required_parameter", "prompt",
                        "'prompt' is required");
    if (json_is_string(p)) {
        r->prompts[0].text = dup_n(json_string_value(p), json_string_length(p));
        r->prompts[0].len = json_string_length(p);
        r->n_prompts = 1;
        return r->prompts[0].text ? true : oom(err);
    }
    if (!json_is_array(p))
        return bad(err, "prompt", "'prompt' must be a string, an array of strings or an array of "
                   "token ids, not %s", type_name(p));
    size_t n = json_array_size(p);
    if (n == 0) return bad(err, "prompt", "'prompt' is an empty array");
    if (json_is_integer(json_array_get(p, 0))) {
        r->n_prompts = 1;
        return token_array(p, "prompt", n_vocab, &r->prompts[0].tokens, &r->prompts[0].n_tokens, err);
    }
    if (n > SRV_MAX_PROMPTS)
        return bad(err, "prompt", "'prompt' holds %zu prompts; at most %d are allowed", n,
                   SRV_MAX_PROMPTS);
    size_t i;
    json_t *v;
    json_array_foreach(p, i, v) {
        char param[32];
        snprintf(param, sizeof param, "prompt[%zu]", i);
        struct srv_prompt *sp = &r->prompts[i];
        r->n_prompts = i + 1;
        if (json_is_string(v)) {
            sp->len = json_string_length(v);
            sp->text = dup_n(json_string_value(v), sp->len);
            if (!sp->text) return oom(err);
        } else if (json_is_array(v)) {
            if (!token_array(v, param, n_vocab, &sp->tokens, &sp->n_tokens, err)) return false;
        } else {
            return bad(err, param, "'%s' must be a string or an array of token ids, not %s", param,
                       type_name(v));
        }
    }
    return true;
}

static bool parse_stop(json_t *root, struct srv_request *r, struct srv_error *err)
{
    json_t *s = field(root, "stop");
    if (!s) return true;
    if (json_is_string(s)) {
        if (json_string_length(s) == 0) return bad(err, "stop", "'stop' is an empty string");
        r->stop[0] = dup_n(json_string_value(s), json_string_length(s));
        r->n_stop = 1;
        return r->stop[0] ? true : oom(err);
    }
    if (!json_is_array(s))
        return bad(err, "stop", "'stop' must be a string or an array of strings, not %s", type_name(s));
    if (json_array_size(s) > SRV_MAX_STOP)
        return bad(err, "stop", "'stop' holds %zu strings; at most %d are allowed",
                   json_array_size(s), SRV_MAX_STOP);
    size_t i;
    json_t *v;
    json_array_foreach(s, i, v) {
        if (!json_is_string(v) || json_string_length(v) == 0)
            return bad(err, "stop", "'stop[%zu]' must be a non-empty string", i);
        /* a stop string holding NUL cannot be passed on; jansson refuses
         * \u0000 in strings anyway */
        r->stop[r->n_stop] = dup_n(json_string_value(v), json_string_length(v));
        if (!r->stop[r->n_stop]) return oom(err);
        r->n_stop++;
    }
    return true;
}

static bool parse_logit_bias(json_t *root, struct srv_request *r, int32_t n_vocab,
                             struct srv_error *err)
{
    json_t *b = field(root, "logit_bias");
    if (!b) return true;
    if (!json_is_object(b))
        return bad(err, "logit_bias", "'logit_bias' must be an object mapping token ids to biases, "
                   "not %s", type_name(b));
    size_t n = json_object_size(b);
    if (n == 0) return true;
    if (n > MAX_LOGIT_BIAS)
        return bad(err, "logit_bias", "'logit_bias' has %zu entries; at most %d are allowed", n,
                   MAX_LOGIT_BIAS);
    r->bias = calloc(n, sizeof *r->bias);
    if (!r->bias) return oom(err);
    const char *key;
    json_t *v;
    json_object_foreach(b, key, v) {
        char *end;
        errno = 0;
        long id = strtol(key, &end, 10);
        if (end == key || *end || errno || id < 0 || (n_vocab > 0 && id >= n_vocab) || id > INT32_MAX)
            return bad(err, "logit_bias", "'logit_bias' key '%.40s' is not a token id (0 to %d)", key,
                       n_vocab - 1);
        if (!json_is_number(v))
            return bad(err, "logit_bias", "'logit_bias[\"%s\"]' must be a number, not %s", key,
                       type_name(v));
        double x = json_number_value(v);
        if (!(x >= -100 && x <= 100))
            return bad(err, "logit_bias", "'logit_bias[\"%s\"]' is %g; it must be from -100 to 100",
                       key, x);
        r->bias[r->n_bias].token = (int32_t)id;
        r->bias[r->n_bias].bias = (float)x;
        r->n_bias++;
    }
    r->sampling.logit_bias = r->bias;
    r->sampling.n_logit_bias = r->n_bias;
    return true;
}

/* A tool's name: what the OpenAI API allows, which also keeps it plain
 * in every tool-call format. */
static bool tool_name_ok(const char *s, size_t n)
{
    if (n == 0 || n > 64) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
            return false;
    return true;
}

/* The object of a tool that holds its name, description and parameters:
 * chat's tool nests it under "function", the Responses API's is flat. */
static json_t *tool_function(json_t *tool, bool flat)
{
    return flat ? tool : json_object_get(tool, "function");
}

/* tools: [{"type": "function", "function": {"name", "description"?,
 * "parameters"?}}], or with flat (the Responses API) [{"type":
 * "function", "name", "description"?, "parameters"?, "strict"?}]; with
 * forced=true each parameters schema must translate to a grammar. */
static bool check_tools(json_t *tools, bool flat, bool forced, struct srv_error *err)
{
    const char *fn_path = flat ? "" : ".function";
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        char p[96];
        snprintf(p, sizeof p, "tools[%zu]", i);
        if (!json_is_object(t)) return bad(err, p, "'%s' must be an object, not %s", p, type_name(t));
        json_t *type = json_object_get(t, "type");
        if (!json_is_string(type) || strcmp(json_string_value(type), "function") != 0) {
            snprintf(p, sizeof p, "tools[%zu].type", i);
            if (flat && json_is_string(type))
                return srv_fail(err, 400, "invalid_request_error", "unsupported_value", p,
                                "'%s' is '%.40s': this server runs function tools only, no built-in "
                                "tools", p, json_string_value(type));
            return bad(err, p, "'%s' must be \"function\"", p);
        }
        json_t *fn = tool_function(t, flat);
        if (!json_is_object(fn)) {
            snprintf(p, sizeof p, "tools[%zu].function", i);
            return bad(err, p, "'%s' must be an object with a 'name'", p);
        }
        json_t *name = json_object_get(fn, "name");
        if (!json_is_string(name) || !tool_name_ok(json_string_value(name), json_string_length(name))) {
            snprintf(p, sizeof p, "tools[%zu]%s.name", i, fn_path);
            return bad(err, p, "'%s' must be a string of 1 to 64 letters, digits, '_' or '-'", p);
        }
        for (size_t k = 0; k < i; k++) {
            json_t *other = json_object_get(tool_function(json_array_get(tools, k), flat), "name");
            if (strcmp(json_string_value(other), json_string_value(name)) == 0) {
                snprintf(p, sizeof p, "tools[%zu]%s.name", i, fn_path);
                return bad(err, p, "'%s': tools[%zu] has the name '%s' already", p, k,
                           json_string_value(name));
            }
        }
        json_t *desc = json_object_get(fn, "description");
        if (desc && !json_is_null(desc) && !json_is_string(desc)) {
            snprintf(p, sizeof p, "tools[%zu]%s.description", i, fn_path);
            return bad(err, p, "'%s' must be a string, not %s", p, type_name(desc));
        }
        json_t *strict = json_object_get(fn, "strict");
        if (strict && !json_is_null(strict) && !json_is_boolean(strict)) {
            snprintf(p, sizeof p, "tools[%zu]%s.strict", i, fn_path);
            return bad(err, p, "'%s' must be a boolean, not %s", p, type_name(strict));
        }
        json_t *params = json_object_get(fn, "parameters");
        if (params && !json_is_null(params)) {
            snprintf(p, sizeof p, "tools[%zu]%s.parameters", i, fn_path);
            if (!json_is_object(params))
                return bad(err, p, "'%s' must be an object (a JSON Schema), not %s", p, type_name(params));
            if (forced) {
                char *text = json_dumps(params, JSON_COMPACT), *gbnf = NULL;
                if (!text) return oom(err);
                hearth_status st = hearth_json_schema_to_gbnf(text, strlen(text), &gbnf);
                free(text);
                hearth_free(gbnf);
                if (st) return bad(err, p, "'%s': %s", p, hearth_last_error());
            }
        }
    }
    return true;
}

/* Checked tools in the shape the chat templates read (chat's), as JSON. */
static char *tools_for_template(json_t *tools, bool flat)
{
    if (!flat) return json_dumps(tools, JSON_COMPACT);
    json_t *out = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *fn = json_object();
        static const char *const keys[] = {"name", "description", "parameters"};
        for (size_t k = 0; k < 3; k++) {
            json_t *v = json_object_get(t, keys[k]);
            if (v && !json_is_null(v)) json_object_set(fn, keys[k], v);
        }
        json_array_append_new(out, json_pack("{s:s, s:o}", "type", "function", "function", fn));
    }
    char *text = json_array_size(out) == json_array_size(tools) ? json_dumps(out, JSON_COMPACT) : NULL;
    json_decref(out);
    return text;
}

/* tools, tool_choice and parallel_tool_calls; the legacy functions and
 * function_call are refused, not mapped.  The Responses API's tools and
 * named tool_choice are flat ({"type": "function", "name": ...}). */
static bool parse_tools(json_t *root, struct srv_request *r, struct srv_error *err)
{
    const bool flat = r->kind == SRV_RESPONSES;
    static const char *const legacy[] = {"functions", "function_call"};
    for (size_t i = 0; i < 2; i++)
        if (field(root, legacy[i]))
            return srv_fail(err, 400, "invalid_request_error", "unsupported_value", legacy[i],
                            "'%s' (the legacy function calling) is not supported by this server; "
                            "give 'tools' and 'tool_choice'", legacy[i]);
    if (!get_bool(root, "parallel_tool_calls", &r->parallel_tool_calls, err)) return false;
    json_t *tools = field(root, "tools");
    if (tools && !json_is_array(tools))
        return bad(err, "tools", "'tools' must be an array, not %s", type_name(tools));
    if (tools && json_array_size(tools) == 0) tools = NULL;
    json_t *tc = field(root, "tool_choice");
    enum srv_tool_choice choice = tools ? SRV_TOOL_AUTO : SRV_TOOL_NONE;
    const char *name = NULL;
    if (json_is_string(tc)) {
        const char *v = json_string_value(tc);
        if (strcmp(v, "none") == 0) choice = SRV_TOOL_NONE;
        else if (strcmp(v, "auto") == 0) choice = tools ? SRV_TOOL_AUTO : SRV_TOOL_NONE;
        else if (strcmp(v, "required") == 0) choice = SRV_TOOL_REQUIRED;
        else
            return bad(err, "tool_choice", "'tool_choice' is '%.40s', not \"none\", \"auto\", "
                       "\"required\" or a function", v);
    } else if (tc) {
        json_t *type = json_is_object(tc) ? json_object_get(tc, "type") : NULL;
        if (flat && json_is_string(type) && strcmp(json_string_value(type), "function") != 0)
            return srv_fail(err, 400, "invalid_request_error", "unsupported_value", "tool_choice",
                            "'tool_choice' of type '%.40s' is not supported: this server runs "
                            "function tools only (give \"none\", \"auto\", \"required\" or "
                            "{\"type\": \"function\", \"name\": ...})", json_string_value(type));
        json_t *fn = json_is_object(tc) ? tool_function(tc, flat) : NULL;
        json_t *n = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
        if (!json_is_string(type) || strcmp(json_string_value(type), "function") != 0 || !json_is_string(n))
            return bad(err, "tool_choice", flat ? "'tool_choice' must be \"none\", \"auto\", \"required\" "
                       "or {\"type\": \"function\", \"name\": ...}"
                       : "'tool_choice' must be \"none\", \"auto\", \"required\" "
                       "or {\"type\": \"function\", \"function\": {\"name\": ...}}");
        name = json_string_value(n);
        choice = SRV_TOOL_NAMED;
    }
    const bool forced = choice == SRV_TOOL_REQUIRED || choice == SRV_TOOL_NAMED;
    if (forced && !tools)
        return bad(err, "tool_choice", "'tool_choice' asks for a tool call, but no 'tools' are given");
    if (forced && r->grammar != SRV_GRAMMAR_NONE)
        return bad(err, "tool_choice", "give 'tool_choice' \"required\" or a function, or a JSON "
                   "'%s' or 'grammar', not both", flat ? "text.format" : "response_format");
    if (tools && !check_tools(tools, flat, forced, err)) return false;
    if (choice == SRV_TOOL_NAMED) {
        bool found = false;
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t)
            found |= strcmp(json_string_value(json_object_get(tool_function(t, flat), "name")), name) == 0;
        if (!found)
            return bad(err, "tool_choice", "'tool_choice' names the function '%.64s', which is not in "
                       "'tools'", name);
        r->tool_name = dup_n(name, strlen(name));
        if (!r->tool_name) return oom(err);
    }
    if (tools && choice != SRV_TOOL_NONE) {
        r->tools_json = tools_for_template(tools, flat);
        if (!r->tools_json) return oom(err);
        /* a JSON response_format or grammar decides the output's form:
         * the tools are shown, no calls are read */
        r->tool_choice = r->grammar == SRV_GRAMMAR_NONE ? choice : SRV_TOOL_NONE;
    }
    return true;
}

/* A JSON response format: chat's response_format ({"type": "json_schema",
 * "json_schema": {"name", "schema", "strict"}}), or with flat the
 * Responses API's text.format ({"type": "json_schema", "name", "schema",
 * "strict"}); param is the field's name. */
static bool parse_format(json_t *rf, bool flat, const char *param, struct srv_request *r,
                         struct srv_error *err)
{
    json_t *t = json_is_object(rf) ? json_object_get(rf, "type") : NULL;
    if (!json_is_string(t)) return bad(err, param, "'%s' must be an object with a 'type'", param);
    const char *type = json_string_value(t);
    if (strcmp(type, "json_object") == 0) {
        r->grammar = SRV_GRAMMAR_JSON_OBJECT;
    } else if (strcmp(type, "json_schema") == 0) {
        char path[64];
        snprintf(path, sizeof path, "%s%s", param, flat ? "" : ".json_schema");
        json_t *js = flat ? rf : json_object_get(rf, "json_schema");
        if (!json_is_object(js)) return bad(err, param, "'%s' must be an object with a 'schema'", path);
        json_t *schema = json_object_get(js, "schema");
        json_t *strict = json_object_get(js, "strict");
        json_t *name = json_object_get(js, "name");
        json_t *desc = json_object_get(js, "description");
        if (strict && !json_is_boolean(strict) && !json_is_null(strict))
            return bad(err, param, "'%s.strict' must be a boolean", path);
        if (flat ? !json_is_string(name) : name && !json_is_string(name))
            return bad(err, param, "'%s.name' must be a string", path);
        if (desc && !json_is_null(desc) && !json_is_string(desc))
            return bad(err, param, "'%s.description' must be a string", path);
        if (!schema) schema = json_true(); /* no schema: any JSON value */
        else json_incref(schema);
        if (!json_is_object(schema) && !json_is_boolean(schema)) {
            json_decref(schema);
            return bad(err, param, "'%s.schema' must be an object", path);
        }
        r->grammar_text = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
        json_decref(schema);
        if (!r->grammar_text) return oom(err);
        r->grammar = SRV_GRAMMAR_JSON_SCHEMA;
        if (hearth_json_schema_to_gbnf(r->grammar_text, strlen(r->grammar_text), &r->schema_gbnf))
            return bad(err, param, "'%s.schema': %s", path, hearth_last_error());
    } else if (strcmp(type, "text") != 0) {
        return srv_fail(err, 400, "invalid_request_error", "unsupported_value", param,
                        "'%s' of type '%.40s' is not supported (text, json_object and json_schema are)",
                        param, type);
    }
    return true;
}

/* response_format (text.format for the Responses API) and the grammar
 * extension, checked here so that a schema or grammar that cannot
 * compile is a 400 before anything runs; then the tools. */
static bool parse_structured(json_t *root, struct srv_request *r, struct srv_error *err)
{
    if (r->kind == SRV_RESPONSES) {
        json_t *text = field(root, "text");
        json_t *format = text ? field(text, "format") : NULL;
        if (format && !parse_format(format, true, "text.format", r, err)) return false;
    } else {
        json_t *rf = field(root, "response_format");
        if (rf && !parse_format(rf, false, "response_format", r, err)) return false;
    }
    json_t *g = field(root, "grammar");
    if (g && !json_is_null(g)) {
        if (!json_is_string(g))
            return bad(err, "grammar", "'grammar' must be a string (GBNF), not %s", type_name(g));
        if (r->grammar != SRV_GRAMMAR_NONE)
            return bad(err, "grammar", "give 'grammar' or a JSON '%s', not both",
                       r->kind == SRV_RESPONSES ? "text.format" : "response_format");
        const char *text = json_string_value(g);
        size_t len = json_string_length(g);
        if (hearth_grammar_check(text, len))
            return bad(err, "grammar", "'grammar': %s", hearth_last_error());
        r->grammar_text = malloc(len + 1);
        if (!r->grammar_text) return srv_fail(err, 500, "server_error", NULL, NULL, "out of memory");
        memcpy(r->grammar_text, text, len);
        r->grammar_text[len] = '\0';
        r->grammar = SRV_GRAMMAR_GBNF;
    }
    return srv_kind_chat(r->kind) ? parse_tools(root, r, err) : true;
}

/* ---- the Responses API ---------------------------------------------- */

/* The field of a Responses content part that holds its text, NULL for
 * the types that hold none (images, files, audio). */
static const char *part_text_key(const char *type)
{
    if (strcmp(type, "input_text") == 0 || strcmp(type, "output_text") == 0) return "text";
    return strcmp(type, "refusal") == 0 ? "refusal" : NULL;
}

/* The text of a Responses content: a string, or an array of parts of the
 * types in text_types (their "text"; a refusal part's "refusal"), joined
 * by newlines as chat's parts are.  Images, files and audio are refused. */
static bool input_content(json_t *content, const char *param, json_t **out, struct srv_error *err)
{
    if (json_is_string(content)) {
        *out = json_incref(content);
        return true;
    }
    if (!json_is_array(content))
        return bad(err, param, "'%s' must be a string or an array of content parts, not %s", param,
                   content ? type_name(content) : "absent");
    size_t total = 0, i;
    json_t *part;
    json_array_foreach(content, i, part) {
        char pp[96];
        snprintf(pp, sizeof pp, "%s[%zu]", param, i);
        json_t *type = json_is_object(part) ? json_object_get(part, "type") : NULL;
        if (!json_is_string(type)) return bad(err, pp, "'%s' must be an object with a string 'type'", pp);
        const char *key = part_text_key(json_string_value(type));
        if (!key)
            return srv_fail(err, 400, "invalid_request_error", "unsupported_value", pp,
                            "content parts of type '%.40s' are not supported (this server reads "
                            "input_text, output_text and refusal parts)", json_string_value(type));
        json_t *text = json_object_get(part, key);
        if (!json_is_string(text)) return bad(err, pp, "'%s.%s' must be a string", pp, key);
        total += json_string_length(text) + 1;
    }
    char *buf = malloc(total + 1), *w = buf;
    if (!buf) return oom(err);
    json_array_foreach(content, i, part) {
        json_t *text = json_object_get(part, part_text_key(json_string_value(json_object_get(part, "type"))));
        if (i > 0) *w++ = '\n';
        memcpy(w, json_string_value(text), json_string_length(text));
        w += json_string_length(text);
    }
    *out = json_stringn(buf, (size_t)(w - buf));
    free(buf);
    return *out ? true : oom(err);
}

/* A required non-empty string field of an input item. */
static bool item_string(json_t *item, const char *item_param, const char *name, json_t **out,
                        struct srv_error *err)
{
    char p[96];
    snprintf(p, sizeof p, "%s.%s", item_param, name);
    *out = json_object_get(item, name);
    if (!json_is_string(*out) || json_string_length(*out) == 0)
        return bad(err, p, "'%s' must be a non-empty string", p);
    return true;
}

/* One item of input as chat messages appended to out: a message, a
 * function call (joined to the assistant message before it, so that a
 * turn's calls are one message, as the templates write them) or a
 * function call's output (a tool message).  Reasoning items are left
 * out, as the templates leave out past turns' reasoning. */
static bool input_item(json_t *item, size_t index, json_t *out, struct srv_error *err)
{
    char p[64];
    snprintf(p, sizeof p, "input[%zu]", index);
    if (!json_is_object(item)) return bad(err, p, "'%s' must be an object, not %s", p, type_name(item));
    json_t *type = field(item, "type");
    if (type && !json_is_string(type)) {
        snprintf(p, sizeof p, "input[%zu].type", index);
        return bad(err, p, "'%s' must be a string, not %s", p, type_name(type));
    }
    const char *t = type ? json_string_value(type) : "message";
    if (strcmp(t, "message") == 0) {
        json_t *role = json_object_get(item, "role");
        static const char *const roles[] = {"user", "assistant", "system", "developer"};
        const char *r = NULL;
        for (size_t k = 0; k < 4 && json_is_string(role); k++)
            if (strcmp(json_string_value(role), roles[k]) == 0) r = roles[k];
        if (!r) {
            snprintf(p, sizeof p, "input[%zu].role", index);
            return bad(err, p, "'%s' must be \"user\", \"assistant\", \"system\" or \"developer\"", p);
        }
        snprintf(p, sizeof p, "input[%zu].content", index);
        json_t *text;
        if (!input_content(json_object_get(item, "content"), p, &text, err)) return false;
        /* the role newer clients give the system prompt */
        if (strcmp(r, "developer") == 0) r = "system";
        json_t *m = json_pack("{s:s, s:o}", "role", r, "content", text);
        return m && !json_array_append_new(out, m) ? true : oom(err);
    }
    if (strcmp(t, "function_call") == 0) {
        json_t *call_id, *name, *args = json_object_get(item, "arguments");
        if (!item_string(item, p, "call_id", &call_id, err) || !item_string(item, p, "name", &name, err))
            return false;
        if (!json_is_string(args)) {
            snprintf(p, sizeof p, "input[%zu].arguments", index);
            return bad(err, p, "'%s' must be a string (of JSON)", p);
        }
        /* arguments that are a JSON object go to the template as one, as
         * chat's tool_calls do */
        json_t *a = json_loadb(json_string_value(args), json_string_length(args), 0, NULL);
        if (!json_is_object(a)) {
            json_decref(a);
            a = json_incref(args);
        }
        json_t *call = json_pack("{s:O, s:s, s:{s:O, s:o}}", "id", call_id, "type", "function", "function",
                                 "name", name, "arguments", a);
        json_t *last = json_array_get(out, json_array_size(out) - 1);
        json_t *m = NULL;
        if (last && strcmp(json_string_value(json_object_get(last, "role")), "assistant") == 0) {
            m = json_incref(last);
        } else {
            m = json_pack("{s:s, s:s}", "role", "assistant", "content", "");
            if (m && json_array_append(out, m)) json_decref(m), m = NULL;
        }
        json_t *calls = m ? json_object_get(m, "tool_calls") : NULL;
        if (m && !calls && json_object_set_new(m, "tool_calls", calls = json_array())) calls = NULL;
        bool ok = call && calls && !json_array_append(calls, call);
        json_decref(call);
        json_decref(m);
        return ok ? true : oom(err);
    }
    if (strcmp(t, "function_call_output") == 0) {
        json_t *call_id, *text;
        if (!item_string(item, p, "call_id", &call_id, err)) return false;
        snprintf(p, sizeof p, "input[%zu].output", index);
        if (!input_content(json_object_get(item, "output"), p, &text, err)) return false;
        json_t *m = json_pack("{s:s, s:O, s:o}", "role", "tool", "tool_call_id", call_id, "content", text);
        return m && !json_array_append_new(out, m) ? true : oom(err);
    }
    if (strcmp(t, "reasoning") == 0) return true;
    snprintf(p, sizeof p, "input[%zu].type", index);
    if (strcmp(t, "item_reference") == 0)
        return srv_fail(err, 400, "invalid_request_error", "unsupported_value", p,
                        "'%s': item references are not supported; give the items themselves, or "
                        "'previous_response_id'", p);
    return srv_fail(err, 400, "invalid_request_error", "unsupported_value", p,
                    "'%s' is '%.40s': this server reads items of type message, function_call, "
                    "function_call_output and reasoning", p, t);
}

/* instructions and input as chat messages, the instructions first. */
static bool parse_input(json_t *root, struct srv_request *r, struct srv_error *err)
{
    json_t *instructions = field(root, "instructions");
    if (instructions && !json_is_string(instructions))
        return bad(err, "instructions", "'instructions' must be a string, not %s", type_name(instructions));
    json_t *input = field(root, "input");
    json_t *prev = field(root, "previous_response_id");
    if (!input && !prev)
        return srv_fail(err, 400, "invalid_request_error", "missing_required_parameter", "input",
                        "'input' is required");
    if (input && !json_is_string(input) && !json_is_array(input))
        return bad(err, "input", "'input' must be a string or an array of items, not %s", type_name(input));
    json_t *out = json_array();
    if (!out) return oom(err);
    bool ok = true;
    if (instructions) {
        ok = !json_array_append_new(out, json_pack("{s:s, s:O}", "role", "system", "content", instructions));
        r->n_instructions = 1;
    }
    if (ok && json_is_string(input)) {
        ok = !json_array_append_new(out, json_pack("{s:s, s:O}", "role", "user", "content", input));
    } else if (ok && input) {
        size_t i;
        json_t *item;
        json_array_foreach(input, i, item)
            if (!input_item(item, i, out, err)) {
                json_decref(out);
                return false;
            }
    }
    if (ok) r->messages_json = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    return ok && r->messages_json ? true : oom(err);
}

static bool unsupported(struct srv_error *err, const char *param, const char *why)
{
    return srv_fail(err, 400, "invalid_request_error", "unsupported_parameter", param,
                    "'%s' is not supported by this server: %s", param, why);
}

/* A string field that must be one of the values in ok (NULL-terminated):
 * NULL when it is absent; err set and false when it is something else.
 * The values in refused are known ones this server cannot honour. */
static bool get_choice(json_t *obj, const char *name, const char *param, const char *const *ok,
                       const char *const *refused, const char **out, struct srv_error *err)
{
    json_t *v = field(obj, name);
    *out = NULL;
    if (!v) return true;
    for (size_t i = 0; ok[i] && json_is_string(v); i++)
        if (strcmp(json_string_value(v), ok[i]) == 0) {
            *out = ok[i];
            return true;
        }
    for (size_t i = 0; refused && refused[i] && json_is_string(v); i++)
        if (strcmp(json_string_value(v), refused[i]) == 0)
            return srv_fail(err, 400, "invalid_request_error", "unsupported_value", param,
                            "'%s' \"%s\" is not supported by this server", param, refused[i]);
    char list[160] = "";
    for (size_t i = 0; ok[i]; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%s\"", i ? ", " : "", ok[i]);
    return bad(err, param, "'%s' must be one of %s", param, list);
}

/* The Responses API's own fields: those this server refuses (each named),
 * reasoning, text, metadata, store and previous_response_id. */
static bool parse_responses_fields(json_t *root, struct srv_request *r, struct srv_error *err)
{
    /* chat's names of what the Responses API calls otherwise */
    static const char *const chat_only[][2] = {
        {"messages", "input"}, {"max_tokens", "max_output_tokens"},
        {"max_completion_tokens", "max_output_tokens"}, {"response_format", "text.format"},
        {"reasoning_effort", "reasoning.effort"}, {"n", NULL}, {"logprobs", NULL},
    };
    for (size_t i = 0; i < sizeof chat_only / sizeof chat_only[0]; i++)
        if (field(root, chat_only[i][0])) {
            char why[96];
            if (chat_only[i][1]) snprintf(why, sizeof why, "it is chat's; give '%s'", chat_only[i][1]);
            else snprintf(why, sizeof why, "it is chat's, not the Responses API's");
            return unsupported(err, chat_only[i][0], why);
        }
    bool flag = false;
    if (!get_bool(root, "background", &flag, err)) return false;
    if (flag) return unsupported(err, "background", "responses run while their request waits");
    static const char *const refused[][2] = {
        {"conversation", "conversations are not kept; give 'previous_response_id'"},
        {"prompt", "there are no stored prompt templates"},
        {"context_management", "the input is never compacted"},
        {"moderation", "there is no moderation model"},
        {"prompt_cache_options", "the prefix cache needs no options"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (field(root, refused[i][0])) return unsupported(err, refused[i][0], refused[i][1]);
    json_t *include = field(root, "include");
    if (include && !json_is_array(include))
        return bad(err, "include", "'include' must be an array, not %s", type_name(include));
    if (json_array_size(include) > 0) {
        json_t *v = json_array_get(include, 0);
        return srv_fail(err, 400, "invalid_request_error", "unsupported_value", "include",
                        "'include' asks for '%.60s', which this server does not give (it gives no "
                        "extra output data)", json_is_string(v) ? json_string_value(v) : "?");
    }
    const char *v;
    static const char *const truncation[] = {"disabled", NULL}, *const truncation_no[] = {"auto", NULL};
    if (!get_choice(root, "truncation", "truncation", truncation, truncation_no, &v, err)) return false;
    static const char *const tiers[] = {"auto", "default", NULL},
                             *const tiers_no[] = {"flex", "scale", "priority", NULL};
    if (!get_choice(root, "service_tier", "service_tier", tiers, tiers_no, &v, err)) return false;
    static const char *const retention[] = {"in_memory", NULL}, *const retention_no[] = {"24h", NULL};
    if (!get_choice(root, "prompt_cache_retention", "prompt_cache_retention", retention, retention_no, &v, err))
        return false;
    int64_t x = 0;
    bool given;
    if (!get_int(root, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &x, &given, err)) return false;
    if (x > 0) return unsupported(err, "top_logprobs", "the Responses API here gives no log probabilities "
                                  "(chat completions do)");
    json_t *sopt = field(root, "stream_options");
    if (sopt) {
        bool stream = false;
        if (!get_bool(root, "stream", &stream, err)) return false;
        if (!stream) return bad(err, "stream_options", "'stream_options' is only allowed when 'stream' is true");
        if (!json_is_object(sopt))
            return bad(err, "stream_options", "'stream_options' must be an object, not %s", type_name(sopt));
        flag = false;
        if (!get_bool(sopt, "include_obfuscation", &flag, err)) {
            snprintf(err->param, sizeof err->param, "stream_options.include_obfuscation");
            return false;
        }
        if (flag) return unsupported(err, "stream_options.include_obfuscation", "events are not padded");
        if (field(sopt, "include_usage"))
            return unsupported(err, "stream_options.include_usage", "the usage is in the last event's response");
    }
    json_t *sid = field(root, "safety_identifier");
    if (sid && !json_is_string(sid))
        return bad(err, "safety_identifier", "'safety_identifier' must be a string, not %s", type_name(sid));
    json_t *reasoning = field(root, "reasoning");
    if (reasoning) {
        if (!json_is_object(reasoning))
            return bad(err, "reasoning", "'reasoning' must be an object, not %s", type_name(reasoning));
        static const char *const efforts[] = {"low", "medium", "high", NULL},
                                 *const efforts_no[] = {"none", "minimal", "xhigh", NULL};
        if (!get_choice(reasoning, "effort", "reasoning.effort", efforts, efforts_no, &r->reasoning_effort, err))
            return false;
        static const char *const summary[] = {"auto", NULL}, *const summary_no[] = {"concise", "detailed", NULL};
        if (!get_choice(reasoning, "summary", "reasoning.summary", summary, summary_no, &v, err) ||
            !get_choice(reasoning, "generate_summary", "reasoning.generate_summary", summary, summary_no, &v, err))
            return false;
        if (field(reasoning, "context")) return unsupported(err, "reasoning.context", "past reasoning is not kept");
        if (field(reasoning, "mode")) return unsupported(err, "reasoning.mode", "there is one mode");
    }
    json_t *text = field(root, "text");
    if (text) {
        if (!json_is_object(text)) return bad(err, "text", "'text' must be an object, not %s", type_name(text));
        static const char *const verbosity[] = {"medium", NULL}, *const verbosity_no[] = {"low", "high", NULL};
        if (!get_choice(text, "verbosity", "text.verbosity", verbosity, verbosity_no, &v, err)) return false;
    }
    json_t *meta = field(root, "metadata");
    if (meta) {
        if (!json_is_object(meta))
            return bad(err, "metadata", "'metadata' must be an object, not %s", type_name(meta));
        if (json_object_size(meta) > 16)
            return bad(err, "metadata", "'metadata' has %zu keys; at most 16 are allowed", json_object_size(meta));
        const char *key;
        json_t *mv;
        json_object_foreach(meta, key, mv) {
            if (strlen(key) > 64)
                return bad(err, "metadata", "'metadata' key '%.40s...' is longer than 64 characters", key);
            if (!json_is_string(mv) || json_string_length(mv) > 512)
                return bad(err, "metadata", "'metadata[\"%s\"]' must be a string of at most 512 characters", key);
        }
    }
    r->store = true;
    if (!get_bool(root, "store", &r->store, err)) return false;
    json_t *prev = field(root, "previous_response_id");
    if (prev) {
        if (!json_is_string(prev) || json_string_length(prev) == 0 || json_string_length(prev) > 128)
            return bad(err, "previous_response_id", "'previous_response_id' must be a response's id");
        r->previous_response_id = dup_n(json_string_value(prev), json_string_length(prev));
        if (!r->previous_response_id) return oom(err);
    }
    return true;
}

/* A float as the decimal that reads back as it (0.8, not 0.800000011...). */
static json_t *float_json(float x)
{
    char text[32];
    snprintf(text, sizeof text, "%.9g", (double)x);
    for (int digits = 1; digits < 9; digits++) {
        snprintf(text, sizeof text, "%.*g", digits, (double)x);
        if ((float)strtod(text, NULL) == x) break;
    }
    return json_real(strtod(text, NULL));
}

/* v when given (a new reference), else the default d (taken). */
static json_t *given_or(json_t *v, json_t *d)
{
    if (!v) return d;
    json_decref(d);
    return json_incref(v);
}

/* The fields a response object repeats, as the request gave them or as
 * they took effect (the sampling's temperature and top_p). */
static bool responses_echo(json_t *root, struct srv_request *r, struct srv_error *err)
{
    json_t *tools = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(field(root, "tools"), i, t)
        json_array_append_new(tools, json_pack("{s:s, s:O, s:o, s:o, s:o}", "type", "function", "name",
                                               json_object_get(t, "name"),
                                               "description", given_or(field(t, "description"), json_null()),
                                               "parameters", given_or(field(t, "parameters"), json_null()),
                                               "strict", given_or(field(t, "strict"), json_null())));
    json_t *text = field(root, "text");
    json_t *reasoning = field(root, "reasoning");
    json_t *o = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:{s:o}, s:b, s:o, s:{s:o, s:o}, s:b, s:s, s:b}",
        "instructions", given_or(field(root, "instructions"), json_null()),
        "tools", tools,
        "tool_choice", given_or(field(root, "tool_choice"), json_string("auto")),
        "temperature", float_json(r->sampling.temperature), "top_p", float_json(r->sampling.top_p),
        "max_output_tokens", given_or(field(root, "max_output_tokens"), json_null()),
        "previous_response_id", given_or(field(root, "previous_response_id"), json_null()),
        "text", "format", given_or(text ? field(text, "format") : NULL, json_pack("{s:s}", "type", "text")),
        "parallel_tool_calls", r->parallel_tool_calls,
        "metadata", given_or(field(root, "metadata"), json_object()),
        "reasoning", "effort", given_or(reasoning ? field(reasoning, "effort") : NULL, json_null()),
        "summary", given_or(reasoning ? field(reasoning, "summary") : NULL, json_null()),
        "store", r->store, "truncation", "disabled", "background", 0);
    if (o && r->user) json_object_set_new(o, "user", json_string(r->user));
    r->echo_json = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return r->echo_json ? true : oom(err);
}

bool srv_request_parse(enum srv_kind kind, const char *body, size_t len,
                       const struct srv_limits *limits, struct srv_request *r,
                       struct srv_error *err)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->n = 1;
    r->reasoning_budget = -1;
    r->parallel_tool_calls = true;
    if (limits->defaults) r->sampling = *limits->defaults;
    else hearth_sampler_params_default(&r->sampling);
    r->sampling.logit_bias = NULL;
    r->sampling.n_logit_bias = 0;
    json_t *root = load_object(body, len, err);
    if (!root) return false;
    bool ok = false;
    int64_t x = 0;
    bool given = false;
    if (kind == SRV_RESPONSES ? !parse_input(root, r, err) || !parse_responses_fields(root, r, err)
        : kind == SRV_CHAT    ? !parse_messages(root, r, err)
                              : !parse_prompts(root, r, limits->n_vocab, err))
        goto out;
    json_t *model = field(root, "model");
    if (model && !json_is_string(model)) {
        bad(err, "model", "'model' must be a string, not %s", type_name(model));
        goto out;
    }
    const int64_t cap = limits->max_tokens_cap > 0 ? limits->max_tokens_cap : INT32_MAX;
    const char *mt = kind == SRV_RESPONSES ? "max_output_tokens"
                     : kind == SRV_CHAT && field(root, "max_completion_tokens") ? "max_completion_tokens"
                                                                                : "max_tokens";
    if (!get_int(root, mt, 1, INT32_MAX, &x, &given, err)) goto out;
    if (given && x > cap) {
        bad(err, mt, "'%s' is %lld; this server allows at most %lld", mt, (long long)x,
            (long long)cap);
        goto out;
    }
    /* hearth_request's meaning: the cap, when not given, and < 0 no limit */
    r->max_tokens = given ? (int32_t)x : limits->max_tokens_cap > 0 ? limits->max_tokens_cap : -1;
    if (!get_int(root, "n", 1, SRV_MAX_N, &x, &given, err)) goto out;
    if (given) r->n = (int32_t)x;
    /* A seed is 0 .. HEARTH_SEED_MAX (hearth-sampling(7)), as for hearth
     * run; a negative one is no seed of that range, and -1 no request for
     * a random one (that is leaving it out), so it is refused rather than
     * taken as its two's complement. */
    if (!get_int(root, "seed", INT64_MIN, INT64_MAX, &x, &r->seed_given, err)) goto out;
    if (r->seed_given && x < 0) {
        bad(err, "seed", "'seed' is %lld; it must be from 0 to %llu (leave it out for a random one)",
            (long long)x, (unsigned long long)HEARTH_SEED_MAX);
        goto out;
    }
    if (r->seed_given) r->sampling.seed = (uint64_t)x;
    /* The sampling parameters' ranges are the library's, checked once by
     * hearth_sampler_params_check() below; the API narrows those of
     * OpenAI's own fields (temperature to 2, the penalties to +-2, the
     * biases to +-100) and the server checks that narrowing alone. */
    if (!get_float(root, "temperature", 0, 2, &r->sampling.temperature, err) ||
        !get_float(root, "top_p", -FLT_MAX, FLT_MAX, &r->sampling.top_p, err) ||
        !get_float(root, "min_p", -FLT_MAX, FLT_MAX, &r->sampling.min_p, err) ||
        !get_float(root, "presence_penalty", -2, 2, &r->sampling.presence_penalty, err) ||
        !get_float(root, "frequency_penalty", -2, 2, &r->sampling.frequency_penalty, err) ||
        !get_float(root, "repeat_penalty", -FLT_MAX, FLT_MAX, &r->sampling.repeat_penalty, err))
        goto out;
    if (!get_int(root, "top_k", INT32_MIN, INT32_MAX, &x, &given, err)) goto out;
    if (given) r->sampling.top_k = (int32_t)x;
    if (!get_int(root, "repeat_last_n", INT32_MIN, INT32_MAX, &x, &given, err)) goto out;
    if (given) r->sampling.repeat_last_n = (int32_t)x;
    if (!parse_stop(root, r, err) || !parse_logit_bias(root, r, limits->n_vocab, err)) goto out;
    const char *invalid = hearth_sampler_params_invalid(&r->sampling);
    if (invalid) {
        bad(err, invalid, "%s", hearth_last_error());
        goto out;
    }
    if (kind == SRV_CHAT) {
        json_t *effort = field(root, "reasoning_effort");
        if (effort) {
            static const char *const efforts[] = {"low", "medium", "high"};
            for (size_t i = 0; i < 3 && json_is_string(effort); i++)
                if (strcmp(json_string_value(effort), efforts[i]) == 0) r->reasoning_effort = efforts[i];
            if (!r->reasoning_effort) {
                bad(err, "reasoning_effort", "'reasoning_effort' must be \"low\", \"medium\" or \"high\"");
                goto out;
            }
        }
        if (!get_bool(root, "logprobs", &r->logprobs, err)) goto out;
        if (!get_int(root, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &x, &given, err)) goto out;
        if (given && !r->logprobs) {
            bad(err, "top_logprobs", "'top_logprobs' needs 'logprobs' set to true");
            goto out;
        }
        if (given) r->top_logprobs = (int32_t)x;
    }
    if (srv_kind_chat(kind)) {
        /* llama.cpp's name; -1: no limit, absent: the server's */
        if (!get_int(root, "thinking_budget_tokens", -1, SRV_MAX_REASONING_BUDGET, &x, &given, err)) goto out;
        r->reasoning_budget = given ? (int32_t)x : limits->reasoning_budget;
    } else {
        if (!get_int(root, "logprobs", 0, 5, &x, &given, err)) goto out;
        r->logprobs = given;
        if (given) r->top_logprobs = (int32_t)x;
        if (!get_bool(root, "echo", &r->echo, err)) goto out;
        json_t *suffix = field(root, "suffix");
        if (suffix && !(json_is_string(suffix) && json_string_length(suffix) == 0)) {
            srv_fail(err, 400, "invalid_request_error", "unsupported_value", "suffix",
                     "'suffix' (insertion) is not supported by this server");
            goto out;
        }
        if (!get_int(root, "best_of", 1, SRV_MAX_N, &x, &given, err)) goto out;
        if (given && x != r->n) {
            srv_fail(err, 400, "invalid_request_error", "unsupported_value", "best_of",
                     "'best_of' other than 'n' is not supported by this server");
            goto out;
        }
    }
    if (!get_bool(root, "stream", &r->stream, err) || !get_bool(root, "ignore_eos", &r->ignore_eos, err))
        goto out;
    json_t *so = kind == SRV_RESPONSES ? NULL : field(root, "stream_options");
    if (so) {
        if (!r->stream) {
            bad(err, "stream_options", "'stream_options' is only allowed when 'stream' is true");
            goto out;
        }
        if (!json_is_object(so)) {
            bad(err, "stream_options", "'stream_options' must be an object, not %s", type_name(so));
            goto out;
        }
        if (!get_bool(so, "include_usage", &r->include_usage, err)) {
            snprintf(err->param, sizeof err->param, "stream_options.include_usage");
            goto out;
        }
    }
    json_t *user = field(root, "user");
    if (user) {
        if (!json_is_string(user)) {
            bad(err, "user", "'user' must be a string, not %s", type_name(user));
            goto out;
        }
        r->user = dup_n(json_string_value(user), json_string_length(user));
        if (!r->user) {
            oom(err);
            goto out;
        }
    }
    /* OpenAI's hint for routing requests to a cache: accepted for a
     * balancer in front (hearth-replicas(7)); the prefix cache needs none */
    json_t *cache_key = field(root, "prompt_cache_key");
    if (cache_key && !json_is_string(cache_key)) {
        bad(err, "prompt_cache_key", "'prompt_cache_key' must be a string, not %s", type_name(cache_key));
        goto out;
    }
    if (!parse_structured(root, r, err)) goto out;
    if (kind == SRV_RESPONSES && !responses_echo(root, r, err)) goto out;
    ok = true;
out:
    json_decref(root);
    if (!ok) srv_request_free(r);
    return ok;
}

const char *srv_request_grammar_param(const struct srv_request *r)
{
    if (r->tool_choice == SRV_TOOL_REQUIRED || r->tool_choice == SRV_TOOL_NAMED) return "tools";
    switch (r->grammar) {
    case SRV_GRAMMAR_NONE: return NULL;
    case SRV_GRAMMAR_GBNF: return "grammar";
    default: return "response_format";
    }
}

void srv_request_free(struct srv_request *r)
{
    free(r->messages_json);
    for (size_t i = 0; i < r->n_prompts; i++) {
        free(r->prompts[i].text);
        free(r->prompts[i].tokens);
    }
    for (size_t i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->bias);
    free(r->user);
    free(r->grammar_text);
    hearth_free(r->schema_gbnf);
    free(r->tools_json);
    free(r->tool_name);
    free(r->previous_response_id);
    free(r->echo_json);
    hearth_grammar_free(r->sampling.grammar);
    memset(r, 0, sizeof *r);
}

/* One input of an embeddings request: a string or an array of token ids,
 * not empty. */
static bool embed_input(json_t *v, const char *param, int32_t n_vocab, struct srv_prompt *in,
                        struct srv_error *err)
{
    if (json_is_string(v)) {
        if (json_string_length(v) == 0) return bad(err, param, "'%s' is an empty string", param);
        in->len = json_string_length(v);
        in->text = dup_n(json_string_value(v), in->len);
        return in->text ? true : oom(err);
    }
    if (json_is_array(v)) return token_array(v, param, n_vocab, &in->tokens, &in->n_tokens, err);
    return bad(err, param, "'%s' must be a string or an array of token ids, not %s", param, type_name(v));
}

static bool parse_embed_inputs(json_t *root, struct srv_embeddings *e, int32_t n_vocab, struct srv_error *err)
{
    json_t *in = field(root, "input");
    if (!in)
        return srv_fail(err, 400, "invalid_request_error", "missing_required_parameter", "input",
                        "'input' is required");
    size_t n = 1;
    if (json_is_array(in)) {
        n = json_array_size(in);
        if (n == 0) return bad(err, "input", "'input' is an empty array");
        /* an array of token ids is one input */
        if (json_is_integer(json_array_get(in, 0))) n = 1;
    } else if (!json_is_string(in)) {
        return bad(err, "input", "'input' must be a string, an array of strings, an array of token ids or an "
                   "array of arrays of token ids, not %s", type_name(in));
    }
    if (n > SRV_MAX_EMBED_INPUTS)
        return bad(err, "input", "'input' holds %zu inputs; at most %d are allowed", n, SRV_MAX_EMBED_INPUTS);
    e->inputs = calloc(n, sizeof *e->inputs);
    if (!e->inputs) return oom(err);
    if (json_is_string(in) || json_is_integer(json_array_get(in, 0))) {
        e->n_inputs = 1;
        return embed_input(in, "input", n_vocab, &e->inputs[0], err);
    }
    size_t i;
    json_t *v;
    json_array_foreach(in, i, v) {
        char param[32];
        snprintf(param, sizeof param, "input[%zu]", i);
        e->n_inputs = i + 1;
        if (!embed_input(v, param, n_vocab, &e->inputs[i], err)) return false;
    }
    return true;
}

bool srv_embeddings_parse(const char *body, size_t len, int32_t n_vocab, int32_t n_embd,
                          struct srv_embeddings *e, struct srv_error *err)
{
    memset(e, 0, sizeof *e);
    json_t *root = load_object(body, len, err);
    if (!root) return false;
    bool ok = false;
    static const char *const known[] = {"input", "model", "encoding_format", "dimensions", "user"};
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        bool found = false;
        for (size_t i = 0; i < sizeof known / sizeof known[0] && !found; i++) found = strcmp(key, known[i]) == 0;
        if (!found) {
            char param[64];
            snprintf(param, sizeof param, "%s", key);
            srv_fail(err, 400, "invalid_request_error", "unknown_parameter", param,
                     "'%s' is not a parameter of embeddings (input, model, encoding_format, dimensions, user)",
                     param);
            goto out;
        }
    }
    if (!parse_embed_inputs(root, e, n_vocab, err)) goto out;
    json_t *model = field(root, "model");
    if (model && !json_is_string(model)) {
        bad(err, "model", "'model' must be a string, not %s", type_name(model));
        goto out;
    }
    json_t *format = field(root, "encoding_format");
    if (format) {
        if (json_is_string(format) && strcmp(json_string_value(format), "base64") == 0) e->base64 = true;
        else if (!json_is_string(format) || strcmp(json_string_value(format), "float") != 0) {
            bad(err, "encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
            goto out;
        }
    }
    int64_t x = 0;
    bool given = false;
    if (!get_int(root, "dimensions", 1, n_embd > 0 ? n_embd : INT32_MAX, &x, &given, err)) goto out;
    if (given) e->dimensions = (int32_t)x;
    json_t *user = field(root, "user");
    if (user && !json_is_string(user)) {
        bad(err, "user", "'user' must be a string, not %s", type_name(user));
        goto out;
    }
    if (user && !(e->user = dup_n(json_string_value(user), json_string_length(user)))) {
        oom(err);
        goto out;
    }
    ok = true;
out:
    json_decref(root);
    if (!ok) srv_embeddings_free(e);
    return ok;
}

void srv_embeddings_free(struct srv_embeddings *e)
{
    for (size_t i = 0; e->inputs && i < e->n_inputs; i++) {
        free(e->inputs[i].text);
        free(e->inputs[i].tokens);
    }
    free(e->inputs);
    free(e->user);
    memset(e, 0, sizeof *e);
}

bool srv_request_peek(const char *body, size_t len, char **model, bool *stream, struct srv_error *err)
{
    *model = NULL;
    *stream = false;
    json_t *root = load_object(body, len, err);
    if (!root) return false;
    json_t *m = field(root, "model");
    json_t *st = field(root, "stream");
    bool ok = true;
    if (m && !json_is_string(m)) ok = bad(err, "model", "'model' must be a string, not %s", type_name(m));
    else if (m && !(*model = dup_n(json_string_value(m), json_string_length(m)))) ok = oom(err);
    *stream = ok && json_is_true(st);
    json_decref(root);
    return ok;
}

bool srv_tokenize_parse(const char *body, size_t len, struct srv_tokenize *t, struct srv_error *err)
{
    memset(t, 0, sizeof *t);
    t->parse_special = true;
    json_t *root = load_object(body, len, err);
    if (!root) return false;
    bool ok = false;
    json_t *c = field(root, "content");
    if (!c) {
        srv_fail(err, 400, "invalid_request_error", "missing_required_parameter", "content",
                 "'content' is required");
        goto out;
    }
    if (!json_is_string(c)) {
        bad(err, "content", "'content' must be a string, not %s", type_name(c));
        goto out;
    }
    if (!get_bool(root, "add_special", &t->add_special, err) ||
        !get_bool(root, "parse_special", &t->parse_special, err) ||
        !get_bool(root, "with_pieces", &t->with_pieces, err))
        goto out;
    t->len = json_string_length(c);
    t->content = dup_n(json_string_value(c), t->len);
    ok = t->content ? true : oom(err);
out:
    json_decref(root);
    return ok;
}

void srv_tokenize_free(struct srv_tokenize *t)
{
    free(t->content);
    memset(t, 0, sizeof *t);
}

bool srv_detokenize_parse(const char *body, size_t len, int32_t n_vocab, struct srv_detokenize *d,
                          struct srv_error *err)
{
    memset(d, 0, sizeof *d);
    json_t *root = load_object(body, len, err);
    if (!root) return false;
    bool ok = false;
    json_t *t = field(root, "tokens");
    if (!t) {
        srv_fail(err, 400, "invalid_request_error", "missing_required_parameter", "tokens",
                 "'tokens' is required");
    } else if (!json_is_array(t)) {
        bad(err, "tokens", "'tokens' must be an array of token ids, not %s", type_name(t));
    } else if (json_array_size(t) == 0) {
        ok = true;
    } else {
        ok = token_array(t, "tokens", n_vocab, &d->tokens, &d->n_tokens, err);
    }
    json_decref(root);
    return ok;
}

void srv_detokenize_free(struct srv_detokenize *d)
{
    free(d->tokens);
    memset(d, 0, sizeof *d);
}

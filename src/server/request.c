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

/* tools: [{"type": "function", "function": {"name", "description"?,
 * "parameters"?}}]; with forced=true each parameters schema must
 * translate to a grammar. */
static bool check_tools(json_t *tools, bool forced, struct srv_error *err)
{
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        char p[96];
        snprintf(p, sizeof p, "tools[%zu]", i);
        if (!json_is_object(t)) return bad(err, p, "'%s' must be an object, not %s", p, type_name(t));
        json_t *type = json_object_get(t, "type");
        if (!json_is_string(type) || strcmp(json_string_value(type), "function") != 0) {
            snprintf(p, sizeof p, "tools[%zu].type", i);
            return bad(err, p, "'%s' must be \"function\"", p);
        }
        json_t *fn = json_object_get(t, "function");
        if (!json_is_object(fn)) {
            snprintf(p, sizeof p, "tools[%zu].function", i);
            return bad(err, p, "'%s' must be an object with a 'name'", p);
        }
        json_t *name = json_object_get(fn, "name");
        if (!json_is_string(name) || !tool_name_ok(json_string_value(name), json_string_length(name))) {
            snprintf(p, sizeof p, "tools[%zu].function.name", i);
            return bad(err, p, "'%s' must be a string of 1 to 64 letters, digits, '_' or '-'", p);
        }
        for (size_t k = 0; k < i; k++) {
            json_t *other = json_object_get(json_object_get(json_array_get(tools, k), "function"), "name");
            if (strcmp(json_string_value(other), json_string_value(name)) == 0) {
                snprintf(p, sizeof p, "tools[%zu].function.name", i);
                return bad(err, p, "'%s': tools[%zu] has the name '%s' already", p, k,
                           json_string_value(name));
            }
        }
        json_t *desc = json_object_get(fn, "description");
        if (desc && !json_is_null(desc) && !json_is_string(desc)) {
            snprintf(p, sizeof p, "tools[%zu].function.description", i);
            return bad(err, p, "'%s' must be a string, not %s", p, type_name(desc));
        }
        json_t *params = json_object_get(fn, "parameters");
        if (params && !json_is_null(params)) {
            snprintf(p, sizeof p, "tools[%zu].function.parameters", i);
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

/* tools, tool_choice and parallel_tool_calls; the legacy functions and
 * function_call are refused, not mapped. */
static bool parse_tools(json_t *root, struct srv_request *r, struct srv_error *err)
{
    static const char *const legacy[] = {"functions", "function_call"};
    for (size_t i = 0; i < 2; i++)
        if (field(root, legacy[i]))
            return srv_fail(err, 400, "invalid_request_error", "unsupported_value", legacy[i],
                            "'%s' (the legacy function calling) is not supported by this server; "
                            "give 'tools' and 'tool_choice'", legacy[i]);
    bool parallel = true;
    if (!get_bool(root, "parallel_tool_calls", &parallel, err)) return false;
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
        json_t *fn = json_is_object(tc) ? json_object_get(tc, "function") : NULL;
        json_t *n = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
        if (!json_is_string(type) || strcmp(json_string_value(type), "function") != 0 || !json_is_string(n))
            return bad(err, "tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" "
                       "or {\"type\": \"function\", \"function\": {\"name\": ...}}");
        name = json_string_value(n);
        choice = SRV_TOOL_NAMED;
    }
    const bool forced = choice == SRV_TOOL_REQUIRED || choice == SRV_TOOL_NAMED;
    if (forced && !tools)
        return bad(err, "tool_choice", "'tool_choice' asks for a tool call, but no 'tools' are given");
    if (forced && r->grammar != SRV_GRAMMAR_NONE)
        return bad(err, "tool_choice", "give 'tool_choice' \"required\" or a function, or a JSON "
                   "'response_format' or 'grammar', not both");
    if (tools && !check_tools(tools, forced, err)) return false;
    if (choice == SRV_TOOL_NAMED) {
        bool found = false;
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t)
            found |= strcmp(json_string_value(json_object_get(json_object_get(t, "function"), "name")),
                            name) == 0;
        if (!found)
            return bad(err, "tool_choice", "'tool_choice' names the function '%.64s', which is not in "
                       "'tools'", name);
        r->tool_name = dup_n(name, strlen(name));
        if (!r->tool_name) return oom(err);
    }
    (void)parallel;
    if (tools && choice != SRV_TOOL_NONE) {
        r->tools_json = json_dumps(tools, JSON_COMPACT);
        if (!r->tools_json) return oom(err);
        /* a JSON response_format or grammar decides the output's form:
         * the tools are shown, no calls are read */
        r->tool_choice = r->grammar == SRV_GRAMMAR_NONE ? choice : SRV_TOOL_NONE;
    }
    return true;
}

/* response_format and the grammar extension, checked here so that a
 * schema or grammar that cannot compile is a 400 before anything runs;
 * then the tools. */
static bool parse_structured(json_t *root, struct srv_request *r, struct srv_error *err)
{
    json_t *rf = field(root, "response_format");
    if (rf) {
        json_t *t = json_is_object(rf) ? json_object_get(rf, "type") : NULL;
        if (!json_is_string(t))
            return bad(err, "response_format", "'response_format' must be an object with a 'type'");
        const char *type = json_string_value(t);
        if (strcmp(type, "json_object") == 0) {
            r->grammar = SRV_GRAMMAR_JSON_OBJECT;
        } else if (strcmp(type, "json_schema") == 0) {
            json_t *js = json_object_get(rf, "json_schema");
            if (!json_is_object(js))
                return bad(err, "response_format",
                           "'response_format.json_schema' must be an object with a 'schema'");
            json_t *schema = json_object_get(js, "schema");
            json_t *strict = json_object_get(js, "strict");
            json_t *name = json_object_get(js, "name");
            if (strict && !json_is_boolean(strict) && !json_is_null(strict))
                return bad(err, "response_format", "'response_format.json_schema.strict' must be a boolean");
            if (name && !json_is_string(name))
                return bad(err, "response_format", "'response_format.json_schema.name' must be a string");
            if (!schema) schema = json_true(); /* no schema: any JSON value */
            else json_incref(schema);
            if (!json_is_object(schema) && !json_is_boolean(schema)) {
                json_decref(schema);
                return bad(err, "response_format",
                           "'response_format.json_schema.schema' must be an object");
            }
            r->grammar_text = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
            json_decref(schema);
            if (!r->grammar_text) return srv_fail(err, 500, "server_error", NULL, NULL, "out of memory");
            r->grammar = SRV_GRAMMAR_JSON_SCHEMA;
            if (hearth_json_schema_to_gbnf(r->grammar_text, strlen(r->grammar_text), &r->schema_gbnf))
                return bad(err, "response_format", "'response_format.json_schema.schema': %s",
                           hearth_last_error());
        } else if (strcmp(type, "text") != 0) {
            return srv_fail(err, 400, "invalid_request_error", "unsupported_value", "response_format",
                            "'response_format' of type '%s' is not supported (text, json_object and "
                            "json_schema are)", type);
        }
    }
    json_t *g = field(root, "grammar");
    if (g && !json_is_null(g)) {
        if (!json_is_string(g))
            return bad(err, "grammar", "'grammar' must be a string (GBNF), not %s", type_name(g));
        if (r->grammar != SRV_GRAMMAR_NONE)
            return bad(err, "grammar", "give 'grammar' or a JSON 'response_format', not both");
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
    return r->kind == SRV_CHAT ? parse_tools(root, r, err) : true;
}

bool srv_request_parse(enum srv_kind kind, const char *body, size_t len,
                       const struct srv_limits *limits, struct srv_request *r,
                       struct srv_error *err)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->n = 1;
    r->reasoning_budget = -1;
    if (limits->defaults) r->sampling = *limits->defaults;
    else hearth_sampler_params_default(&r->sampling);
    r->sampling.logit_bias = NULL;
    r->sampling.n_logit_bias = 0;
    json_t *root = load_object(body, len, err);
    if (!root) return false;
    bool ok = false;
    int64_t x = 0;
    bool given = false;
    if (kind == SRV_CHAT ? !parse_messages(root, r, err)
                         : !parse_prompts(root, r, limits->n_vocab, err))
        goto out;
    json_t *model = field(root, "model");
    if (model && !json_is_string(model)) {
        bad(err, "model", "'model' must be a string, not %s", type_name(model));
        goto out;
    }
    const int64_t cap = limits->max_tokens_cap > 0 ? limits->max_tokens_cap : INT32_MAX;
    const char *mt = kind == SRV_CHAT && field(root, "max_completion_tokens") ? "max_completion_tokens"
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
        /* llama.cpp's name; -1: no limit, absent: the server's */
        if (!get_int(root, "thinking_budget_tokens", -1, SRV_MAX_REASONING_BUDGET, &x, &given, err)) goto out;
        r->reasoning_budget = given ? (int32_t)x : limits->reasoning_budget;
        if (!get_bool(root, "logprobs", &r->logprobs, err)) goto out;
        if (!get_int(root, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &x, &given, err)) goto out;
        if (given && !r->logprobs) {
            bad(err, "top_logprobs", "'top_logprobs' needs 'logprobs' set to true");
            goto out;
        }
        if (given) r->top_logprobs = (int32_t)x;
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
    json_t *so = field(root, "stream_options");
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

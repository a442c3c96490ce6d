/*
 * toolcall.c -- the tool-call formats of chat models (see toolcall.h).
 * JSON is read with jansson: a call's object is decoded where it starts
 * (JSON_DISABLE_EOF_CHECK gives where it ends), its arguments written
 * back compactly, which is the JSON string the OpenAI API returns.
 */
#include "toolcall.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CALLS 64

#define KIMI_SECTION "<|tool_calls_section_begin|>"
#define KIMI_SECTION_END "<|tool_calls_section_end|>"
#define KIMI_CALL "<|tool_call_begin|>"
#define KIMI_ARGUMENTS "<|tool_call_argument_begin|>"
#define KIMI_CALL_END "<|tool_call_end|>"
#define KIMI_MAX_ID 256

/* Where each format's calls begin (harmony's are never in the text). */
static const char *const markers[] = {
    [SRV_TOOLS_HERMES] = "<tool_call>",
    [SRV_TOOLS_LLAMA3] = "<|python_tag|>",
    [SRV_TOOLS_MISTRAL] = "[TOOL_CALLS]",
    [SRV_TOOLS_HARMONY] = NULL,
    [SRV_TOOLS_KIMI] = KIMI_SECTION,
};

const char *srv_tool_format_name(enum srv_tool_format f)
{
    switch (f) {
    case SRV_TOOLS_LLAMA3: return "llama3";
    case SRV_TOOLS_MISTRAL: return "mistral";
    case SRV_TOOLS_HARMONY: return "harmony";
    case SRV_TOOLS_KIMI: return "kimi";
    default: return "hermes";
    }
}

enum srv_tool_format srv_tool_format_detect(const char *builtin, const char *text)
{
    if (text) {
        if (strstr(text, "<|channel|>")) return SRV_TOOLS_HARMONY;
        if (strstr(text, KIMI_SECTION)) return SRV_TOOLS_KIMI;
        if (strstr(text, "<tool_call>")) return SRV_TOOLS_HERMES;
        if (strstr(text, "[TOOL_CALLS]")) return SRV_TOOLS_MISTRAL;
        if (strstr(text, "<|python_tag|>") || strstr(text, "ipython")) return SRV_TOOLS_LLAMA3;
        /* a template that does not write tool calls: by its family */
        if (strstr(text, "<|start_header_id|>")) return SRV_TOOLS_LLAMA3;
        if (strstr(text, "[INST]")) return SRV_TOOLS_MISTRAL;
    }
    if (builtin) {
        if (strcmp(builtin, "llama3") == 0) return SRV_TOOLS_LLAMA3;
        if (strcmp(builtin, "mistral") == 0) return SRV_TOOLS_MISTRAL;
    }
    return SRV_TOOLS_HERMES;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

static size_t skip_space(const char *t, size_t len, size_t i)
{
    while (i < len && is_space(t[i])) i++;
    return i;
}

/* The first occurrence of s in t[from..len), or len. */
static size_t find(const char *t, size_t len, size_t from, const char *s)
{
    const size_t n = strlen(s);
    for (size_t i = from; i + n <= len; i++)
        if (t[i] == s[0] && memcmp(t + i, s, n) == 0) return i;
    return len;
}

static bool starts(const char *t, size_t len, size_t i, const char *s)
{
    const size_t n = strlen(s);
    return i + n <= len && memcmp(t + i, s, n) == 0;
}

void srv_tool_calls_free(struct srv_tool_calls *c)
{
    for (size_t i = 0; c->calls && i < c->n; i++) {
        free(c->calls[i].name);
        free(c->calls[i].arguments);
        free(c->calls[i].id);
    }
    free(c->calls);
    memset(c, 0, sizeof *c);
}

/* One call from a decoded object: {"name": string, "arguments" or
 * "parameters": object, or a string holding one, or absent}. */
/* Append a call: copies of name[0..name_len) and args[0..args_len). */
static bool push_call(struct srv_tool_calls *c, const char *name, size_t name_len, const char *args,
                      size_t args_len)
{
    if (c->n == MAX_CALLS) return false;
    char *n = malloc(name_len + 1), *a = malloc(args_len + 1);
    struct srv_tool_call *calls = realloc(c->calls, (c->n + 1) * sizeof *calls);
    if (calls) c->calls = calls;
    if (!n || !a || !calls) {
        free(n);
        free(a);
        return false;
    }
    memcpy(n, name, name_len);
    n[name_len] = '\0';
    memcpy(a, args, args_len);
    a[args_len] = '\0';
    c->calls[c->n].name = n;
    c->calls[c->n].arguments = a;
    c->calls[c->n].id = NULL;
    c->n++;
    return true;
}

static bool add_call(struct srv_tool_calls *c, json_t *o)
{
    if (!json_is_object(o) || c->n == MAX_CALLS) return false;
    json_t *name = json_object_get(o, "name");
    if (!json_is_string(name) || json_string_length(name) == 0) return false;
    json_t *args = json_object_get(o, "arguments");
    if (!args) args = json_object_get(o, "parameters");
    json_t *owned = NULL;
    if (!args) {
        args = owned = json_object();
    } else if (json_is_string(args)) {
        owned = json_loadb(json_string_value(args), json_string_length(args), 0, NULL);
        args = owned;
    }
    if (!args || !json_is_object(args)) {
        json_decref(owned);
        return false;
    }
    char *text = json_dumps(args, JSON_COMPACT);
    json_decref(owned);
    const bool ok = text && push_call(c, json_string_value(name), json_string_length(name), text, strlen(text));
    free(text);
    return ok;
}

/* The JSON value at t[*i..len), which must be an object (or, with
 * array_ok, an array); *i moves past it. */
static json_t *value_at(const char *t, size_t len, size_t *i, bool array_ok)
{
    if (*i >= len || !(t[*i] == '{' || (array_ok && t[*i] == '['))) return NULL;
    json_error_t je;
    json_t *v = json_loadb(t + *i, len - *i, JSON_DISABLE_EOF_CHECK, &je);
    if (v) *i += (size_t)je.position;
    return v;
}

static size_t trim_end(const char *t, size_t n)
{
    while (n > 0 && is_space(t[n - 1])) n--;
    return n;
}

static bool parse_hermes(const char *t, size_t len, struct srv_tool_calls *c)
{
    size_t i = find(t, len, 0, markers[SRV_TOOLS_HERMES]);
    if (i == len) return false;
    c->content_len = trim_end(t, i);
    for (;;) {
        i = skip_space(t, len, i);
        if (i == len) break;
        if (!starts(t, len, i, "<tool_call>")) return false;
        i = skip_space(t, len, i + strlen("<tool_call>"));
        json_t *o = value_at(t, len, &i, false);
        bool ok = o && add_call(c, o);
        json_decref(o);
        if (!ok) return false;
        i = skip_space(t, len, i);
        if (starts(t, len, i, "</tool_call>")) i += strlen("</tool_call>");
        else if (i < len) return false; /* an unclosed block only at the end */
    }
    return c->n > 0;
}

static bool parse_llama3(const char *t, size_t len, struct srv_tool_calls *c)
{
    size_t i = skip_space(t, len, 0);
    if (i == len || t[i] != '{') {
        i = find(t, len, 0, markers[SRV_TOOLS_LLAMA3]);
        if (i == len) return false;
        c->content_len = trim_end(t, i);
        i = skip_space(t, len, i + strlen(markers[SRV_TOOLS_LLAMA3]));
    }
    for (;;) {
        json_t *o = value_at(t, len, &i, false);
        bool ok = o && add_call(c, o);
        json_decref(o);
        if (!ok) return false;
        i = skip_space(t, len, i);
        if (i == len) break;
        if (t[i] != ';') return false;
        i = skip_space(t, len, i + 1);
        if (i == len) break;
    }
    return true;
}

static bool parse_mistral(const char *t, size_t len, struct srv_tool_calls *c)
{
    const char *m = markers[SRV_TOOLS_MISTRAL];
    size_t i = find(t, len, 0, m);
    if (i == len) return false;
    c->content_len = trim_end(t, i);
    while (i < len) {
        if (!starts(t, len, i, m)) return false;
        i = skip_space(t, len, i + strlen(m));
        json_t *v = value_at(t, len, &i, true);
        bool ok = v != NULL;
        if (json_is_array(v)) {
            size_t k;
            json_t *o;
            ok = json_array_size(v) > 0;
            json_array_foreach(v, k, o) ok = ok && add_call(c, o);
        } else if (v) {
            ok = add_call(c, v);
        }
        json_decref(v);
        if (!ok) return false;
        i = skip_space(t, len, i);
    }
    return c->n > 0;
}

/* A Kimi call's id, t[0..n): "functions.NAME:K" (the prefix and the
 * index as the model wrote them, each optional); *name is where NAME
 * starts and *name_len its length.  False for an id without a name, or
 * with bytes that are not printable UTF-8 text. */
static bool kimi_id(const char *t, size_t n, const char **name, size_t *name_len)
{
    if (n == 0 || n > KIMI_MAX_ID) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] < 0x20 || t[i] == 0x7f) return false;
    json_t *valid = json_stringn(t, n); /* NULL when not UTF-8 */
    if (!valid) return false;
    json_decref(valid);
    size_t b = 0, e = n;
    static const char prefix[] = "functions.";
    if (n > sizeof prefix - 1 && memcmp(t, prefix, sizeof prefix - 1) == 0) b = sizeof prefix - 1;
    size_t k = e;
    while (k > b && isdigit((unsigned char)t[k - 1])) k--;
    if (k < e && k > b && t[k - 1] == ':') e = k - 1;
    if (e == b) return false;
    *name = t + b;
    *name_len = e - b;
    return true;
}

static bool parse_kimi(const char *t, size_t len, struct srv_tool_calls *c)
{
    size_t i = find(t, len, 0, KIMI_SECTION);
    if (i == len) return false;
    c->content_len = trim_end(t, i);
    i += strlen(KIMI_SECTION);
    for (;;) {
        i = skip_space(t, len, i);
        if (i == len) break; /* an unclosed section only at the end */
        if (starts(t, len, i, KIMI_SECTION_END)) {
            if (skip_space(t, len, i + strlen(KIMI_SECTION_END)) != len) return false;
            break;
        }
        if (!starts(t, len, i, KIMI_CALL)) return false;
        i += strlen(KIMI_CALL);
        const size_t a = find(t, len, i, KIMI_ARGUMENTS);
        if (a == len) return false;
        const size_t id_at = skip_space(t, a, i), id_end = trim_end(t, a);
        if (id_end <= id_at) return false;
        const size_t id_len = id_end - id_at;
        const char *name;
        size_t name_len;
        if (!kimi_id(t + id_at, id_len, &name, &name_len)) return false;
        i = skip_space(t, len, a + strlen(KIMI_ARGUMENTS));
        json_t *args = value_at(t, len, &i, false);
        json_t *o = json_object();
        bool ok = args && o && json_object_set_new(o, "name", json_stringn(name, name_len)) == 0 &&
                  json_object_set(o, "arguments", args) == 0 && add_call(c, o);
        json_decref(args);
        json_decref(o);
        if (!ok) return false;
        char *id = malloc(id_len + 1);
        if (!id) return false;
        memcpy(id, t + id_at, id_len);
        id[id_len] = '\0';
        c->calls[c->n - 1].id = id;
        i = skip_space(t, len, i);
        if (starts(t, len, i, KIMI_CALL_END)) i += strlen(KIMI_CALL_END);
        else if (i < len) return false; /* an unclosed call only at the end */
    }
    return c->n > 0;
}

bool srv_tool_calls_parse(enum srv_tool_format f, const char *text, size_t len,
                          struct srv_tool_calls *out)
{
    memset(out, 0, sizeof *out);
    bool ok = f == SRV_TOOLS_LLAMA3    ? parse_llama3(text, len, out)
              : f == SRV_TOOLS_MISTRAL ? parse_mistral(text, len, out)
              : f == SRV_TOOLS_HARMONY ? false
              : f == SRV_TOOLS_KIMI    ? parse_kimi(text, len, out)
                                       : parse_hermes(text, len, out);
    if (!ok) srv_tool_calls_free(out);
    return ok;
}

bool srv_tool_calls_add(struct srv_tool_calls *c, const char *name, const char *arguments, size_t len)
{
    json_t *o = json_object();
    json_t *args = json_loadb(arguments, len, JSON_DECODE_ANY, NULL);
    if (!json_is_object(args) && !json_is_string(args)) {
        json_decref(args);
        args = json_stringn(arguments, len); /* NULL for text that is not UTF-8 */
    }
    bool ok = o && args && json_object_set_new(o, "name", json_string(name)) == 0 &&
              json_object_set_new(o, "arguments", args) == 0;
    if (!ok) {
        json_decref(o);
        return false;
    }
    ok = add_call(c, o);
    if (!ok && json_is_string(args)) /* text that is not an object: given as it is */
        ok = push_call(c, name, strlen(name), json_string_value(args), json_string_length(args));
    json_decref(o);
    return ok;
}

size_t srv_tool_calls_safe_len(enum srv_tool_format f, const char *text, size_t len)
{
    if (f == SRV_TOOLS_HARMONY) return len; /* the calls are never in the text */
    if (f == SRV_TOOLS_LLAMA3) {
        size_t i = skip_space(text, len, 0);
        if (i == len || text[i] == '{') return 0;
    }
    const char *m = markers[f];
    const size_t mn = strlen(m);
    size_t safe = find(text, len, 0, m);
    if (safe == len) {
        /* the longest end of the text that begins the marker */
        for (size_t k = mn - 1 < len ? mn - 1 : len; k > 0; k--)
            if (memcmp(text + len - k, m, k) == 0) {
                safe = len - k;
                break;
            }
    }
    return trim_end(text, safe);
}

/* ---- the grammar that forces a call --------------------------------- */

static bool failf(char *why, size_t n, const char *msg)
{
    snprintf(why, n, "%s", msg);
    return false;
}

/* head, i, "_" and tail in a string for free(), or NULL. */
static char *prefixed(const char *head, size_t i, const char *tail)
{
    int n = snprintf(NULL, 0, "%s%zu_%s", head, i, tail);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s) snprintf(s, (size_t)n + 1, "%s%zu_%s", head, i, tail);
    return s;
}

/* References inside tool number i's parameters schema, which becomes
 * one part of a larger schema: "#" is the parameters schema itself, now
 * $defs["t<i>"], and "#/$defs/NAME" or "#/definitions/NAME" are now
 * "#/$defs/t<i>_NAME" (the tool's definitions move to the root with that
 * prefix, so that tools with the same names for their definitions stay
 * apart).  Sets *self when "#" occurs. */
static void relocate_refs(json_t *node, size_t i, bool *self)
{
    if (json_is_array(node)) {
        size_t k;
        json_t *v;
        json_array_foreach(node, k, v) relocate_refs(v, i, self);
        return;
    }
    if (!json_is_object(node)) return;
    const char *key;
    json_t *v;
    json_object_foreach(node, key, v) {
        if (strcmp(key, "$ref") == 0 && json_is_string(v)) {
            static const char *const prefixes[] = {"#/$defs/", "#/definitions/"};
            const char *ref = json_string_value(v);
            char buf[64];
            if (strcmp(ref, "#") == 0) {
                snprintf(buf, sizeof buf, "#/$defs/t%zu", i);
                json_string_set(v, buf);
                *self = true;
                continue;
            }
            for (size_t p = 0; p < 2; p++) {
                size_t n = strlen(prefixes[p]);
                if (strncmp(ref, prefixes[p], n) != 0) continue;
                char *r = prefixed("#/$defs/t", i, ref + n);
                if (r) json_string_set(v, r);
                free(r);
                break;
            }
        } else {
            relocate_refs(v, i, self);
        }
    }
}

/* Tool number i's parameters schema, a copy whose definitions have moved
 * into defs and whose references point there (relocate_refs). */
static json_t *relocated_params(json_t *params, size_t i, json_t *defs)
{
    json_t *p = json_deep_copy(params);
    if (!p) return NULL;
    bool self = false;
    relocate_refs(p, i, &self);
    static const char *const keys[] = {"$defs", "definitions"};
    for (size_t k = 0; k < 2; k++) {
        json_t *d = json_object_get(p, keys[k]);
        const char *name;
        json_t *v;
        if (json_is_object(d)) json_object_foreach(d, name, v) {
            char *key = prefixed("t", i, name);
            if (key) json_object_set(defs, key, v);
            free(key);
        }
        json_object_del(p, keys[k]);
    }
    if (self) {
        char key[32];
        snprintf(key, sizeof key, "t%zu", i);
        json_object_set(defs, key, p);
    }
    return p;
}

/* The schema of one call object of tool number i (fn): its name as a
 * constant, then its arguments (under the key of the format), their
 * definitions moved into defs. */
static json_t *call_schema(enum srv_tool_format f, json_t *fn, size_t i, json_t *defs)
{
    json_t *params = json_object_get(fn, "parameters");
    json_t *props = json_object();
    json_object_set_new(props, "name", json_pack("{s:O}", "const", json_object_get(fn, "name")));
    const char *key = f == SRV_TOOLS_LLAMA3 ? "parameters" : "arguments";
    if (json_is_object(params) && json_object_size(params) > 0)
        json_object_set_new(props, key, relocated_params(params, i, defs));
    else /* no parameters: no arguments */
        json_object_set_new(props, key, json_pack("{s:s, s:{}, s:b}", "type", "object", "properties",
                                                  "additionalProperties", 0));
    return json_pack("{s:s, s:o, s:[s,s]}", "type", "object", "properties", props, "required", "name",
                     key);
}

/* The grammar of a JSON schema (text, freed here) as "root ::= EXPR\n"
 * and the rules EXPR uses: *gbnf the whole translation (hearth_free),
 * *expr_len the length of EXPR, which starts at *gbnf + ROOT_HEAD_LEN,
 * *rest the rules after it (from the newline on). */
#define ROOT_HEAD "root ::= "
#define ROOT_HEAD_LEN (sizeof ROOT_HEAD - 1)
static bool schema_root(char *text, char **gbnf, int *expr_len, const char **rest, char *why, size_t why_len)
{
    *gbnf = NULL;
    if (!text) return failf(why, why_len, "out of memory");
    hearth_status st = hearth_json_schema_to_gbnf(text, strlen(text), gbnf);
    free(text);
    if (st) return failf(why, why_len, hearth_last_error());
    const char *nl = strchr(*gbnf, '\n');
    if (strncmp(*gbnf, ROOT_HEAD, ROOT_HEAD_LEN) != 0 || !nl) {
        hearth_free(*gbnf);
        *gbnf = NULL;
        return failf(why, why_len, "the schema's grammar has no root rule");
    }
    *expr_len = (int)(nl - *gbnf - (ptrdiff_t)ROOT_HEAD_LEN);
    *rest = nl;
    return true;
}

/* GBNF text g with every rule name -- the names outside string
 * literals, character classes, repetition counts and comments --
 * prefixed with `prefix`, written to o (when not NULL); returns its
 * length. */
static size_t prefix_rules(char *o, const char *g, const char *prefix)
{
    const size_t plen = strlen(prefix);
    size_t n = 0;
#define PUT(ch)                 \
    do {                        \
        const char ch_ = (ch);  \
        if (o) o[n] = ch_;      \
        n++;                    \
    } while (0)
    for (size_t i = 0; g[i];) {
        const char c = g[i];
        if (c == '"' || c == '[' || c == '{') {
            const char close = c == '"' ? '"' : c == '[' ? ']' : '}';
            PUT(g[i++]);
            while (g[i] && g[i] != close) {
                if (g[i] == '\\' && g[i + 1]) PUT(g[i++]);
                PUT(g[i++]);
            }
            if (g[i]) PUT(g[i++]);
        } else if (c == '#') {
            while (g[i] && g[i] != '\n') PUT(g[i++]);
        } else if (isalpha((unsigned char)c) || c == '_') {
            for (size_t k = 0; k < plen; k++) PUT(prefix[k]);
            while (isalnum((unsigned char)g[i]) || g[i] == '_' || g[i] == '-') PUT(g[i++]);
        } else {
            PUT(g[i++]);
        }
    }
#undef PUT
    return n;
}

/* Append g, its rules prefixed (prefix_rules()), to buf at *len.  false
 * when out of memory. */
static bool append_prefixed(char **buf, size_t *len, const char *g, const char *prefix)
{
    const size_t n = prefix_rules(NULL, g, prefix);
    char *b = realloc(*buf, *len + n + 1);
    if (!b) return false;
    prefix_rules(b + *len, g, prefix);
    *len += n;
    b[*len] = '\0';
    *buf = b;
    return true;
}

/* The forcing grammar of the formats that name the tool outside the
 * arguments' JSON: a call of the named tool, or (tool_choice "required")
 * of any of them, written as call_head, the tool's name, call_mid (each
 * the text of a GBNF string literal), the tool's arguments, call_end,
 * the whole between open and close; each tool's schema rules are
 * prefixed "tK-" apart.
 *   harmony: a commentary message to functions.NAME, whose body is the
 *            arguments;
 *   kimi:    one call in a calls section, index 0. */
static bool named_grammar(json_t *tools, const char *name, const char *open, const char *call_head,
                          const char *call_mid, const char *call_end, const char *close, char **out, char *why, size_t why_len)
{
    size_t len = 0, i, n_calls = 0;
    char *g = NULL, *alts = NULL;
    size_t alen = 0, acap = 0;
    bool ok = true;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *fn = json_object_get(t, "function");
        json_t *n = json_object_get(fn, "name");
        if (!json_is_string(n) || (name && strcmp(json_string_value(n), name) != 0)) continue;
        const char *fname = json_string_value(n);
        for (const char *p = fname; *p && ok; p++)
            if (*p == '"' || *p == '\\' || (unsigned char)*p < ' ')
                ok = failf(why, why_len, "a tool's name has a character a grammar cannot hold");
        if (!ok) break;
        json_t *params = json_object_get(fn, "parameters");
        static const char no_params[] = "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}";
        char *text;
        if (json_is_object(params) && json_object_size(params) > 0) text = json_dumps(params, JSON_COMPACT);
        else if ((text = malloc(sizeof no_params))) memcpy(text, no_params, sizeof no_params);
        char *gbnf = NULL;
        if (!text) {
            ok = failf(why, why_len, "out of memory");
            break;
        }
        hearth_status st = hearth_json_schema_to_gbnf(text, strlen(text), &gbnf);
        free(text);
        if (st) {
            ok = failf(why, why_len, hearth_last_error());
            break;
        }
        char prefix[32], head[48];
        snprintf(prefix, sizeof prefix, "t%zu-", i);
        /* tK-call ::= "CALL_HEAD NAME CALL_MID" tK-root "CALL_END" */
        const size_t hl = strlen(call_head) + strlen(fname) + strlen(call_mid) + strlen(call_end) + 32;
        char *call = malloc(hl);
        if (call) snprintf(call, hl, "call ::= \"%s%s%s\" root%s%s%s\n", call_head, fname, call_mid,
                           *call_end ? " \"" : "", call_end, *call_end ? "\"" : "");
        snprintf(head, sizeof head, "%st%zu-call", n_calls ? " | " : "", i);
        const size_t hlen = strlen(head);
        if (alen + hlen + 1 > acap) {
            char *na = realloc(alts, acap = alen + hlen + 64);
            if (na) alts = na;
            else ok = false;
        }
        if (ok) {
            memcpy(alts + alen, head, hlen + 1);
            alen += hlen;
        }
        ok = ok && call && append_prefixed(&g, &len, call, prefix) && append_prefixed(&g, &len, gbnf, prefix);
        free(call);
        hearth_free(gbnf);
        if (!ok) {
            failf(why, why_len, "out of memory");
            break;
        }
        n_calls++;
    }
    if (ok && n_calls == 0) ok = failf(why, why_len, "no such tool");
    char *root = NULL;
    if (ok) {
        const size_t rl = alen + len + strlen(open) + strlen(close) + 32;
        root = malloc(rl);
        if (root) snprintf(root, rl, "root ::= %s%s%s( %s )%s%s%s\n%s", *open ? "\"" : "", open, *open ? "\" " : "",
                           alts, *close ? " \"" : "", close, *close ? "\"" : "", g);
        else ok = failf(why, why_len, "out of memory");
    }
    free(alts);
    free(g);
    *out = ok ? root : NULL;
    return ok;
}

bool srv_tool_calls_grammar(enum srv_tool_format f, const char *tools_json, const char *name,
                            char **out, char *why, size_t why_len)
{
    *out = NULL;
    json_t *tools = json_loads(tools_json, 0, NULL);
    if (!json_is_array(tools)) {
        json_decref(tools);
        return failf(why, why_len, "'tools' must be an array");
    }
    if (f == SRV_TOOLS_HARMONY || f == SRV_TOOLS_KIMI) {
        bool ok = f == SRV_TOOLS_HARMONY
                      ? named_grammar(tools, name, "", "<|channel|>commentary to=functions.",
                                      " <|constrain|>json<|message|>", "", "", out, why, why_len)
                      : named_grammar(tools, name, KIMI_SECTION, KIMI_CALL "functions.", ":0" KIMI_ARGUMENTS,
                                      KIMI_CALL_END, KIMI_SECTION_END, out, why, why_len);
        json_decref(tools);
        return ok;
    }
    json_t *alts = json_array(), *defs = json_object();
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *fn = json_object_get(t, "function");
        json_t *n = json_object_get(fn, "name");
        if (!json_is_string(n)) continue;
        if (name && strcmp(json_string_value(n), name) != 0) continue;
        json_array_append_new(alts, call_schema(f, fn, i, defs));
    }
    json_decref(tools);
    if (json_array_size(alts) == 0) {
        json_decref(alts);
        json_decref(defs);
        snprintf(why, why_len, "no tool is named '%.64s'", name ? name : "");
        return false;
    }
    json_t *schema = json_array_size(alts) == 1 ? json_incref(json_array_get(alts, 0))
                                                : json_pack("{s:O}", "anyOf", alts);
    json_decref(alts);
    if (schema && json_object_size(defs) > 0) json_object_set(schema, "$defs", defs);
    json_decref(defs);
    char *text = schema ? json_dumps(schema, JSON_COMPACT) : NULL;
    json_decref(schema);
    /* the call is the schema's root expression, put between the format's
     * markers */
    char *gbnf;
    int expr_len;
    const char *rest;
    if (!schema_root(text, &gbnf, &expr_len, &rest, why, why_len)) return false;
    static const char *const before[] = {"\"<tool_call>\\n\" ", "", "\"[TOOL_CALLS][\" "};
    static const char *const after[] = {" \"\\n</tool_call>\"", "", " \"]\""};
    size_t cap = strlen(gbnf) + 64;
    char *g = malloc(cap);
    if (g) snprintf(g, cap, "root ::= %s( %.*s )%s%s", before[f], expr_len, gbnf + ROOT_HEAD_LEN,
                    after[f], rest);
    hearth_free(gbnf);
    if (!g) return failf(why, why_len, "out of memory");
    *out = g;
    return true;
}

/*
 * toolcall.c -- the tool-call formats of chat models (see toolcall.h).
 * JSON is read with jansson: a call's object is decoded where it starts
 * (JSON_DISABLE_EOF_CHECK gives where it ends), its arguments written
 * back compactly, which is the JSON string the OpenAI API returns.
 */
#define _GNU_SOURCE
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

void srv_tool_calls_free(struct srv_tool_calls *c)
{
    for (size_t i = 0; c->calls && i < c->n; i++) {
        free(c->calls[i].name);
        free(c->calls[i].arguments);
        free(c->calls[i].id);
    }
    free(c->calls);
    free(c->content);
    memset(c, 0, sizeof *c);
}

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
    c->calls[c->n].arguments_len = args_len;
    c->calls[c->n].id = NULL;
    c->n++;
    return true;
}

/* One call from a decoded object: {"name": string, "arguments" or
 * "parameters": object, or a string holding one, or absent}. */
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

static size_t trim_end(const char *t, size_t n)
{
    while (n > 0 && is_space(t[n - 1])) n--;
    return n;
}

/* ---- JSON as it comes -------------------------------------------------
 * A scanner of one JSON value, a byte at a time: it says of each byte
 * whether it is whitespace between tokens (JS_SKIP), part of the value
 * (JS_KEEP), its last byte (JS_END), the first byte after it (JS_AFTER:
 * a number ends only there), or not JSON (JS_ERR). */

enum { JS_SKIP, JS_KEEP, JS_END, JS_AFTER, JS_ERR };
enum { J_VALUE, J_ARR_FIRST, J_OBJ_FIRST, J_OBJ_KEY, J_COLON, J_NEXT, J_STR, J_ESC, J_HEX, J_UTF8, J_MINUS,
       J_ZERO, J_INT, J_DOT, J_FRAC, J_E, J_ESIGN, J_EXP, J_LIT };

static const char *const literals[] = {"true", "false", "null"};

static void js_init(struct srv_json_scan *s)
{
    s->st = J_VALUE;
    s->sub = 0;
    s->depth = 0;
    s->in_key = false;
}

/* A value has ended: the whole one, or one inside a container. */
static int js_done(struct srv_json_scan *s)
{
    if (s->depth == 0) return JS_END;
    s->st = J_NEXT;
    return JS_KEEP;
}

static int js_close(struct srv_json_scan *s)
{
    s->depth--;
    return js_done(s);
}

static int js_byte(struct srv_json_scan *s, unsigned char c)
{
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    const bool digit = c >= '0' && c <= '9';
    switch (s->st) {
    case J_VALUE:
    case J_ARR_FIRST:
        if (space) return JS_SKIP;
        if (s->st == J_ARR_FIRST && c == ']') return js_close(s);
        if (c == '{' || c == '[') {
            if (s->depth == (int)sizeof s->stack) return JS_ERR;
            s->stack[s->depth++] = c;
            s->st = c == '{' ? J_OBJ_FIRST : J_ARR_FIRST;
        } else if (c == '"') {
            s->st = J_STR;
            s->in_key = false;
        } else if (c == '-') {
            s->st = J_MINUS;
        } else if (c == '0') {
            s->st = J_ZERO;
        } else if (digit) {
            s->st = J_INT;
        } else if (c == 't' || c == 'f' || c == 'n') {
            s->st = J_LIT;
            s->sub = (c == 't' ? 0 : c == 'f' ? 1 : 2) * 8 + 1;
        } else {
            return JS_ERR;
        }
        return JS_KEEP;
    case J_OBJ_FIRST:
    case J_OBJ_KEY:
        if (space) return JS_SKIP;
        if (s->st == J_OBJ_FIRST && c == '}') return js_close(s);
        if (c != '"') return JS_ERR;
        s->st = J_STR;
        s->in_key = true;
        return JS_KEEP;
    case J_COLON:
        if (space) return JS_SKIP;
        if (c != ':') return JS_ERR;
        s->st = J_VALUE;
        return JS_KEEP;
    case J_NEXT: {
        if (space) return JS_SKIP;
        const unsigned char top = s->stack[s->depth - 1];
        if (c == ',') {
            s->st = top == '{' ? J_OBJ_KEY : J_VALUE;
            return JS_KEEP;
        }
        if ((c == '}' && top == '{') || (c == ']' && top == '[')) return js_close(s);
        return JS_ERR;
    }
    case J_STR:
        if (c == '"') {
            if (!s->in_key) return js_done(s);
            s->in_key = false;
            s->st = J_COLON;
            return JS_KEEP;
        }
        if (c == '\\') s->st = J_ESC;
        else if (c < 0x20) return JS_ERR;
        else if (c >= 0x80) {
            /* a UTF-8 sequence: sub is how many bytes are to come, and the
             * bounds of the next one (which keep out overlong forms,
             * surrogates and what lies past U+10FFFF) */
            int need, lo = 0x80, hi = 0xbf;
            if (c >= 0xc2 && c <= 0xdf) need = 1;
            else if (c >= 0xe0 && c <= 0xef) need = 2, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
            else if (c >= 0xf0 && c <= 0xf4) need = 3, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
            else return JS_ERR;
            s->st = J_UTF8;
            s->sub = need | lo << 8 | hi << 16;
        }
        return JS_KEEP;
    case J_UTF8:
        if (c < ((s->sub >> 8) & 0xff) || c > ((s->sub >> 16) & 0xff)) return JS_ERR;
        s->sub = ((s->sub & 0xff) - 1) | 0x80 << 8 | 0xbf << 16;
        if ((s->sub & 0xff) == 0) s->st = J_STR;
        return JS_KEEP;
    case J_ESC:
        if (c == 'u') {
            s->st = J_HEX;
            s->sub = 4;
        } else if (c && strchr("\"\\/bfnrt", c)) {
            s->st = J_STR;
        } else {
            return JS_ERR;
        }
        return JS_KEEP;
    case J_HEX:
        if (!isxdigit(c)) return JS_ERR;
        if (--s->sub == 0) s->st = J_STR;
        return JS_KEEP;
    case J_MINUS:
        if (!digit) return JS_ERR;
        s->st = c == '0' ? J_ZERO : J_INT;
        return JS_KEEP;
    case J_DOT:
    case J_ESIGN:
        if (!digit) return JS_ERR;
        s->st = s->st == J_DOT ? J_FRAC : J_EXP;
        return JS_KEEP;
    case J_E:
        if (c == '+' || c == '-') s->st = J_ESIGN;
        else if (digit) s->st = J_EXP;
        else return JS_ERR;
        return JS_KEEP;
    case J_ZERO:
    case J_INT:
    case J_FRAC:
    case J_EXP:
        if (digit && s->st != J_ZERO) return JS_KEEP;
        if (c == '.' && (s->st == J_ZERO || s->st == J_INT)) {
            s->st = J_DOT;
            return JS_KEEP;
        }
        if ((c == 'e' || c == 'E') && s->st != J_EXP) {
            s->st = J_E;
            return JS_KEEP;
        }
        /* the number ended before this byte */
        if (s->depth == 0) return JS_AFTER;
        s->st = J_NEXT;
        return js_byte(s, c);
    case J_LIT: {
        const char *lit = literals[s->sub / 8];
        if ((unsigned char)lit[s->sub % 8] != c) return JS_ERR;
        s->sub++;
        return lit[s->sub % 8] ? JS_KEEP : js_done(s);
    }
    default:
        return JS_ERR;
    }
}

/* The JSON object t[0..n) (whitespace may surround it) without the
 * whitespace between its tokens, in *out (for free()); false when it is
 * not one. */
static bool strip_object(const char *t, size_t n, char **out, size_t *out_len)
{
    struct srv_json_scan s;
    js_init(&s);
    char *o = malloc(n + 1);
    size_t k = 0, i = 0;
    bool ended = false;
    if (!o) return false;
    for (; i < n && !ended; i++) {
        if (k == 0 && !is_space(t[i]) && t[i] != '{') break;
        const int r = js_byte(&s, (unsigned char)t[i]);
        if (r == JS_ERR) break;
        if (r == JS_KEEP || r == JS_END) o[k++] = t[i];
        ended = r == JS_END;
    }
    if (!ended || skip_space(t, n, i) != n) {
        free(o);
        return false;
    }
    o[k] = '\0';
    *out = o;
    *out_len = k;
    return true;
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

/* ---- the parser ------------------------------------------------------ */

#define NONE ((size_t)-1)

/* where the parser is */
enum { P_START, P_CONTENT, P_SPACE, P_LIT, P_CALL, P_KIMI_ID, P_KIMI_ARGS, P_TAIL };
/* what comes after whitespace (P_SPACE) */
enum { N_CALL, N_SEMI, N_H_CLOSE, N_H_OPEN, N_M_OPEN, N_M_FIRST, N_M_AFTER, N_M_NEXT, N_M_GROUP, N_K_SECTION,
       N_K_ARGS, N_K_AFTER, N_K_END };
/* a call object's parts (hermes, llama3, mistral) */
enum { CO_OPEN, CO_KEY_FIRST, CO_KEY, CO_IN_KEY, CO_COLON, CO_VALUE_START, CO_VALUE, CO_AFTER };
/* the member being read */
enum { KEY_OTHER, KEY_NAME, KEY_ARGS };
/* the arguments: not yet, an object coming, whole */
enum { ARGS_NONE, ARGS_OBJECT, ARGS_DONE };

/* The literals that may come after whitespace, for the `next` kinds
 * that wait for one. */
static const char *const *next_literals(int next)
{
    static const char *const h_close[] = {"</tool_call>", NULL}, *const h_open[] = {"<tool_call>", NULL},
                             *const m_group[] = {"[TOOL_CALLS]", NULL},
                             *const k_section[] = {KIMI_CALL, KIMI_SECTION_END, NULL},
                             *const k_after[] = {KIMI_CALL_END, KIMI_CALL, KIMI_SECTION_END, NULL};
    switch (next) {
    case N_H_CLOSE: return h_close;
    case N_H_OPEN: return h_open;
    case N_M_GROUP: return m_group;
    case N_K_SECTION: return k_section;
    case N_K_AFTER: return k_after;
    default: return NULL;
    }
}

void srv_tool_parser_init(struct srv_tool_parser *p, enum srv_tool_format f)
{
    memset(p, 0, sizeof *p);
    p->f = f;
    p->state = f == SRV_TOOLS_LLAMA3 ? P_START : P_CONTENT;
    p->mark = NONE;
}

static bool grow(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    char *b = realloc(*buf, c);
    if (!b) return false;
    *buf = b;
    *cap = c;
    return true;
}

static void add_content(struct srv_tool_parser *p, const char *t, size_t n)
{
    if (n == 0 || p->oom) return;
    if (!grow(&p->out.content, &p->content_cap, p->out.content_len + n + 1)) {
        p->oom = true;
        return;
    }
    memcpy(p->out.content + p->out.content_len, t, n);
    p->out.content_len += n;
    p->out.content[p->out.content_len] = '\0';
}

/* Arguments of the call being read; the call's own once it is added. */
static void add_args(struct srv_tool_parser *p, const char *t, size_t n)
{
    if (p->oom) return;
    if (!grow(&p->args, &p->args_cap, p->args_len + n + 1)) {
        p->oom = true;
        return;
    }
    memcpy(p->args + p->args_len, t, n);
    p->args_len += n;
    p->args[p->args_len] = '\0';
    if (p->added) {
        p->out.calls[p->out.n - 1].arguments = p->args;
        p->out.calls[p->out.n - 1].arguments_len = p->args_len;
    }
}

/* The call being read is over: it stays when it was added. */
static void end_call(struct srv_tool_parser *p)
{
    if (!p->added) {
        free(p->args);
        free(p->name);
        free(p->id);
    }
    p->args = p->name = p->id = NULL;
    p->args_len = p->args_cap = 0;
    p->in_call = p->added = false;
}

/* Add the call being read once its name is known and its arguments have
 * begun (or are whole). */
static void maybe_add(struct srv_tool_parser *p)
{
    if (p->added || !p->name || p->args_mode == ARGS_NONE || p->oom) return;
    if (!p->args) add_args(p, "", 0);
    struct srv_tool_call *calls = realloc(p->out.calls, (p->out.n + 1) * sizeof *calls);
    if (!calls || p->oom) {
        p->oom = true;
        return;
    }
    p->out.calls = calls;
    calls[p->out.n] = (struct srv_tool_call){p->name, p->args, p->args_len, p->id};
    if (p->out.n == 0) { /* the content before the calls, without the whitespace before them */
        p->out.content_len = trim_end(p->out.content, p->out.content_len);
        if (p->out.content) p->out.content[p->out.content_len] = '\0';
    }
    p->out.n++;
    p->added = true;
}

/* The text leaves the format at text[at]: a call not yet added is
 * content from where it began, as is a group of calls opened without
 * one; the rest is content. */
static void leave(struct srv_tool_parser *p, const char *text, size_t at)
{
    size_t from = at;
    if (p->in_call) {
        if (!p->added) from = p->call_at;
        end_call(p);
    } else if (p->mark != NONE) {
        from = p->mark;
    }
    if (from < p->pos) add_content(p, text + from, p->pos - from);
    p->mark = NONE;
    p->state = P_TAIL;
}

static void begin_call(struct srv_tool_parser *p, int state, int after)
{
    p->in_call = true;
    p->added = false;
    p->call_at = p->mark != NONE ? p->mark : p->pos;
    p->mark = NONE;
    p->args_mode = ARGS_NONE;
    p->state = state;
    p->next = after;
    p->co = CO_OPEN;
}

/* A JSON string text[at..end) decoded, or NULL. */
static json_t *string_at(const char *text, size_t at, size_t end)
{
    json_t *v = json_loadb(text + at, end - at, JSON_DECODE_ANY, NULL);
    if (!json_is_string(v)) {
        json_decref(v);
        return NULL;
    }
    return v;
}

/* A member's value has ended at text[end - 1]; false when the call is
 * not one. */
static bool member_done(struct srv_tool_parser *p, const char *text, size_t end)
{
    if (p->key == KEY_NAME) {
        json_t *v = string_at(text, p->value_at, end);
        const size_t n = json_string_length(v);
        if (!v || n == 0 || strlen(json_string_value(v)) != n || !(p->name = strdup(json_string_value(v)))) {
            json_decref(v);
            return false;
        }
        json_decref(v);
    } else if (p->key == KEY_ARGS && p->args_mode == ARGS_NONE) {
        /* a string holding the object: whole */
        json_t *v = string_at(text, p->value_at, end);
        char *o;
        size_t n;
        const bool ok = v && strip_object(json_string_value(v), json_string_length(v), &o, &n);
        json_decref(v);
        if (!ok) return false;
        add_args(p, o, n);
        free(o);
        p->args_mode = ARGS_DONE;
    } else if (p->key == KEY_ARGS) {
        p->args_mode = ARGS_DONE;
    }
    maybe_add(p);
    return true;
}

/* The end of a call: true when it is one. */
static bool call_done(struct srv_tool_parser *p)
{
    if (!p->name) return false;
    if (p->args_mode == ARGS_NONE) {
        add_args(p, "{}", 2);
        p->args_mode = ARGS_DONE;
    }
    maybe_add(p);
    if (!p->added) return false;
    end_call(p);
    p->state = P_SPACE;
    return true;
}

/* One byte of a call object; false when it leaves the format.  *again
 * when the byte is still to be read (in the state it moved to). */
static bool call_byte(struct srv_tool_parser *p, const char *text, unsigned char c, bool *again)
{
    const bool space = is_space((char)c);
    int r;
    switch (p->co) {
    case CO_OPEN:
        p->co = CO_KEY_FIRST;
        return c == '{';
    case CO_KEY_FIRST:
    case CO_KEY:
        if (space) return true;
        if (c == '}' && p->co == CO_KEY_FIRST) return call_done(p);
        if (c != '"') return false;
        p->key_at = p->pos;
        js_init(&p->js);
        js_byte(&p->js, c);
        p->co = CO_IN_KEY;
        return true;
    case CO_IN_KEY:
        r = js_byte(&p->js, c);
        if (r == JS_ERR) return false;
        if (r == JS_END) {
            json_t *k = string_at(text, p->key_at, p->pos + 1);
            const char *key = k ? json_string_value(k) : "";
            p->key = strcmp(key, "name") == 0 && !p->name ? KEY_NAME
                     : (strcmp(key, "arguments") == 0 || strcmp(key, "parameters") == 0) && p->args_mode == ARGS_NONE
                         ? KEY_ARGS
                         : KEY_OTHER;
            json_decref(k);
            p->co = CO_COLON;
        }
        return true;
    case CO_COLON:
        if (space) return true;
        p->co = CO_VALUE_START;
        return c == ':';
    case CO_VALUE_START:
        if (space) return true;
        if (p->key == KEY_NAME && c != '"') return false;
        if (p->key == KEY_ARGS && c != '"' && c != '{') return false;
        p->value_at = p->pos;
        js_init(&p->js);
        if (p->key == KEY_ARGS && c == '{') {
            p->args_mode = ARGS_OBJECT;
            maybe_add(p);
        }
        p->co = CO_VALUE;
        *again = true;
        return true;
    case CO_VALUE:
        r = js_byte(&p->js, c);
        if (r == JS_ERR) return false;
        if (p->key == KEY_ARGS && p->args_mode == ARGS_OBJECT && (r == JS_KEEP || r == JS_END))
            add_args(p, (const char *)&c, 1);
        if (r == JS_END || r == JS_AFTER) {
            if (!member_done(p, text, r == JS_END ? p->pos + 1 : p->pos)) return false;
            p->co = CO_AFTER;
            *again = r == JS_AFTER;
        }
        return true;
    case CO_AFTER:
        if (space) return true;
        if (c == ',') {
            p->co = CO_KEY;
            return true;
        }
        return c == '}' && call_done(p);
    default:
        return false;
    }
}

/* The kimi call's id is text[id_at..end): its name, or false. */
static bool kimi_name(struct srv_tool_parser *p, const char *text, size_t end)
{
    const size_t at = skip_space(text, end, p->id_at), e = trim_end(text, end);
    const char *name;
    size_t name_len;
    if (e <= at || !kimi_id(text + at, e - at, &name, &name_len)) return false;
    p->name = strndup(name, name_len);
    p->id = strndup(text + at, e - at);
    if (!p->name || !p->id) p->oom = true;
    return !p->oom;
}

/* After whitespace, byte c (at p->pos) of what p->next says comes:
 * false when the text leaves the format there; *again when c is still
 * to be read. */
static bool next_byte(struct srv_tool_parser *p, unsigned char c, bool *again)
{
    const bool is_mistral = p->f == SRV_TOOLS_MISTRAL;
    const char *const *lits = next_literals(p->next);
    if (lits) {
        p->lit_at = p->pos;
        p->lits = 0;
        for (int i = 0; lits[i]; i++) p->lits |= 1 << i;
        p->state = P_LIT;
        *again = true;
        return true;
    }
    *again = true;
    switch (p->next) {
    case N_CALL:
    case N_M_FIRST:
    case N_M_NEXT:
        if (c != '{' || p->out.n == MAX_CALLS) return false;
        begin_call(p, P_CALL, is_mistral ? N_M_AFTER : p->f == SRV_TOOLS_LLAMA3 ? N_SEMI : N_H_CLOSE);
        return true;
    case N_M_OPEN:
        if (c == '{' && p->out.n < MAX_CALLS) {
            begin_call(p, P_CALL, N_M_GROUP);
            return true;
        }
        *again = false;
        p->next = N_M_FIRST;
        return c == '[';
    case N_SEMI:
    case N_M_AFTER:
        *again = false;
        if (c == ';' && p->next == N_SEMI) {
            p->mark = p->pos;
            p->next = N_CALL;
            return true;
        }
        if (c == ',' && p->next == N_M_AFTER) {
            p->next = N_M_NEXT;
            return true;
        }
        if (c == ']' && p->next == N_M_AFTER) {
            p->next = N_M_GROUP;
            return true;
        }
        return false;
    case N_K_ARGS:
        if (c != '{') return false;
        p->args_mode = ARGS_OBJECT;
        maybe_add(p);
        js_init(&p->js);
        p->state = P_KIMI_ARGS;
        return true;
    default:
        return false;
    }
}

/* A literal of p->next has been read, from lit_at to here. */
static void literal_done(struct srv_tool_parser *p, const char *lit)
{
    p->state = P_SPACE;
    if (strcmp(lit, "</tool_call>") == 0) {
        p->next = N_H_OPEN;
    } else if (strcmp(lit, "<tool_call>") == 0) {
        p->mark = p->lit_at;
        p->next = N_CALL;
    } else if (strcmp(lit, "[TOOL_CALLS]") == 0) {
        p->mark = p->lit_at;
        p->next = N_M_OPEN;
    } else if (strcmp(lit, KIMI_CALL) == 0) {
        if (p->mark == NONE) p->mark = p->lit_at;
        begin_call(p, P_KIMI_ID, N_K_AFTER);
        p->id_at = p->pos + 1;
    } else if (strcmp(lit, KIMI_CALL_END) == 0) {
        p->next = N_K_SECTION;
    } else { /* the end of kimi's section */
        p->next = N_K_END;
    }
}

/* One byte, text[p->pos]: true when it was read (else it is read again,
 * in the state it moved to). */
static bool step(struct srv_tool_parser *p, const char *text)
{
    const unsigned char c = (unsigned char)text[p->pos];
    bool again = false, ok = true;
    switch (p->state) {
    case P_START: /* llama3: a reply that begins with '{' is a call */
        if (is_space((char)c)) {
            add_content(p, text + p->pos, 1);
            return true;
        }
        if (c == '{') {
            p->state = P_SPACE;
            p->next = N_CALL;
            return false;
        }
        p->state = P_CONTENT;
        return false;
    case P_CONTENT: {
        add_content(p, text + p->pos, 1);
        const char *m = markers[p->f];
        const size_t mn = m ? strlen(m) : 0;
        if (mn && p->out.content_len >= mn && memcmp(p->out.content + p->out.content_len - mn, m, mn) == 0) {
            p->out.content_len -= mn;
            p->out.content[p->out.content_len] = '\0';
            p->mark = p->pos + 1 - mn;
            p->state = P_SPACE;
            p->next = p->f == SRV_TOOLS_MISTRAL ? N_M_OPEN : p->f == SRV_TOOLS_KIMI ? N_K_SECTION : N_CALL;
        }
        return true;
    }
    case P_SPACE:
        if (is_space((char)c)) return true;
        ok = next_byte(p, c, &again);
        break;
    case P_LIT: {
        const char *const *lits = next_literals(p->next);
        const size_t k = p->pos - p->lit_at;
        const char *done = NULL;
        for (int i = 0; lits[i]; i++) {
            if (!(p->lits & (1 << i))) continue;
            if ((unsigned char)lits[i][k] != c) p->lits &= ~(1 << i);
            else if (!lits[i][k + 1]) done = lits[i];
        }
        if (!p->lits) {
            leave(p, text, p->lit_at);
            return false;
        }
        if (done) literal_done(p, done);
        return true;
    }
    case P_CALL:
        ok = call_byte(p, text, c, &again);
        break;
    case P_KIMI_ID: {
        static const char am[] = KIMI_ARGUMENTS;
        const size_t an = sizeof am - 1, end = p->pos + 1;
        if (end - p->id_at >= an && memcmp(text + end - an, am, an) == 0) {
            ok = kimi_name(p, text, end - an);
            p->state = P_SPACE;
            p->next = N_K_ARGS;
        } else {
            ok = end - p->id_at < KIMI_MAX_ID + an + 64;
        }
        break;
    }
    case P_KIMI_ARGS: {
        const int r = js_byte(&p->js, c);
        ok = r != JS_ERR;
        if (r == JS_KEEP || r == JS_END) add_args(p, (const char *)&c, 1);
        if (r == JS_END) {
            p->args_mode = ARGS_DONE;
            end_call(p);
            p->state = P_SPACE;
            p->next = N_K_AFTER;
        }
        break;
    }
    default: /* P_TAIL */
        add_content(p, text + p->pos, 1);
        return true;
    }
    if (!ok) {
        leave(p, text, p->pos);
        return false;
    }
    return !again;
}

/* How much of the content no later text changes. */
static size_t content_final(const struct srv_tool_parser *p)
{
    const char *t = p->out.content;
    const size_t n = p->out.content_len;
    if (p->state == P_TAIL || p->out.n > 0) return n;
    if (p->state == P_START) return 0;
    if (p->state != P_CONTENT) return trim_end(t, n);
    const char *m = markers[p->f];
    if (!m) return n;
    /* the longest end of the content that begins the marker */
    const size_t mn = strlen(m);
    size_t safe = n;
    for (size_t k = mn - 1 < n ? mn - 1 : n; k > 0; k--)
        if (memcmp(t + n - k, m, k) == 0) {
            safe = n - k;
            break;
        }
    return trim_end(t, safe);
}

void srv_tool_parser_feed(struct srv_tool_parser *p, const char *text, size_t len)
{
    while (p->pos < len && !p->oom)
        if (step(p, text)) p->pos++;
    if (!p->oom) p->content_final = content_final(p);
}

void srv_tool_parser_finish(struct srv_tool_parser *p, const char *text, size_t len)
{
    srv_tool_parser_feed(p, text, len);
    if (p->oom) return;
    if (p->out.n > 0) {
        /* cut short after the calls: a call added stands as far as it was
         * written; one not yet added (no name yet), a group opened
         * without a call or a marker begun are dropped */
        end_call(p);
        p->mark = NONE;
    } else if (p->in_call || p->mark != NONE) {
        leave(p, text, len); /* no calls: all of the text is content */
    }
    p->state = P_TAIL;
    p->content_final = p->out.content_len;
}

void srv_tool_parser_free(struct srv_tool_parser *p)
{
    end_call(p);
    srv_tool_calls_free(&p->out);
}

bool srv_tool_calls_parse(enum srv_tool_format f, const char *text, size_t len, struct srv_tool_calls *out)
{
    struct srv_tool_parser p;
    srv_tool_parser_init(&p, f);
    srv_tool_parser_finish(&p, text, len);
    if (p.oom || p.out.n == 0) {
        srv_tool_parser_free(&p);
        memset(out, 0, sizeof *out);
        return false;
    }
    *out = p.out;
    if (out->content_len == 0) {
        free(out->content);
        out->content = NULL;
    }
    return true;
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
                          const char *call_mid, const char *call_end, const char *close, bool several, char **out,
                          char *why, size_t why_len)
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
        if (root) snprintf(root, rl, "root ::= %s%s%s( %s )%s%s%s%s\n%s", *open ? "\"" : "", open, *open ? "\" " : "",
                           alts, several ? "+" : "", *close ? " \"" : "", close, *close ? "\"" : "", g);
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
    return srv_tool_calls_grammar_n(f, tools_json, name, false, out, why, why_len);
}

bool srv_tool_calls_grammar_n(enum srv_tool_format f, const char *tools_json, const char *name, bool several,
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
                                      " <|constrain|>json<|message|>", "", "", false, out, why, why_len)
                      : named_grammar(tools, name, KIMI_SECTION, KIMI_CALL "functions.",
                                      several ? ":\" [0-9] [0-9]? \"" KIMI_ARGUMENTS : ":0" KIMI_ARGUMENTS,
                                      KIMI_CALL_END, KIMI_SECTION_END, several, out, why, why_len);
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
    /* several: the call again, after the format's separator, as often as
     * the model likes */
    static const char *const again[] = {" \"\\n</tool_call>\\n<tool_call>\\n\" ", " \"; \" ", " \", \" "};
    size_t cap = strlen(gbnf) + (size_t)expr_len + 128;
    char *g = malloc(cap);
    if (g && several)
        snprintf(g, cap, "root ::= %s( %.*s )( %s( %.*s ) )*%s%s", before[f], expr_len, gbnf + ROOT_HEAD_LEN,
                 again[f], expr_len, gbnf + ROOT_HEAD_LEN, after[f], rest);
    else if (g)
        snprintf(g, cap, "root ::= %s( %.*s )%s%s", before[f], expr_len, gbnf + ROOT_HEAD_LEN, after[f], rest);
    hearth_free(gbnf);
    if (!g) return failf(why, why_len, "out of memory");
    *out = g;
    return true;
}

/*
 * json.c -- the JSON reader (RFC 8259, strict) and the json.dumps-compatible
 * writer of json.h.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "utf8.h"

/* ---- reader ------------------------------------------------------------ */

struct reader {
    const char *text;
    size_t len;
    size_t pos;
    const char *what;
};

/* Report a problem at byte `at`, with the line and column a person would
 * look for (columns count characters, from 1). */
static hearth_status fail_at(const struct reader *r, size_t at, const char *problem)
{
    size_t line = 1, line_start = 0;
    for (size_t i = 0; i < at && i < r->len; i++) {
        if (r->text[i] == '\n') {
            line++;
            line_start = i + 1;
        }
    }
    size_t col = 1 + utf8_count(r->text + line_start, at - line_start);
    return hearth_error(HEARTH_E_FORMAT, "%s: byte %zu (line %zu, column %zu): %s",
                        r->what, at, line, col, problem);
}

static void skip_space(struct reader *r)
{
    while (r->pos < r->len) {
        char c = r->text[r->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        r->pos++;
    }
}

static bool take_literal(struct reader *r, const char *word)
{
    size_t n = strlen(word);
    if (r->len - r->pos < n || memcmp(r->text + r->pos, word, n) != 0) return false;
    r->pos += n;
    return true;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The four hex digits of a \u escape at r->pos (after "\u"); -1 if bad. */
static long read_hex4(struct reader *r)
{
    if (r->len - r->pos < 4) return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int d = hex_digit(r->text[r->pos + (size_t)i]);
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    r->pos += 4;
    return v;
}

/* A string; r->pos is at the opening quote.  Produces a vstring. */
static hearth_status read_string(struct reader *r, struct vstring **out)
{
    size_t start = ++r->pos;
    /* Fast path: no escapes, so the text is the string. */
    size_t i = start;
    while (i < r->len) {
        unsigned char c = (unsigned char)r->text[i];
        if (c == '"' || c == '\\' || c < 0x20) break;
        if (c < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        size_t n = utf8_decode(r->text + i, r->len - i, &cp);
        if (n == 0) return fail_at(r, i, "invalid UTF-8 in a string");
        i += n;
    }
    if (i < r->len && r->text[i] == '"') {
        *out = vstring_new(r->text + start, i - start);
        if (!*out) return HEARTH_E_NOMEM;
        r->pos = i + 1;
        return HEARTH_OK;
    }

    textbuf tb;
    textbuf_init(&tb, SIZE_MAX - 1, "a JSON string");
    hearth_status st = textbuf_append(&tb, r->text + start, i - start);
    r->pos = i;
    while (st == HEARTH_OK) {
        if (r->pos >= r->len) {
            st = fail_at(r, start - 1, "unterminated string");
            break;
        }
        unsigned char c = (unsigned char)r->text[r->pos];
        if (c == '"') {
            r->pos++;
            break;
        }
        if (c < 0x20) {
            st = fail_at(r, r->pos, "control character in a string (it must be escaped)");
            break;
        }
        if (c != '\\') {
            uint32_t cp;
            size_t n = c < 0x80 ? 1 : utf8_decode(r->text + r->pos, r->len - r->pos, &cp);
            if (n == 0) {
                st = fail_at(r, r->pos, "invalid UTF-8 in a string");
                break;
            }
            st = textbuf_append(&tb, r->text + r->pos, n);
            r->pos += n;
            continue;
        }
        size_t esc_at = r->pos++;
        if (r->pos >= r->len) {
            st = fail_at(r, start - 1, "unterminated string");
            break;
        }
        char e = r->text[r->pos++];
        const char *simple = NULL;
        switch (e) {
        case '"': simple = "\""; break;
        case '\\': simple = "\\"; break;
        case '/': simple = "/"; break;
        case 'b': simple = "\b"; break;
        case 'f': simple = "\f"; break;
        case 'n': simple = "\n"; break;
        case 'r': simple = "\r"; break;
        case 't': simple = "\t"; break;
        case 'u': break;
        default:
            st = fail_at(r, esc_at, "invalid escape in a string");
            continue;
        }
        if (simple) {
            st = textbuf_append(&tb, simple, 1);
            continue;
        }
        long u = read_hex4(r);
        if (u < 0) {
            st = fail_at(r, esc_at, "\\u must be followed by four hex digits");
            break;
        }
        uint32_t cp = (uint32_t)u;
        if (cp >= 0xdc00 && cp <= 0xdfff) {
            st = fail_at(r, esc_at, "lone low surrogate in a \\u escape");
            break;
        }
        if (cp >= 0xd800 && cp <= 0xdbff) {
            /* RFC 8259 section 7: a character outside the BMP is a pair of
             * escaped UTF-16 surrogates. */
            long lo = -1;
            if (r->len - r->pos >= 2 && r->text[r->pos] == '\\' && r->text[r->pos + 1] == 'u') {
                r->pos += 2;
                lo = read_hex4(r);
            }
            if (lo < 0xdc00 || lo > 0xdfff) {
                st = fail_at(r, esc_at, "high surrogate not followed by a low surrogate in a \\u escape");
                break;
            }
            cp = 0x10000 + ((cp - 0xd800) << 10) + ((uint32_t)lo - 0xdc00);
        }
        char buf[4];
        st = textbuf_append(&tb, buf, utf8_encode(cp, buf));
    }
    if (st == HEARTH_OK) {
        *out = vstring_new(tb.data ? tb.data : "", tb.len);
        if (!*out) st = HEARTH_E_NOMEM;
    }
    textbuf_free(&tb);
    return st;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* A number per the RFC 8259 grammar:
 * [-] (0 | [1-9][0-9]*) [. [0-9]+] [(e|E) [+-] [0-9]+] */
static hearth_status read_number(struct reader *r, value *out)
{
    size_t start = r->pos, p = r->pos;
    const char *t = r->text;
    if (p < r->len && t[p] == '-') p++;
    if (p >= r->len || !is_digit(t[p])) return fail_at(r, start, "invalid number");
    if (t[p] == '0') {
        p++;
        if (p < r->len && is_digit(t[p])) return fail_at(r, start, "numbers may not have leading zeros");
    } else {
        while (p < r->len && is_digit(t[p])) p++;
    }
    bool integral = true;
    if (p < r->len && t[p] == '.') {
        integral = false;
        p++;
        if (p >= r->len || !is_digit(t[p])) return fail_at(r, p, "expected a digit after the decimal point");
        while (p < r->len && is_digit(t[p])) p++;
    }
    if (p < r->len && (t[p] == 'e' || t[p] == 'E')) {
        integral = false;
        p++;
        if (p < r->len && (t[p] == '+' || t[p] == '-')) p++;
        if (p >= r->len || !is_digit(t[p])) return fail_at(r, p, "expected a digit in the exponent");
        while (p < r->len && is_digit(t[p])) p++;
    }
    r->pos = p;
    if (integral) {
        bool neg = t[start] == '-';
        uint64_t mag = 0;
        bool overflow = false;
        for (size_t i = start + neg; i < p; i++) {
            unsigned d = (unsigned)(t[i] - '0');
            if (mag > (UINT64_MAX - d) / 10) {
                overflow = true;
                break;
            }
            mag = mag * 10 + d;
        }
        if (!overflow && (neg ? mag <= (uint64_t)INT64_MAX + 1 : mag <= (uint64_t)INT64_MAX)) {
            *out = value_int(neg ? (int64_t)(0 - mag) : (int64_t)mag);
            return HEARTH_OK;
        }
        /* beyond 64 bits: kept as the nearest float */
    }
    *out = value_float(value_parse_double(t + start, p - start, NULL));
    return HEARTH_OK;
}

static hearth_status read_value(struct reader *r, int depth, value *out);

static hearth_status read_array(struct reader *r, int depth, value *out)
{
    size_t open = r->pos++;
    hearth_status st = value_new_list(0, out);
    if (st != HEARTH_OK) return st;
    skip_space(r);
    if (r->pos < r->len && r->text[r->pos] == ']') {
        r->pos++;
        return HEARTH_OK;
    }
    for (;;) {
        value item = value_undefined();
        st = read_value(r, depth + 1, &item);
        if (st == HEARTH_OK) st = value_list_push(*out, item);
        if (st != HEARTH_OK) break;
        skip_space(r);
        if (r->pos >= r->len) {
            st = fail_at(r, open, "unterminated array");
            break;
        }
        char c = r->text[r->pos++];
        if (c == ']') return HEARTH_OK;
        if (c != ',') {
            st = fail_at(r, r->pos - 1, "expected ',' or ']' in an array");
            break;
        }
        skip_space(r);
    }
    value_unref(*out);
    return st;
}

static hearth_status read_object(struct reader *r, int depth, value *out)
{
    size_t open = r->pos++;
    hearth_status st = value_new_dict(out);
    if (st != HEARTH_OK) return st;
    skip_space(r);
    if (r->pos < r->len && r->text[r->pos] == '}') {
        r->pos++;
        return HEARTH_OK;
    }
    for (;;) {
        if (r->pos >= r->len) {
            st = fail_at(r, open, "unterminated object");
            break;
        }
        if (r->text[r->pos] != '"') {
            st = fail_at(r, r->pos, "expected a string key in an object");
            break;
        }
        struct vstring *key;
        st = read_string(r, &key);
        if (st != HEARTH_OK) break;
        skip_space(r);
        if (r->pos >= r->len || r->text[r->pos] != ':') {
            value_unref(value_from_vstring(key));
            st = fail_at(r, r->pos, "expected ':' after an object key");
            break;
        }
        r->pos++;
        skip_space(r);
        value val = value_undefined();
        st = read_value(r, depth + 1, &val);
        if (st == HEARTH_OK) st = value_dict_set_vstring(*out, key, val);
        value_unref(value_from_vstring(key));
        if (st != HEARTH_OK) break;
        skip_space(r);
        if (r->pos >= r->len) {
            st = fail_at(r, open, "unterminated object");
            break;
        }
        char c = r->text[r->pos++];
        if (c == '}') return HEARTH_OK;
        if (c != ',') {
            st = fail_at(r, r->pos - 1, "expected ',' or '}' in an object");
            break;
        }
        skip_space(r);
    }
    value_unref(*out);
    return st;
}

static hearth_status read_value(struct reader *r, int depth, value *out)
{
    skip_space(r);
    if (r->pos >= r->len) return fail_at(r, r->pos, "unexpected end of the text, expected a value");
    char c = r->text[r->pos];
    if ((c == '[' || c == '{') && depth >= JSON_MAX_DEPTH) {
        char msg[80];
        snprintf(msg, sizeof msg, "nested more than %d levels deep", JSON_MAX_DEPTH);
        return fail_at(r, r->pos, msg);
    }
    switch (c) {
    case '[': return read_array(r, depth, out);
    case '{': return read_object(r, depth, out);
    case '"': {
        struct vstring *s;
        hearth_status st = read_string(r, &s);
        if (st == HEARTH_OK) *out = value_from_vstring(s);
        return st;
    }
    case 't':
        if (!take_literal(r, "true")) break;
        *out = value_bool(true);
        return HEARTH_OK;
    case 'f':
        if (!take_literal(r, "false")) break;
        *out = value_bool(false);
        return HEARTH_OK;
    case 'n':
        if (!take_literal(r, "null")) break;
        *out = value_null();
        return HEARTH_OK;
    default:
        if (c == '-' || is_digit(c)) return read_number(r, out);
        break;
    }
    if ((unsigned char)c >= 0x80 && utf8_validate(r->text + r->pos, HEARTH_MIN(r->len - r->pos, 4)) == 0)
        return fail_at(r, r->pos, "invalid UTF-8");
    return fail_at(r, r->pos, "expected a value (object, array, string, number, true, false or null)");
}

hearth_status json_parse(const char *text, size_t len, const char *what, value *out)
{
    struct reader r = {text, len, 0, what ? what : "JSON"};
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
        return fail_at(&r, 0, "the text starts with a byte order mark, which JSON does not allow");
    skip_space(&r);
    if (r.pos >= len) return fail_at(&r, r.pos, "empty text, expected a JSON value");
    value v = value_undefined();
    hearth_status st = read_value(&r, 0, &v);
    if (st != HEARTH_OK) return st;
    skip_space(&r);
    if (r.pos < len) {
        value_unref(v);
        return fail_at(&r, r.pos, "unexpected text after the JSON value");
    }
    *out = v;
    return HEARTH_OK;
}

/* ---- writer ------------------------------------------------------------ */

/* A string as json.dumps writes it: ", \ and the controls escaped, \n-style
 * where JSON has a short form, \u00XX (lower-case hex) otherwise. */
static hearth_status write_string(const char *s, size_t len, bool ensure_ascii, textbuf *tb)
{
    hearth_status st = textbuf_append_char(tb, '"');
    size_t run = 0;   /* start of the bytes not yet copied */
    size_t i = 0;
    while (st == HEARTH_OK && i < len) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char buf[16];
        size_t n = 1;
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        else if (c < 0x20 || (c == 0x7f && ensure_ascii)) {
            snprintf(buf, sizeof buf, "\\u%04x", c);
            esc = buf;
        } else if (c >= 0x80 && ensure_ascii) {
            uint32_t cp;
            n = utf8_decode(s + i, len - i, &cp);
            if (n == 0) {
                cp = 0xfffd;
                n = 1;
            }
            if (cp >= 0x10000) {
                uint32_t v = cp - 0x10000;
                snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
            } else {
                snprintf(buf, sizeof buf, "\\u%04x", cp);
            }
            esc = buf;
        }
        if (esc) {
            st = textbuf_append(tb, s + run, i - run);
            if (st == HEARTH_OK) st = textbuf_append_str(tb, esc);
            run = i + n;
        }
        i += n;
    }
    if (st == HEARTH_OK) st = textbuf_append(tb, s + run, len - run);
    if (st == HEARTH_OK) st = textbuf_append_char(tb, '"');
    return st;
}

struct writer {
    const json_format *fmt;
    const char *item_sep;
    const char *key_sep;
    textbuf *tb;
};

static hearth_status write_newline(const struct writer *w, int level)
{
    hearth_status st = textbuf_append_char(w->tb, '\n');
    for (int i = 0; st == HEARTH_OK && i < level; i++) st = textbuf_append_str(w->tb, w->fmt->indent);
    return st;
}

static hearth_status write_value(const struct writer *w, value v, int level);

static int compare_keys(const void *a, const void *b)
{
    const struct vstring *x = (*(const struct vdict_entry *const *)a)->key;
    const struct vstring *y = (*(const struct vdict_entry *const *)b)->key;
    size_t n = HEARTH_MIN(x->len, y->len);
    int c = memcmp(x->data, y->data, n);
    if (c) return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

static hearth_status write_object(const struct writer *w, const struct vdict *d, int level)
{
    if (d->len == 0) return textbuf_append(w->tb, "{}", 2);
    const struct vdict_entry **order = hearth_malloc(d->len * sizeof *order, "JSON key order");
    if (!order) return HEARTH_E_NOMEM;
    for (size_t i = 0; i < d->len; i++) order[i] = &d->entries[i];
    if (w->fmt->sort_keys) qsort(order, d->len, sizeof *order, compare_keys);
    hearth_status st = textbuf_append_char(w->tb, '{');
    for (size_t i = 0; st == HEARTH_OK && i < d->len; i++) {
        if (i) st = textbuf_append_str(w->tb, w->item_sep);
        if (st == HEARTH_OK && w->fmt->indent) st = write_newline(w, level + 1);
        if (st == HEARTH_OK) st = write_string(order[i]->key->data, order[i]->key->len, w->fmt->ensure_ascii, w->tb);
        if (st == HEARTH_OK) st = textbuf_append_str(w->tb, w->key_sep);
        if (st == HEARTH_OK) st = write_value(w, order[i]->val, level + 1);
    }
    if (st == HEARTH_OK && w->fmt->indent) st = write_newline(w, level);
    if (st == HEARTH_OK) st = textbuf_append_char(w->tb, '}');
    free(order);
    return st;
}

static hearth_status write_array(const struct writer *w, const struct vlist *l, int level)
{
    if (l->len == 0) return textbuf_append(w->tb, "[]", 2);
    hearth_status st = textbuf_append_char(w->tb, '[');
    for (size_t i = 0; st == HEARTH_OK && i < l->len; i++) {
        if (i) st = textbuf_append_str(w->tb, w->item_sep);
        if (st == HEARTH_OK && w->fmt->indent) st = write_newline(w, level + 1);
        if (st == HEARTH_OK) st = write_value(w, l->items[i], level + 1);
    }
    if (st == HEARTH_OK && w->fmt->indent) st = write_newline(w, level);
    if (st == HEARTH_OK) st = textbuf_append_char(w->tb, ']');
    return st;
}

static hearth_status write_value(const struct writer *w, value v, int level)
{
    switch (v.kind) {
    case VALUE_NULL: return textbuf_append_str(w->tb, "null");
    case VALUE_BOOL: return textbuf_append_str(w->tb, v.u.b ? "true" : "false");
    case VALUE_INT: return textbuf_printf(w->tb, "%lld", (long long)v.u.i);
    case VALUE_FLOAT: {
        /* json.dumps writes float.__repr__, and NaN and the infinities as
         * JavaScript spells them (allow_nan=True). */
        if (isnan(v.u.f)) return textbuf_append_str(w->tb, "NaN");
        if (isinf(v.u.f)) return textbuf_append_str(w->tb, v.u.f < 0 ? "-Infinity" : "Infinity");
        char buf[32];
        value_format_float(v.u.f, buf);
        return textbuf_append_str(w->tb, buf);
    }
    case VALUE_STRING: return write_string(v.u.s->data, v.u.s->len, w->fmt->ensure_ascii, w->tb);
    case VALUE_LIST: return write_array(w, v.u.list, level);
    case VALUE_DICT: return write_object(w, v.u.dict, level);
    default:
        return hearth_error(HEARTH_E_INVALID, "Object of type %s is not JSON serializable",
                            value_type_name(v));
    }
}

hearth_status json_write(value v, const json_format *fmt, textbuf *tb)
{
    static const json_format defaults = {NULL, NULL, NULL, false, false};
    if (!fmt) fmt = &defaults;
    struct writer w = {fmt, fmt->item_sep, fmt->key_sep, tb};
    if (!w.item_sep) w.item_sep = fmt->indent ? "," : ", ";
    if (!w.key_sep) w.key_sep = ": ";
    return write_value(&w, v, 0);
}

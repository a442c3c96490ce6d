/*
 * jinja_filters.c -- the filters ("x | name(args)") of Jinja that chat
 * templates use, with Jinja's argument
 * names and defaults, and tojson as transformers defines it (json.dumps
 * with ensure_ascii off).
 *
 * Filters that Jinja implements as generators (map, select, unique, ...)
 * return lists here; they print differently but iterate, join and count the
 * same.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja.h"
#include "json.h"
#include "unichar.h"
#include "utf8.h"

#define FILTER(name) \
    static hearth_status filter_##name(struct jrender *r, value self, const struct jargs *args, value *out)

/* ---- argument helpers -------------------------------------------------- */

static hearth_status no_args(const char *fn, const struct jargs *args)
{
    if (args->n_pos || args->n_kw)
        return hearth_error(HEARTH_E_TEMPLATE, "%s takes no arguments", fn);
    return HEARTH_OK;
}

static bool arg_bool(const value *v, bool dflt)
{
    return v ? value_truthy(*v) : dflt;
}

static hearth_status arg_int(const char *fn, const char *param, const value *v, int64_t dflt,
                             int64_t *out)
{
    if (!v || v->kind == VALUE_NULL) {
        *out = dflt;
        return HEARTH_OK;
    }
    if (v->kind == VALUE_INT || v->kind == VALUE_BOOL) {
        *out = v->kind == VALUE_INT ? v->u.i : v->u.b;
        return HEARTH_OK;
    }
    return hearth_error(HEARTH_E_TEMPLATE, "%s: %s must be an integer, not %s", fn, param,
                        value_type_name(*v));
}

static hearth_status arg_string(const char *fn, const char *param, const value *v,
                                const struct vstring **out)
{
    if (v && v->kind == VALUE_STRING) {
        *out = v->u.s;
        return HEARTH_OK;
    }
    return hearth_error(HEARTH_E_TEMPLATE, "%s: %s must be a string, not %s", fn, param,
                        v ? value_type_name(*v) : "nothing");
}

/* str(self) for the filters that work on text. */
static hearth_status self_text(struct jrender *r, value self, value *out)
{
    return jinja_to_string(r, self, out);
}

/* Look up a dotted attribute path ("a.b.0") item-first, as Jinja's
 * make_attrgetter does; integer parts index lists. */
static hearth_status get_path(struct jrender *r, value item, const struct vstring *path, value *out)
{
    value cur = value_ref(item);
    size_t i = 0;
    while (i <= path->len) {
        size_t end = i;
        while (end < path->len && path->data[end] != '.') end++;
        bool digits = end > i;
        for (size_t k = i; k < end; k++) digits = digits && path->data[k] >= '0' && path->data[k] <= '9';
        value key = value_undefined(), next = value_undefined();
        hearth_status st;
        if (digits && end - i < 18) {
            int64_t n = 0;
            for (size_t k = i; k < end; k++) n = n * 10 + (path->data[k] - '0');
            key = value_int(n);
            st = HEARTH_OK;
        } else {
            st = value_new_string(path->data + i, end - i, &key);
        }
        if (st == HEARTH_OK) {
            st = jrender_getitem(r, cur, key, &next);
            value_unref(key);
        }
        value_unref(cur);
        if (st != HEARTH_OK) return st;
        cur = next;
        i = end + 1;
    }
    *out = cur;
    return HEARTH_OK;
}

/* The comparison key of sort/unique/min/max/dictsort: the item or its
 * attribute, lower-cased when it is a string and the comparison is not
 * case-sensitive. */
static hearth_status sort_key(struct jrender *r, value item, const struct vstring *attribute,
                              bool case_sensitive, value *out)
{
    value v = value_undefined();
    hearth_status st = attribute ? get_path(r, item, attribute, &v) : (v = value_ref(item), HEARTH_OK);
    if (st != HEARTH_OK) return st;
    if (!case_sensitive && v.kind == VALUE_STRING) {
        value lower = value_undefined();
        st = jtext_case(r, v.u.s, JCASE_LOWER, &lower);
        value_unref(v);
        if (st != HEARTH_OK) return st;
        v = lower;
    }
    *out = v;
    return HEARTH_OK;
}

/* ---- text filters ------------------------------------------------------ */

static hearth_status case_filter(struct jrender *r, const char *fn, value self, const struct jargs *args,
                                 enum jcase how, value *out)
{
    hearth_status st = no_args(fn, args);
    value s = value_undefined();
    if (st == HEARTH_OK) st = self_text(r, self, &s);
    if (st != HEARTH_OK) return st;
    st = jtext_case(r, s.u.s, how, out);
    value_unref(s);
    return st;
}

FILTER(upper) { return case_filter(r, "upper", self, args, JCASE_UPPER, out); }
FILTER(lower) { return case_filter(r, "lower", self, args, JCASE_LOWER, out); }
FILTER(capitalize) { return case_filter(r, "capitalize", self, args, JCASE_CAPITALIZE, out); }
FILTER(title) { return case_filter(r, "title", self, args, JCASE_JINJA_TITLE, out); }

FILTER(trim)
{
    static const char *const names[] = {"chars", NULL};
    const value *a[1];
    hearth_status st = jargs_bind("trim", args, names, a);
    const struct vstring *chars = NULL;
    if (st == HEARTH_OK && a[0] && a[0]->kind != VALUE_NULL) st = arg_string("trim", "chars", a[0], &chars);
    value s = value_undefined();
    if (st == HEARTH_OK) st = self_text(r, self, &s);
    if (st != HEARTH_OK) return st;
    st = jtext_strip(r, s.u.s, chars, true, true, out);
    value_unref(s);
    return st;
}

FILTER(replace)
{
    static const char *const names[] = {"old", "new", "count", NULL};
    const value *a[3];
    const struct vstring *old = NULL, *new_text = NULL;
    int64_t count;
    hearth_status st = jargs_bind("replace", args, names, a);
    if (st == HEARTH_OK) st = arg_string("replace", "old", a[0], &old);
    if (st == HEARTH_OK) st = arg_string("replace", "new", a[1], &new_text);
    if (st == HEARTH_OK) st = arg_int("replace", "count", a[2], -1, &count);
    value s = value_undefined();
    if (st == HEARTH_OK) st = self_text(r, self, &s);
    if (st != HEARTH_OK) return st;
    st = jtext_replace(r, s.u.s, old, new_text, count, out);
    value_unref(s);
    return st;
}

FILTER(string)
{
    (void)r;
    hearth_status st = no_args("string", args);
    return st == HEARTH_OK ? self_text(r, self, out) : st;
}

/* escape (e) leaves strings already marked safe alone; forceescape
 * escapes them too.  Both give safe strings. */
static hearth_status escape_filter(struct jrender *r, const char *fn, value self, const struct jargs *args,
                                   bool force, value *out)
{
    hearth_status st = no_args(fn, args);
    if (st != HEARTH_OK) return st;
    if (!force && self.kind == VALUE_STRING && self.u.s->markup) {
        *out = value_ref(self);
        return HEARTH_OK;
    }
    value s = value_undefined();
    st = self_text(r, self, &s);
    if (st != HEARTH_OK) return st;
    textbuf tb;
    textbuf_init(&tb, JINJA_MAX_OUTPUT, "an escaped string");
    st = jtext_html_escape(&tb, s.u.s->data, s.u.s->len);
    value_unref(s);
    if (st == HEARTH_OK) st = jinja_string_from(r, &tb, out);
    if (st == HEARTH_OK) out->u.s->markup = true;   /* a new string: ours to mark */
    textbuf_free(&tb);
    return st;
}

FILTER(escape) { return escape_filter(r, "escape", self, args, false, out); }
FILTER(forceescape) { return escape_filter(r, "forceescape", self, args, true, out); }

FILTER(indent)
{
    static const char *const names[] = {"width", "first", "blank", NULL};
    const value *a[3];
    hearth_status st = jargs_bind("indent", args, names, a);
    if (st != HEARTH_OK) return st;
    textbuf pad;
    textbuf_init(&pad, JINJA_MAX_OUTPUT, "an indentation");
    if (a[0] && a[0]->kind == VALUE_STRING) {
        st = textbuf_append(&pad, a[0]->u.s->data, a[0]->u.s->len);
    } else {
        int64_t width;
        st = arg_int("indent", "width", a[0], 4, &width);
        for (int64_t i = 0; st == HEARTH_OK && i < width; i++) st = textbuf_append_char(&pad, ' ');
    }
    bool first = arg_bool(a[1], false), blank = arg_bool(a[2], false);
    value s = value_undefined(), lines = value_undefined();
    if (st == HEARTH_OK) st = self_text(r, self, &s);
    /* Jinja adds a newline before splitting, so a trailing newline keeps
     * an (unindented) empty last line */
    if (st == HEARTH_OK) {
        struct vstring *nl = vstring_alloc(s.u.s->len + 1);
        if (!nl) {
            st = HEARTH_E_NOMEM;
        } else {
            memcpy(nl->data, s.u.s->data, s.u.s->len);
            nl->data[s.u.s->len] = '\n';
            nl->n_chars = s.u.s->n_chars + 1;
            st = jtext_splitlines(r, nl, false, &lines);
            value_unref(value_from_vstring(nl));
        }
    }
    textbuf tb;
    textbuf_init(&tb, JINJA_MAX_OUTPUT, "an indented string");
    if (st == HEARTH_OK && first) st = textbuf_append(&tb, pad.data ? pad.data : "", pad.len);
    for (size_t i = 0; st == HEARTH_OK && i < value_list_len(lines); i++) {
        const struct vstring *line = value_list_at(lines, i).u.s;
        if (i > 0) {
            st = textbuf_append_char(&tb, '\n');
            if (st == HEARTH_OK && (blank || line->len > 0))
                st = textbuf_append(&tb, pad.data ? pad.data : "", pad.len);
        }
        if (st == HEARTH_OK) st = textbuf_append(&tb, line->data, line->len);
    }
    value_unref(s);
    value_unref(lines);
    textbuf_free(&pad);
    if (st == HEARTH_OK) st = jinja_string_from(r, &tb, out);
    textbuf_free(&tb);
    return st;
}

FILTER(center)
{
    static const char *const names[] = {"width", NULL};
    const value *a[1];
    int64_t width;
    hearth_status st = jargs_bind("center", args, names, a);
    if (st == HEARTH_OK) st = arg_int("center", "width", a[0], 80, &width);
    value s = value_undefined();
    if (st == HEARTH_OK) st = self_text(r, self, &s);
    if (st != HEARTH_OK) return st;
    if (width > JINJA_MAX_OUTPUT) width = JINJA_MAX_OUTPUT;
    int64_t chars = (int64_t)s.u.s->n_chars;
    if (width <= chars) {
        *out = s;
        return HEARTH_OK;
    }
    /* CPython: left = marg / 2 + (marg & width & 1) */
    int64_t marg = width - chars, left = marg / 2 + (marg & width & 1);
    textbuf tb;
    textbuf_init(&tb, JINJA_MAX_OUTPUT, "a centred string");
    st = jrender_charge(r, (size_t)width / JINJA_WORK_BYTES);
    for (int64_t i = 0; st == HEARTH_OK && i < left; i++) st = textbuf_append_char(&tb, ' ');
    if (st == HEARTH_OK) st = textbuf_append(&tb, s.u.s->data, s.u.s->len);
    for (int64_t i = 0; st == HEARTH_OK && i < marg - left; i++) st = textbuf_append_char(&tb, ' ');
    value_unref(s);
    if (st == HEARTH_OK) st = jinja_string_from(r, &tb, out);
    textbuf_free(&tb);
    return st;
}

FILTER(wordcount)
{
    (void)r;
    hearth_status st = no_args("wordcount", args);
    value s = value_undefined();
    if (st == HEARTH_OK) st = self_text(r, self, &s);
    if (st != HEARTH_OK) return st;
    int64_t words = 0;
    bool in_word = false;
    for (size_t i = 0; i < s.u.s->len;) {
        uint32_t cp;
        size_t n = utf8_decode(s.u.s->data + i, s.u.s->len - i, &cp);
        if (n == 0) {
            cp = 0;
            n = 1;
        }
        bool w = uni_isword(cp);
        if (w && !in_word) words++;
        in_word = w;
        i += n;
    }
    value_unref(s);
    *out = value_int(words);
    return HEARTH_OK;
}

FILTER(truncate)
{
    static const char *const names[] = {"length", "killwords", "end", "leeway", NULL};
    const value *a[4];
    int64_t length, leeway;
    const struct vstring *end = NULL;
    hearth_status st = jargs_bind("truncate", args, names, a);
    if (st == HEARTH_OK) st = arg_int("truncate", "length", a[0], 255, &length);
    if (st == HEARTH_OK && a[2]) st = arg_string("truncate", "end", a[2], &end);
    if (st == HEARTH_OK) st = arg_int("truncate", "leeway", a[3], 5, &leeway);
    value s = value_undefined();
    if (st == HEARTH_OK) st = self_text(r, self, &s);
    if (st != HEARTH_OK) return st;
    const char *end_text = end ? end->data : "...";
    size_t end_len = end ? end->len : 3, end_chars = end ? end->n_chars : 3;
    if (length < (int64_t)end_chars || leeway < 0) {
        value_unref(s);
        return hearth_error(HEARTH_E_TEMPLATE, "truncate: expected length >= %zu and leeway >= 0", end_chars);
    }
    if ((int64_t)s.u.s->n_chars <= length + leeway) {
        *out = s;
        return HEARTH_OK;
    }
    size_t cut = utf8_offset(s.u.s->data, s.u.s->len, (size_t)length - end_chars);
    if (!arg_bool(a[1], false)) {
        /* drop the last, partial word: s[:cut].rsplit(" ", 1)[0] */
        size_t k = cut;
        while (k > 0 && s.u.s->data[k - 1] != ' ') k--;
        if (k > 0) cut = k - 1;
    }
    textbuf tb;
    textbuf_init(&tb, JINJA_MAX_OUTPUT, "a truncated string");
    st = textbuf_append(&tb, s.u.s->data, cut);
    if (st == HEARTH_OK) st = textbuf_append(&tb, end_text, end_len);
    value_unref(s);
    if (st == HEARTH_OK) st = jinja_string_from(r, &tb, out);
    textbuf_free(&tb);
    return st;
}

FILTER(format)
{
    value s = value_undefined();
    hearth_status st = self_text(r, self, &s);
    if (st != HEARTH_OK) return st;
    value fmt_args = value_undefined();
    if (args->n_kw) {
        if (args->n_pos) {
            value_unref(s);
            return hearth_error(HEARTH_E_TEMPLATE, "format: can't handle positional and keyword arguments at the same time");
        }
        st = value_new_dict(&fmt_args);
        for (size_t i = 0; st == HEARTH_OK && i < args->n_kw; i++)
            st = value_dict_set(fmt_args, args->kw_names[i], strlen(args->kw_names[i]), value_ref(args->kw_vals[i]));
    } else {
        st = value_new_list(args->n_pos, &fmt_args);
        if (st == HEARTH_OK) fmt_args.u.list->is_tuple = true;
        for (size_t i = 0; st == HEARTH_OK && i < args->n_pos; i++)
            st = value_list_push(fmt_args, value_ref(args->pos[i]));
    }
    if (st == HEARTH_OK) {
        st = jtext_percent_format(r, s.u.s, fmt_args, out);
        value_unref(fmt_args);
    }
    value_unref(s);
    return st;
}

/* ---- values ---------------------------------------------------------------- */

FILTER(default)
{
    (void)r;
    static const char *const names[] = {"default_value", "boolean", NULL};
    const value *a[2];
    hearth_status st = jargs_bind("default", args, names, a);
    if (st != HEARTH_OK) return st;
    bool use_default = self.kind == VALUE_UNDEFINED || (arg_bool(a[1], false) && !value_truthy(self));
    if (!use_default) {
        *out = value_ref(self);
        return HEARTH_OK;
    }
    if (a[0]) *out = value_ref(*a[0]);
    else st = value_new_string("", 0, out);
    return st;
}

FILTER(length)
{
    (void)r;
    hearth_status st = no_args("length", args);
    if (st != HEARTH_OK) return st;
    switch (self.kind) {
    case VALUE_STRING: *out = value_int((int64_t)self.u.s->n_chars); return HEARTH_OK;
    case VALUE_LIST: *out = value_int((int64_t)value_list_len(self)); return HEARTH_OK;
    case VALUE_DICT: *out = value_int((int64_t)self.u.dict->len); return HEARTH_OK;
    case VALUE_UNDEFINED: *out = value_int(0); return HEARTH_OK;
    default:
        return hearth_error(HEARTH_E_TEMPLATE, "object of type '%s' has no len()", value_type_name(self));
    }
}

FILTER(tojson)
{
    static const char *const names[] = {"indent", "ensure_ascii", "separators", "sort_keys", NULL};
    const value *a[4];
    hearth_status st = jargs_bind("tojson", args, names, a);
    if (st != HEARTH_OK) return st;
    json_format fmt = {NULL, NULL, NULL, arg_bool(a[1], false), arg_bool(a[3], false)};
    char spaces[65];
    if (a[0] && a[0]->kind == VALUE_STRING) {
        fmt.indent = a[0]->u.s->data;
    } else if (a[0] && a[0]->kind != VALUE_NULL) {
        int64_t n;
        st = arg_int("tojson", "indent", a[0], 0, &n);
        if (st != HEARTH_OK) return st;
        if (n > 64) return hearth_error(HEARTH_E_UNSUPPORTED, "tojson: indent of more than 64 spaces");
        if (n < 0) n = 0;
        memset(spaces, ' ', (size_t)n);
        spaces[n] = '\0';
        fmt.indent = spaces;
    }
    if (a[2] && a[2]->kind != VALUE_NULL) {
        const value *sep = a[2];
        if (sep->kind != VALUE_LIST || value_list_len(*sep) != 2 ||
            value_list_at(*sep, 0).kind != VALUE_STRING || value_list_at(*sep, 1).kind != VALUE_STRING)
            return hearth_error(HEARTH_E_TEMPLATE, "tojson: separators must be a pair of strings");
        fmt.item_sep = value_list_at(*sep, 0).u.s->data;
        fmt.key_sep = value_list_at(*sep, 1).u.s->data;
    }
    textbuf tb;
    textbuf_init(&tb, JINJA_MAX_OUTPUT, "tojson output");
    st = json_write(self, &fmt, &tb);
    if (st == HEARTH_OK) st = jinja_string_from(r, &tb, out);
    textbuf_free(&tb);
    return st;
}

/* Python int() of a string, with the base rules of int(s, base); false
 * when it is not a valid literal. */
static bool parse_python_int(const char *s, size_t len, int64_t base, int64_t *out)
{
    size_t i = 0;
    while (i < len && uni_isspace((unsigned char)s[i])) i++;
    while (len > i && uni_isspace((unsigned char)s[len - 1])) len--;
    bool neg = false;
    if (i < len && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    if (i + 1 < len && s[i] == '0') {
        char k = (char)(s[i + 1] | 0x20);
        int64_t prefix_base = k == 'x' ? 16 : k == 'o' ? 8 : k == 'b' ? 2 : 0;
        if (prefix_base && (base == prefix_base || base == 0)) {
            base = prefix_base;
            i += 2;
            if (i < len && s[i] == '_') i++;
        }
    }
    if (base == 0) base = 10;
    if (base < 2 || base > 36 || i >= len) return false;
    uint64_t v = 0;
    bool prev_digit = false;
    for (; i < len; i++) {
        char c = s[i];
        if (c == '_') {
            if (!prev_digit || i + 1 >= len) return false;
            prev_digit = false;
            continue;
        }
        int d = (c >= '0' && c <= '9') ? c - '0' : ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ? (c | 0x20) - 'a' + 10 : 99;
        if (d >= base) return false;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) return false;
        v = v * (uint64_t)base + (uint64_t)d;
        prev_digit = true;
    }
    if (!prev_digit) return false;
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX) return false;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

/* Python float() of a string; false when it is not a float literal. */
static bool parse_python_float(const char *s, size_t len, double *out)
{
    size_t i = 0;
    while (i < len && uni_isspace((unsigned char)s[i])) i++;
    while (len > i && uni_isspace((unsigned char)s[len - 1])) len--;
    if (i >= len || len - i > 400) return false;
    char buf[408];
    size_t n = 0;
    bool digits = false;
    for (size_t k = i; k < len; k++) {
        char c = s[k];
        if (c == '_') {
            /* only between digits */
            if (!(k > i && k + 1 < len && s[k - 1] >= '0' && s[k - 1] <= '9' && s[k + 1] >= '0' && s[k + 1] <= '9'))
                return false;
            continue;
        }
        if (c >= '0' && c <= '9') digits = true;
        buf[n++] = c;
    }
    buf[n] = '\0';
    const char *p = buf;
    bool neg = false;
    if (*p == '+' || *p == '-') neg = *p++ == '-';
    if (!digits) {
        /* inf, infinity, nan in any case */
        char low[16];
        size_t m = strlen(p);
        if (m >= sizeof low) return false;
        for (size_t k = 0; k <= m; k++) low[k] = (char)((p[k] >= 'A' && p[k] <= 'Z') ? p[k] + 32 : p[k]);
        if (!strcmp(low, "inf") || !strcmp(low, "infinity")) *out = neg ? -INFINITY : INFINITY;
        else if (!strcmp(low, "nan")) *out = NAN;
        else return false;
        return true;
    }
    /* digits [. digits] [e [+-] digits], with at least one digit */
    const char *q = p;
    while (*q >= '0' && *q <= '9') q++;
    if (*q == '.') {
        q++;
        while (*q >= '0' && *q <= '9') q++;
    }
    if (*q == 'e' || *q == 'E') {
        q++;
        if (*q == '+' || *q == '-') q++;
        if (!(*q >= '0' && *q <= '9')) return false;
        while (*q >= '0' && *q <= '9') q++;
    }
    if (*q) return false;
    size_t used;
    double d = value_parse_double(buf, n, &used);
    if (used != n) return false;
    *out = d;
    return true;
}

FILTER(int)
{
    (void)r;
    static const char *const names[] = {"default", "base", NULL};
    const value *a[2];
    int64_t base;
    hearth_status st = jargs_bind("int", args, names, a);
    if (st == HEARTH_OK) st = arg_int("int", "base", a[1], 10, &base);
    if (st != HEARTH_OK) return st;
    int64_t i = 0;
    double d = 0;
    switch (self.kind) {
    case VALUE_INT: *out = value_int(self.u.i); return HEARTH_OK;
    case VALUE_BOOL: *out = value_int(self.u.b); return HEARTH_OK;
    case VALUE_FLOAT:
        if (isfinite(self.u.f) && fabs(self.u.f) < 9.2e18) {
            *out = value_int((int64_t)self.u.f);
            return HEARTH_OK;
        }
        break;
    case VALUE_STRING:
        if (parse_python_int(self.u.s->data, self.u.s->len, base, &i)) {
            *out = value_int(i);
            return HEARTH_OK;
        }
        /* Jinja's quirk: "42.23"|int is 42 */
        if (parse_python_float(self.u.s->data, self.u.s->len, &d) && isfinite(d) && fabs(d) < 9.2e18) {
            *out = value_int((int64_t)d);
            return HEARTH_OK;
        }
        break;
    default: break;
    }
    *out = a[0] ? value_ref(*a[0]) : value_int(0);
    return HEARTH_OK;
}

FILTER(float)
{
    (void)r;
    static const char *const names[] = {"default", NULL};
    const value *a[1];
    hearth_status st = jargs_bind("float", args, names, a);
    if (st != HEARTH_OK) return st;
    double d = 0;
    switch (self.kind) {
    case VALUE_INT: *out = value_float((double)self.u.i); return HEARTH_OK;
    case VALUE_BOOL: *out = value_float(self.u.b); return HEARTH_OK;
    case VALUE_FLOAT: *out = self; return HEARTH_OK;
    case VALUE_STRING:
        if (parse_python_float(self.u.s->data, self.u.s->len, &d)) {
            *out = value_float(d);
            return HEARTH_OK;
        }
        break;
    default: break;
    }
    *out = a[0] ? value_ref(*a[0]) : value_float(0.0);
    return HEARTH_OK;
}

FILTER(abs)
{
    (void)r;
    hearth_status st = no_args("abs", args);
    if (st != HEARTH_OK) return st;
    if (self.kind == VALUE_INT || self.kind == VALUE_BOOL) {
        int64_t i = self.kind == VALUE_INT ? self.u.i : self.u.b;
        if (i == INT64_MIN) return hearth_error(HEARTH_E_RANGE, "integer result does not fit in 64 bits");
        *out = value_int(i < 0 ? -i : i);
        return HEARTH_OK;
    }
    if (self.kind == VALUE_FLOAT) {
        *out = value_float(fabs(self.u.f));
        return HEARTH_OK;
    }
    return hearth_error(HEARTH_E_TEMPLATE, "bad operand type for abs(): '%s'", value_type_name(self));
}

/* Python's round(x, ndigits) for floats: correctly rounded, ties to even
 * on the exact binary value, which is what printf's %.Nf does. */
static double python_round(double x, int64_t ndigits)
{
    if (!isfinite(x)) return x;
    if (ndigits > 300) return x;
    if (ndigits >= 0) {
        char buf[512];
        snprintf(buf, sizeof buf, "%.*e", 16, x);   /* magnitude check */
        if (fabs(x) >= 1e300) return x;
        snprintf(buf, sizeof buf, "%.*f", (int)ndigits, x);
        char *dot = strpbrk(buf, ",");   /* a locale decimal comma */
        if (dot) *dot = '.';
        return value_parse_double(buf, strlen(buf), NULL);
    }
    double p = pow(10.0, (double)-ndigits);
    if (!isfinite(p)) return copysign(0.0, x);
    double q = x / p, rq = nearbyint(q);   /* default rounding: ties to even */
    return rq * p;
}

FILTER(round)
{
    (void)r;
    static const char *const names[] = {"precision", "method", NULL};
    const value *a[2];
    int64_t precision;
    hearth_status st = jargs_bind("round", args, names, a);
    if (st == HEARTH_OK) st = arg_int("round", "precision", a[0], 0, &precision);
    if (st != HEARTH_OK) return st;
    const char *method = "common";
    if (a[1]) {
        const struct vstring *m = NULL;
        st = arg_string("round", "method", a[1], &m);
        if (st != HEARTH_OK) return st;
        method = m->data;
    }
    if (strcmp(method, "common") && strcmp(method, "ceil") && strcmp(method, "floor"))
        return hearth_error(HEARTH_E_TEMPLATE, "round: method must be common, ceil or floor");
    if (self.kind != VALUE_INT && self.kind != VALUE_FLOAT && self.kind != VALUE_BOOL)
        return hearth_error(HEARTH_E_TEMPLATE, "round: expected a number, got %s", value_type_name(self));
    if (!strcmp(method, "common")) {
        if (self.kind != VALUE_FLOAT) {
            /* round(int, n) stays an int (and is unchanged for n >= 0) */
            int64_t i = self.kind == VALUE_INT ? self.u.i : self.u.b;
            if (precision < 0) i = (int64_t)python_round((double)i, precision);
            *out = value_int(i);
        } else {
            *out = value_float(python_round(self.u.f, precision));
        }
        return HEARTH_OK;
    }
    double x = self.kind == VALUE_FLOAT ? self.u.f : (double)(self.kind == VALUE_INT ? self.u.i : self.u.b);
    double p = pow(10.0, (double)precision);
    double y = !strcmp(method, "ceil") ? ceil(x * p) / p : floor(x * p) / p;
    *out = value_float(y);
    return HEARTH_OK;
}

FILTER(safe)
{
    hearth_status st = no_args("safe", args);
    if (st != HEARTH_OK) return st;
    if (self.kind == VALUE_STRING && self.u.s->markup) {
        *out = value_ref(self);
        return HEARTH_OK;
    }
    value s = value_undefined();
    st = self_text(r, self, &s);
    /* a marked copy: the text itself may be shared */
    if (st == HEARTH_OK) st = jrender_new_string(r, s.u.s->data, s.u.s->len, out);
    if (st == HEARTH_OK) out->u.s->markup = true;
    value_unref(s);
    return st;
}

/* ---- sequences --------------------------------------------------------------- */

FILTER(list)
{
    *out = value_undefined();
    hearth_status st = no_args("list", args);
    value items = value_undefined();
    if (st == HEARTH_OK) st = jrender_iterate(r, self, &items);
    if (st != HEARTH_OK) return st;
    if (self.kind == VALUE_LIST) {
        /* a copy, which is a list even when self is a tuple */
        st = value_new_list(value_list_len(items), out);
        for (size_t i = 0; st == HEARTH_OK && i < value_list_len(items); i++)
            st = value_list_push(*out, value_ref(value_list_at(items, i)));
        if (st != HEARTH_OK) value_unref(*out);
        value_unref(items);
        return st;
    }
    *out = items;
    return HEARTH_OK;
}

FILTER(first)
{
    hearth_status st = no_args("first", args);
    value items = value_undefined();
    if (st == HEARTH_OK) st = jrender_iterate(r, self, &items);
    if (st != HEARTH_OK) return st;
    *out = value_list_len(items) ? value_ref(value_list_at(items, 0))
                                 : value_undefined_because("No first item, sequence was empty.");
    value_unref(items);
    return HEARTH_OK;
}

FILTER(last)
{
    hearth_status st = no_args("last", args);
    value items = value_undefined();
    if (st == HEARTH_OK) st = jrender_iterate(r, self, &items);
    if (st != HEARTH_OK) return st;
    size_t n = value_list_len(items);
    *out = n ? value_ref(value_list_at(items, n - 1))
             : value_undefined_because("No last item, sequence was empty.");
    value_unref(items);
    return HEARTH_OK;
}

FILTER(reverse)
{
    *out = value_undefined();
    hearth_status st = no_args("reverse", args);
    if (st != HEARTH_OK) return st;
    value items = value_undefined();
    st = jrender_iterate(r, self, &items);
    if (st != HEARTH_OK) return st;
    size_t n = value_list_len(items);
    if (self.kind == VALUE_STRING) {
        textbuf tb;
        textbuf_init(&tb, JINJA_MAX_OUTPUT, "a reversed string");
        for (size_t i = n; st == HEARTH_OK && i > 0; i--) {
            const struct vstring *c = value_list_at(items, i - 1).u.s;
            st = textbuf_append(&tb, c->data, c->len);
        }
        if (st == HEARTH_OK) st = jinja_string_from(r, &tb, out);
        textbuf_free(&tb);
    } else {
        st = value_new_list(n, out);
        for (size_t i = n; st == HEARTH_OK && i > 0; i--)
            st = value_list_push(*out, value_ref(value_list_at(items, i - 1)));
        if (st != HEARTH_OK) value_unref(*out);
    }
    value_unref(items);
    return st;
}

FILTER(join)
{
    static const char *const names[] = {"d", "attribute", NULL};
    const value *a[2];
    hearth_status st = jargs_bind("join", args, names, a);
    value sep = value_undefined(), items = value_undefined();
    const struct vstring *attribute = NULL;
    if (st == HEARTH_OK && a[1] && a[1]->kind != VALUE_NULL) {
        if (a[1]->kind == VALUE_STRING) attribute = a[1]->u.s;
        else st = hearth_error(HEARTH_E_TEMPLATE, "join: attribute must be a string");
    }
    if (st == HEARTH_OK) st = a[0] ? jinja_to_string(r, *a[0], &sep) : value_new_string("", 0, &sep);
    if (st == HEARTH_OK) st = jrender_iterate(r, self, &items);
    textbuf tb;
    textbuf_init(&tb, JINJA_MAX_OUTPUT, "a joined string");
    for (size_t i = 0; st == HEARTH_OK && i < value_list_len(items); i++) {
        if (i) st = textbuf_append(&tb, sep.u.s->data, sep.u.s->len);
        value item = value_list_at(items, i);
        if (st == HEARTH_OK && attribute) {
            value v = value_undefined();
            st = get_path(r, item, attribute, &v);
            if (st == HEARTH_OK) {
                st = value_str(v, &tb);
                value_unref(v);
            }
        } else if (st == HEARTH_OK) {
            st = value_str(item, &tb);
        }
    }
    if (st == HEARTH_OK) st = jrender_charge(r, value_list_len(items));
    if (st == HEARTH_OK) st = jinja_string_from(r, &tb, out);
    textbuf_free(&tb);
    value_unref(sep);
    value_unref(items);
    return st;
}

FILTER(items)
{
    hearth_status st = no_args("items", args);
    if (st != HEARTH_OK) return st;
    if (self.kind == VALUE_UNDEFINED) return value_new_list(0, out);
    if (self.kind != VALUE_DICT)
        return hearth_error(HEARTH_E_TEMPLATE, "Can only get item pairs from a mapping.");
    /* the same as the dict's items() method */
    jinja_fn items = jinja_find_method(self, "items");
    struct jargs none = {NULL, 0, NULL, NULL, 0};
    return items(r, self, &none, out);
}

/* A stable merge sort of keys[] (with their items), stopping at the first
 * comparison Python would reject. */
static hearth_status merge_sort(struct jrender *r, value *keys, value *items, value *tmp_k,
                                value *tmp_i, size_t n, bool reverse)
{
    if (n < 2) return HEARTH_OK;
    size_t mid = n / 2;
    hearth_status st = merge_sort(r, keys, items, tmp_k, tmp_i, mid, reverse);
    if (st == HEARTH_OK) st = merge_sort(r, keys + mid, items + mid, tmp_k, tmp_i, n - mid, reverse);
    if (st == HEARTH_OK) st = jrender_charge(r, n);
    if (st != HEARTH_OK) return st;
    size_t i = 0, j = mid, k = 0;
    while (i < mid && j < n) {
        int c;
        st = value_compare(keys[j], keys[i], &c);
        if (st != HEARTH_OK) return st;
        /* take from the right only when strictly before (stability);
         * reversed, only when strictly after, as sorted(reverse=True) */
        bool right_first = reverse ? c > 0 : c < 0;
        if (right_first) {
            tmp_k[k] = keys[j];
            tmp_i[k++] = items[j++];
        } else {
            tmp_k[k] = keys[i];
            tmp_i[k++] = items[i++];
        }
    }
    while (i < mid) {
        tmp_k[k] = keys[i];
        tmp_i[k++] = items[i++];
    }
    while (j < n) {
        tmp_k[k] = keys[j];
        tmp_i[k++] = items[j++];
    }
    memcpy(keys, tmp_k, n * sizeof *keys);
    memcpy(items, tmp_i, n * sizeof *items);
    return HEARTH_OK;
}

/* Sort the list `items` by the keys get_key computes; the result holds new
 * references. */
static hearth_status sort_values(struct jrender *r, value items, const struct vstring *attribute,
                                 bool case_sensitive, bool reverse, value *out)
{
    *out = value_undefined();
    size_t n = value_list_len(items);
    value *buf = hearth_calloc(n * 4 + 1, sizeof *buf, "a sort");
    if (!buf) return HEARTH_E_NOMEM;
    value *keys = buf, *vals = buf + n, *tk = buf + 2 * n, *ti = buf + 3 * n;
    hearth_status st = HEARTH_OK;
    size_t made = 0;
    for (; st == HEARTH_OK && made < n; made++) {
        vals[made] = value_list_at(items, made);
        st = sort_key(r, vals[made], attribute, case_sensitive, &keys[made]);
        if (st != HEARTH_OK) break;
    }
    if (st == HEARTH_OK) st = merge_sort(r, keys, vals, tk, ti, n, reverse);
    if (st == HEARTH_OK) st = value_new_list(n, out);
    for (size_t i = 0; st == HEARTH_OK && i < n; i++) st = value_list_push(*out, value_ref(vals[i]));
    if (st != HEARTH_OK) value_unref(*out);
    for (size_t i = 0; i < made; i++) value_unref(keys[i]);
    free(buf);
    return st;
}

static hearth_status optional_attribute(const char *fn, const value *v, const struct vstring **out)
{
    *out = NULL;
    if (!v || v->kind == VALUE_NULL) return HEARTH_OK;
    if (v->kind == VALUE_STRING) {
        *out = v->u.s;
        return HEARTH_OK;
    }
    return hearth_error(HEARTH_E_UNSUPPORTED, "%s: attribute must be a string", fn);
}

FILTER(sort)
{
    static const char *const names[] = {"reverse", "case_sensitive", "attribute", NULL};
    const value *a[3];
    const struct vstring *attribute;
    hearth_status st = jargs_bind("sort", args, names, a);
    if (st == HEARTH_OK) st = optional_attribute("sort", a[2], &attribute);
    if (st == HEARTH_OK && attribute && memchr(attribute->data, ',', attribute->len))
        st = hearth_error(HEARTH_E_UNSUPPORTED, "sort: several attributes are not supported");
    value items = value_undefined();
    if (st == HEARTH_OK) st = jrender_iterate(r, self, &items);
    if (st != HEARTH_OK) return st;
    st = sort_values(r, items, attribute, arg_bool(a[1], false), arg_bool(a[0], false), out);
    value_unref(items);
    return st;
}

FILTER(dictsort)
{
    static const char *const names[] = {"case_sensitive", "by", "reverse", NULL};
    const value *a[3];
    hearth_status st = jargs_bind("dictsort", args, names, a);
    if (st != HEARTH_OK) return st;
    int by = 0;
    if (a[1]) {
        const struct vstring *b = NULL;
        st = arg_string("dictsort", "by", a[1], &b);
        if (st != HEARTH_OK) return st;
        if (!strcmp(b->data, "value")) by = 1;
        else if (strcmp(b->data, "key")) return hearth_error(HEARTH_E_TEMPLATE, "You can only sort by either \"key\" or \"value\"");
    }
    if (self.kind != VALUE_DICT) return hearth_error(HEARTH_E_TEMPLATE, "dictsort: expected a dict, got %s", value_type_name(self));
    value pairs = value_undefined();
    jinja_fn items = jinja_find_method(self, "items");
    struct jargs none = {NULL, 0, NULL, NULL, 0};
    st = items(r, self, &none, &pairs);
    if (st != HEARTH_OK) return st;
    value path = value_undefined();
    st = value_new_string(by ? "1" : "0", 1, &path);
    if (st == HEARTH_OK) {
        st = sort_values(r, pairs, path.u.s, arg_bool(a[0], false), arg_bool(a[2], false), out);
        value_unref(path);
    }
    value_unref(pairs);
    return st;
}

FILTER(unique)
{
    *out = value_undefined();
    static const char *const names[] = {"case_sensitive", "attribute", NULL};
    const value *a[2];
    const struct vstring *attribute;
    hearth_status st = jargs_bind("unique", args, names, a);
    if (st == HEARTH_OK) st = optional_attribute("unique", a[1], &attribute);
    value items, seen = value_undefined();
    if (st == HEARTH_OK) st = jrender_iterate(r, self, &items);
    if (st != HEARTH_OK) return st;
    st = value_new_list(0, out);
    if (st == HEARTH_OK) st = value_new_list(0, &seen);
    for (size_t i = 0; st == HEARTH_OK && i < value_list_len(items); i++) {
        value key = value_undefined();
        st = sort_key(r, value_list_at(items, i), attribute, arg_bool(a[0], false), &key);
        if (st != HEARTH_OK) break;
        bool dup = false;
        st = jrender_charge(r, value_list_len(seen));
        for (size_t j = 0; st == HEARTH_OK && j < value_list_len(seen) && !dup; j++)
            dup = value_equal(value_list_at(seen, j), key);
        if (st == HEARTH_OK && !dup) {
            st = value_list_push(seen, key);
            if (st == HEARTH_OK) st = value_list_push(*out, value_ref(value_list_at(items, i)));
        } else {
            value_unref(key);
        }
    }
    value_unref(seen);
    value_unref(items);
    if (st != HEARTH_OK) value_unref(*out);
    return st;
}

static hearth_status min_max(struct jrender *r, const char *fn, value self, const struct jargs *args,
                             bool want_max, value *out)
{
    static const char *const names[] = {"case_sensitive", "attribute", NULL};
    const value *a[2];
    const struct vstring *attribute;
    hearth_status st = jargs_bind(fn, args, names, a);
    if (st == HEARTH_OK) st = optional_attribute(fn, a[1], &attribute);
    value items = value_undefined();
    if (st == HEARTH_OK) st = jrender_iterate(r, self, &items);
    if (st != HEARTH_OK) return st;
    size_t n = value_list_len(items), best = 0;
    value best_key = value_undefined();
    for (size_t i = 0; st == HEARTH_OK && i < n; i++) {
        value key = value_undefined();
        st = sort_key(r, value_list_at(items, i), attribute, arg_bool(a[0], false), &key);
        if (st != HEARTH_OK) break;
        int c = 0;
        if (i > 0) st = value_compare(key, best_key, &c);
        if (st == HEARTH_OK && (i == 0 || (want_max ? c > 0 : c < 0))) {
            value_unref(best_key);
            best_key = key;
            best = i;
        } else {
            value_unref(key);
        }
    }
    value_unref(best_key);
    if (st == HEARTH_OK)
        *out = n ? value_ref(value_list_at(items, best))
                 : value_undefined_because("No aggregated item, sequence was empty.");
    value_unref(items);
    return st;
}

FILTER(min) { return min_max(r, "min", self, args, false, out); }
FILTER(max) { return min_max(r, "max", self, args, true, out); }

FILTER(sum)
{
    static const char *const names[] = {"attribute", "start", NULL};
    const value *a[2];
    const struct vstring *attribute;
    hearth_status st = jargs_bind("sum", args, names, a);
    if (st == HEARTH_OK) st = optional_attribute("sum", a[0], &attribute);
    value items = value_undefined();
    if (st == HEARTH_OK) st = jrender_iterate(r, self, &items);
    if (st != HEARTH_OK) return st;
    value total = a[1] ? value_ref(*a[1]) : value_int(0);
    for (size_t i = 0; st == HEARTH_OK && i < value_list_len(items); i++) {
        value v = value_undefined(), next = value_undefined();
        if (attribute) st = get_path(r, value_list_at(items, i), attribute, &v);
        else v = value_ref(value_list_at(items, i));
        if (st != HEARTH_OK) break;
        if (total.kind == VALUE_STRING) st = hearth_error(HEARTH_E_TEMPLATE, "sum() can't sum strings");
        else st = jrender_binop(r, JOP_ADD, total, v, &next);
        value_unref(v);
        if (st != HEARTH_OK) break;
        value_unref(total);
        total = next;
    }
    value_unref(items);
    if (st != HEARTH_OK) {
        value_unref(total);
        return st;
    }
    *out = total;
    return HEARTH_OK;
}

FILTER(batch)
{
    *out = value_undefined();
    static const char *const names[] = {"linecount", "fill_with", NULL};
    const value *a[2];
    int64_t count;
    hearth_status st = jargs_bind("batch", args, names, a);
    if (st == HEARTH_OK) st = arg_int("batch", "linecount", a[0], 0, &count);
    if (st == HEARTH_OK && count <= 0) st = hearth_error(HEARTH_E_TEMPLATE, "batch: linecount must be positive");
    value items = value_undefined();
    if (st == HEARTH_OK) st = jrender_iterate(r, self, &items);
    if (st != HEARTH_OK) return st;
    size_t n = value_list_len(items);
    st = value_new_list(0, out);
    value row = value_undefined();
    for (size_t i = 0; st == HEARTH_OK && i < n; i++) {
        if (row.kind == VALUE_UNDEFINED) st = value_new_list(0, &row);
        if (st == HEARTH_OK) st = value_list_push(row, value_ref(value_list_at(items, i)));
        if (st == HEARTH_OK && (int64_t)value_list_len(row) == count) {
            st = value_list_push(*out, row);
            row = value_undefined();
        }
    }
    if (st == HEARTH_OK && row.kind == VALUE_LIST) {
        while (st == HEARTH_OK && a[1] && a[1]->kind != VALUE_NULL && (int64_t)value_list_len(row) < count)
            st = value_list_push(row, value_ref(*a[1]));
        if (st == HEARTH_OK) st = value_list_push(*out, row);
        else value_unref(row);
        row = value_undefined();
    }
    value_unref(row);
    value_unref(items);
    if (st != HEARTH_OK) value_unref(*out);
    return st;
}

FILTER(attr)
{
    static const char *const names[] = {"name", NULL};
    const value *a[1];
    const struct vstring *name = NULL;
    hearth_status st = jargs_bind("attr", args, names, a);
    if (st == HEARTH_OK) st = arg_string("attr", "name", a[0], &name);
    if (st != HEARTH_OK) return st;
    /* attributes only: a dict's keys are not its attributes */
    if (self.kind == VALUE_DICT) {
        jinja_fn m = jinja_find_method(self, name->data);
        if (m) return jinja_new_function(name->data, m, value_ref(self), out);
        *out = value_undefined_because("'dict object' has no attribute '%.100s'", name->data);
        return HEARTH_OK;
    }
    return jrender_getattr(r, self, name->data, name->len, out);
}

/* map(attribute=..., default=...) or map('filter', args...); like Jinja's
 * generator, a false value (none, empty) maps to nothing. */
FILTER(map)
{
    if (!value_truthy(self)) return value_new_list(0, out);
    value items = value_undefined();
    hearth_status st = jrender_iterate(r, self, &items);
    if (st != HEARTH_OK) return st;
    const struct vstring *attribute = NULL;
    const value *dflt = NULL;
    const char *filter = NULL;
    if (args->n_pos == 0) {
        for (size_t k = 0; st == HEARTH_OK && k < args->n_kw; k++) {
            if (!strcmp(args->kw_names[k], "attribute")) st = arg_string("map", "attribute", &args->kw_vals[k], &attribute);
            else if (!strcmp(args->kw_names[k], "default")) dflt = &args->kw_vals[k];
            else st = hearth_error(HEARTH_E_TEMPLATE, "map() got an unexpected keyword argument '%s'", args->kw_names[k]);
        }
        if (st == HEARTH_OK && !attribute) st = hearth_error(HEARTH_E_TEMPLATE, "map: give a filter name or attribute=");
    } else {
        const struct vstring *f = NULL;
        st = arg_string("map", "filter", &args->pos[0], &f);
        if (st == HEARTH_OK) filter = f->data;
        if (st == HEARTH_OK && args->n_kw)
            st = hearth_error(HEARTH_E_UNSUPPORTED, "map: keyword arguments for the mapped filter are not supported");
    }
    if (st == HEARTH_OK) st = value_new_list(value_list_len(items), out);
    for (size_t i = 0; st == HEARTH_OK && i < value_list_len(items); i++) {
        value item = value_list_at(items, i), v;
        if (filter) {
            st = jrender_apply_filter(r, filter, item, args->pos + 1, args->n_pos - 1, &v);
        } else {
            st = get_path(r, item, attribute, &v);
            if (st == HEARTH_OK && dflt && v.kind == VALUE_UNDEFINED) {
                value_unref(v);
                v = value_ref(*dflt);
            }
        }
        if (st == HEARTH_OK) st = value_list_push(*out, v);
        if (st != HEARTH_OK) value_unref(*out);
    }
    value_unref(items);
    return st;
}

/* select/reject/selectattr/rejectattr: keep the items (or their attribute)
 * for which the test (default: truthiness) is `keep`.  Like Jinja's
 * generators, a false value (none, empty) selects nothing. */
static hearth_status select_items(struct jrender *r, const char *fn, value self,
                                  const struct jargs *args, bool by_attr, bool keep, value *out)
{
    *out = value_undefined();
    if (!value_truthy(self)) return value_new_list(0, out);
    if (args->n_kw) return hearth_error(HEARTH_E_TEMPLATE, "%s() takes no keyword arguments", fn);
    size_t at = 0;
    const struct vstring *attribute = NULL, *test = NULL;
    hearth_status st = HEARTH_OK;
    if (by_attr) {
        if (args->n_pos == 0) return hearth_error(HEARTH_E_TEMPLATE, "%s: missing the attribute", fn);
        st = arg_string(fn, "attribute", &args->pos[at++], &attribute);
    }
    if (st == HEARTH_OK && at < args->n_pos) st = arg_string(fn, "test", &args->pos[at++], &test);
    value items = value_undefined();
    if (st == HEARTH_OK) st = jrender_iterate(r, self, &items);
    if (st != HEARTH_OK) return st;
    st = value_new_list(0, out);
    for (size_t i = 0; st == HEARTH_OK && i < value_list_len(items); i++) {
        value item = value_list_at(items, i), subject;
        if (attribute) st = get_path(r, item, attribute, &subject);
        else subject = value_ref(item);
        if (st != HEARTH_OK) break;
        bool pass;
        if (test) st = jrender_apply_test(r, test->data, subject, args->pos + at, args->n_pos - at, &pass);
        else pass = value_truthy(subject);
        value_unref(subject);
        if (st == HEARTH_OK && pass == keep) st = value_list_push(*out, value_ref(item));
    }
    value_unref(items);
    if (st != HEARTH_OK) value_unref(*out);
    return st;
}

FILTER(select) { return select_items(r, "select", self, args, false, true, out); }
FILTER(reject) { return select_items(r, "reject", self, args, false, false, out); }
FILTER(selectattr) { return select_items(r, "selectattr", self, args, true, true, out); }
FILTER(rejectattr) { return select_items(r, "rejectattr", self, args, true, false, out); }

FILTER(pprint)
{
    hearth_status st = no_args("pprint", args);
    if (st != HEARTH_OK) return st;
    textbuf tb;
    textbuf_init(&tb, JINJA_MAX_OUTPUT, "pprint output");
    st = value_repr(self, &tb);
    if (st == HEARTH_OK) st = jinja_string_from(r, &tb, out);
    textbuf_free(&tb);
    return st;
}

/* ---- tables ---------------------------------------------------------------------- */

struct named_fn {
    const char *name;
    jinja_fn fn;
};

static const struct named_fn filters[] = {
    {"abs", filter_abs}, {"attr", filter_attr}, {"batch", filter_batch},
    {"capitalize", filter_capitalize}, {"center", filter_center}, {"count", filter_length},
    {"d", filter_default}, {"default", filter_default}, {"dictsort", filter_dictsort},
    {"e", filter_escape}, {"escape", filter_escape}, {"first", filter_first},
    {"float", filter_float}, {"forceescape", filter_forceescape}, {"format", filter_format},
    {"indent", filter_indent}, {"int", filter_int}, {"items", filter_items},
    {"join", filter_join}, {"last", filter_last}, {"length", filter_length},
    {"list", filter_list}, {"lower", filter_lower}, {"map", filter_map},
    {"max", filter_max}, {"min", filter_min}, {"pprint", filter_pprint},
    {"reject", filter_reject}, {"rejectattr", filter_rejectattr}, {"replace", filter_replace},
    {"reverse", filter_reverse}, {"round", filter_round}, {"safe", filter_safe},
    {"select", filter_select}, {"selectattr", filter_selectattr}, {"sort", filter_sort},
    {"string", filter_string}, {"sum", filter_sum}, {"title", filter_title},
    {"tojson", filter_tojson}, {"trim", filter_trim}, {"truncate", filter_truncate},
    {"unique", filter_unique}, {"upper", filter_upper}, {"wordcount", filter_wordcount},
};


jinja_fn jinja_find_filter(const char *name)
{
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(filters); i++)
        if (!strcmp(filters[i].name, name)) return filters[i].fn;
    return NULL;
}

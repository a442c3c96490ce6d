/*
 * value.c -- reference counting, containers, Python comparisons and the
 * Python str()/repr() text of the values in value.h.
 */
#include "internal.h"

#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unichar.h"
#include "utf8.h"
#include "value.h"

/* ---- reference counting ------------------------------------------------ */

static size_t *refs_of(value v)
{
    switch (v.kind) {
    case VALUE_STRING: return &v.u.s->refs;
    case VALUE_UNDEFINED: return v.u.s ? &v.u.s->refs : NULL;
    case VALUE_LIST: return &v.u.list->refs;
    case VALUE_DICT:
    case VALUE_NAMESPACE: return &v.u.dict->refs;
    case VALUE_OBJECT: return &v.u.obj->refs;
    default: return NULL;
    }
}

value value_ref(value v)
{
    size_t *refs = refs_of(v);
    if (refs && *refs != VALUE_REFS_STATIC) ++*refs;
    return v;
}

static void free_list(struct vlist *l)
{
    for (size_t i = 0; i < l->len; i++) value_unref(l->items[i]);
    free(l->items);
    free(l);
}

static void vstring_unref(struct vstring *s)
{
    if (s && s->refs != VALUE_REFS_STATIC && --s->refs == 0) free(s);
}

static void free_dict(struct vdict *d)
{
    for (size_t i = 0; i < d->len; i++) {
        vstring_unref(d->entries[i].key);
        value_unref(d->entries[i].val);
    }
    free(d->entries);
    free(d->index);
    free(d);
}

void value_unref(value v)
{
    size_t *refs = refs_of(v);
    if (!refs || *refs == VALUE_REFS_STATIC || --*refs > 0) return;
    switch (v.kind) {
    case VALUE_STRING:
    case VALUE_UNDEFINED: free(v.u.s); break;
    case VALUE_LIST: free_list(v.u.list); break;
    case VALUE_DICT:
    case VALUE_NAMESPACE: free_dict(v.u.dict); break;
    case VALUE_OBJECT: v.u.obj->type->destroy(v.u.obj); break;
    default: break;
    }
}

void value_make_static(value v)
{
    size_t *refs = refs_of(v);
    if (refs) *refs = VALUE_REFS_STATIC;
}

void value_free_static(value v)
{
    size_t *refs = refs_of(v);
    if (refs && *refs == VALUE_REFS_STATIC) {
        *refs = 1;
        value_unref(v);
    }
}

/* ---- strings ----------------------------------------------------------- */

struct vstring *vstring_alloc(size_t len)
{
    size_t bytes;
    if (hearth_add_overflow(sizeof(struct vstring) + 1, len, &bytes)) {
        hearth_error(HEARTH_E_NOMEM, "string of %zu bytes is too long", len);
        return NULL;
    }
    struct vstring *str = hearth_malloc(bytes, "a string");
    if (!str) return NULL;
    str->refs = 1;
    str->len = len;
    str->n_chars = 0;
    str->markup = false;
    str->data[len] = '\0';
    return str;
}

struct vstring *vstring_new(const char *s, size_t len)
{
    struct vstring *str = vstring_alloc(len);
    if (!str) return NULL;
    if (len) memcpy(str->data, s, len);
    str->n_chars = utf8_count(s, len);
    return str;
}

hearth_status value_new_string(const char *s, size_t len, value *out)
{
    struct vstring *str = vstring_new(s, len);
    if (!str) return HEARTH_E_NOMEM;
    *out = value_from_vstring(str);
    return HEARTH_OK;
}

hearth_status value_new_cstring(const char *s, value *out)
{
    return value_new_string(s, strlen(s), out);
}

value value_undefined_because(const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    size_t len = (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
    /* Messages quote template names, which are valid UTF-8; a cut in the
     * middle of a character is trimmed back to its start. */
    while (len > 0 && utf8_validate(msg, len) != len) len--;
    value v = value_undefined();
    v.u.s = vstring_new(msg, len);   /* without memory the reason is lost, not the value */
    return v;
}

/* ---- containers -------------------------------------------------------- */

static uint32_t depth_of(value v)
{
    switch (v.kind) {
    case VALUE_LIST: return v.u.list->depth;
    case VALUE_DICT:
    case VALUE_NAMESPACE: return v.u.dict->depth;
    case VALUE_OBJECT: return v.u.obj->depth;
    default: return 0;
    }
}

hearth_status value_check_storable(value v, const char *where)
{
    if (v.kind == VALUE_NAMESPACE)
        return hearth_error(HEARTH_E_TEMPLATE, "a namespace cannot be stored in %s", where);
    if (depth_of(v) >= VALUE_MAX_DEPTH)
        return hearth_error(HEARTH_E_RANGE, "value nested more than %d levels deep",
                            VALUE_MAX_DEPTH);
    return HEARTH_OK;
}

hearth_status value_new_list(size_t cap_hint, value *out)
{
    struct vlist *l = hearth_calloc(1, sizeof *l, "a list");
    if (!l) return HEARTH_E_NOMEM;
    l->refs = 1;
    l->depth = 1;
    if (cap_hint) {
        l->items = hearth_calloc(cap_hint, sizeof *l->items, "a list");
        if (!l->items) {
            free(l);
            return HEARTH_E_NOMEM;
        }
        l->cap = cap_hint;
    }
    out->kind = VALUE_LIST;
    out->u.list = l;
    return HEARTH_OK;
}

hearth_status value_list_push(value list, value item)
{
    struct vlist *l = list.u.list;
    hearth_status st = value_check_storable(item, "a list");
    if (st != HEARTH_OK) {
        value_unref(item);
        return st;
    }
    if (l->len == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4, bytes;
        if (hearth_mul_overflow(cap, sizeof *l->items, &bytes)) {
            value_unref(item);
            return hearth_error(HEARTH_E_NOMEM, "list too long");
        }
        value *items = hearth_realloc(l->items, bytes, "a list");
        if (!items) {
            value_unref(item);
            return HEARTH_E_NOMEM;
        }
        l->items = items;
        l->cap = cap;
    }
    l->items[l->len++] = item;
    uint32_t d = depth_of(item) + 1;
    if (d > l->depth) l->depth = d;
    return HEARTH_OK;
}

static hearth_status new_dict(value_kind kind, value *out)
{
    struct vdict *d = hearth_calloc(1, sizeof *d, "a dict");
    if (!d) return HEARTH_E_NOMEM;
    d->refs = 1;
    d->depth = 1;
    out->kind = kind;
    out->u.dict = d;
    return HEARTH_OK;
}

hearth_status value_new_dict(value *out)
{
    return new_dict(VALUE_DICT, out);
}

hearth_status value_new_namespace(value *out)
{
    return new_dict(VALUE_NAMESPACE, out);
}

/* FNV-1a: keys are short and come from trusted and untrusted text alike;
 * the index only speeds lookups up, so a poor spread costs time, not
 * correctness. */
static uint64_t hash_key(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

#define DICT_INDEX_FROM 8

static void index_insert(struct vdict *d, size_t entry)
{
    const struct vstring *k = d->entries[entry].key;
    size_t mask = d->index_cap - 1;
    size_t slot = (size_t)hash_key(k->data, k->len) & mask;
    while (d->index[slot]) slot = (slot + 1) & mask;
    d->index[slot] = (uint32_t)(entry + 1);
}

static hearth_status rebuild_index(struct vdict *d, size_t want_cap)
{
    uint32_t *index = hearth_calloc(want_cap, sizeof *index, "a dict index");
    if (!index) return HEARTH_E_NOMEM;
    free(d->index);
    d->index = index;
    d->index_cap = want_cap;
    for (size_t i = 0; i < d->len; i++) index_insert(d, i);
    return HEARTH_OK;
}

static long find_entry(const struct vdict *d, const char *key, size_t len)
{
    if (d->index) {
        size_t mask = d->index_cap - 1;
        size_t slot = (size_t)hash_key(key, len) & mask;
        while (d->index[slot]) {
            size_t e = d->index[slot] - 1;
            const struct vstring *k = d->entries[e].key;
            if (k->len == len && memcmp(k->data, key, len) == 0) return (long)e;
            slot = (slot + 1) & mask;
        }
        return -1;
    }
    for (size_t i = 0; i < d->len; i++) {
        const struct vstring *k = d->entries[i].key;
        if (k->len == len && memcmp(k->data, key, len) == 0) return (long)i;
    }
    return -1;
}

value *value_dict_get(value dict, const char *key, size_t key_len)
{
    long e = find_entry(dict.u.dict, key, key_len);
    return e < 0 ? NULL : &dict.u.dict->entries[e].val;
}

static hearth_status dict_set(value dict, struct vstring *key, value val)
{
    struct vdict *d = dict.u.dict;
    long e = find_entry(d, key->data, key->len);
    if (e >= 0) {
        value_unref(d->entries[e].val);
        d->entries[e].val = val;
    } else {
        if (d->len >= UINT32_MAX - 1) {
            value_unref(val);
            return hearth_error(HEARTH_E_RANGE, "dict has too many keys");
        }
        if (d->len == d->cap) {
            size_t cap = d->cap ? d->cap * 2 : 4;
            struct vdict_entry *entries = hearth_realloc(d->entries, cap * sizeof *entries, "a dict");
            if (!entries) {
                value_unref(val);
                return HEARTH_E_NOMEM;
            }
            d->entries = entries;
            d->cap = cap;
        }
        key->refs += key->refs != VALUE_REFS_STATIC;
        d->entries[d->len].key = key;
        d->entries[d->len].val = val;
        d->len++;
        if (d->len >= DICT_INDEX_FROM) {
            if (d->len * 2 > d->index_cap) {
                size_t cap = 16;
                while (cap < d->len * 4) cap *= 2;
                if (rebuild_index(d, cap) != HEARTH_OK) {
                    /* keep the entry; lookups fall back to a scan */
                    free(d->index);
                    d->index = NULL;
                    d->index_cap = 0;
                }
            } else {
                index_insert(d, d->len - 1);
            }
        }
    }
    /* A namespace attribute may be replaced by a shallower value; keeping
     * the old, larger depth only errs on the safe side. */
    uint32_t depth = depth_of(val) + 1;
    if (depth > d->depth) d->depth = depth;
    return HEARTH_OK;
}

hearth_status value_dict_set_vstring(value dict, struct vstring *key, value val)
{
    hearth_status st = value_check_storable(val, dict.kind == VALUE_NAMESPACE ? "a namespace" : "a dict");
    if (st != HEARTH_OK) {
        value_unref(val);
        return st;
    }
    return dict_set(dict, key, val);
}

static hearth_status set_with_new_key(value dict, const char *key, size_t key_len, value val,
                                      bool check)
{
    if (check) {
        hearth_status st = value_check_storable(val, dict.kind == VALUE_NAMESPACE ? "a namespace" : "a dict");
        if (st != HEARTH_OK) {
            value_unref(val);
            return st;
        }
    }
    long e = find_entry(dict.u.dict, key, key_len);
    if (e >= 0) {
        value_unref(dict.u.dict->entries[e].val);
        dict.u.dict->entries[e].val = val;
        uint32_t depth = depth_of(val) + 1;
        if (depth > dict.u.dict->depth) dict.u.dict->depth = depth;
        return HEARTH_OK;
    }
    struct vstring *k = vstring_new(key, key_len);
    if (!k) {
        value_unref(val);
        return HEARTH_E_NOMEM;
    }
    hearth_status st = dict_set(dict, k, val);
    vstring_unref(k);
    return st;
}

hearth_status value_dict_set(value dict, const char *key, size_t key_len, value val)
{
    return set_with_new_key(dict, key, key_len, val, true);
}

hearth_status value_vars_set(value dict, const char *key, size_t key_len, value val)
{
    return set_with_new_key(dict, key, key_len, val, false);
}

/* ---- Python semantics -------------------------------------------------- */

const char *value_type_name(value v)
{
    switch (v.kind) {
    case VALUE_UNDEFINED: return "Undefined";
    case VALUE_NULL: return "NoneType";
    case VALUE_BOOL: return "bool";
    case VALUE_INT: return "int";
    case VALUE_FLOAT: return "float";
    case VALUE_STRING: return "str";
    case VALUE_LIST: return v.u.list->is_tuple ? "tuple" : "list";
    case VALUE_DICT: return "dict";
    case VALUE_NAMESPACE: return "Namespace";
    case VALUE_OBJECT: return v.u.obj->type->type_name;
    }
    return "object";
}

bool value_truthy(value v)
{
    switch (v.kind) {
    case VALUE_UNDEFINED:
    case VALUE_NULL: return false;
    case VALUE_BOOL: return v.u.b;
    case VALUE_INT: return v.u.i != 0;
    case VALUE_FLOAT: return v.u.f != 0.0;
    case VALUE_STRING: return v.u.s->len > 0;
    case VALUE_LIST: return v.u.list->len > 0;
    case VALUE_DICT: return v.u.dict->len > 0;
    case VALUE_NAMESPACE:
    case VALUE_OBJECT: return true;
    }
    return false;
}

static bool is_number(value v)
{
    return v.kind == VALUE_BOOL || v.kind == VALUE_INT || v.kind == VALUE_FLOAT;
}

/* Compare an int with a float exactly, as Python does (no rounding of
 * large ints): -1, 0, 1, or 2 for NaN. */
static int compare_int_float(int64_t i, double f)
{
    if (isnan(f)) return 2;
    if (f >= 0x1p63) return -1;
    if (f < -0x1p63) return 1;
    double fl = floor(f);
    int64_t fi = (int64_t)fl;
    if (i < fi) return -1;
    if (i > fi) return 1;
    return fl < f ? -1 : 0;
}

/* -1, 0, 1, or 2 when unordered (NaN). */
static int compare_numbers(value a, value b)
{
    if (a.kind == VALUE_FLOAT && b.kind == VALUE_FLOAT) {
        if (isnan(a.u.f) || isnan(b.u.f)) return 2;
        return a.u.f < b.u.f ? -1 : a.u.f > b.u.f;
    }
    if (a.kind == VALUE_FLOAT) {
        int c = compare_int_float(b.kind == VALUE_BOOL ? b.u.b : b.u.i, a.u.f);
        return c == 2 ? 2 : -c;
    }
    int64_t ai = a.kind == VALUE_BOOL ? a.u.b : a.u.i;
    if (b.kind == VALUE_FLOAT) return compare_int_float(ai, b.u.f);
    int64_t bi = b.kind == VALUE_BOOL ? b.u.b : b.u.i;
    return ai < bi ? -1 : ai > bi;
}

static int compare_strings(const struct vstring *a, const struct vstring *b)
{
    /* Byte order of UTF-8 is code point order. */
    size_t n = HEARTH_MIN(a->len, b->len);
    int c = memcmp(a->data, b->data, n);
    if (c) return c < 0 ? -1 : 1;
    return a->len < b->len ? -1 : a->len > b->len;
}

bool value_equal(value a, value b)
{
    if (is_number(a) && is_number(b)) return compare_numbers(a, b) == 0;
    if (a.kind != b.kind) return false;
    switch (a.kind) {
    case VALUE_UNDEFINED:
    case VALUE_NULL: return true;
    case VALUE_STRING:
        return a.u.s->len == b.u.s->len && memcmp(a.u.s->data, b.u.s->data, a.u.s->len) == 0;
    case VALUE_LIST: {
        const struct vlist *x = a.u.list, *y = b.u.list;
        if (x == y) return true;
        if (x->len != y->len || x->is_tuple != y->is_tuple) return false;
        for (size_t i = 0; i < x->len; i++)
            if (!value_equal(x->items[i], y->items[i])) return false;
        return true;
    }
    case VALUE_DICT: {
        const struct vdict *x = a.u.dict, *y = b.u.dict;
        if (x == y) return true;
        if (x->len != y->len) return false;
        for (size_t i = 0; i < x->len; i++) {
            const struct vstring *k = x->entries[i].key;
            long e = find_entry(y, k->data, k->len);
            if (e < 0 || !value_equal(x->entries[i].val, y->entries[e].val)) return false;
        }
        return true;
    }
    case VALUE_NAMESPACE: return a.u.dict == b.u.dict;
    case VALUE_OBJECT: return a.u.obj == b.u.obj;
    default: return false;
    }
}

hearth_status value_compare(value a, value b, int *out)
{
    if (is_number(a) && is_number(b)) {
        int c = compare_numbers(a, b);
        *out = c == 2 ? 1 : c;   /* NaN: every ordering test is false in Python; callers see "greater" */
        return HEARTH_OK;
    }
    if (a.kind == VALUE_STRING && b.kind == VALUE_STRING) {
        *out = compare_strings(a.u.s, b.u.s);
        return HEARTH_OK;
    }
    if (a.kind == VALUE_LIST && b.kind == VALUE_LIST && a.u.list->is_tuple == b.u.list->is_tuple) {
        const struct vlist *x = a.u.list, *y = b.u.list;
        size_t n = HEARTH_MIN(x->len, y->len);
        for (size_t i = 0; i < n; i++) {
            if (value_equal(x->items[i], y->items[i])) continue;
            return value_compare(x->items[i], y->items[i], out);
        }
        *out = x->len < y->len ? -1 : x->len > y->len;
        return HEARTH_OK;
    }
    return hearth_error(HEARTH_E_TEMPLATE, "'<' not supported between instances of '%s' and '%s'",
                        value_type_name(a), value_type_name(b));
}

/* ---- numbers ----------------------------------------------------------- */

double value_parse_double(const char *s, size_t len, size_t *used)
{
    /* strtod reads the locale's decimal point; the texts read here always
     * use '.', so it is swapped for the locale's before converting. */
    char small[64];
    char *buf = len < sizeof small ? small : malloc(len + 1);
    if (!buf) {
        if (used) *used = 0;
        return 0.0;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    const char *point = localeconv()->decimal_point;
    char *dot = strchr(buf, '.');
    if (dot && point && point[0] && point[0] != '.' && point[1] == '\0') *dot = point[0];
    char *end;
    double d = strtod(buf, &end);
    if (used) *used = (size_t)(end - buf);
    if (buf != small) free(buf);
    return d;
}

/* Python's float repr: the shortest digit string that reads back as the
 * same double, in fixed notation when the decimal exponent is in -4..15,
 * scientific otherwise (Python's float_repr_style "short"). */
void value_format_float(double f, char out[32])
{
    if (isnan(f)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(f)) {
        strcpy(out, f < 0 ? "-inf" : "inf");
        return;
    }
    if (f == 0.0) {
        strcpy(out, signbit(f) ? "-0.0" : "0.0");
        return;
    }
    char buf[40];
    for (int prec = 0; prec < 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec, f);
        if (value_parse_double(buf, strlen(buf), NULL) == f) break;
    }
    /* buf is [-]d[<point>ddd]e[+-]xx: collect digits and exponent */
    char digits[20];
    int nd = 0, exp10 = 0;
    bool neg = false;
    const char *p = buf;
    if (*p == '-') {
        neg = true;
        p++;
    }
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && nd < (int)sizeof digits - 1) digits[nd++] = *p;
    if (*p == 'e') exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = '\0';
    int decpt = exp10 + 1;   /* value = 0.digits x 10^decpt */
    char *o = out;
    if (neg) *o++ = '-';
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -decpt; i++) *o++ = '0';
            memcpy(o, digits, (size_t)nd);
            o += nd;
        } else if (decpt >= nd) {
            memcpy(o, digits, (size_t)nd);
            o += nd;
            for (int i = nd; i < decpt; i++) *o++ = '0';
            *o++ = '.';
            *o++ = '0';
        } else {
            memcpy(o, digits, (size_t)decpt);
            o += decpt;
            *o++ = '.';
            memcpy(o, digits + decpt, (size_t)(nd - decpt));
            o += nd - decpt;
        }
        *o = '\0';
    } else {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, (size_t)(nd - 1));
            o += nd - 1;
        }
        /* |exp10| <= 324 for doubles */
        int e = exp10 < 0 ? -exp10 : exp10;
        *o++ = 'e';
        *o++ = exp10 < 0 ? '-' : '+';
        if (e >= 100) *o++ = (char)('0' + e / 100);
        *o++ = (char)('0' + e / 10 % 10);
        *o++ = (char)('0' + e % 10);
        *o = '\0';
    }
}

/* ---- str() and repr() -------------------------------------------------- */

static hearth_status repr_string(const struct vstring *s, textbuf *tb)
{
    bool has_single = memchr(s->data, '\'', s->len) != NULL;
    bool has_double = memchr(s->data, '"', s->len) != NULL;
    char quote = has_single && !has_double ? '"' : '\'';
    hearth_status st = textbuf_append_char(tb, quote);
    size_t i = 0;
    while (st == HEARTH_OK && i < s->len) {
        uint32_t cp;
        size_t n = utf8_decode(s->data + i, s->len - i, &cp);
        if (n == 0) {   /* cannot happen for valid strings; show the byte */
            cp = (unsigned char)s->data[i];
            n = 1;
        }
        if (cp == (uint32_t)quote || cp == '\\') {
            char esc[2] = {'\\', (char)cp};
            st = textbuf_append(tb, esc, 2);
        } else if (cp == '\n') {
            st = textbuf_append(tb, "\\n", 2);
        } else if (cp == '\r') {
            st = textbuf_append(tb, "\\r", 2);
        } else if (cp == '\t') {
            st = textbuf_append(tb, "\\t", 2);
        } else if (!uni_isprintable(cp)) {
            if (cp < 0x100) st = textbuf_printf(tb, "\\x%02x", (unsigned)cp);
            else if (cp < 0x10000) st = textbuf_printf(tb, "\\u%04x", (unsigned)cp);
            else st = textbuf_printf(tb, "\\U%08x", (unsigned)cp);
        } else {
            st = textbuf_append(tb, s->data + i, n);
        }
        i += n;
    }
    if (st == HEARTH_OK) st = textbuf_append_char(tb, quote);
    return st;
}

static hearth_status repr_dict_items(const struct vdict *d, textbuf *tb)
{
    hearth_status st = textbuf_append_char(tb, '{');
    for (size_t i = 0; st == HEARTH_OK && i < d->len; i++) {
        if (i) st = textbuf_append(tb, ", ", 2);
        if (st == HEARTH_OK) st = repr_string(d->entries[i].key, tb);
        if (st == HEARTH_OK) st = textbuf_append(tb, ": ", 2);
        if (st == HEARTH_OK) st = value_repr(d->entries[i].val, tb);
    }
    if (st == HEARTH_OK) st = textbuf_append_char(tb, '}');
    return st;
}

hearth_status value_repr(value v, textbuf *tb)
{
    switch (v.kind) {
    case VALUE_UNDEFINED: return textbuf_append_str(tb, "Undefined");
    case VALUE_STRING: return repr_string(v.u.s, tb);
    case VALUE_LIST: {
        const struct vlist *l = v.u.list;
        hearth_status st = textbuf_append_char(tb, l->is_tuple ? '(' : '[');
        for (size_t i = 0; st == HEARTH_OK && i < l->len; i++) {
            if (i) st = textbuf_append(tb, ", ", 2);
            if (st == HEARTH_OK) st = value_repr(l->items[i], tb);
        }
        if (st == HEARTH_OK && l->is_tuple && l->len == 1) st = textbuf_append_char(tb, ',');
        if (st == HEARTH_OK) st = textbuf_append_char(tb, l->is_tuple ? ')' : ']');
        return st;
    }
    case VALUE_DICT: return repr_dict_items(v.u.dict, tb);
    case VALUE_NAMESPACE: {
        hearth_status st = textbuf_append_str(tb, "<Namespace ");
        if (st == HEARTH_OK) st = repr_dict_items(v.u.dict, tb);
        if (st == HEARTH_OK) st = textbuf_append_char(tb, '>');
        return st;
    }
    default: return value_str(v, tb);
    }
}

hearth_status value_str(value v, textbuf *tb)
{
    switch (v.kind) {
    case VALUE_UNDEFINED: return HEARTH_OK;
    case VALUE_NULL: return textbuf_append_str(tb, "None");
    case VALUE_BOOL: return textbuf_append_str(tb, v.u.b ? "True" : "False");
    case VALUE_INT: return textbuf_printf(tb, "%lld", (long long)v.u.i);
    case VALUE_FLOAT: {
        char buf[32];
        value_format_float(v.u.f, buf);
        return textbuf_append_str(tb, buf);
    }
    case VALUE_STRING: return textbuf_append(tb, v.u.s->data, v.u.s->len);
    case VALUE_LIST:
    case VALUE_DICT:
    case VALUE_NAMESPACE: return value_repr(v, tb);
    case VALUE_OBJECT: return textbuf_printf(tb, "<%s object>", v.u.obj->type->type_name);
    }
    return HEARTH_OK;
}

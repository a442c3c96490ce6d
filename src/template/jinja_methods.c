/*
 * jinja_methods.c -- the Python methods templates call on values
 * ("s.strip()", "d.items()", "l.index(x)") and the global functions (range,
 * dict, namespace, raise_exception, strftime_now).
 *
 * Lists and dicts are immutable, as in the sandbox transformers renders
 * chat templates in: their mutating methods do not exist here.
 */
#include "internal.h"

#include <string.h>

#include "jinja.h"
#include "unichar.h"
#include "utf8.h"

#define METHOD(name) \
    static hearth_status method_##name(struct jrender *r, value self, const struct jargs *args, value *out)

static hearth_status no_args(const char *fn, const struct jargs *args)
{
    if (args->n_pos || args->n_kw) return hearth_error(HEARTH_E_TEMPLATE, "%s() takes no arguments", fn);
    return HEARTH_OK;
}

static hearth_status want_string(const char *fn, const value *v, const struct vstring **out)
{
    if (v && v->kind == VALUE_STRING) {
        *out = v->u.s;
        return HEARTH_OK;
    }
    return hearth_error(HEARTH_E_TEMPLATE, "%s() argument must be str, not %s", fn,
                        v ? value_type_name(*v) : "nothing");
}

/* A string argument that may be None (meaning "the default"). */
static hearth_status optional_string(const char *fn, const value *v, const struct vstring **out)
{
    *out = NULL;
    if (!v || v->kind == VALUE_NULL) return HEARTH_OK;
    return want_string(fn, v, out);
}

static hearth_status optional_int(const char *fn, const value *v, int64_t dflt, int64_t *out)
{
    if (!v || v->kind == VALUE_NULL) {
        *out = dflt;
        return HEARTH_OK;
    }
    if (v->kind == VALUE_INT || v->kind == VALUE_BOOL) {
        *out = v->kind == VALUE_INT ? v->u.i : v->u.b;
        return HEARTH_OK;
    }
    return hearth_error(HEARTH_E_TEMPLATE, "%s(): '%s' object cannot be interpreted as an integer",
                        fn, value_type_name(*v));
}

/* ---- str ----------------------------------------------------------------- */

static hearth_status strip_method(struct jrender *r, const char *fn, value self, const struct jargs *args, bool left,
                                  bool right, value *out)
{
    static const char *const names[] = {"chars", NULL};
    const value *a[1];
    const struct vstring *chars;
    hearth_status st = jargs_bind(fn, args, names, a);
    if (st == HEARTH_OK) st = optional_string(fn, a[0], &chars);
    if (st != HEARTH_OK) return st;
    return jtext_strip(r, self.u.s, chars, left, right, out);
}

METHOD(strip) { return strip_method(r, "strip", self, args, true, true, out); }
METHOD(lstrip) { return strip_method(r, "lstrip", self, args, true, false, out); }
METHOD(rstrip) { return strip_method(r, "rstrip", self, args, false, true, out); }

static hearth_status split_method(struct jrender *r, const char *fn, value self,
                                  const struct jargs *args, bool from_right, value *out)
{
    static const char *const names[] = {"sep", "maxsplit", NULL};
    const value *a[2];
    const struct vstring *sep = NULL;
    int64_t maxsplit;
    hearth_status st = jargs_bind(fn, args, names, a);
    if (st == HEARTH_OK) st = optional_string(fn, a[0], &sep);
    if (st == HEARTH_OK) st = optional_int(fn, a[1], -1, &maxsplit);
    if (st != HEARTH_OK) return st;
    return jtext_split(r, self.u.s, sep, maxsplit, from_right, out);
}

METHOD(split) { return split_method(r, "split", self, args, false, out); }
METHOD(rsplit) { return split_method(r, "rsplit", self, args, true, out); }

METHOD(splitlines)
{
    static const char *const names[] = {"keepends", NULL};
    const value *a[1];
    hearth_status st = jargs_bind("splitlines", args, names, a);
    if (st != HEARTH_OK) return st;
    return jtext_splitlines(r, self.u.s, a[0] && value_truthy(*a[0]), out);
}

/* Byte range of the characters [start:end] (Python slice bounds, None
 * meaning the ends). */
static hearth_status char_range(const char *fn, const struct vstring *s, const value *start_v,
                                const value *end_v, size_t *from, size_t *to)
{
    int64_t n = (int64_t)s->n_chars, start, end;
    hearth_status st = optional_int(fn, start_v, 0, &start);
    if (st == HEARTH_OK) st = optional_int(fn, end_v, n, &end);
    if (st != HEARTH_OK) return st;
    if (start < 0) start = start + n < 0 ? 0 : start + n;
    if (end < 0) end = end + n < 0 ? 0 : end + n;
    if (start > n) start = n;
    if (end > n) end = n;
    if (end < start) end = start;
    *from = s->n_chars == s->len ? (size_t)start : utf8_offset(s->data, s->len, (size_t)start);
    *to = s->n_chars == s->len ? (size_t)end : utf8_offset(s->data, s->len, (size_t)end);
    return HEARTH_OK;
}

static bool has_affix(const struct vstring *s, size_t from, size_t to, const struct vstring *affix,
                      bool suffix)
{
    if (affix->len > to - from) return false;
    size_t at = suffix ? to - affix->len : from;
    return memcmp(s->data + at, affix->data, affix->len) == 0;
}

static hearth_status affix_method(const char *fn, value self, const struct jargs *args, bool suffix,
                                  value *out)
{
    static const char *const names[] = {"prefix", "start", "end", NULL};
    const value *a[3];
    size_t from, to;
    hearth_status st = jargs_bind(fn, args, names, a);
    if (st == HEARTH_OK && !a[0]) st = hearth_error(HEARTH_E_TEMPLATE, "%s() takes at least 1 argument", fn);
    if (st == HEARTH_OK) st = char_range(fn, self.u.s, a[1], a[2], &from, &to);
    if (st != HEARTH_OK) return st;
    const value *p = a[0];
    bool found = false;
    if (p->kind == VALUE_LIST && p->u.list->is_tuple) {
        for (size_t i = 0; i < value_list_len(*p) && !found; i++) {
            const struct vstring *affix = NULL;
            st = want_string(fn, &p->u.list->items[i], &affix);
            if (st != HEARTH_OK) return st;
            found = has_affix(self.u.s, from, to, affix, suffix);
        }
    } else {
        const struct vstring *affix = NULL;
        if (p->kind != VALUE_STRING)
            return hearth_error(HEARTH_E_TEMPLATE, "%s first arg must be str or a tuple of str, not %s",
                                fn, value_type_name(*p));
        affix = p->u.s;
        found = has_affix(self.u.s, from, to, affix, suffix);
    }
    *out = value_bool(found);
    return HEARTH_OK;
}

METHOD(startswith) { (void)r; return affix_method("startswith", self, args, false, out); }
METHOD(endswith) { (void)r; return affix_method("endswith", self, args, true, out); }

static hearth_status case_method(struct jrender *r, const char *fn, value self, const struct jargs *args,
                                 enum jcase how, value *out)
{
    hearth_status st = no_args(fn, args);
    return st == HEARTH_OK ? jtext_case(r, self.u.s, how, out) : st;
}

METHOD(upper) { return case_method(r, "upper", self, args, JCASE_UPPER, out); }
METHOD(lower) { return case_method(r, "lower", self, args, JCASE_LOWER, out); }
METHOD(title) { return case_method(r, "title", self, args, JCASE_TITLE, out); }
METHOD(capitalize) { return case_method(r, "capitalize", self, args, JCASE_CAPITALIZE, out); }

METHOD(replace)
{
    static const char *const names[] = {"old", "new", "count", NULL};
    const value *a[3];
    const struct vstring *old = NULL, *new_text = NULL;
    int64_t count;
    hearth_status st = jargs_bind("replace", args, names, a);
    if (st == HEARTH_OK) st = want_string("replace", a[0], &old);
    if (st == HEARTH_OK) st = want_string("replace", a[1], &new_text);
    if (st == HEARTH_OK) st = optional_int("replace", a[2], -1, &count);
    if (st != HEARTH_OK) return st;
    return jtext_replace(r, self.u.s, old, new_text, count, out);
}

METHOD(format)
{
    return jtext_str_format(r, self.u.s, args, out);
}

/* find/rfind/index/rindex/count: the character index of sub within
 * [start:end], or the number of non-overlapping occurrences. */
enum find_kind { FIND, RFIND, INDEX, RINDEX, COUNT };

static hearth_status find_method(const char *fn, value self, const struct jargs *args,
                                 enum find_kind kind, value *out)
{
    static const char *const names[] = {"sub", "start", "end", NULL};
    const value *a[3];
    const struct vstring *sub = NULL;
    size_t from, to;
    hearth_status st = jargs_bind(fn, args, names, a);
    if (st == HEARTH_OK) st = want_string(fn, a[0], &sub);
    if (st == HEARTH_OK) st = char_range(fn, self.u.s, a[1], a[2], &from, &to);
    if (st != HEARTH_OK) return st;
    const struct vstring *s = self.u.s;
    if (kind == COUNT) {
        int64_t n = 0;
        if (sub->len == 0) {
            n = (int64_t)utf8_count(s->data + from, to - from) + 1;
        } else {
            for (size_t i = from; i + sub->len <= to;) {
                if (memcmp(s->data + i, sub->data, sub->len) == 0) {
                    n++;
                    i += sub->len;
                } else {
                    i++;
                }
            }
        }
        *out = value_int(n);
        return HEARTH_OK;
    }
    size_t found = SIZE_MAX;
    if (sub->len <= to - from) {
        if (kind == FIND || kind == INDEX) {
            for (size_t i = from; i + sub->len <= to && found == SIZE_MAX; i++)
                if (memcmp(s->data + i, sub->data, sub->len) == 0) found = i;
        } else {
            for (size_t i = to - sub->len + 1; i-- > from && found == SIZE_MAX;)
                if (memcmp(s->data + i, sub->data, sub->len) == 0) found = i;
        }
    }
    if (found == SIZE_MAX) {
        if (kind == INDEX || kind == RINDEX) return hearth_error(HEARTH_E_TEMPLATE, "substring not found");
        *out = value_int(-1);
        return HEARTH_OK;
    }
    *out = value_int((int64_t)utf8_count(s->data, found));
    return HEARTH_OK;
}

METHOD(find) { (void)r; return find_method("find", self, args, FIND, out); }
METHOD(rfind) { (void)r; return find_method("rfind", self, args, RFIND, out); }
METHOD(index) { (void)r; return find_method("index", self, args, INDEX, out); }
METHOD(rindex) { (void)r; return find_method("rindex", self, args, RINDEX, out); }
METHOD(count) { (void)r; return find_method("count", self, args, COUNT, out); }

METHOD(join)
{
    static const char *const names[] = {"iterable", NULL};
    const value *a[1];
    hearth_status st = jargs_bind("join", args, names, a);
    if (st == HEARTH_OK && !a[0]) st = hearth_error(HEARTH_E_TEMPLATE, "join() takes exactly one argument");
    value items = value_undefined();
    if (st == HEARTH_OK) st = jrender_iterate(r, *a[0], &items);
    if (st != HEARTH_OK) return st;
    textbuf tb;
    textbuf_init(&tb, JINJA_MAX_OUTPUT, "a joined string");
    for (size_t i = 0; st == HEARTH_OK && i < value_list_len(items); i++) {
        value item = value_list_at(items, i);
        if (item.kind != VALUE_STRING) {
            st = hearth_error(HEARTH_E_TEMPLATE, "sequence item %zu: expected str instance, %s found",
                              i, value_type_name(item));
            break;
        }
        if (i) st = textbuf_append(&tb, self.u.s->data, self.u.s->len);
        if (st == HEARTH_OK) st = textbuf_append(&tb, item.u.s->data, item.u.s->len);
    }
    if (st == HEARTH_OK) st = jrender_charge(r, value_list_len(items));
    if (st == HEARTH_OK) st = jinja_string_from(r, &tb, out);
    textbuf_free(&tb);
    value_unref(items);
    return st;
}

/* is*(): true when non-empty and every character passes */
static hearth_status char_class(const char *fn, value self, const struct jargs *args,
                                bool (*pass)(uint32_t), value *out)
{
    hearth_status st = no_args(fn, args);
    if (st != HEARTH_OK) return st;
    const struct vstring *s = self.u.s;
    bool all = s->len > 0;
    for (size_t i = 0; all && i < s->len;) {
        uint32_t cp;
        size_t n = utf8_decode(s->data + i, s->len - i, &cp);
        if (n == 0) break;
        all = pass(cp);
        i += n;
    }
    *out = value_bool(all);
    return HEARTH_OK;
}

static bool is_alnum(uint32_t cp)
{
    return uni_isalpha(cp) || uni_isdigit(cp);
}

METHOD(isdigit) { (void)r; return char_class("isdigit", self, args, uni_isdigit, out); }
METHOD(isalpha) { (void)r; return char_class("isalpha", self, args, uni_isalpha, out); }
METHOD(isalnum) { (void)r; return char_class("isalnum", self, args, is_alnum, out); }
METHOD(isspace) { (void)r; return char_class("isspace", self, args, uni_isspace, out); }

static hearth_status case_class(const char *fn, value self, const struct jargs *args, bool upper,
                                value *out)
{
    hearth_status st = no_args(fn, args);
    if (st != HEARTH_OK) return st;
    const struct vstring *s = self.u.s;
    bool cased = false, ok = true;
    for (size_t i = 0; i < s->len;) {
        uint32_t cp;
        size_t n = utf8_decode(s->data + i, s->len - i, &cp);
        if (n == 0) break;
        if (uni_isupper(cp) || uni_islower(cp)) {
            cased = true;
            if (upper ? uni_islower(cp) : uni_isupper(cp)) ok = false;
        }
        i += n;
    }
    *out = value_bool(cased && ok);
    return HEARTH_OK;
}

METHOD(islower) { (void)r; return case_class("islower", self, args, false, out); }
METHOD(isupper) { (void)r; return case_class("isupper", self, args, true, out); }

/* ljust/rjust/center/zfill */
static hearth_status justify(struct jrender *r, const char *fn, value self, const struct jargs *args,
                             char how, value *out)
{
    static const char *const names[] = {"width", "fillchar", NULL};
    const value *a[2];
    int64_t width;
    hearth_status st = jargs_bind(fn, args, names, a);
    if (st == HEARTH_OK) st = optional_int(fn, a[0], -1, &width);
    if (st == HEARTH_OK && !a[0]) st = hearth_error(HEARTH_E_TEMPLATE, "%s() takes at least 1 argument", fn);
    const char *fill = " ";
    size_t fill_len = 1;
    if (st == HEARTH_OK && a[1]) {
        if (a[1]->kind != VALUE_STRING || a[1]->u.s->n_chars != 1)
            st = hearth_error(HEARTH_E_TEMPLATE, "The fill character must be exactly one character long");
        else {
            fill = a[1]->u.s->data;
            fill_len = a[1]->u.s->len;
        }
    }
    if (st != HEARTH_OK) return st;
    const struct vstring *s = self.u.s;
    if (width > JINJA_MAX_OUTPUT / 4) width = JINJA_MAX_OUTPUT / 4;
    if (width <= (int64_t)s->n_chars) {
        *out = value_ref(self);
        return HEARTH_OK;
    }
    int64_t pad = width - (int64_t)s->n_chars, left;
    if (how == '<') left = 0;
    else if (how == '>' || how == '0') left = pad;
    else left = pad / 2 + (pad & width & 1);
    st = jrender_charge(r, (size_t)width / JINJA_WORK_BYTES);
    textbuf tb;
    textbuf_init(&tb, JINJA_MAX_OUTPUT, "a padded string");
    size_t body = 0;
    if (how == '0' && s->len > 0 && (s->data[0] == '+' || s->data[0] == '-')) {
        st = textbuf_append(&tb, s->data, 1);   /* zfill keeps the sign first */
        body = 1;
    }
    for (int64_t i = 0; st == HEARTH_OK && i < left; i++)
        st = how == '0' ? textbuf_append_char(&tb, '0') : textbuf_append(&tb, fill, fill_len);
    if (st == HEARTH_OK) st = textbuf_append(&tb, s->data + body, s->len - body);
    for (int64_t i = left; st == HEARTH_OK && i < pad; i++) st = textbuf_append(&tb, fill, fill_len);
    if (st == HEARTH_OK) st = jinja_string_from(r, &tb, out);
    textbuf_free(&tb);
    return st;
}

METHOD(ljust) { return justify(r, "ljust", self, args, '<', out); }
METHOD(rjust) { return justify(r, "rjust", self, args, '>', out); }
METHOD(center) { return justify(r, "center", self, args, '^', out); }

METHOD(zfill)
{
    if (args->n_kw || args->n_pos != 1) return hearth_error(HEARTH_E_TEMPLATE, "zfill() takes exactly one argument");
    return justify(r, "zfill", self, args, '0', out);
}

static hearth_status remove_affix(struct jrender *r, const char *fn, value self, const struct jargs *args, bool suffix,
                                  value *out)
{
    static const char *const names[] = {"affix", NULL};
    const value *a[1];
    const struct vstring *affix = NULL;
    hearth_status st = jargs_bind(fn, args, names, a);
    if (st == HEARTH_OK) st = want_string(fn, a[0], &affix);
    if (st != HEARTH_OK) return st;
    const struct vstring *s = self.u.s;
    if (!has_affix(s, 0, s->len, affix, suffix)) {
        *out = value_ref(self);
        return HEARTH_OK;
    }
    return jrender_new_string(r, s->data + (suffix ? 0 : affix->len), s->len - affix->len, out);
}

METHOD(removeprefix) { return remove_affix(r, "removeprefix", self, args, false, out); }
METHOD(removesuffix) { return remove_affix(r, "removesuffix", self, args, true, out); }

static hearth_status partition(struct jrender *r, const char *fn, value self, const struct jargs *args, bool from_right,
                               value *out)
{
    static const char *const names[] = {"sep", NULL};
    const value *a[1];
    const struct vstring *sep = NULL;
    hearth_status st = jargs_bind(fn, args, names, a);
    if (st == HEARTH_OK) st = want_string(fn, a[0], &sep);
    if (st == HEARTH_OK && sep->len == 0) st = hearth_error(HEARTH_E_TEMPLATE, "empty separator");
    if (st != HEARTH_OK) return st;
    const struct vstring *s = self.u.s;
    size_t at = SIZE_MAX;
    if (sep->len <= s->len) {
        if (!from_right) {
            for (size_t i = 0; i + sep->len <= s->len && at == SIZE_MAX; i++)
                if (memcmp(s->data + i, sep->data, sep->len) == 0) at = i;
        } else {
            for (size_t i = s->len - sep->len + 1; i-- > 0 && at == SIZE_MAX;)
                if (memcmp(s->data + i, sep->data, sep->len) == 0) at = i;
        }
    }
    st = value_new_list(3, out);
    if (st != HEARTH_OK) return st;
    out->u.list->is_tuple = true;
    value parts[3];
    hearth_status s0, s1, s2;
    if (at == SIZE_MAX) {
        s0 = from_right ? value_new_string("", 0, &parts[0]) : (parts[0] = value_ref(self), HEARTH_OK);
        s1 = value_new_string("", 0, &parts[1]);
        s2 = from_right ? (parts[2] = value_ref(self), HEARTH_OK) : value_new_string("", 0, &parts[2]);
    } else {
        s0 = jrender_new_string(r, s->data, at, &parts[0]);
        s1 = (parts[1] = value_ref(*a[0]), HEARTH_OK);
        s2 = jrender_new_string(r, s->data + at + sep->len, s->len - at - sep->len, &parts[2]);
    }
    hearth_status made[3] = {s0, s1, s2};
    for (int i = 0; i < 3; i++) {
        if (made[i] != HEARTH_OK) {
            if (st == HEARTH_OK) st = made[i];
            continue;
        }
        if (st == HEARTH_OK) st = value_list_push(*out, parts[i]);
        else value_unref(parts[i]);
    }
    if (st != HEARTH_OK) value_unref(*out);
    return st;
}

METHOD(partition) { return partition(r, "partition", self, args, false, out); }
METHOD(rpartition) { return partition(r, "rpartition", self, args, true, out); }

/* ---- dict ----------------------------------------------------------------- */

METHOD(items)
{
    hearth_status st = no_args("items", args);
    if (st != HEARTH_OK) return st;
    const struct vdict *d = self.u.dict;
    st = jrender_charge(r, d->len);
    if (st == HEARTH_OK) st = value_new_list(d->len, out);
    if (st != HEARTH_OK) return st;
    for (size_t i = 0; st == HEARTH_OK && i < d->len; i++) {
        value pair = value_undefined();
        st = value_new_list(2, &pair);
        if (st != HEARTH_OK) break;
        pair.u.list->is_tuple = true;
        struct vstring *k = d->entries[i].key;
        k->refs += k->refs != VALUE_REFS_STATIC;
        st = value_list_push(pair, value_from_vstring(k));
        if (st == HEARTH_OK) st = value_list_push(pair, value_ref(d->entries[i].val));
        if (st == HEARTH_OK) st = value_list_push(*out, pair);
        else value_unref(pair);
    }
    if (st != HEARTH_OK) value_unref(*out);
    return st;
}

METHOD(keys)
{
    hearth_status st = no_args("keys", args);
    return st == HEARTH_OK ? jrender_iterate(r, self, out) : st;
}

METHOD(values)
{
    hearth_status st = no_args("values", args);
    if (st != HEARTH_OK) return st;
    const struct vdict *d = self.u.dict;
    st = jrender_charge(r, d->len);
    if (st == HEARTH_OK) st = value_new_list(d->len, out);
    for (size_t i = 0; st == HEARTH_OK && i < d->len; i++) {
        st = value_list_push(*out, value_ref(d->entries[i].val));
        if (st != HEARTH_OK) value_unref(*out);
    }
    return st;
}

METHOD(get)
{
    (void)r;
    static const char *const names[] = {"key", "default", NULL};
    const value *a[2];
    hearth_status st = jargs_bind("get", args, names, a);
    if (st == HEARTH_OK && !a[0]) st = hearth_error(HEARTH_E_TEMPLATE, "get expected at least 1 argument, got 0");
    if (st != HEARTH_OK) return st;
    value *v = a[0]->kind == VALUE_STRING ? value_dict_get(self, a[0]->u.s->data, a[0]->u.s->len) : NULL;
    *out = v ? value_ref(*v) : a[1] ? value_ref(*a[1]) : value_null();
    return HEARTH_OK;
}

/* ---- list ----------------------------------------------------------------- */

METHOD(list_index)
{
    (void)r;
    if (args->n_kw || args->n_pos != 1) return hearth_error(HEARTH_E_TEMPLATE, "index() takes exactly one argument");
    for (size_t i = 0; i < value_list_len(self); i++) {
        if (value_equal(value_list_at(self, i), args->pos[0])) {
            *out = value_int((int64_t)i);
            return HEARTH_OK;
        }
    }
    return hearth_error(HEARTH_E_TEMPLATE, "list.index(x): x not in list");
}

METHOD(list_count)
{
    (void)r;
    if (args->n_kw || args->n_pos != 1) return hearth_error(HEARTH_E_TEMPLATE, "count() takes exactly one argument");
    int64_t n = 0;
    for (size_t i = 0; i < value_list_len(self); i++) n += value_equal(value_list_at(self, i), args->pos[0]);
    *out = value_int(n);
    return HEARTH_OK;
}

/* ---- global functions -------------------------------------------------------- */

METHOD(range)
{
    (void)self;
    if (args->n_kw) return hearth_error(HEARTH_E_TEMPLATE, "range() takes no keyword arguments");
    if (args->n_pos < 1 || args->n_pos > 3)
        return hearth_error(HEARTH_E_TEMPLATE, "range expected 1 to 3 arguments, got %zu", args->n_pos);
    int64_t v[3] = {0, 0, 1};
    for (size_t i = 0; i < args->n_pos; i++) {
        hearth_status st = optional_int("range", &args->pos[i], 0, &v[args->n_pos == 1 ? 1 : i]);
        if (st != HEARTH_OK) return st;
        if (args->pos[i].kind == VALUE_NULL)
            return hearth_error(HEARTH_E_TEMPLATE, "'NoneType' object cannot be interpreted as an integer");
    }
    int64_t start = v[0], stop = v[1], step = v[2];
    if (step == 0) return hearth_error(HEARTH_E_TEMPLATE, "range() arg 3 must not be zero");
    /* count without overflow: work in unsigned differences */
    uint64_t count = 0;
    if (step > 0 && start < stop) count = ((uint64_t)stop - (uint64_t)start - 1) / (uint64_t)step + 1;
    else if (step < 0 && start > stop) count = ((uint64_t)start - (uint64_t)stop - 1) / (0 - (uint64_t)step) + 1;
    if (count > JINJA_MAX_LIST)
        return hearth_error(HEARTH_E_RANGE, "range() of %llu items is more than the limit of %d",
                            (unsigned long long)count, JINJA_MAX_LIST);
    hearth_status st = jrender_charge(r, (size_t)count);
    if (st == HEARTH_OK) st = value_new_list((size_t)count, out);
    for (uint64_t i = 0; st == HEARTH_OK && i < count; i++) {
        st = value_list_push(*out, value_int((int64_t)((uint64_t)start + i * (uint64_t)step)));
        if (st != HEARTH_OK) value_unref(*out);
    }
    return st;
}

/* dict(...) and namespace(...): an optional mapping or list of pairs, then
 * keyword arguments. */
static hearth_status fill_mapping(const char *fn, value target, const struct jargs *args)
{
    if (args->n_pos > 1) return hearth_error(HEARTH_E_TEMPLATE, "%s expected at most 1 argument, got %zu", fn, args->n_pos);
    hearth_status st = HEARTH_OK;
    if (args->n_pos == 1) {
        value src = args->pos[0];
        if (src.kind == VALUE_DICT || src.kind == VALUE_NAMESPACE) {
            for (size_t i = 0; st == HEARTH_OK && i < src.u.dict->len; i++)
                st = value_dict_set_vstring(target, src.u.dict->entries[i].key, value_ref(src.u.dict->entries[i].val));
        } else if (src.kind == VALUE_LIST) {
            for (size_t i = 0; st == HEARTH_OK && i < value_list_len(src); i++) {
                value pair = value_list_at(src, i);
                if (pair.kind != VALUE_LIST || value_list_len(pair) != 2 || value_list_at(pair, 0).kind != VALUE_STRING)
                    return hearth_error(HEARTH_E_TEMPLATE, "%s: item %zu is not a (string key, value) pair", fn, i);
                st = value_dict_set_vstring(target, value_list_at(pair, 0).u.s, value_ref(value_list_at(pair, 1)));
            }
        } else {
            return hearth_error(HEARTH_E_TEMPLATE, "%s: cannot convert '%s' object to a mapping", fn, value_type_name(src));
        }
    }
    for (size_t i = 0; st == HEARTH_OK && i < args->n_kw; i++)
        st = value_dict_set(target, args->kw_names[i], strlen(args->kw_names[i]), value_ref(args->kw_vals[i]));
    return st;
}

METHOD(dict)
{
    (void)r;
    (void)self;
    hearth_status st = value_new_dict(out);
    if (st != HEARTH_OK) return st;
    st = fill_mapping("dict", *out, args);
    if (st != HEARTH_OK) value_unref(*out);
    return st;
}

METHOD(namespace)
{
    (void)r;
    (void)self;
    hearth_status st = value_new_namespace(out);
    if (st != HEARTH_OK) return st;
    st = fill_mapping("namespace", *out, args);
    if (st != HEARTH_OK) value_unref(*out);
    return st;
}

METHOD(raise_exception)
{
    (void)r;
    (void)self;
    value msg = value_undefined();
    hearth_status st = args->n_pos >= 1 ? jinja_to_string(r, args->pos[0], &msg) : value_new_cstring("raise_exception() called", &msg);
    if (st != HEARTH_OK) return st;
    st = hearth_error(HEARTH_E_TEMPLATE, "%s", msg.u.s->data);
    value_unref(msg);
    return st;
}

METHOD(strftime_now)
{
    (void)self;
    static const char *const names[] = {"format", NULL};
    const value *a[1];
    const struct vstring *fmt = NULL;
    hearth_status st = jargs_bind("strftime_now", args, names, a);
    if (st == HEARTH_OK) st = want_string("strftime_now", a[0], &fmt);
    if (st != HEARTH_OK) return st;
    return jtext_strftime(r, fmt, jrender_clock(r), out);
}

/* ---- tables ---------------------------------------------------------------- */

struct named_fn {
    const char *name;
    jinja_fn fn;
};

static const struct named_fn str_methods[] = {
    {"capitalize", method_capitalize}, {"casefold", method_lower}, {"center", method_center},
    {"count", method_count}, {"endswith", method_endswith}, {"find", method_find},
    {"format", method_format}, {"index", method_index}, {"isalnum", method_isalnum},
    {"isalpha", method_isalpha}, {"isdigit", method_isdigit}, {"islower", method_islower},
    {"isspace", method_isspace}, {"isupper", method_isupper}, {"join", method_join},
    {"ljust", method_ljust}, {"lower", method_lower}, {"lstrip", method_lstrip},
    {"partition", method_partition}, {"removeprefix", method_removeprefix},
    {"removesuffix", method_removesuffix}, {"replace", method_replace}, {"rfind", method_rfind},
    {"rindex", method_rindex}, {"rjust", method_rjust}, {"rpartition", method_rpartition},
    {"rsplit", method_rsplit}, {"rstrip", method_rstrip}, {"split", method_split},
    {"splitlines", method_splitlines}, {"startswith", method_startswith}, {"strip", method_strip},
    {"title", method_title}, {"upper", method_upper}, {"zfill", method_zfill},
};

static const struct named_fn dict_methods[] = {
    {"get", method_get}, {"items", method_items}, {"keys", method_keys}, {"values", method_values},
};

static const struct named_fn list_methods[] = {
    {"count", method_list_count}, {"index", method_list_index},
};

static const struct named_fn globals[] = {
    {"dict", method_dict}, {"namespace", method_namespace}, {"raise_exception", method_raise_exception},
    {"range", method_range}, {"strftime_now", method_strftime_now},
};

static jinja_fn find(const struct named_fn *table, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(table[i].name, name)) return table[i].fn;
    return NULL;
}

jinja_fn jinja_find_method(value self, const char *name)
{
    switch (self.kind) {
    case VALUE_STRING: return find(str_methods, HEARTH_ARRAY_LEN(str_methods), name);
    case VALUE_DICT: return find(dict_methods, HEARTH_ARRAY_LEN(dict_methods), name);
    case VALUE_LIST: return find(list_methods, HEARTH_ARRAY_LEN(list_methods), name);
    default: return NULL;
    }
}

jinja_fn jinja_find_global(const char *name)
{
    return find(globals, HEARTH_ARRAY_LEN(globals), name);
}

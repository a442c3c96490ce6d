/*
 * value.h -- the dynamically typed values shared by the JSON reader and
 * writer and the chat-template interpreter: null, bool, int, float, string,
 * list and dict (keys in insertion order), plus the kinds only templates
 * make (undefined, namespace, and interpreter objects such as functions and
 * loop state).
 *
 * A value is a small tagged struct passed by value; strings, lists, dicts
 * and objects live on the heap with a reference count.  Conventions:
 *   - functions that take a value "consume" it: they own the reference
 *     afterwards, on success and on failure alike;
 *   - value_ref() adds a reference, value_unref() drops one;
 *   - lists and dicts are treated as immutable once built, except
 *     namespaces, whose attributes templates may set.  Together with the rule
 *     that a namespace cannot be stored inside any other value, this keeps
 *     values acyclic, and every container records its nesting depth, which
 *     is capped at VALUE_MAX_DEPTH so that no recursive walk over a value can
 *     exhaust the stack.
 * Strings are UTF-8 (callers guarantee validity), may hold NUL bytes and are
 * also NUL-terminated.  The semantics of comparisons and conversions to text
 * are Python's, since chat templates are written against Python's Jinja.
 */
#ifndef HEARTH_VALUE_H
#define HEARTH_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"
#include "textbuf.h"

/* Deepest nesting of lists and dicts a value may have. */
#define VALUE_MAX_DEPTH 512

typedef enum value_kind {
    VALUE_UNDEFINED = 0,  /* a missing variable or attribute (templates) */
    VALUE_NULL,
    VALUE_BOOL,
    VALUE_INT,
    VALUE_FLOAT,
    VALUE_STRING,
    VALUE_LIST,           /* also tuples, which differ only in repr() */
    VALUE_DICT,
    VALUE_NAMESPACE,      /* a template namespace(): a dict with settable attributes */
    VALUE_OBJECT          /* an interpreter object: function, macro, loop state */
} value_kind;

struct vstring {
    size_t refs;
    size_t len;       /* bytes, without the terminating NUL */
    size_t n_chars;   /* code points */
    bool markup;      /* templates: marked safe (Jinja's Markup), see jinja.h */
    char data[];
};

typedef struct value {
    value_kind kind;
    union {
        bool b;
        int64_t i;
        double f;
        struct vstring *s;     /* STRING; UNDEFINED: why it is undefined, or NULL */
        struct vlist *list;
        struct vdict *dict;    /* DICT and NAMESPACE */
        struct vobject *obj;
    } u;
} value;

struct vlist {
    size_t refs;
    size_t len, cap;
    uint32_t depth;   /* 1 + the deepest element */
    bool is_tuple;
    value *items;
};

struct vdict_entry {
    struct vstring *key;
    value val;
};

struct vdict {
    size_t refs;
    size_t len, cap;
    uint32_t depth;
    struct vdict_entry *entries;   /* in insertion order */
    uint32_t *index;               /* hash index (entry + 1, 0 = free), from 8 entries on */
    size_t index_cap;
};

/* Interpreter objects embed this header first; value.c needs only to know
 * how to name and destroy them. */
struct vobject_type {
    const char *type_name;                 /* Python's name, for error messages */
    void (*destroy)(struct vobject *obj);  /* drop what obj holds and free it */
};

struct vobject {
    size_t refs;
    uint32_t depth;
    const struct vobject_type *type;
};

/* Reference count of values that live as long as their owner (constants of
 * a parsed template): value_ref/value_unref leave them alone, so that
 * several threads may use them at once. */
#define VALUE_REFS_STATIC SIZE_MAX

static inline value value_null(void) { value v = {VALUE_NULL, {.i = 0}}; return v; }
static inline value value_bool(bool b) { value v = {VALUE_BOOL, {.b = b}}; return v; }
static inline value value_int(int64_t i) { value v = {VALUE_INT, {.i = i}}; return v; }
static inline value value_float(double f) { value v = {VALUE_FLOAT, {.f = f}}; return v; }
static inline value value_undefined(void) { value v = {VALUE_UNDEFINED, {.s = NULL}}; return v; }

/* An undefined value that remembers why it is undefined ("'x' is
 * undefined"), for the error raised when a template misuses it. */
value value_undefined_because(const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

value value_ref(value v);
void value_unref(value v);

/* Strings.  s must be valid UTF-8. */
struct vstring *vstring_new(const char *s, size_t len);
/* A string of len bytes for the caller to fill in (and then to set
 * n_chars), NUL-terminated. */
struct vstring *vstring_alloc(size_t len);
hearth_status value_new_string(const char *s, size_t len, value *out);
hearth_status value_new_cstring(const char *s, value *out);
/* Wrap a vstring (consumed). */
static inline value value_from_vstring(struct vstring *s) { value v = {VALUE_STRING, {.s = s}}; return v; }

/* Mark a string constant as static (see VALUE_REFS_STATIC) and free it. */
void value_make_static(value v);
void value_free_static(value v);

/* Lists. */
hearth_status value_new_list(size_t cap_hint, value *out);
hearth_status value_list_push(value list, value item);
static inline size_t value_list_len(value v) { return v.u.list->len; }
static inline value value_list_at(value v, size_t i) { return v.u.list->items[i]; }

/* Dicts and namespaces.  Setting an existing key replaces its value and
 * keeps its position (as Python's dict does). */
hearth_status value_new_dict(value *out);
hearth_status value_new_namespace(value *out);
hearth_status value_dict_set(value dict, const char *key, size_t key_len, value val);
hearth_status value_dict_set_vstring(value dict, struct vstring *key, value val);
/* The same without the storability check, for the variable scopes of the
 * template interpreter, which may hold namespaces. */
hearth_status value_vars_set(value dict, const char *key, size_t key_len, value val);
/* The value of key (borrowed), or NULL. */
value *value_dict_get(value dict, const char *key, size_t key_len);

/* Whether v may be stored inside a list, dict or namespace (a namespace may
 * not); records an error naming `where` when not. */
hearth_status value_check_storable(value v, const char *where);

/* Python truth value. */
bool value_truthy(value v);
/* Python ==. */
bool value_equal(value a, value b);
/* Python ordering (<: -1, ==: 0, >: 1); HEARTH_E_TEMPLATE for types that
 * cannot be ordered. */
hearth_status value_compare(value a, value b, int *out);
/* Python's name of the type: "str", "int", "NoneType", "dict", ... */
const char *value_type_name(value v);

/* Python str() and repr(), appended to tb. */
hearth_status value_str(value v, textbuf *tb);
hearth_status value_repr(value v, textbuf *tb);
/* Python's repr() of a float ("0.1", "1e+16", "inf"); out must hold 32 bytes. */
void value_format_float(double f, char out[32]);
/* strtod that always reads '.' as the decimal point, whatever the locale. */
double value_parse_double(const char *s, size_t len, size_t *used);

#endif /* HEARTH_VALUE_H */

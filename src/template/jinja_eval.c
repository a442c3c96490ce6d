/*
 * jinja_eval.c -- renders a parsed template: statements, expressions,
 * scopes, for loops, macros and call blocks, and the limits of jinja.h
 * (the operators themselves are in jinja_ops.c).
 *
 * Scoping follows Jinja: the template has one top-level scope; every loop
 * iteration, macro call and with block runs in a fresh child scope, so a
 * {% set %} inside a loop body is gone at the next iteration (which is why
 * templates use namespace()).  A scope that ends is emptied, which also
 * breaks the only reference cycles values can form (a macro kept in the
 * scope it closes over).
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jinja.h"
#include "utf8.h"

struct scope {
    size_t refs;
    struct scope *parent;
    value vars;   /* a dict; VALUE_NULL once the scope has ended */
};

enum flow { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE };

struct jrender {
    const struct jinja_template *t;
    textbuf *out;
    struct scope *scope;
    value globals;
    const struct jinja_clock *clock;
    int depth;
    int call_depth;
    uint64_t work;
    uint64_t iterations;
    enum flow flow;
    bool error_located;    /* the recorded error already names its position */
    value filter_input;    /* operand of the innermost filter of a filter/set block */
};

/* ---- errors ------------------------------------------------------------ */

/* Give an error raised below node n the position of n (the innermost node
 * that failed gets to name it). */
static hearth_status locate(struct jrender *r, const struct jnode *n, hearth_status st)
{
    if (st == HEARTH_OK || r->error_located) return st;
    r->error_located = true;
    if (st == HEARTH_E_INVALID || st == HEARTH_E_NOT_FOUND) st = HEARTH_E_TEMPLATE;
    unsigned line, col;
    jinja_position(r->t, n->pos, &line, &col);
    hearth_error_prefix("chat template line %u, column %u", line, col);
    return st;
}

hearth_status jinja_undefined_error(value v)
{
    if (v.kind == VALUE_UNDEFINED && v.u.s)
        return hearth_error(HEARTH_E_TEMPLATE, "%s", v.u.s->data);
    return hearth_error(HEARTH_E_TEMPLATE, "undefined value");
}

hearth_status jrender_charge(struct jrender *r, size_t units)
{
    r->work += units;
    if (r->work > JINJA_MAX_WORK)
        return hearth_error(HEARTH_E_RANGE, "rendering took more than %d work units "
                            "(a runaway template?)", JINJA_MAX_WORK);
    return HEARTH_OK;
}

const struct jinja_clock *jrender_clock(struct jrender *r)
{
    return r->clock;
}

/* ---- scopes ------------------------------------------------------------ */

static struct scope *scope_new(struct scope *parent)
{
    struct scope *s = hearth_malloc(sizeof *s, "a template scope");
    if (!s) return NULL;
    if (value_new_dict(&s->vars) != HEARTH_OK) {
        free(s);
        return NULL;
    }
    s->refs = 1;
    s->parent = parent;
    if (parent) parent->refs++;
    return s;
}

static void scope_unref(struct scope *s)
{
    while (s && --s->refs == 0) {
        struct scope *parent = s->parent;
        value_unref(s->vars);
        free(s);
        s = parent;
    }
}

/* The owner of a scope is done with it: drop its variables (what closures
 * still see of it is nothing), then the owner's reference. */
static void scope_close(struct scope *s)
{
    if (!s) return;
    value vars = s->vars;
    s->vars = value_null();
    value_unref(vars);
    scope_unref(s);
}

static value *scope_lookup(const struct jrender *r, const char *name, size_t len)
{
    for (const struct scope *s = r->scope; s; s = s->parent) {
        if (s->vars.kind != VALUE_DICT) continue;
        value *v = value_dict_get(s->vars, name, len);
        if (v) return v;
    }
    return value_dict_get(r->globals, name, len);
}

static hearth_status assign(struct jrender *r, const char *name, value v)
{
    return value_vars_set(r->scope->vars, name, strlen(name), v);
}

/* ---- functions, macros and loop state ---------------------------------- */

enum jfunc_kind { FN_BUILTIN, FN_MACRO, FN_CALLER };

struct jfunc {
    struct vobject hdr;
    enum jfunc_kind kind;
    const char *name;
    jinja_fn fn;                 /* BUILTIN */
    value self;                  /* BUILTIN: the receiver of a bound method */
    const struct jnode *node;    /* MACRO: the macro; CALLER: the call block */
    struct scope *closure;       /* MACRO, CALLER: where it was defined */
};

static void destroy_func(struct vobject *obj)
{
    struct jfunc *f = (struct jfunc *)obj;
    value_unref(f->self);
    scope_unref(f->closure);
    free(f);
}

static const struct vobject_type func_type = {"function", destroy_func};

static hearth_status new_func(enum jfunc_kind kind, const char *name, value *out, struct jfunc **fp)
{
    struct jfunc *f = hearth_calloc(1, sizeof *f, "a template function");
    if (!f) return HEARTH_E_NOMEM;
    f->hdr.refs = 1;
    f->hdr.depth = 1;
    f->hdr.type = &func_type;
    f->kind = kind;
    f->name = name;
    f->self = value_undefined();
    out->kind = VALUE_OBJECT;
    out->u.obj = &f->hdr;
    *fp = f;
    return HEARTH_OK;
}

hearth_status jinja_new_function(const char *name, jinja_fn fn, value self, value *out)
{
    struct jfunc *f;
    hearth_status st = new_func(FN_BUILTIN, name, out, &f);
    if (st != HEARTH_OK) {
        value_unref(self);
        return st;
    }
    f->fn = fn;
    f->self = self;
    uint32_t depth = (self.kind == VALUE_LIST ? self.u.list->depth
                      : self.kind == VALUE_DICT ? self.u.dict->depth
                      : self.kind == VALUE_OBJECT ? self.u.obj->depth : 0) + 1;
    f->hdr.depth = depth;
    return HEARTH_OK;
}

struct jloop {
    struct vobject hdr;
    value items;        /* the list iterated over */
    size_t index0;
    value changed_last; /* what loop.changed() saw last */
    bool changed_seen;
};

static void destroy_loop(struct vobject *obj)
{
    struct jloop *l = (struct jloop *)obj;
    value_unref(l->items);
    value_unref(l->changed_last);
    free(l);
}

static const struct vobject_type loop_type = {"LoopContext", destroy_loop};

static bool is_func(value v)
{
    return v.kind == VALUE_OBJECT && v.u.obj->type == &func_type;
}

static bool is_loop(value v)
{
    return v.kind == VALUE_OBJECT && v.u.obj->type == &loop_type;
}

static hearth_status loop_cycle(struct jrender *r, value self, const struct jargs *args, value *out)
{
    const struct jloop *l = (const struct jloop *)self.u.obj;
    if (args->n_kw) return hearth_error(HEARTH_E_TEMPLATE, "loop.cycle() takes no keyword arguments");
    if (args->n_pos == 0) return hearth_error(HEARTH_E_TEMPLATE, "loop.cycle() needs at least one item");
    *out = value_ref(args->pos[l->index0 % args->n_pos]);
    return HEARTH_OK;
}

static hearth_status loop_changed(struct jrender *r, value self, const struct jargs *args, value *out)
{
    struct jloop *l = (struct jloop *)self.u.obj;
    value now = value_undefined();
    hearth_status st = value_new_list(args->n_pos, &now);
    for (size_t i = 0; st == HEARTH_OK && i < args->n_pos; i++)
        st = value_list_push(now, value_ref(args->pos[i]));
    if (st != HEARTH_OK) return st;
    bool changed = !l->changed_seen || !value_equal(now, l->changed_last);
    value_unref(l->changed_last);
    l->changed_last = now;
    l->changed_seen = true;
    *out = value_bool(changed);
    return HEARTH_OK;
}

static hearth_status loop_attr(struct jloop *l, const char *name, value self, value *out)
{
    size_t len = value_list_len(l->items), i = l->index0;
    if (!strcmp(name, "index")) *out = value_int((int64_t)i + 1);
    else if (!strcmp(name, "index0")) *out = value_int((int64_t)i);
    else if (!strcmp(name, "revindex")) *out = value_int((int64_t)(len - i));
    else if (!strcmp(name, "revindex0")) *out = value_int((int64_t)(len - i - 1));
    else if (!strcmp(name, "first")) *out = value_bool(i == 0);
    else if (!strcmp(name, "last")) *out = value_bool(i + 1 == len);
    else if (!strcmp(name, "length")) *out = value_int((int64_t)len);
    else if (!strcmp(name, "depth")) *out = value_int(1);
    else if (!strcmp(name, "depth0")) *out = value_int(0);
    else if (!strcmp(name, "previtem"))
        *out = i > 0 ? value_ref(value_list_at(l->items, i - 1))
                     : value_undefined_because("there is no previous item");
    else if (!strcmp(name, "nextitem"))
        *out = i + 1 < len ? value_ref(value_list_at(l->items, i + 1))
                           : value_undefined_because("there is no next item");
    else if (!strcmp(name, "cycle")) return jinja_new_function("cycle", loop_cycle, value_ref(self), out);
    else if (!strcmp(name, "changed")) return jinja_new_function("changed", loop_changed, value_ref(self), out);
    else *out = value_undefined_because("'LoopContext' object has no attribute '%s'", name);
    return HEARTH_OK;
}

/* ---- attribute and item access ----------------------------------------- */

static const char *object_desc(value v)
{
    switch (v.kind) {
    case VALUE_NULL: return "'None'";
    case VALUE_BOOL: return "'bool object'";
    case VALUE_INT: return "'int object'";
    case VALUE_FLOAT: return "'float object'";
    case VALUE_STRING: return "'str object'";
    case VALUE_LIST: return v.u.list->is_tuple ? "'tuple object'" : "'list object'";
    case VALUE_DICT: return "'dict object'";
    case VALUE_NAMESPACE: return "'Namespace object'";
    default: return "'object'";
    }
}

hearth_status jrender_getattr(struct jrender *r, value obj, const char *name, size_t len, value *out)
{
    (void)r;
    if (obj.kind == VALUE_UNDEFINED) return jinja_undefined_error(obj);
    if (obj.kind == VALUE_NAMESPACE || obj.kind == VALUE_DICT) {
        /* Python's getattr comes first: d.items is the method, d['items'] the key */
        jinja_fn m = obj.kind == VALUE_DICT ? jinja_find_method(obj, name) : NULL;
        if (m) return jinja_new_function(name, m, value_ref(obj), out);
        value *v = value_dict_get(obj, name, len);
        if (v) {
            *out = value_ref(*v);
            return HEARTH_OK;
        }
    } else if (is_loop(obj)) {
        return loop_attr((struct jloop *)obj.u.obj, name, obj, out);
    } else if (obj.kind != VALUE_OBJECT) {
        jinja_fn m = jinja_find_method(obj, name);
        if (m) return jinja_new_function(name, m, value_ref(obj), out);
    }
    *out = value_undefined_because("%s has no attribute '%.100s'", object_desc(obj), name);
    return HEARTH_OK;
}

/* Python's slice.indices(): the start, step and count of obj[start:stop:step]
 * for a sequence of n items. */
static hearth_status slice_range(int64_t n, const value *bounds[3], int64_t *start_out,
                                 int64_t *step_out, int64_t *count_out)
{
    int64_t b[3] = {0, 0, 1};
    bool given[3];
    for (int k = 0; k < 3; k++) {
        const value *v = bounds[k];
        given[k] = v && v->kind != VALUE_NULL && v->kind != VALUE_UNDEFINED;
        if (!given[k]) continue;
        if (v->kind == VALUE_INT) b[k] = v->u.i;
        else if (v->kind == VALUE_BOOL) b[k] = v->u.b;
        else return hearth_error(HEARTH_E_TEMPLATE, "slice indices must be integers or None, not %s",
                                 value_type_name(*v));
    }
    int64_t step = given[2] ? b[2] : 1;
    if (step == 0) return hearth_error(HEARTH_E_TEMPLATE, "slice step cannot be zero");
    if (step == INT64_MIN) step = -INT64_MAX;
    int64_t lower = step < 0 ? -1 : 0, upper = step < 0 ? n - 1 : n;
    int64_t start, stop;
    if (!given[0]) {
        start = step < 0 ? upper : lower;
    } else {
        start = b[0];
        if (start < 0) {
            start = start < -n ? lower : start + n;
        } else if (start > upper) {
            start = upper;
        }
    }
    if (!given[1]) {
        stop = step < 0 ? lower : upper;
    } else {
        stop = b[1];
        if (stop < 0) {
            stop = stop < -n ? lower : stop + n;
        } else if (stop > upper) {
            stop = upper;
        }
    }
    int64_t count = 0;
    if (step > 0 && start < stop) count = (stop - start - 1) / step + 1;
    else if (step < 0 && stop < start) count = (start - stop - 1) / (-step) + 1;
    *start_out = start;
    *step_out = step;
    *count_out = count;
    return HEARTH_OK;
}

static hearth_status get_slice(struct jrender *r, value obj, const value *bounds[3], value *out)
{
    if (obj.kind == VALUE_UNDEFINED) return jinja_undefined_error(obj);
    if (obj.kind == VALUE_LIST) {
        int64_t start, step, count;
        hearth_status st = slice_range((int64_t)value_list_len(obj), bounds, &start, &step, &count);
        if (st == HEARTH_OK) st = jrender_charge(r, (size_t)count);
        if (st == HEARTH_OK) st = value_new_list((size_t)count, out);
        if (st != HEARTH_OK) return st;
        out->u.list->is_tuple = obj.u.list->is_tuple;
        for (int64_t k = 0; k < count && st == HEARTH_OK; k++)
            st = value_list_push(*out, value_ref(value_list_at(obj, (size_t)(start + k * step))));
        if (st != HEARTH_OK) value_unref(*out);
        return st;
    }
    if (obj.kind == VALUE_STRING) {
        const struct vstring *s = obj.u.s;
        int64_t start, step, count;
        hearth_status st = slice_range((int64_t)s->n_chars, bounds, &start, &step, &count);
        if (st == HEARTH_OK) st = jrender_charge(r, (size_t)count / JINJA_WORK_BYTES);
        if (st != HEARTH_OK) return st;
        if (s->n_chars == s->len) {   /* ASCII: characters are bytes */
            if (step == 1) return jrender_new_string(r, s->data + start, (size_t)count, out);
            textbuf tb;
            textbuf_init(&tb, JINJA_MAX_OUTPUT, "a string slice");
            for (int64_t k = 0; k < count && st == HEARTH_OK; k++)
                st = textbuf_append_char(&tb, s->data[start + k * step]);
            if (st == HEARTH_OK) st = jinja_string_from(r, &tb, out);
            textbuf_free(&tb);
            return st;
        }
        /* offsets of every character, then pick */
        size_t *offs = hearth_malloc((s->n_chars + 1) * sizeof *offs, "a string slice");
        if (!offs) return HEARTH_E_NOMEM;
        size_t c = 0;
        for (size_t i = 0; i < s->len; i++)
            if (((unsigned char)s->data[i] & 0xc0) != 0x80) offs[c++] = i;
        offs[c] = s->len;
        textbuf tb;
        textbuf_init(&tb, JINJA_MAX_OUTPUT, "a string slice");
        for (int64_t k = 0; k < count && st == HEARTH_OK; k++) {
            size_t ch = (size_t)(start + k * step);
            st = textbuf_append(&tb, s->data + offs[ch], offs[ch + 1] - offs[ch]);
        }
        free(offs);
        if (st == HEARTH_OK) st = jinja_string_from(r, &tb, out);
        textbuf_free(&tb);
        return st;
    }
    return hearth_error(HEARTH_E_TEMPLATE, "'%s' object is not subscriptable", value_type_name(obj));
}

hearth_status jrender_getitem(struct jrender *r, value obj, value key, value *out)
{
    if (obj.kind == VALUE_UNDEFINED) return jinja_undefined_error(obj);
    if (key.kind == VALUE_UNDEFINED) return jinja_undefined_error(key);
    bool int_key = key.kind == VALUE_INT || key.kind == VALUE_BOOL;
    int64_t k = key.kind == VALUE_INT ? key.u.i : key.kind == VALUE_BOOL ? key.u.b : 0;
    if (obj.kind == VALUE_DICT && key.kind == VALUE_STRING) {
        value *v = value_dict_get(obj, key.u.s->data, key.u.s->len);
        if (v) {
            *out = value_ref(*v);
            return HEARTH_OK;
        }
    } else if (obj.kind == VALUE_LIST && int_key) {
        int64_t n = (int64_t)value_list_len(obj);
        int64_t i = k < 0 ? k + n : k;
        if (i >= 0 && i < n) {
            *out = value_ref(value_list_at(obj, (size_t)i));
            return HEARTH_OK;
        }
        *out = value_undefined_because("%s has no element %lld", object_desc(obj), (long long)k);
        return HEARTH_OK;
    } else if (obj.kind == VALUE_STRING && int_key) {
        const struct vstring *s = obj.u.s;
        int64_t n = (int64_t)s->n_chars;
        int64_t i = k < 0 ? k + n : k;
        if (i >= 0 && i < n) {
            size_t at = s->n_chars == s->len ? (size_t)i : utf8_offset(s->data, s->len, (size_t)i);
            size_t end = s->n_chars == s->len ? at + 1 : utf8_offset(s->data, s->len, (size_t)i + 1);
            return value_new_string(s->data + at, end - at, out);
        }
        *out = value_undefined_because("%s has no element %lld", object_desc(obj), (long long)k);
        return HEARTH_OK;
    }
    /* then Python's getattr with a string key */
    if (key.kind == VALUE_STRING) return jrender_getattr(r, obj, key.u.s->data, key.u.s->len, out);
    *out = value_undefined_because("%s has no element of that key", object_desc(obj));
    return HEARTH_OK;
}

/* ---- calls --------------------------------------------------------------- */

#define SMALL_ARGS 8

struct call_args {
    value pos_small[SMALL_ARGS];
    value kw_small[SMALL_ARGS];
    const char *kw_names_small[SMALL_ARGS];
    value *pos;
    value *kw;
    const char **kw_names;
    size_t n_pos, n_kw;
    struct jargs args;
};

static hearth_status eval(struct jrender *r, const struct jnode *n, value *out);

static void free_args(struct call_args *ca)
{
    for (size_t i = 0; i < ca->n_pos; i++) value_unref(ca->pos[i]);
    for (size_t i = 0; i < ca->n_kw; i++) value_unref(ca->kw[i]);
    if (ca->pos != ca->pos_small) free(ca->pos);
    if (ca->kw != ca->kw_small) free(ca->kw);
    if (ca->kw_names != ca->kw_names_small) free((void *)ca->kw_names);
}

/* Evaluate the arguments of a CALL, FILTER or TEST node, after `first`
 * extra positional values (consumed). */
static hearth_status eval_args(struct jrender *r, const struct jnode *n, const value *first,
                               size_t n_first, struct call_args *ca)
{
    size_t n_pos = n_first + n->list.len;
    ca->pos = n_pos <= SMALL_ARGS ? ca->pos_small : hearth_calloc(n_pos, sizeof *ca->pos, "arguments");
    ca->kw = n->n_kwargs <= SMALL_ARGS ? ca->kw_small : hearth_calloc(n->n_kwargs, sizeof *ca->kw, "arguments");
    ca->kw_names = n->n_kwargs <= SMALL_ARGS ? ca->kw_names_small
                   : hearth_calloc(n->n_kwargs, sizeof *ca->kw_names, "arguments");
    ca->n_pos = ca->n_kw = 0;
    hearth_status st = (ca->pos && ca->kw && ca->kw_names) ? HEARTH_OK : HEARTH_E_NOMEM;
    for (size_t i = 0; i < n_first; i++) {
        if (st == HEARTH_OK) ca->pos[ca->n_pos++] = first[i];
        else value_unref(first[i]);
    }
    for (size_t i = 0; st == HEARTH_OK && i < n->list.len; i++) {
        st = eval(r, n->list.items[i], &ca->pos[ca->n_pos]);
        if (st == HEARTH_OK) ca->n_pos++;
    }
    for (size_t i = 0; st == HEARTH_OK && i < n->n_kwargs; i++) {
        ca->kw_names[i] = n->kwargs[i].name;
        st = eval(r, n->kwargs[i].value, &ca->kw[ca->n_kw]);
        if (st == HEARTH_OK) ca->n_kw++;
    }
    if (st != HEARTH_OK) {
        if (!ca->pos) ca->pos = ca->pos_small;
        if (!ca->kw) ca->kw = ca->kw_small;
        if (!ca->kw_names) ca->kw_names = ca->kw_names_small;
        free_args(ca);
        return st;
    }
    ca->args.pos = ca->pos;
    ca->args.n_pos = ca->n_pos;
    ca->args.kw_names = ca->kw_names;
    ca->args.kw_vals = ca->kw;
    ca->args.n_kw = ca->n_kw;
    return HEARTH_OK;
}

hearth_status jargs_bind(const char *fn, const struct jargs *args, const char *const *names,
                         const value **slots)
{
    size_t n_names = 0;
    while (names[n_names]) n_names++;
    for (size_t i = 0; i < n_names; i++) slots[i] = NULL;
    if (args->n_pos > n_names)
        return hearth_error(HEARTH_E_TEMPLATE, "%s() takes at most %zu argument%s (%zu given)",
                            fn, n_names, n_names == 1 ? "" : "s", args->n_pos);
    for (size_t i = 0; i < args->n_pos; i++) slots[i] = &args->pos[i];
    for (size_t k = 0; k < args->n_kw; k++) {
        size_t i = 0;
        while (i < n_names && strcmp(names[i], args->kw_names[k]) != 0) i++;
        if (i == n_names)
            return hearth_error(HEARTH_E_TEMPLATE, "%s() got an unexpected keyword argument '%s'",
                                fn, args->kw_names[k]);
        if (slots[i])
            return hearth_error(HEARTH_E_TEMPLATE, "%s() got multiple values for argument '%s'",
                                fn, names[i]);
        slots[i] = &args->kw_vals[k];
    }
    return HEARTH_OK;
}

static hearth_status exec_body(struct jrender *r, const struct jnode_list *body);

/* Run body with output captured into a new string value. */
static hearth_status capture(struct jrender *r, const struct jnode_list *body, value *out)
{
    textbuf tb;
    textbuf_init(&tb, JINJA_MAX_OUTPUT, "template output");
    textbuf *saved = r->out;
    r->out = &tb;
    hearth_status st = exec_body(r, body);
    r->out = saved;
    if (st == HEARTH_OK) st = jinja_string_from(r, &tb, out);
    textbuf_free(&tb);
    return st;
}

/* Call a macro or a call block's caller: params bound in a scope under the
 * closure, output captured as the result. */
static hearth_status call_macro(struct jrender *r, struct jfunc *f, const struct jargs *args,
                                value caller, value *out)
{
    const struct jnode *node = f->node;
    const struct jnode_list *params = &node->list, *defaults = &node->list2;
    if (r->call_depth >= JINJA_MAX_CALL_DEPTH) {
        value_unref(caller);
        return hearth_error(HEARTH_E_RANGE, "macro calls nested more than %d deep", JINJA_MAX_CALL_DEPTH);
    }
    struct scope *scope = scope_new(f->closure);
    if (!scope) {
        value_unref(caller);
        return HEARTH_E_NOMEM;
    }
    const char *what = f->kind == FN_MACRO ? f->name : "caller";
    value varargs = value_undefined(), kwargs = value_undefined();
    hearth_status st = value_new_list(0, &varargs);
    if (st != HEARTH_OK) {
        value_unref(caller);
        scope_close(scope);
        return st;
    }
    varargs.u.list->is_tuple = true;
    st = value_new_dict(&kwargs);
    if (st != HEARTH_OK) {
        value_unref(caller);
        value_unref(varargs);
        scope_close(scope);
        return st;
    }
    bool *bound = hearth_calloc(params->len + 1, sizeof *bound, "macro arguments");
    if (!bound) st = HEARTH_E_NOMEM;
    for (size_t i = 0; st == HEARTH_OK && i < args->n_pos; i++) {
        if (i < params->len) {
            st = value_vars_set(scope->vars, params->items[i]->name, strlen(params->items[i]->name),
                                value_ref(args->pos[i]));
            bound[i] = true;
        } else {
            st = value_list_push(varargs, value_ref(args->pos[i]));
        }
    }
    for (size_t k = 0; st == HEARTH_OK && k < args->n_kw; k++) {
        size_t i = 0;
        while (i < params->len && strcmp(params->items[i]->name, args->kw_names[k]) != 0) i++;
        if (i < params->len) {
            if (bound[i]) {
                st = hearth_error(HEARTH_E_TEMPLATE, "macro '%s' got multiple values for argument '%s'",
                                  what, args->kw_names[k]);
                break;
            }
            bound[i] = true;
            st = value_vars_set(scope->vars, args->kw_names[k], strlen(args->kw_names[k]),
                                value_ref(args->kw_vals[k]));
        } else {
            st = value_dict_set(kwargs, args->kw_names[k], strlen(args->kw_names[k]),
                                value_ref(args->kw_vals[k]));
        }
    }
    struct scope *saved = r->scope;
    r->scope = scope;
    r->call_depth++;
    /* defaults are evaluated at call time, seeing the earlier parameters */
    size_t first_default = params->len - defaults->len;
    for (size_t i = 0; st == HEARTH_OK && i < params->len; i++) {
        if (bound[i]) continue;
        const char *pname = params->items[i]->name;
        value v = value_undefined();
        if (i >= first_default) st = eval(r, defaults->items[i - first_default], &v);
        else v = value_undefined_because("parameter '%s' of '%s' was not given", pname, what);
        if (st == HEARTH_OK) st = value_vars_set(scope->vars, pname, strlen(pname), v);
    }
    free(bound);
    if (st == HEARTH_OK) st = value_vars_set(scope->vars, "varargs", 7, value_ref(varargs));
    if (st == HEARTH_OK) st = value_vars_set(scope->vars, "kwargs", 6, value_ref(kwargs));
    if (st == HEARTH_OK && caller.kind != VALUE_UNDEFINED) {
        st = value_vars_set(scope->vars, "caller", 6, caller);
        caller = value_undefined();
    }
    if (st == HEARTH_OK) st = capture(r, &node->body, out);
    r->call_depth--;
    r->scope = saved;
    value_unref(caller);
    value_unref(varargs);
    value_unref(kwargs);
    scope_close(scope);
    return st;
}

static hearth_status call_value(struct jrender *r, value callee, const struct jargs *args,
                                value caller, value *out)
{
    if (!is_func(callee)) {
        value_unref(caller);
        if (callee.kind == VALUE_UNDEFINED) return jinja_undefined_error(callee);
        return hearth_error(HEARTH_E_TEMPLATE, "'%s' object is not callable", value_type_name(callee));
    }
    struct jfunc *f = (struct jfunc *)callee.u.obj;
    if (f->kind == FN_BUILTIN) {
        value_unref(caller);
        return f->fn(r, f->self, args, out);
    }
    return call_macro(r, f, args, caller, out);
}

hearth_status jrender_call(struct jrender *r, value callee, const struct jargs *args, value *out)
{
    return call_value(r, callee, args, value_undefined(), out);
}

static hearth_status apply_named(struct jrender *r, bool is_test, const char *name, value v,
                                 const value *extra, size_t n_extra, value *out)
{
    jinja_fn fn = is_test ? jinja_find_test(name) : jinja_find_filter(name);
    if (!fn) return hearth_error(HEARTH_E_TEMPLATE, "unknown %s '%s'", is_test ? "test" : "filter", name);
    struct jargs args = {extra, n_extra, NULL, NULL, 0};
    return fn(r, v, &args, out);
}

hearth_status jrender_apply_filter(struct jrender *r, const char *name, value v,
                                   const value *extra, size_t n_extra, value *out)
{
    return apply_named(r, false, name, v, extra, n_extra, out);
}

hearth_status jrender_apply_test(struct jrender *r, const char *name, value v,
                                 const value *extra, size_t n_extra, bool *out)
{
    value res = value_undefined();
    hearth_status st = apply_named(r, true, name, v, extra, n_extra, &res);
    if (st != HEARTH_OK) return st;
    *out = value_truthy(res);
    value_unref(res);
    return HEARTH_OK;
}

/* ---- strings ----------------------------------------------------------- */

hearth_status jrender_new_string(struct jrender *r, const char *s, size_t len, value *out)
{
    hearth_status st = jrender_charge(r, len / JINJA_WORK_BYTES);
    return st == HEARTH_OK ? value_new_string(s, len, out) : st;
}

hearth_status jinja_string_from(struct jrender *r, textbuf *tb, value *out)
{
    if (tb->len > JINJA_MAX_OUTPUT)
        return hearth_error(HEARTH_E_RANGE, "string longer than %u bytes", JINJA_MAX_OUTPUT);
    return jrender_new_string(r, tb->data ? tb->data : "", tb->len, out);
}

hearth_status jinja_to_string(struct jrender *r, value v, value *out)
{
    if (v.kind == VALUE_STRING) {
        *out = value_ref(v);
        return HEARTH_OK;
    }
    textbuf tb;
    textbuf_init(&tb, JINJA_MAX_OUTPUT, "a string");
    hearth_status st = value_str(v, &tb);
    if (st == HEARTH_OK) st = jinja_string_from(r, &tb, out);
    textbuf_free(&tb);
    return st;
}

/* ---- expressions --------------------------------------------------------- */

static hearth_status enter(struct jrender *r, const struct jnode *n)
{
    if (++r->depth > JINJA_MAX_EVAL_DEPTH)
        return hearth_error(HEARTH_E_RANGE, "evaluation nested more than %d levels deep "
                            "(runaway recursion?)", JINJA_MAX_EVAL_DEPTH);
    if (++r->work > JINJA_MAX_WORK) return jrender_charge(r, 0);
    (void)n;
    return HEARTH_OK;
}

static hearth_status eval_list(struct jrender *r, const struct jnode *n, value *out)
{
    hearth_status st = value_new_list(n->list.len, out);
    if (st != HEARTH_OK) return st;
    out->u.list->is_tuple = n->kind == JN_TUPLE;
    for (size_t i = 0; st == HEARTH_OK && i < n->list.len; i++) {
        value v = value_undefined();
        st = eval(r, n->list.items[i], &v);
        if (st == HEARTH_OK) st = value_list_push(*out, v);
    }
    if (st != HEARTH_OK) value_unref(*out);
    return st;
}

static hearth_status eval_dict(struct jrender *r, const struct jnode *n, value *out)
{
    hearth_status st = value_new_dict(out);
    if (st != HEARTH_OK) return st;
    for (size_t i = 0; st == HEARTH_OK && i < n->list.len; i++) {
        value k = value_undefined(), v = value_undefined();
        st = eval(r, n->list.items[i], &k);
        if (st != HEARTH_OK) break;
        if (k.kind != VALUE_STRING) {
            st = hearth_error(HEARTH_E_UNSUPPORTED, "dict keys must be strings in chat templates (got %s)",
                              value_type_name(k));
            value_unref(k);
            break;
        }
        st = eval(r, n->list2.items[i], &v);
        if (st == HEARTH_OK) st = value_dict_set_vstring(*out, k.u.s, v);
        value_unref(k);
    }
    if (st != HEARTH_OK) value_unref(*out);
    return st;
}

static hearth_status eval_compare(struct jrender *r, const struct jnode *n, value *out)
{
    value left = value_undefined();
    hearth_status st = eval(r, n->a, &left);
    if (st != HEARTH_OK) return st;
    bool result = true;
    for (size_t i = 0; st == HEARTH_OK && i < n->list.len; i++) {
        value right = value_undefined();
        st = eval(r, n->list.items[i], &right);
        if (st != HEARTH_OK) break;
        st = jrender_compare(n->cmp_ops[i], left, right, &result);
        value_unref(left);
        left = right;
        if (st != HEARTH_OK || !result) break;
    }
    value_unref(left);
    if (st == HEARTH_OK) *out = value_bool(result);
    return st;
}

static hearth_status eval_concat(struct jrender *r, const struct jnode *n, value *out)
{
    textbuf tb;
    textbuf_init(&tb, JINJA_MAX_OUTPUT, "a concatenated string");
    hearth_status st = HEARTH_OK;
    for (size_t i = 0; st == HEARTH_OK && i < n->list.len; i++) {
        value v = value_undefined();
        st = eval(r, n->list.items[i], &v);
        if (st != HEARTH_OK) break;
        st = value_str(v, &tb);
        value_unref(v);
    }
    if (st == HEARTH_OK) st = jinja_string_from(r, &tb, out);
    textbuf_free(&tb);
    return st;
}

static hearth_status eval_getitem(struct jrender *r, const struct jnode *n, value *out)
{
    value obj = value_undefined();
    hearth_status st = eval(r, n->a, &obj);
    if (st != HEARTH_OK) return st;
    if (n->b->kind == JN_SLICE) {
        const struct jnode *sl = n->b;
        value b[3] = {value_undefined(), value_undefined(), value_undefined()};
        const struct jnode *parts[3] = {sl->a, sl->b, sl->c};
        const value *bounds[3] = {NULL, NULL, NULL};
        for (int k = 0; k < 3 && st == HEARTH_OK; k++) {
            if (!parts[k]) continue;
            st = eval(r, parts[k], &b[k]);
            if (st == HEARTH_OK) bounds[k] = &b[k];
        }
        if (st == HEARTH_OK) st = locate(r, sl, get_slice(r, obj, bounds, out));
        for (int k = 0; k < 3; k++) value_unref(b[k]);
    } else {
        value key = value_undefined();
        st = eval(r, n->b, &key);
        if (st == HEARTH_OK) {
            st = jrender_getitem(r, obj, key, out);
            value_unref(key);
        }
    }
    value_unref(obj);
    return st;
}

static hearth_status eval_call(struct jrender *r, const struct jnode *n, value caller, value *out)
{
    value callee = value_undefined();
    hearth_status st = eval(r, n->a, &callee);
    if (st != HEARTH_OK) {
        value_unref(caller);
        return st;
    }
    struct call_args ca;
    st = eval_args(r, n, NULL, 0, &ca);
    if (st == HEARTH_OK) {
        st = call_value(r, callee, &ca.args, caller, out);
        free_args(&ca);
    } else {
        value_unref(caller);
    }
    value_unref(callee);
    return st;
}

static hearth_status eval_filter(struct jrender *r, const struct jnode *n, value *out)
{
    value operand = value_undefined();
    hearth_status st;
    if (n->a) {
        st = eval(r, n->a, &operand);
        if (st != HEARTH_OK) return st;
    } else {
        operand = value_ref(r->filter_input);
    }
    bool is_test = n->kind == JN_TEST;
    jinja_fn fn = is_test ? jinja_find_test(n->name) : jinja_find_filter(n->name);
    if (!fn) {
        value_unref(operand);
        return hearth_error(HEARTH_E_TEMPLATE, "unknown %s '%s'", is_test ? "test" : "filter", n->name);
    }
    struct call_args ca;
    st = eval_args(r, n, NULL, 0, &ca);
    if (st == HEARTH_OK) {
        st = fn(r, operand, &ca.args, out);
        free_args(&ca);
    }
    value_unref(operand);
    return st;
}

static hearth_status eval_name(struct jrender *r, const struct jnode *n, value *out)
{
    size_t len = strlen(n->name);
    value *v = scope_lookup(r, n->name, len);
    if (v) {
        *out = value_ref(*v);
        return HEARTH_OK;
    }
    jinja_fn fn = jinja_find_global(n->name);
    if (fn) return jinja_new_function(n->name, fn, value_undefined(), out);
    *out = value_undefined_because("'%s' is undefined", n->name);
    return HEARTH_OK;
}

static hearth_status eval_inner(struct jrender *r, const struct jnode *n, value *out)
{
    hearth_status st;
    value a = value_undefined(), b = value_undefined();
    switch (n->kind) {
    case JN_CONST:
        *out = value_ref(n->constant);
        return HEARTH_OK;
    case JN_NAME:
        return eval_name(r, n, out);
    case JN_GETATTR:
        st = eval(r, n->a, &a);
        if (st != HEARTH_OK) return st;
        st = jrender_getattr(r, a, n->name, strlen(n->name), out);
        value_unref(a);
        return st;
    case JN_GETITEM:
        return eval_getitem(r, n, out);
    case JN_CALL:
        return eval_call(r, n, value_undefined(), out);
    case JN_FILTER:
    case JN_TEST:
        return eval_filter(r, n, out);
    case JN_NOT:
        st = eval(r, n->a, &a);
        if (st != HEARTH_OK) return st;
        *out = value_bool(!value_truthy(a));
        value_unref(a);
        return HEARTH_OK;
    case JN_NEG:
    case JN_POS:
        st = eval(r, n->a, &a);
        if (st != HEARTH_OK) return st;
        if (a.kind == VALUE_FLOAT) {
            *out = value_float(n->kind == JN_NEG ? -a.u.f : a.u.f);
        } else if (a.kind == VALUE_INT || a.kind == VALUE_BOOL) {
            int64_t i = a.kind == VALUE_BOOL ? (int64_t)a.u.b : a.u.i;
            if (n->kind == JN_NEG && i == INT64_MIN)
                st = hearth_error(HEARTH_E_RANGE, "integer result does not fit in 64 bits");
            else *out = value_int(n->kind == JN_NEG ? -i : i);
        } else if (a.kind == VALUE_UNDEFINED) {
            st = jinja_undefined_error(a);
        } else {
            st = hearth_error(HEARTH_E_TEMPLATE, "bad operand type for unary %c: '%s'",
                              n->kind == JN_NEG ? '-' : '+', value_type_name(a));
        }
        value_unref(a);
        return st;
    case JN_AND:
    case JN_OR:
        st = eval(r, n->a, &a);
        if (st != HEARTH_OK) return st;
        if (value_truthy(a) == (n->kind == JN_OR)) {
            *out = a;
            return HEARTH_OK;
        }
        value_unref(a);
        return eval(r, n->b, out);
    case JN_BINOP:
        st = eval(r, n->a, &a);
        if (st != HEARTH_OK) return st;
        st = eval(r, n->b, &b);
        if (st == HEARTH_OK) {
            st = jrender_binop(r, n->op, a, b, out);
            value_unref(b);
        }
        value_unref(a);
        return st;
    case JN_CONCAT:
        return eval_concat(r, n, out);
    case JN_COMPARE:
        return eval_compare(r, n, out);
    case JN_COND:
        st = eval(r, n->b, &a);
        if (st != HEARTH_OK) return st;
        bool yes = value_truthy(a);
        value_unref(a);
        if (yes) return eval(r, n->a, out);
        if (n->c) return eval(r, n->c, out);
        *out = value_undefined_because("the inline if expression has no else branch");
        return HEARTH_OK;
    case JN_LIST:
    case JN_TUPLE:
        return eval_list(r, n, out);
    case JN_DICT:
        return eval_dict(r, n, out);
    default:
        return hearth_error(HEARTH_E_INTERNAL, "node kind %d is not an expression", (int)n->kind);
    }
}

static hearth_status eval(struct jrender *r, const struct jnode *n, value *out)
{
    hearth_status st = enter(r, n);
    if (st == HEARTH_OK) st = eval_inner(r, n, out);
    r->depth--;
    return locate(r, n, st);
}

/* ---- statements ---------------------------------------------------------- */

static hearth_status emit(struct jrender *r, value v)
{
    if (v.kind == VALUE_STRING) return textbuf_append(r->out, v.u.s->data, v.u.s->len);
    return value_str(v, r->out);
}

/* Bind loop or assignment targets (NAME nodes) to v, unpacking when there
 * are several. */
static hearth_status bind_targets(struct jrender *r, const struct jnode_list *targets, value v)
{
    if (targets->len == 1) return assign(r, targets->items[0]->name, v);
    hearth_status st = HEARTH_OK;
    size_t n = v.kind == VALUE_LIST ? value_list_len(v) : v.kind == VALUE_STRING ? v.u.s->n_chars : 0;
    if (v.kind != VALUE_LIST && v.kind != VALUE_STRING) {
        st = hearth_error(HEARTH_E_TEMPLATE, "cannot unpack non-iterable %s object", value_type_name(v));
    } else if (n != targets->len) {
        st = hearth_error(HEARTH_E_TEMPLATE, "%s values to unpack (expected %zu, got %zu)",
                          n > targets->len ? "too many" : "not enough", targets->len, n);
    }
    for (size_t i = 0; st == HEARTH_OK && i < targets->len; i++) {
        value item = value_undefined();
        if (v.kind == VALUE_LIST) {
            item = value_ref(value_list_at(v, i));
        } else {
            value idx = value_int((int64_t)i);
            st = jrender_getitem(r, v, idx, &item);
            if (st != HEARTH_OK) break;
        }
        st = assign(r, targets->items[i]->name, item);
    }
    value_unref(v);
    return st;
}

/* The list a for loop walks: lists as they are, dict keys, string
 * characters; undefined is empty. */
hearth_status jrender_iterate(struct jrender *r, value v, value *out)
{
    switch (v.kind) {
    case VALUE_LIST:
        *out = value_ref(v);
        return HEARTH_OK;
    case VALUE_UNDEFINED:
        return value_new_list(0, out);
    case VALUE_DICT: {
        const struct vdict *d = v.u.dict;
        hearth_status st = jrender_charge(r, d->len);
        if (st == HEARTH_OK) st = value_new_list(d->len, out);
        for (size_t i = 0; st == HEARTH_OK && i < d->len; i++) {
            d->entries[i].key->refs += d->entries[i].key->refs != VALUE_REFS_STATIC;
            st = value_list_push(*out, value_from_vstring(d->entries[i].key));
            if (st != HEARTH_OK) value_unref(*out);
        }
        return st;
    }
    case VALUE_STRING: {
        const struct vstring *s = v.u.s;
        hearth_status st = jrender_charge(r, s->n_chars);
        if (st == HEARTH_OK) st = value_new_list(s->n_chars, out);
        for (size_t i = 0; st == HEARTH_OK && i < s->len;) {
            uint32_t cp;
            size_t n = utf8_decode(s->data + i, s->len - i, &cp);
            if (n == 0) n = 1;
            value c = value_undefined();
            st = value_new_string(s->data + i, n, &c);
            if (st == HEARTH_OK) st = value_list_push(*out, c);
            if (st != HEARTH_OK) value_unref(*out);
            i += n;
        }
        return st;
    }
    default:
        return hearth_error(HEARTH_E_TEMPLATE, "'%s' object is not iterable", value_type_name(v));
    }
}

static hearth_status exec_body(struct jrender *r, const struct jnode_list *body);

/* Run body in a fresh scope under the current one. */
static hearth_status in_new_scope(struct jrender *r, const struct jnode_list *body)
{
    struct scope *s = scope_new(r->scope);
    if (!s) return HEARTH_E_NOMEM;
    struct scope *saved = r->scope;
    r->scope = s;
    hearth_status st = exec_body(r, body);
    r->scope = saved;
    scope_close(s);
    return st;
}

static hearth_status exec_for(struct jrender *r, const struct jnode *n)
{
    value iterable = value_undefined(), items = value_undefined();
    hearth_status st = eval(r, n->a, &iterable);
    if (st != HEARTH_OK) return st;
    st = locate(r, n->a, jrender_iterate(r, iterable, &items));
    value_unref(iterable);
    if (st != HEARTH_OK) return st;
    struct scope *saved = r->scope;
    if (n->b) {
        /* "for x in xs if cond": the loop runs over the items that pass */
        value kept = value_undefined();
        st = value_new_list(0, &kept);
        for (size_t i = 0; st == HEARTH_OK && i < value_list_len(items); i++) {
            struct scope *s = scope_new(saved);
            if (!s) {
                st = HEARTH_E_NOMEM;
                break;
            }
            r->scope = s;
            value item = value_list_at(items, i), test;
            st = bind_targets(r, &n->list, value_ref(item));
            if (st == HEARTH_OK) st = eval(r, n->b, &test);
            if (st == HEARTH_OK) {
                if (value_truthy(test)) st = value_list_push(kept, value_ref(item));
                value_unref(test);
            }
            r->scope = saved;
            scope_close(s);
        }
        value_unref(items);
        if (st != HEARTH_OK) {
            value_unref(kept);
            return locate(r, n, st);
        }
        items = kept;
    }
    size_t len = value_list_len(items);
    if (len == 0) {
        value_unref(items);
        return n->orelse.len ? in_new_scope(r, &n->orelse) : HEARTH_OK;
    }
    struct jloop *loop = hearth_calloc(1, sizeof *loop, "loop state");
    if (!loop) {
        value_unref(items);
        return HEARTH_E_NOMEM;
    }
    loop->hdr.refs = 1;
    loop->hdr.depth = items.u.list->depth + 1;
    loop->hdr.type = &loop_type;
    loop->items = items;
    loop->changed_last = value_undefined();
    value loop_value = {VALUE_OBJECT, {.obj = &loop->hdr}};
    for (size_t i = 0; i < len; i++) {
        if (++r->iterations > JINJA_MAX_ITERATIONS) {
            st = hearth_error(HEARTH_E_RANGE, "more than %d loop iterations", JINJA_MAX_ITERATIONS);
            break;
        }
        loop->index0 = i;
        struct scope *s = scope_new(saved);
        if (!s) {
            st = HEARTH_E_NOMEM;
            break;
        }
        r->scope = s;
        st = bind_targets(r, &n->list, value_ref(value_list_at(items, i)));
        if (st == HEARTH_OK) st = assign(r, "loop", value_ref(loop_value));
        if (st == HEARTH_OK) st = exec_body(r, &n->body);
        r->scope = saved;
        scope_close(s);
        if (st != HEARTH_OK) break;
        enum flow f = r->flow;
        r->flow = FLOW_NORMAL;
        if (f == FLOW_BREAK) break;
    }
    value_unref(loop_value);
    return locate(r, n, st);
}

static hearth_status exec_set(struct jrender *r, const struct jnode *n, value v)
{
    const struct jnode_list *targets = &n->list;
    if (targets->len == 1 && targets->items[0]->kind == JN_NSREF) {
        const struct jnode *t = targets->items[0];
        value *ns = scope_lookup(r, t->name, strlen(t->name));
        if (!ns || ns->kind != VALUE_NAMESPACE) {
            value_unref(v);
            return hearth_error(HEARTH_E_TEMPLATE, "cannot assign attribute '%s' on '%s': it is not a namespace",
                                t->attr, t->name);
        }
        return value_dict_set(*ns, t->attr, strlen(t->attr), v);
    }
    for (size_t i = 0; i < targets->len; i++) {
        if (targets->items[i]->kind == JN_NSREF) {
            value_unref(v);
            return hearth_error(HEARTH_E_UNSUPPORTED, "namespace attributes cannot be assigned by unpacking");
        }
    }
    return bind_targets(r, targets, v);
}

static hearth_status exec(struct jrender *r, const struct jnode *n);

static hearth_status exec_inner(struct jrender *r, const struct jnode *n)
{
    hearth_status st;
    value v = value_undefined();
    switch (n->kind) {
    case JN_TEXT:
        return emit(r, n->constant);
    case JN_PRINT:
        st = eval(r, n->a, &v);
        if (st != HEARTH_OK) return st;
        st = emit(r, v);
        value_unref(v);
        return st;
    case JN_IF:
        for (const struct jnode *node = n; node;) {
            st = eval(r, node->a, &v);
            if (st != HEARTH_OK) return st;
            bool yes = value_truthy(v);
            value_unref(v);
            if (yes) return exec_body(r, &node->body);
            if (node->orelse.len == 1 && node->orelse.items[0]->kind == JN_IF && node->orelse.items[0]->op == 1) {
                node = node->orelse.items[0];
                continue;
            }
            return exec_body(r, &node->orelse);
        }
        return HEARTH_OK;
    case JN_FOR:
        return exec_for(r, n);
    case JN_SET:
        st = eval(r, n->a, &v);
        if (st != HEARTH_OK) return st;
        return exec_set(r, n, v);
    case JN_SET_BLOCK:
        st = capture(r, &n->body, &v);
        if (st != HEARTH_OK) return st;
        if (n->a) {
            value saved = r->filter_input, filtered;
            r->filter_input = v;
            st = eval(r, n->a, &filtered);
            r->filter_input = saved;
            value_unref(v);
            if (st != HEARTH_OK) return st;
            v = filtered;
        }
        return exec_set(r, n, v);
    case JN_FILTER_BLOCK: {
        st = capture(r, &n->body, &v);
        if (st != HEARTH_OK) return st;
        value saved = r->filter_input, filtered;
        r->filter_input = v;
        st = eval(r, n->a, &filtered);
        r->filter_input = saved;
        value_unref(v);
        if (st != HEARTH_OK) return st;
        st = emit(r, filtered);
        value_unref(filtered);
        return st;
    }
    case JN_MACRO: {
        struct jfunc *f;
        st = new_func(FN_MACRO, n->name, &v, &f);
        if (st != HEARTH_OK) return st;
        f->node = n;
        f->closure = r->scope;
        r->scope->refs++;
        return assign(r, n->name, v);
    }
    case JN_CALL_BLOCK: {
        struct jfunc *f;
        value caller = value_undefined();
        st = new_func(FN_CALLER, "caller", &caller, &f);
        if (st != HEARTH_OK) return st;
        f->node = n;
        f->closure = r->scope;
        r->scope->refs++;
        st = eval_call(r, n->a, caller, &v);
        if (st != HEARTH_OK) return st;
        st = emit(r, v);
        value_unref(v);
        return st;
    }
    case JN_WITH: {
        struct scope *s = scope_new(r->scope);
        if (!s) return HEARTH_E_NOMEM;
        st = HEARTH_OK;
        for (size_t i = 0; st == HEARTH_OK && i < n->list.len; i++) {
            st = eval(r, n->list2.items[i], &v);   /* in the outer scope */
            if (st == HEARTH_OK) st = value_vars_set(s->vars, n->list.items[i]->name,
                                                     strlen(n->list.items[i]->name), v);
        }
        struct scope *saved = r->scope;
        r->scope = s;
        if (st == HEARTH_OK) st = exec_body(r, &n->body);
        r->scope = saved;
        scope_close(s);
        return st;
    }
    case JN_SCOPE:
        return exec_body(r, &n->body);
    case JN_BREAK:
        r->flow = FLOW_BREAK;
        return HEARTH_OK;
    case JN_CONTINUE:
        r->flow = FLOW_CONTINUE;
        return HEARTH_OK;
    default:
        return hearth_error(HEARTH_E_INTERNAL, "node kind %d is not a statement", (int)n->kind);
    }
}

static hearth_status exec(struct jrender *r, const struct jnode *n)
{
    hearth_status st = enter(r, n);
    if (st == HEARTH_OK) st = exec_inner(r, n);
    r->depth--;
    return locate(r, n, st);
}

static hearth_status exec_body(struct jrender *r, const struct jnode_list *body)
{
    for (size_t i = 0; i < body->len; i++) {
        hearth_status st = exec(r, body->items[i]);
        if (st != HEARTH_OK) return st;
        if (r->flow != FLOW_NORMAL) break;
    }
    return HEARTH_OK;
}

hearth_status jinja_render(const struct jinja_template *t, value globals,
                           const struct jinja_clock *clock, textbuf *out)
{
    struct jrender r;
    memset(&r, 0, sizeof r);
    r.t = t;
    r.out = out;
    r.globals = globals;
    r.clock = clock;
    r.flow = FLOW_NORMAL;
    r.filter_input = value_undefined();
    r.scope = scope_new(NULL);
    if (!r.scope) return HEARTH_E_NOMEM;
    hearth_status st = exec_body(&r, &t->body);
    scope_close(r.scope);
    return st;
}

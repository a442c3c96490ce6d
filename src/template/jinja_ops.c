/*
 * jinja_ops.c -- the operators of template expressions with Python's
 * semantics: arithmetic on 64-bit ints and doubles (floor division and
 * modulo round toward minus infinity; an int result that does not fit is an
 * error, not a wrong number), concatenation and repetition of strings and
 * lists, and comparisons including "in".
 */
#include "internal.h"

#include <math.h>
#include <string.h>

#include "jinja.h"

static bool is_num(value v)
{
    return v.kind == VALUE_INT || v.kind == VALUE_FLOAT || v.kind == VALUE_BOOL;
}

static int64_t as_int(value v)
{
    return v.kind == VALUE_BOOL ? (int64_t)v.u.b : v.u.i;
}

static double as_float(value v)
{
    return v.kind == VALUE_FLOAT ? v.u.f : (double)as_int(v);
}

static const char *binop_symbol(int op)
{
    static const char *const s[] = {"+", "-", "*", "/", "//", "%", "**"};
    return s[op];
}

/* 64-bit integer arithmetic that reports overflow (Python's ints do not
 * overflow; here that is an error rather than a wrong number). */
static bool add_overflows(int64_t a, int64_t b, int64_t *out)
{
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_add_overflow(a, b, out);
#else
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) return true;
    *out = a + b;
    return false;
#endif
}

static bool sub_overflows(int64_t a, int64_t b, int64_t *out)
{
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_sub_overflow(a, b, out);
#else
    if ((b < 0 && a > INT64_MAX + b) || (b > 0 && a < INT64_MIN + b)) return true;
    *out = a - b;
    return false;
#endif
}

static bool mul_overflows(int64_t a, int64_t b, int64_t *out)
{
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_mul_overflow(a, b, out);
#else
    if (a != 0 && b != 0) {
        if (a == -1 && b == INT64_MIN) return true;
        if (b == -1 && a == INT64_MIN) return true;
        if (a > 0 ? (b > 0 ? a > INT64_MAX / b : b < INT64_MIN / a)
                  : (b > 0 ? a < INT64_MIN / b : a < INT64_MAX / b)) return true;
    }
    *out = a * b;
    return false;
#endif
}

static hearth_status overflow(void)
{
    return hearth_error(HEARTH_E_RANGE, "integer result does not fit in 64 bits");
}

/* seq * count for strings and lists */
static hearth_status repeat(struct jrender *r, value seq, int64_t count, value *out)
{
    if (count < 0) count = 0;
    if (seq.kind == VALUE_STRING) {
        size_t len = seq.u.s->len, total;
        if (hearth_mul_overflow(len, (size_t)count, &total) || total > JINJA_MAX_OUTPUT)
            return hearth_error(HEARTH_E_RANGE, "repeated string longer than %u bytes", JINJA_MAX_OUTPUT);
        hearth_status st = jrender_charge(r, total / JINJA_WORK_BYTES + 1);
        if (st != HEARTH_OK) return st;
        textbuf tb;
        textbuf_init(&tb, JINJA_MAX_OUTPUT, "a repeated string");
        for (int64_t i = 0; i < count && st == HEARTH_OK; i++) st = textbuf_append(&tb, seq.u.s->data, len);
        if (st == HEARTH_OK) st = jinja_string_from(r, &tb, out);
        textbuf_free(&tb);
        return st;
    }
    size_t len = value_list_len(seq), total;
    if (hearth_mul_overflow(len, (size_t)count, &total) || total > JINJA_MAX_LIST)
        return hearth_error(HEARTH_E_RANGE, "repeated list longer than %d items", JINJA_MAX_LIST);
    hearth_status st = jrender_charge(r, total);
    if (st == HEARTH_OK) st = value_new_list(total, out);
    if (st != HEARTH_OK) return st;
    out->u.list->is_tuple = seq.u.list->is_tuple;
    for (size_t i = 0; i < total && st == HEARTH_OK; i++)
        st = value_list_push(*out, value_ref(value_list_at(seq, i % len)));
    if (st != HEARTH_OK) value_unref(*out);
    return st;
}

hearth_status jrender_binop(struct jrender *r, int op, value a, value b, value *out)
{
    if (a.kind == VALUE_UNDEFINED) return jinja_undefined_error(a);
    if (b.kind == VALUE_UNDEFINED) return jinja_undefined_error(b);
    if (is_num(a) && is_num(b)) {
        bool ints = a.kind != VALUE_FLOAT && b.kind != VALUE_FLOAT;
        if (ints) {
            int64_t x = as_int(a), y = as_int(b), z;
            switch (op) {
            case JOP_ADD:
                if (add_overflows(x, y, &z)) return overflow();
                *out = value_int(z);
                return HEARTH_OK;
            case JOP_SUB:
                if (sub_overflows(x, y, &z)) return overflow();
                *out = value_int(z);
                return HEARTH_OK;
            case JOP_MUL:
                if (mul_overflows(x, y, &z)) return overflow();
                *out = value_int(z);
                return HEARTH_OK;
            case JOP_FLOORDIV:
            case JOP_MOD: {
                if (y == 0) return hearth_error(HEARTH_E_TEMPLATE, "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) {
                    if (op == JOP_MOD) {
                        *out = value_int(0);
                        return HEARTH_OK;
                    }
                    return overflow();
                }
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {   /* Python floors */
                    q--;
                    m += y;
                }
                *out = value_int(op == JOP_FLOORDIV ? q : m);
                return HEARTH_OK;
            }
            case JOP_POW:
                if (y >= 0) {
                    int64_t result = 1, base = x;
                    uint64_t e = (uint64_t)y;
                    while (e) {
                        if (e & 1 && mul_overflows(result, base, &result)) return overflow();
                        e >>= 1;
                        if (e && mul_overflows(base, base, &base)) return overflow();
                    }
                    *out = value_int(result);
                    return HEARTH_OK;
                }
                break;   /* negative exponent: float */
            default: break;
            }
        }
        double x = as_float(a), y = as_float(b);
        switch (op) {
        case JOP_ADD: *out = value_float(x + y); return HEARTH_OK;
        case JOP_SUB: *out = value_float(x - y); return HEARTH_OK;
        case JOP_MUL: *out = value_float(x * y); return HEARTH_OK;
        case JOP_DIV:
            if (y == 0) return hearth_error(HEARTH_E_TEMPLATE, "division by zero");
            *out = value_float(x / y);
            return HEARTH_OK;
        case JOP_FLOORDIV:
        case JOP_MOD: {
            if (y == 0) return hearth_error(HEARTH_E_TEMPLATE, "float division or modulo by zero");
            double m = fmod(x, y);
            if (m != 0 && ((m < 0) != (y < 0))) m += y;
            if (op == JOP_MOD) {
                *out = value_float(m == 0 ? copysign(0.0, y) : m);
            } else {
                double q = (x - m) / y;
                double fq = floor(q);
                if (q - fq > 0.5) fq += 1;
                *out = value_float(fq);
            }
            return HEARTH_OK;
        }
        case JOP_POW:
            if (x == 0 && y < 0) return hearth_error(HEARTH_E_TEMPLATE, "0.0 cannot be raised to a negative power");
            *out = value_float(pow(x, y));
            return HEARTH_OK;
        default: break;
        }
    }
    if (op == JOP_ADD) {
        if (a.kind == VALUE_STRING && b.kind == VALUE_STRING && (a.u.s->markup || b.u.s->markup)) {
            /* Markup + str escapes the str (and str + Markup likewise) */
            textbuf tb;
            textbuf_init(&tb, JINJA_MAX_OUTPUT, "a concatenated string");
            hearth_status st = a.u.s->markup ? textbuf_append(&tb, a.u.s->data, a.u.s->len)
                                             : jtext_html_escape(&tb, a.u.s->data, a.u.s->len);
            if (st == HEARTH_OK)
                st = b.u.s->markup ? textbuf_append(&tb, b.u.s->data, b.u.s->len)
                                   : jtext_html_escape(&tb, b.u.s->data, b.u.s->len);
            if (st == HEARTH_OK) st = jinja_string_from(r, &tb, out);
            if (st == HEARTH_OK) out->u.s->markup = true;
            textbuf_free(&tb);
            return st;
        }
        if (a.kind == VALUE_STRING && b.kind == VALUE_STRING) {
            hearth_status st = jrender_charge(r, (a.u.s->len + b.u.s->len) / JINJA_WORK_BYTES);
            if (st != HEARTH_OK) return st;
            if (a.u.s->len + b.u.s->len > JINJA_MAX_OUTPUT)
                return hearth_error(HEARTH_E_RANGE, "string longer than %u bytes", JINJA_MAX_OUTPUT);
            struct vstring *s = vstring_alloc(a.u.s->len + b.u.s->len);
            if (!s) return HEARTH_E_NOMEM;
            memcpy(s->data, a.u.s->data, a.u.s->len);
            memcpy(s->data + a.u.s->len, b.u.s->data, b.u.s->len);
            s->n_chars = a.u.s->n_chars + b.u.s->n_chars;
            *out = value_from_vstring(s);
            return HEARTH_OK;
        }
        if (a.kind == VALUE_LIST && b.kind == VALUE_LIST && a.u.list->is_tuple == b.u.list->is_tuple) {
            size_t total = value_list_len(a) + value_list_len(b);
            if (total > JINJA_MAX_LIST)
                return hearth_error(HEARTH_E_RANGE, "list longer than %d items", JINJA_MAX_LIST);
            hearth_status st = jrender_charge(r, total);
            if (st == HEARTH_OK) st = value_new_list(total, out);
            if (st != HEARTH_OK) return st;
            out->u.list->is_tuple = a.u.list->is_tuple;
            for (size_t i = 0; st == HEARTH_OK && i < value_list_len(a); i++)
                st = value_list_push(*out, value_ref(value_list_at(a, i)));
            for (size_t i = 0; st == HEARTH_OK && i < value_list_len(b); i++)
                st = value_list_push(*out, value_ref(value_list_at(b, i)));
            if (st != HEARTH_OK) value_unref(*out);
            return st;
        }
        if (a.kind == VALUE_STRING || a.kind == VALUE_LIST)
            return hearth_error(HEARTH_E_TEMPLATE, "can only concatenate %s (not \"%s\") to %s",
                                value_type_name(a), value_type_name(b), value_type_name(a));
    }
    if (op == JOP_MUL) {
        if ((a.kind == VALUE_STRING || a.kind == VALUE_LIST) && (b.kind == VALUE_INT || b.kind == VALUE_BOOL))
            return repeat(r, a, as_int(b), out);
        if ((b.kind == VALUE_STRING || b.kind == VALUE_LIST) && (a.kind == VALUE_INT || a.kind == VALUE_BOOL))
            return repeat(r, b, as_int(a), out);
    }
    if (op == JOP_MOD && a.kind == VALUE_STRING) return jtext_percent_format(r, a.u.s, b, out);
    return hearth_error(HEARTH_E_TEMPLATE, "unsupported operand type(s) for %s: '%s' and '%s'",
                        binop_symbol(op), value_type_name(a), value_type_name(b));
}

static hearth_status contains(value container, value item, bool *out)
{
    switch (container.kind) {
    case VALUE_UNDEFINED:
        *out = false;   /* an undefined value iterates as empty */
        return HEARTH_OK;
    case VALUE_STRING:
        if (item.kind != VALUE_STRING)
            return hearth_error(HEARTH_E_TEMPLATE, "'in <string>' requires string as left operand, not %s",
                                value_type_name(item));
        if (item.u.s->len == 0) {
            *out = true;
            return HEARTH_OK;
        }
        *out = false;
        for (size_t i = 0; i + item.u.s->len <= container.u.s->len; i++) {
            if (memcmp(container.u.s->data + i, item.u.s->data, item.u.s->len) == 0) {
                *out = true;
                break;
            }
        }
        return HEARTH_OK;
    case VALUE_LIST:
        *out = false;
        for (size_t i = 0; i < value_list_len(container); i++) {
            if (value_equal(value_list_at(container, i), item)) {
                *out = true;
                break;
            }
        }
        return HEARTH_OK;
    case VALUE_DICT:
    case VALUE_NAMESPACE:
        *out = item.kind == VALUE_STRING && value_dict_get(container, item.u.s->data, item.u.s->len);
        return HEARTH_OK;
    default:
        return hearth_error(HEARTH_E_TEMPLATE, "argument of type '%s' is not iterable",
                            value_type_name(container));
    }
}

hearth_status jrender_compare(int op, value a, value b, bool *out)
{
    switch (op) {
    case JCMP_EQ: *out = value_equal(a, b); return HEARTH_OK;
    case JCMP_NE: *out = !value_equal(a, b); return HEARTH_OK;
    case JCMP_IN:
    case JCMP_NOTIN: {
        hearth_status st = contains(b, a, out);
        if (op == JCMP_NOTIN) *out = !*out;
        return st;
    }
    default: break;
    }
    if (a.kind == VALUE_UNDEFINED) return jinja_undefined_error(a);
    if (b.kind == VALUE_UNDEFINED) return jinja_undefined_error(b);
    if ((a.kind == VALUE_FLOAT && isnan(a.u.f)) || (b.kind == VALUE_FLOAT && isnan(b.u.f))) {
        if (is_num(a) && is_num(b)) {
            *out = false;
            return HEARTH_OK;
        }
    }
    int c;
    hearth_status st = value_compare(a, b, &c);
    if (st != HEARTH_OK) {
        static const char *const sym[] = {"==", "!=", "<", "<=", ">", ">="};
        return hearth_error(HEARTH_E_TEMPLATE, "'%s' not supported between instances of '%s' and '%s'",
                            sym[op], value_type_name(a), value_type_name(b));
    }
    switch (op) {
    case JCMP_LT: *out = c < 0; break;
    case JCMP_LE: *out = c <= 0; break;
    case JCMP_GT: *out = c > 0; break;
    default: *out = c >= 0; break;
    }
    return HEARTH_OK;
}

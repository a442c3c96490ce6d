/*
 * jinja_tests.c -- the tests of Jinja ("x is name", "x is name(args)",
 * "x is name arg") with Python's notion of each type: bools are numbers,
 * strings and undefined values are iterable, and so on.
 */
#include "internal.h"

#include <string.h>

#include "jinja.h"
#include "unichar.h"
#include "utf8.h"

#define TEST(name) \
    static hearth_status test_##name(struct jrender *r, value self, const struct jargs *args, value *out)

static hearth_status no_args(const char *fn, const struct jargs *args)
{
    if (args->n_pos || args->n_kw)
        return hearth_error(HEARTH_E_TEMPLATE, "%s takes no arguments", fn);
    return HEARTH_OK;
}

static hearth_status test_result(const char *name, const struct jargs *args, bool result, value *out)
{
    hearth_status st = no_args(name, args);
    if (st == HEARTH_OK) *out = value_bool(result);
    return st;
}

TEST(defined) { (void)r; return test_result("defined", args, self.kind != VALUE_UNDEFINED, out); }
TEST(undefined) { (void)r; return test_result("undefined", args, self.kind == VALUE_UNDEFINED, out); }
TEST(none) { (void)r; return test_result("none", args, self.kind == VALUE_NULL, out); }
TEST(boolean) { (void)r; return test_result("boolean", args, self.kind == VALUE_BOOL, out); }
TEST(true) { (void)r; return test_result("true", args, self.kind == VALUE_BOOL && self.u.b, out); }
TEST(false) { (void)r; return test_result("false", args, self.kind == VALUE_BOOL && !self.u.b, out); }
TEST(integer) { (void)r; return test_result("integer", args, self.kind == VALUE_INT, out); }
TEST(float) { (void)r; return test_result("float", args, self.kind == VALUE_FLOAT, out); }
TEST(string) { (void)r; return test_result("string", args, self.kind == VALUE_STRING, out); }
TEST(mapping) { (void)r; return test_result("mapping", args, self.kind == VALUE_DICT, out); }
TEST(number)
{
    (void)r;
    return test_result("number", args, self.kind == VALUE_INT || self.kind == VALUE_FLOAT || self.kind == VALUE_BOOL, out);
}
TEST(iterable)
{
    (void)r;
    /* str, list, dict and undefined (which iterates as empty) */
    return test_result("iterable", args, self.kind == VALUE_STRING || self.kind == VALUE_LIST ||
                       self.kind == VALUE_DICT || self.kind == VALUE_UNDEFINED, out);
}
TEST(sequence)
{
    (void)r;
    return test_result("sequence", args, self.kind == VALUE_STRING || self.kind == VALUE_LIST ||
                       self.kind == VALUE_DICT, out);
}
TEST(callable) { (void)r; return test_result("callable", args, self.kind == VALUE_OBJECT, out); }
TEST(escaped) { (void)r; return test_result("escaped", args, false, out); }

static hearth_status text_case_test(struct jrender *r, value self, const struct jargs *args, const char *name, bool upper,
                                    value *out)
{
    hearth_status st = no_args(name, args);
    value s = value_undefined();
    if (st == HEARTH_OK) st = jinja_to_string(r, self, &s);
    if (st != HEARTH_OK) return st;
    /* Python: at least one cased character, and all cased ones in that case */
    bool cased = false, ok = true;
    for (size_t i = 0; i < s.u.s->len;) {
        uint32_t cp;
        size_t n = utf8_decode(s.u.s->data + i, s.u.s->len - i, &cp);
        if (n == 0) {
            cp = 0;
            n = 1;
        }
        if (uni_isupper(cp) || uni_islower(cp)) {
            cased = true;
            if (upper ? uni_islower(cp) : uni_isupper(cp)) ok = false;
        }
        i += n;
    }
    value_unref(s);
    *out = value_bool(cased && ok);
    return HEARTH_OK;
}

TEST(lower) { return text_case_test(r, self, args, "lower", false, out); }
TEST(upper) { return text_case_test(r, self, args, "upper", true, out); }

static hearth_status one_arg(const char *name, const struct jargs *args, const value **arg)
{
    static const char *const names[] = {"other", NULL};
    hearth_status st = jargs_bind(name, args, names, arg);
    if (st == HEARTH_OK && !arg[0]) st = hearth_error(HEARTH_E_TEMPLATE, "the '%s' test needs an argument", name);
    return st;
}

static hearth_status compare_test(const char *name, value self, const struct jargs *args,
                                  int op, value *out)
{
    const value *a[1];
    hearth_status st = one_arg(name, args, a);
    if (st != HEARTH_OK) return st;
    if (op == JCMP_EQ || op == JCMP_NE) {
        bool eq = value_equal(self, *a[0]);
        *out = value_bool(op == JCMP_EQ ? eq : !eq);
        return HEARTH_OK;
    }
    if (self.kind == VALUE_UNDEFINED) return jinja_undefined_error(self);
    if (a[0]->kind == VALUE_UNDEFINED) return jinja_undefined_error(*a[0]);
    int c;
    st = value_compare(self, *a[0], &c);
    if (st != HEARTH_OK) return st;
    bool res = op == JCMP_LT ? c < 0 : op == JCMP_LE ? c <= 0 : op == JCMP_GT ? c > 0 : c >= 0;
    *out = value_bool(res);
    return HEARTH_OK;
}

TEST(eq) { (void)r; return compare_test("eq", self, args, JCMP_EQ, out); }
TEST(ne) { (void)r; return compare_test("ne", self, args, JCMP_NE, out); }
TEST(lt) { (void)r; return compare_test("lt", self, args, JCMP_LT, out); }
TEST(le) { (void)r; return compare_test("le", self, args, JCMP_LE, out); }
TEST(gt) { (void)r; return compare_test("gt", self, args, JCMP_GT, out); }
TEST(ge) { (void)r; return compare_test("ge", self, args, JCMP_GE, out); }

TEST(sameas)
{
    (void)r;
    const value *a[1];
    hearth_status st = one_arg("sameas", args, a);
    if (st != HEARTH_OK) return st;
    const value o = *a[0];
    bool same = self.kind == o.kind;
    if (same) {
        switch (self.kind) {
        case VALUE_BOOL: same = self.u.b == o.u.b; break;
        case VALUE_INT: same = self.u.i == o.u.i; break;
        case VALUE_FLOAT: same = false; break;   /* distinct float objects */
        case VALUE_STRING: same = self.u.s == o.u.s; break;
        case VALUE_LIST: same = self.u.list == o.u.list; break;
        case VALUE_DICT:
        case VALUE_NAMESPACE: same = self.u.dict == o.u.dict; break;
        case VALUE_OBJECT: same = self.u.obj == o.u.obj; break;
        default: break;   /* None is None, Undefined objects differ */
        }
        if (self.kind == VALUE_UNDEFINED) same = false;
    }
    *out = value_bool(same);
    return HEARTH_OK;
}

static bool contains_bytes(const char *hay, size_t hay_len, const char *needle, size_t n)
{
    for (size_t i = 0; n <= hay_len && i <= hay_len - n; i++)
        if (memcmp(hay + i, needle, n) == 0) return true;
    return false;
}

TEST(in)
{
    (void)r;
    const value *a[1];
    hearth_status st = one_arg("in", args, a);
    if (st != HEARTH_OK) return st;
    value seq = *a[0];
    bool found = false;
    if (seq.kind == VALUE_STRING) {
        if (self.kind != VALUE_STRING)
            return hearth_error(HEARTH_E_TEMPLATE, "'in <string>' requires string as left operand, not %s",
                                value_type_name(self));
        found = self.u.s->len == 0 ||
                contains_bytes(seq.u.s->data, seq.u.s->len, self.u.s->data, self.u.s->len);
    } else if (seq.kind == VALUE_LIST) {
        for (size_t i = 0; i < value_list_len(seq) && !found; i++) found = value_equal(value_list_at(seq, i), self);
    } else if (seq.kind == VALUE_DICT) {
        found = self.kind == VALUE_STRING && value_dict_get(seq, self.u.s->data, self.u.s->len);
    } else if (seq.kind != VALUE_UNDEFINED) {
        return hearth_error(HEARTH_E_TEMPLATE, "argument of type '%s' is not iterable", value_type_name(seq));
    }
    *out = value_bool(found);
    return HEARTH_OK;
}

static hearth_status int_operand(const char *test, value v, int64_t *out)
{
    if (v.kind == VALUE_INT || v.kind == VALUE_BOOL) {
        *out = v.kind == VALUE_INT ? v.u.i : v.u.b;
        return HEARTH_OK;
    }
    return hearth_error(HEARTH_E_TEMPLATE, "the '%s' test needs an integer, got %s", test, value_type_name(v));
}

TEST(odd)
{
    (void)r;
    int64_t i = 0;
    hearth_status st = no_args("odd", args);
    if (st == HEARTH_OK) st = int_operand("odd", self, &i);
    if (st == HEARTH_OK) *out = value_bool(i % 2 != 0);
    return st;
}

TEST(even)
{
    (void)r;
    int64_t i = 0;
    hearth_status st = no_args("even", args);
    if (st == HEARTH_OK) st = int_operand("even", self, &i);
    if (st == HEARTH_OK) *out = value_bool(i % 2 == 0);
    return st;
}

TEST(divisibleby)
{
    (void)r;
    static const char *const names[] = {"num", NULL};
    const value *a[1];
    int64_t i = 0, d = 0;
    hearth_status st = jargs_bind("divisibleby", args, names, a);
    if (st == HEARTH_OK && !a[0]) st = hearth_error(HEARTH_E_TEMPLATE, "the 'divisibleby' test needs an argument");
    if (st == HEARTH_OK) st = int_operand("divisibleby", self, &i);
    if (st == HEARTH_OK) st = int_operand("divisibleby", *a[0], &d);
    if (st == HEARTH_OK && d == 0) st = hearth_error(HEARTH_E_TEMPLATE, "integer division or modulo by zero");
    if (st == HEARTH_OK) *out = value_bool(d == -1 || i % d == 0);
    return st;
}

TEST(filter)
{
    (void)r;
    const value *a[1];
    hearth_status st = jargs_bind("filter", args, (const char *const[]){"name", NULL}, a);
    if (st == HEARTH_OK) *out = value_bool(self.kind == VALUE_STRING && jinja_find_filter(self.u.s->data));
    (void)a;
    return st;
}

TEST(test)
{
    (void)r;
    const value *a[1];
    hearth_status st = jargs_bind("test", args, (const char *const[]){"name", NULL}, a);
    if (st == HEARTH_OK) *out = value_bool(self.kind == VALUE_STRING && jinja_find_test(self.u.s->data));
    (void)a;
    return st;
}


struct named_fn {
    const char *name;
    jinja_fn fn;
};

static const struct named_fn tests[] = {
    {"!=", test_ne}, {"<", test_lt}, {"<=", test_le}, {"==", test_eq}, {">", test_gt},
    {">=", test_ge}, {"boolean", test_boolean}, {"callable", test_callable},
    {"defined", test_defined}, {"divisibleby", test_divisibleby}, {"eq", test_eq},
    {"equalto", test_eq}, {"escaped", test_escaped}, {"even", test_even},
    {"false", test_false}, {"filter", test_filter}, {"float", test_float}, {"ge", test_ge},
    {"greaterthan", test_gt}, {"gt", test_gt}, {"in", test_in}, {"integer", test_integer},
    {"iterable", test_iterable}, {"le", test_le}, {"lessthan", test_lt}, {"lower", test_lower},
    {"lt", test_lt}, {"mapping", test_mapping}, {"ne", test_ne}, {"none", test_none},
    {"number", test_number}, {"odd", test_odd}, {"sameas", test_sameas},
    {"sequence", test_sequence}, {"string", test_string}, {"test", test_test},
    {"true", test_true}, {"undefined", test_undefined}, {"upper", test_upper},
};

jinja_fn jinja_find_test(const char *name)
{
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(tests); i++)
        if (!strcmp(tests[i].name, name)) return tests[i].fn;
    return NULL;
}

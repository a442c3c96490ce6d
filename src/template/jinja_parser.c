/*
 * jinja_parser.c -- tokens to the syntax tree of jinja.h, by recursive
 * descent with Jinja's grammar and operator precedence (lowest first):
 *
 *   a if b else c  |  or  |  and  |  not  |  == != < <= > >= in, not in
 *   + -  |  ~  |  * / // %  |  **  |  unary - +  |  .attr [item] (call)
 *   | filter, is test
 *
 * Filters bind tighter than every binary operator ("a + b | f" filters b),
 * and a unary minus applies before filters ("-1 | abs" is 1), as in Jinja.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja.h"

struct parser {
    struct jinja_template *t;
    const struct jtoken *toks;
    size_t n;
    size_t i;
    int depth;        /* nesting of expressions and statements */
    int loop_depth;   /* enclosing for loops (break and continue) */
    hearth_status status;
};

/* The open block a body belongs to, for "never closed" messages. */
struct opener {
    const char *tag;
    uint32_t pos;
    const char *const *ends;
};

static const struct jtoken *cur(const struct parser *p)
{
    return &p->toks[p->i];
}

static const struct jtoken *peek(const struct parser *p, size_t k)
{
    size_t j = p->i + k;
    return &p->toks[j < p->n ? j : p->n - 1];
}

static void advance(struct parser *p)
{
    if (p->i + 1 < p->n) p->i++;
}

static bool is_name(const struct jtoken *tok, const char *name)
{
    return tok->kind == JT_NAME && strcmp(tok->text, name) == 0;
}

static void describe(const struct jtoken *tok, char *buf, size_t size)
{
    static const char *const ops[] = {
        [JT_ADD] = "+", [JT_SUB] = "-", [JT_MUL] = "*", [JT_DIV] = "/", [JT_FLOORDIV] = "//",
        [JT_MOD] = "%", [JT_POW] = "**", [JT_TILDE] = "~", [JT_LBRACKET] = "[",
        [JT_RBRACKET] = "]", [JT_LPAREN] = "(", [JT_RPAREN] = ")", [JT_LBRACE] = "{",
        [JT_RBRACE] = "}", [JT_EQ] = "==", [JT_NE] = "!=", [JT_LT] = "<", [JT_LE] = "<=",
        [JT_GT] = ">", [JT_GE] = ">=", [JT_ASSIGN] = "=", [JT_DOT] = ".", [JT_COLON] = ":",
        [JT_PIPE] = "|", [JT_COMMA] = ",", [JT_SEMICOLON] = ";",
    };
    switch (tok->kind) {
    case JT_EOF: snprintf(buf, size, "end of template"); break;
    case JT_TEXT: snprintf(buf, size, "template text"); break;
    case JT_VAR_BEGIN: snprintf(buf, size, "'{{'"); break;
    case JT_VAR_END: snprintf(buf, size, "end of print statement '}}'"); break;
    case JT_BLOCK_BEGIN: snprintf(buf, size, "'{%%'"); break;
    case JT_BLOCK_END: snprintf(buf, size, "end of statement block '%%}'"); break;
    case JT_NAME: snprintf(buf, size, "'%.60s'", tok->text); break;
    case JT_STRING: snprintf(buf, size, "string literal"); break;
    case JT_INT:
    case JT_FLOAT: snprintf(buf, size, "number"); break;
    default: snprintf(buf, size, "'%s'", ops[tok->kind] ? ops[tok->kind] : "?"); break;
    }
}

static void *fail(struct parser *p, uint32_t pos, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void *fail(struct parser *p, uint32_t pos, const char *fmt, ...)
{
    if (p->status != HEARTH_OK) return NULL;   /* keep the first error */
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->status = jinja_error_at(p->t, HEARTH_E_FORMAT, pos, "%s", msg);
    return NULL;
}

static void *fail_nomem(struct parser *p)
{
    if (p->status == HEARTH_OK) p->status = HEARTH_E_NOMEM;
    return NULL;
}

static void *unexpected(struct parser *p, const char *expected)
{
    char what[96];
    describe(cur(p), what, sizeof what);
    if (expected) return fail(p, cur(p)->pos, "unexpected %s, expected %s", what, expected);
    return fail(p, cur(p)->pos, "unexpected %s", what);
}

static bool expect(struct parser *p, enum jtok kind, const char *what)
{
    if (cur(p)->kind == kind) {
        advance(p);
        return true;
    }
    unexpected(p, what);
    return false;
}

static struct jnode *new_node(struct parser *p, enum jnode_kind kind, uint32_t pos)
{
    struct jnode *n = jarena_alloc(&p->t->arena, sizeof *n);
    if (!n) return fail_nomem(p);
    n->kind = kind;
    n->pos = pos;
    return n;
}

/* Growable node arrays in the arena (a grown array leaves its old copy
 * behind; templates are small). */
struct nvec {
    struct jnode **items;
    size_t len, cap;
};

static bool nvec_push(struct parser *p, struct nvec *v, struct jnode *node)
{
    if (v->len == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        struct jnode **items = jarena_alloc(&p->t->arena, cap * sizeof *items);
        if (!items) {
            fail_nomem(p);
            return false;
        }
        if (v->len) memcpy(items, v->items, v->len * sizeof *items);
        v->items = items;
        v->cap = cap;
    }
    v->items[v->len++] = node;
    return true;
}

static struct jnode_list nvec_list(const struct nvec *v)
{
    struct jnode_list l = {v->items, v->len};
    return l;
}

static bool add_constant(struct parser *p, value v)
{
    struct jinja_template *t = p->t;
    if (t->n_constants == t->cap_constants) {
        size_t cap = t->cap_constants ? t->cap_constants * 2 : 32;
        value *c = hearth_realloc(t->constants, cap * sizeof *c, "template constants");
        if (!c) {
            value_unref(v);
            fail_nomem(p);
            return false;
        }
        t->constants = c;
        t->cap_constants = cap;
    }
    value_make_static(v);
    t->constants[t->n_constants++] = v;
    return true;
}

static struct jnode *new_const(struct parser *p, uint32_t pos, value v)
{
    struct jnode *n = new_node(p, JN_CONST, pos);
    if (!n) {
        value_unref(v);
        return NULL;
    }
    if (!add_constant(p, v)) return NULL;
    n->constant = v;
    return n;
}

static struct jnode *new_string_const(struct parser *p, enum jnode_kind kind, uint32_t pos,
                                      const char *s, size_t len)
{
    value v;
    if (value_new_string(s, len, &v) != HEARTH_OK) return fail_nomem(p);
    struct jnode *n = new_const(p, pos, v);
    if (n) n->kind = kind;
    return n;
}

static bool enter(struct parser *p)
{
    if (++p->depth > JINJA_MAX_NESTING) {
        fail(p, cur(p)->pos, "template nested more than %d levels deep", JINJA_MAX_NESTING);
        return false;
    }
    return true;
}

static void leave(struct parser *p)
{
    p->depth--;
}

/* ---- expressions ------------------------------------------------------- */

static struct jnode *parse_expression(struct parser *p, bool with_condexpr);
static struct jnode *parse_unary(struct parser *p, bool with_filter);
static struct jnode *parse_primary(struct parser *p, bool with_namespace);
static struct jnode *parse_postfix(struct parser *p, struct jnode *node);
static struct jnode *parse_filter_chain(struct parser *p, struct jnode *node, bool start_inline);

static bool is_tuple_end(const struct parser *p, const char *extra_end)
{
    enum jtok k = cur(p)->kind;
    if (k == JT_VAR_END || k == JT_BLOCK_END || k == JT_RPAREN) return true;
    return extra_end && is_name(cur(p), extra_end);
}

/* Comma-separated expressions; a tuple when there is a comma.  simplified:
 * only primaries (assignment targets), with namespace references when
 * with_namespace. */
static struct jnode *parse_tuple(struct parser *p, bool simplified, bool with_condexpr,
                                 const char *extra_end, bool explicit_parens, bool with_namespace)
{
    uint32_t pos = cur(p)->pos;
    struct nvec items = {0};
    bool is_tuple = false;
    for (;;) {
        if (items.len && !expect(p, JT_COMMA, "','")) return NULL;
        if (is_tuple_end(p, extra_end)) break;
        struct jnode *e = simplified ? parse_primary(p, with_namespace) : parse_expression(p, with_condexpr);
        if (!e || !nvec_push(p, &items, e)) return NULL;
        if (cur(p)->kind == JT_COMMA) is_tuple = true;
        else break;
    }
    if (!is_tuple) {
        if (items.len) return items.items[0];
        if (!explicit_parens) return unexpected(p, "an expression");
    }
    struct jnode *n = new_node(p, JN_TUPLE, pos);
    if (n) n->list = nvec_list(&items);
    return n;
}

static struct jnode *parse_list_literal(struct parser *p)
{
    struct jnode *n = new_node(p, JN_LIST, cur(p)->pos);
    if (!n) return NULL;
    advance(p);
    struct nvec items = {0};
    while (cur(p)->kind != JT_RBRACKET) {
        if (items.len && !expect(p, JT_COMMA, "',' or ']'")) return NULL;
        if (cur(p)->kind == JT_RBRACKET) break;
        struct jnode *e = parse_expression(p, true);
        if (!e || !nvec_push(p, &items, e)) return NULL;
    }
    advance(p);
    n->list = nvec_list(&items);
    return n;
}

static struct jnode *parse_dict_literal(struct parser *p)
{
    struct jnode *n = new_node(p, JN_DICT, cur(p)->pos);
    if (!n) return NULL;
    advance(p);
    struct nvec keys = {0}, vals = {0};
    while (cur(p)->kind != JT_RBRACE) {
        if (keys.len && !expect(p, JT_COMMA, "',' or '}'")) return NULL;
        if (cur(p)->kind == JT_RBRACE) break;
        struct jnode *k = parse_expression(p, true);
        if (!k || !expect(p, JT_COLON, "':'")) return NULL;
        struct jnode *v = parse_expression(p, true);
        if (!v || !nvec_push(p, &keys, k) || !nvec_push(p, &vals, v)) return NULL;
    }
    advance(p);
    n->list = nvec_list(&keys);
    n->list2 = nvec_list(&vals);
    return n;
}

static struct jnode *parse_primary(struct parser *p, bool with_namespace)
{
    const struct jtoken *tok = cur(p);
    switch (tok->kind) {
    case JT_NAME: {
        advance(p);
        const char *s = tok->text;
        if (!strcmp(s, "true") || !strcmp(s, "True")) return new_const(p, tok->pos, value_bool(true));
        if (!strcmp(s, "false") || !strcmp(s, "False")) return new_const(p, tok->pos, value_bool(false));
        if (!strcmp(s, "none") || !strcmp(s, "None")) return new_const(p, tok->pos, value_null());
        if (with_namespace && cur(p)->kind == JT_DOT) {
            advance(p);
            if (cur(p)->kind != JT_NAME) return unexpected(p, "an attribute name");
            struct jnode *n = new_node(p, JN_NSREF, tok->pos);
            if (!n) return NULL;
            n->name = s;
            n->attr = cur(p)->text;
            advance(p);
            return n;
        }
        struct jnode *n = new_node(p, JN_NAME, tok->pos);
        if (n) n->name = s;
        return n;
    }
    case JT_STRING: {
        /* adjacent literals concatenate */
        size_t total = 0, j = p->i;
        while (j < p->n && p->toks[j].kind == JT_STRING) total += p->toks[j++].len;
        char *buf = hearth_malloc(total + 1, "a string literal");
        if (!buf) return fail_nomem(p);
        size_t off = 0;
        while (cur(p)->kind == JT_STRING) {
            memcpy(buf + off, cur(p)->text, cur(p)->len);
            off += cur(p)->len;
            advance(p);
        }
        struct jnode *n = new_string_const(p, JN_CONST, tok->pos, buf, total);
        free(buf);
        return n;
    }
    case JT_INT:
        advance(p);
        return new_const(p, tok->pos, value_int(tok->i));
    case JT_FLOAT:
        advance(p);
        return new_const(p, tok->pos, value_float(tok->f));
    case JT_LPAREN: {
        advance(p);
        if (!enter(p)) return NULL;
        struct jnode *n = parse_tuple(p, false, true, NULL, true, false);
        leave(p);
        if (!n || !expect(p, JT_RPAREN, "')'")) return NULL;
        return n;
    }
    case JT_LBRACKET: {
        if (!enter(p)) return NULL;
        struct jnode *n = parse_list_literal(p);
        leave(p);
        return n;
    }
    case JT_LBRACE: {
        if (!enter(p)) return NULL;
        struct jnode *n = parse_dict_literal(p);
        leave(p);
        return n;
    }
    default:
        return unexpected(p, NULL);
    }
}

/* (args, name=value, ...) into list and kwargs of n. */
static bool parse_call_args(struct parser *p, struct jnode *n)
{
    uint32_t open = cur(p)->pos;
    if (!expect(p, JT_LPAREN, "'('")) return false;
    struct nvec args = {0};
    struct jkwarg *kw = NULL;
    size_t n_kw = 0, cap_kw = 0;
    bool need_comma = false;
    while (cur(p)->kind != JT_RPAREN) {
        if (need_comma) {
            if (!expect(p, JT_COMMA, "',' or ')'")) return false;
            if (cur(p)->kind == JT_RPAREN) break;
        }
        if (cur(p)->kind == JT_MUL || cur(p)->kind == JT_POW) {
            fail(p, cur(p)->pos, "*args and **kwargs in calls are not supported");
            return false;
        }
        if (cur(p)->kind == JT_NAME && peek(p, 1)->kind == JT_ASSIGN) {
            const char *name = cur(p)->text;
            advance(p);
            advance(p);
            struct jnode *v = parse_expression(p, true);
            if (!v) return false;
            if (n_kw == cap_kw) {
                size_t cap = cap_kw ? cap_kw * 2 : 4;
                struct jkwarg *k = jarena_alloc(&p->t->arena, cap * sizeof *k);
                if (!k) {
                    fail_nomem(p);
                    return false;
                }
                if (n_kw) memcpy(k, kw, n_kw * sizeof *k);
                kw = k;
                cap_kw = cap;
            }
            kw[n_kw].name = name;
            kw[n_kw].value = v;
            n_kw++;
        } else {
            if (n_kw) {
                fail(p, open, "invalid syntax for function call expression: "
                              "a positional argument follows a keyword argument");
                return false;
            }
            struct jnode *v = parse_expression(p, true);
            if (!v || !nvec_push(p, &args, v)) return false;
        }
        need_comma = true;
    }
    advance(p);
    n->list = nvec_list(&args);
    n->kwargs = kw;
    n->n_kwargs = n_kw;
    return true;
}

/* A filter or test name, which may be dotted. */
static const char *parse_dotted_name(struct parser *p)
{
    if (cur(p)->kind != JT_NAME) return unexpected(p, "a name");
    const char *name = cur(p)->text;
    advance(p);
    while (cur(p)->kind == JT_DOT && peek(p, 1)->kind == JT_NAME) {
        advance(p);
        size_t a = strlen(name), b = cur(p)->len;
        char *joined = jarena_alloc(&p->t->arena, a + b + 2);
        if (!joined) return fail_nomem(p);
        memcpy(joined, name, a);
        joined[a] = '.';
        memcpy(joined + a + 1, cur(p)->text, b + 1);
        name = joined;
        advance(p);
    }
    return name;
}

static struct jnode *parse_subscribed(struct parser *p)
{
    uint32_t pos = cur(p)->pos;
    struct jnode *parts[3] = {NULL, NULL, NULL};
    if (cur(p)->kind != JT_COLON) {
        struct jnode *e = parse_expression(p, true);
        if (!e) return NULL;
        if (cur(p)->kind != JT_COLON) return e;
        parts[0] = e;
    }
    advance(p);   /* the first ':' */
    if (cur(p)->kind != JT_COLON && cur(p)->kind != JT_RBRACKET && cur(p)->kind != JT_COMMA) {
        parts[1] = parse_expression(p, true);
        if (!parts[1]) return NULL;
    }
    if (cur(p)->kind == JT_COLON) {
        advance(p);
        if (cur(p)->kind != JT_RBRACKET && cur(p)->kind != JT_COMMA) {
            parts[2] = parse_expression(p, true);
            if (!parts[2]) return NULL;
        }
    }
    struct jnode *n = new_node(p, JN_SLICE, pos);
    if (!n) return NULL;
    n->a = parts[0];
    n->b = parts[1];
    n->c = parts[2];
    return n;
}

static struct jnode *parse_postfix(struct parser *p, struct jnode *node)
{
    while (node) {
        const struct jtoken *tok = cur(p);
        if (tok->kind == JT_DOT) {
            advance(p);
            const struct jtoken *attr = cur(p);
            if (attr->kind == JT_NAME) {
                struct jnode *n = new_node(p, JN_GETATTR, tok->pos);
                if (!n) return NULL;
                n->a = node;
                n->name = attr->text;
                advance(p);
                node = n;
            } else if (attr->kind == JT_INT) {
                struct jnode *n = new_node(p, JN_GETITEM, tok->pos);
                struct jnode *k = n ? new_const(p, attr->pos, value_int(attr->i)) : NULL;
                if (!k) return NULL;
                n->a = node;
                n->b = k;
                advance(p);
                node = n;
            } else {
                return unexpected(p, "a name or number after '.'");
            }
        } else if (tok->kind == JT_LBRACKET) {
            advance(p);
            if (!enter(p)) return NULL;
            struct nvec args = {0};
            while (cur(p)->kind != JT_RBRACKET) {
                if (args.len && !expect(p, JT_COMMA, "',' or ']'")) return NULL;
                struct jnode *e = parse_subscribed(p);
                if (!e || !nvec_push(p, &args, e)) return NULL;
            }
            leave(p);
            advance(p);
            if (args.len == 0) return fail(p, tok->pos, "expected a subscript expression");
            struct jnode *arg = args.items[0];
            if (args.len > 1) {
                arg = new_node(p, JN_TUPLE, tok->pos);
                if (!arg) return NULL;
                arg->list = nvec_list(&args);
            }
            struct jnode *n = new_node(p, JN_GETITEM, tok->pos);
            if (!n) return NULL;
            n->a = node;
            n->b = arg;
            node = n;
        } else if (tok->kind == JT_LPAREN) {
            /* errors in a call point at the start of what is called */
            struct jnode *n = new_node(p, JN_CALL, node->pos);
            if (!n) return NULL;
            n->a = node;
            if (!parse_call_args(p, n)) return NULL;
            node = n;
        } else {
            break;
        }
    }
    return node;
}

static struct jnode *parse_filter_chain(struct parser *p, struct jnode *node, bool start_inline)
{
    while (cur(p)->kind == JT_PIPE || start_inline) {
        if (!start_inline) advance(p);
        start_inline = false;
        uint32_t pos = cur(p)->pos;
        const char *name = parse_dotted_name(p);
        if (!name) return NULL;
        struct jnode *n = new_node(p, JN_FILTER, pos);
        if (!n) return NULL;
        n->a = node;
        n->name = name;
        if (cur(p)->kind == JT_LPAREN && !parse_call_args(p, n)) return NULL;
        node = n;
    }
    return node;
}

static struct jnode *parse_test(struct parser *p, struct jnode *node)
{
    uint32_t pos = cur(p)->pos;
    advance(p);   /* is */
    bool negated = false;
    if (is_name(cur(p), "not")) {
        negated = true;
        advance(p);
    }
    const char *name = parse_dotted_name(p);
    if (!name) return NULL;
    struct jnode *n = new_node(p, JN_TEST, pos);
    if (!n) return NULL;
    n->a = node;
    n->name = name;
    const struct jtoken *tok = cur(p);
    if (tok->kind == JT_LPAREN) {
        if (!parse_call_args(p, n)) return NULL;
    } else if ((tok->kind == JT_NAME || tok->kind == JT_STRING || tok->kind == JT_INT ||
                tok->kind == JT_FLOAT || tok->kind == JT_LBRACKET || tok->kind == JT_LBRACE) &&
               !is_name(tok, "else") && !is_name(tok, "or") && !is_name(tok, "and")) {
        /* one argument without parentheses: "x is divisibleby 3" */
        if (is_name(tok, "is")) return fail(p, tok->pos, "tests cannot be chained with 'is'");
        struct jnode *arg = parse_postfix(p, parse_primary(p, false));
        struct nvec args = {0};
        if (!arg || !nvec_push(p, &args, arg)) return NULL;
        n->list = nvec_list(&args);
    }
    if (!negated) return n;
    struct jnode *not = new_node(p, JN_NOT, pos);
    if (not) not->a = n;
    return not;
}

static struct jnode *parse_filter_expr(struct parser *p, struct jnode *node)
{
    while (node) {
        if (cur(p)->kind == JT_PIPE) {
            node = parse_filter_chain(p, node, false);
        } else if (is_name(cur(p), "is")) {
            node = parse_test(p, node);
        } else if (cur(p)->kind == JT_LPAREN) {
            struct jnode *n = new_node(p, JN_CALL, cur(p)->pos);
            if (!n) return NULL;
            n->a = node;
            if (!parse_call_args(p, n)) return NULL;
            node = n;
        } else {
            break;
        }
    }
    return node;
}

static struct jnode *parse_unary(struct parser *p, bool with_filter)
{
    const struct jtoken *tok = cur(p);
    struct jnode *node;
    if (tok->kind == JT_SUB || tok->kind == JT_ADD) {
        advance(p);
        if (!enter(p)) return NULL;
        struct jnode *operand = parse_unary(p, false);
        leave(p);
        if (!operand) return NULL;
        node = new_node(p, tok->kind == JT_SUB ? JN_NEG : JN_POS, tok->pos);
        if (!node) return NULL;
        node->a = operand;
    } else {
        node = parse_primary(p, false);
    }
    node = parse_postfix(p, node);
    if (with_filter) node = parse_filter_expr(p, node);
    return node;
}

static struct jnode *binary(struct parser *p, enum jnode_kind kind, int op, uint32_t pos,
                            struct jnode *a, struct jnode *b)
{
    if (!a || !b) return NULL;
    struct jnode *n = new_node(p, kind, pos);
    if (!n) return NULL;
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static struct jnode *parse_pow(struct parser *p)
{
    struct jnode *left = parse_unary(p, true);
    while (left && cur(p)->kind == JT_POW) {
        uint32_t pos = cur(p)->pos;
        advance(p);
        left = binary(p, JN_BINOP, JOP_POW, pos, left, parse_unary(p, true));
    }
    return left;
}

static struct jnode *parse_math2(struct parser *p)
{
    struct jnode *left = parse_pow(p);
    while (left) {
        enum jtok k = cur(p)->kind;
        int op = k == JT_MUL ? JOP_MUL : k == JT_DIV ? JOP_DIV : k == JT_FLOORDIV ? JOP_FLOORDIV
               : k == JT_MOD ? JOP_MOD : -1;
        if (op < 0) break;
        uint32_t pos = cur(p)->pos;
        advance(p);
        left = binary(p, JN_BINOP, op, pos, left, parse_pow(p));
    }
    return left;
}

static struct jnode *parse_concat(struct parser *p)
{
    uint32_t pos = cur(p)->pos;
    struct jnode *first = parse_math2(p);
    if (!first || cur(p)->kind != JT_TILDE) return first;
    struct nvec parts = {0};
    if (!nvec_push(p, &parts, first)) return NULL;
    while (cur(p)->kind == JT_TILDE) {
        advance(p);
        struct jnode *e = parse_math2(p);
        if (!e || !nvec_push(p, &parts, e)) return NULL;
    }
    struct jnode *n = new_node(p, JN_CONCAT, pos);
    if (n) n->list = nvec_list(&parts);
    return n;
}

static struct jnode *parse_math1(struct parser *p)
{
    struct jnode *left = parse_concat(p);
    while (left && (cur(p)->kind == JT_ADD || cur(p)->kind == JT_SUB)) {
        int op = cur(p)->kind == JT_ADD ? JOP_ADD : JOP_SUB;
        uint32_t pos = cur(p)->pos;
        advance(p);
        left = binary(p, JN_BINOP, op, pos, left, parse_concat(p));
    }
    return left;
}

static struct jnode *parse_compare(struct parser *p)
{
    uint32_t pos = cur(p)->pos;
    struct jnode *expr = parse_math1(p);
    if (!expr) return NULL;
    struct nvec operands = {0};
    uint8_t ops[64];
    for (;;) {
        int op;
        switch (cur(p)->kind) {
        case JT_EQ: op = JCMP_EQ; break;
        case JT_NE: op = JCMP_NE; break;
        case JT_LT: op = JCMP_LT; break;
        case JT_LE: op = JCMP_LE; break;
        case JT_GT: op = JCMP_GT; break;
        case JT_GE: op = JCMP_GE; break;
        default:
            if (is_name(cur(p), "in")) op = JCMP_IN;
            else if (is_name(cur(p), "not") && is_name(peek(p, 1), "in")) op = JCMP_NOTIN;
            else op = -1;
        }
        if (op < 0) break;
        if (operands.len == HEARTH_ARRAY_LEN(ops))
            return fail(p, cur(p)->pos, "more than %zu chained comparisons", HEARTH_ARRAY_LEN(ops));
        advance(p);
        if (op == JCMP_NOTIN) advance(p);
        struct jnode *e = parse_math1(p);
        if (!e) return NULL;
        ops[operands.len] = (uint8_t)op;
        if (!nvec_push(p, &operands, e)) return NULL;
    }
    if (operands.len == 0) return expr;
    struct jnode *n = new_node(p, JN_COMPARE, pos);
    if (!n) return NULL;
    n->a = expr;
    n->list = nvec_list(&operands);
    n->cmp_ops = jarena_alloc(&p->t->arena, operands.len);
    if (!n->cmp_ops) return fail_nomem(p);
    memcpy(n->cmp_ops, ops, operands.len);
    return n;
}

static struct jnode *parse_not(struct parser *p)
{
    if (!is_name(cur(p), "not")) return parse_compare(p);
    uint32_t pos = cur(p)->pos;
    advance(p);
    if (!enter(p)) return NULL;
    struct jnode *operand = parse_not(p);
    leave(p);
    if (!operand) return NULL;
    struct jnode *n = new_node(p, JN_NOT, pos);
    if (n) n->a = operand;
    return n;
}

static struct jnode *parse_and(struct parser *p)
{
    struct jnode *left = parse_not(p);
    while (left && is_name(cur(p), "and")) {
        uint32_t pos = cur(p)->pos;
        advance(p);
        left = binary(p, JN_AND, 0, pos, left, parse_not(p));
    }
    return left;
}

static struct jnode *parse_or(struct parser *p)
{
    struct jnode *left = parse_and(p);
    while (left && is_name(cur(p), "or")) {
        uint32_t pos = cur(p)->pos;
        advance(p);
        left = binary(p, JN_OR, 0, pos, left, parse_and(p));
    }
    return left;
}

static struct jnode *parse_condexpr(struct parser *p)
{
    struct jnode *expr = parse_or(p);
    while (expr && is_name(cur(p), "if")) {
        uint32_t pos = cur(p)->pos;
        advance(p);
        struct jnode *test = parse_or(p);
        if (!test) return NULL;
        struct jnode *otherwise = NULL;
        if (is_name(cur(p), "else")) {
            advance(p);
            if (!enter(p)) return NULL;
            otherwise = parse_condexpr(p);
            leave(p);
            if (!otherwise) return NULL;
        }
        struct jnode *n = new_node(p, JN_COND, pos);
        if (!n) return NULL;
        n->a = expr;
        n->b = test;
        n->c = otherwise;
        expr = n;
    }
    return expr;
}

static struct jnode *parse_expression(struct parser *p, bool with_condexpr)
{
    if (!enter(p)) return NULL;
    struct jnode *n = with_condexpr ? parse_condexpr(p) : parse_or(p);
    leave(p);
    return n;
}

/* ---- statements -------------------------------------------------------- */

static bool parse_body(struct parser *p, const struct opener *op, struct jnode_list *out);

/* The "%}" that ends a statement's header (a ':' before it is allowed, for
 * Python habits). */
static bool end_of_tag(struct parser *p)
{
    if (cur(p)->kind == JT_COLON) advance(p);
    return expect(p, JT_BLOCK_END, "end of statement block '%}'");
}

/* After parse_body stopped at "{% NAME": consume NAME and the "%}". */
static bool close_tag(struct parser *p)
{
    advance(p);
    return end_of_tag(p);
}

static bool valid_target(struct parser *p, struct jnode *t, bool allow_nsref)
{
    if (t->kind == JN_NAME || (allow_nsref && t->kind == JN_NSREF)) return true;
    fail(p, t->pos, "cannot assign to this expression (expected a variable name%s)",
         allow_nsref ? " or namespace.attribute" : "");
    return false;
}

/* Assignment targets: one name, or several separated by commas. */
static bool parse_targets(struct parser *p, const char *extra_end, bool with_namespace,
                          struct jnode_list *out)
{
    struct jnode *t = parse_tuple(p, true, true, extra_end, false, with_namespace);
    if (!t) return false;
    if (t->kind == JN_TUPLE) {
        if (t->list.len == 0) {
            fail(p, t->pos, "expected a variable name");
            return false;
        }
        for (size_t i = 0; i < t->list.len; i++)
            if (!valid_target(p, t->list.items[i], with_namespace)) return false;
        *out = t->list;
        return true;
    }
    if (!valid_target(p, t, with_namespace)) return false;
    struct nvec v = {0};
    if (!nvec_push(p, &v, t)) return false;
    *out = nvec_list(&v);
    return true;
}

static struct jnode *parse_for(struct parser *p, uint32_t pos)
{
    static const char *const body_ends[] = {"endfor", "else", NULL};
    static const char *const else_ends[] = {"endfor", NULL};
    struct jnode *n = new_node(p, JN_FOR, pos);
    if (!n || !parse_targets(p, "in", false, &n->list)) return NULL;
    if (!is_name(cur(p), "in")) return unexpected(p, "'in'");
    advance(p);
    n->a = parse_tuple(p, false, false, "recursive", false, false);
    if (!n->a) return NULL;
    if (is_name(cur(p), "if")) {
        advance(p);
        n->b = parse_expression(p, true);
        if (!n->b) return NULL;
    }
    if (is_name(cur(p), "recursive"))
        return fail(p, cur(p)->pos, "recursive loops are not supported");
    if (!end_of_tag(p)) return NULL;
    struct opener op = {"for", pos, body_ends};
    p->loop_depth++;
    bool ok = parse_body(p, &op, &n->body);
    p->loop_depth--;
    if (!ok) return NULL;
    if (is_name(cur(p), "else")) {
        op.ends = else_ends;
        if (!close_tag(p) || !parse_body(p, &op, &n->orelse)) return NULL;
    }
    return close_tag(p) ? n : NULL;
}

static struct jnode *parse_if(struct parser *p, uint32_t pos)
{
    static const char *const body_ends[] = {"elif", "else", "endif", NULL};
    static const char *const else_ends[] = {"endif", NULL};
    struct jnode *first = new_node(p, JN_IF, pos);
    struct opener op = {"if", pos, body_ends};
    /* An elif becomes an IF (op = 1) alone in the else branch of the one
     * before it; the chain is built and later run iteratively, so long
     * elif chains need no recursion. */
    for (struct jnode *n = first; n;) {
        n->a = parse_tuple(p, false, false, NULL, false, false);
        if (!n->a || !end_of_tag(p) || !parse_body(p, &op, &n->body)) return NULL;
        if (is_name(cur(p), "elif")) {
            struct jnode *elif = new_node(p, JN_IF, cur(p)->pos);
            struct nvec v = {0};
            if (!elif || !nvec_push(p, &v, elif)) return NULL;
            elif->op = 1;
            n->orelse = nvec_list(&v);
            advance(p);
            n = elif;
            continue;
        }
        if (is_name(cur(p), "else")) {
            op.ends = else_ends;
            if (!close_tag(p) || !parse_body(p, &op, &n->orelse)) return NULL;
        }
        return close_tag(p) ? first : NULL;
    }
    return NULL;
}

static struct jnode *parse_set(struct parser *p, uint32_t pos)
{
    static const char *const ends[] = {"endset", NULL};
    struct jnode_list targets;
    if (!parse_targets(p, NULL, true, &targets)) return NULL;
    if (cur(p)->kind == JT_ASSIGN) {
        advance(p);
        struct jnode *n = new_node(p, JN_SET, pos);
        if (!n) return NULL;
        n->list = targets;
        n->a = parse_tuple(p, false, true, NULL, false, false);
        if (!n->a || !end_of_tag(p)) return NULL;
        return n;
    }
    if (targets.len != 1) return unexpected(p, "'='");
    struct jnode *n = new_node(p, JN_SET_BLOCK, pos);
    if (!n) return NULL;
    n->list = targets;
    if (cur(p)->kind == JT_PIPE) {
        n->a = parse_filter_chain(p, NULL, false);
        if (!n->a) return NULL;
    }
    if (!end_of_tag(p)) return NULL;
    struct opener op = {"set", pos, ends};
    if (!parse_body(p, &op, &n->body)) return NULL;
    return close_tag(p) ? n : NULL;
}

/* (name, name=default, ...) of a macro or call block. */
static bool parse_signature(struct parser *p, struct jnode *n)
{
    if (!expect(p, JT_LPAREN, "'('")) return false;
    struct nvec params = {0}, defaults = {0};
    while (cur(p)->kind != JT_RPAREN) {
        if (params.len && !expect(p, JT_COMMA, "',' or ')'")) return false;
        if (cur(p)->kind != JT_NAME) {
            unexpected(p, "a parameter name");
            return false;
        }
        struct jnode *param = new_node(p, JN_NAME, cur(p)->pos);
        if (!param) return false;
        param->name = cur(p)->text;
        advance(p);
        if (cur(p)->kind == JT_ASSIGN) {
            advance(p);
            struct jnode *d = parse_expression(p, true);
            if (!d || !nvec_push(p, &defaults, d)) return false;
        } else if (defaults.len) {
            fail(p, param->pos, "non-default parameter follows default parameter");
            return false;
        }
        if (!nvec_push(p, &params, param)) return false;
    }
    advance(p);
    n->list = nvec_list(&params);
    n->list2 = nvec_list(&defaults);
    return true;
}

static struct jnode *parse_macro(struct parser *p, uint32_t pos)
{
    static const char *const ends[] = {"endmacro", NULL};
    struct jnode *n = new_node(p, JN_MACRO, pos);
    if (!n) return NULL;
    if (cur(p)->kind != JT_NAME) return unexpected(p, "a macro name");
    n->name = cur(p)->text;
    advance(p);
    if (!parse_signature(p, n) || !end_of_tag(p)) return NULL;
    struct opener op = {"macro", pos, ends};
    int saved_loops = p->loop_depth;
    p->loop_depth = 0;
    bool ok = parse_body(p, &op, &n->body);
    p->loop_depth = saved_loops;
    return ok && close_tag(p) ? n : NULL;
}

static struct jnode *parse_call_block(struct parser *p, uint32_t pos)
{
    static const char *const ends[] = {"endcall", NULL};
    struct jnode *n = new_node(p, JN_CALL_BLOCK, pos);
    if (!n) return NULL;
    if (cur(p)->kind == JT_LPAREN && !parse_signature(p, n)) return NULL;
    n->a = parse_expression(p, true);
    if (!n->a) return NULL;
    if (n->a->kind != JN_CALL) return fail(p, n->a->pos, "expected a macro call after 'call'");
    if (!end_of_tag(p)) return NULL;
    struct opener op = {"call", pos, ends};
    int saved_loops = p->loop_depth;
    p->loop_depth = 0;
    bool ok = parse_body(p, &op, &n->body);
    p->loop_depth = saved_loops;
    return ok && close_tag(p) ? n : NULL;
}

static struct jnode *parse_filter_block(struct parser *p, uint32_t pos)
{
    static const char *const ends[] = {"endfilter", NULL};
    struct jnode *n = new_node(p, JN_FILTER_BLOCK, pos);
    if (!n) return NULL;
    n->a = parse_filter_chain(p, NULL, true);
    if (!n->a || !end_of_tag(p)) return NULL;
    struct opener op = {"filter", pos, ends};
    return parse_body(p, &op, &n->body) && close_tag(p) ? n : NULL;
}

static struct jnode *parse_with(struct parser *p, uint32_t pos)
{
    static const char *const ends[] = {"endwith", NULL};
    struct jnode *n = new_node(p, JN_WITH, pos);
    if (!n) return NULL;
    struct nvec targets = {0}, values = {0};
    while (cur(p)->kind != JT_BLOCK_END) {
        if (targets.len && !expect(p, JT_COMMA, "','")) return NULL;
        if (cur(p)->kind != JT_NAME) return unexpected(p, "a variable name");
        struct jnode *t = new_node(p, JN_NAME, cur(p)->pos);
        if (!t) return NULL;
        t->name = cur(p)->text;
        advance(p);
        if (!expect(p, JT_ASSIGN, "'='")) return NULL;
        struct jnode *v = parse_expression(p, true);
        if (!v || !nvec_push(p, &targets, t) || !nvec_push(p, &values, v)) return NULL;
    }
    n->list = nvec_list(&targets);
    n->list2 = nvec_list(&values);
    if (!end_of_tag(p)) return NULL;
    struct opener op = {"with", pos, ends};
    return parse_body(p, &op, &n->body) && close_tag(p) ? n : NULL;
}

static struct jnode *parse_simple_body(struct parser *p, uint32_t pos, const char *tag,
                                       const char *const *ends)
{
    struct jnode *n = new_node(p, JN_SCOPE, pos);
    if (!n || !end_of_tag(p)) return NULL;
    struct opener op = {tag, pos, ends};
    return parse_body(p, &op, &n->body) && close_tag(p) ? n : NULL;
}

static struct jnode *parse_print_tag(struct parser *p, uint32_t pos)
{
    struct jnode *n = new_node(p, JN_SCOPE, pos);
    if (!n) return NULL;
    struct nvec prints = {0};
    while (cur(p)->kind != JT_BLOCK_END) {
        if (prints.len && !expect(p, JT_COMMA, "','")) return NULL;
        struct jnode *out = new_node(p, JN_PRINT, cur(p)->pos);
        if (!out) return NULL;
        out->a = parse_expression(p, true);
        if (!out->a || !nvec_push(p, &prints, out)) return NULL;
    }
    n->body = nvec_list(&prints);
    return end_of_tag(p) ? n : NULL;
}

static bool is_end_word(const char *name)
{
    static const char *const words[] = {
        "endfor", "endif", "elif", "else", "endset", "endmacro", "endcall", "endfilter",
        "endwith", "endgeneration", "endraw", "endblock", "endautoescape", NULL};
    for (size_t i = 0; words[i]; i++)
        if (!strcmp(name, words[i])) return true;
    return false;
}

/* One {% ... %} statement; the parser is at its name. */
static struct jnode *parse_statement(struct parser *p, const struct opener *op)
{
    static const char *const generation_ends[] = {"endgeneration", NULL};
    const struct jtoken *tok = cur(p);
    if (tok->kind != JT_NAME) return unexpected(p, "a tag name");
    const char *name = tok->text;
    uint32_t pos = tok->pos;
    if (!enter(p)) return NULL;
    advance(p);
    struct jnode *n = NULL;
    if (!strcmp(name, "for")) n = parse_for(p, pos);
    else if (!strcmp(name, "if")) n = parse_if(p, pos);
    else if (!strcmp(name, "set")) n = parse_set(p, pos);
    else if (!strcmp(name, "macro")) n = parse_macro(p, pos);
    else if (!strcmp(name, "call")) n = parse_call_block(p, pos);
    else if (!strcmp(name, "filter")) n = parse_filter_block(p, pos);
    else if (!strcmp(name, "with")) n = parse_with(p, pos);
    else if (!strcmp(name, "print")) n = parse_print_tag(p, pos);
    else if (!strcmp(name, "generation")) n = parse_simple_body(p, pos, "generation", generation_ends);
    else if (!strcmp(name, "break") || !strcmp(name, "continue")) {
        if (p->loop_depth == 0) {
            fail(p, pos, "'%s' outside of a for loop", name);
        } else {
            n = new_node(p, name[0] == 'b' ? JN_BREAK : JN_CONTINUE, pos);
            if (n && !end_of_tag(p)) n = NULL;
        }
    } else if (!strcmp(name, "extends") || !strcmp(name, "block") || !strcmp(name, "include") ||
               !strcmp(name, "import") || !strcmp(name, "from") || !strcmp(name, "autoescape") ||
               !strcmp(name, "do")) {
        fail(p, pos, "the '%s' tag is not supported in chat templates", name);
    } else if (is_end_word(name)) {
        if (op) {
            char expected[160] = "";
            for (size_t i = 0; op->ends[i]; i++) {
                size_t used = strlen(expected);
                snprintf(expected + used, sizeof expected - used, "%s'%s'", i ? " or " : "", op->ends[i]);
            }
            unsigned line, col;
            jinja_position(p->t, op->pos, &line, &col);
            fail(p, pos, "unexpected '%s': the '%s' at line %u, column %u expects %s",
                 name, op->tag, line, col, expected);
        } else {
            fail(p, pos, "unexpected '%s': no block is open", name);
        }
    } else {
        fail(p, pos, "unknown tag '%s'", name);
    }
    leave(p);
    return n;
}

/* Statements up to "{% END" for an END in op->ends (the parser is left at
 * END), or to the end of the template when op is NULL. */
static bool parse_body(struct parser *p, const struct opener *op, struct jnode_list *out)
{
    struct nvec body = {0};
    for (;;) {
        const struct jtoken *tok = cur(p);
        struct jnode *n = NULL;
        switch (tok->kind) {
        case JT_EOF:
            if (op) {
                unsigned line, col;
                jinja_position(p->t, op->pos, &line, &col);
                char expected[160] = "";
                for (size_t i = 0; op->ends[i]; i++) {
                    size_t used = strlen(expected);
                    snprintf(expected + used, sizeof expected - used, "%s'%s'", i ? " or " : "", op->ends[i]);
                }
                fail(p, tok->pos, "unexpected end of template: the '%s' at line %u, column %u "
                     "was never closed (expected %s)", op->tag, line, col, expected);
                return false;
            }
            *out = nvec_list(&body);
            return true;
        case JT_TEXT:
            n = new_string_const(p, JN_TEXT, tok->pos, tok->text, tok->len);
            advance(p);
            break;
        case JT_VAR_BEGIN:
            advance(p);
            n = new_node(p, JN_PRINT, tok->pos);
            if (!n) return false;
            n->a = parse_tuple(p, false, true, NULL, false, false);
            if (!n->a || !expect(p, JT_VAR_END, "end of print statement '}}'")) return false;
            break;
        case JT_BLOCK_BEGIN:
            advance(p);
            if (op && cur(p)->kind == JT_NAME) {
                for (size_t i = 0; op->ends[i]; i++) {
                    if (is_name(cur(p), op->ends[i])) {
                        *out = nvec_list(&body);
                        return true;
                    }
                }
            }
            n = parse_statement(p, op);
            break;
        default:
            unexpected(p, NULL);
            return false;
        }
        if (!n || !nvec_push(p, &body, n)) return false;
    }
}

hearth_status jinja_parse(const char *text, size_t len, struct jinja_template **out)
{
    struct jinja_template *t = hearth_calloc(1, sizeof *t, "a template");
    if (!t) return HEARTH_E_NOMEM;
    hearth_status st = jinja_prepare_source(t, text, len);
    struct jtoken *toks = NULL;
    size_t n = 0;
    if (st == HEARTH_OK) st = jinja_lex(t, &toks, &n);
    if (st == HEARTH_OK) {
        struct parser p = {t, toks, n, 0, 0, 0, HEARTH_OK};
        if (!parse_body(&p, NULL, &t->body) && p.status == HEARTH_OK)
            p.status = hearth_error(HEARTH_E_INTERNAL, "template parser failed without a message");
        st = p.status;
    }
    free(toks);
    if (st != HEARTH_OK) {
        jinja_free(t);
        return st;
    }
    *out = t;
    return HEARTH_OK;
}

void jinja_free(struct jinja_template *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->n_constants; i++) value_free_static(t->constants[i]);
    free(t->constants);
    jarena_free(&t->arena);
    free(t->source);
    free(t);
}

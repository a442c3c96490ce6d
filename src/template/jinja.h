/*
 * jinja.h -- the chat-template interpreter: a Jinja subset with the
 * semantics of Python's Jinja as Hugging Face transformers configures it for
 * chat templates (trim_blocks, lstrip_blocks, loop controls, a tojson that
 * calls json.dumps, raise_exception and strftime_now).
 *
 * The work is split by job:
 *   jinja_lexer.c     template text -> tokens (whitespace control included)
 *   jinja_parser.c    tokens -> syntax tree (struct jnode)
 *   jinja_eval.c      syntax tree -> output text (scopes, loops, macros)
 *   jinja_ops.c       the operators (arithmetic, concatenation, comparison)
 *   jinja_filters.c   the filters
 *   jinja_tests.c     the tests
 *   jinja_methods.c   string/dict/list methods and global functions
 *   jinja_text.c      text helpers shared by filters and methods (case,
 *                     stripping, splitting, %-formatting, str.format,
 *                     strftime)
 *
 * Strings marked safe by the safe and escape filters (Jinja's Markup) keep
 * that mark through +, which escapes the other operand as Python's Markup
 * does; every other operation gives plain strings (autoescaping is off for
 * chat templates, as in transformers).
 *
 * Limits that keep hostile templates from crashing or hanging the process
 * (each is an error, never a truncated result):
 *   JINJA_MAX_SOURCE      template text size
 *   JINJA_MAX_NESTING     nesting of blocks, brackets and expressions when
 *                         parsing
 *   JINJA_MAX_EVAL_DEPTH  nesting of evaluation at run time, macro calls
 *                         included
 *   JINJA_MAX_CALL_DEPTH  nested macro calls
 *   JINJA_MAX_ITERATIONS  loop iterations in one rendering
 *   JINJA_MAX_WORK        work units in one rendering: one per evaluated
 *                         node, one per list element built and one per
 *                         JINJA_WORK_BYTES bytes of text built, so that
 *                         the budget bounds time and memory alike
 *   JINJA_MAX_OUTPUT      size of the output and of any string built
 *   JINJA_MAX_LIST        elements of a list a template builds (range(),
 *                         repetition, concatenation)
 */
#ifndef HEARTH_JINJA_H
#define HEARTH_JINJA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"
#include "textbuf.h"
#include "value.h"

#define JINJA_MAX_SOURCE (4u << 20)
#define JINJA_MAX_NESTING 100
#define JINJA_MAX_EVAL_DEPTH 400
#define JINJA_MAX_CALL_DEPTH 40
#define JINJA_MAX_ITERATIONS 1000000
#define JINJA_MAX_WORK 20000000
#define JINJA_WORK_BYTES 8
#define JINJA_MAX_OUTPUT (64u << 20)
#define JINJA_MAX_LIST 1000000

/* ---- tokens ------------------------------------------------------------ */

enum jtok {
    JT_EOF, JT_TEXT, JT_VAR_BEGIN, JT_VAR_END, JT_BLOCK_BEGIN, JT_BLOCK_END,
    JT_NAME, JT_STRING, JT_INT, JT_FLOAT,
    JT_ADD, JT_SUB, JT_MUL, JT_DIV, JT_FLOORDIV, JT_MOD, JT_POW, JT_TILDE,
    JT_LBRACKET, JT_RBRACKET, JT_LPAREN, JT_RPAREN, JT_LBRACE, JT_RBRACE,
    JT_EQ, JT_NE, JT_LT, JT_LE, JT_GT, JT_GE, JT_ASSIGN, JT_DOT, JT_COLON,
    JT_PIPE, JT_COMMA, JT_SEMICOLON
};

struct jtoken {
    enum jtok kind;
    uint32_t pos;      /* byte offset in the (normalised) source */
    const char *text;  /* TEXT: into the source; NAME, STRING: arena copy, NUL-terminated */
    size_t len;
    int64_t i;         /* INT */
    double f;          /* FLOAT */
};

/* ---- memory for a parsed template -------------------------------------- */

struct jarena {
    struct jarena_chunk *head;
};

void *jarena_alloc(struct jarena *a, size_t bytes);
char *jarena_strndup(struct jarena *a, const char *s, size_t len);
void jarena_free(struct jarena *a);

/* ---- syntax tree ------------------------------------------------------- */

enum jnode_kind {
    /* statements */
    JN_TEXT,         /* constant: the text */
    JN_PRINT,        /* {{ a }} */
    JN_IF,           /* if a: body, else orelse (an elif is an IF with op 1 alone in orelse) */
    JN_FOR,          /* for list (targets) in a [if b]: body, else orelse */
    JN_SET,          /* set list (NAME/NSREF targets) = a */
    JN_SET_BLOCK,    /* set list[0] [| filters in a]: body */
    JN_MACRO,        /* macro name(list = params, list2 = defaults): body */
    JN_CALL_BLOCK,   /* call(list = params, list2 = defaults) a: body */
    JN_FILTER_BLOCK, /* filter a (chain whose innermost operand is NULL): body */
    JN_WITH,         /* with list (targets) = list2 (values): body */
    JN_SCOPE,        /* body rendered as is (the generation tag) */
    JN_BREAK,
    JN_CONTINUE,
    /* expressions */
    JN_CONST,        /* constant */
    JN_NAME,         /* name */
    JN_NSREF,        /* name.attr as an assignment target */
    JN_GETATTR,      /* a.name */
    JN_GETITEM,      /* a[b] */
    JN_SLICE,        /* the b of a GETITEM obj[a:b:c]; any of a, b, c may be NULL */
    JN_CALL,         /* a(list, kwargs) */
    JN_FILTER,       /* a | name(list, kwargs); a NULL in filter blocks */
    JN_TEST,         /* a is name(list, kwargs) */
    JN_NOT,
    JN_NEG,
    JN_POS,
    JN_AND,          /* a and b */
    JN_OR,           /* a or b */
    JN_BINOP,        /* a op b */
    JN_CONCAT,       /* list[0] ~ list[1] ~ ... */
    JN_COMPARE,      /* a cmp_ops[0] list[0] cmp_ops[1] list[1] ... */
    JN_COND,         /* a if b else c (c NULL: undefined) */
    JN_LIST,         /* [list] */
    JN_TUPLE,        /* (list) */
    JN_DICT          /* {list[i]: list2[i]} */
};

enum jbinop { JOP_ADD, JOP_SUB, JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD, JOP_POW };
enum jcmp { JCMP_EQ, JCMP_NE, JCMP_LT, JCMP_LE, JCMP_GT, JCMP_GE, JCMP_IN, JCMP_NOTIN };

struct jnode;

struct jnode_list {
    struct jnode **items;
    size_t len;
};

struct jkwarg {
    const char *name;
    struct jnode *value;
};

struct jnode {
    enum jnode_kind kind;
    int op;                   /* BINOP: enum jbinop */
    uint32_t pos;             /* byte offset in the source, for errors */
    struct jnode *a, *b, *c;
    const char *name;         /* NAME, NSREF, GETATTR, FILTER, TEST, MACRO */
    const char *attr;         /* NSREF */
    value constant;           /* CONST, TEXT (static: see VALUE_REFS_STATIC) */
    struct jnode_list list;
    struct jnode_list list2;
    struct jnode_list body;
    struct jnode_list orelse;
    struct jkwarg *kwargs;
    size_t n_kwargs;
    uint8_t *cmp_ops;         /* COMPARE: enum jcmp per operand in list */
    bool uses_caller;         /* MACRO: the body refers to caller */
};

/* ---- templates --------------------------------------------------------- */

struct jinja_template {
    char *source;             /* normalised: \r\n and \r become \n, one final newline dropped */
    size_t source_len;
    struct jarena arena;
    struct jnode_list body;
    value *constants;         /* static values to free with the template */
    size_t n_constants, cap_constants;
};

/* Check text (size, UTF-8) and keep its normalised form in t->source. */
hearth_status jinja_prepare_source(struct jinja_template *t, const char *text, size_t len);

/* Turn t->source into tokens.  Errors are HEARTH_E_FORMAT with line and
 * column. */
hearth_status jinja_lex(struct jinja_template *t, struct jtoken **tokens, size_t *n_tokens);

/* Parse text into a template.  Errors are HEARTH_E_FORMAT with line and
 * column. */
hearth_status jinja_parse(const char *text, size_t len, struct jinja_template **out);
void jinja_free(struct jinja_template *t);

/* Line and column (from 1; columns count characters) of a byte offset. */
void jinja_position(const struct jinja_template *t, uint32_t pos, unsigned *line, unsigned *col);

/* Record an error at a byte offset: "chat template line L, column C: ...". */
hearth_status jinja_error_at(const struct jinja_template *t, hearth_status status, uint32_t pos,
                             const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* ---- rendering --------------------------------------------------------- */

/* The calendar date and time strftime_now() formats. */
struct jinja_clock {
    int year, month, day;       /* month 1..12 */
    int hour, minute, second;
};

/* Render with the variables of globals (a dict) into out. */
hearth_status jinja_render(const struct jinja_template *t, value globals,
                           const struct jinja_clock *clock, textbuf *out);

/* ---- what filters, tests, methods and functions see --------------------- */

struct jrender;   /* the state of one rendering (jinja_eval.c) */

/* Arguments of a call: positional, then keyword. */
struct jargs {
    const value *pos;
    size_t n_pos;
    const char *const *kw_names;
    const value *kw_vals;
    size_t n_kw;
};

/* Bind args to the parameter names (NULL-terminated) of `fn`, as Python
 * binds a call: slots[i] points to the argument for names[i], or is NULL
 * when it was not given.  Too many arguments, unknown or repeated keywords
 * are errors. */
hearth_status jargs_bind(const char *fn, const struct jargs *args,
                         const char *const *names, const value **slots);

typedef hearth_status (*jinja_fn)(struct jrender *r, value self, const struct jargs *args,
                                  value *out);

/* Filters (jinja_filters.c): the operand is `self`. */
jinja_fn jinja_find_filter(const char *name);
/* Tests (jinja_tests.c): the result is a bool value. */
jinja_fn jinja_find_test(const char *name);
/* Methods (jinja_methods.c) of a value, by name: NULL when the value has no
 * such method.  Dicts have items, keys, values and get; strings the str
 * methods templates use; lists index and count. */
jinja_fn jinja_find_method(value self, const char *name);
/* Global functions: range, dict, namespace, raise_exception, strftime_now,
 * cycler and joiner are not provided. */
jinja_fn jinja_find_global(const char *name);

/* Services of the evaluator for builtins (jinja_eval.c). */
/* Account for work proportional to `units`; fails past JINJA_MAX_WORK. */
hearth_status jrender_charge(struct jrender *r, size_t units);
/* Call a callable value (macro, builtin, bound method). */
hearth_status jrender_call(struct jrender *r, value callee, const struct jargs *args, value *out);
/* Apply the filter or test called name to v with extra positional args. */
hearth_status jrender_apply_filter(struct jrender *r, const char *name, value v,
                                   const value *extra, size_t n_extra, value *out);
hearth_status jrender_apply_test(struct jrender *r, const char *name, value v,
                                 const value *extra, size_t n_extra, bool *out);
/* Attribute lookup with Jinja's rules (obj.name: attribute first, then
 * item), and item lookup (obj[key]: item first, then attribute). */
hearth_status jrender_getattr(struct jrender *r, value obj, const char *name, size_t len, value *out);
hearth_status jrender_getitem(struct jrender *r, value obj, value key, value *out);
/* The items a for loop over v walks (list items, dict keys, string
 * characters; nothing for undefined) as a list. */
hearth_status jrender_iterate(struct jrender *r, value v, value *out);
/* a op b with Python semantics (op: enum jbinop), and the comparison
 * a op b (op: enum jcmp) (jinja_ops.c). */
hearth_status jrender_binop(struct jrender *r, int op, value a, value b, value *out);
hearth_status jrender_compare(int op, value a, value b, bool *out);
const struct jinja_clock *jrender_clock(struct jrender *r);

/* New strings: the work they cost is charged (one unit per
 * JINJA_WORK_BYTES bytes), so that no template can copy without end.
 * jrender_new_string copies len bytes; jinja_string_from takes tb's text
 * (checking the size limit); jinja_to_string is Python's str() (strings
 * are returned as they are, at no cost). */
hearth_status jrender_new_string(struct jrender *r, const char *s, size_t len, value *out);
hearth_status jinja_string_from(struct jrender *r, textbuf *tb, value *out);
hearth_status jinja_to_string(struct jrender *r, value v, value *out);
/* Raise the error of using an undefined value. */
hearth_status jinja_undefined_error(value v);

/* A bound method or builtin-function object. */
hearth_status jinja_new_function(const char *name, jinja_fn fn, value self, value *out);

/* Text helpers (jinja_text.c). */
enum jcase { JCASE_UPPER, JCASE_LOWER, JCASE_TITLE, JCASE_CAPITALIZE, JCASE_JINJA_TITLE };
hearth_status jtext_case(struct jrender *r, const struct vstring *s, enum jcase how, value *out);
/* Strip characters (NULL: whitespace) from the left, right or both ends. */
hearth_status jtext_strip(struct jrender *r, const struct vstring *s, const struct vstring *chars, bool left,
                          bool right, value *out);
/* Python str.split(sep, maxsplit) (sep NULL: runs of whitespace);
 * from_right for rsplit. */
hearth_status jtext_split(struct jrender *r, const struct vstring *s, const struct vstring *sep,
                          int64_t maxsplit, bool from_right, value *out);
/* Python str.splitlines(keepends). */
hearth_status jtext_splitlines(struct jrender *r, const struct vstring *s, bool keepends,
                               value *out);
/* Python str.replace(old, new, count) (count < 0: all). */
hearth_status jtext_replace(struct jrender *r, const struct vstring *s, const struct vstring *old,
                            const struct vstring *new_text, int64_t count, value *out);
/* Python's printf-style `fmt % args` (args: a tuple/list of values, or one
 * value, or a dict for %(name)s). */
hearth_status jtext_percent_format(struct jrender *r, const struct vstring *fmt, value args,
                                   value *out);
/* Python str.format(*args, **kwargs). */
hearth_status jtext_str_format(struct jrender *r, const struct vstring *fmt,
                               const struct jargs *args, value *out);
/* Append s with HTML's special characters escaped as Jinja's escape()
 * does (& < > " '). */
hearth_status jtext_html_escape(textbuf *tb, const char *s, size_t len);
/* strftime with the C locale's names, for strftime_now(). */
hearth_status jtext_strftime(struct jrender *r, const struct vstring *fmt, const struct jinja_clock *clock,
                             value *out);

#endif /* HEARTH_JINJA_H */

/*
 * json_schema.c -- JSON Schema to GBNF, and the grammar of JSON mode.
 *
 * Every schema node becomes a rule.  The subset (hearth-grammar(7)):
 * type (one or a list), properties, required, additionalProperties,
 * enum, const, items, prefixItems, minItems, maxItems, minLength,
 * maxLength, pattern (a regular-expression subset), format (date, time,
 * date-time, uuid, email), minimum, maximum, exclusiveMinimum and
 * exclusiveMaximum for integers, anyOf, oneOf (its branches must exclude
 * each other), allOf (of object schemas, merged), $ref into $defs or
 * definitions, and the annotations (title, description, ...).  Any other
 * keyword is refused by name: a schema is never silently unconstrained.
 *
 * Objects list their properties in the schema's order, the required ones
 * always and the others optionally; a schema without properties whose
 * additionalProperties is a schema (a map) gets any keys with such
 * values; with properties, no other keys are generated (which any value
 * of additionalProperties allows).  Whitespace between tokens is nothing,
 * a space, or a line break and up to 20 spaces or tabs of indentation, integers have at most 16 digits, fractions 16 and
 * exponents 3, so that no sequence can grow forever in one place.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "json.h"
#include "textbuf.h"
#include "utf8.h"
#include "value.h"

#define SCHEMA_MAX_RULES 100000
#define SCHEMA_MAX_DEPTH 64

/* The rules every translation may use. */
#define JSON_BASE_RULES \
    "ws ::= (\" \" | \"\\n\" [ \\t]{0,20})?\n" \
    "json-char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" json-hex4)\n" \
    "json-hex4 ::= [0-9a-cA-C] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | [eEfF] [0-9a-fA-F]{3}\n" \
    "json-string ::= \"\\\"\" json-char* \"\\\"\"\n" \
    "json-int ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15})\n" \
    "json-number ::= json-int (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?\n" \
    "json-value ::= json-object | json-array | json-string | json-number | \"true\" | \"false\" | \"null\"\n" \
    "json-object ::= \"{\" ws (json-string ws \":\" ws json-value (ws \",\" ws json-string ws \":\" ws json-value)*)? ws \"}\"\n" \
    "json-array ::= \"[\" ws (json-value (ws \",\" ws json-value)*)? ws \"]\"\n"

const char json_object_gbnf[] = "root ::= json-object\n" JSON_BASE_RULES;

struct conv {
    struct gbudget *budget;
    value root;
    textbuf out;
    int n_rules;
    /* $ref targets already translated: pointer of the schema node -> rule */
    const void **ref_nodes;
    int *ref_rules;
    int n_refs, cap_refs;
};

static const char *const annotations[] = {
    "title", "description", "$schema", "$id", "$comment", "default", "examples",
    "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "strict", NULL,
};

static const char *const constraints[] = {
    "type", "properties", "required", "additionalProperties", "enum", "const", "items",
    "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf", "allOf",
    "$ref", NULL,
};

static bool in_list(const char *const *list, const char *k, size_t len)
{
    for (int i = 0; list[i]; i++)
        if (strlen(list[i]) == len && memcmp(list[i], k, len) == 0) return true;
    return false;
}

static value *get(value obj, const char *key)
{
    if (obj.kind != VALUE_DICT) return NULL;
    return value_dict_get(obj, key, strlen(key));
}

static hearth_status new_rule(struct conv *c, int *id)
{
    if (c->n_rules >= SCHEMA_MAX_RULES)
        return hearth_error(HEARTH_E_RANGE, "JSON schema: more than %d rules", SCHEMA_MAX_RULES);
    HEARTH_TRY(gbudget_spend(c->budget, 1));
    *id = c->n_rules++;
    return HEARTH_OK;
}

/* A GBNF literal of bytes s[0..len). */
static hearth_status put_literal(textbuf *tb, const char *s, size_t len)
{
    HEARTH_TRY(textbuf_append_char(tb, '"'));
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            HEARTH_TRY(textbuf_append_char(tb, '\\'));
            HEARTH_TRY(textbuf_append_char(tb, (char)ch));
        } else if (ch < 0x20 || ch == 0x7F) {
            HEARTH_TRY(textbuf_printf(tb, "\\x%02X", ch));
        } else {
            HEARTH_TRY(textbuf_append_char(tb, (char)ch));
        }
    }
    return textbuf_append_char(tb, '"');
}

/* The compact JSON text of v as a GBNF literal. */
static hearth_status put_json_literal(textbuf *tb, value v)
{
    textbuf j;
    textbuf_init(&j, 1 << 24, "a JSON value");
    json_format fmt = {NULL, ",", ":", false, false};
    hearth_status st = json_write(v, &fmt, &j);
    if (!st) st = put_literal(tb, j.data ? j.data : "", j.len);
    textbuf_free(&j);
    return st;
}

static hearth_status convert(struct conv *c, value s, int depth, int *rule);

/* ---- regular expressions -------------------------------------------------- */

struct regex {
    const char *p, *end, *start;
    textbuf *tb;
};

static hearth_status rx_err(const struct regex *r, const char *what)
{
    return hearth_error(HEARTH_E_UNSUPPORTED, "JSON schema: pattern at character %d: %s",
                        (int)utf8_count(r->start, (size_t)(r->p - r->start)) + 1, what);
}

struct rx_range {
    uint32_t lo, hi;
};

/* Emit a class from ranges, minus what a JSON string must escape. */
static hearth_status rx_emit_class(textbuf *tb, const struct rx_range *r, int n, bool negate)
{
    /* mark a bitmap of the first 128 code points and keep ranges above */
    bool ascii[128] = {0};
    struct rx_range hi[64];
    int n_hi = 0;
    for (int i = 0; i < n; i++) {
        for (uint32_t cp = r[i].lo; cp <= r[i].hi && cp < 128; cp++) ascii[cp] = true;
        if (r[i].hi >= 128 && n_hi < 64)
            hi[n_hi++] = (struct rx_range){HEARTH_MAX(r[i].lo, 128u), r[i].hi};
    }
    HEARTH_TRY(textbuf_append_str(tb, "["));
    if (negate) {
        /* negated: exclude the class and everything that needs escaping */
        HEARTH_TRY(textbuf_append_str(tb, "^\\x00-\\x1F\\\"\\\\"));
        for (int cp = 0x20; cp < 128; cp++)
            if (ascii[cp] && cp != '"' && cp != '\\') HEARTH_TRY(textbuf_printf(tb, "\\x%02X", cp));
        for (int i = 0; i < n_hi; i++)
            HEARTH_TRY(textbuf_printf(tb, "\\U%08X-\\U%08X", (unsigned)hi[i].lo, (unsigned)hi[i].hi));
    } else {
        bool any = false;
        for (int cp = 0x20; cp < 128; cp++)
            if (ascii[cp] && cp != '"' && cp != '\\') {
                HEARTH_TRY(textbuf_printf(tb, "\\x%02X", cp));
                any = true;
            }
        for (int i = 0; i < n_hi; i++) {
            if (hi[i].lo <= 0xD7FF || hi[i].hi >= 0xE000) any = true;
            HEARTH_TRY(textbuf_printf(tb, "\\U%08X-\\U%08X", (unsigned)hi[i].lo, (unsigned)hi[i].hi));
        }
        if (!any) return hearth_error(HEARTH_E_UNSUPPORTED,
                                      "JSON schema: pattern: a class matches only characters a "
                                      "JSON string must escape");
    }
    return textbuf_append_str(tb, "]");
}

/* Class shorthands \d \w \s and their negations into ranges. */
static int rx_shorthand(char c, struct rx_range *r, bool *negate)
{
    *negate = c == 'D' || c == 'W' || c == 'S';
    switch (c) {
    case 'd': case 'D': r[0] = (struct rx_range){'0', '9'}; return 1;
    case 'w': case 'W':
        r[0] = (struct rx_range){'0', '9'};
        r[1] = (struct rx_range){'A', 'Z'};
        r[2] = (struct rx_range){'a', 'z'};
        r[3] = (struct rx_range){'_', '_'};
        return 4;
    case 's': case 'S': r[0] = (struct rx_range){' ', ' '}; return 1;
    }
    return 0;
}

/* One (possibly escaped) character of a regular expression. */
static hearth_status rx_char(struct regex *r, uint32_t *cp)
{
    if (r->p >= r->end) return rx_err(r, "unexpected end");
    if (*r->p == '\\') {
        r->p++;
        if (r->p >= r->end) return rx_err(r, "unfinished escape");
        char c = *r->p++;
        switch (c) {
        case 'n': *cp = '\n'; return HEARTH_OK;
        case 't': *cp = '\t'; return HEARTH_OK;
        case 'r': *cp = '\r'; return HEARTH_OK;
        case 'f': *cp = '\f'; return HEARTH_OK;
        case 'v': *cp = '\v'; return HEARTH_OK;
        default:
            if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
                return rx_err(r, "this escape is not in the supported subset");
            *cp = (unsigned char)c;
            return HEARTH_OK;
        }
    }
    size_t n = utf8_decode(r->p, (size_t)(r->end - r->p), cp);
    if (!n) return rx_err(r, "invalid UTF-8");
    r->p += n;
    return HEARTH_OK;
}

static hearth_status rx_emit_char(textbuf *tb, uint32_t cp)
{
    /* as it is written inside a JSON string */
    char buf[8];
    if (cp == '"') return textbuf_append_str(tb, "\"\\\\\\\"\"");
    if (cp == '\\') return textbuf_append_str(tb, "\"\\\\\\\\\"");
    if (cp < 0x20) {
        const char *esc = cp == '\n' ? "n" : cp == '\t' ? "t" : cp == '\r' ? "r" : cp == '\f' ? "f" : cp == '\b' ? "b" : NULL;
        if (esc) return textbuf_printf(tb, "\"\\\\%s\"", esc);
        return textbuf_printf(tb, "\"\\\\u%04x\"", (unsigned)cp);
    }
    size_t n = utf8_encode(cp, buf);
    return put_literal(tb, buf, n);
}

static hearth_status rx_alternation(struct regex *r, int depth);

static hearth_status rx_class(struct regex *r)
{
    r->p++; /* [ */
    bool negate = r->p < r->end && *r->p == '^';
    if (negate) r->p++;
    struct rx_range ranges[128];
    int n = 0;
    bool first = true;
    while (r->p < r->end && (*r->p != ']' || first)) {
        first = false;
        if (n > 120) return rx_err(r, "character class too long");
        if (*r->p == '\\' && r->p + 1 < r->end && strchr("dwsDWS", r->p[1])) {
            bool neg;
            struct rx_range sh[4];
            int k = rx_shorthand(r->p[1], sh, &neg);
            if (neg) return rx_err(r, "a negated shorthand inside a class");
            for (int i = 0; i < k; i++) ranges[n++] = sh[i];
            r->p += 2;
            continue;
        }
        uint32_t lo, hi;
        HEARTH_TRY(rx_char(r, &lo));
        hi = lo;
        if (r->end - r->p >= 2 && r->p[0] == '-' && r->p[1] != ']') {
            r->p++;
            HEARTH_TRY(rx_char(r, &hi));
            if (hi < lo) return rx_err(r, "empty range in a class");
        }
        ranges[n++] = (struct rx_range){lo, hi};
    }
    if (r->p >= r->end) return rx_err(r, "unterminated class");
    r->p++;
    return rx_emit_class(r->tb, ranges, n, negate);
}

static hearth_status rx_sequence(struct regex *r, int depth)
{
    HEARTH_TRY(textbuf_append_str(r->tb, "("));
    bool empty = true;
    while (r->p < r->end && *r->p != '|' && *r->p != ')') {
        const char c = *r->p;
        if (c == '^' || c == '$') return rx_err(r, "anchors are supported only at the ends");
        HEARTH_TRY(textbuf_append_str(r->tb, " "));
        if (c == '(') {
            r->p++;
            if (r->p < r->end && *r->p == '?') {
                if (r->end - r->p >= 2 && r->p[1] == ':') r->p += 2;
                else return rx_err(r, "lookaround and named groups are not supported");
            }
            if (depth > SCHEMA_MAX_DEPTH) return rx_err(r, "groups nested too deeply");
            HEARTH_TRY(rx_alternation(r, depth + 1));
            if (r->p >= r->end || *r->p != ')') return rx_err(r, "expected ')'");
            r->p++;
        } else if (c == '[') {
            HEARTH_TRY(rx_class(r));
        } else if (c == '.') {
            r->p++;
            HEARTH_TRY(textbuf_append_str(r->tb, "[^\\x00-\\x1F\\\"\\\\]"));
        } else if (c == '\\' && r->p + 1 < r->end && strchr("dwsDWS", r->p[1])) {
            bool neg;
            struct rx_range sh[4];
            int k = rx_shorthand(r->p[1], sh, &neg);
            r->p += 2;
            HEARTH_TRY(rx_emit_class(r->tb, sh, k, neg));
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            return rx_err(r, "a quantifier follows nothing");
        } else {
            uint32_t cp;
            HEARTH_TRY(rx_char(r, &cp));
            HEARTH_TRY(rx_emit_char(r->tb, cp));
        }
        empty = false;
        /* quantifiers */
        if (r->p < r->end && (*r->p == '*' || *r->p == '+' || *r->p == '?')) {
            HEARTH_TRY(textbuf_append_char(r->tb, *r->p));
            r->p++;
        } else if (r->p < r->end && *r->p == '{') {
            const char *q = r->p + 1;
            while (q < r->end && ((*q >= '0' && *q <= '9') || *q == ',')) q++;
            if (q >= r->end || *q != '}') return rx_err(r, "malformed {m,n}");
            HEARTH_TRY(textbuf_append(r->tb, r->p, (size_t)(q - r->p + 1)));
            r->p = q + 1;
        }
        if (r->p < r->end && (*r->p == '?' || *r->p == '+')) {
            /* lazy or possessive: the same language */
            if (*r->p == '+') return rx_err(r, "possessive quantifiers are not supported");
            r->p++;
        }
        if (r->p < r->end && (*r->p == '*' || *r->p == '+' || *r->p == '{'))
            return rx_err(r, "a quantifier follows a quantifier");
    }
    (void)empty;
    return textbuf_append_str(r->tb, " )");
}

static hearth_status rx_alternation(struct regex *r, int depth)
{
    HEARTH_TRY(textbuf_append_str(r->tb, "("));
    HEARTH_TRY(rx_sequence(r, depth));
    while (r->p < r->end && *r->p == '|') {
        r->p++;
        HEARTH_TRY(textbuf_append_str(r->tb, " | "));
        HEARTH_TRY(rx_sequence(r, depth));
    }
    return textbuf_append_str(r->tb, ")");
}

static hearth_status convert_pattern(struct conv *c, const struct vstring *pat, int rule)
{
    struct regex r = {pat->data, pat->data + pat->len, pat->data, &c->out};
    bool anchored_start = r.p < r.end && *r.p == '^';
    if (anchored_start) r.p++;
    bool anchored_end = r.end > r.p && r.end[-1] == '$' && (r.end - 1 == r.p || r.end[-2] != '\\');
    if (anchored_end) r.end--;
    HEARTH_TRY(textbuf_printf(&c->out, "s%d ::= \"\\\"\" ", rule));
    if (!anchored_start) HEARTH_TRY(textbuf_append_str(&c->out, "json-char* "));
    HEARTH_TRY(rx_alternation(&r, 0));
    if (r.p != r.end) return rx_err(&r, "unexpected ')'");
    if (!anchored_end) HEARTH_TRY(textbuf_append_str(&c->out, " json-char*"));
    return textbuf_append_str(&c->out, " \"\\\"\"\n");
}

/* ---- integer ranges ------------------------------------------------------ */

/* Digits lo..hi of equal length n (as strings). */
static hearth_status range_same_len(textbuf *tb, const char *lo, const char *hi, int n)
{
    if (n == 0) return HEARTH_OK;
    if (lo[0] == hi[0]) {
        HEARTH_TRY(textbuf_printf(tb, "\"%c\" ", lo[0]));
        return range_same_len(tb, lo + 1, hi + 1, n - 1);
    }
    bool lo_rest_zero = true, hi_rest_nine = true;
    for (int i = 1; i < n; i++) {
        lo_rest_zero &= lo[i] == '0';
        hi_rest_nine &= hi[i] == '9';
    }
    if (lo_rest_zero && hi_rest_nine)
        return textbuf_printf(tb, "[%c-%c] [0-9]{%d} ", lo[0], hi[0], n - 1);
    char nines[32], zeros[32];
    memset(nines, '9', sizeof nines);
    memset(zeros, '0', sizeof zeros);
    HEARTH_TRY(textbuf_printf(tb, "( \"%c\" ", lo[0]));
    HEARTH_TRY(range_same_len(tb, lo + 1, nines, n - 1));
    if (hi[0] - lo[0] > 1) HEARTH_TRY(textbuf_printf(tb, "| [%c-%c] [0-9]{%d} ", lo[0] + 1, hi[0] - 1, n - 1));
    HEARTH_TRY(textbuf_printf(tb, "| \"%c\" ", hi[0]));
    HEARTH_TRY(range_same_len(tb, zeros, hi + 1, n - 1));
    return textbuf_append_str(tb, ") ");
}

/* Non-negative integers lo..hi as alternatives. */
static hearth_status range_nonneg(textbuf *tb, uint64_t lo, uint64_t hi, bool *first)
{
    char a[32], b[32];
    while (lo <= hi) {
        snprintf(a, sizeof a, "%llu", (unsigned long long)lo);
        int n = (int)strlen(a);
        uint64_t top = 9;
        for (int i = 1; i < n; i++) top = top * 10 + 9;
        uint64_t end = HEARTH_MIN(hi, top);
        snprintf(b, sizeof b, "%llu", (unsigned long long)end);
        HEARTH_TRY(textbuf_append_str(tb, *first ? "( " : "| ( "));
        *first = false;
        HEARTH_TRY(range_same_len(tb, a, b, n));
        HEARTH_TRY(textbuf_append_str(tb, ") "));
        if (end == hi) break;
        lo = end + 1;
    }
    return HEARTH_OK;
}

#define INT_LIMIT 999999999999999999LL

static hearth_status convert_integer_range(struct conv *c, value s, int rule)
{
    int64_t lo = -INT_LIMIT, hi = INT_LIMIT;
    const char *keys[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    for (int k = 0; k < 4; k++) {
        value *v = get(s, keys[k]);
        if (!v) continue;
        double d;
        if (v->kind == VALUE_INT) d = (double)v->u.i;
        else if (v->kind == VALUE_FLOAT) d = v->u.f;
        else return hearth_error(HEARTH_E_FORMAT, "JSON schema: %s is not a number", keys[k]);
        if (d != d || d > (double)INT_LIMIT || d < -(double)INT_LIMIT)
            return hearth_error(HEARTH_E_UNSUPPORTED, "JSON schema: %s beyond +-%lld", keys[k],
                                (long long)INT_LIMIT);
        int64_t b;
        if (k < 2) { /* lower bounds: the least integer allowed */
            int64_t f = (int64_t)d;
            if ((double)f < d) f++;
            if (k == 1 && (double)f == d) f++;
            b = f;
            if (b > lo) lo = b;
        } else {
            int64_t f = (int64_t)d;
            if ((double)f > d) f--;
            if (k == 3 && (double)f == d) f--;
            b = f;
            if (b < hi) hi = b;
        }
    }
    if (lo > hi)
        return hearth_error(HEARTH_E_FORMAT, "JSON schema: no integer lies between minimum %lld "
                            "and maximum %lld", (long long)lo, (long long)hi);
    HEARTH_TRY(textbuf_printf(&c->out, "s%d ::= ", rule));
    bool first = true;
    if (lo < 0) {
        /* -(|hi'|..|lo|) where hi' = min(hi, -1) */
        uint64_t a = hi < 0 ? (uint64_t)(-hi) : 1, b = (uint64_t)(-lo);
        HEARTH_TRY(textbuf_append_str(&c->out, "\"-\" ( "));
        bool f2 = true;
        HEARTH_TRY(range_nonneg(&c->out, a, b, &f2));
        HEARTH_TRY(textbuf_append_str(&c->out, ") "));
        first = false;
    }
    if (hi >= 0) HEARTH_TRY(range_nonneg(&c->out, lo < 0 ? 0 : (uint64_t)lo, (uint64_t)hi, &first));
    return textbuf_append_str(&c->out, "\n");
}

/* ---- the schema -------------------------------------------------------- */

static hearth_status check_keywords(value s)
{
    struct vdict *d = s.u.dict;
    for (size_t i = 0; i < d->len; i++) {
        const struct vstring *k = d->entries[i].key;
        if (!in_list(annotations, k->data, k->len) && !in_list(constraints, k->data, k->len))
            return hearth_error(HEARTH_E_UNSUPPORTED,
                                "JSON schema: keyword \"%.*s\" is not supported", (int)k->len,
                                k->data);
    }
    return HEARTH_OK;
}

static hearth_status get_count(value s, const char *key, int64_t *out, bool *present)
{
    value *v = get(s, key);
    *present = v != NULL;
    if (!v) return HEARTH_OK;
    if (v->kind != VALUE_INT || v->u.i < 0 || v->u.i > 100000)
        return hearth_error(HEARTH_E_FORMAT, "JSON schema: %s must be an integer 0 .. 100000", key);
    *out = v->u.i;
    return HEARTH_OK;
}

static hearth_status resolve_ref(struct conv *c, const struct vstring *ref, value *out)
{
    if (ref->len == 1 && ref->data[0] == '#') {
        *out = c->root;
        return HEARTH_OK;
    }
    const char *prefixes[] = {"#/$defs/", "#/definitions/"};
    for (int i = 0; i < 2; i++) {
        size_t pl = strlen(prefixes[i]);
        if (ref->len > pl && memcmp(ref->data, prefixes[i], pl) == 0) {
            value *defs = get(c->root, i == 0 ? "$defs" : "definitions");
            value *t = defs && defs->kind == VALUE_DICT
                           ? value_dict_get(*defs, ref->data + pl, ref->len - pl) : NULL;
            if (!t) break;
            *out = *t;
            return HEARTH_OK;
        }
    }
    return hearth_error(HEARTH_E_UNSUPPORTED,
                        "JSON schema: $ref \"%.*s\" (only \"#\", \"#/$defs/NAME\" and "
                        "\"#/definitions/NAME\" are supported)", (int)ref->len, ref->data);
}

static hearth_status convert_string(struct conv *c, value s, int rule)
{
    value *pattern = get(s, "pattern"), *format = get(s, "format");
    int64_t min = 0, max = -1;
    bool has_min, has_max;
    HEARTH_TRY(get_count(s, "minLength", &min, &has_min));
    HEARTH_TRY(get_count(s, "maxLength", &max, &has_max));
    if ((pattern || format) && (has_min || has_max))
        return hearth_error(HEARTH_E_UNSUPPORTED,
                            "JSON schema: minLength/maxLength together with pattern or format");
    if (pattern && format)
        return hearth_error(HEARTH_E_UNSUPPORTED, "JSON schema: pattern together with format");
    if (pattern) {
        if (pattern->kind != VALUE_STRING)
            return hearth_error(HEARTH_E_FORMAT, "JSON schema: pattern is not a string");
        return convert_pattern(c, pattern->u.s, rule);
    }
    if (format) {
        if (format->kind != VALUE_STRING)
            return hearth_error(HEARTH_E_FORMAT, "JSON schema: format is not a string");
        static const char date[] =
            "([1-9] [0-9]{3} | \"0\" ([1-9] [0-9]{2} | \"0\" ([1-9] [0-9] | \"0\" [1-9]))) \"-\" ( (\"0\" [13578] | \"1\" [02]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01]) "
            "| (\"0\" [469] | \"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\") "
            "| \"02-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]) )";
        static const char time[] =
            "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? "
            "(\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])";
        const struct vstring *f = format->u.s;
        const char *body = NULL;
        char buf[1024];
        if (f->len == 4 && !memcmp(f->data, "date", 4)) body = date;
        else if (f->len == 4 && !memcmp(f->data, "time", 4)) body = time;
        else if (f->len == 9 && !memcmp(f->data, "date-time", 9)) {
            snprintf(buf, sizeof buf, "%s \"T\" %s", date, time);
            body = buf;
        } else if (f->len == 4 && !memcmp(f->data, "uuid", 4))
            body = "[0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{12}";
        else if (f->len == 5 && !memcmp(f->data, "email", 5))
            body = "[a-zA-Z0-9_+-]{1,32} (\".\" [a-zA-Z0-9_+-]{1,32}){0,3} \"@\" [a-zA-Z0-9]{1,32} "
                   "(\".\" [a-zA-Z0-9]{1,32}){1,3}";
        else
            return hearth_error(HEARTH_E_UNSUPPORTED,
                                "JSON schema: format \"%.*s\" is not supported (date, time, "
                                "date-time, uuid, email are)", (int)f->len, f->data);
        return textbuf_printf(&c->out, "s%d ::= \"\\\"\" %s \"\\\"\"\n", rule, body);
    }
    if (has_max && max < min)
        return hearth_error(HEARTH_E_FORMAT, "JSON schema: maxLength %lld is below minLength %lld",
                            (long long)max, (long long)min);
    if (!has_min && !has_max) return textbuf_printf(&c->out, "s%d ::= json-string\n", rule);
    if (has_max)
        return textbuf_printf(&c->out, "s%d ::= \"\\\"\" json-char{%lld,%lld} \"\\\"\"\n", rule,
                              (long long)min, (long long)max);
    return textbuf_printf(&c->out, "s%d ::= \"\\\"\" json-char{%lld,} \"\\\"\"\n", rule,
                          (long long)min);
}

static hearth_status convert_array(struct conv *c, value s, int depth, int rule)
{
    value *items = get(s, "items"), *prefix = get(s, "prefixItems");
    int64_t min = 0, max = -1;
    bool has_min, has_max;
    HEARTH_TRY(get_count(s, "minItems", &min, &has_min));
    HEARTH_TRY(get_count(s, "maxItems", &max, &has_max));
    if (!has_max) max = -1;
    if (prefix && prefix->kind != VALUE_LIST)
        return hearth_error(HEARTH_E_FORMAT, "JSON schema: prefixItems is not an array");
    int64_t k = prefix ? (int64_t)value_list_len(*prefix) : 0;
    bool no_more = items && items->kind == VALUE_BOOL && !items->u.b;
    if (no_more && (max < 0 || max > k)) max = k;
    if (max >= 0 && max < min)
        return hearth_error(HEARTH_E_FORMAT, "JSON schema: at most %lld items but at least %lld",
                            (long long)max, (long long)min);
    int *prefix_rules = k ? hearth_calloc((size_t)k, sizeof *prefix_rules, "schema rules") : NULL;
    if (k && !prefix_rules) return HEARTH_E_NOMEM;
    hearth_status st = HEARTH_OK;
    for (int64_t i = 0; i < k && !st; i++)
        st = convert(c, value_list_at(*prefix, (size_t)i), depth + 1, &prefix_rules[i]);
    int item_rule = -1;
    if (!st && !no_more && items && !(items->kind == VALUE_BOOL && items->u.b))
        st = convert(c, *items, depth + 1, &item_rule);
    char item[32];
    if (item_rule >= 0) snprintf(item, sizeof item, "s%d", item_rule);
    else snprintf(item, sizeof item, "json-value");
    if (!st) st = textbuf_printf(&c->out, "s%d ::= \"[\" ws ", rule);
    /* elements 0..k-1 as nested optionals, then the repetition */
    int64_t open = 0;
    for (int64_t i = 0; i < k && !st && (max < 0 || i < max); i++) {
        if (i >= min) {
            st = textbuf_append_str(&c->out, "( ");
            open++;
        }
        if (!st && i > 0) st = textbuf_append_str(&c->out, "\",\" ws ");
        if (!st) st = textbuf_printf(&c->out, "s%d ws ", prefix_rules[i]);
    }
    if (!st && (max < 0 || max > k) && !no_more) {
        int64_t rest_min = min > k ? min - k : 0, rest_max = max < 0 ? -1 : max - k;
        if (k == 0) {
            /* first item without a comma */
            if (rest_min == 0) st = textbuf_append_str(&c->out, "( ");
            if (!st) st = textbuf_printf(&c->out, "%s ws ", item);
            int64_t a = rest_min > 0 ? rest_min - 1 : 0, b = rest_max < 0 ? -1 : rest_max - 1;
            if (!st && b != 0) {
                if (b < 0) st = textbuf_printf(&c->out, "(\",\" ws %s ws){%lld,} ", item, (long long)a);
                else st = textbuf_printf(&c->out, "(\",\" ws %s ws){%lld,%lld} ", item, (long long)a, (long long)b);
            }
            if (!st && rest_min == 0) st = textbuf_append_str(&c->out, ")? ");
        } else if (rest_max < 0) {
            st = textbuf_printf(&c->out, "(\",\" ws %s ws){%lld,} ", item, (long long)rest_min);
        } else {
            st = textbuf_printf(&c->out, "(\",\" ws %s ws){%lld,%lld} ", item, (long long)rest_min,
                                (long long)rest_max);
        }
    }
    for (int64_t i = 0; i < open && !st; i++) st = textbuf_append_str(&c->out, ")? ");
    if (!st) st = textbuf_append_str(&c->out, "\"]\"\n");
    free(prefix_rules);
    return st;
}

/* Merge allOf's object schemas into one properties/required pair. */
struct props {
    const struct vstring **names;
    value *schemas;
    bool *required;
    int n, cap;
    const struct vstring **req;   /* the names required, resolved by props_finish() */
    int n_req, cap_req;
};

static hearth_status props_add(struct props *p, const struct vstring *name, value schema)
{
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 8;
        const struct vstring **n = hearth_realloc(p->names, (size_t)cap * sizeof *n, "properties");
        if (!n) return HEARTH_E_NOMEM;
        p->names = n;
        value *s = hearth_realloc(p->schemas, (size_t)cap * sizeof *s, "properties");
        if (!s) return HEARTH_E_NOMEM;
        p->schemas = s;
        bool *r = hearth_realloc(p->required, (size_t)cap * sizeof *r, "properties");
        if (!r) return HEARTH_E_NOMEM;
        p->required = r;
        p->cap = cap;
    }
    p->names[p->n] = name;
    p->schemas[p->n] = schema;
    p->required[p->n] = false;
    p->n++;
    return HEARTH_OK;
}

static hearth_status props_require(struct props *p, const struct vstring *name)
{
    if (p->n_req == p->cap_req) {
        int cap = p->cap_req ? 2 * p->cap_req : 8;
        const struct vstring **r = hearth_realloc(p->req, (size_t)cap * sizeof *r, "properties");
        if (!r) return HEARTH_E_NOMEM;
        p->req = r;
        p->cap_req = cap;
    }
    p->req[p->n_req++] = name;
    return HEARTH_OK;
}

static int vstring_cmp(const struct vstring *a, const struct vstring *b)
{
    int c = memcmp(a->data, b->data, HEARTH_MIN(a->len, b->len));
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

struct named {
    const struct vstring *name;
    int index;
};

static int named_cmp(const void *x, const void *y)
{
    return vstring_cmp(((const struct named *)x)->name, ((const struct named *)y)->name);
}

/* Refuse a property defined twice and mark the required ones, through
 * the properties sorted by name: a schema with thousands of them costs
 * n log n, not n squared. */
static hearth_status props_finish(struct props *p)
{
    if (p->n == 0 && p->n_req == 0) return HEARTH_OK;
    struct named *order = hearth_malloc(((size_t)p->n + 1) * sizeof *order, "properties");
    if (!order) return HEARTH_E_NOMEM;
    for (int i = 0; i < p->n; i++) order[i] = (struct named){p->names[i], i};
    qsort(order, (size_t)p->n, sizeof *order, named_cmp);
    hearth_status st = HEARTH_OK;
    for (int i = 1; i < p->n && !st; i++)
        if (vstring_cmp(order[i - 1].name, order[i].name) == 0)
            st = hearth_error(HEARTH_E_UNSUPPORTED, "JSON schema: allOf defines property \"%.*s\" twice",
                              (int)order[i].name->len, order[i].name->data);
    for (int k = 0; k < p->n_req && !st; k++) {
        int lo = 0, hi = p->n;
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (vstring_cmp(order[mid].name, p->req[k]) < 0) lo = mid + 1;
            else hi = mid;
        }
        if (lo < p->n && vstring_cmp(order[lo].name, p->req[k]) == 0)
            p->required[order[lo].index] = true;
        else
            st = hearth_error(HEARTH_E_UNSUPPORTED,
                              "JSON schema: required property \"%.*s\" has no schema in "
                              "properties", (int)p->req[k]->len, p->req[k]->data);
    }
    free(order);
    return st;
}

static hearth_status props_collect(struct conv *c, value s, struct props *p, int depth)
{
    if (depth > SCHEMA_MAX_DEPTH) return hearth_error(HEARTH_E_RANGE, "JSON schema: nested too deeply");
    value *ref = get(s, "$ref");
    if (ref && ref->kind == VALUE_STRING) {
        value t;
        HEARTH_TRY(resolve_ref(c, ref->u.s, &t));
        return props_collect(c, t, p, depth + 1);
    }
    value *all = get(s, "allOf");
    if (all) {
        if (all->kind != VALUE_LIST) return hearth_error(HEARTH_E_FORMAT, "JSON schema: allOf is not an array");
        for (size_t i = 0; i < value_list_len(*all); i++) {
            value sub = value_list_at(*all, i);
            if (sub.kind != VALUE_DICT) return hearth_error(HEARTH_E_FORMAT, "JSON schema: allOf item is not a schema");
            HEARTH_TRY(check_keywords(sub));
            struct vdict *d = sub.u.dict;
            for (size_t j = 0; j < d->len; j++) {
                const struct vstring *k = d->entries[j].key;
                if (in_list(annotations, k->data, k->len)) continue;
                if (!in_list((const char *const[]){"type", "properties", "required", "allOf",
                                                   "$ref", "additionalProperties", NULL},
                             k->data, k->len))
                    return hearth_error(HEARTH_E_UNSUPPORTED,
                                        "JSON schema: allOf is supported only for object schemas "
                                        "(\"%.*s\")", (int)k->len, k->data);
            }
            HEARTH_TRY(props_collect(c, sub, p, depth + 1));
        }
    }
    value *type = get(s, "type");
    if (type && !(type->kind == VALUE_STRING && type->u.s->len == 6 && !memcmp(type->u.s->data, "object", 6)))
        return hearth_error(HEARTH_E_UNSUPPORTED, "JSON schema: allOf is supported only for object schemas");
    value *props = get(s, "properties");
    if (props) {
        if (props->kind != VALUE_DICT) return hearth_error(HEARTH_E_FORMAT, "JSON schema: properties is not an object");
        struct vdict *d = props->u.dict;
        for (size_t j = 0; j < d->len; j++) HEARTH_TRY(props_add(p, d->entries[j].key, d->entries[j].val));
    }
    value *req = get(s, "required");
    if (req) {
        if (req->kind != VALUE_LIST) return hearth_error(HEARTH_E_FORMAT, "JSON schema: required is not an array");
        for (size_t j = 0; j < value_list_len(*req); j++) {
            value r = value_list_at(*req, j);
            if (r.kind != VALUE_STRING) return hearth_error(HEARTH_E_FORMAT, "JSON schema: required holds a non-string");
            HEARTH_TRY(props_require(p, r.u.s));
        }
    }
    return HEARTH_OK;
}

static hearth_status convert_object(struct conv *c, value s, int depth, int rule)
{
    struct props p = {0};
    hearth_status st = props_collect(c, s, &p, depth);
    if (!st) st = props_finish(&p);
    value *additional = get(s, "additionalProperties");
    int *rules = NULL;
    if (!st && p.n) {
        rules = hearth_calloc((size_t)p.n, sizeof *rules, "schema rules");
        if (!rules) st = HEARTH_E_NOMEM;
    }
    for (int i = 0; i < p.n && !st; i++) st = convert(c, p.schemas[i], depth + 1, &rules[i]);
    if (!st && p.n == 0) {
        /* no properties: a map of additionalProperties (any value by default) */
        int val = -1;
        bool none = additional && additional->kind == VALUE_BOOL && !additional->u.b;
        if (additional && additional->kind == VALUE_DICT) st = convert(c, *additional, depth + 1, &val);
        char v[32];
        if (val >= 0) snprintf(v, sizeof v, "s%d", val);
        else snprintf(v, sizeof v, "json-value");
        if (!st && none) st = textbuf_printf(&c->out, "s%d ::= \"{\" ws \"}\"\n", rule);
        else if (!st)
            st = textbuf_printf(&c->out,
                                "s%d ::= \"{\" ws (json-string ws \":\" ws %s ws (\",\" ws json-string ws "
                                "\":\" ws %s ws)*)? \"}\"\n", rule, v, v);
    } else if (!st) {
        /* kv_i, and t_i: the properties from i on after one was written */
        int first = c->n_rules;
        c->n_rules += 3 * p.n + 2;
        for (int i = 0; i < p.n && !st; i++) {
            st = textbuf_printf(&c->out, "s%d ::= ", first + i);
            if (!st) st = put_literal(&c->out, "\"", 1);
            if (!st) {
                /* the key as a JSON string literal, without its quotes escaped twice */
                textbuf key;
                textbuf_init(&key, 1 << 20, "a property name");
                value kv = value_from_vstring((struct vstring *)p.names[i]);
                json_format fmt = {NULL, NULL, NULL, false, false};
                st = json_write(kv, &fmt, &key);
                if (!st) st = put_literal(&c->out, key.data + 1, key.len - 2);
                textbuf_free(&key);
            }
            if (!st) st = put_literal(&c->out, "\"", 1);
            if (!st) st = textbuf_printf(&c->out, " ws \":\" ws s%d ws\n", rules[i]);
        }
        int t0 = first + p.n, f0 = first + p.n + (p.n + 1);
        for (int i = 0; i <= p.n && !st; i++) {
            if (i == p.n) {
                st = textbuf_printf(&c->out, "s%d ::= \"\"\ns%d ::= \"\"\n", t0 + i, f0 + i);
                break;
            }
            if (p.required[i])
                st = textbuf_printf(&c->out, "s%d ::= \",\" ws s%d s%d\ns%d ::= s%d s%d\n", t0 + i,
                                    first + i, t0 + i + 1, f0 + i, first + i, t0 + i + 1);
            else
                st = textbuf_printf(&c->out, "s%d ::= (\",\" ws s%d)? s%d\ns%d ::= s%d s%d | s%d\n",
                                    t0 + i, first + i, t0 + i + 1, f0 + i, first + i, t0 + i + 1,
                                    f0 + i + 1);
        }
        if (!st) st = textbuf_printf(&c->out, "s%d ::= \"{\" ws s%d \"}\"\n", rule, f0);
    }
    free(rules);
    free(p.names);
    free(p.schemas);
    free(p.required);
    free(p.req);
    return st;
}

static bool is_type(const struct vstring *t, const char *name)
{
    return t->len == strlen(name) && !memcmp(t->data, name, t->len);
}

static hearth_status convert_typed(struct conv *c, value s, const struct vstring *t, int depth,
                                   int rule)
{
    if (is_type(t, "string")) return convert_string(c, s, rule);
    if (is_type(t, "integer")) {
        if (get(s, "minimum") || get(s, "maximum") || get(s, "exclusiveMinimum") ||
            get(s, "exclusiveMaximum"))
            return convert_integer_range(c, s, rule);
        return textbuf_printf(&c->out, "s%d ::= json-int\n", rule);
    }
    if (is_type(t, "number")) {
        if (get(s, "minimum") || get(s, "maximum") || get(s, "exclusiveMinimum") ||
            get(s, "exclusiveMaximum"))
            return hearth_error(HEARTH_E_UNSUPPORTED,
                                "JSON schema: minimum/maximum are supported for integers only");
        return textbuf_printf(&c->out, "s%d ::= json-number\n", rule);
    }
    if (is_type(t, "boolean")) return textbuf_printf(&c->out, "s%d ::= \"true\" | \"false\"\n", rule);
    if (is_type(t, "null")) return textbuf_printf(&c->out, "s%d ::= \"null\"\n", rule);
    if (is_type(t, "object")) return convert_object(c, s, depth, rule);
    if (is_type(t, "array")) return convert_array(c, s, depth, rule);
    return hearth_error(HEARTH_E_FORMAT, "JSON schema: unknown type \"%.*s\"", (int)t->len, t->data);
}

static hearth_status convert_alternatives(struct conv *c, value list, const char *kw, int depth,
                                          int rule)
{
    if (list.kind != VALUE_LIST || value_list_len(list) == 0)
        return hearth_error(HEARTH_E_FORMAT, "JSON schema: %s is not a non-empty array", kw);
    size_t n = value_list_len(list);
    int *rules = hearth_calloc(n, sizeof *rules, "schema rules");
    if (!rules) return HEARTH_E_NOMEM;
    hearth_status st = HEARTH_OK;
    for (size_t i = 0; i < n && !st; i++) st = convert(c, value_list_at(list, i), depth + 1, &rules[i]);
    if (!st) st = textbuf_printf(&c->out, "s%d ::= ", rule);
    for (size_t i = 0; i < n && !st; i++) st = textbuf_printf(&c->out, "%ss%d", i ? " | " : "", rules[i]);
    if (!st) st = textbuf_append_str(&c->out, "\n");
    free(rules);
    return st;
}

static hearth_status convert(struct conv *c, value s, int depth, int *rule)
{
    if (depth > SCHEMA_MAX_DEPTH)
        return hearth_error(HEARTH_E_RANGE, "JSON schema: nested deeper than %d", SCHEMA_MAX_DEPTH);
    HEARTH_TRY(new_rule(c, rule));
    if (s.kind == VALUE_BOOL) {
        if (!s.u.b) return hearth_error(HEARTH_E_FORMAT, "JSON schema: false matches nothing");
        return textbuf_printf(&c->out, "s%d ::= json-value\n", *rule);
    }
    if (s.kind != VALUE_DICT) return hearth_error(HEARTH_E_FORMAT, "JSON schema: a schema is not an object");
    HEARTH_TRY(check_keywords(s));
    value *ref = get(s, "$ref");
    if (ref) {
        if (ref->kind != VALUE_STRING) return hearth_error(HEARTH_E_FORMAT, "JSON schema: $ref is not a string");
        value t;
        HEARTH_TRY(resolve_ref(c, ref->u.s, &t));
        /* recursive schemas: one rule per target */
        const void *key = t.kind == VALUE_DICT ? (const void *)t.u.dict : NULL;
        for (int i = 0; key && i < c->n_refs; i++)
            if (c->ref_nodes[i] == key) return textbuf_printf(&c->out, "s%d ::= s%d\n", *rule, c->ref_rules[i]);
        if (c->n_refs == c->cap_refs) {
            int cap = c->cap_refs ? 2 * c->cap_refs : 8;
            const void **n = hearth_realloc(c->ref_nodes, (size_t)cap * sizeof *n, "schema refs");
            if (!n) return HEARTH_E_NOMEM;
            c->ref_nodes = n;
            int *r = hearth_realloc(c->ref_rules, (size_t)cap * sizeof *r, "schema refs");
            if (!r) return HEARTH_E_NOMEM;
            c->ref_rules = r;
            c->cap_refs = cap;
        }
        int target = 0;
        HEARTH_TRY(new_rule(c, &target));
        c->ref_nodes[c->n_refs] = key;
        c->ref_rules[c->n_refs++] = target;
        HEARTH_TRY(textbuf_printf(&c->out, "s%d ::= s%d\n", *rule, target));
        int inner;
        HEARTH_TRY(convert(c, t, depth + 1, &inner));
        return textbuf_printf(&c->out, "s%d ::= s%d\n", target, inner);
    }
    value *cst = get(s, "const");
    if (cst) {
        HEARTH_TRY(textbuf_printf(&c->out, "s%d ::= ", *rule));
        HEARTH_TRY(put_json_literal(&c->out, *cst));
        return textbuf_append_str(&c->out, "\n");
    }
    value *en = get(s, "enum");
    if (en) {
        if (en->kind != VALUE_LIST || value_list_len(*en) == 0)
            return hearth_error(HEARTH_E_FORMAT, "JSON schema: enum is not a non-empty array");
        HEARTH_TRY(textbuf_printf(&c->out, "s%d ::= ", *rule));
        for (size_t i = 0; i < value_list_len(*en); i++) {
            if (i) HEARTH_TRY(textbuf_append_str(&c->out, " | "));
            HEARTH_TRY(put_json_literal(&c->out, value_list_at(*en, i)));
        }
        return textbuf_append_str(&c->out, "\n");
    }
    value *any = get(s, "anyOf"), *one = get(s, "oneOf");
    if (any || one) {
        if (any && one) return hearth_error(HEARTH_E_UNSUPPORTED, "JSON schema: anyOf together with oneOf");
        struct vdict *d = s.u.dict;
        for (size_t i = 0; i < d->len; i++) {
            const struct vstring *k = d->entries[i].key;
            if (!in_list(annotations, k->data, k->len) && !is_type(k, "anyOf") && !is_type(k, "oneOf"))
                return hearth_error(HEARTH_E_UNSUPPORTED,
                                    "JSON schema: \"%.*s\" beside %s is not supported",
                                    (int)k->len, k->data, any ? "anyOf" : "oneOf");
        }
        return convert_alternatives(c, any ? *any : *one, any ? "anyOf" : "oneOf", depth, *rule);
    }
    value *type = get(s, "type");
    if (!type) {
        if (get(s, "properties") || get(s, "allOf") || get(s, "additionalProperties") ||
            get(s, "required"))
            return convert_object(c, s, depth, *rule);
        if (get(s, "items") || get(s, "prefixItems") || get(s, "minItems") || get(s, "maxItems"))
            return convert_array(c, s, depth, *rule);
        if (get(s, "pattern") || get(s, "format") || get(s, "minLength") || get(s, "maxLength"))
            return convert_string(c, s, *rule);
        if (get(s, "minimum") || get(s, "maximum"))
            return hearth_error(HEARTH_E_UNSUPPORTED,
                                "JSON schema: minimum/maximum without \"type\": \"integer\"");
        return textbuf_printf(&c->out, "s%d ::= json-value\n", *rule);
    }
    if (type->kind == VALUE_STRING) return convert_typed(c, s, type->u.s, depth, *rule);
    if (type->kind != VALUE_LIST || value_list_len(*type) == 0)
        return hearth_error(HEARTH_E_FORMAT, "JSON schema: type is not a string or an array of them");
    size_t n = value_list_len(*type);
    int *rules = hearth_calloc(n, sizeof *rules, "schema rules");
    if (!rules) return HEARTH_E_NOMEM;
    hearth_status st = HEARTH_OK;
    for (size_t i = 0; i < n && !st; i++) {
        value t = value_list_at(*type, i);
        if (t.kind != VALUE_STRING) st = hearth_error(HEARTH_E_FORMAT, "JSON schema: type holds a non-string");
        if (!st) st = new_rule(c, &rules[i]);
        if (!st) st = convert_typed(c, s, t.u.s, depth + 1, rules[i]);
    }
    if (!st) st = textbuf_printf(&c->out, "s%d ::= ", *rule);
    for (size_t i = 0; i < n && !st; i++) st = textbuf_printf(&c->out, "%ss%d", i ? " | " : "", rules[i]);
    if (!st) st = textbuf_append_str(&c->out, "\n");
    free(rules);
    return st;
}

hearth_status json_schema_to_gbnf(const char *schema, size_t len, struct gbudget *budget,
                                 char **gbnf_out)
{
    struct conv c = {0};
    c.budget = budget;
    HEARTH_TRY(json_parse(schema, len, "JSON schema", &c.root));
    textbuf_init(&c.out, 64u << 20, "the schema's grammar");
    hearth_status st = textbuf_append_str(&c.out, "root ::= s0\n" JSON_BASE_RULES);
    int root = 0;
    if (!st) st = convert(&c, c.root, 0, &root);
    value_unref(c.root);
    free(c.ref_nodes);
    free(c.ref_rules);
    if (st) {
        textbuf_free(&c.out);
        return st;
    }
    *gbnf_out = textbuf_take(&c.out, NULL);
    if (!*gbnf_out) return HEARTH_E_NOMEM;
    /* what the translation cannot express (a repetition of something that
     * may be empty, as in the pattern "(a?)*", or counts beyond the
     * grammar's limits) is refused here, not when it is compiled */
    struct grammar_ir ir;
    st = grammar_ir_parse(*gbnf_out, strlen(*gbnf_out), NULL, budget, &ir);
    if (st == HEARTH_E_INTERRUPTED || st == HEARTH_E_NOMEM || st == HEARTH_E_RANGE) {
        free(*gbnf_out);
        *gbnf_out = NULL;
        return st;
    }
    if (st) {
        hearth_error_prefix("JSON schema: the schema's grammar is not supported");
        free(*gbnf_out);
        *gbnf_out = NULL;
        return HEARTH_E_UNSUPPORTED;
    }
    grammar_ir_free(&ir);
    return HEARTH_OK;
}

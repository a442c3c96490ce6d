/*
 * test-grammar.c -- the grammar engine: the GBNF notation construct by
 * construct (what each accepts and refuses, checked by running the
 * matcher over strings), parse errors with their line and column, the
 * token masks against a brute-force mask (every token simulated) on
 * random reachable states of several grammars and vocabularies, and the
 * JSON Schema translation (accepted and refused strings, refused
 * keywords named).
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "grammar_match.h"
#include "testutil.h"


#define ACCEPTS(g, s) ck_assert_msg(grammar_matches(g, s), "%s should accept \"%s\"", g, s)
#define REFUSES(g, s) ck_assert_msg(!grammar_matches(g, s), "%s should refuse \"%s\"", g, s)

START_TEST(test_constructs)
{
    /* sequence, literal, alternation */
    ACCEPTS("root ::= \"ab\" \"c\"", "abc");
    REFUSES("root ::= \"ab\" \"c\"", "ab");
    REFUSES("root ::= \"ab\" \"c\"", "abcd");
    ACCEPTS("root ::= \"a\" | \"b\"", "b");
    REFUSES("root ::= \"a\" | \"b\"", "ab");
    /* grouping and rules */
    ACCEPTS("root ::= (\"a\" | \"b\") x\nx ::= \"c\"", "bc");
    REFUSES("root ::= (\"a\" | \"b\") x\nx ::= \"c\"", "c");
    /* repetition */
    ACCEPTS("root ::= \"a\"?", "");
    ACCEPTS("root ::= \"a\"?", "a");
    REFUSES("root ::= \"a\"?", "aa");
    ACCEPTS("root ::= \"a\"*", "");
    ACCEPTS("root ::= \"a\"*", "aaaa");
    REFUSES("root ::= \"a\"+", "");
    ACCEPTS("root ::= \"a\"+", "aaa");
    ACCEPTS("root ::= \"ab\"{2}", "abab");
    REFUSES("root ::= \"ab\"{2}", "ab");
    REFUSES("root ::= \"ab\"{2}", "ababab");
    ACCEPTS("root ::= \"a\"{2,}", "aaaaa");
    REFUSES("root ::= \"a\"{2,}", "a");
    ACCEPTS("root ::= \"a\"{1,3}", "aaa");
    REFUSES("root ::= \"a\"{1,3}", "aaaa");
    ACCEPTS("root ::= \"a\"{,2}", "");
    REFUSES("root ::= \"a\"{,2}", "aaa");
    ACCEPTS("root ::= (\"x\" [0-9])* \"!\"", "x1x2!");
    /* character classes: ranges, negation, escapes, UTF-8 */
    ACCEPTS("root ::= [a-c0-9_]+", "ab0_");
    REFUSES("root ::= [a-c0-9_]+", "abd");
    ACCEPTS("root ::= [^a-z]", "Q");
    REFUSES("root ::= [^a-z]", "q");
    ACCEPTS("root ::= [^a-z]", "\xc3\xa9");         /* é, two bytes */
    ACCEPTS("root ::= [^a-z]", "\xf0\x9f\x98\x80"); /* U+1F600 */
    REFUSES("root ::= [^a-z]", "\xc3");             /* half a character */
    REFUSES("root ::= [^a-z]", "\xed\xa0\x80");     /* a surrogate */
    ACCEPTS("root ::= [\\u00e0-\\u00ff]", "\xc3\xa9");
    REFUSES("root ::= [\\u00e0-\\u00ff]", "\xc3\x80");
    ACCEPTS("root ::= [\\x41-\\x43\\]]+", "AC]");
    ACCEPTS("root ::= [\\U0001F600-\\U0001F64F]", "\xf0\x9f\x98\x80");
    REFUSES("root ::= [\\U0001F600-\\U0001F64F]", "\xf0\x9f\x9a\x80");
    ACCEPTS("root ::= \"\\n\\t\\\"\\\\\"", "\n\t\"\\");
    ACCEPTS("root ::= \"\xc3\xa9t\xc3\xa9\"", "\xc3\xa9t\xc3\xa9");
    ACCEPTS("root ::= \"\\u00e9\"", "\xc3\xa9");
    ACCEPTS("root ::= .{3}", "a\xc3\xa9z");
    REFUSES("root ::= .{3}", "ab");
    /* comments, newlines inside groups and after | */
    ACCEPTS("# a comment\nroot ::= ( \"a\" # inner\n  | \"b\" ) |\n  \"c\"  # trailing\n", "c");
    /* recursion that is not left recursion */
    ACCEPTS("root ::= \"(\" root \")\" | \"x\"", "((x))");
    REFUSES("root ::= \"(\" root \")\" | \"x\"", "((x)");
}
END_TEST

/* The message of a failing parse. */
static const char *parse_error(const char *gbnf)
{
    struct grammar_ir ir;
    hearth_status st = grammar_ir_parse(gbnf, strlen(gbnf), NULL, NULL, &ir);
    ck_assert_msg(st != HEARTH_OK, "grammar %s should fail", gbnf);
    return hearth_last_error();
}

#define ERROR_HAS(g, text) \
    do { \
        const char *m_ = parse_error(g); \
        ck_assert_msg(strstr(m_, text) != NULL, "error for %s: \"%s\" lacks \"%s\"", g, m_, text); \
    } while (0)

START_TEST(test_errors)
{
    ERROR_HAS("root ::= \"a", "line 1, column 10: unterminated literal");
    ERROR_HAS("root ::= \"a\"\nx ::= [a-", "line 2, column 7: unterminated character class");
    ERROR_HAS("root ::= x", "line 1, column 10: undefined rule 'x'");
    ERROR_HAS("root ::= \"a\"\n\nfoo \"b\"", "line 3, column 5: expected '::='");
    ERROR_HAS("root ::= \"a\" )", "line 1, column 14: unexpected ')'");
    ERROR_HAS("root ::= * \"a\"", "line 1, column 10: '*' follows nothing");
    ERROR_HAS("root ::= \"a\"{3,1}", "line 1, column 13: repetition {3,1}");
    ERROR_HAS("root ::= [z-a]", "line 1, column 11: range U+007A-U+0061 is empty");
    ERROR_HAS("root ::= \"\\q\"", "line 1, column 11: unknown escape \\q");
    ERROR_HAS("root ::= \"\\uD800\"", "not a Unicode scalar value");
    ERROR_HAS("root ::= []", "line 1, column 10: empty character class");
    ERROR_HAS("root ::= (\"a\"", "expected ')'");
    ERROR_HAS("x ::= \"a\"", "no rule 'root'");
    ERROR_HAS("root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice");
    ERROR_HAS("root ::= root \"a\" | \"b\"", "left-recursive");
    ERROR_HAS("root ::= (\"a\"?)* \"b\"", "left-recursive");
    ERROR_HAS("root ::= \"\xc3\xa9\" \xff", "line 1, column 14: invalid UTF-8");
    ERROR_HAS("root ::= \"\xc3\xa9\xc3\xa9\" $", "line 1, column 15: unexpected '$'");
}
END_TEST

/* ---- masks against the brute-force mask ------------------------------ */

/* A vocabulary of n tokens drawn from the grammar's alphabet, with
 * multi-byte and broken UTF-8, and one end-of-generation token. */
static void random_vocab(test_rng *rng, int32_t n, const char *alphabet, struct gvocab *v)
{
    char **pieces = calloc((size_t)n, sizeof *pieces);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    uint8_t *kinds = calloc((size_t)n, 1);
    static const char *extra[] = {"\xc3\xa9", "\xc3", "\xa9", "\xe2\x82\xac", "\xe2\x82", "\x82\xac",
                                  "\xf0\x9f\x98\x80", "\xf0\x9f", "\x98\x80", "\\u00", "\"", "\",",
                                  "\":", "\": \"", "\n", "  ", "\"}", "\"]", "\"),", ", \"",
                                  "\xc3\"", "\"\xa9", "\"}\n", "\")\")"};
    /* tokens that leave a key at more than one depth (see the grammars) */
    static const char *fixed[] = {"a\"x", "a\"\"x", "b2\"x", "c\"1\"x", "[a\"x", "a21\"x", "\xc3\xa9\"}",
                                  "\"},\"", "a\xc3", "c\"\xc3"};
    size_t na = strlen(alphabet);
    for (int32_t t = 0; t < n; t++) {
        char buf[16];
        size_t len = 0;
        if (t == 0) {
            kinds[t] = GTOK_EOG;
        } else if (t == 1) {
            kinds[t] = GTOK_NONE; /* a control token */
        } else if (t - 2 < (int32_t)HEARTH_ARRAY_LEN(fixed)) {
            len = strlen(fixed[t - 2]);
            memcpy(buf, fixed[t - 2], len);
            kinds[t] = GTOK_TEXT;
        } else {
            int k = 1 + (int)(test_rng_next(rng) % 4);
            for (int i = 0; i < k && len < 10; i++) {
                if (test_rng_next(rng) % 5 == 0) {
                    const char *e = extra[test_rng_next(rng) % HEARTH_ARRAY_LEN(extra)];
                    size_t el = strlen(e);
                    if (len + el > 12) break;
                    memcpy(buf + len, e, el);
                    len += el;
                } else {
                    buf[len++] = alphabet[test_rng_next(rng) % na];
                }
            }
            kinds[t] = GTOK_TEXT;
        }
        pieces[t] = malloc(len + 1);
        memcpy(pieces[t], buf, len);
        lens[t] = len;
    }
    ck_assert_int_eq(gvocab_build(n, (const char *const *)pieces, lens, kinds, v), HEARTH_OK);
    for (int32_t t = 0; t < n; t++) free(pieces[t]);
    free(pieces);
    free(lens);
    free(kinds);
}

static const char *const mask_grammars[] = {
    /* arithmetic */
    "root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\nterm ::= factor ((\"*\" | \"/\") factor)*\n"
    "factor ::= [0-9]+ | \"(\" expr \")\" | \"-\" factor\n",
    /* JSON mode */
    NULL,
    /* lists of words with UTF-8 */
    "root ::= \"[\" item (\", \" item)* \"]\"\nitem ::= [a-z\\u00e9\\u20ac]{1,5} | \"\\\"\" [^\"\\n]* \"\\\"\"\n",
    /* ambiguity */
    "root ::= (\"ab\" | \"a\" \"b\" | \"a\" [b-c])* \"x\"?\n",
    /* quoted strings whose closing tokens carry what follows: tokens leave
     * the cached key part way, at one or several depths */
    "root ::= \"(\" item (\", \" item)* \")\"\nitem ::= \"\\\"\" [^\"]* \"\\\"\" (\":\" item)? | \"(\" item \")\" | [a-c]\n",
    /* short rules nested deeply, ending one after the other */
    "root ::= a+\na ::= \"(\" b \")\" | b\nb ::= c \"x\"? \"}\"?\nc ::= [a-c\\u00e9] \"\\\"\"? | \"[\" a \"]\"\n",
    /* the top three frames may all end after one byte or after two */
    "root ::= item+\nitem ::= p \"\\\"x\" | p \"1x\" | \"y\"\np ::= \"[\" q\nq ::= r \"1\"?\nr ::= s \"2\"?\ns ::= [a-c] \"\\\"\"?\n",
    /* a JSON-schema grammar (set below) */
    "",
};

static const char mask_schema[] =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\","
    "\"minimum\":0,\"maximum\":150},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
    "\"maxLength\":3},\"maxItems\":3},\"note\":{\"type\":[\"string\",\"null\"]}},\"required\":[\"name\"]}";

/* Loop index i: grammar i / 2; odd i keep one transition table at a time
 * in an entry's walk (every other step drops them all) and start the
 * automaton afresh at every entry; even ones keep it across entries. */
START_TEST(test_mask_matches_brute_force)
{
    const int gi = _i / 2;
    const char *gbnf = mask_grammars[gi];
    char *schema_text = NULL;
    if (!gbnf) gbnf = json_object_gbnf;
    if (!*gbnf) {
        ck_assert_int_eq(json_schema_to_gbnf(mask_schema, strlen(mask_schema), NULL, &schema_text), HEARTH_OK);
        gbnf = schema_text;
    }
    struct grammar_ir ir;
    ck_assert_msg(grammar_ir_parse(gbnf, strlen(gbnf), NULL, NULL, &ir) == HEARTH_OK, "%s",
                  hearth_last_error());
    test_rng rng;
    test_rng_seed(&rng, 1234 + (uint64_t)gi);
    struct gvocab v;
    random_vocab(&rng, 600, "0123456789+-*/()[]{}, :\"abcxyz\\n.eEtrufalsn", &v);
    struct gcache *cache;
    ck_assert_int_eq(gcache_new(&cache), HEARTH_OK);
    struct gmask_work w;
    ck_assert_int_eq(gmask_work_init(&w, &v), HEARTH_OK);
    if (_i % 2) w.dfa_max_tables = w.dfa_max_states = 1;
    struct garena a, spare;
    ck_assert_int_eq(garena_init(&a), HEARTH_OK);
    ck_assert_int_eq(garena_init(&spare), HEARTH_OK);
    size_t words = ((size_t)v.n_tokens + 63) / 64;
    uint64_t *fast = calloc(words, 8), *slow = calloc(words, 8);
    struct gset set = {0}, next = {0};
    int checked = 0;
    for (int walk = 0; walk < 30; walk++) {
        garena_truncate(&a, 0);
        ck_assert_int_eq(gset_initial(&ir, &a, &set), HEARTH_OK);
        for (int step = 0; step < 40; step++) {
            ck_assert_int_eq(gmask_compute(&ir, &v, cache, &a, &set, &w, fast), HEARTH_OK);
            ck_assert_int_eq(gmask_brute(&ir, &v, &a, &set, slow), HEARTH_OK);
            for (int32_t t = 0; t < v.n_tokens; t++) {
                bool f = (fast[t >> 6] >> (t & 63)) & 1, s = (slow[t >> 6] >> (t & 63)) & 1;
                ck_assert_msg(f == s, "grammar %d (tables %d) walk %d step %d token %d (\"%.*s\"): fast %d brute %d",
                              gi, w.dfa_max_tables, walk, step, t, (int)v.len[t], v.bytes + v.off[t], f, s);
            }
            checked++;
            /* a random allowed text token advances the state */
            int32_t allowed[600], n = 0;
            for (int32_t t = 0; t < v.n_tokens; t++)
                if (v.kind[t] == GTOK_TEXT && ((slow[t >> 6] >> (t & 63)) & 1)) allowed[n++] = t;
            if (n == 0) break;
            int32_t t = allowed[test_rng_next(&rng) % (uint64_t)n];
            ck_assert_int_eq(gset_advance_bytes(&ir, &a, &set, v.bytes + v.off[t], v.len[t], &next),
                             HEARTH_OK);
            ck_assert_int_gt(next.n, 0);
            ck_assert_int_eq(gset_rebuild(&a, &next, &spare, &set), HEARTH_OK);
            struct garena tmp = a;
            a = spare;
            spare = tmp;
        }
    }
    ck_assert_int_gt(checked, 100);
    free(fast);
    free(slow);
    gset_free(&set);
    gset_free(&next);
    garena_free(&a);
    garena_free(&spare);
    gmask_work_free(&w);
    gcache_free(cache);
    gvocab_free(&v);
    grammar_ir_free(&ir);
    free(schema_text);
}
END_TEST

/* The mask after the bytes `prefix` against the brute-force mask, on a
 * vocabulary of the given tokens (with an end-of-generation token 0);
 * returns whether token `want` (an index into toks) is allowed. */
static bool mask_after(const char *gbnf, const char *prefix, const char *const *toks, int n_toks,
                       int want, int max_tables)
{
    struct grammar_ir ir;
    ck_assert_msg(grammar_ir_parse(gbnf, strlen(gbnf), NULL, NULL, &ir) == HEARTH_OK, "%s", hearth_last_error());
    const int32_t n = n_toks + 1;
    const char **pieces = calloc((size_t)n, sizeof *pieces);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    uint8_t *kinds = calloc((size_t)n, 1);
    pieces[0] = "";
    kinds[0] = GTOK_EOG;
    for (int i = 0; i < n_toks; i++) {
        pieces[i + 1] = toks[i];
        lens[i + 1] = strlen(toks[i]);
        kinds[i + 1] = GTOK_TEXT;
    }
    struct gvocab v;
    ck_assert_int_eq(gvocab_build(n, pieces, lens, kinds, &v), HEARTH_OK);
    struct gcache *cache;
    ck_assert_int_eq(gcache_new(&cache), HEARTH_OK);
    struct gmask_work w;
    ck_assert_int_eq(gmask_work_init(&w, &v), HEARTH_OK);
    w.dfa_max_tables = w.dfa_max_states = max_tables;
    struct garena a;
    ck_assert_int_eq(garena_init(&a), HEARTH_OK);
    struct gset set = {0}, next = {0};
    ck_assert_int_eq(gset_initial(&ir, &a, &set), HEARTH_OK);
    ck_assert_int_eq(gset_advance_bytes(&ir, &a, &set, (const unsigned char *)prefix, strlen(prefix), &next),
                     HEARTH_OK);
    ck_assert_msg(next.n > 0, "%s refuses \"%s\"", gbnf, prefix);
    uint64_t fast[4] = {0}, slow[4] = {0};
    ck_assert_int_lt(n, 256);
    /* twice: the second mask comes from the cache */
    for (int round = 0; round < 2; round++) {
        ck_assert_int_eq(gmask_compute(&ir, &v, cache, &a, &next, &w, fast), HEARTH_OK);
        ck_assert_int_eq(gmask_brute(&ir, &v, &a, &next, slow), HEARTH_OK);
        for (int32_t t = 0; t < n; t++) {
            bool f = (fast[t >> 6] >> (t & 63)) & 1, sl = (slow[t >> 6] >> (t & 63)) & 1;
            ck_assert_msg(f == sl, "%s after \"%s\" (tables %d, round %d): token \"%s\" fast %d brute %d", gbnf,
                          prefix, max_tables, round, t ? toks[t - 1] : "<eog>", f, sl);
        }
    }
    bool allowed = (slow[(want + 1) >> 6] >> ((want + 1) & 63)) & 1;
    gset_free(&set);
    gset_free(&next);
    garena_free(&a);
    gmask_work_free(&w);
    gcache_free(cache);
    gvocab_free(&v);
    grammar_ir_free(&ir);
    free(pieces);
    free(lens);
    free(kinds);
    return allowed;
}

/* Tokens that finish the cached key's positions part way, some at more
 * than one depth (the key's frames may all end after one byte and after
 * two), some inside a UTF-8 character, some only by the stack below. */
START_TEST(test_mask_tails)
{
    static const char *const toks[] = {
        "a\"x", "a\"\"x", "a1x", "a\"1x", "a2\"x", "a", "\"x", "x", "a\"", "[", "[a\"x", "a12\"x",
        "a\xc3", "\xc3\xa9\"x", "\xc3\xa9", "\xa9\"x", "\xa9", "\"", "\"1x", "1x", "a\"\xc3", "\xc3", "a21\"x",
    };
    const int n = (int)HEARTH_ARRAY_LEN(toks);
    /* after "[": s's frame ends after "a" or after "a\"", and so do r's and
     * q's; what follows is item's "\"x" or "1x" */
    const char *deep = "root ::= item+\nitem ::= p \"\\\"x\" | p \"1x\" | \"y\"\np ::= \"[\" q\n"
                       "q ::= r \"1\"?\nr ::= s \"2\"?\ns ::= [a-c\\u00e9] \"\\\"\"?\n";
    for (int tables = 0; tables <= 1; tables++) {
        ck_assert(mask_after(deep, "[", toks, n, 0, tables));  /* a"x: the tail "x after one byte */
        ck_assert(mask_after(deep, "[", toks, n, 1, tables));  /* a""x: "x after two */
        ck_assert(mask_after(deep, "[", toks, n, 3, tables));  /* a"1x: 1x after two */
        ck_assert(mask_after(deep, "[", toks, n, 4, tables));  /* a2"x */
        ck_assert(!mask_after(deep, "[", toks, n, 11, tables)); /* a12"x: q's 1 comes after r's 2 */
        ck_assert(mask_after(deep, "[", toks, n, 22, tables));  /* a21"x */
        ck_assert(mask_after(deep, "[", toks, n, 13, tables)); /* é"x */
        ck_assert(mask_after(deep, "[\xc3", toks, n, 15, tables)); /* inside é: \xa9"x */
        ck_assert(!mask_after(deep, "[", toks, n, 12, tables)); /* a\xc3: no such character */
        ck_assert(mask_after(deep, "[a", toks, n, 17, tables)); /* " alone */
        ck_assert(mask_after(deep, "[a\"", toks, n, 6, tables)); /* "x after the quote */
        ck_assert(!mask_after(deep, "[a\"", toks, n, 0, tables));
        /* a string closed by a token that carries what follows it */
        const char *str = "root ::= \"(\" v (\",\" v)* \")\"\nv ::= \"\\\"\" [^\"]* \"\\\"\" | \"[\" v \"]\"\n";
        ck_assert(!mask_after(str, "([\"a", toks, n, 0, tables));
        ck_assert(mask_after(str, "(\"", toks, n, 5, tables));
    }
}
END_TEST

/* ---- JSON Schema ---------------------------------------------------- */

static char *schema_gbnf(const char *schema)
{
    char *g = NULL;
    hearth_status st = json_schema_to_gbnf(schema, strlen(schema), NULL, &g);
    ck_assert_msg(st == HEARTH_OK, "schema %s: %s", schema, hearth_last_error());
    return g;
}

static void schema_case(const char *schema, const char *text, bool valid)
{
    char *g = schema_gbnf(schema);
    bool m = grammar_matches(g, text);
    ck_assert_msg(m == valid, "schema %s %s %s", schema, valid ? "should accept" : "should refuse",
                  text);
    free(g);
}

START_TEST(test_json_schema)
{
    schema_case("{\"type\":\"integer\"}", "-42", true);
    schema_case("{\"type\":\"integer\"}", "04", false);
    schema_case("{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120}", "-5", true);
    schema_case("{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120}", "120", true);
    schema_case("{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120}", "121", false);
    schema_case("{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120}", "-6", false);
    schema_case("{\"type\":\"integer\",\"exclusiveMinimum\":10}", "10", false);
    schema_case("{\"type\":\"integer\",\"exclusiveMinimum\":10}", "11", true);
    schema_case("{\"type\":\"number\"}", "-1.5e+3", true);
    schema_case("{\"type\":\"number\"}", "1.", false);
    schema_case("{\"type\":[\"string\",\"null\"]}", "null", true);
    schema_case("{\"type\":[\"string\",\"null\"]}", "\"a\\u00e9\\n\"", true);
    schema_case("{\"type\":\"string\"}", "\"\\ud800\"", false);
    schema_case("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"ab\"", true);
    schema_case("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"abcd\"", false);
    schema_case("{\"enum\":[\"red\",1,null,{\"a\":[true]}]}", "{\"a\":[true]}", true);
    schema_case("{\"enum\":[\"red\",1,null]}", "\"blue\"", false);
    schema_case("{\"const\":\"x\\\"y\"}", "\"x\\\"y\"", true);
    const char *obj = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
                      "\"b\":{\"type\":\"boolean\"},\"c\":{\"type\":\"null\"}},\"required\":[\"b\"]}";
    schema_case(obj, "{\"b\":true}", true);
    schema_case(obj, "{ \"a\": 1, \"b\": false, \"c\": null }", true);
    schema_case(obj, "{\"a\":1,\"c\":null}", false);
    schema_case(obj, "{\"b\":true,\"a\":1}", false); /* schema order */
    schema_case(obj, "{\"b\":true,}", false);
    schema_case("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}",
                "{\"x\":1,\"y\":2}", true);
    schema_case("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}",
                "{\"x\":\"1\"}", false);
    const char *arr = "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":3}";
    schema_case(arr, "[1, 2,3]", true);
    schema_case(arr, "[]", false);
    schema_case(arr, "[1,2,3,4]", false);
    const char *tuple = "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}],"
                        "\"items\":false,\"minItems\":1}";
    schema_case(tuple, "[\"a\",1]", true);
    schema_case(tuple, "[\"a\"]", true);
    schema_case(tuple, "[\"a\",1,2]", false);
    schema_case(tuple, "[1]", false);
    schema_case("{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3}$\"}", "\"AB-123\"", true);
    schema_case("{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3}$\"}", "\"AB-12\"", false);
    schema_case("{\"type\":\"string\",\"pattern\":\"ab|cd\"}", "\"xxcdyy\"", true);
    schema_case("{\"type\":\"string\",\"pattern\":\"^(ab)+$\"}", "\"abab\"", true);
    schema_case("{\"type\":\"string\",\"pattern\":\"^(ab)+$\"}", "\"aba\"", false);
    schema_case("{\"type\":\"string\",\"format\":\"date\"}", "\"2024-02-28\"", true);
    schema_case("{\"type\":\"string\",\"format\":\"date\"}", "\"2024-02-30\"", false);
    schema_case("{\"type\":\"string\",\"format\":\"date\"}", "\"0000-01-01\"", false);
    schema_case("{\"type\":\"string\",\"format\":\"date\"}", "\"0001-01-01\"", true);
    schema_case("{\"type\":\"string\",\"format\":\"date-time\"}", "\"2024-12-31T23:59:59.5Z\"", true);
    schema_case("{\"type\":\"string\",\"format\":\"time\"}", "\"24:00:00Z\"", false);
    schema_case("{\"type\":\"string\",\"format\":\"uuid\"}", "\"123e4567-e89b-12d3-a456-426614174000\"", true);
    schema_case("{\"type\":\"string\",\"format\":\"email\"}", "\"a.b@example.org\"", true);
    schema_case("{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}", "\"s\"", true);
    schema_case("{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}]}", "true", false);
    const char *all = "{\"allOf\":[{\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},"
                      "{\"properties\":{\"b\":{\"type\":\"string\"}}}]}";
    schema_case(all, "{\"a\":1,\"b\":\"x\"}", true);
    schema_case(all, "{\"b\":\"x\"}", false);
    const char *tree = "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
                       "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},"
                       "\"required\":[\"v\"]}},\"$ref\":\"#/$defs/node\"}";
    schema_case(tree, "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[]}]}", true);
    schema_case(tree, "{\"v\":1,\"kids\":[{\"kids\":[]}]}", false);
    schema_case("{}", "[1,{\"a\":null}]", true);
    /* objects with several properties inside objects: each gets its own rules */
    const char *nested = "{\"properties\":{\"a\":{\"properties\":{\"x\":{\"type\":\"integer\"},"
                         "\"y\":{\"type\":\"integer\"},\"z\":{\"type\":\"null\"}}},"
                         "\"b\":{\"properties\":{\"u\":{\"type\":\"boolean\"},\"v\":{\"type\":\"null\"}}}},"
                         "\"required\":[\"a\",\"b\"]}";
    schema_case(nested, "{\"a\":{\"x\":1,\"z\":null},\"b\":{\"v\":null}}", true);
    schema_case(nested, "{\"a\":{\"y\":1,\"x\":2},\"b\":{}}", false);
    schema_case("true", "\"x\"", true);
    /* JSON mode */
    ck_assert(grammar_matches(json_object_gbnf, "{\"a\": [1, 2.5e3, \"x\", {}]}"));
    ck_assert(!grammar_matches(json_object_gbnf, "[1]"));
}
END_TEST

static void schema_refused(const char *schema, const char *text)
{
    char *g = NULL;
    hearth_status st = json_schema_to_gbnf(schema, strlen(schema), NULL, &g);
    ck_assert_msg(st != HEARTH_OK, "schema %s should be refused", schema);
    ck_assert_msg(strstr(hearth_last_error(), text) != NULL, "error for %s: \"%s\" lacks \"%s\"",
                  schema, hearth_last_error(), text);
}

START_TEST(test_json_schema_refused)
{
    schema_refused("{\"type\":\"string\",\"contentEncoding\":\"base64\"}", "\"contentEncoding\"");
    schema_refused("{\"properties\":{\"a\":{\"multipleOf\":2}}}", "\"multipleOf\"");
    schema_refused("{\"type\":\"string\",\"format\":\"hostname\"}", "format \"hostname\"");
    schema_refused("{\"type\":\"number\",\"minimum\":1}", "integers only");
    schema_refused("{\"$ref\":\"http://example.org/s\"}", "$ref");
    schema_refused("{\"type\":\"string\",\"pattern\":\"(?=a)\"}", "lookaround");
    schema_refused("{\"type\":\"string\",\"pattern\":\"a\\\\1\"}", "escape");
    schema_refused("{\"type\":\"integer\",\"minimum\":5,\"maximum\":1}", "no integer");
    schema_refused("{\"type\":\"object\",\"required\":[\"x\"]}", "\"x\"");
    schema_refused("{\"type\":\"strin\"}", "unknown type");
    schema_refused("{\"type\": ", "JSON schema");
    schema_refused("false", "matches nothing");
    /* found by fuzzing: what the grammar cannot run is refused at translation */
    schema_refused("{\"type\":\"string\",\"pattern\":\"^a{2222222222222}$\"}", "repetition count");
    schema_refused("{\"type\":\"string\",\"pattern\":\"^(a?)*$\"}", "left-recursive");
}
END_TEST

/* ---- with a real vocabulary ------------------------------------------ */

/* A shared vocabulary, or NULL when the test data is not there. */
static hearth_vocab *load_vocab(const char *file)
{
    const char *path = test_data_path(file);
    if (!path) return NULL;
    hearth_gguf *gguf;
    ck_assert_int_eq(hearth_gguf_open(path, &gguf), HEARTH_OK);
    hearth_vocab *vocab;
    ck_assert_int_eq(hearth_vocab_load(gguf, NULL, &vocab), HEARTH_OK);
    hearth_gguf_close(gguf);
    return vocab;
}

START_TEST(test_real_vocab)
{
    hearth_vocab *vocab = load_vocab("vocab/vocab-llama3.gguf");
    if (!vocab) return;
    hearth_grammar *g;
    const char *schema = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                         "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150}},"
                         "\"required\":[\"name\",\"age\"]}";
    ck_assert_msg(hearth_grammar_from_json_schema(vocab, schema, strlen(schema), &g) == HEARTH_OK,
                  "%s", hearth_last_error());
    /* tokenize a valid answer and walk it: every token must be allowed */
    const char *answer = "{\"name\": \"Zo\xc3\xab \\\"Z\\\"\", \"age\": 42}";
    hearth_token toks[64];
    size_t n;
    ck_assert_int_eq(hearth_tokenize(vocab, answer, strlen(answer), 0, toks, 64, &n), HEARTH_OK);
    struct grammar_matcher *m;
    ck_assert_int_eq(grammar_matcher_new(g, &m), HEARTH_OK);
    for (size_t i = 0; i < n; i++) {
        const uint64_t *mask;
        ck_assert_int_eq(grammar_matcher_mask(m, &mask), HEARTH_OK);
        ck_assert_msg((mask[toks[i] >> 6] >> (toks[i] & 63)) & 1, "token %zu (%d) masked", i, toks[i]);
        ck_assert_msg(!grammar_matcher_can_end(m), "may end before token %zu", i);
        ck_assert_int_eq(grammar_matcher_accept(m, toks[i]), HEARTH_OK);
    }
    ck_assert(grammar_matcher_can_end(m));
    ck_assert(grammar_matcher_done(m));
    hearth_token eot = hearth_vocab_special(vocab, HEARTH_SPECIAL_EOT);
    const uint64_t *mask;
    ck_assert_int_eq(grammar_matcher_mask(m, &mask), HEARTH_OK);
    if (eot != HEARTH_TOKEN_NONE) ck_assert((mask[eot >> 6] >> (eot & 63)) & 1);
    /* a token the grammar does not allow is refused */
    ck_assert_int_eq(grammar_matcher_reset(m), HEARTH_OK);
    ck_assert_int_ne(grammar_matcher_accept(m, toks[1]), HEARTH_OK);
    grammar_matcher_free(m);
    hearth_grammar_free(g);
    hearth_vocab_free(vocab);
}
END_TEST

/* Masks through the matcher against the brute-force mask on a real
 * vocabulary, along seeded walks of a JSON-schema grammar and JSON mode
 * that pick structural tokens (quotes, brackets, commas) half the time,
 * so strings close and objects nest. */
static void real_vocab_walks(const char *vocab_file)
{
    hearth_vocab *vocab = load_vocab(vocab_file);
    if (!vocab) return;
    const int32_t n_tokens = hearth_vocab_n_tokens(vocab);
    const size_t words = ((size_t)n_tokens + 63) / 64;
    uint64_t *slow = calloc(words, 8);
    int32_t *allowed = malloc((size_t)n_tokens * sizeof *allowed);
    int32_t *structural = malloc((size_t)n_tokens * sizeof *structural);
    test_rng rng;
    test_rng_seed(&rng, 77);
    for (int gi = 0; gi < 2; gi++) {
        hearth_grammar *g;
        if (gi == 0)
            ck_assert_msg(hearth_grammar_from_json_schema(vocab, mask_schema, strlen(mask_schema), &g) ==
                              HEARTH_OK, "%s", hearth_last_error());
        else
            ck_assert_int_eq(hearth_grammar_json_object(vocab, &g), HEARTH_OK);
        for (int walk = 0; walk < 2; walk++) {
            struct grammar_matcher *m;
            ck_assert_int_eq(grammar_matcher_new(g, &m), HEARTH_OK);
            for (int step = 0; step < 12 && !grammar_matcher_done(m); step++) {
                const uint64_t *fast;
                ck_assert_int_eq(grammar_matcher_mask(m, &fast), HEARTH_OK);
                ck_assert_int_eq(grammar_matcher_mask_brute(m, slow), HEARTH_OK);
                for (size_t k = 0; k < words; k++)
                    if (fast[k] != slow[k]) {
                        int32_t t = (int32_t)(k * 64 + (size_t)__builtin_ctzll(fast[k] ^ slow[k]));
                        size_t len;
                        const char *p = hearth_token_piece(vocab, t, 0, &len);
                        ck_abort_msg("%s grammar %d walk %d step %d token %d (\"%.*s\"): fast %d brute %d",
                                     vocab_file, gi, walk, step, t, p ? (int)len : 0, p ? p : "",
                                     (int)((fast[k] >> (t & 63)) & 1), (int)((slow[k] >> (t & 63)) & 1));
                    }
                int32_t n = 0, ns = 0;
                for (int32_t t = 0; t < n_tokens; t++) {
                    if (!((slow[t >> 6] >> (t & 63)) & 1) || hearth_vocab_is_eog(vocab, t)) continue;
                    allowed[n++] = t;
                    size_t len;
                    const char *p = hearth_token_piece(vocab, t, 0, &len);
                    bool st = false;
                    for (size_t c = 0; p && c < len && !st; c++) st = strchr("\"{}[],", p[c]) && p[c];
                    if (st) structural[ns++] = t;
                }
                if (n == 0) break;
                int32_t t = ns && test_rng_next(&rng) % 2 ? structural[test_rng_next(&rng) % (uint64_t)ns]
                                                          : allowed[test_rng_next(&rng) % (uint64_t)n];
                ck_assert_int_eq(grammar_matcher_accept(m, t), HEARTH_OK);
            }
            grammar_matcher_free(m);
        }
        hearth_grammar_free(g);
    }
    free(slow);
    free(allowed);
    free(structural);
    hearth_vocab_free(vocab);
}

START_TEST(test_real_vocab_masks)
{
    real_vocab_walks("vocab/vocab-llama3.gguf");
    real_vocab_walks("vocab/vocab-qwen3.gguf");
}
END_TEST

/* ---- many alternatives with a common beginning -------------------------- */

/* Alternatives that share a prefix, the same one repeated, one that is a
 * prefix of another, and an empty one: the language is what it says. */
START_TEST(test_shared_prefixes)
{
    const char *g = "root ::= \"ab\" \"c\" | \"ab\" | \"ab\" \"c\" | \"a\" x | \"\" | \"b\" x\n"
                    "x ::= \"d\"* | \"d\" \"e\"";
    ACCEPTS(g, "abc");
    ACCEPTS(g, "ab");
    ACCEPTS(g, "a");
    ACCEPTS(g, "");
    ACCEPTS(g, "addd");
    ACCEPTS(g, "ade");
    ACCEPTS(g, "bde");
    REFUSES(g, "abcc");
    REFUSES(g, "abd");
    REFUSES(g, "adee");
    REFUSES(g, "c");
    /* alternatives that begin with the same rule */
    const char *r = "root ::= w \"1\" | w \"2\" | w\nw ::= [a-z]+";
    ACCEPTS(r, "abc1");
    ACCEPTS(r, "q2");
    ACCEPTS(r, "qq");
    REFUSES(r, "1");
    REFUSES(r, "ab3");
}
END_TEST

/* A schema whose one property is an enum of 6,000 strings: every string
 * begins with the same quote and many share longer prefixes, so the
 * matcher must not hold a stack per string (at most GSET_MAX of them)
 * once the quote is matched.  Each value is accepted and a near miss is
 * not; then a walk over a real vocabulary, with masks, along one value. */
#define WIDE_ENUM 6000

static char *wide_enum_schema(char (*values)[16])
{
    test_rng rng;
    test_rng_seed(&rng, 6000);
    size_t cap = WIDE_ENUM * 20 + 128, k = 0;
    char *s = malloc(cap);
    k += (size_t)snprintf(s + k, cap - k, "{\"type\":\"object\",\"properties\":{\"k\":{\"enum\":[");
    for (int i = 0; i < WIDE_ENUM; i++) {
        /* a shared stem, then random letters */
        int n = snprintf(values[i], 16, "v%d_", i % 97);
        for (int c = 0; c < 6; c++) values[i][n++] = (char)('a' + test_rng_next(&rng) % 8);
        values[i][n] = 0;
        k += (size_t)snprintf(s + k, cap - k, "%s\"%s\"", i ? "," : "", values[i]);
    }
    snprintf(s + k, cap - k, "]}},\"required\":[\"k\"]}");
    return s;
}

START_TEST(test_wide_enum)
{
    static char values[WIDE_ENUM][16];
    char *schema = wide_enum_schema(values);
    char *g = schema_gbnf(schema);
    char text[64];
    for (int i = 0; i < WIDE_ENUM; i += 599) {
        snprintf(text, sizeof text, "{\"k\":\"%.15s\"}", values[i]);
        ACCEPTS(g, text);
        snprintf(text, sizeof text, "{\"k\":\"%.15sz\"}", values[i]);
        REFUSES(g, text);
    }
    free(g);

    hearth_vocab *vocab = load_vocab("vocab/vocab-llama3.gguf");
    if (vocab) {
        hearth_grammar *gr;
        ck_assert_msg(hearth_grammar_from_json_schema(vocab, schema, strlen(schema), &gr) == HEARTH_OK,
                      "%s", hearth_last_error());
        snprintf(text, sizeof text, "{\"k\": \"%.15s\"}", values[4321]);
        hearth_token toks[64];
        size_t n;
        ck_assert_int_eq(hearth_tokenize(vocab, text, strlen(text), 0, toks, 64, &n), HEARTH_OK);
        struct grammar_matcher *m;
        ck_assert_int_eq(grammar_matcher_new(gr, &m), HEARTH_OK);
        for (size_t i = 0; i < n; i++) {
            const uint64_t *mask;
            ck_assert_msg(grammar_matcher_mask(m, &mask) == HEARTH_OK, "mask before token %zu: %s", i,
                          hearth_last_error());
            ck_assert_msg((mask[toks[i] >> 6] >> (toks[i] & 63)) & 1, "token %zu (%d) masked", i, toks[i]);
            ck_assert_int_eq(grammar_matcher_accept(m, toks[i]), HEARTH_OK);
        }
        ck_assert(grammar_matcher_can_end(m));
        grammar_matcher_free(m);
        hearth_grammar_free(gr);
        hearth_vocab_free(vocab);
    }
    free(schema);
}
END_TEST

/* ---- what compiling costs ---------------------------------------------- */

/* A schema of n required integer properties, or a GBNF chain of n rules. */
static char *big_schema(int n)
{
    size_t cap = (size_t)n * 48 + 128, k = 0;
    char *s = malloc(cap);
    ck_assert_ptr_nonnull(s);
    k += (size_t)snprintf(s + k, cap - k, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < n; i++)
        k += (size_t)snprintf(s + k, cap - k, "%s\"p%d\":{\"type\":\"integer\"}", i ? "," : "", i);
    k += (size_t)snprintf(s + k, cap - k, "},\"required\":[");
    for (int i = 0; i < n; i++) k += (size_t)snprintf(s + k, cap - k, "%s\"p%d\"", i ? "," : "", i);
    snprintf(s + k, cap - k, "]}");
    return s;
}

static char *big_chain(int n)
{
    size_t cap = (size_t)n * 80 + 64, k = 0;
    char *s = malloc(cap);
    ck_assert_ptr_nonnull(s);
    k += (size_t)snprintf(s + k, cap - k, "root ::= r0 | e0\n");
    /* a chain of rules, and one rule with n alternatives that all start
     * with nullable references (the left-recursion check's worst case) */
    for (int i = 0; i < n; i++) k += (size_t)snprintf(s + k, cap - k, "r%d ::= \"a\" r%d\n", i, i + 1);
    k += (size_t)snprintf(s + k, cap - k, "r%d ::= \"b\"\ne0 ::= ", n);
    for (int i = 0; i < n; i++) k += (size_t)snprintf(s + k, cap - k, "%se%d \"x\"", i ? " | " : "", i + 1);
    k += (size_t)snprintf(s + k, cap - k, "\n");
    for (int i = 1; i <= n; i++) k += (size_t)snprintf(s + k, cap - k, "e%d ::= \"y\"?\n", i);
    return s;
}

/* The steps of compiling a schema (schema) or GBNF text of size n. */
static uint64_t compile_steps(int n, bool schema)
{
    struct gbudget b = {0};
    char *text = schema ? big_schema(n) : big_chain(n);
    char *gbnf = NULL;
    struct grammar_ir ir;
    if (schema) {
        ck_assert_msg(json_schema_to_gbnf(text, strlen(text), &b, &gbnf) == HEARTH_OK, "%s",
                      hearth_last_error());
    }
    const char *g = schema ? gbnf : text;
    ck_assert_msg(grammar_ir_parse(g, strlen(g), NULL, &b, &ir) == HEARTH_OK, "%s",
                  hearth_last_error());
    grammar_ir_free(&ir);
    free(gbnf);
    free(text);
    return b.steps;
}

/* Sixteen times the grammar costs about sixteen times the work, never
 * the 256 times of a quadratic compiler (counted in steps, not time). */
START_TEST(test_compile_work_linear)
{
    for (int schema = 0; schema < 2; schema++) {
        uint64_t s1 = compile_steps(1000, schema), s4 = compile_steps(4000, schema),
                 s16 = compile_steps(16000, schema);
        ck_assert_msg(s4 <= 5 * s1 && s16 <= 20 * s1,
                      "%s: %llu, %llu, %llu steps for 1000, 4000, 16000", schema ? "schema" : "GBNF",
                      (unsigned long long)s1, (unsigned long long)s4, (unsigned long long)s16);
    }
}
END_TEST

/* A grammar that needs more steps than allowed is refused, saying so. */
START_TEST(test_compile_limit)
{
    char *text = big_chain(2000);
    struct gbudget b = {.max_steps = 10000};
    struct grammar_ir ir;
    ck_assert_int_eq(grammar_ir_parse(text, strlen(text), NULL, &b, &ir), HEARTH_E_RANGE);
    ck_assert_msg(strstr(hearth_last_error(), "more than 10000 steps"), "%s", hearth_last_error());
    free(text);
    char *schema = big_schema(2000), *gbnf = NULL;
    b = (struct gbudget){.max_steps = 10000};
    ck_assert_int_eq(json_schema_to_gbnf(schema, strlen(schema), &b, &gbnf), HEARTH_E_RANGE);
    ck_assert_ptr_null(gbnf);
    free(schema);
}
END_TEST

struct cancel_after {
    int polls, stop_at;
};

static int cancel_after(void *arg)
{
    struct cancel_after *c = arg;
    return ++c->polls >= c->stop_at;
}

/* Cancelling stops compiling within a poll's steps of the request,
 * through the public call as well as inside. */
START_TEST(test_compile_cancel)
{
    char *schema = big_schema(8000);
    uint64_t full = compile_steps(8000, true);
    struct cancel_after c = {0, 3};
    struct gbudget b = {.cancelled = cancel_after, .cancel_arg = &c};
    char *gbnf = NULL;
    ck_assert_int_eq(json_schema_to_gbnf(schema, strlen(schema), &b, &gbnf), HEARTH_E_INTERRUPTED);
    ck_assert_ptr_null(gbnf);
    ck_assert_int_eq(c.polls, 3);
    ck_assert_msg(b.steps < full / 4, "%llu steps of %llu", (unsigned long long)b.steps,
                  (unsigned long long)full);

    hearth_vocab *vocab = load_vocab("vocab/vocab-llama3.gguf");
    if (vocab) {
        c = (struct cancel_after){0, 2};
        hearth_grammar_options opt = {cancel_after, &c};
        hearth_grammar *g = NULL;
        ck_assert_int_eq(hearth_grammar_compile(vocab, HEARTH_GRAMMAR_JSON_SCHEMA, schema,
                                                strlen(schema), &opt, &g),
                         HEARTH_E_INTERRUPTED);
        ck_assert_ptr_null(g);
        opt.cancelled = NULL;
        ck_assert_int_eq(hearth_grammar_compile(vocab, HEARTH_GRAMMAR_JSON_SCHEMA, schema,
                                                strlen(schema), &opt, &g),
                         HEARTH_OK);
        hearth_grammar_free(g);
        hearth_vocab_free(vocab);
    }
    free(schema);
}
END_TEST

static Suite *grammar_suite(void)
{
    Suite *s = suite_create("grammar");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_constructs);
    tcase_add_test(tc, test_errors);
    tcase_add_loop_test(tc, test_mask_matches_brute_force, 0, 2 * (int)HEARTH_ARRAY_LEN(mask_grammars));
    tcase_add_test(tc, test_mask_tails);
    tcase_add_test(tc, test_json_schema);
    tcase_add_test(tc, test_json_schema_refused);
    tcase_add_test(tc, test_shared_prefixes);
    tcase_add_test(tc, test_wide_enum);
    tcase_add_test(tc, test_real_vocab);
    tcase_add_test(tc, test_real_vocab_masks);
    tcase_add_test(tc, test_compile_work_linear);
    tcase_add_test(tc, test_compile_limit);
    tcase_add_test(tc, test_compile_cancel);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return test_run_suite(grammar_suite());
}

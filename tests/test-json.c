/*
 * test-json.c -- the JSON reader (RFC 8259 conformance, error positions,
 * limits) and writer (byte-for-byte agreement with Python's json.dumps,
 * whose output for each case is written out below), and Python's float
 * repr.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "testutil.h"
#include "value.h"

/* Parse text (which must succeed) and serialise it with fmt. */
static char *parse_and_write(const char *text, const json_format *fmt)
{
    value v;
    hearth_status st = json_parse(text, strlen(text), "test", &v);
    ck_assert_msg(st == HEARTH_OK, "parse of %s failed: %s", text, hearth_last_error());
    textbuf tb;
    textbuf_init(&tb, 1 << 20, "test output");
    st = json_write(v, fmt, &tb);
    ck_assert_msg(st == HEARTH_OK, "write failed: %s", hearth_last_error());
    value_unref(v);
    return textbuf_take(&tb, NULL);
}

/* Expected outputs are those of Python's json.dumps(json.loads(input),
 * ensure_ascii=False, ...) with the options of each case. */
struct write_case {
    const char *desc;
    const char *input;
    json_format fmt;
    const char *expect;
};

/* Python's repr() of each double. */
struct float_case {
    double value;
    const char *repr;
};

static const struct write_case write_cases[] = {
    {"scalars",
     "[null, true, false, 0, -0, 1, -1, 9223372036854775807, -9223372036854775808]",
     {NULL, NULL, NULL, false, false},
     "[null, true, false, 0, 0, 1, -1, 9223372036854775807, -9223372036854775808]"},
    {"floats",
     "[0.0, -0.0, 0.1, 1.5, 1e16, 1e15, 1E+2, 1e-5, 0.0001, 123456789.123, 1.7976931348623157e308, 5e-324, 3.141592653589793, 2.5e-7, 1e22, 1.0e23]",
     {NULL, NULL, NULL, false, false},
     "[0.0, -0.0, 0.1, 1.5, 1e+16, 1000000000000000.0, 100.0, 1e-05, 0.0001, 123456789.123, 1.7976931348623157e+308, 5e-324, 3.141592653589793, 2.5e-07, 1e+22, 1e+23]"},
    {"infinities",
     "[1e400, -1e400]",
     {NULL, NULL, NULL, false, false},
     "[Infinity, -Infinity]"},
    {"strings",
     "[\"\", \"a\\\"b\\\\c\\/d\", \"\\b\\f\\n\\r\\t\", \"\\u0000\\u001f\\u007f\", \"\\u00e9\\u2028\\ud83d\\ude00\", \"\346\227\245\346\234\254\350\252\236\"]",
     {NULL, NULL, NULL, false, false},
     "[\"\", \"a\\\"b\\\\c/d\", \"\\b\\f\\n\\r\\t\", \"\\u0000\\u001f\177\", \"\303\251\342\200\250\360\237\230\200\", \"\346\227\245\346\234\254\350\252\236\"]"},
    {"nested",
     "{\"a\": [1, {\"b\": null, \"c\": []}, {}], \"d\": {\"e\": \"f\"}}",
     {NULL, NULL, NULL, false, false},
     "{\"a\": [1, {\"b\": null, \"c\": []}, {}], \"d\": {\"e\": \"f\"}}"},
    {"indent 2",
     "{\"a\": [1, {\"b\": null, \"c\": []}, {}], \"d\": {\"e\": \"f\"}}",
     {"  ", NULL, NULL, false, false},
     "{\n  \"a\": [\n    1,\n    {\n      \"b\": null,\n      \"c\": []\n    },\n    {}\n  ],\n  \"d\": {\n    \"e\": \"f\"\n  }\n}"},
    {"indent 0",
     "[1, [2, {\"x\": 3}]]",
     {"", NULL, NULL, false, false},
     "[\n1,\n[\n2,\n{\n\"x\": 3\n}\n]\n]"},
    {"indent string",
     "{\"a\": [1, 2]}",
     {"\t", NULL, NULL, false, false},
     "{\n\t\"a\": [\n\t\t1,\n\t\t2\n\t]\n}"},
    {"separators",
     "{\"a\": [1, 2], \"b\": {\"c\": true}}",
     {NULL, ",", ":", false, false},
     "{\"a\":[1,2],\"b\":{\"c\":true}}"},
    {"indent with separators",
     "{\"a\": [1, 2]}",
     {" ", ",", " = ", false, false},
     "{\n \"a\" = [\n  1,\n  2\n ]\n}"},
    {"sort keys",
     "{\"b\": 1, \"a\": {\"d\": 2, \"c\": 3}, \"\\u00e9\": 0, \"B\": 4}",
     {NULL, NULL, NULL, false, true},
     "{\"B\": 4, \"a\": {\"c\": 3, \"d\": 2}, \"b\": 1, \"\303\251\": 0}"},
    {"ensure_ascii",
     "[\"caf\\u00e9\", \"\\ud83d\\ude00\", \"\\u2028\", \"\\u007f\", \"\346\227\245\346\234\254\"]",
     {NULL, NULL, NULL, true, false},
     "[\"caf\\u00e9\", \"\\ud83d\\ude00\", \"\\u2028\", \"\\u007f\", \"\\u65e5\\u672c\"]"},
    {"duplicate keys keep the first position",
     "{\"a\": 1, \"b\": 2, \"a\": 3}",
     {NULL, NULL, NULL, false, false},
     "{\"a\": 3, \"b\": 2}"},
    {"whitespace around",
     " \t\015\n [ 1 , 2 ] \n",
     {NULL, NULL, NULL, false, false},
     "[1, 2]"},
    {"rfc 8259 image",
     "{\n      \"Image\": {\n          \"Width\":  800,\n          \"Height\": 600,\n          \"Title\":  \"View from 15th Floor\",\n          \"Thumbnail\": {\n              \"Url\":    \"http://www.example.com/image/481989943\",\n              \"Height\": 125,\n              \"Width\":  100\n          },\n          \"Animated\" : false,\n          \"IDs\": [116, 943, 234, 38793]\n        }\n    }",
     {NULL, NULL, NULL, false, false},
     "{\"Image\": {\"Width\": 800, \"Height\": 600, \"Title\": \"View from 15th Floor\", \"Thumbnail\": {\"Url\": \"http://www.example.com/image/481989943\", \"Height\": 125, \"Width\": 100}, \"Animated\": false, \"IDs\": [116, 943, 234, 38793]}}"},
    {"rfc 8259 array",
     "[\n        {\n           \"precision\": \"zip\",\n           \"Latitude\":  37.7668,\n           \"Longitude\": -122.3959,\n           \"Address\":   \"\",\n           \"City\":      \"SAN FRANCISCO\",\n           \"State\":     \"CA\",\n           \"Zip\":       \"94107\",\n           \"Country\":   \"US\"\n        },\n        {\n           \"precision\": \"zip\",\n           \"Latitude\":  37.371991,\n           \"Longitude\": -122.026020,\n           \"Address\":   \"\",\n           \"City\":      \"SUNNYVALE\",\n           \"State\":     \"CA\",\n           \"Zip\":       \"94085\",\n           \"Country\":   \"US\"\n        }\n      ]",
     {NULL, NULL, NULL, false, false},
     "[{\"precision\": \"zip\", \"Latitude\": 37.7668, \"Longitude\": -122.3959, \"Address\": \"\", \"City\": \"SAN FRANCISCO\", \"State\": \"CA\", \"Zip\": \"94107\", \"Country\": \"US\"}, {\"precision\": \"zip\", \"Latitude\": 37.371991, \"Longitude\": -122.02602, \"Address\": \"\", \"City\": \"SUNNYVALE\", \"State\": \"CA\", \"Zip\": \"94085\", \"Country\": \"US\"}]"},
    {"rfc 8259 scalars",
     "\"Hello world!\"",
     {NULL, NULL, NULL, false, false},
     "\"Hello world!\""},
    {"rfc 8259 number",
     "42",
     {NULL, NULL, NULL, false, false},
     "42"},
};

static const struct float_case float_cases[] = {
    {0x1.999999999999ap-4, "0.1"},
    {0x1.999999999999ap-3, "0.2"},
    {0x1.3333333333334p-2, "0.30000000000000004"},
    {0x1.5555555555555p-2, "0.3333333333333333"},
    {0x1.5555555555555p-1, "0.6666666666666666"},
    {0x1.1c37937e08000p+53, "1e+16"},
    {0x1.1c37937e07fffp+53, "9999999999999998.0"},
    {0x1.a36e2eb1c432dp-14, "0.0001"},
    {0x1.a36371ea531a8p-14, "9.999e-05"},
    {0x1.1eb2d66005835p+997, "1.5e+300"},
    {-0x1.ac9a7b3b7302fp-996, "-2.5e-300"},
    {0x0.0000000000001p-1022, "5e-324"},
    {0x1.0000000000000p-1022, "2.2250738585072014e-308"},
    {0x1.fffffffffffffp+1023, "1.7976931348623157e+308"},
    {0x1.9000000000000p+6, "100.0"},
    {0x1.2d68700000000p+20, "1234567.0"},
    {0x1.b69b4ba630f35p+56, "1.2345678901234568e+17"},
    {0x1.0000000000000p-1, "0.5"},
    {0x1.1666666666666p+2, "4.35"},
    {0x1.52d02c7e14af6p+76, "1e+23"},
    {0x1.0000000000000p+53, "9007199254740992.0"},
    {0x1.0000000000000p+53, "9007199254740992.0"},
    {0x1.80d43de9cc603p-31, "7e-10"},
    {-0x1.74de452e6b438p+811, "-1.989032661366619e+244"},
    {0x1.3270e269e0d37p+594, "7.761117632285041e+178"},
    {0x1.c7fd0a6a3a450p-826, "3.980498358697587e-249"},
    {-0x1.f0824128b2f33p+292, "-1.5432835417340557e+88"},
    {0x1.8e811892f902bp-638, "1.3647584518757569e-192"},
    {-0x1.1985d5d9dc9f8p-684, "-1.3701135617873088e-206"},
    {-0x1.25d940ed90475p+655, "-1.7160537630466207e+197"},
    {0x1.675cc81e74ef5p-144, "6.294675241195386e-44"},
    {0x1.0a35a099950d8p-671, "1.0613447212142254e-202"},
    {0x1.d549b6f03675ap+689, "4.708325160387546e+207"},
    {0x1.c172411e20b8fp-38, "6.387016158513563e-12"},
    {-0x1.16ece1738f7d9p-814, "-9.973130378568733e-246"},
    {0x1.1ddb66cad4a26p-781, "8.779753225680271e-236"},
    {-0x1.192cfd3ac94afp-755, "-5.795503248498993e-228"},
    {-0x1.c105d1fb17c23p+809, "-5.988180159386011e+243"},
    {-0x1.0b33839263059p-488, "-1.306052388527796e-147"},
    {-0x1.f48f1a09f76b5p-684, "-2.436117699484841e-206"},
    {0x1.630f1f29d0da9p-770, "2.233386999150174e-232"},
    {-0x1.60af593bd04cfp-673, "-3.51527970626667e-203"},
    {0x1.1e29c658cda14p-820, "1.5987381841032883e-247"},
    {0x1.8d190f9ebdaccp-118, "4.6678633181812096e-36"},
    {-0x1.1973e0becd7b0p-791, "-8.441872792105456e-239"},
    {0x1.7beaddbc496cbp-478, "1.9015657400796622e-144"},
    {0x1.cb2424a23d596p+693, "7.370437700706684e+208"},
    {-0x1.a63ec24ede6a4p-857, "-1.7163996725272777e-258"},
    {-0x1.766581e27a1c0p-733, "-3.2367190832119987e-221"},
    {-0x1.d05584ef8aa38p-777, "-2.2818334634712625e-234"},
    {-0x1.7ba94d0eda82fp-278, "-3.0536383926309363e-84"},
    {0x1.1dbe22e44158bp-601, "1.3449551894627777e-181"},
    {-0x1.a736994e3bf91p-732, "-7.317495976062606e-221"},
    {0x1.850c5a38fd547p-254, "5.249822308814304e-77"},
    {0x1.135d25f557203p-624, "1.5450754142984396e-188"},
    {-0x1.ce4228c38fb29p-155, "-3.953625698224792e-47"},
    {-0x1.a70c31012f037p-760, "-2.72491267476498e-229"},
    {-0x1.769b10f4205b4p-536, "-6.505141861548772e-162"},
    {0x1.5052434b9b5dfp+1010, "1.441484839555994e+304"},
    {-0x1.ed162ae2eb154p-894, "-1.4583679262758548e-269"},
    {-0x1.877186d76b07ep+112, "-7.939416668807721e+33"},
    {0x1.1af10506bf2efp+884, "1.4255183989699612e+266"},
    {-0x1.6a78795e761d1p+711, "-1.525315701232403e+214"},
    {-0x1.768665ae6aeb0p+6, "-93.63124725844932"},
    {-0x1.90774c2fe4b30p+8, "-400.46600627263524"},
    {0x1.266125b378892p+9, "588.7589630449822"},
    {0x1.8dfd266af5188p+8, "397.9888674591425"},
    {-0x1.ffce96258947bp+8, "-511.80697855569423"},
    {0x1.29b1e11a1fe30p+7, "148.84742051734202"},
    {0x1.9324e12e3b920p+5, "50.393007622902815"},
    {0x1.772332e8ef38cp+9, "750.2749911468577"},
    {0x1.cae3fcfa35634p+8, "458.89057887843524"},
    {-0x1.a81fdd47c29fap+8, "-424.1244702196269"},
    {0x1.e02cc2ce266d8p+9, "960.3496949851642"},
    {-0x1.7def292802266p+9, "-763.8684434900758"},
    {-0x1.47823b0184da0p+7, "-163.75435642954562"},
    {0x1.012413f5c1c92p+9, "514.2818591304988"},
    {-0x1.5c03f589575a8p+9, "-696.0309306789904"},
    {-0x1.612e47e934e40p+4, "-22.073799048388764"},
    {-0x1.cccaf133bf63cp+9, "-921.5854859051246"},
    {0x1.506e84bf67b60p+8, "336.4317130687905"},
    {0x1.08922449c26c8p+9, "529.1417324256263"},
    {0x1.241a90168c0d8p+7, "146.05188055476788"},
};


START_TEST(test_write_cases)
{
    const struct write_case *c = &write_cases[_i];
    char *out = parse_and_write(c->input, &c->fmt);
    ck_assert_msg(strcmp(out, c->expect) == 0, "%s:\n got  %s\n want %s", c->desc, out, c->expect);
    free(out);
}
END_TEST

START_TEST(test_float_repr)
{
    const struct float_case *c = &float_cases[_i];
    char buf[32];
    value_format_float(c->value, buf);
    ck_assert_msg(strcmp(buf, c->repr) == 0, "%a: got %s, want %s", c->value, buf, c->repr);
}
END_TEST

START_TEST(test_float_repr_round_trips)
{
    /* Property over random bit patterns: the repr reads back as the same
     * double and has at most 17 significant digits. */
    test_rng rng;
    test_rng_seed(&rng, 20261129);
    for (int i = 0; i < 20000; i++) {
        uint64_t bits = test_rng_next(&rng);
        double d;
        memcpy(&d, &bits, sizeof d);
        if (!isfinite(d)) continue;
        char buf[32];
        value_format_float(d, buf);
        double back = strtod(buf, NULL);
        ck_assert_msg(memcmp(&back, &d, sizeof d) == 0, "%a -> %s -> %a", d, buf, back);
        /* significant digits: from the first non-zero digit, without the
         * zeros fixed notation adds after the last one */
        int digits = 0, trailing_zeros = 0;
        bool started = false;
        for (const char *p = buf; *p && *p != 'e'; p++) {
            if (*p < '0' || *p > '9') continue;
            if (*p != '0') started = true;
            if (!started) continue;
            digits++;
            trailing_zeros = *p == '0' ? trailing_zeros + 1 : 0;
        }
        if (!strchr(buf, 'e') && strstr(buf, ".0") == buf + strlen(buf) - 2) digits -= trailing_zeros;
        ck_assert_msg(digits <= 17, "%s has more than 17 significant digits", buf);
    }
    char buf[32];
    value_format_float(NAN, buf);
    ck_assert_str_eq(buf, "nan");
    value_format_float(-INFINITY, buf);
    ck_assert_str_eq(buf, "-inf");
}
END_TEST

/* Parse must fail with HEARTH_E_FORMAT and a message naming the byte. */
static void expect_parse_error(const char *text, size_t len, const char *fragment)
{
    value v;
    hearth_status st = json_parse(text, len, "input", &v);
    if (st == HEARTH_OK) value_unref(v);
    ck_assert_msg(st == HEARTH_E_FORMAT, "'%.*s' parsed (status %d)", (int)len, text, st);
    ck_assert_msg(strstr(hearth_last_error(), fragment) != NULL, "'%.*s': message '%s' lacks '%s'",
                  (int)len, text, hearth_last_error(), fragment);
}

START_TEST(test_invalid_documents)
{
    static const struct { const char *text; const char *fragment; } cases[] = {
        {"", "byte 0 (line 1, column 1): empty text"},
        {"   \n ", "empty text"},
        {"[1, 2,]", "byte 6 (line 1, column 7): expected a value"},
        {"{\"a\": 1,}", "byte 8 (line 1, column 9): expected a string key"},
        {"[1 2]", "byte 3 (line 1, column 4): expected ',' or ']'"},
        {"{\"a\" 1}", "expected ':' after an object key"},
        {"{a: 1}", "byte 1 (line 1, column 2): expected a string key"},
        {"{'a': 1}", "expected a string key"},
        {"['a']", "expected a value"},
        {"[1] x", "byte 4 (line 1, column 5): unexpected text after the JSON value"},
        {"[1]]", "unexpected text after the JSON value"},
        {"[", "unexpected end of the text"},
        {"[1", "unterminated array"},
        {"{\"a\": 1", "unterminated object"},
        {"\"abc", "byte 0 (line 1, column 1): unterminated string"},
        {"tru", "expected a value"},
        {"nul", "expected a value"},
        {"True", "expected a value"},
        {"NaN", "expected a value"},
        {"Infinity", "expected a value"},
        {"-Infinity", "invalid number"},
        {"01", "leading zeros"},
        {"-01", "leading zeros"},
        {"1.", "byte 2 (line 1, column 3): expected a digit after the decimal point"},
        {".5", "expected a value"},
        {"+1", "expected a value"},
        {"-", "invalid number"},
        {"1e", "expected a digit in the exponent"},
        {"1e+", "expected a digit in the exponent"},
        {"0x10", "unexpected text after the JSON value"},
        {"\"a\\x\"", "byte 2 (line 1, column 3): invalid escape"},
        {"\"\\u12\"", "four hex digits"},
        {"\"\\u12G4\"", "four hex digits"},
        {"\"\\ud83d\"", "high surrogate not followed by a low surrogate"},
        {"\"\\ud83d\\u0041\"", "high surrogate not followed by a low surrogate"},
        {"\"\\ude00\"", "lone low surrogate"},
        {"\"a\tb\"", "byte 2 (line 1, column 3): control character in a string"},
        {"\"a\nb\"", "control character in a string"},
        {"[1,\n  2,\n  x]", "byte 11 (line 3, column 3): expected a value"},
        {"\"\xc3\xa9\xc3\" ", "invalid UTF-8"},
        {"\xef\xbb\xbf[]", "byte order mark"},
    };
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(cases); i++)
        expect_parse_error(cases[i].text, strlen(cases[i].text), cases[i].fragment);
}
END_TEST

START_TEST(test_invalid_utf8)
{
    /* RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF,
     * no stray continuation bytes, no truncated sequences */
    static const char *const bad[] = {
        "\"\xc0\x80\"", "\"\xc1\xbf\"", "\"\xe0\x80\x80\"", "\"\xed\xa0\x80\"", "\"\xed\xbf\xbf\"",
        "\"\xf0\x80\x80\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xf5\x80\x80\x80\"", "\"\xff\"",
        "\"\x80\"", "\"\xbf\"", "\"\xe2\x82\"", "\"\xf0\x9f\x98\"", "\"a\xc3", "\"\xc3\x28\"",
    };
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(bad); i++) expect_parse_error(bad[i], strlen(bad[i]), "invalid UTF-8");
    /* outside strings too; valid UTF-8 there is merely not JSON */
    expect_parse_error("[\xff]", 3, "byte 1 (line 1, column 2): invalid UTF-8");
    expect_parse_error("[\xc3\xa9]", 4, "byte 1 (line 1, column 2): expected a value");
    /* the extremes that are valid */
    value v;
    const char *good = "\"\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\"";
    ck_assert_int_eq(json_parse(good, strlen(good), "t", &v), HEARTH_OK);
    ck_assert_uint_eq(v.u.s->n_chars, 8);
    value_unref(v);
}
END_TEST

START_TEST(test_embedded_nul)
{
    /* \u0000 is a character like any other: strings carry their length */
    value v;
    ck_assert_int_eq(json_parse("\"a\\u0000b\"", 10, "t", &v), HEARTH_OK);
    ck_assert_uint_eq(v.u.s->len, 3);
    ck_assert(memcmp(v.u.s->data, "a\0b", 3) == 0);
    value_unref(v);
    /* a raw NUL byte is a control character */
    expect_parse_error("\"a\0b\"", 5, "control character");
    expect_parse_error("[1]\0", 4, "unexpected text after the JSON value");
}
END_TEST

START_TEST(test_depth_limit)
{
    char *deep = malloc(2 * JSON_MAX_DEPTH + 8);
    ck_assert_ptr_nonnull(deep);
    for (int extra = 0; extra <= 1; extra++) {
        int n = JSON_MAX_DEPTH + extra;
        for (int i = 0; i < n; i++) deep[i] = '[';
        for (int i = 0; i < n; i++) deep[n + i] = ']';
        value v;
        hearth_status st = json_parse(deep, (size_t)(2 * n), "deep", &v);
        if (extra == 0) {
            ck_assert_msg(st == HEARTH_OK, "%d levels: %s", n, hearth_last_error());
            value_unref(v);
        } else {
            ck_assert_int_eq(st, HEARTH_E_FORMAT);
            ck_assert_ptr_nonnull(strstr(hearth_last_error(), "nested more than 256 levels deep"));
            ck_assert_ptr_nonnull(strstr(hearth_last_error(), "byte 256"));
        }
    }
    /* objects count too, and a hostile megabyte of '[' fails fast */
    size_t big = 1 << 20;
    char *flood = malloc(big);
    ck_assert_ptr_nonnull(flood);
    memset(flood, '[', big);
    expect_parse_error(flood, big, "nested more than");
    for (size_t i = 0; i < big; i += 5) memcpy(flood + i, "{\"a\":", HEARTH_MIN(5, big - i));
    expect_parse_error(flood, big, "nested more than");
    free(flood);
    free(deep);
}
END_TEST

START_TEST(test_numbers)
{
    value v;
    ck_assert_int_eq(json_parse("-0", 2, "t", &v), HEARTH_OK);
    ck_assert_int_eq(v.kind, VALUE_INT);
    ck_assert_int_eq(v.u.i, 0);
    ck_assert_int_eq(json_parse("-0.0", 4, "t", &v), HEARTH_OK);
    ck_assert_int_eq(v.kind, VALUE_FLOAT);
    ck_assert(v.u.f == 0.0 && signbit(v.u.f));
    ck_assert_int_eq(json_parse("9223372036854775807", 19, "t", &v), HEARTH_OK);
    ck_assert_int_eq(v.kind, VALUE_INT);
    ck_assert(v.u.i == INT64_MAX);
    ck_assert_int_eq(json_parse("-9223372036854775808", 20, "t", &v), HEARTH_OK);
    ck_assert_int_eq(v.kind, VALUE_INT);
    ck_assert(v.u.i == INT64_MIN);
    ck_assert_int_eq(json_parse("9223372036854775808", 19, "t", &v), HEARTH_OK);
    ck_assert_int_eq(v.kind, VALUE_FLOAT);
    ck_assert(v.u.f == 0x1p63);
    ck_assert_int_eq(json_parse("1e400", 5, "t", &v), HEARTH_OK);
    ck_assert(isinf(v.u.f) && v.u.f > 0);
    ck_assert_int_eq(json_parse("1e-400", 6, "t", &v), HEARTH_OK);
    ck_assert(v.kind == VALUE_FLOAT && v.u.f == 0.0);
    ck_assert_int_eq(json_parse("2.5E+3", 6, "t", &v), HEARTH_OK);
    ck_assert(v.kind == VALUE_FLOAT && v.u.f == 2500.0);
    ck_assert_int_eq(json_parse("0.1", 3, "t", &v), HEARTH_OK);
    ck_assert(v.u.f == 0.1);
    /* long mantissas are read exactly rounded */
    const char *digits = "0.1000000000000000055511151231257827021181583404541015625";
    ck_assert_int_eq(json_parse(digits, strlen(digits), "t", &v), HEARTH_OK);
    ck_assert(v.u.f == 0.1);
}
END_TEST

START_TEST(test_big_integers)
{
    /* Python keeps integers of any size; hearth keeps 64 bits and reads
     * larger ones as the nearest double (documented in json.h) */
    char *out = parse_and_write("[9223372036854775808, -9223372036854775809, 12345678901234567890123]", NULL);
    ck_assert_str_eq(out, "[9.223372036854776e+18, -9.223372036854776e+18, 1.2345678901234568e+22]");
    free(out);
}
END_TEST

START_TEST(test_duplicate_keys_and_order)
{
    value v;
    const char *text = "{\"z\": 1, \"a\": 2, \"z\": 3}";
    ck_assert_int_eq(json_parse(text, strlen(text), "t", &v), HEARTH_OK);
    ck_assert_uint_eq(v.u.dict->len, 2);
    ck_assert_str_eq(v.u.dict->entries[0].key->data, "z");
    ck_assert_int_eq(v.u.dict->entries[0].val.u.i, 3);
    value_unref(v);
    /* many keys: lookups go through the hash index */
    textbuf tb;
    textbuf_init(&tb, 1 << 22, "t");
    textbuf_append_char(&tb, '{');
    for (int i = 0; i < 5000; i++) textbuf_printf(&tb, "%s\"k%d\": %d", i ? ", " : "", i, i);
    textbuf_append_char(&tb, '}');
    ck_assert_int_eq(json_parse(tb.data, tb.len, "t", &v), HEARTH_OK);
    ck_assert_uint_eq(v.u.dict->len, 5000);
    for (int i = 0; i < 5000; i += 7) {
        char key[16];
        int n = snprintf(key, sizeof key, "k%d", i);
        value *got = value_dict_get(v, key, (size_t)n);
        ck_assert_ptr_nonnull(got);
        ck_assert_int_eq(got->u.i, i);
        ck_assert_str_eq(v.u.dict->entries[i].key->data, key);
    }
    ck_assert_ptr_null(value_dict_get(v, "k5000", 5));
    value_unref(v);
    textbuf_free(&tb);
}
END_TEST

START_TEST(test_write_errors)
{
    textbuf tb;
    textbuf_init(&tb, 1024, "t");
    ck_assert_int_eq(json_write(value_undefined(), NULL, &tb), HEARTH_E_INVALID);
    ck_assert_str_eq(hearth_last_error(), "Object of type Undefined is not JSON serializable");
    value ns;
    ck_assert_int_eq(value_new_namespace(&ns), HEARTH_OK);
    ck_assert_int_eq(json_write(ns, NULL, &tb), HEARTH_E_INVALID);
    value_unref(ns);
    /* NaN as JavaScript spells it, like json.dumps(allow_nan=True) */
    tb.len = 0;
    ck_assert_int_eq(json_write(value_float(NAN), NULL, &tb), HEARTH_OK);
    ck_assert_str_eq(tb.data, "NaN");
    /* the size limit is an error, not a truncation */
    textbuf small;
    textbuf_init(&small, 4, "small");
    value s;
    ck_assert_int_eq(value_new_cstring("abcdef", &s), HEARTH_OK);
    ck_assert_int_eq(json_write(s, NULL, &small), HEARTH_E_RANGE);
    value_unref(s);
    textbuf_free(&small);
    textbuf_free(&tb);
}
END_TEST

START_TEST(test_repr)
{
    /* Python's repr() of strings: quote choice and escapes */
    static const struct { const char *in; const char *repr; } cases[] = {
        {"plain", "'plain'"},
        {"it's", "\"it's\""},
        {"say \"hi\"", "'say \"hi\"'"},
        {"both ' and \"", "'both \\' and \"'"},
        {"tab\tnl\ncr\rbs\\", "'tab\\tnl\\ncr\\rbs\\\\'"},
        {"\x01\x7f\xc2\xa0\xc2\xad\xe2\x80\x8b\xe2\x80\xa8", "'\\x01\\x7f\\xa0\\xad\\u200b\\u2028'"},
        {"caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80", "'caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80'"},
    };
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(cases); i++) {
        value s;
        ck_assert_int_eq(value_new_cstring(cases[i].in, &s), HEARTH_OK);
        textbuf tb;
        textbuf_init(&tb, 1024, "t");
        ck_assert_int_eq(value_repr(s, &tb), HEARTH_OK);
        ck_assert_msg(strcmp(tb.data, cases[i].repr) == 0, "repr of case %zu: %s", i, tb.data);
        textbuf_free(&tb);
        value_unref(s);
    }
}
END_TEST

START_TEST(test_value_depth_limit)
{
    /* lists nested past VALUE_MAX_DEPTH are refused, so walks over values
     * never recurse deeper than that */
    value v = value_int(1);
    int depth = 0;
    hearth_status st = HEARTH_OK;
    while (st == HEARTH_OK && depth < VALUE_MAX_DEPTH + 10) {
        value list;
        ck_assert_int_eq(value_new_list(1, &list), HEARTH_OK);
        st = value_list_push(list, v);   /* consumes v, also when it fails */
        if (st != HEARTH_OK) {
            v = list;
            break;
        }
        v = list;
        depth++;
    }
    ck_assert_int_eq(st, HEARTH_E_RANGE);
    ck_assert_int_eq(depth, VALUE_MAX_DEPTH);
    value_unref(v);
}
END_TEST

static Suite *json_suite(void)
{
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("json");
    tcase_add_loop_test(tc, test_write_cases, 0, (int)HEARTH_ARRAY_LEN(write_cases));
    tcase_add_loop_test(tc, test_float_repr, 0, (int)HEARTH_ARRAY_LEN(float_cases));
    tcase_add_test(tc, test_float_repr_round_trips);
    tcase_add_test(tc, test_invalid_documents);
    tcase_add_test(tc, test_invalid_utf8);
    tcase_add_test(tc, test_embedded_nul);
    tcase_add_test(tc, test_depth_limit);
    tcase_add_test(tc, test_numbers);
    tcase_add_test(tc, test_big_integers);
    tcase_add_test(tc, test_duplicate_keys_and_order);
    tcase_add_test(tc, test_write_errors);
    tcase_add_test(tc, test_repr);
    tcase_add_test(tc, test_value_depth_limit);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return test_run_suite(json_suite());
}

/*
 * test-toolcall.c -- hearth serve's tool calls (src/server/toolcall.c):
 * the format chosen from a chat template, each format's calls read back
 * (one, several, text before them, malformed ones as plain content, the
 * arguments written back as compact JSON), how much of a stream may be
 * sent before a call could begin, the grammars that force a call, and
 * round trips: an assistant message with tool calls rendered by the
 * shared Qwen 2.5, Llama 3.1 and Mistral Nemo templates reads back as the
 * same calls.
 */
#include "internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "request.h"
#include "grammar_match.h"
#include "testutil.h"
#include "toolcall.h"
#include "toolcall_incremental.h"

static bool parse(enum srv_tool_format f, const char *text, struct srv_tool_calls *c)
{
    return srv_tool_calls_parse(f, text, strlen(text), c);
}

/* text is calls "name args" ... and the content "" (NULL) or content */
static void expect_calls_content(enum srv_tool_format f, const char *text, const char *content, size_t n,
                                 const char *const *names, const char *const *args)
{
    struct srv_tool_calls c;
    ck_assert_msg(parse(f, text, &c), "%s: not read as tool calls: %s", srv_tool_format_name(f), text);
    if (content) ck_assert_msg(c.content && strcmp(c.content, content) == 0, "%s: content '%s', not '%s'", text,
                               c.content ? c.content : "", content);
    else ck_assert_msg(c.content == NULL && c.content_len == 0, "%s: content '%s'", text, c.content);
    ck_assert_msg(c.n == n, "%s: %zu calls, not %zu", text, c.n, n);
    for (size_t i = 0; i < n; i++) {
        ck_assert_str_eq(c.calls[i].name, names[i]);
        ck_assert_str_eq(c.calls[i].arguments, args[i]);
        ck_assert_uint_eq(c.calls[i].arguments_len, strlen(args[i]));
    }
    srv_tool_calls_free(&c);
}

/* text is content_len bytes of content then calls "name args" ... */
static void expect_calls(enum srv_tool_format f, const char *text, size_t content_len, size_t n,
                         const char *const *names, const char *const *args)
{
    char *content = content_len ? strndup(text, content_len) : NULL;
    expect_calls_content(f, text, content, n, names, args);
    free(content);
}

static void expect_content(enum srv_tool_format f, const char *text)
{
    struct srv_tool_calls c;
    ck_assert_msg(!parse(f, text, &c), "%s: read as tool calls: %s", srv_tool_format_name(f), text);
    ck_assert_ptr_null(c.calls);
}

START_TEST(test_detect)
{
    ck_assert_int_eq(srv_tool_format_detect("chatml", NULL), SRV_TOOLS_HERMES);
    ck_assert_int_eq(srv_tool_format_detect("llama3", NULL), SRV_TOOLS_LLAMA3);
    ck_assert_int_eq(srv_tool_format_detect("mistral", NULL), SRV_TOOLS_MISTRAL);
    ck_assert_int_eq(srv_tool_format_detect(NULL, NULL), SRV_TOOLS_HERMES);
    ck_assert_int_eq(srv_tool_format_detect(NULL, "{{ messages }}"), SRV_TOOLS_HERMES);
    ck_assert_int_eq(srv_tool_format_detect(NULL, "<|im_assistant|>assistant<|im_middle|>"
                                                  "<|tool_calls_section_begin|>{% for c in calls %}"),
                     SRV_TOOLS_KIMI);
    if (!test_require_data()) return;
    static const struct {
        const char *file;
        enum srv_tool_format f;
    } t[] = {
        {"chat/Qwen-Qwen2.5-7B-Instruct.jinja", SRV_TOOLS_HERMES},
        {"chat/meta-llama-Llama-3.1-8B-Instruct.jinja", SRV_TOOLS_LLAMA3},
        {"chat/llama3.jinja", SRV_TOOLS_LLAMA3},
        {"chat/mistralai-Mistral-Nemo-Instruct-2407.jinja", SRV_TOOLS_MISTRAL},
        {"chat/qwen3.jinja", SRV_TOOLS_HERMES},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        size_t len;
        char *text = test_read_file(test_data_path(t[i].file), &len);
        ck_assert_msg(srv_tool_format_detect(NULL, text) == t[i].f, "%s: %s", t[i].file,
                      srv_tool_format_name(srv_tool_format_detect(NULL, text)));
        free(text);
    }
}
END_TEST

START_TEST(test_hermes)
{
    const enum srv_tool_format h = SRV_TOOLS_HERMES;
    static const char *const one[] = {"get_weather"}, *const one_args[] = {"{\"city\":\"Paris\",\"days\":2}"};
    expect_calls(h, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>",
                 0, 1, one, one_args);
    /* re-serialised compactly, whatever the spacing; a string of JSON as arguments */
    expect_calls(h, "<tool_call>{ \"name\" :\"get_weather\",\n \"arguments\" : \"{\\\"city\\\": \\\"Paris\\\", \\\"days\\\": 2}\" }</tool_call>\n",
                 0, 1, one, one_args);
    /* an unclosed last block; parameters for arguments */
    expect_calls(h, "  <tool_call>\n{\"name\": \"get_weather\", \"parameters\": {\"city\":\"Paris\",\"days\":2}}", 0, 1,
                 one, one_args);
    static const char *const two[] = {"a", "b"}, *const two_args[] = {"{\"x\":[1,2,{\"y\":null}]}", "{}"};
    expect_calls(h, "Let me look.\n\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": [1, 2, {\"y\": null}]}}\n</tool_call>\n"
                 "<tool_call>\n{\"name\": \"b\"}\n</tool_call>",
                 strlen("Let me look."), 2, two, two_args);
    /* strings, escapes and numbers as the model wrote them */
    static const char *const u[] = {"f"}, *const u_args[] = {"{\"t\":\"caf\\u00e9 \\\"q\\\" \xc3\xa9\",\"n\":[1.50,-0,2E+3]}"};
    expect_calls(h, "<tool_call>{\"name\":\"f\",\"arguments\":{\"t\" : \"caf\\u00e9 \\\"q\\\" \xc3\xa9\", \"n\":\n[1.50, -0, 2E+3]}}</tool_call>",
                 0, 1, u, u_args);
    /* the name after the arguments; other members passed over */
    expect_calls(h, "<tool_call>{\"id\": [1, {\"a\": null}], \"arguments\": {\"x\": 1}, \"name\": \"a\", \"name\": 2}</tool_call>",
                 0, 1, (const char *const[]){"a"}, (const char *const[]){"{\"x\":1}"});
    expect_content(h, "Hello, how can I help?");
    expect_content(h, "");
    /* malformed JSON: once a call has begun it stays, as far as it was
     * written, and the rest is content */
    expect_calls_content(h, "Hi <tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": }\n</tool_call>", "Hi}\n</tool_call>",
                         1, (const char *const[]){"a"}, (const char *const[]){"{\"x\":"});
    expect_calls_content(h, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 01}}", "1}}", 1,
                         (const char *const[]){"a"}, (const char *const[]){"{\"x\":0"});
    expect_content(h, "Hi <tool_call>\n{\"name\": \"a\" \"arguments\": {}}");       /* before the call began */
    expect_content(h, "<tool_call>\n{\"name\": \"a\x01\", \"arguments\": {}}");
    expect_content(h, "<tool_call>\n{\"name\": \"\\u0000\", \"arguments\": {}}");
    expect_content(h, "<tool_call>\n{\"name\": \"\xc3\", \"arguments\": {}}");
    expect_content(h, "<tool_call>\n{\"arguments\": {}}\n</tool_call>");                          /* no name */
    expect_content(h, "<tool_call>\n{\"name\": \"\", \"arguments\": {}}\n</tool_call>");         /* empty name */
    expect_content(h, "<tool_call>\n{\"name\": \"a\", \"arguments\": [1]}\n</tool_call>");       /* not an object */
    expect_content(h, "<tool_call>\n{\"name\": \"a\", \"arguments\": \"{x\"}\n</tool_call>");    /* a string, not JSON */
    /* text after the calls: content after them */
    expect_calls_content(h, "Hm. <tool_call>\n{\"name\": \"a\"}\n</tool_call> and then some text", "Hm.and then some text",
                         1, (const char *const[]){"a"}, (const char *const[]){"{}"});
    expect_content(h, "<tool_call>\n[{\"name\": \"a\"}]\n</tool_call>");
    expect_content(h, "<tool_call>");
    /* the text ends in the next call, before its name: it is dropped */
    expect_calls(h, "<tool_call>\n{\"name\": \"a\"}\n</tool_call><tool_call>", 0, 1, (const char *const[]){"a"},
                 (const char *const[]){"{}"});
    expect_calls(h, "<tool_call>\n{\"name\": \"a\"}\n</tool_call>\n<tool_call>\n{\"arguments\": {\"x\": 1}, \"na", 0, 1,
                 (const char *const[]){"a"}, (const char *const[]){"{}"});
    expect_calls(SRV_TOOLS_LLAMA3, "{\"name\": \"a\", \"parameters\": {}}; {\"na", 0, 1, (const char *const[]){"a"},
                 (const char *const[]){"{}"});
    /* cut short: the call as far as it was written */
    expect_calls(h, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"s\": \"ab", 0, 1, (const char *const[]){"a"},
                 (const char *const[]){"{\"s\":\"ab"});
    expect_content(h, "<tool_call>\n{\"name\": \"a\", \"argu");
}
END_TEST

START_TEST(test_llama3)
{
    const enum srv_tool_format l = SRV_TOOLS_LLAMA3;
    static const char *const one[] = {"get_weather"}, *const one_args[] = {"{\"city\":\"Paris\"}"};
    expect_calls(l, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", 0, 1, one, one_args);
    expect_calls(l, "\n {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n", 0, 1, one, one_args);
    expect_calls(l, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", 0, 1, one,
                 one_args);
    expect_calls(l, "Checking.<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
                 strlen("Checking."), 1, one, one_args);
    static const char *const two[] = {"a", "b"}, *const two_args[] = {"{\"n\":1}", "{\"n\":2.5}"};
    expect_calls(l, "{\"name\": \"a\", \"parameters\": {\"n\": 1}}; {\"name\": \"b\", \"parameters\": {\"n\": 2.5}}", 0,
                 2, two, two_args);
    expect_content(l, "The weather in Paris is sunny.");
    expect_content(l, "{\"answer\": 42}");                                   /* JSON, not a call */
    expect_calls(l, "{\"name\": \"get_weather\", \"parameters\": {\"city\": ", 0, 1, one,
                 (const char *const[]){"{\"city\":"});                                   /* cut short */
    expect_content(l, "I will call {\"name\": \"a\", \"parameters\": {}}");       /* text first, no tag */
    expect_content(l, "<|python_tag|>brave_search.call(query=\"x\")");          /* a built-in tool */
    expect_calls_content(l, "{\"name\": \"a\", \"parameters\": {}} trailing", "trailing", 1, (const char *const[]){"a"},
                         (const char *const[]){"{}"});
}
END_TEST

START_TEST(test_mistral)
{
    const enum srv_tool_format m = SRV_TOOLS_MISTRAL;
    static const char *const one[] = {"get_weather"}, *const one_args[] = {"{\"city\":\"Paris\"}"};
    expect_calls(m, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]", 0, 1, one,
                 one_args);
    expect_calls(m, "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abcdefghi\"}]\n",
                 0, 1, one, one_args);
    static const char *const two[] = {"a", "b"}, *const two_args[] = {"{}", "{\"k\":true}"};
    expect_calls(m, "Sure. [TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"k\": true}}]",
                 strlen("Sure."), 2, two, two_args);
    expect_content(m, "[{\"name\": \"a\", \"arguments\": {}}]");            /* no marker */
    expect_calls(m, "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}", 0, 1, (const char *const[]){"a"},
                 (const char *const[]){"{}"});                                          /* cut short */
    static const char *const three[] = {"a", "b", "c"}, *const three_args[] = {"{}", "{\"k\":1}", "{}"};
    expect_calls(m, "[TOOL_CALLS]{\"name\": \"a\"}[TOOL_CALLS] [{\"name\": \"b\", \"arguments\": \"{\\\"k\\\": 1}\"},{\"name\":\"c\"}]",
                 0, 3, three, three_args);
    expect_content(m, "[TOOL_CALLS][]");
    expect_calls_content(m, "[TOOL_CALLS][{\"name\": \"a\"}, 3]", "3]", 1, (const char *const[]){"a"},
                         (const char *const[]){"{}"});
    expect_calls_content(m, "[TOOL_CALLS][{\"name\": \"a\"}] more", "more", 1, (const char *const[]){"a"},
                         (const char *const[]){"{}"});
}
END_TEST

#define KIMI_CALL(id, args) "<|tool_call_begin|>" id "<|tool_call_argument_begin|>" args "<|tool_call_end|>"
START_TEST(test_kimi)
{
    const enum srv_tool_format k = SRV_TOOLS_KIMI;
    static const char *const one[] = {"get_weather"}, *const one_args[] = {"{\"city\":\"Paris\"}"};
    expect_calls(k, "<|tool_calls_section_begin|>" KIMI_CALL("functions.get_weather:0", "{\"city\": \"Paris\"}")
                    "<|tool_calls_section_end|>", 0, 1, one, one_args);
    /* spaces around the parts; no index; no prefix; the section left open at the end */
    expect_calls(k, "<|tool_calls_section_begin|>\n<|tool_call_begin|> functions.get_weather <|tool_call_argument_begin|>"
                    " {\"city\": \"Paris\"} <|tool_call_end|>\n", 0, 1, one, one_args);
    expect_calls(k, "<|tool_calls_section_begin|>" KIMI_CALL("get_weather:12", "{\"city\":\"Paris\"}"), 0, 1, one,
                 one_args);
    static const char *const two[] = {"a", "b:x"}, *const two_args[] = {"{}", "{\"k\":true}"};
    const char *text = "Let me look. <|tool_calls_section_begin|>" KIMI_CALL("functions.a:0", "{}")
                       KIMI_CALL("functions.b:x:1", "{\"k\": true}") "<|tool_calls_section_end|>";
    expect_calls(k, text, strlen("Let me look."), 2, two, two_args);
    /* the ids are the model's, for the template to write back */
    struct srv_tool_calls c;
    ck_assert(parse(k, text, &c));
    ck_assert_str_eq(c.calls[0].id, "functions.a:0");
    ck_assert_str_eq(c.calls[1].id, "functions.b:x:1");
    srv_tool_calls_free(&c);
    ck_assert(parse(SRV_TOOLS_HERMES, "<tool_call>{\"name\": \"a\"}</tool_call>", &c));
    ck_assert_ptr_null(c.calls[0].id);
    srv_tool_calls_free(&c);

    expect_content(k, KIMI_CALL("functions.a:0", "{}"));                           /* no section */
    expect_content(k, "<|tool_calls_section_begin|><|tool_calls_section_end|>");   /* no call */
    expect_content(k, "<|tool_calls_section_begin|>" KIMI_CALL("functions.:0", "{}"));
    expect_content(k, "<|tool_calls_section_begin|>" KIMI_CALL(" ", "{}"));
    expect_content(k, "<|tool_calls_section_begin|>" KIMI_CALL("functions.a:0", "[1]"));
    expect_calls_content(k, "<|tool_calls_section_begin|>" KIMI_CALL("functions.a:0", "{\"x\": "), "<|tool_call_end|>",
                         1, (const char *const[]){"a"}, (const char *const[]){"{\"x\":"});
    expect_content(k, "<|tool_calls_section_begin|><|tool_call_begin|>functions.a:0{}<|tool_call_end|>");
    expect_content(k, "<|tool_calls_section_begin|>" KIMI_CALL("functions.a\x01:0", "{}"));
    expect_content(k, "<|tool_calls_section_begin|>" KIMI_CALL("functions.\xff:0", "{}"));
    expect_calls_content(k, "<|tool_calls_section_begin|>" KIMI_CALL("functions.a:0", "{}") "<|tool_calls_section_end|> more",
                         "more", 1, (const char *const[]){"a"}, (const char *const[]){"{}"});
    expect_calls_content(k, "<|tool_calls_section_begin|>" KIMI_CALL("functions.a:0", "{}") "text", "text", 1,
                         (const char *const[]){"a"}, (const char *const[]){"{}"});
}
END_TEST

START_TEST(test_safe_len)
{
    const enum srv_tool_format h = SRV_TOOLS_HERMES, l = SRV_TOOLS_LLAMA3, m = SRV_TOOLS_MISTRAL;
#define SAFE(f, s, n) ck_assert_msg(srv_tool_calls_safe_len(f, s, strlen(s)) == (n), "%s: %s: %zu, not %d", \
                                    srv_tool_format_name(f), s, srv_tool_calls_safe_len(f, s, strlen(s)), n)
    SAFE(h, "Hello", 5);
    SAFE(h, "Hello <", 5);
    SAFE(h, "Hello <tool_c", 5);
    SAFE(h, "Hello <tool_call>{\"na", 5);
    SAFE(h, "Hello <b>", 9);
    SAFE(h, "a<tool_call", 1);
    SAFE(h, "  ", 0);
    SAFE(h, "{\"a\"", 4);
    SAFE(l, "{", 0);
    SAFE(l, " \n", 0);
    SAFE(l, " {\"name\"", 0);
    SAFE(l, "Hi <|python", 2);
    SAFE(l, "Hi there", 8);
    SAFE(m, "[TOOL", 0);
    SAFE(m, "[1, 2]", 6);
    SAFE(m, "ok [TOOL_CALLS][", 2);
    SAFE(SRV_TOOLS_KIMI, "Sure <|tool_calls_sec", 4);
    SAFE(SRV_TOOLS_KIMI, "Sure <|tool_calls_section_begin|><|tool_call_begin|>", 4);
    SAFE(SRV_TOOLS_KIMI, "Sure <|im_end|>", 15);
#undef SAFE
    /* a stream never takes back what it sent, and never sends a call */
    static const struct {
        enum srv_tool_format f;
        const char *text;
    } t[] = {
        {SRV_TOOLS_HERMES, "Let me see. <tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>"},
        {SRV_TOOLS_HERMES, "a < b, <tool <tool_call>{\"name\": \"a\"}</tool_call>"},
        {SRV_TOOLS_LLAMA3, " {\"name\": \"a\", \"parameters\": {}}"},
        {SRV_TOOLS_LLAMA3, "So <|python_tag|>{\"name\": \"a\", \"parameters\": {}}"},
        {SRV_TOOLS_MISTRAL, "[x] [TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}]"},
        {SRV_TOOLS_KIMI, "<| <|tool_calls_section_begin|>" KIMI_CALL("functions.a:0", "{}") "<|tool_calls_section_end|>"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const size_t len = strlen(t[i].text);
        size_t last = 0;
        for (size_t n = 0; n <= len; n++) {
            size_t safe = srv_tool_calls_safe_len(t[i].f, t[i].text, n);
            ck_assert_msg(safe >= last && safe <= n, "%s at %zu: %zu after %zu", t[i].text, n, safe, last);
            last = safe;
        }
        struct srv_tool_calls c;
        ck_assert_msg(parse(t[i].f, t[i].text, &c), "%s", t[i].text);
        ck_assert_msg(last <= c.content_len, "%s: sent %zu, content %zu", t[i].text, last, c.content_len);
        srv_tool_calls_free(&c);
    }
}
END_TEST


/* Read as a stream gets it -- a byte at a time, and cut at random -- the
 * text gives, state by state, what a stream sends (content that never
 * changes once final, each call's name once, its arguments by
 * appending), and that adds up to the reading of the whole text. */
START_TEST(test_incremental)
{
    static const struct {
        enum srv_tool_format f;
        const char *text;
    } t[] = {
        {SRV_TOOLS_HERMES, "Let me see. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>"},
        {SRV_TOOLS_HERMES, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": [1, 2.5e-3, {\"y\": null}], \"s\": \"\\u00e9\\n\xe2\x82\xac\"}}\n</tool_call>\n"
                           "<tool_call>\n{\"arguments\": {\"k\": true}, \"name\": \"b\"}\n</tool_call>"},
        {SRV_TOOLS_HERMES, "<tool_call>{\"name\":\"a\",\"arguments\":\"{\\\"q\\\": [false]}\"}</tool_call> then text"},
        {SRV_TOOLS_HERMES, "a < b, <tool <tool_call>{\"name\": \"a\", \"arguments\": {\"x\": }}</tool_call>"},
        {SRV_TOOLS_HERMES, "<tool_call>\n[{\"name\": \"a\"}]\n</tool_call>"},
        {SRV_TOOLS_HERMES, "Just text, no calls < at all <tool_"},
        {SRV_TOOLS_HERMES, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"s\": \"cut sh"},
        {SRV_TOOLS_LLAMA3, " {\"name\": \"a\", \"parameters\": {\"n\": -12}}; {\"name\": \"b\", \"parameters\": {\"n\": 0.5}}"},
        {SRV_TOOLS_LLAMA3, "So <|python_tag|>{\"name\": \"a\", \"parameters\": {}}"},
        {SRV_TOOLS_LLAMA3, "{\"answer\": 42}"},
        {SRV_TOOLS_LLAMA3, "  plain words { not json"},
        {SRV_TOOLS_MISTRAL, "[x] [TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"k\": [[]]}, \"id\": \"abcdefghi\"}]"},
        {SRV_TOOLS_MISTRAL, "[TOOL_CALLS][]"},
        {SRV_TOOLS_MISTRAL, "[TOOL_CALLS]{\"name\": \"a\"} [TOOL_CALLS][{\"name\": \"b\"}] more"},
        {SRV_TOOLS_KIMI, "<| <|tool_calls_section_begin|>" KIMI_CALL("functions.a:0", "{}")
                         KIMI_CALL(" functions.b:1 ", " {\"k\": \"v\"} ") "<|tool_calls_section_end|>"},
        {SRV_TOOLS_KIMI, "<|tool_calls_section_begin|>" KIMI_CALL("functions.:0", "{}")},
        {SRV_TOOLS_KIMI, "<|tool_calls_section_begin|><|tool_call_begin|>functions.a:0<|tool_call_argument_begin|>{\"x\": 1"},
        {SRV_TOOLS_HARMONY, "All content <tool_call>{\"name\": \"a\"}</tool_call>"},
    };
    size_t cuts[4096];
    unsigned rng = 12345;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const size_t len = strlen(t[i].text);
        ck_assert(len < sizeof cuts / sizeof cuts[0]);
        for (size_t k = 0; k < len; k++) cuts[k] = k + 1;
        const char *why = toolcall_incremental_check(t[i].f, t[i].text, len, cuts, len);
        ck_assert_msg(!why, "%s, a byte at a time: %s: %s", srv_tool_format_name(t[i].f), why, t[i].text);
        for (int round = 0; round < 50; round++) {
            size_t n = 0, at = 0;
            while (at < len) {
                rng = rng * 1103515245u + 12345u;
                at += 1 + (rng >> 16) % 12;
                cuts[n++] = at < len ? at : len;
            }
            why = toolcall_incremental_check(t[i].f, t[i].text, len, cuts, n);
            ck_assert_msg(!why, "%s, cut at random (round %d): %s: %s", srv_tool_format_name(t[i].f), round, why,
                          t[i].text);
        }
    }
    /* a call's first state: its name once its arguments have begun, and
     * the arguments then growing by a delta per piece */
    struct srv_tool_parser p;
    const char *text = "Sure. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par";
    srv_tool_parser_init(&p, SRV_TOOLS_HERMES);
    srv_tool_parser_feed(&p, text, strlen("Sure. <tool_c"));
    ck_assert_uint_eq(p.content_final, 5);
    ck_assert_uint_eq(p.out.n, 0);
    srv_tool_parser_feed(&p, text, strlen("Sure. <tool_call>\n{\"name\": \"get_weather\", \"argu"));
    ck_assert_uint_eq(p.out.n, 0);
    srv_tool_parser_feed(&p, text, strlen("Sure. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {"));
    ck_assert_uint_eq(p.out.n, 1);
    ck_assert_str_eq(p.out.calls[0].name, "get_weather");
    ck_assert_str_eq(p.out.calls[0].arguments, "{");
    ck_assert_uint_eq(p.content_final, 5);
    srv_tool_parser_feed(&p, text, strlen(text));
    ck_assert_str_eq(p.out.calls[0].arguments, "{\"city\":\"Par");
    ck_assert_uint_eq(p.out.calls[0].arguments_len, strlen("{\"city\":\"Par"));
    srv_tool_parser_free(&p);
}
END_TEST

static const char tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"d\",\"parameters\":"
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"}},"
    "\"required\":[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"ping\"}}]";

START_TEST(test_grammar)
{
    static const struct {
        enum srv_tool_format f;
        const char *name;
        const char *yes[3], *no[3];
    } t[] = {
        {SRV_TOOLS_HERMES, NULL,
         {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>",
          "<tool_call>\n{\"name\":\"ping\",\"arguments\":{}}\n</tool_call>", NULL},
         {"{\"name\": \"ping\", \"arguments\": {}}", "<tool_call>\n{\"name\":\"pong\",\"arguments\":{}}\n</tool_call>",
          "<tool_call>\n{\"name\":\"ping\",\"arguments\":{\"x\":1}}\n</tool_call>"}},
        {SRV_TOOLS_HERMES, "get_weather",
         {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", NULL, NULL},
         {"<tool_call>\n{\"name\":\"ping\",\"arguments\":{}}\n</tool_call>",
          "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"days\": 3}}\n</tool_call>",
          "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": 3}}\n</tool_call>"}},
        {SRV_TOOLS_LLAMA3, NULL,
         {"{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "{\"name\":\"ping\",\"parameters\":{}}", NULL},
         {"{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}", "<|python_tag|>{\"name\":\"ping\",\"parameters\":{}}",
          NULL}},
        {SRV_TOOLS_MISTRAL, "ping",
         {"[TOOL_CALLS][{\"name\": \"ping\", \"arguments\": {}}]", NULL, NULL},
         {"[{\"name\": \"ping\", \"arguments\": {}}]", "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\"}}]",
          NULL}},
        {SRV_TOOLS_KIMI, NULL,
         {"<|tool_calls_section_begin|>" KIMI_CALL("functions.get_weather:0", "{\"city\": \"Paris\", \"days\": 3}")
          "<|tool_calls_section_end|>",
          "<|tool_calls_section_begin|>" KIMI_CALL("functions.ping:0", "{}") "<|tool_calls_section_end|>", NULL},
         {"<|tool_calls_section_begin|>" KIMI_CALL("functions.pong:0", "{}") "<|tool_calls_section_end|>",
          "<|tool_calls_section_begin|>" KIMI_CALL("functions.get_weather:0", "{\"days\": 3}") "<|tool_calls_section_end|>",
          KIMI_CALL("functions.ping:0", "{}")}},
        {SRV_TOOLS_KIMI, "ping",
         {"<|tool_calls_section_begin|>" KIMI_CALL("functions.ping:0", "{}") "<|tool_calls_section_end|>", NULL, NULL},
         {"<|tool_calls_section_begin|>" KIMI_CALL("functions.get_weather:0", "{\"city\": \"P\"}")
          "<|tool_calls_section_end|>",
          "<|tool_calls_section_begin|>" KIMI_CALL("functions.ping:1", "{}") "<|tool_calls_section_end|>", NULL}},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char *g = NULL, why[256];
        ck_assert_msg(srv_tool_calls_grammar(t[i].f, tools, t[i].name, &g, why, sizeof why), "%s", why);
        ck_assert_int_eq(hearth_grammar_check(g, strlen(g)), HEARTH_OK);
        for (size_t k = 0; k < 3; k++) {
            if (t[i].yes[k]) {
                ck_assert_msg(grammar_matches(g, t[i].yes[k]), "%s should accept %s", g, t[i].yes[k]);
                /* what the grammar allows reads back as a call */
                struct srv_tool_calls c;
                ck_assert_msg(parse(t[i].f, t[i].yes[k], &c), "%s", t[i].yes[k]);
                srv_tool_calls_free(&c);
            }
            if (t[i].no[k]) ck_assert_msg(!grammar_matches(g, t[i].no[k]), "%s should refuse %s", g, t[i].no[k]);
        }
        free(g);
    }
    char *g = NULL, why[256];
    ck_assert(!srv_tool_calls_grammar(SRV_TOOLS_HERMES, tools, "nope", &g, why, sizeof why));
    ck_assert_ptr_null(g);
    ck_assert_ptr_nonnull(strstr(why, "nope"));
    ck_assert(!srv_tool_calls_grammar(SRV_TOOLS_HERMES,
                                      "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
                                      "{\"type\":\"string\",\"multipleOf\":3}}}]",
                                      NULL, &g, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "multipleOf"));

    /* Parameters with definitions and references, the same definition
     * name in two tools, and a tool whose schema refers to itself: each
     * tool's references still reach its own definitions. */
    static const char defs_tools[] =
        "[{\"type\":\"function\",\"function\":{\"name\":\"a\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"x\":{\"$ref\":\"#/$defs/v\"}},\"required\":[\"x\"],"
        "\"$defs\":{\"v\":{\"type\":\"integer\"}}}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"b\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"x\":{\"$ref\":\"#/definitions/v\"},\"next\":{\"$ref\":\"#\"}},"
        "\"required\":[\"x\"],\"definitions\":{\"v\":{\"type\":\"string\"}}}}}]";
    ck_assert_msg(srv_tool_calls_grammar(SRV_TOOLS_HERMES, defs_tools, NULL, &g, why, sizeof why), "%s", why);
    static const char *const yes[] = {
        "<tool_call>\n{\"name\":\"a\",\"arguments\":{\"x\":1}}\n</tool_call>",
        "<tool_call>\n{\"name\":\"b\",\"arguments\":{\"x\":\"s\"}}\n</tool_call>",
        "<tool_call>\n{\"name\":\"b\",\"arguments\":{\"x\":\"s\",\"next\":{\"x\":\"t\",\"next\":{\"x\":\"u\"}}}}\n</tool_call>",
    };
    static const char *const no[] = {
        "<tool_call>\n{\"name\":\"a\",\"arguments\":{\"x\":\"s\"}}\n</tool_call>",
        "<tool_call>\n{\"name\":\"b\",\"arguments\":{\"x\":1}}\n</tool_call>",
        "<tool_call>\n{\"name\":\"b\",\"arguments\":{\"x\":\"s\",\"next\":{\"x\":2}}}\n</tool_call>",
    };
    for (size_t k = 0; k < 3; k++) {
        ck_assert_msg(grammar_matches(g, yes[k]), "%s should accept %s", g, yes[k]);
        ck_assert_msg(!grammar_matches(g, no[k]), "%s should refuse %s", g, no[k]);
    }
    free(g);
    ck_assert_msg(srv_tool_calls_grammar(SRV_TOOLS_MISTRAL, defs_tools, "b", &g, why, sizeof why), "%s", why);
    ck_assert(grammar_matches(g, "[TOOL_CALLS][{\"name\":\"b\",\"arguments\":{\"x\":\"s\",\"next\":{\"x\":\"t\"}}}]"));
    ck_assert(!grammar_matches(g, "[TOOL_CALLS][{\"name\":\"b\",\"arguments\":{\"x\":\"s\",\"next\":{\"x\":1}}}]"));
    free(g);

    /* Harmony (gpt-oss): a commentary message to the named tool, or with
     * tool_choice "required" to any of them, its body the tool's
     * arguments -- each tool's own schema, the same rule and definition
     * names in two tools kept apart. */
#define CALL(name, args) "<|channel|>commentary to=functions." name " <|constrain|>json<|message|>" args
    ck_assert_msg(srv_tool_calls_grammar(SRV_TOOLS_HARMONY, defs_tools, NULL, &g, why, sizeof why), "%s", why);
    ck_assert_int_eq(hearth_grammar_check(g, strlen(g)), HEARTH_OK);
    static const char *const h_yes[] = {
        CALL("a", "{\"x\":1}"), CALL("b", "{\"x\":\"s\"}"), CALL("b", "{\"x\":\"s\",\"next\":{\"x\":\"t\"}}"),
    };
    static const char *const h_no[] = {
        CALL("a", "{\"x\":\"s\"}"), CALL("b", "{\"x\":1}"), CALL("c", "{\"x\":1}"),
        "<|channel|>final<|message|>{\"x\":1}", CALL("a", "{\"x\":1}") "more",
    };
    for (size_t k = 0; k < sizeof h_yes / sizeof *h_yes; k++)
        ck_assert_msg(grammar_matches(g, h_yes[k]), "%s should accept %s", g, h_yes[k]);
    for (size_t k = 0; k < sizeof h_no / sizeof *h_no; k++)
        ck_assert_msg(!grammar_matches(g, h_no[k]), "%s should refuse %s", g, h_no[k]);
    free(g);
    ck_assert_msg(srv_tool_calls_grammar(SRV_TOOLS_HARMONY, tools, "ping", &g, why, sizeof why), "%s", why);
    ck_assert(grammar_matches(g, CALL("ping", "{}")));
    ck_assert(!grammar_matches(g, CALL("get_weather", "{\"city\":\"P\"}")));
    ck_assert(!grammar_matches(g, CALL("ping", "{\"x\":1}")));
    free(g);
    ck_assert(!srv_tool_calls_grammar(SRV_TOOLS_HARMONY, tools, "nope", &g, why, sizeof why));
    ck_assert_ptr_null(g);
    ck_assert(!srv_tool_calls_grammar(SRV_TOOLS_HARMONY, "[{\"type\":\"function\",\"function\":{\"name\":\"a\\\"b\"}}]",
                                      NULL, &g, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "character"));
#undef CALL
}
END_TEST

/* parallel_tool_calls: the grammar of one call or more takes the
 * format's several calls, which read back as that many; the grammar of
 * one call refuses them. */
START_TEST(test_grammar_several)
{
    static const struct {
        enum srv_tool_format f;
        const char *name, *two;
    } t[] = {
        {SRV_TOOLS_HERMES, NULL,
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
         "<tool_call>\n{\"name\":\"ping\",\"arguments\":{}}\n</tool_call>"},
        {SRV_TOOLS_LLAMA3, NULL, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}; {\"name\":\"ping\",\"parameters\":{}}"},
        {SRV_TOOLS_MISTRAL, "get_weather",
         "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"A\"}}, {\"name\": \"get_weather\", \"arguments\": {\"city\": \"B\"}}]"},
        {SRV_TOOLS_KIMI, NULL,
         "<|tool_calls_section_begin|>" KIMI_CALL("functions.get_weather:0", "{\"city\": \"Paris\"}")
         KIMI_CALL("functions.ping:1", "{}") "<|tool_calls_section_end|>"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char *one = NULL, *several = NULL, why[256];
        ck_assert_msg(srv_tool_calls_grammar_n(t[i].f, tools, t[i].name, true, &several, why, sizeof why), "%s", why);
        ck_assert_msg(srv_tool_calls_grammar_n(t[i].f, tools, t[i].name, false, &one, why, sizeof why), "%s", why);
        ck_assert_int_eq(hearth_grammar_check(several, strlen(several)), HEARTH_OK);
        ck_assert_msg(grammar_matches(several, t[i].two), "%s should accept %s", several, t[i].two);
        ck_assert_msg(!grammar_matches(one, t[i].two), "%s should refuse %s", one, t[i].two);
        struct srv_tool_calls c;
        ck_assert_msg(parse(t[i].f, t[i].two, &c) && c.n == 2, "%s: two calls", t[i].two);
        srv_tool_calls_free(&c);
        free(one);
        free(several);
    }
    /* harmony writes one call per message: one either way */
    char *g = NULL, why[256];
    ck_assert_msg(srv_tool_calls_grammar_n(SRV_TOOLS_HARMONY, tools, "ping", true, &g, why, sizeof why), "%s", why);
    ck_assert(grammar_matches(g, "<|channel|>commentary to=functions.ping <|constrain|>json<|message|>{}"));
    free(g);
}
END_TEST

/* The assistant turn that template file renders for a request body that
 * ends with an assistant message: the whole conversation less the one
 * before that message, with the end-of-turn text taken off. */
static char *assistant_turn(const char *file, const char *body)
{
    static hearth_sampler_params defaults;
    hearth_sampler_params_default(&defaults);
    const struct srv_limits lim = {100, 64, &defaults, -1};
    struct srv_request r;
    struct srv_error e;
    ck_assert_msg(srv_request_parse(SRV_CHAT, body, strlen(body), &lim, &r, &e), "%s", e.message);
    size_t len;
    char *src = test_read_file(test_data_path(file), &len);
    hearth_template *t;
    ck_assert_msg(hearth_template_parse(src, len, &t) == HEARTH_OK, "%s: %s", file, hearth_last_error());
    free(src);
    hearth_chat_options o;
    memset(&o, 0, sizeof o);
    o.bos_token = "<s>";
    o.eos_token = "</s>";
    o.tools_json = r.tools_json;
    o.date = "26 Jul 2024";
    char *all, *before;
    ck_assert_msg(hearth_template_render(t, r.messages_json, strlen(r.messages_json), &o, &all, NULL) == HEARTH_OK,
                  "%s: %s", file, hearth_last_error());
    /* the same messages without the last */
    json_t *msgs = json_loads(r.messages_json, 0, NULL);
    json_array_remove(msgs, json_array_size(msgs) - 1);
    char *head = json_dumps(msgs, JSON_COMPACT);
    json_decref(msgs);
    o.add_generation_prompt = true;
    ck_assert_msg(hearth_template_render(t, head, strlen(head), &o, &before, NULL) == HEARTH_OK, "%s: %s", file,
                  hearth_last_error());
    free(head);
    hearth_template_free(t);
    srv_request_free(&r);
    const size_t n = strlen(before);
    ck_assert_msg(strncmp(all, before, n) == 0, "%s: the conversation does not begin with its prompt:\n%s\n---\n%s",
                  file, all, before);
    char *turn = strdup(all + n);
    hearth_free(all);
    hearth_free(before);
    static const char *const ends[] = {"<|im_end|>\n", "<|eot_id|>", "<|eom_id|>", "</s>"};
    for (size_t i = 0; i < 4; i++) {
        size_t tl = strlen(turn), el = strlen(ends[i]);
        if (tl >= el && strcmp(turn + tl - el, ends[i]) == 0) turn[tl - el] = '\0';
    }
    return turn;
}

/* calls: a JSON array of {"name", "arguments"} as an OpenAI client sends
 * them back (arguments a JSON string) */
static void round_trip(const char *file, enum srv_tool_format f, const char *calls_json)
{
    json_t *calls = json_loads(calls_json, 0, NULL);
    ck_assert_ptr_nonnull(calls);
    json_t *tc = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c) {
        char id[32];
        snprintf(id, sizeof id, "abc%06u", (unsigned)i % 1000000u); /* nine letters and digits, as Mistral's template wants */
        json_array_append_new(tc, json_pack("{s:s, s:s, s:{s:O, s:O}}", "id", id, "type", "function", "function",
                                            "name", json_object_get(c, "name"), "arguments",
                                            json_object_get(c, "arguments")));
    }
    json_t *body = json_pack(
        "{s:[{s:s, s:s}, {s:s, s:n, s:o}], s:o}", "messages", "role", "user", "content", "What is the weather?",
        "role", "assistant", "content", "tool_calls", tc, "tools", json_loads(tools, 0, NULL));
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    char *turn = assistant_turn(file, text);
    free(text);
    struct srv_tool_calls got;
    ck_assert_msg(srv_tool_calls_parse(f, turn, strlen(turn), &got), "%s: the turn is not read as calls: %s", file,
                  turn);
    ck_assert_msg(got.n == json_array_size(calls), "%s: %zu calls in %s", file, got.n, turn);
    ck_assert_msg(got.content_len == 0, "%s: content before the calls in %s", file, turn);
    json_array_foreach(calls, i, c) {
        ck_assert_str_eq(got.calls[i].name, json_string_value(json_object_get(c, "name")));
        json_t *want = json_loads(json_string_value(json_object_get(c, "arguments")), 0, NULL);
        json_t *have = json_loads(got.calls[i].arguments, 0, NULL);
        ck_assert_msg(json_equal(want, have), "%s: arguments %s, not %s", file, got.calls[i].arguments,
                      json_string_value(json_object_get(c, "arguments")));
        json_decref(want);
        json_decref(have);
    }
    srv_tool_calls_free(&got);
    free(turn);
    json_decref(calls);
}

START_TEST(test_round_trip)
{
    if (!test_require_data()) return;
    const char *one = "[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\",\\\"days\\\":3}\"}]";
    const char *two = "[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Z\\u00fcrich\\\"}\"},"
                      "{\"name\":\"ping\",\"arguments\":\"{}\"}]";
    round_trip("chat/Qwen-Qwen2.5-7B-Instruct.jinja", SRV_TOOLS_HERMES, one);
    round_trip("chat/Qwen-Qwen2.5-7B-Instruct.jinja", SRV_TOOLS_HERMES, two);
    round_trip("chat/meta-llama-Llama-3.1-8B-Instruct.jinja", SRV_TOOLS_LLAMA3, one); /* one call at a time */
    round_trip("chat/mistralai-Mistral-Nemo-Instruct-2407.jinja", SRV_TOOLS_MISTRAL, one);
    round_trip("chat/mistralai-Mistral-Nemo-Instruct-2407.jinja", SRV_TOOLS_MISTRAL, two);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("toolcall");
    TCase *tc = tcase_create("toolcall");
    tcase_add_test(tc, test_detect);
    tcase_add_test(tc, test_hermes);
    tcase_add_test(tc, test_llama3);
    tcase_add_test(tc, test_mistral);
    tcase_add_test(tc, test_kimi);
    tcase_add_test(tc, test_safe_len);
    tcase_add_test(tc, test_incremental);
    tcase_add_test(tc, test_grammar);
    tcase_add_test(tc, test_grammar_several);
    tcase_add_test(tc, test_round_trip);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}

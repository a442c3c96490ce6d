/*
 * test-reasoning.c -- the reasoning split: each format's parts of sample
 * outputs (markers never shown, whitespace after </think> dropped,
 * reasoning left open, harmony's tool calls), the same parts however the
 * text is cut (at every byte, and into random pieces), UTF-8 refused
 * when ill-formed, the tool calls' limits, the format the shared chat
 * templates are detected to write, and where the text stands after each
 * piece (what the engine reads to start a grammar at the answer).
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reasoning.h"
#include "testutil.h"

struct parts {
    char reasoning[8192], answer[8192];
    size_t n_reasoning, n_answer;
};

static void add(struct parts *p, const hearth_reasoning_text *t)
{
    ck_assert_uint_le(p->n_reasoning + t->reasoning_len, sizeof p->reasoning - 1);
    ck_assert_uint_le(p->n_answer + t->answer_len, sizeof p->answer - 1);
    memcpy(p->reasoning + p->n_reasoning, t->reasoning, t->reasoning_len);
    memcpy(p->answer + p->n_answer, t->answer, t->answer_len);
    p->n_reasoning += t->reasoning_len;
    p->n_answer += t->answer_len;
    p->reasoning[p->n_reasoning] = p->answer[p->n_answer] = '\0';
}

static hearth_reasoning_split *new_split(hearth_reasoning_format f, const char *prompt)
{
    hearth_reasoning_split *s;
    ck_assert_msg(hearth_reasoning_split_new(f, prompt, prompt ? strlen(prompt) : 0, &s) == HEARTH_OK,
                  "%s", hearth_last_error());
    return s;
}

/* Split text cut at the offsets cuts[0..n_cuts) (increasing); the split
 * is returned for its tool calls. */
static hearth_reasoning_split *split_cut(hearth_reasoning_format f, const char *prompt,
                                         const char *text, const size_t *cuts, size_t n_cuts,
                                         struct parts *p)
{
    memset(p, 0, sizeof *p);
    hearth_reasoning_split *s = new_split(f, prompt);
    size_t at = 0, len = strlen(text);
    hearth_reasoning_text t;
    for (size_t k = 0; k <= n_cuts; k++) {
        size_t to = k < n_cuts ? cuts[k] : len;
        ck_assert_msg(hearth_reasoning_split_push(s, text + at, to - at, &t) == HEARTH_OK, "%s",
                      hearth_last_error());
        /* whole characters only, in both parts */
        ck_assert_uint_eq(hearth_utf8_valid_prefix(t.reasoning, t.reasoning_len), t.reasoning_len);
        ck_assert_uint_eq(hearth_utf8_valid_prefix(t.answer, t.answer_len), t.answer_len);
        add(p, &t);
        at = to;
    }
    ck_assert_msg(hearth_reasoning_split_finish(s, &t) == HEARTH_OK, "%s", hearth_last_error());
    add(p, &t);
    return s;
}

static void no_markers(const char *part)
{
    static const char *const markers[] = {"<think>", "</think>", "<|channel|>", "<|message|>",
                                          "<|start|>", "<|end|>", "<|return|>", "<|call|>"};
    for (size_t k = 0; k < HEARTH_ARRAY_LEN(markers); k++)
        ck_assert_msg(!strstr(part, markers[k]), "%s leaked into \"%s\"", markers[k], part);
}

/* Every cut of text into two pieces and random cuts into many give the
 * parts of the whole, which are want_reasoning and want_answer. */
static void check(hearth_reasoning_format f, const char *prompt, const char *text,
                  const char *want_reasoning, const char *want_answer)
{
    struct parts whole, cut;
    hearth_reasoning_split_free(split_cut(f, prompt, text, NULL, 0, &whole));
    ck_assert_str_eq(whole.reasoning, want_reasoning);
    ck_assert_str_eq(whole.answer, want_answer);
    /* where the text's markers are all markup, none is left */
    if (!strchr(want_reasoning, '<')) no_markers(whole.reasoning);
    if (!strchr(want_answer, '<')) no_markers(whole.answer);
    const size_t len = strlen(text);
    for (size_t at = 0; at <= len; at++) {
        hearth_reasoning_split_free(split_cut(f, prompt, text, &at, 1, &cut));
        ck_assert_msg(strcmp(cut.reasoning, want_reasoning) == 0 && strcmp(cut.answer, want_answer) == 0,
                      "cut at %zu of \"%s\": \"%s\" / \"%s\"", at, text, cut.reasoning, cut.answer);
    }
    test_rng rng;
    test_rng_seed(&rng, len);
    for (int iter = 0; iter < 200; iter++) {
        size_t cuts[64], n = 0;
        for (size_t at = 0; n < 64;) {
            at += 1 + test_rng_next(&rng) % 6;
            if (at >= len) break;
            cuts[n++] = at;
        }
        hearth_reasoning_split_free(split_cut(f, prompt, text, cuts, n, &cut));
        ck_assert_msg(strcmp(cut.reasoning, want_reasoning) == 0 && strcmp(cut.answer, want_answer) == 0,
                      "iteration %d of \"%s\": \"%s\" / \"%s\"", iter, text, cut.reasoning, cut.answer);
    }
}

START_TEST(test_think)
{
    const hearth_reasoning_format T = HEARTH_REASONING_THINK;
    check(T, NULL, "<think>Let me see.</think>\n\nIt is 4.", "Let me see.", "It is 4.");
    check(T, NULL, "\n<think>\nplan\n</think>\nanswer\n", "\nplan\n", "answer\n");
    /* multi-byte characters against the markers */
    check(T, NULL, "<think>é≠😀</think>😀ü", "é≠😀", "😀ü");
    check(T, NULL, "<think>a < b, </thin </think>x", "a < b, </thin ", "x");
    /* no reasoning */
    check(T, NULL, "Just an answer: <think> stays.", "", "Just an answer: <think> stays.");
    check(T, NULL, "  <thin", "", "  <thin");
    check(T, NULL, "", "", "");
    /* left open */
    check(T, NULL, "<think>still thinking </thi", "still thinking </thi", "");
    /* the template opened the block */
    check(T, "<|im_start|>assistant\n<think>\n", "I should add.\n</think>\n\n2", "I should add.\n", "2");
    check(T, "<｜Assistant｜><think>", "é</think>ü", "é", "ü");
    /* a closed block in the prompt: the text starts outside, and stays
     * there (thinking is off) */
    check(T, "<think>\n\n</think>\n\n", "plain", "", "plain");
    check(T, "<|im_start|>assistant\n<think>\n\n</think>\n\n", "<think>x</think>y", "",
          "<think>x</think>y");
    /* only the leading block is reasoning */
    check(T, NULL, "<think>a</think>b<think>c</think>", "a", "b<think>c</think>");
}
END_TEST

START_TEST(test_harmony)
{
    const hearth_reasoning_format H = HEARTH_REASONING_HARMONY;
    check(H, NULL,
          "<|channel|>analysis<|message|>User asks 2+2.<|end|><|start|>assistant<|channel|>final"
          "<|message|>4<|return|>",
          "User asks 2+2.", "4");
    check(H, NULL, "<|channel|>analysis<|message|>ü≠<|end|><|start|>assistant<|channel|>final<|message|>😀",
          "ü≠", "😀");
    /* left open */
    check(H, NULL, "<|channel|>analysis<|message|>thinking <|en", "thinking <|en", "");
    /* not harmony at all */
    check(H, NULL, "plain text", "", "plain text");
    check(H, NULL, " to", "", " to");
    /* a prompt that ends inside a message */
    check(H, "<|start|>assistant<|channel|>final<|message|>", "Hi<|end|>", "", "Hi");
    check(H, "<|start|>assistant<|channel|>analysis<|message|>", "hmm<|end|><|start|>assistant"
          "<|channel|>final<|message|>ok", "hmm", "ok");
    /* commentary without a recipient is a preamble for the user */
    check(H, NULL, "<|channel|>commentary<|message|>Looking it up.<|end|>", "", "Looking it up.");
    /* a header that never ends is text after all */
    char long_header[1200];
    snprintf(long_header, sizeof long_header, "<|channel|>%0900d", 7);
    check(H, NULL, long_header, "", long_header + strlen("<|channel|>"));
}
END_TEST

START_TEST(test_harmony_tool_calls)
{
    const char *text =
        "<|channel|>analysis<|message|>Need weather.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
        "<|message|>{\"city\": \"Zürich\"}<|call|>";
    check(HEARTH_REASONING_HARMONY, NULL, text, "Need weather.", "");
    for (size_t at = 0; at <= strlen(text); at++) {
        struct parts p;
        hearth_reasoning_split *s = split_cut(HEARTH_REASONING_HARMONY, NULL, text, &at, 1, &p);
        ck_assert_uint_eq(hearth_reasoning_split_n_tool_calls(s), 1);
        const char *name, *args;
        size_t n;
        ck_assert_int_eq(hearth_reasoning_split_tool_call(s, 0, &name, &args, &n), HEARTH_OK);
        ck_assert_str_eq(name, "get_weather");
        ck_assert_str_eq(args, "{\"city\": \"Zürich\"}");
        ck_assert_uint_eq(n, strlen(args));
        ck_assert_int_eq(hearth_reasoning_split_tool_call(s, 1, &name, &args, &n), HEARTH_E_RANGE);
        hearth_reasoning_split_free(s);
    }
    /* the recipient before the channel, two calls */
    struct parts p;
    hearth_reasoning_split *s = split_cut(HEARTH_REASONING_HARMONY, NULL,
        " to=functions.a<|channel|>commentary json<|message|>{}<|call|>"
        "<|start|>assistant to=functions.b<|channel|>commentary<|message|>{\"x\":1}<|end|>"
        "<|start|>assistant to=browser.search<|channel|>commentary<|message|>{\"q\":1}<|end|>",
        NULL, 0, &p);
    ck_assert_uint_eq(hearth_reasoning_split_n_tool_calls(s), 2);
    const char *name, *args;
    size_t n;
    ck_assert_int_eq(hearth_reasoning_split_tool_call(s, 1, &name, &args, &n), HEARTH_OK);
    ck_assert_str_eq(name, "b");
    ck_assert_str_eq(args, "{\"x\":1}");
    ck_assert_str_eq(p.reasoning, "{\"q\":1}"); /* a built-in tool's call */
    ck_assert_str_eq(p.answer, "");
    hearth_reasoning_split_free(s);
}
END_TEST

START_TEST(test_limits_and_errors)
{
    hearth_reasoning_split *s = new_split(HEARTH_REASONING_HARMONY, NULL);
    hearth_reasoning_text t;
    hearth_status st = HEARTH_OK;
    for (int i = 0; i < 200 && !st; i++)
        st = hearth_reasoning_split_push(s, "<|start|>assistant to=functions.f<|channel|>commentary"
                                            "<|message|>{}<|call|>", 66, &t);
    ck_assert_int_eq(st, HEARTH_E_RANGE);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "128 tool calls"));
    ck_assert_int_eq(hearth_reasoning_split_push(s, "x", 1, &t), HEARTH_E_INVALID);
    hearth_reasoning_split_free(s);

    /* arguments of a megabyte come through whole */
    s = new_split(HEARTH_REASONING_HARMONY, NULL);
    ck_assert_int_eq(hearth_reasoning_split_push(s, "to=functions.big<|channel|>commentary<|message|>",
                                                 48, &t), HEARTH_OK);
    char *chunk = test_malloc(65536);
    memset(chunk, 'a', 65536);
    for (int i = 0; i < 16; i++)
        ck_assert_int_eq(hearth_reasoning_split_push(s, chunk, 65536, &t), HEARTH_OK);
    free(chunk);
    ck_assert_int_eq(hearth_reasoning_split_finish(s, &t), HEARTH_OK);
    const char *name, *args;
    size_t n;
    ck_assert_int_eq(hearth_reasoning_split_tool_call(s, 0, &name, &args, &n), HEARTH_OK);
    ck_assert_uint_eq(n, (size_t)16 << 16);
    hearth_reasoning_split_free(s);

    /* ill-formed UTF-8 is refused, the piece not taken */
    s = new_split(HEARTH_REASONING_THINK, NULL);
    ck_assert_int_eq(hearth_reasoning_split_push(s, "<think>a\xff", 9, &t), HEARTH_E_INVALID);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "UTF-8"));
    ck_assert_int_eq(hearth_reasoning_split_push(s, "<think>a\xc3", 9, &t), HEARTH_OK);
    ck_assert_int_eq(hearth_reasoning_split_push(s, "\xa9</think>", 10, &t), HEARTH_OK);
    ck_assert_int_eq(t.reasoning_len, 2);
    ck_assert_int_eq(memcmp(t.reasoning, "\xc3\xa9", 2), 0);
    ck_assert_int_eq(hearth_reasoning_split_push(s, "b\xe2\x82", 3, &t), HEARTH_OK);
    ck_assert_int_eq(hearth_reasoning_split_finish(s, &t), HEARTH_E_INVALID);
    ck_assert_int_eq(hearth_reasoning_split_finish(s, &t), HEARTH_E_INVALID);
    hearth_reasoning_split_free(s);

    ck_assert_int_eq(hearth_reasoning_split_new((hearth_reasoning_format)7, NULL, 0, &s),
                     HEARTH_E_INVALID);
    ck_assert_ptr_null(s);
    hearth_reasoning_format f;
    ck_assert_int_eq(hearth_reasoning_format_from_name("harmony", &f), HEARTH_OK);
    ck_assert_int_eq(f, HEARTH_REASONING_HARMONY);
    ck_assert_int_eq(hearth_reasoning_format_from_name("deepseek", &f), HEARTH_E_INVALID);
    ck_assert_str_eq(hearth_reasoning_format_name(HEARTH_REASONING_THINK), "think");
}
END_TEST

START_TEST(test_none)
{
    check(HEARTH_REASONING_NONE, NULL, "a <think> b </think> ü", "", "a <think> b </think> ü");
}
END_TEST

/* A chat template's text, and what rendering its generation prompt gives. */
static hearth_reasoning_format detect_file(const char *name, char **prompt)
{
    const char *path = test_data_path(name);
    ck_assert_ptr_nonnull(path);
    size_t len;
    char *text = test_read_file(path, &len);
    hearth_reasoning_format f = hearth_reasoning_format_detect(text, len);
    hearth_template *tmpl;
    ck_assert_msg(hearth_template_parse(text, len, &tmpl) == HEARTH_OK, "%s", hearth_last_error());
    hearth_chat_message m = {"user", "What is 2+2?"};
    hearth_chat_options o = {.add_generation_prompt = true, .date = "2026-01-01"};
    ck_assert_msg(hearth_template_render_messages(tmpl, &m, 1, &o, prompt, NULL) == HEARTH_OK, "%s",
                  hearth_last_error());
    hearth_template_free(tmpl);
    free(text);
    return f;
}

START_TEST(test_detect)
{
    if (!test_require_data()) return;
    char *prompt;
    ck_assert_int_eq(detect_file("chat/qwen3.jinja", &prompt), HEARTH_REASONING_THINK);
    hearth_reasoning_split *s = new_split(HEARTH_REASONING_THINK, prompt);
    ck_assert(!hearth_reasoning_split_in_reasoning(s)); /* Qwen3 opens it itself */
    hearth_reasoning_split_free(s);
    hearth_free(prompt);

    ck_assert_int_eq(detect_file("chat/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", &prompt),
                     HEARTH_REASONING_THINK);
    /* R1's generation prompt opens the block: the text starts inside */
    s = new_split(HEARTH_REASONING_THINK, prompt);
    ck_assert(hearth_reasoning_split_in_reasoning(s));
    hearth_reasoning_text t;
    ck_assert_int_eq(hearth_reasoning_split_push(s, "so 4</think>\n\n4", 15, &t), HEARTH_OK);
    ck_assert_int_eq(t.reasoning_len, 4);
    ck_assert_int_eq(t.answer_len, 1);
    hearth_reasoning_split_free(s);
    hearth_free(prompt);

    ck_assert_int_eq(detect_file("chat/Qwen-Qwen2.5-7B-Instruct.jinja", &prompt), HEARTH_REASONING_NONE);
    hearth_free(prompt);
    ck_assert_int_eq(detect_file("chat/llama3.jinja", &prompt), HEARTH_REASONING_NONE);
    hearth_free(prompt);

    /* the shape of gpt-oss's template */
    static const char harmony[] =
        "{%- for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor -%}"
        "{%- if add_generation_prompt %}<|start|>assistant{% endif %}"
        "{#- <|channel|>analysis, commentary, final; Reasoning: {{ reasoning_effort }} #}";
    ck_assert_int_eq(hearth_reasoning_format_detect(harmony, strlen(harmony)), HEARTH_REASONING_HARMONY);
    ck_assert_int_eq(hearth_reasoning_format_detect(NULL, 0), HEARTH_REASONING_NONE);
}
END_TEST

/* Push the pieces one by one; after each, the split stands at want[i]. */
static void walk(hearth_reasoning_format f, const char *prompt, enum reasoning_at start,
                 const char *const *pieces, const enum reasoning_at *want)
{
    hearth_reasoning_split *s = new_split(f, prompt);
    ck_assert_int_eq(reasoning_split_at(s), start);
    hearth_reasoning_text t;
    for (size_t i = 0; pieces[i]; i++) {
        ck_assert_int_eq(hearth_reasoning_split_push(s, pieces[i], strlen(pieces[i]), &t), HEARTH_OK);
        ck_assert_msg(reasoning_split_at(s) == want[i], "after \"%s\" (piece %zu): %d, want %d", pieces[i], i,
                      (int)reasoning_split_at(s), (int)want[i]);
    }
    hearth_reasoning_split_free(s);
}

START_TEST(test_where)
{
    const enum reasoning_at O = REASONING_AT_OPEN, R = REASONING_AT_REASONING, A = REASONING_AT_ANSWER,
                            X = REASONING_AT_OTHER;
    const hearth_reasoning_format T = HEARTH_REASONING_THINK, H = HEARTH_REASONING_HARMONY;
    /* think: whitespace keeps the start open; a marker cut in pieces
     * stays in the reasoning until its last byte */
    walk(T, NULL, O, (const char *const[]){"\n", "<thi", "nk>", "a", "</th", "ink>", "\n", "b", NULL},
         (const enum reasoning_at[]){O, O, R, R, R, A, A, A});
    walk(T, NULL, O, (const char *const[]){"{", NULL}, (const enum reasoning_at[]){A});
    walk(T, "<think>\n", R, (const char *const[]){"x", "</think>", NULL}, (const enum reasoning_at[]){R, A});
    walk(T, "<think>\n\n</think>\n\n", A, (const char *const[]){"<think>", NULL}, (const enum reasoning_at[]){A});
    /* harmony: headers are neither part; analysis reasoning, final the
     * answer, a call's arguments neither */
    walk(H, "<|start|>assistant", O,
         (const char *const[]){"<|channel|>", "analysis", "<|message|>", "hm", "<|end|>", "<|start|>",
                               "assistant", "<|channel|>final<|message|>", "{", NULL},
         (const enum reasoning_at[]){X, X, R, R, O, X, X, A, A});
    walk(H, NULL, O, (const char *const[]){"<|channel|>commentary to=functions.f<|message|>", "{}", NULL},
         (const enum reasoning_at[]){X, X});
    walk(H, "<|start|>assistant<|channel|>final<|message|>", A, (const char *const[]){"x", NULL},
         (const enum reasoning_at[]){A});
    walk(H, NULL, O, (const char *const[]){"plain", NULL}, (const enum reasoning_at[]){A});
    walk(HEARTH_REASONING_NONE, NULL, A, (const char *const[]){"<think>", NULL}, (const enum reasoning_at[]){A});
}
END_TEST

int main(void)
{
    Suite *s = suite_create("reasoning");
    TCase *tc = tcase_create("split");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_think);
    tcase_add_test(tc, test_harmony);
    tcase_add_test(tc, test_harmony_tool_calls);
    tcase_add_test(tc, test_limits_and_errors);
    tcase_add_test(tc, test_none);
    tcase_add_test(tc, test_detect);
    tcase_add_test(tc, test_where);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}

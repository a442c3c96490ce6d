/*
 * test-chat-template.c -- the public chat-template API: every shared
 * model template renders every shared conversation exactly as the
 * reference renderings in ../shared/chat (or raises where they are null);
 * tool calling through four model templates against the reference
 * renderer's output written out below; the built-in templates against the
 * published prompt formats; options, dates and argument errors.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "testutil.h"
#include "value.h"

/* ---- the shared reference renderings ------------------------------------ */

static value read_json(const char *relative)
{
    const char *path = test_data_path(relative);
    ck_assert_msg(path != NULL, "missing shared file %s", relative);
    size_t len;
    char *text = test_read_file(path, &len);
    value v;
    ck_assert_msg(json_parse(text, len, relative, &v) == HEARTH_OK, "%s", hearth_last_error());
    free(text);
    return v;
}

static value dict_get(value d, const char *key)
{
    value *v = value_dict_get(d, key, strlen(key));
    ck_assert_msg(v != NULL, "no key %s", key);
    return *v;
}

START_TEST(test_shared_templates)
{
    if (!test_require_data()) return;
    value convs = read_json("chat/conversations.json");
    const char *tsv_path = test_data_path("chat/templates.tsv");
    ck_assert_ptr_nonnull(tsv_path);
    char *tsv = test_read_file(tsv_path, NULL);
    int templates = 0, renderings = 0, raises = 0;
    char *save = NULL;
    char *line = strtok_r(tsv, "\n", &save);   /* the header */
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        /* name \t bos \t eos (bos may be empty) */
        char *tab1 = strchr(line, '\t');
        ck_assert_ptr_nonnull(tab1);
        char *tab2 = strchr(tab1 + 1, '\t');
        ck_assert_ptr_nonnull(tab2);
        *tab1 = *tab2 = '\0';
        const char *name = line, *bos = tab1 + 1, *eos = tab2 + 1;
        char rel[256];
        snprintf(rel, sizeof rel, "chat/%s.jinja", name);
        const char *path = test_data_path(rel);
        ck_assert_msg(path != NULL, "missing %s", rel);
        size_t len;
        char *text = test_read_file(path, &len);
        hearth_template *tmpl;
        ck_assert_msg(hearth_template_parse(text, len, &tmpl) == HEARTH_OK, "%s: %s", name, hearth_last_error());
        free(text);
        snprintf(rel, sizeof rel, "chat/%s.expected.json", name);
        value expected = read_json(rel);
        for (size_t i = 0; i < value_list_len(expected); i++) {
            value e = value_list_at(expected, i);
            const char *conv_name = dict_get(e, "conversation").u.s->data;
            bool agp = dict_get(e, "add_generation_prompt").u.b;
            value want = dict_get(e, "text");
            value messages = value_undefined();
            for (size_t k = 0; k < value_list_len(convs); k++)
                if (strcmp(dict_get(value_list_at(convs, k), "name").u.s->data, conv_name) == 0)
                    messages = dict_get(value_list_at(convs, k), "messages");
            ck_assert_msg(messages.kind == VALUE_LIST, "no conversation %s", conv_name);
            textbuf tb;
            textbuf_init(&tb, 1 << 20, "messages");
            ck_assert_int_eq(json_write(messages, NULL, &tb), HEARTH_OK);
            hearth_chat_options opts = {agp, bos, eos, NULL, "29 Nov 2026", NULL};
            char *out;
            size_t out_len;
            hearth_status st = hearth_template_render(tmpl, tb.data, tb.len, &opts, &out, &out_len);
            textbuf_free(&tb);
            if (want.kind == VALUE_NULL) {
                ck_assert_msg(st == HEARTH_E_TEMPLATE, "%s/%s/%d: rendered instead of raising", name, conv_name, agp);
                raises++;
            } else {
                ck_assert_msg(st == HEARTH_OK, "%s/%s/%d: %s", name, conv_name, agp, hearth_last_error());
                ck_assert_msg(out_len == want.u.s->len && memcmp(out, want.u.s->data, out_len) == 0,
                              "%s/%s/%d:\n got  [%s]\n want [%s]", name, conv_name, agp, out, want.u.s->data);
                hearth_free(out);
                renderings++;
            }
        }
        value_unref(expected);
        hearth_template_free(tmpl);
        templates++;
    }
    ck_assert_int_ge(templates, 8);
    ck_assert_int_ge(renderings + raises, templates * 8);
    ck_assert_int_gt(raises, 0);
    free(tsv);
    value_unref(convs);
}
END_TEST

/* ---- tool calling --------------------------------------------------------- */

/* The expected texts are the reference renderer's (Python's Jinja2 with
 * transformers' settings) for these messages and tools. */
struct tool_case {
    const char *name;
    const char *bos;
    const char *eos;
    const char *expect;
};

static const char tool_messages[] =
    "[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Weather in Paris?\"}, {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"call12345\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}}]}, {\"role\": \"tool\", \"tool_call_id\": \"call12345\", \"content\": \"{\\\"temp\\\": 21}\"}, {\"role\": \"assistant\", \"content\": \"21 \302\260C.\"}, {\"role\": \"user\", \"content\": \"Thanks\"}]";

static const char tool_definitions[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Current weather \302\253here\302\273\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\"]}}}]";

static const struct tool_case tool_cases[] = {
    {"Qwen-Qwen2.5-7B-Instruct", "", "<|im_end|>",
     "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Current weather \302\253here\302\273\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\"]}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response><|im_end|>\n<|im_start|>assistant\n21 \302\260C.<|im_end|>\n<|im_start|>user\nThanks<|im_end|>\n<|im_start|>assistant\n"},
    {"qwen3", "", "<|im_end|>",
     "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Current weather \302\253here\302\273\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\"]}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response><|im_end|>\n<|im_start|>assistant\n21 \302\260C.<|im_end|>\n<|im_start|>user\nThanks<|im_end|>\n<|im_start|>assistant\n"},
    {"meta-llama-Llama-3.1-8B-Instruct", "<|begin_of_text|>", "<|eot_id|>",
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 29 Nov 2026\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n        \"description\": \"Current weather \302\253here\302\273\",\n        \"parameters\": {\n            \"type\": \"object\",\n            \"properties\": {\n                \"city\": {\n                    \"type\": \"string\",\n                    \"description\": \"City name\"\n                },\n                \"unit\": {\n                    \"type\": \"string\",\n                    \"enum\": [\n                        \"c\",\n                        \"f\"\n                    ]\n                }\n            },\n            \"required\": [\n                \"city\"\n            ]\n        }\n    }\n}\n\nWeather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"c\"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n\"{\\\"temp\\\": 21}\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n21 \302\260C.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nThanks<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
    {"mistralai-Mistral-Nemo-Instruct-2407", "<s>", "</s>",
     "<s>[INST]Weather in Paris?[/INST][TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}, \"id\": \"call12345\"}]</s>[TOOL_RESULTS]{\"content\": {\"temp\": 21}, \"call_id\": \"call12345\"}[/TOOL_RESULTS]21 \302\260C.</s>[AVAILABLE_TOOLS][{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Current weather \302\253here\302\273\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\"]}}}][/AVAILABLE_TOOLS][INST]Be brief.\n\nThanks[/INST]"},
};

START_TEST(test_tool_calls)
{
    if (!test_require_data()) return;
    const struct tool_case *c = &tool_cases[_i];
    char rel[256];
    snprintf(rel, sizeof rel, "chat/%s.jinja", c->name);
    const char *path = test_data_path(rel);
    ck_assert_msg(path != NULL, "missing %s", rel);
    size_t len;
    char *text = test_read_file(path, &len);
    hearth_template *tmpl;
    ck_assert_int_eq(hearth_template_parse(text, len, &tmpl), HEARTH_OK);
    free(text);
    hearth_chat_options opts = {true, c->bos, c->eos, tool_definitions, "29 Nov 2026", NULL};
    char *out;
    hearth_status st = hearth_template_render(tmpl, tool_messages, strlen(tool_messages), &opts, &out, &len);
    ck_assert_msg(st == HEARTH_OK, "%s: %s", c->name, hearth_last_error());
    ck_assert_msg(len == strlen(c->expect) && memcmp(out, c->expect, len) == 0,
                  "%s:\n got  [%s]\n want [%s]", c->name, out, c->expect);
    hearth_free(out);
    hearth_template_free(tmpl);
}
END_TEST

/* ---- built-in templates ----------------------------------------------------- */

/* system S, user U1, assistant A1, user U2; bos <s>, eos </s>.  The
 * expected texts are written from each model family's published prompt
 * format. */
static const struct {
    const char *name;
    const char *with_prompt;
    const char *without_prompt;
} builtin_cases[] = {
    {"chatml",
     "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
     "<|im_start|>user\nU2<|im_end|>\n<|im_start|>assistant\n",
     "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
     "<|im_start|>user\nU2<|im_end|>\n"},
    {"gemma",
     "<s><start_of_turn>user\nS\n\nU1<end_of_turn>\n<start_of_turn>model\nA1<end_of_turn>\n"
     "<start_of_turn>user\nU2<end_of_turn>\n<start_of_turn>model\n",
     "<s><start_of_turn>user\nS\n\nU1<end_of_turn>\n<start_of_turn>model\nA1<end_of_turn>\n"
     "<start_of_turn>user\nU2<end_of_turn>\n"},
    {"llama2",
     "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nU1 [/INST] A1 </s><s>[INST] U2 [/INST]",
     "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nU1 [/INST] A1 </s><s>[INST] U2 [/INST]"},
    {"llama3",
     "<s><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nU1<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\nA1<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nU2<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\n",
     "<s><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nU1<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\nA1<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nU2<|eot_id|>"},
    {"mistral",
     "<s>[INST] S\n\nU1 [/INST] A1</s>[INST] U2 [/INST]",
     "<s>[INST] S\n\nU1 [/INST] A1</s>[INST] U2 [/INST]"},
    {"phi3",
     "<|system|>\nS<|end|>\n<|user|>\nU1<|end|>\n<|assistant|>\nA1<|end|>\n<|user|>\nU2<|end|>\n<|assistant|>\n",
     "<|system|>\nS<|end|>\n<|user|>\nU1<|end|>\n<|assistant|>\nA1<|end|>\n<|user|>\nU2<|end|>\n</s>"},
    {"rwkv-world",
     "System: S\n\nUser: U1\n\nAssistant: A1\n\nUser: U2\n\nAssistant:",
     "System: S\n\nUser: U1\n\nAssistant: A1\n\nUser: U2\n\n"},
    {"zephyr",
     "<|system|>\nS</s>\n<|user|>\nU1</s>\n<|assistant|>\nA1</s>\n<|user|>\nU2</s>\n<|assistant|>\n",
     "<|system|>\nS</s>\n<|user|>\nU1</s>\n<|assistant|>\nA1</s>\n<|user|>\nU2</s>\n"},
};

START_TEST(test_builtins)
{
    static const hearth_chat_message conv[] = {
        {"system", "S"}, {"user", "U1"}, {"assistant", "A1"}, {"user", "U2"},
    };
    const char *const *names = hearth_template_builtin_names();
    size_t n_names = 0;
    while (names[n_names]) n_names++;
    ck_assert_uint_eq(n_names, HEARTH_ARRAY_LEN(builtin_cases));
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(builtin_cases); i++) {
        ck_assert_str_eq(names[i], builtin_cases[i].name);
        hearth_template *t;
        ck_assert_int_eq(hearth_template_builtin(builtin_cases[i].name, &t), HEARTH_OK);
        for (int agp = 0; agp <= 1; agp++) {
            hearth_chat_options opts = {agp, "<s>", "</s>", NULL, "29 Nov 2026", NULL};
            char *out;
            size_t len;
            ck_assert_int_eq(hearth_template_render_messages(t, conv, 4, &opts, &out, &len), HEARTH_OK);
            const char *want = agp ? builtin_cases[i].with_prompt : builtin_cases[i].without_prompt;
            ck_assert_msg(strcmp(out, want) == 0, "%s (generation prompt %d):\n got  [%s]\n want [%s]",
                          builtin_cases[i].name, agp, out, want);
            hearth_free(out);
        }
        hearth_template_free(t);
    }
    hearth_template *t;
    ck_assert_int_eq(hearth_template_builtin("vicuna", &t), HEARTH_E_NOT_FOUND);
    ck_assert_str_eq(hearth_last_error(), "no built-in chat template named 'vicuna'");
    /* a model file that names a built-in format instead of a template
     * (RWKV World files store "rwkv-world") gets that built-in */
    if (test_data_dir()) {
        hearth_gguf *g;
        if (hearth_gguf_open(test_data_path("vocab/vocab-rwkv-world-synthetic.gguf"), &g) == HEARTH_OK) {
            ck_assert_int_eq(hearth_template_from_gguf(g, &t), HEARTH_OK);
            hearth_chat_options opts = {true, "<s>", "</s>", NULL, "29 Nov 2026", NULL};
            char *out;
            size_t len;
            ck_assert_int_eq(hearth_template_render_messages(t, conv, 4, &opts, &out, &len), HEARTH_OK);
            ck_assert_str_eq(out, builtin_cases[6].with_prompt);
            hearth_free(out);
            hearth_template_free(t);
            hearth_gguf_close(g);
        }
    }
    /* templates that take alternating turns say so */
    ck_assert_int_eq(hearth_template_builtin("llama2", &t), HEARTH_OK);
    static const hearth_chat_message tool[] = {{"user", "U"}, {"tool", "T"}};
    char *out;
    ck_assert_int_eq(hearth_template_render_messages(t, tool, 2, NULL, &out, NULL), HEARTH_E_TEMPLATE);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "the llama2 template takes user and assistant messages"));
    hearth_template_free(t);
}
END_TEST

/* ---- options, dates, errors ---------------------------------------------- */

static hearth_status render_with(const char *tmpl_text, const char *messages, const hearth_chat_options *opts,
                                 char **out)
{
    hearth_template *t;
    ck_assert_int_eq(hearth_template_parse(tmpl_text, strlen(tmpl_text), &t), HEARTH_OK);
    hearth_status st = hearth_template_render(t, messages, strlen(messages), opts, out, NULL);
    hearth_template_free(t);
    return st;
}

START_TEST(test_options)
{
    char *out;
    /* defaults: no generation prompt, empty tokens, tools undefined */
    ck_assert_int_eq(render_with("[{{ add_generation_prompt }}|{{ bos_token }}|{{ eos_token }}|{{ tools is defined }}]",
                                 "[]", NULL, &out), HEARTH_OK);
    ck_assert_str_eq(out, "[False|||False]");
    hearth_free(out);
    /* tools, extra variables, and the standard ones taking precedence */
    hearth_chat_options opts = {true, "B", "E", "[{\"name\": \"f\"}]", "2026-11-29",
                                "{\"enable_thinking\": false, \"bos_token\": \"ignored\"}"};
    ck_assert_int_eq(render_with("{{ tools[0].name }}{{ enable_thinking }}{{ bos_token }}{{ date_string }}",
                                 "[]", &opts, &out), HEARTH_OK);
    ck_assert_str_eq(out, "fFalseB29 Nov 2026");
    hearth_free(out);
    /* tools may be JSON null, meaning none */
    opts.tools_json = "null";
    ck_assert_int_eq(render_with("{{ tools is none }}", "[]", &opts, &out), HEARTH_OK);
    ck_assert_str_eq(out, "True");
    hearth_free(out);
    /* messages keep any fields */
    ck_assert_int_eq(render_with("{{ messages[0].extra.n + 1 }}", "[{\"role\": \"user\", \"extra\": {\"n\": 41}}]",
                                 NULL, &out), HEARTH_OK);
    ck_assert_str_eq(out, "42");
    hearth_free(out);
}
END_TEST

START_TEST(test_dates)
{
    static const struct { const char *date; const char *expect; } good[] = {
        {"29 Nov 2026", "29 Nov 2026|2026-11-29 00:00:00 Sunday"},
        {"2026-11-29", "29 Nov 2026|2026-11-29 00:00:00 Sunday"},
        {"5 january 2025", "05 Jan 2025|2025-01-05 00:00:00 Sunday"},
        {"2024-02-29T13:45", "29 Feb 2024|2024-02-29 13:45:00 Thursday"},
        {"2000-03-01 07:08:09", "01 Mar 2000|2000-03-01 07:08:09 Wednesday"},
    };
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(good); i++) {
        hearth_chat_options opts = {false, NULL, NULL, NULL, good[i].date, NULL};
        char *out;
        ck_assert_int_eq(render_with("{{ date_string }}|{{ strftime_now('%Y-%m-%d %H:%M:%S %A') }}", "[]", &opts, &out),
                         HEARTH_OK);
        ck_assert_msg(strcmp(out, good[i].expect) == 0, "%s: %s", good[i].date, out);
        hearth_free(out);
    }
    static const char *const bad[] = {"31 Feb 2026", "2026-13-01", "2025-02-29", "29 Nox 2026", "tomorrow",
                                      "2026-11-29 25:00", "29 Nov 2026 extra", ""};
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(bad); i++) {
        hearth_chat_options opts = {false, NULL, NULL, NULL, bad[i], NULL};
        char *out;
        ck_assert_msg(render_with("{{ date_string }}", "[]", &opts, &out) == HEARTH_E_INVALID, "%s accepted", bad[i]);
        ck_assert_ptr_nonnull(strstr(hearth_last_error(), "is not a valid date"));
    }
    /* no date: today, in the same layout */
    char *out;
    ck_assert_int_eq(render_with("{{ date_string }}", "[]", NULL, &out), HEARTH_OK);
    ck_assert_uint_eq(strlen(out), 11);
    ck_assert(out[2] == ' ' && out[6] == ' ');
    hearth_free(out);
}
END_TEST

START_TEST(test_argument_errors)
{
    hearth_template *t;
    ck_assert_int_eq(hearth_template_parse("{{ messages|length }}", 21, &t), HEARTH_OK);
    char *out = (char *)"untouched";
    ck_assert_int_eq(hearth_template_render(t, "{\"role\": \"user\"}", 16, NULL, &out, NULL), HEARTH_E_INVALID);
    ck_assert_str_eq(hearth_last_error(), "messages: expected a JSON array of message objects, got an object");
    ck_assert_ptr_null(out);
    ck_assert_int_eq(hearth_template_render(t, "[{}, \"x\"]", 9, NULL, &out, NULL), HEARTH_E_INVALID);
    ck_assert_str_eq(hearth_last_error(), "messages: item 1 is not an object");
    ck_assert_int_eq(hearth_template_render(t, "[{}, ]", 6, NULL, &out, NULL), HEARTH_E_FORMAT);
    ck_assert_str_eq(hearth_last_error(), "messages: byte 5 (line 1, column 6): expected a value (object, array, string, number, true, false or null)");
    hearth_chat_options opts = {false, NULL, NULL, "{\"a\": 1}", NULL, NULL};
    ck_assert_int_eq(hearth_template_render(t, "[]", 2, &opts, &out, NULL), HEARTH_E_INVALID);
    ck_assert_str_eq(hearth_last_error(), "tools: expected a JSON array, got dict");
    opts.tools_json = NULL;
    opts.extra_json = "[1]";
    ck_assert_int_eq(hearth_template_render(t, "[]", 2, &opts, &out, NULL), HEARTH_E_INVALID);
    opts.extra_json = NULL;
    opts.bos_token = "\xff";
    ck_assert_int_eq(hearth_template_render(t, "[]", 2, &opts, &out, NULL), HEARTH_E_INVALID);
    ck_assert_str_eq(hearth_last_error(), "bos_token is not valid UTF-8");
    ck_assert_int_eq(hearth_template_render(NULL, "[]", 2, NULL, &out, NULL), HEARTH_E_INVALID);
    static const hearth_chat_message bad[] = {{"user", NULL}};
    ck_assert_int_eq(hearth_template_render_messages(t, bad, 1, NULL, &out, NULL), HEARTH_E_INVALID);
    /* a valid call after the failures works */
    size_t len;
    ck_assert_int_eq(hearth_template_render(t, "[{}, {}]", 8, NULL, &out, &len), HEARTH_OK);
    ck_assert_str_eq(out, "2");
    ck_assert_uint_eq(len, 1);
    hearth_free(out);
    hearth_template_free(t);
    hearth_template_free(NULL);
}
END_TEST

START_TEST(test_concurrent_rendering)
{
    /* one parsed template rendered from several threads at once gives
     * every thread the same text */
    hearth_template *t;
    ck_assert_int_eq(hearth_template_builtin("chatml", &t), HEARTH_OK);
    static const hearth_chat_message conv[] = {{"user", "Hi"}, {"assistant", "Hello"}};
    char *first;
    ck_assert_int_eq(hearth_template_render_messages(t, conv, 2, NULL, &first, NULL), HEARTH_OK);
    int mismatches = 0;
#ifdef _OPENMP
#pragma omp parallel for reduction(+ : mismatches)
#endif
    for (int i = 0; i < 2000; i++) {
        char *out = NULL;
        if (hearth_template_render_messages(t, conv, 2, NULL, &out, NULL) != HEARTH_OK || strcmp(out, first) != 0)
            mismatches++;
        hearth_free(out);
    }
    ck_assert_int_eq(mismatches, 0);
    hearth_free(first);
    hearth_template_free(t);
}
END_TEST

static Suite *chat_template_suite(void)
{
    Suite *s = suite_create("chat-template");
    TCase *tc = tcase_create("chat-template");
    tcase_add_test(tc, test_shared_templates);
    tcase_add_loop_test(tc, test_tool_calls, 0, (int)HEARTH_ARRAY_LEN(tool_cases));
    tcase_add_test(tc, test_builtins);
    tcase_add_test(tc, test_options);
    tcase_add_test(tc, test_dates);
    tcase_add_test(tc, test_argument_errors);
    tcase_add_test(tc, test_concurrent_rendering);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return test_run_suite(chat_template_suite());
}

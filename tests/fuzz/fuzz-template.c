/*
 * fuzz-template.c -- fuzz target for the chat-template interpreter and the
 * JSON reader and writer.  Each input is used three ways:
 *   - as template text, rendered for a fixed conversation with tool calls
 *     and tool definitions (with and without the generation prompt);
 *   - as a JSON text, which when it parses is written back in several
 *     layouts and must read back to an equal value;
 *   - when that JSON is an array of objects, as the messages of a template
 *     that walks every message field, and of the built-in templates.
 * Every failure must be a status with a message, never a crash, a hang or
 * a leak.
 *
 * Run (see configure --enable-fuzzing) with a corpus directory seeded with
 * copies of the shared chat templates and conversations (../shared/chat):
 *   tests/fuzz/fuzz-template -timeout=60 -max_len=16384 corpus
 * (a template that runs into the iteration or work limit takes well under
 * a second normally but tens of seconds with the fuzzing sanitizers).
 */
#include "internal.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "value.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char conversation[] =
    "[{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Weather in Paris? \\u00e9\\ud83d\\ude00\"},"
    " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"call12345\", \"type\": \"function\","
    "   \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"n\": [1, 2.5, null, true]}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"call12345\", \"content\": \"{\\\"temp\\\": 21}\"},"
    " {\"role\": \"assistant\", \"content\": \"<think>x</think>\\n21 C.\"},"
    " {\"role\": \"user\", \"content\": \"Thanks\"}]";

static const char tools[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}},"
    " \"required\": [\"city\"]}}}]";

/* A template that touches every field of every message. */
static const char walker[] =
    "{%- for m in messages -%}{%- for k, v in m.items() -%}"
    "{{ k }}={{ v }}|{{ v|tojson }}|{{ v|tojson(indent=2) }}|{{ v|string|length }}|"
    "{%- if v is string %}{{ v|trim|upper }}{{ v.split()|join(',') }}{{ v[1:-1] }}{% endif -%}"
    "{%- if v is mapping %}{{ v|dictsort }}{% endif -%}"
    "{%- if v is iterable and v is not string %}{{ v|list|length }}{% endif -%}"
    "{%- endfor -%}{%- endfor -%}";

static void render(const hearth_template *t, const char *messages, size_t len, bool agp,
                   const char *tools_json)
{
    hearth_chat_options opts = {agp, "<s>", "</s>", tools_json, "29 Nov 2026", NULL};
    char *out = NULL;
    size_t out_len;
    if (hearth_template_render(t, messages, len, &opts, &out, &out_len) == HEARTH_OK) {
        /* the text is NUL-terminated at its length */
        if (out[out_len] != '\0') abort();
        hearth_free(out);
    } else if (out != NULL || hearth_last_error()[0] == '\0') {
        abort();   /* failures give no text and always a message */
    }
}

static void fuzz_template(const uint8_t *data, size_t size)
{
    hearth_template *t;
    if (hearth_template_parse((const char *)data, size, &t) != HEARTH_OK) {
        if (hearth_last_error()[0] == '\0') abort();
        return;
    }
    render(t, conversation, strlen(conversation), true, tools);
    render(t, conversation, strlen(conversation), false, NULL);
    hearth_template_free(t);
}

static void fuzz_json(const uint8_t *data, size_t size)
{
    value v;
    if (json_parse((const char *)data, size, "fuzz", &v) != HEARTH_OK) return;
    static const json_format formats[] = {
        {NULL, NULL, NULL, false, false},
        {"  ", NULL, NULL, true, false},
        {"\t", ",", ":", false, true},
    };
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(formats); i++) {
        textbuf tb;
        textbuf_init(&tb, 1 << 26, "fuzz output");
        if (json_write(v, &formats[i], &tb) == HEARTH_OK) {
            /* what was written reads back equal (NaN cannot occur: JSON
             * has no NaN, and infinities are written as words JSON does
             * not read, so those are skipped) */
            value back;
            if (json_parse(tb.data, tb.len, "fuzz output", &back) == HEARTH_OK) {
                if (!value_equal(v, back)) abort();   /* dict equality ignores order */
                value_unref(back);
            } else if (!strstr(tb.data, "Infinity")) {
                abort();
            }
        }
        textbuf_free(&tb);
    }
    bool messages = v.kind == VALUE_LIST;
    for (size_t i = 0; messages && i < value_list_len(v); i++)
        messages = value_list_at(v, i).kind == VALUE_DICT;
    value_unref(v);
    if (!messages) return;
    hearth_template *t;
    if (hearth_template_parse(walker, strlen(walker), &t) != HEARTH_OK) abort();
    render(t, (const char *)data, size, true, NULL);
    hearth_template_free(t);
    for (const char *const *name = hearth_template_builtin_names(); *name; name++) {
        if (hearth_template_builtin(*name, &t) != HEARTH_OK) abort();
        render(t, (const char *)data, size, true, NULL);
        hearth_template_free(t);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_template(data, size);
    fuzz_json(data, size);
    return 0;
}

/*
 * chat_template.c -- the public chat-template API of hearth.h: parsing,
 * built-in templates, and rendering a conversation with the variables
 * transformers passes to chat templates (messages, add_generation_prompt,
 * bos_token, eos_token, tools, date_string).
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat_builtin.h"
#include "jinja.h"
#include "json.h"
#include "utf8.h"

struct hearth_template {
    struct jinja_template *jinja;
};

static hearth_status wrap(struct jinja_template *jt, hearth_template **out)
{
    hearth_template *t = hearth_malloc(sizeof *t, "a chat template");
    if (!t) {
        jinja_free(jt);
        return HEARTH_E_NOMEM;
    }
    t->jinja = jt;
    *out = t;
    return HEARTH_OK;
}

hearth_status hearth_template_parse(const char *text, size_t len, hearth_template **out)
{
    if (!out || (!text && len)) return hearth_error(HEARTH_E_INVALID, "hearth_template_parse: NULL argument");
    *out = NULL;
    struct jinja_template *jt;
    hearth_status st = jinja_parse(text ? text : "", len, &jt);
    if (st != HEARTH_OK) return st;
    return wrap(jt, out);
}

hearth_status hearth_template_builtin(const char *name, hearth_template **out)
{
    if (!out || !name) return hearth_error(HEARTH_E_INVALID, "hearth_template_builtin: NULL argument");
    *out = NULL;
    const char *text = chat_builtin_text(name);
    if (!text) return hearth_error(HEARTH_E_NOT_FOUND, "no built-in chat template named '%s'", name);
    struct jinja_template *jt;
    hearth_status st = jinja_parse(text, strlen(text), &jt);
    if (st != HEARTH_OK) {
        hearth_error_prefix("built-in template '%s'", name);
        return st == HEARTH_E_NOMEM ? st : HEARTH_E_INTERNAL;
    }
    return wrap(jt, out);
}

hearth_status hearth_template_from_gguf(const hearth_gguf *gguf, hearth_template **out)
{
    if (!gguf || !out) return hearth_error(HEARTH_E_INVALID, "hearth_template_from_gguf: NULL argument");
    *out = NULL;
    static const char key[] = "tokenizer.chat_template";
    int64_t index = hearth_gguf_find_key(gguf, key);
    if (index < 0)
        return hearth_error(HEARTH_E_NOT_FOUND, "%s has no chat template (no %s)", hearth_gguf_path(gguf), key);
    hearth_gguf_value v;
    hearth_status st = hearth_gguf_kv_value(gguf, index, &v);
    if (st != HEARTH_OK) return st;
    if (v.type != HEARTH_GGUF_STRING)
        return hearth_error(HEARTH_E_FORMAT, "%s: %s is a %s, not a string", hearth_gguf_path(gguf), key,
                            hearth_gguf_type_name(v.type));
    /* the text as stored, NUL bytes and all */
    if (v.v.str.len > SIZE_MAX) return hearth_error(HEARTH_E_RANGE, "%s: %s is too long", hearth_gguf_path(gguf), key);
    /* Some conversions store the name of a well-known format instead of
     * a template (RWKV World files: "rwkv-world"): that built-in. */
    for (const char *const *name = hearth_template_builtin_names(); *name; name++)
        if (v.v.str.len == strlen(*name) && memcmp(v.v.str.ptr, *name, v.v.str.len) == 0)
            return hearth_template_builtin(*name, out);
    st = hearth_template_parse(v.v.str.ptr, (size_t)v.v.str.len, out);
    if (st != HEARTH_OK) hearth_error_prefix("%s: %s", hearth_gguf_path(gguf), key);
    return st;
}

void hearth_template_free(hearth_template *tmpl)
{
    if (!tmpl) return;
    jinja_free(tmpl->jinja);
    free(tmpl);
}

void hearth_free(void *ptr)
{
    free(ptr);
}

/* ---- dates --------------------------------------------------------------- */

static const char *const month_abbr[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
static const char *const month_full[] = {"January", "February", "March", "April", "May", "June",
                                         "July", "August", "September", "October", "November",
                                         "December"};

static bool ieq_prefix(const char *s, size_t len, const char *word)
{
    size_t n = strlen(word);
    if (len != n) return false;
    for (size_t i = 0; i < n; i++) {
        char a = s[i], b = word[i];
        if (a >= 'A' && a <= 'Z') a = (char)(a + 32);
        if (b >= 'A' && b <= 'Z') b = (char)(b + 32);
        if (a != b) return false;
    }
    return true;
}

static const char *read_number(const char *p, int digits_min, int digits_max, int *out)
{
    int v = 0, n = 0;
    while (*p >= '0' && *p <= '9' && n < digits_max) {
        v = v * 10 + (*p++ - '0');
        n++;
    }
    if (n < digits_min) return NULL;
    *out = v;
    return p;
}

static int days_in_month(int year, int month)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    return month == 2 && leap ? 29 : days[month - 1];
}

/* "29 Nov 2026", "29 November 2026" or "2026-11-29", then optionally a
 * time "HH:MM[:SS]" after a space or 'T'. */
static hearth_status parse_date(const char *s, struct jinja_clock *c)
{
    memset(c, 0, sizeof *c);
    const char *p = s;
    if (strlen(s) >= 10 && s[4] == '-') {
        p = read_number(p, 4, 4, &c->year);
        if (p && *p == '-') p = read_number(p + 1, 2, 2, &c->month);
        else p = NULL;
        if (p && *p == '-') p = read_number(p + 1, 2, 2, &c->day);
        else p = NULL;
    } else {
        p = read_number(p, 1, 2, &c->day);
        if (p && *p == ' ') {
            const char *m = ++p;
            while (*p && *p != ' ') p++;
            for (int i = 0; i < 12; i++)
                if (ieq_prefix(m, (size_t)(p - m), month_abbr[i]) || ieq_prefix(m, (size_t)(p - m), month_full[i]))
                    c->month = i + 1;
            if (c->month && *p == ' ') p = read_number(p + 1, 4, 4, &c->year);
            else p = NULL;
        } else {
            p = NULL;
        }
    }
    if (p && (*p == ' ' || *p == 'T')) {
        p = read_number(p + 1, 2, 2, &c->hour);
        if (p && *p == ':') p = read_number(p + 1, 2, 2, &c->minute);
        else p = NULL;
        if (p && *p == ':') p = read_number(p + 1, 2, 2, &c->second);
    }
    if (!p || *p || c->month < 1 || c->month > 12 || c->year < 1 || c->day < 1 ||
        c->day > days_in_month(c->year, c->month) || c->hour > 23 || c->minute > 59 || c->second > 60)
        return hearth_error(HEARTH_E_INVALID, "date '%s' is not a valid date such as \"29 Nov 2026\" "
                            "or \"2026-11-29\"", s);
    return HEARTH_OK;
}

static hearth_status clock_now(struct jinja_clock *c)
{
    time_t now = time(NULL);
    struct tm tm;
    if (now == (time_t)-1 || !localtime_r(&now, &tm))
        return hearth_error(HEARTH_E_INTERNAL, "cannot read the current date");
    c->year = tm.tm_year + 1900;
    c->month = tm.tm_mon + 1;
    c->day = tm.tm_mday;
    c->hour = tm.tm_hour;
    c->minute = tm.tm_min;
    c->second = tm.tm_sec;
    return HEARTH_OK;
}

/* ---- rendering ----------------------------------------------------------- */

static hearth_status set_string(value globals, const char *key, const char *text, const char *what)
{
    if (!text) text = "";
    size_t len = strlen(text);
    if (utf8_validate(text, len) != len) return hearth_error(HEARTH_E_INVALID, "%s is not valid UTF-8", what);
    value v = value_undefined();
    hearth_status st = value_new_string(text, len, &v);
    if (st == HEARTH_OK) st = value_dict_set(globals, key, strlen(key), v);
    return st;
}

/* Render with messages (a list value, consumed). */
static hearth_status render(const hearth_template *tmpl, value messages,
                            const hearth_chat_options *options, char **out, size_t *out_len)
{
    static const hearth_chat_options defaults = {false, NULL, NULL, NULL, NULL, NULL};
    if (!options) options = &defaults;
    struct jinja_clock clock;
    value globals = value_undefined();
    hearth_status st = options->date ? parse_date(options->date, &clock) : clock_now(&clock);
    if (st != HEARTH_OK) {
        value_unref(messages);
        return st;
    }
    st = value_new_dict(&globals);
    if (st != HEARTH_OK) {
        value_unref(messages);
        return st;
    }
    if (options->extra_json) {
        value extra = value_undefined();
        st = json_parse(options->extra_json, strlen(options->extra_json), "extra variables", &extra);
        if (st == HEARTH_OK) {
            if (extra.kind != VALUE_DICT)
                st = hearth_error(HEARTH_E_INVALID, "extra variables: expected a JSON object, got %s",
                                  value_type_name(extra));
            for (size_t i = 0; st == HEARTH_OK && i < extra.u.dict->len; i++)
                st = value_dict_set_vstring(globals, extra.u.dict->entries[i].key,
                                            value_ref(extra.u.dict->entries[i].val));
            value_unref(extra);
        }
    }
    if (st == HEARTH_OK) st = value_dict_set(globals, "messages", 8, value_ref(messages));
    if (st == HEARTH_OK)
        st = value_dict_set(globals, "add_generation_prompt", 21, value_bool(options->add_generation_prompt));
    if (st == HEARTH_OK) st = set_string(globals, "bos_token", options->bos_token, "bos_token");
    if (st == HEARTH_OK) st = set_string(globals, "eos_token", options->eos_token, "eos_token");
    if (st == HEARTH_OK && options->tools_json) {
        value tools = value_undefined();
        st = json_parse(options->tools_json, strlen(options->tools_json), "tools", &tools);
        if (st == HEARTH_OK && tools.kind != VALUE_LIST && tools.kind != VALUE_NULL) {
            st = hearth_error(HEARTH_E_INVALID, "tools: expected a JSON array, got %s", value_type_name(tools));
            value_unref(tools);
        } else if (st == HEARTH_OK) {
            st = value_dict_set(globals, "tools", 5, tools);
        }
    }
    if (st == HEARTH_OK) {
        char date[32];
        snprintf(date, sizeof date, "%02d %s %04d", clock.day, month_abbr[clock.month - 1], clock.year);
        st = set_string(globals, "date_string", date, "date_string");
    }
    textbuf tb;
    textbuf_init(&tb, JINJA_MAX_OUTPUT, "the rendered chat template");
    if (st == HEARTH_OK) st = jinja_render(tmpl->jinja, globals, &clock, &tb);
    value_unref(globals);
    value_unref(messages);
    if (st != HEARTH_OK) {
        textbuf_free(&tb);
        return st;
    }
    size_t len;
    char *text = textbuf_take(&tb, &len);
    if (!text) return HEARTH_E_NOMEM;
    *out = text;
    if (out_len) *out_len = len;
    return HEARTH_OK;
}

hearth_status hearth_template_render(const hearth_template *tmpl, const char *messages_json,
                                     size_t messages_len, const hearth_chat_options *options,
                                     char **out, size_t *out_len)
{
    if (!tmpl || !out || (!messages_json && messages_len))
        return hearth_error(HEARTH_E_INVALID, "hearth_template_render: NULL argument");
    *out = NULL;
    value messages = value_undefined();
    hearth_status st = json_parse(messages_json ? messages_json : "", messages_len, "messages", &messages);
    if (st != HEARTH_OK) return st;
    if (messages.kind != VALUE_LIST) {
        st = hearth_error(HEARTH_E_INVALID, "messages: expected a JSON array of message objects, got %s",
                          messages.kind == VALUE_DICT ? "an object" : value_type_name(messages));
    }
    for (size_t i = 0; st == HEARTH_OK && i < value_list_len(messages); i++) {
        if (value_list_at(messages, i).kind != VALUE_DICT)
            st = hearth_error(HEARTH_E_INVALID, "messages: item %zu is not an object", i);
    }
    if (st != HEARTH_OK) {
        value_unref(messages);
        return st;
    }
    return render(tmpl, messages, options, out, out_len);
}

hearth_status hearth_template_render_messages(const hearth_template *tmpl,
                                              const hearth_chat_message *messages, size_t n,
                                              const hearth_chat_options *options,
                                              char **out, size_t *out_len)
{
    if (!tmpl || !out || (!messages && n))
        return hearth_error(HEARTH_E_INVALID, "hearth_template_render_messages: NULL argument");
    *out = NULL;
    value list = value_undefined();
    hearth_status st = value_new_list(n, &list);
    if (st != HEARTH_OK) return st;
    for (size_t i = 0; st == HEARTH_OK && i < n; i++) {
        value msg = value_undefined();
        st = value_new_dict(&msg);
        if (st != HEARTH_OK) break;
        if (!messages[i].role || !messages[i].content)
            st = hearth_error(HEARTH_E_INVALID, "message %zu has a NULL role or content", i);
        if (st == HEARTH_OK) st = set_string(msg, "role", messages[i].role, "a message role");
        if (st == HEARTH_OK) st = set_string(msg, "content", messages[i].content, "a message content");
        if (st == HEARTH_OK) st = value_list_push(list, msg);
        else value_unref(msg);
    }
    if (st != HEARTH_OK) {
        value_unref(list);
        return st;
    }
    return render(tmpl, list, options, out, out_len);
}

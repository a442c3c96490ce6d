/*
 * test-request.c -- hearth serve's request parsing (src/server/request.c):
 * every field read with its type and range, null as absent, unknown
 * fields ignored, each refusal a 400 naming the field, chat content parts
 * joined, tools and tool_choice, a chat's reasoning budget (its own or
 * the server's), the Responses API's bodies (input items, flat tools,
 * text.format, the fields it refuses), prompts in every form, and the
 * tokenize/detokenize bodies; and what the model table reads first (the
 * model's name, the stream).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "request.h"
#include "testutil.h"

static hearth_sampler_params defaults;
static const struct srv_limits limits = {100, 64, &defaults, -1};

static void parse_ok(enum srv_kind kind, const char *body, struct srv_request *r)
{
    struct srv_error e;
    hearth_sampler_params_default(&defaults);
    ck_assert_msg(srv_request_parse(kind, body, strlen(body), &limits, r, &e), "%s: %s", body,
                  e.message);
}

/* The body is refused with status and param. */
static void parse_bad(enum srv_kind kind, const char *body, int status, const char *param)
{
    struct srv_request r;
    struct srv_error e;
    hearth_sampler_params_default(&defaults);
    ck_assert_msg(!srv_request_parse(kind, body, strlen(body), &limits, &r, &e), "accepted: %s", body);
    ck_assert_msg(e.status == status, "%s: status %d, not %d (%s)", body, e.status, status, e.message);
    ck_assert_msg(strcmp(e.param, param) == 0, "%s: param '%s', not '%s' (%s)", body, e.param, param,
                  e.message);
    ck_assert_msg(e.message[0] && e.type, "%s: no message", body);
}

START_TEST(test_structured_fields)
{
    struct srv_request r;
    parse_ok(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                       "\"response_format\":{\"type\":\"json_object\"}}", &r);
    ck_assert_int_eq(r.grammar, SRV_GRAMMAR_JSON_OBJECT);
    srv_request_free(&r);
    parse_ok(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                       "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\","
                       "\"strict\":true,\"schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}}}}",
             &r);
    ck_assert_int_eq(r.grammar, SRV_GRAMMAR_JSON_SCHEMA);
    ck_assert_str_eq(r.grammar_text, "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}");
    /* translated once, here; the server compiles this */
    ck_assert_ptr_nonnull(r.schema_gbnf);
    ck_assert_int_eq(strncmp(r.schema_gbnf, "root ::= ", 9), 0);
    srv_request_free(&r);
    parse_ok(SRV_COMPLETION, "{\"prompt\":\"x\",\"grammar\":\"root ::= [0-9]+\"}", &r);
    ck_assert_int_eq(r.grammar, SRV_GRAMMAR_GBNF);
    ck_assert_str_eq(r.grammar_text, "root ::= [0-9]+");
    srv_request_free(&r);
}
END_TEST

START_TEST(test_chat_fields)
{
    struct srv_request r;
    parse_ok(SRV_CHAT,
             "{\"model\":\"x\",\"messages\":[{\"role\":\"developer\",\"content\":\"Be brief.\"},"
             "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},"
             "{\"role\":\"assistant\",\"content\":null}],\"max_completion_tokens\":7,\"max_tokens\":9,"
             "\"stop\":\"END\",\"seed\":9223372036854775807,\"n\":3,\"temperature\":0.5,\"top_p\":0.25,\"top_k\":7,\"min_p\":0.5,"
             "\"presence_penalty\":-1.5,\"frequency_penalty\":2,\"repeat_penalty\":1.25,\"logit_bias\":{\"5\":-100,\"9\":3},"
             "\"logprobs\":true,\"top_logprobs\":4,\"stream\":true,\"stream_options\":{\"include_usage\":true},"
             "\"user\":\"u1\",\"ignore_eos\":true,\"unknown\":{\"deep\":[1,2]},\"tools\":[],\"tool_choice\":\"none\","
             "\"response_format\":{\"type\":\"text\"}}",
             &r);
    ck_assert_str_eq(r.messages_json, "[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                                      "{\"role\":\"user\",\"content\":\"a\\nb\"},"
                                      "{\"role\":\"assistant\",\"content\":\"\"}]");
    ck_assert_int_eq(r.max_tokens, 7);
    ck_assert_int_eq((int)r.n_stop, 1);
    ck_assert_str_eq(r.stop[0], "END");
    ck_assert(r.seed_given);
    ck_assert(r.sampling.seed == UINT64_C(9223372036854775807));
    ck_assert_int_eq(r.n, 3);
    ck_assert(r.sampling.temperature == 0.5f && r.sampling.top_p == 0.25f && r.sampling.top_k == 7);
    ck_assert(r.sampling.min_p == 0.5f && r.sampling.presence_penalty == -1.5f);
    ck_assert(r.sampling.frequency_penalty == 2.0f && r.sampling.repeat_penalty == 1.25f);
    ck_assert_int_eq((int)r.sampling.n_logit_bias, 2);
    ck_assert(r.sampling.logit_bias == r.bias);
    ck_assert(r.logprobs && r.top_logprobs == 4 && r.stream && r.include_usage && r.ignore_eos);
    ck_assert_str_eq(r.user, "u1");
    ck_assert_int_eq(hearth_sampler_params_check(&r.sampling), HEARTH_OK);
    srv_request_free(&r);

    /* nulls are absent fields; the defaults stay */
    parse_ok(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":null,"
                       "\"stop\":null,\"seed\":null,\"temperature\":null,\"stream_options\":null}", &r);
    ck_assert_int_eq(r.max_tokens, 64); /* not given: the cap */
    ck_assert(!r.seed_given && r.n_stop == 0 && r.n == 1);
    ck_assert(r.sampling.temperature == defaults.temperature);
    ck_assert_int_eq(r.reasoning_budget, -1); /* the server's: none */
    srv_request_free(&r);
}
END_TEST

START_TEST(test_reasoning_budget)
{
    struct srv_request r;
    struct srv_error e;
    const char *m = "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]";
    char b[256];
    const int32_t given[] = {0, 7, -1, 1 << 30};
    for (size_t i = 0; i < sizeof given / sizeof *given; i++) {
        snprintf(b, sizeof b, "{%s,\"thinking_budget_tokens\":%d}", m, (int)given[i]);
        parse_ok(SRV_CHAT, b, &r);
        ck_assert_int_eq(r.reasoning_budget, given[i]);
        srv_request_free(&r);
    }
    /* absent or null: the server's --reasoning-budget */
    const struct srv_limits with_budget = {100, 64, &defaults, 12};
    snprintf(b, sizeof b, "{%s}", m);
    ck_assert(srv_request_parse(SRV_CHAT, b, strlen(b), &with_budget, &r, &e));
    ck_assert_int_eq(r.reasoning_budget, 12);
    srv_request_free(&r);
    snprintf(b, sizeof b, "{%s,\"thinking_budget_tokens\":null}", m);
    ck_assert(srv_request_parse(SRV_CHAT, b, strlen(b), &with_budget, &r, &e));
    ck_assert_int_eq(r.reasoning_budget, 12);
    srv_request_free(&r);
    /* a request's own, -1 included, wins */
    snprintf(b, sizeof b, "{%s,\"thinking_budget_tokens\":-1}", m);
    ck_assert(srv_request_parse(SRV_CHAT, b, strlen(b), &with_budget, &r, &e));
    ck_assert_int_eq(r.reasoning_budget, -1);
    srv_request_free(&r);
    /* completions have no reasoning */
    ck_assert(srv_request_parse(SRV_COMPLETION, "{\"prompt\":\"x\"}", 14, &with_budget, &r, &e));
    ck_assert_int_eq(r.reasoning_budget, -1);
    srv_request_free(&r);
    static const char *const bad[] = {"-2", "1073741825", "\"5\"", "2.5", "true", "[1]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(b, sizeof b, "{%s,\"thinking_budget_tokens\":%s}", m, bad[i]);
        parse_bad(SRV_CHAT, b, 400, "thinking_budget_tokens");
    }
}
END_TEST

START_TEST(test_chat_refusals)
{
    const char *m = "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]";
    char b[512];
#define BAD(extra, status, param)                              \
    snprintf(b, sizeof b, "{%s,%s}", m, extra);               \
    parse_bad(SRV_CHAT, b, status, param)
    BAD("\"temperature\":\"hot\"", 400, "temperature");
    BAD("\"temperature\":2.5", 400, "temperature");
    BAD("\"top_p\":-0.1", 400, "top_p");
    BAD("\"max_tokens\":0", 400, "max_tokens");
    BAD("\"max_tokens\":65", 400, "max_tokens");          /* over the cap */
    BAD("\"max_tokens\":1.5", 400, "max_tokens");
    BAD("\"n\":17", 400, "n");
    BAD("\"seed\":\"1\"", 400, "seed");
    BAD("\"seed\":-1", 400, "seed");                      /* not "random": that is no seed */
    BAD("\"seed\":-9223372036854775808", 400, "seed");
    BAD("\"seed\":9223372036854775808", 400, "seed");        /* above HEARTH_SEED_MAX */
    BAD("\"seed\" :\n 18446744073709551615", 400, "seed");
    BAD("\"stop\":\"\"", 400, "stop");
    BAD("\"stop\":[\"a\",3]", 400, "stop");
    BAD("\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\",\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]",
        400, "stop");
    BAD("\"logit_bias\":{\"100\":1}", 400, "logit_bias");  /* outside the vocabulary */
    BAD("\"logit_bias\":{\"x\":1}", 400, "logit_bias");
    BAD("\"logit_bias\":{\"1\":101}", 400, "logit_bias");
    BAD("\"logit_bias\":[1]", 400, "logit_bias");
    BAD("\"top_logprobs\":3", 400, "top_logprobs");        /* without logprobs */
    BAD("\"logprobs\":true,\"top_logprobs\":21", 400, "top_logprobs");
    BAD("\"logprobs\":1", 400, "logprobs");
    BAD("\"stream\":\"yes\"", 400, "stream");
    BAD("\"stream_options\":{\"include_usage\":true}", 400, "stream_options");
    BAD("\"stream\":true,\"stream_options\":{\"include_usage\":1}", 400, "stream_options.include_usage");
    BAD("\"response_format\":{\"type\":\"xml\"}", 400, "response_format");
    BAD("\"response_format\":{\"type\":\"json_schema\"}", 400, "response_format");
    BAD("\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{\"not\":{}}}}", 400,
        "response_format");
    BAD("\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{},\"strict\":1}}", 400,
        "response_format");
    BAD("\"grammar\":\"root ::= [\"", 400, "grammar");
    BAD("\"grammar\":7", 400, "grammar");
    BAD("\"grammar\":\"root ::= \\\"a\\\"\",\"response_format\":{\"type\":\"json_object\"}", 400, "grammar");
    BAD("\"tools\":[{\"type\":\"function\"}]", 400, "tools[0].function");
    BAD("\"tool_choice\":\"required\"", 400, "tool_choice");
    BAD("\"repeat_penalty\":0", 400, "repeat_penalty");
    BAD("\"model\":5", 400, "model");
    BAD("\"user\":[]", 400, "user");
    BAD("\"prompt_cache_key\":7", 400, "prompt_cache_key");
#undef BAD
    parse_bad(SRV_CHAT, "{}", 400, "messages");
    parse_bad(SRV_CHAT, "{\"messages\":[]}", 400, "messages");
    parse_bad(SRV_CHAT, "{\"messages\":{}}", 400, "messages");
    parse_bad(SRV_CHAT, "{\"messages\":[\"hi\"]}", 400, "messages[0]");
    parse_bad(SRV_CHAT, "{\"messages\":[{\"content\":\"hi\"}]}", 400, "messages[0].role");
    parse_bad(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"name\":5}]}", 400,
              "messages[0].name");
    parse_bad(SRV_CHAT, "{\"messages\":[{\"role\":\"wizard\",\"content\":\"hi\"}]}", 400, "messages[0].role");
    parse_bad(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", 400, "messages[0].content");
    parse_bad(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", 400,
              "messages[0].content[0]");
    /* not JSON, not an object, invalid UTF-8, NUL in a string, trailing garbage */
    parse_bad(SRV_CHAT, "{\"messages\":", 400, "");
    parse_bad(SRV_CHAT, "[1]", 400, "");
    parse_bad(SRV_CHAT, "", 400, "");
    parse_bad(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", 400, "");
    parse_bad(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]}", 400, "");
    parse_bad(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]} x", 400, "");
}
END_TEST

#define TOOL(name, params) \
    "{\"type\":\"function\",\"function\":{\"name\":\"" name "\",\"description\":\"d\"" params "}}"
#define WEATHER TOOL("get_weather", ",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}")

START_TEST(test_tools)
{
    const char *m = "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]";
    char b[1024];
    struct srv_request r;
    /* tools alone: auto, shown to the template as given */
    snprintf(b, sizeof b, "{%s,\"tools\":[" WEATHER "," TOOL("ping", "") "]}", m);
    parse_ok(SRV_CHAT, b, &r);
    ck_assert_int_eq(r.tool_choice, SRV_TOOL_AUTO);
    ck_assert_ptr_nonnull(strstr(r.tools_json, "\"get_weather\""));
    ck_assert_ptr_nonnull(strstr(r.tools_json, "\"ping\""));
    ck_assert_ptr_null(r.tool_name);
    srv_request_free(&r);
    static const struct {
        const char *choice;
        enum srv_tool_choice want;
        bool shown;
    } choices[] = {
        {"\"auto\"", SRV_TOOL_AUTO, true},
        {"\"none\"", SRV_TOOL_NONE, false},
        {"\"required\"", SRV_TOOL_REQUIRED, true},
        {"{\"type\":\"function\",\"function\":{\"name\":\"ping\"}}", SRV_TOOL_NAMED, true},
        {"null", SRV_TOOL_AUTO, true},
    };
    for (size_t i = 0; i < sizeof choices / sizeof choices[0]; i++) {
        snprintf(b, sizeof b, "{%s,\"tools\":[" WEATHER "," TOOL("ping", "") "],\"tool_choice\":%s,"
                 "\"parallel_tool_calls\":false}", m, choices[i].choice);
        parse_ok(SRV_CHAT, b, &r);
        ck_assert_msg(r.tool_choice == choices[i].want, "%s: %d", choices[i].choice, r.tool_choice);
        ck_assert_msg((r.tools_json != NULL) == choices[i].shown, "%s", choices[i].choice);
        if (choices[i].want == SRV_TOOL_NAMED) ck_assert_str_eq(r.tool_name, "ping");
        srv_request_free(&r);
    }
    /* no tools: nothing to call, whatever "auto" says */
    snprintf(b, sizeof b, "{%s,\"tools\":[],\"tool_choice\":\"auto\"}", m);
    parse_ok(SRV_CHAT, b, &r);
    ck_assert_int_eq(r.tool_choice, SRV_TOOL_NONE);
    ck_assert_ptr_null(r.tools_json);
    srv_request_free(&r);
    /* auto with a JSON response_format: the tools are shown, the output is not read for calls */
    snprintf(b, sizeof b, "{%s,\"tools\":[" WEATHER "],\"response_format\":{\"type\":\"json_object\"}}", m);
    parse_ok(SRV_CHAT, b, &r);
    ck_assert_int_eq(r.tool_choice, SRV_TOOL_NONE);
    ck_assert_ptr_nonnull(r.tools_json);
    ck_assert_int_eq(r.grammar, SRV_GRAMMAR_JSON_OBJECT);
    srv_request_free(&r);
    /* completions ignore tools */
    parse_ok(SRV_COMPLETION, "{\"prompt\":\"x\",\"tools\":5}", &r);
    ck_assert_ptr_null(r.tools_json);
    srv_request_free(&r);
    /* an assistant turn with calls: arguments given as a JSON string reach
     * the template as the object, a null tool_calls as none */
    parse_ok(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\","
                       "\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":"
                       "{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}},{\"id\":\"call_2\",\"type\":\"function\","
                       "\"function\":{\"name\":\"g\",\"arguments\":\"not json\"}}]},{\"role\":\"tool\","
                       "\"tool_call_id\":\"call_1\",\"content\":\"2\"},{\"role\":\"assistant\",\"content\":\"ok\","
                       "\"tool_calls\":null}]}", &r);
    ck_assert_str_eq(r.messages_json,
                     "[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"\","
                     "\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"f\","
                     "\"arguments\":{\"a\":1}}},{\"id\":\"call_2\",\"type\":\"function\",\"function\":"
                     "{\"name\":\"g\",\"arguments\":\"not json\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"call_1\","
                     "\"content\":\"2\"},{\"role\":\"assistant\",\"content\":\"ok\"}]");
    srv_request_free(&r);

#define BAD(extra, param)                                \
    snprintf(b, sizeof b, "{%s,%s}", m, extra);          \
    parse_bad(SRV_CHAT, b, 400, param)
    BAD("\"tools\":{}", "tools");
    BAD("\"tools\":[5]", "tools[0]");
    BAD("\"tools\":[{\"type\":\"retrieval\",\"function\":{\"name\":\"f\"}}]", "tools[0].type");
    BAD("\"tools\":[{\"function\":{\"name\":\"f\"}}]", "tools[0].type");
    BAD("\"tools\":[" WEATHER ",{\"type\":\"function\",\"function\":\"f\"}]", "tools[1].function");
    BAD("\"tools\":[{\"type\":\"function\",\"function\":{\"name\":7}}]", "tools[0].function.name");
    BAD("\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"\"}}]", "tools[0].function.name");
    BAD("\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]", "tools[0].function.name");
    BAD("\"tools\":[" TOOL("f", "") "," TOOL("f", "") "]", "tools[1].function.name");
    BAD("\"tools\":[" TOOL("f", ",\"parameters\":[]") "]", "tools[0].function.parameters");
    BAD("\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":1}}]",
        "tools[0].function.description");
    /* a schema the grammar cannot follow matters only where a call is forced */
    BAD("\"tools\":[" TOOL("f", ",\"parameters\":{\"type\":\"object\",\"not\":{}}") "],\"tool_choice\":\"required\"",
        "tools[0].function.parameters");
    snprintf(b, sizeof b, "{%s,\"tools\":[" TOOL("f", ",\"parameters\":{\"type\":\"object\",\"not\":{}}") "]}", m);
    parse_ok(SRV_CHAT, b, &r);
    srv_request_free(&r);
    BAD("\"tools\":[" WEATHER "],\"tool_choice\":\"always\"", "tool_choice");
    BAD("\"tools\":[" WEATHER "],\"tool_choice\":3", "tool_choice");
    BAD("\"tools\":[" WEATHER "],\"tool_choice\":{\"type\":\"function\"}", "tool_choice");
    BAD("\"tools\":[" WEATHER "],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"nope\"}}",
        "tool_choice");
    BAD("\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}", "tool_choice");
    BAD("\"tools\":[" WEATHER "],\"tool_choice\":\"required\",\"response_format\":{\"type\":\"json_object\"}",
        "tool_choice");
    BAD("\"tools\":[" WEATHER "],\"tool_choice\":\"required\",\"grammar\":\"root ::= \\\"a\\\"\"", "tool_choice");
    BAD("\"tools\":[" WEATHER "],\"parallel_tool_calls\":1", "parallel_tool_calls");
    BAD("\"functions\":[{\"name\":\"f\"}]", "functions");
    BAD("\"function_call\":\"auto\"", "function_call");
#undef BAD
    parse_bad(SRV_CHAT, "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":{}}]}", 400,
              "messages[0].tool_calls");
    parse_bad(SRV_CHAT, "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"x\"}]}]}",
              400, "messages[0].tool_calls[0]");
}
END_TEST

/* The Responses API's body: input as a string or items, instructions
 * first, flat tools and tool_choice, text.format, reasoning.effort, the
 * store's fields, what a response repeats, and a 400 naming each field
 * this server refuses. */
START_TEST(test_responses)
{
    struct srv_request r;
    parse_ok(SRV_RESPONSES, "{\"model\":\"x\",\"instructions\":\"Be brief.\",\"input\":\"hi\",\"max_output_tokens\":7,"
                            "\"temperature\":0.5,\"metadata\":{\"k\":\"v\"},\"store\":false,\"user\":\"u\","
                            "\"truncation\":\"disabled\",\"service_tier\":\"auto\",\"include\":[],"
                            "\"reasoning\":{\"effort\":\"high\",\"summary\":\"auto\"},\"text\":{\"verbosity\":\"medium\"}}",
             &r);
    ck_assert_str_eq(r.messages_json, "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"hi\"}]");
    ck_assert_int_eq((int)r.n_instructions, 1);
    ck_assert_int_eq(r.max_tokens, 7);
    ck_assert_int_eq(r.n, 1);
    ck_assert(!r.store);
    ck_assert(r.parallel_tool_calls);
    ck_assert_str_eq(r.reasoning_effort, "high");
    ck_assert_ptr_null(r.previous_response_id);
    ck_assert_int_eq(r.tool_choice, SRV_TOOL_NONE);
    /* what the response repeats */
    ck_assert_ptr_nonnull(strstr(r.echo_json, "\"instructions\":\"Be brief.\""));
    ck_assert_ptr_nonnull(strstr(r.echo_json, "\"max_output_tokens\":7"));
    ck_assert_ptr_nonnull(strstr(r.echo_json, "\"tool_choice\":\"auto\""));
    ck_assert_ptr_nonnull(strstr(r.echo_json, "\"text\":{\"format\":{\"type\":\"text\"}}"));
    ck_assert_ptr_nonnull(strstr(r.echo_json, "\"metadata\":{\"k\":\"v\"}"));
    ck_assert_ptr_nonnull(strstr(r.echo_json, "\"temperature\":0.5"));
    ck_assert_ptr_nonnull(strstr(r.echo_json, "\"store\":false"));
    ck_assert_ptr_nonnull(strstr(r.echo_json, "\"previous_response_id\":null"));
    srv_request_free(&r);
    /* items: messages with parts, a function call joined to the assistant
     * message before it, its output, reasoning left out; no instructions */
    parse_ok(SRV_RESPONSES,
             "{\"input\":[{\"role\":\"developer\",\"content\":\"D\"},"
             "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"a\"},"
             "{\"type\":\"input_text\",\"text\":\"b\"}]},"
             "{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[]},"
             "{\"type\":\"message\",\"role\":\"assistant\",\"id\":\"msg_1\",\"status\":\"completed\",\"content\":"
             "[{\"type\":\"output_text\",\"text\":\"Let me look.\",\"annotations\":[]}]},"
             "{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"f\",\"arguments\":\"{\\\"x\\\":1}\"},"
             "{\"type\":\"function_call\",\"call_id\":\"call_2\",\"name\":\"g\",\"arguments\":\"oops\"},"
             "{\"type\":\"function_call_output\",\"call_id\":\"call_1\",\"output\":\"2\"},"
             "{\"type\":\"function_call_output\",\"call_id\":\"call_2\",\"output\":[{\"type\":\"input_text\",\"text\":\"3\"}]},"
             "{\"type\":\"function_call\",\"call_id\":\"call_3\",\"name\":\"h\",\"arguments\":\"{}\"}]}",
             &r);
    ck_assert_str_eq(r.messages_json,
                     "[{\"role\":\"system\",\"content\":\"D\"},{\"role\":\"user\",\"content\":\"a\\nb\"},"
                     "{\"role\":\"assistant\",\"content\":\"Let me look.\",\"tool_calls\":["
                     "{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":{\"x\":1}}},"
                     "{\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":\"oops\"}}]},"
                     "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"2\"},"
                     "{\"role\":\"tool\",\"tool_call_id\":\"call_2\",\"content\":\"3\"},"
                     "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"call_3\",\"type\":\"function\","
                     "\"function\":{\"name\":\"h\",\"arguments\":{}}}]}]");
    ck_assert_int_eq((int)r.n_instructions, 0);
    ck_assert(r.store);
    srv_request_free(&r);
    /* flat tools become the templates' shape; a named tool_choice is flat too */
    parse_ok(SRV_RESPONSES, "{\"input\":\"hi\",\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"description\":\"d\","
                            "\"parameters\":{\"type\":\"object\"},\"strict\":true},{\"type\":\"function\",\"name\":\"g\"}],"
                            "\"tool_choice\":{\"type\":\"function\",\"name\":\"g\"},\"parallel_tool_calls\":false}", &r);
    ck_assert_str_eq(r.tools_json, "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\","
                                   "\"parameters\":{\"type\":\"object\"}}},{\"type\":\"function\",\"function\":{\"name\":\"g\"}}]");
    ck_assert_int_eq(r.tool_choice, SRV_TOOL_NAMED);
    ck_assert_str_eq(r.tool_name, "g");
    ck_assert(!r.parallel_tool_calls);
    ck_assert_ptr_nonnull(strstr(r.echo_json, "\"tool_choice\":{\"type\":\"function\",\"name\":\"g\"}"));
    ck_assert_ptr_nonnull(strstr(r.echo_json, "{\"type\":\"function\",\"name\":\"g\",\"description\":null,"
                                              "\"parameters\":null,\"strict\":null}"));
    srv_request_free(&r);
    /* text.format, flat; previous_response_id with no input */
    parse_ok(SRV_RESPONSES, "{\"previous_response_id\":\"resp_1\",\"text\":{\"format\":{\"type\":\"json_schema\","
                            "\"name\":\"n\",\"strict\":true,\"schema\":{\"type\":\"integer\"}}}}", &r);
    ck_assert_int_eq(r.grammar, SRV_GRAMMAR_JSON_SCHEMA);
    ck_assert_str_eq(r.grammar_text, "{\"type\":\"integer\"}");
    ck_assert_ptr_nonnull(r.schema_gbnf);
    ck_assert_str_eq(r.previous_response_id, "resp_1");
    ck_assert_str_eq(r.messages_json, "[]");
    srv_request_free(&r);
    parse_ok(SRV_RESPONSES, "{\"input\":\"hi\",\"text\":{\"format\":{\"type\":\"json_object\"}},\"stream\":true,"
                            "\"stream_options\":{\"include_obfuscation\":false}}", &r);
    ck_assert_int_eq(r.grammar, SRV_GRAMMAR_JSON_OBJECT);
    ck_assert(r.stream);
    srv_request_free(&r);

    static const struct {
        const char *body, *param;
    } refused[] = {
        {"{}", "input"},
        {"{\"input\":5}", "input"},
        {"{\"input\":\"x\",\"instructions\":[]}", "instructions"},
        {"{\"input\":[5]}", "input[0]"},
        {"{\"input\":[{\"role\":\"tool\",\"content\":\"x\"}]}", "input[0].role"},
        {"{\"input\":[{\"role\":\"user\"}]}", "input[0].content"},
        {"{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\",\"image_url\":\"u\"}]}]}",
         "input[0].content[0]"},
        {"{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_file\",\"file_id\":\"f\"}]}]}",
         "input[0].content[0]"},
        {"{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_text\"}]}]}", "input[0].content[0]"},
        {"{\"input\":[{\"type\":\"function_call\",\"name\":\"f\",\"arguments\":\"{}\"}]}", "input[0].call_id"},
        {"{\"input\":[{\"type\":\"function_call\",\"call_id\":\"c\",\"arguments\":\"{}\"}]}", "input[0].name"},
        {"{\"input\":[{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"f\",\"arguments\":{}}]}",
         "input[0].arguments"},
        {"{\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c\"}]}", "input[0].output"},
        {"{\"input\":[{\"type\":\"item_reference\",\"id\":\"msg_1\"}]}", "input[0].type"},
        {"{\"input\":[{\"type\":\"web_search_call\",\"id\":\"ws_1\"}]}", "input[0].type"},
        {"{\"input\":[{\"type\":3}]}", "input[0].type"},
        {"{\"input\":\"x\",\"tools\":[{\"type\":\"web_search\"}]}", "tools[0].type"},
        {"{\"input\":\"x\",\"tools\":[{\"type\":\"function\"}]}", "tools[0].name"},
        {"{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"strict\":1}]}", "tools[0].strict"},
        {"{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"parameters\":[]}]}", "tools[0].parameters"},
        {"{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"f\"}],\"tool_choice\":{\"type\":\"function\","
         "\"name\":\"g\"}}", "tool_choice"},
        {"{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"f\"}],\"tool_choice\":{\"type\":\"function\","
         "\"function\":{\"name\":\"f\"}}}", "tool_choice"},
        {"{\"input\":\"x\",\"tool_choice\":{\"type\":\"web_search_preview\"}}", "tool_choice"},
        {"{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\",\"schema\":{}}}}", "text.format"},
        {"{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"n\",\"schema\":5}}}", "text.format"},
        {"{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"grammar\"}}}", "text.format"},
        {"{\"input\":\"x\",\"text\":{\"verbosity\":\"low\"}}", "text.verbosity"},
        {"{\"input\":\"x\",\"text\":3}", "text"},
        {"{\"input\":\"x\",\"reasoning\":{\"effort\":\"minimal\"}}", "reasoning.effort"},
        {"{\"input\":\"x\",\"reasoning\":{\"effort\":\"huge\"}}", "reasoning.effort"},
        {"{\"input\":\"x\",\"reasoning\":{\"summary\":\"detailed\"}}", "reasoning.summary"},
        {"{\"input\":\"x\",\"background\":true}", "background"},
        {"{\"input\":\"x\",\"conversation\":\"c\"}", "conversation"},
        {"{\"input\":\"x\",\"include\":[\"message.output_text.logprobs\"]}", "include"},
        {"{\"input\":\"x\",\"truncation\":\"auto\"}", "truncation"},
        {"{\"input\":\"x\",\"prompt\":{\"id\":\"p\"}}", "prompt"},
        {"{\"input\":\"x\",\"service_tier\":\"flex\"}", "service_tier"},
        {"{\"input\":\"x\",\"top_logprobs\":2}", "top_logprobs"},
        {"{\"input\":\"x\",\"stream_options\":{\"include_obfuscation\":true},\"stream\":true}",
         "stream_options.include_obfuscation"},
        {"{\"input\":\"x\",\"stream_options\":{}}", "stream_options"},
        {"{\"input\":\"x\",\"metadata\":{\"k\":1}}", "metadata"},
        {"{\"input\":\"x\",\"store\":\"yes\"}", "store"},
        {"{\"input\":\"x\",\"previous_response_id\":3}", "previous_response_id"},
        {"{\"input\":\"x\",\"max_output_tokens\":0}", "max_output_tokens"},
        {"{\"input\":\"x\",\"max_output_tokens\":65}", "max_output_tokens"},
        {"{\"input\":\"x\",\"max_tokens\":5}", "max_tokens"},
        {"{\"input\":\"x\",\"messages\":[]}", "messages"},
        {"{\"input\":\"x\",\"response_format\":{\"type\":\"json_object\"}}", "response_format"},
        {"{\"input\":\"x\",\"reasoning_effort\":\"low\"}", "reasoning_effort"},
        {"{\"input\":\"x\",\"n\":2}", "n"},
        {"{\"input\":\"x\",\"temperature\":3}", "temperature"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        parse_bad(SRV_RESPONSES, refused[i].body, 400, refused[i].param);
}
END_TEST

START_TEST(test_completion_prompts)
{
    struct srv_request r;
    parse_ok(SRV_COMPLETION, "{\"prompt\":\"Once upon\",\"echo\":true,\"logprobs\":2,\"best_of\":1,\"suffix\":\"\"}", &r);
    ck_assert_int_eq((int)r.n_prompts, 1);
    ck_assert_str_eq(r.prompts[0].text, "Once upon");
    ck_assert(r.echo && r.logprobs && r.top_logprobs == 2);
    srv_request_free(&r);
    parse_ok(SRV_COMPLETION, "{\"prompt\":[1,2,99]}", &r);
    ck_assert_int_eq((int)r.n_prompts, 1);
    ck_assert_int_eq((int)r.prompts[0].n_tokens, 3);
    ck_assert_int_eq(r.prompts[0].tokens[2], 99);
    srv_request_free(&r);
    parse_ok(SRV_COMPLETION, "{\"prompt\":[\"a\",[4,5],\"\"]}", &r);
    ck_assert_int_eq((int)r.n_prompts, 3);
    ck_assert_str_eq(r.prompts[0].text, "a");
    ck_assert_int_eq((int)r.prompts[1].n_tokens, 2);
    ck_assert_str_eq(r.prompts[2].text, "");
    srv_request_free(&r);
    parse_bad(SRV_COMPLETION, "{}", 400, "prompt");
    parse_bad(SRV_COMPLETION, "{\"prompt\":5}", 400, "prompt");
    parse_bad(SRV_COMPLETION, "{\"prompt\":[]}", 400, "prompt");
    parse_bad(SRV_COMPLETION, "{\"prompt\":[1,100]}", 400, "prompt");
    parse_bad(SRV_COMPLETION, "{\"prompt\":[1,-1]}", 400, "prompt");
    parse_bad(SRV_COMPLETION, "{\"prompt\":[\"a\",7]}", 400, "prompt[1]");
    parse_bad(SRV_COMPLETION, "{\"prompt\":[\"a\",[]]}", 400, "prompt[1]");
    parse_bad(SRV_COMPLETION, "{\"prompt\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\","
                              "\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]}", 400, "prompt");
    parse_bad(SRV_COMPLETION, "{\"prompt\":\"a\",\"logprobs\":6}", 400, "logprobs");
    parse_bad(SRV_COMPLETION, "{\"prompt\":\"a\",\"logprobs\":true}", 400, "logprobs");
    parse_bad(SRV_COMPLETION, "{\"prompt\":\"a\",\"suffix\":\"b\"}", 400, "suffix");
    parse_bad(SRV_COMPLETION, "{\"prompt\":\"a\",\"best_of\":2}", 400, "best_of");
    parse_bad(SRV_COMPLETION, "{\"prompt\":\"a\",\"echo\":1}", 400, "echo");
}
END_TEST

START_TEST(test_tokenize_bodies)
{
    struct srv_tokenize t;
    struct srv_error e;
    const char *b = "{\"content\":\"hi <s>\",\"add_special\":true,\"parse_special\":false,\"with_pieces\":true}";
    ck_assert(srv_tokenize_parse(b, strlen(b), &t, &e));
    ck_assert_str_eq(t.content, "hi <s>");
    ck_assert(t.add_special && !t.parse_special && t.with_pieces);
    srv_tokenize_free(&t);
    b = "{\"content\":3}";
    ck_assert(!srv_tokenize_parse(b, strlen(b), &t, &e));
    ck_assert_str_eq(e.param, "content");
    b = "{}";
    ck_assert(!srv_tokenize_parse(b, strlen(b), &t, &e));
    ck_assert_str_eq(e.code, "missing_required_parameter");

    struct srv_detokenize d;
    b = "{\"tokens\":[0,99]}";
    ck_assert(srv_detokenize_parse(b, strlen(b), 100, &d, &e));
    ck_assert_int_eq((int)d.n_tokens, 2);
    srv_detokenize_free(&d);
    b = "{\"tokens\":[]}";
    ck_assert(srv_detokenize_parse(b, strlen(b), 100, &d, &e));
    ck_assert_int_eq((int)d.n_tokens, 0);
    b = "{\"tokens\":[100]}";
    ck_assert(!srv_detokenize_parse(b, strlen(b), 100, &d, &e));
    ck_assert_str_eq(e.param, "tokens");
    b = "{\"tokens\":\"1 2\"}";
    ck_assert(!srv_detokenize_parse(b, strlen(b), 100, &d, &e));
}
END_TEST

/* The model's name and the stream, read before the model's limits are
 * known (the model table picks the model from them). */
START_TEST(test_peek)
{
    struct srv_error e;
    char *model;
    bool stream;
    const char *b = "{\"model\":\"small\",\"stream\":true,\"messages\":[]}";
    ck_assert(srv_request_peek(b, strlen(b), &model, &stream, &e));
    ck_assert_str_eq(model, "small");
    ck_assert(stream);
    free(model);
    b = "{\"prompt\":\"a\",\"stream\":1}";
    ck_assert(srv_request_peek(b, strlen(b), &model, &stream, &e));
    ck_assert(model == NULL && !stream); /* the full parse refuses that stream */
    b = "{\"model\":[\"a\"]}";
    ck_assert(!srv_request_peek(b, strlen(b), &model, &stream, &e));
    ck_assert_int_eq(e.status, 400);
    ck_assert_str_eq(e.param, "model");
    ck_assert(model == NULL);
    b = "[1]";
    ck_assert(!srv_request_peek(b, strlen(b), &model, &stream, &e));
    ck_assert_int_eq(e.status, 400);
    b = "{\"model\":";
    ck_assert(!srv_request_peek(b, strlen(b), &model, &stream, &e));
    ck_assert_str_eq(e.code, "invalid_json");
    ck_assert(!srv_request_peek("", 0, &model, &stream, &e));
    /* no name with a NUL in it could be cut short to another's: JSON
     * with \u0000 is refused */
    const char nul[] = "{\"model\":\"a\\u0000b\"}";
    ck_assert(!srv_request_peek(nul, sizeof nul - 1, &model, &stream, &e));
    ck_assert(model == NULL);
}
END_TEST

START_TEST(test_messages_are_utf8)
{
    /* a JSON syntax error quoting bytes of a multi-byte character */
    const char body[] = "\"s\\\xdb\x83\xf3\x95null\xdb\x83\xf3\x95\x82\x9a}";
    struct srv_request r;
    struct srv_error e;
    ck_assert(!srv_request_parse(SRV_CHAT, body, sizeof body - 1, &limits, &r, &e));
    ck_assert(hearth_utf8_valid_prefix(e.message, strlen(e.message)) == strlen(e.message));
    ck_assert(hearth_utf8_valid_prefix("\xc3\xa9\xf0\x9f\x98\x80", 6) == 6);
    ck_assert(hearth_utf8_valid_prefix("a\xc3", 2) == 1);
    ck_assert(hearth_utf8_valid_prefix("\xed\xa0\x80", 3) == 0); /* a surrogate */
    ck_assert(hearth_utf8_valid_prefix("\xc0\x80", 2) == 0);     /* overlong */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("request");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_chat_fields);
    tcase_add_test(tc, test_reasoning_budget);
    tcase_add_test(tc, test_structured_fields);
    tcase_add_test(tc, test_chat_refusals);
    tcase_add_test(tc, test_tools);
    tcase_add_test(tc, test_responses);
    tcase_add_test(tc, test_completion_prompts);
    tcase_add_test(tc, test_tokenize_bodies);
    tcase_add_test(tc, test_peek);
    tcase_add_test(tc, test_messages_are_utf8);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}

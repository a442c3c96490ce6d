/*
 * openai.c -- the OpenAI API's shapes of what the server sends: error
 * objects, the whole response of a job, or for a stream its server-sent
 * events, which are appended to the job's output under its mutex for
 * its connection to write (jobs.c).
 */
#define _GNU_SOURCE
#include "config.h"

#include "server_impl.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "buf.h"
#include "request.h"
#include "toolcall.h"

/* ---- text ---------------------------------------------------------- */

/* A JSON string of bytes that may not be valid UTF-8 (token pieces):
 * each ill-formed byte becomes U+FFFD. */
json_t *lossy_string(const char *p, size_t n)
{
    size_t k = hearth_utf8_valid_prefix(p, n);
    if (k == n) return json_stringn(p, n);
    struct buf b = {0};
    for (size_t i = 0; i < n;) {
        buf_add(&b, p + i, k);
        i += k;
        if (i < n) {
            buf_add(&b, "\xef\xbf\xbd", 3);
            i++;
        }
        k = hearth_utf8_valid_prefix(p + i, n - i);
    }
    json_t *s = json_stringn(b.p ? b.p : "", b.len);
    free(b.p);
    return s;
}

/* ---- JSON pieces of responses --------------------------------------- */

const char *finish_name(hearth_finish_reason f)
{
    switch (f) {
    case HEARTH_FINISH_STOP:
    case HEARTH_FINISH_EOS: return "stop";
    case HEARTH_FINISH_LENGTH:
    case HEARTH_FINISH_CONTEXT: return "length";
    default: return NULL;
    }
}

json_t *error_object(const char *message, const char *type, const char *param, const char *code)
{
    json_t *e = json_object();
    json_object_set_new(e, "message", lossy_string(message, strlen(message)));
    json_object_set_new(e, "type", json_string(type));
    json_object_set_new(e, "param", param && *param ? json_string(param) : json_null());
    json_object_set_new(e, "code", code ? json_string(code) : json_null());
    json_t *o = json_object();
    json_object_set_new(o, "error", e);
    return o;
}

static json_t *bytes_array(const char *p, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer((unsigned char)p[i]));
    return a;
}

json_t *piece_json(const struct srv_model *s, hearth_token t, bool with_bytes, json_t **bytes)
{
    size_t n = 0;
    const char *p = hearth_token_piece(s->vocab, t, 0, &n);
    if (!p) p = "", n = 0;
    if (with_bytes) *bytes = bytes_array(p, n);
    return lossy_string(p, n);
}

/* The chat form of log probabilities of records [from, to). */
static json_t *chat_logprobs(const struct srv_model *s, const struct choice *c, size_t from, size_t to)
{
    json_t *content = json_array();
    for (size_t i = from; i < to; i++) {
        const struct lp_rec *r = &c->lp[i];
        json_t *e = json_object(), *bytes;
        json_object_set_new(e, "token", piece_json(s, r->token, true, &bytes));
        json_object_set_new(e, "logprob", json_real(r->logprob));
        json_object_set_new(e, "bytes", bytes);
        json_t *top = json_array();
        for (int32_t k = 0; k < r->n_top; k++) {
            json_t *te = json_object(), *tb;
            json_object_set_new(te, "token", piece_json(s, r->top[k], true, &tb));
            json_object_set_new(te, "logprob", json_real(r->top_lp[k]));
            json_object_set_new(te, "bytes", tb);
            json_array_append_new(top, te);
        }
        json_object_set_new(e, "top_logprobs", top);
        json_array_append_new(content, e);
    }
    json_t *o = json_object();
    json_object_set_new(o, "content", content);
    return o;
}

/* The completions form: tokens, token_logprobs, top_logprobs, text_offset. */
static json_t *completion_logprobs(const struct srv_model *s, const struct choice *c, size_t from,
                                   size_t to, size_t offset0)
{
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    for (size_t i = from; i < to; i++) {
        const struct lp_rec *r = &c->lp[i];
        size_t n = 0;
        const char *p = hearth_token_piece(s->vocab, r->token, 0, &n);
        json_array_append_new(tokens, lossy_string(p ? p : "", p ? n : 0));
        json_array_append_new(lps, json_real(r->logprob));
        json_t *top = json_object();
        for (int32_t k = 0; k < r->n_top; k++) {
            size_t tn = 0;
            const char *tp = hearth_token_piece(s->vocab, r->top[k], 0, &tn);
            json_t *key = lossy_string(tp ? tp : "", tp ? tn : 0);
            json_object_set_new(top, json_string_value(key), json_real(r->top_lp[k]));
            json_decref(key);
        }
        json_array_append_new(tops, top);
        json_array_append_new(offs, json_integer((json_int_t)(offset0 + r->offset)));
    }
    json_t *o = json_object();
    json_object_set_new(o, "tokens", tokens);
    json_object_set_new(o, "token_logprobs", lps);
    json_object_set_new(o, "top_logprobs", tops);
    json_object_set_new(o, "text_offset", offs);
    return o;
}

/* The job's token counts: each prompt once (its tokens, before its
 * statistics came), the generated tokens of every choice (job locked). */
void job_usage(const struct job *j, long *prompt, long *cached, long *completion)
{
    *prompt = *cached = *completion = 0;
    for (size_t i = 0; i < j->n_choices; i++) {
        const hearth_request_stats *st = &j->choices[i].stats;
        if (i % (size_t)j->req.n == 0) {
            *prompt += st->n_prompt ? st->n_prompt : (long)j->n_tokens[i / (size_t)j->req.n];
            *cached += st->n_cached;
        }
        *completion += st->n_generated;
    }
}

long job_disk_cached(const struct job *j)
{
    long disk = 0;
    for (size_t i = 0; i < j->n_choices; i += (size_t)j->req.n) disk += j->choices[i].stats.n_cached_disk;
    return disk;
}

/* The usage extension of a server that speculates: the choices' drafted
 * and accepted tokens, the acceptance rate and the tokens per forward
 * pass of the model (job locked). */
static json_t *speculation_json(const struct job *j)
{
    long drafted = 0, accepted = 0, steps = 0, generated = 0;
    for (size_t i = 0; i < j->n_choices; i++) {
        const hearth_request_stats *st = &j->choices[i].stats;
        drafted += st->n_drafted;
        accepted += st->n_accepted;
        steps += st->n_steps;
        generated += st->n_generated;
    }
    json_t *o = json_object();
    json_object_set_new(o, "drafted_tokens", json_integer(drafted));
    json_object_set_new(o, "accepted_tokens", json_integer(accepted));
    json_object_set_new(o, "acceptance_rate", json_real(drafted > 0 ? (double)accepted / (double)drafted : 0.0));
    json_object_set_new(o, "model_steps", json_integer(steps));
    json_object_set_new(o, "tokens_per_step", json_real(steps > 0 ? (double)generated / (double)steps : 0.0));
    return o;
}

static json_t *usage_json(const struct job *j)
{
    long prompt, cached, completion;
    job_usage(j, &prompt, &cached, &completion);
    json_t *d = json_object();
    json_object_set_new(d, "cached_tokens", json_integer(cached));
    if (j->s->cfg.disk_cache) json_object_set_new(d, "hearth_disk_cached_tokens", json_integer(job_disk_cached(j)));
    long reasoning = 0;
    for (size_t i = 0; i < j->n_choices; i++) reasoning += j->choices[i].n_reasoning_tokens;
    json_t *u = json_object();
    if (j->m->loaded.speculation.draft_max > 0) json_object_set_new(u, "hearth_speculation", speculation_json(j));
    json_object_set_new(u, "prompt_tokens", json_integer(prompt));
    json_object_set_new(u, "completion_tokens", json_integer(completion));
    json_object_set_new(u, "total_tokens", json_integer(prompt + completion));
    json_object_set_new(u, "prompt_tokens_details", d);
    if (j->req.kind == SRV_CHAT && j->m->loaded.reasoning != HEARTH_REASONING_NONE)
        json_object_set_new(u, "completion_tokens_details", json_pack("{s:I}", "reasoning_tokens",
                                                                       (json_int_t)reasoning));
    return u;
}

/* Milliseconds as JSON, to the microsecond. */
static json_t *ms_json(double ms)
{
    return json_real((double)(long long)(ms * 1000 + (ms < 0 ? -0.5 : 0.5)) / 1000);
}

/* The seed, the sampling tuple and each choice's timings, as the engine
 * measured them: the wait for a place, the time to the first token and
 * per token after it, the whole (job locked). */
json_t *hearth_json(const struct job *j)
{
    char line[1024];
    hearth_sampler_params_format(&j->req.sampling, line, sizeof line);
    json_t *h = json_object();
    json_object_set_new(h, "seed", json_integer((json_int_t)j->req.sampling.seed));
    json_object_set_new(h, "sampling", json_string(line));
    json_t *timings = json_array();
    for (size_t i = 0; i < j->n_choices; i++) {
        const hearth_request_stats *st = &j->choices[i].stats;
        json_t *t = json_object();
        json_object_set_new(t, "index", json_integer((json_int_t)i));
        json_object_set_new(t, "queue_ms", ms_json(st->queue_ms));
        json_object_set_new(t, "ttft_ms", ms_json(st->ttft_ms));
        json_object_set_new(t, "tpot_ms", ms_json(st->tpot_ms));
        json_object_set_new(t, "total_ms", ms_json(st->total_ms));
        json_array_append_new(timings, t);
    }
    json_object_set_new(h, "timings", timings);
    return h;
}

/* The envelope every response and chunk has. */
static json_t *envelope(const struct job *j, bool chunk)
{
    const struct srv_server *s = j->s;
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(j->id));
    const char *object = j->req.kind == SRV_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                                  : "text_completion";
    json_object_set_new(o, "object", json_string(object));
    json_object_set_new(o, "created", json_integer((json_int_t)j->created));
    json_object_set_new(o, "model", json_string(j->m->alias));
    json_object_set_new(o, "system_fingerprint", json_string(s->fingerprint));
    return o;
}

/* Append "data: JSON\n\n" to the job's output (job locked); o is consumed. */
static void emit(struct job *j, json_t *o)
{
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text) return;
    buf_add(&j->out, "data: ", 6);
    buf_add(&j->out, text, strlen(text));
    buf_add(&j->out, "\n\n", 2);
    free(text);
}

/* A chunk of one choice: delta text (or the finish), log probabilities
 * of the records not sent yet; for chat, delta (consumed) replaces the
 * text's when it is not NULL. */
static void emit_delta(struct job *j, size_t ci, const char *text, size_t len, bool role,
                       const char *finish, json_t *given)
{
    struct choice *c = &j->choices[ci];
    json_t *o = envelope(j, true);
    json_t *ch = json_object();
    json_object_set_new(ch, "index", json_integer((json_int_t)ci));
    json_t *lp = json_null();
    if (j->req.logprobs && c->lp_sent < c->n_lp) {
        lp = j->req.kind == SRV_CHAT ? chat_logprobs(j->m, c, c->lp_sent, c->n_lp)
                                     : completion_logprobs(j->m, c, c->lp_sent, c->n_lp,
                                                           j->echo_len[ci / (size_t)j->req.n]);
        c->lp_sent = c->n_lp;
    }
    if (j->req.kind == SRV_CHAT) {
        json_t *delta = given ? given : json_object();
        if (role) json_object_set_new(delta, "role", json_string("assistant"));
        if (text) json_object_set_new(delta, "content", lossy_string(text, len));
        json_object_set_new(ch, "delta", delta);
    } else {
        json_object_set_new(ch, "text", json_stringn(text ? text : "", text ? len : 0));
    }
    json_object_set_new(ch, "logprobs", lp);
    json_object_set_new(ch, "finish_reason", finish ? json_string(finish) : json_null());
    json_t *choices = json_array();
    json_array_append_new(choices, ch);
    json_object_set_new(o, "choices", choices);
    if (j->req.include_usage) json_object_set_new(o, "usage", json_null());
    emit(j, o);
}

void emit_chunk(struct job *j, size_t ci, const char *text, size_t len, bool role, const char *finish)
{
    emit_delta(j, ci, text, len, role, finish, NULL);
}

/* A chunk of reasoning: delta.reasoning_content, as DeepSeek's API sends it. */
void emit_reasoning(struct job *j, size_t ci, const char *text, size_t len)
{
    emit_delta(j, ci, NULL, 0, false, NULL, json_pack("{s:s%}", "reasoning_content", text, len));
}

/* ---- tool calls ------------------------------------------------------ */

/* An id for a tool call: Mistral's templates take nine letters and
 * digits and refuse others; the rest get "call_" and 24. */
void tool_call_id(const struct job *j, char *out, size_t cap)
{
    static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    const bool mistral = j->m->loaded.tool_format == SRV_TOOLS_MISTRAL;
    const size_t n = mistral ? 9 : 24, at = mistral ? 0 : 5;
    unsigned char r[24];
    out[0] = '\0';
    if (getrandom(r, n, 0) != (ssize_t)n)
        for (size_t i = 0; i < n; i++) r[i] = (unsigned char)(rand() & 0xff);
    if (cap < at + n + 1) return;
    memcpy(out, "call_", at);
    for (size_t i = 0; i < n; i++) out[at + i] = alnum[r[i] % (sizeof alnum - 1)];
    out[at + n] = '\0';
}

/* A call's id: the one the model wrote (Kimi's functions.NAME:K, which
 * its template writes back before the result), else a new one in made. */
static const char *call_id(const struct job *j, const struct srv_tool_call *call, char *made, size_t cap)
{
    if (call->id) return call->id;
    tool_call_id(j, made, cap);
    return made;
}
static bool find_tool_calls(const struct job *j, const struct choice *c, struct srv_tool_calls *tc);

/* Whether the job's chat output is read for tool calls. */
bool reads_tool_calls(const struct job *j)
{
    return srv_kind_chat(j->req.kind) && j->req.tool_choice != SRV_TOOL_NONE;
}

/* The calls of a choice's text, or false when it is plain content;
 * parallel_tool_calls false keeps the first. */
bool choice_tool_calls(const struct job *j, const struct choice *c, struct srv_tool_calls *tc)
{
    if (!reads_tool_calls(j)) return false;
    if (!find_tool_calls(j, c, tc)) return false;
    if (!j->req.parallel_tool_calls)
        while (tc->n > 1) {
            tc->n--;
            free(tc->calls[tc->n].name);
            free(tc->calls[tc->n].arguments);
            free(tc->calls[tc->n].id);
        }
    return true;
}

static bool find_tool_calls(const struct job *j, const struct choice *c, struct srv_tool_calls *tc)
{
    const size_t n = hearth_reasoning_split_n_tool_calls(c->split);
    if (n > 0) {
        /* harmony's calls, which the split kept apart: all of the text is content */
        memset(tc, 0, sizeof *tc);
        if (c->text.len > 0 && (tc->content = malloc(c->text.len + 1))) {
            memcpy(tc->content, c->text.p, c->text.len);
            tc->content[c->text.len] = '\0';
            tc->content_len = c->text.len;
        }
        for (size_t i = 0; i < n; i++) {
            const char *name, *args;
            size_t len;
            if (hearth_reasoning_split_tool_call(c->split, i, &name, &args, &len) ||
                !srv_tool_calls_add(tc, name, args, len))
                break;
        }
        if (tc->n > 0) return true;
        srv_tool_calls_free(tc);
        return false;
    }
    return c->text.len > 0 && srv_tool_calls_parse(j->m->loaded.tool_format, c->text.p, c->text.len, tc);
}

/* How much of p[0..n) may go out before more text comes: all but a
 * character cut off at its end (what is not UTF-8 goes out at the end,
 * each bad byte as U+FFFD). */
size_t whole_chars(const char *p, size_t n)
{
    const size_t k = hearth_utf8_valid_prefix(p, n);
    return k < n && n - k < 4 && (unsigned char)p[k] >= 0xc0 ? k : n;
}

/* The first chunk of a call: its index, id, type and name, with empty
 * arguments. */
static void emit_call_head(struct job *j, size_t ci, size_t index, const struct srv_tool_call *call)
{
    char made[40];
    const char *id = call_id(j, call, made, sizeof made);
    json_t *o = json_pack("{s:I, s:s, s:s, s:{s:s, s:s}}", "index", (json_int_t)index, "id", id, "type",
                          "function", "function", "name", call->name, "arguments", "");
    emit_delta(j, ci, NULL, 0, false, NULL, json_pack("{s:[o]}", "tool_calls", o));
}

/* More of a call's arguments. */
static void emit_call_args(struct job *j, size_t ci, size_t index, const char *p, size_t n)
{
    if (n == 0) return;
    json_t *o = json_pack("{s:I, s:{s:o}}", "index", (json_int_t)index, "function", "arguments", lossy_string(p, n));
    emit_delta(j, ci, NULL, 0, false, NULL, json_pack("{s:[o]}", "tool_calls", o));
}

/* Send what is known of a choice's content and calls (all of it when
 * last) to the stream's sink: the content no later text changes, each
 * call's head once it has begun, then its arguments as they grow;
 * harmony's calls whole, each once the next has begun or the text has
 * ended.  The chat stream and the Responses stream (responses.c) share
 * it. */
void stream_calls_progress(struct job *j, size_t ci, bool last, const struct call_sink *k)
{
    struct choice *c = &j->choices[ci];
    const struct srv_tool_parser *tp = &c->tp;
    if (tp->content_final > c->sent) {
        size_t n = tp->content_final - c->sent;
        if (!last) n = whole_chars(tp->out.content + c->sent, n);
        k->content(j, ci, tp->out.content + c->sent, n);
        c->sent += n;
    }
    const size_t limit = j->req.parallel_tool_calls ? tp->out.n : tp->out.n > 0;
    for (;;) {
        if (c->calls_sent > 0 && c->calls_sent <= limit && (!k->args_open || k->args_open(j))) {
            const struct srv_tool_call *call = &tp->out.calls[c->calls_sent - 1];
            size_t n = call->arguments_len - c->args_sent;
            if (!last && c->calls_sent == tp->out.n) n = whole_chars(call->arguments + c->args_sent, n);
            k->args(j, ci, c->calls_sent - 1, call->arguments + c->args_sent, n);
            c->args_sent += n;
        }
        if (c->calls_sent >= limit) break;
        k->head(j, ci, c->calls_sent, &tp->out.calls[c->calls_sent]);
        c->calls_sent++;
        c->args_sent = 0;
    }
    /* harmony's: a call is whole once another has begun, or at the end */
    size_t split_n = hearth_reasoning_split_n_tool_calls(c->split);
    if (!last && split_n > 0) split_n--;
    while (c->calls_sent < (j->req.parallel_tool_calls ? split_n : split_n > 0)) {
        const char *name, *args;
        size_t len;
        struct srv_tool_calls one = {0};
        if (!hearth_reasoning_split_tool_call(c->split, c->calls_sent, &name, &args, &len) &&
            srv_tool_calls_add(&one, name, args, len)) {
            k->head(j, ci, c->calls_sent, &one.calls[0]);
            k->args(j, ci, c->calls_sent, one.calls[0].arguments, one.calls[0].arguments_len);
            if (k->whole) k->whole(j);
        }
        srv_tool_calls_free(&one);
        c->calls_sent++;
    }
}

/* The chat stream's content: a chunk where there is any. */
static void emit_content(struct job *j, size_t ci, const char *p, size_t n)
{
    if (n) emit_chunk(j, ci, p, n, false, NULL);
}

static const struct call_sink chat_sink = {emit_content, emit_call_head, emit_call_args, NULL, NULL};

static void stream_tool_progress(struct job *j, size_t ci, bool last)
{
    stream_calls_progress(j, ci, last, &chat_sink);
}

/* A stream's text so far: read, and what is known sent. */
void stream_tool_text(struct job *j, size_t ci)
{
    struct choice *c = &j->choices[ci];
    srv_tool_parser_feed(&c->tp, c->text.p, c->text.len);
    stream_tool_progress(j, ci, false);
}

/* The end of a stream that reads tool calls: the rest of the content and
 * of the calls, and the finish (tool_calls when there were calls). */
void stream_tool_end(struct job *j, size_t ci, const char *finish)
{
    struct choice *c = &j->choices[ci];
    srv_tool_parser_finish(&c->tp, c->text.p, c->text.len);
    stream_tool_progress(j, ci, true);
    emit_chunk(j, ci, NULL, 0, false, c->calls_sent ? "tool_calls" : finish);
}

/* The end of a stream: the usage chunk when asked, then [DONE]. */
void emit_end(struct job *j)
{
    if (j->req.include_usage && !j->failed && j->ended == END_NONE) {
        json_t *o = envelope(j, true);
        json_object_set_new(o, "choices", json_array());
        json_object_set_new(o, "usage", usage_json(j));
        json_object_set_new(o, "hearth", hearth_json(j));
        emit(j, o);
    }
    buf_add(&j->out, "data: [DONE]\n\n", 14);
    j->stream_closed = true;
}

void emit_error(struct job *j, const char *message, const char *type, const char *code, const char *param)
{
    if (j->req.kind == SRV_RESPONSES) {
        responses_stream_error(j, message, code, param);
        return;
    }
    emit(j, error_object(message, type, param, code));
    emit_end(j);
}

/* The whole answer of a request that does not stream. */
json_t *final_response(struct job *j)
{
    if (j->req.kind == SRV_RESPONSES) return responses_final(j);
    json_t *o = envelope(j, false);
    json_t *choices = json_array();
    for (size_t ci = 0; ci < j->n_choices; ci++) {
        struct choice *c = &j->choices[ci];
        json_t *ch = json_object();
        json_object_set_new(ch, "index", json_integer((json_int_t)ci));
        const char *text = c->text.p ? c->text.p : "";
        const char *f = finish_name(c->finish);
        struct srv_tool_calls tc;
        if (j->req.kind == SRV_CHAT) {
            const bool has_calls = choice_tool_calls(j, c, &tc);
            json_t *m = json_object();
            json_object_set_new(m, "role", json_string("assistant"));
            json_object_set_new(m, "content", !has_calls ? json_stringn(text, c->text.len)
                                              : tc.content_len ? lossy_string(tc.content, tc.content_len)
                                                               : json_null());
            if (c->reasoning.len) json_object_set_new(m, "reasoning_content", json_stringn(c->reasoning.p, c->reasoning.len));
            if (has_calls) {
                json_t *calls = json_array();
                for (size_t i = 0; i < tc.n; i++) {
                    char made[40];
                    const char *id = call_id(j, &tc.calls[i], made, sizeof made);
                    json_array_append_new(calls, json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id, "type", "function",
                                                           "function", "name", tc.calls[i].name, "arguments",
                                                           tc.calls[i].arguments));
                }
                srv_tool_calls_free(&tc);
                json_object_set_new(m, "tool_calls", calls);
                f = "tool_calls";
            }
            json_object_set_new(ch, "message", m);
            json_object_set_new(ch, "logprobs", j->req.logprobs ? chat_logprobs(j->m, c, 0, c->n_lp) : json_null());
        } else {
            size_t p = ci / (size_t)j->req.n;
            struct buf t = {0};
            if (j->echo[p]) buf_add(&t, j->echo[p], j->echo_len[p]);
            buf_add(&t, text, c->text.len);
            json_object_set_new(ch, "text", json_stringn(t.p ? t.p : "", t.len));
            free(t.p);
            json_object_set_new(ch, "logprobs",
                                j->req.logprobs ? completion_logprobs(j->m, c, 0, c->n_lp, j->echo_len[p])
                                                : json_null());
        }
        json_object_set_new(ch, "finish_reason", json_string(f ? f : "stop"));
        json_array_append_new(choices, ch);
    }
    json_object_set_new(o, "choices", choices);
    json_object_set_new(o, "usage", usage_json(j));
    json_object_set_new(o, "hearth", hearth_json(j));
    return o;
}

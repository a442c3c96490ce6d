/*
 * responses.c -- the Responses API (POST /v1/responses) over a chat job:
 * the request's input became the chat's messages (request.c), the job
 * runs as a chat's does (jobs.c), and this file writes what the client
 * reads: the response object with its output items, or for a stream its
 * typed events, and keeps past responses so that a request may go on
 * from one (previous_response_id, GET and DELETE /v1/responses/{id}).
 *
 * A response's output items come from the choice a chat would have:
 * its reasoning (a reasoning item: the text in content, no summary), its
 * answer (a message with one output_text part) and the tool calls read
 * from it (function_call items).  A stream writes them as they come:
 * the reasoning and the answer as deltas of their items, each call as
 * an item opened once its name is known with its arguments as deltas,
 * as the chat stream sends its calls.
 *
 * The store keeps, per response, the conversation it ends (every
 * message but the instructions, which a later response does not
 * inherit, as chat messages ready for the template) and the response
 * object itself.  It is bounded by count and by bytes, and gives up the
 * least recently used first.
 */
#define _GNU_SOURCE
#include "config.h"

#include "server_impl.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "buf.h"
#include "request.h"
#include "toolcall.h"

enum { OPEN_NONE, OPEN_REASONING, OPEN_MESSAGE, OPEN_CALL };

/* ---- the store ------------------------------------------------------ */

struct resp_entry {
    char id[48];
    char *conversation;        /* chat messages, a JSON array */
    char *response;            /* the response object */
    size_t bytes;
    struct resp_entry *prev, *next; /* most recently used first */
};

void resp_store_init(struct resp_store *st, size_t max_n, size_t max_bytes)
{
    memset(st, 0, sizeof *st);
    st->max_n = max_n;
    st->max_bytes = max_bytes;
    pthread_mutex_init(&st->mu, NULL);
}

static void entry_unlink(struct resp_store *st, struct resp_entry *e)
{
    if (e->prev) e->prev->next = e->next;
    else st->head = e->next;
    if (e->next) e->next->prev = e->prev;
    else st->tail = e->prev;
    e->prev = e->next = NULL;
    st->n--;
    st->bytes -= e->bytes;
}

static void entry_free(struct resp_entry *e)
{
    free(e->conversation);
    free(e->response);
    free(e);
}

void resp_store_free(struct resp_store *st)
{
    while (st->head) {
        struct resp_entry *e = st->head;
        entry_unlink(st, e);
        entry_free(e);
    }
    pthread_mutex_destroy(&st->mu);
}

/* Keep a response (the strings are taken); one that alone passes the
 * byte bound, or a store of no entries, keeps nothing. */
static void store_put(struct resp_store *st, const char *id, char *conversation, char *response)
{
    struct resp_entry *e = calloc(1, sizeof *e);
    const size_t bytes = sizeof *e + strlen(conversation) + strlen(response);
    if (!e || st->max_n == 0 || bytes > st->max_bytes) {
        free(e);
        free(conversation);
        free(response);
        return;
    }
    snprintf(e->id, sizeof e->id, "%s", id);
    e->conversation = conversation;
    e->response = response;
    e->bytes = bytes;
    pthread_mutex_lock(&st->mu);
    while (st->tail && (st->n + 1 > st->max_n || st->bytes + bytes > st->max_bytes)) {
        struct resp_entry *old = st->tail;
        entry_unlink(st, old);
        entry_free(old);
        st->evicted++;
    }
    e->next = st->head;
    if (st->head) st->head->prev = e;
    st->head = e;
    if (!st->tail) st->tail = e;
    st->n++;
    st->bytes += bytes;
    pthread_mutex_unlock(&st->mu);
}

/* The entry of id (store locked), made the most recently used. */
static struct resp_entry *store_find(struct resp_store *st, const char *id)
{
    for (struct resp_entry *e = st->head; e; e = e->next)
        if (strcmp(e->id, id) == 0) {
            if (e != st->head) {
                entry_unlink(st, e);
                e->next = st->head;
                st->head->prev = e;
                st->head = e;
                if (!st->tail) st->tail = e;
                st->n++;
                st->bytes += e->bytes;
            }
            return e;
        }
    return NULL;
}

/* A copy of a stored entry's field (0: the conversation, 1: the
 * response); NULL when the id is not kept (or memory ran out). */
static char *store_get(struct resp_store *st, const char *id, int which, bool *found)
{
    pthread_mutex_lock(&st->mu);
    struct resp_entry *e = store_find(st, id);
    char *copy = e ? strdup(which == 0 ? e->conversation : e->response) : NULL;
    pthread_mutex_unlock(&st->mu);
    *found = e != NULL;
    return copy;
}

static bool store_delete(struct resp_store *st, const char *id)
{
    pthread_mutex_lock(&st->mu);
    struct resp_entry *e = store_find(st, id);
    if (e) entry_unlink(st, e);
    pthread_mutex_unlock(&st->mu);
    if (e) entry_free(e);
    return e != NULL;
}

/* ---- a request's conversation --------------------------------------- */

/* The previous response's conversation between the instructions and the
 * input: the messages the template renders. */
bool responses_prepare(struct srv_server *s, struct job *j, struct srv_error *e)
{
    struct srv_request *r = &j->req;
    if (!r->previous_response_id) return true;
    bool found;
    char *history = store_get(&s->responses, r->previous_response_id, 0, &found);
    if (!found)
        return srv_fail(e, 400, "invalid_request_error", "previous_response_not_found", "previous_response_id",
                        "Previous response with id '%.128s' not found (this server keeps the last %zu "
                        "responses, at most %zu bytes; see --responses-store).", r->previous_response_id,
                        s->cfg.responses_store, s->cfg.responses_store_bytes);
    json_t *past = history ? json_loads(history, 0, NULL) : NULL;
    json_t *now = json_loads(r->messages_json, 0, NULL);
    free(history);
    json_t *all = json_array();
    bool ok = past && now && all;
    for (size_t i = 0; ok && i < json_array_size(now); i++) {
        if (i == r->n_instructions) ok = !json_array_extend(all, past);
        ok = ok && !json_array_append(all, json_array_get(now, i));
    }
    if (ok && json_array_size(now) == r->n_instructions) ok = !json_array_extend(all, past);
    char *text = ok ? json_dumps(all, JSON_COMPACT) : NULL;
    json_decref(past);
    json_decref(now);
    json_decref(all);
    if (!text) return srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    free(r->messages_json);
    r->messages_json = text;
    return true;
}

/* ---- output items --------------------------------------------------- */

/* An item's id: prefix and 24 hex digits. */
static void item_id(const char *prefix, char *out, size_t cap)
{
    unsigned char r[12];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        for (size_t i = 0; i < sizeof r; i++) r[i] = (unsigned char)(rand() & 0xff);
    int n = snprintf(out, cap, "%s", prefix);
    for (size_t i = 0; i < sizeof r && n > 0 && (size_t)n + 2 < cap; i++) n += snprintf(out + n, cap - (size_t)n, "%02x", r[i]);
}

static bool incomplete(const struct job *j)
{
    return j->choices[0].finish == HEARTH_FINISH_LENGTH || j->choices[0].finish == HEARTH_FINISH_CONTEXT;
}

static json_t *text_part(const char *text, size_t len)
{
    return json_pack("{s:s, s:s%, s:[]}", "type", "output_text", "text", text ? text : "", text ? len : 0,
                     "annotations");
}

static json_t *message_item(const char *id, const char *status, const char *text, size_t len)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:[o]}", "id", id, "type", "message", "status", status, "role",
                     "assistant", "content", text_part(text, len));
}

static json_t *reasoning_item(const char *id, const char *status, const char *text, size_t len)
{
    return json_pack("{s:s, s:s, s:[], s:[{s:s, s:s%}], s:s}", "id", id, "type", "reasoning", "summary",
                     "content", "type", "reasoning_text", "text", text ? text : "", text ? len : 0, "status", status);
}

static json_t *call_item(const struct job *j, const struct srv_tool_call *call, const char *status, bool empty)
{
    char id[48], call_id[48];
    item_id("fc_", id, sizeof id);
    tool_call_id(j, call_id, sizeof call_id);
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:o}", "id", id, "type", "function_call", "status", status,
                     "call_id", call->id ? call->id : call_id, "name", call->name, "arguments",
                     empty ? json_string("") : lossy_string(call->arguments, call->arguments_len));
}

/* The output items of a job that did not stream. */
static json_t *output_items(struct job *j)
{
    struct choice *c = &j->choices[0];
    json_t *items = json_array();
    char id[48];
    if (c->reasoning.len) {
        item_id("rs_", id, sizeof id);
        json_array_append_new(items, reasoning_item(id, "completed", c->reasoning.p, c->reasoning.len));
    }
    struct srv_tool_calls tc;
    const bool has_calls = choice_tool_calls(j, c, &tc);
    const size_t len = has_calls ? tc.content_len : c->text.len;
    if (len > 0 || !has_calls) {
        item_id("msg_", id, sizeof id);
        json_array_append_new(items, message_item(id, incomplete(j) ? "incomplete" : "completed",
                                                  has_calls ? tc.content : c->text.p, len));
    }
    for (size_t i = 0; has_calls && i < tc.n; i++) json_array_append_new(items, call_item(j, &tc.calls[i], "completed", false));
    if (has_calls) srv_tool_calls_free(&tc);
    return items;
}

/* The usage object of the Responses API. */
static json_t *usage_object(const struct job *j)
{
    long prompt, cached, completion;
    job_usage(j, &prompt, &cached, &completion);
    json_t *u = json_pack("{s:I, s:{s:I}, s:I, s:{s:I}, s:I}", "input_tokens", (json_int_t)prompt,
                          "input_tokens_details", "cached_tokens", (json_int_t)cached, "output_tokens",
                          (json_int_t)completion, "output_tokens_details", "reasoning_tokens",
                          (json_int_t)j->choices[0].n_reasoning_tokens, "total_tokens",
                          (json_int_t)(prompt + completion));
    if (u && j->s->cfg.disk_cache)
        json_object_set_new(json_object_get(u, "input_tokens_details"), "hearth_disk_cached_tokens",
                            json_integer(job_disk_cached(j)));
    return u;
}

/* The response object in status ("in_progress", "completed",
 * "incomplete", "failed"); output is taken (NULL: none yet). */
static json_t *response_object(struct job *j, const char *status, json_t *output, const char *error)
{
    json_t *o = json_loads(j->req.echo_json, 0, NULL);
    if (!o) o = json_object();
    const bool done = strcmp(status, "in_progress") != 0;
    json_object_set_new(o, "id", json_string(j->id));
    json_object_set_new(o, "object", json_string("response"));
    json_object_set_new(o, "created_at", json_integer((json_int_t)j->created));
    json_object_set_new(o, "status", json_string(status));
    json_object_set_new(o, "model", json_string(j->m->alias));
    json_object_set_new(o, "output", output ? output : json_array());
    json_object_set_new(o, "error", error ? json_pack("{s:s, s:s}", "code", "server_error", "message", error) : json_null());
    json_object_set_new(o, "incomplete_details", strcmp(status, "incomplete") == 0
                                                     ? json_pack("{s:s}", "reason", "max_output_tokens")
                                                     : json_null());
    if (strcmp(status, "completed") == 0) json_object_set_new(o, "completed_at", json_integer((json_int_t)time(NULL)));
    json_object_set_new(o, "usage", done && !error ? usage_object(j) : json_null());
    if (done && !error) json_object_set_new(o, "hearth", hearth_json(j));
    return o;
}

/* The assistant's turn of output items as a chat message for the
 * template: the text of its messages, its function calls. */
static json_t *assistant_message(json_t *items)
{
    struct buf text = {0};
    json_t *calls = json_array();
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it) {
        const char *type = json_string_value(json_object_get(it, "type"));
        if (strcmp(type, "message") == 0) {
            json_t *t = json_object_get(json_array_get(json_object_get(it, "content"), 0), "text");
            buf_add(&text, json_string_value(t), json_string_length(t));
        } else if (strcmp(type, "function_call") == 0) {
            json_t *args = json_object_get(it, "arguments");
            json_t *a = json_loadb(json_string_value(args), json_string_length(args), 0, NULL);
            if (!json_is_object(a)) {
                json_decref(a);
                a = json_incref(args);
            }
            json_array_append_new(calls, json_pack("{s:O, s:s, s:{s:O, s:o}}", "id", json_object_get(it, "call_id"),
                                                   "type", "function", "function", "name",
                                                   json_object_get(it, "name"), "arguments", a));
        }
    }
    json_t *m = json_pack("{s:s, s:s%}", "role", "assistant", "content", text.p ? text.p : "", text.len);
    free(text.p);
    if (m && json_array_size(calls)) json_object_set(m, "tool_calls", calls);
    json_decref(calls);
    return m;
}

/* The finished response of the job with these output items (taken); kept
 * in the store when the request allows (job locked). */
static json_t *finish(struct job *j, json_t *items)
{
    const char *status = incomplete(j) ? "incomplete" : "completed";
    json_t *o = response_object(j, status, items, NULL);
    if (!j->req.store || !o) return o;
    /* the conversation this response ends: its messages but the
     * instructions, then its output */
    json_t *all = json_loads(j->req.messages_json, 0, NULL);
    json_t *conv = json_array();
    for (size_t i = j->req.n_instructions; all && conv && i < json_array_size(all); i++)
        json_array_append(conv, json_array_get(all, i));
    json_array_append_new(conv, assistant_message(items));
    char *conv_text = conv ? json_dumps(conv, JSON_COMPACT) : NULL;
    char *resp_text = json_dumps(o, JSON_COMPACT);
    json_decref(all);
    json_decref(conv);
    if (conv_text && resp_text) store_put(&j->s->responses, j->id, conv_text, resp_text);
    else free(conv_text), free(resp_text);
    return o;
}

json_t *responses_final(struct job *j)
{
    return finish(j, output_items(j));
}

/* ---- events --------------------------------------------------------- */

/* Append "event: TYPE\ndata: JSON\n\n" (job locked); the fields of o
 * (taken) follow the type and the sequence number. */
static void event(struct job *j, const char *type, json_t *o)
{
    json_t *ev = json_pack("{s:s, s:I}", "type", type, "sequence_number", (json_int_t)j->rs.seq++);
    if (ev && o) json_object_update(ev, o);
    json_decref(o);
    char *text = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
    json_decref(ev);
    if (!text) return;
    buf_add(&j->out, "event: ", 7);
    buf_add(&j->out, type, strlen(type));
    buf_add(&j->out, "\ndata: ", 7);
    buf_add(&j->out, text, strlen(text));
    buf_add(&j->out, "\n\n", 2);
    free(text);
}

void responses_stream_begin(struct job *j)
{
    j->rs.output = json_array();
    event(j, "response.created", json_pack("{s:o}", "response", response_object(j, "in_progress", NULL, NULL)));
    event(j, "response.in_progress", json_pack("{s:o}", "response", response_object(j, "in_progress", NULL, NULL)));
}

/* Where the item open now stands: its id and output index. */
static json_t *at(const struct job *j)
{
    return json_pack("{s:s, s:I}", "item_id", j->rs.item_id, "output_index", (json_int_t)json_array_size(j->rs.output));
}

static json_t *at_content(const struct job *j)
{
    json_t *o = at(j);
    json_object_set_new(o, "content_index", json_integer(0));
    return o;
}

/* Close the item open now: its done events, and its place in the output. */
static void close_item(struct job *j, const char *status)
{
    struct resp_stream *rs = &j->rs;
    const char *text = rs->item_text.p ? rs->item_text.p : "";
    const size_t len = rs->item_text.len;
    const json_int_t index = (json_int_t)json_array_size(rs->output);
    json_t *item;
    if (rs->open == OPEN_MESSAGE) {
        json_t *o = at_content(j);
        json_object_set_new(o, "text", json_stringn(text, len));
        json_object_set_new(o, "logprobs", json_array());
        event(j, "response.output_text.done", o);
        o = at_content(j);
        json_object_set_new(o, "part", text_part(text, len));
        event(j, "response.content_part.done", o);
        item = message_item(rs->item_id, status, text, len);
    } else if (rs->open == OPEN_REASONING) {
        json_t *o = at_content(j);
        json_object_set_new(o, "text", json_stringn(text, len));
        event(j, "response.reasoning_text.done", o);
        o = at_content(j);
        json_object_set_new(o, "part", json_pack("{s:s, s:s%}", "type", "reasoning_text", "text", text, len));
        event(j, "response.content_part.done", o);
        item = reasoning_item(rs->item_id, "completed", text, len);
    } else if (rs->open == OPEN_CALL) {
        json_t *o = at(j);
        json_object_set_new(o, "name", json_string(rs->call_name));
        json_object_set_new(o, "arguments", lossy_string(text, len));
        event(j, "response.function_call_arguments.done", o);
        item = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o}", "id", rs->item_id, "type", "function_call", "status",
                         "completed", "call_id", rs->call_id, "name", rs->call_name, "arguments",
                         lossy_string(text, len));
        free(rs->call_name);
        rs->call_name = NULL;
    } else {
        return;
    }
    event(j, "response.output_item.done", json_pack("{s:I, s:O}", "output_index", index, "item", item));
    json_array_append_new(rs->output, item);
    rs->open = OPEN_NONE;
    free(rs->item_text.p);
    memset(&rs->item_text, 0, sizeof rs->item_text);
}

/* Make the item open now one of kind (closing another). */
static void open_item(struct job *j, int kind)
{
    struct resp_stream *rs = &j->rs;
    if (rs->open == kind) return;
    close_item(j, "completed");
    rs->open = kind;
    const json_int_t index = (json_int_t)json_array_size(rs->output);
    json_t *item, *part;
    if (kind == OPEN_MESSAGE) {
        item_id("msg_", rs->item_id, sizeof rs->item_id);
        item = json_pack("{s:s, s:s, s:s, s:s, s:[]}", "id", rs->item_id, "type", "message", "status",
                         "in_progress", "role", "assistant", "content");
        part = text_part("", 0);
        rs->had_message = true;
    } else {
        item_id("rs_", rs->item_id, sizeof rs->item_id);
        item = json_pack("{s:s, s:s, s:[], s:[], s:s}", "id", rs->item_id, "type", "reasoning", "summary",
                         "content", "status", "in_progress");
        part = json_pack("{s:s, s:s}", "type", "reasoning_text", "text", "");
    }
    event(j, "response.output_item.added", json_pack("{s:I, s:o}", "output_index", index, "item", item));
    json_t *o = at_content(j);
    json_object_set_new(o, "part", part);
    event(j, "response.content_part.added", o);
}

/* Text of the answer: a delta of the message item. */
static void message_delta(struct job *j, const char *text, size_t len)
{
    if (len == 0) return;
    open_item(j, OPEN_MESSAGE);
    buf_add(&j->rs.item_text, text, len);
    json_t *o = at_content(j);
    json_object_set_new(o, "delta", json_stringn(text, len));
    json_object_set_new(o, "logprobs", json_array());
    event(j, "response.output_text.delta", o);
}

/* A call's item, open from here on: its output_item.added, the
 * arguments empty. */
static void open_call(struct job *j, const struct srv_tool_call *call)
{
    struct resp_stream *rs = &j->rs;
    close_item(j, "completed");
    rs->open = OPEN_CALL;
    item_id("fc_", rs->item_id, sizeof rs->item_id);
    if (call->id) snprintf(rs->call_id, sizeof rs->call_id, "%s", call->id);
    else tool_call_id(j, rs->call_id, sizeof rs->call_id);
    rs->call_name = strdup(call->name);
    json_t *item = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "id", rs->item_id, "type", "function_call", "status",
                             "in_progress", "call_id", rs->call_id, "name", call->name, "arguments", "");
    event(j, "response.output_item.added",
          json_pack("{s:I, s:o}", "output_index", (json_int_t)json_array_size(rs->output), "item", item));
}

/* More of the open call's arguments. */
static void call_delta(struct job *j, const char *text, size_t len)
{
    if (len == 0) return;
    buf_add(&j->rs.item_text, text, len);
    json_t *o = at(j);
    json_object_set_new(o, "delta", lossy_string(text, len));
    event(j, "response.function_call_arguments.delta", o);
}

/* The Responses stream as a sink of stream_calls_progress (openai.c):
 * the content as deltas of a message, each call a function_call item
 * with its arguments as deltas, a call sent whole closed at once. */
static void sink_content(struct job *j, size_t ci, const char *p, size_t n)
{
    (void)ci;
    message_delta(j, p, n);
}

static void sink_head(struct job *j, size_t ci, size_t index, const struct srv_tool_call *call)
{
    (void)ci, (void)index;
    open_call(j, call);
}

static void sink_args(struct job *j, size_t ci, size_t index, const char *p, size_t n)
{
    (void)ci, (void)index;
    call_delta(j, p, n);
}

static void sink_whole(struct job *j)
{
    close_item(j, "completed");
}

static bool sink_args_open(const struct job *j)
{
    return j->rs.open == OPEN_CALL;
}

static const struct call_sink responses_sink = {sink_content, sink_head, sink_args, sink_whole, sink_args_open};

/* What is known of the answer's content and calls (all of it when
 * last), as the chat stream sends them. */
static void tool_progress(struct job *j, bool last)
{
    stream_calls_progress(j, 0, last, &responses_sink);
}

void responses_stream_text(struct job *j)
{
    struct choice *c = &j->choices[0];
    if (reads_tool_calls(j)) {
        srv_tool_parser_feed(&c->tp, c->text.p, c->text.len);
        tool_progress(j, false);
    } else if (c->text.len > c->sent) {
        message_delta(j, c->text.p + c->sent, c->text.len - c->sent);
        c->sent = c->text.len;
    }
}

void responses_stream_reasoning(struct job *j, const char *text, size_t len)
{
    if (len == 0) return;
    open_item(j, OPEN_REASONING);
    buf_add(&j->rs.item_text, text, len);
    json_t *o = at_content(j);
    json_object_set_new(o, "delta", json_stringn(text, len));
    event(j, "response.reasoning_text.delta", o);
}

void responses_stream_end(struct job *j)
{
    struct choice *c = &j->choices[0];
    struct resp_stream *rs = &j->rs;
    if (reads_tool_calls(j)) {
        srv_tool_parser_finish(&c->tp, c->text.p, c->text.len);
        tool_progress(j, true);
    } else if (c->text.len > c->sent) {
        message_delta(j, c->text.p + c->sent, c->text.len - c->sent);
        c->sent = c->text.len;
    }
    if (!c->calls_sent && !rs->had_message) open_item(j, OPEN_MESSAGE);
    close_item(j, incomplete(j) && rs->open == OPEN_MESSAGE ? "incomplete" : "completed");
    json_t *o = finish(j, json_incref(rs->output));
    const bool cut = incomplete(j);
    event(j, cut ? "response.incomplete" : "response.completed", json_pack("{s:o}", "response", o));
    j->stream_closed = true;
}

void responses_stream_error(struct job *j, const char *message, const char *code, const char *param)
{
    /* the item being written ends incomplete; then the error */
    close_item(j, "incomplete");
    event(j, "error", json_pack("{s:s?, s:s, s:s?}", "code", code, "message", message, "param",
                                param && *param ? param : NULL));
    event(j, "response.failed", json_pack("{s:o}", "response", response_object(j, "failed",
                                                                                 json_incref(j->rs.output), message)));
    j->stream_closed = true;
}

void responses_stream_free(struct job *j)
{
    json_decref(j->rs.output);
    free(j->rs.item_text.p);
    free(j->rs.call_name);
}

/* ---- GET and DELETE /v1/responses/{id} ------------------------------ */

bool handle_response_item(struct conn *cn, struct http_exchange *c, const char *id, bool del)
{
    struct srv_server *s = cn->s;
    if (del) {
        if (!store_delete(&s->responses, id))
            return send_error(cn, c, 404, "invalid_request_error", "not_found", NULL,
                              "Response with id '%.128s' not found.", id);
        return send_json(cn, c, 200, json_pack("{s:s, s:s, s:b}", "id", id, "object", "response.deleted",
                                               "deleted", 1), NULL);
    }
    bool found;
    char *text = store_get(&s->responses, id, 1, &found);
    if (!found)
        return send_error(cn, c, 404, "invalid_request_error", "not_found", NULL,
                          "Response with id '%.128s' not found.", id);
    json_t *o = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (!o) return send_error(cn, c, 500, "server_error", NULL, NULL, "out of memory");
    return send_json(cn, c, 200, o, NULL);
}

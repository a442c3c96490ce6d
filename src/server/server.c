/*
 * server.c -- the OpenAI API over the serving engine (see server.h).
 *
 * Threads: http.c runs one thread per connection; the engine runs
 * on one thread of its own, stepping while there is work and sleeping on
 * a condition variable otherwise.  A generation request becomes a job:
 * the connection's thread submits its prompts to the engine, then waits
 * on the job's eventfd and on its socket (so that a client that hangs up
 * is noticed at once, whatever phase its request is in, and cancelled).
 * The engine's events fill the job under the job's mutex: the text and
 * log probabilities of each choice, and for a stream the server-sent
 * events themselves, ready to be written.  A job is freed by whichever
 * side lets go of it last: the connection (once its response is
 * written) or the engine (its last sample's final event).
 *
 * A client that shuts down its sending side after its request may still
 * read the response; one that closed its socket may not.  The two look
 * the same until something is written, so when the socket reports the
 * half-close the response starts at once (a stream's comment line, or
 * the head of a non-streamed response, whose JSON follows as chunks):
 * a closed socket answers that with a reset, and the request is
 * cancelled.
 */
#define _GNU_SOURCE
#include "config.h"

#include "server.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "http.h"
#include "metrics.h"
#include "prompt.h"
#include "request.h"
#include "sampling_options.h"
#include "toolcall.h"

#define LOG_PREFIX "hearth: serve: "

enum srv_state { STATE_LOADING, STATE_READY, STATE_DRAINING };

#define SRV_GRAMMAR_CACHE 16

struct srv_server {
    struct srv_config cfg;
    struct http_server *http;
    _Atomic int state;
    const hearth_model *model;
    const hearth_vocab *vocab;
    hearth_engine *engine;
    const hearth_template *tmpl;
    enum srv_tool_format tool_format;
    char *bos_text, *eos_text;
    int32_t n_ctx, n_vocab;
    struct srv_metrics metrics;
    char fingerprint[64];
    time_t created;

    /* the engine's thread */
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t wake_mu;
    pthread_cond_t wake_cv;
    bool wake_pending, quit;

    /* live jobs */
    pthread_mutex_t jobs_mu;
    struct job *jobs;
    int32_t n_jobs;
    _Atomic bool forced_end;  /* drain's grace is over */

    _Atomic uint64_t next_id;
    struct cli_seed_stream seeds; /* of the requests without a seed */

    /* compiled grammars of recent requests, so that requests with the same
     * schema or grammar share its mask cache */
    pthread_mutex_t grammars_mu;
    struct {
        enum srv_grammar kind;
        char *text;
        hearth_grammar *grammar;
    } grammars[SRV_GRAMMAR_CACHE];
    size_t grammars_next;
};

/* ---- text buffers -------------------------------------------------- */


/* A JSON string of bytes that may not be valid UTF-8 (token pieces):
 * each ill-formed byte becomes U+FFFD. */
static json_t *lossy_string(const char *p, size_t n)
{
    if (srv_utf8_valid(p, n)) return json_stringn(p, n);
    struct buf b = {0};
    for (size_t i = 0; i < n;) {
        size_t k = srv_utf8_char_len(p + i, n - i);
        if (k) buf_add(&b, p + i, k);
        else buf_add(&b, "\xef\xbf\xbd", 3);
        i += k ? k : 1;
    }
    json_t *s = json_stringn(b.p ? b.p : "", b.len);
    free(b.p);
    return s;
}

/* ---- jobs ---------------------------------------------------------- */

struct lp_rec {
    hearth_token token;
    float logprob;
    size_t offset;                  /* of its text in the choice's text */
    int32_t n_top;
    hearth_token top[SRV_MAX_TOP_LOGPROBS];
    float top_lp[SRV_MAX_TOP_LOGPROBS];
};

struct choice {
    struct buf text;
    struct lp_rec *lp;
    size_t n_lp, cap_lp, lp_sent;   /* records; those a stream has sent */
    size_t text_bytes;              /* bytes of token pieces so far (text_offset) */
    hearth_finish_reason finish;
    hearth_request_stats stats;
    bool done;
    size_t sent;                    /* a stream reading tool calls: bytes of text sent */
};

struct sub {                        /* one engine request: one prompt */
    struct job *job;
    size_t prompt;
    uint64_t id;
    bool submitted;
};

enum end_reason { END_NONE, END_CLIENT, END_TIMEOUT, END_SHUTDOWN };

struct job {
    struct srv_server *s;
    pthread_mutex_t mu;
    int efd;
    struct srv_request req;
    hearth_token *tokens[SRV_MAX_PROMPTS];   /* each prompt's tokens */
    size_t n_tokens[SRV_MAX_PROMPTS];
    char *echo[SRV_MAX_PROMPTS];             /* completions with echo */
    size_t echo_len[SRV_MAX_PROMPTS];
    struct sub subs[SRV_MAX_PROMPTS];
    size_t n_subs;
    struct choice *choices;
    size_t n_choices, n_open;
    enum { GAUGE_WAITING, GAUGE_RUNNING, GAUGE_NONE } gauge; /* where the job counts in
                                                 hearth_requests_waiting/_running */
    bool stream_closed;                      /* nothing more is sent */
    enum end_reason ended;
    struct buf out;                          /* server-sent events to write */
    size_t out_pos;
    bool http_gone;
    bool failed;                             /* a sample ended in error */
    const char *error_param;                 /* NULL, or the field at fault: the request's own grammar */
    char error[256];
    char id[48];
    time_t created;
    double t0, deadline;
    struct job *next, *prev;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void wake_engine(struct srv_server *s)
{
    pthread_mutex_lock(&s->wake_mu);
    s->wake_pending = true;
    pthread_cond_signal(&s->wake_cv);
    pthread_mutex_unlock(&s->wake_mu);
}

static void job_signal(struct job *j)
{
    uint64_t one = 1;
    ssize_t r = write(j->efd, &one, sizeof one);
    (void)r;
}

/* Free what a job holds; it is in no list. */
static void job_free(struct job *j)
{
    for (size_t i = 0; j->choices && i < j->n_choices; i++) {
        free(j->choices[i].text.p);
        free(j->choices[i].lp);
    }
    free(j->choices);
    for (size_t i = 0; i < SRV_MAX_PROMPTS; i++) {
        free(j->tokens[i]);
        free(j->echo[i]);
    }
    free(j->out.p);
    srv_request_free(&j->req);
    if (j->efd >= 0) close(j->efd);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

/* The job no longer counts in hearth_requests_waiting or _running. */
static void job_leave_gauges(struct job *j)
{
    srv_metrics_requests(&j->s->metrics, j->gauge == GAUGE_RUNNING ? -1 : 0, j->gauge == GAUGE_WAITING ? -1 : 0);
    j->gauge = GAUGE_NONE;
}

/* Take a job out of the server's list and free it. */
static void job_destroy(struct job *j)
{
    struct srv_server *s = j->s;
    pthread_mutex_lock(&s->jobs_mu);
    if (j->prev) j->prev->next = j->next;
    else s->jobs = j->next;
    if (j->next) j->next->prev = j->prev;
    s->n_jobs--;
    pthread_mutex_unlock(&s->jobs_mu);
    job_leave_gauges(j);
    job_free(j);
}

/* Cancel the job's engine requests (job locked). */
static void job_cancel_locked(struct job *j, enum end_reason why)
{
    if (j->ended == END_NONE) j->ended = why;
    for (size_t i = 0; i < j->n_subs; i++)
        if (j->subs[i].submitted) hearth_engine_cancel(j->s->engine, j->subs[i].id);
    wake_engine(j->s);
}

/* ---- JSON pieces of responses --------------------------------------- */

static const char *finish_name(hearth_finish_reason f)
{
    switch (f) {
    case HEARTH_FINISH_STOP:
    case HEARTH_FINISH_EOS: return "stop";
    case HEARTH_FINISH_LENGTH:
    case HEARTH_FINISH_CONTEXT: return "length";
    default: return NULL;
    }
}

static json_t *error_object(const char *message, const char *type, const char *param,
                            const char *code)
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

static json_t *piece_json(const struct srv_server *s, hearth_token t, bool with_bytes, json_t **bytes)
{
    size_t n = 0;
    const char *p = hearth_token_piece(s->vocab, t, 0, &n);
    if (!p) p = "", n = 0;
    if (with_bytes) *bytes = bytes_array(p, n);
    return lossy_string(p, n);
}

/* The chat form of log probabilities of records [from, to). */
static json_t *chat_logprobs(const struct srv_server *s, const struct choice *c, size_t from, size_t to)
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
static json_t *completion_logprobs(const struct srv_server *s, const struct choice *c, size_t from,
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
static void job_usage(const struct job *j, long *prompt, long *cached, long *completion)
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
    json_t *u = json_object();
    if (j->s->cfg.speculation.draft_max > 0) json_object_set_new(u, "hearth_speculation", speculation_json(j));
    json_object_set_new(u, "prompt_tokens", json_integer(prompt));
    json_object_set_new(u, "completion_tokens", json_integer(completion));
    json_object_set_new(u, "total_tokens", json_integer(prompt + completion));
    json_object_set_new(u, "prompt_tokens_details", d);
    return u;
}

static json_t *hearth_json(const struct job *j)
{
    char line[1024];
    hearth_sampler_params_format(&j->req.sampling, line, sizeof line);
    json_t *h = json_object();
    json_object_set_new(h, "seed", json_integer((json_int_t)j->req.sampling.seed));
    json_object_set_new(h, "sampling", json_string(line));
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
    json_object_set_new(o, "model", json_string(s->cfg.alias));
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
        lp = j->req.kind == SRV_CHAT ? chat_logprobs(j->s, c, c->lp_sent, c->n_lp)
                                     : completion_logprobs(j->s, c, c->lp_sent, c->n_lp,
                                                           j->echo_len[ci / (size_t)j->req.n]);
        c->lp_sent = c->n_lp;
    }
    if (j->req.kind == SRV_CHAT) {
        json_t *delta = given ? given : json_object();
        if (role) json_object_set_new(delta, "role", json_string("assistant"));
        if (text) json_object_set_new(delta, "content", json_stringn(text, len));
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

static void emit_chunk(struct job *j, size_t ci, const char *text, size_t len, bool role,
                       const char *finish)
{
    emit_delta(j, ci, text, len, role, finish, NULL);
}

/* ---- tool calls ------------------------------------------------------ */

/* An id for a tool call: Mistral's templates take nine letters and
 * digits and refuse others; the rest get "call_" and 24. */
static void tool_call_id(const struct job *j, char *out, size_t cap)
{
    static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    const bool mistral = j->s->tool_format == SRV_TOOLS_MISTRAL;
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

/* Whether the job's chat output is read for tool calls. */
static bool reads_tool_calls(const struct job *j)
{
    return j->req.kind == SRV_CHAT && j->req.tool_choice != SRV_TOOL_NONE;
}

/* The calls of a choice's text, or false when it is plain content. */
static bool choice_tool_calls(const struct job *j, const struct choice *c, struct srv_tool_calls *tc)
{
    return reads_tool_calls(j) && c->text.len > 0 &&
           srv_tool_calls_parse(j->s->tool_format, c->text.p, c->text.len, tc);
}

/* A stream's text so far: send what cannot be part of a call. */
static void stream_tool_text(struct job *j, size_t ci)
{
    struct choice *c = &j->choices[ci];
    size_t safe = srv_tool_calls_safe_len(j->s->tool_format, c->text.p, c->text.len);
    if (safe > c->sent) {
        emit_chunk(j, ci, c->text.p + c->sent, safe - c->sent, false, NULL);
        c->sent = safe;
    }
}

/* The end of a stream that reads tool calls: the content held back, the
 * calls (each: its id, type and name with empty arguments, then its
 * arguments), and the finish. */
static void stream_tool_end(struct job *j, size_t ci, const char *finish)
{
    struct choice *c = &j->choices[ci];
    struct srv_tool_calls tc;
    if (!choice_tool_calls(j, c, &tc)) {
        if (c->text.len > c->sent) emit_chunk(j, ci, c->text.p + c->sent, c->text.len - c->sent, false, NULL);
        c->sent = c->text.len;
        emit_chunk(j, ci, NULL, 0, false, finish);
        return;
    }
    if (tc.content_len > c->sent) emit_chunk(j, ci, c->text.p + c->sent, tc.content_len - c->sent, false, NULL);
    c->sent = c->text.len;
    for (size_t i = 0; i < tc.n; i++) {
        char id[40];
        tool_call_id(j, id, sizeof id);
        json_t *call = json_pack("{s:I, s:s, s:s, s:{s:s, s:s}}", "index", (json_int_t)i, "id", id, "type",
                                 "function", "function", "name", tc.calls[i].name, "arguments", "");
        emit_delta(j, ci, NULL, 0, false, NULL, json_pack("{s:[o]}", "tool_calls", call));
        call = json_pack("{s:I, s:{s:s}}", "index", (json_int_t)i, "function", "arguments", tc.calls[i].arguments);
        emit_delta(j, ci, NULL, 0, false, NULL, json_pack("{s:[o]}", "tool_calls", call));
    }
    srv_tool_calls_free(&tc);
    emit_chunk(j, ci, NULL, 0, false, "tool_calls");
}

/* The end of a stream: the usage chunk when asked, then [DONE]. */
static void emit_end(struct job *j)
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

static void emit_error(struct job *j, const char *message, const char *type, const char *code,
                       const char *param)
{
    emit(j, error_object(message, type, param, code));
    emit_end(j);
}

/* ---- the engine's side ---------------------------------------------- */

static void log_probs(const struct srv_server *s, const float *logits, hearth_token token,
                      int32_t n_top, struct lp_rec *r)
{
    const int32_t V = s->n_vocab;
    float mx = -INFINITY;
    for (int32_t i = 0; i < V; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (int32_t i = 0; i < V; i++) sum += exp((double)logits[i] - mx);
    const double lse = mx + log(sum);
    r->token = token;
    r->logprob = (float)(logits[token] - lse);
    r->n_top = 0;
    /* the n_top largest, by decreasing logit then increasing id */
    for (int32_t i = 0; i < V && n_top > 0; i++) {
        float l = logits[i];
        int32_t k = r->n_top;
        if (k == n_top && !(l > logits[r->top[k - 1]])) continue;
        if (k < n_top) r->n_top++;
        else k--;
        while (k > 0 && l > logits[r->top[k - 1]]) {
            r->top[k] = r->top[k - 1];
            k--;
        }
        r->top[k] = i;
    }
    for (int32_t k = 0; k < r->n_top; k++) r->top_lp[k] = (float)(logits[r->top[k]] - lse);
}

static enum srv_outcome outcome_of(const struct job *j, hearth_finish_reason f)
{
    switch (f) {
    case HEARTH_FINISH_STOP:
    case HEARTH_FINISH_EOS: return SRV_OUT_STOP;
    case HEARTH_FINISH_LENGTH:
    case HEARTH_FINISH_CONTEXT: return SRV_OUT_LENGTH;
    case HEARTH_FINISH_CANCELLED: return j->ended == END_TIMEOUT ? SRV_OUT_TIMEOUT : SRV_OUT_CANCELLED;
    default: return SRV_OUT_ERROR;
    }
}

static void on_event(void *user, const hearth_event *ev)
{
    struct sub *sub = user;
    struct job *j = sub->job;
    struct srv_server *s = j->s;
    pthread_mutex_lock(&j->mu);
    if (j->gauge == GAUGE_WAITING && ev->finish == HEARTH_FINISH_NONE) {
        j->gauge = GAUGE_RUNNING;
        srv_metrics_requests(&s->metrics, 1, -1);
    }
    const size_t ci = sub->prompt * (size_t)j->req.n + (size_t)ev->index;
    struct choice *c = &j->choices[ci];
    bool wake = j->req.stream;
    if (ev->finish == HEARTH_FINISH_NONE && ev->token >= 0 && j->req.logprobs && ev->logits) {
        if (c->n_lp == c->cap_lp) {
            size_t cap = c->cap_lp ? c->cap_lp * 2 : 16;
            struct lp_rec *p = realloc(c->lp, cap * sizeof *p);
            if (p) c->lp = p, c->cap_lp = cap;
        }
        if (c->n_lp < c->cap_lp) {
            log_probs(s, ev->logits, ev->token, j->req.top_logprobs, &c->lp[c->n_lp]);
            c->lp[c->n_lp++].offset = c->text_bytes;
        }
    }
    if (ev->len > 0) {
        if (j->req.stream && reads_tool_calls(j)) {
            buf_add(&c->text, ev->text, ev->len);
            if (!j->stream_closed) stream_tool_text(j, ci);
        } else if (j->req.stream) {
            if (!j->stream_closed) emit_chunk(j, ci, ev->text, ev->len, false, NULL);
        } else {
            buf_add(&c->text, ev->text, ev->len);
        }
    }
    if (ev->token >= 0 && ev->finish == HEARTH_FINISH_NONE) {
        size_t n = 0;
        hearth_token_piece(s->vocab, ev->token, 0, &n);
        c->text_bytes += n;
    }
    if (ev->finish != HEARTH_FINISH_NONE) {
        c->done = true;
        c->finish = ev->finish;
        if (ev->stats) c->stats = *ev->stats;
        j->n_open--;
        /* Every sample has ended (all were submitted before the first
         * event): the job leaves the gauges now, not when its handler
         * exits, so a request cancelled in the queue never counts as
         * running and a finished one no longer does. */
        if (j->n_open == 0) job_leave_gauges(j);
        wake = true;
        srv_metrics_sample(&s->metrics, outcome_of(j, ev->finish), ev->stats);
        if (ev->finish == HEARTH_FINISH_ERROR && !j->failed) {
            j->failed = true;
            /* the library's message, as hearth run prints it */
            const char *why = hearth_last_error();
            snprintf(j->error, sizeof j->error, "%s", why && *why ? why : hearth_strerror(ev->status));
            /* A grammar that only grows too ambiguous for the matcher
             * after some output is the request's fault, not the
             * server's: it is named as when it is refused at the start. */
            if (ev->status == HEARTH_E_RANGE) j->error_param = srv_request_grammar_param(&j->req);
        }
        if (j->req.stream && !j->stream_closed) {
            if (j->failed) {
                if (j->error_param) emit_error(j, j->error, "invalid_request_error", "invalid_value", j->error_param);
                else emit_error(j, j->error, "server_error", "generation_failed", NULL);
            } else if (finish_name(ev->finish)) {
                if (reads_tool_calls(j)) stream_tool_end(j, ci, finish_name(ev->finish));
                else emit_chunk(j, ci, NULL, 0, false, finish_name(ev->finish));
                if (j->n_open == 0) emit_end(j);
            }
        }
    }
    /* signalled under the lock: once it is released, the connection may
     * let go of the job and the job be freed */
    if (wake) job_signal(j);
    bool last = j->n_open == 0 && j->http_gone;
    pthread_mutex_unlock(&j->mu);
    if (last) job_destroy(j);
}

static void *engine_main(void *arg)
{
    struct srv_server *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->wake_mu);
        bool quit = s->quit;
        s->wake_pending = false;
        pthread_mutex_unlock(&s->wake_mu);
        if (quit) break;
        bool did = false;
        hearth_status st = hearth_engine_step(s->engine, &did);
        if (st) fprintf(stderr, LOG_PREFIX "a step failed: %s\n", hearth_last_error());
        if (!did) {
            pthread_mutex_lock(&s->wake_mu);
            while (!s->wake_pending && !s->quit) pthread_cond_wait(&s->wake_cv, &s->wake_mu);
            pthread_mutex_unlock(&s->wake_mu);
        }
    }
    return NULL;
}

/* ---- connections ---------------------------------------------------- */

enum route { R_NONE, R_HEALTH, R_MODELS, R_METRICS, R_CHAT, R_COMPLETIONS, R_TOKENIZE, R_DETOKENIZE };

struct conn {
    struct srv_server *s;
    enum route route;
    uint64_t rid;
    char method[16];
    char path[96];
    struct buf body;    /* the exchange's (not owned) */
    bool responded;
    int status;
    struct http_exchange *x;
    double t0;
    struct job *job;
    bool stream;        /* the request asked for a stream */
    char user[72];      /* the request's user field, printable ASCII only */
};

/* A stream's content type and headers. */
#define SSE_TYPE "text/event-stream"
#define SSE_HEADERS "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n"

static bool route_is_get(enum route r)
{
    return r == R_HEALTH || r == R_MODELS || r == R_METRICS;
}

/* Send a response of len bytes of text (malloc'ed; taken over).  When
 * the response has already begun (a client's half-close made it start
 * early, see job_wait), the text is its rest: a status other than 200
 * can then only end it incomplete. */
static bool send_body(struct conn *cn, struct http_exchange *c, int status, char *text, size_t len,
                      const char *content_type, const char *retry_after)
{
    char extra[160] = "";
    if (retry_after) snprintf(extra, sizeof extra, "Retry-After: %s\r\n", retry_after);
    if (status == 405)
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), "Allow: %s\r\n",
                 route_is_get(cn->route) ? "GET" : "POST");
    if (status == 401) snprintf(extra + strlen(extra), sizeof extra - strlen(extra), "WWW-Authenticate: Bearer\r\n");
    bool ok;
    if (http_started(c)) {
        ok = status == 200 && http_stream_write(c, text, len);
        http_stream_end(c, ok);
    } else {
        ok = http_respond(c, status, content_type, extra, text, len);
    }
    free(text);
    cn->status = ok ? status : 499;
    cn->responded = true;
    return ok;
}

static bool send_json(struct conn *cn, struct http_exchange *c, int status, json_t *o,
                                 const char *retry_after)
{
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text) return false;
    return send_body(cn, c, status, text, strlen(text), "application/json", retry_after);
}

static bool send_error(struct conn *cn, struct http_exchange *c, int status,
                                  const char *type, const char *code, const char *param,
                                  const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 7, 8)))
#endif
    ;

static bool send_error(struct conn *cn, struct http_exchange *c, int status,
                                  const char *type, const char *code, const char *param,
                                  const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return send_json(cn, c, status, error_object(msg, type, param, code),
                     status == 429 || status == 503 ? "1" : NULL);
}

static bool send_srv_error(struct conn *cn, struct http_exchange *c,
                                      const struct srv_error *e)
{
    return send_json(cn, c, e->status, error_object(e->message, e->type, e->param, e->code),
                     e->status == 429 || e->status == 503 ? "1" : NULL);
}

static enum route route_of(const char *url)
{
    static const struct {
        const char *path;
        enum route r;
    } table[] = {
        {"/health", R_HEALTH},
        {"/v1/health", R_HEALTH},
        {"/v1/models", R_MODELS},
        {"/models", R_MODELS},
        {"/metrics", R_METRICS},
        {"/v1/chat/completions", R_CHAT},
        {"/chat/completions", R_CHAT},
        {"/v1/completions", R_COMPLETIONS},
        {"/completions", R_COMPLETIONS},
        {"/tokenize", R_TOKENIZE},
        {"/detokenize", R_DETOKENIZE},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(url, table[i].path) == 0) return table[i].r;
    return R_NONE;
}

/* Constant-time comparison of the bearer token with every key. */
static bool authorized(const struct srv_server *s, struct http_exchange *c)
{
    if (s->cfg.n_api_keys == 0) return true;
    const char *h = http_request_header(c, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) return false;
    const char *tok = h + 7;
    while (*tok == ' ') tok++;
    const size_t tn = strlen(tok);
    unsigned ok = 0;
    for (size_t k = 0; k < s->cfg.n_api_keys; k++) {
        const char *key = s->cfg.api_keys[k];
        const size_t kn = strlen(key);
        unsigned diff = (unsigned)(kn ^ tn);
        const size_t n = kn > tn ? kn : tn;
        for (size_t i = 0; i < n; i++) {
            unsigned char a = i < kn ? (unsigned char)key[i] : 0;
            unsigned char b = i < tn ? (unsigned char)tok[i] : 0;
            diff |= (unsigned)(a ^ b);
        }
        ok |= diff == 0;
    }
    return ok != 0;
}

static bool handle_health(struct conn *cn, struct http_exchange *c)
{
    const int st = cn->s->state;
    const char *status = st == STATE_READY ? "ok" : st == STATE_LOADING ? "loading" : "draining";
    json_t *o = json_object();
    json_object_set_new(o, "status", json_string(status));
    return send_json(cn, c, st == STATE_READY ? 200 : 503, o, st == STATE_READY ? NULL : "1");
}

static bool handle_models(struct conn *cn, struct http_exchange *c)
{
    const struct srv_server *s = cn->s;
    json_t *m = json_object();
    json_object_set_new(m, "id", json_string(s->cfg.alias));
    json_object_set_new(m, "object", json_string("model"));
    json_object_set_new(m, "created", json_integer((json_int_t)s->created));
    json_object_set_new(m, "owned_by", json_string("hearth"));
    json_t *meta = json_object();
    json_object_set_new(meta, "description", json_string(hearth_model_desc(s->model)));
    json_object_set_new(meta, "n_ctx", json_integer(s->n_ctx));
    json_object_set_new(meta, "n_ctx_train", json_integer(hearth_model_n_ctx_train(s->model)));
    json_object_set_new(meta, "n_vocab", json_integer(s->n_vocab));
    json_object_set_new(meta, "n_params", json_integer((json_int_t)hearth_model_n_params(s->model)));
    json_object_set_new(meta, "size", json_integer((json_int_t)hearth_model_size_bytes(s->model)));
    json_object_set_new(m, "meta", meta);
    json_t *data = json_array();
    json_array_append_new(data, m);
    json_t *o = json_object();
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", data);
    return send_json(cn, c, 200, o, NULL);
}

static bool handle_metrics(struct conn *cn, struct http_exchange *c)
{
    hearth_engine_stats es;
    hearth_engine_get_stats(cn->s->engine, &es);
    size_t len;
    char *text = srv_metrics_render(&cn->s->metrics, &es, &len);
    if (!text) return false;
    return send_body(cn, c, 200, text, len, "text/plain; version=0.0.4", NULL);
}

static bool handle_tokenize(struct conn *cn, struct http_exchange *c)
{
    struct srv_tokenize t;
    struct srv_error e;
    if (!srv_tokenize_parse(cn->body.p, cn->body.len, &t, &e)) return send_srv_error(cn, c, &e);
    hearth_token *ids = NULL;
    size_t n = 0;
    unsigned flags = (t.add_special ? HEARTH_TOKENIZE_ADD_SPECIAL : 0) |
                     (t.parse_special ? HEARTH_TOKENIZE_PARSE_SPECIAL : 0);
    hearth_status st = hearth_tokenize_alloc(cn->s->vocab, t.content, t.len, flags, &ids, &n);
    const bool with_pieces = t.with_pieces;
    srv_tokenize_free(&t);
    if (st)
        return send_error(cn, c, st == HEARTH_E_NOMEM ? 500 : 400, "invalid_request_error", NULL,
                          "content", "tokenization failed: %s", hearth_last_error());
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        if (with_pieces) {
            json_t *p = json_object();
            json_object_set_new(p, "id", json_integer(ids[i]));
            json_object_set_new(p, "piece", piece_json(cn->s, ids[i], false, NULL));
            json_array_append_new(a, p);
        } else {
            json_array_append_new(a, json_integer(ids[i]));
        }
    }
    hearth_free(ids);
    json_t *o = json_object();
    json_object_set_new(o, "tokens", a);
    return send_json(cn, c, 200, o, NULL);
}

static bool handle_detokenize(struct conn *cn, struct http_exchange *c)
{
    struct srv_detokenize d;
    struct srv_error e;
    if (!srv_detokenize_parse(cn->body.p, cn->body.len, cn->s->n_vocab, &d, &e))
        return send_srv_error(cn, c, &e);
    char *text;
    size_t len;
    hearth_status st = hearth_detokenize_alloc(cn->s->vocab, d.tokens, d.n_tokens, 0, &text, &len);
    srv_detokenize_free(&d);
    if (st)
        return send_error(cn, c, 500, "server_error", NULL, NULL, "detokenization failed: %s",
                          hearth_last_error());
    json_t *o = json_object();
    json_object_set_new(o, "content", lossy_string(text, len));
    hearth_free(text);
    return send_json(cn, c, 200, o, NULL);
}

/* The prompt of a chat request: render the template, tokenize. */
static bool chat_tokens(struct srv_server *s, struct job *j, struct srv_error *e)
{
    if (!s->tmpl)
        return srv_fail(e, 400, "invalid_request_error", "no_chat_template", "messages",
                        "the model has no chat template; start the server with --chat-template");
    hearth_chat_options opts;
    memset(&opts, 0, sizeof opts);
    opts.add_generation_prompt = true;
    opts.bos_token = s->bos_text;
    opts.eos_token = s->eos_text;
    opts.tools_json = j->req.tools_json;
    char *text;
    size_t len;
    hearth_status st = hearth_template_render(s->tmpl, j->req.messages_json,
                                              strlen(j->req.messages_json), &opts, &text, &len);
    if (st)
        return srv_fail(e, st == HEARTH_E_NOMEM ? 500 : 400, st == HEARTH_E_NOMEM ? "server_error"
                        : "invalid_request_error", "template_error", "messages",
                        "the chat template failed on these messages: %s", hearth_last_error());
    if (opts.tools_json && strcmp(opts.tools_json, "[]") != 0) {
        /* a template that does not write the tools into the prompt renders
         * the same text without them: the model would never see them */
        char *bare;
        size_t bare_len;
        opts.tools_json = NULL;
        st = hearth_template_render(s->tmpl, j->req.messages_json, strlen(j->req.messages_json),
                                    &opts, &bare, &bare_len);
        bool ignored = !st && bare_len == len && memcmp(bare, text, len) == 0;
        if (!st) hearth_free(bare);
        if (ignored) {
            hearth_free(text);
            return srv_fail(e, 400, "invalid_request_error", "invalid_value", "tools",
                            "the chat template does not render tools, so the model would not see "
                            "them; start the server with a --chat-template that does");
        }
    }
    st = hearth_tokenize_alloc(s->vocab, text, len, chat_prompt_tokenize_flags(s->bos_text, text, len),
                               &j->tokens[0], &j->n_tokens[0]);
    hearth_free(text);
    if (st) return srv_fail(e, 500, "server_error", NULL, NULL, "tokenization failed: %s", hearth_last_error());
    return true;
}

static bool completion_tokens(struct srv_server *s, struct job *j, size_t i, struct srv_error *e)
{
    struct srv_prompt *p = &j->req.prompts[i];
    if (p->tokens) {
        j->tokens[i] = p->tokens;
        j->n_tokens[i] = p->n_tokens;
        p->tokens = NULL;
        if (j->req.echo) {
            char *text;
            size_t len;
            if (hearth_detokenize_alloc(s->vocab, j->tokens[i], j->n_tokens[i], 0, &text, &len))
                return srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
            /* the echo must be UTF-8: whole characters only */
            json_t *t = lossy_string(text, len);
            hearth_free(text);
            j->echo[i] = t ? strdup(json_string_value(t)) : NULL;
            j->echo_len[i] = j->echo[i] ? strlen(j->echo[i]) : 0;
            json_decref(t);
        }
        return true;
    }
    hearth_status st = hearth_tokenize_alloc(s->vocab, p->text, p->len,
                                             HEARTH_TOKENIZE_ADD_SPECIAL | HEARTH_TOKENIZE_PARSE_SPECIAL,
                                             &j->tokens[i], &j->n_tokens[i]);
    if (st) return srv_fail(e, 500, "server_error", NULL, NULL, "tokenization failed: %s", hearth_last_error());
    if (j->req.echo) {
        j->echo[i] = p->text;
        j->echo_len[i] = p->len;
        p->text = NULL;
    }
    return true;
}

static void random_bytes(void *p, size_t n)
{
    if (getrandom(p, n, 0) != (ssize_t)n) {
        uint64_t x = (uint64_t)time(NULL) ^ (uint64_t)now_s() * 1000003u;
        memcpy(p, &x, n < sizeof x ? n : sizeof x);
    }
}

/* Whether the client of an exchange has gone, from poll()'s revents for
 * http_watch_fd(x).  A reset or a hang-up says so; a shut-down sending
 * side (POLLRDHUP) may be a client that closed its socket or one that
 * only half-closed and still reads, so the response starts at once (a
 * comment line in a stream that has begun; else the head of a 200 of
 * content_type): a closed socket answers that with a reset, seen at the
 * next poll, and a half-closed client reads its response as it comes. */
static bool peer_gone(struct http_exchange *x, short revents, bool stream)
{
    if (revents & (POLLHUP | POLLERR | POLLNVAL)) return true;
    if (!(revents & POLLRDHUP)) return false;
    static const char comment[] = ": the client has half-closed the connection\n\n";
    http_peer_half_closed(x);
    if (http_started(x)) return !http_stream_write(x, comment, sizeof comment - 1);
    return !(stream ? http_stream_begin(x, 200, SSE_TYPE, SSE_HEADERS)
                    : http_stream_begin(x, 200, "application/json", NULL));
}

/* The grammar compiler's cancellation callback: the client of the
 * connection has gone, so nobody waits for the work. */
static int client_gone(void *arg)
{
    struct conn *cn = arg;
    struct pollfd p = {http_watch_fd(cn->x), http_watch_events(cn->x), 0};
    return poll(&p, 1, 0) > 0 && peer_gone(cn->x, p.revents, cn->stream);
}

/* The compiled grammar of a request (a new reference), from the cache or
 * compiled now (stopped when the client of cn hangs up); false with a 400
 * when it does not compile. */
static bool request_grammar(struct srv_server *s, struct srv_request *r, struct conn *cn,
                            struct srv_error *e)
{
    const char *text = r->grammar_text ? r->grammar_text : "";
    pthread_mutex_lock(&s->grammars_mu);
    for (size_t i = 0; i < SRV_GRAMMAR_CACHE; i++)
        if (s->grammars[i].grammar && s->grammars[i].kind == r->grammar &&
            strcmp(s->grammars[i].text, text) == 0) {
            r->sampling.grammar = hearth_grammar_ref(s->grammars[i].grammar);
            pthread_mutex_unlock(&s->grammars_mu);
            return true;
        }
    pthread_mutex_unlock(&s->grammars_mu);
    hearth_grammar *g = NULL;
    cn->stream = r->stream;
    hearth_grammar_options opt = {client_gone, cn};
    hearth_grammar_syntax syntax = r->grammar == SRV_GRAMMAR_JSON_OBJECT   ? HEARTH_GRAMMAR_JSON_OBJECT
                                   : r->grammar == SRV_GRAMMAR_JSON_SCHEMA ? HEARTH_GRAMMAR_JSON_SCHEMA
                                                                           : HEARTH_GRAMMAR_GBNF;
    hearth_status st = hearth_grammar_compile(s->vocab, syntax, text, strlen(text), &opt, &g);
    if (st) {
        srv_fail(e, st == HEARTH_E_NOMEM ? 500 : 400,
                 st == HEARTH_E_NOMEM ? "server_error" : "invalid_request_error", "invalid_value",
                 srv_request_grammar_param(r), "%s", hearth_last_error());
        return false;
    }
    r->sampling.grammar = g;
    char *copy = strdup(text);
    if (copy) {
        pthread_mutex_lock(&s->grammars_mu);
        size_t i = s->grammars_next++ % SRV_GRAMMAR_CACHE;
        hearth_grammar_free(s->grammars[i].grammar);
        free(s->grammars[i].text);
        s->grammars[i].kind = r->grammar;
        s->grammars[i].text = copy;
        s->grammars[i].grammar = hearth_grammar_ref(g);
        pthread_mutex_unlock(&s->grammars_mu);
    }
    return true;
}

/* Check, tokenize and submit a generation request; NULL with *e set when
 * it is refused. */
static struct job *job_start(struct conn *cn, enum srv_kind kind, struct srv_error *e)
{
    struct srv_server *s = cn->s;
    struct job *j = calloc(1, sizeof *j);
    if (!j) {
        srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        return NULL;
    }
    j->s = s;
    j->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&j->mu, NULL);
    struct srv_limits lim = {s->n_vocab, s->cfg.max_tokens_cap, &s->cfg.sampling};
    if (j->efd < 0) {
        srv_fail(e, 500, "server_error", NULL, NULL, "eventfd: %s", strerror(errno));
        goto fail_early;
    }
    if (!srv_request_parse(kind, cn->body.p, cn->body.len, &lim, &j->req, e)) goto fail_early;
    if (j->req.tool_choice == SRV_TOOL_REQUIRED || j->req.tool_choice == SRV_TOOL_NAMED) {
        /* the whole output is one call in the template's format */
        char why[400];
        if (!srv_tool_calls_grammar(s->tool_format, j->req.tools_json, j->req.tool_name,
                                    &j->req.grammar_text, why, sizeof why)) {
            srv_fail(e, 400, "invalid_request_error", "invalid_value", "tools",
                     "the tools cannot be turned into a grammar for tool_choice: %s", why);
            goto fail_early;
        }
        j->req.grammar = SRV_GRAMMAR_GBNF;
    }
    if (j->req.grammar != SRV_GRAMMAR_NONE && !request_grammar(s, &j->req, cn, e)) goto fail_early;
    /* whether a seed was given is the request's own: the server's
     * sampling defaults never carry one */
    if (!j->req.seed_given) j->req.sampling.seed = cli_seed_stream_next(&s->seeds);
    size_t n_prompts = kind == SRV_CHAT ? 1 : j->req.n_prompts;
    for (size_t i = 0; i < n_prompts; i++) {
        if (!(kind == SRV_CHAT ? chat_tokens(s, j, e) : completion_tokens(s, j, i, e))) goto fail_early;
        if (j->n_tokens[i] == 0) {
            srv_fail(e, 400, "invalid_request_error", "invalid_value", kind == SRV_CHAT ? "messages" : "prompt",
                     "the prompt is empty (it has no tokens)");
            goto fail_early;
        }
        if (j->n_tokens[i] >= (size_t)s->n_ctx) {
            srv_fail(e, 400, "invalid_request_error", "context_length_exceeded",
                     kind == SRV_CHAT ? "messages" : "prompt",
                     "this model's maximum context length is %d tokens, but the prompt has %zu tokens "
                     "(at least one more is needed for the reply)", s->n_ctx, j->n_tokens[i]);
            goto fail_early;
        }
    }
    if ((int32_t)(n_prompts * (size_t)j->req.n) > s->cfg.parallel) {
        srv_fail(e, 400, "invalid_request_error", "invalid_value", "n",
                 "the request asks for %zu sequences (%zu prompts x n = %d) but the server runs at most "
                 "%d at once (--parallel)", n_prompts * (size_t)j->req.n, n_prompts, j->req.n, s->cfg.parallel);
        goto fail_early;
    }
    j->n_choices = n_prompts * (size_t)j->req.n;
    j->choices = calloc(j->n_choices, sizeof *j->choices);
    if (!j->choices) {
        srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        goto fail_early;
    }
    uint64_t idn = atomic_fetch_add(&s->next_id, 1);
    uint32_t rnd;
    random_bytes(&rnd, sizeof rnd);
    snprintf(j->id, sizeof j->id, "%s-%08x%016llx", kind == SRV_CHAT ? "chatcmpl" : "cmpl", rnd,
             (unsigned long long)idn);
    j->created = time(NULL);
    j->t0 = cn->t0;
    j->deadline = s->cfg.timeout_s > 0 ? cn->t0 + s->cfg.timeout_s : INFINITY;

    /* the queue's bound, and the job's place in the list */
    pthread_mutex_lock(&s->jobs_mu);
    if (s->state != STATE_READY) {
        pthread_mutex_unlock(&s->jobs_mu);
        srv_fail(e, 503, "server_error", "shutting_down", NULL, "the server is shutting down");
        goto fail_early;
    }
    if (s->n_jobs >= s->cfg.parallel + s->cfg.max_queue) {
        int32_t n = s->n_jobs;
        pthread_mutex_unlock(&s->jobs_mu);
        srv_fail(e, 429, "rate_limit_error", "queue_full", NULL,
                 "the server is busy: %d requests are running or waiting (--parallel %d, --max-queue %d); "
                 "retry later", n, s->cfg.parallel, s->cfg.max_queue);
        goto fail_early;
    }
    j->next = s->jobs;
    if (s->jobs) s->jobs->prev = j;
    s->jobs = j;
    s->n_jobs++;
    pthread_mutex_unlock(&s->jobs_mu);
    srv_metrics_requests(&s->metrics, 0, 1);

    /* a stream's first chunks, before any token */
    pthread_mutex_lock(&j->mu);
    if (j->req.stream)
        for (size_t ci = 0; ci < j->n_choices; ci++) {
            if (kind == SRV_CHAT) emit_chunk(j, ci, "", 0, true, NULL);
            else if (j->req.echo) emit_chunk(j, ci, j->echo[ci / (size_t)j->req.n],
                                             j->echo_len[ci / (size_t)j->req.n], false, NULL);
        }
    for (size_t i = 0; i < n_prompts; i++) {
        hearth_request q;
        hearth_request_default(&q);
        q.prompt = j->tokens[i];
        q.n_prompt = j->n_tokens[i];
        q.sampling = j->req.sampling;
        q.speculation = s->cfg.speculation;
        q.stop = (const char *const *)j->req.stop;
        q.n_stop = j->req.n_stop;
        q.max_tokens = j->req.max_tokens > 0 ? j->req.max_tokens : s->cfg.max_tokens_cap;
        q.n = j->req.n;
        q.ignore_eos = j->req.ignore_eos;
        q.decode_flags = kind == SRV_CHAT ? 0 : HEARTH_DECODE_CONTINUATION;
        /* the formats' markers may be control tokens ([TOOL_CALLS]) */
        if (reads_tool_calls(j)) q.decode_flags |= HEARTH_DECODE_SPECIAL;
        q.on_event = on_event;
        j->subs[i].job = j;
        j->subs[i].prompt = i;
        q.user = &j->subs[i];
        hearth_status st = hearth_engine_submit(s->engine, &q, &j->subs[i].id);
        if (st) {
            /* The prompt's length was checked above and the pool holds a
             * whole context (hearth serve refuses a smaller one), so what
             * the engine still refuses is the sampling: the grammar's
             * first state, or a value checked there alone. */
            srv_fail(e, st == HEARTH_E_NOMEM ? 500 : 400, st == HEARTH_E_NOMEM ? "server_error"
                     : "invalid_request_error", st == HEARTH_E_NOMEM ? NULL : "invalid_value",
                     srv_request_grammar_param(&j->req), "%s", hearth_last_error());
            /* those already submitted end with cancelled events */
            job_cancel_locked(j, END_CLIENT);
            j->http_gone = true;
            bool last = j->n_open == 0;
            pthread_mutex_unlock(&j->mu);
            if (last) job_destroy(j);
            return NULL;
        }
        j->subs[i].submitted = true;
        j->n_subs = i + 1;
        j->n_open += (size_t)j->req.n;
    }
    pthread_mutex_unlock(&j->mu);
    wake_engine(s);
    return j;

fail_early:
    job_free(j);
    return NULL;
}

enum wait_result { W_EVENT, W_GONE, W_TIMEOUT, W_SHUTDOWN };

/* Wait for the job's next event, the client's hang-up, the deadline or
 * the end of the drain (job unlocked).  A half-close starts the
 * response (see the top of this file); only a reset, a hang-up or a
 * failed write mean the client is gone. */
static enum wait_result job_wait(struct job *j, struct http_exchange *x)
{
    for (;;) {
        if (j->s->forced_end) return W_SHUTDOWN;
        double left = j->deadline - now_s();
        if (left <= 0) return W_TIMEOUT;
        int ms = left > 0.25 ? 250 : (int)(left * 1000) + 1;
        struct pollfd p[2] = {{j->efd, POLLIN, 0}, {http_watch_fd(x), http_watch_events(x), 0}};
        int r = poll(p, 2, ms);
        if (r < 0 && errno != EINTR) return W_GONE;
        if (r <= 0) continue;
        if (peer_gone(x, p[1].revents, false)) return W_GONE;
        if (p[0].revents & POLLIN) {
            uint64_t v;
            ssize_t n = read(j->efd, &v, sizeof v);
            (void)n;
            return W_EVENT;
        }
    }
}

/* Write a stream's events as the engine makes them, until it ends or
 * the client goes; false: the client went. */
static bool stream_job(struct conn *cn)
{
    struct job *j = cn->job;
    pthread_mutex_lock(&j->mu);
    for (;;) {
        if (j->out.len > j->out_pos) {
            /* written unlocked: a slow client must not hold up the engine */
            struct buf out = j->out;
            size_t from = j->out_pos;
            memset(&j->out, 0, sizeof j->out);
            j->out_pos = 0;
            pthread_mutex_unlock(&j->mu);
            bool ok = http_stream_write(cn->x, out.p + from, out.len - from);
            free(out.p);
            pthread_mutex_lock(&j->mu);
            if (!ok) {
                job_cancel_locked(j, END_CLIENT);
                j->stream_closed = true;
                pthread_mutex_unlock(&j->mu);
                return false;
            }
            continue;
        }
        if (j->stream_closed) {
            pthread_mutex_unlock(&j->mu);
            return true;
        }
        pthread_mutex_unlock(&j->mu);
        enum wait_result w = job_wait(j, cn->x);
        pthread_mutex_lock(&j->mu);
        if (w == W_GONE) {
            job_cancel_locked(j, END_CLIENT);
            j->stream_closed = true;
            pthread_mutex_unlock(&j->mu);
            return false;
        }
        if ((w == W_TIMEOUT || w == W_SHUTDOWN) && !j->stream_closed) {
            job_cancel_locked(j, w == W_TIMEOUT ? END_TIMEOUT : END_SHUTDOWN);
            char msg[160];
            if (w == W_TIMEOUT)
                snprintf(msg, sizeof msg, "the request ran past its deadline of %g s (--timeout)",
                         j->s->cfg.timeout_s);
            else
                snprintf(msg, sizeof msg, "the server is shutting down");
            emit_error(j, msg, w == W_TIMEOUT ? "timeout_error" : "server_error",
                       w == W_TIMEOUT ? "timeout" : "shutting_down", NULL);
        }
    }
}

/* The whole answer of a request that does not stream. */
static json_t *final_response(struct job *j)
{
    json_t *o = envelope(j, false);
    json_t *choices = json_array();
    for (size_t ci = 0; ci < j->n_choices; ci++) {
        struct choice *c = &j->choices[ci];
        json_t *ch = json_object();
        json_object_set_new(ch, "index", json_integer((json_int_t)ci));
        const char *text = c->text.p ? c->text.p : "";
        const char *f = finish_name(c->finish);
        struct srv_tool_calls tc;
        if (j->req.kind == SRV_CHAT && choice_tool_calls(j, c, &tc)) {
            json_t *m = json_object(), *calls = json_array();
            json_object_set_new(m, "role", json_string("assistant"));
            json_object_set_new(m, "content", tc.content_len ? json_stringn(text, tc.content_len) : json_null());
            for (size_t i = 0; i < tc.n; i++) {
                char id[40];
                tool_call_id(j, id, sizeof id);
                json_array_append_new(calls, json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id, "type", "function",
                                                       "function", "name", tc.calls[i].name, "arguments",
                                                       tc.calls[i].arguments));
            }
            srv_tool_calls_free(&tc);
            json_object_set_new(m, "tool_calls", calls);
            json_object_set_new(ch, "message", m);
            json_object_set_new(ch, "logprobs", j->req.logprobs ? chat_logprobs(j->s, c, 0, c->n_lp) : json_null());
            f = "tool_calls";
        } else if (j->req.kind == SRV_CHAT) {
            json_t *m = json_object();
            json_object_set_new(m, "role", json_string("assistant"));
            json_object_set_new(m, "content", json_stringn(text, c->text.len));
            json_object_set_new(ch, "message", m);
            json_object_set_new(ch, "logprobs", j->req.logprobs ? chat_logprobs(j->s, c, 0, c->n_lp) : json_null());
        } else {
            size_t p = ci / (size_t)j->req.n;
            struct buf t = {0};
            if (j->echo[p]) buf_add(&t, j->echo[p], j->echo_len[p]);
            buf_add(&t, text, c->text.len);
            json_object_set_new(ch, "text", json_stringn(t.p ? t.p : "", t.len));
            free(t.p);
            json_object_set_new(ch, "logprobs",
                                j->req.logprobs ? completion_logprobs(j->s, c, 0, c->n_lp, j->echo_len[p])
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

static bool handle_generate(struct conn *cn, struct http_exchange *c, enum srv_kind kind)
{
    struct srv_error e;
    struct job *j = job_start(cn, kind, &e);
    if (!j) return send_srv_error(cn, c, &e);
    cn->job = j;
    if (j->req.user) {
        /* for the access log: printable ASCII, no spaces, at most 64 bytes */
        size_t k = 0;
        for (const char *u = j->req.user; *u && k < 64; u++)
            cn->user[k++] = (*u > ' ' && *u < 127) ? *u : '_';
        cn->user[k] = '\0';
    }
    if (j->req.stream) {
        cn->responded = true;
        /* begun already where the client half-closed while its grammar compiled */
        bool ok = (http_started(c) || http_stream_begin(c, 200, SSE_TYPE, SSE_HEADERS)) && stream_job(cn);
        http_stream_end(c, ok);
        cn->status = ok ? 200 : 499;
        return ok;
    }
    pthread_mutex_lock(&j->mu);
    while (j->n_open > 0) {
        pthread_mutex_unlock(&j->mu);
        enum wait_result w = job_wait(j, cn->x);
        pthread_mutex_lock(&j->mu);
        if (w == W_EVENT) continue;
        job_cancel_locked(j, w == W_GONE ? END_CLIENT : w == W_TIMEOUT ? END_TIMEOUT : END_SHUTDOWN);
        pthread_mutex_unlock(&j->mu);
        if (w == W_GONE) {
            cn->status = 499;
            cn->responded = true;
            http_stream_end(c, false);
            return false;
        }
        if (w == W_TIMEOUT)
            return send_error(cn, c, 504, "timeout_error", "timeout", NULL,
                              "the request ran past its deadline of %g s (--timeout)", cn->s->cfg.timeout_s);
        return send_error(cn, c, 503, "server_error", "shutting_down", NULL, "the server is shutting down");
    }
    bool failed = j->failed;
    const char *error_param = j->error_param;
    char error[sizeof j->error];
    memcpy(error, j->error, sizeof error);
    json_t *o = failed ? NULL : final_response(j);
    pthread_mutex_unlock(&j->mu);
    if (failed && error_param)
        return send_error(cn, c, 400, "invalid_request_error", "invalid_value", error_param, "%s", error);
    if (failed) return send_error(cn, c, 500, "server_error", "generation_failed", NULL, "%s", error);
    return send_json(cn, c, 200, o, NULL);
}

/* Route a complete request and answer it. */
static bool on_request(struct conn *cn, struct http_exchange *c, const char *url, const char *method)
{
    struct srv_server *s = cn->s;
    cn->route = route_of(url);
    if (cn->route == R_NONE)
        return send_error(cn, c, 404, "invalid_request_error", "not_found", NULL,
                          "there is no %.16s %.80s here", method, url);
    const bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    const bool post = strcmp(method, "POST") == 0;
    if (route_is_get(cn->route) ? !get : !post)
        return send_error(cn, c, 405, "invalid_request_error", "method_not_allowed", NULL,
                          "%.16s is not allowed on %.80s (use %s)", method, url,
                          route_is_get(cn->route) ? "GET" : "POST");
    if (cn->route != R_HEALTH && !authorized(s, c))
        return send_error(cn, c, 401, "invalid_request_error", "invalid_api_key", NULL,
                          "a valid API key is required: send 'Authorization: Bearer KEY'");
    if (cn->route == R_HEALTH) return handle_health(cn, c);
    if (s->state == STATE_LOADING)
        return send_error(cn, c, 503, "server_error", "loading", NULL, "the model is still loading");
    switch (cn->route) {
    case R_MODELS: return handle_models(cn, c);
    case R_METRICS: return handle_metrics(cn, c);
    case R_TOKENIZE: return handle_tokenize(cn, c);
    case R_DETOKENIZE: return handle_detokenize(cn, c);
    case R_CHAT:
    case R_COMPLETIONS:
        if (s->state != STATE_READY)
            return send_error(cn, c, 503, "server_error", "shutting_down", NULL, "the server is shutting down");
        return handle_generate(cn, c, cn->route == R_CHAT ? SRV_CHAT : SRV_COMPLETION);
    default: return false;
    }
}

/* Let go of the request's job, count it and log it. */
static void on_completed(struct conn *cn)
{
    struct srv_server *s = cn->s;
    int status = cn->status ? cn->status : 499;
    long prompt = 0, cached = 0, completion = 0;
    double ttft = 0, tpot = 0;
    struct job *j = cn->job;
    if (j) {
        pthread_mutex_lock(&j->mu);
        if (j->n_open > 0) job_cancel_locked(j, END_CLIENT);
        job_usage(j, &prompt, &cached, &completion);
        if (j->n_choices > 0) ttft = j->choices[0].stats.ttft_ms, tpot = j->choices[0].stats.tpot_ms;
        j->http_gone = true;
        bool last = j->n_open == 0;
        pthread_mutex_unlock(&j->mu);
        if (last) job_destroy(j);
    }
    srv_metrics_status(&s->metrics, status);
    const double total = (now_s() - cn->t0) * 1000;
    if (cn->route == R_CHAT || cn->route == R_COMPLETIONS)
        fprintf(stderr, LOG_PREFIX "req-%llu %s %s %d prompt=%ld cached=%ld completion=%ld ttft=%.1fms "
                "tpot=%.1fms total=%.1fms%s%s\n", (unsigned long long)cn->rid, cn->method, cn->path,
                status, prompt, cached, completion, ttft, tpot, total, cn->user[0] ? " user=" : "",
                cn->user);
    else if (cn->route != R_HEALTH && cn->route != R_METRICS)
        fprintf(stderr, LOG_PREFIX "req-%llu %s %s %d total=%.1fms\n", (unsigned long long)cn->rid,
                cn->method, cn->path, status, total);
}

/* http.c's handler: one complete request on its connection's thread. */
static void on_exchange(void *cls, struct http_exchange *c)
{
    struct conn cn;
    memset(&cn, 0, sizeof cn);
    cn.s = cls;
    cn.x = c;
    cn.t0 = now_s();
    cn.rid = atomic_fetch_add(&cn.s->next_id, 1);
    cn.body.p = (char *)http_body(c, &cn.body.len);
    snprintf(cn.method, sizeof cn.method, "%s", http_method(c));
    snprintf(cn.path, sizeof cn.path, "%s", http_path(c));
    if (!on_request(&cn, c, http_path(c), http_method(c)) && !cn.responded) cn.status = 500;
    on_completed(&cn);
}

/* A request that http.c refused (framing, limits, deadlines, load). */
static void on_refused(void *cls, int status)
{
    struct srv_server *s = cls;
    srv_metrics_status(&s->metrics, status);
}

bool srv_server_start(const struct srv_config *cfg, struct srv_server **out, int *port)
{
    struct srv_server *s = calloc(1, sizeof *s);
    if (!s) return false;
    s->cfg = *cfg;
    s->state = STATE_LOADING;
    s->created = time(NULL);
    s->next_id = 1;
    cli_seed_stream_init(&s->seeds, cfg->sampling.seed);
    snprintf(s->fingerprint, sizeof s->fingerprint, "hearth-%s", hearth_version());
    srv_metrics_init(&s->metrics);
    pthread_mutex_init(&s->wake_mu, NULL);
    pthread_cond_init(&s->wake_cv, NULL);
    pthread_mutex_init(&s->jobs_mu, NULL);
    pthread_mutex_init(&s->grammars_mu, NULL);
    struct http_config hc = {
        .host = cfg->host,
        .port = cfg->port,
        .max_connections = cfg->max_connections,
        .max_body = cfg->max_body,
        .idle_timeout_s = cfg->idle_timeout_s,
        .request_timeout_s = cfg->request_timeout_s,
        .tls_key_pem = cfg->tls_key_pem,
        .tls_cert_pem = cfg->tls_cert_pem,
        .handle = on_exchange,
        .refused = on_refused,
        .user = s,
    };
    char why[400];
    if (!http_server_start(&hc, &s->http, port, why, sizeof why)) {
        fprintf(stderr, LOG_PREFIX "%s\n", why);
        srv_server_free(s);
        return false;
    }
    *out = s;
    return true;
}

bool srv_server_set_limits(struct srv_server *s, const char *alias, int32_t max_tokens_cap)
{
    if (s->state != STATE_LOADING) return false;
    s->cfg.alias = alias;
    s->cfg.max_tokens_cap = max_tokens_cap;
    return true;
}

bool srv_server_ready(struct srv_server *s, const hearth_model *model, hearth_engine *engine,
                      const hearth_template *tmpl, enum srv_tool_format tool_format,
                      const char *bos_text, const char *eos_text)
{
    s->tool_format = tool_format;
    s->model = model;
    s->vocab = hearth_model_vocab(model);
    s->engine = engine;
    s->tmpl = tmpl;
    s->bos_text = strdup(bos_text ? bos_text : "");
    s->eos_text = strdup(eos_text ? eos_text : "");
    hearth_engine_params p;
    hearth_engine_get_params(engine, &p);
    s->n_ctx = p.n_ctx;
    s->n_vocab = hearth_model_n_vocab(model);
    if (!s->bos_text || !s->eos_text) return false;
    if (pthread_create(&s->thread, NULL, engine_main, s) != 0) {
        fprintf(stderr, LOG_PREFIX "cannot start the engine's thread\n");
        return false;
    }
    s->thread_started = true;
    s->state = STATE_READY;
    return true;
}

int srv_server_drain(struct srv_server *s, double grace_s)
{
    s->state = STATE_DRAINING;
    const double end = now_s() + grace_s;
    int32_t left;
    for (;;) {
        pthread_mutex_lock(&s->jobs_mu);
        left = s->n_jobs;
        pthread_mutex_unlock(&s->jobs_mu);
        if (left == 0 || now_s() >= end) break;
        usleep(20000);
    }
    if (left == 0) return 0;
    s->forced_end = true;
    pthread_mutex_lock(&s->jobs_mu);
    for (struct job *j = s->jobs; j; j = j->next) job_signal(j);
    pthread_mutex_unlock(&s->jobs_mu);
    /* the connections answer and let go; the engine ends the samples */
    for (int i = 0; i < 500; i++) {
        pthread_mutex_lock(&s->jobs_mu);
        int32_t n = s->n_jobs;
        pthread_mutex_unlock(&s->jobs_mu);
        if (n == 0) break;
        usleep(10000);
    }
    return left;
}

void srv_server_free(struct srv_server *s)
{
    if (!s) return;
    http_server_stop(s->http);
    if (s->thread_started) {
        pthread_mutex_lock(&s->wake_mu);
        s->quit = true;
        pthread_cond_signal(&s->wake_cv);
        pthread_mutex_unlock(&s->wake_mu);
        pthread_join(s->thread, NULL);
    }
    /* jobs whose samples the engine never ended (it stopped first) */
    while (s->jobs) job_destroy(s->jobs);
    srv_metrics_destroy(&s->metrics);
    pthread_mutex_destroy(&s->wake_mu);
    pthread_cond_destroy(&s->wake_cv);
    pthread_mutex_destroy(&s->jobs_mu);
    for (size_t i = 0; i < SRV_GRAMMAR_CACHE; i++) {
        hearth_grammar_free(s->grammars[i].grammar);
        free(s->grammars[i].text);
    }
    pthread_mutex_destroy(&s->grammars_mu);
    free(s->bos_text);
    free(s->eos_text);
    free(s);
}

/*
 * jobs.c -- a generation request's life as a job: checked, its prompt
 * tokenized and submitted to the engine, its events gathered, its
 * response written by the connection that waits on it.
 *
 * Threads: the engine runs on one thread of its own (engine_main),
 * stepping while there is work and sleeping on a condition variable
 * otherwise.  The request's handler runs on a worker of http.c: it
 * submits the job's prompts to the engine, then waits on the job's
 * eventfd and on its socket (so that a client that hangs up is noticed
 * at once, whatever phase its request is in, and cancelled).  The
 * engine's events fill the job under the job's mutex: the text and log
 * probabilities of each choice, and for a stream the server-sent events
 * themselves, ready to be written (openai.c).  A job is freed by
 * whichever side lets go of it last: the connection (once its response
 * is written) or the engine (its last sample's final event).
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

#include "server_impl.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
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
#include "request.h"
#include "toolcall.h"

/* A stream's content type and headers. */
#define SSE_TYPE "text/event-stream"
#define SSE_HEADERS "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n"

/* ---- jobs ---------------------------------------------------------- */

void srv_wake_engine(struct srv_model *m)
{
    pthread_mutex_lock(&m->wake_mu);
    m->wake_pending = true;
    pthread_cond_signal(&m->wake_cv);
    pthread_mutex_unlock(&m->wake_mu);
}

void job_signal(struct job *j)
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
        free(j->choices[i].reasoning.p);
        hearth_reasoning_split_free(j->choices[i].split);
        srv_tool_parser_free(&j->choices[i].tp);
    }
    free(j->prompt_tail);
    free(j->choices);
    for (size_t i = 0; i < SRV_MAX_PROMPTS; i++) {
        free(j->tokens[i]);
        free(j->echo[i]);
    }
    free(j->out.p);
    responses_stream_free(j);
    srv_request_free(&j->req);
    embed_job_free(j->embed);
    if (j->efd >= 0) close(j->efd);
    pthread_mutex_destroy(&j->mu);
    /* the last: the model may be unloaded from here on */
    if (j->m) srv_model_release(j->m);
    free(j);
}

void job_leave_gauges(struct job *j)
{
    srv_metrics_requests(&j->s->metrics, j->gauge == GAUGE_RUNNING ? -1 : 0, j->gauge == GAUGE_WAITING ? -1 : 0);
    j->gauge = GAUGE_NONE;
}

/* Take a job out of the server's list and free it. */
void job_destroy(struct job *j)
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
void job_cancel_locked(struct job *j, enum end_reason why)
{
    if (j->ended == END_NONE) j->ended = why;
    for (size_t i = 0; i < j->n_subs; i++)
        if (j->subs[i].submitted) hearth_engine_cancel(j->m->loaded.engine, j->subs[i].id);
    if (j->embed) embed_job_cancel(j);
    srv_wake_engine(j->m);
}

/* ---- the engine's side ---------------------------------------------- */

static void log_probs(const struct srv_model *m, const float *logits, hearth_token token,
                      int32_t n_top, struct lp_rec *r)
{
    const int32_t V = m->n_vocab;
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

/* A choice's answer text: content, sent now or gathered (job locked). */
static void add_answer(struct job *j, size_t ci, const char *text, size_t len)
{
    struct choice *c = &j->choices[ci];
    if (len == 0) return;
    if (j->req.kind == SRV_RESPONSES) {
        /* kept whole: the done events and the store repeat it */
        buf_add(&c->text, text, len);
        if (j->req.stream && !j->stream_closed) responses_stream_text(j);
    } else if (j->req.stream && reads_tool_calls(j)) {
        buf_add(&c->text, text, len);
        if (!j->stream_closed) stream_tool_text(j, ci);
    } else if (j->req.stream) {
        if (!j->stream_closed) emit_chunk(j, ci, text, len, false, NULL);
    } else {
        buf_add(&c->text, text, len);
    }
}

/* A choice's reasoning text: reasoning_content, sent now or gathered. */
static void add_reasoning(struct job *j, size_t ci, const char *text, size_t len)
{
    if (len == 0) return;
    if (j->req.kind == SRV_RESPONSES) {
        if (!j->req.stream) buf_add(&j->choices[ci].reasoning, text, len);
        else if (!j->stream_closed) responses_stream_reasoning(j, text, len);
    } else if (!j->req.stream) {
        buf_add(&j->choices[ci].reasoning, text, len);
    } else if (!j->stream_closed) {
        emit_reasoning(j, ci, text, len);
    }
}

/* The event's text through the choice's reasoning split: its reasoning
 * goes out at once, *text and *len become its answer.  Should the split
 * fail (the tool calls' limits), the rest of the reply is content as it
 * comes. */
static void split_text(struct job *j, size_t ci, const char **text, size_t *len)
{
    struct choice *c = &j->choices[ci];
    hearth_reasoning_text t;
    if (hearth_reasoning_split_push(c->split, *text, *len, &t) != HEARTH_OK) {
        fprintf(stderr, LOG_PREFIX "%s: the reply is content from here on: %s\n", j->id, hearth_last_error());
        hearth_reasoning_split_free(c->split);
        c->split = NULL;
        return;
    }
    add_reasoning(j, ci, t.reasoning, t.reasoning_len);
    *text = t.answer;
    *len = t.answer_len;
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
            log_probs(j->m, ev->logits, ev->token, j->req.top_logprobs, &c->lp[c->n_lp]);
            c->lp[c->n_lp++].offset = c->text_bytes;
        }
    }
    const char *text = ev->text;
    size_t len = ev->len;
    if (c->split) split_text(j, ci, &text, &len);
    add_answer(j, ci, text, len);
    /* harmony's calls, which the split keeps apart: each streamed whole
     * once the next has begun (or at the end) */
    if (j->req.stream && !j->stream_closed && reads_tool_calls(j) && c->split &&
        hearth_reasoning_split_n_tool_calls(c->split) > c->calls_sent + 1) {
        if (j->req.kind == SRV_RESPONSES) responses_stream_text(j);
        else stream_tool_text(j, ci);
    }
    if (ev->token >= 0 && ev->finish == HEARTH_FINISH_NONE) {
        size_t n = 0;
        hearth_token_piece(j->m->vocab, ev->token, 0, &n);
        c->text_bytes += n;
    }
    if (ev->finish != HEARTH_FINISH_NONE) {
        if (c->split) {
            /* what the split held back: the end of an unclosed block */
            hearth_reasoning_text t;
            if (hearth_reasoning_split_finish(c->split, &t) == HEARTH_OK) {
                add_reasoning(j, ci, t.reasoning, t.reasoning_len);
                add_answer(j, ci, t.answer, t.answer_len);
            }
        }
        c->done = true;
        c->finish = ev->finish;
        if (ev->stats) c->stats = *ev->stats;
        /* the engine counted the reasoning's tokens as it followed it */
        if (ev->stats) c->n_reasoning_tokens = ev->stats->n_reasoning;
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
            /* the engine's peers gone (a pipeline's rank): the request
             * fails with that, and so does the server */
            const struct srv_loaded *l = &j->m->loaded;
            char broken[sizeof j->error];
            if (l->check && !l->check(l->owner, false, broken, sizeof broken)) {
                snprintf(j->error, sizeof j->error, "%s", broken);
                j->error_code = l->check_code;
                srv_server_fail(s, l->check_code, broken);
            }
            /* A grammar that only grows too ambiguous for the matcher
             * after some output is the request's fault, not the
             * server's: it is named as when it is refused at the start. */
            if (ev->status == HEARTH_E_RANGE) j->error_param = srv_request_grammar_param(&j->req);
        }
        if (j->req.stream && !j->stream_closed) {
            if (j->failed) {
                if (j->error_param) emit_error(j, j->error, "invalid_request_error", "invalid_value", j->error_param);
                else emit_error(j, j->error, "server_error", j->error_code ? j->error_code : "generation_failed", NULL);
            } else if (finish_name(ev->finish) && j->req.kind == SRV_RESPONSES) {
                responses_stream_end(j);
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

void *engine_main(void *arg)
{
    struct srv_model *m = arg;
    for (;;) {
        pthread_mutex_lock(&m->wake_mu);
        bool quit = m->quit;
        m->wake_pending = false;
        pthread_mutex_unlock(&m->wake_mu);
        if (quit) break;
        bool did = false;
        hearth_status st = hearth_engine_step(m->loaded.engine, &did);
        if (st) fprintf(stderr, LOG_PREFIX "model %s: a step failed: %s\n", m->alias, hearth_last_error());
        const struct srv_loaded *l = &m->loaded;
        char why[512];
        if (st && l->check && !l->check(l->owner, false, why, sizeof why)) srv_server_fail(m->s, l->check_code, why);
        /* failed: the requests a failed step left, queued or running,
         * fail at once in the next steps rather than wait for a wake */
        if (st && m->s->state == STATE_FAILED) did = true;
        if (!did) {
            /* idle: with peers to check, every check_interval_s */
            bool timed_out = false;
            pthread_mutex_lock(&m->wake_mu);
            if (l->check && l->check_interval_s > 0 && m->s->state != STATE_FAILED) {
                const struct timespec ts = srv_realtime_in(l->check_interval_s);
                while (!m->wake_pending && !m->quit && !timed_out)
                    timed_out = pthread_cond_timedwait(&m->wake_cv, &m->wake_mu, &ts) == ETIMEDOUT;
            } else {
                while (!m->wake_pending && !m->quit) pthread_cond_wait(&m->wake_cv, &m->wake_mu);
            }
            const bool check = timed_out && !m->wake_pending && !m->quit;
            pthread_mutex_unlock(&m->wake_mu);
            if (check && !l->check(l->owner, true, why, sizeof why)) srv_server_fail(m->s, l->check_code, why);
        }
    }
    return NULL;
}

/* ---- a request's job ------------------------------------------------ */

/* The prompt of a chat request: render the template, tokenize. */
static bool chat_tokens(struct srv_model *m, struct job *j, struct srv_error *e)
{
    const struct srv_loaded *l = &m->loaded;
    if (!l->tmpl)
        return srv_fail(e, 400, "invalid_request_error", "no_chat_template", "messages",
                        "the model has no chat template; start the server with --chat-template");
    hearth_chat_options opts;
    memset(&opts, 0, sizeof opts);
    opts.add_generation_prompt = true;
    opts.bos_token = l->bos_text;
    opts.eos_token = l->eos_text;
    opts.tools_json = j->req.tools_json;
    char effort[64];
    if (j->req.reasoning_effort) {
        snprintf(effort, sizeof effort, "{\"reasoning_effort\": \"%s\"}", j->req.reasoning_effort);
        opts.extra_json = effort;
    }
    char *text;
    size_t len;
    hearth_status st = hearth_template_render(l->tmpl, j->req.messages_json,
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
        st = hearth_template_render(l->tmpl, j->req.messages_json, strlen(j->req.messages_json),
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
    st = hearth_tokenize_alloc(m->vocab, text, len, hearth_chat_tokenize_flags(m->vocab, text, len),
                               &j->tokens[0], &j->n_tokens[0]);
    if (!st && l->reasoning != HEARTH_REASONING_NONE) {
        /* the end of the prompt says where the reply starts (inside
         * <think>, inside a harmony message) */
        const size_t tail = len < 1024 ? len : 1024;
        j->prompt_tail = malloc(tail + 1);
        if (!j->prompt_tail) st = HEARTH_E_NOMEM;
        else memcpy(j->prompt_tail, text + len - tail, tail);
        j->prompt_tail_len = tail;
    }
    hearth_free(text);
    if (st) return srv_fail(e, 500, "server_error", NULL, NULL, "tokenization failed: %s", hearth_last_error());
    return true;
}

static bool completion_tokens(struct srv_model *m, struct job *j, size_t i, struct srv_error *e)
{
    struct srv_prompt *p = &j->req.prompts[i];
    if (p->tokens) {
        j->tokens[i] = p->tokens;
        j->n_tokens[i] = p->n_tokens;
        p->tokens = NULL;
        if (j->req.echo) {
            char *text;
            size_t len;
            if (hearth_detokenize_alloc(m->vocab, j->tokens[i], j->n_tokens[i], 0, &text, &len))
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
    hearth_status st = hearth_tokenize_alloc(m->vocab, p->text, p->len,
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
        uint64_t x = (uint64_t)time(NULL) ^ (uint64_t)srv_now_s() * 1000003u;
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

bool srv_client_gone(struct conn *cn)
{
    return client_gone(cn) != 0;
}

/* The compiled grammar of a request (a new reference), from the cache or
 * compiled now (stopped when the client of cn hangs up); false with a 400
 * when it does not compile. */
static bool request_grammar(struct srv_model *m, struct srv_request *r, struct conn *cn,
                            struct srv_error *e)
{
    const char *text = r->grammar_text ? r->grammar_text : "";
    pthread_mutex_lock(&m->grammars_mu);
    for (size_t i = 0; i < SRV_GRAMMAR_CACHE; i++)
        if (m->grammars[i].grammar && m->grammars[i].kind == r->grammar &&
            strcmp(m->grammars[i].text, text) == 0) {
            r->sampling.grammar = hearth_grammar_ref(m->grammars[i].grammar);
            pthread_mutex_unlock(&m->grammars_mu);
            return true;
        }
    pthread_mutex_unlock(&m->grammars_mu);
    hearth_grammar *g = NULL;
    cn->stream = r->stream;
    hearth_grammar_options opt = {client_gone, cn};
    /* a schema was translated to GBNF when the request was parsed */
    const bool schema = r->grammar == SRV_GRAMMAR_JSON_SCHEMA;
    const char *source = schema ? r->schema_gbnf : text;
    hearth_grammar_syntax syntax = r->grammar == SRV_GRAMMAR_JSON_OBJECT ? HEARTH_GRAMMAR_JSON_OBJECT
                                                                         : HEARTH_GRAMMAR_GBNF;
    if (!source) source = ""; /* never: the parser sets schema_gbnf with the schema */
    hearth_status st = hearth_grammar_compile(m->vocab, syntax, source, strlen(source), &opt, &g);
    if (st) {
        srv_fail(e, st == HEARTH_E_NOMEM ? 500 : 400,
                 st == HEARTH_E_NOMEM ? "server_error" : "invalid_request_error", "invalid_value",
                 srv_request_grammar_param(r), "%s%s", schema ? "JSON schema (as a grammar): " : "",
                 hearth_last_error());
        return false;
    }
    r->sampling.grammar = g;
    char *copy = strdup(text);
    if (copy) {
        pthread_mutex_lock(&m->grammars_mu);
        size_t i = m->grammars_next++ % SRV_GRAMMAR_CACHE;
        hearth_grammar_free(m->grammars[i].grammar);
        free(m->grammars[i].text);
        m->grammars[i].kind = r->grammar;
        m->grammars[i].text = copy;
        m->grammars[i].grammar = hearth_grammar_ref(g);
        pthread_mutex_unlock(&m->grammars_mu);
    }
    return true;
}

/* Check, tokenize and submit a generation request; NULL with *e set when
 * it is refused. */
struct job *job_new(struct conn *cn, struct srv_error *e)
{
    struct job *j = calloc(1, sizeof *j);
    if (!j) {
        srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        return NULL;
    }
    j->s = cn->s;
    j->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&j->mu, NULL);
    if (j->efd < 0) {
        srv_fail(e, 500, "server_error", NULL, NULL, "eventfd: %s", strerror(errno));
        job_free(j);
        return NULL;
    }
    j->t0 = cn->t0;
    j->deadline = cn->s->cfg.timeout_s > 0 ? cn->t0 + cn->s->cfg.timeout_s : INFINITY;
    j->created = time(NULL);
    /* the model the request names, loaded (waiting for it here) */
    char *name = NULL;
    struct srv_model *m = NULL;
    if (!srv_request_peek(cn->body.p, cn->body.len, &name, &cn->stream, e) ||
        !(m = srv_model_find(cn->s, name, e)) || !srv_model_acquire(m, cn, j->deadline, true, e)) {
        free(name);
        job_free(j);
        return NULL;
    }
    free(name);
    j->m = m;
    return j;
}

void job_discard(struct job *j)
{
    job_free(j);
}

bool job_enlist(struct job *j, struct srv_error *e)
{
    struct srv_server *s = j->s;
    pthread_mutex_lock(&s->jobs_mu);
    if (s->state != STATE_READY) {
        pthread_mutex_unlock(&s->jobs_mu);
        return srv_unavailable(s, e);
    }
    j->next = s->jobs;
    if (s->jobs) s->jobs->prev = j;
    s->jobs = j;
    s->n_jobs++;
    pthread_mutex_unlock(&s->jobs_mu);
    srv_metrics_requests(&s->metrics, 0, 1);
    return true;
}

static struct job *job_start(struct conn *cn, enum srv_kind kind, struct srv_error *e)
{
    struct srv_server *s = cn->s;
    struct job *j = job_new(cn, e);
    if (!j) return NULL;
    struct srv_model *m = j->m;
    const struct srv_loaded *l = &m->loaded;
    if (hearth_model_is_embedding_only(l->model)) {
        srv_fail(e, 400, "invalid_request_error", "model_not_supported", "model",
                 "the model '%s' (%s) is an embedding model: it generates no text; use /v1/embeddings",
                 m->alias, hearth_model_arch(l->model));
        goto fail_early;
    }
    struct srv_limits lim = {m->n_vocab, l->max_tokens_cap, &s->cfg.sampling, s->cfg.reasoning_budget};
    if (!srv_request_parse(kind, cn->body.p, cn->body.len, &lim, &j->req, e)) goto fail_early;
    if (kind == SRV_RESPONSES && !responses_prepare(s, j, e)) goto fail_early;
    if (j->req.tool_choice == SRV_TOOL_REQUIRED || j->req.tool_choice == SRV_TOOL_NAMED) {
        /* the whole output is calls in the template's format: one, or
         * with parallel_tool_calls one or more where the format writes
         * several */
        char why[400];
        if (!srv_tool_calls_grammar_n(l->tool_format, j->req.tools_json, j->req.tool_name,
                                      j->req.parallel_tool_calls, &j->req.grammar_text, why, sizeof why)) {
            srv_fail(e, 400, "invalid_request_error", "invalid_value", "tools",
                     "the tools cannot be turned into a grammar for tool_choice: %s", why);
            goto fail_early;
        }
        j->req.grammar = SRV_GRAMMAR_GBNF;
    }
    if (j->req.grammar != SRV_GRAMMAR_NONE && !request_grammar(m, &j->req, cn, e)) goto fail_early;
    /* whether a seed was given is the request's own: the server's
     * sampling defaults never carry one */
    if (!j->req.seed_given) j->req.sampling.seed = hearth_seed_derive(s->cfg.sampling.seed, atomic_fetch_add(&s->seeds_drawn, 1));
    const bool chat = srv_kind_chat(kind);
    /* the field that holds the prompt */
    const char *prompt_param = kind == SRV_RESPONSES ? "input" : chat ? "messages" : "prompt";
    size_t n_prompts = chat ? 1 : j->req.n_prompts;
    for (size_t i = 0; i < n_prompts; i++) {
        if (!(chat ? chat_tokens(m, j, e) : completion_tokens(m, j, i, e))) goto fail_early;
        if (j->n_tokens[i] == 0) {
            srv_fail(e, 400, "invalid_request_error", "invalid_value", prompt_param,
                     "the prompt is empty (it has no tokens)");
            goto fail_early;
        }
        if (j->n_tokens[i] >= (size_t)m->n_ctx) {
            srv_fail(e, 400, "invalid_request_error", "context_length_exceeded", prompt_param,
                     "this model's maximum context length is %d tokens, but the prompt has %zu tokens "
                     "(at least one more is needed for the reply)", m->n_ctx, j->n_tokens[i]);
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
    for (size_t ci = 0; ci < j->n_choices; ci++) srv_tool_parser_init(&j->choices[ci].tp, l->tool_format);
    if (chat && l->reasoning != HEARTH_REASONING_NONE)
        for (size_t ci = 0; ci < j->n_choices; ci++)
            if (hearth_reasoning_split_new(l->reasoning, j->prompt_tail, j->prompt_tail_len,
                                           &j->choices[ci].split)) {
                srv_fail(e, 500, "server_error", NULL, NULL, "%s", hearth_last_error());
                goto fail_early;
            }
    uint64_t idn = atomic_fetch_add(&s->next_id, 1);
    uint32_t rnd;
    random_bytes(&rnd, sizeof rnd);
    snprintf(j->id, sizeof j->id, "%s%08x%016llx",
             kind == SRV_RESPONSES ? "resp_" : kind == SRV_CHAT ? "chatcmpl-" : "cmpl-", rnd, (unsigned long long)idn);

    /* the queue's bound, and the job's place in the list */
    if (!job_enlist(j, e)) goto fail_early;

    /* a stream's first chunks, before any token */
    pthread_mutex_lock(&j->mu);
    if (j->req.stream && kind == SRV_RESPONSES) responses_stream_begin(j);
    else if (j->req.stream)
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
        q.speculation = l->speculation;
        q.stop = (const char *const *)j->req.stop;
        q.n_stop = j->req.n_stop;
        q.max_tokens = j->req.max_tokens;
        q.n = j->req.n;
        q.ignore_eos = j->req.ignore_eos;
        q.decode_flags = chat ? 0 : HEARTH_DECODE_CONTINUATION;
        /* the formats' markers may be control tokens ([TOOL_CALLS]) */
        if (reads_tool_calls(j)) q.decode_flags |= HEARTH_DECODE_SPECIAL;
        /* harmony's markers are control tokens */
        if (chat && l->reasoning == HEARTH_REASONING_HARMONY)
            q.decode_flags |= HEARTH_DECODE_SPECIAL;
        /* The engine follows the reasoning as the choices' splits do: a
         * grammar constrains the answer alone, the budget ends the
         * reasoning, the usage counts its tokens.  Harmony's forced call
         * is the exception: its grammar spells the whole reply, the
         * call's header first, and there is no reasoning before it. */
        const bool forced_call = l->tool_format == SRV_TOOLS_HARMONY &&
                                 (j->req.tool_choice == SRV_TOOL_REQUIRED || j->req.tool_choice == SRV_TOOL_NAMED);
        if (chat && !forced_call) {
            q.reasoning = l->reasoning;
            q.reasoning_budget = j->req.reasoning_budget;
        }
        q.on_event = on_event;
        j->subs[i].job = j;
        j->subs[i].prompt = i;
        q.user = &j->subs[i];
        hearth_status st = hearth_engine_submit(l->engine, &q, &j->subs[i].id);
        if (st) {
            /* The prompt's length was checked above and the pool holds a
             * whole context (hearth serve refuses a smaller one), so what
             * the engine still refuses is the sampling (the grammar's
             * first state, or a value checked there alone) or a reasoning
             * budget whose marker the vocabulary cannot write. */
            const char *param = st == HEARTH_E_UNSUPPORTED && q.reasoning_budget >= 0 ? "thinking_budget_tokens"
                                                                                     : srv_request_grammar_param(&j->req);
            srv_fail(e, st == HEARTH_E_NOMEM ? 500 : 400, st == HEARTH_E_NOMEM ? "server_error"
                     : "invalid_request_error", st == HEARTH_E_NOMEM ? NULL : "invalid_value",
                     param, "%s", hearth_last_error());
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
    srv_wake_engine(m);
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
        double left = j->deadline - srv_now_s();
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

bool job_wait_all(struct conn *cn, struct http_exchange *c, struct job *j, bool *answered)
{
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
            *answered = false;
        } else if (w == W_TIMEOUT) {
            *answered = send_error(cn, c, 504, "timeout_error", "timeout", NULL,
                                   "the request ran past its deadline of %g s (--timeout)", cn->s->cfg.timeout_s);
        } else {
            *answered = send_error(cn, c, 503, "server_error", "shutting_down", NULL, "the server is shutting down");
        }
        return false;
    }
    return true;
}

bool handle_generate(struct conn *cn, struct http_exchange *c, enum srv_kind kind)
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
    bool answered;
    if (!job_wait_all(cn, c, j, &answered)) return answered;
    bool failed = j->failed;
    const char *error_param = j->error_param;
    const char *error_code = j->error_code ? j->error_code : "generation_failed";
    char error[sizeof j->error];
    memcpy(error, j->error, sizeof error);
    json_t *o = failed ? NULL : final_response(j);
    pthread_mutex_unlock(&j->mu);
    if (failed && error_param)
        return send_error(cn, c, 400, "invalid_request_error", "invalid_value", error_param, "%s", error);
    if (failed) return send_error(cn, c, 500, "server_error", error_code, NULL, "%s", error);
    return send_json(cn, c, 200, o, NULL);
}

/*
 * server.c -- the OpenAI API over the serving engine (see server.h): the
 * server's life from listening to the drain, and the way of each
 * request from http.c to its handler.
 *
 * Threads: http.c's event loop holds a connection until its request is
 * complete; then one of its workers calls on_exchange, which routes the
 * request, checks its key and answers it on that thread, a generation
 * request through its job (jobs.c), blocking while it runs.  The engine
 * runs on a thread of its own (jobs.c), started by srv_server_ready.
 */
#define _GNU_SOURCE
#include "config.h"

#include "server.h"
#include "server_impl.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "chat_page.h"
#include "http.h"
#include "http_parse.h"
#include "metrics.h"
#include "request.h"

double srv_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct timespec srv_realtime_in(double seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const long sec = (long)seconds;
    ts.tv_sec += sec;
    ts.tv_nsec += (long)((seconds - (double)sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* ---- connections ---------------------------------------------------- */

static bool route_is_get(enum route r)
{
    return r == R_PAGE || r == R_HEALTH || r == R_MODELS || r == R_METRICS;
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
                 cn->route == R_RESPONSE ? "GET, DELETE" : route_is_get(cn->route) ? "GET" : "POST");
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

bool send_json(struct conn *cn, struct http_exchange *c, int status, json_t *o, const char *retry_after)
{
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text) return false;
    return send_body(cn, c, status, text, strlen(text), "application/json", retry_after);
}

bool send_error(struct conn *cn, struct http_exchange *c, int status, const char *type, const char *code,
                const char *param, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return send_json(cn, c, status, error_object(msg, type, param, code),
                     status == 429 || status == 503 ? "1" : NULL);
}

bool send_srv_error(struct conn *cn, struct http_exchange *c, const struct srv_error *e)
{
    return send_json(cn, c, e->status, error_object(e->message, e->type, e->param, e->code),
                     e->status == 429 || e->status == 503 ? "1" : NULL);
}

/* The id in /v1/responses/{id} (or /responses/{id}), NULL for other
 * paths. */
static const char *response_id(const char *url)
{
    static const char *const prefixes[] = {"/v1/responses/", "/responses/"};
    for (size_t i = 0; i < 2; i++) {
        const size_t n = strlen(prefixes[i]);
        if (strncmp(url, prefixes[i], n) == 0 && url[n] && !strchr(url + n, '/')) return url + n;
    }
    return NULL;
}

static enum route route_of(const char *url)
{
    static const struct {
        const char *path;
        enum route r;
    } table[] = {
        {"/", R_PAGE},
        {"/index.html", R_PAGE},
        {"/health", R_HEALTH},
        {"/v1/health", R_HEALTH},
        {"/v1/models", R_MODELS},
        {"/models", R_MODELS},
        {"/metrics", R_METRICS},
        {"/v1/chat/completions", R_CHAT},
        {"/chat/completions", R_CHAT},
        {"/v1/completions", R_COMPLETIONS},
        {"/completions", R_COMPLETIONS},
        {"/v1/embeddings", R_EMBEDDINGS},
        {"/embeddings", R_EMBEDDINGS},
        {"/tokenize", R_TOKENIZE},
        {"/detokenize", R_DETOKENIZE},
        {"/v1/responses", R_RESPONSES},
        {"/responses", R_RESPONSES},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(url, table[i].path) == 0) return table[i].r;
    return response_id(url) ? R_RESPONSE : R_NONE;
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

/* The chat page's headers: it may reach its own server and nothing
 * else (its script and style are inline: the page is one file, and it
 * writes the model's text as text, never as markup); a browser asks
 * again with the entity tag each time it shows the page. */
#define PAGE_HEADERS \
    "Content-Security-Policy: default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; " \
    "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'\r\n" \
    "X-Content-Type-Options: nosniff\r\n" \
    "Referrer-Policy: no-referrer\r\n" \
    "Cache-Control: no-cache\r\n"

/* GET / and /index.html: the chat page (src/server/chat.html), with no
 * key needed: it holds nothing secret, and its own requests to the API
 * carry the key it asks the user for. */
static bool handle_page(struct conn *cn, struct http_exchange *c)
{
    char headers[640];
    snprintf(headers, sizeof headers, "ETag: %s\r\n" PAGE_HEADERS, srv_chat_page_etag);
    const char *inm = http_request_header(c, "If-None-Match");
    const bool same = inm && http_etag_match(inm, srv_chat_page_etag);
    const bool ok = same ? http_respond(c, 304, NULL, headers, NULL, 0)
                         : http_respond(c, 200, "text/html; charset=utf-8", headers,
                                        (const char *)srv_chat_page, srv_chat_page_len);
    cn->status = ok ? (same ? 304 : 200) : 499;
    cn->responded = true;
    return ok;
}

/* ---- failure ---------------------------------------------------------- */

void srv_server_fail(struct srv_server *s, const char *code, const char *why)
{
    pthread_mutex_lock(&s->fail_mu);
    if (s->state != STATE_FAILED) {
        snprintf(s->failure, sizeof s->failure, "%s", why);
        s->failure_code = code;
        s->state = STATE_FAILED;
        fprintf(stderr, LOG_PREFIX "failed: %s; every request is refused from now on\n", why);
    }
    pthread_mutex_unlock(&s->fail_mu);
}

const char *srv_server_failure(struct srv_server *s)
{
    return s->state == STATE_FAILED ? s->failure : NULL;
}

bool srv_unavailable(struct srv_server *s, struct srv_error *e)
{
    if (s->state == STATE_FAILED)
        return srv_fail(e, 503, "server_error", s->failure_code, NULL, "the server cannot serve: %s", s->failure);
    return srv_fail(e, 503, "server_error", "shutting_down", NULL, "the server is shutting down");
}

static bool handle_health(struct conn *cn, struct http_exchange *c)
{
    const int st = cn->s->state;
    const char *status = st == STATE_READY     ? "ok"
                         : st == STATE_LOADING ? "loading"
                         : st == STATE_FAILED  ? "error"
                                               : "draining";
    json_t *o = json_object();
    json_object_set_new(o, "status", json_string(status));
    if (st == STATE_FAILED) json_object_set_new(o, "error", json_string(cn->s->failure));
    return send_json(cn, c, st == STATE_READY ? 200 : 503, o, st == STATE_READY ? NULL : "1");
}

/* 503: the server is not ready (draining, or failed). */
static bool send_unavailable(struct conn *cn, struct http_exchange *c)
{
    struct srv_error e;
    srv_unavailable(cn->s, &e);
    return send_srv_error(cn, c, &e);
}

static bool handle_models(struct conn *cn, struct http_exchange *c)
{
    json_t *data = srv_models_json(cn->s);
    if (!data) return send_error(cn, c, 500, "server_error", NULL, NULL, "out of memory");
    json_t *o = json_object();
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", data);
    return send_json(cn, c, 200, o, NULL);
}

static bool handle_metrics(struct conn *cn, struct http_exchange *c)
{
    hearth_engine_stats es;
    srv_models_stats(cn->s, &es);
    size_t len;
    char *text = srv_metrics_render(&cn->s->metrics, &es, cn->s->cfg.disk_cache, &len);
    if (!text) return false;
    struct buf b = {text, len, len};
    if (!srv_models_metrics(cn->s, &b)) {
        free(b.p);
        return false;
    }
    return send_body(cn, c, 200, b.p, b.len, "text/plain; version=0.0.4", NULL);
}

/* The model a /tokenize or /detokenize request names, held (release it
 * with srv_model_release()); NULL after answering. */
static struct srv_model *hold_model(struct conn *cn, struct http_exchange *c)
{
    struct srv_error e;
    char *name = NULL;
    bool stream = false;
    struct srv_model *m = NULL;
    const double deadline = cn->s->cfg.timeout_s > 0 ? cn->t0 + cn->s->cfg.timeout_s : INFINITY;
    if (!srv_request_peek(cn->body.p, cn->body.len, &name, &stream, &e) || !(m = srv_model_find(cn->s, name, &e)) ||
        !srv_model_acquire(m, cn, deadline, false, &e)) {
        free(name);
        send_srv_error(cn, c, &e);
        return NULL;
    }
    free(name);
    cn->model = m->alias;
    return m;
}

static bool handle_tokenize(struct conn *cn, struct http_exchange *c)
{
    struct srv_tokenize t;
    struct srv_error e;
    if (!srv_tokenize_parse(cn->body.p, cn->body.len, &t, &e)) return send_srv_error(cn, c, &e);
    struct srv_model *m = hold_model(cn, c);
    if (!m) {
        srv_tokenize_free(&t);
        return cn->responded;
    }
    hearth_token *ids = NULL;
    size_t n = 0;
    unsigned flags = (t.add_special ? HEARTH_TOKENIZE_ADD_SPECIAL : 0) |
                     (t.parse_special ? HEARTH_TOKENIZE_PARSE_SPECIAL : 0);
    hearth_status st = hearth_tokenize_alloc(m->vocab, t.content, t.len, flags, &ids, &n);
    const bool with_pieces = t.with_pieces;
    srv_tokenize_free(&t);
    if (st) {
        srv_model_release(m);
        return send_error(cn, c, st == HEARTH_E_NOMEM ? 500 : 400, "invalid_request_error", NULL,
                          "content", "tokenization failed: %s", hearth_last_error());
    }
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        if (with_pieces) {
            json_t *p = json_object();
            json_object_set_new(p, "id", json_integer(ids[i]));
            json_object_set_new(p, "piece", piece_json(m, ids[i], false, NULL));
            json_array_append_new(a, p);
        } else {
            json_array_append_new(a, json_integer(ids[i]));
        }
    }
    hearth_free(ids);
    srv_model_release(m);
    json_t *o = json_object();
    json_object_set_new(o, "tokens", a);
    return send_json(cn, c, 200, o, NULL);
}

static bool handle_detokenize(struct conn *cn, struct http_exchange *c)
{
    struct srv_detokenize d;
    struct srv_error e;
    struct srv_model *m = hold_model(cn, c);
    if (!m) return cn->responded;
    if (!srv_detokenize_parse(cn->body.p, cn->body.len, m->n_vocab, &d, &e)) {
        srv_model_release(m);
        return send_srv_error(cn, c, &e);
    }
    char *text;
    size_t len;
    hearth_status st = hearth_detokenize_alloc(m->vocab, d.tokens, d.n_tokens, 0, &text, &len);
    srv_detokenize_free(&d);
    srv_model_release(m);
    if (st)
        return send_error(cn, c, 500, "server_error", NULL, NULL, "detokenization failed: %s",
                          hearth_last_error());
    json_t *o = json_object();
    json_object_set_new(o, "content", lossy_string(text, len));
    hearth_free(text);
    return send_json(cn, c, 200, o, NULL);
}

/* Route a complete request and answer it. */
static bool on_request(struct conn *cn, struct http_exchange *c, const char *url, const char *method)
{
    struct srv_server *s = cn->s;
    cn->route = route_of(url);
    if (cn->route == R_PAGE && s->cfg.no_webui) cn->route = R_NONE;
    if (cn->route == R_NONE)
        return send_error(cn, c, 404, "invalid_request_error", "not_found", NULL,
                          "there is no %.16s %.80s here", method, url);
    const bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    const bool post = strcmp(method, "POST") == 0;
    const bool del = strcmp(method, "DELETE") == 0;
    if (cn->route == R_RESPONSE ? !get && !del : route_is_get(cn->route) ? !get : !post)
        return send_error(cn, c, 405, "invalid_request_error", "method_not_allowed", NULL,
                          "%.16s is not allowed on %.80s (use %s)", method, url,
                          cn->route == R_RESPONSE ? "GET or DELETE" : route_is_get(cn->route) ? "GET" : "POST");
    if (cn->route != R_HEALTH && cn->route != R_PAGE && !authorized(s, c))
        return send_error(cn, c, 401, "invalid_request_error", "invalid_api_key", NULL,
                          "a valid API key is required: send 'Authorization: Bearer KEY'");
    if (cn->route == R_HEALTH) return handle_health(cn, c);
    if (cn->route == R_PAGE) return handle_page(cn, c);
    if (s->state == STATE_LOADING)
        return send_error(cn, c, 503, "server_error", "loading", NULL, "the model is still loading");
    if (s->state != STATE_READY && (cn->route == R_TOKENIZE || cn->route == R_DETOKENIZE))
        return send_unavailable(cn, c);
    switch (cn->route) {
    case R_MODELS: return handle_models(cn, c);
    case R_METRICS: return handle_metrics(cn, c);
    case R_TOKENIZE: return handle_tokenize(cn, c);
    case R_DETOKENIZE: return handle_detokenize(cn, c);
    case R_RESPONSE: return handle_response_item(cn, c, response_id(url), del);
    case R_CHAT:
    case R_COMPLETIONS:
    case R_RESPONSES:
        if (s->state != STATE_READY) return send_unavailable(cn, c);
        return handle_generate(cn, c, cn->route == R_CHAT ? SRV_CHAT : cn->route == R_RESPONSES ? SRV_RESPONSES
                                                                                                : SRV_COMPLETION);
    case R_EMBEDDINGS:
        if (s->state != STATE_READY) return send_unavailable(cn, c);
        return handle_embeddings(cn, c);
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
        if (j->m) cn->model = j->m->alias;
        j->http_gone = true;
        bool last = j->n_open == 0;
        pthread_mutex_unlock(&j->mu);
        if (last) job_destroy(j);
    }
    srv_metrics_status(&s->metrics, status);
    const double total = (srv_now_s() - cn->t0) * 1000;
    /* the model's name when the table has several */
    const bool named = cn->model && s->models.n > 1;
    if (cn->route == R_CHAT || cn->route == R_COMPLETIONS || cn->route == R_RESPONSES)
        fprintf(stderr, LOG_PREFIX "req-%llu %s %s %d prompt=%ld cached=%ld completion=%ld ttft=%.1fms "
                "tpot=%.1fms total=%.1fms%s%s%s%s\n", (unsigned long long)cn->rid, cn->method, cn->path,
                status, prompt, cached, completion, ttft, tpot, total, named ? " model=" : "",
                named ? cn->model : "", cn->user[0] ? " user=" : "", cn->user);
    else if (cn->route != R_HEALTH && cn->route != R_METRICS)
        fprintf(stderr, LOG_PREFIX "req-%llu %s %s %d total=%.1fms%s%s\n", (unsigned long long)cn->rid,
                cn->method, cn->path, status, total, named ? " model=" : "", named ? cn->model : "");
}

/* http.c's handler: one complete request, on the worker thread that
 * answers it. */
static void on_exchange(void *cls, struct http_exchange *c)
{
    struct conn cn;
    memset(&cn, 0, sizeof cn);
    cn.s = cls;
    cn.x = c;
    cn.t0 = srv_now_s();
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

/* ---- the server's life ---------------------------------------------- */

bool srv_server_start(const struct srv_config *cfg, const struct srv_model_loader *loader,
                      struct srv_server **out, int *port)
{
    struct srv_server *s = calloc(1, sizeof *s);
    if (!s) return false;
    s->cfg = *cfg;
    s->state = STATE_LOADING;
    s->created = time(NULL);
    s->next_id = 1;
    atomic_init(&s->seeds_drawn, 0);
    snprintf(s->fingerprint, sizeof s->fingerprint, "hearth-%s", hearth_version());
    srv_metrics_init(&s->metrics);
    srv_models_init(&s->models, loader);
    pthread_mutex_init(&s->jobs_mu, NULL);
    pthread_mutex_init(&s->fail_mu, NULL);
    resp_store_init(&s->responses, cfg->responses_store, cfg->responses_store_bytes);
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

bool srv_server_add_model(struct srv_server *s, const char *alias, const char *path, uint64_t file_bytes)
{
    if (s->state != STATE_LOADING) return false;
    return srv_models_add(s, alias, path, file_bytes);
}

bool srv_server_preload(struct srv_server *s, const char *alias, const struct srv_loaded **loaded, char *why,
                        size_t why_size)
{
    struct srv_error e;
    struct srv_model *m = srv_model_find(s, alias, &e);
    if (m && strcmp(m->alias, alias) != 0) m = NULL;
    if (!m) {
        snprintf(why, why_size, "no model is named '%s'", alias);
        return false;
    }
    if (!srv_model_acquire(m, NULL, INFINITY, false, &e)) {
        snprintf(why, why_size, "%s", e.message);
        return false;
    }
    if (loaded) *loaded = &m->loaded;
    srv_model_release(m);
    return true;
}

bool srv_server_ready(struct srv_server *s)
{
    if (!srv_models_start(s)) return false;
    /* not over a failure that came first */
    int loading = STATE_LOADING;
    atomic_compare_exchange_strong(&s->state, &loading, STATE_READY);
    return true;
}

int srv_server_drain(struct srv_server *s, double grace_s)
{
    /* a failed server stays failed: its requests end with the failure */
    int ready = STATE_READY, loading = STATE_LOADING;
    if (!atomic_compare_exchange_strong(&s->state, &ready, STATE_DRAINING))
        atomic_compare_exchange_strong(&s->state, &loading, STATE_DRAINING);
    const double end = srv_now_s() + grace_s;
    int32_t left;
    for (;;) {
        pthread_mutex_lock(&s->jobs_mu);
        left = s->n_jobs;
        pthread_mutex_unlock(&s->jobs_mu);
        if (left == 0 || srv_now_s() >= end) break;
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
    /* the engines stop first; jobs whose samples they never ended go
     * with the table */
    srv_models_free(s);
    srv_metrics_destroy(&s->metrics);
    pthread_mutex_destroy(&s->jobs_mu);
    pthread_mutex_destroy(&s->fail_mu);
    resp_store_free(&s->responses);
    free(s);
}

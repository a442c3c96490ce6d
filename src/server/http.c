/*
 * http.c -- hearth serve's HTTP/1.1 connections (see http.h).
 *
 * Threads: one runs the event loop, and up to --max-connections workers
 * answer requests.  The loop accepts connections and, without blocking
 * on any of them, does everything a connection needs while it has no
 * complete request: the TLS handshake, reading request heads and bodies
 * (http_parse.c), the deadlines, writing this layer's refusals and
 * lingering before the close.  Only a complete request takes one of the
 * --max-connections places: a worker calls the server's handler, which
 * answers on that thread and may block while the request runs; then the
 * worker goes on with a next request that is already buffered
 * (pipelining) or hands the connection back to the loop.  A complete
 * request that finds every place busy is answered 503 and closed.
 *
 * So a client that sends slowly costs a buffer, not a place: the
 * connections waiting in the loop are bounded apart from the places (four
 * times --max-connections, at least 64, within the descriptor limit).
 * When that set is full, a new connection drops the one that has waited
 * longest, unless every waiting one arrived within the last second; then
 * the new one is closed.  A client whose request comes with its
 * connection is read the moment it is accepted.
 *
 * Deadlines: a silent peer, and a kept-alive connection between
 * requests, is closed after the idle timeout; a request's head and body
 * must arrive within the request timeout from its first byte, however
 * steadily they trickle in (408 and a close otherwise).
 *
 * The listening socket has SO_REUSEADDR (a restart binds a port whose
 * old connections linger in TIME_WAIT) and never SO_REUSEPORT: a port
 * that another process serves is refused, not shared.
 */
#define _GNU_SOURCE
#include "config.h"

#include "http.h"

#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_GNUTLS
#include <gnutls/gnutls.h>
#endif

#include "buf.h"
#include "http_parse.h"

#define MAX_LISTEN 8
#define READ_CHUNK 16384
#define WAITING_PER_PLACE 4      /* connections waiting for a request, per --max-connections place */
#define MIN_WAITING 64
#define MAX_WAITING 16384
#define WAITING_GRACE_S 1.0      /* a waiting connection younger than this is never dropped for a new one */
#define LINGER_S 2.0
#define LINGER_BYTES (1u << 20)
#define ACCEPTS_PER_WAKE 64

/* Where a connection is: the loop's states, then a worker's. */
enum state {
    ST_HANDSHAKE,   /* TLS handshake */
    ST_REQUEST,     /* reading a request */
    ST_SENDING,     /* writing a refusal (out) */
    ST_LINGER,      /* sending side shut, draining before the close */
    ST_HANDLING,    /* a complete request, on a worker */
};

struct http_conn;

struct http_exchange {
    struct http_conn *c;
    struct http_request req;
    const char *path;           /* the target's path: no scheme, authority or query */
    struct buf body;
    bool head_only;             /* HEAD: the response has no body */
    bool started;               /* the response head is written */
    bool chunked;               /* the streamed body is chunked (else ends with the close) */
    bool ended;
    bool close;                 /* the connection closes after this response */
    bool half_closed;           /* the peer has shut its sending side */
};

struct http_conn {
    struct http_server *h;
    int fd;
#ifdef HAVE_GNUTLS
    gnutls_session_t tls;
#endif
    bool has_tls;
    enum state state;
    char in[HTTP_MAX_HEAD + READ_CHUNK];
    size_t in_len;
    bool in_body;               /* the head is parsed; the body is being read */
    struct http_body body;
    double waiting_since;       /* since when it is in the loop */
    double last_io;             /* its last byte in or out */
    double request_deadline;    /* the request's (INFINITY before its first byte), or the handshake's */
    double linger_deadline;
    size_t drained;             /* bytes read and dropped while lingering */
    char out[1536];             /* a refusal */
    size_t out_len, out_off;
    struct http_exchange x;
    struct http_conn *next, *prev;   /* in the server's ready queue, busy list or returned list */
};

struct http_server {
    struct http_config cfg;
    int listen_fd[MAX_LISTEN];
    size_t n_listen;
    int wake_fd;                /* the loop's: stopping, or connections handed back */
    pthread_t loop_thread;
    bool loop_started;
    _Atomic bool stopping;
#ifdef HAVE_GNUTLS
    gnutls_certificate_credentials_t cred;
#endif
    bool tls;

    /* the loop's own */
    struct http_conn **waiting;
    size_t n_waiting, max_waiting, waiting_cap;
    struct pollfd *pfd;
    struct http_conn **pfd_conn;
    double accept_paused_until; /* out of descriptors: the listening sockets rest */

    /* shared, under mu */
    pthread_mutex_t mu;
    pthread_cond_t work;        /* a request is ready, or stopping */
    struct http_conn *ready, *ready_tail;   /* complete requests not yet taken by a worker */
    struct http_conn *busy;     /* connections on workers */
    struct http_conn *returned; /* handed back to the loop */
    int32_t n_busy;             /* places taken: ready and busy */
    pthread_t *workers;
    int32_t n_workers;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int ms_until(double deadline)
{
    double left = deadline - now_s();
    if (left <= 0) return 0;
    return left > 1e6 ? 1000000000 : (int)(left * 1000) + 1;
}

/* ---- bytes in and out ---------------------------------------------- */

enum io { IO_OK, IO_AGAIN, IO_EOF, IO_ERROR };

/* Read what is there (at most cap bytes), without waiting. */
static enum io read_some(struct http_conn *c, char *p, size_t cap, size_t *got)
{
    *got = 0;
    for (;;) {
        ssize_t r;
#ifdef HAVE_GNUTLS
        if (c->has_tls) {
            r = gnutls_record_recv(c->tls, p, cap);
            if (r == GNUTLS_E_INTERRUPTED) continue;
            if (r == GNUTLS_E_AGAIN) return IO_AGAIN;
            if (r == 0) return IO_EOF;
            if (r < 0) return r == GNUTLS_E_PREMATURE_TERMINATION ? IO_EOF : IO_ERROR;
            *got = (size_t)r;
            return IO_OK;
        }
#endif
        r = recv(c->fd, p, cap, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return IO_AGAIN;
        if (r < 0) return errno == ECONNRESET ? IO_EOF : IO_ERROR;
        if (r == 0) return IO_EOF;
        *got = (size_t)r;
        return IO_OK;
    }
}

/* Write what the socket takes now: the bytes written, 0 when it takes
 * none, -1 when the peer is gone.  (TLS: a call that took none is
 * repeated with the same bytes, as GnuTLS requires.) */
static ssize_t write_some(struct http_conn *c, const char *p, size_t n)
{
    for (;;) {
        ssize_t r;
#ifdef HAVE_GNUTLS
        if (c->has_tls) {
            r = gnutls_record_send(c->tls, p, n);
            if (r == GNUTLS_E_INTERRUPTED) continue;
            if (r == GNUTLS_E_AGAIN) return 0;
            return r < 0 ? -1 : r;
        }
#endif
        r = send(c->fd, p, n, MSG_NOSIGNAL);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        return r < 0 ? -1 : r;
    }
}

/* The events a connection that would block waits for. */
static short wait_events(const struct http_conn *c, bool writing)
{
#ifdef HAVE_GNUTLS
    if (c->has_tls) return gnutls_record_get_direction(c->tls) ? POLLOUT : POLLIN;
#endif
    return writing ? POLLOUT : POLLIN;
}

/* Write all of p (a worker's); a peer that takes nothing for the idle
 * timeout is gone. */
static bool conn_write(struct http_conn *c, const char *p, size_t n)
{
    double deadline = now_s() + c->h->cfg.idle_timeout_s;
    while (n > 0) {
        ssize_t r = write_some(c, p, n);
        if (r < 0) return false;
        if (r == 0) {
            struct pollfd pfd = {c->fd, wait_events(c, true), 0};
            int pr = poll(&pfd, 1, ms_until(deadline));
            if (pr == 0 || (pr < 0 && errno != EINTR)) return false;
            if (pr > 0 && (pfd.revents & (POLLERR | POLLHUP | POLLNVAL))) return false;
            continue;
        }
        p += r;
        n -= (size_t)r;
        deadline = now_s() + c->h->cfg.idle_timeout_s;
    }
    return true;
}

/* ---- responses ------------------------------------------------------ */

static const char *reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return status < 300 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
    }
}

/* The response head into out[cap]; length < 0: a streamed body.  Its
 * length, or 0 when it does not fit.  A 304 has no body and no length:
 * a Content-Length there would have to be the 200's (RFC 9110 8.6). */
static size_t format_head(struct http_exchange *x, int status, const char *content_type, const char *extra,
                          long long length, char *out, size_t cap)
{
    const struct http_request *q = &x->req;
    if (!q->keep_alive || atomic_load(&x->c->h->stopping)) x->close = true;
    if (length < 0 && q->minor == 0) x->close = true;   /* the close ends the body */
    x->chunked = length < 0 && q->minor == 1;
    char date[64];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    char len_line[64] = "";
    if (length >= 0 && status != 304) snprintf(len_line, sizeof len_line, "Content-Length: %lld\r\n", length);
    int n = snprintf(out, cap,
                     "HTTP/1.1 %d %s\r\nDate: %s\r\n%s%s%s%s%s%s%s\r\n", status, reason(status), date,
                     content_type ? "Content-Type: " : "", content_type ? content_type : "",
                     content_type ? "\r\n" : "", len_line, x->chunked ? "Transfer-Encoding: chunked\r\n" : "",
                     x->close ? "Connection: close\r\n" : q->minor == 0 ? "Connection: keep-alive\r\n" : "",
                     extra ? extra : "");
    x->started = true;
    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

static bool write_head(struct http_exchange *x, int status, const char *content_type, const char *extra,
                       long long length)
{
    char head[1024];
    size_t n = format_head(x, status, content_type, extra, length, head, sizeof head);
    return n > 0 && conn_write(x->c, head, n);
}

bool http_respond(struct http_exchange *x, int status, const char *content_type, const char *extra_headers,
                  const char *body, size_t len)
{
    if (x->started) return false;
    x->ended = true;
    if (!write_head(x, status, content_type, extra_headers, (long long)len)) return false;
    return x->head_only || len == 0 || conn_write(x->c, body, len);
}

bool http_stream_begin(struct http_exchange *x, int status, const char *content_type, const char *extra_headers)
{
    if (x->started) return false;
    return write_head(x, status, content_type, extra_headers, -1);
}

bool http_stream_write(struct http_exchange *x, const char *p, size_t n)
{
    if (!x->started || x->ended) return false;
    if (x->head_only || n == 0) return true;
    if (!x->chunked) return conn_write(x->c, p, n);
    char size[24];
    int k = snprintf(size, sizeof size, "%zx\r\n", n);
    return conn_write(x->c, size, (size_t)k) && conn_write(x->c, p, n) && conn_write(x->c, "\r\n", 2);
}

void http_stream_end(struct http_exchange *x, bool complete)
{
    if (!x->started && !complete) x->started = true;   /* no response at all */
    if (!x->started || x->ended) return;
    x->ended = true;
    if (!complete) x->close = true;
    else if (x->chunked && !x->head_only && !conn_write(x->c, "0\r\n\r\n", 5)) x->close = true;
}

bool http_started(const struct http_exchange *x) { return x->started; }

const char *http_method(const struct http_exchange *x) { return x->req.method; }

const char *http_path(const struct http_exchange *x) { return x->path; }

/* The path of a target in origin form or absolute form (RFC 9112 3.2),
 * in the request's copy of its head: the query is cut off. */
static const char *target_path(char *target)
{
    char *p = target;
    if (strncasecmp(p, "http://", 7) == 0 || strncasecmp(p, "https://", 8) == 0) {
        p = strstr(p, "//") + 2;
        p = strchr(p, '/');
        if (!p) return "/";
    }
    char *q = strchr(p, '?');
    if (q) *q = '\0';
    return p;
}

const char *http_request_header(const struct http_exchange *x, const char *name)
{
    return http_header(&x->req, name);
}

const char *http_body(const struct http_exchange *x, size_t *len)
{
    *len = x->body.len;
    return x->body.p;
}

int http_watch_fd(const struct http_exchange *x) { return x->c->fd; }

short http_watch_events(const struct http_exchange *x) { return x->half_closed ? 0 : POLLRDHUP; }

void http_peer_half_closed(struct http_exchange *x) { x->half_closed = true; }

/* A refusal of this layer: the status, a JSON error in the API's shape,
 * and the close.  It is formatted into c->out, for the loop to write
 * without blocking (ST_SENDING), or a worker to write at once. */
static void refuse(struct http_conn *c, int status, const char *message, const char *extra)
{
    static const struct {
        int status;
        const char *code;
    } codes[] = {
        {400, "bad_request"},        {408, "request_timeout"},   {411, "length_required"},
        {413, "request_too_large"},  {414, "uri_too_long"},      {417, "expectation_failed"},
        {431, "headers_too_large"},  {501, "not_implemented"},   {503, "too_many_connections"},
        {505, "http_version_not_supported"},
    };
    const char *code = "bad_request";
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (codes[i].status == status) code = codes[i].code;
    char body[512];
    int n = snprintf(body, sizeof body,
                     "{\"error\":{\"message\":\"%s\",\"type\":\"%s\",\"param\":null,\"code\":\"%s\"}}", message,
                     status >= 500 ? "server_error" : "invalid_request_error", code);
    struct http_exchange *x = &c->x;
    if (!x->req.method) x->req.minor = 1;   /* no request line read: answer as HTTP/1.1 */
    x->req.keep_alive = false;
    x->head_only = false;
    x->started = false;
    x->ended = true;
    size_t head = format_head(x, status, "application/json", extra, n, c->out, sizeof c->out);
    if (head == 0 || head + (size_t)n > sizeof c->out) head = n = 0;   /* cannot be: the close alone */
    memcpy(c->out + head, body, (size_t)n);
    c->out_len = head + (size_t)n;
    c->out_off = 0;
    c->state = ST_SENDING;
    if (c->h->cfg.refused) c->h->cfg.refused(c->h->cfg.user, status);
}

/* ---- requests ------------------------------------------------------- */

/* Drop the first n bytes of the input. */
static void consume(struct http_conn *c, size_t n)
{
    memmove(c->in, c->in + n, c->in_len - n);
    c->in_len -= n;
}

/* Ready for the connection's next request (from what is buffered). */
static void next_request(struct http_conn *c)
{
    free(c->x.body.p);
    c->x = (struct http_exchange){.c = c};
    c->in_body = false;
    c->request_deadline = c->in_len > 0 ? now_s() + c->h->cfg.request_timeout_s : INFINITY;
}

enum verdict {
    V_MORE,       /* no complete request yet */
    V_READY,      /* a complete request */
    V_REFUSED,    /* refused: c->out holds the answer (ST_SENDING) */
    V_CLOSE,      /* close without an answer */
};

/* Parse what is buffered: the head, then the body, whose data moves to
 * the exchange.  Reads nothing and never waits. */
static enum verdict advance(struct http_conn *c)
{
    struct http_server *h = c->h;
    struct http_exchange *x = &c->x;
    struct http_error err;
    if (!c->in_body) {
        enum http_result r = http_parse_head(c->in, c->in_len, h->cfg.max_body, &x->req, &err);
        if (r == HTTP_NEED_MORE) return c->in_len == sizeof c->in ? V_CLOSE : V_MORE;
        if (r == HTTP_ERROR) {
            refuse(c, err.status, err.message, NULL);
            return V_REFUSED;
        }
        x->head_only = strcmp(x->req.method, "HEAD") == 0;
        x->path = target_path((char *)x->req.target);
        consume(c, x->req.head_len);
        c->in_body = true;
        http_body_init(&c->body, &x->req, h->cfg.max_body);
        /* the client waits for this before its body: a socket that cannot
         * take 25 bytes at once is not read by its peer */
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (x->req.expect_continue && c->in_len == 0 && write_some(c, cont, sizeof cont - 1) != sizeof cont - 1)
            return V_CLOSE;
    }
    for (;;) {
        size_t used, off, len;
        enum http_result r = http_parse_body(&c->body, c->in, c->in_len, &used, &off, &len, &err);
        if (r == HTTP_ERROR) {
            refuse(c, err.status, err.message, NULL);
            return V_REFUSED;
        }
        if (r == HTTP_DATA && !buf_add(&x->body, c->in + off, len)) {
            refuse(c, 500, "out of memory", NULL);
            return V_REFUSED;
        }
        consume(c, used);
        if (r == HTTP_DONE) return buf_add(&x->body, "", 0) ? V_READY : V_CLOSE;
        if (r == HTTP_NEED_MORE) return c->in_len == sizeof c->in ? V_CLOSE : V_MORE;
    }
}

/* ---- connections ---------------------------------------------------- */

static void conn_free(struct http_conn *c)
{
#ifdef HAVE_GNUTLS
    if (c->has_tls) {
        if (c->state != ST_HANDSHAKE) gnutls_bye(c->tls, GNUTLS_SHUT_WR);   /* non-blocking: best effort */
        gnutls_deinit(c->tls);
    }
#endif
    if (c->fd >= 0) close(c->fd);
    free(c->x.body.p);
    free(c);
}

static void list_push(struct http_conn **head, struct http_conn *c)
{
    c->prev = NULL;
    c->next = *head;
    if (*head) (*head)->prev = c;
    *head = c;
}

static void list_remove(struct http_conn **head, struct http_conn *c)
{
    if (c->prev) c->prev->next = c->next;
    else *head = c->next;
    if (c->next) c->next->prev = c->prev;
    c->next = c->prev = NULL;
}

/* A worker is done with c: it goes back to the loop in its state, or is
 * closed when the server stops.  Its place is free again. */
static void give_back(struct http_conn *c)
{
    struct http_server *h = c->h;
    pthread_mutex_lock(&h->mu);
    list_remove(&h->busy, c);
    h->n_busy--;
    const bool stopping = atomic_load(&h->stopping);
    if (!stopping) list_push(&h->returned, c);
    pthread_mutex_unlock(&h->mu);
    if (stopping) {
        conn_free(c);
        return;
    }
    uint64_t one = 1;
    ssize_t r = write(h->wake_fd, &one, sizeof one);
    (void)r;
}

/* Close the sending side and read what the peer still sends for a
 * moment, before the close: closing a socket with unread input makes
 * the kernel send a reset, which can destroy the response that was just
 * written (a refused request's unread body, say) before the peer reads
 * it.  false: close it now (TLS ends with its close_notify instead). */
static bool start_linger(struct http_conn *c)
{
    if (c->has_tls) return false;
    shutdown(c->fd, SHUT_WR);
    c->state = ST_LINGER;
    c->linger_deadline = now_s() + LINGER_S;
    c->drained = 0;
    return true;
}

/* ---- workers -------------------------------------------------------- */

/* Answer c's complete request, and the next ones already buffered;
 * then hand it back to the loop, which reads its next request, writes
 * a refusal, or closes it. */
static void serve(struct http_conn *c)
{
    struct http_server *h = c->h;
    enum verdict v = V_READY;
    while (v == V_READY) {
        h->cfg.handle(h->cfg.user, &c->x);
        if (!c->x.started) {
            refuse(c, 500, "the request was not answered", NULL);
            break;
        }
        if (!c->x.ended) http_stream_end(&c->x, true);
        const bool close_it = c->x.close || atomic_load(&h->stopping);
        next_request(c);
        v = close_it ? V_CLOSE : advance(c);
    }
    if (v == V_MORE) c->state = ST_REQUEST;
    if (v == V_CLOSE) {   /* nothing to write: the loop lingers and closes */
        c->state = ST_SENDING;
        c->out_len = c->out_off = 0;
    }
    c->waiting_since = c->last_io = now_s();
    give_back(c);
}

static void *worker_main(void *arg)
{
    struct http_server *h = arg;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (!h->ready && !atomic_load(&h->stopping)) pthread_cond_wait(&h->work, &h->mu);
        if (atomic_load(&h->stopping)) break;
        struct http_conn *c = h->ready;
        h->ready = c->next;
        if (!h->ready) h->ready_tail = NULL;
        list_push(&h->busy, c);
        pthread_mutex_unlock(&h->mu);
        serve(c);
        pthread_mutex_lock(&h->mu);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* ---- the loop ------------------------------------------------------- */

static void waiting_add(struct http_server *h, struct http_conn *c)
{
    h->waiting[h->n_waiting++] = c;
}

/* Take c out of the waiting set (i: its index). */
static void waiting_remove_at(struct http_server *h, size_t i)
{
    h->waiting[i] = h->waiting[--h->n_waiting];
}

static void waiting_remove(struct http_server *h, struct http_conn *c)
{
    for (size_t i = 0; i < h->n_waiting; i++)
        if (h->waiting[i] == c) {
            waiting_remove_at(h, i);
            return;
        }
}

static void drop(struct http_server *h, struct http_conn *c)
{
    waiting_remove(h, c);
    conn_free(c);
}

/* A complete request: a place and a worker for it (true: c is the
 * worker's now), or 503. */
static bool dispatch(struct http_server *h, struct http_conn *c)
{
    pthread_mutex_lock(&h->mu);
    bool placed = h->n_busy < h->cfg.max_connections;
    if (placed) {
        h->n_busy++;
        if (h->n_workers < h->n_busy) {
            if (pthread_create(&h->workers[h->n_workers], NULL, worker_main, h) == 0) h->n_workers++;
            else placed = false, h->n_busy--;
        }
    }
    if (placed) {
        waiting_remove(h, c);
        c->state = ST_HANDLING;
        c->next = NULL;
        c->prev = h->ready_tail;
        if (h->ready_tail) h->ready_tail->next = c;
        else h->ready = c;
        h->ready_tail = c;
        pthread_cond_signal(&h->work);
    }
    pthread_mutex_unlock(&h->mu);
    if (!placed)
        refuse(c, 503, "every connection is busy with a request (--max-connections); retry later",
               "Retry-After: 1\r\n");
    return placed;
}

/* Write what the socket takes of a refusal, then linger; done: false
 * when c is closed. */
static bool send_refusal(struct http_server *h, struct http_conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t r = write_some(c, c->out + c->out_off, c->out_len - c->out_off);
        if (r < 0) {
            drop(h, c);
            return false;
        }
        if (r == 0) return true;
        c->out_off += (size_t)r;
        c->last_io = now_s();
    }
    if (!start_linger(c)) {
        drop(h, c);
        return false;
    }
    return true;
}

/* Drain a lingering connection; close it at its end. */
static void drain(struct http_server *h, struct http_conn *c)
{
    char scratch[4096];
    for (;;) {
        ssize_t r = recv(c->fd, scratch, sizeof scratch, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (r <= 0 || (c->drained += (size_t)r) >= LINGER_BYTES) break;
    }
    drop(h, c);
}

/* Do what c can do now, without waiting. */
static void service(struct http_server *h, struct http_conn *c)
{
    for (;;) {
        switch (c->state) {
        case ST_HANDSHAKE: {
#ifdef HAVE_GNUTLS
            int r = gnutls_handshake(c->tls);
            if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED) return;
            if (r != GNUTLS_E_SUCCESS) {
                drop(h, c);
                return;
            }
#endif
            c->state = ST_REQUEST;
            c->last_io = now_s();
            c->request_deadline = INFINITY;
            continue;
        }
        case ST_REQUEST: {
            enum verdict v = advance(c);
            if (v == V_READY) {
                if (dispatch(h, c)) return;   /* the worker's now */
                continue;
            }
            if (v == V_REFUSED) continue;
            if (v == V_CLOSE) {
                drop(h, c);
                return;
            }
            size_t got;
            enum io r = read_some(c, c->in + c->in_len, sizeof c->in - c->in_len, &got);
            if (r == IO_AGAIN) return;
            if (r != IO_OK) {
                drop(h, c);
                return;
            }
            if (c->in_len == 0 && !c->in_body) c->request_deadline = now_s() + h->cfg.request_timeout_s;
            c->in_len += got;
            c->last_io = now_s();
            continue;
        }
        case ST_SENDING:
            if (!send_refusal(h, c) || c->state == ST_SENDING) return;
            continue;
        case ST_LINGER:
            drain(h, c);
            return;
        case ST_HANDLING:
            return;
        }
    }
}

/* When c's wait ends, and what happens then. */
static double deadline_of(const struct http_server *h, const struct http_conn *c)
{
    switch (c->state) {
    case ST_HANDSHAKE: return c->request_deadline;
    case ST_REQUEST: {
        double idle = c->last_io + h->cfg.idle_timeout_s;
        return c->request_deadline < idle ? c->request_deadline : idle;
    }
    case ST_SENDING: return c->last_io + h->cfg.idle_timeout_s;
    case ST_LINGER: return c->linger_deadline;
    case ST_HANDLING: break;
    }
    return INFINITY;
}

static void expire(struct http_server *h, struct http_conn *c)
{
    /* a request under way gets 408; a silent connection, and any other
     * wait, ends with the close */
    if (c->state == ST_REQUEST && (c->in_len > 0 || c->in_body)) {
        refuse(c, 408, "the request did not arrive in time", NULL);
        c->last_io = now_s();
        service(h, c);
        return;
    }
    drop(h, c);
}

/* Room in the waiting set for a new connection: the one that has waited
 * longest goes, unless it came within the grace; false: no room. */
static bool make_room(struct http_server *h, double now)
{
    if (h->n_waiting < h->max_waiting) return true;
    struct http_conn *oldest = NULL;
    for (size_t i = 0; i < h->n_waiting; i++)
        if (!oldest || h->waiting[i]->waiting_since < oldest->waiting_since) oldest = h->waiting[i];
    if (!oldest || now - oldest->waiting_since < WAITING_GRACE_S) return false;
    drop(h, oldest);
    return true;
}

static void accept_some(struct http_server *h, int lfd)
{
    for (int k = 0; k < ACCEPTS_PER_WAKE; k++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                h->accept_paused_until = now_s() + 0.1;
            return;
        }
        const double now = now_s();
        struct http_conn *c = make_room(h, now) ? calloc(1, sizeof *c) : NULL;
        if (!c) {
            close(fd);
            continue;
        }
        c->h = h;
        c->fd = fd;
        c->waiting_since = c->last_io = now;
        c->x = (struct http_exchange){.c = c};
        c->state = ST_REQUEST;
        c->request_deadline = INFINITY;
#ifdef HAVE_GNUTLS
        if (h->tls) {
            if (gnutls_init(&c->tls, GNUTLS_SERVER | GNUTLS_NONBLOCK) < 0) {
                close(fd);
                free(c);
                continue;
            }
            c->has_tls = true;
            c->state = ST_HANDSHAKE;
            c->request_deadline = now + h->cfg.request_timeout_s;
            if (gnutls_set_default_priority(c->tls) < 0 ||
                gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, h->cred) < 0) {
                conn_free(c);
                continue;
            }
            gnutls_transport_set_int(c->tls, fd);
        }
#endif
        waiting_add(h, c);
        service(h, c);   /* a request that came with the connection is read now */
    }
}

/* Connections handed back by the workers. */
static void take_returned(struct http_server *h)
{
    uint64_t n;
    ssize_t r = read(h->wake_fd, &n, sizeof n);
    (void)r;
    pthread_mutex_lock(&h->mu);
    struct http_conn *list = h->returned;
    h->returned = NULL;
    pthread_mutex_unlock(&h->mu);
    while (list) {
        struct http_conn *c = list;
        list = c->next;
        c->next = c->prev = NULL;
        waiting_add(h, c);
        service(h, c);
    }
}

static void *loop_main(void *arg)
{
    struct http_server *h = arg;
    while (!atomic_load(&h->stopping)) {
        double now = now_s();
        double next = now + 1;
        size_t n = 0;
        for (size_t i = h->n_waiting; i-- > 0;) {
            struct http_conn *c = h->waiting[i];
            double d = deadline_of(h, c);
            if (d <= now) {
                expire(h, c);   /* may remove c (and only c) from the set */
                continue;
            }
        }
        for (size_t i = 0; i < h->n_waiting; i++) {
            struct http_conn *c = h->waiting[i];
            double d = deadline_of(h, c);
            if (d < next) next = d;
            h->pfd[n] = (struct pollfd){c->fd, wait_events(c, c->state == ST_SENDING), 0};
            h->pfd_conn[n++] = c;
        }
        const size_t n_conns = n;
        const bool accepting = now >= h->accept_paused_until && h->n_waiting < h->waiting_cap;
        if (!accepting && h->accept_paused_until > now && h->accept_paused_until < next)
            next = h->accept_paused_until;
        if (accepting)
            for (size_t i = 0; i < h->n_listen; i++) h->pfd[n++] = (struct pollfd){h->listen_fd[i], POLLIN, 0};
        h->pfd[n++] = (struct pollfd){h->wake_fd, POLLIN, 0};
        int r = poll(h->pfd, n, ms_until(next));
        if (atomic_load(&h->stopping)) break;
        if (r < 0) continue;
        for (size_t i = 0; i < n_conns; i++)
            if (h->pfd[i].revents) service(h, h->pfd_conn[i]);
        if (accepting)
            for (size_t i = 0; i < h->n_listen; i++)
                if (h->pfd[n_conns + i].revents & POLLIN) accept_some(h, h->listen_fd[i]);
        if (h->pfd[n - 1].revents & POLLIN) take_returned(h);
    }
    for (size_t i = 0; i < h->n_waiting; i++) conn_free(h->waiting[i]);
    h->n_waiting = 0;
    return NULL;
}

/* ---- the listener --------------------------------------------------- */

bool http_server_start(const struct http_config *cfg, struct http_server **out, int *port, char *why,
                       size_t why_cap)
{
    struct http_server *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(why, why_cap, "out of memory");
        return false;
    }
    h->cfg = *cfg;
    h->wake_fd = -1;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->work, NULL);
    if (cfg->tls_key_pem && cfg->tls_cert_pem) {
#ifdef HAVE_GNUTLS
        gnutls_datum_t key = {(unsigned char *)cfg->tls_key_pem, (unsigned)strlen(cfg->tls_key_pem)};
        gnutls_datum_t cert = {(unsigned char *)cfg->tls_cert_pem, (unsigned)strlen(cfg->tls_cert_pem)};
        int r = gnutls_certificate_allocate_credentials(&h->cred);
        if (r >= 0) r = gnutls_certificate_set_x509_key_mem(h->cred, &cert, &key, GNUTLS_X509_FMT_PEM);
        if (r < 0) {
            snprintf(why, why_cap, "the TLS key or certificate: %s", gnutls_strerror(r));
            http_server_stop(h);
            return false;
        }
        h->tls = true;
#else
        snprintf(why, why_cap, "this hearth was built without TLS (configure found no GnuTLS); serve plain "
                 "HTTP behind a reverse proxy that terminates TLS instead");
        http_server_stop(h);
        return false;
#endif
    }
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", cfg->port);
    int gai = getaddrinfo(cfg->host, portstr, &hints, &ai);
    if (gai) {
        snprintf(why, why_cap, "--host %s: %s", cfg->host, gai_strerror(gai));
        http_server_stop(h);
        return false;
    }
    /* the first address that the host names (as before): one socket */
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    int err = fd < 0 ? errno : 0;
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (ai->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0) err = errno;
    }
    freeaddrinfo(ai);
    if (err) {
        snprintf(why, why_cap, "cannot listen on %s port %d: %s", cfg->host, cfg->port, strerror(err));
        if (fd >= 0) close(fd);
        http_server_stop(h);
        return false;
    }
    h->listen_fd[h->n_listen++] = fd;
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    *port = cfg->port;
    if (getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
        *port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                                : ((struct sockaddr_in *)&sa)->sin_port);
    /* the waiting set: a multiple of the places, within the descriptors
     * that the places and the rest of the process leave */
    size_t max_waiting = (size_t)cfg->max_connections * WAITING_PER_PLACE;
    if (max_waiting < MIN_WAITING) max_waiting = MIN_WAITING;
    if (max_waiting > MAX_WAITING) max_waiting = MAX_WAITING;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        const rlim_t reserved = 64 + (rlim_t)cfg->max_connections;
        const size_t room = rl.rlim_cur > reserved + 16 ? (size_t)(rl.rlim_cur - reserved) : 16;
        if (room < max_waiting) max_waiting = room;
    }
    h->max_waiting = max_waiting;
    h->waiting_cap = max_waiting + (size_t)cfg->max_connections;
    h->waiting = calloc(h->waiting_cap, sizeof *h->waiting);
    h->pfd = calloc(h->waiting_cap + MAX_LISTEN + 1, sizeof *h->pfd);
    h->pfd_conn = calloc(h->waiting_cap, sizeof *h->pfd_conn);
    h->workers = calloc((size_t)cfg->max_connections, sizeof *h->workers);
    h->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (!h->waiting || !h->pfd || !h->pfd_conn || !h->workers || h->wake_fd < 0 ||
        pthread_create(&h->loop_thread, NULL, loop_main, h) != 0) {
        snprintf(why, why_cap, "cannot start the connections' thread");
        http_server_stop(h);
        return false;
    }
    h->loop_started = true;
    *out = h;
    return true;
}

void http_server_stop(struct http_server *h)
{
    if (!h) return;
    atomic_store(&h->stopping, true);
    if (h->loop_started) {   /* the loop closes the connections it holds */
        uint64_t one = 1;
        ssize_t r = write(h->wake_fd, &one, sizeof one);
        (void)r;
        pthread_join(h->loop_thread, NULL);
    }
    for (size_t i = 0; i < h->n_listen; i++) close(h->listen_fd[i]);
    h->n_listen = 0;
    /* the workers' connections end; each worker closes its own */
    pthread_mutex_lock(&h->mu);
    for (struct http_conn *c = h->busy; c; c = c->next) shutdown(c->fd, SHUT_RDWR);
    pthread_cond_broadcast(&h->work);
    pthread_mutex_unlock(&h->mu);
    for (int32_t i = 0; i < h->n_workers; i++) pthread_join(h->workers[i], NULL);
    /* what no worker took, and what came back after the loop ended */
    for (struct http_conn *list[2] = {h->ready, h->returned}, **l = list; l < list + 2; l++)
        while (*l) {
            struct http_conn *c = *l;
            *l = c->next;
            conn_free(c);
        }
    if (h->wake_fd >= 0) close(h->wake_fd);
#ifdef HAVE_GNUTLS
    if (h->cred) gnutls_certificate_free_credentials(h->cred);
#endif
    free(h->waiting);
    free(h->pfd);
    free(h->pfd_conn);
    free(h->workers);
    pthread_cond_destroy(&h->work);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

/*
 * http.c -- hearth serve's HTTP/1.1 connections (see http.h).
 *
 * Threads: one accepts, one runs each connection; a connection's thread
 * reads a request (http_parse.c), calls the server's handler, which
 * answers on the same thread, and reads the next request from the bytes
 * left over (pipelining) until the connection closes.  The accept thread
 * never reads or waits on a client: when every connection is taken it
 * drops the one that has waited longest without completing its request,
 * or answers 503 at once when all of them are busy with one.
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

enum phase { PHASE_HEAD, PHASE_BODY, PHASE_HANDLING };

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
    pthread_t thread;
    char in[HTTP_MAX_HEAD + READ_CHUNK];
    size_t in_len;
    enum phase phase;
    double waiting_since;       /* since when it waits for a complete request */
    bool evicted;               /* dropped to make room; its socket is shut down */
    bool done;                  /* its thread is over (to be joined) */
    struct http_exchange x;
    struct http_conn *next, *prev;
};

struct http_server {
    struct http_config cfg;
    int listen_fd[MAX_LISTEN];
    size_t n_listen;
    int stop_fd;
    pthread_t accept_thread;
    bool accept_started;
    pthread_mutex_t mu;
    struct http_conn *conns;    /* running and finished threads */
    int32_t n_live;             /* connections counted against max_connections */
    _Atomic bool stopping;
#ifdef HAVE_GNUTLS
    gnutls_certificate_credentials_t cred;
#endif
    bool tls;
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

enum io { IO_OK, IO_EOF, IO_TIMEOUT, IO_ERROR };

/* Read what is there (at most cap bytes) by the deadline. */
static enum io conn_read(struct http_conn *c, char *p, size_t cap, size_t *got, double deadline)
{
    *got = 0;
    for (;;) {
        ssize_t r;
#ifdef HAVE_GNUTLS
        if (c->has_tls && gnutls_record_check_pending(c->tls) > 0) goto read_now;
#endif
        struct pollfd pfd = {c->fd, POLLIN, 0};
        int pr = poll(&pfd, 1, ms_until(deadline));
        if (pr < 0 && errno == EINTR) continue;
        if (pr < 0) return IO_ERROR;
        if (pr == 0) return IO_TIMEOUT;
#ifdef HAVE_GNUTLS
    read_now:
        if (c->has_tls) {
            r = gnutls_record_recv(c->tls, p, cap);
            if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED) continue;
            if (r == 0) return IO_EOF;
            if (r < 0) return r == GNUTLS_E_PREMATURE_TERMINATION ? IO_EOF : IO_ERROR;
            *got = (size_t)r;
            return IO_OK;
        }
#endif
        r = recv(c->fd, p, cap, 0);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
        if (r < 0) return errno == ECONNRESET ? IO_EOF : IO_ERROR;
        if (r == 0) return IO_EOF;
        *got = (size_t)r;
        return IO_OK;
    }
}

/* Write all of p; a peer that takes nothing for the idle timeout is gone. */
static bool conn_write(struct http_conn *c, const char *p, size_t n)
{
    double deadline = now_s() + c->h->cfg.idle_timeout_s;
    while (n > 0) {
        ssize_t r;
        bool again;
#ifdef HAVE_GNUTLS
        if (c->has_tls) {
            r = gnutls_record_send(c->tls, p, n);
            again = r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED;
            if (r < 0 && !again) return false;
        } else
#endif
        {
            r = send(c->fd, p, n, MSG_NOSIGNAL);
            again = r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
            if (r < 0 && !again) return false;
        }
        if (again) {
            struct pollfd pfd = {c->fd, POLLOUT, 0};
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

/* The response head; length < 0: a streamed body. */
static bool write_head(struct http_exchange *x, int status, const char *content_type, const char *extra,
                       long long length)
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
    if (length >= 0) snprintf(len_line, sizeof len_line, "Content-Length: %lld\r\n", length);
    char head[1024];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nDate: %s\r\n%s%s%s%s%s%s%s\r\n", status, reason(status), date,
                     content_type ? "Content-Type: " : "", content_type ? content_type : "",
                     content_type ? "\r\n" : "", len_line, x->chunked ? "Transfer-Encoding: chunked\r\n" : "",
                     x->close ? "Connection: close\r\n" : q->minor == 0 ? "Connection: keep-alive\r\n" : "",
                     extra ? extra : "");
    x->started = true;
    if (n < 0 || (size_t)n >= sizeof head) return false;
    return conn_write(x->c, head, (size_t)n);
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
 * and the close. */
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
    x->started = x->ended = false;
    http_respond(x, status, "application/json", extra, body, (size_t)n);
    if (c->h->cfg.refused) c->h->cfg.refused(c->h->cfg.user, status);
}

/* ---- a connection's thread ------------------------------------------ */

static void set_phase(struct http_conn *c, enum phase p)
{
    pthread_mutex_lock(&c->h->mu);
    c->phase = p;
    if (p == PHASE_HEAD) c->waiting_since = now_s();
    pthread_mutex_unlock(&c->h->mu);
}

/* Drop the first n bytes of the input. */
static void consume(struct http_conn *c, size_t n)
{
    memmove(c->in, c->in + n, c->in_len - n);
    c->in_len -= n;
}

/* More input by the request's deadline (or the idle timeout when no byte
 * of a request has come yet); false when the connection is over, after
 * a 408 where a request was under way. */
static bool read_more(struct http_conn *c, double request_deadline, bool under_way)
{
    const struct http_config *cfg = &c->h->cfg;
    if (c->in_len == sizeof c->in) return false;   /* the parsers bound what they wait for */
    double deadline = now_s() + cfg->idle_timeout_s;
    if (under_way && request_deadline < deadline) deadline = request_deadline;
    size_t got;
    enum io r = conn_read(c, c->in + c->in_len, sizeof c->in - c->in_len, &got, deadline);
    if (r == IO_OK) {
        c->in_len += got;
        return true;
    }
    if (r == IO_TIMEOUT && under_way && !c->evicted)
        refuse(c, 408, "the request did not arrive in time", NULL);
    return false;
}

/* Read one request: its head, then its body; false: close. */
static bool read_request(struct http_conn *c)
{
    struct http_server *h = c->h;
    struct http_exchange *x = &c->x;
    struct http_error err;
    set_phase(c, PHASE_HEAD);
    double request_deadline = c->in_len > 0 ? now_s() + h->cfg.request_timeout_s : INFINITY;
    for (;;) {
        enum http_result r = http_parse_head(c->in, c->in_len, h->cfg.max_body, &x->req, &err);
        if (r == HTTP_DONE) break;
        if (r == HTTP_ERROR) {
            refuse(c, err.status, err.message, NULL);
            return false;
        }
        const bool under_way = c->in_len > 0;
        if (!read_more(c, request_deadline, under_way)) return false;
        if (!under_way) request_deadline = now_s() + h->cfg.request_timeout_s;
    }
    x->head_only = strcmp(x->req.method, "HEAD") == 0;
    x->path = target_path((char *)x->req.target);
    consume(c, x->req.head_len);
    set_phase(c, PHASE_BODY);
    struct http_body b;
    http_body_init(&b, &x->req, h->cfg.max_body);
    if (x->req.expect_continue && c->in_len == 0 && !conn_write(c, "HTTP/1.1 100 Continue\r\n\r\n", 25))
        return false;
    for (;;) {
        size_t used, off, len;
        enum http_result r = http_parse_body(&b, c->in, c->in_len, &used, &off, &len, &err);
        if (r == HTTP_ERROR) {
            refuse(c, err.status, err.message, NULL);
            return false;
        }
        if (r == HTTP_DATA && !buf_add(&x->body, c->in + off, len)) {
            refuse(c, 500, "out of memory", NULL);
            return false;
        }
        consume(c, used);
        if (r == HTTP_DONE) break;
        if (r == HTTP_NEED_MORE && !read_more(c, request_deadline, true)) return false;
    }
    if (!x->body.p) buf_add(&x->body, "", 0);
    set_phase(c, PHASE_HANDLING);
    return true;
}

#ifdef HAVE_GNUTLS
static bool tls_handshake(struct http_conn *c)
{
    struct http_server *h = c->h;
    if (gnutls_init(&c->tls, GNUTLS_SERVER | GNUTLS_NONBLOCK) < 0) return false;
    c->has_tls = true;
    if (gnutls_set_default_priority(c->tls) < 0 ||
        gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, h->cred) < 0)
        return false;
    gnutls_transport_set_int(c->tls, c->fd);
    const double deadline = now_s() + h->cfg.request_timeout_s;
    for (;;) {
        int r = gnutls_handshake(c->tls);
        if (r == GNUTLS_E_SUCCESS) return true;
        if (r != GNUTLS_E_AGAIN && r != GNUTLS_E_INTERRUPTED) return false;
        struct pollfd pfd = {c->fd, gnutls_record_get_direction(c->tls) ? POLLOUT : POLLIN, 0};
        if (poll(&pfd, 1, ms_until(deadline)) <= 0) return false;
    }
}
#endif

/* Close the sending side and read what the peer still sends for a
 * moment, before the close: closing a socket with unread input makes
 * the kernel send a reset, which can destroy the response that was just
 * written (a refused request's unread body, say) before the peer reads
 * it. */
static void linger(struct http_conn *c)
{
    if (c->has_tls || c->evicted || atomic_load(&c->h->stopping)) return;
    shutdown(c->fd, SHUT_WR);
    const double deadline = now_s() + 2;
    size_t drained = 0;
    char scratch[4096];
    while (drained < (1u << 20)) {
        struct pollfd pfd = {c->fd, POLLIN, 0};
        if (poll(&pfd, 1, ms_until(deadline)) <= 0) return;
        ssize_t r = recv(c->fd, scratch, sizeof scratch, 0);
        if (r <= 0 && !(r < 0 && (errno == EAGAIN || errno == EINTR))) return;
        if (r > 0) drained += (size_t)r;
    }
}

static void *conn_main(void *arg)
{
    struct http_conn *c = arg;
    struct http_server *h = c->h;
#ifdef HAVE_GNUTLS
    if (h->tls && !tls_handshake(c)) goto out;
#endif
    while (!atomic_load(&h->stopping)) {
        c->x.c = c;
        c->x.req.method = NULL;
        c->x.path = NULL;
        c->x.body = (struct buf){0};
        c->x.head_only = c->x.started = c->x.chunked = c->x.ended = c->x.close = c->x.half_closed = false;
        bool ok = read_request(c);
        if (ok) {
            h->cfg.handle(h->cfg.user, &c->x);
            if (!c->x.started) refuse(c, 500, "the request was not answered", NULL);
            else if (!c->x.ended) http_stream_end(&c->x, true);
        }
        free(c->x.body.p);
        c->x.body = (struct buf){0};
        if (!ok || c->x.close) break;
    }
    linger(c);
#ifdef HAVE_GNUTLS
out:
    if (c->has_tls) {
        gnutls_bye(c->tls, GNUTLS_SHUT_WR);
        gnutls_deinit(c->tls);
    }
#endif
    pthread_mutex_lock(&h->mu);
    if (!c->evicted) h->n_live--;
    close(c->fd);
    c->fd = -1;
    c->done = true;
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* ---- accepting ------------------------------------------------------ */

/* Join the threads of connections that are over (all of them, when
 * stopping: their sockets are shut down first). */
static void reap(struct http_server *h, bool all)
{
    for (;;) {
        pthread_mutex_lock(&h->mu);
        struct http_conn *c = h->conns;
        while (c && !c->done && !all) c = c->next;
        if (c) {
            if (c->prev) c->prev->next = c->next;
            else h->conns = c->next;
            if (c->next) c->next->prev = c->prev;
        }
        pthread_mutex_unlock(&h->mu);
        if (!c) return;
        pthread_join(c->thread, NULL);
        free(c);
    }
}

/* Room for one more connection (h->mu held): the one that has waited
 * longest for a complete request is dropped; false when every
 * connection is busy with one. */
static bool make_room(struct http_server *h)
{
    if (h->n_live < h->cfg.max_connections) return true;
    struct http_conn *victim = NULL;
    for (struct http_conn *c = h->conns; c; c = c->next)
        if (!c->done && !c->evicted && c->phase != PHASE_HANDLING &&
            (!victim || c->waiting_since < victim->waiting_since))
            victim = c;
    if (!victim) return false;
    victim->evicted = true;
    h->n_live--;
    shutdown(victim->fd, SHUT_RDWR);
    return true;
}

static void accept_one(struct http_server *h, int lfd)
{
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    pthread_mutex_lock(&h->mu);
    const bool room = make_room(h);
    pthread_mutex_unlock(&h->mu);
    if (!room) {
        static const char busy[] =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
            "Connection: close\r\nContent-Length: 165\r\n\r\n"
            "{\"error\":{\"message\":\"every connection is busy with a request (--max-connections); retry later\","
            "\"type\":\"server_error\",\"param\":null,\"code\":\"too_many_connections\"}}";
        if (!h->tls) {
            ssize_t r = send(fd, busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)r;
        }
        close(fd);
        if (h->cfg.refused) h->cfg.refused(h->cfg.user, 503);
        return;
    }
    struct http_conn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return;
    }
    c->h = h;
    c->fd = fd;
    c->phase = PHASE_HEAD;
    c->waiting_since = now_s();
    pthread_mutex_lock(&h->mu);
    c->next = h->conns;
    if (h->conns) h->conns->prev = c;
    h->conns = c;
    h->n_live++;
    if (pthread_create(&c->thread, NULL, conn_main, c) != 0) {
        h->n_live--;
        h->conns = c->next;
        if (c->next) c->next->prev = NULL;
        close(fd);
        free(c);
    }
    pthread_mutex_unlock(&h->mu);
}

static void *accept_main(void *arg)
{
    struct http_server *h = arg;
    struct pollfd p[MAX_LISTEN + 1];
    for (;;) {
        for (size_t i = 0; i < h->n_listen; i++) p[i] = (struct pollfd){h->listen_fd[i], POLLIN, 0};
        p[h->n_listen] = (struct pollfd){h->stop_fd, POLLIN, 0};
        int r = poll(p, h->n_listen + 1, 1000);
        if (atomic_load(&h->stopping)) break;
        reap(h, false);
        if (r <= 0) continue;
        for (size_t i = 0; i < h->n_listen; i++)
            if (p[i].revents & POLLIN) accept_one(h, p[i].fd);
    }
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
    h->stop_fd = -1;
    pthread_mutex_init(&h->mu, NULL);
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
    h->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (h->stop_fd < 0 || pthread_create(&h->accept_thread, NULL, accept_main, h) != 0) {
        snprintf(why, why_cap, "cannot start the accepting thread");
        http_server_stop(h);
        return false;
    }
    h->accept_started = true;
    *out = h;
    return true;
}

void http_server_stop(struct http_server *h)
{
    if (!h) return;
    atomic_store(&h->stopping, true);
    if (h->accept_started) {
        uint64_t one = 1;
        ssize_t r = write(h->stop_fd, &one, sizeof one);
        (void)r;
        pthread_join(h->accept_thread, NULL);
    }
    for (size_t i = 0; i < h->n_listen; i++) close(h->listen_fd[i]);
    h->n_listen = 0;
    pthread_mutex_lock(&h->mu);
    for (struct http_conn *c = h->conns; c; c = c->next)
        if (c->fd >= 0) shutdown(c->fd, SHUT_RDWR);
    pthread_mutex_unlock(&h->mu);
    reap(h, true);
    if (h->stop_fd >= 0) close(h->stop_fd);
#ifdef HAVE_GNUTLS
    if (h->cred) gnutls_certificate_free_credentials(h->cred);
#endif
    pthread_mutex_destroy(&h->mu);
    free(h);
}

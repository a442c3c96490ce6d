/*
 * http.h -- hearth serve's HTTP/1.1 connections: the listening sockets,
 * an event loop that reads requests with http_parse.c under deadlines,
 * a thread for each request being answered (at most max_connections),
 * and responses with a length or streamed (chunked, or delimited by the
 * close for HTTP/1.0), over TLS when configured.  The server (server.c)
 * sees one exchange at a time: a complete request, and the functions
 * that answer it.
 */
#ifndef HEARTH_SERVER_HTTP_H
#define HEARTH_SERVER_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct http_exchange;
struct http_server;

struct http_config {
    const char *host;
    int port;                    /* 0: any free port */
    int32_t max_connections;     /* complete requests answered at once; beyond: 503 */
    size_t max_body;
    double idle_timeout_s;       /* a silent peer, and between requests */
    double request_timeout_s;    /* a whole request head and body, progress or not */
    const char *tls_key_pem;     /* both or neither */
    const char *tls_cert_pem;
    /* Answer one complete request (on a thread of its own, which may block). */
    void (*handle)(void *user, struct http_exchange *x);
    /* A request refused by this layer (framing, limits, deadline, load). */
    void (*refused)(void *user, int status);
    void *user;
};

/* Listen.  The port it got goes to *port; false with the reason in why. */
bool http_server_start(const struct http_config *cfg, struct http_server **out, int *port, char *why,
                       size_t why_cap);

/* Stop listening, end every connection, wait for their threads. */
void http_server_stop(struct http_server *h);

/* The request of an exchange. */
const char *http_method(const struct http_exchange *x);
const char *http_path(const struct http_exchange *x);
const char *http_request_header(const struct http_exchange *x, const char *name);
const char *http_body(const struct http_exchange *x, size_t *len);

/* The response.  extra_headers: "Name: value\r\n" lines, or NULL.  A
 * HEAD request gets the head alone.  false: the peer is gone. */
bool http_respond(struct http_exchange *x, int status, const char *content_type, const char *extra_headers,
                  const char *body, size_t len);

/* A response of unknown length: begun, written piece by piece, ended.
 * http_stream_end(x, false) ends it without its last chunk and closes
 * the connection, which the client sees as an incomplete message (and
 * before anything was written, closes it without a response). */
bool http_stream_begin(struct http_exchange *x, int status, const char *content_type, const char *extra_headers);
bool http_stream_write(struct http_exchange *x, const char *p, size_t n);
void http_stream_end(struct http_exchange *x, bool complete);
bool http_started(const struct http_exchange *x);

/* Watching the peer while a response is prepared: poll the socket
 * http_watch_fd() for http_watch_events() (POLLRDHUP until the peer has
 * shut its sending side down, then only POLLHUP and POLLERR, which poll
 * reports unasked).  After a POLLRDHUP the caller calls
 * http_peer_half_closed() and writes something, at once, so that a peer
 * that closed its socket answers with a reset (POLLHUP/POLLERR next)
 * while one that only half-closed reads the response. */
int http_watch_fd(const struct http_exchange *x);
short http_watch_events(const struct http_exchange *x);
void http_peer_half_closed(struct http_exchange *x);

#endif /* HEARTH_SERVER_HTTP_H */

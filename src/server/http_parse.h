/*
 * http_parse.h -- the bytes of an HTTP/1.1 request (RFC 9112) as hearth
 * serve receives them: the request head (request line and header fields)
 * and the framing of its body (Content-Length or the chunked transfer
 * coding).  Pure and incremental: no I/O and no allocation, so that the
 * connection layer (http.c), the unit test and the fuzz target run the
 * same code on the same bytes.  Every refusal carries the status it is
 * answered with and whether the connection must close after it.
 */
#ifndef HEARTH_SERVER_HTTP_PARSE_H
#define HEARTH_SERVER_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_MAX_HEAD 16384     /* bytes of a request head (431 beyond) */
#define HTTP_MAX_LINE 8192      /* bytes of the request line (414 beyond) */
#define HTTP_MAX_HEADERS 100    /* header fields of a request (431 beyond) */
#define HTTP_MAX_CHUNK_LINE 4096 /* a chunk-size line with its extensions */

enum http_result {
    HTTP_NEED_MORE,   /* nothing wrong so far; more bytes are needed */
    HTTP_DONE,        /* complete: a head, or the whole body */
    HTTP_DATA,        /* (body) a piece of the body's data */
    HTTP_ERROR,       /* refused: see struct http_error */
};

struct http_error {
    int status;       /* 400, 408, 411, 413, 414, 431, 501, 505 */
    bool close;       /* the connection cannot be read further */
    const char *message;
};

enum http_framing { HTTP_BODY_NONE, HTTP_BODY_LENGTH, HTTP_BODY_CHUNKED };

struct http_header {
    const char *name;   /* NUL-terminated, in the request's copy of its head */
    const char *value;  /* without the surrounding whitespace */
};

struct http_request {
    char head[HTTP_MAX_HEAD];   /* the head, its separators turned into NULs */
    size_t head_len;            /* bytes of the input the head took */
    const char *method, *target;
    int minor;                  /* HTTP/1.minor */
    struct http_header headers[HTTP_MAX_HEADERS];
    size_t n_headers;
    enum http_framing framing;
    uint64_t content_length;    /* HTTP_BODY_LENGTH */
    bool keep_alive;            /* the connection may carry another request */
    bool expect_continue;       /* Expect: 100-continue */
};

/* Parse a request head at the start of in[0, n).  HTTP_DONE: req is
 * filled and req->head_len bytes belong to it (the rest is its body or
 * the next request).  HTTP_NEED_MORE: no verdict yet (the limits are
 * checked on what is there, so a head that is already too long is
 * refused without waiting for its end).  A body larger than max_body is
 * refused here with 413 when its length is declared. */
enum http_result http_parse_head(const char *in, size_t n, uint64_t max_body, struct http_request *req,
                                 struct http_error *err);

/* The value of the request's header field name (case-insensitive), or
 * NULL.  Fields that appear several times: the first. */
const char *http_header(const struct http_request *req, const char *name);

/* Does the comma-separated list value hold token (case-insensitive)? */
bool http_list_has(const char *value, const char *token);

/* Does an If-None-Match value ("*", or a list of entity tags, each
 * "..." or W/"...") name etag (quoted)?  The weak comparison of RFC 9110
 * 8.8.3.2, as If-None-Match uses it; a value that is not such a list
 * matches nothing after the point where it stops being one. */
bool http_etag_match(const char *value, const char *etag);

/* Decoding a body: the state between calls of http_parse_body. */
struct http_body {
    enum http_framing framing;
    uint64_t left;              /* bytes of the body or of the chunk still to come */
    uint64_t total, max_body;   /* data so far; its limit */
    enum { CHUNK_SIZE, CHUNK_DATA, CHUNK_DATA_END, CHUNK_TRAILER, BODY_END } state;
    size_t trailer_bytes;
};

void http_body_init(struct http_body *b, const struct http_request *req, uint64_t max_body);

/* Take the next step of the body from in[0, n): *used bytes were taken.
 * HTTP_DATA: in[*data_off, *data_off + *data_len) is body data (within
 * the bytes taken).  HTTP_NEED_MORE: the bytes from *used on are an
 * incomplete line; call again with them and more.  HTTP_DONE: the body
 * (with a chunked body's trailer section) is complete.  A line or a size
 * that cannot be valid is refused at once, without waiting for more. */
enum http_result http_parse_body(struct http_body *b, const char *in, size_t n, size_t *used,
                                 size_t *data_off, size_t *data_len, struct http_error *err);

#endif /* HEARTH_SERVER_HTTP_PARSE_H */

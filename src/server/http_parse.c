/*
 * http_parse.c -- request heads and body framing of HTTP/1.1, rule by
 * rule from RFC 9112 (see http_parse.h).  The choices where the RFC
 * leaves one:
 *
 *   - a line may end in LF alone (2.2); a CR anywhere else is refused;
 *   - empty lines before the request line are skipped (2.2);
 *   - whitespace in the request line is exactly one SP (3), obs-fold
 *     (5.2) and whitespace between a field name and its colon (5.1) are
 *     refused with 400;
 *   - several Content-Length values that are all the same are one value
 *     (6.3, item 5); different ones are refused with 400 and a close;
 *   - the one transfer coding understood is "chunked", alone: any other
 *     coding is 501 and a close, Transfer-Encoding in an HTTP/1.0
 *     request or beside Content-Length is 400 and a close (6.1, 6.3);
 *   - a POST (or PUT, PATCH) without either is 411: hearth reads bodies
 *     only of declared length or chunked;
 *   - an HTTP/1.1 request without exactly one Host is 400 (3.2).
 */
#include "http_parse.h"

#include <string.h>
#include <strings.h>

static bool fail(struct http_error *err, int status, bool close, const char *message)
{
    err->status = status;
    err->close = close;
    err->message = message;
    return false;
}

/* tchar of RFC 9110 5.6.2 */
static bool is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* field-vchar, SP or HTAB (RFC 9110 5.5): what a field value may hold */
static bool is_field_char(unsigned char c)
{
    return c == '\t' || (c >= ' ' && c != 0x7f);
}

static bool is_hex(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static unsigned hex_value(unsigned char c)
{
    return c <= '9' ? (unsigned)(c - '0') : (unsigned)((c | 0x20) - 'a' + 10);
}

bool http_list_has(const char *value, const char *token)
{
    const size_t tn = strlen(token);
    for (const char *p = value; p && *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',') p++;
        const char *e = p;
        while (*e && *e != ',') e++;
        const char *t = e;
        while (t > p && (t[-1] == ' ' || t[-1] == '\t')) t--;
        if ((size_t)(t - p) == tn && strncasecmp(p, token, tn) == 0) return true;
        p = e;
    }
    return false;
}

bool http_etag_match(const char *value, const char *etag)
{
    const size_t n = strlen(etag);
    for (const char *p = value;;) {
        while (*p == ' ' || *p == '\t' || *p == ',') p++;
        const char *end;
        if (*p == '*') {
            end = p + 1;
        } else {
            if (p[0] == 'W' && p[1] == '/') p += 2;
            if (*p != '"') return false;
            /* an entity tag's characters are any but the quote (a comma too) */
            end = strchr(p + 1, '"');
            if (!end) return false;
            end++;
        }
        const char *next = end;
        while (*next == ' ' || *next == '\t') next++;
        if (*next && *next != ',') return false;   /* not a list element */
        if (*p == '*' || ((size_t)(end - p) == n && memcmp(p, etag, n) == 0)) return true;
        p = next;
    }
}

const char *http_header(const struct http_request *req, const char *name)
{
    for (size_t i = 0; i < req->n_headers; i++)
        if (strcasecmp(req->headers[i].name, name) == 0) return req->headers[i].value;
    return NULL;
}

/* Where the head ends (the byte after its empty line) within in[0, n),
 * or 0; a bare CR or a NUL anywhere, or a head past the limits, is
 * refused at once. */
static size_t head_end(const char *in, size_t n, size_t start, bool *refused, struct http_error *err)
{
    *refused = false;
    size_t line_start = start;
    bool first = true;
    for (size_t i = start; i < n; i++) {
        const unsigned char c = (unsigned char)in[i];
        if (c == '\0') return *refused = true, fail(err, 400, true, "a NUL byte in the request head"), 0;
        if (c == '\r') {
            if (i + 1 < n && in[i + 1] != '\n')
                return *refused = true, fail(err, 400, true, "a CR not followed by LF in the request head"), 0;
            continue;
        }
        if (c != '\n') {
            if (first && i - start >= HTTP_MAX_LINE)
                return *refused = true, fail(err, 414, true, "the request line is too long"), 0;
            if (i - start >= HTTP_MAX_HEAD - 1)
                return *refused = true, fail(err, 431, true, "the request head is too large"), 0;
            continue;
        }
        size_t len = i - line_start;
        if (len > 0 && in[i - 1] == '\r') len--;
        if (len == 0 && !first) return i + 1;
        first = false;
        line_start = i + 1;
    }
    if (n - start >= HTTP_MAX_HEAD)
        return *refused = true, fail(err, 431, true, "the request head is too large"), 0;
    return 0;
}

static bool parse_request_line(char *line, struct http_request *req, struct http_error *err)
{
    char *sp1 = strchr(line, ' ');
    if (!sp1 || sp1 == line) return fail(err, 400, true, "a malformed request line");
    *sp1 = '\0';
    for (const char *p = line; *p; p++)
        if (!is_tchar((unsigned char)*p)) return fail(err, 400, true, "a malformed method");
    char *target = sp1 + 1;
    char *sp2 = strchr(target, ' ');
    if (!sp2 || sp2 == target) return fail(err, 400, true, "a malformed request line");
    *sp2 = '\0';
    for (const unsigned char *p = (const unsigned char *)target; *p; p++)
        if (*p <= ' ' || *p >= 0x7f) return fail(err, 400, true, "a malformed request target");
    const char *v = sp2 + 1;
    if (strncmp(v, "HTTP/", 5) != 0 || !(v[5] >= '0' && v[5] <= '9') || v[6] != '.' ||
        !(v[7] >= '0' && v[7] <= '9') || v[8] != '\0')
        return fail(err, 400, true, "a malformed HTTP version");
    if (v[5] != '1') return fail(err, 505, true, "only HTTP/1.0 and HTTP/1.1 are served");
    req->method = line;
    req->target = target;
    /* a later minor version is understood as the highest one known (RFC 9110 2.5) */
    req->minor = v[7] == '0' ? 0 : 1;
    return true;
}

static bool parse_field_line(char *line, struct http_header *h, struct http_error *err)
{
    if (*line == ' ' || *line == '\t') return fail(err, 400, true, "a folded header line (obs-fold)");
    char *colon = strchr(line, ':');
    if (!colon || colon == line) return fail(err, 400, true, "a header line without a field name");
    for (const char *p = line; p < colon; p++)
        if (!is_tchar((unsigned char)*p))
            return fail(err, 400, true, p[0] == ' ' || p[0] == '\t'
                        ? "whitespace between a header field's name and its colon"
                        : "an invalid character in a header field's name");
    *colon = '\0';
    char *v = colon + 1;
    while (*v == ' ' || *v == '\t') v++;
    char *e = v + strlen(v);
    while (e > v && (e[-1] == ' ' || e[-1] == '\t')) *--e = '\0';
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if (!is_field_char(*p)) return fail(err, 400, true, "an invalid character in a header field's value");
    h->name = line;
    h->value = v;
    return true;
}

/* The Content-Length of every field of that name: all the same value
 * (RFC 9112 6.3, item 5) of digits only. */
static bool content_length(const struct http_request *req, bool *present, uint64_t *out,
                           struct http_error *err)
{
    *present = false;
    for (size_t i = 0; i < req->n_headers; i++) {
        if (strcasecmp(req->headers[i].name, "Content-Length") != 0) continue;
        for (const char *p = req->headers[i].value;;) {
            while (*p == ' ' || *p == '\t') p++;
            if (!(*p >= '0' && *p <= '9')) return fail(err, 400, true, "an invalid Content-Length");
            uint64_t v = 0;
            for (; *p >= '0' && *p <= '9'; p++) {
                if (v > (UINT64_MAX - 9) / 10) return fail(err, 400, true, "an invalid Content-Length");
                v = v * 10 + (uint64_t)(*p - '0');
            }
            while (*p == ' ' || *p == '\t') p++;
            if (*present && v != *out) return fail(err, 400, true, "different Content-Length values");
            *present = true;
            *out = v;
            if (*p == '\0') break;
            if (*p != ',') return fail(err, 400, true, "an invalid Content-Length");
            p++;
        }
    }
    return true;
}

/* Transfer-Encoding: "chunked" alone is understood. */
static bool transfer_coding(const struct http_request *req, bool *chunked, struct http_error *err)
{
    *chunked = false;
    bool seen = false;
    for (size_t i = 0; i < req->n_headers; i++) {
        if (strcasecmp(req->headers[i].name, "Transfer-Encoding") != 0) continue;
        seen = true;
        for (const char *p = req->headers[i].value; *p;) {
            while (*p == ' ' || *p == '\t' || *p == ',') p++;
            if (!*p) break;
            const char *e = p;
            while (*e && *e != ',') e++;
            const char *t = e;
            while (t > p && (t[-1] == ' ' || t[-1] == '\t')) t--;
            if ((size_t)(t - p) != 7 || strncasecmp(p, "chunked", 7) != 0)
                return fail(err, 501, true, "a transfer coding other than chunked");
            if (*chunked) return fail(err, 400, true, "chunked applied twice");
            *chunked = true;
            p = e;
        }
    }
    if (seen && !*chunked) return fail(err, 400, true, "an empty Transfer-Encoding");
    return true;
}

static bool check_framing(struct http_request *req, uint64_t max_body, struct http_error *err)
{
    size_t n_host = 0;
    for (size_t i = 0; i < req->n_headers; i++) n_host += strcasecmp(req->headers[i].name, "Host") == 0;
    if (req->minor == 1 && n_host != 1)
        return fail(err, 400, true, n_host ? "more than one Host header" : "an HTTP/1.1 request without Host");
    bool has_length, chunked;
    uint64_t length = 0;
    if (!transfer_coding(req, &chunked, err) || !content_length(req, &has_length, &length, err)) return false;
    if (chunked && has_length) return fail(err, 400, true, "both Transfer-Encoding and Content-Length");
    if (chunked && req->minor == 0) return fail(err, 400, true, "Transfer-Encoding in an HTTP/1.0 request");
    const char *conn = http_header(req, "Connection");
    req->keep_alive = req->minor == 1 ? !(conn && http_list_has(conn, "close"))
                                      : conn && http_list_has(conn, "keep-alive");
    req->framing = chunked ? HTTP_BODY_CHUNKED : has_length ? HTTP_BODY_LENGTH : HTTP_BODY_NONE;
    req->content_length = length;
    const char *expect = http_header(req, "Expect");
    if (expect && req->minor == 1) {
        if (strcasecmp(expect, "100-continue") != 0) return fail(err, 417, false, "an expectation other than 100-continue");
        req->expect_continue = req->framing != HTTP_BODY_NONE;
    }
    if (has_length && length > max_body) return fail(err, 413, true, "the request body is too large");
    const bool wants_body = strcmp(req->method, "POST") == 0 || strcmp(req->method, "PUT") == 0 ||
                            strcmp(req->method, "PATCH") == 0;
    if (wants_body && req->framing == HTTP_BODY_NONE)
        return fail(err, 411, true, "a request body needs a Content-Length or chunked coding");
    return true;
}

enum http_result http_parse_head(const char *in, size_t n, uint64_t max_body, struct http_request *req,
                                 struct http_error *err)
{
    size_t start = 0;
    /* empty lines before the request line (RFC 9112 2.2), a few */
    while (start < n && start < 16 && (in[start] == '\r' || in[start] == '\n')) {
        if (in[start] == '\r' && start + 1 < n && in[start + 1] != '\n') break;
        start++;
    }
    bool refused;
    const size_t end = head_end(in, n, start, &refused, err);
    if (refused) return HTTP_ERROR;
    if (end == 0) return HTTP_NEED_MORE;
    const size_t len = end - start;
    if (len >= HTTP_MAX_HEAD) return fail(err, 431, true, "the request head is too large"), HTTP_ERROR;
    memset(req, 0, sizeof *req);
    memcpy(req->head, in + start, len);
    req->head[len] = '\0';
    req->head_len = end;
    char *line = req->head;
    bool first = true;
    for (;;) {
        char *nl = strchr(line, '\n');
        if (!nl) break;  /* head_end found the empty line */
        *nl = '\0';
        if (nl > line && nl[-1] == '\r') nl[-1] = '\0';
        if (*line == '\0' && !first) break;
        if (first) {
            if (!parse_request_line(line, req, err)) return HTTP_ERROR;
            first = false;
        } else {
            if (req->n_headers == HTTP_MAX_HEADERS) return fail(err, 431, true, "too many header fields"), HTTP_ERROR;
            if (!parse_field_line(line, &req->headers[req->n_headers], err)) return HTTP_ERROR;
            req->n_headers++;
        }
        line = nl + 1;
    }
    if (!check_framing(req, max_body, err)) return HTTP_ERROR;
    return HTTP_DONE;
}

void http_body_init(struct http_body *b, const struct http_request *req, uint64_t max_body)
{
    memset(b, 0, sizeof *b);
    b->framing = req->framing;
    b->max_body = max_body;
    b->left = req->framing == HTTP_BODY_LENGTH ? req->content_length : 0;
    b->state = req->framing == HTTP_BODY_CHUNKED ? CHUNK_SIZE : BODY_END;
    if (req->framing == HTTP_BODY_LENGTH && b->left > 0) b->state = CHUNK_DATA;
}

/* The line at in[0, n) up to its LF: its length without the line end,
 * or -1 while incomplete; a bare CR, or a line (with its end) of more
 * than limit bytes, is refused where it shows, so that the verdict does
 * not depend on how the bytes arrive. */
static long line_len(const char *in, size_t n, size_t limit, int too_long, bool *bad, struct http_error *err)
{
    *bad = false;
    for (size_t i = 0; i < n; i++) {
        if (i >= limit) return *bad = true, fail(err, too_long, true, "a chunk or trailer line is too long"), -1;
        if (in[i] == '\n') return (long)(i > 0 && in[i - 1] == '\r' ? i - 1 : i);
        if (in[i] == '\r' && i + 1 < n && in[i + 1] != '\n')
            return *bad = true, fail(err, 400, true, "a CR not followed by LF in the chunked body"), -1;
    }
    return -1;
}

/* A chunk-size line: the size, then chunk extensions (RFC 9112 7.1.1)
 * of token and quoted-string characters, checked as far as it goes so
 * that a line that cannot be valid is refused before its end. */
static bool chunk_size(struct http_body *b, const char *in, size_t n, uint64_t *size, struct http_error *err)
{
    size_t i = 0;
    uint64_t v = 0;
    if (n > 0 && !is_hex((unsigned char)in[0])) return fail(err, 400, true, "a malformed chunk size");
    for (; i < n && is_hex((unsigned char)in[i]); i++) {
        if (v >> 60) return fail(err, 413, true, "a chunk larger than this server accepts");
        v = v << 4 | hex_value((unsigned char)in[i]);
        if (v > b->max_body - b->total) return fail(err, 413, true, "the request body is too large");
    }
    for (; i < n; i++) {
        const unsigned char c = (unsigned char)in[i];
        if (c == '\r' || c == '\n') break;
        if (c != ';' && c != '=' && c != '"' && c != ' ' && c != '\t' && c != '\\' && !is_tchar(c) && c < 0x80)
            return fail(err, 400, true, "a malformed chunk extension");
    }
    *size = v;
    return true;
}

enum http_result http_parse_body(struct http_body *b, const char *in, size_t n, size_t *used,
                                 size_t *data_off, size_t *data_len, struct http_error *err)
{
    size_t pos = 0;
    *data_off = *data_len = 0;
    for (;;) {
        *used = pos;
        const char *p = in + pos;
        const size_t avail = n - pos;
        bool bad;
        switch (b->state) {
        case BODY_END: return HTTP_DONE;
        case CHUNK_DATA: {
            if (avail == 0) return HTTP_NEED_MORE;
            const size_t k = avail < b->left ? avail : (size_t)b->left;
            b->left -= k;
            b->total += k;
            if (b->left == 0) b->state = b->framing == HTTP_BODY_CHUNKED ? CHUNK_DATA_END : BODY_END;
            *data_off = pos;
            *data_len = k;
            *used = pos + k;
            return HTTP_DATA;
        }
        case CHUNK_SIZE: {
            /* the size and extensions first: they come before the line's end */
            uint64_t size;
            if (!chunk_size(b, p, avail, &size, err)) return HTTP_ERROR;
            const long len = line_len(p, avail, HTTP_MAX_CHUNK_LINE, 400, &bad, err);
            if (bad) return HTTP_ERROR;
            if (len < 0) return HTTP_NEED_MORE;
            pos += (size_t)len + (p[len] == '\r' ? 2 : 1);
            b->left = size;
            b->state = size ? CHUNK_DATA : CHUNK_TRAILER;
            break;
        }
        case CHUNK_DATA_END:
            if (avail == 0 || (p[0] == '\r' && avail == 1)) return HTTP_NEED_MORE;
            if (p[0] == '\n') pos += 1;
            else if (p[0] == '\r' && p[1] == '\n') pos += 2;
            else return fail(err, 400, true, "a chunk's data is not followed by CRLF"), HTTP_ERROR;
            b->state = CHUNK_SIZE;
            break;
        case CHUNK_TRAILER: {
            /* trailer fields are read and dropped (RFC 9112 7.1.2) */
            const long len = line_len(p, avail, HTTP_MAX_HEAD - b->trailer_bytes, 431, &bad, err);
            if (bad) return HTTP_ERROR;
            if (len < 0) return HTTP_NEED_MORE;
            const size_t line_bytes = (size_t)len + (p[len] == '\r' ? 2 : 1);
            b->trailer_bytes += line_bytes;
            if (len > 0) {
                if (p[0] == ' ' || p[0] == '\t') return fail(err, 400, true, "a folded trailer line"), HTTP_ERROR;
                long k = 0;
                while (k < len && is_tchar((unsigned char)p[k])) k++;
                if (k == 0 || k == len || p[k] != ':')
                    return fail(err, 400, true, "a malformed trailer field"), HTTP_ERROR;
                for (k++; k < len; k++)
                    if (!is_field_char((unsigned char)p[k]))
                        return fail(err, 400, true, "a malformed trailer field"), HTTP_ERROR;
            }
            pos += line_bytes;
            if (len == 0) b->state = BODY_END;
            break;
        }
        }
    }
}

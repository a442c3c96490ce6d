/*
 * test-http.c -- hearth serve's HTTP/1.1 request reading
 * (src/server/http_parse.c), rule by rule from RFC 9112: the request
 * line and its version, header fields and what is refused in them, the
 * limits, the body's framing (Content-Length, chunked with extensions
 * and trailers, the two together), Connection and Expect, and the valid
 * forms: pipelined requests, HTTP/1.0, a body that arrives byte by byte.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_parse.h"
#include "testutil.h"

#define MAX_BODY 1000

static struct http_request req;

/* The head parses completely. */
static void head_ok(const char *text)
{
    struct http_error e = {0};
    enum http_result r = http_parse_head(text, strlen(text), MAX_BODY, &req, &e);
    ck_assert_msg(r == HTTP_DONE, "not accepted (%d, %d %s): %s", r, e.status, e.message, text);
}

/* The head is refused with status; close: whether the connection must close. */
static void head_bad(const char *text, int status, bool close)
{
    struct http_error e = {0};
    enum http_result r = http_parse_head(text, strlen(text), MAX_BODY, &req, &e);
    ck_assert_msg(r == HTTP_ERROR, "not refused (%d): %s", r, text);
    ck_assert_msg(e.status == status, "status %d, not %d (%s): %s", e.status, status, e.message, text);
    ck_assert_msg(e.close == close, "close %d for %d: %s", e.close, status, text);
    ck_assert(e.message && e.message[0]);
}

/* The body after the head in text, fed in pieces of `piece` bytes:
 * its result and its data. */
static enum http_result body_of(const char *text, size_t piece, char *out, size_t *out_len, int *status)
{
    const size_t n = strlen(text);
    struct http_error e = {0};
    ck_assert_int_eq(http_parse_head(text, n, MAX_BODY, &req, &e), HTTP_DONE);
    const char *rest = text + req.head_len;
    const size_t rest_n = n - req.head_len;
    struct http_body b;
    http_body_init(&b, &req, MAX_BODY);
    size_t start = 0, end = piece < rest_n ? piece : rest_n;
    *out_len = 0;
    for (;;) {
        size_t used, off, len;
        enum http_result r = http_parse_body(&b, rest + start, end - start, &used, &off, &len, &e);
        if (r == HTTP_ERROR) {
            *status = e.status;
            return r;
        }
        if (r == HTTP_DATA) {
            memcpy(out + *out_len, rest + start + off, len);
            *out_len += len;
        }
        start += used;
        if (r == HTTP_DONE) {
            out[*out_len] = '\0';
            return r;
        }
        if (r == HTTP_NEED_MORE) {
            if (end == rest_n) return r;
            end = end + piece > rest_n ? rest_n : end + piece;
        }
    }
}

static void body_is(const char *text, const char *expect)
{
    char out[2048];
    size_t len;
    int status = 0;
    for (size_t piece = 1; piece <= strlen(text); piece = piece * 2 + 1) {
        enum http_result r = body_of(text, piece, out, &len, &status);
        ck_assert_msg(r == HTTP_DONE, "pieces of %zu: %d (status %d): %.300s", piece, r, status, text);
        ck_assert_msg(len == strlen(expect) && memcmp(out, expect, len) == 0, "pieces of %zu: body '%s': %s",
                      piece, out, text);
    }
}

static void body_bad(const char *text, int status)
{
    char out[2048];
    size_t len;
    int got = 0;
    enum http_result r = body_of(text, 1 << 20, out, &len, &got);
    ck_assert_msg(r == HTTP_ERROR && got == status, "%d (status %d, not %d): %.300s", r, got, status, text);
}

START_TEST(test_request_line)
{
    head_ok("GET /health HTTP/1.1\r\nHost: a\r\n\r\n");
    ck_assert_str_eq(req.method, "GET");
    ck_assert_str_eq(req.target, "/health");
    ck_assert_int_eq(req.minor, 1);
    ck_assert(req.keep_alive);
    ck_assert_int_eq(req.framing, HTTP_BODY_NONE);
    /* empty lines before the request line are skipped (2.2); LF alone ends a line */
    head_ok("\r\n\r\nGET / HTTP/1.1\nHost: a\n\n");
    ck_assert_str_eq(req.target, "/");
    head_bad("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400, true);
    head_bad("GET / HTTP/1.1 \r\nHost: a\r\n\r\n", 400, true);
    head_bad("GET /\x01 HTTP/1.1\r\nHost: a\r\n\r\n", 400, true);
    head_bad("G(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400, true);
    head_bad("GET / HTTP/1.x\r\nHost: a\r\n\r\n", 400, true);
    head_bad("GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505, true);
    head_bad("GET / HTTP/0.9\r\nHost: a\r\n\r\n", 505, true);
    head_ok("GET / HTTP/1.5\r\nHost: a\r\n\r\n");   /* a later 1.x is read as 1.1 */
    ck_assert_int_eq(req.minor, 1);
    head_bad("GET /\r\n\r\n", 400, true);
}
END_TEST

START_TEST(test_header_fields)
{
    head_ok("GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\nAuthorization: \t Bearer k \t\r\n\r\n");
    ck_assert_str_eq(http_header(&req, "authorization"), "Bearer k");
    ck_assert_str_eq(http_header(&req, "x-empty"), "");
    ck_assert_ptr_null(http_header(&req, "Cookie"));
    head_bad("GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n folded\r\n\r\n", 400, true);      /* obs-fold */
    head_bad("GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400, true);                         /* space before colon */
    head_bad("GET / HTTP/1.1\r\nHost: a\r\nX(A): 1\r\n\r\n", 400, true);               /* not a token */
    head_bad("GET / HTTP/1.1\r\nHost: a\r\n: 1\r\n\r\n", 400, true);
    head_bad("GET / HTTP/1.1\r\nHost: a\r\nX-A 1\r\n\r\n", 400, true);
    head_bad("GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r2\r\n\r\n", 400, true);             /* bare CR */
    head_bad("GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\x7f\r\n\r\n", 400, true);
    const char nul[] = "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\0002\r\n\r\n";
    struct http_error e;
    ck_assert_int_eq(http_parse_head(nul, sizeof nul - 1, MAX_BODY, &req, &e), HTTP_ERROR);
    ck_assert_int_eq(e.status, 400);
    /* Host: exactly one in HTTP/1.1 (3.2); none needed in HTTP/1.0 */
    head_bad("GET / HTTP/1.1\r\n\r\n", 400, true);
    head_bad("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, true);
    head_ok("GET / HTTP/1.0\r\n\r\n");
}
END_TEST

START_TEST(test_limits)
{
    static char big[HTTP_MAX_HEAD * 2];
    struct http_error e;
    /* a request line too long is refused before its end */
    memset(big, 'a', sizeof big);
    memcpy(big, "GET /", 5);
    ck_assert_int_eq(http_parse_head(big, HTTP_MAX_LINE + 10, MAX_BODY, &req, &e), HTTP_ERROR);
    ck_assert_int_eq(e.status, 414);
    ck_assert_int_eq(http_parse_head(big, HTTP_MAX_LINE - 10, MAX_BODY, &req, &e), HTTP_NEED_MORE);
    /* a header section too large, before its end */
    size_t n = (size_t)snprintf(big, sizeof big, "GET / HTTP/1.1\r\nHost: a\r\n");
    while (n + 20 < sizeof big) n += (size_t)snprintf(big + n, sizeof big - n, "X-Pad: 0123456789\r\n");
    ck_assert_int_eq(http_parse_head(big, n, MAX_BODY, &req, &e), HTTP_ERROR);
    ck_assert_int_eq(e.status, 431);
    /* too many fields, each short */
    n = (size_t)snprintf(big, sizeof big, "GET / HTTP/1.1\r\nHost: a\r\n");
    for (int i = 0; i < HTTP_MAX_HEADERS; i++) n += (size_t)snprintf(big + n, sizeof big - n, "X: %d\r\n", i);
    n += (size_t)snprintf(big + n, sizeof big - n, "\r\n");
    ck_assert_int_eq(http_parse_head(big, n, MAX_BODY, &req, &e), HTTP_ERROR);
    ck_assert_int_eq(e.status, 431);
    /* an incomplete head of fine bytes waits */
    ck_assert_int_eq(http_parse_head("GET / HTTP/1.1\r\nHost: a\r\n", 25, MAX_BODY, &req, &e), HTTP_NEED_MORE);
}
END_TEST

START_TEST(test_content_length)
{
    head_ok("POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello");
    ck_assert_int_eq(req.framing, HTTP_BODY_LENGTH);
    ck_assert_uint_eq(req.content_length, 5);
    body_is("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello", "hello");
    body_is("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", "");
    /* identical values are one value (6.3); different ones are refused */
    body_is("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi", "hi");
    body_is("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2, 2\r\n\r\nhi", "hi");
    head_bad("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nhi", 400, true);
    head_bad("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2, 3\r\n\r\nhi", 400, true);
    head_bad("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400, true);
    head_bad("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1x\r\n\r\n", 400, true);
    head_bad("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\n", 400, true);
    head_bad("POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", 400, true);
    head_bad("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400, true);
    /* over the limit: 413 from the head, before any body */
    head_bad("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1001\r\n\r\n", 413, true);
    /* a POST without either: 411 */
    head_bad("POST / HTTP/1.1\r\nHost: a\r\n\r\n", 411, true);
    head_bad("POST / HTTP/1.0\r\n\r\n", 411, true);
}
END_TEST

START_TEST(test_chunked)
{
    body_is("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
            "hello world");
    /* extensions, upper-case hex, a trailer section, LF alone */
    body_is("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n"
            "A;name=value;q=\"x y\"\r\n0123456789\r\n1 ; ext\n!\n0\r\nX-Trailer: t\r\nY: 2\r\n\r\n",
            "0123456789!");
    head_bad("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501, true);
    head_bad("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, true);
    head_bad("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400, true);
    head_bad("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n\r\n", 501, true);
    head_bad("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n\r\n", 400, true);
    /* with Content-Length: 400 and close (6.3); in HTTP/1.0: 400 */
    head_bad("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400, true);
    head_bad("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, true);
    /* chunk sizes that cannot be valid are refused at once, without their line's end */
    body_bad("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz", 400);
    body_bad("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3e9", 413);
    body_bad("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffffffff", 413);
}
END_TEST

START_TEST(test_chunked_errors)
{
    /* the sum of the chunks over the limit */
    static char text[8192];
    int n = snprintf(text, sizeof text, "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 3; i++) {
        n += snprintf(text + n, sizeof text - (size_t)n, "190\r\n");
        memset(text + n, 'x', 400);
        n += 400;
        n += snprintf(text + n, sizeof text - (size_t)n, "\r\n");
    }
    body_bad(text, 413);
    body_bad("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX", 400);
    body_bad("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\rx", 400);
    body_bad("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2;\x01\r\nab\r\n0\r\n\r\n", 400);
    body_bad("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nBad Trailer: x\r\n\r\n", 400);
    body_bad("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n folded: x\r\n\r\n", 400);
    /* a chunk line that never ends */
    n = snprintf(text, sizeof text, "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1;");
    memset(text + n, 'a', sizeof text - (size_t)n - 1);
    text[sizeof text - 1] = '\0';
    body_bad(text, 400);
}
END_TEST

START_TEST(test_connection)
{
    head_ok("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    ck_assert(!req.keep_alive);
    head_ok("GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, Close\r\n\r\n");
    ck_assert(!req.keep_alive);
    head_ok("GET / HTTP/1.0\r\n\r\n");
    ck_assert(!req.keep_alive);
    ck_assert_int_eq(req.minor, 0);
    head_ok("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    ck_assert(req.keep_alive);
    head_ok("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n");
    ck_assert(req.expect_continue);
    head_ok("POST / HTTP/1.0\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n");
    ck_assert(!req.expect_continue);   /* HTTP/1.0 ignores it (RFC 9110 10.1.1) */
    head_bad("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nExpect: something\r\n\r\n", 417, false);
    /* an expectation with a body too large gets the final 413, never 100 */
    head_bad("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n", 413, true);
}
END_TEST

START_TEST(test_pipelined)
{
    /* two requests in one read: the first's head and body, then the next */
    const char *two = "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\nHost: a\r\n\r\n";
    struct http_error e;
    ck_assert_int_eq(http_parse_head(two, strlen(two), MAX_BODY, &req, &e), HTTP_DONE);
    const char *body = two + req.head_len;
    struct http_body b;
    http_body_init(&b, &req, MAX_BODY);
    size_t used, off, len;
    ck_assert_int_eq(http_parse_body(&b, body, strlen(body), &used, &off, &len, &e), HTTP_DATA);
    ck_assert_uint_eq(len, 3);
    ck_assert(memcmp(body + off, "abc", 3) == 0);
    ck_assert_int_eq(http_parse_body(&b, body + used, strlen(body + used), &used, &off, &len, &e), HTTP_DONE);
    ck_assert_uint_eq(used, 0);
    const char *next = body + 3;
    ck_assert_int_eq(http_parse_head(next, strlen(next), MAX_BODY, &req, &e), HTTP_DONE);
    ck_assert_str_eq(req.target, "/b");
    ck_assert_uint_eq(req.head_len, strlen(next));
}
END_TEST

START_TEST(test_lists)
{
    ck_assert(http_list_has("a, b ,c", "b"));
    ck_assert(http_list_has("Keep-Alive", "keep-alive"));
    ck_assert(!http_list_has("keep-alive-ish", "keep-alive"));
    ck_assert(!http_list_has("", "close"));
}
END_TEST

START_TEST(test_etag_match)
{
    const char *tag = "\"42-7\"";
    ck_assert(http_etag_match("\"42-7\"", tag));
    ck_assert(http_etag_match("W/\"42-7\"", tag));
    ck_assert(http_etag_match("\"a\", \"b,c\" ,W/\"42-7\"", tag));
    ck_assert(http_etag_match("*", tag));
    ck_assert(!http_etag_match("\"42-70\"", tag));
    ck_assert(!http_etag_match("\"42-\"", tag));
    ck_assert(!http_etag_match("42-7", tag));               /* not quoted */
    ck_assert(!http_etag_match("\"b,\"42-7\"\"", tag));      /* the tag "b," then garbage */
    ck_assert(!http_etag_match("\"42-7", tag));              /* unterminated */
    ck_assert(!http_etag_match("\"42-7\"x", tag));            /* more after the tag */
    ck_assert(!http_etag_match("*x", tag));
    ck_assert(http_etag_match("\"x\" , * ", tag));
    ck_assert(!http_etag_match("w/\"42-7\"", tag));           /* W/ is case-sensitive */
    ck_assert(!http_etag_match("", tag));
    ck_assert(!http_etag_match("W/", tag));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, test_request_line);
    tcase_add_test(tc, test_header_fields);
    tcase_add_test(tc, test_limits);
    tcase_add_test(tc, test_content_length);
    tcase_add_test(tc, test_chunked);
    tcase_add_test(tc, test_chunked_errors);
    tcase_add_test(tc, test_connection);
    tcase_add_test(tc, test_pipelined);
    tcase_add_test(tc, test_lists);
    tcase_add_test(tc, test_etag_match);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}

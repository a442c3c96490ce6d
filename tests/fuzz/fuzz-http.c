/*
 * fuzz-http.c -- fuzz target for hearth serve's HTTP/1.1 request reading
 * (src/server/http_parse.c), the code a connection runs on the bytes it
 * receives: the first byte of an input picks how the rest arrives (in
 * pieces of 1 to 16 bytes, or all at once), the rest is what the client
 * sent.  The head and then the body are parsed as the connection does,
 * piece by piece with the bytes left over kept, and checked against one
 * parse of everything at once: a verdict does not change when more bytes
 * come (a refusal is final, a complete head is the same head), the body's
 * data is the same, every refusal is a status the server sends (400,
 * 408, 411, 413, 414, 417, 431, 501, 505) with a message, a declared
 * length is honoured exactly and no body exceeds the limit; an
 * If-None-Match field is read for the chat page's entity tag.  Nothing
 * may read past the input (the replay and libFuzzer builds run under
 * ASan).
 *
 * Run (see configure --enable-fuzzing) with a corpus directory seeded
 * from tests/fuzz/regressions-http:
 *   tests/fuzz/fuzz-http -max_len=65536 corpus
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_BODY 4096

static void check_error(const struct http_error *e)
{
    static const int allowed[] = {400, 408, 411, 413, 414, 417, 431, 501, 505};
    bool ok = false;
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++) ok |= e->status == allowed[i];
    if (!ok || !e->message || !e->message[0]) abort();
}

/* The body of in[0, n) at once: its result, data in out. */
static enum http_result body_at_once(const struct http_request *req, const char *in, size_t n, char *out,
                                     size_t *out_len, int *status)
{
    struct http_body b;
    http_body_init(&b, req, MAX_BODY);
    size_t pos = 0;
    *out_len = 0;
    for (;;) {
        size_t used, off, len;
        struct http_error e;
        enum http_result r = http_parse_body(&b, in + pos, n - pos, &used, &off, &len, &e);
        if (used > n - pos || (r == HTTP_DATA && (off + len > used || len == 0))) abort();
        if (r == HTTP_ERROR) {
            check_error(&e);
            *status = e.status;
            return r;
        }
        if (r == HTTP_DATA) {
            if (*out_len + len > MAX_BODY) abort();
            memcpy(out + *out_len, in + pos + off, len);
            *out_len += len;
        }
        pos += used;
        if (r != HTTP_DATA) return r;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    const size_t piece = data[0] % 17;   /* 0: everything at once */
    const char *in = (const char *)data + 1;
    const size_t n = size - 1;

    static struct http_request whole, part;
    struct http_error e_whole, e_part;
    const enum http_result r_whole = http_parse_head(in, n, MAX_BODY, &whole, &e_whole);
    if (r_whole == HTTP_ERROR) check_error(&e_whole);
    if (r_whole == HTTP_DONE) {
        if (whole.head_len == 0 || whole.head_len > n || !whole.method || !whole.target) abort();
        if (whole.minor != 0 && whole.minor != 1) abort();
        if (whole.framing == HTTP_BODY_LENGTH && whole.content_length > MAX_BODY) abort();
    }

    /* the connection's way: parse the prefix received so far */
    size_t have = piece ? 0 : n;
    enum http_result r;
    for (;;) {
        r = http_parse_head(in, have, MAX_BODY, &part, &e_part);
        if (r != HTTP_NEED_MORE || have == n) break;
        have = have + piece > n ? n : have + piece;
    }
    if (r != r_whole) abort();
    if (r == HTTP_ERROR && e_part.status != e_whole.status) abort();
    if (r != HTTP_DONE) return 0;
    /* the chat page's conditional GET reads If-None-Match */
    const char *inm = http_header(&whole, "If-None-Match");
    if (inm && http_etag_match(inm, "\"42-7\"") && !strstr(inm, "\"42-7\"") && !strchr(inm, '*')) abort();
    if (part.head_len != whole.head_len || strcmp(part.method, whole.method) != 0 ||
        strcmp(part.target, whole.target) != 0 || part.framing != whole.framing ||
        part.content_length != whole.content_length || part.keep_alive != whole.keep_alive ||
        part.n_headers != whole.n_headers)
        abort();

    const char *rest = in + whole.head_len;
    const size_t rest_n = n - whole.head_len;
    static char expect[MAX_BODY], got[MAX_BODY];
    size_t expect_len, got_len = 0;
    int status = 0;
    const enum http_result rb = body_at_once(&whole, rest, rest_n, expect, &expect_len, &status);
    if (rb == HTTP_DONE && whole.framing == HTTP_BODY_LENGTH && expect_len != whole.content_length) abort();
    if (rb == HTTP_DONE && whole.framing == HTTP_BODY_NONE && expect_len != 0) abort();

    /* the body piece by piece, keeping the unread bytes as http.c does */
    struct http_body b;
    http_body_init(&b, &whole, MAX_BODY);
    size_t start = 0, end = piece ? 0 : rest_n;
    enum http_result rp;
    for (;;) {
        size_t used, off, len;
        struct http_error e;
        rp = http_parse_body(&b, rest + start, end - start, &used, &off, &len, &e);
        if (used > end - start) abort();
        if (rp == HTTP_ERROR) {
            if (e.status != status) abort();
            break;
        }
        if (rp == HTTP_DATA) {
            if (got_len + len > MAX_BODY || off + len > used) abort();
            memcpy(got + got_len, rest + start + off, len);
            got_len += len;
        }
        start += used;
        if (rp == HTTP_DONE) break;
        if (rp == HTTP_NEED_MORE) {
            if (end == rest_n) break;
            end = end + piece > rest_n ? rest_n : end + piece;
        }
    }
    if (rp != rb || (rp == HTTP_DONE && (got_len != expect_len || memcmp(got, expect, got_len) != 0))) abort();
    return 0;
}

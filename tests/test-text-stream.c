/*
 * test-text-stream.c -- streaming detokenization: characters split over
 * byte tokens come out whole, ill-formed UTF-8 becomes U+FFFD by maximal
 * subparts (the example of the Unicode Standard, table 3-8), stop strings
 * spread over tokens are found and never shown, text that only begins
 * like a stop string is released, and the stream agrees with a simple
 * whole-text reference on random input however the input is cut.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define FFFD "\xEF\xBF\xBD"

/* Collects everything a stream returns. */
struct collected {
    char buf[65536];
    size_t len;
};

static void collect(struct collected *c, const char *text, size_t len)
{
    ck_assert_uint_le(c->len + len, sizeof c->buf);
    memcpy(c->buf + c->len, text, len);
    c->len += len;
}

static hearth_text_stream *new_stream(const hearth_vocab *v, unsigned flags,
                                      const char *const *stops, size_t n_stops)
{
    hearth_text_stream_options o = {flags, stops, n_stops};
    hearth_text_stream *s;
    ck_assert_msg(hearth_text_stream_new(v, &o, &s) == HEARTH_OK, "%s", hearth_last_error());
    return s;
}

static void push_str(hearth_text_stream *s, const char *bytes, struct collected *c)
{
    const char *text;
    size_t len;
    ck_assert_int_eq(hearth_text_stream_push_bytes(s, bytes, strlen(bytes), &text, &len), HEARTH_OK);
    collect(c, text, len);
}

static void finish(hearth_text_stream *s, struct collected *c)
{
    const char *text;
    size_t len;
    ck_assert_int_eq(hearth_text_stream_finish(s, &text, &len), HEARTH_OK);
    collect(c, text, len);
}

static hearth_vocab *load_spm(void)
{
    hearth_gguf *g;
    const char *path = test_data_path("vocab/ggml-vocab-llama-spm.gguf");
    ck_assert_ptr_nonnull(path);
    ck_assert_int_eq(hearth_gguf_open(path, &g), HEARTH_OK);
    hearth_vocab *v;
    ck_assert_int_eq(hearth_vocab_load(g, NULL, &v), HEARTH_OK);
    hearth_gguf_close(g);
    return v;
}

static hearth_token *tokenize(const hearth_vocab *v, const char *text, size_t *n)
{
    size_t cap = strlen(text) + 16;
    hearth_token *ids = malloc(cap * sizeof *ids);
    ck_assert_int_eq(hearth_tokenize(v, text, strlen(text), 0, ids, cap, n), HEARTH_OK);
    return ids;
}

/* ---- tokens ------------------------------------------------------------------ */

START_TEST(test_characters_split_over_byte_tokens)
{
    if (!test_require_data()) return;
    hearth_vocab *v = load_spm();
    /* An emoji and a CJK character the vocabulary has no piece for. */
    const char *text = "\xF0\x9F\xA6\x99\xE9\xBE\x98"; /* U+1F999 U+9F98 */
    size_t n;
    hearth_token *ids = tokenize(v, text, &n);
    ck_assert_uint_eq(n, 8); /* the space SentencePiece adds, then 4 + 3 bytes */
    for (size_t i = 1; i < n; i++)
        ck_assert_int_eq(hearth_vocab_token_type(v, ids[i]), HEARTH_TOKEN_BYTE);

    hearth_text_stream *s = new_stream(v, 0, NULL, 0);
    const char *expect[8] = {"", "", "", "", "\xF0\x9F\xA6\x99", "", "", "\xE9\xBE\x98"};
    for (size_t i = 0; i < n; i++) {
        const char *out;
        size_t len;
        ck_assert_int_eq(hearth_text_stream_push_token(s, ids[i], &out, &len), HEARTH_OK);
        ck_assert_msg(len == strlen(expect[i]) && memcmp(out, expect[i], len) == 0,
                      "token %zu gave %zu bytes", i, len);
    }
    struct collected c = {.len = 0};
    finish(s, &c);
    ck_assert_uint_eq(c.len, 0);

    /* continuing a text: the leading space is kept */
    hearth_text_stream_free(s);
    s = new_stream(v, HEARTH_DECODE_CONTINUATION, NULL, 0);
    const char *out;
    size_t len;
    ck_assert_int_eq(hearth_text_stream_push_token(s, ids[0], &out, &len), HEARTH_OK);
    ck_assert_uint_eq(len, 1);
    ck_assert_int_eq(out[0], ' ');
    hearth_text_stream_free(s);
    free(ids);
    hearth_vocab_free(v);
}
END_TEST

START_TEST(test_stop_string_over_three_tokens)
{
    if (!test_require_data()) return;
    hearth_vocab *v = load_spm();
    const char *text = "Hello world, and stop here please";
    const char *stop = "and stop here";
    size_t n;
    hearth_token *ids = tokenize(v, text, &n);

    /* The stop string is spread over at least three tokens. */
    size_t stop_at = (size_t)(strstr(text, stop) - text), offset = 0, spanned = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        hearth_token_piece(v, ids[i], 0, &len);
        size_t start = i == 0 ? 0 : offset, end = offset + len - (i == 0 ? 1 : 0);
        if (end > stop_at && start < stop_at + strlen(stop)) spanned++;
        offset = end;
    }
    ck_assert_uint_ge(spanned, 3);

    const char *stops[] = {"never", stop};
    hearth_text_stream *s = new_stream(v, 0, stops, 2);
    struct collected c = {.len = 0};
    for (size_t i = 0; i < n; i++) {
        const char *out;
        size_t len;
        ck_assert_int_eq(hearth_text_stream_push_token(s, ids[i], &out, &len), HEARTH_OK);
        collect(&c, out, len);
    }
    finish(s, &c);
    ck_assert_int_eq(hearth_text_stream_stop_index(s), 1);
    c.buf[c.len] = '\0';
    ck_assert_str_eq(c.buf, "Hello world, ");
    hearth_text_stream_free(s);
    free(ids);
    hearth_vocab_free(v);
}
END_TEST

/* ---- bytes ------------------------------------------------------------------- */

START_TEST(test_diverging_prefix_is_released)
{
    const char *stops[] = {"and stop here"};
    hearth_text_stream *s = new_stream(NULL, 0, stops, 1);
    struct collected c = {.len = 0};
    push_str(s, "xx and st", &c);
    ck_assert_uint_eq(c.len, 3); /* "and st" is held */
    ck_assert_mem_eq(c.buf, "xx ", 3);
    push_str(s, "op", &c);
    ck_assert_uint_eq(c.len, 3);
    push_str(s, " there", &c);
    c.buf[c.len] = '\0';
    ck_assert_str_eq(c.buf, "xx and stop there");
    ck_assert_int_eq(hearth_text_stream_stop_index(s), -1);

    /* a prefix still open at the end is ordinary text after all */
    push_str(s, ", and stop he", &c);
    c.buf[c.len] = '\0';
    ck_assert_str_eq(c.buf, "xx and stop there, ");
    finish(s, &c);
    c.buf[c.len] = '\0';
    ck_assert_str_eq(c.buf, "xx and stop there, and stop he");
    ck_assert_int_eq(hearth_text_stream_stop_index(s), -1);

    /* the stream is finished; reset starts over */
    const char *out;
    size_t len;
    ck_assert_int_eq(hearth_text_stream_push_bytes(s, "x", 1, &out, &len), HEARTH_E_INVALID);
    hearth_text_stream_reset(s);
    c.len = 0;
    push_str(s, "and stop here", &c);
    ck_assert_uint_eq(c.len, 0);
    ck_assert_int_eq(hearth_text_stream_stop_index(s), 0);
    push_str(s, "more", &c); /* nothing after a stop */
    finish(s, &c);
    ck_assert_uint_eq(c.len, 0);
    hearth_text_stream_free(s);
}
END_TEST

START_TEST(test_stop_string_choice)
{
    /* The first stop string completed ends the stream... */
    const char *stops[] = {"abcdef", "cd"};
    hearth_text_stream *s = new_stream(NULL, 0, stops, 2);
    struct collected c = {.len = 0};
    push_str(s, "xabcdefy", &c);
    ck_assert_int_eq(hearth_text_stream_stop_index(s), 1);
    ck_assert_uint_eq(c.len, 3);
    ck_assert_mem_eq(c.buf, "xab", 3);
    hearth_text_stream_free(s);

    /* ... and of two completed by the same byte, the longer */
    const char *stops2[] = {"world", "lo world"};
    s = new_stream(NULL, 0, stops2, 2);
    c.len = 0;
    push_str(s, "hel", &c);
    push_str(s, "lo wor", &c);
    push_str(s, "ld!", &c);
    ck_assert_int_eq(hearth_text_stream_stop_index(s), 1);
    c.buf[c.len] = '\0';
    ck_assert_str_eq(c.buf, "hel");
    hearth_text_stream_free(s);

    /* a stop string of multi-byte characters, its bytes pushed apart */
    const char *stops3[] = {"\xC3\xA9t\xC3\xA9"}; /* "été" */
    s = new_stream(NULL, 0, stops3, 1);
    c.len = 0;
    push_str(s, "l'\xC3", &c);
    push_str(s, "\xA9t\xC3", &c);
    ck_assert_uint_eq(c.len, 2);
    push_str(s, "\xA9", &c);
    ck_assert_int_eq(hearth_text_stream_stop_index(s), 0);
    ck_assert_uint_eq(c.len, 2);
    hearth_text_stream_free(s);
}
END_TEST

START_TEST(test_maximal_subparts)
{
    /* Unicode Standard, table 3-8: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64
     * is "a", three U+FFFD, "b", U+FFFD, "c", two U+FFFD, "d". */
    const char *in = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
    const char *want = "a" FFFD FFFD FFFD "b" FFFD "c" FFFD FFFD "d";
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        hearth_text_stream *s = new_stream(NULL, 0, NULL, 0);
        struct collected c = {.len = 0};
        if (bytewise) {
            for (const char *p = in; *p; p++) {
                char one[2] = {*p, 0};
                push_str(s, one, &c);
            }
        } else {
            push_str(s, in, &c);
        }
        finish(s, &c);
        c.buf[c.len] = '\0';
        ck_assert_str_eq(c.buf, want);
        hearth_text_stream_free(s);
    }

    static const struct {
        const char *in, *want;
    } cases[] = {
        {"\xED\xA0\x80", FFFD FFFD FFFD},    /* a surrogate */
        {"\xC0\xAF", FFFD FFFD},             /* overlong */
        {"\xE0\x80\xAF", FFFD FFFD FFFD},    /* overlong */
        {"\xF4\x90\x80\x80", FFFD FFFD FFFD FFFD}, /* above U+10FFFF */
        {"\xF5x", FFFD "x"},
        {"\xE2\x82", FFFD},                  /* cut short at the end: one */
        {"\xE2\x82\xAC", "\xE2\x82\xAC"},    /* whole */
        {"", ""},
    };
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(cases); i++) {
        hearth_text_stream *s = new_stream(NULL, 0, NULL, 0);
        struct collected c = {.len = 0};
        push_str(s, cases[i].in, &c);
        finish(s, &c);
        c.buf[c.len] = '\0';
        ck_assert_msg(strcmp(c.buf, cases[i].want) == 0, "case %zu", i);
        hearth_text_stream_free(s);
    }
}
END_TEST

START_TEST(test_flush_and_invalid_tokens)
{
    if (!test_require_data()) return;
    hearth_vocab *v = load_spm();
    hearth_text_stream *s = new_stream(v, 0, NULL, 0);
    struct collected c = {.len = 0};
    const char *out;
    size_t len;
    /* a lone continuation byte is ill-formed at once */
    hearth_token b80 = hearth_vocab_find(v, "<0x80>", 6);
    ck_assert_int_eq(hearth_text_stream_push_token(s, b80, &out, &len), HEARTH_OK);
    collect(&c, out, len);
    ck_assert_uint_eq(c.len, 3);
    ck_assert_mem_eq(c.buf, FFFD, 3);
    /* a lead byte waits; the end of the stream makes it U+FFFD */
    hearth_token be9 = hearth_vocab_find(v, "<0xE9>", 6);
    ck_assert_int_eq(hearth_text_stream_push_token(s, be9, &out, &len), HEARTH_OK);
    ck_assert_uint_eq(len, 0);
    finish(s, &c);
    ck_assert_uint_eq(c.len, 6);
    ck_assert_mem_eq(c.buf, FFFD FFFD, 6);

    /* errors */
    hearth_text_stream_reset(s);
    ck_assert_int_eq(hearth_text_stream_push_token(s, 32000, &out, &len), HEARTH_E_INVALID);
    ck_assert_int_eq(hearth_text_stream_push_token(s, -1, &out, &len), HEARTH_E_INVALID);
    hearth_text_stream_free(s);
    s = new_stream(NULL, 0, NULL, 0);
    ck_assert_int_eq(hearth_text_stream_push_token(s, 5, &out, &len), HEARTH_E_INVALID);
    hearth_text_stream_free(s);
    const char *empty[] = {"ok", ""};
    hearth_text_stream_options o = {0, empty, 2};
    ck_assert_int_eq(hearth_text_stream_new(v, &o, &s), HEARTH_E_INVALID);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "stop string 1"));
    const char *bad[] = {"\xC3"};
    o.stop = bad;
    o.n_stop = 1;
    ck_assert_int_eq(hearth_text_stream_new(v, &o, &s), HEARTH_E_INVALID);
    o.n_stop = 0;
    o.decode_flags = 0x80;
    ck_assert_int_eq(hearth_text_stream_new(v, &o, &s), HEARTH_E_INVALID);
    hearth_vocab_free(v);
}
END_TEST

/* ---- against a whole-text reference ------------------------------------------- */

/* Replace ill-formed UTF-8 by U+FFFD per maximal subpart, written from
 * table 3-7 independently of the library. */
static size_t reference_sanitize(const unsigned char *in, size_t n, char *out)
{
    static const struct {
        unsigned char lead_lo, lead_hi, second_lo, second_hi, len;
    } forms[] = {
        {0xC2, 0xDF, 0x80, 0xBF, 2}, {0xE0, 0xE0, 0xA0, 0xBF, 3}, {0xE1, 0xEC, 0x80, 0xBF, 3},
        {0xED, 0xED, 0x80, 0x9F, 3}, {0xEE, 0xEF, 0x80, 0xBF, 3}, {0xF0, 0xF0, 0x90, 0xBF, 4},
        {0xF1, 0xF3, 0x80, 0xBF, 4}, {0xF4, 0xF4, 0x80, 0x8F, 4},
    };
    size_t o = 0, i = 0;
    while (i < n) {
        unsigned char b = in[i];
        if (b < 0x80) {
            out[o++] = (char)b;
            i++;
            continue;
        }
        size_t good = 0, want = 0;
        for (size_t f = 0; f < HEARTH_ARRAY_LEN(forms); f++) {
            if (b < forms[f].lead_lo || b > forms[f].lead_hi) continue;
            want = forms[f].len;
            good = 1;
            if (i + 1 < n && in[i + 1] >= forms[f].second_lo && in[i + 1] <= forms[f].second_hi) {
                good = 2;
                while (good < want && i + good < n && in[i + good] >= 0x80 && in[i + good] <= 0xBF)
                    good++;
            }
        }
        if (want && good == want) {
            memcpy(out + o, in + i, want);
            o += want;
            i += want;
        } else {
            memcpy(out + o, FFFD, 3);
            o += 3;
            i += good ? good : 1;
        }
    }
    return o;
}

/* The visible length of text under the stop strings: the first stop
 * string to be completed (the longest when several end at one byte). */
static size_t reference_stop(const char *text, size_t len, const char *const *stops, size_t n,
                             int *index)
{
    *index = -1;
    for (size_t end = 1; end <= len; end++) {
        size_t best_len = 0;
        for (size_t k = 0; k < n; k++) {
            size_t l = strlen(stops[k]);
            if (l <= end && l > best_len && memcmp(text + end - l, stops[k], l) == 0) {
                best_len = l;
                *index = (int)k;
            }
        }
        if (best_len) return end - best_len;
    }
    return len;
}

START_TEST(test_random_against_reference)
{
    /* Few distinct pieces, so that stop strings occur, overlap and are
     * cut; multi-byte characters and ill-formed bytes among them. */
    static const char *const pieces[] = {"a", "b", "ab", " ", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\xA6\x99",
                                         "\xC3", "\x80", "\xE2\x82", "\xF0\x9F", "\xED\xA0\x80", "\xFF"};
    static const char *const stop_pool[] = {"ab", "ba a", "aab", "\xC3\xA9" "a", "b\xE2\x82\xAC",
                                            "a" FFFD, "\xF0\x9F\xA6\x99\xF0\x9F\xA6\x99", "bbbb"};
    test_rng rng;
    test_rng_seed(&rng, 7);
    static unsigned char input[4096];
    static char want[4096 * 3];
    for (int iter = 0; iter < 3000; iter++) {
        size_t n_in = 0, n_pieces = test_rng_next(&rng) % 60;
        for (size_t i = 0; i < n_pieces; i++) {
            const char *p = pieces[test_rng_next(&rng) % HEARTH_ARRAY_LEN(pieces)];
            memcpy(input + n_in, p, strlen(p));
            n_in += strlen(p);
        }
        const char *stops[3];
        size_t n_stops = test_rng_next(&rng) % 4;
        for (size_t k = 0; k < n_stops; k++)
            stops[k] = stop_pool[test_rng_next(&rng) % HEARTH_ARRAY_LEN(stop_pool)];

        size_t n_want = reference_sanitize(input, n_in, want);
        int want_index;
        n_want = reference_stop(want, n_want, stops, n_stops, &want_index);

        hearth_text_stream *s = new_stream(NULL, 0, stops, n_stops);
        struct collected c = {.len = 0};
        for (size_t pos = 0; pos < n_in;) {
            size_t chunk = (size_t)(test_rng_next(&rng) % 5);
            if (chunk > n_in - pos) chunk = n_in - pos;
            const char *out;
            size_t len;
            ck_assert_int_eq(hearth_text_stream_push_bytes(s, (const char *)input + pos, chunk,
                                                           &out, &len),
                             HEARTH_OK);
            collect(&c, out, len);
            pos += chunk;
        }
        finish(s, &c);
        ck_assert_msg(c.len == n_want && memcmp(c.buf, want, n_want) == 0,
                      "iteration %d: %zu bytes out, %zu expected", iter, c.len, n_want);
        ck_assert_int_eq(hearth_text_stream_stop_index(s), want_index);
        hearth_text_stream_free(s);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("text-stream");
    TCase *tc = tcase_create("stream");
    tcase_add_test(tc, test_characters_split_over_byte_tokens);
    tcase_add_test(tc, test_stop_string_over_three_tokens);
    tcase_add_test(tc, test_diverging_prefix_is_released);
    tcase_add_test(tc, test_stop_string_choice);
    tcase_add_test(tc, test_maximal_subparts);
    tcase_add_test(tc, test_flush_and_invalid_tokens);
    tcase_add_test(tc, test_random_against_reference);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}

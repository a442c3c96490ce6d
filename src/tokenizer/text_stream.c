/*
 * text_stream.c -- streaming detokenization: token ids (or bytes) in,
 * displayable text out.  Two stages:
 *
 *  1. UTF-8 assembly: bytes are passed on only as whole, well-formed
 *     characters.  A sequence still unfinished at the end of a push waits
 *     for the next one; ill-formed bytes become U+FFFD, one for each
 *     maximal subpart (Unicode Standard, chapter 3, "U+FFFD substitution
 *     of maximal subparts").
 *  2. Stop strings: each stop string runs a Knuth-Morris-Pratt matcher
 *     over the text, whose state is the length of the longest suffix of
 *     the text so far that begins the stop string.  The largest state is
 *     exactly what must be held back; a state reaching the full length is
 *     a match.  Work is linear in the text times the number of stop
 *     strings, however the text is cut into pushes.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"
#include "utf8.h"

struct stop_matcher {
    char *text;
    size_t len;
    size_t *failure; /* failure[i]: longest proper border of text[0..i] */
    size_t state;
};

struct hearth_text_stream {
    const hearth_vocab *vocab;
    unsigned flags;
    bool strip_space;       /* the SentencePiece prefix is still to be removed */
    bool finished;
    int stop_index;         /* -1 until a stop string matched */

    unsigned char partial[4]; /* an unfinished UTF-8 sequence */
    size_t n_partial;

    struct stop_matcher *stops;
    size_t n_stops;

    char *held;             /* text that may begin a stop string */
    size_t n_held, cap_held;
    char *input;            /* partial + pushed bytes */
    size_t cap_input;
    char *out;              /* held + new text; the released part is returned */
    size_t cap_out;
};

/* Grow *buf to hold need bytes; it is always allocated afterwards, so
 * that pointer arithmetic on it is defined even for empty text. */
static hearth_status reserve(char **buf, size_t *cap, size_t need, const char *what)
{
    if (need <= *cap && *buf) return HEARTH_OK;
    size_t n = HEARTH_MAX(need, *cap * 2);
    if (n < 64) n = 64;
    char *p = hearth_realloc(*buf, n, what);
    if (!p) return HEARTH_E_NOMEM;
    *buf = p;
    *cap = n;
    return HEARTH_OK;
}

/* ---- construction ------------------------------------------------------------------ */

static hearth_status add_stop(hearth_text_stream *s, const char *text, size_t index)
{
    if (!text || !*text)
        return hearth_error(HEARTH_E_INVALID, "stop string %zu is empty", index);
    size_t len = strlen(text);
    if (!utf8_is_valid(text, len))
        return hearth_error(HEARTH_E_INVALID, "stop string %zu is not valid UTF-8", index);
    struct stop_matcher *m = &s->stops[s->n_stops];
    m->text = hearth_strndup(text, len, "a stop string");
    m->failure = hearth_calloc(len, sizeof *m->failure, "a stop string matcher");
    if (!m->text || !m->failure) {
        free(m->text);
        free(m->failure);
        return HEARTH_E_NOMEM;
    }
    m->len = len;
    m->state = 0;
    /* the KMP failure function */
    size_t k = 0;
    for (size_t i = 1; i < len; i++) {
        while (k > 0 && text[i] != text[k]) k = m->failure[k - 1];
        if (text[i] == text[k]) k++;
        m->failure[i] = k;
    }
    s->n_stops++;
    return HEARTH_OK;
}

void hearth_text_stream_free(hearth_text_stream *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n_stops; i++) {
        free(s->stops[i].text);
        free(s->stops[i].failure);
    }
    free(s->stops);
    free(s->held);
    free(s->input);
    free(s->out);
    free(s);
}

void hearth_text_stream_reset(hearth_text_stream *s)
{
    if (!s) return;
    s->strip_space = s->vocab && s->vocab->add_space_prefix &&
                     !(s->flags & HEARTH_DECODE_CONTINUATION);
    s->finished = false;
    s->stop_index = -1;
    s->n_partial = 0;
    s->n_held = 0;
    for (size_t i = 0; i < s->n_stops; i++) s->stops[i].state = 0;
}

hearth_status hearth_text_stream_new(const hearth_vocab *vocab,
                                     const hearth_text_stream_options *options,
                                     hearth_text_stream **out)
{
    if (!out) return hearth_error(HEARTH_E_INVALID, "hearth_text_stream_new: out is NULL");
    *out = NULL;
    hearth_text_stream_options none = {0, NULL, 0};
    if (!options) options = &none;
    if (options->decode_flags & ~(HEARTH_DECODE_SPECIAL | HEARTH_DECODE_CONTINUATION))
        return hearth_error(HEARTH_E_INVALID, "text stream: unknown decode flags 0x%x",
                            options->decode_flags);
    if (options->n_stop && !options->stop)
        return hearth_error(HEARTH_E_INVALID, "text stream: %zu stop strings but no array",
                            options->n_stop);
    hearth_text_stream *s = hearth_calloc(1, sizeof *s, "a text stream");
    if (!s) return HEARTH_E_NOMEM;
    s->vocab = vocab;
    s->flags = options->decode_flags;
    if (options->n_stop) {
        s->stops = hearth_calloc(options->n_stop, sizeof *s->stops, "stop strings");
        if (!s->stops) {
            hearth_text_stream_free(s);
            return HEARTH_E_NOMEM;
        }
        for (size_t i = 0; i < options->n_stop; i++) {
            hearth_status st = add_stop(s, options->stop[i], i);
            if (st) {
                hearth_text_stream_free(s);
                return st;
            }
        }
    }
    hearth_text_stream_reset(s);
    *out = s;
    return HEARTH_OK;
}

int hearth_text_stream_stop_index(const hearth_text_stream *s)
{
    return s ? s->stop_index : -1;
}

/* ---- stage 2: stop strings ------------------------------------------------------- */

/* s->out holds the held text followed by n_new new bytes of whole
 * characters.  Run the matchers over the new bytes and decide how much of
 * s->out is released (returned in *release); keep the rest held. */
static hearth_status match_stops(hearth_text_stream *s, size_t n_new, bool at_end, size_t *release)
{
    size_t total = s->n_held + n_new;
    if (s->n_stops == 0) {
        *release = total;
        s->n_held = 0;
        return HEARTH_OK;
    }
    const char *text = s->out + s->n_held;
    for (size_t j = 0; j < n_new; j++) {
        char c = text[j];
        size_t best = SIZE_MAX; /* stop string completed here, the longest */
        for (size_t k = 0; k < s->n_stops; k++) {
            struct stop_matcher *m = &s->stops[k];
            while (m->state > 0 && m->text[m->state] != c) m->state = m->failure[m->state - 1];
            if (m->text[m->state] == c) m->state++;
            if (m->state == m->len && (best == SIZE_MAX || m->len > s->stops[best].len)) best = k;
        }
        if (best != SIZE_MAX) {
            /* Everything from the start of the match on was still held or
             * new (the matcher's state never fell below its progress), so
             * the client sees nothing of it. */
            s->stop_index = (int)best;
            *release = s->n_held + j + 1 - s->stops[best].len;
            s->n_held = 0;
            return HEARTH_OK;
        }
    }
    size_t keep = 0;
    if (!at_end)
        for (size_t k = 0; k < s->n_stops; k++) keep = HEARTH_MAX(keep, s->stops[k].state);
    *release = total - keep;
    hearth_status st = reserve(&s->held, &s->cap_held, keep, "held-back text");
    if (st) return st;
    memcpy(s->held, s->out + *release, keep);
    s->n_held = keep;
    return HEARTH_OK;
}

/* ---- stage 1: UTF-8 assembly ------------------------------------------------------- */

/* Append the whole characters of partial + bytes to s->out after the held
 * text; an unfinished sequence at the end stays in partial, or becomes
 * U+FFFD when at_end.  Returns the bytes appended in *n_new. */
static hearth_status assemble(hearth_text_stream *s, const char *bytes, size_t n, bool at_end,
                              size_t *n_new)
{
    size_t n_in = s->n_partial + n;
    hearth_status st = reserve(&s->input, &s->cap_input, n_in, "stream input");
    if (st) return st;
    if (s->n_partial) memcpy(s->input, s->partial, s->n_partial);
    if (n) memcpy(s->input + s->n_partial, bytes, n);
    s->n_partial = 0;

    /* at worst every byte becomes a 3-byte U+FFFD */
    size_t need;
    if (hearth_mul_overflow(n_in, UTF8_REPLACEMENT_LEN, &need) ||
        hearth_add_overflow(need, s->n_held, &need))
        return hearth_error(HEARTH_E_NOMEM, "text stream: %zu bytes pushed at once", n);
    if ((st = reserve(&s->out, &s->cap_out, need, "stream output"))) return st;
    if (s->n_held) memcpy(s->out, s->held, s->n_held);

    const unsigned char *in = (const unsigned char *)s->input;
    char *o = s->out + s->n_held;
    size_t used = 0;
    for (size_t i = 0; i < n_in;) {
        if (in[i] < 0x80) {
            o[used++] = (char)in[i++];
            continue;
        }
        size_t len;
        utf8_scan_result r = utf8_scan(in + i, n_in - i, &len, NULL);
        if (r == UTF8_COMPLETE) {
            memcpy(o + used, in + i, len);
            used += len;
        } else if (r == UTF8_INVALID || at_end) {
            /* a truncated sequence at the very end is one maximal subpart */
            memcpy(o + used, UTF8_REPLACEMENT, UTF8_REPLACEMENT_LEN);
            used += UTF8_REPLACEMENT_LEN;
        } else {
            memcpy(s->partial, in + i, len); /* len <= 3 */
            s->n_partial = len;
        }
        i += len;
    }
    *n_new = used;
    return HEARTH_OK;
}

static hearth_status push(hearth_text_stream *s, const char *bytes, size_t n, bool at_end,
                          const char **text, size_t *len)
{
    *text = "";
    *len = 0;
    if (s->stop_index >= 0) return HEARTH_OK;
    size_t n_new = 0, release = 0;
    hearth_status st = assemble(s, bytes, n, at_end, &n_new);
    if (!st) st = match_stops(s, n_new, at_end, &release);
    if (st) return st;
    *text = s->out;
    *len = release;
    return HEARTH_OK;
}

static hearth_status check_open(const hearth_text_stream *s, const char **text, size_t *len)
{
    if (!s || !text || !len)
        return hearth_error(HEARTH_E_INVALID, "text stream: NULL argument");
    if (s->finished)
        return hearth_error(HEARTH_E_INVALID, "text stream: already finished (reset it first)");
    return HEARTH_OK;
}

hearth_status hearth_text_stream_push_bytes(hearth_text_stream *s, const char *bytes, size_t n,
                                            const char **text, size_t *len)
{
    hearth_status st = check_open(s, text, len);
    if (st) return st;
    if (!bytes && n) return hearth_error(HEARTH_E_INVALID, "text stream: bytes is NULL");
    return push(s, bytes, n, false, text, len);
}

hearth_status hearth_text_stream_push_token(hearth_text_stream *s, hearth_token token,
                                            const char **text, size_t *len)
{
    hearth_status st = check_open(s, text, len);
    if (st) return st;
    if (!s->vocab)
        return hearth_error(HEARTH_E_INVALID, "text stream: no vocabulary to decode token %ld",
                            (long)token);
    if (token < 0 || token >= s->vocab->n_tokens)
        return hearth_error(HEARTH_E_INVALID, "text stream: token id %ld outside the vocabulary "
                            "(0 .. %ld)", (long)token, (long)s->vocab->n_tokens - 1);
    size_t n;
    const char *piece = detok_piece(s->vocab, token, s->flags, &s->strip_space, &n);
    return push(s, piece, n, false, text, len);
}

hearth_status hearth_text_stream_finish(hearth_text_stream *s, const char **text, size_t *len)
{
    hearth_status st = check_open(s, text, len);
    if (st) return st;
    st = push(s, NULL, 0, true, text, len);
    s->finished = true;
    return st;
}

/*
 * tokenizer_wpm.c -- WordPiece ("bert" in GGUF files; Wu et al., "Google's
 * Neural Machine Translation System", 2016, section 4.1, and BERT's
 * tokenization): BERT's basic tokenization, then greedy longest-match-
 * first word pieces.
 *
 * Normalisation, character by character (BERT's BasicTokenizer and the
 * Hugging Face BertNormalizer): NUL, U+FFFD and the "other" characters
 * (Cc, Cf, Co, Cs) are removed, tab, line feed and carriage return
 * excepted; whitespace separates words; each CJK ideograph is a word of
 * its own; with accent stripping, the canonical decomposition (NFD)
 * without its nonspacing marks (Mn); with lower-casing, the full
 * lower-case mapping.  Pre-tokenization: each punctuation character
 * (categories P*, and ASCII's symbols) is a word of its own.  Both
 * normalisations default to on (uncased vocabularies), as the keys
 * tokenizer.ggml.normalizer.lowercase and .strip_accents (default: as
 * lowercase) may say otherwise.
 *
 * Word pieces: a word longer than WPM_MAX_WORD_CHARS characters is the
 * unknown token; otherwise from its start, the longest prefix of what is
 * left that is a token, a piece at the word's start written "▁piece" and
 * one inside the word "piece" -- the GGUF converters' form of BERT's
 * "piece" and "##piece" -- and if some rest of the word starts no token,
 * the whole word is the unknown token.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"
#include "tokenizer_wpm.h"
#include "utf8.h"

/* BERT's max_input_chars_per_word */
#define WPM_MAX_WORD_CHARS 100

#define WPM_SPACE "\xE2\x96\x81"
#define WPM_SPACE_LEN 3

static bool in_ranges(const struct wpm_range *r, size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (cp < r[mid].first) hi = mid;
        else if (cp > r[mid].last) lo = mid + 1;
        else return true;
    }
    return false;
}

static const struct wpm_map *find_map(const struct wpm_map *m, size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (cp < m[mid].cp) hi = mid;
        else if (cp > m[mid].cp) lo = mid + 1;
        else return &m[mid];
    }
    return NULL;
}

static bool is_cjk(uint32_t cp)
{
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) ||
           (cp >= 0x2B820 && cp <= 0x2CEAF) || (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

static bool is_punct(uint32_t cp)
{
    if (cp < 128)
        return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
               (cp >= 123 && cp <= 126);
    return in_ranges(wpm_punct, wpm_punct_n, cp);
}

/* The word being cut: its text after "▁", and where each character
 * starts. */
struct wpm_word {
    char *buf;          /* "▁" + the word's UTF-8 */
    size_t len, cap;    /* bytes after the prefix */
    uint32_t *starts;   /* byte offsets (after the prefix) of the characters */
    size_t n_chars, cap_chars;
};

static hearth_status word_add(struct wpm_word *w, uint32_t cp)
{
    if (w->len + 4 + WPM_SPACE_LEN > w->cap) {
        const size_t cap = w->cap ? 2 * w->cap : 64;
        char *b = hearth_realloc(w->buf, cap, "a word");
        if (!b) return HEARTH_E_NOMEM;
        memcpy(b, WPM_SPACE, WPM_SPACE_LEN);
        w->buf = b;
        w->cap = cap;
    }
    if (w->n_chars + 1 > w->cap_chars) {
        const size_t cap = w->cap_chars ? 2 * w->cap_chars : 32;
        uint32_t *s = hearth_realloc(w->starts, cap * sizeof *s, "a word's characters");
        if (!s) return HEARTH_E_NOMEM;
        w->starts = s;
        w->cap_chars = cap;
    }
    w->starts[w->n_chars++] = (uint32_t)w->len;
    w->len += utf8_encode(cp, w->buf + WPM_SPACE_LEN + w->len);
    return HEARTH_OK;
}

/* A token the pieces may be: not a control or unknown one. */
static hearth_token piece_lookup(const hearth_vocab *v, const char *text, size_t len)
{
    const hearth_token id = tok_lookup(v, text, len);
    if (id < 0) return -1;
    const uint8_t t = v->tokens[id].type;
    return t == HEARTH_TOKEN_NORMAL || t == HEARTH_TOKEN_USER_DEFINED || t == HEARTH_TOKEN_UNDEFINED ? id : -1;
}

/* The word's pieces onto out, and the word emptied. */
static hearth_status word_flush(const hearth_vocab *v, struct wpm_word *w, tok_vec *out)
{
    if (w->n_chars == 0) return HEARTH_OK;
    const size_t n = w->n_chars, first = out->n;
    const char *text = w->buf + WPM_SPACE_LEN;
    hearth_status st = HEARTH_OK;
    bool unknown = n > WPM_MAX_WORD_CHARS;
    for (size_t i = 0; i < n && !unknown && !st;) {
        size_t end = n;
        hearth_token id = -1;
        for (; end > i; end--) {
            const size_t to = end < n ? w->starts[end] : w->len;
            id = i == 0 ? piece_lookup(v, w->buf, WPM_SPACE_LEN + to)
                        : piece_lookup(v, text + w->starts[i], to - w->starts[i]);
            if (id >= 0) break;
        }
        if (id < 0) unknown = true;
        else st = tok_vec_push(out, id);
        i = end;
    }
    if (!st && unknown) {
        out->n = first;
        st = tok_vec_push(out, v->special[HEARTH_SPECIAL_UNK]);
    }
    w->len = w->n_chars = 0;
    return st;
}

/* Character c of the normalised text: a word of its own, a separator,
 * or part of the current word. */
static hearth_status wpm_char(const hearth_vocab *v, uint32_t c, struct wpm_word *w, tok_vec *out)
{
    if (in_ranges(wpm_space, wpm_space_n, c)) return word_flush(v, w, out);
    if (is_punct(c) || is_cjk(c)) {
        HEARTH_TRY(word_flush(v, w, out));
        HEARTH_TRY(word_add(w, c));
        return word_flush(v, w, out);
    }
    return word_add(w, c);
}

/* The lower case of c (one to three characters) through wpm_char. */
static hearth_status wpm_lowered(const hearth_vocab *v, uint32_t c, struct wpm_word *w, tok_vec *out)
{
    const struct wpm_map *m = v->wpm_lowercase ? find_map(wpm_lower, wpm_lower_n, c) : NULL;
    if (!m) return wpm_char(v, c, w, out);
    for (int k = 0; k < 3 && m->to[k]; k++) HEARTH_TRY(wpm_char(v, m->to[k], w, out));
    return HEARTH_OK;
}

/* Hangul syllables' canonical decomposition (Unicode 3.12). */
#define HANGUL_S0 0xAC00
#define HANGUL_COUNT 11172

hearth_status wpm_encode(const hearth_vocab *v, const char *text, size_t len, tok_vec *out)
{
    struct wpm_word w = {0};
    hearth_status st = HEARTH_OK;
    for (size_t i = 0; i < len && !st;) {
        size_t n;
        uint32_t cp;
        if (utf8_scan((const unsigned char *)text + i, len - i, &n, &cp) != UTF8_COMPLETE) cp = 0xFFFD;
        i += n ? n : 1;
        if (cp == 0 || cp == 0xFFFD || in_ranges(wpm_other, wpm_other_n, cp)) continue;
        if (!v->wpm_strip_accents) {
            st = wpm_lowered(v, cp, &w, out);
            continue;
        }
        if (cp >= HANGUL_S0 && cp < HANGUL_S0 + HANGUL_COUNT) {
            const uint32_t s = cp - HANGUL_S0, t = s % 28;
            st = wpm_lowered(v, 0x1100 + s / (21 * 28), &w, out);
            if (!st) st = wpm_lowered(v, 0x1161 + s % (21 * 28) / 28, &w, out);
            if (!st && t) st = wpm_lowered(v, 0x11A7 + t, &w, out);
            continue;
        }
        if (in_ranges(wpm_mark, wpm_mark_n, cp)) continue;
        const struct wpm_map *m = find_map(wpm_strip, wpm_strip_n, cp);
        if (!m) {
            st = wpm_lowered(v, cp, &w, out);
            continue;
        }
        for (int k = 0; k < 3 && m->to[k] && !st; k++) st = wpm_lowered(v, m->to[k], &w, out);
    }
    if (!st) st = word_flush(v, &w, out);
    free(w.buf);
    free(w.starts);
    return st;
}

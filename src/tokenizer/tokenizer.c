/*
 * tokenizer.c -- the tokenizer's driver and decoder: hearth_tokenize()
 * splits the text at special tokens when asked, adds BOS/EOS, and hands
 * each run of ordinary text to the SentencePiece or byte-level BPE
 * encoder; hearth_detokenize() and hearth_token_piece() turn ids back into
 * bytes.  The _alloc variants return the whole result in a buffer of
 * their own.  Also the pieces both encoders share: the growable id array, the
 * merge priority queue and the per-call scratch space.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

/* ---- shared pieces -------------------------------------------------------- */

hearth_status tok_vec_push(tok_vec *v, hearth_token id)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        hearth_token *ids = hearth_realloc(v->ids, cap * sizeof *ids, "token ids");
        if (!ids) return HEARTH_E_NOMEM;
        v->ids = ids;
        v->cap = cap;
    }
    v->ids[v->n++] = id;
    return HEARTH_OK;
}

/* A 4-ary heap: half the depth of a binary one, and the four children
 * of a node sit together in memory, which matters once the queue of a
 * long text no longer fits in cache. */
#define HEAP_ARITY 4

hearth_status merge_heap_push(merge_heap *h, struct merge_candidate c)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 256;
        struct merge_candidate *items = hearth_realloc(h->items, cap * sizeof *items,
                                                       "the merge queue");
        if (!items) return HEARTH_E_NOMEM;
        h->items = items;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / HEAP_ARITY;
        if (h->items[parent].key <= c.key) break;
        h->items[i] = h->items[parent];
        i = parent;
    }
    h->items[i] = c;
    return HEARTH_OK;
}

struct merge_candidate merge_heap_pop(merge_heap *h)
{
    struct merge_candidate top = h->items[0];
    struct merge_candidate last = h->items[--h->n];
    size_t n = h->n, i = 0;
    for (;;) {
        size_t first = HEAP_ARITY * i + 1;
        if (first >= n) break;
        size_t end = HEARTH_MIN(first + HEAP_ARITY, n), best = first;
        for (size_t c = first + 1; c < end; c++)
            if (h->items[c].key < h->items[best].key) best = c;
        if (last.key <= h->items[best].key) break;
        h->items[i] = h->items[best];
        i = best;
    }
    if (n) h->items[i] = last;
    return top;
}

hearth_status tok_scratch_symbols(tok_scratch *s, size_t n)
{
    if (n <= s->cap_symbols) return HEARTH_OK;
    size_t cap = HEARTH_MAX(n, s->cap_symbols * 2);
    size_t bytes;
    if (hearth_mul_overflow(cap, sizeof *s->symbols, &bytes))
        return hearth_error(HEARTH_E_NOMEM, "text too long to tokenize (%zu symbols)", n);
    struct tok_symbol *sym = hearth_realloc(s->symbols, bytes, "tokenizer symbols");
    if (!sym) return HEARTH_E_NOMEM;
    s->symbols = sym;
    s->cap_symbols = cap;
    return HEARTH_OK;
}

hearth_status tok_scratch_buf(tok_scratch *s, size_t bytes)
{
    if (bytes <= s->cap_buf) return HEARTH_OK;
    size_t cap = HEARTH_MAX(bytes, s->cap_buf * 2);
    char *buf = hearth_realloc(s->buf, cap, "tokenizer text buffer");
    if (!buf) return HEARTH_E_NOMEM;
    s->buf = buf;
    s->cap_buf = cap;
    return HEARTH_OK;
}

void tok_scratch_free(tok_scratch *s)
{
    free(s->symbols);
    free(s->heap.items);
    free(s->buf);
    pretok_state_free(s->pretok);
    memset(s, 0, sizeof *s);
}

/* ---- tokenize ----------------------------------------------------------------- */

/* One run of text without special tokens.  after_special: it starts the
 * text or follows a special token, where SentencePiece puts its space. */
static hearth_status encode_ordinary(const hearth_vocab *v, const char *text, size_t len,
                                     bool after_special, tok_scratch *s, tok_vec *out)
{
    if (len == 0) return HEARTH_OK;
    if (v->kind == HEARTH_VOCAB_SPM)
        return spm_encode(v, text, len, v->add_space_prefix && after_special, s, out);
    if (v->kind == HEARTH_VOCAB_RWKV) return rwkv_encode(v, text, len, out);
    if (v->kind == HEARTH_VOCAB_WPM) return wpm_encode(v, text, len, out);
    return bpe_encode(v, text, len, s, out);
}

static hearth_status encode_all(const hearth_vocab *v, const char *text, size_t len,
                                unsigned flags, tok_scratch *s, tok_vec *out)
{
    hearth_status st;
    bool add_special = (flags & HEARTH_TOKENIZE_ADD_SPECIAL) != 0;
    if (add_special && v->add_bos && (st = tok_vec_push(out, v->special[HEARTH_SPECIAL_BOS])))
        return st;
    bool after_special = true;
    size_t run_start = 0;
    const struct special_trie *trie =
        (flags & HEARTH_TOKENIZE_PARSE_SPECIAL) ? &v->specials : &v->user_defined;
    if (trie->n_nodes > 1) {
        size_t i = 0;
        for (;;) {
            i = special_next_candidate(trie, text, len, i);
            if (i >= len) break;
            size_t match_len = 0;
            hearth_token special = special_match(trie, text + i, len - i, &match_len);
            if (special < 0) {
                i++;
                continue;
            }
            if (i > run_start) {
                st = encode_ordinary(v, text + run_start, i - run_start, after_special, s, out);
                if (st) return st;
            }
            if ((st = tok_vec_push(out, special))) return st;
            after_special = true;
            i += match_len;
            run_start = i;
        }
    }
    if (run_start < len &&
        (st = encode_ordinary(v, text + run_start, len - run_start, after_special, s, out)))
        return st;
    if (add_special && v->add_eos && (st = tok_vec_push(out, v->special[HEARTH_SPECIAL_EOS])))
        return st;
    return HEARTH_OK;
}

/* The whole tokenization into *out (emptied on failure); fn names the
 * public function in the messages. */
static hearth_status tokenize_whole(const char *fn, const hearth_vocab *v, const char *text,
                                    size_t len, unsigned flags, tok_vec *out)
{
    if (!v) return hearth_error(HEARTH_E_INVALID, "%s: NULL argument", fn);
    if (!text && len) return hearth_error(HEARTH_E_INVALID, "%s: text is NULL", fn);
    if (flags & ~(HEARTH_TOKENIZE_ADD_SPECIAL | HEARTH_TOKENIZE_PARSE_SPECIAL))
        return hearth_error(HEARTH_E_INVALID, "%s: unknown flags 0x%x", fn, flags);
    tok_scratch scratch = {0};
    hearth_status st = encode_all(v, text ? text : "", len, flags, &scratch, out);
    tok_scratch_free(&scratch);
    if (st) {
        free(out->ids);
        memset(out, 0, sizeof *out);
    }
    return st;
}

hearth_status hearth_tokenize(const hearth_vocab *v, const char *text, size_t len, unsigned flags,
                              hearth_token *tokens, size_t capacity, size_t *n_tokens)
{
    if (!n_tokens) return hearth_error(HEARTH_E_INVALID, "hearth_tokenize: NULL argument");
    *n_tokens = 0;
    if (!tokens && capacity)
        return hearth_error(HEARTH_E_INVALID, "hearth_tokenize: tokens is NULL but capacity is %zu",
                            capacity);
    tok_vec out = {0};
    hearth_status st = tokenize_whole("hearth_tokenize", v, text, len, flags, &out);
    if (st) return st;
    *n_tokens = out.n;
    if (capacity && out.n) memcpy(tokens, out.ids, HEARTH_MIN(out.n, capacity) * sizeof *out.ids);
    free(out.ids);
    if (out.n > capacity)
        return hearth_error(HEARTH_E_RANGE, "the text needs %zu tokens, the buffer holds %zu",
                            out.n, capacity);
    return HEARTH_OK;
}

hearth_status hearth_tokenize_alloc(const hearth_vocab *v, const char *text, size_t len,
                                    unsigned flags, hearth_token **out, size_t *n_out)
{
    if (out) *out = NULL;
    if (n_out) *n_out = 0;
    if (!out || !n_out) return hearth_error(HEARTH_E_INVALID, "hearth_tokenize_alloc: NULL argument");
    tok_vec ids = {0};
    hearth_status st = tokenize_whole("hearth_tokenize_alloc", v, text, len, flags, &ids);
    if (st) return st;
    /* the growable array is the result: no second tokenization to fit a
     * buffer.  An empty result is still a buffer, as promised. */
    if (!ids.ids && !(ids.ids = hearth_malloc(sizeof *ids.ids, "token ids"))) return HEARTH_E_NOMEM;
    *out = ids.ids;
    *n_out = ids.n;
    return HEARTH_OK;
}

unsigned hearth_chat_tokenize_flags(const hearth_vocab *v, const char *text, size_t len)
{
    const hearth_token bos = v ? hearth_vocab_special(v, HEARTH_SPECIAL_BOS) : HEARTH_TOKEN_NONE;
    size_t n = 0;
    const char *bos_text = bos == HEARTH_TOKEN_NONE ? NULL : hearth_vocab_token_text(v, bos, &n);
    if (bos_text && n > 0 && text && len >= n && memcmp(text, bos_text, n) == 0)
        return HEARTH_TOKENIZE_PARSE_SPECIAL;
    return HEARTH_TOKENIZE_PARSE_SPECIAL | HEARTH_TOKENIZE_ADD_SPECIAL;
}

/* ---- decode --------------------------------------------------------------------- */

const char *hearth_token_piece(const hearth_vocab *v, hearth_token token, unsigned flags,
                               size_t *len)
{
    if (!v || token < 0 || token >= v->n_tokens) {
        if (len) *len = 0;
        return NULL;
    }
    const struct tok_entry *e = &v->tokens[token];
    bool hidden = (e->type == HEARTH_TOKEN_CONTROL || e->type == HEARTH_TOKEN_UNKNOWN) &&
                  !(flags & HEARTH_DECODE_SPECIAL);
    if (len) *len = hidden ? 0 : e->piece_len;
    return v->pieces + e->piece_off;
}

const char *detok_piece(const hearth_vocab *v, hearth_token token, unsigned flags,
                        bool *strip_space, size_t *len)
{
    const char *piece = hearth_token_piece(v, token, flags, len);
    if (*len && *strip_space) {
        /* SentencePiece drops the space it put in front of the text from
         * the first piece that has any text. */
        if (piece[0] == ' ') {
            piece++;
            (*len)--;
        }
        *strip_space = false;
    }
    return piece;
}

/* The bytes of tokens[0..n_tokens): up to capacity of them to text, the
 * total to *total; HEARTH_E_INVALID for an id out of range. */
static hearth_status detokenize_into(const hearth_vocab *v, const hearth_token *tokens,
                                     size_t n_tokens, unsigned flags, char *text, size_t capacity,
                                     size_t *total)
{
    bool strip = (v->add_space_prefix || v->kind == HEARTH_VOCAB_WPM) && !(flags & HEARTH_DECODE_CONTINUATION);
    *total = 0;
    for (size_t i = 0; i < n_tokens; i++) {
        if (tokens[i] < 0 || tokens[i] >= v->n_tokens)
            return hearth_error(HEARTH_E_INVALID,
                                "token %zu of %zu has id %ld, outside the vocabulary (0 .. %ld)",
                                i, n_tokens, (long)tokens[i], (long)v->n_tokens - 1);
        size_t n;
        const char *piece = detok_piece(v, tokens[i], flags, &strip, &n);
        if (*total < capacity) memcpy(text + *total, piece, HEARTH_MIN(n, capacity - *total));
        *total += n;
    }
    return HEARTH_OK;
}

hearth_status hearth_detokenize(const hearth_vocab *v, const hearth_token *tokens, size_t n_tokens,
                                unsigned flags, char *text, size_t capacity, size_t *len)
{
    if (!v || !len || (!tokens && n_tokens))
        return hearth_error(HEARTH_E_INVALID, "hearth_detokenize: NULL argument");
    if (!text && capacity)
        return hearth_error(HEARTH_E_INVALID, "hearth_detokenize: text is NULL but capacity is %zu",
                            capacity);
    *len = 0;
    size_t total;
    hearth_status st = detokenize_into(v, tokens, n_tokens, flags, text, capacity, &total);
    if (st) return st;
    *len = total;
    if (total > capacity)
        return hearth_error(HEARTH_E_RANGE, "the text takes %zu bytes, the buffer holds %zu", total,
                            capacity);
    return HEARTH_OK;
}

hearth_status hearth_detokenize_alloc(const hearth_vocab *v, const hearth_token *tokens,
                                      size_t n_tokens, unsigned flags, char **out, size_t *len_out)
{
    if (out) *out = NULL;
    if (len_out) *len_out = 0;
    if (!v || !out || !len_out || (!tokens && n_tokens))
        return hearth_error(HEARTH_E_INVALID, "hearth_detokenize_alloc: NULL argument");
    /* measure, then fill: pieces are looked up, not computed, so two
     * passes cost less than growing a buffer */
    size_t total;
    hearth_status st = detokenize_into(v, tokens, n_tokens, flags, NULL, 0, &total);
    if (st) return st;
    char *text = hearth_malloc(total + 1, "the detokenized text");
    if (!text) return HEARTH_E_NOMEM;
    detokenize_into(v, tokens, n_tokens, flags, text, total, &total);
    text[total] = '\0';
    *out = text;
    *len_out = total;
    return HEARTH_OK;
}

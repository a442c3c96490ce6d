/*
 * tokenizer_spm.c -- SentencePiece BPE encoding ("llama" vocabularies).
 *
 * Spaces are written U+2581 and, at the start of a text, one is put in
 * front.  The text starts as one symbol per character; the adjacent pair
 * whose concatenation is the vocabulary piece with the highest score (the
 * leftmost among equals) is merged, repeatedly, until no adjacent pair
 * forms a piece.  A priority queue of candidate pairs over a linked list
 * of symbols makes this O(n log n).  Characters left without a piece are
 * written as their UTF-8 bytes with the byte-fallback tokens <0xXX>.
 */
#include "internal.h"

#include <string.h>

#include "tokenizer.h"
#include "utf8.h"

#define SPM_SPACE "\xE2\x96\x81"
#define SPM_SPACE_LEN 3

/* Map a float to an unsigned integer of the same order. */
static uint32_t ordered_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

static hearth_status try_pair(const hearth_vocab *v, const char *text, tok_scratch *s,
                              int32_t left)
{
    if (left < 0) return HEARTH_OK;
    const struct tok_symbol *l = &s->symbols[left];
    if (l->next < 0) return HEARTH_OK;
    const struct tok_symbol *r = &s->symbols[l->next];
    hearth_token id = tok_lookup(v, text + l->start, l->len + r->len);
    if (id < 0 || !spm_mergeable(v, id)) return HEARTH_OK;
    /* highest score first, then leftmost */
    uint64_t key = ((uint64_t)~ordered_bits(v->tokens[id].score) << 32) | (uint32_t)left;
    return merge_heap_push(&s->heap, (struct merge_candidate){key, left, id});
}

static hearth_status emit_bytes(const hearth_vocab *v, const char *bytes, size_t n, tok_vec *out)
{
    for (size_t i = 0; i < n; i++) {
        hearth_token id = v->byte_token[(unsigned char)bytes[i]];
        if (id < 0) id = v->special[HEARTH_SPECIAL_UNK];
        if (id < 0) continue; /* nothing can stand for this byte */
        hearth_status st = tok_vec_push(out, id);
        if (st) return st;
    }
    return HEARTH_OK;
}

/* Encode buf[from..to) on its own: the symbols, the merges, the output. */
static hearth_status encode_run(const hearth_vocab *v, const char *buf, size_t from, size_t to,
                                tok_scratch *s, tok_vec *out)
{
    hearth_status st;
    int32_t n_sym = 0;
    for (size_t i = from; i < to;) {
        size_t clen = utf8_char_len((const unsigned char *)buf + i, to - i);
        struct tok_symbol *sym = &s->symbols[n_sym];
        sym->start = (uint32_t)i;
        sym->len = (uint32_t)clen;
        sym->prev = n_sym - 1;
        sym->next = i + clen < to ? n_sym + 1 : -1;
        hearth_token id = tok_lookup(v, buf + i, clen);
        sym->token = id >= 0 && spm_mergeable(v, id) ? id : -1;
        n_sym++;
        i += clen;
    }

    s->heap.n = 0;
    for (int32_t i = 0; i + 1 < n_sym; i++)
        if ((st = try_pair(v, buf, s, i))) return st;

    while (s->heap.n) {
        struct merge_candidate c = merge_heap_pop(&s->heap);
        struct tok_symbol *l = &s->symbols[c.left];
        /* Stale when the left symbol was merged away or either side grew
         * since the pair was queued: sizes only grow, so an unchanged sum
         * means the same two symbols. */
        if (l->len == 0 || l->next < 0) continue;
        struct tok_symbol *r = &s->symbols[l->next];
        if (l->len + r->len != v->tokens[c.token].text_len) continue;
        l->len += r->len;
        l->token = c.token;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) s->symbols[r->next].prev = c.left;
        if ((st = try_pair(v, buf, s, l->prev)) || (st = try_pair(v, buf, s, c.left))) return st;
    }

    for (int32_t i = n_sym > 0 ? 0 : -1; i >= 0; i = s->symbols[i].next) {
        const struct tok_symbol *sym = &s->symbols[i];
        st = sym->token >= 0 ? tok_vec_push(out, sym->token)
                             : emit_bytes(v, buf + sym->start, sym->len, out);
        if (st) return st;
    }
    return HEARTH_OK;
}

hearth_status spm_encode(const hearth_vocab *v, const char *text, size_t len, bool prefix_space,
                         tok_scratch *s, tok_vec *out)
{
    /* Escape: spaces become U+2581 (3 bytes), plus the dummy prefix. */
    size_t spaces = 0;
    for (size_t i = 0; i < len; i++) spaces += text[i] == ' ';
    size_t escaped = len + 2 * spaces + (prefix_space ? SPM_SPACE_LEN : 0);
    if (escaped > INT32_MAX || escaped < len)
        return hearth_error(HEARTH_E_RANGE, "text of %zu bytes is too long to tokenize", len);
    hearth_status st = tok_scratch_buf(s, escaped);
    if (!st) st = tok_scratch_symbols(s, escaped);
    if (st) return st;
    char *buf = s->buf;
    size_t n = 0;
    if (prefix_space) {
        memcpy(buf, SPM_SPACE, SPM_SPACE_LEN);
        n = SPM_SPACE_LEN;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(buf + n, SPM_SPACE, SPM_SPACE_LEN);
            n += SPM_SPACE_LEN;
        } else {
            buf[n++] = text[i];
        }
    }

    /* A byte no piece contains (a newline, in most vocabularies) can never
     * be merged with its neighbours, so the text on either side of it
     * merges independently: encoding the runs between such bytes one at a
     * time gives the same tokens with far smaller queues. */
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)buf[i];
        if (b >= 0x80 || !v->spm_isolated[b]) continue;
        if ((i > run && (st = encode_run(v, buf, run, i, s, out))) ||
            (st = encode_run(v, buf, i, i + 1, s, out)))
            return st;
        run = i + 1;
    }
    return run < n ? encode_run(v, buf, run, n, s, out) : HEARTH_OK;
}

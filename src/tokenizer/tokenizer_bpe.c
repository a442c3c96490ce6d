/*
 * tokenizer_bpe.c -- byte-level BPE encoding ("gpt2" vocabularies).
 *
 * Each word the pre-tokenizer makes starts as one symbol per byte, the
 * byte written as the printable character GPT-2's byte-level encoding
 * assigns to it.  The adjacent pair that comes first in
 * tokenizer.ggml.merges (the leftmost among equals) is merged, repeatedly,
 * until no adjacent pair is a merge.  A priority queue of candidate pairs
 * over a linked list of symbols keeps this O(n log n) per word, and the
 * merges are looked up by the ids of the pair in a hash table.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"
#include "utf8.h"

#define KEY_MERGES "tokenizer.ggml.merges"

/* ---- the byte <-> character map ------------------------------------------------
 * Bytes that are printable characters of Latin-1 (! .. ~, ¡ .. ¬, ® .. ÿ)
 * stand for themselves; the other 68 bytes, in increasing order, become
 * U+0100 .. U+0143. */

static bool byte_is_printable(unsigned b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t bpe_byte_to_cp(unsigned char b)
{
    if (byte_is_printable(b)) return b;
    if (b <= 0x20) return 0x100u + b;             /* 33 control bytes and space */
    if (b >= 0x7F && b <= 0xA0) return 0x121u + (b - 0x7Fu); /* 34 more */
    return 0x143u;                                /* the soft hyphen, 0xAD */
}

int bpe_cp_to_byte(uint32_t cp)
{
    if (cp < 0x100) return byte_is_printable(cp) ? (int)cp : -1;
    if (cp <= 0x120) return (int)(cp - 0x100);
    if (cp <= 0x142) return (int)(0x7F + (cp - 0x121));
    if (cp == 0x143) return 0xAD;
    return -1;
}

/* ---- the merge table ------------------------------------------------------------ */

static uint64_t pair_key(hearth_token left, hearth_token right)
{
    return ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
}

static uint64_t mix64(uint64_t x)
{
    /* the splitmix64 finalizer: spreads pairs of small ids over the table */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static const struct bpe_merge_slot *merge_find(const hearth_vocab *v, hearth_token left,
                                               hearth_token right)
{
    if (left < 0 || right < 0 || !v->merges.slots) return NULL;
    uint64_t key = pair_key(left, right);
    uint64_t i = mix64(key) & v->merges.mask;
    for (;;) {
        const struct bpe_merge_slot *s = &v->merges.slots[i];
        if (s->pair == key) return s;
        if (s->pair == UINT64_MAX) return NULL;
        i = (i + 1) & v->merges.mask;
    }
}

void bpe_free_merges(hearth_vocab *v)
{
    free(v->merges.slots);
    v->merges.slots = NULL;
}

hearth_status bpe_load_merges(hearth_vocab *v, const hearth_gguf *g)
{
    const char *path = hearth_gguf_path(g);
    hearth_gguf_value arr;
    hearth_status st = hearth_gguf_get_array(g, KEY_MERGES, &arr);
    if (st == HEARTH_E_NOT_FOUND)
        return hearth_error(HEARTH_E_FORMAT, "%s: byte-level BPE vocabulary without '%s'", path,
                            KEY_MERGES);
    if (st) return st;
    if (arr.v.arr.elem_type != HEARTH_GGUF_STRING)
        return hearth_error(HEARTH_E_FORMAT, "%s: '%s' is an array of %s, expected strings", path,
                            KEY_MERGES, hearth_gguf_type_name(arr.v.arr.elem_type));
    uint64_t n = arr.v.arr.n;
    if (n > (uint64_t)INT32_MAX)
        return hearth_error(HEARTH_E_FORMAT, "%s: '%s' has %llu merges, too many", path, KEY_MERGES,
                            (unsigned long long)n);
    uint64_t size = 16;
    while (size < n * 2) size *= 2;
    v->merges.slots = hearth_malloc((size_t)size * sizeof *v->merges.slots, "the BPE merge table");
    if (!v->merges.slots) return HEARTH_E_NOMEM;
    for (uint64_t i = 0; i < size; i++) v->merges.slots[i].pair = UINT64_MAX;
    v->merges.mask = size - 1;

    char *joined = NULL;
    size_t cap = 0;
    for (uint64_t rank = 0; rank < n; rank++) {
        hearth_gguf_value e;
        if ((st = hearth_gguf_array_get(g, &arr, rank, &e))) break;
        const char *m = e.v.str.ptr;
        size_t len = (size_t)e.v.str.len;
        /* "LEFT RIGHT": the first space after the first byte separates the
         * two, so a left side may itself be a space. */
        const char *sep = len > 1 ? memchr(m + 1, ' ', len - 1) : NULL;
        if (!sep) continue; /* not a merge; as unusable as one of unknown tokens */
        size_t left_len = (size_t)(sep - m), right_len = len - left_len - 1;
        hearth_token left = tok_lookup(v, m, left_len);
        hearth_token right = tok_lookup(v, sep + 1, right_len);
        if (left < 0 || right < 0) continue;
        if (left_len + right_len > cap) {
            cap = (left_len + right_len) * 2;
            char *bigger = hearth_realloc(joined, cap, "a BPE merge");
            if (!bigger) {
                st = HEARTH_E_NOMEM;
                break;
            }
            joined = bigger;
        }
        memcpy(joined, m, left_len);
        memcpy(joined + left_len, sep + 1, right_len);
        hearth_token result = tok_lookup(v, joined, left_len + right_len);
        if (result < 0) continue; /* a merge must make a token of the vocabulary */
        uint64_t key = pair_key(left, right);
        uint64_t i = mix64(key) & v->merges.mask;
        while (v->merges.slots[i].pair != UINT64_MAX && v->merges.slots[i].pair != key)
            i = (i + 1) & v->merges.mask;
        if (v->merges.slots[i].pair == key) continue; /* listed twice: the first rank counts */
        v->merges.slots[i] = (struct bpe_merge_slot){key, (int32_t)rank, result};
    }
    free(joined);
    return st;
}

/* ---- encoding ------------------------------------------------------------------- */

static hearth_status try_pair(const hearth_vocab *v, tok_scratch *s, int32_t left)
{
    if (left < 0) return HEARTH_OK;
    const struct tok_symbol *l = &s->symbols[left];
    if (l->next < 0) return HEARTH_OK;
    const struct bpe_merge_slot *m = merge_find(v, l->token, s->symbols[l->next].token);
    if (!m) return HEARTH_OK;
    /* lowest rank first, then leftmost */
    uint64_t key = ((uint64_t)(uint32_t)m->rank << 32) | (uint32_t)left;
    return merge_heap_push(&s->heap, (struct merge_candidate){key, left, m->result});
}

static hearth_status emit(const hearth_vocab *v, hearth_token id, tok_vec *out)
{
    if (id < 0) id = v->special[HEARTH_SPECIAL_UNK];
    if (id < 0) return HEARTH_OK; /* a byte the vocabulary cannot write */
    return tok_vec_push(out, id);
}

struct word_ctx {
    const hearth_vocab *v;
    tok_scratch *s;
    tok_vec *out;
};

/* The word as byte-level characters, for looking it up whole. */
static hearth_token whole_word_token(const hearth_vocab *v, const char *word, size_t len,
                                     tok_scratch *s, hearth_status *st)
{
    size_t bytes;
    if (hearth_mul_overflow(len, 2, &bytes)) {
        *st = hearth_error(HEARTH_E_RANGE, "word of %zu bytes is too long", len);
        return -1;
    }
    if ((*st = tok_scratch_buf(s, bytes))) return -1;
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += utf8_encode(bpe_byte_to_cp((unsigned char)word[i]), s->buf + n);
    hearth_token id = tok_lookup(v, s->buf, n);
    if (id >= 0 && v->tokens[id].type == HEARTH_TOKEN_CONTROL) id = -1;
    return id;
}

static hearth_status encode_word(const char *word, size_t len, void *ctx_)
{
    struct word_ctx *ctx = ctx_;
    const hearth_vocab *v = ctx->v;
    tok_scratch *s = ctx->s;
    hearth_status st = HEARTH_OK;
    if (len > INT32_MAX) return hearth_error(HEARTH_E_RANGE, "word of %zu bytes is too long", len);
    if (len == 1) return emit(v, v->byte_token[(unsigned char)word[0]], ctx->out);
    if (v->ignore_merges) {
        hearth_token id = whole_word_token(v, word, len, s, &st);
        if (st) return st;
        if (id >= 0) return tok_vec_push(ctx->out, id);
    }

    if ((st = tok_scratch_symbols(s, len))) return st;
    int32_t n_sym = (int32_t)len;
    for (int32_t i = 0; i < n_sym; i++) {
        struct tok_symbol *sym = &s->symbols[i];
        sym->start = (uint32_t)i;
        sym->len = 1;
        sym->prev = i - 1;
        sym->next = i + 1 < n_sym ? i + 1 : -1;
        sym->token = v->byte_token[(unsigned char)word[i]];
    }
    s->heap.n = 0;
    for (int32_t i = 0; i + 1 < n_sym; i++)
        if ((st = try_pair(v, s, i))) return st;

    while (s->heap.n) {
        struct merge_candidate c = merge_heap_pop(&s->heap);
        struct tok_symbol *l = &s->symbols[c.left];
        if (l->len == 0 || l->next < 0) continue;
        struct tok_symbol *r = &s->symbols[l->next];
        /* Stale unless the pair now there is still this merge: ranks are
         * unique per pair, so the same rank means the same pair. */
        const struct bpe_merge_slot *m = merge_find(v, l->token, r->token);
        if (!m || (uint32_t)m->rank != (uint32_t)(c.key >> 32)) continue;
        l->token = m->result;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) s->symbols[r->next].prev = c.left;
        if ((st = try_pair(v, s, l->prev)) || (st = try_pair(v, s, c.left))) return st;
    }
    for (int32_t i = 0; i >= 0; i = s->symbols[i].next)
        if ((st = emit(v, s->symbols[i].token, ctx->out))) return st;
    return HEARTH_OK;
}

hearth_status bpe_encode(const hearth_vocab *v, const char *text, size_t len, tok_scratch *s,
                         tok_vec *out)
{
    struct word_ctx ctx = {v, s, out};
    return pretok_split(v->pretok, text, len, s, encode_word, &ctx);
}

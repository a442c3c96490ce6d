/*
 * tokenizer.h -- internal interface between the parts of the tokenizer:
 * the vocabulary tables (tokenizer_vocab.c), the SentencePiece and
 * byte-level BPE encoders (tokenizer_spm.c, tokenizer_bpe.c), the
 * pre-tokenizers (tokenizer_pretok.c), special-token splitting
 * (tokenizer_special.c) and the driver and decoder (tokenizer.c).
 */
#ifndef HEARTH_TOKENIZER_H
#define HEARTH_TOKENIZER_H

#include "internal.h"

/* A growable array of token ids: the output of every encoder. */
typedef struct tok_vec {
    hearth_token *ids;
    size_t n, cap;
} tok_vec;

hearth_status tok_vec_push(tok_vec *v, hearth_token id);

/* One token of the vocabulary.  text is as stored in the file; piece is
 * the bytes it decodes to (see tokenizer_vocab.c). */
struct tok_entry {
    uint32_t text_off, text_len;   /* in vocab->text */
    uint32_t piece_off, piece_len; /* in vocab->pieces */
    float score;
    uint8_t type;                  /* hearth_token_type */
    bool eog;
};

/* Open-addressing hash table from token text to id. */
struct tok_hash {
    int32_t *slots; /* -1 = empty */
    uint32_t mask;
};

/* BPE merge table: the pair (left id, right id) -> rank and merged id. */
struct bpe_merge_slot {
    uint64_t pair;   /* (left << 32) | right; UINT64_MAX = empty */
    int32_t rank;
    int32_t result;
};

struct bpe_merges {
    struct bpe_merge_slot *slots;
    uint64_t mask;
};

/* Tokens matched by their text before ordinary tokenization: a byte trie
 * over their texts, children as sibling lists.  With
 * HEARTH_TOKENIZE_PARSE_SPECIAL every control, user-defined and unknown
 * token is matched; without it only the user-defined ones, which are
 * ordinary vocabulary entries the model's own tokenizer always matches
 * (added pieces such as runs of spaces), never control tokens. */
struct special_trie_node {
    int32_t first_child, next_sibling;
    int32_t token; /* token ending here, or -1 */
    unsigned char byte;
};

struct special_trie {
    struct special_trie_node *nodes; /* nodes[0] is the root */
    size_t n_nodes, cap;
    bool first_byte[256];            /* bytes some special token starts with */
};

struct pretok; /* tokenizer_pretok.c */

struct hearth_vocab {
    hearth_vocab_kind kind;
    int32_t n_tokens;
    struct tok_entry *tokens;
    char *text;                  /* all token texts */
    char *pieces;                /* all decoded pieces */
    struct tok_hash by_text;

    hearth_token special[HEARTH_SPECIAL_COUNT];
    bool add_bos, add_eos;
    bool add_space_prefix;       /* SentencePiece dummy prefix */
    bool ignore_merges;          /* BPE: a word that is a token is kept whole */
    bool wpm_lowercase;          /* WordPiece: lower-case the text */
    bool wpm_strip_accents;      /* WordPiece: drop the nonspacing marks of its NFD */

    /* SentencePiece: ASCII bytes that no mergeable piece contains. */
    bool spm_isolated[128];
    /* SentencePiece: the byte-fallback token of each byte.  Byte-level
     * BPE: the token of each byte's printable character. */
    hearth_token byte_token[256];

    struct bpe_merges merges;
    struct pretok *pretok;
    char pretok_name[32];

    struct special_trie specials;     /* control, user-defined, unknown */
    struct special_trie user_defined; /* user-defined only */
    struct special_trie rwkv_trie;    /* RWKV World: every token's bytes */
};

/* ---- vocabulary tables (tokenizer_vocab.c) ---- */

/* The id of the token with this exact text, or -1. */
hearth_token tok_lookup(const hearth_vocab *v, const char *text, size_t len);

static inline const char *tok_text(const hearth_vocab *v, hearth_token id)
{
    return v->text + v->tokens[id].text_off;
}

/* The piece of token for output under the HEARTH_DECODE_* flags; while
 * *strip_space is set, the first piece with any text loses a leading
 * space (SentencePiece's dummy prefix) and clears it.  The id must be
 * valid. */
const char *detok_piece(const hearth_vocab *v, hearth_token token, unsigned flags,
                        bool *strip_space, size_t *len);

/* ---- priority queue of candidate merges (tokenizer.c) ----
 * Both encoders repeatedly take the best adjacent pair; a binary heap
 * keyed by one 64-bit number (smallest first) serves both. */
struct merge_candidate {
    uint64_t key;  /* priority, ties broken by the left symbol's position */
    int32_t left;  /* index of the left symbol */
    int32_t token; /* the token the merge makes */
};

typedef struct merge_heap {
    struct merge_candidate *items;
    size_t n, cap;
} merge_heap;

hearth_status merge_heap_push(merge_heap *h, struct merge_candidate c);
struct merge_candidate merge_heap_pop(merge_heap *h);

/* A symbol of the text being encoded, linked to its live neighbours. */
struct tok_symbol {
    uint32_t start, len; /* bytes of the encoded text */
    int32_t prev, next;  /* -1 at the ends */
    hearth_token token;  /* the token the symbol is, or -1 */
};

/* Scratch space one tokenize call reuses for every fragment and word. */
typedef struct tok_scratch {
    struct tok_symbol *symbols;
    size_t cap_symbols;
    merge_heap heap;
    char *buf;          /* escaped or byte-mapped text */
    size_t cap_buf;
    struct pretok_state *pretok; /* tokenizer_pretok.c */
} tok_scratch;

hearth_status tok_scratch_symbols(tok_scratch *s, size_t n);
hearth_status tok_scratch_buf(tok_scratch *s, size_t bytes);
void tok_scratch_free(tok_scratch *s);

/* ---- SentencePiece (tokenizer_spm.c) ---- */

/* Pieces the SentencePiece encoder may produce from text: control,
 * unknown, byte and unused tokens are never the result of a merge. */
static inline bool spm_mergeable(const hearth_vocab *v, hearth_token id)
{
    uint8_t t = v->tokens[id].type;
    return t == HEARTH_TOKEN_NORMAL || t == HEARTH_TOKEN_USER_DEFINED ||
           t == HEARTH_TOKEN_UNDEFINED;
}

/* Encode one fragment of raw text (no special tokens in it), with the
 * dummy-prefix space in front when prefix_space. */
hearth_status spm_encode(const hearth_vocab *v, const char *text, size_t len, bool prefix_space,
                         tok_scratch *s, tok_vec *out);

/* ---- byte-level BPE (tokenizer_bpe.c) ---- */

/* The printable character GPT-2's byte-level encoding writes for byte b,
 * and the byte a code point stands for (-1 for code points that are not
 * such characters). */
uint32_t bpe_byte_to_cp(unsigned char b);
int bpe_cp_to_byte(uint32_t cp);

/* Read tokenizer.ggml.merges into v->merges. */
hearth_status bpe_load_merges(hearth_vocab *v, const hearth_gguf *gguf);
void bpe_free_merges(hearth_vocab *v);

/* Encode one fragment of raw text: pre-tokenize, then merge each word. */
/* RWKV World (tokenizer_rwkv.c): the bytes an escaped token text stands
 * for (never more than its length); the byte trie of every token; greedy
 * longest-match encoding. */
size_t rwkv_unescape(const char *t, size_t n, char *out);
hearth_status rwkv_build(hearth_vocab *v);
hearth_status rwkv_encode(const hearth_vocab *v, const char *text, size_t len, tok_vec *out);

hearth_status bpe_encode(const hearth_vocab *v, const char *text, size_t len, tok_scratch *s,
                         tok_vec *out);

/* WordPiece (tokenizer_wpm.c): encode one fragment of raw text. */
hearth_status wpm_encode(const hearth_vocab *v, const char *text, size_t len, tok_vec *out);

/* ---- pre-tokenizers (tokenizer_pretok.c) ---- */

/* Choose the pre-tokenizer for tokenizer.ggml.pre (NULL when absent) and
 * compile it into v->pretok. */
hearth_status pretok_load(hearth_vocab *v, const char *name, bool force_default);
void pretok_free(struct pretok *p);
/* Cut text[0..len) into words; calls word() for each, in order. */
typedef hearth_status (*pretok_word_fn)(const char *word, size_t len, void *ctx);
hearth_status pretok_split(const struct pretok *p, const char *text, size_t len, tok_scratch *s,
                           pretok_word_fn word, void *ctx);
void pretok_state_free(struct pretok_state *st);
extern const char pretok_supported_names[];

/* ---- special tokens (tokenizer_special.c) ---- */

hearth_status special_build(hearth_vocab *v);
void special_free(hearth_vocab *v);
/* The longest special token whose text starts text[0..len); its length
 * goes to *match_len.  -1 when none does. */
hearth_token special_match(const struct special_trie *t, const char *text, size_t len,
                           size_t *match_len);
/* The position of the next byte from which a special token could start. */
size_t special_next_candidate(const struct special_trie *t, const char *text, size_t len,
                              size_t from);

#endif /* HEARTH_TOKENIZER_H */

/*
 * tokenizer_vocab.c -- loading a vocabulary from the tokenizer.ggml.*
 * metadata of a GGUF file: token texts, scores and types, the designated
 * special tokens, which tokens end a generation, the decoded piece of
 * every token, and the public accessors.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"
#include "utf8.h"

#define KEY_MODEL "tokenizer.ggml.model"
#define KEY_PRE "tokenizer.ggml.pre"
#define KEY_TOKENS "tokenizer.ggml.tokens"
#define KEY_SCORES "tokenizer.ggml.scores"
#define KEY_TYPES "tokenizer.ggml.token_type"

/* "▁" (U+2581), SentencePiece's visible space. */
#define SPM_SPACE "\xE2\x96\x81"
#define SPM_SPACE_LEN 3

/* ---- token text hash ------------------------------------------------------ */

/* FNV-1a: short keys, no seed needed (the table never grows after load,
 * so there is nothing for crafted keys to degrade but one vocabulary's
 * own lookups). */
static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

hearth_token tok_lookup(const hearth_vocab *v, const char *text, size_t len)
{
    if (len == 0) return -1;
    uint32_t i = (uint32_t)hash_bytes(text, len) & v->by_text.mask;
    for (;;) {
        int32_t id = v->by_text.slots[i];
        if (id < 0) return -1;
        const struct tok_entry *e = &v->tokens[id];
        if (e->text_len == len && memcmp(v->text + e->text_off, text, len) == 0) return id;
        i = (i + 1) & v->by_text.mask;
    }
}

static hearth_status build_text_hash(hearth_vocab *v)
{
    uint32_t size = 16;
    while (size < (uint32_t)v->n_tokens * 2u) size *= 2;
    v->by_text.slots = hearth_malloc(size * sizeof(int32_t), "the token text index");
    if (!v->by_text.slots) return HEARTH_E_NOMEM;
    memset(v->by_text.slots, 0xff, size * sizeof(int32_t));
    v->by_text.mask = size - 1;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        const struct tok_entry *e = &v->tokens[id];
        if (e->text_len == 0) continue; /* an empty token can never be matched */
        const char *t = v->text + e->text_off;
        uint32_t i = (uint32_t)hash_bytes(t, e->text_len) & v->by_text.mask;
        for (;;) {
            int32_t other = v->by_text.slots[i];
            if (other < 0) {
                v->by_text.slots[i] = id;
                break;
            }
            const struct tok_entry *o = &v->tokens[other];
            if (o->text_len == e->text_len && memcmp(v->text + o->text_off, t, e->text_len) == 0) {
                /* A text listed twice: the later id wins, as in the
                 * reference converters' dictionaries. */
                v->by_text.slots[i] = id;
                break;
            }
            i = (i + 1) & v->by_text.mask;
        }
    }
    return HEARTH_OK;
}

/* ---- reading the arrays ------------------------------------------------------ */

static hearth_status read_tokens(hearth_vocab *v, const hearth_gguf *g, const char *path)
{
    hearth_gguf_value arr;
    hearth_status st = hearth_gguf_get_array(g, KEY_TOKENS, &arr);
    if (st == HEARTH_E_NOT_FOUND)
        return hearth_error(HEARTH_E_FORMAT, "%s: metadata key '%s' is missing", path, KEY_TOKENS);
    if (st) return st;
    if (arr.v.arr.elem_type != HEARTH_GGUF_STRING)
        return hearth_error(HEARTH_E_FORMAT, "%s: '%s' is an array of %s, expected strings", path,
                            KEY_TOKENS, hearth_gguf_type_name(arr.v.arr.elem_type));
    if (arr.v.arr.n == 0 || arr.v.arr.n > (uint64_t)INT32_MAX)
        return hearth_error(HEARTH_E_FORMAT, "%s: '%s' has %llu tokens (expected 1 .. %d)", path,
                            KEY_TOKENS, (unsigned long long)arr.v.arr.n, INT32_MAX);
    v->n_tokens = (int32_t)arr.v.arr.n;
    v->tokens = hearth_calloc((size_t)v->n_tokens, sizeof *v->tokens, "the token table");
    if (!v->tokens) return HEARTH_E_NOMEM;

    uint64_t total = 0;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        hearth_gguf_value e;
        if ((st = hearth_gguf_array_get(g, &arr, (uint64_t)i, &e))) return st;
        total += e.v.str.len;
    }
    if (total >= UINT32_MAX)
        return hearth_error(HEARTH_E_FORMAT, "%s: '%s' holds %llu bytes of text, more than 4 GiB",
                            path, KEY_TOKENS, (unsigned long long)total);
    v->text = hearth_malloc((size_t)total + 1, "the token texts");
    v->pieces = hearth_malloc((size_t)total + 1, "the token pieces");
    if (!v->text || !v->pieces) return HEARTH_E_NOMEM;
    uint32_t off = 0;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        hearth_gguf_value e;
        if ((st = hearth_gguf_array_get(g, &arr, (uint64_t)i, &e))) return st;
        memcpy(v->text + off, e.v.str.ptr, (size_t)e.v.str.len);
        v->tokens[i].text_off = off;
        v->tokens[i].text_len = (uint32_t)e.v.str.len;
        v->tokens[i].type = HEARTH_TOKEN_NORMAL;
        off += (uint32_t)e.v.str.len;
    }
    return HEARTH_OK;
}

/* An optional per-token array: missing is fine, any other mismatch is an
 * error naming the key. */
static hearth_status optional_array(const hearth_gguf *g, const char *path, const char *key,
                                    int32_t n, hearth_gguf_value *arr, bool *present)
{
    hearth_status st = hearth_gguf_get_array(g, key, arr);
    *present = false;
    if (st == HEARTH_E_NOT_FOUND) return HEARTH_OK;
    if (st) return st;
    if (arr->v.arr.n != (uint64_t)n)
        return hearth_error(HEARTH_E_FORMAT, "%s: '%s' has %llu elements but there are %d tokens",
                            path, key, (unsigned long long)arr->v.arr.n, n);
    *present = true;
    return HEARTH_OK;
}

static hearth_status read_scores_and_types(hearth_vocab *v, const hearth_gguf *g, const char *path)
{
    hearth_gguf_value arr;
    bool present;
    hearth_status st = optional_array(g, path, KEY_SCORES, v->n_tokens, &arr, &present);
    if (st) return st;
    if (present) {
        hearth_gguf_type t = arr.v.arr.elem_type;
        if (t != HEARTH_GGUF_FLOAT32 && t != HEARTH_GGUF_FLOAT64)
            return hearth_error(HEARTH_E_FORMAT, "%s: '%s' is an array of %s, expected float32",
                                path, KEY_SCORES, hearth_gguf_type_name(t));
        for (int32_t i = 0; i < v->n_tokens; i++) {
            hearth_gguf_value e;
            if ((st = hearth_gguf_array_get(g, &arr, (uint64_t)i, &e))) return st;
            v->tokens[i].score = (float)e.v.f;
        }
    }
    if ((st = optional_array(g, path, KEY_TYPES, v->n_tokens, &arr, &present))) return st;
    if (present) {
        hearth_gguf_type t = arr.v.arr.elem_type;
        bool is_signed = t == HEARTH_GGUF_INT8 || t == HEARTH_GGUF_INT16 ||
                         t == HEARTH_GGUF_INT32 || t == HEARTH_GGUF_INT64;
        bool is_unsigned = t == HEARTH_GGUF_UINT8 || t == HEARTH_GGUF_UINT16 ||
                           t == HEARTH_GGUF_UINT32 || t == HEARTH_GGUF_UINT64;
        if (!is_signed && !is_unsigned)
            return hearth_error(HEARTH_E_FORMAT, "%s: '%s' is an array of %s, expected int32",
                                path, KEY_TYPES, hearth_gguf_type_name(t));
        for (int32_t i = 0; i < v->n_tokens; i++) {
            hearth_gguf_value e;
            if ((st = hearth_gguf_array_get(g, &arr, (uint64_t)i, &e))) return st;
            int64_t type = is_signed ? e.v.i : (int64_t)HEARTH_MIN(e.v.u, (uint64_t)INT64_MAX);
            /* unknown values are kept as "undefined", decoded like normal
             * tokens */
            v->tokens[i].type = type >= HEARTH_TOKEN_UNDEFINED && type <= HEARTH_TOKEN_BYTE
                                    ? (uint8_t)type
                                    : HEARTH_TOKEN_UNDEFINED;
        }
    }
    return HEARTH_OK;
}

/* ---- special tokens ------------------------------------------------------------ */

static const struct {
    hearth_special_token which;
    const char *key;
} special_keys[] = {
    {HEARTH_SPECIAL_BOS, "tokenizer.ggml.bos_token_id"},
    {HEARTH_SPECIAL_EOS, "tokenizer.ggml.eos_token_id"},
    {HEARTH_SPECIAL_EOT, "tokenizer.ggml.eot_token_id"},
    {HEARTH_SPECIAL_EOM, "tokenizer.ggml.eom_token_id"},
    {HEARTH_SPECIAL_UNK, "tokenizer.ggml.unknown_token_id"},
    {HEARTH_SPECIAL_PAD, "tokenizer.ggml.padding_token_id"},
    {HEARTH_SPECIAL_SEP, "tokenizer.ggml.seperator_token_id"}, /* sic, as in the GGUF spec */
};

/* Texts of the tokens models use to end a turn, in order of preference
 * when the file does not say which one is EOT.  Many conversions only
 * set EOS, so generation must also stop on these. */
static const char *const end_of_turn_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>",
};
/* Texts that end a turn only where the file marks them as control tokens
 * (Kimi-K2's "[EOS]" and "[EOT]"): as plain text a vocabulary may well
 * hold such a string. */
static const char *const control_end_texts[] = {"[EOS]", "[EOT]"};
static const char *const end_of_message_text = "<|eom_id|>";
/* OpenAI's harmony format (gpt-oss, o200k_harmony): a reply ends with
 * "<|return|>", or with "<|call|>" after a tool call; "<|end|>" ends one
 * message of several (the reasoning before the answer), not the turn. */
static const char *const harmony_ends[] = {"<|return|>", "<|call|>"};

static hearth_token find_text(const hearth_vocab *v, const char *s)
{
    return tok_lookup(v, s, strlen(s));
}

static hearth_status read_special_ids(hearth_vocab *v, const hearth_gguf *g)
{
    for (int i = 0; i < HEARTH_SPECIAL_COUNT; i++) v->special[i] = HEARTH_TOKEN_NONE;
    if (v->kind == HEARTH_VOCAB_SPM && v->n_tokens > 2) {
        /* SentencePiece's conventional ids, used when the file is silent */
        v->special[HEARTH_SPECIAL_UNK] = 0;
        v->special[HEARTH_SPECIAL_BOS] = 1;
        v->special[HEARTH_SPECIAL_EOS] = 2;
    }
    for (size_t k = 0; k < HEARTH_ARRAY_LEN(special_keys); k++) {
        int64_t id;
        hearth_status st = hearth_gguf_get_i64(g, special_keys[k].key, &id);
        if (st == HEARTH_E_NOT_FOUND) continue;
        if (st) return st;
        /* Out-of-range ids (often 0xFFFFFFFF) mean "none". */
        v->special[special_keys[k].which] =
            id >= 0 && id < v->n_tokens ? (hearth_token)id : HEARTH_TOKEN_NONE;
    }
    const hearth_token harmony_end = find_text(v, "<|end|>");
    const bool harmony = harmony_end >= 0 && find_text(v, harmony_ends[0]) >= 0 &&
                         find_text(v, harmony_ends[1]) >= 0;
    if (v->special[HEARTH_SPECIAL_EOT] == HEARTH_TOKEN_NONE) {
        for (size_t k = 0; k < HEARTH_ARRAY_LEN(end_of_turn_texts); k++) {
            if (harmony && strcmp(end_of_turn_texts[k], "<|end|>") == 0) continue;
            hearth_token id = find_text(v, end_of_turn_texts[k]);
            if (id >= 0) {
                v->special[HEARTH_SPECIAL_EOT] = id;
                break;
            }
        }
    }
    if (harmony && v->special[HEARTH_SPECIAL_EOT] == HEARTH_TOKEN_NONE)
        v->special[HEARTH_SPECIAL_EOT] = find_text(v, harmony_ends[0]);
    if (v->special[HEARTH_SPECIAL_EOM] == HEARTH_TOKEN_NONE)
        v->special[HEARTH_SPECIAL_EOM] = find_text(v, end_of_message_text);

    /* End of generation: the designated ends and every known end-of-turn
     * marker.  They are control tokens whatever the file says, so they
     * are never shown as text. */
    const hearth_special_token ends[] = {HEARTH_SPECIAL_EOS, HEARTH_SPECIAL_EOT,
                                         HEARTH_SPECIAL_EOM};
    for (size_t k = 0; k < HEARTH_ARRAY_LEN(ends); k++) {
        hearth_token id = v->special[ends[k]];
        if (id >= 0) v->tokens[id].eog = true;
    }
    for (size_t k = 0; k <= HEARTH_ARRAY_LEN(end_of_turn_texts); k++) {
        const char *t = k < HEARTH_ARRAY_LEN(end_of_turn_texts) ? end_of_turn_texts[k]
                                                                 : end_of_message_text;
        hearth_token id = find_text(v, t);
        if (id >= 0) {
            v->tokens[id].eog = true;
            v->tokens[id].type = HEARTH_TOKEN_CONTROL;
        }
    }
    for (size_t k = 0; k < HEARTH_ARRAY_LEN(control_end_texts); k++) {
        hearth_token id = find_text(v, control_end_texts[k]);
        if (id >= 0 && v->tokens[id].type == HEARTH_TOKEN_CONTROL) v->tokens[id].eog = true;
    }
    if (harmony) {
        for (size_t k = 0; k < HEARTH_ARRAY_LEN(harmony_ends); k++) {
            hearth_token id = find_text(v, harmony_ends[k]);
            v->tokens[id].eog = true;
            v->tokens[id].type = HEARTH_TOKEN_CONTROL;
        }
        v->tokens[harmony_end].eog = false; /* whatever the file designates */
    }
    return HEARTH_OK;
}

static hearth_status read_flags(hearth_vocab *v, const hearth_gguf *g)
{
    static const struct {
        const char *key;
        size_t offset;
    } flags[] = {
        {"tokenizer.ggml.add_bos_token", offsetof(hearth_vocab, add_bos)},
        {"tokenizer.ggml.add_eos_token", offsetof(hearth_vocab, add_eos)},
        {"tokenizer.ggml.add_space_prefix", offsetof(hearth_vocab, add_space_prefix)},
    };
    for (size_t k = 0; k < HEARTH_ARRAY_LEN(flags); k++) {
        bool b;
        hearth_status st = hearth_gguf_get_bool(g, flags[k].key, &b);
        if (st == HEARTH_E_NOT_FOUND) continue;
        if (st) return st;
        *(bool *)((char *)v + flags[k].offset) = b;
    }
    /* The space prefix is a SentencePiece rule; byte-level BPE writes
     * spaces as they are. */
    if (v->kind != HEARTH_VOCAB_SPM) v->add_space_prefix = false;
    if (v->special[HEARTH_SPECIAL_BOS] < 0) v->add_bos = false;
    if (v->special[HEARTH_SPECIAL_EOS] < 0) v->add_eos = false;
    return HEARTH_OK;
}

/* ---- decoded pieces ---------------------------------------------------------------- */

/* The byte of a "<0xXX>" token, or -1 when the text is not of that form. */
static int parse_byte_token(const char *t, size_t n)
{
    if (n != 6 || t[0] != '<' || t[1] != '0' || t[2] != 'x' || t[5] != '>') return -1;
    int value = 0;
    for (int i = 3; i < 5; i++) {
        char c = t[i];
        int d = c >= '0' && c <= '9' ? c - '0'
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                       : -1;
        if (d < 0) return -1;
        value = value * 16 + d;
    }
    return value;
}

/* Write the bytes token id decodes to at out (never longer than its
 * text); returns their number. */
static size_t decode_piece(const hearth_vocab *v, hearth_token id, char *out)
{
    const struct tok_entry *e = &v->tokens[id];
    const char *t = v->text + e->text_off;
    size_t n = e->text_len;
    if (e->type == HEARTH_TOKEN_CONTROL || e->type == HEARTH_TOKEN_UNKNOWN ||
        e->type == HEARTH_TOKEN_USER_DEFINED) {
        memcpy(out, t, n);
        return n;
    }
    if (e->type == HEARTH_TOKEN_BYTE) {
        int b = parse_byte_token(t, n);
        if (b >= 0) {
            out[0] = (char)b;
            return 1;
        }
    }
    size_t used = 0;
    if (v->kind == HEARTH_VOCAB_RWKV) return rwkv_unescape(t, n, out);
    if (v->kind == HEARTH_VOCAB_SPM || v->kind == HEARTH_VOCAB_WPM) {
        for (size_t i = 0; i < n;) {
            if (i + SPM_SPACE_LEN <= n && memcmp(t + i, SPM_SPACE, SPM_SPACE_LEN) == 0) {
                out[used++] = ' ';
                i += SPM_SPACE_LEN;
            } else {
                out[used++] = t[i++];
            }
        }
        return used;
    }
    /* Byte-level BPE: every character stands for one byte; anything else
     * (not produced by the byte-level encoding) is kept as it is. */
    for (size_t i = 0; i < n;) {
        size_t len;
        uint32_t cp;
        if (utf8_scan((const unsigned char *)t + i, n - i, &len, &cp) == UTF8_COMPLETE) {
            int b = bpe_cp_to_byte(cp);
            if (b >= 0) {
                out[used++] = (char)b;
            } else {
                memcpy(out + used, t + i, len);
                used += len;
            }
        } else {
            memcpy(out + used, t + i, len);
            used += len;
        }
        i += len;
    }
    return used;
}

static void build_pieces(hearth_vocab *v)
{
    uint32_t off = 0;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        size_t n = decode_piece(v, id, v->pieces + off);
        v->tokens[id].piece_off = off;
        v->tokens[id].piece_len = (uint32_t)n;
        off += (uint32_t)n;
    }
}

static void build_byte_tokens(hearth_vocab *v)
{
    for (int b = 0; b < 256; b++) {
        hearth_token id = -1;
        if (v->kind == HEARTH_VOCAB_SPM) {
            static const char hex[] = "0123456789ABCDEF";
            char name[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
            id = tok_lookup(v, name, sizeof name);
            if (id < 0) {
                /* vocabularies without byte tokens may still hold the
                 * byte as a one-character piece */
                char c = (char)b;
                id = tok_lookup(v, &c, 1);
            }
        } else {
            char utf8[4];
            size_t n = utf8_encode(bpe_byte_to_cp((unsigned char)b), utf8);
            id = tok_lookup(v, utf8, n);
        }
        v->byte_token[b] = id;
    }
}

/* ASCII bytes that no SentencePiece piece contains: the encoder cuts the
 * text at them (tokenizer_spm.c). */
static void find_isolated_bytes(hearth_vocab *v)
{
    for (int b = 0; b < 128; b++) v->spm_isolated[b] = true;
    for (hearth_token id = 0; id < v->n_tokens; id++) {
        if (!spm_mergeable(v, id)) continue;
        const unsigned char *t = (const unsigned char *)tok_text(v, id);
        for (uint32_t i = 0; i < v->tokens[id].text_len; i++)
            if (t[i] < 128) v->spm_isolated[t[i]] = false;
    }
}

/* ---- WordPiece ------------------------------------------------------------------- */

/* A WordPiece vocabulary's [CLS] (the first token, as BOS), [SEP] (the
 * last, as EOS) and [UNK] -- from the keys, else by their texts -- and
 * its normalisation (tokenizer_wpm.c). */
static hearth_status wpm_load(hearth_vocab *v, const hearth_gguf *g)
{
    const char *path = hearth_gguf_path(g);
    int64_t id;
    hearth_status st = hearth_gguf_get_i64(g, "tokenizer.ggml.cls_token_id", &id);
    if (st && st != HEARTH_E_NOT_FOUND) return st;
    if (!st && id >= 0 && id < v->n_tokens) v->special[HEARTH_SPECIAL_BOS] = (hearth_token)id;
    static const struct {
        hearth_special_token which;
        const char *text;
    } defaults[] = {{HEARTH_SPECIAL_BOS, "[CLS]"}, {HEARTH_SPECIAL_SEP, "[SEP]"}, {HEARTH_SPECIAL_UNK, "[UNK]"}};
    for (size_t k = 0; k < HEARTH_ARRAY_LEN(defaults); k++)
        if (v->special[defaults[k].which] < 0) v->special[defaults[k].which] = find_text(v, defaults[k].text);
    if (v->special[HEARTH_SPECIAL_EOS] < 0) v->special[HEARTH_SPECIAL_EOS] = v->special[HEARTH_SPECIAL_SEP];
    if (v->special[HEARTH_SPECIAL_UNK] < 0)
        return hearth_error(HEARTH_E_FORMAT, "%s: a WordPiece vocabulary without an unknown token "
                            "(tokenizer.ggml.unknown_token_id, or [UNK])", path);
    bool b = true;
    st = hearth_gguf_get_bool(g, "tokenizer.ggml.normalizer.lowercase", &b);
    if (st && st != HEARTH_E_NOT_FOUND) return st;
    v->wpm_lowercase = b;
    st = hearth_gguf_get_bool(g, "tokenizer.ggml.normalizer.strip_accents", &b);
    if (st && st != HEARTH_E_NOT_FOUND) return st;
    v->wpm_strip_accents = st == HEARTH_E_NOT_FOUND ? v->wpm_lowercase : b;
    return HEARTH_OK;
}

/* ---- load / free ----------------------------------------------------------------- */

void hearth_vocab_free(hearth_vocab *v)
{
    if (!v) return;
    pretok_free(v->pretok);
    bpe_free_merges(v);
    special_free(v);
    free(v->rwkv_trie.nodes);
    free(v->by_text.slots);
    free(v->tokens);
    free(v->text);
    free(v->pieces);
    free(v);
}

hearth_status hearth_vocab_load(const hearth_gguf *g, const hearth_vocab_options *options,
                                hearth_vocab **out)
{
    if (!g || !out) return hearth_error(HEARTH_E_INVALID, "hearth_vocab_load: NULL argument");
    *out = NULL;
    hearth_vocab_options defaults = {false};
    if (!options) options = &defaults;
    const char *path = hearth_gguf_path(g);

    const char *model;
    hearth_status st = hearth_gguf_get_str(g, KEY_MODEL, &model);
    if (st == HEARTH_E_NOT_FOUND)
        return hearth_error(HEARTH_E_NOT_FOUND, "%s: no tokenizer (metadata key '%s' is missing)",
                            path, KEY_MODEL);
    if (st) return st;

    hearth_vocab *v = hearth_calloc(1, sizeof *v, "a vocabulary");
    if (!v) return HEARTH_E_NOMEM;
    if (strcmp(model, "llama") == 0) {
        v->kind = HEARTH_VOCAB_SPM;
        v->add_bos = true;
        v->add_space_prefix = true;
    } else if (strcmp(model, "gpt2") == 0) {
        v->kind = HEARTH_VOCAB_BPE;
    } else if (strcmp(model, "rwkv") == 0) {
        v->kind = HEARTH_VOCAB_RWKV;
    } else if (strcmp(model, "bert") == 0) {
        /* [CLS] ... [SEP] */
        v->kind = HEARTH_VOCAB_WPM;
        v->add_bos = v->add_eos = true;
    } else {
        hearth_vocab_free(v);
        return hearth_error(HEARTH_E_UNSUPPORTED,
                            "%s: tokenizer model '%s' is not supported (supported: llama, gpt2, rwkv, bert)",
                            path, model);
    }

    if ((st = read_tokens(v, g, path)) || (st = read_scores_and_types(v, g, path)) ||
        (st = build_text_hash(v)))
        goto fail;
    if (v->kind == HEARTH_VOCAB_BPE) {
        const char *pre = NULL;
        st = hearth_gguf_get_str(g, KEY_PRE, &pre);
        if (st && st != HEARTH_E_NOT_FOUND) goto fail;
        /* the pre-tokenizer sets the defaults of add_bos and ignore_merges,
         * which the keys read below may override */
        if ((st = pretok_load(v, st ? NULL : pre, options->force_default_pretokenizer))) {
            hearth_error_prefix("%s", path);
            goto fail;
        }
        if ((st = bpe_load_merges(v, g))) goto fail;
    }
    if ((st = read_special_ids(v, g)) || (v->kind == HEARTH_VOCAB_WPM && (st = wpm_load(v, g))) ||
        (st = read_flags(v, g)))
        goto fail;
    build_byte_tokens(v);
    build_pieces(v);
    if (v->kind == HEARTH_VOCAB_SPM) find_isolated_bytes(v);
    if (v->kind == HEARTH_VOCAB_RWKV && (st = rwkv_build(v))) {
        hearth_error_prefix("%s", path);
        goto fail;
    }
    if ((st = special_build(v))) goto fail;
    *out = v;
    return HEARTH_OK;

fail:
    hearth_vocab_free(v);
    return st;
}

/* ---- accessors ---------------------------------------------------------------- */

hearth_vocab_kind hearth_vocab_get_kind(const hearth_vocab *v)
{
    return v->kind;
}

const char *hearth_vocab_pretokenizer(const hearth_vocab *v)
{
    return v->pretok_name;
}

const char *hearth_vocab_supported_pretokenizers(void)
{
    return pretok_supported_names;
}

int32_t hearth_vocab_n_tokens(const hearth_vocab *v)
{
    return v->n_tokens;
}

hearth_token hearth_vocab_special(const hearth_vocab *v, hearth_special_token which)
{
    if ((int)which < 0 || which >= HEARTH_SPECIAL_COUNT) return HEARTH_TOKEN_NONE;
    return v->special[which];
}

bool hearth_vocab_adds_bos(const hearth_vocab *v)
{
    return v->add_bos;
}

bool hearth_vocab_adds_eos(const hearth_vocab *v)
{
    return v->add_eos;
}

bool hearth_vocab_is_eog(const hearth_vocab *v, hearth_token token)
{
    return token >= 0 && token < v->n_tokens && v->tokens[token].eog;
}

hearth_token_type hearth_vocab_token_type(const hearth_vocab *v, hearth_token token)
{
    if (token < 0 || token >= v->n_tokens) return HEARTH_TOKEN_UNDEFINED;
    return (hearth_token_type)v->tokens[token].type;
}

const char *hearth_vocab_token_text(const hearth_vocab *v, hearth_token token, size_t *len)
{
    if (token < 0 || token >= v->n_tokens) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = v->tokens[token].text_len;
    return v->text + v->tokens[token].text_off;
}

hearth_token hearth_vocab_find(const hearth_vocab *v, const char *text, size_t len)
{
    if (!text) return HEARTH_TOKEN_NONE;
    return tok_lookup(v, text, len);
}

/*
 * tokenizer_rwkv.c -- the RWKV World tokenizer ("rwkv" in GGUF files):
 * the token texts are stored escaped ("\n", "\t", "\r", "\xHH", and a
 * backslash before any other character standing for that character); the
 * bytes they stand for go into a byte trie, and text is encoded by greedy
 * longest match: at each position the longest token whose bytes start
 * there, a byte without any token becoming the unknown token (a
 * vocabulary that has neither is refused when it is loaded).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

size_t rwkv_unescape(const char *t, size_t n, char *out)
{
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i] != '\\' || i + 1 >= n) {
            out[used++] = t[i];
            continue;
        }
        const char c = t[++i];
        if (c == 't') out[used++] = '\t';
        else if (c == 'n') out[used++] = '\n';
        else if (c == 'r') out[used++] = '\r';
        else if (c == 'x' && i + 2 < n && hex_digit(t[i + 1]) >= 0 && hex_digit(t[i + 2]) >= 0) {
            out[used++] = (char)(hex_digit(t[i + 1]) * 16 + hex_digit(t[i + 2]));
            i += 2;
        } else {
            out[used++] = c;
        }
    }
    return used;
}

/* Nodes of the byte trie: children in sibling lists, the root's in a
 * table of 256. */
static int32_t node_new(struct special_trie *t, unsigned char byte)
{
    if (t->n_nodes == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 4096;
        struct special_trie_node *nodes = hearth_realloc(t->nodes, cap * sizeof *nodes, "the RWKV token trie");
        if (!nodes) return -1;
        t->nodes = nodes;
        t->cap = cap;
    }
    struct special_trie_node *nd = &t->nodes[t->n_nodes];
    nd->first_child = nd->next_sibling = -1;
    nd->token = -1;
    nd->byte = byte;
    return (int32_t)t->n_nodes++;
}

static int32_t child(const struct special_trie *t, int32_t node, unsigned char byte)
{
    for (int32_t c = t->nodes[node].first_child; c >= 0; c = t->nodes[c].next_sibling)
        if (t->nodes[c].byte == byte) return c;
    return -1;
}

hearth_status rwkv_build(hearth_vocab *v)
{
    struct special_trie *t = &v->rwkv_trie;
    /* node 0 is unused; nodes 1 .. 256 are the root's children, by byte */
    for (int b = 0; b <= 256; b++)
        if (node_new(t, (unsigned char)(b ? b - 1 : 0)) < 0) return HEARTH_E_NOMEM;
    for (hearth_token id = 0; id < v->n_tokens; id++) {
        const struct tok_entry *e = &v->tokens[id];
        if (e->piece_len == 0) continue;
        const unsigned char *p = (const unsigned char *)v->pieces + e->piece_off;
        int32_t node = 1 + p[0];
        for (uint32_t i = 1; i < e->piece_len; i++) {
            int32_t c = child(t, node, p[i]);
            if (c < 0) {
                if ((c = node_new(t, p[i])) < 0) return HEARTH_E_NOMEM;
                t->nodes[c].next_sibling = t->nodes[node].first_child;
                t->nodes[node].first_child = c;
            }
            node = c;
        }
        /* two tokens with the same bytes: the later one wins, as in the
         * reference implementation */
        t->nodes[node].token = id;
    }
    /* Every byte must be spelled, by its own token or the unknown one, so
     * that encoding never fails. */
    if (v->special[HEARTH_SPECIAL_UNK] < 0)
        for (int b = 0; b < 256; b++)
            if (t->nodes[1 + b].token < 0)
                return hearth_error(HEARTH_E_FORMAT, "RWKV vocabulary: byte 0x%02x has no token and there is "
                                    "no unknown token", b);
    return HEARTH_OK;
}

hearth_status rwkv_encode(const hearth_vocab *v, const char *text, size_t len, tok_vec *out)
{
    const struct special_trie *t = &v->rwkv_trie;
    const unsigned char *s = (const unsigned char *)text;
    for (size_t pos = 0; pos < len;) {
        int32_t node = 1 + s[pos];
        hearth_token best = t->nodes[node].token;
        size_t best_len = best >= 0 ? 1 : 0;
        for (size_t i = pos + 1; i < len; i++) {
            node = child(t, node, s[i]);
            if (node < 0) break;
            if (t->nodes[node].token >= 0) {
                best = t->nodes[node].token;
                best_len = i + 1 - pos;
            }
        }
        if (best < 0) {
            /* a byte without a token (rwkv_build checked there is an
             * unknown token then) */
            best = v->special[HEARTH_SPECIAL_UNK];
            best_len = 1;
        }
        HEARTH_TRY(tok_vec_push(out, best));
        pos += best_len;
    }
    return HEARTH_OK;
}

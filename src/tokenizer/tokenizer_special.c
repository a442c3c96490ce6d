/*
 * tokenizer_special.c -- finding special tokens (control, user-defined and
 * unknown tokens such as "<|im_start|>") in text: all of them when
 * tokenizing with HEARTH_TOKENIZE_PARSE_SPECIAL, the user-defined ones
 * always.  Matching is leftmost-longest, as the
 * added-token matching of the published tokenizers does: at each position
 * the longest special token that starts there wins.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

static int32_t trie_new_node(struct special_trie *t, unsigned char byte)
{
    if (t->n_nodes == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        struct special_trie_node *nodes =
            hearth_realloc(t->nodes, cap * sizeof *nodes, "the special-token index");
        if (!nodes) return -1;
        t->nodes = nodes;
        t->cap = cap;
    }
    struct special_trie_node *n = &t->nodes[t->n_nodes];
    n->first_child = n->next_sibling = -1;
    n->token = -1;
    n->byte = byte;
    return (int32_t)t->n_nodes++;
}

static int32_t trie_child(const struct special_trie *t, int32_t node, unsigned char byte)
{
    for (int32_t c = t->nodes[node].first_child; c >= 0; c = t->nodes[c].next_sibling)
        if (t->nodes[c].byte == byte) return c;
    return -1;
}

static hearth_status trie_insert(struct special_trie *t, const char *text, size_t len,
                                 hearth_token token)
{
    int32_t node = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char b = (unsigned char)text[i];
        int32_t c = trie_child(t, node, b);
        if (c < 0) {
            if ((c = trie_new_node(t, b)) < 0) return HEARTH_E_NOMEM;
            t->nodes[c].next_sibling = t->nodes[node].first_child;
            t->nodes[node].first_child = c;
        }
        node = c;
    }
    /* Two special tokens with the same text: the lower id wins. */
    if (t->nodes[node].token < 0) t->nodes[node].token = token;
    return HEARTH_OK;
}

static hearth_status trie_build(hearth_vocab *v, struct special_trie *t, bool user_defined_only)
{
    if (trie_new_node(t, 0) < 0) return HEARTH_E_NOMEM;
    for (hearth_token id = 0; id < v->n_tokens; id++) {
        const struct tok_entry *e = &v->tokens[id];
        if (e->text_len == 0) continue;
        bool wanted = e->type == HEARTH_TOKEN_USER_DEFINED ||
                      (!user_defined_only && (e->type == HEARTH_TOKEN_CONTROL ||
                                              e->type == HEARTH_TOKEN_UNKNOWN));
        if (!wanted) continue;
        const char *text = tok_text(v, id);
        hearth_status st = trie_insert(t, text, e->text_len, id);
        if (st) return st;
        t->first_byte[(unsigned char)text[0]] = true;
    }
    return HEARTH_OK;
}

hearth_status special_build(hearth_vocab *v)
{
    HEARTH_TRY(trie_build(v, &v->specials, false));
    return trie_build(v, &v->user_defined, true);
}

void special_free(hearth_vocab *v)
{
    free(v->specials.nodes);
    v->specials.nodes = NULL;
    free(v->user_defined.nodes);
    v->user_defined.nodes = NULL;
}

hearth_token special_match(const struct special_trie *t, const char *text, size_t len,
                           size_t *match_len)
{
    hearth_token best = -1;
    int32_t node = 0;
    for (size_t i = 0; i < len; i++) {
        node = trie_child(t, node, (unsigned char)text[i]);
        if (node < 0) break;
        if (t->nodes[node].token >= 0) {
            best = t->nodes[node].token;
            *match_len = i + 1;
        }
    }
    return best;
}

size_t special_next_candidate(const struct special_trie *t, const char *text, size_t len,
                              size_t from)
{
    const bool *first = t->first_byte;
    while (from < len && !first[(unsigned char)text[from]]) from++;
    return from;
}

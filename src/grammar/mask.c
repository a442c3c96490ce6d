/*
 * mask.c -- token masks: which tokens of a vocabulary a grammar state
 * allows.
 *
 * The vocabulary's tokens are sorted by their bytes and laid out as a
 * prefix tree in preorder, so a walk that finds a prefix impossible skips
 * the whole subtree.  Walking the tree against a set of stacks would cost
 * a large part of the vocabulary per token, so the walk is cached: a
 * stack's fate for most tokens is decided by its top GCACHE_DEPTH
 * positions, and for each such key the cache holds
 *
 *   - the tokens the key's positions accept whatever lies below them,
 *   - the tokens that are refused before the walk ever reaches below,
 *   - and the uncertain rest, which leave the key part way through and so
 *     depend on the stack below.
 *
 * A mask is then the union, over the stacks of the state, of the accepted
 * tokens (a list, the complement of a list, or a bitset, whichever is
 * smallest) and of the uncertain tokens that the whole stack accepts,
 * checked by a walk over just them that shares their common prefixes.
 * End-of-generation tokens are allowed exactly when a stack is empty
 * (the root rule may end there).
 *
 * Entries are computed the first time a key is met, under the cache's
 * lock, and never change afterwards; every matcher of a grammar shares
 * them.
 */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"

/* Tokens longer than this are never allowed (no vocabulary has them). */
#define GVOCAB_MAX_TOKEN 4096

/* ---- the vocabulary --------------------------------------------------- */

struct sort_item {
    const unsigned char *p;
    uint32_t len;
    int32_t id;
};

static int sort_item_cmp(const void *a, const void *b)
{
    const struct sort_item *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = n ? memcmp(x->p, y->p, n) : 0;
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

void gvocab_free(struct gvocab *v)
{
    if (!v) return;
    free(v->off);
    free(v->len);
    free(v->bytes);
    free(v->kind);
    free(v->sorted);
    free(v->lcp);
    free(v->trie_end);
    free(v->trie_tok_lo);
    free(v->trie_tok_hi);
    free(v->trie_sub_hi);
    free(v->trie_depth);
    free(v->trie_byte);
    free(v->eog);
    free(v->universe);
    memset(v, 0, sizeof *v);
}

static inline size_t bitset_words(int32_t n) { return ((size_t)n + 63) / 64; }

hearth_status gvocab_build(int32_t n_tokens, const char *const *pieces, const size_t *lens,
                           const uint8_t *kinds, struct gvocab *v)
{
    memset(v, 0, sizeof *v);
    if (n_tokens <= 0) return hearth_error(HEARTH_E_INVALID, "grammar: empty vocabulary");
    size_t total = 0;
    for (int32_t t = 0; t < n_tokens; t++)
        if (kinds[t] == GTOK_TEXT && lens[t] > 0 && lens[t] <= GVOCAB_MAX_TOKEN) total += lens[t];
    size_t nt = (size_t)n_tokens;
    v->n_tokens = n_tokens;
    v->off = hearth_calloc(nt, sizeof *v->off, "grammar vocabulary");
    v->len = hearth_calloc(nt, sizeof *v->len, "grammar vocabulary");
    v->bytes = hearth_malloc(total + 1, "grammar vocabulary");
    v->kind = hearth_calloc(nt, 1, "grammar vocabulary");
    v->sorted = hearth_malloc(nt * sizeof *v->sorted, "grammar vocabulary");
    v->lcp = hearth_calloc(nt, sizeof *v->lcp, "grammar vocabulary");
    v->eog = hearth_malloc(nt * sizeof *v->eog, "grammar vocabulary");
    v->universe = hearth_calloc(bitset_words(n_tokens), sizeof(uint64_t), "grammar vocabulary");
    struct sort_item *items = hearth_malloc(nt * sizeof *items, "grammar vocabulary");
    if (!v->off || !v->len || !v->bytes || !v->kind || !v->sorted || !v->lcp || !v->eog ||
        !v->universe || !items) {
        free(items);
        gvocab_free(v);
        return HEARTH_E_NOMEM;
    }
    size_t at = 0;
    int32_t n = 0;
    for (int32_t t = 0; t < n_tokens; t++) {
        if (kinds[t] == GTOK_EOG) {
            v->kind[t] = GTOK_EOG;
            v->eog[v->n_eog++] = t;
            continue;
        }
        if (kinds[t] != GTOK_TEXT || lens[t] == 0 || lens[t] > GVOCAB_MAX_TOKEN) continue;
        v->kind[t] = GTOK_TEXT;
        v->off[t] = (uint32_t)at;
        v->len[t] = (uint32_t)lens[t];
        memcpy(v->bytes + at, pieces[t], lens[t]);
        items[n].p = v->bytes + at;
        items[n].len = (uint32_t)lens[t];
        items[n].id = t;
        n++;
        at += lens[t];
        v->universe[t >> 6] |= (uint64_t)1 << (t & 63);
        if ((int32_t)lens[t] > v->max_len) v->max_len = (int32_t)lens[t];
    }
    qsort(items, (size_t)n, sizeof *items, sort_item_cmp);
    v->n_sorted = n;
    size_t n_nodes = 0;
    for (int32_t i = 0; i < n; i++) {
        v->sorted[i] = items[i].id;
        uint32_t l = 0;
        if (i > 0) {
            uint32_t m = HEARTH_MIN(items[i].len, items[i - 1].len);
            while (l < m && items[i].p[l] == items[i - 1].p[l]) l++;
        }
        v->lcp[i] = (uint16_t)l;
        n_nodes += items[i].len - l;
    }
    free(items);

    /* the prefix tree: one node per distinct prefix, in preorder */
    v->trie_end = hearth_malloc((n_nodes + 1) * sizeof *v->trie_end, "grammar vocabulary");
    v->trie_tok_lo = hearth_malloc((n_nodes + 1) * sizeof *v->trie_tok_lo, "grammar vocabulary");
    v->trie_tok_hi = hearth_malloc((n_nodes + 1) * sizeof *v->trie_tok_hi, "grammar vocabulary");
    v->trie_sub_hi = hearth_malloc((n_nodes + 1) * sizeof *v->trie_sub_hi, "grammar vocabulary");
    v->trie_depth = hearth_malloc((n_nodes + 1) * sizeof *v->trie_depth, "grammar vocabulary");
    v->trie_byte = hearth_malloc(n_nodes + 1, "grammar vocabulary");
    int32_t *open = hearth_malloc(((size_t)v->max_len + 2) * sizeof *open, "grammar vocabulary");
    if (!v->trie_end || !v->trie_tok_lo || !v->trie_tok_hi || !v->trie_sub_hi || !v->trie_depth ||
        !v->trie_byte || !open) {
        free(open);
        gvocab_free(v);
        return HEARTH_E_NOMEM;
    }
    int32_t nn = 0, depth = 0; /* open[1..depth]: the nodes of the current path */
    for (int32_t i = 0; i < n; i++) {
        int32_t t = v->sorted[i];
        const unsigned char *p = v->bytes + v->off[t];
        int32_t len = (int32_t)v->len[t], l = v->lcp[i];
        while (depth > l) {
            int32_t k = open[depth--];
            v->trie_end[k] = nn;
            v->trie_sub_hi[k] = i;
        }
        for (int32_t d = depth + 1; d <= len; d++) {
            v->trie_byte[nn] = p[d - 1];
            v->trie_depth[nn] = (uint16_t)d;
            v->trie_tok_lo[nn] = i;
            v->trie_tok_hi[nn] = i;
            open[d] = nn++;
        }
        depth = len;
        v->trie_tok_hi[open[len]] = i + 1;
    }
    while (depth > 0) {
        int32_t k = open[depth--];
        v->trie_end[k] = nn;
        v->trie_sub_hi[k] = n;
    }
    v->n_trie = nn;
    free(open);
    return HEARTH_OK;
}

/* ---- the cache -------------------------------------------------------- */

struct gcache {
    pthread_mutex_t lock;
    struct gcache_entry **slots;   /* open addressing by key */
    uint32_t mask;
    int32_t n;
    size_t bytes;
};

hearth_status gcache_new(struct gcache **out)
{
    struct gcache *c = hearth_calloc(1, sizeof *c, "a grammar cache");
    if (!c) return HEARTH_E_NOMEM;
    c->mask = 255;
    c->slots = hearth_calloc((size_t)c->mask + 1, sizeof *c->slots, "a grammar cache");
    if (!c->slots) {
        free(c);
        return HEARTH_E_NOMEM;
    }
    pthread_mutex_init(&c->lock, NULL);
    *out = c;
    return HEARTH_OK;
}

static void entry_free(struct gcache_entry *e)
{
    if (!e) return;
    free(e->ids);
    free(e->bits);
    free(e->uncertain);
    free(e->uncertain_lcp);
    free(e);
}

void gcache_free(struct gcache *c)
{
    if (!c) return;
    for (uint32_t i = 0; i <= c->mask; i++) entry_free(c->slots[i]);
    free(c->slots);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

void gcache_stats(struct gcache *c, int32_t *n_entries, size_t *bytes)
{
    pthread_mutex_lock(&c->lock);
    *n_entries = c->n;
    *bytes = c->bytes;
    pthread_mutex_unlock(&c->lock);
}

static uint32_t key_hash(const int32_t *key)
{
    uint64_t h = 0x243F6A8885A308D3ull;
    for (int i = 0; i <= GCACHE_DEPTH; i++) {
        h ^= (uint32_t)key[i];
        h *= 0x9E3779B97F4A7C15ull;
    }
    return (uint32_t)(h >> 29);
}

/* The entry for key, or NULL; the caller holds the lock. */
static struct gcache_entry *cache_find_locked(struct gcache *c, const int32_t *key)
{
    uint32_t h = key_hash(key) & c->mask;
    while (c->slots[h]) {
        if (memcmp(c->slots[h]->key, key, sizeof c->slots[h]->key) == 0) return c->slots[h];
        h = (h + 1) & c->mask;
    }
    return NULL;
}

static hearth_status cache_insert_locked(struct gcache *c, struct gcache_entry *e)
{
    if ((uint32_t)(c->n + 1) * 2 > c->mask) {
        uint32_t size = (c->mask + 1) * 2;
        struct gcache_entry **slots = hearth_calloc(size, sizeof *slots, "a grammar cache");
        if (!slots) return HEARTH_E_NOMEM;
        for (uint32_t i = 0; i <= c->mask; i++) {
            if (!c->slots[i]) continue;
            uint32_t h = key_hash(c->slots[i]->key) & (size - 1);
            while (slots[h]) h = (h + 1) & (size - 1);
            slots[h] = c->slots[i];
        }
        free(c->slots);
        c->slots = slots;
        c->mask = size - 1;
    }
    uint32_t h = key_hash(e->key) & c->mask;
    while (c->slots[h]) h = (h + 1) & c->mask;
    c->slots[h] = e;
    c->n++;
    return HEARTH_OK;
}

/* ---- work buffers ------------------------------------------------------ */

hearth_status gmask_work_init(struct gmask_work *w, const struct gvocab *v)
{
    memset(w, 0, sizeof *w);
    w->n_sets = v->max_len + 2;
    w->sets = hearth_calloc((size_t)w->n_sets, sizeof *w->sets, "grammar mask buffers");
    w->tmp = hearth_malloc(bitset_words(v->n_tokens) * sizeof(uint64_t), "grammar mask buffers");
    w->cls = hearth_malloc((size_t)v->n_sorted + 1, "grammar mask buffers");
    hearth_status st = (w->sets && w->tmp && w->cls) ? HEARTH_OK : HEARTH_E_NOMEM;
    if (!st) st = garena_init(&w->sim);
    if (st) gmask_work_free(w);
    return st;
}

void gmask_work_free(struct gmask_work *w)
{
    if (w->sets)
        for (int32_t i = 0; i < w->n_sets; i++) gset_free(&w->sets[i]);
    free(w->sets);
    free(w->tmp);
    free(w->cls);
    garena_free(&w->sim);
    memset(w, 0, sizeof *w);
}

/* ---- computing an entry ------------------------------------------------ */

enum { CLS_REJECT = 0, CLS_ACCEPT = 1, CLS_UNCERTAIN = 2 };

static bool set_has_stack(const struct gset *s)
{
    for (int32_t i = 0; i < s->n; i++)
        if (s->s[i] >= 0) return true;
    return false;
}

/* Walk the prefix tree from the stack the key describes, classifying
 * every token into w->cls. */
static hearth_status classify(const struct grammar_ir *g, const struct gvocab *v, const int32_t *key,
                              struct gmask_work *w)
{
    struct garena *a = &w->sim;
    garena_truncate(a, 0);
    int32_t cur = key[GCACHE_DEPTH] == GSTACK_CONTEXT ? GSTACK_CONTEXT : GSTACK_EMPTY;
    for (int i = GCACHE_DEPTH - 1; i >= 0; i--)
        if (key[i] >= 0) HEARTH_TRY(garena_node(a, key[i], cur, &cur));
    struct gset *sets = w->sets;
    sets[0].n = 0;
    sets[0].s = sets[0].s ? sets[0].s : NULL;
    if (sets[0].cap == 0) {
        sets[0].s = hearth_malloc(8 * sizeof *sets[0].s, "a grammar state");
        if (!sets[0].s) return HEARTH_E_NOMEM;
        sets[0].cap = 8;
    }
    sets[0].s[0] = cur;
    sets[0].n = 1;
    const int32_t mark = a->n;
    memset(w->cls, CLS_REJECT, (size_t)v->n_sorted);
    /* ctx[d]: a path reached below the key within the first d bytes */
    bool ctx_stack[GVOCAB_MAX_TOKEN + 2];
    ctx_stack[0] = false;
    int32_t i = 0;
    while (i < v->n_trie) {
        const int32_t d = v->trie_depth[i];
        if (d == 1) garena_truncate(a, mark);
        HEARTH_TRY(gset_step(g, a, &sets[d - 1], v->trie_byte[i], &sets[d]));
        const struct gset *s = &sets[d];
        ctx_stack[d] = ctx_stack[d - 1] || gset_has(s, GSTACK_CONTEXT);
        if (s->n == 0) {
            if (ctx_stack[d - 1])
                memset(w->cls + v->trie_tok_lo[i], CLS_UNCERTAIN,
                       (size_t)(v->trie_sub_hi[i] - v->trie_tok_lo[i]));
            i = v->trie_end[i];
            continue;
        }
        if (v->trie_tok_hi[i] > v->trie_tok_lo[i])
            memset(w->cls + v->trie_tok_lo[i], CLS_ACCEPT,
                   (size_t)(v->trie_tok_hi[i] - v->trie_tok_lo[i]));
        if (!set_has_stack(s)) {
            if (ctx_stack[d] && v->trie_sub_hi[i] > v->trie_tok_hi[i])
                memset(w->cls + v->trie_tok_hi[i], CLS_UNCERTAIN,
                       (size_t)(v->trie_sub_hi[i] - v->trie_tok_hi[i]));
            i = v->trie_end[i];
            continue;
        }
        i++;
    }
    garena_truncate(a, 0);
    return HEARTH_OK;
}

static uint16_t common_prefix(const struct gvocab *v, int32_t a, int32_t b)
{
    const unsigned char *p = v->bytes + v->off[a], *q = v->bytes + v->off[b];
    uint32_t n = HEARTH_MIN(v->len[a], v->len[b]), l = 0;
    while (l < n && p[l] == q[l]) l++;
    return (uint16_t)l;
}

static hearth_status entry_build(const struct grammar_ir *g, const struct gvocab *v,
                                 const int32_t *key, struct gmask_work *w,
                                 struct gcache_entry **out)
{
    HEARTH_TRY(classify(g, v, key, w));
    int32_t n_acc = 0, n_unc = 0;
    for (int32_t i = 0; i < v->n_sorted; i++) {
        n_acc += w->cls[i] == CLS_ACCEPT;
        n_unc += w->cls[i] == CLS_UNCERTAIN;
    }
    struct gcache_entry *e = hearth_calloc(1, sizeof *e, "a grammar cache entry");
    if (!e) return HEARTH_E_NOMEM;
    memcpy(e->key, key, sizeof e->key);
    const size_t list_acc = (size_t)n_acc * 4, list_rej = (size_t)(v->n_sorted - n_acc) * 4;
    const size_t bits = bitset_words(v->n_tokens) * 8;
    hearth_status st = HEARTH_OK;
    if (list_acc <= list_rej && list_acc <= bits) {
        e->kind = GCACHE_ACCEPT_LIST;
        e->n_ids = n_acc;
    } else if (list_rej <= bits) {
        e->kind = GCACHE_REJECT_LIST;
        e->n_ids = v->n_sorted - n_acc;
    } else {
        e->kind = GCACHE_BITSET;
    }
    if (e->kind == GCACHE_BITSET) {
        e->bits = hearth_calloc(bitset_words(v->n_tokens), sizeof *e->bits, "a grammar cache entry");
        if (!e->bits) st = HEARTH_E_NOMEM;
    } else if (e->n_ids) {
        e->ids = hearth_malloc((size_t)e->n_ids * sizeof *e->ids, "a grammar cache entry");
        if (!e->ids) st = HEARTH_E_NOMEM;
    }
    if (!st && n_unc) {
        e->uncertain = hearth_malloc((size_t)n_unc * sizeof *e->uncertain, "a grammar cache entry");
        e->uncertain_lcp = hearth_malloc((size_t)n_unc * sizeof *e->uncertain_lcp,
                                         "a grammar cache entry");
        if (!e->uncertain || !e->uncertain_lcp) st = HEARTH_E_NOMEM;
    }
    if (st) {
        entry_free(e);
        return st;
    }
    int32_t k = 0;
    for (int32_t i = 0; i < v->n_sorted; i++) {
        const int32_t t = v->sorted[i];
        const bool acc = w->cls[i] == CLS_ACCEPT;
        if (e->kind == GCACHE_BITSET) {
            if (acc) e->bits[t >> 6] |= (uint64_t)1 << (t & 63);
        } else if ((e->kind == GCACHE_ACCEPT_LIST) == acc) {
            e->ids[k++] = t;
        }
        if (w->cls[i] == CLS_UNCERTAIN) {
            int32_t u = e->n_uncertain;
            e->uncertain[u] = i;
            e->uncertain_lcp[u] = u ? common_prefix(v, v->sorted[e->uncertain[u - 1]], t) : 0;
            e->n_uncertain++;
        }
    }
    *out = e;
    return HEARTH_OK;
}

/* ---- masks ------------------------------------------------------------- */

/* The key of stack n: its top GCACHE_DEPTH positions, then whether it
 * ends below them. */
static void stack_key(const struct garena *a, int32_t n, int32_t *key)
{
    for (int i = 0; i < GCACHE_DEPTH; i++) {
        if (n >= 0) {
            key[i] = a->nodes[n].pos;
            n = a->nodes[n].parent;
        } else {
            key[i] = -1;
        }
    }
    key[GCACHE_DEPTH] = n >= 0 ? GSTACK_CONTEXT : GSTACK_EMPTY;
}

static hearth_status cache_get(const struct grammar_ir *g, const struct gvocab *v, struct gcache *c,
                               const int32_t *key, struct gmask_work *w,
                               const struct gcache_entry **out)
{
    pthread_mutex_lock(&c->lock);
    struct gcache_entry *e = cache_find_locked(c, key);
    pthread_mutex_unlock(&c->lock);
    if (e) {
        *out = e;
        return HEARTH_OK;
    }
    HEARTH_TRY(entry_build(g, v, key, w, &e));
    pthread_mutex_lock(&c->lock);
    struct gcache_entry *other = cache_find_locked(c, key);
    hearth_status st = HEARTH_OK;
    if (other) {
        entry_free(e);
        e = other;
    } else {
        st = cache_insert_locked(c, e);
        if (st) {
            entry_free(e);
            e = NULL;
        } else {
            c->bytes += sizeof *e + (size_t)e->n_ids * 4 + (size_t)e->n_uncertain * 6 +
                        (e->bits ? bitset_words(v->n_tokens) * 8 : 0);
        }
    }
    pthread_mutex_unlock(&c->lock);
    *out = e;
    return st;
}

/* Set in mask the uncertain tokens of e that the whole stack n accepts. */
static hearth_status check_uncertain(const struct grammar_ir *g, const struct gvocab *v,
                                     const struct gcache_entry *e, struct garena *a, int32_t n,
                                     struct gmask_work *w, uint64_t *mask)
{
    struct gset *sets = w->sets;
    if (sets[0].cap == 0) {
        sets[0].s = hearth_malloc(8 * sizeof *sets[0].s, "a grammar state");
        if (!sets[0].s) return HEARTH_E_NOMEM;
        sets[0].cap = 8;
    }
    sets[0].s[0] = n;
    sets[0].n = 1;
    const int32_t mark = a->n;
    int32_t valid = 0;
    hearth_status st = HEARTH_OK;
    for (int32_t j = 0; j < e->n_uncertain && !st; j++) {
        const int32_t t = v->sorted[e->uncertain[j]];
        const unsigned char *p = v->bytes + v->off[t];
        const int32_t len = (int32_t)v->len[t];
        int32_t d = HEARTH_MIN((int32_t)e->uncertain_lcp[j], valid);
        while (d < len && sets[d].n > 0 && !st) {
            st = gset_step(g, a, &sets[d], p[d], &sets[d + 1]);
            d++;
        }
        valid = d;
        if (!st && d == len && sets[len].n > 0) mask[t >> 6] |= (uint64_t)1 << (t & 63);
    }
    garena_truncate(a, mark);
    return st;
}

hearth_status gmask_compute(const struct grammar_ir *g, const struct gvocab *v, struct gcache *c,
                            struct garena *a, const struct gset *set, struct gmask_work *w,
                            uint64_t *mask)
{
    const size_t words = bitset_words(v->n_tokens);
    memset(mask, 0, words * sizeof *mask);
    bool can_end = false, complement_done = false;
    for (int32_t i = 0; i < set->n; i++) {
        const int32_t n = set->s[i];
        if (n < 0) {
            can_end |= n == GSTACK_EMPTY;
            continue;
        }
        int32_t key[GCACHE_DEPTH + 1];
        stack_key(a, n, key);
        const struct gcache_entry *e;
        HEARTH_TRY(cache_get(g, v, c, key, w, &e));
        switch (e->kind) {
        case GCACHE_ACCEPT_LIST:
            for (int32_t k = 0; k < e->n_ids; k++)
                mask[e->ids[k] >> 6] |= (uint64_t)1 << (e->ids[k] & 63);
            break;
        case GCACHE_REJECT_LIST:
            memcpy(w->tmp, v->universe, words * sizeof *mask);
            for (int32_t k = 0; k < e->n_ids; k++)
                w->tmp[e->ids[k] >> 6] &= ~((uint64_t)1 << (e->ids[k] & 63));
            for (size_t k = 0; k < words; k++) mask[k] |= w->tmp[k];
            complement_done = true;
            break;
        default:
            for (size_t k = 0; k < words; k++) mask[k] |= e->bits[k];
            break;
        }
        if (e->n_uncertain) HEARTH_TRY(check_uncertain(g, v, e, a, n, w, mask));
    }
    (void)complement_done;
    if (can_end)
        for (int32_t k = 0; k < v->n_eog; k++) mask[v->eog[k] >> 6] |= (uint64_t)1 << (v->eog[k] & 63);
    return HEARTH_OK;
}

hearth_status gmask_brute(const struct grammar_ir *g, const struct gvocab *v, struct garena *a,
                          const struct gset *set, uint64_t *mask)
{
    memset(mask, 0, bitset_words(v->n_tokens) * sizeof *mask);
    struct gset out = {0};
    hearth_status st = HEARTH_OK;
    const int32_t mark = a->n;
    for (int32_t t = 0; t < v->n_tokens && !st; t++) {
        if (v->kind[t] == GTOK_EOG) {
            if (gset_has(set, GSTACK_EMPTY)) mask[t >> 6] |= (uint64_t)1 << (t & 63);
            continue;
        }
        if (v->kind[t] != GTOK_TEXT) continue;
        st = gset_advance_bytes(g, a, set, v->bytes + v->off[t], v->len[t], &out);
        if (!st && out.n > 0) mask[t >> 6] |= (uint64_t)1 << (t & 63);
        garena_truncate(a, mark);
    }
    gset_free(&out);
    return st;
}

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
 *     depend on the stack below: for these the entry keeps their tails,
 *     the bytes left after each point where the key's positions are all
 *     complete (distinct tails in byte order, each with its tokens).
 *
 * A mask is then the union, over the stacks of the state, of the accepted
 * tokens (a list, the complement of a list, or a bitset, whichever is
 * smallest) and of the uncertain tokens with a tail that the stack below
 * the key accepts, checked by a walk over just the tails that shares
 * their common prefixes.  End-of-generation tokens are allowed exactly
 * when a stack is empty (the root rule may end there).
 *
 * An entry's walk steps sets of stacks through an automaton built as it
 * goes (see "the walk's automaton").  Entries are computed the first time
 * a key is met (outside the cache's lock; a second thread computing the
 * same key keeps the first one's) and never change afterwards; every
 * matcher of a grammar shares them.
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
    free(v->trie);
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
    v->trie = hearth_malloc((n_nodes + 1) * sizeof *v->trie, "grammar vocabulary");
    int32_t *open = hearth_malloc(((size_t)v->max_len + 2) * sizeof *open, "grammar vocabulary");
    if (!v->trie || !open) {
        free(open);
        gvocab_free(v);
        return HEARTH_E_NOMEM;
    }
    int32_t nn = 0, depth = 0; /* open[1..depth]: the nodes of the current path */
    for (int32_t i = 0; i < n; i++) {
        int32_t t = v->sorted[i];
        const unsigned char *p = v->bytes + v->off[t];
        int32_t len = (int32_t)v->len[t], l = v->lcp[i];
        while (depth > l) v->trie[open[depth--]].end = nn;
        for (int32_t d = depth + 1; d <= len; d++) {
            v->trie[nn] = (struct gtrie_node){.byte = p[d - 1], .depth = (uint16_t)d, .tok_lo = i};
            open[d] = nn++;
        }
        depth = len;
    }
    while (depth > 0) v->trie[open[depth--]].end = nn;
    v->trie[nn] = (struct gtrie_node){.depth = 0, .end = nn, .tok_lo = n};
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
    free(e->tail_tok);
    free(e->tail_at);
    free(e->tail_lcp);
    free(e->tail_first);
    free(e->tail_ids);
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

/* ---- the walk's automaton -------------------------------------------- */

/* An entry's walk over the prefix tree steps sets of stacks byte by byte,
 * and the same sets come back again and again (inside a string, every
 * ordinary character leads back to the set it started from).  So the
 * walk runs an automaton built as it goes: a state is a set of stacks of
 * the simulation arena (hash-consed nodes, so a set is its sorted node
 * ids), and a state met a second time gets a table of its transitions,
 * filled on demand.  Tables are dropped all at once when there are too
 * many; states and their sets stay, and carry over to the matcher's next
 * entry (the simulation arena is shared by all of them, so equal stacks
 * are equal nodes across keys), until there are too many of those. */

enum { DS_CONTEXT = 1, DS_STACK = 2 };

struct dstate {
    int32_t off, n;    /* its stacks: ids[off .. off + n), increasing */
    int32_t table;     /* its transitions at tables[table * 256], or -1 */
    uint8_t flags;     /* DS_*: holds the context marker, holds a stack */
    uint8_t uses;
};

/* Tokens sorted[lo .. hi) leave the key after each of the depths
 * splits[split .. split + n_split) and the walk cannot tell the rest. */
struct urange {
    int32_t lo, hi;
    uint32_t split;
    int32_t n_split;
};

struct gdfa {
    const struct grammar_ir *g;  /* the grammar its states are of */
    struct dstate *st;
    int32_t n_st, cap_st;
    int32_t *ids;
    size_t n_ids, cap_ids;
    int32_t *slots;          /* states by their sets, open addressing, -1 free */
    uint32_t slot_mask;
    int32_t *tables;
    int32_t n_tables, cap_tables;
    struct gset out;
    int32_t *path;           /* per depth: the state after that many bytes */
    int32_t *ctx_n;          /* per depth: split depths on the path so far */
    uint16_t *ctx_d;         /* the split depths of the path */
    struct urange *ranges;
    int32_t n_ranges, cap_ranges;
    int32_t (*acc)[2];       /* accepted tokens: sorted[lo .. hi), increasing */
    int32_t n_acc, cap_acc;
    uint16_t *splits;
    size_t n_splits, cap_splits;
};

/* Transition tables kept at once (1 KiB each), and the states (and nodes
 * of the simulation arena) past which the automaton starts afresh at the
 * next entry. */
#define DFA_DEFAULT_TABLES 1024
#define DFA_DEFAULT_STATES 4096
#define DFA_MAX_NODES (1 << 18)

static void dfa_free(struct gdfa *d)
{
    if (!d) return;
    free(d->st);
    free(d->ids);
    free(d->slots);
    free(d->tables);
    gset_free(&d->out);
    free(d->path);
    free(d->ctx_n);
    free(d->ctx_d);
    free(d->ranges);
    free(d->acc);
    free(d->splits);
    free(d);
}

static struct gdfa *dfa_new(int32_t max_len)
{
    struct gdfa *d = hearth_calloc(1, sizeof *d, "grammar mask buffers");
    if (!d) return NULL;
    const size_t n = (size_t)max_len + 2;
    d->slot_mask = 255;
    d->slots = hearth_malloc(256 * sizeof *d->slots, "grammar mask buffers");
    d->path = hearth_malloc(n * sizeof *d->path, "grammar mask buffers");
    d->ctx_n = hearth_malloc(n * sizeof *d->ctx_n, "grammar mask buffers");
    d->ctx_d = hearth_malloc(n * sizeof *d->ctx_d, "grammar mask buffers");
    if (!d->slots || !d->path || !d->ctx_n || !d->ctx_d) {
        dfa_free(d);
        return NULL;
    }
    memset(d->slots, 0xff, 256 * sizeof *d->slots);
    return d;
}

/* Forget every state (the simulation arena is emptied with them). */
static void dfa_reset(struct gdfa *d, struct garena *a)
{
    d->n_st = 0;
    d->n_ids = 0;
    d->n_tables = 0;
    memset(d->slots, 0xff, ((size_t)d->slot_mask + 1) * sizeof *d->slots);
    garena_truncate(a, 0);
}

static uint32_t ids_hash(const int32_t *ids, int32_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)(uint32_t)n;
    for (int32_t i = 0; i < n; i++) {
        h ^= (uint32_t)ids[i];
        h *= 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    return (uint32_t)h;
}

static int int32_cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

static hearth_status dfa_grow_slots(struct gdfa *d)
{
    const uint32_t size = (d->slot_mask + 1) * 2;
    int32_t *slots = hearth_malloc((size_t)size * sizeof *slots, "grammar mask buffers");
    if (!slots) return HEARTH_E_NOMEM;
    memset(slots, 0xff, (size_t)size * sizeof *slots);
    for (int32_t q = 0; q < d->n_st; q++) {
        uint32_t h = ids_hash(d->ids + d->st[q].off, d->st[q].n) & (size - 1);
        while (slots[h] >= 0) h = (h + 1) & (size - 1);
        slots[h] = q;
    }
    free(d->slots);
    d->slots = slots;
    d->slot_mask = size - 1;
    return HEARTH_OK;
}

/* The state of the stacks ids[0 .. n) (sorted here, in place). */
static hearth_status dfa_intern(struct gdfa *d, int32_t *ids, int32_t n, int32_t *out)
{
    if (n < 16) {
        for (int32_t i = 1; i < n; i++)
            for (int32_t j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
                int32_t t = ids[j];
                ids[j] = ids[j - 1];
                ids[j - 1] = t;
            }
    } else {
        qsort(ids, (size_t)n, sizeof *ids, int32_cmp);
    }
    uint32_t h = ids_hash(ids, n) & d->slot_mask;
    for (; d->slots[h] >= 0; h = (h + 1) & d->slot_mask) {
        const struct dstate *s = &d->st[d->slots[h]];
        if (s->n == n && (n == 0 || memcmp(d->ids + s->off, ids, (size_t)n * sizeof *ids) == 0)) {
            *out = d->slots[h];
            return HEARTH_OK;
        }
    }
    if (d->n_st == d->cap_st) {
        int32_t cap = d->cap_st ? 2 * d->cap_st : 256;
        struct dstate *st = hearth_realloc(d->st, (size_t)cap * sizeof *st, "grammar mask buffers");
        if (!st) return HEARTH_E_NOMEM;
        d->st = st;
        d->cap_st = cap;
    }
    if (d->n_ids + (size_t)n > d->cap_ids) {
        size_t cap = d->cap_ids ? 2 * d->cap_ids : 1024;
        while (cap < d->n_ids + (size_t)n) cap *= 2;
        int32_t *p = hearth_realloc(d->ids, cap * sizeof *p, "grammar mask buffers");
        if (!p) return HEARTH_E_NOMEM;
        d->ids = p;
        d->cap_ids = cap;
    }
    const int32_t q = d->n_st++;
    struct dstate *s = &d->st[q];
    s->off = (int32_t)d->n_ids;
    s->n = n;
    s->table = -1;
    s->uses = 0;
    s->flags = 0;
    for (int32_t i = 0; i < n; i++) {
        if (ids[i] == GSTACK_CONTEXT) s->flags |= DS_CONTEXT;
        if (ids[i] >= 0) s->flags |= DS_STACK;
    }
    if (n) memcpy(d->ids + d->n_ids, ids, (size_t)n * sizeof *ids);
    d->n_ids += (size_t)n;
    d->slots[h] = q;
    if ((uint32_t)d->n_st * 2 > d->slot_mask) HEARTH_TRY(dfa_grow_slots(d));
    *out = q;
    return HEARTH_OK;
}

/* The state after byte b from state q. */
static hearth_status dfa_step(const struct grammar_ir *g, struct garena *a, struct gdfa *d,
                              int32_t max_tables, int32_t q, unsigned b, int32_t *out)
{
    struct dstate *s = &d->st[q];
    if (s->table >= 0) {
        const int32_t r = d->tables[(size_t)s->table * 256 + b];
        if (r >= 0) {
            *out = r;
            return HEARTH_OK;
        }
    } else if (s->uses < 1) {
        s->uses++;
    } else {
        if (d->n_tables >= max_tables) {
            for (int32_t k = 0; k < d->n_st; k++) d->st[k].table = -1;
            d->n_tables = 0;
        }
        if (d->n_tables == d->cap_tables) {
            int32_t cap = d->cap_tables ? 2 * d->cap_tables : 16;
            if (cap > max_tables) cap = max_tables;
            int32_t *t = hearth_realloc(d->tables, (size_t)cap * 256 * sizeof *t, "grammar mask buffers");
            if (!t) return HEARTH_E_NOMEM;
            d->tables = t;
            d->cap_tables = cap;
        }
        s->table = d->n_tables++;
        memset(d->tables + (size_t)s->table * 256, 0xff, 256 * sizeof *d->tables);
    }
    const struct gset in = {.s = d->ids + s->off, .n = s->n, .cap = s->n};
    HEARTH_TRY(gset_step(g, a, &in, b, &d->out));
    int32_t r;
    HEARTH_TRY(dfa_intern(d, d->out.s, d->out.n, &r));
    const int32_t table = d->st[q].table;
    if (table >= 0) d->tables[(size_t)table * 256 + b] = r;
    *out = r;
    return HEARTH_OK;
}

/* ---- work buffers ------------------------------------------------------ */

hearth_status gmask_work_init(struct gmask_work *w, const struct gvocab *v)
{
    memset(w, 0, sizeof *w);
    w->n_sets = v->max_len + 2;
    w->sets = hearth_calloc((size_t)w->n_sets, sizeof *w->sets, "grammar mask buffers");
    w->tmp = hearth_malloc(bitset_words(v->n_tokens) * sizeof(uint64_t), "grammar mask buffers");
    w->dfa = dfa_new(v->max_len);
    hearth_status st = (w->sets && w->tmp && w->dfa) ? HEARTH_OK : HEARTH_E_NOMEM;
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
    dfa_free(w->dfa);
    garena_free(&w->sim);
    memset(w, 0, sizeof *w);
}

/* ---- computing an entry ------------------------------------------------ */

/* Tokens sorted[lo .. hi) are uncertain, leaving the key after the depths
 * ctx_d[0 .. n_split). */
static hearth_status mark_uncertain(struct gdfa *d, int32_t lo, int32_t hi, int32_t n_split)
{
    uint32_t split = (uint32_t)d->n_splits;
    const struct urange *prev = d->n_ranges ? &d->ranges[d->n_ranges - 1] : NULL;
    if (prev && prev->n_split == n_split &&
        (n_split == 0 || memcmp(d->splits + prev->split, d->ctx_d, (size_t)n_split * sizeof *d->ctx_d) == 0)) {
        split = prev->split;
    } else {
        if (d->n_splits + (size_t)n_split > d->cap_splits) {
            size_t cap = d->cap_splits ? 2 * d->cap_splits : 256;
            while (cap < d->n_splits + (size_t)n_split) cap *= 2;
            uint16_t *p = hearth_realloc(d->splits, cap * sizeof *p, "grammar mask buffers");
            if (!p) return HEARTH_E_NOMEM;
            d->splits = p;
            d->cap_splits = cap;
        }
        if (n_split) memcpy(d->splits + d->n_splits, d->ctx_d, (size_t)n_split * sizeof *d->ctx_d);
        d->n_splits += (size_t)n_split;
    }
    if (d->n_ranges == d->cap_ranges) {
        int32_t cap = d->cap_ranges ? 2 * d->cap_ranges : 64;
        struct urange *r = hearth_realloc(d->ranges, (size_t)cap * sizeof *r, "grammar mask buffers");
        if (!r) return HEARTH_E_NOMEM;
        d->ranges = r;
        d->cap_ranges = cap;
    }
    d->ranges[d->n_ranges++] = (struct urange){lo, hi, split, n_split};
    return HEARTH_OK;
}

/* Tokens sorted[lo .. hi) are accepted (after every range before). */
static hearth_status mark_accepted(struct gdfa *d, int32_t lo, int32_t hi)
{
    if (d->n_acc && d->acc[d->n_acc - 1][1] == lo) {
        d->acc[d->n_acc - 1][1] = hi;
        return HEARTH_OK;
    }
    if (d->n_acc == d->cap_acc) {
        int32_t cap = d->cap_acc ? 2 * d->cap_acc : 256;
        int32_t(*r)[2] = hearth_realloc(d->acc, (size_t)cap * sizeof *r, "grammar mask buffers");
        if (!r) return HEARTH_E_NOMEM;
        d->acc = r;
        d->cap_acc = cap;
    }
    d->acc[d->n_acc][0] = lo;
    d->acc[d->n_acc][1] = hi;
    d->n_acc++;
    return HEARTH_OK;
}

/* Walk the prefix tree from the stack the key describes, noting the
 * accepted tokens and the uncertain ones with where they leave the key
 * (in w->dfa); every other token is refused. */
static hearth_status classify(const struct grammar_ir *g, const struct gvocab *v, const int32_t *key,
                              struct gmask_work *w)
{
    struct garena *a = &w->sim;
    struct gdfa *d = w->dfa;
    const int32_t max_tables = w->dfa_max_tables > 0 ? w->dfa_max_tables : DFA_DEFAULT_TABLES;
    const int32_t max_states = w->dfa_max_states > 0 ? w->dfa_max_states : DFA_DEFAULT_STATES;
    /* the automaton carries over from the entries before: neighbouring
     * keys (the positions of a repetition, one after the other) reach the
     * same sets */
    if (d->n_st >= max_states || a->n >= DFA_MAX_NODES || d->g != g) {
        dfa_reset(d, a);
        d->g = g;
    }
    d->n_ranges = 0;
    d->n_acc = 0;
    d->n_splits = 0;
    int32_t cur = key[GCACHE_DEPTH] == GSTACK_CONTEXT ? GSTACK_CONTEXT : GSTACK_EMPTY;
    for (int i = GCACHE_DEPTH - 1; i >= 0; i--)
        if (key[i] >= 0) HEARTH_TRY(garena_node(a, key[i], cur, &cur));
    HEARTH_TRY(dfa_intern(d, &cur, 1, &d->path[0]));
    d->ctx_n[0] = 0;
    const struct gtrie_node *trie = v->trie;
    int32_t i = 0;
    while (i < v->n_trie) {
        const struct gtrie_node node = trie[i];
        const int32_t dep = node.depth, from = d->path[dep - 1];
        const int32_t table = d->st[from].table;
        int32_t q = table >= 0 ? d->tables[(size_t)table * 256 + node.byte] : -1;
        if (q < 0) HEARTH_TRY(dfa_step(g, a, d, max_tables, from, node.byte, &q));
        d->path[dep] = q;
        const int32_t n_stacks = d->st[q].n, flags = d->st[q].flags;
        int32_t nc = d->ctx_n[dep - 1];
        if (n_stacks == 0) {
            if (nc) HEARTH_TRY(mark_uncertain(d, node.tok_lo, trie[node.end].tok_lo, nc));
            i = node.end;
            continue;
        }
        if (flags & DS_CONTEXT) d->ctx_d[nc++] = (uint16_t)dep;
        d->ctx_n[dep] = nc;
        const int32_t tok_hi = trie[i + 1].tok_lo;
        if (tok_hi > node.tok_lo) HEARTH_TRY(mark_accepted(d, node.tok_lo, tok_hi));
        if (!(flags & DS_STACK)) {
            const int32_t sub_hi = trie[node.end].tok_lo;
            if (nc && sub_hi > tok_hi) HEARTH_TRY(mark_uncertain(d, tok_hi, sub_hi, nc));
            i = node.end;
            continue;
        }
        i++;
    }
    return HEARTH_OK;
}

/* A tail of an uncertain token: its bytes from `at` on. */
struct tail_item {
    const unsigned char *p;
    uint32_t len;
    int32_t tok;
    uint16_t at;
};

static int tail_cmp(const void *a, const void *b)
{
    const struct tail_item *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = n ? memcmp(x->p, y->p, n) : 0;
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->tok < y->tok ? -1 : x->tok > y->tok;
}

static bool tail_same(const struct tail_item *x, const struct tail_item *y)
{
    return x->len == y->len && (x->len == 0 || memcmp(x->p, y->p, x->len) == 0);
}

static uint16_t tail_lcp(const struct tail_item *x, const struct tail_item *y)
{
    uint32_t n = HEARTH_MIN(x->len, y->len), l = 0;
    while (l < n && x->p[l] == y->p[l]) l++;
    return (uint16_t)l;
}

/* The entry's tails from the walk's uncertain ranges. */
static hearth_status entry_tails(const struct gvocab *v, const struct gdfa *d, struct gcache_entry *e)
{
    size_t n = 0;
    for (int32_t r = 0; r < d->n_ranges; r++)
        n += (size_t)(d->ranges[r].hi - d->ranges[r].lo) * (size_t)d->ranges[r].n_split;
    if (n == 0) return HEARTH_OK;
    struct tail_item *items = hearth_malloc(n * sizeof *items, "a grammar cache entry");
    if (!items) return HEARTH_E_NOMEM;
    size_t k = 0;
    for (int32_t r = 0; r < d->n_ranges; r++) {
        const struct urange *u = &d->ranges[r];
        for (int32_t i = u->lo; i < u->hi; i++) {
            const int32_t t = v->sorted[i];
            for (int32_t j = 0; j < u->n_split; j++) {
                const uint16_t at = d->splits[u->split + (uint32_t)j];
                /* a split is always inside the token: the walk stopped below it */
                items[k++] = (struct tail_item){v->bytes + v->off[t] + at, v->len[t] - at, t, at};
            }
        }
    }
    qsort(items, n, sizeof *items, tail_cmp);
    int32_t n_tails = 0;
    for (size_t i = 0; i < n; i++) n_tails += i == 0 || !tail_same(&items[i - 1], &items[i]);
    e->tail_tok = hearth_malloc((size_t)n_tails * sizeof *e->tail_tok, "a grammar cache entry");
    e->tail_at = hearth_malloc((size_t)n_tails * sizeof *e->tail_at, "a grammar cache entry");
    e->tail_lcp = hearth_malloc((size_t)n_tails * sizeof *e->tail_lcp, "a grammar cache entry");
    e->tail_first = hearth_malloc(((size_t)n_tails + 1) * sizeof *e->tail_first, "a grammar cache entry");
    e->tail_ids = hearth_malloc(n * sizeof *e->tail_ids, "a grammar cache entry");
    if (!e->tail_tok || !e->tail_at || !e->tail_lcp || !e->tail_first || !e->tail_ids) {
        free(items);
        return HEARTH_E_NOMEM;
    }
    int32_t j = -1;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || !tail_same(&items[i - 1], &items[i])) {
            j++;
            e->tail_tok[j] = items[i].tok;
            e->tail_at[j] = items[i].at;
            e->tail_lcp[j] = j ? tail_lcp(&items[i - 1], &items[i]) : 0;
            e->tail_first[j] = (int32_t)i;
        }
        e->tail_ids[i] = items[i].tok;
    }
    e->tail_first[n_tails] = (int32_t)n;
    e->n_tails = n_tails;
    free(items);
    return HEARTH_OK;
}

static hearth_status entry_build(const struct grammar_ir *g, const struct gvocab *v,
                                 const int32_t *key, struct gmask_work *w,
                                 struct gcache_entry **out)
{
    HEARTH_TRY(classify(g, v, key, w));
    const struct gdfa *d = w->dfa;
    int32_t n_acc = 0, n_unc = 0;
    for (int32_t r = 0; r < d->n_acc; r++) n_acc += d->acc[r][1] - d->acc[r][0];
    for (int32_t r = 0; r < d->n_ranges; r++) n_unc += d->ranges[r].hi - d->ranges[r].lo;
    struct gcache_entry *e = hearth_calloc(1, sizeof *e, "a grammar cache entry");
    if (!e) return HEARTH_E_NOMEM;
    memcpy(e->key, key, sizeof e->key);
    e->n_uncertain = n_unc;
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
    if (!st) st = entry_tails(v, d, e);
    if (st) {
        entry_free(e);
        return st;
    }
    const int32_t *sorted = v->sorted;
    int32_t k = 0;
    if (e->kind == GCACHE_BITSET && n_acc > v->n_sorted / 2) {
        /* all maskable tokens but those between the accepted ranges */
        memcpy(e->bits, v->universe, bitset_words(v->n_tokens) * sizeof *e->bits);
        int32_t lo = 0;
        for (int32_t r = 0; r <= d->n_acc; r++) {
            const int32_t hi = r < d->n_acc ? d->acc[r][0] : v->n_sorted;
            for (int32_t i = lo; i < hi; i++) e->bits[sorted[i] >> 6] &= ~((uint64_t)1 << (sorted[i] & 63));
            if (r < d->n_acc) lo = d->acc[r][1];
        }
    } else if (e->kind == GCACHE_BITSET) {
        for (int32_t r = 0; r < d->n_acc; r++)
            for (int32_t i = d->acc[r][0]; i < d->acc[r][1]; i++)
                e->bits[sorted[i] >> 6] |= (uint64_t)1 << (sorted[i] & 63);
    } else if (e->kind == GCACHE_ACCEPT_LIST) {
        for (int32_t r = 0; r < d->n_acc; r++)
            for (int32_t i = d->acc[r][0]; i < d->acc[r][1]; i++) e->ids[k++] = sorted[i];
    } else {
        int32_t lo = 0;
        for (int32_t r = 0; r <= d->n_acc; r++) {
            const int32_t hi = r < d->n_acc ? d->acc[r][0] : v->n_sorted;
            for (int32_t i = lo; i < hi; i++) e->ids[k++] = sorted[i];
            if (r < d->n_acc) lo = d->acc[r][1];
        }
    }
    *out = e;
    return HEARTH_OK;
}

/* ---- masks ------------------------------------------------------------- */

/* The key of stack n: its top GCACHE_DEPTH positions, then whether it
 * ends below them; the node below them (or a marker) into *below. */
static void stack_key(const struct garena *a, int32_t n, int32_t *key, int32_t *below)
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
    *below = n;
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
            c->bytes += sizeof *e + (size_t)e->n_ids * 4 + (size_t)e->n_tails * 12 +
                        (e->n_tails ? (size_t)e->tail_first[e->n_tails] * 4 + 4 : 0) +
                        (e->bits ? bitset_words(v->n_tokens) * 8 : 0);
        }
    }
    pthread_mutex_unlock(&c->lock);
    *out = e;
    return st;
}

/* Set in mask the uncertain tokens of e that the stack continues: those
 * with a tail that the stack below the key (node `below`) accepts. */
static hearth_status check_tails(const struct grammar_ir *g, const struct gvocab *v,
                                 const struct gcache_entry *e, struct garena *a, int32_t below,
                                 struct gmask_work *w, uint64_t *mask)
{
    struct gset *sets = w->sets;
    const int32_t mark = a->n;
    hearth_status st = gset_closure(g, a, below, &sets[0]);
    int32_t valid = 0;
    for (int32_t j = 0; j < e->n_tails && !st; j++) {
        const int32_t t = e->tail_tok[j];
        const unsigned char *p = v->bytes + v->off[t] + e->tail_at[j];
        const int32_t len = (int32_t)v->len[t] - e->tail_at[j];
        int32_t d = HEARTH_MIN((int32_t)e->tail_lcp[j], valid);
        while (d < len && sets[d].n > 0 && !st) {
            st = gset_step(g, a, &sets[d], p[d], &sets[d + 1]);
            d++;
        }
        valid = d;
        if (!st && d == len && sets[len].n > 0)
            for (int32_t k = e->tail_first[j]; k < e->tail_first[j + 1]; k++)
                mask[e->tail_ids[k] >> 6] |= (uint64_t)1 << (e->tail_ids[k] & 63);
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
        int32_t key[GCACHE_DEPTH + 1], below;
        stack_key(a, n, key, &below);
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
        if (e->n_tails) HEARTH_TRY(check_tails(g, v, e, a, below, w, mask));
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

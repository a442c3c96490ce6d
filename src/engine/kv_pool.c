/*
 * kv_pool.c -- block states, reference counts, the LRU of cached blocks
 * and the prefix cache's hash index (kv_pool.h).
 */
#include "kv_pool.h"

#include <stdlib.h>
#include <string.h>

enum block_state { BLOCK_FREE, BLOCK_HELD, BLOCK_CACHED };

struct kv_pool {
    int32_t n_blocks;
    int32_t block_tokens;
    int32_t *ref;
    uint8_t *state;
    /* free blocks: a stack */
    int32_t *free_stack;
    int32_t n_free;
    /* cached blocks: a doubly linked list, oldest release at the head */
    int32_t *lru_prev, *lru_next;
    int32_t lru_head, lru_tail;
    int32_t n_cached;
    /* registered blocks: hash buckets chained through bucket_next */
    bool *registered;
    uint64_t *hash, *parent;
    int32_t *tokens;          /* block_tokens per block, for registered ones */
    int32_t *buckets;         /* n_buckets heads, -1: empty */
    int32_t *bucket_next;
    uint32_t bucket_mask;
    uint64_t hits, misses, evictions;
};

hearth_status kv_pool_new(int32_t n_blocks, int32_t block_tokens, struct kv_pool **out)
{
    if (n_blocks <= 0 || block_tokens <= 0)
        return hearth_error(HEARTH_E_INVALID, "KV pool of %d blocks of %d positions", n_blocks, block_tokens);
    struct kv_pool *p = hearth_calloc(1, sizeof *p, "the KV pool");
    if (!p) return HEARTH_E_NOMEM;
    p->n_blocks = n_blocks;
    p->block_tokens = block_tokens;
    uint32_t n_buckets = 1;
    while (n_buckets < (uint32_t)n_blocks * 2u && n_buckets < (1u << 30)) n_buckets *= 2;
    p->bucket_mask = n_buckets - 1;
    const size_t n = (size_t)n_blocks;
    p->ref = hearth_calloc(n, sizeof *p->ref, "the KV pool");
    p->state = hearth_calloc(n, sizeof *p->state, "the KV pool");
    p->free_stack = hearth_calloc(n, sizeof *p->free_stack, "the KV pool");
    p->lru_prev = hearth_calloc(n, sizeof *p->lru_prev, "the KV pool");
    p->lru_next = hearth_calloc(n, sizeof *p->lru_next, "the KV pool");
    p->registered = hearth_calloc(n, sizeof *p->registered, "the KV pool");
    p->hash = hearth_calloc(n, sizeof *p->hash, "the KV pool");
    p->parent = hearth_calloc(n, sizeof *p->parent, "the KV pool");
    p->tokens = hearth_calloc(n * (size_t)block_tokens, sizeof *p->tokens, "the prefix cache");
    p->buckets = hearth_calloc(n_buckets, sizeof *p->buckets, "the prefix cache");
    p->bucket_next = hearth_calloc(n, sizeof *p->bucket_next, "the prefix cache");
    if (!p->ref || !p->state || !p->free_stack || !p->lru_prev || !p->lru_next || !p->registered ||
        !p->hash || !p->parent || !p->tokens || !p->buckets || !p->bucket_next) {
        kv_pool_free(p);
        return HEARTH_E_NOMEM;
    }
    for (uint32_t i = 0; i < n_buckets; i++) p->buckets[i] = -1;
    /* the stack hands out low block numbers first */
    for (int32_t b = 0; b < n_blocks; b++) p->free_stack[b] = n_blocks - 1 - b;
    p->n_free = n_blocks;
    p->lru_head = p->lru_tail = -1;
    *out = p;
    return HEARTH_OK;
}

void kv_pool_free(struct kv_pool *p)
{
    if (!p) return;
    free(p->ref);
    free(p->state);
    free(p->free_stack);
    free(p->lru_prev);
    free(p->lru_next);
    free(p->registered);
    free(p->hash);
    free(p->parent);
    free(p->tokens);
    free(p->buckets);
    free(p->bucket_next);
    free(p);
}

static void lru_remove(struct kv_pool *p, int32_t b)
{
    const int32_t prev = p->lru_prev[b], next = p->lru_next[b];
    if (prev >= 0) p->lru_next[prev] = next;
    else p->lru_head = next;
    if (next >= 0) p->lru_prev[next] = prev;
    else p->lru_tail = prev;
    p->n_cached--;
}

static void lru_append(struct kv_pool *p, int32_t b)
{
    p->lru_prev[b] = p->lru_tail;
    p->lru_next[b] = -1;
    if (p->lru_tail >= 0) p->lru_next[p->lru_tail] = b;
    else p->lru_head = b;
    p->lru_tail = b;
    p->n_cached++;
}

static void unregister(struct kv_pool *p, int32_t b)
{
    int32_t *link = &p->buckets[p->hash[b] & p->bucket_mask];
    while (*link != b) link = &p->bucket_next[*link];
    *link = p->bucket_next[b];
    p->registered[b] = false;
}

int32_t kv_pool_alloc(struct kv_pool *p)
{
    int32_t b;
    if (p->n_free > 0) {
        b = p->free_stack[--p->n_free];
    } else if (p->lru_head >= 0) {
        b = p->lru_head;
        lru_remove(p, b);
        unregister(p, b);
        p->evictions++;
    } else {
        return -1;
    }
    p->state[b] = BLOCK_HELD;
    p->ref[b] = 1;
    return b;
}

void kv_pool_ref(struct kv_pool *p, int32_t b)
{
    if (p->state[b] == BLOCK_CACHED) {
        lru_remove(p, b);
        p->state[b] = BLOCK_HELD;
    }
    p->ref[b]++;
}

void kv_pool_release(struct kv_pool *p, int32_t b)
{
    if (--p->ref[b] > 0) return;
    if (p->registered[b]) {
        p->state[b] = BLOCK_CACHED;
        lru_append(p, b);
    } else {
        p->state[b] = BLOCK_FREE;
        p->free_stack[p->n_free++] = b;
    }
}

int32_t kv_pool_refs(const struct kv_pool *p, int32_t b) { return p->ref[b]; }
int32_t kv_pool_available(const struct kv_pool *p) { return p->n_free + p->n_cached; }
bool kv_pool_registered(const struct kv_pool *p, int32_t b) { return p->registered[b]; }

/* 64-bit mixing (the finaliser of SplitMix64), applied per token so that
 * every token moves every bit of the hash. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

uint64_t kv_pool_hash(uint64_t parent, const int32_t *tokens, int32_t block_tokens)
{
    uint64_t h = mix64(parent ^ UINT64_C(0x9e3779b97f4a7c15));
    for (int32_t i = 0; i < block_tokens; i++) h = mix64(h + (uint64_t)(uint32_t)tokens[i] + UINT64_C(0x632be59bd9b4e019));
    return h;
}

int32_t kv_pool_lookup(struct kv_pool *p, uint64_t parent, uint64_t hash, const int32_t *tokens)
{
    for (int32_t b = p->buckets[hash & p->bucket_mask]; b >= 0; b = p->bucket_next[b])
        if (p->hash[b] == hash && p->parent[b] == parent &&
            memcmp(p->tokens + (size_t)b * (size_t)p->block_tokens, tokens,
                   (size_t)p->block_tokens * sizeof *tokens) == 0) {
            p->hits++;
            return b;
        }
    p->misses++;
    return -1;
}

bool kv_pool_register(struct kv_pool *p, int32_t b, uint64_t parent, uint64_t hash, const int32_t *tokens)
{
    if (p->registered[b] || p->state[b] != BLOCK_HELD) return false;
    for (int32_t o = p->buckets[hash & p->bucket_mask]; o >= 0; o = p->bucket_next[o])
        if (p->hash[o] == hash) return false;
    p->registered[b] = true;
    p->hash[b] = hash;
    p->parent[b] = parent;
    memcpy(p->tokens + (size_t)b * (size_t)p->block_tokens, tokens, (size_t)p->block_tokens * sizeof *tokens);
    int32_t *head = &p->buckets[hash & p->bucket_mask];
    p->bucket_next[b] = *head;
    *head = b;
    return true;
}

void kv_pool_counts(const struct kv_pool *p, struct kv_pool_counts *out)
{
    out->n_blocks = p->n_blocks;
    out->n_free = p->n_free;
    out->n_cached = p->n_cached;
    out->n_held = p->n_blocks - p->n_free - p->n_cached;
    out->hits = p->hits;
    out->misses = p->misses;
    out->evictions = p->evictions;
}

hearth_status kv_pool_check(const struct kv_pool *p, const int32_t *refs)
{
    int32_t n_free = 0, n_cached = 0;
    for (int32_t b = 0; b < p->n_blocks; b++) {
        if (p->ref[b] != refs[b])
            return hearth_error(HEARTH_E_INTERNAL, "KV block %d: %d references counted, %d holders",
                                b, p->ref[b], refs[b]);
        const uint8_t want = refs[b] > 0 ? BLOCK_HELD : p->registered[b] ? BLOCK_CACHED : BLOCK_FREE;
        if (p->state[b] != want)
            return hearth_error(HEARTH_E_INTERNAL, "KV block %d is in state %d, not %d", b, p->state[b], want);
        n_free += p->state[b] == BLOCK_FREE;
        n_cached += p->state[b] == BLOCK_CACHED;
        if (p->registered[b]) {
            int32_t o = p->buckets[p->hash[b] & p->bucket_mask];
            while (o >= 0 && o != b) o = p->bucket_next[o];
            if (o != b) return hearth_error(HEARTH_E_INTERNAL, "KV block %d is registered but not indexed", b);
        }
    }
    if (n_free != p->n_free || n_cached != p->n_cached)
        return hearth_error(HEARTH_E_INTERNAL, "KV pool: %d free and %d cached blocks, lists of %d and %d",
                            n_free, n_cached, p->n_free, p->n_cached);
    for (int32_t i = 0; i < p->n_free; i++)
        if (p->state[p->free_stack[i]] != BLOCK_FREE)
            return hearth_error(HEARTH_E_INTERNAL, "KV pool: block %d on the free list is not free",
                                p->free_stack[i]);
    int32_t walked = 0;
    for (int32_t b = p->lru_head, prev = -1; b >= 0; prev = b, b = p->lru_next[b]) {
        if (p->state[b] != BLOCK_CACHED || p->lru_prev[b] != prev || ++walked > p->n_cached)
            return hearth_error(HEARTH_E_INTERNAL, "KV pool: the LRU list is broken at block %d", b);
    }
    if (walked != p->n_cached)
        return hearth_error(HEARTH_E_INTERNAL, "KV pool: the LRU list holds %d of %d cached blocks", walked,
                            p->n_cached);
    return HEARTH_OK;
}

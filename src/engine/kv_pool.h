/*
 * kv_pool.h -- the bookkeeping of a paged KV pool: which blocks are free,
 * how many sequences hold each one, and the prefix cache that lets new
 * sequences reuse the full blocks of earlier ones.
 *
 * A block is in exactly one of three states:
 *   free    -- no sequence holds it and it caches nothing;
 *   held    -- ref > 0 sequences have it in their block tables;
 *   cached  -- no sequence holds it, but it is a full block registered in
 *              the prefix cache, kept until the pool needs room, oldest
 *              release first (LRU).
 * A held block may also be registered (a full block a running sequence
 * still reads); it becomes cached when its last holder lets go.
 *
 * The prefix cache maps a chain hash to a block: the hash of a block is
 * H(hash of the block before it, its tokens), and the chain starts from
 * an identity key that covers everything that changes keys and values
 * (prefix.c: the model's weights, the cache type, RoPE).  A lookup
 * compares the parent hash and every token as well, so that a hash
 * collision can never hand a sequence the wrong block.
 *
 * The storage itself is kv_cache.h; this file never touches it.
 */
#ifndef HEARTH_KV_POOL_H
#define HEARTH_KV_POOL_H

#include "internal.h"

struct kv_pool;

struct kv_pool_counts {
    int32_t n_blocks;
    int32_t n_free;
    int32_t n_cached;
    int32_t n_held;
    uint64_t hits;       /* blocks found by lookups */
    uint64_t misses;     /* lookups that found nothing */
    uint64_t evictions;  /* cached blocks taken for new contents */
};

hearth_status kv_pool_new(int32_t n_blocks, int32_t block_tokens, struct kv_pool **out);
void kv_pool_free(struct kv_pool *p);

/* A block with ref 1 (a free one, else the least recently cached one,
 * which leaves the prefix cache), or -1 when every block is held. */
int32_t kv_pool_alloc(struct kv_pool *p);
/* One more holder of block b (taking it out of the LRU when cached). */
void kv_pool_ref(struct kv_pool *p, int32_t b);
/* One holder fewer; at 0 the block becomes cached (registered) or free. */
void kv_pool_release(struct kv_pool *p, int32_t b);
int32_t kv_pool_refs(const struct kv_pool *p, int32_t b);
/* Blocks an allocation can get: free ones and cached ones. */
int32_t kv_pool_available(const struct kv_pool *p);

/* The chain hash of a block of block_tokens tokens after parent. */
uint64_t kv_pool_hash(uint64_t parent, const int32_t *tokens, int32_t block_tokens);
/* The registered block with this hash, parent and tokens, or -1; counts a
 * hit or a miss.  The caller takes a reference with kv_pool_ref(). */
int32_t kv_pool_lookup(struct kv_pool *p, uint64_t parent, uint64_t hash, const int32_t *tokens);
/* Register held, full block b under hash (its tokens copied).  false, and
 * nothing changes, when a block with that hash is registered already or b
 * is. */
bool kv_pool_register(struct kv_pool *p, int32_t b, uint64_t parent, uint64_t hash, const int32_t *tokens);
bool kv_pool_registered(const struct kv_pool *p, int32_t b);

void kv_pool_counts(const struct kv_pool *p, struct kv_pool_counts *out);

/* Check the pool's invariants against the holders' count of each block
 * (refs[b], n_blocks entries): every state consistent, the LRU and the
 * free list complete, the hash index finding every registered block.
 * HEARTH_E_INTERNAL naming the first fault. */
hearth_status kv_pool_check(const struct kv_pool *p, const int32_t *refs);

#endif /* HEARTH_KV_POOL_H */

/*
 * test-kv-pool.c -- the paged KV pool on its own (engine/kv_pool.h) and
 * the copy-on-write of its storage (backend/kv_cache.h).
 *
 * - Allocation hands out every block once, then -1; references count
 *   holders; a block nobody holds is free again.
 * - A registered block becomes cached when its last holder lets go and is
 *   found by a lookup of its hash, parent and tokens (a hit); the same
 *   hash with other tokens or another parent misses.
 * - Cached blocks are evicted oldest release first, free blocks before
 *   any cached one; an evicted block is found no more.
 * - Registration refuses a hash that is registered already, a block that
 *   is registered already and a block nobody holds.
 * - A seeded random sequence of allocations, references, releases,
 *   registrations and lookups against a shadow model of every block's
 *   holders, registration and place in the LRU, with kv_pool_check after
 *   every operation; releasing everything at the end leaves every block
 *   free or cached.
 * - kv_cache_copy_block copies the first n_rows rows of a block, in every
 *   host layer of one space (a window space's or the others'), keys and
 *   values, and nothing else; a window space is never larger than the
 *   pool.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_cache.h"
#include "kv_pool.h"
#include "testutil.h"

static struct kv_pool *new_pool(int32_t n_blocks, int32_t block_tokens)
{
    struct kv_pool *p;
    ck_assert_int_eq(kv_pool_new(n_blocks, block_tokens, &p), HEARTH_OK);
    return p;
}

static void check_pool(const struct kv_pool *p, const int32_t *refs)
{
    hearth_status st = kv_pool_check(p, refs);
    ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
}

static void tokens_of(int32_t *tokens, int32_t n, int32_t seed)
{
    for (int32_t i = 0; i < n; i++) tokens[i] = seed * 1000 + i;
}

START_TEST(test_invalid_sizes)
{
    struct kv_pool *p = NULL;
    ck_assert_int_eq(kv_pool_new(0, 16, &p), HEARTH_E_INVALID);
    ck_assert_int_eq(kv_pool_new(4, 0, &p), HEARTH_E_INVALID);
    ck_assert_ptr_null(p);
}
END_TEST

START_TEST(test_alloc_until_exhausted)
{
    enum { N = 9 };
    struct kv_pool *p = new_pool(N, 4);
    int32_t refs[N] = {0};
    bool seen[N] = {false};
    check_pool(p, refs);
    ck_assert_int_eq(kv_pool_available(p), N);
    for (int i = 0; i < N; i++) {
        const int32_t b = kv_pool_alloc(p);
        ck_assert_int_ge(b, 0);
        ck_assert_int_lt(b, N);
        ck_assert_msg(!seen[b], "block %d handed out twice", b);
        seen[b] = true;
        refs[b] = 1;
        ck_assert_int_eq(kv_pool_refs(p, b), 1);
        ck_assert_int_eq(kv_pool_available(p), N - 1 - i);
        check_pool(p, refs);
    }
    ck_assert_int_eq(kv_pool_alloc(p), -1);
    ck_assert_int_eq(kv_pool_alloc(p), -1);
    check_pool(p, refs);
    struct kv_pool_counts c;
    kv_pool_counts(p, &c);
    ck_assert_int_eq(c.n_blocks, N);
    ck_assert_int_eq(c.n_held, N);
    ck_assert_int_eq(c.n_free, 0);
    ck_assert_int_eq(c.n_cached, 0);
    ck_assert_uint_eq(c.evictions, 0);

    /* one block back: it is the one handed out next */
    kv_pool_release(p, 5);
    refs[5] = 0;
    check_pool(p, refs);
    ck_assert_int_eq(kv_pool_available(p), 1);
    ck_assert_int_eq(kv_pool_alloc(p), 5);
    refs[5] = 1;
    ck_assert_int_eq(kv_pool_alloc(p), -1);
    check_pool(p, refs);
    kv_pool_free(p);
}
END_TEST

START_TEST(test_refcounts)
{
    enum { N = 3 };
    struct kv_pool *p = new_pool(N, 8);
    int32_t refs[N] = {0};
    const int32_t b = kv_pool_alloc(p);
    refs[b] = 1;
    kv_pool_ref(p, b);
    kv_pool_ref(p, b);
    refs[b] = 3;
    ck_assert_int_eq(kv_pool_refs(p, b), 3);
    check_pool(p, refs);
    ck_assert_int_eq(kv_pool_available(p), N - 1);
    kv_pool_release(p, b);
    kv_pool_release(p, b);
    refs[b] = 1;
    ck_assert_int_eq(kv_pool_refs(p, b), 1);
    /* still held: not available */
    ck_assert_int_eq(kv_pool_available(p), N - 1);
    check_pool(p, refs);
    kv_pool_release(p, b);
    refs[b] = 0;
    ck_assert_int_eq(kv_pool_refs(p, b), 0);
    ck_assert_int_eq(kv_pool_available(p), N);
    check_pool(p, refs);
    struct kv_pool_counts c;
    kv_pool_counts(p, &c);
    ck_assert_int_eq(c.n_free, N);
    ck_assert_int_eq(c.n_cached, 0); /* never registered: free, not cached */
    ck_assert_int_eq(c.n_held, 0);
    kv_pool_free(p);
}
END_TEST

START_TEST(test_register_lookup)
{
    enum { N = 4, BT = 16 };
    struct kv_pool *p = new_pool(N, BT);
    int32_t refs[N] = {0};
    int32_t tok[BT], other[BT];
    tokens_of(tok, BT, 7);
    const uint64_t parent = UINT64_C(0x1234567890abcdef);
    const uint64_t h = kv_pool_hash(parent, tok, BT);
    /* the hash covers the parent and every token */
    ck_assert_uint_ne(h, kv_pool_hash(parent + 1, tok, BT));
    memcpy(other, tok, sizeof tok);
    other[BT - 1]++;
    ck_assert_uint_ne(h, kv_pool_hash(parent, other, BT));
    ck_assert_uint_eq(h, kv_pool_hash(parent, tok, BT));

    const int32_t b = kv_pool_alloc(p);
    refs[b] = 1;
    ck_assert(!kv_pool_registered(p, b));
    ck_assert(kv_pool_register(p, b, parent, h, tok));
    ck_assert(kv_pool_registered(p, b));
    check_pool(p, refs);
    /* held and registered: found, but not cached */
    ck_assert_int_eq(kv_pool_lookup(p, parent, h, tok), b);
    struct kv_pool_counts c;
    kv_pool_counts(p, &c);
    ck_assert_uint_eq(c.hits, 1);
    ck_assert_uint_eq(c.misses, 0);
    ck_assert_int_eq(c.n_cached, 0);
    ck_assert_int_eq(c.n_held, 1);

    kv_pool_release(p, b);
    refs[b] = 0;
    check_pool(p, refs);
    kv_pool_counts(p, &c);
    ck_assert_int_eq(c.n_cached, 1);
    ck_assert_int_eq(c.n_free, N - 1);
    ck_assert_int_eq(c.n_held, 0);
    ck_assert_int_eq(kv_pool_available(p), N);
    ck_assert(kv_pool_registered(p, b));

    /* the same hash with other tokens, another parent: misses */
    ck_assert_int_eq(kv_pool_lookup(p, parent, h, other), -1);
    ck_assert_int_eq(kv_pool_lookup(p, parent ^ 1, h, tok), -1);
    ck_assert_int_eq(kv_pool_lookup(p, parent, h ^ 1, tok), -1);
    kv_pool_counts(p, &c);
    ck_assert_uint_eq(c.hits, 1);
    ck_assert_uint_eq(c.misses, 3);

    /* a hit, taken: held again, out of the LRU */
    ck_assert_int_eq(kv_pool_lookup(p, parent, h, tok), b);
    kv_pool_ref(p, b);
    refs[b] = 1;
    check_pool(p, refs);
    kv_pool_counts(p, &c);
    ck_assert_uint_eq(c.hits, 2);
    ck_assert_int_eq(c.n_cached, 0);
    ck_assert_int_eq(c.n_held, 1);
    ck_assert_int_eq(kv_pool_refs(p, b), 1);
    /* a second holder, then both let go: cached once */
    ck_assert_int_eq(kv_pool_lookup(p, parent, h, tok), b);
    kv_pool_ref(p, b);
    refs[b] = 2;
    check_pool(p, refs);
    kv_pool_release(p, b);
    kv_pool_release(p, b);
    refs[b] = 0;
    check_pool(p, refs);
    kv_pool_counts(p, &c);
    ck_assert_int_eq(c.n_cached, 1);
    ck_assert_uint_eq(c.evictions, 0);
    kv_pool_free(p);
}
END_TEST

START_TEST(test_register_refusals)
{
    enum { N = 4, BT = 4 };
    struct kv_pool *p = new_pool(N, BT);
    int32_t refs[N] = {0};
    int32_t t1[BT], t2[BT];
    tokens_of(t1, BT, 1);
    tokens_of(t2, BT, 2);
    const int32_t a = kv_pool_alloc(p), b = kv_pool_alloc(p);
    refs[a] = refs[b] = 1;
    ck_assert(kv_pool_register(p, a, 0, 42, t1));
    /* the same hash again, even for other contents: refused, b unchanged */
    ck_assert(!kv_pool_register(p, b, 0, 42, t2));
    ck_assert(!kv_pool_registered(p, b));
    ck_assert(!kv_pool_register(p, b, 9, 42, t1));
    ck_assert(!kv_pool_registered(p, b));
    /* a registered block again under another hash: refused */
    ck_assert(!kv_pool_register(p, a, 0, 43, t1));
    ck_assert_int_eq(kv_pool_lookup(p, 0, 43, t1), -1);
    ck_assert_int_eq(kv_pool_lookup(p, 0, 42, t1), a);
    check_pool(p, refs);
    /* a block nobody holds: refused */
    int32_t free_block = -1;
    for (int32_t i = 0; i < N; i++)
        if (i != a && i != b) free_block = i;
    ck_assert(!kv_pool_register(p, free_block, 0, 44, t2));
    ck_assert(!kv_pool_registered(p, free_block));
    check_pool(p, refs);
    /* a hash sharing a bucket but distinct is taken */
    ck_assert(kv_pool_register(p, b, 0, 42 + ((uint64_t)1 << 40), t2));
    ck_assert_int_eq(kv_pool_lookup(p, 0, 42 + ((uint64_t)1 << 40), t2), b);
    ck_assert_int_eq(kv_pool_lookup(p, 0, 42, t1), a);
    check_pool(p, refs);
    /* a cached block keeps its hash registered */
    kv_pool_release(p, a);
    refs[a] = 0;
    const int32_t c = kv_pool_alloc(p);
    refs[c] = 1;
    ck_assert_int_ne(c, a); /* a free block before a cached one */
    ck_assert(!kv_pool_register(p, c, 0, 42, t1));
    check_pool(p, refs);
    kv_pool_free(p);
}
END_TEST

START_TEST(test_lru_eviction)
{
    enum { N = 5, BT = 8 };
    struct kv_pool *p = new_pool(N, BT);
    int32_t refs[N] = {0};
    int32_t tok[N][BT];
    uint64_t hash[N];
    int32_t blk[N];
    for (int i = 0; i < N; i++) {
        blk[i] = kv_pool_alloc(p);
        ck_assert_int_ge(blk[i], 0);
        refs[blk[i]] = 1;
        tokens_of(tok[i], BT, i + 1);
        hash[i] = kv_pool_hash(0, tok[i], BT);
        ck_assert(kv_pool_register(p, blk[i], 0, hash[i], tok[i]));
    }
    check_pool(p, refs);
    /* released in the order 2, 0, 4, 1; 3 stays held */
    const int order[] = {2, 0, 4, 1};
    for (int i = 0; i < 4; i++) {
        kv_pool_release(p, blk[order[i]]);
        refs[blk[order[i]]] = 0;
        check_pool(p, refs);
    }
    struct kv_pool_counts c;
    kv_pool_counts(p, &c);
    ck_assert_int_eq(c.n_cached, 4);
    ck_assert_int_eq(c.n_free, 0);
    ck_assert_int_eq(kv_pool_available(p), 4);

    /* block 0 taken back and let go again: now the most recent release */
    ck_assert_int_eq(kv_pool_lookup(p, 0, hash[0], tok[0]), blk[0]);
    kv_pool_ref(p, blk[0]);
    refs[blk[0]] = 1;
    check_pool(p, refs);
    kv_pool_release(p, blk[0]);
    refs[blk[0]] = 0;
    check_pool(p, refs);

    /* evictions: 2, 4, 1, 0 -- each leaves the prefix cache */
    const int evicted[] = {2, 4, 1, 0};
    for (int i = 0; i < 4; i++) {
        const int32_t b = kv_pool_alloc(p);
        ck_assert_msg(b == blk[evicted[i]], "eviction %d took block %d, not %d", i, b, blk[evicted[i]]);
        refs[b] = 1;
        ck_assert_int_eq(kv_pool_refs(p, b), 1);
        ck_assert(!kv_pool_registered(p, b));
        ck_assert_int_eq(kv_pool_lookup(p, 0, hash[evicted[i]], tok[evicted[i]]), -1);
        kv_pool_counts(p, &c);
        ck_assert_uint_eq(c.evictions, (uint64_t)i + 1);
        check_pool(p, refs);
        /* the blocks not evicted yet are still found */
        for (int j = i + 1; j < 4; j++)
            ck_assert_int_eq(kv_pool_lookup(p, 0, hash[evicted[j]], tok[evicted[j]]), blk[evicted[j]]);
    }
    ck_assert_int_eq(kv_pool_alloc(p), -1);
    ck_assert_int_eq(kv_pool_lookup(p, 0, hash[3], tok[3]), blk[3]); /* held all along */

    /* an evicted hash can be registered again, on another block */
    kv_pool_release(p, blk[2]);
    refs[blk[2]] = 0;
    ck_assert(kv_pool_register(p, blk[4], 0, hash[2], tok[2]));
    ck_assert_int_eq(kv_pool_lookup(p, 0, hash[2], tok[2]), blk[4]);
    check_pool(p, refs);
    /* free blocks go before cached ones */
    kv_pool_release(p, blk[4]);
    refs[blk[4]] = 0;
    ck_assert_int_eq(kv_pool_alloc(p), blk[2]);
    refs[blk[2]] = 1;
    kv_pool_counts(p, &c);
    ck_assert_uint_eq(c.evictions, 4);
    ck_assert_int_eq(kv_pool_lookup(p, 0, hash[2], tok[2]), blk[4]);
    check_pool(p, refs);
    kv_pool_free(p);
}
END_TEST

/* The shadow model of the random test: holders, registrations and the
 * order of releases of cached blocks. */
#define R_BLOCKS 24
#define R_BT 3
struct shadow {
    int32_t refs[R_BLOCKS];
    bool registered[R_BLOCKS];
    uint64_t hash[R_BLOCKS], parent[R_BLOCKS];
    int32_t tokens[R_BLOCKS][R_BT];
    uint64_t released_at[R_BLOCKS]; /* when a cached block was released */
    uint64_t clock;
    uint64_t hits, misses, evictions;
};

static int32_t shadow_find(const struct shadow *s, uint64_t parent, uint64_t hash, const int32_t *tokens)
{
    for (int32_t b = 0; b < R_BLOCKS; b++)
        if (s->registered[b] && s->hash[b] == hash && s->parent[b] == parent &&
            memcmp(s->tokens[b], tokens, sizeof s->tokens[b]) == 0)
            return b;
    return -1;
}

static void shadow_check(const struct kv_pool *p, const struct shadow *s, long step)
{
    hearth_status st = kv_pool_check(p, s->refs);
    ck_assert_msg(st == HEARTH_OK, "step %ld: %s", step, hearth_last_error());
    struct kv_pool_counts c;
    kv_pool_counts(p, &c);
    int32_t n_free = 0, n_cached = 0;
    for (int32_t b = 0; b < R_BLOCKS; b++) {
        n_free += s->refs[b] == 0 && !s->registered[b];
        n_cached += s->refs[b] == 0 && s->registered[b];
        ck_assert_msg(kv_pool_registered(p, b) == s->registered[b], "step %ld: block %d registered %d",
                      step, b, kv_pool_registered(p, b));
    }
    ck_assert_msg(c.n_free == n_free && c.n_cached == n_cached && c.n_held == R_BLOCKS - n_free - n_cached,
                  "step %ld: %d free, %d cached, %d held; the model has %d free, %d cached", step, c.n_free,
                  c.n_cached, c.n_held, n_free, n_cached);
    ck_assert_int_eq(kv_pool_available(p), n_free + n_cached);
    ck_assert_msg(c.hits == s->hits && c.misses == s->misses && c.evictions == s->evictions,
                  "step %ld: %llu hits, %llu misses, %llu evictions; the model has %llu, %llu, %llu", step,
                  (unsigned long long)c.hits, (unsigned long long)c.misses, (unsigned long long)c.evictions,
                  (unsigned long long)s->hits, (unsigned long long)s->misses, (unsigned long long)s->evictions);
}

static int32_t random_held(const struct shadow *s, test_rng *rng)
{
    int32_t held[R_BLOCKS], n = 0;
    for (int32_t b = 0; b < R_BLOCKS; b++)
        if (s->refs[b] > 0) held[n++] = b;
    return n ? held[test_rng_next(rng) % (uint64_t)n] : -1;
}

START_TEST(test_random_against_model)
{
    struct kv_pool *p = new_pool(R_BLOCKS, R_BT);
    struct shadow *s = test_malloc(sizeof *s);
    memset(s, 0, sizeof *s);
    test_rng rng;
    test_rng_seed(&rng, 20240601 + (uint64_t)_i);
    const long n_steps = 6000;
    long n_evict_seen = 0, n_refused = 0, n_hits_seen = 0;
    for (long step = 0; step < n_steps; step++) {
        const uint64_t op = test_rng_next(&rng) % 100;
        if (op < 25) {
            /* alloc: a free block, else the oldest cached one, else -1 */
            int32_t oldest = -1;
            bool any_free = false;
            for (int32_t b = 0; b < R_BLOCKS; b++) {
                if (s->refs[b] > 0) continue;
                if (!s->registered[b]) any_free = true;
                else if (oldest < 0 || s->released_at[b] < s->released_at[oldest]) oldest = b;
            }
            const int32_t b = kv_pool_alloc(p);
            if (any_free) {
                ck_assert_msg(b >= 0 && b < R_BLOCKS && s->refs[b] == 0 && !s->registered[b],
                              "step %ld: alloc gave block %d, not a free one", step, b);
            } else if (oldest >= 0) {
                ck_assert_msg(b == oldest, "step %ld: alloc evicted block %d, not the oldest %d", step, b,
                              oldest);
                s->registered[b] = false;
                s->evictions++;
                n_evict_seen++;
            } else {
                ck_assert_msg(b == -1, "step %ld: alloc gave block %d with every block held", step, b);
            }
            if (b >= 0) s->refs[b] = 1;
        } else if (op < 40) {
            /* another holder of a held block */
            const int32_t b = random_held(s, &rng);
            if (b >= 0) {
                kv_pool_ref(p, b);
                s->refs[b]++;
            }
        } else if (op < 70) {
            /* one holder fewer */
            const int32_t b = random_held(s, &rng);
            if (b >= 0) {
                kv_pool_release(p, b);
                if (--s->refs[b] == 0 && s->registered[b]) s->released_at[b] = ++s->clock;
            }
        } else if (op < 85) {
            /* register a held block; a small alphabet of tokens and
             * parents, and sometimes a small raw hash, make duplicates */
            const int32_t b = random_held(s, &rng);
            if (b < 0) continue;
            int32_t tok[R_BT];
            for (int i = 0; i < R_BT; i++) tok[i] = (int32_t)(test_rng_next(&rng) % 3);
            const uint64_t parent = test_rng_next(&rng) % 3;
            const uint64_t hash = test_rng_next(&rng) % 4 == 0 ? test_rng_next(&rng) % 8
                                                               : kv_pool_hash(parent, tok, R_BT);
            bool dup = s->registered[b];
            for (int32_t o = 0; o < R_BLOCKS; o++) dup |= s->registered[o] && s->hash[o] == hash;
            const bool ok = kv_pool_register(p, b, parent, hash, tok);
            ck_assert_msg(ok == !dup, "step %ld: register of block %d gave %d", step, b, ok);
            if (ok) {
                s->registered[b] = true;
                s->hash[b] = hash;
                s->parent[b] = parent;
                memcpy(s->tokens[b], tok, sizeof tok);
            } else {
                n_refused++;
            }
        } else {
            /* lookup, and a reference on a hit: the contents of a block
             * the model has registered (perhaps altered) or random ones */
            int32_t tok[R_BT];
            uint64_t parent, hash;
            const int32_t src = (int32_t)(test_rng_next(&rng) % R_BLOCKS);
            if (s->registered[src] && test_rng_next(&rng) % 4 != 0) {
                memcpy(tok, s->tokens[src], sizeof tok);
                parent = s->parent[src];
                hash = s->hash[src];
                const uint64_t alter = test_rng_next(&rng) % 6;
                if (alter == 0) tok[test_rng_next(&rng) % R_BT] ^= 1;
                else if (alter == 1) parent ^= 1;
            } else {
                for (int i = 0; i < R_BT; i++) tok[i] = (int32_t)(test_rng_next(&rng) % 3);
                parent = test_rng_next(&rng) % 3;
                hash = test_rng_next(&rng) % 2 ? kv_pool_hash(parent, tok, R_BT) : test_rng_next(&rng) % 8;
            }
            const int32_t want = shadow_find(s, parent, hash, tok);
            const int32_t b = kv_pool_lookup(p, parent, hash, tok);
            ck_assert_msg(b == want, "step %ld: lookup found block %d, the model %d", step, b, want);
            if (b >= 0) {
                s->hits++;
                n_hits_seen++;
                kv_pool_ref(p, b);
                s->refs[b]++;
            } else {
                s->misses++;
            }
        }
        shadow_check(p, s, step);
    }
    /* the sequence reached every case */
    ck_assert_int_gt(n_evict_seen, 10);
    ck_assert_int_gt(n_refused, 10);
    ck_assert_int_gt(n_hits_seen, 10);

    /* everything released: every block free or cached, none lost */
    for (int32_t b = 0; b < R_BLOCKS; b++)
        while (s->refs[b] > 0) {
            kv_pool_release(p, b);
            if (--s->refs[b] == 0 && s->registered[b]) s->released_at[b] = ++s->clock;
        }
    shadow_check(p, s, n_steps);
    struct kv_pool_counts c;
    kv_pool_counts(p, &c);
    ck_assert_int_eq(c.n_held, 0);
    ck_assert_int_eq(c.n_free + c.n_cached, R_BLOCKS);
    ck_assert_int_eq(kv_pool_available(p), R_BLOCKS);
    /* and every one can be had again */
    bool seen[R_BLOCKS] = {false};
    for (int32_t i = 0; i < R_BLOCKS; i++) {
        const int32_t b = kv_pool_alloc(p);
        ck_assert_int_ge(b, 0);
        ck_assert(!seen[b]);
        seen[b] = true;
        s->refs[b] = 1;
    }
    ck_assert_int_eq(kv_pool_alloc(p), -1);
    ck_assert_int_eq(kv_pool_check(p, s->refs), HEARTH_OK);
    free(s);
    kv_pool_free(p);
}
END_TEST

/* Copy-on-write storage: the first n_rows rows of block src land in
 * block dst in every host layer of the space copied, keys and values;
 * every other byte stays.  With split, layer 2 is in a window space of
 * NBW blocks and the copy is of that space's blocks (window) or of the
 * others'. */
static void check_copy_block(hearth_type type, int32_t n_rows, bool split, bool window)
{
    enum { BT = 8, NB = 4, NBW = 3, NL = 3, NHKV = 2, HD = 32 };
    const bool on_host[NL] = {true, false, true};
    const bool in_window[NL] = {false, false, true};
    struct kv_cache *kv;
    ck_assert_int_eq(kv_cache_new_split(type, BT, NB, split ? NBW : 0, NL, &(struct kv_shape){NHKV, HD, false, 0}, on_host,
                                        in_window, &kv),
                     HEARTH_OK);
    ck_assert_ptr_null(kv->layers[1].k);
    ck_assert_ptr_null(kv->layers[1].v);
    ck_assert(kv->layers[2].window == split);
    ck_assert_int_eq(kv_cache_layer_blocks(kv, 2), split ? NBW : NB);
    ck_assert_uint_eq(kv_cache_bytes(kv), 2 * kv->block_bytes * (size_t)(2 * NB + (split ? NBW : NB)));
    ck_assert_uint_eq(kv->block_bytes, kv->row_bytes * BT);
    uint8_t *before[NL][2] = {{NULL}};
    test_rng rng;
    test_rng_seed(&rng, 99 + (uint64_t)type * 31 + (uint64_t)n_rows);
    float row[NHKV * HD];
    for (int il = 0; il < NL; il++) {
        if (!on_host[il]) continue;
        const size_t layer_bytes = kv->block_bytes * (size_t)kv_cache_layer_blocks(kv, il);
        for (int kvi = 0; kvi < 2; kvi++) {
            uint8_t *base = kvi ? kv->layers[il].v : kv->layers[il].k;
            for (int64_t slot = 0; slot < (int64_t)kv_cache_layer_blocks(kv, il) * BT; slot++) {
                for (int i = 0; i < NHKV * HD; i++) row[i] = (float)test_rng_normal(&rng);
                kv_cache_store(kv, base, slot, row);
            }
            before[il][kvi] = test_malloc(layer_bytes);
            memcpy(before[il][kvi], base, layer_bytes);
        }
    }
    const int32_t src = 1, dst = window ? 2 : 3;
    kv_cache_copy_block(kv, src, dst, n_rows, window);
    const size_t copied = (size_t)n_rows * kv->row_bytes;
    for (int il = 0; il < NL; il++) {
        if (!on_host[il]) continue;
        const size_t layer_bytes = kv->block_bytes * (size_t)kv_cache_layer_blocks(kv, il);
        const bool copies = kv->layers[il].window == window;
        for (int kvi = 0; kvi < 2; kvi++) {
            const uint8_t *base = kvi ? kv->layers[il].v : kv->layers[il].k;
            const uint8_t *was = before[il][kvi];
            for (size_t i = 0; i < layer_bytes; i++) {
                const size_t blk = i / kv->block_bytes, in_block = i % kv->block_bytes;
                const uint8_t want = copies && blk == (size_t)dst && in_block < copied
                                         ? was[(size_t)src * kv->block_bytes + in_block] : was[i];
                ck_assert_msg(base[i] == want, "%s, %d rows: layer %d %s byte %zu (block %zu, offset %zu) "
                              "is %u, not %u", hearth_type_name(type), n_rows, il, kvi ? "values" : "keys", i,
                              blk, in_block, base[i], want);
            }
            /* the copied rows read back as the source's */
            float a[HD], b[HD];
            for (int32_t r = 0; copies && r < n_rows; r++) {
                kv_cache_load_head(kv, base, (int64_t)src * BT + r, NHKV - 1, a);
                kv_cache_load_head(kv, base, (int64_t)dst * BT + r, NHKV - 1, b);
                ck_assert_mem_eq(a, b, sizeof a);
            }
        }
    }
    for (int il = 0; il < NL; il++) {
        free(before[il][0]);
        free(before[il][1]);
    }
    kv_cache_free(kv);
}

START_TEST(test_copy_block)
{
    static const hearth_type types[] = {HEARTH_TYPE_F32, HEARTH_TYPE_F16, HEARTH_TYPE_Q8_0};
    const hearth_type type = types[_i];
    for (int split = 0; split < 2; split++)
        for (int window = 0; window <= split; window++) {
            check_copy_block(type, 0, split, window);
            check_copy_block(type, 1, split, window);
            check_copy_block(type, 5, split, window);
            check_copy_block(type, 8, split, window); /* the whole block */
        }
}
END_TEST

/* A window space larger than the pool, or a negative one, is refused. */
START_TEST(test_window_space_sizes)
{
    const bool window[2] = {true, false};
    const struct kv_shape shape = {1, 32, false, 0};
    struct kv_cache *kv = NULL;
    ck_assert_int_eq(kv_cache_new_split(HEARTH_TYPE_F32, 16, 4, 5, 2, &shape, NULL, window, &kv), HEARTH_E_INVALID);
    ck_assert_int_eq(kv_cache_new_split(HEARTH_TYPE_F32, 16, 4, -1, 2, &shape, NULL, window, &kv), HEARTH_E_INVALID);
    ck_assert_ptr_null(kv);
    /* no window flags: no window space, whatever its size */
    ck_assert_int_eq(kv_cache_new_split(HEARTH_TYPE_F32, 16, 4, 2, 2, &shape, NULL, NULL, &kv), HEARTH_OK);
    ck_assert_int_eq(kv->n_blocks_window, 0);
    ck_assert(!kv->layers[0].window);
    kv_cache_free(kv);
}
END_TEST

static Suite *kv_pool_suite(void)
{
    Suite *s = suite_create("kv-pool");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_invalid_sizes);
    tcase_add_test(tc, test_alloc_until_exhausted);
    tcase_add_test(tc, test_refcounts);
    tcase_add_test(tc, test_register_lookup);
    tcase_add_test(tc, test_register_refusals);
    tcase_add_test(tc, test_lru_eviction);
    tcase_add_loop_test(tc, test_random_against_model, 0, 3);
    suite_add_tcase(s, tc);
    TCase *tc_cache = tcase_create("storage");
    tcase_add_loop_test(tc_cache, test_copy_block, 0, 3);
    tcase_add_test(tc_cache, test_window_space_sizes);
    suite_add_tcase(s, tc_cache);
    return s;
}

int main(void)
{
    return test_run_suite(kv_pool_suite());
}

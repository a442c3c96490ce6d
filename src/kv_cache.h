/*
 * kv_cache.h -- the key/value cache of one sequence: for every layer, the
 * keys and values of every position so far, in F32, F16 or Q8_0.
 *
 * Rows are positions; a row holds n_head_kv heads of head_dim elements
 * back to back, so one head of one position is a contiguous run (whole
 * Q8_0 blocks, since head_dim must then be a multiple of 32).  Prefill and
 * decode write the same cache; only positions below n_used are valid.
 */
#ifndef HEARTH_KV_CACHE_H
#define HEARTH_KV_CACHE_H

#include "internal.h"

struct kv_layer {
    uint8_t *k;      /* n_ctx rows of row_bytes (host layers) */
    uint8_t *v;
    void *k_dev;     /* device copies for offloaded layers */
    void *v_dev;
};

struct kv_cache {
    hearth_type type;     /* F32, F16 or Q8_0 */
    int32_t n_ctx;
    int32_t n_layer;
    int32_t n_head_kv;
    int32_t head_dim;
    int64_t row_elems;    /* n_head_kv * head_dim */
    size_t row_bytes;
    size_t head_bytes;    /* bytes of one head in one row */
    struct kv_layer *layers;
    int32_t n_used;       /* positions 0 .. n_used-1 hold valid entries */
};

/* Allocate host storage for every layer whose on_host[il] is true (all
 * layers when on_host is NULL). */
hearth_status kv_cache_new(hearth_type type, int32_t n_ctx, int32_t n_layer, int32_t n_head_kv,
                           int32_t head_dim, const bool *on_host, struct kv_cache **out);
void kv_cache_free(struct kv_cache *kv);

/* Bytes of cache for all layers and positions. */
size_t kv_cache_bytes(const struct kv_cache *kv);

/* Store one position's row (n_head_kv * head_dim floats) of keys or values. */
void kv_cache_store(const struct kv_cache *kv, uint8_t *base, int32_t pos, const float *row);

/* Read head h of position pos back as floats. */
void kv_cache_load_head(const struct kv_cache *kv, const uint8_t *base, int32_t pos, int32_t h,
                        float *out);

#endif /* HEARTH_KV_CACHE_H */

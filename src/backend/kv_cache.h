/*
 * kv_cache.h -- the key/value storage of a KV pool: for every layer, rows
 * of keys and values in F32, F16 or Q8_0, grouped into fixed-size blocks.
 *
 * A row is one position of one sequence; it holds n_head_kv heads of
 * head_dim elements back to back, so one head of one position is a
 * contiguous run (whole Q8_0 blocks, since head_dim must then be a
 * multiple of 32).  A model with multi-head latent attention keeps rows of
 * keys only, whose heads end with their values (struct kv_shape): one
 * head per position, [k_rope | c_kv], the latent c_kv being the value.
 * Rows are numbered by slot: block b holds slots
 * b * block_tokens .. (b + 1) * block_tokens - 1, contiguous in memory.
 * Which block holds which positions of which sequence is the business of
 * the block tables (struct batch_pos, engine/kv_pool.h); this file only
 * stores and converts.
 *
 * A model that mixes sliding-window and full-attention layers may keep
 * its sliding layers in a second, smaller block space (the window
 * space): n_blocks_window blocks, numbered apart, addressed through the
 * window tables of the batch (batch_pos.wslot, .wblocks), whose blocks
 * go back to their own pool once they fall out of the window.
 */
#ifndef HEARTH_KV_CACHE_H
#define HEARTH_KV_CACHE_H

#include "internal.h"

#include "model.h"

/* Positions per block unless the caller chooses (the choice is explained
 * in DESIGN.md, "The KV pool"). */
#define HEARTH_KV_BLOCK_DEFAULT 64

/* What one position of one layer keeps: n_head_kv heads of head_dim
 * elements of keys, and as many of values in rows of their own; or, where
 * values_in_keys, rows of keys only, each head's values being its
 * elements value_first .. head_dim - 1 (which start on a block of the
 * cache type).  kv_shape_of gives a model's. */
struct kv_shape {
    int32_t n_head_kv;
    int32_t head_dim;
    bool values_in_keys;
    int32_t value_first;
};

/* The cache shape of a model's attention layers (hparams.kv_latent). */
static inline struct kv_shape kv_shape_of(const struct hparams *hp)
{
    struct kv_shape s = {hp->n_head_kv, hp->head_dim, hp->kv_latent > 0, 0};
    if (s.values_in_keys) s.value_first = hp->head_dim - hp->kv_latent;
    return s;
}

/* The cache shape of a loaded model's attention layers: on a rank that
 * runs a share of the heads (model.h, struct attn_heads), those heads
 * only. */
static inline struct kv_shape kv_shape_of_model(const hearth_model *m)
{
    struct kv_shape s = kv_shape_of(&m->hp);
    if (m->heads.tp) s.n_head_kv = m->heads.n_kv;
    return s;
}

struct kv_layer {
    uint8_t *k;      /* n_blocks * block_tokens rows of row_bytes (host layers) */
    uint8_t *v;      /* the same, NULL where the values are in the keys */
    void *k_dev;     /* device copies for offloaded layers */
    void *v_dev;
    bool window;     /* in the window space (host layers only) */
};

struct kv_cache {
    hearth_type type;      /* F32, F16 or Q8_0 */
    int32_t block_tokens;  /* rows per block */
    int32_t n_blocks;
    int32_t n_blocks_window; /* blocks of the window space; 0: none */
    int64_t n_slots;       /* n_blocks * block_tokens */
    int32_t n_layer;
    int32_t n_head_kv;
    int32_t head_dim;
    bool values_in_keys;   /* no rows of values (struct kv_shape) */
    int32_t value_first;   /* values_in_keys: a head's values start at this element */
    size_t value_offset;   /* ... and this many bytes into the head; 0 otherwise */
    int64_t row_elems;     /* n_head_kv * head_dim */
    size_t row_bytes;
    size_t head_bytes;     /* bytes of one head in one row */
    size_t block_bytes;    /* bytes of one block of one layer's keys (or values) */
    struct kv_layer *layers;
};

/* Check the shape and type of a cache without allocating it (the message
 * names what is wrong). */
hearth_status kv_cache_check(hearth_type type, int32_t block_tokens, int32_t n_blocks,
                             const struct kv_shape *shape);

/* Bytes of keys and values one position takes in n_layer layers. */
size_t kv_cache_bytes_per_token(hearth_type type, int32_t n_layer, const struct kv_shape *shape);

/* Allocate host storage for every layer whose on_host[il] is true (all
 * layers when on_host is NULL). */
hearth_status kv_cache_new(hearth_type type, int32_t block_tokens, int32_t n_blocks, int32_t n_layer,
                           const struct kv_shape *shape, const bool *on_host, struct kv_cache **out);
/* The same, the layers with window[il] set (host layers) in a window
 * space of n_blocks_window blocks (window NULL or n_blocks_window 0:
 * none). */
hearth_status kv_cache_new_split(hearth_type type, int32_t block_tokens, int32_t n_blocks,
                                 int32_t n_blocks_window, int32_t n_layer, const struct kv_shape *shape,
                                 const bool *on_host, const bool *window, struct kv_cache **out);
/* Blocks of layer il's storage. */
static inline int32_t kv_cache_layer_blocks(const struct kv_cache *kv, int32_t il)
{
    return kv->layers[il].window ? kv->n_blocks_window : kv->n_blocks;
}
void kv_cache_free(struct kv_cache *kv);

/* Bytes of cache for all layers and slots (both spaces); _held: of the
 * layers allocated here (not another rank's, nor a device's). */
size_t kv_cache_bytes(const struct kv_cache *kv);
size_t kv_cache_bytes_held(const struct kv_cache *kv);

/* Store one row (n_head_kv * head_dim floats) of keys or values at slot
 * (with values_in_keys, a key row holds the values too). */
void kv_cache_store(const struct kv_cache *kv, uint8_t *base, int64_t slot, const float *row);

/* Read head h of the row at slot back as floats. */
void kv_cache_load_head(const struct kv_cache *kv, const uint8_t *base, int64_t slot, int32_t h,
                        float *out);

/* Copy the first n_rows rows of block src into block dst in every host
 * layer of one space, the window space's or the other's (copy-on-write of
 * a shared block). */
void kv_cache_copy_block(const struct kv_cache *kv, int32_t src, int32_t dst, int32_t n_rows, bool window);

/* A block's keys and values in every host layer of the main space, as
 * one run of bytes (the disk tier of the prefix cache, disk_cache.h):
 * layer by layer, its keys then its values.  kv_cache_block_save_bytes()
 * is the run's length. */
size_t kv_cache_block_save_bytes(const struct kv_cache *kv);
void kv_cache_save_block(const struct kv_cache *kv, int32_t b, uint8_t *out);
void kv_cache_load_block(const struct kv_cache *kv, int32_t b, const uint8_t *in);

#endif /* HEARTH_KV_CACHE_H */

/*
 * kv_cache.c -- allocation and element conversion of the key/value storage.
 */
#include "kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "quant.h"

hearth_status kv_cache_check(hearth_type type, int32_t block_tokens, int32_t n_blocks,
                             const struct kv_shape *shape)
{
    const int32_t n_head_kv = shape->n_head_kv, head_dim = shape->head_dim;
    if (type != HEARTH_TYPE_F32 && type != HEARTH_TYPE_F16 && type != HEARTH_TYPE_Q8_0)
        return hearth_error(HEARTH_E_INVALID, "KV cache type %s is not supported (f32, f16, q8_0)",
                            hearth_type_name(type) ? hearth_type_name(type) : "?");
    if (block_tokens <= 0 || n_blocks <= 0 || n_head_kv <= 0 || head_dim <= 0)
        return hearth_error(HEARTH_E_INVALID, "KV cache: invalid size (%d blocks of %d positions)",
                            n_blocks, block_tokens);
    if ((int64_t)block_tokens * n_blocks > INT32_MAX)
        return hearth_error(HEARTH_E_INVALID, "KV cache of %d blocks of %d positions is too large",
                            n_blocks, block_tokens);
    if (hearth_type_row_bytes(type, head_dim) == 0)
        return hearth_error(HEARTH_E_INVALID, "KV cache type %s needs a head dimension that is a "
                            "multiple of %lld, the model has %d", hearth_type_name(type),
                            (long long)hearth_type_block_elems(type), head_dim);
    /* values read from the keys start on a block of the cache type */
    if (shape->values_in_keys &&
        (shape->value_first <= 0 || shape->value_first >= head_dim ||
         hearth_type_row_bytes(type, shape->value_first) == 0))
        return hearth_error(HEARTH_E_INVALID, "KV cache type %s cannot keep values from element %d of "
                            "keys of %d (a multiple of %lld is needed)", hearth_type_name(type),
                            shape->value_first, head_dim, (long long)hearth_type_block_elems(type));
    return HEARTH_OK;
}

/* Rows per position and layer: keys, and values unless they are in the keys. */
static size_t rows_per_position(bool values_in_keys)
{
    return values_in_keys ? 1 : 2;
}

size_t kv_cache_bytes_per_token(hearth_type type, int32_t n_layer, const struct kv_shape *shape)
{
    return rows_per_position(shape->values_in_keys) * hearth_type_row_bytes(type, shape->head_dim) *
           (size_t)shape->n_head_kv * (size_t)n_layer;
}

hearth_status kv_cache_new(hearth_type type, int32_t block_tokens, int32_t n_blocks, int32_t n_layer,
                           const struct kv_shape *shape, const bool *on_host, struct kv_cache **out)
{
    return kv_cache_new_split(type, block_tokens, n_blocks, 0, n_layer, shape, on_host, NULL, out);
}

hearth_status kv_cache_new_split(hearth_type type, int32_t block_tokens, int32_t n_blocks,
                                 int32_t n_blocks_window, int32_t n_layer, const struct kv_shape *shape,
                                 const bool *on_host, const bool *window, struct kv_cache **out)
{
    HEARTH_TRY(kv_cache_check(type, block_tokens, n_blocks, shape));
    const int32_t n_head_kv = shape->n_head_kv, head_dim = shape->head_dim;
    if (!window) n_blocks_window = 0;
    if (n_blocks_window < 0 || n_blocks_window > n_blocks)
        return hearth_error(HEARTH_E_INVALID, "KV cache: a window space of %d blocks beside %d", n_blocks_window,
                            n_blocks);
    if (n_layer <= 0) return hearth_error(HEARTH_E_INVALID, "KV cache: %d layers", n_layer);
    struct kv_cache *kv = hearth_calloc(1, sizeof *kv, "the KV cache");
    if (!kv) return HEARTH_E_NOMEM;
    kv->type = type;
    kv->block_tokens = block_tokens;
    kv->n_blocks = n_blocks;
    kv->n_blocks_window = n_blocks_window;
    kv->n_slots = (int64_t)block_tokens * n_blocks;
    kv->n_layer = n_layer;
    kv->n_head_kv = n_head_kv;
    kv->head_dim = head_dim;
    kv->values_in_keys = shape->values_in_keys;
    kv->value_first = shape->values_in_keys ? shape->value_first : 0;
    kv->value_offset = shape->values_in_keys ? hearth_type_row_bytes(type, shape->value_first) : 0;
    kv->row_elems = (int64_t)n_head_kv * head_dim;
    kv->head_bytes = hearth_type_row_bytes(type, head_dim);
    kv->row_bytes = kv->head_bytes * (size_t)n_head_kv;
    kv->block_bytes = kv->row_bytes * (size_t)block_tokens;
    kv->layers = hearth_calloc((size_t)n_layer, sizeof *kv->layers, "the KV cache layers");
    if (!kv->layers) {
        free(kv);
        return HEARTH_E_NOMEM;
    }
    size_t bytes_full;
    if (hearth_mul_overflow(kv->block_bytes, (size_t)n_blocks, &bytes_full)) {
        kv_cache_free(kv);
        return hearth_error(HEARTH_E_NOMEM, "KV cache of %d blocks is too large", n_blocks);
    }
    for (int32_t il = 0; il < n_layer; il++) {
        if (on_host && !on_host[il]) continue;
        kv->layers[il].window = n_blocks_window > 0 && window[il];
        const size_t bytes = kv->layers[il].window ? kv->block_bytes * (size_t)n_blocks_window : bytes_full;
        kv->layers[il].k = hearth_aligned_alloc(64, bytes, "the KV cache");
        if (!kv->values_in_keys) kv->layers[il].v = hearth_aligned_alloc(64, bytes, "the KV cache");
        if (!kv->layers[il].k || (!kv->values_in_keys && !kv->layers[il].v)) {
            kv_cache_free(kv);
            return hearth_error(HEARTH_E_NOMEM, "out of memory for a KV cache of %lld positions "
                                "(%zu bytes per layer)", (long long)kv->n_slots,
                                rows_per_position(kv->values_in_keys) * bytes);
        }
    }
    *out = kv;
    return HEARTH_OK;
}

void kv_cache_free(struct kv_cache *kv)
{
    if (!kv) return;
    for (int32_t il = 0; il < kv->n_layer; il++) {
        hearth_aligned_free(kv->layers[il].k);
        hearth_aligned_free(kv->layers[il].v);
    }
    free(kv->layers);
    free(kv);
}

static size_t cache_bytes(const struct kv_cache *kv, bool held_only)
{
    size_t n = 0;
    for (int32_t il = 0; il < kv->n_layer; il++)
        if (!held_only || kv->layers[il].k)
            n += rows_per_position(kv->values_in_keys) * kv->block_bytes * (size_t)kv_cache_layer_blocks(kv, il);
    return n;
}

size_t kv_cache_bytes(const struct kv_cache *kv) { return cache_bytes(kv, false); }
size_t kv_cache_bytes_held(const struct kv_cache *kv) { return cache_bytes(kv, true); }

void kv_cache_store(const struct kv_cache *kv, uint8_t *base, int64_t slot, const float *row)
{
    uint8_t *dst = base + (size_t)slot * kv->row_bytes;
    switch (kv->type) {
    case HEARTH_TYPE_F32:
        memcpy(dst, row, (size_t)kv->row_elems * sizeof(float));
        break;
    case HEARTH_TYPE_F16: {
        hearth_f16 *h = (hearth_f16 *)dst;
        for (int64_t i = 0; i < kv->row_elems; i++) h[i] = hearth_f32_to_f16(row[i]);
        break;
    }
    default:
        quant_quantize_row(kv->type, row, dst, kv->row_elems);
        break;
    }
}

void kv_cache_load_head(const struct kv_cache *kv, const uint8_t *base, int64_t slot, int32_t h,
                        float *out)
{
    const uint8_t *src = base + (size_t)slot * kv->row_bytes + (size_t)h * kv->head_bytes;
    switch (kv->type) {
    case HEARTH_TYPE_F32:
        memcpy(out, src, (size_t)kv->head_dim * sizeof(float));
        break;
    case HEARTH_TYPE_F16: {
        const hearth_f16 *x = (const hearth_f16 *)src;
        for (int32_t i = 0; i < kv->head_dim; i++) out[i] = hearth_f16_to_f32(x[i]);
        break;
    }
    default:
        quant_dequantize_row(kv->type, src, out, kv->head_dim);
        break;
    }
}

void kv_cache_copy_block(const struct kv_cache *kv, int32_t src, int32_t dst, int32_t n_rows, bool window)
{
    const size_t n = (size_t)n_rows * kv->row_bytes;
    for (int32_t il = 0; il < kv->n_layer; il++) {
        const struct kv_layer *L = &kv->layers[il];
        if (!L->k || L->window != window) continue;
        memcpy(L->k + (size_t)dst * kv->block_bytes, L->k + (size_t)src * kv->block_bytes, n);
        if (L->v) memcpy(L->v + (size_t)dst * kv->block_bytes, L->v + (size_t)src * kv->block_bytes, n);
    }
}

size_t kv_cache_block_save_bytes(const struct kv_cache *kv)
{
    size_t n = 0;
    for (int32_t il = 0; il < kv->n_layer; il++) {
        const struct kv_layer *L = &kv->layers[il];
        if (L->k && !L->window) n += (L->v ? 2 : 1) * kv->block_bytes;
    }
    return n;
}

void kv_cache_save_block(const struct kv_cache *kv, int32_t b, uint8_t *out)
{
    for (int32_t il = 0; il < kv->n_layer; il++) {
        const struct kv_layer *L = &kv->layers[il];
        if (!L->k || L->window) continue;
        memcpy(out, L->k + (size_t)b * kv->block_bytes, kv->block_bytes);
        out += kv->block_bytes;
        if (L->v) {
            memcpy(out, L->v + (size_t)b * kv->block_bytes, kv->block_bytes);
            out += kv->block_bytes;
        }
    }
}

void kv_cache_load_block(const struct kv_cache *kv, int32_t b, const uint8_t *in)
{
    for (int32_t il = 0; il < kv->n_layer; il++) {
        const struct kv_layer *L = &kv->layers[il];
        if (!L->k || L->window) continue;
        memcpy(L->k + (size_t)b * kv->block_bytes, in, kv->block_bytes);
        in += kv->block_bytes;
        if (L->v) {
            memcpy(L->v + (size_t)b * kv->block_bytes, in, kv->block_bytes);
            in += kv->block_bytes;
        }
    }
}

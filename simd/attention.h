/*
 * attention.h -- the attention kernels: softmax(q k^T) v over the KV cache
 * in blocks of keys with an online softmax, one table per instruction set
 * (chosen with the matrix-product kernels, see kernels.h).
 *
 * The unit of work is a set of query rows that share one key/value head:
 * the query heads of a group (grouped-query attention) for one or several
 * tokens.  Each key and value row of a block is then read and converted
 * once for all of them, straight from the cache in its own format (F32,
 * F16 or Q8_0): there is no float copy of the cache and no n x n matrix of
 * scores.
 *
 * Online softmax (Milakov and Gimelshein 2018; the tiling of FlashAttention,
 * Dao et al. 2022): a row keeps the largest score seen so far m, the sum
 * l = sum_j exp(s_j - m) and the weighted sum a = sum_j exp(s_j - m) v_j.
 * A block of keys with scores s_j raises m to m' = max(m, max_j s_j) and
 * rescales by alpha = exp(m - m'):
 *     l' = alpha l + sum_j exp(s_j - m'),   a' = alpha a + sum_j exp(s_j - m') v_j.
 * After the last block the row's output is a / l.  Partial states over
 * disjoint key ranges merge the same way (attn_merge), which lets long
 * contexts be split between threads.
 */
#ifndef HEARTH_ATTENTION_H
#define HEARTH_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "hearth.h"
#include "kernels.h"

/* The most keys one call of a block kernel takes. */
#define ATTN_KEY_BLOCK 64

/* The query rows sharing one key/value head and their softmax state. */
struct attn_rows {
    int32_t head_dim;         /* elements of a query and a key */
    int32_t v_dim;            /* elements of a value: head_dim, or fewer where the
                               * values are part of the key rows (multi-head
                               * latent attention, kv_cache.h) */
    int32_t n_rows;
    const float *q;           /* n_rows x head_dim, already scaled by 1/sqrt(head_dim) */
    const int32_t *n_visible; /* row r sees keys j < n_visible[r] (the causal mask) */
    const int32_t *first_visible; /* and keys j >= first_visible[r] (a sliding window);
                                   * NULL: from key 0 */
    float softcap;            /* > 0: scores s become softcap * tanh(s / softcap)
                               * before the softmax (Gemma 2); 0: none */
    float *max;               /* per row: the running maximum m (-inf: no key yet) */
    float *sum;               /* per row: the running sum l */
    float *acc;               /* n_rows x v_dim: the running weighted sum a */
    float *scores;            /* scratch of n_rows x ATTN_KEY_BLOCK floats */
};

/* Fold keys j0 <= j < j1 (j1 - j0 <= ATTN_KEY_BLOCK) into every row's
 * state.  k and v point at this head's entry of position 0 of the cache
 * (head_dim and v_dim elements); position j's entry is row_bytes further
 * on per position.  v may point into the key rows (the values are then
 * the keys' last v_dim elements, starting on a block of the cache type).
 * Keys at or
 * past a row's n_visible, and before its first_visible, are masked
 * (weight 0); a row that sees none of the block is left as it was. */
typedef void (*attn_block_fn)(const struct attn_rows *rows, const uint8_t *k, const uint8_t *v,
                              size_t row_bytes, int32_t j0, int32_t j1);

struct attn_kernels {
    const char *name;
    attn_block_fn block[HEARTH_TYPE_COUNT]; /* by cache type: F32, F16, Q8_0 */
};

/* The table of a path (NULL where kernel_path_table gives NULL). */
const struct attn_kernels *attn_kernels_for_path(kernel_path path);

/* The attention kernels of the path whose matrix kernels are k. */
const struct attn_kernels *attn_kernels_matching(const hearth_kernels *k);

/* The tables of each path (simd/attention_*.c). */
const struct attn_kernels *attn_kernels_scalar(void);
const struct attn_kernels *attn_kernels_avx2(void);
const struct attn_kernels *attn_kernels_avx512(void);
const struct attn_kernels *attn_kernels_neon(void);

/* Start n_rows rows' states (accumulators of v_dim): no keys seen. */
void attn_state_init(int32_t n_rows, int32_t v_dim, float *max, float *sum, float *acc);

/* out[i] (i < v_dim) = the attention output of one row from its partial states over
 * n_parts disjoint key ranges: state p is max[p * stride_ms],
 * sum[p * stride_ms] and acc + p * stride_acc.  At least one state must
 * have seen a key.  sink (-INFINITY: none) is one more score in the
 * softmax's denominator with a zero value (an attention sink): with m the
 * states' largest score, l their sum and a their weighted sum,
 * out = a / (l + exp(sink - m)), formed relative to max(m, sink). */
void attn_merge(int32_t v_dim, int32_t n_parts, const float *max, const float *sum,
                size_t stride_ms, const float *acc, size_t stride_acc, float sink, float *out);

#endif /* HEARTH_ATTENTION_H */

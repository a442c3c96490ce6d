/*
 * attention.cl -- the KV cache of offloaded layers and causal attention
 * over it (Vaswani et al. 2017, eq. 1), with grouped-query heads.
 *
 * Cache rows are slots; a row holds n_head_kv heads of head_dim elements
 * (F32, or F16 rounded to nearest even), as in src/backend/kv_cache.h.
 * Position j of a row's sequence is in slot tables[j / block_tokens] *
 * block_tokens + j % block_tokens, tables being that sequence's block
 * table.  The places buffer holds, for n rows, pos[0 .. n), slot[n .. 2n),
 * the offset of each row's block table [2n .. 3n), and the tables from 3n.
 *
 * One work-group per (query head, token), computing what the CPU
 * computes in the same order: the scores s_j = (q . k_j) / sqrt(d) of
 * every key up to the token's position, each a float dot product summed
 * element by element (items share out the keys); their maximum m; the
 * weights e_j = exp(s_j - m) and their sum in double precision (where the
 * device has it) giving inv = 1 / sum; then each output element, one per
 * item, as sum_j (e_j inv) v_j in key order.  The scores live in a global
 * scratch row of n_ctx floats per (token, head).
 */

/* Row t of src (row_elems floats) into the cache row of slot
 * places[slot_off + t]; n = tokens * row_elems items. */
__kernel void kv_store_f32(__global const float *src, __global float *cache,
                           __global const int *places, int slot_off, int row_elems, int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const int t = i / row_elems, e = i % row_elems;
    cache[(size_t)places[slot_off + t] * row_elems + e] = src[i];
}

__kernel void kv_store_f16(__global const float *src, __global half *cache,
                           __global const int *places, int slot_off, int row_elems, int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const int t = i / row_elems, e = i % row_elems;
    vstore_half_rte(src[i], (size_t)places[slot_off + t] * row_elems + e, cache);
}

#define LOAD_F32(p, i) ((p)[i])
#define LOAD_F16(p, i) vload_half((i), (p))

#ifdef HAVE_FP64
typedef double att_acc;
#define ATT_EXP(x) ((float)exp((double)(x)))
#define ATT_INV(sum) ((float)(1.0 / (sum)))
#else
typedef float att_acc;
#define ATT_EXP(x) exp(x)
#define ATT_INV(sum) (1.0f / (sum))
#endif

/* scratch: n_ctx floats per (token of the chunk, head); tokens t0 .. of
 * the batch; qs: head_dim floats; red: one att_acc per item (the host
 * passes 8 bytes per item). */
#define ATTENTION_KERNEL(NAME, CT, LOAD) \
__kernel void NAME(__global const float *q, __global const CT *kc, __global const CT *vc, \
                   __global const int *pos, __global float *out, int n_head, int n_head_kv, \
                   int head_dim, float scale, __global float *scores, int n_ctx, int t0, \
                   int block_tokens, int n_rows, __local float *qs, __local att_acc *red) \
{ \
    const int h = get_group_id(0), tc = get_group_id(1), t = t0 + tc; \
    const int lid = get_local_id(0), lsize = get_local_size(0); \
    const int kvh = h / (n_head / n_head_kv); \
    const size_t row_elems = (size_t)n_head_kv * head_dim; \
    const int p = pos[t]; \
    __global const int *table = pos + 3 * n_rows + pos[2 * n_rows + t]; \
    __global const float *qh = q + ((size_t)t * n_head + h) * head_dim; \
    __global float *sc = scores + ((size_t)tc * n_head + h) * n_ctx; \
    for (int d = lid; d < head_dim; d += lsize) qs[d] = qh[d]; \
    barrier(CLK_LOCAL_MEM_FENCE); \
    float m = -INFINITY; \
    for (int j = lid; j <= p; j += lsize) { \
        const size_t slot = (size_t)table[j / block_tokens] * block_tokens + j % block_tokens; \
        __global const CT *kr = kc + slot * row_elems + (size_t)kvh * head_dim; \
        float s = 0.0f; \
        for (int d = 0; d < head_dim; d++) s += qs[d] * LOAD(kr, d); \
        s = s * scale; \
        sc[j] = s; \
        m = s > m ? s : m; \
    } \
    /* the maximum does not depend on the order */ \
    red[lid] = m; \
    barrier(CLK_LOCAL_MEM_FENCE); \
    for (int half_n = lsize / 2; half_n > 0; half_n /= 2) { \
        if (lid < half_n && red[lid + half_n] > red[lid]) red[lid] = red[lid + half_n]; \
        barrier(CLK_LOCAL_MEM_FENCE); \
    } \
    const float max = (float)red[0]; \
    barrier(CLK_LOCAL_MEM_FENCE); \
    att_acc sum = 0; \
    for (int j = lid; j <= p; j += lsize) { \
        const float e = ATT_EXP(sc[j] - max); \
        sc[j] = e; \
        sum += e; \
    } \
    red[lid] = sum; \
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE); \
    for (int half_n = lsize / 2; half_n > 0; half_n /= 2) { \
        if (lid < half_n) red[lid] += red[lid + half_n]; \
        barrier(CLK_LOCAL_MEM_FENCE); \
    } \
    const float inv = ATT_INV(red[0]); \
    __global float *o = out + ((size_t)t * n_head + h) * head_dim; \
    for (int d = lid; d < head_dim; d += lsize) { \
        float acc = 0.0f; \
        for (int j = 0; j <= p; j++) { \
            const size_t slot = (size_t)table[j / block_tokens] * block_tokens + j % block_tokens; \
            acc += (sc[j] * inv) * LOAD(vc + slot * row_elems + (size_t)kvh * head_dim, d); \
        } \
        o[d] = acc; \
    } \
}

ATTENTION_KERNEL(attention_f32, float, LOAD_F32)
ATTENTION_KERNEL(attention_f16, half, LOAD_F16)

/*
 * attention.cl -- the KV cache of offloaded layers and causal attention
 * over it (Vaswani et al. 2017, eq. 1), with grouped-query heads.
 *
 * Cache rows are positions; a row holds n_head_kv heads of head_dim
 * elements (F32, or F16 rounded to nearest even), as in src/kv_cache.h.
 *
 * One work-group per (query head, token).  The keys up to the token's own
 * position are taken in chunks of one key per item; the softmax runs
 * online (Milakov and Gimelshein 2018): a running maximum m, the running
 * sum l of exp(s - m), and the items' output elements rescaled whenever m
 * grows.  Every sum is taken in the same order on every run.
 */
#define ATT_DIMS_PER_ITEM 8

/* Row t of src (row_elems floats) into the cache row of position pos[t];
 * n = tokens * row_elems items. */
__kernel void kv_store_f32(__global const float *src, __global float *cache,
                           __global const int *pos, int row_elems, int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const int t = i / row_elems, e = i % row_elems;
    cache[(size_t)pos[t] * row_elems + e] = src[i];
}

__kernel void kv_store_f16(__global const float *src, __global half *cache,
                           __global const int *pos, int row_elems, int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const int t = i / row_elems, e = i % row_elems;
    vstore_half_rte(src[i], (size_t)pos[t] * row_elems + e, cache);
}

#define LOAD_F32(p, i) ((p)[i])
#define LOAD_F16(p, i) vload_half((i), (p))

#define ATTENTION_KERNEL(NAME, CT, LOAD) \
__kernel void NAME(__global const float *q, __global const CT *kc, __global const CT *vc, \
                   __global const int *pos, __global float *out, int n_head, int n_head_kv, \
                   int head_dim, float scale, __local float *qs, __local float *sc) \
{ \
    const int h = get_group_id(0), t = get_group_id(1); \
    const int lid = get_local_id(0), lsize = get_local_size(0); \
    const int kvh = h / (n_head / n_head_kv); \
    const size_t row_elems = (size_t)n_head_kv * head_dim; \
    const int p = pos[t]; \
    __global const float *qh = q + ((size_t)t * n_head + h) * head_dim; \
    for (int d = lid; d < head_dim; d += lsize) qs[d] = qh[d]; \
    barrier(CLK_LOCAL_MEM_FENCE); \
    float m = -INFINITY, l = 0.0f; \
    float acc[ATT_DIMS_PER_ITEM]; \
    for (int k = 0; k < ATT_DIMS_PER_ITEM; k++) acc[k] = 0.0f; \
    for (int c0 = 0; c0 <= p; c0 += lsize) { \
        const int j = c0 + lid; \
        float s = -INFINITY; \
        if (j <= p) { \
            __global const CT *kr = kc + (size_t)j * row_elems + (size_t)kvh * head_dim; \
            float dot = 0.0f; \
            for (int d = 0; d < head_dim; d++) dot += qs[d] * LOAD(kr, d); \
            s = dot * scale; \
        } \
        sc[lid] = s; \
        barrier(CLK_LOCAL_MEM_FENCE); \
        float m_new = m; \
        for (int jj = 0; jj < lsize; jj++) m_new = fmax(m_new, sc[jj]); \
        barrier(CLK_LOCAL_MEM_FENCE); \
        sc[lid] = j <= p ? exp(s - m_new) : 0.0f; \
        barrier(CLK_LOCAL_MEM_FENCE); \
        const float corr = exp(m - m_new); \
        float chunk_sum = 0.0f; \
        for (int jj = 0; jj < lsize; jj++) chunk_sum += sc[jj]; \
        l = l * corr + chunk_sum; \
        const int n_j = min(lsize, p + 1 - c0); \
        for (int k = 0; k < ATT_DIMS_PER_ITEM; k++) { \
            const int d = lid + k * lsize; \
            if (d < head_dim) { \
                float a = acc[k] * corr; \
                for (int jj = 0; jj < n_j; jj++) \
                    a += sc[jj] * LOAD(vc + (size_t)(c0 + jj) * row_elems + (size_t)kvh * head_dim, d); \
                acc[k] = a; \
            } \
        } \
        m = m_new; \
        barrier(CLK_LOCAL_MEM_FENCE); \
    } \
    __global float *o = out + ((size_t)t * n_head + h) * head_dim; \
    for (int k = 0; k < ATT_DIMS_PER_ITEM; k++) { \
        const int d = lid + k * lsize; \
        if (d < head_dim) o[d] = acc[k] / l; \
    } \
}

ATTENTION_KERNEL(attention_f32, float, LOAD_F32)
ATTENTION_KERNEL(attention_f16, half, LOAD_F16)

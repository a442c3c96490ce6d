/*
 * matmul.cl -- products of a weight matrix (rows in a GGUF block format,
 * read through dequant.cl) with activation rows:
 *
 *   y[t][r] = sum_k w[r][k] * x[t][k]
 *
 * For every weight type three kernels:
 *   gemv_<type>     decode and small batches: one work-group per (weight
 *                   row, token), its items striding over the row's
 *                   32-element units, then a fixed-order group sum;
 *   gemm_<type>     prefill: 16 x 16 output tiles, weights decoded once
 *                   per tile into local memory (GEMM_UNITS units deep);
 *   dequant_<type>  rows r0 .. r0 + n_rows - 1 expanded to floats, for a
 *                   BLAS GEMM on the expanded tile (one item per unit).
 * Activations stay in float: the only rounding of the weights is their
 * format's own.
 */

#define GEMM_TILE 16
#define GEMM_UNITS 4

#define MATMUL_KERNELS(T) \
__kernel void gemv_##T(__global const uchar *w, uint row_bytes, int n_in, int n_out, \
                       __global const float *x, __global float *y, __local float *scratch) \
{ \
    const int r = get_group_id(0), t = get_global_id(1); \
    const uint lid = get_local_id(0), lsize = get_local_size(0); \
    row_ptr row = w + (size_t)r * row_bytes; \
    __global const float *xt = x + (size_t)t * n_in; \
    const uint n_units = (n_in + 31) / 32; \
    float sum = 0.0f; \
    for (uint u = lid; u < n_units; u += lsize) { \
        float v[32]; \
        deq32_##T(row, u, n_in, v); \
        const int n = min(32, n_in - (int)(32 * u)); \
        for (int j = 0; j < n; j++) sum += v[j] * xt[32 * u + j]; \
    } \
    sum = group_sum(sum, scratch); \
    if (lid == 0) y[(size_t)t * n_out + r] = sum; \
} \
\
__kernel __attribute__((reqd_work_group_size(GEMM_TILE, GEMM_TILE, 1))) \
void gemm_##T(__global const uchar *w, uint row_bytes, int n_in, int n_out, \
              __global const float *x, __global float *y, int n_tok) \
{ \
    __local float ws[GEMM_TILE][GEMM_UNITS * 32 + 1]; \
    __local float xs[GEMM_TILE][GEMM_UNITS * 32 + 1]; \
    const int lr = get_local_id(0), lt = get_local_id(1); \
    const int r0 = get_group_id(0) * GEMM_TILE, t0 = get_group_id(1) * GEMM_TILE; \
    const int item = lt * GEMM_TILE + lr; \
    const uint n_units = (n_in + 31) / 32; \
    float acc = 0.0f; \
    for (uint u0 = 0; u0 < n_units; u0 += GEMM_UNITS) { \
        /* items 0 .. TILE * UNITS - 1 each decode one unit of one row */ \
        if (item < GEMM_TILE * GEMM_UNITS) { \
            const int rr = item % GEMM_TILE, du = item / GEMM_TILE; \
            const uint u = u0 + du; \
            float v[32]; \
            if (r0 + rr < n_out && u < n_units) \
                deq32_##T(w + (size_t)(r0 + rr) * row_bytes, u, n_in, v); \
            else \
                for (int j = 0; j < 32; j++) v[j] = 0.0f; \
            for (int j = 0; j < 32; j++) ws[rr][32 * du + j] = v[j]; \
        } \
        /* every item loads part of the activation tile */ \
        const int t = t0 + lt; \
        for (int j = lr; j < GEMM_UNITS * 32; j += GEMM_TILE) { \
            const int k = 32 * (int)u0 + j; \
            xs[lt][j] = t < n_tok && k < n_in ? x[(size_t)t * n_in + k] : 0.0f; \
        } \
        barrier(CLK_LOCAL_MEM_FENCE); \
        for (int j = 0; j < GEMM_UNITS * 32; j++) acc += xs[lt][j] * ws[lr][j]; \
        barrier(CLK_LOCAL_MEM_FENCE); \
    } \
    const int r = r0 + lr, t = t0 + lt; \
    if (r < n_out && t < n_tok) y[(size_t)t * n_out + r] = acc; \
} \
\
__kernel void dequant_##T(__global const uchar *w, uint row_bytes, int n_in, int row0, \
                          int n_rows, __global float *out) \
{ \
    const int n_units = (n_in + 31) / 32; \
    const uint u = get_global_id(0) % n_units; \
    const int r = get_global_id(0) / n_units; \
    if (r >= n_rows) return; \
    float v[32]; \
    deq32_##T(w + (size_t)(row0 + r) * row_bytes, u, n_in, v); \
    const int n = min(32, n_in - (int)(32 * u)); \
    __global float *o = out + (size_t)r * n_in + 32 * u; \
    for (int j = 0; j < n; j++) o[j] = v[j]; \
}

MATMUL_KERNELS(f32)
MATMUL_KERNELS(f16)
MATMUL_KERNELS(bf16)
MATMUL_KERNELS(q4_0)
MATMUL_KERNELS(q4_1)
MATMUL_KERNELS(q5_0)
MATMUL_KERNELS(q5_1)
MATMUL_KERNELS(q8_0)
MATMUL_KERNELS(q2_k)
MATMUL_KERNELS(q3_k)
MATMUL_KERNELS(q4_k)
MATMUL_KERNELS(q5_k)
MATMUL_KERNELS(q6_k)

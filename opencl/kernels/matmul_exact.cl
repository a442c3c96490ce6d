/*
 * matmul_exact.cl -- products of quantized weights with activations in
 * their CPU activation format (Q8_0, Q8_1, Q8_K quants from
 * activations.cl), computed exactly as the CPU's kernels compute them, so
 * that device and CPU give bit-identical results (simd/kernels.h, the
 * summation order of the integer formats):
 *
 *   block i of the row contributes c_i = (dx dw) * S1 + (dx mw) * S2,
 *     S1 = sum over sub-blocks s of sc_s * sum_{e in s} w_e x_e  (integers)
 *     S2 = sum over sub-blocks s of mn_s * sum_{e in s} x_e      (integers)
 *   with the weight's integer quants w_e (offsets applied), sub-block
 *   scales sc_s and mins mn_s, its float scale dw and min factor mw
 *   (+m for Q4_1/Q5_1, -dmin for Q2_K/Q4_K/Q5_K, 0 otherwise);
 *   c_i goes to partial sum i % 8, and the partials are totalled as
 *   ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7)).
 *
 * Integer sums are exact in any order; only the float steps above are
 * ordered.  qdec32_<type>(row, u, ...) decodes unit u (32 elements) of a
 * row into those integers, from the layouts described in dequant.cl; the
 * sub-block scale and min are given per half unit (16 elements).
 *
 *   exact_gemv_<type>  decode: 8 items per weight row, one per partial
 *   exact_gemm_<type>  prefill: one item per (row, token)
 */

void qdec32_q4_0(row_ptr row, uint u, int *w, int *sc, int *mn, float *dw, float *mw)
{
    row_ptr b = row + 18 * u;
    for (int j = 0; j < 16; j++) {
        w[j] = (b[2 + j] & 15) - 8;
        w[j + 16] = (b[2 + j] >> 4) - 8;
    }
    sc[0] = sc[1] = 1;
    mn[0] = mn[1] = 0;
    *dw = load_half(b);
    *mw = 0.0f;
}

void qdec32_q4_1(row_ptr row, uint u, int *w, int *sc, int *mn, float *dw, float *mw)
{
    row_ptr b = row + 20 * u;
    for (int j = 0; j < 16; j++) {
        w[j] = b[4 + j] & 15;
        w[j + 16] = b[4 + j] >> 4;
    }
    sc[0] = sc[1] = 1;
    mn[0] = mn[1] = 1;
    *dw = load_half(b);
    *mw = load_half(b + 2);
}

void qdec32_q5_0(row_ptr row, uint u, int *w, int *sc, int *mn, float *dw, float *mw)
{
    row_ptr b = row + 22 * u;
    const uint qh = load_qh32(b + 2);
    for (int j = 0; j < 16; j++) {
        w[j] = ((b[6 + j] & 15) | (int)((qh >> j) & 1) << 4) - 16;
        w[j + 16] = ((b[6 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4) - 16;
    }
    sc[0] = sc[1] = 1;
    mn[0] = mn[1] = 0;
    *dw = load_half(b);
    *mw = 0.0f;
}

void qdec32_q5_1(row_ptr row, uint u, int *w, int *sc, int *mn, float *dw, float *mw)
{
    row_ptr b = row + 24 * u;
    const uint qh = load_qh32(b + 4);
    for (int j = 0; j < 16; j++) {
        w[j] = (b[8 + j] & 15) | (int)((qh >> j) & 1) << 4;
        w[j + 16] = (b[8 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
    }
    sc[0] = sc[1] = 1;
    mn[0] = mn[1] = 1;
    *dw = load_half(b);
    *mw = load_half(b + 2);
}

void qdec32_q8_0(row_ptr row, uint u, int *w, int *sc, int *mn, float *dw, float *mw)
{
    row_ptr b = row + 34 * u;
    __global const char *q = (__global const char *)(b + 2);
    for (int j = 0; j < 32; j++) w[j] = q[j];
    sc[0] = sc[1] = 1;
    mn[0] = mn[1] = 0;
    *dw = load_half(b);
    *mw = 0.0f;
}

void qdec32_q2_k(row_ptr row, uint u, int *w, int *sc, int *mn, float *dw, float *mw)
{
    row_ptr b = row + 84 * (u / 8);
    const uint v = u % 8, c = v / 4, k = v % 4;
    for (int h = 0; h < 2; h++) {
        const uint sub = 8 * c + 2 * k + h;
        row_ptr q = b + 16 + 32 * c + 16 * h;
        for (int l = 0; l < 16; l++) w[16 * h + l] = (q[l] >> (2 * k)) & 3;
        sc[h] = b[sub] & 15;
        mn[h] = b[sub] >> 4;
    }
    *dw = load_half(b + 80);
    *mw = -load_half(b + 82);
}

void qdec32_q3_k(row_ptr row, uint u, int *w, int *sc, int *mn, float *dw, float *mw)
{
    row_ptr b = row + 110 * (u / 8);
    const uint v = u % 8, c = v / 4, k = v % 4;
    row_ptr scales = b + 96;
    for (int h = 0; h < 2; h++) {
        const uint sub = 8 * c + 2 * k + h, bit = 4 * c + k;
        row_ptr q = b + 32 + 32 * c + 16 * h;
        row_ptr hm = b + 16 * h;
        for (int l = 0; l < 16; l++)
            w[16 * h + l] = ((q[l] >> (2 * k)) & 3) - 4 + 4 * ((hm[l] >> bit) & 1);
        const int low = sub < 8 ? scales[sub] & 15 : scales[sub - 8] >> 4;
        const int high = (scales[8 + sub % 4] >> (2 * (sub / 4))) & 3;
        sc[h] = (low | high << 4) - 32;
        mn[h] = 0;
    }
    *dw = load_half(b + 108);
    *mw = 0.0f;
}

void qdec32_q4_k(row_ptr row, uint u, int *w, int *sc, int *mn, float *dw, float *mw)
{
    row_ptr b = row + 144 * (u / 8);
    const uint j = u % 8;
    row_ptr q = b + 16 + 32 * (j / 2);
    const uint shift = 4 * (j % 2);
    for (int l = 0; l < 32; l++) w[l] = (q[l] >> shift) & 15;
    int s, m;
    q4k_scale_min(b + 4, j, &s, &m);
    sc[0] = sc[1] = s;
    mn[0] = mn[1] = m;
    *dw = load_half(b);
    *mw = -load_half(b + 2);
}

void qdec32_q5_k(row_ptr row, uint u, int *w, int *sc, int *mn, float *dw, float *mw)
{
    row_ptr b = row + 176 * (u / 8);
    const uint j = u % 8;
    row_ptr qh = b + 16;
    row_ptr q = b + 48 + 32 * (j / 2);
    const uint shift = 4 * (j % 2);
    for (int l = 0; l < 32; l++) w[l] = ((q[l] >> shift) & 15) | ((qh[l] >> j) & 1) << 4;
    int s, m;
    q4k_scale_min(b + 4, j, &s, &m);
    sc[0] = sc[1] = s;
    mn[0] = mn[1] = m;
    *dw = load_half(b);
    *mw = -load_half(b + 2);
}

void qdec32_q6_k(row_ptr row, uint u, int *w, int *sc, int *mn, float *dw, float *mw)
{
    row_ptr b = row + 210 * (u / 8);
    const uint v = u % 8, c = v / 4, k = v % 4;
    __global const char *scales = (__global const char *)(b + 192);
    for (int h = 0; h < 2; h++) {
        const uint sub = 8 * c + 2 * k + h;
        row_ptr ql = b + 64 * c + 32 * (k % 2) + 16 * h;
        row_ptr qh = b + 128 + 32 * c + 16 * h;
        for (int l = 0; l < 16; l++)
            w[16 * h + l] = (((ql[l] >> (4 * (k / 2))) & 15) | ((qh[l] >> (2 * k)) & 3) << 4) - 32;
        sc[h] = scales[sub];
        mn[h] = 0;
    }
    *dw = load_half(b + 208);
    *mw = 0.0f;
}

#define EXACT_ROWS 8

/* UNITS: units of 32 per block (1 for the legacy formats, 8 for K). */
#define EXACT_KERNELS(T, UNITS) \
float contrib_##T(row_ptr row, int i, __global const char *xq, __global const float *xd) \
{ \
    int s1 = 0, s2 = 0; \
    float dw = 0.0f, mw = 0.0f; \
    for (int v = 0; v < UNITS; v++) { \
        int w[32], sc[2], mn[2]; \
        const uint u = (uint)(i * UNITS + v); \
        qdec32_##T(row, u, w, sc, mn, &dw, &mw); \
        __global const char *x = xq + 32 * (size_t)u; \
        for (int h = 0; h < 2; h++) { \
            int sw = 0, sx = 0; \
            for (int e = 16 * h; e < 16 * h + 16; e++) { \
                sw += w[e] * x[e]; \
                sx += x[e]; \
            } \
            s1 += sc[h] * sw; \
            s2 += mn[h] * sx; \
        } \
    } \
    const float dx = xd[i]; \
    return (dx * dw) * (float)s1 + (dx * mw) * (float)s2; \
} \
\
__kernel __attribute__((reqd_work_group_size(8, EXACT_ROWS, 1))) \
void exact_gemv_##T(__global const uchar *w, uint row_bytes, int n_in, int n_out, \
                    __global const char *xq, __global const float *xd, __global float *y) \
{ \
    __local float part[EXACT_ROWS][8]; \
    const int lane = get_local_id(0), lr = get_local_id(1); \
    const int r = get_group_id(1) * EXACT_ROWS + lr, t = get_global_id(2); \
    const int n_blocks = n_in / (32 * UNITS); \
    float acc = 0.0f; \
    if (r < n_out) { \
        row_ptr row = w + (size_t)r * row_bytes; \
        for (int i = lane; i < n_blocks; i += 8) \
            acc += contrib_##T(row, i, xq + (size_t)t * n_in, xd + (size_t)t * n_blocks); \
    } \
    part[lr][lane] = acc; \
    barrier(CLK_LOCAL_MEM_FENCE); \
    if (lane == 0 && r < n_out) { \
        __local const float *p = part[lr]; \
        y[(size_t)t * n_out + r] = ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7])); \
    } \
} \
\
__kernel void exact_gemm_##T(__global const uchar *w, uint row_bytes, int n_in, int n_out, \
                             __global const char *xq, __global const float *xd, __global float *y, \
                             int n_tok) \
{ \
    const int r = get_global_id(0), t = get_global_id(1); \
    if (r >= n_out || t >= n_tok) return; \
    const int n_blocks = n_in / (32 * UNITS); \
    row_ptr row = w + (size_t)r * row_bytes; \
    float p[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}; \
    for (int i = 0; i < n_blocks; i++) \
        p[i % 8] += contrib_##T(row, i, xq + (size_t)t * n_in, xd + (size_t)t * n_blocks); \
    y[(size_t)t * n_out + r] = ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7])); \
}

EXACT_KERNELS(q4_0, 1)
EXACT_KERNELS(q4_1, 1)
EXACT_KERNELS(q5_0, 1)
EXACT_KERNELS(q5_1, 1)
EXACT_KERNELS(q8_0, 1)
EXACT_KERNELS(q2_k, 8)
EXACT_KERNELS(q3_k, 8)
EXACT_KERNELS(q4_k, 8)
EXACT_KERNELS(q5_k, 8)
EXACT_KERNELS(q6_k, 8)

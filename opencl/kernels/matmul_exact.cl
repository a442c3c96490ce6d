/*
 * matmul_exact.cl -- products of quantized weights with activations in
 * their CPU activation format (Q8_0, Q8_1, Q8_K quants from
 * activations.cl), computed exactly as the CPU's kernels compute them, so
 * that device and CPU give bit-identical results (simd/kernels.h, the
 * summation order of the integer formats):
 *
 *   each block (32 elements, or a 256-element super-block) forms 8
 *   integer lane sums; lane k holds the products of the elements
 *   32c + 4k .. 32c + 4k + 3 of every 32-element chunk c, weighted by
 *   their integer sub-block scale, plus the terms that involve only the
 *   sums of 16 activations of chunk k (the mins of Q2_K, Q4_K and Q5_K,
 *   the biases of Q3_K and Q6_K);
 *   each lane sum goes into the lane's running float sum with a fused
 *   multiply-add by the block's float scale (dx dw), and for the formats
 *   with mins or offsets a second lane sum by (dx m) or -(dx dmin);
 *   the running sums are totalled as
 *     ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7)).
 *
 * Integer sums are exact in any order; only the float steps above are
 * ordered.  lane_<type>(blk, k, x, dx, ...) forms lane k of one block
 * from the layouts described in dequant.cl; the byte and shift of each
 * 32-element chunk are worked out once per lane and chunk, not per
 * element (per-element index arithmetic made these kernels an order of
 * magnitude slower on CPU devices).
 *
 *   exact_gemv_<type>  decode: 8 items per weight row, one per lane
 *   exact_gemm_<type>  prefill: one item per (row, token)
 *
 * The matrices the CPU reads packed follow the packed kernels' order
 * instead (packed_gemv_<type>, packed_gemm_<type>, at the end).
 */

/* The sum of the 16 activation quants s (Q8_K's bsums, formed here). */
int act_sum16(__global const char *x, int s)
{
    int sum = 0;
    for (int l = 0; l < 16; l++) sum += x[16 * s + l];
    return sum;
}

/* Legacy formats: lane k covers elements 4k .. 4k + 3 of the block.
 * *lq gets the quant products, *lm the second lane sum (the plain sum of
 * the activation quants for Q4_1/Q5_1), *s1 and *s2 their float scales. */

void lane_q4_0(row_ptr b, int k, __global const char *x, float dx, int *lq, int *lm, float *s1,
               float *s2)
{
    /* elements 0..15 are the low nibbles, 16..31 the high ones: the four
     * elements of a lane share one half, so the choice is made once */
    row_ptr qs = b + 2 + (k < 4 ? 4 * k : 4 * k - 16);
    const int shift = k < 4 ? 0 : 4;
    int sum = 0;
    for (int j = 0; j < 4; j++) sum += (((qs[j] >> shift) & 15) - 8) * x[4 * k + j];
    *lq = sum;
    *lm = 0;
    *s1 = load_half(b) * dx;
    *s2 = 0.0f;
}

void lane_q5_0(row_ptr b, int k, __global const char *x, float dx, int *lq, int *lm, float *s1,
               float *s2)
{
    const uint qh = load_qh32(b + 2) >> (4 * k);
    row_ptr qs = b + 6 + (k < 4 ? 4 * k : 4 * k - 16);
    const int shift = k < 4 ? 0 : 4;
    int sum = 0;
    for (int j = 0; j < 4; j++)
        sum += ((((qs[j] >> shift) & 15) | (int)((qh >> j) & 1) << 4) - 16) * x[4 * k + j];
    *lq = sum;
    *lm = 0;
    *s1 = load_half(b) * dx;
    *s2 = 0.0f;
}

void lane_q8_0(row_ptr b, int k, __global const char *x, float dx, int *lq, int *lm, float *s1,
               float *s2)
{
    __global const char *q = (__global const char *)(b + 2);
    int sum = 0;
    for (int e = 4 * k; e < 4 * k + 4; e++) sum += q[e] * x[e];
    *lq = sum;
    *lm = 0;
    *s1 = load_half(b) * dx;
    *s2 = 0.0f;
}

void lane_q4_1(row_ptr b, int k, __global const char *x, float dx, int *lq, int *lm, float *s1,
               float *s2)
{
    row_ptr qs = b + 4 + (k < 4 ? 4 * k : 4 * k - 16);
    const int shift = k < 4 ? 0 : 4;
    int sq = 0, sy = 0;
    for (int j = 0; j < 4; j++) {
        sq += ((qs[j] >> shift) & 15) * x[4 * k + j];
        sy += x[4 * k + j];
    }
    *lq = sq;
    *lm = sy;
    *s1 = load_half(b) * dx;
    *s2 = load_half(b + 2) * dx;
}

void lane_q5_1(row_ptr b, int k, __global const char *x, float dx, int *lq, int *lm, float *s1,
               float *s2)
{
    const uint qh = load_qh32(b + 4) >> (4 * k);
    row_ptr qs = b + 8 + (k < 4 ? 4 * k : 4 * k - 16);
    const int shift = k < 4 ? 0 : 4;
    int sq = 0, sy = 0;
    for (int j = 0; j < 4; j++) {
        sq += (((qs[j] >> shift) & 15) | (int)((qh >> j) & 1) << 4) * x[4 * k + j];
        sy += x[4 * k + j];
    }
    *lq = sq;
    *lm = sy;
    *s1 = load_half(b) * dx;
    *s2 = load_half(b + 2) * dx;
}

/* K-quants: lane k covers elements 32c + 4k + j (c < 8, j < 4) of the
 * super-block and the 16-sums 2k and 2k + 1. */

/* Q2_K, 84 bytes: scales[16] (scale low nibble, min high), qs[64], d, dmin. */
void lane_q2_k(row_ptr b, int k, __global const char *x, float dx, int *lq, int *lm, float *s1,
               float *s2)
{
    int sq = 0;
    for (int c = 0; c < 8; c++) {
        row_ptr qs = b + 16 + 32 * (c / 4) + 4 * k;
        const int shift = 2 * (c % 4), sc = b[2 * c + k / 4] & 15;
        __global const char *xc = x + 32 * c + 4 * k;
        for (int j = 0; j < 4; j++) sq += sc * ((qs[j] >> shift) & 3) * xc[j];
    }
    *lq = sq;
    *lm = (b[2 * k] >> 4) * act_sum16(x, 2 * k) + (b[2 * k + 1] >> 4) * act_sum16(x, 2 * k + 1);
    *s1 = dx * load_half(b + 80);
    *s2 = -(dx * load_half(b + 82));
}

/* The signed 6-bit scale of sub-block sub of Q3_K (12 packed bytes). */
int q3k_scale(row_ptr scales, int sub)
{
    const int low = sub < 8 ? scales[sub] & 15 : scales[sub - 8] >> 4;
    const int high = (scales[8 + sub % 4] >> (2 * (sub / 4))) & 3;
    return (low | high << 4) - 32;
}

/* Q3_K, 110 bytes: hmask[32], qs[64], scales[12], d. */
void lane_q3_k(row_ptr b, int k, __global const char *x, float dx, int *lq, int *lm, float *s1,
               float *s2)
{
    int sum = 0;
    for (int c = 0; c < 8; c++) {
        row_ptr qs = b + 32 + 32 * (c / 4) + 4 * k, hm = b + 4 * k;
        const int shift = 2 * (c % 4), sc = q3k_scale(b + 96, 2 * c + k / 4);
        __global const char *xc = x + 32 * c + 4 * k;
        for (int j = 0; j < 4; j++)
            sum += sc * (((qs[j] >> shift) & 3) + 4 * ((hm[j] >> c) & 1)) * xc[j];
    }
    for (int sub = 2 * k; sub < 2 * k + 2; sub++) sum -= 4 * q3k_scale(b + 96, sub) * act_sum16(x, sub);
    *lq = sum;
    *lm = 0;
    *s1 = dx * load_half(b + 108);
    *s2 = 0.0f;
}

/* Q4_K (144 bytes: d, dmin, scales[12], qs[128]) and Q5_K (176 bytes:
 * qh[32] before qs); high_bits is 0 for Q4_K. */
void lane_q45_k(row_ptr b, row_ptr qh, row_ptr qs, int k, __global const char *x, float dx,
                int *lq, int *lm, float *s1, float *s2)
{
    int sq = 0;
    for (int c = 0; c < 8; c++) {
        int sc, mn;
        q4k_scale_min(b + 4, (uint)c, &sc, &mn);
        row_ptr q4 = qs + 32 * (c / 2) + 4 * k;
        const int shift = 4 * (c % 2);
        __global const char *xc = x + 32 * c + 4 * k;
        for (int j = 0; j < 4; j++) {
            int q = (q4[j] >> shift) & 15;
            if (qh) q |= ((qh[4 * k + j] >> c) & 1) << 4;
            sq += sc * q * xc[j];
        }
    }
    int sc, mn;
    q4k_scale_min(b + 4, (uint)k, &sc, &mn);
    *lq = sq;
    *lm = mn * (act_sum16(x, 2 * k) + act_sum16(x, 2 * k + 1));
    *s1 = dx * load_half(b);
    *s2 = -(dx * load_half(b + 2));
}

void lane_q4_k(row_ptr b, int k, __global const char *x, float dx, int *lq, int *lm, float *s1,
               float *s2)
{
    lane_q45_k(b, 0, b + 16, k, x, dx, lq, lm, s1, s2);
}

void lane_q5_k(row_ptr b, int k, __global const char *x, float dx, int *lq, int *lm, float *s1,
               float *s2)
{
    lane_q45_k(b, b + 16, b + 48, k, x, dx, lq, lm, s1, s2);
}

/* Q6_K, 210 bytes: ql[128], qh[64], scales[16] (signed), d. */
void lane_q6_k(row_ptr b, int k, __global const char *x, float dx, int *lq, int *lm, float *s1,
               float *s2)
{
    __global const char *scales = (__global const char *)(b + 192);
    int sum = 0;
    for (int c = 0; c < 8; c++) {
        const int h = c / 4, s = c % 4;
        row_ptr ql = b + 64 * h + 32 * (s % 2) + 4 * k, qh = b + 128 + 32 * h + 4 * k;
        const int sc = scales[2 * c + k / 4], lshift = 4 * (s / 2), hshift = 2 * s;
        __global const char *xc = x + 32 * c + 4 * k;
        for (int j = 0; j < 4; j++)
            sum += sc * (((ql[j] >> lshift) & 15) | ((qh[j] >> hshift) & 3) << 4) * xc[j];
    }
    for (int sub = 2 * k; sub < 2 * k + 2; sub++) sum -= 32 * scales[sub] * act_sum16(x, sub);
    *lq = sum;
    *lm = 0;
    *s1 = dx * load_half(b + 208);
    *s2 = 0.0f;
}

#define EXACT_ROWS 8

/* Add lane k of block i to the running sum, as the CPU's lanes_add does;
 * TWO: the format has a second lane sum (mins or offsets). */
#define EXACT_KERNELS(T, BLOCK, BYTES, TWO) \
float lane_add_##T(float run, row_ptr row, int i, int k, __global const char *xq, \
                   __global const float *xd) \
{ \
    int lq, lm; \
    float s1, s2; \
    lane_##T(row + (size_t)BYTES * i, k, xq + (size_t)BLOCK * i, xd[i], &lq, &lm, &s1, &s2); \
    run = fma(s1, (float)lq, run); \
    if (TWO) run = fma(s2, (float)lm, run); \
    return run; \
} \
\
__kernel __attribute__((reqd_work_group_size(8, EXACT_ROWS, 1))) \
void exact_gemv_##T(__global const uchar *w, uint row_bytes, int n_in, int n_out, \
                    __global const char *xq, __global const float *xd, __global float *y) \
{ \
    __local float part[EXACT_ROWS][8]; \
    const int lane = get_local_id(0), lr = get_local_id(1); \
    const int r = get_group_id(1) * EXACT_ROWS + lr, t = get_global_id(2); \
    const int n_blocks = n_in / BLOCK; \
    float run = 0.0f; \
    if (r < n_out) { \
        row_ptr row = w + (size_t)r * row_bytes; \
        for (int i = 0; i < n_blocks; i++) \
            run = lane_add_##T(run, row, i, lane, xq + (size_t)t * n_in, xd + (size_t)t * n_blocks); \
    } \
    part[lr][lane] = run; \
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
    const int n_blocks = n_in / BLOCK; \
    row_ptr row = w + (size_t)r * row_bytes; \
    float p[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}; \
    for (int i = 0; i < n_blocks; i++) \
        for (int k = 0; k < 8; k++) \
            p[k] = lane_add_##T(p[k], row, i, k, xq + (size_t)t * n_in, xd + (size_t)t * n_blocks); \
    y[(size_t)t * n_out + r] = ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7])); \
}

EXACT_KERNELS(q4_0, 32, 18, 0)
EXACT_KERNELS(q4_1, 32, 20, 1)
EXACT_KERNELS(q5_0, 32, 22, 0)
EXACT_KERNELS(q5_1, 32, 24, 1)
EXACT_KERNELS(q8_0, 32, 34, 0)
EXACT_KERNELS(q2_k, 256, 84, 1)
EXACT_KERNELS(q3_k, 256, 110, 0)
EXACT_KERNELS(q4_k, 256, 144, 1)
EXACT_KERNELS(q5_k, 256, 176, 1)
EXACT_KERNELS(q6_k, 256, 210, 0)

/*
 * The CPU reads some matrices packed, and sums their products in another
 * order (simd/kernels.h, "Summation order of packed weights"): each block
 * (super-block) gives one exact integer, or two for the mins of Q2_K,
 * Q4_K and Q5_K, and they go into ONE running float sum per row with fused
 * multiply-adds, blocks in order,
 *     s = fma(dw dx, (float)q, s)  [then s = fma(-(dmin dx), (float)m, s)],
 * and the row's result is s.  A weight the CPU would read packed
 * (hearth_kernels_read_packed, decided at upload) uses these kernels
 * instead; its bytes stay in the GGUF block layout, since the order does
 * not depend on it.  A block's integers are its eight lane sums added
 * together, exact in any order.
 *
 *   packed_gemv_<type>  decode: 8 items per weight row, each forming the
 *                       integers of one block of every 8; the first item
 *                       adds them into the running sum in block order
 *   packed_gemm_<type>  prefill: one item per (row, token)
 */

#define PACKED_ORDER_KERNELS(T, BLOCK, BYTES, TWO) \
void block_ints_##T(row_ptr blk, __global const char *x, float dx, int *q, int *m, float *s1, \
                    float *s2) \
{ \
    int sq = 0, sm = 0; \
    for (int k = 0; k < 8; k++) { \
        int lq, lm; \
        lane_##T(blk, k, x, dx, &lq, &lm, s1, s2); \
        sq += lq; \
        sm += lm; \
    } \
    *q = sq; \
    *m = sm; \
} \
\
__kernel __attribute__((reqd_work_group_size(8, EXACT_ROWS, 1))) \
void packed_gemv_##T(__global const uchar *w, uint row_bytes, int n_in, int n_out, \
                     __global const char *xq, __global const float *xd, __global float *y) \
{ \
    __local int part_q[EXACT_ROWS][8], part_m[EXACT_ROWS][8]; \
    __local float part_s1[EXACT_ROWS][8], part_s2[EXACT_ROWS][8]; \
    const int item = get_local_id(0), lr = get_local_id(1); \
    const int r = get_group_id(1) * EXACT_ROWS + lr, t = get_global_id(2); \
    const int n_blocks = n_in / BLOCK; \
    row_ptr row = w + (size_t)r * row_bytes; \
    __global const char *xt = xq + (size_t)t * n_in; \
    __global const float *dt = xd + (size_t)t * n_blocks; \
    float run = 0.0f; \
    for (int i0 = 0; i0 < n_blocks; i0 += 8) { \
        const int i = i0 + item; \
        if (r < n_out && i < n_blocks) { \
            int q, m; \
            float s1, s2; \
            block_ints_##T(row + (size_t)BYTES * i, xt + (size_t)BLOCK * i, dt[i], &q, &m, &s1, &s2); \
            part_q[lr][item] = q; \
            part_m[lr][item] = m; \
            part_s1[lr][item] = s1; \
            part_s2[lr][item] = s2; \
        } \
        barrier(CLK_LOCAL_MEM_FENCE); \
        if (item == 0 && r < n_out) { \
            const int end = min(8, n_blocks - i0); \
            for (int j = 0; j < end; j++) { \
                run = fma(part_s1[lr][j], (float)part_q[lr][j], run); \
                if (TWO) run = fma(part_s2[lr][j], (float)part_m[lr][j], run); \
            } \
        } \
        barrier(CLK_LOCAL_MEM_FENCE); \
    } \
    if (item == 0 && r < n_out) y[(size_t)t * n_out + r] = run; \
} \
\
__kernel void packed_gemm_##T(__global const uchar *w, uint row_bytes, int n_in, int n_out, \
                              __global const char *xq, __global const float *xd, __global float *y, \
                              int n_tok) \
{ \
    const int r = get_global_id(0), t = get_global_id(1); \
    if (r >= n_out || t >= n_tok) return; \
    const int n_blocks = n_in / BLOCK; \
    row_ptr row = w + (size_t)r * row_bytes; \
    __global const char *xt = xq + (size_t)t * n_in; \
    __global const float *dt = xd + (size_t)t * n_blocks; \
    float run = 0.0f; \
    for (int i = 0; i < n_blocks; i++) { \
        int q, m; \
        float s1, s2; \
        block_ints_##T(row + (size_t)BYTES * i, xt + (size_t)BLOCK * i, dt[i], &q, &m, &s1, &s2); \
        run = fma(s1, (float)q, run); \
        if (TWO) run = fma(s2, (float)m, run); \
    } \
    y[(size_t)t * n_out + r] = run; \
}

PACKED_ORDER_KERNELS(q4_0, 32, 18, 0)
PACKED_ORDER_KERNELS(q5_0, 32, 22, 0)
PACKED_ORDER_KERNELS(q8_0, 32, 34, 0)
PACKED_ORDER_KERNELS(q2_k, 256, 84, 1)
PACKED_ORDER_KERNELS(q3_k, 256, 110, 0)
PACKED_ORDER_KERNELS(q4_k, 256, 144, 1)
PACKED_ORDER_KERNELS(q5_k, 256, 176, 1)
PACKED_ORDER_KERNELS(q6_k, 256, 210, 0)

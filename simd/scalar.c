/*
 * scalar.c -- the scalar reference kernels: plain C, every type, the twin
 * that each SIMD kernel is tested against.
 *
 * The integer formats follow the summation order defined in kernels.h
 * (block contributions in DOT_LANES partial sums, a fixed tree at the end),
 * which every SIMD path reproduces exactly.  Each kernel reads its weights
 * element by element, with the positions given in quant.c's format notes,
 * so it can be checked against the format description line by line.
 */
#include "internal.h"

#include "kernels.h"
#include "quant.h"

/* Contractions into fused multiply-adds would change the rounding of the
 * block contributions, which must be the same on every path. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* ---- float weights: activations stay F32 ---------------------------------- */

static void act_f32(const float *x, void *y, int64_t n)
{
    float *out = y;
    for (int64_t i = 0; i < n; i++) out[i] = x[i];
}

static void vec_dot_f32(int64_t n, float *s, const void *w, const void *x)
{
    const float *a = w, *b = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += a[i] * b[i];
    *s = sum;
}

static void vec_dot_f16(int64_t n, float *s, const void *w, const void *x)
{
    const hearth_f16 *a = w;
    const float *b = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += hearth_f16_to_f32(a[i]) * b[i];
    *s = sum;
}

static void vec_dot_bf16(int64_t n, float *s, const void *w, const void *x)
{
    const hearth_bf16 *a = w;
    const float *b = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += hearth_bf16_to_f32(a[i]) * b[i];
    *s = sum;
}

/* ---- activation formats ------------------------------------------------------ */

static void act_q8_0(const float *x, void *y, int64_t n)
{
    q8_0_quantize_row(x, y, n);
}

static void act_q8_1(const float *x, void *y, int64_t n)
{
    q8_1_quantize_row(x, y, n);
}

static void act_q8_k(const float *x, void *y, int64_t n)
{
    q8k_quantize_row(x, y, n);
}

/* ---- the summation order of kernels.h ------------------------------------------ */

static float lanes_total(const float lane[DOT_LANES])
{
    return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

/* ---- legacy formats (32 elements per block) ------------------------------------ */

/* Q4_0 x Q8_0: sum_j d (q_j - 8) * dy y_j = (d dy) * sum_j (q_j - 8) y_j */
static void vec_dot_q4_0(int64_t n, float *s, const void *w, const void *x)
{
    const block_q4_0 *a = w;
    const block_q8_0 *b = x;
    float lane[DOT_LANES] = {0};
    for (int64_t i = 0; i < n / QK4_0; i++) {
        int sum = 0;
        for (int j = 0; j < QK4_0 / 2; j++) {
            sum += ((a[i].qs[j] & 0x0f) - 8) * b[i].qs[j];
            sum += ((a[i].qs[j] >> 4) - 8) * b[i].qs[j + QK4_0 / 2];
        }
        const float scale = hearth_f16_to_f32(a[i].d) * hearth_f16_to_f32(b[i].d);
        lane[i % DOT_LANES] += scale * (float)sum;
    }
    *s = lanes_total(lane);
}

/* Q4_1 x Q8_1: sum_j (d q_j + m) dy y_j = (d dy) sum_j q_j y_j + (m dy) sum_j y_j.
 * sum_j y_j is taken from the quants rather than Q8_1's s, which is rounded
 * to a half: the result is then the dot product of the two rows exactly as
 * they dequantize. */
static void vec_dot_q4_1(int64_t n, float *s, const void *w, const void *x)
{
    const block_q4_1 *a = w;
    const block_q8_1 *b = x;
    float lane[DOT_LANES] = {0};
    for (int64_t i = 0; i < n / QK4_1; i++) {
        int sum = 0, ysum = 0;
        for (int j = 0; j < QK4_1 / 2; j++) {
            sum += (a[i].qs[j] & 0x0f) * b[i].qs[j] + (a[i].qs[j] >> 4) * b[i].qs[j + QK4_1 / 2];
            ysum += b[i].qs[j] + b[i].qs[j + QK4_1 / 2];
        }
        const float dy = hearth_f16_to_f32(b[i].d);
        const float scale = hearth_f16_to_f32(a[i].d) * dy;
        const float offset = hearth_f16_to_f32(a[i].m) * dy;
        lane[i % DOT_LANES] += scale * (float)sum + offset * (float)ysum;
    }
    *s = lanes_total(lane);
}

/* The 5-bit quant of element j (0..31) of a Q5_0/Q5_1 block. */
static inline int q5_quant(const uint8_t qs[16], const uint8_t qh[4], int j)
{
    const int nibble = j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
    return nibble | ((qh[j / 8] >> (j % 8)) & 1) << 4;
}

/* Q5_0 x Q8_0: (d dy) * sum_j (q_j - 16) y_j */
static void vec_dot_q5_0(int64_t n, float *s, const void *w, const void *x)
{
    const block_q5_0 *a = w;
    const block_q8_0 *b = x;
    float lane[DOT_LANES] = {0};
    for (int64_t i = 0; i < n / QK5_0; i++) {
        int sum = 0;
        for (int j = 0; j < QK5_0; j++) sum += (q5_quant(a[i].qs, a[i].qh, j) - 16) * b[i].qs[j];
        const float scale = hearth_f16_to_f32(a[i].d) * hearth_f16_to_f32(b[i].d);
        lane[i % DOT_LANES] += scale * (float)sum;
    }
    *s = lanes_total(lane);
}

/* Q5_1 x Q8_1: as Q4_1 with 5-bit quants. */
static void vec_dot_q5_1(int64_t n, float *s, const void *w, const void *x)
{
    const block_q5_1 *a = w;
    const block_q8_1 *b = x;
    float lane[DOT_LANES] = {0};
    for (int64_t i = 0; i < n / QK5_1; i++) {
        int sum = 0, ysum = 0;
        for (int j = 0; j < QK5_1; j++) {
            sum += q5_quant(a[i].qs, a[i].qh, j) * b[i].qs[j];
            ysum += b[i].qs[j];
        }
        const float dy = hearth_f16_to_f32(b[i].d);
        const float scale = hearth_f16_to_f32(a[i].d) * dy;
        const float offset = hearth_f16_to_f32(a[i].m) * dy;
        lane[i % DOT_LANES] += scale * (float)sum + offset * (float)ysum;
    }
    *s = lanes_total(lane);
}

/* Q8_0 x Q8_0: (d dy) * sum_j q_j y_j */
static void vec_dot_q8_0(int64_t n, float *s, const void *w, const void *x)
{
    const block_q8_0 *a = w;
    const block_q8_0 *b = x;
    float lane[DOT_LANES] = {0};
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int sum = 0;
        for (int j = 0; j < QK8_0; j++) sum += a[i].qs[j] * b[i].qs[j];
        const float scale = hearth_f16_to_f32(a[i].d) * hearth_f16_to_f32(b[i].d);
        lane[i % DOT_LANES] += scale * (float)sum;
    }
    *s = lanes_total(lane);
}

/* ---- K-quants x Q8_K (256-element super-blocks) ------------------------------------
 *
 * Within a super-block the sub-block sums are weighted by the integer
 * sub-block scales while still integers; the float scales multiply once
 * per super-block.  The mins of Q2_K, Q4_K and Q5_K multiply Q8_K's sums of
 * 16 activations (bsums). */

/* Q2_K: x_e = d sc_s q_e - dmin m_s, sub-block s = e / 16, so
 * dot = (dy d) sum_s sc_s sum_e q_e y_e - (dy dmin) sum_s m_s bsum_s. */
static void vec_dot_q2_k(int64_t n, float *s, const void *w, const void *x)
{
    const block_q2_K *a = w;
    const block_q8_K *b = x;
    float lane[DOT_LANES] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sum_q = 0, sum_m = 0;
        for (int sub = 0; sub < QK_K / 16; sub++) {
            int isum = 0;
            for (int e = 16 * sub; e < 16 * sub + 16; e++) {
                const int q = (a[i].qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
                isum += q * b[i].qs[e];
            }
            sum_q += (a[i].scales[sub] & 0x0f) * isum;
            sum_m += (a[i].scales[sub] >> 4) * b[i].bsums[sub];
        }
        const float scale = b[i].d * hearth_f16_to_f32(a[i].d);
        const float scale_min = b[i].d * hearth_f16_to_f32(a[i].dmin);
        lane[i % DOT_LANES] += scale * (float)sum_q - scale_min * (float)sum_m;
    }
    *s = lanes_total(lane);
}

/* Q3_K: x_e = d sc_s (q_e - 4 (1 - h_e)), so dot = (dy d) sum_s sc_s sum_e (...) y_e. */
static void vec_dot_q3_k(int64_t n, float *s, const void *w, const void *x)
{
    const block_q3_K *a = w;
    const block_q8_K *b = x;
    float lane[DOT_LANES] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t sc[16];
        q3k_unpack_scales(a[i].scales, sc);
        int sum_q = 0;
        for (int sub = 0; sub < QK_K / 16; sub++) {
            int isum = 0;
            for (int e = 16 * sub; e < 16 * sub + 16; e++) {
                const int low = (a[i].qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
                const int high = (a[i].hmask[e % 32] >> (e / 32)) & 1;
                isum += (low - 4 + 4 * high) * b[i].qs[e];
            }
            sum_q += sc[sub] * isum;
        }
        const float scale = b[i].d * hearth_f16_to_f32(a[i].d);
        lane[i % DOT_LANES] += scale * (float)sum_q;
    }
    *s = lanes_total(lane);
}

/* Q4_K and Q5_K: x_e = d sc_s q_e - dmin m_s, sub-block s = e / 32, so
 * dot = (dy d) sum_s sc_s sum_e q_e y_e - (dy dmin) sum_s m_s (bsum_2s + bsum_2s+1).
 * qh is NULL for Q4_K. */
static float q45k_block_dot(hearth_f16 d, hearth_f16 dmin, const uint8_t packed[K_SCALE_SIZE],
                            const uint8_t *qh, const uint8_t qs[QK_K / 2], const block_q8_K *y)
{
    uint8_t sc[8], mn[8];
    q4k_unpack_scales(packed, sc, mn);
    int sum_q = 0, sum_m = 0;
    for (int sub = 0; sub < 8; sub++) {
        int isum = 0;
        for (int e = 32 * sub; e < 32 * sub + 32; e++) {
            int q = (qs[32 * (e / 64) + e % 32] >> (4 * ((e / 32) % 2))) & 0x0f;
            if (qh) q |= ((qh[e % 32] >> (e / 32)) & 1) << 4;
            isum += q * y->qs[e];
        }
        sum_q += sc[sub] * isum;
        sum_m += mn[sub] * (y->bsums[2 * sub] + y->bsums[2 * sub + 1]);
    }
    const float scale = y->d * hearth_f16_to_f32(d);
    const float scale_min = y->d * hearth_f16_to_f32(dmin);
    return scale * (float)sum_q - scale_min * (float)sum_m;
}

static void vec_dot_q4_k(int64_t n, float *s, const void *w, const void *x)
{
    const block_q4_K *a = w;
    const block_q8_K *b = x;
    float lane[DOT_LANES] = {0};
    for (int64_t i = 0; i < n / QK_K; i++)
        lane[i % DOT_LANES] += q45k_block_dot(a[i].d, a[i].dmin, a[i].scales, NULL, a[i].qs, &b[i]);
    *s = lanes_total(lane);
}

static void vec_dot_q5_k(int64_t n, float *s, const void *w, const void *x)
{
    const block_q5_K *a = w;
    const block_q8_K *b = x;
    float lane[DOT_LANES] = {0};
    for (int64_t i = 0; i < n / QK_K; i++)
        lane[i % DOT_LANES] += q45k_block_dot(a[i].d, a[i].dmin, a[i].scales, a[i].qh, a[i].qs, &b[i]);
    *s = lanes_total(lane);
}

/* Q6_K: x_e = d sc_s (q_e - 32), sub-block s = e / 16, so
 * dot = (dy d) sum_s sc_s sum_e (q_e - 32) y_e. */
static void vec_dot_q6_k(int64_t n, float *s, const void *w, const void *x)
{
    const block_q6_K *a = w;
    const block_q8_K *b = x;
    float lane[DOT_LANES] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sum_q = 0;
        for (int sub = 0; sub < QK_K / 16; sub++) {
            int isum = 0;
            for (int e = 16 * sub; e < 16 * sub + 16; e++) {
                const int c = e / 128, k = (e % 128) / 32, l = e % 32;
                const int low = (a[i].ql[64 * c + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0x0f;
                const int high = (a[i].qh[32 * c + l] >> (2 * k)) & 3;
                isum += ((low | high << 4) - 32) * b[i].qs[e];
            }
            sum_q += a[i].scales[sub] * isum;
        }
        const float scale = b[i].d * hearth_f16_to_f32(a[i].d);
        lane[i % DOT_LANES] += scale * (float)sum_q;
    }
    *s = lanes_total(lane);
}

static const hearth_kernels scalar_kernels = {
    .name = "scalar",
    .act_type = {
        [HEARTH_TYPE_F32] = HEARTH_TYPE_F32,
        [HEARTH_TYPE_F16] = HEARTH_TYPE_F32,
        [HEARTH_TYPE_BF16] = HEARTH_TYPE_F32,
        [HEARTH_TYPE_Q4_0] = HEARTH_TYPE_Q8_0,
        [HEARTH_TYPE_Q4_1] = HEARTH_TYPE_Q8_1,
        [HEARTH_TYPE_Q5_0] = HEARTH_TYPE_Q8_0,
        [HEARTH_TYPE_Q5_1] = HEARTH_TYPE_Q8_1,
        [HEARTH_TYPE_Q8_0] = HEARTH_TYPE_Q8_0,
        [HEARTH_TYPE_Q2_K] = HEARTH_TYPE_Q8_K,
        [HEARTH_TYPE_Q3_K] = HEARTH_TYPE_Q8_K,
        [HEARTH_TYPE_Q4_K] = HEARTH_TYPE_Q8_K,
        [HEARTH_TYPE_Q5_K] = HEARTH_TYPE_Q8_K,
        [HEARTH_TYPE_Q6_K] = HEARTH_TYPE_Q8_K,
    },
    .act_convert = {
        [HEARTH_TYPE_F32] = act_f32,
        [HEARTH_TYPE_Q8_0] = act_q8_0,
        [HEARTH_TYPE_Q8_1] = act_q8_1,
        [HEARTH_TYPE_Q8_K] = act_q8_k,
    },
    .vec_dot = {
        [HEARTH_TYPE_F32] = vec_dot_f32,
        [HEARTH_TYPE_F16] = vec_dot_f16,
        [HEARTH_TYPE_BF16] = vec_dot_bf16,
        [HEARTH_TYPE_Q4_0] = vec_dot_q4_0,
        [HEARTH_TYPE_Q4_1] = vec_dot_q4_1,
        [HEARTH_TYPE_Q5_0] = vec_dot_q5_0,
        [HEARTH_TYPE_Q5_1] = vec_dot_q5_1,
        [HEARTH_TYPE_Q8_0] = vec_dot_q8_0,
        [HEARTH_TYPE_Q2_K] = vec_dot_q2_k,
        [HEARTH_TYPE_Q3_K] = vec_dot_q3_k,
        [HEARTH_TYPE_Q4_K] = vec_dot_q4_k,
        [HEARTH_TYPE_Q5_K] = vec_dot_q5_k,
        [HEARTH_TYPE_Q6_K] = vec_dot_q6_k,
    },
};

const hearth_kernels *hearth_kernels_scalar(void)
{
    return &scalar_kernels;
}

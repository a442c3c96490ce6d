/*
 * scalar.c -- the scalar reference kernels: plain C, every type, the twin
 * that each SIMD kernel is tested against.
 *
 * The integer formats follow the summation order defined in kernels.h
 * (integer lane sums per block, float running sums per lane, a fixed tree
 * at the end), which every SIMD path reproduces exactly.  Each kernel reads
 * its weights element by element, at the positions given in quant.c's
 * format notes, so it can be checked against the format line by line.
 */
#include "internal.h"

#include <math.h>
#include <string.h>

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

/* The lane of element e of a block: (e % 32) / 4. */
static inline int lane_of(int e)
{
    return (e % 32) / 4;
}

/* Add a block's integer lanes, weighted by scale, to the running sums. */
static inline void lanes_add(float run[DOT_LANES], float scale, const int32_t lane[DOT_LANES])
{
    for (int k = 0; k < DOT_LANES; k++) run[k] = fmaf(scale, (float)lane[k], run[k]);
}

static float lanes_total(const float run[DOT_LANES])
{
    return ((run[0] + run[4]) + (run[2] + run[6])) + ((run[1] + run[5]) + (run[3] + run[7]));
}

/* ---- legacy formats (32 elements per block) ------------------------------------ */

/* Q4_0 x Q8_0: sum_e d (q_e - 8) * dy y_e = (d dy) * sum_e (q_e - 8) y_e */
static void vec_dot_q4_0(int64_t n, float *s, const void *w, const void *x)
{
    const block_q4_0 *a = w;
    const block_q8_0 *b = x;
    float run[DOT_LANES] = {0};
    for (int64_t i = 0; i < n / QK4_0; i++) {
        int32_t lane[DOT_LANES] = {0};
        for (int e = 0; e < QK4_0; e++) {
            const int q = e < 16 ? a[i].qs[e] & 0x0f : a[i].qs[e - 16] >> 4;
            lane[lane_of(e)] += (q - 8) * b[i].qs[e];
        }
        lanes_add(run, hearth_f16_to_f32(a[i].d) * hearth_f16_to_f32(b[i].d), lane);
    }
    *s = lanes_total(run);
}

/* MXFP4 x Q8_0: (2^(e-128) dy) * sum_e v(q_e) y_e, v the doubled E2M1
 * values (quant.h) */
static void vec_dot_mxfp4(int64_t n, float *s, const void *w, const void *x)
{
    const block_mxfp4 *a = w;
    const block_q8_0 *b = x;
    float run[DOT_LANES] = {0};
    for (int64_t i = 0; i < n / QK_MXFP4; i++) {
        int32_t lane[DOT_LANES] = {0};
        for (int e = 0; e < QK_MXFP4; e++) {
            const int q = e < 16 ? a[i].qs[e] & 0x0f : a[i].qs[e - 16] >> 4;
            lane[lane_of(e)] += mxfp4_values[q] * b[i].qs[e];
        }
        lanes_add(run, mxfp4_scale(a[i].e) * hearth_f16_to_f32(b[i].d), lane);
    }
    *s = lanes_total(run);
}

/* The 5-bit quant of element e (0..31) of a Q5_0/Q5_1 block. */
static inline int q5_quant(const uint8_t qs[16], const uint8_t qh[4], int e)
{
    const int nibble = e < 16 ? qs[e] & 0x0f : qs[e - 16] >> 4;
    return nibble | ((qh[e / 8] >> (e % 8)) & 1) << 4;
}

/* Q5_0 x Q8_0: (d dy) * sum_e (q_e - 16) y_e */
static void vec_dot_q5_0(int64_t n, float *s, const void *w, const void *x)
{
    const block_q5_0 *a = w;
    const block_q8_0 *b = x;
    float run[DOT_LANES] = {0};
    for (int64_t i = 0; i < n / QK5_0; i++) {
        int32_t lane[DOT_LANES] = {0};
        for (int e = 0; e < QK5_0; e++) lane[lane_of(e)] += (q5_quant(a[i].qs, a[i].qh, e) - 16) * b[i].qs[e];
        lanes_add(run, hearth_f16_to_f32(a[i].d) * hearth_f16_to_f32(b[i].d), lane);
    }
    *s = lanes_total(run);
}

/* Q8_0 x Q8_0: (d dy) * sum_e q_e y_e */
static void vec_dot_q8_0(int64_t n, float *s, const void *w, const void *x)
{
    const block_q8_0 *a = w;
    const block_q8_0 *b = x;
    float run[DOT_LANES] = {0};
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int32_t lane[DOT_LANES] = {0};
        for (int e = 0; e < QK8_0; e++) lane[lane_of(e)] += a[i].qs[e] * b[i].qs[e];
        lanes_add(run, hearth_f16_to_f32(a[i].d) * hearth_f16_to_f32(b[i].d), lane);
    }
    *s = lanes_total(run);
}

/* Q4_1 and Q5_1 x Q8_1: sum_e (d q_e + m) dy y_e
 *   = (d dy) sum_e q_e y_e + (m dy) sum_e y_e.
 * A second set of lanes holds the sums of y, which are taken from the
 * quants rather than from Q8_1's s (rounded to a half): the result is the
 * dot product of the two rows exactly as they dequantize.  Each lane adds
 * its q-part, then its m-part.  bits is 4 or 5; qh is NULL for Q4_1. */
static void q_1_block_dot(hearth_f16 d, hearth_f16 m, const uint8_t *qh, const uint8_t qs[16],
                          const block_q8_1 *y, float run[DOT_LANES])
{
    int32_t lane_q[DOT_LANES] = {0}, lane_y[DOT_LANES] = {0};
    for (int e = 0; e < 32; e++) {
        const int q = qh ? q5_quant(qs, qh, e) : e < 16 ? qs[e] & 0x0f : qs[e - 16] >> 4;
        lane_q[lane_of(e)] += q * y->qs[e];
        lane_y[lane_of(e)] += y->qs[e];
    }
    const float dy = hearth_f16_to_f32(y->d);
    lanes_add(run, hearth_f16_to_f32(d) * dy, lane_q);
    lanes_add(run, hearth_f16_to_f32(m) * dy, lane_y);
}

static void vec_dot_q4_1(int64_t n, float *s, const void *w, const void *x)
{
    const block_q4_1 *a = w;
    const block_q8_1 *b = x;
    float run[DOT_LANES] = {0};
    for (int64_t i = 0; i < n / QK4_1; i++) q_1_block_dot(a[i].d, a[i].m, NULL, a[i].qs, &b[i], run);
    *s = lanes_total(run);
}

static void vec_dot_q5_1(int64_t n, float *s, const void *w, const void *x)
{
    const block_q5_1 *a = w;
    const block_q8_1 *b = x;
    float run[DOT_LANES] = {0};
    for (int64_t i = 0; i < n / QK5_1; i++) q_1_block_dot(a[i].d, a[i].m, a[i].qh, a[i].qs, &b[i], run);
    *s = lanes_total(run);
}

/* ---- K-quants x Q8_K (256-element super-blocks) ------------------------------------
 *
 * Within a super-block the lanes gather the products of all eight 32-element
 * chunks, each weighted by its integer sub-block scale; the float scales
 * multiply once per super-block.  Terms that involve only the sums of 16
 * activations (Q8_K's bsums) -- the mins of Q2_K, Q4_K and Q5_K, the biases
 * of Q3_K and Q6_K -- go to lane k for the bsums 2k and 2k + 1 (the pairs
 * a 16-bit multiply-add forms). */

/* Q2_K: x_e = d sc_s q_e - dmin m_s, sub-block s = e / 16:
 *   lane_q[k] = sum_e sc_s q_e y_e over the lane's elements,
 *   lane_m[k] = m_2k bsum_2k + m_2k+1 bsum_2k+1,
 * added as (dy d) lane_q - (dy dmin) lane_m. */
static void vec_dot_q2_k(int64_t n, float *s, const void *w, const void *x)
{
    const block_q2_K *a = w;
    const block_q8_K *b = x;
    float run[DOT_LANES] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        int32_t lane_q[DOT_LANES] = {0}, lane_m[DOT_LANES] = {0};
        for (int e = 0; e < QK_K; e++) {
            const int q = (a[i].qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            lane_q[lane_of(e)] += (a[i].scales[e / 16] & 0x0f) * q * b[i].qs[e];
        }
        for (int sub = 0; sub < QK_K / 16; sub++) lane_m[sub / 2] += (a[i].scales[sub] >> 4) * b[i].bsums[sub];
        lanes_add(run, b[i].d * hearth_f16_to_f32(a[i].d), lane_q);
        lanes_add(run, -(b[i].d * hearth_f16_to_f32(a[i].dmin)), lane_m);
    }
    *s = lanes_total(run);
}

/* Q3_K: x_e = d sc_s (u_e - 4), u_e = low 2 bits + 4 * hmask bit, so
 *   lane[k] = sum_e sc_s u_e y_e - 4 (sc_2k bsum_2k + sc_2k+1 bsum_2k+1),
 * scaled by (dy d). */
static void vec_dot_q3_k(int64_t n, float *s, const void *w, const void *x)
{
    const block_q3_K *a = w;
    const block_q8_K *b = x;
    float run[DOT_LANES] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t sc[16];
        q3k_unpack_scales(a[i].scales, sc);
        int32_t lane[DOT_LANES] = {0};
        for (int e = 0; e < QK_K; e++) {
            const int low = (a[i].qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            const int high = (a[i].hmask[e % 32] >> (e / 32)) & 1;
            lane[lane_of(e)] += sc[e / 16] * (low + 4 * high) * b[i].qs[e];
        }
        for (int sub = 0; sub < QK_K / 16; sub++) lane[sub / 2] -= 4 * sc[sub] * b[i].bsums[sub];
        lanes_add(run, b[i].d * hearth_f16_to_f32(a[i].d), lane);
    }
    *s = lanes_total(run);
}

/* Q4_K and Q5_K: x_e = d sc_s q_e - dmin m_s, sub-block s = e / 32 (one
 * chunk), so
 *   lane_q[k] = sum_e sc_s q_e y_e,  lane_m[k] = m_k (bsum_2k + bsum_2k+1),
 * added as (dy d) lane_q - (dy dmin) lane_m.  qh is NULL for Q4_K. */
static void q45k_block_dot(hearth_f16 d, hearth_f16 dmin, const uint8_t packed[K_SCALE_SIZE],
                           const uint8_t *qh, const uint8_t qs[QK_K / 2], const block_q8_K *y,
                           float run[DOT_LANES])
{
    uint8_t sc[8], mn[8];
    q4k_unpack_scales(packed, sc, mn);
    int32_t lane_q[DOT_LANES] = {0}, lane_m[DOT_LANES] = {0};
    for (int e = 0; e < QK_K; e++) {
        int q = (qs[32 * (e / 64) + e % 32] >> (4 * ((e / 32) % 2))) & 0x0f;
        if (qh) q |= ((qh[e % 32] >> (e / 32)) & 1) << 4;
        lane_q[lane_of(e)] += sc[e / 32] * q * y->qs[e];
    }
    for (int k = 0; k < DOT_LANES; k++) lane_m[k] = mn[k] * (y->bsums[2 * k] + y->bsums[2 * k + 1]);
    lanes_add(run, y->d * hearth_f16_to_f32(d), lane_q);
    lanes_add(run, -(y->d * hearth_f16_to_f32(dmin)), lane_m);
}

static void vec_dot_q4_k(int64_t n, float *s, const void *w, const void *x)
{
    const block_q4_K *a = w;
    const block_q8_K *b = x;
    float run[DOT_LANES] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) q45k_block_dot(a[i].d, a[i].dmin, a[i].scales, NULL, a[i].qs, &b[i], run);
    *s = lanes_total(run);
}

static void vec_dot_q5_k(int64_t n, float *s, const void *w, const void *x)
{
    const block_q5_K *a = w;
    const block_q8_K *b = x;
    float run[DOT_LANES] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) q45k_block_dot(a[i].d, a[i].dmin, a[i].scales, a[i].qh, a[i].qs, &b[i], run);
    *s = lanes_total(run);
}

/* Q6_K: x_e = d sc_s (u_e - 32), u_e the 6-bit quant, sub-block s = e / 16:
 *   lane[k] = sum_e sc_s u_e y_e - 32 (sc_2k bsum_2k + sc_2k+1 bsum_2k+1),
 * scaled by (dy d). */
static void vec_dot_q6_k(int64_t n, float *s, const void *w, const void *x)
{
    const block_q6_K *a = w;
    const block_q8_K *b = x;
    float run[DOT_LANES] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        int32_t lane[DOT_LANES] = {0};
        for (int e = 0; e < QK_K; e++) {
            const int c = e / 128, k = (e % 128) / 32, l = e % 32;
            const int low = (a[i].ql[64 * c + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0x0f;
            const int high = (a[i].qh[32 * c + l] >> (2 * k)) & 3;
            lane[lane_of(e)] += a[i].scales[e / 16] * (low | high << 4) * b[i].qs[e];
        }
        for (int sub = 0; sub < QK_K / 16; sub++) lane[sub / 2] -= 32 * a[i].scales[sub] * b[i].bsums[sub];
        lanes_add(run, b[i].d * hearth_f16_to_f32(a[i].d), lane);
    }
    *s = lanes_total(run);
}

/* ---- gemm: every dot product as vec_dot computes it ------------------------------- */

#define DEFINE_GEMM(type) \
    static void gemm_##type(int64_t n, int64_t n_rows, int64_t n_tok, const void *w, size_t w_stride, \
                            const void *x, size_t x_stride, float *y, int64_t y_stride) \
    { \
        for (int64_t t = 0; t < n_tok; t++) \
            for (int64_t r = 0; r < n_rows; r++) \
                vec_dot_##type(n, &y[t * y_stride + r], (const uint8_t *)w + (size_t)r * w_stride, \
                               (const uint8_t *)x + (size_t)t * x_stride); \
    }

DEFINE_GEMM(f32)
DEFINE_GEMM(f16)
DEFINE_GEMM(bf16)
DEFINE_GEMM(q4_0)
DEFINE_GEMM(q4_1)
DEFINE_GEMM(q5_0)
DEFINE_GEMM(q5_1)
DEFINE_GEMM(q8_0)
DEFINE_GEMM(mxfp4)
DEFINE_GEMM(q2_k)
DEFINE_GEMM(q3_k)
DEFINE_GEMM(q4_k)
DEFINE_GEMM(q5_k)
DEFINE_GEMM(q6_k)

/* ---- packed float weights (kernels.h): vec_dot's order, elements found in their chunks ---- */

/* Element i of row r of a packed group of gr rows of n elements. */
static inline float packed_float(hearth_type t, const uint8_t *grp, int64_t gr, int64_t n, int64_t r, int64_t i)
{
    const size_t e = hearth_float_packed_index(n, gr, r, i);
    if (t == HEARTH_TYPE_F32) {
        float v;
        memcpy(&v, grp + 4 * e, sizeof v);
        return v;
    }
    uint16_t h;
    memcpy(&h, grp + 2 * e, 2);
    return t == HEARTH_TYPE_F16 ? hearth_f16_to_f32(h) : hearth_bf16_to_f32(h);
}

static void gemm_packed_float(hearth_type t, int64_t n, int64_t n_rows, int64_t n_tok, const void *wp,
                              const void *x, size_t x_stride, float *y, int64_t y_stride)
{
    const size_t row_bytes = hearth_type_row_bytes(t, n);
    for (int64_t r0 = 0; r0 < n_rows;) {
        const int64_t gr = hearth_float_group_rows(n_rows, r0);
        const uint8_t *grp = (const uint8_t *)wp + (size_t)r0 * row_bytes;
        for (int64_t tok = 0; tok < n_tok; tok++) {
            const float *b = (const void *)((const uint8_t *)x + (size_t)tok * x_stride);
            for (int64_t r = 0; r < gr; r++) {
                float sum = 0.0f;
                for (int64_t i = 0; i < n; i++) sum += packed_float(t, grp, gr, n, r, i) * b[i];
                y[tok * y_stride + r0 + r] = sum;
            }
        }
        r0 += gr;
    }
}

#define DEFINE_GEMM_PACKED_FLOAT(name, type) \
    static void gemm_packed_##name(int64_t n, int64_t n_rows, int64_t n_tok, const void *wp, const void *x, \
                                   size_t x_stride, const int32_t *x_sums, float *y, int64_t y_stride) \
    { \
        (void)x_sums; \
        gemm_packed_float(type, n, n_rows, n_tok, wp, x, x_stride, y, y_stride); \
    }

DEFINE_GEMM_PACKED_FLOAT(f32, HEARTH_TYPE_F32)
DEFINE_GEMM_PACKED_FLOAT(f16, HEARTH_TYPE_F16)
DEFINE_GEMM_PACKED_FLOAT(bf16, HEARTH_TYPE_BF16)

/* ---- packed weights (kernels.h): one exact integer per block ----------------------- */

/* Byte b of row r's field at offset at of a packed block (every field
 * but the halves is stored in 4-byte pieces, rows interleaved). */
static inline uint8_t packed_byte(const uint8_t *blk, size_t at, int r, int b)
{
    return blk[at + (size_t)(b / 4) * 4 * PACK_ROWS + 4 * (size_t)r + (size_t)(b % 4)];
}

/* Half-float field of row r at offset at of a packed block, as a float. */
static inline float packed_half(const uint8_t *blk, size_t at, int r)
{
    hearth_f16 h;
    memcpy(&h, blk + at + 2 * (size_t)r, 2);
    return hearth_f16_to_f32(h);
}

/* Quant e (0..31) of row r of a packed Q4_0, Q5_0, Q8_0 or MXFP4 block,
 * as stored (the code, for MXFP4). */
static inline int packed_quant(hearth_type t, const uint8_t *blk, int r, int e)
{
    if (t == HEARTH_TYPE_Q8_0) return (int8_t)packed_byte(blk, 2 * PACK_ROWS, r, e);
    /* after the scales (and Q5_0's fifth bits) */
    const size_t at = t == HEARTH_TYPE_MXFP4 ? PACK_ROWS : t == HEARTH_TYPE_Q5_0 ? 6 * PACK_ROWS : 2 * PACK_ROWS;
    const uint8_t v = packed_byte(blk, at, r, e % 16); /* elements e and e + 16 share a byte */
    const int nibble = e < 16 ? v & 0x0f : v >> 4;
    if (t != HEARTH_TYPE_Q5_0) return nibble;
    return nibble | ((packed_byte(blk, 2 * PACK_ROWS, r, e / 8) >> (e % 8)) & 1) << 4;
}

/* The value of quant e of row r of a packed Q4_0, Q5_0, Q8_0 or MXFP4
 * block. */
static inline int packed_value(hearth_type t, const uint8_t *blk, int r, int e)
{
    const int q = packed_quant(t, blk, r, e);
    switch (t) {
    case HEARTH_TYPE_Q4_0: return q - 8;
    case HEARTH_TYPE_Q5_0: return q - 16;
    case HEARTH_TYPE_MXFP4: return mxfp4_values[q];
    default: return q;
    }
}

/* The weight scale of row r of a packed Q4_0, Q5_0, Q8_0 or MXFP4 block. */
static inline float packed_scale(hearth_type t, const uint8_t *blk, int r)
{
    return t == HEARTH_TYPE_MXFP4 ? mxfp4_scale(blk[r]) : packed_half(blk, 0, r);
}

static void gemm_packed(hearth_type t, int64_t n, int64_t n_rows, int64_t n_tok, const void *wp,
                        const void *x, size_t x_stride, float *y, int64_t y_stride)
{
    const int64_t nb = n / 32;
    const size_t pb = hearth_packed_bytes(t, PACK_ROWS, 32); /* one block of a group */
    for (int64_t g = 0; g < n_rows / PACK_ROWS; g++) {
        const uint8_t *grp = (const uint8_t *)wp + (size_t)g * (size_t)nb * pb;
        for (int64_t tok = 0; tok < n_tok; tok++) {
            const block_q8_0 *xb = (const void *)((const uint8_t *)x + (size_t)tok * x_stride);
            for (int r = 0; r < PACK_ROWS; r++) {
                float sum = 0.0f;
                for (int64_t i = 0; i < nb; i++) {
                    const uint8_t *blk = grp + (size_t)i * pb;
                    int32_t dot = 0;
                    for (int e = 0; e < 32; e++) dot += packed_value(t, blk, r, e) * xb[i].qs[e];
                    sum = fmaf(packed_scale(t, blk, r) * hearth_f16_to_f32(xb[i].d), (float)dot, sum);
                }
                y[tok * y_stride + g * PACK_ROWS + r] = sum;
            }
        }
    }
}

/* The scalar twins ignore x_sums: they form the biased sums directly. */
static void gemm_packed_q4_0(int64_t n, int64_t n_rows, int64_t n_tok, const void *wp, const void *x,
                             size_t x_stride, const int32_t *x_sums, float *y, int64_t y_stride)
{
    (void)x_sums;
    gemm_packed(HEARTH_TYPE_Q4_0, n, n_rows, n_tok, wp, x, x_stride, y, y_stride);
}

static void gemm_packed_q5_0(int64_t n, int64_t n_rows, int64_t n_tok, const void *wp, const void *x,
                             size_t x_stride, const int32_t *x_sums, float *y, int64_t y_stride)
{
    (void)x_sums;
    gemm_packed(HEARTH_TYPE_Q5_0, n, n_rows, n_tok, wp, x, x_stride, y, y_stride);
}

static void gemm_packed_q8_0(int64_t n, int64_t n_rows, int64_t n_tok, const void *wp, const void *x,
                             size_t x_stride, const int32_t *x_sums, float *y, int64_t y_stride)
{
    (void)x_sums;
    gemm_packed(HEARTH_TYPE_Q8_0, n, n_rows, n_tok, wp, x, x_stride, y, y_stride);
}

static void gemm_packed_mxfp4(int64_t n, int64_t n_rows, int64_t n_tok, const void *wp, const void *x,
                              size_t x_stride, const int32_t *x_sums, float *y, int64_t y_stride)
{
    (void)x_sums;
    gemm_packed(HEARTH_TYPE_MXFP4, n, n_rows, n_tok, wp, x, x_stride, y, y_stride);
}

/* Row r's super-block blk of a packed K-quant group times the token's
 * block xb, added into the row's running sum in the packed order
 * (kernels.h). */
typedef float (*packed_kq_block_fn)(const uint8_t *blk, int r, const block_q8_K *xb, float sum);

/* Q2_K: the two exact integers q = sum_e sc_s q_e y_e and
 * m = sum_s m_s bsum_s (s = e / 16), added as
 *     s = fmaf(d dy, q, s),  s = fmaf(-(dmin dy), m, s). */
static float packed_q2k_block(const uint8_t *blk, int r, const block_q8_K *xb, float sum)
{
    const size_t at_dmin = 2 * PACK_ROWS, at_scales = 4 * PACK_ROWS, at_qs = at_scales + QK_K / 16 * PACK_ROWS;
    int32_t q = 0, m = 0;
    for (int e = 0; e < QK_K; e++) {
        const int c = e / 32;
        const int u = (packed_byte(blk, at_qs, r, 32 * (c / 4) + e % 32) >> (2 * (c % 4))) & 3;
        q += (packed_byte(blk, at_scales, r, e / 16) & 0x0f) * u * xb->qs[e];
    }
    for (int sub = 0; sub < QK_K / 16; sub++) m += (packed_byte(blk, at_scales, r, sub) >> 4) * xb->bsums[sub];
    sum = fmaf(packed_half(blk, 0, r) * xb->d, (float)q, sum);
    return fmaf(-(packed_half(blk, at_dmin, r) * xb->d), (float)m, sum);
}

/* Q3_K: the exact integer q = sum_e sc_s (u_e - 4) y_e (s = e / 16, u_e
 * the low 2 bits plus 4 times the hmask bit), added as
 *     s = fmaf(d dy, q, s). */
static float packed_q3k_block(const uint8_t *blk, int r, const block_q8_K *xb, float sum)
{
    const size_t at_scales = 2 * PACK_ROWS, at_hmask = at_scales + 12 * PACK_ROWS;
    const size_t at_qs = at_hmask + QK_K / 8 * PACK_ROWS;
    uint8_t packed[12];
    int8_t sc[16];
    for (int k = 0; k < 12; k++) packed[k] = packed_byte(blk, at_scales, r, k);
    q3k_unpack_scales(packed, sc);
    int32_t q = 0;
    for (int e = 0; e < QK_K; e++) {
        const int c = e / 32, l = e % 32;
        const int low = (packed_byte(blk, at_qs, r, 32 * (c / 4) + l) >> (2 * (c % 4))) & 3;
        const int high = (packed_byte(blk, at_hmask, r, l) >> c) & 1;
        q += sc[e / 16] * (low + 4 * high - 4) * xb->qs[e];
    }
    return fmaf(packed_half(blk, 0, r) * xb->d, (float)q, sum);
}

/* Q4_K and Q5_K: the two exact integers q = sum_e sc_s q_e y_e
 * (s = e / 32) and m = sum_k m_k (bsum_2k + bsum_2k+1), added as
 *     s = fmaf(d dy, q, s),  s = fmaf(-(dmin dy), m, s).
 * Q5_K's fifth bit of element e is bit e / 32 of byte e % 32 of qh, a
 * field between the scales and qs. */
static float packed_q45k_block(bool five, const uint8_t *blk, int r, const block_q8_K *xb, float sum)
{
    const size_t at_dmin = 2 * PACK_ROWS, at_scales = 4 * PACK_ROWS, at_qh = (4 + K_SCALE_SIZE) * PACK_ROWS;
    const size_t at_qs = at_qh + (five ? QK_K / 8 * PACK_ROWS : 0);
    uint8_t packed[K_SCALE_SIZE], sc[8], mn[8];
    for (int k = 0; k < K_SCALE_SIZE; k++) packed[k] = packed_byte(blk, at_scales, r, k);
    q4k_unpack_scales(packed, sc, mn);
    int32_t q = 0, m = 0;
    for (int e = 0; e < QK_K; e++) {
        const int c = e / 32, l = e % 32;
        int u = (packed_byte(blk, at_qs, r, 32 * (c / 2) + l) >> (4 * (c % 2))) & 0x0f;
        if (five) u |= ((packed_byte(blk, at_qh, r, l) >> c) & 1) << 4;
        q += sc[c] * u * xb->qs[e];
    }
    for (int k = 0; k < 8; k++) m += mn[k] * (xb->bsums[2 * k] + xb->bsums[2 * k + 1]);
    sum = fmaf(packed_half(blk, 0, r) * xb->d, (float)q, sum);
    return fmaf(-(packed_half(blk, at_dmin, r) * xb->d), (float)m, sum);
}

static float packed_q4k_block(const uint8_t *blk, int r, const block_q8_K *xb, float sum)
{
    return packed_q45k_block(false, blk, r, xb, sum);
}

static float packed_q5k_block(const uint8_t *blk, int r, const block_q8_K *xb, float sum)
{
    return packed_q45k_block(true, blk, r, xb, sum);
}

/* Q6_K: the exact integer q = sum_e sc_s u_e y_e - 32 sum_s sc_s bsum_s
 * (s = e / 16), added as s = fmaf(d dy, q, s). */
static float packed_q6k_block(const uint8_t *blk, int r, const block_q8_K *xb, float sum)
{
    const size_t at_scales = 2 * PACK_ROWS, at_ql = at_scales + QK_K / 16 * PACK_ROWS;
    const size_t at_qh = at_ql + QK_K / 2 * PACK_ROWS;
    int8_t sc[QK_K / 16];
    for (int k = 0; k < QK_K / 16; k++) sc[k] = (int8_t)packed_byte(blk, at_scales, r, k);
    int32_t q = 0;
    for (int e = 0; e < QK_K; e++) {
        const int c = e / 128, k = (e % 128) / 32, l = e % 32;
        const int lb = 64 * c + 32 * (k % 2) + l, hb = 32 * c + l; /* of the row's ql, qh */
        const int low = (packed_byte(blk, at_ql, r, lb) >> (4 * (k / 2))) & 0x0f;
        const int high = (packed_byte(blk, at_qh, r, hb) >> (2 * k)) & 3;
        q += sc[e / 16] * (low | high << 4) * xb->qs[e];
    }
    for (int sub = 0; sub < QK_K / 16; sub++) q -= 32 * sc[sub] * xb->bsums[sub];
    return fmaf(packed_half(blk, 0, r) * xb->d, (float)q, sum);
}

/* The walk of a packed K-quant product: per row group, token and row,
 * the super-blocks in order into one running sum. */
static void gemm_packed_kq(hearth_type t, packed_kq_block_fn add_block, int64_t n, int64_t n_rows, int64_t n_tok,
                           const void *wp, const void *x, size_t x_stride, float *y, int64_t y_stride)
{
    const int64_t nb = n / QK_K;
    const size_t pb = hearth_packed_bytes(t, PACK_ROWS, QK_K); /* one super-block of a group */
    for (int64_t g = 0; g < n_rows / PACK_ROWS; g++) {
        const uint8_t *grp = (const uint8_t *)wp + (size_t)g * (size_t)nb * pb;
        for (int64_t tok = 0; tok < n_tok; tok++) {
            const block_q8_K *xb = (const void *)((const uint8_t *)x + (size_t)tok * x_stride);
            for (int r = 0; r < PACK_ROWS; r++) {
                float sum = 0.0f;
                for (int64_t i = 0; i < nb; i++) sum = add_block(grp + (size_t)i * pb, r, &xb[i], sum);
                y[tok * y_stride + g * PACK_ROWS + r] = sum;
            }
        }
    }
}

#define DEFINE_PACKED_KQ(name, q, type) \
    static void gemm_packed_##name(int64_t n, int64_t n_rows, int64_t n_tok, const void *wp, const void *x, \
                                   size_t x_stride, const int32_t *x_sums, float *y, int64_t y_stride) \
    { \
        (void)x_sums; \
        gemm_packed_kq(type, packed_##q##_block, n, n_rows, n_tok, wp, x, x_stride, y, y_stride); \
    }

DEFINE_PACKED_KQ(q2_k, q2k, HEARTH_TYPE_Q2_K)
DEFINE_PACKED_KQ(q3_k, q3k, HEARTH_TYPE_Q3_K)
DEFINE_PACKED_KQ(q4_k, q4k, HEARTH_TYPE_Q4_K)
DEFINE_PACKED_KQ(q5_k, q5k, HEARTH_TYPE_Q5_K)
DEFINE_PACKED_KQ(q6_k, q6k, HEARTH_TYPE_Q6_K)

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
        [HEARTH_TYPE_MXFP4] = HEARTH_TYPE_Q8_0,
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
        [HEARTH_TYPE_MXFP4] = vec_dot_mxfp4,
        [HEARTH_TYPE_Q2_K] = vec_dot_q2_k,
        [HEARTH_TYPE_Q3_K] = vec_dot_q3_k,
        [HEARTH_TYPE_Q4_K] = vec_dot_q4_k,
        [HEARTH_TYPE_Q5_K] = vec_dot_q5_k,
        [HEARTH_TYPE_Q6_K] = vec_dot_q6_k,
    },
    .gemm = {
        [HEARTH_TYPE_F32] = gemm_f32,
        [HEARTH_TYPE_F16] = gemm_f16,
        [HEARTH_TYPE_BF16] = gemm_bf16,
        [HEARTH_TYPE_Q4_0] = gemm_q4_0,
        [HEARTH_TYPE_Q4_1] = gemm_q4_1,
        [HEARTH_TYPE_Q5_0] = gemm_q5_0,
        [HEARTH_TYPE_Q5_1] = gemm_q5_1,
        [HEARTH_TYPE_Q8_0] = gemm_q8_0,
        [HEARTH_TYPE_MXFP4] = gemm_mxfp4,
        [HEARTH_TYPE_Q2_K] = gemm_q2_k,
        [HEARTH_TYPE_Q3_K] = gemm_q3_k,
        [HEARTH_TYPE_Q4_K] = gemm_q4_k,
        [HEARTH_TYPE_Q5_K] = gemm_q5_k,
        [HEARTH_TYPE_Q6_K] = gemm_q6_k,
    },
    .gemm_packed = {
        [HEARTH_TYPE_F32] = gemm_packed_f32,
        [HEARTH_TYPE_F16] = gemm_packed_f16,
        [HEARTH_TYPE_BF16] = gemm_packed_bf16,
        [HEARTH_TYPE_Q4_0] = gemm_packed_q4_0,
        [HEARTH_TYPE_Q5_0] = gemm_packed_q5_0,
        [HEARTH_TYPE_Q8_0] = gemm_packed_q8_0,
        [HEARTH_TYPE_MXFP4] = gemm_packed_mxfp4,
        [HEARTH_TYPE_Q2_K] = gemm_packed_q2_k,
        [HEARTH_TYPE_Q3_K] = gemm_packed_q3_k,
        [HEARTH_TYPE_Q4_K] = gemm_packed_q4_k,
        [HEARTH_TYPE_Q5_K] = gemm_packed_q5_k,
        [HEARTH_TYPE_Q6_K] = gemm_packed_q6_k,
    },
};

const hearth_kernels *hearth_kernels_scalar(void)
{
    return &scalar_kernels;
}

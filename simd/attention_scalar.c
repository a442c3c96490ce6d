/*
 * attention_scalar.c -- the scalar reference of the attention block
 * kernel (attention.h): plain C, element by element, the twin the SIMD
 * paths are tested against.
 */
#include "internal.h"

#include <math.h>

#include "attention.h"
#include "quant.h"

/* Element i of a cache entry (one head of one position) as a float. */
static float entry_elem(hearth_type type, const uint8_t *e, int32_t i)
{
    switch (type) {
    case HEARTH_TYPE_F32: return ((const float *)e)[i];
    case HEARTH_TYPE_F16: return hearth_f16_to_f32(((const hearth_f16 *)e)[i]);
    default: {
        const block_q8_0 *b = (const block_q8_0 *)e + i / QK8_0;
        return hearth_f16_to_f32(b->d) * (float)b->qs[i % QK8_0];
    }
    }
}

static void block_any(hearth_type type, const struct attn_rows *rows, const uint8_t *k, const uint8_t *v,
                      size_t row_bytes, int32_t j0, int32_t j1)
{
    const int32_t hd = rows->head_dim, vd = rows->v_dim;
    for (int32_t r = 0; r < rows->n_rows; r++) {
        const int32_t end = HEARTH_MIN(j1, rows->n_visible[r]);
        const int32_t start = rows->first_visible ? HEARTH_MAX(j0, rows->first_visible[r]) : j0;
        if (end <= start) continue;
        const float *q = rows->q + (int64_t)r * hd;
        float *s = rows->scores + (size_t)r * ATTN_KEY_BLOCK;
        float bmax = -INFINITY;
        for (int32_t j = start; j < end; j++) {
            const uint8_t *e = k + (size_t)j * row_bytes;
            float dot = 0.0f;
            for (int32_t i = 0; i < hd; i++) dot += q[i] * entry_elem(type, e, i);
            if (rows->softcap > 0.0f) dot = rows->softcap * tanhf(dot * (1.0f / rows->softcap));
            s[j - j0] = dot;
            if (dot > bmax) bmax = dot;
        }
        const float m_old = rows->max[r];
        const float m_new = bmax > m_old ? bmax : m_old;
        const float alpha = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
        float l = 0.0f;
        for (int32_t j = start; j < end; j++) {
            s[j - j0] = expf(s[j - j0] - m_new);
            l += s[j - j0];
        }
        rows->max[r] = m_new;
        rows->sum[r] = rows->sum[r] * alpha + l;
        float *a = rows->acc + (int64_t)r * vd;
        for (int32_t i = 0; i < vd; i++) a[i] *= alpha;
        for (int32_t j = start; j < end; j++) {
            const uint8_t *e = v + (size_t)j * row_bytes;
            const float p = s[j - j0];
            for (int32_t i = 0; i < vd; i++) a[i] += p * entry_elem(type, e, i);
        }
    }
}

static void attn_block_f32(const struct attn_rows *rows, const uint8_t *k, const uint8_t *v, size_t row_bytes,
                      int32_t j0, int32_t j1)
{
    block_any(HEARTH_TYPE_F32, rows, k, v, row_bytes, j0, j1);
}

static void attn_block_f16(const struct attn_rows *rows, const uint8_t *k, const uint8_t *v, size_t row_bytes,
                      int32_t j0, int32_t j1)
{
    block_any(HEARTH_TYPE_F16, rows, k, v, row_bytes, j0, j1);
}

static void attn_block_q8_0(const struct attn_rows *rows, const uint8_t *k, const uint8_t *v, size_t row_bytes,
                       int32_t j0, int32_t j1)
{
    block_any(HEARTH_TYPE_Q8_0, rows, k, v, row_bytes, j0, j1);
}

static const struct attn_kernels scalar_attn = {
    .name = "scalar",
    .block = {
        [HEARTH_TYPE_F32] = attn_block_f32,
        [HEARTH_TYPE_F16] = attn_block_f16,
        [HEARTH_TYPE_Q8_0] = attn_block_q8_0,
    },
};

const struct attn_kernels *attn_kernels_scalar(void)
{
    return &scalar_attn;
}

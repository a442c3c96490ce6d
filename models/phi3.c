/*
 * phi3.c -- Phi-3, Phi-3.5 and Phi-4-mini (Abdin et al., "Phi-3 Technical
 * Report", 2024; transformers' Phi3DecoderLayer): the llama layer with
 * fused products and LongRoPE.
 *
 *   n = rmsnorm(x);  [q; k; v] = W_qkv n   (one matrix, rows in that order)
 *   h = x + W_o attention(rope(q), rope(k), v)
 *   m = rmsnorm(h);  [g; u] = W_up m       (gate rows first, then up)
 *   out = h + W_down (silu(g) * u)
 *
 * LongRoPE (Ding et al. 2024): the rotation frequency of pair i is
 * divided by a per-pair factor, rope_factors_long when the context is
 * longer than the original training context
 * (rope.scaling.original_context_length), rope_factors_short otherwise,
 * and cos and sin are multiplied by the attention factor
 * rope.scaling.attn_factor (sqrt(1 + ln(s) / ln(n_orig)) for a context
 * extended s times).  Files with separate attn_q/k/v tensors are read
 * too.  A sliding window (attention.sliding_window > 0, Phi-3-mini's
 * 2047) applies to every layer.
 */
#include "internal.h"

#include <stdio.h>

#include "family.h"

static hearth_status bind_factors(hearth_model *m, struct weight *w, const char *name)
{
    HEARTH_TRY(model_bind(m, w, name, m->hp.rope.n_dims / 2, 0, false));
    if (w->data && w->type != HEARTH_TYPE_F32)
        return hearth_error(HEARTH_E_FORMAT, "%s: %s must be F32", hearth_gguf_path(m->gguf), name);
    return HEARTH_OK;
}

static hearth_status phi3_load(hearth_model *m)
{
    struct hparams *hp = &m->hp;
    const char *path = hearth_gguf_path(m->gguf);
    HEARTH_TRY(family_read_hparams(m, ROPE_NEOX));
    HEARTH_TRY(family_get_positive(m, "rope.scaling.original_context_length", false, hp->n_ctx_train,
                                   &hp->n_ctx_orig));
    HEARTH_TRY(family_get_float(m, "rope.scaling.attn_factor", 1.0f, &hp->rope.mscale));
    if (!(hp->rope.mscale > 0.0f && hp->rope.mscale < 100.0f))
        return hearth_error(HEARTH_E_FORMAT, "%s: RoPE attention factor %g is out of range", path,
                            (double)hp->rope.mscale);
    /* 0 (Phi-4): no window */
    uint32_t w = 0;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.sliding_window", m->arch->name);
    hearth_status st = hearth_gguf_get_u32(m->gguf, key, &w);
    if (st && st != HEARTH_E_NOT_FOUND) return st;
    if (w > INT32_MAX)
        return hearth_error(HEARTH_E_FORMAT, "%s: metadata '%s' = %u is out of range", path, key, w);
    hp->n_swa = (int32_t)w;
    hp->swa_period = 1;
    hp->rope_swa = hp->rope;

    HEARTH_TRY(family_bind_globals(m));
    HEARTH_TRY(bind_factors(m, &m->rope_long, "rope_factors_long.weight"));
    HEARTH_TRY(bind_factors(m, &m->rope_short, "rope_factors_short.weight"));
    if (!m->rope_long.data != !m->rope_short.data)
        return hearth_error(HEARTH_E_FORMAT, "%s: tensor '%s' is missing (architecture phi3: "
                            "LongRoPE needs both factor tensors)", path,
                            m->rope_long.data ? "rope_factors_short.weight" : "rope_factors_long.weight");
    const struct layer_tensors t = {.fused_qkv = true, .fused_gate_up = true};
    for (int il = 0; il < hp->n_layer; il++) HEARTH_TRY(family_bind_layer(m, il, &t));
    return HEARTH_OK;
}

static hearth_status phi3_layer(struct forward *f, int il)
{
    const hearth_model *m = f->model;
    const struct hparams *hp = &m->hp;
    const struct layer *L = &m->layers[il];
    struct hearth_backend *be = f->be;
    const struct backend_ops *op = be->ops;
    struct rope_params rope = hp->rope;
    if (m->rope_long.data)
        rope.freq_factors = f->n_ctx > hp->n_ctx_orig ? m->rope_long.data : m->rope_short.data;

    HEARTH_TRY(op->rmsnorm(be, &f->cur, &f->x, &L->attn_norm, hp->norm_eps));
    HEARTH_TRY(family_attention(f, il, &rope));
    HEARTH_TRY(op->matmul(be, &f->cur, &L->wo, &f->att));
    HEARTH_TRY(op->add(be, &f->x, &f->x, &f->cur));
    return family_swiglu_block(f, il);
}

const struct arch arch_phi3 = {.name = "phi3",
                               .load = phi3_load,
                               .layer = phi3_layer,
                               .heads_split = true,
                               .no_device = "the OpenCL backend has no LongRoPE factors or sliding-window "
                               "attention yet"};

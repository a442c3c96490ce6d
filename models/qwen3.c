/*
 * qwen3.c -- Qwen3 (dense): Qwen2's layer without the q/k/v biases, with
 * an RMS norm of every query and key head before RoPE (Qwen team, "Qwen3
 * technical report", 2025; transformers' Qwen3Attention):
 *   n = rmsnorm(x)
 *   q_h = rope(rmsnorm_h(W_q n)_h * g_q),  k_h = rope(rmsnorm_h(W_k n)_h * g_k)
 *   h   = x + W_o attention(q, k, W_v n)
 *   out = h + W_down (silu(W_gate m) * (W_up m)),  m = rmsnorm(h)
 * where rmsnorm_h normalises each head_dim-wide head on its own and g_q,
 * g_k (attn_q_norm, attn_k_norm) are shared by all heads of a layer.
 * The attention half (family_attention_block, with the head norms) is
 * what qwen3moe shares.
 */
#include "internal.h"

#include "family.h"

static hearth_status qwen3_load(hearth_model *m)
{
    HEARTH_TRY(family_read_hparams(m, ROPE_NEOX));
    HEARTH_TRY(family_bind_globals(m));
    const struct layer_tensors t = {.qk_norm = true};
    for (int il = 0; il < m->hp.n_layer; il++) HEARTH_TRY(family_bind_layer(m, il, &t));
    return HEARTH_OK;
}

static hearth_status qwen3_layer(struct forward *f, int il)
{
    HEARTH_TRY(family_attention_block(f, il));
    return family_swiglu_block(f, il);
}

const struct arch arch_qwen3 = {.name = "qwen3",
                                .load = qwen3_load,
                                .layer = qwen3_layer,
                                .heads_split = true};

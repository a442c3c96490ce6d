/*
 * qwen3moe.c -- Qwen3-MoE (Qwen3-30B-A3B, Qwen3-235B-A22B): Qwen3's
 * attention (no biases, per-head RMS norms of queries and keys before
 * RoPE, family_attention_block) and the mixture-of-experts block of
 * models/moe.c without a shared expert:
 *   out = h + sum_{e in top k} w_e expert_e(m),  w = p_E / sum(p_E)
 * with p = softmax(W_router m) over all experts and E the k highest
 * (transformers' Qwen3MoeSparseMoeBlock with norm_topk_prob).
 */
#include "internal.h"

#include "family.h"
#include "moe.h"

static const struct moe_opts qwen3moe_moe = {.norm_topk = true};

static hearth_status qwen3moe_load(hearth_model *m)
{
    HEARTH_TRY(family_read_hparams(m, ROPE_NEOX));
    HEARTH_TRY(moe_read_hparams(m, &qwen3moe_moe));
    HEARTH_TRY(family_bind_globals(m));
    const struct layer_tensors t = {.qk_norm = true, .no_ffn = true};
    for (int il = 0; il < m->hp.n_layer; il++) {
        HEARTH_TRY(family_bind_layer(m, il, &t));
        HEARTH_TRY(moe_bind_layer(m, il, &qwen3moe_moe));
    }
    return HEARTH_OK;
}

static hearth_status qwen3moe_layer(struct forward *f, int il)
{
    HEARTH_TRY(family_attention_block(f, il));
    return moe_ffn_block(f, il);
}

const struct arch arch_qwen3moe = {.name = "qwen3moe",
                                   .load = qwen3moe_load,
                                   .layer = qwen3moe_layer,
                                   .heads_split = true,
                                   .no_device = "its mixture-of-experts layers need expert routing (moe_ffn), which the OpenCL backend lacks"};

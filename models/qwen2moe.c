/*
 * qwen2moe.c -- Qwen1.5-MoE and Qwen2-57B-A14B: Qwen2's attention (NeoX
 * RoPE, q/k/v biases where the file has them) and, in place of the
 * feed-forward, the mixture-of-experts block of models/moe.c with a
 * shared expert:
 *   h   = x + W_o attention(rope(W_q n + b_q), rope(W_k n + b_k), W_v n + b_v)
 *   out = h + sum_{e in top k} p_e expert_e(m) + sigmoid(g . m) shared(m)
 * with p = softmax(W_router m) and the top k probabilities as they are
 * (transformers' Qwen2MoeSparseMoeBlock: norm_topk_prob false).
 */
#include "internal.h"

#include "family.h"
#include "moe.h"

static const struct moe_opts qwen2moe_moe = {.norm_topk = false, .shared = MOE_SHARED_GATED};

static hearth_status qwen2moe_load(hearth_model *m)
{
    HEARTH_TRY(family_read_hparams(m, ROPE_NEOX));
    HEARTH_TRY(moe_read_hparams(m, &qwen2moe_moe));
    HEARTH_TRY(family_bind_globals(m));
    const struct layer_tensors t = {.no_ffn = true};
    for (int il = 0; il < m->hp.n_layer; il++) {
        HEARTH_TRY(family_bind_layer(m, il, &t));
        HEARTH_TRY(moe_bind_layer(m, il, &qwen2moe_moe));
    }
    return HEARTH_OK;
}

static hearth_status moe_layer(struct forward *f, int il)
{
    HEARTH_TRY(family_attention_block(f, il));
    return moe_ffn_block(f, il);
}

const struct arch arch_qwen2moe = {.name = "qwen2moe",
                                   .load = qwen2moe_load,
                                   .layer = moe_layer,
                                   .heads_split = true,
                                   .no_device = "its mixture-of-experts layers need expert routing (moe_ffn), which the OpenCL backend lacks"};

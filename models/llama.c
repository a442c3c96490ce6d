/*
 * llama.c -- the llama family: Llama 2 and 3.x, TinyLlama, Mistral-style
 * grouped-query attention, and (with q/k/v biases and NeoX RoPE) qwen2;
 * llama files that declare experts (Mixtral) have the mixture-of-experts
 * block of models/moe.c in place of the feed-forward.
 *
 * One layer, pre-norm (Touvron et al. 2023):
 *   h   = x + W_o attention(rope(W_q n), rope(W_k n), W_v n),  n = rmsnorm(x)
 *   out = h + W_down (silu(W_gate m) * (W_up m)),             m = rmsnorm(h)
 */
#include "internal.h"

#include "family.h"
#include "moe.h"

/* Mixtral: experts as wide as feed_forward_length, the top k weights
 * renormalised. */
static const struct moe_opts mixtral_moe = {.norm_topk = true, .ff_exp_is_ff = true};

static hearth_status family_load(hearth_model *m, enum rope_style style, bool qkv_bias)
{
    HEARTH_TRY(family_read_hparams(m, style));
    const bool experts = !qkv_bias && moe_file_has_experts(m);
    if (experts) HEARTH_TRY(moe_read_hparams(m, &mixtral_moe));
    HEARTH_TRY(family_bind_globals(m));
    const struct layer_tensors t = {.qkv_bias = qkv_bias, .no_ffn = experts};
    for (int il = 0; il < m->hp.n_layer; il++) {
        HEARTH_TRY(family_bind_layer(m, il, &t));
        if (experts) HEARTH_TRY(moe_bind_layer(m, il, &mixtral_moe));
    }
    return HEARTH_OK;
}

static hearth_status llama_load(hearth_model *m)
{
    return family_load(m, ROPE_NORMAL, false);
}

/* qwen2: the same layer with q/k/v biases and NeoX RoPE. */
static hearth_status qwen2_load(hearth_model *m)
{
    return family_load(m, ROPE_NEOX, true);
}

/* The layer, top to bottom as in the equations above.  Biases are applied
 * when the file has them (qwen2 always does, llama files may). */
static hearth_status llama_layer(struct forward *f, int il)
{
    HEARTH_TRY(family_attention_block(f, il));
    if (f->model->layers[il].gate_exps) return moe_ffn_block(f, il);
    return family_swiglu_block(f, il);
}

const struct arch arch_llama = {.name = "llama",
                                .load = llama_load,
                                .layer = llama_layer,
                                .heads_split = true};
const struct arch arch_qwen2 = {.name = "qwen2",
                                .load = qwen2_load,
                                .layer = llama_layer,
                                .heads_split = true};

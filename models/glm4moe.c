/*
 * glm4moe.c -- the GLM-4.5 family (glm4moe: GLM-4.5, GLM-4.6,
 * GLM-4.5-Air; Zhipu AI / Z.ai, "GLM-4.5: Agentic, Reasoning, and Coding
 * (ARC) Foundation Models", 2025; transformers' Glm4MoeDecoderLayer):
 * pre-norm layers of grouped-query attention and a feed-forward half
 * that is a SwiGLU in the first leading_dense_block_count layers and a
 * mixture of experts with a shared expert after them.
 *
 *   n       = rmsnorm(x)
 *   q, k, v = W_q n + b_q, W_k n + b_k, W_v n + b_v     (the biases the file has)
 *   q, k    = rmsnorm_h(q) g_q, rmsnorm_h(k) g_k         (where the file has
 *             attn_q_norm and attn_k_norm: GLM-4.5, 4.6; not 4.5-Air)
 *   q, k    = rope(q), rope(k)       NeoX halves of the first rope.dimension_count
 *                                    elements of each head (half of it: the
 *                                    partial rotary factor 0.5), the rest as is
 *   h       = x + W_o attention(q, k, v)
 *   m       = rmsnorm(h)             (the file's post_attention_norm)
 *   out     = h + W_down (silu(W_gate m) * W_up m)           (dense layers)
 *   out     = h + sum_{e in E} w_e expert_e(m) + shared(m)   (the others)
 *
 * The experts are DeepSeek-V3's (models/moe.c): scores s = sigmoid(W_r m)
 * (expert_gating_func 2, the default here as the converters always write
 * it), E the k experts of highest s + b where b is the layer's selection
 * bias exp_probs_b (which steers the choice only), w = s_E divided by
 * their sum where expert_weights_norm says, times expert_weights_scale;
 * expert_shared_count shared experts of expert_feed_forward_length each
 * added without a gate.
 *
 * The files count one multi-token prediction ("NextN") layer after the
 * trunk (nextn_predict_layers): a layer of the same kind (with experts)
 * with its input projection and norms (model.h, struct mtp_weights), which
 * speculative decoding drafts with (src/engine/draft.c), as for Qwen3.5.
 */
#include "internal.h"

#include "family.h"
#include "moe.h"

static const struct moe_opts glm4moe_moe = {
    .shared = MOE_SHARED_PLAIN,
    .routing_keys = true,
    .sigmoid_default = true,
    .select_bias = true,
};

/* Multi-section RoPE (the vision-language GLM-4.5V) turns pairs by other
 * positions than the token's: refused. */
static hearth_status check_rope(hearth_model *m)
{
    if (family_has_key(m, "rope.dimension_sections"))
        return hearth_error(HEARTH_E_UNSUPPORTED, "%s: multi-section RoPE ('%s.rope.dimension_sections', "
                            "a vision-language conversion) is not supported", hearth_gguf_path(m->gguf),
                            m->arch->name);
    return HEARTH_OK;
}

static hearth_status glm4moe_load(hearth_model *m)
{
    struct hparams *hp = &m->hp;
    HEARTH_TRY(family_read_hparams(m, ROPE_NEOX));
    HEARTH_TRY(check_rope(m));
    HEARTH_TRY(family_read_nextn(m));
    HEARTH_TRY(moe_read_dense_lead(m));
    /* the prediction layer has experts too */
    if (hp->n_layer_dense < hp->n_layer + m->n_mtp) HEARTH_TRY(moe_read_hparams(m, &glm4moe_moe));
    HEARTH_TRY(family_bind_globals(m));
    for (int il = 0; il < hp->n_layer + m->n_mtp; il++) {
        const bool dense = il < hp->n_layer_dense;
        const struct layer_tensors t = {
            .qk_norm_optional = true,
            .no_ffn = !dense,
            .ffn_norm = "post_attention_norm.weight",
        };
        HEARTH_TRY(family_bind_layer(m, il, &t));
        if (!dense) HEARTH_TRY(moe_bind_layer(m, il, &glm4moe_moe));
        if (il >= hp->n_layer) HEARTH_TRY(family_bind_mtp(m, il));
    }
    return HEARTH_OK;
}

static hearth_status glm4moe_layer(struct forward *f, int il)
{
    HEARTH_TRY(family_attention_block(f, il));
    return moe_ffn_after_dense(f, il);
}

const struct arch arch_glm4moe = {.name = "glm4moe",
                                  .load = glm4moe_load,
                                  .layer = glm4moe_layer,
                                  .heads_split = true,
                                  .no_device = "its mixture-of-experts layers need expert routing (moe_ffn), "
                                               "which the OpenCL backend lacks"};

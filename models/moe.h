/*
 * moe.h -- the mixture-of-experts feed-forward block shared by the
 * families that route tokens to experts (models/moe.c): qwen2moe,
 * qwen3moe, llama files with experts (Mixtral), the Qwen3.5 mixtures,
 * gpt-oss, deepseek2 and glm4moe.
 */
#ifndef HEARTH_MODELS_MOE_H
#define HEARTH_MODELS_MOE_H

#include "forward.h"
#include "model.h"

/* A shared expert, which every token passes besides its routed ones. */
enum moe_shared {
    MOE_SHARED_NONE,
    MOE_SHARED_GATED, /* expert_shared_feed_forward_length wide, its output
                       * scaled by sigmoid(g . m) (qwen2moe) */
    MOE_SHARED_PLAIN  /* expert_shared_count experts of expert_feed_forward_length
                       * as one, added as it is (DeepSeek; a count of 0: none) */
};

/* How a family routes and what its layers hold. */
struct moe_opts {
    bool norm_topk;      /* the k routing weights renormalised (Mixtral, qwen3moe) */
    enum moe_shared shared;
    bool routing_keys;   /* the file says how to route (DeepSeek): expert_gating_func,
                          * expert_weights_scale, expert_group_count and
                          * expert_group_used_count, and the selection bias
                          * exp_probs_b where a layer has one */
    bool sigmoid_default; /* with routing_keys: sigmoid scores where the file has
                           * no expert_gating_func (GLM-4.5; else softmax) */
    bool select_bias;    /* with routing_keys: every layer with experts has the
                          * selection bias exp_probs_b (GLM-4.5) */
    bool ff_exp_is_ff;   /* experts are feed_forward_length wide (Mixtral); else
                          * expert_feed_forward_length, or n_ff / k without it */
    bool biases;         /* the router and the experts have biases (gpt-oss) */
    enum moe_act act;    /* the experts' activation */
    float alpha, limit;  /* MOE_SWIGLU_OAI's constants */
};

/* Whether the file declares experts: ARCH.expert_count present and above
 * one (a llama file without it is dense). */
bool moe_file_has_experts(const hearth_model *m);

/* Read the expert hyperparameters into m->hp (expert_count,
 * expert_used_count, expert_feed_forward_length, the shared expert's
 * width, expert_weights_norm, and the routing keys where o says so),
 * with errors naming the key that is missing or out of range. */
hearth_status moe_read_hparams(hearth_model *m, const struct moe_opts *o);

/* ARCH.leading_dense_block_count (default 0, at most the trunk's
 * layers) into hp.n_layer_dense: the first layers have a dense SwiGLU
 * (DeepSeek, GLM-4.5). */
hearth_status moe_read_dense_lead(hearth_model *m);

/* Bind layer il's router, expert views and shared expert (the ffn_norm
 * is the caller's); allocates m->experts on the first layer. */
hearth_status moe_bind_layer(hearth_model *m, int il, const struct moe_opts *o);

/* The feed-forward half of a layer with experts:
 *     x += moe(m) [+ [sigmoid(g . m)] shared(m)],  m = rmsnorm(x). */
hearth_status moe_ffn_block(struct forward *f, int il);

/* The feed-forward half of a family with leading dense layers
 * (moe_read_dense_lead; DeepSeek, GLM-4.5): family_swiglu_block in the
 * first hp.n_layer_dense layers, moe_ffn_block after them. */
hearth_status moe_ffn_after_dense(struct forward *f, int il);

#endif /* HEARTH_MODELS_MOE_H */

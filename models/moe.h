/*
 * moe.h -- the mixture-of-experts feed-forward block shared by the
 * families that route tokens to experts (models/moe.c): qwen2moe,
 * qwen3moe and llama files with experts (Mixtral).
 */
#ifndef HEARTH_MODELS_MOE_H
#define HEARTH_MODELS_MOE_H

#include "forward.h"
#include "model.h"

/* How a family routes and what its layers hold. */
struct moe_opts {
    bool norm_topk;      /* the k routing weights renormalised (Mixtral, qwen3moe) */
    bool shared_expert;  /* a shared expert with a sigmoid gate (qwen2moe) */
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
 * expert_used_count, expert_feed_forward_length,
 * expert_shared_feed_forward_length, expert_weights_norm), with errors
 * naming the key that is missing or out of range. */
hearth_status moe_read_hparams(hearth_model *m, const struct moe_opts *o);

/* Bind layer il's router, expert views and shared expert (the ffn_norm
 * is the caller's); allocates m->experts on the first layer. */
hearth_status moe_bind_layer(hearth_model *m, int il, const struct moe_opts *o);

/* The feed-forward half of a layer with experts:
 *     x += moe(m) [+ sigmoid(g . m) shared(m)],  m = rmsnorm(x). */
hearth_status moe_ffn_block(struct forward *f, int il);

#endif /* HEARTH_MODELS_MOE_H */

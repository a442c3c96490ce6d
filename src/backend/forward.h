/*
 * forward.h -- the state of one forward pass over a batch of tokens, as
 * the layer functions of models/ see it.
 */
#ifndef HEARTH_FORWARD_H
#define HEARTH_FORWARD_H

#include "backend.h"
#include "kv_cache.h"
#include "model.h"

/* The most extra buffers an architecture asks for. */
#define FORWARD_EXTRA_MAX 16

struct rstate;

/* Activation buffers on one backend, sized for the context's largest
 * batch.  Widths: x, cur: n_embd; q, att: n_head * head_dim; k, v:
 * n_head_kv * head_dim; gate, up: n_ff (or the shared expert's, when
 * wider). */
struct forward {
    const hearth_model *model;
    struct hearth_backend *be;
    struct kv_cache *kv;
    struct batch_pos bp;
    int32_t n_ctx;     /* the context's positions (Phi-3 picks its RoPE factors by it) */
    struct act x;      /* the residual stream */
    struct act cur;
    struct act q, k, v;
    struct act att;
    struct act gate, up;
    /* mixture of experts (hp.n_expert > 0): router logits (n_expert
     * wide), the experts' sum and the shared expert's output (n_embd),
     * the shared expert's gate (1) */
    struct act router, moe_out, moe_shared, shared_gate;
    /* The buffers a family's layers need besides these (widths from
     * arch->extra_widths; 0: none: the recurrent families, deepseek2);
     * recurrent architectures' sequence states and the chunk size of
     * prefill (tokens; backend/rstate.h, DESIGN.md). */
    struct act extra[FORWARD_EXTRA_MAX];
    struct rstate *rs;
    int32_t chunk_size;
};

#endif /* HEARTH_FORWARD_H */

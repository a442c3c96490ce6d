/*
 * forward.h -- the state of one forward pass over a batch of tokens, as
 * the layer functions of models/ see it.
 */
#ifndef HEARTH_FORWARD_H
#define HEARTH_FORWARD_H

#include "backend.h"
#include "kv_cache.h"
#include "model.h"

/* Activation buffers on one backend, sized for the context's largest
 * batch.  Widths: x, cur: n_embd; q, att: n_head * head_dim; k, v:
 * n_head_kv * head_dim; gate, up: n_ff. */
struct forward {
    const hearth_model *model;
    struct hearth_backend *be;
    struct kv_cache *kv;
    struct batch_pos bp;
    struct act x;      /* the residual stream */
    struct act cur;
    struct act q, k, v;
    struct act att;
    struct act gate, up;
};

#endif /* HEARTH_FORWARD_H */

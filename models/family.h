/*
 * family.h -- the pieces the architecture files of models/ share: reading
 * the hyperparameters every decoder-only family declares, binding the
 * tensors of a pre-norm attention + feed-forward layer, and the small
 * steps several families add to it (per-head RMS norms of queries and
 * keys, the grouped products of q/k/v and gate/up).
 */
#ifndef HEARTH_MODELS_FAMILY_H
#define HEARTH_MODELS_FAMILY_H

#include "internal.h"

#include "forward.h"
#include "model.h"

/* "ARCH.suffix" as an unsigned value that must be positive; a missing
 * required key is an error naming it, a missing optional one gives dflt. */
hearth_status family_get_positive(hearth_model *m, const char *suffix, bool required, int32_t dflt,
                                  int32_t *out);
/* "ARCH.suffix" as a float, dflt when absent. */
hearth_status family_get_float(hearth_model *m, const char *suffix, float dflt, float *out);
/* Whether "ARCH.suffix" is present. */
bool family_has_key(hearth_model *m, const char *suffix);

/* The hyperparameters of the llama layout: sizes, heads (with
 * attention.key_length), the RMS norm epsilon and RoPE (base, dimension
 * count, linear scaling), in the given RoPE style.  Also sets the
 * attention scale to 1/sqrt(head_dim), the sliding-window layers' RoPE to
 * the same, and no embedding scale, soft-capping or window. */
hearth_status family_read_hparams(hearth_model *m, enum rope_style style);
/* Its parts: the sizes (context, width, layers, feed-forward, heads and
 * key/value heads, the norm's epsilon; no embedding scale, soft-capping
 * or window), and RoPE for heads of head_dim (the dimension count,
 * default head_dim, base and scaling, the sliding layers' the same). */
hearth_status family_read_sizes(hearth_model *m);
hearth_status family_read_rope(hearth_model *m, enum rope_style style, int32_t head_dim);

/* The prediction ("NextN") layers a file declares after its trunk
 * (ARCH.nextn_predict_layers, counted in block_count): hp.n_layer becomes
 * the trunk's, and m->n_mtp 1 when the file holds the first of them (a
 * file that declares them but holds no tensor of theirs, a trunk-only
 * conversion, runs without). */
hearth_status family_read_nextn(hearth_model *m);

/* The per-layer table (the trunk's layers and m->n_mtp more), then
 * token_embd, output_norm, output (or the tied embeddings) and
 * rope_freqs. */
hearth_status family_bind_globals(hearth_model *m);

/* The prediction layer il's own weights (model.h, struct mtp_weights):
 * the input projection of the embedding and the hidden state, their
 * norms, and where the file has them its head's norm, head and
 * embeddings (else the trunk's). */
hearth_status family_bind_mtp(hearth_model *m, int il);

/* What family_bind_layer binds besides the attention and FFN norms. */
struct layer_tensors {
    bool qkv_bias;      /* attn_{q,k,v}.bias are required */
    bool qk_norm;       /* attn_q_norm / attn_k_norm (head_dim vectors) are required */
    bool qk_norm_optional; /* both or neither, as the file has them (GLM-4.5) */
    bool fused_qkv;     /* attn_qkv.weight where the file has it, else attn_q/k/v */
    bool fused_gate_up; /* ffn_up.weight holds gate and up rows (2 n_ff) */
    bool post_norms;    /* post_attention_norm and post_ffw_norm are required */
    bool no_ffn;        /* the feed-forward tensors are bound elsewhere (MoE) */
    const char *ffn_norm; /* the feed-forward's pre-norm; NULL: "ffn_norm.weight" */
};

/* Bind layer il's tensors as described. */
hearth_status family_bind_layer(hearth_model *m, int il, const struct layer_tensors *t);

/* Rows first .. first + n - 1 of a fused matrix as a weight of its own
 * named name (the rows of a GGUF matrix are contiguous, so nothing is
 * copied). */
void family_weight_rows(struct weight *out, const struct weight *fused, int64_t first, int64_t n,
                        const char *name);

/* Name of tensor "blk.IL.SUFFIX" into buf. */
void family_layer_name(char *buf, size_t size, int il, const char *suffix);

/* x holds rows of n_heads heads of head_dim: RMS-normalise each head on
 * its own, times w (head_dim weights): the query and key norms of Qwen3
 * and Gemma 3 (the backend's rmsnorm over a view of head-sized rows). */
hearth_status family_rmsnorm_heads(struct forward *f, struct act *x, int32_t n_heads,
                                   const struct weight *w);

/* q, k, v = W_q n, W_k n, W_v n for n = f->cur, plus the biases the layer
 * has. */
hearth_status family_qkv(struct forward *f, const struct layer *L);

/* att = attention(q, k, v) over n = f->cur:
 *   q, k, v = W n (+ b); [q, k = headnorm(q), headnorm(k)];
 *   q, k = rope(q), rope(k) (rope NULL: no rotation)
 * with the head norms where the layer has attn_q_norm and the sinks where
 * it has attn_sinks, over the heads this rank runs (model.h, struct
 * attn_heads): in a tensor-parallel stage that splits them, its own, then
 * every rank's gathered, so that att holds every head's output as in one
 * process.  The families whose layers call this set struct arch's
 * heads_split. */
hearth_status family_attention(struct forward *f, int il, const struct rope_params *rope);

/* The attention half of a pre-norm layer, from x to x + W_o attention:
 *   n = rmsnorm(x); q, k, v = W n (+ b); [q, k = headnorm(q), headnorm(k)];
 *   q, k = rope(q), rope(k); x += W_o attention(q, k, v) (+ b_o)
 * with the head norms where the layer has attn_q_norm (Qwen3), and the
 * attention sinks and output bias where it has them (gpt-oss). */
hearth_status family_attention_block(struct forward *f, int il);

/* The SwiGLU feed-forward half: x += W_down (silu(W_gate m) * W_up m),
 * m = rmsnorm(x). */
hearth_status family_swiglu_block(struct forward *f, int il);

#endif /* HEARTH_MODELS_FAMILY_H */

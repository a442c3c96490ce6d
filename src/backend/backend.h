/*
 * backend.h -- the seam between the model code and the hardware.
 *
 * A transformer layer (models/<family>.c) is written as a short sequence of
 * operations on activation buffers: matrix product with a weight, RMS norm,
 * RoPE, attention over the KV cache, elementwise add and SwiGLU.  A backend
 * executes those operations where its layers live: the CPU backend
 * (backend_cpu.c) on host memory with the kernels of simd/, the OpenCL
 * backend on a device.  Each layer of a context is assigned one backend;
 * only the hidden state crosses between them.
 */
#ifndef HEARTH_BACKEND_H
#define HEARTH_BACKEND_H

#include "internal.h"
#include "model.h"

struct hearth_backend;
struct kv_cache;
struct rstate;

/* Elementwise functions of the recurrent layers (backend_ops.map). */
enum map_fn {
    MAP_TANH,
    MAP_SIGMOID,
    MAP_SILU,
    MAP_RELU_SQR,    /* max(x, 0)^2 */
    MAP_LOG_DECAY,   /* -exp(x): the log of the decay exp(-exp(x)) */
    MAP_SCALE,       /* x * arg */
    MAP_GELU         /* x Phi(x) = x (1 + erf(x / sqrt 2)) / 2, the exact GELU (BERT) */
};

/* An activation buffer of `rows` tokens by `width` floats, row-major.
 * host is valid on the CPU backend; dev is a device backend's handle. */
struct act {
    float *host;
    void *dev;
    int64_t rows;
    int64_t width;
    int64_t capacity;   /* floats allocated */
};

/* Where the tokens of a batch belong.  A batch holds the tokens of one or
 * more sequences: the rows of sequence s are seq_start[s] ..
 * seq_start[s + 1] - 1, at consecutive positions.  Each sequence reads its
 * keys and values through its block table: position p of sequence s is in
 * cache slot blocks[table_start[s] + p / block_tokens] * block_tokens +
 * p % block_tokens (kv_cache.h), and row t's own keys and values go to
 * slot[t]. */
struct batch_pos {
    const int32_t *pos;         /* pos[t]: position of row t in its sequence */
    const int32_t *slot;        /* slot[t]: cache slot of row t */
    int64_t n_tokens;
    int32_t n_seqs;
    const int32_t *seq_start;   /* n_seqs + 1 row indices */
    const int32_t *blocks;      /* the sequences' block tables back to back */
    const int32_t *table_start; /* n_seqs offsets into blocks */
    /* The same for the layers in the cache's window space (kv_cache.h):
     * their slots, tables and offsets.  NULL: no window space. */
    const int32_t *wslot;
    const int32_t *wblocks;
    const int32_t *wtable_start;
    const int32_t *state_slot;  /* n_seqs recurrent state slots (backend/rstate.h);
                                 * NULL: sequence s has slot s */
    /* Checkpoints of recurrent states, for rolling a verification back
     * (speculative decoding): a sequence s with ckpt_slot[s] >= 0 keeps
     * its state after each of its rows but the last, row t's in slot
     * ckpt_slot[s] + t of ckpt (same layout as the states).  NULL: none. */
    struct rstate *ckpt;
    const int32_t *ckpt_slot;
};

/* Slot of ckpt holding sequence s's state after its row t, or -1. */
static inline int32_t batch_ckpt_slot(const struct batch_pos *bp, int32_t s, int32_t t)
{
    return bp->ckpt && bp->ckpt_slot && bp->ckpt_slot[s] >= 0 ? bp->ckpt_slot[s] + t : -1;
}

/* How a token picks its experts and weighs them (moe_route).  From the
 * router's logits l, the experts' scores p: softmax(l) over all experts,
 * or sigmoid(l_e) each.  The experts are chosen by s = p + select_bias
 * (DeepSeek-V3's correction bias, which steers the choice only; s = p
 * without it): with groups, the experts in n_groups consecutive groups,
 * a token chooses among the n_groups_used groups of highest score -- the
 * largest s of a group for softmax scores (DeepSeek-V2), the sum of its
 * two largest for sigmoid ones (DeepSeek-V3) -- then the n_used experts
 * of highest s among those (ties: the lower index first, for groups as
 * for experts).  The weights are the chosen experts' p, divided by their
 * sum when norm_topk (held at 2^-14 or more), times scale. */
#define MOE_EXPERT_MAX 4096 /* the most experts a layer may have */

struct moe_routing {
    int32_t n_expert;
    int32_t n_used;
    bool norm_topk;
    enum moe_gating gating;
    const float *select_bias; /* n_expert floats, or NULL */
    int32_t n_groups;         /* 0 or 1: no groups */
    int32_t n_groups_used;
    float scale;
};

/* The experts of one mixture-of-experts layer (models/moe.c): how tokens
 * are routed, and n_expert views each of the gate, up and down matrices. */
struct moe_experts {
    struct moe_routing route;
    const struct weight *gate, *up, *down;
    /* Per-expert biases (gpt-oss), expert e's at row e of n_ff (gate, up)
     * or n_embd (down) floats; NULL: none.  gate and up get theirs before
     * the activation, down's is part of the expert's output. */
    const float *gate_bias, *up_bias, *down_bias;
    enum moe_act act;
    float alpha, limit;      /* MOE_SWIGLU_OAI's constants */
    /* A tensor-parallel stage (tp_group.h) whose ranks share out the
     * experts (model.h, struct expert_share): this rank runs its share
     * (tp_share of n_expert), whole, for the rows routed to them, and
     * gathers the other ranks' experts' results; NULL: every expert
     * here. */
    struct hearth_pipeline *tp;
};

/* The routing of one token (struct moe_routing): ids[0..n_used-1] the
 * chosen experts, highest s first, and w their weights.  The same for
 * every backend (backend_cpu.c).  Softmax scores without a bias are
 * chosen by their logits, which order them alike. */
void moe_route(const struct moe_routing *r, const float *logits, int32_t *ids, float *w);

/* A Gated DeltaNet layer's recurrence (models/qwen35.c, simd/delta.h):
 * n_k key heads and n_v value heads (value head h reads key head h mod
 * n_k, or h / (n_v / n_k) when grouped), all of head_dim; the decay g =
 * softplus(alpha + dt_bias) * a and the write strength sigmoid(beta) of
 * each value head; the L2 norm's epsilon; where the heads' states start in
 * the layer's state. */
struct deltanet_params {
    int32_t n_k_heads, n_v_heads, head_dim;
    const float *dt_bias, *a;   /* n_v_heads each */
    float eps;
    size_t state_offset;        /* floats into the layer's state */
    bool grouped;
    bool fused_ba;              /* beta holds both, per key head r betas then
                                 * r alphas (r = n_v / n_k); alpha unused */
};

struct backend_ops {
    const char *name;
    /* Activation buffers of up to rows x width floats. */
    hearth_status (*act_alloc)(struct hearth_backend *be, struct act *a, int64_t rows, int64_t width);
    void (*act_free)(struct hearth_backend *be, struct act *a);
    /* Copy rows between host memory and the backend's buffer. */
    hearth_status (*act_upload)(struct hearth_backend *be, struct act *dst, const float *src, int64_t rows);
    hearth_status (*act_download)(struct hearth_backend *be, float *dst, const struct act *src, int64_t rows);

    /* out[t][r] = sum_k w[r][k] * in[t][k] for every row t of in. */
    hearth_status (*matmul)(struct hearth_backend *be, struct act *out, const struct weight *w,
                            const struct act *in);
    /* outs[i] = ws[i] x in for each i < n (n <= MATMUL_SET_MAX): products of
     * one input, which the backend may run as one step; the outputs are
     * distinct buffers, none of them in.  NULL: backend_matmul_set runs
     * them one by one with matmul. */
    hearth_status (*matmul_set)(struct hearth_backend *be, int n, struct act *const outs[],
                                const struct weight *const ws[], const struct act *in);
    /* x[t][i] += bias[i] */
    hearth_status (*add_bias)(struct hearth_backend *be, struct act *x, const struct weight *bias);
    /* out[t] = in[t] / rms(in[t]) * w  (rms with eps inside the root) */
    hearth_status (*rmsnorm)(struct hearth_backend *be, struct act *out, const struct act *in,
                             const struct weight *w, float eps);
    /* Rotate each head of x (heads of head_dim) by its token's position. */
    hearth_status (*rope)(struct hearth_backend *be, struct act *x, int32_t n_heads, int32_t head_dim,
                          const struct rope_params *rope, const struct batch_pos *bp);
    /* Store k and v of the batch in the layer's cache at their slots,
     * then out = causal softmax(q k^T * hp->attn_scale) v per head, grouped
     * query heads sharing key/value heads, each row over the positions of
     * its own sequence up to its own (with hp->bidirectional, up to the
     * sequence's last row of the batch, for every row: an encoder's
     * sequence is whole in its batch) -- the last hparams_layer_window(hp,
     * il) of them in a sliding-window layer -- with the scores
     * soft-capped where hp->attn_softcap is set.  sinks (n_head floats, or
     * NULL): head h's softmax has one more logit, sinks[h], in its
     * denominator, whose value is zero (gpt-oss's attention sinks).
     * Multi-head latent attention (hp->kv_latent > 0): k holds per head
     * head_dim - kv_latent elements and v kv_latent, kept as one key row
     * [k | v] (kv_cache.h); the scores are q . [k | v] over head_dim and
     * the values the v part, so out has n_head heads of kv_latent. */
    hearth_status (*attention)(struct hearth_backend *be, struct act *out, const struct act *q,
                               const struct act *k, const struct act *v, struct kv_cache *kv,
                               int il, const struct hparams *hp, const float *sinks,
                               const struct batch_pos *bp);
    /* out = a + b (elementwise) */
    hearth_status (*add)(struct hearth_backend *be, struct act *out, const struct act *a,
                         const struct act *b);
    /* out = silu(gate) * up */
    hearth_status (*swiglu)(struct hearth_backend *be, struct act *out, const struct act *gate,
                            const struct act *up);
    /* Mixture-of-experts feed-forward: for each row t of in, with the
     * experts e_j and weights w_j (j < n_used) that moe_route gives for
     * row t of logits (moe->route),
     *     out[t] = sum_j w_j * down_e_j(act(gate_e_j in[t], up_e_j in[t])),
     * act silu(gate) * up or moe->act's (with the biases moe has),
     * the terms added in order j = 0, 1, ... with one fused multiply-add
     * each (out[t] starts at 0).  The rows routed to one expert pass its
     * matrices together, but each row's result is the one it gets alone.
     * NULL: the backend does not run such layers. */
    hearth_status (*moe_ffn)(struct hearth_backend *be, struct act *out, const struct act *in,
                             const struct act *logits, const struct moe_experts *moe);
    /* x[t][i] += sigmoid(gate[t][0]) * y[t][i] (the shared expert's gate);
     * NULL where moe_ffn is. */
    hearth_status (*add_gated)(struct hearth_backend *be, struct act *x, const struct act *y,
                               const struct act *gate);
    /* out = gelu(gate) * up, GELU in its tanh form (Gemma).  NULL on a
     * backend without it (the families that need it are refused there,
     * struct arch's no_device). */
    hearth_status (*geglu)(struct hearth_backend *be, struct act *out, const struct act *gate,
                           const struct act *up);
    /* dst rows dst_first .. dst_first+n_rows-1 = src rows first ..
     * first+n_rows-1 (dst and src distinct buffers); dst then holds
     * dst_first + n_rows rows. */
    hearth_status (*copy_rows)(struct hearth_backend *be, struct act *dst, int64_t dst_first,
                               const struct act *src, int64_t first, int64_t n_rows);
    /* Products per head (multi-head latent attention, models/deepseek2.c):
     * for each row t and head h < n_heads,
     *     out[t][h * out_stride + out_first + r] =
     *         sum_i w[h][r][i] in[t][h * in_stride + in_first + i],
     * r < w[h].n_out, i < w[h].n_in, the heads' matrices all of one type
     * and shape (the slices of one 3-D tensor).  Each output is one dot
     * product in the kernels' order, as matmul's; out's other columns are
     * left as they are, and out is n_heads * out_stride wide.  NULL: the
     * backend does not run such layers. */
    hearth_status (*matmul_heads)(struct hearth_backend *be, struct act *out, int64_t out_stride,
                                  int64_t out_first, const struct weight *w, int32_t n_heads,
                                  const struct act *in, int64_t in_stride, int64_t in_first);
    /* dst[t][h * dst_stride + dst_first + i] = src[t][h * src_stride +
     * src_first + i] for i < n, h < n_heads (dst and src distinct; dst's
     * other columns left as they are, dst n_heads * dst_stride wide).
     * NULL where matmul_heads is. */
    hearth_status (*copy_heads)(struct hearth_backend *be, struct act *dst, int64_t dst_stride,
                                int64_t dst_first, const struct act *src, int64_t src_stride,
                                int64_t src_first, int32_t n_heads, int64_t n);
    /* A rank of a tensor-parallel stage (tp_group.h): each row of mine
     * holds this rank's share (tp_share) of n_units units of unit floats
     * -- the attention's output of its heads, model.h's struct
     * attn_heads --, and out gets every rank's, each in its columns
     * (n_units * unit floats a row).  out may be mine.  NULL: a backend
     * that does not run in a tensor-parallel stage. */
    hearth_status (*tp_gather_cols)(struct hearth_backend *be, struct act *out, const struct act *mine,
                                    struct hearth_pipeline *p, int64_t n_units, int64_t unit);
    /* Copy the first n_rows rows of KV block src into block dst in every
     * layer of kv whose cache this backend holds, those of the window
     * space or the others (copy-on-write). */
    hearth_status (*kv_copy_block)(struct hearth_backend *be, struct kv_cache *kv, int32_t src,
                                   int32_t dst, int32_t n_rows, bool window);

    /* ---- recurrent layers (models/rwkv6.c); NULL on a backend without them */
    /* out[t] = (in[t] - mean) / sqrt(var + eps) * w + b, mean and variance
     * over each group of `group` elements (group = width: layer norm); b
     * may be NULL. */
    hearth_status (*norm)(struct hearth_backend *be, struct act *out, const struct act *in,
                          int64_t group, const float *w, const float *b, float eps);
    /* prev[t] = the row of x before t in t's sequence; for a sequence's
     * first row of the batch, the row saved in its state (zeros at
     * position 0), which then becomes its last row.  `which` selects one
     * of the layer's saved rows. */
    hearth_status (*token_shift)(struct hearth_backend *be, struct act *prev, const struct act *x,
                                 struct rstate *rs, int il, int which, const struct batch_pos *bp);
    /* out[t][i] = x[t][i] + (prev[t][i] - x[t][i]) * (mu[i] + mix[t][mix_col + i]),
     * without the mix term when mix is NULL. */
    hearth_status (*lerp)(struct hearth_backend *be, struct act *out, const struct act *x,
                          const struct act *prev, const float *mu, const struct act *mix,
                          int64_t mix_col);
    /* out = f(in) elementwise (out may be in). */
    hearth_status (*map)(struct hearth_backend *be, struct act *out, const struct act *in,
                         enum map_fn fn, float arg);
    /* out = a * b elementwise (out may be a or b). */
    hearth_status (*mul)(struct hearth_backend *be, struct act *out, const struct act *a,
                         const struct act *b);
    /* dst = columns first .. first+n_cols-1 of src. */
    hearth_status (*copy_cols)(struct hearth_backend *be, struct act *dst, const struct act *src,
                               int64_t first, int64_t n_cols);
    /* The WKV-6 (u given) or gated-linear-attention (u NULL) recurrence
     * over each sequence's rows (simd/wkv.h): r, lw (log-decays) n_head
     * heads wide, k, v n_head_kv heads (shared by groups of query heads),
     * its state the layer's WKV state of the sequence's slot (reset at
     * position 0); prompts in chunks of chunk_size tokens, single tokens
     * one step. */
    hearth_status (*wkv)(struct hearth_backend *be, struct act *out, const struct act *r,
                         const struct act *k, const struct act *v, const struct act *lw,
                         const float *u, float scale, int32_t n_head, int32_t n_head_kv,
                         int32_t head_size, struct rstate *rs, int il, int32_t chunk_size,
                         const struct batch_pos *bp);
    /* out[t][c] = sum_k w[c][k] x[t - K + 1 + k][c] over each sequence's
     * rows (w: K taps per channel, oldest first), the rows before a
     * sequence's first row of the batch being the K - 1 saved in its state
     * at `offset` floats into layer il's (zeros at position 0), which then
     * become its last K - 1 rows; then silu(out) when asked.  out is not x.
     * Keeps the checkpoints bp asks for (the last K - 1 rows after each). */
    hearth_status (*conv_causal)(struct hearth_backend *be, struct act *out, const struct act *x,
                                 const float *w, int32_t K, bool silu, struct rstate *rs, int il,
                                 size_t offset, const struct batch_pos *bp);
    /* The gated delta rule over each sequence's rows: qkv holds per row the
     * n_k query heads, the n_k key heads and the n_v value heads (q and k
     * L2-normalised here, q also scaled by 1/sqrt(head_dim)), beta and
     * alpha n_v values per row (the gates' inputs); out gets n_v heads.
     * Each head's state is its sequence's in layer il (reset at position
     * 0); prompts in chunks of chunk_size tokens, single tokens one step;
     * a sequence with checkpoints (bp) token by token, keeping each. */
    hearth_status (*gated_delta)(struct hearth_backend *be, struct act *out, const struct act *qkv,
                                 const struct act *beta, const struct act *alpha,
                                 const struct deltanet_params *p, struct rstate *rs, int il,
                                 int32_t chunk_size, const struct batch_pos *bp);
};

struct hearth_backend {
    const struct backend_ops *ops;
    int n_threads;
    void *impl;
};

/* The most products one matmul_set takes (a layer's q, k and v). */
#define MATMUL_SET_MAX 3

/* outs[i] = ws[i] x in for each i < n, as one step where the backend can. */
static inline hearth_status backend_matmul_set(struct hearth_backend *be, int n, struct act *const outs[],
                                               const struct weight *const ws[], const struct act *in)
{
    if (be->ops->matmul_set) return be->ops->matmul_set(be, n, outs, ws, in);
    for (int i = 0; i < n; i++) {
        hearth_status st = be->ops->matmul(be, outs[i], ws[i], in);
        if (st) return st;
    }
    return HEARTH_OK;
}

/* The kernel table a CPU backend uses. */
const struct hearth_kernels *backend_cpu_kernels(const struct hearth_backend *be);

/* The CPU backend (always available), with the kernels chosen for this
 * CPU, or with a given kernel table (tests compare the paths). */
struct hearth_kernels;
hearth_status backend_cpu_new(int n_threads, struct hearth_backend **out);
hearth_status backend_cpu_new_with(int n_threads, const struct hearth_kernels *kernels,
                                   struct hearth_backend **out);
void backend_cpu_free(struct hearth_backend *be);

/* The OpenCL backend (opencl/): runs the layers the model offloaded
 * (model->offload), whose weights are already on the device, and keeps
 * their KV cache in device memory (allocated here for kv's layers from
 * model->offload.first_layer on, in the same blocks and slots as the
 * host's).  Before allocating anything it checks that the KV cache and
 * the buffers of batches of up to n_batch tokens, of sequences of up to
 * n_ctx positions, fit the device memory left (HEARTH_E_NOMEM naming the
 * bytes needed and available when not).  Without OpenCL support in the
 * build it fails with HEARTH_E_UNSUPPORTED. */
hearth_status backend_opencl_new(const hearth_model *model, struct kv_cache *kv, int32_t n_batch,
                                 int32_t n_ctx, struct hearth_backend **out);
void backend_opencl_free(struct hearth_backend *be);

#endif /* HEARTH_BACKEND_H */

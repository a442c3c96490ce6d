/*
 * model.h -- the loaded model: hyperparameters, weights bound to the
 * tensors of the mapped GGUF file, and the per-architecture hooks in
 * models/.
 */
#ifndef HEARTH_MODEL_H
#define HEARTH_MODEL_H

#include "internal.h"

struct hearth_backend;
struct forward;
struct act;
struct rwkv_model;
struct deltanet_model;

/* A weight matrix (or vector) as stored in the file: ne[0] = n_in elements
 * per row, ne[1] = n_out rows.  data points into the mapping; a device
 * backend keeps its own copy in dev. */
struct weight {
    const char *name;
    hearth_type type;
    int64_t n_in;        /* elements per row */
    int64_t n_out;       /* rows */
    size_t row_bytes;
    const void *data;
    const void *packed;  /* row-interleaved copy for the CPU kernels
                          * (simd/kernels.h), or NULL */
    void *dev;           /* backend-private copy (OpenCL buffer), or NULL */
    bool dev_packed_order; /* the device sums its products in the CPU's order
                            * for packed weights (simd/kernels.h), because
                            * the CPU would read this matrix packed */
    /* Split by output rows over the ranks of a tensor-parallel stage
     * (model.c, split_weights): this rank computes rows tp_first ..
     * tp_first + tp_rows - 1 only (packed holds only those), and the
     * matrix product gathers the others from the stage's ranks
     * (backend_cpu.c).  tp NULL: every row here. */
    struct hearth_pipeline *tp;
    int64_t tp_first, tp_rows;
};

/* Rank r's share [*first, *first + *count) of n_units units shared out
 * among the n ranks of a tensor-parallel stage: contiguous, as evenly as
 * they go, the earlier ranks taking the extra units. */
static inline void tp_share(int64_t n_units, int32_t n, int32_t r, int64_t *first, int64_t *count)
{
    const int64_t base = n_units / n, extra = n_units % n;
    *first = r * base + (r < extra ? r : extra);
    *count = base + (r < extra);
}

/* The rows [*first, *first + *rows) of a matrix of n_out rows that rank
 * r of a stage of n ranks computes: whole groups of 8 rows (the packed
 * kernels' groups), shared out by tp_share. */
static inline void weight_tp_rows(int64_t n_out, int32_t n, int32_t r, int64_t *first, int64_t *rows)
{
    tp_share(n_out / 8, n, r, first, rows);
    *first *= 8;
    *rows *= 8;
}

enum rope_style {
    ROPE_NORMAL, /* rotate adjacent pairs (x[2i], x[2i+1]): llama in GGUF */
    ROPE_NEOX    /* rotate (x[i], x[i + d/2]): qwen2 */
};

struct rope_params {
    enum rope_style style;
    int32_t n_dims;        /* leading dimensions of each head that rotate */
    float freq_base;       /* theta base */
    float freq_scale;      /* 1 / linear scaling factor */
    const float *freq_factors; /* per pair divisors (Llama 3.1 rope_freqs), or NULL */
    float mscale;          /* cos and sin multiplied by this (Phi-3's LongRoPE
                            * attention factor, YaRN's magnitude); 1: none */
    /* YaRN (Peng et al. 2023): pair i turns at the interpolated angle
     * (freq_scale times the original) below dimension yarn_low, at the
     * original one above yarn_high, and mixes the two linearly between:
     *     ramp_i = 1 - clamp((i - yarn_low) / max(0.001, yarn_high - yarn_low), 0, 1),
     *     theta_i = interp (1 - ramp_i ext) + orig ramp_i ext,  ext = yarn_ext.
     * yarn_ext 0: no YaRN (plain linear scaling). */
    float yarn_ext, yarn_low, yarn_high;
};

/* The experts' activation (backend.h, moe_ffn). */
enum moe_act {
    MOE_SILU,       /* silu(gate) * up */
    MOE_SWIGLU_OAI  /* gpt-oss: g = min(gate, limit), u = clamp(up, -limit, limit),
                     * g * sigmoid(alpha g) * (u + 1) */
};

/* How the router's logits become the experts' scores (backend.h,
 * moe_route). */
enum moe_gating {
    MOE_GATING_SOFTMAX, /* softmax over all experts (Mixtral, Qwen, DeepSeek-V2) */
    MOE_GATING_SIGMOID  /* each expert's sigmoid (DeepSeek-V3, Kimi-K2) */
};

struct hparams {
    int32_t n_ctx_train;
    int32_t n_ctx_orig;    /* Phi-3: the context its short RoPE factors are for */
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_ff;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t head_dim;      /* per head, keys and values (queries too) */
    int32_t n_vocab;
    float norm_eps;
    struct rope_params rope;
    /* Mixture of experts (models/moe.c); n_expert 0: a dense feed-forward. */
    int32_t n_expert;      /* experts per layer */
    int32_t n_expert_used; /* experts each token is routed to (top k) */
    int32_t n_ff_exp;      /* rows of one expert's gate and up matrices */
    int32_t n_ff_shexp;    /* the shared expert's (qwen2moe); 0: none */
    bool moe_norm_topk;    /* the k routing weights renormalised to sum 1 */
    enum moe_act moe_act;  /* the experts' activation */
    float moe_alpha, moe_limit; /* MOE_SWIGLU_OAI's constants */
    enum moe_gating moe_gating; /* scores from the router's logits */
    int32_t n_expert_groups;    /* group-limited routing (DeepSeek): the experts in
                                 * this many groups, tokens choose among the */
    int32_t n_expert_groups_used; /* best n_expert_groups_used; 0 groups: none */
    float moe_weights_scale;    /* the routing weights multiplied by this (DeepSeek's
                                 * routed scaling factor); 1: none */
    /* Multi-head latent attention (models/deepseek2.c; DeepSeek-V2, section
     * 2.1): keys and values of every head come from a latent vector per
     * position, which the cache keeps with a rotary key shared by the
     * heads, instead of keys and values.  Attention then runs in the
     * latent space (the queries mapped into it): one key/value head
     * (n_head_kv 1) of head_dim = n_rot + kv_latent elements, [k_rope |
     * c_kv], whose last kv_latent elements are the values.  0: keys and
     * values in rows of their own, head_dim each. */
    int32_t kv_latent;     /* kv_lora_rank */
    int32_t q_lora_rank;   /* rank of the queries' low-rank path; 0: one matrix */
    int32_t qk_nope_dim;   /* per head, the query/key elements without RoPE */
    int32_t v_head_dim;    /* per head, the values of the decompressed form */
    int32_t n_layer_dense; /* leading layers with a dense feed-forward (DeepSeek) */
    struct rope_params rope_swa; /* RoPE of the sliding-window layers (Gemma 3's
                                  * local base); the same as rope elsewhere */
    float attn_scale;      /* queries are multiplied by this: 1/sqrt(head_dim),
                            * or the family's own (Gemma's query_pre_attn_scalar);
                            * 0: 1/sqrt(head_dim) */
    float attn_softcap;    /* > 0: attention scores soft-capped (Gemma 2) */
    float final_softcap;   /* > 0: logits soft-capped (Gemma 2, some Gemma 3) */
    float embd_scale;      /* token embeddings multiplied by this (Gemma: sqrt(d));
                            * 0 or 1: none */
    int32_t n_swa;         /* sliding window: a position sees at most the last
                            * n_swa positions, itself included; 0: none */
    int32_t swa_period;    /* with n_swa: layer il slides when il % swa_period <
                            * swa_period - 1 (Gemma 2: 2, Gemma 3: 6); 1: all */
    /* Recurrent layers (models/rwkv6.c); all zero for attention models. */
    int32_t wkv_head_size;    /* head size of the WKV state (n_head heads) */
    int32_t time_mix_extra;   /* rank of the five-way token-shift interpolation */
    int32_t time_decay_extra; /* rank of the data-dependent decay */
    int32_t rescale_every;    /* halve the residual stream every n layers; 0: never */
    int32_t n_token_shift;    /* saved previous-token rows per layer */
    /* Encoders (models/bert.c): every position attends to every position
     * of its sequence, later ones too, so a sequence's whole input runs in
     * one step (the engine never cuts it into chunks, nor takes a cached
     * prefix); false: causal attention. */
    bool bidirectional;
};

/* The window of layer il: 0 where it sees every earlier position. */
static inline int32_t hparams_layer_window(const struct hparams *hp, int32_t il)
{
    if (hp->n_swa <= 0) return 0;
    if (hp->swa_period <= 1 || il % hp->swa_period < hp->swa_period - 1) return hp->n_swa;
    return 0;
}

/* The widest window of the layers when every layer slides, 0 when any
 * layer attends to every position: a sequence needs only the keys and
 * values of the last hparams_max_window positions (when not 0). */
static inline int32_t hparams_max_window(const struct hparams *hp)
{
    int32_t w = 0;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const int32_t lw = hparams_layer_window(hp, il);
        if (lw == 0) return 0; /* a global layer needs everything */
        if (lw > w) w = lw;
    }
    return w;
}

struct layer {
    struct weight attn_norm;
    struct weight wq, wk, wv, wo;
    struct weight bq, bk, bv;     /* biases (qwen2); data NULL when absent */
    struct weight bo;             /* the output projection's bias (gpt-oss) */
    struct weight attn_sinks;     /* one softmax logit per head (gpt-oss) */
    struct weight attn_q_norm;    /* per-head query and key norms (qwen3, gemma3), */
    struct weight attn_k_norm;    /* head_dim weights each; data NULL when absent */
    struct weight attn_post_norm; /* norms of the attention and FFN outputs (gemma2, */
    struct weight ffn_post_norm;  /* gemma3); data NULL when absent */
    struct weight ffn_norm;
    struct weight w_gate, w_up, w_down;
    /* Mixture of experts: the router (n_embd x n_expert), and per expert
     * a view of its matrix in the file's 3-D tensors (n_expert views
     * each, in the model's expert table); NULL for a dense layer. */
    struct weight ffn_gate_inp;
    struct weight *gate_exps, *up_exps, *down_exps;
    /* Biases (gpt-oss), data NULL when absent: the router's (n_expert)
     * and the experts' (n_expert rows of n_ff_exp, n_ff_exp and n_embd
     * floats; F32). */
    struct weight ffn_gate_inp_b, gate_exps_b, up_exps_b, down_exps_b;
    /* DeepSeek-V3's selection bias of the experts (n_expert, F32); data
     * NULL when absent. */
    struct weight exp_probs_b;
    /* Multi-head latent attention (deepseek2; data NULL elsewhere): the
     * queries' low-rank path (wq_a and its norm, then wq is attn_q_b; wq
     * alone is attn_q), the latent's and the rotary key's rows of
     * attn_kv_a_mqa and the latent's norm, and per head the map of its
     * query into the latent space (k_b: n_head views of kv_latent x
     * qk_nope_dim) and of its latent output to its values (v_b: n_head
     * views of v_head_dim x kv_latent), in model.head_slices. */
    struct weight wq_a, attn_q_a_norm;
    struct weight wkv_c, wk_rope, attn_kv_a_norm;
    struct weight *k_b, *v_b;
    /* The shared expert and its scalar gate (qwen2moe; DeepSeek's have no
     * gate); data NULL when absent. */
    struct weight gate_inp_shexp;
    struct weight w_gate_shexp, w_up_shexp, w_down_shexp;
    /* Post-norm encoders (models/bert.c; data NULL elsewhere): the layer
     * norms after the attention's and the feed-forward's residual adds,
     * with their biases, and the feed-forward's biases. */
    struct weight attn_out_norm, attn_out_norm_b;
    struct weight layer_out_norm, layer_out_norm_b;
    struct weight b_up, b_down;
};

/* The most matrices of one layer an architecture lists for packing. */
#define ARCH_MATRICES_MAX 24

/* What an architecture provides (models/<family>.c). */
struct arch {
    const char *name;
    /* Read hyperparameters and bind the tensors into model. */
    hearth_status (*load)(hearth_model *model);
    /* One transformer layer over the batch in f (see src/backend/forward.h). */
    hearth_status (*layer)(struct forward *f, int il);
    /* Why the OpenCL backend cannot run this family's layers (an operation
     * it lacks), or NULL when it can. */
    const char *no_device;
    /* The widths of the extra activation buffers its layers use
     * (forward.h, FORWARD_EXTRA_MAX of them; 0: none); NULL: none. */
    void (*extra_widths)(const hearth_model *m, int64_t widths[]);
    /* What a recurrent family adds (below); NULL for attention ones. */
    const struct arch_recurrent *recurrent;
    /* Its attention layers run through family_attention (models/family.c):
     * keys and values per head, which a tensor-parallel stage splits by
     * key/value heads (model.c, split_heads). */
    bool heads_split;
};

/* What recurrent architectures (models/rwkv6.c) add to struct arch.
 * Floats of the fixed-size state one sequence keeps per layer (struct
 * rstate); the final norm of the rows in x (instead of the RMS norm with
 * output_norm); the matrices of a layer the CPU may read packed (at
 * most ARCH_MATRICES_MAX); and freeing what load allocated. */
struct arch_recurrent {
    size_t (*state_floats)(const hearth_model *m);
    hearth_status (*output_norm)(struct forward *f, struct act *x);
    int (*matrices)(hearth_model *m, int il, struct weight *out[]);
    void (*release)(hearth_model *m);
    /* Hybrid families (models/qwen35.c): whether layer il keeps keys and
     * values as well (its attention layers); NULL: no layer does. */
    bool (*has_kv)(const hearth_model *m, int il);
    /* Its operations keep the checkpoints a batch asks for (batch_pos):
     * speculative decoding can roll its state back. */
    bool checkpoints;
};

/* Where the layers run (src/model/offload.c; the device side in opencl/). */
struct offload {
    int32_t first_layer;      /* first layer on the device; n_layer when none */
    bool output;              /* final norm and output layer on the device */
    int32_t device;           /* index in hearth_devices(), -1 when none */
    char device_name[256];
    uint64_t bytes;           /* weights uploaded */
    double build_ms;          /* building or loading the kernels */
    bool build_cached;
    char *fallback;           /* why offload was given up (gpu_fallback), or NULL */
    struct ocl_model *ocl;    /* the device state, opaque outside opencl/ */
};

/* The attention heads a rank runs (DESIGN.md, "Tensor parallelism"): on
 * a rank of a tensor-parallel stage whose attention is split by heads
 * (model.c, split_heads; tp set), key/value heads kv_first .. kv_first +
 * n_kv - 1 of hp.n_head_kv and the query heads that read them, q_first ..
 * q_first + n_q - 1 (n_head / n_head_kv of them per key/value head): its
 * layers' q, k and v matrices (and biases, sinks) are those heads' rows,
 * its KV cache holds those heads, and the attention's output is gathered
 * over tp before the output projection.  tp NULL: every head (the other
 * fields are not read). */
struct attn_heads {
    struct hearth_pipeline *tp;
    int32_t kv_first, n_kv;
    int32_t q_first, n_q;
};

/* A tensor-parallel stage's share of the routed experts of every mixture
 * layer (DESIGN.md, "Tensor parallelism"; model.c, split_experts):
 * experts first .. first + count - 1 (tp_share of hp.n_expert) run here,
 * each whole, the others on the stage's other ranks, and the mixture
 * gathers their results (backend.h, struct moe_experts).  tp NULL: every
 * expert here. */
struct expert_share {
    struct hearth_pipeline *tp;
    int32_t first, count;
};

struct hearth_model {
    hearth_model_params params;
    hearth_gguf *gguf;
    const struct arch *arch;
    struct hparams hp;
    struct weight tok_embd;
    struct weight output_norm;
    struct weight output;         /* may alias tok_embd (tied embeddings) */
    struct weight rope_freqs;     /* data NULL when absent */
    struct weight rope_long;      /* Phi-3's LongRoPE factors; data NULL when absent */
    struct weight rope_short;
    struct layer *layers;
    struct weight *experts;       /* the layers' expert views, or NULL */
    struct weight *head_slices;   /* the layers' per-head views (deepseek2), or NULL */
    void *packed;                 /* the packed copies of weights (see pack_weights) */
    uint64_t packed_bytes;        /* their size */
    uint64_t released_bytes;      /* of the mapping, given back to the file after
                                   * packing or uploading to a device */
    uint64_t n_params;
    uint64_t weight_bytes;
    char desc[128];
    hearth_vocab *vocab;          /* NULL when the file has no tokenizer */
    struct offload offload;
    /* A rank of a pipeline (params.pipeline; src/dist/pipeline.h): it runs
     * layers stage_first .. stage_end - 1, the token embeddings only on
     * the first rank and the output layer only on the last.  Without a
     * pipeline: 0 .. n_layer. */
    struct hearth_pipeline *pipe;
    int32_t stage_first, stage_end;
    struct attn_heads heads;
    struct expert_share experts_share;
    /* A tensor-parallel stage that leaves the attention whole: why, in a
     * few words (model.c, split_heads); empty otherwise. */
    char heads_whole[96];
    const struct arch_recurrent *rec; /* arch->recurrent */
    /* Multi-token prediction (DeepSeek-V3's, Qwen3-Next's and GLM-4.5's "NextN"
     * layers): n_mtp 1 when the file has prediction layers and the family
     * binds the first, as layers[hp.n_layer] (a layer of the family run
     * by its layer function, with keys and values of its own); its input
     * is eh_proj [rmsnorm(embd(token)) enorm | rmsnorm(h) hnorm], h the
     * trunk's output-normed hidden state of the position before, and its
     * output rmsnorm(.) head_norm, read by head.  Weights the file does
     * not have are the trunk's (embd: tok_embd, head_norm: output_norm,
     * head: output). */
    int32_t n_mtp;
    struct mtp_weights {
        struct weight eh_proj, enorm, hnorm, head_norm, head, embd;
    } mtp;
    hearth_pooling pooling;       /* ARCH.pooling_type; NONE when absent */
    /* Encoders' inputs (models/bert.c; data NULL elsewhere): learned
     * absolute positions (n_ctx_train rows), the token types' rows (type
     * 0 is added to every token) and the layer norm of the sum, with its
     * bias.  An encoder has no output layer (output.data NULL): it gives
     * embeddings, not logits. */
    struct weight pos_embd, type_embd;
    struct weight tok_norm, tok_norm_b;
    struct rwkv_model *rwkv;      /* recurrent weights (models/rwkv6.c), or NULL */
    struct deltanet_model *deltanet; /* the hybrid layers (models/qwen35.c), or NULL */
};

/* Memory for packed weights (simd/kernels.h): aligned to a huge page and
 * advised as huge pages where the system has them; NULL (with the error
 * recorded) when out of memory.  Freed with hearth_aligned_free. */
void *model_packed_alloc(size_t bytes);

/* Whether the weights of m (and draft, when not NULL) resident and
 * kv_bytes more (pool names them in the error: "the KV pool")
 * fit in the memory this process may use (host_memory.h): HEARTH_E_NOMEM
 * naming both sizes and what is available when they do not.  *available:
 * what they were checked against (0: not known, and not checked). */
hearth_status model_memory_check(const hearth_model *m, const hearth_model *draft, uint64_t kv_bytes,
                                 const char *pool, uint64_t *available);

/* Bind a tensor by name, checking its shape (ne1 = 0: a vector; ne1 < 0:
 * a matrix with any number of rows).
 * required = false leaves w->data NULL when the tensor is missing. */
hearth_status model_bind(hearth_model *m, struct weight *w, const char *name, int64_t ne0,
                         int64_t ne1, bool required);

/* model_bind of a required tensor that must be F32 (biases, recurrent
 * parameters read as floats), whatever its shape. */
hearth_status model_bind_f32(hearth_model *m, struct weight *w, const char *name, int64_t ne0, int64_t ne1);

/* Bind n_views matrices of ne0 x ne1 to the consecutive slices of a 3-D
 * tensor of ne0 x ne1 x n_views (the experts of a layer; the heads of
 * deepseek2's attn_k_b and attn_v_b), each view pointing into the mapping
 * where its slice lies: nothing is copied.  per names a slice in the
 * errors ("expert", "head"). */
hearth_status model_bind_slices(hearth_model *m, struct weight *views, const char *name, int64_t ne0,
                                int64_t ne1, int64_t n_views, const char *per);
hearth_status model_bind_experts(hearth_model *m, struct weight *views, const char *name, int64_t ne0,
                                 int64_t ne1, int64_t n_views);

/* Offload the layers model->params asks for (falling back to the CPU
 * when allowed), and release the device copies (src/model/offload.c). */
hearth_status model_offload(hearth_model *m);
void model_offload_release(hearth_model *m);
/* The device side (opencl/offload.c): open the device, upload the
 * weights of layers first_layer .. n_layer-1 (and the output layer when
 * output is set), filling m->offload; on failure nothing is left behind. */
hearth_status ocl_offload_model(hearth_model *m, int32_t first_layer, bool output);
void ocl_offload_release(hearth_model *m);

/* The architectures hearth runs; NULL-terminated by name. */
extern const struct arch arch_llama;
extern const struct arch arch_qwen2;
extern const struct arch arch_qwen2moe;
extern const struct arch arch_qwen3moe;
extern const struct arch arch_qwen3;
extern const struct arch arch_gemma2;
extern const struct arch arch_gemma3;
extern const struct arch arch_phi3;
extern const struct arch arch_rwkv6;
extern const struct arch arch_rwkv6qwen2;
extern const struct arch arch_qwen35;
extern const struct arch arch_qwen35moe;
extern const struct arch arch_qwen3next;
extern const struct arch arch_gptoss;
extern const struct arch arch_deepseek2;
extern const struct arch arch_glm4moe;
extern const struct arch arch_bert;
extern const struct arch arch_nomic_bert;

/* The attention hyperparameters of the heads m runs (struct attn_heads):
 * hp with this rank's query and key/value head counts. */
static inline struct hparams model_attn_hparams(const hearth_model *m)
{
    struct hparams hp = m->hp;
    if (m->heads.tp) {
        hp.n_head = m->heads.n_q;
        hp.n_head_kv = m->heads.n_kv;
    }
    return hp;
}

/* Whether m computes embeddings only (an encoder without an output
 * layer): no logits, nothing to sample. */
static inline bool model_embedding_only(const hearth_model *m)
{
    return m->output.data == NULL;
}

#endif /* HEARTH_MODEL_H */

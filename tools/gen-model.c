/*
 * gen-model.c -- writes benchmark models: random weights with the exact
 * tensor shapes of well-known small models, quantized with one of the
 * recipes of hearth quantize, so that speed can be measured (and compared
 * with other engines) without downloading any weights.
 *
 * Weights are drawn from a normal distribution with standard deviation
 * 0.02 (the usual initialisation scale, which keeps activations in a sane
 * range through every layer); norm weights are 1.  Each row has its own
 * random stream derived from the seed, the tensor's name and the row
 * number, so the file is the same whatever the thread count.  The
 * vocabulary is copied from a vocabulary-only GGUF file (--vocab, padded
 * with the shape's added control tokens, if it has any, and unused "[PADn]"
 * tokens up to the embedding rows, as model converters pad) or is a
 * synthetic SentencePiece one.  Not installed: a development and
 * benchmarking tool.
 *
 * Speculative decoding needs a draft that agrees with its target, which
 * random layers never do: each rewrites the residual stream.  With
 * --residual-scale F the residual writers (attn_output, ssm_out, ffn_down)
 * are F times smaller, so every layer only nudges the stream, and the model's
 * choices are mostly those of its embeddings and output layer
 * (--output-scale makes that distribution peaked); --draft-layers N
 * --draft FILE also writes the draft: the first N layers of the same
 * file, with the same embeddings and output layer (every row is drawn
 * from its tensor's name, so they are the same bits).  F tunes how often
 * the two agree.
 */
#include "internal.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "gguf.h"
#include "quant.h"
#include "quantize.h"
#include "tokenizer.h"
#include "utf8.h"

#define WEIGHT_STD 0.02

/* ------------------------------------------------------------------------
 * Shapes
 * ------------------------------------------------------------------------ */

struct shape {
    const char *name;
    const char *arch;        /* general.architecture */
    const char *title;       /* general.name */
    int n_layer, n_embd, n_ff, n_head, n_head_kv, n_vocab, n_ctx;
    int head_dim;            /* attention.key_length; 0: n_embd / n_head, not written */
    float rope_base, norm_eps;
    bool tied;               /* no output.weight: token_embd doubles as it */
    bool qkv_bias;
    bool llama3_rope;        /* rope_freqs.weight with Llama 3.1 scaling */
    bool qk_norm;            /* attn_q_norm / attn_k_norm per layer (qwen3, gemma3) */
    /* Weights' standard deviations: the matrices (0: WEIGHT_STD), the
     * output layer (0: as the matrices), and the norms' spread around 1
     * (0: all ones).  The micro shapes use larger values so that every
     * part of the layer moves the logits (a sensitive test fingerprint). */
    double weight_std, output_std, norm_std;
    /* Gemma: post-attention and post-FFN norms, soft-capping, windows */
    bool post_norms;
    float attn_softcap, final_softcap; /* written when > 0 */
    int sliding_window, swa_pattern;   /* written when > 0 */
    float rope_base_swa;               /* written when > 0 */
    float rope_linear;                 /* rope.scaling linear factor, when > 0 */
    /* Phi-3: fused attn_qkv and gate/up, LongRoPE factors and their
     * original context and attention factor */
    bool fused;
    int n_ctx_orig;                    /* > 0: LongRoPE */
    /* mixture of experts: 0 experts for a dense feed-forward */
    int n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
    int head_size;           /* rwkv6: WKV head size (n_head = n_embd / head_size) */
    /* Qwen3.5's hybrid stack: every full_attn_interval-th layer is full
     * attention with a gated query (attn_q twice as wide: per head the
     * query, then its output gate), the others Gated DeltaNet linear
     * attention; post_attention_norm is the feed-forward's pre-norm.
     * 0: no linear-attention layers. */
    int full_attn_interval;
    int ssm_conv_kernel;     /* causal depthwise convolution taps */
    int ssm_state;           /* key (= value) head dimension of the linear layers */
    int ssm_groups;          /* key heads of the linear layers */
    int ssm_v_heads;         /* value heads (a multiple of the key heads) */
    bool ssm_ba;             /* qwen3next: one ssm_ba {E, 2 n_v} for beta and alpha (per
                              * key head, its value heads' betas, then their alphas) */
    int n_rot;               /* rope.dimension_count: partial rotation; 0: head_dim */
    int n_mtp;               /* multi-token prediction ("NextN") layers after the
                              * n_layer of the trunk (nextn_predict_layers) */
    int32_t rope_sections[4]; /* multi-section RoPE, written when the first is > 0 */
    /* The control tokens the model adds after its base vocabulary, in
     * order (NULL-terminated): --vocab's padding starts with them. */
    const char *const *added_tokens;
    /* gpt-oss: q/k/v and output biases, a sink per head, the experts'
     * and the router's biases, post_attention_norm as the experts'
     * pre-norm; YaRN over an original context, when yarn_factor > 0 */
    bool oai;
    float yarn_factor;
    int yarn_orig;
    float yarn_beta_fast, yarn_beta_slow; /* the YaRN ramp's ends, written when > 0 */
    /* deepseek2 (multi-head latent attention; kv_lora > 0): the latent's
     * rank, the queries' low rank (0: one attn_q), per head the query/key
     * elements without RoPE and the values (n_rot: the rotary ones); the
     * leading dense layers, the shared experts (n_ff_exp each), sigmoid
     * routing with a selection bias (else softmax), expert groups (0:
     * none), the routing weights' scale (0: not written) and norm, and
     * YaRN's mscale_all_dim (0: not written) */
    int kv_lora, q_lora, qk_nope, v_head;
    int n_dense_lead, n_shared;
    bool sigmoid_gating;
    int n_groups, n_groups_used;
    float weights_scale;
    bool weights_norm;
    float mscale_all_dim;
    /* tokenizer.ggml.pre of a byte-level BPE vocabulary: written over
     * --vocab's, or with a synthetic byte-level BPE vocabulary (NULL: a
     * synthetic SentencePiece one) */
    const char *pre;
    /* embedding models: ARCH.pooling_type (written when > 0) and
     * tokenizer.ggml.add_eos_token (the input ends with the EOS token) */
    int pooling;
    bool add_eos;
    /* encoders (models/bert.c): 1 bert (learned positions, GELU), 2
     * nomic-bert (fused attn_qkv, rotary positions, SwiGLU, no biases);
     * with a synthetic WordPiece vocabulary */
    int encoder;
};

/* Phi-3 and Phi-3.5 add these to the 32,000 tokens of Llama 2's
 * SentencePiece vocabulary (ids 32000-32010). */
static const char *const phi3_added_tokens[] = {
    "<|endoftext|>", "<|assistant|>", "<|placeholder1|>", "<|placeholder2|>",
    "<|placeholder3|>", "<|placeholder4|>", "<|system|>", "<|end|>",
    "<|placeholder5|>", "<|placeholder6|>", "<|user|>", NULL,
};

static const struct shape shapes[] = {
    {.name = "tinyllama-1.1b", .arch = "llama", .title = "TinyLlama-1.1B shape, random weights",
     .n_layer = 22, .n_embd = 2048, .n_ff = 5632, .n_head = 32, .n_head_kv = 4, .n_vocab = 32000,
     .n_ctx = 2048, .rope_base = 10000.0f, .norm_eps = 1e-5f},
    {.name = "llama-3.2-1b", .arch = "llama", .title = "Llama-3.2-1B shape, random weights",
     .n_layer = 16, .n_embd = 2048, .n_ff = 8192, .n_head = 32, .n_head_kv = 8, .n_vocab = 128256,
     .n_ctx = 131072, .rope_base = 500000.0f, .norm_eps = 1e-5f, .tied = true, .llama3_rope = true},
    {.name = "qwen2.5-0.5b", .arch = "qwen2", .title = "Qwen2.5-0.5B shape, random weights",
     .n_layer = 24, .n_embd = 896, .n_ff = 4864, .n_head = 14, .n_head_kv = 2, .n_vocab = 151936,
     .n_ctx = 32768, .rope_base = 1000000.0f, .norm_eps = 1e-6f, .tied = true, .qkv_bias = true},
    {.name = "qwen3-0.6b", .arch = "qwen3", .title = "Qwen3-0.6B shape, random weights",
     .n_layer = 28, .n_embd = 1024, .n_ff = 3072, .n_head = 16, .n_head_kv = 8, .n_vocab = 151936,
     .n_ctx = 40960, .head_dim = 128, .rope_base = 1000000.0f, .norm_eps = 1e-6f, .tied = true,
     .qk_norm = true},
    {.name = "micro-qwen3", .arch = "qwen3", .title = "micro qwen3, random weights",
     .n_layer = 2, .n_embd = 256, .n_ff = 512, .n_head = 8, .n_head_kv = 2, .n_vocab = 512,
     .n_ctx = 4096, .head_dim = 64, .rope_base = 1000000.0f, .norm_eps = 1e-6f, .tied = true,
     .qk_norm = true, .weight_std = 0.08, .output_std = 0.5, .norm_std = 0.2},
    /* Qwen3-Embedding: qwen3 pooled at the last token, the input ending
     * with the end-of-text token */
    {.name = "qwen3-embedding-0.6b", .arch = "qwen3", .title = "Qwen3-Embedding-0.6B shape, random weights",
     .n_layer = 28, .n_embd = 1024, .n_ff = 3072, .n_head = 16, .n_head_kv = 8, .n_vocab = 151669,
     .n_ctx = 32768, .head_dim = 128, .rope_base = 1000000.0f, .norm_eps = 1e-6f, .tied = true,
     .qk_norm = true, .pooling = 3, .add_eos = true},
    {.name = "micro-qwen3-embedding", .arch = "qwen3", .title = "micro qwen3 embedding, random weights",
     .n_layer = 2, .n_embd = 256, .n_ff = 512, .n_head = 8, .n_head_kv = 2, .n_vocab = 512,
     .n_ctx = 4096, .head_dim = 64, .rope_base = 1000000.0f, .norm_eps = 1e-6f, .tied = true,
     .qk_norm = true, .weight_std = 0.08, .output_std = 0.5, .norm_std = 0.2, .pooling = 3, .add_eos = true},
    /* Encoders: BGE-small-en-v1.5 (bert, pooled at [CLS]) and
     * nomic-embed-text-v1.5 (nomic-bert, mean pooling), and micro ones */
    {.name = "bge-small-en-v1.5", .arch = "bert", .title = "bge-small-en-v1.5 shape, random weights",
     .n_layer = 12, .n_embd = 384, .n_ff = 1536, .n_head = 12, .n_head_kv = 12, .n_vocab = 30522,
     .n_ctx = 512, .norm_eps = 1e-12f, .pooling = 2, .encoder = 1},
    {.name = "micro-bert", .arch = "bert", .title = "micro bert, random weights",
     .n_layer = 2, .n_embd = 128, .n_ff = 256, .n_head = 4, .n_head_kv = 4, .n_vocab = 512,
     .n_ctx = 512, .norm_eps = 1e-12f, .weight_std = 0.08, .norm_std = 0.2, .pooling = 2, .encoder = 1},
    {.name = "nomic-embed-text-v1.5", .arch = "nomic-bert", .title = "nomic-embed-text-v1.5 shape, random weights",
     .n_layer = 12, .n_embd = 768, .n_ff = 3072, .n_head = 12, .n_head_kv = 12, .n_vocab = 30528,
     .n_ctx = 2048, .rope_base = 1000.0f, .norm_eps = 1e-12f, .pooling = 1, .encoder = 2},
    {.name = "micro-nomic-bert", .arch = "nomic-bert", .title = "micro nomic-bert, random weights",
     .n_layer = 2, .n_embd = 128, .n_ff = 256, .n_head = 4, .n_head_kv = 4, .n_vocab = 512,
     .n_ctx = 2048, .rope_base = 1000.0f, .norm_eps = 1e-12f, .weight_std = 0.08, .norm_std = 0.2,
     .pooling = 1, .encoder = 2},
    /* Qwen3.5-0.8B: the layer count, width and vocabulary are the
     * reference engine's (its 0.8B type is 24 layers of 1024; the Qwen3.5
     * vocabulary has 248,320 tokens); the other sizes are the published
     * configuration as recalled, not checked against its files. */
    {.name = "qwen3.5-0.8b", .arch = "qwen35",
     .title = "Qwen3.5-0.8B shape (heads, widths and linear-attention sizes assumed), random weights",
     .n_layer = 24, .n_embd = 1024, .n_ff = 3584, .n_head = 8, .n_head_kv = 2, .n_vocab = 248320,
     .n_ctx = 262144, .head_dim = 256, .rope_base = 10000000.0f, .norm_eps = 1e-6f, .tied = true,
     .full_attn_interval = 4, .ssm_conv_kernel = 4, .ssm_state = 128,
     .ssm_groups = 16, .ssm_v_heads = 16, .n_rot = 64, .rope_sections = {11, 11, 10, 0}},
    /* Qwen3.5-9B: 32 layers, and a width other than the 4B's 2560 (the
     * reference engine's types); the other sizes as recalled, not checked
     * against its files.  Measure a few layers of it (--layers). */
    {.name = "qwen3.5-9b", .arch = "qwen35",
     .title = "Qwen3.5-9B shape (widths, heads and linear-attention sizes assumed), random weights",
     .n_layer = 32, .n_embd = 4096, .n_ff = 12288, .n_head = 16, .n_head_kv = 4, .n_vocab = 248320,
     .n_ctx = 262144, .head_dim = 256, .rope_base = 10000000.0f, .norm_eps = 1e-6f,
     .full_attn_interval = 4, .ssm_conv_kernel = 4, .ssm_state = 128,
     .ssm_groups = 16, .ssm_v_heads = 32, .n_rot = 64, .rope_sections = {11, 11, 10, 0}},
    /* Qwen3.5-35B-A3B, the smallest published mixture: 40 layers (the
     * reference engine's type); the other sizes as recalled */
    {.name = "qwen3.5-35b-a3b", .arch = "qwen35moe",
     .title = "Qwen3.5-35B-A3B shape (widths, heads, experts assumed), random weights",
     .n_layer = 40, .n_embd = 2048, .n_ff = 512, .n_head = 16, .n_head_kv = 2, .n_vocab = 248320,
     .n_ctx = 262144, .head_dim = 256, .rope_base = 10000000.0f, .norm_eps = 1e-6f,
     .full_attn_interval = 4, .ssm_conv_kernel = 4, .ssm_state = 128,
     .ssm_groups = 16, .ssm_v_heads = 32, .n_rot = 64, .rope_sections = {11, 11, 10, 0},
     .n_expert = 256, .n_expert_used = 8, .n_ff_exp = 512, .n_ff_shexp = 512},
    /* Qwen3-Next-80B-A3B: 48 layers of 2048 (the reference engine's
     * type), the Qwen2 vocabulary; 512 experts (10 used) of 512 and the
     * heads as published, recalled */
    {.name = "qwen3-next-80b-a3b", .arch = "qwen3next",
     .title = "Qwen3-Next-80B-A3B shape (heads and experts as recalled), random weights",
     .n_layer = 48, .n_embd = 2048, .n_ff = 5120, .n_head = 16, .n_head_kv = 2, .n_vocab = 151936,
     .n_ctx = 262144, .head_dim = 256, .rope_base = 10000000.0f, .norm_eps = 1e-6f,
     .full_attn_interval = 4, .ssm_conv_kernel = 4, .ssm_state = 128,
     .ssm_groups = 16, .ssm_v_heads = 32, .ssm_ba = true, .n_rot = 64,
     .n_expert = 512, .n_expert_used = 10, .n_ff_exp = 512, .n_ff_shexp = 512},
    /* both kinds of layer twice; 4 value heads on 2 key heads, so that
     * the tiled value-to-key head mapping matters; the sections cover
     * all 8 rotated pairs */
    {.name = "micro-qwen35", .arch = "qwen35", .title = "micro qwen35, random weights",
     .n_layer = 4, .n_embd = 256, .n_ff = 512, .n_head = 4, .n_head_kv = 2, .n_vocab = 512,
     .n_ctx = 4096, .head_dim = 64, .rope_base = 10000000.0f, .norm_eps = 1e-6f, .tied = true,
     .full_attn_interval = 2, .ssm_conv_kernel = 4, .ssm_state = 32,
     .ssm_groups = 2, .ssm_v_heads = 4, .n_rot = 16, .rope_sections = {3, 3, 2, 0},
     .weight_std = 0.08, .output_std = 0.5, .norm_std = 0.2},
    /* micro-qwen35 with experts and a shared expert in every layer */
    {.name = "micro-qwen35moe", .arch = "qwen35moe", .title = "micro qwen35moe, random weights",
     .n_layer = 4, .n_embd = 256, .n_ff = 512, .n_head = 4, .n_head_kv = 2, .n_vocab = 512,
     .n_ctx = 4096, .head_dim = 64, .rope_base = 10000000.0f, .norm_eps = 1e-6f, .tied = true,
     .full_attn_interval = 2, .ssm_conv_kernel = 4, .ssm_state = 32,
     .ssm_groups = 2, .ssm_v_heads = 4, .n_rot = 16, .rope_sections = {3, 3, 2, 0},
     .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 128, .n_ff_shexp = 256,
     .weight_std = 0.08, .output_std = 0.5, .norm_std = 0.2},
    /* Qwen3-Next: the experts of micro-qwen35moe, ssm_ba, plain NEOX RoPE
     * on 16 dims (no sections); with 2 value heads per key head the
     * grouped value-to-key head mapping differs from the tiled one */
    {.name = "micro-qwen3next", .arch = "qwen3next", .title = "micro qwen3next, random weights",
     .n_layer = 4, .n_embd = 256, .n_ff = 512, .n_head = 4, .n_head_kv = 2, .n_vocab = 512,
     .n_ctx = 4096, .head_dim = 64, .rope_base = 10000000.0f, .norm_eps = 1e-6f, .tied = true,
     .full_attn_interval = 2, .ssm_conv_kernel = 4, .ssm_state = 32,
     .ssm_groups = 2, .ssm_v_heads = 4, .ssm_ba = true, .n_rot = 16, .n_mtp = 1,
     .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 128, .n_ff_shexp = 256,
     .weight_std = 0.08, .output_std = 0.5, .norm_std = 0.2},
    {.name = "gemma-2-2b", .arch = "gemma2", .title = "Gemma-2-2B shape, random weights",
     .n_layer = 26, .n_embd = 2304, .n_ff = 9216, .n_head = 8, .n_head_kv = 4, .n_vocab = 256000,
     .n_ctx = 8192, .head_dim = 256, .rope_base = 10000.0f, .norm_eps = 1e-6f, .tied = true,
     .post_norms = true, .attn_softcap = 50.0f, .final_softcap = 30.0f, .sliding_window = 4096},
    {.name = "micro-gemma2", .arch = "gemma2", .title = "micro gemma2, random weights",
     .n_layer = 2, .n_embd = 256, .n_ff = 512, .n_head = 4, .n_head_kv = 2, .n_vocab = 512,
     .n_ctx = 8192, .head_dim = 64, .rope_base = 10000.0f, .norm_eps = 1e-6f, .tied = true,
     .post_norms = true, .attn_softcap = 1.5f, .final_softcap = 8.0f, .sliding_window = 32,
     .weight_std = 0.08, .output_std = 0.3, .norm_std = 0.2},
    {.name = "gemma-3-1b", .arch = "gemma3", .title = "Gemma-3-1B shape, random weights",
     .n_layer = 26, .n_embd = 1152, .n_ff = 6912, .n_head = 4, .n_head_kv = 1, .n_vocab = 262144,
     .n_ctx = 32768, .head_dim = 256, .rope_base = 1000000.0f, .norm_eps = 1e-6f, .tied = true,
     .qk_norm = true, .post_norms = true, .sliding_window = 512, .swa_pattern = 6,
     .rope_base_swa = 10000.0f},
    {.name = "micro-gemma3", .arch = "gemma3", .title = "micro gemma3, random weights",
     .n_layer = 3, .n_embd = 256, .n_ff = 512, .n_head = 4, .n_head_kv = 2, .n_vocab = 512,
     .n_ctx = 32768, .head_dim = 64, .rope_base = 1000000.0f, .norm_eps = 1e-6f, .tied = true,
     .qk_norm = true, .post_norms = true, .sliding_window = 24, .swa_pattern = 3,
     .rope_base_swa = 10000.0f, .rope_linear = 4.0f, .final_softcap = 8.0f,
     .weight_std = 0.08, .output_std = 0.3, .norm_std = 0.2},
    {.name = "phi-3.5-mini", .arch = "phi3", .title = "Phi-3.5-mini shape, random weights",
     .n_layer = 32, .n_embd = 3072, .n_ff = 8192, .n_head = 32, .n_head_kv = 32, .n_vocab = 32064,
     .n_ctx = 131072, .rope_base = 10000.0f, .norm_eps = 1e-5f, .fused = true, .n_ctx_orig = 4096,
     .sliding_window = 262144, .added_tokens = phi3_added_tokens},
    {.name = "micro-phi3", .arch = "phi3", .title = "micro test shape (Phi family), random weights",
     .n_layer = 2, .n_embd = 256, .n_ff = 512, .n_head = 8, .n_head_kv = 4, .n_vocab = 512,
     .n_ctx = 8192, .rope_base = 10000.0f, .norm_eps = 1e-5f, .fused = true, .n_ctx_orig = 256,
     .sliding_window = 40, .weight_std = 0.08, .output_std = 0.5, .norm_std = 0.2},
    /* mixtures of experts */
    {.name = "qwen1.5-moe-a2.7b", .arch = "qwen2moe", .title = "Qwen1.5-MoE-A2.7B shape, random weights",
     .n_layer = 24, .n_embd = 2048, .n_ff = 5632, .n_head = 16, .n_head_kv = 16, .n_vocab = 151936,
     .n_ctx = 8192, .rope_base = 1000000.0f, .norm_eps = 1e-6f, .qkv_bias = true, .n_expert = 60,
     .n_expert_used = 4, .n_ff_exp = 1408, .n_ff_shexp = 5632},
    {.name = "qwen3-30b-a3b", .arch = "qwen3moe", .title = "Qwen3-30B-A3B shape, random weights",
     .n_layer = 48, .n_embd = 2048, .n_ff = 6144, .n_head = 32, .n_head_kv = 4, .n_vocab = 151936,
     .n_ctx = 40960, .head_dim = 128, .rope_base = 1000000.0f, .norm_eps = 1e-6f, .qk_norm = true,
     .n_expert = 128, .n_expert_used = 8, .n_ff_exp = 768},
    {.name = "mixtral-8x7b", .arch = "llama", .title = "Mixtral-8x7B shape, random weights",
     .n_layer = 32, .n_embd = 4096, .n_ff = 14336, .n_head = 32, .n_head_kv = 8, .n_vocab = 32000,
     .n_ctx = 32768, .rope_base = 1000000.0f, .norm_eps = 1e-5f, .n_expert = 8, .n_expert_used = 2,
     .n_ff_exp = 14336},
    {.name = "micro-qwen2moe", .arch = "qwen2moe", .title = "micro qwen2moe, random weights",
     .n_layer = 2, .n_embd = 256, .n_ff = 512, .n_head = 4, .n_head_kv = 2, .n_vocab = 512,
     .n_ctx = 4096, .rope_base = 1000000.0f, .norm_eps = 1e-6f, .qkv_bias = true, .n_expert = 8,
     .n_expert_used = 2, .n_ff_exp = 256, .n_ff_shexp = 512, .weight_std = 0.08, .output_std = 0.5,
     .norm_std = 0.2},
    {.name = "micro-qwen3moe", .arch = "qwen3moe", .title = "micro qwen3moe, random weights",
     .n_layer = 2, .n_embd = 256, .n_ff = 512, .n_head = 8, .n_head_kv = 2, .n_vocab = 512,
     .n_ctx = 4096, .head_dim = 64, .rope_base = 1000000.0f, .norm_eps = 1e-6f, .qk_norm = true,
     .n_expert = 16, .n_expert_used = 4, .n_ff_exp = 256, .weight_std = 0.08, .output_std = 0.5,
     .norm_std = 0.2},
    {.name = "micro-mixtral", .arch = "llama", .title = "micro Mixtral-style llama, random weights",
     .n_layer = 2, .n_embd = 256, .n_ff = 256, .n_head = 4, .n_head_kv = 2, .n_vocab = 512,
     .n_ctx = 4096, .rope_base = 10000.0f, .norm_eps = 1e-5f, .n_expert = 8, .n_expert_used = 2,
     .n_ff_exp = 256, .weight_std = 0.08, .output_std = 0.5, .norm_std = 0.2},
    /* gpt-oss (OpenAI's published configurations): 24 or 36 layers of
     * 2880, 64 query and 8 key/value heads of 64, experts of 2880 (4
     * used), sliding window 128 on every other layer, YaRN 32 over 4096,
     * the o200k vocabulary of 201,088 rows */
    {.name = "gpt-oss-20b", .arch = "gpt-oss", .title = "gpt-oss-20b shape, random weights",
     .n_layer = 24, .n_embd = 2880, .n_ff = 2880, .n_head = 64, .n_head_kv = 8, .n_vocab = 201088,
     .n_ctx = 131072, .head_dim = 64, .rope_base = 150000.0f, .norm_eps = 1e-5f, .sliding_window = 128,
     .n_expert = 32, .n_expert_used = 4, .n_ff_exp = 2880, .oai = true, .yarn_factor = 32.0f,
     .yarn_orig = 4096},
    {.name = "gpt-oss-120b", .arch = "gpt-oss", .title = "gpt-oss-120b shape, random weights",
     .n_layer = 36, .n_embd = 2880, .n_ff = 2880, .n_head = 64, .n_head_kv = 8, .n_vocab = 201088,
     .n_ctx = 131072, .head_dim = 64, .rope_base = 150000.0f, .norm_eps = 1e-5f, .sliding_window = 128,
     .n_expert = 128, .n_expert_used = 4, .n_ff_exp = 2880, .oai = true, .yarn_factor = 32.0f,
     .yarn_orig = 4096},
    /* four layers (two sliding, two global), 8 query heads of 64 over a
     * width of 256, 8 experts (4 used), a window of 32 and YaRN 8 over 512 */
    {.name = "micro-gpt-oss", .arch = "gpt-oss", .title = "micro gpt-oss, random weights",
     .n_layer = 4, .n_embd = 256, .n_ff = 128, .n_head = 8, .n_head_kv = 2, .n_vocab = 512,
     .n_ctx = 4096, .head_dim = 64, .rope_base = 150000.0f, .norm_eps = 1e-5f, .sliding_window = 32,
     .n_expert = 8, .n_expert_used = 4, .n_ff_exp = 128, .oai = true, .yarn_factor = 8.0f,
     .yarn_orig = 512, .weight_std = 0.08, .output_std = 0.5, .norm_std = 0.2},
    /* DeepSeek-V2-Lite (its published configuration): 27 layers of 2048,
     * 16 heads, no low-rank queries, the latent of 512 with 64 rotary
     * dimensions, heads of 128 + 64 and values of 128; the first layer
     * dense (10944), then 64 experts (6 used, softmax, not renormalised)
     * of 1408 and 2 shared; YaRN 40 over 4096 with mscale_all_dim 0.707 */
    {.name = "deepseek-v2-lite", .arch = "deepseek2", .title = "DeepSeek-V2-Lite shape, random weights",
     .n_layer = 27, .n_embd = 2048, .n_ff = 10944, .n_head = 16, .n_head_kv = 1, .n_vocab = 102400,
     .n_ctx = 163840, .rope_base = 10000.0f, .norm_eps = 1e-6f, .n_rot = 64, .kv_lora = 512,
     .qk_nope = 128, .v_head = 128, .n_dense_lead = 1, .n_shared = 2, .n_expert = 64, .n_expert_used = 6,
     .n_ff_exp = 1408, .weights_scale = 1.0f, .yarn_factor = 40.0f, .yarn_orig = 4096,
     .mscale_all_dim = 0.707f},
    /* DeepSeek-V3 (and R1, V3.1): 61 layers of 7168, 128 heads, queries of
     * rank 1536, the latent of 512 with 64 rotary dimensions, heads of
     * 128 + 64, values of 128; 3 dense layers (18432), then 256 experts (8
     * used) of 2048 in 8 groups (4 used), sigmoid scores with the
     * selection bias, renormalised and scaled by 2.5, one shared expert;
     * YaRN 40 over 4096 with mscale_all_dim 1.  Measure a few layers of
     * it (--layers, --dense-layers). */
    {.name = "deepseek-v3", .arch = "deepseek2", .title = "DeepSeek-V3 shape, random weights",
     .n_layer = 61, .n_embd = 7168, .n_ff = 18432, .n_head = 128, .n_head_kv = 1, .n_vocab = 129280,
     .n_ctx = 163840, .rope_base = 10000.0f, .norm_eps = 1e-6f, .n_rot = 64, .kv_lora = 512, .q_lora = 1536,
     .qk_nope = 128, .v_head = 128, .n_dense_lead = 3, .n_shared = 1, .n_expert = 256, .n_expert_used = 8,
     .n_ff_exp = 2048, .sigmoid_gating = true, .n_groups = 8, .n_groups_used = 4, .weights_scale = 2.5f,
     .weights_norm = true, .yarn_factor = 40.0f, .yarn_orig = 4096, .mscale_all_dim = 1.0f},
    /* Kimi-K2 (Instruct and Base, their published configuration; the
     * deepseek2 architecture): layers of 7168, 64 heads, queries of rank
     * 1536, the latent of 512 with 64 rotary dimensions, heads of
     * 128 + 64, values of 128; the first layer dense (18432), then
     * experts (8 used) of 2048 in one group, sigmoid scores with the
     * selection bias, renormalised and scaled by 2.827, one shared
     * expert; RoPE base 50000, YaRN 32 over 4096 with both ramp ends at 1
     * rotation and mscale_all_dim 1; 163840 tokens under the kimi-k2
     * pre-tokenizer.  Reduced from 61 layers and 384 experts to 3 and 32,
     * a file of 6.4 GB in Q8_0 (the whole model is 1.03 trillion
     * parameters); --layers 61 --experts 384 restore them. */
    {.name = "kimi-k2", .arch = "deepseek2", .title = "Kimi-K2 shape, random weights",
     .n_layer = 3, .n_embd = 7168, .n_ff = 18432, .n_head = 64, .n_head_kv = 1, .n_vocab = 163840,
     .n_ctx = 131072, .rope_base = 50000.0f, .norm_eps = 1e-6f, .n_rot = 64, .kv_lora = 512, .q_lora = 1536,
     .qk_nope = 128, .v_head = 128, .n_dense_lead = 1, .n_shared = 1, .n_expert = 32, .n_expert_used = 8,
     .n_ff_exp = 2048, .sigmoid_gating = true, .n_groups = 1, .n_groups_used = 1, .weights_scale = 2.827f,
     .weights_norm = true, .yarn_factor = 32.0f, .yarn_orig = 4096, .yarn_beta_fast = 1.0f, .yarn_beta_slow = 1.0f,
     .mscale_all_dim = 1.0f, .pre = "kimi-k2"},
    /* micro DeepSeek-V2-Lite: no low-rank queries, softmax routing without
     * groups, one dense layer, two shared experts, YaRN 4 over 32
     * (mscale_all_dim 0.707): 4 heads of 32 + 32 over a latent of 64 */
    {.name = "micro-deepseek2", .arch = "deepseek2", .title = "micro deepseek2 (V2-Lite style), random weights",
     .n_layer = 3, .n_embd = 256, .n_ff = 256, .n_head = 4, .n_head_kv = 1, .n_vocab = 512, .n_ctx = 4096,
     .rope_base = 10000.0f, .norm_eps = 1e-6f, .n_rot = 32, .kv_lora = 64, .qk_nope = 32, .v_head = 32,
     .n_dense_lead = 1, .n_shared = 2, .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 64,
     .yarn_factor = 4.0f, .yarn_orig = 32, .mscale_all_dim = 0.707f, .weight_std = 0.08, .output_std = 0.5,
     .norm_std = 0.2},
    /* micro DeepSeek-V2: low-rank queries, softmax routing over 4 groups
     * (2 used), weights not renormalised but scaled by 4, one shared
     * expert, no RoPE scaling */
    {.name = "micro-deepseek2-v2", .arch = "deepseek2", .title = "micro deepseek2 (V2 style), random weights",
     .n_layer = 3, .n_embd = 256, .n_ff = 256, .n_head = 4, .n_head_kv = 1, .n_vocab = 512, .n_ctx = 4096,
     .rope_base = 10000.0f, .norm_eps = 1e-6f, .n_rot = 32, .kv_lora = 64, .q_lora = 96, .qk_nope = 32,
     .v_head = 32, .n_dense_lead = 1, .n_shared = 1, .n_expert = 8, .n_expert_used = 3, .n_ff_exp = 64,
     .n_groups = 4, .n_groups_used = 2, .weights_scale = 4.0f, .weight_std = 0.08, .output_std = 0.5,
     .norm_std = 0.2},
    /* micro DeepSeek-V3: low-rank queries, sigmoid routing with the
     * selection bias over 4 groups (2 used), renormalised and scaled by
     * 2.5, YaRN 4 over 32 (mscale_all_dim 1), values wider than the
     * query/key heads' non-rotary part */
    {.name = "micro-deepseek3", .arch = "deepseek2", .title = "micro deepseek2 (V3 style), random weights",
     .n_layer = 3, .n_embd = 256, .n_ff = 256, .n_head = 4, .n_head_kv = 1, .n_vocab = 512, .n_ctx = 4096,
     .rope_base = 10000.0f, .norm_eps = 1e-6f, .n_rot = 32, .kv_lora = 64, .q_lora = 96, .qk_nope = 32,
     .v_head = 64, .n_dense_lead = 1, .n_shared = 1, .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 64,
     .sigmoid_gating = true, .n_groups = 4, .n_groups_used = 2, .weights_scale = 2.5f, .weights_norm = true,
     .yarn_factor = 4.0f, .yarn_orig = 32, .mscale_all_dim = 1.0f, .weight_std = 0.08, .output_std = 0.5,
     .norm_std = 0.2},
    /* micro Kimi-K2: micro-deepseek3's routing in one expert group, the
     * scaling factor 2.827, RoPE base 50000, YaRN 4 over 32 with both ramp
     * ends at 1 rotation (Kimi's beta_fast and beta_slow), values as wide
     * as the query/key heads' non-rotary part, and a synthetic byte-level
     * BPE vocabulary under the kimi-k2 pre-tokenizer */
    {.name = "micro-kimi-k2", .arch = "deepseek2", .title = "micro deepseek2 (Kimi-K2 style), random weights",
     .n_layer = 3, .n_embd = 256, .n_ff = 256, .n_head = 4, .n_head_kv = 1, .n_vocab = 512, .n_ctx = 4096,
     .rope_base = 50000.0f, .norm_eps = 1e-6f, .n_rot = 32, .kv_lora = 64, .q_lora = 96, .qk_nope = 32,
     .v_head = 32, .n_dense_lead = 1, .n_shared = 1, .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 64,
     .sigmoid_gating = true, .n_groups = 1, .n_groups_used = 1, .weights_scale = 2.827f, .weights_norm = true,
     .yarn_factor = 4.0f, .yarn_orig = 32, .yarn_beta_fast = 1.0f, .yarn_beta_slow = 1.0f, .mscale_all_dim = 1.0f,
     .weight_std = 0.08, .output_std = 0.5, .norm_std = 0.2, .pre = "kimi-k2"},
    /* GLM-4.5-Air (its published configuration): 46 layers of 4096, 96
     * query and 8 key/value heads of 128 with q/k/v biases and no head
     * norms, RoPE on half of each head (64 of 128 dimensions, NeoX halves,
     * base 10^6); the first layer dense (10944), then 128 experts (8 used)
     * of 1408 and 1 shared, sigmoid scores with the selection bias,
     * renormalised, scaled by 1; one prediction ("NextN") layer after the
     * trunk; vocabulary 151552.  Measure a few layers of it (--layers). */
    {.name = "glm-4.5-air", .arch = "glm4moe", .title = "GLM-4.5-Air shape, random weights",
     .n_layer = 46, .n_embd = 4096, .n_ff = 10944, .n_head = 96, .n_head_kv = 8, .n_vocab = 151552,
     .n_ctx = 131072, .head_dim = 128, .rope_base = 1000000.0f, .norm_eps = 1e-5f, .qkv_bias = true,
     .n_rot = 64, .n_mtp = 1, .n_dense_lead = 1, .n_shared = 1, .n_expert = 128, .n_expert_used = 8,
     .n_ff_exp = 1408, .sigmoid_gating = true, .weights_scale = 1.0f, .weights_norm = true},
    /* micro GLM-4.5 (GLM-4.5 and 4.6 have head norms, Air has none): 3
     * layers, the first dense, 8 query heads of 64 on 2 key/value heads
     * over a width of 256 (the heads wider than width / heads), RoPE on
     * 32 of 64 dimensions, q/k/v biases and head norms, 8 experts (2
     * used) of 64 and 1 shared, sigmoid scores with the selection bias,
     * renormalised and scaled by 2.5 (GLM-4.5's factor), and a prediction
     * layer */
    {.name = "micro-glm4moe", .arch = "glm4moe", .title = "micro glm4moe (GLM-4.5 style), random weights",
     .n_layer = 3, .n_embd = 256, .n_ff = 512, .n_head = 8, .n_head_kv = 2, .n_vocab = 512, .n_ctx = 4096,
     .head_dim = 64, .rope_base = 1000000.0f, .norm_eps = 1e-5f, .qkv_bias = true, .qk_norm = true,
     .n_rot = 32, .n_mtp = 1, .n_dense_lead = 1, .n_shared = 1, .n_expert = 8, .n_expert_used = 2,
     .n_ff_exp = 64, .sigmoid_gating = true, .weights_scale = 2.5f, .weights_norm = true, .weight_std = 0.08,
     .output_std = 0.5, .norm_std = 0.2},
    {.name = "rwkv6-world-1.6b", .arch = "rwkv6", .title = "RWKV-6-World-1.6B shape, random weights",
     .n_layer = 24, .n_embd = 2048, .n_ff = 7168, .n_head = 32, .n_head_kv = 32, .n_vocab = 65536,
     .n_ctx = 1048576, .rope_base = 0.0f, .norm_eps = 1e-5f, .head_size = 64},
};

/* RWKV-6's low-rank sizes (time_mix_extra_dim, time_decay_extra_dim) at
 * the 1.6B width, as the published models have them. */
#define RWKV_MIX_EXTRA 32
#define RWKV_DECAY_EXTRA 64

/* ------------------------------------------------------------------------
 * Random numbers
 * ------------------------------------------------------------------------ */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* FNV-1a of a name, to give every tensor its own stream. */
static uint64_t name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3u;
    return h;
}

/* n normal values of standard deviation std (Box-Muller, pairs). */
static void normal_row(uint64_t seed, float *x, int64_t n, double std)
{
    uint64_t state = seed;
    for (int64_t i = 0; i < n; i += 2) {
        double u1 = (double)((splitmix64(&state) >> 11) + 1) * 0x1.0p-53; /* (0, 1] */
        double u2 = (double)(splitmix64(&state) >> 11) * 0x1.0p-53;
        double r = sqrt(-2.0 * log(u1)) * std;
        x[i] = (float)(r * cos(6.283185307179586 * u2));
        if (i + 1 < n) x[i + 1] = (float)(r * sin(6.283185307179586 * u2));
    }
}

/* ------------------------------------------------------------------------
 * Tensors
 * ------------------------------------------------------------------------ */

/* FILL_HALF: interpolation weights (0.5); FILL_DECAY: RWKV decay
 * biases spread from -6 (weak decay) to 1 (strong) over the channels;
 * FILL_NEG_EXP: Gated DeltaNet's ssm_a = -exp(A_log), A_log ~ N(0, 0.5),
 * negative as the decay exp(softplus(.) * ssm_a) < 1 needs;
 * FILL_DT_BIAS: its time-step biases spread from -4 to 0 over the heads,
 * so that the decay per token ranges from about 0.98 (a memory of tens
 * of tokens, as trained models have) to about 0.5 (a few tokens);
 * FILL_CONV: convolution taps of standard deviation 1/sqrt(taps), so
 * that the convolution keeps its input's scale. */
enum fill_kind { FILL_NORMAL, FILL_ONES, FILL_ROPE_FACTORS, FILL_LONGROPE_SHORT, FILL_LONGROPE_LONG,
                 FILL_HALF, FILL_DECAY, FILL_NEG_EXP, FILL_DT_BIAS, FILL_CONV };

static int64_t shape_head_dim(const struct shape *s)
{
    return s->head_dim ? s->head_dim : s->n_embd / s->n_head;
}

struct gen_tensor {
    char name[64];
    int64_t ne[4];           /* ne[0] per row; ne[1] x ne[2] x ne[3] rows (ne[2]:
                              * experts, or RWKV's stacked low-rank matrices) */
    uint32_t n_dims;
    enum fill_kind fill;
    bool keep_f32;           /* small RWKV tensors stay F32, as converters keep them */
    hearth_type type;
};

struct generator {
    const struct shape *shape;
    uint64_t seed;
    double residual_scale;   /* attn_output and ffn_down */
    double output_scale;     /* output.weight (token_embd when tied) */
    int threads;
    struct gen_tensor *tensors;
    size_t n_tensors;
    float *scratch;          /* one row per thread */
    int64_t scratch_row;
    int split_max_tensors;   /* > 0: a split model of parts of this many tensors */
};

static void add_tensor3(struct generator *g, const char *name, int64_t ne0, int64_t ne1, int64_t ne2,
                        enum fill_kind fill)
{
    struct gen_tensor *t = &g->tensors[g->n_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = ne2;
    t->ne[3] = 1;
    t->n_dims = ne2 > 1 ? 3 : ne1 > 1 ? 2 : 1;
    t->fill = fill;
    t->keep_f32 = false;
}

static void add_tensor(struct generator *g, const char *name, int64_t ne0, int64_t ne1,
                       enum fill_kind fill);

/* Tensor "blk.IL.SUFFIX" of layer il. */
static void add_layer_tensor3(struct generator *g, int il, const char *suffix, int64_t ne0, int64_t ne1,
                              int64_t ne2, enum fill_kind fill)
{
    char name[64];
    snprintf(name, sizeof name, "blk.%d.%s", il, suffix);
    add_tensor3(g, name, ne0, ne1, ne2, fill);
}

/* Within a layer loop over il: tensor "blk.IL.SUFFIX" of g's layer il. */
#define LAYER(suffix, ne0, ne1, fill) add_layer_tensor3(g, il, suffix, ne0, ne1, 1, fill)

/* The last tensor added becomes ne0 x ne1 x ne2 x ne3, kept in F32. */
static void shape_f32(struct generator *g, int64_t ne2, int64_t ne3, uint32_t n_dims)
{
    struct gen_tensor *t = &g->tensors[g->n_tensors - 1];
    t->ne[2] = ne2;
    t->ne[3] = ne3;
    t->n_dims = n_dims;
    t->keep_f32 = true;
}

/* RWKV-6 (models/rwkv6.c): the tensors the reference engine reads. */
static void list_rwkv6_tensors(struct generator *g)
{
    const struct shape *s = g->shape;
    const int64_t E = s->n_embd, N = s->head_size, H = E / N, F = s->n_ff;
    add_tensor(g, "token_embd.weight", E, s->n_vocab, FILL_NORMAL);
    add_tensor(g, "token_embd_norm.weight", E, 1, FILL_ONES);
    add_tensor(g, "token_embd_norm.bias", E, 1, FILL_NORMAL);
    add_tensor(g, "output_norm.weight", E, 1, FILL_ONES);
    add_tensor(g, "output_norm.bias", E, 1, FILL_NORMAL);
    add_tensor(g, "output.weight", E, s->n_vocab, FILL_NORMAL);
    for (int il = 0; il < s->n_layer; il++) {
        LAYER("attn_norm.weight", E, 1, FILL_ONES);
        LAYER("attn_norm.bias", E, 1, FILL_NORMAL);
        LAYER("attn_norm_2.weight", E, 1, FILL_ONES);
        LAYER("attn_norm_2.bias", E, 1, FILL_NORMAL);
        LAYER("time_mix_lerp_x.weight", E, 1, FILL_HALF);
        shape_f32(g, 1, 1, 3);
        LAYER("time_mix_lerp_fused.weight", E, 1, FILL_HALF);
        shape_f32(g, 1, 5, 4);
        LAYER("time_mix_w1.weight", E, 5 * RWKV_MIX_EXTRA, FILL_NORMAL);
        shape_f32(g, 1, 1, 2);
        LAYER("time_mix_w2.weight", RWKV_MIX_EXTRA, E, FILL_NORMAL);
        shape_f32(g, 5, 1, 3);
        LAYER("time_mix_decay.weight", E, 1, FILL_DECAY);
        shape_f32(g, 1, 1, 3);
        LAYER("time_mix_decay_w1.weight", E, RWKV_DECAY_EXTRA, FILL_NORMAL);
        shape_f32(g, 1, 1, 2);
        LAYER("time_mix_decay_w2.weight", RWKV_DECAY_EXTRA, E, FILL_NORMAL);
        shape_f32(g, 1, 1, 2);
        LAYER("time_mix_first.weight", N, H, FILL_NORMAL);
        shape_f32(g, 1, 1, 2);
        LAYER("time_mix_key.weight", E, E, FILL_NORMAL);
        LAYER("time_mix_value.weight", E, E, FILL_NORMAL);
        LAYER("time_mix_receptance.weight", E, E, FILL_NORMAL);
        LAYER("time_mix_gate.weight", E, E, FILL_NORMAL);
        LAYER("time_mix_ln.weight", E, 1, FILL_ONES);
        LAYER("time_mix_ln.bias", E, 1, FILL_NORMAL);
        LAYER("time_mix_output.weight", E, E, FILL_NORMAL);
        LAYER("channel_mix_lerp_k.weight", E, 1, FILL_HALF);
        shape_f32(g, 1, 1, 3);
        LAYER("channel_mix_lerp_r.weight", E, 1, FILL_HALF);
        shape_f32(g, 1, 1, 3);
        LAYER("channel_mix_key.weight", E, F, FILL_NORMAL);
        LAYER("channel_mix_value.weight", F, E, FILL_NORMAL);
        LAYER("channel_mix_receptance.weight", E, E, FILL_NORMAL);
    }
}

static void add_tensor(struct generator *g, const char *name, int64_t ne0, int64_t ne1,
                       enum fill_kind fill)
{
    add_tensor3(g, name, ne0, ne1, 1, fill);
}

/* The mixture-of-experts feed-forward of layer il: the router, every
 * expert's gate, up and down projections as 3-D tensors (one matrix per
 * expert), and the shape's shared expert with its 1-D sigmoid gate. */
static void list_expert_tensors(struct generator *g, int il)
{
    const struct shape *s = g->shape;
    const int64_t E = s->n_embd;
    add_layer_tensor3(g, il, "ffn_gate_inp.weight", E, s->n_expert, 1, FILL_NORMAL);
    add_layer_tensor3(g, il, "ffn_gate_exps.weight", E, s->n_ff_exp, s->n_expert, FILL_NORMAL);
    add_layer_tensor3(g, il, "ffn_up_exps.weight", E, s->n_ff_exp, s->n_expert, FILL_NORMAL);
    add_layer_tensor3(g, il, "ffn_down_exps.weight", s->n_ff_exp, E, s->n_expert, FILL_NORMAL);
    if (s->n_ff_shexp > 0) {
        add_layer_tensor3(g, il, "ffn_gate_inp_shexp.weight", E, 1, 1, FILL_NORMAL);
        add_layer_tensor3(g, il, "ffn_gate_shexp.weight", E, s->n_ff_shexp, 1, FILL_NORMAL);
        add_layer_tensor3(g, il, "ffn_up_shexp.weight", E, s->n_ff_shexp, 1, FILL_NORMAL);
        add_layer_tensor3(g, il, "ffn_down_shexp.weight", s->n_ff_shexp, E, 1, FILL_NORMAL);
    }
}

/* glm4moe, the GLM-4.5 family (models/glm4moe.c). */
static bool is_glm4moe(const struct shape *s)
{
    return strcmp(s->arch, "glm4moe") == 0;
}

/* The experts of layer il routed as DeepSeek's are (deepseek2, glm4moe):
 * the router and experts, for sigmoid routing the selection bias, and
 * the shared experts (n_ff_exp each, without a gate). */
static void list_routed_tensors(struct generator *g, int il)
{
    const struct shape *s = g->shape;
    const int64_t E = s->n_embd;
    list_expert_tensors(g, il);
    if (s->sigmoid_gating) LAYER("exp_probs_b.bias", s->n_expert, 1, FILL_NORMAL);
    if (s->n_shared > 0) {
        const int64_t n_sh = (int64_t)s->n_ff_exp * s->n_shared;
        LAYER("ffn_gate_shexp.weight", E, n_sh, FILL_NORMAL);
        LAYER("ffn_up_shexp.weight", E, n_sh, FILL_NORMAL);
        LAYER("ffn_down_shexp.weight", n_sh, E, FILL_NORMAL);
    }
}

/* The attention of layer il: its pre-norm, q/k/v (fused where the shape
 * says), their biases, the head norms and the output projection. */
static void list_attention_tensors(struct generator *g, int il)
{
    const struct shape *s = g->shape;
    const int64_t E = s->n_embd, d = shape_head_dim(s), n_q = d * s->n_head, n_kv = d * s->n_head_kv;
    LAYER("attn_norm.weight", E, 1, FILL_ONES);
    if (s->fused) {
        LAYER("attn_qkv.weight", E, n_q + 2 * n_kv, FILL_NORMAL);
    } else {
        LAYER("attn_q.weight", E, n_q, FILL_NORMAL);
        LAYER("attn_k.weight", E, n_kv, FILL_NORMAL);
        LAYER("attn_v.weight", E, n_kv, FILL_NORMAL);
    }
    if (s->qkv_bias) {
        LAYER("attn_q.bias", n_q, 1, FILL_NORMAL);
        LAYER("attn_k.bias", n_kv, 1, FILL_NORMAL);
        LAYER("attn_v.bias", n_kv, 1, FILL_NORMAL);
    }
    if (s->qk_norm) {
        LAYER("attn_q_norm.weight", d, 1, FILL_ONES);
        LAYER("attn_k_norm.weight", d, 1, FILL_ONES);
    }
    LAYER("attn_output.weight", n_q, E, FILL_NORMAL);
}

/* The dense SwiGLU of layer il. */
static void list_swiglu_tensors(struct generator *g, int il)
{
    const struct shape *s = g->shape;
    LAYER("ffn_gate.weight", s->n_embd, s->n_ff, FILL_NORMAL);
    LAYER("ffn_up.weight", s->n_embd, s->n_ff, FILL_NORMAL);
    LAYER("ffn_down.weight", s->n_ff, s->n_embd, FILL_NORMAL);
}

/* The tensors of a prediction ("NextN") layer il beside its layer's:
 * the projection of the next token's embedding and the trunk's normed
 * hidden state (eh_proj over their two norms), and the norm before the
 * output layer. */
static void list_nextn_tensors(struct generator *g, int il)
{
    const int64_t E = g->shape->n_embd;
    LAYER("nextn.eh_proj.weight", 2 * E, E, FILL_NORMAL);
    LAYER("nextn.enorm.weight", E, 1, FILL_ONES);
    LAYER("nextn.hnorm.weight", E, 1, FILL_ONES);
    LAYER("nextn.shared_head_norm.weight", E, 1, FILL_ONES);
}

/* Whether layer il of a hybrid stack is linear attention (Gated
 * DeltaNet): all but every full_attn_interval-th. */
static bool is_linear_layer(const struct shape *s, int il)
{
    return s->full_attn_interval > 0 && (il + 1) % s->full_attn_interval != 0;
}

/* Qwen3.5 (qwen35): attention and post-attention norms on every layer,
 * gated full attention or Gated DeltaNet by the layer pattern, then a
 * SwiGLU feed-forward whose pre-norm is post_attention_norm; Qwen3.5 MoE
 * (qwen35moe) and Qwen3-Next (qwen3next) have experts in its place, and
 * Qwen3-Next one ssm_ba matrix for the linear layers' two gates. */
static void list_qwen35_tensors(struct generator *g)
{
    const struct shape *s = g->shape;
    const int64_t E = s->n_embd, d = shape_head_dim(s), n_kv = d * s->n_head_kv;
    const int64_t key_dim = (int64_t)s->ssm_groups * s->ssm_state;
    const int64_t value_dim = (int64_t)s->ssm_v_heads * s->ssm_state;
    add_tensor(g, "token_embd.weight", E, s->n_vocab, FILL_NORMAL);
    add_tensor(g, "output_norm.weight", E, 1, FILL_ONES);
    if (!s->tied) add_tensor(g, "output.weight", E, s->n_vocab, FILL_NORMAL);
    /* after the trunk's n_layer, the prediction layers: full attention
     * each, fed by the projection of the next token's embedding and the
     * trunk's normed hidden state (eh_proj over their two norms), read out
     * through shared_head_norm and the output layer */
    for (int il = 0; il < s->n_layer + s->n_mtp; il++) {
        LAYER("attn_norm.weight", E, 1, FILL_ONES);
        LAYER("post_attention_norm.weight", E, 1, FILL_ONES);
        if (il < s->n_layer && is_linear_layer(s, il)) {
            LAYER("attn_qkv.weight", E, 2 * key_dim + value_dim, FILL_NORMAL);
            LAYER("attn_gate.weight", E, value_dim, FILL_NORMAL);
            /* the taps of a channel are one row of K values: too short
             * for any block type, and converters never quantize them */
            LAYER("ssm_conv1d.weight", s->ssm_conv_kernel, 2 * key_dim + value_dim, FILL_CONV);
            shape_f32(g, 1, 1, 2);
            LAYER("ssm_dt.bias", s->ssm_v_heads, 1, FILL_DT_BIAS);
            LAYER("ssm_a", s->ssm_v_heads, 1, FILL_NEG_EXP);
            if (s->ssm_ba) {
                LAYER("ssm_ba.weight", E, 2 * s->ssm_v_heads, FILL_NORMAL);
            } else {
                LAYER("ssm_beta.weight", E, s->ssm_v_heads, FILL_NORMAL);
                LAYER("ssm_alpha.weight", E, s->ssm_v_heads, FILL_NORMAL);
            }
            LAYER("ssm_norm.weight", s->ssm_state, 1, FILL_ONES);
            LAYER("ssm_out.weight", value_dim, E, FILL_NORMAL);
        } else {
            LAYER("attn_q.weight", E, 2 * d * s->n_head, FILL_NORMAL);
            LAYER("attn_k.weight", E, n_kv, FILL_NORMAL);
            LAYER("attn_v.weight", E, n_kv, FILL_NORMAL);
            LAYER("attn_q_norm.weight", d, 1, FILL_ONES);
            LAYER("attn_k_norm.weight", d, 1, FILL_ONES);
            LAYER("attn_output.weight", d * s->n_head, E, FILL_NORMAL);
        }
        if (s->n_expert > 0) list_expert_tensors(g, il);
        else list_swiglu_tensors(g, il);
        if (il >= s->n_layer) list_nextn_tensors(g, il);
    }
}

/* gpt-oss (models/gptoss.c): biased attention with sinks, experts with
 * biases, post_attention_norm before them. */
static void list_gptoss_tensors(struct generator *g)
{
    const struct shape *s = g->shape;
    const int64_t E = s->n_embd, d = shape_head_dim(s), n_q = d * s->n_head, n_kv = d * s->n_head_kv;
    add_tensor(g, "token_embd.weight", E, s->n_vocab, FILL_NORMAL);
    add_tensor(g, "output_norm.weight", E, 1, FILL_ONES);
    add_tensor(g, "output.weight", E, s->n_vocab, FILL_NORMAL);
    for (int il = 0; il < s->n_layer; il++) {
        LAYER("attn_norm.weight", E, 1, FILL_ONES);
        LAYER("attn_q.weight", E, n_q, FILL_NORMAL);
        LAYER("attn_q.bias", n_q, 1, FILL_NORMAL);
        LAYER("attn_k.weight", E, n_kv, FILL_NORMAL);
        LAYER("attn_k.bias", n_kv, 1, FILL_NORMAL);
        LAYER("attn_v.weight", E, n_kv, FILL_NORMAL);
        LAYER("attn_v.bias", n_kv, 1, FILL_NORMAL);
        LAYER("attn_output.weight", n_q, E, FILL_NORMAL);
        LAYER("attn_output.bias", E, 1, FILL_NORMAL);
        LAYER("attn_sinks.weight", s->n_head, 1, FILL_NORMAL);
        LAYER("post_attention_norm.weight", E, 1, FILL_ONES);
        list_expert_tensors(g, il);
        LAYER("ffn_gate_inp.bias", s->n_expert, 1, FILL_NORMAL);
        /* the experts' biases: a row of each expert, one 2-D tensor, F32
         * as converters write every bias */
        LAYER("ffn_gate_exps.bias", s->n_ff_exp, s->n_expert, FILL_NORMAL);
        shape_f32(g, 1, 1, 2);
        LAYER("ffn_up_exps.bias", s->n_ff_exp, s->n_expert, FILL_NORMAL);
        shape_f32(g, 1, 1, 2);
        LAYER("ffn_down_exps.bias", E, s->n_expert, FILL_NORMAL);
        shape_f32(g, 1, 1, 2);
    }
}

/* glm4moe: attention with q/k/v biases (and head norms where the shape
 * has them), post_attention_norm before the feed-forward, the first
 * layers dense, then DeepSeek-style experts; the prediction layers after
 * the trunk have experts too. */
static void list_glm4moe_tensors(struct generator *g)
{
    const struct shape *s = g->shape;
    const int64_t E = s->n_embd;
    add_tensor(g, "token_embd.weight", E, s->n_vocab, FILL_NORMAL);
    add_tensor(g, "output_norm.weight", E, 1, FILL_ONES);
    if (!s->tied) add_tensor(g, "output.weight", E, s->n_vocab, FILL_NORMAL);
    for (int il = 0; il < s->n_layer + s->n_mtp; il++) {
        list_attention_tensors(g, il);
        LAYER("post_attention_norm.weight", E, 1, FILL_ONES);
        if (il < s->n_dense_lead) list_swiglu_tensors(g, il);
        else list_routed_tensors(g, il);
        if (il >= s->n_layer) list_nextn_tensors(g, il);
    }
}

/* deepseek2 (models/deepseek2.c): latent attention, the first layers
 * dense, then experts with shared ones and, for sigmoid routing, the
 * selection bias. */
static void list_deepseek2_tensors(struct generator *g)
{
    const struct shape *s = g->shape;
    const int64_t E = s->n_embd, H = s->n_head, d_q = s->qk_nope + s->n_rot, lat = s->kv_lora;
    add_tensor(g, "token_embd.weight", E, s->n_vocab, FILL_NORMAL);
    add_tensor(g, "output_norm.weight", E, 1, FILL_ONES);
    if (!s->tied) add_tensor(g, "output.weight", E, s->n_vocab, FILL_NORMAL);
    for (int il = 0; il < s->n_layer; il++) {
        LAYER("attn_norm.weight", E, 1, FILL_ONES);
        if (s->q_lora > 0) {
            LAYER("attn_q_a.weight", E, s->q_lora, FILL_NORMAL);
            LAYER("attn_q_a_norm.weight", s->q_lora, 1, FILL_ONES);
            LAYER("attn_q_b.weight", s->q_lora, H * d_q, FILL_NORMAL);
        } else {
            LAYER("attn_q.weight", E, H * d_q, FILL_NORMAL);
        }
        LAYER("attn_kv_a_mqa.weight", E, lat + s->n_rot, FILL_NORMAL);
        LAYER("attn_kv_a_norm.weight", lat, 1, FILL_ONES);
        add_layer_tensor3(g, il, "attn_k_b.weight", s->qk_nope, lat, H, FILL_NORMAL);
        add_layer_tensor3(g, il, "attn_v_b.weight", lat, s->v_head, H, FILL_NORMAL);
        LAYER("attn_output.weight", H * s->v_head, E, FILL_NORMAL);
        LAYER("ffn_norm.weight", E, 1, FILL_ONES);
        if (il < s->n_dense_lead) list_swiglu_tensors(g, il);
        else list_routed_tensors(g, il);
    }
}

/* An encoder (models/bert.c): token, type and (bert) position
 * embeddings with their layer norm, then per layer the attention, its
 * post-norm, the feed-forward and its post-norm, with biases (bert). */
static void list_encoder_tensors(struct generator *g)
{
    const struct shape *s = g->shape;
    const int64_t E = s->n_embd, F = s->n_ff;
    const bool bert = s->encoder == 1;
    add_tensor(g, "token_embd.weight", E, s->n_vocab, FILL_NORMAL);
    add_tensor(g, "token_types.weight", E, 2, FILL_NORMAL);
    shape_f32(g, 1, 1, 2);
    if (bert) add_tensor(g, "position_embd.weight", E, s->n_ctx, FILL_NORMAL);
    add_tensor(g, "token_embd_norm.weight", E, 1, FILL_ONES);
    add_tensor(g, "token_embd_norm.bias", E, 1, FILL_NORMAL);
    for (int il = 0; il < s->n_layer; il++) {
        if (bert) {
            LAYER("attn_q.weight", E, E, FILL_NORMAL);
            LAYER("attn_q.bias", E, 1, FILL_NORMAL);
            LAYER("attn_k.weight", E, E, FILL_NORMAL);
            LAYER("attn_k.bias", E, 1, FILL_NORMAL);
            LAYER("attn_v.weight", E, E, FILL_NORMAL);
            LAYER("attn_v.bias", E, 1, FILL_NORMAL);
        } else {
            LAYER("attn_qkv.weight", E, 3 * E, FILL_NORMAL);
        }
        LAYER("attn_output.weight", E, E, FILL_NORMAL);
        if (bert) LAYER("attn_output.bias", E, 1, FILL_NORMAL);
        LAYER("attn_output_norm.weight", E, 1, FILL_ONES);
        LAYER("attn_output_norm.bias", E, 1, FILL_NORMAL);
        if (!bert) LAYER("ffn_gate.weight", E, F, FILL_NORMAL);
        LAYER("ffn_up.weight", E, F, FILL_NORMAL);
        if (bert) LAYER("ffn_up.bias", F, 1, FILL_NORMAL);
        LAYER("ffn_down.weight", F, E, FILL_NORMAL);
        if (bert) LAYER("ffn_down.bias", E, 1, FILL_NORMAL);
        LAYER("layer_output_norm.weight", E, 1, FILL_ONES);
        LAYER("layer_output_norm.bias", E, 1, FILL_NORMAL);
    }
}

static void list_tensors(struct generator *g)
{
    const struct shape *s = g->shape;
    if (s->encoder) {
        list_encoder_tensors(g);
        return;
    }
    if (s->kv_lora) {
        list_deepseek2_tensors(g);
        return;
    }
    if (is_glm4moe(s)) {
        list_glm4moe_tensors(g);
        return;
    }
    if (s->oai) {
        list_gptoss_tensors(g);
        return;
    }
    if (s->head_size) {
        list_rwkv6_tensors(g);
        return;
    }
    if (s->full_attn_interval) {
        list_qwen35_tensors(g);
        return;
    }
    const int64_t head_dim = shape_head_dim(s);
    add_tensor(g, "token_embd.weight", s->n_embd, s->n_vocab, FILL_NORMAL);
    if (s->llama3_rope) add_tensor(g, "rope_freqs.weight", head_dim / 2, 1, FILL_ROPE_FACTORS);
    if (s->n_ctx_orig) {
        add_tensor(g, "rope_factors_long.weight", head_dim / 2, 1, FILL_LONGROPE_LONG);
        add_tensor(g, "rope_factors_short.weight", head_dim / 2, 1, FILL_LONGROPE_SHORT);
    }
    add_tensor(g, "output_norm.weight", s->n_embd, 1, FILL_ONES);
    if (!s->tied) add_tensor(g, "output.weight", s->n_embd, s->n_vocab, FILL_NORMAL);
    for (int il = 0; il < s->n_layer; il++) {
        list_attention_tensors(g, il);
        if (s->post_norms) LAYER("post_attention_norm.weight", s->n_embd, 1, FILL_ONES);
        LAYER("ffn_norm.weight", s->n_embd, 1, FILL_ONES);
        if (s->n_expert > 0) {
            list_expert_tensors(g, il);
        } else if (s->fused) {
            LAYER("ffn_up.weight", s->n_embd, 2 * s->n_ff, FILL_NORMAL);
            LAYER("ffn_down.weight", s->n_ff, s->n_embd, FILL_NORMAL);
        } else {
            LAYER("ffn_gate.weight", s->n_embd, s->n_ff, FILL_NORMAL);
            LAYER("ffn_up.weight", s->n_embd, s->n_ff, FILL_NORMAL);
            LAYER("ffn_down.weight", s->n_ff, s->n_embd, FILL_NORMAL);
        }
        if (s->post_norms) LAYER("post_ffw_norm.weight", s->n_embd, 1, FILL_ONES);
    }
}

/* Llama 3.1 RoPE scaling (factor 32, low/high frequency factors 1 and 4,
 * original context 8192): wavelengths shorter than 8192/4 positions keep
 * their frequency, those longer than 8192 are divided by 32, and those in
 * between are interpolated smoothly.  The file stores the divisor per
 * rotated pair. */
static void rope_factors(float *x, int64_t n_pairs, double base)
{
    const double factor = 32, low = 1, high = 4, original = 8192;
    const double low_wavelen = original / low, high_wavelen = original / high;
    for (int64_t i = 0; i < n_pairs; i++) {
        double freq = pow(base, -2.0 * (double)i / (double)(2 * n_pairs));
        double wavelen = 6.283185307179586 / freq;
        double divisor;
        if (wavelen < high_wavelen) {
            divisor = 1;
        } else if (wavelen > low_wavelen) {
            divisor = factor;
        } else {
            double smooth = (original / wavelen - low) / (high - low);
            divisor = 1.0 / ((1 - smooth) / factor + smooth);
        }
        x[i] = (float)divisor;
    }
}

static hearth_status fill_tensor(void *user, size_t index, void *buf, size_t bytes)
{
    struct generator *g = user;
    const struct gen_tensor *t = &g->tensors[index];
    const uint64_t tensor_seed = g->seed ^ name_hash(t->name);
    const size_t row_bytes = hearth_type_row_bytes(t->type, t->ne[0]);
    (void)bytes;
    bool ok = true;
    const int64_t n_rows = t->ne[1] * t->ne[2] * t->ne[3];
#ifdef _OPENMP
#pragma omp parallel for num_threads(g->threads) schedule(dynamic, 16) reduction(&& : ok)
#endif
    for (int64_t r = 0; r < n_rows; r++) {
#ifdef _OPENMP
        float *x = g->scratch + (size_t)omp_get_thread_num() * (size_t)g->scratch_row;
#else
        float *x = g->scratch;
#endif
        const struct shape *sh = g->shape;
        uint64_t s = tensor_seed + (uint64_t)r * 0x9e3779b97f4a7c15u;
        if (t->fill == FILL_ONES) {
            if (sh->norm_std > 0) normal_row(splitmix64(&s), x, t->ne[0], sh->norm_std);
            else for (int64_t i = 0; i < t->ne[0]; i++) x[i] = 0.0f;
            for (int64_t i = 0; i < t->ne[0]; i++) x[i] += 1.0f;
        } else if (t->fill == FILL_ROPE_FACTORS) {
            rope_factors(x, t->ne[0], sh->rope_base);
        } else if (t->fill == FILL_LONGROPE_SHORT || t->fill == FILL_LONGROPE_LONG) {
            /* LongRoPE-like divisors: near 1 for the short context, rising
             * towards the low frequencies for the long one */
            for (int64_t i = 0; i < t->ne[0]; i++) {
                const double f = (double)i / (double)t->ne[0];
                x[i] = (float)(t->fill == FILL_LONGROPE_SHORT ? 1.0 + 0.1 * f : 1.0 + 7.0 * f * f);
            }
        } else if (t->fill == FILL_HALF) {
            for (int64_t i = 0; i < t->ne[0]; i++) x[i] = 0.5f;
        } else if (t->fill == FILL_DECAY) {
            for (int64_t i = 0; i < t->ne[0]; i++) x[i] = (float)(-6.0 + 7.0 * (double)i / (double)t->ne[0]);
        } else if (t->fill == FILL_NEG_EXP) {
            normal_row(splitmix64(&s), x, t->ne[0], 0.5);
            for (int64_t i = 0; i < t->ne[0]; i++) x[i] = (float)-exp(x[i]);
        } else if (t->fill == FILL_DT_BIAS) {
            for (int64_t i = 0; i < t->ne[0]; i++)
                x[i] = t->ne[0] > 1 ? (float)(-4.0 + 4.0 * (double)i / (double)(t->ne[0] - 1)) : -2.0f;
        } else if (t->fill == FILL_CONV) {
            normal_row(splitmix64(&s), x, t->ne[0], 1.0 / sqrt((double)t->ne[0]));
        } else {
            double std = sh->weight_std > 0 ? sh->weight_std : WEIGHT_STD;
            const bool is_output = strcmp(t->name, "output.weight") == 0 ||
                                   (sh->tied && strcmp(t->name, "token_embd.weight") == 0);
            if (is_output && sh->output_std > 0) std = sh->output_std;
            if (strstr(t->name, "attn_output.") || strstr(t->name, "ssm_out.") || strstr(t->name, "ffn_down."))
                std *= g->residual_scale;
            if (is_output) std *= g->output_scale;
            normal_row(splitmix64(&s), x, t->ne[0], std);
        }
        ok = quant_quantize_row(t->type, x, (uint8_t *)buf + (size_t)r * row_bytes, t->ne[0]) && ok;
    }
    fprintf(stderr, "gen-model: [%zu/%zu] %-26s %-5s %lld x %lld x %lld\n", index + 1, g->n_tensors,
            t->name, hearth_type_name(t->type), (long long)t->ne[0], (long long)t->ne[1],
            (long long)t->ne[2]);
    return ok ? HEARTH_OK : hearth_error(HEARTH_E_INTERNAL, "cannot quantize %s", t->name);
}

/* ------------------------------------------------------------------------
 * Vocabulary
 * ------------------------------------------------------------------------ */

/* A SentencePiece vocabulary of n tokens: <unk>, <s>, </s>, the 256 byte
 * tokens, then word pieces "▁a", "▁b", ... with decreasing scores. */
static hearth_status synthetic_vocab(hearth_gguf_writer *w, int n)
{
    char **tokens = calloc((size_t)n, sizeof *tokens);
    float *scores = calloc((size_t)n, sizeof *scores);
    int32_t *types = calloc((size_t)n, sizeof *types);
    hearth_status st = tokens && scores && types ? HEARTH_OK : HEARTH_E_NOMEM;
    for (int i = 0; i < n && !st; i++) {
        char piece[32];
        if (i == 0) snprintf(piece, sizeof piece, "<unk>");
        else if (i == 1) snprintf(piece, sizeof piece, "<s>");
        else if (i == 2) snprintf(piece, sizeof piece, "</s>");
        else if (i < 3 + 256) snprintf(piece, sizeof piece, "<0x%02X>", i - 3);
        else {
            /* the word's letters: i - 259 written in base 26 */
            char word[16];
            int k = 0;
            for (int v = i - 259; k < 15; v = v / 26 - 1) {
                word[k++] = (char)('a' + v % 26);
                if (v < 26) break;
            }
            word[k] = '\0';
            snprintf(piece, sizeof piece, "\xe2\x96\x81%s", word);
        }
        tokens[i] = strdup(piece);
        if (!tokens[i]) st = HEARTH_E_NOMEM;
        scores[i] = i < 259 ? 0.0f : -(float)(i - 259);
        types[i] = i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1;
    }
    if (!st) st = hearth_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    if (!st) st = hearth_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens",
                                                   (const char *const *)tokens, (uint64_t)n);
    if (!st) st = hearth_gguf_writer_set_array(w, "tokenizer.ggml.scores", HEARTH_GGUF_FLOAT32,
                                               scores, (uint64_t)n);
    if (!st) st = hearth_gguf_writer_set_array(w, "tokenizer.ggml.token_type", HEARTH_GGUF_INT32,
                                               types, (uint64_t)n);
    if (!st) st = hearth_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    if (!st) st = hearth_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    if (!st) st = hearth_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    if (!st) st = hearth_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    for (int i = 0; tokens && i < n; i++) free(tokens[i]);
    free(tokens);
    free(scores);
    free(types);
    return st;
}

/* The tokenizer.* entries of a vocabulary file; the token list (with its
 * types and scores) padded to n tokens: first the added control tokens
 * (NULL-terminated; may be NULL), then unused "[PADn]" ones. */
static hearth_status copy_vocab(hearth_gguf_writer *w, const char *path, int n, const char *const *added)
{
    hearth_gguf *v;
    HEARTH_TRY(hearth_gguf_open(path, &v));
    hearth_gguf_value tokens;
    hearth_status st = hearth_gguf_get_array(v, "tokenizer.ggml.tokens", &tokens);
    if (st) {
        hearth_gguf_close(v);
        return hearth_error(HEARTH_E_FORMAT, "%s: no tokenizer.ggml.tokens", path);
    }
    const uint64_t have = tokens.v.arr.n;
    if (have > (uint64_t)n) {
        hearth_gguf_close(v);
        return hearth_error(HEARTH_E_INVALID, "%s has %llu tokens, more than the %d embedding rows",
                            path, (unsigned long long)have, n);
    }
    for (int64_t i = 0; i < hearth_gguf_n_kv(v) && !st; i++) {
        const char *key = hearth_gguf_kv_key(v, i);
        if (strncmp(key, "tokenizer.", 10) != 0) continue;
        if (have < (uint64_t)n && (strcmp(key, "tokenizer.ggml.tokens") == 0 ||
                                   strcmp(key, "tokenizer.ggml.token_type") == 0 ||
                                   strcmp(key, "tokenizer.ggml.scores") == 0))
            continue;
        st = hearth_gguf_writer_copy_kv(w, v, i);
    }
    if (!st && have < (uint64_t)n) {
        char **strs = calloc((size_t)n, sizeof *strs);
        int32_t *types = calloc((size_t)n, sizeof *types);
        float *scores = calloc((size_t)n, sizeof *scores);
        hearth_gguf_value types_in, scores_in;
        bool has_types = hearth_gguf_get_array(v, "tokenizer.ggml.token_type", &types_in) == 0;
        bool has_scores = hearth_gguf_get_array(v, "tokenizer.ggml.scores", &scores_in) == 0;
        if (!strs || !types || !scores) st = HEARTH_E_NOMEM;
        for (int i = 0; i < n && !st; i++) {
            hearth_gguf_value e;
            char pad[32];
            types[i] = 5; /* unused */
            if ((uint64_t)i < have) {
                st = hearth_gguf_array_get(v, &tokens, (uint64_t)i, &e);
                if (st) break;
                strs[i] = strndup(e.v.str.ptr, (size_t)e.v.str.len);
                if (has_types && hearth_gguf_array_get(v, &types_in, (uint64_t)i, &e) == 0)
                    types[i] = (int32_t)e.v.i;
                if (has_scores && hearth_gguf_array_get(v, &scores_in, (uint64_t)i, &e) == 0)
                    scores[i] = (float)e.v.f;
            } else if (added && *added) {
                strs[i] = strdup(*added++);
                types[i] = 3; /* control */
            } else {
                snprintf(pad, sizeof pad, "[PAD%d]", i);
                strs[i] = strdup(pad);
            }
            if (!strs[i]) st = HEARTH_E_NOMEM;
        }
        if (!st) st = hearth_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens",
                                                       (const char *const *)strs, (uint64_t)n);
        if (!st) st = hearth_gguf_writer_set_array(w, "tokenizer.ggml.token_type",
                                                   HEARTH_GGUF_INT32, types, (uint64_t)n);
        if (!st && has_scores)
            st = hearth_gguf_writer_set_array(w, "tokenizer.ggml.scores", HEARTH_GGUF_FLOAT32,
                                              scores, (uint64_t)n);
        for (int i = 0; strs && i < n; i++) free(strs[i]);
        free(strs);
        free(types);
        free(scores);
    }
    hearth_gguf_close(v);
    return st;
}

/* A byte-level BPE vocabulary of n tokens under the pre-tokenizer pre:
 * the 256 bytes in GPT-2's printable spelling, the merges of a space
 * before each lower-case ASCII letter and of every pair of them (as many
 * as fit), [BOS] and [EOS] control tokens, then unused "[PADn]" ones. */
static hearth_status synthetic_bpe_vocab(hearth_gguf_writer *w, int n, const char *pre)
{
    enum { N_BYTES = 256, N_MERGES = 26 + 26 * 26 };
    if (n < N_BYTES + 2)
        return hearth_error(HEARTH_E_INVALID, "a byte-level BPE vocabulary of %d tokens: it needs %d", n,
                            N_BYTES + 2);
    const int n_merges = HEARTH_MIN(N_MERGES, n - N_BYTES - 2);
    char **tokens = calloc((size_t)n, sizeof *tokens);
    char **merges = calloc((size_t)N_MERGES, sizeof *merges);
    int32_t *types = calloc((size_t)n, sizeof *types);
    hearth_status st = tokens && merges && types ? HEARTH_OK : HEARTH_E_NOMEM;
    for (int i = 0; i < n && !st; i++) {
        char text[32];
        types[i] = 1; /* normal */
        if (i < N_BYTES) {
            text[utf8_encode(bpe_byte_to_cp((unsigned char)i), text)] = '\0';
        } else if (i < N_BYTES + n_merges) {
            /* merge k: " " + letter k (k < 26), then letter pairs */
            const int k = i - N_BYTES;
            char left[8], right[8];
            left[utf8_encode(bpe_byte_to_cp(k < 26 ? ' ' : (unsigned char)('a' + (k - 26) / 26)), left)] = '\0';
            right[utf8_encode(bpe_byte_to_cp((unsigned char)('a' + (k < 26 ? k : (k - 26) % 26))), right)] = '\0';
            snprintf(text, sizeof text, "%s%s", left, right);
            char merge[32];
            snprintf(merge, sizeof merge, "%s %s", left, right);
            if (!(merges[k] = strdup(merge))) st = HEARTH_E_NOMEM;
        } else if (i < N_BYTES + n_merges + 2) {
            snprintf(text, sizeof text, "%s", i == N_BYTES + n_merges ? "[BOS]" : "[EOS]");
            types[i] = 3; /* control */
        } else {
            snprintf(text, sizeof text, "[PAD%d]", i);
            types[i] = 5; /* unused */
        }
        if (!st && !(tokens[i] = strdup(text))) st = HEARTH_E_NOMEM;
    }
    if (!st) st = hearth_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (!st) st = hearth_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    if (!st) st = hearth_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens",
                                                   (const char *const *)tokens, (uint64_t)n);
    if (!st) st = hearth_gguf_writer_set_array(w, "tokenizer.ggml.token_type", HEARTH_GGUF_INT32,
                                               types, (uint64_t)n);
    if (!st) st = hearth_gguf_writer_set_str_array(w, "tokenizer.ggml.merges",
                                                   (const char *const *)merges, (uint64_t)n_merges);
    if (!st) st = hearth_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)(N_BYTES + n_merges));
    if (!st) st = hearth_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)(N_BYTES + n_merges + 1));
    for (int i = 0; tokens && i < n; i++) free(tokens[i]);
    for (int i = 0; merges && i < N_MERGES; i++) free(merges[i]);
    free(tokens);
    free(merges);
    free(types);
    return st;
}

/* Word pieces of a synthetic WordPiece vocabulary, after the single
 * characters: whole words ("▁" + word) and continuations (no prefix, as
 * the GGUF files store "##" pieces). */
static const char *const wpm_words[] = {
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "with", "as", "was", "on", "be", "at",
    "by", "this", "are", "from", "or", "an", "not", "but", "have", "you", "we", "they", "which", "one",
    "all", "hello", "world", "text", "token", "model", "un", "re", "in", "over", "new", "time", "day",
    "test", "code", "data", "quick", "brown", "fox", "jump", "lazy", "dog", "em", "bed", "ding", NULL};
static const char *const wpm_continuations[] = {
    "ing", "ed", "er", "ly", "tion", "es", "est", "able", "ness", "ment", "en", "al", "ic", "ize",
    "ful", "less", "ous", "ity", "ive", "ers", "ings", "ded", "ding", "ps", NULL};
/* CJK ideographs that are tokens (each is a word of its own) */
static const char *const wpm_cjk[] = {"\u4e2d", "\u6587", "\u65e5", "\u672c", "\u8a9e", "\u4eba",
                                      "\u5927", "\u5b66", NULL};

static void wpm_add(char **tokens, int32_t *types, int *n, int cap, const char *text, int32_t type)
{
    if (*n >= cap) return;
    tokens[*n] = strdup(text);
    types[(*n)++] = type;
}

/* A WordPiece vocabulary of n tokens (tokenizer model "bert") laid out as
 * BERT's uncased one is: [PAD] 0, [unusedN], [UNK] 100, [CLS] 101, [SEP]
 * 102, [MASK] 103, then the printable ASCII characters but the capitals
 * as words, the letters and digits as continuations, CJK ideographs,
 * words and continuations, then letter pairs and triples as words and
 * continuations until n.  Lower-cased, accents stripped. */
static hearth_status synthetic_wpm_vocab(hearth_gguf_writer *w, int n)
{
    char **tokens = calloc((size_t)n, sizeof *tokens);
    int32_t *types = calloc((size_t)n, sizeof *types);
    if (!tokens || !types || n < 200) {
        free(tokens);
        free(types);
        return n < 200 ? hearth_error(HEARTH_E_INVALID, "a WordPiece vocabulary needs at least 200 tokens")
                       : HEARTH_E_NOMEM;
    }
    int k = 0;
    char buf[64];
    wpm_add(tokens, types, &k, n, "[PAD]", 3);
    for (int i = 1; i < 100; i++) {
        snprintf(buf, sizeof buf, "[unused%d]", i - 1);
        wpm_add(tokens, types, &k, n, buf, 3);
    }
    wpm_add(tokens, types, &k, n, "[UNK]", 2);
    wpm_add(tokens, types, &k, n, "[CLS]", 3);
    wpm_add(tokens, types, &k, n, "[SEP]", 3);
    wpm_add(tokens, types, &k, n, "[MASK]", 3);
    for (int c = 33; c < 127; c++) {
        if (c >= 'A' && c <= 'Z') continue;
        snprintf(buf, sizeof buf, "\xe2\x96\x81%c", c);
        wpm_add(tokens, types, &k, n, buf, 1);
    }
    for (int c = 0; c < 36; c++) {
        snprintf(buf, sizeof buf, "%c", c < 26 ? 'a' + c : '0' + c - 26);
        wpm_add(tokens, types, &k, n, buf, 1);
    }
    for (int i = 0; wpm_cjk[i]; i++) {
        snprintf(buf, sizeof buf, "\xe2\x96\x81%s", wpm_cjk[i]);
        wpm_add(tokens, types, &k, n, buf, 1);
    }
    for (int i = 0; wpm_words[i]; i++) {
        /* a word listed twice stays once */
        bool dup = false;
        for (int j = 0; j < i; j++) dup = dup || strcmp(wpm_words[i], wpm_words[j]) == 0;
        if (dup) continue;
        snprintf(buf, sizeof buf, "\xe2\x96\x81%s", wpm_words[i]);
        wpm_add(tokens, types, &k, n, buf, 1);
    }
    for (int i = 0; wpm_continuations[i]; i++) wpm_add(tokens, types, &k, n, wpm_continuations[i], 1);
    /* pairs, then triples, of letters: as words and as continuations,
     * skipping any listed above (the tokens are distinct) */
    const int listed = k;
    for (int len = 2; len <= 3 && k < n; len++) {
        const int count = len == 2 ? 26 * 26 : 26 * 26 * 26;
        for (int v = 0; v < count && k < n; v++) {
            char word[4];
            for (int i = len - 1, x = v; i >= 0; i--, x /= 26) word[i] = (char)('a' + x % 26);
            word[len] = '\0';
            for (int cont = 0; cont < 2 && k < n; cont++) {
                if (cont) snprintf(buf, sizeof buf, "%s", word);
                else snprintf(buf, sizeof buf, "\xe2\x96\x81%s", word);
                bool dup = false;
                for (int j = 104; j < listed && !dup; j++) dup = strcmp(tokens[j], buf) == 0;
                if (!dup) wpm_add(tokens, types, &k, n, buf, 1);
            }
        }
    }
    for (int i = 0; k < n; i++) { /* never reached for n under 35,000 */
        snprintf(buf, sizeof buf, "[extra%d]", i);
        wpm_add(tokens, types, &k, n, buf, 3);
    }
    hearth_status st = HEARTH_OK;
    for (int i = 0; i < n; i++)
        if (!tokens[i]) st = HEARTH_E_NOMEM;
    if (!st) st = hearth_gguf_writer_set_str(w, "tokenizer.ggml.model", "bert");
    if (!st) st = hearth_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", (const char *const *)tokens,
                                                   (uint64_t)n);
    if (!st) st = hearth_gguf_writer_set_array(w, "tokenizer.ggml.token_type", HEARTH_GGUF_INT32, types,
                                               (uint64_t)n);
    if (!st) st = hearth_gguf_writer_set_u32(w, "tokenizer.ggml.token_type_count", 2);
    if (!st) st = hearth_gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", 0);
    if (!st) st = hearth_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 100);
    if (!st) st = hearth_gguf_writer_set_u32(w, "tokenizer.ggml.cls_token_id", 101);
    if (!st) st = hearth_gguf_writer_set_u32(w, "tokenizer.ggml.seperator_token_id", 102);
    if (!st) st = hearth_gguf_writer_set_u32(w, "tokenizer.ggml.mask_token_id", 103);
    if (!st) st = hearth_gguf_writer_set_bool(w, "tokenizer.ggml.normalizer.lowercase", true);
    for (int i = 0; i < n; i++) free(tokens[i]);
    free(tokens);
    free(types);
    return st;
}

/* The shape's vocabulary: --vocab's (under the shape's pre-tokenizer,
 * if it names one), else a synthetic one. */
static hearth_status write_vocab(hearth_gguf_writer *w, const struct shape *s, const char *vocab_path)
{
    if (!vocab_path && s->encoder) return synthetic_wpm_vocab(w, s->n_vocab);
    if (!vocab_path)
        return s->pre ? synthetic_bpe_vocab(w, s->n_vocab, s->pre) : synthetic_vocab(w, s->n_vocab);
    HEARTH_TRY(copy_vocab(w, vocab_path, s->n_vocab, s->added_tokens));
    return s->pre ? hearth_gguf_writer_set_str(w, "tokenizer.ggml.pre", s->pre) : HEARTH_OK;
}

/* ------------------------------------------------------------------------
 * Metadata and main
 * ------------------------------------------------------------------------ */

static hearth_status set_metadata(hearth_gguf_writer *w, const struct shape *s,
                                  hearth_ftype ftype, const char *vocab_path)
{
    char key[128];
    const char *a = s->arch;
#define ARCH_U32(suffix, value) \
    (snprintf(key, sizeof key, "%s.%s", a, suffix), hearth_gguf_writer_set_u32(w, key, value))
#define ARCH_F32(suffix, value) \
    (snprintf(key, sizeof key, "%s.%s", a, suffix), hearth_gguf_writer_set_f32(w, key, value))
    HEARTH_TRY(hearth_gguf_writer_set_str(w, "general.architecture", a));
    HEARTH_TRY(hearth_gguf_writer_set_str(w, "general.name", s->title));
    HEARTH_TRY(ARCH_U32("context_length", (uint32_t)s->n_ctx));
    HEARTH_TRY(ARCH_U32("embedding_length", (uint32_t)s->n_embd));
    HEARTH_TRY(ARCH_U32("block_count", (uint32_t)(s->n_layer + s->n_mtp)));
    if (s->n_mtp > 0) HEARTH_TRY(ARCH_U32("nextn_predict_layers", (uint32_t)s->n_mtp));
    HEARTH_TRY(ARCH_U32("feed_forward_length", (uint32_t)s->n_ff));
    if (s->head_size) {
        HEARTH_TRY(ARCH_U32("attention.head_count", 0));
        HEARTH_TRY(ARCH_U32("wkv.head_size", (uint32_t)s->head_size));
        HEARTH_TRY(ARCH_U32("time_mix_extra_dim", RWKV_MIX_EXTRA));
        HEARTH_TRY(ARCH_U32("time_decay_extra_dim", RWKV_DECAY_EXTRA));
        HEARTH_TRY(ARCH_U32("rescale_every_n_layers", 6));
        HEARTH_TRY(ARCH_F32("attention.layer_norm_epsilon", s->norm_eps));
        HEARTH_TRY(hearth_gguf_writer_set_u32(w, "general.file_type", (uint32_t)ftype));
        HEARTH_TRY(hearth_gguf_writer_set_u32(w, "general.quantization_version", 2));
        return write_vocab(w, s, vocab_path);
    }
    HEARTH_TRY(ARCH_U32("attention.head_count", (uint32_t)s->n_head));
    if (s->encoder) {
        HEARTH_TRY(ARCH_F32("attention.layer_norm_epsilon", s->norm_eps));
        snprintf(key, sizeof key, "%s.attention.causal", a);
        HEARTH_TRY(hearth_gguf_writer_set_bool(w, key, false));
        if (s->encoder == 2) HEARTH_TRY(ARCH_F32("rope.freq_base", s->rope_base));
        HEARTH_TRY(ARCH_U32("pooling_type", (uint32_t)s->pooling));
        HEARTH_TRY(hearth_gguf_writer_set_u32(w, "general.file_type", (uint32_t)ftype));
        HEARTH_TRY(hearth_gguf_writer_set_u32(w, "general.quantization_version", 2));
        return write_vocab(w, s, vocab_path);
    }
    HEARTH_TRY(ARCH_U32("attention.head_count_kv", (uint32_t)s->n_head_kv));
    if (s->kv_lora) {
        /* as the converters write them: the cache's one head of keys
         * [k_rope | latent] whose values are the latent, and the heads of
         * the decompressed form */
        HEARTH_TRY(ARCH_U32("attention.kv_lora_rank", (uint32_t)s->kv_lora));
        HEARTH_TRY(ARCH_U32("attention.q_lora_rank", (uint32_t)s->q_lora));
        HEARTH_TRY(ARCH_U32("attention.key_length", (uint32_t)(s->kv_lora + s->n_rot)));
        HEARTH_TRY(ARCH_U32("attention.value_length", (uint32_t)s->kv_lora));
        HEARTH_TRY(ARCH_U32("attention.key_length_mla", (uint32_t)(s->qk_nope + s->n_rot)));
        HEARTH_TRY(ARCH_U32("attention.value_length_mla", (uint32_t)s->v_head));
    } else if (s->head_dim) {
        HEARTH_TRY(ARCH_U32("attention.key_length", (uint32_t)s->head_dim));
        HEARTH_TRY(ARCH_U32("attention.value_length", (uint32_t)s->head_dim));
    }
    if (s->kv_lora || is_glm4moe(s)) {
        /* DeepSeek's routing */
        HEARTH_TRY(ARCH_U32("leading_dense_block_count", (uint32_t)s->n_dense_lead));
        HEARTH_TRY(ARCH_U32("expert_shared_count", (uint32_t)s->n_shared));
        HEARTH_TRY(ARCH_U32("expert_gating_func", s->sigmoid_gating ? 2u : 1u));
        if (s->weights_scale > 0) HEARTH_TRY(ARCH_F32("expert_weights_scale", s->weights_scale));
        if (s->weights_norm) {
            snprintf(key, sizeof key, "%s.expert_weights_norm", a);
            HEARTH_TRY(hearth_gguf_writer_set_bool(w, key, true));
        }
        if (s->n_groups > 0) {
            HEARTH_TRY(ARCH_U32("expert_group_count", (uint32_t)s->n_groups));
            HEARTH_TRY(ARCH_U32("expert_group_used_count", (uint32_t)s->n_groups_used));
        }
    }
    /* the converters' 0.1 mscale_all_dim */
    if (s->mscale_all_dim > 0) HEARTH_TRY(ARCH_F32("rope.scaling.yarn_log_multiplier", 0.1f * s->mscale_all_dim));
    HEARTH_TRY(ARCH_U32("rope.dimension_count", (uint32_t)(s->n_rot ? s->n_rot : shape_head_dim(s))));
    if (s->rope_sections[0] > 0) {
        snprintf(key, sizeof key, "%s.rope.dimension_sections", a);
        HEARTH_TRY(hearth_gguf_writer_set_array(w, key, HEARTH_GGUF_INT32, s->rope_sections, 4));
    }
    if (s->full_attn_interval > 0) {
        HEARTH_TRY(ARCH_U32("full_attention_interval", (uint32_t)s->full_attn_interval));
        HEARTH_TRY(ARCH_U32("ssm.conv_kernel", (uint32_t)s->ssm_conv_kernel));
        HEARTH_TRY(ARCH_U32("ssm.state_size", (uint32_t)s->ssm_state));
        HEARTH_TRY(ARCH_U32("ssm.group_count", (uint32_t)s->ssm_groups));
        HEARTH_TRY(ARCH_U32("ssm.time_step_rank", (uint32_t)s->ssm_v_heads));
        HEARTH_TRY(ARCH_U32("ssm.inner_size", (uint32_t)(s->ssm_v_heads * s->ssm_state)));
    }
    HEARTH_TRY(ARCH_F32("rope.freq_base", s->rope_base));
    HEARTH_TRY(ARCH_F32("attention.layer_norm_rms_epsilon", s->norm_eps));
    if (s->attn_softcap > 0) HEARTH_TRY(ARCH_F32("attn_logit_softcapping", s->attn_softcap));
    if (s->final_softcap > 0) HEARTH_TRY(ARCH_F32("final_logit_softcapping", s->final_softcap));
    if (s->sliding_window >= 0 && (s->sliding_window > 0 || s->fused))
        HEARTH_TRY(ARCH_U32("attention.sliding_window", (uint32_t)s->sliding_window));
    if (s->swa_pattern > 0) HEARTH_TRY(ARCH_U32("attention.sliding_window_pattern", (uint32_t)s->swa_pattern));
    if (s->rope_base_swa > 0) HEARTH_TRY(ARCH_F32("rope.freq_base_swa", s->rope_base_swa));
    if (s->rope_linear > 0) {
        snprintf(key, sizeof key, "%s.rope.scaling.type", a);
        HEARTH_TRY(hearth_gguf_writer_set_str(w, key, "linear"));
        HEARTH_TRY(ARCH_F32("rope.scaling.factor", s->rope_linear));
    }
    if (s->yarn_factor > 0) {
        snprintf(key, sizeof key, "%s.rope.scaling.type", a);
        HEARTH_TRY(hearth_gguf_writer_set_str(w, key, "yarn"));
        HEARTH_TRY(ARCH_F32("rope.scaling.factor", s->yarn_factor));
        HEARTH_TRY(ARCH_U32("rope.scaling.original_context_length", (uint32_t)s->yarn_orig));
        if (s->yarn_beta_fast > 0) HEARTH_TRY(ARCH_F32("rope.scaling.yarn_beta_fast", s->yarn_beta_fast));
        if (s->yarn_beta_slow > 0) HEARTH_TRY(ARCH_F32("rope.scaling.yarn_beta_slow", s->yarn_beta_slow));
    }
    if (s->n_ctx_orig) {
        /* LongRoPE's attention factor for a context extended n_ctx / n_ctx_orig times */
        const double scale = (double)s->n_ctx / (double)s->n_ctx_orig;
        HEARTH_TRY(ARCH_U32("rope.scaling.original_context_length", (uint32_t)s->n_ctx_orig));
        HEARTH_TRY(ARCH_F32("rope.scaling.attn_factor",
                            (float)sqrt(1.0 + log(scale) / log((double)s->n_ctx_orig))));
    }
    if (s->n_expert > 0) {
        HEARTH_TRY(ARCH_U32("expert_count", (uint32_t)s->n_expert));
        HEARTH_TRY(ARCH_U32("expert_used_count", (uint32_t)s->n_expert_used));
        if (strcmp(a, "llama") != 0)
            HEARTH_TRY(ARCH_U32("expert_feed_forward_length", (uint32_t)s->n_ff_exp));
        snprintf(key, sizeof key, "%s.vocab_size", a);
        if (s->kv_lora) HEARTH_TRY(hearth_gguf_writer_set_u32(w, key, (uint32_t)s->n_vocab));
        if (s->n_ff_shexp > 0)
            HEARTH_TRY(ARCH_U32("expert_shared_feed_forward_length", (uint32_t)s->n_ff_shexp));
    }
    if (s->pooling > 0) HEARTH_TRY(ARCH_U32("pooling_type", (uint32_t)s->pooling));
#undef ARCH_U32
#undef ARCH_F32
    HEARTH_TRY(hearth_gguf_writer_set_u32(w, "general.file_type", (uint32_t)ftype));
    HEARTH_TRY(hearth_gguf_writer_set_u32(w, "general.quantization_version", 2));
    HEARTH_TRY(write_vocab(w, s, vocab_path));
    return s->add_eos ? hearth_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", true) : HEARTH_OK;
}

static int write_model(struct generator *g_in, const struct shape *sp, hearth_ftype ftype, const char *vocab_path,
                       const char *out_path);

static void usage(FILE *out)
{
    fputs("usage: gen-model --shape NAME [--type TYPE] [--vocab FILE] [--seed N]\n"
          "                 [--threads N] [--layers N] [--embd N] [--ff N] [--heads N]\n"
          "                 [--kv-heads N] [--n-vocab N] [--window N] [--experts N]\n"
          "                 [--experts-used N] [--expert-ff N] [--shared-ff N]\n"
          "                 [--output-std X] [--mtp-layers N] [--dense-layers N]\n"
          "                 [--residual-scale F] [--output-scale F]\n"
          "                 [--draft-layers N --draft FILE] [--split-max-tensors N] OUT\n"
          "\n"
          "Write a model with random weights and the tensor shapes of NAME:\n"
          "  tinyllama-1.1b   llama, 22 layers, d 2048, ff 5632, 32/4 heads, vocab 32000\n"
          "  llama-3.2-1b     llama, 16 layers, d 2048, ff 8192, 32/8 heads, vocab 128256,\n"
          "                   RoPE frequency factors, tied embeddings\n"
          "  qwen2.5-0.5b     qwen2, 24 layers, d 896, ff 4864, 14/2 heads, vocab 151936,\n"
          "                   q/k/v biases, tied embeddings\n"
          "  rwkv6-world-1.6b rwkv6, 24 layers, d 2048, ff 7168, 32 heads of 64, vocab 65536\n"
          "                   (recurrent: the low-rank and bonus tensors stay F32)\n"
          "  qwen1.5-moe-a2.7b  qwen2moe, 24 layers, d 2048, 16 heads, 60 experts (4 used)\n"
          "                   of ff 1408, a shared expert of ff 5632, vocab 151936\n"
          "  mixtral-8x7b     llama with experts, 32 layers, d 4096, 32/8 heads, 8 experts\n"
          "                   (2 used) of ff 14336, vocab 32000\n"
          "  qwen3-30b-a3b    qwen3moe, 48 layers, d 2048, 32/4 heads of 128, 128 experts\n"
          "                   (8 used) of ff 768, q/k norms, vocab 151936\n"
          "  micro-qwen2moe   qwen2moe, 2 layers, d 256, 4/2 heads, 8 experts (2 used)\n"
          "                   of ff 256, a shared expert of ff 512, vocab 512\n"
          "  micro-qwen3moe   qwen3moe, 2 layers, d 256, 8/2 heads of 64, 16 experts\n"
          "                   (4 used) of ff 256, vocab 512\n"
          "  micro-mixtral    llama with experts, 2 layers, d 256, 4/2 heads, 8 experts\n"
          "                   (2 used) of ff 256, vocab 512\n"
          "  qwen3-0.6b       qwen3, 28 layers, d 1024, ff 3072, 16/8 heads of 128,\n"
          "                   vocab 151936, q/k norms, tied embeddings\n"
          "  micro-qwen3      qwen3, 2 layers, d 256, ff 512, 8/2 heads of 64, vocab 512\n"
          "  qwen3-embedding-0.6b  qwen3-0.6b's layers, vocab 151669, pooled at the last\n"
          "                   token (pooling_type 3), EOS added to the input\n"
          "  micro-qwen3-embedding  micro-qwen3 pooled at the last token, EOS added\n"
          "  bge-small-en-v1.5  bert, 12 layers, d 384, ff 1536, 12 heads, vocab 30522\n"
          "                   (WordPiece), 512 positions, pooled at [CLS]\n"
          "  micro-bert       bert, 2 layers, d 128, ff 256, 4 heads, vocab 512, [CLS]\n"
          "  nomic-embed-text-v1.5  nomic-bert, 12 layers, d 768, ff 3072, 12 heads,\n"
          "                   vocab 30528 (WordPiece), rotary positions, mean pooling\n"
          "  micro-nomic-bert nomic-bert, 2 layers, d 128, ff 256, 4 heads, vocab 512, mean\n"
          "  qwen3.5-0.8b     qwen35, 24 layers (every 4th full attention, 8/2 gated heads\n"
          "                   of 256, RoPE on 64 dims; the others Gated DeltaNet, 16/16\n"
          "                   heads of 128), d 1024, ff 3584, vocab 248320, tied\n"
          "  qwen3.5-9b       qwen35, 32 layers (every 4th full attention, 16/4 gated\n"
          "                   heads of 256; Gated DeltaNet 16/32 heads of 128), d 4096,\n"
          "                   ff 12288, vocab 248320\n"
          "  qwen3.5-35b-a3b  qwen35moe, 40 layers as qwen3.5-9b's but 16/2 heads, d 2048,\n"
          "                   256 experts (8 used) of ff 512, a shared expert of 512\n"
          "  qwen3-next-80b-a3b  qwen3next, 48 layers, d 2048, 16/2 heads of 256, Gated\n"
          "                   DeltaNet 16/32 heads of 128, 512 experts (10 used) of ff\n"
          "                   512, a shared expert of 512, vocab 151936\n"
          "  micro-qwen35     qwen35, 4 layers (1 and 3 full attention, 4/2 gated heads\n"
          "                   of 64, RoPE on 16 dims; 0 and 2 Gated DeltaNet, 2 key and\n"
          "                   4 value heads of 32), d 256, ff 512, vocab 512\n"
          "  micro-qwen35moe  qwen35moe: micro-qwen35 with 8 experts (2 used) of ff 128\n"
          "                   and a gated shared expert of ff 256 in every layer\n"
          "  micro-qwen3next  qwen3next: as micro-qwen35moe, value heads in grouped\n"
          "                   order, one ssm_ba matrix for both gates, NEOX RoPE on\n"
          "                   16 dims without sections\n"
          "  gemma-2-2b       gemma2, 26 layers, d 2304, ff 9216, 8/4 heads of 256,\n"
          "                   vocab 256000, window 4096 every other layer, soft-capping\n"
          "  micro-gemma2     gemma2, 2 layers, d 256, 4/2 heads of 64, window 32,\n"
          "                   soft-capping 1.5 (scores) and 8 (logits)\n"
          "  gemma-3-1b       gemma3, 26 layers, d 1152, ff 6912, 4/1 heads of 256,\n"
          "                   vocab 262144, window 512 on 5 of 6 layers, q/k norms\n"
          "  micro-gemma3     gemma3, 3 layers, d 256, 4/2 heads of 64, window 24 on 2 of\n"
          "                   3 layers, local RoPE base, RoPE scaling 4, logit capping 8\n"
          "  phi-3.5-mini     phi3, 32 layers, d 3072, ff 8192, 32/32 heads, vocab 32064,\n"
          "                   fused qkv and gate/up, LongRoPE (original context 4096)\n"
          "  micro-phi3       phi3, 2 layers, d 256, 8/4 heads, window 40, LongRoPE\n"
          "                   (original context 256)\n"
          "  gpt-oss-20b      gpt-oss, 24 layers, d 2880, 64/8 heads of 64 with sinks,\n"
          "                   window 128 every other layer, 32 experts (4 used) of ff\n"
          "                   2880 with biases, YaRN 32, vocab 201088 (use MXFP4_MOE)\n"
          "  gpt-oss-120b     gpt-oss-20b's layers, 36 of them, with 128 experts\n"
          "  micro-gpt-oss    gpt-oss, 4 layers, d 256, 8/2 heads of 64, window 32, 8\n"
          "                   experts (4 used) of ff 128, YaRN 8 over 512\n"
          "  deepseek-v2-lite deepseek2, 27 layers, d 2048, 16 heads of 128 + 64 over a\n"
          "                   latent of 512, the first dense (ff 10944), then 64 experts\n"
          "                   (6 used, softmax) of 1408 and 2 shared, YaRN 40, vocab 102400\n"
          "  deepseek-v3      deepseek2, 61 layers, d 7168, 128 heads (queries of rank\n"
          "                   1536), latent 512, 3 dense (ff 18432), 256 experts (8 used,\n"
          "                   sigmoid, 8 groups, 4 used) of 2048 and 1 shared, vocab\n"
          "                   129280 (measure a few layers: --layers, --dense-layers)\n"
          "  kimi-k2          deepseek2, 3 of Kimi-K2's 61 layers: d 7168, 64 heads\n"
          "                   (queries of rank 1536), latent 512, 1 dense (ff 18432),\n"
          "                   32 of its 384 experts (8 used, sigmoid, 1 group) of 2048\n"
          "                   and 1 shared, YaRN 32, vocab 163840 (byte-level BPE,\n"
          "                   pre-tokenizer kimi-k2)\n"
          "  micro-deepseek2  deepseek2, 3 layers, d 256, 4 heads of 32 + 32 over a\n"
          "                   latent of 64, 1 dense, 8 experts (2 used, softmax) of 64\n"
          "                   and 2 shared, YaRN 4 over 32\n"
          "  micro-deepseek2-v2  as micro-deepseek2 with queries of rank 96, 3 of 8\n"
          "                   experts chosen in 2 of 4 groups, weights scaled by 4\n"
          "  micro-deepseek3  as micro-deepseek2-v2 with sigmoid routing and the\n"
          "                   selection bias, renormalised weights scaled by 2.5, values\n"
          "                   of 64, YaRN 4 over 32\n"
          "  micro-kimi-k2    as micro-deepseek3 in one expert group, weights scaled by\n"
          "                   2.827, RoPE base 50000, YaRN 4 over 32 with Kimi's ramp\n"
          "                   ends, vocab 512 (byte-level BPE, pre-tokenizer kimi-k2)\n"
          "  glm-4.5-air      glm4moe, 46 layers and a prediction layer, d 4096, 96/8\n"
          "                   heads of 128 with q/k/v biases, RoPE on 64 dims, the first\n"
          "                   dense (ff 10944), 128 experts (8 used, sigmoid with the\n"
          "                   selection bias) of 1408 and 1 shared, vocab 151552\n"
          "                   (measure a few layers: --layers)\n"
          "  micro-glm4moe    glm4moe, 3 layers and a prediction layer, d 256, 8/2\n"
          "                   heads of 64 with biases and head norms, RoPE on 32 dims,\n"
          "                   1 dense, 8 experts (2 used, sigmoid with the selection\n"
          "                   bias, scaled by 2.5) of 64 and 1 shared\n"
          "(micro shapes: larger weights and random norms, test models).  --window N\n"
          "sets the sliding window (0: none).\n"
          "quantized with a recipe of hearth quantize (TYPE, default Q8_0).  --vocab\n"
          "copies the tokenizer of a vocabulary GGUF file (padded to the vocabulary\n"
          "size; kimi-k2 names its pre-tokenizer); without it the vocabulary is a\n"
          "synthetic SentencePiece one (kimi-k2: byte-level BPE).  The\n"
          "other options override the shape's sizes (for small test models);\n"
          "--output-std sets the spread of the output layer's weights (default 0.02;\n"
          "larger values make the next-token distribution peaked).\n"
          "--mtp-layers N writes N multi-token prediction layers after the trunk (the\n"
          "Qwen3.5 and GLM-4.5 families; micro-qwen3next and the glm4moe shapes have\n"
          "one).  --dense-layers N makes the first N layers of a deepseek2 or glm4moe\n"
          "shape dense (at most all).\n"
          "--residual-scale F scales the residual writers (attn_output, ssm_out,\n"
          "ffn_down) and --output-scale F the output layer; --draft-layers N --draft\n"
          "FILE also writes FILE, the first N layers of the model with its embeddings\n"
          "and output layer: a draft for speculative decoding that agrees with the\n"
          "model more often the smaller F.\n"
          "--split-max-tensors N writes a split model instead of OUT: parts of at\n"
          "most N tensors named OUT-00001-of-0000K.gguf and so on (OUT without .gguf),\n"
          "the format of the common gguf-split tool.\n",
          out);
}

static bool parse_positive(const char *opt, const char *arg, int *out)
{
    char *end;
    long v = strtol(arg, &end, 10);
    if (end == arg || *end || v < 1 || v > (1 << 24)) {
        fprintf(stderr, "gen-model: %s: expected a positive integer, got '%s'\n", opt, arg);
        return false;
    }
    *out = (int)v;
    return true;
}

int main(int argc, char **argv)
{
    enum { OPT_SHAPE = 256, OPT_TYPE, OPT_VOCAB, OPT_SEED, OPT_THREADS, OPT_LAYERS, OPT_EMBD,
           OPT_FF, OPT_HEADS, OPT_KV_HEADS, OPT_N_VOCAB, OPT_WINDOW, OPT_RESIDUAL_SCALE,
           OPT_OUTPUT_SCALE, OPT_DRAFT, OPT_DRAFT_LAYERS, OPT_EXPERTS, OPT_EXPERTS_USED,
           OPT_EXPERT_FF, OPT_SHARED_FF, OPT_MTP_LAYERS, OPT_DENSE_LAYERS, OPT_SPLIT_MAX_TENSORS,
           OPT_OUTPUT_STD };
    static const struct option longopts[] = {
        {"shape", required_argument, NULL, OPT_SHAPE},
        {"type", required_argument, NULL, OPT_TYPE},
        {"vocab", required_argument, NULL, OPT_VOCAB},
        {"seed", required_argument, NULL, OPT_SEED},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"layers", required_argument, NULL, OPT_LAYERS},
        {"embd", required_argument, NULL, OPT_EMBD},
        {"ff", required_argument, NULL, OPT_FF},
        {"heads", required_argument, NULL, OPT_HEADS},
        {"kv-heads", required_argument, NULL, OPT_KV_HEADS},
        {"n-vocab", required_argument, NULL, OPT_N_VOCAB},
        {"experts", required_argument, NULL, OPT_EXPERTS},
        {"experts-used", required_argument, NULL, OPT_EXPERTS_USED},
        {"expert-ff", required_argument, NULL, OPT_EXPERT_FF},
        {"shared-ff", required_argument, NULL, OPT_SHARED_FF},
        {"output-std", required_argument, NULL, OPT_OUTPUT_STD},
        {"mtp-layers", required_argument, NULL, OPT_MTP_LAYERS},
        {"dense-layers", required_argument, NULL, OPT_DENSE_LAYERS},
        {"split-max-tensors", required_argument, NULL, OPT_SPLIT_MAX_TENSORS},
        {"window", required_argument, NULL, OPT_WINDOW},
        {"residual-scale", required_argument, NULL, OPT_RESIDUAL_SCALE},
        {"output-scale", required_argument, NULL, OPT_OUTPUT_SCALE},
        {"draft", required_argument, NULL, OPT_DRAFT},
        {"draft-layers", required_argument, NULL, OPT_DRAFT_LAYERS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct shape s;
    bool have_shape = false;
    int override[OPT_OUTPUT_STD + 1] = {0};
    double output_std = 0.0;
    int window = -1, mtp_layers = -1, dense_layers = -1;
    const char *draft_path = NULL;
    hearth_ftype ftype = HEARTH_FTYPE_Q8_0;
    const char *vocab_path = NULL;
    struct generator g = {.seed = 42, .residual_scale = 1.0, .output_scale = 1.0};
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_SHAPE:
            for (size_t i = 0; i < HEARTH_ARRAY_LEN(shapes); i++)
                if (strcmp(shapes[i].name, optarg) == 0) {
                    s = shapes[i];
                    have_shape = true;
                }
            if (!have_shape) {
                fprintf(stderr, "gen-model: unknown shape '%s'\n", optarg);
                return 2;
            }
            break;
        case OPT_TYPE:
            if (hearth_ftype_from_name(optarg, &ftype) != HEARTH_OK) {
                fprintf(stderr, "gen-model: %s\n", hearth_last_error());
                return 2;
            }
            break;
        case OPT_VOCAB: vocab_path = optarg; break;
        case OPT_DRAFT: draft_path = optarg; break;
        case OPT_RESIDUAL_SCALE:
        case OPT_OUTPUT_SCALE: {
            char *end;
            double v = strtod(optarg, &end);
            if (end == optarg || *end || !(v > 0) || v > 1e6) {
                fprintf(stderr, "gen-model: %s: expected a positive number, got '%s'\n", argv[optind - 1], optarg);
                return 2;
            }
            if (c == OPT_RESIDUAL_SCALE) g.residual_scale = v;
            else g.output_scale = v;
            break;
        }
        case OPT_SEED: g.seed = strtoull(optarg, NULL, 10); break;
        case OPT_THREADS:
        case OPT_LAYERS:
        case OPT_EMBD:
        case OPT_FF:
        case OPT_HEADS:
        case OPT_KV_HEADS:
        case OPT_N_VOCAB:
        case OPT_DRAFT_LAYERS:
        case OPT_EXPERTS:
        case OPT_EXPERTS_USED:
        case OPT_EXPERT_FF:
        case OPT_SHARED_FF:
        case OPT_SPLIT_MAX_TENSORS:
            if (!parse_positive(argv[optind - 1], optarg, &override[c])) return 2;
            break;
        case OPT_MTP_LAYERS: {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (end == optarg || *end || v < 0 || v > 4) {
                fprintf(stderr, "gen-model: --mtp-layers: expected 0 to 4, got '%s'\n", optarg);
                return 2;
            }
            mtp_layers = (int)v;
            break;
        }
        case OPT_DENSE_LAYERS: {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (end == optarg || *end || v < 0 || v > (1 << 16)) {
                fprintf(stderr, "gen-model: --dense-layers: expected a count, got '%s'\n", optarg);
                return 2;
            }
            dense_layers = (int)v;
            break;
        }
        case OPT_WINDOW: {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (end == optarg || *end || v < 0 || v > (1 << 24)) {
                fprintf(stderr, "gen-model: --window: expected a count, got '%s'\n", optarg);
                return 2;
            }
            window = (int)v;
            break;
        }
        case OPT_OUTPUT_STD: {
            char *end;
            output_std = strtod(optarg, &end);
            if (end == optarg || *end || !(output_std > 0.0 && output_std < 100.0)) {
                fprintf(stderr, "gen-model: --output-std: expected a number in (0, 100), got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!have_shape || optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    const char *out_path = argv[optind];
    if (!draft_path != !override[OPT_DRAFT_LAYERS]) {
        fprintf(stderr, "gen-model: --draft FILE and --draft-layers N go together\n");
        return 2;
    }
    if (override[OPT_LAYERS]) s.n_layer = override[OPT_LAYERS];
    if (mtp_layers >= 0) s.n_mtp = mtp_layers;
    if (s.n_mtp > 0 && !s.full_attn_interval && !is_glm4moe(&s)) {
        fprintf(stderr, "gen-model: --mtp-layers: only the Qwen3.5 and GLM-4.5 families have prediction layers\n");
        return 2;
    }
    if (dense_layers >= 0 && !s.kv_lora && !is_glm4moe(&s)) {
        fprintf(stderr, "gen-model: --dense-layers: only the deepseek2 and glm4moe shapes have leading dense "
                "layers\n");
        return 2;
    }
    if (dense_layers >= 0) s.n_dense_lead = dense_layers;
    if (s.n_dense_lead > s.n_layer) s.n_dense_lead = s.n_layer;
    if (override[OPT_EMBD]) s.n_embd = override[OPT_EMBD];
    if (override[OPT_FF]) s.n_ff = override[OPT_FF];
    if (override[OPT_HEADS]) s.n_head = override[OPT_HEADS];
    if (override[OPT_KV_HEADS]) s.n_head_kv = override[OPT_KV_HEADS];
    if (override[OPT_N_VOCAB]) s.n_vocab = override[OPT_N_VOCAB];
    if (s.head_size) {
        if (s.n_embd % s.head_size != 0) {
            fprintf(stderr, "gen-model: heads of %d do not divide %d dimensions\n", s.head_size, s.n_embd);
            return 2;
        }
        s.n_head = s.n_head_kv = s.n_embd / s.head_size;
    }
    if (window >= 0) s.sliding_window = window;
    if (output_std > 0) s.output_std = output_std;
    if (override[OPT_EXPERTS]) s.n_expert = override[OPT_EXPERTS];
    if (override[OPT_EXPERTS_USED]) s.n_expert_used = override[OPT_EXPERTS_USED];
    if (override[OPT_EXPERT_FF]) s.n_ff_exp = override[OPT_EXPERT_FF];
    if (override[OPT_SHARED_FF]) s.n_ff_shexp = override[OPT_SHARED_FF];
    /* Mixtral's experts are feed_forward_length wide */
    if (s.n_expert > 0 && strcmp(s.arch, "llama") == 0) {
        if (override[OPT_EXPERT_FF]) s.n_ff = s.n_ff_exp;
        else s.n_ff_exp = s.n_ff;
    }
    if (s.n_expert > 0 && (s.n_expert_used > s.n_expert || s.n_expert < 2)) {
        fprintf(stderr, "gen-model: %d experts used of %d: need 2 or more experts, at most all used\n",
                s.n_expert_used, s.n_expert);
        return 2;
    }
    if (s.n_expert == 0 && (override[OPT_EXPERTS_USED] || override[OPT_EXPERT_FF] ||
                            override[OPT_SHARED_FF])) {
        fprintf(stderr, "gen-model: shape %s has no experts\n", s.name);
        return 2;
    }
    if ((!s.head_dim && s.n_embd % s.n_head != 0) || s.n_head % s.n_head_kv != 0 ||
        shape_head_dim(&s) % 2) {
        fprintf(stderr, "gen-model: %d heads of %d/%d KV heads do not divide %d dimensions\n",
                s.n_head, s.n_head, s.n_head_kv, s.n_embd);
        return 2;
    }
    if (override[OPT_DRAFT_LAYERS] > s.n_layer) {
        fprintf(stderr, "gen-model: a draft of %d layers of a model of %d\n", override[OPT_DRAFT_LAYERS], s.n_layer);
        return 2;
    }
#ifdef _OPENMP
    g.threads = override[OPT_THREADS] ? override[OPT_THREADS] : omp_get_num_procs();
#else
    g.threads = 1;
#endif
    g.split_max_tensors = override[OPT_SPLIT_MAX_TENSORS];
    int rc = write_model(&g, &s, ftype, vocab_path, out_path);
    g.split_max_tensors = 0; /* the draft is one file */
    if (rc == 0 && draft_path) {
        s.n_layer = override[OPT_DRAFT_LAYERS];
        s.n_mtp = 0;
        rc = write_model(&g, &s, ftype, vocab_path, draft_path);
    }
    return rc;
}

/* Write the model of shape s to out_path. */
static int write_model(struct generator *g_in, const struct shape *sp, hearth_ftype ftype, const char *vocab_path,
                       const char *out_path)
{
    struct generator g = *g_in;
    struct shape s = *sp;
    g.n_tensors = 0;
    g.shape = &s;
    /* at most 6 model-wide tensors and 32 per layer */
    g.tensors = calloc(6 + 32 * (size_t)(s.n_layer + s.n_mtp), sizeof *g.tensors);
    if (!g.tensors) return 1;
    list_tensors(&g);

    struct quant_recipe recipe;
    hearth_gguf_writer *w = NULL;
    hearth_status st = quant_recipe_init(&recipe, ftype, s.n_layer, s.n_head / s.n_head_kv,
                                         !s.tied);
    if (!st) st = hearth_gguf_writer_new(&w);
    if (!st) st = set_metadata(w, &s, ftype, vocab_path);
    int64_t widest = 0;
    for (size_t i = 0; i < g.n_tensors && !st; i++) {
        struct gen_tensor *t = &g.tensors[i];
        int64_t ne4[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        hearth_type chosen;
        t->type = quant_recipe_type(&recipe, t->name, t->n_dims, ne4, HEARTH_TYPE_F32, &chosen);
        if (t->keep_f32) t->type = chosen = HEARTH_TYPE_F32;
        if (t->type != chosen)
            fprintf(stderr, "gen-model: %s: rows of %lld do not fill %s blocks; using %s\n",
                    t->name, (long long)t->ne[0], hearth_type_name(chosen),
                    hearth_type_name(t->type));
        size_t bytes = hearth_type_row_bytes(t->type, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
        st = hearth_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, NULL, bytes);
        widest = HEARTH_MAX(widest, t->ne[0]);
    }
    if (!st) {
        g.scratch_row = widest;
        g.scratch = calloc((size_t)g.threads * (size_t)widest, sizeof *g.scratch);
        if (!g.scratch) st = HEARTH_E_NOMEM;
    }
    uint32_t n_parts = 0;
    char *prefix = NULL;
    if (!st && g.split_max_tensors > 0) {
        /* OUT.gguf: OUT-00001-of-0000N.gguf, ... */
        size_t len = strlen(out_path);
        if (len > 5 && strcmp(out_path + len - 5, ".gguf") == 0) len -= 5;
        prefix = strndup(out_path, len);
        st = prefix ? gguf_writer_write_split(w, prefix, (size_t)g.split_max_tensors, fill_tensor, &g, &n_parts)
                    : HEARTH_E_NOMEM;
    } else if (!st) {
        st = gguf_writer_write_streaming(w, out_path, fill_tensor, &g);
    }
    hearth_gguf_writer_free(w);
    free(g.scratch);
    free(g.tensors);
    if (st) {
        fprintf(stderr, "gen-model: %s\n", hearth_last_error());
        free(prefix);
        return 1;
    }
    if (prefix)
        fprintf(stderr, "gen-model: wrote %s-00001-of-%05u.gguf and %u more parts (%s, %s)\n", prefix, n_parts,
                n_parts - 1, s.name, hearth_ftype_name(ftype));
    else
        fprintf(stderr, "gen-model: wrote %s (%s, %s)\n", out_path, s.name, hearth_ftype_name(ftype));
    free(prefix);
    return 0;
}

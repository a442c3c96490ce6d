/*
 * gptoss.c -- OpenAI's gpt-oss (gpt-oss-20b: 24 layers, 32 experts;
 * gpt-oss-120b: 36 layers, 128 experts; 4 experts a token): pre-norm
 * layers of grouped-query attention and a mixture of experts.
 *
 *   n   = rmsnorm(x)
 *   h   = x + W_o attention(rope(W_q n + b_q), rope(W_k n + b_k), W_v n + b_v) + b_o
 *   m   = rmsnorm(h)                         (the file's post_attention_norm)
 *   E   = the 4 experts of highest router logit l = W_r m + b_r,
 *         w = softmax(l_E)                   (over the chosen four)
 *   out = h + sum_{e in E} w_e (W_down_e a_e + b_down_e),
 *         a_e = swiglu_oai(W_gate_e m + b_gate_e, W_up_e m + b_up_e)
 *
 * with swiglu_oai(g, u) = g' sigmoid(1.702 g') (u' + 1), g' = min(g, 7),
 * u' = clamp(u, -7, 7).  Attention has a learned sink per head: one more
 * logit in each softmax's denominator, with no value, so that a head can
 * attend to nothing.  Layers alternate between a sliding window of 128
 * positions (even layers) and the whole context (odd ones), as
 * attention.sliding_window and attention.sliding_window_pattern (default
 * 2) say.  RoPE is NeoX-style with YaRN scaling (factor 32 over an
 * original context of 4096).  The softmax over the chosen experts' logits
 * equals the softmax over all of them renormalised over the chosen ones,
 * which is how moe_route computes it.  The published files store the
 * experts in MXFP4, the biases, sinks and router in F32.
 */
#include "internal.h"

#include <stdio.h>

#include "family.h"
#include "moe.h"

static const struct moe_opts gptoss_moe = {
    .norm_topk = true,
    .biases = true,
    .act = MOE_SWIGLU_OAI,
    .alpha = 1.702f,
    .limit = 7.0f,
};

static hearth_status gptoss_window(hearth_model *m)
{
    struct hparams *hp = &m->hp;
    int32_t window, period;
    HEARTH_TRY(family_get_positive(m, "attention.sliding_window", true, 0, &window));
    HEARTH_TRY(family_get_positive(m, "attention.sliding_window_pattern", false, 2, &period));
    if (period > hp->n_layer)
        return hearth_error(HEARTH_E_FORMAT, "%s: sliding-window pattern %d is longer than the %d "
                            "layers", hearth_gguf_path(m->gguf), period, hp->n_layer);
    hp->n_swa = window;
    hp->swa_period = period;
    return HEARTH_OK;
}

/* Layer il's vector "blk.IL.SUFFIX" of n floats (model_bind reads
 * vectors as F32 only). */
static hearth_status bind_vector(hearth_model *m, struct weight *w, int il, const char *suffix, int64_t n,
                                 bool required)
{
    char name[96];
    family_layer_name(name, sizeof name, il, suffix);
    return model_bind(m, w, name, n, 0, required);
}

static hearth_status gptoss_load(hearth_model *m)
{
    HEARTH_TRY(family_read_hparams(m, ROPE_NEOX));
    HEARTH_TRY(gptoss_window(m));
    HEARTH_TRY(moe_read_hparams(m, &gptoss_moe));
    HEARTH_TRY(family_bind_globals(m));
    const struct hparams *hp = &m->hp;
    const int64_t n_embd = hp->n_embd, n_q = (int64_t)hp->n_head * hp->head_dim;
    const int64_t n_kv = (int64_t)hp->n_head_kv * hp->head_dim;
    char name[96];
    for (int il = 0; il < hp->n_layer; il++) {
        struct layer *L = &m->layers[il];
#define BIND(field, suffix, ne0, ne1) \
    do { \
        family_layer_name(name, sizeof name, il, suffix); \
        HEARTH_TRY(model_bind(m, &L->field, name, ne0, ne1, true)); \
    } while (0)
        BIND(attn_norm, "attn_norm.weight", n_embd, 0);
        BIND(wq, "attn_q.weight", n_embd, n_q);
        BIND(wk, "attn_k.weight", n_embd, n_kv);
        BIND(wv, "attn_v.weight", n_embd, n_kv);
        BIND(wo, "attn_output.weight", n_q, n_embd);
#undef BIND
        HEARTH_TRY(bind_vector(m, &L->bq, il, "attn_q.bias", n_q, false));
        HEARTH_TRY(bind_vector(m, &L->bk, il, "attn_k.bias", n_kv, false));
        HEARTH_TRY(bind_vector(m, &L->bv, il, "attn_v.bias", n_kv, false));
        HEARTH_TRY(bind_vector(m, &L->bo, il, "attn_output.bias", n_embd, true));
        HEARTH_TRY(bind_vector(m, &L->attn_sinks, il, "attn_sinks.weight", hp->n_head, true));
        /* the norm before the experts, named as the norm after attention */
        HEARTH_TRY(bind_vector(m, &L->ffn_norm, il, "post_attention_norm.weight", n_embd, true));
        HEARTH_TRY(moe_bind_layer(m, il, &gptoss_moe));
    }
    return HEARTH_OK;
}

static hearth_status gptoss_layer(struct forward *f, int il)
{
    HEARTH_TRY(family_attention_block(f, il));
    return moe_ffn_block(f, il);
}

const struct arch arch_gptoss = {.name = "gpt-oss",
                                 .load = gptoss_load,
                                 .layer = gptoss_layer,
                                 .heads_split = true,
                                 .no_device = "its attention sinks, YaRN rotary embeddings and expert routing "
                                              "are not in the OpenCL backend"};

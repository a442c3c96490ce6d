/*
 * gemma.c -- the Gemma 2 and Gemma 3 families (text decoders).
 *
 * One layer (Gemma Team, "Gemma 2: Improving Open Language Models at a
 * Practical Size", 2024, section 2; "Gemma 3 Technical Report", 2025;
 * transformers' Gemma2DecoderLayer / Gemma3DecoderLayer):
 *   n   = rmsnorm(x) (1 + w_attn)
 *   q, k, v = W_q n, W_k n, W_v n         [Gemma 3: q, k heads RMS-normed]
 *   a   = W_o attention(rope(q) * s, rope(k), v)   over the layer's window
 *   h   = x + rmsnorm(a) (1 + w_post_attn)
 *   m   = rmsnorm(h) (1 + w_ffn)
 *   out = h + rmsnorm(W_down (gelu_tanh(W_gate m) * W_up m)) (1 + w_post_ffw)
 * with x0 = embedding * sqrt(d_model), s = 1/sqrt(head_dim) (the 27B
 * models: 1/sqrt(d_model / n_head), their query_pre_attn_scalar), and the
 * final logits z = c tanh(z / c) (Gemma 2: c = 30; Gemma 3 where the file
 * says).  Gemma 2 soft-caps the attention scores the same way (c = 50)
 * and alternates sliding-window (4096) and global layers; Gemma 3 has
 * five sliding-window layers to one global, the local ones with their own
 * RoPE base (10000) and no RoPE scaling.
 *
 * The norms' (1 + w): GGUF files store 1 + w already (the conversion adds
 * 1 to every "norm.weight" tensor of these families), so the layer uses
 * the stored weights as they are.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>

#include "family.h"

/* The sliding window (dflt_window where the file has none; 0 in the file:
 * no window) and its layer pattern. */
static hearth_status read_window(hearth_model *m, int32_t dflt_window, int32_t dflt_period)
{
    struct hparams *hp = &m->hp;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.sliding_window", m->arch->name);
    uint32_t w;
    hearth_status st = hearth_gguf_get_u32(m->gguf, key, &w);
    if (st == HEARTH_E_NOT_FOUND) w = (uint32_t)dflt_window;
    else if (st) return st;
    if (w > INT32_MAX)
        return hearth_error(HEARTH_E_FORMAT, "%s: metadata '%s' = %u is out of range",
                            hearth_gguf_path(m->gguf), key, w);
    hp->n_swa = (int32_t)w;
    return family_get_positive(m, "attention.sliding_window_pattern", false, dflt_period, &hp->swa_period);
}

static hearth_status bind_gemma(hearth_model *m, bool qk_norm)
{
    HEARTH_TRY(family_bind_globals(m));
    const struct layer_tensors t = {.qk_norm = qk_norm, .post_norms = true};
    for (int il = 0; il < m->hp.n_layer; il++) HEARTH_TRY(family_bind_layer(m, il, &t));
    return HEARTH_OK;
}

/* The query scale: the 27B models scale by d_model / n_head rather than
 * the head dimension (their query_pre_attn_scalar; the files do not carry
 * it, so the model is recognised by its layer count). */
static void query_scale(struct hparams *hp, int32_t layers_27b)
{
    const float d = hp->n_layer == layers_27b ? (float)hp->n_embd / (float)hp->n_head : (float)hp->head_dim;
    hp->attn_scale = 1.0f / sqrtf(d);
}

static hearth_status gemma2_load(hearth_model *m)
{
    struct hparams *hp = &m->hp;
    HEARTH_TRY(family_read_hparams(m, ROPE_NEOX));
    hp->embd_scale = sqrtf((float)hp->n_embd);
    HEARTH_TRY(read_window(m, 4096, 2)); /* Gemma 2's where the file leaves them out */
    HEARTH_TRY(family_get_float(m, "rope.freq_base_swa", hp->rope.freq_base, &hp->rope_swa.freq_base));
    HEARTH_TRY(family_get_float(m, "attn_logit_softcapping", 50.0f, &hp->attn_softcap));
    HEARTH_TRY(family_get_float(m, "final_logit_softcapping", 30.0f, &hp->final_softcap));
    if (!(hp->attn_softcap >= 0.0f && hp->final_softcap >= 0.0f && hp->rope_swa.freq_base > 1.0f))
        return hearth_error(HEARTH_E_FORMAT, "%s: soft-capping or local RoPE base out of range",
                            hearth_gguf_path(m->gguf));
    query_scale(hp, 46);
    return bind_gemma(m, false);
}

static hearth_status gemma3_load(hearth_model *m)
{
    struct hparams *hp = &m->hp;
    HEARTH_TRY(family_read_hparams(m, ROPE_NEOX));
    hp->embd_scale = sqrtf((float)hp->n_embd);
    /* Gemma 3 slides only where the file gives a window; the local
     * layers have their own base and no RoPE scaling */
    HEARTH_TRY(read_window(m, 0, 6));
    if (hp->n_swa > 0) {
        HEARTH_TRY(family_get_float(m, "rope.freq_base_swa", 10000.0f, &hp->rope_swa.freq_base));
        hp->rope_swa.freq_scale = 1.0f;
    }
    HEARTH_TRY(family_get_float(m, "final_logit_softcapping", 0.0f, &hp->final_softcap));
    if (!(hp->final_softcap >= 0.0f && hp->rope_swa.freq_base > 1.0f))
        return hearth_error(HEARTH_E_FORMAT, "%s: soft-capping or local RoPE base out of range",
                            hearth_gguf_path(m->gguf));
    query_scale(hp, 62);
    return bind_gemma(m, true);
}

static hearth_status gemma_layer(struct forward *f, int il)
{
    const struct hparams *hp = &f->model->hp;
    const struct layer *L = &f->model->layers[il];
    struct hearth_backend *be = f->be;
    const struct backend_ops *op = be->ops;
    const struct rope_params *rope = hparams_layer_window(hp, il) ? &hp->rope_swa : &hp->rope;
    if (!op->geglu)
        return hearth_error(HEARTH_E_UNSUPPORTED, "the %s backend has no GELU feed-forward", op->name);

    /* attention block, its output normed before the residual */
    HEARTH_TRY(op->rmsnorm(be, &f->cur, &f->x, &L->attn_norm, hp->norm_eps));
    HEARTH_TRY(family_attention(f, il, rope));
    HEARTH_TRY(op->matmul(be, &f->cur, &L->wo, &f->att));
    HEARTH_TRY(op->rmsnorm(be, &f->cur, &f->cur, &L->attn_post_norm, hp->norm_eps));
    HEARTH_TRY(op->add(be, &f->x, &f->x, &f->cur));

    /* feed-forward block: GELU-gated, its output normed too */
    HEARTH_TRY(op->rmsnorm(be, &f->cur, &f->x, &L->ffn_norm, hp->norm_eps));
    struct act *const gate_up[] = {&f->gate, &f->up};
    const struct weight *const w_gate_up[] = {&L->w_gate, &L->w_up};
    HEARTH_TRY(backend_matmul_set(be, 2, gate_up, w_gate_up, &f->cur));
    HEARTH_TRY(op->geglu(be, &f->gate, &f->gate, &f->up));
    HEARTH_TRY(op->matmul(be, &f->cur, &L->w_down, &f->gate));
    HEARTH_TRY(op->rmsnorm(be, &f->cur, &f->cur, &L->ffn_post_norm, hp->norm_eps));
    return op->add(be, &f->x, &f->x, &f->cur);
}

#define GEMMA_NO_DEVICE "the OpenCL backend has no GELU feed-forward, soft-capping or " \
                        "sliding-window attention yet"

const struct arch arch_gemma2 = {.name = "gemma2",
                                 .load = gemma2_load,
                                 .layer = gemma_layer,
                                 .no_device = GEMMA_NO_DEVICE,
                                 .heads_split = true};
const struct arch arch_gemma3 = {.name = "gemma3",
                                 .load = gemma3_load,
                                 .layer = gemma_layer,
                                 .no_device = GEMMA_NO_DEVICE,
                                 .heads_split = true};

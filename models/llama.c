/*
 * llama.c -- the llama family: Llama 2 and 3.x, TinyLlama, Mistral-style
 * grouped-query attention, and (with q/k/v biases and NeoX RoPE) qwen2.
 *
 * One layer, pre-norm (Touvron et al. 2023):
 *   h   = x + W_o attention(rope(W_q n), rope(W_k n), W_v n),  n = rmsnorm(x)
 *   out = h + W_down (silu(W_gate m) * (W_up m)),             m = rmsnorm(h)
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

#include "forward.h"
#include "model.h"

struct family_opts {
    enum rope_style rope_style;
    bool qkv_bias;     /* q, k, v projections have biases (qwen2) */
};

/* An unsigned hyperparameter "ARCH.suffix" that must be positive. */
static hearth_status get_positive(hearth_model *m, const char *suffix, bool required, int32_t dflt,
                                  int32_t *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", m->arch->name, suffix);
    uint32_t v;
    hearth_status st = hearth_gguf_get_u32(m->gguf, key, &v);
    if (st == HEARTH_E_NOT_FOUND && !required) {
        *out = dflt;
        return HEARTH_OK;
    }
    if (st == HEARTH_E_NOT_FOUND)
        return hearth_error(HEARTH_E_FORMAT, "%s: required metadata '%s' is missing",
                            hearth_gguf_path(m->gguf), key);
    if (st) return st;
    if (v == 0 || v > INT32_MAX)
        return hearth_error(HEARTH_E_FORMAT, "%s: metadata '%s' = %u is out of range",
                            hearth_gguf_path(m->gguf), key, v);
    *out = (int32_t)v;
    return HEARTH_OK;
}

static hearth_status get_float(hearth_model *m, const char *suffix, float dflt, float *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", m->arch->name, suffix);
    hearth_status st = hearth_gguf_get_f32(m->gguf, key, out);
    if (st == HEARTH_E_NOT_FOUND) {
        *out = dflt;
        return HEARTH_OK;
    }
    return st;
}

static hearth_status read_hparams(hearth_model *m, const struct family_opts *o)
{
    struct hparams *hp = &m->hp;
    const char *path = hearth_gguf_path(m->gguf);
    HEARTH_TRY(get_positive(m, "context_length", true, 0, &hp->n_ctx_train));
    HEARTH_TRY(get_positive(m, "embedding_length", true, 0, &hp->n_embd));
    HEARTH_TRY(get_positive(m, "block_count", true, 0, &hp->n_layer));
    HEARTH_TRY(get_positive(m, "feed_forward_length", true, 0, &hp->n_ff));
    HEARTH_TRY(get_positive(m, "attention.head_count", true, 0, &hp->n_head));
    HEARTH_TRY(get_positive(m, "attention.head_count_kv", false, hp->n_head, &hp->n_head_kv));
    if (hp->n_embd % hp->n_head != 0)
        return hearth_error(HEARTH_E_FORMAT, "%s: embedding length %d is not a multiple of the "
                            "head count %d", path, hp->n_embd, hp->n_head);
    int32_t head_dim;
    HEARTH_TRY(get_positive(m, "attention.key_length", false, hp->n_embd / hp->n_head, &head_dim));
    int32_t v_dim;
    HEARTH_TRY(get_positive(m, "attention.value_length", false, head_dim, &v_dim));
    if (v_dim != head_dim)
        return hearth_error(HEARTH_E_UNSUPPORTED, "%s: key length %d and value length %d differ",
                            path, head_dim, v_dim);
    hp->head_dim = head_dim;
    if (hp->n_head % hp->n_head_kv != 0)
        return hearth_error(HEARTH_E_FORMAT, "%s: %d attention heads cannot share %d key/value "
                            "heads evenly", path, hp->n_head, hp->n_head_kv);
    HEARTH_TRY(get_float(m, "attention.layer_norm_rms_epsilon", 1e-5f, &hp->norm_eps));
    if (!(hp->norm_eps > 0.0f && hp->norm_eps < 1.0f))
        return hearth_error(HEARTH_E_FORMAT, "%s: RMS norm epsilon %g is out of range", path,
                            (double)hp->norm_eps);

    struct rope_params *r = &hp->rope;
    r->style = o->rope_style;
    HEARTH_TRY(get_positive(m, "rope.dimension_count", false, head_dim, &r->n_dims));
    if (r->n_dims > head_dim || r->n_dims % 2 != 0)
        return hearth_error(HEARTH_E_FORMAT, "%s: RoPE dimension count %d must be even and at most "
                            "the head dimension %d", path, r->n_dims, head_dim);
    HEARTH_TRY(get_float(m, "rope.freq_base", 10000.0f, &r->freq_base));
    if (!(r->freq_base > 1.0f))
        return hearth_error(HEARTH_E_FORMAT, "%s: RoPE frequency base %g is out of range", path,
                            (double)r->freq_base);
    r->freq_scale = 1.0f;
    char key[128];
    const char *scaling = NULL;
    snprintf(key, sizeof key, "%s.rope.scaling.type", m->arch->name);
    if (hearth_gguf_get_str(m->gguf, key, &scaling) == HEARTH_OK && strcmp(scaling, "none") != 0) {
        if (strcmp(scaling, "linear") != 0)
            return hearth_error(HEARTH_E_UNSUPPORTED, "%s: RoPE scaling '%s' is not supported "
                                "(none, linear)", path, scaling);
        float factor;
        HEARTH_TRY(get_float(m, "rope.scaling.factor", 1.0f, &factor));
        if (!(factor >= 1.0f && factor < 1e6f))
            return hearth_error(HEARTH_E_FORMAT, "%s: RoPE scaling factor %g is out of range",
                                path, (double)factor);
        r->freq_scale = 1.0f / factor;
    } else {
        float linear;
        HEARTH_TRY(get_float(m, "rope.scale_linear", 1.0f, &linear));
        if (!(linear >= 1.0f && linear < 1e6f))
            return hearth_error(HEARTH_E_FORMAT, "%s: RoPE linear scale %g is out of range", path,
                                (double)linear);
        r->freq_scale = 1.0f / linear;
    }
    return HEARTH_OK;
}

static hearth_status bind_tensors(hearth_model *m, const struct family_opts *o)
{
    const struct hparams *hp = &m->hp;
    const int64_t n_embd = hp->n_embd, n_q = (int64_t)hp->n_head * hp->head_dim;
    const int64_t n_kv = (int64_t)hp->n_head_kv * hp->head_dim, n_ff = hp->n_ff;

    HEARTH_TRY(model_bind(m, &m->tok_embd, "token_embd.weight", n_embd, -1, true));
    m->hp.n_vocab = (int32_t)m->tok_embd.n_out;
    HEARTH_TRY(model_bind(m, &m->output_norm, "output_norm.weight", n_embd, 0, true));
    HEARTH_TRY(model_bind(m, &m->output, "output.weight", n_embd, hp->n_vocab, false));
    if (!m->output.data) m->output = m->tok_embd; /* tied input and output embeddings */
    HEARTH_TRY(model_bind(m, &m->rope_freqs, "rope_freqs.weight", hp->rope.n_dims / 2, 0, false));
    if (m->rope_freqs.data) {
        if (m->rope_freqs.type != HEARTH_TYPE_F32)
            return hearth_error(HEARTH_E_FORMAT, "%s: rope_freqs.weight must be F32",
                                hearth_gguf_path(m->gguf));
        m->hp.rope.freq_factors = m->rope_freqs.data;
    }

    m->layers = hearth_calloc((size_t)hp->n_layer, sizeof *m->layers, "the layer table");
    if (!m->layers) return HEARTH_E_NOMEM;
    for (int il = 0; il < hp->n_layer; il++) {
        struct layer *L = &m->layers[il];
        char name[96];
#define BIND(field, suffix, ne0, ne1, req) \
    do { \
        snprintf(name, sizeof name, "blk.%d.%s", il, suffix); \
        HEARTH_TRY(model_bind(m, &L->field, name, ne0, ne1, req)); \
    } while (0)
        BIND(attn_norm, "attn_norm.weight", n_embd, 0, true);
        BIND(wq, "attn_q.weight", n_embd, n_q, true);
        BIND(wk, "attn_k.weight", n_embd, n_kv, true);
        BIND(wv, "attn_v.weight", n_embd, n_kv, true);
        BIND(wo, "attn_output.weight", n_q, n_embd, true);
        BIND(bq, "attn_q.bias", n_q, 0, o->qkv_bias);
        BIND(bk, "attn_k.bias", n_kv, 0, o->qkv_bias);
        BIND(bv, "attn_v.bias", n_kv, 0, o->qkv_bias);
        BIND(ffn_norm, "ffn_norm.weight", n_embd, 0, true);
        BIND(w_gate, "ffn_gate.weight", n_embd, n_ff, true);
        BIND(w_up, "ffn_up.weight", n_embd, n_ff, true);
        BIND(w_down, "ffn_down.weight", n_ff, n_embd, true);
#undef BIND
    }
    return HEARTH_OK;
}

static hearth_status family_load(hearth_model *m, const struct family_opts *o)
{
    HEARTH_TRY(read_hparams(m, o));
    return bind_tensors(m, o);
}

static hearth_status llama_load(hearth_model *m)
{
    static const struct family_opts o = {ROPE_NORMAL, false};
    return family_load(m, &o);
}

static hearth_status qwen2_load(hearth_model *m)
{
    static const struct family_opts o = {ROPE_NEOX, true};
    return family_load(m, &o);
}

/* The layer, top to bottom as in the equations above.  Biases are applied
 * when the file has them (qwen2 always does, llama files may). */
static hearth_status family_layer(struct forward *f, int il)
{
    const struct hparams *hp = &f->model->hp;
    const struct layer *L = &f->model->layers[il];
    struct hearth_backend *be = f->be;
    const struct backend_ops *op = be->ops;

    /* attention block */
    HEARTH_TRY(op->rmsnorm(be, &f->cur, &f->x, &L->attn_norm, hp->norm_eps));
    struct act *const qkv[] = {&f->q, &f->k, &f->v};
    const struct weight *const w_qkv[] = {&L->wq, &L->wk, &L->wv};
    HEARTH_TRY(backend_matmul_set(be, 3, qkv, w_qkv, &f->cur));
    if (L->bq.data) HEARTH_TRY(op->add_bias(be, &f->q, &L->bq));
    if (L->bk.data) HEARTH_TRY(op->add_bias(be, &f->k, &L->bk));
    if (L->bv.data) HEARTH_TRY(op->add_bias(be, &f->v, &L->bv));
    HEARTH_TRY(op->rope(be, &f->q, hp->n_head, hp->head_dim, &hp->rope, &f->bp));
    HEARTH_TRY(op->rope(be, &f->k, hp->n_head_kv, hp->head_dim, &hp->rope, &f->bp));
    HEARTH_TRY(op->attention(be, &f->att, &f->q, &f->k, &f->v, f->kv, il, hp, &f->bp));
    HEARTH_TRY(op->matmul(be, &f->cur, &L->wo, &f->att));
    HEARTH_TRY(op->add(be, &f->x, &f->x, &f->cur));

    /* feed-forward block: SwiGLU */
    HEARTH_TRY(op->rmsnorm(be, &f->cur, &f->x, &L->ffn_norm, hp->norm_eps));
    struct act *const gate_up[] = {&f->gate, &f->up};
    const struct weight *const w_gate_up[] = {&L->w_gate, &L->w_up};
    HEARTH_TRY(backend_matmul_set(be, 2, gate_up, w_gate_up, &f->cur));
    HEARTH_TRY(op->swiglu(be, &f->gate, &f->gate, &f->up));
    HEARTH_TRY(op->matmul(be, &f->cur, &L->w_down, &f->gate));
    HEARTH_TRY(op->add(be, &f->x, &f->x, &f->cur));
    return HEARTH_OK;
}

const struct arch arch_llama = {"llama", llama_load, family_layer};
const struct arch arch_qwen2 = {"qwen2", qwen2_load, family_layer};

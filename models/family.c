/*
 * family.c -- the shared pieces of the architecture files (family.h):
 * hyperparameters, tensor binding and the layer steps several families
 * use.
 */
#include "family.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

hearth_status family_get_positive(hearth_model *m, const char *suffix, bool required, int32_t dflt,
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

hearth_status family_get_float(hearth_model *m, const char *suffix, float dflt, float *out)
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

bool family_has_key(hearth_model *m, const char *suffix)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", m->arch->name, suffix);
    return hearth_gguf_find_key(m->gguf, key) >= 0;
}

/* YaRN's magnitude factor for a context scaled by s (1 for s <= 1). */
static float yarn_mscale(float s, float mscale)
{
    return s <= 1.0f ? 1.0f : 0.1f * mscale * logf(s) + 1.0f;
}

/* The dimension (pair index, fractional) below which a pair turns fewer
 * than n_rot times over the original context (YaRN, section 3.2). */
static float yarn_corr_dim(int32_t n_dims, int32_t n_ctx_orig, float n_rot, float base)
{
    return (float)n_dims * logf((float)n_ctx_orig / (n_rot * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

/* YaRN from the file's rope.scaling keys: the original context
 * (original_context_length, default the training context), the ramp's
 * ends from beta_fast and beta_slow (default 32 and 1 rotations), the mix
 * (yarn_ext_factor, default 1) and the magnitude of cos and sin: 0.1
 * ln(factor) + 1, or with yarn_log_multiplier m that over 0.1 m
 * ln(factor) + 1 (DeepSeek's convention), times attn_factor where the
 * file gives one. */
static hearth_status read_yarn(hearth_model *m, struct rope_params *r, float factor)
{
    const struct hparams *hp = &m->hp;
    const char *path = hearth_gguf_path(m->gguf);
    int32_t n_orig;
    HEARTH_TRY(family_get_positive(m, "rope.scaling.original_context_length", false, hp->n_ctx_train, &n_orig));
    float ext, fast, slow, log_mul, attn;
    HEARTH_TRY(family_get_float(m, "rope.scaling.yarn_ext_factor", 1.0f, &ext));
    HEARTH_TRY(family_get_float(m, "rope.scaling.yarn_beta_fast", 32.0f, &fast));
    HEARTH_TRY(family_get_float(m, "rope.scaling.yarn_beta_slow", 1.0f, &slow));
    HEARTH_TRY(family_get_float(m, "rope.scaling.yarn_log_multiplier", 0.0f, &log_mul));
    HEARTH_TRY(family_get_float(m, "rope.scaling.attn_factor", 1.0f, &attn));
    if (!(ext >= 0.0f && ext <= 1.0f) || !(fast > 0.0f && fast < 1e6f) || !(slow > 0.0f && slow < 1e6f) ||
        !(log_mul >= 0.0f && log_mul < 100.0f) || !(attn > 0.0f && attn < 100.0f))
        return hearth_error(HEARTH_E_FORMAT, "%s: YaRN parameters out of range (ext_factor %g, "
                            "beta_fast %g, beta_slow %g, log_multiplier %g, attn_factor %g)", path,
                            (double)ext, (double)fast, (double)slow, (double)log_mul, (double)attn);
    r->yarn_ext = ext;
    r->yarn_low = HEARTH_MAX(0.0f, floorf(yarn_corr_dim(r->n_dims, n_orig, fast, r->freq_base)));
    r->yarn_high = HEARTH_MIN((float)(r->n_dims - 1), ceilf(yarn_corr_dim(r->n_dims, n_orig, slow, r->freq_base)));
    const float mag = log_mul != 0.0f ? yarn_mscale(factor, 1.0f) / yarn_mscale(factor, log_mul)
                                      : yarn_mscale(factor, 1.0f);
    r->mscale = ext != 0.0f ? mag * attn : attn;
    return HEARTH_OK;
}

hearth_status family_read_sizes(hearth_model *m)
{
    struct hparams *hp = &m->hp;
    const char *path = hearth_gguf_path(m->gguf);
    HEARTH_TRY(family_get_positive(m, "context_length", true, 0, &hp->n_ctx_train));
    HEARTH_TRY(family_get_positive(m, "embedding_length", true, 0, &hp->n_embd));
    HEARTH_TRY(family_get_positive(m, "block_count", true, 0, &hp->n_layer));
    HEARTH_TRY(family_get_positive(m, "feed_forward_length", true, 0, &hp->n_ff));
    HEARTH_TRY(family_get_positive(m, "attention.head_count", true, 0, &hp->n_head));
    HEARTH_TRY(family_get_positive(m, "attention.head_count_kv", false, hp->n_head, &hp->n_head_kv));
    if (hp->n_head % hp->n_head_kv != 0)
        return hearth_error(HEARTH_E_FORMAT, "%s: %d attention heads cannot share %d key/value "
                            "heads evenly", path, hp->n_head, hp->n_head_kv);
    HEARTH_TRY(family_get_float(m, "attention.layer_norm_rms_epsilon", 1e-5f, &hp->norm_eps));
    if (!(hp->norm_eps > 0.0f && hp->norm_eps < 1.0f))
        return hearth_error(HEARTH_E_FORMAT, "%s: RMS norm epsilon %g is out of range", path,
                            (double)hp->norm_eps);
    hp->attn_softcap = 0.0f;
    hp->final_softcap = 0.0f;
    hp->embd_scale = 1.0f;
    hp->n_swa = 0;
    hp->swa_period = 1;
    return HEARTH_OK;
}

hearth_status family_read_rope(hearth_model *m, enum rope_style style, int32_t head_dim)
{
    struct hparams *hp = &m->hp;
    const char *path = hearth_gguf_path(m->gguf);
    struct rope_params *r = &hp->rope;
    r->style = style;
    HEARTH_TRY(family_get_positive(m, "rope.dimension_count", false, head_dim, &r->n_dims));
    if (r->n_dims > head_dim || r->n_dims % 2 != 0)
        return hearth_error(HEARTH_E_FORMAT, "%s: RoPE dimension count %d must be even and at most "
                            "the head dimension %d", path, r->n_dims, head_dim);
    HEARTH_TRY(family_get_float(m, "rope.freq_base", 10000.0f, &r->freq_base));
    if (!(r->freq_base > 1.0f))
        return hearth_error(HEARTH_E_FORMAT, "%s: RoPE frequency base %g is out of range", path,
                            (double)r->freq_base);
    r->freq_scale = 1.0f;
    char key[128];
    const char *scaling = NULL;
    snprintf(key, sizeof key, "%s.rope.scaling.type", m->arch->name);
    r->mscale = 1.0f;
    r->yarn_ext = r->yarn_low = r->yarn_high = 0.0f;
    if (hearth_gguf_get_str(m->gguf, key, &scaling) == HEARTH_OK && strcmp(scaling, "none") != 0) {
        const bool yarn = strcmp(scaling, "yarn") == 0;
        if (strcmp(scaling, "linear") != 0 && !yarn)
            return hearth_error(HEARTH_E_UNSUPPORTED, "%s: RoPE scaling '%s' is not supported "
                                "(none, linear, yarn)", path, scaling);
        float factor;
        HEARTH_TRY(family_get_float(m, "rope.scaling.factor", 1.0f, &factor));
        if (!(factor >= 1.0f && factor < 1e6f))
            return hearth_error(HEARTH_E_FORMAT, "%s: RoPE scaling factor %g is out of range",
                                path, (double)factor);
        r->freq_scale = 1.0f / factor;
        if (yarn) HEARTH_TRY(read_yarn(m, r, factor));
    } else {
        float linear;
        HEARTH_TRY(family_get_float(m, "rope.scale_linear", 1.0f, &linear));
        if (!(linear >= 1.0f && linear < 1e6f))
            return hearth_error(HEARTH_E_FORMAT, "%s: RoPE linear scale %g is out of range", path,
                                (double)linear);
        r->freq_scale = 1.0f / linear;
    }
    hp->rope_swa = *r;
    return HEARTH_OK;
}

hearth_status family_read_hparams(hearth_model *m, enum rope_style style)
{
    struct hparams *hp = &m->hp;
    const char *path = hearth_gguf_path(m->gguf);
    HEARTH_TRY(family_read_sizes(m));
    int32_t head_dim;
    if (family_has_key(m, "attention.key_length")) {
        HEARTH_TRY(family_get_positive(m, "attention.key_length", true, 0, &head_dim));
    } else {
        if (hp->n_embd % hp->n_head != 0)
            return hearth_error(HEARTH_E_FORMAT, "%s: embedding length %d is not a multiple of the "
                                "head count %d", path, hp->n_embd, hp->n_head);
        head_dim = hp->n_embd / hp->n_head;
    }
    int32_t v_dim;
    HEARTH_TRY(family_get_positive(m, "attention.value_length", false, head_dim, &v_dim));
    if (v_dim != head_dim)
        return hearth_error(HEARTH_E_UNSUPPORTED, "%s: key length %d and value length %d differ",
                            path, head_dim, v_dim);
    hp->head_dim = head_dim;
    HEARTH_TRY(family_read_rope(m, style, head_dim));
    hp->attn_scale = 1.0f / sqrtf((float)head_dim);
    return HEARTH_OK;
}

hearth_status family_bind_globals(hearth_model *m)
{
    const struct hparams *hp = &m->hp;
    const int64_t n_embd = hp->n_embd;
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
    m->layers = hearth_calloc((size_t)(hp->n_layer + m->n_mtp), sizeof *m->layers, "the layer table");
    return m->layers ? HEARTH_OK : HEARTH_E_NOMEM;
}

hearth_status family_read_nextn(hearth_model *m)
{
    struct hparams *hp = &m->hp;
    const char *path = hearth_gguf_path(m->gguf);
    m->n_mtp = 0;
    if (!family_has_key(m, "nextn_predict_layers")) return HEARTH_OK;
    char key[128];
    uint32_t v;
    snprintf(key, sizeof key, "%s.nextn_predict_layers", m->arch->name);
    HEARTH_TRY(hearth_gguf_get_u32(m->gguf, key, &v));
    if (v >= (uint32_t)hp->n_layer)
        return hearth_error(HEARTH_E_FORMAT, "%s: metadata '%s' = %u leaves no trunk of the %d layers "
                            "('%s.block_count' counts the prediction layers)", path, key, v, hp->n_layer,
                            m->arch->name);
    /* the trunk is the model; the prediction layers come after it, and
     * the first of them drafts */
    hp->n_layer -= (int32_t)v;
    char name[96], probe[96];
    family_layer_name(name, sizeof name, hp->n_layer, "nextn.eh_proj.weight");
    family_layer_name(probe, sizeof probe, hp->n_layer, "attn_norm.weight");
    const bool held = hearth_gguf_find_tensor(m->gguf, name) || hearth_gguf_find_tensor(m->gguf, probe);
    m->n_mtp = v > 0 && held;
    return HEARTH_OK;
}

hearth_status family_bind_mtp(hearth_model *m, int il)
{
    const int64_t E = m->hp.n_embd;
    struct mtp_weights *w = &m->mtp;
    char name[96];
    const struct {
        struct weight *w;
        const char *suffix;
        int64_t ne0, ne1;
        bool required;
    } ws[] = {
        {&w->eh_proj, "nextn.eh_proj.weight", 2 * E, E, true},
        {&w->enorm, "nextn.enorm.weight", E, 0, true},
        {&w->hnorm, "nextn.hnorm.weight", E, 0, true},
        {&w->head_norm, "nextn.shared_head_norm.weight", E, 0, false},
        {&w->head, "nextn.shared_head_head.weight", E, m->hp.n_vocab, false},
        {&w->embd, "nextn.embed_tokens.weight", E, m->hp.n_vocab, false},
    };
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(ws); i++) {
        family_layer_name(name, sizeof name, il, ws[i].suffix);
        HEARTH_TRY(model_bind(m, ws[i].w, name, ws[i].ne0, ws[i].ne1, ws[i].required));
    }
    if (!w->head_norm.data) w->head_norm = m->output_norm;
    if (!w->head.data) w->head = m->output;
    if (!w->embd.data) w->embd = m->tok_embd;
    return HEARTH_OK;
}

void family_layer_name(char *buf, size_t size, int il, const char *suffix)
{
    snprintf(buf, size, "blk.%d.%s", il, suffix);
}

void family_weight_rows(struct weight *out, const struct weight *fused, int64_t first, int64_t n,
                        const char *name)
{
    *out = *fused;
    out->name = name;
    out->n_out = n;
    out->data = (const uint8_t *)fused->data + (size_t)first * fused->row_bytes;
}

hearth_status family_bind_layer(hearth_model *m, int il, const struct layer_tensors *t)
{
    const struct hparams *hp = &m->hp;
    const int64_t n_embd = hp->n_embd, n_q = (int64_t)hp->n_head * hp->head_dim;
    const int64_t n_kv = (int64_t)hp->n_head_kv * hp->head_dim, n_ff = hp->n_ff;
    struct layer *L = &m->layers[il];
    char name[96];
#define BIND(field, suffix, ne0, ne1, req) \
    do { \
        family_layer_name(name, sizeof name, il, suffix); \
        HEARTH_TRY(model_bind(m, &L->field, name, ne0, ne1, req)); \
    } while (0)
    BIND(attn_norm, "attn_norm.weight", n_embd, 0, true);
    family_layer_name(name, sizeof name, il, "attn_qkv.weight");
    if (t->fused_qkv && hearth_gguf_find_tensor(m->gguf, name)) {
        struct weight qkv;
        HEARTH_TRY(model_bind(m, &qkv, name, n_embd, n_q + 2 * n_kv, true));
        family_weight_rows(&L->wq, &qkv, 0, n_q, qkv.name);
        family_weight_rows(&L->wk, &qkv, n_q, n_kv, qkv.name);
        family_weight_rows(&L->wv, &qkv, n_q + n_kv, n_kv, qkv.name);
    } else {
        BIND(wq, "attn_q.weight", n_embd, n_q, true);
        BIND(wk, "attn_k.weight", n_embd, n_kv, true);
        BIND(wv, "attn_v.weight", n_embd, n_kv, true);
    }
    BIND(wo, "attn_output.weight", n_q, n_embd, true);
    BIND(bq, "attn_q.bias", n_q, 0, t->qkv_bias);
    BIND(bk, "attn_k.bias", n_kv, 0, t->qkv_bias);
    BIND(bv, "attn_v.bias", n_kv, 0, t->qkv_bias);
    if (t->qk_norm || t->qk_norm_optional) {
        BIND(attn_q_norm, "attn_q_norm.weight", hp->head_dim, 0, t->qk_norm);
        BIND(attn_k_norm, "attn_k_norm.weight", hp->head_dim, 0, t->qk_norm);
        if (!L->attn_q_norm.data != !L->attn_k_norm.data) {
            family_layer_name(name, sizeof name, il, L->attn_q_norm.data ? "attn_k_norm.weight" : "attn_q_norm.weight");
            return hearth_error(HEARTH_E_FORMAT, "%s: layer %d normalises the %s heads but not the %s: tensor "
                                "'%s' is missing", hearth_gguf_path(m->gguf), il,
                                L->attn_q_norm.data ? "query" : "key", L->attn_q_norm.data ? "key" : "query", name);
        }
    }
    if (t->post_norms) {
        BIND(attn_post_norm, "post_attention_norm.weight", n_embd, 0, true);
        BIND(ffn_post_norm, "post_ffw_norm.weight", n_embd, 0, true);
    }
    BIND(ffn_norm, t->ffn_norm ? t->ffn_norm : "ffn_norm.weight", n_embd, 0, true);
    if (t->no_ffn) return HEARTH_OK;
    if (t->fused_gate_up) {
        struct weight up;
        family_layer_name(name, sizeof name, il, "ffn_up.weight");
        HEARTH_TRY(model_bind(m, &up, name, n_embd, 2 * n_ff, true));
        family_weight_rows(&L->w_gate, &up, 0, n_ff, up.name);
        family_weight_rows(&L->w_up, &up, n_ff, n_ff, up.name);
    } else {
        BIND(w_gate, "ffn_gate.weight", n_embd, n_ff, true);
        BIND(w_up, "ffn_up.weight", n_embd, n_ff, true);
    }
    BIND(w_down, "ffn_down.weight", n_ff, n_embd, true);
#undef BIND
    return HEARTH_OK;
}

hearth_status family_rmsnorm_heads(struct forward *f, struct act *x, int32_t n_heads,
                                   const struct weight *w)
{
    const struct hparams *hp = &f->model->hp;
    struct act heads = *x;
    heads.rows = x->rows * n_heads;
    heads.width = hp->head_dim;
    return f->be->ops->rmsnorm(f->be, &heads, &heads, w, hp->norm_eps);
}

hearth_status family_qkv(struct forward *f, const struct layer *L)
{
    struct hearth_backend *be = f->be;
    const struct backend_ops *op = be->ops;
    struct act *const qkv[] = {&f->q, &f->k, &f->v};
    const struct weight *const w_qkv[] = {&L->wq, &L->wk, &L->wv};
    HEARTH_TRY(backend_matmul_set(be, 3, qkv, w_qkv, &f->cur));
    if (L->bq.data) HEARTH_TRY(op->add_bias(be, &f->q, &L->bq));
    if (L->bk.data) HEARTH_TRY(op->add_bias(be, &f->k, &L->bk));
    if (L->bv.data) HEARTH_TRY(op->add_bias(be, &f->v, &L->bv));
    return HEARTH_OK;
}

hearth_status family_attention(struct forward *f, int il, const struct rope_params *rope)
{
    const hearth_model *m = f->model;
    const struct layer *L = &m->layers[il];
    struct hearth_backend *be = f->be;
    const struct backend_ops *op = be->ops;
    /* this rank's heads (all of them but in a tensor-parallel stage):
     * each one computed as in one process */
    const struct hparams hp = model_attn_hparams(m);
    HEARTH_TRY(family_qkv(f, L));
    if (L->attn_q_norm.data) {
        HEARTH_TRY(family_rmsnorm_heads(f, &f->q, hp.n_head, &L->attn_q_norm));
        HEARTH_TRY(family_rmsnorm_heads(f, &f->k, hp.n_head_kv, &L->attn_k_norm));
    }
    if (rope) {
        HEARTH_TRY(op->rope(be, &f->q, hp.n_head, hp.head_dim, rope, &f->bp));
        HEARTH_TRY(op->rope(be, &f->k, hp.n_head_kv, hp.head_dim, rope, &f->bp));
    }
    HEARTH_TRY(op->attention(be, &f->att, &f->q, &f->k, &f->v, f->kv, il, &hp, L->attn_sinks.data, &f->bp));
    if (!m->heads.tp) return HEARTH_OK;
    if (!op->tp_gather_cols)
        return hearth_error(HEARTH_E_UNSUPPORTED, "the %s backend does not run in a tensor-parallel stage", op->name);
    /* every rank's heads, a key/value head's query heads at a time */
    const int64_t group = m->hp.n_head / m->hp.n_head_kv;
    return op->tp_gather_cols(be, &f->att, &f->att, m->heads.tp, m->hp.n_head_kv, group * m->hp.head_dim);
}

hearth_status family_attention_block(struct forward *f, int il)
{
    const struct hparams *hp = &f->model->hp;
    const struct layer *L = &f->model->layers[il];
    struct hearth_backend *be = f->be;
    const struct backend_ops *op = be->ops;
    HEARTH_TRY(op->rmsnorm(be, &f->cur, &f->x, &L->attn_norm, hp->norm_eps));
    HEARTH_TRY(family_attention(f, il, &hp->rope));
    HEARTH_TRY(op->matmul(be, &f->cur, &L->wo, &f->att));
    if (L->bo.data) HEARTH_TRY(op->add_bias(be, &f->cur, &L->bo));
    return op->add(be, &f->x, &f->x, &f->cur);
}

hearth_status family_swiglu_block(struct forward *f, int il)
{
    const struct hparams *hp = &f->model->hp;
    const struct layer *L = &f->model->layers[il];
    struct hearth_backend *be = f->be;
    const struct backend_ops *op = be->ops;
    HEARTH_TRY(op->rmsnorm(be, &f->cur, &f->x, &L->ffn_norm, hp->norm_eps));
    struct act *const gate_up[] = {&f->gate, &f->up};
    const struct weight *const w_gate_up[] = {&L->w_gate, &L->w_up};
    HEARTH_TRY(backend_matmul_set(be, 2, gate_up, w_gate_up, &f->cur));
    HEARTH_TRY(op->swiglu(be, &f->gate, &f->gate, &f->up));
    HEARTH_TRY(op->matmul(be, &f->cur, &L->w_down, &f->gate));
    return op->add(be, &f->x, &f->x, &f->cur);
}

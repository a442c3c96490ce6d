/*
 * bert.c -- BERT encoders (Devlin et al., "BERT: Pre-training of Deep
 * Bidirectional Transformers for Language Understanding", 2019; the
 * sentence-embedding models built on it: BGE, all-MiniLM) and Nomic's
 * variant of it (Nussbaum et al., "Nomic Embed: Training a
 * Reproducible Long Context Text Embedder", 2024: nomic-embed-text).
 * Embedding models only: the file has no output layer, and the pooled
 * final hidden states are the result (ARCH.pooling_type).
 *
 * The input of position p, token id and type 0 (one segment):
 *   x = layernorm(E_tok[id] + E_type[0] + E_pos[p]) g_e + b_e
 * (nomic-bert has no E_pos: it rotates queries and keys instead), then
 * per layer, post-norm -- the layer norm after each residual add:
 *   q, k, v = W_q x + b_q, W_k x + b_k, W_v x + b_v
 *   [nomic-bert: q, k = rope(q), rope(k)]
 *   h   = layernorm(x + W_o attention(q, k, v) + b_o) g_a + b_a
 *   out = layernorm(h + ffn(h)) g_l + b_l
 *   ffn(h) = W_down gelu(W_up h + b_up) + b_down         (bert; exact GELU)
 *          = W_down (silu(W_gate h) * W_up h)            (nomic-bert)
 * where attention is bidirectional: every position of the input sees
 * every other (hparams.bidirectional).  There is no final norm: the last
 * layer's output is the hidden state the pooling reads.
 *
 * GGUF names: token_embd, token_types (optional, type 0 used),
 * position_embd (bert), token_embd_norm.{weight,bias}; per layer
 * attn_q/attn_k/attn_v (or attn_qkv, rows q then k then v) with optional
 * biases, attn_output (+ optional bias), attn_output_norm.{weight,bias},
 * ffn_up, ffn_down (+ optional biases), ffn_gate (nomic-bert),
 * layer_output_norm.{weight,bias}.  Keys: the llama layout's sizes,
 * attention.layer_norm_epsilon, and for nomic-bert rope.freq_base.
 */
#include "internal.h"

#include <stdio.h>

#include "family.h"

static hearth_status bind_f32_vector(hearth_model *m, struct weight *w, int il, const char *suffix, int64_t n,
                                     bool required)
{
    char name[96];
    if (il >= 0) family_layer_name(name, sizeof name, il, suffix);
    else snprintf(name, sizeof name, "%s", suffix);
    return model_bind(m, w, name, n, 0, required);
}

/* A vector's elements first .. first + n - 1 as a vector of its own. */
static void vector_part(struct weight *out, const struct weight *v, int64_t first, int64_t n)
{
    *out = *v;
    out->n_in = n;
    out->row_bytes = (size_t)n * sizeof(float);
    out->data = (const float *)v->data + first;
}

static hearth_status bert_bind_layer(hearth_model *m, int il, bool nomic)
{
    const struct hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, n_q = (int64_t)hp->n_head * hp->head_dim;
    const int64_t n_kv = (int64_t)hp->n_head_kv * hp->head_dim, F = hp->n_ff;
    struct layer *L = &m->layers[il];
    char name[96];
#define BIND(field, suffix, ne0, ne1, req) \
    do { \
        family_layer_name(name, sizeof name, il, suffix); \
        HEARTH_TRY(model_bind(m, &L->field, name, ne0, ne1, req)); \
    } while (0)
    family_layer_name(name, sizeof name, il, "attn_qkv.weight");
    if (hearth_gguf_find_tensor(m->gguf, name)) {
        struct weight qkv, b;
        HEARTH_TRY(model_bind(m, &qkv, name, E, n_q + 2 * n_kv, true));
        family_weight_rows(&L->wq, &qkv, 0, n_q, qkv.name);
        family_weight_rows(&L->wk, &qkv, n_q, n_kv, qkv.name);
        family_weight_rows(&L->wv, &qkv, n_q + n_kv, n_kv, qkv.name);
        HEARTH_TRY(bind_f32_vector(m, &b, il, "attn_qkv.bias", n_q + 2 * n_kv, false));
        if (b.data) {
            vector_part(&L->bq, &b, 0, n_q);
            vector_part(&L->bk, &b, n_q, n_kv);
            vector_part(&L->bv, &b, n_q + n_kv, n_kv);
        }
    } else {
        BIND(wq, "attn_q.weight", E, n_q, true);
        BIND(wk, "attn_k.weight", E, n_kv, true);
        BIND(wv, "attn_v.weight", E, n_kv, true);
        BIND(bq, "attn_q.bias", n_q, 0, false);
        BIND(bk, "attn_k.bias", n_kv, 0, false);
        BIND(bv, "attn_v.bias", n_kv, 0, false);
    }
    BIND(wo, "attn_output.weight", n_q, E, true);
    BIND(bo, "attn_output.bias", E, 0, false);
    BIND(attn_out_norm, "attn_output_norm.weight", E, 0, true);
    BIND(attn_out_norm_b, "attn_output_norm.bias", E, 0, true);
    if (nomic) BIND(w_gate, "ffn_gate.weight", E, F, true);
    BIND(w_up, "ffn_up.weight", E, F, true);
    BIND(b_up, "ffn_up.bias", F, 0, false);
    BIND(w_down, "ffn_down.weight", F, E, true);
    BIND(b_down, "ffn_down.bias", E, 0, false);
    BIND(layer_out_norm, "layer_output_norm.weight", E, 0, true);
    BIND(layer_out_norm_b, "layer_output_norm.bias", E, 0, true);
#undef BIND
    return HEARTH_OK;
}

static hearth_status encoder_load(hearth_model *m, bool nomic)
{
    struct hparams *hp = &m->hp;
    const char *path = hearth_gguf_path(m->gguf);
    HEARTH_TRY(family_read_sizes(m));
    HEARTH_TRY(family_get_positive(m, "attention.key_length", false, hp->n_embd / hp->n_head, &hp->head_dim));
    if ((int64_t)hp->head_dim * hp->n_head != hp->n_embd)
        return hearth_error(HEARTH_E_FORMAT, "%s: %d heads of %d do not make the width %d", path, hp->n_head,
                            hp->head_dim, hp->n_embd);
    if (!family_has_key(m, "attention.layer_norm_epsilon"))
        return hearth_error(HEARTH_E_FORMAT, "%s: required metadata '%s.attention.layer_norm_epsilon' is missing",
                            path, m->arch->name);
    HEARTH_TRY(family_get_float(m, "attention.layer_norm_epsilon", 1e-12f, &hp->norm_eps));
    if (!(hp->norm_eps > 0.0f && hp->norm_eps < 1.0f))
        return hearth_error(HEARTH_E_FORMAT, "%s: layer norm epsilon %g is out of range", path,
                            (double)hp->norm_eps);
    /* an encoder file that says its attention is causal is not one hearth knows */
    char key[128];
    snprintf(key, sizeof key, "%s.attention.causal", m->arch->name);
    bool causal = false;
    hearth_status st = hearth_gguf_get_bool(m->gguf, key, &causal);
    if (st && st != HEARTH_E_NOT_FOUND) return st;
    if (causal)
        return hearth_error(HEARTH_E_UNSUPPORTED, "%s: metadata '%s' is true: a causal %s is not supported",
                            path, key, m->arch->name);
    hp->bidirectional = true;
    if (nomic) HEARTH_TRY(family_read_rope(m, ROPE_NEOX, hp->head_dim));

    const int64_t E = hp->n_embd;
    HEARTH_TRY(model_bind(m, &m->tok_embd, "token_embd.weight", E, -1, true));
    hp->n_vocab = (int32_t)m->tok_embd.n_out;
    HEARTH_TRY(model_bind(m, &m->type_embd, "token_types.weight", E, -1, false));
    if (!nomic) HEARTH_TRY(model_bind(m, &m->pos_embd, "position_embd.weight", E, hp->n_ctx_train, true));
    HEARTH_TRY(bind_f32_vector(m, &m->tok_norm, -1, "token_embd_norm.weight", E, true));
    HEARTH_TRY(bind_f32_vector(m, &m->tok_norm_b, -1, "token_embd_norm.bias", E, true));
    m->layers = hearth_calloc((size_t)hp->n_layer, sizeof *m->layers, "the layer table");
    if (!m->layers) return HEARTH_E_NOMEM;
    for (int il = 0; il < hp->n_layer; il++) HEARTH_TRY(bert_bind_layer(m, il, nomic));
    return HEARTH_OK;
}

static hearth_status bert_load(hearth_model *m) { return encoder_load(m, false); }
static hearth_status nomic_bert_load(hearth_model *m) { return encoder_load(m, true); }

/* x = layernorm(x) g + b over each row. */
static hearth_status layer_norm(struct forward *f, struct act *x, const struct weight *g, const struct weight *b)
{
    return f->be->ops->norm(f->be, x, x, x->width, g->data, b->data, f->model->hp.norm_eps);
}

static hearth_status bert_layer(struct forward *f, int il)
{
    const hearth_model *m = f->model;
    const struct hparams *hp = &m->hp;
    const struct layer *L = &m->layers[il];
    struct hearth_backend *be = f->be;
    const struct backend_ops *op = be->ops;
    const bool nomic = m->arch == &arch_nomic_bert;

    /* attention over the whole input, then the post-norm */
    HEARTH_TRY(op->copy_rows(be, &f->cur, 0, &f->x, 0, f->x.rows));
    HEARTH_TRY(family_attention(f, il, nomic ? &hp->rope : NULL));
    HEARTH_TRY(op->matmul(be, &f->cur, &L->wo, &f->att));
    if (L->bo.data) HEARTH_TRY(op->add_bias(be, &f->cur, &L->bo));
    HEARTH_TRY(op->add(be, &f->x, &f->x, &f->cur));
    HEARTH_TRY(layer_norm(f, &f->x, &L->attn_out_norm, &L->attn_out_norm_b));

    /* the feed-forward, then the post-norm */
    if (nomic) {
        struct act *const gate_up[] = {&f->gate, &f->up};
        const struct weight *const w_gate_up[] = {&L->w_gate, &L->w_up};
        HEARTH_TRY(backend_matmul_set(be, 2, gate_up, w_gate_up, &f->x));
        HEARTH_TRY(op->swiglu(be, &f->gate, &f->gate, &f->up));
    } else {
        HEARTH_TRY(op->matmul(be, &f->gate, &L->w_up, &f->x));
        if (L->b_up.data) HEARTH_TRY(op->add_bias(be, &f->gate, &L->b_up));
        HEARTH_TRY(op->map(be, &f->gate, &f->gate, MAP_GELU, 0.0f));
    }
    HEARTH_TRY(op->matmul(be, &f->cur, &L->w_down, &f->gate));
    if (L->b_down.data) HEARTH_TRY(op->add_bias(be, &f->cur, &L->b_down));
    HEARTH_TRY(op->add(be, &f->x, &f->x, &f->cur));
    return layer_norm(f, &f->x, &L->layer_out_norm, &L->layer_out_norm_b);
}

#define ENCODER_NO_DEVICE "the OpenCL backend has no layer norm, GELU or bidirectional attention yet"

const struct arch arch_bert = {.name = "bert",
                               .load = bert_load,
                               .layer = bert_layer,
                               .no_device = ENCODER_NO_DEVICE};

const struct arch arch_nomic_bert = {.name = "nomic-bert",
                                     .load = nomic_bert_load,
                                     .layer = bert_layer,
                                     .no_device = ENCODER_NO_DEVICE};

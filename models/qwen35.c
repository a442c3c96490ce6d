/*
 * qwen35.c -- Qwen3.5 (dense, qwen35): a hybrid of Gated DeltaNet layers
 * (linear attention with the gated delta rule, Yang et al. 2024, "Gated
 * Delta Networks") and full attention with an output gate; three of every
 * full_attention_interval layers are linear.  Every layer is pre-norm,
 * with a SwiGLU feed-forward half whose norm the files call
 * post_attention_norm:
 *   h   = x + mixer(rmsnorm(x))
 *   out = h + W_down (silu(W_gate m) * W_up m),  m = rmsnorm(h)
 * Gated DeltaNet (n_k key heads, n_v value heads, all of d; value head h
 * reads key head h mod n_k):
 *   c       = silu(causal_conv_K(W_qkv n))          the conv's last K-1 inputs
 *                                                    are state
 *   q, k, v = the heads of c;  q, k L2-normalised, q / sqrt(d)
 *   b       = sigmoid(W_beta n),  g = softplus(W_alpha n + dt_bias) * a   (a < 0)
 *   S       = e^g S (I - b k k^T) + b v k^T,  o = S q   (simd/delta.h)
 *   mixer   = W_out (rmsnorm_d(o) * w_norm * silu(W_gate n))
 * Full attention (head_dim d, partial rotary on the first n_rot dims):
 *   [q | gate] per head = W_q n;  q, k = rope(rmsnorm_d(q)), rope(rmsnorm_d(k))
 *   mixer   = W_o (attention(q, k, W_v n) * sigmoid(gate))
 * Norm weights come with Qwen's "+1" already added by the converter.  A
 * sequence keeps keys and values for the attention layers and a state
 * (the conv rows and S per value head) for the linear ones.  The first of
 * the files' multi-token-prediction layers (nextn_predict_layers, after
 * the trunk) is bound as a full-attention layer with its input
 * projection and norms (model.h, struct mtp_weights): speculative
 * decoding drafts with it (src/engine/draft.c).
 * The mixture-of-experts siblings differ in the feed-forward half, the
 * experts with a sigmoid-gated shared expert (models/moe.c):
 *   qwen35moe  (Qwen3.5 MoE)  as qwen35 otherwise;
 *   qwen3next  (Qwen3-Next)   value head h reads key head h / (n_v / n_k)
 *              (the files keep the grouped order), b and alpha come from
 *              one matrix (ssm_ba: per key head, r b's then r alphas),
 *              and RoPE is plain NEOX (no sections).
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "family.h"
#include "moe.h"

struct deltanet_layer {
    bool linear;
    struct weight wqkv, wgate, wbeta, walpha, wout, norm; /* qwen3next: wbeta is ssm_ba */
    const float *conv;      /* K taps per channel, oldest first */
    const float *dt_bias, *a;
};

/* What a family of the three changes. */
struct deltanet_variant {
    bool moe;            /* experts and a shared expert in every layer */
    bool grouped;        /* value head h reads key head h / (n_v / n_k); else h mod n_k */
    bool fused_ba;       /* ssm_ba instead of ssm_beta and ssm_alpha */
    bool sections;       /* rope.dimension_sections required (IMROPE) */
};

static const struct moe_opts deltanet_moe = {.norm_topk = true, .shared = MOE_SHARED_GATED};

struct deltanet_model {
    struct deltanet_variant v;
    int32_t K, d, n_k, n_v, interval, n_trunk;
    int64_t conv_dim;
    struct deltanet_layer *layers;
};

/* The extra buffers (forward.h) of a layer. */
enum { X_QKV, X_CONV, X_Z, X_BETA, X_ALPHA, X_O, X_QG, X_AGATE, X_COUNT };
_Static_assert(X_COUNT <= FORWARD_EXTRA_MAX, "extra buffers");

static hearth_status bind_f32(hearth_model *m, const char *name, int64_t ne0, int64_t ne1, const float **out)
{
    struct weight w;
    HEARTH_TRY(model_bind_f32(m, &w, name, ne0, ne1));
    *out = w.data;
    return HEARTH_OK;
}

/* Whether the IMROPE sections give every rotated pair the token's
 * position (text: the first three streams are the position, the fourth
 * 0): then the rotation is NEOX's over the first n_rot dimensions. */
static hearth_status check_sections(hearth_model *m)
{
    char key[128];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", m->arch->name);
    hearth_gguf_value v;
    const char *path = hearth_gguf_path(m->gguf);
    if (hearth_gguf_get_array(m->gguf, key, &v) != HEARTH_OK)
        return hearth_error(HEARTH_E_FORMAT, "%s: required metadata '%s' is missing", path, key);
    int64_t s[4] = {0, 0, 0, 0}, total = 0;
    if (v.type != HEARTH_GGUF_ARRAY || v.v.arr.n != 4)
        return hearth_error(HEARTH_E_FORMAT, "%s: '%s' must hold four integers", path, key);
    for (int i = 0; i < 4; i++) {
        hearth_gguf_value e;
        if (hearth_gguf_array_get(m->gguf, &v, (uint64_t)i, &e) != HEARTH_OK ||
            (e.type != HEARTH_GGUF_INT32 && e.type != HEARTH_GGUF_UINT32))
            return hearth_error(HEARTH_E_FORMAT, "%s: '%s' must hold four integers", path, key);
        s[i] = e.type == HEARTH_GGUF_INT32 ? e.v.i : (int64_t)e.v.u;
        if (s[i] < 0 || s[i] > 4096) return hearth_error(HEARTH_E_FORMAT, "%s: '%s' holds %lld", path, key, (long long)s[i]);
        total += s[i];
    }
    if (total == 0) return hearth_error(HEARTH_E_FORMAT, "%s: '%s' is all zero", path, key);
    for (int32_t i = 0; i < m->hp.rope.n_dims / 2; i++) {
        const int64_t sector = i % total;
        const bool pos = (sector % 3 == 0 && sector < 3 * s[0]) || (sector % 3 == 1 && sector < 3 * s[1]) ||
                         (sector % 3 == 2 && sector < 3 * s[2]);
        if (!pos)
            return hearth_error(HEARTH_E_UNSUPPORTED, "%s: RoPE sections %lld, %lld, %lld, %lld leave rotated "
                                "pair %d without the text position; not supported", path, (long long)s[0],
                                (long long)s[1], (long long)s[2], (long long)s[3], i);
    }
    return HEARTH_OK;
}

static hearth_status read_hparams(hearth_model *m, struct deltanet_model *D)
{
    struct hparams *hp = &m->hp;
    const char *path = hearth_gguf_path(m->gguf);
    HEARTH_TRY(family_read_hparams(m, ROPE_NEOX));
    if (D->v.sections) HEARTH_TRY(check_sections(m));
    if (D->v.moe) HEARTH_TRY(moe_read_hparams(m, &deltanet_moe));
    int32_t inner;
    HEARTH_TRY(family_get_positive(m, "ssm.conv_kernel", true, 0, &D->K));
    HEARTH_TRY(family_get_positive(m, "ssm.state_size", true, 0, &D->d));
    HEARTH_TRY(family_get_positive(m, "ssm.group_count", true, 0, &D->n_k));
    HEARTH_TRY(family_get_positive(m, "ssm.time_step_rank", true, 0, &D->n_v));
    HEARTH_TRY(family_get_positive(m, "ssm.inner_size", true, 0, &inner));
    HEARTH_TRY(family_get_positive(m, "full_attention_interval", false, 4, &D->interval));
    if (family_has_key(m, "attention.recurrent_layers"))
        return hearth_error(HEARTH_E_UNSUPPORTED, "%s: a per-layer list of recurrent layers "
                            "(attention.recurrent_layers) is not supported", path);
    if (D->K > 64 || D->d > 1024 || D->n_v % D->n_k != 0 || inner != D->n_v * D->d)
        return hearth_error(HEARTH_E_FORMAT, "%s: linear attention of %d key and %d value heads of %d, inner "
                            "size %d, convolution of %d: inconsistent", path, D->n_k, D->n_v, D->d, inner, D->K);
    HEARTH_TRY(family_read_nextn(m));
    D->n_trunk = hp->n_layer;
    D->conv_dim = 2 * (int64_t)D->n_k * D->d + (int64_t)D->n_v * D->d;
    return HEARTH_OK;
}

static hearth_status bind_layer(hearth_model *m, int il, struct deltanet_layer *Y)
{
    const struct hparams *hp = &m->hp;
    const struct deltanet_model *D = m->deltanet;
    const int64_t E = hp->n_embd, d = hp->head_dim, H = hp->n_head, Hkv = hp->n_head_kv;
    struct layer *L = &m->layers[il];
    char name[96];
#define BIND(w, suffix, ne0, ne1) \
    do { \
        family_layer_name(name, sizeof name, il, suffix); \
        HEARTH_TRY(model_bind(m, w, name, ne0, ne1, true)); \
    } while (0)
#define BIND_F32(p, suffix, ne0) \
    do { \
        family_layer_name(name, sizeof name, il, suffix); \
        HEARTH_TRY(bind_f32(m, name, ne0, 0, p)); \
    } while (0)
    BIND(&L->attn_norm, "attn_norm.weight", E, 0);
    BIND(&L->ffn_norm, "post_attention_norm.weight", E, 0);
    if (D->v.moe) {
        HEARTH_TRY(moe_bind_layer(m, il, &deltanet_moe));
    } else {
        BIND(&L->w_gate, "ffn_gate.weight", E, hp->n_ff);
        BIND(&L->w_up, "ffn_up.weight", E, hp->n_ff);
        BIND(&L->w_down, "ffn_down.weight", hp->n_ff, E);
    }
    Y->linear = il < D->n_trunk && (il + 1) % D->interval != 0;
    if (il >= D->n_trunk) HEARTH_TRY(family_bind_mtp(m, il));
    if (!Y->linear) {
        BIND(&L->wq, "attn_q.weight", E, 2 * d * H);
        BIND(&L->wk, "attn_k.weight", E, d * Hkv);
        BIND(&L->wv, "attn_v.weight", E, d * Hkv);
        BIND(&L->wo, "attn_output.weight", d * H, E);
        BIND(&L->attn_q_norm, "attn_q_norm.weight", d, 0);
        BIND(&L->attn_k_norm, "attn_k_norm.weight", d, 0);
        return HEARTH_OK;
    }
    const int64_t n_vd = (int64_t)D->n_v * D->d;
    family_layer_name(name, sizeof name, il, "ssm_in.weight");
    if (hearth_gguf_find_tensor(m->gguf, name))
        return hearth_error(HEARTH_E_UNSUPPORTED, "%s: layer %d keeps its projections in one tensor ('%s', "
                            "an early conversion); hearth reads attn_qkv and attn_gate: convert the model "
                            "again", hearth_gguf_path(m->gguf), il, name);
    BIND(&Y->wqkv, "attn_qkv.weight", E, D->conv_dim);
    BIND(&Y->wgate, "attn_gate.weight", E, n_vd);
    if (D->v.fused_ba) {
        BIND(&Y->wbeta, "ssm_ba.weight", E, 2 * (int64_t)D->n_v);
    } else {
        BIND(&Y->wbeta, "ssm_beta.weight", E, D->n_v);
        BIND(&Y->walpha, "ssm_alpha.weight", E, D->n_v);
    }
    BIND(&Y->wout, "ssm_out.weight", n_vd, E);
    BIND(&Y->norm, "ssm_norm.weight", D->d, 0);
    family_layer_name(name, sizeof name, il, "ssm_conv1d.weight");
    HEARTH_TRY(bind_f32(m, name, D->K, D->conv_dim, &Y->conv));
    BIND_F32(&Y->dt_bias, "ssm_dt.bias", D->n_v);
    BIND_F32(&Y->a, "ssm_a", D->n_v);
#undef BIND
#undef BIND_F32
    return HEARTH_OK;
}

static void deltanet_release(hearth_model *m)
{
    if (!m->deltanet) return;
    free(m->deltanet->layers);
    free(m->deltanet);
    m->deltanet = NULL;
}

static hearth_status family_load(hearth_model *m, const struct deltanet_variant *v)
{
    struct deltanet_model *D = hearth_calloc(1, sizeof *D, "the hybrid model");
    if (!D) return HEARTH_E_NOMEM;
    m->deltanet = D;
    D->v = *v;
    HEARTH_TRY(read_hparams(m, D));
    HEARTH_TRY(family_bind_globals(m));
    /* the prediction layer after the trunk's */
    const int32_t n_bound = m->hp.n_layer + m->n_mtp;
    D->layers = hearth_calloc((size_t)n_bound, sizeof *D->layers, "the hybrid layer table");
    if (!D->layers) return HEARTH_E_NOMEM;
    for (int il = 0; il < n_bound; il++) HEARTH_TRY(bind_layer(m, il, &D->layers[il]));
    return HEARTH_OK;
}

static hearth_status qwen35_load(hearth_model *m)
{
    return family_load(m, &(struct deltanet_variant){.sections = true});
}

static hearth_status qwen35moe_load(hearth_model *m)
{
    return family_load(m, &(struct deltanet_variant){.moe = true, .sections = true});
}

static hearth_status qwen3next_load(hearth_model *m)
{
    return family_load(m, &(struct deltanet_variant){.moe = true, .grouped = true, .fused_ba = true});
}

/* A linear layer's state: the convolution's last K - 1 input rows, then S
 * of every value head (d x d). */
static size_t conv_floats(const struct deltanet_model *D)
{
    return (size_t)(D->K - 1) * (size_t)D->conv_dim;
}

static size_t deltanet_state_floats(const hearth_model *m)
{
    const struct deltanet_model *D = m->deltanet;
    return conv_floats(D) + (size_t)D->n_v * (size_t)D->d * (size_t)D->d;
}

static bool deltanet_has_kv(const hearth_model *m, int il)
{
    return !m->deltanet->layers[il].linear;
}

static void deltanet_extra_widths(const hearth_model *m, int64_t widths[])
{
    const struct hparams *hp = &m->hp;
    const struct deltanet_model *D = m->deltanet;
    const int64_t n_vd = (int64_t)D->n_v * D->d, n_q = (int64_t)hp->n_head * hp->head_dim;
    widths[X_QKV] = D->conv_dim;
    widths[X_CONV] = D->conv_dim;
    widths[X_Z] = n_vd;
    widths[X_BETA] = (D->v.fused_ba ? 2 : 1) * (int64_t)D->n_v;
    widths[X_ALPHA] = D->n_v;
    widths[X_O] = n_vd;
    widths[X_QG] = 2 * n_q;
    widths[X_AGATE] = n_q;
}

static int deltanet_matrices(hearth_model *m, int il, struct weight *out[])
{
    struct layer *L = &m->layers[il];
    struct deltanet_layer *Y = &m->deltanet->layers[il];
    int n = 0;
    if (Y->linear) {
        out[n++] = &Y->wqkv;
        out[n++] = &Y->wgate;
        out[n++] = &Y->wbeta;
        if (Y->walpha.data) out[n++] = &Y->walpha;
        out[n++] = &Y->wout;
    } else {
        out[n++] = &L->wq;
        out[n++] = &L->wk;
        out[n++] = &L->wv;
        out[n++] = &L->wo;
    }
    /* the dense feed-forward or the shared expert (the experts' views are
     * packed with the layer's, src/model/model.c) */
    struct weight *ffn[] = {&L->w_gate, &L->w_up, &L->w_down, &L->w_gate_shexp, &L->w_up_shexp, &L->w_down_shexp};
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(ffn); i++)
        if (ffn[i]->data) out[n++] = ffn[i];
    return n;
}

static hearth_status deltanet_output_norm(struct forward *f, struct act *x)
{
    return f->be->ops->rmsnorm(f->be, x, x, &f->model->output_norm, f->model->hp.norm_eps);
}

/* x's rows as rows of `width` floats (a view of the same buffer). */
static struct act view_rows(const struct act *x, int64_t width)
{
    struct act v = *x;
    v.rows = x->rows * x->width / width;
    v.width = width;
    return v;
}

static hearth_status linear_mixer(struct forward *f, int il)
{
    const hearth_model *m = f->model;
    const struct deltanet_model *D = m->deltanet;
    const struct deltanet_layer *Y = &D->layers[il];
    struct hearth_backend *be = f->be;
    const struct backend_ops *op = be->ops;
    struct act *qkv = &f->extra[X_QKV], *conv = &f->extra[X_CONV], *z = &f->extra[X_Z];
    struct act *beta = &f->extra[X_BETA], *alpha = &f->extra[X_ALPHA], *o = &f->extra[X_O];
    struct act *const outs[] = {qkv, z, beta};
    const struct weight *const ws[] = {&Y->wqkv, &Y->wgate, &Y->wbeta};
    HEARTH_TRY(backend_matmul_set(be, 3, outs, ws, &f->cur));
    if (D->v.fused_ba) alpha = beta; /* one matrix gives both */
    else HEARTH_TRY(op->matmul(be, alpha, &Y->walpha, &f->cur));
    HEARTH_TRY(op->conv_causal(be, conv, qkv, Y->conv, D->K, true, f->rs, il, 0, &f->bp));
    const struct deltanet_params p = {
        .n_k_heads = D->n_k, .n_v_heads = D->n_v, .head_dim = D->d, .dt_bias = Y->dt_bias, .a = Y->a,
        .eps = m->hp.norm_eps, .state_offset = conv_floats(D), .grouped = D->v.grouped, .fused_ba = D->v.fused_ba,
    };
    HEARTH_TRY(op->gated_delta(be, o, conv, beta, alpha, &p, f->rs, il, f->chunk_size, &f->bp));
    /* the gated norm: each head RMS-normed with the shared weight, times silu(z) */
    struct act heads = view_rows(o, D->d);
    HEARTH_TRY(op->rmsnorm(be, &heads, &heads, &Y->norm, m->hp.norm_eps));
    HEARTH_TRY(op->map(be, z, z, MAP_SILU, 0.0f));
    HEARTH_TRY(op->mul(be, o, o, z));
    return op->matmul(be, &f->cur, &Y->wout, o);
}

static hearth_status attention_mixer(struct forward *f, int il)
{
    const hearth_model *m = f->model;
    const struct hparams *hp = &m->hp;
    const struct layer *L = &m->layers[il];
    struct hearth_backend *be = f->be;
    const struct backend_ops *op = be->ops;
    const int64_t rows = f->cur.rows, d = hp->head_dim, H = hp->n_head;
    struct act *qg = &f->extra[X_QG], *gate = &f->extra[X_AGATE];
    struct act *const outs[] = {qg, &f->k, &f->v};
    const struct weight *const ws[] = {&L->wq, &L->wk, &L->wv};
    HEARTH_TRY(backend_matmul_set(be, 3, outs, ws, &f->cur));
    /* each head's [q | gate] apart: as rows of 2d, the first and second halves */
    struct act qg_heads = view_rows(qg, 2 * d);
    struct act q_heads = f->q, g_heads = *gate;
    HEARTH_TRY(op->copy_cols(be, &q_heads, &qg_heads, 0, d));
    HEARTH_TRY(op->copy_cols(be, &g_heads, &qg_heads, d, d));
    f->q.rows = gate->rows = rows;
    f->q.width = gate->width = H * d;
    HEARTH_TRY(family_rmsnorm_heads(f, &f->q, hp->n_head, &L->attn_q_norm));
    HEARTH_TRY(family_rmsnorm_heads(f, &f->k, hp->n_head_kv, &L->attn_k_norm));
    HEARTH_TRY(op->rope(be, &f->q, hp->n_head, hp->head_dim, &hp->rope, &f->bp));
    HEARTH_TRY(op->rope(be, &f->k, hp->n_head_kv, hp->head_dim, &hp->rope, &f->bp));
    HEARTH_TRY(op->attention(be, &f->att, &f->q, &f->k, &f->v, f->kv, il, hp, NULL, &f->bp));
    HEARTH_TRY(op->map(be, gate, gate, MAP_SIGMOID, 0.0f));
    HEARTH_TRY(op->mul(be, &f->att, &f->att, gate));
    return op->matmul(be, &f->cur, &L->wo, &f->att);
}

static hearth_status qwen35_layer(struct forward *f, int il)
{
    const hearth_model *m = f->model;
    const struct layer *L = &m->layers[il];
    const struct backend_ops *op = f->be->ops;
    HEARTH_TRY(op->rmsnorm(f->be, &f->cur, &f->x, &L->attn_norm, m->hp.norm_eps));
    if (m->deltanet->layers[il].linear) HEARTH_TRY(linear_mixer(f, il));
    else HEARTH_TRY(attention_mixer(f, il));
    HEARTH_TRY(op->add(f->be, &f->x, &f->x, &f->cur));
    return m->deltanet->v.moe ? moe_ffn_block(f, il) : family_swiglu_block(f, il);
}

static const struct arch_recurrent deltanet_hooks = {
    .state_floats = deltanet_state_floats,
    .output_norm = deltanet_output_norm,
    .matrices = deltanet_matrices,
    .release = deltanet_release,
    .has_kv = deltanet_has_kv,
    .checkpoints = true,
};

/* offload refused: src/model/offload.c */
const struct arch arch_qwen35 = {.name = "qwen35",
                                 .load = qwen35_load,
                                 .layer = qwen35_layer,
                                 .extra_widths = deltanet_extra_widths,
                                 .recurrent = &deltanet_hooks};
const struct arch arch_qwen35moe = {.name = "qwen35moe",
                                    .load = qwen35moe_load,
                                    .layer = qwen35_layer,
                                    .extra_widths = deltanet_extra_widths,
                                    .recurrent = &deltanet_hooks};
const struct arch arch_qwen3next = {.name = "qwen3next",
                                    .load = qwen3next_load,
                                    .layer = qwen35_layer,
                                    .extra_widths = deltanet_extra_widths,
                                    .recurrent = &deltanet_hooks};

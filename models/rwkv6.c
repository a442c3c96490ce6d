/*
 * rwkv6.c -- recurrent layers: RWKV-6 "Finch" (rwkv6) and QRWKV-6, its
 * time mixing on a Qwen2 body (rwkv6qwen2).  Instead of attention over a
 * KV cache each layer keeps a fixed-size state per sequence
 * (backend/rstate.h): the previous token's normed rows (the token shift)
 * and, per head, an N x N matrix S (Peng et al. 2024, "Eagle and Finch").
 *
 * Time mixing, with n = norm(x) and p the previous token's n:
 *   m_j  = W2_j tanh(W1 (n + (p - n) mu_x))        j = w, k, v, r, g
 *   x_j  = n + (p - n) (lambda_j + m_j)
 *   r, k, v, g = W_r x_r, W_k x_k, W_v x_v, W_g x_g
 *   w    = exp(-exp(tau + D2 tanh(D1 x_w)))          the data-dependent decay
 *   y    = WKV-6(r, k, v, w, u)  (rwkv6; then the group norm per head)
 *        | GLA(r, k (1 - w), v, w) / sqrt(N)  (rwkv6qwen2)
 *   h    = x + W_o (y * silu(g))   (rwkv6qwen2: sigmoid(g))
 * Channel mixing (rwkv6), with n' = norm(h) and p' the previous n':
 *   out  = h + sigmoid(W_r' x_r') * W_v' relu(W_k' x_k')^2
 * rwkv6qwen2's feed-forward block is Qwen2's SwiGLU with RMS norms.
 * rwkv6 uses layer norms with biases (also on the embeddings), halves the
 * residual every rescale_every_n_layers layers, and adds the bonus u
 * (time_mix_first) for the current token.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "model.h"

struct rwkv_layer {
    struct weight ln1, ln1_b;          /* attn_norm (rwkv6qwen2: RMS, no bias) */
    struct weight ln2, ln2_b;          /* attn_norm_2 (rwkv6) or ffn_norm (RMS) */
    struct weight lerp_x;
    const float *lerp[5];              /* w, k, v, r, g */
    struct weight w1;                  /* n_embd -> 5 x extra */
    struct weight w2[5];               /* extra -> n_embd each */
    const float *first;                /* u: n_head x N (rwkv6), NULL for GLA */
    struct weight decay, decay_w1, decay_w2;
    struct weight wk, wv, wr, wg, wo;
    struct weight bk, bv, br;          /* optional biases (rwkv6qwen2) */
    struct weight ln_x, ln_x_b;        /* the group norm (rwkv6) */
    struct weight cm_lerp_k, cm_lerp_r, cm_key, cm_value, cm_receptance; /* rwkv6 */
    struct weight ffn_gate, ffn_up, ffn_down;                            /* rwkv6qwen2 */
};

struct rwkv_model {
    bool gla;                          /* rwkv6qwen2 */
    struct weight tok_norm, tok_norm_b;
    struct weight output_norm_b;       /* data NULL when absent */
    struct rwkv_layer *layers;
};

/* The extra buffers (forward.h) of a layer. */
enum {
    X_PREV, X_LERP, X_MID, X_MIDJ, X_MIX, X_W, X_K, X_V, X_R, X_G, X_DMID, X_LW, X_GATE, X_COUNT
};
_Static_assert(X_COUNT <= FORWARD_EXTRA_MAX, "extra buffers");

/* The group norm's epsilon, as the reference implementation has it. */
#define GROUP_NORM_EPS 64e-5f

static hearth_status get_u32(hearth_model *m, const char *suffix, bool required, uint32_t dflt, uint32_t *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", m->arch->name, suffix);
    hearth_status st = hearth_gguf_get_u32(m->gguf, key, out);
    if (st == HEARTH_E_NOT_FOUND && !required) {
        *out = dflt;
        return HEARTH_OK;
    }
    if (st == HEARTH_E_NOT_FOUND)
        return hearth_error(HEARTH_E_FORMAT, "%s: required metadata '%s' is missing (architecture %s)",
                            hearth_gguf_path(m->gguf), key, m->arch->name);
    return st;
}

static hearth_status get_positive(hearth_model *m, const char *suffix, bool required, uint32_t dflt,
                                  int32_t *out)
{
    uint32_t v;
    HEARTH_TRY(get_u32(m, suffix, required, dflt, &v));
    if (v == 0 || v > (1u << 24))
        return hearth_error(HEARTH_E_FORMAT, "%s: metadata '%s.%s' = %u is out of range",
                            hearth_gguf_path(m->gguf), m->arch->name, suffix, v);
    *out = (int32_t)v;
    return HEARTH_OK;
}

static bool has_key(hearth_model *m, const char *suffix)
{
    char key[128];
    uint32_t v;
    snprintf(key, sizeof key, "%s.%s", m->arch->name, suffix);
    return hearth_gguf_get_u32(m->gguf, key, &v) != HEARTH_E_NOT_FOUND;
}

static hearth_status read_hparams(hearth_model *m, bool gla)
{
    struct hparams *hp = &m->hp;
    const char *path = hearth_gguf_path(m->gguf);
    memset(hp, 0, sizeof *hp);
    HEARTH_TRY(get_positive(m, "context_length", false, 1048576, &hp->n_ctx_train));
    HEARTH_TRY(get_positive(m, "embedding_length", true, 0, &hp->n_embd));
    HEARTH_TRY(get_positive(m, "block_count", true, 0, &hp->n_layer));
    HEARTH_TRY(get_positive(m, "feed_forward_length", true, 0, &hp->n_ff));
    HEARTH_TRY(get_positive(m, "wkv.head_size", true, 0, &hp->wkv_head_size));
    HEARTH_TRY(get_positive(m, "time_mix_extra_dim", true, 0, &hp->time_mix_extra));
    HEARTH_TRY(get_positive(m, "time_decay_extra_dim", true, 0, &hp->time_decay_extra));
    uint32_t rescale, shift;
    HEARTH_TRY(get_u32(m, "rescale_every_n_layers", false, 0, &rescale));
    HEARTH_TRY(get_u32(m, "token_shift_count", false, gla ? 1 : 2, &shift));
    const int32_t N = hp->wkv_head_size;
    if (hp->n_embd % N != 0)
        return hearth_error(HEARTH_E_FORMAT, "%s: embedding length %d is not a multiple of the WKV "
                            "head size %d", path, hp->n_embd, N);
    if (N > 1024)
        return hearth_error(HEARTH_E_UNSUPPORTED, "%s: WKV head size %d is too large (at most 1024)", path, N);
    if (rescale > (1u << 24))
        return hearth_error(HEARTH_E_FORMAT, "%s: rescale_every_n_layers %u is out of range", path, rescale);
    hp->rescale_every = (int32_t)rescale;
    const uint32_t want_shift = gla ? 1 : 2;
    if (shift != want_shift)
        return hearth_error(HEARTH_E_FORMAT, "%s: token_shift_count is %u; %s keeps %u previous rows per "
                            "layer", path, shift, m->arch->name, want_shift);
    hp->n_token_shift = (int32_t)shift;
    hp->head_dim = N;
    hp->n_head = hp->n_embd / N;
    if (gla) {
        if (!has_key(m, "attention.head_count_kv"))
            return hearth_error(HEARTH_E_FORMAT, "%s: required metadata '%s.attention.head_count_kv' is "
                                "missing: %s needs the key/value head count", path, m->arch->name,
                                m->arch->name);
        HEARTH_TRY(get_positive(m, "attention.head_count_kv", true, 0, &hp->n_head_kv));
        if (hp->n_head % hp->n_head_kv != 0)
            return hearth_error(HEARTH_E_FORMAT, "%s: %d WKV heads cannot share %d key/value heads evenly",
                                path, hp->n_head, hp->n_head_kv);
    } else {
        hp->n_head_kv = hp->n_head;
        uint32_t kvh;
        if (get_u32(m, "attention.head_count_kv", false, 0, &kvh) == HEARTH_OK && kvh != 0 &&
            kvh != (uint32_t)hp->n_head)
            return hearth_error(HEARTH_E_FORMAT, "%s: %s has no grouped key/value heads, but the file gives "
                                "%u for %d heads", path, m->arch->name, kvh, hp->n_head);
    }
    char key[128];
    snprintf(key, sizeof key, "%s.%s", m->arch->name,
             gla ? "attention.layer_norm_rms_epsilon" : "attention.layer_norm_epsilon");
    hearth_status st = hearth_gguf_get_f32(m->gguf, key, &hp->norm_eps);
    if (st == HEARTH_E_NOT_FOUND) hp->norm_eps = 1e-5f;
    else if (st) return st;
    if (!(hp->norm_eps > 0.0f && hp->norm_eps < 1.0f))
        return hearth_error(HEARTH_E_FORMAT, "%s: norm epsilon %g is out of range", path, (double)hp->norm_eps);
    return HEARTH_OK;
}

/* A float tensor of exactly the shape ne (unused dimensions 1), or NULL
 * when it is absent and not required. */
static hearth_status bind_floats(hearth_model *m, const char *name, const int64_t ne[4], bool required,
                                 const float **out)
{
    const char *path = hearth_gguf_path(m->gguf);
    const hearth_gguf_tensor *t = hearth_gguf_find_tensor(m->gguf, name);
    *out = NULL;
    if (!t) {
        if (!required) return HEARTH_OK;
        return hearth_error(HEARTH_E_FORMAT, "%s: tensor '%s' is missing (architecture %s)", path, name,
                            m->arch->name);
    }
    for (int d = 0; d < 4; d++)
        if (t->ne[d] != ne[d])
            return hearth_error(HEARTH_E_FORMAT, "%s: tensor '%s' has shape %lld x %lld x %lld x %lld, "
                                "expected %lld x %lld x %lld x %lld", path, name, (long long)t->ne[0],
                                (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                                (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3]);
    if (t->type != HEARTH_TYPE_F32)
        return hearth_error(HEARTH_E_UNSUPPORTED, "%s: tensor '%s' has type %s; only F32 is supported "
                            "for it", path, name, hearth_type_name(t->type));
    *out = t->data;
    return HEARTH_OK;
}

/* time_mix_w2: extra x n_embd x 5, five matrices of n_embd rows. */
static hearth_status bind_w2(hearth_model *m, const char *name, int64_t extra, int64_t n_embd,
                             struct weight w2[5])
{
    const char *path = hearth_gguf_path(m->gguf);
    const hearth_gguf_tensor *t = hearth_gguf_find_tensor(m->gguf, name);
    if (!t)
        return hearth_error(HEARTH_E_FORMAT, "%s: tensor '%s' is missing (architecture %s)", path, name,
                            m->arch->name);
    if (t->ne[0] != extra || t->ne[1] != n_embd || t->ne[2] != 5 || t->ne[3] != 1)
        return hearth_error(HEARTH_E_FORMAT, "%s: tensor '%s' has shape %lld x %lld x %lld, expected "
                            "%lld x %lld x 5", path, name, (long long)t->ne[0], (long long)t->ne[1],
                            (long long)t->ne[2], (long long)extra, (long long)n_embd);
    if (!hearth_type_can_compute(t->type))
        return hearth_error(HEARTH_E_UNSUPPORTED, "%s: tensor '%s' has type %s, which hearth cannot "
                            "compute with", path, name, hearth_type_name(t->type));
    const size_t row_bytes = hearth_type_row_bytes(t->type, extra);
    for (int j = 0; j < 5; j++) {
        struct weight *w = &w2[j];
        memset(w, 0, sizeof *w);
        w->name = t->name;
        w->type = t->type;
        w->n_in = extra;
        w->n_out = n_embd;
        w->row_bytes = row_bytes;
        w->data = (const uint8_t *)t->data + (size_t)j * (size_t)n_embd * row_bytes;
    }
    return HEARTH_OK;
}

static hearth_status bind_layer(hearth_model *m, int il, struct rwkv_layer *L, bool gla)
{
    const struct hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, N = hp->wkv_head_size, H = hp->n_head;
    const int64_t n_kv = (int64_t)hp->n_head_kv * N, F = hp->n_ff;
    const int64_t X = hp->time_mix_extra, D = hp->time_decay_extra;
    const char *path = hearth_gguf_path(m->gguf);
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d.%s", il, suffix), name)
#define BIND(field, suffix, ne0, ne1, req) HEARTH_TRY(model_bind(m, &L->field, NAME(suffix), ne0, ne1, req))
    BIND(ln1, "attn_norm.weight", E, 0, true);
    BIND(ln1_b, "attn_norm.bias", E, 0, !gla);
    BIND(lerp_x, "time_mix_lerp_x.weight", E, 0, true);
    BIND(w1, "time_mix_w1.weight", E, 5 * X, true);
    HEARTH_TRY(bind_w2(m, NAME("time_mix_w2.weight"), X, E, L->w2));
    const int64_t fused_shape[4] = {E, 1, 1, 5};
    const float *fused;
    HEARTH_TRY(bind_floats(m, NAME("time_mix_lerp_fused.weight"), fused_shape, gla, &fused));
    if (fused) {
        for (int j = 0; j < 5; j++) L->lerp[j] = fused + j * E;
    } else {
        static const char *const names[5] = {"time_mix_lerp_w.weight", "time_mix_lerp_k.weight",
                                             "time_mix_lerp_v.weight", "time_mix_lerp_r.weight",
                                             "time_mix_lerp_g.weight"};
        for (int j = 0; j < 5; j++) {
            struct weight w;
            HEARTH_TRY(model_bind(m, &w, NAME(names[j]), E, 0, true));
            L->lerp[j] = w.data;
        }
    }
    const int64_t first_shape[4] = {N, H, 1, 1};
    if (gla) {
        if (hearth_gguf_find_tensor(m->gguf, NAME("time_mix_first.weight")))
            return hearth_error(HEARTH_E_FORMAT, "%s: tensor '%s' (the RWKV-6 bonus) is present, but %s "
                                "has none: the file mixes the architectures", path, name, m->arch->name);
        L->first = NULL;
    } else {
        HEARTH_TRY(bind_floats(m, NAME("time_mix_first.weight"), first_shape, true, &L->first));
    }
    BIND(decay, "time_mix_decay.weight", E, 0, true);
    BIND(decay_w1, "time_mix_decay_w1.weight", E, D, true);
    BIND(decay_w2, "time_mix_decay_w2.weight", D, E, true);
    BIND(wk, "time_mix_key.weight", E, n_kv, true);
    BIND(wv, "time_mix_value.weight", E, n_kv, true);
    BIND(wr, "time_mix_receptance.weight", E, E, true);
    BIND(wg, "time_mix_gate.weight", E, E, true);
    BIND(wo, "time_mix_output.weight", E, E, true);
    BIND(bk, "time_mix_key.bias", n_kv, 0, false);
    BIND(bv, "time_mix_value.bias", n_kv, 0, false);
    BIND(br, "time_mix_receptance.bias", E, 0, false);
    if (gla) {
        BIND(ln2, "ffn_norm.weight", E, 0, true);
        BIND(ffn_gate, "ffn_gate.weight", E, F, true);
        BIND(ffn_up, "ffn_up.weight", E, F, true);
        BIND(ffn_down, "ffn_down.weight", F, E, true);
    } else {
        BIND(ln2, "attn_norm_2.weight", E, 0, true);
        BIND(ln2_b, "attn_norm_2.bias", E, 0, true);
        BIND(ln_x, "time_mix_ln.weight", E, 0, true);
        BIND(ln_x_b, "time_mix_ln.bias", E, 0, true);
        BIND(cm_lerp_k, "channel_mix_lerp_k.weight", E, 0, true);
        BIND(cm_lerp_r, "channel_mix_lerp_r.weight", E, 0, true);
        BIND(cm_key, "channel_mix_key.weight", E, F, true);
        BIND(cm_value, "channel_mix_value.weight", F, E, true);
        BIND(cm_receptance, "channel_mix_receptance.weight", E, E, true);
    }
#undef BIND
#undef NAME
    return HEARTH_OK;
}

static void rwkv_release(hearth_model *m)
{
    if (!m->rwkv) return;
    free(m->rwkv->layers);
    free(m->rwkv);
    m->rwkv = NULL;
}

static hearth_status family_load(hearth_model *m, bool gla)
{
    HEARTH_TRY(read_hparams(m, gla));
    const struct hparams *hp = &m->hp;
    const int64_t E = hp->n_embd;
    struct rwkv_model *R = hearth_calloc(1, sizeof *R, "the recurrent model");
    if (!R) return HEARTH_E_NOMEM;
    m->rwkv = R;
    R->gla = gla;
    R->layers = hearth_calloc((size_t)hp->n_layer, sizeof *R->layers, "the recurrent layer table");
    if (!R->layers) return HEARTH_E_NOMEM;
    HEARTH_TRY(model_bind(m, &m->tok_embd, "token_embd.weight", E, -1, true));
    m->hp.n_vocab = (int32_t)m->tok_embd.n_out;
    if (!gla) {
        HEARTH_TRY(model_bind(m, &R->tok_norm, "token_embd_norm.weight", E, 0, true));
        HEARTH_TRY(model_bind(m, &R->tok_norm_b, "token_embd_norm.bias", E, 0, true));
    }
    HEARTH_TRY(model_bind(m, &m->output_norm, "output_norm.weight", E, 0, true));
    HEARTH_TRY(model_bind(m, &R->output_norm_b, "output_norm.bias", E, 0, !gla));
    HEARTH_TRY(model_bind(m, &m->output, "output.weight", E, hp->n_vocab, false));
    if (!m->output.data) m->output = m->tok_embd;
    for (int il = 0; il < hp->n_layer; il++) HEARTH_TRY(bind_layer(m, il, &R->layers[il], gla));
    return HEARTH_OK;
}

static hearth_status rwkv6_load(hearth_model *m) { return family_load(m, false); }
static hearth_status rwkv6qwen2_load(hearth_model *m) { return family_load(m, true); }

static size_t rwkv_state_floats(const hearth_model *m)
{
    const struct hparams *hp = &m->hp;
    const size_t N = (size_t)hp->wkv_head_size;
    /* the token-shift rows first, the WKV state of every head at the end
     * (where the wkv operation looks for it) */
    return (size_t)hp->n_token_shift * (size_t)hp->n_embd + (size_t)hp->n_head * N * N;
}

static void rwkv_extra_widths(const hearth_model *m, int64_t widths[])
{
    const struct hparams *hp = &m->hp;
    const int64_t E = hp->n_embd;
    for (int i = 0; i < X_COUNT; i++) widths[i] = E;
    widths[X_MID] = 5 * (int64_t)hp->time_mix_extra;
    widths[X_MIDJ] = hp->time_mix_extra;
    widths[X_DMID] = hp->time_decay_extra;
    widths[X_GATE] = E;
}

static int rwkv_matrices(hearth_model *m, int il, struct weight *out[])
{
    struct rwkv_layer *L = &m->rwkv->layers[il];
    int n = 0;
    out[n++] = &L->w1;
    for (int j = 0; j < 5; j++) out[n++] = &L->w2[j];
    struct weight *ws[] = {&L->decay_w1, &L->decay_w2, &L->wk, &L->wv, &L->wr, &L->wg, &L->wo,
                           &L->cm_key, &L->cm_value, &L->cm_receptance, &L->ffn_gate, &L->ffn_up,
                           &L->ffn_down};
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(ws); i++)
        if (ws[i]->data) out[n++] = ws[i];
    return n;
}

static const float *data_or_null(const struct weight *w)
{
    return w->data;
}

static hearth_status rwkv_output_norm(struct forward *f, struct act *x)
{
    const hearth_model *m = f->model;
    const struct rwkv_model *R = m->rwkv;
    const struct backend_ops *op = f->be->ops;
    if (R->gla) {
        HEARTH_TRY(op->rmsnorm(f->be, x, x, &m->output_norm, m->hp.norm_eps));
        if (R->output_norm_b.data) HEARTH_TRY(op->add_bias(f->be, x, &R->output_norm_b));
        return HEARTH_OK;
    }
    return op->norm(f->be, x, x, m->hp.n_embd, m->output_norm.data, data_or_null(&R->output_norm_b),
                    m->hp.norm_eps);
}

static hearth_status rwkv_layer(struct forward *f, int il)
{
    const hearth_model *m = f->model;
    const struct hparams *hp = &m->hp;
    const struct rwkv_model *R = m->rwkv;
    const struct rwkv_layer *L = &R->layers[il];
    struct hearth_backend *be = f->be;
    const struct backend_ops *op = be->ops;
    const int64_t E = hp->n_embd, X = hp->time_mix_extra;
    if (!op->wkv || !f->rs)
        return hearth_error(HEARTH_E_UNSUPPORTED, "the %s backend cannot run the recurrent layers of %s",
                            op->name, m->arch->name);
    struct act *ex = f->extra;
    struct act *prev = &ex[X_PREV], *mid = &ex[X_MID], *midj = &ex[X_MIDJ], *mix = &ex[X_MIX];
    struct act *xs[5] = {&ex[X_W], &ex[X_K], &ex[X_V], &ex[X_R], &ex[X_G]};

    if (il == 0 && !R->gla)
        HEARTH_TRY(op->norm(be, &f->x, &f->x, E, R->tok_norm.data, R->tok_norm_b.data, hp->norm_eps));

    /* time mixing */
    if (R->gla) HEARTH_TRY(op->rmsnorm(be, &f->cur, &f->x, &L->ln1, hp->norm_eps));
    else HEARTH_TRY(op->norm(be, &f->cur, &f->x, E, L->ln1.data, L->ln1_b.data, hp->norm_eps));
    HEARTH_TRY(op->token_shift(be, prev, &f->cur, f->rs, il, 0, &f->bp));
    HEARTH_TRY(op->lerp(be, &ex[X_LERP], &f->cur, prev, L->lerp_x.data, NULL, 0));
    HEARTH_TRY(op->matmul(be, mid, &L->w1, &ex[X_LERP]));
    HEARTH_TRY(op->map(be, mid, mid, MAP_TANH, 0.0f));
    for (int j = 0; j < 5; j++) {
        HEARTH_TRY(op->copy_cols(be, midj, mid, j * X, X));
        HEARTH_TRY(op->matmul(be, mix, &L->w2[j], midj));
        HEARTH_TRY(op->lerp(be, xs[j], &f->cur, prev, L->lerp[j], mix, 0));
    }
    struct act *r = &f->q, *g = &ex[X_GATE], *lw = &ex[X_LW];
    HEARTH_TRY(op->matmul(be, r, &L->wr, xs[3]));
    HEARTH_TRY(op->matmul(be, &f->k, &L->wk, xs[1]));
    HEARTH_TRY(op->matmul(be, &f->v, &L->wv, xs[2]));
    if (L->br.data) HEARTH_TRY(op->add_bias(be, r, &L->br));
    if (L->bk.data) HEARTH_TRY(op->add_bias(be, &f->k, &L->bk));
    if (L->bv.data) HEARTH_TRY(op->add_bias(be, &f->v, &L->bv));
    HEARTH_TRY(op->matmul(be, g, &L->wg, xs[4]));
    HEARTH_TRY(op->map(be, g, g, R->gla ? MAP_SIGMOID : MAP_SILU, 0.0f));
    HEARTH_TRY(op->matmul(be, &ex[X_DMID], &L->decay_w1, xs[0]));
    HEARTH_TRY(op->map(be, &ex[X_DMID], &ex[X_DMID], MAP_TANH, 0.0f));
    HEARTH_TRY(op->matmul(be, lw, &L->decay_w2, &ex[X_DMID]));
    HEARTH_TRY(op->add_bias(be, lw, &L->decay));
    HEARTH_TRY(op->map(be, lw, lw, MAP_LOG_DECAY, 0.0f));
    const float scale = R->gla ? 1.0f / sqrtf((float)hp->wkv_head_size) : 1.0f;
    HEARTH_TRY(op->wkv(be, &f->att, r, &f->k, &f->v, lw, L->first, scale, hp->n_head, hp->n_head_kv,
                       hp->wkv_head_size, f->rs, il, f->chunk_size, &f->bp));
    if (!R->gla)
        HEARTH_TRY(op->norm(be, &f->att, &f->att, hp->wkv_head_size, L->ln_x.data, L->ln_x_b.data,
                            GROUP_NORM_EPS));
    HEARTH_TRY(op->mul(be, &f->att, &f->att, g));
    HEARTH_TRY(op->matmul(be, &f->cur, &L->wo, &f->att));
    HEARTH_TRY(op->add(be, &f->x, &f->x, &f->cur));

    if (R->gla) {
        /* Qwen2's SwiGLU */
        HEARTH_TRY(op->rmsnorm(be, &f->cur, &f->x, &L->ln2, hp->norm_eps));
        struct act *const gate_up[] = {&f->gate, &f->up};
        const struct weight *const w_gate_up[] = {&L->ffn_gate, &L->ffn_up};
        HEARTH_TRY(backend_matmul_set(be, 2, gate_up, w_gate_up, &f->cur));
        HEARTH_TRY(op->swiglu(be, &f->gate, &f->gate, &f->up));
        HEARTH_TRY(op->matmul(be, &f->cur, &L->ffn_down, &f->gate));
        HEARTH_TRY(op->add(be, &f->x, &f->x, &f->cur));
    } else {
        /* channel mixing */
        HEARTH_TRY(op->norm(be, &f->cur, &f->x, E, L->ln2.data, L->ln2_b.data, hp->norm_eps));
        HEARTH_TRY(op->token_shift(be, prev, &f->cur, f->rs, il, 1, &f->bp));
        HEARTH_TRY(op->lerp(be, xs[1], &f->cur, prev, L->cm_lerp_k.data, NULL, 0));
        HEARTH_TRY(op->lerp(be, xs[3], &f->cur, prev, L->cm_lerp_r.data, NULL, 0));
        HEARTH_TRY(op->matmul(be, &f->gate, &L->cm_key, xs[1]));
        HEARTH_TRY(op->map(be, &f->gate, &f->gate, MAP_RELU_SQR, 0.0f));
        HEARTH_TRY(op->matmul(be, &f->cur, &L->cm_value, &f->gate));
        HEARTH_TRY(op->matmul(be, g, &L->cm_receptance, xs[3]));
        HEARTH_TRY(op->map(be, g, g, MAP_SIGMOID, 0.0f));
        HEARTH_TRY(op->mul(be, &f->cur, &f->cur, g));
        HEARTH_TRY(op->add(be, &f->x, &f->x, &f->cur));
    }
    if (hp->rescale_every > 0 && (il + 1) % hp->rescale_every == 0)
        HEARTH_TRY(op->map(be, &f->x, &f->x, MAP_SCALE, 0.5f));
    return HEARTH_OK;
}

static const struct arch_recurrent rwkv_hooks = {
    .state_floats = rwkv_state_floats,
    .output_norm = rwkv_output_norm,
    .matrices = rwkv_matrices,
    .release = rwkv_release,
};

/* offload refused: src/model/offload.c */
const struct arch arch_rwkv6 = {.name = "rwkv6",
                                .load = rwkv6_load,
                                .layer = rwkv_layer,
                                .extra_widths = rwkv_extra_widths,
                                .recurrent = &rwkv_hooks};
const struct arch arch_rwkv6qwen2 = {.name = "rwkv6qwen2",
                                     .load = rwkv6qwen2_load,
                                     .layer = rwkv_layer,
                                     .extra_widths = rwkv_extra_widths,
                                     .recurrent = &rwkv_hooks};

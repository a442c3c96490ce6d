/*
 * deepseek2.c -- DeepSeek-V2 and V3 (deepseek2: DeepSeek-V2-Lite, V2,
 * V2.5, V3, V3.1, R1, Kimi-K2): multi-head latent attention and a
 * mixture of experts with shared experts, after a few dense layers.
 *
 * Multi-head latent attention (DeepSeek-V2 technical report, section
 * 2.1, eqs. 9-19).  With n = rmsnorm(x), per head h of n_h, qk_nope
 * elements d_c, rotary elements d_r and values d_v:
 *   c      = rmsnorm(W_DKV n)                   the latent, kv_lora_rank d_l
 *   k_r    = rope(W_KR n)                       one rotary key for every head
 *   q      = W_Q n, or W_UQ rmsnorm(W_DQ n)     (the optional low-rank path)
 *   [q_c,h | q_r,h] = q's head h;  q_r,h = rope(q_r,h)
 *   k_h    = [W_UK,h c | k_r],  v_h = W_UV,h c  (decompressed: d_c + d_r, d_v)
 *   o_h    = softmax_j(q_h . k_h,j * scale) v_h,j
 *   x     += W_O [o_1 .. o_n_h]
 * Since q_c,h . W_UK,h c = (W_UK,h^T q_c,h) . c and W_UV,h is linear, the
 * keys and values never need decompressing: with the query mapped into
 * the latent space, q'_h = [q_r,h | W_UK,h^T q_c,h] (d_r + d_l), and the
 * key row [k_r | c] shared by all heads,
 *   o_h    = W_UV,h softmax_j(q'_h . [k_r | c]_j * scale) c_j,
 * multi-query attention over the latent: the cache keeps [k_r | c] per
 * position and layer (d_r + d_l = 576 values for V2 and V3 instead of
 * n_h (d_c + d_r + d_v) = 128 x 320), and attention reads it once for all
 * heads.  The values are the row's last d_l elements (kv_cache.h,
 * hparams.kv_latent).  The files store W_UK,h^T as attn_k_b (d_l rows of
 * d_c per head) and W_UV,h as attn_v_b (d_v rows of d_l), which
 * matmul_heads applies per head.  This absorbed form runs prefill and
 * decode alike (DESIGN.md says why).  scale = 1/sqrt(d_c + d_r), times
 * (0.1 mscale_all_dim ln(factor) + 1)^2 with YaRN (deepseek2_yarn).
 *
 * The feed-forward half: a SwiGLU of feed_forward_length in the first
 * leading_dense_block_count layers, experts after (models/moe.c): scores
 * softmax(W_r m) (V2) or sigmoid(W_r m) (V3), the choice steered by the
 * bias exp_probs_b where a layer has one and limited to the best
 * expert_group_used_count of expert_group_count groups, the weights the
 * chosen scores (renormalised where expert_weights_norm says) times
 * expert_weights_scale, plus expert_shared_count shared experts.  RoPE
 * rotates adjacent pairs.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "family.h"
#include "moe.h"

static const struct moe_opts deepseek2_moe = {.shared = MOE_SHARED_PLAIN, .routing_keys = true};

/* The extra buffers of a layer (forward.h): the queries' low-rank
 * activations, the queries before their mapping into the latent space,
 * and the heads' values. */
enum { X_QA, X_QF, X_OV };

/* Sizes of the latent attention are at most this (the published models'
 * are at most 1536). */
#define MLA_DIM_MAX 65536

/* "ARCH.suffix" as a size in 1 .. MLA_DIM_MAX; dflt when optional and
 * absent. */
static hearth_status get_dim(hearth_model *m, const char *suffix, bool required, int32_t dflt, int32_t *out)
{
    HEARTH_TRY(family_get_positive(m, suffix, required, dflt, out));
    if (*out > MLA_DIM_MAX)
        return hearth_error(HEARTH_E_FORMAT, "%s: metadata '%s.%s' = %d is out of range (at most %d)",
                            hearth_gguf_path(m->gguf), m->arch->name, suffix, *out, MLA_DIM_MAX);
    return HEARTH_OK;
}

/* The latent attention's sizes, checked against each other and against
 * the keys of the generic attention layout the converters also write. */
static hearth_status read_mla(hearth_model *m)
{
    struct hparams *hp = &m->hp;
    const char *path = hearth_gguf_path(m->gguf), *a = m->arch->name;
    if (!family_has_key(m, "attention.key_length_mla")) {
        if (hearth_gguf_find_tensor(m->gguf, "blk.0.attn_kv_b.weight"))
            return hearth_error(HEARTH_E_UNSUPPORTED, "%s: the file stores the latent's key and value "
                                "maps as one tensor ('blk.0.attn_kv_b.weight', an older conversion); hearth "
                                "reads them as 'attn_k_b' and 'attn_v_b' for latent attention: convert the "
                                "model again with a current converter", path);
        return hearth_error(HEARTH_E_FORMAT, "%s: required metadata '%s.attention.key_length_mla' is missing",
                            path, a);
    }
    int32_t kv_lora, qk_dim, v_dim, n_rot, q_lora;
    HEARTH_TRY(get_dim(m, "attention.kv_lora_rank", true, 0, &kv_lora));
    HEARTH_TRY(get_dim(m, "attention.key_length_mla", true, 0, &qk_dim));
    HEARTH_TRY(get_dim(m, "attention.value_length_mla", true, 0, &v_dim));
    HEARTH_TRY(get_dim(m, "rope.dimension_count", true, 0, &n_rot));
    /* the queries' rank: absent or 0 (as converters write for V2-Lite):
     * no low-rank path */
    q_lora = 0;
    char key[128];
    uint32_t v;
    snprintf(key, sizeof key, "%s.attention.q_lora_rank", a);
    if (hearth_gguf_get_u32(m->gguf, key, &v) == HEARTH_OK && v > 0)
        HEARTH_TRY(get_dim(m, "attention.q_lora_rank", true, 0, &q_lora));
    if (n_rot % 2 != 0 || n_rot >= qk_dim)
        return hearth_error(HEARTH_E_FORMAT, "%s: RoPE dimension count %d must be even and below the "
                            "query/key head length %d ('%s.attention.key_length_mla')", path, n_rot, qk_dim, a);
    /* what the converters write for the cache's shape: one key/value head
     * of n_rot + kv_lora_rank, whose values are the latent */
    int32_t n_head_kv, key_len, value_len;
    HEARTH_TRY(family_get_positive(m, "attention.head_count_kv", false, 1, &n_head_kv));
    HEARTH_TRY(get_dim(m, "attention.key_length", false, kv_lora + n_rot, &key_len));
    HEARTH_TRY(get_dim(m, "attention.value_length", false, kv_lora, &value_len));
    if (n_head_kv != 1 || key_len != kv_lora + n_rot || value_len != kv_lora)
        return hearth_error(HEARTH_E_FORMAT, "%s: latent attention's cache is one key/value head of %d "
                            "(RoPE %d + kv_lora_rank %d) whose values are its last %d, but the file says "
                            "head_count_kv %d, key_length %d, value_length %d", path, kv_lora + n_rot, n_rot, kv_lora,
                            kv_lora, n_head_kv, key_len, value_len);
    if ((int64_t)hp->n_head * (n_rot + kv_lora) > INT32_MAX / 4)
        return hearth_error(HEARTH_E_FORMAT, "%s: %d heads of %d latent elements are too many", path, hp->n_head,
                            n_rot + kv_lora);
    hp->n_head_kv = 1;
    hp->head_dim = n_rot + kv_lora;
    hp->kv_latent = kv_lora;
    hp->q_lora_rank = q_lora;
    hp->qk_nope_dim = qk_dim - n_rot;
    hp->v_head_dim = v_dim;
    hp->rope.n_dims = n_rot;
    return HEARTH_OK;
}

/* DeepSeek's YaRN magnitudes (transformers' DeepseekV2/V3 attention and
 * YaRN rotary embedding): with the factor s and mscale_all_dim M
 * (the file's rope.scaling.yarn_log_multiplier is 0.1 M), the softmax
 * scale is multiplied by (0.1 M ln s + 1)^2 and cos and sin by the
 * ratio of (0.1 mscale ln s + 1) to (0.1 M ln s + 1), which is 1 for the
 * published models (mscale = M; files do not carry mscale, and M = 0
 * means mscale 1).  The generic YaRN magnitude of family_read_rope is
 * replaced. */
static hearth_status deepseek2_yarn(hearth_model *m)
{
    struct hparams *hp = &m->hp;
    struct rope_params *r = &hp->rope;
    const int32_t qk_dim = hp->qk_nope_dim + r->n_dims;
    float mag2 = 1.0f;
    if (r->yarn_ext != 0.0f) {
        float log_mul, attn;
        HEARTH_TRY(family_get_float(m, "rope.scaling.yarn_log_multiplier", 0.0f, &log_mul));
        HEARTH_TRY(family_get_float(m, "rope.scaling.attn_factor", 1.0f, &attn));
        const float ln_s = logf(1.0f / r->freq_scale), all_dim = log_mul / 0.1f;
        if (all_dim != 0.0f) {
            const float mag = 0.1f * all_dim * ln_s + 1.0f;
            mag2 = mag * mag;
            r->mscale = attn;
        } else {
            r->mscale = attn * (0.1f * ln_s + 1.0f);
        }
        hp->rope_swa = *r;
    }
    hp->attn_scale = mag2 / sqrtf((float)qk_dim);
    return HEARTH_OK;
}

/* Layer il's tensor "blk.IL.SUFFIX" of ne0 x ne1 (ne1 0: a vector). */
static hearth_status bind(hearth_model *m, struct weight *w, int il, const char *suffix, int64_t ne0, int64_t ne1)
{
    char name[96];
    family_layer_name(name, sizeof name, il, suffix);
    return model_bind(m, w, name, ne0, ne1, true);
}

static hearth_status bind_attention(hearth_model *m, int il, struct weight *slices)
{
    const struct hparams *hp = &m->hp;
    struct layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, H = hp->n_head, n_rot = hp->rope.n_dims, lat = hp->kv_latent;
    const int64_t n_q = H * (hp->qk_nope_dim + n_rot);
    char name[96];
    HEARTH_TRY(bind(m, &L->attn_norm, il, "attn_norm.weight", E, 0));
    family_layer_name(name, sizeof name, il, "attn_q_a.weight");
    const bool low_rank = hearth_gguf_find_tensor(m->gguf, name) != NULL;
    if (low_rank != (hp->q_lora_rank > 0))
        return hearth_error(HEARTH_E_FORMAT, "%s: %s but %s", hearth_gguf_path(m->gguf),
                            low_rank ? "the queries have a low-rank path ('attn_q_a')"
                                     : "metadata 'deepseek2.attention.q_lora_rank' gives the queries a low-rank path",
                            low_rank ? "metadata 'deepseek2.attention.q_lora_rank' is missing"
                                     : "the file has no 'attn_q_a'");
    if (low_rank) {
        HEARTH_TRY(bind(m, &L->wq_a, il, "attn_q_a.weight", E, hp->q_lora_rank));
        HEARTH_TRY(bind(m, &L->attn_q_a_norm, il, "attn_q_a_norm.weight", hp->q_lora_rank, 0));
        HEARTH_TRY(bind(m, &L->wq, il, "attn_q_b.weight", hp->q_lora_rank, n_q));
    } else {
        HEARTH_TRY(bind(m, &L->wq, il, "attn_q.weight", E, n_q));
    }
    struct weight kv_a;
    HEARTH_TRY(bind(m, &kv_a, il, "attn_kv_a_mqa.weight", E, lat + n_rot));
    family_weight_rows(&L->wkv_c, &kv_a, 0, lat, kv_a.name);
    family_weight_rows(&L->wk_rope, &kv_a, lat, n_rot, kv_a.name);
    HEARTH_TRY(bind(m, &L->attn_kv_a_norm, il, "attn_kv_a_norm.weight", lat, 0));
    L->k_b = slices;
    L->v_b = slices + H;
    family_layer_name(name, sizeof name, il, "attn_k_b.weight");
    HEARTH_TRY(model_bind_slices(m, L->k_b, name, hp->qk_nope_dim, lat, H, "head"));
    family_layer_name(name, sizeof name, il, "attn_v_b.weight");
    HEARTH_TRY(model_bind_slices(m, L->v_b, name, lat, hp->v_head_dim, H, "head"));
    return bind(m, &L->wo, il, "attn_output.weight", H * hp->v_head_dim, E);
}

static hearth_status deepseek2_load(hearth_model *m)
{
    struct hparams *hp = &m->hp;
    HEARTH_TRY(family_read_sizes(m));
    HEARTH_TRY(read_mla(m));
    HEARTH_TRY(family_read_rope(m, ROPE_NORMAL, hp->qk_nope_dim + hp->rope.n_dims));
    HEARTH_TRY(deepseek2_yarn(m));
    HEARTH_TRY(moe_read_dense_lead(m));
    const int32_t n_dense = hp->n_layer_dense;
    if (n_dense < hp->n_layer) HEARTH_TRY(moe_read_hparams(m, &deepseek2_moe));
    HEARTH_TRY(family_bind_globals(m));
    m->head_slices = hearth_calloc((size_t)hp->n_layer * 2 * (size_t)hp->n_head, sizeof *m->head_slices,
                                   "the heads' latent maps");
    if (!m->head_slices) return HEARTH_E_NOMEM;
    const int64_t E = hp->n_embd;
    for (int il = 0; il < hp->n_layer; il++) {
        struct layer *L = &m->layers[il];
        HEARTH_TRY(bind_attention(m, il, m->head_slices + (size_t)il * 2 * (size_t)hp->n_head));
        HEARTH_TRY(bind(m, &L->ffn_norm, il, "ffn_norm.weight", E, 0));
        if (il < n_dense) {
            HEARTH_TRY(bind(m, &L->w_gate, il, "ffn_gate.weight", E, hp->n_ff));
            HEARTH_TRY(bind(m, &L->w_up, il, "ffn_up.weight", E, hp->n_ff));
            HEARTH_TRY(bind(m, &L->w_down, il, "ffn_down.weight", hp->n_ff, E));
        } else {
            HEARTH_TRY(moe_bind_layer(m, il, &deepseek2_moe));
        }
    }
    return HEARTH_OK;
}

static void deepseek2_extra_widths(const hearth_model *m, int64_t widths[])
{
    const struct hparams *hp = &m->hp;
    widths[X_QA] = hp->q_lora_rank;
    widths[X_QF] = (int64_t)hp->n_head * (hp->qk_nope_dim + hp->rope.n_dims);
    widths[X_OV] = (int64_t)hp->n_head * hp->v_head_dim;
}

/* The attention half, in the absorbed form (the top of the file). */
static hearth_status latent_attention(struct forward *f, int il)
{
    const struct hparams *hp = &f->model->hp;
    const struct layer *L = &f->model->layers[il];
    struct hearth_backend *be = f->be;
    const struct backend_ops *op = be->ops;
    if (!op->matmul_heads || !op->copy_heads)
        return hearth_error(HEARTH_E_UNSUPPORTED, "the %s backend does not run latent attention", op->name);
    const int32_t H = hp->n_head, n_rot = hp->rope.n_dims, d_c = hp->qk_nope_dim, lat = hp->kv_latent;
    const int64_t d_q = d_c + n_rot, d_k = hp->head_dim; /* a query head before and after the mapping */
    struct act *qa = &f->extra[X_QA], *qf = &f->extra[X_QF], *ov = &f->extra[X_OV];
    struct act *c = &f->v, *k_r = &f->k;
    const bool low_rank = L->wq_a.data != NULL;

    HEARTH_TRY(op->rmsnorm(be, &f->cur, &f->x, &L->attn_norm, hp->norm_eps));
    /* the latent, the rotary key and the query's first product read n */
    struct act *const outs[] = {c, k_r, low_rank ? qa : qf};
    const struct weight *const ws[] = {&L->wkv_c, &L->wk_rope, low_rank ? &L->wq_a : &L->wq};
    HEARTH_TRY(backend_matmul_set(be, 3, outs, ws, &f->cur));
    if (low_rank) {
        HEARTH_TRY(op->rmsnorm(be, qa, qa, &L->attn_q_a_norm, hp->norm_eps));
        HEARTH_TRY(op->matmul(be, qf, &L->wq, qa));
    }
    HEARTH_TRY(op->rmsnorm(be, c, c, &L->attn_kv_a_norm, hp->norm_eps));
    HEARTH_TRY(op->rope(be, k_r, 1, n_rot, &hp->rope, &f->bp));
    /* each head's query in the latent space: [rope(q_r) | W_UK^T q_c] */
    HEARTH_TRY(op->copy_heads(be, &f->q, d_k, 0, qf, d_q, d_c, H, n_rot));
    HEARTH_TRY(op->matmul_heads(be, &f->q, d_k, n_rot, L->k_b, H, qf, d_q, 0));
    HEARTH_TRY(op->rope(be, &f->q, H, (int32_t)d_k, &hp->rope, &f->bp));
    /* one key/value head: the cache row [k_r | c], the values c */
    HEARTH_TRY(op->attention(be, &f->att, &f->q, k_r, c, f->kv, il, hp, NULL, &f->bp));
    /* each head's values, W_UV o_h, then the output projection */
    HEARTH_TRY(op->matmul_heads(be, ov, hp->v_head_dim, 0, L->v_b, H, &f->att, lat, 0));
    HEARTH_TRY(op->matmul(be, &f->cur, &L->wo, ov));
    return op->add(be, &f->x, &f->x, &f->cur);
}

static hearth_status deepseek2_layer(struct forward *f, int il)
{
    HEARTH_TRY(latent_attention(f, il));
    return moe_ffn_after_dense(f, il);
}

const struct arch arch_deepseek2 = {.name = "deepseek2",
                                    .load = deepseek2_load,
                                    .layer = deepseek2_layer,
                                    .extra_widths = deepseek2_extra_widths,
                                    .no_device = "its latent attention, YaRN rotary embeddings and expert routing "
                                                 "are not in the OpenCL backend"};

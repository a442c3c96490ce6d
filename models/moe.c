/*
 * moe.c -- the mixture-of-experts feed-forward block (Shazeer et al.
 * 2017; Mixtral: Jiang et al. 2024; Qwen1.5-MoE / Qwen2-MoE with a shared
 * expert; Qwen3-MoE).  Per token, with m = rmsnorm(h):
 *   p      = softmax(W_router m)                    (over all experts)
 *   E      = the k experts of highest p, w_e = p_e  (renormalised to sum 1
 *            over E for Mixtral and qwen3moe; as they are for qwen2moe)
 *   moe    = sum_{e in E} w_e W_down_e (silu(W_gate_e m) * (W_up_e m))
 *   shared = sigmoid(g . m) W_down_s (silu(W_gate_s m) * (W_up_s m))   (qwen2moe;
 *            DeepSeek's shared experts without the gate)
 *   out    = h + moe + shared
 * DeepSeek's routing (struct moe_routing in backend.h): sigmoid scores
 * (V3, GLM-4.5), a bias that steers the choice only, group-limited choice
 * and a scaling factor of the weights.
 * The experts' matrices are views into the file's 3-D tensors
 * (ffn_{gate,up,down}_exps, one slice per expert); the backend groups
 * the rows of a step by expert so that each expert's matrices are read
 * once per step (backend.h, moe_ffn).
 */
#include "moe.h"

#include <stdio.h>
#include <string.h>

#include "family.h"

static hearth_status get_u32(const hearth_model *m, const char *suffix, bool *found, uint32_t *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", m->arch->name, suffix);
    hearth_status st = hearth_gguf_get_u32(m->gguf, key, out);
    *found = st == HEARTH_OK;
    return st == HEARTH_E_NOT_FOUND ? HEARTH_OK : st;
}

bool moe_file_has_experts(const hearth_model *m)
{
    bool found;
    uint32_t n;
    return get_u32(m, "expert_count", &found, &n) == HEARTH_OK && found && n > 1;
}

/* DeepSeek's routing keys (struct moe_opts.routing_keys). */
static hearth_status read_routing(hearth_model *m, const struct moe_opts *o)
{
    struct hparams *hp = &m->hp;
    const char *path = hearth_gguf_path(m->gguf), *a = m->arch->name;
    bool found;
    uint32_t v;
    /* 1 softmax, 2 sigmoid; files from before the key route by the
     * family's default */
    HEARTH_TRY(get_u32(m, "expert_gating_func", &found, &v));
    if (found && v != 1 && v != 2)
        return hearth_error(HEARTH_E_UNSUPPORTED, "%s: metadata '%s.expert_gating_func' = %u is not supported "
                            "(1: softmax, 2: sigmoid)", path, a, v);
    hp->moe_gating = (found ? v == 2 : o->sigmoid_default) ? MOE_GATING_SIGMOID : MOE_GATING_SOFTMAX;
    /* the routed scaling factor; 0, as some converters write for none, is 1 */
    float scale;
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_scale", a);
    hearth_status st = hearth_gguf_get_f32(m->gguf, key, &scale);
    if (st == HEARTH_E_NOT_FOUND) scale = 1.0f;
    else if (st) return st;
    if (!(scale >= 0.0f && scale <= 1000.0f))
        return hearth_error(HEARTH_E_FORMAT, "%s: metadata '%s.expert_weights_scale' = %g is out of range "
                            "(0 to 1000)", path, a, (double)scale);
    hp->moe_weights_scale = scale == 0.0f ? 1.0f : scale;
    HEARTH_TRY(get_u32(m, "expert_group_count", &found, &v));
    if (!found || v <= 1) return HEARTH_OK;
    if (v > (uint32_t)hp->n_expert || hp->n_expert % (int32_t)v != 0)
        return hearth_error(HEARTH_E_FORMAT, "%s: metadata '%s.expert_group_count' = %u does not divide the %d "
                            "experts", path, a, v, hp->n_expert);
    hp->n_expert_groups = (int32_t)v;
    HEARTH_TRY(get_u32(m, "expert_group_used_count", &found, &v));
    const int32_t per = hp->n_expert / hp->n_expert_groups;
    if (!found)
        return hearth_error(HEARTH_E_FORMAT, "%s: required metadata '%s.expert_group_used_count' is missing (%d "
                            "expert groups)", path, a, hp->n_expert_groups);
    if (v < 1 || v > (uint32_t)hp->n_expert_groups || (int64_t)v * per < hp->n_expert_used)
        return hearth_error(HEARTH_E_FORMAT, "%s: metadata '%s.expert_group_used_count' = %u is out of range (1 to "
                            "the %d groups; the groups used, of %d experts each, must hold the %d experts used)",
                            path, a, v, hp->n_expert_groups, per, hp->n_expert_used);
    hp->n_expert_groups_used = (int32_t)v;
    return HEARTH_OK;
}

hearth_status moe_read_hparams(hearth_model *m, const struct moe_opts *o)
{
    struct hparams *hp = &m->hp;
    const char *path = hearth_gguf_path(m->gguf);
    const char *a = m->arch->name;
    bool found;
    uint32_t v;
    HEARTH_TRY(get_u32(m, "expert_count", &found, &v));
    if (!found)
        return hearth_error(HEARTH_E_FORMAT, "%s: required metadata '%s.expert_count' is missing "
                            "(a mixture-of-experts architecture)", path, a);
    if (v < 1 || v > MOE_EXPERT_MAX)
        return hearth_error(HEARTH_E_FORMAT, "%s: metadata '%s.expert_count' = %u is out of range "
                            "(1 to %d)", path, a, v, MOE_EXPERT_MAX);
    hp->n_expert = (int32_t)v;
    HEARTH_TRY(get_u32(m, "expert_used_count", &found, &v));
    if (!found)
        return hearth_error(HEARTH_E_FORMAT, "%s: required metadata '%s.expert_used_count' is "
                            "missing (%d experts)", path, a, hp->n_expert);
    if (v < 1 || v > (uint32_t)hp->n_expert)
        return hearth_error(HEARTH_E_FORMAT, "%s: metadata '%s.expert_used_count' = %u is out of "
                            "range (1 to the expert count %d)", path, a, v, hp->n_expert);
    hp->n_expert_used = (int32_t)v;

    HEARTH_TRY(get_u32(m, "expert_feed_forward_length", &found, &v));
    if (o->ff_exp_is_ff) hp->n_ff_exp = hp->n_ff;
    else if (found) hp->n_ff_exp = (int32_t)v;
    else hp->n_ff_exp = hp->n_ff / hp->n_expert_used;
    if (hp->n_ff_exp < 1 || (found && v > INT32_MAX))
        return hearth_error(HEARTH_E_FORMAT, "%s: expert feed-forward length %d ('%s.expert_feed_"
                            "forward_length') is out of range", path, hp->n_ff_exp, a);
    hp->n_ff_shexp = 0;
    if (o->shared == MOE_SHARED_GATED) {
        HEARTH_TRY(get_u32(m, "expert_shared_feed_forward_length", &found, &v));
        hp->n_ff_shexp = found ? (int32_t)v : hp->n_ff;
        if (hp->n_ff_shexp < 1 || (found && v > INT32_MAX))
            return hearth_error(HEARTH_E_FORMAT, "%s: metadata '%s.expert_shared_feed_forward_length' "
                                "= %u is out of range", path, a, v);
    } else if (o->shared == MOE_SHARED_PLAIN) {
        HEARTH_TRY(get_u32(m, "expert_shared_count", &found, &v));
        if (!found)
            return hearth_error(HEARTH_E_FORMAT, "%s: required metadata '%s.expert_shared_count' is missing",
                                path, a);
        if (v > 64)
            return hearth_error(HEARTH_E_FORMAT, "%s: metadata '%s.expert_shared_count' = %u is out of range "
                                "(0 to 64)", path, a, v);
        hp->n_ff_shexp = (int32_t)v * hp->n_ff_exp;
    }
    hp->moe_norm_topk = o->norm_topk;
    hp->moe_act = o->act;
    hp->moe_alpha = o->alpha;
    hp->moe_limit = o->limit;
    hp->moe_gating = MOE_GATING_SOFTMAX;
    hp->n_expert_groups = hp->n_expert_groups_used = 0;
    hp->moe_weights_scale = 1.0f;
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_norm", a);
    bool norm;
    if (hearth_gguf_get_bool(m->gguf, key, &norm) == HEARTH_OK) hp->moe_norm_topk = norm;
    return o->routing_keys ? read_routing(m, o) : HEARTH_OK;
}

hearth_status moe_read_dense_lead(hearth_model *m)
{
    struct hparams *hp = &m->hp;
    bool found;
    uint32_t v;
    HEARTH_TRY(get_u32(m, "leading_dense_block_count", &found, &v));
    if (found && v > (uint32_t)hp->n_layer)
        return hearth_error(HEARTH_E_FORMAT, "%s: metadata '%s.leading_dense_block_count' = %u is more than the %d "
                            "layers", hearth_gguf_path(m->gguf), m->arch->name, v, hp->n_layer);
    hp->n_layer_dense = found ? (int32_t)v : 0;
    return HEARTH_OK;
}

hearth_status moe_bind_layer(hearth_model *m, int il, const struct moe_opts *o)
{
    const struct hparams *hp = &m->hp;
    const int64_t n_embd = hp->n_embd, n_ff = hp->n_ff_exp, E = hp->n_expert;
    if (!m->experts) {
        m->experts = hearth_calloc((size_t)(hp->n_layer + m->n_mtp) * 3 * (size_t)E, sizeof *m->experts,
                                   "the expert table");
        if (!m->experts) return HEARTH_E_NOMEM;
    }
    struct layer *L = &m->layers[il];
    struct weight *views = m->experts + (size_t)il * 3 * (size_t)E;
    char name[96];
    snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.weight", il);
    HEARTH_TRY(model_bind(m, &L->ffn_gate_inp, name, n_embd, E, true));
    snprintf(name, sizeof name, "blk.%d.ffn_gate_exps.weight", il);
    if (!hearth_gguf_find_tensor(m->gguf, name)) {
        char old[96];
        snprintf(old, sizeof old, "blk.%d.ffn_gate.0.weight", il);
        if (hearth_gguf_find_tensor(m->gguf, old))
            return hearth_error(HEARTH_E_UNSUPPORTED, "%s: the experts are stored one tensor each "
                                "('%s', an early Mixtral conversion); hearth reads them from the "
                                "3-D tensor '%s': convert the model again", hearth_gguf_path(m->gguf),
                                old, name);
    }
    L->gate_exps = views;
    L->up_exps = views + E;
    L->down_exps = views + 2 * E;
    HEARTH_TRY(model_bind_experts(m, L->gate_exps, name, n_embd, n_ff, E));
    snprintf(name, sizeof name, "blk.%d.ffn_up_exps.weight", il);
    HEARTH_TRY(model_bind_experts(m, L->up_exps, name, n_embd, n_ff, E));
    snprintf(name, sizeof name, "blk.%d.ffn_down_exps.weight", il);
    HEARTH_TRY(model_bind_experts(m, L->down_exps, name, n_ff, n_embd, E));
    if (o->biases) {
        snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.bias", il);
        HEARTH_TRY(model_bind_f32(m, &L->ffn_gate_inp_b, name, E, 0));
        snprintf(name, sizeof name, "blk.%d.ffn_gate_exps.bias", il);
        HEARTH_TRY(model_bind_f32(m, &L->gate_exps_b, name, n_ff, E));
        snprintf(name, sizeof name, "blk.%d.ffn_up_exps.bias", il);
        HEARTH_TRY(model_bind_f32(m, &L->up_exps_b, name, n_ff, E));
        snprintf(name, sizeof name, "blk.%d.ffn_down_exps.bias", il);
        HEARTH_TRY(model_bind_f32(m, &L->down_exps_b, name, n_embd, E));
    }
    if (o->routing_keys) {
        snprintf(name, sizeof name, "blk.%d.exp_probs_b.bias", il);
        HEARTH_TRY(model_bind(m, &L->exp_probs_b, name, E, 0, o->select_bias));
    }
    if (hp->n_ff_shexp > 0) {
        const int64_t n_sh = hp->n_ff_shexp;
        if (o->shared == MOE_SHARED_GATED) {
            snprintf(name, sizeof name, "blk.%d.ffn_gate_inp_shexp.weight", il);
            HEARTH_TRY(model_bind(m, &L->gate_inp_shexp, name, n_embd, 0, true));
        }
        snprintf(name, sizeof name, "blk.%d.ffn_gate_shexp.weight", il);
        HEARTH_TRY(model_bind(m, &L->w_gate_shexp, name, n_embd, n_sh, true));
        snprintf(name, sizeof name, "blk.%d.ffn_up_shexp.weight", il);
        HEARTH_TRY(model_bind(m, &L->w_up_shexp, name, n_embd, n_sh, true));
        snprintf(name, sizeof name, "blk.%d.ffn_down_shexp.weight", il);
        HEARTH_TRY(model_bind(m, &L->w_down_shexp, name, n_sh, n_embd, true));
    }
    return HEARTH_OK;
}

hearth_status moe_ffn_block(struct forward *f, int il)
{
    const struct hparams *hp = &f->model->hp;
    const struct layer *L = &f->model->layers[il];
    struct hearth_backend *be = f->be;
    const struct backend_ops *op = be->ops;
    if (!op->moe_ffn || !op->add_gated)
        return hearth_error(HEARTH_E_UNSUPPORTED, "the %s backend does not run mixture-of-experts "
                            "layers", op->name);

    HEARTH_TRY(op->rmsnorm(be, &f->cur, &f->x, &L->ffn_norm, hp->norm_eps));
    const bool shared = L->w_gate_shexp.data != NULL;
    /* the router and the shared expert's gate and up products read the
     * same input: one step */
    struct act *const outs[] = {&f->router, &f->gate, &f->up};
    const struct weight *const ws[] = {&L->ffn_gate_inp, &L->w_gate_shexp, &L->w_up_shexp};
    HEARTH_TRY(backend_matmul_set(be, shared ? 3 : 1, outs, ws, &f->cur));
    if (L->ffn_gate_inp_b.data) HEARTH_TRY(op->add_bias(be, &f->router, &L->ffn_gate_inp_b));
    const struct moe_experts ex = {
        .route = {
            .n_expert = hp->n_expert,
            .n_used = hp->n_expert_used,
            .norm_topk = hp->moe_norm_topk,
            .gating = hp->moe_gating,
            .select_bias = L->exp_probs_b.data,
            .n_groups = hp->n_expert_groups,
            .n_groups_used = hp->n_expert_groups_used,
            .scale = hp->moe_weights_scale,
        },
        .gate = L->gate_exps,
        .up = L->up_exps,
        .down = L->down_exps,
        .gate_bias = L->gate_exps_b.data,
        .up_bias = L->up_exps_b.data,
        .down_bias = L->down_exps_b.data,
        .act = hp->moe_act,
        .alpha = hp->moe_alpha,
        .limit = hp->moe_limit,
        .tp = f->model->experts_share.tp,
    };
    HEARTH_TRY(op->moe_ffn(be, &f->moe_out, &f->cur, &f->router, &ex));
    if (shared) {
        HEARTH_TRY(op->swiglu(be, &f->gate, &f->gate, &f->up));
        HEARTH_TRY(op->matmul(be, &f->moe_shared, &L->w_down_shexp, &f->gate));
        if (L->gate_inp_shexp.data) {
            HEARTH_TRY(op->matmul(be, &f->shared_gate, &L->gate_inp_shexp, &f->cur));
            HEARTH_TRY(op->add_gated(be, &f->moe_out, &f->moe_shared, &f->shared_gate));
        } else {
            HEARTH_TRY(op->add(be, &f->moe_out, &f->moe_out, &f->moe_shared));
        }
    }
    return op->add(be, &f->x, &f->x, &f->moe_out);
}

hearth_status moe_ffn_after_dense(struct forward *f, int il)
{
    return il < f->model->hp.n_layer_dense ? family_swiglu_block(f, il) : moe_ffn_block(f, il);
}

/*
 * test-moe.c -- mixture-of-experts layers (models/moe.c and the CPU
 * backend's moe_ffn).
 *
 * - Routing: moe_route against a double-precision softmax and a sort:
 *   the same experts in the same order (ties to the lower index), the
 *   same weights within rounding, renormalised weights summing to 1;
 *   DeepSeek's routing (sigmoid scores, the selection bias, groups, the
 *   scaling factor) against a reference that sorts groups and experts.
 * - The grouped product: moe_ffn over a batch, where the rows routed to
 *   one expert pass its matrices together, equals bit for bit each row run
 *   alone through the op, and each row run through its experts one by one
 *   with single-row products (matmul, swiglu) and the documented fused
 *   multiply-adds -- for float, unpacked and packed quantized experts
 *   (MXFP4 among them), with gpt-oss's biases and clamped SwiGLU, on
 *   every kernel path this CPU runs, for 1 and 3 threads.
 * - Models: micro qwen2moe and Mixtral-style llama files written here;
 *   the logits of a prompt run as one batch equal those of the same tokens
 *   decoded one at a time, bit for bit; files missing an expert key or
 *   tensor, or with a wrong shape, are refused naming what is wrong;
 *   offloading such a model is refused (and falls back to the CPU when
 *   allowed).
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "kernels.h"
#include "quant.h"
#include "testutil.h"

static void fill_normal(test_rng *rng, float *x, int64_t n, double std)
{
    for (int64_t i = 0; i < n; i++) x[i] = (float)(test_rng_normal(rng) * std);
}

static bool same_float(float a, float b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* ---- routing ----------------------------------------------------------------- */

START_TEST(test_route)
{
    test_rng rng;
    test_rng_seed(&rng, 77);
    static const int32_t counts[][2] = {{8, 2}, {60, 4}, {128, 8}, {5, 5}, {3, 1}};
    for (size_t c = 0; c < HEARTH_ARRAY_LEN(counts); c++) {
        const int32_t E = counts[c][0], k = counts[c][1];
        float *logits = test_malloc((size_t)E * sizeof(float));
        int32_t ids[8];
        float w[8];
        for (int rep = 0; rep < 50; rep++) {
            fill_normal(&rng, logits, E, rep < 40 ? 2.0 : 0.0); /* the last ones: all tied */
            if (rep % 7 == 3) logits[E - 1] = logits[0];            /* one tie */
            for (int norm = 0; norm < 2; norm++) {
                const struct moe_routing r = {.n_expert = E, .n_used = k, .norm_topk = norm, .scale = 1.0f};
                moe_route(&r, logits, ids, w);
                double mx = logits[0], sum = 0.0;
                for (int32_t e = 1; e < E; e++) mx = fmax(mx, logits[e]);
                for (int32_t e = 0; e < E; e++) sum += exp((double)logits[e] - mx);
                double wsum = 0.0;
                for (int32_t j = 0; j < k; j++) {
                    /* ids[j] is the expert of rank j: (logit desc, index asc) */
                    int32_t rank = 0;
                    for (int32_t e = 0; e < E; e++)
                        if (logits[e] > logits[ids[j]] || (logits[e] == logits[ids[j]] && e < ids[j]))
                            rank++;
                    ck_assert_msg(rank == j, "%d experts: rank %d holds expert %d of rank %d", E, j,
                                  ids[j], rank);
                    wsum += exp((double)logits[ids[j]] - mx) / sum;
                }
                for (int32_t j = 0; j < k; j++) {
                    double want = exp((double)logits[ids[j]] - mx) / sum;
                    if (norm) want /= wsum;
                    ck_assert_msg(fabs(w[j] - want) <= 1e-6 * fmax(1.0, want), "weight %g, want %g",
                                  (double)w[j], want);
                }
                if (norm) {
                    double s = 0.0;
                    for (int32_t j = 0; j < k; j++) s += w[j];
                    ck_assert(fabs(s - 1.0) < 1e-6);
                }
            }
        }
        free(logits);
    }
}
END_TEST

/* DeepSeek's routing (struct moe_routing): sigmoid or softmax scores, the
 * selection bias that steers the choice only, group-limited choice (the
 * group's best score for softmax, its two best summed for sigmoid), the
 * weights renormalised or not and scaled -- against a reference that
 * sorts: the groups by score, then the allowed experts by s. */
struct ranked {
    double key;
    int32_t index;
};

static int by_key_desc(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->key != y->key) return x->key > y->key ? -1 : 1;
    return x->index - y->index;
}

START_TEST(test_route_deepseek)
{
    test_rng rng;
    test_rng_seed(&rng, 4711);
    /* (experts, used, groups, groups used): V3's 256/8/8/4 and V2's 160/6/8/3 */
    static const int32_t shapes[][4] = {{256, 8, 8, 4}, {160, 6, 8, 3}, {64, 6, 1, 0}, {16, 4, 4, 2}, {12, 3, 6, 2}, {8, 2, 4, 4}};
    for (size_t c = 0; c < HEARTH_ARRAY_LEN(shapes); c++) {
        const int32_t E = shapes[c][0], k = shapes[c][1], G = shapes[c][2], GU = shapes[c][3];
        float *logits = test_malloc((size_t)E * sizeof(float)), *bias = test_malloc((size_t)E * sizeof(float));
        float *p = test_malloc((size_t)E * sizeof(float));
        struct ranked *rk = test_malloc((size_t)E * sizeof(struct ranked));
        for (int rep = 0; rep < 40; rep++) {
            fill_normal(&rng, logits, E, 2.0);
            fill_normal(&rng, bias, E, 0.3);
            const struct moe_routing r = {
                .n_expert = E, .n_used = k, .norm_topk = rep % 2 == 0,
                .gating = rep % 4 < 2 ? MOE_GATING_SIGMOID : MOE_GATING_SOFTMAX,
                .select_bias = rep % 3 != 2 ? bias : NULL, .n_groups = G, .n_groups_used = GU,
                .scale = rep % 5 == 0 ? 1.0f : 2.5f};
            int32_t ids[8];
            float w[8];
            moe_route(&r, logits, ids, w);
            /* the scores as documented */
            if (r.gating == MOE_GATING_SIGMOID) {
                for (int32_t e = 0; e < E; e++) p[e] = 1.0f / (1.0f + expf(-logits[e]));
            } else {
                double mx = logits[0], sum = 0.0;
                for (int32_t e = 1; e < E; e++) mx = fmax(mx, logits[e]);
                for (int32_t e = 0; e < E; e++) sum += exp((double)logits[e] - mx);
                for (int32_t e = 0; e < E; e++) p[e] = (float)(exp((double)logits[e] - mx) / sum);
            }
            bool allowed[256];
            for (int32_t e = 0; e < E; e++) allowed[e] = true;
            if (G > 1) {
                const int32_t per = E / G;
                struct ranked groups[8];
                for (int32_t g = 0; g < G; g++) {
                    for (int32_t i = 0; i < per; i++) {
                        const int32_t e = g * per + i;
                        rk[i] = (struct ranked){(double)p[e] + (r.select_bias ? bias[e] : 0.0), e};
                    }
                    qsort(rk, (size_t)per, sizeof *rk, by_key_desc);
                    groups[g] = (struct ranked){r.gating == MOE_GATING_SIGMOID ? rk[0].key + rk[1].key : rk[0].key, g};
                }
                qsort(groups, (size_t)G, sizeof *groups, by_key_desc);
                for (int32_t e = 0; e < E; e++) allowed[e] = false;
                for (int32_t j = 0; j < GU; j++)
                    for (int32_t i = 0; i < per; i++) allowed[groups[j].index * per + i] = true;
            }
            int32_t n = 0;
            for (int32_t e = 0; e < E; e++)
                if (allowed[e]) rk[n++] = (struct ranked){(double)p[e] + (r.select_bias ? bias[e] : 0.0), e};
            qsort(rk, (size_t)n, sizeof *rk, by_key_desc);
            double wsum = 0.0;
            for (int32_t j = 0; j < k; j++) {
                ck_assert_msg(ids[j] == rk[j].index, "%d experts in %d groups, case %d: rank %d holds expert %d, "
                              "want %d", E, G, rep, j, ids[j], rk[j].index);
                wsum += p[ids[j]];
            }
            for (int32_t j = 0; j < k; j++) {
                double want = p[ids[j]];
                if (r.norm_topk) want /= wsum;
                want *= r.scale;
                ck_assert_msg(fabs(w[j] - want) <= 1e-6 * fmax(1.0, want), "weight %g, want %g", (double)w[j], want);
            }
        }
        free(logits);
        free(bias);
        free(p);
        free(rk);
    }
}
END_TEST

/* ---- the grouped product --------------------------------------------------------- */

/* Expert matrices of one type, each n_out x n_in, made of random floats. */
struct experts {
    hearth_type type;
    int32_t E;
    struct weight gate[8], up[8], down[8];
    void *mem[3 * 8];
    void *packed[3 * 8];
};

static void make_matrix(test_rng *rng, struct weight *w, hearth_type t, int64_t n_in, int64_t n_out,
                        bool pack, void **mem, void **packed)
{
    const size_t row = hearth_type_row_bytes(t, n_in);
    uint8_t *d = test_malloc(row * (size_t)n_out);
    float *f = test_malloc((size_t)n_in * sizeof(float));
    for (int64_t r = 0; r < n_out; r++) {
        fill_normal(rng, f, n_in, 0.1);
        ck_assert(quant_quantize_row(t, f, d + (size_t)r * row, n_in));
    }
    free(f);
    *w = (struct weight){.name = "blk.0.ffn_x_exps.weight", .type = t, .n_in = n_in, .n_out = n_out,
                         .row_bytes = row, .data = d};
    *mem = d;
    *packed = NULL;
    if (pack && hearth_pack_supported(t) && n_out % PACK_ROWS == 0) {
        void *p = hearth_aligned_alloc(64, hearth_packed_bytes(t, n_out, n_in), "test packing");
        ck_assert_ptr_nonnull(p);
        hearth_pack_rows(t, d, row, n_out, n_in, p);
        w->packed = p;
        *packed = p;
    }
}

static void make_experts(struct experts *x, hearth_type t, int32_t E, int64_t n_embd, int64_t n_ff,
                         bool pack, uint64_t seed)
{
    test_rng rng;
    test_rng_seed(&rng, seed);
    x->type = t;
    x->E = E;
    for (int32_t e = 0; e < E; e++) {
        make_matrix(&rng, &x->gate[e], t, n_embd, n_ff, pack, &x->mem[3 * e], &x->packed[3 * e]);
        make_matrix(&rng, &x->up[e], t, n_embd, n_ff, pack, &x->mem[3 * e + 1], &x->packed[3 * e + 1]);
        make_matrix(&rng, &x->down[e], t, n_ff, n_embd, pack, &x->mem[3 * e + 2], &x->packed[3 * e + 2]);
    }
}

static void free_experts(struct experts *x)
{
    for (int32_t i = 0; i < 3 * x->E; i++) {
        free(x->mem[i]);
        hearth_aligned_free(x->packed[i]);
    }
}

struct grouped_case {
    hearth_type type;
    bool pack;
    int32_t E, k;
    bool norm;
    bool oai; /* gpt-oss: biases and the clamped SwiGLU */
};

static const struct grouped_case grouped_cases[] = {
    {HEARTH_TYPE_F32, false, 6, 2, true, false},  {HEARTH_TYPE_F16, false, 5, 5, false, false},
    {HEARTH_TYPE_Q8_0, true, 6, 2, false, false}, {HEARTH_TYPE_Q8_0, false, 6, 3, true, false},
    {HEARTH_TYPE_Q4_K, true, 7, 2, true, false},  {HEARTH_TYPE_Q4_K, false, 4, 1, false, false},
    {HEARTH_TYPE_Q5_0, false, 8, 2, true, false}, {HEARTH_TYPE_Q6_K, true, 8, 4, false, false},
    {HEARTH_TYPE_MXFP4, true, 8, 4, true, true}, {HEARTH_TYPE_MXFP4, false, 5, 2, true, true},
    {HEARTH_TYPE_Q8_0, true, 6, 2, true, true},
};

/* The gpt-oss activation of one element, as the backend documents it. */
static float oai_act(float g, float u, float alpha, float limit)
{
    g = fminf(g, limit);
    u = fminf(fmaxf(u, -limit), limit);
    return g / (1.0f + expf(-alpha * g)) * (u + 1.0f);
}

static struct act host_act(float *p, int64_t rows, int64_t width)
{
    struct act a = {p, NULL, rows, width, rows * width};
    return a;
}

START_TEST(test_grouped_equals_one_by_one)
{
    const struct grouped_case *gc = &grouped_cases[_i];
    const int64_t n_embd = 256, n_ff = 256, n_tok = 21;
    struct experts x;
    make_experts(&x, gc->type, gc->E, n_embd, n_ff, gc->pack, 1000 + (uint64_t)_i);
    test_rng rng;
    test_rng_seed(&rng, 4242 + (uint64_t)_i);
    /* gpt-oss: biases of either sign, large enough that some of the gate
     * and up values pass the clamp of 7 (the products are about 1 wide) */
    float *bg = NULL, *bu = NULL, *bd = NULL;
    if (gc->oai) {
        bg = test_malloc((size_t)(gc->E * n_ff) * sizeof(float));
        bu = test_malloc((size_t)(gc->E * n_ff) * sizeof(float));
        bd = test_malloc((size_t)(gc->E * n_embd) * sizeof(float));
        fill_normal(&rng, bg, gc->E * n_ff, 4.0);
        fill_normal(&rng, bu, gc->E * n_ff, 4.0);
        fill_normal(&rng, bd, gc->E * n_embd, 1.0);
    }
    /* DeepSeek's routing for some (sigmoid scores, a selection bias,
     * groups, a scale), so that the weights are not the softmax's */
    float *sel_bias = test_malloc((size_t)gc->E * sizeof(float));
    fill_normal(&rng, sel_bias, gc->E, 0.5);
    const bool ds = _i % 3 == 1;
    const struct moe_experts moe = {
        .route = {.n_expert = gc->E, .n_used = gc->k, .norm_topk = gc->norm,
                  .gating = ds ? MOE_GATING_SIGMOID : MOE_GATING_SOFTMAX, .select_bias = ds ? sel_bias : NULL,
                  .scale = ds ? 2.5f : 1.0f},
        .gate = x.gate, .up = x.up, .down = x.down,
        .gate_bias = bg, .up_bias = bu, .down_bias = bd,
        .act = gc->oai ? MOE_SWIGLU_OAI : MOE_SILU, .alpha = 1.702f, .limit = 7.0f};
    float *in = test_malloc((size_t)(n_tok * n_embd) * sizeof(float));
    float *logits = test_malloc((size_t)(n_tok * gc->E) * sizeof(float));
    fill_normal(&rng, in, n_tok * n_embd, 1.0);
    fill_normal(&rng, logits, n_tok * gc->E, 1.5);
    /* every expert gets at least one row except the last (an idle expert) */
    for (int64_t t = 0; t < n_tok; t++) logits[t * gc->E + gc->E - 1] -= gc->k < gc->E ? 100.0f : 0.0f;
    float *batch = test_malloc((size_t)(n_tok * n_embd) * sizeof(float));
    float *one = test_malloc((size_t)n_embd * sizeof(float));
    float *g = test_malloc((size_t)n_ff * sizeof(float)), *u = test_malloc((size_t)n_ff * sizeof(float));
    float *y = test_malloc((size_t)n_embd * sizeof(float)), *acc = test_malloc((size_t)n_embd * sizeof(float));
    int checked = 0;
    for (int p = 0; p < KERNEL_PATH_COUNT; p++) {
        const hearth_kernels *k = kernel_path_table((kernel_path)p, NULL);
        if (!k) continue;
        /* the packed copies are read only where this path has packed kernels */
        if (gc->pack && !hearth_kernels_read_packed(k, gc->type, n_ff, n_embd)) continue;
        static const int threads[] = {1, 3};
        for (size_t ti = 0; ti < HEARTH_ARRAY_LEN(threads); ti++) {
            struct hearth_backend *be;
            ck_assert_int_eq(backend_cpu_new_with(threads[ti], k, &be), HEARTH_OK);
            const struct backend_ops *op = be->ops;
            struct act a_in = host_act(in, n_tok, n_embd), a_log = host_act(logits, n_tok, gc->E);
            struct act a_out = host_act(batch, n_tok, n_embd);
            ck_assert_int_eq(op->moe_ffn(be, &a_out, &a_in, &a_log, &moe), HEARTH_OK);
            for (int64_t t = 0; t < n_tok; t++) {
                /* the row alone through the op */
                struct act r_in = host_act(in + t * n_embd, 1, n_embd);
                struct act r_log = host_act(logits + t * gc->E, 1, gc->E);
                struct act r_out = host_act(one, 1, n_embd);
                ck_assert_int_eq(op->moe_ffn(be, &r_out, &r_in, &r_log, &moe), HEARTH_OK);
                for (int64_t i = 0; i < n_embd; i++)
                    ck_assert_msg(same_float(one[i], batch[t * n_embd + i]),
                                  "%s %s, %d threads: row %lld alone differs at %lld", k->name,
                                  hearth_type_name(gc->type), threads[ti], (long long)t, (long long)i);
                /* the row through its experts one by one */
                int32_t ids[8];
                float w[8];
                moe_route(&moe.route, logits + t * gc->E, ids, w);
                for (int64_t i = 0; i < n_embd; i++) acc[i] = 0.0f;
                for (int32_t j = 0; j < gc->k; j++) {
                    const int32_t e = ids[j];
                    struct act ag = host_act(g, 1, n_ff), au = host_act(u, 1, n_ff), ay = host_act(y, 1, n_embd);
                    ck_assert_int_eq(op->matmul(be, &ag, &x.gate[e], &r_in), HEARTH_OK);
                    ck_assert_int_eq(op->matmul(be, &au, &x.up[e], &r_in), HEARTH_OK);
                    if (gc->oai)
                        for (int64_t i = 0; i < n_ff; i++)
                            g[i] = oai_act(g[i] + bg[e * n_ff + i], u[i] + bu[e * n_ff + i], 1.702f, 7.0f);
                    else
                        ck_assert_int_eq(op->swiglu(be, &ag, &ag, &au), HEARTH_OK);
                    ck_assert_int_eq(op->matmul(be, &ay, &x.down[e], &ag), HEARTH_OK);
                    if (gc->oai)
                        for (int64_t i = 0; i < n_embd; i++) y[i] += bd[e * n_embd + i];
                    for (int64_t i = 0; i < n_embd; i++) acc[i] = fmaf(w[j], y[i], acc[i]);
                }
                for (int64_t i = 0; i < n_embd; i++)
                    ck_assert_msg(same_float(acc[i], batch[t * n_embd + i]),
                                  "%s %s: row %lld through its experts one by one differs at %lld", k->name,
                                  hearth_type_name(gc->type), (long long)t, (long long)i);
            }
            backend_cpu_free(be);
            checked++;
        }
    }
    ck_assert_int_gt(checked, 0);
    free(in);
    free(logits);
    free(batch);
    free(one);
    free(g);
    free(u);
    free(y);
    free(acc);
    free(bg);
    free(bu);
    free(bd);
    free(sel_bias);
    free_experts(&x);
}
END_TEST

/* ---- models ------------------------------------------------------------------------ */

enum { D = 64, N_HEAD = 4, N_HEAD_KV = 2, N_LAYER = 2, N_VOCAB = 96, N_EXPERT = 4, N_USED = 2, N_FF_EXP = 64,
       N_FF_SH = 96 };

/* What to leave out or break in a model file. */
struct model_spec {
    const char *arch;          /* "qwen2moe" or "llama" */
    hearth_type type;
    const char *drop_key;      /* a metadata suffix left out, or NULL */
    uint32_t used;             /* expert_used_count (0: N_USED) */
    const char *drop_tensor;   /* a tensor of layer 1 left out ("ffn_gate_exps"), or NULL */
    const char *bad_shape;     /* a tensor of layer 1 with one expert too few, or NULL */
    bool split_experts;        /* experts as separate 2-D tensors (an early Mixtral layout) */
};

struct blob {
    void *p[160];
    int n;
};

static void add(hearth_gguf_writer *w, struct blob *b, test_rng *rng, const struct model_spec *s, const char *name,
                int64_t ne0, int64_t ne1, int64_t ne2, bool ones)
{
    if (s->drop_tensor && strstr(name, "blk.1.") && strstr(name, s->drop_tensor) &&
        strstr(name, s->drop_tensor)[strlen(s->drop_tensor)] == '.')
        return;
    if (s->bad_shape && strstr(name, "blk.1.") && strstr(name, s->bad_shape)) ne2--;
    const bool vec = ne1 == 1 && ne2 == 1;
    const hearth_type t = vec || strstr(name, "gate_inp") ? HEARTH_TYPE_F32 : s->type;
    const size_t row = hearth_type_row_bytes(t, ne0);
    const int64_t rows = ne1 * ne2;
    uint8_t *d = test_malloc(row * (size_t)rows);
    float *f = test_malloc((size_t)ne0 * sizeof(float));
    for (int64_t r = 0; r < rows; r++) {
        if (ones) for (int64_t i = 0; i < ne0; i++) f[i] = 1.0f;
        else fill_normal(rng, f, ne0, strstr(name, "output") ? 0.5 : 0.1);
        ck_assert(quant_quantize_row(t, f, d + (size_t)r * row, ne0));
    }
    free(f);
    b->p[b->n++] = d;
    const int64_t ne[3] = {ne0, ne1, ne2};
    ck_assert_int_eq(hearth_gguf_writer_add_tensor(w, name, t, ne2 > 1 ? 3 : vec ? 1 : 2, ne, d,
                                                   row * (size_t)rows), HEARTH_OK);
}

static void write_model(const char *path, const struct model_spec *s)
{
    hearth_gguf_writer *w;
    ck_assert_int_eq(hearth_gguf_writer_new(&w), HEARTH_OK);
    const bool qwen = strcmp(s->arch, "qwen2moe") == 0;
    const int64_t n_ff = qwen ? 128 : N_FF_EXP;
    char key[128];
#define U32(suffix, v) \
    do { \
        if (!s->drop_key || strcmp(s->drop_key, suffix) != 0) { \
            snprintf(key, sizeof key, "%s.%s", s->arch, suffix); \
            ck_assert_int_eq(hearth_gguf_writer_set_u32(w, key, v), HEARTH_OK); \
        } \
    } while (0)
    ck_assert_int_eq(hearth_gguf_writer_set_str(w, "general.architecture", s->arch), HEARTH_OK);
    U32("context_length", 256);
    U32("embedding_length", D);
    U32("block_count", N_LAYER);
    U32("feed_forward_length", (uint32_t)n_ff);
    U32("attention.head_count", N_HEAD);
    U32("attention.head_count_kv", N_HEAD_KV);
    U32("expert_count", N_EXPERT);
    U32("expert_used_count", s->used ? s->used : N_USED);
    if (qwen) {
        U32("expert_feed_forward_length", N_FF_EXP);
        U32("expert_shared_feed_forward_length", N_FF_SH);
    }
#undef U32
    test_rng rng;
    test_rng_seed(&rng, 99);
    struct blob b = {.n = 0};
    add(w, &b, &rng, s, "token_embd.weight", D, N_VOCAB, 1, false);
    add(w, &b, &rng, s, "output_norm.weight", D, 1, 1, true);
    add(w, &b, &rng, s, "output.weight", D, N_VOCAB, 1, false);
    for (int il = 0; il < N_LAYER; il++) {
        char name[96];
#define T(suffix, ne0, ne1, ne2, ones) \
    do { \
        snprintf(name, sizeof name, "blk.%d.%s", il, suffix); \
        add(w, &b, &rng, s, name, ne0, ne1, ne2, ones); \
    } while (0)
        T("attn_norm.weight", D, 1, 1, true);
        T("attn_q.weight", D, D, 1, false);
        T("attn_k.weight", D, D / N_HEAD * N_HEAD_KV, 1, false);
        T("attn_v.weight", D, D / N_HEAD * N_HEAD_KV, 1, false);
        if (qwen) {
            T("attn_q.bias", D, 1, 1, false);
            T("attn_k.bias", D / N_HEAD * N_HEAD_KV, 1, 1, false);
            T("attn_v.bias", D / N_HEAD * N_HEAD_KV, 1, 1, false);
        }
        T("attn_output.weight", D, D, 1, false);
        T("ffn_norm.weight", D, 1, 1, true);
        T("ffn_gate_inp.weight", D, N_EXPERT, 1, false);
        if (s->split_experts) {
            for (int e = 0; e < N_EXPERT; e++) {
                char sfx[64];
                snprintf(sfx, sizeof sfx, "ffn_gate.%d.weight", e);
                T(sfx, D, N_FF_EXP, 1, false);
            }
        } else {
            T("ffn_gate_exps.weight", D, N_FF_EXP, N_EXPERT, false);
            T("ffn_up_exps.weight", D, N_FF_EXP, N_EXPERT, false);
            T("ffn_down_exps.weight", N_FF_EXP, D, N_EXPERT, false);
        }
        if (qwen) {
            T("ffn_gate_inp_shexp.weight", D, 1, 1, false);
            T("ffn_gate_shexp.weight", D, N_FF_SH, 1, false);
            T("ffn_up_shexp.weight", D, N_FF_SH, 1, false);
            T("ffn_down_shexp.weight", N_FF_SH, D, 1, false);
        }
#undef T
    }
    ck_assert_int_eq(hearth_gguf_writer_write(w, path), HEARTH_OK);
    hearth_gguf_writer_free(w);
    for (int i = 0; i < b.n; i++) free(b.p[i]);
}

static const struct model_spec good_models[] = {
    /* the first of each architecture is checked for offload refusal */
    {"qwen2moe", HEARTH_TYPE_F32, NULL, 0, NULL, NULL, false},
    {"qwen2moe", HEARTH_TYPE_Q8_0, NULL, 0, NULL, NULL, false},
    {"llama", HEARTH_TYPE_F32, NULL, 0, NULL, NULL, false},
    {"llama", HEARTH_TYPE_Q4_0, NULL, 0, NULL, NULL, false},
};

/* A prompt as one batch and decoded one token at a time: the same bits. */
START_TEST(test_prefill_equals_decode)
{
    const char *path = test_temp_path("moe");
    write_model(path, &good_models[_i]);
    hearth_model *m;
    ck_assert_int_eq(hearth_model_load(path, NULL, &m), HEARTH_OK);
    ck_assert_str_eq(hearth_model_arch(m), good_models[_i].arch);
    enum { N = 23 };
    int32_t tokens[N];
    for (int i = 0; i < N; i++) tokens[i] = (i * 37 + 5) % N_VOCAB;
    hearth_context_params cp;
    hearth_context_default_params(&cp);
    cp.n_ctx = 64;
    cp.n_threads = 2;
    hearth_context *a, *b;
    ck_assert_int_eq(hearth_context_new(m, &cp, &a), HEARTH_OK);
    ck_assert_int_eq(hearth_context_new(m, &cp, &b), HEARTH_OK);
    ck_assert_int_eq(hearth_eval(a, tokens, N, N), HEARTH_OK);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(hearth_eval(b, tokens + i, 1, 1), HEARTH_OK);
        const float *la = hearth_context_logits(a, i), *lb = hearth_context_logits(b, 0);
        bool finite = true;
        for (int v = 0; v < N_VOCAB; v++) finite = finite && isfinite(la[v]);
        ck_assert(finite);
        ck_assert_msg(memcmp(la, lb, N_VOCAB * sizeof(float)) == 0, "%s: position %d: prefill and decode differ",
                      good_models[_i].arch, i);
    }
    hearth_context_free(a);
    hearth_context_free(b);
    hearth_model_free(m);
    unlink(path);
}
END_TEST

struct bad_case {
    struct model_spec spec;
    const char *message; /* expected in the error */
};

static const struct bad_case bad_models[] = {
    {{"qwen2moe", HEARTH_TYPE_F32, "expert_count", 0, NULL, NULL, false}, "'qwen2moe.expert_count' is missing"},
    {{"qwen2moe", HEARTH_TYPE_F32, "expert_used_count", 0, NULL, NULL, false},
     "'qwen2moe.expert_used_count' is missing"},
    {{"llama", HEARTH_TYPE_F32, "expert_used_count", 0, NULL, NULL, false}, "'llama.expert_used_count' is missing"},
    {{"qwen2moe", HEARTH_TYPE_F32, NULL, 9, NULL, NULL, false}, "'qwen2moe.expert_used_count' = 9 is out of range"},
    {{"qwen2moe", HEARTH_TYPE_F32, NULL, 0, "ffn_gate_exps", NULL, false},
     "tensor 'blk.1.ffn_gate_exps.weight' is missing"},
    {{"llama", HEARTH_TYPE_F32, NULL, 0, "ffn_down_exps", NULL, false},
     "tensor 'blk.1.ffn_down_exps.weight' is missing"},
    {{"qwen2moe", HEARTH_TYPE_F32, NULL, 0, "ffn_gate_inp", NULL, false},
     "tensor 'blk.1.ffn_gate_inp.weight' is missing"},
    {{"qwen2moe", HEARTH_TYPE_F32, NULL, 0, "ffn_gate_inp_shexp", NULL, false},
     "tensor 'blk.1.ffn_gate_inp_shexp.weight' is missing"},
    {{"qwen2moe", HEARTH_TYPE_F32, NULL, 0, "ffn_down_shexp", NULL, false},
     "tensor 'blk.1.ffn_down_shexp.weight' is missing"},
    {{"qwen2moe", HEARTH_TYPE_F32, NULL, 0, NULL, "ffn_up_exps", false},
     "tensor 'blk.1.ffn_up_exps.weight' has shape 64 x 64 x 3 x 1, expected 64 x 64 x 4"},
    {{"llama", HEARTH_TYPE_F32, NULL, 0, NULL, NULL, true}, "the experts are stored one tensor each"},
};

START_TEST(test_bad_model)
{
    const struct bad_case *bc = &bad_models[_i];
    const char *path = test_temp_path("moe");
    write_model(path, &bc->spec);
    hearth_model *m = NULL;
    ck_assert_int_ne(hearth_model_load(path, NULL, &m), HEARTH_OK);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(hearth_last_error(), bc->message), "error '%s' does not say '%s'", hearth_last_error(),
                  bc->message);
    unlink(path);
}
END_TEST

START_TEST(test_offload_refused)
{
    const char *path = test_temp_path("moe");
    write_model(path, &good_models[_i == 0 ? 0 : 2]);
    hearth_model_params mp;
    hearth_model_default_params(&mp);
    mp.n_gpu_layers = 99;
    hearth_model *m = NULL;
    ck_assert_int_eq(hearth_model_load(path, &mp, &m), HEARTH_E_UNSUPPORTED);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(hearth_last_error(), "mixture-of-experts"), "%s", hearth_last_error());
    mp.gpu_fallback = true;
    ck_assert_int_eq(hearth_model_load(path, &mp, &m), HEARTH_OK);
    ck_assert_int_eq(hearth_model_n_gpu_layers(m), 0);
    ck_assert(strstr(hearth_model_gpu_fallback(m), "mixture-of-experts"));
    hearth_model_free(m);
    unlink(path);
}
END_TEST

static Suite *moe_suite(void)
{
    Suite *s = suite_create("moe");
    TCase *tc = tcase_create("routing");
    tcase_set_timeout(tc, 300); /* every kernel path, the scalar one included */
    tcase_add_test(tc, test_route);
    tcase_add_test(tc, test_route_deepseek);
    tcase_add_loop_test(tc, test_grouped_equals_one_by_one, 0, (int)HEARTH_ARRAY_LEN(grouped_cases));
    suite_add_tcase(s, tc);
    TCase *models = tcase_create("models");
    tcase_set_timeout(models, 120);
    tcase_add_loop_test(models, test_prefill_equals_decode, 0, (int)HEARTH_ARRAY_LEN(good_models));
    tcase_add_loop_test(models, test_bad_model, 0, (int)HEARTH_ARRAY_LEN(bad_models));
    tcase_add_loop_test(models, test_offload_refused, 0, 2);
    suite_add_tcase(s, models);
    return s;
}

int main(void)
{
    return test_run_suite(moe_suite());
}

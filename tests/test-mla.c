/*
 * test-mla.c -- the operations of multi-head latent attention
 * (models/deepseek2.c) and DeepSeek's routing.
 *
 * - matmul_heads, the products per head that map queries into the latent
 *   space and the latent outputs back: every head's outputs equal bit for
 *   bit the same head's slice run through matmul alone (each output is one
 *   dot product in the kernels' order), with the other columns of the
 *   output untouched; float and quantized heads, ragged row counts and
 *   strides, one to three threads, on every kernel path this CPU runs.
 * - copy_heads: the slices land where they should, nothing else moves.
 * - Models: micro deepseek2 files written here (with and without low-rank
 *   queries, softmax and sigmoid routing with groups, YaRN, F32 and Q8_0
 *   weights): a prompt as one batch gives the logits of the same tokens
 *   decoded one at a time, bit for bit, for every cache type; the
 *   context's cache is the latent's n_ctx x layers x (kv_lora_rank +
 *   rotary dims) elements, no values apart; files with missing,
 *   inconsistent or out-of-range metadata, tensors of the wrong shape, or
 *   the fused attn_kv_b of older conversions are refused, naming what is
 *   wrong.
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

/* n_heads matrices of n_out x n_in of type t, one allocation as the
 * slices of a 3-D tensor. */
static void *make_heads(test_rng *rng, struct weight *w, int32_t n_heads, hearth_type t, int64_t n_in, int64_t n_out)
{
    const size_t row = hearth_type_row_bytes(t, n_in);
    uint8_t *d = test_malloc(row * (size_t)n_out * (size_t)n_heads);
    float *f = test_malloc((size_t)n_in * sizeof(float));
    for (int64_t r = 0; r < n_out * n_heads; r++) {
        fill_normal(rng, f, n_in, 0.1);
        ck_assert(quant_quantize_row(t, f, d + (size_t)r * row, n_in));
    }
    free(f);
    for (int32_t h = 0; h < n_heads; h++)
        w[h] = (struct weight){.name = "blk.0.attn_k_b.weight", .type = t, .n_in = n_in, .n_out = n_out,
                               .row_bytes = row, .data = d + (size_t)h * row * (size_t)n_out};
    return d;
}

struct heads_case {
    hearth_type type;
    int32_t n_heads;
    int64_t n_in, n_out;
    int64_t in_stride, in_first, out_stride, out_first;
};

static const struct heads_case heads_cases[] = {
    /* DeepSeek's absorption (q_nope 128 -> latent 512, into [rope | latent]
     * rows of 576) and its way back (latent 512 -> values of 128), scaled
     * down, and ragged float ones */
    {HEARTH_TYPE_F32, 4, 32, 64, 48, 0, 80, 16},
    {HEARTH_TYPE_F16, 3, 64, 16, 64, 0, 16, 0},
    {HEARTH_TYPE_Q8_0, 5, 64, 128, 96, 0, 160, 32},
    {HEARTH_TYPE_Q8_0, 2, 128, 40, 128, 0, 40, 0},
    {HEARTH_TYPE_F32, 3, 7, 13, 9, 2, 17, 3},
    {HEARTH_TYPE_F16, 6, 5, 3, 11, 6, 3, 0},
    {HEARTH_TYPE_Q4_0, 2, 64, 24, 70, 6, 30, 5},
};

static bool same_bits(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof(float)) == 0;
}

static void check_heads(const hearth_kernels *kernels, const char *path, const struct heads_case *hc, int n_threads,
                        int64_t n_tok, uint64_t seed)
{
    struct hearth_backend *be;
    ck_assert_int_eq(backend_cpu_new_with(n_threads, kernels, &be), HEARTH_OK);
    test_rng rng;
    test_rng_seed(&rng, seed);
    struct weight w[8];
    void *mem = make_heads(&rng, w, hc->n_heads, hc->type, hc->n_in, hc->n_out);
    const int64_t in_width = (hc->n_heads - 1) * hc->in_stride + hc->in_first + hc->n_in + 3;
    const int64_t out_width = hc->n_heads * hc->out_stride;
    struct act in, out, x, y;
    ck_assert_int_eq(be->ops->act_alloc(be, &in, n_tok, in_width), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &out, n_tok, out_width), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &x, n_tok, hc->n_in), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &y, n_tok, hc->n_out), HEARTH_OK);
    fill_normal(&rng, in.host, n_tok * in_width, 1.0);
    in.rows = n_tok;
    /* a pattern in the columns the op must leave alone */
    for (int64_t i = 0; i < n_tok * out_width; i++) out.host[i] = (float)i;
    out.rows = n_tok;
    out.width = out_width;
    ck_assert_int_eq(be->ops->matmul_heads(be, &out, hc->out_stride, hc->out_first, w, hc->n_heads, &in,
                                           hc->in_stride, hc->in_first),
                     HEARTH_OK);
    ck_assert_int_eq(out.rows, n_tok);
    ck_assert_int_eq(out.width, out_width);
    for (int32_t h = 0; h < hc->n_heads; h++) {
        for (int64_t t = 0; t < n_tok; t++)
            memcpy(x.host + t * hc->n_in, in.host + t * in_width + h * hc->in_stride + hc->in_first,
                   (size_t)hc->n_in * sizeof(float));
        x.rows = n_tok;
        x.width = hc->n_in;
        ck_assert_int_eq(be->ops->matmul(be, &y, &w[h], &x), HEARTH_OK);
        for (int64_t t = 0; t < n_tok; t++) {
            const float *row = out.host + t * out_width + h * hc->out_stride;
            ck_assert_msg(same_bits(row + hc->out_first, y.host + t * hc->n_out, (size_t)hc->n_out),
                          "%s, %s, %d threads, %lld rows: head %d row %lld differs from its own product", path,
                          hearth_type_name(hc->type), n_threads, (long long)n_tok, h, (long long)t);
            for (int64_t i = 0; i < hc->out_stride; i++)
                if (i < hc->out_first || i >= hc->out_first + hc->n_out)
                    ck_assert_msg(row[i] == (float)(t * out_width + h * hc->out_stride + i),
                                  "head %d row %lld: column %lld was written", h, (long long)t, (long long)i);
        }
    }
    be->ops->act_free(be, &in);
    be->ops->act_free(be, &out);
    be->ops->act_free(be, &x);
    be->ops->act_free(be, &y);
    free(mem);
    backend_cpu_free(be);
}

START_TEST(test_matmul_heads)
{
    const struct heads_case *hc = &heads_cases[_i];
    static const int64_t tokens[] = {1, 2, 5, 13, 40};
    for (int p = 0; p < KERNEL_PATH_COUNT; p++) {
        const hearth_kernels *kernels = kernel_path_table((kernel_path)p, NULL);
        if (!kernels) continue;
        for (int n_threads = 1; n_threads <= 3; n_threads += 2)
            for (size_t t = 0; t < HEARTH_ARRAY_LEN(tokens); t++)
                check_heads(kernels, kernel_path_name((kernel_path)p), hc, n_threads, tokens[t],
                            100 * (uint64_t)_i + t);
    }
}
END_TEST

START_TEST(test_copy_heads)
{
    struct hearth_backend *be;
    ck_assert_int_eq(backend_cpu_new(1, &be), HEARTH_OK);
    enum { ROWS = 3, HEADS = 4, SRC = 10, DST = 7 };
    struct act src, dst;
    ck_assert_int_eq(be->ops->act_alloc(be, &src, ROWS, HEADS * SRC), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &dst, ROWS, HEADS * DST), HEARTH_OK);
    for (int i = 0; i < ROWS * HEADS * SRC; i++) src.host[i] = (float)i;
    for (int i = 0; i < ROWS * HEADS * DST; i++) dst.host[i] = -1.0f;
    src.rows = ROWS;
    /* elements 6 .. 8 of each source head to 2 .. 4 of each destination head */
    ck_assert_int_eq(be->ops->copy_heads(be, &dst, DST, 2, &src, SRC, 6, HEADS, 3), HEARTH_OK);
    ck_assert_int_eq(dst.rows, ROWS);
    ck_assert_int_eq(dst.width, HEADS * DST);
    for (int t = 0; t < ROWS; t++)
        for (int h = 0; h < HEADS; h++)
            for (int i = 0; i < DST; i++) {
                const float want = i >= 2 && i < 5 ? (float)(t * HEADS * SRC + h * SRC + 6 + i - 2) : -1.0f;
                ck_assert_msg(dst.host[t * HEADS * DST + h * DST + i] == want, "row %d head %d element %d", t, h, i);
            }
    /* a slice past the source's rows is refused */
    ck_assert_int_eq(be->ops->copy_heads(be, &dst, DST, 0, &src, SRC, 8, HEADS, 3), HEARTH_E_INTERNAL);
    be->ops->act_free(be, &src);
    be->ops->act_free(be, &dst);
    backend_cpu_free(be);
}
END_TEST

/* ---- models ------------------------------------------------------------------------ */

/* A micro deepseek2: 2 layers of 64 (the first dense), 4 heads of 32 +
 * 32 over a latent of 32, values of 32, 8 experts (2 used) of 32 and one
 * shared expert. */
enum { D = 64, N_HEAD = 4, N_LAYER = 2, N_VOCAB = 96, LAT = 32, ROT = 32, NOPE = 32, DV = 32, Q_LORA = 64,
       N_EXPERT = 8, N_USED = 2, N_FF = 96, N_FF_EXP = 32 };

/* What a model file has and what is wrong with it. */
struct ds_spec {
    hearth_type type;
    bool q_lora;               /* low-rank queries (attn_q_a, attn_q_b) */
    bool sigmoid;              /* sigmoid routing with exp_probs_b and 4 groups (2 used) */
    bool yarn;                 /* YaRN 4 over 16 with mscale_all_dim 0.707 */
    const char *drop_key;      /* a metadata suffix left out, or NULL */
    const char *set_key;       /* a u32 metadata suffix set to set_value, or NULL */
    uint32_t set_value;
    bool fused_kv_b;           /* attn_kv_b instead of attn_k_b and attn_v_b */
    const char *bad_shape;     /* a 3-D tensor of layer 1 with one head too few, or NULL */
    const char *drop_tensor;   /* a tensor suffix of layer 1 left out, or NULL */
    float weights_scale;       /* expert_weights_scale (0: 2.5) */
};

struct blob {
    void *p[96];
    int n;
};

static void add(hearth_gguf_writer *w, struct blob *b, test_rng *rng, const struct ds_spec *s, const char *name,
                int64_t ne0, int64_t ne1, int64_t ne2, bool ones)
{
    if (s->drop_tensor && strstr(name, "blk.1.") && strstr(name, s->drop_tensor)) return;
    if (s->bad_shape && strstr(name, "blk.1.") && strstr(name, s->bad_shape)) ne2--;
    const bool vec = ne1 == 1 && ne2 == 1;
    const hearth_type t = vec || strstr(name, "gate_inp") ? HEARTH_TYPE_F32 : s->type;
    const size_t row = hearth_type_row_bytes(t, ne0);
    const int64_t rows = ne1 * ne2;
    uint8_t *d = test_malloc(row * (size_t)rows);
    float *f = test_malloc((size_t)ne0 * sizeof(float));
    for (int64_t r = 0; r < rows; r++) {
        if (ones) for (int64_t i = 0; i < ne0; i++) f[i] = 1.0f + 0.2f * (float)test_rng_normal(rng);
        else fill_normal(rng, f, ne0, strstr(name, "output") ? 0.5 : 0.15);
        ck_assert(quant_quantize_row(t, f, d + (size_t)r * row, ne0));
    }
    free(f);
    ck_assert_int_lt(b->n, (int)HEARTH_ARRAY_LEN(b->p));
    b->p[b->n++] = d;
    const int64_t ne[3] = {ne0, ne1, ne2};
    ck_assert_int_eq(hearth_gguf_writer_add_tensor(w, name, t, ne2 > 1 ? 3 : vec ? 1 : 2, ne, d, row * (size_t)rows),
                     HEARTH_OK);
}

static void write_model(const char *path, const struct ds_spec *s)
{
    hearth_gguf_writer *w;
    ck_assert_int_eq(hearth_gguf_writer_new(&w), HEARTH_OK);
    char key[128];
#define U32(suffix, v) \
    do { \
        if (!s->drop_key || strcmp(s->drop_key, suffix) != 0) { \
            snprintf(key, sizeof key, "deepseek2.%s", suffix); \
            const uint32_t value_ = s->set_key && strcmp(s->set_key, suffix) == 0 ? s->set_value : (uint32_t)(v); \
            ck_assert_int_eq(hearth_gguf_writer_set_u32(w, key, value_), HEARTH_OK); \
        } \
    } while (0)
#define F32(suffix, v) \
    do { \
        snprintf(key, sizeof key, "deepseek2.%s", suffix); \
        ck_assert_int_eq(hearth_gguf_writer_set_f32(w, key, v), HEARTH_OK); \
    } while (0)
    ck_assert_int_eq(hearth_gguf_writer_set_str(w, "general.architecture", "deepseek2"), HEARTH_OK);
    U32("context_length", 256);
    U32("embedding_length", D);
    U32("block_count", N_LAYER);
    U32("feed_forward_length", N_FF);
    U32("attention.head_count", N_HEAD);
    U32("attention.head_count_kv", 1);
    U32("attention.kv_lora_rank", LAT);
    U32("attention.q_lora_rank", s->q_lora ? Q_LORA : 0);
    U32("attention.key_length", LAT + ROT);
    U32("attention.value_length", LAT);
    U32("attention.key_length_mla", NOPE + ROT);
    U32("attention.value_length_mla", DV);
    U32("rope.dimension_count", ROT);
    U32("leading_dense_block_count", 1);
    U32("expert_count", N_EXPERT);
    U32("expert_used_count", N_USED);
    U32("expert_feed_forward_length", N_FF_EXP);
    U32("expert_shared_count", 1);
    U32("expert_gating_func", s->sigmoid ? 2 : 1);
    if (s->sigmoid) {
        U32("expert_group_count", 4);
        U32("expert_group_used_count", 2);
    } else if (s->set_key && strncmp(s->set_key, "expert_group", 12) == 0) {
        U32(s->set_key, s->set_value);
    }
    F32("expert_weights_scale", s->weights_scale != 0.0f ? s->weights_scale : 2.5f);
    F32("attention.layer_norm_rms_epsilon", 1e-6f);
    if (s->yarn) {
        ck_assert_int_eq(hearth_gguf_writer_set_str(w, "deepseek2.rope.scaling.type", "yarn"), HEARTH_OK);
        F32("rope.scaling.factor", 4.0f);
        U32("rope.scaling.original_context_length", 16);
        F32("rope.scaling.yarn_log_multiplier", 0.0707f);
    }
#undef U32
#undef F32
    test_rng rng;
    test_rng_seed(&rng, 1234);
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
        if (s->q_lora) {
            T("attn_q_a.weight", D, Q_LORA, 1, false);
            T("attn_q_a_norm.weight", Q_LORA, 1, 1, true);
            T("attn_q_b.weight", Q_LORA, N_HEAD * (NOPE + ROT), 1, false);
        } else {
            T("attn_q.weight", D, N_HEAD * (NOPE + ROT), 1, false);
        }
        T("attn_kv_a_mqa.weight", D, LAT + ROT, 1, false);
        T("attn_kv_a_norm.weight", LAT, 1, 1, true);
        if (s->fused_kv_b) {
            T("attn_kv_b.weight", LAT, N_HEAD * (NOPE + DV), 1, false);
        } else {
            T("attn_k_b.weight", NOPE, LAT, N_HEAD, false);
            T("attn_v_b.weight", LAT, DV, N_HEAD, false);
        }
        T("attn_output.weight", N_HEAD * DV, D, 1, false);
        T("ffn_norm.weight", D, 1, 1, true);
        if (il == 0) {
            T("ffn_gate.weight", D, N_FF, 1, false);
            T("ffn_up.weight", D, N_FF, 1, false);
            T("ffn_down.weight", N_FF, D, 1, false);
            continue;
        }
        T("ffn_gate_inp.weight", D, N_EXPERT, 1, false);
        if (s->sigmoid) T("exp_probs_b.bias", N_EXPERT, 1, 1, false);
        T("ffn_gate_exps.weight", D, N_FF_EXP, N_EXPERT, false);
        T("ffn_up_exps.weight", D, N_FF_EXP, N_EXPERT, false);
        T("ffn_down_exps.weight", N_FF_EXP, D, N_EXPERT, false);
        T("ffn_gate_shexp.weight", D, N_FF_EXP, 1, false);
        T("ffn_up_shexp.weight", D, N_FF_EXP, 1, false);
        T("ffn_down_shexp.weight", N_FF_EXP, D, 1, false);
#undef T
    }
    ck_assert_int_eq(hearth_gguf_writer_write(w, path), HEARTH_OK);
    hearth_gguf_writer_free(w);
    for (int i = 0; i < b.n; i++) free(b.p[i]);
}

static const struct ds_spec good_models[] = {
    {.type = HEARTH_TYPE_F32},
    {.type = HEARTH_TYPE_F32, .q_lora = true, .sigmoid = true, .yarn = true},
    {.type = HEARTH_TYPE_Q8_0, .q_lora = true, .sigmoid = true},
    {.type = HEARTH_TYPE_F16, .yarn = true},
};

/* A prompt as one batch and decoded one token at a time: the same bits,
 * on every cache type; the cache holds the latent and the rotary key. */
START_TEST(test_prefill_equals_decode)
{
    const char *path = test_temp_path("mla");
    write_model(path, &good_models[_i]);
    hearth_model *m;
    ck_assert_msg(hearth_model_load(path, NULL, &m) == HEARTH_OK, "%s", hearth_last_error());
    ck_assert_str_eq(hearth_model_arch(m), "deepseek2");
    enum { N = 70 };
    int32_t tokens[N];
    for (int i = 0; i < N; i++) tokens[i] = (i * 37 + 5) % N_VOCAB;
    static const hearth_type caches[] = {HEARTH_TYPE_F32, HEARTH_TYPE_F16, HEARTH_TYPE_Q8_0};
    for (size_t c = 0; c < HEARTH_ARRAY_LEN(caches); c++) {
        hearth_context_params cp;
        hearth_context_default_params(&cp);
        cp.n_ctx = 128;
        cp.n_threads = 2;
        cp.cache_type = caches[c];
        hearth_context *a, *b;
        ck_assert_int_eq(hearth_context_new(m, &cp, &a), HEARTH_OK);
        ck_assert_int_eq(hearth_context_new(m, &cp, &b), HEARTH_OK);
        ck_assert_uint_eq(hearth_context_kv_bytes(a),
                          128 * N_LAYER * hearth_type_row_bytes(caches[c], LAT + ROT));
        ck_assert_int_eq(hearth_eval(a, tokens, N, N), HEARTH_OK);
        for (int i = 0; i < N; i++) {
            ck_assert_int_eq(hearth_eval(b, tokens + i, 1, 1), HEARTH_OK);
            const float *la = hearth_context_logits(a, i), *lb = hearth_context_logits(b, 0);
            bool finite = true;
            for (int v = 0; v < N_VOCAB; v++) finite = finite && isfinite(la[v]);
            ck_assert(finite);
            ck_assert_msg(memcmp(la, lb, N_VOCAB * sizeof(float)) == 0,
                          "model %d, %s cache: position %d: prefill and decode differ", _i,
                          hearth_type_name(caches[c]), i);
        }
        hearth_context_free(a);
        hearth_context_free(b);
    }
    hearth_model_free(m);
    unlink(path);
}
END_TEST

struct bad_case {
    struct ds_spec spec;
    const char *message; /* expected in the error */
};

static const struct bad_case bad_models[] = {
    {{.type = HEARTH_TYPE_F32, .drop_key = "attention.key_length_mla", .fused_kv_b = true},
     "convert the model again with a current converter"},
    {{.type = HEARTH_TYPE_F32, .drop_key = "attention.key_length_mla"},
     "'deepseek2.attention.key_length_mla' is missing"},
    {{.type = HEARTH_TYPE_F32, .drop_key = "attention.kv_lora_rank"}, "'deepseek2.attention.kv_lora_rank' is missing"},
    {{.type = HEARTH_TYPE_F32, .drop_key = "attention.value_length_mla"},
     "'deepseek2.attention.value_length_mla' is missing"},
    {{.type = HEARTH_TYPE_F32, .set_key = "attention.kv_lora_rank", .set_value = 100000},
     "'deepseek2.attention.kv_lora_rank' = 100000 is out of range"},
    {{.type = HEARTH_TYPE_F32, .set_key = "attention.key_length", .set_value = 100},
     "latent attention's cache is one key/value head of 64"},
    {{.type = HEARTH_TYPE_F32, .set_key = "attention.head_count_kv", .set_value = 2},
     "but the file says head_count_kv 2, key_length 64"},
    {{.type = HEARTH_TYPE_F32, .set_key = "rope.dimension_count", .set_value = 64},
     "RoPE dimension count 64 must be even and below the query/key head length 64"},
    {{.type = HEARTH_TYPE_F32, .set_key = "attention.q_lora_rank", .set_value = 64},
     "'deepseek2.attention.q_lora_rank' gives the queries a low-rank path but the file has no 'attn_q_a'"},
    {{.type = HEARTH_TYPE_F32, .set_key = "leading_dense_block_count", .set_value = 5},
     "'deepseek2.leading_dense_block_count' = 5 is more than the 2 layers"},
    {{.type = HEARTH_TYPE_F32, .drop_key = "expert_shared_count"}, "'deepseek2.expert_shared_count' is missing"},
    {{.type = HEARTH_TYPE_F32, .set_key = "expert_gating_func", .set_value = 3},
     "'deepseek2.expert_gating_func' = 3 is not supported"},
    {{.type = HEARTH_TYPE_F32, .set_key = "expert_group_count", .set_value = 3},
     "'deepseek2.expert_group_count' = 3 does not divide the 8 experts"},
    {{.type = HEARTH_TYPE_F32, .sigmoid = true, .set_key = "expert_group_used_count", .set_value = 5},
     "'deepseek2.expert_group_used_count' = 5 is out of range"},
    {{.type = HEARTH_TYPE_F32, .set_key = "expert_group_count", .set_value = 4},
     "'deepseek2.expert_group_used_count' is missing (4 expert groups)"},
    {{.type = HEARTH_TYPE_F32, .weights_scale = -1.0f}, "'deepseek2.expert_weights_scale' = -1 is out of range"},
    {{.type = HEARTH_TYPE_F32, .bad_shape = "attn_k_b"},
     "tensor 'blk.1.attn_k_b.weight' has shape 32 x 32 x 3 x 1, expected 32 x 32 x 4 (one matrix per head)"},
    {{.type = HEARTH_TYPE_F32, .drop_tensor = "attn_v_b"}, "tensor 'blk.1.attn_v_b.weight' is missing"},
    {{.type = HEARTH_TYPE_F32, .drop_tensor = "attn_kv_a_norm"}, "tensor 'blk.1.attn_kv_a_norm.weight' is missing"},
};

START_TEST(test_bad_model)
{
    const struct bad_case *bc = &bad_models[_i];
    const char *path = test_temp_path("mla");
    write_model(path, &bc->spec);
    hearth_model *m = NULL;
    ck_assert_int_ne(hearth_model_load(path, NULL, &m), HEARTH_OK);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(hearth_last_error(), bc->message), "error '%s' does not say '%s'", hearth_last_error(),
                  bc->message);
    unlink(path);
}
END_TEST

static Suite *mla_suite(void)
{
    Suite *s = suite_create("mla");
    TCase *tc = tcase_create("operations");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_matmul_heads, 0, (int)HEARTH_ARRAY_LEN(heads_cases));
    tcase_add_test(tc, test_copy_heads);
    suite_add_tcase(s, tc);
    TCase *models = tcase_create("models");
    tcase_set_timeout(models, 120);
    tcase_add_loop_test(models, test_prefill_equals_decode, 0, (int)HEARTH_ARRAY_LEN(good_models));
    tcase_add_loop_test(models, test_bad_model, 0, (int)HEARTH_ARRAY_LEN(bad_models));
    suite_add_tcase(s, models);
    return s;
}

int main(void)
{
    return test_run_suite(mla_suite());
}

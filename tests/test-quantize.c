/*
 * test-quantize.c -- model quantization (hearth_quantize_model and its
 * recipes).
 *
 * - The shared micro models in F32, quantized with each recipe the shared
 *   files were made with, give every tensor the type the common GGUF
 *   tooling gave it, the same general.file_type, the rest of the metadata
 *   unchanged, tensors within the error bounds of test-quant.c, and a file
 *   the engine loads and runs.
 * - The layer rules of the _S and _M recipes on synthetic models of 16
 *   and 32 layers, written out here from the documented rules; grouped
 *   query attention for Q2_K; fallbacks for rows that do not fill a block.
 * - Already quantized input is converted again; tensors already of their
 *   type are copied; the result does not depend on the thread count.
 * - Errors: unknown recipes and types, bad parameters, interruption (no
 *   file left behind), unreadable input.
 */
#include "internal.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "quant.h"
#include "quant_bounds.h"
#include "testutil.h"

/* ------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------ */

static char tmp_dir[64];

static void make_tmp_dir(void)
{
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/hearth-test-quantize.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmp_dir));
}

/* Remove the directory and the files in it. */
static void remove_tmp_dir(void)
{
    DIR *d = opendir(tmp_dir);
    if (!d) return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(path, sizeof path, "%s/%s", tmp_dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(tmp_dir);
}

static int count_files(void)
{
    DIR *d = opendir(tmp_dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    closedir(d);
    return n;
}

/* A path in the temporary directory; eight can be held at once. */
static const char *tmp_path(const char *name)
{
    static char paths[8][256];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, sizeof paths[0], "%s/%s", tmp_dir, name);
    return path;
}

static const char *shared_model(const char *name)
{
    char rel[128];
    snprintf(rel, sizeof rel, "models/%s.gguf", name);
    const char *path = test_data_path(rel);
    ck_assert_msg(path != NULL, "missing %s", rel);
    return path;
}

static void quantize(const char *in, const char *out, hearth_ftype ftype, int threads)
{
    hearth_quantize_params p;
    hearth_quantize_default_params(&p);
    p.ftype = ftype;
    p.n_threads = threads;
    hearth_status st = hearth_quantize_model(in, out, &p);
    ck_assert_msg(st == HEARTH_OK, "%s -> %s (%s): %s", in, out, hearth_ftype_name(ftype),
                  hearth_last_error());
}

static hearth_gguf *open_gguf(const char *path)
{
    hearth_gguf *g;
    ck_assert_msg(hearth_gguf_open(path, &g) == HEARTH_OK, "%s", hearth_last_error());
    return g;
}

static int64_t n_elems(const hearth_gguf_tensor *t)
{
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

/* A tensor as floats (malloc'ed). */
static float *to_float(const hearth_gguf_tensor *t)
{
    const int64_t n = n_elems(t), rows = n / t->ne[0];
    const size_t row_bytes = hearth_type_row_bytes(t->type, t->ne[0]);
    float *y = malloc((size_t)n * sizeof *y);
    ck_assert_ptr_nonnull(y);
    for (int64_t r = 0; r < rows; r++)
        ck_assert(quant_dequantize_row(t->type, (const uint8_t *)t->data + r * row_bytes,
                                       y + r * t->ne[0], t->ne[0]));
    return y;
}

/* The relative RMSE of tensor t against the F32 tensor of the same name. */
static double relative_error(const hearth_gguf *f32, const hearth_gguf_tensor *t)
{
    const hearth_gguf_tensor *ref = hearth_gguf_find_tensor(f32, t->name);
    ck_assert_msg(ref != NULL, "%s has no F32 twin", t->name);
    ck_assert_int_eq(n_elems(ref), n_elems(t));
    float *x = to_float(ref), *y = to_float(t);
    const size_t n = (size_t)n_elems(t);
    double rel = test_rmse(x, y, n) / test_rms(x, n);
    free(x);
    free(y);
    return rel;
}

/* Load the model, evaluate a few tokens and check the logits are finite. */
static void check_runs(const char *path)
{
    hearth_model *m;
    hearth_status st = hearth_model_load(path, NULL, &m);
    ck_assert_msg(st == HEARTH_OK, "%s: %s", path, hearth_last_error());
    hearth_context_params cp;
    hearth_context_default_params(&cp);
    cp.n_ctx = 16;
    cp.n_threads = 2;
    hearth_context *c;
    ck_assert_msg(hearth_context_new(m, &cp, &c) == HEARTH_OK, "%s", hearth_last_error());
    const int32_t tokens[4] = {1, 100, 200, 300};
    ck_assert_msg(hearth_eval(c, tokens, 4, 1) == HEARTH_OK, "%s", hearth_last_error());
    const float *logits = hearth_context_logits(c, 0);
    for (int32_t i = 0; i < hearth_model_n_vocab(m); i++)
        ck_assert_msg(isfinite(logits[i]), "%s: logit %d is %g", path, i, (double)logits[i]);
    hearth_context_free(c);
    hearth_model_free(m);
}

static uint32_t get_u32(const hearth_gguf *g, const char *key)
{
    uint32_t v = 0;
    ck_assert_msg(hearth_gguf_get_u32(g, key, &v) == HEARTH_OK, "%s: %s", key, hearth_last_error());
    return v;
}

/* ------------------------------------------------------------------------
 * The shared models
 * ------------------------------------------------------------------------ */

/* The recipes the shared quantized files were made with. */
static const char *const shared_recipes[] = {
    "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K",
    "F16", "BF16",
};
#define N_RECIPES ((int)HEARTH_ARRAY_LEN(shared_recipes))
static const char *const archs[] = {"llama", "qwen2"};

/* Test 1: every tensor of our file has the type the common tooling gave it,
 * is close to the F32 tensor, and the file runs. */
START_TEST(test_shared_recipes)
{
    if (!test_require_data()) return;
    const char *arch = archs[_i / N_RECIPES], *recipe = shared_recipes[_i % N_RECIPES];
    char name[64];
    snprintf(name, sizeof name, "micro-%s-f32", arch);
    const char *f32_path = shared_model(name);
    hearth_gguf *f32 = open_gguf(f32_path);
    snprintf(name, sizeof name, "micro-%s-%s", arch, recipe);
    hearth_gguf *theirs = open_gguf(shared_model(name));

    hearth_ftype ftype;
    ck_assert_msg(hearth_ftype_from_name(recipe, &ftype) == HEARTH_OK, "%s", hearth_last_error());
    make_tmp_dir();
    const char *out = tmp_path("out.gguf");
    quantize(f32_path, out, ftype, 2);
    hearth_gguf *ours = open_gguf(out);

    ck_assert_int_eq(hearth_gguf_n_tensors(ours), hearth_gguf_n_tensors(theirs));
    for (int64_t i = 0; i < hearth_gguf_n_tensors(ours); i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(ours, i);
        const hearth_gguf_tensor *u = hearth_gguf_find_tensor(theirs, t->name);
        ck_assert_msg(u != NULL, "%s: %s not in the shared file", name, t->name);
        ck_assert_msg(t->type == u->type, "%s: %s is %s, the shared file has %s", name, t->name,
                      hearth_type_name(t->type), hearth_type_name(u->type));
        for (int d = 0; d < 4; d++) ck_assert_int_eq(t->ne[d], u->ne[d]);
        double rel = relative_error(f32, t);
        ck_assert_msg(rel <= tensor_bound(t->type), "%s: %s (%s) relative RMSE %.5f > %.5f", name,
                      t->name, hearth_type_name(t->type), rel, tensor_bound(t->type));
    }
    /* Metadata: the input's, with the file type the shared file has. */
    ck_assert_uint_eq(get_u32(ours, "general.file_type"), get_u32(theirs, "general.file_type"));
    ck_assert_uint_eq(get_u32(ours, "general.quantization_version"), 2);
    for (int64_t k = 0; k < hearth_gguf_n_kv(f32); k++) {
        const char *key = hearth_gguf_kv_key(f32, k);
        int64_t j = hearth_gguf_find_key(ours, key);
        ck_assert_msg(j >= 0, "%s: metadata %s was not copied", name, key);
        if (strcmp(key, "general.file_type") == 0) continue;
        hearth_gguf_value a, b;
        ck_assert(hearth_gguf_kv_value(f32, k, &a) == HEARTH_OK);
        ck_assert(hearth_gguf_kv_value(ours, j, &b) == HEARTH_OK);
        ck_assert_msg(a.type == b.type, "%s: metadata %s changed type", name, key);
        if (a.type == HEARTH_GGUF_STRING)
            ck_assert(a.v.str.len == b.v.str.len && memcmp(a.v.str.ptr, b.v.str.ptr, a.v.str.len) == 0);
        else if (a.type == HEARTH_GGUF_ARRAY)
            ck_assert(a.v.arr.n == b.v.arr.n && a.v.arr.elem_type == b.v.arr.elem_type);
        else
            ck_assert_msg(a.v.u == b.v.u, "%s: metadata %s changed value", name, key);
    }
    ck_assert_int_le(hearth_gguf_n_kv(ours), hearth_gguf_n_kv(f32) + 2);
    check_runs(out);
    hearth_gguf_close(ours);
    hearth_gguf_close(theirs);
    hearth_gguf_close(f32);
    remove_tmp_dir();
}
END_TEST

/* The type a recipe must give a micro-model tensor, for the recipes without
 * a shared file, from the rules in hearth.h: 2 layers, so only layers 0
 * and 1 exist. */
static hearth_type short_recipe_type(const char *recipe, const char *tensor, bool tied)
{
    const bool is_output = strcmp(tensor, "output.weight") == 0 ||
                           (tied && strcmp(tensor, "token_embd.weight") == 0);
    if (is_output) return HEARTH_TYPE_Q6_K;
    if (strcmp(recipe, "Q3_K_S") == 0) return HEARTH_TYPE_Q3_K;
    if (strcmp(recipe, "Q5_K_S") == 0) return HEARTH_TYPE_Q5_K;
    /* Q4_K_S: attn_v of layers 0-3 gets Q5_K; ffn_down only in the first
     * eighth of 2 layers, which is none. */
    return strstr(tensor, "attn_v.weight") ? HEARTH_TYPE_Q5_K : HEARTH_TYPE_Q4_K;
}

static const char *const short_recipes[] = {"Q3_K_S", "Q4_K_S", "Q5_K_S"};

/* Test 2: the _S recipes on the shared micro models. */
START_TEST(test_short_recipes)
{
    if (!test_require_data()) return;
    const char *arch = archs[_i / 3], *recipe = short_recipes[_i % 3];
    char name[64];
    snprintf(name, sizeof name, "micro-%s-f32", arch);
    const char *f32_path = shared_model(name);
    hearth_gguf *f32 = open_gguf(f32_path);
    const bool tied = hearth_gguf_find_tensor(f32, "output.weight") == NULL;
    hearth_ftype ftype;
    ck_assert(hearth_ftype_from_name(recipe, &ftype) == HEARTH_OK);
    make_tmp_dir();
    const char *out = tmp_path("out.gguf");
    quantize(f32_path, out, ftype, 2);
    hearth_gguf *ours = open_gguf(out);
    for (int64_t i = 0; i < hearth_gguf_n_tensors(ours); i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(ours, i);
        hearth_type want = t->n_dims == 1 ? HEARTH_TYPE_F32 : short_recipe_type(recipe, t->name, tied);
        ck_assert_msg(t->type == want, "%s %s: %s is %s, expected %s", arch, recipe, t->name,
                      hearth_type_name(t->type), hearth_type_name(want));
        double rel = relative_error(f32, t);
        ck_assert_msg(rel <= tensor_bound(t->type), "%s: relative RMSE %.5f", t->name, rel);
    }
    ck_assert_uint_eq(get_u32(ours, "general.file_type"), (uint32_t)ftype);
    check_runs(out);
    hearth_gguf_close(ours);
    hearth_gguf_close(f32);
    remove_tmp_dir();
}
END_TEST

/* ------------------------------------------------------------------------
 * Synthetic models for the layer rules and fallbacks
 * ------------------------------------------------------------------------ */

struct synth {
    int n_layer, n_head, n_head_kv;
    int64_t width;        /* elements per row of the attention matrices */
    int64_t ff_width;     /* elements per row of ffn_down */
    bool tied;
};

/* Write an F32 model of zeros with the matrices the rules look at. */
static void write_synth(const char *path, const struct synth *s)
{
    hearth_gguf_writer *w;
    ck_assert(hearth_gguf_writer_new(&w) == HEARTH_OK);
    ck_assert(hearth_gguf_writer_set_str(w, "general.architecture", "llama") == HEARTH_OK);
    ck_assert(hearth_gguf_writer_set_u32(w, "llama.block_count", (uint32_t)s->n_layer) == HEARTH_OK);
    ck_assert(hearth_gguf_writer_set_u32(w, "llama.attention.head_count", (uint32_t)s->n_head) == 0);
    ck_assert(hearth_gguf_writer_set_u32(w, "llama.attention.head_count_kv",
                                         (uint32_t)s->n_head_kv) == HEARTH_OK);
    const int64_t rows = 8;
    const size_t most = (size_t)(s->width > s->ff_width ? s->width : s->ff_width) * rows;
    float *zeros = calloc(most, sizeof *zeros);
    ck_assert_ptr_nonnull(zeros);
    int64_t ne[2] = {s->width, rows};
    ck_assert(hearth_gguf_writer_add_tensor(w, "token_embd.weight", HEARTH_TYPE_F32, 2, ne, zeros,
                                            (size_t)(ne[0] * ne[1]) * 4) == HEARTH_OK);
    if (!s->tied)
        ck_assert(hearth_gguf_writer_add_tensor(w, "output.weight", HEARTH_TYPE_F32, 2, ne, zeros,
                                                (size_t)(ne[0] * ne[1]) * 4) == HEARTH_OK);
    int64_t norm_ne[1] = {s->width};
    ck_assert(hearth_gguf_writer_add_tensor(w, "output_norm.weight", HEARTH_TYPE_F32, 1, norm_ne,
                                            zeros, (size_t)s->width * 4) == HEARTH_OK);
    static const char *const attn[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate"};
    char name[64];
    for (int il = 0; il < s->n_layer; il++) {
        for (size_t k = 0; k < HEARTH_ARRAY_LEN(attn); k++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", il, attn[k]);
            ck_assert(hearth_gguf_writer_add_tensor(w, name, HEARTH_TYPE_F32, 2, ne, zeros,
                                                    (size_t)(ne[0] * ne[1]) * 4) == HEARTH_OK);
        }
        int64_t down[2] = {s->ff_width, rows};
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", il);
        ck_assert(hearth_gguf_writer_add_tensor(w, name, HEARTH_TYPE_F32, 2, down, zeros,
                                                (size_t)(down[0] * down[1]) * 4) == HEARTH_OK);
    }
    ck_assert_msg(hearth_gguf_writer_write(w, path) == HEARTH_OK, "%s", hearth_last_error());
    hearth_gguf_writer_free(w);
    free(zeros);
}

#define MAX_PLAN 512

struct plan {
    int n;
    char name[MAX_PLAN][64];
    hearth_type chosen[MAX_PLAN], out[MAX_PLAN];
    int stop_after;       /* > 0: return false at this tensor */
};

static bool record(void *user, const hearth_quantize_tensor *t)
{
    struct plan *p = user;
    ck_assert_int_lt(p->n, MAX_PLAN);
    ck_assert_int_eq(t->index, p->n);
    snprintf(p->name[p->n], sizeof p->name[p->n], "%s", t->name);
    p->chosen[p->n] = t->type_chosen;
    p->out[p->n] = t->type_out;
    p->n++;
    return p->stop_after == 0 || p->n < p->stop_after;
}

static hearth_status run_plan(const char *in, const char *out, hearth_ftype ftype, bool dry_run,
                              struct plan *plan)
{
    hearth_quantize_params p;
    hearth_quantize_default_params(&p);
    p.ftype = ftype;
    p.dry_run = dry_run;
    p.progress = record;
    p.progress_user = plan;
    plan->n = 0;
    return hearth_quantize_model(in, out, &p);
}

static hearth_type planned(const struct plan *p, const char *name, hearth_type *chosen)
{
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->name[i], name) == 0) {
            if (chosen) *chosen = p->chosen[i];
            return p->out[i];
        }
    ck_abort_msg("%s not in the plan", name);
    return HEARTH_TYPE_COUNT;
}

static bool in_list(int x, const int *list, int n)
{
    for (int i = 0; i < n; i++)
        if (list[i] == x) return true;
    return false;
}

/* Check tensor SUFFIX of every layer: want_more in the listed layers,
 * want_rest in the others. */
static void check_layers(const struct plan *p, const char *suffix, const int *layers, int n_list,
                         int n_layer, hearth_type want_more, hearth_type want_rest)
{
    char name[64];
    for (int il = 0; il < n_layer; il++) {
        snprintf(name, sizeof name, "blk.%d.%s", il, suffix);
        hearth_type want = in_list(il, layers, n_list) ? want_more : want_rest;
        hearth_type got = planned(p, name, NULL);
        ck_assert_msg(got == want, "%s is %s, expected %s", name, hearth_type_name(got),
                      hearth_type_name(want));
    }
}

/* Test 3: which layers get more bits, from the rules in hearth.h worked
 * out by hand. */
START_TEST(test_layer_rules)
{
    make_tmp_dir();
    struct plan *p = calloc(1, sizeof *p);
    ck_assert_ptr_nonnull(p);
    const char *m16 = tmp_path("l16.gguf"), *m32 = tmp_path("l32.gguf");
    write_synth(m16, &(struct synth){16, 8, 2, 256, 512, false});
    write_synth(m32, &(struct synth){32, 8, 2, 256, 512, true});

    /* Q4_K_M, 16 layers: i < 2, i >= 14, or (i - 2) mod 3 = 2. */
    static const int more16[] = {0, 1, 4, 7, 10, 13, 14, 15};
    ck_assert(run_plan(m16, NULL, HEARTH_FTYPE_Q4_K_M, true, p) == HEARTH_OK);
    check_layers(p, "attn_v.weight", more16, 8, 16, HEARTH_TYPE_Q6_K, HEARTH_TYPE_Q4_K);
    check_layers(p, "ffn_down.weight", more16, 8, 16, HEARTH_TYPE_Q6_K, HEARTH_TYPE_Q4_K);
    check_layers(p, "attn_q.weight", NULL, 0, 16, HEARTH_TYPE_COUNT, HEARTH_TYPE_Q4_K);
    ck_assert_int_eq(planned(p, "output.weight", NULL), HEARTH_TYPE_Q6_K);
    ck_assert_int_eq(planned(p, "token_embd.weight", NULL), HEARTH_TYPE_Q4_K);
    ck_assert_int_eq(planned(p, "output_norm.weight", NULL), HEARTH_TYPE_F32);

    /* Q5_K_M, 32 layers: i < 4, i >= 28, or (i - 4) mod 3 = 2. */
    static const int more32[] = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31};
    ck_assert(run_plan(m32, NULL, HEARTH_FTYPE_Q5_K_M, true, p) == HEARTH_OK);
    check_layers(p, "attn_v.weight", more32, 16, 32, HEARTH_TYPE_Q6_K, HEARTH_TYPE_Q5_K);
    check_layers(p, "ffn_down.weight", more32, 16, 32, HEARTH_TYPE_Q6_K, HEARTH_TYPE_Q5_K);
    /* tied: token_embd is the output layer */
    ck_assert_int_eq(planned(p, "token_embd.weight", NULL), HEARTH_TYPE_Q6_K);

    /* Q3_K_M, 32 layers: attn_v Q5_K in layers 0-1, ffn_down Q5_K in the
     * first 32/16 = 2 layers, Q4_K elsewhere; attn_output Q4_K. */
    static const int first2[] = {0, 1};
    ck_assert(run_plan(m32, NULL, HEARTH_FTYPE_Q3_K_M, true, p) == HEARTH_OK);
    check_layers(p, "attn_v.weight", first2, 2, 32, HEARTH_TYPE_Q5_K, HEARTH_TYPE_Q4_K);
    check_layers(p, "ffn_down.weight", first2, 2, 32, HEARTH_TYPE_Q5_K, HEARTH_TYPE_Q4_K);
    check_layers(p, "attn_output.weight", NULL, 0, 32, HEARTH_TYPE_COUNT, HEARTH_TYPE_Q4_K);
    check_layers(p, "attn_k.weight", NULL, 0, 32, HEARTH_TYPE_COUNT, HEARTH_TYPE_Q3_K);

    /* Q4_K_S, 16 layers: attn_v Q5_K in layers 0-3, ffn_down in 0-1. */
    static const int first4[] = {0, 1, 2, 3};
    ck_assert(run_plan(m16, NULL, HEARTH_FTYPE_Q4_K_S, true, p) == HEARTH_OK);
    check_layers(p, "attn_v.weight", first4, 4, 16, HEARTH_TYPE_Q5_K, HEARTH_TYPE_Q4_K);
    check_layers(p, "ffn_down.weight", first2, 2, 16, HEARTH_TYPE_Q5_K, HEARTH_TYPE_Q4_K);

    /* Q2_K: 8 query heads on 2 KV heads (4 per KV head): attn_v Q4_K;
     * on 4 KV heads (2 per KV head): Q3_K. */
    ck_assert(run_plan(m16, NULL, HEARTH_FTYPE_Q2_K, true, p) == HEARTH_OK);
    check_layers(p, "attn_v.weight", NULL, 0, 16, HEARTH_TYPE_COUNT, HEARTH_TYPE_Q4_K);
    check_layers(p, "ffn_down.weight", NULL, 0, 16, HEARTH_TYPE_COUNT, HEARTH_TYPE_Q3_K);
    check_layers(p, "attn_output.weight", NULL, 0, 16, HEARTH_TYPE_COUNT, HEARTH_TYPE_Q3_K);
    check_layers(p, "ffn_gate.weight", NULL, 0, 16, HEARTH_TYPE_COUNT, HEARTH_TYPE_Q2_K);
    const char *g2 = tmp_path("gqa2.gguf");
    write_synth(g2, &(struct synth){4, 8, 4, 256, 512, false});
    ck_assert(run_plan(g2, NULL, HEARTH_FTYPE_Q2_K, true, p) == HEARTH_OK);
    check_layers(p, "attn_v.weight", NULL, 0, 4, HEARTH_TYPE_COUNT, HEARTH_TYPE_Q3_K);

    /* 80 layers: attn_v Q5_K where Q4_K_M would give Q4_K. */
    const char *m80 = tmp_path("l80.gguf");
    write_synth(m80, &(struct synth){80, 8, 1, 256, 256, false});
    ck_assert(run_plan(m80, NULL, HEARTH_FTYPE_Q4_K_M, true, p) == HEARTH_OK);
    ck_assert_int_eq(planned(p, "blk.10.attn_v.weight", NULL), HEARTH_TYPE_Q5_K);
    ck_assert_int_eq(planned(p, "blk.0.attn_v.weight", NULL), HEARTH_TYPE_Q6_K);
    ck_assert_int_eq(planned(p, "blk.10.attn_q.weight", NULL), HEARTH_TYPE_Q4_K);

    /* The plain recipes give every matrix their type. */
    ck_assert(run_plan(m16, NULL, HEARTH_FTYPE_Q4_0, true, p) == HEARTH_OK);
    ck_assert_int_eq(planned(p, "output.weight", NULL), HEARTH_TYPE_Q6_K);
    check_layers(p, "attn_v.weight", NULL, 0, 16, HEARTH_TYPE_COUNT, HEARTH_TYPE_Q4_0);
    ck_assert(run_plan(m16, NULL, HEARTH_FTYPE_Q8_0, true, p) == HEARTH_OK);
    ck_assert_int_eq(planned(p, "output.weight", NULL), HEARTH_TYPE_Q8_0);
    ck_assert(run_plan(m16, NULL, HEARTH_FTYPE_BF16, true, p) == HEARTH_OK);
    ck_assert_int_eq(planned(p, "output.weight", NULL), HEARTH_TYPE_BF16);
    check_layers(p, "ffn_down.weight", NULL, 0, 16, HEARTH_TYPE_COUNT, HEARTH_TYPE_BF16);
    ck_assert_int_eq(planned(p, "output_norm.weight", NULL), HEARTH_TYPE_F32);
    /* A dry run writes nothing. */
    ck_assert_int_eq(count_files(), 4);
    free(p);
    remove_tmp_dir();
}
END_TEST

/* Test 4: rows that do not fill a block fall back to a type of 32-element
 * blocks, or F16; the converted tensors are still accurate. */
START_TEST(test_fallback)
{
    make_tmp_dir();
    struct plan *p = calloc(1, sizeof *p);
    ck_assert_ptr_nonnull(p);
    /* 96-wide attention rows (3 blocks of 32, no 256-element block) and
     * 48-wide ffn_down rows (not even a 32-element block) */
    const char *in = tmp_path("in.gguf");
    write_synth(in, &(struct synth){8, 4, 1, 96, 48, true});
    hearth_type chosen;

    ck_assert(run_plan(in, NULL, HEARTH_FTYPE_Q4_K_M, true, p) == HEARTH_OK);
    ck_assert_int_eq(planned(p, "blk.3.attn_q.weight", &chosen), HEARTH_TYPE_Q5_0);
    ck_assert_int_eq(chosen, HEARTH_TYPE_Q4_K);
    ck_assert_int_eq(planned(p, "blk.0.attn_v.weight", &chosen), HEARTH_TYPE_Q8_0);
    ck_assert_int_eq(chosen, HEARTH_TYPE_Q6_K);
    /* layer 2 of 8 is not one of the "more bits" layers 0, 3, 6, 7 */
    ck_assert_int_eq(planned(p, "blk.2.ffn_down.weight", &chosen), HEARTH_TYPE_F16);
    ck_assert_int_eq(chosen, HEARTH_TYPE_Q4_K);
    /* the output layer's rows do not fill Q4_K blocks: Q8_0 is the choice,
     * not a fallback */
    ck_assert_int_eq(planned(p, "token_embd.weight", &chosen), HEARTH_TYPE_Q8_0);
    ck_assert_int_eq(chosen, HEARTH_TYPE_Q8_0);

    ck_assert(run_plan(in, NULL, HEARTH_FTYPE_Q2_K, true, p) == HEARTH_OK);
    ck_assert_int_eq(planned(p, "blk.3.attn_q.weight", NULL), HEARTH_TYPE_Q4_0);
    ck_assert_int_eq(planned(p, "blk.3.attn_output.weight", NULL), HEARTH_TYPE_Q4_0);
    ck_assert(run_plan(in, NULL, HEARTH_FTYPE_Q5_K_S, true, p) == HEARTH_OK);
    ck_assert_int_eq(planned(p, "blk.3.attn_q.weight", NULL), HEARTH_TYPE_Q5_1);
    ck_assert(run_plan(in, NULL, HEARTH_FTYPE_Q4_0, true, p) == HEARTH_OK);
    ck_assert_int_eq(planned(p, "blk.3.attn_q.weight", NULL), HEARTH_TYPE_Q4_0);
    ck_assert_int_eq(planned(p, "blk.3.ffn_down.weight", &chosen), HEARTH_TYPE_F16);
    ck_assert_int_eq(chosen, HEARTH_TYPE_Q4_0);
    /* the reported plan is what is written */
    const char *out = tmp_path("out.gguf");
    ck_assert(run_plan(in, out, HEARTH_FTYPE_Q4_K_M, false, p) == HEARTH_OK);
    hearth_gguf *g = open_gguf(out);
    ck_assert_int_eq(hearth_gguf_n_tensors(g), p->n);
    for (int i = 0; i < p->n; i++)
        ck_assert_int_eq(hearth_gguf_find_tensor(g, p->name[i])->type, p->out[i]);
    hearth_gguf_close(g);
    free(p);
    remove_tmp_dir();
}
END_TEST

/* A random F32 model of 96-wide rows, for the accuracy of fallback types. */
START_TEST(test_fallback_accuracy)
{
    make_tmp_dir();
    hearth_gguf_writer *w;
    ck_assert(hearth_gguf_writer_new(&w) == HEARTH_OK);
    ck_assert(hearth_gguf_writer_set_str(w, "general.architecture", "llama") == HEARTH_OK);
    ck_assert(hearth_gguf_writer_set_u32(w, "llama.block_count", 1) == HEARTH_OK);
    const int64_t ne[2] = {96, 512};
    float *x = malloc(96 * 512 * sizeof *x);
    ck_assert_ptr_nonnull(x);
    test_rng rng;
    test_rng_seed(&rng, 11);
    for (int i = 0; i < 96 * 512; i++) x[i] = (float)test_rng_normal(&rng);
    static const char *const names[] = {"blk.0.attn_q.weight", "blk.0.attn_v.weight",
                                        "blk.0.attn_output.weight", "blk.0.ffn_down.weight"};
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(names); i++)
        ck_assert(hearth_gguf_writer_add_tensor(w, names[i], HEARTH_TYPE_F32, 2, ne, x,
                                                sizeof(float) * 96 * 512) == HEARTH_OK);
    const char *in = tmp_path("in.gguf");
    ck_assert(hearth_gguf_writer_write(w, in) == HEARTH_OK);
    hearth_gguf_writer_free(w);
    free(x);
    static const hearth_ftype recipes[] = {HEARTH_FTYPE_Q2_K, HEARTH_FTYPE_Q3_K_M,
                                           HEARTH_FTYPE_Q4_K_M, HEARTH_FTYPE_Q5_K_M,
                                           HEARTH_FTYPE_Q6_K};
    hearth_gguf *f32 = open_gguf(in);
    for (size_t r = 0; r < HEARTH_ARRAY_LEN(recipes); r++) {
        const char *out = tmp_path("out.gguf");
        quantize(in, out, recipes[r], 2);
        hearth_gguf *g = open_gguf(out);
        for (int64_t i = 0; i < hearth_gguf_n_tensors(g); i++) {
            const hearth_gguf_tensor *t = hearth_gguf_tensor_at(g, i);
            ck_assert_int_eq(hearth_type_block_elems(t->type), 32);
            double rel = relative_error(f32, t);
            ck_assert_msg(rel <= tensor_bound(t->type), "%s %s (%s): %.5f", hearth_ftype_name(recipes[r]),
                          t->name, hearth_type_name(t->type), rel);
        }
        hearth_gguf_close(g);
    }
    hearth_gguf_close(f32);
    remove_tmp_dir();
}
END_TEST

/* ------------------------------------------------------------------------
 * Other inputs
 * ------------------------------------------------------------------------ */

/* Test 5: quantized and half-precision input. */
START_TEST(test_requantize)
{
    if (!test_require_data()) return;
    make_tmp_dir();
    hearth_gguf *f32 = open_gguf(shared_model("micro-llama-f32"));
    const char *out = tmp_path("out.gguf");

    /* Q8_0 -> Q4_0: both types' errors add up at most. */
    quantize(shared_model("micro-llama-Q8_0"), out, HEARTH_FTYPE_Q4_0, 2);
    hearth_gguf *g = open_gguf(out);
    for (int64_t i = 0; i < hearth_gguf_n_tensors(g); i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(g, i);
        hearth_type want = t->n_dims == 1 ? HEARTH_TYPE_F32
                           : strcmp(t->name, "output.weight") == 0 ? HEARTH_TYPE_Q6_K
                                                                   : HEARTH_TYPE_Q4_0;
        ck_assert_int_eq(t->type, want);
        double bound = tensor_bound(t->type) + tensor_bound(HEARTH_TYPE_Q8_0);
        ck_assert_msg(relative_error(f32, t) <= bound, "%s", t->name);
    }
    hearth_gguf_close(g);
    check_runs(out);

    /* F16 -> Q8_0 */
    quantize(shared_model("micro-llama-F16"), out, HEARTH_FTYPE_Q8_0, 2);
    g = open_gguf(out);
    for (int64_t i = 0; i < hearth_gguf_n_tensors(g); i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(g, i);
        ck_assert_int_eq(t->type, t->n_dims == 1 ? HEARTH_TYPE_F32 : HEARTH_TYPE_Q8_0);
        double bound = tensor_bound(t->type) + tensor_bound(HEARTH_TYPE_F16);
        ck_assert_msg(relative_error(f32, t) <= bound, "%s", t->name);
    }
    hearth_gguf_close(g);

    /* Q4_K_M -> Q4_K_M: every tensor is already of its type and is copied. */
    const char *src = shared_model("micro-qwen2-Q4_K_M");
    quantize(src, out, HEARTH_FTYPE_Q4_K_M, 2);
    hearth_gguf *a = open_gguf(src);
    g = open_gguf(out);
    ck_assert_int_eq(hearth_gguf_n_tensors(g), hearth_gguf_n_tensors(a));
    for (int64_t i = 0; i < hearth_gguf_n_tensors(g); i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(g, i);
        const hearth_gguf_tensor *u = hearth_gguf_find_tensor(a, t->name);
        ck_assert_int_eq(t->type, u->type);
        ck_assert_uint_eq(t->bytes, u->bytes);
        ck_assert_msg(memcmp(t->data, u->data, t->bytes) == 0, "%s changed", t->name);
    }
    hearth_gguf_close(g);
    hearth_gguf_close(a);
    hearth_gguf_close(f32);
    remove_tmp_dir();
}
END_TEST

/* Test 6: the file does not depend on the number of threads. */
START_TEST(test_threads)
{
    if (!test_require_data()) return;
    make_tmp_dir();
    const char *in = shared_model("micro-qwen2-f32");
    const char *one = tmp_path("one.gguf"), *four = tmp_path("four.gguf");
    quantize(in, one, HEARTH_FTYPE_Q4_K_M, 1);
    quantize(in, four, HEARTH_FTYPE_Q4_K_M, 4);
    size_t n1, n4;
    char *a = test_read_file(one, &n1), *b = test_read_file(four, &n4);
    ck_assert_uint_eq(n1, n4);
    ck_assert(memcmp(a, b, n1) == 0);
    free(a);
    free(b);
    remove_tmp_dir();
}
END_TEST

/* Test 7: names, parameters and failures. */
START_TEST(test_errors)
{
    hearth_ftype f;
    ck_assert(hearth_ftype_from_name("q4_k_m", &f) == HEARTH_OK);
    ck_assert_int_eq(f, HEARTH_FTYPE_Q4_K_M);
    ck_assert_int_eq(f, 15);
    ck_assert(hearth_ftype_from_name("Q4_K", &f) == HEARTH_E_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "Q4_K_M"));
    ck_assert(hearth_ftype_from_name("", &f) == HEARTH_E_NOT_FOUND);
    ck_assert_ptr_null(hearth_ftype_name((hearth_ftype)13));
    ck_assert_str_eq(hearth_ftype_name(HEARTH_FTYPE_BF16), "BF16");
    ck_assert_int_eq(hearth_ftype_type(HEARTH_FTYPE_Q3_K_S), HEARTH_TYPE_Q3_K);
    ck_assert_int_eq(hearth_ftype_type((hearth_ftype)99), HEARTH_TYPE_COUNT);
    /* every name reads back to its recipe */
    for (int v = 0; v < 64; v++) {
        const char *name = hearth_ftype_name((hearth_ftype)v);
        if (!name) continue;
        ck_assert(hearth_ftype_from_name(name, &f) == HEARTH_OK);
        ck_assert_int_eq(f, v);
    }

    make_tmp_dir();
    const char *in = tmp_path("in.gguf");
    write_synth(in, &(struct synth){2, 4, 1, 256, 256, false});
    const char *out = tmp_path("out.gguf");
    hearth_quantize_params p;
    hearth_quantize_default_params(&p);
    ck_assert_int_eq(p.ftype, HEARTH_FTYPE_Q8_0);
    p.ftype = (hearth_ftype)13;
    ck_assert(hearth_quantize_model(in, out, &p) == HEARTH_E_INVALID);
    p.ftype = HEARTH_FTYPE_Q4_0;
    p.n_threads = -1;
    ck_assert(hearth_quantize_model(in, out, &p) == HEARTH_E_INVALID);
    p.n_threads = 0;
    ck_assert(hearth_quantize_model(in, NULL, &p) == HEARTH_E_INVALID);
    ck_assert(hearth_quantize_model(NULL, out, &p) == HEARTH_E_INVALID);
    ck_assert(hearth_quantize_model(in, out, NULL) == HEARTH_E_INVALID);
    hearth_status st = hearth_quantize_model(tmp_path("missing.gguf"), out, &p);
    ck_assert_int_ne(st, HEARTH_OK);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "missing.gguf"));
    /* not a GGUF file */
    FILE *fp = fopen(tmp_path("junk.gguf"), "wb");
    ck_assert_ptr_nonnull(fp);
    fputs("not a model at all", fp);
    fclose(fp);
    ck_assert(hearth_quantize_model(tmp_path("junk.gguf"), out, &p) == HEARTH_E_FORMAT);
    ck_assert_int_eq(count_files(), 2);

    /* Interrupted after the third tensor: nothing is left behind. */
    struct plan *pl = calloc(1, sizeof *pl);
    ck_assert_ptr_nonnull(pl);
    pl->stop_after = 3;
    ck_assert(run_plan(in, out, HEARTH_FTYPE_Q4_0, false, pl) == HEARTH_E_INTERRUPTED);
    ck_assert_int_eq(pl->n, 3);
    ck_assert_int_eq(count_files(), 2);
    free(pl);

    /* A tensor type hearth cannot convert is named. */
    hearth_gguf_writer *w;
    ck_assert(hearth_gguf_writer_new(&w) == HEARTH_OK);
    const int64_t ne[2] = {256, 2};
    uint8_t block[2 * 66] = {0};
    ck_assert_uint_eq(hearth_type_row_bytes(HEARTH_TYPE_IQ2_XXS, 256) * 2, sizeof block);
    ck_assert(hearth_gguf_writer_add_tensor(w, "blk.0.attn_q.weight", HEARTH_TYPE_IQ2_XXS, 2, ne,
                                            block, sizeof block) == HEARTH_OK);
    const char *iq = tmp_path("iq.gguf");
    ck_assert(hearth_gguf_writer_write(w, iq) == HEARTH_OK);
    hearth_gguf_writer_free(w);
    ck_assert(hearth_quantize_model(iq, out, &p) == HEARTH_E_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "blk.0.attn_q.weight"));
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "IQ2_XXS"));
    ck_assert_int_eq(count_files(), 3);
    remove_tmp_dir();
}
END_TEST

static Suite *quantize_suite(void)
{
    Suite *s = suite_create("quantize");
    TCase *shared = tcase_create("shared models");
    tcase_add_loop_test(shared, test_shared_recipes, 0, 2 * N_RECIPES);
    tcase_add_loop_test(shared, test_short_recipes, 0, 6);
    tcase_add_test(shared, test_requantize);
    tcase_add_test(shared, test_threads);
    suite_add_tcase(s, shared);
    TCase *rules = tcase_create("rules");
    tcase_add_test(rules, test_layer_rules);
    tcase_add_test(rules, test_fallback);
    tcase_add_test(rules, test_fallback_accuracy);
    tcase_add_test(rules, test_errors);
    suite_add_tcase(s, rules);
    return s;
}

int main(void)
{
    return test_run_suite(quantize_suite());
}

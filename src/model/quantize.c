/*
 * quantize.c -- converting a model file to another weight type: the
 * recipes (which type each tensor gets, documented in hearth.h) and
 * hearth_quantize_model(), which streams the converted tensors into a new
 * GGUF file one at a time.
 */
#include "quantize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "gguf.h"
#include "quant.h"

/* The version of the block layouts, as general.quantization_version
 * records it: 2 since the legacy formats took their present form. */
#define QUANTIZATION_VERSION 2

struct ftype_info {
    hearth_ftype ftype;
    const char *name;
    hearth_type base;
};

static const struct ftype_info ftypes[] = {
    {HEARTH_FTYPE_F32, "F32", HEARTH_TYPE_F32},
    {HEARTH_FTYPE_F16, "F16", HEARTH_TYPE_F16},
    {HEARTH_FTYPE_BF16, "BF16", HEARTH_TYPE_BF16},
    {HEARTH_FTYPE_Q4_0, "Q4_0", HEARTH_TYPE_Q4_0},
    {HEARTH_FTYPE_Q4_1, "Q4_1", HEARTH_TYPE_Q4_1},
    {HEARTH_FTYPE_Q5_0, "Q5_0", HEARTH_TYPE_Q5_0},
    {HEARTH_FTYPE_Q5_1, "Q5_1", HEARTH_TYPE_Q5_1},
    {HEARTH_FTYPE_Q8_0, "Q8_0", HEARTH_TYPE_Q8_0},
    {HEARTH_FTYPE_Q2_K, "Q2_K", HEARTH_TYPE_Q2_K},
    {HEARTH_FTYPE_Q3_K_S, "Q3_K_S", HEARTH_TYPE_Q3_K},
    {HEARTH_FTYPE_Q3_K_M, "Q3_K_M", HEARTH_TYPE_Q3_K},
    {HEARTH_FTYPE_Q4_K_S, "Q4_K_S", HEARTH_TYPE_Q4_K},
    {HEARTH_FTYPE_Q4_K_M, "Q4_K_M", HEARTH_TYPE_Q4_K},
    {HEARTH_FTYPE_Q5_K_S, "Q5_K_S", HEARTH_TYPE_Q5_K},
    {HEARTH_FTYPE_Q5_K_M, "Q5_K_M", HEARTH_TYPE_Q5_K},
    {HEARTH_FTYPE_Q6_K, "Q6_K", HEARTH_TYPE_Q6_K},
    {HEARTH_FTYPE_MXFP4_MOE, "MXFP4_MOE", HEARTH_TYPE_MXFP4},
};

static const struct ftype_info *ftype_info(hearth_ftype ftype)
{
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(ftypes); i++)
        if (ftypes[i].ftype == ftype) return &ftypes[i];
    return NULL;
}

const char *hearth_ftype_name(hearth_ftype ftype)
{
    const struct ftype_info *f = ftype_info(ftype);
    return f ? f->name : NULL;
}

hearth_type hearth_ftype_type(hearth_ftype ftype)
{
    const struct ftype_info *f = ftype_info(ftype);
    return f ? f->base : HEARTH_TYPE_COUNT;
}

hearth_status hearth_ftype_from_name(const char *name, hearth_ftype *out)
{
    if (!name || !out) return hearth_error(HEARTH_E_INVALID, "hearth_ftype_from_name: NULL argument");
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(ftypes); i++) {
        if (strcasecmp(ftypes[i].name, name) == 0) {
            *out = ftypes[i].ftype;
            return HEARTH_OK;
        }
    }
    char list[256] = "";
    size_t len = 0;
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(ftypes) && len < sizeof list; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "",
                                ftypes[i].name);
    return hearth_error(HEARTH_E_NOT_FOUND, "unknown quantization type '%s' (known: %s)", name,
                        list);
}

/* ------------------------------------------------------------------------
 * Recipes
 * ------------------------------------------------------------------------ */

static bool can_dequantize(hearth_type t);

/* Vectors of floats in any form become F32; integer vectors stay. */
static bool is_float_convertible(hearth_type t)
{
    return t == HEARTH_TYPE_F32 || can_dequantize(t);
}

hearth_status quant_recipe_init(struct quant_recipe *r, hearth_ftype ftype, int32_t n_layer,
                                int32_t n_gqa, bool has_output)
{
    const struct ftype_info *f = ftype_info(ftype);
    if (!f) return hearth_error(HEARTH_E_INVALID, "unknown file type %d", (int)ftype);
    r->ftype = ftype;
    r->base = f->base;
    r->n_layer = n_layer > 0 ? n_layer : 1;
    r->n_gqa = n_gqa > 0 ? n_gqa : 1;
    r->has_output = has_output;
    return HEARTH_OK;
}

/* "ARCH.suffix" as a positive integer, or 0. */
static int32_t arch_u32(const hearth_gguf *g, const char *arch, const char *suffix)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint32_t v;
    if (hearth_gguf_get_u32(g, key, &v) != HEARTH_OK || v > INT32_MAX) return 0;
    return (int32_t)v;
}

/* The block number of "blk.N.<rest>", or -1. */
static int32_t block_index(const char *name)
{
    if (strncmp(name, "blk.", 4) != 0) return -1;
    int64_t n = 0;
    const char *p = name + 4;
    if (*p < '0' || *p > '9') return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        n = n * 10 + (*p - '0');
        if (n > INT32_MAX) return -1;
    }
    return *p == '.' ? (int32_t)n : -1;
}

hearth_status quant_recipe_from_gguf(struct quant_recipe *r, hearth_ftype ftype,
                                     const hearth_gguf *g)
{
    const char *arch = NULL;
    int32_t n_layer = 0, n_gqa = 1;
    if (hearth_gguf_get_str(g, "general.architecture", &arch) == HEARTH_OK) {
        n_layer = arch_u32(g, arch, "block_count");
        int32_t n_head = arch_u32(g, arch, "attention.head_count");
        int32_t n_head_kv = arch_u32(g, arch, "attention.head_count_kv");
        if (n_head > 0 && n_head_kv > 0) n_gqa = n_head / n_head_kv;
    }
    bool has_output = false;
    int32_t max_block = -1;
    for (int64_t i = 0; i < hearth_gguf_n_tensors(g); i++) {
        const char *name = hearth_gguf_tensor_at(g, i)->name;
        if (strcmp(name, "output.weight") == 0) has_output = true;
        max_block = HEARTH_MAX(max_block, block_index(name));
    }
    /* Without the block count, the blocks the tensors name. */
    if (n_layer <= 0) n_layer = max_block + 1;
    return quant_recipe_init(r, ftype, n_layer, n_gqa, has_output);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Whether a tensor is a weight matrix the recipe applies to.  Expert
 * routers (ffn_gate_inp) keep their type: they are small, and a token's
 * choice of experts is sensitive to their rounding.  So do the taps of
 * Gated DeltaNet's causal convolution (ssm_conv1d: a few per channel,
 * read as F32). */
static bool is_matrix_weight(const char *name, uint32_t n_dims)
{
    return n_dims >= 2 && ends_with(name, ".weight") && !strstr(name, "_norm.weight") &&
           !strstr(name, "ffn_gate_inp") && !strstr(name, "ssm_conv1d");
}

/* Layers that get more bits in the _M recipes: the first and last eighth
 * and every third layer in between. */
static bool more_bits_layer(int32_t i, int32_t n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static bool is_block_recipe(const struct quant_recipe *r)
{
    return hearth_type_block_elems(r->base) > 1;
}

/* The recipe's choice for a matrix, before the row-length check. */
static hearth_type choose_matrix_type(const struct quant_recipe *r, const char *name,
                                      int64_t row_n, int64_t n_experts)
{
    const hearth_ftype f = r->ftype;
    hearth_type t = r->base;
    if (!is_block_recipe(r)) return t;
    /* MXFP4_MOE: the experts' matrices (3-D tensors) in MXFP4, as the
     * published gpt-oss files store them; everything else in Q8_0. */
    if (f == HEARTH_FTYPE_MXFP4_MOE)
        return n_experts > 1 && strstr(name, "_exps.") ? HEARTH_TYPE_MXFP4 : HEARTH_TYPE_Q8_0;

    const bool is_output = strcmp(name, "output.weight") == 0 ||
                           (!r->has_output && strcmp(name, "token_embd.weight") == 0);
    if (is_output) {
        if (row_n % hearth_type_block_elems(r->base) != 0) return HEARTH_TYPE_Q8_0;
        return r->base == HEARTH_TYPE_Q8_0 ? HEARTH_TYPE_Q8_0 : HEARTH_TYPE_Q6_K;
    }
    const int32_t il = HEARTH_MAX(block_index(name), 0), n = r->n_layer;
    if (strstr(name, "attn_v.weight")) {
        switch (f) {
        case HEARTH_FTYPE_Q2_K: t = r->n_gqa >= 4 ? HEARTH_TYPE_Q4_K : HEARTH_TYPE_Q3_K; break;
        case HEARTH_FTYPE_Q3_K_M: t = il < 2 ? HEARTH_TYPE_Q5_K : HEARTH_TYPE_Q4_K; break;
        case HEARTH_FTYPE_Q4_K_S: if (il < 4) t = HEARTH_TYPE_Q5_K; break;
        case HEARTH_FTYPE_Q4_K_M:
        case HEARTH_FTYPE_Q5_K_M: if (more_bits_layer(il, n)) t = HEARTH_TYPE_Q6_K; break;
        default: break;
        }
        /* 70B-sized models: the value projection is small next to the
         * others (many query heads share it), so more bits cost little. */
        if (n == 80 && (t == HEARTH_TYPE_Q3_K || t == HEARTH_TYPE_Q4_K)) t = HEARTH_TYPE_Q5_K;
    } else if (strstr(name, "ffn_down")) {
        switch (f) {
        case HEARTH_FTYPE_Q2_K: t = HEARTH_TYPE_Q3_K; break;
        case HEARTH_FTYPE_Q3_K_M: t = il < n / 16 ? HEARTH_TYPE_Q5_K : HEARTH_TYPE_Q4_K; break;
        case HEARTH_FTYPE_Q4_K_S: if (il < n / 8) t = HEARTH_TYPE_Q5_K; break;
        case HEARTH_FTYPE_Q4_K_M:
        case HEARTH_FTYPE_Q5_K_M: if (more_bits_layer(il, n)) t = HEARTH_TYPE_Q6_K; break;
        default: break;
        }
    } else if (strstr(name, "attn_output.weight")) {
        if (f == HEARTH_FTYPE_Q2_K) t = HEARTH_TYPE_Q3_K;
        else if (f == HEARTH_FTYPE_Q3_K_M) t = HEARTH_TYPE_Q4_K;
    }
    return t;
}

/* A type with 32-element blocks and at least as many bits per weight, for
 * rows that do not fill a K-quant's 256-element super-blocks. */
static hearth_type fallback_type(hearth_type t, int64_t row_n)
{
    hearth_type f;
    switch (t) {
    case HEARTH_TYPE_Q2_K:
    case HEARTH_TYPE_Q3_K: f = HEARTH_TYPE_Q4_0; break;
    case HEARTH_TYPE_Q4_K: f = HEARTH_TYPE_Q5_0; break;
    case HEARTH_TYPE_Q5_K: f = HEARTH_TYPE_Q5_1; break;
    case HEARTH_TYPE_Q6_K: f = HEARTH_TYPE_Q8_0; break;
    default: f = HEARTH_TYPE_F16; break;
    }
    return row_n % hearth_type_block_elems(f) == 0 ? f : HEARTH_TYPE_F16;
}

hearth_type quant_recipe_type(const struct quant_recipe *r, const char *name, uint32_t n_dims,
                              const int64_t ne[4], hearth_type type_in, hearth_type *chosen)
{
    hearth_type t;
    if (n_dims == 1) t = is_float_convertible(type_in) ? HEARTH_TYPE_F32 : type_in;
    else if (!is_matrix_weight(name, n_dims)) t = type_in;
    else t = choose_matrix_type(r, name, ne[0], n_dims >= 3 ? ne[2] : 1);
    if (chosen) *chosen = t;
    if (t != type_in && ne[0] % hearth_type_block_elems(t) != 0) t = fallback_type(t, ne[0]);
    return t;
}

/* ------------------------------------------------------------------------
 * Conversion
 * ------------------------------------------------------------------------ */

static bool can_dequantize(hearth_type t)
{
    float x[QK_K];
    static const uint8_t zeros[512];
    int64_t n = hearth_type_block_elems(t);
    return n > 0 && n <= QK_K && hearth_type_block_bytes(t) <= sizeof zeros &&
           quant_dequantize_row(t, zeros, x, n);
}

static bool can_quantize(hearth_type t)
{
    float x[QK_K] = {0};
    uint8_t block[512];
    int64_t n = hearth_type_block_elems(t);
    return n > 0 && n <= QK_K && hearth_type_block_bytes(t) <= sizeof block &&
           quant_quantize_row(t, x, block, n);
}

hearth_status quant_convert_rows(hearth_type type_in, const void *src, hearth_type type_out,
                                 void *dst, int64_t row_n, int64_t n_rows, int n_threads)
{
    const size_t in_row = hearth_type_row_bytes(type_in, row_n);
    const size_t out_row = hearth_type_row_bytes(type_out, row_n);
    if (in_row == 0 || out_row == 0 || n_rows < 0)
        return hearth_error(HEARTH_E_INVALID, "rows of %lld elements cannot be converted from %s "
                            "to %s", (long long)row_n, hearth_type_name(type_in) ?
                            hearth_type_name(type_in) : "?", hearth_type_name(type_out) ?
                            hearth_type_name(type_out) : "?");
    if (type_in == type_out) {
        memcpy(dst, src, in_row * (size_t)n_rows);
        return HEARTH_OK;
    }
    if (type_in != HEARTH_TYPE_F32 && !can_dequantize(type_in))
        return hearth_error(HEARTH_E_UNSUPPORTED, "cannot convert from type %s",
                            hearth_type_name(type_in));
    if (!can_quantize(type_out))
        return hearth_error(HEARTH_E_UNSUPPORTED, "cannot convert to type %s",
                            hearth_type_name(type_out));
#ifdef _OPENMP
    if (n_threads <= 0) n_threads = omp_get_num_procs();
#else
    (void)n_threads;
    n_threads = 1;
#endif
    /* A float row per thread for inputs that are not F32 already. */
    float *scratch = NULL;
    if (type_in != HEARTH_TYPE_F32) {
        size_t bytes;
        if (hearth_mul_overflow((size_t)n_threads * sizeof(float), (size_t)row_n, &bytes))
            return hearth_error(HEARTH_E_NOMEM, "rows of %lld elements are too long",
                                (long long)row_n);
        scratch = hearth_aligned_alloc(64, bytes, "conversion rows");
        if (!scratch) return HEARTH_E_NOMEM;
    }
    const uint8_t *in = src;
    uint8_t *out = dst;
#ifdef _OPENMP
#pragma omp parallel for num_threads(n_threads) schedule(dynamic, 16)
#endif
    for (int64_t r = 0; r < n_rows; r++) {
        const float *x = (const float *)(const void *)(in + (size_t)r * in_row);
        if (scratch) {
#ifdef _OPENMP
            float *row = scratch + (size_t)omp_get_thread_num() * (size_t)row_n;
#else
            float *row = scratch;
#endif
            quant_dequantize_row(type_in, in + (size_t)r * in_row, row, row_n);
            x = row;
        }
        quant_quantize_row(type_out, x, out + (size_t)r * out_row, row_n);
    }
    hearth_aligned_free(scratch);
    return HEARTH_OK;
}

/* ------------------------------------------------------------------------
 * hearth_quantize_model
 * ------------------------------------------------------------------------ */

void hearth_quantize_default_params(hearth_quantize_params *p)
{
    memset(p, 0, sizeof *p);
    p->ftype = HEARTH_FTYPE_Q8_0;
}

struct quantize_job {
    const hearth_quantize_params *params;
    const hearth_gguf *in;
    const char *in_path;
    hearth_quantize_tensor *plan;   /* one per tensor */
};

static hearth_status report(const struct quantize_job *job, const hearth_quantize_tensor *t)
{
    if (job->params->progress && !job->params->progress(job->params->progress_user, t))
        return hearth_error(HEARTH_E_INTERRUPTED, "quantization of %s interrupted", job->in_path);
    return HEARTH_OK;
}

static hearth_status fill_tensor(void *user, size_t index, void *buf, size_t bytes)
{
    struct quantize_job *job = user;
    const hearth_quantize_tensor *t = &job->plan[index];
    const hearth_gguf_tensor *src = hearth_gguf_tensor_at(job->in, (int64_t)index);
    (void)bytes;
    hearth_status st = quant_convert_rows(t->type_in, src->data, t->type_out, buf, t->ne[0],
                                          t->ne[1] * t->ne[2] * t->ne[3], job->params->n_threads);
    if (st) {
        hearth_error_prefix("%s: tensor '%s'", job->in_path, t->name);
        return st;
    }
    return report(job, t);
}

/* Choose every tensor's type and check that it can be produced. */
static hearth_status plan_tensors(struct quantize_job *job, const struct quant_recipe *recipe)
{
    const int64_t n = hearth_gguf_n_tensors(job->in);
    for (int64_t i = 0; i < n; i++) {
        const hearth_gguf_tensor *src = hearth_gguf_tensor_at(job->in, i);
        hearth_quantize_tensor *t = &job->plan[i];
        t->index = i;
        t->n_tensors = n;
        t->name = src->name;
        t->n_dims = src->n_dims;
        memcpy(t->ne, src->ne, sizeof t->ne);
        t->type_in = src->type;
        t->type_out = quant_recipe_type(recipe, src->name, src->n_dims, src->ne, src->type,
                                        &t->type_chosen);
        t->bytes_in = src->bytes;
        size_t row = hearth_type_row_bytes(t->type_out, src->ne[0]);
        t->bytes_out = (uint64_t)row * (uint64_t)(src->ne[1] * src->ne[2] * src->ne[3]);
        if (t->type_in == t->type_out) continue;
        if (t->type_in != HEARTH_TYPE_F32 && !can_dequantize(t->type_in))
            return hearth_error(HEARTH_E_UNSUPPORTED, "%s: tensor '%s' has type %s, which hearth "
                                "cannot convert", job->in_path, t->name,
                                hearth_type_name(t->type_in));
        if (!can_quantize(t->type_out))
            return hearth_error(HEARTH_E_INTERNAL, "%s: tensor '%s': no quantizer for %s",
                                job->in_path, t->name, hearth_type_name(t->type_out));
    }
    return HEARTH_OK;
}

static hearth_status build_writer(const struct quantize_job *job, hearth_gguf_writer *w)
{
    for (int64_t i = 0; i < hearth_gguf_n_kv(job->in); i++) {
        const char *key = hearth_gguf_kv_key(job->in, i);
        /* the output is one file, whether or not the input was split */
        if (strcmp(key, "general.file_type") == 0 ||
            strcmp(key, "general.quantization_version") == 0 || strncmp(key, "split.", 6) == 0)
            continue;
        HEARTH_TRY(hearth_gguf_writer_copy_kv(w, job->in, i));
    }
    HEARTH_TRY(hearth_gguf_writer_set_u32(w, "general.quantization_version", QUANTIZATION_VERSION));
    HEARTH_TRY(hearth_gguf_writer_set_u32(w, "general.file_type", (uint32_t)job->params->ftype));
    for (int64_t i = 0; i < hearth_gguf_n_tensors(job->in); i++) {
        const hearth_quantize_tensor *t = &job->plan[i];
        HEARTH_TRY(hearth_gguf_writer_add_tensor(w, t->name, t->type_out, t->n_dims, t->ne, NULL,
                                                 (size_t)t->bytes_out));
    }
    return HEARTH_OK;
}

hearth_status hearth_quantize_model(const char *in_path, const char *out_path,
                                    const hearth_quantize_params *params)
{
    if (!in_path || !params || (!out_path && !params->dry_run))
        return hearth_error(HEARTH_E_INVALID, "hearth_quantize_model: NULL argument");
    if (!ftype_info(params->ftype))
        return hearth_error(HEARTH_E_INVALID, "unknown quantization file type %d",
                            (int)params->ftype);
    if (params->n_threads < 0 || params->n_threads > 1024)
        return hearth_error(HEARTH_E_INVALID, "thread count %d is out of range (0 to 1024)",
                            params->n_threads);
    hearth_gguf *in = NULL;
    HEARTH_TRY(hearth_gguf_open(in_path, &in));
    struct quantize_job job = {params, in, in_path, NULL};
    hearth_gguf_writer *w = NULL;
    struct quant_recipe recipe;
    hearth_status st = quant_recipe_from_gguf(&recipe, params->ftype, in);
    const int64_t n = hearth_gguf_n_tensors(in);
    if (!st) {
        job.plan = hearth_calloc((size_t)(n > 0 ? n : 1), sizeof *job.plan, "the tensor plan");
        if (!job.plan) st = HEARTH_E_NOMEM;
    }
    if (!st) st = plan_tensors(&job, &recipe);
    if (!st && params->dry_run) {
        for (int64_t i = 0; i < n && !st; i++) st = report(&job, &job.plan[i]);
    } else if (!st) {
        st = hearth_gguf_writer_new(&w);
        if (!st) st = build_writer(&job, w);
        if (!st) st = gguf_writer_write_streaming(w, out_path, fill_tensor, &job);
    }
    hearth_gguf_writer_free(w);
    free(job.plan);
    hearth_gguf_close(in);
    return st;
}

/*
 * test-opencl.c -- every kernel of the OpenCL backend against its CPU
 * twin on random data, ragged sizes included: weight dequantization
 * (bit-exact with src/common/quant.c) and the matrix products of every type on
 * each path (GEMV, tiled GEMM, CLBlast), the products in the CPU's
 * packed order against its packed kernels (bit-exact), RMS norm, both RoPE styles,
 * attention over F16 and F32 device caches, SwiGLU, bias and residual
 * adds, row copies; the program cache (hits, and corrupt entries
 * rebuilt); device errors.
 *
 * The backends run over a stand-in model holding only what they read
 * (hyperparameters, the device, rope factors), so no model file is
 * needed.  Skipped (77) without an OpenCL device, see test_opencl_status().
 */
#include "internal.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#ifdef HAVE_OPENCL
#include "backend.h"
#include "kernels.h"
#include "kv_cache.h"
#include "model.h"
#include "ocl.h"
#include "quant.h"

/* ---- fixture ------------------------------------------------------------------------ */

struct fixture {
    hearth_model model;        /* stand-in: hp, rope_freqs, offload */
    struct ocl_model om;
    struct hearth_backend *gpu;
    struct hearth_backend *cpu;
    struct kv_cache *kv_dev;   /* every layer on the device */
    struct kv_cache *kv_cpu;   /* every layer on the host */
    cl_command_queue queue;    /* the test's own, for uploads */
    bool fp64;                 /* the device has double precision */
    bool exact_prefill;        /* HEARTH_OPENCL_GEMM=exact or unset (the default) */
};

static void fixture_open(struct fixture *f, const char *gemm, const struct hparams *hp,
                         hearth_type cache, int32_t n_ctx)
{
    memset(f, 0, sizeof *f);
    if (gemm) setenv("HEARTH_OPENCL_GEMM", gemm, 1);
    else unsetenv("HEARTH_OPENCL_GEMM");
    if (hp) f->model.hp = *hp;
    else {
        f->model.hp.n_layer = 1;
        f->model.hp.n_head = 1;
        f->model.hp.n_head_kv = 1;
        f->model.hp.head_dim = 32;
    }
    f->model.offload.first_layer = 0;
    hearth_status st = ocl_device_open(0, &f->om.dev);
    ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
    f->model.offload.ocl = &f->om;
    const struct hparams *h = &f->model.hp;
    bool *on_host = calloc((size_t)h->n_layer, sizeof *on_host);
    const struct kv_shape shape = kv_shape_of(h);
    ck_assert_int_eq(kv_cache_new(cache, n_ctx, 1, h->n_layer, &shape, on_host, &f->kv_dev), HEARTH_OK);
    free(on_host);
    ck_assert_int_eq(kv_cache_new(cache, n_ctx, 1, h->n_layer, &shape, NULL, &f->kv_cpu), HEARTH_OK);
    st = backend_opencl_new(&f->model, f->kv_dev, 64, n_ctx, &f->gpu);
    ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
    ck_assert_int_eq(backend_cpu_new(2, &f->cpu), HEARTH_OK);
    cl_int err;
    f->queue = clCreateCommandQueue(f->om.dev->ctx, f->om.dev->id, 0, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    cl_device_fp_config fp64 = 0;
    clGetDeviceInfo(f->om.dev->id, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp64, &fp64, NULL);
    f->fp64 = fp64 != 0;
    f->exact_prefill = !gemm || strcmp(gemm, "exact") == 0;
}

static void fixture_close(struct fixture *f)
{
    backend_opencl_free(f->gpu);
    backend_cpu_free(f->cpu);
    kv_cache_free(f->kv_dev);
    kv_cache_free(f->kv_cpu);
    if (f->model.rope_freqs.dev) clReleaseMemObject(f->model.rope_freqs.dev);
    clReleaseCommandQueue(f->queue);
    ocl_device_close(f->om.dev);
}

/* The places of n rows of one sequence at positions pos whose cache is
 * one block, slot = position (valid until the next call). The block
 * table is as long as the last row's position asks for at one token a
 * block (the backend sizes the table it uploads from that position);
 * every entry names block 0, which is all that rope and attention over
 * the fixture's one-block cache read. */
static struct batch_pos one_sequence(const int32_t *pos, int64_t n)
{
    static const int32_t table_start[1] = {0};
    static int32_t seq_start[2], *blocks;
    static size_t n_blocks;
    size_t need = n > 0 ? (size_t)pos[n - 1] + 1 : 1;
    if (need > n_blocks) {
        free(blocks);
        blocks = calloc(need, sizeof *blocks);
        ck_assert_ptr_nonnull(blocks);
        n_blocks = need;
    }
    seq_start[0] = 0;
    seq_start[1] = (int32_t)n;
    return (struct batch_pos){.pos = pos, .slot = pos, .n_tokens = n, .n_seqs = 1,
                              .seq_start = seq_start, .blocks = blocks, .table_start = table_start};
}

static cl_mem upload_bytes(struct fixture *f, const void *data, size_t bytes)
{
    cl_int err;
    cl_mem m = clCreateBuffer(f->om.dev->ctx, CL_MEM_READ_ONLY, bytes, NULL, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    ck_assert_int_eq(clEnqueueWriteBuffer(f->queue, m, CL_TRUE, 0, bytes, data, 0, NULL, NULL),
                     CL_SUCCESS);
    return m;
}

/* The same activations on both backends. */
struct pair {
    struct act gpu, cpu;
};

static void pair_alloc(struct fixture *f, struct pair *p, int64_t rows, int64_t width)
{
    ck_assert_int_eq(f->gpu->ops->act_alloc(f->gpu, &p->gpu, rows, width), HEARTH_OK);
    ck_assert_int_eq(f->cpu->ops->act_alloc(f->cpu, &p->cpu, rows, width), HEARTH_OK);
}

static void pair_set(struct fixture *f, struct pair *p, const float *data, int64_t rows, int64_t width)
{
    p->gpu.width = p->cpu.width = width;
    ck_assert_int_eq(f->gpu->ops->act_upload(f->gpu, &p->gpu, data, rows), HEARTH_OK);
    ck_assert_int_eq(f->cpu->ops->act_upload(f->cpu, &p->cpu, data, rows), HEARTH_OK);
}

static void pair_free(struct fixture *f, struct pair *p)
{
    f->gpu->ops->act_free(f->gpu, &p->gpu);
    f->cpu->ops->act_free(f->cpu, &p->cpu);
}

/* Read the device side back and compare it with the CPU side:
 * |gpu - cpu| <= abs_tol + rel_tol * |cpu| element by element. */
static void pair_compare(struct fixture *f, struct pair *p, double abs_tol, double rel_tol,
                         const char *what)
{
    ck_assert_int_eq(p->gpu.rows, p->cpu.rows);
    ck_assert_int_eq(p->gpu.width, p->cpu.width);
    const size_t n = (size_t)(p->cpu.rows * p->cpu.width);
    float *got = malloc(n * sizeof *got);
    ck_assert_int_eq(f->gpu->ops->act_download(f->gpu, got, &p->gpu, p->gpu.rows), HEARTH_OK);
    for (size_t i = 0; i < n; i++) {
        const double want = p->cpu.host[i];
        ck_assert_msg(fabs(got[i] - want) <= abs_tol + rel_tol * fabs(want),
                      "%s: element %zu (row %zu of width %lld): device %.9g, CPU %.9g", what, i,
                      i / (size_t)p->cpu.width, (long long)p->cpu.width, (double)got[i], want);
    }
    free(got);
}

static float *random_floats(test_rng *rng, size_t n, double scale)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(test_rng_normal(rng) * scale);
    return x;
}

/* ---- weights and matrix products ---------------------------------------------------------- */

static const hearth_type all_types[] = {
    HEARTH_TYPE_F32, HEARTH_TYPE_F16, HEARTH_TYPE_BF16, HEARTH_TYPE_Q4_0, HEARTH_TYPE_Q4_1,
    HEARTH_TYPE_Q5_0, HEARTH_TYPE_Q5_1, HEARTH_TYPE_Q8_0, HEARTH_TYPE_Q2_K, HEARTH_TYPE_Q3_K,
    HEARTH_TYPE_Q4_K, HEARTH_TYPE_Q5_K, HEARTH_TYPE_Q6_K,
};

/* A random weight of n_out rows of n_in, quantized to type by the
 * reference quantizer; *ref gets its reference dequantization. */
static struct weight make_weight(struct fixture *f, test_rng *rng, hearth_type type, int64_t n_in,
                                 int64_t n_out, float **ref, void **bytes)
{
    struct weight w = {0};
    w.name = "test.weight";
    w.type = type;
    w.n_in = n_in;
    w.n_out = n_out;
    w.row_bytes = hearth_type_row_bytes(type, n_in);
    ck_assert_uint_gt(w.row_bytes, 0);
    uint8_t *q = malloc(w.row_bytes * (size_t)n_out);
    float *deq = malloc((size_t)(n_in * n_out) * sizeof *deq);
    float *row = malloc((size_t)n_in * sizeof *row);
    for (int64_t r = 0; r < n_out; r++) {
        /* rows of different magnitudes, some with an outlier */
        const double scale = 0.1 + 2.0 * test_rng_uniform(rng);
        for (int64_t i = 0; i < n_in; i++) row[i] = (float)(test_rng_normal(rng) * scale);
        if (r % 3 == 1) row[test_rng_next(rng) % (uint64_t)n_in] *= 8.0f;
        ck_assert(quant_quantize_row(type, row, q + (size_t)r * w.row_bytes, n_in));
        ck_assert(quant_dequantize_row(type, q + (size_t)r * w.row_bytes, deq + r * n_in, n_in));
    }
    free(row);
    w.data = q;
    w.dev = upload_bytes(f, q, w.row_bytes * (size_t)n_out);
    *ref = deq;
    *bytes = q;
    return w;
}

/* x rounded as the CPU's product for weights of `type` rounds it: to the
 * values of its activation format (Q8_0, Q8_1, Q8_K), by the reference
 * quantizer of src/common/quant.c. */
static float *round_like_cpu(hearth_type type, const float *x, int64_t n_tok, int64_t n_in)
{
    const hearth_type at = hearth_kernels_scalar()->act_type[type];
    float *r = malloc((size_t)(n_tok * n_in) * sizeof *r);
    void *q = malloc(hearth_type_row_bytes(at, n_in) + 1);
    for (int64_t t = 0; t < n_tok; t++) {
        ck_assert(quant_quantize_row(at, x + t * n_in, q, n_in));
        ck_assert(quant_dequantize_row(at, q, r + t * n_in, n_in));
    }
    free(q);
    return r;
}

/* The dot product of n weights (as the device dequantizes them) and n
 * activations (as the CPU rounds them) in double, and in *mag the sum of
 * the products' magnitudes, which scales the tolerance of a float sum. */
static double reference_dot(const float *w, const float *x, int64_t n, double *mag)
{
    double sum = 0;
    *mag = 0;
    for (int64_t k = 0; k < n; k++) {
        sum += (double)w[k] * x[k];
        *mag += fabs((double)w[k] * x[k]);
    }
    return sum;
}

/* The device product against (1) sum_k w[r][k] x[t][k] in double over the
 * reference dequantization of the weights and of the activations as the
 * CPU rounds them, and (2) the CPU backend's product, its twin: the error
 * allowed is a small multiple of float rounding of sum_k |w x|. */
static void check_matmul(struct fixture *f, test_rng *rng, hearth_type type, int64_t n_in,
                         int64_t n_out, int64_t n_tok)
{
    float *wref;
    void *bytes;
    struct weight w = make_weight(f, rng, type, n_in, n_out, &wref, &bytes);
    float *x = random_floats(rng, (size_t)(n_tok * n_in), 1.0);
    float *xr = round_like_cpu(type, x, n_tok, n_in);
    struct act cpu_in, cpu_out;
    ck_assert_int_eq(f->cpu->ops->act_alloc(f->cpu, &cpu_in, n_tok, n_in), HEARTH_OK);
    ck_assert_int_eq(f->cpu->ops->act_alloc(f->cpu, &cpu_out, n_tok, n_out), HEARTH_OK);
    ck_assert_int_eq(f->cpu->ops->act_upload(f->cpu, &cpu_in, x, n_tok), HEARTH_OK);
    hearth_status st = f->cpu->ops->matmul(f->cpu, &cpu_out, &w, &cpu_in);
    ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
    struct act in, out;
    ck_assert_int_eq(f->gpu->ops->act_alloc(f->gpu, &in, n_tok, n_in), HEARTH_OK);
    ck_assert_int_eq(f->gpu->ops->act_alloc(f->gpu, &out, n_tok, n_out), HEARTH_OK);
    ck_assert_int_eq(f->gpu->ops->act_upload(f->gpu, &in, x, n_tok), HEARTH_OK);
    st = f->gpu->ops->matmul(f->gpu, &out, &w, &in);
    ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
    ck_assert_int_eq(out.rows, n_tok);
    ck_assert_int_eq(out.width, n_out);
    float *y = malloc((size_t)(n_tok * n_out) * sizeof *y);
    ck_assert_int_eq(f->gpu->ops->act_download(f->gpu, y, &out, n_tok), HEARTH_OK);
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t r = 0; r < n_out; r++) {
            double mag;
            const double sum = reference_dot(wref + r * n_in, xr + t * n_in, n_in, &mag);
            const double got = y[t * n_out + r], cpu = cpu_out.host[t * n_out + r];
            ck_assert_msg(fabs(got - sum) <= 2e-5 * mag + 1e-30,
                          "%s %lld x %lld, %lld tokens: y[%lld][%lld] = %.9g, reference %.9g",
                          hearth_type_name(type), (long long)n_out, (long long)n_in,
                          (long long)n_tok, (long long)t, (long long)r, got, sum);
            ck_assert_msg(fabs(got - cpu) <= 4e-5 * mag + 1e-30,
                          "%s %lld x %lld, %lld tokens: y[%lld][%lld] = %.9g, CPU %.9g",
                          hearth_type_name(type), (long long)n_out, (long long)n_in,
                          (long long)n_tok, (long long)t, (long long)r, got, cpu);
            /* the integer formats' summation order (simd/kernels.h): always
             * when decoding, for prompts with the exact kernels */
            if (f->fp64 && (n_tok <= 4 || f->exact_prefill) && hearth_type_block_elems(type) > 1)
                ck_assert_msg(memcmp(&y[t * n_out + r], &cpu_out.host[t * n_out + r], sizeof(float)) == 0,
                              "%s %lld x %lld, %lld tokens: y[%lld][%lld] = %.9g is not the CPU's "
                              "%.9g bit for bit", hearth_type_name(type), (long long)n_out,
                              (long long)n_in, (long long)n_tok, (long long)t, (long long)r, got, cpu);
        }
    f->gpu->ops->act_free(f->gpu, &in);
    f->gpu->ops->act_free(f->gpu, &out);
    f->cpu->ops->act_free(f->cpu, &cpu_in);
    f->cpu->ops->act_free(f->cpu, &cpu_out);
    clReleaseMemObject(w.dev);
    free(y);
    free(xr);
    free(x);
    free(wref);
    free(bytes);
}

/* Row lengths to try per type: ragged for the plain types, a few blocks
 * (odd counts included) for the block types. */
static int row_lengths(hearth_type type, int64_t out[4])
{
    const int64_t block = hearth_type_block_elems(type);
    if (block == 1) {
        out[0] = 1; out[1] = 37; out[2] = 256; out[3] = 301;
        return 4;
    }
    if (block == 32) {
        out[0] = 32; out[1] = 96; out[2] = 544;
        return 3;
    }
    out[0] = 256; out[1] = 768;
    return 2;
}

static void matmul_all_types(const char *gemm, const int64_t *n_toks, int n_n_toks)
{
    struct fixture f;
    fixture_open(&f, gemm, NULL, HEARTH_TYPE_F16, 8);
    test_rng rng;
    test_rng_seed(&rng, 1234);
    static const int64_t outs[] = {1, 17, 33};
    for (size_t ti = 0; ti < HEARTH_ARRAY_LEN(all_types); ti++) {
        int64_t ins[4];
        const int n_ins = row_lengths(all_types[ti], ins);
        for (int a = 0; a < n_ins; a++)
            for (size_t o = 0; o < HEARTH_ARRAY_LEN(outs); o++)
                for (int t = 0; t < n_n_toks; t++)
                    check_matmul(&f, &rng, all_types[ti], ins[a], outs[o], n_toks[t]);
    }
    fixture_close(&f);
}

/* y[t * n_out + r] from the CPU kernels k reading w packed, as the CPU
 * backend calls them: activations converted to the weight type's format,
 * their block sums for Q8_0. */
static void cpu_packed_product(const hearth_kernels *k, const struct weight *w, const void *packed,
                               const float *x, int64_t n_tok, float *y)
{
    const hearth_type at = k->act_type[w->type];
    const size_t act_row = hearth_type_row_bytes(at, w->n_in);
    uint8_t *xq = malloc(act_row * (size_t)n_tok);
    int32_t *sums = malloc((size_t)(n_tok * (w->n_in / 32)) * sizeof *sums);
    for (int64_t t = 0; t < n_tok; t++) {
        k->act_convert[at](x + t * w->n_in, xq + (size_t)t * act_row, w->n_in);
        if (at == HEARTH_TYPE_Q8_0)
            hearth_q8_0_block_sums(xq + (size_t)t * act_row, w->n_in / 32, sums + t * (w->n_in / 32));
    }
    k->gemm_packed[w->type](w->n_in, w->n_out, n_tok, packed, xq, act_row,
                            at == HEARTH_TYPE_Q8_0 ? sums : NULL, y, w->n_out);
    free(sums);
    free(xq);
}

/* A weight the CPU reads packed: the device's product (in the packed
 * order, chosen at upload) against the packed kernels of the scalar
 * table and of the CPU's chosen path, bit for bit, and against the double
 * reference within float tolerance. */
static void check_packed_order(struct fixture *f, test_rng *rng, hearth_type type, int64_t n_in,
                               int64_t n_out, int64_t n_tok)
{
    float *wref;
    void *bytes;
    struct weight w = make_weight(f, rng, type, n_in, n_out, &wref, &bytes);
    const hearth_kernels *best;
    ck_assert_int_eq(hearth_kernels_select(&best), HEARTH_OK);
    ck_assert(hearth_kernels_read_packed(hearth_kernels_scalar(), type, n_out, n_in));
    w.dev_packed_order = true;
    void *packed = hearth_aligned_alloc(64, hearth_packed_bytes(type, n_out, n_in), "test packing");
    ck_assert_ptr_nonnull(packed);
    hearth_pack_rows(type, bytes, w.row_bytes, n_out, n_in, packed);
    float *x = random_floats(rng, (size_t)(n_tok * n_in), 1.0);
    float *xr = round_like_cpu(type, x, n_tok, n_in);
    const size_t n_y = (size_t)(n_tok * n_out);
    float *y_scalar = malloc(n_y * sizeof *y_scalar), *y_best = malloc(n_y * sizeof *y_best);
    cpu_packed_product(hearth_kernels_scalar(), &w, packed, x, n_tok, y_scalar);
    const bool best_packs = hearth_kernels_read_packed(best, type, n_out, n_in);
    if (best_packs) cpu_packed_product(best, &w, packed, x, n_tok, y_best);
    struct act in, out;
    ck_assert_int_eq(f->gpu->ops->act_alloc(f->gpu, &in, n_tok, n_in), HEARTH_OK);
    ck_assert_int_eq(f->gpu->ops->act_alloc(f->gpu, &out, n_tok, n_out), HEARTH_OK);
    ck_assert_int_eq(f->gpu->ops->act_upload(f->gpu, &in, x, n_tok), HEARTH_OK);
    hearth_status st = f->gpu->ops->matmul(f->gpu, &out, &w, &in);
    ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
    float *y = malloc(n_y * sizeof *y);
    ck_assert_int_eq(f->gpu->ops->act_download(f->gpu, y, &out, n_tok), HEARTH_OK);
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t r = 0; r < n_out; r++) {
            double mag;
            const double sum = reference_dot(wref + r * n_in, xr + t * n_in, n_in, &mag);
            const size_t at = (size_t)(t * n_out + r);
            ck_assert_msg(fabs(y[at] - sum) <= 2e-5 * mag + 1e-30,
                          "packed order, %s %lld x %lld, %lld tokens: y[%lld][%lld] = %.9g, reference %.9g",
                          hearth_type_name(type), (long long)n_out, (long long)n_in, (long long)n_tok,
                          (long long)t, (long long)r, y[at], sum);
            if (!f->fp64) continue;
            ck_assert_msg(memcmp(&y[at], &y_scalar[at], sizeof(float)) == 0,
                          "packed order, %s %lld x %lld, %lld tokens: y[%lld][%lld] = %.9g is not the "
                          "scalar packed kernel's %.9g bit for bit", hearth_type_name(type),
                          (long long)n_out, (long long)n_in, (long long)n_tok, (long long)t,
                          (long long)r, y[at], y_scalar[at]);
            if (best_packs)
                ck_assert_msg(memcmp(&y[at], &y_best[at], sizeof(float)) == 0,
                              "packed order, %s %lld x %lld, %lld tokens: y[%lld][%lld] = %.9g is not "
                              "the %s packed kernel's %.9g bit for bit", hearth_type_name(type),
                              (long long)n_out, (long long)n_in, (long long)n_tok, (long long)t,
                              (long long)r, y[at], best->name, y_best[at]);
        }
    f->gpu->ops->act_free(f->gpu, &in);
    f->gpu->ops->act_free(f->gpu, &out);
    clReleaseMemObject(w.dev);
    hearth_aligned_free(packed);
    free(y);
    free(y_best);
    free(y_scalar);
    free(xr);
    free(x);
    free(wref);
    free(bytes);
}

/* Every type the CPU packs, decode and prefill batches, row counts of
 * one and of several row groups, ragged block counts. */
START_TEST(test_matmul_packed_order)
{
    struct fixture f;
    fixture_open(&f, NULL, NULL, HEARTH_TYPE_F16, 8);
    test_rng rng;
    test_rng_seed(&rng, 4321);
    static const hearth_type types[] = {HEARTH_TYPE_Q4_0, HEARTH_TYPE_Q8_0, HEARTH_TYPE_Q2_K, HEARTH_TYPE_Q3_K,
                                        HEARTH_TYPE_Q4_K, HEARTH_TYPE_Q5_K, HEARTH_TYPE_Q6_K};
    static const int64_t outs[] = {8, 24, 40};
    static const int64_t toks[] = {1, 3, 5, 21};
    int tried = 0;
    for (size_t ti = 0; ti < HEARTH_ARRAY_LEN(types); ti++) {
        if (!hearth_kernels_read_packed(hearth_kernels_scalar(), types[ti], 8, 256)) continue;
        int64_t ins[4];
        const int n_ins = row_lengths(types[ti], ins);
        for (int a = 0; a < n_ins; a++)
            for (size_t o = 0; o < HEARTH_ARRAY_LEN(outs); o++)
                for (size_t t = 0; t < HEARTH_ARRAY_LEN(toks); t++)
                    check_packed_order(&f, &rng, types[ti], ins[a], outs[o], toks[t]);
        tried++;
    }
    ck_assert_int_eq(tried, (int)HEARTH_ARRAY_LEN(types));
    fixture_close(&f);
}
END_TEST

START_TEST(test_dequantize_exact)
{
    struct fixture f;
    fixture_open(&f, NULL, NULL, HEARTH_TYPE_F16, 8);
    test_rng rng;
    test_rng_seed(&rng, 99);
    for (size_t ti = 0; ti < HEARTH_ARRAY_LEN(all_types); ti++) {
        int64_t ins[4];
        const int n_ins = row_lengths(all_types[ti], ins);
        for (int a = 0; a < n_ins; a++) {
            float *ref;
            void *bytes;
            struct weight w = make_weight(&f, &rng, all_types[ti], ins[a], 5, &ref, &bytes);
            float *got = malloc((size_t)(5 * ins[a]) * sizeof *got);
            hearth_status st = ocl_backend_dequantize(f.gpu, &w, got);
            ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
            for (int64_t i = 0; i < 5 * ins[a]; i++)
                ck_assert_msg(memcmp(&got[i], &ref[i], sizeof(float)) == 0,
                              "%s, rows of %lld: element %lld is %.9g on the device, %.9g in "
                              "the reference", hearth_type_name(all_types[ti]), (long long)ins[a],
                              (long long)i, (double)got[i], (double)ref[i]);
            clReleaseMemObject(w.dev);
            free(got);
            free(ref);
            free(bytes);
        }
    }
    fixture_close(&f);
}
END_TEST

/* The default paths: decode (the exact kernels, GEMV for float weights)
 * and prefill batches (the exact kernels, CLBlast for float weights). */
START_TEST(test_matmul)
{
    static const int64_t toks[] = {1, 3, 5, 21};
    matmul_all_types(NULL, toks, 4);
}
END_TEST

/* A model of one layer with n_head heads of 32, offloaded to device 0: what
 * backend_opencl_new needs to get as far as checking its settings. */
static void one_layer_model(int32_t n_head, struct hearth_model *model, struct ocl_model *om)
{
    memset(model, 0, sizeof *model);
    model->hp.n_layer = 1;
    model->hp.n_head = n_head;
    model->hp.n_head_kv = n_head;
    model->hp.head_dim = 32;
    memset(om, 0, sizeof *om);
    ck_assert_int_eq(ocl_device_open(0, &om->dev), HEARTH_OK);
    model->offload.ocl = om;
}

/* The default, named. */
START_TEST(test_gemm_exact)
{
    static const int64_t toks[] = {5, 21};
    matmul_all_types("exact", toks, 2);
}
END_TEST

/* A prefill path that does not exist is an error, not the default. */
START_TEST(test_gemm_unknown)
{
    struct hearth_model model;
    struct ocl_model om;
    one_layer_model(1, &model, &om);
    struct kv_cache *kv;
    bool on_host[1] = {false};
    ck_assert_int_eq(kv_cache_new(HEARTH_TYPE_F16, 16, 1, 1, &(struct kv_shape){1, 32, false, 0}, on_host, &kv), HEARTH_OK);
    struct hearth_backend *be;
    setenv("HEARTH_OPENCL_GEMM", "fastest", 1);
    ck_assert_int_eq(backend_opencl_new(&model, kv, 16, 16, &be), HEARTH_E_INVALID);
    unsetenv("HEARTH_OPENCL_GEMM");
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "HEARTH_OPENCL_GEMM='fastest' is not a "
                                                      "prefill path (clblast, exact, tiled or gemv)"));
    ck_assert_ptr_null(kv->layers[0].k_dev);
    kv_cache_free(kv);
    ocl_device_close(om.dev);
}
END_TEST

START_TEST(test_gemv)
{
    static const int64_t toks[] = {7};
    matmul_all_types("gemv", toks, 1);
}
END_TEST

START_TEST(test_gemm_tiled)
{
    static const int64_t toks[] = {5, 21};
    matmul_all_types("tiled", toks, 2);
}
END_TEST

START_TEST(test_gemm_clblast)
{
    static const int64_t toks[] = {5, 21};
    matmul_all_types("clblast", toks, 2);
}
END_TEST

/* ---- norms, RoPE and elementwise operations ---------------------------------------------- */

START_TEST(test_rmsnorm)
{
    struct fixture f;
    fixture_open(&f, NULL, NULL, HEARTH_TYPE_F16, 8);
    test_rng rng;
    test_rng_seed(&rng, 5);
    static const int64_t widths[] = {1, 37, 64, 256, 1000};
    for (size_t wi = 0; wi < HEARTH_ARRAY_LEN(widths); wi++)
        for (int64_t rows = 1; rows <= 9; rows += 4) {
            const int64_t n = widths[wi];
            float *x = random_floats(&rng, (size_t)(rows * n), 3.0);
            float *g = random_floats(&rng, (size_t)n, 1.0);
            struct weight w = {.name = "norm", .type = HEARTH_TYPE_F32, .n_in = n, .n_out = 1,
                               .row_bytes = (size_t)n * 4, .data = g};
            w.dev = upload_bytes(&f, g, (size_t)n * sizeof(float));
            struct pair in, out;
            pair_alloc(&f, &in, rows, n);
            pair_alloc(&f, &out, rows, n);
            pair_set(&f, &in, x, rows, n);
            ck_assert_int_eq(f.gpu->ops->rmsnorm(f.gpu, &out.gpu, &in.gpu, &w, 1e-5f), HEARTH_OK);
            ck_assert_int_eq(f.cpu->ops->rmsnorm(f.cpu, &out.cpu, &in.cpu, &w, 1e-5f), HEARTH_OK);
            pair_compare(&f, &out, 1e-6, 1e-5, "rmsnorm");
            /* in place */
            ck_assert_int_eq(f.gpu->ops->rmsnorm(f.gpu, &in.gpu, &in.gpu, &w, 1e-6f), HEARTH_OK);
            ck_assert_int_eq(f.cpu->ops->rmsnorm(f.cpu, &in.cpu, &in.cpu, &w, 1e-6f), HEARTH_OK);
            pair_compare(&f, &in, 1e-6, 1e-5, "rmsnorm in place");
            pair_free(&f, &in);
            pair_free(&f, &out);
            clReleaseMemObject(w.dev);
            free(x);
            free(g);
        }
    fixture_close(&f);
}
END_TEST

static void check_rope(enum rope_style style, int32_t n_heads, int32_t head_dim, int32_t n_dims,
                       bool factors, float base, float scale)
{
    struct fixture f;
    fixture_open(&f, NULL, NULL, HEARTH_TYPE_F16, 8);
    test_rng rng;
    test_rng_seed(&rng, (uint64_t)(n_heads * 1000 + head_dim));
    float *ff = NULL;
    struct rope_params rp = {style, n_dims, base, scale, NULL, 1.0f, 0.0f, 0.0f, 0.0f};
    if (factors) {
        ff = malloc((size_t)(n_dims / 2) * sizeof *ff);
        for (int i = 0; i < n_dims / 2; i++) ff[i] = (float)(1.0 + 7.0 * test_rng_uniform(&rng));
        rp.freq_factors = ff;
        f.model.rope_freqs.dev = upload_bytes(&f, ff, (size_t)(n_dims / 2) * sizeof(float));
    }
    const int64_t n_tok = 6, width = (int64_t)n_heads * head_dim;
    int32_t pos[6] = {0, 1, 2, 17, 4095, 100000};
    struct batch_pos bp = one_sequence(pos, n_tok);
    float *x = random_floats(&rng, (size_t)(n_tok * width), 1.0);
    struct pair p;
    pair_alloc(&f, &p, n_tok, width);
    pair_set(&f, &p, x, n_tok, width);
    ck_assert_int_eq(f.gpu->ops->rope(f.gpu, &p.gpu, n_heads, head_dim, &rp, &bp), HEARTH_OK);
    ck_assert_int_eq(f.cpu->ops->rope(f.cpu, &p.cpu, n_heads, head_dim, &rp, &bp), HEARTH_OK);
    /* without double precision on the device the angle is rounded once more */
    pair_compare(&f, &p, 1e-4, 1e-4, style == ROPE_NEOX ? "rope (NeoX)" : "rope (normal)");
    pair_free(&f, &p);
    free(x);
    free(ff);
    fixture_close(&f);
}

START_TEST(test_rope)
{
    check_rope(ROPE_NORMAL, 4, 8, 8, false, 10000.0f, 1.0f);
    check_rope(ROPE_NEOX, 3, 64, 64, false, 1000000.0f, 1.0f);
    check_rope(ROPE_NORMAL, 2, 80, 32, true, 500000.0f, 0.25f);   /* partial, factors, scaled */
    check_rope(ROPE_NEOX, 5, 128, 96, true, 10000.0f, 1.0f);
}
END_TEST

START_TEST(test_elementwise)
{
    struct fixture f;
    fixture_open(&f, NULL, NULL, HEARTH_TYPE_F16, 8);
    test_rng rng;
    test_rng_seed(&rng, 77);
    static const int64_t widths[] = {1, 7, 64, 333};
    for (size_t wi = 0; wi < HEARTH_ARRAY_LEN(widths); wi++) {
        const int64_t n = widths[wi], rows = 5;
        float *a = random_floats(&rng, (size_t)(rows * n), 4.0);
        float *b = random_floats(&rng, (size_t)(rows * n), 4.0);
        float *bias = random_floats(&rng, (size_t)n, 1.0);
        struct pair pa, pb, out;
        pair_alloc(&f, &pa, rows, n);
        pair_alloc(&f, &pb, rows, n);
        pair_alloc(&f, &out, rows, n);
        pair_set(&f, &pa, a, rows, n);
        pair_set(&f, &pb, b, rows, n);
        ck_assert_int_eq(f.gpu->ops->add(f.gpu, &out.gpu, &pa.gpu, &pb.gpu), HEARTH_OK);
        ck_assert_int_eq(f.cpu->ops->add(f.cpu, &out.cpu, &pa.cpu, &pb.cpu), HEARTH_OK);
        pair_compare(&f, &out, 0, 0, "add");
        ck_assert_int_eq(f.gpu->ops->swiglu(f.gpu, &out.gpu, &pa.gpu, &pb.gpu), HEARTH_OK);
        ck_assert_int_eq(f.cpu->ops->swiglu(f.cpu, &out.cpu, &pa.cpu, &pb.cpu), HEARTH_OK);
        pair_compare(&f, &out, 1e-6, 1e-5, "swiglu");
        /* in place, as the layer uses them */
        ck_assert_int_eq(f.gpu->ops->add(f.gpu, &pa.gpu, &pa.gpu, &pb.gpu), HEARTH_OK);
        ck_assert_int_eq(f.cpu->ops->add(f.cpu, &pa.cpu, &pa.cpu, &pb.cpu), HEARTH_OK);
        pair_compare(&f, &pa, 0, 0, "add in place");
        struct weight w = {.name = "bias", .type = HEARTH_TYPE_F32, .n_in = n, .n_out = 1,
                           .row_bytes = (size_t)n * 4, .data = bias};
        w.dev = upload_bytes(&f, bias, (size_t)n * sizeof(float));
        ck_assert_int_eq(f.gpu->ops->add_bias(f.gpu, &pb.gpu, &w), HEARTH_OK);
        ck_assert_int_eq(f.cpu->ops->add_bias(f.cpu, &pb.cpu, &w), HEARTH_OK);
        pair_compare(&f, &pb, 0, 0, "add_bias");
        for (int64_t first = 0; first < rows; first += 2) {
            const int64_t dst_first = first > 0 ? 1 : 0; /* into a row past the first, too */
            ck_assert_int_eq(f.gpu->ops->copy_rows(f.gpu, &out.gpu, dst_first, &pb.gpu, first, rows - first),
                             HEARTH_OK);
            ck_assert_int_eq(f.cpu->ops->copy_rows(f.cpu, &out.cpu, dst_first, &pb.cpu, first, rows - first),
                             HEARTH_OK);
            pair_compare(&f, &out, 0, 0, "copy_rows");
        }
        clReleaseMemObject(w.dev);
        pair_free(&f, &pa);
        pair_free(&f, &pb);
        pair_free(&f, &out);
        free(a);
        free(b);
        free(bias);
    }
    fixture_close(&f);
}
END_TEST

/* ---- attention ------------------------------------------------------------------------ */

/* Several batches into a fresh cache (prefill, then decode steps, then a
 * ragged batch), comparing the output of every batch. */
static void check_attention(hearth_type cache, int32_t n_head, int32_t n_head_kv, int32_t head_dim)
{
    struct hparams hp = {0};
    hp.n_layer = 2;
    hp.n_head = n_head;
    hp.n_head_kv = n_head_kv;
    hp.head_dim = head_dim;
    struct fixture f;
    const int32_t n_ctx = 160;
    fixture_open(&f, NULL, &hp, cache, n_ctx);
    test_rng rng;
    test_rng_seed(&rng, (uint64_t)(n_head * 100 + head_dim));
    const int64_t wq = (int64_t)n_head * head_dim, wkv = (int64_t)n_head_kv * head_dim;
    static const int64_t batches[] = {37, 1, 1, 70, 5, 1};
    const int64_t max_b = 70;
    struct pair q, k, v, out;
    pair_alloc(&f, &q, max_b, wq);
    pair_alloc(&f, &k, max_b, wkv);
    pair_alloc(&f, &v, max_b, wkv);
    pair_alloc(&f, &out, max_b, wq);
    int32_t pos[70];
    int32_t n_past = 0;
    const int il = 1; /* not the first layer: layer indexing is exercised */
    for (size_t bi = 0; bi < HEARTH_ARRAY_LEN(batches); bi++) {
        const int64_t n = batches[bi];
        for (int64_t t = 0; t < n; t++) pos[t] = n_past + (int32_t)t;
        struct batch_pos bp = one_sequence(pos, n);
        float *xq = random_floats(&rng, (size_t)(n * wq), 1.0);
        float *xk = random_floats(&rng, (size_t)(n * wkv), 1.0);
        float *xv = random_floats(&rng, (size_t)(n * wkv), 1.0);
        pair_set(&f, &q, xq, n, wq);
        pair_set(&f, &k, xk, n, wkv);
        pair_set(&f, &v, xv, n, wkv);
        hearth_status st = f.gpu->ops->attention(f.gpu, &out.gpu, &q.gpu, &k.gpu, &v.gpu, f.kv_dev, il,
                                                 &hp, NULL, &bp);
        ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
        ck_assert_int_eq(f.cpu->ops->attention(f.cpu, &out.cpu, &q.cpu, &k.cpu, &v.cpu, f.kv_cpu, il,
                                               &hp, NULL, &bp), HEARTH_OK);
        char what[96];
        snprintf(what, sizeof what, "attention %s %d/%d heads of %d, batch %zu",
                 hearth_type_name(cache), n_head, n_head_kv, head_dim, bi);
        pair_compare(&f, &out, 2e-5, 2e-4, what);
        n_past += (int32_t)n;
        free(xq);
        free(xk);
        free(xv);
    }
    /* rewinding: overwrite positions from 50 on, as a rewound context does */
    for (int64_t t = 0; t < 4; t++) pos[t] = 50 + (int32_t)t;
    struct batch_pos bp = one_sequence(pos, 4);
    float *xq = random_floats(&rng, (size_t)(4 * wq), 1.0);
    float *xk = random_floats(&rng, (size_t)(4 * wkv), 1.0);
    pair_set(&f, &q, xq, 4, wq);
    pair_set(&f, &k, xk, 4, wkv);
    pair_set(&f, &v, xk, 4, wkv);
    ck_assert_int_eq(f.gpu->ops->attention(f.gpu, &out.gpu, &q.gpu, &k.gpu, &v.gpu, f.kv_dev, il, &hp, NULL, &bp), HEARTH_OK);
    ck_assert_int_eq(f.cpu->ops->attention(f.cpu, &out.cpu, &q.cpu, &k.cpu, &v.cpu, f.kv_cpu, il, &hp, NULL, &bp), HEARTH_OK);
    pair_compare(&f, &out, 2e-5, 2e-4, "attention after a rewind");
    free(xq);
    free(xk);
    pair_free(&f, &q);
    pair_free(&f, &k);
    pair_free(&f, &v);
    pair_free(&f, &out);
    fixture_close(&f);
}

START_TEST(test_attention)
{
    check_attention(HEARTH_TYPE_F16, 8, 2, 32);
    check_attention(HEARTH_TYPE_F32, 8, 2, 32);
    check_attention(HEARTH_TYPE_F16, 4, 4, 8);
    check_attention(HEARTH_TYPE_F16, 6, 3, 80);    /* dims not a multiple of the group */
    check_attention(HEARTH_TYPE_F32, 2, 1, 128);
    check_attention(HEARTH_TYPE_F16, 1, 1, 256);
}
END_TEST

START_TEST(test_cache_type_refused)
{
    struct hearth_model model;
    struct ocl_model om;
    one_layer_model(2, &model, &om);
    struct kv_cache *kv;
    bool on_host[1] = {false};
    ck_assert_int_eq(kv_cache_new(HEARTH_TYPE_Q8_0, 16, 1, 1, &(struct kv_shape){2, 32, false, 0}, on_host, &kv), HEARTH_OK);
    struct hearth_backend *be;
    ck_assert_int_eq(backend_opencl_new(&model, kv, 16, 16, &be), HEARTH_E_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "KV cache type Q8_0 is not supported on OpenCL"));
    ck_assert_ptr_null(kv->layers[0].k_dev);
    kv_cache_free(kv);
    ocl_device_close(om.dev);
}
END_TEST

/* ---- devices and the program cache -------------------------------------------------------- */

START_TEST(test_devices)
{
    hearth_device_info *list;
    int32_t n;
    ck_assert_int_eq(hearth_devices(&list, &n), HEARTH_OK);
    ck_assert_int_gt(n, 0);
    for (int32_t i = 0; i < n; i++) {
        ck_assert_int_gt(strlen(list[i].name), 0);
        ck_assert_int_gt(list[i].global_mem_bytes, 0);
        ck_assert_int_gt(list[i].compute_units, 0);
        ck_assert_ptr_nonnull(strstr(list[i].version, "OpenCL"));
        /* GPUs are listed before CPUs */
        if (i > 0 && strcmp(list[i].type, "GPU") == 0) ck_assert_str_eq(list[i - 1].type, "GPU");
    }
    hearth_devices_free(list);
    struct ocl_device *dev;
    ck_assert_int_eq(ocl_device_open(n, &dev), HEARTH_E_INVALID);
    char want[64];
    snprintf(want, sizeof want, "OpenCL device %d does not exist", n);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), want));
    ck_assert_int_eq(ocl_device_open(-1, &dev), HEARTH_E_INVALID);
    ck_assert_int_eq(hearth_device_build(n + 3, NULL, NULL), HEARTH_E_INVALID);
    ck_assert_str_eq(ocl_error_name(-5), "CL_OUT_OF_RESOURCES");
    ck_assert_str_eq(ocl_error_name(-1001), "CL_PLATFORM_NOT_FOUND_KHR");
    ck_assert_str_eq(ocl_error_name(-4), "CL_MEM_OBJECT_ALLOCATION_FAILURE");
    ck_assert_int_eq(ocl_fail(-4, "x"), HEARTH_E_NOMEM);
    ck_assert_str_eq(hearth_last_error(), "x: CL_MEM_OBJECT_ALLOCATION_FAILURE (-4)");
    ck_assert_int_eq(ocl_fail(-11, "y"), HEARTH_E_BACKEND);
}
END_TEST

/* Every file of the cache directory overwritten with `junk` (truncated
 * to `keep` bytes when keep >= 0). */
static int spoil_cache(const char *dir, const char *junk, long keep)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".bin")) continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (keep >= 0) {
            ck_assert_int_eq(truncate(path, keep), 0);
        } else {
            FILE *f = fopen(path, "r+b");
            ck_assert_ptr_nonnull(f);
            fseek(f, -64, SEEK_END);   /* inside the binary: only the checksum can tell */
            fwrite(junk, 1, strlen(junk), f);
            fclose(f);
        }
        n++;
    }
    closedir(d);
    return n;
}

/* Every entry of the cache directory given a well-formed header and a
 * correct checksum around a binary that is no program: only the driver
 * can tell (program_cache.c's format: magic, u32 key length, key, u64
 * size, u64 FNV-1a checksum, binary). */
static int forge_cache(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".bin")) continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        ck_assert_ptr_nonnull(f);
        unsigned char head[8 + 4 + 4096];
        size_t got = fread(head, 1, sizeof head, f);
        fclose(f);
        uint32_t key_len;
        ck_assert_uint_ge(got, 12);
        memcpy(&key_len, head + 8, sizeof key_len);
        ck_assert_uint_le(12 + (size_t)key_len, got);
        unsigned char junk[64];
        for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)(i * 37 + 11);
        uint64_t size = sizeof junk, sum = 0xcbf29ce484222325ull;
        for (size_t i = 0; i < sizeof junk; i++) {
            sum ^= junk[i];
            sum *= 0x100000001b3ull;
        }
        f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        ck_assert_uint_eq(fwrite(head, 1, 12 + key_len, f), 12 + key_len);
        ck_assert_uint_eq(fwrite(&size, sizeof size, 1, f), 1);
        ck_assert_uint_eq(fwrite(&sum, sizeof sum, 1, f), 1);
        ck_assert_uint_eq(fwrite(junk, 1, sizeof junk, f), sizeof junk);
        ck_assert_int_eq(fclose(f), 0);
        n++;
    }
    closedir(d);
    return n;
}

START_TEST(test_program_cache)
{
    char dir[] = "/tmp/hearth-clcache-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char sub[sizeof dir + 16];
    snprintf(sub, sizeof sub, "%s/a/b", dir);   /* created on demand */
    setenv("HEARTH_OPENCL_CACHE", sub, 1);
    double ms;
    bool cached;
    ck_assert_int_eq(hearth_device_build(0, &ms, &cached), HEARTH_OK);
    ck_assert(!cached);
    ck_assert_int_eq(hearth_device_build(0, &ms, &cached), HEARTH_OK);
    ck_assert(cached);
    /* a corrupt entry is rebuilt and replaced, never loaded */
    ck_assert_int_eq(spoil_cache(sub, "garbage garbage garbage", -1), 1);
    ck_assert_int_eq(hearth_device_build(0, &ms, &cached), HEARTH_OK);
    ck_assert(!cached);
    ck_assert_int_eq(hearth_device_build(0, &ms, &cached), HEARTH_OK);
    ck_assert(cached);
    ck_assert_int_eq(spoil_cache(sub, NULL, 20), 1);      /* truncated */
    ck_assert_int_eq(hearth_device_build(0, &ms, &cached), HEARTH_OK);
    ck_assert(!cached);
    ck_assert_int_eq(spoil_cache(sub, NULL, 0), 1);       /* empty */
    ck_assert_int_eq(hearth_device_build(0, &ms, &cached), HEARTH_OK);
    ck_assert(!cached);
    ck_assert_int_eq(forge_cache(sub), 1);                 /* refused by the driver */
    ck_assert_int_eq(hearth_device_build(0, &ms, &cached), HEARTH_OK);
    ck_assert(!cached);
    ck_assert_int_eq(hearth_device_build(0, &ms, &cached), HEARTH_OK);
    ck_assert(cached);
    /* extra compiler options make their own entry; a failing build says
     * why, with the compiler's words, and leaves no entry behind */
    setenv("HEARTH_OPENCL_BUILD_OPTIONS", "-DHEARTH_UNUSED=1", 1);
    ck_assert_int_eq(hearth_device_build(0, &ms, &cached), HEARTH_OK);
    ck_assert(!cached);
    ck_assert_int_eq(hearth_device_build(0, &ms, &cached), HEARTH_OK);
    ck_assert(cached);
    setenv("HEARTH_OPENCL_BUILD_OPTIONS", "-D__kernel=hearth_broken", 1);
    ck_assert_int_eq(hearth_device_build(0, &ms, &cached), HEARTH_E_BACKEND);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "failed: CL_BUILD_PROGRAM_FAILURE (-11); build log: "));
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "hearth_broken"));
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "device 0 ("));
    ck_assert_int_eq(hearth_device_build(0, &ms, &cached), HEARTH_E_BACKEND);
    unsetenv("HEARTH_OPENCL_BUILD_OPTIONS");
    ck_assert_int_eq(hearth_device_build(0, &ms, &cached), HEARTH_OK);
    ck_assert(cached);
    /* the cache can be turned off */
    setenv("HEARTH_OPENCL_CACHE", "off", 1);
    ck_assert_ptr_null(ocl_cache_dir());
    ck_assert_int_eq(hearth_device_build(0, &ms, &cached), HEARTH_OK);
    ck_assert(!cached);
    /* an unwritable cache directory is not an error */
    setenv("HEARTH_OPENCL_CACHE", "/proc/hearth-no-such-dir", 1);
    ck_assert_int_eq(hearth_device_build(0, &ms, &cached), HEARTH_OK);
    ck_assert(!cached);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* HEARTH_OPENCL_MEM_LIMIT and the buffers counted against it. */
START_TEST(test_device_memory)
{
    static const struct {
        const char *text;
        unsigned long long bytes; /* 0: refused */
    } limits[] = {
        {"12345", 12345}, {"1K", 1024}, {"3m", 3u << 20}, {"2G", 2ull << 30}, {"1t", 1ull << 40},
        {"x", 0}, {"1X", 0}, {"-1", 0}, {"0", 0}, {"1KK", 0}, {" 1", 0}, {"1 ", 0},
        {"99999999999999999999", 0}, {"16777216T", 0},
    };
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(limits); i++) {
        setenv("HEARTH_OPENCL_MEM_LIMIT", limits[i].text, 1);
        cl_ulong limit = 7;
        hearth_status st = ocl_mem_limit_from_env(&limit);
        if (limits[i].bytes) {
            ck_assert_msg(st == HEARTH_OK && limit == limits[i].bytes, "%s: %llu", limits[i].text,
                          (unsigned long long)limit);
        } else {
            ck_assert_msg(st == HEARTH_E_INVALID, "%s accepted", limits[i].text);
            ck_assert_ptr_nonnull(strstr(hearth_last_error(), "is not a byte count"));
        }
    }
    setenv("HEARTH_OPENCL_MEM_LIMIT", "", 1);
    cl_ulong limit = 7;
    ck_assert_int_eq(ocl_mem_limit_from_env(&limit), HEARTH_OK);
    ck_assert_uint_eq(limit, 0);
    struct ocl_device *dev;
    setenv("HEARTH_OPENCL_MEM_LIMIT", "junk", 1);
    ck_assert_int_eq(ocl_device_open(0, &dev), HEARTH_E_INVALID);

    setenv("HEARTH_OPENCL_MEM_LIMIT", "1M", 1);
    ck_assert_int_eq(ocl_device_open(0, &dev), HEARTH_OK);
    unsetenv("HEARTH_OPENCL_MEM_LIMIT");
    ck_assert_uint_eq(dev->mem_budget_bytes, HEARTH_MIN(1u << 20, dev->info.global_mem_bytes));
    cl_mem a, b;
    ck_assert_int_eq(ocl_buffer_new(dev, CL_MEM_READ_WRITE, 600 << 10, "buffer a", &a), HEARTH_OK);
    ck_assert_uint_eq(ocl_mem_used(dev), 600 << 10);
    ck_assert_int_eq(ocl_mem_check(dev, 400 << 10, "more"), HEARTH_OK);
    ck_assert_int_eq(ocl_buffer_new(dev, CL_MEM_READ_WRITE, 600 << 10, "buffer b", &b), HEARTH_E_NOMEM);
    ck_assert_ptr_null(b);
    char want[512];
    snprintf(want, sizeof want, "not enough memory on OpenCL device 0 (%s) for buffer b: %u bytes "
             "needed, %u available (HEARTH_OPENCL_MEM_LIMIT 1048576 bytes, device memory ",
             dev->info.name, 600u << 10, (1u << 20) - (600u << 10));
    ck_assert_msg(strstr(hearth_last_error(), want), "%s", hearth_last_error());
    ck_assert_uint_eq(ocl_mem_used(dev), 600 << 10);   /* the refusal holds nothing */
    ocl_buffer_free(dev, a);
    ck_assert_uint_eq(ocl_mem_used(dev), 0);
    ck_assert_int_eq(ocl_buffer_new(dev, CL_MEM_READ_WRITE, 600 << 10, "buffer b", &b), HEARTH_OK);
    ocl_buffer_free(dev, b);
    ocl_buffer_free(dev, NULL);
    ck_assert_uint_eq(ocl_mem_used(dev), 0);
    /* larger than one buffer may be */
    ck_assert_int_eq(ocl_buffer_new(dev, CL_MEM_READ_WRITE, (size_t)dev->max_alloc_bytes + 1,
                                    "a huge buffer", &b), HEARTH_E_NOMEM);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "CL_DEVICE_MAX_MEM_ALLOC_SIZE"));
    ocl_device_close(dev);
}
END_TEST

static Suite *opencl_suite(void)
{
    Suite *s = suite_create("opencl");
    TCase *tc = tcase_create("kernels");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, test_devices);
    tcase_add_test(tc, test_dequantize_exact);
    tcase_add_test(tc, test_matmul);
    tcase_add_test(tc, test_gemv);
    tcase_add_test(tc, test_gemm_tiled);
    tcase_add_test(tc, test_gemm_clblast);
    tcase_add_test(tc, test_gemm_exact);
    tcase_add_test(tc, test_matmul_packed_order);
    tcase_add_test(tc, test_gemm_unknown);
    tcase_add_test(tc, test_rmsnorm);
    tcase_add_test(tc, test_rope);
    tcase_add_test(tc, test_elementwise);
    tcase_add_test(tc, test_attention);
    tcase_add_test(tc, test_cache_type_refused);
    tcase_add_test(tc, test_program_cache);
    tcase_add_test(tc, test_device_memory);
    suite_add_tcase(s, tc);
    return s;
}
#endif /* HAVE_OPENCL */

int main(void)
{
    int status = test_opencl_status();
    if (status != 0) return status;
#ifdef HAVE_OPENCL
    unsetenv("HEARTH_OPENCL_MEM_LIMIT");
    unsetenv("HEARTH_OPENCL_BUILD_OPTIONS");
    return test_run_suite(opencl_suite());
#else
    return 77;
#endif
}

/*
 * backend_opencl.c -- the OpenCL backend: the layer operations of
 * src/backend/backend.h on device buffers, with the kernels of opencl/kernels/.
 *
 * One backend per context: its own in-order command queue and kernel
 * objects (kernel arguments are per object, so contexts on other threads
 * never share one), over the model's device, program and weights.
 * Operations are only enqueued; the hidden state and the logits are read
 * back with blocking reads, which is also where errors of earlier kernels
 * surface.
 *
 * The operations compute what the CPU backend computes, in the same
 * order where the CPU fixes one, so that offloading changes the results
 * as little as possible.  Quantized weights multiply activations
 * converted to the CPU's activation format (activations.cl) in the CPU's
 * summation order (matmul_exact.cl): on a device with double precision
 * these products are bit-identical to the CPU's.  Float weights (F32,
 * F16, BF16), whose CPU products promise agreement only within rounding,
 * use GEMV for batches of up to GEMV_MAX_TOKENS tokens and CLBlast's SGEMM
 * for prefill.
 *
 * HEARTH_OPENCL_GEMM chooses another prefill path for every weight type:
 * clblast (CLBlast's SGEMM on weight tiles expanded to floats on the
 * device, with the activations rounded as the CPU rounds them), tiled (our
 * tiled kernel) or gemv; exact names the default.  CLBlast is the fastest
 * prefill on the devices measured, but it is not the default: its float
 * sums move the perplexity of the most sensitive test models by up to 1%
 * and make a prefill differ from the same tokens decoded one at a time by
 * more than float tolerance, which the exact kernels do not (see
 * hearth-devices(1) for the numbers).  When CLBlast cannot build its
 * kernels for the device, quantized weights use the exact kernels and
 * float weights the tiled kernel instead.
 */
#include "ocl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <clblast_c.h>

#include "backend.h"
#include "kernels.h"
#include "kv_cache.h"

#define GEMV_MAX_TOKENS 4
#define GEMM_TILE 16                     /* matmul.cl */
#define EXACT_ROWS 8                     /* matmul_exact.cl */
#define CLBLAST_TILE_FLOATS (1u << 22)   /* 16 MiB of dequantized weights at a time */
#define SCORE_FLOATS (1u << 22)          /* attention scores of a token chunk */

/* How a matrix product runs.  Batches of more than GEMV_MAX_TOKENS tokens
 * follow HEARTH_OPENCL_GEMM: EXACT (the default) uses the exact kernels
 * for quantized weights and CLBlast for float weights; TILED, CLBLAST and
 * GEMV apply to every weight type.  Smaller batches use GEMV_EXACT: the
 * exact kernels for quantized weights, GEMV for float weights. */
enum prefill_path { PREFILL_EXACT, PREFILL_TILED, PREFILL_CLBLAST, PREFILL_GEMV, PREFILL_GEMV_EXACT };
#define PREFILL_DEFAULT PREFILL_EXACT

enum kernel_id {
    K_RMSNORM, K_ROPE, K_KV_STORE_F32, K_KV_STORE_F16, K_ATTENTION_F32, K_ATTENTION_F16,
    K_ADD, K_ADD_BIAS, K_SWIGLU, K_ACT_Q8_0, K_ACT_Q8_K, K_QUANT_Q8_0, K_QUANT_Q8_K, K_FIXED_COUNT
};

static const char *const fixed_kernel_names[K_FIXED_COUNT] = {
    "rmsnorm", "rope", "kv_store_f32", "kv_store_f16", "attention_f32", "attention_f16",
    "vec_add", "add_bias", "swiglu", "act_round_q8_0", "act_round_q8_k", "act_quantize_q8_0",
    "act_quantize_q8_k",
};

enum matmul_kind {
    MM_GEMV, MM_GEMM, MM_DEQUANT, MM_EXACT_GEMV, MM_EXACT_GEMM, MM_PACKED_GEMV, MM_PACKED_GEMM, MM_KINDS
};
static const char *const matmul_prefix[MM_KINDS] = {"gemv", "gemm", "dequant", "exact_gemv",
                                                    "exact_gemm", "packed_gemv", "packed_gemm"};

struct ocl_backend {
    const hearth_model *model;
    struct ocl_device *dev;
    cl_command_queue queue;
    cl_kernel fixed[K_FIXED_COUNT];
    cl_kernel matmul[MM_KINDS][HEARTH_TYPE_COUNT];
    size_t wg_rows;               /* work-group size of the row reductions */
    size_t wg_gemv[HEARTH_TYPE_COUNT];
    int tiled_ok[HEARTH_TYPE_COUNT]; /* 0 unknown, 1 runs, -1 group too large here */
    size_t wg_attention;
    size_t wg_elem;               /* elementwise kernels */
    enum prefill_path prefill;
    bool clblast_worked;          /* an SGEMM has succeeded on this backend */
    bool clblast_unusable;        /* CLBlast cannot build its kernels here */
    CLBlastStatusCode clblast_status; /* of the last failed SGEMM */
    cl_mem pos;                   /* the batch's places: positions, slots, the
                                   * block-table offset of each row, then the
                                   * block tables */
    int32_t *pos_host;            /* what pos holds */
    int64_t pos_n, pos_capacity;  /* ints */
    cl_mem tile;                  /* dequantized weights for CLBlast */
    size_t tile_floats;
    cl_mem xq;                    /* activations rounded to their product format */
    size_t xq_bytes;
    cl_mem aq;                    /* activation quants, one byte each, and */
    size_t aq_bytes;
    cl_mem ad;                    /* their block scales, for the exact products */
    size_t ad_bytes;
    cl_mem scores;                /* attention scores */
    size_t scores_bytes;
    struct kv_cache *kv;
    int32_t first_layer;
    int32_t n_ctx;                /* most positions of one sequence */
};

static struct ocl_backend *impl(struct hearth_backend *be)
{
    return be->impl;
}

static cl_mem mem(const struct act *a)
{
    return (cl_mem)a->dev;
}

/* ---- kernels and launches ------------------------------------------------------------ */

static hearth_status kernel_by_name(struct ocl_backend *b, const char *name, cl_kernel *slot)
{
    if (*slot) return HEARTH_OK;
    cl_int err;
    *slot = clCreateKernel(b->dev->program, name, &err);
    if (!*slot) return ocl_fail(err, "creating OpenCL kernel %s", name);
    return HEARTH_OK;
}

static hearth_status fixed_kernel(struct ocl_backend *b, enum kernel_id id, cl_kernel *out)
{
    HEARTH_TRY(kernel_by_name(b, fixed_kernel_names[id], &b->fixed[id]));
    *out = b->fixed[id];
    return HEARTH_OK;
}

/* "gemv_q4_k" for (MM_GEMV, Q4_K). */
static hearth_status matmul_kernel(struct ocl_backend *b, enum matmul_kind kind, hearth_type type,
                                   cl_kernel *out)
{
    char name[64];
    const char *t = hearth_type_name(type);
    size_t n = (size_t)snprintf(name, sizeof name, "%s_", matmul_prefix[kind]);
    for (; *t && n + 1 < sizeof name; t++) name[n++] = (char)(*t >= 'A' && *t <= 'Z' ? *t - 'A' + 'a' : *t);
    name[n] = '\0';
    HEARTH_TRY(kernel_by_name(b, name, &b->matmul[kind][type]));
    *out = b->matmul[kind][type];
    return HEARTH_OK;
}

/* One kernel argument: a value of `size` bytes, or local memory of `size`
 * bytes when ptr is NULL. */
struct karg {
    size_t size;
    const void *ptr;
};
#define ARG(v) {sizeof(v), &(v)}
#define LOCAL_FLOATS(n) {(size_t)(n) * sizeof(float), NULL}

static hearth_status run(struct ocl_backend *b, cl_kernel k, const struct karg *args, cl_uint n_args,
                         cl_uint dims, const size_t *global, const size_t *local)
{
    for (cl_uint i = 0; i < n_args; i++) {
        cl_int err = clSetKernelArg(k, i, args[i].size, args[i].ptr);
        if (err != CL_SUCCESS) {
            char name[64] = "?";
            clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
            return ocl_fail(err, "setting argument %u of OpenCL kernel %s", i, name);
        }
    }
    for (cl_uint d = 0; d < dims; d++)
        if (global[d] == 0) return HEARTH_OK; /* nothing to do */
    cl_int err = clEnqueueNDRangeKernel(b->queue, k, dims, NULL, global, local, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        char name[64] = "?";
        clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
        return ocl_fail(err, "running OpenCL kernel %s", name);
    }
    return HEARTH_OK;
}

static size_t round_up(size_t n, size_t m)
{
    return (n + m - 1) / m * m;
}

/* A kernel with one item per element (n of them, passed as its last
 * argument), in work-groups of wg_elem items. */
static hearth_status run_items(struct ocl_backend *b, cl_kernel k, const struct karg *args,
                               cl_uint n_args, size_t n)
{
    if (n > INT32_MAX)
        return hearth_error(HEARTH_E_UNSUPPORTED, "%zu elements are too many for one kernel launch", n);
    const size_t global[1] = {round_up(n, b->wg_elem)};
    const size_t local[1] = {b->wg_elem};
    return run(b, k, args, n_args, 1, global, local);
}

/* The places of a batch of n rows as the kernels read them, in one
 * buffer: pos[0 .. n), slot[n .. 2n), then per row the offset of its
 * sequence's block table within the tables that follow from 3n on. */
static hearth_status upload_positions(struct ocl_backend *b, const struct batch_pos *bp)
{
    const int64_t n = bp->n_tokens;
    const int32_t B = b->kv->block_tokens;
    /* the tables up to the last block any row reads */
    int64_t n_table = 0;
    for (int32_t s = 0; s < bp->n_seqs; s++)
        if (bp->seq_start[s + 1] > bp->seq_start[s])
            n_table = HEARTH_MAX(n_table, (int64_t)bp->table_start[s] + bp->pos[bp->seq_start[s + 1] - 1] / B + 1);
    const int64_t need = 3 * n + n_table;
    if (need > b->pos_capacity) {
        cl_mem m;
        HEARTH_TRY(ocl_buffer_new(b->dev, CL_MEM_READ_ONLY, (size_t)need * sizeof(cl_int),
                                  "token positions", &m));
        int32_t *h = hearth_realloc(b->pos_host, (size_t)need * 2 * sizeof *h, "token positions");
        if (!h) {
            ocl_buffer_free(b->dev, m);
            return HEARTH_E_NOMEM;
        }
        ocl_buffer_free(b->dev, b->pos);
        b->pos = m;
        b->pos_host = h;
        b->pos_capacity = need;
        b->pos_n = 0;
    }
    /* build the new places after the ones the device holds, to compare */
    int32_t *next = b->pos_host + b->pos_capacity;
    memcpy(next, bp->pos, (size_t)n * sizeof(int32_t));
    memcpy(next + n, bp->slot, (size_t)n * sizeof(int32_t));
    for (int32_t s = 0; s < bp->n_seqs; s++)
        for (int32_t t = bp->seq_start[s]; t < bp->seq_start[s + 1]; t++) next[2 * n + t] = bp->table_start[s];
    if (n_table > 0) memcpy(next + 3 * n, bp->blocks, (size_t)n_table * sizeof(int32_t));
    if (need == b->pos_n && memcmp(next, b->pos_host, (size_t)need * sizeof(int32_t)) == 0)
        return HEARTH_OK;
    memcpy(b->pos_host, next, (size_t)need * sizeof(int32_t));
    b->pos_n = need;
    cl_int err = clEnqueueWriteBuffer(b->queue, b->pos, CL_TRUE, 0, (size_t)need * sizeof(cl_int),
                                      b->pos_host, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        b->pos_n = 0;
        return ocl_fail(err, "uploading token positions");
    }
    return HEARTH_OK;
}

/* The largest power of two <= limit and <= want. */
static size_t pow2_at_most(size_t limit, size_t want)
{
    size_t p = 1;
    while (p * 2 <= limit && p * 2 <= want) p *= 2;
    return p;
}

/* The work-group size a kernel can run with on this device. */
static hearth_status kernel_group_limit(struct ocl_backend *b, cl_kernel k, size_t *limit)
{
    size_t n = 0;
    cl_int err = clGetKernelWorkGroupInfo(k, b->dev->id, CL_KERNEL_WORK_GROUP_SIZE, sizeof n, &n, NULL);
    if (err != CL_SUCCESS) return ocl_fail(err, "querying a kernel's work-group size");
    *limit = n < b->dev->max_work_group ? n : b->dev->max_work_group;
    return HEARTH_OK;
}

/* ---- buffers --------------------------------------------------------------------- */

static hearth_status ocl_act_alloc(struct hearth_backend *be, struct act *a, int64_t rows, int64_t width)
{
    struct ocl_backend *b = impl(be);
    size_t n;
    if (rows <= 0 || width <= 0 || hearth_mul_overflow((size_t)rows, (size_t)width, &n) ||
        n > SIZE_MAX / sizeof(float))
        return hearth_error(HEARTH_E_INVALID, "activation buffer of %lld x %lld is invalid",
                            (long long)rows, (long long)width);
    cl_mem m;
    HEARTH_TRY(ocl_buffer_new(b->dev, CL_MEM_READ_WRITE, n * sizeof(float), "activations", &m));
    memset(a, 0, sizeof *a);
    a->dev = m;
    a->rows = rows;
    a->width = width;
    a->capacity = (int64_t)n;
    return HEARTH_OK;
}

static void ocl_act_free(struct hearth_backend *be, struct act *a)
{
    ocl_buffer_free(impl(be)->dev, mem(a));
    memset(a, 0, sizeof *a);
}

static hearth_status check_fits(const struct act *a, int64_t rows, int64_t width, const char *what)
{
    if (rows < 0 || width <= 0 || rows * width > a->capacity)
        return hearth_error(HEARTH_E_INTERNAL, "%s: %lld x %lld floats do not fit a device buffer "
                            "of %lld", what, (long long)rows, (long long)width,
                            (long long)a->capacity);
    return HEARTH_OK;
}

static hearth_status ocl_act_upload(struct hearth_backend *be, struct act *dst, const float *src, int64_t rows)
{
    HEARTH_TRY(check_fits(dst, rows, dst->width, "upload"));
    cl_int err = clEnqueueWriteBuffer(impl(be)->queue, mem(dst), CL_TRUE, 0,
                                      (size_t)(rows * dst->width) * sizeof(float), src, 0, NULL, NULL);
    if (err != CL_SUCCESS) return ocl_fail(err, "copying the hidden state to the device");
    dst->rows = rows;
    return HEARTH_OK;
}

static hearth_status ocl_act_download(struct hearth_backend *be, float *dst, const struct act *src, int64_t rows)
{
    HEARTH_TRY(check_fits(src, rows, src->width, "download"));
    cl_int err = clEnqueueReadBuffer(impl(be)->queue, mem(src), CL_TRUE, 0,
                                     (size_t)(rows * src->width) * sizeof(float), dst, 0, NULL, NULL);
    if (err != CL_SUCCESS) return ocl_fail(err, "reading results back from the device");
    return HEARTH_OK;
}

static hearth_status ocl_copy_rows(struct hearth_backend *be, struct act *dst, int64_t dst_first,
                                   const struct act *src, int64_t first, int64_t n_rows)
{
    HEARTH_TRY(check_fits(src, first + n_rows, src->width, "copy_rows source"));
    HEARTH_TRY(check_fits(dst, dst_first + n_rows, src->width, "copy_rows destination"));
    const size_t row = (size_t)src->width * sizeof(float);
    if (n_rows > 0) {
        cl_int err = clEnqueueCopyBuffer(impl(be)->queue, mem(src), mem(dst), (size_t)first * row,
                                         (size_t)dst_first * row, (size_t)n_rows * row, 0, NULL, NULL);
        if (err != CL_SUCCESS) return ocl_fail(err, "copying rows on the device");
    }
    dst->rows = dst_first + n_rows;
    dst->width = src->width;
    return HEARTH_OK;
}

/* ---- matrix product -------------------------------------------------------------------- */

static hearth_status matmul_gemv(struct ocl_backend *b, struct act *out, const struct weight *w,
                                 const struct act *in, cl_mem x)
{
    cl_kernel k;
    HEARTH_TRY(matmul_kernel(b, MM_GEMV, w->type, &k));
    size_t wg = b->wg_gemv[w->type];
    if (!wg) {
        size_t limit;
        HEARTH_TRY(kernel_group_limit(b, k, &limit));
        wg = b->wg_gemv[w->type] = pow2_at_most(limit, 64);
    }
    cl_mem wm = w->dev, y = mem(out);
    cl_uint row_bytes = (cl_uint)w->row_bytes;
    cl_int n_in = (cl_int)w->n_in, n_out = (cl_int)w->n_out;
    const struct karg args[] = {ARG(wm), ARG(row_bytes), ARG(n_in), ARG(n_out), ARG(x), ARG(y),
                                LOCAL_FLOATS(wg)};
    const size_t global[2] = {(size_t)w->n_out * wg, (size_t)in->rows};
    const size_t local[2] = {wg, 1};
    return run(b, k, args, 7, 2, global, local);
}

static hearth_status matmul_tiled(struct ocl_backend *b, struct act *out, const struct weight *w,
                                  const struct act *in, cl_mem x)
{
    cl_kernel k;
    HEARTH_TRY(matmul_kernel(b, MM_GEMM, w->type, &k));
    cl_mem wm = w->dev, y = mem(out);
    cl_uint row_bytes = (cl_uint)w->row_bytes;
    cl_int n_in = (cl_int)w->n_in, n_out = (cl_int)w->n_out, n_tok = (cl_int)in->rows;
    const struct karg args[] = {ARG(wm), ARG(row_bytes), ARG(n_in), ARG(n_out), ARG(x), ARG(y),
                                ARG(n_tok)};
    const size_t global[2] = {round_up((size_t)w->n_out, GEMM_TILE), round_up((size_t)in->rows, GEMM_TILE)};
    const size_t local[2] = {GEMM_TILE, GEMM_TILE};
    return run(b, k, args, 7, 2, global, local);
}

static hearth_status clblast_fail(struct ocl_backend *b, CLBlastStatusCode status, const struct weight *w)
{
    b->clblast_status = status;
    return ocl_fail((cl_int)status, "CLBlast SGEMM for tensor '%s'", w->name);
}

/* Failures that say CLBlast cannot run on this device at all, as opposed
 * to failures of the device (memory, a lost device). */
static bool clblast_unusable(CLBlastStatusCode status)
{
    return status == CLBlastOpenCLBuildProgramFailure || status == CLBlastNotImplemented ||
           status == CLBlastDatabaseError || status == CLBlastInvalidLocalMemUsage ||
           status == CLBlastInvalidLocalThreadsTotal || status == CLBlastInvalidLocalThreadsDim ||
           status == CLBlastUnknownError || status == CLBlastUnexpectedError;
}

/* The floats of the CLBlast path's tile of dequantized weights for an
 * n_out x n_in weight (matmul_clblast). */
static size_t clblast_tile_floats(size_t n_in, size_t n_out)
{
    size_t tile_rows = CLBLAST_TILE_FLOATS / n_in;
    if (tile_rows < GEMM_TILE) tile_rows = GEMM_TILE;
    if (tile_rows > n_out) tile_rows = n_out;
    return tile_rows * n_in;
}

/* out = in x W^T with W in row tiles expanded to floats on the device
 * (F32 weights are used as they are). */
static hearth_status matmul_clblast(struct ocl_backend *b, struct act *out, const struct weight *w,
                                    const struct act *in, cl_mem x)
{
    const size_t n_tok = (size_t)in->rows, n_in = (size_t)w->n_in, n_out = (size_t)w->n_out;
    if (w->type == HEARTH_TYPE_F32) {
        CLBlastStatusCode s = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo,
                                           CLBlastTransposeYes, n_tok, n_out, n_in, 1.0f, x, 0,
                                           n_in, (cl_mem)w->dev, 0, n_in, 0.0f, mem(out), 0, n_out,
                                           &b->queue, NULL);
        return s == CLBlastSuccess ? HEARTH_OK : clblast_fail(b, s, w);
    }
    const size_t need = clblast_tile_floats(n_in, n_out), tile_rows = need / n_in;
    if (need > b->tile_floats) {
        cl_mem t;
        ocl_buffer_free(b->dev, b->tile);
        b->tile = NULL;
        b->tile_floats = 0;
        HEARTH_TRY(ocl_buffer_new(b->dev, CL_MEM_READ_WRITE, need * sizeof(float),
                                  "dequantized weights", &t));
        b->tile = t;
        b->tile_floats = need;
    }
    cl_kernel k;
    HEARTH_TRY(matmul_kernel(b, MM_DEQUANT, w->type, &k));
    cl_mem wm = w->dev;
    cl_uint row_bytes = (cl_uint)w->row_bytes;
    cl_int n_in_arg = (cl_int)n_in;
    for (size_t r0 = 0; r0 < n_out; r0 += tile_rows) {
        const size_t rows = HEARTH_MIN(tile_rows, n_out - r0);
        cl_int row0 = (cl_int)r0, n_rows = (cl_int)rows;
        const struct karg args[] = {ARG(wm), ARG(row_bytes), ARG(n_in_arg), ARG(row0), ARG(n_rows),
                                    ARG(b->tile)};
        HEARTH_TRY(run_items(b, k, args, 6, (n_in + 31) / 32 * rows));
        CLBlastStatusCode s = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo,
                                           CLBlastTransposeYes, n_tok, rows, n_in, 1.0f, x, 0,
                                           n_in, b->tile, 0, n_in, 0.0f, mem(out), r0, n_out,
                                           &b->queue, NULL);
        if (s != CLBlastSuccess) return clblast_fail(b, s, w);
    }
    return HEARTH_OK;
}

/* A scratch buffer of at least `bytes`, grown (contents lost) as needed. */
static hearth_status scratch(struct ocl_backend *b, cl_mem *buf, size_t *have, size_t bytes,
                             const char *what)
{
    if (*have >= bytes) return HEARTH_OK;
    /* the old buffer goes first, so that it does not count twice */
    ocl_buffer_free(b->dev, *buf);
    *buf = NULL;
    *have = 0;
    cl_mem m;
    HEARTH_TRY(ocl_buffer_new(b->dev, CL_MEM_READ_WRITE, bytes, what, &m));
    *buf = m;
    *have = bytes;
    return HEARTH_OK;
}

/* The exact product of a quantized weight (matmul_exact.cl): activations
 * quantized to the CPU's format, then the CPU's summation order: that of
 * its packed kernels for the weights it would read packed (set at upload,
 * opencl/offload.c), else that of its lanes. */
static hearth_status matmul_exact(struct ocl_backend *b, struct act *out, const struct weight *w,
                                  const struct act *in, hearth_type act_type)
{
    const bool k_quant = act_type == HEARTH_TYPE_Q8_K;
    const int64_t block = k_quant ? 256 : 32;
    if (in->width % block != 0)
        return hearth_error(HEARTH_E_INTERNAL, "activation rows of %lld are not whole %s blocks",
                            (long long)in->width, hearth_type_name(act_type));
    const size_t n = (size_t)(in->rows * in->width), n_blocks = n / (size_t)block;
    HEARTH_TRY(scratch(b, &b->aq, &b->aq_bytes, n, "activation quants"));
    HEARTH_TRY(scratch(b, &b->ad, &b->ad_bytes, n_blocks * sizeof(float), "activation scales"));
    cl_kernel k;
    HEARTH_TRY(fixed_kernel(b, k_quant ? K_QUANT_Q8_K : K_QUANT_Q8_0, &k));
    cl_mem src = mem(in);
    cl_int blocks = (cl_int)n_blocks;
    const struct karg qargs[] = {ARG(src), ARG(b->aq), ARG(b->ad), ARG(blocks)};
    HEARTH_TRY(run_items(b, k, qargs, 4, n_blocks));

    const bool decode = in->rows <= GEMV_MAX_TOKENS;
    const enum matmul_kind kind = w->dev_packed_order ? (decode ? MM_PACKED_GEMV : MM_PACKED_GEMM)
                                                      : (decode ? MM_EXACT_GEMV : MM_EXACT_GEMM);
    HEARTH_TRY(matmul_kernel(b, kind, w->type, &k));
    cl_mem wm = w->dev, y = mem(out);
    cl_uint row_bytes = (cl_uint)w->row_bytes;
    cl_int n_in = (cl_int)w->n_in, n_out = (cl_int)w->n_out, n_tok = (cl_int)in->rows;
    const struct karg args[] = {ARG(wm), ARG(row_bytes), ARG(n_in), ARG(n_out), ARG(b->aq),
                                ARG(b->ad), ARG(y), ARG(n_tok)};
    if (decode) {
        const size_t global[3] = {8, round_up((size_t)w->n_out, EXACT_ROWS), (size_t)in->rows};
        const size_t local[3] = {8, EXACT_ROWS, 1};
        return run(b, k, args, 7, 3, global, local);
    }
    const size_t global[2] = {round_up((size_t)w->n_out, 8), round_up((size_t)in->rows, 8)};
    const size_t local[2] = {8, 8};
    return run(b, k, args, 8, 2, global, local);
}

/* The activations as the CPU's product for the weight type sees them:
 * *x is in itself for float formats, else b->xq holding in rounded to
 * Q8_0/Q8_1 or Q8_K values. */
static hearth_status round_activations(struct ocl_backend *b, const struct act *in, hearth_type act_type,
                                       cl_mem *x)
{
    *x = mem(in);
    if (act_type == HEARTH_TYPE_F32) return HEARTH_OK;
    const bool k_quant = act_type == HEARTH_TYPE_Q8_K;
    if (act_type != HEARTH_TYPE_Q8_0 && act_type != HEARTH_TYPE_Q8_1 && !k_quant)
        return hearth_error(HEARTH_E_INTERNAL, "activation format %s has no device kernel",
                            hearth_type_name(act_type));
    const int64_t block = k_quant ? 256 : 32;
    if (in->width % block != 0)
        return hearth_error(HEARTH_E_INTERNAL, "activation rows of %lld are not whole %s blocks",
                            (long long)in->width, hearth_type_name(act_type));
    const size_t n = (size_t)(in->rows * in->width);
    HEARTH_TRY(scratch(b, &b->xq, &b->xq_bytes, n * sizeof(float), "rounded activations"));
    cl_kernel k;
    HEARTH_TRY(fixed_kernel(b, k_quant ? K_ACT_Q8_K : K_ACT_Q8_0, &k));
    cl_mem src = mem(in);
    cl_int n_blocks = (cl_int)(n / (size_t)block);
    const struct karg args[] = {ARG(src), ARG(b->xq), ARG(n_blocks)};
    HEARTH_TRY(run_items(b, k, args, 3, (size_t)n_blocks));
    *x = b->xq;
    return HEARTH_OK;
}

hearth_status ocl_backend_dequantize(struct hearth_backend *be, const struct weight *w, float *out)
{
    struct ocl_backend *b = impl(be);
    const size_t n = (size_t)w->n_in * (size_t)w->n_out;
    cl_int err;
    cl_mem buf;
    HEARTH_TRY(ocl_buffer_new(b->dev, CL_MEM_READ_WRITE, n * sizeof(float), "dequantized weights",
                              &buf));
    cl_kernel k;
    hearth_status st = matmul_kernel(b, MM_DEQUANT, w->type, &k);
    cl_mem wm = w->dev;
    cl_uint row_bytes = (cl_uint)w->row_bytes;
    cl_int n_in = (cl_int)w->n_in, row0 = 0, n_rows = (cl_int)w->n_out;
    const struct karg args[] = {ARG(wm), ARG(row_bytes), ARG(n_in), ARG(row0), ARG(n_rows), ARG(buf)};
    if (!st) st = run_items(b, k, args, 6, (size_t)(w->n_in + 31) / 32 * (size_t)w->n_out);
    if (!st) {
        err = clEnqueueReadBuffer(b->queue, buf, CL_TRUE, 0, n * sizeof(float), out, 0, NULL, NULL);
        if (err != CL_SUCCESS) st = ocl_fail(err, "reading dequantized weights");
    }
    ocl_buffer_free(b->dev, buf);
    return st;
}

static hearth_status ocl_matmul(struct hearth_backend *be, struct act *out, const struct weight *w,
                                const struct act *in)
{
    struct ocl_backend *b = impl(be);
    if (!w->dev)
        return hearth_error(HEARTH_E_INTERNAL, "tensor '%s' is not on the device", w->name);
    if (in->width != w->n_in)
        return hearth_error(HEARTH_E_INTERNAL, "matmul '%s': input width %lld, weight rows of %lld",
                            w->name, (long long)in->width, (long long)w->n_in);
    HEARTH_TRY(check_fits(out, in->rows, w->n_out, w->name));
    hearth_status st;
    enum prefill_path path = in->rows <= GEMV_MAX_TOKENS ? PREFILL_GEMV_EXACT : b->prefill;
    const hearth_type act_type = hearth_kernels_scalar()->act_type[w->type];
    if ((path == PREFILL_CLBLAST || (path == PREFILL_EXACT && act_type == HEARTH_TYPE_F32)) &&
        b->clblast_unusable)
        path = act_type == HEARTH_TYPE_F32 ? PREFILL_TILED : PREFILL_EXACT;
    if (path == PREFILL_TILED && b->tiled_ok[w->type] == 0) {
        /* 16 x 16 items and 16 KiB of local memory; smaller devices use GEMV */
        cl_kernel k;
        size_t limit;
        HEARTH_TRY(matmul_kernel(b, MM_GEMM, w->type, &k));
        HEARTH_TRY(kernel_group_limit(b, k, &limit));
        b->tiled_ok[w->type] =
            limit >= GEMM_TILE * GEMM_TILE && b->dev->local_mem_bytes >= 20 * 1024 ? 1 : -1;
    }
    if (path == PREFILL_TILED && b->tiled_ok[w->type] < 0) path = PREFILL_GEMV_EXACT;
    if (act_type != HEARTH_TYPE_F32 && (path == PREFILL_EXACT || path == PREFILL_GEMV_EXACT)) {
        HEARTH_TRY(matmul_exact(b, out, w, in, act_type));
        out->rows = in->rows;
        out->width = w->n_out;
        return HEARTH_OK;
    }
    if (path == PREFILL_EXACT) path = PREFILL_CLBLAST;
    if (path == PREFILL_GEMV_EXACT) path = PREFILL_GEMV;
    cl_mem x;
    HEARTH_TRY(round_activations(b, in, act_type, &x));
    if (path == PREFILL_GEMV) st = matmul_gemv(b, out, w, in, x);
    else if (path == PREFILL_CLBLAST) st = matmul_clblast(b, out, w, in, x);
    else st = matmul_tiled(b, out, w, in, x);
    if (st && path == PREFILL_CLBLAST && !b->clblast_worked && clblast_unusable(b->clblast_status)) {
        /* CLBlast could not build or tune its kernels for this device */
        b->clblast_unusable = true;
        return ocl_matmul(be, out, w, in);
    }
    if (!st && path == PREFILL_CLBLAST) b->clblast_worked = true;
    if (st) return st;
    out->rows = in->rows;
    out->width = w->n_out;
    return HEARTH_OK;
}

/* ---- elementwise operations and norms ----------------------------------------------------- */

static hearth_status ocl_add_bias(struct hearth_backend *be, struct act *x, const struct weight *bias)
{
    struct ocl_backend *b = impl(be);
    cl_kernel k;
    HEARTH_TRY(fixed_kernel(b, K_ADD_BIAS, &k));
    cl_mem xm = mem(x), bm = bias->dev;
    cl_int width = (cl_int)x->width, n = (cl_int)(x->rows * x->width);
    const struct karg args[] = {ARG(xm), ARG(bm), ARG(width), ARG(n)};
    return run_items(b, k, args, 4, (size_t)(x->rows * x->width));
}

static hearth_status ocl_rmsnorm(struct hearth_backend *be, struct act *out, const struct act *in,
                                 const struct weight *w, float eps)
{
    struct ocl_backend *b = impl(be);
    HEARTH_TRY(check_fits(out, in->rows, in->width, "rmsnorm"));
    cl_kernel k;
    HEARTH_TRY(fixed_kernel(b, K_RMSNORM, &k));
    cl_mem x = mem(in), y = mem(out), g = w->dev;
    cl_int n = (cl_int)in->width;
    const struct karg args[] = {ARG(x), ARG(y), ARG(g), ARG(n), ARG(eps), LOCAL_FLOATS(2 * b->wg_rows)};
    const size_t global[1] = {(size_t)in->rows * b->wg_rows};
    const size_t local[1] = {b->wg_rows};
    HEARTH_TRY(run(b, k, args, 6, 1, global, local));
    out->rows = in->rows;
    out->width = in->width;
    return HEARTH_OK;
}

static hearth_status ocl_rope(struct hearth_backend *be, struct act *x, int32_t n_heads, int32_t head_dim,
                              const struct rope_params *rope, const struct batch_pos *bp)
{
    struct ocl_backend *b = impl(be);
    if (rope->yarn_ext != 0.0f)
        return hearth_error(HEARTH_E_UNSUPPORTED, "the OpenCL backend has no YaRN rotary embeddings");
    HEARTH_TRY(upload_positions(b, bp));
    cl_kernel k;
    HEARTH_TRY(fixed_kernel(b, K_ROPE, &k));
    cl_mem xm = mem(x), factors = NULL;
    if (rope->freq_factors) {
        factors = b->model->rope_freqs.dev;
        if (!factors)
            return hearth_error(HEARTH_E_INTERNAL, "rope_freqs.weight is not on the device");
    }
    const size_t items = (size_t)(rope->n_dims / 2) * (size_t)n_heads * (size_t)bp->n_tokens;
    cl_int width = (cl_int)x->width, heads = n_heads, hd = head_dim, n_dims = rope->n_dims;
    cl_int neox = rope->style == ROPE_NEOX, has_factors = factors != NULL, n = (cl_int)items;
    float base = rope->freq_base, scale = rope->freq_scale;
    const struct karg args[] = {ARG(xm), ARG(width), ARG(heads), ARG(hd), ARG(n_dims), ARG(neox),
                                ARG(base), ARG(scale), ARG(factors), ARG(has_factors), ARG(b->pos),
                                ARG(n)};
    return run_items(b, k, args, 12, items);
}

static hearth_status ocl_add(struct hearth_backend *be, struct act *out, const struct act *a, const struct act *bb)
{
    struct ocl_backend *b = impl(be);
    HEARTH_TRY(check_fits(out, a->rows, a->width, "add"));
    cl_kernel k;
    HEARTH_TRY(fixed_kernel(b, K_ADD, &k));
    cl_mem o = mem(out), am = mem(a), bm = mem(bb);
    cl_int n = (cl_int)(a->rows * a->width);
    const struct karg args[] = {ARG(o), ARG(am), ARG(bm), ARG(n)};
    HEARTH_TRY(run_items(b, k, args, 4, (size_t)(a->rows * a->width)));
    out->rows = a->rows;
    out->width = a->width;
    return HEARTH_OK;
}

static hearth_status ocl_swiglu(struct hearth_backend *be, struct act *out, const struct act *gate,
                                const struct act *up)
{
    struct ocl_backend *b = impl(be);
    HEARTH_TRY(check_fits(out, gate->rows, gate->width, "swiglu"));
    cl_kernel k;
    HEARTH_TRY(fixed_kernel(b, K_SWIGLU, &k));
    cl_mem o = mem(out), g = mem(gate), u = mem(up);
    cl_int n = (cl_int)(gate->rows * gate->width);
    const struct karg args[] = {ARG(o), ARG(g), ARG(u), ARG(n)};
    HEARTH_TRY(run_items(b, k, args, 4, (size_t)(gate->rows * gate->width)));
    out->rows = gate->rows;
    out->width = gate->width;
    return HEARTH_OK;
}

/* ---- attention ---------------------------------------------------------------------- */

static hearth_status ocl_attention(struct hearth_backend *be, struct act *out, const struct act *q,
                                   const struct act *k, const struct act *v, struct kv_cache *kv,
                                   int il, const struct hparams *hp, const float *sinks,
                                   const struct batch_pos *bp)
{
    struct ocl_backend *b = impl(be);
    struct kv_layer *L = &kv->layers[il];
    if (sinks) return hearth_error(HEARTH_E_UNSUPPORTED, "the OpenCL backend has no attention sinks");
    if (!L->k_dev || !L->v_dev)
        return hearth_error(HEARTH_E_INTERNAL, "layer %d has no KV cache on the device", il);
    HEARTH_TRY(check_fits(out, bp->n_tokens, (int64_t)hp->n_head * hp->head_dim, "attention"));
    HEARTH_TRY(upload_positions(b, bp));
    const bool f16 = kv->type == HEARTH_TYPE_F16;

    /* the batch's keys and values first: a token attends to itself */
    cl_kernel store;
    HEARTH_TRY(fixed_kernel(b, f16 ? K_KV_STORE_F16 : K_KV_STORE_F32, &store));
    const size_t items = (size_t)kv->row_elems * (size_t)bp->n_tokens;
    cl_int row_elems = (cl_int)kv->row_elems, n = (cl_int)items;
    cl_mem km = mem(k), vm = mem(v), kc = L->k_dev, vc = L->v_dev;
    cl_int slot_off = (cl_int)bp->n_tokens;
    const struct karg k_args[] = {ARG(km), ARG(kc), ARG(b->pos), ARG(slot_off), ARG(row_elems), ARG(n)};
    HEARTH_TRY(run_items(b, store, k_args, 6, items));
    const struct karg v_args[] = {ARG(vm), ARG(vc), ARG(b->pos), ARG(slot_off), ARG(row_elems), ARG(n)};
    HEARTH_TRY(run_items(b, store, v_args, 6, items));

    /* scores for as many tokens at a time as the scratch budget allows */
    const size_t per_token = (size_t)hp->n_head * (size_t)b->n_ctx;
    size_t chunk = SCORE_FLOATS / per_token;
    if (chunk < 1) chunk = 1;
    if (chunk > (size_t)bp->n_tokens) chunk = (size_t)bp->n_tokens;
    HEARTH_TRY(scratch(b, &b->scores, &b->scores_bytes, chunk * per_token * sizeof(float),
                       "attention scores"));
    cl_kernel att;
    HEARTH_TRY(fixed_kernel(b, f16 ? K_ATTENTION_F16 : K_ATTENTION_F32, &att));
    cl_mem qm = mem(q), o = mem(out);
    cl_int n_head = hp->n_head, n_head_kv = hp->n_head_kv, hd = hp->head_dim, n_ctx = b->n_ctx;
    cl_int block_tokens = kv->block_tokens, n_rows = (cl_int)bp->n_tokens;
    float scale = 1.0f / sqrtf((float)hp->head_dim);
    for (size_t t0 = 0; t0 < (size_t)bp->n_tokens; t0 += chunk) {
        cl_int first = (cl_int)t0;
        const size_t n_chunk = HEARTH_MIN(chunk, (size_t)bp->n_tokens - t0);
        const struct karg args[] = {ARG(qm), ARG(kc), ARG(vc), ARG(b->pos), ARG(o), ARG(n_head),
                                    ARG(n_head_kv), ARG(hd), ARG(scale), ARG(b->scores), ARG(n_ctx),
                                    ARG(first), ARG(block_tokens), ARG(n_rows),
                                    LOCAL_FLOATS(hp->head_dim), LOCAL_FLOATS(2 * b->wg_attention)};
        const size_t global[2] = {(size_t)hp->n_head * b->wg_attention, n_chunk};
        const size_t local[2] = {b->wg_attention, 1};
        HEARTH_TRY(run(b, att, args, 16, 2, global, local));
    }
    out->rows = bp->n_tokens;
    out->width = (int64_t)hp->n_head * hp->head_dim;
    return HEARTH_OK;
}

static hearth_status ocl_kv_copy_block(struct hearth_backend *be, struct kv_cache *kv, int32_t src,
                                       int32_t dst, int32_t n_rows, bool window)
{
    struct ocl_backend *b = impl(be);
    const size_t bytes = (size_t)n_rows * kv->row_bytes;
    /* the window space is the host's alone (kv_cache.h) */
    if (bytes == 0 || window) return HEARTH_OK;
    for (int32_t il = b->first_layer; il < kv->n_layer; il++) {
        cl_mem bufs[2] = {(cl_mem)kv->layers[il].k_dev, (cl_mem)kv->layers[il].v_dev};
        for (int i = 0; i < 2; i++) {
            cl_int err = clEnqueueCopyBuffer(b->queue, bufs[i], bufs[i], (size_t)src * kv->block_bytes,
                                             (size_t)dst * kv->block_bytes, bytes, 0, NULL, NULL);
            if (err != CL_SUCCESS) return ocl_fail(err, "copying a KV block of layer %d on the device", il);
        }
    }
    return HEARTH_OK;
}

static const struct backend_ops ocl_ops = {
    .name = "OpenCL",
    .act_alloc = ocl_act_alloc,
    .act_free = ocl_act_free,
    .act_upload = ocl_act_upload,
    .act_download = ocl_act_download,
    .matmul = ocl_matmul,
    .add_bias = ocl_add_bias,
    .rmsnorm = ocl_rmsnorm,
    .rope = ocl_rope,
    .attention = ocl_attention,
    .add = ocl_add,
    .swiglu = ocl_swiglu,
    .copy_rows = ocl_copy_rows,
    .kv_copy_block = ocl_kv_copy_block,
};

/* ---- set-up ------------------------------------------------------------------------- */

/* HEARTH_OPENCL_GEMM; a value it does not know is an error rather than
 * a silent default. */
static hearth_status prefill_from_env(enum prefill_path *out)
{
    static const struct {
        const char *name;
        enum prefill_path path;
    } names[] = {{"clblast", PREFILL_CLBLAST}, {"exact", PREFILL_EXACT}, {"tiled", PREFILL_TILED},
                 {"gemv", PREFILL_GEMV}};
    const char *e = getenv("HEARTH_OPENCL_GEMM");
    *out = PREFILL_DEFAULT;
    if (!e || !*e) return HEARTH_OK;
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(names); i++)
        if (strcasecmp(e, names[i].name) == 0) {
            *out = names[i].path;
            return HEARTH_OK;
        }
    return hearth_error(HEARTH_E_INVALID, "HEARTH_OPENCL_GEMM='%s' is not a prefill path "
                        "(clblast, exact, tiled or gemv)", e);
}

/* What one context needs on the device besides the weights: the KV cache
 * of the offloaded layers, and at most this much for work buffers with
 * batches of up to n_batch tokens: the activations of a layer
 * (src/engine/context.c alloc_forward), the logits when the output layer is
 * offloaded, the products' rounded or quantized activations and
 * dequantized weight tile, the attention scores and the positions. */
static void context_device_bytes(const hearth_model *m, const struct kv_cache *kv, int32_t first,
                                 int32_t n_batch, int32_t n_ctx, uint64_t *kv_bytes, uint64_t *work_bytes)
{
    const struct hparams *hp = &m->hp;
    const uint64_t nb = (uint64_t)(n_batch > 0 ? n_batch : 1);
    const uint64_t n_q = (uint64_t)hp->n_head * (uint64_t)hp->head_dim;
    const uint64_t n_kv = (uint64_t)hp->n_head_kv * (uint64_t)hp->head_dim;
    const uint64_t n_embd = (uint64_t)hp->n_embd, n_ff = (uint64_t)hp->n_ff;
    *kv_bytes = 2 * (uint64_t)(kv->n_layer - first) * (uint64_t)kv->block_bytes * (uint64_t)kv->n_blocks;

    uint64_t widest = HEARTH_MAX(HEARTH_MAX(n_embd, n_q), n_ff);
    uint64_t floats = nb * (n_embd + HEARTH_MAX(n_embd, n_q) + 2 * n_q + 2 * n_kv + 2 * n_ff);
    if (m->offload.output) {
        floats += nb * (uint64_t)hp->n_vocab;
        widest = HEARTH_MAX(widest, (uint64_t)hp->n_vocab);
    }
    floats += nb * widest;                                   /* rounded activations */
    const size_t shapes[][2] = {{n_embd, n_q}, {n_embd, n_kv}, {n_q, n_embd}, {n_embd, n_ff},
                                {n_ff, n_embd}, {n_embd, m->offload.output ? (size_t)hp->n_vocab : 1}};
    size_t tile = 0;
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(shapes); i++)
        if (shapes[i][0] > 0 && shapes[i][1] > 0)
            tile = HEARTH_MAX(tile, clblast_tile_floats(shapes[i][0], shapes[i][1]));
    floats += tile;
    const uint64_t per_token = (uint64_t)hp->n_head * (uint64_t)n_ctx;
    uint64_t chunk = per_token ? SCORE_FLOATS / per_token : 1;
    chunk = HEARTH_MIN(HEARTH_MAX(chunk, 1), nb);
    floats += chunk * per_token;                            /* attention scores */
    /* quants (a byte each) and block scales of the exact products; the
     * places (positions, slots, table offsets) and, at most, a full block
     * table per row */
    const uint64_t table = ((uint64_t)n_ctx + (uint64_t)kv->block_tokens - 1) / (uint64_t)kv->block_tokens;
    *work_bytes = floats * sizeof(float) + nb * widest + nb * widest / 32 * sizeof(float) +
                  nb * (3 + HEARTH_MIN(table, (uint64_t)kv->n_blocks)) * sizeof(cl_int);
}

/* KV cache of the offloaded layers in device memory, zero-filled so that
 * an allocation the driver deferred fails now rather than mid-pass. */
static hearth_status alloc_kv(struct ocl_backend *b)
{
    struct kv_cache *kv = b->kv;
    if (kv->type != HEARTH_TYPE_F16 && kv->type != HEARTH_TYPE_F32)
        return hearth_error(HEARTH_E_UNSUPPORTED, "KV cache type %s is not supported on OpenCL "
                            "devices (f32, f16)", hearth_type_name(kv->type));
    size_t bytes;
    if (hearth_mul_overflow(kv->block_bytes, (size_t)kv->n_blocks, &bytes))
        return hearth_error(HEARTH_E_NOMEM, "KV cache of %lld positions is too large",
                            (long long)kv->n_slots);
    if (bytes > b->dev->max_alloc_bytes)
        return hearth_error(HEARTH_E_NOMEM, "a layer's KV cache of %zu bytes is larger than the "
                            "largest buffer OpenCL device %d (%s) allows (CL_DEVICE_MAX_MEM_ALLOC_SIZE "
                            "%llu bytes); use a smaller context", bytes, b->dev->index,
                            b->dev->info.name, (unsigned long long)b->dev->max_alloc_bytes);
    const cl_uchar zero = 0;
    for (int32_t il = b->first_layer; il < kv->n_layer; il++) {
        cl_mem *slots[2] = {(cl_mem *)&kv->layers[il].k_dev, (cl_mem *)&kv->layers[il].v_dev};
        for (int i = 0; i < 2; i++) {
            char what[64];
            snprintf(what, sizeof what, "the KV cache of layer %d", il);
            HEARTH_TRY(ocl_buffer_new(b->dev, CL_MEM_READ_WRITE, bytes, what, slots[i]));
            cl_int err = clEnqueueFillBuffer(b->queue, *slots[i], &zero, 1, 0, bytes, 0, NULL, NULL);
            if (err != CL_SUCCESS)
                return ocl_fail(err, "clearing the KV cache of layer %d on the device", il);
        }
    }
    cl_int err = clFinish(b->queue);
    if (err != CL_SUCCESS) return ocl_fail(err, "allocating the KV cache on the device");
    return HEARTH_OK;
}

void backend_opencl_free(struct hearth_backend *be)
{
    if (!be) return;
    struct ocl_backend *b = be->impl;
    if (b) {
        if (b->queue) clFinish(b->queue);
        if (b->kv)
            for (int32_t il = 0; il < b->kv->n_layer; il++) {
                struct kv_layer *L = &b->kv->layers[il];
                ocl_buffer_free(b->dev, (cl_mem)L->k_dev);
                ocl_buffer_free(b->dev, (cl_mem)L->v_dev);
                L->k_dev = L->v_dev = NULL;
            }
        for (int i = 0; i < K_FIXED_COUNT; i++)
            if (b->fixed[i]) clReleaseKernel(b->fixed[i]);
        for (int m = 0; m < MM_KINDS; m++)
            for (int t = 0; t < HEARTH_TYPE_COUNT; t++)
                if (b->matmul[m][t]) clReleaseKernel(b->matmul[m][t]);
        ocl_buffer_free(b->dev, b->pos);
        ocl_buffer_free(b->dev, b->tile);
        ocl_buffer_free(b->dev, b->xq);
        ocl_buffer_free(b->dev, b->aq);
        ocl_buffer_free(b->dev, b->ad);
        ocl_buffer_free(b->dev, b->scores);
        if (b->queue) clReleaseCommandQueue(b->queue);
        free(b->pos_host);
        free(b);
    }
    free(be);
}

hearth_status backend_opencl_new(const hearth_model *model, struct kv_cache *kv, int32_t n_batch,
                                 int32_t n_ctx, struct hearth_backend **out)
{
    *out = NULL;
    const struct ocl_model *om = model->offload.ocl;
    if (!om) return hearth_error(HEARTH_E_INTERNAL, "the model has no layers on a device");
    struct hearth_backend *be = hearth_calloc(1, sizeof *be, "the OpenCL backend");
    struct ocl_backend *b = hearth_calloc(1, sizeof *b, "the OpenCL backend");
    if (!be || !b) {
        free(be);
        free(b);
        return HEARTH_E_NOMEM;
    }
    be->ops = &ocl_ops;
    be->n_threads = 1;
    be->impl = b;
    b->model = model;
    b->dev = om->dev;
    b->kv = kv;
    b->first_layer = model->offload.first_layer;
    b->n_ctx = n_ctx > 0 ? n_ctx : 1;
    hearth_status st = prefill_from_env(&b->prefill);
    if (st) {
        free(be);
        free(b);
        return st;
    }

    uint64_t kv_bytes, work_bytes;
    context_device_bytes(model, kv, b->first_layer, n_batch, b->n_ctx, &kv_bytes, &work_bytes);
    char what[160];
    snprintf(what, sizeof what, "a context's KV cache (%llu bytes) and work buffers (up to %llu "
             "bytes)", (unsigned long long)kv_bytes, (unsigned long long)work_bytes);
    st = ocl_mem_check(b->dev, kv_bytes + work_bytes, what);
    if (st) {
        char reason[1024];
        snprintf(reason, sizeof reason, "%s", hearth_last_error());
        free(be);
        free(b);
        return hearth_error(st, "%s; use a smaller context or batch, or offload fewer layers",
                            reason);
    }

    cl_int err;
    b->queue = clCreateCommandQueue(b->dev->ctx, b->dev->id, 0, &err);
    if (!b->queue) st = ocl_fail(err, "creating a command queue on device %d", b->dev->index);

    /* Work-group sizes: powers of two the kernels can run with. */
    b->wg_elem = pow2_at_most(b->dev->max_work_group, 64);
    cl_kernel k;
    size_t limit;
    if (!st) st = fixed_kernel(b, K_RMSNORM, &k);
    if (!st) st = kernel_group_limit(b, k, &limit);
    if (!st) b->wg_rows = pow2_at_most(limit, 64);
    if (!st) st = fixed_kernel(b, kv->type == HEARTH_TYPE_F16 ? K_ATTENTION_F16 : K_ATTENTION_F32, &k);
    if (!st) st = kernel_group_limit(b, k, &limit);
    if (!st) {
        b->wg_attention = pow2_at_most(limit, 64);
        const int32_t hd = model->hp.head_dim;
        if ((size_t)hd * sizeof(float) + b->wg_attention * sizeof(double) > b->dev->local_mem_bytes)
            st = hearth_error(HEARTH_E_UNSUPPORTED, "device %d has too little local memory for "
                              "attention over heads of %d", b->dev->index, hd);
    }
    if (!st) st = alloc_kv(b);
    if (st) {
        backend_opencl_free(be);
        return st;
    }
    *out = be;
    return HEARTH_OK;
}

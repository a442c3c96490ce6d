/*
 * backend_cpu.c -- the CPU backend: the layer operations of backend.h on
 * host memory, parallel over OpenMP threads, with the matrix products done
 * by the kernel table of simd/ chosen for this CPU.
 */
#include "backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "attention.h"
#include "backend_cpu_rwkv.h"
#include "kernels.h"
#include "kv_cache.h"
#include "tp_group.h"

/* Rows of a weight per gemm call: a multiple of every kernel tile's rows,
 * and 16 floats -- one 64-byte cache line of output per token -- so that
 * threads working on neighbouring chunks do not write the same line (for
 * n_out a multiple of 16, which every real model's is).  A chunk's weights
 * stay in cache while all the batch's tokens pass them. */
#define MATMUL_ROW_CHUNK 16
_Static_assert(MATMUL_ROW_CHUNK % PACK_ROWS == 0, "chunks of packed weights are whole row groups");

/* Multiply-adds below which a matrix product runs on one thread: waking
 * the others would cost more than it saves. */
#define MATMUL_SERIAL_WORK (64 * 1024)

/* Tokens up to which each thread converts the activations itself. */
#define MATMUL_PRIVATE_ACT_TOKENS 4

/* Elements below which an elementwise operation runs on one thread (a
 * decode step's additions and norms take less time than a wake-up). */
#define ELEMENTWISE_SERIAL_WORK (32 * 1024)

struct cpu_backend {
    const hearth_kernels *kernels;
    uint8_t *act_scratch;      /* activations converted for the kernels */
    size_t act_scratch_bytes;
    int32_t *act_sums;         /* block sums of those, for packed weights */
    size_t act_sums_bytes;
    const struct attn_kernels *attn;
    float *attn_scratch;       /* attention states and per-thread scratch */
    size_t attn_scratch_floats;
    uint8_t *attn_index;       /* attention tiles and the tile of each row */
    size_t attn_index_bytes;
    float *kv_row;             /* a key row with its values, as the cache keeps it */
    size_t kv_row_bytes;
    uint8_t *moe_index;        /* routing of a step's rows to experts */
    size_t moe_index_bytes;
    float *moe_act;            /* the rows grouped by expert, and their results */
    size_t moe_act_bytes;
    void *moe_parts;           /* the experts' products of a step, as one set */
    size_t moe_parts_bytes;
    float *tp_mine;            /* a tensor-parallel rank's rows of a set */
    size_t tp_mine_bytes;
    float *tp_all;             /* every rank's, as gathered */
    size_t tp_all_bytes;
    int64_t *tp_counts;        /* floats from each rank */
    size_t tp_counts_bytes;
};

static struct cpu_backend *cpu(struct hearth_backend *be)
{
    return be->impl;
}

static hearth_status grow(void **buf, size_t *have, size_t need, const char *what)
{
    if (*have >= need) return HEARTH_OK;
    void *p = hearth_aligned_alloc(64, need, what);
    if (!p) return HEARTH_E_NOMEM;
    hearth_aligned_free(*buf);
    *buf = p;
    *have = need;
    return HEARTH_OK;
}

/* Run fn(arg) as one OpenMP parallel region of n_threads threads, or
 * directly on this thread when n_threads is 1.  Even a one-thread region
 * costs a system call in the OpenMP runtime (libgomp wakes a futex at the
 * end of every region), several microseconds, and a decode step of a small
 * model is a hundred operations of less than that.  fn shares its loops
 * out with orphaned "omp for" directives, which outside a region run all
 * their iterations on the calling thread. */
void cpu_run_parallel(int n_threads, void (*fn)(void *), void *arg)
{
#ifdef _OPENMP
    if (n_threads > 1) {
#pragma omp parallel num_threads(n_threads)
        fn(arg);
        return;
    }
#endif
    fn(arg);
}

int cpu_thread_index(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* ---- buffers ----------------------------------------------------------------- */

static hearth_status cpu_act_alloc(struct hearth_backend *be, struct act *a, int64_t rows, int64_t width)
{
    (void)be;
    size_t n;
    if (rows <= 0 || width <= 0 || hearth_mul_overflow((size_t)rows, (size_t)width, &n) ||
        n > SIZE_MAX / sizeof(float))
        return hearth_error(HEARTH_E_INVALID, "activation buffer of %lld x %lld is invalid",
                            (long long)rows, (long long)width);
    a->host = hearth_aligned_alloc(64, n * sizeof(float), "activations");
    if (!a->host) return HEARTH_E_NOMEM;
    a->dev = NULL;
    a->rows = rows;
    a->width = width;
    a->capacity = (int64_t)n;
    return HEARTH_OK;
}

static void cpu_act_free(struct hearth_backend *be, struct act *a)
{
    (void)be;
    hearth_aligned_free(a->host);
    memset(a, 0, sizeof *a);
}

static hearth_status cpu_act_upload(struct hearth_backend *be, struct act *dst, const float *src, int64_t rows)
{
    (void)be;
    memcpy(dst->host, src, (size_t)(rows * dst->width) * sizeof(float));
    dst->rows = rows;
    return HEARTH_OK;
}

static hearth_status cpu_act_download(struct hearth_backend *be, float *dst, const struct act *src, int64_t rows)
{
    (void)be;
    memcpy(dst, src->host, (size_t)(rows * src->width) * sizeof(float));
    return HEARTH_OK;
}

/* ---- matrix product ---------------------------------------------------------- */

/* A distinct activation format of a set of products of the same input:
 * converted once per copy, with block sums where a packed Q8_0-activation
 * kernel reads them. */
struct matmul_conv {
    hearth_type type;
    hearth_act_convert_fn convert;
    size_t act_off, act_row; /* in one copy of the converted activations */
    size_t sums_off;         /* in one copy of the block sums; SIZE_MAX: none */
};

/* One weight of the set: its kernels and its activations' format. */
struct matmul_part {
    const struct weight *w;
    struct act *out;
    hearth_gemm_fn gemm;
    hearth_gemm_packed_fn gemm_packed;
    const uint8_t *wd;
    const struct matmul_conv *conv;
    int64_t first_chunk; /* its row chunks are first_chunk .. of the set's */
    int64_t x_row0, n_tok; /* its input: rows x_row0 .. x_row0 + n_tok - 1 */
};

/* Token t of the input x (rows of n_in floats) in conv's format, into one
 * copy of the converted activations (xq) and block sums. */
static void convert_token(const struct matmul_conv *conv, const float *x, int64_t n_in, int64_t t, uint8_t *xq,
                          int32_t *sums)
{
    uint8_t *row = xq + conv->act_off + (size_t)t * conv->act_row;
    conv->convert(x + t * n_in, row, n_in);
    if (conv->sums_off != SIZE_MAX) {
        const int64_t n_blocks = n_in / 32;
        hearth_q8_0_block_sums(row, n_blocks, sums + conv->sums_off + t * n_blocks);
    }
}

/* A set of products as the threads of a region share it out. */
struct matmul_job {
    const struct matmul_part *parts;
    const struct matmul_conv *convs;
    int n_convs;
    int64_t n_chunks;
    int n;
    int64_t n_tok, n_in;
    const float *x;
    uint8_t *xq;          /* converted activations: one copy, or one per thread */
    int32_t *sums;
    size_t act_bytes, sums_count; /* per copy */
    bool private_act;
};

static void matmul_run(void *arg)
{
    const struct matmul_job *j = arg;
    const struct matmul_part *parts = j->parts;
    const struct matmul_conv *convs = j->convs;
    const int n = j->n, n_convs = j->n_convs;
    const int64_t n_tok = j->n_tok, n_in = j->n_in, n_chunks = j->n_chunks;
    const float *x = j->x;
    uint8_t *xq = j->xq;
    int32_t *sums = j->sums;
    const int tid = cpu_thread_index();
    const uint8_t *xs = xq;
    const int32_t *xsums = sums;
    if (j->private_act) {
        uint8_t *mine = xq + (size_t)tid * j->act_bytes;
        int32_t *my_sums = j->sums_count ? sums + (size_t)tid * j->sums_count : NULL;
        for (int ci = 0; ci < n_convs; ci++)
            for (int64_t t = 0; t < n_tok; t++) convert_token(&convs[ci], x, n_in, t, mine, my_sums);
        xs = mine;
        xsums = my_sums;
    } else {
#pragma omp for schedule(static) collapse(2)
        for (int ci = 0; ci < n_convs; ci++)
            for (int64_t t = 0; t < n_tok; t++) convert_token(&convs[ci], x, n_in, t, xq, sums);
    }

    /* Guided, not static: the threads take the chunks from one counter,
     * in pieces that shrink as the work runs out, so that a thread that
     * streams its weights slower than the others (a busier core, a
     * farther memory) does not leave them waiting at the region's end.
     * With a static split of halves, two threads decoding the
     * TinyLlama-shaped Q4_0 file spent 15.4% of their samples in the
     * runtime, and 12.4% guided; eight sequences' steps went 11-16%
     * faster (BENCHMARKS.md).  Which thread computes a chunk does not
     * change its results. */
#pragma omp for schedule(guided)
    for (int64_t ch = 0; ch < n_chunks; ch++) {
        /* the last part that begins at or before ch */
        int lo = 0, hi = n - 1;
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (parts[mid].first_chunk <= ch) lo = mid;
            else hi = mid - 1;
        }
        const struct matmul_part *pt = &parts[lo];
        const int64_t n_out = pt->w->n_out;
        const int64_t r0 = (ch - pt->first_chunk) * MATMUL_ROW_CHUNK;
        const int64_t rows = HEARTH_MIN(MATMUL_ROW_CHUNK, n_out - r0);
        const uint8_t *wr = pt->wd + (size_t)r0 * pt->w->row_bytes; /* packed rows take as many bytes */
        const struct matmul_conv *cv = pt->conv;
        const uint8_t *xa = xs + cv->act_off + (size_t)pt->x_row0 * cv->act_row;
        if (pt->gemm_packed)
            pt->gemm_packed(n_in, rows, pt->n_tok, wr, xa, cv->act_row,
                            cv->sums_off != SIZE_MAX ? xsums + cv->sums_off + pt->x_row0 * (n_in / 32) : NULL,
                            pt->out->host + r0, n_out);
        else
            pt->gemm(n_in, rows, pt->n_tok, wr, pt->w->row_bytes, xa, cv->act_row, pt->out->host + r0, n_out);
    }
}

/* The products of a set in one parallel region: outs[i] = ws[i] x the
 * rows x_row0[i] .. x_row0[i] + n_toks[i] - 1 of in (x_row0 NULL: all of
 * in's rows for every product), parts the caller's room for n parts.
 * Each product is the call its kernel would get alone, so the results
 * are the same as n products made one by one. */
#define MATMUL_CONV_MAX 4
static hearth_status matmul_parts(struct hearth_backend *be, int n, struct act *const outs[],
                                  const struct weight *const ws[], const struct act *in, const int64_t *x_row0,
                                  const int64_t *n_toks, struct matmul_part *parts)
{
    struct cpu_backend *c = cpu(be);
    const hearth_kernels *k = c->kernels;
    const int64_t n_tok = in->rows, n_in = in->width;
    const int64_t n_blocks = n_in / 32;
    struct matmul_conv convs[MATMUL_CONV_MAX];
    int n_convs = 0;
    size_t act_bytes = 0, sums_count = 0; /* per copy */
    int64_t n_chunks = 0;
    double work = 0.0;
    for (int i = 0; i < n; i++) {
        const struct weight *w = ws[i];
        if (!hearth_kernels_supports(k, w->type))
            return hearth_error(HEARTH_E_UNSUPPORTED, "tensor '%s': no matrix product for type %s",
                                w->name, hearth_type_name(w->type));
        if (w->n_in != n_in)
            return hearth_error(HEARTH_E_INTERNAL, "matmul '%s': input width %lld, weight rows of %lld",
                                w->name, (long long)n_in, (long long)w->n_in);
        const hearth_type at = k->act_type[w->type];
        struct matmul_part *pt = &parts[i];
        pt->w = w;
        pt->out = outs[i];
        pt->gemm = k->gemm[w->type];
        pt->gemm_packed = w->packed ? k->gemm_packed[w->type] : NULL;
        pt->wd = pt->gemm_packed ? w->packed : w->data;
        pt->x_row0 = x_row0 ? x_row0[i] : 0;
        pt->n_tok = x_row0 ? n_toks[i] : n_tok;
        if (pt->x_row0 < 0 || pt->n_tok < 1 || pt->x_row0 + pt->n_tok > n_tok)
            return hearth_error(HEARTH_E_INTERNAL, "matmul '%s': rows %lld of %lld from %lld", w->name,
                                (long long)pt->n_tok, (long long)n_tok, (long long)pt->x_row0);
        struct matmul_conv *cv = convs;
        while (cv < convs + n_convs && cv->type != at) cv++;
        if (cv == convs + n_convs) {
            if (n_convs == MATMUL_CONV_MAX)
                return hearth_error(HEARTH_E_INTERNAL, "matmul set of more than %d activation formats",
                                    MATMUL_CONV_MAX);
            cv->type = at;
            cv->convert = k->act_convert[at];
            cv->act_row = hearth_type_row_bytes(at, n_in);
            cv->act_off = act_bytes;
            cv->sums_off = SIZE_MAX;
            act_bytes += (cv->act_row * (size_t)n_tok + 63) & ~(size_t)63;
            n_convs++;
        }
        /* Q8_K carries its own sums; the row kernels take none */
        if (pt->gemm_packed && at == HEARTH_TYPE_Q8_0 && cv->sums_off == SIZE_MAX) {
            cv->sums_off = sums_count;
            sums_count += (size_t)(n_tok * n_blocks);
        }
        pt->conv = cv;
        pt->first_chunk = n_chunks;
        n_chunks += (w->n_out + MATMUL_ROW_CHUNK - 1) / MATMUL_ROW_CHUNK;
        work += (double)w->n_out * (double)n_in * (double)pt->n_tok;
    }
    const int n_threads = work >= MATMUL_SERIAL_WORK ? be->n_threads : 1;
    /* A few tokens (decode) are converted by every thread for itself, into
     * its own copy: that costs less than the barrier that would make the
     * threads wait for one shared conversion. */
    const bool private_act = n_tok <= MATMUL_PRIVATE_ACT_TOKENS;
    const size_t copies = private_act ? (size_t)n_threads : 1;
    hearth_status st = grow((void **)&c->act_scratch, &c->act_scratch_bytes, act_bytes * copies,
                            "converted activations");
    if (st) return st;
    if (sums_count) {
        st = grow((void **)&c->act_sums, &c->act_sums_bytes, sums_count * sizeof(int32_t) * copies,
                  "activation block sums");
        if (st) return st;
    }

    /* Every output is one dot product computed by one thread in the
     * kernels' fixed order, so the result does not depend on the number
     * of threads, on how the rows are shared out (chunks of packed weights
     * are whole row groups) or on which products share a step.  Float
     * weights take the same path in prefill: OpenBLAS's sgemm, tried on a
     * tile of rows (F16 converted first), was slower than the AVX-512 and
     * AVX2 tiles for 16 to 512 tokens, and would break that bit-for-bit
     * agreement.  The products of one set share one parallel step: their
     * row chunks are dealt out together, so the threads meet once, not
     * once per product. */
    const struct matmul_job job = {
        .parts = parts,
        .convs = convs,
        .n_convs = n_convs,
        .n_chunks = n_chunks,
        .n = n,
        .n_tok = n_tok,
        .n_in = n_in,
        .x = in->host,
        .xq = c->act_scratch,
        .sums = c->act_sums,
        .act_bytes = act_bytes,
        .sums_count = sums_count,
        .private_act = private_act,
    };
    cpu_run_parallel(n_threads, matmul_run, (void *)&job);
    for (int i = 0; i < n; i++) {
        outs[i]->rows = parts[i].n_tok;
        outs[i]->width = ws[i]->n_out;
    }
    return HEARTH_OK;
}

/* A set with matrices split over the ranks of a tensor-parallel stage
 * (struct weight, tp): this rank's rows of each of them are computed as
 * the rows of a matrix of their own (the same kernels on the same rows, so
 * the same values), into tp_mine, one product after the other; one
 * gather brings every rank's, in the same order; and each product's rows
 * are laid out where they belong.  The others are computed here whole. */
static hearth_status matmul_set_split(struct hearth_backend *be, int n, struct act *const outs[],
                                      const struct weight *const ws[], const struct act *in)
{
    struct cpu_backend *c = cpu(be);
    const int64_t T = in->rows;
    struct hearth_pipeline *p = NULL;
    struct weight local[MATMUL_SET_MAX];
    struct act mine[MATMUL_SET_MAX];
    const struct weight *lw[MATMUL_SET_MAX];
    struct act *lo[MATMUL_SET_MAX];
    size_t floats = 0;
    for (int i = 0; i < n; i++)
        if (ws[i]->tp) {
            if (p && ws[i]->tp != p) return hearth_error(HEARTH_E_INTERNAL, "matmul set over two pipelines");
            p = ws[i]->tp;
            floats += (size_t)T * (size_t)ws[i]->tp_rows;
        }
    const int32_t N = pipe_tp(p);
    HEARTH_TRY(grow((void **)&c->tp_mine, &c->tp_mine_bytes, floats * sizeof(float), "a tensor-parallel product"));
    HEARTH_TRY(grow((void **)&c->tp_counts, &c->tp_counts_bytes, (size_t)N * sizeof(int64_t),
                    "a tensor-parallel product"));
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        const struct weight *w = ws[i];
        if (!w->tp) {
            lw[i] = w;
            lo[i] = outs[i];
            continue;
        }
        local[i] = *w;
        local[i].n_out = w->tp_rows;
        local[i].data = (const uint8_t *)w->data + (size_t)w->tp_first * w->row_bytes;
        local[i].tp = NULL;
        mine[i] = (struct act){c->tp_mine + at, NULL, T, w->tp_rows, T * w->tp_rows};
        at += (size_t)(T * w->tp_rows);
        lw[i] = &local[i];
        lo[i] = &mine[i];
    }
    struct matmul_part parts[MATMUL_SET_MAX];
    HEARTH_TRY(matmul_parts(be, n, lo, lw, in, NULL, NULL, parts));
    size_t total = 0;
    for (int32_t r = 0; r < N; r++) {
        int64_t count = 0;
        for (int i = 0; i < n; i++) {
            if (!ws[i]->tp) continue;
            int64_t first, rows;
            weight_tp_rows(ws[i]->n_out, N, r, &first, &rows);
            count += T * rows;
        }
        c->tp_counts[r] = count;
        total += (size_t)count;
    }
    HEARTH_TRY(grow((void **)&c->tp_all, &c->tp_all_bytes, total * sizeof(float), "a tensor-parallel product"));
    HEARTH_TRY(pipe_tp_gather(p, c->tp_mine, c->tp_counts, c->tp_all));
    const float *from = c->tp_all;
    for (int32_t r = 0; r < N; r++)
        for (int i = 0; i < n; i++) {
            const struct weight *w = ws[i];
            if (!w->tp) continue;
            int64_t first, rows;
            weight_tp_rows(w->n_out, N, r, &first, &rows);
            for (int64_t t = 0; t < T; t++)
                memcpy(outs[i]->host + t * w->n_out + first, from + t * rows, (size_t)rows * sizeof(float));
            from += T * rows;
        }
    for (int i = 0; i < n; i++) {
        outs[i]->rows = T;
        outs[i]->width = ws[i]->n_out;
    }
    return HEARTH_OK;
}

/* The columns of a tensor-parallel stage's ranks (backend.h,
 * tp_gather_cols): one gather of every rank's rows, whole, into tp_all,
 * then each rank's columns laid out in out (after the gather, so out may
 * be mine). */
static hearth_status cpu_tp_gather_cols(struct hearth_backend *be, struct act *out, const struct act *mine,
                                        struct hearth_pipeline *p, int64_t n_units, int64_t unit)
{
    struct cpu_backend *c = cpu(be);
    const int32_t N = pipe_tp(p), me = pipe_tp_rank(p);
    const int64_t T = mine->rows, width = n_units * unit;
    int64_t first, count;
    tp_share(n_units, N, me, &first, &count);
    if (mine->width != count * unit || out->capacity < T * width)
        return hearth_error(HEARTH_E_INTERNAL, "a gather of %lld columns of %lld from rows of %lld",
                            (long long)(count * unit), (long long)width, (long long)mine->width);
    HEARTH_TRY(grow((void **)&c->tp_counts, &c->tp_counts_bytes, (size_t)N * sizeof(int64_t),
                    "a tensor-parallel gather"));
    for (int32_t r = 0; r < N; r++) {
        tp_share(n_units, N, r, &first, &count);
        c->tp_counts[r] = T * count * unit;
    }
    HEARTH_TRY(grow((void **)&c->tp_all, &c->tp_all_bytes, (size_t)(T * width) * sizeof(float),
                    "a tensor-parallel gather"));
    HEARTH_TRY(pipe_tp_gather(p, mine->host, c->tp_counts, c->tp_all));
    const float *from = c->tp_all;
    for (int32_t r = 0; r < N; r++) {
        tp_share(n_units, N, r, &first, &count);
        const int64_t cols = count * unit;
        for (int64_t t = 0; t < T; t++)
            memcpy(out->host + t * width + first * unit, from + t * cols, (size_t)cols * sizeof(float));
        from += T * cols;
    }
    out->rows = T;
    out->width = width;
    return HEARTH_OK;
}

static hearth_status cpu_matmul_set(struct hearth_backend *be, int n, struct act *const outs[],
                                    const struct weight *const ws[], const struct act *in)
{
    if (n < 1 || n > MATMUL_SET_MAX)
        return hearth_error(HEARTH_E_INTERNAL, "matmul set of %d products", n);
    for (int i = 0; i < n; i++)
        if (ws[i]->tp) return matmul_set_split(be, n, outs, ws, in);
    struct matmul_part parts[MATMUL_SET_MAX];
    return matmul_parts(be, n, outs, ws, in, NULL, NULL, parts);
}

static hearth_status cpu_matmul(struct hearth_backend *be, struct act *out, const struct weight *w,
                                const struct act *in)
{
    return cpu_matmul_set(be, 1, &out, &w, in);
}

/* Products per head (backend.h, matmul_heads): each head's input slice of
 * every row converted once, then the (head, chunk of rows) pairs dealt
 * out to the threads, each writing its outputs straight into their
 * columns of out. */
struct heads_job {
    const struct weight *w;
    int32_t n_heads;
    hearth_gemm_fn gemm;
    hearth_act_convert_fn convert;
    size_t act_row;
    const struct act *in;
    int64_t in_stride, in_first;
    struct act *out;
    int64_t out_stride, out_first;
    uint8_t *xq; /* n_heads x n_tok converted rows */
};

static void matmul_heads_run(void *arg)
{
    const struct heads_job *j = arg;
    const int64_t n_tok = j->in->rows, n_in = j->w[0].n_in, n_out = j->w[0].n_out;
    const int64_t chunks = (n_out + MATMUL_ROW_CHUNK - 1) / MATMUL_ROW_CHUNK;
#pragma omp for schedule(static)
    for (int64_t ht = 0; ht < (int64_t)j->n_heads * n_tok; ht++) {
        const int64_t h = ht / n_tok, t = ht % n_tok;
        j->convert(j->in->host + t * j->in->width + h * j->in_stride + j->in_first, j->xq + (size_t)ht * j->act_row,
                   n_in);
    }
#pragma omp for schedule(guided) /* as matmul_run's chunks */
    for (int64_t hc = 0; hc < (int64_t)j->n_heads * chunks; hc++) {
        const int64_t h = hc / chunks, r0 = (hc % chunks) * MATMUL_ROW_CHUNK;
        const struct weight *w = &j->w[h];
        const int64_t rows = HEARTH_MIN(MATMUL_ROW_CHUNK, n_out - r0);
        j->gemm(n_in, rows, n_tok, (const uint8_t *)w->data + (size_t)r0 * w->row_bytes, w->row_bytes,
                j->xq + (size_t)h * (size_t)n_tok * j->act_row, j->act_row,
                j->out->host + h * j->out_stride + j->out_first + r0, j->out->width);
    }
}

static hearth_status cpu_matmul_heads(struct hearth_backend *be, struct act *out, int64_t out_stride,
                                      int64_t out_first, const struct weight *w, int32_t n_heads,
                                      const struct act *in, int64_t in_stride, int64_t in_first)
{
    struct cpu_backend *c = cpu(be);
    const hearth_kernels *k = c->kernels;
    const int64_t n_tok = in->rows, n_in = w[0].n_in, n_out = w[0].n_out;
    for (int32_t h = 0; h < n_heads; h++)
        if (w[h].type != w[0].type || w[h].n_in != n_in || w[h].n_out != n_out)
            return hearth_error(HEARTH_E_INTERNAL, "matmul_heads '%s': heads of different shapes", w[0].name);
    if (!hearth_kernels_supports(k, w[0].type))
        return hearth_error(HEARTH_E_UNSUPPORTED, "tensor '%s': no matrix product for type %s", w[0].name,
                            hearth_type_name(w[0].type));
    if (n_heads < 1 || in_first < 0 || out_first < 0 || (n_heads - 1) * in_stride + in_first + n_in > in->width ||
        out_first + n_out > out_stride ||
        (int64_t)n_heads * out_stride * n_tok > out->capacity)
        return hearth_error(HEARTH_E_INTERNAL, "matmul_heads '%s': %d heads of %lld from %lld wide rows",
                            w[0].name, n_heads, (long long)n_in, (long long)in->width);
    const hearth_type at = k->act_type[w[0].type];
    const size_t act_row = hearth_type_row_bytes(at, n_in);
    HEARTH_TRY(grow((void **)&c->act_scratch, &c->act_scratch_bytes, act_row * (size_t)n_heads * (size_t)n_tok,
                    "converted activations"));
    out->rows = n_tok;
    out->width = (int64_t)n_heads * out_stride;
    const struct heads_job job = {
        .w = w,
        .n_heads = n_heads,
        .gemm = k->gemm[w[0].type],
        .convert = k->act_convert[at],
        .act_row = act_row,
        .in = in,
        .in_stride = in_stride,
        .in_first = in_first,
        .out = out,
        .out_stride = out_stride,
        .out_first = out_first,
        .xq = c->act_scratch,
    };
    const double work = (double)n_heads * (double)n_out * (double)n_in * (double)n_tok;
    cpu_run_parallel(work >= MATMUL_SERIAL_WORK ? be->n_threads : 1, matmul_heads_run, (void *)&job);
    return HEARTH_OK;
}

static hearth_status cpu_copy_heads(struct hearth_backend *be, struct act *dst, int64_t dst_stride,
                                    int64_t dst_first, const struct act *src, int64_t src_stride,
                                    int64_t src_first, int32_t n_heads, int64_t n)
{
    (void)be;
    if (dst_first + n > dst_stride || (int64_t)n_heads * dst_stride * src->rows > dst->capacity ||
        (n_heads - 1) * src_stride + src_first + n > src->width)
        return hearth_error(HEARTH_E_INTERNAL, "copy_heads: %d heads of %lld from %lld wide rows", n_heads,
                            (long long)n, (long long)src->width);
    dst->rows = src->rows;
    dst->width = (int64_t)n_heads * dst_stride;
    for (int64_t t = 0; t < src->rows; t++)
        for (int32_t h = 0; h < n_heads; h++)
            memcpy(dst->host + t * dst->width + h * dst_stride + dst_first,
                   src->host + t * src->width + h * src_stride + src_first, (size_t)n * sizeof(float));
    return HEARTH_OK;
}

/* ---- elementwise operations ------------------------------------------------------- */

/* The elementwise operations' arguments, as their region functions take
 * them (see cpu_run_parallel). */
struct rows_job {
    struct act *out;
    const struct act *a, *b;
    const float *w;                /* bias or norm weights */
    float eps;
    int32_t n_heads, head_dim;
    const struct rope_params *rope;
    const struct batch_pos *bp;
};

static int elementwise_threads(const struct hearth_backend *be, int64_t n)
{
    return n >= ELEMENTWISE_SERIAL_WORK ? be->n_threads : 1;
}

static void add_bias_run(void *arg)
{
    const struct rows_job *j = arg;
    struct act *x = j->out;
    const float *b = j->w;
    const int64_t width = x->width;
#pragma omp for schedule(static)
    for (int64_t t = 0; t < x->rows; t++) {
        float *row = x->host + t * width;
        for (int64_t i = 0; i < width; i++) row[i] += b[i];
    }
}

static hearth_status cpu_add_bias(struct hearth_backend *be, struct act *x, const struct weight *bias)
{
    const struct rows_job j = {.out = x, .w = bias->data};
    cpu_run_parallel(elementwise_threads(be, x->rows * x->width), add_bias_run, (void *)&j);
    return HEARTH_OK;
}

static void rmsnorm_run(void *arg)
{
    const struct rows_job *j = arg;
    const struct act *in = j->a;
    const float *g = j->w;
    const int64_t n = in->width;
#pragma omp for schedule(static)
    for (int64_t t = 0; t < in->rows; t++) {
        const float *x = in->host + t * n;
        float *y = j->out->host + t * n;
        double ss = 0.0;
        for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
        const float scale = (float)(1.0 / sqrt(ss / (double)n + (double)j->eps));
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale * g[i];
    }
}

static hearth_status cpu_rmsnorm(struct hearth_backend *be, struct act *out, const struct act *in,
                                 const struct weight *w, float eps)
{
    const struct rows_job j = {.out = out, .a = in, .w = w->data, .eps = eps};
    cpu_run_parallel(in->rows > 1 ? be->n_threads : 1, rmsnorm_run, (void *)&j);
    out->rows = in->rows;
    out->width = in->width;
    return HEARTH_OK;
}

static void rope_run(void *arg)
{
    const struct rows_job *j = arg;
    const struct rope_params *rope = j->rope;
    const struct batch_pos *bp = j->bp;
    struct act *x = j->out;
    const int32_t half = rope->n_dims / 2, n_heads = j->n_heads, head_dim = j->head_dim;
#pragma omp for schedule(static)
    for (int64_t t = 0; t < bp->n_tokens; t++) {
        const double pos = (double)bp->pos[t] * rope->freq_scale;
        for (int32_t i = 0; i < half; i++) {
            /* theta_i = pos * base^(-2i/d), divided by the per-pair factor
             * of long-context models (RoFormer eq. 15; Llama 3.1 rope_freqs). */
            double theta = pos * pow((double)rope->freq_base, -2.0 * i / rope->n_dims);
            if (rope->freq_factors) theta /= rope->freq_factors[i];
            if (rope->yarn_ext != 0.0f) { /* model.h: YaRN's mix of both angles */
                const double y = ((double)i - rope->yarn_low) / HEARTH_MAX(0.001, (double)rope->yarn_high - rope->yarn_low);
                const double ramp = (1.0 - HEARTH_CLAMP(y, 0.0, 1.0)) * rope->yarn_ext;
                theta = theta * (1.0 - ramp) + theta / rope->freq_scale * ramp;
            }
            const float cs = (float)cos(theta) * rope->mscale, sn = (float)sin(theta) * rope->mscale;
            for (int32_t h = 0; h < n_heads; h++) {
                float *v = x->host + t * x->width + (int64_t)h * head_dim;
                int32_t a, b;
                if (rope->style == ROPE_NORMAL) {
                    a = 2 * i;
                    b = 2 * i + 1;
                } else {
                    a = i;
                    b = i + half;
                }
                const float x0 = v[a], x1 = v[b];
                v[a] = x0 * cs - x1 * sn;
                v[b] = x0 * sn + x1 * cs;
            }
        }
    }
}

static hearth_status cpu_rope(struct hearth_backend *be, struct act *x, int32_t n_heads, int32_t head_dim,
                              const struct rope_params *rope, const struct batch_pos *bp)
{
    const struct rows_job j = {.out = x, .n_heads = n_heads, .head_dim = head_dim, .rope = rope, .bp = bp};
    cpu_run_parallel(bp->n_tokens > 1 ? be->n_threads : 1, rope_run, (void *)&j);
    return HEARTH_OK;
}

static void add_run(void *arg)
{
    const struct rows_job *j = arg;
    const float *a = j->a->host, *b = j->b->host;
    float *out = j->out->host;
    const int64_t n = j->a->rows * j->a->width;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

static hearth_status cpu_add(struct hearth_backend *be, struct act *out, const struct act *a, const struct act *b)
{
    const struct rows_job j = {.out = out, .a = a, .b = b};
    cpu_run_parallel(elementwise_threads(be, a->rows * a->width), add_run, (void *)&j);
    out->rows = a->rows;
    out->width = a->width;
    return HEARTH_OK;
}

static void swiglu_run(void *arg)
{
    const struct rows_job *j = arg;
    const float *gate = j->a->host, *up = j->b->host;
    float *out = j->out->host;
    const int64_t n = j->a->rows * j->a->width;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        const float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

static hearth_status cpu_swiglu(struct hearth_backend *be, struct act *out, const struct act *gate,
                                const struct act *up)
{
    const struct rows_job j = {.out = out, .a = gate, .b = up};
    cpu_run_parallel(elementwise_threads(be, gate->rows * gate->width), swiglu_run, (void *)&j);
    out->rows = gate->rows;
    out->width = gate->width;
    return HEARTH_OK;
}

/* GELU in its tanh form (Hendrycks and Gimpel 2016, eq. 2), the gate of
 * Gemma's feed-forward: out = gelu(gate) * up, computed as
 * 0.5 g (1 + tanh(y)) = g / (1 + e^(-2y)), y = sqrt(2/pi) (g + 0.044715 g^3),
 * which needs one expf instead of a tanhf. */
static void geglu_run(void *arg)
{
    const struct rows_job *j = arg;
    const float *gate = j->a->host, *up = j->b->host;
    float *out = j->out->host;
    const int64_t n = j->a->rows * j->a->width;
    const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        const float g = gate[i];
        out[i] = g / (1.0f + expf(-2.0f * k * (g + 0.044715f * g * g * g))) * up[i];
    }
}

static hearth_status cpu_geglu(struct hearth_backend *be, struct act *out, const struct act *gate,
                               const struct act *up)
{
    const struct rows_job j = {.out = out, .a = gate, .b = up};
    cpu_run_parallel(elementwise_threads(be, gate->rows * gate->width), geglu_run, (void *)&j);
    out->rows = gate->rows;
    out->width = gate->width;
    return HEARTH_OK;
}

static hearth_status cpu_copy_rows(struct hearth_backend *be, struct act *dst, int64_t dst_first,
                                   const struct act *src, int64_t first, int64_t n_rows)
{
    (void)be;
    memmove(dst->host + dst_first * src->width, src->host + first * src->width,
            (size_t)(n_rows * src->width) * sizeof(float));
    dst->rows = dst_first + n_rows;
    dst->width = src->width;
    return HEARTH_OK;
}

/* ---- mixture of experts ------------------------------------------------------------ */

/* The index of the highest of x[0..n-1] not yet taken (taken[i] false),
 * the lower index among equals; -1 when all are taken. */
static int32_t highest_free(const float *x, const bool *taken, int32_t n)
{
    int32_t best = -1;
    for (int32_t i = 0; i < n; i++)
        if (!taken[i] && (best < 0 || x[i] > x[best])) best = i;
    return best;
}

void moe_route(const struct moe_routing *r, const float *logits, int32_t *ids, float *w)
{
    const int32_t E = r->n_expert, k = r->n_used;
    float p[MOE_EXPERT_MAX], sel[MOE_EXPERT_MAX];
    bool taken[MOE_EXPERT_MAX];
    if (r->gating == MOE_GATING_SIGMOID) {
        for (int32_t e = 0; e < E; e++) p[e] = 1.0f / (1.0f + expf(-logits[e]));
    } else {
        float max = logits[0];
        for (int32_t e = 1; e < E; e++) max = logits[e] > max ? logits[e] : max;
        double sum = 0.0;
        for (int32_t e = 0; e < E; e++) sum += (double)expf(logits[e] - max);
        const float inv = (float)(1.0 / sum);
        for (int32_t e = 0; e < E; e++) p[e] = expf(logits[e] - max) * inv;
    }
    /* what the choice compares: the scores with the bias; softmax scores
     * without one by their logits, in the same order and never tied by
     * rounding */
    const float *s = r->gating == MOE_GATING_SOFTMAX && !r->select_bias ? logits : sel;
    if (s == sel)
        for (int32_t e = 0; e < E; e++) sel[e] = p[e] + (r->select_bias ? r->select_bias[e] : 0.0f);
    for (int32_t e = 0; e < E; e++) taken[e] = false;
    if (r->n_groups > 1) {
        /* the groups not among the n_groups_used best are ruled out */
        const int32_t G = r->n_groups, per = E / G;
        float score[MOE_EXPERT_MAX];
        bool chosen[MOE_EXPERT_MAX];
        for (int32_t g = 0; g < G; g++) {
            const float *x = s + (int64_t)g * per;
            int32_t a = 0;
            for (int32_t i = 1; i < per; i++) a = x[i] > x[a] ? i : a;
            score[g] = x[a];
            if (r->gating == MOE_GATING_SIGMOID && per > 1) {
                int32_t b = a == 0 ? 1 : 0;
                for (int32_t i = 0; i < per; i++)
                    if (i != a && x[i] > x[b]) b = i;
                score[g] += x[b];
            }
            chosen[g] = false;
        }
        for (int32_t j = 0; j < r->n_groups_used; j++) chosen[highest_free(score, chosen, G)] = true;
        for (int32_t e = 0; e < E; e++) taken[e] = !chosen[e / per];
    }
    for (int32_t j = 0; j < k; j++) {
        const int32_t best = highest_free(s, taken, E);
        taken[best] = true;
        ids[j] = best;
        w[j] = p[best];
    }
    if (r->norm_topk) {
        float sum = 0.0f;
        for (int32_t j = 0; j < k; j++) sum += w[j];
        sum = sum > 0x1p-14f ? sum : 0x1p-14f;
        for (int32_t j = 0; j < k; j++) w[j] /= sum;
    }
    if (r->scale != 1.0f)
        for (int32_t j = 0; j < k; j++) w[j] *= r->scale;
}

/* A view of rows first .. first+n-1 of a buffer of rows of width floats. */
static struct act act_view(float *base, int64_t first, int64_t n, int64_t width)
{
    struct act a = {base + first * width, NULL, n, width, n * width};
    return a;
}

/* g = act(g + bias_g, u + bias_u) row by row (backend.h, moe_experts),
 * for the activations and biases other than plain SwiGLU's. */
static void moe_activate(const struct moe_experts *moe, struct act *g, const struct act *u, const float *bg,
                         const float *bu, int n_threads)
{
    const int64_t width = g->width;
    const float alpha = moe->alpha, limit = moe->limit;
    (void)n_threads; /* read only by the OpenMP pragma */
#pragma omp parallel for num_threads(n_threads) schedule(static) \
    if (g->rows * width >= ELEMENTWISE_SERIAL_WORK)
    for (int64_t t = 0; t < g->rows; t++) {
        float *gr = g->host + t * width;
        const float *ur = u->host + t * width;
        for (int64_t i = 0; i < width; i++) {
            float x = gr[i] + (bg ? bg[i] : 0.0f), y = ur[i] + (bu ? bu[i] : 0.0f);
            if (moe->act == MOE_SWIGLU_OAI) {
                x = fminf(x, limit);
                y = fminf(fmaxf(y, -limit), limit);
                gr[i] = x / (1.0f + expf(-alpha * x)) * (y + 1.0f);
            } else {
                gr[i] = x / (1.0f + expf(-x)) * y;
            }
        }
    }
}

static hearth_status cpu_moe_ffn(struct hearth_backend *be, struct act *out, const struct act *in,
                                 const struct act *logits, const struct moe_experts *moe)
{
    struct cpu_backend *c = cpu(be);
    const int64_t n_tok = in->rows, n_embd = in->width;
    const int32_t E = moe->route.n_expert, k = moe->route.n_used;
    const int64_t n_ff = moe->gate[0].n_out;
    const int64_t n_pairs = n_tok * k;
    if (k < 1 || k > E || E > MOE_EXPERT_MAX || logits->width != E || moe->down[0].n_out != n_embd)
        return hearth_error(HEARTH_E_INTERNAL, "moe_ffn: %d of %d experts, logits %lld wide", k, E,
                            (long long)logits->width);

    /* Index: per expert its first grouped row and a cursor; per pair
     * (t, j) its expert, its row among the grouped rows and its weight;
     * per grouped row its token. */
    const size_t idx_bytes = (size_t)(2 * E + 1) * sizeof(int64_t) +
                             (size_t)n_pairs * (3 * sizeof(int32_t) + sizeof(float));
    HEARTH_TRY(grow((void **)&c->moe_index, &c->moe_index_bytes, idx_bytes, "expert routing"));
    int64_t *start = (int64_t *)(void *)c->moe_index;
    int64_t *next = start + E + 1;
    int32_t *ids = (int32_t *)(void *)(next + E);
    int32_t *row_of = ids + n_pairs;
    int32_t *token_of = row_of + n_pairs;
    float *wts = (float *)(void *)(token_of + n_pairs);
    /* grouped inputs, gate and up products, and results */
    const size_t n_floats = (size_t)n_pairs * (size_t)(2 * n_embd + 2 * n_ff);
    HEARTH_TRY(grow((void **)&c->moe_act, &c->moe_act_bytes, n_floats * sizeof(float), "expert activations"));
    float *xg = c->moe_act;
    float *gg = xg + n_pairs * n_embd;
    float *ug = gg + n_pairs * n_ff;
    float *yg = ug + n_pairs * n_ff;

    /* a tensor-parallel stage's share of the experts (struct moe_experts,
     * tp): experts e0 .. e1 - 1 here, the others' results gathered */
    int32_t e0 = 0, e1 = E;
    if (moe->tp) {
        int64_t first, count;
        tp_share(E, pipe_tp(moe->tp), pipe_tp_rank(moe->tp), &first, &count);
        e0 = (int32_t)first;
        e1 = (int32_t)(first + count);
    }
    for (int64_t t = 0; t < n_tok; t++)
        moe_route(&moe->route, logits->host + t * E, ids + t * k, wts + t * k);
    /* group the pairs by expert, tokens in order within a group */
    for (int32_t e = 0; e <= E; e++) start[e] = 0;
    for (int64_t p = 0; p < n_pairs; p++) start[ids[p] + 1]++;
    for (int32_t e = 0; e < E; e++) start[e + 1] += start[e];
    for (int32_t e = 0; e < E; e++) next[e] = start[e];
    for (int64_t p = 0; p < n_pairs; p++) {
        const int64_t r = next[ids[p]]++;
        row_of[p] = (int32_t)r;
        token_of[r] = (int32_t)(p / k);
    }
#pragma omp parallel for num_threads(be->n_threads) schedule(static) \
    if (n_pairs * n_embd >= ELEMENTWISE_SERIAL_WORK)
    for (int64_t r = 0; r < n_pairs; r++)
        memcpy(xg + r * n_embd, in->host + (int64_t)token_of[r] * n_embd, (size_t)n_embd * sizeof(float));

    /* Each expert with rows routed to it: its matrices once for all of
     * them.  The experts' products are one set, gate and up in one
     * parallel region and down in another, not two regions per expert: a
     * decode step of a few sequences gives dozens of experts a row or two
     * each, and the threads' meetings, not the weights, would set its
     * time.  Each product is the call it would be alone. */
    int32_t n_active = 0;
    for (int32_t e = e0; e < e1; e++) n_active += start[e + 1] > start[e];
    const size_t per = 2 * (sizeof(struct matmul_part) + sizeof(struct act) + sizeof(struct act *) +
                            sizeof(struct weight *) + 2 * sizeof(int64_t));
    HEARTH_TRY(grow(&c->moe_parts, &c->moe_parts_bytes, per * (size_t)n_active, "expert products"));
    struct matmul_part *parts = c->moe_parts;
    struct act *views = (struct act *)(void *)(parts + 2 * n_active);
    struct act **outs = (struct act **)(void *)(views + 2 * n_active);
    const struct weight **ws = (const struct weight **)(void *)(outs + 2 * n_active);
    int64_t *row0 = (int64_t *)(void *)(ws + 2 * n_active);
    int64_t *rows = row0 + 2 * n_active;
    int32_t a = 0;
    for (int32_t e = e0; e < e1; e++) {
        const int64_t r0 = start[e], n = start[e + 1] - start[e];
        if (n == 0) continue;
        views[2 * a] = act_view(gg, r0, n, n_ff);
        views[2 * a + 1] = act_view(ug, r0, n, n_ff);
        outs[2 * a] = &views[2 * a];
        outs[2 * a + 1] = &views[2 * a + 1];
        ws[2 * a] = &moe->gate[e];
        ws[2 * a + 1] = &moe->up[e];
        row0[2 * a] = row0[2 * a + 1] = r0;
        rows[2 * a] = rows[2 * a + 1] = n;
        a++;
    }
    struct act x = act_view(xg, 0, n_pairs, n_embd);
    if (n_active > 0) HEARTH_TRY(matmul_parts(be, 2 * n_active, outs, ws, &x, row0, rows, parts));
    /* this rank's experts' rows: start[e0] .. start[e1] - 1 */
    const int64_t mine0 = start[e0], n_mine = start[e1] - start[e0];
    if (moe->act == MOE_SILU && !moe->gate_bias && !moe->up_bias) {
        /* row by row: all the grouped rows at once */
        struct act g = act_view(gg, mine0, n_mine, n_ff), u = act_view(ug, mine0, n_mine, n_ff);
        if (n_mine > 0) HEARTH_TRY(cpu_swiglu(be, &g, &g, &u));
    } else {
        for (int32_t e = e0; e < e1; e++) {
            const int64_t r0 = start[e], n = start[e + 1] - start[e];
            if (n == 0) continue;
            struct act g = act_view(gg, r0, n, n_ff), u = act_view(ug, r0, n, n_ff);
            const float *bg = moe->gate_bias ? moe->gate_bias + (int64_t)e * n_ff : NULL;
            const float *bu = moe->up_bias ? moe->up_bias + (int64_t)e * n_ff : NULL;
            moe_activate(moe, &g, &u, bg, bu, be->n_threads);
        }
    }
    a = 0;
    for (int32_t e = e0; e < e1; e++) {
        const int64_t r0 = start[e], n = start[e + 1] - start[e];
        if (n == 0) continue;
        views[a] = act_view(yg, r0, n, n_embd);
        outs[a] = &views[a];
        ws[a] = &moe->down[e];
        row0[a] = r0;
        rows[a] = n;
        a++;
    }
    struct act g_all = act_view(gg, 0, n_pairs, n_ff);
    if (n_active > 0) HEARTH_TRY(matmul_parts(be, n_active, outs, ws, &g_all, row0, rows, parts));
    if (moe->down_bias) {
        for (int32_t e = e0; e < e1; e++) {
            const int64_t r0 = start[e], n = start[e + 1] - start[e];
            const float *bd = moe->down_bias + (int64_t)e * n_embd;
            for (int64_t r = r0; r < r0 + n; r++)
                for (int64_t i = 0; i < n_embd; i++) yg[r * n_embd + i] += bd[i];
        }
    }

    /* The other ranks' experts' rows: the experts are shared out in
     * order and their rows grouped in order, so every rank's rows are one
     * run, rank after rank, which one gather fills in place.  The routing
     * is every rank's the same (the same logits), hence the counts. */
    if (moe->tp) {
        const int32_t N = pipe_tp(moe->tp);
        HEARTH_TRY(grow((void **)&c->tp_counts, &c->tp_counts_bytes, (size_t)N * sizeof(int64_t),
                        "a tensor-parallel gather"));
        for (int32_t r = 0; r < N; r++) {
            int64_t first, count;
            tp_share(E, N, r, &first, &count);
            c->tp_counts[r] = (start[first + count] - start[first]) * n_embd;
        }
        HEARTH_TRY(pipe_tp_gather(moe->tp, yg + mine0 * n_embd, c->tp_counts, yg));
    }

    /* each token's experts' results, weighted, in its routing order */
#pragma omp parallel for num_threads(be->n_threads) schedule(static) \
    if (n_tok * n_embd * k >= ELEMENTWISE_SERIAL_WORK)
    for (int64_t t = 0; t < n_tok; t++) {
        float *o = out->host + t * n_embd;
        for (int64_t i = 0; i < n_embd; i++) o[i] = 0.0f;
        for (int32_t j = 0; j < k; j++) {
            const float w = wts[t * k + j];
            const float *y = yg + (int64_t)row_of[t * k + j] * n_embd;
            for (int64_t i = 0; i < n_embd; i++) o[i] = fmaf(w, y[i], o[i]);
        }
    }
    out->rows = n_tok;
    out->width = n_embd;
    return HEARTH_OK;
}

static hearth_status cpu_add_gated(struct hearth_backend *be, struct act *x, const struct act *y,
                                   const struct act *gate)
{
    const int64_t width = x->width;
#pragma omp parallel for num_threads(be->n_threads) schedule(static) \
    if (x->rows * width >= ELEMENTWISE_SERIAL_WORK)
    for (int64_t t = 0; t < x->rows; t++) {
        const float s = 1.0f / (1.0f + expf(-gate->host[t * gate->width]));
        float *row = x->host + t * width;
        const float *yr = y->host + t * width;
        for (int64_t i = 0; i < width; i++) row[i] += s * yr[i];
    }
    return HEARTH_OK;
}

/* ---- attention -------------------------------------------------------------------- */

/* Tokens of one sequence whose query heads of one key/value head make one
 * work item: their keys are read once for all of them (8 query heads of a
 * group x 16 tokens = 128 rows per pass over a key block). */
#define ATTN_QUERY_TILE 16
/* At most this many query heads of a group share an item: multi-query
 * attention over deepseek2's latent (128 query heads on one key/value
 * head) would otherwise make one item per key range, and a decode step
 * at a short context one thread's work.  A row's arithmetic is its own
 * whatever rows share its item, so the split changes no bits. */
#define ATTN_HEAD_CHUNK 16
/* Keys are taken in ranges of ATTN_SPLIT_KEYS positions (aligned to the
 * sequence's position 0) whose partial softmax states are merged in
 * order, so that a long context keeps every thread busy in decode.  The
 * ranges, and the blocks of keys within them (ATTN_KEY_BLOCK, cut where a
 * KV block ends), depend only on a row's own position and the block size:
 * a row's result does not depend on the other rows of the batch, on how
 * its sequence's prompt was split into batches, or on the thread count. */
#define ATTN_SPLIT_KEYS 256

/* Multiply-adds (scores and weighted values) below which a layer's
 * attention runs on one thread. */
#define ATTN_SERIAL_WORK (64 * 1024)

static size_t round_up16(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

/* A tile: rows t0 .. t1-1 of one sequence; its items are item0 .. item0 +
 * n_head_kv * n_chunks * n_splits - 1, (key/value head, chunk of its query
 * heads, key range) in that order. */
struct attn_tile {
    int32_t seq;
    int32_t t0, t1;
    int32_t n_splits;
    int64_t item0;
};

/* The positions row t of sequence s sees: its own and the earlier ones,
 * or with bidirectional attention every position of the sequence up to
 * its last row of the batch. */
static inline int32_t attn_visible(const struct hparams *hp, const struct batch_pos *bp, int32_t s, int64_t t)
{
    return hp->bidirectional ? bp->pos[bp->seq_start[s + 1] - 1] + 1 : bp->pos[t] + 1;
}

static hearth_status cpu_attention(struct hearth_backend *be, struct act *out, const struct act *q,
                                   const struct act *k, const struct act *v, struct kv_cache *kv,
                                   int il, const struct hparams *hp, const float *sinks,
                                   const struct batch_pos *bp)
{
    struct cpu_backend *c = cpu(be);
    struct kv_layer *L = &kv->layers[il];
    const int32_t hd = hp->head_dim, n_head = hp->n_head, n_head_kv = hp->n_head_kv;
    /* multi-head latent attention: the values are the last kv_latent
     * elements of the key rows */
    const int32_t vd = hp->kv_latent > 0 ? hp->kv_latent : hd;
    const int32_t group = n_head / n_head_kv;
    const int32_t chunk_heads = HEARTH_MIN(group, ATTN_HEAD_CHUNK);
    const int32_t n_chunks = (group + chunk_heads - 1) / chunk_heads;
    if (kv->values_in_keys != (hp->kv_latent > 0) || (kv->values_in_keys && kv->value_first != hd - vd))
        return hearth_error(HEARTH_E_INTERNAL, "layer %d: a KV cache of another shape than the model's", il);
    const int64_t n_tok = bp->n_tokens;
    const int32_t B = kv->block_tokens;
    const int32_t window = hparams_layer_window(hp, il);
    attn_block_fn block = c->attn->block[kv->type];
    if (!block)
        return hearth_error(HEARTH_E_UNSUPPORTED, "attention over a %s KV cache is not supported",
                            hearth_type_name(kv->type));

    /* A layer of the window space has slots and tables of its own. */
    const int32_t *slots = bp->slot, *blocks = bp->blocks, *table_start = bp->table_start;
    if (L->window) {
        if (!bp->wslot || !bp->wblocks || !bp->wtable_start)
            return hearth_error(HEARTH_E_INTERNAL, "layer %d: a window-space layer without window tables", il);
        slots = bp->wslot;
        blocks = bp->wblocks;
        table_start = bp->wtable_start;
    }

    /* The batch's keys and values go into the cache first: a token sees
     * every position up to its own, including earlier tokens of the batch.
     * Where the values are in the keys, a head's row is its k (hd - vd
     * elements) then its v (vd). */
    if (kv->values_in_keys) {
        HEARTH_TRY(grow((void **)&c->kv_row, &c->kv_row_bytes, (size_t)kv->row_elems * sizeof(float), "a key row"));
        const int32_t kd = hd - vd;
        for (int64_t t = 0; t < n_tok; t++) {
            for (int32_t h = 0; h < n_head_kv; h++) {
                memcpy(c->kv_row + (int64_t)h * hd, k->host + t * k->width + (int64_t)h * kd,
                       (size_t)kd * sizeof(float));
                memcpy(c->kv_row + (int64_t)h * hd + kd, v->host + t * v->width + (int64_t)h * vd,
                       (size_t)vd * sizeof(float));
            }
            kv_cache_store(kv, L->k, slots[t], c->kv_row);
        }
    } else {
        for (int64_t t = 0; t < n_tok; t++) {
            kv_cache_store(kv, L->k, slots[t], k->host + t * k->width);
            kv_cache_store(kv, L->v, slots[t], v->host + t * v->width);
        }
    }

    /* Tiles of each sequence's rows, and their work items. */
    int64_t n_tiles = 0;
    for (int32_t s = 0; s < bp->n_seqs; s++)
        n_tiles += (bp->seq_start[s + 1] - bp->seq_start[s] + ATTN_QUERY_TILE - 1) / ATTN_QUERY_TILE;
    const size_t tiles_bytes = ((size_t)n_tiles * sizeof(struct attn_tile) + 63) & ~(size_t)63;
    const size_t tile_of_bytes = ((size_t)n_tok * sizeof(int32_t) + 63) & ~(size_t)63;
    hearth_status st = grow((void **)&c->attn_index, &c->attn_index_bytes, tiles_bytes + tile_of_bytes,
                            "attention work items");
    if (st) return st;
    struct attn_tile *tiles = (struct attn_tile *)c->attn_index;
    int32_t *tile_of = (int32_t *)(c->attn_index + tiles_bytes);
    int64_t n_items = 0;
    int32_t max_rows = 0;
    {
        int64_t ti = 0;
        for (int32_t s = 0; s < bp->n_seqs; s++)
            for (int32_t t0 = bp->seq_start[s]; t0 < bp->seq_start[s + 1]; t0 += ATTN_QUERY_TILE) {
                struct attn_tile *T = &tiles[ti];
                T->seq = s;
                T->t0 = t0;
                T->t1 = HEARTH_MIN(bp->seq_start[s + 1], t0 + ATTN_QUERY_TILE);
                const int32_t hi = attn_visible(hp, bp, s, T->t1 - 1); /* positions increase */
                T->n_splits = (hi + ATTN_SPLIT_KEYS - 1) / ATTN_SPLIT_KEYS;
                T->item0 = n_items;
                n_items += (int64_t)n_head_kv * n_chunks * T->n_splits;
                max_rows = HEARTH_MAX(max_rows, (T->t1 - T->t0) * chunk_heads);
                for (int32_t t = T->t0; t < T->t1; t++) tile_of[t] = (int32_t)ti;
                ti++;
            }
    }
    const int32_t tile_rows = max_rows;

    /* Per item: max, sum and accumulators of its rows, each on its own
     * cache lines (no false sharing between threads).  Per thread: the
     * scaled queries, the mask limits (absolute and within a KV block)
     * and the block's scores. */
    const size_t ms_floats = round_up16((size_t)tile_rows);
    const size_t item_floats = 2 * ms_floats + round_up16((size_t)tile_rows * (size_t)vd);
    const size_t thread_floats = round_up16((size_t)tile_rows * (size_t)hd) + 4 * ms_floats +
                                 round_up16((size_t)tile_rows * ATTN_KEY_BLOCK);
    const size_t need = item_floats * (size_t)n_items + thread_floats * (size_t)be->n_threads;
    void *scratch = c->attn_scratch;
    size_t have = c->attn_scratch_floats * sizeof(float);
    st = grow(&scratch, &have, need * sizeof(float), "attention scratch");
    if (st) return st;
    c->attn_scratch = scratch;
    c->attn_scratch_floats = have / sizeof(float);
    float *states = c->attn_scratch;
    float *thread_scratch = states + item_floats * (size_t)n_items;

    const float scale = hp->attn_scale > 0.0f ? hp->attn_scale : 1.0f / sqrtf((float)hd);
    const uint8_t *kbase = L->k, *vbase = kv->values_in_keys ? L->k + kv->value_offset : L->v;
    const size_t row_bytes = kv->row_bytes, head_bytes = kv->head_bytes, block_bytes = kv->block_bytes;
    const int64_t n_pairs = n_tok * n_head;
    /* Below ATTN_SERIAL_WORK multiply-adds (a decode step over a short
     * context) the work stays on one thread. */
    int32_t max_pos = 0;
    for (int32_t s = 0; s < bp->n_seqs; s++)
        for (int32_t t = bp->seq_start[s]; t < bp->seq_start[s + 1]; t++)
            max_pos = HEARTH_MAX(max_pos, attn_visible(hp, bp, s, t) - 1);
    const double work = 2.0 * (double)n_tok * (double)n_head * (double)(max_pos + 1) * (double)hd;
    const int n_threads = (n_items > 1 || n_tok > 1) && work >= ATTN_SERIAL_WORK ? be->n_threads : 1;
    (void)n_threads; /* read only by the OpenMP pragma */
#pragma omp parallel num_threads(n_threads) if (n_threads > 1)
    {
#ifdef _OPENMP
        float *mine = thread_scratch + thread_floats * (size_t)omp_get_thread_num();
#else
        float *mine = thread_scratch;
#endif
        float *qs = mine;
        int32_t *n_visible = (int32_t *)(qs + round_up16((size_t)tile_rows * (size_t)hd));
        int32_t *n_visible_rel = n_visible + ms_floats;
        int32_t *first = n_visible_rel + ms_floats;
        int32_t *first_rel = first + ms_floats;
        float *scores = (float *)(first_rel + ms_floats);

        /* Later tiles see more keys: hand items out dynamically. */
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < n_items; it++) {
            /* the tile: the last one whose items start at or before it */
            int64_t lo = 0, hi_t = n_tiles - 1;
            while (lo < hi_t) {
                const int64_t mid = (lo + hi_t + 1) / 2;
                if (tiles[mid].item0 <= it) lo = mid;
                else hi_t = mid - 1;
            }
            const struct attn_tile *T = &tiles[lo];
            const int32_t split = (int32_t)((it - T->item0) % T->n_splits);
            const int32_t unit = (int32_t)((it - T->item0) / T->n_splits);
            const int32_t kvh = unit / n_chunks, g0 = unit % n_chunks * chunk_heads;
            const int32_t ng = HEARTH_MIN(chunk_heads, group - g0);
            const int32_t n_rows = (T->t1 - T->t0) * ng;
            /* row (t - t0) * ng + g is query head kvh * group + g0 + g of token t */
            int32_t hi = 0;
            for (int32_t t = T->t0; t < T->t1; t++) {
                const float *src = q->host + t * q->width + ((int64_t)kvh * group + g0) * hd;
                float *dst = qs + (int64_t)(t - T->t0) * ng * hd;
                for (int64_t i = 0; i < (int64_t)ng * hd; i++) dst[i] = src[i] * scale;
                const int32_t lo_t = window ? HEARTH_MAX(0, bp->pos[t] + 1 - window) : 0;
                const int32_t seen = attn_visible(hp, bp, T->seq, t);
                for (int32_t g = 0; g < ng; g++) {
                    n_visible[(t - T->t0) * ng + g] = seen;
                    first[(t - T->t0) * ng + g] = lo_t;
                }
                hi = HEARTH_MAX(hi, seen);
            }
            /* A sliding window: the tile's first row sees the earliest key
             * of any of its rows.  Key blocks start at the last cut (a
             * multiple of ATTN_KEY_BLOCK or a KV block's start) at or
             * before it, so that every row folds the same blocks as when
             * it runs alone (decode), and no block wholly before the
             * window -- which the pool may have given back -- is read. */
            int32_t key_start = 0;
            if (window) {
                const int32_t w0 = first[0];
                key_start = HEARTH_MAX(w0 / ATTN_KEY_BLOCK * ATTN_KEY_BLOCK, w0 / B * B);
            }
            float *state = states + item_floats * (size_t)it;
            struct attn_rows rows = {
                .head_dim = hd,
                .v_dim = vd,
                .n_rows = n_rows,
                .q = qs,
                .n_visible = n_visible_rel,
                .first_visible = window ? first_rel : NULL,
                .softcap = hp->attn_softcap,
                .max = state,
                .sum = state + ms_floats,
                .acc = state + 2 * ms_floats,
                .scores = scores,
            };
            attn_state_init(n_rows, vd, rows.max, rows.sum, rows.acc);
            const int32_t *table = blocks + table_start[T->seq];
            const int32_t k0 = HEARTH_MAX(split * ATTN_SPLIT_KEYS, key_start);
            const int32_t k1 = HEARTH_MIN(split * ATTN_SPLIT_KEYS + ATTN_SPLIT_KEYS, hi);
            int32_t page_start = -1;
            const uint8_t *kh = NULL, *vh = NULL;
            for (int32_t j0 = k0; j0 < k1;) {
                if (j0 >= page_start + B || page_start < 0) {
                    const int32_t page = j0 / B;
                    page_start = page * B;
                    const size_t off = (size_t)table[page] * block_bytes + (size_t)kvh * head_bytes;
                    kh = kbase + off;
                    vh = vbase + off;
                    for (int32_t r = 0; r < n_rows; r++) {
                        n_visible_rel[r] = n_visible[r] - page_start;
                        first_rel[r] = first[r] - page_start;
                    }
                }
                int32_t j1 = (j0 / ATTN_KEY_BLOCK + 1) * ATTN_KEY_BLOCK;
                j1 = HEARTH_MIN(j1, HEARTH_MIN(k1, page_start + B));
                block(&rows, kh, vh, row_bytes, j0 - page_start, j1 - page_start);
                j0 = j1;
            }
        }

        /* out = merged state / sum, per token and query head */
#pragma omp for schedule(static)
        for (int64_t pair = 0; pair < n_pairs; pair++) {
            const int64_t t = pair / n_head;
            const int32_t h = (int32_t)(pair % n_head), kvh = h / group;
            const int32_t chunk = h % group / chunk_heads, g0 = chunk * chunk_heads;
            const int32_t ng = HEARTH_MIN(chunk_heads, group - g0);
            const struct attn_tile *T = &tiles[tile_of[t]];
            const int32_t r = (int32_t)(t - T->t0) * ng + h % group - g0;
            const float *state =
                states + item_floats * (size_t)(T->item0 + ((int64_t)kvh * n_chunks + chunk) * T->n_splits);
            attn_merge(vd, T->n_splits, state + r, state + ms_floats + r, item_floats,
                       state + 2 * ms_floats + (size_t)r * vd, item_floats, sinks ? sinks[h] : -INFINITY,
                       out->host + t * (int64_t)n_head * vd + (int64_t)h * vd);
        }
    }
    out->rows = n_tok;
    out->width = (int64_t)n_head * vd;
    return HEARTH_OK;
}

static hearth_status cpu_kv_copy_block(struct hearth_backend *be, struct kv_cache *kv, int32_t src,
                                       int32_t dst, int32_t n_rows, bool window)
{
    (void)be;
    kv_cache_copy_block(kv, src, dst, n_rows, window);
    return HEARTH_OK;
}

static const struct backend_ops cpu_ops = {
    .name = "CPU",
    .act_alloc = cpu_act_alloc,
    .act_free = cpu_act_free,
    .act_upload = cpu_act_upload,
    .act_download = cpu_act_download,
    .matmul = cpu_matmul,
    .matmul_set = cpu_matmul_set,
    .add_bias = cpu_add_bias,
    .rmsnorm = cpu_rmsnorm,
    .rope = cpu_rope,
    .attention = cpu_attention,
    .tp_gather_cols = cpu_tp_gather_cols,
    .matmul_heads = cpu_matmul_heads,
    .copy_heads = cpu_copy_heads,
    .add = cpu_add,
    .swiglu = cpu_swiglu,
    .moe_ffn = cpu_moe_ffn,
    .add_gated = cpu_add_gated,
    .geglu = cpu_geglu,
    .copy_rows = cpu_copy_rows,
    .kv_copy_block = cpu_kv_copy_block,
    .norm = cpu_norm,
    .token_shift = cpu_token_shift,
    .lerp = cpu_lerp,
    .map = cpu_map,
    .mul = cpu_mul,
    .copy_cols = cpu_copy_cols,
    .wkv = cpu_wkv,
    .conv_causal = cpu_conv_causal,
    .gated_delta = cpu_gated_delta,
};

const hearth_kernels *backend_cpu_kernels(const struct hearth_backend *be)
{
    return ((const struct cpu_backend *)be->impl)->kernels;
}

hearth_status backend_cpu_new(int n_threads, struct hearth_backend **out)
{
    const hearth_kernels *k;
    HEARTH_TRY(hearth_kernels_select(&k));
    return backend_cpu_new_with(n_threads, k, out);
}

hearth_status backend_cpu_new_with(int n_threads, const hearth_kernels *kernels, struct hearth_backend **out)
{
    struct hearth_backend *be = hearth_calloc(1, sizeof *be, "the CPU backend");
    struct cpu_backend *c = hearth_calloc(1, sizeof *c, "the CPU backend");
    if (!be || !c) {
        free(be);
        free(c);
        return HEARTH_E_NOMEM;
    }
    c->kernels = kernels;
    c->attn = attn_kernels_matching(c->kernels);
    be->ops = &cpu_ops;
    be->n_threads = n_threads > 0 ? n_threads : 1;
    be->impl = c;
    *out = be;
    return HEARTH_OK;
}

void backend_cpu_free(struct hearth_backend *be)
{
    if (!be) return;
    struct cpu_backend *c = be->impl;
    hearth_aligned_free(c->act_scratch);
    hearth_aligned_free(c->act_sums);
    hearth_aligned_free(c->attn_scratch);
    hearth_aligned_free(c->attn_index);
    hearth_aligned_free(c->kv_row);
    hearth_aligned_free(c->moe_index);
    hearth_aligned_free(c->moe_act);
    hearth_aligned_free(c->moe_parts);
    hearth_aligned_free(c->tp_mine);
    hearth_aligned_free(c->tp_all);
    hearth_aligned_free(c->tp_counts);
    free(c);
    free(be);
}

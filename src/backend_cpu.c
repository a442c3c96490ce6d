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
#include "kernels.h"
#include "kv_cache.h"

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

static hearth_status cpu_matmul_set(struct hearth_backend *be, int n, struct act *const outs[],
                                    const struct weight *const ws[], const struct act *in)
{
    struct cpu_backend *c = cpu(be);
    const hearth_kernels *k = c->kernels;
    if (n < 1 || n > MATMUL_SET_MAX)
        return hearth_error(HEARTH_E_INTERNAL, "matmul set of %d products", n);
    const int64_t n_tok = in->rows, n_in = in->width;
    const int64_t n_blocks = n_in / 32;
    struct matmul_part parts[MATMUL_SET_MAX];
    struct matmul_conv convs[MATMUL_SET_MAX];
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
        struct matmul_conv *cv = convs;
        while (cv < convs + n_convs && cv->type != at) cv++;
        if (cv == convs + n_convs) {
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
        work += (double)w->n_out * (double)n_in * (double)n_tok;
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
    uint8_t *xq = c->act_scratch;
    int32_t *sums = c->act_sums;
    const float *x = in->host;

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
#pragma omp parallel num_threads(n_threads) if (n_threads > 1)
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        const uint8_t *xs = xq;
        const int32_t *xsums = sums;
        if (private_act) {
            uint8_t *mine = xq + (size_t)tid * act_bytes;
            int32_t *my_sums = sums_count ? sums + (size_t)tid * sums_count : NULL;
            for (int ci = 0; ci < n_convs; ci++)
                for (int64_t t = 0; t < n_tok; t++) convert_token(&convs[ci], x, n_in, t, mine, my_sums);
            xs = mine;
            xsums = my_sums;
        } else {
#pragma omp for schedule(static) collapse(2)
            for (int ci = 0; ci < n_convs; ci++)
                for (int64_t t = 0; t < n_tok; t++) convert_token(&convs[ci], x, n_in, t, xq, sums);
        }

#pragma omp for schedule(static)
        for (int64_t ch = 0; ch < n_chunks; ch++) {
            int i = n - 1;
            while (parts[i].first_chunk > ch) i--;
            const struct matmul_part *pt = &parts[i];
            const int64_t n_out = pt->w->n_out;
            const int64_t r0 = (ch - pt->first_chunk) * MATMUL_ROW_CHUNK;
            const int64_t rows = HEARTH_MIN(MATMUL_ROW_CHUNK, n_out - r0);
            const uint8_t *wr = pt->wd + (size_t)r0 * pt->w->row_bytes; /* packed rows take as many bytes */
            const struct matmul_conv *cv = pt->conv;
            const uint8_t *xa = xs + cv->act_off;
            if (pt->gemm_packed)
                pt->gemm_packed(n_in, rows, n_tok, wr, xa, cv->act_row,
                                cv->sums_off != SIZE_MAX ? xsums + cv->sums_off : NULL, pt->out->host + r0, n_out);
            else
                pt->gemm(n_in, rows, n_tok, wr, pt->w->row_bytes, xa, cv->act_row, pt->out->host + r0, n_out);
        }
    }
    for (int i = 0; i < n; i++) {
        outs[i]->rows = n_tok;
        outs[i]->width = ws[i]->n_out;
    }
    return HEARTH_OK;
}

static hearth_status cpu_matmul(struct hearth_backend *be, struct act *out, const struct weight *w,
                                const struct act *in)
{
    return cpu_matmul_set(be, 1, &out, &w, in);
}

/* ---- elementwise operations ------------------------------------------------------- */

static hearth_status cpu_add_bias(struct hearth_backend *be, struct act *x, const struct weight *bias)
{
    const float *b = bias->data;
    const int64_t width = x->width;
#pragma omp parallel for num_threads(be->n_threads) schedule(static) \
    if (x->rows * width >= ELEMENTWISE_SERIAL_WORK)
    for (int64_t t = 0; t < x->rows; t++) {
        float *row = x->host + t * width;
        for (int64_t i = 0; i < width; i++) row[i] += b[i];
    }
    return HEARTH_OK;
}

static hearth_status cpu_rmsnorm(struct hearth_backend *be, struct act *out, const struct act *in,
                                 const struct weight *w, float eps)
{
    const float *g = w->data;
    const int64_t n = in->width;
#pragma omp parallel for num_threads(be->n_threads) schedule(static) if (in->rows > 1)
    for (int64_t t = 0; t < in->rows; t++) {
        const float *x = in->host + t * n;
        float *y = out->host + t * n;
        double ss = 0.0;
        for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
        const float scale = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale * g[i];
    }
    out->rows = in->rows;
    out->width = n;
    return HEARTH_OK;
}

static hearth_status cpu_rope(struct hearth_backend *be, struct act *x, int32_t n_heads, int32_t head_dim,
                              const struct rope_params *rope, const struct batch_pos *bp)
{
    const int32_t half = rope->n_dims / 2;
#pragma omp parallel for num_threads(be->n_threads) schedule(static) if (bp->n_tokens > 1)
    for (int64_t t = 0; t < bp->n_tokens; t++) {
        const double pos = (double)bp->pos[t] * rope->freq_scale;
        for (int32_t i = 0; i < half; i++) {
            /* theta_i = pos * base^(-2i/d), divided by the per-pair factor
             * of long-context models (RoFormer eq. 15; Llama 3.1 rope_freqs). */
            double theta = pos * pow((double)rope->freq_base, -2.0 * i / rope->n_dims);
            if (rope->freq_factors) theta /= rope->freq_factors[i];
            const float cs = (float)cos(theta), sn = (float)sin(theta);
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
    return HEARTH_OK;
}

static hearth_status cpu_add(struct hearth_backend *be, struct act *out, const struct act *a, const struct act *b)
{
    const int64_t n = a->rows * a->width;
#pragma omp parallel for num_threads(be->n_threads) schedule(static) if (n >= ELEMENTWISE_SERIAL_WORK)
    for (int64_t i = 0; i < n; i++) out->host[i] = a->host[i] + b->host[i];
    out->rows = a->rows;
    out->width = a->width;
    return HEARTH_OK;
}

static hearth_status cpu_swiglu(struct hearth_backend *be, struct act *out, const struct act *gate,
                                const struct act *up)
{
    const int64_t n = gate->rows * gate->width;
#pragma omp parallel for num_threads(be->n_threads) schedule(static) if (n >= ELEMENTWISE_SERIAL_WORK)
    for (int64_t i = 0; i < n; i++) {
        const float g = gate->host[i];
        out->host[i] = g / (1.0f + expf(-g)) * up->host[i];
    }
    out->rows = gate->rows;
    out->width = gate->width;
    return HEARTH_OK;
}

static hearth_status cpu_copy_rows(struct hearth_backend *be, struct act *dst, const struct act *src,
                                   int64_t first, int64_t n_rows)
{
    (void)be;
    memmove(dst->host, src->host + first * src->width, (size_t)(n_rows * src->width) * sizeof(float));
    dst->rows = n_rows;
    dst->width = src->width;
    return HEARTH_OK;
}

/* ---- attention -------------------------------------------------------------------- */

/* Tokens whose query heads of one key/value head make one work item in
 * prefill: their keys are read once for all of them (8 query heads of a
 * group x 16 tokens = 128 rows per pass over a key block). */
#define ATTN_QUERY_TILE 16
/* With fewer items than this (decode, short batches) the keys are split
 * into ranges of ATTN_SPLIT_KEYS whose partial softmax states are merged,
 * so that a long context keeps every thread busy.  The split depends only
 * on the shapes, never on the number of threads: results do not either. */
#define ATTN_FEW_ITEMS 16
#define ATTN_SPLIT_KEYS 256
#define ATTN_MAX_SPLITS 64

static size_t round_up16(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

static hearth_status cpu_attention(struct hearth_backend *be, struct act *out, const struct act *q,
                                   const struct act *k, const struct act *v, struct kv_cache *kv,
                                   int il, const struct hparams *hp, const struct batch_pos *bp)
{
    struct cpu_backend *c = cpu(be);
    struct kv_layer *L = &kv->layers[il];
    const int32_t hd = hp->head_dim, n_head = hp->n_head, n_head_kv = hp->n_head_kv;
    const int32_t group = n_head / n_head_kv;
    const int64_t n_tok = bp->n_tokens;
    attn_block_fn block = c->attn->block[kv->type];
    if (!block)
        return hearth_error(HEARTH_E_UNSUPPORTED, "attention over a %s KV cache is not supported",
                            hearth_type_name(kv->type));

    /* The batch's keys and values go into the cache first: a token sees
     * every position up to its own, including earlier tokens of the batch. */
    int32_t n_keys = 0;
    for (int64_t t = 0; t < n_tok; t++) {
        kv_cache_store(kv, L->k, bp->pos[t], k->host + t * k->width);
        kv_cache_store(kv, L->v, bp->pos[t], v->host + t * v->width);
        if (bp->pos[t] + 1 > n_keys) n_keys = bp->pos[t] + 1;
    }

    /* Work items: (key/value head, tile of tokens, range of keys). */
    const int64_t n_tiles = (n_tok + ATTN_QUERY_TILE - 1) / ATTN_QUERY_TILE;
    const int32_t tile_rows = (int32_t)HEARTH_MIN(n_tok, ATTN_QUERY_TILE) * group;
    int32_t n_splits = 1;
    if (n_tiles * n_head_kv < ATTN_FEW_ITEMS)
        n_splits = HEARTH_MIN((n_keys + ATTN_SPLIT_KEYS - 1) / ATTN_SPLIT_KEYS, ATTN_MAX_SPLITS);
    const int32_t split_keys = (n_keys + n_splits - 1) / n_splits;
    const int64_t n_items = n_head_kv * n_tiles * n_splits;

    /* Per item: max, sum and accumulators of its rows, each on its own
     * cache lines (no false sharing between threads).  Per thread: the
     * scaled queries, the mask limits and the block's scores. */
    const size_t ms_floats = round_up16((size_t)tile_rows);
    const size_t item_floats = 2 * ms_floats + round_up16((size_t)tile_rows * (size_t)hd);
    const size_t thread_floats = round_up16((size_t)tile_rows * (size_t)hd) + ms_floats +
                                 round_up16((size_t)tile_rows * ATTN_KEY_BLOCK);
    const size_t need = item_floats * (size_t)n_items + thread_floats * (size_t)be->n_threads;
    void *scratch = c->attn_scratch;
    size_t have = c->attn_scratch_floats * sizeof(float);
    hearth_status st = grow(&scratch, &have, need * sizeof(float), "attention scratch");
    if (st) return st;
    c->attn_scratch = scratch;
    c->attn_scratch_floats = have / sizeof(float);
    float *states = c->attn_scratch;
    float *thread_scratch = states + item_floats * (size_t)n_items;

    const float scale = 1.0f / sqrtf((float)hd);
    const uint8_t *kbase = L->k, *vbase = L->v;
    const size_t row_bytes = kv->row_bytes, head_bytes = kv->head_bytes;
    const int64_t n_pairs = n_tok * n_head;
#pragma omp parallel num_threads(be->n_threads)
    {
#ifdef _OPENMP
        float *mine = thread_scratch + thread_floats * (size_t)omp_get_thread_num();
#else
        float *mine = thread_scratch;
#endif
        float *qs = mine;
        int32_t *n_visible = (int32_t *)(qs + round_up16((size_t)tile_rows * (size_t)hd));
        float *scores = (float *)n_visible + ms_floats;

        /* Later tiles see more keys: hand items out dynamically. */
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < n_items; it++) {
            const int32_t split = (int32_t)(it % n_splits);
            const int64_t tile = (it / n_splits) % n_tiles;
            const int32_t kvh = (int32_t)(it / n_splits / n_tiles);
            const int64_t t0 = tile * ATTN_QUERY_TILE;
            const int64_t t1 = HEARTH_MIN(n_tok, t0 + ATTN_QUERY_TILE);
            const int32_t n_rows = (int32_t)(t1 - t0) * group;
            /* row (t - t0) * group + g is query head kvh * group + g of token t */
            int32_t hi = 0;
            for (int64_t t = t0; t < t1; t++) {
                const float *src = q->host + t * q->width + (int64_t)kvh * group * hd;
                float *dst = qs + (t - t0) * group * hd;
                for (int64_t i = 0; i < (int64_t)group * hd; i++) dst[i] = src[i] * scale;
                for (int32_t g = 0; g < group; g++) n_visible[(t - t0) * group + g] = bp->pos[t] + 1;
                hi = HEARTH_MAX(hi, bp->pos[t] + 1);
            }
            float *state = states + item_floats * (size_t)it;
            struct attn_rows rows = {
                .head_dim = hd,
                .n_rows = n_rows,
                .q = qs,
                .n_visible = n_visible,
                .max = state,
                .sum = state + ms_floats,
                .acc = state + 2 * ms_floats,
                .scores = scores,
            };
            attn_state_init(n_rows, hd, rows.max, rows.sum, rows.acc);
            const int32_t k0 = split * split_keys;
            const int32_t k1 = HEARTH_MIN(HEARTH_MIN(n_keys, k0 + split_keys), hi);
            const uint8_t *kh = kbase + (size_t)kvh * head_bytes, *vh = vbase + (size_t)kvh * head_bytes;
            for (int32_t j0 = k0; j0 < k1; j0 += ATTN_KEY_BLOCK)
                block(&rows, kh, vh, row_bytes, j0, HEARTH_MIN(k1, j0 + ATTN_KEY_BLOCK));
        }

        /* out = merged state / sum, per token and query head */
#pragma omp for schedule(static)
        for (int64_t pair = 0; pair < n_pairs; pair++) {
            const int64_t t = pair / n_head;
            const int32_t h = (int32_t)(pair % n_head), kvh = h / group;
            const int64_t tile = t / ATTN_QUERY_TILE;
            const int32_t r = (int32_t)(t - tile * ATTN_QUERY_TILE) * group + h % group;
            const float *state = states + item_floats * (size_t)((kvh * n_tiles + tile) * n_splits);
            attn_merge(hd, n_splits, state + r, state + ms_floats + r, item_floats,
                       state + 2 * ms_floats + (size_t)r * hd, item_floats,
                       out->host + t * out->width + (int64_t)h * hd);
        }
    }
    out->rows = n_tok;
    out->width = (int64_t)n_head * hd;
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
    .add = cpu_add,
    .swiglu = cpu_swiglu,
    .copy_rows = cpu_copy_rows,
};

hearth_status backend_cpu_new(int n_threads, struct hearth_backend **out)
{
    struct hearth_backend *be = hearth_calloc(1, sizeof *be, "the CPU backend");
    struct cpu_backend *c = hearth_calloc(1, sizeof *c, "the CPU backend");
    if (!be || !c) {
        free(be);
        free(c);
        return HEARTH_E_NOMEM;
    }
    hearth_status st = hearth_kernels_select(&c->kernels);
    if (st) {
        free(be);
        free(c);
        return st;
    }
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
    free(c);
    free(be);
}

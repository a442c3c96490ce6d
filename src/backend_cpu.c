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

#include "kernels.h"
#include "kv_cache.h"

/* Rows of a weight per gemm call: a multiple of every kernel tile's rows,
 * and 16 floats -- one 64-byte cache line of output per token -- so that
 * threads working on neighbouring chunks do not write the same line (for
 * n_out a multiple of 16, which every real model's is).  A chunk's weights
 * stay in cache while all the batch's tokens pass them. */
#define MATMUL_ROW_CHUNK 16

struct cpu_backend {
    const hearth_kernels *kernels;
    uint8_t *act_scratch;      /* activations converted for the kernels */
    size_t act_scratch_bytes;
    float *attn_scratch;       /* per thread: scores + one key/value head */
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

static hearth_status cpu_matmul(struct hearth_backend *be, struct act *out, const struct weight *w,
                                const struct act *in)
{
    struct cpu_backend *c = cpu(be);
    const hearth_kernels *k = c->kernels;
    if (!hearth_kernels_supports(k, w->type))
        return hearth_error(HEARTH_E_UNSUPPORTED, "tensor '%s': no matrix product for type %s",
                            w->name, hearth_type_name(w->type));
    if (in->width != w->n_in)
        return hearth_error(HEARTH_E_INTERNAL, "matmul '%s': input width %lld, weight rows of %lld",
                            w->name, (long long)in->width, (long long)w->n_in);
    const int64_t n_tok = in->rows, n_in = w->n_in, n_out = w->n_out;
    hearth_type at = k->act_type[w->type];
    size_t act_row = hearth_type_row_bytes(at, n_in);
    hearth_status st = grow((void **)&c->act_scratch, &c->act_scratch_bytes, act_row * (size_t)n_tok,
                            "converted activations");
    if (st) return st;

    hearth_act_convert_fn convert = k->act_convert[at];
    hearth_gemm_fn gemm = k->gemm[w->type];
    uint8_t *xq = c->act_scratch;
    const uint8_t *wd = w->data;
    const size_t w_row = w->row_bytes;
    float *y = out->host;
    const int64_t n_chunks = (n_out + MATMUL_ROW_CHUNK - 1) / MATMUL_ROW_CHUNK;

    /* Every output is one dot product computed by one thread in the
     * kernels' fixed order, so the result does not depend on the number
     * of threads or on how the rows are shared out.  Float weights take
     * the same path in prefill: OpenBLAS's sgemm, tried on a tile of rows
     * (F16 converted first), was slower than the AVX-512 and AVX2 tiles
     * for 16 to 512 tokens, and would break that bit-for-bit agreement. */
#pragma omp parallel num_threads(be->n_threads)
    {
#pragma omp for schedule(static)
        for (int64_t t = 0; t < n_tok; t++) convert(in->host + t * n_in, xq + (size_t)t * act_row, n_in);

#pragma omp for schedule(static)
        for (int64_t ch = 0; ch < n_chunks; ch++) {
            const int64_t r0 = ch * MATMUL_ROW_CHUNK;
            const int64_t rows = HEARTH_MIN(MATMUL_ROW_CHUNK, n_out - r0);
            gemm(n_in, rows, n_tok, wd + (size_t)r0 * w_row, w_row, xq, act_row, y + r0, n_out);
        }
    }
    out->rows = n_tok;
    out->width = n_out;
    return HEARTH_OK;
}

/* ---- elementwise operations ------------------------------------------------------- */

static hearth_status cpu_add_bias(struct hearth_backend *be, struct act *x, const struct weight *bias)
{
    const float *b = bias->data;
    const int64_t width = x->width;
#pragma omp parallel for num_threads(be->n_threads) schedule(static)
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
#pragma omp parallel for num_threads(be->n_threads) schedule(static)
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
#pragma omp parallel for num_threads(be->n_threads) schedule(static)
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
#pragma omp parallel for num_threads(be->n_threads) schedule(static)
    for (int64_t i = 0; i < n; i++) out->host[i] = a->host[i] + b->host[i];
    out->rows = a->rows;
    out->width = a->width;
    return HEARTH_OK;
}

static hearth_status cpu_swiglu(struct hearth_backend *be, struct act *out, const struct act *gate,
                                const struct act *up)
{
    const int64_t n = gate->rows * gate->width;
#pragma omp parallel for num_threads(be->n_threads) schedule(static)
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

static hearth_status cpu_attention(struct hearth_backend *be, struct act *out, const struct act *q,
                                   const struct act *k, const struct act *v, struct kv_cache *kv,
                                   int il, const struct hparams *hp, const struct batch_pos *bp)
{
    struct cpu_backend *c = cpu(be);
    struct kv_layer *L = &kv->layers[il];
    const int32_t hd = hp->head_dim, n_head = hp->n_head, group = hp->n_head / hp->n_head_kv;
    const int64_t n_tok = bp->n_tokens;

    /* The batch's keys and values go into the cache first: a token sees
     * every position up to its own, including earlier tokens of the batch. */
    int32_t n_keys = 0;
    for (int64_t t = 0; t < n_tok; t++) {
        kv_cache_store(kv, L->k, bp->pos[t], k->host + t * k->width);
        kv_cache_store(kv, L->v, bp->pos[t], v->host + t * v->width);
        if (bp->pos[t] + 1 > n_keys) n_keys = bp->pos[t] + 1;
    }

    size_t per_thread = (size_t)n_keys + 2 * (size_t)hd + 16;
    void *scratch = c->attn_scratch;
    size_t have = c->attn_scratch_floats * sizeof(float);
    hearth_status st = grow(&scratch, &have, per_thread * (size_t)be->n_threads * sizeof(float),
                            "attention scratch");
    if (st) return st;
    c->attn_scratch = scratch;
    c->attn_scratch_floats = have / sizeof(float);

    const float scale = 1.0f / sqrtf((float)hd);
    const int64_t n_pairs = n_tok * n_head;
#pragma omp parallel num_threads(be->n_threads)
    {
#ifdef _OPENMP
        float *mine = c->attn_scratch + per_thread * (size_t)omp_get_thread_num();
#else
        float *mine = c->attn_scratch;
#endif
        float *scores = mine;
        float *head = mine + n_keys;
        float *acc = head + hd;
#pragma omp for schedule(static)
        for (int64_t pair = 0; pair < n_pairs; pair++) {
            const int64_t t = pair / n_head;
            const int32_t h = (int32_t)(pair % n_head), kvh = h / group;
            const int32_t p = bp->pos[t];
            const float *qh = q->host + t * q->width + (int64_t)h * hd;
            /* scores over every cached position; the causal mask sets the
             * future (j > p) to -inf so softmax gives them weight 0 */
            float max = -INFINITY;
            for (int32_t j = 0; j < n_keys; j++) {
                if (j > p) {
                    scores[j] = -INFINITY;
                    continue;
                }
                kv_cache_load_head(kv, L->k, j, kvh, head);
                float s = 0.0f;
                for (int32_t i = 0; i < hd; i++) s += qh[i] * head[i];
                scores[j] = s * scale;
                if (scores[j] > max) max = scores[j];
            }
            /* numerically stable softmax: subtract the row maximum */
            double sum = 0.0;
            for (int32_t j = 0; j < n_keys; j++) {
                const float e = scores[j] == -INFINITY ? 0.0f : expf(scores[j] - max);
                scores[j] = e;
                sum += e;
            }
            const float inv = (float)(1.0 / sum);
            for (int32_t i = 0; i < hd; i++) acc[i] = 0.0f;
            for (int32_t j = 0; j <= p && j < n_keys; j++) {
                const float wj = scores[j] * inv;
                kv_cache_load_head(kv, L->v, j, kvh, head);
                for (int32_t i = 0; i < hd; i++) acc[i] += wj * head[i];
            }
            memcpy(out->host + t * out->width + (int64_t)h * hd, acc, (size_t)hd * sizeof(float));
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
    hearth_aligned_free(c->attn_scratch);
    free(c);
    free(be);
}

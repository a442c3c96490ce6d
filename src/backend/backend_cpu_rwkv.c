/*
 * backend_cpu_rwkv.c -- the CPU backend's operations for recurrent layers
 * (RWKV-6, models/rwkv6.c): group and layer norms with bias, the token
 * shift through each sequence's saved rows, the data-dependent
 * interpolations, elementwise functions, and the WKV recurrence over the
 * kernels of simd/wkv.h, parallel over sequences, heads and blocks of
 * value columns.
 */
#include "backend_cpu_rwkv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "rstate.h"
#include "wkv.h"

/* Elements below which an elementwise operation runs on one thread. */
#define RWKV_SERIAL_WORK (32 * 1024)
/* State elements below which a decode step's recurrence runs on one thread. */
#define WKV_SERIAL_STATE (256 * 1024)

/* The operations' arguments, as their region functions take them
 * (cpu_run_parallel: a step below RWKV_SERIAL_WORK elements is a direct
 * call, not a one-thread OpenMP region, which costs a system call). */
struct rwkv_job {
    struct act *out;
    const struct act *a, *b, *c;
    const float *w, *bias;
    int64_t group, col;
    float eps;
    enum map_fn fn;
    const struct wkv_kernels *wk; /* the maps and the interpolation */
};

static int rwkv_threads(const struct hearth_backend *be, int64_t n)
{
    return n >= RWKV_SERIAL_WORK ? be->n_threads : 1;
}

static void norm_run(void *arg)
{
    const struct rwkv_job *j = arg;
    const struct act *in = j->a;
    const int64_t n = in->width, group = j->group;
    const int64_t n_groups = n / group, items = in->rows * n_groups;
    const float *w = j->w, *b = j->bias;
#pragma omp for schedule(static)
    for (int64_t it = 0; it < items; it++) {
        const int64_t t = it / n_groups, g0 = (it % n_groups) * group;
        const float *x = in->host + t * n + g0;
        float *y = j->out->host + t * n + g0;
        double sum = 0.0, sq = 0.0;
        for (int64_t i = 0; i < group; i++) sum += x[i];
        const double mean = sum / (double)group;
        for (int64_t i = 0; i < group; i++) sq += ((double)x[i] - mean) * ((double)x[i] - mean);
        const float scale = (float)(1.0 / sqrt(sq / (double)group + (double)j->eps));
        const float m = (float)mean;
        for (int64_t i = 0; i < group; i++) {
            const float v = (x[i] - m) * scale * w[g0 + i];
            y[i] = b ? v + b[g0 + i] : v;
        }
    }
}

hearth_status cpu_norm(struct hearth_backend *be, struct act *out, const struct act *in, int64_t group,
                       const float *w, const float *b, float eps)
{
    const int64_t n = in->width;
    if (group <= 0 || n % group != 0)
        return hearth_error(HEARTH_E_INTERNAL, "norm: groups of %lld in rows of %lld", (long long)group,
                            (long long)n);
    const struct rwkv_job j = {.out = out, .a = in, .w = w, .bias = b, .group = group, .eps = eps};
    cpu_run_parallel(rwkv_threads(be, in->rows * n), norm_run, (void *)&j);
    out->rows = in->rows;
    out->width = n;
    return HEARTH_OK;
}

static int32_t state_slot(const struct batch_pos *bp, int32_t s)
{
    return bp->state_slot ? bp->state_slot[s] : s;
}

hearth_status cpu_token_shift(struct hearth_backend *be, struct act *prev, const struct act *x,
                              struct rstate *rs, int il, int which, const struct batch_pos *bp)
{
    (void)be;
    const int64_t n = x->width;
    if ((size_t)(which + 1) * (size_t)n > rs->layer_floats)
        return hearth_error(HEARTH_E_INTERNAL, "token shift %d of rows of %lld beyond the state", which,
                            (long long)n);
    for (int32_t s = 0; s < bp->n_seqs; s++) {
        const int32_t r0 = bp->seq_start[s], r1 = bp->seq_start[s + 1];
        if (r1 <= r0) continue;
        float *saved = rstate_layer(rs, state_slot(bp, s), il) + (size_t)which * (size_t)n;
        if (bp->pos[r0] == 0) memset(saved, 0, (size_t)n * sizeof(float));
        memcpy(prev->host + r0 * n, saved, (size_t)n * sizeof(float));
        if (r1 - r0 > 1)
            memcpy(prev->host + (r0 + 1) * n, x->host + r0 * n, (size_t)(r1 - r0 - 1) * (size_t)n * sizeof(float));
        memcpy(saved, x->host + (int64_t)(r1 - 1) * n, (size_t)n * sizeof(float));
    }
    prev->rows = x->rows;
    prev->width = n;
    return HEARTH_OK;
}

static void lerp_run(void *arg)
{
    const struct rwkv_job *j = arg;
    const struct act *x = j->a, *prev = j->b, *mix = j->c;
    const int64_t n = x->width, rows = x->rows;
    const float *mu = j->w;
#pragma omp for schedule(static)
    for (int64_t t = 0; t < rows; t++) {
        const float *a = x->host + t * n, *p = prev->host + t * n;
        j->wk->lerp(a, p, mu, mix ? mix->host + t * mix->width + j->col : NULL, j->out->host + t * n, n);
    }
}

hearth_status cpu_lerp(struct hearth_backend *be, struct act *out, const struct act *x, const struct act *prev,
                       const float *mu, const struct act *mix, int64_t mix_col)
{
    const struct rwkv_job j = {.out = out, .a = x, .b = prev, .c = mix, .w = mu, .col = mix_col,
                               .wk = wkv_kernels_matching(backend_cpu_kernels(be))};
    cpu_run_parallel(rwkv_threads(be, x->rows * x->width), lerp_run, (void *)&j);
    out->rows = x->rows;
    out->width = x->width;
    return HEARTH_OK;
}

static void map_run(void *arg)
{
    const struct rwkv_job *j = arg;
    const int64_t rows = j->a->rows, n = j->a->width;
    const float scale = j->eps;
    const enum map_fn fn = j->fn;
    /* row by row, so that every element's place in its call is the same
     * in a prefill as in a decode step */
#pragma omp for schedule(static)
    for (int64_t t = 0; t < rows; t++) {
        const float *x = j->a->host + t * n;
        float *y = j->out->host + t * n;
        switch (fn) {
        case MAP_TANH: j->wk->map(WKV_MAP_TANH, x, y, n); break;
        case MAP_SIGMOID: j->wk->map(WKV_MAP_SIGMOID, x, y, n); break;
        case MAP_SILU: j->wk->map(WKV_MAP_SILU, x, y, n); break;
        case MAP_LOG_DECAY: j->wk->map(WKV_MAP_LOG_DECAY, x, y, n); break;
        case MAP_RELU_SQR: j->wk->map(WKV_MAP_RELU_SQR, x, y, n); break;
        case MAP_SCALE:
            for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale;
            break;
        case MAP_GELU:
            for (int64_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
            break;
        }
    }
}

hearth_status cpu_map(struct hearth_backend *be, struct act *out, const struct act *in, enum map_fn fn,
                      float arg)
{
    const struct rwkv_job j = {.out = out, .a = in, .fn = fn, .eps = arg,
                               .wk = wkv_kernels_matching(backend_cpu_kernels(be))};
    cpu_run_parallel(rwkv_threads(be, in->rows * in->width), map_run, (void *)&j);
    out->rows = in->rows;
    out->width = in->width;
    return HEARTH_OK;
}

static void mul_run(void *arg)
{
    const struct rwkv_job *j = arg;
    const int64_t n = j->a->rows * j->a->width;
    const float *a = j->a->host, *b = j->b->host;
    float *y = j->out->host;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; i++) y[i] = a[i] * b[i];
}

hearth_status cpu_mul(struct hearth_backend *be, struct act *out, const struct act *a, const struct act *b)
{
    const struct rwkv_job j = {.out = out, .a = a, .b = b};
    cpu_run_parallel(rwkv_threads(be, a->rows * a->width), mul_run, (void *)&j);
    out->rows = a->rows;
    out->width = a->width;
    return HEARTH_OK;
}

hearth_status cpu_copy_cols(struct hearth_backend *be, struct act *dst, const struct act *src, int64_t first,
                            int64_t n_cols)
{
    (void)be;
    for (int64_t t = 0; t < src->rows; t++)
        memcpy(dst->host + t * n_cols, src->host + t * src->width + first, (size_t)n_cols * sizeof(float));
    dst->rows = src->rows;
    dst->width = n_cols;
    return HEARTH_OK;
}

/* The value columns of a head are split into blocks when there are too
 * few (sequence, head) pairs to keep every thread busy: the blocks evolve
 * independently; a chunk's products of r and k are then computed once per
 * block, so they are split no further than needed. */
static int32_t column_blocks(int64_t pairs, int n_threads, int32_t head_size)
{
    int32_t nb = 1;
    while (pairs * nb < 2 * (int64_t)n_threads && head_size / (2 * nb) >= 16 && head_size % (2 * nb) == 0)
        nb *= 2;
    return nb;
}

/* One wkv operation as the threads of a region share it out. */
struct wkv_job {
    struct act *out;
    const struct act *r, *k, *v, *lw;
    const float *u;
    float scale;
    int32_t n_head, group, N, nb, C;
    int64_t items;
    size_t wkv_floats;
    struct rstate *rs;
    int il;
    const struct batch_pos *bp;
    const struct wkv_kernels *wk;
    void *scratch;
    size_t scratch_bytes;
};

static void wkv_run(void *arg)
{
    const struct wkv_job *j = arg;
    const struct act *r = j->r, *k = j->k, *v = j->v, *lw = j->lw;
    struct act *out = j->out;
    const struct batch_pos *bp = j->bp;
    struct rstate *rs = j->rs;
    const int32_t n_head = j->n_head, group = j->group, N = j->N, nb = j->nb, C = j->C, il = j->il;
    const size_t head_floats = (size_t)N * N, wkv_floats = j->wkv_floats;
    const float *u = j->u;
    const float scale = j->scale;
    const struct wkv_kernels *wk = j->wk;
    const int64_t items = j->items;
    uint8_t *mine = j->scratch ? (uint8_t *)j->scratch + j->scratch_bytes * (size_t)cpu_thread_index() : NULL;
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < items; it++) {
        const int32_t s = (int32_t)(it / ((int64_t)n_head * nb));
        const int32_t h = (int32_t)(it / nb % n_head), jb = (int32_t)(it % nb);
        const int32_t r0 = bp->seq_start[s], n_rows = bp->seq_start[s + 1] - r0;
        if (n_rows <= 0) continue;
        float *S = rstate_layer(rs, state_slot(bp, s), il) + (rs->layer_floats - wkv_floats) +
                   (size_t)h * head_floats;
        const int32_t kvh = h / group;
        struct wkv_head a = {
            .n = n_rows,
            .N = N,
            .r = r->host + (int64_t)r0 * r->width + (int64_t)h * N,
            .k = k->host + (int64_t)r0 * k->width + (int64_t)kvh * N,
            .v = v->host + (int64_t)r0 * v->width + (int64_t)kvh * N,
            .lw = lw->host + (int64_t)r0 * lw->width + (int64_t)h * N,
            .r_stride = r->width,
            .k_stride = k->width,
            .v_stride = v->width,
            .lw_stride = lw->width,
            .u = u ? u + (size_t)h * N : NULL,
            .scale = scale,
            .y = out->host + (int64_t)r0 * out->width + (int64_t)h * N,
            .y_stride = out->width,
            .S = S,
            .j0 = jb * (N / nb),
            .j1 = (jb + 1) * (N / nb),
        };
        if (bp->pos[r0] == 0)
            for (int32_t i = 0; i < N; i++)
                memset(S + (size_t)i * N + a.j0, 0, (size_t)(a.j1 - a.j0) * sizeof(float));
        /* chunks of one token are the recurrence itself */
        if (n_rows == 1 || C == 1) wk->recurrent(&a);
        else wk->chunked(&a, C, mine);
    }
}

hearth_status cpu_wkv(struct hearth_backend *be, struct act *out, const struct act *r, const struct act *k,
                      const struct act *v, const struct act *lw, const float *u, float scale, int32_t n_head,
                      int32_t n_head_kv, int32_t head_size, struct rstate *rs, int il, int32_t chunk_size,
                      const struct batch_pos *bp)
{
    const int32_t N = head_size, group = n_head / n_head_kv;
    const size_t head_floats = (size_t)N * N, wkv_floats = head_floats * (size_t)n_head;
    if (N > WKV_HEAD_MAX)
        return hearth_error(HEARTH_E_INTERNAL, "WKV head size %d beyond %d", N, WKV_HEAD_MAX);
    if (wkv_floats > rs->layer_floats)
        return hearth_error(HEARTH_E_INTERNAL, "WKV state of %zu floats beyond the layer's %zu", wkv_floats,
                            rs->layer_floats);
    const struct wkv_kernels *wk = wkv_kernels_matching(backend_cpu_kernels(be));
    int32_t max_rows = 0;
    for (int32_t s = 0; s < bp->n_seqs; s++)
        max_rows = HEARTH_MAX(max_rows, bp->seq_start[s + 1] - bp->seq_start[s]);
    int32_t C = chunk_size > 0 ? chunk_size : WKV_CHUNK_DEFAULT;
    if (C > max_rows) C = max_rows;
    if (C > WKV_CHUNK_MAX) C = WKV_CHUNK_MAX;
    if (C < 1) C = 1;
    const int64_t pairs = (int64_t)bp->n_seqs * n_head;
    const int32_t nb = column_blocks(pairs, be->n_threads, N);
    const int64_t items = pairs * nb;
    /* a decode step's recurrence is a few tens of microseconds of work:
     * below this many state elements, waking threads costs more */
    const bool small = max_rows == 1 && (int64_t)bp->n_seqs * n_head * N * N < WKV_SERIAL_STATE;
    const int n_threads = items > 1 && !small ? be->n_threads : 1;
    void *scratch = NULL;
    const size_t scratch_bytes = max_rows > 1 && C > 1 ? wkv_chunk_scratch_bytes(C, N) : 0;
    if (scratch_bytes) {
        scratch = hearth_aligned_alloc(64, scratch_bytes * (size_t)n_threads, "WKV chunk scratch");
        if (!scratch) return HEARTH_E_NOMEM;
    }
    const struct wkv_job job = {
        .out = out, .r = r, .k = k, .v = v, .lw = lw, .u = u, .scale = scale, .n_head = n_head,
        .group = group, .N = N, .nb = nb, .C = C, .items = items, .wkv_floats = wkv_floats, .rs = rs, .il = il,
        .bp = bp, .wk = wk, .scratch = scratch, .scratch_bytes = scratch_bytes,
    };
    cpu_run_parallel(n_threads, wkv_run, (void *)&job);
    hearth_aligned_free(scratch);
    out->rows = r->rows;
    out->width = (int64_t)n_head * N;
    return HEARTH_OK;
}

/*
 * backend_cpu_deltanet.c -- the CPU backend's operations for Gated
 * DeltaNet layers (models/qwen35.c; backend.h, "recurrent layers"): the
 * short causal convolution through each sequence's saved rows, and the
 * gated delta rule over the kernels of simd/delta.h, with the L2 norms of
 * queries and keys and the gates computed on the way in, parallel over
 * sequences and value heads.
 */
#include "backend_cpu_rwkv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "delta.h"
#include "rstate.h"

static int32_t slot_of(const struct batch_pos *bp, int32_t s)
{
    return bp->state_slot ? bp->state_slot[s] : s;
}

/* ---- the causal convolution ------------------------------------------------------ */

struct conv_job {
    struct act *out;
    const struct act *x;
    const float *w;
    int32_t K;
    bool silu;
    struct rstate *rs;
    int il;
    size_t offset;
    const struct batch_pos *bp;
};

static void conv_run(void *arg)
{
    const struct conv_job *j = arg;
    const struct batch_pos *bp = j->bp;
    const int64_t C = j->x->width;
    const int32_t K = j->K, H = K - 1;
#pragma omp for schedule(static)
    for (int32_t s = 0; s < bp->n_seqs; s++) {
        const int32_t r0 = bp->seq_start[s], n = bp->seq_start[s + 1] - r0;
        if (n <= 0) continue;
        float *state = rstate_layer(j->rs, slot_of(bp, s), j->il) + j->offset; /* H rows of C, oldest first */
        if (bp->pos[r0] == 0) memset(state, 0, (size_t)H * (size_t)C * sizeof(float));
        const float *x = j->x->host + (int64_t)r0 * C;
        float *out = j->out->host + (int64_t)r0 * C;
        /* row tau of the window: tau < 0 reads the saved rows */
#define ROW(tau) ((tau) < 0 ? state + (int64_t)(H + (tau)) * C : x + (int64_t)(tau) * C)
        for (int32_t t = 0; t < n; t++) {
            float *o = out + (int64_t)t * C;
            for (int64_t c = 0; c < C; c++) {
                const float *wc = j->w + c * K;
                float acc = 0.0f;
                for (int32_t k = 0; k < K; k++) acc += wc[k] * ROW(t - H + k)[c];
                o[c] = j->silu ? acc / (1.0f + expf(-acc)) : acc;
            }
        }
        /* checkpoints: the saved rows after each row t but the last */
        for (int32_t t = 0; t + 1 < n && batch_ckpt_slot(bp, s, t) >= 0; t++) {
            float *ck = rstate_layer(bp->ckpt, batch_ckpt_slot(bp, s, t), j->il) + j->offset;
            for (int32_t i = 0; i < H; i++) memcpy(ck + (int64_t)i * C, ROW(t - H + 1 + i), (size_t)C * sizeof(float));
        }
        /* the new saved rows: the last H of the saved rows and the batch's,
         * oldest first (moving the saved rows up before they are read is
         * safe: row i takes row i + n, later in the same array or in x) */
        for (int32_t i = 0; i < H; i++) {
            const int32_t tau = n - H + i;
            if (tau < 0) memmove(state + (int64_t)i * C, state + (int64_t)(H + tau) * C, (size_t)C * sizeof(float));
            else memcpy(state + (int64_t)i * C, x + (int64_t)tau * C, (size_t)C * sizeof(float));
        }
#undef ROW
    }
}

hearth_status cpu_conv_causal(struct hearth_backend *be, struct act *out, const struct act *x, const float *w,
                              int32_t K, bool silu, struct rstate *rs, int il, size_t offset,
                              const struct batch_pos *bp)
{
    if (K < 1 || out == x) return hearth_error(HEARTH_E_INTERNAL, "causal convolution of %d taps in place", K);
    if (offset + (size_t)(K - 1) * (size_t)x->width > rs->layer_floats)
        return hearth_error(HEARTH_E_INTERNAL, "convolution state beyond the layer's %zu floats", rs->layer_floats);
    const struct conv_job job = {out, x, w, K, silu, rs, il, offset, bp};
    const int n_threads = bp->n_seqs > 1 && x->rows * x->width * K >= 64 * 1024 ? be->n_threads : 1;
    cpu_run_parallel(n_threads, conv_run, (void *)&job);
    out->rows = x->rows;
    out->width = x->width;
    return HEARTH_OK;
}

/* ---- the gated delta rule --------------------------------------------------------- */

struct delta_job {
    struct act *out;
    const struct act *qkv, *beta, *alpha;
    const struct deltanet_params *p;
    struct rstate *rs;
    int il;
    int32_t C;
    const struct batch_pos *bp;
    const struct delta_kernels *dk;
    int64_t items;
    int32_t max_rows;
    uint8_t *scratch;        /* scratch_bytes per thread (delta_scratch_bytes) */
    size_t chunk_bytes, scratch_bytes;
};

/* A thread's scratch: the chunk's (chunk_bytes, 64-byte aligned), then the
 * normalised q and k rows and the two gates of up to max_rows tokens. */
static size_t delta_scratch_bytes(size_t chunk_bytes, int32_t max_rows, int32_t d)
{
    const size_t bytes = chunk_bytes + (2 * (size_t)max_rows * (size_t)d + 2 * (size_t)max_rows) * sizeof(float);
    return (bytes + 63) & ~(size_t)63;
}

/* x / max(|x|, eps) * scale over n floats. */
static void l2_normalise(float *dst, const float *x, int32_t n, float eps, float scale)
{
    double ss = 0.0;
    for (int32_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    const double norm = sqrt(ss);
    const float f = (float)(scale / (norm > eps ? norm : eps));
    for (int32_t i = 0; i < n; i++) dst[i] = x[i] * f;
}

static float softplus(float x)
{
    return x > 20.0f ? x : log1pf(expf(x));
}

static void delta_run(void *arg)
{
    const struct delta_job *j = arg;
    const struct deltanet_params *p = j->p;
    const struct batch_pos *bp = j->bp;
    const int32_t d = p->head_dim, n_v = p->n_v_heads, n_k = p->n_k_heads;
    const int64_t key_dim = (int64_t)n_k * d;
    const size_t S_floats = (size_t)d * d;
    const size_t rows = (size_t)j->max_rows;
    uint8_t *mine = j->scratch + j->scratch_bytes * (size_t)cpu_thread_index();
    float *qn = (float *)(mine + j->chunk_bytes);
    float *kn = qn + rows * (size_t)d;
    float *g = kn + rows * (size_t)d;
    float *b = g + rows;
    const float q_scale = 1.0f / sqrtf((float)d);
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < j->items; it++) {
        const int32_t s = (int32_t)(it / n_v), h = (int32_t)(it % n_v);
        const int32_t r0 = bp->seq_start[s], n = bp->seq_start[s + 1] - r0;
        if (n <= 0) continue;
        /* value head h reads key head h mod n_k (Qwen3.5's tiled order) or
         * h / r (Qwen3-Next's grouped order) */
        const int32_t r = n_v / n_k;
        const int32_t kh = p->grouped ? h / r : h % n_k;
        const int64_t b_col = p->fused_ba ? (int64_t)(h / r) * 2 * r + h % r : h;
        const int64_t a_col = p->fused_ba ? b_col + r : h;
        const struct act *alpha = p->fused_ba ? j->beta : j->alpha;
        for (int32_t t = 0; t < n; t++) {
            const float *row = j->qkv->host + (int64_t)(r0 + t) * j->qkv->width;
            l2_normalise(qn + (size_t)t * d, row + (int64_t)kh * d, d, p->eps, q_scale);
            l2_normalise(kn + (size_t)t * d, row + key_dim + (int64_t)kh * d, d, p->eps, 1.0f);
            const float bl = j->beta->host[(int64_t)(r0 + t) * j->beta->width + b_col];
            const float al = alpha->host[(int64_t)(r0 + t) * alpha->width + a_col];
            b[t] = 1.0f / (1.0f + expf(-bl));
            g[t] = softplus(al + p->dt_bias[h]) * p->a[h];
        }
        float *S = rstate_layer(j->rs, slot_of(bp, s), j->il) + p->state_offset + (size_t)h * S_floats;
        if (bp->pos[r0] == 0) memset(S, 0, S_floats * sizeof(float));
        const struct delta_head head = {
            .n = n, .dk = d, .dv = d,
            .q = qn, .k = kn,
            .v = j->qkv->host + (int64_t)r0 * j->qkv->width + 2 * key_dim + (int64_t)h * d,
            .g = g, .b = b,
            .q_stride = d, .k_stride = d, .v_stride = j->qkv->width, .g_stride = 1, .b_stride = 1,
            .o = j->out->host + (int64_t)r0 * j->out->width + (int64_t)h * d,
            .o_stride = j->out->width,
            .S = S, .i0 = 0, .i1 = d,
        };
        if (batch_ckpt_slot(bp, s, 0) >= 0) {
            /* token by token, the state after each row but the last kept */
            for (int32_t t = 0; t < n; t++) {
                struct delta_head one = head;
                one.n = 1;
                one.q = qn + (size_t)t * d;
                one.k = kn + (size_t)t * d;
                one.v = head.v + (int64_t)t * head.v_stride;
                one.g = g + t;
                one.b = b + t;
                one.o = head.o + (int64_t)t * head.o_stride;
                j->dk->recurrent(&one);
                if (t + 1 < n)
                    memcpy(rstate_layer(bp->ckpt, batch_ckpt_slot(bp, s, t), j->il) + p->state_offset +
                               (size_t)h * S_floats, S, S_floats * sizeof(float));
            }
        } else if (n == 1 || j->C == 1) {
            /* chunks of one token are the recurrence itself */
            j->dk->recurrent(&head);
        } else {
            j->dk->chunked(&head, j->C, mine);
        }
    }
}

hearth_status cpu_gated_delta(struct hearth_backend *be, struct act *out, const struct act *qkv,
                              const struct act *beta, const struct act *alpha, const struct deltanet_params *p,
                              struct rstate *rs, int il, int32_t chunk_size, const struct batch_pos *bp)
{
    const int32_t d = p->head_dim;
    if (d < 1 || d > DELTA_HEAD_MAX || p->n_k_heads < 1 || p->n_v_heads % p->n_k_heads != 0)
        return hearth_error(HEARTH_E_INTERNAL, "delta rule heads: %d key and %d value heads of %d", p->n_k_heads,
                            p->n_v_heads, d);
    if (p->state_offset + (size_t)p->n_v_heads * d * d > rs->layer_floats)
        return hearth_error(HEARTH_E_INTERNAL, "delta rule state beyond the layer's %zu floats", rs->layer_floats);
    int32_t max_rows = 0;
    for (int32_t s = 0; s < bp->n_seqs; s++) max_rows = HEARTH_MAX(max_rows, bp->seq_start[s + 1] - bp->seq_start[s]);
    int32_t C = chunk_size > 0 ? chunk_size : 1;
    if (C > max_rows) C = max_rows;
    if (C > DELTA_CHUNK_MAX) C = DELTA_CHUNK_MAX;
    if (C < 1) C = 1;
    const int64_t items = (int64_t)bp->n_seqs * p->n_v_heads;
    const int n_threads = items > 1 ? be->n_threads : 1;
    const size_t chunk_bytes = max_rows > 1 && C > 1 ? delta_chunk_scratch_bytes(C, d, d) : 0;
    const size_t scratch_bytes = delta_scratch_bytes(chunk_bytes, max_rows, d);
    uint8_t *scratch = hearth_aligned_alloc(64, scratch_bytes * (size_t)n_threads, "the delta rule's scratch");
    if (!scratch) return HEARTH_E_NOMEM;
    const struct delta_job job = {
        .out = out, .qkv = qkv, .beta = beta, .alpha = alpha, .p = p, .rs = rs, .il = il, .C = C, .bp = bp,
        .dk = delta_kernels_matching(backend_cpu_kernels(be)), .items = items, .max_rows = max_rows,
        .scratch = scratch, .chunk_bytes = chunk_bytes, .scratch_bytes = scratch_bytes,
    };
    cpu_run_parallel(n_threads, delta_run, (void *)&job);
    hearth_aligned_free(scratch);
    out->rows = qkv->rows;
    out->width = (int64_t)p->n_v_heads * d;
    return HEARTH_OK;
}

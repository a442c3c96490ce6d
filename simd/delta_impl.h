/*
 * delta_impl.h -- the body of the gated delta rule's kernels (delta.h),
 * compiled once per instruction set: simd/delta_scalar.c for the baseline
 * (the twin), simd/delta_avx2.c with AVX2 and FMA (contraction off, so
 * that both give the same bits).  The includer defines DELTA_NAME(x), the
 * path's name for function x.
 *
 * The chunked form (DESIGN.md, "Chunk-parallel prefill of the delta
 * rule").  Within a chunk of L tokens with incoming state S0, G_t =
 * sum_{s <= t} g_s (in double), and the pseudo-values u_t of the
 * recurrence (delta.h) solve the unit lower-triangular system
 *
 *   u_t + sum_{s < t} A_ts u_s = b_t (v_t - e^{G_t} S0 k_t),
 *   A_ts = b_t e^{G_t - G_s} (k_t . k_s),
 *
 * after which
 *
 *   o_t = e^{G_t} S0 q_t + sum_{s <= t} e^{G_t - G_s} (q_t . k_s) u_s
 *   S_L = e^{G_{L-1}} S0 + sum_s e^{G_{L-1} - G_s} u_s k_s^T.
 *
 * Every exponent is a difference of a later and an earlier cumulative
 * sum, so <= 0 and every factor is at most 1: no e^{-G} that can
 * overflow.  The u_t are the recurrence's own quantities, so solving for
 * them is as stable as the recurrence (the product of the I - b k k^T is
 * a contraction for 0 <= b <= 1 and unit k).  The matrices A and the
 * query-key products are the chunk's, shared by every value row; the
 * solve, the outputs and the new state are per row.
 */

#include <math.h>
#include <string.h>

static inline double DELTA_NAME(clamp_log)(float g)
{
    return g < DELTA_LOG_DECAY_MIN || isnan(g) ? DELTA_LOG_DECAY_MIN : (double)g;
}

/* A dot product in 16 interleaved partial sums (element j into sum j mod
 * 16), added pairwise at the end: a fixed order every path computes alike,
 * which the compiler turns into vector multiply-adds without reassociating
 * anything. */
static inline float DELTA_NAME(dot)(const float *a, const float *b, int32_t n)
{
    float acc[16] = {0};
    int32_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (int l = 0; l < 16; l++) acc[l] += a[j + l] * b[j + l];
    for (int l = 0; j + l < n; l++) acc[l] += a[j + l] * b[j + l];
    for (int w = 8; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    return acc[0];
}

static void DELTA_NAME(recurrent)(const struct delta_head *h)
{
    const int32_t dk = h->dk;
    for (int64_t t = 0; t < h->n; t++) {
        const float *q = h->q + t * h->q_stride, *k = h->k + t * h->k_stride, *v = h->v + t * h->v_stride;
        const float a = (float)exp(DELTA_NAME(clamp_log)(h->g[t * h->g_stride]));
        const float b = h->b[t * h->b_stride];
        float *o = h->o + t * h->o_stride;
        for (int32_t i = h->i0; i < h->i1; i++) {
            float *s = h->S + (size_t)i * dk;
            const float u = b * (v[i] - a * DELTA_NAME(dot)(s, k, dk));
            for (int32_t j = 0; j < dk; j++) s[j] = a * s[j] + u * k[j];
            o[i] = DELTA_NAME(dot)(s, q, dk);
        }
    }
}

/* The scratch of one chunk: the cumulative log-decays (double), A and the
 * masked query-key products (C x C each), the decays from the chunk's
 * start and to its end, and the pseudo-values of one row. */
static void DELTA_NAME(chunk)(const struct delta_head *h, int64_t t0, int32_t L, double *G, float *A, float *B,
                              float *e_start, float *e_end, float *u)
{
    const int32_t dk = h->dk;
    const float *k0 = h->k + t0 * h->k_stride, *q0 = h->q + t0 * h->q_stride;
    double acc = 0.0;
    for (int32_t t = 0; t < L; t++) {
        acc += DELTA_NAME(clamp_log)(h->g[(t0 + t) * h->g_stride]);
        G[t] = acc;
    }
    for (int32_t t = 0; t < L; t++) {
        e_start[t] = (float)exp(G[t]);
        e_end[t] = (float)exp(G[L - 1] - G[t]);
        const float *kt = k0 + t * h->k_stride, *qt = q0 + t * h->q_stride;
        const float bt = h->b[(t0 + t) * h->b_stride];
        for (int32_t s = 0; s < L; s++) {
            const float *ks = k0 + s * h->k_stride;
            A[(size_t)t * L + s] = s < t ? bt * (float)exp(G[t] - G[s]) * DELTA_NAME(dot)(kt, ks, dk) : 0.0f;
            const int32_t last = delta_inject_bug == 2 && t + 1 < L ? t + 1 : t;
            B[(size_t)t * L + s] = s <= last ? (float)exp(G[t] - G[s]) * DELTA_NAME(dot)(qt, ks, dk) : 0.0f;
        }
    }
    const bool state = delta_inject_bug != 1;
    for (int32_t i = h->i0; i < h->i1; i++) {
        float *S = h->S + (size_t)i * dk;
        for (int32_t t = 0; t < L; t++) {
            const float *kt = k0 + t * h->k_stride;
            float r = h->v[(t0 + t) * h->v_stride + i];
            if (state) r -= e_start[t] * DELTA_NAME(dot)(S, kt, dk);
            r *= h->b[(t0 + t) * h->b_stride];
            const float *At = A + (size_t)t * L;
            for (int32_t s = 0; s < t; s++) r -= At[s] * u[s];
            u[t] = r;
        }
        for (int32_t t = 0; t < L; t++) {
            const float *qt = q0 + t * h->q_stride;
            float o = state ? e_start[t] * DELTA_NAME(dot)(S, qt, dk) : 0.0f;
            const float *Bt = B + (size_t)t * L;
            for (int32_t s = 0; s < L; s++) o += Bt[s] * u[s];
            h->o[(t0 + t) * h->o_stride + i] = o;
        }
        const float decay = state ? e_start[L - 1] : 0.0f;
        for (int32_t j = 0; j < dk; j++) S[j] *= decay;
        for (int32_t t = 0; t < L; t++) {
            const float *kt = k0 + t * h->k_stride;
            const float w = e_end[t] * u[t];
            for (int32_t j = 0; j < dk; j++) S[j] += w * kt[j];
        }
    }
}

static void DELTA_NAME(chunked)(const struct delta_head *h, int32_t C, void *scratch)
{
    if (C < 1) C = 1;
    if (C > DELTA_CHUNK_MAX) C = DELTA_CHUNK_MAX;
    double *G = scratch;
    float *A = (float *)(G + C);
    float *B = A + (size_t)C * C;
    float *e_start = B + (size_t)C * C;
    float *e_end = e_start + C;
    float *u = e_end + C;
    for (int64_t t0 = 0; t0 < h->n; t0 += C) {
        const int32_t L = (int32_t)(h->n - t0 < C ? h->n - t0 : C);
        DELTA_NAME(chunk)(h, t0, L, G, A, B, e_start, e_end, u);
    }
}

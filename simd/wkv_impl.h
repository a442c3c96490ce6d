/*
 * wkv_impl.h -- the body of the WKV kernels (wkv.h), compiled once per
 * instruction set: simd/wkv_scalar.c for the baseline (the twin), and the
 * vector paths' files with their own flags, where the compiler turns the
 * inner loops -- every one runs along contiguous value columns or keys,
 * multiply-adds without reassociation -- into vector code.  The includer
 * defines WKV_NAME(x), the path's name for function x.
 *
 * The chunked form (DESIGN.md, "Chunk-parallel prefill").  Within a chunk
 * of L tokens with incoming state S0, A_t = sum_{s <= t} l_s (per key
 * channel, in double), and with a_t = A_{t-1} for RWKV-6 (the current
 * token reaches the state only after being read) or A_t for GLA:
 *
 *   y_t = (r_t e^{a_t}) S0                                   inter-chunk
 *       + sum_{s < t} [sum_i r_ti k_si e^{a_ti - A_si}] v_s   strict lower triangle
 *       + (r_t . u . k_t) v_t            (RWKV-6)             the bonus diagonal
 *   (GLA: s <= t in the triangle, no bonus, k already k (1 - w), times scale)
 *   S_L = e^{A_L} S0 + sum_s (k_s e^{A_L - A_s}) v_s^T
 *
 * Every exponent is a difference a - A of a later and an earlier
 * cumulative sum, so <= 0.  Off-diagonal sub-chunk blocks (queries in
 * sub-chunk a, keys in an earlier sub-chunk b) factor through the two
 * sub-chunk boundaries: e^{a_t - A_s} = e^{a_t - A_{start(a)-1}} *
 * e^{A_{start(a)-1} - A_{end(b)}} * e^{A_{end(b)} - A_s}, each factor's
 * exponent <= 0, so the block is a product of three bounded matrices (a
 * GEMM), never the overflowing (R e^{A})(K e^{-A})^T.  Diagonal blocks
 * take each pair's exponent directly.
 */

#include <math.h>
#include <string.h>

static inline double WKV_NAME(clamp_log)(float l)
{
    return l < WKV_LOG_DECAY_MIN ? WKV_LOG_DECAY_MIN : (double)l;
}

/* e^xc = 2^n e^r for xc in [-103, 89] and n = xc / ln 2 rounded: r = xc
 * - n ln 2 (ln 2 in two parts), e^r by its Taylor polynomial of degree 6
 * (WKV_NAME(exp), for x <= 0) or 7 (WKV_NAME(exp_any), the whole range),
 * and 2^n, n in [-149, 128], as two factors so that each is a normal
 * float. */
static inline float WKV_NAME(exp_reduced)(float xc, float n, int degree)
{
    const float r = (xc - n * 0.693145752f) - n * 1.42860677e-6f;
    float p = degree == 7 ? 1.0f / 5040.0f * r + 1.0f / 720.0f : 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int32_t ni = (int32_t)n;
    const int32_t n1 = ni / 2, n2 = ni - n1;
    union { int32_t i; float f; } a = {(n1 + 127) << 23}, b = {(n2 + 127) << 23};
    return p * a.f * b.f;
}

/* e^x for x <= 0 (differences of cumulative sums, taken in double and
 * rounded to float), within 2 ulp, 0 below -103 where float underflows.
 * Branch-free. */
static inline float WKV_NAME(exp)(float x)
{
    const float xc = x < -103.0f ? -103.0f : x;
    const float y = WKV_NAME(exp_reduced)(xc, __builtin_floorf(xc * 1.44269504f + 0.5f), 6);
    return x < -103.0f ? 0.0f : y;
}
#define EXPD(d) WKV_NAME(exp)((float)(d))

/* ---- the elementwise maps of the time and channel mixing ---------------- */

/* e^x on the whole float range, as WKV_NAME(exp) (within 2 ulp where the
 * result is a normal float): inf from 88.73 on (2^n p overflows, or
 * above 89 by the select), 0 below -103, NaN for NaN.
 * The bounds are applied as selects, not branches, so that the map loops
 * vectorize; a NaN is first replaced by a bound (so that the conversion
 * to an integer is defined) and given back at the end. */
static inline float WKV_NAME(exp_any)(float x)
{
    float xc = x > -103.0f ? x : -103.0f;
    xc = xc < 89.0f ? xc : 89.0f;
    /* n = x / ln 2 rounded to nearest: adding and subtracting 1.5 * 2^23
     * rounds (floorf would keep the loop from vectorizing) */
    const float n = (xc * 1.44269504f + 12582912.0f) - 12582912.0f;
    float y = WKV_NAME(exp_reduced)(xc, n, 7);
    y = x < -103.0f ? 0.0f : y;
    y = x > 89.0f ? __builtin_inff() : y;
    return x != x ? x : y;
}

/* tanh x: for |x| < 0.5 its odd Taylor polynomial to x^15 (the terms
 * fall by a factor of ten there, so the error is below 1e-8 relative);
 * above, 1 - 2 / (e^{2|x|} + 1), which has no cancellation there, with
 * the sign of x.  Both are computed and one is selected. */
static inline float WKV_NAME(tanh)(float x)
{
    const float ax = x < 0.0f ? -x : x;
    const float x2 = x * x;
    float p = -929569.0f / 638512875.0f;
    p = p * x2 + 21844.0f / 6081075.0f;
    p = p * x2 + -1382.0f / 155925.0f;
    p = p * x2 + 62.0f / 2835.0f;
    p = p * x2 + -17.0f / 315.0f;
    p = p * x2 + 2.0f / 15.0f;
    p = p * x2 + -1.0f / 3.0f;
    const float small = x + x * x2 * p;
    const float e = WKV_NAME(exp_any)(2.0f * (ax < 20.0f ? ax : 20.0f));
    const float big = 1.0f - 2.0f / (e + 1.0f);
    const float t = ax < 0.5f ? small : (x < 0.0f ? -big : big);
    return x != x ? x : t;
}

/* y = f(x) over n elements (y may be x: then the loop reads and writes
 * one array, which the compiler vectorizes without a check for overlap).
 * Each element's result depends on its value alone, whatever n and the
 * element's place: the operations are the same in the vector body and
 * the scalar remainder, without contraction (the kernels' flags), so the
 * scalar twin gives the same bits. */
#define WKV_MAP_LOOP(expr) \
    do { \
        if (x == y) \
            for (int64_t i = 0; i < n; i++) { \
                const float v = y[i]; \
                y[i] = (expr); \
            } \
        else \
            for (int64_t i = 0; i < n; i++) { \
                const float v = x[i]; \
                y[i] = (expr); \
            } \
    } while (0)

static void WKV_NAME(map)(enum wkv_map kind, const float *x, float *y, int64_t n)
{
    switch (kind) {
    case WKV_MAP_TANH: WKV_MAP_LOOP(WKV_NAME(tanh)(v)); break;
    case WKV_MAP_SIGMOID: WKV_MAP_LOOP(1.0f / (1.0f + WKV_NAME(exp_any)(-v))); break;
    case WKV_MAP_SILU: WKV_MAP_LOOP(v / (1.0f + WKV_NAME(exp_any)(-v))); break;
    case WKV_MAP_LOG_DECAY: WKV_MAP_LOOP(-WKV_NAME(exp_any)(v)); break;
    case WKV_MAP_RELU_SQR: WKV_MAP_LOOP(v > 0.0f ? v * v : 0.0f); break;
    }
}
#undef WKV_MAP_LOOP

static void WKV_NAME(lerp)(const float *a, const float *p, const float *mu, const float *m, float *y, int64_t n)
{
    if (m)
        for (int64_t i = 0; i < n; i++) y[i] = a[i] + (p[i] - a[i]) * (mu[i] + m[i]);
    else
        for (int64_t i = 0; i < n; i++) y[i] = a[i] + (p[i] - a[i]) * mu[i];
}

/* One tile of W value columns (W a constant WKV_TILE where the tile is
 * whole, so that the compiler keeps the tile's outputs in registers for
 * the whole pass over the state's rows): the state's rows are read and
 * written once per token, the outputs accumulate in acc.  r, w and kk
 * are the token's per-key factors (recurrent() below). */
static inline void WKV_NAME(tile)(const struct wkv_head *h, int32_t W, int32_t jt, const float *v,
                                  const float *rr, const float *w, const float *kk, float bonus, float *y)
{
    const int32_t N = h->N;
    float acc[WKV_TILE];
    for (int32_t j = 0; j < W; j++) acc[j] = 0.0f;
    float *S = h->S + h->j0 + jt;
    if (h->u == NULL) {
        for (int32_t i = 0; i < N; i++, S += N) {
            const float a = rr[i], d = w[i], b = kk[i];
            for (int32_t j = 0; j < W; j++) {
                const float s = S[j] * d + b * v[j];
                S[j] = s;
                acc[j] += a * s;
            }
        }
        for (int32_t j = 0; j < W; j++) y[j] = acc[j];
    } else {
        for (int32_t i = 0; i < N; i++, S += N) {
            const float a = rr[i], d = w[i], b = kk[i];
            for (int32_t j = 0; j < W; j++) {
                const float s = S[j];
                acc[j] += a * s;
                S[j] = s * d + b * v[j];
            }
        }
        for (int32_t j = 0; j < W; j++) y[j] = acc[j] + bonus * v[j];
    }
}

#ifdef WKV_VECTOR
/* tile() for a whole tile, written with eight-float vectors of the
 * compiler's vector extension held in named variables, so that the 64
 * outputs stay in registers: the same operations on each element in the
 * same order as tile(), so the same bits (no contraction: configure). */
typedef float WKV_NAME(v8) __attribute__((vector_size(32)));
_Static_assert(WKV_TILE == 64, "tile_vec() is written for 64 columns");

static inline WKV_NAME(v8) WKV_NAME(load)(const float *p)
{
    WKV_NAME(v8) x;
    memcpy(&x, p, sizeof x);
    return x;
}

static inline void WKV_NAME(store)(float *p, WKV_NAME(v8) x)
{
    memcpy(p, &x, sizeof x);
}

static inline void WKV_NAME(tile_vec)(const struct wkv_head *h, int32_t jt, const float *v, const float *rr,
                                      const float *w, const float *kk, float bonus, float *y)
{
    typedef WKV_NAME(v8) v8;
    const int32_t N = h->N;
    const v8 zero = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    v8 a0 = zero, a1 = zero, a2 = zero, a3 = zero, a4 = zero, a5 = zero, a6 = zero, a7 = zero;
    float *S = h->S + h->j0 + jt;
#define WKV_STEP(c)                                                                          \
    do {                                                                                     \
        const v8 s = WKV_NAME(load)(S + 8 * (c));                                            \
        WKV_STEP_BODY(c);                                                                    \
    } while (0)
#define WKV_STEPS()                                                                          \
    do {                                                                                     \
        WKV_STEP(0); WKV_STEP(1); WKV_STEP(2); WKV_STEP(3);                                  \
        WKV_STEP(4); WKV_STEP(5); WKV_STEP(6); WKV_STEP(7);                                  \
    } while (0)
    if (h->u == NULL) {
#define WKV_STEP_BODY(c)                                                                     \
        const v8 n = s * d + b * WKV_NAME(load)(v + 8 * (c));                                \
        WKV_NAME(store)(S + 8 * (c), n);                                                     \
        a##c += a * n
        for (int32_t i = 0; i < N; i++, S += N) {
            const float a = rr[i], d = w[i], b = kk[i];
            WKV_STEPS();
        }
#undef WKV_STEP_BODY
    } else {
#define WKV_STEP_BODY(c)                                                                     \
        a##c += a * s;                                                                       \
        WKV_NAME(store)(S + 8 * (c), s * d + b * WKV_NAME(load)(v + 8 * (c)))
        for (int32_t i = 0; i < N; i++, S += N) {
            const float a = rr[i], d = w[i], b = kk[i];
            WKV_STEPS();
        }
#undef WKV_STEP_BODY
        const float c0 = bonus;
        a0 += c0 * WKV_NAME(load)(v);
        a1 += c0 * WKV_NAME(load)(v + 8);
        a2 += c0 * WKV_NAME(load)(v + 16);
        a3 += c0 * WKV_NAME(load)(v + 24);
        a4 += c0 * WKV_NAME(load)(v + 32);
        a5 += c0 * WKV_NAME(load)(v + 40);
        a6 += c0 * WKV_NAME(load)(v + 48);
        a7 += c0 * WKV_NAME(load)(v + 56);
    }
#undef WKV_STEPS
#undef WKV_STEP
    WKV_NAME(store)(y, a0);
    WKV_NAME(store)(y + 8, a1);
    WKV_NAME(store)(y + 16, a2);
    WKV_NAME(store)(y + 24, a3);
    WKV_NAME(store)(y + 32, a4);
    WKV_NAME(store)(y + 40, a5);
    WKV_NAME(store)(y + 48, a6);
    WKV_NAME(store)(y + 56, a7);
}
#endif

/* Token by token.  The bonus term sum_i r_i u_i k_i v_j is one scalar
 * times v (computed once per token, not per state element), so a state
 * element costs three operations: the output's multiply-add, the decay
 * and the new key-value product. */
static void WKV_NAME(recurrent)(const struct wkv_head *h)
{
    const int32_t N = h->N, j0 = h->j0, J = h->j1 - h->j0;
    const bool gla = h->u == NULL;
    float rr[WKV_HEAD_MAX], w[WKV_HEAD_MAX], kk[WKV_HEAD_MAX];
    for (int64_t t = 0; t < h->n; t++) {
        const float *r = h->r + t * h->r_stride, *k = h->k + t * h->k_stride;
        const float *v = h->v + t * h->v_stride + j0, *lw = h->lw + t * h->lw_stride;
        float *y = h->y + t * h->y_stride + j0;
        float bonus = 0.0f;
        for (int32_t i = 0; i < N; i++) {
            const double l = WKV_NAME(clamp_log)(lw[i]);
            w[i] = EXPD(l);
            if (gla) {
                kk[i] = k[i] * (float)-expm1(l);
                rr[i] = r[i] * h->scale;
            } else {
                kk[i] = k[i];
                rr[i] = r[i];
                bonus += r[i] * h->u[i] * k[i];
            }
        }
        int32_t jt = 0;
        for (; jt + WKV_TILE <= J; jt += WKV_TILE)
#ifdef WKV_VECTOR
            WKV_NAME(tile_vec)(h, jt, v + jt, rr, w, kk, bonus, y + jt);
#else
            WKV_NAME(tile)(h, WKV_TILE, jt, v + jt, rr, w, kk, bonus, y + jt);
#endif
        if (jt < J) WKV_NAME(tile)(h, J - jt, jt, v + jt, rr, w, kk, bonus, y + jt);
    }
}

/* The scratch of one call, carved from one block (wkv_chunk_scratch_bytes). */
struct WKV_NAME(scratch) {
    double *A;     /* (C + 1) x N: A[t] = the sum of the log-decays of tokens < t */
    double *AT;    /* N x (C + 1): the same, transposed */
    float *kpT;    /* N x C: kp transposed */
    float *kp;     /* C x N: the keys that enter the state (GLA: k (1 - w)) */
    float *Rq;     /* C x N: r_t e^{a_t} */
    float *Qh;     /* C x N: r_t e^{a_t - A(start of its sub-chunk)} */
    float *KhT;    /* N x C: k_s e^{A(end of its sub-chunk) - A_s}, transposed */
    float *KeT;    /* N x C: k_s e^{A_L - A_s}, transposed */
    float *P;      /* C x C: the masked products */
    float *g;      /* N */
};

static void WKV_NAME(carve)(void *mem, int32_t C, int32_t N, struct WKV_NAME(scratch) *s)
{
    const size_t CN = (size_t)C * N;
    double *d = mem;
    s->A = d;
    s->AT = d + (size_t)(C + 1) * N;
    float *f = (float *)(d + 2 * (size_t)(C + 1) * N);
    s->kpT = f;
    f += CN;
    s->kp = f;
    s->Rq = s->kp + CN;
    s->Qh = s->Rq + CN;
    s->KhT = s->Qh + CN;
    s->KeT = s->KhT + CN;
    s->P = s->KeT + CN;
    s->g = s->P + (size_t)C * C;
}

static void WKV_NAME(chunk)(const struct wkv_head *h, int64_t t0, int32_t L, int32_t C,
                            const struct WKV_NAME(scratch) *sc)
{
    const int32_t N = h->N, j0 = h->j0, J = h->j1 - h->j0;
    const bool gla = h->u == NULL;
    double *A = sc->A, *AT = sc->AT;
    float *kpT = sc->kpT;
    float *kp = sc->kp, *Rq = sc->Rq, *Qh = sc->Qh, *KhT = sc->KhT, *KeT = sc->KeT, *P = sc->P,
          *g = sc->g;
#define ROW(p, t) (h->p + (t0 + (t)) * h->p##_stride)
    /* chunk-local cumulative log-decays, and the keys entering the state */
    for (int32_t i = 0; i < N; i++) A[i] = AT[(size_t)i * (C + 1)] = 0.0;
    for (int32_t t = 0; t < L; t++) {
        const float *lw = ROW(lw, t), *k = ROW(k, t);
        const double *prev = A + (size_t)t * N;
        double *cur = A + (size_t)(t + 1) * N;
        for (int32_t i = 0; i < N; i++) {
            const double l = WKV_NAME(clamp_log)(lw[i]);
            cur[i] = prev[i] + l;
            kp[(size_t)t * N + i] = gla ? k[i] * (float)-expm1(l) : k[i];
            AT[(size_t)i * (C + 1) + t + 1] = cur[i];
            kpT[(size_t)i * C + t] = kp[(size_t)t * N + i];
        }
    }
    /* a_t: the sum up to the token before t (RWKV-6) or up to t (GLA) */
#define AQ(t) (A + (size_t)((t) + (gla ? 1 : 0)) * N)

    /* inter-chunk: y_t = (r_t e^{a_t}) S0 */
    for (int32_t t = 0; t < L; t++) {
        const float *r = ROW(r, t);
        const double *a = AQ(t);
        float *q = Rq + (size_t)t * N;
        for (int32_t i = 0; i < N; i++) q[i] = r[i] * EXPD(a[i]);
        float *y = ROW(y, t) + j0;
        for (int32_t j = 0; j < J; j++) y[j] = 0.0f;
        if (wkv_inject_bug == 1) continue;
        for (int32_t i = 0; i < N; i++) {
            const float qi = q[i];
            const float *S = h->S + (size_t)i * N + j0;
            for (int32_t j = 0; j < J; j++) y[j] += qi * S[j];
        }
    }

    /* intra-chunk: the masked C x C products, sub-chunk by sub-chunk */
    const int32_t n_sub = (L + WKV_SUB - 1) / WKV_SUB;
    for (int32_t b = 0; b < n_sub; b++) {
        const int32_t sb = b * WKV_SUB, eb = HEARTH_MIN(sb + WKV_SUB, L) - 1;
        const double *Aend = A + (size_t)(eb + 1) * N;
        for (int32_t s = sb; s <= eb; s++) {
            const double *As = A + (size_t)(s + 1) * N;
            for (int32_t i = 0; i < N; i++)
                KhT[(size_t)i * C + s] = kp[(size_t)s * N + i] * EXPD(Aend[i] - As[i]);
        }
    }
    for (int32_t a = 0; a < n_sub; a++) {
        const int32_t sa = a * WKV_SUB, ea = HEARTH_MIN(sa + WKV_SUB, L) - 1;
        const double *Astart = A + (size_t)sa * N;
        for (int32_t t = sa; t <= ea; t++) {
            const float *r = ROW(r, t);
            const double *at = AQ(t);
            float *q = Qh + (size_t)t * N;
            for (int32_t i = 0; i < N; i++) q[i] = r[i] * EXPD(at[i] - Astart[i]);
            float *p = P + (size_t)t * C;
            for (int32_t s = 0; s < sa; s++) p[s] = 0.0f;
        }
        /* blocks left of the diagonal: Qh diag(g) KhT, g = e^{A(start a) - A(end b)} */
        for (int32_t b = 0; b < a; b++) {
            const int32_t sb = b * WKV_SUB, eb = sb + WKV_SUB - 1;
            const double *Aend = A + (size_t)(eb + 1) * N;
            for (int32_t i = 0; i < N; i++) g[i] = EXPD(Astart[i] - Aend[i]);
            for (int32_t t = sa; t <= ea; t++) {
                const float *q = Qh + (size_t)t * N;
                float *p = P + (size_t)t * C + sb;
                for (int32_t i = 0; i < N; i++) {
                    const float qi = q[i] * g[i];
                    const float *kt = KhT + (size_t)i * C + sb;
                    for (int32_t s = 0; s < WKV_SUB; s++) p[s] += qi * kt[s];
                }
            }
        }
        /* the diagonal block, pair by pair */
        for (int32_t t = sa; t <= ea; t++) {
            const float *r = ROW(r, t);
            const double *at = AQ(t);
            float *p = P + (size_t)t * C;
            int32_t last = gla ? t : t - 1; /* the keys t reads through the state */
            if (wkv_inject_bug == 2 && t < ea) last = t + 1;
            for (int32_t s = sa; s <= last; s++) p[s] = 0.0f;
            for (int32_t i = 0; i < N; i++) {
                const float q = r[i];
                const double ai = at[i];
                const double *As = AT + (size_t)i * (C + 1) + 1;
                const float *ks = kpT + (size_t)i * C;
                for (int32_t s = sa; s <= last; s++) {
                    const double e = ai - As[s];
                    p[s] += q * ks[s] * EXPD(e < 0.0 ? e : 0.0);
                }
            }
            if (!gla) {
                const float *k = ROW(k, t);
                float acc = 0.0f;
                for (int32_t i = 0; i < N; i++) acc += r[i] * h->u[i] * k[i];
                if (last < t) p[t] = acc;
                else p[t] += acc;
            }
        }
    }
    /* y_t += sum_s P[t][s] v_s; GLA scales the whole output */
    for (int32_t t = 0; t < L; t++) {
        const float *p = P + (size_t)t * C;
        float *y = ROW(y, t) + j0;
        int32_t last = (wkv_inject_bug == 2 && t + 1 < L && (t + 1) % WKV_SUB != 0) ? t + 1 : t;
        for (int32_t s = 0; s <= last; s++) {
            const float ps = p[s];
            const float *v = ROW(v, s) + j0;
            for (int32_t j = 0; j < J; j++) y[j] += ps * v[j];
        }
        if (gla)
            for (int32_t j = 0; j < J; j++) y[j] *= h->scale;
    }

    /* the outgoing state: S = e^{A_L} S0 + sum_s (k_s e^{A_L - A_s}) v_s^T */
    const double *AL = A + (size_t)L * N;
    for (int32_t s = 0; s < L; s++) {
        const double *As = A + (size_t)(s + 1) * N;
        for (int32_t i = 0; i < N; i++)
            KeT[(size_t)i * C + s] = kp[(size_t)s * N + i] * EXPD(AL[i] - As[i]);
    }
    for (int32_t i = 0; i < N; i++) {
        const float e = EXPD(AL[i]);
        float *S = h->S + (size_t)i * N + j0;
        for (int32_t j = 0; j < J; j++) S[j] *= e;
        const float *kt = KeT + (size_t)i * C;
        for (int32_t s = 0; s < L; s++) {
            const float ks = kt[s];
            const float *v = ROW(v, s) + j0;
            for (int32_t j = 0; j < J; j++) S[j] += ks * v[j];
        }
    }
#undef AQ
#undef ROW
}

static void WKV_NAME(chunked)(const struct wkv_head *h, int32_t C, void *scratch)
{
    struct WKV_NAME(scratch) sc;
    WKV_NAME(carve)(scratch, C, h->N, &sc);
    for (int64_t t0 = 0; t0 < h->n; t0 += C) {
        const int32_t L = (int32_t)HEARTH_MIN((int64_t)C, h->n - t0);
        WKV_NAME(chunk)(h, t0, L, C, &sc);
    }
}

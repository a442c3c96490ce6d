/*
 * quant.c -- scalar reference conversions between float and the GGUF tensor
 * types: dequantizers that follow the published block formats bit for bit,
 * and least-squares quantizers (see quant.h for the rules they follow on
 * NaN, infinities and out-of-range values).
 *
 * Every quantizer first scales its block by a power of two so that the
 * largest magnitude lies in [0.5, 1).  That scaling is exact, so the scale
 * searches below work on well-conditioned numbers whatever the input's
 * magnitude (1e30 or subnormal); the chosen scales are scaled back when they
 * are stored as halves.
 */
#include "internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "quant.h"

#define HALF_MAX 65504.0f
#define HALF_NAN ((hearth_f16)0x7e00)

/* ==========================================================================
 * Small numeric helpers
 * ========================================================================== */

/* NaN gives lo, so a value that reaches a float -> int conversion is
 * always in range. */
static inline float clamp_float(float v, float lo, float hi)
{
    return v > lo ? (v < hi ? v : hi) : lo;
}

/* Round to the nearest integer, ties to even, for |v| <= 2^22: adding
 * 1.5 * 2^23 leaves no fraction bits in the float's mantissa.  Callers clamp
 * first, so v is always small.  Where float expressions may be evaluated in
 * wider precision the trick does not hold and rintf() is used instead. */
static inline float round_small(float v)
{
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
    const float magic = 12582912.0f;
    return (v + magic) - magic;
#else
    return rintf(v);
#endif
}

/* The quantization level of v: clamp(round(v), lo, hi), as a float. */
static inline float level_of(float v, float lo, float hi)
{
    return round_small(clamp_float(v, lo, hi));
}

enum block_class { BLOCK_ZERO, BLOCK_FINITE, BLOCK_NONFINITE };

/* Classify a block and, when it is finite and not all zero, write it scaled
 * by 2^-e to xn, with e chosen so that max|xn| lies in [0.5, 1). */
static enum block_class normalise_block(const float *x, int n, float *xn, int *e_out)
{
    float amax = 0.0f;
    float probe = 0.0f; /* becomes NaN iff some x is NaN or infinite */
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        amax = a > amax ? a : amax;
        probe += x[i] * 0.0f;
    }
    if (probe != probe) return BLOCK_NONFINITE;
    if (amax == 0.0f) return BLOCK_ZERO;
    int e;
    (void)frexpf(amax, &e); /* amax = f * 2^e, f in [0.5, 1), e in -148..128 */
    /* 2^-e in two factors, neither of which overflows or goes subnormal;
     * multiplying by powers of two is exact unless the result underflows,
     * which only happens to values negligible beside the block's maximum. */
    const float f1 = ldexpf(1.0f, -e / 2);
    const float f2 = ldexpf(1.0f, -e - (-e / 2));
    for (int i = 0; i < n; i++) xn[i] = x[i] * f1 * f2;
    *e_out = e;
    return BLOCK_FINITE;
}

/* Store the normalised scale v (of a block normalised by 2^-e) as a half,
 * saturating at +-65504, and give back the normalised value actually
 * stored, which is what the final quants must be computed against. */
static hearth_f16 store_half(float v, int e, float *stored)
{
    float s = ldexpf(v, e);
    s = clamp_float(s, -HALF_MAX, HALF_MAX);
    hearth_f16 h = hearth_f32_to_f16(s);
    *stored = ldexpf(hearth_f16_to_f32(h), -e);
    return h;
}

/* Normalised scales below this are treated as zero: their inverses would
 * overflow, and they are 2^-126 of the block's largest value anyway. */
#define TINY_SCALE FLT_MIN

/* The signed element of largest magnitude (the first one on ties). */
static float signed_max(const float *x, int n)
{
    float m = 0.0f, amax = 0.0f;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            m = x[i];
        }
    }
    return m;
}

/* ==========================================================================
 * Scale searches (on normalised blocks, |x| < 1)
 * ========================================================================== */

/* Candidates per side of a search: the value mapped to the extreme level is
 * tried from one level inside it to a level and a half past it (clipping). */
#define FIT_STEPS 20
#define FIT_REFINE_ROUNDS 6

/* Symmetric levels, x ~ d * q with q = clamp(round(x / d), qlo, qhi).
 *
 * For fixed levels q the squared error is least at d = <x,q> / <q,q>, where
 * it equals <x,x> - <x,q>^2 / <q,q>; a candidate inverse scale is therefore
 * scored by <x,q>^2 / <q,q> (higher is better) and its d is that
 * least-squares value.  Returns the score; *d gets the scale. */
static double symmetric_candidate(const float *x, int n, float inv, float qlo, float qhi,
                                  float *d)
{
    float sxq = 0.0f, sqq = 0.0f;
    for (int i = 0; i < n; i++) {
        float q = level_of(x[i] * inv, qlo, qhi);
        sxq += x[i] * q;
        sqq += q * q;
    }
    if (sqq <= 0.0f) {
        *d = 0.0f;
        return 0.0;
    }
    *d = sxq / sqq;
    return (double)sxq * sxq / sqq;
}

/* The scale minimising sum (x - d q)^2 for levels qlo < 0 < qhi.  The
 * element of largest magnitude is mapped near either end of the range (the
 * sign of d decides which), then the best candidate is polished by
 * alternating rounding to the levels of d and refitting d, which never
 * increases the error (Lloyd's iteration restricted to a uniform grid). */
static float fit_symmetric(const float *x, int n, int qlo, int qhi)
{
    const float m = signed_max(x, n);
    if (fabsf(m) < TINY_SCALE) return 0.0f;
    double best = -1.0;
    float best_d = 0.0f;
    for (int side = 0; side < 2; side++) {
        /* side 0: m -> qlo (d has the opposite sign of m); side 1: m -> qhi */
        const float level = side == 0 ? (float)qlo : (float)qhi;
        const float mag = fabsf(level);
        for (int k = 0; k <= FIT_STEPS; k++) {
            float r = mag - 1.0f + 2.5f * (float)k / FIT_STEPS;
            float inv = (level < 0 ? -r : r) / m;
            float d;
            double score = symmetric_candidate(x, n, inv, (float)qlo, (float)qhi, &d);
            if (score > best) {
                best = score;
                best_d = d;
            }
        }
    }
    for (int round = 0; round < FIT_REFINE_ROUNDS && fabsf(best_d) >= TINY_SCALE; round++) {
        float d;
        double score = symmetric_candidate(x, n, 1.0f / best_d, (float)qlo, (float)qhi, &d);
        if (!(score > best)) break;
        best = score;
        best_d = d;
    }
    return best_d;
}

/* Affine levels, x ~ d * q + b with q = clamp(round((x - b) / d), 0, qmax)
 * and d > 0; with b_nonpositive also b <= 0 (the K-quants store -b as an
 * unsigned min).  The least-squares (d, b) for fixed q solve the 2x2 normal
 * equations; at that optimum the residual is orthogonal to q and to 1, so
 * the error is <x,x> - d <x,q> - b sum(x) and the score is
 * d <x,q> + b sum(x).  Returns the score, or -1 for an unusable candidate. */
static double affine_candidate(const float *x, int n, float inv, float offset, float qmax,
                               bool b_nonpositive, float sx, float *d_out, float *b_out)
{
    float sq = 0.0f, sqq = 0.0f, sxq = 0.0f;
    for (int i = 0; i < n; i++) {
        float q = level_of((x[i] - offset) * inv, 0.0f, qmax);
        sq += q;
        sqq += q * q;
        sxq += x[i] * q;
    }
    double det = (double)n * sqq - (double)sq * sq;
    if (!(det > 0.0)) return -1.0; /* all levels equal: no slope to fit */
    double d = ((double)n * sxq - (double)sq * sx) / det;
    double b = (sx - d * sq) / n;
    if (b_nonpositive && b > 0.0) {
        b = 0.0;
        d = (double)sxq / sqq;
    }
    if (!(d > 0.0)) return -1.0;
    *d_out = (float)d;
    *b_out = (float)b;
    return d * sxq + b * sx;
}

static void fit_affine(const float *x, int n, int qmax, bool b_nonpositive, float *d_out,
                       float *b_out)
{
    float lo = x[0], hi = x[0], sx = 0.0f;
    for (int i = 0; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
        sx += x[i];
    }
    if (b_nonpositive && lo > 0.0f) lo = 0.0f;
    /* The constant model (d = 0) is the fallback every candidate must beat. */
    float best_d = 0.0f, best_b = sx / n;
    if (b_nonpositive && best_b > 0.0f) best_b = 0.0f;
    double best = (double)best_b * sx;
    if (hi - lo >= TINY_SCALE) {
        for (int k = 0; k <= FIT_STEPS; k++) {
            float r = (float)qmax - 1.0f + 2.5f * (float)k / FIT_STEPS;
            float d, b;
            double score = affine_candidate(x, n, r / (hi - lo), lo, (float)qmax,
                                            b_nonpositive, sx, &d, &b);
            if (score > best) {
                best = score;
                best_d = d;
                best_b = b;
            }
        }
        for (int round = 0; round < FIT_REFINE_ROUNDS && best_d >= TINY_SCALE; round++) {
            float d, b;
            double score = affine_candidate(x, n, 1.0f / best_d, best_b, (float)qmax,
                                            b_nonpositive, sx, &d, &b);
            if (!(score > best)) break;
            best = score;
            best_d = d;
            best_b = b;
        }
    }
    *d_out = best_d;
    *b_out = best_b;
}

/* Levels of x for the stored symmetric scale d; the squared error. */
static float quantize_symmetric(const float *x, int n, float d, int qlo, int qhi, int8_t *q)
{
    float err = 0.0f;
    if (!(fabsf(d) >= TINY_SCALE)) {
        for (int i = 0; i < n; i++) {
            q[i] = 0;
            err += x[i] * x[i];
        }
        return err;
    }
    const float inv = 1.0f / d;
    for (int i = 0; i < n; i++) {
        float l = level_of(x[i] * inv, (float)qlo, (float)qhi);
        float r = x[i] - d * l;
        q[i] = (int8_t)l;
        err += r * r;
    }
    return err;
}

/* Levels of x for the stored affine pair: x ~ step * q - shift (the K-quant
 * form; the legacy b is -shift).  The squared error. */
static float quantize_affine(const float *x, int n, float step, float shift, int qmax,
                             uint8_t *q)
{
    float err = 0.0f;
    if (!(step >= TINY_SCALE)) {
        for (int i = 0; i < n; i++) {
            float r = x[i] + shift;
            q[i] = 0;
            err += r * r;
        }
        return err;
    }
    const float inv = 1.0f / step;
    for (int i = 0; i < n; i++) {
        float l = level_of((x[i] + shift) * inv, 0.0f, (float)qmax);
        float r = x[i] - (step * l - shift);
        q[i] = (uint8_t)l;
        err += r * r;
    }
    return err;
}

/* ==========================================================================
 * Two-level searches of the K-quants
 *
 * A super-block of 256 has one or two half scales and per sub-block small
 * integer scales (and mins).  After fitting each sub-block freely, the
 * super-block scale maps the largest sub-block scale to the top integer;
 * then, in turn: every sub-block picks the integer scale (and min) near its
 * ideal that gives the least error with its levels re-rounded, and the
 * super-block scales are refitted by least squares to those integers.
 * ========================================================================== */

#define KQ_SUB_MAX 16     /* most sub-blocks in a super-block */
#define KQ_ROUNDS 3       /* integer choice / refit alternations */

struct kq_affine_layout {
    int sub_n;   /* elements per sub-block */
    int qmax;    /* levels 0..qmax */
    int smax;    /* integer scales and mins 0..smax */
};

struct kq_affine_block {
    uint8_t q[QK_K];
    uint8_t scale[KQ_SUB_MAX];
    uint8_t min[KQ_SUB_MAX];
    hearth_f16 d, dmin;
};

/* For stored super-block scales (dh, mh, normalised), choose each
 * sub-block's integer scale and min; the total squared error. */
static float kq_affine_choose(const float *x, const struct kq_affine_layout *lay,
                              const float *ideal_scale, const float *ideal_min, float dh,
                              float mh, struct kq_affine_block *out)
{
    const int n_sub = QK_K / lay->sub_n;
    float total = 0.0f;
    uint8_t trial[32];
    for (int j = 0; j < n_sub; j++) {
        const float *xs = x + j * lay->sub_n;
        int s0 = dh > 0.0f ? (int)level_of(ideal_scale[j] / dh, 0.0f, (float)lay->smax) : 0;
        int m0 = mh > 0.0f ? (int)level_of(ideal_min[j] / mh, 0.0f, (float)lay->smax) : 0;
        float best = INFINITY;
        for (int s = s0 - 1; s <= s0 + 1; s++) {
            if (s < 0 || s > lay->smax || (s != s0 && dh == 0.0f)) continue;
            for (int m = m0 - 1; m <= m0 + 1; m++) {
                if (m < 0 || m > lay->smax || (m != m0 && mh == 0.0f)) continue;
                float err = quantize_affine(xs, lay->sub_n, dh * (float)s, mh * (float)m,
                                            lay->qmax, trial);
                if (err < best) {
                    best = err;
                    out->scale[j] = (uint8_t)s;
                    out->min[j] = (uint8_t)m;
                    memcpy(out->q + j * lay->sub_n, trial, (size_t)lay->sub_n);
                }
            }
        }
        total += best;
    }
    return total;
}

/* Least-squares super-block scales for fixed integers: minimise
 * sum (x - d A + dmin B)^2 with A = scale * q and B = min (2x2 normal
 * equations).  Returns false when there is nothing sensible to fit. */
static bool kq_affine_refit(const float *x, const struct kq_affine_layout *lay,
                            const struct kq_affine_block *blk, float *d, float *dmin)
{
    double saa = 0, sab = 0, sbb = 0, sxa = 0, sxb = 0;
    for (int i = 0; i < QK_K; i++) {
        const int j = i / lay->sub_n;
        double a = (double)blk->scale[j] * blk->q[i];
        double b = blk->min[j];
        saa += a * a;
        sab += a * b;
        sbb += b * b;
        sxa += x[i] * a;
        sxb += x[i] * b;
    }
    double det = saa * sbb - sab * sab;
    double nd, nm;
    if (sbb > 0.0 && det > 1e-12 * saa * sbb) {
        nd = (sxa * sbb - sab * sxb) / det;
        nm = (sab * sxa - saa * sxb) / det;
        if (nm < 0.0) {
            nm = 0.0;
            nd = saa > 0.0 ? sxa / saa : 0.0;
        }
    } else {
        nm = *dmin;
        nd = saa > 0.0 ? (sxa + nm * sab) / saa : 0.0;
    }
    if (!(nd > 0.0)) return false;
    *d = (float)nd;
    *dmin = (float)nm;
    return true;
}

/* Quantize one super-block (raw values) into the affine K-quant form. */
static void kq_affine_quantize(const float *raw, const struct kq_affine_layout *lay,
                               struct kq_affine_block *out)
{
    float x[QK_K];
    int e;
    memset(out, 0, sizeof *out);
    switch (normalise_block(raw, QK_K, x, &e)) {
    case BLOCK_NONFINITE:
        out->d = out->dmin = HALF_NAN;
        return;
    case BLOCK_ZERO:
        return;
    case BLOCK_FINITE:
        break;
    }
    const int n_sub = QK_K / lay->sub_n;
    float ideal_scale[KQ_SUB_MAX], ideal_min[KQ_SUB_MAX];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < n_sub; j++) {
        float b;
        fit_affine(x + j * lay->sub_n, lay->sub_n, lay->qmax, true, &ideal_scale[j], &b);
        ideal_min[j] = -b;
        max_scale = HEARTH_MAX(max_scale, ideal_scale[j]);
        max_min = HEARTH_MAX(max_min, ideal_min[j]);
    }
    float d = max_scale / (float)lay->smax, dmin = max_min / (float)lay->smax;
    struct kq_affine_block trial;
    float best = INFINITY;
    for (int round = 0; round < KQ_ROUNDS; round++) {
        float dh, mh;
        trial.d = store_half(d, e, &dh);
        trial.dmin = store_half(dmin, e, &mh);
        float err = kq_affine_choose(x, lay, ideal_scale, ideal_min, dh, mh, &trial);
        if (err < best) {
            best = err;
            *out = trial;
        }
        if (!kq_affine_refit(x, lay, &trial, &d, &dmin)) break;
    }
}

struct kq_symmetric_layout {
    int qlo, qhi;     /* levels */
    int slo, shi;     /* integer sub-block scales */
};

/* Both symmetric K-quants (Q3_K, Q6_K) have 16 sub-blocks of 16. */
#define KQ_SYM_SUB 16

struct kq_symmetric_block {
    int8_t q[QK_K];
    int8_t scale[KQ_SYM_SUB];
    hearth_f16 d;
};

static float kq_symmetric_choose(const float *x, const struct kq_symmetric_layout *lay,
                                 const float *ideal, float dh, struct kq_symmetric_block *out)
{
    float total = 0.0f;
    int8_t trial[KQ_SYM_SUB];
    for (int j = 0; j < QK_K / KQ_SYM_SUB; j++) {
        const float *xs = x + j * KQ_SYM_SUB;
        int s0 = dh != 0.0f ? (int)level_of(ideal[j] / dh, (float)lay->slo, (float)lay->shi) : 0;
        float best = INFINITY;
        for (int s = s0 - 1; s <= s0 + 1; s++) {
            if (s < lay->slo || s > lay->shi || (s != s0 && dh == 0.0f)) continue;
            float err = quantize_symmetric(xs, KQ_SYM_SUB, dh * (float)s, lay->qlo, lay->qhi,
                                           trial);
            if (err < best) {
                best = err;
                out->scale[j] = (int8_t)s;
                memcpy(out->q + j * KQ_SYM_SUB, trial, sizeof trial);
            }
        }
        total += best;
    }
    return total;
}

static void kq_symmetric_quantize(const float *raw, const struct kq_symmetric_layout *lay,
                                  struct kq_symmetric_block *out)
{
    float x[QK_K];
    int e;
    memset(out, 0, sizeof *out);
    switch (normalise_block(raw, QK_K, x, &e)) {
    case BLOCK_NONFINITE:
        out->d = HALF_NAN;
        return;
    case BLOCK_ZERO:
        return;
    case BLOCK_FINITE:
        break;
    }
    float ideal[KQ_SYM_SUB];
    for (int j = 0; j < QK_K / KQ_SYM_SUB; j++)
        ideal[j] = fit_symmetric(x + j * KQ_SYM_SUB, KQ_SYM_SUB, lay->qlo, lay->qhi);
    const float m = signed_max(ideal, KQ_SYM_SUB);
    float best = INFINITY;
    /* The largest sub-block scale goes to either end of the integer range. */
    for (int side = 0; side < 2; side++) {
        float d = m / (float)(side == 0 ? lay->slo : lay->shi);
        struct kq_symmetric_block trial;
        for (int round = 0; round < KQ_ROUNDS; round++) {
            float dh;
            trial.d = store_half(d, e, &dh);
            float err = kq_symmetric_choose(x, lay, ideal, dh, &trial);
            if (err < best) {
                best = err;
                *out = trial;
            }
            /* refit d = <x,A> / <A,A> with A = scale * q */
            double sxa = 0, saa = 0;
            for (int i = 0; i < QK_K; i++) {
                double a = (double)trial.scale[i / KQ_SYM_SUB] * trial.q[i];
                sxa += x[i] * a;
                saa += a * a;
            }
            if (!(saa > 0.0)) break;
            d = (float)(sxa / saa);
        }
    }
}

/* ==========================================================================
 * Plain float types
 * ========================================================================== */

void f32_dequantize_row(const float *src, float *dst, int64_t n)
{
    memmove(dst, src, (size_t)n * sizeof *dst);
}

void f32_quantize_row(const float *src, float *dst, int64_t n)
{
    memmove(dst, src, (size_t)n * sizeof *dst);
}

void f16_dequantize_row(const hearth_f16 *src, float *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = hearth_f16_to_f32(src[i]);
}

void f16_quantize_row(const float *src, hearth_f16 *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = hearth_f32_to_f16(src[i]);
}

void bf16_dequantize_row(const hearth_bf16 *src, float *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = hearth_bf16_to_f32(src[i]);
}

void bf16_quantize_row(const float *src, hearth_bf16 *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = hearth_f32_to_bf16(src[i]);
}

/* ==========================================================================
 * Legacy formats (32 elements per block)
 * ========================================================================== */

/* The 32 high bits of Q5_0/Q5_1, stored little-endian. */
static inline uint32_t load_qh32(const uint8_t qh[4])
{
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 |
           (uint32_t)qh[3] << 24;
}

static inline void store_qh32(uint8_t qh[4], uint32_t v)
{
    for (int i = 0; i < 4; i++) qh[i] = (uint8_t)(v >> (8 * i));
}

/* Symmetric legacy block: the half scale and the levels (unbiased). */
static hearth_f16 legacy_symmetric_block(const float *raw, int qlo, int qhi, int8_t q[32])
{
    float x[32], dh;
    int e;
    switch (normalise_block(raw, 32, x, &e)) {
    case BLOCK_NONFINITE:
        memset(q, 0, 32);
        return HALF_NAN;
    case BLOCK_ZERO:
        memset(q, 0, 32);
        return 0;
    case BLOCK_FINITE:
        break;
    }
    hearth_f16 d = store_half(fit_symmetric(x, 32, qlo, qhi), e, &dh);
    quantize_symmetric(x, 32, dh, qlo, qhi, q);
    return d;
}

/* Affine legacy block x = d q + m: the half d and m and the levels. */
static void legacy_affine_block(const float *raw, int qmax, hearth_f16 *d, hearth_f16 *m,
                                uint8_t q[32])
{
    float x[32], dn, bn, dh, bh;
    int e;
    memset(q, 0, 32);
    switch (normalise_block(raw, 32, x, &e)) {
    case BLOCK_NONFINITE:
        *d = *m = HALF_NAN;
        return;
    case BLOCK_ZERO:
        *d = *m = 0;
        return;
    case BLOCK_FINITE:
        break;
    }
    fit_affine(x, 32, qmax, false, &dn, &bn);
    *d = store_half(dn, e, &dh);
    *m = store_half(bn, e, &bh);
    quantize_affine(x, 32, dh, -bh, qmax, q);
}

void q4_0_dequantize_row(const block_q4_0 *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK4_0; b++, dst += QK4_0) {
        const float d = hearth_f16_to_f32(src[b].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            dst[j] = (float)((src[b].qs[j] & 0x0f) - 8) * d;
            dst[j + QK4_0 / 2] = (float)((src[b].qs[j] >> 4) - 8) * d;
        }
    }
}

void q4_0_quantize_row(const float *src, block_q4_0 *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK4_0; b++, src += QK4_0) {
        int8_t q[QK4_0];
        dst[b].d = legacy_symmetric_block(src, -8, 7, q);
        for (int j = 0; j < QK4_0 / 2; j++)
            dst[b].qs[j] = (uint8_t)((q[j] + 8) | (q[j + QK4_0 / 2] + 8) << 4);
    }
}

void q4_1_dequantize_row(const block_q4_1 *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK4_1; b++, dst += QK4_1) {
        const float d = hearth_f16_to_f32(src[b].d);
        const float m = hearth_f16_to_f32(src[b].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            dst[j] = (float)(src[b].qs[j] & 0x0f) * d + m;
            dst[j + QK4_1 / 2] = (float)(src[b].qs[j] >> 4) * d + m;
        }
    }
}

void q4_1_quantize_row(const float *src, block_q4_1 *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK4_1; b++, src += QK4_1) {
        uint8_t q[QK4_1];
        legacy_affine_block(src, 15, &dst[b].d, &dst[b].m, q);
        for (int j = 0; j < QK4_1 / 2; j++)
            dst[b].qs[j] = (uint8_t)(q[j] | q[j + QK4_1 / 2] << 4);
    }
}

/* Q5: element j < 16 in the low nibble of qs[j] with its fifth bit in bit j
 * of qh; element j + 16 in the high nibble with its fifth bit in bit j + 16. */
static void q5_unpack(const uint8_t qs[16], const uint8_t qh_bytes[4], int q[32])
{
    const uint32_t qh = load_qh32(qh_bytes);
    for (int j = 0; j < 16; j++) {
        q[j] = (qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
        q[j + 16] = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
    }
}

static void q5_pack(const uint8_t q[32], uint8_t qs[16], uint8_t qh_bytes[4])
{
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 0x0f) | (q[j + 16] & 0x0f) << 4);
        qh |= (uint32_t)(q[j] >> 4) << j | (uint32_t)(q[j + 16] >> 4) << (j + 16);
    }
    store_qh32(qh_bytes, qh);
}

void q5_0_dequantize_row(const block_q5_0 *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK5_0; b++, dst += QK5_0) {
        const float d = hearth_f16_to_f32(src[b].d);
        int q[QK5_0];
        q5_unpack(src[b].qs, src[b].qh, q);
        for (int j = 0; j < QK5_0; j++) dst[j] = (float)(q[j] - 16) * d;
    }
}

void q5_0_quantize_row(const float *src, block_q5_0 *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK5_0; b++, src += QK5_0) {
        int8_t q[QK5_0];
        uint8_t biased[QK5_0];
        dst[b].d = legacy_symmetric_block(src, -16, 15, q);
        for (int j = 0; j < QK5_0; j++) biased[j] = (uint8_t)(q[j] + 16);
        q5_pack(biased, dst[b].qs, dst[b].qh);
    }
}

void q5_1_dequantize_row(const block_q5_1 *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK5_1; b++, dst += QK5_1) {
        const float d = hearth_f16_to_f32(src[b].d);
        const float m = hearth_f16_to_f32(src[b].m);
        int q[QK5_1];
        q5_unpack(src[b].qs, src[b].qh, q);
        for (int j = 0; j < QK5_1; j++) dst[j] = (float)q[j] * d + m;
    }
}

void q5_1_quantize_row(const float *src, block_q5_1 *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK5_1; b++, src += QK5_1) {
        uint8_t q[QK5_1];
        legacy_affine_block(src, 31, &dst[b].d, &dst[b].m, q);
        q5_pack(q, dst[b].qs, dst[b].qh);
    }
}

/* The shared 8-bit rule of Q8_0 and Q8_1 (see quant.h); returns the stored
 * half scale.  The arithmetic is kept exactly as the common rule has it
 * (inverse of the unrounded d, roundf) so the bytes match other tools. */
static hearth_f16 q8_block(const float *x, int8_t qs[32])
{
    float amax = 0.0f, probe = 0.0f;
    for (int j = 0; j < 32; j++) {
        float a = fabsf(x[j]);
        amax = a > amax ? a : amax;
        probe += x[j] * 0.0f;
    }
    memset(qs, 0, 32);
    if (probe != probe) return HALF_NAN;
    const float d = amax / 127.0f;
    hearth_f16 dh = hearth_f32_to_f16(d);
    float inv = d > 0.0f ? 1.0f / d : 0.0f;
    if ((dh & 0x7fff) == 0x7c00) { /* d overflows a half: saturate */
        dh = hearth_f32_to_f16(HALF_MAX);
        inv = 1.0f / HALF_MAX;
    }
    if (isinf(inv)) return dh; /* d subnormal in float: dh is 0 anyway */
    for (int j = 0; j < 32; j++) qs[j] = (int8_t)roundf(clamp_float(x[j] * inv, -127.0f, 127.0f));
    return dh;
}

void q8_0_dequantize_row(const block_q8_0 *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK8_0; b++, dst += QK8_0) {
        const float d = hearth_f16_to_f32(src[b].d);
        for (int j = 0; j < QK8_0; j++) dst[j] = (float)src[b].qs[j] * d;
    }
}

void q8_0_quantize_row(const float *src, block_q8_0 *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK8_0; b++, src += QK8_0) dst[b].d = q8_block(src, dst[b].qs);
}

void q8_1_dequantize_row(const block_q8_1 *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK8_1; b++, dst += QK8_1) {
        const float d = hearth_f16_to_f32(src[b].d);
        for (int j = 0; j < QK8_1; j++) dst[j] = (float)src[b].qs[j] * d;
    }
}

void q8_1_quantize_row(const float *src, block_q8_1 *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK8_1; b++, src += QK8_1) {
        dst[b].d = q8_block(src, dst[b].qs);
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) sum += dst[b].qs[j];
        /* NaN d gives a NaN s; a saturated d times at most 32 * 127 may
         * exceed a half, so s saturates too. */
        float s = hearth_f16_to_f32(dst[b].d) * (float)sum;
        if (s == s) s = clamp_float(s, -HALF_MAX, HALF_MAX);
        dst[b].s = hearth_f32_to_f16(s);
    }
}

/* ==========================================================================
 * K-quants (256-element super-blocks)
 *
 * Element e of a super-block sits, per format:
 *   Q2_K, Q3_K  2-bit field (e % 128) / 32 of qs[32 * (e / 128) + e % 32];
 *               Q3_K's third bit is bit e / 32 of hmask[e % 32]
 *   Q4_K, Q5_K  nibble (e / 32) % 2 of qs[32 * (e / 64) + e % 32];
 *               Q5_K's fifth bit is bit e / 32 of qh[e % 32]
 *   Q6_K        nibble k / 2 of ql[64 * (e / 128) + 32 * (k % 2) + e % 32],
 *               high 2 bits in field k of qh[32 * (e / 128) + e % 32],
 *               where k = (e % 128) / 32
 * and uses sub-block scale e / 16 (e / 32 for Q4_K and Q5_K).
 * ========================================================================== */

void q4k_unpack_scales(const uint8_t p[K_SCALE_SIZE], uint8_t scale[8], uint8_t min[8])
{
    /* Sub-blocks 0-3: 6 bits in bytes 0-3 (scale) and 4-7 (min).  Sub-blocks
     * 4-7: low 4 bits in the nibbles of bytes 8-11, high 2 bits in the top
     * bits of bytes 0-3 (scale) and 4-7 (min). */
    for (int j = 0; j < 4; j++) {
        scale[j] = p[j] & 63;
        min[j] = p[j + 4] & 63;
        scale[j + 4] = (uint8_t)((p[j + 8] & 0x0f) | (p[j] >> 6) << 4);
        min[j + 4] = (uint8_t)((p[j + 8] >> 4) | (p[j + 4] >> 6) << 4);
    }
}

static void q4k_pack_scales(const uint8_t scale[8], const uint8_t min[8],
                            uint8_t p[K_SCALE_SIZE])
{
    for (int j = 0; j < 4; j++) {
        p[j] = (uint8_t)(scale[j] | (scale[j + 4] >> 4) << 6);
        p[j + 4] = (uint8_t)(min[j] | (min[j + 4] >> 4) << 6);
        p[j + 8] = (uint8_t)((scale[j + 4] & 0x0f) | (min[j + 4] & 0x0f) << 4);
    }
}

void q3k_unpack_scales(const uint8_t p[12], int8_t scale[16])
{
    /* Low 4 bits: scales 0-7 in the low nibbles of bytes 0-7, scales 8-15
     * in their high nibbles.  High 2 bits of scale k: field k / 4 of byte
     * 8 + k % 4.  The stored 6-bit value is biased by 32. */
    for (int k = 0; k < 16; k++) {
        int low = k < 8 ? p[k] & 0x0f : p[k - 8] >> 4;
        int high = (p[8 + k % 4] >> (2 * (k / 4))) & 3;
        scale[k] = (int8_t)((low | high << 4) - 32);
    }
}

static void q3k_pack_scales(const int8_t scale[16], uint8_t p[12])
{
    memset(p, 0, 12);
    for (int k = 0; k < 16; k++) {
        int v = scale[k] + 32;
        p[k % 8] |= (uint8_t)((v & 0x0f) << (k < 8 ? 0 : 4));
        p[8 + k % 4] |= (uint8_t)((v >> 4) << (2 * (k / 4)));
    }
}

void q2k_dequantize_row(const block_q2_K *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK_K; b++, dst += QK_K) {
        const block_q2_K *x = &src[b];
        const float d = hearth_f16_to_f32(x->d), dmin = hearth_f16_to_f32(x->dmin);
        for (int c = 0; c < 2; c++)
            for (int k = 0; k < 4; k++)
                for (int h = 0; h < 2; h++) {
                    const int sub = 8 * c + 2 * k + h;
                    const float dl = d * (float)(x->scales[sub] & 0x0f);
                    const float ml = dmin * (float)(x->scales[sub] >> 4);
                    const uint8_t *q = x->qs + 32 * c + 16 * h;
                    float *y = dst + 16 * sub;
                    for (int l = 0; l < 16; l++) y[l] = dl * (float)((q[l] >> (2 * k)) & 3) - ml;
                }
    }
}

void q2k_quantize_row(const float *src, block_q2_K *dst, int64_t n)
{
    static const struct kq_affine_layout lay = {16, 3, 15};
    struct kq_affine_block blk;
    for (int64_t b = 0; b < n / QK_K; b++, src += QK_K) {
        block_q2_K *y = &dst[b];
        kq_affine_quantize(src, &lay, &blk);
        y->d = blk.d;
        y->dmin = blk.dmin;
        for (int j = 0; j < 16; j++) y->scales[j] = (uint8_t)(blk.scale[j] | blk.min[j] << 4);
        memset(y->qs, 0, sizeof y->qs);
        for (int e = 0; e < QK_K; e++)
            y->qs[32 * (e / 128) + e % 32] |= (uint8_t)(blk.q[e] << (2 * ((e % 128) / 32)));
    }
}

void q3k_dequantize_row(const block_q3_K *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK_K; b++, dst += QK_K) {
        const block_q3_K *x = &src[b];
        const float d = hearth_f16_to_f32(x->d);
        int8_t scale[16];
        q3k_unpack_scales(x->scales, scale);
        for (int c = 0; c < 2; c++)
            for (int k = 0; k < 4; k++)
                for (int h = 0; h < 2; h++) {
                    const int sub = 8 * c + 2 * k + h;
                    const int bit = 4 * c + k;
                    const float dl = d * (float)scale[sub];
                    const uint8_t *q = x->qs + 32 * c + 16 * h;
                    const uint8_t *hm = x->hmask + 16 * h;
                    float *y = dst + 16 * sub;
                    for (int l = 0; l < 16; l++)
                        y[l] = dl * (float)(((q[l] >> (2 * k)) & 3) - 4 + 4 * ((hm[l] >> bit) & 1));
                }
    }
}

void q3k_quantize_row(const float *src, block_q3_K *dst, int64_t n)
{
    static const struct kq_symmetric_layout lay = {-4, 3, -32, 31};
    struct kq_symmetric_block blk;
    for (int64_t b = 0; b < n / QK_K; b++, src += QK_K) {
        block_q3_K *y = &dst[b];
        kq_symmetric_quantize(src, &lay, &blk);
        y->d = blk.d;
        q3k_pack_scales(blk.scale, y->scales);
        memset(y->qs, 0, sizeof y->qs);
        memset(y->hmask, 0, sizeof y->hmask);
        for (int e = 0; e < QK_K; e++) {
            const int v = blk.q[e] + 4; /* 0..7 */
            y->qs[32 * (e / 128) + e % 32] |= (uint8_t)((v & 3) << (2 * ((e % 128) / 32)));
            y->hmask[e % 32] |= (uint8_t)((v >> 2) << (e / 32));
        }
    }
}

void q4k_dequantize_row(const block_q4_K *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK_K; b++, dst += QK_K) {
        const block_q4_K *x = &src[b];
        const float d = hearth_f16_to_f32(x->d), dmin = hearth_f16_to_f32(x->dmin);
        uint8_t scale[8], min[8];
        q4k_unpack_scales(x->scales, scale, min);
        for (int c = 0; c < 4; c++) {
            const float d1 = d * (float)scale[2 * c], m1 = dmin * (float)min[2 * c];
            const float d2 = d * (float)scale[2 * c + 1], m2 = dmin * (float)min[2 * c + 1];
            const uint8_t *q = x->qs + 32 * c;
            float *y = dst + 64 * c;
            for (int l = 0; l < 32; l++) y[l] = d1 * (float)(q[l] & 0x0f) - m1;
            for (int l = 0; l < 32; l++) y[l + 32] = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

void q4k_quantize_row(const float *src, block_q4_K *dst, int64_t n)
{
    static const struct kq_affine_layout lay = {32, 15, 63};
    struct kq_affine_block blk;
    for (int64_t b = 0; b < n / QK_K; b++, src += QK_K) {
        block_q4_K *y = &dst[b];
        kq_affine_quantize(src, &lay, &blk);
        y->d = blk.d;
        y->dmin = blk.dmin;
        q4k_pack_scales(blk.scale, blk.min, y->scales);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                y->qs[32 * c + l] = (uint8_t)(blk.q[64 * c + l] | blk.q[64 * c + 32 + l] << 4);
    }
}

void q5k_dequantize_row(const block_q5_K *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK_K; b++, dst += QK_K) {
        const block_q5_K *x = &src[b];
        const float d = hearth_f16_to_f32(x->d), dmin = hearth_f16_to_f32(x->dmin);
        uint8_t scale[8], min[8];
        q4k_unpack_scales(x->scales, scale, min);
        for (int c = 0; c < 4; c++) {
            const float d1 = d * (float)scale[2 * c], m1 = dmin * (float)min[2 * c];
            const float d2 = d * (float)scale[2 * c + 1], m2 = dmin * (float)min[2 * c + 1];
            const uint8_t *q = x->qs + 32 * c;
            float *y = dst + 64 * c;
            for (int l = 0; l < 32; l++)
                y[l] = d1 * (float)((q[l] & 0x0f) | ((x->qh[l] >> (2 * c)) & 1) << 4) - m1;
            for (int l = 0; l < 32; l++)
                y[l + 32] = d2 * (float)((q[l] >> 4) | ((x->qh[l] >> (2 * c + 1)) & 1) << 4) - m2;
        }
    }
}

void q5k_quantize_row(const float *src, block_q5_K *dst, int64_t n)
{
    static const struct kq_affine_layout lay = {32, 31, 63};
    struct kq_affine_block blk;
    for (int64_t b = 0; b < n / QK_K; b++, src += QK_K) {
        block_q5_K *y = &dst[b];
        kq_affine_quantize(src, &lay, &blk);
        y->d = blk.d;
        y->dmin = blk.dmin;
        q4k_pack_scales(blk.scale, blk.min, y->scales);
        memset(y->qh, 0, sizeof y->qh);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                y->qs[32 * c + l] =
                    (uint8_t)((blk.q[64 * c + l] & 0x0f) | (blk.q[64 * c + 32 + l] & 0x0f) << 4);
        for (int e = 0; e < QK_K; e++) y->qh[e % 32] |= (uint8_t)((blk.q[e] >> 4) << (e / 32));
    }
}

void q6k_dequantize_row(const block_q6_K *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK_K; b++, dst += QK_K) {
        const block_q6_K *x = &src[b];
        const float d = hearth_f16_to_f32(x->d);
        for (int c = 0; c < 2; c++)
            for (int k = 0; k < 4; k++)
                for (int h = 0; h < 2; h++) {
                    const int sub = 8 * c + 2 * k + h;
                    const float dl = d * (float)x->scales[sub];
                    const uint8_t *ql = x->ql + 64 * c + 32 * (k % 2) + 16 * h;
                    const uint8_t *qh = x->qh + 32 * c + 16 * h;
                    float *y = dst + 16 * sub;
                    for (int l = 0; l < 16; l++) {
                        int q = ((ql[l] >> (4 * (k / 2))) & 0x0f) | ((qh[l] >> (2 * k)) & 3) << 4;
                        y[l] = dl * (float)(q - 32);
                    }
                }
    }
}

void q6k_quantize_row(const float *src, block_q6_K *dst, int64_t n)
{
    static const struct kq_symmetric_layout lay = {-32, 31, -128, 127};
    struct kq_symmetric_block blk;
    for (int64_t b = 0; b < n / QK_K; b++, src += QK_K) {
        block_q6_K *y = &dst[b];
        kq_symmetric_quantize(src, &lay, &blk);
        y->d = blk.d;
        memcpy(y->scales, blk.scale, sizeof y->scales);
        memset(y->ql, 0, sizeof y->ql);
        memset(y->qh, 0, sizeof y->qh);
        for (int e = 0; e < QK_K; e++) {
            const int v = blk.q[e] + 32; /* 0..63 */
            const int c = e / 128, k = (e % 128) / 32, l = e % 32;
            y->ql[64 * c + 32 * (k % 2) + l] |= (uint8_t)((v & 0x0f) << (4 * (k / 2)));
            y->qh[32 * c + l] |= (uint8_t)((v >> 4) << (2 * k));
        }
    }
}

void q8k_dequantize_row(const block_q8_K *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK_K; b++, dst += QK_K)
        for (int j = 0; j < QK_K; j++) dst[j] = src[b].d * (float)src[b].qs[j];
}

void q8k_quantize_row(const float *src, block_q8_K *dst, int64_t n)
{
    float x[QK_K];
    for (int64_t b = 0; b < n / QK_K; b++, src += QK_K) {
        block_q8_K *y = &dst[b];
        int e;
        memset(y->qs, 0, sizeof y->qs);
        memset(y->bsums, 0, sizeof y->bsums);
        switch (normalise_block(src, QK_K, x, &e)) {
        case BLOCK_NONFINITE:
            y->d = NAN;
            continue;
        case BLOCK_ZERO:
            y->d = 0.0f;
            continue;
        case BLOCK_FINITE:
            break;
        }
        float amax = 0.0f;
        for (int j = 0; j < QK_K; j++) amax = HEARTH_MAX(amax, fabsf(x[j]));
        /* amax / 127 may round up so that 127 d exceeds amax: near FLT_MAX
         * that top level would dequantize to infinity, so step d down. */
        float d = amax / 127.0f;
        if (isinf(ldexpf(d * 127.0f, e))) d = nextafterf(d, 0.0f);
        /* d may go subnormal (and lose bits) for subnormal input: quantize
         * against the value actually stored. */
        y->d = ldexpf(d, e);
        const float dn = ldexpf(y->d, -e);
        if (!(dn >= TINY_SCALE)) continue;
        const float inv = 1.0f / dn;
        for (int j = 0; j < QK_K; j++)
            y->qs[j] = (int8_t)level_of(x[j] * inv, -127.0f, 127.0f);
        for (int g = 0; g < QK_K / 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += y->qs[16 * g + j];
            y->bsums[g] = (int16_t)sum;
        }
    }
}

/* ==========================================================================
 * Dispatch
 * ========================================================================== */

/* ==========================================================================
 * MXFP4
 * ========================================================================== */

const int8_t mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

void mxfp4_dequantize_row(const block_mxfp4 *src, float *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK_MXFP4; b++, dst += QK_MXFP4) {
        const float d = mxfp4_scale(src[b].e);
        for (int j = 0; j < QK_MXFP4 / 2; j++) {
            dst[j] = (float)mxfp4_values[src[b].qs[j] & 0x0f] * d;
            dst[j + QK_MXFP4 / 2] = (float)mxfp4_values[src[b].qs[j] >> 4] * d;
        }
    }
}

/* The doubled E2M1 magnitudes of codes 0-7, and the midpoints between
 * neighbours. */
static const float mxfp4_levels[8] = {0, 1, 2, 3, 4, 6, 8, 12};
static const float mxfp4_mids[7] = {0.5f, 1.5f, 2.5f, 3.5f, 5.0f, 7.0f, 10.0f};

/* The code of the level nearest x, d the block's scale (the smaller
 * magnitude on a tie, so +0 rather than -0), and in *err its squared
 * error. */
static int mxfp4_nearest(float x, float d, float *err)
{
    const float t = fabsf(x) / d; /* exact: d is a power of two */
    int k = 0;
    while (k < 7 && t > mxfp4_mids[k]) k++;
    const float e = (t - mxfp4_levels[k]) * d;
    *err = e * e;
    return x < 0.0f && k > 0 ? 8 + k : k;
}

void mxfp4_quantize_row(const float *src, block_mxfp4 *dst, int64_t n)
{
    for (int64_t b = 0; b < n / QK_MXFP4; b++, src += QK_MXFP4) {
        float amax = 0.0f;
        bool finite = true;
        for (int j = 0; j < QK_MXFP4; j++) {
            if (!isfinite(src[j])) finite = false;
            else amax = fmaxf(amax, fabsf(src[j]));
        }
        memset(dst[b].qs, 0, sizeof dst[b].qs);
        if (!finite || amax == 0.0f) {
            dst[b].e = finite ? 0 : 0xff;
            continue;
        }
        /* 12 * 2^(e - 128) >= amax from e = c on: try c - 1 .. c + 1. */
        int p;
        (void)frexpf(amax / 12.0f, &p); /* amax / 12 in [2^(p-1), 2^p) */
        const int c = p + 128, lo = HEARTH_CLAMP(c - 1, 0, 252), hi = HEARTH_CLAMP(c + 1, 0, 252);
        int best_e = -1;
        double best = 0.0;
        for (int e = lo; e <= hi; e++) {
            const float d = mxfp4_scale((uint8_t)e);
            double sum = 0.0;
            for (int j = 0; j < QK_MXFP4; j++) {
                float err;
                (void)mxfp4_nearest(src[j], d, &err);
                sum += err;
            }
            if (best_e < 0 || sum < best) {
                best_e = e;
                best = sum;
            }
        }
        dst[b].e = (uint8_t)best_e;
        const float d = mxfp4_scale(dst[b].e);
        for (int j = 0; j < QK_MXFP4 / 2; j++) {
            float err;
            const int q0 = mxfp4_nearest(src[j], d, &err);
            const int q1 = mxfp4_nearest(src[j + QK_MXFP4 / 2], d, &err);
            dst[b].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

static bool row_length_ok(hearth_type type, int64_t n)
{
    const int64_t block = hearth_type_block_elems(type);
    return block > 0 && n >= 0 && n % block == 0;
}

bool quant_dequantize_row(hearth_type type, const void *src, float *dst, int64_t n)
{
    if (!row_length_ok(type, n)) return false;
    switch (type) {
    case HEARTH_TYPE_F32: f32_dequantize_row(src, dst, n); return true;
    case HEARTH_TYPE_F16: f16_dequantize_row(src, dst, n); return true;
    case HEARTH_TYPE_BF16: bf16_dequantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q4_0: q4_0_dequantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q4_1: q4_1_dequantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q5_0: q5_0_dequantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q5_1: q5_1_dequantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q8_0: q8_0_dequantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q8_1: q8_1_dequantize_row(src, dst, n); return true;
    case HEARTH_TYPE_MXFP4: mxfp4_dequantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q2_K: q2k_dequantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q3_K: q3k_dequantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q4_K: q4k_dequantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q5_K: q5k_dequantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q6_K: q6k_dequantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q8_K: q8k_dequantize_row(src, dst, n); return true;
    default: return false;
    }
}

bool quant_quantize_row(hearth_type type, const float *src, void *dst, int64_t n)
{
    if (!row_length_ok(type, n)) return false;
    switch (type) {
    case HEARTH_TYPE_F32: f32_quantize_row(src, dst, n); return true;
    case HEARTH_TYPE_F16: f16_quantize_row(src, dst, n); return true;
    case HEARTH_TYPE_BF16: bf16_quantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q4_0: q4_0_quantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q4_1: q4_1_quantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q5_0: q5_0_quantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q5_1: q5_1_quantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q8_0: q8_0_quantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q8_1: q8_1_quantize_row(src, dst, n); return true;
    case HEARTH_TYPE_MXFP4: mxfp4_quantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q2_K: q2k_quantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q3_K: q3k_quantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q4_K: q4k_quantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q5_K: q5k_quantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q6_K: q6k_quantize_row(src, dst, n); return true;
    case HEARTH_TYPE_Q8_K: q8k_quantize_row(src, dst, n); return true;
    default: return false;
    }
}

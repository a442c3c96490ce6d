/*
 * speculate.c -- prompt-lookup drafts, the rejection rule's residual, the
 * expected gain of a draft and the step-cost fit (speculate.h).
 */
#include "speculate.h"

#include <math.h>
#include <string.h>

/* The least-squares line of f where its x's spread; false where they do
 * not (integer rows: a variance below SPEC_FIT_SPREAD is one x, and
 * rounding). */
#define SPEC_FIT_SPREAD 0.02

static bool fit_spread(const struct spec_fit *f, double *a, double *b)
{
    const double mx = f->x / f->w, my = f->y / f->w;
    const double var = f->xx / f->w - mx * mx;
    if (!(var > SPEC_FIT_SPREAD)) return false;
    double slope = (f->xy / f->w - mx * my) / var;
    if (slope < 0.0) slope = 0.0;
    double icpt = my - slope * mx;
    if (icpt < 0.0) {
        /* a line through the origin */
        icpt = 0.0;
        slope = f->xx > 0.0 ? f->xy / f->xx : 0.0;
    }
    *a = icpt;
    *b = slope;
    return true;
}

void spec_fit_add(struct spec_fit *f, double x, double y)
{
    const double d = SPEC_FIT_DECAY;
    f->w = f->w * d + 1.0;
    f->x = f->x * d + x;
    f->y = f->y * d + y;
    f->xx = f->xx * d + x * x;
    f->xy = f->xy * d + x * y;
    double a, b;
    if (fit_spread(f, &a, &b)) f->rel = a > 0.0 ? HEARTH_MIN(b / a, 1e6) : 1e6;
}

bool spec_fit_line(const struct spec_fit *f, double *a, double *b)
{
    *a = *b = 0.0;
    if (f->w <= 0.0) return false;
    if (fit_spread(f, a, b)) return true;
    /* y = a (1 + rel x) at the mean */
    const double rel = f->rel > 0.0 ? f->rel : SPEC_ROW_PRIOR;
    *a = (f->y / f->w) / (1.0 + rel * f->x / f->w);
    *b = rel * *a;
    return true;
}

int32_t spec_lookup(const int32_t *tokens, int32_t n, int32_t ngram_max, int32_t k_max, int32_t *out)
{
    if (k_max <= 0 || n < 2) return 0;
    for (int32_t g = HEARTH_MIN(ngram_max, n - 1); g >= 1; g--) {
        const int32_t *suffix = tokens + n - g;
        /* the latest occurrence that ends before the suffix begins to
         * overlap its own end: start i with i + g < n */
        for (int32_t i = n - g - 1; i >= 0; i--) {
            if (tokens[i] != suffix[0] || memcmp(tokens + i, suffix, (size_t)g * sizeof *tokens) != 0) continue;
            const int32_t from = i + g;
            const int32_t k = HEARTH_MIN(k_max, n - from);
            memcpy(out, tokens + from, (size_t)k * sizeof *out);
            return k;
        }
    }
    return 0;
}

double spec_expected_tokens(double alpha, int32_t k)
{
    double e = 1.0, term = 1.0;
    for (int32_t i = 0; i < k; i++) {
        term *= alpha;
        e += term;
    }
    return e;
}

int32_t spec_best_length(double alpha, int32_t k_max, double time_per_token, double row_cost,
                         double draft_cost)
{
    int32_t best = 0;
    double best_saved = 0.0, e = 1.0, term = 1.0;
    for (int32_t k = 1; k <= k_max; k++) {
        term *= alpha;
        e += term;
        const double saved = (e - 1.0) * time_per_token - (double)k * (row_cost + draft_cost);
        if (saved > best_saved) {
            best_saved = saved;
            best = k;
        }
    }
    return best;
}

int32_t spec_conf_bin(double p)
{
    if (!(p > 0.0)) return 0;
    const int32_t b = (int32_t)(p * SPEC_CONF_BINS);
    return b < SPEC_CONF_BINS ? b : SPEC_CONF_BINS - 1;
}

void spec_conf_add(struct spec_conf *c, double p, bool kept)
{
    const int32_t b = spec_conf_bin(p);
    c->kept[b] = c->kept[b] * SPEC_CONF_DECAY + (kept ? 1.0 : 0.0);
    c->tested[b] = c->tested[b] * SPEC_CONF_DECAY + 1.0;
}

double spec_conf_all(const struct spec_conf *c)
{
    double kept = 0.0, tested = 0.0;
    for (int32_t i = 0; i < SPEC_CONF_BINS; i++) {
        kept += c->kept[i];
        tested += c->tested[i];
    }
    return (kept + 0.5) / (tested + 1.0);
}

double spec_conf_rate(const struct spec_conf *c, double p)
{
    const double all = spec_conf_all(c);
    const int32_t b = spec_conf_bin(p);
    return (c->kept[b] + SPEC_CONF_PRIOR * all) / (c->tested[b] + SPEC_CONF_PRIOR);
}

bool spec_conf_pays(const struct spec_conf *c, double p, double chain, double cost)
{
    return chain * spec_conf_rate(c, p) >= cost;
}

double spec_conf_threshold(const struct spec_conf *c, double cost)
{
    int32_t b = SPEC_CONF_BINS;
    while (b > 0 && spec_conf_pays(c, (b - 0.5) / SPEC_CONF_BINS, 1.0, cost)) b--;
    return (double)b / SPEC_CONF_BINS;
}

int32_t spec_draw(const float *w, int32_t n, double sum, double u)
{
    const double target = u * sum;
    double cum = 0.0;
    int32_t chosen = -1;
    for (int32_t i = 0; i < n; i++) {
        if (!(w[i] > 0.0f)) continue;
        chosen = i;
        cum += (double)w[i];
        if (target < cum) break;
    }
    return chosen;
}

double spec_residual(const float *p, const float *q, int32_t x, int32_t n, float *residual)
{
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        const float qi = q ? q[i] : (i == x ? 1.0f : 0.0f);
        const float r = p[i] > qi ? p[i] - qi : 0.0f;
        residual[i] = r;
        sum += (double)r;
    }
    return sum;
}

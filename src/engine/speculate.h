/*
 * speculate.h -- the parts of speculative decoding that need no model
 * (draft.c and sample.c do the rest): drafts by prompt lookup, the arithmetic of the
 * rejection rule, the expected gain of a draft of k tokens and the model
 * of a step's cost it is weighed against, and what a sequence learns of
 * its draft's confidence.
 *
 * Verification (Leviathan et al. 2023, Chen et al. 2023): a drafted token
 * x, drawn from the draft's distribution q, is kept with probability
 * min(1, p(x)/q(x)), p being the target's distribution; otherwise the
 * token is drawn from the normalised max(0, p - q).  The kept or drawn
 * token is then distributed exactly as p.  A draft that is not sampled
 * (prompt lookup, or a greedy draft model for a sampled request) has
 * q = the point mass on x: x is kept with probability p(x) and the
 * residual is p without x.
 */
#ifndef HEARTH_SPECULATE_H
#define HEARTH_SPECULATE_H

#include "internal.h"

/* Exponentially decayed least squares of y on x: the sums of weights, x,
 * y, x^2 and xy, each observation weighing 1 and the older ones
 * SPEC_FIT_DECAY times less at every new one; and rel, b / a of the
 * latest line fitted where the observations spread (0: none yet). */
struct spec_fit {
    double w, x, y, xx, xy;
    double rel;
};

#define SPEC_FIT_DECAY 0.97

void spec_fit_add(struct spec_fit *f, double x, double y);
/* The line y = a + b x (b >= 0, a >= 0).  Where the observations do not
 * spread over more than one x (the weights of other x's than the mean's
 * below a few percent: steps without drafts), b is rel of a as last
 * measured, or before any measurement SPEC_ROW_PRIOR of a (a decode step
 * of a memory-bound model costs little more for a few rows more): what a
 * row costs is not forgotten while nothing drafts.  Returns false when
 * nothing was observed (a = b = 0). */
bool spec_fit_line(const struct spec_fit *f, double *a, double *b);

#define SPEC_ROW_PRIOR 0.05

/* A prompt-lookup draft: the tokens that followed the latest earlier
 * occurrence of the longest suffix of tokens[0..n) of ngram_max down to 1
 * tokens, at most k_max of them, into out.  Returns how many (0: no
 * earlier occurrence). */
int32_t spec_lookup(const int32_t *tokens, int32_t n, int32_t ngram_max, int32_t k_max, int32_t *out);

/* Tokens one verification of k drafted tokens yields when each is
 * accepted with probability alpha independently: 1 + alpha + ... +
 * alpha^k. */
double spec_expected_tokens(double alpha, int32_t k);

/* The draft length in 0 .. k_max that maximises the expected time saved,
 * (E(alpha, k) - 1) * time_per_token - k * (row_cost + draft_cost):
 * time_per_token is what a token costs without drafting (the step's time
 * over the tokens it yields), row_cost the target's time for one more row,
 * draft_cost the time to draft one token.  0 when no length saves time
 * (the expected gain is below 1). */
int32_t spec_best_length(double alpha, int32_t k_max, double time_per_token, double row_cost,
                         double draft_cost);

/* What a sequence learns of its draft's confidence (the draft's
 * probability of its most likely token where it drafts one): the drafted
 * tokens of each confidence, in SPEC_CONF_BINS bins of equal width over
 * [0, 1], that were verified (every token drafted before them was kept)
 * and that were kept, as counts decayed by SPEC_CONF_DECAY at every new
 * one of the bin.  Where a request gives no confidence limit (draft_p_min
 * negative), a drafted token is kept for verification only where this
 * says it pays (spec_conf_pays()). */
#define SPEC_CONF_BINS 20
#define SPEC_CONF_DECAY 0.95
/* A bin's rate leans towards the rate of all the bins together (with a
 * prior of one half weighing one token) with the weight of this many
 * tokens: a confidence not seen yet is expected to do as the draft does. */
#define SPEC_CONF_PRIOR 2.0

struct spec_conf {
    double kept[SPEC_CONF_BINS], tested[SPEC_CONF_BINS];
};

/* The bin of confidence p (p outside [0, 1] falls in the nearest). */
int32_t spec_conf_bin(double p);
/* A verified token of confidence p, kept or not. */
void spec_conf_add(struct spec_conf *c, double p, bool kept);
/* The rate at which drafted tokens are kept, every bin together, with a
 * prior of one half weighing one token. */
double spec_conf_all(const struct spec_conf *c);
/* The rate at which tokens of confidence p are kept: (kept + PRIOR x
 * all) / (tested + PRIOR) of p's bin, all being the rate of every bin. */
double spec_conf_rate(const struct spec_conf *c, double p);
/* Whether a token of confidence p pays for its verification: chain (how
 * likely the tokens drafted before it this step are all kept) times its
 * rate is at least cost, the time its row of the model's step costs over
 * the time of a token without drafting. */
bool spec_conf_pays(const struct spec_conf *c, double p, double chain, double cost);
/* The learned confidence limit: the lower edge of the lowest bin from
 * which every bin up pays for a first drafted token (chain 1); 0 when all
 * do, 1 when the top bin does not. */
double spec_conf_threshold(const struct spec_conf *c, double cost);

/* The index of the token a uniform u in [0, 1) selects from weights w[0..n)
 * of total sum (walking the cumulative sum; the last positive weight when
 * rounding leaves u * sum at the end).  -1 when no weight is positive. */
int32_t spec_draw(const float *w, int32_t n, double sum, double u);

/* The rejection rule: keep x when u * q(x) < p(x) (u uniform in [0, 1),
 * q(x) > 0).  p(x) >= q(x) always keeps x. */
static inline bool spec_keep(double u, float p_x, float q_x)
{
    return u * (double)q_x < (double)p_x;
}

/* After a rejection: residual[i] = max(0, p[i] - q[i]) (q NULL: the point
 * mass on x), returning the residual's sum (0 when p <= q everywhere,
 * which rounding alone can cause). */
double spec_residual(const float *p, const float *q, int32_t x, int32_t n, float *residual);

#endif /* HEARTH_SPECULATE_H */

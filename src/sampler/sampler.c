/*
 * sampler.c -- the sampling chain: penalties, logit bias, temperature,
 * top-k, top-p, min-p and the seeded draw.  The order and the formulas are
 * the contract documented in the sampling section of hearth.h.
 *
 * Cost per call is linear in the vocabulary: top-k is a bounded heap
 * (O(n log k)), top-p without top-k pops a heap only until the mass is
 * reached, and nothing is sorted when no truncation is asked for.  Every
 * buffer is allocated by hearth_sampler_new().
 */
#if defined(__clang__)
/* a*b+c must not become a fused multiply-add: the probabilities have to be
 * bit-identical on every platform.  GCC does not contract in ISO C mode. */
#pragma STDC FP_CONTRACT OFF
#endif

#include "internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "rng.h"
#include "sampler.h"

#define SAMPLER_MAX_VOCAB (1 << 30)
#define SAMPLER_MAX_TEMPERATURE 100.0f
#define SAMPLER_MAX_REPEAT_PENALTY 100.0f
#define SAMPLER_MAX_LAST_N (1 << 20)
#define SAMPLER_MAX_ABS_PENALTY 100.0f
#define SAMPLER_MAX_ABS_BIAS 1000.0f

struct hearth_sampler {
    hearth_sampler_params params;   /* params.logit_bias points at bias, or at
                                     * the caller's array (sampler_new_checked) */
    hearth_logit_bias *bias;        /* the copy of the logit biases, or NULL */
    int32_t n_vocab;
    hearth_rng rng;
    bool penalties_active;

    /* The last repeat_last_n accepted tokens as a ring, and how often each
     * token occurs in it (both only when penalties are active). */
    int32_t *history;
    int32_t history_len;
    int32_t history_next;
    int32_t *counts;

    /* Working buffers, n_vocab each. */
    float *logits;      /* the caller's logits after steps 1 and 2 */
    int32_t *ids;       /* candidate token ids */
    double *weights;    /* by token id: exp((l - l_max) / temperature) */

    struct grammar_matcher *grammar; /* step 0, when the parameters have one */
    enum sampler_grammar_mode grammar_mode;
    const int32_t *openers;          /* SAMPLER_GRAMMAR_OPEN: allowed besides */
    int32_t n_openers;
    bool grammar_started;            /* it took a token: it applies from now on */
};

/* ------------------------------------------------------------------------
 * Parameters
 * ------------------------------------------------------------------------ */

void hearth_sampler_params_default(hearth_sampler_params *params)
{
    memset(params, 0, sizeof *params);
    params->temperature = 0.8f;
    params->top_k = 40;
    params->top_p = 0.95f;
    params->min_p = 0.05f;
    params->repeat_penalty = 1.0f;
    params->repeat_last_n = 64;
    params->presence_penalty = 0.0f;
    params->frequency_penalty = 0.0f;
    params->seed = 0;
    params->logit_bias = NULL;
    params->n_logit_bias = 0;
}

static hearth_status check_float(const char *name, float v, float min, float max,
                                 bool min_exclusive)
{
    if (isnan(v))
        return hearth_error(HEARTH_E_INVALID, "sampler parameter %s is not a number", name);
    if (v < min || v > max || (min_exclusive && v == min))
        return hearth_error(HEARTH_E_INVALID,
                            "sampler parameter %s = %g is out of range %s%g, %g]",
                            name, (double)v, min_exclusive ? "(" : "[", (double)min,
                            (double)max);
    return HEARTH_OK;
}

/* The checks of hearth_sampler_params_check(); *field: the parameter refused. */
static hearth_status check_params(const hearth_sampler_params *p, const char **field)
{
    hearth_status st;
    *field = "sampler";
    if (!p) return hearth_error(HEARTH_E_INVALID, "sampler parameters are NULL");
    *field = "temperature";
    if ((st = check_float("temperature", p->temperature, 0.0f, SAMPLER_MAX_TEMPERATURE, false)))
        return st;
    *field = "top_k";
    if (p->top_k < 0)
        return hearth_error(HEARTH_E_INVALID,
                            "sampler parameter top_k = %d is negative (0 turns top-k off)",
                            (int)p->top_k);
    *field = "top_p";
    if ((st = check_float("top_p", p->top_p, 0.0f, 1.0f, false))) return st;
    *field = "min_p";
    if ((st = check_float("min_p", p->min_p, 0.0f, 1.0f, false))) return st;
    *field = "repeat_penalty";
    if ((st = check_float("repeat_penalty", p->repeat_penalty, 0.0f,
                          SAMPLER_MAX_REPEAT_PENALTY, true)))
        return st;
    *field = "repeat_last_n";
    if (p->repeat_last_n < 0 || p->repeat_last_n > SAMPLER_MAX_LAST_N)
        return hearth_error(HEARTH_E_INVALID,
                            "sampler parameter repeat_last_n = %d is out of range [0, %d]",
                            (int)p->repeat_last_n, SAMPLER_MAX_LAST_N);
    *field = "presence_penalty";
    if ((st = check_float("presence_penalty", p->presence_penalty, -SAMPLER_MAX_ABS_PENALTY,
                          SAMPLER_MAX_ABS_PENALTY, false)))
        return st;
    *field = "frequency_penalty";
    if ((st = check_float("frequency_penalty", p->frequency_penalty, -SAMPLER_MAX_ABS_PENALTY,
                          SAMPLER_MAX_ABS_PENALTY, false)))
        return st;
    *field = "logit_bias";
    if (p->n_logit_bias > 0 && !p->logit_bias)
        return hearth_error(HEARTH_E_INVALID,
                            "sampler parameter logit_bias is NULL but n_logit_bias = %zu",
                            p->n_logit_bias);
    for (size_t i = 0; i < p->n_logit_bias; i++) {
        const hearth_logit_bias *b = &p->logit_bias[i];
        if (b->token < 0)
            return hearth_error(HEARTH_E_INVALID,
                                "sampler parameter logit_bias[%zu]: token %d is negative",
                                i, (int)b->token);
        if (b->bias == -INFINITY) continue;
        if (isnan(b->bias) || fabsf(b->bias) > SAMPLER_MAX_ABS_BIAS)
            return hearth_error(HEARTH_E_INVALID,
                                "sampler parameter logit_bias[%zu]: bias %g for token %d is out "
                                "of range [-%g, %g] (-inf bans the token)",
                                i, (double)b->bias, (int)b->token,
                                (double)SAMPLER_MAX_ABS_BIAS, (double)SAMPLER_MAX_ABS_BIAS);
    }
    *field = NULL;
    return HEARTH_OK;
}

hearth_status hearth_sampler_params_check(const hearth_sampler_params *p)
{
    const char *field;
    return check_params(p, &field);
}

const char *hearth_sampler_params_invalid(const hearth_sampler_params *p)
{
    const char *field;
    return check_params(p, &field) ? field : NULL;
}

/* Append to buf like snprintf, tracking the length the whole text needs. */
static void append(char *buf, size_t size, size_t *len, const char *fmt, ...)
    HEARTH_PRINTF(4, 5);

static void append(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *dst = *len < size ? buf + *len : NULL;
    size_t room = *len < size ? size - *len : 0;
    int n = vsnprintf(dst, room, fmt, ap);
    va_end(ap);
    if (n > 0) *len += (size_t)n;
}

/* The shortest %g text that reads back as the same float. */
static void format_float(char out[32], float v, bool with_sign)
{
    if (isinf(v)) {
        snprintf(out, 32, "%sinf", v < 0 ? "-" : with_sign ? "+" : "");
        return;
    }
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(out, 32, with_sign ? "%+.*g" : "%.*g", prec, (double)v);
        if (strtof(out, NULL) == v) return;
    }
}

size_t hearth_sampler_params_format(const hearth_sampler_params *p, char *buf, size_t size)
{
    char t[32], tp[32], mp[32], rp[32], pp[32], fp[32];
    size_t len = 0;
    if (size > 0) buf[0] = '\0';
    format_float(t, p->temperature, false);
    format_float(tp, p->top_p, false);
    format_float(mp, p->min_p, false);
    format_float(rp, p->repeat_penalty, false);
    format_float(pp, p->presence_penalty, false);
    format_float(fp, p->frequency_penalty, false);
    append(buf, size, &len,
           "temp=%s top-k=%d top-p=%s min-p=%s repeat-penalty=%s repeat-last-n=%d "
           "presence-penalty=%s frequency-penalty=%s seed=%llu logit-bias=",
           t, (int)p->top_k, tp, mp, rp, (int)p->repeat_last_n, pp, fp,
           (unsigned long long)p->seed);
    if (p->n_logit_bias == 0 || !p->logit_bias) append(buf, size, &len, "none");
    for (size_t i = 0; p->logit_bias && i < p->n_logit_bias; i++) {
        char b[32];
        format_float(b, p->logit_bias[i].bias, true);
        append(buf, size, &len, "%s%d%s", i ? "," : "", (int)p->logit_bias[i].token, b);
    }
    return len;
}

/* ------------------------------------------------------------------------
 * Life cycle and history
 * ------------------------------------------------------------------------ */

/* A sampler of params, which hearth_sampler_params_check() accepted; the
 * logit biases are copied, or borrowed when they outlive the sampler. */
static hearth_status sampler_make(const hearth_sampler_params *params, int32_t n_vocab, bool borrow,
                                  hearth_sampler **out)
{
    *out = NULL;
    if (n_vocab < 1 || n_vocab > SAMPLER_MAX_VOCAB)
        return hearth_error(HEARTH_E_INVALID, "sampler: vocabulary size %d is out of range [1, %d]",
                            (int)n_vocab, SAMPLER_MAX_VOCAB);
    for (size_t i = 0; i < params->n_logit_bias; i++) {
        if (params->logit_bias[i].token >= n_vocab)
            return hearth_error(HEARTH_E_INVALID,
                                "sampler parameter logit_bias[%zu]: token %d is not in the "
                                "vocabulary of %d tokens",
                                i, (int)params->logit_bias[i].token, (int)n_vocab);
    }

    hearth_sampler *s = hearth_calloc(1, sizeof *s, "sampler");
    if (!s) return HEARTH_E_NOMEM;
    s->params = *params;
    s->n_vocab = n_vocab;
    s->penalties_active = params->repeat_last_n > 0 &&
                          (params->repeat_penalty != 1.0f || params->presence_penalty != 0.0f ||
                           params->frequency_penalty != 0.0f);
    size_t n = (size_t)n_vocab;
    if (params->n_logit_bias > 0 && !borrow) {
        s->bias = hearth_calloc(params->n_logit_bias, sizeof *s->bias, "sampler logit bias");
        if (!s->bias) goto nomem;
        memcpy(s->bias, params->logit_bias, params->n_logit_bias * sizeof *s->bias);
    }
    if (!borrow) s->params.logit_bias = s->bias;
    if (params->grammar) {
        hearth_status gst = grammar_matcher_new(params->grammar, &s->grammar);
        if (gst) {
            hearth_sampler_free(s);
            return gst;
        }
    }
    if (s->penalties_active) {
        s->history = hearth_calloc((size_t)params->repeat_last_n, sizeof *s->history,
                                   "sampler history");
        s->counts = hearth_calloc(n, sizeof *s->counts, "sampler token counts");
        if (!s->history || !s->counts) goto nomem;
    }
    s->logits = hearth_calloc(n, sizeof *s->logits, "sampler logits");
    s->ids = hearth_calloc(n, sizeof *s->ids, "sampler candidates");
    s->weights = hearth_calloc(n, sizeof *s->weights, "sampler weights");
    if (!s->logits || !s->ids || !s->weights) goto nomem;
    hearth_rng_seed(&s->rng, params->seed);
    *out = s;
    return HEARTH_OK;

nomem:
    hearth_sampler_free(s);
    return HEARTH_E_NOMEM;
}

uint64_t hearth_seed_derive(uint64_t session_seed, uint64_t k)
{
    /* splitmix64 (Steele, Lea and Flood, 2014): a Weyl sequence through a
     * bijective mixer */
    const uint64_t golden = UINT64_C(0x9e3779b97f4a7c15);
    uint64_t z = session_seed + (k + 1) * golden;
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    z ^= z >> 31;
    return z >> 11; /* 53 bits */
}

hearth_status hearth_sampler_new(const hearth_sampler_params *params, int32_t n_vocab,
                                 hearth_sampler **out)
{
    if (!out) return hearth_error(HEARTH_E_INVALID, "hearth_sampler_new: out is NULL");
    *out = NULL;
    HEARTH_TRY(hearth_sampler_params_check(params));
    return sampler_make(params, n_vocab, false, out);
}

hearth_status sampler_new_checked(const hearth_sampler_params *params, int32_t n_vocab,
                                  hearth_sampler **out)
{
    return sampler_make(params, n_vocab, true, out);
}

void hearth_sampler_free(hearth_sampler *s)
{
    if (!s) return;
    free(s->bias);
    free(s->history);
    free(s->counts);
    free(s->logits);
    free(s->ids);
    free(s->weights);
    grammar_matcher_free(s->grammar);
    free(s);
}

const hearth_sampler_params *hearth_sampler_get_params(const hearth_sampler *s)
{
    return &s->params;
}

int32_t hearth_sampler_n_vocab(const hearth_sampler *s)
{
    return s->n_vocab;
}

/* Whether step 0 applies to the next token. */
static bool grammar_applies(const hearth_sampler *s)
{
    return s->grammar && (s->grammar_started || s->grammar_mode != SAMPLER_GRAMMAR_WAIT);
}

static bool is_opener(const hearth_sampler *s, int32_t token)
{
    if (s->grammar_started || s->grammar_mode != SAMPLER_GRAMMAR_OPEN) return false;
    for (int32_t i = 0; i < s->n_openers; i++)
        if (s->openers[i] == token) return true;
    return false;
}

void sampler_grammar_mode(hearth_sampler *s, enum sampler_grammar_mode mode, const int32_t *openers,
                          int32_t n_openers)
{
    if (!s->grammar || s->grammar_started) return;
    s->grammar_mode = mode;
    s->openers = mode == SAMPLER_GRAMMAR_OPEN ? openers : NULL;
    s->n_openers = mode == SAMPLER_GRAMMAR_OPEN ? HEARTH_MIN(n_openers, SAMPLER_MAX_OPENERS) : 0;
}

bool sampler_grammar_started(const hearth_sampler *s)
{
    return s->grammar_started;
}

hearth_status hearth_sampler_accept(hearth_sampler *s, int32_t token)
{
    if (grammar_applies(s) && !is_opener(s, token) && token >= 0 && token < s->n_vocab) {
        if (token >= grammar_n_tokens(s->params.grammar))
            return hearth_error(HEARTH_E_INVALID, "sampler: token %d is not allowed by the grammar",
                                (int)token);
        HEARTH_TRY(grammar_matcher_accept(s->grammar, token));
        s->grammar_started = true;
    }
    return hearth_sampler_accept_prompt(s, token);
}

bool hearth_sampler_grammar_done(const hearth_sampler *s)
{
    return grammar_applies(s) && grammar_matcher_done(s->grammar);
}

hearth_status hearth_sampler_accept_prompt(hearth_sampler *s, int32_t token)
{
    if (token < 0 || token >= s->n_vocab)
        return hearth_error(HEARTH_E_INVALID,
                            "sampler: accepted token %d is not in the vocabulary of %d tokens",
                            (int)token, (int)s->n_vocab);
    if (!s->penalties_active) return HEARTH_OK;
    int32_t cap = s->params.repeat_last_n;
    if (s->history_len == cap) {
        s->counts[s->history[s->history_next]]--;
    } else {
        s->history_len++;
    }
    s->history[s->history_next] = token;
    s->counts[token]++;
    s->history_next = (s->history_next + 1) % cap;
    return HEARTH_OK;
}

void hearth_sampler_reset(hearth_sampler *s)
{
    if (s->penalties_active) {
        for (int32_t i = 0; i < s->history_len; i++) s->counts[s->history[i]] = 0;
    }
    s->history_len = 0;
    s->history_next = 0;
    hearth_rng_seed(&s->rng, s->params.seed);
    /* a reset of a grammar that was set up once only allocates what it
     * freed; a failure leaves it refusing every token */
    if (s->grammar) (void)grammar_matcher_reset(s->grammar);
    s->grammar_mode = SAMPLER_GRAMMAR_ON;
    s->openers = NULL;
    s->n_openers = 0;
    s->grammar_started = false;
}

/* ------------------------------------------------------------------------
 * Steps 1 and 2: penalties and logit bias
 * ------------------------------------------------------------------------ */

static hearth_status load_logits(hearth_sampler *s, const float *logits)
{
    if (!logits) return hearth_error(HEARTH_E_INVALID, "sampler: logits are NULL");
    float *dst = s->logits;
    int32_t n = s->n_vocab;
    bool bad = false;
    for (int32_t i = 0; i < n; i++) {
        float v = logits[i];
        bad |= !(v < INFINITY);      /* NaN or +inf */
        dst[i] = v;
    }
    if (bad) {
        for (int32_t i = 0; i < n; i++) {
            if (!(logits[i] < INFINITY))
                return hearth_error(HEARTH_E_INVALID, "sampler: logit of token %d is %g",
                                    (int)i, (double)logits[i]);
        }
    }

    if (s->penalties_active) {
        const float rp = s->params.repeat_penalty;
        const float fp = s->params.frequency_penalty;
        const float pp = s->params.presence_penalty;
        /* A token's count is negated once it has been penalized, so a token
         * occurring several times in the window is penalized once. */
        for (int32_t i = 0; i < s->history_len; i++) {
            int32_t t = s->history[i];
            int32_t c = s->counts[t];
            if (c <= 0) continue;
            float v = dst[t];
            v = v > 0.0f ? v / rp : v * rp;
            v = v - (float)c * fp;
            v = v - pp;
            dst[t] = v;
            s->counts[t] = -c;
        }
        for (int32_t i = 0; i < s->history_len; i++) {
            int32_t t = s->history[i];
            if (s->counts[t] < 0) s->counts[t] = -s->counts[t];
        }
    }

    const hearth_logit_bias *bias = s->params.logit_bias;
    for (size_t i = 0; i < s->params.n_logit_bias; i++) dst[bias[i].token] += bias[i].bias;

    if (grammar_applies(s)) {
        /* step 0: the grammar's mask (tokens beyond its vocabulary are never
         * allowed), the openers kept as steps 1 and 2 left them */
        const uint64_t *mask;
        HEARTH_TRY(grammar_matcher_mask(s->grammar, &mask));
        float kept[SAMPLER_MAX_OPENERS];
        const int32_t n_kept = s->grammar_started ? 0 : s->n_openers;
        for (int32_t k = 0; k < n_kept; k++) kept[k] = dst[s->openers[k]];
        const int32_t n_mask = HEARTH_MIN(n, grammar_n_tokens(s->params.grammar));
        for (int32_t i = 0; i < n_mask; i++)
            if (!((mask[i >> 6] >> (i & 63)) & 1u)) dst[i] = -INFINITY;
        for (int32_t i = n_mask; i < n; i++) dst[i] = -INFINITY;
        for (int32_t k = 0; k < n_kept; k++) dst[s->openers[k]] = kept[k];
    }
    return HEARTH_OK;
}

hearth_status sampler_penalized_logits(hearth_sampler *s, const float *logits, float *out)
{
    hearth_status st = load_logits(s, logits);
    if (st) return st;
    memcpy(out, s->logits, (size_t)s->n_vocab * sizeof *out);
    return HEARTH_OK;
}

static hearth_status all_banned(const hearth_sampler *s)
{
    return hearth_error(HEARTH_E_INVALID,
                        "sampler: every one of the %d tokens has a logit of -inf "
                        "(banned by the logit bias or masked)",
                        (int)s->n_vocab);
}

/* Step 3 with temperature 0: the largest logit, the lowest id on ties. */
static hearth_status greedy_token(const hearth_sampler *s, int32_t *token_out)
{
    const float *l = s->logits;
    int32_t best = -1;
    float best_logit = -INFINITY;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        if (l[i] > best_logit) {
            best_logit = l[i];
            best = i;
        }
    }
    if (best < 0) return all_banned(s);
    *token_out = best;
    return HEARTH_OK;
}

/* ------------------------------------------------------------------------
 * Steps 3 to 6: temperature and truncation
 * ------------------------------------------------------------------------ */

/* e^x for x <= 0; see sampler_exp(). */
static inline double exp_nonpositive(double x)
{
    /* Range reduction x = k ln2 + r with |r| <= ln2 / 2, ln2 split in a
     * high part with 32 significant bits (k * ln2_hi is exact for the k
     * reachable here) and the rest.  e^r is its Taylor series to r^13,
     * whose remainder is below 2^-60 for |r| <= 0.35, evaluated by
     * Estrin's scheme (short dependency chains).  The scaling by 2^k is
     * built from exponent bits, in two steps below the normal range so that
     * the only rounding is that of the final product. */
    static const double ln2_hi = 0x1.62e42feep-1;
    static const double ln2_lo = 0x1.a39ef35793c76p-33;
    static const double inv_ln2 = 0x1.71547652b82fep0;
    if (!(x > -746.0)) return 0.0;     /* below the smallest subnormal, or NaN */
    if (x > 0.0) x = 0.0;
    int k = (int)(x * inv_ln2 - 0.5);  /* truncation of a value <= 0: rounds */
    double kd = (double)k;
    double r = (x - kd * ln2_hi) - kd * ln2_lo;
    double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
    double a01 = 1.0 + r;
    double a23 = 1.0 / 2 + r * (1.0 / 6);
    double a45 = 1.0 / 24 + r * (1.0 / 120);
    double a67 = 1.0 / 720 + r * (1.0 / 5040);
    double a89 = 1.0 / 40320 + r * (1.0 / 362880);
    double a1011 = 1.0 / 3628800 + r * (1.0 / 39916800);
    double a1213 = 1.0 / 479001600 + r * (1.0 / 6227020800.0);
    double p = (a01 + r2 * a23) + r4 * (a45 + r2 * a67) +
               r8 * ((a89 + r2 * a1011) + r4 * a1213);
    double scale_extra = 1.0;
    if (k < -1022) {
        k += 54;
        scale_extra = 0x1p-54;
    }
    uint64_t bits = (uint64_t)(k + 1023) << 52;
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale * scale_extra;
}

double sampler_exp(double x)
{
    return exp_nonpositive(x);
}

/* The candidate order: larger logit first, then lower id. */
static inline bool ranks_before(const float *l, int32_t a, int32_t b)
{
    return l[a] > l[b] || (l[a] == l[b] && a < b);
}

/* Restore the heap property below position i of heap[0..n).  With
 * best_on_top the root is the best-ranked candidate, otherwise the worst. */
static void sift_down(const float *l, int32_t *heap, size_t n, size_t i, bool best_on_top)
{
    int32_t item = heap[i];
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n) {
            bool right_higher = best_on_top ? ranks_before(l, heap[child + 1], heap[child])
                                            : ranks_before(l, heap[child], heap[child + 1]);
            if (right_higher) child++;
        }
        bool child_higher = best_on_top ? ranks_before(l, heap[child], item)
                                        : ranks_before(l, item, heap[child]);
        if (!child_higher) break;
        heap[i] = heap[child];
        i = child;
    }
    heap[i] = item;
}

static void heapify(const float *l, int32_t *heap, size_t n, bool best_on_top)
{
    for (size_t i = n / 2; i-- > 0;) sift_down(l, heap, n, i, best_on_top);
}

/* Step 4: the k best candidates into ids[0..k), best first.  A heap whose
 * root is the worst of the k kept so far rejects most tokens with a single
 * comparison. */
static size_t select_top_k(hearth_sampler *s, size_t k)
{
    const float *l = s->logits;
    int32_t *heap = s->ids;
    size_t n_heap = 0;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        if (l[i] == -INFINITY) continue;
        if (n_heap < k) {
            heap[n_heap++] = i;
            if (n_heap == k) heapify(l, heap, n_heap, false);
        } else if (ranks_before(l, i, heap[0])) {
            heap[0] = i;
            sift_down(l, heap, n_heap, 0, false);
        }
    }
    if (n_heap < k) heapify(l, heap, n_heap, false);
    /* Heap sort: popping the worst to the back leaves the best first. */
    for (size_t end = n_heap; end > 1; end--) {
        int32_t worst = heap[0];
        heap[0] = heap[end - 1];
        heap[end - 1] = worst;
        sift_down(l, heap, end - 1, 0, false);
    }
    return n_heap;
}

/* The max-heap sift of sort_ids(). */
static void sift_down_ids(int32_t *ids, size_t n, size_t i)
{
    int32_t item = ids[i];
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && ids[child + 1] > ids[child]) child++;
        if (ids[child] <= item) break;
        ids[i] = ids[child];
        i = child;
    }
    ids[i] = item;
}

/* Heap sort of token ids into increasing order: in place, so that a call
 * never allocates (the C library's qsort may). */
static void sort_ids(int32_t *ids, size_t n)
{
    for (size_t i = n / 2; i-- > 0;) sift_down_ids(ids, n, i);
    for (size_t end = n; end > 1; end--) {
        int32_t largest = ids[0];
        ids[0] = ids[end - 1];
        ids[end - 1] = largest;
        sift_down_ids(ids, end - 1, 0);
    }
}

/* Depths of the top-p tally: whole nats of (l - l_max) / T, the last one
 * holding everything deeper. */
#define MASS_DEPTHS 64

static inline int mass_depth(double x)
{
    return x > -(double)(MASS_DEPTHS - 1) ? (int)(-x) : MASS_DEPTHS - 1;
}

/* Rank ids[0..n) by popping a heap until the popped weights reach target
 * (or the heap is empty); the popped tokens end up in ids[0..*n_popped).
 * Returns whether the target was reached. */
static bool pop_until_mass(const float *l, const double *w, int32_t *ids, size_t n,
                           double target, size_t *n_popped)
{
    heapify(l, ids, n, true);
    double cum = 0.0;
    size_t end = n;
    bool reached = false;
    while (end > 0 && !reached) {
        int32_t best = ids[0];
        ids[0] = ids[end - 1];
        ids[end - 1] = best;
        end--;
        sift_down(l, ids, end, 0, true);
        cum += w[best];
        reached = cum >= target;
    }
    memmove(ids, ids + end, (n - end) * sizeof *ids);
    *n_popped = n - end;
    return reached;
}

/* Steps 3 to 6.  Leaves the kept tokens in ids[0..*n_kept) in increasing id
 * order with their weights, and their total weight in *total. */
static hearth_status build_distribution(hearth_sampler *s, size_t *n_kept, double *total)
{
    const hearth_sampler_params *p = &s->params;
    const float *l = s->logits;
    int32_t *ids = s->ids;
    double *w = s->weights;
    size_t n_vocab = (size_t)s->n_vocab;
    size_t m;
    bool sorted;

    if (p->top_k > 0 && (size_t)p->top_k < n_vocab) {
        m = select_top_k(s, (size_t)p->top_k);
        sorted = true;
    } else {
        m = 0;
        for (int32_t i = 0; i < s->n_vocab; i++)
            if (l[i] != -INFINITY) ids[m++] = i;
        sorted = false;
    }
    if (m == 0) return all_banned(s);

    float l_max = l[ids[0]];
    if (!sorted)
        for (size_t i = 1; i < m; i++) l_max = l[ids[i]] > l_max ? l[ids[i]] : l_max;

    /* Step 3: p_i = w_i / sum(w) with w_i = e^((l_i - l_max) / T) <= 1.
     * When top-p will have to rank an unsorted list, the mass is also
     * tallied by whole nats below the maximum, to find how deep the
     * ranking has to go. */
    const double inv_temperature = 1.0 / (double)p->temperature;
    const bool tally = !sorted && p->top_p < 1.0f;
    double mass_by_depth[MASS_DEPTHS] = {0};
    double sum = 0.0;
    for (size_t i = 0; i < m; i++) {
        int32_t t = ids[i];
        double x = ((double)l[t] - (double)l_max) * inv_temperature;
        double wt = exp_nonpositive(x);
        w[t] = wt;
        sum += wt;
        if (tally) mass_by_depth[mass_depth(x)] += wt;
    }

    /* Steps 5 and 6 each keep a prefix of the ranked candidates, so their
     * result is the shorter prefix.  min-p is a threshold on the weights
     * (p_i >= min_p p_max <=> w_i >= min_p, as w_max = 1), applied first
     * because it needs no ranking; top-p then walks the ranked survivors
     * against the mass of all top-k candidates, which is unchanged. */
    if (p->min_p > 0.0f) {
        const double min_p = p->min_p;
        size_t kept = 0;
        for (size_t i = 0; i < m; i++)
            if (w[ids[i]] >= min_p) ids[kept++] = ids[i];
        m = kept;
    }
    if (p->top_p < 1.0f) {
        const double target = (double)p->top_p * sum;
        if (sorted) {
            double cum = 0.0;
            size_t i = 0;
            while (i < m) {
                cum += w[ids[i++]];
                if (cum >= target) break;
            }
            m = i;
        } else {
            /* The candidates down to the depth whose tally reaches the
             * target are a prefix of the ranking that holds the top-p
             * prefix; rank only them, unless rounding left the walk short
             * of the target, in which case rank everything. */
            int depth = 0;
            double tallied = mass_by_depth[0];
            while (tallied < target && depth < MASS_DEPTHS - 1) tallied += mass_by_depth[++depth];
            size_t n_rank = m;
            if (depth < MASS_DEPTHS - 1) {
                n_rank = 0;
                for (size_t i = 0; i < m; i++) {
                    int32_t t = ids[i];
                    double x = ((double)l[t] - (double)l_max) * inv_temperature;
                    if (mass_depth(x) <= depth) {
                        ids[i] = ids[n_rank];
                        ids[n_rank++] = t;
                    }
                }
            }
            size_t popped;
            if (!pop_until_mass(l, w, ids, n_rank, target, &popped) && n_rank < m)
                pop_until_mass(l, w, ids, m, target, &popped);
            m = popped;
            sorted = true;
        }
    }
    if (sorted) sort_ids(ids, m);

    double kept_sum = 0.0;
    for (size_t i = 0; i < m; i++) kept_sum += w[ids[i]];
    *n_kept = m;
    *total = kept_sum;
    return HEARTH_OK;
}

/* ------------------------------------------------------------------------
 * Step 7 and the public calls
 * ------------------------------------------------------------------------ */

hearth_status hearth_sampler_sample(hearth_sampler *s, const float *logits, int32_t *token_out)
{
    hearth_status st;
    if (!token_out) return hearth_error(HEARTH_E_INVALID, "sampler: token_out is NULL");
    if ((st = load_logits(s, logits))) return st;
    if (s->params.temperature == 0.0f) return greedy_token(s, token_out);

    size_t m;
    double total;
    if ((st = build_distribution(s, &m, &total))) return st;
    const double target = hearth_rng_uniform(&s->rng) * total;
    double cum = 0.0;
    int32_t chosen = -1;
    for (size_t i = 0; i < m; i++) {
        double wt = s->weights[s->ids[i]];
        if (wt <= 0.0) continue;
        chosen = s->ids[i];
        cum += wt;
        if (target < cum) break;
    }
    /* Rounding can leave target == total: the last token of positive
     * weight is then the answer, as chosen already is.  The best candidate
     * always has weight 1, so chosen is set. */
    if (chosen < 0) return hearth_error(HEARTH_E_INTERNAL, "sampler: no token of positive weight");
    *token_out = chosen;
    return HEARTH_OK;
}

hearth_status hearth_sampler_probs(hearth_sampler *s, const float *logits, float *probs_out)
{
    hearth_status st;
    if (!probs_out) return hearth_error(HEARTH_E_INVALID, "sampler: probs_out is NULL");
    if ((st = load_logits(s, logits))) return st;
    memset(probs_out, 0, (size_t)s->n_vocab * sizeof *probs_out);
    if (s->params.temperature == 0.0f) {
        int32_t t = 0;
        if ((st = greedy_token(s, &t))) return st;
        probs_out[t] = 1.0f;
        return HEARTH_OK;
    }
    size_t m;
    double total;
    if ((st = build_distribution(s, &m, &total))) return st;
    for (size_t i = 0; i < m; i++) probs_out[s->ids[i]] = (float)(s->weights[s->ids[i]] / total);
    return HEARTH_OK;
}

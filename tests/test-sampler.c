/*
 * test-sampler.c -- the sampling chain: each stage alone on hand-made
 * logits, the whole chain against distributions computed here from the
 * documented formulas (exact probabilities and a chi-square test of seeded
 * draws), the order of the stages, the documented random generator, greedy
 * decoding, parameter validation, and a grammar that waits for the
 * engine to start it (a reasoning model's answer).
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "sampler.h"
#include "testutil.h"

/* Parameters with every stage off: temperature 1, no truncation, no
 * penalties. */
static hearth_sampler_params neutral_params(void)
{
    hearth_sampler_params p;
    hearth_sampler_params_default(&p);
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.0f;
    return p;
}

static hearth_sampler *new_sampler(const hearth_sampler_params *p, int32_t n_vocab)
{
    hearth_sampler *s = NULL;
    hearth_status st = hearth_sampler_new(p, n_vocab, &s);
    ck_assert_msg(st == HEARTH_OK, "hearth_sampler_new: %s", hearth_last_error());
    return s;
}

static void expect_probs(hearth_sampler *s, const float *logits, const double *want, int n)
{
    float got[64];
    ck_assert_int_le(n, 64);
    hearth_status st = hearth_sampler_probs(s, logits, got);
    ck_assert_msg(st == HEARTH_OK, "probs: %s", hearth_last_error());
    for (int i = 0; i < n; i++)
        ck_assert_msg(fabs(got[i] - want[i]) < 1e-6, "token %d: p = %.9g, expected %.9g", i,
                      (double)got[i], want[i]);
}

/* ------------------------------------------------------------------------
 * Parameters
 * ------------------------------------------------------------------------ */

START_TEST(test_defaults)
{
    hearth_sampler_params p;
    memset(&p, 0xff, sizeof p);
    hearth_sampler_params_default(&p);
    ck_assert(p.temperature == 0.8f);
    ck_assert_int_eq(p.top_k, 40);
    ck_assert(p.top_p == 0.95f);
    ck_assert(p.min_p == 0.05f);
    ck_assert(p.repeat_penalty == 1.0f);
    ck_assert_int_eq(p.repeat_last_n, 64);
    ck_assert(p.presence_penalty == 0.0f);
    ck_assert(p.frequency_penalty == 0.0f);
    ck_assert_uint_eq(p.seed, 0);
    ck_assert_ptr_null(p.logit_bias);
    ck_assert_uint_eq(p.n_logit_bias, 0);
    ck_assert_int_eq(hearth_sampler_params_check(&p), HEARTH_OK);
}
END_TEST

static void expect_invalid(const hearth_sampler_params *p, const char *needle1, const char *needle2)
{
    ck_assert_int_eq(hearth_sampler_params_check(p), HEARTH_E_INVALID);
    const char *msg = hearth_last_error();
    ck_assert_msg(strstr(msg, needle1) && strstr(msg, needle2),
                  "message '%s' should name '%s' and '%s'", msg, needle1, needle2);
    hearth_sampler *s = (hearth_sampler *)1;
    ck_assert_int_eq(hearth_sampler_new(p, 100, &s), HEARTH_E_INVALID);
    ck_assert_ptr_null(s);
}

START_TEST(test_validation)
{
    hearth_sampler_params p;
#define BAD(field, value, n1, n2)          \
    hearth_sampler_params_default(&p);     \
    p.field = value;                       \
    expect_invalid(&p, n1, n2)
    BAD(temperature, NAN, "temperature", "not a number");
    BAD(temperature, -0.5f, "temperature", "-0.5");
    BAD(temperature, 1000.0f, "temperature", "1000");
    BAD(temperature, INFINITY, "temperature", "inf");
    BAD(top_k, -1, "top_k", "-1");
    BAD(top_p, 1.5f, "top_p", "1.5");
    BAD(top_p, -0.1f, "top_p", "-0.1");
    BAD(top_p, NAN, "top_p", "not a number");
    BAD(min_p, 2.0f, "min_p", "2");
    BAD(min_p, -1e-3f, "min_p", "-0.001");
    BAD(repeat_penalty, 0.0f, "repeat_penalty", "= 0");
    BAD(repeat_penalty, -1.0f, "repeat_penalty", "-1");
    BAD(repeat_penalty, 1e9f, "repeat_penalty", "1e+09");
    BAD(repeat_last_n, -1, "repeat_last_n", "-1");
    BAD(repeat_last_n, 1 << 21, "repeat_last_n", "2097152");
    BAD(presence_penalty, 200.0f, "presence_penalty", "200");
    BAD(frequency_penalty, -INFINITY, "frequency_penalty", "-inf");
    BAD(frequency_penalty, NAN, "frequency_penalty", "not a number");
#undef BAD

    hearth_logit_bias bias[2] = {{5, 1.0f}, {7, NAN}};
    hearth_sampler_params_default(&p);
    p.logit_bias = bias;
    p.n_logit_bias = 2;
    expect_invalid(&p, "logit_bias[1]", "token 7");
    bias[1].bias = INFINITY;
    expect_invalid(&p, "logit_bias[1]", "inf");
    bias[1].bias = 5000.0f;
    expect_invalid(&p, "logit_bias[1]", "5000");
    bias[1].token = -3;
    expect_invalid(&p, "logit_bias[1]", "-3");
    p.logit_bias = NULL;
    expect_invalid(&p, "logit_bias", "NULL");

    /* Token ids are checked against the vocabulary when the sampler is made. */
    bias[1].token = 100;
    bias[1].bias = -INFINITY;
    p.logit_bias = bias;
    ck_assert_int_eq(hearth_sampler_params_check(&p), HEARTH_OK);
    hearth_sampler *s = NULL;
    ck_assert_int_eq(hearth_sampler_new(&p, 100, &s), HEARTH_E_INVALID);
    ck_assert_msg(strstr(hearth_last_error(), "token 100"), "%s", hearth_last_error());
    ck_assert_int_eq(hearth_sampler_new(&p, 101, &s), HEARTH_OK);
    hearth_sampler_free(s);

    /* vocabulary size */
    hearth_sampler_params_default(&p);
    ck_assert_int_eq(hearth_sampler_new(&p, 0, &s), HEARTH_E_INVALID);
    ck_assert_msg(strstr(hearth_last_error(), "vocabulary size 0"), "%s", hearth_last_error());
    ck_assert_int_eq(hearth_sampler_new(&p, -5, &s), HEARTH_E_INVALID);

    /* the edges of the ranges are accepted */
    p.temperature = 0.0f;
    p.top_p = 0.0f;
    p.min_p = 1.0f;
    p.repeat_last_n = 0;
    p.top_k = 0;
    ck_assert_int_eq(hearth_sampler_params_check(&p), HEARTH_OK);
}
END_TEST

START_TEST(test_bad_logits_and_tokens)
{
    hearth_sampler_params p = neutral_params();
    hearth_sampler *s = new_sampler(&p, 4);
    float logits[4] = {1, 2, NAN, 0};
    int32_t t;
    ck_assert_int_eq(hearth_sampler_sample(s, logits, &t), HEARTH_E_INVALID);
    ck_assert_msg(strstr(hearth_last_error(), "token 2"), "%s", hearth_last_error());
    logits[2] = INFINITY;
    ck_assert_int_eq(hearth_sampler_sample(s, logits, &t), HEARTH_E_INVALID);
    logits[2] = -INFINITY;
    ck_assert_int_eq(hearth_sampler_sample(s, logits, &t), HEARTH_OK);
    ck_assert_int_ne(t, 2);
    for (int i = 0; i < 4; i++) logits[i] = -INFINITY;
    ck_assert_int_eq(hearth_sampler_sample(s, logits, &t), HEARTH_E_INVALID);
    ck_assert_msg(strstr(hearth_last_error(), "-inf"), "%s", hearth_last_error());
    ck_assert_int_eq(hearth_sampler_accept(s, 4), HEARTH_E_INVALID);
    ck_assert_int_eq(hearth_sampler_accept(s, -1), HEARTH_E_INVALID);
    ck_assert_int_eq(hearth_sampler_accept(s, 3), HEARTH_OK);
    hearth_sampler_free(s);
}
END_TEST

START_TEST(test_format)
{
    hearth_sampler_params p;
    hearth_sampler_params_default(&p);
    p.seed = 18446744073709551615u;
    char buf[512];
    size_t n = hearth_sampler_params_format(&p, buf, sizeof buf);
    const char *want =
        "temp=0.8 top-k=40 top-p=0.95 min-p=0.05 repeat-penalty=1 repeat-last-n=64 "
        "presence-penalty=0 frequency-penalty=0 seed=18446744073709551615 logit-bias=none";
    ck_assert_str_eq(buf, want);
    ck_assert_uint_eq(n, strlen(want));

    hearth_logit_bias bias[3] = {{15043, 1.0f}, {2, -INFINITY}, {7, -0.125f}};
    p.logit_bias = bias;
    p.n_logit_bias = 3;
    p.temperature = 0.112246595f;   /* needs all 9 digits to read back */
    p.top_k = 0;
    p.seed = 42;
    n = hearth_sampler_params_format(&p, buf, sizeof buf);
    ck_assert_str_eq(buf, "temp=0.112246595 top-k=0 top-p=0.95 min-p=0.05 repeat-penalty=1 "
                          "repeat-last-n=64 presence-penalty=0 frequency-penalty=0 seed=42 "
                          "logit-bias=15043+1,2-inf,7-0.125");
    ck_assert_uint_eq(n, strlen(buf));

    /* snprintf-like truncation */
    char small[10];
    size_t need = hearth_sampler_params_format(&p, small, sizeof small);
    ck_assert_uint_eq(need, n);
    ck_assert_str_eq(small, "temp=0.11");
    ck_assert_uint_eq(hearth_sampler_params_format(&p, NULL, 0), n);

    /* the sampler's copy formats the same */
    hearth_sampler *s = new_sampler(&p, 20000);
    char again[512];
    hearth_sampler_params_format(hearth_sampler_get_params(s), again, sizeof again);
    ck_assert_str_eq(again, buf);
    ck_assert_int_eq(hearth_sampler_n_vocab(s), 20000);
    hearth_sampler_free(s);
}
END_TEST

/* ------------------------------------------------------------------------
 * Each stage alone
 * ------------------------------------------------------------------------ */

START_TEST(test_penalties)
{
    /* Hand-computed with values exact in binary floating point. */
    const float logits[6] = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 0.0f};
    float copy[6], out[6];
    memcpy(copy, logits, sizeof copy);

    hearth_sampler_params p = neutral_params();
    p.repeat_last_n = 5;
    p.repeat_penalty = 2.0f;
    hearth_sampler *s = new_sampler(&p, 6);
    /* token 4 falls out of the 5-token window */
    const int32_t history[] = {4, 0, 1, 1, 3, 5};
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(history); i++)
        ck_assert_int_eq(hearth_sampler_accept(s, history[i]), HEARTH_OK);
    ck_assert_int_eq(sampler_penalized_logits(s, logits, out), HEARTH_OK);
    /* repetition alone: positive / 2, negative * 2, zero stays */
    const float want_rep[6] = {1.0f, -2.0f, 0.5f, 1.5f, -2.0f, 0.0f};
    for (int i = 0; i < 6; i++) ck_assert_msg(out[i] == want_rep[i], "rep %d: %g", i, (double)out[i]);
    ck_assert_mem_eq(logits, copy, sizeof copy);   /* the caller's logits are untouched */
    hearth_sampler_free(s);

    p.repeat_penalty = 1.0f;
    p.frequency_penalty = 0.5f;
    s = new_sampler(&p, 6);
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(history); i++) hearth_sampler_accept(s, history[i]);
    sampler_penalized_logits(s, logits, out);
    /* frequency alone: minus count * 0.5 (token 1 occurs twice) */
    const float want_freq[6] = {1.5f, -2.0f, 0.5f, 2.5f, -2.0f, -0.5f};
    for (int i = 0; i < 6; i++) ck_assert_msg(out[i] == want_freq[i], "freq %d: %g", i, (double)out[i]);
    hearth_sampler_free(s);

    p.frequency_penalty = 0.0f;
    p.presence_penalty = 0.25f;
    s = new_sampler(&p, 6);
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(history); i++) hearth_sampler_accept(s, history[i]);
    sampler_penalized_logits(s, logits, out);
    /* presence alone: minus 0.25 once per token present */
    const float want_pres[6] = {1.75f, -1.25f, 0.5f, 2.75f, -2.0f, -0.25f};
    for (int i = 0; i < 6; i++) ck_assert_msg(out[i] == want_pres[i], "pres %d: %g", i, (double)out[i]);
    hearth_sampler_free(s);

    /* all three: repetition first, then frequency and presence */
    p.repeat_penalty = 2.0f;
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.25f;
    s = new_sampler(&p, 6);
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(history); i++) hearth_sampler_accept(s, history[i]);
    sampler_penalized_logits(s, logits, out);
    const float want_all[6] = {0.25f, -3.25f, 0.5f, 0.75f, -2.0f, -0.75f};
    for (int i = 0; i < 6; i++) ck_assert_msg(out[i] == want_all[i], "all %d: %g", i, (double)out[i]);
    /* the counts survive a call (the window is penalized once per call) */
    sampler_penalized_logits(s, logits, out);
    for (int i = 0; i < 6; i++) ck_assert(out[i] == want_all[i]);
    /* two more tokens push 0 and one 1 out of the window: {1, 3, 5, 2, 2} */
    hearth_sampler_accept(s, 2);
    hearth_sampler_accept(s, 2);
    sampler_penalized_logits(s, logits, out);
    const float want_slid[6] = {2.0f, -2.75f, -1.0f, 0.75f, -2.0f, -0.75f};
    for (int i = 0; i < 6; i++) ck_assert_msg(out[i] == want_slid[i], "slid %d: %g", i, (double)out[i]);
    /* reset forgets the history */
    hearth_sampler_reset(s);
    sampler_penalized_logits(s, logits, out);
    ck_assert_mem_eq(out, logits, sizeof out);
    hearth_sampler_free(s);

    /* repeat_last_n = 0 turns the penalties off */
    p.repeat_last_n = 0;
    s = new_sampler(&p, 6);
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(history); i++) hearth_sampler_accept(s, history[i]);
    sampler_penalized_logits(s, logits, out);
    ck_assert_mem_eq(out, logits, sizeof out);
    hearth_sampler_free(s);
}
END_TEST

START_TEST(test_logit_bias)
{
    const float logits[4] = {1.0f, 4.0f, 0.5f, 2.0f};
    hearth_logit_bias bias[3] = {{2, 1.5f}, {1, -INFINITY}, {2, 0.25f}};
    hearth_sampler_params p = neutral_params();
    p.logit_bias = bias;
    p.n_logit_bias = 3;
    hearth_sampler *s = new_sampler(&p, 4);
    bias[0].bias = 100.0f;          /* the sampler keeps its own copy */
    float out[4];
    ck_assert_int_eq(sampler_penalized_logits(s, logits, out), HEARTH_OK);
    ck_assert(out[0] == 1.0f);
    ck_assert(out[1] == -INFINITY);
    ck_assert(out[2] == 2.25f);     /* entries for one token add up */
    ck_assert(out[3] == 2.0f);
    ck_assert(hearth_sampler_get_params(s)->logit_bias[0].bias == 1.5f);

    /* the banned token has probability 0, the others softmax(1, 2.25, 2) */
    double z = exp(1.0) + exp(2.25) + exp(2.0);
    const double want[4] = {exp(1.0) / z, 0.0, exp(2.25) / z, exp(2.0) / z};
    expect_probs(s, logits, want, 4);
    for (int i = 0; i < 200; i++) {
        int32_t t;
        ck_assert_int_eq(hearth_sampler_sample(s, logits, &t), HEARTH_OK);
        ck_assert_int_ne(t, 1);
    }
    hearth_sampler_free(s);
}
END_TEST

/* hearth_sampler_params_invalid names the parameter that
 * hearth_sampler_params_check refuses, and agrees with it. */
START_TEST(test_params_invalid)
{
    hearth_sampler_params p;
    hearth_sampler_params_default(&p);
    ck_assert_ptr_null(hearth_sampler_params_invalid(&p));
    ck_assert_int_eq(hearth_sampler_params_check(&p), HEARTH_OK);
    ck_assert_str_eq(hearth_sampler_params_invalid(NULL), "sampler");
    const hearth_logit_bias nan_bias = {1, NAN};
    struct {
        const char *field;
        hearth_sampler_params p;
    } bad[] = {
        {"temperature", p}, {"top_k", p}, {"top_p", p}, {"min_p", p}, {"repeat_penalty", p},
        {"repeat_last_n", p}, {"presence_penalty", p}, {"frequency_penalty", p}, {"logit_bias", p},
    };
    bad[0].p.temperature = -0.5f;
    bad[1].p.top_k = -1;
    bad[2].p.top_p = 1.5f;
    bad[3].p.min_p = NAN;
    bad[4].p.repeat_penalty = 0.0f;
    bad[5].p.repeat_last_n = -1;
    bad[6].p.presence_penalty = 1e9f;
    bad[7].p.frequency_penalty = -1e9f;
    bad[8].p.logit_bias = &nan_bias;
    bad[8].p.n_logit_bias = 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(hearth_sampler_params_check(&bad[i].p), HEARTH_E_INVALID);
        const char *f = hearth_sampler_params_invalid(&bad[i].p);
        ck_assert_ptr_nonnull(f);
        ck_assert_str_eq(f, bad[i].field);
        ck_assert_ptr_nonnull(strstr(hearth_last_error(), bad[i].field));
    }
}
END_TEST

START_TEST(test_temperature)
{
    const float logits[3] = {1.0f, 2.0f, 3.0f};
    hearth_sampler_params p = neutral_params();
    p.temperature = 0.5f;
    hearth_sampler *s = new_sampler(&p, 3);
    double z = exp(2.0) + exp(4.0) + exp(6.0);
    const double want[3] = {exp(2.0) / z, exp(4.0) / z, exp(6.0) / z};
    expect_probs(s, logits, want, 3);
    hearth_sampler_free(s);

    p.temperature = 2.0f;
    s = new_sampler(&p, 3);
    z = exp(0.5) + exp(1.0) + exp(1.5);
    const double want2[3] = {exp(0.5) / z, exp(1.0) / z, exp(1.5) / z};
    expect_probs(s, logits, want2, 3);
    hearth_sampler_free(s);
}
END_TEST

START_TEST(test_top_k)
{
    /* tokens 1 and 3 tie on the largest logit */
    const float logits[6] = {0.1f, 3.0f, 2.0f, 3.0f, -1.0f, 2.5f};
    hearth_sampler_params p = neutral_params();
    p.top_k = 2;
    hearth_sampler *s = new_sampler(&p, 6);
    const double want2[6] = {0, 0.5, 0, 0.5, 0, 0};
    expect_probs(s, logits, want2, 6);
    hearth_sampler_free(s);

    p.top_k = 1;                    /* the tie goes to the lower id */
    s = new_sampler(&p, 6);
    const double want1[6] = {0, 1, 0, 0, 0, 0};
    expect_probs(s, logits, want1, 6);
    hearth_sampler_free(s);

    p.top_k = 3;
    s = new_sampler(&p, 6);
    double z = 2 * exp(3.0) + exp(2.5);
    const double want3[6] = {0, exp(3.0) / z, 0, exp(3.0) / z, 0, exp(2.5) / z};
    expect_probs(s, logits, want3, 6);
    hearth_sampler_free(s);

    /* k beyond the vocabulary, or beyond the tokens left, keeps them all */
    p.top_k = 1000;
    s = new_sampler(&p, 6);
    z = 0;
    for (int i = 0; i < 6; i++) z += exp(logits[i]);
    double want_all[6];
    for (int i = 0; i < 6; i++) want_all[i] = exp(logits[i]) / z;
    expect_probs(s, logits, want_all, 6);
    hearth_sampler_free(s);

    hearth_logit_bias ban[4] = {{0, -INFINITY}, {1, -INFINITY}, {2, -INFINITY}, {4, -INFINITY}};
    p.logit_bias = ban;
    p.n_logit_bias = 4;
    p.top_k = 5;
    s = new_sampler(&p, 6);
    z = exp(3.0) + exp(2.5);
    const double want_left[6] = {0, 0, 0, exp(3.0) / z, 0, exp(2.5) / z};
    expect_probs(s, logits, want_left, 6);
    hearth_sampler_free(s);
}
END_TEST

/* Probabilities 0.15, 0.5, 0.05, 0.3 for tokens 0..3: ranked 1, 3, 0, 2. */
static void ranked_logits(float logits[4])
{
    logits[0] = logf(0.15f);
    logits[1] = logf(0.5f);
    logits[2] = logf(0.05f);
    logits[3] = logf(0.3f);
}

START_TEST(test_top_p)
{
    float logits[4];
    ranked_logits(logits);
    /* top_k 0 (a heap over the whole vocabulary) and top_k 3 (a sorted
     * top-k list) must give the same answers where top-k keeps the set. */
    for (int k = 0; k <= 3; k += 3) {
        hearth_sampler_params p = neutral_params();
        p.top_k = k;
        double tail = k == 3 ? 0.95 : 1.0;   /* mass top-p measures against */

        p.top_p = 0.75f;                     /* 0.5 + 0.3 reaches it */
        hearth_sampler *s = new_sampler(&p, 4);
        const double want_two[4] = {0, 0.5 / 0.8, 0, 0.3 / 0.8};
        expect_probs(s, logits, want_two, 4);
        hearth_sampler_free(s);

        p.top_p = 0.85f;                     /* needs 0.15 too */
        s = new_sampler(&p, 4);
        const double want_three[4] = {0.15 / 0.95, 0.5 / 0.95, 0, 0.3 / 0.95};
        expect_probs(s, logits, want_three, 4);
        hearth_sampler_free(s);

        p.top_p = 0.0f;                      /* at least one token */
        s = new_sampler(&p, 4);
        const double want_one[4] = {0, 1, 0, 0};
        expect_probs(s, logits, want_one, 4);
        hearth_sampler_free(s);

        p.top_p = 0.99f;
        s = new_sampler(&p, 4);
        double want_rest[4] = {0.15 / tail, 0.5 / tail, k == 3 ? 0 : 0.05, 0.3 / tail};
        expect_probs(s, logits, want_rest, 4);
        hearth_sampler_free(s);
    }
}
END_TEST

START_TEST(test_min_p)
{
    float logits[4];
    ranked_logits(logits);
    hearth_sampler_params p = neutral_params();
    p.min_p = 0.25f;                /* keeps p >= 0.125 */
    hearth_sampler *s = new_sampler(&p, 4);
    const double want_three[4] = {0.15 / 0.95, 0.5 / 0.95, 0, 0.3 / 0.95};
    expect_probs(s, logits, want_three, 4);
    hearth_sampler_free(s);

    p.min_p = 0.5f;                 /* keeps p >= 0.25 */
    s = new_sampler(&p, 4);
    const double want_two[4] = {0, 0.5 / 0.8, 0, 0.3 / 0.8};
    expect_probs(s, logits, want_two, 4);
    hearth_sampler_free(s);

    p.min_p = 1.0f;                 /* only the most probable */
    s = new_sampler(&p, 4);
    const double want_one[4] = {0, 1, 0, 0};
    expect_probs(s, logits, want_one, 4);
    hearth_sampler_free(s);

    /* with top-p: the shorter of the two prefixes survives */
    p.min_p = 0.5f;
    p.top_p = 0.85f;
    s = new_sampler(&p, 4);
    expect_probs(s, logits, want_two, 4);
    hearth_sampler_free(s);
    p.min_p = 0.25f;
    p.top_p = 0.75f;
    s = new_sampler(&p, 4);
    expect_probs(s, logits, want_two, 4);
    hearth_sampler_free(s);
    p.top_k = 2;
    p.min_p = 0.7f;
    p.top_p = 1.0f;
    s = new_sampler(&p, 4);
    expect_probs(s, logits, want_one, 4);
    hearth_sampler_free(s);
}
END_TEST

START_TEST(test_greedy)
{
    float logits[5] = {1.0f, 3.0f, -2.0f, 3.0f, 2.9f};
    hearth_sampler_params p;
    hearth_sampler_params_default(&p);
    p.temperature = 0.0f;
    hearth_sampler *s = new_sampler(&p, 5);
    int32_t t;
    for (int i = 0; i < 10; i++) {
        ck_assert_int_eq(hearth_sampler_sample(s, logits, &t), HEARTH_OK);
        ck_assert_int_eq(t, 1);     /* tie with 3: the lower id */
    }
    const double want[5] = {0, 1, 0, 0, 0};
    expect_probs(s, logits, want, 5);
    hearth_sampler_free(s);

    /* penalties apply before the argmax: 3 / 1.1 < 2.9 */
    p.repeat_penalty = 1.1f;
    s = new_sampler(&p, 5);
    hearth_sampler_accept(s, 1);
    hearth_sampler_accept(s, 3);
    ck_assert_int_eq(hearth_sampler_sample(s, logits, &t), HEARTH_OK);
    ck_assert_int_eq(t, 4);
    hearth_sampler_free(s);

    /* and so does the bias */
    hearth_logit_bias bias[2] = {{1, -INFINITY}, {0, 2.5f}};
    p.repeat_penalty = 1.0f;
    p.logit_bias = bias;
    p.n_logit_bias = 2;
    s = new_sampler(&p, 5);
    ck_assert_int_eq(hearth_sampler_sample(s, logits, &t), HEARTH_OK);
    ck_assert_int_eq(t, 0);         /* 1 + 2.5 beats 3 */
    hearth_sampler_free(s);
}
END_TEST

/* ------------------------------------------------------------------------
 * The random generator and determinism
 * ------------------------------------------------------------------------ */

START_TEST(test_rng_vectors)
{
    /* splitmix64 and xoshiro256** outputs computed from the published
     * definitions with arbitrary-precision integers, independently of C. */
    static const struct { uint64_t seed; uint64_t state01[2]; uint64_t out[4]; } v[] = {
        {0, {0xe220a8397b1dcdafu, 0x6e789e6aa1b965f4u},
         {0x99ec5f36cb75f2b4u, 0xbf6e1f784956452au, 0x1a5f849d4933e6e0u, 0x6aa594f1262d2d2cu}},
        {42, {0xbdd732262feb6e95u, 0x28efe333b266f103u},
         {0x15780b2e0c2ec716u, 0x6104d9866d113a7eu, 0xae17533239e499a1u, 0xecb8ad4703b360a1u}},
        {UINT64_MAX, {0xe4d971771b652c20u, 0xe99ff867dbf682c9u},
         {0x8f5520d52a7ead08u, 0xc476a018caa1802du, 0x81de31c0d260469eu, 0xbf658d7e065f3c2fu}},
    };
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(v); i++) {
        hearth_rng rng;
        hearth_rng_seed(&rng, v[i].seed);
        ck_assert_uint_eq(rng.s[0], v[i].state01[0]);
        ck_assert_uint_eq(rng.s[1], v[i].state01[1]);
        for (int j = 0; j < 4; j++) ck_assert_uint_eq(hearth_rng_next(&rng), v[i].out[j]);
    }
    hearth_rng rng;
    hearth_rng_seed(&rng, 0);
    ck_assert(hearth_rng_uniform(&rng) == (double)(0x99ec5f36cb75f2b4u >> 11) / 9007199254740992.0);
}
END_TEST

/* The documented draw, rebuilt from the specification: the kept tokens in
 * id order, the first whose cumulative probability exceeds u. */
static int32_t reference_draw(const float *probs, int32_t n, double u)
{
    double total = 0, cum = 0;
    for (int32_t i = 0; i < n; i++) total += probs[i];
    int32_t last = -1;
    for (int32_t i = 0; i < n; i++) {
        if (probs[i] <= 0) continue;
        last = i;
        cum += probs[i];
        if (u * total < cum) return i;
    }
    return last;
}

START_TEST(test_determinism)
{
    enum { N = 50, DRAWS = 2000 };
    float logits[N];
    test_rng trng;
    test_rng_seed(&trng, 7);
    for (int i = 0; i < N; i++) logits[i] = (float)(2.0 * test_rng_normal(&trng));

    hearth_sampler_params p = neutral_params();
    p.seed = 1234;
    p.temperature = 0.9f;
    p.top_k = 20;
    p.top_p = 0.9f;
    hearth_sampler *a = new_sampler(&p, N), *b = new_sampler(&p, N);
    int32_t seq[DRAWS];
    for (int i = 0; i < DRAWS; i++) {
        int32_t ta, tb;
        ck_assert_int_eq(hearth_sampler_sample(a, logits, &ta), HEARTH_OK);
        ck_assert_int_eq(hearth_sampler_sample(b, logits, &tb), HEARTH_OK);
        ck_assert_int_eq(ta, tb);
        seq[i] = ta;
    }
    /* reset restarts the sequence */
    hearth_sampler_reset(a);
    for (int i = 0; i < DRAWS; i++) {
        int32_t t;
        hearth_sampler_sample(a, logits, &t);
        ck_assert_int_eq(t, seq[i]);
    }
    /* the tokens follow from the documented generator and draw: uniform
     * from the top 53 bits of xoshiro256** (the test's own copy) */
    float probs[N];
    ck_assert_int_eq(hearth_sampler_probs(b, logits, probs), HEARTH_OK);
    test_rng ref;
    test_rng_seed(&ref, 1234);
    for (int i = 0; i < DRAWS; i++) {
        double u = (double)(test_rng_next(&ref) >> 11) * 0x1.0p-53;
        ck_assert_int_eq(reference_draw(probs, N, u), seq[i]);
    }
    /* another seed gives another sequence */
    p.seed = 1235;
    hearth_sampler *c = new_sampler(&p, N);
    int same = 0;
    for (int i = 0; i < DRAWS; i++) {
        int32_t t;
        hearth_sampler_sample(c, logits, &t);
        same += t == seq[i];
    }
    ck_assert_int_lt(same, DRAWS);
    hearth_sampler_free(a);
    hearth_sampler_free(b);
    hearth_sampler_free(c);
}
END_TEST

START_TEST(test_exp)
{
    /* against the C library over the whole range the sampler uses */
    test_rng rng;
    test_rng_seed(&rng, 3);
    for (int i = 0; i < 200000; i++) {
        double x = -746.0 * test_rng_uniform(&rng);
        if (i < 1000) x = -test_rng_uniform(&rng);   /* near 0 */
        double want = exp(x), got = sampler_exp(x);
        ck_assert_msg(fabs(got - want) <= 1e-15 * want + 1e-320, "exp(%a) = %a, libm %a", x, got,
                      want);
    }
    ck_assert(sampler_exp(0.0) == 1.0);
    ck_assert(sampler_exp(-0.0) == 1.0);
    ck_assert(sampler_exp(-1.0) == exp(-1.0) || fabs(sampler_exp(-1.0) - exp(-1.0)) < 1e-16);
    ck_assert(sampler_exp(-800.0) == 0.0);
    ck_assert(sampler_exp(-INFINITY) == 0.0);
    ck_assert(sampler_exp(NAN) == 0.0);
}
END_TEST

/* ------------------------------------------------------------------------
 * The whole chain against an independent reference
 * ------------------------------------------------------------------------ */

/* The chain computed the slow, obvious way: a full sort, normalized
 * probabilities in double with the C library's exp, and each stage in the
 * documented order.  Expects the logits after penalties and bias. */
static const float *ref_logits;

static int ref_rank(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (ref_logits[x] != ref_logits[y]) return ref_logits[x] > ref_logits[y] ? -1 : 1;
    return (x > y) - (x < y);
}

static void reference_chain(const float *l, int32_t n, const hearth_sampler_params *p,
                            double *probs)
{
    int32_t *order = malloc((size_t)n * sizeof *order);
    double *q = malloc((size_t)n * sizeof *q);
    ck_assert(order && q);
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++)
        if (l[i] != -INFINITY) order[m++] = i;
    ref_logits = l;
    qsort(order, (size_t)m, sizeof *order, ref_rank);
    if (p->top_k > 0 && p->top_k < m) m = p->top_k;                 /* top-k */
    double z = 0;                                                    /* temperature */
    for (int32_t i = 0; i < m; i++) {
        q[i] = exp(((double)l[order[i]] - l[order[0]]) / p->temperature);
        z += q[i];
    }
    for (int32_t i = 0; i < m; i++) q[i] /= z;
    if (p->top_p < 1.0f) {                                           /* top-p */
        double cum = 0;
        int32_t keep = m;
        for (int32_t i = 0; i < m; i++) {
            cum += q[i];
            if (cum >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
        m = keep;
    }
    int32_t keep = 0;                                                /* min-p */
    for (int32_t i = 0; i < m; i++)
        if (q[i] >= p->min_p * q[0]) keep = i + 1;
    m = keep;
    z = 0;
    for (int32_t i = 0; i < m; i++) z += q[i];
    for (int32_t i = 0; i < n; i++) probs[i] = 0;
    for (int32_t i = 0; i < m; i++) probs[order[i]] = q[i] / z;
    free(order);
    free(q);
}

/* Random logits with ties and banned tokens mixed in. */
static void random_logits(test_rng *rng, float *l, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        double r = test_rng_uniform(rng);
        l[i] = (float)(3.0 * test_rng_normal(rng));
        if (r < 0.05) l[i] = -INFINITY;
        else if (r < 0.25) l[i] = roundf(l[i]);     /* ties */
    }
    if (n > 1) l[n / 2] = l[0] == -INFINITY ? 1.0f : l[0];
}

START_TEST(test_against_reference)
{
    static const int32_t sizes[] = {1, 2, 3, 7, 64, 1000, 4097};
    static const int32_t top_ks[] = {0, 1, 5, 40};
    static const float top_ps[] = {1.0f, 0.9f, 0.37f, 0.0f};
    static const float min_ps[] = {0.0f, 0.05f, 0.43f};
    static const float temps[] = {0.3f, 1.0f, 2.1f};
    test_rng rng;
    test_rng_seed(&rng, 11);
    for (size_t si = 0; si < HEARTH_ARRAY_LEN(sizes); si++) {
        int32_t n = sizes[si];
        float *l = malloc((size_t)n * sizeof *l);
        float *got = malloc((size_t)n * sizeof *got);
        double *want = malloc((size_t)n * sizeof *want);
        ck_assert(l && got && want);
        for (int trial = 0; trial < 3; trial++) {
            random_logits(&rng, l, n);
            bool any = false;
            for (int32_t i = 0; i < n; i++) any |= l[i] != -INFINITY;
            if (!any) l[0] = 0.0f;
            for (size_t a = 0; a < HEARTH_ARRAY_LEN(top_ks); a++)
            for (size_t b = 0; b < HEARTH_ARRAY_LEN(top_ps); b++)
            for (size_t c = 0; c < HEARTH_ARRAY_LEN(min_ps); c++)
            for (size_t d = 0; d < HEARTH_ARRAY_LEN(temps); d++) {
                hearth_sampler_params p = neutral_params();
                p.top_k = top_ks[a] == 40 ? n : top_ks[a];
                if (top_ks[a] == 40 && trial == 1) p.top_k = n + 1;
                if (top_ks[a] == 40 && trial == 2) p.top_k = 40;
                p.top_p = top_ps[b];
                p.min_p = min_ps[c];
                p.temperature = temps[d];
                hearth_sampler *s = new_sampler(&p, n);
                ck_assert_int_eq(hearth_sampler_probs(s, l, got), HEARTH_OK);
                reference_chain(l, n, &p, want);
                for (int32_t i = 0; i < n; i++)
                    ck_assert_msg(fabs(got[i] - want[i]) < 1e-6,
                                  "n=%d k=%d p=%g min_p=%g T=%g token %d: %.9g, reference %.9g",
                                  (int)n, (int)p.top_k, (double)p.top_p, (double)p.min_p,
                                  (double)p.temperature, (int)i, (double)got[i], want[i]);
                hearth_sampler_free(s);
            }
        }
        free(l);
        free(got);
        free(want);
    }
}
END_TEST

START_TEST(test_large_vocabulary)
{
    /* a Qwen-sized vocabulary through each path of the chain */
    enum { N = 152064 };
    float *l = malloc(N * sizeof *l), *got = malloc(N * sizeof *got);
    double *want = malloc(N * sizeof *want);
    ck_assert(l && got && want);
    test_rng rng;
    test_rng_seed(&rng, 5);
    random_logits(&rng, l, N);
    l[99999] = 25.0f;               /* a peaked distribution, as models give */
    l[123] = 23.5f;
    static const struct { int32_t k; float p, min_p, t; } cases[] = {
        {40, 0.95f, 0.05f, 0.8f}, {0, 0.95f, 0.0f, 0.8f}, {0, 0.9f, 0.01f, 1.0f},
        {0, 1.0f, 0.0f, 1.0f},    {0, 0.5f, 0.0f, 3.0f},  {1000, 1.0f, 0.0f, 5.0f},
    };
    for (size_t c = 0; c < HEARTH_ARRAY_LEN(cases); c++) {
        hearth_sampler_params p = neutral_params();
        p.top_k = cases[c].k;
        p.top_p = cases[c].p;
        p.min_p = cases[c].min_p;
        p.temperature = cases[c].t;
        hearth_sampler *s = new_sampler(&p, N);
        ck_assert_int_eq(hearth_sampler_probs(s, l, got), HEARTH_OK);
        reference_chain(l, N, &p, want);
        for (int32_t i = 0; i < N; i++)
            ck_assert_msg(fabs(got[i] - want[i]) < 1e-6, "case %zu token %d: %.9g vs %.9g", c,
                          (int)i, (double)got[i], want[i]);
        int32_t t;
        ck_assert_int_eq(hearth_sampler_sample(s, l, &t), HEARTH_OK);
        ck_assert(want[t] > 0);
        hearth_sampler_free(s);
    }
    free(l);
    free(got);
    free(want);
}
END_TEST

/* Chi-square critical values at significance 0.001 by degrees of freedom. */
static const double chi2_crit_001[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32,
                                       26.12, 27.88, 29.59, 31.26, 32.91};

START_TEST(test_chain_distribution)
{
    /* Every stage on: the draws must follow the distribution computed
     * here from the documented formulas. */
    enum { N = 12, DRAWS = 20000 };
    const float logits[N] = {1.2f, 3.1f, -0.4f, 2.7f, 2.9f, 0.3f,
                             3.3f, 1.9f, -2.0f, 2.2f, 0.8f, 2.95f};
    hearth_logit_bias bias[2] = {{0, 1.5f}, {6, -INFINITY}};
    hearth_sampler_params p = neutral_params();
    p.temperature = 0.7f;
    p.top_k = 8;
    p.top_p = 0.93f;
    p.min_p = 0.04f;
    p.repeat_penalty = 1.3f;
    p.frequency_penalty = 0.1f;
    p.presence_penalty = 0.2f;
    p.repeat_last_n = 4;
    p.logit_bias = bias;
    p.n_logit_bias = 2;
    p.seed = 20240611;
    const int32_t history[] = {8, 1, 4, 1, 2};   /* window: 1, 4, 1, 2 */

    /* penalties and bias by hand */
    float l[N];
    memcpy(l, logits, sizeof l);
    l[1] = 3.1f / 1.3f - 2 * 0.1f - 0.2f;
    l[4] = 2.9f / 1.3f - 1 * 0.1f - 0.2f;
    l[2] = -0.4f * 1.3f - 1 * 0.1f - 0.2f;
    l[0] += 1.5f;
    l[6] = -INFINITY;
    double want[N];
    reference_chain(l, N, &p, want);
    int kept = 0;
    for (int i = 0; i < N; i++) kept += want[i] > 0;
    ck_assert_int_ge(kept, 3);      /* the test has something to measure */

    hearth_sampler *s = new_sampler(&p, N);
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(history); i++) hearth_sampler_accept(s, history[i]);
    float probs[N];
    ck_assert_int_eq(hearth_sampler_probs(s, logits, probs), HEARTH_OK);
    for (int i = 0; i < N; i++)
        ck_assert_msg(fabs(probs[i] - want[i]) < 1e-5, "token %d: %g vs %g", i, (double)probs[i],
                      want[i]);

    int counts[N] = {0};
    for (int i = 0; i < DRAWS; i++) {
        int32_t t;
        ck_assert_int_eq(hearth_sampler_sample(s, logits, &t), HEARTH_OK);
        ck_assert_int_ge(t, 0);
        ck_assert_int_lt(t, N);
        counts[t]++;
    }
    double chi2 = 0;
    for (int i = 0; i < N; i++) {
        if (want[i] == 0) {
            ck_assert_msg(counts[i] == 0, "token %d drawn %d times but removed", i, counts[i]);
            continue;
        }
        double e = want[i] * DRAWS;
        chi2 += (counts[i] - e) * (counts[i] - e) / e;
    }
    ck_assert_msg(chi2 < chi2_crit_001[kept - 1], "chi-square %.2f with %d degrees of freedom",
                  chi2, kept - 1);
    hearth_sampler_free(s);
}
END_TEST

START_TEST(test_temperature_before_truncation)
{
    /* softmax(2, 1, 0) = 0.665, 0.245, 0.090: top-p 0.8 at temperature 1
     * keeps two tokens.  With temperature 3 applied first, as documented,
     * the distribution is 0.448, 0.321, 0.230 and top-p keeps all three;
     * truncating first would leave token 2 at probability 0. */
    const float logits[3] = {2.0f, 1.0f, 0.0f};
    hearth_sampler_params p = neutral_params();
    p.top_p = 0.8f;
    p.temperature = 3.0f;
    hearth_sampler *s = new_sampler(&p, 3);
    double z = exp(2.0 / 3) + exp(1.0 / 3) + 1.0;
    const double want[3] = {exp(2.0 / 3) / z, exp(1.0 / 3) / z, 1.0 / z};
    expect_probs(s, logits, want, 3);
    int hits = 0;
    for (int i = 0; i < 5000; i++) {
        int32_t t;
        hearth_sampler_sample(s, logits, &t);
        hits += t == 2;
    }
    /* 5000 * 0.230 = 1151, sd 30: token 2 is drawn */
    ck_assert_int_gt(hits, 1000);
    ck_assert_int_lt(hits, 1300);
    hearth_sampler_free(s);

    /* at temperature 1 the same top-p removes token 2 */
    p.temperature = 1.0f;
    s = new_sampler(&p, 3);
    const double want_t1[3] = {exp(2.0) / (exp(2.0) + exp(1.0)), exp(1.0) / (exp(2.0) + exp(1.0)), 0};
    expect_probs(s, logits, want_t1, 3);
    hearth_sampler_free(s);

    /* min-p likewise: 0.3 keeps e^-1 = 0.37 but not e^-2 = 0.14 at
     * temperature 1; at temperature 3 the ratios are 0.72 and 0.51 */
    p.top_p = 1.0f;
    p.min_p = 0.3f;
    p.temperature = 3.0f;
    s = new_sampler(&p, 3);
    expect_probs(s, logits, want, 3);
    hearth_sampler_free(s);
}
END_TEST

/* The logits of a vocabulary of n tokens with token `top` far ahead,
 * `second` next. */
static void peaked(float *l, int32_t n, int32_t top, int32_t second)
{
    for (int32_t i = 0; i < n; i++) l[i] = 0.0f;
    l[top] = 10.0f;
    l[second] = 5.0f;
}

static int32_t greedy_pick(hearth_sampler *s, const float *l)
{
    int32_t t;
    ck_assert_msg(hearth_sampler_sample(s, l, &t) == HEARTH_OK, "%s", hearth_last_error());
    return t;
}

START_TEST(test_grammar_wait)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("stories260K.gguf");
    const hearth_vocab *vocab = hearth_model_vocab(m);
    const int32_t n = hearth_vocab_n_tokens(vocab);
    const int32_t b = 430, x = 444, a = 261, space = 410; /* "b", "x", " a", " " */
    hearth_grammar *g;
    ck_assert_int_eq(hearth_grammar_new(vocab, "root ::= \"bx\"", 13, &g), HEARTH_OK);
    hearth_sampler_params p;
    hearth_sampler_params_default(&p);
    p.temperature = 0.0f;
    p.grammar = g;
    float *l = test_malloc((size_t)n * sizeof *l);

    /* waiting: nothing is masked, and what is taken does not reach the
     * grammar (which would refuse " a"), nor completes it */
    hearth_sampler *s = new_sampler(&p, n);
    sampler_grammar_mode(s, SAMPLER_GRAMMAR_WAIT, NULL, 0);
    peaked(l, n, a, b);
    ck_assert_int_eq(greedy_pick(s, l), a);
    ck_assert_int_eq(hearth_sampler_accept(s, a), HEARTH_OK);
    ck_assert(!sampler_grammar_started(s) && !hearth_sampler_grammar_done(s));
    /* started: the grammar from its first byte; then it stays on */
    sampler_grammar_mode(s, SAMPLER_GRAMMAR_ON, NULL, 0);
    ck_assert_int_eq(greedy_pick(s, l), b);
    ck_assert_int_eq(hearth_sampler_accept(s, b), HEARTH_OK);
    ck_assert(sampler_grammar_started(s));
    sampler_grammar_mode(s, SAMPLER_GRAMMAR_WAIT, NULL, 0);
    peaked(l, n, a, x);
    ck_assert_int_eq(greedy_pick(s, l), x);
    ck_assert_int_eq(hearth_sampler_accept(s, x), HEARTH_OK);
    ck_assert(hearth_sampler_grammar_done(s));
    /* a reset forgets that it started */
    hearth_sampler_reset(s);
    ck_assert(!sampler_grammar_started(s));
    sampler_grammar_mode(s, SAMPLER_GRAMMAR_WAIT, NULL, 0);
    peaked(l, n, a, b);
    ck_assert_int_eq(greedy_pick(s, l), a);
    hearth_sampler_free(s);

    /* open: the grammar's tokens and the openers, nothing else; an opener
     * leaves the grammar at its start, any other token starts it */
    s = new_sampler(&p, n);
    const int32_t openers[] = {space};
    sampler_grammar_mode(s, SAMPLER_GRAMMAR_OPEN, openers, 1);
    peaked(l, n, a, space);
    ck_assert_int_eq(greedy_pick(s, l), space);
    ck_assert_int_eq(hearth_sampler_accept(s, space), HEARTH_OK);
    ck_assert(!sampler_grammar_started(s));
    sampler_grammar_mode(s, SAMPLER_GRAMMAR_OPEN, openers, 1);
    peaked(l, n, a, b);
    ck_assert_int_eq(greedy_pick(s, l), b);
    ck_assert_int_eq(hearth_sampler_accept(s, b), HEARTH_OK);
    ck_assert(sampler_grammar_started(s));
    peaked(l, n, space, x);
    ck_assert_int_eq(greedy_pick(s, l), x); /* and masks the opener like any other token */
    hearth_sampler_free(s);

    /* without a grammar the modes change nothing */
    p.grammar = NULL;
    s = new_sampler(&p, n);
    sampler_grammar_mode(s, SAMPLER_GRAMMAR_OPEN, openers, 1);
    peaked(l, n, a, b);
    ck_assert_int_eq(greedy_pick(s, l), a);
    ck_assert(!sampler_grammar_started(s) && !hearth_sampler_grammar_done(s));
    hearth_sampler_free(s);
    free(l);
    hearth_grammar_free(g);
    hearth_model_free(m);
}
END_TEST

static Suite *sampler_suite(void)
{
    Suite *s = suite_create("sampler");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_validation);
    tcase_add_test(tc, test_bad_logits_and_tokens);
    tcase_add_test(tc, test_format);
    tcase_add_test(tc, test_penalties);
    tcase_add_test(tc, test_logit_bias);
    tcase_add_test(tc, test_params_invalid);
    tcase_add_test(tc, test_temperature);
    tcase_add_test(tc, test_top_k);
    tcase_add_test(tc, test_top_p);
    tcase_add_test(tc, test_min_p);
    tcase_add_test(tc, test_greedy);
    tcase_add_test(tc, test_rng_vectors);
    tcase_add_test(tc, test_determinism);
    tcase_add_test(tc, test_exp);
    tcase_add_test(tc, test_against_reference);
    tcase_add_test(tc, test_large_vocabulary);
    tcase_add_test(tc, test_chain_distribution);
    tcase_add_test(tc, test_temperature_before_truncation);
    tcase_add_test(tc, test_grammar_wait);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return test_run_suite(sampler_suite());
}

/*
 * sampler.h -- internal interface of the sampler, for the unit tests: the
 * platform-independent exponential and the first two stages of the chain.
 */
#ifndef HEARTH_SAMPLER_INTERNAL_H
#define HEARTH_SAMPLER_INTERNAL_H

#include "hearth.h"

/* e^x for x <= 0 (0 below the double range), computed with + and * only so
 * that every IEEE-754 platform gets the same bits; relative error below
 * 1e-15. */
double sampler_exp(double x);

/* hearth_sampler_new() for parameters that hearth_sampler_params_check()
 * has already accepted where they entered the library (the engine, at
 * submission), and whose logit-bias array outlives the sampler: it is
 * not checked again, and the array is borrowed, not copied.  The
 * vocabulary's bounds are still checked, as only here is n_vocab known. */
hearth_status sampler_new_checked(const hearth_sampler_params *params, int32_t n_vocab,
                                  hearth_sampler **out);

/* Steps 1 and 2 of the chain alone: the logits after the penalties and the
 * logit bias, written to out (n_vocab floats).  Validates the logits like
 * hearth_sampler_sample(). */
hearth_status sampler_penalized_logits(hearth_sampler *sampler, const float *logits,
                                       float *out);

#endif /* HEARTH_SAMPLER_INTERNAL_H */

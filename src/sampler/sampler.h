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

/* A grammar that waits for the answer (the engine's reasoning models,
 * src/engine/thinking.c): the engine says before each token whether the
 * sampler's grammar applies to it.  Once the grammar has taken a token it
 * applies to every later one, whatever the engine says. */
#define SAMPLER_MAX_OPENERS 8

enum sampler_grammar_mode {
    SAMPLER_GRAMMAR_ON,    /* step 0 applies (a new sampler's mode) */
    SAMPLER_GRAMMAR_WAIT,  /* step 0 is skipped, and the tokens accepted do
                            * not reach the grammar: it keeps its start */
    SAMPLER_GRAMMAR_OPEN,  /* step 0 applies, and the tokens of `openers`
                            * are allowed besides; an opener accepted does
                            * not reach the grammar, any other token does */
};

/* Set the mode for the next token; openers (at most SAMPLER_MAX_OPENERS
 * ids of the vocabulary, borrowed until the mode changes) only with
 * SAMPLER_GRAMMAR_OPEN.  Nothing
 * happens without a grammar or once it has taken a token. */
void sampler_grammar_mode(hearth_sampler *sampler, enum sampler_grammar_mode mode,
                          const int32_t *openers, int32_t n_openers);
/* Whether the grammar has taken a token (false without one). */
bool sampler_grammar_started(const hearth_sampler *sampler);

/* Steps 1 and 2 of the chain alone: the logits after the penalties and the
 * logit bias, written to out (n_vocab floats).  Validates the logits like
 * hearth_sampler_sample(). */
hearth_status sampler_penalized_logits(hearth_sampler *sampler, const float *logits,
                                       float *out);

#endif /* HEARTH_SAMPLER_INTERNAL_H */

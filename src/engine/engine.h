/*
 * engine.h -- internals of the serving engine (src/engine/) that the tests
 * reach: the pool's invariants checked against every sequence's block
 * table.
 */
#ifndef HEARTH_ENGINE_H
#define HEARTH_ENGINE_H

#include "internal.h"

/* Check that every KV block is accounted for: each block's reference
 * count equals the number of block tables holding it, and the pool's
 * free list, LRU and prefix index agree (kv_pool_check).  Call between
 * steps. */
hearth_status engine_check(hearth_engine *e);

/* The identity key the prefix cache's hash chains start from. */
uint64_t engine_identity(const hearth_engine *e);

/* Tests: a function called with every sequence's drafts after they are
 * made and before they are verified, which may change them (to force
 * rejections at chosen places). */
void engine_set_draft_hook(hearth_engine *e,
                           void (*hook)(void *user, uint64_t request, int32_t index, int32_t *draft, int32_t n),
                           void *user);

/* Tests: a function called with the logits of every row of the
 * prediction layer's draft passes (engine params.mtp): pass j of a
 * sequence's drafting, the row's position, its n_vocab logits (for the
 * token at pos + 1). */
void engine_set_mtp_hook(hearth_engine *e,
                         void (*hook)(void *user, int32_t pass, int32_t pos, const float *logits), void *user);

/* Tests: the cost a learned confidence limit weighs (the time of one more
 * drafted token over a token's time; hearth_speculation's draft_p_min)
 * instead of the one measured, and weighed for fixed draft lengths too:
 * the limit then depends on nothing but the tokens.  0: measured. */
void engine_set_spec_cost(hearth_engine *e, double cost);

/* Tests: the groups of steps in flight (1 to RUNNER_IN_FLIGHT_MAX;
 * engine_impl.h), before the first step; in one process a group's step
 * runs whole when it is submitted and its results are taken later, as
 * rank 0 of a pipeline takes them. */
hearth_status engine_set_groups(hearth_engine *e, int32_t n);
/* Tests: the steps in flight now. */
int32_t engine_steps_in_flight(const hearth_engine *e);

#endif /* HEARTH_ENGINE_H */

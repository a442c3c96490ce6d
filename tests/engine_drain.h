/*
 * engine_drain.h -- for the Check tests that drive the serving engine
 * step by step: run it until nothing is left, checking the KV pool's
 * invariants (engine_check) after every step.
 */
#ifndef HEARTH_TESTS_ENGINE_DRAIN_H
#define HEARTH_TESTS_ENGINE_DRAIN_H

#include <stdbool.h>

#include "engine.h"
#include "hearth.h"
#include "testutil.h"

/* Step e until no request runs or waits and a step did nothing; the
 * test fails on an error, a broken invariant, or more than max_steps. */
static inline void test_engine_drain(hearth_engine *e, int max_steps)
{
    for (int guard = 0; guard < max_steps; guard++) {
        bool worked;
        hearth_status st = hearth_engine_step(e, &worked);
        ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
        st = engine_check(e);
        ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
        hearth_engine_stats s;
        hearth_engine_get_stats(e, &s);
        if (!worked && s.running == 0 && s.waiting == 0) return;
    }
    ck_abort_msg("the engine did not finish");
}

#endif

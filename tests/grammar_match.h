/*
 * grammar_match.h -- for the tests: whether a GBNF grammar matches a
 * whole string, by the matcher's own stack sets.
 */
#ifndef HEARTH_TESTS_GRAMMAR_MATCH_H
#define HEARTH_TESTS_GRAMMAR_MATCH_H

#include <stdbool.h>
#include <string.h>

#include "grammar.h"
#include "testutil.h"

/* Whether the grammar matches all of s (and may end there). */
static inline bool grammar_matches(const char *gbnf, const char *s)
{
    struct grammar_ir ir;
    hearth_status st = grammar_ir_parse(gbnf, strlen(gbnf), NULL, NULL, &ir);
    ck_assert_msg(st == HEARTH_OK, "grammar %s: %s", gbnf, hearth_last_error());
    struct garena a;
    ck_assert_int_eq(garena_init(&a), HEARTH_OK);
    struct gset set = {0}, out = {0};
    ck_assert_int_eq(gset_initial(&ir, &a, &set), HEARTH_OK);
    ck_assert_int_eq(gset_advance_bytes(&ir, &a, &set, (const unsigned char *)s, strlen(s), &out),
                     HEARTH_OK);
    bool ok = gset_has(&out, GSTACK_EMPTY);
    gset_free(&set);
    gset_free(&out);
    garena_free(&a);
    grammar_ir_free(&ir);
    return ok;
}

#endif

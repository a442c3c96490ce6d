/*
 * fuzz-grammar.c -- fuzz target for the GBNF compiler and the matcher.
 * Each input is compiled as a grammar; when it compiles, the matcher runs
 * over the input's own bytes, and the cached token mask of a small fixed
 * vocabulary is compared with the brute-force mask at every reachable
 * state along the way.  Every failure must be a status with a message,
 * never a crash, a hang, a leak or a mask that differs.
 */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const pieces[] = {
    "", "a", "b", "ab", "\"", "\",", "{", "}", "[", "]", " ", "\n", "0", "12", "-", ".",
    "x", "\\", "\xc3", "\xa9", "\xc3\xa9", "\xe2\x82\xac", "true", "::=", "(", ")", "|", "#",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096) return 0;
    struct grammar_ir ir;
    if (grammar_ir_parse((const char *)data, size, NULL, NULL, &ir)) return 0;
    const int32_t n = (int32_t)HEARTH_ARRAY_LEN(pieces);
    size_t lens[HEARTH_ARRAY_LEN(pieces)];
    uint8_t kinds[HEARTH_ARRAY_LEN(pieces)];
    for (int32_t t = 0; t < n; t++) {
        lens[t] = strlen(pieces[t]);
        kinds[t] = t == 0 ? GTOK_EOG : GTOK_TEXT;
    }
    struct gvocab v;
    struct gcache *cache = NULL;
    struct gmask_work w = {0};
    struct garena a = {0};
    struct gset set = {0}, next = {0};
    uint64_t fast = 0, slow = 0;
    if (gvocab_build(n, pieces, lens, kinds, &v)) goto out_ir;
    if (gcache_new(&cache) || gmask_work_init(&w, &v) || garena_init(&a)) goto out;
    if (gset_initial(&ir, &a, &set)) goto out;
    for (size_t i = 0; i <= size && i < 64; i++) {
        if (gmask_compute(&ir, &v, cache, &a, &set, &w, &fast)) break;
        if (gmask_brute(&ir, &v, &a, &set, &slow)) break;
        if (fast != slow) abort();
        if (i == size) break;
        if (gset_step(&ir, &a, &set, data[i], &next) || next.n == 0) break;
        struct gset t = set;
        set = next;
        next = t;
    }
out:
    gset_free(&set);
    gset_free(&next);
    garena_free(&a);
    gmask_work_free(&w);
    gcache_free(cache);
    gvocab_free(&v);
out_ir:
    grammar_ir_free(&ir);
    return 0;
}

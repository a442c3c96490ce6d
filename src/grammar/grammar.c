/*
 * grammar.c -- hearth_grammar: a compiled grammar bound to a vocabulary,
 * with the mask cache its matchers share, and the matcher of one sequence
 * that the sampler runs.
 */
#include "internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar.h"

struct hearth_grammar {
    atomic_int refs;
    struct grammar_ir ir;
    struct gvocab vocab;
    struct gcache *cache;
    double compile_ms;
};

struct grammar_matcher {
    hearth_grammar *g;
    struct garena arena, spare;
    struct gset set, next;
    struct gmask_work work;
    uint64_t *mask;
    bool mask_valid;
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

int32_t grammar_n_tokens(const hearth_grammar *g) { return g->vocab.n_tokens; }

/* The vocabulary's tokens as the grammar sees them: the bytes each
 * stands for; control and unknown tokens are never allowed, and the
 * end-of-generation tokens only where the grammar may end. */
static hearth_status vocab_from(const hearth_vocab *vocab, struct gvocab *out)
{
    int32_t n = hearth_vocab_n_tokens(vocab);
    const char **pieces = hearth_calloc((size_t)n, sizeof *pieces, "grammar vocabulary");
    size_t *lens = hearth_calloc((size_t)n, sizeof *lens, "grammar vocabulary");
    uint8_t *kinds = hearth_calloc((size_t)n, 1, "grammar vocabulary");
    hearth_status st = (pieces && lens && kinds) ? HEARTH_OK : HEARTH_E_NOMEM;
    for (int32_t t = 0; !st && t < n; t++) {
        if (hearth_vocab_is_eog(vocab, t)) {
            kinds[t] = GTOK_EOG;
            continue;
        }
        hearth_token_type type = hearth_vocab_token_type(vocab, t);
        if (type == HEARTH_TOKEN_CONTROL || type == HEARTH_TOKEN_UNKNOWN ||
            type == HEARTH_TOKEN_UNUSED)
            continue;
        pieces[t] = hearth_token_piece(vocab, t, 0, &lens[t]);
        if (pieces[t] && lens[t] > 0) kinds[t] = GTOK_TEXT;
    }
    if (!st) st = gvocab_build(n, pieces, lens, kinds, out);
    free(pieces);
    free(lens);
    free(kinds);
    return st;
}

static hearth_status grammar_from_gbnf(const hearth_vocab *vocab, const char *text, size_t len,
                                       struct gbudget *budget, hearth_grammar **out)
{
    double t0 = now_ms();
    hearth_grammar *g = hearth_calloc(1, sizeof *g, "a grammar");
    if (!g) return HEARTH_E_NOMEM;
    atomic_init(&g->refs, 1);
    hearth_status st = grammar_ir_parse(text, len, NULL, budget, &g->ir);
    if (st) {
        free(g);
        return st;
    }
    st = vocab_from(vocab, &g->vocab);
    if (!st) st = gcache_new(&g->cache);
    if (st) {
        hearth_grammar_free(g);
        return st;
    }
    g->compile_ms = now_ms() - t0;
    *out = g;
    return HEARTH_OK;
}

hearth_status hearth_grammar_compile(const hearth_vocab *vocab, hearth_grammar_syntax syntax,
                                     const char *text, size_t len,
                                     const hearth_grammar_options *options, hearth_grammar **out)
{
    if (!out) return hearth_error(HEARTH_E_INVALID, "grammar: out is NULL");
    *out = NULL;
    if (!vocab) return hearth_error(HEARTH_E_INVALID, "grammar: vocab is NULL");
    if (!text && len) return hearth_error(HEARTH_E_INVALID, "grammar: text is NULL");
    if (!text) text = "";
    struct gbudget budget = {.max_steps = GRAMMAR_MAX_STEPS};
    if (options) {
        budget.cancelled = options->cancelled;
        budget.cancel_arg = options->cancel_arg;
    }
    switch (syntax) {
    case HEARTH_GRAMMAR_GBNF:
        return grammar_from_gbnf(vocab, text, len, &budget, out);
    case HEARTH_GRAMMAR_JSON_OBJECT:
        return grammar_from_gbnf(vocab, json_object_gbnf, strlen(json_object_gbnf), &budget, out);
    case HEARTH_GRAMMAR_JSON_SCHEMA: {
        char *gbnf = NULL;
        HEARTH_TRY(json_schema_to_gbnf(text, len, &budget, &gbnf));
        hearth_status st = grammar_from_gbnf(vocab, gbnf, strlen(gbnf), &budget, out);
        if (st) hearth_error_prefix("JSON schema (as a grammar)");
        free(gbnf);
        return st;
    }
    }
    return hearth_error(HEARTH_E_INVALID, "grammar: unknown syntax %d", (int)syntax);
}

hearth_status hearth_grammar_new(const hearth_vocab *vocab, const char *gbnf, size_t len,
                                 hearth_grammar **out)
{
    return hearth_grammar_compile(vocab, HEARTH_GRAMMAR_GBNF, gbnf, len, NULL, out);
}

hearth_status hearth_grammar_from_json_schema(const hearth_vocab *vocab, const char *schema,
                                              size_t len, hearth_grammar **out)
{
    return hearth_grammar_compile(vocab, HEARTH_GRAMMAR_JSON_SCHEMA, schema, len, NULL, out);
}

hearth_status hearth_grammar_json_object(const hearth_vocab *vocab, hearth_grammar **out)
{
    return hearth_grammar_compile(vocab, HEARTH_GRAMMAR_JSON_OBJECT, NULL, 0, NULL, out);
}

hearth_status hearth_json_schema_to_gbnf(const char *schema, size_t len, char **gbnf_out)
{
    if (!gbnf_out) return hearth_error(HEARTH_E_INVALID, "JSON schema: gbnf_out is NULL");
    *gbnf_out = NULL;
    if (!schema && len) return hearth_error(HEARTH_E_INVALID, "JSON schema: text is NULL");
    struct gbudget budget = {.max_steps = GRAMMAR_MAX_STEPS};
    return json_schema_to_gbnf(schema ? schema : "", len, &budget, gbnf_out);
}

hearth_status hearth_grammar_check(const char *gbnf, size_t len)
{
    struct grammar_ir ir;
    if (!gbnf && len) return hearth_error(HEARTH_E_INVALID, "grammar: text is NULL");
    struct gbudget budget = {.max_steps = GRAMMAR_MAX_STEPS};
    HEARTH_TRY(grammar_ir_parse(gbnf ? gbnf : "", len, NULL, &budget, &ir));
    grammar_ir_free(&ir);
    return HEARTH_OK;
}

hearth_grammar *hearth_grammar_ref(hearth_grammar *g)
{
    if (g) atomic_fetch_add(&g->refs, 1);
    return g;
}

void hearth_grammar_free(hearth_grammar *g)
{
    if (!g || atomic_fetch_sub(&g->refs, 1) != 1) return;
    grammar_ir_free(&g->ir);
    gvocab_free(&g->vocab);
    gcache_free(g->cache);
    free(g);
}

void hearth_grammar_get_stats(hearth_grammar *g, hearth_grammar_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!g) return;
    out->n_rules = g->ir.n_rules;
    out->n_positions = g->ir.n_elems;
    out->compile_ms = g->compile_ms;
    int32_t n;
    size_t bytes;
    gcache_stats(g->cache, &n, &bytes);
    out->n_cached_states = n;
    out->cache_bytes = bytes;
}

/* ---- the matcher ------------------------------------------------------- */

void grammar_matcher_free(struct grammar_matcher *m)
{
    if (!m) return;
    garena_free(&m->arena);
    garena_free(&m->spare);
    gset_free(&m->set);
    gset_free(&m->next);
    gmask_work_free(&m->work);
    free(m->mask);
    hearth_grammar_free(m->g);
    free(m);
}

hearth_status grammar_matcher_reset(struct grammar_matcher *m)
{
    garena_truncate(&m->arena, 0);
    m->mask_valid = false;
    return gset_initial(&m->g->ir, &m->arena, &m->set);
}

hearth_status grammar_matcher_new(hearth_grammar *g, struct grammar_matcher **out)
{
    struct grammar_matcher *m = hearth_calloc(1, sizeof *m, "a grammar matcher");
    if (!m) return HEARTH_E_NOMEM;
    m->g = hearth_grammar_ref(g);
    hearth_status st = garena_init(&m->arena);
    if (!st) st = garena_init(&m->spare);
    if (!st) st = gmask_work_init(&m->work, &g->vocab);
    if (!st) {
        m->mask = hearth_calloc(((size_t)g->vocab.n_tokens + 63) / 64, sizeof *m->mask,
                                "a grammar mask");
        if (!m->mask) st = HEARTH_E_NOMEM;
    }
    if (!st) st = grammar_matcher_reset(m);
    if (st) {
        grammar_matcher_free(m);
        return st;
    }
    *out = m;
    return HEARTH_OK;
}

hearth_status grammar_matcher_mask(struct grammar_matcher *m, const uint64_t **mask_out)
{
    if (!m->mask_valid) {
        HEARTH_TRY(gmask_compute(&m->g->ir, &m->g->vocab, m->g->cache, &m->arena, &m->set,
                                 &m->work, m->mask));
        m->mask_valid = true;
    }
    *mask_out = m->mask;
    return HEARTH_OK;
}

hearth_status grammar_matcher_mask_brute(struct grammar_matcher *m, uint64_t *mask)
{
    return gmask_brute(&m->g->ir, &m->g->vocab, &m->arena, &m->set, mask);
}

hearth_status grammar_matcher_accept(struct grammar_matcher *m, int32_t token)
{
    const struct gvocab *v = &m->g->vocab;
    if (token < 0 || token >= v->n_tokens || v->kind[token] == GTOK_NONE)
        return hearth_error(HEARTH_E_INVALID, "grammar: token %d is never allowed", (int)token);
    if (v->kind[token] == GTOK_EOG) {
        if (!gset_has(&m->set, GSTACK_EMPTY))
            return hearth_error(HEARTH_E_INVALID,
                                "grammar: end of generation before the grammar is complete");
        /* only the complete parse remains */
        m->set.n = 0;
        m->set.s[m->set.n++] = GSTACK_EMPTY;
        m->mask_valid = false;
        return HEARTH_OK;
    }
    HEARTH_TRY(gset_advance_bytes(&m->g->ir, &m->arena, &m->set, v->bytes + v->off[token],
                                  v->len[token], &m->next));
    if (m->next.n == 0) {
        garena_truncate(&m->arena, m->arena.n);
        return hearth_error(HEARTH_E_INVALID, "grammar: token %d does not continue the grammar",
                            (int)token);
    }
    /* keep only the live stacks: copy them into the spare arena and swap */
    HEARTH_TRY(gset_rebuild(&m->arena, &m->next, &m->spare, &m->set));
    struct garena t = m->arena;
    m->arena = m->spare;
    m->spare = t;
    m->mask_valid = false;
    return HEARTH_OK;
}

bool grammar_matcher_done(const struct grammar_matcher *m)
{
    return m->set.n == 1 && m->set.s[0] == GSTACK_EMPTY;
}

bool grammar_matcher_can_end(const struct grammar_matcher *m)
{
    return gset_has(&m->set, GSTACK_EMPTY);
}

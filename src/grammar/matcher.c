/*
 * matcher.c -- the pushdown matcher of a compiled grammar: sets of stacks
 * advanced byte by byte.
 *
 * A stack is the list of positions still to match, innermost on top; the
 * top of every stack in a set is a byte element (or the stack is empty:
 * the root rule is complete).  Matching byte b keeps the stacks whose top
 * accepts b, moves each to the next element and expands it: an element
 * that ends an alternative pops the stack, a rule reference is replaced by
 * each of the rule's alternatives (with the rest of the referencing
 * alternative below, unless it is empty -- the tail call that keeps
 * repetitions from growing the stack).
 *
 * Stacks are nodes (position, stack below) in an arena, hash-consed so
 * that equal stacks are the same node: a set never holds a stack twice,
 * and a node met twice while expanding one step is expanded once.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "grammar.h"

#define ARENA_INITIAL 1024

hearth_status garena_init(struct garena *a)
{
    memset(a, 0, sizeof *a);
    a->cap = ARENA_INITIAL;
    a->nodes = hearth_malloc((size_t)a->cap * sizeof *a->nodes, "grammar stacks");
    a->visit = hearth_calloc((size_t)a->cap, sizeof *a->visit, "grammar stacks");
    a->table_mask = 2 * ARENA_INITIAL - 1;
    a->slots = hearth_malloc(((size_t)a->table_mask + 1) * sizeof *a->slots, "grammar stacks");
    a->stamps = hearth_calloc((size_t)a->table_mask + 1, sizeof *a->stamps, "grammar stacks");
    a->gen = 1;
    a->visit_gen = 1;
    if (!a->nodes || !a->visit || !a->slots || !a->stamps) {
        garena_free(a);
        return HEARTH_E_NOMEM;
    }
    return HEARTH_OK;
}

void garena_free(struct garena *a)
{
    free(a->nodes);
    free(a->visit);
    free(a->slots);
    free(a->stamps);
    memset(a, 0, sizeof *a);
}

static void new_generation(struct garena *a)
{
    if (++a->gen == 0) {
        memset(a->stamps, 0, ((size_t)a->table_mask + 1) * sizeof *a->stamps);
        a->gen = 1;
    }
    a->gen_first = a->n;
    a->gen_count = 0;
}

void garena_truncate(struct garena *a, int32_t mark)
{
    if (mark < a->n) a->n = mark;
    new_generation(a);
}

static inline uint32_t node_hash(int32_t pos, int32_t parent)
{
    uint64_t h = ((uint64_t)(uint32_t)pos << 32) | (uint32_t)parent;
    h *= 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32);
}

static hearth_status table_grow(struct garena *a)
{
    uint32_t size = (a->table_mask + 1) * 2;
    int32_t *slots = hearth_malloc((size_t)size * sizeof *slots, "grammar stacks");
    uint32_t *stamps = hearth_calloc(size, sizeof *stamps, "grammar stacks");
    if (!slots || !stamps) {
        free(slots);
        free(stamps);
        return HEARTH_E_NOMEM;
    }
    free(a->slots);
    free(a->stamps);
    a->slots = slots;
    a->stamps = stamps;
    a->table_mask = size - 1;
    a->gen = 1;
    for (int32_t i = a->gen_first; i < a->n; i++) {
        uint32_t h = node_hash(a->nodes[i].pos, a->nodes[i].parent) & a->table_mask;
        while (a->stamps[h] == a->gen) h = (h + 1) & a->table_mask;
        a->stamps[h] = a->gen;
        a->slots[h] = i;
    }
    return HEARTH_OK;
}

hearth_status garena_node(struct garena *a, int32_t pos, int32_t parent, int32_t *out)
{
    uint32_t h = node_hash(pos, parent) & a->table_mask;
    while (a->stamps[h] == a->gen) {
        const struct gnode *n = &a->nodes[a->slots[h]];
        if (n->pos == pos && n->parent == parent) {
            *out = a->slots[h];
            return HEARTH_OK;
        }
        h = (h + 1) & a->table_mask;
    }
    if (a->n == a->cap) {
        if (a->cap >= (1 << 28)) return hearth_error(HEARTH_E_RANGE, "grammar: too many stacks");
        int32_t cap = 2 * a->cap;
        struct gnode *nodes = hearth_realloc(a->nodes, (size_t)cap * sizeof *nodes, "grammar stacks");
        if (!nodes) return HEARTH_E_NOMEM;
        a->nodes = nodes;
        uint32_t *visit = hearth_realloc(a->visit, (size_t)cap * sizeof *visit, "grammar stacks");
        if (!visit) return HEARTH_E_NOMEM;
        memset(visit + a->cap, 0, (size_t)(cap - a->cap) * sizeof *visit);
        a->visit = visit;
        a->cap = cap;
    }
    int32_t id = a->n++;
    a->nodes[id].pos = pos;
    a->nodes[id].parent = parent;
    a->visit[id] = 0;
    a->stamps[h] = a->gen;
    a->slots[h] = id;
    if ((uint32_t)++a->gen_count * 2 > a->table_mask) HEARTH_TRY(table_grow(a));
    *out = id;
    return HEARTH_OK;
}

void gset_free(struct gset *set)
{
    free(set->s);
    memset(set, 0, sizeof *set);
}

static hearth_status gset_push(struct gset *set, int32_t n)
{
    if (set->n == set->cap) {
        if (set->n >= GSET_MAX)
            return hearth_error(HEARTH_E_RANGE,
                                "grammar: more than %d ways to continue at once (the grammar is "
                                "too ambiguous)", GSET_MAX);
        int32_t cap = set->cap ? 2 * set->cap : 8;
        int32_t *s = hearth_realloc(set->s, (size_t)cap * sizeof *s, "a grammar state");
        if (!s) return HEARTH_E_NOMEM;
        set->s = s;
        set->cap = cap;
    }
    set->s[set->n++] = n;
    return HEARTH_OK;
}

bool gset_has(const struct gset *set, int32_t n)
{
    for (int32_t i = 0; i < set->n; i++)
        if (set->s[i] == n) return true;
    return false;
}

/* The closure of node n (see the file comment), one expansion per node
 * per step through the visit marks. */
static hearth_status expand(const struct grammar_ir *g, struct garena *a, int32_t n,
                            struct gset *out)
{
    for (;;) {
        if (n < 0) {
            if (!gset_has(out, n)) return gset_push(out, n);
            return HEARTH_OK;
        }
        if (a->visit[n] == a->visit_gen) return HEARTH_OK;
        a->visit[n] = a->visit_gen;
        const struct gnode node = a->nodes[n];
        const struct gelem *e = &g->elems[node.pos];
        if (e->type == GE_BYTES) return gset_push(out, n);
        if (e->type == GE_END) {
            n = node.parent;
            continue;
        }
        /* a rule reference */
        int32_t cont = node.parent;
        if (e[1].type != GE_END) HEARTH_TRY(garena_node(a, node.pos + 1, node.parent, &cont));
        const int32_t rule = e->value;
        for (int32_t alt = g->rule_first[rule]; alt < g->rule_first[rule + 1]; alt++) {
            int32_t start = g->alt_start[alt], m;
            if (g->elems[start].type == GE_END) m = cont;
            else HEARTH_TRY(garena_node(a, start, cont, &m));
            HEARTH_TRY(expand(g, a, m, out));
        }
        return HEARTH_OK;
    }
}

hearth_status gset_expand(const struct grammar_ir *g, struct garena *a, int32_t n, struct gset *out)
{
    return expand(g, a, n, out);
}

static void next_visit(struct garena *a)
{
    if (++a->visit_gen == 0) {
        memset(a->visit, 0, (size_t)a->cap * sizeof *a->visit);
        a->visit_gen = 1;
    }
}

hearth_status gset_step(const struct grammar_ir *g, struct garena *a, const struct gset *in,
                        unsigned b, struct gset *out)
{
    out->n = 0;
    next_visit(a);
    for (int32_t i = 0; i < in->n; i++) {
        int32_t n = in->s[i];
        if (n < 0) continue;
        const struct gnode node = a->nodes[n];
        if (!byteset_has(g->sets[g->elems[node.pos].value], b)) continue;
        int32_t m;
        if (g->elems[node.pos + 1].type == GE_END) m = node.parent;
        else HEARTH_TRY(garena_node(a, node.pos + 1, node.parent, &m));
        HEARTH_TRY(expand(g, a, m, out));
    }
    return HEARTH_OK;
}

hearth_status gset_closure(const struct grammar_ir *g, struct garena *a, int32_t n, struct gset *out)
{
    out->n = 0;
    next_visit(a);
    return expand(g, a, n, out);
}

hearth_status gset_initial(const struct grammar_ir *g, struct garena *a, struct gset *out)
{
    out->n = 0;
    next_visit(a);
    for (int32_t alt = g->rule_first[g->root]; alt < g->rule_first[g->root + 1]; alt++) {
        int32_t start = g->alt_start[alt], m = GSTACK_EMPTY;
        if (g->elems[start].type != GE_END) HEARTH_TRY(garena_node(a, start, GSTACK_EMPTY, &m));
        HEARTH_TRY(expand(g, a, m, out));
    }
    return HEARTH_OK;
}

hearth_status gset_advance_bytes(const struct grammar_ir *g, struct garena *a,
                                 const struct gset *set, const unsigned char *bytes, size_t len,
                                 struct gset *out)
{
    struct gset tmp = {0};
    hearth_status st = HEARTH_OK;
    out->n = 0;
    for (int32_t i = 0; i < set->n && !st; i++) st = gset_push(out, set->s[i]);
    for (size_t k = 0; k < len && !st && out->n > 0; k++) {
        st = gset_step(g, a, out, bytes[k], &tmp);
        struct gset swap = *out;
        *out = tmp;
        tmp = swap;
    }
    gset_free(&tmp);
    return st;
}

/* Copy the stack of node n (of `from`) into `to`, bottom first. */
static hearth_status copy_stack(const struct garena *from, int32_t n, struct garena *to,
                                int32_t *out)
{
    if (n < 0) {
        *out = n;
        return HEARTH_OK;
    }
    int32_t depth = 0;
    for (int32_t k = n; k >= 0; k = from->nodes[k].parent) depth++;
    int32_t *path = hearth_malloc((size_t)depth * sizeof *path, "a grammar stack");
    if (!path) return HEARTH_E_NOMEM;
    int32_t i = depth, bottom = GSTACK_EMPTY;
    for (int32_t k = n; k >= 0; k = from->nodes[k].parent) {
        path[--i] = k;
        bottom = from->nodes[k].parent;
    }
    int32_t cur = bottom;
    hearth_status st = HEARTH_OK;
    for (i = 0; i < depth && !st; i++) st = garena_node(to, from->nodes[path[i]].pos, cur, &cur);
    free(path);
    *out = cur;
    return st;
}

hearth_status gset_rebuild(const struct garena *from, const struct gset *set, struct garena *to,
                           struct gset *out)
{
    to->n = 0;
    new_generation(to);
    out->n = 0;
    for (int32_t i = 0; i < set->n; i++) {
        int32_t m;
        HEARTH_TRY(copy_stack(from, set->s[i], to, &m));
        if (!gset_has(out, m)) HEARTH_TRY(gset_push(out, m));
    }
    return HEARTH_OK;
}

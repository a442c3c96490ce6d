/*
 * grammar.h -- internal interface of the grammar engine: the compiled form
 * of a GBNF grammar (gbnf.c), the pushdown matcher that runs it over bytes
 * (matcher.c), the token masks over a vocabulary (mask.c), the JSON Schema
 * translator (json_schema.c) and the public hearth_grammar (grammar.c).
 *
 * A grammar is compiled to bytes: every character class becomes
 * alternatives of UTF-8 byte ranges, so a token whose bytes end inside a
 * character simply leaves the matcher inside that character, and a token
 * that is not UTF-8 where the grammar needs a character is refused.
 */
#ifndef HEARTH_GRAMMAR_H
#define HEARTH_GRAMMAR_H

#include "internal.h"

/* ---- the compiled grammar (gbnf.c) ------------------------------------- */

enum gelem_type {
    GE_END = 0,   /* end of an alternative */
    GE_BYTES = 1, /* one byte of the set `value` */
    GE_REF = 2    /* the rule `value` */
};

struct gelem {
    int32_t type;
    int32_t value;
};

/* Rules are lists of alternatives; an alternative is a run of elements in
 * elems ending with GE_END, so the element after a position is the next
 * one to match.  There is no left recursion (the compiler refuses it). */
struct grammar_ir {
    struct gelem *elems;
    int32_t n_elems;
    int32_t *alt_start;   /* first element of each alternative */
    int32_t n_alts;
    int32_t *rule_first;  /* rule r's alternatives: rule_first[r] .. rule_first[r + 1] - 1 */
    int32_t n_rules;
    char **rule_names;    /* as written, or "<parent>-<n>" for the generated ones */
    uint64_t (*sets)[4];  /* byte sets, 256 bits each */
    int32_t n_sets;
    int32_t root;
};

static inline bool byteset_has(const uint64_t set[4], unsigned b)
{
    return (set[b >> 6] >> (b & 63)) & 1u;
}

/* What compiling one grammar may spend: steps of work (an element built,
 * a probe of a lookup, an edge of a check), counted so that the work is
 * bounded and measurable, and a callback polled every few thousand steps
 * that stops it (the server's, when the client hangs up). */
struct gbudget {
    uint64_t steps;
    uint64_t max_steps;     /* 0: no limit */
    uint64_t next_poll;
    int (*cancelled)(void *arg);
    void *cancel_arg;
};

/* The steps a compilation may take (hearth-grammar(7)): far above what
 * the limits on rules and elements let a near-linear compiler spend. */
#define GRAMMAR_MAX_STEPS (UINT64_C(1) << 27)

/* Count n steps (b may be NULL): HEARTH_E_RANGE past b->max_steps,
 * HEARTH_E_INTERRUPTED when b->cancelled says so. */
hearth_status gbudget_spend(struct gbudget *b, uint64_t n);

/* Compile GBNF text (valid UTF-8) with start rule `root` (NULL: "root"),
 * within budget (NULL: none).  HEARTH_E_FORMAT names the line and column
 * of the first error. */
hearth_status grammar_ir_parse(const char *text, size_t len, const char *root,
                               struct gbudget *budget, struct grammar_ir *out);
void grammar_ir_free(struct grammar_ir *ir);

/* ---- the matcher (matcher.c) ------------------------------------------ */

/* A stack is a node: the position it is at (an element index) and the
 * stack below it.  Nodes are shared (a stack that differs only at its top
 * from another shares their rest) and hash-consed in an arena, so equal
 * stacks are one node.  These two values are not nodes: */
#define GSTACK_EMPTY (-1)    /* the root rule is complete */
#define GSTACK_CONTEXT (-2)  /* bottom of a stack-independent simulation (mask.c) */

struct gnode {
    int32_t pos;
    int32_t parent;
};

struct garena {
    struct gnode *nodes;
    uint32_t *visit;      /* per node: the step that last expanded it */
    int32_t n, cap;
    int32_t *slots;       /* hash table of nodes, valid where stamp == gen */
    uint32_t *stamps;
    uint32_t table_mask;
    uint32_t gen;
    int32_t gen_first;    /* nodes from here on are in the table */
    int32_t gen_count;
    uint32_t visit_gen;
};

/* A set of stacks whose tops are GE_BYTES positions (or the two markers). */
struct gset {
    int32_t *s;
    int32_t n, cap;
};

/* Most stacks one set may hold; past it the grammar is refused as too
 * ambiguous for the input. */
#define GSET_MAX 4096

hearth_status garena_init(struct garena *a);
void garena_free(struct garena *a);
/* Forget every node from `mark` on (and start a new hash generation). */
void garena_truncate(struct garena *a, int32_t mark);

void gset_free(struct gset *set);
/* Stacks after `parent` ends an alternative or a rule is pushed: the
 * closure of node `n` into `out` (which keeps what it had). */
hearth_status gset_expand(const struct grammar_ir *g, struct garena *a, int32_t n,
                          struct gset *out);
/* The closure of node `n` alone, into out (emptied first): the stacks a
 * continuation position stands for. */
hearth_status gset_closure(const struct grammar_ir *g, struct garena *a, int32_t n,
                           struct gset *out);
/* The stacks of `in` that accept byte b, advanced over it, into out
 * (emptied first).  in and out must differ. */
hearth_status gset_step(const struct grammar_ir *g, struct garena *a, const struct gset *in,
                        unsigned b, struct gset *out);
/* The stacks the grammar starts with. */
hearth_status gset_initial(const struct grammar_ir *g, struct garena *a, struct gset *out);
bool gset_has(const struct gset *set, int32_t n);
/* Copy the stacks of `set` (nodes of `from`) into a fresh arena `to`. */
hearth_status gset_rebuild(const struct garena *from, const struct gset *set, struct garena *to,
                           struct gset *out);
/* The node (pos, parent), created if new. */
hearth_status garena_node(struct garena *a, int32_t pos, int32_t parent, int32_t *out);

/* ---- tokens and masks (mask.c) ----------------------------------------- */

/* A node of the vocabulary's prefix tree, in preorder.  Node i's subtree
 * is nodes i .. end - 1; the tokens ending at it are sorted[tok_lo ..
 * node[i + 1].tok_lo), those of its subtree sorted[tok_lo ..
 * node[end].tok_lo) (the node past the last has tok_lo n_sorted). */
struct gtrie_node {
    uint8_t byte;        /* the last byte of the node's prefix */
    uint8_t unused;
    uint16_t depth;      /* bytes of the prefix (the root's children: 1) */
    int32_t end;
    int32_t tok_lo;
};

/* The vocabulary as the grammar sees it: each token's bytes, the tokens
 * in byte order with the common prefix of neighbours, and a prefix tree. */
struct gvocab {
    int32_t n_tokens;
    uint32_t *off, *len;          /* bytes of token t: bytes[off[t] .. off[t] + len[t]) */
    unsigned char *bytes;
    uint8_t *kind;                /* GTOK_* */
    int32_t *sorted;              /* maskable tokens in byte order */
    int32_t n_sorted;
    uint16_t *lcp;                /* common prefix of sorted[i - 1] and sorted[i] */
    int32_t max_len;
    /* the prefix tree in preorder, n_trie nodes and a last one past them */
    int32_t n_trie;
    struct gtrie_node *trie;
    int32_t *eog;                 /* end-of-generation tokens */
    int32_t n_eog;
    uint64_t *universe;           /* bitset of maskable tokens */
};

enum { GTOK_NONE = 0, GTOK_TEXT = 1, GTOK_EOG = 2 };

/* Build from explicit tokens: bytes of token t at pieces[t] (lens[t]),
 * kind[t] one of GTOK_*. */
hearth_status gvocab_build(int32_t n_tokens, const char *const *pieces, const size_t *lens,
                           const uint8_t *kinds, struct gvocab *out);
void gvocab_free(struct gvocab *v);

/* What a stack accepts is decided, for most tokens, by its top few
 * positions alone: the cache is keyed by the top GCACHE_DEPTH positions
 * of a stack (and whether the stack ends below them), and holds the
 * tokens accepted whatever lies below (as a list, as the complement of a
 * list, or as a bitset) and the tokens that leave the key part way
 * through, which only the stack below decides.  For those the entry
 * keeps their tails: what is left of a token at each point where the
 * key's positions are all complete, distinct tails in byte order, each
 * with the tokens that have it.  A mask then matches only the tails, from
 * the stack below the key.  Entries are computed the first time a key is
 * met and shared by every matcher of the grammar. */
#define GCACHE_DEPTH 3
enum { GCACHE_ACCEPT_LIST = 0, GCACHE_REJECT_LIST = 1, GCACHE_BITSET = 2 };

struct gcache_entry {
    int32_t key[GCACHE_DEPTH + 1];
    int32_t kind;
    int32_t n_ids;
    int32_t *ids;          /* ACCEPT_LIST / REJECT_LIST: token ids */
    uint64_t *bits;        /* BITSET */
    int32_t n_uncertain;   /* tokens that leave the key part way */
    int32_t n_tails;       /* their distinct tails, in byte order: */
    int32_t *tail_tok;     /*   tail j is token tail_tok[j]'s bytes from tail_at[j] on */
    uint16_t *tail_at;
    uint16_t *tail_lcp;    /*   common prefix with tail j - 1 */
    int32_t *tail_first;   /*   its tokens: tail_ids[tail_first[j] .. tail_first[j + 1]) */
    int32_t *tail_ids;
};

struct gcache;

hearth_status gcache_new(struct gcache **out);
void gcache_free(struct gcache *c);
/* Entries and bytes held (for the statistics). */
void gcache_stats(struct gcache *c, int32_t *n_entries, size_t *bytes);

/* Scratch state of mask computations: per-depth sets, an arena, and the
 * automaton of an entry's walk (mask.c). */
struct gdfa;

struct gmask_work {
    struct gset *sets;     /* max_len + 1 */
    int32_t n_sets;
    uint64_t *tmp;         /* a bitset */
    struct garena sim;     /* the automaton's stacks */
    struct gdfa *dfa;
    int32_t dfa_max_tables; /* transition tables kept at once (0: the default) */
    int32_t dfa_max_states; /* states past which it starts afresh (0: the default) */
};

hearth_status gmask_work_init(struct gmask_work *w, const struct gvocab *v);
void gmask_work_free(struct gmask_work *w);

/* The allowed tokens for the stacks in `set` (nodes of `a`) into mask
 * (a bitset of n_tokens bits), through the cache. */
hearth_status gmask_compute(const struct grammar_ir *g, const struct gvocab *v, struct gcache *c,
                            struct garena *a, const struct gset *set, struct gmask_work *w,
                            uint64_t *mask);
/* The same by simulating every token (the reference for the tests). */
hearth_status gmask_brute(const struct grammar_ir *g, const struct gvocab *v, struct garena *a,
                          const struct gset *set, uint64_t *mask);

/* Advance set over bytes (nodes of a), into out; out->n == 0 when the
 * grammar refuses them. */
hearth_status gset_advance_bytes(const struct grammar_ir *g, struct garena *a,
                                 const struct gset *set, const unsigned char *bytes, size_t len,
                                 struct gset *out);

/* ---- JSON Schema (json_schema.c) -------------------------------------- */

/* The GBNF text for a JSON Schema (a malloc'ed string).  A keyword
 * outside the supported subset is HEARTH_E_UNSUPPORTED naming it; a
 * malformed schema HEARTH_E_FORMAT naming where. */
hearth_status json_schema_to_gbnf(const char *schema, size_t len, struct gbudget *budget,
                                 char **gbnf_out);
/* The GBNF text of JSON mode: any JSON object. */
extern const char json_object_gbnf[];

/* ---- the matcher of a sequence (grammar.c) ----------------------------- */

struct grammar_matcher;

hearth_status grammar_matcher_new(hearth_grammar *g, struct grammar_matcher **out);
void grammar_matcher_free(struct grammar_matcher *m);
hearth_status grammar_matcher_reset(struct grammar_matcher *m);
/* The allowed tokens (a bitset of the grammar's n_tokens bits). */
hearth_status grammar_matcher_mask(struct grammar_matcher *m, const uint64_t **mask_out);
/* The allowed tokens by simulating every token (the reference for the
 * tests), into mask (n_tokens bits). */
hearth_status grammar_matcher_mask_brute(struct grammar_matcher *m, uint64_t *mask);
/* Advance over a token; HEARTH_E_INVALID when the grammar does not allow it. */
hearth_status grammar_matcher_accept(struct grammar_matcher *m, int32_t token);
/* Whether the grammar is complete and nothing may follow. */
bool grammar_matcher_done(const struct grammar_matcher *m);
/* Whether the grammar may end here. */
bool grammar_matcher_can_end(const struct grammar_matcher *m);
int32_t grammar_n_tokens(const hearth_grammar *g);

#endif /* HEARTH_GRAMMAR_H */

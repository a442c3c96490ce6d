/*
 * gbnf.c -- the GBNF grammar notation compiled to byte-level rules.
 *
 * The notation (see hearth-grammar(7)):
 *
 *   name ::= alternatives          one rule per line; a rule continues on
 *                                  the next lines inside ( ) and after |
 *   a b c                          sequence
 *   a | b                          alternation
 *   ( ... )                        grouping
 *   x? x* x+ x{m} x{m,} x{m,n} x{,n}   repetition
 *   "text"                         literal (escapes \n \r \t \\ \" \' \[ \]
 *                                  \- \^ \/ \xHH \uHHHH \UHHHHHHHH)
 *   [a-z_] [^"\\]                  character class, ranges, negation
 *   .                              any character
 *   # comment                      to the end of the line
 *
 * Everything is compiled to bytes: a literal to its UTF-8 bytes, a
 * character class to alternatives of UTF-8 byte ranges (the classic split
 * of a code point range into ranges whose bytes vary independently),
 * groups and repetitions to generated rules.  Repetition x{m,n} becomes m
 * copies of x and a chain of n - m nested optional copies, so the rules
 * stay right-recursive and the matcher's stacks stay shallow.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "textbuf.h"
#include "utf8.h"

/* Limits on what one grammar may expand to (hearth-grammar(7)). */
#define GBNF_MAX_ELEMS (1 << 22)
#define GBNF_MAX_RULES (1 << 20)
#define GBNF_MAX_REPEAT 100000
#define GBNF_MAX_NESTING 256
/* Elements that merging alternatives may copy besides the grammar's own,
 * and the alternatives a rule must have before its leading references
 * are followed (a few alternatives cost the matcher a few readings at
 * most, and copying them would only make the grammar larger). */
#define GBNF_INLINE_FLOOR (1 << 16)
#define GBNF_INLINE_MIN_ALTS 32

/* Steps between two polls of the cancellation callback. */
#define GBNF_POLL_STEPS 4096

struct seq {
    struct gelem *e;
    int32_t n, cap;
};

struct rule {
    char *name;
    struct seq *alts;
    int32_t n_alts, cap_alts;
    bool defined;
    int ref_line, ref_col;   /* first reference, for "undefined rule" */
};

/* A cached character class: its ranges (as text) and the element for it. */
struct class_entry {
    char *key;
    struct gelem elem;
};

/* Ids of rules, byte sets or classes by a hash of what they are, so that
 * a lookup costs the same however many there are: open addressing, the
 * hash kept beside each id for growing. */
struct id_index {
    int32_t *ids;     /* -1: free */
    uint32_t *hashes;
    uint32_t mask;
    int32_t n;
};

struct parser {
    const char *text, *p, *end;
    int line;
    const char *line_start;
    int depth;

    struct rule *rules;
    int32_t n_rules, cap_rules;
    uint64_t (*sets)[4];
    int32_t n_sets, cap_sets;
    struct class_entry *classes;
    int32_t n_classes, cap_classes;
    size_t n_elems_total;
    struct id_index rule_index, set_index, class_index;
    struct gbudget *budget;
};

/* ---- errors ------------------------------------------------------------ */

static int column_of(const struct parser *ps, const char *at)
{
    return (int)utf8_count(ps->line_start, (size_t)(at - ps->line_start)) + 1;
}

static hearth_status perr_at(const struct parser *ps, const char *at, const char *fmt, ...)
    HEARTH_PRINTF(3, 4);

static hearth_status perr_at(const struct parser *ps, const char *at, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return hearth_error(HEARTH_E_FORMAT, "grammar line %d, column %d: %s", ps->line,
                        column_of(ps, at), msg);
}

/* ---- the work budget ------------------------------------------------- */

/* Count n steps of work; past the budget's limit, or when its callback
 * says so, compiling stops. */
hearth_status gbudget_spend(struct gbudget *b, uint64_t n)
{
    if (!b) return HEARTH_OK;
    b->steps += n;
    if (b->max_steps && b->steps > b->max_steps)
        return hearth_error(HEARTH_E_RANGE,
                            "grammar: compiling it takes more than %llu steps (the grammar is "
                            "too large)", (unsigned long long)b->max_steps);
    if (b->cancelled && b->steps >= b->next_poll) {
        b->next_poll = b->steps + GBNF_POLL_STEPS;
        if (b->cancelled(b->cancel_arg))
            return hearth_error(HEARTH_E_INTERRUPTED, "grammar: compiling cancelled");
    }
    return HEARTH_OK;
}

static uint32_t bytes_hash(const void *p, size_t len)
{
    /* FNV-1a */
    const unsigned char *b = p;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) h = (h ^ b[i]) * 16777619u;
    return h;
}

static void id_index_free(struct id_index *ix)
{
    free(ix->ids);
    free(ix->hashes);
    memset(ix, 0, sizeof *ix);
}

/* The slot of the id whose hash is h and for which same() holds, or of
 * the free slot where it would go; each probe is a step of the budget. */
static hearth_status id_index_find(struct parser *ps, struct id_index *ix, uint32_t h,
                                   bool (*same)(const struct parser *, int32_t, const void *),
                                   const void *key, uint32_t *slot)
{
    if (!ix->ids) {
        ix->mask = 63;
        ix->ids = hearth_malloc((ix->mask + 1) * sizeof *ix->ids, "a grammar index");
        ix->hashes = hearth_malloc((ix->mask + 1) * sizeof *ix->hashes, "a grammar index");
        if (!ix->ids || !ix->hashes) return HEARTH_E_NOMEM;
        memset(ix->ids, 0xff, (ix->mask + 1) * sizeof *ix->ids);
    }
    uint32_t i = h & ix->mask;
    for (;;) {
        HEARTH_TRY(gbudget_spend(ps->budget, 1));
        if (ix->ids[i] < 0 || (ix->hashes[i] == h && same(ps, ix->ids[i], key))) break;
        i = (i + 1) & ix->mask;
    }
    *slot = i;
    return HEARTH_OK;
}

/* Put id (hash h) in the free slot id_index_find() returned. */
static hearth_status id_index_put(struct id_index *ix, uint32_t slot, uint32_t h, int32_t id)
{
    ix->ids[slot] = id;
    ix->hashes[slot] = h;
    if ((uint32_t)++ix->n * 2 <= ix->mask) return HEARTH_OK;
    uint32_t size = (ix->mask + 1) * 2;
    int32_t *ids = hearth_malloc(size * sizeof *ids, "a grammar index");
    uint32_t *hashes = hearth_malloc(size * sizeof *hashes, "a grammar index");
    if (!ids || !hashes) {
        free(ids);
        free(hashes);
        return HEARTH_E_NOMEM;
    }
    memset(ids, 0xff, size * sizeof *ids);
    for (uint32_t i = 0; i <= ix->mask; i++) {
        if (ix->ids[i] < 0) continue;
        uint32_t j = ix->hashes[i] & (size - 1);
        while (ids[j] >= 0) j = (j + 1) & (size - 1);
        ids[j] = ix->ids[i];
        hashes[j] = ix->hashes[i];
    }
    free(ix->ids);
    free(ix->hashes);
    ix->ids = ids;
    ix->hashes = hashes;
    ix->mask = size - 1;
    return HEARTH_OK;
}

struct name_key {
    const char *name;
    size_t len;
};

static bool same_rule_name(const struct parser *ps, int32_t id, const void *key)
{
    const struct name_key *k = key;
    const char *name = ps->rules[id].name;
    return strncmp(name, k->name, k->len) == 0 && name[k->len] == '\0';
}

static bool same_set(const struct parser *ps, int32_t id, const void *key)
{
    return memcmp(ps->sets[id], key, sizeof ps->sets[id]) == 0;
}

static bool same_class(const struct parser *ps, int32_t id, const void *key)
{
    return strcmp(ps->classes[id].key, key) == 0;
}

/* ---- building ---------------------------------------------------------- */

static hearth_status seq_push(struct parser *ps, struct seq *s, int32_t type, int32_t value)
{
    if (++ps->n_elems_total > GBNF_MAX_ELEMS)
        return perr_at(ps, ps->p, "the grammar expands to more than %d elements", GBNF_MAX_ELEMS);
    HEARTH_TRY(gbudget_spend(ps->budget, 1));
    if (s->n == s->cap) {
        int32_t cap = s->cap ? 2 * s->cap : 8;
        struct gelem *e = hearth_realloc(s->e, (size_t)cap * sizeof *e, "grammar elements");
        if (!e) return HEARTH_E_NOMEM;
        s->e = e;
        s->cap = cap;
    }
    s->e[s->n].type = type;
    s->e[s->n].value = value;
    s->n++;
    return HEARTH_OK;
}

static hearth_status seq_append(struct parser *ps, struct seq *s, const struct gelem *e, int32_t n)
{
    for (int32_t i = 0; i < n; i++) HEARTH_TRY(seq_push(ps, s, e[i].type, e[i].value));
    return HEARTH_OK;
}

static hearth_status rule_add_alt(struct rule *r, struct seq **out)
{
    if (r->n_alts == r->cap_alts) {
        int32_t cap = r->cap_alts ? 2 * r->cap_alts : 4;
        struct seq *a = hearth_realloc(r->alts, (size_t)cap * sizeof *a, "grammar alternatives");
        if (!a) return HEARTH_E_NOMEM;
        r->alts = a;
        r->cap_alts = cap;
    }
    memset(&r->alts[r->n_alts], 0, sizeof r->alts[0]);
    *out = &r->alts[r->n_alts++];
    return HEARTH_OK;
}

/* A new rule named name[0..len) (copied). */
static hearth_status rule_new(struct parser *ps, const char *name, size_t len, int32_t *id)
{
    if (ps->n_rules >= GBNF_MAX_RULES)
        return perr_at(ps, ps->p, "the grammar expands to more than %d rules", GBNF_MAX_RULES);
    if (ps->n_rules == ps->cap_rules) {
        int32_t cap = ps->cap_rules ? 2 * ps->cap_rules : 16;
        struct rule *r = hearth_realloc(ps->rules, (size_t)cap * sizeof *r, "grammar rules");
        if (!r) return HEARTH_E_NOMEM;
        ps->rules = r;
        ps->cap_rules = cap;
    }
    struct name_key key = {name, len};
    uint32_t h = bytes_hash(name, len), slot;
    HEARTH_TRY(id_index_find(ps, &ps->rule_index, h, same_rule_name, &key, &slot));
    struct rule *r = &ps->rules[ps->n_rules];
    memset(r, 0, sizeof *r);
    r->name = hearth_strndup(name, len, "a rule name");
    if (!r->name) return HEARTH_E_NOMEM;
    *id = ps->n_rules++;
    return id_index_put(&ps->rule_index, slot, h, *id);
}

/* A generated rule named after `parent`. */
static hearth_status rule_generated(struct parser *ps, int32_t parent, int32_t *id)
{
    char name[96];
    snprintf(name, sizeof name, "%.64s-%d", ps->rules[parent].name, (int)ps->n_rules);
    HEARTH_TRY(rule_new(ps, name, strlen(name), id));
    ps->rules[*id].defined = true;
    return HEARTH_OK;
}

static hearth_status rule_find(struct parser *ps, const char *name, size_t len, const char *at,
                               int32_t *id)
{
    struct name_key key = {name, len};
    uint32_t slot;
    HEARTH_TRY(id_index_find(ps, &ps->rule_index, bytes_hash(name, len), same_rule_name, &key,
                             &slot));
    if (ps->rule_index.ids[slot] >= 0) {
        *id = ps->rule_index.ids[slot];
        return HEARTH_OK;
    }
    HEARTH_TRY(rule_new(ps, name, len, id));
    ps->rules[*id].ref_line = ps->line;
    ps->rules[*id].ref_col = column_of(ps, at);
    return HEARTH_OK;
}

static hearth_status set_add(struct parser *ps, const uint64_t set[4], int32_t *id)
{
    uint32_t h = bytes_hash(set, sizeof ps->sets[0]), slot;
    HEARTH_TRY(id_index_find(ps, &ps->set_index, h, same_set, set, &slot));
    if (ps->set_index.ids[slot] >= 0) {
        *id = ps->set_index.ids[slot];
        return HEARTH_OK;
    }
    if (ps->n_sets == ps->cap_sets) {
        int32_t cap = ps->cap_sets ? 2 * ps->cap_sets : 32;
        uint64_t(*s)[4] = hearth_realloc(ps->sets, (size_t)cap * sizeof *s, "grammar byte sets");
        if (!s) return HEARTH_E_NOMEM;
        ps->sets = s;
        ps->cap_sets = cap;
    }
    memcpy(ps->sets[ps->n_sets], set, sizeof ps->sets[0]);
    *id = ps->n_sets++;
    return id_index_put(&ps->set_index, slot, h, *id);
}

static void set_range(uint64_t set[4], unsigned lo, unsigned hi)
{
    for (unsigned b = lo; b <= hi; b++) set[b >> 6] |= (uint64_t)1 << (b & 63);
}

static hearth_status push_byte_range(struct parser *ps, struct seq *s, unsigned lo, unsigned hi)
{
    uint64_t set[4] = {0};
    set_range(set, lo, hi);
    int32_t id;
    HEARTH_TRY(set_add(ps, set, &id));
    return seq_push(ps, s, GE_BYTES, id);
}

/* ---- character classes to UTF-8 byte ranges ---------------------------- */

struct cp_range {
    uint32_t lo, hi;
};

struct utf8_alt {
    int n;
    unsigned char lo[4], hi[4];
};

struct utf8_alts {
    struct utf8_alt *a;
    int n, cap;
};

static hearth_status utf8_alts_push(struct utf8_alts *alts, uint32_t lo, uint32_t hi)
{
    if (alts->n == alts->cap) {
        int cap = alts->cap ? 2 * alts->cap : 16;
        struct utf8_alt *a = hearth_realloc(alts->a, (size_t)cap * sizeof *a, "UTF-8 ranges");
        if (!a) return HEARTH_E_NOMEM;
        alts->a = a;
        alts->cap = cap;
    }
    struct utf8_alt *u = &alts->a[alts->n++];
    char bl[4], bh[4];
    size_t n = utf8_encode(lo, bl);
    utf8_encode(hi, bh);
    u->n = (int)n;
    for (size_t i = 0; i < n; i++) {
        u->lo[i] = (unsigned char)bl[i];
        u->hi[i] = (unsigned char)bh[i];
    }
    return HEARTH_OK;
}

/* Split [lo, hi] (same encoded length, no surrogates) until each piece is
 * a product of byte ranges. */
static hearth_status utf8_split(struct utf8_alts *alts, uint32_t lo, uint32_t hi)
{
    static const uint32_t limits[] = {0x7F, 0x7FF, 0xFFFF};
    for (int i = 0; i < 3; i++)
        if (lo <= limits[i] && hi > limits[i]) {
            HEARTH_TRY(utf8_split(alts, lo, limits[i]));
            return utf8_split(alts, limits[i] + 1, hi);
        }
    if (hi < 0x80) return utf8_alts_push(alts, lo, hi);
    for (int i = 1; i < 4; i++) {
        uint32_t m = ((uint32_t)1 << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                HEARTH_TRY(utf8_split(alts, lo, lo | m));
                return utf8_split(alts, (lo | m) + 1, hi);
            }
            if ((hi & m) != m) {
                HEARTH_TRY(utf8_split(alts, lo, (hi & ~m) - 1));
                return utf8_split(alts, hi & ~m, hi);
            }
        }
    }
    return utf8_alts_push(alts, lo, hi);
}

static int cp_range_cmp(const void *a, const void *b)
{
    const struct cp_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sort and merge ranges in place; returns the new count. */
static int ranges_normalize(struct cp_range *r, int n)
{
    qsort(r, (size_t)n, sizeof *r, cp_range_cmp);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0 && r[i].lo <= r[m - 1].hi + 1) {
            if (r[i].hi > r[m - 1].hi) r[m - 1].hi = r[i].hi;
        } else {
            r[m++] = r[i];
        }
    }
    return m;
}

/* The element for a class of code point ranges (sorted, merged, without
 * surrogates): one byte set when it is ASCII only, else a rule with one
 * alternative per UTF-8 byte-range product, alternatives that differ only
 * in their first byte merged.  Classes are cached by their ranges. */
static hearth_status class_element(struct parser *ps, int32_t parent, const struct cp_range *r,
                                   int n, struct gelem *out)
{
    char key[64];
    textbuf kb;
    textbuf_init(&kb, 1 << 24, "a character class");
    hearth_status st = HEARTH_OK;
    for (int i = 0; i < n && !st; i++) {
        snprintf(key, sizeof key, "%x-%x,", (unsigned)r[i].lo, (unsigned)r[i].hi);
        st = textbuf_append_str(&kb, key);
    }
    if (st) {
        textbuf_free(&kb);
        return st;
    }
    const char *k = kb.data ? kb.data : "";
    uint32_t class_hash = bytes_hash(k, strlen(k)), class_slot;
    st = id_index_find(ps, &ps->class_index, class_hash, same_class, k, &class_slot);
    if (!st && ps->class_index.ids[class_slot] >= 0) {
        *out = ps->classes[ps->class_index.ids[class_slot]].elem;
        textbuf_free(&kb);
        return HEARTH_OK;
    }
    if (st) {
        textbuf_free(&kb);
        return st;
    }

    struct utf8_alts alts = {0};
    uint64_t ascii[4] = {0};
    bool any_ascii = false, any_multi = false;
    for (int i = 0; i < n && !st; i++) {
        if (r[i].lo < 0x80) {
            set_range(ascii, r[i].lo, HEARTH_MIN(r[i].hi, 0x7Fu));
            any_ascii = true;
        }
        if (r[i].hi >= 0x80) {
            any_multi = true;
            st = utf8_split(&alts, HEARTH_MAX(r[i].lo, 0x80u), r[i].hi);
        }
    }
    struct gelem elem = {0};
    if (!st && !any_multi) {
        int32_t id = 0;
        st = set_add(ps, ascii, &id);
        elem.type = GE_BYTES;
        elem.value = id;
    } else if (!st) {
        int32_t rid = 0;
        st = rule_generated(ps, parent, &rid);
        struct seq *a = NULL;
        if (!st && any_ascii) {
            int32_t id = 0;
            st = rule_add_alt(&ps->rules[rid], &a);
            if (!st) st = set_add(ps, ascii, &id);
            if (!st) st = seq_push(ps, a, GE_BYTES, id);
        }
        /* merge alternatives of equal length whose bytes after the first agree */
        bool *used = st ? NULL : hearth_calloc((size_t)alts.n + 1, 1, "UTF-8 ranges");
        if (!st && !used) st = HEARTH_E_NOMEM;
        for (int i = 0; i < alts.n && !st; i++) {
            if (used[i]) continue;
            uint64_t first[4] = {0};
            const struct utf8_alt *u = &alts.a[i];
            set_range(first, u->lo[0], u->hi[0]);
            for (int j = i + 1; j < alts.n; j++) {
                const struct utf8_alt *v = &alts.a[j];
                if (used[j] || v->n != u->n) continue;
                if (memcmp(u->lo + 1, v->lo + 1, (size_t)u->n - 1) ||
                    memcmp(u->hi + 1, v->hi + 1, (size_t)u->n - 1))
                    continue;
                set_range(first, v->lo[0], v->hi[0]);
                used[j] = true;
            }
            int32_t id = 0;
            st = rule_add_alt(&ps->rules[rid], &a);
            if (!st) st = set_add(ps, first, &id);
            if (!st) st = seq_push(ps, a, GE_BYTES, id);
            for (int b = 1; b < u->n && !st; b++) st = push_byte_range(ps, a, u->lo[b], u->hi[b]);
        }
        free(used);
        elem.type = GE_REF;
        elem.value = rid;
    }
    free(alts.a);
    if (!st && ps->n_classes == ps->cap_classes) {
        int32_t cap = ps->cap_classes ? 2 * ps->cap_classes : 16;
        struct class_entry *c = hearth_realloc(ps->classes, (size_t)cap * sizeof *c, "classes");
        if (!c) st = HEARTH_E_NOMEM;
        else {
            ps->classes = c;
            ps->cap_classes = cap;
        }
    }
    if (!st) {
        ps->classes[ps->n_classes].key = textbuf_take(&kb, NULL);
        if (!ps->classes[ps->n_classes].key) st = HEARTH_E_NOMEM;
        else ps->classes[ps->n_classes++].elem = elem;
        if (!st) st = id_index_put(&ps->class_index, class_slot, class_hash, ps->n_classes - 1);
    }
    textbuf_free(&kb);
    if (!st) *out = elem;
    return st;
}

/* The complement of sorted, merged ranges within the Unicode scalar values. */
static int ranges_complement(const struct cp_range *r, int n, struct cp_range *out)
{
    int m = 0;
    uint32_t next = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].lo > next) out[m++] = (struct cp_range){next, r[i].lo - 1};
        next = r[i].hi + 1;
    }
    if (next <= 0x10FFFF) out[m++] = (struct cp_range){next, 0x10FFFF};
    return m;
}

/* Remove the surrogates U+D800..U+DFFF (not characters in UTF-8). */
static int ranges_drop_surrogates(struct cp_range *r, int n, struct cp_range *out)
{
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].hi < 0xD800 || r[i].lo > 0xDFFF) {
            out[m++] = r[i];
            continue;
        }
        if (r[i].lo < 0xD800) out[m++] = (struct cp_range){r[i].lo, 0xD7FF};
        if (r[i].hi > 0xDFFF) out[m++] = (struct cp_range){0xE000, r[i].hi};
    }
    return m;
}

/* ---- the text ---------------------------------------------------------- */

static bool at_end(const struct parser *ps) { return ps->p >= ps->end; }

static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_';
}

static void newline(struct parser *ps)
{
    ps->p++;
    ps->line++;
    ps->line_start = ps->p;
}

/* Skip blanks and comments, and line ends when newlines_ok. */
static void skip_space(struct parser *ps, bool newlines_ok)
{
    while (!at_end(ps)) {
        char c = *ps->p;
        if (c == ' ' || c == '\t') ps->p++;
        else if (c == '#') {
            while (!at_end(ps) && *ps->p != '\n' && *ps->p != '\r') ps->p++;
        } else if (newlines_ok && c == '\n') newline(ps);
        else if (newlines_ok && c == '\r') {
            ps->p++;
            if (!at_end(ps) && *ps->p == '\n') ps->p++;
            ps->line++;
            ps->line_start = ps->p;
        } else break;
    }
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One character of a literal or class (escapes decoded) into *cp. */
static hearth_status parse_char(struct parser *ps, uint32_t *cp)
{
    const char *at = ps->p;
    if (at_end(ps)) return perr_at(ps, at, "unexpected end of the grammar");
    if (*ps->p == '\n' || *ps->p == '\r')
        return perr_at(ps, at, "line end inside a literal or character class");
    if (*ps->p != '\\') {
        size_t n = utf8_decode(ps->p, (size_t)(ps->end - ps->p), cp);
        if (n == 0) return perr_at(ps, at, "invalid UTF-8");
        ps->p += n;
        return HEARTH_OK;
    }
    ps->p++;
    if (at_end(ps)) return perr_at(ps, at, "unfinished escape");
    char c = *ps->p++;
    int digits = 0;
    switch (c) {
    case 'n': *cp = '\n'; return HEARTH_OK;
    case 'r': *cp = '\r'; return HEARTH_OK;
    case 't': *cp = '\t'; return HEARTH_OK;
    case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/':
        *cp = (unsigned char)c;
        return HEARTH_OK;
    case 'x': digits = 2; break;
    case 'u': digits = 4; break;
    case 'U': digits = 8; break;
    default:
        return perr_at(ps, at, "unknown escape \\%c", c);
    }
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
        int h = at_end(ps) ? -1 : hex_value(*ps->p);
        if (h < 0) return perr_at(ps, at, "\\%c needs %d hexadecimal digits", c, digits);
        v = v * 16 + (uint32_t)h;
        ps->p++;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return perr_at(ps, at, "\\%c%0*X is not a Unicode scalar value", c, digits, (unsigned)v);
    *cp = v;
    return HEARTH_OK;
}

static hearth_status parse_literal(struct parser *ps, struct seq *s)
{
    const char *start = ps->p;
    ps->p++; /* " */
    while (!at_end(ps) && *ps->p != '"') {
        uint32_t cp;
        HEARTH_TRY(parse_char(ps, &cp));
        char b[4];
        size_t n = utf8_encode(cp, b);
        for (size_t i = 0; i < n; i++)
            HEARTH_TRY(push_byte_range(ps, s, (unsigned char)b[i], (unsigned char)b[i]));
    }
    if (at_end(ps)) return perr_at(ps, start, "unterminated literal");
    ps->p++;
    return HEARTH_OK;
}

static hearth_status parse_class(struct parser *ps, int32_t parent, struct seq *s)
{
    const char *start = ps->p;
    ps->p++; /* [ */
    bool negated = !at_end(ps) && *ps->p == '^';
    if (negated) ps->p++;
    int n = 0, cap = 16;
    struct cp_range *r = hearth_malloc((size_t)cap * sizeof *r, "a character class");
    if (!r) return HEARTH_E_NOMEM;
    hearth_status st = HEARTH_OK;
    while (!st && !at_end(ps) && *ps->p != ']') {
        const char *at = ps->p;
        uint32_t lo, hi;
        st = parse_char(ps, &lo);
        hi = lo;
        if (!st && ps->end - ps->p >= 2 && ps->p[0] == '-' && ps->p[1] != ']') {
            ps->p++;
            st = parse_char(ps, &hi);
            if (!st && hi < lo)
                st = perr_at(ps, at, "range U+%04X-U+%04X is empty", (unsigned)lo, (unsigned)hi);
        }
        if (!st && n == cap) {
            cap *= 2;
            struct cp_range *g = hearth_realloc(r, (size_t)cap * sizeof *r, "a character class");
            if (!g) st = HEARTH_E_NOMEM;
            else r = g;
        }
        if (!st) r[n++] = (struct cp_range){lo, hi};
    }
    if (!st && at_end(ps)) st = perr_at(ps, start, "unterminated character class");
    if (!st && n == 0) st = perr_at(ps, start, "empty character class");
    if (!st) {
        ps->p++;
        n = ranges_normalize(r, n);
        struct cp_range *c = hearth_malloc(((size_t)n + 2) * 2 * sizeof *c, "a character class");
        if (!c) st = HEARTH_E_NOMEM;
        else {
            int m = negated ? ranges_complement(r, n, c) : (memcpy(c, r, (size_t)n * sizeof *r), n);
            struct cp_range *d = c + n + 2;
            m = ranges_drop_surrogates(c, m, d);
            if (m == 0) st = perr_at(ps, start, "the character class matches nothing");
            struct gelem e;
            if (!st) st = class_element(ps, parent, d, m, &e);
            if (!st) st = seq_push(ps, s, e.type, e.value);
            free(c);
        }
    }
    free(r);
    return st;
}

static hearth_status parse_alternates(struct parser *ps, int32_t rule, bool nested);

static hearth_status parse_count(struct parser *ps, int *out)
{
    const char *at = ps->p;
    long v = 0;
    if (at_end(ps) || *ps->p < '0' || *ps->p > '9') return perr_at(ps, at, "expected a number");
    while (!at_end(ps) && *ps->p >= '0' && *ps->p <= '9') {
        v = v * 10 + (*ps->p++ - '0');
        if (v > GBNF_MAX_REPEAT)
            return perr_at(ps, at, "repetition count above %d", GBNF_MAX_REPEAT);
    }
    *out = (int)v;
    return HEARTH_OK;
}

/* Apply a repetition of min..max (max < 0: unbounded) copies to the item
 * s->e[item..). */
static hearth_status repeat_item(struct parser *ps, int32_t parent, struct seq *s, int32_t item,
                                 int min, int max)
{
    struct gelem x;
    if (s->n - item == 1) {
        x = s->e[item];
    } else {
        int32_t w;
        struct seq *a;
        HEARTH_TRY(rule_generated(ps, parent, &w));
        HEARTH_TRY(rule_add_alt(&ps->rules[w], &a));
        HEARTH_TRY(seq_append(ps, a, s->e + item, s->n - item));
        x.type = GE_REF;
        x.value = w;
    }
    s->n = item;
    for (int i = 0; i < min; i++) HEARTH_TRY(seq_push(ps, s, x.type, x.value));
    if (max == min) return HEARTH_OK;
    struct seq *a;
    int32_t r;
    if (max < 0) {
        /* r ::= x r | (empty) */
        HEARTH_TRY(rule_generated(ps, parent, &r));
        HEARTH_TRY(rule_add_alt(&ps->rules[r], &a));
        HEARTH_TRY(seq_push(ps, a, x.type, x.value));
        HEARTH_TRY(seq_push(ps, a, GE_REF, r));
        HEARTH_TRY(rule_add_alt(&ps->rules[r], &a));
        return seq_push(ps, s, GE_REF, r);
    }
    /* o1 ::= x | (empty); ok ::= x o(k-1) | (empty) */
    int32_t prev = -1;
    for (int k = 1; k <= max - min; k++) {
        HEARTH_TRY(rule_generated(ps, parent, &r));
        HEARTH_TRY(rule_add_alt(&ps->rules[r], &a));
        HEARTH_TRY(seq_push(ps, a, x.type, x.value));
        if (prev >= 0) HEARTH_TRY(seq_push(ps, a, GE_REF, prev));
        HEARTH_TRY(rule_add_alt(&ps->rules[r], &a));
        prev = r;
    }
    return seq_push(ps, s, GE_REF, prev);
}

static hearth_status parse_sequence(struct parser *ps, int32_t rule, struct seq *s, bool nested)
{
    int32_t item = -1;
    for (;;) {
        skip_space(ps, nested);
        if (at_end(ps)) return HEARTH_OK;
        const char *at = ps->p;
        char c = *ps->p;
        if (c == '"') {
            item = s->n;
            HEARTH_TRY(parse_literal(ps, s));
        } else if (c == '[') {
            item = s->n;
            HEARTH_TRY(parse_class(ps, rule, s));
        } else if (c == '.') {
            ps->p++;
            item = s->n;
            struct cp_range any[2] = {{0, 0xD7FF}, {0xE000, 0x10FFFF}};
            struct gelem e;
            HEARTH_TRY(class_element(ps, rule, any, 2, &e));
            HEARTH_TRY(seq_push(ps, s, e.type, e.value));
        } else if (is_name_char(c)) {
            const char *name = ps->p;
            while (!at_end(ps) && is_name_char(*ps->p)) ps->p++;
            size_t len = (size_t)(ps->p - name);
            const char *after = ps->p;
            skip_space(ps, false);
            if (ps->end - ps->p >= 3 && memcmp(ps->p, "::=", 3) == 0) {
                /* the next rule begins: this sequence has ended */
                ps->p = name;
                return perr_at(ps, name, "a rule definition must start on its own line");
            }
            ps->p = after;
            int32_t id;
            HEARTH_TRY(rule_find(ps, name, len, name, &id));
            item = s->n;
            HEARTH_TRY(seq_push(ps, s, GE_REF, id));
        } else if (c == '(') {
            if (++ps->depth > GBNF_MAX_NESTING)
                return perr_at(ps, at, "groups nested deeper than %d", GBNF_MAX_NESTING);
            ps->p++;
            int32_t g;
            HEARTH_TRY(rule_generated(ps, rule, &g));
            HEARTH_TRY(parse_alternates(ps, g, true));
            skip_space(ps, true);
            if (at_end(ps) || *ps->p != ')') return perr_at(ps, ps->p, "expected ')'");
            ps->p++;
            ps->depth--;
            item = s->n;
            HEARTH_TRY(seq_push(ps, s, GE_REF, g));
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (item < 0 || item == s->n)
                return perr_at(ps, at, "'%c' follows nothing it could repeat", c);
            ps->p++;
            int min = 0, max = -1;
            if (c == '+') min = 1;
            else if (c == '?') max = 1;
            else if (c == '{') {
                skip_space(ps, false);
                if (!at_end(ps) && *ps->p == ',') min = 0;
                else HEARTH_TRY(parse_count(ps, &min));
                skip_space(ps, false);
                if (!at_end(ps) && *ps->p == ',') {
                    ps->p++;
                    skip_space(ps, false);
                    if (!at_end(ps) && *ps->p != '}') HEARTH_TRY(parse_count(ps, &max));
                } else {
                    max = min;
                }
                skip_space(ps, false);
                if (at_end(ps) || *ps->p != '}') return perr_at(ps, ps->p, "expected '}'");
                ps->p++;
                if (max >= 0 && max < min)
                    return perr_at(ps, at, "repetition {%d,%d}: the maximum is below the minimum",
                                   min, max);
            }
            HEARTH_TRY(repeat_item(ps, rule, s, item, min, max));
            item = -1; /* x** is written (x*)* */
        } else if (c == '|' || c == ')' || c == '\n' || c == '\r') {
            return HEARTH_OK;
        } else {
            return perr_at(ps, at, "unexpected '%.*s'", (int)utf8_char_len((const unsigned char *)at,
                                                                           (size_t)(ps->end - at)), at);
        }
    }
}

static hearth_status parse_alternates(struct parser *ps, int32_t rule, bool nested)
{
    for (;;) {
        struct seq *a;
        HEARTH_TRY(rule_add_alt(&ps->rules[rule], &a));
        (void)a;
        /* the rules array may move while the sequence is parsed */
        struct seq tmp = {0};
        hearth_status st = parse_sequence(ps, rule, &tmp, nested);
        ps->rules[rule].alts[ps->rules[rule].n_alts - 1] = tmp;
        if (st) return st;
        skip_space(ps, nested);
        if (at_end(ps) || *ps->p != '|') return HEARTH_OK;
        ps->p++;
        skip_space(ps, true);
    }
}

static hearth_status parse_rules(struct parser *ps)
{
    for (;;) {
        skip_space(ps, true);
        if (at_end(ps)) return HEARTH_OK;
        const char *name = ps->p;
        while (!at_end(ps) && is_name_char(*ps->p)) ps->p++;
        size_t len = (size_t)(ps->p - name);
        if (len == 0) return perr_at(ps, name, "expected a rule name");
        skip_space(ps, false);
        if (ps->end - ps->p < 3 || memcmp(ps->p, "::=", 3) != 0)
            return perr_at(ps, ps->p, "expected '::=' after the rule name");
        ps->p += 3;
        int32_t id;
        HEARTH_TRY(rule_find(ps, name, len, name, &id));
        if (ps->rules[id].defined)
            return perr_at(ps, name, "rule '%.*s' is defined twice", (int)len, name);
        ps->rules[id].defined = true;
        HEARTH_TRY(parse_alternates(ps, id, false));
        if (!at_end(ps) && *ps->p != '\n' && *ps->p != '\r')
            return perr_at(ps, ps->p, "unexpected '%c'", *ps->p);
    }
}

/* ---- left factoring ------------------------------------------------------ */

/* Alternatives of one rule that begin with the same element are merged
 * into one, that element followed by a generated rule whose alternatives
 * are what followed it: `"a" x | "a" y | b` becomes `"a" R | b` with
 * `R ::= x | y`.  Done for every rule, the generated ones included, it
 * turns alternatives that share a prefix into a tree, so the matcher
 * holds one stack per distinct next element rather than one per
 * alternative: an enum of thousands of strings, which all begin with a
 * quote, costs as many stacks as the strings have different bytes at the
 * point reached.  The language is unchanged, and so is left recursion
 * (the merged element comes first on both sides, and what followed it is
 * reached through it, as before), so it is checked once, on the grammar
 * as written. */
struct alt_key {
    int32_t type, value, index;
};

static int alt_key_cmp(const void *pa, const void *pb)
{
    const struct alt_key *a = pa, *b = pb;
    if (a->type != b->type) return a->type < b->type ? -1 : 1;
    if (a->value != b->value) return a->value < b->value ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

/* Before merging, in a rule of many alternatives, an alternative that
 * begins with a reference to another rule (`A ::= ... | B x | ...`; anyOf
 * and oneOf translate to such) is replaced by that rule's alternatives,
 * each followed by the rest of it (`b1 x | b2 x`), so that they can be
 * merged with their neighbours: an anyOf of thousands of constants or
 * objects then costs what an enum does.  The grammar has no left
 * recursion (refused before), so following leading references ends;
 * *left bounds the elements copied (the grammar at most doubles, past a
 * floor that the shared rules of JSON Schema grammars take their part
 * of). */
static hearth_status inline_leading_refs(struct parser *ps, int32_t r, size_t *left)
{
    if (ps->rules[r].n_alts < GBNF_INLINE_MIN_ALTS) return HEARTH_OK;
    for (int32_t a = 0; a < ps->rules[r].n_alts; a++) {
        struct seq *s = &ps->rules[r].alts[a];
        if (s->n == 0 || s->e[0].type != GE_REF) continue;
        const int32_t b = s->e[0].value, nb = ps->rules[b].n_alts, rest = s->n - 1;
        size_t cost = 0;
        for (int32_t k = 0; k < nb; k++) cost += (size_t)ps->rules[b].alts[k].n + (size_t)rest + 1;
        if (nb == 0 || cost > *left || ps->n_elems_total + cost > GBNF_MAX_ELEMS) continue;
        *left -= cost;
        /* b's first alternative (and the rest) takes a's place, the others go last */
        struct seq old = *s;
        hearth_status st = HEARTH_OK;
        for (int32_t k = 0; k < nb && !st; k++) {
            struct seq next = {0}, *dst = &next;
            if (k > 0) st = rule_add_alt(&ps->rules[r], &dst);
            if (!st) st = seq_append(ps, dst, ps->rules[b].alts[k].e, ps->rules[b].alts[k].n);
            if (!st) st = seq_append(ps, dst, old.e + 1, rest);
            if (k == 0) {
                if (st) free(next.e);
                else ps->rules[r].alts[a] = next;
            }
        }
        free(old.e);
        if (st) {
            /* a's place must not keep the freed elements */
            if (ps->rules[r].alts[a].e == old.e) ps->rules[r].alts[a] = (struct seq){0};
            return st;
        }
        a--; /* the alternative that took its place may begin with a reference too */
    }
    return HEARTH_OK;
}

static hearth_status factor_rule(struct parser *ps, int32_t r)
{
    const int32_t n = ps->rules[r].n_alts;
    if (n < 2) return HEARTH_OK;
    HEARTH_TRY(gbudget_spend(ps->budget, (uint64_t)n));
    struct alt_key *keys = hearth_malloc((size_t)n * sizeof *keys, "grammar alternatives");
    if (!keys) return HEARTH_E_NOMEM;
    /* the rule's array of alternatives stays where it is while rules are
     * added (only ps->rules moves) */
    struct seq *alts = ps->rules[r].alts;
    int32_t m = 0;
    for (int32_t a = 0; a < n; a++)
        if (alts[a].n > 0) keys[m++] = (struct alt_key){alts[a].e[0].type, alts[a].e[0].value, a};
    qsort(keys, (size_t)m, sizeof *keys, alt_key_cmp);
    bool shared = false;
    for (int32_t i = 1; i < m && !shared; i++)
        shared = keys[i].type == keys[i - 1].type && keys[i].value == keys[i - 1].value;
    if (!shared) {
        free(keys);
        return HEARTH_OK;
    }
    /* merged[a]: the alternative that replaces a group's first member;
     * moved[a]: a went to a generated rule */
    struct seq *merged = hearth_calloc((size_t)n, sizeof *merged, "grammar alternatives");
    bool *moved = hearth_calloc((size_t)n, sizeof *moved, "grammar alternatives");
    hearth_status st = merged && moved ? HEARTH_OK : HEARTH_E_NOMEM;
    for (int32_t i = 0, j; !st && i < m; i = j) {
        for (j = i + 1; j < m && keys[j].type == keys[i].type && keys[j].value == keys[i].value; j++) {}
        if (j - i < 2) continue;
        int32_t g;
        st = rule_generated(ps, r, &g);
        for (int32_t k = i; !st && k < j; k++) {
            const int32_t b = keys[k].index;
            struct seq tail = alts[b], *dst;
            st = gbudget_spend(ps->budget, (uint64_t)tail.n);
            if (!st) st = rule_add_alt(&ps->rules[g], &dst);
            if (st) break;
            memmove(tail.e, tail.e + 1, (size_t)(tail.n - 1) * sizeof *tail.e);
            tail.n--;
            *dst = tail;
            alts[b] = (struct seq){0};
            moved[b] = true;
        }
        struct seq *first = &merged[keys[i].index];
        if (!st) st = seq_push(ps, first, keys[i].type, keys[i].value);
        if (!st) st = seq_push(ps, first, GE_REF, g);
    }
    if (!st) {
        int32_t k = 0;
        for (int32_t a = 0; a < n; a++) {
            if (merged[a].n) alts[k++] = merged[a];
            else if (!moved[a]) alts[k++] = alts[a];
        }
        ps->rules[r].n_alts = k;
    } else if (merged) {
        for (int32_t a = 0; a < n; a++) free(merged[a].e);
    }
    free(keys);
    free(merged);
    free(moved);
    return st;
}

/* Every rule, and the rules factoring generates in turn. */
static hearth_status factor_rules(struct parser *ps)
{
    size_t left = ps->n_elems_total + GBNF_INLINE_FLOOR;
    for (int32_t r = 0; r < ps->n_rules; r++) {
        HEARTH_TRY(inline_leading_refs(ps, r, &left));
        HEARTH_TRY(factor_rule(ps, r));
    }
    return HEARTH_OK;
}

/* ---- checks ------------------------------------------------------------ */

/* Which rules can match nothing, by a worklist: an alternative made of
 * rule references alone becomes nullable when the last of them does, so
 * each reference is looked at a fixed number of times. */
static hearth_status find_nullable(const struct grammar_ir *g, struct gbudget *budget,
                                   bool *nullable)
{
    const int32_t nr = g->n_rules, na = g->n_alts;
    int32_t *left = hearth_calloc((size_t)na + 1, sizeof *left, "grammar checks");
    int32_t *alt_rule = hearth_malloc(((size_t)na + 1) * sizeof *alt_rule, "grammar checks");
    int32_t *occ_first = hearth_calloc((size_t)nr + 1, sizeof *occ_first, "grammar checks");
    int32_t *fill = hearth_malloc(((size_t)nr + 1) * sizeof *fill, "grammar checks");
    int32_t *queue = hearth_malloc(((size_t)nr + 1) * sizeof *queue, "grammar checks");
    int32_t *occ = NULL;
    hearth_status st = (left && alt_rule && occ_first && fill && queue) ? HEARTH_OK : HEARTH_E_NOMEM;
    if (!st) st = gbudget_spend(budget, (uint64_t)g->n_elems * 3 + (uint64_t)nr);
    /* left[a]: the references of alternative a not yet known to be
     * nullable; -1 when a matches a byte, so it never is */
    int32_t n_occ = 0, head = 0, tail = 0;
    for (int32_t r = 0; !st && r < nr; r++)
        for (int32_t a = g->rule_first[r]; a < g->rule_first[r + 1]; a++) {
            alt_rule[a] = r;
            for (const struct gelem *e = &g->elems[g->alt_start[a]]; e->type != GE_END; e++) {
                if (e->type != GE_REF) {
                    left[a] = -1;
                    break;
                }
                left[a]++;
                occ_first[e->value]++;
            }
            if (left[a] > 0) n_occ += left[a];
            else if (left[a] < 0)
                for (const struct gelem *e = &g->elems[g->alt_start[a]]; e->type == GE_REF; e++)
                    occ_first[e->value]--;
            if (left[a] == 0 && !nullable[r]) {
                nullable[r] = true;
                queue[tail++] = r;
            }
        }
    if (!st) {
        occ = hearth_malloc(((size_t)n_occ + 1) * sizeof *occ, "grammar checks");
        if (!occ) st = HEARTH_E_NOMEM;
    }
    if (!st) {
        /* occ[occ_first[r] .. occ_first[r + 1]): the alternatives that refer to r */
        int32_t sum = 0;
        for (int32_t r = 0; r <= nr; r++) {
            int32_t c = r < nr ? occ_first[r] : 0;
            occ_first[r] = fill[r] = sum;
            sum += c;
        }
        for (int32_t a = 0; a < na; a++)
            if (left[a] > 0)
                for (const struct gelem *e = &g->elems[g->alt_start[a]]; e->type == GE_REF; e++)
                    occ[fill[e->value]++] = a;
        while (head < tail) {
            const int32_t r = queue[head++];
            for (int32_t k = occ_first[r]; k < occ_first[r + 1]; k++) {
                const int32_t a = occ[k];
                if (--left[a] == 0 && !nullable[alt_rule[a]]) {
                    nullable[alt_rule[a]] = true;
                    queue[tail++] = alt_rule[a];
                }
            }
        }
    }
    free(left);
    free(alt_rule);
    free(occ_first);
    free(fill);
    free(queue);
    free(occ);
    return st;
}

/* Left recursion would make the matcher loop; find it with a depth-first
 * walk over "can start with" edges, through nullable prefixes.  Each
 * rule on the walk's stack keeps where its next edge is (an alternative
 * and an element in it), so every edge is followed once. */
static int32_t first_elem(const struct grammar_ir *g, int32_t r)
{
    return g->rule_first[r] < g->rule_first[r + 1] ? g->alt_start[g->rule_first[r]] : 0;
}

static hearth_status check_left_recursion(const struct grammar_ir *g, struct gbudget *budget)
{
    const int32_t nr = g->n_rules;
    bool *nullable = hearth_calloc((size_t)nr + 1, 1, "grammar checks");
    uint8_t *state = hearth_calloc((size_t)nr + 1, 1, "grammar checks");
    int32_t *stack = hearth_malloc(((size_t)nr + 1) * 3 * sizeof *stack, "grammar checks");
    hearth_status st = (nullable && state && stack) ? HEARTH_OK : HEARTH_E_NOMEM;
    if (!st) st = find_nullable(g, budget, nullable);
    /* per frame: the rule, its alternative being walked, the element next */
    int32_t *frame_alt = stack + nr + 1, *frame_elem = frame_alt + nr + 1;
    for (int32_t root = 0; !st && root < nr; root++) {
        if (state[root]) continue;
        int32_t sp = 0;
        stack[0] = root;
        frame_alt[0] = g->rule_first[root];
        frame_elem[0] = first_elem(g, root);
        state[root] = 1;
        sp = 1;
        while (sp > 0 && !st) {
            const int32_t f = sp - 1, r = stack[f];
            int32_t target = -1;
            while (target < 0 && frame_alt[f] < g->rule_first[r + 1]) {
                const struct gelem *e = &g->elems[frame_elem[f]];
                if (e->type == GE_REF) target = e->value;
                if (e->type == GE_REF && nullable[e->value]) {
                    frame_elem[f]++; /* the alternative may start with what follows too */
                } else if (++frame_alt[f] < g->rule_first[r + 1]) {
                    frame_elem[f] = g->alt_start[frame_alt[f]];
                }
            }
            st = gbudget_spend(budget, 1);
            if (st) break;
            if (target < 0) {
                state[r] = 2;
                sp--;
                continue;
            }
            if (state[target] == 1) {
                st = hearth_error(HEARTH_E_FORMAT,
                                  "grammar: rule '%s' is left-recursive (it can reach itself "
                                  "through '%s' without matching anything)",
                                  g->rule_names[target], g->rule_names[r]);
            } else if (state[target] == 0) {
                state[target] = 1;
                stack[sp] = target;
                frame_alt[sp] = g->rule_first[target];
                frame_elem[sp] = first_elem(g, target);
                sp++;
            }
        }
    }
    free(nullable);
    free(state);
    free(stack);
    return st;
}

/* ---- the whole ---------------------------------------------------------- */

void grammar_ir_free(struct grammar_ir *ir)
{
    if (!ir) return;
    free(ir->elems);
    free(ir->alt_start);
    free(ir->rule_first);
    if (ir->rule_names)
        for (int32_t i = 0; i < ir->n_rules; i++) free(ir->rule_names[i]);
    free(ir->rule_names);
    free(ir->sets);
    memset(ir, 0, sizeof *ir);
}

static void parser_free(struct parser *ps)
{
    for (int32_t i = 0; i < ps->n_rules; i++) {
        free(ps->rules[i].name);
        for (int32_t a = 0; a < ps->rules[i].n_alts; a++) free(ps->rules[i].alts[a].e);
        free(ps->rules[i].alts);
    }
    free(ps->rules);
    free(ps->sets);
    for (int32_t i = 0; i < ps->n_classes; i++) free(ps->classes[i].key);
    free(ps->classes);
    id_index_free(&ps->rule_index);
    id_index_free(&ps->set_index);
    id_index_free(&ps->class_index);
}

/* The parser's rules as a compiled grammar.  With take, the grammar takes
 * the names and byte sets over; without, it borrows the names and has no
 * byte sets, for the checks alone (free it with borrowed_ir_free). */
static hearth_status flatten(struct parser *ps, int32_t root, struct grammar_ir *ir, bool take)
{
    size_t n_elems = 0, n_alts = 0;
    for (int32_t r = 0; r < ps->n_rules; r++) {
        n_alts += (size_t)ps->rules[r].n_alts;
        for (int32_t a = 0; a < ps->rules[r].n_alts; a++) n_elems += (size_t)ps->rules[r].alts[a].n + 1;
    }
    memset(ir, 0, sizeof *ir);
    ir->elems = hearth_malloc((n_elems + 1) * sizeof *ir->elems, "grammar elements");
    ir->alt_start = hearth_malloc((n_alts + 1) * sizeof *ir->alt_start, "grammar alternatives");
    ir->rule_first = hearth_malloc(((size_t)ps->n_rules + 1) * sizeof *ir->rule_first, "grammar rules");
    ir->rule_names = hearth_calloc((size_t)ps->n_rules + 1, sizeof *ir->rule_names, "grammar rules");
    if (!ir->elems || !ir->alt_start || !ir->rule_first || !ir->rule_names) {
        grammar_ir_free(ir);
        return HEARTH_E_NOMEM;
    }
    ir->n_rules = ps->n_rules;
    int32_t ne = 0, na = 0;
    for (int32_t r = 0; r < ps->n_rules; r++) {
        ir->rule_first[r] = na;
        ir->rule_names[r] = ps->rules[r].name;
        if (take) ps->rules[r].name = NULL;
        for (int32_t a = 0; a < ps->rules[r].n_alts; a++) {
            ir->alt_start[na++] = ne;
            const struct seq *s = &ps->rules[r].alts[a];
            if (s->n) memcpy(ir->elems + ne, s->e, (size_t)s->n * sizeof *s->e);
            ne += s->n;
            ir->elems[ne].type = GE_END;
            ir->elems[ne].value = 0;
            ne++;
        }
    }
    ir->rule_first[ps->n_rules] = na;
    ir->n_elems = ne;
    ir->n_alts = na;
    if (take) {
        ir->sets = ps->sets;
        ir->n_sets = ps->n_sets;
        ps->sets = NULL;
        ps->n_sets = 0;
    }
    ir->root = root;
    return HEARTH_OK;
}

static void borrowed_ir_free(struct grammar_ir *ir)
{
    free(ir->elems);
    free(ir->alt_start);
    free(ir->rule_first);
    free(ir->rule_names);
    memset(ir, 0, sizeof *ir);
}

hearth_status grammar_ir_parse(const char *text, size_t len, const char *root,
                               struct gbudget *budget, struct grammar_ir *out)
{
    if (!text && len) return hearth_error(HEARTH_E_INVALID, "grammar: text is NULL");
    if (!root) root = "root";
    struct parser ps = {0};
    ps.text = ps.p = ps.line_start = text ? text : "";
    ps.end = ps.text + len;
    ps.line = 1;
    ps.budget = budget;
    size_t valid = utf8_validate(ps.text, len);
    if (valid != len) {
        /* point at the first bad byte */
        for (const char *q = ps.text; q < ps.text + valid; q++)
            if (*q == '\n') {
                ps.line++;
                ps.line_start = q + 1;
            }
        hearth_status st = perr_at(&ps, ps.text + valid, "invalid UTF-8");
        return st;
    }
    hearth_status st = parse_rules(&ps);
    for (int32_t r = 0; !st && r < ps.n_rules; r++)
        if (!ps.rules[r].defined)
            st = hearth_error(HEARTH_E_FORMAT, "grammar line %d, column %d: undefined rule '%s'",
                              ps.rules[r].ref_line, ps.rules[r].ref_col, ps.rules[r].name);
    int32_t root_id = -1;
    for (int32_t r = 0; !st && r < ps.n_rules; r++)
        if (strcmp(ps.rules[r].name, root) == 0) root_id = r;
    if (!st && root_id < 0)
        st = hearth_error(HEARTH_E_FORMAT, "grammar: no rule '%s' to start from", root);
    /* Left recursion is refused before alternatives are merged: merging
     * follows leading references, which left recursion would send round
     * a cycle until the copying bound is spent, and the error then names
     * the rules as written. */
    if (!st) {
        struct grammar_ir as_written;
        st = flatten(&ps, root_id, &as_written, false);
        if (!st) st = check_left_recursion(&as_written, budget);
        borrowed_ir_free(&as_written);
    }
    if (!st) st = factor_rules(&ps);
    if (!st) st = flatten(&ps, root_id, out, true);
    parser_free(&ps);
    return st;
}

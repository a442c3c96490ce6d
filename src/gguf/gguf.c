/*
 * gguf.c -- reading and writing GGUF files (versions 2 and 3).
 *
 * Layout (little endian throughout):
 *   magic "GGUF", u32 version, u64 n_tensors, u64 n_kv,
 *   n_kv x { string key, u32 value_type, value },
 *   n_tensors x { string name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset },
 *   padding to general.alignment (default 32), then the data section; each
 *   tensor's offset is relative to the data section and aligned.
 *   string = u64 length + bytes (no terminator);
 *   array  = u32 element type + u64 count + elements (arrays may nest).
 *
 * A file is untrusted input: the reader checks every length and count
 * against the bytes that remain before it reads, and all of the file is
 * validated in hearth_gguf_open(), so the accessors never fail on bounds.
 * Every error message names the file and the byte offset at fault.
 *
 * A model may be split over several files (the common tooling's
 * gguf-split: NAME-00001-of-0000N.gguf ... NAME-0000N-of-0000N.gguf).
 * Each part is a GGUF file of its own with the keys split.no (0-based),
 * split.count and split.tensors.count; the first holds all the other
 * metadata, and the tensors are spread over the parts, each tensor's
 * offset relative to its own file's data section.  Opening the first part
 * by name opens the others, found by their names alone, and checks that
 * they belong together; the handle then lists every part's tensors.
 */
#include "gguf.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef HAVE_SYS_MMAN_H
#include <sys/mman.h>
#endif

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4
/* Nesting of arrays inside arrays; real files use at most one level. */
#define GGUF_MAX_ARRAY_DEPTH 8
/* Longest tensor name the common tooling accepts (63 bytes + NUL). */
#define GGUF_MAX_TENSOR_NAME 63

/* An array value: elements start at data; for variable-size elements
 * (strings, arrays) offsets[j] is the byte offset of element j from data. */
struct gguf_array {
    hearth_gguf_type elem_type;
    uint64_t n;
    const uint8_t *data;
    uint64_t *offsets;             /* NULL for fixed-size elements */
    struct gguf_array **children;  /* for arrays of arrays: one per element */
};

struct gguf_kv {
    char *key;
    hearth_gguf_value value;
    char *str_copy;                /* NUL-terminated copy for string values */
    const uint8_t *raw;            /* the encoded value in the file ... */
    size_t raw_bytes;              /* ... for copying it to a writer */
};

struct hearth_gguf {
    char *path;
    const uint8_t *base;
    size_t size;
    bool mapped;                   /* base is an mmap of the file */
    bool owned;                    /* base is a malloc'ed copy */
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    int64_t n_kv;
    struct gguf_kv *kv;
    const struct gguf_kv **kv_by_key; /* metadata sorted by key, for lookup */
    int64_t n_tensors;             /* of every part, after this file's own */
    int64_t n_own_tensors;         /* described in this file (their names are ours) */
    hearth_gguf_tensor *tensors;
    const hearth_gguf_tensor **by_name; /* tensors sorted by name, for lookup */
    int32_t n_parts;               /* a split model: the other files, in order */
    hearth_gguf **parts;
};

/* ---- cursor over the file image -------------------------------------- */

struct cursor {
    const hearth_gguf *g;
    size_t pos;
};

static hearth_status fail_at(const struct cursor *c, size_t pos, const char *fmt, ...)
    HEARTH_PRINTF(3, 4);

static hearth_status fail_at(const struct cursor *c, size_t pos, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return hearth_error(HEARTH_E_FORMAT, "%s: at byte %zu: %s", c->g->path, pos, msg);
}

static size_t remaining(const struct cursor *c)
{
    return c->g->size - c->pos;
}

static hearth_status need(const struct cursor *c, size_t bytes, const char *what)
{
    if (bytes > remaining(c))
        return fail_at(c, c->pos, "file ends inside %s (needs %zu bytes, %zu left)", what,
                       bytes, remaining(c));
    return HEARTH_OK;
}

static uint32_t load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t load_u64(const uint8_t *p)
{
    return (uint64_t)load_u32(p) | (uint64_t)load_u32(p + 4) << 32;
}

static hearth_status read_u32(struct cursor *c, const char *what, uint32_t *out)
{
    hearth_status st = need(c, 4, what);
    if (st) return st;
    *out = load_u32(c->g->base + c->pos);
    c->pos += 4;
    return HEARTH_OK;
}

static hearth_status read_u64(struct cursor *c, const char *what, uint64_t *out)
{
    hearth_status st = need(c, 8, what);
    if (st) return st;
    *out = load_u64(c->g->base + c->pos);
    c->pos += 8;
    return HEARTH_OK;
}

/* A string: pointer into the image and its length. */
static hearth_status read_string(struct cursor *c, const char *what, const char **ptr,
                                 uint64_t *len)
{
    size_t at = c->pos;
    uint64_t n;
    hearth_status st = read_u64(c, what, &n);
    if (st) return st;
    if (n > remaining(c))
        return fail_at(c, at, "%s has length %llu but only %zu bytes remain", what,
                       (unsigned long long)n, remaining(c));
    *ptr = (const char *)c->g->base + c->pos;
    *len = n;
    c->pos += (size_t)n;
    return HEARTH_OK;
}

/* ---- metadata values --------------------------------------------------- */

static const struct {
    const char *name;
    size_t bytes; /* 0: variable size */
} value_types[] = {
    [HEARTH_GGUF_UINT8] = {"uint8", 1},     [HEARTH_GGUF_INT8] = {"int8", 1},
    [HEARTH_GGUF_UINT16] = {"uint16", 2},   [HEARTH_GGUF_INT16] = {"int16", 2},
    [HEARTH_GGUF_UINT32] = {"uint32", 4},   [HEARTH_GGUF_INT32] = {"int32", 4},
    [HEARTH_GGUF_FLOAT32] = {"float32", 4}, [HEARTH_GGUF_BOOL] = {"bool", 1},
    [HEARTH_GGUF_STRING] = {"string", 0},   [HEARTH_GGUF_ARRAY] = {"array", 0},
    [HEARTH_GGUF_UINT64] = {"uint64", 8},   [HEARTH_GGUF_INT64] = {"int64", 8},
    [HEARTH_GGUF_FLOAT64] = {"float64", 8},
};

const char *hearth_gguf_type_name(hearth_gguf_type type)
{
    if ((unsigned)type >= HEARTH_ARRAY_LEN(value_types)) return NULL;
    return value_types[type].name;
}

static bool valid_value_type(uint32_t t)
{
    return t < HEARTH_ARRAY_LEN(value_types);
}

/* Decode a fixed-size scalar at p into v (v->type already set). */
static void decode_scalar(const uint8_t *p, hearth_gguf_value *v)
{
    switch (v->type) {
    case HEARTH_GGUF_UINT8: v->v.u = p[0]; break;
    case HEARTH_GGUF_INT8: v->v.i = (int8_t)p[0]; break;
    case HEARTH_GGUF_UINT16: v->v.u = (uint16_t)(p[0] | p[1] << 8); break;
    case HEARTH_GGUF_INT16: v->v.i = (int16_t)(uint16_t)(p[0] | p[1] << 8); break;
    case HEARTH_GGUF_UINT32: v->v.u = load_u32(p); break;
    case HEARTH_GGUF_INT32: v->v.i = (int32_t)load_u32(p); break;
    case HEARTH_GGUF_UINT64: v->v.u = load_u64(p); break;
    case HEARTH_GGUF_INT64: v->v.i = (int64_t)load_u64(p); break;
    case HEARTH_GGUF_FLOAT32: {
        float f;
        uint32_t u = load_u32(p);
        memcpy(&f, &u, sizeof f);
        v->v.f = f;
        break;
    }
    case HEARTH_GGUF_FLOAT64: {
        double d;
        uint64_t u = load_u64(p);
        memcpy(&d, &u, sizeof d);
        v->v.f = d;
        break;
    }
    case HEARTH_GGUF_BOOL: v->v.b = p[0] != 0; break;
    default: break;
    }
}

static void free_array(struct gguf_array *a)
{
    if (!a) return;
    if (a->children) {
        for (uint64_t j = 0; j < a->n; j++) free_array(a->children[j]);
        free(a->children);
    }
    free(a->offsets);
    free(a);
}

/* Parse an array body (element type, count, elements) at the cursor. */
static hearth_status parse_array(struct cursor *c, int depth, const char *what,
                                 struct gguf_array **out)
{
    size_t at = c->pos;
    uint32_t elem_type;
    uint64_t n;
    hearth_status st = read_u32(c, what, &elem_type);
    if (st) return st;
    if (!valid_value_type(elem_type))
        return fail_at(c, at, "%s has unknown element type %u", what, elem_type);
    st = read_u64(c, what, &n);
    if (st) return st;
    if (elem_type == HEARTH_GGUF_ARRAY && depth >= GGUF_MAX_ARRAY_DEPTH)
        return fail_at(c, at, "%s nests arrays deeper than %d levels", what, GGUF_MAX_ARRAY_DEPTH);

    /* The smallest encoding of an element bounds the count by what is left. */
    size_t min_elem = value_types[elem_type].bytes;
    if (elem_type == HEARTH_GGUF_STRING) min_elem = 8;
    if (elem_type == HEARTH_GGUF_ARRAY) min_elem = 12;
    if (n > remaining(c) / min_elem)
        return fail_at(c, at, "%s claims %llu elements of type %s but only %zu bytes remain",
                       what, (unsigned long long)n, value_types[elem_type].name, remaining(c));

    struct gguf_array *a = hearth_calloc(1, sizeof *a, "a GGUF array");
    if (!a) return HEARTH_E_NOMEM;
    a->elem_type = (hearth_gguf_type)elem_type;
    a->n = n;
    a->data = c->g->base + c->pos;

    if (value_types[elem_type].bytes) {
        c->pos += (size_t)n * min_elem;
        *out = a;
        return HEARTH_OK;
    }
    a->offsets = hearth_calloc((size_t)n ? (size_t)n : 1, sizeof *a->offsets, "GGUF array offsets");
    if (!a->offsets) goto nomem;
    if (elem_type == HEARTH_GGUF_ARRAY) {
        a->children = hearth_calloc((size_t)n ? (size_t)n : 1, sizeof *a->children,
                                    "a nested GGUF array");
        if (!a->children) goto nomem;
    }
    for (uint64_t j = 0; j < n; j++) {
        a->offsets[j] = (uint64_t)(c->g->base + c->pos - a->data);
        if (elem_type == HEARTH_GGUF_STRING) {
            const char *s;
            uint64_t len;
            st = read_string(c, "a string array element", &s, &len);
        } else {
            st = parse_array(c, depth + 1, "a nested array", &a->children[j]);
        }
        if (st) {
            free_array(a);
            return st;
        }
    }
    *out = a;
    return HEARTH_OK;
nomem:
    free_array(a);
    return HEARTH_E_NOMEM;
}

static void fill_array_value(hearth_gguf_value *v, const struct gguf_array *a)
{
    v->type = HEARTH_GGUF_ARRAY;
    v->v.arr.elem_type = a->elem_type;
    v->v.arr.n = a->n;
    v->v.arr.priv = a;
}

static hearth_status parse_kv(struct cursor *c, int64_t index, struct gguf_kv *kv)
{
    size_t at = c->pos;
    const char *key;
    uint64_t key_len;
    char what[64];
    snprintf(what, sizeof what, "the key of metadata entry %lld", (long long)index);
    hearth_status st = read_string(c, what, &key, &key_len);
    if (st) return st;
    if (key_len == 0) return fail_at(c, at, "metadata entry %lld has an empty key", (long long)index);
    if (memchr(key, '\0', (size_t)key_len))
        return fail_at(c, at, "metadata key of entry %lld contains a NUL byte", (long long)index);
    kv->key = hearth_strndup(key, (size_t)key_len, "a GGUF key");
    if (!kv->key) return HEARTH_E_NOMEM;

    size_t type_at = c->pos;
    uint32_t type;
    st = read_u32(c, "a value type", &type);
    if (st) return st;
    if (!valid_value_type(type))
        return fail_at(c, type_at, "metadata '%s' has unknown value type %u", kv->key, type);
    kv->value.type = (hearth_gguf_type)type;
    kv->raw = c->g->base + c->pos;

    if (type == HEARTH_GGUF_STRING) {
        const char *s;
        uint64_t len;
        st = read_string(c, "a string value", &s, &len);
        if (st) return st;
        kv->value.v.str.ptr = s;
        kv->value.v.str.len = len;
        kv->str_copy = hearth_strndup(s, (size_t)len, "a GGUF string value");
        if (!kv->str_copy) return HEARTH_E_NOMEM;
    } else if (type == HEARTH_GGUF_ARRAY) {
        struct gguf_array *a;
        char awhat[96];
        snprintf(awhat, sizeof awhat, "the array '%.64s'", kv->key);
        st = parse_array(c, 1, awhat, &a);
        if (st) return st;
        fill_array_value(&kv->value, a);
    } else {
        size_t bytes = value_types[type].bytes;
        st = need(c, bytes, "a metadata value");
        if (st) return st;
        decode_scalar(c->g->base + c->pos, &kv->value);
        c->pos += bytes;
    }
    kv->raw_bytes = (size_t)(c->g->base + c->pos - kv->raw);
    return HEARTH_OK;
}

/* ---- tensors ------------------------------------------------------------ */

static int compare_by_key(const void *a, const void *b)
{
    const struct gguf_kv *ka = *(const struct gguf_kv *const *)a;
    const struct gguf_kv *kb = *(const struct gguf_kv *const *)b;
    return strcmp(ka->key, kb->key);
}

static int compare_by_name(const void *a, const void *b)
{
    const hearth_gguf_tensor *ta = *(const hearth_gguf_tensor *const *)a;
    const hearth_gguf_tensor *tb = *(const hearth_gguf_tensor *const *)b;
    return strcmp(ta->name, tb->name);
}

static int compare_by_offset(const void *a, const void *b)
{
    const hearth_gguf_tensor *ta = *(const hearth_gguf_tensor *const *)a;
    const hearth_gguf_tensor *tb = *(const hearth_gguf_tensor *const *)b;
    return ta->offset < tb->offset ? -1 : ta->offset > tb->offset;
}

static hearth_status parse_tensor_info(struct cursor *c, int64_t index, hearth_gguf_tensor *t)
{
    size_t at = c->pos;
    const char *name;
    uint64_t name_len;
    char what[64];
    snprintf(what, sizeof what, "the name of tensor %lld", (long long)index);
    hearth_status st = read_string(c, what, &name, &name_len);
    if (st) return st;
    if (name_len == 0) return fail_at(c, at, "tensor %lld has an empty name", (long long)index);
    if (memchr(name, '\0', (size_t)name_len))
        return fail_at(c, at, "the name of tensor %lld contains a NUL byte", (long long)index);
    t->name = hearth_strndup(name, (size_t)name_len, "a tensor name");
    if (!t->name) return HEARTH_E_NOMEM;

    size_t dims_at = c->pos;
    st = read_u32(c, "a tensor's dimension count", &t->n_dims);
    if (st) return st;
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return fail_at(c, dims_at, "tensor '%s' has %u dimensions (1 to %d allowed)", t->name,
                       t->n_dims, GGUF_MAX_DIMS);
    uint64_t elems = 1;
    bool overflow = false;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        size_t dim_at = c->pos;
        uint64_t ne;
        st = read_u64(c, "a tensor dimension", &ne);
        if (st) return st;
        if (ne > (uint64_t)INT64_MAX)
            return fail_at(c, dim_at, "tensor '%s' dimension %u is negative", t->name, d);
        t->ne[d] = (int64_t)ne;
        if (ne != 0 && elems > (uint64_t)INT64_MAX / ne) overflow = true;
        elems *= ne;
    }
    if (overflow)
        return fail_at(c, dims_at, "tensor '%s' has more elements than fit in 64 bits", t->name);

    size_t type_at = c->pos;
    uint32_t type;
    st = read_u32(c, "a tensor type", &type);
    if (st) return st;
    if (!hearth_type_name((hearth_type)type))
        return fail_at(c, type_at, "tensor '%s' has unknown type %u", t->name, type);
    t->type = (hearth_type)type;
    int64_t block = hearth_type_block_elems(t->type);
    if (t->ne[0] % block != 0)
        return fail_at(c, dims_at, "tensor '%s' of type %s has rows of %lld elements, not a "
                       "multiple of the block size %lld", t->name, hearth_type_name(t->type),
                       (long long)t->ne[0], (long long)block);
    size_t blocks = (size_t)(elems / (uint64_t)block);
    if (elems / (uint64_t)block > SIZE_MAX ||
        hearth_mul_overflow(blocks, hearth_type_block_bytes(t->type), &t->bytes))
        return fail_at(c, dims_at, "tensor '%s' is too large", t->name);

    st = read_u64(c, "a tensor offset", &t->offset);
    return st;
}

/* Check data placement once the data section's start is known. */
static hearth_status check_tensor_data(hearth_gguf *g)
{
    struct cursor c = {g, 0};
    uint64_t data_bytes = g->size - g->data_offset;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        hearth_gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment != 0)
            return fail_at(&c, (size_t)(g->data_offset + t->offset),
                           "tensor '%s' data offset %llu is not a multiple of the alignment %u",
                           t->name, (unsigned long long)t->offset, g->alignment);
        if (t->offset > data_bytes || t->bytes > data_bytes - t->offset)
            return hearth_error(HEARTH_E_FORMAT,
                                "%s: tensor '%s' needs bytes %llu..%llu but the file has %zu "
                                "bytes (truncated?)", g->path, t->name,
                                (unsigned long long)(g->data_offset + t->offset),
                                (unsigned long long)(g->data_offset + t->offset + t->bytes),
                                g->size);
        t->data = g->base + g->data_offset + t->offset;
    }
    /* Overlapping tensors would alias each other's data: check in offset order. */
    const hearth_gguf_tensor **by_offset =
        hearth_malloc((size_t)g->n_tensors * sizeof *by_offset + 1, "tensor order");
    if (!by_offset) return HEARTH_E_NOMEM;
    for (int64_t i = 0; i < g->n_tensors; i++) by_offset[i] = &g->tensors[i];
    qsort(by_offset, (size_t)g->n_tensors, sizeof *by_offset, compare_by_offset);
    hearth_status st = HEARTH_OK;
    for (int64_t i = 1; i < g->n_tensors; i++) {
        const hearth_gguf_tensor *a = by_offset[i - 1], *b = by_offset[i];
        if (a->offset + a->bytes > b->offset) {
            st = hearth_error(HEARTH_E_FORMAT, "%s: the data of tensors '%s' and '%s' overlap",
                              g->path, a->name, b->name);
            break;
        }
    }
    free(by_offset);
    return st;
}

/* The path of file k of a split model (0: the first, the handle's own). */
static const char *part_path(const hearth_gguf *g, int32_t k)
{
    return k == 0 ? g->path : g->parts[k - 1]->path;
}

/* Tensor lookup by name: sort once, binary search later; the sort also
 * exposes duplicate names, within a file or across the parts of a split
 * model. */
static hearth_status index_tensors(hearth_gguf *g)
{
    free(g->by_name);
    g->by_name = hearth_malloc((size_t)g->n_tensors * sizeof *g->by_name + 1, "tensor index");
    if (!g->by_name) return HEARTH_E_NOMEM;
    for (int64_t i = 0; i < g->n_tensors; i++) g->by_name[i] = &g->tensors[i];
    qsort(g->by_name, (size_t)g->n_tensors, sizeof *g->by_name, compare_by_name);
    for (int64_t i = 1; i < g->n_tensors; i++) {
        const hearth_gguf_tensor *a = g->by_name[i - 1], *b = g->by_name[i];
        if (strcmp(a->name, b->name) != 0) continue;
        if (a->split == b->split)
            return hearth_error(HEARTH_E_FORMAT, "%s: duplicate tensor name '%s'", part_path(g, (int32_t)a->split),
                                b->name);
        return hearth_error(HEARTH_E_FORMAT, "%s: tensor '%s' is in two parts of the split model: %s and %s",
                            g->path, b->name, part_path(g, (int32_t)HEARTH_MIN(a->split, b->split)),
                            part_path(g, (int32_t)HEARTH_MAX(a->split, b->split)));
    }
    return HEARTH_OK;
}

/* ---- open / close --------------------------------------------------------- */

static hearth_status parse(hearth_gguf *g)
{
    struct cursor c = {g, 0};
    hearth_status st;

    if (g->size < 4 || memcmp(g->base, GGUF_MAGIC, 4) != 0)
        return hearth_error(HEARTH_E_FORMAT, "%s: not a GGUF file (no 'GGUF' magic at byte 0)",
                            g->path);
    c.pos = 4;
    st = read_u32(&c, "the header", &g->version);
    if (st) return st;
    if (g->version == 1)
        return fail_at(&c, 4, "GGUF version 1 is not supported (only versions 2 and 3); "
                       "convert the file with current tools");
    if (g->version != 2 && g->version != 3) {
        if ((g->version & 0xffff) == 0 && g->version != 0)
            return fail_at(&c, 4, "GGUF version %u looks byte-swapped: big-endian GGUF files "
                           "are not supported", g->version);
        return fail_at(&c, 4, "unsupported GGUF version %u (2 and 3 are supported)", g->version);
    }
    uint64_t n_tensors, n_kv;
    st = read_u64(&c, "the header", &n_tensors);
    if (st) return st;
    st = read_u64(&c, "the header", &n_kv);
    if (st) return st;
    /* Each metadata entry takes at least 12 bytes, each tensor info 32. */
    if (n_kv > remaining(&c) / 12)
        return fail_at(&c, 16, "header claims %llu metadata entries, more than the file can hold",
                       (unsigned long long)n_kv);
    if (n_tensors > remaining(&c) / 32)
        return fail_at(&c, 8, "header claims %llu tensors, more than the file can hold",
                       (unsigned long long)n_tensors);

    g->kv = hearth_calloc((size_t)n_kv + 1, sizeof *g->kv, "GGUF metadata");
    if (!g->kv) return HEARTH_E_NOMEM;
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < n_kv; i++) {
        size_t at = c.pos;
        st = parse_kv(&c, (int64_t)i, &g->kv[i]);
        g->n_kv = (int64_t)i + 1;
        if (st) return st;
        if (strcmp(g->kv[i].key, "general.alignment") == 0) {
            const hearth_gguf_value *v = &g->kv[i].value;
            if (v->type != HEARTH_GGUF_UINT32)
                return fail_at(&c, at, "general.alignment must be a uint32, not %s",
                               value_types[v->type].name);
            if (v->v.u == 0 || (v->v.u & (v->v.u - 1)) != 0)
                return fail_at(&c, at, "general.alignment %llu is not a power of two",
                               (unsigned long long)v->v.u);
            g->alignment = (uint32_t)v->v.u;
        }
    }

    /* Key lookup: sort once, binary search later; duplicates show up here. */
    g->kv_by_key = hearth_malloc((size_t)g->n_kv * sizeof *g->kv_by_key + 1, "metadata index");
    if (!g->kv_by_key) return HEARTH_E_NOMEM;
    for (int64_t i = 0; i < g->n_kv; i++) g->kv_by_key[i] = &g->kv[i];
    qsort(g->kv_by_key, (size_t)g->n_kv, sizeof *g->kv_by_key, compare_by_key);
    for (int64_t i = 1; i < g->n_kv; i++)
        if (strcmp(g->kv_by_key[i - 1]->key, g->kv_by_key[i]->key) == 0)
            return hearth_error(HEARTH_E_FORMAT, "%s: duplicate metadata key '%s'", g->path,
                                g->kv_by_key[i]->key);

    g->tensors = hearth_calloc((size_t)n_tensors + 1, sizeof *g->tensors, "GGUF tensor table");
    if (!g->tensors) return HEARTH_E_NOMEM;
    for (uint64_t i = 0; i < n_tensors; i++) {
        st = parse_tensor_info(&c, (int64_t)i, &g->tensors[i]);
        g->n_tensors = g->n_own_tensors = (int64_t)i + 1;
        if (st) return st;
    }
    HEARTH_TRY(index_tensors(g));

    uint64_t data_offset = c.pos + (g->alignment - c.pos % g->alignment) % g->alignment;
    if (g->n_tensors > 0 && data_offset > g->size)
        return fail_at(&c, c.pos, "file ends before its data section (expected at byte %llu)",
                       (unsigned long long)data_offset);
    g->data_offset = data_offset > g->size ? g->size : data_offset;
    return check_tensor_data(g);
}

void hearth_gguf_close(hearth_gguf *g)
{
    if (!g) return;
    for (int64_t i = 0; i < g->n_kv; i++) {
        free(g->kv[i].key);
        free(g->kv[i].str_copy);
        if (g->kv[i].value.type == HEARTH_GGUF_ARRAY)
            free_array((struct gguf_array *)g->kv[i].value.v.arr.priv);
    }
    free(g->kv);
    free(g->kv_by_key);
    for (int64_t i = 0; i < g->n_own_tensors; i++) free((char *)g->tensors[i].name);
    free(g->tensors);
    free(g->by_name);
    for (int32_t k = 0; k < g->n_parts; k++) hearth_gguf_close(g->parts[k]);
    free(g->parts);
#ifdef HAVE_MMAP
    if (g->mapped) munmap((void *)g->base, g->size);
#endif
    if (g->owned) free((void *)g->base);
    free(g->path);
    free(g);
}

static hearth_status finish_open(hearth_gguf *g, hearth_gguf **out)
{
    hearth_status st = parse(g);
    if (st) {
        /* parse() records a message for every failure except allocation,
         * whose helper recorded its own. */
        hearth_gguf_close(g);
        return st;
    }
    *out = g;
    return HEARTH_OK;
}

hearth_status hearth_gguf_open_memory(const void *data, size_t size, const char *name,
                                      hearth_gguf **out)
{
    if (!data && size) return hearth_error(HEARTH_E_INVALID, "hearth_gguf_open_memory: data is NULL");
    if (!out) return hearth_error(HEARTH_E_INVALID, "hearth_gguf_open_memory: out is NULL");
    hearth_gguf *g = hearth_calloc(1, sizeof *g, "a GGUF reader");
    if (!g) return HEARTH_E_NOMEM;
    g->path = hearth_strdup(name ? name : "(memory)", "a file name");
    if (!g->path) {
        free(g);
        return HEARTH_E_NOMEM;
    }
    g->base = data ? data : (const uint8_t *)"";
    g->size = size;
    return finish_open(g, out);
}

/* Open and validate one file (a whole model, or one part of a split one). */
static hearth_status open_file(const char *path, hearth_gguf **out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        return hearth_error(err == ENOENT ? HEARTH_E_NOT_FOUND : HEARTH_E_IO,
                            "%s: cannot open: %s", path, strerror(err));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return hearth_error(HEARTH_E_IO, "%s: cannot stat: %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return hearth_error(HEARTH_E_IO, "%s: not a regular file", path);
    }
    if ((uintmax_t)st.st_size > SIZE_MAX) {
        close(fd);
        return hearth_error(HEARTH_E_IO, "%s: file too large for this platform", path);
    }
    hearth_gguf *g = hearth_calloc(1, sizeof *g, "a GGUF reader");
    if (!g) {
        close(fd);
        return HEARTH_E_NOMEM;
    }
    g->path = hearth_strdup(path, "a file name");
    if (!g->path) {
        free(g);
        close(fd);
        return HEARTH_E_NOMEM;
    }
    g->size = (size_t)st.st_size;
    if (g->size == 0) {
        close(fd);
        g->base = (const uint8_t *)"";
        return finish_open(g, out);
    }
#ifdef HAVE_MMAP
    void *map = mmap(NULL, g->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map != MAP_FAILED) {
        g->base = map;
        g->mapped = true;
    }
#endif
    if (!g->mapped) {
        /* No mmap (or it failed, e.g. on some network filesystems): read the
         * whole file instead. */
        uint8_t *buf = hearth_malloc(g->size, "a GGUF file image");
        if (!buf) {
            close(fd);
            hearth_gguf_close(g);
            return HEARTH_E_NOMEM;
        }
        size_t done = 0;
        while (done < g->size) {
            ssize_t n = read(fd, buf + done, g->size - done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                int err = n < 0 ? errno : EIO;
                free(buf);
                close(fd);
                hearth_gguf_close(g);
                return hearth_error(HEARTH_E_IO, "%s: read failed at byte %zu: %s", path, done,
                                    n < 0 ? strerror(err) : "file shrank while reading");
            }
            done += (size_t)n;
        }
        g->base = buf;
        g->owned = true;
    }
    close(fd);
    return finish_open(g, out);
}

/* ---- split models ------------------------------------------------------- */

/* "-00001-of-00003.gguf": the part number from 1 and the count, five
 * digits each, as gguf-split names the parts. */
#define SPLIT_SUFFIX_FORMAT "-%05u-of-%05u.gguf"
#define SPLIT_SUFFIX_BYTES 20
#define SPLIT_MAX_PARTS 99999u

static bool parse_digits(const char *s, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < 5; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (uint32_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

bool gguf_split_name_parse(const char *path, size_t *prefix_len, uint32_t *no, uint32_t *count)
{
    const size_t len = strlen(path);
    if (len <= SPLIT_SUFFIX_BYTES) return false;
    const char *s = path + len - SPLIT_SUFFIX_BYTES;
    uint32_t n, c;
    if (s[0] != '-' || !parse_digits(s + 1, &n) || memcmp(s + 6, "-of-", 4) != 0 || !parse_digits(s + 10, &c) ||
        strcmp(s + 15, ".gguf") != 0 || n < 1 || n > c)
        return false;
    *prefix_len = len - SPLIT_SUFFIX_BYTES;
    *no = n;
    *count = c;
    return true;
}

char *gguf_split_name(const char *prefix, size_t prefix_len, uint32_t no, uint32_t count)
{
    char *s = hearth_malloc(prefix_len + SPLIT_SUFFIX_BYTES + 1, "a file name");
    if (!s) return NULL;
    memcpy(s, prefix, prefix_len);
    snprintf(s + prefix_len, SPLIT_SUFFIX_BYTES + 1, SPLIT_SUFFIX_FORMAT, no, count);
    return s;
}

/* An integer split.* key of g: *present false (and HEARTH_OK) when the key
 * is missing. */
static hearth_status split_key(const hearth_gguf *g, const char *key, uint32_t *out, bool *present)
{
    hearth_status st = hearth_gguf_get_u32(g, key, out);
    *present = st == HEARTH_OK;
    return st == HEARTH_E_NOT_FOUND ? HEARTH_OK : st;
}

/* Check that part k of a split model of count parts (the first, g, says
 * tensors_count tensors in all when have_tensors) belongs with it. */
static hearth_status check_part(const hearth_gguf *g, const hearth_gguf *p, uint32_t k, uint32_t count,
                                bool have_tensors, uint32_t tensors_count)
{
    uint32_t v;
    bool present;
    HEARTH_TRY(split_key(p, "split.no", &v, &present));
    if (!present)
        return hearth_error(HEARTH_E_FORMAT, "%s: no split.no: not a part of a split model (%s is the "
                            "first of %u parts)", p->path, g->path, count);
    if (v != k)
        return hearth_error(HEARTH_E_FORMAT, "%s: split.no says it is part %u, its name says part %u", p->path,
                            v + 1, k + 1);
    HEARTH_TRY(split_key(p, "split.count", &v, &present));
    if (!present)
        return hearth_error(HEARTH_E_FORMAT, "%s: split.count is missing (%s says the model is in %u parts)",
                            p->path, g->path, count);
    if (v != count)
        return hearth_error(HEARTH_E_FORMAT, "%s: split.count is %u, but %s says the model is in %u parts: "
                            "parts of different split models?", p->path, v, g->path, count);
    HEARTH_TRY(split_key(p, "split.tensors.count", &v, &present));
    if (present && have_tensors && v != tensors_count)
        return hearth_error(HEARTH_E_FORMAT, "%s: split.tensors.count is %u, but %s says %u: parts of "
                            "different models?", p->path, v, g->path, tensors_count);
    return HEARTH_OK;
}

/* Open the other parts of a split model whose first part g is, append
 * their tensors to g's and check the whole. */
static hearth_status open_parts(hearth_gguf *g)
{
    uint32_t count = 0, no = 0, tensors_count = 0;
    bool present, have_tensors;
    HEARTH_TRY(split_key(g, "split.count", &count, &present));
    if (!present || count <= 1) return HEARTH_OK;
    if (count > SPLIT_MAX_PARTS)
        return hearth_error(HEARTH_E_FORMAT, "%s: split.count %u is more than the %u parts a split model can "
                            "have", g->path, count, SPLIT_MAX_PARTS);
    HEARTH_TRY(split_key(g, "split.no", &no, &present));
    if (!present)
        return hearth_error(HEARTH_E_FORMAT, "%s: split.count is %u but split.no is missing", g->path, count);
    HEARTH_TRY(split_key(g, "split.tensors.count", &tensors_count, &have_tensors));
    size_t prefix_len;
    uint32_t name_no, name_count;
    const bool named = gguf_split_name_parse(g->path, &prefix_len, &name_no, &name_count);
    if (no != 0) {
        char *first = named ? gguf_split_name(g->path, prefix_len, 1, name_count) : NULL;
        hearth_status st = hearth_error(HEARTH_E_FORMAT, "%s is part %u of %u of a split model: open the first "
                                        "part%s%s", g->path, no + 1, count, first ? ", " : "", first ? first : "");
        free(first);
        return st;
    }
    if (!named)
        return hearth_error(HEARTH_E_FORMAT, "%s: the model is split into %u files (split.count), but the "
                            "name does not end in -00001-of-%05u.gguf, so the other parts cannot be found",
                            g->path, count, count);
    if (name_no != 1 || name_count != count)
        return hearth_error(HEARTH_E_FORMAT, "%s: the name says part %u of %u, but the file is part 1 of %u "
                            "(split.no, split.count)", g->path, name_no, name_count, count);
    g->parts = hearth_calloc(count - 1, sizeof *g->parts, "the parts of a split model");
    if (!g->parts) return HEARTH_E_NOMEM;
    int64_t total = g->n_tensors;
    for (uint32_t k = 1; k < count; k++) {
        char *name = gguf_split_name(g->path, prefix_len, k + 1, count);
        if (!name) return HEARTH_E_NOMEM;
        hearth_gguf *p;
        hearth_status st = open_file(name, &p);
        if (st == HEARTH_E_NOT_FOUND || st == HEARTH_E_IO) {
            char why[512];
            snprintf(why, sizeof why, "%s", hearth_last_error());
            st = hearth_error(st, "%s: part %u of %u of the split model is missing or unreadable (%s)",
                              g->path, k + 1, count, why);
        }
        free(name);
        if (st) return st;
        g->parts[g->n_parts++] = p;
        HEARTH_TRY(check_part(g, p, k, count, have_tensors, tensors_count));
        for (int64_t i = 0; i < p->n_tensors; i++) p->tensors[i].split = k;
        total += p->n_tensors;
    }
    hearth_gguf_tensor *all = hearth_realloc(g->tensors, (size_t)total * sizeof *all + 1, "the tensors of a split model");
    if (!all) return HEARTH_E_NOMEM;
    g->tensors = all;
    for (int32_t k = 0; k < g->n_parts; k++) {
        const hearth_gguf *p = g->parts[k];
        memcpy(&all[g->n_tensors], p->tensors, (size_t)p->n_tensors * sizeof *all);
        g->n_tensors += p->n_tensors;
    }
    HEARTH_TRY(index_tensors(g));
    if (have_tensors && (uint64_t)g->n_tensors != tensors_count)
        return hearth_error(HEARTH_E_FORMAT, "%s: the %u parts hold %lld tensors, but split.tensors.count says "
                            "%u: a part of another model?", g->path, count, (long long)g->n_tensors,
                            tensors_count);
    return HEARTH_OK;
}

hearth_status hearth_gguf_open(const char *path, hearth_gguf **out)
{
    if (!path || !out) return hearth_error(HEARTH_E_INVALID, "hearth_gguf_open: NULL argument");
    hearth_gguf *g;
    HEARTH_TRY(open_file(path, &g));
    hearth_status st = open_parts(g);
    if (st) {
        hearth_gguf_close(g);
        return st;
    }
    *out = g;
    return HEARTH_OK;
}

bool gguf_release_pages(const hearth_gguf *g, const void *data, size_t bytes)
{
    /* addresses as integers: data may lie in another part's mapping */
    const uintptr_t p = (uintptr_t)data, base = (uintptr_t)g->base;
    for (int32_t k = 0; k < g->n_parts; k++)
        if (gguf_release_pages(g->parts[k], data, bytes)) return true;
    if (!g->mapped || p < base || bytes > g->size || p - base > g->size - bytes) return false;
#if defined(HAVE_MMAP) && defined(MADV_DONTNEED)
    /* Every page the range touches, those it shares with a neighbour
     * too: the mapping is private and never written, so a page dropped is
     * only read again from the file if it is touched again. */
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t first = p / page * page, end = (p + bytes + page - 1) / page * page;
    if (end > first) (void)madvise((void *)first, end - first, MADV_DONTNEED);
    return true;
#else
    return false;
#endif
}

/* ---- accessors ---------------------------------------------------------- */

uint32_t hearth_gguf_version(const hearth_gguf *g) { return g->version; }
uint32_t hearth_gguf_alignment(const hearth_gguf *g) { return g->alignment; }
uint64_t hearth_gguf_data_offset(const hearth_gguf *g) { return g->data_offset; }
uint64_t hearth_gguf_file_size(const hearth_gguf *g) { return g->size; }
const char *hearth_gguf_path(const hearth_gguf *g) { return g->path; }
int32_t hearth_gguf_n_splits(const hearth_gguf *g) { return 1 + g->n_parts; }

const char *hearth_gguf_split_path(const hearth_gguf *g, int32_t index)
{
    if (index < 0 || index > g->n_parts) return NULL;
    return part_path(g, index);
}

uint64_t hearth_gguf_split_size(const hearth_gguf *g, int32_t index)
{
    if (index < 0 || index > g->n_parts) return 0;
    return index == 0 ? g->size : g->parts[index - 1]->size;
}
int64_t hearth_gguf_n_kv(const hearth_gguf *g) { return g->n_kv; }
int64_t hearth_gguf_n_tensors(const hearth_gguf *g) { return g->n_tensors; }

const char *hearth_gguf_kv_key(const hearth_gguf *g, int64_t index)
{
    if (index < 0 || index >= g->n_kv) return NULL;
    return g->kv[index].key;
}

hearth_status hearth_gguf_kv_value(const hearth_gguf *g, int64_t index, hearth_gguf_value *out)
{
    if (index < 0 || index >= g->n_kv)
        return hearth_error(HEARTH_E_INVALID, "%s: metadata index %lld out of range (0..%lld)",
                            g->path, (long long)index, (long long)g->n_kv - 1);
    *out = g->kv[index].value;
    return HEARTH_OK;
}

int64_t hearth_gguf_find_key(const hearth_gguf *g, const char *key)
{
    int64_t lo = 0, hi = g->n_kv - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(g->kv_by_key[mid]->key, key);
        if (c == 0) return g->kv_by_key[mid] - g->kv;
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

hearth_status hearth_gguf_array_get(const hearth_gguf *g, const hearth_gguf_value *array,
                                    uint64_t j, hearth_gguf_value *out)
{
    if (!array || array->type != HEARTH_GGUF_ARRAY || !array->v.arr.priv)
        return hearth_error(HEARTH_E_INVALID, "%s: value is not an array", g->path);
    const struct gguf_array *a = array->v.arr.priv;
    if (j >= a->n)
        return hearth_error(HEARTH_E_INVALID, "%s: array index %llu out of range (%llu elements)",
                            g->path, (unsigned long long)j, (unsigned long long)a->n);
    memset(out, 0, sizeof *out);
    out->type = a->elem_type;
    if (a->elem_type == HEARTH_GGUF_STRING) {
        const uint8_t *p = a->data + a->offsets[j];
        out->v.str.len = load_u64(p);
        out->v.str.ptr = (const char *)p + 8;
    } else if (a->elem_type == HEARTH_GGUF_ARRAY) {
        fill_array_value(out, a->children[j]);
    } else {
        decode_scalar(a->data + j * value_types[a->elem_type].bytes, out);
    }
    return HEARTH_OK;
}

static const struct gguf_kv *lookup(const hearth_gguf *g, const char *key)
{
    int64_t i = hearth_gguf_find_key(g, key);
    return i < 0 ? NULL : &g->kv[i];
}

static hearth_status missing(const hearth_gguf *g, const char *key)
{
    return hearth_error(HEARTH_E_NOT_FOUND, "%s: metadata key '%s' is missing", g->path, key);
}

static hearth_status wrong_type(const hearth_gguf *g, const struct gguf_kv *kv, const char *want)
{
    return hearth_error(HEARTH_E_FORMAT, "%s: metadata '%s' is a %s, expected %s", g->path,
                        kv->key, value_types[kv->value.type].name, want);
}

static bool is_unsigned(hearth_gguf_type t)
{
    return t == HEARTH_GGUF_UINT8 || t == HEARTH_GGUF_UINT16 || t == HEARTH_GGUF_UINT32 ||
           t == HEARTH_GGUF_UINT64;
}

static bool is_signed(hearth_gguf_type t)
{
    return t == HEARTH_GGUF_INT8 || t == HEARTH_GGUF_INT16 || t == HEARTH_GGUF_INT32 ||
           t == HEARTH_GGUF_INT64;
}

/* Any integer value, range-checked against [lo, hi]. */
static hearth_status get_integer(const hearth_gguf *g, const char *key, int64_t lo, uint64_t hi,
                                 const char *want, bool *negative, uint64_t *magnitude)
{
    const struct gguf_kv *kv = lookup(g, key);
    if (!kv) return missing(g, key);
    const hearth_gguf_value *v = &kv->value;
    if (is_unsigned(v->type)) {
        *negative = false;
        *magnitude = v->v.u;
        if (v->v.u > hi) goto range;
        return HEARTH_OK;
    }
    if (is_signed(v->type)) {
        *negative = v->v.i < 0;
        *magnitude = *negative ? (uint64_t)0 - (uint64_t)v->v.i : (uint64_t)v->v.i;
        if (*negative ? v->v.i < lo : *magnitude > hi) goto range;
        return HEARTH_OK;
    }
    return wrong_type(g, kv, want);
range:
    return hearth_error(HEARTH_E_FORMAT, "%s: metadata '%s' value %s%llu does not fit in %s",
                        g->path, key, *negative ? "-" : "", (unsigned long long)*magnitude, want);
}

hearth_status hearth_gguf_get_u32(const hearth_gguf *g, const char *key, uint32_t *out)
{
    bool neg;
    uint64_t m;
    hearth_status st = get_integer(g, key, 0, UINT32_MAX, "uint32", &neg, &m);
    if (!st) *out = (uint32_t)m;
    return st;
}

hearth_status hearth_gguf_get_u64(const hearth_gguf *g, const char *key, uint64_t *out)
{
    bool neg;
    uint64_t m;
    hearth_status st = get_integer(g, key, 0, UINT64_MAX, "uint64", &neg, &m);
    if (!st) *out = m;
    return st;
}

hearth_status hearth_gguf_get_i32(const hearth_gguf *g, const char *key, int32_t *out)
{
    bool neg;
    uint64_t m;
    hearth_status st = get_integer(g, key, INT32_MIN, INT32_MAX, "int32", &neg, &m);
    if (!st) *out = neg ? (int32_t)(0 - (int64_t)m) : (int32_t)m;
    return st;
}

hearth_status hearth_gguf_get_i64(const hearth_gguf *g, const char *key, int64_t *out)
{
    bool neg;
    uint64_t m;
    hearth_status st = get_integer(g, key, INT64_MIN, INT64_MAX, "int64", &neg, &m);
    if (!st) *out = neg ? (int64_t)(0 - m) : (int64_t)m;
    return st;
}

hearth_status hearth_gguf_get_f64(const hearth_gguf *g, const char *key, double *out)
{
    const struct gguf_kv *kv = lookup(g, key);
    if (!kv) return missing(g, key);
    if (kv->value.type != HEARTH_GGUF_FLOAT32 && kv->value.type != HEARTH_GGUF_FLOAT64)
        return wrong_type(g, kv, "a float");
    *out = kv->value.v.f;
    return HEARTH_OK;
}

hearth_status hearth_gguf_get_f32(const hearth_gguf *g, const char *key, float *out)
{
    double d = 0.0;
    hearth_status st = hearth_gguf_get_f64(g, key, &d);
    if (!st) *out = (float)d;
    return st;
}

hearth_status hearth_gguf_get_bool(const hearth_gguf *g, const char *key, bool *out)
{
    const struct gguf_kv *kv = lookup(g, key);
    if (!kv) return missing(g, key);
    if (kv->value.type != HEARTH_GGUF_BOOL) return wrong_type(g, kv, "bool");
    *out = kv->value.v.b;
    return HEARTH_OK;
}

hearth_status hearth_gguf_get_str(const hearth_gguf *g, const char *key, const char **out)
{
    const struct gguf_kv *kv = lookup(g, key);
    if (!kv) return missing(g, key);
    if (kv->value.type != HEARTH_GGUF_STRING) return wrong_type(g, kv, "string");
    *out = kv->str_copy;
    return HEARTH_OK;
}

hearth_status hearth_gguf_get_array(const hearth_gguf *g, const char *key, hearth_gguf_value *out)
{
    const struct gguf_kv *kv = lookup(g, key);
    if (!kv) return missing(g, key);
    if (kv->value.type != HEARTH_GGUF_ARRAY) return wrong_type(g, kv, "array");
    *out = kv->value;
    return HEARTH_OK;
}

const hearth_gguf_tensor *hearth_gguf_tensor_at(const hearth_gguf *g, int64_t index)
{
    if (index < 0 || index >= g->n_tensors) return NULL;
    return &g->tensors[index];
}

const hearth_gguf_tensor *hearth_gguf_find_tensor(const hearth_gguf *g, const char *name)
{
    int64_t lo = 0, hi = g->n_tensors - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        const hearth_gguf_tensor *t = g->by_name[mid];
        int c = strcmp(t->name, name);
        if (c == 0) return t;
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

/* Internal: the encoded bytes of metadata entry index (for the writer). */
const void *gguf_kv_raw(const hearth_gguf *g, int64_t index, size_t *bytes)
{
    *bytes = g->kv[index].raw_bytes;
    return g->kv[index].raw;
}

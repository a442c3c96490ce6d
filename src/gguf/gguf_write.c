/*
 * gguf_write.c -- writing GGUF version 3 files (the layout is described in
 * gguf.c).  Used by quantization, the benchmark-model generator and tests.
 *
 * Metadata values are kept encoded exactly as they go into the file, so
 * entries copied from a reader (nested arrays included) are written
 * byte for byte.  Tensor data is referenced, not copied, until the file is
 * written -- or, with gguf_writer_write_streaming(), produced one tensor at a
 * time while the file is written, so that converting a model never holds
 * more than one of its tensors in memory.  The file is written under a
 * temporary name and renamed into place, so a failed write never leaves a
 * truncated model behind.
 */
#include "gguf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GGUF_WRITE_VERSION 3
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_TENSOR_NAME 63

struct writer_kv {
    char *key;
    uint32_t type;
    uint8_t *value;   /* encoded value */
    size_t bytes;
};

struct writer_tensor {
    char *name;
    hearth_type type;
    uint32_t n_dims;
    int64_t ne[4];
    const void *data;
    size_t bytes;
    uint64_t offset;
};

struct hearth_gguf_writer {
    struct writer_kv *kv;
    size_t n_kv, cap_kv;
    struct writer_tensor *tensors;
    size_t n_tensors, cap_tensors;
    uint32_t alignment;
};

hearth_status hearth_gguf_writer_new(hearth_gguf_writer **out)
{
    hearth_gguf_writer *w = hearth_calloc(1, sizeof *w, "a GGUF writer");
    if (!w) return HEARTH_E_NOMEM;
    w->alignment = GGUF_DEFAULT_ALIGNMENT;
    *out = w;
    return HEARTH_OK;
}

void hearth_gguf_writer_free(hearth_gguf_writer *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].value);
    }
    free(w->kv);
    for (size_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->tensors);
    free(w);
}

static void store_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void store_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Add or replace key with an encoded value (ownership of value moves in). */
static hearth_status put_kv(hearth_gguf_writer *w, const char *key, uint32_t type, uint8_t *value,
                            size_t bytes)
{
    if (!key || !*key) {
        free(value);
        return hearth_error(HEARTH_E_INVALID, "GGUF writer: empty metadata key");
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, key) == 0) {
            free(w->kv[i].value);
            w->kv[i].type = type;
            w->kv[i].value = value;
            w->kv[i].bytes = bytes;
            return HEARTH_OK;
        }
    }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? w->cap_kv * 2 : 16;
        struct writer_kv *kv = hearth_realloc(w->kv, cap * sizeof *kv, "GGUF writer metadata");
        if (!kv) {
            free(value);
            return HEARTH_E_NOMEM;
        }
        w->kv = kv;
        w->cap_kv = cap;
    }
    char *k = hearth_strdup(key, "a metadata key");
    if (!k) {
        free(value);
        return HEARTH_E_NOMEM;
    }
    w->kv[w->n_kv++] = (struct writer_kv){k, type, value, bytes};
    return HEARTH_OK;
}

static hearth_status put_scalar(hearth_gguf_writer *w, const char *key, hearth_gguf_type type,
                                uint64_t bits, size_t bytes)
{
    uint8_t *v = hearth_malloc(bytes, "a metadata value");
    if (!v) return HEARTH_E_NOMEM;
    for (size_t i = 0; i < bytes; i++) v[i] = (uint8_t)(bits >> (8 * i));
    return put_kv(w, key, type, v, bytes);
}

hearth_status hearth_gguf_writer_set_u8(hearth_gguf_writer *w, const char *key, uint8_t value)
{
    return put_scalar(w, key, HEARTH_GGUF_UINT8, value, 1);
}

hearth_status hearth_gguf_writer_set_i8(hearth_gguf_writer *w, const char *key, int8_t value)
{
    return put_scalar(w, key, HEARTH_GGUF_INT8, (uint8_t)value, 1);
}

hearth_status hearth_gguf_writer_set_u16(hearth_gguf_writer *w, const char *key, uint16_t value)
{
    return put_scalar(w, key, HEARTH_GGUF_UINT16, value, 2);
}

hearth_status hearth_gguf_writer_set_i16(hearth_gguf_writer *w, const char *key, int16_t value)
{
    return put_scalar(w, key, HEARTH_GGUF_INT16, (uint16_t)value, 2);
}

hearth_status hearth_gguf_writer_set_u32(hearth_gguf_writer *w, const char *key, uint32_t value)
{
    return put_scalar(w, key, HEARTH_GGUF_UINT32, value, 4);
}

hearth_status hearth_gguf_writer_set_i32(hearth_gguf_writer *w, const char *key, int32_t value)
{
    return put_scalar(w, key, HEARTH_GGUF_INT32, (uint32_t)value, 4);
}

hearth_status hearth_gguf_writer_set_u64(hearth_gguf_writer *w, const char *key, uint64_t value)
{
    return put_scalar(w, key, HEARTH_GGUF_UINT64, value, 8);
}

hearth_status hearth_gguf_writer_set_i64(hearth_gguf_writer *w, const char *key, int64_t value)
{
    return put_scalar(w, key, HEARTH_GGUF_INT64, (uint64_t)value, 8);
}

hearth_status hearth_gguf_writer_set_f32(hearth_gguf_writer *w, const char *key, float value)
{
    uint32_t bits;
    memcpy(&bits, &value, 4);
    return put_scalar(w, key, HEARTH_GGUF_FLOAT32, bits, 4);
}

hearth_status hearth_gguf_writer_set_f64(hearth_gguf_writer *w, const char *key, double value)
{
    uint64_t bits;
    memcpy(&bits, &value, 8);
    return put_scalar(w, key, HEARTH_GGUF_FLOAT64, bits, 8);
}

hearth_status hearth_gguf_writer_set_bool(hearth_gguf_writer *w, const char *key, bool value)
{
    return put_scalar(w, key, HEARTH_GGUF_BOOL, value ? 1 : 0, 1);
}

hearth_status hearth_gguf_writer_set_str(hearth_gguf_writer *w, const char *key, const char *value)
{
    if (!value) return hearth_error(HEARTH_E_INVALID, "GGUF writer: NULL string for '%s'", key);
    size_t len = strlen(value);
    uint8_t *v = hearth_malloc(8 + len, "a metadata string");
    if (!v) return HEARTH_E_NOMEM;
    store_u64(v, len);
    memcpy(v + 8, value, len);
    return put_kv(w, key, HEARTH_GGUF_STRING, v, 8 + len);
}

/* Element sizes of the fixed-size value types (0: not allowed in set_array). */
static size_t fixed_size(hearth_gguf_type t)
{
    switch (t) {
    case HEARTH_GGUF_UINT8: case HEARTH_GGUF_INT8: case HEARTH_GGUF_BOOL: return 1;
    case HEARTH_GGUF_UINT16: case HEARTH_GGUF_INT16: return 2;
    case HEARTH_GGUF_UINT32: case HEARTH_GGUF_INT32: case HEARTH_GGUF_FLOAT32: return 4;
    case HEARTH_GGUF_UINT64: case HEARTH_GGUF_INT64: case HEARTH_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

hearth_status hearth_gguf_writer_set_array(hearth_gguf_writer *w, const char *key,
                                           hearth_gguf_type elem_type, const void *data,
                                           uint64_t n)
{
    size_t es = fixed_size(elem_type);
    if (!es)
        return hearth_error(HEARTH_E_INVALID, "GGUF writer: '%s': arrays of %s need "
                            "hearth_gguf_writer_set_str_array", key,
                            hearth_gguf_type_name(elem_type) ? hearth_gguf_type_name(elem_type)
                                                             : "unknown type");
    size_t payload, total;
    if (n > SIZE_MAX || hearth_mul_overflow((size_t)n, es, &payload) ||
        hearth_add_overflow(payload, 12, &total))
        return hearth_error(HEARTH_E_INVALID, "GGUF writer: array '%s' is too large", key);
    uint8_t *v = hearth_malloc(total, "a metadata array");
    if (!v) return HEARTH_E_NOMEM;
    store_u32(v, elem_type);
    store_u64(v + 4, n);
    /* The file is little endian, as is every platform hearth targets; a
     * big-endian port would byte-swap here. */
    if (payload) memcpy(v + 12, data, payload);
    return put_kv(w, key, HEARTH_GGUF_ARRAY, v, total);
}

hearth_status hearth_gguf_writer_set_str_array(hearth_gguf_writer *w, const char *key,
                                               const char *const *strs, uint64_t n)
{
    size_t total = 12;
    for (uint64_t i = 0; i < n; i++) {
        if (!strs[i])
            return hearth_error(HEARTH_E_INVALID, "GGUF writer: '%s': element %llu is NULL", key,
                                (unsigned long long)i);
        if (hearth_add_overflow(total, 8 + strlen(strs[i]), &total))
            return hearth_error(HEARTH_E_INVALID, "GGUF writer: array '%s' is too large", key);
    }
    uint8_t *v = hearth_malloc(total, "a metadata string array");
    if (!v) return HEARTH_E_NOMEM;
    store_u32(v, HEARTH_GGUF_STRING);
    store_u64(v + 4, n);
    uint8_t *p = v + 12;
    for (uint64_t i = 0; i < n; i++) {
        size_t len = strlen(strs[i]);
        store_u64(p, len);
        memcpy(p + 8, strs[i], len);
        p += 8 + len;
    }
    return put_kv(w, key, HEARTH_GGUF_ARRAY, v, total);
}

hearth_status hearth_gguf_writer_copy_kv(hearth_gguf_writer *w, const hearth_gguf *src,
                                         int64_t index)
{
    const char *key = hearth_gguf_kv_key(src, index);
    if (!key)
        return hearth_error(HEARTH_E_INVALID, "GGUF writer: metadata index %lld out of range",
                            (long long)index);
    hearth_gguf_value v;
    hearth_gguf_kv_value(src, index, &v);
    size_t bytes;
    const void *raw = gguf_kv_raw(src, index, &bytes);
    uint8_t *copy = hearth_malloc(bytes, "a copied metadata value");
    if (!copy) return HEARTH_E_NOMEM;
    memcpy(copy, raw, bytes);
    if (strcmp(key, "general.alignment") == 0 && v.type == HEARTH_GGUF_UINT32)
        w->alignment = (uint32_t)v.v.u;
    return put_kv(w, key, v.type, copy, bytes);
}

hearth_status hearth_gguf_writer_set_alignment(hearth_gguf_writer *w, uint32_t alignment)
{
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
        return hearth_error(HEARTH_E_INVALID, "GGUF writer: alignment %u is not a power of two",
                            alignment);
    w->alignment = alignment;
    return hearth_gguf_writer_set_u32(w, "general.alignment", alignment);
}

hearth_status hearth_gguf_writer_add_tensor(hearth_gguf_writer *w, const char *name,
                                            hearth_type type, uint32_t n_dims, const int64_t *ne,
                                            const void *data, size_t bytes)
{
    if (!name || !*name || strlen(name) > GGUF_MAX_TENSOR_NAME)
        return hearth_error(HEARTH_E_INVALID, "GGUF writer: tensor name '%s' must be 1 to %d bytes",
                            name ? name : "(null)", GGUF_MAX_TENSOR_NAME);
    if (!hearth_type_name(type))
        return hearth_error(HEARTH_E_INVALID, "GGUF writer: tensor '%s' has unknown type %d", name,
                            (int)type);
    if (n_dims < 1 || n_dims > 4)
        return hearth_error(HEARTH_E_INVALID, "GGUF writer: tensor '%s' has %u dimensions (1 to 4)",
                            name, n_dims);
    for (size_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return hearth_error(HEARTH_E_INVALID, "GGUF writer: duplicate tensor '%s'", name);
    size_t elems = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] < 0 || hearth_mul_overflow(elems, (size_t)ne[d], &elems))
            return hearth_error(HEARTH_E_INVALID, "GGUF writer: tensor '%s' has a bad shape", name);
    }
    int64_t block = hearth_type_block_elems(type);
    if (ne[0] % block != 0)
        return hearth_error(HEARTH_E_INVALID, "GGUF writer: tensor '%s': %lld elements per row is "
                            "not a multiple of the %s block size %lld", name, (long long)ne[0],
                            hearth_type_name(type), (long long)block);
    size_t want;
    if (hearth_mul_overflow(elems / (size_t)block, hearth_type_block_bytes(type), &want) ||
        want != bytes)
        return hearth_error(HEARTH_E_INVALID, "GGUF writer: tensor '%s' has %zu bytes of data, "
                            "its type and shape need %zu", name, bytes, want);
    if (w->n_tensors == w->cap_tensors) {
        size_t cap = w->cap_tensors ? w->cap_tensors * 2 : 64;
        struct writer_tensor *t = hearth_realloc(w->tensors, cap * sizeof *t, "GGUF writer tensors");
        if (!t) return HEARTH_E_NOMEM;
        w->tensors = t;
        w->cap_tensors = cap;
    }
    struct writer_tensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof *t);
    t->name = hearth_strdup(name, "a tensor name");
    if (!t->name) return HEARTH_E_NOMEM;
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < 4; d++) t->ne[d] = d < (int)n_dims ? ne[d] : 1;
    t->data = data;
    t->bytes = bytes;
    w->n_tensors++;
    return HEARTH_OK;
}

/* ---- output -------------------------------------------------------------- */

struct out {
    FILE *f;
    const char *path;
    uint64_t pos;
    bool failed;
};

static void put(struct out *o, const void *data, size_t bytes)
{
    if (o->failed || bytes == 0) return;
    if (fwrite(data, 1, bytes, o->f) != bytes) o->failed = true;
    o->pos += bytes;
}

static void put_u32(struct out *o, uint32_t v)
{
    uint8_t b[4];
    store_u32(b, v);
    put(o, b, 4);
}

static void put_u64(struct out *o, uint64_t v)
{
    uint8_t b[8];
    store_u64(b, v);
    put(o, b, 8);
}

static void put_string(struct out *o, const char *s)
{
    size_t len = strlen(s);
    put_u64(o, len);
    put(o, s, len);
}

static void pad_to(struct out *o, uint32_t alignment)
{
    static const uint8_t zeros[64];
    uint64_t pad = (alignment - o->pos % alignment) % alignment;
    while (pad > 0) {
        size_t n = pad > sizeof zeros ? sizeof zeros : (size_t)pad;
        put(o, zeros, n);
        pad -= n;
    }
}

/* The tensors [first, end) of a file, and which part of a split model it
 * is (0 also for a file that is not split). */
struct part {
    size_t first, end;
    uint32_t no;
};

/* Whether metadata entry kv goes into part p: everything into the first
 * (or only) file, the split.* keys alone into the others. */
static bool part_has_kv(const struct part *p, const struct writer_kv *kv)
{
    return p->no == 0 || strncmp(kv->key, "split.", 6) == 0;
}

static hearth_status write_file(hearth_gguf_writer *w, const char *path, gguf_tensor_fill_fn fill,
                                void *user, const struct part *part)
{
    if (!path) return hearth_error(HEARTH_E_INVALID, "GGUF writer: NULL path");
    /* Tensors without data are produced into one buffer as large as the
     * largest of them. */
    size_t fill_bytes = 0;
    for (size_t i = part->first; i < part->end; i++) {
        if (w->tensors[i].data || w->tensors[i].bytes == 0) continue;
        if (!fill)
            return hearth_error(HEARTH_E_INVALID, "GGUF writer: tensor '%s' has no data",
                                w->tensors[i].name);
        fill_bytes = HEARTH_MAX(fill_bytes, w->tensors[i].bytes);
    }
    void *fill_buf = NULL;
    if (fill_bytes) {
        fill_buf = hearth_aligned_alloc(64, fill_bytes, "a tensor buffer");
        if (!fill_buf) return HEARTH_E_NOMEM;
    }
    /* Tensor offsets: packed in order, each aligned. */
    uint64_t offset = 0;
    for (size_t i = part->first; i < part->end; i++) {
        offset += (w->alignment - offset % w->alignment) % w->alignment;
        w->tensors[i].offset = offset;
        offset += w->tensors[i].bytes;
    }

    size_t plen = strlen(path);
    char *tmp = hearth_malloc(plen + 16, "a file name");
    if (!tmp) {
        hearth_aligned_free(fill_buf);
        return HEARTH_E_NOMEM;
    }
    snprintf(tmp, plen + 16, "%s.tmp%ld", path, (long)getpid());
    struct out o = {fopen(tmp, "wb"), path, 0, false};
    if (!o.f) {
        hearth_status st = hearth_error(HEARTH_E_IO, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        hearth_aligned_free(fill_buf);
        return st;
    }
    size_t n_kv = 0;
    for (size_t i = 0; i < w->n_kv; i++) n_kv += part_has_kv(part, &w->kv[i]);
    put(&o, "GGUF", 4);
    put_u32(&o, GGUF_WRITE_VERSION);
    put_u64(&o, part->end - part->first);
    put_u64(&o, n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        if (!part_has_kv(part, &w->kv[i])) continue;
        put_string(&o, w->kv[i].key);
        put_u32(&o, w->kv[i].type);
        put(&o, w->kv[i].value, w->kv[i].bytes);
    }
    for (size_t i = part->first; i < part->end; i++) {
        const struct writer_tensor *t = &w->tensors[i];
        put_string(&o, t->name);
        put_u32(&o, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) put_u64(&o, (uint64_t)t->ne[d]);
        put_u32(&o, (uint32_t)t->type);
        put_u64(&o, t->offset);
    }
    pad_to(&o, w->alignment);
    hearth_status fill_status = HEARTH_OK;
    for (size_t i = part->first; i < part->end && !o.failed; i++) {
        const struct writer_tensor *t = &w->tensors[i];
        pad_to(&o, w->alignment);
        const void *data = t->data;
        if (!data && t->bytes) {
            fill_status = fill(user, i, fill_buf, t->bytes);
            if (fill_status != HEARTH_OK) break;
            data = fill_buf;
        }
        put(&o, data, t->bytes);
    }
    hearth_aligned_free(fill_buf);
    int err = o.failed ? errno : 0;
    if (fclose(o.f) != 0 && !err) err = errno ? errno : EIO;
    if (fill_status != HEARTH_OK) {
        unlink(tmp);
        free(tmp);
        return fill_status;
    }
    if (o.failed || err) {
        unlink(tmp);
        free(tmp);
        return hearth_error(HEARTH_E_IO, "%s: write failed: %s", path, strerror(err ? err : EIO));
    }
    if (rename(tmp, path) != 0) {
        err = errno;
        unlink(tmp);
        free(tmp);
        return hearth_error(HEARTH_E_IO, "%s: cannot rename the written file into place: %s", path,
                            strerror(err));
    }
    free(tmp);
    return HEARTH_OK;
}

static hearth_status write_whole(hearth_gguf_writer *w, const char *path, gguf_tensor_fill_fn fill, void *user)
{
    const struct part whole = {0, w->n_tensors, 0};
    return write_file(w, path, fill, user, &whole);
}

hearth_status hearth_gguf_writer_write(hearth_gguf_writer *w, const char *path)
{
    return write_whole(w, path, NULL, NULL);
}

hearth_status gguf_writer_write_streaming(hearth_gguf_writer *w, const char *path,
                                          gguf_tensor_fill_fn fill, void *user)
{
    if (!fill) return hearth_error(HEARTH_E_INVALID, "GGUF writer: NULL fill function");
    return write_whole(w, path, fill, user);
}

hearth_status gguf_writer_write_split(hearth_gguf_writer *w, const char *prefix, size_t max_tensors,
                                      gguf_tensor_fill_fn fill, void *user, uint32_t *n_parts)
{
    if (!prefix || !*prefix) return hearth_error(HEARTH_E_INVALID, "GGUF writer: no name for the parts");
    if (max_tensors == 0) return hearth_error(HEARTH_E_INVALID, "GGUF writer: parts of 0 tensors");
    const size_t count = w->n_tensors ? (w->n_tensors + max_tensors - 1) / max_tensors : 1;
    if (count > 99999)
        return hearth_error(HEARTH_E_INVALID, "GGUF writer: %zu parts of %zu tensors, more than a split model "
                            "can have", count, max_tensors);
    HEARTH_TRY(hearth_gguf_writer_set_u16(w, "split.no", 0));
    HEARTH_TRY(hearth_gguf_writer_set_u16(w, "split.count", (uint16_t)count));
    HEARTH_TRY(hearth_gguf_writer_set_i32(w, "split.tensors.count", (int32_t)w->n_tensors));
    for (uint32_t k = 0; k < count; k++) {
        const struct part part = {k * max_tensors, HEARTH_MIN((k + 1) * max_tensors, w->n_tensors), k};
        HEARTH_TRY(hearth_gguf_writer_set_u16(w, "split.no", (uint16_t)k));
        char *name = gguf_split_name(prefix, strlen(prefix), k + 1, (uint32_t)count);
        if (!name) return HEARTH_E_NOMEM;
        hearth_status st = write_file(w, name, fill, user, &part);
        free(name);
        if (st) return st;
    }
    *n_parts = (uint32_t)count;
    return HEARTH_OK;
}

/*
 * test-gguf.c -- the GGUF reader and writer: the shared models, every value
 * type through a write/read round trip, and corrupt input (truncation, bit
 * flips, crafted headers), which must fail with a message naming the file
 * and the byte offset, never crash.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "testutil.h"

static const char *const shared_models[] = {
    "stories260K.gguf",
    "micro-llama-f32.gguf", "micro-llama-F16.gguf", "micro-llama-BF16.gguf",
    "micro-llama-Q8_0.gguf", "micro-llama-Q4_0.gguf", "micro-llama-Q4_1.gguf",
    "micro-llama-Q5_0.gguf", "micro-llama-Q5_1.gguf", "micro-llama-Q2_K.gguf",
    "micro-llama-Q3_K_M.gguf", "micro-llama-Q4_K_M.gguf", "micro-llama-Q5_K_M.gguf",
    "micro-llama-Q6_K.gguf",
    "micro-qwen2-f32.gguf", "micro-qwen2-F16.gguf", "micro-qwen2-BF16.gguf",
    "micro-qwen2-Q8_0.gguf", "micro-qwen2-Q4_0.gguf", "micro-qwen2-Q4_1.gguf",
    "micro-qwen2-Q5_0.gguf", "micro-qwen2-Q5_1.gguf", "micro-qwen2-Q2_K.gguf",
    "micro-qwen2-Q3_K_M.gguf", "micro-qwen2-Q4_K_M.gguf", "micro-qwen2-Q5_K_M.gguf",
    "micro-qwen2-Q6_K.gguf",
};

static char *model_path(const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "models/%s", name);
    const char *p = test_data_path(buf);
    ck_assert_msg(p != NULL, "missing shared model %s", name);
    return strdup(p);
}

/* Touch every accessor on every entry, so a reader that accepted a file
 * is exercised end to end (under ASan this finds any out-of-bounds read). */
static void walk_value(const hearth_gguf *g, const hearth_gguf_value *v, int depth)
{
    ck_assert_int_lt(depth, 16);
    if (v->type == HEARTH_GGUF_ARRAY) {
        for (uint64_t j = 0; j < v->v.arr.n; j++) {
            hearth_gguf_value e;
            ck_assert_int_eq(hearth_gguf_array_get(g, v, j, &e), HEARTH_OK);
            walk_value(g, &e, depth + 1);
        }
        hearth_gguf_value e;
        ck_assert_int_eq(hearth_gguf_array_get(g, v, v->v.arr.n, &e), HEARTH_E_INVALID);
    } else if (v->type == HEARTH_GGUF_STRING) {
        volatile char sink = 0;
        for (uint64_t k = 0; k < v->v.str.len; k++) sink ^= v->v.str.ptr[k];
        (void)sink;
    }
}

static void walk_file(const hearth_gguf *g)
{
    for (int64_t i = 0; i < hearth_gguf_n_kv(g); i++) {
        const char *key = hearth_gguf_kv_key(g, i);
        ck_assert_ptr_nonnull(key);
        ck_assert_int_eq(hearth_gguf_find_key(g, key), i);
        hearth_gguf_value v;
        ck_assert_int_eq(hearth_gguf_kv_value(g, i, &v), HEARTH_OK);
        walk_value(g, &v, 0);
    }
    for (int64_t i = 0; i < hearth_gguf_n_tensors(g); i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(g, i);
        ck_assert_ptr_eq(hearth_gguf_find_tensor(g, t->name), t);
        ck_assert_uint_eq(t->offset % hearth_gguf_alignment(g), 0);
        ck_assert_uint_le(hearth_gguf_data_offset(g) + t->offset + t->bytes, hearth_gguf_file_size(g));
        size_t row = hearth_type_row_bytes(t->type, t->ne[0]);
        ck_assert_uint_eq(row * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]), t->bytes);
        volatile uint8_t sink = 0;
        const uint8_t *d = t->data;
        if (t->bytes) sink ^= d[0] ^ d[t->bytes - 1];
        (void)sink;
    }
    ck_assert_ptr_null(hearth_gguf_tensor_at(g, -1));
    ck_assert_ptr_null(hearth_gguf_tensor_at(g, hearth_gguf_n_tensors(g)));
    ck_assert_ptr_null(hearth_gguf_find_tensor(g, "no.such.tensor"));
    ck_assert_int_eq(hearth_gguf_find_key(g, "no.such.key"), -1);
}

START_TEST(test_shared_models)
{
    if (!test_require_data()) return;
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(shared_models); i++) {
        char *path = model_path(shared_models[i]);
        hearth_gguf *g;
        hearth_status st = hearth_gguf_open(path, &g);
        ck_assert_msg(st == HEARTH_OK, "%s: %s", path, hearth_last_error());
        ck_assert_uint_eq(hearth_gguf_version(g), 3);
        ck_assert_str_eq(hearth_gguf_path(g), path);
        const char *arch;
        ck_assert_int_eq(hearth_gguf_get_str(g, "general.architecture", &arch), HEARTH_OK);
        ck_assert(strcmp(arch, "llama") == 0 || strcmp(arch, "qwen2") == 0);
        ck_assert_int_gt(hearth_gguf_n_tensors(g), 0);
        walk_file(g);
        hearth_gguf_close(g);
        free(path);
    }
}
END_TEST

START_TEST(test_typed_accessors)
{
    if (!test_require_data()) return;
    char *path = model_path("micro-llama-Q4_K_M.gguf");
    hearth_gguf *g;
    ck_assert_int_eq(hearth_gguf_open(path, &g), HEARTH_OK);
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f;
    double d;
    bool b;
    const char *s;
    hearth_gguf_value arr;

    ck_assert_int_eq(hearth_gguf_get_u32(g, "llama.block_count", &u32), HEARTH_OK);
    ck_assert_uint_eq(u32, 2);
    ck_assert_int_eq(hearth_gguf_get_i64(g, "llama.block_count", &i64), HEARTH_OK);
    ck_assert_int_eq(i64, 2);
    ck_assert_int_eq(hearth_gguf_get_f32(g, "llama.rope.freq_base", &f), HEARTH_OK);
    ck_assert(f == 10000.0f);
    ck_assert_int_eq(hearth_gguf_get_f64(g, "llama.rope.freq_base", &d), HEARTH_OK);
    ck_assert(d == 10000.0);
    /* 0xffffffff does not fit in an int32 but does in a uint64 */
    ck_assert_int_eq(hearth_gguf_get_i32(g, "tokenizer.ggml.padding_token_id", &i32), HEARTH_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "does not fit"));
    ck_assert_int_eq(hearth_gguf_get_u64(g, "tokenizer.ggml.padding_token_id", &u64), HEARTH_OK);
    ck_assert_uint_eq(u64, 0xffffffffu);
    /* wrong types */
    ck_assert_int_eq(hearth_gguf_get_u32(g, "general.architecture", &u32), HEARTH_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "general.architecture"));
    ck_assert_int_eq(hearth_gguf_get_str(g, "llama.block_count", &s), HEARTH_E_FORMAT);
    ck_assert_int_eq(hearth_gguf_get_bool(g, "llama.block_count", &b), HEARTH_E_FORMAT);
    ck_assert_int_eq(hearth_gguf_get_f32(g, "llama.block_count", &f), HEARTH_E_FORMAT);
    /* missing keys leave the output untouched */
    u32 = 12345;
    ck_assert_int_eq(hearth_gguf_get_u32(g, "llama.no_such_key", &u32), HEARTH_E_NOT_FOUND);
    ck_assert_uint_eq(u32, 12345);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "llama.no_such_key"));
    /* arrays */
    ck_assert_int_eq(hearth_gguf_get_array(g, "tokenizer.ggml.tokens", &arr), HEARTH_OK);
    ck_assert_int_eq(arr.v.arr.elem_type, HEARTH_GGUF_STRING);
    ck_assert_uint_eq(arr.v.arr.n, 512);
    hearth_gguf_value e;
    ck_assert_int_eq(hearth_gguf_array_get(g, &arr, 1, &e), HEARTH_OK);
    ck_assert_int_eq(e.type, HEARTH_GGUF_STRING);
    ck_assert_uint_eq(e.v.str.len, 3);
    ck_assert(memcmp(e.v.str.ptr, "<s>", 3) == 0);
    ck_assert_int_eq(hearth_gguf_get_array(g, "tokenizer.ggml.token_type", &arr), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_array_get(g, &arr, 0, &e), HEARTH_OK);
    ck_assert_int_eq(e.type, HEARTH_GGUF_INT32);
    ck_assert_int_eq(e.v.i, 2);
    ck_assert_int_eq(hearth_gguf_get_array(g, "general.name", &arr), HEARTH_E_FORMAT);
    /* tensors */
    const hearth_gguf_tensor *t = hearth_gguf_find_tensor(g, "blk.1.ffn_down.weight");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->type, HEARTH_TYPE_Q6_K);
    ck_assert_uint_eq(t->n_dims, 2);
    ck_assert_int_eq(t->ne[0], 512);
    ck_assert_int_eq(t->ne[1], 256);
    ck_assert_int_eq(t->ne[2], 1);
    ck_assert_uint_eq(t->bytes, 256 * 2 * 210);
    hearth_gguf_close(g);
    free(path);
}
END_TEST

/* ---- a tiny GGUF builder for crafted files ------------------------------ */

struct buf {
    uint8_t *p;
    size_t n, cap;
};

static void put(struct buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        ck_assert_ptr_nonnull(b->p);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void put_u32(struct buf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, x, 4);
}

static void put_u64(struct buf *b, uint64_t v)
{
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}

static void put_str(struct buf *b, const char *s)
{
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

static void put_header(struct buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    put(b, "GGUF", 4);
    put_u32(b, version);
    put_u64(b, n_tensors);
    put_u64(b, n_kv);
}

static void pad(struct buf *b, size_t alignment)
{
    while (b->n % alignment) put(b, "", 1);
}

/* One F32 tensor "t" of 8 elements at offset 0, after one metadata entry. */
static struct buf valid_file(void)
{
    struct buf b = {0};
    put_header(&b, 3, 1, 1);
    put_str(&b, "general.architecture");
    put_u32(&b, HEARTH_GGUF_STRING);
    put_str(&b, "llama");
    put_str(&b, "t");
    put_u32(&b, 1);
    put_u64(&b, 8);
    put_u32(&b, HEARTH_TYPE_F32);
    put_u64(&b, 0);
    pad(&b, 32);
    float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    put(&b, data, sizeof data);
    return b;
}

static hearth_status open_buf(const struct buf *b, hearth_gguf **g)
{
    return hearth_gguf_open_memory(b->p, b->n, "crafted.gguf", g);
}

/* The file must be rejected as malformed with a message naming it and
 * containing `needle`. */
static void expect_format_error(const struct buf *b, const char *needle)
{
    hearth_gguf *g = NULL;
    hearth_status st = open_buf(b, &g);
    ck_assert_msg(st == HEARTH_E_FORMAT, "expected a format error mentioning '%s', got status %d (%s)",
                  needle, st, hearth_last_error());
    ck_assert_ptr_null(g);
    ck_assert_msg(strstr(hearth_last_error(), "crafted.gguf") != NULL, "message lacks the file: %s",
                  hearth_last_error());
    ck_assert_msg(strstr(hearth_last_error(), needle) != NULL, "message '%s' lacks '%s'",
                  hearth_last_error(), needle);
}

START_TEST(test_crafted_valid)
{
    struct buf b = valid_file();
    hearth_gguf *g;
    ck_assert_int_eq(open_buf(&b, &g), HEARTH_OK);
    const hearth_gguf_tensor *t = hearth_gguf_find_tensor(g, "t");
    ck_assert_ptr_nonnull(t);
    ck_assert_float_eq(((const float *)t->data)[7], 8.0f);
    hearth_gguf_close(g);
    free(b.p);
}
END_TEST

START_TEST(test_crafted_errors)
{
    struct buf b = {0};

    put(&b, "GGUX", 4);
    put_u32(&b, 3);
    expect_format_error(&b, "not a GGUF file");
    b.n = 0;

    put_header(&b, 1, 0, 0);
    expect_format_error(&b, "version 1 is not supported");
    b.n = 0;
    put_header(&b, 4, 0, 0);
    expect_format_error(&b, "unsupported GGUF version 4");
    b.n = 0;
    put_header(&b, 3u << 24, 0, 0);
    expect_format_error(&b, "byte-swapped");
    b.n = 0;

    put_header(&b, 3, 0, UINT64_MAX);
    expect_format_error(&b, "metadata entries");
    b.n = 0;
    put_header(&b, 3, 1ull << 40, 0);
    expect_format_error(&b, "tensors, more than");
    b.n = 0;

    /* a string length past the end */
    put_header(&b, 3, 0, 1);
    put_u64(&b, 1ull << 62);
    put(&b, "0123456789abcdef", 16);
    expect_format_error(&b, "has length 4611686018427387904 but only 16 bytes remain");
    b.n = 0;

    /* unknown value type */
    put_header(&b, 3, 0, 1);
    put_str(&b, "k");
    put_u32(&b, 13);
    expect_format_error(&b, "unknown value type 13");
    b.n = 0;

    /* array with an absurd count */
    put_header(&b, 3, 0, 1);
    put_str(&b, "k");
    put_u32(&b, HEARTH_GGUF_ARRAY);
    put_u32(&b, HEARTH_GGUF_UINT32);
    put_u64(&b, 1ull << 61);
    expect_format_error(&b, "claims");
    b.n = 0;

    /* arrays nested too deep */
    put_header(&b, 3, 0, 1);
    put_str(&b, "k");
    put_u32(&b, HEARTH_GGUF_ARRAY);
    for (int i = 0; i < 40; i++) {
        put_u32(&b, HEARTH_GGUF_ARRAY);
        put_u64(&b, 1);
    }
    put_u32(&b, HEARTH_GGUF_UINT8);
    put_u64(&b, 0);
    expect_format_error(&b, "deeper");
    b.n = 0;

    /* duplicate keys */
    put_header(&b, 3, 0, 2);
    put_str(&b, "k");
    put_u32(&b, HEARTH_GGUF_UINT8);
    put(&b, "\1", 1);
    put_str(&b, "k");
    put_u32(&b, HEARTH_GGUF_UINT8);
    put(&b, "\2", 1);
    expect_format_error(&b, "duplicate metadata key 'k'");
    b.n = 0;

    /* bad alignments */
    put_header(&b, 3, 0, 1);
    put_str(&b, "general.alignment");
    put_u32(&b, HEARTH_GGUF_UINT32);
    put_u32(&b, 24);
    expect_format_error(&b, "not a power of two");
    b.n = 0;
    put_header(&b, 3, 0, 1);
    put_str(&b, "general.alignment");
    put_u32(&b, HEARTH_GGUF_UINT64);
    put_u64(&b, 32);
    expect_format_error(&b, "must be a uint32");
    b.n = 0;

    free(b.p);
}
END_TEST

/* A file with one tensor described by the arguments, data of data_bytes. */
static struct buf tensor_file(uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t offset,
                              size_t data_bytes)
{
    struct buf b = {0};
    put_header(&b, 3, 1, 0);
    put_str(&b, "w");
    put_u32(&b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) put_u64(&b, ne[d]);
    put_u32(&b, type);
    put_u64(&b, offset);
    pad(&b, 32);
    for (size_t i = 0; i < data_bytes; i++) put(&b, "\0", 1);
    return b;
}

START_TEST(test_crafted_tensor_errors)
{
    uint64_t ne[5] = {32, 2, 1, 1, 1};
    struct buf b;

    b = tensor_file(0, ne, HEARTH_TYPE_F32, 0, 256);
    expect_format_error(&b, "0 dimensions");
    free(b.p);
    b = tensor_file(5, ne, HEARTH_TYPE_F32, 0, 256);
    expect_format_error(&b, "5 dimensions");
    free(b.p);
    b = tensor_file(2, ne, 4, 0, 256);
    expect_format_error(&b, "unknown type 4");
    free(b.p);
    b = tensor_file(2, ne, 99, 0, 256);
    expect_format_error(&b, "unknown type 99");
    free(b.p);

    uint64_t neg[2] = {1ull << 63, 1};
    b = tensor_file(2, neg, HEARTH_TYPE_F32, 0, 0);
    expect_format_error(&b, "negative");
    free(b.p);
    uint64_t big[3] = {1ull << 32, 1ull << 32, 4};
    b = tensor_file(3, big, HEARTH_TYPE_F32, 0, 0);
    expect_format_error(&b, "64 bits");
    free(b.p);
    uint64_t huge[2] = {1ull << 40, 1ull << 20};
    b = tensor_file(2, huge, HEARTH_TYPE_F32, 0, 0);
    expect_format_error(&b, "truncated");
    free(b.p);

    uint64_t ragged[2] = {33, 1};
    b = tensor_file(2, ragged, HEARTH_TYPE_Q4_0, 0, 64);
    expect_format_error(&b, "not a multiple of the block size");
    free(b.p);

    b = tensor_file(2, ne, HEARTH_TYPE_F32, 16, 512);
    expect_format_error(&b, "not a multiple of the alignment");
    free(b.p);
    b = tensor_file(2, ne, HEARTH_TYPE_F32, 0, 255);
    expect_format_error(&b, "truncated");
    free(b.p);
    b = tensor_file(2, ne, HEARTH_TYPE_F32, UINT64_MAX - 31, 256);
    expect_format_error(&b, "truncated");
    free(b.p);

    /* duplicate names and overlapping data */
    for (int dup = 0; dup < 2; dup++) {
        struct buf d = {0};
        put_header(&d, 3, 2, 0);
        for (int i = 0; i < 2; i++) {
            put_str(&d, dup ? "same" : (i ? "b" : "a"));
            put_u32(&d, 1);
            put_u64(&d, 64);
            put_u32(&d, HEARTH_TYPE_F32);
            put_u64(&d, i ? 128 : 0); /* a is 256 bytes: b at 128 overlaps */
        }
        pad(&d, 32);
        for (int i = 0; i < 512; i++) put(&d, "\0", 1);
        expect_format_error(&d, dup ? "duplicate tensor name 'same'" : "overlap");
        free(d.p);
    }
}
END_TEST

/* Every truncation of a real model's header and tensor table, and a sample
 * of truncations inside its data, is rejected cleanly. */
START_TEST(test_truncation)
{
    if (!test_require_data()) return;
    char *path = model_path("micro-llama-Q4_0.gguf");
    size_t len;
    char *data = test_read_file(path, &len);
    hearth_gguf *g;
    ck_assert_int_eq(hearth_gguf_open_memory(data, len, "t.gguf", &g), HEARTH_OK);
    size_t data_offset = (size_t)hearth_gguf_data_offset(g);
    hearth_gguf_close(g);
    for (size_t n = 0; n < len; n += n < data_offset ? 1 : 997) {
        hearth_status st = hearth_gguf_open_memory(data, n, "t.gguf", &g);
        ck_assert_msg(st == HEARTH_E_FORMAT, "truncated to %zu bytes: status %d", n, st);
        ck_assert_msg(strstr(hearth_last_error(), "t.gguf") != NULL, "%s", hearth_last_error());
    }
    free(data);
    free(path);
}
END_TEST

/* Flip one random bit in each byte of the header and tensor table: the
 * result is either rejected as malformed or a file whose every accessor
 * works. */
START_TEST(test_bit_flips)
{
    if (!test_require_data()) return;
    char *path = model_path("micro-qwen2-Q4_K_M.gguf");
    size_t len;
    char *data = test_read_file(path, &len);
    hearth_gguf *g;
    ck_assert_int_eq(hearth_gguf_open_memory(data, len, "f.gguf", &g), HEARTH_OK);
    size_t data_offset = (size_t)hearth_gguf_data_offset(g);
    hearth_gguf_close(g);
    test_rng rng;
    test_rng_seed(&rng, 42);
    int accepted = 0, rejected = 0;
    for (size_t i = 0; i < data_offset; i++) {
        uint8_t bit = (uint8_t)(1u << (test_rng_next(&rng) % 8));
        data[i] ^= bit;
        hearth_status st = hearth_gguf_open_memory(data, len, "f.gguf", &g);
        if (st == HEARTH_OK) {
            walk_file(g);
            hearth_gguf_close(g);
            accepted++;
        } else {
            ck_assert_msg(st == HEARTH_E_FORMAT, "flip at %zu: status %d: %s", i, st,
                          hearth_last_error());
            rejected++;
        }
        data[i] ^= bit;
    }
    /* most flips land in strings (harmless); some must have been caught */
    ck_assert_int_gt(rejected, 0);
    ck_assert_int_gt(accepted, 0);
    free(data);
    free(path);
}
END_TEST

START_TEST(test_open_errors)
{
    hearth_gguf *g;
    ck_assert_int_eq(hearth_gguf_open("/nonexistent/model.gguf", &g), HEARTH_E_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "/nonexistent/model.gguf"));
    ck_assert_int_eq(hearth_gguf_open("/", &g), HEARTH_E_IO);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "not a regular file"));
    char tmpl[] = "/tmp/hearth-empty-XXXXXX";
    int fd = mkstemp(tmpl);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(hearth_gguf_open(tmpl, &g), HEARTH_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "not a GGUF file"));
    unlink(tmpl);
}
END_TEST

/* ---- writer ------------------------------------------------------------- */

static char *temp_path(void)
{
    char tmpl[] = "/tmp/hearth-gguf-XXXXXX";
    int fd = mkstemp(tmpl);
    ck_assert_int_ge(fd, 0);
    close(fd);
    return strdup(tmpl);
}

START_TEST(test_writer_round_trip)
{
    hearth_gguf_writer *w;
    ck_assert_int_eq(hearth_gguf_writer_new(&w), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_set_u8(w, "u8", 250), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_set_i8(w, "i8", -7), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_set_u16(w, "u16", 65000), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_set_i16(w, "i16", -30000), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_set_u32(w, "u32", 4000000000u), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_set_i32(w, "i32", -2000000000), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_set_u64(w, "u64", UINT64_MAX), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_set_i64(w, "i64", INT64_MIN), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_set_f32(w, "f32", 0.1f), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_set_f64(w, "f64", 0.1), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_set_bool(w, "bool", true), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_set_str(w, "str", "h\xc3\xa9llo\nworld"), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_set_str(w, "empty", ""), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_set_u32(w, "replaced", 1), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_set_str(w, "replaced", "two"), HEARTH_OK);
    const int32_t ints[5] = {1, -2, 3, -4, 5};
    ck_assert_int_eq(hearth_gguf_writer_set_array(w, "ints", HEARTH_GGUF_INT32, ints, 5), HEARTH_OK);
    const float floats[3] = {0.5f, -1.25f, 1e30f};
    ck_assert_int_eq(hearth_gguf_writer_set_array(w, "floats", HEARTH_GGUF_FLOAT32, floats, 3), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_set_array(w, "none", HEARTH_GGUF_UINT8, NULL, 0), HEARTH_OK);
    const char *const strs[3] = {"a", "", "longer string"};
    ck_assert_int_eq(hearth_gguf_writer_set_str_array(w, "strs", strs, 3), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_set_array(w, "bad", HEARTH_GGUF_STRING, strs, 3), HEARTH_E_INVALID);
    ck_assert_int_eq(hearth_gguf_writer_set_alignment(w, 64), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_set_alignment(w, 48), HEARTH_E_INVALID);

    float t1[64];
    for (int i = 0; i < 64; i++) t1[i] = (float)i * 0.25f;
    uint8_t t2[2 * 18];
    for (size_t i = 0; i < sizeof t2; i++) t2[i] = (uint8_t)(i * 7);
    int64_t ne1[2] = {16, 4}, ne2[2] = {32, 2}, ne3[1] = {3};
    ck_assert_int_eq(hearth_gguf_writer_add_tensor(w, "t1", HEARTH_TYPE_F32, 2, ne1, t1, sizeof t1), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_add_tensor(w, "t2", HEARTH_TYPE_Q4_0, 2, ne2, t2, sizeof t2), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_add_tensor(w, "t3", HEARTH_TYPE_F16, 1, ne3, t2, 6), HEARTH_OK);
    /* rejected tensors */
    ck_assert_int_eq(hearth_gguf_writer_add_tensor(w, "t1", HEARTH_TYPE_F32, 2, ne1, t1, sizeof t1), HEARTH_E_INVALID);
    ck_assert_int_eq(hearth_gguf_writer_add_tensor(w, "x", HEARTH_TYPE_F32, 2, ne1, t1, 4), HEARTH_E_INVALID);
    ck_assert_int_eq(hearth_gguf_writer_add_tensor(w, "x", HEARTH_TYPE_Q4_0, 2, ne1, t1, sizeof t1), HEARTH_E_INVALID);
    ck_assert_int_eq(hearth_gguf_writer_add_tensor(w, "x", (hearth_type)5, 2, ne1, t1, sizeof t1), HEARTH_E_INVALID);
    char longname[80];
    memset(longname, 'n', sizeof longname - 1);
    longname[79] = 0;
    ck_assert_int_eq(hearth_gguf_writer_add_tensor(w, longname, HEARTH_TYPE_F32, 2, ne1, t1, sizeof t1), HEARTH_E_INVALID);

    char *path = temp_path();
    ck_assert_int_eq(hearth_gguf_writer_write(w, path), HEARTH_OK);
    hearth_gguf_writer_free(w);

    hearth_gguf *g;
    ck_assert_msg(hearth_gguf_open(path, &g) == HEARTH_OK, "%s", hearth_last_error());
    ck_assert_uint_eq(hearth_gguf_version(g), 3);
    ck_assert_uint_eq(hearth_gguf_alignment(g), 64);
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f;
    double d;
    bool b;
    const char *s;
    ck_assert_int_eq(hearth_gguf_get_u32(g, "u8", &u32), HEARTH_OK);
    ck_assert_uint_eq(u32, 250);
    ck_assert_int_eq(hearth_gguf_get_i32(g, "i8", &i32), HEARTH_OK);
    ck_assert_int_eq(i32, -7);
    ck_assert_int_eq(hearth_gguf_get_u32(g, "u16", &u32), HEARTH_OK);
    ck_assert_uint_eq(u32, 65000);
    ck_assert_int_eq(hearth_gguf_get_i32(g, "i16", &i32), HEARTH_OK);
    ck_assert_int_eq(i32, -30000);
    ck_assert_int_eq(hearth_gguf_get_u32(g, "u32", &u32), HEARTH_OK);
    ck_assert_uint_eq(u32, 4000000000u);
    ck_assert_int_eq(hearth_gguf_get_i32(g, "i32", &i32), HEARTH_OK);
    ck_assert_int_eq(i32, -2000000000);
    ck_assert_int_eq(hearth_gguf_get_u64(g, "u64", &u64), HEARTH_OK);
    ck_assert_uint_eq(u64, UINT64_MAX);
    ck_assert_int_eq(hearth_gguf_get_i64(g, "i64", &i64), HEARTH_OK);
    ck_assert(i64 == INT64_MIN);
    ck_assert_int_eq(hearth_gguf_get_u64(g, "i64", &u64), HEARTH_E_FORMAT);
    ck_assert_int_eq(hearth_gguf_get_f32(g, "f32", &f), HEARTH_OK);
    ck_assert(f == 0.1f);
    ck_assert_int_eq(hearth_gguf_get_f64(g, "f64", &d), HEARTH_OK);
    ck_assert(d == 0.1);
    ck_assert_int_eq(hearth_gguf_get_bool(g, "bool", &b), HEARTH_OK);
    ck_assert(b);
    ck_assert_int_eq(hearth_gguf_get_str(g, "str", &s), HEARTH_OK);
    ck_assert_str_eq(s, "h\xc3\xa9llo\nworld");
    ck_assert_int_eq(hearth_gguf_get_str(g, "empty", &s), HEARTH_OK);
    ck_assert_str_eq(s, "");
    ck_assert_int_eq(hearth_gguf_get_str(g, "replaced", &s), HEARTH_OK);
    ck_assert_str_eq(s, "two");
    hearth_gguf_value arr, e;
    ck_assert_int_eq(hearth_gguf_get_array(g, "ints", &arr), HEARTH_OK);
    ck_assert_uint_eq(arr.v.arr.n, 5);
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(hearth_gguf_array_get(g, &arr, (uint64_t)i, &e), HEARTH_OK);
        ck_assert_int_eq(e.v.i, ints[i]);
    }
    ck_assert_int_eq(hearth_gguf_get_array(g, "floats", &arr), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_array_get(g, &arr, 2, &e), HEARTH_OK);
    ck_assert(e.v.f == (double)1e30f);
    ck_assert_int_eq(hearth_gguf_get_array(g, "none", &arr), HEARTH_OK);
    ck_assert_uint_eq(arr.v.arr.n, 0);
    ck_assert_int_eq(hearth_gguf_get_array(g, "strs", &arr), HEARTH_OK);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(hearth_gguf_array_get(g, &arr, (uint64_t)i, &e), HEARTH_OK);
        ck_assert_uint_eq(e.v.str.len, strlen(strs[i]));
        ck_assert(memcmp(e.v.str.ptr, strs[i], e.v.str.len) == 0);
    }
    const hearth_gguf_tensor *t = hearth_gguf_find_tensor(g, "t1");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->type, HEARTH_TYPE_F32);
    ck_assert_int_eq(t->ne[0], 16);
    ck_assert_int_eq(t->ne[1], 4);
    ck_assert(memcmp(t->data, t1, sizeof t1) == 0);
    t = hearth_gguf_find_tensor(g, "t2");
    ck_assert_uint_eq(t->offset % 64, 0);
    ck_assert(memcmp(t->data, t2, sizeof t2) == 0);
    t = hearth_gguf_find_tensor(g, "t3");
    ck_assert_uint_eq(t->n_dims, 1);
    ck_assert(memcmp(t->data, t2, 6) == 0);
    walk_file(g);
    hearth_gguf_close(g);
    unlink(path);
    free(path);
}
END_TEST

/* Nested arrays survive copy_kv byte for byte. */
START_TEST(test_writer_copy_nested)
{
    struct buf b = {0};
    put_header(&b, 2, 0, 1);
    put_str(&b, "nested");
    put_u32(&b, HEARTH_GGUF_ARRAY);
    put_u32(&b, HEARTH_GGUF_ARRAY);
    put_u64(&b, 2);
    put_u32(&b, HEARTH_GGUF_STRING);
    put_u64(&b, 2);
    put_str(&b, "x");
    put_str(&b, "yz");
    put_u32(&b, HEARTH_GGUF_INT16);
    put_u64(&b, 3);
    int16_t v[3] = {-1, 2, -3};
    put(&b, v, sizeof v);
    hearth_gguf *src;
    ck_assert_int_eq(open_buf(&b, &src), HEARTH_OK);
    ck_assert_uint_eq(hearth_gguf_version(src), 2);

    hearth_gguf_writer *w;
    ck_assert_int_eq(hearth_gguf_writer_new(&w), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_copy_kv(w, src, 0), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_copy_kv(w, src, 1), HEARTH_E_INVALID);
    char *path = temp_path();
    ck_assert_int_eq(hearth_gguf_writer_write(w, path), HEARTH_OK);
    hearth_gguf_writer_free(w);
    hearth_gguf_close(src);

    hearth_gguf *g;
    ck_assert_int_eq(hearth_gguf_open(path, &g), HEARTH_OK);
    hearth_gguf_value arr, inner, e;
    ck_assert_int_eq(hearth_gguf_get_array(g, "nested", &arr), HEARTH_OK);
    ck_assert_int_eq(arr.v.arr.elem_type, HEARTH_GGUF_ARRAY);
    ck_assert_uint_eq(arr.v.arr.n, 2);
    ck_assert_int_eq(hearth_gguf_array_get(g, &arr, 0, &inner), HEARTH_OK);
    ck_assert_int_eq(inner.v.arr.elem_type, HEARTH_GGUF_STRING);
    ck_assert_int_eq(hearth_gguf_array_get(g, &inner, 1, &e), HEARTH_OK);
    ck_assert_uint_eq(e.v.str.len, 2);
    ck_assert(memcmp(e.v.str.ptr, "yz", 2) == 0);
    ck_assert_int_eq(hearth_gguf_array_get(g, &arr, 1, &inner), HEARTH_OK);
    ck_assert_int_eq(inner.v.arr.elem_type, HEARTH_GGUF_INT16);
    ck_assert_int_eq(hearth_gguf_array_get(g, &inner, 2, &e), HEARTH_OK);
    ck_assert_int_eq(e.v.i, -3);
    hearth_gguf_close(g);
    unlink(path);
    free(path);
    free(b.p);
}
END_TEST

/* A writer holding every metadata entry and tensor of src (its data
 * referenced, not copied). */
static hearth_gguf_writer *writer_copy(const hearth_gguf *src)
{
    hearth_gguf_writer *w;
    ck_assert_int_eq(hearth_gguf_writer_new(&w), HEARTH_OK);
    for (int64_t i = 0; i < hearth_gguf_n_kv(src); i++)
        ck_assert_int_eq(hearth_gguf_writer_copy_kv(w, src, i), HEARTH_OK);
    for (int64_t i = 0; i < hearth_gguf_n_tensors(src); i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(src, i);
        ck_assert_int_eq(hearth_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->bytes),
                         HEARTH_OK);
    }
    return w;
}

/* Copying every entry and tensor of a file written by the common GGUF
 * tooling reproduces that file byte for byte: the writer follows the same
 * layout rules (entry order, packed aligned tensors, zero padding). */
START_TEST(test_writer_reproduces_shared_files)
{
    if (!test_require_data()) return;
    const char *names[] = {"stories260K.gguf", "micro-llama-Q4_K_M.gguf", "micro-qwen2-BF16.gguf"};
    for (size_t k = 0; k < HEARTH_ARRAY_LEN(names); k++) {
        char *in = model_path(names[k]);
        hearth_gguf *src;
        ck_assert_int_eq(hearth_gguf_open(in, &src), HEARTH_OK);
        hearth_gguf_writer *w = writer_copy(src);
        char *out = temp_path();
        ck_assert_int_eq(hearth_gguf_writer_write(w, out), HEARTH_OK);
        hearth_gguf_writer_free(w);
        hearth_gguf_close(src);
        size_t la, lb;
        char *a = test_read_file(in, &la);
        char *b = test_read_file(out, &lb);
        ck_assert_uint_eq(la, lb);
        ck_assert_msg(memcmp(a, b, la) == 0, "%s: copy differs", names[k]);
        free(a);
        free(b);
        unlink(out);
        free(out);
        free(in);
    }
}
END_TEST

START_TEST(test_writer_io_error)
{
    hearth_gguf_writer *w;
    ck_assert_int_eq(hearth_gguf_writer_new(&w), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_writer_write(w, "/nonexistent-dir/x.gguf"), HEARTH_E_IO);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "/nonexistent-dir/x.gguf"));
    hearth_gguf_writer_free(w);
}
END_TEST


/* ---- split models ----------------------------------------------------------- */

START_TEST(test_split_names)
{
    size_t len;
    uint32_t no, count;
    ck_assert(gguf_split_name_parse("m/model-00002-of-00003.gguf", &len, &no, &count));
    ck_assert_uint_eq(len, strlen("m/model"));
    ck_assert_uint_eq(no, 2);
    ck_assert_uint_eq(count, 3);
    ck_assert(gguf_split_name_parse("x-00001-of-00001.gguf", &len, &no, &count));
    const char *bad[] = {"-00001-of-00003.gguf", "model-00004-of-00003.gguf", "model-00000-of-00003.gguf",
                         "model-0001-of-00003.gguf", "model-00001-of-00003.GGUF", "model-00001_of-00003.gguf",
                         "model-0000a-of-00003.gguf", "model.gguf", ""};
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(bad); i++)
        ck_assert_msg(!gguf_split_name_parse(bad[i], &len, &no, &count), "'%s' parsed", bad[i]);
    char *name = gguf_split_name("dir/m", 5, 7, 12);
    ck_assert_str_eq(name, "dir/m-00007-of-00012.gguf");
    free(name);
}
END_TEST

/* A directory of its own for the parts of split models. */
static char *temp_dir(void)
{
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char *dir = malloc(strlen(tmp) + 32);
    sprintf(dir, "%s/hearth-split-XXXXXX", tmp);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    return dir;
}

static char *join(const char *dir, const char *name)
{
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(p, "%s/%s", dir, name);
    return p;
}

/* Write every entry and tensor of src as a split model of parts of at most
 * max_tensors tensors, dir/PREFIX-0000k-of-0000N.gguf; returns N. */
static uint32_t write_split_copy(const hearth_gguf *src, const char *dir, const char *prefix, size_t max_tensors)
{
    hearth_gguf_writer *w = writer_copy(src);
    char *p = join(dir, prefix);
    uint32_t n = 0;
    ck_assert_msg(gguf_writer_write_split(w, p, max_tensors, NULL, NULL, &n) == HEARTH_OK, "%s",
                  hearth_last_error());
    hearth_gguf_writer_free(w);
    free(p);
    return n;
}

static char *part_name(const char *dir, const char *prefix, uint32_t no, uint32_t count)
{
    char *p = join(dir, prefix);
    char *name = gguf_split_name(p, strlen(p), no, count);
    free(p);
    return name;
}

static void copy_file(const char *from, const char *to)
{
    size_t len;
    char *data = test_read_file(from, &len);
    FILE *f = fopen(to, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    fclose(f);
    free(data);
}

static void remove_dir(char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    free(dir);
}

/* A split copy reads as the file: the same metadata (the split keys
 * besides) and the same tensors, byte for byte, in the same order, each
 * from its part; a later part is refused naming the first; the first part
 * opened from memory is read alone. */
START_TEST(test_split_round_trip)
{
    if (!test_require_data()) return;
    char *in = model_path("micro-llama-Q4_K_M.gguf");
    hearth_gguf *src, *g;
    ck_assert_int_eq(hearth_gguf_open(in, &src), HEARTH_OK);
    char *dir = temp_dir();
    const int64_t n = hearth_gguf_n_tensors(src);
    const uint32_t count = write_split_copy(src, dir, "copy", 7);
    ck_assert_uint_eq(count, (uint32_t)((n + 6) / 7));
    ck_assert_uint_ge(count, 3);
    char *first = part_name(dir, "copy", 1, count);
    ck_assert_msg(hearth_gguf_open(first, &g) == HEARTH_OK, "%s", hearth_last_error());
    ck_assert_int_eq(hearth_gguf_n_splits(g), (int32_t)count);
    ck_assert_str_eq(hearth_gguf_split_path(g, 0), first);
    ck_assert_ptr_null(hearth_gguf_split_path(g, (int32_t)count));
    ck_assert_int_eq(hearth_gguf_n_kv(g), hearth_gguf_n_kv(src) + 3);
    uint32_t v;
    ck_assert_int_eq(hearth_gguf_get_u32(g, "split.count", &v), HEARTH_OK);
    ck_assert_uint_eq(v, count);
    const char *arch;
    ck_assert_int_eq(hearth_gguf_get_str(g, "general.architecture", &arch), HEARTH_OK);
    ck_assert_str_eq(arch, "llama");
    ck_assert_int_eq(hearth_gguf_n_tensors(g), n);
    for (int64_t i = 0; i < n; i++) {
        const hearth_gguf_tensor *a = hearth_gguf_tensor_at(src, i), *b = hearth_gguf_tensor_at(g, i);
        ck_assert_str_eq(a->name, b->name);
        ck_assert_uint_eq(b->split, (uint32_t)(i / 7));
        ck_assert_uint_eq(a->bytes, b->bytes);
        ck_assert(memcmp(a->data, b->data, a->bytes) == 0);
        ck_assert_ptr_eq(hearth_gguf_find_tensor(g, a->name), b);
    }
    uint64_t total = 0;
    for (int32_t k = 0; k < hearth_gguf_n_splits(g); k++) {
        char *name = part_name(dir, "copy", (uint32_t)k + 1, count);
        ck_assert_str_eq(hearth_gguf_split_path(g, k), name);
        total += hearth_gguf_split_size(g, k);
        free(name);
    }
    ck_assert_uint_gt(total, hearth_gguf_file_size(src));
    hearth_gguf_close(g);

    char *second = part_name(dir, "copy", 2, count);
    ck_assert_int_eq(hearth_gguf_open(second, &g), HEARTH_E_FORMAT);
    ck_assert_msg(strstr(hearth_last_error(), "is part 2 of") && strstr(hearth_last_error(), first),
                  "%s", hearth_last_error());
    /* from memory: this part alone, no other file opened */
    size_t len;
    char *image = test_read_file(first, &len);
    ck_assert_int_eq(hearth_gguf_open_memory(image, len, "part", &g), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_n_splits(g), 1);
    ck_assert_int_eq(hearth_gguf_n_tensors(g), 7);
    hearth_gguf_close(g);
    free(image);
    free(second);
    free(first);
    remove_dir(dir);
    hearth_gguf_close(src);
    free(in);
}
END_TEST

/* Opening split first part in dir fails with status and a message that
 * has both needles. */
static void expect_split_error(const char *dir, const char *prefix, uint32_t count, hearth_status status,
                               const char *needle1, const char *needle2)
{
    char *first = part_name(dir, prefix, 1, count);
    hearth_gguf *g = NULL;
    ck_assert_int_eq(hearth_gguf_open(first, &g), status);
    ck_assert_ptr_null(g);
    const char *msg = hearth_last_error();
    ck_assert_msg(strstr(msg, needle1) && strstr(msg, needle2), "'%s' lacks '%s' or '%s'", msg, needle1, needle2);
    free(first);
}

/* Parts that do not belong together are refused, naming the file and the
 * fault: a missing part, a part of a split of another count, a tensor in
 * two parts, a part of another model, a renamed first part. */
START_TEST(test_split_errors)
{
    if (!test_require_data()) return;
    char *llama_path = model_path("micro-llama-Q4_K_M.gguf"), *qwen_path = model_path("micro-qwen2-Q4_K_M.gguf");
    hearth_gguf *llama, *qwen;
    ck_assert_int_eq(hearth_gguf_open(llama_path, &llama), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_open(qwen_path, &qwen), HEARTH_OK);
    char *dir = temp_dir();
    const int64_t n = hearth_gguf_n_tensors(llama);
    const uint32_t count = write_split_copy(llama, dir, "m", (size_t)(n + 2) / 3);
    ck_assert_uint_eq(count, 3);

    /* a missing part */
    char *p2 = part_name(dir, "m", 2, 3), *p3 = part_name(dir, "m", 3, 3);
    char *kept = join(dir, "kept");
    ck_assert_int_eq(rename(p2, kept), 0);
    expect_split_error(dir, "m", 3, HEARTH_E_NOT_FOUND, "part 2 of 3", p2);
    ck_assert_int_eq(rename(kept, p2), 0);

    /* part 2 of a split into 4 in its place */
    ck_assert_uint_eq(write_split_copy(llama, dir, "four", (size_t)(n + 3) / 4), 4);
    char *four2 = part_name(dir, "four", 2, 4);
    copy_file(p2, kept);
    copy_file(four2, p2);
    expect_split_error(dir, "m", 3, HEARTH_E_FORMAT, p2, "split.count is 4");

    /* a part of a split into 3 at another place: a tensor in two parts */
    ck_assert_uint_eq(write_split_copy(llama, dir, "other", (size_t)(n + 1) / 3 + 1), 3);
    char *other2 = part_name(dir, "other", 2, 3);
    copy_file(other2, p2);
    expect_split_error(dir, "m", 3, HEARTH_E_FORMAT, "is in two parts", p2);

    /* part 2 of another model split in 3 */
    ck_assert_uint_eq(write_split_copy(qwen, dir, "qwen", (size_t)(hearth_gguf_n_tensors(qwen) + 2) / 3), 3);
    char *qwen2 = part_name(dir, "qwen", 2, 3);
    copy_file(qwen2, p2);
    expect_split_error(dir, "m", 3, HEARTH_E_FORMAT, "split.tensors.count", "different models");
    copy_file(kept, p2);

    /* a part 3 from the wrong place: split.no says so */
    copy_file(p2, p3);
    expect_split_error(dir, "m", 3, HEARTH_E_FORMAT, p3, "split.no says it is part 2");

    /* the first part renamed: its parts cannot be found */
    char *first = part_name(dir, "m", 1, 3), *renamed = join(dir, "renamed.gguf");
    copy_file(first, renamed);
    hearth_gguf *g;
    ck_assert_int_eq(hearth_gguf_open(renamed, &g), HEARTH_E_FORMAT);
    ck_assert_msg(strstr(hearth_last_error(), "-00001-of-00003.gguf"), "%s", hearth_last_error());

    free(first);
    free(renamed);
    free(qwen2);
    free(other2);
    free(four2);
    free(kept);
    free(p3);
    free(p2);
    remove_dir(dir);
    hearth_gguf_close(qwen);
    hearth_gguf_close(llama);
    free(qwen_path);
    free(llama_path);
}
END_TEST

static Suite *gguf_suite(void)
{
    Suite *s = suite_create("gguf");
    TCase *tc = tcase_create("reader");
    tcase_add_test(tc, test_shared_models);
    tcase_add_test(tc, test_typed_accessors);
    tcase_add_test(tc, test_crafted_valid);
    tcase_add_test(tc, test_crafted_errors);
    tcase_add_test(tc, test_crafted_tensor_errors);
    tcase_add_test(tc, test_truncation);
    tcase_add_test(tc, test_bit_flips);
    tcase_add_test(tc, test_open_errors);
    suite_add_tcase(s, tc);
    tc = tcase_create("writer");
    tcase_add_test(tc, test_writer_round_trip);
    tcase_add_test(tc, test_writer_copy_nested);
    tcase_add_test(tc, test_writer_reproduces_shared_files);
    tcase_add_test(tc, test_writer_io_error);
    suite_add_tcase(s, tc);
    tc = tcase_create("split");
    tcase_add_test(tc, test_split_names);
    tcase_add_test(tc, test_split_round_trip);
    tcase_add_test(tc, test_split_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return test_run_suite(gguf_suite());
}

/*
 * test-engine.c -- the forward pass: prefill in one batch, in batches of 7
 * and one token at a time give the same logits and the same greedy
 * continuation; the KV-cache types agree; context limits, rewinding and
 * bad input are errors, not crashes; unsupported models are named; the
 * packed weights take the place of their mapped pages, and a pool that
 * does not fit beside the weights is refused.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels.h"
#include "model.h"
#include "testutil.h"

#define PROMPT_LEN 40

static hearth_context *new_context(const hearth_model *m, int32_t n_ctx, int32_t n_batch,
                                   hearth_type cache)
{
    hearth_context_params p;
    hearth_context_default_params(&p);
    p.n_ctx = n_ctx;
    p.n_batch = n_batch;
    p.n_threads = 2;
    p.cache_type = cache;
    hearth_context *c;
    hearth_status st = hearth_context_new(m, &p, &c);
    ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
    return c;
}

/* A deterministic prompt of valid token ids, BOS first. */
static void make_prompt(const hearth_model *m, int32_t *tokens, int n)
{
    test_rng rng;
    test_rng_seed(&rng, 7);
    tokens[0] = 1;
    for (int i = 1; i < n; i++) tokens[i] = (int32_t)(3 + test_rng_next(&rng) % (uint64_t)(hearth_model_n_vocab(m) - 3));
}

static int32_t argmax(const float *x, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Prefill the prompt with the given batch size (feeding it in pieces of
 * `piece` tokens per hearth_eval call), keep the last logits, then
 * generate n_gen tokens greedily. */
static void run(const hearth_model *m, int32_t n_batch, int32_t piece, hearth_type cache,
                float *logits_out, int32_t *gen, int n_gen)
{
    int32_t prompt[PROMPT_LEN];
    make_prompt(m, prompt, PROMPT_LEN);
    hearth_context *c = new_context(m, 128, n_batch, cache);
    for (int32_t done = 0; done < PROMPT_LEN; done += piece) {
        int32_t n = HEARTH_MIN(piece, PROMPT_LEN - done);
        hearth_status st = hearth_eval(c, prompt + done, n, done + n == PROMPT_LEN ? 1 : 0);
        ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
    }
    ck_assert_int_eq(hearth_context_n_past(c), PROMPT_LEN);
    const int32_t V = hearth_model_n_vocab(m);
    memcpy(logits_out, hearth_context_logits(c, 0), (size_t)V * sizeof(float));
    for (int i = 0; i < n_gen; i++) {
        gen[i] = argmax(hearth_context_logits(c, 0), V);
        ck_assert_int_eq(hearth_eval(c, &gen[i], 1, 1), HEARTH_OK);
    }
    hearth_context_free(c);
}

static double rel_error(const float *a, const float *b, int32_t n)
{
    double num = 0, den = 0;
    for (int32_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

static void check_equivalence(const char *name)
{
    hearth_model *m = test_load_model(name);
    const int32_t V = hearth_model_n_vocab(m);
    float *one = malloc((size_t)V * sizeof(float));
    float *seven = malloc((size_t)V * sizeof(float));
    float *single = malloc((size_t)V * sizeof(float));
    int32_t gen_one[16], gen_seven[16], gen_single[16];
    run(m, 64, PROMPT_LEN, HEARTH_TYPE_F32, one, gen_one, 16);      /* one batch */
    run(m, 7, PROMPT_LEN, HEARTH_TYPE_F32, seven, gen_seven, 16);   /* batches of 7 */
    run(m, 64, 1, HEARTH_TYPE_F32, single, gen_single, 16);         /* token by token */
    double e7 = rel_error(seven, one, V), e1 = rel_error(single, one, V);
    ck_assert_msg(e7 < 1e-4, "%s: batches of 7 differ from one batch by %g", name, e7);
    ck_assert_msg(e1 < 1e-4, "%s: one token at a time differs from one batch by %g", name, e1);
    ck_assert_msg(memcmp(gen_one, gen_seven, sizeof gen_one) == 0, "%s: generation differs (7)", name);
    ck_assert_msg(memcmp(gen_one, gen_single, sizeof gen_one) == 0, "%s: generation differs (1)", name);
    free(one);
    free(seven);
    free(single);
    hearth_model_free(m);
}

START_TEST(test_prefill_equivalence)
{
    if (!test_require_data()) return;
    check_equivalence("stories260K.gguf");
    check_equivalence("micro-llama-f32.gguf");
    check_equivalence("micro-qwen2-f32.gguf");
}
END_TEST

/* F16 and Q8_0 caches approximate the F32 cache closely (Q8_0 needs head
 * dimensions of whole blocks: micro-llama's are 32). */
START_TEST(test_cache_types)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("micro-llama-f32.gguf");
    const int32_t V = hearth_model_n_vocab(m);
    float *ref = malloc((size_t)V * sizeof(float)), *x = malloc((size_t)V * sizeof(float));
    int32_t g_ref[8], g[8];
    run(m, 16, PROMPT_LEN, HEARTH_TYPE_F32, ref, g_ref, 8);
    run(m, 16, PROMPT_LEN, HEARTH_TYPE_F16, x, g, 8);
    ck_assert_double_lt(rel_error(x, ref, V), 1e-3);
    run(m, 16, PROMPT_LEN, HEARTH_TYPE_Q8_0, x, g, 8);
    ck_assert_double_lt(rel_error(x, ref, V), 2e-2);
    hearth_context *c;
    hearth_model *small = test_load_model("stories260K.gguf");
    hearth_context_params p;
    hearth_context_default_params(&p);
    p.cache_type = HEARTH_TYPE_Q8_0;
    ck_assert_int_eq(hearth_context_new(small, &p, &c), HEARTH_E_INVALID);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "multiple of 32"));
    hearth_model_free(small);
    free(ref);
    free(x);
    hearth_model_free(m);
}
END_TEST

START_TEST(test_context_limits)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("stories260K.gguf");
    hearth_context *c = new_context(m, 16, 8, HEARTH_TYPE_F16);
    ck_assert_int_eq(hearth_context_n_ctx(c), 16);
    /* keys and values x 16 positions x 5 layers x 4 KV heads x 8 dims x 2 bytes */
    ck_assert_uint_eq(hearth_context_kv_bytes(c), 2 * 16 * (size_t)5 * 4 * 8 * 2);
    int32_t t[20];
    for (int i = 0; i < 20; i++) t[i] = 1 + i;
    /* too long: nothing is evaluated */
    ck_assert_int_eq(hearth_eval(c, t, 17, 1), HEARTH_E_RANGE);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "do not fit"));
    ck_assert_int_eq(hearth_context_n_past(c), 0);
    ck_assert_int_eq(hearth_eval(c, t, 16, 1), HEARTH_OK);
    ck_assert_int_eq(hearth_eval(c, t, 1, 1), HEARTH_E_RANGE);
    /* rewinding frees positions; re-evaluating gives the same logits */
    const int32_t V = hearth_model_n_vocab(m);
    float *a = malloc((size_t)V * sizeof(float));
    memcpy(a, hearth_context_logits(c, 0), (size_t)V * sizeof(float));
    ck_assert_int_eq(hearth_context_rewind(c, 10), HEARTH_OK);
    ck_assert_int_eq(hearth_context_n_past(c), 10);
    ck_assert_ptr_null(hearth_context_logits(c, 0));
    ck_assert_int_eq(hearth_eval(c, t + 10, 6, 1), HEARTH_OK);
    ck_assert_double_lt(rel_error(hearth_context_logits(c, 0), a, V), 1e-6);
    ck_assert_int_eq(hearth_context_rewind(c, 17), HEARTH_E_INVALID);
    ck_assert_int_eq(hearth_context_rewind(c, -1), HEARTH_E_INVALID);
    /* bad arguments */
    ck_assert_int_eq(hearth_context_rewind(c, 0), HEARTH_OK);
    int32_t bad[2] = {1, 512};
    ck_assert_int_eq(hearth_eval(c, bad, 2, 1), HEARTH_E_INVALID);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "token id 512"));
    bad[1] = -3;
    ck_assert_int_eq(hearth_eval(c, bad, 2, 1), HEARTH_E_INVALID);
    ck_assert_int_eq(hearth_eval(c, t, 0, 0), HEARTH_E_INVALID);
    ck_assert_int_eq(hearth_eval(c, t, 2, 3), HEARTH_E_INVALID);
    ck_assert_int_eq(hearth_context_n_past(c), 0);
    /* all logits of a batch */
    ck_assert_int_eq(hearth_eval(c, t, 5, 5), HEARTH_OK);
    ck_assert_ptr_nonnull(hearth_context_logits(c, 4));
    ck_assert_ptr_null(hearth_context_logits(c, 5));
    free(a);
    hearth_context_free(c);

    hearth_context_params p;
    hearth_context_default_params(&p);
    p.n_ctx = -1;
    ck_assert_int_eq(hearth_context_new(m, &p, &c), HEARTH_E_INVALID);
    hearth_context_default_params(&p);
    p.cache_type = HEARTH_TYPE_Q4_0;
    ck_assert_int_eq(hearth_context_new(m, &p, &c), HEARTH_E_INVALID);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "not supported"));
    hearth_model_free(m);
}
END_TEST

static bool stop_now(void *data)
{
    int *calls = data;
    return ++*calls > 3;
}

START_TEST(test_abort)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("stories260K.gguf");
    hearth_context *c = new_context(m, 64, 8, HEARTH_TYPE_F16);
    int calls = 0;
    hearth_context_set_abort(c, stop_now, &calls);
    int32_t t[32];
    for (int i = 0; i < 32; i++) t[i] = 1 + i;
    ck_assert_int_eq(hearth_eval(c, t, 32, 1), HEARTH_E_INTERRUPTED);
    ck_assert_int_lt(hearth_context_n_past(c), 32);
    hearth_context_free(c);
    hearth_model_free(m);
}
END_TEST

/* Write a copy of a model with one metadata entry changed or one tensor
 * left out, and check that loading names the problem. */
static char *doctored_copy(const char *name, const char *drop_tensor, const char *arch)
{
    char rel[256];
    snprintf(rel, sizeof rel, "models/%s", name);
    hearth_gguf *src;
    ck_assert_int_eq(hearth_gguf_open(test_data_path(rel), &src), HEARTH_OK);
    hearth_gguf_writer *w;
    ck_assert_int_eq(hearth_gguf_writer_new(&w), HEARTH_OK);
    for (int64_t i = 0; i < hearth_gguf_n_kv(src); i++) {
        if (arch && strcmp(hearth_gguf_kv_key(src, i), "general.architecture") == 0)
            ck_assert_int_eq(hearth_gguf_writer_set_str(w, "general.architecture", arch), HEARTH_OK);
        else
            ck_assert_int_eq(hearth_gguf_writer_copy_kv(w, src, i), HEARTH_OK);
    }
    for (int64_t i = 0; i < hearth_gguf_n_tensors(src); i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(src, i);
        if (drop_tensor && strcmp(t->name, drop_tensor) == 0) continue;
        ck_assert_int_eq(hearth_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data,
                                                       t->bytes), HEARTH_OK);
    }
    char tmpl[] = "/tmp/hearth-model-XXXXXX";
    int fd = mkstemp(tmpl);
    close(fd);
    ck_assert_int_eq(hearth_gguf_writer_write(w, tmpl), HEARTH_OK);
    hearth_gguf_writer_free(w);
    hearth_gguf_close(src);
    return strdup(tmpl);
}

START_TEST(test_load_errors)
{
    if (!test_require_data()) return;
    hearth_model *m;
    char *p = doctored_copy("micro-llama-f32.gguf", NULL, "gptj");
    ck_assert_int_eq(hearth_model_load(p, NULL, &m), HEARTH_E_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "architecture 'gptj' is not supported"));
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "llama, qwen2"));
    unlink(p);
    free(p);
    p = doctored_copy("micro-llama-f32.gguf", "blk.1.ffn_up.weight", NULL);
    ck_assert_int_eq(hearth_model_load(p, NULL, &m), HEARTH_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "tensor 'blk.1.ffn_up.weight' is missing"));
    unlink(p);
    free(p);
    /* qwen2 requires its q/k/v biases */
    p = doctored_copy("micro-qwen2-f32.gguf", "blk.0.attn_k.bias", NULL);
    ck_assert_int_eq(hearth_model_load(p, NULL, &m), HEARTH_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "blk.0.attn_k.bias"));
    unlink(p);
    free(p);
    /* a vocabulary-only file is not a model */
    const char *vocab = test_data_path("vocab/ggml-vocab-llama-spm.gguf");
    ck_assert_ptr_nonnull(vocab);
    ck_assert_int_ne(hearth_model_load(vocab, NULL, &m), HEARTH_OK);
    ck_assert_int_eq(hearth_model_load("/nonexistent.gguf", NULL, &m), HEARTH_E_NOT_FOUND);
}
END_TEST

START_TEST(test_model_info)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("micro-qwen2-f32.gguf");
    ck_assert_str_eq(hearth_model_arch(m), "qwen2");
    ck_assert_int_eq(hearth_model_n_layer(m), 2);
    ck_assert_int_eq(hearth_model_n_embd(m), 256);
    ck_assert_int_eq(hearth_model_n_vocab(m), 512);
    ck_assert_ptr_nonnull(strstr(hearth_model_desc(m), "qwen2"));
    ck_assert_ptr_nonnull(strstr(hearth_model_desc(m), "F32"));
    hearth_model_free(m);
}
END_TEST

/* Resident bytes of this process's mappings of the file at path (the Rss
 * of /proc/self/smaps); -1 where there is no such file. */
static long long mapped_rss(const char *path)
{
    char real[4096];
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f || !realpath(path, real)) {
        if (f) fclose(f);
        return -1;
    }
    char line[8192];
    long long kib = 0, v;
    bool ours = false;
    while (fgets(line, sizeof line, f)) {
        char *slash = strchr(line, '/');
        if (strchr("0123456789abcdef", line[0]) && strchr(line, '-') && strstr(line, " ")) {
            line[strcspn(line, "\n")] = '\0';
            ours = slash && strcmp(slash, real) == 0;
        } else if (ours && sscanf(line, "Rss: %lld kB", &v) == 1) {
            kib += v;
        }
    }
    fclose(f);
    return kib * 1024;
}

/* The packed weights take the place of their mapped pages: after loading,
 * only the file's header is resident in the mapping (the kernel maps the
 * pages around a read ahead of it), and the resident weights are the
 * file's tensor data.  The embedding micro-qwen2 ties to its output layer
 * is read from the packed copy, whose rows are the file's, and decoding
 * runs.  Float matrices are packed on every kernel path. */
START_TEST(test_packed_in_place)
{
    if (!test_require_data()) return;
    const char *names[] = {"micro-llama-Q4_K_M.gguf", "micro-qwen2-Q4_0.gguf", "micro-llama-F16.gguf",
                           "micro-qwen2-BF16.gguf"};
    for (size_t k = 0; k < HEARTH_ARRAY_LEN(names); k++) {
        char rel[256];
        snprintf(rel, sizeof rel, "models/%s", names[k]);
        const char *path = test_data_path(rel);
        hearth_model *m = test_load_model(names[k]);
        const long long after_load = mapped_rss(path);
        const hearth_gguf *g = hearth_model_gguf(m);
        const long long header = (long long)hearth_gguf_data_offset(g);
        ck_assert_uint_eq(hearth_model_resident_bytes(m), hearth_model_size_bytes(m));
        ck_assert_msg(after_load < 0 || after_load <= header + (128 << 10),
                      "%s: %lld bytes of the mapping resident after loading (header %lld)", names[k], after_load,
                      header);
        /* the embedding reads the packed copy exactly where it is the
         * output layer and that was packed (a kernel path without a packed
         * kernel for its type, such as Q4_0 without the dot-product
         * instructions, leaves both in the mapping) */
        const struct weight *e = &m->tok_embd;
        if (e->type == HEARTH_TYPE_F16 || e->type == HEARTH_TYPE_BF16)
            ck_assert_msg(m->layers[0].wq.packed && m->layers[0].w_down.packed && m->output.packed,
                          "%s: float matrices left unpacked", names[k]);
        const bool tied = hearth_gguf_find_tensor(g, "output.weight") == NULL;
        const bool shares = tied && m->output.packed != NULL;
        ck_assert_msg(shares == (e->packed != NULL), "%s: the embedding is %spacked (output layer %spacked)",
                      names[k], e->packed ? "" : "not ", m->output.packed ? "" : "not ");
        if (shares) {
            uint8_t *row = malloc(e->row_bytes);
            for (int64_t r = 0; r < e->n_out; r += 37) {
                hearth_unpack_row(e->type, e->packed, e->n_out, r, e->n_in, row);
                ck_assert(memcmp(row, (const uint8_t *)e->data + (size_t)r * e->row_bytes, e->row_bytes) == 0);
            }
            free(row);
        }
        float *logits = malloc((size_t)hearth_model_n_vocab(m) * sizeof(float));
        int32_t gen[8];
        run(m, 16, PROMPT_LEN, HEARTH_TYPE_F16, logits, gen, 8);
        free(logits);
        hearth_model_free(m);
    }
}
END_TEST

/* A pool that does not fit beside the weights in HEARTH_MEMORY_LIMIT is
 * refused before anything is put in it, naming both sizes; one that fits
 * is made, and the engine reports what it was checked against. */
START_TEST(test_memory_limit)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("micro-llama-Q4_K_M.gguf");
    hearth_engine_params p;
    hearth_engine_default_params(&p);
    p.n_ctx = 4096;
    p.n_seq_max = 4;
    p.kv_tokens = 16384;
    hearth_engine *e = NULL;
    setenv("HEARTH_MEMORY_LIMIT", "4M", 1);
    ck_assert_int_eq(hearth_engine_new(m, &p, &e), HEARTH_E_NOMEM);
    ck_assert_ptr_null(e);
    const char *msg = hearth_last_error();
    ck_assert_msg(strstr(msg, "the weights need") && strstr(msg, "the KV pool") && strstr(msg, "4.0 MiB is available") &&
                  strstr(msg, "HEARTH_MEMORY_LIMIT"), "%s", msg);
    hearth_context_params cp;
    hearth_context_default_params(&cp);
    cp.n_ctx = 65536;
    hearth_context *c = NULL;
    ck_assert_int_eq(hearth_context_new(m, &cp, &c), HEARTH_E_NOMEM);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "the KV cache"));
    setenv("HEARTH_MEMORY_LIMIT", "64M", 1);
    ck_assert_msg(hearth_engine_new(m, &p, &e) == HEARTH_OK, "%s", hearth_last_error());
    hearth_engine_stats es;
    hearth_engine_get_stats(e, &es);
    ck_assert_uint_eq(es.memory_available, 64u << 20);
    ck_assert_uint_eq(es.weights_bytes, hearth_model_resident_bytes(m));
    ck_assert_uint_le(es.weights_bytes + es.kv_bytes, 64u << 20);
    hearth_engine_free(e);
    setenv("HEARTH_MEMORY_LIMIT", "lots", 1);
    ck_assert_int_eq(hearth_engine_new(m, &p, &e), HEARTH_E_INVALID);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "HEARTH_MEMORY_LIMIT='lots'"));
    unsetenv("HEARTH_MEMORY_LIMIT");
    hearth_model_free(m);
}
END_TEST

static Suite *engine_suite(void)
{
    Suite *s = suite_create("engine");
    TCase *tc = tcase_create("forward");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_prefill_equivalence);
    tcase_add_test(tc, test_cache_types);
    tcase_add_test(tc, test_context_limits);
    tcase_add_test(tc, test_abort);
    tcase_add_test(tc, test_load_errors);
    tcase_add_test(tc, test_model_info);
    tcase_add_test(tc, test_packed_in_place);
    tcase_add_test(tc, test_memory_limit);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return test_run_suite(engine_suite());
}

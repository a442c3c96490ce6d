/*
 * test-offload.c -- models with layers offloaded to an OpenCL device
 * give the CPU's results: perplexity on the shared micro models agrees
 * within 0.5% with 0, 1, all layers and all layers plus the output layer
 * offloaded; greedy generation with stories260K gives the same 100
 * tokens; prefill and decode agree on the device; rewinding works; the
 * offload report is right; errors (bad device, no platform, a cache type
 * the device refuses) fail clearly or fall back with the reason kept; the
 * serving engine on a fully offloaded model gives each of several
 * requests run together, and each of two parallel samples, what it gives
 * alone.
 *
 * Perplexity follows the method of the shared reference table (chunks of
 * 128 tokens from an empty cache, BOS first, positions 64..126 scored),
 * over a fixed pseudo-random token sequence for every model and over the
 * first chunks of GPL-3.txt, tokenized with the model's own vocabulary,
 * for some; where the CPU backend has no product for a quantized type,
 * the reference is the CPU on a copy of the model with every tensor
 * dequantized to F32.  Skipped (77) without an OpenCL device, see
 * test_opencl_status().
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "kernels.h"
#include "quant.h"
#include "engine_drain.h"
#include "testutil.h"

#define CHUNK 128
#define FIRST_SCORED 64
#define N_CHUNKS 2

static hearth_model *load(const char *path, int32_t ngl, int32_t device, bool fallback,
                          hearth_status want)
{
    hearth_model_params mp;
    hearth_model_default_params(&mp);
    mp.n_gpu_layers = ngl;
    mp.device = device;
    mp.gpu_fallback = fallback;
    hearth_model *m = NULL;
    hearth_status st = hearth_model_load(path, &mp, &m);
    ck_assert_msg(st == want, "%s with %d GPU layers: status %d (%s)", path, ngl, st,
                  hearth_last_error());
    return m;
}

static const char *model_path(const char *name)
{
    char rel[256];
    snprintf(rel, sizeof rel, "models/%s", name);
    const char *p = test_data_path(rel);
    ck_assert_msg(p != NULL, "missing %s", rel);
    return p;
}

static hearth_context *new_context(const hearth_model *m, int32_t n_ctx, hearth_type cache)
{
    hearth_context_params p;
    hearth_context_default_params(&p);
    p.n_ctx = n_ctx;
    p.n_batch = CHUNK;
    p.n_threads = 2;
    p.cache_type = cache;
    hearth_context *c;
    hearth_status st = hearth_context_new(m, &p, &c);
    ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
    return c;
}

/* The fixed token sequence: pseudo-random ids of the vocabulary. */
static void make_tokens(int32_t n_vocab, int32_t *tokens, int n)
{
    test_rng rng;
    test_rng_seed(&rng, 2024);
    for (int i = 0; i < n; i++) tokens[i] = (int32_t)(3 + test_rng_next(&rng) % (uint64_t)(n_vocab - 3));
}

static double log_softmax_at(const float *logits, int32_t n, int32_t at)
{
    double max = logits[0];
    for (int32_t i = 1; i < n; i++)
        if (logits[i] > max) max = logits[i];
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += exp(logits[i] - max);
    return logits[at] - max - log(sum);
}

/* Perplexity over n_chunks chunks of CHUNK tokens (modified: each chunk
 * starts with BOS). */
static double perplexity_of(const hearth_model *m, int32_t *tokens, int n_chunks, int32_t bos)
{
    const int32_t V = hearth_model_n_vocab(m);
    hearth_context *c = new_context(m, CHUNK, HEARTH_TYPE_F16);
    double nll = 0;
    int scored = 0;
    for (int ch = 0; ch < n_chunks; ch++) {
        int32_t *chunk = tokens + ch * CHUNK;
        chunk[0] = bos;
        ck_assert_int_eq(hearth_context_rewind(c, 0), HEARTH_OK);
        hearth_status st = hearth_eval(c, chunk, CHUNK, CHUNK);
        ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
        for (int i = FIRST_SCORED; i < CHUNK - 1; i++) {
            nll -= log_softmax_at(hearth_context_logits(c, i), V, chunk[i + 1]);
            scored++;
        }
    }
    hearth_context_free(c);
    return exp(nll / scored);
}

/* The fixed pseudo-random sequence, or (text) the first n_chunks chunks
 * of GPL-3.txt. */
static double perplexity(const hearth_model *m, bool text, int n_chunks)
{
    int32_t tokens[8 * CHUNK];
    ck_assert_int_le(n_chunks, 8);
    int32_t bos = 1;
    if (!text) {
        make_tokens(hearth_model_n_vocab(m), tokens, n_chunks * CHUNK);
    } else {
        const hearth_vocab *v = hearth_model_vocab(m);
        ck_assert_ptr_nonnull(v);
        size_t len, n;
        char *gpl = test_read_file(test_data_path("text/GPL-3.txt"), &len);
        hearth_token *all = malloc((len + 8) * sizeof *all);
        ck_assert_int_eq(hearth_tokenize(v, gpl, len, HEARTH_TOKENIZE_ADD_SPECIAL, all, len + 8, &n),
                         HEARTH_OK);
        ck_assert_uint_ge(n, (size_t)(n_chunks * CHUNK));
        memcpy(tokens, all, (size_t)(n_chunks * CHUNK) * sizeof *tokens);
        if (hearth_vocab_special(v, HEARTH_SPECIAL_BOS) != HEARTH_TOKEN_NONE)
            bos = hearth_vocab_special(v, HEARTH_SPECIAL_BOS);
        free(all);
        free(gpl);
    }
    return perplexity_of(m, tokens, n_chunks, bos);
}

/* Whether the CPU backend has a matrix product for every tensor type. */
static bool cpu_runs(const hearth_model *m)
{
    const hearth_kernels *k;
    ck_assert_int_eq(hearth_kernels_select(&k), HEARTH_OK);
    const hearth_gguf *g = hearth_model_gguf(m);
    for (int64_t i = 0; i < hearth_gguf_n_tensors(g); i++)
        if (!hearth_kernels_supports(k, hearth_gguf_tensor_at(g, i)->type))
            return false;
    return true;
}

/* A copy of the model file with every tensor dequantized to F32. */
static char *dequantized_copy(const char *path)
{
    hearth_gguf *src;
    ck_assert_int_eq(hearth_gguf_open(path, &src), HEARTH_OK);
    hearth_gguf_writer *w;
    ck_assert_int_eq(hearth_gguf_writer_new(&w), HEARTH_OK);
    for (int64_t i = 0; i < hearth_gguf_n_kv(src); i++)
        ck_assert_int_eq(hearth_gguf_writer_copy_kv(w, src, i), HEARTH_OK);
    const int64_t n = hearth_gguf_n_tensors(src);
    float **bufs = calloc((size_t)n, sizeof *bufs);
    for (int64_t i = 0; i < n; i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(src, i);
        const int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
        bufs[i] = malloc((size_t)(rows * t->ne[0]) * sizeof(float));
        const size_t row_bytes = hearth_type_row_bytes(t->type, t->ne[0]);
        for (int64_t r = 0; r < rows; r++)
            ck_assert(quant_dequantize_row(t->type, (const uint8_t *)t->data + (size_t)r * row_bytes,
                                           bufs[i] + r * t->ne[0], t->ne[0]));
        ck_assert_int_eq(hearth_gguf_writer_add_tensor(w, t->name, HEARTH_TYPE_F32, t->n_dims, t->ne,
                                                       bufs[i], (size_t)(rows * t->ne[0]) * sizeof(float)),
                         HEARTH_OK);
    }
    char tmpl[] = "/tmp/hearth-f32-XXXXXX";
    int fd = mkstemp(tmpl);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(hearth_gguf_writer_write(w, tmpl), HEARTH_OK);
    hearth_gguf_writer_free(w);
    for (int64_t i = 0; i < n; i++) free(bufs[i]);
    free(bufs);
    hearth_gguf_close(src);
    return strdup(tmpl);
}

static void check_perplexity(const char *name, bool text)
{
    const int n_chunks = text ? 8 : N_CHUNKS;
    const char *p = model_path(name);
    char path[4096];
    snprintf(path, sizeof path, "%s", p);
    /* -ngl 0: the reference, with nothing on the device */
    hearth_model *cpu = load(path, 0, 0, false, HEARTH_OK);
    ck_assert_int_eq(hearth_model_n_gpu_layers(cpu), 0);
    ck_assert_int_eq(hearth_model_device(cpu), -1);
    ck_assert_uint_eq(hearth_model_gpu_bytes(cpu), 0);
    const int32_t n_layer = hearth_model_n_layer(cpu);
    const bool cpu_ok = cpu_runs(cpu);
    double ref;
    if (cpu_ok) {
        ref = perplexity(cpu, text, n_chunks);
    } else {
        char *copy = dequantized_copy(path);
        hearth_model *f32 = load(copy, 0, 0, false, HEARTH_OK);
        ref = perplexity(f32, text, n_chunks);
        hearth_model_free(f32);
        unlink(copy);
        free(copy);
    }
    hearth_model_free(cpu);
    ck_assert(isfinite(ref) && ref > 1.0);
    /* every layer plus the output layer; with the CPU's own products also
     * one layer and every layer without the output layer */
    const int32_t configs[3] = {n_layer + 1, 1, n_layer};
    for (int i = 0; i < (cpu_ok ? 3 : 1); i++) {
        hearth_model *m = load(path, configs[i], 0, false, HEARTH_OK);
        ck_assert_int_eq(hearth_model_n_gpu_layers(m), HEARTH_MIN(configs[i], n_layer));
        ck_assert(hearth_model_output_on_gpu(m) == (configs[i] > n_layer));
        const double ppl = perplexity(m, text, n_chunks);
        ck_assert_msg(fabs(ppl / ref - 1.0) < 0.005, "%s with %d GPU layers: perplexity %.6g, "
                      "CPU %.6g (%+.3f%%)", name, configs[i], ppl, ref, 100.0 * (ppl / ref - 1.0));
        fprintf(stderr, "note: %s%s, %d GPU layers: perplexity %.6g, CPU%s %.6g (%+.4f%%)\n", name,
                text ? " on GPL-3" : "", configs[i], ppl, cpu_ok ? "" : " (F32 copy)", ref,
                100.0 * (ppl / ref - 1.0));
        hearth_model_free(m);
    }
}

static const char *const micro_types[] = {
    "f32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
    "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K",
};

START_TEST(test_perplexity_llama)
{
    if (!test_require_data()) return;
    char name[64];
    snprintf(name, sizeof name, "micro-llama-%s.gguf", micro_types[_i]);
    check_perplexity(name, false);
}
END_TEST

/* micro-qwen2 differs from micro-llama in its architecture (biases), not in
 * the host code of each type, which the llama loop runs under the
 * sanitizers too: there it runs three types, here every one. */
static const char *const qwen2_types_sanitized[] = {"F16", "Q8_0", "Q4_K_M"};
#define QWEN2_TYPES (TEST_UNDER_SANITIZERS ? qwen2_types_sanitized : micro_types)
#define N_QWEN2_TYPES \
    (TEST_UNDER_SANITIZERS ? HEARTH_ARRAY_LEN(qwen2_types_sanitized) : HEARTH_ARRAY_LEN(micro_types))

START_TEST(test_perplexity_qwen2)
{
    if (!test_require_data()) return;
    char name[64];
    snprintf(name, sizeof name, "micro-qwen2-%s.gguf", QWEN2_TYPES[_i]);
    check_perplexity(name, false);
}
END_TEST

START_TEST(test_perplexity_stories)
{
    if (!test_require_data()) return;
    check_perplexity("stories260K.gguf", false);
}
END_TEST

/* The first 8 chunks of GPL-3.txt, tokenized by each model's vocabulary;
 * under the sanitizers the first two (a real vocabulary and a micro one:
 * the other three only change the type of the same host code). */
static const char *const text_models[] = {
    "stories260K.gguf", "micro-llama-F16.gguf", "micro-llama-Q4_K_M.gguf",
    "micro-qwen2-Q6_K.gguf", "micro-qwen2-Q8_0.gguf",
};
#define N_TEXT_MODELS (TEST_UNDER_SANITIZERS ? 2 : HEARTH_ARRAY_LEN(text_models))

START_TEST(test_perplexity_text)
{
    if (!test_require_data()) return;
    check_perplexity(text_models[_i], true);
}
END_TEST

/* ---- generation ---------------------------------------------------------------------- */

static int32_t argmax(const float *x, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static void greedy(const hearth_model *m, int32_t *out, int n)
{
    static const int32_t prompt[] = {1, 403, 407, 261, 378}; /* "<s> Once upon a time" */
    hearth_context *c = new_context(m, 256, HEARTH_TYPE_F16);
    ck_assert_int_eq(hearth_eval(c, prompt, 5, 1), HEARTH_OK);
    for (int i = 0; i < n; i++) {
        out[i] = argmax(hearth_context_logits(c, 0), hearth_model_n_vocab(m));
        ck_assert_int_eq(hearth_eval(c, &out[i], 1, 1), HEARTH_OK);
    }
    hearth_context_free(c);
}

START_TEST(test_greedy_stories)
{
    if (!test_require_data()) return;
    const char *path = model_path("stories260K.gguf");
    int32_t ref[100], got[100];
    hearth_model *m = load(path, 0, 0, false, HEARTH_OK);
    greedy(m, ref, 100);
    hearth_model_free(m);
    static const int32_t configs[] = {6, 5, 2};
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(configs); i++) {
        m = load(path, configs[i], 0, false, HEARTH_OK);
        greedy(m, got, 100);
        for (int j = 0; j < 100; j++)
            ck_assert_msg(got[j] == ref[j], "%d GPU layers: token %d is %d, on the CPU %d",
                          configs[i], j, got[j], ref[j]);
        hearth_model_free(m);
    }
}
END_TEST

/* Prefill in one batch (the GEMM path) and token by token (GEMV) on the
 * device give the same logits; rewinding and re-evaluating too. */
START_TEST(test_prefill_decode_rewind)
{
    if (!test_require_data()) return;
    hearth_model *m = load(model_path("micro-qwen2-Q4_K_M.gguf"), 3, 0, false, HEARTH_OK);
    const int32_t V = hearth_model_n_vocab(m);
    int32_t t[40];
    make_tokens(V, t, 40);
    hearth_context *a = new_context(m, 64, HEARTH_TYPE_F16);
    hearth_context *b = new_context(m, 64, HEARTH_TYPE_F16);
    ck_assert_int_eq(hearth_eval(a, t, 40, 1), HEARTH_OK);
    for (int i = 0; i < 40; i++) ck_assert_int_eq(hearth_eval(b, &t[i], 1, 1), HEARTH_OK);
    const float *la = hearth_context_logits(a, 0), *lb = hearth_context_logits(b, 0);
    double num = 0, den = 0;
    for (int32_t i = 0; i < V; i++) {
        num += ((double)la[i] - lb[i]) * ((double)la[i] - lb[i]);
        den += (double)la[i] * la[i];
    }
    ck_assert_msg(sqrt(num / den) < 1e-4, "prefill and decode differ by %g", sqrt(num / den));
    float *keep = malloc((size_t)V * sizeof *keep);
    memcpy(keep, la, (size_t)V * sizeof *keep);
    ck_assert_int_eq(hearth_context_rewind(a, 30), HEARTH_OK);
    ck_assert_int_eq(hearth_eval(a, t + 30, 10, 1), HEARTH_OK);
    la = hearth_context_logits(a, 0);
    for (int32_t i = 0; i < V; i++) ck_assert_float_eq_tol(la[i], keep[i], 1e-4 * (1 + fabsf(keep[i])));
    free(keep);
    hearth_context_free(a);
    hearth_context_free(b);
    hearth_model_free(m);
}
END_TEST

/* A prompt of quantized weights on the device: with the exact kernels
 * (the default, also when named) within 1e-5 of the CPU's logits
 * (relative RMS); CLBlast (HEARTH_OPENCL_GEMM=clblast) only within
 * rounding amplified by the model, which the perplexity tests bound. */
static double logits_distance(const char *path, const char *gemm)
{
    if (gemm) setenv("HEARTH_OPENCL_GEMM", gemm, 1);
    else unsetenv("HEARTH_OPENCL_GEMM");
    hearth_model *cpu = load(path, 0, 0, false, HEARTH_OK);
    hearth_model *gpu = load(path, 99, 0, false, HEARTH_OK);
    hearth_context *a = new_context(cpu, 64, HEARTH_TYPE_F16);
    hearth_context *b = new_context(gpu, 64, HEARTH_TYPE_F16);
    unsetenv("HEARTH_OPENCL_GEMM");
    const int32_t V = hearth_model_n_vocab(cpu);
    int32_t t[40];
    make_tokens(V, t, 40);
    ck_assert_int_eq(hearth_eval(a, t, 40, 40), HEARTH_OK);
    ck_assert_int_eq(hearth_eval(b, t, 40, 40), HEARTH_OK);
    double num = 0, den = 0;
    for (int i = 0; i < 40; i++) {
        const float *la = hearth_context_logits(a, i), *lb = hearth_context_logits(b, i);
        for (int32_t v = 0; v < V; v++) {
            num += ((double)la[v] - lb[v]) * ((double)la[v] - lb[v]);
            den += (double)la[v] * la[v];
        }
    }
    hearth_context_free(a);
    hearth_context_free(b);
    hearth_model_free(cpu);
    hearth_model_free(gpu);
    return sqrt(num / den);
}

START_TEST(test_exact_prefill)
{
    if (!test_require_data()) return;
    static const char *const names[] = {"micro-llama-Q8_0.gguf", "micro-llama-Q4_K_M.gguf"};
    char path[4096];
    snprintf(path, sizeof path, "%s", model_path(names[_i]));
    static const char *const gemms[] = {NULL, "exact"};
    for (size_t g = 0; g < HEARTH_ARRAY_LEN(gemms); g++) {
        const double d = logits_distance(path, gemms[g]);
        fprintf(stderr, "note: %s, prompt of 40 with HEARTH_OPENCL_GEMM=%s: logits within %.3g "
                "of the CPU's\n", names[_i], gemms[g] ? gemms[g] : "(unset)", d);
        ck_assert_msg(d < 1e-5, "%s with HEARTH_OPENCL_GEMM=%s: logits differ from the CPU's by "
                      "%g", names[_i], gemms[g] ? gemms[g] : "(unset)", d);
    }
    fprintf(stderr, "note: %s, prompt of 40 with HEARTH_OPENCL_GEMM=clblast: logits within %.3g "
            "of the CPU's\n", names[_i], logits_distance(path, "clblast"));
}
END_TEST

/* ---- the report ------------------------------------------------------------------------ */

START_TEST(test_report)
{
    if (!test_require_data()) return;
    const char *path = model_path("micro-llama-Q6_K.gguf");
    hearth_gguf *g;
    ck_assert_int_eq(hearth_gguf_open(path, &g), HEARTH_OK);
    uint64_t layer1 = 0, output = 0;
    for (int64_t i = 0; i < hearth_gguf_n_tensors(g); i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(g, i);
        if (strncmp(t->name, "blk.1.", 6) == 0) layer1 += t->bytes;
        if (strncmp(t->name, "output", 6) == 0) output += t->bytes;
    }
    hearth_gguf_close(g);

    hearth_model *m = load(path, 0, 0, false, HEARTH_OK);
    ck_assert_int_eq(hearth_model_n_gpu_layers(m), 0);
    ck_assert(!hearth_model_output_on_gpu(m));
    ck_assert_int_eq(hearth_model_device(m), -1);
    ck_assert_ptr_null(hearth_model_device_name(m));
    ck_assert_uint_eq(hearth_model_gpu_bytes(m), 0);
    ck_assert_ptr_null(hearth_model_gpu_fallback(m));
    hearth_model_free(m);

    m = load(path, 1, 0, false, HEARTH_OK);
    ck_assert_int_eq(hearth_model_n_gpu_layers(m), 1);
    ck_assert(!hearth_model_output_on_gpu(m));
    ck_assert_int_eq(hearth_model_device(m), 0);
    ck_assert_ptr_nonnull(hearth_model_device_name(m));
    ck_assert_uint_eq(hearth_model_gpu_bytes(m), layer1);   /* the last layer */
    bool cached;
    ck_assert(hearth_model_gpu_build_ms(m, &cached) >= 0.0);
    hearth_context *c = new_context(m, 32, HEARTH_TYPE_F16);
    ck_assert_int_eq(hearth_context_n_gpu_layers(c), 1);
    ck_assert_ptr_null(hearth_context_gpu_fallback(c));
    /* keys and values x 32 positions x 2 KV heads x 32 dims x 2 bytes, one layer */
    ck_assert_uint_eq(hearth_context_kv_device_bytes(c), 2 * 32 * 2 * 32 * 2);
    hearth_context_free(c);
    hearth_model_free(m);

    m = load(path, 99, 0, false, HEARTH_OK);
    ck_assert_int_eq(hearth_model_n_gpu_layers(m), 2);
    ck_assert(hearth_model_output_on_gpu(m));
    ck_assert_uint_gt(hearth_model_gpu_bytes(m), layer1 + output);
    hearth_model_free(m);
}
END_TEST

/* ---- errors and fallback ------------------------------------------------------------------ */

START_TEST(test_bad_device)
{
    if (!test_require_data()) return;
    const char *path = model_path("stories260K.gguf");
    hearth_model *m = load(path, 2, 1000, false, HEARTH_E_INVALID);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "OpenCL device 1000 does not exist"));
    m = load(path, 2, 1000, true, HEARTH_OK);
    ck_assert_int_eq(hearth_model_n_gpu_layers(m), 0);
    ck_assert_int_eq(hearth_model_device(m), -1);
    ck_assert_ptr_nonnull(hearth_model_gpu_fallback(m));
    ck_assert_ptr_nonnull(strstr(hearth_model_gpu_fallback(m), "OpenCL device 1000 does not exist"));
    int32_t gen[8];
    greedy(m, gen, 8);   /* runs on the CPU */
    hearth_model_free(m);
    m = load(path, -1, 0, false, HEARTH_E_INVALID);
}
END_TEST

/* A cache type the device refuses: a clear error, or the CPU when the
 * model allows fallback, with the same results as the CPU. */
START_TEST(test_cache_type_fallback)
{
    if (!test_require_data()) return;
    const char *path = model_path("micro-llama-f32.gguf");
    hearth_model *m = load(path, 3, 0, false, HEARTH_OK);
    hearth_context_params p;
    hearth_context_default_params(&p);
    p.n_ctx = 64;
    p.cache_type = HEARTH_TYPE_Q8_0;
    hearth_context *c;
    ck_assert_int_eq(hearth_context_new(m, &p, &c), HEARTH_E_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "Q8_0 is not supported on OpenCL"));
    hearth_model_free(m);

    m = load(path, 3, 0, true, HEARTH_OK);
    ck_assert_int_eq(hearth_context_new(m, &p, &c), HEARTH_OK);
    ck_assert_int_eq(hearth_context_n_gpu_layers(c), 0);
    ck_assert_ptr_nonnull(strstr(hearth_context_gpu_fallback(c), "Q8_0 is not supported on OpenCL"));
    int32_t t[16];
    make_tokens(hearth_model_n_vocab(m), t, 16);
    ck_assert_int_eq(hearth_eval(c, t, 16, 1), HEARTH_OK);
    hearth_context_free(c);
    hearth_model_free(m);
}
END_TEST

/* HEARTH_OPENCL_MEM_LIMIT below what the weights need, then below what
 * a context needs: an error naming the bytes, or the CPU's results with
 * the reason kept when fallback is allowed. */
START_TEST(test_memory_limit)
{
    if (!test_require_data()) return;
    const char *path = model_path("stories260K.gguf");
    int32_t ref[24], got[24];
    hearth_model *m = load(path, 0, 0, false, HEARTH_OK);
    greedy(m, ref, 24);
    hearth_model_free(m);

    setenv("HEARTH_OPENCL_MEM_LIMIT", "1K", 1);
    m = load(path, 99, 0, false, HEARTH_E_NOMEM);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "for the weights of 5 layers and the output "
                                                      "layer: 1040128 bytes needed, 1024 available"));
    m = load(path, 99, 0, true, HEARTH_OK);
    ck_assert_int_eq(hearth_model_n_gpu_layers(m), 0);
    ck_assert_ptr_nonnull(strstr(hearth_model_gpu_fallback(m), "1024 available"));
    greedy(m, got, 24);
    ck_assert_mem_eq(got, ref, sizeof ref);
    hearth_model_free(m);

    /* the weights (1040128 bytes) fit, a context's buffers do not */
    setenv("HEARTH_OPENCL_MEM_LIMIT", "1100K", 1);
    m = load(path, 99, 0, false, HEARTH_OK);
    ck_assert_int_eq(hearth_model_n_gpu_layers(m), 5);
    hearth_context_params p;
    hearth_context_default_params(&p);
    p.n_ctx = 256;
    hearth_context *c;
    ck_assert_int_eq(hearth_context_new(m, &p, &c), HEARTH_E_NOMEM);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "for a context's KV cache (163840 bytes)"));
    hearth_model_free(m);
    m = load(path, 99, 0, true, HEARTH_OK);
    ck_assert_int_eq(hearth_context_new(m, &p, &c), HEARTH_OK);
    ck_assert_int_eq(hearth_context_n_gpu_layers(c), 0);
    ck_assert_ptr_nonnull(strstr(hearth_context_gpu_fallback(c), "not enough memory on OpenCL device"));
    hearth_context_free(c);
    greedy(m, got, 24);
    ck_assert_mem_eq(got, ref, sizeof ref);
    hearth_model_free(m);

    /* with room for both, the device runs */
    setenv("HEARTH_OPENCL_MEM_LIMIT", "64M", 1);
    m = load(path, 99, 0, false, HEARTH_OK);
    greedy(m, got, 24);
    ck_assert_mem_eq(got, ref, sizeof ref);
    hearth_model_free(m);
    unsetenv("HEARTH_OPENCL_MEM_LIMIT");
}
END_TEST

/* No OpenCL platform at all: the ICD loader is pointed at an empty list.
 * Needs a fresh process (Check's fork mode), since the loader reads the
 * list once. */
START_TEST(test_no_platform)
{
    if (!test_require_data()) return;
    const char *fork_mode = getenv("CK_FORK");
    if (fork_mode && strcmp(fork_mode, "no") == 0) return;
    char dir[] = "/tmp/hearth-novendors-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    setenv("OCL_ICD_VENDORS", dir, 1);
    setenv("OCL_ICD_FILENAMES", "", 1);
    hearth_device_info *list;
    int32_t n;
    ck_assert_int_eq(hearth_devices(&list, &n), HEARTH_E_NOT_FOUND);
    ck_assert_int_eq(n, 0);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "CL_PLATFORM_NOT_FOUND_KHR"));
    const char *path = model_path("stories260K.gguf");
    hearth_model *m = load(path, 1, 0, false, HEARTH_E_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "no OpenCL platform"));
    m = load(path, 1, 0, true, HEARTH_OK);
    ck_assert_ptr_nonnull(strstr(hearth_model_gpu_fallback(m), "CL_PLATFORM_NOT_FOUND_KHR"));
    ck_assert_int_eq(hearth_model_n_gpu_layers(m), 0);
    /* without offload nothing changes */
    hearth_model_free(m);
    m = load(path, 0, 0, false, HEARTH_OK);
    ck_assert_ptr_null(hearth_model_gpu_fallback(m));
    hearth_model_free(m);
    rmdir(dir);
}
END_TEST

/* ---- serving ------------------------------------------------------------------------ */

/* What one sample of an engine request produced: its tokens and a
 * fingerprint (FNV-1a) of the logits each was drawn from. */
#define SERVE_MAX 16
struct served {
    int32_t tokens[SERVE_MAX];
    uint64_t logits_hash[SERVE_MAX];
    int32_t n;
    hearth_finish_reason finish;
};

struct serve_sink {
    struct served *out; /* n samples */
    int32_t n;
    int32_t n_vocab;
    int finished;
};

static void on_serve_event(void *user, const hearth_event *ev)
{
    struct serve_sink *c = user;
    ck_assert_int_lt(ev->index, c->n);
    struct served *o = &c->out[ev->index];
    ck_assert_int_eq(o->finish, HEARTH_FINISH_NONE);
    if (ev->token >= 0 && o->n < SERVE_MAX) {
        o->tokens[o->n] = ev->token;
        o->logits_hash[o->n] = ev->logits ? test_fnv1a(ev->logits, (size_t)c->n_vocab * sizeof(float)) : 0;
        o->n++;
    }
    if (ev->finish != HEARTH_FINISH_NONE) {
        o->finish = ev->finish;
        c->finished++;
    }
}

static void serve_submit(hearth_engine *e, const int32_t *prompt, int32_t n_prompt, float temp, uint64_t seed,
                         int32_t n, struct serve_sink *c)
{
    hearth_request r;
    hearth_request_default(&r);
    r.prompt = prompt;
    r.n_prompt = (size_t)n_prompt;
    r.max_tokens = 8;
    r.n = n;
    r.sampling.temperature = temp;
    r.sampling.seed = seed;
    if (temp > 0) {
        r.sampling.top_k = 0;
        r.sampling.top_p = 1.0f;
        r.sampling.min_p = 0.0f;
    }
    r.ignore_eos = true;
    r.on_event = on_serve_event;
    r.user = c;
    hearth_status st = hearth_engine_submit(e, &r, NULL);
    ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
}

/* Step until nothing is left, checking the pool after every step. */
static void serve_run(hearth_engine *e)
{
    test_engine_drain(e, 10000);
}

static void expect_served(const struct served *a, const struct served *b, const char *what)
{
    ck_assert_msg(a->n == 8 && b->n == 8, "%s: %d tokens, alone %d", what, a->n, b->n);
    ck_assert_int_eq(a->finish, HEARTH_FINISH_LENGTH);
    for (int32_t i = 0; i < a->n; i++) {
        ck_assert_msg(a->tokens[i] == b->tokens[i], "%s: token %d is %d, alone %d", what, i, a->tokens[i],
                      b->tokens[i]);
        ck_assert_msg(a->logits_hash[i] == b->logits_hash[i], "%s: the logits of token %d differ from alone",
                      what, i);
    }
}

/* The serving engine on a model whose layers and output layer are all on
 * the device: requests of different prompt lengths run together (prompt
 * chunks beside decode rows, each sequence through its own block table on
 * the device) give the tokens and logits each gives alone on the same
 * engine, bit for bit; and two samples of one prompt, whose last block
 * they share part full until the device copies it on write, give what
 * two single requests with their seeds give. */
START_TEST(test_engine_offloaded)
{
    if (!test_require_data()) return;
    static const char *const names[] = {"micro-llama-Q8_0.gguf", "micro-qwen2-Q4_K_M.gguf"};
    hearth_model *m = load(model_path(names[_i]), 99, 0, false, HEARTH_OK);
    ck_assert_int_gt(hearth_model_n_gpu_layers(m), 0);
    ck_assert(hearth_model_output_on_gpu(m));
    const int32_t V = hearth_model_n_vocab(m);
    hearth_engine_params p;
    hearth_engine_default_params(&p);
    p.n_ctx = 256;
    p.n_batch = 48;
    p.block_tokens = 16;
    p.kv_tokens = 1024;
    p.n_threads = 2;
    p.cache_type = HEARTH_TYPE_F16;
    p.no_prefix_cache = true; /* every prompt computed, none taken from the alone runs */
    hearth_engine *e;
    hearth_status st = hearth_engine_new(m, &p, &e);
    ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());

    enum { N = 4 };
    static const int32_t lens[N] = {5, 37, 70, 130};
    int32_t prompts[N][130];
    test_rng rng;
    test_rng_seed(&rng, 31 + (uint64_t)_i);
    for (int i = 0; i < N; i++) {
        prompts[i][0] = 1;
        for (int32_t j = 1; j < lens[i]; j++) prompts[i][j] = (int32_t)(3 + test_rng_next(&rng) % (uint64_t)(V - 3));
    }
    static struct served alone[N], together[N];
    memset(alone, 0, sizeof alone);
    memset(together, 0, sizeof together);
    for (int i = 0; i < N; i++) {
        struct serve_sink c = {&alone[i], 1, V, 0};
        serve_submit(e, prompts[i], lens[i], 0.0f, 0, 1, &c);
        serve_run(e);
        ck_assert_int_eq(c.finished, 1);
    }
    struct serve_sink c[N];
    for (int i = 0; i < N; i++) {
        c[i] = (struct serve_sink){&together[i], 1, V, 0};
        serve_submit(e, prompts[i], lens[i], 0.0f, 0, 1, &c[i]);
        if (i == 1) {
            /* the later ones join while the first ones run */
            bool w;
            ck_assert_int_eq(hearth_engine_step(e, &w), HEARTH_OK);
        }
    }
    serve_run(e);
    for (int i = 0; i < N; i++) {
        char what[128];
        snprintf(what, sizeof what, "%s, request %d of %d tokens", names[_i], i, lens[i]);
        ck_assert_int_eq(c[i].finished, 1);
        expect_served(&together[i], &alone[i], what);
    }

    /* two samples of a prompt of 2.5 blocks, and each seed alone; a high
     * temperature over the whole distribution, so that the samples part
     * at once and write different rows into their copies */
    static struct served single[2], fork[2];
    memset(single, 0, sizeof single);
    memset(fork, 0, sizeof fork);
    for (int i = 0; i < 2; i++) {
        struct serve_sink one = {&single[i], 1, V, 0};
        serve_submit(e, prompts[2], 40, 5.0f, 500 + (uint64_t)i, 1, &one);
        serve_run(e);
    }
    struct serve_sink two = {fork, 2, V, 0};
    serve_submit(e, prompts[2], 40, 5.0f, 500, 2, &two);
    bool w;
    ck_assert_int_eq(hearth_engine_step(e, &w), HEARTH_OK); /* the prompt: its 3 blocks shared */
    hearth_engine_stats s;
    hearth_engine_get_stats(e, &s);
    ck_assert_int_eq(s.running, 2);
    ck_assert_int_eq(s.blocks_used, 3);
    ck_assert_int_eq(hearth_engine_step(e, &w), HEARTH_OK); /* the first decode: the third block copied */
    hearth_engine_get_stats(e, &s);
    ck_assert_int_eq(s.blocks_used, 4);
    serve_run(e);
    ck_assert_int_eq(two.finished, 2);
    for (int i = 0; i < 2; i++) {
        char what[128];
        snprintf(what, sizeof what, "%s, sample %d of 2", names[_i], i);
        expect_served(&fork[i], &single[i], what);
    }
    ck_assert_msg(memcmp(fork[0].tokens, fork[1].tokens, sizeof fork[0].tokens) != 0,
                  "%s: the two samples are the same", names[_i]);
    hearth_engine_get_stats(e, &s);
    ck_assert_int_eq(s.blocks_used, 0);
    hearth_engine_free(e);
    hearth_model_free(m);
}
END_TEST

static Suite *offload_suite(void)
{
    Suite *s = suite_create("offload");
    TCase *tc = tcase_create("models");
    tcase_set_timeout(tc, 1200);
    tcase_add_loop_test(tc, test_perplexity_llama, 0, (int)HEARTH_ARRAY_LEN(micro_types));
    tcase_add_loop_test(tc, test_perplexity_qwen2, 0, (int)N_QWEN2_TYPES);
    tcase_add_test(tc, test_perplexity_stories);
    tcase_add_loop_test(tc, test_perplexity_text, 0, (int)N_TEXT_MODELS);
    tcase_add_test(tc, test_greedy_stories);
    tcase_add_test(tc, test_prefill_decode_rewind);
    tcase_add_loop_test(tc, test_exact_prefill, 0, 2);
    tcase_add_test(tc, test_report);
    tcase_add_test(tc, test_bad_device);
    tcase_add_test(tc, test_cache_type_fallback);
    tcase_add_test(tc, test_memory_limit);
    tcase_add_test(tc, test_no_platform);
    suite_add_tcase(s, tc);
    TCase *tc_serving = tcase_create("serving");
    tcase_set_timeout(tc_serving, 600);
    tcase_add_loop_test(tc_serving, test_engine_offloaded, 0, 2);
    suite_add_tcase(s, tc_serving);
    return s;
}

int main(void)
{
    int status = test_opencl_status();
    if (status != 0) return status;
    unsetenv("HEARTH_OPENCL_MEM_LIMIT");
    unsetenv("HEARTH_OPENCL_BUILD_OPTIONS");
    if (TEST_UNDER_SANITIZERS)
        printf("note: under the sanitizers micro-qwen2 runs %d of its %d types and the text %d of its %d "
               "models; the plain build runs them all\n", (int)N_QWEN2_TYPES,
               (int)HEARTH_ARRAY_LEN(micro_types), (int)N_TEXT_MODELS, (int)HEARTH_ARRAY_LEN(text_models));
    return test_run_suite(offload_suite());
}

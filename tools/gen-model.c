/*
 * gen-model.c -- writes benchmark models: random weights with the exact
 * tensor shapes of well-known small models, quantized with one of the
 * recipes of hearth quantize, so that speed can be measured (and compared
 * with other engines) without downloading any weights.
 *
 * Weights are drawn from a normal distribution with standard deviation
 * 0.02 (the usual initialisation scale, which keeps activations in a sane
 * range through every layer); norm weights are 1.  Each row has its own
 * random stream derived from the seed, the tensor's name and the row
 * number, so the file is the same whatever the thread count.  The
 * vocabulary is copied from a vocabulary-only GGUF file (--vocab, padded
 * with unused "[PADn]" tokens up to the embedding rows, as model converters
 * pad) or is a synthetic SentencePiece one.  Not installed: a development
 * and benchmarking tool.
 */
#include "internal.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "gguf.h"
#include "quant.h"
#include "quantize.h"

#define WEIGHT_STD 0.02

/* ------------------------------------------------------------------------
 * Shapes
 * ------------------------------------------------------------------------ */

struct shape {
    const char *name;
    const char *arch;        /* "llama" or "qwen2" */
    const char *title;       /* general.name */
    int n_layer, n_embd, n_ff, n_head, n_head_kv, n_vocab, n_ctx;
    float rope_base, norm_eps;
    bool tied;               /* no output.weight: token_embd doubles as it */
    bool qkv_bias;
    bool llama3_rope;        /* rope_freqs.weight with Llama 3.1 scaling */
};

static const struct shape shapes[] = {
    {"tinyllama-1.1b", "llama", "TinyLlama-1.1B shape, random weights", 22, 2048, 5632, 32, 4,
     32000, 2048, 10000.0f, 1e-5f, false, false, false},
    {"llama-3.2-1b", "llama", "Llama-3.2-1B shape, random weights", 16, 2048, 8192, 32, 8,
     128256, 131072, 500000.0f, 1e-5f, true, false, true},
    {"qwen2.5-0.5b", "qwen2", "Qwen2.5-0.5B shape, random weights", 24, 896, 4864, 14, 2,
     151936, 32768, 1000000.0f, 1e-6f, true, true, false},
};

/* ------------------------------------------------------------------------
 * Random numbers
 * ------------------------------------------------------------------------ */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* FNV-1a of a name, to give every tensor its own stream. */
static uint64_t name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3u;
    return h;
}

/* n normal values of standard deviation std (Box-Muller, pairs). */
static void normal_row(uint64_t seed, float *x, int64_t n, double std)
{
    uint64_t state = seed;
    for (int64_t i = 0; i < n; i += 2) {
        double u1 = (double)((splitmix64(&state) >> 11) + 1) * 0x1.0p-53; /* (0, 1] */
        double u2 = (double)(splitmix64(&state) >> 11) * 0x1.0p-53;
        double r = sqrt(-2.0 * log(u1)) * std;
        x[i] = (float)(r * cos(6.283185307179586 * u2));
        if (i + 1 < n) x[i + 1] = (float)(r * sin(6.283185307179586 * u2));
    }
}

/* ------------------------------------------------------------------------
 * Tensors
 * ------------------------------------------------------------------------ */

enum fill_kind { FILL_NORMAL, FILL_ONES, FILL_ROPE_FACTORS };

struct gen_tensor {
    char name[64];
    int64_t ne[2];           /* ne[0] per row, ne[1] rows (1 for vectors) */
    uint32_t n_dims;
    enum fill_kind fill;
    hearth_type type;
};

struct generator {
    const struct shape *shape;
    uint64_t seed;
    int threads;
    struct gen_tensor *tensors;
    size_t n_tensors;
    float *scratch;          /* one row per thread */
    int64_t scratch_row;
};

static void add_tensor(struct generator *g, const char *name, int64_t ne0, int64_t ne1,
                       enum fill_kind fill)
{
    struct gen_tensor *t = &g->tensors[g->n_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->n_dims = ne1 > 1 ? 2 : 1;
    t->fill = fill;
}

static void list_tensors(struct generator *g)
{
    const struct shape *s = g->shape;
    const int64_t head_dim = s->n_embd / s->n_head, n_kv = head_dim * s->n_head_kv;
    char name[64];
    add_tensor(g, "token_embd.weight", s->n_embd, s->n_vocab, FILL_NORMAL);
    if (s->llama3_rope) add_tensor(g, "rope_freqs.weight", head_dim / 2, 1, FILL_ROPE_FACTORS);
    add_tensor(g, "output_norm.weight", s->n_embd, 1, FILL_ONES);
    if (!s->tied) add_tensor(g, "output.weight", s->n_embd, s->n_vocab, FILL_NORMAL);
    for (int il = 0; il < s->n_layer; il++) {
#define LAYER(suffix, ne0, ne1, fill) \
    do { \
        snprintf(name, sizeof name, "blk.%d.%s", il, suffix); \
        add_tensor(g, name, ne0, ne1, fill); \
    } while (0)
        LAYER("attn_norm.weight", s->n_embd, 1, FILL_ONES);
        LAYER("attn_q.weight", s->n_embd, s->n_embd, FILL_NORMAL);
        LAYER("attn_k.weight", s->n_embd, n_kv, FILL_NORMAL);
        LAYER("attn_v.weight", s->n_embd, n_kv, FILL_NORMAL);
        if (s->qkv_bias) {
            LAYER("attn_q.bias", s->n_embd, 1, FILL_NORMAL);
            LAYER("attn_k.bias", n_kv, 1, FILL_NORMAL);
            LAYER("attn_v.bias", n_kv, 1, FILL_NORMAL);
        }
        LAYER("attn_output.weight", s->n_embd, s->n_embd, FILL_NORMAL);
        LAYER("ffn_norm.weight", s->n_embd, 1, FILL_ONES);
        LAYER("ffn_gate.weight", s->n_embd, s->n_ff, FILL_NORMAL);
        LAYER("ffn_up.weight", s->n_embd, s->n_ff, FILL_NORMAL);
        LAYER("ffn_down.weight", s->n_ff, s->n_embd, FILL_NORMAL);
#undef LAYER
    }
}

/* Llama 3.1 RoPE scaling (factor 32, low/high frequency factors 1 and 4,
 * original context 8192): wavelengths shorter than 8192/4 positions keep
 * their frequency, those longer than 8192 are divided by 32, and those in
 * between are interpolated smoothly.  The file stores the divisor per
 * rotated pair. */
static void rope_factors(float *x, int64_t n_pairs, double base)
{
    const double factor = 32, low = 1, high = 4, original = 8192;
    const double low_wavelen = original / low, high_wavelen = original / high;
    for (int64_t i = 0; i < n_pairs; i++) {
        double freq = pow(base, -2.0 * (double)i / (double)(2 * n_pairs));
        double wavelen = 6.283185307179586 / freq;
        double divisor;
        if (wavelen < high_wavelen) {
            divisor = 1;
        } else if (wavelen > low_wavelen) {
            divisor = factor;
        } else {
            double smooth = (original / wavelen - low) / (high - low);
            divisor = 1.0 / ((1 - smooth) / factor + smooth);
        }
        x[i] = (float)divisor;
    }
}

static hearth_status fill_tensor(void *user, size_t index, void *buf, size_t bytes)
{
    struct generator *g = user;
    const struct gen_tensor *t = &g->tensors[index];
    const uint64_t tensor_seed = g->seed ^ name_hash(t->name);
    const size_t row_bytes = hearth_type_row_bytes(t->type, t->ne[0]);
    (void)bytes;
    bool ok = true;
#ifdef _OPENMP
#pragma omp parallel for num_threads(g->threads) schedule(dynamic, 16) reduction(&& : ok)
#endif
    for (int64_t r = 0; r < t->ne[1]; r++) {
#ifdef _OPENMP
        float *x = g->scratch + (size_t)omp_get_thread_num() * (size_t)g->scratch_row;
#else
        float *x = g->scratch;
#endif
        if (t->fill == FILL_ONES) {
            for (int64_t i = 0; i < t->ne[0]; i++) x[i] = 1.0f;
        } else if (t->fill == FILL_ROPE_FACTORS) {
            rope_factors(x, t->ne[0], g->shape->rope_base);
        } else {
            uint64_t s = tensor_seed + (uint64_t)r * 0x9e3779b97f4a7c15u;
            normal_row(splitmix64(&s), x, t->ne[0], WEIGHT_STD);
        }
        ok = quant_quantize_row(t->type, x, (uint8_t *)buf + (size_t)r * row_bytes, t->ne[0]) && ok;
    }
    fprintf(stderr, "gen-model: [%zu/%zu] %-26s %-5s %lld x %lld\n", index + 1, g->n_tensors,
            t->name, hearth_type_name(t->type), (long long)t->ne[0], (long long)t->ne[1]);
    return ok ? HEARTH_OK : hearth_error(HEARTH_E_INTERNAL, "cannot quantize %s", t->name);
}

/* ------------------------------------------------------------------------
 * Vocabulary
 * ------------------------------------------------------------------------ */

/* A SentencePiece vocabulary of n tokens: <unk>, <s>, </s>, the 256 byte
 * tokens, then word pieces "▁a", "▁b", ... with decreasing scores. */
static hearth_status synthetic_vocab(hearth_gguf_writer *w, int n)
{
    char **tokens = calloc((size_t)n, sizeof *tokens);
    float *scores = calloc((size_t)n, sizeof *scores);
    int32_t *types = calloc((size_t)n, sizeof *types);
    hearth_status st = tokens && scores && types ? HEARTH_OK : HEARTH_E_NOMEM;
    for (int i = 0; i < n && !st; i++) {
        char piece[32];
        if (i == 0) snprintf(piece, sizeof piece, "<unk>");
        else if (i == 1) snprintf(piece, sizeof piece, "<s>");
        else if (i == 2) snprintf(piece, sizeof piece, "</s>");
        else if (i < 3 + 256) snprintf(piece, sizeof piece, "<0x%02X>", i - 3);
        else {
            /* the word's letters: i - 259 written in base 26 */
            char word[16];
            int k = 0;
            for (int v = i - 259; k < 15; v = v / 26 - 1) {
                word[k++] = (char)('a' + v % 26);
                if (v < 26) break;
            }
            word[k] = '\0';
            snprintf(piece, sizeof piece, "\xe2\x96\x81%s", word);
        }
        tokens[i] = strdup(piece);
        if (!tokens[i]) st = HEARTH_E_NOMEM;
        scores[i] = i < 259 ? 0.0f : -(float)(i - 259);
        types[i] = i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1;
    }
    if (!st) st = hearth_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    if (!st) st = hearth_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens",
                                                   (const char *const *)tokens, (uint64_t)n);
    if (!st) st = hearth_gguf_writer_set_array(w, "tokenizer.ggml.scores", HEARTH_GGUF_FLOAT32,
                                               scores, (uint64_t)n);
    if (!st) st = hearth_gguf_writer_set_array(w, "tokenizer.ggml.token_type", HEARTH_GGUF_INT32,
                                               types, (uint64_t)n);
    if (!st) st = hearth_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    if (!st) st = hearth_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    if (!st) st = hearth_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    if (!st) st = hearth_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    for (int i = 0; tokens && i < n; i++) free(tokens[i]);
    free(tokens);
    free(scores);
    free(types);
    return st;
}

/* The tokenizer.* entries of a vocabulary file; the token list (with its
 * types and scores) padded to n tokens. */
static hearth_status copy_vocab(hearth_gguf_writer *w, const char *path, int n)
{
    hearth_gguf *v;
    HEARTH_TRY(hearth_gguf_open(path, &v));
    hearth_gguf_value tokens;
    hearth_status st = hearth_gguf_get_array(v, "tokenizer.ggml.tokens", &tokens);
    if (st) {
        hearth_gguf_close(v);
        return hearth_error(HEARTH_E_FORMAT, "%s: no tokenizer.ggml.tokens", path);
    }
    const uint64_t have = tokens.v.arr.n;
    if (have > (uint64_t)n) {
        hearth_gguf_close(v);
        return hearth_error(HEARTH_E_INVALID, "%s has %llu tokens, more than the %d embedding rows",
                            path, (unsigned long long)have, n);
    }
    for (int64_t i = 0; i < hearth_gguf_n_kv(v) && !st; i++) {
        const char *key = hearth_gguf_kv_key(v, i);
        if (strncmp(key, "tokenizer.", 10) != 0) continue;
        if (have < (uint64_t)n && (strcmp(key, "tokenizer.ggml.tokens") == 0 ||
                                   strcmp(key, "tokenizer.ggml.token_type") == 0 ||
                                   strcmp(key, "tokenizer.ggml.scores") == 0))
            continue;
        st = hearth_gguf_writer_copy_kv(w, v, i);
    }
    if (!st && have < (uint64_t)n) {
        char **strs = calloc((size_t)n, sizeof *strs);
        int32_t *types = calloc((size_t)n, sizeof *types);
        float *scores = calloc((size_t)n, sizeof *scores);
        hearth_gguf_value types_in, scores_in;
        bool has_types = hearth_gguf_get_array(v, "tokenizer.ggml.token_type", &types_in) == 0;
        bool has_scores = hearth_gguf_get_array(v, "tokenizer.ggml.scores", &scores_in) == 0;
        if (!strs || !types || !scores) st = HEARTH_E_NOMEM;
        for (int i = 0; i < n && !st; i++) {
            hearth_gguf_value e;
            char pad[32];
            types[i] = 5; /* unused */
            if ((uint64_t)i < have) {
                st = hearth_gguf_array_get(v, &tokens, (uint64_t)i, &e);
                if (st) break;
                strs[i] = strndup(e.v.str.ptr, (size_t)e.v.str.len);
                if (has_types && hearth_gguf_array_get(v, &types_in, (uint64_t)i, &e) == 0)
                    types[i] = (int32_t)e.v.i;
                if (has_scores && hearth_gguf_array_get(v, &scores_in, (uint64_t)i, &e) == 0)
                    scores[i] = (float)e.v.f;
            } else {
                snprintf(pad, sizeof pad, "[PAD%d]", i);
                strs[i] = strdup(pad);
            }
            if (!strs[i]) st = HEARTH_E_NOMEM;
        }
        if (!st) st = hearth_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens",
                                                       (const char *const *)strs, (uint64_t)n);
        if (!st) st = hearth_gguf_writer_set_array(w, "tokenizer.ggml.token_type",
                                                   HEARTH_GGUF_INT32, types, (uint64_t)n);
        if (!st && has_scores)
            st = hearth_gguf_writer_set_array(w, "tokenizer.ggml.scores", HEARTH_GGUF_FLOAT32,
                                              scores, (uint64_t)n);
        for (int i = 0; strs && i < n; i++) free(strs[i]);
        free(strs);
        free(types);
        free(scores);
    }
    hearth_gguf_close(v);
    return st;
}

/* ------------------------------------------------------------------------
 * Metadata and main
 * ------------------------------------------------------------------------ */

static hearth_status set_metadata(hearth_gguf_writer *w, const struct shape *s,
                                  hearth_ftype ftype, const char *vocab_path)
{
    char key[128];
    const char *a = s->arch;
#define ARCH_U32(suffix, value) \
    (snprintf(key, sizeof key, "%s.%s", a, suffix), hearth_gguf_writer_set_u32(w, key, value))
#define ARCH_F32(suffix, value) \
    (snprintf(key, sizeof key, "%s.%s", a, suffix), hearth_gguf_writer_set_f32(w, key, value))
    HEARTH_TRY(hearth_gguf_writer_set_str(w, "general.architecture", a));
    HEARTH_TRY(hearth_gguf_writer_set_str(w, "general.name", s->title));
    HEARTH_TRY(ARCH_U32("context_length", (uint32_t)s->n_ctx));
    HEARTH_TRY(ARCH_U32("embedding_length", (uint32_t)s->n_embd));
    HEARTH_TRY(ARCH_U32("block_count", (uint32_t)s->n_layer));
    HEARTH_TRY(ARCH_U32("feed_forward_length", (uint32_t)s->n_ff));
    HEARTH_TRY(ARCH_U32("attention.head_count", (uint32_t)s->n_head));
    HEARTH_TRY(ARCH_U32("attention.head_count_kv", (uint32_t)s->n_head_kv));
    HEARTH_TRY(ARCH_U32("rope.dimension_count", (uint32_t)(s->n_embd / s->n_head)));
    HEARTH_TRY(ARCH_F32("rope.freq_base", s->rope_base));
    HEARTH_TRY(ARCH_F32("attention.layer_norm_rms_epsilon", s->norm_eps));
#undef ARCH_U32
#undef ARCH_F32
    HEARTH_TRY(hearth_gguf_writer_set_u32(w, "general.file_type", (uint32_t)ftype));
    HEARTH_TRY(hearth_gguf_writer_set_u32(w, "general.quantization_version", 2));
    return vocab_path ? copy_vocab(w, vocab_path, s->n_vocab) : synthetic_vocab(w, s->n_vocab);
}

static void usage(FILE *out)
{
    fputs("usage: gen-model --shape NAME [--type TYPE] [--vocab FILE] [--seed N]\n"
          "                 [--threads N] [--layers N] [--embd N] [--ff N] [--heads N]\n"
          "                 [--kv-heads N] [--n-vocab N] OUT\n"
          "\n"
          "Write a model with random weights and the tensor shapes of NAME:\n"
          "  tinyllama-1.1b   llama, 22 layers, d 2048, ff 5632, 32/4 heads, vocab 32000\n"
          "  llama-3.2-1b     llama, 16 layers, d 2048, ff 8192, 32/8 heads, vocab 128256,\n"
          "                   RoPE frequency factors, tied embeddings\n"
          "  qwen2.5-0.5b     qwen2, 24 layers, d 896, ff 4864, 14/2 heads, vocab 151936,\n"
          "                   q/k/v biases, tied embeddings\n"
          "quantized with a recipe of hearth quantize (TYPE, default Q8_0).  --vocab\n"
          "copies the tokenizer of a vocabulary GGUF file (padded to the vocabulary\n"
          "size); without it the vocabulary is a synthetic SentencePiece one.  The\n"
          "other options override the shape's sizes (for small test models).\n",
          out);
}

static bool parse_positive(const char *opt, const char *arg, int *out)
{
    char *end;
    long v = strtol(arg, &end, 10);
    if (end == arg || *end || v < 1 || v > (1 << 24)) {
        fprintf(stderr, "gen-model: %s: expected a positive integer, got '%s'\n", opt, arg);
        return false;
    }
    *out = (int)v;
    return true;
}

int main(int argc, char **argv)
{
    enum { OPT_SHAPE = 256, OPT_TYPE, OPT_VOCAB, OPT_SEED, OPT_THREADS, OPT_LAYERS, OPT_EMBD,
           OPT_FF, OPT_HEADS, OPT_KV_HEADS, OPT_N_VOCAB };
    static const struct option longopts[] = {
        {"shape", required_argument, NULL, OPT_SHAPE},
        {"type", required_argument, NULL, OPT_TYPE},
        {"vocab", required_argument, NULL, OPT_VOCAB},
        {"seed", required_argument, NULL, OPT_SEED},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"layers", required_argument, NULL, OPT_LAYERS},
        {"embd", required_argument, NULL, OPT_EMBD},
        {"ff", required_argument, NULL, OPT_FF},
        {"heads", required_argument, NULL, OPT_HEADS},
        {"kv-heads", required_argument, NULL, OPT_KV_HEADS},
        {"n-vocab", required_argument, NULL, OPT_N_VOCAB},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct shape s;
    bool have_shape = false;
    int override[OPT_N_VOCAB + 1] = {0};
    hearth_ftype ftype = HEARTH_FTYPE_Q8_0;
    const char *vocab_path = NULL;
    struct generator g = {.seed = 42};
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_SHAPE:
            for (size_t i = 0; i < HEARTH_ARRAY_LEN(shapes); i++)
                if (strcmp(shapes[i].name, optarg) == 0) {
                    s = shapes[i];
                    have_shape = true;
                }
            if (!have_shape) {
                fprintf(stderr, "gen-model: unknown shape '%s'\n", optarg);
                return 2;
            }
            break;
        case OPT_TYPE:
            if (hearth_ftype_from_name(optarg, &ftype) != HEARTH_OK) {
                fprintf(stderr, "gen-model: %s\n", hearth_last_error());
                return 2;
            }
            break;
        case OPT_VOCAB: vocab_path = optarg; break;
        case OPT_SEED: g.seed = strtoull(optarg, NULL, 10); break;
        case OPT_THREADS:
        case OPT_LAYERS:
        case OPT_EMBD:
        case OPT_FF:
        case OPT_HEADS:
        case OPT_KV_HEADS:
        case OPT_N_VOCAB:
            if (!parse_positive(argv[optind - 1], optarg, &override[c])) return 2;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!have_shape || optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    const char *out_path = argv[optind];
    if (override[OPT_LAYERS]) s.n_layer = override[OPT_LAYERS];
    if (override[OPT_EMBD]) s.n_embd = override[OPT_EMBD];
    if (override[OPT_FF]) s.n_ff = override[OPT_FF];
    if (override[OPT_HEADS]) s.n_head = override[OPT_HEADS];
    if (override[OPT_KV_HEADS]) s.n_head_kv = override[OPT_KV_HEADS];
    if (override[OPT_N_VOCAB]) s.n_vocab = override[OPT_N_VOCAB];
    if (s.n_embd % s.n_head != 0 || s.n_head % s.n_head_kv != 0 || (s.n_embd / s.n_head) % 2) {
        fprintf(stderr, "gen-model: %d heads of %d/%d KV heads do not divide %d dimensions\n",
                s.n_head, s.n_head, s.n_head_kv, s.n_embd);
        return 2;
    }
#ifdef _OPENMP
    g.threads = override[OPT_THREADS] ? override[OPT_THREADS] : omp_get_num_procs();
#else
    g.threads = 1;
#endif
    g.shape = &s;
    /* at most 4 model-wide tensors and 12 per layer */
    g.tensors = calloc(4 + 12 * (size_t)s.n_layer, sizeof *g.tensors);
    if (!g.tensors) return 1;
    list_tensors(&g);

    struct quant_recipe recipe;
    hearth_gguf_writer *w = NULL;
    hearth_status st = quant_recipe_init(&recipe, ftype, s.n_layer, s.n_head / s.n_head_kv,
                                         !s.tied);
    if (!st) st = hearth_gguf_writer_new(&w);
    if (!st) st = set_metadata(w, &s, ftype, vocab_path);
    int64_t widest = 0;
    for (size_t i = 0; i < g.n_tensors && !st; i++) {
        struct gen_tensor *t = &g.tensors[i];
        int64_t ne4[4] = {t->ne[0], t->ne[1], 1, 1};
        hearth_type chosen;
        t->type = quant_recipe_type(&recipe, t->name, t->n_dims, ne4, HEARTH_TYPE_F32, &chosen);
        if (t->type != chosen)
            fprintf(stderr, "gen-model: %s: rows of %lld do not fill %s blocks; using %s\n",
                    t->name, (long long)t->ne[0], hearth_type_name(chosen),
                    hearth_type_name(t->type));
        size_t bytes = hearth_type_row_bytes(t->type, t->ne[0]) * (size_t)t->ne[1];
        st = hearth_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, NULL, bytes);
        widest = HEARTH_MAX(widest, t->ne[0]);
    }
    if (!st) {
        g.scratch_row = widest;
        g.scratch = calloc((size_t)g.threads * (size_t)widest, sizeof *g.scratch);
        if (!g.scratch) st = HEARTH_E_NOMEM;
    }
    if (!st) st = gguf_writer_write_streaming(w, out_path, fill_tensor, &g);
    hearth_gguf_writer_free(w);
    free(g.scratch);
    free(g.tensors);
    if (st) {
        fprintf(stderr, "gen-model: %s\n", hearth_last_error());
        return 1;
    }
    fprintf(stderr, "gen-model: wrote %s (%s, %s)\n", out_path, s.name, hearth_ftype_name(ftype));
    return 0;
}

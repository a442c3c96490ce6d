/*
 * maskbench.c -- the cost of grammar token masks per token.
 *
 *   tools/maskbench VOCAB.gguf [GENERATIONS] [STEPS]
 *
 * For each of a few JSON-schema grammars (and JSON mode), compiles the
 * grammar for the vocabulary (reported separately), then walks
 * GENERATIONS seeded random generations of at most STEPS tokens: at each
 * step the mask is computed (timed) and a token drawn uniformly from the
 * allowed ones is accepted.  Three passes: "cold" (the mask cache starts
 * empty, so first visits of grammar states fill it), "repeat" (the same
 * generations again: every state cached) and "fresh" (new seeds over the
 * now warm cache, as later requests with the same grammar see it).
 * Each pass prints the median, p99 and maximum microseconds per token.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar.h"

static const char *const schemas[] = {
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\","
    "\"minimum\":0,\"maximum\":150},\"email\":{\"type\":\"string\",\"format\":\"email\"},\"tags\":{\"type\":"
    "\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":5},\"active\":{\"type\":\"boolean\"}},"
    "\"required\":[\"name\",\"age\"]}",
    "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\",\"format\":\"uuid\"},\"created\":{\"type\":"
    "\"string\",\"format\":\"date-time\"},\"items\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
    "\"properties\":{\"sku\":{\"type\":\"string\",\"pattern\":\"^[A-Z]{3}-[0-9]{4}$\"},\"qty\":{\"type\":"
    "\"integer\",\"minimum\":1},\"price\":{\"type\":\"number\"},\"note\":{\"type\":[\"string\",\"null\"]}},"
    "\"required\":[\"sku\",\"qty\",\"price\"]}},\"status\":{\"enum\":[\"open\",\"paid\",\"shipped\"]}},"
    "\"required\":[\"id\",\"items\",\"status\"]}",
    NULL, /* JSON mode */
};

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* One pass: generations seeds first .. first + n - 1. */
static void run_pass(const char *name, hearth_grammar *g, const void *unused,
                     uint64_t first, int n, int steps, int32_t n_tokens, const hearth_vocab *vocab)
{
    (void)unused;
    double *t = malloc((size_t)n * (size_t)steps * sizeof *t);
    size_t nt = 0;
    for (int k = 0; k < n; k++) {
        struct grammar_matcher *m;
        if (grammar_matcher_new(g, &m)) {
            fprintf(stderr, "maskbench: %s\n", hearth_last_error());
            exit(1);
        }
        uint64_t rng = first + (uint64_t)k;
        for (int s = 0; s < steps && !grammar_matcher_done(m); s++) {
            const uint64_t *mask;
            double t0 = now_us();
            if (grammar_matcher_mask(m, &mask)) {
                fprintf(stderr, "maskbench: %s\n", hearth_last_error());
                exit(1);
            }
            t[nt++] = now_us() - t0;
            /* a random allowed token that is not end-of-generation */
            int32_t count = 0;
            for (int32_t i = 0; i < n_tokens; i++)
                if (((mask[i >> 6] >> (i & 63)) & 1) && !hearth_vocab_is_eog(vocab, i)) count++;
            if (count == 0) break;
            int32_t pick = (int32_t)(splitmix(&rng) % (uint64_t)count), tok = -1;
            for (int32_t i = 0; i < n_tokens && tok < 0; i++)
                if (((mask[i >> 6] >> (i & 63)) & 1) && !hearth_vocab_is_eog(vocab, i) && pick-- == 0)
                    tok = i;
            if (grammar_matcher_accept(m, tok)) {
                fprintf(stderr, "maskbench: %s\n", hearth_last_error());
                exit(1);
            }
        }
        grammar_matcher_free(m);
    }
    qsort(t, nt, sizeof *t, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < nt; i++) sum += t[i];
    printf("  %-7s %6zu tokens: median %8.1f us  p99 %8.1f us  max %9.1f us  mean %8.1f us\n", name, nt,
           nt ? t[nt / 2] : 0.0, nt ? t[(size_t)((double)nt * 0.99)] : 0.0, nt ? t[nt - 1] : 0.0,
           nt ? sum / (double)nt : 0.0);
    free(t);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: maskbench VOCAB.gguf [GENERATIONS] [STEPS]\n");
        return 2;
    }
    int n = argc > 2 ? atoi(argv[2]) : 20, steps = argc > 3 ? atoi(argv[3]) : 200;
    hearth_gguf *gguf;
    hearth_vocab *vocab;
    if (hearth_gguf_open(argv[1], &gguf) || hearth_vocab_load(gguf, NULL, &vocab)) {
        fprintf(stderr, "maskbench: %s\n", hearth_last_error());
        return 1;
    }
    hearth_gguf_close(gguf);
    int32_t n_tokens = hearth_vocab_n_tokens(vocab);
    printf("%s: %d tokens, %d generations of at most %d tokens per pass\n", argv[1], n_tokens, n, steps);
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(schemas); i++) {
        hearth_grammar *g;
        double t0 = now_us();
        hearth_status st = schemas[i] ? hearth_grammar_from_json_schema(vocab, schemas[i], strlen(schemas[i]), &g)
                                      : hearth_grammar_json_object(vocab, &g);
        double compile_ms = (now_us() - t0) / 1e3;
        if (st) {
            fprintf(stderr, "maskbench: %s\n", hearth_last_error());
            return 1;
        }
        hearth_grammar_stats gs;
        hearth_grammar_get_stats(g, &gs);
        printf("%s: %d rules, %d positions, compile %.1f ms\n", schemas[i] ? (i == 0 ? "person schema" : "order schema") : "JSON mode",
               gs.n_rules, gs.n_positions, compile_ms);
        double c0 = now_us();
        run_pass("cold", g, NULL, 1, n, steps, n_tokens, vocab);
        double cold_s = (now_us() - c0) / 1e6;
        hearth_grammar_get_stats(g, &gs);
        printf("  cache after the cold pass: %d states, %.1f MiB, pass %.2f s\n", gs.n_cached_states,
               (double)gs.cache_bytes / 1048576.0, cold_s);
        run_pass("repeat", g, NULL, 1, n, steps, n_tokens, vocab);
        run_pass("fresh", g, NULL, 1000, n, steps, n_tokens, vocab);
        hearth_grammar_get_stats(g, &gs);
        printf("  cache at the end: %d states, %.1f MiB\n", gs.n_cached_states,
               (double)gs.cache_bytes / 1048576.0);
        hearth_grammar_free(g);
    }
    hearth_vocab_free(vocab);
    return 0;
}

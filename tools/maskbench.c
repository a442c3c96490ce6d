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
 * A fourth pass, "closing", compiles the grammar again (an empty cache)
 * and draws half of the tokens from the allowed ones that hold a quote,
 * a bracket, a brace, a comma or a colon, so strings stay short and most
 * generations run to the end of the grammar, through more states per
 * token than the uniform draw.  Every mask is timed, the first visits of
 * states included; each pass prints the median, p99 and maximum
 * microseconds per token, and how many generations the grammar
 * completed.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar.h"
#include "benchutil.h"

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

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Whether token i holds a byte of JSON's structure. */
static bool structural(const hearth_vocab *vocab, int32_t i)
{
    size_t len;
    const char *p = hearth_token_piece(vocab, i, 0, &len);
    for (size_t k = 0; p && k < len; k++)
        if (p[k] && strchr("\"{}[],:", p[k])) return true;
    return false;
}

/* One pass: generations seeds first .. first + n - 1; `closing` draws
 * half of the tokens from the structural ones (is_struct). */
static void run_pass(const char *name, hearth_grammar *g, const uint8_t *is_struct, bool closing,
                     uint64_t first, int n, int steps, int32_t n_tokens, const hearth_vocab *vocab)
{
    double *t = malloc((size_t)n * (size_t)steps * sizeof *t);
    size_t nt = 0;
    int completed = 0;
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
            int32_t count = 0, count_struct = 0;
            for (int32_t i = 0; i < n_tokens; i++)
                if (((mask[i >> 6] >> (i & 63)) & 1) && !hearth_vocab_is_eog(vocab, i)) {
                    count++;
                    count_struct += is_struct[i];
                }
            if (count == 0) break;
            const bool from_struct = closing && count_struct > 0 && (splitmix(&rng) & 1);
            int32_t pick = (int32_t)(splitmix(&rng) % (uint64_t)(from_struct ? count_struct : count));
            int32_t tok = -1;
            for (int32_t i = 0; i < n_tokens && tok < 0; i++)
                if (((mask[i >> 6] >> (i & 63)) & 1) && !hearth_vocab_is_eog(vocab, i) &&
                    (!from_struct || is_struct[i]) && pick-- == 0)
                    tok = i;
            if (grammar_matcher_accept(m, tok)) {
                fprintf(stderr, "maskbench: %s\n", hearth_last_error());
                exit(1);
            }
        }
        completed += grammar_matcher_can_end(m);
        grammar_matcher_free(m);
    }
    qsort(t, nt, sizeof *t, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < nt; i++) sum += t[i];
    printf("  %-7s %6zu tokens: median %8.1f us  p99 %8.1f us  max %9.1f us  mean %8.1f us  (%d/%d complete)\n",
           name, nt, nt ? t[nt / 2] : 0.0, nt ? t[(size_t)((double)nt * 0.99)] : 0.0, nt ? t[nt - 1] : 0.0,
           nt ? sum / (double)nt : 0.0, completed, n);
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
    uint8_t *is_struct = malloc((size_t)n_tokens);
    for (int32_t i = 0; i < n_tokens; i++) is_struct[i] = structural(vocab, i);
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
        run_pass("cold", g, is_struct, false, 1, n, steps, n_tokens, vocab);
        double cold_s = (now_us() - c0) / 1e6;
        hearth_grammar_get_stats(g, &gs);
        printf("  cache after the cold pass: %d states, %.1f MiB, pass %.2f s\n", gs.n_cached_states,
               (double)gs.cache_bytes / 1048576.0, cold_s);
        run_pass("repeat", g, is_struct, false, 1, n, steps, n_tokens, vocab);
        run_pass("fresh", g, is_struct, false, 1000, n, steps, n_tokens, vocab);
        hearth_grammar_get_stats(g, &gs);
        printf("  cache at the end: %d states, %.1f MiB\n", gs.n_cached_states,
               (double)gs.cache_bytes / 1048576.0);
        hearth_grammar_free(g);
        /* again from an empty cache, with short strings */
        st = schemas[i] ? hearth_grammar_from_json_schema(vocab, schemas[i], strlen(schemas[i]), &g)
                        : hearth_grammar_json_object(vocab, &g);
        if (st) {
            fprintf(stderr, "maskbench: %s\n", hearth_last_error());
            return 1;
        }
        run_pass("closing", g, is_struct, true, 2000, n, steps, n_tokens, vocab);
        hearth_grammar_get_stats(g, &gs);
        printf("  cache after the closing pass: %d states, %.1f MiB\n", gs.n_cached_states,
               (double)gs.cache_bytes / 1048576.0);
        hearth_grammar_free(g);
    }
    free(is_struct);
    hearth_vocab_free(vocab);
    return 0;
}

/*
 * wkvbench.c -- the time the recurrent layers of an RWKV-6 model spend in
 * their recurrence (the CPU backend's wkv operation, simd/wkv.h) for one
 * prompt: token by token, and chunk-parallel for each chunk size, on the
 * threads given.  With the whole prefill's time from hearth bench, the
 * rest is the matrix products and the elementwise operations.  Not
 * installed: a benchmarking tool.
 *
 *   wkvbench [-n TOKENS] [-t THREADS] [-l LAYERS] [-H HEADS] [-N HEAD_SIZE]
 *            [-c C,...] [-r REPEATS]
 *
 * Defaults: the RWKV-6-World-1.6B shape (24 layers, 32 heads of 64), 512
 * tokens, 2 threads, C = 16,32,64,128,256; prints milliseconds per prompt
 * (all layers, median of the repeats) for each way.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "backend.h"
#include "rstate.h"
#include "benchutil.h"

int main(int argc, char **argv)
{
    int n = 512, threads = 2, layers = 24, H = 32, N = 64, reps = 3;
    const char *chunks = "16,32,64,128,256";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-l") && i + 1 < argc) layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-H") && i + 1 < argc) H = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-N") && i + 1 < argc) N = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-c") && i + 1 < argc) chunks = argv[++i];
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: wkvbench [-n TOKENS] [-t THREADS] [-l LAYERS] [-H HEADS] [-N HEAD_SIZE] "
                            "[-c C,...] [-r REPEATS]\n");
            return 2;
        }
    }
    if (n < 1 || threads < 1 || layers < 1 || H < 1 || N < 1 || reps < 1 || reps > 100) {
        fprintf(stderr, "wkvbench: sizes must be positive\n");
        return 2;
    }
    struct hearth_backend *be;
    struct rstate *rs;
    if (backend_cpu_new(threads, &be) || rstate_new(1, 1, (size_t)H * N * N, NULL, &rs)) {
        fprintf(stderr, "wkvbench: %s\n", hearth_last_error());
        return 1;
    }
    struct act r, k, v, lw, out;
    struct act *acts[] = {&r, &k, &v, &lw, &out};
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(acts); i++)
        if (be->ops->act_alloc(be, acts[i], n, (int64_t)H * N)) {
            fprintf(stderr, "wkvbench: %s\n", hearth_last_error());
            return 1;
        }
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (int64_t i = 0; i < (int64_t)n * H * N; i++) {
        float f[4];
        for (int j = 0; j < 4; j++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            f[j] = (float)((double)(x >> 11) * 0x1.0p-53 - 0.5);
        }
        r.host[i] = f[0];
        k.host[i] = f[1];
        v.host[i] = f[2];
        lw.host[i] = -expf(-6.0f + 7.0f * (float)((i % N) + f[3]) / (float)N);
    }
    float *u = calloc((size_t)H * N, sizeof *u);
    int32_t *pos = malloc((size_t)n * sizeof *pos);
    if (!u || !pos) return 1;
    for (int i = 0; i < n; i++) pos[i] = i;
    const int32_t seq_start[2] = {0, n};
    double *t = malloc((size_t)reps * sizeof *t);
    if (!t) return 1;
    printf("wkvbench: %d tokens, %d layers x %d heads of %d, %d threads (ms per prompt, median of %d)\n", n,
           layers, H, N, threads, reps);
    /* C = 0: token by token, one step per token as decode runs it */
    char list[256];
    snprintf(list, sizeof list, "0,%s", chunks);
    for (char *p = list; p && *p;) {
        const int C = atoi(p);
        p = strchr(p, ',');
        if (p) p++;
        for (int rep = 0; rep < reps; rep++) {
            const double t0 = now_s();
            for (int il = 0; il < layers; il++) {
                if (C == 0) {
                    for (int tok = 0; tok < n; tok++) {
                        struct act r1 = r, k1 = k, v1 = v, l1 = lw, o1 = out;
                        const int64_t off = (int64_t)tok * H * N;
                        r1.host += off, k1.host += off, v1.host += off, l1.host += off, o1.host += off;
                        r1.rows = k1.rows = v1.rows = l1.rows = o1.rows = 1;
                        const int32_t ss[2] = {0, 1};
                        struct batch_pos bp = {.pos = pos + tok, .n_tokens = 1, .n_seqs = 1, .seq_start = ss};
                        be->ops->wkv(be, &o1, &r1, &k1, &v1, &l1, u, 1.0f, H, H, N, rs, 0, 1, &bp);
                    }
                } else {
                    struct batch_pos bp = {.pos = pos, .n_tokens = n, .n_seqs = 1, .seq_start = seq_start};
                    be->ops->wkv(be, &out, &r, &k, &v, &lw, u, 1.0f, H, H, N, rs, 0, C, &bp);
                }
            }
            t[rep] = (now_s() - t0) * 1e3;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp_double);
        if (C == 0) printf("  token by token   %10.2f ms\n", t[reps / 2]);
        else printf("  chunks of %-4d   %10.2f ms\n", C, t[reps / 2]);
    }
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(acts); i++) be->ops->act_free(be, acts[i]);
    rstate_free(rs);
    backend_cpu_free(be);
    free(u);
    free(pos);
    free(t);
    return 0;
}

/*
 * membw.c -- streaming-read memory bandwidth: the speed limit of decoding,
 * which reads every weight once per generated token, so that tokens/s can
 * be no more than bandwidth / bytes of weights.
 *
 * A buffer much larger than the caches is read from start to end by each
 * of the threads in turn (a contiguous share each), summing its words so
 * the reads cannot be optimised away; the best of several passes is
 * reported, as the least disturbed by other work on the machine.  Reads
 * are 256-bit vector loads where the processor has AVX2, as the kernels'
 * are.  Not installed: a benchmarking tool.
 *
 *   membw [-s MIB] [-r PASSES] [-t THREADS,...]
 *
 * prints one line per thread count: "threads N: X.XX GB/s" (10^9 bytes).
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "benchutil.h"

/* Sum n words with eight independent accumulators, so the loop is bound
 * by loads rather than by the addition chain. */
static uint64_t sum_words(const uint64_t *p, size_t n)
{
    uint64_t s[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) s[k] += p[i + k];
    for (; i < n; i++) s[0] += p[i];
    return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_WIDE_SUM 1
/* The same sum with 256-bit loads, four independent vector accumulators:
 * scalar loads alone cannot keep enough reads in flight to reach what the
 * memory delivers to a core, so the scalar loop under-measures (the
 * matrix kernels read with vector loads too).  Used when the processor
 * has AVX2. */
__attribute__((target("avx2"))) static uint64_t sum_words_avx2(const uint64_t *p, size_t n)
{
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_add_epi64(s0, _mm256_loadu_si256((const __m256i *)(p + i)));
        s1 = _mm256_add_epi64(s1, _mm256_loadu_si256((const __m256i *)(p + i + 4)));
        s2 = _mm256_add_epi64(s2, _mm256_loadu_si256((const __m256i *)(p + i + 8)));
        s3 = _mm256_add_epi64(s3, _mm256_loadu_si256((const __m256i *)(p + i + 12)));
    }
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes,
                        _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3)));
    uint64_t s = lanes[0] + lanes[1] + lanes[2] + lanes[3];
    for (; i < n; i++) s += p[i];
    return s;
}
#endif

static uint64_t sum_any(const uint64_t *p, size_t n)
{
#ifdef HAVE_WIDE_SUM
    if (__builtin_cpu_supports("avx2")) return sum_words_avx2(p, n);
#endif
    return sum_words(p, n);
}

static int parse_int(const char *arg, int min, int max, const char *what)
{
    char *end;
    long v = strtol(arg, &end, 10);
    if (end == arg || (*end && *end != ',') || v < min || v > max) {
        fprintf(stderr, "membw: %s: expected an integer from %d to %d, got '%s'\n", what, min,
                max, arg);
        exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv)
{
    size_t mib = 1024;
    int passes = 10;
    int threads[16], n_threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-s") == 0 && i + 1 < argc) {
            mib = (size_t)parse_int(argv[++i], 16, 1 << 20, "-s");
        } else if (strcmp(a, "-r") == 0 && i + 1 < argc) {
            passes = parse_int(argv[++i], 1, 1000, "-r");
        } else if (strcmp(a, "-t") == 0 && i + 1 < argc) {
            for (const char *p = argv[++i]; p && n_threads < 16; p = strchr(p, ',')) {
                if (*p == ',') p++;
                threads[n_threads++] = parse_int(p, 1, 1024, "-t");
            }
        } else {
            fprintf(stderr, "usage: membw [-s MIB] [-r PASSES] [-t THREADS,...]\n");
            return 2;
        }
    }
    if (n_threads == 0) {
#ifdef _OPENMP
        threads[n_threads++] = 1;
        if (omp_get_num_procs() > 1) threads[n_threads++] = omp_get_num_procs();
#else
        threads[n_threads++] = 1;
#endif
    }
    const size_t n = mib * (1u << 20) / sizeof(uint64_t);
    uint64_t *buf = malloc(n * sizeof *buf);
    if (!buf) {
        fprintf(stderr, "membw: cannot allocate %zu MiB\n", mib);
        return 1;
    }
    /* Touch every page so the passes measure reads, not page faults. */
    for (size_t i = 0; i < n; i++) buf[i] = i;

    uint64_t check = 0;
    for (int t = 0; t < n_threads; t++) {
        double best = 1e30;
        for (int pass = 0; pass < passes; pass++) {
            double t0 = now_s();
            uint64_t total = 0;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads[t]) reduction(+ : total)
            {
                const size_t nt = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num();
                const size_t lo = n * id / nt, hi = n * (id + 1) / nt;
                total += sum_any(buf + lo, hi - lo);
            }
#else
            total = sum_any(buf, n);
#endif
            double dt = now_s() - t0;
            check += total;
            if (dt < best) best = dt;
        }
        printf("threads %d: %.2f GB/s\n", threads[t], (double)(n * sizeof *buf) / best / 1e9);
    }
    free(buf);
    /* The sums are printed only on request, but computed always. */
    if (getenv("MEMBW_SHOW_SUM")) fprintf(stderr, "membw: checksum %llu\n", (unsigned long long)check);
    return 0;
}

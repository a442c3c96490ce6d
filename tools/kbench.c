/*
 * kbench.c -- the speed of one thread's matrix-vector product (decode's
 * kernel) per weight type and instruction-set path, in bytes of weights
 * read per second: once with the matrix in the core's cache, where the
 * figure is the kernel's arithmetic limit, and once streaming a matrix
 * far larger than the caches, where it meets the memory.  A kernel whose
 * cached figure is not well above the memory's cannot keep decoding at
 * bandwidth.  Not installed: a benchmarking tool.
 *
 *   kbench [-p PATH,...] [-T TYPE,...] [-n N] [-k TOKENS] [-s MIB] [-r SECONDS]
 *   kbench --peak [-r SECONDS]
 *
 * prints one line per path and type: the cached and the streamed GB/s
 * (10^9 bytes) of the packed kernel where the type has one, else of gemm,
 * and the cached figure as multiply-adds a second.  -k gives each product
 * that many tokens (default 1, decode; 8 is a step of eight sequences,
 * larger numbers prefill's tiles).  --peak instead measures one core's
 * throughput of float FMAs and of int8 dot products in 256- and 512-bit
 * registers (x86-64), the limits that products of many tokens meet.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "model.h"
#include "quantize.h"
#include "kernels.h"
#include "benchutil.h"

/* A matrix of the type, rows x n, laid out as the engine reads it. */
struct matrix {
    void *data;
    size_t bytes;
    bool packed;
};

static bool make_matrix(const hearth_kernels *k, hearth_type t, int64_t rows, int64_t n, struct matrix *m)
{
    float *src = malloc((size_t)rows * (size_t)n * sizeof(float));
    const size_t row_bytes = hearth_type_row_bytes(t, n);
    void *q = malloc(row_bytes * (size_t)rows);
    if (!src || !q) {
        free(src);
        free(q);
        return false;
    }
    for (int64_t i = 0; i < rows * n; i++) src[i] = rand_unit();
    if (quant_convert_rows(HEARTH_TYPE_F32, src, t, q, n, rows, 1) != HEARTH_OK) {
        free(src);
        free(q);
        return false;
    }
    free(src);
    m->packed = hearth_kernels_read_packed(k, t, rows, n);
    if (m->packed) {
        m->bytes = hearth_packed_bytes(t, rows, n);
        m->data = model_packed_alloc(m->bytes); /* as a model holds them */
        if (!m->data) {
            free(q);
            return false;
        }
        hearth_pack_rows(t, q, row_bytes, rows, n, m->data);
        free(q);
    } else {
        m->bytes = row_bytes * (size_t)rows;
        m->data = q;
    }
    return true;
}

static void free_matrix(struct matrix *m)
{
    if (m->packed)
        hearth_aligned_free(m->data);
    else
        free(m->data);
}

/* GB/s of one thread multiplying the n_mat matrices in turn by x, for at
 * least secs seconds; the best of three tries. */
static double rate(const hearth_kernels *k, hearth_type t, const struct matrix *mats, int n_mat, int64_t rows,
                   int64_t n, int64_t n_tok, const void *x, size_t xs, const int32_t *sums, float *y,
                   double secs)
{
    double best = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        double bytes = 0, t0 = now_s(), el;
        do {
            for (int i = 0; i < n_mat; i++) {
                if (mats[i].packed)
                    k->gemm_packed[t](n, rows, n_tok, mats[i].data, x, xs, sums, y, rows);
                else
                    k->gemm[t](n, rows, n_tok, mats[i].data, hearth_type_row_bytes(t, n), x, xs, y, rows);
                bytes += (double)mats[i].bytes;
            }
            el = now_s() - t0;
        } while (el < secs / 3);
        if (bytes / el > best) best = bytes / el;
    }
    return best * 1e-9;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* One core's peak of 256-bit byte dot products (vpdpbusd: 32 multiply-adds
 * each) and of 256-bit float FMAs (8 each): a burst runs twelve
 * independent chains, so that the figure is the instructions' throughput,
 * not their latency, and returns the multiply-adds it did. */
__attribute__((target("avx512f,avx512vl,avx512vnni"))) static double burst_vnni(void)
{
    __m256i a[12];
    const __m256i u = _mm256_set1_epi8(3), v = _mm256_set1_epi8(-2);
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_epi32(i);
    for (int r = 0; r < 100000; r++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm256_dpbusd_epi32(a[i], u, v);
    }
    volatile int sink = 0;
    for (int i = 0; i < 12; i++) sink += _mm256_extract_epi32(a[i], 0);
    (void)sink;
    return 100000.0 * 12 * 32;
}

/* The same in 512-bit registers (64 multiply-adds each), as the
 * sixteen-row pair tiles run. */
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static double burst_vnni512(void)
{
    __m512i a[12];
    const __m512i u = _mm512_set1_epi8(3), v = _mm512_set1_epi8(-2);
    for (int i = 0; i < 12; i++) a[i] = _mm512_set1_epi32(i);
    for (int r = 0; r < 100000; r++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm512_dpbusd_epi32(a[i], u, v);
    }
    volatile int sink = 0;
    for (int i = 0; i < 12; i++) sink += _mm_cvtsi128_si32(_mm512_castsi512_si128(a[i]));
    (void)sink;
    return 100000.0 * 12 * 64;
}

__attribute__((target("avx2,fma"))) static double burst_fma(void)
{
    __m256 a[12];
    const __m256 u = _mm256_set1_ps(0.999f), v = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
    for (int r = 0; r < 100000; r++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], u, v);
    }
    volatile float sink = 0;
    for (int i = 0; i < 12; i++) sink += _mm256_cvtss_f32(a[i]);
    (void)sink;
    return 100000.0 * 12 * 8;
}

/* Multiply-adds a second of bursts run for secs seconds. */
static double burst_rate(double (*burst)(void), double secs)
{
    double n = 0, t0 = now_s(), el;
    do {
        n += burst();
        el = now_s() - t0;
    } while (el < secs);
    return n / el;
}

static int peak(double secs)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        printf("peak  float FMA (256-bit)       %7.1f G mul-add/s\n", burst_rate(burst_fma, secs) * 1e-9);
    if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl"))
        printf("peak  int8 vpdpbusd (256-bit)   %7.1f G mul-add/s\n", burst_rate(burst_vnni, secs) * 1e-9);
    if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw"))
        printf("peak  int8 vpdpbusd (512-bit)   %7.1f G mul-add/s\n", burst_rate(burst_vnni512, secs) * 1e-9);
    return 0;
}
#else
static int peak(double secs)
{
    (void)secs;
    fprintf(stderr, "kbench: --peak measures x86-64 instructions only\n");
    return 1;
}
#endif

/* Whether name is one of the comma-separated list's items ("avx512" is
 * not "avx512vnni"). */
static bool listed(const char *list, const char *name)
{
    const size_t len = strlen(name);
    for (const char *item = list; item; item = strchr(item, ',') ? strchr(item, ',') + 1 : NULL)
        if (strncmp(item, name, len) == 0 && (item[len] == ',' || item[len] == '\0')) return true;
    return false;
}

int main(int argc, char **argv)
{
    const char *paths = NULL, *types = "q4_0,q8_0,q4_k,q6_k";
    int64_t n = 2048, n_tok = 1;
    bool do_peak = false;
    double mib = 256, secs = 1.5;
    int status = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-p") && i + 1 < argc) paths = argv[++i];
        else if (!strcmp(argv[i], "-T") && i + 1 < argc) types = argv[++i];
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atoll(argv[++i]);
        else if (!strcmp(argv[i], "-k") && i + 1 < argc) n_tok = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--peak")) do_peak = true;
        else if (!strcmp(argv[i], "-s") && i + 1 < argc) mib = atof(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) secs = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: kbench [-p PATH,...] [-T TYPE,...] [-n N] [-k TOKENS] [-s MIB] [-r SECONDS] [--peak]\n");
            return 2;
        }
    }
    if (n <= 0 || n % 256 != 0 || n_tok < 1 || n_tok > 4096 || mib <= 0 || secs <= 0) {
        fprintf(stderr, "kbench: -n must be a positive multiple of 256, -k from 1 to 4096, -s and -r positive\n");
        return 2;
    }
    if (do_peak) return peak(secs);
    for (int p = 0; p < KERNEL_PATH_COUNT; p++) {
        const char *pname = kernel_path_name((kernel_path)p);
        if (paths ? !listed(paths, pname) : p == KERNEL_PATH_SCALAR) continue;
        const hearth_kernels *k = kernel_path_table((kernel_path)p, NULL);
        if (!k) continue;
        char list[256];
        snprintf(list, sizeof list, "%s", types);
        for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
            hearth_type t;
            if (hearth_type_from_name(tok, &t) != HEARTH_OK || !hearth_kernels_supports(k, t)) {
                fprintf(stderr, "kbench: %s: no kernel for type %s\n", pname, tok);
                status = 1;
                continue;
            }
            const hearth_type at = k->act_type[t];
            const size_t xs = hearth_type_row_bytes(at, n);
            float *xf = malloc((size_t)n * sizeof(float));
            void *x = malloc(xs * (size_t)n_tok);
            int32_t *sums = malloc((size_t)(n / 32 * n_tok) * sizeof(int32_t));
            const int64_t hot_rows = 64, rows = 4096;
            float *y = malloc((size_t)(rows * n_tok) * sizeof(float));
            struct matrix hot;
            if (!xf || !x || !sums || !y || !make_matrix(k, t, hot_rows, n, &hot)) {
                fprintf(stderr, "kbench: out of memory\n");
                return 1;
            }
            for (int64_t tk = 0; tk < n_tok; tk++) {
                for (int64_t i = 0; i < n; i++) xf[i] = rand_unit();
                uint8_t *xt = (uint8_t *)x + (size_t)tk * xs;
                k->act_convert[at](xf, xt, n);
                if (at == HEARTH_TYPE_Q8_0) hearth_q8_0_block_sums(xt, n / 32, sums + tk * (n / 32));
            }
            const double r_hot = rate(k, t, &hot, 1, hot_rows, n, n_tok, x, xs, sums, y, secs);
            const int n_cold = (int)(mib * 1048576.0 / (double)(hot.bytes / hot_rows * rows)) + 1;
            struct matrix *cold = calloc((size_t)n_cold, sizeof *cold);
            int made = 0;
            while (cold && made < n_cold && make_matrix(k, t, rows, n, &cold[made])) made++;
            if (made < n_cold) {
                fprintf(stderr, "kbench: out of memory for %.0f MiB of matrices\n", mib);
                return 1;
            }
            const double r_cold = rate(k, t, cold, n_cold, rows, n, n_tok, x, xs, sums, y, secs);
            /* multiply-adds: bytes of weights x weights a byte x tokens */
            const double macs = r_hot * (double)(hot_rows * n) / (double)hot.bytes * (double)n_tok;
            printf("%-13s %-5s %s  cached %6.1f GB/s (%6.1f G mul-add/s)  streamed %6.1f GB/s\n", pname,
                   hearth_type_name(t), hot.packed ? "packed" : "rows  ", r_hot, macs, r_cold);
            fflush(stdout);
            for (int i = 0; i < n_cold; i++) free_matrix(&cold[i]);
            free(cold);
            free_matrix(&hot);
            free(xf);
            free(x);
            free(sums);
            free(y);
        }
    }
    return status;
}

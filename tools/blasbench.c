/*
 * blasbench.c -- hearth's own float matrix products against OpenBLAS's
 * cblas_sgemm, on the shapes the engine runs in prefill, at given thread
 * counts: the measurement behind DESIGN.md's "OpenBLAS" (which products,
 * if any, go to it).  Not installed: a benchmarking tool, built where
 * configure finds OpenBLAS.
 *
 *   blasbench [-T TYPE,...] [-k TOKENS,...] [-t THREADS,...] [-r SECONDS] [-s SHAPES]
 *
 * For each weight type (F32, F16, BF16), shape (rows x columns of the
 * weight) and token count, prints the G multiply-adds a second of
 *   hearth  the CPU backend's matmul, as the engine calls it (its
 *           threads, its tiles, F16/BF16 read as stored);
 *   sgemm   cblas_sgemm on an F32 copy of the weight made once before
 *           timing (what a second, F32 copy of every float matrix would
 *           give: memory the engine does not spend);
 *   sgemm+c the same with the weight converted to F32 in every product
 *           (what routing a product to OpenBLAS costs without that
 *           copy; F16 and BF16 only),
 * each the median of the runs that fit in -r seconds (default 0.5).  The
 * shapes, "NAME:ROWSxCOLS,...", default to a TinyLlama-1.1B layer's
 * (q/o 2048x2048, k/v 256x2048, gate/up 5632x2048, down 2048x5632) and an
 * attention score product of a 4096-token context (4096x64: one head's
 * keys against its queries).
 */
#include "config.h"

#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "backend.h"
#include "model.h"
#include "quant.h"
#include "benchutil.h"

/* OpenBLAS's own thread control (openblas_config.h declares it). */
void openblas_set_num_threads(int n);

struct shape {
    char name[32];
    int64_t rows, cols;
};

#define MAX_LIST 16

/* Runs fn(arg) for about `seconds` (at least 3 runs, at most 200) and
 * returns the median seconds of one run. */
static double median_run(void (*fn)(void *), void *arg, double seconds)
{
    double t[200];
    int n = 0;
    fn(arg); /* warm-up: pages, caches, thread start */
    const double t_end = now_s() + seconds;
    while (n < 200 && (n < 3 || now_s() < t_end)) {
        const double t0 = now_s();
        fn(arg);
        t[n++] = now_s() - t0;
    }
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    return t[n / 2];
}

struct job {
    struct hearth_backend *be;
    const struct weight *w;
    struct act *in, *out;
    const float *wf;     /* F32 copy of the weight */
    float *wconv;        /* scratch for the converted weight */
    const float *x;
    float *y;
    int64_t rows, cols, tok;
    hearth_type type;
    int status;
};

static void run_hearth(void *arg)
{
    struct job *j = arg;
    if (j->be->ops->matmul(j->be, j->out, j->w, j->in) != HEARTH_OK) j->status = 1;
}

/* y[tok][rows] = x[tok][cols] . W[rows][cols]^T */
static void run_sgemm(void *arg)
{
    struct job *j = arg;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)j->tok, (int)j->rows, (int)j->cols, 1.0f, j->x,
                (int)j->cols, j->wf, (int)j->cols, 0.0f, j->y, (int)j->rows);
}

static void run_sgemm_convert(void *arg)
{
    struct job *j = arg;
    const size_t row_bytes = hearth_type_row_bytes(j->type, j->cols);
    for (int64_t r = 0; r < j->rows; r++) {
        const void *src = (const uint8_t *)j->w->data + (size_t)r * row_bytes;
        if (j->type == HEARTH_TYPE_F16) f16_dequantize_row(src, j->wconv + r * j->cols, j->cols);
        else bf16_dequantize_row(src, j->wconv + r * j->cols, j->cols);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)j->tok, (int)j->rows, (int)j->cols, 1.0f, j->x,
                (int)j->cols, j->wconv, (int)j->cols, 0.0f, j->y, (int)j->rows);
}

static int parse_list(const char *s, int *v)
{
    int n = 0;
    while (*s && n < MAX_LIST) {
        char *end;
        long x = strtol(s, &end, 10);
        if (end == s || x < 1 || x > 65536) return -1;
        v[n++] = (int)x;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

static int parse_shapes(const char *s, struct shape *v)
{
    int n = 0;
    while (*s && n < MAX_LIST) {
        const char *colon = strchr(s, ':');
        if (!colon || colon == s || (size_t)(colon - s) >= sizeof v[n].name) return -1;
        memcpy(v[n].name, s, (size_t)(colon - s));
        v[n].name[colon - s] = '\0';
        char *end;
        v[n].rows = strtoll(colon + 1, &end, 10);
        if (*end != 'x' || v[n].rows < 1) return -1;
        v[n].cols = strtoll(end + 1, &end, 10);
        if (v[n].cols < 1 || (*end && *end != ',')) return -1;
        n++;
        s = *end ? end + 1 : end;
    }
    return n;
}

static void usage(FILE *out)
{
    fputs("usage: blasbench [-T TYPE,...] [-k TOKENS,...] [-t THREADS,...] [-r SECONDS] [-s NAME:RxC,...]\n",
          out);
}

int main(int argc, char **argv)
{
    hearth_type types[3] = {HEARTH_TYPE_F32, HEARTH_TYPE_F16, HEARTH_TYPE_BF16};
    int n_types = 3;
    int toks[MAX_LIST] = {1, 8, 32, 128, 512}, n_toks = 5;
    int threads[MAX_LIST] = {1, 2}, n_threads = 2;
    double seconds = 0.5;
    struct shape shapes[MAX_LIST] = {
        {"attn_q", 2048, 2048}, {"attn_k", 256, 2048}, {"ffn_up", 5632, 2048},
        {"ffn_down", 2048, 5632}, {"kq_4096", 4096, 64},
    };
    int n_shapes = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            usage(stderr);
            return 2;
        }
        i++;
        if (!strcmp(a, "-T")) {
            n_types = 0;
            char buf[256];
            snprintf(buf, sizeof buf, "%s", v);
            for (char *tok = strtok(buf, ","); tok && n_types < 3; tok = strtok(NULL, ",")) {
                hearth_type t;
                if (hearth_type_from_name(tok, &t) != HEARTH_OK ||
                    (t != HEARTH_TYPE_F32 && t != HEARTH_TYPE_F16 && t != HEARTH_TYPE_BF16)) {
                    fprintf(stderr, "blasbench: -T: %s is not F32, F16 or BF16\n", tok);
                    return 2;
                }
                types[n_types++] = t;
            }
        } else if (!strcmp(a, "-k")) {
            if ((n_toks = parse_list(v, toks)) <= 0) {
                fprintf(stderr, "blasbench: -k: a list of token counts, not '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "-t")) {
            if ((n_threads = parse_list(v, threads)) <= 0) {
                fprintf(stderr, "blasbench: -t: a list of thread counts, not '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "-r")) {
            seconds = strtod(v, NULL);
            if (!(seconds > 0 && seconds <= 60)) {
                fprintf(stderr, "blasbench: -r: seconds between 0 and 60, not '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "-s")) {
            if ((n_shapes = parse_shapes(v, shapes)) <= 0) {
                fprintf(stderr, "blasbench: -s: NAME:ROWSxCOLS,..., not '%s'\n", v);
                return 2;
            }
        } else {
            usage(stderr);
            return 2;
        }
    }

    printf("| type | shape | rows x cols | tokens | threads | hearth G/s | sgemm G/s | sgemm+c G/s | faster |\n");
    printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
    for (int si = 0; si < n_shapes; si++) {
        const struct shape *sh = &shapes[si];
        int max_tok = 0;
        for (int i = 0; i < n_toks; i++)
            if (toks[i] > max_tok) max_tok = toks[i];
        float *wf = malloc((size_t)(sh->rows * sh->cols) * sizeof(float));
        float *wconv = malloc((size_t)(sh->rows * sh->cols) * sizeof(float));
        float *x = malloc((size_t)(max_tok * sh->cols) * sizeof(float));
        float *y = malloc((size_t)(max_tok * sh->rows) * sizeof(float));
        if (!wf || !wconv || !x || !y) {
            fprintf(stderr, "blasbench: out of memory for %s\n", sh->name);
            return 1;
        }
        for (int64_t i = 0; i < sh->rows * sh->cols; i++) wf[i] = rand_unit() * 0.05f;
        for (int64_t i = 0; i < max_tok * sh->cols; i++) x[i] = rand_unit();
        for (int ti = 0; ti < n_types; ti++) {
            const hearth_type t = types[ti];
            const size_t row_bytes = hearth_type_row_bytes(t, sh->cols);
            uint8_t *wdata = malloc(row_bytes * (size_t)sh->rows);
            if (!wdata) {
                fprintf(stderr, "blasbench: out of memory for %s\n", sh->name);
                return 1;
            }
            for (int64_t r = 0; r < sh->rows; r++) {
                quant_quantize_row(t, wf + r * sh->cols, wdata + (size_t)r * row_bytes, sh->cols);
                /* the F32 copy holds what the stored weight holds */
                if (t == HEARTH_TYPE_F16) f16_dequantize_row((const void *)(wdata + (size_t)r * row_bytes),
                                                             wconv + r * sh->cols, sh->cols);
                else if (t == HEARTH_TYPE_BF16) bf16_dequantize_row((const void *)(wdata + (size_t)r * row_bytes),
                                                                   wconv + r * sh->cols, sh->cols);
                else memcpy(wconv + r * sh->cols, wf + r * sh->cols, (size_t)sh->cols * sizeof(float));
            }
            float *wcopy = malloc((size_t)(sh->rows * sh->cols) * sizeof(float));
            if (!wcopy) return 1;
            memcpy(wcopy, wconv, (size_t)(sh->rows * sh->cols) * sizeof(float));
            struct weight w = {.name = sh->name, .type = t, .n_in = sh->cols, .n_out = sh->rows,
                               .row_bytes = row_bytes, .data = wdata};
            for (int hi = 0; hi < n_threads; hi++) {
                struct hearth_backend *be;
                if (backend_cpu_new(threads[hi], &be) != HEARTH_OK) {
                    fprintf(stderr, "blasbench: %s\n", hearth_last_error());
                    return 1;
                }
                openblas_set_num_threads(threads[hi]);
                for (int ki = 0; ki < n_toks; ki++) {
                    const int64_t tok = toks[ki];
                    struct act in, out;
                    if (be->ops->act_alloc(be, &in, tok, sh->cols) || be->ops->act_alloc(be, &out, tok, sh->rows) ||
                        be->ops->act_upload(be, &in, x, tok)) {
                        fprintf(stderr, "blasbench: %s\n", hearth_last_error());
                        return 1;
                    }
                    struct job j = {.be = be, .w = &w, .in = &in, .out = &out, .wf = wcopy, .wconv = wconv,
                                    .x = x, .y = y, .rows = sh->rows, .cols = sh->cols, .tok = tok, .type = t};
                    const double macs = (double)sh->rows * (double)sh->cols * (double)tok;
                    const double g_h = macs / median_run(run_hearth, &j, seconds) * 1e-9;
                    const double g_b = macs / median_run(run_sgemm, &j, seconds) * 1e-9;
                    double g_c = 0;
                    if (t != HEARTH_TYPE_F32) g_c = macs / median_run(run_sgemm_convert, &j, seconds) * 1e-9;
                    if (j.status) {
                        fprintf(stderr, "blasbench: matmul failed: %s\n", hearth_last_error());
                        return 1;
                    }
                    const double best_blas = t == HEARTH_TYPE_F32 ? g_b : g_c;
                    char conv[32] = "";
                    if (t != HEARTH_TYPE_F32) snprintf(conv, sizeof conv, "%.2f", g_c);
                    printf("| %s | %s | %lldx%lld | %lld | %d | %.2f | %.2f | %s | %s |\n", hearth_type_name(t),
                           sh->name, (long long)sh->rows, (long long)sh->cols, (long long)tok, threads[hi], g_h,
                           g_b, conv, best_blas > g_h ? "sgemm" : "hearth");
                    fflush(stdout);
                    be->ops->act_free(be, &in);
                    be->ops->act_free(be, &out);
                }
                backend_cpu_free(be);
            }
            free(wcopy);
            free(wdata);
        }
        free(wf);
        free(wconv);
        free(x);
        free(y);
    }
    return 0;
}

/*
 * testutil.c -- helpers shared by the Check unit tests.
 */
#include "config.h"

#include "testutil.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hearth.h"

const char *test_data_dir(void)
{
    static char dir[4096];
    const char *env = getenv("HEARTH_TEST_DATA");
    if (!env || !*env) {
        const char *src = getenv("HEARTH_SRCDIR");
        snprintf(dir, sizeof dir, "%s/../shared", src && *src ? src : ".");
    } else {
        snprintf(dir, sizeof dir, "%s", env);
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return NULL;
    return dir;
}

const char *test_data_path(const char *relative)
{
    static char path[4096];
    const char *dir = test_data_dir();
    if (!dir) return NULL;
    snprintf(path, sizeof path, "%s/%s", dir, relative);
    struct stat st;
    if (stat(path, &st) != 0) return NULL;
    return path;
}

bool test_require_data(void)
{
    if (test_data_dir()) return true;
    const char *ci = getenv("CI");
    if (ci && *ci) {
        ck_abort_msg("shared test data not found (HEARTH_TEST_DATA=%s) and CI is set",
                     getenv("HEARTH_TEST_DATA") ? getenv("HEARTH_TEST_DATA") : "(unset)");
    }
    fprintf(stderr, "note: shared test data not found; set HEARTH_TEST_DATA. Skipping.\n");
    return false;
}

void *test_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

char *test_read_file(const char *path, size_t *len_out)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    ck_assert_int_ge(size, 0);
    rewind(f);
    char *buf = malloc((size_t)size + 1);
    ck_assert_ptr_nonnull(buf);
    size_t got = fread(buf, 1, (size_t)size, f);
    fclose(f);
    ck_assert_uint_eq(got, (size_t)size);
    buf[size] = '\0';
    if (len_out) *len_out = (size_t)size;
    return buf;
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void test_rng_seed(test_rng *rng, uint64_t seed)
{
    /* splitmix64 expands the seed into the state */
    for (int i = 0; i < 4; i++) {
        uint64_t z = (seed += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        rng->s[i] = z ^ (z >> 31);
    }
}

uint64_t test_rng_next(test_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double test_rng_uniform(test_rng *rng)
{
    return (double)(test_rng_next(rng) >> 11) * 0x1.0p-53;
}

double test_rng_normal(test_rng *rng)
{
    double u1 = test_rng_uniform(rng), u2 = test_rng_uniform(rng);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

double test_rmse(const float *a, const float *b, size_t n)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        sum += d * d;
    }
    return n ? sqrt(sum / (double)n) : 0.0;
}

double test_rms(const float *a, size_t n)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += (double)a[i] * (double)a[i];
    return n ? sqrt(sum / (double)n) : 0.0;
}

int test_opencl_status(void)
{
#ifndef HAVE_OPENCL
    fprintf(stderr, "note: this build has no OpenCL support. Skipping.\n");
    return 77;
#else
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        hearth_device_info *list;
        int32_t n = 0;
        hearth_status st = hearth_devices(&list, &n);
        if (st == HEARTH_OK) hearth_devices_free(list);
        else fprintf(stderr, "note: %s\n", hearth_last_error());
        _exit(st == HEARTH_OK && n > 0 ? 0 : 1);
    }
    int status = 0;
    bool found = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
                 WEXITSTATUS(status) == 0;
    if (found) return 0;
    const char *ci = getenv("CI");
    if (ci && *ci) {
        fprintf(stderr, "FAIL: no OpenCL device, the build has OpenCL and CI is set\n");
        return 1;
    }
    fprintf(stderr, "note: no OpenCL device found. Skipping.\n");
    return 77;
#endif
}

int test_run_suite(Suite *suite)
{
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

hearth_model *test_load_model(const char *name)
{
    char rel[256];
    snprintf(rel, sizeof rel, "models/%s", name);
    const char *path = test_data_path(rel);
    ck_assert_msg(path != NULL, "missing %s", rel);
    hearth_model *m;
    hearth_status st = hearth_model_load(path, NULL, &m);
    ck_assert_msg(st == HEARTH_OK, "%s: %s", path, hearth_last_error());
    return m;
}

uint64_t test_fnv1a(const void *data, size_t n)
{
    const uint8_t *p = data;
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * UINT64_C(0x100000001b3);
    return h;
}

const char *test_temp_path(const char *stem)
{
    static char path[256];
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(path, sizeof path, "%s/hearth-%s-XXXXXX", dir, stem);
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    return path;
}

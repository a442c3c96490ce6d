/*
 * testutil.h -- helpers shared by the Check unit tests: where the shared
 * test data lives, reading files, random data, error measures.
 */
#ifndef HEARTH_TESTUTIL_H
#define HEARTH_TESTUTIL_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Check's assertions tell its runner the place of every one that passes
 * (a write to a file each time, which in the tests' inner loops was most
 * of their run time, many times more under the sanitizers); these say
 * nothing until one fails.  Every ck_assert_* comparison is built on
 * ck_assert_msg, so they all change with it. */
#undef ck_assert_msg
#define ck_assert_msg(expr, ...) \
    ((expr) ? (void)0 : _ck_assert_failed(__FILE__, __LINE__, "Assertion '" #expr "' failed", ##__VA_ARGS__))

/* 1 in a build with AddressSanitizer (configure --enable-sanitizers), where
 * code runs many times slower: a test that repeats the same host code over
 * many inputs (model files of every type) may run a subset there and say
 * so; the plain make check runs them all. */
#if defined(__SANITIZE_ADDRESS__)
#define TEST_UNDER_SANITIZERS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_UNDER_SANITIZERS 1
#endif
#endif
#ifndef TEST_UNDER_SANITIZERS
#define TEST_UNDER_SANITIZERS 0
#endif

/* The shared data directory ($HEARTH_TEST_DATA), or NULL when it is
 * missing.  The result is a static buffer. */
const char *test_data_dir(void);

/* Path of a file under the shared data directory, e.g.
 * test_data_path("models/stories260K.gguf").  Returns NULL when the data
 * directory or the file is missing.  The result is a static buffer that the
 * next call overwrites. */
const char *test_data_path(const char *relative);

/* Whether tests that need shared data should run.  Without the data this
 * prints a note and returns false -- unless CI is set in the environment,
 * in which case missing data is a failure (the calling test fails). */
bool test_require_data(void);

/* Load models/NAME from the test data with default parameters; the test
 * fails (naming the file and the error) when it is missing or refused.
 * Call after test_require_data(). */
struct hearth_model *test_load_model(const char *name);

/* malloc(n) (at least one byte), failing the test when memory runs out. */
void *test_malloc(size_t n);

/* Read a whole file into a NUL-terminated malloc'ed buffer (length in
 * *len_out); fails the test when it cannot. */
char *test_read_file(const char *path, size_t *len_out);

/* Deterministic pseudo-random numbers (xoshiro-style, seeded explicitly) so
 * every failure can be reproduced. */
typedef struct { uint64_t s[4]; } test_rng;
void test_rng_seed(test_rng *rng, uint64_t seed);
uint64_t test_rng_next(test_rng *rng);
/* Uniform in [0, 1). */
double test_rng_uniform(test_rng *rng);
/* Standard normal. */
double test_rng_normal(test_rng *rng);

/* Root-mean-square of a - b, and of a. */
double test_rmse(const float *a, const float *b, size_t n);
double test_rms(const float *a, size_t n);

/* A new empty file's path, $TMPDIR (or /tmp)/hearth-STEM-XXXXXX made by
 * mkstemp(); the buffer is the next call's too. */
const char *test_temp_path(const char *stem);

/* FNV-1a of n bytes: a fingerprint of a row of logits, to compare runs
 * bit for bit without keeping the rows. */
uint64_t test_fnv1a(const void *data, size_t n);

/* Whether the OpenCL tests can run: 0 when the build has OpenCL and a
 * device is present; otherwise 77 (skipped) after a note on stderr --
 * except that with CI set in the environment and OpenCL in the build, a
 * missing device is a failure (1).  The device is probed in a child
 * process, so that no OpenCL driver is loaded before Check forks. */
int test_opencl_status(void);

/* Run a Check suite and return the exit status for the test driver. */
int test_run_suite(Suite *suite);

#endif /* HEARTH_TESTUTIL_H */

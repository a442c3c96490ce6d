/*
 * benchutil.h -- what the benchmarking tools share: a monotonic clock in
 * seconds, a reproducible stream of numbers in [-1, 1) for their data, and
 * the order of doubles for qsort (medians).
 */
#ifndef HEARTH_TOOLS_BENCHUTIL_H
#define HEARTH_TOOLS_BENCHUTIL_H

#include <stdint.h>
#include <time.h>

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* xorshift64, the same sequence in every run */
static inline float rand_unit(void)
{
    static uint64_t state = 0x9e3779b97f4a7c15u;
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (float)((state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static inline int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#endif /* HEARTH_TOOLS_BENCHUTIL_H */

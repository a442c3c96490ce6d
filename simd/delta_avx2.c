/*
 * delta_avx2.c -- the gated delta rule's kernels (delta_impl.h) compiled
 * for AVX2 and FMA: the dot products' 16 partial sums and the state
 * updates along keys become 8-lane vector operations.  The AVX-512 paths
 * use these too.
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3", "vect-cost-model=dynamic")
#endif
#include "internal.h"

#include <stdbool.h>

#include "delta.h"

#define DELTA_NAME(x) delta_avx2_##x
#include "delta_impl.h"

const struct delta_kernels *delta_kernels_avx2(void)
{
    static const struct delta_kernels k = {"avx2", delta_avx2_recurrent, delta_avx2_chunked};
    return &k;
}

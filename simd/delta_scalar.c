/*
 * delta_scalar.c -- the gated delta rule's kernels (delta.h) for any
 * processor: the twin the vector paths are tested against.
 */
#include "internal.h"

#include <stdbool.h>

#include "delta.h"

int delta_inject_bug = 0;

#define DELTA_NAME(x) delta_scalar_##x
#include "delta_impl.h"

size_t delta_chunk_scratch_bytes(int32_t C, int32_t dk, int32_t rows)
{
    (void)dk;
    (void)rows;
    if (C < 1) C = 1;
    if (C > DELTA_CHUNK_MAX) C = DELTA_CHUNK_MAX;
    const size_t bytes = (size_t)C * sizeof(double) + (2 * (size_t)C * C + 3 * (size_t)C) * sizeof(float);
    return (bytes + 63) & ~(size_t)63;
}

const struct delta_kernels *delta_kernels_scalar(void)
{
    static const struct delta_kernels k = {"scalar", delta_scalar_recurrent, delta_scalar_chunked};
    return &k;
}

const struct delta_kernels *delta_kernels_matching(const hearth_kernels *k)
{
#if defined(HAVE_KERNELS_AVX2)
    if (kernel_table_is_avx2_family(k)) return delta_kernels_avx2();
#endif
    (void)k;
    return delta_kernels_scalar();
}

/*
 * wkv_scalar.c -- the WKV kernels (wkv.h) for any processor: the twin the
 * vector paths are tested against, and the choice of a path's table.
 */
#include "internal.h"

#include "wkv.h"

int wkv_inject_bug = 0;

#define WKV_NAME(x) wkv_scalar_##x
#include "wkv_impl.h"

size_t wkv_chunk_scratch_bytes(int32_t C, int32_t N)
{
    const size_t CN = (size_t)C * N;
    const size_t bytes = 2 * (size_t)(C + 1) * N * sizeof(double) + (6 * CN + (size_t)C * C + N) * sizeof(float);
    return (bytes + 63) & ~(size_t)63;
}

const struct wkv_kernels *wkv_kernels_scalar(void)
{
    static const struct wkv_kernels k = {"scalar", wkv_scalar_recurrent, wkv_scalar_chunked, wkv_scalar_map, wkv_scalar_lerp};
    return &k;
}

const struct wkv_kernels *wkv_kernels_matching(const hearth_kernels *k)
{
#if defined(HAVE_KERNELS_AVX2)
    if (kernel_table_is_avx2_family(k)) return wkv_kernels_avx2();
#endif
    (void)k;
    return wkv_kernels_scalar();
}

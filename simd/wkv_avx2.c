/*
 * wkv_avx2.c -- the WKV kernels (wkv_impl.h) compiled for AVX2 and FMA:
 * the inner loops along value columns and keys become 8-lane multiply-adds.
 * The AVX-512 paths use these too (the head sizes of real models, 64, fill
 * 8-lane vectors exactly).
 */
/* no-trapping-math lets the compiler turn the maps' selects (bounds,
 * NaN) into vector blends; it changes no value, only what may be assumed
 * about floating-point exceptions, which nothing here reads. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3", "vect-cost-model=dynamic", "no-trapping-math")
#endif
#include "internal.h"

#include "wkv.h"

#define WKV_NAME(x) wkv_avx2_##x
#define WKV_VECTOR 1
#include "wkv_impl.h"

const struct wkv_kernels *wkv_kernels_avx2(void)
{
    static const struct wkv_kernels k = {"avx2", wkv_avx2_recurrent, wkv_avx2_chunked, wkv_avx2_map, wkv_avx2_lerp};
    return &k;
}

/*
 * norm.cl -- RMS normalisation (Zhang and Sennrich 2019, eq. 4):
 *   y = x / sqrt(mean(x^2) + eps) * g
 * One work-group per row; in place (y == x) is allowed.  As on the CPU the
 * sum of squares and the scale are computed in double precision where the
 * device has it, then y = (x * scale) * g in float.
 */
#ifdef HAVE_FP64
typedef double norm_acc;
#else
typedef float norm_acc;
#endif

/* scratch: one norm_acc per item (the host passes 8 bytes per item). */
__kernel void rmsnorm(__global const float *x, __global float *y, __global const float *g, int n,
                      float eps, __local norm_acc *scratch)
{
    const size_t t = get_group_id(0);
    const uint lid = get_local_id(0), lsize = get_local_size(0);
    __global const float *xr = x + t * n;
    __global float *yr = y + t * n;
    norm_acc ss = 0;
    for (int i = lid; i < n; i += lsize) ss += (norm_acc)xr[i] * xr[i];
    scratch[lid] = ss;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint half_n = lsize / 2; half_n > 0; half_n /= 2) {
        if (lid < half_n) scratch[lid] += scratch[lid + half_n];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const norm_acc total = scratch[0];
#ifdef HAVE_FP64
    const float scale = (float)(1.0 / sqrt(total / (double)n + (double)eps));
#else
    const float scale = 1.0f / sqrt(total / (float)n + eps);
#endif
    for (int i = lid; i < n; i += lsize) yr[i] = xr[i] * scale * g[i];
}

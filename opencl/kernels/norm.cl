/*
 * norm.cl -- RMS normalisation (Zhang and Sennrich 2019, eq. 4):
 *   y = x / sqrt(mean(x^2) + eps) * g
 * One work-group per row; in place (y == x) is allowed.
 */
__kernel void rmsnorm(__global const float *x, __global float *y, __global const float *g, int n,
                      float eps, __local float *scratch)
{
    const size_t t = get_group_id(0);
    const uint lid = get_local_id(0), lsize = get_local_size(0);
    __global const float *xr = x + t * n;
    __global float *yr = y + t * n;
    float ss = 0.0f;
    for (int i = lid; i < n; i += lsize) ss += xr[i] * xr[i];
    ss = group_sum(ss, scratch);
#ifdef HAVE_FP64
    const float scale = (float)(1.0 / sqrt((double)ss / (double)n + (double)eps));
#else
    const float scale = 1.0f / sqrt(ss / (float)n + eps);
#endif
    for (int i = lid; i < n; i += lsize) yr[i] = xr[i] * scale * g[i];
}

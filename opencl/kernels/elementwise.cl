/*
 * elementwise.cl -- the residual add, bias add and SwiGLU of a layer
 * (Shazeer 2020, eq. 6: silu(x W) * (x V), silu(g) = g / (1 + e^-g)).
 * One item per element, n elements; the launch rounds up to whole
 * work-groups.
 */
__kernel void vec_add(__global float *out, __global const float *a, __global const float *b, int n)
{
    const int i = get_global_id(0);
    if (i < n) out[i] = a[i] + b[i];
}

__kernel void add_bias(__global float *x, __global const float *bias, int width, int n)
{
    const int i = get_global_id(0);
    if (i < n) x[i] += bias[i % width];
}

/* As the CPU computes it: the exponential and the quotient rounded
 * correctly to float (through double precision where the device has it). */
__kernel void swiglu(__global float *out, __global const float *gate, __global const float *up, int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const float g = gate[i];
#ifdef HAVE_FP64
    const float denom = 1.0f + (float)exp(-(double)g);
    out[i] = (float)((double)g / (double)denom) * up[i];
#else
    out[i] = g / (1.0f + exp(-g)) * up[i];
#endif
}

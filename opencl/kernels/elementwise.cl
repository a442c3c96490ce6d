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

__kernel void swiglu(__global float *out, __global const float *gate, __global const float *up, int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const float g = gate[i];
    out[i] = g / (1.0f + exp(-g)) * up[i];
}

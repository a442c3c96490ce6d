/*
 * activations.cl -- activations converted to the format the CPU's matrix
 * products use before a quantized weight (simd/kernels.h, act_type):
 * Q8_0 or Q8_1 blocks of 32 for the legacy formats, Q8_K blocks of 256
 * for the K-quants.
 *
 * act_quantize_* write the quants (one signed byte per element) and each
 * block's scale as a float, for the exact products of matmul_exact.cl;
 * act_round_* replace each element by the value its block dequantizes to,
 * for the float products of matmul.cl.  (Q8_1 differs from Q8_0 only by
 * its stored sum, which the products do not use.)
 *
 * The rounding is that of src/common/quant.c: Q8_0/Q8_1 d = half(max|x| / 127)
 * with q = roundf(x / (max|x| / 127)) (the unrounded d, saturating at the
 * largest half), Q8_K d = max|x| / 127 (a float) with q = rint(x / d); a
 * block holding a NaN or infinity gets a NaN scale and zero quants.
 * Quotients are correctly rounded where the device has double precision
 * (a float quotient through double is), so the quants are the CPU's;
 * blocks of subnormal scale may differ.
 */

float div_rn(float a, float b)
{
#ifdef HAVE_FP64
    return (float)((double)a / (double)b);
#else
    return a / b;
#endif
}

/* v rounded to the nearest half (even on ties), back as a float. */
float round_to_half(float v)
{
    ushort bits;
    vstore_half_rte(v, 0, (half *)&bits);
    return vload_half(0, (const half *)&bits);
}

/* Block b of 32 at x: its quants into q, its scale returned. */
float quantize_q8_0_block(__global const float *x, char *q)
{
    float amax = 0.0f, probe = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float a = fabs(x[j]);
        amax = a > amax ? a : amax;
        probe += x[j] * 0.0f;
    }
    for (int j = 0; j < 32; j++) q[j] = 0;
    if (probe != probe) return NAN;
    const float d = div_rn(amax, 127.0f);
    float dh = round_to_half(d);
    float inv = d > 0.0f ? div_rn(1.0f, d) : 0.0f;
    if (isinf(dh)) {
        dh = 65504.0f;
        inv = div_rn(1.0f, 65504.0f);
    }
    if (isinf(inv)) return dh;
    for (int j = 0; j < 32; j++) q[j] = (char)round(clamp(x[j] * inv, -127.0f, 127.0f));
    return dh;
}

/* Block of 256 at x: its quants into q, its scale returned. */
float quantize_q8_k_block(__global const float *x, char *q)
{
    float amax = 0.0f, probe = 0.0f;
    for (int j = 0; j < 256; j++) {
        const float a = fabs(x[j]);
        amax = a > amax ? a : amax;
        probe += x[j] * 0.0f;
    }
    for (int j = 0; j < 256; j++) q[j] = 0;
    if (probe != probe) return NAN;
    if (amax == 0.0f) return 0.0f;
    float d = div_rn(amax, 127.0f);
    if (isinf(d * 127.0f)) d = nextafter(d, 0.0f);
    if (!(d >= FLT_MIN)) return d;
    const float inv = div_rn(1.0f, d);
    for (int j = 0; j < 256; j++) q[j] = (char)rint(clamp(x[j] * inv, -127.0f, 127.0f));
    return d;
}

/* One item per block; n_blocks blocks of the whole batch. */
__kernel void act_quantize_q8_0(__global const float *x, __global char *xq, __global float *xd,
                                int n_blocks)
{
    const int b = get_global_id(0);
    if (b >= n_blocks) return;
    char q[32];
    xd[b] = quantize_q8_0_block(x + 32 * (size_t)b, q);
    for (int j = 0; j < 32; j++) xq[32 * (size_t)b + j] = q[j];
}

__kernel void act_quantize_q8_k(__global const float *x, __global char *xq, __global float *xd,
                                int n_blocks)
{
    const int b = get_global_id(0);
    if (b >= n_blocks) return;
    char q[256];
    xd[b] = quantize_q8_k_block(x + 256 * (size_t)b, q);
    for (int j = 0; j < 256; j++) xq[256 * (size_t)b + j] = q[j];
}

__kernel void act_round_q8_0(__global const float *x, __global float *y, int n_blocks)
{
    const int b = get_global_id(0);
    if (b >= n_blocks) return;
    char q[32];
    const float d = quantize_q8_0_block(x + 32 * (size_t)b, q);
    for (int j = 0; j < 32; j++) y[32 * (size_t)b + j] = d * (float)q[j];
}

__kernel void act_round_q8_k(__global const float *x, __global float *y, int n_blocks)
{
    const int b = get_global_id(0);
    if (b >= n_blocks) return;
    char q[256];
    const float d = quantize_q8_k_block(x + 256 * (size_t)b, q);
    for (int j = 0; j < 256; j++) y[256 * (size_t)b + j] = d * (float)q[j];
}

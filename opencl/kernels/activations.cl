/*
 * activations.cl -- activations rounded to the format the CPU's matrix
 * products convert them to before a quantized weight (simd/kernels.h,
 * act_type): Q8_0 or Q8_1 blocks of 32 for the legacy formats, Q8_K
 * blocks of 256 for the K-quants.  Each element is replaced by the value
 * its block dequantizes to, so that every device product computes, as the
 * CPU's does, the dot product of the two rows exactly as they dequantize.
 *
 * The rounding follows src/quant.c: Q8_0/Q8_1 d = half(max|x| / 127) with
 * q = roundf(x / (max|x| / 127)) (the unrounded d, saturating at the
 * largest half), Q8_K d = max|x| / 127 (a float) with q = rint(x / d); a
 * block holding a NaN or infinity becomes NaN.  Quotients are correctly
 * rounded where the device has double precision (a float quotient through
 * double is), as on the CPU; blocks of subnormal scale may differ.
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

/* One item per block of 32; n_blocks blocks. */
__kernel void act_round_q8_0(__global const float *x, __global float *y, int n_blocks)
{
    const int b = get_global_id(0);
    if (b >= n_blocks) return;
    __global const float *xb = x + 32 * (size_t)b;
    __global float *yb = y + 32 * (size_t)b;
    float amax = 0.0f, probe = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float a = fabs(xb[j]);
        amax = a > amax ? a : amax;
        probe += xb[j] * 0.0f;
    }
    if (probe != probe) {
        for (int j = 0; j < 32; j++) yb[j] = NAN;
        return;
    }
    const float d = div_rn(amax, 127.0f);
    float dh = round_to_half(d);
    float inv = d > 0.0f ? div_rn(1.0f, d) : 0.0f;
    if (isinf(dh)) {
        dh = 65504.0f;
        inv = div_rn(1.0f, 65504.0f);
    }
    if (isinf(inv)) inv = 0.0f;
    for (int j = 0; j < 32; j++) yb[j] = dh * round(clamp(xb[j] * inv, -127.0f, 127.0f));
}

/* One item per block of 256; n_blocks blocks. */
__kernel void act_round_q8_k(__global const float *x, __global float *y, int n_blocks)
{
    const int b = get_global_id(0);
    if (b >= n_blocks) return;
    __global const float *xb = x + 256 * (size_t)b;
    __global float *yb = y + 256 * (size_t)b;
    float amax = 0.0f, probe = 0.0f;
    for (int j = 0; j < 256; j++) {
        const float a = fabs(xb[j]);
        amax = a > amax ? a : amax;
        probe += xb[j] * 0.0f;
    }
    if (probe != probe) {
        for (int j = 0; j < 256; j++) yb[j] = NAN;
        return;
    }
    float d = div_rn(amax, 127.0f);
    if (isinf(d * 127.0f)) d = nextafter(d, 0.0f);
    const float inv = d >= FLT_MIN ? div_rn(1.0f, d) : 0.0f;
    for (int j = 0; j < 256; j++) yb[j] = d * rint(clamp(xb[j] * inv, -127.0f, 127.0f));
}

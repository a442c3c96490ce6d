/*
 * common.cl -- what every kernel of the OpenCL backend shares: the
 * optional double precision, and the work-group sum used by the row
 * reductions (GEMV, RMS norm).
 *
 * The kernel files are concatenated in the order opencl/local.mk lists
 * them and built as one program per device.
 *
 * Floating-point expressions are not contracted into fused multiply-adds
 * anywhere: the operations that mirror a CPU computation (norms, RoPE,
 * attention, SwiGLU, the exact products) must round as the CPU does.
 */
#pragma OPENCL FP_CONTRACT OFF

#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define HAVE_FP64 1
#endif

/* Sum v over the work-group's first dimension, in a fixed order (a
 * halving tree), so that a result does not depend on scheduling.  The
 * local size must be a power of two; scratch holds one float per item.
 * Every item gets the sum. */
float group_sum(float v, __local float *scratch)
{
    const uint lid = get_local_id(0), n = get_local_size(0);
    scratch[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint half_n = n / 2; half_n > 0; half_n /= 2) {
        if (lid < half_n) scratch[lid] += scratch[lid + half_n];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float sum = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return sum;
}

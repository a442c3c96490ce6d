/*
 * quant_bounds.h -- the error model of the quantized tensor types, shared
 * by the tests of the quantizers (test-quant.c) and of model quantization
 * (test-quantize.c): how far, relative to their RMS, dequantized values may
 * be from the floats they were made from.  Included by one test program
 * each, so its functions are static.
 */
#ifndef HEARTH_TEST_QUANT_BOUNDS_H
#define HEARTH_TEST_QUANT_BOUNDS_H

#include "testutil.h"
#include <math.h>
#include <stdbool.h>

#include "hearth.h"

static inline bool is_float_type(hearth_type t)
{
    return t == HEARTH_TYPE_F32 || t == HEARTH_TYPE_F16 || t == HEARTH_TYPE_BF16;
}

/* ------------------------------------------------------------------------
 * Error bounds from bits per weight
 *
 * A quantized block spreads L evenly spaced levels over the span its values
 * need: twice their largest magnitude for the symmetric formats (x = d q),
 * their range for the affine ones (x = d q + m).  Rounding to a grid of step
 * delta = span / (L - 1) leaves an error spread evenly over +-delta/2, whose
 * RMS is delta / sqrt(12).  For standard normal data the expected spans of
 * n values are: largest magnitude 2.08 (n = 16), 2.35 (n = 32), 3.04
 * (n = 256); range 3.53 (n = 16), 4.14 (n = 32).  The secondary scales of
 * the K-quants (4- to 8-bit sub-block scales) add a little error on top;
 * the least-squares search takes a little away.
 *
 * The float types round each value to nearest: a relative error of at most
 * 2^-11 (F16, 11 significant bits) or 2^-8 (BF16, 8 bits) per value.
 * ------------------------------------------------------------------------ */

struct type_bits {
    hearth_type type;
    int sub_n;     /* values sharing one scale (and min) */
    int levels;    /* L: 2^bits per quant (255 for the symmetric 8-bit types) */
    bool affine;   /* x = d q + m rather than x = d q */
};

static const struct type_bits type_bits[] = {
    {HEARTH_TYPE_Q4_0, 32, 16, false}, {HEARTH_TYPE_Q4_1, 32, 16, true},
    {HEARTH_TYPE_Q5_0, 32, 32, false}, {HEARTH_TYPE_Q5_1, 32, 32, true},
    {HEARTH_TYPE_Q8_0, 32, 255, false}, {HEARTH_TYPE_Q8_1, 32, 255, false},
    {HEARTH_TYPE_Q2_K, 16, 4, true},   {HEARTH_TYPE_Q3_K, 16, 8, false},
    {HEARTH_TYPE_Q4_K, 32, 16, true},  {HEARTH_TYPE_Q5_K, 32, 32, true},
    {HEARTH_TYPE_Q6_K, 16, 64, false}, {HEARTH_TYPE_Q8_K, 256, 255, false},
};

/* The expected RMSE of type on standard normal data, relative to its RMS. */
static inline double expected_rel_rmse(hearth_type t)
{
    switch (t) {
    case HEARTH_TYPE_F32: return 0.0;
    case HEARTH_TYPE_F16: return 0x1p-11;
    case HEARTH_TYPE_BF16: return 0x1p-8;
    /* MXFP4's 15 levels are not evenly spaced (steps of 1/12 to 1/3 of the
     * largest) and its scale is a power of two, up to twice the best one,
     * so the span model does not apply: over 10^5 blocks of standard
     * normal data the quantizer's relative RMSE is 0.112, uniform data in
     * [-1, 1) 0.099. */
    case HEARTH_TYPE_MXFP4: return 0.112;
    default: break;
    }
    for (size_t i = 0; i < sizeof type_bits / sizeof type_bits[0]; i++) {
        const struct type_bits *b = &type_bits[i];
        if (b->type != t) continue;
        double span;
        if (b->affine) span = b->sub_n == 16 ? 3.53 : 4.14;
        else span = 2.0 * (b->sub_n == 16 ? 2.08 : b->sub_n == 32 ? 2.35 : 3.04);
        return span / (b->levels - 1) / sqrt(12.0);
    }
    ck_abort_msg("no error model for type %d", t);
    return 0.0;
}

/* Round trips on a few blocks: 1.5 times the estimate leaves room for the
 * sampling spread of a single block of 16 or 32 values.  The float types'
 * bounds are exact per value and need no room. */
static inline double roundtrip_bound(hearth_type t)
{
    return is_float_type(t) ? expected_rel_rmse(t) : 1.5 * expected_rel_rmse(t);
}

/* Whole tensors of the shared models average over thousands of blocks, so
 * the spread is small: 1.25 times the estimate. */
static inline double tensor_bound(hearth_type t)
{
    return is_float_type(t) ? expected_rel_rmse(t) : 1.25 * expected_rel_rmse(t);
}

#endif /* HEARTH_TEST_QUANT_BOUNDS_H */

/*
 * kernels.h -- the internal interface of the hot kernels: one table of
 * function pointers per instruction set, filled once at start-up from the
 * CPU's features.
 *
 * A matrix product multiplies weight rows (in their GGUF block format) by
 * activation rows that were first converted to the weight type's
 * activation format (act_type): Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for
 * Q4_1/Q5_1, Q8_K for the K-quants, F32 for the float types.  Dot products
 * of integer blocks are then exact integer sums scaled once per block.
 *
 * Every kernel of every instruction set has a scalar twin in
 * simd/scalar.c, which is the reference the tests compare against.
 *
 * Summation order of the integer formats.  Block i of a dot product gives
 * an exact integer sum, weighted by the block's float factors into one
 * float contribution c_i, computed with separate multiplies and adds (no
 * fused multiply-add) in the order the scalar kernel writes.  The c_i are
 * added into DOT_LANES partial sums, c_i going to partial i % DOT_LANES in
 * order of i, and the partials p_0..p_7 are totalled as
 *     ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7)).
 * Every instruction set follows this order, so the integer formats give
 * bit-identical results on every path, for every tile shape and thread
 * count.  The float types (F32, F16, BF16) sum in whatever order suits
 * each instruction set and agree across paths within rounding.
 */
#ifndef HEARTH_KERNELS_H
#define HEARTH_KERNELS_H

#include <stdint.h>

#include "hearth.h"

/* Partial sums of a dot product of an integer format (see above). */
#define DOT_LANES 8

/* *s = dot(w, x) over n elements: w one weight row of some type, x an
 * activation row in that type's activation format. */
typedef void (*hearth_vec_dot_fn)(int64_t n, float *s, const void *w, const void *x);

/* Convert n floats to an activation format (n a multiple of its block). */
typedef void (*hearth_act_convert_fn)(const float *x, void *y, int64_t n);

typedef struct hearth_kernels {
    const char *name;                                     /* "scalar", "avx2", ... */
    hearth_type act_type[HEARTH_TYPE_COUNT];              /* by weight type */
    hearth_act_convert_fn act_convert[HEARTH_TYPE_COUNT]; /* by activation type */
    hearth_vec_dot_fn vec_dot[HEARTH_TYPE_COUNT];         /* by weight type */
} hearth_kernels;

/* The kernels for this CPU (or for HEARTH_CPU when set), chosen on first
 * use and fixed afterwards. */
const hearth_kernels *hearth_kernels_get(void);

/* The scalar reference kernels. */
const hearth_kernels *hearth_kernels_scalar(void);

/* Whether the weight type has a matrix-product kernel. */
static inline bool hearth_kernels_supports(const hearth_kernels *k, hearth_type t)
{
    return (unsigned)t < HEARTH_TYPE_COUNT && k->vec_dot[t] != NULL;
}

#endif /* HEARTH_KERNELS_H */

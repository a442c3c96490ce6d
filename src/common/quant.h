/*
 * quant.h -- block layouts of the GGUF quantized tensor types and the scalar
 * reference conversions between them and float.
 *
 * The structs are bit-exact with the published GGUF block formats (little
 * endian, no padding): a tensor row of n elements is n / block_elems blocks
 * laid out back to back.  The scalar code in quant.c is the reference that
 * every SIMD kernel in simd/ is tested against.
 */
#ifndef HEARTH_QUANT_H
#define HEARTH_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "fp16.h"
#include "hearth.h"

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK_MXFP4 32
#define QK_K 256
#define K_SCALE_SIZE 12

/* --- legacy formats: 32 elements per block ------------------------------- */

/* x = d * (q - 8), q in 0..15; element j in the low nibble of qs[j],
 * element j + 16 in the high nibble. */
typedef struct { hearth_f16 d; uint8_t qs[QK4_0 / 2]; } block_q4_0;

/* x = d * q + m, q in 0..15, nibbles as Q4_0. */
typedef struct { hearth_f16 d; hearth_f16 m; uint8_t qs[QK4_1 / 2]; } block_q4_1;

/* x = d * (q - 16), q in 0..31: low four bits as Q4_0, bit 4 of element j
 * in bit j of qh (little-endian 32-bit). */
typedef struct { hearth_f16 d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; } block_q5_0;

/* x = d * q + m, q in 0..31, bits as Q5_0. */
typedef struct { hearth_f16 d; hearth_f16 m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; } block_q5_1;

/* x = d * q, q in -127..127. */
typedef struct { hearth_f16 d; int8_t qs[QK8_0]; } block_q8_0;

/* As Q8_0 plus s = d * sum(q), an activation format. */
typedef struct { hearth_f16 d; hearth_f16 s; int8_t qs[QK8_1]; } block_q8_1;

/* --- MXFP4 (OCP microscaling FP4): 32 elements per block ------------------ */

/* x = v(q) * 2^(e - 128): q a 4-bit E2M1 code, v(q) twice its value (the
 * integers of mxfp4_values), e an E8M0 exponent, 0xff meaning NaN (so
 * 2^(e - 127) times the E2M1 value, as the format defines it); nibbles as
 * Q4_0. */
typedef struct { uint8_t e; uint8_t qs[QK_MXFP4 / 2]; } block_mxfp4;

/* Twice the E2M1 values of the 16 codes: sign bit 3, then exponent and
 * mantissa (0, 0.5, 1, 1.5, 2, 3, 4, 6). */
extern const int8_t mxfp4_values[16];

/* 2^(e - 128) as a float (subnormal for e < 2), NaN for e = 0xff. */
static inline float mxfp4_scale(uint8_t e)
{
    union { uint32_t u; float f; } v;
    v.u = e == 0xff ? 0x7fc00000u : e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    return v.f;
}

/* --- K-quants: 256-element super-blocks ------------------------------------ */

/* 16 sub-blocks of 16: x = d * (scales[i] & 15) * q - dmin * (scales[i] >> 4),
 * q in 0..3 (2 bits). */
typedef struct {
    uint8_t scales[QK_K / 16];
    uint8_t qs[QK_K / 4];
    hearth_f16 d;
    hearth_f16 dmin;
} block_q2_K;

/* 16 sub-blocks of 16: x = d * (scale - 32) * (q - 4 * !hmask_bit),
 * q low 2 bits in qs, high bit in hmask; 6-bit scales packed in 12 bytes. */
typedef struct {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];
    hearth_f16 d;
} block_q3_K;

/* 8 sub-blocks of 32: x = d * sc * q - dmin * m, q in 0..15, 6-bit sc and m
 * packed in 12 bytes. */
typedef struct {
    hearth_f16 d;
    hearth_f16 dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qs[QK_K / 2];
} block_q4_K;

/* As Q4_K with a fifth bit per element in qh. */
typedef struct {
    hearth_f16 d;
    hearth_f16 dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_K;

/* 16 sub-blocks of 16: x = d * scales[i] * (q - 32), q in 0..63: low 4 bits
 * in ql, high 2 bits in qh. */
typedef struct {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    hearth_f16 d;
} block_q6_K;

/* Activation format for the K-quant dot products: x = d * q, with the sums
 * of each group of 16 quants precomputed. */
typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
} block_q8_K;

_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 layout");
_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1 layout");
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0 layout");
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1 layout");
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 layout");
_Static_assert(sizeof(block_q8_1) == 36, "block_q8_1 layout");
_Static_assert(sizeof(block_mxfp4) == 17, "block_mxfp4 layout");
_Static_assert(sizeof(block_q2_K) == 84, "block_q2_K layout");
_Static_assert(sizeof(block_q3_K) == 110, "block_q3_K layout");
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K layout");
_Static_assert(sizeof(block_q5_K) == 176, "block_q5_K layout");
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K layout");
_Static_assert(sizeof(block_q8_K) == 292, "block_q8_K layout");

/* --- conversions ----------------------------------------------------------
 *
 * Dequantizers compute exactly what the block formats above define, in the
 * order written there (for the K-quants the sub-block factor first:
 * (d * scale) * q - (dmin * min)), so that any kernel following the format
 * gives the same floats.
 *
 * The quantizers choose scales by least squares: for every (sub-)block
 * they search the scale (and min) that minimises the squared error
 * sum (x - dequantized)^2, refining candidates by alternating "round to the
 * nearest level" with "refit the scale to those levels", and for the
 * K-quants they then search the packed sub-block scales and refit the
 * super-block scales.  Q8_0 and Q8_1 use the common plain rule:
 * d = max|x| / 127 rounded to half, q = round(x / d) computed as x times the
 * float inverse of the unrounded d, rounding halves away from zero.
 *
 * Input that is not an ordinary float never causes undefined behaviour:
 *   - F32 is copied.  F16 and BF16 convert each value on its own with IEEE
 *     rounding to nearest even: beyond the type's range it becomes +-inf,
 *     NaN stays NaN.
 *   - A block of any other type holding a NaN or an infinity is "poisoned":
 *     its scales (and mins) are stored as NaN and its quant bits as 0, so
 *     the whole block dequantizes to NaN.  Other blocks of the row are not
 *     affected.  (For Q8_K the float d is NaN and the bsums 0.)
 *   - In the block types, finite values too large for the format saturate:
 *     a scale or min that would exceed the largest half (65504) is stored
 *     as 65504, and values beyond what the block can then represent are
 *     clipped to its extreme levels.  A finite input never yields a
 *     non-finite output.
 *   - Blocks too small for a half scale lose precision gradually once
 *     their scale enters the half subnormals (below 2^-14) and quantize to
 *     zero once it rounds to zero (below 2^-25); Q8_K's float scale reaches
 *     down to float subnormals.  Subnormal input is otherwise ordinary: the
 *     search works on the block scaled by a power of two, which is exact.
 */

/* Plain float types: one value per "block". */
void f32_dequantize_row(const float *src, float *dst, int64_t n);
void f32_quantize_row(const float *src, float *dst, int64_t n);
void f16_dequantize_row(const hearth_f16 *src, float *dst, int64_t n);
void f16_quantize_row(const float *src, hearth_f16 *dst, int64_t n);
void bf16_dequantize_row(const hearth_bf16 *src, float *dst, int64_t n);
void bf16_quantize_row(const float *src, hearth_bf16 *dst, int64_t n);

/* Legacy formats; n is a multiple of 32. */
void q4_0_dequantize_row(const block_q4_0 *src, float *dst, int64_t n);
void q4_0_quantize_row(const float *src, block_q4_0 *dst, int64_t n);
void q4_1_dequantize_row(const block_q4_1 *src, float *dst, int64_t n);
void q4_1_quantize_row(const float *src, block_q4_1 *dst, int64_t n);
void q5_0_dequantize_row(const block_q5_0 *src, float *dst, int64_t n);
void q5_0_quantize_row(const float *src, block_q5_0 *dst, int64_t n);
void q5_1_dequantize_row(const block_q5_1 *src, float *dst, int64_t n);
void q5_1_quantize_row(const float *src, block_q5_1 *dst, int64_t n);
void q8_0_dequantize_row(const block_q8_0 *src, float *dst, int64_t n);
void q8_0_quantize_row(const float *src, block_q8_0 *dst, int64_t n);
void q8_1_dequantize_row(const block_q8_1 *src, float *dst, int64_t n);
/* s is computed from the stored (half-rounded) d: s = half(d * sum(q)). */
void q8_1_quantize_row(const float *src, block_q8_1 *dst, int64_t n);

/* MXFP4; n is a multiple of 32.  The quantizer chooses, of the exponents
 * near max|x| / 12, the one whose nearest levels give the least squared
 * error (the lower exponent on a tie), and each element the nearest level
 * (ties: the smaller magnitude; zero is +0).  The largest exponent it stores is 252, whose
 * top level 12 * 2^124 stays below FLT_MAX, so a finite input stays
 * finite; a block holding a NaN or an infinity gets e = 0xff (NaN) and
 * zero codes. */
void mxfp4_dequantize_row(const block_mxfp4 *src, float *dst, int64_t n);
void mxfp4_quantize_row(const float *src, block_mxfp4 *dst, int64_t n);

/* K-quants; n is a multiple of 256. */
void q2k_dequantize_row(const block_q2_K *src, float *dst, int64_t n);
void q2k_quantize_row(const float *src, block_q2_K *dst, int64_t n);
void q3k_dequantize_row(const block_q3_K *src, float *dst, int64_t n);
void q3k_quantize_row(const float *src, block_q3_K *dst, int64_t n);
void q4k_dequantize_row(const block_q4_K *src, float *dst, int64_t n);
void q4k_quantize_row(const float *src, block_q4_K *dst, int64_t n);
void q5k_dequantize_row(const block_q5_K *src, float *dst, int64_t n);
void q5k_quantize_row(const float *src, block_q5_K *dst, int64_t n);
void q6k_dequantize_row(const block_q6_K *src, float *dst, int64_t n);
void q6k_quantize_row(const float *src, block_q6_K *dst, int64_t n);
void q8k_dequantize_row(const block_q8_K *src, float *dst, int64_t n);
/* d = max|x| / 127 (a float), q = round(x / d) in -127..127. */
void q8k_quantize_row(const float *src, block_q8_K *dst, int64_t n);

/* The 6-bit scales and mins of Q4_K and Q5_K (sub-block j of 8), as
 * packed in their 12 scale bytes. */
void q4k_unpack_scales(const uint8_t packed[K_SCALE_SIZE], uint8_t scale[8], uint8_t min[8]);
/* The 16 signed sub-block scales of Q3_K (-32..31). */
void q3k_unpack_scales(const uint8_t packed[12], int8_t scale[16]);

/* Convert n elements of a row of type to float.  Returns false, doing
 * nothing, for a type this cannot dequantize (every type the engine
 * computes with plus Q8_1 and Q8_K can be), or when n is negative or not a
 * multiple of the type's block size. */
bool quant_dequantize_row(hearth_type type, const void *src, float *dst, int64_t n);

/* Quantize n floats into a row of type with the reference quantizer.
 * Returns false, doing nothing, for a type it cannot produce or an n that
 * is negative or not a multiple of the block size. */
bool quant_quantize_row(hearth_type type, const float *src, void *dst, int64_t n);

#endif /* HEARTH_QUANT_H */

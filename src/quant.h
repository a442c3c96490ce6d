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
_Static_assert(sizeof(block_q2_K) == 84, "block_q2_K layout");
_Static_assert(sizeof(block_q3_K) == 110, "block_q3_K layout");
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K layout");
_Static_assert(sizeof(block_q5_K) == 176, "block_q5_K layout");
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K layout");
_Static_assert(sizeof(block_q8_K) == 292, "block_q8_K layout");

/* Convert n elements (a multiple of the type's block size) of a row of type
 * to float.  Returns false, doing nothing, for a type that cannot be
 * dequantized (see hearth_type_can_compute). */
bool quant_dequantize_row(hearth_type type, const void *src, float *dst, int64_t n);

/* Quantize n floats (a multiple of the block size) into a row of type with
 * the reference quantizer.  Returns false for a type it cannot produce. */
bool quant_quantize_row(hearth_type type, const float *src, void *dst, int64_t n);

#endif /* HEARTH_QUANT_H */

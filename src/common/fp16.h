/*
 * fp16.h -- scalar conversions between float and IEEE half (binary16) and
 * bfloat16, the reference for the SIMD conversions in simd/.
 */
#ifndef HEARTH_FP16_H
#define HEARTH_FP16_H

#include <stdint.h>
#include <string.h>

typedef uint16_t hearth_f16;  /* IEEE 754 binary16 bits */
typedef uint16_t hearth_bf16; /* bfloat16 bits: the top half of a float */

static inline uint32_t hearth_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float hearth_f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* binary16 -> binary32, exact for every input (subnormals, inf, NaN). */
static inline float hearth_f16_to_f32(hearth_f16 h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);          /* inf / NaN */
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (mant << 13);  /* normal */
    } else if (mant == 0) {
        bits = sign;                                       /* +-0 */
    } else {
        /* subnormal: value = mant * 2^-24; normalise */
        int shift = 0;
        while (!(mant & 0x400)) { mant <<= 1; shift++; }
        mant &= 0x3ff;
        bits = sign | ((uint32_t)(113 - shift) << 23) | (mant << 13);
    }
    return hearth_f32_from_bits(bits);
}

/* binary32 -> binary16 with round-to-nearest-even; overflow gives inf,
 * NaN stays NaN (quiet). */
static inline hearth_f16 hearth_f32_to_f16(float f)
{
    uint32_t x = hearth_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffffu;
    if (absx > 0x7f800000u) return (hearth_f16)(sign | 0x7e00);        /* NaN */
    if (absx >= 0x477ff000u) return (hearth_f16)(sign | 0x7c00);       /* >= 65520: inf */
    if (absx < 0x38800000u) {
        /* result is subnormal or zero: value / 2^-24, rounded to nearest even */
        if (absx < 0x33000000u) return (hearth_f16)sign;               /* < 2^-25 */
        uint32_t e = absx >> 23;
        uint32_t m = (absx & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e;                                      /* 14..24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (hearth_f16)(sign | q);
    }
    uint32_t q = (absx - 0x38000000u) >> 13;                            /* rebias 127->15 */
    uint32_t rem = absx & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (q & 1))) q++;
    return (hearth_f16)(sign | q);
}

static inline float hearth_bf16_to_f32(hearth_bf16 b)
{
    return hearth_f32_from_bits((uint32_t)b << 16);
}

/* Round to nearest even; NaN stays a quiet NaN. */
static inline hearth_bf16 hearth_f32_to_bf16(float f)
{
    uint32_t x = hearth_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (hearth_bf16)((x >> 16) | 0x40);
    x += 0x7fffu + ((x >> 16) & 1);
    return (hearth_bf16)(x >> 16);
}

#endif /* HEARTH_FP16_H */

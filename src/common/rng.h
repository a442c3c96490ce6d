/*
 * rng.h -- the documented pseudo-random number generator behind sampling:
 * xoshiro256** (Blackman and Vigna, "Scrambled linear pseudorandom number
 * generators", 2021) with its 256-bit state filled by four successive
 * outputs of splitmix64 (Steele, Lea and Flood, 2014) from a 64-bit seed.
 *
 * Only 64-bit integer operations are involved, so a seed gives the same
 * sequence on every platform.  Uniform doubles take the top 53 bits of an
 * output: u = (x >> 11) * 2^-53, which lies in [0, 1).
 */
#ifndef HEARTH_RNG_H
#define HEARTH_RNG_H

#include <stdint.h>

typedef struct hearth_rng {
    uint64_t s[4];
} hearth_rng;

static inline uint64_t hearth_rng_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* splitmix64: advances *state by the golden-ratio increment and mixes it. */
static inline uint64_t hearth_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static inline void hearth_rng_seed(hearth_rng *rng, uint64_t seed)
{
    uint64_t state = seed;
    for (int i = 0; i < 4; i++) rng->s[i] = hearth_splitmix64(&state);
}

/* xoshiro256**: the starstar scrambler over the xoshiro256 linear engine. */
static inline uint64_t hearth_rng_next(hearth_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = hearth_rng_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = hearth_rng_rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double hearth_rng_uniform(hearth_rng *rng)
{
    return (double)(hearth_rng_next(rng) >> 11) * 0x1.0p-53;
}

#endif /* HEARTH_RNG_H */

/*
 * delta.h -- the gated delta rule (the linear-attention recurrence of
 * Gated DeltaNet layers: Qwen3.5, Qwen3-Next) for one head of one
 * sequence: token by token (decode) and chunk-parallel (prefill), in one
 * body per instruction set (delta_impl.h) with the scalar path as the twin
 * the tests compare with, as for the WKV recurrences (wkv.h).
 *
 * Per head the state S is dv x dk floats, row i belonging to value
 * channel i and column j to key channel j.  With the log-decay g_t <= 0
 * (one per token and head), a_t = e^{g_t} and the write strength b_t:
 *
 *   S_t = a_t S_{t-1} (I - b_t k_t k_t^T) + b_t v_t k_t^T
 *       = a_t S_{t-1} + u_t k_t^T,   u_t = b_t (v_t - a_t S_{t-1} k_t)
 *   o_t = S_t q_t
 *
 * The delta rule overwrites what the key k_t already stored (the value a_t
 * S_{t-1} k_t it would read back) with v_t, by the fraction b_t; q and k
 * come L2-normalised and q scaled from the layer.  Rows of S (and the
 * elements of o) evolve independently, so a call may take a block of
 * value rows i0 .. i1-1.  The chunked form computes the same thing C
 * tokens at a time (DESIGN.md, "Chunk-parallel prefill of the delta
 * rule").
 */
#ifndef HEARTH_DELTA_H
#define HEARTH_DELTA_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

/* Log-decays below this are taken as this (see WKV_LOG_DECAY_MIN). */
#define DELTA_LOG_DECAY_MIN (-200.0)

/* The most tokens of a chunk, and the largest head size. */
#define DELTA_CHUNK_MAX 4096
#define DELTA_HEAD_MAX 1024

/* One head of one sequence over n tokens.  Row t of q, k, v is at x + t *
 * x_stride, the head's elements contiguous; g and b hold one value per
 * token at g + t * g_stride and b + t * b_stride. */
struct delta_head {
    int64_t n;            /* tokens */
    int32_t dk, dv;       /* key and value head sizes */
    const float *q, *k, *v, *g, *b;
    int64_t q_stride, k_stride, v_stride, g_stride, b_stride;
    float *o;             /* out: row t at o + t * o_stride (elements i0 .. i1-1) */
    int64_t o_stride;
    float *S;             /* the dv x dk state, row-major, updated in place */
    int32_t i0, i1;       /* the value rows of this call */
};

/* Token by token, in float. */
typedef void (*delta_recurrent_fn)(const struct delta_head *h);
/* Chunks of C tokens (the last one ragged); scratch of
 * delta_chunk_scratch_bytes(C, dk, i1 - i0) bytes, 64-byte aligned. */
typedef void (*delta_chunked_fn)(const struct delta_head *h, int32_t C, void *scratch);

struct delta_kernels {
    const char *name;
    delta_recurrent_fn recurrent;
    delta_chunked_fn chunked;
};

size_t delta_chunk_scratch_bytes(int32_t C, int32_t dk, int32_t rows);

const struct delta_kernels *delta_kernels_scalar(void);
const struct delta_kernels *delta_kernels_avx2(void);
/* The kernels of the path whose matrix kernels are k (the scalar twin when
 * no vector path matches). */
const struct delta_kernels *delta_kernels_matching(const hearth_kernels *k);

/* Test-only: 1 drops the incoming-state term of every chunk, 2 lets each
 * token of a chunk read the next token (a mask off by one); 0 (always,
 * outside tests) computes the recurrence.  The tests set it to show that
 * they fail on either bug. */
extern int delta_inject_bug;

#endif /* HEARTH_DELTA_H */

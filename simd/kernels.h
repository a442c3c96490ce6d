/*
 * kernels.h -- the internal interface of the hot kernels: one table of
 * function pointers per instruction set, chosen once from the CPU's
 * features (simd/dispatch.c).
 *
 * A matrix product multiplies weight rows (in their GGUF block format) by
 * activation rows that were first converted to the weight type's
 * activation format (act_type): Q8_0 for Q4_0/Q5_0/Q8_0/MXFP4, Q8_1 for
 * Q4_1/Q5_1, Q8_K for the K-quants, F32 for the float types.  Dot products
 * of integer blocks are then exact integer sums scaled once per block.
 *
 * Every kernel of every instruction set has a scalar twin in
 * simd/scalar.c, which is the reference the tests compare against.
 *
 * Summation order of the integer formats.  A block's (or super-block's)
 * exact integer products are gathered into DOT_LANES = 8 integer lane
 * sums.  Lane k holds the products of the elements 32c + 4k .. 32c + 4k + 3
 * of every 32-element chunk c of the block -- what a 256-bit multiply-add
 * of bytes leaves in its k-th 32-bit lane -- weighted by the chunk's
 * integer sub-block scale; each format's scalar kernel spells out its lanes
 * (where the mins and the offsets of biased quants go, too).  Each lane sum
 * is converted to float and added into the lane's running float sum with
 * fused multiply-adds (fmaf: one rounding), blocks in order.  At the end
 * the running sums p0..p7 are totalled as
 *     ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7)).
 * Every instruction set follows this order, so the integer formats give
 * bit-identical results on every path.
 *
 * Within one path, gemm computes every dot product exactly as vec_dot
 * does, for every type: a token's results do not depend on the tile it
 * falls in, on how many tokens are batched with it, or on the number of
 * threads.  The float types (F32, F16, BF16) sum in the order that suits
 * each instruction set, so across paths they agree within rounding.
 */
#ifndef HEARTH_KERNELS_H
#define HEARTH_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "hearth.h"

/* Lanes of the partial sums of the integer formats (see above). */
#define DOT_LANES 8

/* *s = dot(w, x) over n elements: w one weight row of some type, x an
 * activation row in that type's activation format. */
typedef void (*hearth_vec_dot_fn)(int64_t n, float *s, const void *w, const void *x);

/* y[t * y_stride + r] = dot(w_r, x_t) for r < n_rows and t < n_tok, where
 * w_r = w + r * w_stride bytes and x_t = x + t * x_stride bytes: a tile of
 * weight rows times converted activation rows, each weight block loaded
 * once for several tokens.  Each dot is bit-identical to vec_dot's. */
typedef void (*hearth_gemm_fn)(int64_t n, int64_t n_rows, int64_t n_tok, const void *w,
                               size_t w_stride, const void *x, size_t x_stride, float *y,
                               int64_t y_stride);

/* Row-interleaved ("packed") weights, for the formats whose quants are the
 * bulk of a model's bytes (Q4_0, Q5_0, Q8_0 and the K-quants Q2_K to Q6_K):
 * groups of PACK_ROWS rows, and per group the blocks (or super-blocks) in
 * order, each holding the group's PACK_ROWS blocks field by field: a
 * half-float field as PACK_ROWS halves, row by row; every other field in
 * 4-byte pieces, piece k of every row in turn (rows 0..7 of piece 0, rows
 * 0..7 of piece 1, ...).  The fields, in order: Q4_0 and Q8_0: d, qs;
 * Q5_0: d, qh, qs; MXFP4: e, qs;
 * Q2_K: d, dmin, scales, qs; Q3_K: d, scales (the 12 bytes of 6-bit
 * scales as stored), hmask, qs; Q4_K: d, dmin, scales (the 12 bytes of
 * 6-bit scales and mins as stored), qs; Q5_K: d, dmin, scales, qh, qs;
 * Q6_K: d, scales, ql, qh.  Nothing is decoded or widened, so packed rows
 * take exactly the bytes of the originals (decode reads no more).  One
 * 256-bit register of a field's piece holds four bytes of eight rows, and
 * one broadcast activation piece serves all of them, so the eight rows'
 * dot products come out in the eight 32-bit lanes with no horizontal sums
 * (simd/pack.c makes the layout).
 *
 * Summation order of packed weights.  Q4_0, Q5_0, Q8_0 and MXFP4: each block's
 * dot product is an exact integer, converted to float and added into the
 * row's running sum with one fused multiply-add by d_w * d_x (a float
 * product; for MXFP4 d_w = 2^(e - 128) and q_j the doubled E2M1 value),
 * blocks in order:
 *     s = fmaf(d_w * d_x, (float)sum_j q_j x_j, s).
 * Q2_K, Q4_K and Q5_K: each super-block gives two exact integers, the
 * scaled quant sum and the mins' sum over Q8_K's bsums,
 *     Q2_K:        q = sum_j sc_(j/16) q_j x_j,  m = sum_s m_s bsum_s,
 *     Q4_K, Q5_K:  q = sum_j sc_(j/32) q_j x_j,  m = sum_k m_k (bsum_2k + bsum_2k+1),
 * added in that order, super-blocks in order:
 *     s = fmaf(d_w * d_x, (float)q, s);  s = fmaf(-(dmin_w * d_x), (float)m, s).
 * Q3_K and Q6_K: each super-block gives one exact integer, the sum of the
 * signed quants' products with their sub-blocks' signed scales (for
 * Q3_K u_j - 4, u_j its low bits plus 4 times its hmask bit; for Q6_K
 * u_j - 32), which the kernels form through the bsums of the 16-element
 * sub-blocks,
 *     q = sum_j sc_(j/16) u_j x_j - {4, 32} sum_s sc_s bsum_s,
 * added as s = fmaf(d_w * d_x, (float)q, s), super-blocks in order.
 * This is not the lane order of the unpacked kernels (results differ from
 * them within rounding), but it is the same on every path: the packed
 * kernels of all paths agree bit for bit, and a packed gemm's results do
 * not depend on the tokens batched with a token or on the threads. */
#define PACK_ROWS 8

/* Packed float weights (F32, F16, BF16).  Rows in groups of
 * FLOAT_PACK_ROWS, and per group the rows' elements in chunks of
 * FLOAT_PACK_CHUNK: chunk c holds elements 32c .. 32c + 31 of the group's
 * first row, then those of its second row, and so on; a row length that
 * is not a multiple of the chunk ends in one shorter chunk, the last
 * n % FLOAT_PACK_CHUNK elements of each row in turn.  The rows after the
 * last whole group (n_rows % FLOAT_PACK_ROWS of them) stay as they are,
 * one after the other (groups of one row).  Elements keep their bytes, so
 * a group takes the bytes of its rows and starts where its first row did;
 * a thread's tile of a group's rows reads one stream instead of four (a
 * chunk of F16 is one 64-byte cache line of each row).  Unlike the
 * integer formats, packing does not change the summation order: each
 * path's packed float kernels compute every row-token pair exactly as its
 * gemm does (same lanes, same fused multiply-adds in the same order, same
 * lane tree), so packed and unpacked results agree bit for bit. */
#define FLOAT_PACK_ROWS 4
#define FLOAT_PACK_CHUNK 32

/* Where element i of row r (of a group of group_rows rows, 4 or 1) lies
 * in the packed group of rows of n elements, counted in elements. */
static inline size_t hearth_float_packed_index(int64_t n, int64_t group_rows, int64_t r, int64_t i)
{
    const int64_t c0 = i - i % FLOAT_PACK_CHUNK;
    const int64_t width = n - c0 < FLOAT_PACK_CHUNK ? n - c0 : FLOAT_PACK_CHUNK;
    return (size_t)(c0 * group_rows + r * width + (i - c0));
}

/* The rows of the group that row r of a packed float matrix of n_rows
 * rows belongs to: FLOAT_PACK_ROWS, or 1 after the last whole group. */
static inline int64_t hearth_float_group_rows(int64_t n_rows, int64_t r)
{
    return r < n_rows / FLOAT_PACK_ROWS * FLOAT_PACK_ROWS ? FLOAT_PACK_ROWS : 1;
}

/* y[t * y_stride + r] = dot(w_r, x_t) for r < n_rows (a multiple of
 * PACK_ROWS for the integer formats, any number for the float ones) and
 * t < n_tok: wp the packed groups of those rows, x_t as in
 * hearth_gemm_fn (in the weight type's activation format); for Q8_0
 * activations x_sums[t * (n / 32) + b] is the sum of the quants of token
 * t's block b (hearth_q8_0_block_sums), for Q8_K it is unused (the blocks
 * carry their bsums) and may be NULL. */
typedef void (*hearth_gemm_packed_fn)(int64_t n, int64_t n_rows, int64_t n_tok, const void *wp,
                                      const void *x, size_t x_stride, const int32_t *x_sums,
                                      float *y, int64_t y_stride);

/* Convert n floats to an activation format (n a multiple of its block). */
typedef void (*hearth_act_convert_fn)(const float *x, void *y, int64_t n);

typedef struct hearth_kernels {
    const char *name;                                     /* "scalar", "avx2", ... */
    hearth_type act_type[HEARTH_TYPE_COUNT];              /* by weight type */
    hearth_act_convert_fn act_convert[HEARTH_TYPE_COUNT]; /* by activation type */
    hearth_vec_dot_fn vec_dot[HEARTH_TYPE_COUNT];         /* by weight type */
    hearth_gemm_fn gemm[HEARTH_TYPE_COUNT];               /* by weight type */
    hearth_gemm_packed_fn gemm_packed[HEARTH_TYPE_COUNT]; /* packed weights; NULL: none */
} hearth_kernels;

/* The instruction-set paths, in order of preference (best last; a CPU runs
 * the x86 ones or the Arm ones, never both). */
typedef enum kernel_path {
    KERNEL_PATH_SCALAR,
    KERNEL_PATH_AVX2,       /* AVX2 + FMA + F16C */
    KERNEL_PATH_AVX512,     /* AVX-512 F/BW/VL on top of AVX2 */
    KERNEL_PATH_AVX512VNNI, /* AVX-512 with VNNI byte and word dot products */
    KERNEL_PATH_NEON,       /* AArch64 Advanced SIMD */
    /* Advanced SIMD with the dot-product extension (SDOT, Armv8.2 on) */
    KERNEL_PATH_NEON_DOTPROD,
    KERNEL_PATH_COUNT
} kernel_path;

/* "scalar", "avx2", "avx512", "avx512vnni", "neon", "neon-dotprod". */
const char *kernel_path_name(kernel_path path);

/* The table of a path, or NULL when this build does not have it or this
 * CPU cannot run it; then *why_not (if given) gets a static sentence
 * saying which. */
const hearth_kernels *kernel_path_table(kernel_path path, const char **why_not);

/* Whether k is the table of a path whose processor runs AVX2 and FMA code
 * (the AVX2 and AVX-512 paths): the recurrences' kernels (wkv.h, delta.h)
 * are compiled once for all of them. */
bool kernel_table_is_avx2_family(const hearth_kernels *k);

/* The table for a HEARTH_CPU value: a path's name, or NULL, "" or "auto"
 * for the best path this CPU runs.  HEARTH_E_UNSUPPORTED for a name that
 * is unknown or whose path is unavailable, with a message saying why and
 * which paths are available. */
hearth_status kernel_path_choose(const char *want, const hearth_kernels **out);

/* The kernels to use, chosen on first use and fixed afterwards: the path
 * named by the HEARTH_CPU environment variable, or the best one this CPU
 * runs.  An unknown or unavailable HEARTH_CPU is an error
 * (HEARTH_E_UNSUPPORTED, with a message naming the paths available). */
hearth_status hearth_kernels_select(const hearth_kernels **out);

/* Packing (simd/pack.c), the same layout for every path.  Whether type t
 * has a packed layout; the bytes of n_rows packed rows of n_in elements
 * (for the integer formats n_rows a multiple of PACK_ROWS, n_in of the
 * block); and the packing of such rows, row r at src + r * row_bytes, into
 * dst.  A float matrix's rows may be packed in parts that begin at whole
 * groups, all but the last holding whole groups only. */
bool hearth_pack_supported(hearth_type t);
size_t hearth_packed_bytes(hearth_type t, int64_t n_rows, int64_t n_in);
void hearth_pack_rows(hearth_type t, const void *src, size_t row_bytes, int64_t n_rows, int64_t n_in,
                      void *dst);
/* The other way, for one row: row (of the matrix of n_rows rows whose
 * packed rows start at packed) in its original layout into dst (its row
 * bytes), so that the packed copy can stand in for the original (an
 * embedding's rows). */
void hearth_unpack_row(hearth_type t, const void *packed, int64_t n_rows, int64_t row, int64_t n_in, void *dst);

/* Whether packing changes the summation order of type t's products: true
 * for the integer formats, false for the float ones (see above). */
bool hearth_pack_reorders(hearth_type t);

/* Whether the kernels k read a matrix of type t, n_out rows of n_in
 * elements, packed: t has a packed layout and k a packed kernel for it,
 * and, for the integer formats, the rows make whole row groups.  The CPU
 * packs such matrices at load, and a device computing them sums in the
 * packed order above where packing reorders the sums. */
bool hearth_kernels_read_packed(const hearth_kernels *k, hearth_type t, int64_t n_out, int64_t n_in);

/* sums[b] = the sum of the quants of Q8_0 block b, for b < n_blocks. */
void hearth_q8_0_block_sums(const void *x, int64_t n_blocks, int32_t *sums);

/* The scalar reference kernels. */
const hearth_kernels *hearth_kernels_scalar(void);

/* The tables of the x86 paths (simd/avx2.c, simd/avx512.c); defined only
 * when they are built. */
const hearth_kernels *hearth_kernels_avx2(void);
const hearth_kernels *hearth_kernels_avx512(void);
const hearth_kernels *hearth_kernels_avx512vnni(void);

/* The tables of the AArch64 paths (simd/neon.c, built twice); defined only
 * when they are built. */
const hearth_kernels *hearth_kernels_neon(void);
const hearth_kernels *hearth_kernels_neon_dotprod(void);

/* Whether the weight type has a matrix-product kernel. */
static inline bool hearth_kernels_supports(const hearth_kernels *k, hearth_type t)
{
    return (unsigned)t < HEARTH_TYPE_COUNT && k->vec_dot[t] != NULL && k->gemm[t] != NULL;
}

#endif /* HEARTH_KERNELS_H */

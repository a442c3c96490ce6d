/*
 * test-attention.c -- the attention kernels of simd/ and the CPU
 * backend's attention over the KV cache.
 *
 * - The scalar block kernel, fed key ranges in blocks of random lengths
 *   and split into ranges whose states are merged, against softmax(q k) v
 *   computed in double precision from the cache entries read back as
 *   floats: ragged head dimensions, numbers of rows and keys, a causal
 *   limit per row (rows that see none of a block or of a range), a
 *   sliding-window start per row and soft-capped scores in some problems,
 *   every cache type, and scores large enough that exp would overflow
 *   without subtracting the maximum.
 * - Every instruction-set path this build has and this CPU runs (AVX2,
 *   AVX-512, NEON) against its scalar twin on the same problems.
 * - The CPU backend's attention (cache store, grouped query heads, tiles
 *   of tokens, groups wider than a work item, split key ranges in decode,
 *   sliding windows and soft-capping, attention sinks) against the
 *   double-precision formula, for 1 to 3 threads.
 * - Keys that carry their values (multi-head latent attention: one key
 *   head per position, [k_rope | c_kv], the values its last elements):
 *   the kernels reading the values from the key rows, against the double
 *   formula and the vector paths against the scalar one; the backend's
 *   attention storing [k | v] as one row and giving n_head heads of the
 *   value width.
 * - A share of the heads (tensor parallelism by heads): the attention of
 *   a contiguous share of the key/value heads, with their query heads and
 *   sinks, over a cache of those heads only, gives those heads' outputs
 *   of the whole attention bit for bit, for every share of 2 and 3 ranks
 *   and every cache type; tp_share's shares.
 * - Attention through block tables, on every path and cache type: a
 *   batch of several sequences (prefill chunks and decode rows, some past
 *   one key range) whose blocks are scattered over the pool gives each
 *   sequence's rows bit for bit as the sequence alone through the same
 *   table; with blocks of a multiple of ATTN_KEY_BLOCK positions, bit for
 *   bit as the sequence alone in one contiguous block, and within rounding
 *   of it with blocks of 16.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "backend.h"
#include "kv_cache.h"
#include "model.h"
#include "testutil.h"

static const hearth_type cache_types[] = {HEARTH_TYPE_F32, HEARTH_TYPE_F16, HEARTH_TYPE_Q8_0};
#define N_CACHE_TYPES ((int)HEARTH_ARRAY_LEN(cache_types))

/* Head dimensions: ragged for the float types, whole blocks for Q8_0. */
static const int32_t float_dims[] = {1, 3, 8, 13, 16, 17, 31, 64, 80, 128};
static const int32_t q8_dims[] = {32, 64, 96, 128};
static const int32_t row_counts[] = {1, 2, 3, 4, 5, 8, 9, 13, 17};
static const int32_t key_counts[] = {1, 2, 7, 63, 64, 65, 130, 201};

/* A cache of n_pos positions by n_head_kv heads with random keys and
 * values, and the entries read back as floats.  vd < hd: the values are
 * the last vd elements of the key heads (struct kv_shape), no rows of
 * their own. */
struct cache_fixture {
    struct kv_cache *kv;
    int32_t vd;       /* elements of a value */
    float *k_f, *v_f; /* [pos][head][i] as stored (v_f: vd per head) */
};

static void fixture_new(struct cache_fixture *f, hearth_type type, int32_t n_pos, int32_t n_head_kv,
                        int32_t hd, int32_t vd, test_rng *rng)
{
    const bool in_keys = vd < hd;
    const struct kv_shape shape = {n_head_kv, hd, in_keys, in_keys ? hd - vd : 0};
    ck_assert_int_eq(kv_cache_new(type, n_pos, 1, 1, &shape, NULL, &f->kv), HEARTH_OK);
    ck_assert(in_keys == (f->kv->layers[0].v == NULL));
    f->vd = vd;
    const int64_t row = (int64_t)n_head_kv * hd, vrow = (int64_t)n_head_kv * vd;
    float *tmp = test_malloc((size_t)row * sizeof(float));
    f->k_f = test_malloc((size_t)(n_pos * row) * sizeof(float));
    f->v_f = test_malloc((size_t)(n_pos * vrow) * sizeof(float));
    for (int32_t p = 0; p < n_pos; p++) {
        for (int64_t i = 0; i < row; i++) tmp[i] = (float)test_rng_normal(rng);
        if (in_keys) /* the values in [-1, 1], as in their own rows */
            for (int32_t h = 0; h < n_head_kv; h++)
                for (int32_t i = hd - vd; i < hd; i++) tmp[(int64_t)h * hd + i] = (float)(2.0 * test_rng_uniform(rng) - 1.0);
        kv_cache_store(f->kv, f->kv->layers[0].k, p, tmp);
        for (int32_t h = 0; h < n_head_kv; h++)
            kv_cache_load_head(f->kv, f->kv->layers[0].k, p, h, f->k_f + p * row + (int64_t)h * hd);
        if (in_keys) {
            for (int32_t h = 0; h < n_head_kv; h++)
                memcpy(f->v_f + p * vrow + (int64_t)h * vd, f->k_f + p * row + (int64_t)h * hd + (hd - vd),
                       (size_t)vd * sizeof(float));
            continue;
        }
        for (int64_t i = 0; i < row; i++) tmp[i] = (float)(2.0 * test_rng_uniform(rng) - 1.0);
        kv_cache_store(f->kv, f->kv->layers[0].v, p, tmp);
        for (int32_t h = 0; h < n_head_kv; h++)
            kv_cache_load_head(f->kv, f->kv->layers[0].v, p, h, f->v_f + p * row + (int64_t)h * hd);
    }
    free(tmp);
}

/* Where head h's values of position 0 lie: in the key rows or their own. */
static const uint8_t *fixture_values(const struct cache_fixture *f, int32_t h)
{
    const struct kv_cache *kv = f->kv;
    const uint8_t *base = kv->values_in_keys ? kv->layers[0].k + kv->value_offset : kv->layers[0].v;
    return base + (size_t)h * kv->head_bytes;
}

static void fixture_free(struct cache_fixture *f)
{
    kv_cache_free(f->kv);
    free(f->k_f);
    free(f->v_f);
}

/* out = softmax_j(c tanh(q . k_j * scale / c)) v_j over first <= j <
 * n_visible, in double; softcap c = 0: the scores as they are. */
static void reference_row_window(const struct cache_fixture *f, int32_t h, const float *q, double scale,
                                 int32_t first, int32_t n_visible, double softcap, double sink, float *out)
{
    const int32_t hd = f->kv->head_dim, vd = f->vd;
    const int64_t row = f->kv->row_elems, vrow = (int64_t)f->kv->n_head_kv * vd;
    double *s = test_malloc((size_t)n_visible * sizeof(double));
    double m = -INFINITY;
    for (int32_t j = first; j < n_visible; j++) {
        const float *k = f->k_f + j * row + (int64_t)h * hd;
        double d = 0.0;
        for (int32_t i = 0; i < hd; i++) d += (double)q[i] * k[i];
        s[j] = d * scale;
        if (softcap > 0) s[j] = softcap * tanh(s[j] / softcap);
        if (s[j] > m) m = s[j];
    }
    if (sink > m) m = sink;
    double l = sink == -INFINITY ? 0.0 : exp(sink - m); /* a sink: one more score, no value */
    for (int32_t j = first; j < n_visible; j++) {
        s[j] = exp(s[j] - m);
        l += s[j];
    }
    for (int32_t i = 0; i < vd; i++) {
        double a = 0.0;
        for (int32_t j = first; j < n_visible; j++) a += s[j] * f->v_f[j * vrow + (int64_t)h * vd + i];
        out[i] = (float)(a / l);
    }
    free(s);
}

/* Run a block kernel over keys [0, n_keys) in `parts` ranges, each in
 * blocks of random lengths, and merge: out is n_rows x vd. */
static void run_kernel(attn_block_fn block, const struct cache_fixture *f, int32_t h, int32_t n_rows,
                       const float *q, const int32_t *n_visible, const int32_t *first_visible, float softcap,
                       int32_t n_keys, int32_t parts, uint64_t seed, float *out)
{
    const int32_t hd = f->kv->head_dim, vd = f->vd;
    float *max = test_malloc((size_t)(parts * n_rows) * sizeof(float));
    float *sum = test_malloc((size_t)(parts * n_rows) * sizeof(float));
    float *acc = test_malloc((size_t)parts * n_rows * vd * sizeof(float));
    float *scores = test_malloc((size_t)n_rows * ATTN_KEY_BLOCK * sizeof(float));
    test_rng rng;
    test_rng_seed(&rng, seed);
    const uint8_t *k = f->kv->layers[0].k + (size_t)h * f->kv->head_bytes;
    const uint8_t *v = fixture_values(f, h);
    for (int32_t p = 0; p < parts; p++) {
        struct attn_rows rows = {
            .head_dim = hd,
            .v_dim = vd,
            .n_rows = n_rows,
            .q = q,
            .n_visible = n_visible,
            .first_visible = first_visible,
            .softcap = softcap,
            .max = max + p * n_rows,
            .sum = sum + p * n_rows,
            .acc = acc + (size_t)p * n_rows * vd,
            .scores = scores,
        };
        attn_state_init(n_rows, vd, rows.max, rows.sum, rows.acc);
        const int32_t k0 = (int32_t)((int64_t)n_keys * p / parts);
        const int32_t k1 = (int32_t)((int64_t)n_keys * (p + 1) / parts);
        for (int32_t j0 = k0; j0 < k1;) {
            const int32_t len = 1 + (int32_t)(test_rng_next(&rng) % ATTN_KEY_BLOCK);
            const int32_t j1 = HEARTH_MIN(k1, j0 + len);
            block(&rows, k, v, f->kv->row_bytes, j0, j1);
            j0 = j1;
        }
    }
    for (int32_t r = 0; r < n_rows; r++)
        attn_merge(vd, parts, max + r, sum + r, (size_t)n_rows, acc + (size_t)r * vd, (size_t)n_rows * vd,
                   -INFINITY, out + (size_t)r * vd);
    free(max);
    free(sum);
    free(acc);
    free(scores);
}

/* Largest |a - b| over n floats; NaN counts as infinitely far. */
static double max_diff(const float *a, const float *b, int64_t n)
{
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - b[i]);
        if (!(d <= worst)) worst = isnan(d) ? INFINITY : d;
    }
    return worst;
}

/* One random problem: which path (NULL: the double reference) against
 * the scalar kernel.  query_scale widens the scores; vd < hd: the values
 * are the keys' last vd elements. */
static void check_problem(const struct attn_kernels *path, hearth_type type, int32_t hd, int32_t vd,
                          int32_t n_rows, int32_t n_keys, double query_scale, uint64_t seed)
{
    test_rng rng;
    test_rng_seed(&rng, seed);
    struct cache_fixture f;
    const int32_t n_head_kv = 2, h = 1; /* the second head: entries not at the row's start */
    fixture_new(&f, type, n_keys, n_head_kv, hd, vd, &rng);
    const double scale = 1.0 / sqrt((double)hd);
    float *q = test_malloc((size_t)n_rows * hd * sizeof(float));
    float *q_raw = test_malloc((size_t)n_rows * hd * sizeof(float));
    int32_t *n_visible = test_malloc((size_t)n_rows * sizeof(int32_t));
    int32_t *first = test_malloc((size_t)n_rows * sizeof(int32_t));
    /* a third of the problems have a sliding window (a first visible key
     * per row), a quarter soft-capped scores */
    const bool windowed = seed % 3 == 0;
    const float softcap = seed % 4 == 1 ? 1.5f : 0.0f;
    for (int32_t r = 0; r < n_rows; r++) {
        for (int32_t i = 0; i < hd; i++) {
            q_raw[r * hd + i] = (float)(query_scale * test_rng_normal(&rng));
            q[r * hd + i] = (float)(q_raw[r * hd + i] * scale);
        }
        /* every row sees at least one key; some see all */
        n_visible[r] = r == 0 ? n_keys : 1 + (int32_t)(test_rng_next(&rng) % (uint64_t)n_keys);
        first[r] = windowed ? (int32_t)(test_rng_next(&rng) % (uint64_t)n_visible[r]) : 0;
    }
    float *want = test_malloc((size_t)n_rows * vd * sizeof(float));
    float *got = test_malloc((size_t)n_rows * vd * sizeof(float));
    const int32_t parts = 1 + (int32_t)(seed % 3);
    const int32_t *fv = windowed ? first : NULL;
    run_kernel(attn_kernels_scalar()->block[type], &f, h, n_rows, q, n_visible, fv, softcap, n_keys, parts,
               seed, got);
    if (path) {
        run_kernel(path->block[type], &f, h, n_rows, q, n_visible, fv, softcap, n_keys,
                   1 + (int32_t)((seed + 1) % 3), seed + 7, want);
    } else {
        for (int32_t r = 0; r < n_rows; r++)
            reference_row_window(&f, h, q_raw + r * hd, scale, first[r], n_visible[r], softcap, -INFINITY,
                                 want + (size_t)r * vd);
    }
    /* outputs are convex combinations of values in [-1, 1]; the scores'
     * rounding grows with the head (576: MLA's latent keys) */
    const double d = max_diff(got, want, (int64_t)n_rows * vd);
    ck_assert_msg(d < 2e-5 * fmax(1.0, hd / 128.0), "%s %s: head dim %d, values %d, %d rows, %d keys, scale %g: differs by %g",
                  path ? path->name : "scalar vs double", hearth_type_name(type), hd, vd, n_rows, n_keys,
                  query_scale, d);
    free(q);
    free(q_raw);
    free(n_visible);
    free(first);
    free(want);
    free(got);
    fixture_free(&f);
}

static void check_all_shapes(const struct attn_kernels *path, hearth_type type)
{
    const int32_t *dims = type == HEARTH_TYPE_Q8_0 ? q8_dims : float_dims;
    const int n_dims = type == HEARTH_TYPE_Q8_0 ? (int)HEARTH_ARRAY_LEN(q8_dims) : (int)HEARTH_ARRAY_LEN(float_dims);
    uint64_t seed = 1000 * (uint64_t)type;
    for (int a = 0; a < n_dims; a++)
        for (int b = 0; b < (int)HEARTH_ARRAY_LEN(row_counts); b++)
            for (int c = 0; c < (int)HEARTH_ARRAY_LEN(key_counts); c++) {
                /* scores of a few units, and of hundreds: exp(s) alone would overflow */
                const double query_scale = (a + b + c) % 4 == 0 ? 20.0 : 1.0;
                check_problem(path, type, dims[a], dims[a], row_counts[b], key_counts[c], query_scale, ++seed);
            }
    /* values in the keys: (key, value) widths, MLA's among them, ragged for
     * the float types, the value's start on a Q8_0 block for Q8_0 */
    static const int32_t float_latent[][2] = {{24, 16}, {16, 13}, {19, 3}, {144, 80}, {576, 512}};
    static const int32_t q8_latent[][2] = {{64, 32}, {96, 64}, {576, 512}};
    const int32_t(*latent)[2] = type == HEARTH_TYPE_Q8_0 ? q8_latent : float_latent;
    const int n_latent = type == HEARTH_TYPE_Q8_0 ? (int)HEARTH_ARRAY_LEN(q8_latent) : (int)HEARTH_ARRAY_LEN(float_latent);
    for (int a = 0; a < n_latent; a++)
        for (int b = 0; b < (int)HEARTH_ARRAY_LEN(row_counts); b += 2)
            for (int c = 0; c < (int)HEARTH_ARRAY_LEN(key_counts); c += 2)
                check_problem(path, type, latent[a][0], latent[a][1], row_counts[b], key_counts[c],
                              (a + b + c) % 4 == 0 ? 20.0 : 1.0, ++seed);
}

START_TEST(test_scalar_against_double)
{
    check_all_shapes(NULL, cache_types[_i]);
}
END_TEST

START_TEST(test_paths_against_scalar)
{
    for (int p = KERNEL_PATH_SCALAR + 1; p < KERNEL_PATH_COUNT; p++) {
        const struct attn_kernels *path = attn_kernels_for_path((kernel_path)p);
        if (!path) continue;
        /* paths that share a table (avx512 and avx512vnni, neon and
         * neon-dotprod) check it once */
        bool seen = false;
        for (int e = KERNEL_PATH_SCALAR; e < p; e++) seen |= attn_kernels_for_path((kernel_path)e) == path;
        if (!seen) check_all_shapes(path, cache_types[_i]);
    }
}
END_TEST

/* Every block kernel is present for every cache type the cache supports,
 * and every vector path has its own. */
START_TEST(test_tables_complete)
{
    for (int p = 0; p < KERNEL_PATH_COUNT; p++) {
        const struct attn_kernels *path = attn_kernels_for_path((kernel_path)p);
        if (!kernel_path_table((kernel_path)p, NULL)) {
            ck_assert_ptr_null(path);
            continue;
        }
        ck_assert_ptr_nonnull(path);
        /* every vector path has kernels of its own, tested against the scalar ones */
        if (p != KERNEL_PATH_SCALAR) ck_assert_ptr_ne(path, attn_kernels_scalar());
        for (int t = 0; t < N_CACHE_TYPES; t++) ck_assert_ptr_nonnull(path->block[cache_types[t]]);
        ck_assert_ptr_eq(attn_kernels_matching(kernel_path_table((kernel_path)p, NULL)), path);
    }
}
END_TEST

/* The backend's attention: a prefill of n_prompt tokens, then one decode
 * token, each output against the formula over the cache as stored. */
static void check_backend_window(hearth_type type, int n_threads, int32_t n_head, int32_t n_head_kv,
                                 int32_t hd, int32_t n_prompt, int32_t window, float softcap, bool with_sinks)
{
    struct hearth_backend *be;
    ck_assert_int_eq(backend_cpu_new(n_threads, &be), HEARTH_OK);
    struct hparams hp = {.n_head = n_head, .n_head_kv = n_head_kv, .head_dim = hd, .n_layer = 1,
                         .n_swa = window, .swa_period = 1, .attn_softcap = softcap};
    const int32_t n_pos = n_prompt + 1;
    struct kv_cache *kv;
    ck_assert_int_eq(kv_cache_new(type, n_pos, 1, 1, &(struct kv_shape){n_head_kv, hd, false, 0}, NULL, &kv), HEARTH_OK);
    struct act q, k, v, out;
    ck_assert_int_eq(be->ops->act_alloc(be, &q, n_prompt, (int64_t)n_head * hd), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &k, n_prompt, (int64_t)n_head_kv * hd), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &v, n_prompt, (int64_t)n_head_kv * hd), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &out, n_prompt, (int64_t)n_head * hd), HEARTH_OK);
    test_rng rng;
    test_rng_seed(&rng, 77 + (uint64_t)type);
    int32_t *pos = test_malloc((size_t)n_pos * sizeof(int32_t));
    for (int32_t t = 0; t < n_pos; t++) pos[t] = t;
    struct cache_fixture f = {.kv = kv, .vd = hd};
    const int64_t row = (int64_t)n_head_kv * hd;
    f.k_f = test_malloc((size_t)(n_pos * row) * sizeof(float));
    f.v_f = test_malloc((size_t)(n_pos * row) * sizeof(float));
    float *want = test_malloc((size_t)hd * sizeof(float));
    const double scale = 1.0 / sqrt((double)hd);
    /* attention sinks: per head, from well below the scores to far above
     * them (then most of each row's weight goes to the sink) */
    float *sinks = with_sinks ? test_malloc((size_t)n_head * sizeof(float)) : NULL;
    for (int32_t h = 0; with_sinks && h < n_head; h++) sinks[h] = h % 3 == 2 ? 12.0f : (float)(3.0 * test_rng_normal(&rng));

    for (int step = 0; step < 2; step++) {
        const int32_t first = step == 0 ? 0 : n_prompt, n_tok = step == 0 ? n_prompt : 1;
        for (int64_t i = 0; i < n_tok * q.width; i++) q.host[i] = (float)test_rng_normal(&rng);
        for (int64_t i = 0; i < n_tok * k.width; i++) k.host[i] = (float)test_rng_normal(&rng);
        for (int64_t i = 0; i < n_tok * v.width; i++) v.host[i] = (float)(2.0 * test_rng_uniform(&rng) - 1.0);
        q.rows = k.rows = v.rows = n_tok;
        const int32_t seq_start[2] = {0, n_tok}, table_start[1] = {0}, blocks[1] = {0};
        struct batch_pos bp = {.pos = pos + first, .slot = pos + first, .n_tokens = n_tok, .n_seqs = 1,
                               .seq_start = seq_start, .blocks = blocks, .table_start = table_start};
        ck_assert_int_eq(be->ops->attention(be, &out, &q, &k, &v, kv, 0, &hp, sinks, &bp), HEARTH_OK);
        for (int32_t p = first; p < first + n_tok; p++)
            for (int32_t h = 0; h < n_head_kv; h++) {
                kv_cache_load_head(kv, kv->layers[0].k, p, h, f.k_f + p * row + (int64_t)h * hd);
                kv_cache_load_head(kv, kv->layers[0].v, p, h, f.v_f + p * row + (int64_t)h * hd);
            }
        for (int32_t t = 0; t < n_tok; t++)
            for (int32_t h = 0; h < n_head; h++) {
                const int32_t p = first + t;
                reference_row_window(&f, h / (n_head / n_head_kv), q.host + t * q.width + (int64_t)h * hd,
                                     scale, window ? HEARTH_MAX(0, p + 1 - window) : 0, p + 1, softcap,
                                     sinks ? sinks[h] : -INFINITY, want);
                const double d = max_diff(out.host + t * out.width + (int64_t)h * hd, want, hd);
                ck_assert_msg(d < 2e-5, "%s cache, %d threads, %d tokens from %d: token %d head %d differs by %g",
                              hearth_type_name(type), n_threads, n_tok, first, t, h, d);
            }
    }
    free(want);
    free(sinks);
    free(pos);
    free(f.k_f);
    free(f.v_f);
    be->ops->act_free(be, &q);
    be->ops->act_free(be, &k);
    be->ops->act_free(be, &v);
    be->ops->act_free(be, &out);
    kv_cache_free(kv);
    backend_cpu_free(be);
}

/* The backend's multi-head latent attention: one key head of kd + vd per
 * position stored from k (kd) and v (vd), the scores over the whole row,
 * the values its last vd elements; a prefill of n_prompt tokens then one
 * decode token against the formula over the cache as stored. */
static void check_backend_latent(hearth_type type, int n_threads, int32_t n_head, int32_t kd, int32_t vd,
                                 int32_t n_prompt)
{
    struct hearth_backend *be;
    ck_assert_int_eq(backend_cpu_new(n_threads, &be), HEARTH_OK);
    const int32_t hd = kd + vd;
    const struct hparams hp = {.n_head = n_head, .n_head_kv = 1, .head_dim = hd, .n_layer = 1, .kv_latent = vd,
                               .attn_scale = 0.25f};
    const int32_t n_pos = n_prompt + 1;
    const struct kv_shape shape = kv_shape_of(&hp);
    ck_assert(shape.values_in_keys);
    ck_assert_int_eq(shape.value_first, kd);
    struct kv_cache *kv;
    ck_assert_int_eq(kv_cache_new(type, n_pos, 1, 1, &shape, NULL, &kv), HEARTH_OK);
    ck_assert_ptr_null(kv->layers[0].v);
    ck_assert_uint_eq(kv_cache_bytes(kv), hearth_type_row_bytes(type, hd) * (size_t)n_pos);
    ck_assert_uint_eq(kv_cache_bytes_per_token(type, 3, &shape), 3 * hearth_type_row_bytes(type, hd));
    struct act q, k, v, out;
    ck_assert_int_eq(be->ops->act_alloc(be, &q, n_prompt, (int64_t)n_head * hd), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &k, n_prompt, kd), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &v, n_prompt, vd), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &out, n_prompt, (int64_t)n_head * vd), HEARTH_OK);
    test_rng rng;
    test_rng_seed(&rng, 91 + (uint64_t)type);
    int32_t *pos = test_malloc((size_t)n_pos * sizeof(int32_t));
    for (int32_t t = 0; t < n_pos; t++) pos[t] = t;
    struct cache_fixture f = {.kv = kv, .vd = vd};
    f.k_f = test_malloc((size_t)n_pos * hd * sizeof(float));
    f.v_f = test_malloc((size_t)n_pos * vd * sizeof(float));
    float *want = test_malloc((size_t)vd * sizeof(float));
    for (int step = 0; step < 2; step++) {
        const int32_t first = step == 0 ? 0 : n_prompt, n_tok = step == 0 ? n_prompt : 1;
        for (int64_t i = 0; i < n_tok * q.width; i++) q.host[i] = (float)test_rng_normal(&rng);
        for (int64_t i = 0; i < n_tok * kd; i++) k.host[i] = (float)test_rng_normal(&rng);
        for (int64_t i = 0; i < n_tok * vd; i++) v.host[i] = (float)(2.0 * test_rng_uniform(&rng) - 1.0);
        q.rows = k.rows = v.rows = n_tok;
        const int32_t seq_start[2] = {0, n_tok}, table_start[1] = {0}, blocks[1] = {0};
        struct batch_pos bp = {.pos = pos + first, .slot = pos + first, .n_tokens = n_tok, .n_seqs = 1,
                               .seq_start = seq_start, .blocks = blocks, .table_start = table_start};
        ck_assert_int_eq(be->ops->attention(be, &out, &q, &k, &v, kv, 0, &hp, NULL, &bp), HEARTH_OK);
        ck_assert_int_eq(out.width, (int64_t)n_head * vd);
        for (int32_t p = first; p < first + n_tok; p++) {
            kv_cache_load_head(kv, kv->layers[0].k, p, 0, f.k_f + (int64_t)p * hd);
            memcpy(f.v_f + (int64_t)p * vd, f.k_f + (int64_t)p * hd + kd, (size_t)vd * sizeof(float));
            /* the row is [k | v] as given, within the cache type's rounding */
            const int32_t t = p - first;
            for (int32_t i = 0; i < hd; i++) {
                const float x = i < kd ? k.host[t * kd + i] : v.host[t * vd + i - kd];
                ck_assert_msg(fabsf(f.k_f[(int64_t)p * hd + i] - x) <= 0.03f * fmaxf(1.0f, fabsf(x)),
                              "position %d element %d: %g stored as %g", p, i, (double)x,
                              (double)f.k_f[(int64_t)p * hd + i]);
            }
        }
        for (int32_t t = 0; t < n_tok; t++)
            for (int32_t h = 0; h < n_head; h++) {
                const int32_t p = first + t;
                reference_row_window(&f, 0, q.host + t * q.width + (int64_t)h * hd, hp.attn_scale, 0, p + 1, 0.0,
                                     -INFINITY, want);
                const double d = max_diff(out.host + t * out.width + (int64_t)h * vd, want, vd);
                ck_assert_msg(d < 2e-5, "latent %s cache, %d threads, %d tokens from %d: token %d head %d differs by %g",
                              hearth_type_name(type), n_threads, n_tok, first, t, h, d);
            }
    }
    free(want);
    free(pos);
    free(f.k_f);
    free(f.v_f);
    be->ops->act_free(be, &q);
    be->ops->act_free(be, &k);
    be->ops->act_free(be, &v);
    be->ops->act_free(be, &out);
    kv_cache_free(kv);
    backend_cpu_free(be);
}

/* A cache whose values start inside a block of its type is refused. */
START_TEST(test_latent_shape_refused)
{
    struct kv_cache *kv = NULL;
    ck_assert_int_eq(kv_cache_new(HEARTH_TYPE_Q8_0, 16, 1, 1, &(struct kv_shape){1, 96, true, 16}, NULL, &kv),
                     HEARTH_E_INVALID);
    ck_assert_ptr_null(kv);
    ck_assert_int_eq(kv_cache_new(HEARTH_TYPE_F16, 16, 1, 1, &(struct kv_shape){1, 96, true, 96}, NULL, &kv),
                     HEARTH_E_INVALID);
    ck_assert_int_eq(kv_cache_new(HEARTH_TYPE_F16, 16, 1, 1, &(struct kv_shape){1, 96, true, 16}, NULL, &kv),
                     HEARTH_OK);
    kv_cache_free(kv);
}
END_TEST

static void check_backend(hearth_type type, int n_threads, int32_t n_head, int32_t n_head_kv, int32_t hd,
                          int32_t n_prompt)
{
    check_backend_window(type, n_threads, n_head, n_head_kv, hd, n_prompt, 0, 0.0f, false);
}

START_TEST(test_backend_attention)
{
    const hearth_type type = cache_types[_i];
    for (int n_threads = 1; n_threads <= 3; n_threads++) {
        /* grouped query heads (3 per key/value head), a prompt of ragged
         * tiles, and a decode step whose keys are split into ranges */
        check_backend(type, n_threads, 6, 2, type == HEARTH_TYPE_Q8_0 ? 64 : 40, 300);
        /* one head, multi-head (group 1), short prompts */
        check_backend(type, n_threads, 1, 1, 32, 5);
        check_backend(type, n_threads, 4, 4, 32, 17);
        /* sliding windows (shorter than a key block, one, and longer than a
         * key range) with soft-capped scores */
        check_backend_window(type, n_threads, 4, 2, 32, 300, 37, 0.0f, false);
        check_backend_window(type, n_threads, 4, 2, 32, 300, 64, 1.5f, false);
        check_backend_window(type, n_threads, 6, 2, 64, 600, 290, 2.0f, false);
        /* attention sinks (gpt-oss), with and without a window, over key
         * ranges split between threads */
        check_backend_window(type, n_threads, 6, 2, 64, 300, 0, 0.0f, true);
        check_backend_window(type, n_threads, 8, 2, 64, 600, 128, 0.0f, true);
        /* values in the keys (multi-head latent attention): DeepSeek's
         * 64 + 512 and small ragged ones, over split key ranges */
        check_backend_latent(type, n_threads, 4, 64, 512, 300);
        if (type != HEARTH_TYPE_Q8_0) check_backend_latent(type, n_threads, 3, 8, 20, 70);
        else check_backend_latent(type, n_threads, 3, 32, 64, 70);
        /* groups of more query heads than an item takes (ATTN_HEAD_CHUNK,
         * 16): 40 on one latent head (16 + 16 + 8), 20 on each of two */
        check_backend_latent(type, n_threads, 40, 32, 64, 90);
        check_backend(type, n_threads, 40, 2, 32, 70);
    }
}
END_TEST

/* A share of the heads (tensor parallelism by heads, model.h's struct
 * attn_heads): the attention of key/value heads first .. first + count -
 * 1 and their query heads, over a cache of those heads only, with their
 * sinks, gives those heads' outputs of the attention over every head bit
 * for bit -- a prefill past a key range, then a decode step, each on its
 * own thread count as ranks may have -- for every share of 2 and 3 ranks
 * (tp_share). */
static void check_heads_split(hearth_type type, int32_t n_head, int32_t n_head_kv, int32_t hd, int32_t n_prompt,
                              int32_t window, bool with_sinks)
{
    const int32_t group = n_head / n_head_kv, n_pos = n_prompt + 1;
    test_rng rng;
    test_rng_seed(&rng, 900 + (uint64_t)type + (uint64_t)n_head);
    /* the whole step's inputs and outputs, per step */
    float *qs[2], *ks[2], *vs[2], *whole[2];
    for (int step = 0; step < 2; step++) {
        const int32_t n_tok = step == 0 ? n_prompt : 1;
        qs[step] = test_malloc((size_t)n_tok * (size_t)n_head * (size_t)hd * sizeof(float));
        ks[step] = test_malloc((size_t)n_tok * (size_t)n_head_kv * (size_t)hd * sizeof(float));
        vs[step] = test_malloc((size_t)n_tok * (size_t)n_head_kv * (size_t)hd * sizeof(float));
        whole[step] = test_malloc((size_t)n_tok * (size_t)n_head * (size_t)hd * sizeof(float));
        for (int64_t i = 0; i < (int64_t)n_tok * n_head * hd; i++) qs[step][i] = (float)test_rng_normal(&rng);
        for (int64_t i = 0; i < (int64_t)n_tok * n_head_kv * hd; i++) {
            ks[step][i] = (float)test_rng_normal(&rng);
            vs[step][i] = (float)(2.0 * test_rng_uniform(&rng) - 1.0);
        }
    }
    float *sinks = with_sinks ? test_malloc((size_t)n_head * sizeof(float)) : NULL;
    for (int32_t h = 0; with_sinks && h < n_head; h++) sinks[h] = (float)(3.0 * test_rng_normal(&rng));
    int32_t *pos = test_malloc((size_t)n_pos * sizeof(int32_t));
    for (int32_t t = 0; t < n_pos; t++) pos[t] = t;

    /* one rank first: every head, on 2 threads; then each rank of 2 and
     * of 3, on 1 to 3 threads */
    for (int32_t n_ranks = 1; n_ranks <= 3; n_ranks++)
        for (int32_t r = 0; r < n_ranks; r++) {
            int64_t first, count;
            tp_share(n_head_kv, n_ranks, r, &first, &count);
            if (count == 0) continue;
            const int32_t nq = (int32_t)count * group, q0 = (int32_t)first * group;
            struct hearth_backend *be;
            ck_assert_int_eq(backend_cpu_new(n_ranks == 1 ? 2 : 1 + r % 3, &be), HEARTH_OK);
            struct hparams hp = {.n_head = nq, .n_head_kv = (int32_t)count, .head_dim = hd, .n_layer = 1,
                                 .n_swa = window, .swa_period = 1};
            struct kv_cache *kv;
            ck_assert_int_eq(kv_cache_new(type, n_pos, 1, 1, &(struct kv_shape){(int32_t)count, hd, false, 0}, NULL, &kv),
                             HEARTH_OK);
            struct act q, k, v, out;
            ck_assert_int_eq(be->ops->act_alloc(be, &q, n_prompt, (int64_t)nq * hd), HEARTH_OK);
            ck_assert_int_eq(be->ops->act_alloc(be, &k, n_prompt, count * hd), HEARTH_OK);
            ck_assert_int_eq(be->ops->act_alloc(be, &v, n_prompt, count * hd), HEARTH_OK);
            ck_assert_int_eq(be->ops->act_alloc(be, &out, n_prompt, (int64_t)nq * hd), HEARTH_OK);
            for (int step = 0; step < 2; step++) {
                const int32_t at = step == 0 ? 0 : n_prompt, n_tok = step == 0 ? n_prompt : 1;
                /* this share's columns of the whole step's rows */
                for (int32_t t = 0; t < n_tok; t++) {
                    memcpy(q.host + (int64_t)t * nq * hd, qs[step] + ((int64_t)t * n_head + q0) * hd,
                           (size_t)nq * (size_t)hd * sizeof(float));
                    memcpy(k.host + t * count * hd, ks[step] + ((int64_t)t * n_head_kv + first) * hd,
                           (size_t)(count * hd) * sizeof(float));
                    memcpy(v.host + t * count * hd, vs[step] + ((int64_t)t * n_head_kv + first) * hd,
                           (size_t)(count * hd) * sizeof(float));
                }
                q.rows = k.rows = v.rows = n_tok;
                q.width = (int64_t)nq * hd;
                k.width = v.width = count * hd;
                const int32_t seq_start[2] = {0, n_tok}, table_start[1] = {0}, blocks[1] = {0};
                struct batch_pos bp = {.pos = pos + at, .slot = pos + at, .n_tokens = n_tok, .n_seqs = 1,
                                       .seq_start = seq_start, .blocks = blocks, .table_start = table_start};
                ck_assert_int_eq(be->ops->attention(be, &out, &q, &k, &v, kv, 0, &hp, sinks ? sinks + q0 : NULL, &bp),
                                 HEARTH_OK);
                for (int32_t t = 0; t < n_tok; t++) {
                    float *w = whole[step] + ((int64_t)t * n_head + q0) * hd;
                    const float *got = out.host + (int64_t)t * nq * hd;
                    if (n_ranks == 1) memcpy(w, got, (size_t)nq * (size_t)hd * sizeof(float));
                    else
                        ck_assert_msg(memcmp(w, got, (size_t)nq * (size_t)hd * sizeof(float)) == 0,
                                      "%s cache, %d/%d heads, rank %d of %d (key/value heads %lld to %lld), step %d, "
                                      "token %d: not the whole attention's heads", hearth_type_name(type), n_head,
                                      n_head_kv, r, n_ranks, (long long)first, (long long)(first + count - 1), step, t);
                }
            }
            be->ops->act_free(be, &q);
            be->ops->act_free(be, &k);
            be->ops->act_free(be, &v);
            be->ops->act_free(be, &out);
            kv_cache_free(kv);
            backend_cpu_free(be);
        }
    for (int step = 0; step < 2; step++) {
        free(qs[step]);
        free(ks[step]);
        free(vs[step]);
        free(whole[step]);
    }
    free(sinks);
    free(pos);
}

START_TEST(test_heads_split)
{
    const hearth_type type = cache_types[_i];
    const int32_t hd = type == HEARTH_TYPE_Q8_0 ? 64 : 40;
    /* 4 key/value heads of 2 query heads (2 + 2, 2 + 1 + 1), a prompt past
     * a key range */
    check_heads_split(type, 8, 4, hd, 300, 0, false);
    /* 3 of 6 (2 + 1, 1 + 1 + 1) in a sliding window, with sinks */
    check_heads_split(type, 18, 3, hd, 200, 37, true);
    /* groups wider than a work item (ATTN_HEAD_CHUNK): 20 query heads on
     * each of 2 */
    check_heads_split(type, 40, 2, 32, 70, 0, false);
}
END_TEST

/* tp_share: contiguous shares of every unit, sizes differing by at most
 * one, the earlier ranks the larger. */
START_TEST(test_tp_share)
{
    for (int64_t n_units = 0; n_units <= 20; n_units++)
        for (int32_t n = 1; n <= 7; n++) {
            int64_t next = 0, prev_count = INT64_MAX;
            for (int32_t r = 0; r < n; r++) {
                int64_t first, count;
                tp_share(n_units, n, r, &first, &count);
                ck_assert_int_eq(first, next);
                ck_assert(count == n_units / n || count == n_units / n + 1);
                ck_assert_int_le(count, prev_count);
                prev_count = count;
                next = first + count;
            }
            ck_assert_int_eq(next, n_units);
        }
}
END_TEST

/* Attention through block tables.  One batch holds several sequences at
 * once: a prefill chunk from position 0 past ATTN_SPLIT_KEYS (its keys
 * split into ranges), a decode row at position 520 (three ranges), a
 * later prefill chunk starting inside a block and a decode row of a short
 * sequence.  Their earlier positions are in the cache already, their
 * blocks scattered over the pool in a random order, the rest of the pool
 * holding NaN bytes that any read outside the tables would spread. */
struct paged_seq {
    int32_t first; /* positions before it are in the cache already */
    int32_t n_tok; /* rows of the batch */
};
static const struct paged_seq paged_seqs[] = {{0, 300}, {520, 1}, {250, 37}, {5, 1}, {130, 20}};
#define N_PAGED ((int32_t)HEARTH_ARRAY_LEN(paged_seqs))
#define PAGED_CTX 544
static const int32_t paged_block_sizes[] = {16, 64, 128};

/* Queries, keys and values of every position of one sequence. */
struct seq_data {
    int32_t len;
    float *q, *k, *v;
};

/* A cache of n_blocks blocks of block_tokens positions, every byte NaN
 * (0xff is a NaN in F32 and F16, and a NaN scale in Q8_0). */
static struct kv_cache *nan_cache(hearth_type type, int32_t block_tokens, int32_t n_blocks, int32_t n_head_kv,
                                  int32_t hd)
{
    struct kv_cache *kv;
    ck_assert_int_eq(kv_cache_new(type, block_tokens, n_blocks, 1, &(struct kv_shape){n_head_kv, hd, false, 0}, NULL, &kv), HEARTH_OK);
    memset(kv->layers[0].k, 0xff, kv->block_bytes * (size_t)n_blocks);
    memset(kv->layers[0].v, 0xff, kv->block_bytes * (size_t)n_blocks);
    return kv;
}

static int32_t table_slot(const struct kv_cache *kv, const int32_t *table, int32_t p)
{
    return table[p / kv->block_tokens] * kv->block_tokens + p % kv->block_tokens;
}

/* Positions [0, to) of a sequence stored through its table. */
static void store_history(struct kv_cache *kv, const int32_t *table, const struct seq_data *d, int32_t to)
{
    for (int32_t p = 0; p < to; p++) {
        kv_cache_store(kv, kv->layers[0].k, table_slot(kv, table, p), d->k + p * kv->row_elems);
        kv_cache_store(kv, kv->layers[0].v, table_slot(kv, table, p), d->v + p * kv->row_elems);
    }
}

/* One attention call over a batch of the rows first[s] .. first[s] +
 * n_tok[s] - 1 of each sequence s < n_seqs, each read through tables[s];
 * out gets the batch's output rows in order. */
static void run_paged(struct hearth_backend *be, struct kv_cache *kv, const struct hparams *hp, int32_t n_seqs,
                      const struct seq_data *const *d, const int32_t *first, const int32_t *n_tok,
                      const int32_t *const *tables, float *out)
{
    const int32_t B = kv->block_tokens;
    int32_t n_rows = 0, n_table = 0;
    for (int32_t s = 0; s < n_seqs; s++) {
        n_rows += n_tok[s];
        n_table += (first[s] + n_tok[s] + B - 1) / B;
    }
    const int64_t qw = (int64_t)hp->n_head * hp->head_dim, kw = kv->row_elems;
    struct act q, k, v, o;
    ck_assert_int_eq(be->ops->act_alloc(be, &q, n_rows, qw), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &k, n_rows, kw), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &v, n_rows, kw), HEARTH_OK);
    ck_assert_int_eq(be->ops->act_alloc(be, &o, n_rows, qw), HEARTH_OK);
    int32_t *pos = test_malloc((size_t)n_rows * sizeof(int32_t));
    int32_t *slot = test_malloc((size_t)n_rows * sizeof(int32_t));
    int32_t *seq_start = test_malloc((size_t)(n_seqs + 1) * sizeof(int32_t));
    int32_t *table_start = test_malloc((size_t)n_seqs * sizeof(int32_t));
    int32_t *blocks = test_malloc((size_t)n_table * sizeof(int32_t));
    int32_t t = 0, nb = 0;
    for (int32_t s = 0; s < n_seqs; s++) {
        seq_start[s] = t;
        table_start[s] = nb;
        const int32_t len = (first[s] + n_tok[s] + B - 1) / B;
        memcpy(blocks + nb, tables[s], (size_t)len * sizeof(int32_t));
        nb += len;
        for (int32_t p = first[s]; p < first[s] + n_tok[s]; p++, t++) {
            pos[t] = p;
            slot[t] = table_slot(kv, tables[s], p);
            memcpy(q.host + t * qw, d[s]->q + p * qw, (size_t)qw * sizeof(float));
            memcpy(k.host + t * kw, d[s]->k + p * kw, (size_t)kw * sizeof(float));
            memcpy(v.host + t * kw, d[s]->v + p * kw, (size_t)kw * sizeof(float));
        }
    }
    seq_start[n_seqs] = t;
    q.rows = k.rows = v.rows = n_rows;
    struct batch_pos bp = {.pos = pos, .slot = slot, .n_tokens = n_rows, .n_seqs = n_seqs,
                           .seq_start = seq_start, .blocks = blocks, .table_start = table_start};
    ck_assert_int_eq(be->ops->attention(be, &o, &q, &k, &v, kv, 0, hp, NULL, &bp), HEARTH_OK);
    ck_assert_int_eq(o.rows, n_rows);
    memcpy(out, o.host, (size_t)n_rows * (size_t)qw * sizeof(float));
    free(pos);
    free(slot);
    free(seq_start);
    free(table_start);
    free(blocks);
    be->ops->act_free(be, &q);
    be->ops->act_free(be, &k);
    be->ops->act_free(be, &v);
    be->ops->act_free(be, &o);
}

static void check_paged(const hearth_kernels *kernels, const char *path, hearth_type type, int32_t B,
                        uint64_t seed)
{
    const int32_t n_head = 6, n_head_kv = 2, hd = type == HEARTH_TYPE_Q8_0 ? 64 : 40;
    const struct hparams hp = {.n_head = n_head, .n_head_kv = n_head_kv, .head_dim = hd};
    const int64_t qw = (int64_t)n_head * hd, kw = (int64_t)n_head_kv * hd;
    struct hearth_backend *be_batch, *be_alone;
    ck_assert_int_eq(backend_cpu_new_with(2, kernels, &be_batch), HEARTH_OK);
    ck_assert_int_eq(backend_cpu_new_with(1, kernels, &be_alone), HEARTH_OK);
    test_rng rng;
    test_rng_seed(&rng, seed);

    struct seq_data data[N_PAGED];
    const struct seq_data *dp[N_PAGED];
    int32_t first[N_PAGED], n_tok[N_PAGED], n_blocks = 3, n_rows = 0; /* 3 blocks nobody's */
    for (int32_t s = 0; s < N_PAGED; s++) {
        struct seq_data *d = &data[s];
        first[s] = paged_seqs[s].first;
        n_tok[s] = paged_seqs[s].n_tok;
        d->len = first[s] + n_tok[s];
        ck_assert_int_le(d->len, PAGED_CTX);
        d->q = test_malloc((size_t)(d->len * qw) * sizeof(float));
        d->k = test_malloc((size_t)(d->len * kw) * sizeof(float));
        d->v = test_malloc((size_t)(d->len * kw) * sizeof(float));
        for (int64_t i = 0; i < d->len * qw; i++) d->q[i] = (float)test_rng_normal(&rng);
        for (int64_t i = 0; i < d->len * kw; i++) d->k[i] = (float)test_rng_normal(&rng);
        for (int64_t i = 0; i < d->len * kw; i++) d->v[i] = (float)(2.0 * test_rng_uniform(&rng) - 1.0);
        dp[s] = d;
        n_blocks += (d->len + B - 1) / B;
        n_rows += n_tok[s];
    }
    /* the pool's blocks in a random order, dealt out to the tables */
    int32_t *perm = test_malloc((size_t)n_blocks * sizeof(int32_t));
    for (int32_t b = 0; b < n_blocks; b++) perm[b] = b;
    for (int32_t b = n_blocks - 1; b > 0; b--) {
        const int32_t j = (int32_t)(test_rng_next(&rng) % (uint64_t)(b + 1));
        const int32_t tmp = perm[b];
        perm[b] = perm[j];
        perm[j] = tmp;
    }
    const int32_t *tables[N_PAGED];
    for (int32_t s = 0, next = 0; s < N_PAGED; s++) {
        tables[s] = perm + next;
        next += (data[s].len + B - 1) / B;
    }

    struct kv_cache *pool = nan_cache(type, B, n_blocks, n_head_kv, hd);
    for (int32_t s = 0; s < N_PAGED; s++) store_history(pool, tables[s], &data[s], first[s]);
    float *got = test_malloc((size_t)(n_rows * qw) * sizeof(float));
    run_paged(be_batch, pool, &hp, N_PAGED, dp, first, n_tok, tables, got);

    float *alone = test_malloc((size_t)(PAGED_CTX * qw) * sizeof(float));
    const int32_t contiguous[1] = {0}, *ctable = contiguous, zero = 0;
    for (int32_t s = 0, row0 = 0; s < N_PAGED; row0 += n_tok[s], s++) {
        const float *mine = got + (int64_t)row0 * qw;
        const size_t bytes = (size_t)(n_tok[s] * qw) * sizeof(float);
        /* alone, through the same table of a pool of the same blocks */
        struct kv_cache *same = nan_cache(type, B, n_blocks, n_head_kv, hd);
        store_history(same, tables[s], &data[s], first[s]);
        run_paged(be_alone, same, &hp, 1, &dp[s], &first[s], &n_tok[s], &tables[s], alone);
        ck_assert_msg(memcmp(mine, alone, bytes) == 0,
                      "%s, %s cache, blocks of %d: sequence %d in the batch differs from it alone (%g)", path,
                      hearth_type_name(type), B, s, max_diff(mine, alone, n_tok[s] * qw));
        kv_cache_free(same);
        /* alone in one block of PAGED_CTX positions, every position in one call */
        struct kv_cache *flat = nan_cache(type, PAGED_CTX, 1, n_head_kv, hd);
        run_paged(be_alone, flat, &hp, 1, &dp[s], &zero, &data[s].len, &ctable, alone);
        const float *flat_rows = alone + (int64_t)first[s] * qw;
        if (B % ATTN_KEY_BLOCK == 0) {
            ck_assert_msg(memcmp(mine, flat_rows, bytes) == 0,
                          "%s, %s cache, blocks of %d: sequence %d differs from the contiguous cache (%g)",
                          path, hearth_type_name(type), B, s, max_diff(mine, flat_rows, n_tok[s] * qw));
        } else {
            const double diff = max_diff(mine, flat_rows, n_tok[s] * qw);
            ck_assert_msg(diff < 2e-5, "%s, %s cache, blocks of %d: sequence %d differs from the contiguous "
                          "cache by %g", path, hearth_type_name(type), B, s, diff);
        }
        kv_cache_free(flat);
    }
    free(alone);
    free(got);
    kv_cache_free(pool);
    free(perm);
    for (int32_t s = 0; s < N_PAGED; s++) {
        free(data[s].q);
        free(data[s].k);
        free(data[s].v);
    }
    backend_cpu_free(be_batch);
    backend_cpu_free(be_alone);
}

START_TEST(test_paged_attention)
{
    const hearth_type type = cache_types[_i];
    int n_paths = 0;
    for (int p = 0; p < KERNEL_PATH_COUNT; p++) {
        const hearth_kernels *kernels = kernel_path_table((kernel_path)p, NULL);
        if (!kernels) continue;
        n_paths++;
        for (int b = 0; b < (int)HEARTH_ARRAY_LEN(paged_block_sizes); b++)
            check_paged(kernels, kernel_path_name((kernel_path)p), type, paged_block_sizes[b],
                        500 + 10 * (uint64_t)type + (uint64_t)b);
    }
    ck_assert_int_gt(n_paths, 0);
}
END_TEST

static Suite *attention_suite(void)
{
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("kernels");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_tables_complete);
    tcase_add_test(tc, test_latent_shape_refused);
    tcase_add_loop_test(tc, test_scalar_against_double, 0, N_CACHE_TYPES);
    tcase_add_loop_test(tc, test_paths_against_scalar, 0, N_CACHE_TYPES);
    tcase_add_loop_test(tc, test_backend_attention, 0, N_CACHE_TYPES);
    tcase_add_loop_test(tc, test_paged_attention, 0, N_CACHE_TYPES);
    tcase_add_loop_test(tc, test_heads_split, 0, N_CACHE_TYPES);
    tcase_add_test(tc, test_tp_share);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    for (int p = 0; p < KERNEL_PATH_COUNT; p++) {
        const char *why;
        if (!kernel_path_table((kernel_path)p, &why))
            fprintf(stderr, "note: kernel path %s is skipped: %s\n", kernel_path_name((kernel_path)p), why);
    }
    return test_run_suite(attention_suite());
}

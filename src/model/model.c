/*
 * model.c -- loading a model: open the GGUF file, pick the architecture,
 * read hyperparameters and bind every weight to its tensor in the mapping
 * (no copies), then load the tokenizer from the same file.
 */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "gguf.h"
#include "host_memory.h"
#include "kernels.h"
#include "tp_group.h"

static const struct arch *const architectures[] = {&arch_llama,    &arch_qwen2,    &arch_qwen2moe,
                                                 &arch_qwen3,    &arch_qwen3moe, &arch_gemma2,
                                                 &arch_gemma3,   &arch_phi3,    &arch_rwkv6,    &arch_rwkv6qwen2,
                                                 &arch_qwen35,   &arch_qwen35moe, &arch_qwen3next,
                                                 &arch_gptoss,   &arch_deepseek2, &arch_glm4moe,
                                                 &arch_bert,     &arch_nomic_bert};

hearth_status model_bind(hearth_model *m, struct weight *w, const char *name, int64_t ne0,
                         int64_t ne1, bool required)
{
    const char *path = hearth_gguf_path(m->gguf);
    const hearth_gguf_tensor *t = hearth_gguf_find_tensor(m->gguf, name);
    memset(w, 0, sizeof *w);
    if (!t) {
        if (!required) return HEARTH_OK;
        return hearth_error(HEARTH_E_FORMAT, "%s: tensor '%s' is missing (architecture %s)", path,
                            name, m->arch->name);
    }
    bool is_vector = ne1 == 0;
    bool shape_ok = t->ne[0] == ne0 && t->ne[2] == 1 && t->ne[3] == 1 &&
                    (is_vector ? t->ne[1] == 1 : (ne1 < 0 || t->ne[1] == ne1));
    if (!shape_ok) {
        if (is_vector)
            return hearth_error(HEARTH_E_FORMAT, "%s: tensor '%s' has shape %lld x %lld, expected a "
                                "vector of %lld", path, name, (long long)t->ne[0],
                                (long long)t->ne[1], (long long)ne0);
        return hearth_error(HEARTH_E_FORMAT, "%s: tensor '%s' has shape %lld x %lld, expected "
                            "%lld x %lld", path, name, (long long)t->ne[0], (long long)t->ne[1],
                            (long long)ne0, (long long)ne1);
    }
    if (!hearth_type_can_compute(t->type))
        return hearth_error(HEARTH_E_UNSUPPORTED, "%s: tensor '%s' has type %s, which hearth "
                            "cannot compute with", path, name, hearth_type_name(t->type));
    /* Norm weights, biases and frequency factors are read as floats. */
    if (is_vector && t->type != HEARTH_TYPE_F32)
        return hearth_error(HEARTH_E_UNSUPPORTED, "%s: vector tensor '%s' has type %s; only F32 "
                            "is supported for vectors", path, name, hearth_type_name(t->type));
    w->name = t->name;
    w->type = t->type;
    w->n_in = t->ne[0];
    w->n_out = t->ne[1];
    w->row_bytes = hearth_type_row_bytes(t->type, t->ne[0]);
    w->data = t->data;
    return HEARTH_OK;
}

hearth_status model_bind_f32(hearth_model *m, struct weight *w, const char *name, int64_t ne0, int64_t ne1)
{
    HEARTH_TRY(model_bind(m, w, name, ne0, ne1, true));
    if (w->type != HEARTH_TYPE_F32)
        return hearth_error(HEARTH_E_UNSUPPORTED, "%s: tensor '%s' has type %s; only F32 is supported for it",
                            hearth_gguf_path(m->gguf), name, hearth_type_name(w->type));
    return HEARTH_OK;
}

hearth_status model_bind_experts(hearth_model *m, struct weight *views, const char *name, int64_t ne0,
                                 int64_t ne1, int64_t n_views)
{
    return model_bind_slices(m, views, name, ne0, ne1, n_views, "expert");
}

hearth_status model_bind_slices(hearth_model *m, struct weight *views, const char *name, int64_t ne0,
                                int64_t ne1, int64_t n_views, const char *per)
{
    const char *path = hearth_gguf_path(m->gguf);
    const hearth_gguf_tensor *t = hearth_gguf_find_tensor(m->gguf, name);
    memset(views, 0, sizeof *views * (size_t)n_views);
    if (!t)
        return hearth_error(HEARTH_E_FORMAT, "%s: tensor '%s' is missing (architecture %s, %lld "
                            "%ss)", path, name, m->arch->name, (long long)n_views, per);
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != n_views || t->ne[3] != 1)
        return hearth_error(HEARTH_E_FORMAT, "%s: tensor '%s' has shape %lld x %lld x %lld x %lld, "
                            "expected %lld x %lld x %lld (one matrix per %s)", path, name,
                            (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                            (long long)t->ne[3], (long long)ne0, (long long)ne1, (long long)n_views, per);
    if (!hearth_type_can_compute(t->type))
        return hearth_error(HEARTH_E_UNSUPPORTED, "%s: tensor '%s' has type %s, which hearth "
                            "cannot compute with", path, name, hearth_type_name(t->type));
    const size_t row_bytes = hearth_type_row_bytes(t->type, ne0);
    const size_t matrix_bytes = row_bytes * (size_t)ne1;
    for (int64_t e = 0; e < n_views; e++) {
        struct weight *w = &views[e];
        w->name = t->name;
        w->type = t->type;
        w->n_in = ne0;
        w->n_out = ne1;
        w->row_bytes = row_bytes;
        w->data = (const uint8_t *)t->data + (size_t)e * matrix_bytes;
    }
    return HEARTH_OK;
}

/* The alignment of the packed weights: a huge page on x86-64 and AArch64
 * Linux. */
#define HUGE_PAGE_BYTES ((size_t)2 << 20)

void *model_packed_alloc(size_t bytes)
{
    /* Decode streams through all of this once per token: on 2 MiB pages
     * the walk needs a few hundred translations instead of one per 4 KiB,
     * so ask for huge pages where the kernel gives them on request (a
     * hint: without them the memory is used as it is). */
    void *p = hearth_aligned_alloc(HUGE_PAGE_BYTES, bytes, "packed weights");
#ifdef MADV_HUGEPAGE
    if (p && bytes >= HUGE_PAGE_BYTES) (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

/* The matrices the CPU kernels read packed (simd/kernels.h): those of a
 * type with a packed layout and packed kernels on the chosen path, with a
 * whole number of row groups.  The offload to a device asks the same
 * question (opencl/offload.c), to sum those matrices in the same order. */
static bool wants_packing(const hearth_kernels *k, const struct weight *w)
{
    return w->data && hearth_kernels_read_packed(k, w->type, w->n_out, w->n_in);
}

/* Bytes of a piece of the packing (see pack_weights). */
#define PACK_PIECE_BYTES ((size_t)4 << 20)

/* Rows of w per piece: whole row groups, about PACK_PIECE_BYTES. */
static int64_t pack_piece_rows(const struct weight *w)
{
    int64_t rows = (int64_t)(PACK_PIECE_BYTES / (w->row_bytes ? w->row_bytes : 1)) / PACK_ROWS * PACK_ROWS;
    return rows < PACK_ROWS ? PACK_ROWS : rows;
}

/* The rows of w this rank computes, and where they begin in the
 * mapping: all of them, or its share in a tensor-parallel stage. */
static int64_t held_rows(const struct weight *w)
{
    return w->tp ? w->tp_rows : w->n_out;
}

static const uint8_t *held_data(const struct weight *w)
{
    return (const uint8_t *)w->data + (w->tp ? (size_t)w->tp_first * w->row_bytes : 0);
}

static int64_t pack_pieces(const struct weight *w)
{
    const int64_t per = pack_piece_rows(w);
    return (held_rows(w) + per - 1) / per;
}

/* Pack the matrices the CPU kernels want packed into one allocation, in
 * place of the mapping: once a piece is packed, the pages of the mapped
 * original it came from are given back to the file (gguf_release_pages),
 * so a packed matrix is resident once, not twice, and loading never
 * holds much more than that (the pieces being packed).  Anything that
 * touches an original later reads it again from the file; the one reader
 * there is, the rows of an embedding the output layer shares, reads the
 * packed copy instead (hearth_unpack_row).  Matrices the kernels read
 * unpacked stay in the mapping, and only the pages read are resident.
 * Without a kernel table (an invalid HEARTH_CPU, reported when a context
 * is made) nothing is packed; neither are the layers (and output)
 * offloaded to a device. */
static hearth_status pack_weights(hearth_model *m)
{
    const hearth_kernels *k;
    if (hearth_kernels_select(&k) != HEARTH_OK) return HEARTH_OK;
    /* the prediction layer after the trunk too (never offloaded) */
    const int32_t n_layer = m->hp.n_layer + m->n_mtp;
    const size_t per_layer = (m->rec ? ARCH_MATRICES_MAX : 13) + 3 * (size_t)m->hp.n_expert;
    const size_t n_mats = (size_t)n_layer * per_layer + 3;
    struct weight **mats = hearth_calloc(n_mats, sizeof *mats, "the list of matrices to pack");
    if (!mats) return HEARTH_E_NOMEM;
    size_t n = 0, total = 0;
    for (int32_t il = 0; il < n_layer && (il < m->offload.first_layer || il >= m->hp.n_layer); il++) {
        /* a pipeline's rank reads only its own layers */
        if (il < m->stage_first || (il >= m->stage_end && (m->pipe || il < m->hp.n_layer))) continue;
        struct layer *L = m->layers ? &m->layers[il] : NULL;
        if (m->rec) {
            struct weight *ws[ARCH_MATRICES_MAX];
            const int nw = m->rec->matrices(m, il, ws);
            for (int i = 0; i < nw; i++)
                if (wants_packing(k, ws[i])) mats[n++] = ws[i];
        } else {
            struct weight *ws[] = {&L->wq,     &L->wk,     &L->wv,          &L->wo,
                                   &L->w_gate, &L->w_up,   &L->w_down,      &L->w_gate_shexp,
                                   &L->w_up_shexp,         &L->w_down_shexp, &L->wq_a,
                                   &L->wkv_c,  &L->wk_rope};
            for (size_t i = 0; i < HEARTH_ARRAY_LEN(ws); i++)
                if (wants_packing(k, ws[i])) mats[n++] = ws[i];
        }
        /* the experts' matrices, as every other: the kernels read them in
         * the packed order whether one token or a group passes them (in a
         * tensor-parallel stage, this rank's experts only) */
        int32_t e0, n_e;
        hearth_model_experts(m, &e0, &n_e, NULL);
        for (int32_t e = e0; L && L->gate_exps && e < e0 + n_e; e++) {
            struct weight *xs[] = {&L->gate_exps[e], &L->up_exps[e], &L->down_exps[e]};
            for (size_t i = 0; i < HEARTH_ARRAY_LEN(xs); i++)
                if (wants_packing(k, xs[i])) mats[n++] = xs[i];
        }
    }
    const bool last_stage = !m->pipe || m->stage_end == m->hp.n_layer;
    if (!m->offload.output && last_stage && wants_packing(k, &m->output)) mats[n++] = &m->output;
    if (m->n_mtp > 0 && !m->pipe && wants_packing(k, &m->mtp.eh_proj)) mats[n++] = &m->mtp.eh_proj;
    if (m->n_mtp > 0 && !m->pipe && m->mtp.head.data != m->output.data && wants_packing(k, &m->mtp.head))
        mats[n++] = &m->mtp.head;
    for (size_t i = 0; i < n; i++) total += hearth_packed_bytes(mats[i]->type, held_rows(mats[i]), mats[i]->n_in);
    hearth_status st = HEARTH_OK;
    if (total) {
        m->packed = model_packed_alloc(total);
        if (!m->packed) st = HEARTH_E_NOMEM;
    }
    /* The copy is shared out among the threads in pieces of whole row
     * groups, about PACK_PIECE_BYTES each (packed groups lie where the
     * originals do, so a piece is packed on its own), and the threads also
     * share the page faults of the new memory: loading is mostly this. */
    struct piece {
        const struct weight *w;
        int64_t r0, rows;
        uint8_t *at;
    } *pieces = NULL;
    size_t n_pieces = 0;
    if (!st && n > 0) {
        for (size_t i = 0; i < n; i++) n_pieces += (size_t)pack_pieces(mats[i]);
        pieces = hearth_calloc(n_pieces, sizeof *pieces, "the packing's pieces");
        if (!pieces) st = HEARTH_E_NOMEM;
    }
    uint8_t *at = m->packed;
    for (size_t i = 0, pi = 0; !st && i < n; i++) {
        struct weight *w = mats[i];
        const int64_t per = pack_piece_rows(w), np = pack_pieces(w);
        for (int64_t p = 0; p < np; p++, pi++) {
            const int64_t r0 = p * per;
            pieces[pi] = (struct piece){w, r0, HEARTH_MIN(per, held_rows(w) - r0), at + (size_t)r0 * w->row_bytes};
        }
        w->packed = at;
        at += hearth_packed_bytes(w->type, held_rows(w), w->n_in);
    }
    if (!st) {
        const hearth_gguf *g = m->gguf;
#pragma omp parallel for schedule(dynamic, 1)
        for (int64_t pi = 0; pi < (int64_t)n_pieces; pi++) {
            const struct piece *pc = &pieces[pi];
            const struct weight *w = pc->w;
            const uint8_t *src = held_data(w) + (size_t)pc->r0 * w->row_bytes;
            hearth_pack_rows(w->type, src, w->row_bytes, pc->rows, w->n_in, pc->at);
            gguf_release_pages(g, src, (size_t)pc->rows * w->row_bytes);
        }
        /* again per matrix: the pages the pieces shared, and those the
         * kernel mapped ahead of a read into pieces already done */
        for (size_t i = 0; i < n; i++) {
            const size_t bytes = (size_t)held_rows(mats[i]) * mats[i]->row_bytes;
            if (gguf_release_pages(g, held_data(mats[i]), bytes)) m->released_bytes += bytes;
        }
        m->packed_bytes = total;
    }
    free(pieces);
    free(mats);
    /* a prediction head that is the output layer reads its packed copy,
     * and so do the rows of embeddings it shares */
    if (m->n_mtp > 0 && m->mtp.head.data == m->output.data) m->mtp.head = m->output;
    struct weight *embeddings[] = {&m->tok_embd, &m->mtp.embd};
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(embeddings); i++)
        if (m->output.packed && !m->output.tp && embeddings[i]->data == m->output.data &&
            embeddings[i]->type == m->output.type)
            embeddings[i]->packed = m->output.packed;
    return st;
}

uint64_t hearth_model_resident_bytes(const hearth_model *m)
{
    return m->weight_bytes + m->packed_bytes - m->released_bytes;
}

hearth_status model_memory_check(const hearth_model *m, const hearth_model *draft, uint64_t kv_bytes,
                                 const char *pool, uint64_t *available)
{
    struct host_memory host;
    *available = 0;
    HEARTH_TRY(host_memory_available(&host));
    if (!host.bytes) return HEARTH_OK; /* not known: nothing to check against */
    uint64_t weights = hearth_model_resident_bytes(m), held = m->packed_bytes;
    if (draft) {
        weights += hearth_model_resident_bytes(draft);
        held += draft->packed_bytes;
    }
    /* what the system has left does not count the packed copies, made already */
    *available = host.limit ? host.bytes : host.bytes + held;
    if (weights + kv_bytes <= *available) return HEARTH_OK;
    char w[32], kv[32], sum[32], avail[32];
    format_memory_size(w, sizeof w, weights);
    format_memory_size(kv, sizeof kv, kv_bytes);
    format_memory_size(sum, sizeof sum, weights + kv_bytes);
    format_memory_size(avail, sizeof avail, *available);
    return hearth_error(HEARTH_E_NOMEM, "not enough memory: the weights need %s resident and %s %s, %s in all, "
                        "but %s is available (%s%s)", w, pool, kv, sum, avail, host.source,
                        host.limit ? "" : ", with the packed weights already in memory");
}

/* ARCH.pooling_type: how an embedding model pools its hidden states. */
static hearth_status read_pooling(hearth_model *m)
{
    char key[128];
    uint32_t v = 0;
    snprintf(key, sizeof key, "%s.pooling_type", m->arch->name);
    const hearth_status st = hearth_gguf_get_u32(m->gguf, key, &v);
    if (st == HEARTH_E_NOT_FOUND) return HEARTH_OK;
    if (st) return st;
    if (v > HEARTH_POOLING_RANK)
        return hearth_error(HEARTH_E_FORMAT, "%s: metadata '%s' = %u is not a known pooling (0 none, 1 mean, "
                            "2 cls, 3 last, 4 rank)", hearth_gguf_path(m->gguf), key, v);
    m->pooling = (hearth_pooling)v;
    return HEARTH_OK;
}

/* "1.1B", "494M", "260K" */
static void format_params(uint64_t n, char *buf, size_t size)
{
    if (n >= 1000000000ull) snprintf(buf, size, "%.1fB", n / 1e9);
    else if (n >= 1000000ull) snprintf(buf, size, "%.0fM", n / 1e6);
    else snprintf(buf, size, "%.0fK", n / 1e3);
}

/* The most common weight type among the matrices, by bytes. */
static const char *dominant_type(const hearth_gguf *g)
{
    size_t bytes[HEARTH_TYPE_COUNT] = {0};
    for (int64_t i = 0; i < hearth_gguf_n_tensors(g); i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(g, i);
        if (t->n_dims >= 2) bytes[t->type] += t->bytes;
    }
    int best = 0;
    for (int i = 1; i < HEARTH_TYPE_COUNT; i++)
        if (bytes[i] > bytes[best]) best = i;
    return hearth_type_name((hearth_type)best) ? hearth_type_name((hearth_type)best) : "?";
}

/* The layers this process runs: all of them, or a pipeline rank's share
 * (which runs neither offloaded layers nor a recurrent family yet). */
static hearth_status stage_layers(hearth_model *m, const char *path)
{
    m->stage_first = 0;
    m->stage_end = m->hp.n_layer;
    if (!m->params.pipeline) return HEARTH_OK;
    if (m->rec)
        return hearth_error(HEARTH_E_UNSUPPORTED, "%s: a recurrent model (%s) does not run in a pipeline yet",
                            path, m->arch->name);
    if (m->params.n_gpu_layers > 0)
        return hearth_error(HEARTH_E_UNSUPPORTED, "offloading layers to a device and a pipeline of ranks "
                            "do not go together yet");
    const int32_t n = pipe_stages(m->params.pipeline);
    if (m->hp.n_layer < n)
        return hearth_error(HEARTH_E_INVALID, "%s: %d layers cannot be split over %d ranks", path,
                            m->hp.n_layer, n);
    m->pipe = m->params.pipeline;
    hearth_pipeline_layers(m->pipe, m->hp.n_layer, &m->stage_first, &m->stage_end);
    return HEARTH_OK;
}

/* Rows first .. first + n - 1 of matrix w in its place (nothing is
 * copied: the rows of a GGUF matrix are contiguous). */
static void keep_rows(struct weight *w, int64_t first, int64_t n)
{
    if (!w->data) return;
    w->data = (const uint8_t *)w->data + (size_t)first * w->row_bytes;
    w->n_out = n;
}

/* Elements first .. first + n - 1 of vector w (F32, as every vector). */
static void keep_elements(struct weight *w, int64_t first, int64_t n)
{
    if (!w->data) return;
    w->data = (const float *)w->data + first;
    w->n_in = n;
    w->row_bytes = (size_t)n * sizeof(float);
}

/* A tensor-parallel stage whose family runs its attention by heads
 * (struct arch, heads_split): this rank runs whole key/value heads, its
 * share of them (tp_share) and the query heads that read them (struct
 * attn_heads), so its layers' q, k and v matrices become those heads'
 * rows, their biases and the sinks those heads' elements.  Each head's
 * rows are the rows one process computes for it, and the rows' packed
 * groups of 8 are one process's groups where a head's rows are whole
 * groups: heads of another size, or fewer key/value heads than ranks,
 * leave the attention whole, its matrices to split_weights' row split.
 * *why says which, or is empty. */
static void split_heads(hearth_model *m, char *why, size_t why_size)
{
    why[0] = '\0';
    if (!m->pipe || pipe_tp(m->pipe) < 2) return;
    const struct hparams *hp = &m->hp;
    const int32_t n = pipe_tp(m->pipe), r = pipe_tp_rank(m->pipe);
    if (!m->arch->heads_split) {
        snprintf(why, why_size, "%s attention", hp->kv_latent > 0 ? "latent" : m->arch->name);
        return;
    }
    if (hp->n_head_kv < n) {
        snprintf(why, why_size, "%d key/value heads for %d ranks", hp->n_head_kv, n);
        return;
    }
    if (hp->head_dim % 8 != 0) {
        snprintf(why, why_size, "heads of %d elements, not whole groups of 8 rows", hp->head_dim);
        return;
    }
    int64_t first, count;
    tp_share(hp->n_head_kv, n, r, &first, &count);
    const int32_t group = hp->n_head / hp->n_head_kv;
    m->heads = (struct attn_heads){.tp = m->pipe, .kv_first = (int32_t)first, .n_kv = (int32_t)count,
                                   .q_first = (int32_t)first * group, .n_q = (int32_t)count * group};
    const int64_t hd = hp->head_dim;
    const int64_t q0 = (int64_t)m->heads.q_first * hd, nq = (int64_t)m->heads.n_q * hd;
    const int64_t k0 = (int64_t)m->heads.kv_first * hd, nk = (int64_t)m->heads.n_kv * hd;
    for (int32_t il = m->stage_first; il < m->stage_end; il++) {
        struct layer *L = &m->layers[il];
        keep_rows(&L->wq, q0, nq);
        keep_rows(&L->wk, k0, nk);
        keep_rows(&L->wv, k0, nk);
        keep_elements(&L->bq, q0, nq);
        keep_elements(&L->bk, k0, nk);
        keep_elements(&L->bv, k0, nk);
        keep_elements(&L->attn_sinks, m->heads.q_first, m->heads.n_q);
    }
}

/* A tensor-parallel stage of a mixture of experts: each rank runs its
 * share of every layer's routed experts, whole (struct expert_share),
 * and packs and reads only theirs.  An expert's rows are the products
 * one process computes for them, whichever experts run beside it.  Fewer
 * experts than ranks: every rank runs them all. */
static void split_experts(hearth_model *m)
{
    if (!m->pipe || pipe_tp(m->pipe) < 2 || m->hp.n_expert < pipe_tp(m->pipe)) return;
    int64_t first, count;
    tp_share(m->hp.n_expert, pipe_tp(m->pipe), pipe_tp_rank(m->pipe), &first, &count);
    m->experts_share = (struct expert_share){.tp = m->pipe, .first = (int32_t)first, .count = (int32_t)count};
}

/* A tensor-parallel stage (pipe_tp() > 1): every matrix of this rank's
 * layers that the layers pass through the matrix product, and the output
 * layer on the last stage, split by output rows among the stage's ranks
 * (struct weight, tp) -- but q, k and v where split_heads split the
 * attention by heads.  A matrix whose rows are not whole groups of 8 is
 * computed whole on every rank: its own rows in the packed kernels' order
 * would not be the rows of one process otherwise. */
static hearth_status split_weights(hearth_model *m, const char *path)
{
    if (!m->pipe || pipe_tp(m->pipe) < 2) return HEARTH_OK;
    const int32_t n = pipe_tp(m->pipe), r = pipe_tp_rank(m->pipe);
    const size_t per_layer = 10;
    struct weight **ws = hearth_calloc((size_t)m->hp.n_layer * per_layer + 1, sizeof *ws, "the matrices to split");
    if (!ws) return HEARTH_E_NOMEM;
    size_t k = 0;
    for (int32_t il = m->stage_first; il < m->stage_end; il++) {
        struct layer *L = &m->layers[il];
        struct weight *l[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down,
                              &L->w_gate_shexp, &L->w_up_shexp, &L->w_down_shexp};
        for (size_t i = m->heads.tp ? 3 : 0; i < HEARTH_ARRAY_LEN(l); i++) ws[k++] = l[i];
    }
    if (m->stage_end == m->hp.n_layer) ws[k++] = &m->output;
    hearth_status st = HEARTH_OK;
    for (size_t i = 0; i < k && !st; i++) {
        struct weight *w = ws[i];
        if (!w->data || w->n_out % 8 != 0) continue;
        if (w->n_out / 8 < n) {
            st = hearth_error(HEARTH_E_INVALID, "%s: tensor '%s' has %lld rows, which cannot be split over %d "
                              "tensor-parallel ranks (whole groups of 8 rows each: at most %lld ranks)", path,
                              w->name, (long long)w->n_out, n, (long long)(w->n_out / 8));
            break;
        }
        w->tp = m->pipe;
        weight_tp_rows(w->n_out, n, r, &w->tp_first, &w->tp_rows);
    }
    free(ws);
    return st;
}

void hearth_model_default_params(hearth_model_params *params)
{
    memset(params, 0, sizeof *params);
}

hearth_status hearth_model_load(const char *path, const hearth_model_params *params,
                                hearth_model **out)
{
    if (!path || !out) return hearth_error(HEARTH_E_INVALID, "hearth_model_load: NULL argument");
    hearth_model_params p;
    if (params) p = *params;
    else hearth_model_default_params(&p);
    if (p.n_gpu_layers < 0)
        return hearth_error(HEARTH_E_INVALID, "GPU layer count %d is negative", p.n_gpu_layers);
    hearth_model *m = hearth_calloc(1, sizeof *m, "a model");
    if (!m) return HEARTH_E_NOMEM;
    m->params = p;
    hearth_status st = hearth_gguf_open(path, &m->gguf);
    if (st) {
        free(m);
        return st;
    }
    const char *arch_name;
    st = hearth_gguf_get_str(m->gguf, "general.architecture", &arch_name);
    if (st) {
        hearth_model_free(m);
        return hearth_error(HEARTH_E_FORMAT, "%s: no general.architecture: not a model file",
                            path);
    }
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(architectures); i++)
        if (strcmp(architectures[i]->name, arch_name) == 0) m->arch = architectures[i];
    if (m->arch) m->rec = m->arch->recurrent;
    if (!m->arch) {
        char list[256] = "";
        for (size_t i = 0; i < HEARTH_ARRAY_LEN(architectures); i++) {
            strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
            strncat(list, architectures[i]->name, sizeof list - strlen(list) - 1);
        }
        st = hearth_error(HEARTH_E_UNSUPPORTED, "%s: architecture '%s' is not supported "
                          "(supported: %s)", path, arch_name, list);
        hearth_model_free(m);
        return st;
    }
    st = m->arch->load(m);
    if (!st) st = read_pooling(m);
    if (!st) st = stage_layers(m, path);
    if (!st) split_heads(m, m->heads_whole, sizeof m->heads_whole);
    if (!st) st = split_weights(m, path);
    if (!st) split_experts(m);
    if (!st) st = model_offload(m);
    if (!st) st = pack_weights(m);
    if (st) {
        hearth_model_free(m);
        return st;
    }
    hearth_vocab_options vo = {p.default_pretokenizer};
    st = hearth_vocab_load(m->gguf, &vo, &m->vocab);
    if (st == HEARTH_E_NOT_FOUND) {
        m->vocab = NULL;
    } else if (st) {
        hearth_model_free(m);
        return st;
    } else if (hearth_vocab_n_tokens(m->vocab) != m->hp.n_vocab) {
        st = hearth_error(HEARTH_E_FORMAT, "%s: the tokenizer has %d tokens but token_embd.weight "
                          "has %d rows", path, hearth_vocab_n_tokens(m->vocab), m->hp.n_vocab);
        hearth_model_free(m);
        return st;
    }
    for (int64_t i = 0; i < hearth_gguf_n_tensors(m->gguf); i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(m->gguf, i);
        uint64_t n = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) n *= (uint64_t)t->ne[d];
        m->n_params += n;
        m->weight_bytes += t->bytes;
    }
    char size[32];
    format_params(m->n_params, size, sizeof size);
    snprintf(m->desc, sizeof m->desc, "%s %s %s", m->arch->name, size, dominant_type(m->gguf));
    *out = m;
    return HEARTH_OK;
}

void hearth_model_free(hearth_model *m)
{
    if (!m) return;
    model_offload_release(m);
    if (m->rec && m->rec->release) m->rec->release(m);
    free(m->layers);
    free(m->experts);
    free(m->head_slices);
    hearth_aligned_free(m->packed);
    hearth_vocab_free(m->vocab);
    hearth_gguf_close(m->gguf);
    free(m);
}

const char *hearth_model_arch(const hearth_model *m) { return m->arch->name; }
const char *hearth_model_desc(const hearth_model *m) { return m->desc; }
int32_t hearth_model_n_vocab(const hearth_model *m) { return m->hp.n_vocab; }
int32_t hearth_model_n_ctx_train(const hearth_model *m) { return m->hp.n_ctx_train; }
int32_t hearth_model_n_layer(const hearth_model *m) { return m->hp.n_layer; }
int32_t hearth_model_n_embd(const hearth_model *m) { return m->hp.n_embd; }
uint64_t hearth_model_n_params(const hearth_model *m) { return m->n_params; }
uint64_t hearth_model_size_bytes(const hearth_model *m) { return m->weight_bytes; }
const hearth_gguf *hearth_model_gguf(const hearth_model *m) { return m->gguf; }
const hearth_vocab *hearth_model_vocab(const hearth_model *m) { return m->vocab; }
bool hearth_model_is_recurrent(const hearth_model *m) { return m->rec != NULL; }
int32_t hearth_model_mtp_layers(const hearth_model *m) { return m->n_mtp; }
hearth_pooling hearth_model_pooling(const hearth_model *m) { return m->pooling; }
bool hearth_model_is_embedding_only(const hearth_model *m) { return model_embedding_only(m); }

void hearth_model_experts(const hearth_model *m, int32_t *first, int32_t *n, int32_t *total)
{
    const struct expert_share *es = &m->experts_share;
    if (first) *first = es->tp ? es->first : 0;
    if (n) *n = es->tp ? es->count : m->hp.n_expert;
    if (total) *total = m->hp.n_expert;
}

void hearth_model_kv_heads(const hearth_model *m, int32_t *first, int32_t *n, int32_t *total, const char **whole)
{
    const bool split = m->heads.tp != NULL;
    if (first) *first = split ? m->heads.kv_first : 0;
    if (n) *n = split ? m->heads.n_kv : m->hp.n_head_kv;
    if (total) *total = m->hp.n_head_kv;
    if (whole) *whole = m->heads_whole;
}

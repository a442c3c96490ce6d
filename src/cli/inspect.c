/*
 * inspect.c -- `hearth inspect FILE`: a GGUF file's metadata, tensor table
 * and model summary, as text or JSON.
 */
#include "config.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hearth.h"

#define CMD "inspect"
/* Arrays longer than this, and strings longer than STRING_PREVIEW bytes,
 * are abbreviated unless --full is given. */
#define ARRAY_PREVIEW 8
#define STRING_PREVIEW 64

struct inspect_opts {
    bool json;
    bool full;
};

/* ---- model summary ------------------------------------------------------ */

struct summary {
    const char *arch;
    const char *name;
    uint64_t n_params;
    uint64_t tensor_bytes;
    int64_t context_length;
    int64_t n_layers;
    int64_t n_heads;
    int64_t n_kv_heads;
    int64_t head_dim_k;
    int64_t head_dim_v;
    int64_t n_embd;
    int64_t n_vocab;
    int64_t n_expert;            /* mixture of experts; -1 when not declared */
    int64_t n_expert_used;
    int64_t n_ff_exp;
    int64_t n_ff_shexp;
    int64_t sliding_window;      /* attention.sliding_window; -1 when not set */
    int64_t swa_pattern;         /* attention.sliding_window_pattern */
    double attn_softcap, final_softcap; /* logit soft-capping; 0 when not set */
    uint64_t kv_bytes_per_token; /* F16 cache */
    /* Gated DeltaNet hybrids (qwen35): the layers of linear attention,
     * which keep a state instead of keys and values, and its F32 bytes
     * per sequence; -1 and 0 otherwise. */
    int64_t n_linear_layers;
    int64_t pooling;         /* ARCH.pooling_type (hearth_pooling); -1 when not declared */
    int64_t n_mtp_layers;    /* multi-token prediction layers after the trunk
                              * (any family; 0 when not declared) */
    uint64_t state_bytes_per_seq;
    /* Multi-head latent attention (deepseek2): the latent's rank, the
     * queries' (0: none), the heads' query/key and value lengths of the
     * decompressed form, the rotary dimensions; the leading dense layers,
     * shared experts and expert groups; -1 when not declared. */
    int64_t kv_lora_rank, q_lora_rank, head_dim_k_mla, head_dim_v_mla, n_rot;
    int64_t n_dense_lead, n_expert_shared, n_expert_groups, n_expert_groups_used;
};

/* A float under "ARCH.suffix"; 0 when missing. */
static double arch_float(const hearth_gguf *g, const char *arch, const char *suffix)
{
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    float v;
    return hearth_gguf_get_f32(g, key, &v) == HEARTH_OK ? v : 0.0;
}

/* An integer under "ARCH.suffix"; -1 when missing.  Per-layer arrays (some
 * models vary head counts by layer) give their largest element. */
static int64_t arch_int(const hearth_gguf *g, const char *arch, const char *suffix)
{
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t v;
    if (hearth_gguf_get_i64(g, key, &v) == HEARTH_OK) return v;
    hearth_gguf_value arr;
    if (hearth_gguf_get_array(g, key, &arr) == HEARTH_OK) {
        int64_t best = -1;
        for (uint64_t j = 0; j < arr.v.arr.n; j++) {
            hearth_gguf_value e;
            if (hearth_gguf_array_get(g, &arr, j, &e) != HEARTH_OK) break;
            int64_t x = e.type == HEARTH_GGUF_UINT8 || e.type == HEARTH_GGUF_UINT16 ||
                                e.type == HEARTH_GGUF_UINT32 || e.type == HEARTH_GGUF_UINT64
                            ? (int64_t)e.v.u
                            : e.v.i;
            if (x > best) best = x;
        }
        return best;
    }
    return -1;
}

/* Multi-head latent attention: a latent and the heads of its
 * decompressed form declared (files from older conversions, without
 * key_length_mla, cache whole keys and values). */
static bool summary_is_mla(const struct summary *s)
{
    return s->kv_lora_rank > 0 && s->head_dim_k_mla > 0 && s->head_dim_v_mla > 0;
}

static void summarise(const hearth_gguf *g, struct summary *s)
{
    memset(s, 0, sizeof *s);
    if (hearth_gguf_get_str(g, "general.architecture", &s->arch) != HEARTH_OK) s->arch = NULL;
    if (hearth_gguf_get_str(g, "general.name", &s->name) != HEARTH_OK) s->name = NULL;
    for (int64_t i = 0; i < hearth_gguf_n_tensors(g); i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(g, i);
        uint64_t n = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) n *= (uint64_t)t->ne[d];
        s->n_params += n;
        s->tensor_bytes += t->bytes;
    }
    s->context_length = s->n_layers = s->n_heads = s->n_kv_heads = -1;
    s->head_dim_k = s->head_dim_v = s->n_embd = s->n_vocab = -1;
    s->n_expert = s->n_expert_used = s->n_ff_exp = s->n_ff_shexp = -1;
    if (s->arch) {
        s->n_expert = arch_int(g, s->arch, "expert_count");
        s->n_expert_used = arch_int(g, s->arch, "expert_used_count");
        s->n_ff_exp = arch_int(g, s->arch, "expert_feed_forward_length");
        s->n_ff_shexp = arch_int(g, s->arch, "expert_shared_feed_forward_length");
        s->context_length = arch_int(g, s->arch, "context_length");
        s->n_layers = arch_int(g, s->arch, "block_count");
        s->n_embd = arch_int(g, s->arch, "embedding_length");
        s->n_heads = arch_int(g, s->arch, "attention.head_count");
        s->n_kv_heads = arch_int(g, s->arch, "attention.head_count_kv");
        if (s->n_kv_heads < 0) s->n_kv_heads = s->n_heads;
        s->head_dim_k = arch_int(g, s->arch, "attention.key_length");
        s->head_dim_v = arch_int(g, s->arch, "attention.value_length");
        if (s->head_dim_k < 0 && s->n_heads > 0 && s->n_embd > 0)
            s->head_dim_k = s->n_embd / s->n_heads;
        if (s->head_dim_v < 0) s->head_dim_v = s->head_dim_k;
        s->n_vocab = arch_int(g, s->arch, "vocab_size");
        s->sliding_window = arch_int(g, s->arch, "attention.sliding_window");
        s->swa_pattern = arch_int(g, s->arch, "attention.sliding_window_pattern");
        /* the families' layer patterns where the file gives none */
        if (s->swa_pattern < 0 && s->sliding_window > 0) {
            if (strcmp(s->arch, "gemma2") == 0 || strcmp(s->arch, "gpt-oss") == 0) s->swa_pattern = 2;
            else if (strcmp(s->arch, "gemma3") == 0) s->swa_pattern = 6;
        }
        s->attn_softcap = arch_float(g, s->arch, "attn_logit_softcapping");
        s->final_softcap = arch_float(g, s->arch, "final_logit_softcapping");
        s->kv_lora_rank = arch_int(g, s->arch, "attention.kv_lora_rank");
        s->q_lora_rank = arch_int(g, s->arch, "attention.q_lora_rank");
        s->head_dim_k_mla = arch_int(g, s->arch, "attention.key_length_mla");
        s->head_dim_v_mla = arch_int(g, s->arch, "attention.value_length_mla");
        s->n_rot = arch_int(g, s->arch, "rope.dimension_count");
        s->n_dense_lead = arch_int(g, s->arch, "leading_dense_block_count");
        s->n_expert_shared = arch_int(g, s->arch, "expert_shared_count");
        s->n_expert_groups = arch_int(g, s->arch, "expert_group_count");
        s->n_expert_groups_used = arch_int(g, s->arch, "expert_group_used_count");
    } else {
        s->sliding_window = s->swa_pattern = -1;
        s->kv_lora_rank = s->q_lora_rank = s->head_dim_k_mla = s->head_dim_v_mla = s->n_rot = -1;
        s->n_dense_lead = s->n_expert_shared = s->n_expert_groups = s->n_expert_groups_used = -1;
    }
    hearth_gguf_value tokens;
    if (hearth_gguf_get_array(g, "tokenizer.ggml.tokens", &tokens) == HEARTH_OK)
        s->n_vocab = (int64_t)tokens.v.arr.n;
    if (s->n_vocab < 0) {
        const hearth_gguf_tensor *emb = hearth_gguf_find_tensor(g, "token_embd.weight");
        if (emb) s->n_vocab = emb->ne[1];
    }
    s->n_linear_layers = -1;
    /* block_count counts the prediction layers after the trunk, which
     * keep keys and values only when they draft */
    s->n_mtp_layers = s->arch ? arch_int(g, s->arch, "nextn_predict_layers") : -1;
    s->pooling = s->arch ? arch_int(g, s->arch, "pooling_type") : -1;
    if (s->n_mtp_layers < 0 || s->n_mtp_layers >= s->n_layers) s->n_mtp_layers = 0;
    const int64_t trunk = s->n_layers - s->n_mtp_layers;
    int64_t n_attn_layers = trunk;
    const int64_t d = s->arch ? arch_int(g, s->arch, "ssm.state_size") : -1;
    const int64_t n_k = s->arch ? arch_int(g, s->arch, "ssm.group_count") : -1;
    const int64_t n_v = s->arch ? arch_int(g, s->arch, "ssm.time_step_rank") : -1;
    const int64_t K = s->arch ? arch_int(g, s->arch, "ssm.conv_kernel") : -1;
    if (s->n_layers > 0 && d > 0 && n_k > 0 && n_v > 0 && K > 0) {
        /* every full_attention_interval-th layer of the trunk attends */
        int64_t interval = arch_int(g, s->arch, "full_attention_interval");
        if (interval <= 0) interval = 4;
        n_attn_layers = trunk / interval;
        s->n_linear_layers = trunk - n_attn_layers;
        s->state_bytes_per_seq = (uint64_t)s->n_linear_layers *
                                 ((uint64_t)(K - 1) * (uint64_t)(2 * n_k * d + n_v * d) + (uint64_t)(n_v * d * d)) * 4u;
    }
    if (summary_is_mla(s)) {
        /* the cache keeps the latent and the rotary key: no values apart */
        if (n_attn_layers > 0 && s->n_rot > 0)
            s->kv_bytes_per_token = (uint64_t)n_attn_layers * (uint64_t)(s->kv_lora_rank + s->n_rot) * 2u;
    } else if (n_attn_layers > 0 && s->n_kv_heads > 0 && s->head_dim_k > 0 && s->head_dim_v > 0) {
        s->kv_bytes_per_token = (uint64_t)n_attn_layers * (uint64_t)s->n_kv_heads *
                                (uint64_t)(s->head_dim_k + s->head_dim_v) * 2u;
    }
}

/* ---- value printing ------------------------------------------------------ */

/* Text mode: printable with control characters escaped, abbreviated. */
static void print_text_string(const char *p, uint64_t len, bool full)
{
    uint64_t shown = full || len <= STRING_PREVIEW ? len : STRING_PREVIEW;
    putchar('"');
    for (uint64_t i = 0; i < shown; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('"');
    if (shown < len) printf("... (%" PRIu64 " bytes)", len);
}

static void print_json_string(const char *p, uint64_t len)
{
    cli_json_string(stdout, p, (size_t)len);
}

static void print_value(const hearth_gguf *g, const hearth_gguf_value *v, const struct inspect_opts *o,
                        int depth);

static void print_number(const hearth_gguf_value *v, bool json)
{
    switch (v->type) {
    case HEARTH_GGUF_UINT8: case HEARTH_GGUF_UINT16: case HEARTH_GGUF_UINT32:
    case HEARTH_GGUF_UINT64:
        printf("%" PRIu64, v->v.u);
        break;
    case HEARTH_GGUF_INT8: case HEARTH_GGUF_INT16: case HEARTH_GGUF_INT32: case HEARTH_GGUF_INT64:
        printf("%" PRId64, v->v.i);
        break;
    case HEARTH_GGUF_FLOAT32: case HEARTH_GGUF_FLOAT64:
        if (json && (v->v.f != v->v.f || v->v.f - v->v.f != 0)) printf("null"); /* NaN/inf */
        else printf("%.9g", v->v.f);
        break;
    case HEARTH_GGUF_BOOL:
        printf("%s", v->v.b ? "true" : "false");
        break;
    default:
        break;
    }
}

static void print_array(const hearth_gguf *g, const hearth_gguf_value *v, const struct inspect_opts *o,
                        int depth)
{
    uint64_t n = v->v.arr.n;
    uint64_t shown = o->full || n <= ARRAY_PREVIEW ? n : ARRAY_PREVIEW;
    const char *et = hearth_gguf_type_name(v->v.arr.elem_type);
    if (o->json) {
        printf("{\"array_of\": \"%s\", \"length\": %" PRIu64 ", \"values\": [", et, n);
    } else {
        printf("[%s x %" PRIu64 "] [", et, n);
    }
    for (uint64_t j = 0; j < shown; j++) {
        hearth_gguf_value e;
        if (hearth_gguf_array_get(g, v, j, &e) != HEARTH_OK) break;
        if (j) printf(", ");
        print_value(g, &e, o, depth + 1);
    }
    if (o->json) {
        printf("]%s}", shown < n ? ", \"truncated\": true" : "");
    } else {
        if (shown < n) printf(", ... (%" PRIu64 " more)", n - shown);
        printf("]");
    }
}

static void print_value(const hearth_gguf *g, const hearth_gguf_value *v, const struct inspect_opts *o,
                        int depth)
{
    if (v->type == HEARTH_GGUF_STRING) {
        if (o->json) print_json_string(v->v.str.ptr, v->v.str.len);
        else print_text_string(v->v.str.ptr, v->v.str.len, o->full);
    } else if (v->type == HEARTH_GGUF_ARRAY) {
        print_array(g, v, o, depth);
    } else {
        print_number(v, o->json);
    }
}

static void format_shape(const hearth_gguf_tensor *t, char *buf, size_t size, bool json)
{
    size_t used = 0;
    if (json) used += (size_t)snprintf(buf, size, "[");
    for (uint32_t d = 0; d < t->n_dims && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64,
                                 d ? (json ? ", " : " x ") : "", t->ne[d]);
    if (json && used < size) snprintf(buf + used, size - used, "]");
}

/* ---- output ---------------------------------------------------------------- */

static void print_text(const hearth_gguf *g, const struct inspect_opts *o)
{
    struct summary s;
    summarise(g, &s);
    printf("file: %s (%" PRIu64 " bytes, GGUF v%u, alignment %u, data at byte %" PRIu64 ")\n\n",
           hearth_gguf_path(g), hearth_gguf_file_size(g), hearth_gguf_version(g),
           hearth_gguf_alignment(g), hearth_gguf_data_offset(g));
    const int32_t n_splits = hearth_gguf_n_splits(g);
    if (n_splits > 1) {
        printf("split into %d files:\n", n_splits);
        for (int32_t k = 0; k < n_splits; k++)
            printf("  %d  %s (%" PRIu64 " bytes)\n", k + 1, hearth_gguf_split_path(g, k), hearth_gguf_split_size(g, k));
        putchar('\n');
    }

    printf("metadata (%" PRId64 " entries):\n", hearth_gguf_n_kv(g));
    for (int64_t i = 0; i < hearth_gguf_n_kv(g); i++) {
        hearth_gguf_value v;
        hearth_gguf_kv_value(g, i, &v);
        printf("  %-40s %-8s ", hearth_gguf_kv_key(g, i), hearth_gguf_type_name(v.type));
        print_value(g, &v, o, 0);
        putchar('\n');
    }

    int name_w = 4;
    for (int64_t i = 0; i < hearth_gguf_n_tensors(g); i++) {
        int len = (int)strlen(hearth_gguf_tensor_at(g, i)->name);
        if (len > name_w) name_w = len;
    }
    printf("\ntensors (%" PRId64 "):\n", hearth_gguf_n_tensors(g));
    printf("  %-*s %-8s %-24s %12s%s\n", name_w, "name", "type", "shape", "bytes", n_splits > 1 ? "  file" : "");
    for (int64_t i = 0; i < hearth_gguf_n_tensors(g); i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(g, i);
        char shape[128], part[16] = "";
        format_shape(t, shape, sizeof shape, false);
        if (n_splits > 1) snprintf(part, sizeof part, "  %u", t->split + 1);
        printf("  %-*s %-8s %-24s %12zu%s\n", name_w, t->name, hearth_type_name(t->type), shape,
               t->bytes, part);
    }

    printf("\nsummary:\n");
    printf("  %-22s %s\n", "architecture", s.arch ? s.arch : "(not set)");
    if (s.name) printf("  %-22s %s\n", "name", s.name);
    printf("  %-22s %" PRIu64 " (%.2f M)\n", "parameters", s.n_params, s.n_params / 1e6);
    printf("  %-22s %" PRIu64 " (%.2f MiB)\n", "tensor bytes", s.tensor_bytes,
           s.tensor_bytes / 1048576.0);
    if (s.n_params)
        printf("  %-22s %.4f (%.2f bits)\n", "bytes per weight",
               (double)s.tensor_bytes / (double)s.n_params,
               8.0 * (double)s.tensor_bytes / (double)s.n_params);
#define ROW(label, v) \
    do { \
        if ((v) >= 0) printf("  %-22s %" PRId64 "\n", label, (int64_t)(v)); \
        else printf("  %-22s (not set)\n", label); \
    } while (0)
    ROW("context length", s.context_length);
    ROW("layers", s.n_layers);
    ROW("embedding length", s.n_embd);
    ROW("attention heads", s.n_heads);
    ROW("KV heads", s.n_kv_heads);
    ROW("head dim", s.head_dim_k);
    if (s.head_dim_v != s.head_dim_k) ROW("value head dim", s.head_dim_v);
    ROW("vocab size", s.n_vocab);
    if (s.n_expert > 0) {
        printf("  %-22s %" PRId64, "experts", s.n_expert);
        if (s.n_expert_used > 0) printf(" (%" PRId64 " used per token)", s.n_expert_used);
        putchar('\n');
        if (s.n_ff_exp > 0) ROW("expert FF length", s.n_ff_exp);
        if (s.n_ff_shexp > 0) ROW("shared expert FF", s.n_ff_shexp);
        if (s.n_expert_shared > 0) ROW("shared experts", s.n_expert_shared);
        if (s.n_expert_groups > 1)
            printf("  %-22s %" PRId64 " (%" PRId64 " used per token)\n", "expert groups", s.n_expert_groups,
                   s.n_expert_groups_used);
        if (s.n_dense_lead > 0) ROW("leading dense layers", s.n_dense_lead);
    }
    if (!summary_is_mla(&s) && s.n_rot > 0 && s.n_rot < s.head_dim_k)
        printf("  %-22s %" PRId64 " of %" PRId64 " per head\n", "rotary dims", s.n_rot, s.head_dim_k);
    if (summary_is_mla(&s)) {
        printf("  %-22s latent %" PRId64 " + rotary %" PRId64 " per position", "latent attention", s.kv_lora_rank,
               s.n_rot);
        if (s.q_lora_rank > 0) printf(", queries of rank %" PRId64, s.q_lora_rank);
        putchar('\n');
        printf("  %-22s query/key %" PRId64 ", value %" PRId64 " (decompressed)\n", "latent heads",
               s.head_dim_k_mla, s.head_dim_v_mla);
    }
    if (s.sliding_window >= 0) {
        if (s.swa_pattern > 1)
            printf("  %-22s %" PRId64 " (%" PRId64 " of every %" PRId64 " layers)\n", "sliding window",
                   s.sliding_window, s.swa_pattern - 1, s.swa_pattern);
        else
            ROW("sliding window", s.sliding_window);
    }
    if (s.attn_softcap > 0) printf("  %-22s %g\n", "attention soft-cap", s.attn_softcap);
    if (s.final_softcap > 0) printf("  %-22s %g\n", "logit soft-cap", s.final_softcap);
#undef ROW
    if (s.n_linear_layers >= 0) {
        printf("  %-22s %" PRId64 " of %" PRId64 " (Gated DeltaNet)\n", "linear layers",
               s.n_linear_layers, s.n_layers - s.n_mtp_layers);
        printf("  %-22s %" PRIu64 " bytes (F32, whatever the length)\n", "state per sequence",
               s.state_bytes_per_seq);
    }
    if (s.n_mtp_layers > 0)
        printf("  %-22s %" PRId64 " after the %" PRId64 " of the trunk (multi-token prediction: drafts for "
               "--mtp)\n", "prediction layers", s.n_mtp_layers, s.n_layers - s.n_mtp_layers);
    if (s.pooling > 0) {
        const char *name = s.pooling <= HEARTH_POOLING_RANK ? hearth_pooling_name((hearth_pooling)s.pooling) : NULL;
        if (name && s.pooling != HEARTH_POOLING_RANK)
            printf("  %-22s %s (an embedding model: hearth embed, /v1/embeddings)\n", "pooling", name);
        else
            printf("  %-22s %s (not supported)\n", "pooling", name ? name : "unknown");
    }
    if (s.kv_bytes_per_token && summary_is_mla(&s))
        printf("  %-22s %" PRIu64 " bytes (F16 latent and rotary key, no values apart)\n", "KV cache per token",
               s.kv_bytes_per_token);
    else if (s.kv_bytes_per_token)
        printf("  %-22s %" PRIu64 " bytes (F16 keys and values)\n", "KV cache per token",
               s.kv_bytes_per_token);
    else
        printf("  %-22s (unknown: layer or head metadata missing)\n", "KV cache per token");
}

static void json_int_field(const char *name, int64_t v, bool comma)
{
    printf("    \"%s\": ", name);
    if (v >= 0) printf("%" PRId64, v);
    else printf("null");
    printf("%s\n", comma ? "," : "");
}

static void print_json(const hearth_gguf *g, const struct inspect_opts *o)
{
    struct summary s;
    summarise(g, &s);
    printf("{\n  \"file\": ");
    print_json_string(hearth_gguf_path(g), strlen(hearth_gguf_path(g)));
    printf(",\n  \"file_bytes\": %" PRIu64 ",\n  \"version\": %u,\n  \"alignment\": %u,\n"
           "  \"data_offset\": %" PRIu64 ",\n",
           hearth_gguf_file_size(g), hearth_gguf_version(g), hearth_gguf_alignment(g),
           hearth_gguf_data_offset(g));
    const int32_t n_splits = hearth_gguf_n_splits(g);
    printf("  \"splits\": [");
    for (int32_t k = 0; k < n_splits; k++) {
        const char *path = hearth_gguf_split_path(g, k);
        printf("%s{\"file\": ", k ? ", " : "");
        print_json_string(path, strlen(path));
        printf(", \"bytes\": %" PRIu64 "}", hearth_gguf_split_size(g, k));
    }
    printf("],\n");
    printf("  \"metadata\": {");
    for (int64_t i = 0; i < hearth_gguf_n_kv(g); i++) {
        hearth_gguf_value v;
        hearth_gguf_kv_value(g, i, &v);
        const char *key = hearth_gguf_kv_key(g, i);
        printf("%s\n    ", i ? "," : "");
        print_json_string(key, strlen(key));
        printf(": {\"type\": \"%s\", \"value\": ", hearth_gguf_type_name(v.type));
        print_value(g, &v, o, 0);
        printf("}");
    }
    printf("\n  },\n  \"tensors\": [");
    for (int64_t i = 0; i < hearth_gguf_n_tensors(g); i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(g, i);
        char shape[160];
        format_shape(t, shape, sizeof shape, true);
        printf("%s\n    {\"name\": ", i ? "," : "");
        print_json_string(t->name, strlen(t->name));
        printf(", \"type\": \"%s\", \"shape\": %s, \"bytes\": %zu, \"offset\": %" PRIu64 ", \"split\": %u}",
               hearth_type_name(t->type), shape, t->bytes, t->offset, t->split);
    }
    printf("\n  ],\n  \"summary\": {\n    \"architecture\": ");
    if (s.arch) print_json_string(s.arch, strlen(s.arch));
    else printf("null");
    printf(",\n    \"name\": ");
    if (s.name) print_json_string(s.name, strlen(s.name));
    else printf("null");
    printf(",\n    \"parameters\": %" PRIu64 ",\n    \"tensor_bytes\": %" PRIu64 ",\n",
           s.n_params, s.tensor_bytes);
    printf("    \"bytes_per_weight\": %.6f,\n",
           s.n_params ? (double)s.tensor_bytes / (double)s.n_params : 0.0);
    json_int_field("context_length", s.context_length, true);
    json_int_field("layers", s.n_layers, true);
    json_int_field("embedding_length", s.n_embd, true);
    json_int_field("attention_heads", s.n_heads, true);
    json_int_field("kv_heads", s.n_kv_heads, true);
    json_int_field("head_dim", s.head_dim_k, true);
    json_int_field("value_head_dim", s.head_dim_v, true);
    json_int_field("vocab_size", s.n_vocab, true);
    json_int_field("experts", s.n_expert, true);
    json_int_field("experts_used", s.n_expert_used, true);
    json_int_field("expert_feed_forward_length", s.n_ff_exp, true);
    json_int_field("expert_shared_feed_forward_length", s.n_ff_shexp, true);
    json_int_field("sliding_window", s.sliding_window, true);
    json_int_field("sliding_window_pattern", s.swa_pattern, true);
    json_int_field("linear_attention_layers", s.n_linear_layers, true);
    json_int_field("prediction_layers", s.n_linear_layers >= 0 || s.n_mtp_layers > 0 ? s.n_mtp_layers : -1, true);
    json_int_field("state_bytes_per_sequence", s.n_linear_layers >= 0 ? (int64_t)s.state_bytes_per_seq : -1, true);
    const bool mla = summary_is_mla(&s);
    json_int_field("kv_lora_rank", mla ? s.kv_lora_rank : -1, true);
    json_int_field("q_lora_rank", mla ? (s.q_lora_rank > 0 ? s.q_lora_rank : 0) : -1, true);
    json_int_field("head_dim_mla", mla ? s.head_dim_k_mla : -1, true);
    json_int_field("value_head_dim_mla", mla ? s.head_dim_v_mla : -1, true);
    json_int_field("leading_dense_layers", s.n_dense_lead, true);
    json_int_field("shared_experts", s.n_expert_shared, true);
    json_int_field("expert_groups", s.n_expert_groups, true);
    json_int_field("expert_groups_used", s.n_expert_groups_used, true);
    json_int_field("kv_cache_bytes_per_token", s.kv_bytes_per_token ? (int64_t)s.kv_bytes_per_token : -1,
                   false);
    printf("  }\n}\n");
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: hearth inspect [--json] [--full] FILE\n"
            "\n"
            "Show a GGUF file's metadata, tensors and model summary.\n"
            "  --json   print JSON instead of text\n"
            "  --full   print long arrays and strings whole\n");
}

int cmd_inspect(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"full", no_argument, NULL, 'F'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct inspect_opts o = {false, false};
    int c;
    optind = 0;
    while ((c = cli_getopt(argc, argv, ":h", longopts)) != -1) {
        switch (c) {
        case 'j': o.json = true; break;
        case 'F': o.full = true; break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        default: return cli_option_error(CMD, c, argv);
        }
    }
    if (optind + 1 != argc)
        return cli_usage_error(CMD, optind >= argc ? "no FILE given" : "one FILE expected");

    hearth_gguf *g;
    hearth_status st = hearth_gguf_open(argv[optind], &g);
    if (st) return cli_fail(CMD, st);
    if (o.json) print_json(g, &o);
    else print_text(g, &o);
    hearth_gguf_close(g);
    if (fflush(stdout) != 0 || ferror(stdout)) return cli_error(CMD, "cannot write to standard output");
    return CLI_EXIT_OK;
}

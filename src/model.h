/*
 * model.h -- the loaded model: hyperparameters, weights bound to the
 * tensors of the mapped GGUF file, and the per-architecture hooks in
 * models/.
 */
#ifndef HEARTH_MODEL_H
#define HEARTH_MODEL_H

#include "internal.h"

struct hearth_backend;
struct forward;

/* A weight matrix (or vector) as stored in the file: ne[0] = n_in elements
 * per row, ne[1] = n_out rows.  data points into the mapping; a device
 * backend keeps its own copy in dev. */
struct weight {
    const char *name;
    hearth_type type;
    int64_t n_in;        /* elements per row */
    int64_t n_out;       /* rows */
    size_t row_bytes;
    const void *data;
    const void *packed;  /* row-interleaved copy for the CPU kernels
                          * (simd/kernels.h), or NULL */
    void *dev;           /* backend-private copy (OpenCL buffer), or NULL */
    bool dev_packed_order; /* the device sums its products in the CPU's order
                            * for packed weights (simd/kernels.h), because
                            * the CPU would read this matrix packed */
};

enum rope_style {
    ROPE_NORMAL, /* rotate adjacent pairs (x[2i], x[2i+1]): llama in GGUF */
    ROPE_NEOX    /* rotate (x[i], x[i + d/2]): qwen2 */
};

struct rope_params {
    enum rope_style style;
    int32_t n_dims;        /* leading dimensions of each head that rotate */
    float freq_base;       /* theta base */
    float freq_scale;      /* 1 / linear scaling factor */
    const float *freq_factors; /* per pair divisors (Llama 3.1 rope_freqs), or NULL */
};

struct hparams {
    int32_t n_ctx_train;
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_ff;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t head_dim;      /* per head, keys and values */
    int32_t n_vocab;
    float norm_eps;
    struct rope_params rope;
};

struct layer {
    struct weight attn_norm;
    struct weight wq, wk, wv, wo;
    struct weight bq, bk, bv;     /* biases (qwen2); data NULL when absent */
    struct weight ffn_norm;
    struct weight w_gate, w_up, w_down;
};

/* What an architecture provides (models/<family>.c). */
struct arch {
    const char *name;
    /* Read hyperparameters and bind the tensors into model. */
    hearth_status (*load)(hearth_model *model);
    /* One transformer layer over the batch in f (see src/forward.h). */
    hearth_status (*layer)(struct forward *f, int il);
};

/* Where the layers run (src/offload.c; the device side in opencl/). */
struct offload {
    int32_t first_layer;      /* first layer on the device; n_layer when none */
    bool output;              /* final norm and output layer on the device */
    int32_t device;           /* index in hearth_devices(), -1 when none */
    char device_name[256];
    uint64_t bytes;           /* weights uploaded */
    double build_ms;          /* building or loading the kernels */
    bool build_cached;
    char *fallback;           /* why offload was given up (gpu_fallback), or NULL */
    struct ocl_model *ocl;    /* the device state, opaque outside opencl/ */
};

struct hearth_model {
    hearth_model_params params;
    hearth_gguf *gguf;
    const struct arch *arch;
    struct hparams hp;
    struct weight tok_embd;
    struct weight output_norm;
    struct weight output;         /* may alias tok_embd (tied embeddings) */
    struct weight rope_freqs;     /* data NULL when absent */
    struct layer *layers;
    void *packed;                 /* the packed copies of weights (see pack_weights) */
    uint64_t n_params;
    uint64_t weight_bytes;
    char desc[128];
    hearth_vocab *vocab;          /* NULL when the file has no tokenizer */
    struct offload offload;
};

/* Memory for packed weights (simd/kernels.h): aligned to a huge page and
 * advised as huge pages where the system has them; NULL (with the error
 * recorded) when out of memory.  Freed with hearth_aligned_free. */
void *model_packed_alloc(size_t bytes);

/* Bind a tensor by name, checking its shape (ne1 = 0: a vector; ne1 < 0:
 * a matrix with any number of rows).
 * required = false leaves w->data NULL when the tensor is missing. */
hearth_status model_bind(hearth_model *m, struct weight *w, const char *name, int64_t ne0,
                         int64_t ne1, bool required);

/* Offload the layers model->params asks for (falling back to the CPU
 * when allowed), and release the device copies (src/offload.c). */
hearth_status model_offload(hearth_model *m);
void model_offload_release(hearth_model *m);
/* The device side (opencl/offload.c): open the device, upload the
 * weights of layers first_layer .. n_layer-1 (and the output layer when
 * output is set), filling m->offload; on failure nothing is left behind. */
hearth_status ocl_offload_model(hearth_model *m, int32_t first_layer, bool output);
void ocl_offload_release(hearth_model *m);

/* The architectures hearth runs; NULL-terminated by name. */
extern const struct arch arch_llama;
extern const struct arch arch_qwen2;

#endif /* HEARTH_MODEL_H */

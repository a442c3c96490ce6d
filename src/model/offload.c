/*
 * offload.c -- which layers of a model run on an OpenCL device: the last
 * n_gpu_layers, and the output layer when n_gpu_layers exceeds the layer
 * count, so that between the CPU part and the device part only the hidden
 * state crosses, and the logits come back once.  When the device cannot
 * be used and the caller allowed it (gpu_fallback), the model runs on the
 * CPU and the reason is kept for reporting; otherwise loading fails.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "model.h"

static void offload_clear(hearth_model *m)
{
    struct offload *o = &m->offload;
    char *fallback = o->fallback;
    memset(o, 0, sizeof *o);
    o->first_layer = m->hp.n_layer;
    o->device = -1;
    o->fallback = fallback;
}

hearth_status model_offload(hearth_model *m)
{
    offload_clear(m);
    const int32_t ngl = m->params.n_gpu_layers;
    if (ngl <= 0) return HEARTH_OK;
    const int32_t n_layer = m->hp.n_layer;
    const int32_t first = ngl >= n_layer ? 0 : n_layer - ngl;
    hearth_status st;
    if (m->arch->no_device)
        st = hearth_error(HEARTH_E_UNSUPPORTED, "%s: architecture %s cannot be offloaded to an "
                          "OpenCL device: %s; run it on the CPU (-ngl 0)",
                          hearth_gguf_path(m->gguf), m->arch->name, m->arch->no_device);
    else if (m->hp.rope.yarn_ext != 0.0f)
        st = hearth_error(HEARTH_E_UNSUPPORTED, "%s: the OpenCL kernels have no YaRN rotary "
                          "embeddings (this %s file scales its RoPE with YaRN); run it on the CPU "
                          "(-ngl 0)", hearth_gguf_path(m->gguf), m->arch->name);
    else if (m->hp.n_expert > 0)
        /* The device backend has no expert routing (backend.h, moe_ffn):
         * a llama file with experts runs on the CPU, or is refused. */
        st = hearth_error(HEARTH_E_UNSUPPORTED, "%s: offloading mixture-of-experts layers (%s, %d "
                          "experts) to a device is not supported; run it on the CPU (-ngl 0)",
                          hearth_gguf_path(m->gguf), m->arch->name, m->hp.n_expert);
    else if (m->rec)
        /* The device backend has no recurrent-layer operations. */
        st = hearth_error(HEARTH_E_UNSUPPORTED, "%s: the recurrent layers of %s cannot be offloaded to a "
                          "device; run them on the CPU (no GPU layers)", hearth_gguf_path(m->gguf),
                          m->arch->name);
    else
        st = ocl_offload_model(m, first, ngl > n_layer);
    if (st == HEARTH_OK) return HEARTH_OK;
    offload_clear(m);
    if (!m->params.gpu_fallback) return st;
    /* Not silent: the reason stays with the model for the caller to show. */
    free(m->offload.fallback);
    m->offload.fallback = hearth_strdup(hearth_last_error(), "the offload fallback reason");
    return m->offload.fallback ? HEARTH_OK : HEARTH_E_NOMEM;
}

void model_offload_release(hearth_model *m)
{
    if (m->offload.ocl) ocl_offload_release(m);
    free(m->offload.fallback);
    m->offload.fallback = NULL;
}

int32_t hearth_model_n_gpu_layers(const hearth_model *m)
{
    return m->hp.n_layer - m->offload.first_layer;
}

bool hearth_model_output_on_gpu(const hearth_model *m)
{
    return m->offload.output;
}

int32_t hearth_model_device(const hearth_model *m)
{
    return m->offload.ocl ? m->offload.device : -1;
}

const char *hearth_model_device_name(const hearth_model *m)
{
    return m->offload.ocl ? m->offload.device_name : NULL;
}

uint64_t hearth_model_gpu_bytes(const hearth_model *m)
{
    return m->offload.bytes;
}

const char *hearth_model_gpu_fallback(const hearth_model *m)
{
    return m->offload.fallback;
}

double hearth_model_gpu_build_ms(const hearth_model *m, bool *from_cache)
{
    if (from_cache) *from_cache = m->offload.build_cached;
    return m->offload.build_ms;
}

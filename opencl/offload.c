/*
 * offload.c -- putting a model's offloaded layers on the device: open
 * the device chosen by hearth_model_params.device, check that every
 * tensor of those layers has a type the kernels read and that it fits,
 * then upload each tensor once, in its GGUF block format.
 */
#include "ocl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "kernels.h"
#include "model.h"

/* Whether the device kernels read type t: every type the CPU computes
 * with (src/common/types.c) but MXFP4, matmul.cl having a kernel for
 * each. */
static bool device_reads(hearth_type t)
{
    return hearth_type_can_compute(t) && t != HEARTH_TYPE_MXFP4;
}

/* The types the device kernels read, "F32, F16, ...". */
static void device_type_names(char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int t = 0; t < HEARTH_TYPE_COUNT && len < cap; t++)
        if (device_reads((hearth_type)t))
            len += (size_t)snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", hearth_type_name((hearth_type)t));
}

/* The tensors that go to the device, in upload order; absent optional
 * tensors (data NULL) are skipped by the callers. */
static size_t offloaded_weights(hearth_model *m, int32_t first, bool output, struct weight **list,
                                size_t cap)
{
    size_t n = 0;
#define ADD(w) do { if (n < cap) list[n] = (w); n++; } while (0)
    for (int32_t il = first; il < m->hp.n_layer; il++) {
        struct layer *L = &m->layers[il];
        ADD(&L->attn_norm);
        ADD(&L->wq);
        ADD(&L->wk);
        ADD(&L->wv);
        ADD(&L->wo);
        ADD(&L->bq);
        ADD(&L->bk);
        ADD(&L->bv);
        ADD(&L->attn_q_norm);
        ADD(&L->attn_k_norm);
        ADD(&L->ffn_norm);
        ADD(&L->w_gate);
        ADD(&L->w_up);
        ADD(&L->w_down);
    }
    if (first < m->hp.n_layer) ADD(&m->rope_freqs);
    if (output) {
        ADD(&m->output_norm);
        ADD(&m->output);
    }
#undef ADD
    return n;
}

static size_t weight_bytes(const struct weight *w)
{
    return w->row_bytes * (size_t)(w->n_out > 0 ? w->n_out : 1);
}

void ocl_offload_release(hearth_model *m)
{
    struct ocl_model *om = m->offload.ocl;
    if (!om) return;
    struct weight *list[1];
    size_t n = offloaded_weights(m, 0, true, list, 0);
    struct weight **all = malloc(n * sizeof *all);
    if (all) {
        offloaded_weights(m, 0, true, all, n);
        for (size_t i = 0; i < n; i++) {
            all[i]->dev = NULL;
            all[i]->dev_packed_order = false;
        }
        free(all);
    }
    for (size_t i = 0; i < om->n_buffers; i++) ocl_buffer_free(om->dev, om->buffers[i]);
    free(om->buffers);
    ocl_device_close(om->dev);
    free(om);
    m->offload.ocl = NULL;
}

static hearth_status check_weights(hearth_model *m, struct ocl_device *dev, struct weight **list,
                                   size_t n, int32_t first, bool output, uint64_t *total)
{
    const char *path = hearth_gguf_path(m->gguf);
    *total = 0;
    for (size_t i = 0; i < n; i++) {
        const struct weight *w = list[i];
        if (!w->data) continue;
        if (!device_reads(w->type)) {
            char names[160];
            device_type_names(names, sizeof names);
            return hearth_error(HEARTH_E_UNSUPPORTED, "%s: tensor '%s' has type %s, which the "
                                "OpenCL kernels do not read (%s); offload fewer layers",
                                path, w->name, hearth_type_name(w->type), names);
        }
        const size_t bytes = weight_bytes(w);
        if (bytes > dev->max_alloc_bytes)
            return hearth_error(HEARTH_E_NOMEM, "%s: tensor '%s' (%zu bytes) is larger than the "
                                "largest buffer device %d (%s) allows (CL_DEVICE_MAX_MEM_ALLOC_SIZE "
                                "%llu bytes); offload fewer layers", path, w->name, bytes,
                                dev->index, dev->info.name,
                                (unsigned long long)dev->max_alloc_bytes);
        *total += bytes;
    }
    char what[64];
    snprintf(what, sizeof what, "the weights of %d layer%s%s", m->hp.n_layer - first,
             m->hp.n_layer - first == 1 ? "" : "s", output ? " and the output layer" : "");
    if (ocl_mem_check(dev, *total, what) != HEARTH_OK) {
        char reason[1024];
        snprintf(reason, sizeof reason, "%s", hearth_last_error());
        return hearth_error(HEARTH_E_NOMEM, "%s: %s; offload fewer layers", path, reason);
    }
    return HEARTH_OK;
}

/* Upload w of m; packed_by (the CPU's kernel table, or NULL) decides
 * whether the device sums w's products in the order the CPU uses for the
 * matrices it reads packed (simd/kernels.h), so that an offloaded layer
 * computes what the CPU would.  The pages of the mapping the upload read
 * are given back to the file: the device has its copy. */
static hearth_status upload(hearth_model *m, struct ocl_model *om, cl_command_queue q, struct weight *w,
                            const hearth_kernels *packed_by)
{
    const size_t bytes = weight_bytes(w);
    if (om->n_buffers == om->buffers_cap) {
        size_t cap = om->buffers_cap ? 2 * om->buffers_cap : 64;
        cl_mem *grown = hearth_realloc(om->buffers, cap * sizeof *grown, "device buffers");
        if (!grown) return HEARTH_E_NOMEM;
        om->buffers = grown;
        om->buffers_cap = cap;
    }
    char what[160];
    snprintf(what, sizeof what, "tensor '%s'", w->name);
    cl_mem buf;
    HEARTH_TRY(ocl_buffer_new(om->dev, CL_MEM_READ_ONLY, bytes, what, &buf));
    om->buffers[om->n_buffers++] = buf;
    /* A blocking write: an allocation the driver deferred fails here, at
     * load time, rather than in the middle of a forward pass. */
    cl_int err = clEnqueueWriteBuffer(q, buf, CL_TRUE, 0, bytes, w->data, 0, NULL, NULL);
    if (err != CL_SUCCESS) return ocl_fail(err, "uploading tensor '%s' (%zu bytes)", w->name, bytes);
    w->dev = buf;
    /* (packed float rows keep their order: nothing to follow) */
    w->dev_packed_order = packed_by && hearth_pack_reorders(w->type) &&
                          hearth_kernels_read_packed(packed_by, w->type, w->n_out, w->n_in);
    if (gguf_release_pages(m->gguf, w->data, bytes)) m->released_bytes += bytes;
    return HEARTH_OK;
}

hearth_status ocl_offload_model(hearth_model *m, int32_t first, bool output)
{
    struct weight *probe[1];
    const size_t n = offloaded_weights(m, first, output, probe, 0);
    struct weight **list = hearth_calloc(n, sizeof *list, "the offloaded tensors");
    if (!list) return HEARTH_E_NOMEM;
    offloaded_weights(m, first, output, list, n);

    struct ocl_model *om = hearth_calloc(1, sizeof *om, "the device state");
    hearth_status st = om ? ocl_device_open(m->params.device, &om->dev) : HEARTH_E_NOMEM;
    uint64_t total = 0;
    if (!st) st = check_weights(m, om->dev, list, n, first, output, &total);
    const bool weights_refused = st == HEARTH_E_NOMEM;
    cl_command_queue q = NULL;
    if (!st) {
        cl_int err;
        q = clCreateCommandQueue(om->dev->ctx, om->dev->id, 0, &err);
        if (!q) st = ocl_fail(err, "creating a command queue on device %d", om->dev->index);
    }
    m->offload.ocl = om;
    /* the table the CPU packs by (src/model/model.c); without one (an invalid
     * HEARTH_CPU, reported when a context is made) nothing is packed */
    const hearth_kernels *cpu_kernels = NULL;
    if (!st && hearth_kernels_select(&cpu_kernels) != HEARTH_OK) cpu_kernels = NULL;
    for (size_t i = 0; i < n && !st; i++)
        if (list[i]->data) st = upload(m, om, q, list[i], cpu_kernels);
    if (q) clReleaseCommandQueue(q);
    free(list);
    if (st) {
        /* the memory and buffer-size checks name the device already */
        if (om && om->dev && !weights_refused)
            hearth_error_prefix("offloading to device %d (%s)", om->dev->index, om->dev->info.name);
        if (om && !om->dev) free(om);
        else ocl_offload_release(m);
        m->offload.ocl = NULL;
        m->released_bytes = 0; /* the CPU reads them again (before packing: all was this) */
        return st;
    }
    struct offload *o = &m->offload;
    o->first_layer = first;
    o->output = output;
    o->device = om->dev->index;
    snprintf(o->device_name, sizeof o->device_name, "%s", om->dev->info.name);
    o->bytes = total;
    o->build_ms = om->dev->build_ms;
    o->build_cached = om->dev->program_cached;
    return HEARTH_OK;
}

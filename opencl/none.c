/*
 * none.c -- the compute-device interface in a build without OpenCL
 * support: no devices, and offload requests fail with a message that
 * says so (or fall back to the CPU when the caller allowed it).
 */
#include "internal.h"

#include "backend.h"
#include "model.h"

#define NO_OPENCL "this build of hearth has no OpenCL support: configure found no OpenCL ICD " \
                  "loader or CLBlast (install them, e.g. ocl-icd-opencl-dev, opencl-headers and " \
                  "libclblast-dev, and configure again)"

hearth_status hearth_devices(hearth_device_info **out, int32_t *n_out)
{
    if (out) *out = NULL;
    if (n_out) *n_out = 0;
    return hearth_error(HEARTH_E_UNSUPPORTED, NO_OPENCL);
}

void hearth_devices_free(hearth_device_info *list)
{
    (void)list;
}

hearth_status hearth_device_build(int32_t device, double *build_ms, bool *from_cache)
{
    (void)device;
    if (build_ms) *build_ms = 0.0;
    if (from_cache) *from_cache = false;
    return hearth_error(HEARTH_E_UNSUPPORTED, NO_OPENCL);
}

hearth_status ocl_offload_model(hearth_model *m, int32_t first_layer, bool output)
{
    (void)m;
    (void)first_layer;
    (void)output;
    return hearth_error(HEARTH_E_UNSUPPORTED, "offloading layers needs OpenCL support, which this "
                        "build of hearth does not have (configure --enable-opencl)");
}

void ocl_offload_release(hearth_model *m)
{
    (void)m;
}

hearth_status backend_opencl_new(const hearth_model *model, struct kv_cache *kv, int32_t n_batch,
                                 int32_t n_ctx, struct hearth_backend **out)
{
    (void)model;
    (void)kv;
    (void)n_batch;
    (void)n_ctx;
    *out = NULL;
    return hearth_error(HEARTH_E_UNSUPPORTED, NO_OPENCL);
}

void backend_opencl_free(struct hearth_backend *be)
{
    (void)be;
}

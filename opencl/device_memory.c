/*
 * device_memory.c -- how much device memory a model may use, and every
 * buffer hearth allocates on a device counted against it.
 *
 * The budget is the device's CL_DEVICE_GLOBAL_MEM_SIZE, or less when the
 * operator sets HEARTH_OPENCL_MEM_LIMIT (a GPU shared with other
 * programs).  What a model needs (its weights at load time; the KV cache
 * and work buffers when a context is made) is checked against the budget
 * before anything is allocated, so that a model that does not fit fails,
 * or falls back to the CPU when allowed, at once and with the numbers,
 * rather than part way through an upload or a forward pass.  Each buffer
 * is also checked against CL_DEVICE_MAX_MEM_ALLOC_SIZE; an allocation the
 * driver itself refuses is reported with the OpenCL error's name.
 */
#include "ocl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_memory.h"

hearth_status ocl_mem_limit_from_env(cl_ulong *limit)
{
    uint64_t bytes;
    HEARTH_TRY(env_byte_count("HEARTH_OPENCL_MEM_LIMIT", &bytes));
    *limit = (cl_ulong)bytes;
    return HEARTH_OK;
}

void ocl_mem_init(struct ocl_device *dev, cl_ulong limit)
{
    dev->mem_limit_bytes = limit;
    dev->mem_budget_bytes = dev->info.global_mem_bytes;
    if (limit && limit < dev->mem_budget_bytes) dev->mem_budget_bytes = limit;
    atomic_init(&dev->mem_used_bytes, 0);
}

uint64_t ocl_mem_used(const struct ocl_device *dev)
{
    return atomic_load(&((struct ocl_device *)dev)->mem_used_bytes);
}

hearth_status ocl_mem_check(const struct ocl_device *dev, uint64_t need, const char *what)
{
    const uint64_t used = ocl_mem_used(dev);
    const uint64_t avail = dev->mem_budget_bytes > used ? dev->mem_budget_bytes - used : 0;
    if (need <= avail) return HEARTH_OK;
    char limit[96] = "";
    if (dev->mem_limit_bytes)
        snprintf(limit, sizeof limit, "HEARTH_OPENCL_MEM_LIMIT %llu bytes, ",
                 (unsigned long long)dev->mem_limit_bytes);
    return hearth_error(HEARTH_E_NOMEM, "not enough memory on OpenCL device %d (%s) for %s: "
                        "%llu bytes needed, %llu available (%sdevice memory %llu bytes, %llu in "
                        "use)", dev->index, dev->info.name, what, (unsigned long long)need,
                        (unsigned long long)avail, limit,
                        (unsigned long long)dev->info.global_mem_bytes, (unsigned long long)used);
}

hearth_status ocl_buffer_new(struct ocl_device *dev, cl_mem_flags flags, size_t bytes,
                             const char *what, cl_mem *out)
{
    *out = NULL;
    if (bytes > dev->max_alloc_bytes)
        return hearth_error(HEARTH_E_NOMEM, "%s needs a buffer of %zu bytes, larger than the "
                            "largest OpenCL device %d (%s) allows (CL_DEVICE_MAX_MEM_ALLOC_SIZE "
                            "%llu bytes)", what, bytes, dev->index, dev->info.name,
                            (unsigned long long)dev->max_alloc_bytes);
    /* reserve first: two threads cannot both take the last bytes */
    const uint64_t before = atomic_fetch_add(&dev->mem_used_bytes, (uint64_t)bytes);
    if (before + bytes > dev->mem_budget_bytes) {
        atomic_fetch_sub(&dev->mem_used_bytes, (uint64_t)bytes);
        return ocl_mem_check(dev, bytes, what);
    }
    cl_int err;
    cl_mem m = clCreateBuffer(dev->ctx, flags, bytes, NULL, &err);
    if (!m) {
        atomic_fetch_sub(&dev->mem_used_bytes, (uint64_t)bytes);
        return ocl_fail(err, "allocating %zu bytes for %s on OpenCL device %d (%s)", bytes, what,
                        dev->index, dev->info.name);
    }
    *out = m;
    return HEARTH_OK;
}

void ocl_buffer_free(struct ocl_device *dev, cl_mem m)
{
    if (!m) return;
    size_t bytes = 0;
    if (clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof bytes, &bytes, NULL) == CL_SUCCESS)
        atomic_fetch_sub(&dev->mem_used_bytes, (uint64_t)bytes);
    clReleaseMemObject(m);
}

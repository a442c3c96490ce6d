/*
 * ocl.h -- the internal interface of the OpenCL backend: error names,
 * device enumeration, a device opened for one model (context and built
 * program), and the program cache.
 *
 * The rest of the library sees only the seam of src/backend/backend.h; these
 * declarations are shared by the files of opencl/.
 */
#ifndef HEARTH_OCL_H
#define HEARTH_OCL_H

#include "internal.h"

#include <stdatomic.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

/* The ICD loader's "no platform" (cl_khr_icd), absent from some headers. */
#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001
#endif

/* The embedded kernel sources (generated from opencl/kernels/ *.cl). */
extern const char *const ocl_program_source[];
extern const size_t ocl_program_source_lines;

/* "CL_OUT_OF_RESOURCES" for -5; CLBlast's own codes by their names too;
 * "unknown OpenCL error" otherwise. */
const char *ocl_error_name(cl_int err);

/* Record a failed OpenCL call: "<what>: CL_NAME (code)".  Allocation
 * failures give HEARTH_E_NOMEM, everything else HEARTH_E_BACKEND. */
hearth_status ocl_fail(cl_int err, const char *fmt, ...) HEARTH_PRINTF(2, 3);

/* Every device of every platform, GPUs first, then accelerators, then the
 * rest, then CPUs (stable within each kind); this is the order of
 * hearth_devices().  No platform or no device is HEARTH_E_NOT_FOUND with
 * the OpenCL error named.  *out is malloc'ed. */
hearth_status ocl_list_devices(cl_device_id **out, int32_t *n_out);

/* Fill the public description of a device. */
hearth_status ocl_describe_device(cl_device_id dev, hearth_device_info *info);

/* A device opened for use: its context, the program built for it, and
 * what the kernels need to know about it. */
struct ocl_device {
    cl_device_id id;
    cl_context ctx;
    cl_program program;
    int32_t index;            /* in the list of hearth_devices() */
    hearth_device_info info;
    size_t max_work_group;
    cl_ulong max_alloc_bytes;
    cl_ulong local_mem_bytes;
    double build_ms;          /* time to build (or load) the program */
    bool program_cached;      /* loaded from the program cache */
    cl_ulong mem_limit_bytes;  /* HEARTH_OPENCL_MEM_LIMIT, 0 when not set */
    cl_ulong mem_budget_bytes; /* what hearth may use: global memory or the limit */
    atomic_uint_least64_t mem_used_bytes; /* held by buffers of ocl_buffer_new() */
};

/* ---- device memory (device_memory.c) ---- */

/* HEARTH_OPENCL_MEM_LIMIT in bytes (BYTES with an optional K, M, G or T
 * suffix, powers of 1024); 0 when not set; HEARTH_E_INVALID when it does
 * not parse. */
hearth_status ocl_mem_limit_from_env(cl_ulong *limit);
/* Set the budget of an opened device (info filled in) from the limit. */
void ocl_mem_init(struct ocl_device *dev, cl_ulong limit);
/* HEARTH_OK when `need` more bytes fit the budget, else HEARTH_E_NOMEM
 * with the device, the bytes needed and the bytes available named. */
hearth_status ocl_mem_check(const struct ocl_device *dev, uint64_t need, const char *what);
/* A device buffer counted against the budget and checked against
 * CL_DEVICE_MAX_MEM_ALLOC_SIZE; `what` names it in errors. */
hearth_status ocl_buffer_new(struct ocl_device *dev, cl_mem_flags flags, size_t bytes,
                             const char *what, cl_mem *out);
/* Release a buffer of ocl_buffer_new() (NULL is ignored). */
void ocl_buffer_free(struct ocl_device *dev, cl_mem m);
/* The bytes held by buffers of ocl_buffer_new() on this device. */
uint64_t ocl_mem_used(const struct ocl_device *dev);

/* Open device `index` and build the kernels (from the cache when a valid
 * entry exists). */
hearth_status ocl_device_open(int32_t index, struct ocl_device **out);
void ocl_device_close(struct ocl_device *dev);

/* Build the embedded program for dev->ctx / dev->id, through the cache:
 * binaries under $HEARTH_OPENCL_CACHE, else $XDG_CACHE_HOME/hearth/opencl,
 * else ~/.cache/hearth/opencl, keyed by the device, its driver and
 * OpenCL versions, the build options and the source.  An entry that does
 * not check out (wrong key, size or checksum, or refused by the driver) is
 * rebuilt and replaced.  HEARTH_OPENCL_CACHE=off disables the cache. */
hearth_status ocl_program_build(struct ocl_device *dev);

/* The directory of the program cache (static buffer), or NULL when the
 * cache is off or no directory can be named. */
const char *ocl_cache_dir(void);

/* The device state of a model with offloaded layers (opencl/offload.c):
 * the opened device and one buffer per uploaded tensor, each also
 * recorded in its struct weight's dev field. */
struct ocl_model {
    struct ocl_device *dev;
    cl_mem *buffers;
    size_t n_buffers;
    size_t buffers_cap;
};

struct hearth_backend;
struct weight;
/* Expand a weight on the device to floats and read them back (n_out rows
 * of n_in), with the kernel the CLBlast path uses; for the tests. */
hearth_status ocl_backend_dequantize(struct hearth_backend *be, const struct weight *w, float *out);

#endif /* HEARTH_OCL_H */

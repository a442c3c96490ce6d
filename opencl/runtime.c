/*
 * runtime.c -- the OpenCL runtime as hearth uses it: error names, the
 * list of devices (hearth_devices), and opening one device for a model.
 */
#include "ocl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <clblast_c.h>

/* ---- error names ---------------------------------------------------------------- */

struct ocl_error_entry {
    cl_int code;
    const char *name;
};

/* OpenCL 1.2 to 3.0, the ICD loader's extension code, and CLBlast's own
 * status codes (CLBlast reports OpenCL failures with the OpenCL values). */
static const struct ocl_error_entry error_names[] = {
    {0, "CL_SUCCESS"},
    {-1, "CL_DEVICE_NOT_FOUND"},
    {-2, "CL_DEVICE_NOT_AVAILABLE"},
    {-3, "CL_COMPILER_NOT_AVAILABLE"},
    {-4, "CL_MEM_OBJECT_ALLOCATION_FAILURE"},
    {-5, "CL_OUT_OF_RESOURCES"},
    {-6, "CL_OUT_OF_HOST_MEMORY"},
    {-7, "CL_PROFILING_INFO_NOT_AVAILABLE"},
    {-8, "CL_MEM_COPY_OVERLAP"},
    {-9, "CL_IMAGE_FORMAT_MISMATCH"},
    {-10, "CL_IMAGE_FORMAT_NOT_SUPPORTED"},
    {-11, "CL_BUILD_PROGRAM_FAILURE"},
    {-12, "CL_MAP_FAILURE"},
    {-13, "CL_MISALIGNED_SUB_BUFFER_OFFSET"},
    {-14, "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST"},
    {-15, "CL_COMPILE_PROGRAM_FAILURE"},
    {-16, "CL_LINKER_NOT_AVAILABLE"},
    {-17, "CL_LINK_PROGRAM_FAILURE"},
    {-18, "CL_DEVICE_PARTITION_FAILED"},
    {-19, "CL_KERNEL_ARG_INFO_NOT_AVAILABLE"},
    {-30, "CL_INVALID_VALUE"},
    {-31, "CL_INVALID_DEVICE_TYPE"},
    {-32, "CL_INVALID_PLATFORM"},
    {-33, "CL_INVALID_DEVICE"},
    {-34, "CL_INVALID_CONTEXT"},
    {-35, "CL_INVALID_QUEUE_PROPERTIES"},
    {-36, "CL_INVALID_COMMAND_QUEUE"},
    {-37, "CL_INVALID_HOST_PTR"},
    {-38, "CL_INVALID_MEM_OBJECT"},
    {-39, "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR"},
    {-40, "CL_INVALID_IMAGE_SIZE"},
    {-41, "CL_INVALID_SAMPLER"},
    {-42, "CL_INVALID_BINARY"},
    {-43, "CL_INVALID_BUILD_OPTIONS"},
    {-44, "CL_INVALID_PROGRAM"},
    {-45, "CL_INVALID_PROGRAM_EXECUTABLE"},
    {-46, "CL_INVALID_KERNEL_NAME"},
    {-47, "CL_INVALID_KERNEL_DEFINITION"},
    {-48, "CL_INVALID_KERNEL"},
    {-49, "CL_INVALID_ARG_INDEX"},
    {-50, "CL_INVALID_ARG_VALUE"},
    {-51, "CL_INVALID_ARG_SIZE"},
    {-52, "CL_INVALID_KERNEL_ARGS"},
    {-53, "CL_INVALID_WORK_DIMENSION"},
    {-54, "CL_INVALID_WORK_GROUP_SIZE"},
    {-55, "CL_INVALID_WORK_ITEM_SIZE"},
    {-56, "CL_INVALID_GLOBAL_OFFSET"},
    {-57, "CL_INVALID_EVENT_WAIT_LIST"},
    {-58, "CL_INVALID_EVENT"},
    {-59, "CL_INVALID_OPERATION"},
    {-60, "CL_INVALID_GL_OBJECT"},
    {-61, "CL_INVALID_BUFFER_SIZE"},
    {-62, "CL_INVALID_MIP_LEVEL"},
    {-63, "CL_INVALID_GLOBAL_WORK_SIZE"},
    {-64, "CL_INVALID_PROPERTY"},
    {-65, "CL_INVALID_IMAGE_DESCRIPTOR"},
    {-66, "CL_INVALID_COMPILER_OPTIONS"},
    {-67, "CL_INVALID_LINKER_OPTIONS"},
    {-68, "CL_INVALID_DEVICE_PARTITION_COUNT"},
    {-69, "CL_INVALID_PIPE_SIZE"},
    {-70, "CL_INVALID_DEVICE_QUEUE"},
    {-71, "CL_INVALID_SPEC_ID"},
    {-72, "CL_MAX_SIZE_RESTRICTION_EXCEEDED"},
    {-1000, "CL_INVALID_GL_SHAREGROUP_REFERENCE_KHR"},
    {-1001, "CL_PLATFORM_NOT_FOUND_KHR"},
    {-1024, "CLBlastNotImplemented"},
    {-1007, "CLBlastInsufficientMemoryY"},
    {-1008, "CLBlastInsufficientMemoryX"},
    {-1009, "CLBlastInsufficientMemoryC"},
    {-1010, "CLBlastInsufficientMemoryB"},
    {-1011, "CLBlastInsufficientMemoryA"},
    {-1012, "CLBlastInvalidIncrementY"},
    {-1013, "CLBlastInvalidIncrementX"},
    {-1014, "CLBlastInvalidLeadDimC"},
    {-1015, "CLBlastInvalidLeadDimB"},
    {-1016, "CLBlastInvalidLeadDimA"},
    {-1017, "CLBlastInvalidDimension"},
    {-1018, "CLBlastInvalidVectorY"},
    {-1019, "CLBlastInvalidVectorX"},
    {-1020, "CLBlastInvalidMatrixC"},
    {-1021, "CLBlastInvalidMatrixB"},
    {-1022, "CLBlastInvalidMatrixA"},
    {-2039, "CLBlastUnexpectedError"},
    {-2040, "CLBlastUnknownError"},
    {-2041, "CLBlastDatabaseError"},
    {-2042, "CLBlastInsufficientMemoryScalar"},
    {-2043, "CLBlastInvalidVectorScalar"},
    {-2044, "CLBlastNoDoublePrecision"},
    {-2045, "CLBlastNoHalfPrecision"},
    {-2046, "CLBlastInvalidLocalMemUsage"},
    {-2047, "CLBlastMissingOverrideParameter"},
    {-2048, "CLBlastInvalidOverrideKernel"},
    {-2049, "CLBlastInvalidBatchCount"},
    {-2050, "CLBlastInsufficientMemoryTemp"},
};

const char *ocl_error_name(cl_int err)
{
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(error_names); i++)
        if (error_names[i].code == err) return error_names[i].name;
    return "unknown OpenCL error";
}

hearth_status ocl_fail(cl_int err, const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    hearth_status st = err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY
                           ? HEARTH_E_NOMEM
                           : HEARTH_E_BACKEND;
    return hearth_error(st, "%s: %s (%d)", what, ocl_error_name(err), (int)err);
}

/* ---- enumeration ----------------------------------------------------------------- */

static int kind_rank(cl_device_type type)
{
    if (type & CL_DEVICE_TYPE_GPU) return 0;
    if (type & CL_DEVICE_TYPE_ACCELERATOR) return 1;
    if (type & CL_DEVICE_TYPE_CPU) return 3;
    return 2;
}

hearth_status ocl_list_devices(cl_device_id **out, int32_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    cl_uint n_platforms = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &n_platforms);
    if (err == CL_PLATFORM_NOT_FOUND_KHR || (err == CL_SUCCESS && n_platforms == 0))
        return hearth_error(HEARTH_E_NOT_FOUND, "no OpenCL platform is installed "
                            "(clGetPlatformIDs: CL_PLATFORM_NOT_FOUND_KHR)");
    if (err != CL_SUCCESS) return ocl_fail(err, "listing OpenCL platforms");
    cl_platform_id *platforms = hearth_calloc(n_platforms, sizeof *platforms, "OpenCL platforms");
    if (!platforms) return HEARTH_E_NOMEM;
    err = clGetPlatformIDs(n_platforms, platforms, NULL);
    if (err != CL_SUCCESS) {
        free(platforms);
        return ocl_fail(err, "listing OpenCL platforms");
    }

    cl_device_id *devs = NULL;
    int *rank = NULL;
    size_t n = 0;
    hearth_status st = HEARTH_OK;
    for (cl_uint p = 0; p < n_platforms && !st; p++) {
        cl_uint count = 0;
        err = clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 0, NULL, &count);
        if (err == CL_DEVICE_NOT_FOUND || count == 0) continue;
        if (err != CL_SUCCESS) continue; /* a broken platform does not hide the others */
        cl_device_id *grown = hearth_realloc(devs, (n + count) * sizeof *devs, "OpenCL devices");
        if (!grown) {
            st = HEARTH_E_NOMEM;
            break;
        }
        devs = grown;
        int *grown_rank = hearth_realloc(rank, (n + count) * sizeof *rank, "OpenCL devices");
        if (!grown_rank) {
            st = HEARTH_E_NOMEM;
            break;
        }
        rank = grown_rank;
        err = clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, count, devs + n, NULL);
        if (err != CL_SUCCESS) continue;
        for (cl_uint d = 0; d < count; d++) {
            cl_device_type type = 0;
            clGetDeviceInfo(devs[n + d], CL_DEVICE_TYPE, sizeof type, &type, NULL);
            rank[n + d] = kind_rank(type);
        }
        n += count;
    }
    free(platforms);
    if (!st && n == 0)
        st = hearth_error(HEARTH_E_NOT_FOUND, "no OpenCL device found (clGetDeviceIDs: "
                          "CL_DEVICE_NOT_FOUND on every platform)");
    if (st) {
        free(devs);
        free(rank);
        return st;
    }
    /* stable insertion sort by kind */
    for (size_t i = 1; i < n; i++) {
        cl_device_id d = devs[i];
        int r = rank[i];
        size_t j = i;
        for (; j > 0 && rank[j - 1] > r; j--) {
            devs[j] = devs[j - 1];
            rank[j] = rank[j - 1];
        }
        devs[j] = d;
        rank[j] = r;
    }
    free(rank);
    *out = devs;
    *n_out = (int32_t)n;
    return HEARTH_OK;
}

/* A string property into a fixed buffer, truncated and trimmed. */
static void device_string(cl_device_id dev, cl_device_info what, char *buf, size_t size)
{
    buf[0] = '\0';
    size_t len = 0;
    if (clGetDeviceInfo(dev, what, 0, NULL, &len) != CL_SUCCESS || len == 0) return;
    char *tmp = malloc(len + 1);
    if (!tmp) return;
    if (clGetDeviceInfo(dev, what, len, tmp, NULL) == CL_SUCCESS) {
        tmp[len] = '\0';
        snprintf(buf, size, "%s", tmp);
    }
    free(tmp);
    size_t n = strlen(buf);
    while (n > 0 && (buf[n - 1] == ' ' || buf[n - 1] == '\n')) buf[--n] = '\0';
}

hearth_status ocl_describe_device(cl_device_id dev, hearth_device_info *info)
{
    memset(info, 0, sizeof *info);
    device_string(dev, CL_DEVICE_NAME, info->name, sizeof info->name);
    device_string(dev, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor);
    device_string(dev, CL_DEVICE_VERSION, info->version, sizeof info->version);
    device_string(dev, CL_DRIVER_VERSION, info->driver, sizeof info->driver);
    cl_platform_id platform;
    if (clGetDeviceInfo(dev, CL_DEVICE_PLATFORM, sizeof platform, &platform, NULL) == CL_SUCCESS) {
        size_t len = 0;
        if (clGetPlatformInfo(platform, CL_PLATFORM_NAME, 0, NULL, &len) == CL_SUCCESS && len > 0) {
            char *tmp = malloc(len + 1);
            if (tmp && clGetPlatformInfo(platform, CL_PLATFORM_NAME, len, tmp, NULL) == CL_SUCCESS) {
                tmp[len] = '\0';
                snprintf(info->platform, sizeof info->platform, "%s", tmp);
            }
            free(tmp);
        }
    }
    cl_device_type type = 0;
    clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    const char *kind = type & CL_DEVICE_TYPE_GPU           ? "GPU"
                       : type & CL_DEVICE_TYPE_ACCELERATOR ? "accelerator"
                       : type & CL_DEVICE_TYPE_CPU         ? "CPU"
                                                           : "other";
    snprintf(info->type, sizeof info->type, "%s", kind);
    cl_ulong mem = 0, alloc = 0;
    cl_uint units = 0;
    clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof alloc, &alloc, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL);
    info->global_mem_bytes = mem;
    info->max_alloc_bytes = alloc;
    info->compute_units = units;
    char ext[4096];
    device_string(dev, CL_DEVICE_EXTENSIONS, ext, sizeof ext);
    info->fp16 = strstr(ext, "cl_khr_fp16") != NULL;
    return HEARTH_OK;
}

hearth_status hearth_devices(hearth_device_info **out, int32_t *n_out)
{
    if (!out || !n_out) return hearth_error(HEARTH_E_INVALID, "hearth_devices: NULL argument");
    *out = NULL;
    *n_out = 0;
    cl_device_id *devs;
    int32_t n;
    HEARTH_TRY(ocl_list_devices(&devs, &n));
    hearth_device_info *list = hearth_calloc((size_t)n, sizeof *list, "the device list");
    if (!list) {
        free(devs);
        return HEARTH_E_NOMEM;
    }
    for (int32_t i = 0; i < n; i++) ocl_describe_device(devs[i], &list[i]);
    free(devs);
    *out = list;
    *n_out = n;
    return HEARTH_OK;
}

void hearth_devices_free(hearth_device_info *list)
{
    free(list);
}

/* ---- opening a device --------------------------------------------------------------- */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

hearth_status ocl_device_open(int32_t index, struct ocl_device **out)
{
    *out = NULL;
    cl_ulong mem_limit;
    HEARTH_TRY(ocl_mem_limit_from_env(&mem_limit));
    cl_device_id *devs;
    int32_t n;
    HEARTH_TRY(ocl_list_devices(&devs, &n));
    if (index < 0 || index >= n) {
        free(devs);
        return hearth_error(HEARTH_E_INVALID, "OpenCL device %d does not exist: %d device%s "
                            "found (index 0..%d)", index, n, n == 1 ? "" : "s", n - 1);
    }
    struct ocl_device *dev = hearth_calloc(1, sizeof *dev, "an OpenCL device");
    if (!dev) {
        free(devs);
        return HEARTH_E_NOMEM;
    }
    dev->id = devs[index];
    dev->index = index;
    free(devs);
    ocl_describe_device(dev->id, &dev->info);
    clGetDeviceInfo(dev->id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof dev->max_work_group,
                    &dev->max_work_group, NULL);
    clGetDeviceInfo(dev->id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof dev->max_alloc_bytes,
                    &dev->max_alloc_bytes, NULL);
    clGetDeviceInfo(dev->id, CL_DEVICE_LOCAL_MEM_SIZE, sizeof dev->local_mem_bytes,
                    &dev->local_mem_bytes, NULL);
    ocl_mem_init(dev, mem_limit);

    cl_int err;
    dev->ctx = clCreateContext(NULL, 1, &dev->id, NULL, NULL, &err);
    if (!dev->ctx) {
        hearth_status st = ocl_fail(err, "creating an OpenCL context on device %d (%s)", index,
                                    dev->info.name);
        free(dev);
        return st;
    }
    double t0 = now_ms();
    hearth_status st = ocl_program_build(dev);
    dev->build_ms = now_ms() - t0;
    if (st) {
        hearth_error_prefix("device %d (%s)", index, dev->info.name);
        ocl_device_close(dev);
        return st;
    }
    *out = dev;
    return HEARTH_OK;
}

void ocl_device_close(struct ocl_device *dev)
{
    if (!dev) return;
    /* CLBlast keeps the programs it built, each holding our context alive;
     * drop them (other devices' entries are rebuilt on their next use). */
    CLBlastClearCache();
    if (dev->program) clReleaseProgram(dev->program);
    if (dev->ctx) clReleaseContext(dev->ctx);
    free(dev);
}

hearth_status hearth_device_build(int32_t device, double *build_ms, bool *from_cache)
{
    struct ocl_device *dev;
    HEARTH_TRY(ocl_device_open(device, &dev));
    if (build_ms) *build_ms = dev->build_ms;
    if (from_cache) *from_cache = dev->program_cached;
    ocl_device_close(dev);
    return HEARTH_OK;
}

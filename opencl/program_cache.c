/*
 * program_cache.c -- building the kernel program for a device, once: the
 * driver's binary is kept in a cache file and loaded on later runs.
 *
 * A cache file is
 *   magic "HRTHCLB1", u32 key length, the key, u64 binary size,
 *   u64 FNV-1a checksum of the binary, the binary
 * (host byte order; the key names the machine's device anyway).  The key
 * holds the platform, device, device and driver versions, the build
 * options and a hash of the source, so a new driver or a changed kernel
 * misses the cache instead of loading a stale binary.  Nothing in a cache
 * file is trusted: a short, mismatched or corrupt file, or a binary the
 * driver refuses, is rebuilt from source and replaced.  Failing to write
 * the cache is not an error (the program is built either way).
 */
#include "ocl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CACHE_MAGIC "HRTHCLB1"
#define CACHE_KEY_MAX 4096
#define BUILD_OPTIONS_MAX 1024
#define BUILD_LOG_LINES 4
#define BUILD_LOG_CHARS 600

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

#define FNV_OFFSET 0xcbf29ce484222325ull

/* The compiler options: hearth's own (none so far) and then those of
 * HEARTH_OPENCL_BUILD_OPTIONS, with which operators work around driver
 * problems.  They are part of the cache key. */
static hearth_status build_options(char *buf, size_t size)
{
    const char *own = "";
    const char *extra = getenv("HEARTH_OPENCL_BUILD_OPTIONS");
    if (!extra) extra = "";
    int n = snprintf(buf, size, "%s%s%s", own, *own && *extra ? " " : "", extra);
    if (n < 0 || (size_t)n >= size)
        return hearth_error(HEARTH_E_INVALID, "HEARTH_OPENCL_BUILD_OPTIONS is too long (%zu "
                            "characters, at most %d)", strlen(extra), BUILD_OPTIONS_MAX - 1);
    return HEARTH_OK;
}

const char *ocl_cache_dir(void)
{
    static _Thread_local char dir[4096];
    const char *env = getenv("HEARTH_OPENCL_CACHE");
    if (env && (strcmp(env, "off") == 0 || strcmp(env, "0") == 0)) return NULL;
    int n;
    if (env && *env) {
        n = snprintf(dir, sizeof dir, "%s", env);
    } else {
        const char *xdg = getenv("XDG_CACHE_HOME");
        const char *home = getenv("HOME");
        if (xdg && *xdg == '/') n = snprintf(dir, sizeof dir, "%s/hearth/opencl", xdg);
        else if (home && *home) n = snprintf(dir, sizeof dir, "%s/.cache/hearth/opencl", home);
        else return NULL;
    }
    return n > 0 && (size_t)n < sizeof dir ? dir : NULL;
}

/* mkdir -p, private to the user as cache directories should be. */
static bool make_dirs(const char *path)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) return false;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0700) != 0 && errno != EEXIST) return false;
        *p = '/';
    }
    return mkdir(tmp, 0700) == 0 || errno == EEXIST;
}

static void device_key(const struct ocl_device *dev, const char *options, char *key, size_t size,
                       uint64_t *file_hash)
{
    uint64_t src = FNV_OFFSET;
    for (size_t i = 0; i < ocl_program_source_lines; i++)
        src = fnv1a(src, ocl_program_source[i], strlen(ocl_program_source[i]));
    snprintf(key, size, "platform=%s\ndevice=%s\nvendor=%s\nversion=%s\ndriver=%s\noptions=%s\n"
             "source=%016llx\n", dev->info.platform, dev->info.name, dev->info.vendor,
             dev->info.version, dev->info.driver, options, (unsigned long long)src);
    *file_hash = fnv1a(FNV_OFFSET, key, strlen(key));
}

static bool cache_path(uint64_t hash, char *path, size_t size)
{
    const char *dir = ocl_cache_dir();
    if (!dir) return false;
    int n = snprintf(path, size, "%s/%016llx.bin", dir, (unsigned long long)hash);
    return n > 0 && (size_t)n < size;
}

/* The binary of a valid cache entry for key (malloc'ed), or NULL. */
static unsigned char *cache_read(const char *path, const char *key, size_t *size_out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *bin = NULL;
    char magic[8];
    uint32_t key_len;
    uint64_t bin_size, checksum;
    char stored_key[CACHE_KEY_MAX];
    struct stat st;
    if (fstat(fileno(f), &st) != 0) goto out;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, CACHE_MAGIC, 8) != 0) goto out;
    if (fread(&key_len, sizeof key_len, 1, f) != 1 || key_len != strlen(key) ||
        key_len >= CACHE_KEY_MAX)
        goto out;
    if (fread(stored_key, 1, key_len, f) != key_len || memcmp(stored_key, key, key_len) != 0)
        goto out;
    if (fread(&bin_size, sizeof bin_size, 1, f) != 1 || fread(&checksum, sizeof checksum, 1, f) != 1)
        goto out;
    const uint64_t header = 8 + sizeof key_len + key_len + 2 * sizeof(uint64_t);
    if (bin_size == 0 || (uint64_t)st.st_size != header + bin_size || bin_size > SIZE_MAX) goto out;
    bin = malloc((size_t)bin_size);
    if (!bin) goto out;
    if (fread(bin, 1, (size_t)bin_size, f) != bin_size || fnv1a(FNV_OFFSET, bin, (size_t)bin_size) != checksum) {
        free(bin);
        bin = NULL;
        goto out;
    }
    *size_out = (size_t)bin_size;
out:
    fclose(f);
    return bin;
}

/* Write atomically: a temporary file renamed over the entry. */
static void cache_write(const char *path, const char *key, const unsigned char *bin, size_t size)
{
    const char *dir = ocl_cache_dir();
    if (!dir || !make_dirs(dir)) return;
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) return;
    FILE *f = fopen(tmp, "wb");
    if (!f) return;
    uint32_t key_len = (uint32_t)strlen(key);
    uint64_t bin_size = size, checksum = fnv1a(FNV_OFFSET, bin, size);
    bool ok = fwrite(CACHE_MAGIC, 1, 8, f) == 8 && fwrite(&key_len, sizeof key_len, 1, f) == 1 &&
              fwrite(key, 1, key_len, f) == key_len &&
              fwrite(&bin_size, sizeof bin_size, 1, f) == 1 &&
              fwrite(&checksum, sizeof checksum, 1, f) == 1 && fwrite(bin, 1, size, f) == size;
    if (fclose(f) != 0) ok = false;
    if (!ok || rename(tmp, path) != 0) remove(tmp);
}

/* The first lines of the build log, from the first line that reports an
 * error (warnings before it say nothing about the failure), joined with
 * " | " into one line for the error message. */
static void build_log_excerpt(const char *full, char *out, size_t size)
{
    out[0] = '\0';
    const char *start = full;
    for (const char *p = full; *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *hit = strstr(p, "error");
        if (hit && hit < p + len) {
            start = p;
            break;
        }
        if (!eol) break;
        p = eol + 1;
    }
    size_t used = 0;
    int lines = 0;
    for (const char *p = start; *p && lines < BUILD_LOG_LINES && used + 1 < size;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        while (len > 0 && (p[len - 1] == '\r' || p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
        if (len > 0) {
            int n = snprintf(out + used, size - used, "%s%.*s", lines ? " | " : "", (int)len, p);
            if (n < 0) break;
            used += (size_t)n;
            if (used >= size) {
                used = size - 1;
                break;
            }
            lines++;
        }
        if (!eol) break;
        p = eol + 1;
    }
    for (char *c = out; *c; c++)
        if ((unsigned char)*c < 0x20) *c = ' ';
}

static hearth_status build_failure(struct ocl_device *dev, cl_program prog, cl_int err,
                                   const char *options)
{
    char log[BUILD_LOG_CHARS] = "";
    size_t len = 0;
    if (clGetProgramBuildInfo(prog, dev->id, CL_PROGRAM_BUILD_LOG, 0, NULL, &len) == CL_SUCCESS &&
        len > 1) {
        char *full = malloc(len + 1);
        if (full && clGetProgramBuildInfo(prog, dev->id, CL_PROGRAM_BUILD_LOG, len, full, NULL) ==
                        CL_SUCCESS) {
            full[len] = '\0';
            build_log_excerpt(full, log, sizeof log);
        }
        free(full);
    }
    char opts[BUILD_OPTIONS_MAX + 64] = "";
    if (*options) snprintf(opts, sizeof opts, " with options '%s'", options);
    /* the error's name before the log, which may be cut short */
    return hearth_error(HEARTH_E_BACKEND, "building the OpenCL kernels%s failed: %s (%d)%s%s",
                        opts, ocl_error_name(err), (int)err, log[0] ? "; build log: " : "", log);
}

static hearth_status build_from_source(struct ocl_device *dev, const char *options, cl_program *out)
{
    cl_int err;
    cl_program prog = clCreateProgramWithSource(dev->ctx, (cl_uint)ocl_program_source_lines,
                                                (const char **)ocl_program_source, NULL, &err);
    if (!prog) return ocl_fail(err, "creating the OpenCL program");
    err = clBuildProgram(prog, 1, &dev->id, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        hearth_status st = build_failure(dev, prog, err, options);
        clReleaseProgram(prog);
        return st;
    }
    *out = prog;
    return HEARTH_OK;
}

static cl_program build_from_binary(struct ocl_device *dev, const char *options,
                                    const unsigned char *bin, size_t size)
{
    cl_int err, bin_status;
    cl_program prog = clCreateProgramWithBinary(dev->ctx, 1, &dev->id, &size, &bin, &bin_status, &err);
    if (!prog) return NULL;
    if (err != CL_SUCCESS || bin_status != CL_SUCCESS ||
        clBuildProgram(prog, 1, &dev->id, options, NULL, NULL) != CL_SUCCESS) {
        clReleaseProgram(prog);
        return NULL;
    }
    return prog;
}

static void store_binary(struct ocl_device *dev, cl_program prog, const char *path, const char *key)
{
    size_t size = 0;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) != CL_SUCCESS ||
        size == 0)
        return;
    unsigned char *bin = malloc(size);
    if (!bin) return;
    unsigned char *bins[1] = {bin};
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) == CL_SUCCESS)
        cache_write(path, key, bin, size);
    free(bin);
}

hearth_status ocl_program_build(struct ocl_device *dev)
{
    char options[BUILD_OPTIONS_MAX];
    HEARTH_TRY(build_options(options, sizeof options));
    char key[CACHE_KEY_MAX];
    uint64_t hash;
    device_key(dev, options, key, sizeof key, &hash);
    char path[4096];
    const bool cached = cache_path(hash, path, sizeof path);
    dev->program_cached = false;
    if (cached) {
        size_t size;
        unsigned char *bin = cache_read(path, key, &size);
        if (bin) {
            dev->program = build_from_binary(dev, options, bin, size);
            free(bin);
            if (dev->program) {
                dev->program_cached = true;
                return HEARTH_OK;
            }
        }
    }
    HEARTH_TRY(build_from_source(dev, options, &dev->program));
    if (cached) store_binary(dev, dev->program, path, key);
    return HEARTH_OK;
}

/*
 * host_memory.c -- how much memory this process may still use: what the
 * kernel says is available (MemAvailable: free memory and the page cache
 * it can reclaim), less where a control group's limit is nearer, or what
 * the operator says (HEARTH_MEMORY_LIMIT); and byte counts read from the
 * environment.
 */
#include "host_memory.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

hearth_status env_byte_count(const char *name, uint64_t *out)
{
    *out = 0;
    const char *env = getenv(name);
    if (!env || !*env) return HEARTH_OK;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(env, &end, 10);
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    case 't': case 'T': shift = 40; end++; break;
    default: break;
    }
    if (env[0] < '0' || env[0] > '9' || errno || *end != '\0' || v == 0 || v > (~0ull >> shift))
        return hearth_error(HEARTH_E_INVALID, "%s='%s' is not a byte count (a positive number, optionally "
                            "followed by K, M, G or T for KiB, MiB, GiB or TiB)", name, env);
    *out = (uint64_t)(v << shift);
    return HEARTH_OK;
}

/* The first number in file path (a byte count), or false when the file
 * cannot be read or holds none ("max" for no limit). */
static bool read_number(const char *path, uint64_t *out)
{
    FILE *f = fopen(path, "re");
    if (!f) return false;
    unsigned long long v;
    const bool ok = fscanf(f, "%llu", &v) == 1;
    fclose(f);
    if (ok) *out = v;
    return ok;
}

/* What the kernel says is available: MemAvailable of /proc/meminfo. */
static bool mem_available(uint64_t *out)
{
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f) return false;
    char line[256];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long long kib;
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
            *out = (uint64_t)kib << 10;
            found = true;
        }
    }
    fclose(f);
    return found;
}

/* Room left under a limit of the control groups this process is in: for
 * cgroup v2 the least of memory.max - memory.current from its group up
 * to the root, for v1 the memory controller's limit less its usage. */
static bool cgroup_headroom(uint64_t *out)
{
    bool found = false;
    uint64_t room = UINT64_MAX, max, cur;
    char group[600] = "";
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (f) {
        char line[600];
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "0::", 3) == 0) {
                snprintf(group, sizeof group, "%s", line + 3);
                group[strcspn(group, "\n")] = '\0';
            }
        fclose(f);
    }
    /* v2: the group and its parents */
    for (size_t len = strlen(group);;) {
        char path[700];
        snprintf(path, sizeof path, "/sys/fs/cgroup%.*s/memory.max", (int)len, group);
        if (read_number(path, &max)) {
            snprintf(path, sizeof path, "/sys/fs/cgroup%.*s/memory.current", (int)len, group);
            if (read_number(path, &cur)) {
                room = HEARTH_MIN(room, max > cur ? max - cur : 0);
                found = true;
            }
        }
        if (len == 0) break;
        while (len > 0 && group[len - 1] != '/') len--;
        if (len > 0) len--; /* the parent, without its trailing '/' */
    }
    /* v1: a limit near 2^63 means none */
    if (read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes", &max) && max < (UINT64_C(1) << 60) &&
        read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes", &cur)) {
        room = HEARTH_MIN(room, max > cur ? max - cur : 0);
        found = true;
    }
    if (found) *out = room;
    return found;
}

hearth_status host_memory_available(struct host_memory *out)
{
    memset(out, 0, sizeof *out);
    HEARTH_TRY(env_byte_count("HEARTH_MEMORY_LIMIT", &out->bytes));
    if (out->bytes) {
        out->limit = true;
        out->source = "HEARTH_MEMORY_LIMIT";
        return HEARTH_OK;
    }
    uint64_t room;
    if (mem_available(&out->bytes)) out->source = "MemAvailable";
    if (cgroup_headroom(&room) && (!out->source || room < out->bytes)) {
        out->bytes = room;
        out->source = "the control group's limit";
    }
    return HEARTH_OK;
}

void format_memory_size(char *buf, size_t size, uint64_t bytes)
{
    if (bytes >= (UINT64_C(1) << 30)) snprintf(buf, size, "%.2f GiB", (double)bytes / 1073741824.0);
    else snprintf(buf, size, "%.1f MiB", (double)bytes / 1048576.0);
}

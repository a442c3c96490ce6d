/*
 * host_memory.c -- how much memory this process may still use: what the
 * kernel says is available (MemAvailable: free memory and the page cache
 * it can reclaim), less where a control group's limit is nearer, or what
 * the operator says (HEARTH_MEMORY_LIMIT); and byte counts read from the
 * environment.
 */
#include "host_memory.h"

#include <errno.h>
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

/* The value of key in a file of "key value" lines (a control group's
 * memory.stat), or false. */
static bool read_stat(const char *path, const char *key, uint64_t *out)
{
    FILE *f = fopen(path, "re");
    if (!f) return false;
    char line[256];
    bool found = false;
    const size_t n = strlen(key);
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long long v;
        if (strncmp(line, key, n) == 0 && line[n] == ' ' && sscanf(line + n, "%llu", &v) == 1) {
            *out = v;
            found = true;
        }
    }
    fclose(f);
    return found;
}

/* Room under a limit of max with cur in use, of which file is page cache
 * that can be reclaimed (as MemAvailable counts it). */
static uint64_t room_under(uint64_t max, uint64_t cur, uint64_t file)
{
    cur = cur > file ? cur - file : 0;
    return max > cur ? max - cur : 0;
}

/* A control-group hierarchy's memory files (v2, v1), and the controller
 * of the line of /proc/self/cgroup ("ID:CONTROLLERS:PATH") that names
 * this process's group in it ("": the v2 line). */
struct cgroup_files {
    const char *root, *controller, *max, *current, *cache;
};

static const struct cgroup_files cgroup_v2 = {"/sys/fs/cgroup", "", "memory.max", "memory.current", "file"};
static const struct cgroup_files cgroup_v1 = {"/sys/fs/cgroup/memory", "memory", "memory.limit_in_bytes",
                                              "memory.usage_in_bytes", "total_cache"};

/* Whether the controllers of a /proc/self/cgroup line (comma-separated,
 * n bytes at list) are want ("": none). */
static bool has_controller(const char *list, size_t n, const char *want)
{
    const size_t w = strlen(want);
    if (w == 0) return n == 0;
    for (const char *p = list, *end = list + n; p < end;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const size_t len = (size_t)((comma ? comma : end) - p);
        if (len == w && memcmp(p, want, w) == 0) return true;
        p += len + 1;
    }
    return false;
}

/* The least room under a limit of the groups of hierarchy h, from this
 * process's group up to the root (page cache taken as free; a limit near
 * 2^63 means none), or false where none has a limit. */
static bool cgroup_room(const struct cgroup_files *h, uint64_t *out)
{
    char group[600] = "", line[600];
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            const char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
            if (c2 && has_controller(c1 + 1, (size_t)(c2 - c1 - 1), h->controller)) {
                snprintf(group, sizeof group, "%s", c2 + 1);
                group[strcspn(group, "\n")] = '\0';
            }
        }
        fclose(f);
    }
    bool found = false;
    uint64_t room = UINT64_MAX, max, cur, file;
    for (size_t len = strlen(group);;) {
        char path[800];
        snprintf(path, sizeof path, "%s%.*s/%s", h->root, (int)len, group, h->max);
        if (read_number(path, &max) && max < (UINT64_C(1) << 60)) {
            snprintf(path, sizeof path, "%s%.*s/%s", h->root, (int)len, group, h->current);
            if (read_number(path, &cur)) {
                snprintf(path, sizeof path, "%s%.*s/memory.stat", h->root, (int)len, group);
                if (!read_stat(path, h->cache, &file)) file = 0;
                room = HEARTH_MIN(room, room_under(max, cur, file));
                found = true;
            }
        }
        if (len == 0) break;
        while (len > 0 && group[len - 1] != '/') len--;
        if (len > 0) len--; /* the parent, without its trailing '/' */
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
    if (mem_available(&out->bytes)) out->source = "MemAvailable";
    const struct cgroup_files *const hierarchies[] = {&cgroup_v2, &cgroup_v1};
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(hierarchies); i++) {
        uint64_t room;
        if (cgroup_room(hierarchies[i], &room) && (!out->source || room < out->bytes)) {
            out->bytes = room;
            out->source = "the control group's limit";
        }
    }
    return HEARTH_OK;
}

void format_memory_size(char *buf, size_t size, uint64_t bytes)
{
    if (bytes >= (UINT64_C(1) << 30)) snprintf(buf, size, "%.2f GiB", (double)bytes / 1073741824.0);
    else snprintf(buf, size, "%.1f MiB", (double)bytes / 1048576.0);
}

/*
 * host_memory.h -- how much memory this process may still use, and byte
 * counts from the environment.
 */
#ifndef HEARTH_HOST_MEMORY_H
#define HEARTH_HOST_MEMORY_H

#include "internal.h"

/* The environment variable name as a byte count (BYTES with an optional
 * K, M, G or T for KiB, MiB, GiB or TiB); *out 0 when it is not set,
 * HEARTH_E_INVALID naming it when it is not such a count. */
hearth_status env_byte_count(const char *name, uint64_t *out);

struct host_memory {
    uint64_t bytes;     /* 0: not known (no /proc) */
    bool limit;         /* bytes is HEARTH_MEMORY_LIMIT: what hearth may use in
                         * all, rather than what is free now */
    const char *source; /* "HEARTH_MEMORY_LIMIT", "MemAvailable" or "the control
                         * group's limit"; NULL when not known */
};

/* The memory this process may still use: HEARTH_MEMORY_LIMIT when it is
 * set; else the kernel's MemAvailable (free memory and the page cache it
 * can reclaim), or the room left under the limit of this process's
 * control group when that is less.  HEARTH_E_INVALID for a malformed
 * HEARTH_MEMORY_LIMIT. */
hearth_status host_memory_available(struct host_memory *out);

/* "9.87 GiB", "512.0 MiB": sizes of memory in messages. */
void format_memory_size(char *buf, size_t size, uint64_t bytes);

#endif /* HEARTH_HOST_MEMORY_H */

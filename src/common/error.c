/*
 * error.c -- status codes, the per-thread last-error message and the
 * allocation helpers that report failures through it.
 */
#include "internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEARTH_ERROR_MAX 1024

static _Thread_local char last_error[HEARTH_ERROR_MAX];

const char *hearth_version(void)
{
    return PACKAGE_VERSION;
}

const char *hearth_strerror(hearth_status status)
{
    switch (status) {
    case HEARTH_OK: return "success";
    case HEARTH_E_INVALID: return "invalid argument";
    case HEARTH_E_NOMEM: return "out of memory";
    case HEARTH_E_IO: return "input/output error";
    case HEARTH_E_FORMAT: return "malformed input";
    case HEARTH_E_UNSUPPORTED: return "not supported";
    case HEARTH_E_NOT_FOUND: return "not found";
    case HEARTH_E_RANGE: return "limit reached";
    case HEARTH_E_TEMPLATE: return "template error";
    case HEARTH_E_BACKEND: return "compute backend error";
    case HEARTH_E_NETWORK: return "network error";
    case HEARTH_E_INTERRUPTED: return "interrupted";
    case HEARTH_E_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *hearth_last_error(void)
{
    return last_error;
}

hearth_status hearth_error(hearth_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

void hearth_error_prefix(const char *fmt, ...)
{
    char prefix[HEARTH_ERROR_MAX];
    char old[HEARTH_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    /* prefix first, then as much of the old message as still fits */
    size_t used = (size_t)snprintf(last_error, sizeof last_error, "%s: ", prefix);
    if (used < sizeof last_error) {
        size_t room = sizeof last_error - used - 1;
        size_t n = strlen(old);
        if (n > room) n = room;
        memcpy(last_error + used, old, n);
        last_error[used + n] = '\0';
    }
}

void *hearth_malloc(size_t bytes, const char *what)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) hearth_error(HEARTH_E_NOMEM, "out of memory allocating %zu bytes for %s", bytes, what);
    return p;
}

void *hearth_calloc(size_t n, size_t size, const char *what)
{
    size_t bytes;
    if (hearth_mul_overflow(n, size, &bytes)) {
        hearth_error(HEARTH_E_NOMEM, "size overflow allocating %zu x %zu bytes for %s", n, size, what);
        return NULL;
    }
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) hearth_error(HEARTH_E_NOMEM, "out of memory allocating %zu bytes for %s", bytes, what);
    return p;
}

void *hearth_realloc(void *ptr, size_t bytes, const char *what)
{
    void *p = realloc(ptr, bytes ? bytes : 1);
    if (!p) hearth_error(HEARTH_E_NOMEM, "out of memory allocating %zu bytes for %s", bytes, what);
    return p;
}

char *hearth_strndup(const char *s, size_t len, const char *what)
{
    if (len == SIZE_MAX) {
        hearth_error(HEARTH_E_NOMEM, "string too long for %s", what);
        return NULL;
    }
    char *p = hearth_malloc(len + 1, what);
    if (!p) return NULL;
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

char *hearth_strdup(const char *s, const char *what)
{
    return hearth_strndup(s, strlen(s), what);
}

void *hearth_aligned_alloc(size_t alignment, size_t bytes, const char *what)
{
    void *p = NULL;
    int rc = posix_memalign(&p, alignment, bytes ? bytes : alignment);
    if (rc != 0) {
        hearth_error(HEARTH_E_NOMEM, "out of memory allocating %zu aligned bytes for %s", bytes, what);
        return NULL;
    }
    return p;
}

void hearth_aligned_free(void *ptr)
{
    free(ptr);
}

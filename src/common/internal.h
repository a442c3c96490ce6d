/*
 * internal.h -- what every libhearth source file shares: the config header,
 * the public interface, error reporting and checked arithmetic.
 *
 * Not installed.  Library code includes this first.
 */
#ifndef HEARTH_INTERNAL_H
#define HEARTH_INTERNAL_H

#include "config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"

#if defined(__GNUC__) || defined(__clang__)
#define HEARTH_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define HEARTH_LIKELY(x) __builtin_expect(!!(x), 1)
#define HEARTH_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define HEARTH_PRINTF(fmt, args)
#define HEARTH_LIKELY(x) (x)
#define HEARTH_UNLIKELY(x) (x)
#endif

#define HEARTH_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define HEARTH_MIN(a, b) ((a) < (b) ? (a) : (b))
#define HEARTH_MAX(a, b) ((a) > (b) ? (a) : (b))
#define HEARTH_CLAMP(x, lo, hi) HEARTH_MIN(HEARTH_MAX(x, lo), hi)

/* Evaluate a hearth_status expression and return it from the enclosing
 * function when it is not HEARTH_OK. */
#define HEARTH_TRY(expr) \
    do { \
        hearth_status try_status_ = (expr); \
        if (try_status_ != HEARTH_OK) return try_status_; \
    } while (0)

/* Record a failure for hearth_last_error() and return status, so that
 * error paths read: return hearth_error(HEARTH_E_FORMAT, "%s: ...", path); */
hearth_status hearth_error(hearth_status status, const char *fmt, ...) HEARTH_PRINTF(2, 3);

/* Prefix the calling thread's last error message with "context: " (used when
 * a lower layer's message needs the caller's file name or operation). */
void hearth_error_prefix(const char *fmt, ...) HEARTH_PRINTF(1, 2);

/* Checked size arithmetic: return true on overflow. */
static inline bool hearth_mul_overflow(size_t a, size_t b, size_t *out)
{
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_mul_overflow(a, b, out);
#else
    if (a != 0 && b > SIZE_MAX / a) return true;
    *out = a * b;
    return false;
#endif
}

static inline bool hearth_add_overflow(size_t a, size_t b, size_t *out)
{
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_add_overflow(a, b, out);
#else
    if (b > SIZE_MAX - a) return true;
    *out = a + b;
    return false;
#endif
}

/* Allocation that records HEARTH_E_NOMEM with what was being allocated. */
void *hearth_malloc(size_t bytes, const char *what);
void *hearth_calloc(size_t n, size_t size, const char *what);
void *hearth_realloc(void *ptr, size_t bytes, const char *what);
char *hearth_strdup(const char *s, const char *what);
char *hearth_strndup(const char *s, size_t len, const char *what);

/* Aligned allocation for kernel buffers (alignment a power of two >= sizeof(void*)). */
void *hearth_aligned_alloc(size_t alignment, size_t bytes, const char *what);
void hearth_aligned_free(void *ptr);

#endif /* HEARTH_INTERNAL_H */

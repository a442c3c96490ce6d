/*
 * textbuf.h -- a growable byte buffer with a size limit, for building text
 * (rendered templates, serialized JSON) from untrusted input without
 * unbounded growth.
 */
#ifndef HEARTH_TEXTBUF_H
#define HEARTH_TEXTBUF_H

#include <stdarg.h>
#include <stddef.h>

#include "hearth.h"

typedef struct textbuf {
    char *data;     /* NUL-terminated once anything was appended; may be NULL */
    size_t len;
    size_t cap;
    size_t limit;   /* most bytes the buffer may hold */
    const char *what;   /* what is being built, for error messages */
} textbuf;

/* An empty buffer that may grow to limit bytes. */
void textbuf_init(textbuf *tb, size_t limit, const char *what);
void textbuf_free(textbuf *tb);

/* Append bytes; HEARTH_E_RANGE past the limit, HEARTH_E_NOMEM. */
hearth_status textbuf_append(textbuf *tb, const char *s, size_t len);
hearth_status textbuf_append_str(textbuf *tb, const char *s);
hearth_status textbuf_append_char(textbuf *tb, char c);
hearth_status textbuf_printf(textbuf *tb, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Hand the contents over (a malloc'ed, NUL-terminated string, never NULL
 * unless memory ran out) and leave the buffer empty. */
char *textbuf_take(textbuf *tb, size_t *len_out);

#endif /* HEARTH_TEXTBUF_H */

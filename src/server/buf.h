/*
 * buf.h -- the growable, NUL-terminated byte buffer of hearth serve's own
 * code (request bodies as they arrive, responses as they are built).  The
 * server is part of the program, which reaches the library through
 * hearth.h only, so it keeps this small one of its own.
 */
#ifndef HEARTH_SERVER_BUF_H
#define HEARTH_SERVER_BUF_H

#include <stdbool.h>
#include <stddef.h>

struct buf {
    char *p;
    size_t len, cap;
};

/* Append n bytes, keeping a NUL after them; false when memory ran out. */
bool buf_add(struct buf *b, const char *s, size_t n);

#endif /* HEARTH_SERVER_BUF_H */

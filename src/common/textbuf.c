/*
 * textbuf.c -- the growable, size-limited text buffer of textbuf.h.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "textbuf.h"

void textbuf_init(textbuf *tb, size_t limit, const char *what)
{
    tb->data = NULL;
    tb->len = 0;
    tb->cap = 0;
    tb->limit = limit;
    tb->what = what;
}

void textbuf_free(textbuf *tb)
{
    free(tb->data);
    tb->data = NULL;
    tb->len = tb->cap = 0;
}

static hearth_status reserve(textbuf *tb, size_t extra)
{
    size_t need;
    if (hearth_add_overflow(tb->len, extra, &need) || need > tb->limit)
        return hearth_error(HEARTH_E_RANGE, "%s would exceed its size limit of %zu bytes",
                            tb->what, tb->limit);
    need += 1;   /* the terminating NUL */
    if (need <= tb->cap) return HEARTH_OK;
    size_t cap = tb->cap ? tb->cap : 64;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = hearth_realloc(tb->data, cap, tb->what);
    if (!p) return HEARTH_E_NOMEM;
    tb->data = p;
    tb->cap = cap;
    return HEARTH_OK;
}

hearth_status textbuf_append(textbuf *tb, const char *s, size_t len)
{
    hearth_status st = reserve(tb, len);
    if (st != HEARTH_OK) return st;
    if (len) memcpy(tb->data + tb->len, s, len);
    tb->len += len;
    tb->data[tb->len] = '\0';
    return HEARTH_OK;
}

hearth_status textbuf_append_str(textbuf *tb, const char *s)
{
    return textbuf_append(tb, s, strlen(s));
}

hearth_status textbuf_append_char(textbuf *tb, char c)
{
    return textbuf_append(tb, &c, 1);
}

hearth_status textbuf_printf(textbuf *tb, const char *fmt, ...)
{
    char small[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return hearth_error(HEARTH_E_INTERNAL, "formatting %s failed", tb->what);
    if ((size_t)n < sizeof small) return textbuf_append(tb, small, (size_t)n);
    hearth_status st = reserve(tb, (size_t)n);
    if (st != HEARTH_OK) return st;
    va_start(ap, fmt);
    vsnprintf(tb->data + tb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    tb->len += (size_t)n;
    return HEARTH_OK;
}

char *textbuf_take(textbuf *tb, size_t *len_out)
{
    if (!tb->data && textbuf_append(tb, "", 0) != HEARTH_OK) return NULL;
    char *p = tb->data;
    if (len_out) *len_out = tb->len;
    tb->data = NULL;
    tb->len = tb->cap = 0;
    return p;
}

/*
 * utf8.c -- classifying UTF-8 sequences by the table of well-formed byte
 * sequences (Unicode Standard, chapter 3, table 3-7) and encoding code
 * points.
 */
#include "internal.h"

#include "utf8.h"

utf8_scan_result utf8_scan(const unsigned char *s, size_t n, size_t *len, uint32_t *cp)
{
    unsigned char b = s[0];
    if (b < 0x80) {
        *len = 1;
        if (cp) *cp = b;
        return UTF8_COMPLETE;
    }
    /* Table 3-7: the lead byte fixes the length and the range allowed for
     * the second byte; every later byte is 80..BF. */
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    uint32_t value;
    if (b >= 0xC2 && b <= 0xDF) {
        need = 2;
        value = b & 0x1Fu;
    } else if (b >= 0xE0 && b <= 0xEF) {
        need = 3;
        value = b & 0x0Fu;
        if (b == 0xE0) lo = 0xA0;      /* no overlong forms */
        else if (b == 0xED) hi = 0x9F; /* no surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 4;
        value = b & 0x07u;
        if (b == 0xF0) lo = 0x90;      /* no overlong forms */
        else if (b == 0xF4) hi = 0x8F; /* nothing above U+10FFFF */
    } else {
        /* 80..C1 and F5..FF never start a sequence */
        *len = 1;
        return UTF8_INVALID;
    }
    size_t i = 1;
    for (; i < need; i++) {
        if (i >= n) {
            *len = n;
            return UTF8_TRUNCATED;
        }
        unsigned char c = s[i];
        if (c < lo || c > hi) {
            /* The bytes so far are the maximal subpart. */
            *len = i;
            return UTF8_INVALID;
        }
        value = (value << 6) | (c & 0x3Fu);
        lo = 0x80;
        hi = 0xBF;
    }
    *len = need;
    if (cp) *cp = value;
    return UTF8_COMPLETE;
}

size_t utf8_char_len(const unsigned char *s, size_t n)
{
    size_t len;
    utf8_scan(s, n, &len, NULL);
    return len;
}

size_t utf8_encode(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

int utf8_is_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t len;
        if (utf8_scan(p + i, n - i, &len, NULL) != UTF8_COMPLETE) return 0;
        i += len;
    }
    return 1;
}

size_t utf8_decode(const char *s, size_t len, uint32_t *cp)
{
    size_t n;
    if (len == 0) return 0;
    if (utf8_scan((const unsigned char *)s, len, &n, cp) != UTF8_COMPLETE) return 0;
    return n;
}

size_t utf8_validate(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t n;
        if (utf8_scan(p + i, len - i, &n, NULL) != UTF8_COMPLETE) return i;
        i += n;
    }
    return len;
}

size_t utf8_count(const char *s, size_t len)
{
    /* every character has exactly one byte that is not a continuation */
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) n++;
    return n;
}

size_t utf8_offset(const char *s, size_t len, size_t index)
{
    for (size_t i = 0; i < len; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80) {
            if (index == 0) return i;
            index--;
        }
    }
    return len;
}

size_t hearth_utf8_valid_prefix(const char *text, size_t len)
{
    return text ? utf8_validate(text, len) : 0;
}

/*
 * utf8.h -- UTF-8 scanning shared by the tokenizers, the streaming
 * detokenizer, the JSON reader and the chat templates: one routine that classifies the sequence at a position
 * following the well-formed byte sequences of the Unicode Standard
 * (chapter 3, table 3-7), so that every caller agrees on what a character
 * is and on how much of an ill-formed sequence one U+FFFD replaces.
 */
#ifndef HEARTH_UTF8_H
#define HEARTH_UTF8_H

#include <stddef.h>
#include <stdint.h>

typedef enum utf8_scan_result {
    UTF8_COMPLETE,  /* a well-formed sequence of *len bytes */
    UTF8_TRUNCATED, /* all n bytes are a valid but unfinished prefix */
    UTF8_INVALID    /* ill-formed: *len bytes are its maximal subpart */
} utf8_scan_result;

/* Classify the sequence starting at s, with n >= 1 bytes available.  For
 * UTF8_INVALID, *len (>= 1) is the "maximal subpart" of Unicode's U+FFFD
 * substitution practice: the longest prefix that could still begin a
 * well-formed sequence, or one byte.  The code point of a complete
 * sequence goes to *cp when cp is not NULL. */
utf8_scan_result utf8_scan(const unsigned char *s, size_t n, size_t *len, uint32_t *cp);

/* Bytes of a "character" for splitting text into symbols: a complete
 * sequence, the maximal subpart of an ill-formed one, or the rest of a
 * truncated one.  Always >= 1 when n >= 1. */
size_t utf8_char_len(const unsigned char *s, size_t n);

/* Encode a code point (<= 0x10FFFF, not checked for surrogates) into out,
 * which needs room for 4 bytes; returns the number of bytes written. */
size_t utf8_encode(uint32_t cp, char *out);

/* Whether s[0..n) is entirely well-formed UTF-8. */
int utf8_is_valid(const char *s, size_t n);

/* The code point of the well-formed sequence at s (len >= 0 bytes
 * available) in *cp, returning its length (1..4), or 0 when s does not
 * start with a complete well-formed sequence. */
size_t utf8_decode(const char *s, size_t len, uint32_t *cp);

/* Offset of the first byte of s[0..len) that does not belong to a
 * well-formed sequence (a truncated one included), or len when all of s is
 * well-formed. */
size_t utf8_validate(const char *s, size_t len);

/* Number of characters in well-formed text. */
size_t utf8_count(const char *s, size_t len);

/* Byte offset of character number index (from 0) of well-formed text; len
 * when index is at or past the end. */
size_t utf8_offset(const char *s, size_t len, size_t index);

/* The replacement character U+FFFD in UTF-8. */
#define UTF8_REPLACEMENT "\xEF\xBF\xBD"
#define UTF8_REPLACEMENT_LEN 3

#endif /* HEARTH_UTF8_H */

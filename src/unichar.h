/*
 * unichar.h -- UTF-8 coding and the few Unicode character properties the
 * JSON reader and the template interpreter need (whitespace, case,
 * printability), with Python's str semantics as the reference.
 *
 * UTF-8 follows RFC 3629: no overlong forms, no surrogates, nothing above
 * U+10FFFF.  The character properties cover ASCII, Latin-1, Latin Extended-A
 * and Additional, Greek, Cyrillic, Armenian and the fullwidth Latin letters;
 * other characters have no case and count as letters when they are not
 * whitespace, punctuation or symbols of the ranges listed in unichar.c.
 */
#ifndef HEARTH_UNICHAR_H
#define HEARTH_UNICHAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Decode one code point from s[0..len).  Returns the bytes it used (1..4),
 * or 0 when s does not start with a well-formed sequence. */
size_t utf8_decode(const char *s, size_t len, uint32_t *cp);

/* Encode cp (at most U+10FFFF, not a surrogate) into out; returns 1..4. */
size_t utf8_encode(uint32_t cp, char out[4]);

/* Offset of the first byte that is not part of a well-formed sequence, or
 * len when all of s is valid UTF-8. */
size_t utf8_validate(const char *s, size_t len);

/* Number of code points in valid UTF-8 text. */
size_t utf8_count(const char *s, size_t len);

/* Byte offset of code point number index (0-based) in valid UTF-8 text;
 * len when index is at or past the end. */
size_t utf8_offset(const char *s, size_t len, size_t index);

/* Python str.isspace(). */
bool uni_isspace(uint32_t cp);
/* Python's \w: letters, digits and '_' (approximated outside the covered
 * scripts, see above). */
bool uni_isword(uint32_t cp);
bool uni_isalpha(uint32_t cp);
bool uni_isdigit(uint32_t cp);
bool uni_isupper(uint32_t cp);
bool uni_islower(uint32_t cp);
/* Python str.isprintable() of one character (what repr() leaves
 * unescaped). */
bool uni_isprintable(uint32_t cp);

/* Simple one-to-one case mappings; characters without case map to
 * themselves. */
uint32_t uni_toupper(uint32_t cp);
uint32_t uni_tolower(uint32_t cp);

/* Full upper-case mapping as Python's str.upper() does it ("ß" becomes
 * "SS"): writes 1 or 2 code points to out and returns the count. */
int uni_toupper_full(uint32_t cp, uint32_t out[2]);

#endif /* HEARTH_UNICHAR_H */

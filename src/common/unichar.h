/*
 * unichar.h -- the few Unicode character properties the chat-template
 * interpreter needs (whitespace, case, letters and digits, printability),
 * with Python's str semantics as the reference (UTF-8 coding is utf8.h's).
 *
 * The properties cover ASCII, Latin-1, Latin Extended-A and Additional,
 * Greek, Cyrillic, Armenian and the fullwidth Latin letters; other
 * characters have no case and count as letters when they are not
 * whitespace, punctuation or symbols of the ranges listed in unichar.c.
 */
#ifndef HEARTH_UNICHAR_H
#define HEARTH_UNICHAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

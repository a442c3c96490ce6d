/*
 * tokenizer_wpm.h -- the Unicode data of the WordPiece tokenizer
 * (tokenizer_wpm.c), generated into tokenizer_wpm_tables.c by
 * tools/gen-wordpiece-tables.py: sorted ranges of code points, and
 * sorted mappings of a code point to up to three (zero-padded).
 */
#ifndef HEARTH_TOKENIZER_WPM_H
#define HEARTH_TOKENIZER_WPM_H

#include <stddef.h>
#include <stdint.h>

struct wpm_range {
    uint32_t first, last;
};

struct wpm_map {
    uint32_t cp;
    uint32_t to[3];
};

extern const struct wpm_range wpm_punct[], wpm_other[], wpm_space[], wpm_mark[];
extern const size_t wpm_punct_n, wpm_other_n, wpm_space_n, wpm_mark_n;
extern const struct wpm_map wpm_strip[], wpm_lower[];
extern const size_t wpm_strip_n, wpm_lower_n;

#endif /* HEARTH_TOKENIZER_WPM_H */

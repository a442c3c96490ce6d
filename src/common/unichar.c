/*
 * unichar.c -- character properties with Python's str semantics for the
 * scripts listed in unichar.h.
 */
#include "internal.h"

#include "unichar.h"

bool uni_isspace(uint32_t cp)
{
    if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20);
    return cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

/* Case pairs.  Each entry describes upper-case letters: DELTA ranges map
 * cp -> cp + delta; PAIRS ranges alternate upper (first, first + 2, ...) and
 * lower (first + 1, ...). */
enum { CASE_DELTA, CASE_PAIRS };
static const struct case_range {
    uint32_t first, last;
    uint8_t kind;
    int32_t delta;
} case_ranges[] = {
    {0x0041, 0x005a, CASE_DELTA, 32},   {0x00c0, 0x00d6, CASE_DELTA, 32},
    {0x00d8, 0x00de, CASE_DELTA, 32},   {0x0100, 0x012f, CASE_PAIRS, 1},
    {0x0132, 0x0137, CASE_PAIRS, 1},    {0x0139, 0x0148, CASE_PAIRS, 1},
    {0x014a, 0x0177, CASE_PAIRS, 1},    {0x0178, 0x0178, CASE_DELTA, -121},
    {0x0179, 0x017e, CASE_PAIRS, 1},    {0x0386, 0x0386, CASE_DELTA, 38},
    {0x0388, 0x038a, CASE_DELTA, 37},   {0x038c, 0x038c, CASE_DELTA, 64},
    {0x038e, 0x038f, CASE_DELTA, 63},   {0x0391, 0x03a1, CASE_DELTA, 32},
    {0x03a3, 0x03ab, CASE_DELTA, 32},   {0x0400, 0x040f, CASE_DELTA, 80},
    {0x0410, 0x042f, CASE_DELTA, 32},   {0x0460, 0x0481, CASE_PAIRS, 1},
    {0x048a, 0x04bf, CASE_PAIRS, 1},    {0x04c0, 0x04c0, CASE_DELTA, 15},
    {0x04c1, 0x04ce, CASE_PAIRS, 1},    {0x04d0, 0x052f, CASE_PAIRS, 1},
    {0x0531, 0x0556, CASE_DELTA, 48},   {0x1e00, 0x1e95, CASE_PAIRS, 1},
    {0x1ea0, 0x1eff, CASE_PAIRS, 1},    {0xff21, 0xff3a, CASE_DELTA, 32},
};

uint32_t uni_tolower(uint32_t cp)
{
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    if (cp == 0x130) return 'i';     /* simple mapping of dotted capital I */
    if (cp == 0x1e9e) return 0xdf;   /* capital sharp s */
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(case_ranges); i++) {
        const struct case_range *r = &case_ranges[i];
        if (cp < r->first || cp > r->last) continue;
        if (r->kind == CASE_DELTA) return (uint32_t)((int32_t)cp + r->delta);
        return ((cp - r->first) % 2 == 0) ? cp + 1 : cp;
    }
    return cp;
}

uint32_t uni_toupper(uint32_t cp)
{
    if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
    switch (cp) {
    case 0xb5: return 0x39c;   /* micro sign -> capital mu */
    case 0x131: return 'I';    /* dotless i */
    case 0x17f: return 'S';    /* long s */
    case 0x3c2: return 0x3a3;  /* final sigma */
    default: break;
    }
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(case_ranges); i++) {
        const struct case_range *r = &case_ranges[i];
        if (r->kind == CASE_DELTA) {
            int32_t up = (int32_t)cp - r->delta;
            if (up >= (int32_t)r->first && up <= (int32_t)r->last) return (uint32_t)up;
        } else if (cp > r->first && cp <= r->last && (cp - r->first) % 2 == 1) {
            return cp - 1;
        }
    }
    return cp;
}

int uni_toupper_full(uint32_t cp, uint32_t out[2])
{
    if (cp == 0xdf) {
        out[0] = 'S';
        out[1] = 'S';
        return 2;
    }
    out[0] = uni_toupper(cp);
    return 1;
}

bool uni_isupper(uint32_t cp)
{
    return uni_tolower(cp) != cp;
}

bool uni_islower(uint32_t cp)
{
    return uni_toupper(cp) != cp || cp == 0xdf;
}

bool uni_isdigit(uint32_t cp)
{
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    return cp == 0xb2 || cp == 0xb3 || cp == 0xb9 ||
           (cp >= 0x660 && cp <= 0x669) || (cp >= 0x6f0 && cp <= 0x6f9) ||
           (cp >= 0x966 && cp <= 0x96f) || (cp >= 0xff10 && cp <= 0xff19);
}

/* Non-ASCII ranges that hold no letters: controls, punctuation, symbols,
 * combining marks, digits, emoji, private use. */
static const uint32_t non_letter_ranges[][2] = {
    {0x0080, 0x00a9}, {0x00ab, 0x00b4}, {0x00b6, 0x00b9}, {0x00bb, 0x00bf},
    {0x00d7, 0x00d7}, {0x00f7, 0x00f7}, {0x02c2, 0x02c5}, {0x02d2, 0x02df},
    {0x0300, 0x036f}, {0x0660, 0x0669}, {0x06f0, 0x06f9}, {0x0966, 0x096f},
    {0x2000, 0x2bff}, {0x2e00, 0x2e7f}, {0x3000, 0x3004}, {0x3008, 0x3020},
    {0x3030, 0x3030}, {0xd800, 0xf8ff}, {0xfe30, 0xfe4f}, {0xff00, 0xff20},
    {0xff3b, 0xff40}, {0xff5b, 0xff65}, {0x1f000, 0x1faff},
    {0xe0000, 0x10ffff},
};

bool uni_isalpha(uint32_t cp)
{
    if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
    if (uni_isspace(cp)) return false;
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(non_letter_ranges); i++)
        if (cp >= non_letter_ranges[i][0] && cp <= non_letter_ranges[i][1]) return false;
    return true;
}

bool uni_isword(uint32_t cp)
{
    return cp == '_' || uni_isalpha(cp) || uni_isdigit(cp);
}

/* Characters Python's repr() escapes: controls (Cc), format characters
 * (Cf), separators other than the ASCII space (Zs, Zl, Zp), surrogates and
 * private use. */
static const uint32_t unprintable_ranges[][2] = {
    {0x0000, 0x001f}, {0x007f, 0x00a0}, {0x00ad, 0x00ad}, {0x0600, 0x0605},
    {0x061c, 0x061c}, {0x06dd, 0x06dd}, {0x070f, 0x070f}, {0x180e, 0x180e},
    {0x1680, 0x1680}, {0x2000, 0x200f}, {0x2028, 0x202f}, {0x205f, 0x206f},
    {0x3000, 0x3000}, {0xd800, 0xf8ff}, {0xfeff, 0xfeff}, {0xfff0, 0xfffb},
    {0xfffe, 0xffff}, {0x110bd, 0x110bd}, {0x110cd, 0x110cd},
    {0x1bca0, 0x1bca3}, {0x1d173, 0x1d17a}, {0xe0000, 0xe0fff},
    {0xf0000, 0x10ffff},
};

bool uni_isprintable(uint32_t cp)
{
    if (cp >= 0x20 && cp < 0x7f) return true;
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(unprintable_ranges); i++)
        if (cp >= unprintable_ranges[i][0] && cp <= unprintable_ranges[i][1]) return false;
    return true;
}

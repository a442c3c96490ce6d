/*
 * jinja_text.c -- the string operations templates borrow from Python: case
 * changes, strip, split, replace, printf-style `%` formatting, str.format
 * and strftime.  Text is UTF-8 and indexed by character, as Python's str
 * is.  Number formatting never depends on the C locale.
 */
#include "internal.h"

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja.h"
#include "unichar.h"
#include "utf8.h"

/* ---- helpers ----------------------------------------------------------- */

static hearth_status append_cp(textbuf *tb, uint32_t cp)
{
    char buf[4];
    return textbuf_append(tb, buf, utf8_encode(cp, buf));
}

/* Decode the character at *i and advance; invalid bytes read as themselves
 * (they cannot occur in template strings, which are valid UTF-8). */
static uint32_t next_cp(const char *s, size_t len, size_t *i)
{
    uint32_t cp;
    size_t n = utf8_decode(s + *i, len - *i, &cp);
    if (n == 0) {
        cp = (unsigned char)s[*i];
        n = 1;
    }
    *i += n;
    return cp;
}

static bool is_cased(uint32_t cp)
{
    return uni_isupper(cp) || uni_islower(cp);
}

static hearth_status finish(struct jrender *r, textbuf *tb, hearth_status st, value *out)
{
    if (st == HEARTH_OK) st = jinja_string_from(r, tb, out);
    textbuf_free(tb);
    return st;
}

/* ---- case -------------------------------------------------------------- */

static bool jinja_title_separator(uint32_t cp)
{
    return cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || uni_isspace(cp);
}

static hearth_status append_upper(textbuf *tb, uint32_t cp)
{
    uint32_t up[2];
    int n = uni_toupper_full(cp, up);
    hearth_status st = append_cp(tb, up[0]);
    if (st == HEARTH_OK && n == 2) st = append_cp(tb, up[1]);
    return st;
}

hearth_status jtext_case(struct jrender *r, const struct vstring *s, enum jcase how, value *out)
{
    textbuf tb;
    textbuf_init(&tb, JINJA_MAX_OUTPUT, "a string");
    hearth_status st = HEARTH_OK;
    bool prev_cased = false;       /* str.title() */
    bool word_start = true;        /* Jinja's title filter */
    bool first = true;             /* str.capitalize() */
    size_t i = 0;
    while (st == HEARTH_OK && i < s->len) {
        uint32_t cp = next_cp(s->data, s->len, &i);
        switch (how) {
        case JCASE_UPPER:
            st = append_upper(&tb, cp);
            break;
        case JCASE_LOWER:
            st = append_cp(&tb, uni_tolower(cp));
            break;
        case JCASE_CAPITALIZE:
            st = first ? append_cp(&tb, uni_toupper(cp)) : append_cp(&tb, uni_tolower(cp));
            break;
        case JCASE_TITLE:
            /* Python: a cased character after a cased one is lowered, any
             * other cased character is upper-cased */
            if (is_cased(cp)) {
                st = prev_cased ? append_cp(&tb, uni_tolower(cp)) : append_cp(&tb, uni_toupper(cp));
                prev_cased = true;
            } else {
                st = append_cp(&tb, cp);
                prev_cased = false;
            }
            break;
        case JCASE_JINJA_TITLE:
            /* Jinja: words start after runs of whitespace, -, (, {, [ or < */
            if (jinja_title_separator(cp)) {
                st = append_cp(&tb, cp);
                word_start = true;
            } else {
                st = word_start ? append_upper(&tb, cp) : append_cp(&tb, uni_tolower(cp));
                word_start = false;
            }
            break;
        }
        first = false;
    }
    return finish(r, &tb, st, out);
}

/* ---- strip, split, replace --------------------------------------------- */

static bool in_chars(const struct vstring *chars, uint32_t cp)
{
    if (!chars) return uni_isspace(cp);
    size_t i = 0;
    while (i < chars->len)
        if (next_cp(chars->data, chars->len, &i) == cp) return true;
    return false;
}

hearth_status jtext_strip(struct jrender *r, const struct vstring *s, const struct vstring *chars, bool left,
                          bool right, value *out)
{
    size_t start = 0, end = s->len;
    if (left) {
        while (start < end) {
            size_t i = start;
            if (!in_chars(chars, next_cp(s->data, s->len, &i))) break;
            start = i;
        }
    }
    if (right) {
        while (end > start) {
            size_t i = end - 1;
            while (i > start && ((unsigned char)s->data[i] & 0xc0) == 0x80) i--;
            size_t j = i;
            if (!in_chars(chars, next_cp(s->data, s->len, &j))) break;
            end = i;
        }
    }
    return jrender_new_string(r, s->data + start, end - start, out);
}

static size_t find_bytes(const char *hay, size_t hay_len, size_t from, const char *needle, size_t n)
{
    if (n == 0) return from <= hay_len ? from : SIZE_MAX;
    for (size_t i = from; i + n <= hay_len; i++)
        if (hay[i] == needle[0] && memcmp(hay + i, needle, n) == 0) return i;
    return SIZE_MAX;
}

static size_t rfind_bytes(const char *hay, size_t hay_len, size_t before, const char *needle, size_t n)
{
    if (n > hay_len) return SIZE_MAX;
    size_t i = before + n > hay_len ? hay_len - n : before;
    for (;;) {
        if (memcmp(hay + i, needle, n) == 0) return i;
        if (i == 0) return SIZE_MAX;
        i--;
    }
}

static hearth_status push_piece(struct jrender *r, value list, const char *s, size_t len)
{
    value v = value_undefined();
    hearth_status st = jrender_charge(r, 1);
    if (st == HEARTH_OK && value_list_len(list) >= JINJA_MAX_LIST)
        st = hearth_error(HEARTH_E_RANGE, "list longer than %d items", JINJA_MAX_LIST);
    if (st == HEARTH_OK) st = jrender_new_string(r, s, len, &v);
    if (st == HEARTH_OK) st = value_list_push(list, v);
    return st;
}

/* Reverse the items of a list in place (rsplit collects from the right). */
static void reverse_list(value list)
{
    struct vlist *l = list.u.list;
    for (size_t i = 0; i < l->len / 2; i++) {
        value t = l->items[i];
        l->items[i] = l->items[l->len - 1 - i];
        l->items[l->len - 1 - i] = t;
    }
}

hearth_status jtext_split(struct jrender *r, const struct vstring *s, const struct vstring *sep,
                          int64_t maxsplit, bool from_right, value *out)
{
    if (sep && sep->len == 0) return hearth_error(HEARTH_E_TEMPLATE, "empty separator");
    hearth_status st = value_new_list(0, out);
    if (st != HEARTH_OK) return st;
    const char *d = s->data;
    size_t len = s->len;
    int64_t splits = 0;
    if (sep) {
        if (!from_right) {
            size_t start = 0;
            for (;;) {
                size_t at = (maxsplit >= 0 && splits >= maxsplit) ? SIZE_MAX
                            : find_bytes(d, len, start, sep->data, sep->len);
                if (at == SIZE_MAX) {
                    st = push_piece(r, *out, d + start, len - start);
                    break;
                }
                st = push_piece(r, *out, d + start, at - start);
                if (st != HEARTH_OK) break;
                start = at + sep->len;
                splits++;
            }
        } else {
            size_t end = len;
            for (;;) {
                size_t at = (maxsplit >= 0 && splits >= maxsplit) || end < sep->len ? SIZE_MAX
                            : rfind_bytes(d, end, end - sep->len, sep->data, sep->len);
                if (at == SIZE_MAX) {
                    st = push_piece(r, *out, d, end);
                    break;
                }
                st = push_piece(r, *out, d + at + sep->len, end - at - sep->len);
                if (st != HEARTH_OK) break;
                end = at;
                splits++;
            }
            reverse_list(*out);
        }
    } else if (!from_right) {
        /* runs of whitespace separate; none at either end produce "" */
        size_t i = 0;
        for (;;) {
            while (i < len) {
                size_t j = i;
                if (!uni_isspace(next_cp(d, len, &j))) break;
                i = j;
            }
            if (i >= len) break;
            size_t start = i;
            if (maxsplit >= 0 && splits >= maxsplit) {
                /* the rest, as it is (trailing whitespace included) */
                st = push_piece(r, *out, d + start, len - start);
                break;
            }
            while (i < len) {
                size_t j = i;
                if (uni_isspace(next_cp(d, len, &j))) break;
                i = j;
            }
            st = push_piece(r, *out, d + start, i - start);
            if (st != HEARTH_OK) break;
            splits++;
        }
    } else {
        size_t end = len;
        for (;;) {
            /* skip trailing whitespace */
            while (end > 0) {
                size_t k = end - 1;
                while (k > 0 && ((unsigned char)d[k] & 0xc0) == 0x80) k--;
                size_t j = k;
                if (!uni_isspace(next_cp(d, len, &j))) break;
                end = k;
            }
            if (end == 0) break;
            size_t start = end;
            if (maxsplit >= 0 && splits >= maxsplit) {
                /* the rest, leading whitespace included */
                st = push_piece(r, *out, d, end);
                break;
            }
            while (start > 0) {
                size_t k = start - 1;
                while (k > 0 && ((unsigned char)d[k] & 0xc0) == 0x80) k--;
                size_t j = k;
                if (uni_isspace(next_cp(d, len, &j))) break;
                start = k;
            }
            st = push_piece(r, *out, d + start, end - start);
            if (st != HEARTH_OK) break;
            end = start;
            splits++;
        }
        reverse_list(*out);
    }
    if (st != HEARTH_OK) value_unref(*out);
    return st;
}

/* Line boundaries of Python's str.splitlines: \n \r \r\n \v \f \x1c \x1d
 * \x1e \x85 U+2028 U+2029.  Returns the length of the boundary at i. */
static size_t line_break_at(const char *s, size_t len, size_t i)
{
    unsigned char c = (unsigned char)s[i];
    if (c == '\r') return i + 1 < len && s[i + 1] == '\n' ? 2 : 1;
    if (c == '\n' || c == '\v' || c == '\f' || c == 0x1c || c == 0x1d || c == 0x1e) return 1;
    if (c == 0xc2 && i + 1 < len && (unsigned char)s[i + 1] == 0x85) return 2;
    if (c == 0xe2 && i + 2 < len && (unsigned char)s[i + 1] == 0x80 &&
        ((unsigned char)s[i + 2] == 0xa8 || (unsigned char)s[i + 2] == 0xa9))
        return 3;
    return 0;
}

hearth_status jtext_splitlines(struct jrender *r, const struct vstring *s, bool keepends, value *out)
{
    hearth_status st = value_new_list(0, out);
    if (st != HEARTH_OK) return st;
    size_t start = 0, i = 0;
    while (st == HEARTH_OK && i < s->len) {
        size_t br = line_break_at(s->data, s->len, i);
        if (!br) {
            i++;
            continue;
        }
        st = push_piece(r, *out, s->data + start, (keepends ? i + br : i) - start);
        i += br;
        start = i;
    }
    if (st == HEARTH_OK && start < s->len) st = push_piece(r, *out, s->data + start, s->len - start);
    if (st != HEARTH_OK) value_unref(*out);
    return st;
}

hearth_status jtext_replace(struct jrender *r, const struct vstring *s, const struct vstring *old,
                            const struct vstring *new_text, int64_t count, value *out)
{
    textbuf tb;
    textbuf_init(&tb, JINJA_MAX_OUTPUT, "a replaced string");
    hearth_status st = HEARTH_OK;
    if (old->len == 0) {
        /* Python inserts new before every character and at the end */
        size_t i = 0;
        int64_t done = 0;
        while (st == HEARTH_OK) {
            if (count < 0 || done < count) {
                st = textbuf_append(&tb, new_text->data, new_text->len);
                done++;
            }
            if (i >= s->len || st != HEARTH_OK) break;
            size_t start = i;
            next_cp(s->data, s->len, &i);
            st = textbuf_append(&tb, s->data + start, i - start);
        }
        if (st == HEARTH_OK && i < s->len) st = textbuf_append(&tb, s->data + i, s->len - i);
    } else {
        size_t start = 0;
        int64_t done = 0;
        while (st == HEARTH_OK) {
            size_t at = (count >= 0 && done >= count) ? SIZE_MAX
                        : find_bytes(s->data, s->len, start, old->data, old->len);
            if (at == SIZE_MAX) {
                st = textbuf_append(&tb, s->data + start, s->len - start);
                break;
            }
            st = textbuf_append(&tb, s->data + start, at - start);
            if (st == HEARTH_OK) st = textbuf_append(&tb, new_text->data, new_text->len);
            start = at + old->len;
            done++;
        }
    }
    return finish(r, &tb, st, out);
}

hearth_status jtext_html_escape(textbuf *tb, const char *s, size_t len)
{
    hearth_status st = HEARTH_OK;
    size_t run = 0;
    for (size_t i = 0; st == HEARTH_OK && i < len; i++) {
        const char *esc;
        switch (s[i]) {
        case '&': esc = "&amp;"; break;
        case '<': esc = "&lt;"; break;
        case '>': esc = "&gt;"; break;
        case '"': esc = "&#34;"; break;
        case '\'': esc = "&#39;"; break;
        default: continue;
        }
        st = textbuf_append(tb, s + run, i - run);
        if (st == HEARTH_OK) st = textbuf_append_str(tb, esc);
        run = i + 1;
    }
    if (st == HEARTH_OK) st = textbuf_append(tb, s + run, len - run);
    return st;
}

/* ---- number formatting --------------------------------------------------- */

/* The two helpers below hand printf a format built at run time from
 * characters checked against the printf grammar (flags, width, precision,
 * one conversion), which -Wformat-nonliteral cannot see. */
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#endif

/* snprintf of one double with a C format, with '.' as the decimal point
 * whatever the locale. */
static void format_double(char *buf, size_t size, const char *fmt, double x)
{
    snprintf(buf, size, fmt, x);
    const char *point = localeconv()->decimal_point;
    if (point && point[0] && point[0] != '.' && point[1] == '\0') {
        char *p = strchr(buf, point[0]);
        if (p) *p = '.';
    }
}

static hearth_status pad_to(textbuf *tb, const char *s, size_t len, size_t width, char align,
                            uint32_t fill)
{
    size_t chars = utf8_count(s, len);
    size_t pad = width > chars ? width - chars : 0;
    size_t left = align == '>' ? pad : align == '^' ? pad / 2 : 0;
    size_t right = pad - left;
    hearth_status st = HEARTH_OK;
    for (size_t i = 0; st == HEARTH_OK && i < left; i++) st = append_cp(tb, fill);
    if (st == HEARTH_OK) st = textbuf_append(tb, s, len);
    for (size_t i = 0; st == HEARTH_OK && i < right; i++) st = append_cp(tb, fill);
    return st;
}

/* Python int() of a value for %d-style conversions. */
static hearth_status to_int_arg(value v, const char *conv, int64_t *out)
{
    if (v.kind == VALUE_INT || v.kind == VALUE_BOOL) {
        *out = v.kind == VALUE_BOOL ? v.u.b : v.u.i;
        return HEARTH_OK;
    }
    if (v.kind == VALUE_FLOAT && isfinite(v.u.f) && fabs(v.u.f) < 9.2e18) {
        *out = (int64_t)v.u.f;
        return HEARTH_OK;
    }
    return hearth_error(HEARTH_E_TEMPLATE, "%s format: a real number is required, not %s",
                        conv, value_type_name(v));
}

static hearth_status to_float_arg(value v, const char *conv, double *out)
{
    if (v.kind == VALUE_INT || v.kind == VALUE_BOOL || v.kind == VALUE_FLOAT) {
        *out = v.kind == VALUE_FLOAT ? v.u.f : (double)(v.kind == VALUE_BOOL ? v.u.b : v.u.i);
        return HEARTH_OK;
    }
    return hearth_error(HEARTH_E_TEMPLATE, "%s format: a real number is required, not %s",
                        conv, value_type_name(v));
}

/* Render one number conversion (d i u x X o e E f F g G) with C's printf,
 * which agrees with Python's %-formatting for these. */
static hearth_status format_number(textbuf *tb, value v, char type, const char *flags,
                                   int width, int precision, const char *conv)
{
    char fmt[32], buf[512];
    int n = 0;
    fmt[n++] = '%';
    for (const char *f = flags; *f && n < 8; f++) fmt[n++] = *f;
    if (width >= 0) n += snprintf(fmt + n, sizeof fmt - (size_t)n, "%d", width > 400 ? 400 : width);
    if (precision >= 0) n += snprintf(fmt + n, sizeof fmt - (size_t)n, ".%d", precision > 300 ? 300 : precision);
    if (strchr("diuxXo", type)) {
        int64_t i = 0;
        hearth_status st = to_int_arg(v, conv, &i);
        if (st != HEARTH_OK) return st;
        if (type == 'u' || type == 'i') type = 'd';
        if ((type == 'x' || type == 'X' || type == 'o') && i < 0) {
            /* Python writes a sign and the magnitude */
            snprintf(fmt + n, sizeof fmt - (size_t)n, "ll%c", type);
            char mag[64];
            snprintf(mag, sizeof mag, fmt, (unsigned long long)(0 - (uint64_t)i));
            snprintf(buf, sizeof buf, "-%s", mag);
        } else {
            snprintf(fmt + n, sizeof fmt - (size_t)n, "ll%c", type);
            snprintf(buf, sizeof buf, fmt, (long long)i);
        }
    } else {
        double d = 0;
        hearth_status st = to_float_arg(v, conv, &d);
        if (st != HEARTH_OK) return st;
        snprintf(fmt + n, sizeof fmt - (size_t)n, "%c", type);
        format_double(buf, sizeof buf, fmt, d);
    }
    return textbuf_append_str(tb, buf);
}

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif

/* ---- printf-style % ------------------------------------------------------ */

hearth_status jtext_percent_format(struct jrender *r, const struct vstring *fmt, value args,
                                   value *out)
{
    const value *items = &args;
    size_t n_items = 1;
    bool is_mapping = args.kind == VALUE_DICT;
    if (args.kind == VALUE_LIST && args.u.list->is_tuple) {
        items = args.u.list->items;
        n_items = args.u.list->len;
    }
    size_t next = 0;
    bool used_mapping = false;
    textbuf tb;
    textbuf_init(&tb, JINJA_MAX_OUTPUT, "a formatted string");
    hearth_status st = HEARTH_OK;
    const char *s = fmt->data;
    size_t len = fmt->len, i = 0;
    while (st == HEARTH_OK && i < len) {
        const char *pct = memchr(s + i, '%', len - i);
        size_t stop = pct ? (size_t)(pct - s) : len;
        st = textbuf_append(&tb, s + i, stop - i);
        i = stop;
        if (st != HEARTH_OK || i >= len) break;
        i++;   /* '%' */
        if (i >= len) {
            st = hearth_error(HEARTH_E_TEMPLATE, "incomplete format");
            break;
        }
        value arg = value_undefined();
        bool have_arg = false;
        if (s[i] == '(') {
            size_t close = i + 1;
            while (close < len && s[close] != ')') close++;
            if (close >= len || !is_mapping) {
                st = hearth_error(HEARTH_E_TEMPLATE, close >= len ? "incomplete format key"
                                                                  : "format requires a mapping");
                break;
            }
            value *v = value_dict_get(args, s + i + 1, close - i - 1);
            if (!v) {
                st = hearth_error(HEARTH_E_TEMPLATE, "format key '%.*s' not found",
                                  (int)(close - i - 1), s + i + 1);
                break;
            }
            arg = *v;
            have_arg = true;
            used_mapping = true;
            i = close + 1;
        }
        char flags[8];
        int nf = 0;
        while (i < len && strchr("-+ #0", s[i])) {
            if (nf < 7) flags[nf++] = s[i];
            i++;
        }
        flags[nf] = '\0';
        int width = -1, precision = -1;
        if (i < len && s[i] == '*') {
            if (next >= n_items || (items[next].kind != VALUE_INT)) {
                st = hearth_error(HEARTH_E_TEMPLATE, "* wants int");
                break;
            }
            width = (int)HEARTH_MIN(items[next++].u.i, 10000);
            i++;
        } else {
            while (i < len && s[i] >= '0' && s[i] <= '9') {
                width = (width < 0 ? 0 : width) * 10 + (s[i++] - '0');
                if (width > 10000) width = 10000;
            }
        }
        if (i < len && s[i] == '.') {
            i++;
            precision = 0;
            if (i < len && s[i] == '*') {
                if (next >= n_items || items[next].kind != VALUE_INT) {
                    st = hearth_error(HEARTH_E_TEMPLATE, "* wants int");
                    break;
                }
                precision = (int)HEARTH_MIN(items[next++].u.i, 10000);
                i++;
            } else {
                while (i < len && s[i] >= '0' && s[i] <= '9') {
                    precision = precision * 10 + (s[i++] - '0');
                    if (precision > 10000) precision = 10000;
                }
            }
        }
        while (i < len && (s[i] == 'l' || s[i] == 'h' || s[i] == 'L')) i++;
        if (i >= len) {
            st = hearth_error(HEARTH_E_TEMPLATE, "incomplete format");
            break;
        }
        char type = s[i++];
        if (type == '%') {
            st = textbuf_append_char(&tb, '%');
            continue;
        }
        if (!have_arg) {
            if (is_mapping && !(args.kind == VALUE_LIST)) {
                arg = args;
                used_mapping = true;
            } else if (next < n_items) {
                arg = items[next++];
            } else {
                st = hearth_error(HEARTH_E_TEMPLATE, "not enough arguments for format string");
                break;
            }
        }
        char conv[4] = {'%', type, '\0', '\0'};
        switch (type) {
        case 's':
        case 'r':
        case 'a': {
            textbuf piece;
            textbuf_init(&piece, JINJA_MAX_OUTPUT, "a formatted value");
            st = type == 's' ? value_str(arg, &piece) : value_repr(arg, &piece);
            size_t plen = piece.len;
            if (st == HEARTH_OK && precision >= 0 && piece.data)
                plen = utf8_offset(piece.data, piece.len, (size_t)precision);
            if (st == HEARTH_OK)
                st = pad_to(&tb, piece.data ? piece.data : "", plen, width < 0 ? 0 : (size_t)width,
                            strchr(flags, '-') ? '<' : '>', ' ');
            textbuf_free(&piece);
            break;
        }
        case 'c': {
            char ch[8];
            size_t n;
            if (arg.kind == VALUE_STRING && arg.u.s->n_chars == 1) {
                memcpy(ch, arg.u.s->data, arg.u.s->len);
                n = arg.u.s->len;
            } else if (arg.kind == VALUE_INT && arg.u.i >= 0 && arg.u.i <= 0x10ffff &&
                       !(arg.u.i >= 0xd800 && arg.u.i <= 0xdfff)) {
                n = utf8_encode((uint32_t)arg.u.i, ch);
            } else {
                st = hearth_error(HEARTH_E_TEMPLATE, "%%c requires an int or a single character");
                break;
            }
            st = pad_to(&tb, ch, n, width < 0 ? 0 : (size_t)width, strchr(flags, '-') ? '<' : '>', ' ');
            break;
        }
        case 'd': case 'i': case 'u': case 'x': case 'X': case 'o':
        case 'e': case 'E': case 'f': case 'F': case 'g': case 'G':
            st = format_number(&tb, arg, type, flags, width, precision, conv);
            break;
        default:
            st = hearth_error(HEARTH_E_TEMPLATE, "unsupported format character '%c'", type);
            break;
        }
    }
    if (st == HEARTH_OK && !used_mapping && args.kind != VALUE_DICT && next < n_items)
        st = hearth_error(HEARTH_E_TEMPLATE, "not all arguments converted during string formatting");
    return finish(r, &tb, st, out);
}

/* ---- str.format ------------------------------------------------------------ */

/* [[fill]align][sign][#][0][width][,|_][.precision][type] applied to v. */
static hearth_status apply_format_spec(textbuf *tb, value v, const char *spec, size_t len)
{
    uint32_t fill = ' ';
    char align = 0, sign = 0, type = 0, grouping = 0;
    bool alt = false, zero = false;
    int width = -1, precision = -1;
    size_t i = 0;
    /* fill and align */
    if (len > 0) {
        size_t j = 0;
        uint32_t cp = next_cp(spec, len, &j);
        if (j < len && strchr("<>^=", spec[j])) {
            fill = cp;
            align = spec[j];
            i = j + 1;
        } else if (strchr("<>^=", spec[0])) {
            align = spec[0];
            i = 1;
        }
    }
    if (i < len && strchr("+- ", spec[i])) sign = spec[i++];
    if (i < len && spec[i] == '#') {
        alt = true;
        i++;
    }
    if (i < len && spec[i] == '0') {
        zero = true;
        i++;
    }
    while (i < len && spec[i] >= '0' && spec[i] <= '9') {
        width = (width < 0 ? 0 : width) * 10 + (spec[i++] - '0');
        if (width > 10000) width = 10000;
    }
    if (i < len && (spec[i] == ',' || spec[i] == '_')) grouping = spec[i++];
    if (i < len && spec[i] == '.') {
        i++;
        precision = 0;
        while (i < len && spec[i] >= '0' && spec[i] <= '9') {
            precision = precision * 10 + (spec[i++] - '0');
            if (precision > 300) precision = 300;
        }
    }
    if (i < len) type = spec[i++];
    if (i != len) return hearth_error(HEARTH_E_TEMPLATE, "invalid format specifier '%.*s'", (int)len, spec);
    if (grouping) return hearth_error(HEARTH_E_UNSUPPORTED, "digit grouping in format specifiers is not supported");

    bool is_number = v.kind == VALUE_INT || v.kind == VALUE_FLOAT || v.kind == VALUE_BOOL;
    textbuf body;
    textbuf_init(&body, JINJA_MAX_OUTPUT, "a formatted value");
    hearth_status st = HEARTH_OK;
    if (!is_number || type == 's') {
        if (type && type != 's') {
            st = hearth_error(HEARTH_E_TEMPLATE, "unknown format code '%c' for object of type '%s'",
                              type, value_type_name(v));
        } else {
            st = value_str(v, &body);
            if (st == HEARTH_OK && precision >= 0 && body.data)
                body.len = utf8_offset(body.data, body.len, (size_t)precision);
        }
        if (st == HEARTH_OK)
            st = pad_to(tb, body.data ? body.data : "", body.len, width < 0 ? 0 : (size_t)width,
                        align ? align : '<', fill);
        textbuf_free(&body);
        return st;
    }
    char flags[4] = "";
    int nf = 0;
    if (sign == '+' || sign == ' ') flags[nf++] = sign;
    if (alt) flags[nf++] = '#';
    flags[nf] = '\0';
    if (!type && (v.kind == VALUE_INT || v.kind == VALUE_BOOL)) type = 'd';
    if (!type) {
        if (precision < 0) {
            /* str() of the float, with the sign the spec asks for */
            if ((sign == '+' || sign == ' ') && !signbit(v.u.f)) st = textbuf_append_char(&body, sign);
            if (st == HEARTH_OK) st = value_str(v, &body);
        } else {
            st = format_number(&body, v, 'g', flags, -1, precision == 0 ? 1 : precision, "format");
        }
    } else if (type == '%') {
        double d = 0;
        st = to_float_arg(v, "format", &d);
        if (st == HEARTH_OK) st = format_number(&body, value_float(d * 100), 'f', flags, -1,
                                                precision < 0 ? 6 : precision, "format");
        if (st == HEARTH_OK) st = textbuf_append_char(&body, '%');
    } else if (type == 'b') {
        int64_t n;
        st = to_int_arg(v, "format", &n);
        if (st == HEARTH_OK) {
            char bits[72];
            int k = 0;
            uint64_t mag = n < 0 ? 0 - (uint64_t)n : (uint64_t)n;
            do {
                bits[k++] = (char)('0' + (mag & 1));
                mag >>= 1;
            } while (mag);
            if (n < 0) st = textbuf_append_char(&body, '-');
            else if (sign == '+' || sign == ' ') st = textbuf_append_char(&body, sign);
            if (st == HEARTH_OK && alt) st = textbuf_append_str(&body, "0b");
            while (st == HEARTH_OK && k > 0) st = textbuf_append_char(&body, bits[--k]);
        }
    } else if (strchr("dxXoeEfFgGn", type)) {
        if (type == 'n') type = (v.kind == VALUE_FLOAT) ? 'g' : 'd';
        if (strchr("dxXo", type) && v.kind == VALUE_FLOAT) {
            st = hearth_error(HEARTH_E_TEMPLATE, "unknown format code '%c' for object of type 'float'", type);
        } else {
            int prec = strchr("eEfFgG", type) ? (precision < 0 ? 6 : precision) : -1;
            st = format_number(&body, v, type, flags, -1, prec, "format");
        }
    } else {
        st = hearth_error(HEARTH_E_TEMPLATE, "unknown format code '%c' for object of type '%s'",
                          type, value_type_name(v));
    }
    if (st == HEARTH_OK) {
        const char *b = body.data ? body.data : "";
        size_t blen = body.len;
        size_t w = width < 0 ? 0 : (size_t)width;
        if ((zero && !align) || align == '=') {
            /* padding goes between the sign and the digits */
            size_t signlen = (blen > 0 && (b[0] == '-' || b[0] == '+' || b[0] == ' ')) ? 1 : 0;
            st = textbuf_append(tb, b, signlen);
            uint32_t padc = align == '=' ? fill : '0';
            for (size_t k = blen; st == HEARTH_OK && k < w; k++) st = append_cp(tb, padc);
            if (st == HEARTH_OK) st = textbuf_append(tb, b + signlen, blen - signlen);
        } else {
            st = pad_to(tb, b, blen, w, align ? align : '>', fill);
        }
    }
    textbuf_free(&body);
    return st;
}

static bool is_ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Resolve a replacement field name: "", "0", "name", then .attr / [key]. */
static hearth_status resolve_field(struct jrender *r, const char *f, size_t len,
                                   const struct jargs *args, size_t *auto_index, value *out)
{
    size_t i = 0;
    while (i < len && f[i] != '.' && f[i] != '[') i++;
    value cur = value_undefined();
    if (i == 0) {
        if (*auto_index >= args->n_pos)
            return hearth_error(HEARTH_E_TEMPLATE, "Replacement index %zu out of range for positional args tuple",
                                *auto_index);
        cur = value_ref(args->pos[(*auto_index)++]);
    } else if (f[0] >= '0' && f[0] <= '9') {
        size_t idx = 0;
        for (size_t k = 0; k < i; k++) {
            if (f[k] < '0' || f[k] > '9')
                return hearth_error(HEARTH_E_TEMPLATE, "invalid field name '%.*s'", (int)len, f);
            idx = idx * 10 + (size_t)(f[k] - '0');
            if (idx > 1000000) break;
        }
        if (idx >= args->n_pos)
            return hearth_error(HEARTH_E_TEMPLATE, "Replacement index %zu out of range for positional args tuple", idx);
        cur = value_ref(args->pos[idx]);
    } else {
        size_t k = 0;
        while (k < args->n_kw && !(strlen(args->kw_names[k]) == i && memcmp(args->kw_names[k], f, i) == 0)) k++;
        if (k == args->n_kw)
            return hearth_error(HEARTH_E_TEMPLATE, "format key '%.*s' not given", (int)i, f);
        cur = value_ref(args->kw_vals[k]);
    }
    hearth_status st = HEARTH_OK;
    while (st == HEARTH_OK && i < len) {
        value next = value_undefined();
        if (f[i] == '.') {
            size_t start = ++i;
            while (i < len && is_ident_char(f[i])) i++;
            st = jrender_getattr(r, cur, f + start, i - start, &next);
        } else if (f[i] == '[') {
            size_t start = ++i;
            while (i < len && f[i] != ']') i++;
            if (i >= len) {
                st = hearth_error(HEARTH_E_TEMPLATE, "missing ']' in format string");
                break;
            }
            bool digits = i > start;
            for (size_t k = start; k < i; k++) digits = digits && f[k] >= '0' && f[k] <= '9';
            value key = value_undefined();
            if (digits) {
                int64_t n = 0;
                for (size_t k = start; k < i && n < 1000000000; k++) n = n * 10 + (f[k] - '0');
                key = value_int(n);
            } else {
                st = value_new_string(f + start, i - start, &key);
                if (st != HEARTH_OK) break;
            }
            i++;
            /* like Python: keys index lists and dicts; no attribute fallback */
            if (cur.kind == VALUE_LIST && key.kind == VALUE_INT && (size_t)key.u.i < value_list_len(cur)) {
                next = value_ref(value_list_at(cur, (size_t)key.u.i));
            } else if (cur.kind == VALUE_DICT && key.kind == VALUE_STRING &&
                       value_dict_get(cur, key.u.s->data, key.u.s->len)) {
                next = value_ref(*value_dict_get(cur, key.u.s->data, key.u.s->len));
            } else {
                st = hearth_error(HEARTH_E_TEMPLATE, "format field '%.*s': no such item", (int)len, f);
            }
            value_unref(key);
        } else {
            st = hearth_error(HEARTH_E_TEMPLATE, "invalid field name '%.*s'", (int)len, f);
            break;
        }
        if (st != HEARTH_OK) break;
        if (next.kind == VALUE_UNDEFINED) {
            value_unref(next);
            st = hearth_error(HEARTH_E_TEMPLATE, "format field '%.*s' has no such attribute", (int)len, f);
            break;
        }
        value_unref(cur);
        cur = next;
    }
    if (st != HEARTH_OK) {
        value_unref(cur);
        return st;
    }
    *out = cur;
    return HEARTH_OK;
}

hearth_status jtext_str_format(struct jrender *r, const struct vstring *fmt,
                               const struct jargs *args, value *out)
{
    textbuf tb;
    textbuf_init(&tb, JINJA_MAX_OUTPUT, "a formatted string");
    hearth_status st = HEARTH_OK;
    const char *s = fmt->data;
    size_t len = fmt->len, i = 0, auto_index = 0;
    while (st == HEARTH_OK && i < len) {
        char c = s[i];
        if (c == '}') {
            if (i + 1 < len && s[i + 1] == '}') {
                st = textbuf_append_char(&tb, '}');
                i += 2;
                continue;
            }
            st = hearth_error(HEARTH_E_TEMPLATE, "Single '}' encountered in format string");
            break;
        }
        if (c != '{') {
            size_t start = i;
            while (i < len && s[i] != '{' && s[i] != '}') i++;
            st = textbuf_append(&tb, s + start, i - start);
            continue;
        }
        if (i + 1 < len && s[i + 1] == '{') {
            st = textbuf_append_char(&tb, '{');
            i += 2;
            continue;
        }
        size_t close = i + 1;
        while (close < len && s[close] != '}' && s[close] != '{') close++;
        if (close >= len || s[close] == '{') {
            st = hearth_error(HEARTH_E_TEMPLATE, close >= len ? "Single '{' encountered in format string"
                              : "nested replacement fields in format strings are not supported");
            break;
        }
        const char *field = s + i + 1;
        size_t flen = close - i - 1;
        size_t name_end = 0;
        while (name_end < flen && field[name_end] != '!' && field[name_end] != ':') name_end++;
        char conversion = 0;
        size_t spec_at = name_end;
        if (name_end < flen && field[name_end] == '!') {
            if (name_end + 1 >= flen) {
                st = hearth_error(HEARTH_E_TEMPLATE, "end of string while looking for conversion specifier");
                break;
            }
            conversion = field[name_end + 1];
            spec_at = name_end + 2;
            if (spec_at < flen && field[spec_at] != ':') {
                st = hearth_error(HEARTH_E_TEMPLATE, "expected ':' after conversion specifier");
                break;
            }
        }
        value v = value_undefined();
        st = resolve_field(r, field, name_end, args, &auto_index, &v);
        if (st != HEARTH_OK) break;
        if (conversion == 'r' || conversion == 'a' || conversion == 's') {
            textbuf conv;
            textbuf_init(&conv, JINJA_MAX_OUTPUT, "a formatted value");
            st = conversion == 's' ? value_str(v, &conv) : value_repr(v, &conv);
            value_unref(v);
            if (st == HEARTH_OK) st = jinja_string_from(r, &conv, &v);
            textbuf_free(&conv);
            if (st != HEARTH_OK) break;
        } else if (conversion) {
            value_unref(v);
            st = hearth_error(HEARTH_E_TEMPLATE, "Unknown conversion specifier %c", conversion);
            break;
        }
        const char *spec = spec_at < flen ? field + spec_at + 1 : "";
        size_t spec_len = spec_at < flen ? flen - spec_at - 1 : 0;
        st = apply_format_spec(&tb, v, spec, spec_len);
        value_unref(v);
        i = close + 1;
    }
    return finish(r, &tb, st, out);
}

/* ---- strftime ------------------------------------------------------------ */

static const char *const weekday_names[] = {"Sunday", "Monday", "Tuesday", "Wednesday",
                                            "Thursday", "Friday", "Saturday"};
static const char *const month_names[] = {"January", "February", "March", "April", "May", "June",
                                          "July", "August", "September", "October", "November",
                                          "December"};

/* 0 = Sunday (Sakamoto's method, proleptic Gregorian calendar). */
static int weekday(int y, int m, int d)
{
    static const int t[] = {0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4};
    if (m < 3) y -= 1;
    return ((y + y / 4 - y / 100 + y / 400 + t[m - 1] + d) % 7 + 7) % 7;
}

static int day_of_year(int y, int m, int d)
{
    static const int before[] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return before[m - 1] + d + (leap && m > 2 ? 1 : 0);
}

/* A number padded to width with pad, or not at all ("%-d"). */
static hearth_status put_num(textbuf *tb, int v, int width, bool no_pad, char pad)
{
    char digits[16];
    int n = snprintf(digits, sizeof digits, "%d", v);
    hearth_status st = HEARTH_OK;
    for (int i = n; !no_pad && i < width && st == HEARTH_OK; i++) st = textbuf_append_char(tb, pad);
    if (st == HEARTH_OK) st = textbuf_append(tb, digits, (size_t)n);
    return st;
}

hearth_status jtext_strftime(struct jrender *r, const struct vstring *fmt, const struct jinja_clock *c, value *out)
{
    textbuf tb;
    textbuf_init(&tb, JINJA_MAX_OUTPUT, "a formatted date");
    hearth_status st = HEARTH_OK;
    int wday = weekday(c->year, c->month, c->day);
    int yday = day_of_year(c->year, c->month, c->day);
    int hour12 = c->hour % 12 == 0 ? 12 : c->hour % 12;
    for (size_t i = 0; st == HEARTH_OK && i < fmt->len; i++) {
        char ch = fmt->data[i];
        if (ch != '%' || i + 1 >= fmt->len) {
            st = textbuf_append_char(&tb, ch);
            continue;
        }
        /* glibc's "%-d" leaves out the padding */
        bool no_pad = fmt->data[i + 1] == '-' && i + 2 < fmt->len;
        char d = fmt->data[i + 1 + no_pad];
        switch (d) {
        case 'a': st = textbuf_printf(&tb, "%.3s", weekday_names[wday]); break;
        case 'A': st = textbuf_append_str(&tb, weekday_names[wday]); break;
        case 'b':
        case 'h': st = textbuf_printf(&tb, "%.3s", month_names[c->month - 1]); break;
        case 'B': st = textbuf_append_str(&tb, month_names[c->month - 1]); break;
        case 'd': st = put_num(&tb, c->day, 2, no_pad, '0'); break;
        case 'e': st = put_num(&tb, c->day, 2, no_pad, ' '); break;
        case 'm': st = put_num(&tb, c->month, 2, no_pad, '0'); break;
        case 'y': st = put_num(&tb, ((c->year % 100) + 100) % 100, 2, no_pad, '0'); break;
        case 'Y': st = textbuf_printf(&tb, "%d", c->year); break;
        case 'H': st = put_num(&tb, c->hour, 2, no_pad, '0'); break;
        case 'I': st = put_num(&tb, hour12, 2, no_pad, '0'); break;
        case 'M': st = put_num(&tb, c->minute, 2, no_pad, '0'); break;
        case 'S': st = put_num(&tb, c->second, 2, no_pad, '0'); break;
        case 'p': st = textbuf_append_str(&tb, c->hour < 12 ? "AM" : "PM"); break;
        case 'j': st = put_num(&tb, yday, 3, no_pad, '0'); break;
        case 'w': st = textbuf_printf(&tb, "%d", wday); break;
        case 'u': st = textbuf_printf(&tb, "%d", wday == 0 ? 7 : wday); break;
        case 'D': st = textbuf_printf(&tb, "%02d/%02d/%02d", c->month, c->day, ((c->year % 100) + 100) % 100); break;
        case 'F': st = textbuf_printf(&tb, "%d-%02d-%02d", c->year, c->month, c->day); break;
        case 'T': st = textbuf_printf(&tb, "%02d:%02d:%02d", c->hour, c->minute, c->second); break;
        case 'R': st = textbuf_printf(&tb, "%02d:%02d", c->hour, c->minute); break;
        case 'x': st = textbuf_printf(&tb, "%02d/%02d/%02d", c->month, c->day, ((c->year % 100) + 100) % 100); break;
        case 'X': st = textbuf_printf(&tb, "%02d:%02d:%02d", c->hour, c->minute, c->second); break;
        case 'c':
            st = textbuf_printf(&tb, "%.3s %.3s %2d %02d:%02d:%02d %d", weekday_names[wday],
                                month_names[c->month - 1], c->day, c->hour, c->minute, c->second, c->year);
            break;
        case 'Z':
        case 'z': break;   /* the clock has no time zone */
        case '%': st = textbuf_append_char(&tb, '%'); break;
        default:
            /* unknown directives stay as written, as glibc leaves them */
            st = textbuf_append(&tb, fmt->data + i, 2 + (size_t)no_pad);
            break;
        }
        i += 1 + (size_t)no_pad;
    }
    return finish(r, &tb, st, out);
}

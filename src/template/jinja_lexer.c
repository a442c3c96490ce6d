/*
 * jinja_lexer.c -- template text to tokens, following the lexical rules of
 * Python's Jinja with the settings transformers uses for chat templates:
 * trim_blocks (the newline after a block or comment tag is dropped),
 * lstrip_blocks (spaces and tabs before a block or comment tag at the start
 * of a line are dropped), "-" and "+" whitespace control on tags, newlines
 * normalised to "\n" and one trailing newline removed.
 *
 * Also here: the arena that holds a parsed template and the line/column
 * error positions shared with the parser and the evaluator.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja.h"
#include "unichar.h"
#include "utf8.h"

/* ---- arena ------------------------------------------------------------- */

struct jarena_chunk {
    struct jarena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *jarena_alloc(struct jarena *a, size_t bytes)
{
    bytes = (bytes + 15) & ~(size_t)15;
    struct jarena_chunk *c = a->head;
    if (!c || c->cap - c->used < bytes) {
        size_t cap = bytes > 16384 ? bytes : 16384;
        c = hearth_malloc(sizeof *c + cap, "a template");
        if (!c) return NULL;
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += bytes;
    memset(p, 0, bytes);
    return p;
}

char *jarena_strndup(struct jarena *a, const char *s, size_t len)
{
    char *p = jarena_alloc(a, len + 1);
    if (!p) return NULL;
    if (len) memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

void jarena_free(struct jarena *a)
{
    struct jarena_chunk *c = a->head;
    while (c) {
        struct jarena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
}

/* ---- error positions --------------------------------------------------- */

void jinja_position(const struct jinja_template *t, uint32_t pos, unsigned *line, unsigned *col)
{
    size_t end = pos < t->source_len ? pos : t->source_len;
    unsigned l = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < end; i++) {
        if (t->source[i] == '\n') {
            l++;
            line_start = i + 1;
        }
    }
    *line = l;
    *col = 1 + (unsigned)utf8_count(t->source + line_start, end - line_start);
}

hearth_status jinja_error_at(const struct jinja_template *t, hearth_status status, uint32_t pos,
                             const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    unsigned line, col;
    jinja_position(t, pos, &line, &col);
    return hearth_error(status, "chat template line %u, column %u: %s", line, col, msg);
}

/* ---- lexer ------------------------------------------------------------- */

struct lexer {
    struct jinja_template *t;
    const char *s;
    size_t len;
    size_t pos;
    struct jtoken *toks;
    size_t n, cap;
};

static hearth_status push_token(struct lexer *lx, struct jtoken tok)
{
    if (lx->n == lx->cap) {
        size_t cap = lx->cap ? lx->cap * 2 : 256;
        struct jtoken *p = hearth_realloc(lx->toks, cap * sizeof *p, "template tokens");
        if (!p) return HEARTH_E_NOMEM;
        lx->toks = p;
        lx->cap = cap;
    }
    lx->toks[lx->n++] = tok;
    return HEARTH_OK;
}

static hearth_status push_simple(struct lexer *lx, enum jtok kind, size_t pos)
{
    struct jtoken tok = {0};
    tok.kind = kind;
    tok.pos = (uint32_t)pos;
    return push_token(lx, tok);
}

/* Bytes of the whitespace character at i (Python's \s), or 0. */
static size_t space_at(const char *s, size_t len, size_t i)
{
    if (i >= len) return 0;
    unsigned char c = (unsigned char)s[i];
    if (c < 0x80) return uni_isspace(c) ? 1 : 0;
    uint32_t cp;
    size_t n = utf8_decode(s + i, len - i, &cp);
    return n && uni_isspace(cp) ? n : 0;
}

static size_t skip_spaces(const char *s, size_t len, size_t i)
{
    size_t n;
    while ((n = space_at(s, len, i)) > 0) i += n;
    return i;
}

/* Length of text[0..len) without its trailing whitespace. */
static size_t rstrip_len(const char *text, size_t len)
{
    size_t keep = 0, i = 0;
    while (i < len) {
        size_t n = space_at(text, len, i);
        if (n) {
            i += n;
        } else {
            i++;
            while (i < len && ((unsigned char)text[i] & 0xc0) == 0x80) i++;
            keep = i;
        }
    }
    return keep;
}

static bool starts_with(const struct lexer *lx, size_t i, const char *word)
{
    size_t n = strlen(word);
    return i <= lx->len && lx->len - i >= n && memcmp(lx->s + i, word, n) == 0;
}

/* Emit the text [start, end) that precedes a tag, applying the tag's
 * whitespace control: "-" strips all whitespace before it; otherwise, for
 * block and comment tags without "+", lstrip_blocks removes the spaces
 * between the start of the line and the tag. */
static hearth_status emit_text(struct lexer *lx, size_t start, size_t end, char sign, bool lstrip)
{
    const char *text = lx->s + start;
    size_t len = end - start;
    if (sign == '-') {
        len = rstrip_len(text, len);
    } else if (sign != '+' && lstrip) {
        size_t line_from = 0;
        for (size_t i = len; i > 0; i--) {
            if (text[i - 1] == '\n') {
                line_from = i;
                break;
            }
        }
        bool line_starting = start == 0 || lx->s[start - 1] == '\n';
        if ((line_from > 0 || line_starting) && line_from < len &&
            skip_spaces(text, len, line_from) == len)
            len = line_from;
    }
    if (len == 0) return HEARTH_OK;
    struct jtoken tok = {0};
    tok.kind = JT_TEXT;
    tok.pos = (uint32_t)start;
    tok.text = text;
    tok.len = len;
    return push_token(lx, tok);
}

/* After "%}" style ends: "-" strips following whitespace, "+" keeps it,
 * otherwise trim_blocks drops a single newline. */
static size_t after_block_end(const struct lexer *lx, size_t i, char sign)
{
    if (sign == '-') return skip_spaces(lx->s, lx->len, i);
    if (sign != '+' && i < lx->len && lx->s[i] == '\n') return i + 1;
    return i;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* (\d+_)*\d+ starting at i: the end, or i when there is no digit. */
static size_t scan_digits(const char *s, size_t len, size_t i)
{
    if (i >= len || !is_digit(s[i])) return i;
    for (;;) {
        while (i < len && is_digit(s[i])) i++;
        if (i + 1 < len && s[i] == '_' && is_digit(s[i + 1])) {
            i++;
            continue;
        }
        return i;
    }
}

static hearth_status lex_number(struct lexer *lx)
{
    const char *s = lx->s;
    size_t start = lx->pos;
    size_t end = scan_digits(s, lx->len, start);
    /* A float has a fraction, an exponent or both; not after a '.', so
     * that "x.0.1" reads as two item lookups. */
    bool after_dot = start > 0 && s[start - 1] == '.';
    size_t fend = end;
    bool is_float = false;
    if (!after_dot) {
        size_t p = end;
        if (p + 1 < lx->len && s[p] == '.' && is_digit(s[p + 1])) {
            p = scan_digits(s, lx->len, p + 1);
            is_float = true;
        }
        if (p < lx->len && (s[p] == 'e' || s[p] == 'E')) {
            size_t q = p + 1;
            if (q < lx->len && (s[q] == '+' || s[q] == '-')) q++;
            size_t e = scan_digits(s, lx->len, q);
            if (e > q) {
                p = e;
                is_float = true;
            }
        }
        fend = p;
    }
    struct jtoken tok = {0};
    tok.pos = (uint32_t)start;
    if (is_float) {
        char buf[128];
        size_t n = 0;
        for (size_t i = start; i < fend && n < sizeof buf - 1; i++)
            if (s[i] != '_') buf[n++] = s[i];
        if (fend - start >= sizeof buf)
            return jinja_error_at(lx->t, HEARTH_E_FORMAT, (uint32_t)start, "number literal too long");
        tok.kind = JT_FLOAT;
        tok.f = value_parse_double(buf, n, NULL);
        lx->pos = fend;
        return push_token(lx, tok);
    }
    /* integers: 0b.., 0o.., 0x.., [1-9](_?\d)*, 0(_?0)* */
    int base = 10;
    size_t p = start;
    if (s[start] == '0' && start + 1 < lx->len) {
        char k = (char)(s[start + 1] | 0x20);
        base = k == 'b' ? 2 : k == 'o' ? 8 : k == 'x' ? 16 : 10;
    }
    uint64_t v = 0;
    bool overflow = false;
    if (base != 10) {
        p = start + 2;
        size_t digits = 0;
        for (;;) {
            size_t q = p;
            if (q < lx->len && s[q] == '_') q++;
            if (q >= lx->len) break;
            char c = s[q];
            int d = is_digit(c) ? c - '0' : ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') ? (c | 0x20) - 'a' + 10 : 99;
            if (d >= base) break;
            if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) overflow = true;
            v = v * (uint64_t)base + (uint64_t)d;
            p = q + 1;
            digits++;
        }
        if (digits == 0) {   /* "0x" alone is the integer 0 followed by a name */
            base = 10;
            p = start;
        }
    }
    if (base == 10) {
        if (s[start] == '0') {
            p = start + 1;
            for (;;) {
                size_t q = p;
                if (q < lx->len && s[q] == '_') q++;
                if (q < lx->len && s[q] == '0') p = q + 1;
                else break;
            }
        } else {
            p = start;
            for (;;) {
                size_t q = p;
                if (q > start && q < lx->len && s[q] == '_') q++;
                if (q >= lx->len || !is_digit(s[q])) break;
                uint64_t d = (uint64_t)(s[q] - '0');
                if (v > (UINT64_MAX - d) / 10) overflow = true;
                v = v * 10 + d;
                p = q + 1;
            }
        }
    }
    if (overflow || v > (uint64_t)INT64_MAX)
        return jinja_error_at(lx->t, HEARTH_E_FORMAT, (uint32_t)start,
                              "integer literal does not fit in 64 bits");
    tok.kind = JT_INT;
    tok.i = (int64_t)v;
    lx->pos = p;
    return push_token(lx, tok);
}

static int hex_value(char c)
{
    if (is_digit(c)) return c - '0';
    c = (char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decode a string literal's body with Python's escape sequences. */
static hearth_status decode_string(struct lexer *lx, size_t start, size_t end, struct jtoken *tok)
{
    textbuf tb;
    textbuf_init(&tb, JINJA_MAX_SOURCE, "a string literal");
    hearth_status st = HEARTH_OK;
    size_t i = start;
    while (st == HEARTH_OK && i < end) {
        size_t run = i;
        while (i < end && lx->s[i] != '\\') i++;
        st = textbuf_append(&tb, lx->s + run, i - run);
        if (st != HEARTH_OK || i >= end) break;
        size_t esc = i++;
        char c = lx->s[i++];
        uint32_t cp = 0;
        int hex_digits = 0;
        switch (c) {
        case '\n': continue;   /* line continuation */
        case '\\': cp = '\\'; break;
        case '\'': cp = '\''; break;
        case '"': cp = '"'; break;
        case 'a': cp = 7; break;
        case 'b': cp = 8; break;
        case 'f': cp = 12; break;
        case 'n': cp = 10; break;
        case 'r': cp = 13; break;
        case 't': cp = 9; break;
        case 'v': cp = 11; break;
        case 'x': hex_digits = 2; break;
        case 'u': hex_digits = 4; break;
        case 'U': hex_digits = 8; break;
        case 'N':
            st = jinja_error_at(lx->t, HEARTH_E_FORMAT, (uint32_t)esc,
                                "\\N{...} escapes are not supported");
            continue;
        default:
            if (c >= '0' && c <= '7') {
                cp = (uint32_t)(c - '0');
                for (int k = 0; k < 2 && i < end && lx->s[i] >= '0' && lx->s[i] <= '7'; k++)
                    cp = cp * 8 + (uint32_t)(lx->s[i++] - '0');
            } else {
                /* unknown escapes stay as written */
                st = textbuf_append(&tb, lx->s + esc, i - esc);
                continue;
            }
        }
        if (hex_digits) {
            for (int k = 0; k < hex_digits; k++) {
                int d = i < end ? hex_value(lx->s[i]) : -1;
                if (d < 0) {
                    st = jinja_error_at(lx->t, HEARTH_E_FORMAT, (uint32_t)esc,
                                        "truncated \\%c escape in a string literal", c);
                    break;
                }
                cp = cp * 16 + (uint32_t)d;
                i++;
            }
            if (st != HEARTH_OK) break;
        }
        if (cp > 0x10ffff) {
            st = jinja_error_at(lx->t, HEARTH_E_FORMAT, (uint32_t)esc,
                                "escape beyond U+10FFFF in a string literal");
        } else if (cp >= 0xd800 && cp <= 0xdfff) {
            st = jinja_error_at(lx->t, HEARTH_E_FORMAT, (uint32_t)esc,
                                "surrogate escape in a string literal (write the character itself)");
        } else {
            char buf[4];
            st = textbuf_append(&tb, buf, utf8_encode(cp, buf));
        }
    }
    if (st == HEARTH_OK) {
        tok->text = jarena_strndup(&lx->t->arena, tb.data ? tb.data : "", tb.len);
        tok->len = tb.len;
        if (!tok->text) st = HEARTH_E_NOMEM;
    }
    textbuf_free(&tb);
    return st;
}

static hearth_status lex_string(struct lexer *lx)
{
    size_t start = lx->pos;
    char quote = lx->s[start];
    size_t i = start + 1;
    while (i < lx->len && lx->s[i] != quote) i += lx->s[i] == '\\' ? 2 : 1;
    if (i >= lx->len)
        return jinja_error_at(lx->t, HEARTH_E_FORMAT, (uint32_t)start, "unterminated string literal");
    struct jtoken tok = {0};
    tok.kind = JT_STRING;
    tok.pos = (uint32_t)start;
    hearth_status st = decode_string(lx, start + 1, i, &tok);
    if (st != HEARTH_OK) return st;
    lx->pos = i + 1;
    return push_token(lx, tok);
}

static const struct {
    const char *text;
    enum jtok kind;
} operators[] = {
    {"//", JT_FLOORDIV}, {"**", JT_POW}, {"==", JT_EQ}, {"!=", JT_NE}, {">=", JT_GE},
    {"<=", JT_LE}, {"+", JT_ADD}, {"-", JT_SUB}, {"/", JT_DIV}, {"*", JT_MUL},
    {"%", JT_MOD}, {"~", JT_TILDE}, {"[", JT_LBRACKET}, {"]", JT_RBRACKET},
    {"(", JT_LPAREN}, {")", JT_RPAREN}, {"{", JT_LBRACE}, {"}", JT_RBRACE},
    {">", JT_GT}, {"<", JT_LT}, {"=", JT_ASSIGN}, {".", JT_DOT}, {":", JT_COLON},
    {"|", JT_PIPE}, {",", JT_COMMA}, {";", JT_SEMICOLON},
};

/* The inside of a {{ }} or {% %} tag, up to and including its end. */
static hearth_status lex_tag(struct lexer *lx, bool is_block, size_t tag_pos)
{
    char closers[JINJA_MAX_NESTING];
    int depth = 0;
    for (;;) {
        size_t i = lx->pos;
        if (depth == 0) {
            if (is_block) {
                char sign = 0;
                if (starts_with(lx, i, "+%}")) sign = '+';
                else if (starts_with(lx, i, "-%}")) sign = '-';
                if (sign || starts_with(lx, i, "%}")) {
                    hearth_status st = push_simple(lx, JT_BLOCK_END, i);
                    lx->pos = after_block_end(lx, i + (sign ? 3 : 2), sign);
                    return st;
                }
            } else {
                bool strip = starts_with(lx, i, "-}}");
                if (strip || starts_with(lx, i, "}}")) {
                    hearth_status st = push_simple(lx, JT_VAR_END, i);
                    lx->pos = strip ? skip_spaces(lx->s, lx->len, i + 3) : i + 2;
                    return st;
                }
            }
        }
        if (i >= lx->len)
            return jinja_error_at(lx->t, HEARTH_E_FORMAT, (uint32_t)tag_pos,
                                  "unexpected end of template: this tag has no closing '%s'",
                                  is_block ? "%}" : "}}");
        size_t sp = space_at(lx->s, lx->len, i);
        if (sp) {
            lx->pos = i + sp;
            continue;
        }
        char c = lx->s[i];
        hearth_status st;
        if (is_digit(c)) {
            st = lex_number(lx);
        } else if (is_name_start(c)) {
            size_t e = i + 1;
            while (e < lx->len && (is_name_start(lx->s[e]) || is_digit(lx->s[e]))) e++;
            struct jtoken tok = {0};
            tok.kind = JT_NAME;
            tok.pos = (uint32_t)i;
            tok.text = jarena_strndup(&lx->t->arena, lx->s + i, e - i);
            tok.len = e - i;
            if (!tok.text) return HEARTH_E_NOMEM;
            lx->pos = e;
            st = push_token(lx, tok);
        } else if (c == '"' || c == '\'') {
            st = lex_string(lx);
        } else {
            size_t k = 0;
            while (k < HEARTH_ARRAY_LEN(operators) && !starts_with(lx, i, operators[k].text)) k++;
            if (k == HEARTH_ARRAY_LEN(operators)) {
                uint32_t cp = (unsigned char)c;
                size_t n = utf8_decode(lx->s + i, lx->len - i, &cp);
                if (n > 0 && cp >= 0x20 && cp != 0x7f && !(cp >= 0x80 && cp < 0xa0))
                    return jinja_error_at(lx->t, HEARTH_E_FORMAT, (uint32_t)i,
                                          "unexpected character '%.*s'", (int)n, lx->s + i);
                return jinja_error_at(lx->t, HEARTH_E_FORMAT, (uint32_t)i,
                                      "unexpected character U+%04X", (unsigned)cp);
            }
            enum jtok kind = operators[k].kind;
            if (kind == JT_LPAREN || kind == JT_LBRACKET || kind == JT_LBRACE) {
                if (depth == JINJA_MAX_NESTING)
                    return jinja_error_at(lx->t, HEARTH_E_FORMAT, (uint32_t)i,
                                          "brackets nested more than %d deep", JINJA_MAX_NESTING);
                closers[depth++] = kind == JT_LPAREN ? ')' : kind == JT_LBRACKET ? ']' : '}';
            } else if (kind == JT_RPAREN || kind == JT_RBRACKET || kind == JT_RBRACE) {
                if (depth == 0)
                    return jinja_error_at(lx->t, HEARTH_E_FORMAT, (uint32_t)i, "unexpected '%c'", c);
                if (closers[depth - 1] != c)
                    return jinja_error_at(lx->t, HEARTH_E_FORMAT, (uint32_t)i,
                                          "unexpected '%c', expected '%c'", c, closers[depth - 1]);
                depth--;
            }
            lx->pos = i + strlen(operators[k].text);
            st = push_simple(lx, kind, i);
        }
        if (st != HEARTH_OK) return st;
    }
}

/* {%[-+]?\s*WORD\s*(-%}|%}) at i: the position after "%}" (or after the
 * whitespace "-%}" strips, or the newline trim_blocks drops when
 * trim_end), else 0.  *sign gets the sign before "%}" and *begin_sign the
 * one after "{%". */
static size_t match_word_tag(const struct lexer *lx, size_t i, const char *word, bool trim_end,
                             char *begin_sign)
{
    if (!starts_with(lx, i, "{%")) return 0;
    size_t p = i + 2;
    *begin_sign = 0;
    if (p < lx->len && (lx->s[p] == '-' || lx->s[p] == '+')) *begin_sign = lx->s[p++];
    p = skip_spaces(lx->s, lx->len, p);
    if (!starts_with(lx, p, word)) return 0;
    p += strlen(word);
    size_t q = skip_spaces(lx->s, lx->len, p);
    if (q == p && q < lx->len && (is_name_start(lx->s[q]) || is_digit(lx->s[q]))) return 0;
    p = q;
    if (trim_end && starts_with(lx, p, "+%}")) return p + 3;
    if (starts_with(lx, p, "-%}")) return skip_spaces(lx->s, lx->len, p + 3);
    if (starts_with(lx, p, "%}")) return trim_end ? after_block_end(lx, p + 2, 0) : p + 2;
    return 0;
}

/* {% raw %}...{% endraw %}: the content is text, tags and all. */
static hearth_status lex_raw(struct lexer *lx, size_t tag_pos, size_t after_begin)
{
    for (size_t i = after_begin; i + 1 < lx->len; i++) {
        if (lx->s[i] != '{' || lx->s[i + 1] != '%') continue;
        char sign;
        size_t end = match_word_tag(lx, i, "endraw", true, &sign);
        if (!end) continue;
        hearth_status st = emit_text(lx, after_begin, i, sign, true);
        lx->pos = end;
        return st;
    }
    return jinja_error_at(lx->t, HEARTH_E_FORMAT, (uint32_t)tag_pos,
                          "missing {%% endraw %%} for this raw block");
}

static hearth_status lex_comment(struct lexer *lx, size_t tag_pos, size_t body)
{
    for (size_t i = body; i + 1 < lx->len; i++) {
        if (lx->s[i] != '#' || lx->s[i + 1] != '}') continue;
        char sign = 0;
        if (i > body && (lx->s[i - 1] == '-' || lx->s[i - 1] == '+')) sign = lx->s[i - 1];
        lx->pos = after_block_end(lx, i + 2, sign);
        return HEARTH_OK;
    }
    return jinja_error_at(lx->t, HEARTH_E_FORMAT, (uint32_t)tag_pos,
                          "missing '#}' at the end of this comment");
}

/* Newlines become "\n" and one final newline is dropped
 * (keep_trailing_newline is off). */
static hearth_status normalise_source(struct jinja_template *t, const char *text, size_t len)
{
    char *s = hearth_malloc(len + 1, "a template");
    if (!s) return HEARTH_E_NOMEM;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && text[i + 1] == '\n') i++;
        } else {
            s[n++] = text[i];
        }
    }
    if (n > 0 && s[n - 1] == '\n') n--;
    s[n] = '\0';
    t->source = s;
    t->source_len = n;
    return HEARTH_OK;
}

hearth_status jinja_lex(struct jinja_template *t, struct jtoken **tokens, size_t *n_tokens)
{
    struct lexer lx = {t, t->source, t->source_len, 0, NULL, 0, 0};
    hearth_status st = HEARTH_OK;
    while (st == HEARTH_OK && lx.pos < lx.len) {
        /* the next "{{", "{%" or "{#" */
        size_t tag = lx.pos;
        for (;;) {
            const char *brace = memchr(lx.s + tag, '{', lx.len - tag);
            if (!brace) {
                tag = lx.len;
                break;
            }
            tag = (size_t)(brace - lx.s);
            if (tag + 1 < lx.len && (lx.s[tag + 1] == '{' || lx.s[tag + 1] == '%' || lx.s[tag + 1] == '#'))
                break;
            tag++;
        }
        if (tag >= lx.len) {
            st = emit_text(&lx, lx.pos, lx.len, 0, false);
            lx.pos = lx.len;
            break;
        }
        char kind = lx.s[tag + 1];
        char sign = 0;
        if (tag + 2 < lx.len && (lx.s[tag + 2] == '-' || lx.s[tag + 2] == '+')) sign = lx.s[tag + 2];
        size_t body = tag + 2 + (sign ? 1 : 0);
        if (kind == '%') {
            char raw_sign;
            size_t after_raw = match_word_tag(&lx, tag, "raw", false, &raw_sign);
            if (after_raw) {
                st = emit_text(&lx, lx.pos, tag, raw_sign, true);
                if (st == HEARTH_OK) st = lex_raw(&lx, tag, after_raw);
                continue;
            }
        }
        st = emit_text(&lx, lx.pos, tag, sign, kind != '{');
        if (st != HEARTH_OK) break;
        if (kind == '#') {
            st = lex_comment(&lx, tag, body);
            continue;
        }
        st = push_simple(&lx, kind == '%' ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, tag);
        lx.pos = body;
        if (st == HEARTH_OK) st = lex_tag(&lx, kind == '%', tag);
    }
    if (st == HEARTH_OK) st = push_simple(&lx, JT_EOF, lx.len);
    if (st != HEARTH_OK) {
        free(lx.toks);
        return st;
    }
    *tokens = lx.toks;
    *n_tokens = lx.n;
    return HEARTH_OK;
}

hearth_status jinja_prepare_source(struct jinja_template *t, const char *text, size_t len)
{
    if (len > JINJA_MAX_SOURCE)
        return hearth_error(HEARTH_E_RANGE, "chat template is %zu bytes, more than the limit of %u",
                            len, JINJA_MAX_SOURCE);
    size_t bad = utf8_validate(text, len);
    hearth_status st = normalise_source(t, text, len);
    if (st != HEARTH_OK) return st;
    if (bad < len) {
        /* the position in normalised text: count the \r\n pairs before */
        size_t removed = 0;
        for (size_t i = 0; i + 1 < bad; i++)
            if (text[i] == '\r' && text[i + 1] == '\n') removed++;
        return jinja_error_at(t, HEARTH_E_FORMAT, (uint32_t)(bad - removed),
                              "invalid UTF-8 (byte 0x%02x at offset %zu)",
                              (unsigned char)text[bad], bad);
    }
    return HEARTH_OK;
}

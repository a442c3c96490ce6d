/*
 * tokenizer_pretok.c -- the pre-tokenizers of byte-level BPE vocabularies:
 * before merging, text is cut into words by the regular expressions of
 * the model's published tokenizer configuration, chosen by
 * tokenizer.ggml.pre.
 *
 * A pre-tokenizer is a sequence of stages.  Each stage cuts every piece
 * the previous stage made: the matches of its expression and the text
 * between them both become pieces ("isolated" splitting), so no byte is
 * ever dropped.  The expressions run on PCRE2 with UTF and Unicode
 * properties (\p{L}, \s, ... follow the Unicode character database) and
 * the JIT where available; \s is the White_Space property, as in the
 * engines the expressions were written for (pretok_white_space_pattern).
 * Ill-formed UTF-8 is allowed: it matches nothing and ends up in the
 * pieces between matches.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

#include "tokenizer.h"
#include "utf8.h"

#define MAX_STAGES 6

/* GPT-2's expression: contractions, letters, digits and other symbols each
 * with an optional leading space, and whitespace runs, the last space of
 * a run being left to the word after it.  The default for byte-level BPE. */
#define RE_GPT2 \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/* Llama 3's contractions are case-insensitive.  Spelled out per letter so
 * that Unicode case folding (the long s, the Kelvin sign) does not widen
 * them. */
#define RE_CONTRACTIONS_ANY_CASE "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

/* Llama 3: letters may take one leading non-letter, non-digit character;
 * digits in groups of up to three; newlines kept with the whitespace
 * before them. */
#define RE_LLAMA3 \
    RE_CONTRACTIONS_ANY_CASE \
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* o200k (GPT-4o, gpt-oss, Llama 4): a word is an optional leading
 * non-letter, non-digit character, then capitalised-word shapes: upper-
 * and title-case letters then lower-case ones, or upper-case letters then
 * any lower-case ones (so "HTTPServer" stays whole and "HelloWorld" is
 * two words), with marks and other letters on both sides, and a
 * contraction in any case; digits in groups of up to three; punctuation
 * with an optional leading space and its trailing newlines or slashes;
 * newlines with the whitespace before them. */
#define RE_O200K_UPPER "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define RE_O200K_LOWER "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
#define RE_O200K \
    "[^\\r\\n\\p{L}\\p{N}]?" RE_O200K_UPPER "*" RE_O200K_LOWER "+" RE_CONTRACTIONS_ANY_CASE "?" \
    "|[^\\r\\n\\p{L}\\p{N}]?" RE_O200K_UPPER "+" RE_O200K_LOWER "*" RE_CONTRACTIONS_ANY_CASE "?" \
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* Qwen2: as Llama 3 but every digit alone. */
#define RE_QWEN2 \
    RE_CONTRACTIONS_ANY_CASE \
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* CJK ideographs, the blocks from U+0800, and Hangul, as DeepSeek's
 * configurations list them. */
#define RE_DEEPSEEK_CJK "[\\x{4e00}-\\x{9fa5}\\x{800}-\\x{4e00}\\x{ac00}-\\x{d7ff}]+"

/* DeepSeek LLM: the letters that have case, listed by code point. */
#define RE_DEEPSEEK_CASED_LETTERS \
    "\\s?[A-Za-z\\x{b5}\\x{c0}-\\x{d6}\\x{d8}-\\x{f6}\\x{f8}-\\x{1ba}\\x{1bc}-\\x{1bf}" \
    "\\x{1c4}-\\x{293}\\x{295}-\\x{2af}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37b}-\\x{37d}" \
    "\\x{37f}\\x{386}\\x{388}-\\x{38a}\\x{38c}\\x{38e}-\\x{3a1}\\x{3a3}-\\x{3f5}" \
    "\\x{3f7}-\\x{481}\\x{48a}-\\x{52f}\\x{531}-\\x{556}\\x{10a0}-\\x{10c5}" \
    "\\x{13a0}-\\x{13f5}\\x{13f8}-\\x{13fd}\\x{1c90}-\\x{1cba}\\x{1cbd}-\\x{1cbf}" \
    "\\x{1d00}-\\x{1d2b}\\x{1d6b}-\\x{1d77}\\x{1d79}-\\x{1d9a}\\x{1e00}-\\x{1f15}" \
    "\\x{1f18}-\\x{1f1d}\\x{1f20}-\\x{1f45}\\x{1f48}-\\x{1f4d}\\x{1f50}-\\x{1f57}" \
    "\\x{1f59}\\x{1f5b}\\x{1f5d}\\x{1f5f}-\\x{1f7d}\\x{1f80}-\\x{1fb4}\\x{1fb6}-\\x{1fbc}" \
    "\\x{1fbe}\\x{1fc2}-\\x{1fc4}\\x{1fc6}-\\x{1fcc}\\x{1fd0}-\\x{1fd3}\\x{1fd6}-\\x{1fdb}" \
    "\\x{1fe0}-\\x{1fec}\\x{1ff2}-\\x{1ff4}\\x{1ff6}-\\x{1ffc}\\x{2102}\\x{2107}" \
    "\\x{210a}-\\x{2113}\\x{2115}\\x{2119}-\\x{211d}\\x{2124}\\x{2126}\\x{2128}" \
    "\\x{212a}-\\x{212d}\\x{212f}-\\x{2134}\\x{2139}\\x{213c}-\\x{213f}\\x{2145}-\\x{2149}" \
    "\\x{214e}\\x{2183}\\x{2184}\\x{2c00}-\\x{2c7b}\\x{2c7e}-\\x{2ce4}\\x{2ceb}-\\x{2cee}" \
    "\\x{2cf2}\\x{2cf3}\\x{a640}-\\x{a66d}\\x{a680}-\\x{a69b}\\x{a722}-\\x{a76f}" \
    "\\x{a771}-\\x{a787}\\x{a78b}-\\x{a78e}\\x{ab70}-\\x{abbf}\\x{fb00}-\\x{fb06}" \
    "\\x{fb13}-\\x{fb17}\\x{ff21}-\\x{ff3a}\\x{ff41}-\\x{ff5a}\\x{10400}-\\x{1044f}" \
    "\\x{104b0}-\\x{104d3}\\x{104d8}-\\x{104fb}\\x{10c80}-\\x{10cb2}\\x{10cc0}-\\x{10cf2}" \
    "\\x{118a0}-\\x{118df}\\x{1e900}-\\x{1e943}]+"

/* Kimi-K2 (the tiktoken expression of its tokenization_kimi.py): runs of
 * Han characters are words of their own; then o200k's capitalised-word
 * shapes with Han characters taken out of both letter classes; digits in
 * groups of up to three; punctuation with an optional leading space and
 * its trailing newlines (no slashes); newlines with the whitespace before
 * them.  Written for what tiktoken's expressions mean: \s is the Unicode
 * White_Space property (spelled out here as everywhere), \p{Han} the
 * Script property (PCRE2 10.40 and later read a bare script name as
 * Script_Extensions, which adds shared punctuation such as U+3001), and
 * the contractions fold case the Unicode way ('s also matches 'ſ, the
 * long s). */
#if defined PCRE2_MAJOR && (PCRE2_MAJOR > 10 || (PCRE2_MAJOR == 10 && PCRE2_MINOR >= 40))
#define RE_HAN "\\p{sc:Han}"
#else
#define RE_HAN "\\p{Han}"
#endif
#define RE_WHITE_SPACE_CHARS "\\t-\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"
/* [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]] and its lower-case twin,
 * which PCRE2 cannot intersect: as the general categories split every
 * code point, "in these categories and not Han" is "in none of the other
 * categories and not Han", one negated class.  (A lookahead before each
 * letter instead made every letter of a run a backtracking point: the
 * JIT's stack ran out on a run of 200000 capitals.) */
#define RE_KIMI_UPPER "[^\\p{Ll}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}" RE_HAN "]"
#define RE_KIMI_LOWER "[^\\p{Lu}\\p{Lt}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}" RE_HAN "]"
#define RE_KIMI_CONTRACTIONS "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
#define RE_KIMI \
    RE_HAN "+" \
    "|[^\\r\\n\\p{L}\\p{N}]?" RE_KIMI_UPPER "*" RE_KIMI_LOWER "+" RE_KIMI_CONTRACTIONS "?" \
    "|[^\\r\\n\\p{L}\\p{N}]?" RE_KIMI_UPPER "+" RE_KIMI_LOWER "*" RE_KIMI_CONTRACTIONS "?" \
    "|\\p{N}{1,3}| ?[^" RE_WHITE_SPACE_CHARS "\\p{L}\\p{N}]+[\\r\\n]*" \
    "|[" RE_WHITE_SPACE_CHARS "]*[\\r\\n]+" \
    "|[" RE_WHITE_SPACE_CHARS "]+(?![^" RE_WHITE_SPACE_CHARS "])|[" RE_WHITE_SPACE_CHARS "]+"

/* One pre-tokenizer: its stages and the BPE behaviour that goes with it. */
struct pretok_def {
    const char *const stages[MAX_STAGES]; /* NULL-terminated */
    bool ignore_merges; /* a word that is itself a token is not merged */
    bool add_bos;       /* default of tokenizer.ggml.add_bos_token */
};

static const struct pretok_def def_gpt2 = {{RE_GPT2, NULL}, false, false};

static const struct pretok_def def_llama3 = {{RE_LLAMA3, NULL}, true, true};

/* GLM-4 and GLM-4.5: Llama 3's expression, merges always applied, no
 * BOS unless the file says so. */
static const struct pretok_def def_glm4 = {{RE_LLAMA3, NULL}, false, false};

static const struct pretok_def def_qwen2 = {{RE_QWEN2, NULL}, false, false};

static const struct pretok_def def_o200k = {{RE_O200K, NULL}, false, false};

static const struct pretok_def def_kimi_k2 = {{RE_KIMI, NULL}, false, false};

/* Every digit alone (any Unicode number, "½" too), then GPT-2's
 * expression. */
static const struct pretok_def def_starcoder = {{"\\p{N}", RE_GPT2, NULL}, false, false};

/* Falcon: runs of punctuation (Unicode P and the ASCII symbols), GPT-2's
 * expression, then groups of three ASCII digits. */
static const struct pretok_def def_falcon = {
    {"[\\p{P}$+<=>^~|`]+", RE_GPT2, "[0-9][0-9][0-9]", NULL}, false, false};

static const struct pretok_def def_deepseek_llm = {
    {"[\\r\\n]", RE_DEEPSEEK_CASED_LETTERS,
     "\\s?[!-/:-~\\x{ff01}-\\x{ff0f}\\x{ff1a}-\\x{ff5e}\\x{2018}-\\x{201f}\\x{3000}-\\x{3002}]+",
     /* "\s+$": trailing whitespace.  Anchored to the start of a whitespace
      * run and atomic so that a long run not at the end fails in linear
      * time; it matches exactly what "\s+$" matches. */
     "(?<!\\s)(?>\\s+)$", RE_DEEPSEEK_CJK, "\\p{N}+"},
    false, false};

static const struct pretok_def def_deepseek_coder = {
    {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_DEEPSEEK_CJK, "\\p{N}", NULL}, false, false};

static const struct pretok_def def_deepseek_v3 = {
    {"\\p{N}{1,3}", "[\\x{4e00}-\\x{9fa5}\\x{3040}-\\x{309f}\\x{30a0}-\\x{30ff}]+",
     "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+"
     "|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*"
     "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     NULL},
    false, false};

static const struct {
    const char *name;
    const struct pretok_def *def;
} pretok_names[] = {
    {"default", &def_gpt2},
    {"gpt-2", &def_gpt2},
    {"phi-2", &def_gpt2},
    {"mpt", &def_gpt2},
    {"olmo", &def_gpt2},
    {"llama-bpe", &def_llama3},
    {"llama3", &def_llama3},
    {"llama-v3", &def_llama3},
    {"falcon3", &def_llama3},
    {"dbrx", &def_llama3},
    {"smaug-bpe", &def_llama3},
    {"qwen2", &def_qwen2},
    {"glm4", &def_glm4},
    {"chatglm-bpe", &def_glm4},
    {"gpt-4o", &def_o200k},
    {"llama4", &def_o200k},
    {"deepseek-r1-qwen", &def_qwen2},
    {"stablelm2", &def_qwen2},
    {"deepseek-llm", &def_deepseek_llm},
    {"deepseek-coder", &def_deepseek_coder},
    {"deepseek-v3", &def_deepseek_v3},
    {"kimi-k2", &def_kimi_k2},
    {"falcon", &def_falcon},
    {"starcoder", &def_starcoder},
    {"refact", &def_starcoder},
    {"smollm", &def_starcoder},
    {"command-r", &def_starcoder},
};

const char pretok_supported_names[] =
    "default, gpt-2, phi-2, mpt, olmo, llama-bpe, llama3, llama-v3, falcon3, dbrx, smaug-bpe, "
    "qwen2, glm4, chatglm-bpe, gpt-4o, llama4, deepseek-r1-qwen, stablelm2, deepseek-llm, deepseek-coder, "
    "deepseek-v3, kimi-k2, falcon, starcoder, refact, smollm, command-r";

static const struct pretok_def *find_def(const char *name)
{
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(pretok_names); i++)
        if (strcmp(pretok_names[i].name, name) == 0) return pretok_names[i].def;
    return NULL;
}

#ifdef HAVE_PCRE2

struct pretok {
    size_t n_stages;
    pcre2_code *stages[MAX_STAGES];
};

struct pretok_state {
    pcre2_match_data *match;
};

void pretok_free(struct pretok *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->n_stages; i++) pcre2_code_free(p->stages[i]);
    free(p);
}

void pretok_state_free(struct pretok_state *st)
{
    if (!st) return;
    pcre2_match_data_free(st->match);
    free(st);
}

/* The pattern with \s and \S written as the Unicode White_Space property,
 * which is what the published expressions mean (the tokenizers they come
 * from run on engines whose \s is that property) and what PCRE2's \s is
 * but for U+180E, the Mongolian vowel separator, White_Space until Unicode
 * 6.3 and still in PCRE2's \s: outside a class \s becomes a class of the
 * White_Space characters and \S its complement; inside a class \s
 * becomes those characters.  A malloc'd string; NULL without memory. */
static char *pretok_white_space_pattern(const char *pattern)
{
    static const char ws[] = RE_WHITE_SPACE_CHARS;
    size_t n = 0;
    for (const char *p = pattern; *p; p++) n += *p == '\\' ? sizeof ws + 4 : 1;
    char *out = malloc(n + 1), *o = out;
    if (!out) return NULL;
    bool in_class = false;
    for (const char *p = pattern; *p; p++) {
        if (*p == '\\' && p[1]) {
            const char c = *++p;
            if (c == 's' || (c == 'S' && !in_class)) {
                o += sprintf(o, in_class ? "%s" : c == 's' ? "[%s]" : "[^%s]", ws);
            } else {
                *o++ = '\\';
                *o++ = c;
            }
            continue;
        }
        if (!in_class && *p == '[') {
            in_class = true;
            *o++ = *p;
            if (p[1] == '^') *o++ = *++p;
            if (p[1] == ']') *o++ = *++p; /* a leading ] is literal */
            continue;
        }
        if (in_class && *p == ']') in_class = false;
        *o++ = *p;
    }
    *o = '\0';
    return out;
}

static hearth_status compile_stage(const char *given, pcre2_code **out)
{
    int err;
    PCRE2_SIZE err_offset;
    uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY;
    char *pattern = pretok_white_space_pattern(given);
    if (!pattern) return hearth_error(HEARTH_E_NOMEM, "out of memory for a pre-tokenizer expression");
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, options, &err,
                                     &err_offset, NULL);
    free(pattern);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return hearth_error(HEARTH_E_INTERNAL, "pre-tokenizer expression does not compile at %zu: %s",
                            (size_t)err_offset, (const char *)msg);
    }
    /* Without a JIT (unsupported CPU, no executable memory) the
     * interpreter gives the same matches, only slower. */
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    *out = code;
    return HEARTH_OK;
}

hearth_status pretok_load(hearth_vocab *v, const char *name, bool force_default)
{
    const struct pretok_def *def = find_def(name ? name : "default");
    if (!def) {
        if (!force_default)
            return hearth_error(HEARTH_E_UNSUPPORTED,
                                "unknown pre-tokenizer '%s' (tokenizer.ggml.pre); supported: %s",
                                name, pretok_supported_names);
        def = &def_gpt2;
        name = "default";
    }
    snprintf(v->pretok_name, sizeof v->pretok_name, "%s", name ? name : "default");
    struct pretok *p = hearth_calloc(1, sizeof *p, "a pre-tokenizer");
    if (!p) return HEARTH_E_NOMEM;
    for (size_t i = 0; i < MAX_STAGES && def->stages[i]; i++) {
        hearth_status st = compile_stage(def->stages[i], &p->stages[i]);
        if (st) {
            pretok_free(p);
            return st;
        }
        p->n_stages = i + 1;
    }
    v->pretok = p;
    v->ignore_merges = def->ignore_merges;
    v->add_bos = def->add_bos;
    return HEARTH_OK;
}

static hearth_status split_stage(const struct pretok *p, size_t stage, const char *text,
                                 size_t len, pcre2_match_data *md, pretok_word_fn word, void *ctx)
{
    if (stage == p->n_stages) return word(text, len, ctx);
    hearth_status st;
    size_t pos = 0, piece_start = 0;
    while (pos < len) {
        int rc = pcre2_match(p->stages[stage], (PCRE2_SPTR)text, len, pos, 0, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return hearth_error(HEARTH_E_INTERNAL, "pre-tokenizer stage %zu failed: %s", stage + 1,
                                (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t start = ov[0], end = ov[1];
        if (end <= start) {
            /* an empty match cuts nothing; look again one character on */
            pos = start + utf8_char_len((const unsigned char *)text + start, len - start);
            continue;
        }
        if (start > piece_start &&
            (st = split_stage(p, stage + 1, text + piece_start, start - piece_start, md, word, ctx)))
            return st;
        if ((st = split_stage(p, stage + 1, text + start, end - start, md, word, ctx))) return st;
        pos = piece_start = end;
    }
    if (piece_start < len)
        return split_stage(p, stage + 1, text + piece_start, len - piece_start, md, word, ctx);
    return HEARTH_OK;
}

hearth_status pretok_split(const struct pretok *p, const char *text, size_t len, tok_scratch *s,
                           pretok_word_fn word, void *ctx)
{
    if (!s->pretok) {
        s->pretok = hearth_calloc(1, sizeof *s->pretok, "pre-tokenizer state");
        if (!s->pretok) return HEARTH_E_NOMEM;
        s->pretok->match = pcre2_match_data_create(1, NULL);
        if (!s->pretok->match)
            return hearth_error(HEARTH_E_NOMEM, "out of memory for pre-tokenizer match data");
    }
    return split_stage(p, 0, text, len, s->pretok->match, word, ctx);
}

#else /* !HAVE_PCRE2 */

struct pretok {
    int unused;
};

struct pretok_state {
    int unused;
};

void pretok_free(struct pretok *p)
{
    free(p);
}

void pretok_state_free(struct pretok_state *st)
{
    free(st);
}

hearth_status pretok_load(hearth_vocab *v, const char *name, bool force_default)
{
    (void)v;
    (void)force_default;
    (void)find_def;
    return hearth_error(HEARTH_E_UNSUPPORTED,
                        "byte-level BPE vocabulary (pre-tokenizer '%s') needs PCRE2, and this "
                        "hearth was built without PCRE2",
                        name ? name : "default");
}

hearth_status pretok_split(const struct pretok *p, const char *text, size_t len, tok_scratch *s,
                           pretok_word_fn word, void *ctx)
{
    (void)p;
    (void)text;
    (void)len;
    (void)s;
    (void)word;
    (void)ctx;
    return hearth_error(HEARTH_E_UNSUPPORTED, "this hearth was built without PCRE2");
}

#endif /* HAVE_PCRE2 */

/*
 * test-tokenizer.c -- vocabularies, encoding and decoding: the reference
 * tokenizations of the shared vocabularies, round trips and the cases that
 * cannot round-trip, special tokens, BOS/EOS and end of generation, small
 * vocabularies built here to pin down the merge rules, malformed
 * vocabulary metadata, and the allocating variants against the buffer
 * ones.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "tokenizer.h"

#define SEPARATOR "\n__ggml_vocab_test__\n"

static const char *const shared_vocabs[] = {
    "ggml-vocab-llama-spm",
    "ggml-vocab-gpt-2",
    "vocab-llama3",
    "vocab-qwen3",
    "vocab-rwkv-world-synthetic",
};

static hearth_vocab *load_vocab_path(const char *path)
{
    hearth_gguf *g;
    ck_assert_msg(hearth_gguf_open(path, &g) == HEARTH_OK, "%s", hearth_last_error());
    hearth_vocab *v;
    hearth_status st = hearth_vocab_load(g, NULL, &v);
#ifndef HAVE_PCRE2
    if (st == HEARTH_E_UNSUPPORTED && strstr(hearth_last_error(), "without PCRE2")) {
        hearth_gguf_close(g);
        return NULL;
    }
#endif
    ck_assert_msg(st == HEARTH_OK, "%s: %s", path, hearth_last_error());
    hearth_gguf_close(g); /* the vocabulary must not depend on the file */
    return v;
}

/* A shared vocabulary; NULL for a byte-level BPE one in a build without
 * PCRE2, after checking that loading it fails saying so. */
static hearth_vocab *load_shared(const char *relative)
{
    const char *path = test_data_path(relative);
    ck_assert_msg(path != NULL, "missing shared file %s", relative);
    return load_vocab_path(path);
}

/* shared_vocabs[i], as load_shared() gives it. */
static hearth_vocab *load_shared_index(int i)
{
    char path[256];
    snprintf(path, sizeof path, "vocab/%s.gguf", shared_vocabs[i]);
    return load_shared(path);
}

/* Tokenize into a malloc'ed array. */
static hearth_token *tokenize(const hearth_vocab *v, const char *text, size_t len, unsigned flags,
                              size_t *n)
{
    size_t cap = len + 16;
    hearth_token *ids = malloc(cap * sizeof *ids);
    ck_assert_ptr_nonnull(ids);
    hearth_status st = hearth_tokenize(v, text, len, flags, ids, cap, n);
    ck_assert_msg(st == HEARTH_OK, "tokenize: %s", hearth_last_error());
    return ids;
}

static char *detokenize(const hearth_vocab *v, const hearth_token *ids, size_t n, unsigned flags,
                        size_t *len)
{
    size_t need;
    hearth_status st = hearth_detokenize(v, ids, n, flags, NULL, 0, &need);
    ck_assert(st == HEARTH_OK || st == HEARTH_E_RANGE);
    char *text = malloc(need + 1);
    ck_assert_ptr_nonnull(text);
    ck_assert_int_eq(hearth_detokenize(v, ids, n, flags, text, need, len), HEARTH_OK);
    ck_assert_uint_eq(*len, need);
    text[need] = '\0';
    return text;
}

static hearth_token find(const hearth_vocab *v, const char *text)
{
    hearth_token id = hearth_vocab_find(v, text, strlen(text));
    ck_assert_msg(id != HEARTH_TOKEN_NONE, "token '%s' not in the vocabulary", text);
    return id;
}

/* ---- the shared reference tokenizations -------------------------------- */

struct test_case {
    const char *text;
    size_t len;
    const char *want; /* space-separated ids */
};

/* Cut tokenizer-tests.inp into its cases (each followed by the separator)
 * and pair them with the lines of the .out file.  Both buffers are
 * modified in place. */
static size_t read_cases(char *inp, char *out, struct test_case *cases, size_t max)
{
    size_t n = 0;
    char *p = inp, *line = out;
    for (char *sep; (sep = strstr(p, SEPARATOR)) != NULL; p = sep + strlen(SEPARATOR)) {
        ck_assert_uint_lt(n, max);
        char *eol = strchr(line, '\n');
        ck_assert_msg(eol != NULL, "the .out file has fewer lines than there are cases");
        *eol = '\0';
        cases[n].text = p;
        cases[n].len = (size_t)(sep - p);
        cases[n].want = line;
        line = eol + 1;
        n++;
    }
    ck_assert_msg(*line == '\0', "the .out file has more lines than there are cases");
    return n;
}

static void ids_to_string(const hearth_token *ids, size_t n, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%ld", i ? " " : "", (long)ids[i]);
}

START_TEST(test_reference_tokenizations)
{
    if (!test_require_data()) return;
    const char *name = shared_vocabs[_i];
    hearth_vocab *v = load_shared_index(_i);
    if (!v) return;
    char *inp = test_read_file(test_data_path("vocab/tokenizer-tests.inp"), NULL);
    char path[256];
    snprintf(path, sizeof path, "vocab/%s.out", name);
    char *out = test_read_file(test_data_path(path), NULL);
    struct test_case cases[128];
    size_t n_cases = read_cases(inp, out, cases, 128);
    ck_assert_uint_ge(n_cases, 40);

    for (size_t c = 0; c < n_cases; c++) {
        size_t n;
        hearth_token *ids = tokenize(v, cases[c].text, cases[c].len, 0, &n);
        char got[16384];
        ids_to_string(ids, n, got, sizeof got);
        ck_assert_msg(strcmp(got, cases[c].want) == 0, "%s case %zu '%.*s':\n want %s\n got  %s",
                      name, c, (int)cases[c].len, cases[c].text, cases[c].want, got);

        /* Decoding gives the text back: every case of the file is
         * representable in all four vocabularies (byte-level BPE spells
         * any byte; the SentencePiece vocabulary has all 256 byte tokens),
         * and the space SentencePiece puts in front is removed again. */
        size_t len;
        char *text = detokenize(v, ids, n, 0, &len);
        ck_assert_msg(len == cases[c].len && memcmp(text, cases[c].text, len) == 0,
                      "%s case %zu does not round-trip: '%s'", name, c, text);
        free(text);
        free(ids);
    }
    free(inp);
    free(out);
    hearth_vocab_free(v);
}
END_TEST

/* ---- the tiny story model -------------------------------------------- */

START_TEST(test_stories_once_upon_a_time)
{
    if (!test_require_data()) return;
    hearth_vocab *v = load_shared("models/stories260K.gguf");
    ck_assert_int_eq(hearth_vocab_get_kind(v), HEARTH_VOCAB_SPM);
    ck_assert_int_eq(hearth_vocab_n_tokens(v), 512);
    size_t n;
    hearth_token *ids = tokenize(v, "Once upon a time", 16, HEARTH_TOKENIZE_ADD_SPECIAL, &n);
    /* Every word with its space is a piece of this vocabulary, so the
     * encoding is BOS and the four pieces -- 1 403 407 261 378, as the
     * reference tokenizer gives. */
    hearth_token want[] = {hearth_vocab_special(v, HEARTH_SPECIAL_BOS), find(v, "\xE2\x96\x81Once"),
                           find(v, "\xE2\x96\x81upon"), find(v, "\xE2\x96\x81" "a"),
                           find(v, "\xE2\x96\x81time")};
    const hearth_token reference[] = {1, 403, 407, 261, 378};
    ck_assert_uint_eq(n, 5);
    for (size_t i = 0; i < 5; i++) {
        ck_assert_int_eq(ids[i], want[i]);
        ck_assert_int_eq(ids[i], reference[i]);
    }
    free(ids);
    hearth_vocab_free(v);
}
END_TEST

/* ---- special tokens, BOS/EOS, end of generation ---------------------------- */

START_TEST(test_special_ids)
{
    if (!test_require_data()) return;
    hearth_vocab *spm = load_shared("vocab/ggml-vocab-llama-spm.gguf");
    ck_assert_int_eq(hearth_vocab_special(spm, HEARTH_SPECIAL_BOS), 1);
    ck_assert_int_eq(hearth_vocab_special(spm, HEARTH_SPECIAL_EOS), 2);
    ck_assert_int_eq(hearth_vocab_special(spm, HEARTH_SPECIAL_UNK), 0);
    ck_assert(hearth_vocab_adds_bos(spm));
    ck_assert(!hearth_vocab_adds_eos(spm));
    ck_assert(hearth_vocab_is_eog(spm, 2));
    ck_assert(!hearth_vocab_is_eog(spm, 1));
    ck_assert(!hearth_vocab_is_eog(spm, -1));
    ck_assert(!hearth_vocab_is_eog(spm, 32000));
    ck_assert_str_eq(hearth_vocab_pretokenizer(spm), "");
    ck_assert_int_eq(hearth_vocab_token_type(spm, 1), HEARTH_TOKEN_CONTROL);
    ck_assert_int_eq(hearth_vocab_token_type(spm, 3), HEARTH_TOKEN_BYTE);
    ck_assert_int_eq(hearth_vocab_token_type(spm, 99999), HEARTH_TOKEN_UNDEFINED);

    /* BOS only where the vocabulary adds it */
    size_t n;
    hearth_token *ids = tokenize(spm, "Hi", 2, HEARTH_TOKENIZE_ADD_SPECIAL, &n);
    ck_assert_uint_ge(n, 2);
    ck_assert_int_eq(ids[0], 1);
    ck_assert_int_ne(ids[n - 1], 2);
    free(ids);
    /* the empty text: nothing, or BOS alone */
    ids = tokenize(spm, "", 0, HEARTH_TOKENIZE_ADD_SPECIAL, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(ids[0], 1);
    free(ids);
    ck_assert_int_eq(hearth_tokenize(spm, NULL, 0, 0, NULL, 0, &n), HEARTH_OK);
    ck_assert_uint_eq(n, 0);
    hearth_vocab_free(spm);
}
END_TEST

START_TEST(test_special_ids_bpe)
{
    if (!test_require_data()) return;
    hearth_vocab *llama3 = load_shared("vocab/vocab-llama3.gguf");
    if (!llama3) return;
    ck_assert_int_eq(hearth_vocab_get_kind(llama3), HEARTH_VOCAB_BPE);
    ck_assert_str_eq(hearth_vocab_pretokenizer(llama3), "llama-bpe");
    ck_assert_int_eq(hearth_vocab_special(llama3, HEARTH_SPECIAL_BOS), 128000);
    ck_assert_int_eq(hearth_vocab_special(llama3, HEARTH_SPECIAL_EOS), 128001);
    /* EOT is not in the file; it is found by its text */
    hearth_token eot = find(llama3, "<|eot_id|>");
    ck_assert_int_eq(hearth_vocab_special(llama3, HEARTH_SPECIAL_EOT), eot);
    ck_assert(hearth_vocab_is_eog(llama3, eot));
    ck_assert(hearth_vocab_is_eog(llama3, 128001));
    ck_assert(!hearth_vocab_is_eog(llama3, 128000));
    ck_assert(!hearth_vocab_is_eog(llama3, find(llama3, "Hello")));
    ck_assert(hearth_vocab_adds_bos(llama3));

    hearth_vocab *qwen = load_shared("vocab/vocab-qwen3.gguf");
    ck_assert_str_eq(hearth_vocab_pretokenizer(qwen), "qwen2");
    ck_assert_int_eq(hearth_vocab_special(qwen, HEARTH_SPECIAL_BOS), HEARTH_TOKEN_NONE);
    ck_assert(!hearth_vocab_adds_bos(qwen));
    ck_assert_int_eq(hearth_vocab_special(qwen, HEARTH_SPECIAL_PAD), 151643);
    ck_assert(hearth_vocab_is_eog(qwen, find(qwen, "<|im_end|>")));
    ck_assert(hearth_vocab_is_eog(qwen, find(qwen, "<|endoftext|>")));
    ck_assert(!hearth_vocab_is_eog(qwen, find(qwen, "<|im_start|>")));

    size_t n;
    hearth_token *ids = tokenize(llama3, "Hi", 2, HEARTH_TOKENIZE_ADD_SPECIAL, &n);
    ck_assert_int_eq(ids[0], 128000);
    free(ids);
    ids = tokenize(qwen, "Hi", 2, HEARTH_TOKENIZE_ADD_SPECIAL, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(ids[0], find(qwen, "Hi"));
    free(ids);
    hearth_vocab_free(llama3);
    hearth_vocab_free(qwen);
}
END_TEST

/* A rendered chat gets BOS unless it begins with the BOS text itself;
 * special tokens' text is parsed either way. */
START_TEST(test_chat_tokenize_flags)
{
    if (!test_require_data()) return;
    const unsigned both = HEARTH_TOKENIZE_PARSE_SPECIAL | HEARTH_TOKENIZE_ADD_SPECIAL;
    hearth_vocab *llama3 = load_shared("vocab/vocab-llama3.gguf");
    hearth_vocab *qwen = load_shared("vocab/vocab-qwen3.gguf");
    if (!llama3 || !qwen) return;
    static const char written[] = "<|begin_of_text|><|start_header_id|>user";
    ck_assert_uint_eq(hearth_chat_tokenize_flags(llama3, written, strlen(written)), HEARTH_TOKENIZE_PARSE_SPECIAL);
    ck_assert_uint_eq(hearth_chat_tokenize_flags(llama3, "<|start_header_id|>", 19), both);
    ck_assert_uint_eq(hearth_chat_tokenize_flags(llama3, written, 5), both); /* shorter than the BOS text */
    ck_assert_uint_eq(hearth_chat_tokenize_flags(llama3, "", 0), both);
    /* no BOS token: nothing to add or to find */
    ck_assert_uint_eq(hearth_chat_tokenize_flags(qwen, "<|im_start|>user", 16), both);
    ck_assert_uint_eq(hearth_chat_tokenize_flags(NULL, "x", 1), both);
    /* the flags give one BOS, never two */
    size_t n;
    hearth_token *ids = tokenize(llama3, written, strlen(written),
                                 hearth_chat_tokenize_flags(llama3, written, strlen(written)), &n);
    ck_assert_uint_ge(n, 2);
    ck_assert_int_eq(ids[0], 128000);
    ck_assert_int_ne(ids[1], 128000);
    free(ids);
    hearth_vocab_free(llama3);
    hearth_vocab_free(qwen);
}
END_TEST

static bool any_control(const hearth_vocab *v, const hearth_token *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (hearth_vocab_token_type(v, ids[i]) == HEARTH_TOKEN_CONTROL) return true;
    return false;
}

START_TEST(test_parse_special)
{
    if (!test_require_data()) return;
    hearth_vocab *qwen = load_shared("vocab/vocab-qwen3.gguf");
    if (!qwen) return;
    const char *chat = "<|im_start|>user\nHello<|im_end|>\n";
    size_t n;
    hearth_token *ids = tokenize(qwen, chat, strlen(chat), HEARTH_TOKENIZE_PARSE_SPECIAL, &n);
    hearth_token start = find(qwen, "<|im_start|>"), end = find(qwen, "<|im_end|>");
    ck_assert_int_eq(ids[0], start);
    ck_assert_int_eq(ids[1], find(qwen, "user"));
    ck_assert_int_eq(ids[n - 2], end);
    size_t len;
    char *text = detokenize(qwen, ids, n, HEARTH_DECODE_SPECIAL, &len);
    ck_assert_str_eq(text, chat);
    free(text);
    /* hidden by default */
    text = detokenize(qwen, ids, n, 0, &len);
    ck_assert_str_eq(text, "user\nHello\n");
    free(text);
    free(ids);

    /* Without the flag, the same text typed by a user is ordinary text:
     * no control token, and it decodes to itself. */
    ids = tokenize(qwen, chat, strlen(chat), 0, &n);
    ck_assert(!any_control(qwen, ids, n));
    text = detokenize(qwen, ids, n, 0, &len);
    ck_assert_str_eq(text, chat);
    free(text);
    free(ids);
    hearth_vocab_free(qwen);
}
END_TEST

START_TEST(test_parse_special_spm)
{
    if (!test_require_data()) return;
    /* SentencePiece puts its space after a special token as at the start:
     * "a<s>b" is tokens("a") <s> tokens("b"). */
    hearth_vocab *spm = load_shared("vocab/ggml-vocab-llama-spm.gguf");
    size_t n, len;
    hearth_token *ids;
    char *text;
    size_t na, nb;
    hearth_token *a = tokenize(spm, "Hello", 5, 0, &na);
    hearth_token *b = tokenize(spm, "world", 5, 0, &nb);
    ids = tokenize(spm, "Hello<s>world", 13, HEARTH_TOKENIZE_PARSE_SPECIAL, &n);
    ck_assert_uint_eq(n, na + 1 + nb);
    ck_assert_mem_eq(ids, a, na * sizeof *ids);
    ck_assert_int_eq(ids[na], 1);
    ck_assert_mem_eq(ids + na + 1, b, nb * sizeof *ids);
    /* which is why such text cannot round-trip: the space comes back */
    text = detokenize(spm, ids, n, HEARTH_DECODE_SPECIAL, &len);
    ck_assert_str_eq(text, "Hello<s> world");
    free(text);
    free(ids);
    free(a);
    free(b);
    ids = tokenize(spm, "<s>", 3, 0, &n);
    ck_assert(!any_control(spm, ids, n));
    free(ids);
    hearth_vocab_free(spm);
}
END_TEST

/* ---- decoding ----------------------------------------------------------- */

START_TEST(test_pieces_and_leading_space)
{
    if (!test_require_data()) return;
    hearth_vocab *spm = load_shared("vocab/ggml-vocab-llama-spm.gguf");
    size_t len;
    const char *p = hearth_token_piece(spm, find(spm, "<0x0A>"), 0, &len);
    ck_assert_uint_eq(len, 1);
    ck_assert_int_eq(p[0], '\n');
    p = hearth_token_piece(spm, find(spm, "\xE2\x96\x81Hello"), 0, &len);
    ck_assert_uint_eq(len, 6);
    ck_assert_mem_eq(p, " Hello", 6);
    p = hearth_token_piece(spm, 1, 0, &len);
    ck_assert_uint_eq(len, 0);
    p = hearth_token_piece(spm, 1, HEARTH_DECODE_SPECIAL, &len);
    ck_assert_uint_eq(len, 3);
    ck_assert_mem_eq(p, "<s>", 3);
    ck_assert_ptr_null(hearth_token_piece(spm, 32000, 0, &len));
    ck_assert_ptr_null(hearth_token_piece(spm, -1, 0, &len));

    size_t n;
    hearth_token *ids = tokenize(spm, "Hello world", 11, HEARTH_TOKENIZE_ADD_SPECIAL, &n);
    char *text = detokenize(spm, ids, n, 0, &len);
    ck_assert_str_eq(text, "Hello world");
    free(text);
    /* continuing earlier text: the space stays */
    text = detokenize(spm, ids, n, HEARTH_DECODE_CONTINUATION, &len);
    ck_assert_str_eq(text, " Hello world");
    free(text);
    /* BOS shown: the space after it stays, as SentencePiece renders it */
    text = detokenize(spm, ids, n, HEARTH_DECODE_SPECIAL, &len);
    ck_assert_str_eq(text, "<s> Hello world");
    free(text);

    /* caller-sized buffers: the needed size comes back with E_RANGE */
    char small[4];
    ck_assert_int_eq(hearth_detokenize(spm, ids, n, 0, small, sizeof small, &len), HEARTH_E_RANGE);
    ck_assert_uint_eq(len, 11);
    ck_assert_mem_eq(small, "Hell", 4);
    hearth_token bad[] = {15043, 32000};
    ck_assert_int_eq(hearth_detokenize(spm, bad, 2, 0, NULL, 0, &len), HEARTH_E_INVALID);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "32000"));
    hearth_token one;
    ck_assert_int_eq(hearth_tokenize(spm, "Hello world", 11, HEARTH_TOKENIZE_ADD_SPECIAL, &one, 1,
                                     &len),
                     HEARTH_E_RANGE);
    ck_assert_uint_eq(len, n);
    ck_assert_int_eq(one, 1);
    ck_assert_int_eq(hearth_tokenize(spm, "x", 1, 0x100, NULL, 0, &len), HEARTH_E_INVALID);
    free(ids);

    hearth_vocab_free(spm);
}
END_TEST

START_TEST(test_byte_level_pieces)
{
    if (!test_require_data()) return;
    /* byte-level: "Ġ" is a space, and every byte comes back */
    hearth_vocab *gpt2 = load_shared("vocab/ggml-vocab-gpt-2.gguf");
    if (!gpt2) return;
    size_t len, n;
    const char *p;
    hearth_token *ids;
    char *text;
    p = hearth_token_piece(gpt2, find(gpt2, "\xC4\xA0the"), 0, &len);
    ck_assert_uint_eq(len, 4);
    ck_assert_mem_eq(p, " the", 4);
    char all[256];
    for (int i = 0; i < 256; i++) all[i] = (char)(255 - i);
    ids = tokenize(gpt2, all, 256, 0, &n);
    text = detokenize(gpt2, ids, n, 0, &len);
    ck_assert_uint_eq(len, 256);
    ck_assert_mem_eq(text, all, 256);
    free(text);
    free(ids);
    hearth_vocab_free(gpt2);
}
END_TEST

/* ---- vocabularies built for a test --------------------------------------- */

struct synth {
    const char *model;
    const char *pre;                /* NULL: no key */
    const char *const *tokens;
    size_t n_tokens;
    const float *scores;            /* NULL: no key */
    const int32_t *types;           /* NULL: no key */
    const char *const *merges;      /* NULL: no key */
    size_t n_merges;
    int64_t unk;                    /* -1: no key */
};

static hearth_status load_synth(const struct synth *s, const hearth_vocab_options *o,
                                hearth_vocab **out)
{
    char path[] = "/tmp/hearth-vocab-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    hearth_gguf_writer *w;
    ck_assert_int_eq(hearth_gguf_writer_new(&w), HEARTH_OK);
    if (s->model) ck_assert_int_eq(hearth_gguf_writer_set_str(w, "tokenizer.ggml.model", s->model), 0);
    if (s->pre) ck_assert_int_eq(hearth_gguf_writer_set_str(w, "tokenizer.ggml.pre", s->pre), 0);
    if (s->tokens)
        ck_assert_int_eq(hearth_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", s->tokens,
                                                          s->n_tokens), 0);
    if (s->scores)
        ck_assert_int_eq(hearth_gguf_writer_set_array(w, "tokenizer.ggml.scores",
                                                      HEARTH_GGUF_FLOAT32, s->scores, s->n_tokens),
                         0);
    if (s->types)
        ck_assert_int_eq(hearth_gguf_writer_set_array(w, "tokenizer.ggml.token_type",
                                                      HEARTH_GGUF_INT32, s->types, s->n_tokens),
                         0);
    if (s->merges)
        ck_assert_int_eq(hearth_gguf_writer_set_str_array(w, "tokenizer.ggml.merges", s->merges,
                                                          s->n_merges), 0);
    if (s->unk >= 0)
        ck_assert_int_eq(hearth_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id",
                                                    (uint32_t)s->unk), 0);
    ck_assert_int_eq(hearth_gguf_writer_write(w, path), HEARTH_OK);
    hearth_gguf_writer_free(w);
    hearth_gguf *g;
    ck_assert_int_eq(hearth_gguf_open(path, &g), HEARTH_OK);
    hearth_status st = hearth_vocab_load(g, o, out);
    hearth_gguf_close(g);
    unlink(path);
    return st;
}

START_TEST(test_bpe_merge_order)
{
#ifndef HAVE_PCRE2
    return; /* byte-level BPE needs PCRE2 (test_unknown_pretokenizer checks the error) */
#endif
    /* Merges apply by rank, not left to right: "b c" (rank 0) is taken
     * before "a b" (rank 1), after which no merge joins "a" and "bc". */
    static const char *const tokens[] = {"a", "b", "c", "ab", "bc", "abc", "x", "aa"};
    static const char *const merges[] = {"b c", "a b", "ab c", "nonsense", "a x", "a a"};
    struct synth s = {"gpt2", "gpt-2", tokens, 8, NULL, NULL, merges, 6, -1};
    hearth_vocab *v;
    ck_assert_msg(load_synth(&s, NULL, &v) == HEARTH_OK, "%s", hearth_last_error());
    size_t n;
    hearth_token *ids = tokenize(v, "abc", 3, 0, &n);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(ids[0], 0);
    ck_assert_int_eq(ids[1], 4);
    free(ids);
    /* of overlapping equal pairs the leftmost merges: "aaa" is "aa" "a" */
    ids = tokenize(v, "aaa", 3, 0, &n);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(ids[0], 7);
    ck_assert_int_eq(ids[1], 0);
    free(ids);
    /* "a x" names no token "ax": unusable, so no merge */
    ids = tokenize(v, "ax", 2, 0, &n);
    ck_assert_uint_eq(n, 2);
    free(ids);
    /* a byte with no token and no <unk> cannot be written */
    ids = tokenize(v, "az", 2, 0, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(ids[0], 0);
    free(ids);
    hearth_vocab_free(v);
}
END_TEST

START_TEST(test_spm_scores_and_unknown)
{
    /* A SentencePiece vocabulary without byte tokens: the higher score
     * wins ("▁ab" over "▁a" + "b"), and a character it has no piece for
     * becomes <unk>, which cannot round-trip. */
    static const char *const tokens[] = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b",
                                         "\xE2\x96\x81" "a", "ab", "\xE2\x96\x81" "ab"};
    static const float scores[] = {0, 0, 0, -1, -2, -2, -3, -1, -5};
    static const int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 1, 1};
    struct synth s = {"llama", NULL, tokens, 9, scores, types, NULL, 0, 0};
    hearth_vocab *v;
    ck_assert_msg(load_synth(&s, NULL, &v) == HEARTH_OK, "%s", hearth_last_error());
    size_t n;
    /* "▁ab": pairs "▁a" (-3) and "ab" (-1): "ab" first, then "▁"+"ab"
     * makes "▁ab" */
    hearth_token *ids = tokenize(v, "ab", 2, 0, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(ids[0], 8);
    free(ids);
    ids = tokenize(v, "a\xE2\x82\xAC", 4, 0, &n); /* "a€" */
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(ids[0], 6);
    for (size_t i = 1; i < n; i++) ck_assert_int_eq(ids[i], 0); /* one <unk> per byte */
    size_t len;
    char *text = detokenize(v, ids, n, 0, &len);
    ck_assert_str_eq(text, "a");
    free(text);
    free(ids);
    hearth_vocab_free(v);
}
END_TEST

START_TEST(test_leftmost_longest_special)
{
#ifndef HAVE_PCRE2
    return; /* byte-level BPE needs PCRE2 */
#endif
    static const char *const tokens[] = {"<", "a", ">", "b", "<a>", "<a><b>", "<b>", "<a><"};
    static const int32_t types[] = {1, 1, 1, 1, 3, 3, 4, 1};
    static const char *const merges[] = {"< a"};
    struct synth s = {"gpt2", NULL, tokens, 8, NULL, types, merges, 1, -1};
    hearth_vocab *v;
    ck_assert_msg(load_synth(&s, NULL, &v) == HEARTH_OK, "%s", hearth_last_error());
    ck_assert_str_eq(hearth_vocab_pretokenizer(v), "default");
    size_t n;
    hearth_token *ids = tokenize(v, "<a><b><a>b<b", 12, HEARTH_TOKENIZE_PARSE_SPECIAL, &n);
    ck_assert_uint_eq(n, 5);
    ck_assert_int_eq(ids[0], 5); /* "<a><b>", not "<a>" then "<b>" */
    ck_assert_int_eq(ids[1], 4);
    ck_assert_int_eq(ids[2], 3);
    ck_assert_int_eq(ids[3], 0);
    ck_assert_int_eq(ids[4], 3);
    free(ids);
    hearth_vocab_free(v);
}
END_TEST

/* User-defined tokens are vocabulary entries the model's own tokenizer
 * always matches (added whitespace runs, "<b>" here); control tokens
 * ("<a>") only with HEARTH_TOKENIZE_PARSE_SPECIAL. */
START_TEST(test_user_defined_always_matched)
{
#ifndef HAVE_PCRE2
    return; /* byte-level BPE needs PCRE2 */
#endif
    static const char *const tokens[] = {"<", "a", ">", "b", "<a>", "<b>"};
    static const int32_t types[] = {1, 1, 1, 1, 3, 4};
    static const char *const merges[] = {"a b"};
    struct synth s = {"gpt2", NULL, tokens, 6, NULL, types, merges, 1, -1};
    hearth_vocab *v;
    ck_assert_msg(load_synth(&s, NULL, &v) == HEARTH_OK, "%s", hearth_last_error());
    size_t n;
    hearth_token *ids = tokenize(v, "<a><b>", 6, 0, &n);
    ck_assert_uint_eq(n, 4); /* "<" "a" ">" then the user-defined "<b>" */
    ck_assert_int_eq(ids[0], 0);
    ck_assert_int_eq(ids[1], 1);
    ck_assert_int_eq(ids[2], 2);
    ck_assert_int_eq(ids[3], 5);
    free(ids);
    ids = tokenize(v, "<a><b>", 6, HEARTH_TOKENIZE_PARSE_SPECIAL, &n);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(ids[0], 4);
    ck_assert_int_eq(ids[1], 5);
    free(ids);
    hearth_vocab_free(v);
}
END_TEST

/* The words a pre-tokenizer cuts, joined by '|'. */
struct joined {
    char buf[512];
    size_t len;
};

static hearth_status join_word(const char *word, size_t len, void *ctx)
{
    struct joined *j = ctx;
    if (j->len + len + 2 > sizeof j->buf) return HEARTH_E_INTERNAL;
    if (j->len) j->buf[j->len++] = '|';
    memcpy(j->buf + j->len, word, len);
    j->len += len;
    j->buf[j->len] = '\0';
    return HEARTH_OK;
}

/* The words the pre-tokenizer named pre cuts each case's text into must
 * be the case's words, joined by '|'. */
struct words_case {
    const char *text, *words;
};

static hearth_status count_word(const char *word, size_t len, void *ctx)
{
    (void)word;
    (void)len;
    ++*(size_t *)ctx;
    return HEARTH_OK;
}

static void check_words(const char *pre, const struct words_case *cases, size_t n_cases)
{
    static const char *const tokens[] = {"a", "b", "ab"};
    static const char *const merges[] = {"a b"};
    struct synth s = {"gpt2", pre, tokens, 3, NULL, NULL, merges, 1, -1};
    hearth_vocab *v;
    ck_assert_msg(load_synth(&s, NULL, &v) == HEARTH_OK, "%s", hearth_last_error());
    ck_assert_str_eq(hearth_vocab_pretokenizer(v), pre);
    tok_scratch scratch = {0};
    for (size_t i = 0; i < n_cases; i++) {
        struct joined j = {.len = 0};
        j.buf[0] = '\0';
        ck_assert_int_eq(pretok_split(v->pretok, cases[i].text, strlen(cases[i].text), &scratch, join_word, &j),
                         HEARTH_OK);
        ck_assert_str_eq(j.buf, cases[i].words);
    }
    /* a long run of capitals is one word: no limit of the matcher (the
     * JIT's stack once) is reached */
    enum { RUN = 200000 };
    char *run = malloc(RUN);
    ck_assert_ptr_nonnull(run);
    memset(run, 'A', RUN);
    size_t n_words = 0;
    ck_assert_msg(pretok_split(v->pretok, run, RUN, &scratch, count_word, &n_words) == HEARTH_OK, "%s: %s", pre,
                  hearth_last_error());
    ck_assert_uint_eq(n_words, 1);
    free(run);
    tok_scratch_free(&scratch);
    hearth_vocab_free(v);
}

/* o200k's expression (gpt-4o, gpt-oss): capitalised-word shapes cut
 * camel case but keep acronyms before a word, any-case contractions,
 * digits in threes, punctuation with a leading space and its slashes,
 * newlines apart from the spaces after them.  Kimi-K2's: o200k's words,
 * but Han characters (by script: not the shared U+3001 and U+3002) make
 * words of their own, slashes stay apart from punctuation, the
 * contractions fold case as Unicode does (the long s) and white space is
 * Unicode's (not U+180E). */
START_TEST(test_o200k_kimi_pretokenizers)
{
#ifndef HAVE_PCRE2
    return;
#endif
    static const struct words_case o200k[] = {
        {"HelloWorld HTTPServer don'T 1234567 a,b\n\n  x //c\r\n",
         "Hello|World| HTTPServer| don'T| |123|456|7| a|,b|\n\n| | x| //|c|\r\n"},
        /* marks stay with their letters; a title-case letter starts a word */
        {"Cafe\xcc\x81 \xc7\x85ungla", "Cafe\xcc\x81| \xc7\x85ungla"},
    };
    static const struct words_case kimi[] = {
        {"\xe4\xb8\xad\xe6\x96\x87" "Chinese\xe6\xbc\xa2\xe5\xad\x97\xe3\x80\x81\xe3\x80\x82x",
         "\xe4\xb8\xad\xe6\x96\x87|Chinese|\xe6\xbc\xa2\xe5\xad\x97|\xe3\x80\x81\xe3\x80\x82|x"},
        {"HelloWorld it'\xc5\xbf x//y\n", "Hello|World| it'\xc5\xbf| x|//|y|\n"},
        {"!\xe1\xa0\x8e! a", "!\xe1\xa0\x8e!| a"},
    };
    check_words("gpt-4o", o200k, HEARTH_ARRAY_LEN(o200k));
    check_words("kimi-k2", kimi, HEARTH_ARRAY_LEN(kimi));
}
END_TEST

/* v's pre-tokenizer splits text into words (joined by '|' in words). */
static void assert_words(const hearth_vocab *v, const char *text, const char *words)
{
    struct joined j = {.len = 0};
    j.buf[0] = '\0';
    tok_scratch scratch = {0};
    ck_assert_int_eq(pretok_split(v->pretok, text, strlen(text), &scratch, join_word, &j), HEARTH_OK);
    tok_scratch_free(&scratch);
    ck_assert_str_eq(j.buf, words);
}

/* GLM-4.5's pre-tokenizer (glm4): Llama 3's words, merges applied to a
 * word that is itself a token (llama3 takes such a word whole). */
START_TEST(test_glm4_pretokenizer)
{
#ifndef HAVE_PCRE2
    return;
#endif
    static const char *const tokens[] = {"a", "b", "c", "ab", "abc"};
    static const char *const merges[] = {"a b"};
    static const char *const pres[] = {"glm4", "llama3"};
    for (int k = 0; k < 2; k++) {
        struct synth s = {"gpt2", pres[k], tokens, 5, NULL, NULL, merges, 1, -1};
        hearth_vocab *v;
        ck_assert_msg(load_synth(&s, NULL, &v) == HEARTH_OK, "%s", hearth_last_error());
        ck_assert_str_eq(hearth_vocab_pretokenizer(v), pres[k]);
        assert_words(v, "HelloWorld don'T 1234567 a,b\n\n  x", "HelloWorld| don|'T| |123|456|7| a|,b|\n\n| | x");
        size_t n;
        hearth_token *ids = tokenize(v, "abc", 3, 0, &n);
        if (k == 0) {
            ck_assert_uint_eq(n, 2);
            ck_assert_int_eq(ids[0], 3);
            ck_assert_int_eq(ids[1], 2);
        } else {
            ck_assert_uint_eq(n, 1);
            ck_assert_int_eq(ids[0], 4);
        }
        free(ids);
        hearth_vocab_free(v);
    }
}
END_TEST

/* \s in the published expressions is Unicode's White_Space, without
 * U+180E (PCRE2's own \s takes it): in Qwen2's expression the separator
 * is a symbol that joins the space before it, as the reference
 * tokenizers cut it, not whitespace of its own; U+2003 (em space) stays
 * whitespace. */
START_TEST(test_white_space_property)
{
#ifndef HAVE_PCRE2
    return;
#endif
    static const char *const tokens[] = {"a", "b", "ab"};
    static const char *const merges[] = {"a b"};
    static const char *const pres[] = {"qwen2", "llama3", "default"};
    /* an em space is whitespace: the space before it is a piece of its
     * own, and the em space itself a symbol that takes the letters after
     * it in Llama 3's shapes, whitespace of its own in GPT-2's */
    static const char *const em[] = {"x| |\xE2\x80\x83y", "x| |\xE2\x80\x83y", "x| |\xE2\x80\x83|y"};
    for (size_t k = 0; k < HEARTH_ARRAY_LEN(pres); k++) {
        struct synth s = {"gpt2", pres[k], tokens, 3, NULL, NULL, merges, 1, -1};
        hearth_vocab *v;
        ck_assert_msg(load_synth(&s, NULL, &v) == HEARTH_OK, "%s", hearth_last_error());
        assert_words(v, "x \xE1\xA0\x8Ey", "x| \xE1\xA0\x8E|y");
        assert_words(v, "x \xE2\x80\x83y", em[k]);
        hearth_vocab_free(v);
    }
}
END_TEST

/* Harmony vocabularies (gpt-oss): a reply ends at <|return|> or <|call|>;
 * <|end|> closes one message (the reasoning) and generation goes on.  In
 * another vocabulary <|end|> (Phi-3's) ends the turn. */
START_TEST(test_harmony_ends)
{
#ifndef HAVE_PCRE2
    return;
#endif
    static const char *const tokens[] = {"a", "b", "<|end|>", "<|return|>", "<|call|>", "<|channel|>"};
    static const int32_t types[] = {1, 1, 3, 3, 3, 3};
    static const char *const merges[] = {"a b"};
    struct synth s = {"gpt2", "gpt-4o", tokens, 6, NULL, types, merges, 1, -1};
    hearth_vocab *v;
    ck_assert_msg(load_synth(&s, NULL, &v) == HEARTH_OK, "%s", hearth_last_error());
    ck_assert(!hearth_vocab_is_eog(v, 2));
    ck_assert(hearth_vocab_is_eog(v, 3));
    ck_assert(hearth_vocab_is_eog(v, 4));
    ck_assert(!hearth_vocab_is_eog(v, 5));
    ck_assert_int_eq(hearth_vocab_special(v, HEARTH_SPECIAL_EOT), 3);
    hearth_vocab_free(v);
    struct synth phi = {"gpt2", "gpt-4o", tokens, 3, NULL, types, merges, 1, -1};
    ck_assert_msg(load_synth(&phi, NULL, &v) == HEARTH_OK, "%s", hearth_last_error());
    ck_assert(hearth_vocab_is_eog(v, 2));
    hearth_vocab_free(v);
}
END_TEST

/* Kimi-K2's "[EOS]" and "[EOT]" end generation where the file marks them
 * as control tokens, and are text where it does not. */
START_TEST(test_control_ends)
{
#ifndef HAVE_PCRE2
    return;
#endif
    static const char *const tokens[] = {"a", "b", "[EOS]", "[EOT]", "[BOS]"};
    static const int32_t control[] = {1, 1, 3, 3, 3};
    static const int32_t normal[] = {1, 1, 1, 1, 1};
    static const char *const merges[] = {"a b"};
    struct synth s = {"gpt2", "gpt-4o", tokens, 5, NULL, control, merges, 1, -1};
    hearth_vocab *v;
    ck_assert_msg(load_synth(&s, NULL, &v) == HEARTH_OK, "%s", hearth_last_error());
    ck_assert(hearth_vocab_is_eog(v, 2));
    ck_assert(hearth_vocab_is_eog(v, 3));
    ck_assert(!hearth_vocab_is_eog(v, 4));
    hearth_vocab_free(v);
    struct synth plain = {"gpt2", "gpt-4o", tokens, 5, NULL, normal, merges, 1, -1};
    ck_assert_msg(load_synth(&plain, NULL, &v) == HEARTH_OK, "%s", hearth_last_error());
    ck_assert(!hearth_vocab_is_eog(v, 2));
    ck_assert(!hearth_vocab_is_eog(v, 3));
    hearth_vocab_free(v);
}
END_TEST

START_TEST(test_unknown_pretokenizer)
{
    static const char *const tokens[] = {"a", "b", "ab"};
    static const char *const merges[] = {"a b"};
    struct synth s = {"gpt2", "no-such-pre", tokens, 3, NULL, NULL, merges, 1, -1};
    hearth_vocab *v;
    hearth_status st = load_synth(&s, NULL, &v);
#ifdef HAVE_PCRE2
    ck_assert_int_eq(st, HEARTH_E_UNSUPPORTED);
    const char *msg = hearth_last_error();
    ck_assert_ptr_nonnull(strstr(msg, "'no-such-pre'"));
    ck_assert_ptr_nonnull(strstr(msg, "llama-bpe"));
    ck_assert_ptr_nonnull(strstr(msg, "qwen2"));
    hearth_vocab_options force = {true};
    ck_assert_int_eq(load_synth(&s, &force, &v), HEARTH_OK);
    ck_assert_str_eq(hearth_vocab_pretokenizer(v), "default");
    size_t n;
    hearth_token *ids = tokenize(v, "ab", 2, 0, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(ids[0], 2);
    free(ids);
    hearth_vocab_free(v);
    ck_assert_ptr_nonnull(strstr(hearth_vocab_supported_pretokenizers(), "deepseek-coder"));
#else
    ck_assert_int_eq(st, HEARTH_E_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "PCRE2"));
#endif
}
END_TEST

/* WordPiece (tokenizer model "bert"): the lower-cased, accent-stripped
 * words cut at punctuation and CJK ideographs, each the longest pieces
 * from its start ("▁" a word's first, no prefix after), a word that some
 * rest of starts no piece or of over 100 characters [UNK], [CLS] and
 * [SEP] around; pieces decode with a space before a word. */
START_TEST(test_wordpiece)
{
    static const char *const tokens[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "\xE2\x96\x81un",
                                         "\xE2\x96\x81unaff", "able", "aff", "a", "\xE2\x96\x81,",
                                         "\xE2\x96\x81naive", "\xE2\x96\x81\xE4\xB8\xAD", "\xE2\x96\x81" "a"};
    static const int32_t types[] = {3, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    struct synth s = {"bert", NULL, tokens, HEARTH_ARRAY_LEN(tokens), NULL, types, NULL, 0, 1};
    hearth_vocab *v;
    ck_assert_int_eq(load_synth(&s, NULL, &v), HEARTH_OK);
    ck_assert_int_eq(hearth_vocab_get_kind(v), HEARTH_VOCAB_WPM);
    hearth_token ids[128];
    size_t n;
    const char *text = "UnAffable, na\xC3\xAFve\t\xE4\xB8\xADx  ABLE";
    ck_assert_int_eq(hearth_tokenize(v, text, strlen(text), HEARTH_TOKENIZE_ADD_SPECIAL, ids, 128, &n), HEARTH_OK);
    static const hearth_token want[] = {2, 5, 6, 9, 10, 11, 1, 1, 3};
    ck_assert_uint_eq(n, HEARTH_ARRAY_LEN(want));
    for (size_t i = 0; i < n; i++) ck_assert_int_eq(ids[i], want[i]);
    char out[64];
    size_t len;
    ck_assert_int_eq(hearth_detokenize(v, ids + 1, 4, 0, out, sizeof out - 1, &len), HEARTH_OK);
    out[len] = '\0';
    ck_assert_str_eq(out, "unaffable , naive");
    /* 100 characters: pieces; 101: [UNK] */
    char word[102];
    memset(word, 'a', 101);
    word[101] = '\0';
    ck_assert_int_eq(hearth_tokenize(v, word, 100, 0, ids, 128, &n), HEARTH_OK);
    ck_assert_uint_eq(n, 100);
    ck_assert_int_eq(ids[0], 12);
    ck_assert_int_eq(ids[99], 8);
    ck_assert_int_eq(hearth_tokenize(v, word, 101, 0, ids, 128, &n), HEARTH_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(ids[0], 1);
    hearth_vocab_free(v);
}
END_TEST

START_TEST(test_malformed_vocabularies)
{
    static const char *const tokens[] = {"<unk>", "a"};
    static const float scores[] = {0, 0, 0};
    static const int32_t types[] = {2, 1};
    hearth_vocab *v;

    struct synth none = {NULL, NULL, tokens, 2, NULL, NULL, NULL, 0, -1};
    ck_assert_int_eq(load_synth(&none, NULL, &v), HEARTH_E_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "no tokenizer"));

    struct synth t5 = {"t5", NULL, tokens, 2, NULL, NULL, NULL, 0, -1};
    ck_assert_int_eq(load_synth(&t5, NULL, &v), HEARTH_E_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "'t5'"));

    /* WordPiece needs an unknown token: neither the key nor [UNK] */
    struct synth bert = {"bert", NULL, tokens, 2, NULL, NULL, NULL, 0, -1};
    ck_assert_int_eq(load_synth(&bert, NULL, &v), HEARTH_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "unknown token"));

    struct synth no_tokens = {"llama", NULL, NULL, 0, NULL, NULL, NULL, 0, -1};
    ck_assert_int_eq(load_synth(&no_tokens, NULL, &v), HEARTH_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "tokenizer.ggml.tokens"));

    /* three scores for two tokens */
    hearth_gguf_writer *w;
    char path[] = "/tmp/hearth-vocab-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    ck_assert_int_eq(hearth_gguf_writer_new(&w), HEARTH_OK);
    hearth_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    hearth_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", tokens, 2);
    hearth_gguf_writer_set_array(w, "tokenizer.ggml.scores", HEARTH_GGUF_FLOAT32, scores, 3);
    ck_assert_int_eq(hearth_gguf_writer_write(w, path), HEARTH_OK);
    hearth_gguf_writer_free(w);
    hearth_gguf *g;
    ck_assert_int_eq(hearth_gguf_open(path, &g), HEARTH_OK);
    ck_assert_int_eq(hearth_vocab_load(g, NULL, &v), HEARTH_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "tokenizer.ggml.scores"));
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), path));
    hearth_gguf_close(g);

    /* token types given as strings */
    ck_assert_int_eq(hearth_gguf_writer_new(&w), HEARTH_OK);
    hearth_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    hearth_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", tokens, 2);
    hearth_gguf_writer_set_str_array(w, "tokenizer.ggml.token_type", tokens, 2);
    ck_assert_int_eq(hearth_gguf_writer_write(w, path), HEARTH_OK);
    hearth_gguf_writer_free(w);
    ck_assert_int_eq(hearth_gguf_open(path, &g), HEARTH_OK);
    ck_assert_int_eq(hearth_vocab_load(g, NULL, &v), HEARTH_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "tokenizer.ggml.token_type"));
    hearth_gguf_close(g);
    unlink(path);

    /* a byte-level vocabulary without merges */
    struct synth no_merges = {"gpt2", "gpt-2", tokens, 2, NULL, types, NULL, 0, -1};
    hearth_status st = load_synth(&no_merges, NULL, &v);
    ck_assert_int_ne(st, HEARTH_OK);

    /* out-of-range special ids mean "none" */
    struct synth bad_unk = {"llama", NULL, tokens, 2, NULL, types, NULL, 0, 4294967295LL};
    ck_assert_int_eq(load_synth(&bad_unk, NULL, &v), HEARTH_OK);
    ck_assert_int_eq(hearth_vocab_special(v, HEARTH_SPECIAL_UNK), HEARTH_TOKEN_NONE);
    /* two tokens: not enough for SentencePiece's conventional BOS/EOS */
    ck_assert_int_eq(hearth_vocab_special(v, HEARTH_SPECIAL_BOS), HEARTH_TOKEN_NONE);
    ck_assert(!hearth_vocab_adds_bos(v));
    hearth_vocab_free(v);
}
END_TEST

/* ---- untrusted text ---------------------------------------------------------- */

START_TEST(test_hostile_text)
{
    if (!test_require_data()) return;
    /* Long runs that stress the pre-tokenizer expressions and the merge
     * queues, and random bytes; every byte must come back. */
    hearth_vocab *vocabs[4];
    for (int k = 0; k < 4; k++) vocabs[k] = load_shared_index(k);
    size_t size = 200000;
    char *text = malloc(size);
    test_rng rng;
    test_rng_seed(&rng, 42);
    for (int pattern = 0; pattern < 5; pattern++) {
        for (size_t i = 0; i < size; i++) {
            switch (pattern) {
            case 0: text[i] = ' '; break;
            case 1: text[i] = i + 1 < size ? ' ' : 'x'; break;
            case 2: text[i] = "\n \t\r"[test_rng_next(&rng) % 4]; break;
            case 3: text[i] = (char)test_rng_next(&rng); break;
            default: text[i] = i < size / 2 ? ' ' : '7'; break;
            }
        }
        for (int k = 0; k < 4; k++) {
            if (!vocabs[k]) continue;
            size_t n, len;
            hearth_token *ids = tokenize(vocabs[k], text, size, HEARTH_TOKENIZE_PARSE_SPECIAL, &n);
            char *back = detokenize(vocabs[k], ids, n, HEARTH_DECODE_SPECIAL, &len);
            ck_assert_msg(len == size && memcmp(back, text, size) == 0,
                          "%s: pattern %d does not round-trip", shared_vocabs[k], pattern);
            free(back);
            free(ids);
        }
    }
    free(text);
    for (int k = 0; k < 4; k++) hearth_vocab_free(vocabs[k]);
}
END_TEST

START_TEST(test_concurrent_use)
{
    if (!test_require_data()) return;
    /* One vocabulary, many threads: every call keeps its own scratch
     * space, so each thread gets the tokens a lone call gets. */
    hearth_vocab *vocabs[2] = {load_shared("vocab/vocab-qwen3.gguf"),
                               load_shared("vocab/ggml-vocab-llama-spm.gguf")};
    size_t len;
    char *text = test_read_file(test_data_path("text/GPL-3.txt"), &len);
    for (int k = 0; k < 2; k++) {
        if (!vocabs[k]) continue;
        size_t n_ref;
        hearth_token *ref = tokenize(vocabs[k], text, len, HEARTH_TOKENIZE_ADD_SPECIAL, &n_ref);
        int mismatches = 0;
#ifdef _OPENMP
#pragma omp parallel for num_threads(4) reduction(+ : mismatches)
#endif
        for (int i = 0; i < 8; i++) {
            size_t cap = len + 16, n;
            hearth_token *ids = malloc(cap * sizeof *ids);
            if (!ids || hearth_tokenize(vocabs[k], text, len, HEARTH_TOKENIZE_ADD_SPECIAL, ids, cap,
                                        &n) != HEARTH_OK ||
                n != n_ref || memcmp(ids, ref, n * sizeof *ids) != 0)
                mismatches++;
            free(ids);
        }
        ck_assert_int_eq(mismatches, 0);
        free(ref);
    }
    free(text);
    hearth_vocab_free(vocabs[0]);
    hearth_vocab_free(vocabs[1]);
}
END_TEST

/* ---- the allocating variants ----------------------------------------- */

/* hearth_tokenize_alloc() gives what a buffer of the size hearth_tokenize()
 * asks for gets, and hearth_detokenize_alloc() what hearth_detokenize()
 * gives, NUL-terminated. */
static void check_alloc_agrees(const hearth_vocab *v, const char *name, const char *what,
                               const char *text, size_t len, unsigned flags, bool ordinary)
{
    size_t n_want;
    hearth_status st = hearth_tokenize(v, text, len, flags, NULL, 0, &n_want);
    ck_assert(st == HEARTH_OK || st == HEARTH_E_RANGE);
    hearth_token *want = malloc((n_want ? n_want : 1) * sizeof *want);
    ck_assert_ptr_nonnull(want);
    ck_assert_int_eq(hearth_tokenize(v, text, len, flags, want, n_want, &n_want), HEARTH_OK);

    hearth_token *got;
    size_t n_got;
    ck_assert_msg(hearth_tokenize_alloc(v, text, len, flags, &got, &n_got) == HEARTH_OK, "%s, %s: %s",
                  name, what, hearth_last_error());
    ck_assert_ptr_nonnull(got);
    ck_assert_msg(n_got == n_want && memcmp(got, want, n_got * sizeof *got) == 0,
                  "%s, %s, flags 0x%x: %zu tokens allocated, %zu in a buffer", name, what, flags,
                  n_got, n_want);

    for (unsigned decode = 0; decode <= (HEARTH_DECODE_SPECIAL | HEARTH_DECODE_CONTINUATION);
         decode++) {
        size_t want_len;
        char *want_text = detokenize(v, want, n_want, decode, &want_len);
        char *got_text;
        size_t got_len;
        ck_assert_int_eq(hearth_detokenize_alloc(v, got, n_got, decode, &got_text, &got_len),
                         HEARTH_OK);
        ck_assert_ptr_nonnull(got_text);
        ck_assert_msg(got_len == want_len && memcmp(got_text, want_text, got_len) == 0,
                      "%s, %s: detokenize_alloc (0x%x) differs", name, what, decode);
        ck_assert_int_eq(got_text[got_len], '\0');
        /* text without special tokens' text comes back whole */
        if (ordinary && decode == 0 && !(flags & HEARTH_TOKENIZE_ADD_SPECIAL))
            ck_assert_msg(got_len == len && memcmp(got_text, text, len) == 0,
                          "%s, %s does not round-trip", name, what);
        hearth_free(got_text);
        free(want_text);
    }
    hearth_free(got);
    free(want);
}

START_TEST(test_alloc_agrees)
{
    if (!test_require_data()) return;
    const char *name = shared_vocabs[_i];
    hearth_vocab *v = load_shared_index(_i);
    if (!v) return;
    size_t long_len;
    char *long_text = test_read_file(test_data_path("text/GPL-3.txt"), &long_len);
    /* the text of a control token, between ordinary words */
    hearth_token eos = hearth_vocab_special(v, HEARTH_SPECIAL_EOS);
    size_t eos_len = 0;
    const char *eos_text = eos == HEARTH_TOKEN_NONE ? "" : hearth_vocab_token_text(v, eos, &eos_len);
    static const char invalid_utf8[] = "caf\xc3 \xff\xfe\x80 ok \xe2\x82";
    char special[256];
    int special_len = snprintf(special, sizeof special, "one%.*stwo", (int)eos_len, eos_text);
    ck_assert(special_len > 0 && (size_t)special_len < sizeof special);
    const struct {
        const char *what, *text;
        size_t len;
        bool ordinary;
    } texts[] = {
        {"the empty text", "", 0, true},
        {"a short text", "Hello world", 11, true},
        {"invalid UTF-8", invalid_utf8, sizeof invalid_utf8 - 1, true},
        {"special-token text", special, (size_t)special_len, false},
        {"a long text", long_text, long_len, true},
    };
    for (size_t t = 0; t < HEARTH_ARRAY_LEN(texts); t++)
        for (unsigned flags = 0; flags <= (HEARTH_TOKENIZE_ADD_SPECIAL | HEARTH_TOKENIZE_PARSE_SPECIAL);
             flags++)
            check_alloc_agrees(v, name, texts[t].what, texts[t].text, texts[t].len, flags,
                               texts[t].ordinary);

    /* the long text takes more ids than any first guess of a buffer */
    hearth_token *ids;
    size_t n;
    ck_assert_int_eq(hearth_tokenize_alloc(v, long_text, long_len, 0, &ids, &n), HEARTH_OK);
    ck_assert_uint_gt(n, 1000);
    hearth_free(ids);
    /* and the special token's text is that token when parsed */
    if (eos != HEARTH_TOKEN_NONE && eos_len > 0) {
        bool found = false;
        ck_assert_int_eq(hearth_tokenize_alloc(v, special, (size_t)special_len,
                                               HEARTH_TOKENIZE_PARSE_SPECIAL, &ids, &n), HEARTH_OK);
        for (size_t i = 0; i < n; i++) found |= ids[i] == eos;
        ck_assert_msg(found, "%s: the EOS text is not parsed as EOS", name);
        hearth_free(ids);
    }
    free(long_text);
    hearth_vocab_free(v);
}
END_TEST

START_TEST(test_alloc_invalid)
{
    if (!test_require_data()) return;
    hearth_vocab *v = load_shared("vocab/ggml-vocab-llama-spm.gguf");
    hearth_token *ids = (hearth_token *)&ids; /* must come back NULL */
    size_t n = 99;
    ck_assert_int_eq(hearth_tokenize_alloc(NULL, "x", 1, 0, &ids, &n), HEARTH_E_INVALID);
    ck_assert_ptr_null(ids);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(hearth_tokenize_alloc(v, "x", 1, 0, NULL, &n), HEARTH_E_INVALID);
    ck_assert_int_eq(hearth_tokenize_alloc(v, "x", 1, 0, &ids, NULL), HEARTH_E_INVALID);
    ck_assert_ptr_null(ids);
    ck_assert_int_eq(hearth_tokenize_alloc(v, NULL, 1, 0, &ids, &n), HEARTH_E_INVALID);
    ck_assert_int_eq(hearth_tokenize_alloc(v, "x", 1, 0x100, &ids, &n), HEARTH_E_INVALID);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "hearth_tokenize_alloc"));
    ck_assert_ptr_null(ids);
    /* no text at all is a valid, empty text: a buffer all the same */
    ck_assert_int_eq(hearth_tokenize_alloc(v, NULL, 0, 0, &ids, &n), HEARTH_OK);
    ck_assert_ptr_nonnull(ids);
    ck_assert_uint_eq(n, 0);
    hearth_free(ids);

    char *text = (char *)&text;
    size_t len = 99;
    hearth_token bad[] = {15043, 32000};
    ck_assert_int_eq(hearth_detokenize_alloc(v, bad, 2, 0, &text, &len), HEARTH_E_INVALID);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "32000"));
    ck_assert_ptr_null(text);
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(hearth_detokenize_alloc(NULL, bad, 1, 0, &text, &len), HEARTH_E_INVALID);
    ck_assert_int_eq(hearth_detokenize_alloc(v, NULL, 1, 0, &text, &len), HEARTH_E_INVALID);
    ck_assert_int_eq(hearth_detokenize_alloc(v, bad, 1, 0, NULL, &len), HEARTH_E_INVALID);
    ck_assert_int_eq(hearth_detokenize_alloc(v, bad, 1, 0, &text, NULL), HEARTH_E_INVALID);
    ck_assert_ptr_null(text);
    ck_assert_int_eq(hearth_detokenize_alloc(v, NULL, 0, 0, &text, &len), HEARTH_OK);
    ck_assert_str_eq(text, "");
    ck_assert_uint_eq(len, 0);
    hearth_free(text);
    hearth_vocab_free(v);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tokenizer");
    TCase *tc = tcase_create("shared");
    tcase_add_loop_test(tc, test_reference_tokenizations, 0, (int)HEARTH_ARRAY_LEN(shared_vocabs));
    tcase_add_test(tc, test_stories_once_upon_a_time);
    tcase_add_test(tc, test_special_ids);
    tcase_add_test(tc, test_special_ids_bpe);
    tcase_add_test(tc, test_parse_special);
    tcase_add_test(tc, test_parse_special_spm);
    tcase_add_test(tc, test_pieces_and_leading_space);
    tcase_add_test(tc, test_byte_level_pieces);
    tcase_add_test(tc, test_hostile_text);
    tcase_add_test(tc, test_concurrent_use);
    tcase_add_test(tc, test_chat_tokenize_flags);
    tcase_add_loop_test(tc, test_alloc_agrees, 0, (int)HEARTH_ARRAY_LEN(shared_vocabs));
    tcase_add_test(tc, test_alloc_invalid);
    suite_add_tcase(s, tc);
    tc = tcase_create("built");
    tcase_add_test(tc, test_bpe_merge_order);
    tcase_add_test(tc, test_spm_scores_and_unknown);
    tcase_add_test(tc, test_leftmost_longest_special);
    tcase_add_test(tc, test_user_defined_always_matched);
    tcase_add_test(tc, test_unknown_pretokenizer);
    tcase_add_test(tc, test_o200k_kimi_pretokenizers);
    tcase_add_test(tc, test_glm4_pretokenizer);
    tcase_add_test(tc, test_harmony_ends);
    tcase_add_test(tc, test_control_ends);
    tcase_add_test(tc, test_white_space_property);
    tcase_add_test(tc, test_malformed_vocabularies);
    tcase_add_test(tc, test_wordpiece);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}

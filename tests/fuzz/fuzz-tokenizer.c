/*
 * fuzz-tokenizer.c -- fuzz target for the tokenizers and the text stream:
 * any byte string is tokenized (as plain text or with special tokens
 * parsed), decoded, and streamed token by token and byte by byte through
 * hearth_text_stream with a stop string, under every shared vocabulary
 * (SentencePiece, byte-level BPE, RWKV World), under a byte-level BPE
 * vocabulary with each pre-tokenizer that no shared file names, and under
 * a small WordPiece vocabulary written here (there is no shared one).
 *
 * The first byte of the input picks the vocabulary and the flags; the
 * rest is the text.  An input that starts with the GGUF magic is instead
 * a vocabulary file: it is loaded from memory and, when accepted, used to
 * tokenize, decode and stream a few fixed texts.  Besides crashes, hangs and out-of-bounds reads, the
 * target aborts when a property fails: every id is in the vocabulary,
 * plain text decodes back to itself where the vocabulary can spell it,
 * the stream gives only valid UTF-8 and never any part of a stop string.
 *
 * The vocabularies are read once, from vocab/ under $HEARTH_TEST_DATA,
 * or else under the directory compiled in as HEARTH_FUZZ_DATA (the test
 * data directory configure chose), or else ../shared; one with another
 * pre-tokenizer is a copy of the file with tokenizer.ggml.pre replaced,
 * written to a temporary file ($TMPDIR, else /tmp) and loaded from it.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "utf8.h"

#ifndef HEARTH_FUZZ_DATA
#define HEARTH_FUZZ_DATA "../shared"
#endif

#define MAX_INPUT (64 * 1024)

/* The shared vocabularies, and their tokenizer.ggml.pre where it is
 * replaced. */
static const struct {
    const char *file, *pre;
} vocab_files[] = {
    {"vocab/ggml-vocab-llama-spm.gguf", NULL},
    {"vocab/ggml-vocab-gpt-2.gguf", NULL},
    {"vocab/vocab-llama3.gguf", NULL},
    {"vocab/vocab-qwen3.gguf", NULL},
    {"vocab/vocab-rwkv-world-synthetic.gguf", NULL},
    {"vocab/vocab-qwen3.gguf", "kimi-k2"},
    {NULL, NULL}, /* WordPiece, written by wordpiece_vocab() */
};
#define N_VOCABS (sizeof vocab_files / sizeof vocab_files[0])

static hearth_vocab *vocabs[N_VOCABS];

static void fail(const char *what, size_t size)
{
    fprintf(stderr, "fuzz-tokenizer: %s (input of %zu bytes)\n", what, size);
    abort();
}

/* The file at path, opened; with pre, a copy of it that names that
 * pre-tokenizer. */
static hearth_status open_vocab_file(const char *path, const char *pre, hearth_gguf **out)
{
    if (!pre) return hearth_gguf_open(path, out);
    hearth_gguf *src;
    hearth_status st = hearth_gguf_open(path, &src);
    if (st != HEARTH_OK) return st;
    hearth_gguf_writer *w;
    if ((st = hearth_gguf_writer_new(&w)) != HEARTH_OK) {
        hearth_gguf_close(src);
        return st;
    }
    for (int64_t i = 0; i < hearth_gguf_n_kv(src) && st == HEARTH_OK; i++) st = hearth_gguf_writer_copy_kv(w, src, i);
    hearth_gguf_close(src);
    if (st == HEARTH_OK) st = hearth_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    const char *dir = getenv("TMPDIR");
    char copy[4096];
    snprintf(copy, sizeof copy, "%s/fuzz-tokenizer-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = st == HEARTH_OK ? mkstemp(copy) : -1;
    if (fd < 0 && st == HEARTH_OK) st = hearth_error(HEARTH_E_IO, "cannot create %s", copy);
    if (fd >= 0) {
        close(fd);
        st = hearth_gguf_writer_write(w, copy);
        if (st == HEARTH_OK) st = hearth_gguf_open(copy, out);
        unlink(copy);
    }
    hearth_gguf_writer_free(w);
    return st;
}

/* A WordPiece vocabulary (tokenizer model "bert") in BERT's layout:
 * [PAD], [UNK], [CLS], [SEP], [MASK], then words ("▁" + piece) and
 * continuations (the piece) of letters, digits, punctuation, a few
 * letter pairs and CJK ideographs; lower-cased, accents stripped. */
static hearth_status wordpiece_vocab(hearth_gguf **out)
{
    static const char *const pairs[] = {"th", "he", "in", "er", "an", "re", "on", "at", "\xE4\xB8\xAD",
                                        "\xE6\x96\x87", "\xC3\xA9"};
    char *tokens[5 + 2 * (26 + 10 + 32) + 2 * 11];
    int32_t types[sizeof tokens / sizeof tokens[0]];
    size_t n = 0;
    hearth_status st = HEARTH_OK;
    static const char *const control[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    for (size_t i = 0; i < 5; i++) {
        types[n] = i == 1 ? HEARTH_TOKEN_UNKNOWN : HEARTH_TOKEN_CONTROL;
        tokens[n++] = strdup(control[i]);
    }
    for (int c = 33; c < 127; c++) {
        if (c >= 'A' && c <= 'Z') continue;
        const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        char word[8];
        snprintf(word, sizeof word, "\xE2\x96\x81%c", c);
        types[n] = HEARTH_TOKEN_NORMAL;
        tokens[n++] = strdup(word);
        if (alnum) {
            snprintf(word, sizeof word, "%c", c);
            types[n] = HEARTH_TOKEN_NORMAL;
            tokens[n++] = strdup(word);
        }
    }
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        char word[16];
        snprintf(word, sizeof word, "\xE2\x96\x81%s", pairs[i]);
        types[n] = HEARTH_TOKEN_NORMAL;
        tokens[n++] = strdup(word);
        types[n] = HEARTH_TOKEN_NORMAL;
        tokens[n++] = strdup(pairs[i]);
    }
    for (size_t i = 0; i < n; i++)
        if (!tokens[i]) st = HEARTH_E_NOMEM;
    hearth_gguf_writer *w = NULL;
    if (st == HEARTH_OK) st = hearth_gguf_writer_new(&w);
    if (st == HEARTH_OK) st = hearth_gguf_writer_set_str(w, "tokenizer.ggml.model", "bert");
    if (st == HEARTH_OK) st = hearth_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", (const char *const *)tokens, n);
    if (st == HEARTH_OK) st = hearth_gguf_writer_set_array(w, "tokenizer.ggml.token_type", HEARTH_GGUF_INT32, types, n);
    if (st == HEARTH_OK) st = hearth_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 1);
    const char *dir = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/fuzz-tokenizer-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = st == HEARTH_OK ? mkstemp(path) : -1;
    if (fd < 0 && st == HEARTH_OK) st = hearth_error(HEARTH_E_IO, "cannot create %s", path);
    if (fd >= 0) {
        close(fd);
        st = hearth_gguf_writer_write(w, path);
        if (st == HEARTH_OK) st = hearth_gguf_open(path, out);
        unlink(path);
    }
    hearth_gguf_writer_free(w);
    for (size_t i = 0; i < n; i++) free(tokens[i]);
    return st;
}

static void load_vocabs(void)
{
    const char *dir = getenv("HEARTH_TEST_DATA");
    if (!dir || !*dir) dir = HEARTH_FUZZ_DATA;
    for (size_t i = 0; i < N_VOCABS; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, vocab_files[i].file ? vocab_files[i].file : "(WordPiece)");
        hearth_gguf *g;
        if ((vocab_files[i].file ? open_vocab_file(path, vocab_files[i].pre, &g) : wordpiece_vocab(&g)) != HEARTH_OK) {
            fprintf(stderr, "fuzz-tokenizer: cannot open %s: %s (set HEARTH_TEST_DATA)\n", path,
                    hearth_last_error());
            abort();
        }
        hearth_status st = hearth_vocab_load(g, NULL, &vocabs[i]);
        hearth_gguf_close(g);
#ifndef HAVE_PCRE2
        if (st == HEARTH_E_UNSUPPORTED) continue; /* byte-level BPE needs PCRE2 */
#endif
        if (st != HEARTH_OK) {
            fprintf(stderr, "fuzz-tokenizer: cannot load %s: %s\n", path, hearth_last_error());
            abort();
        }
    }
}

/* Stream ids (or, when ids is NULL, the bytes of text in pieces of 1..7
 * bytes) with one stop string; check what comes out. */
static void stream(const hearth_vocab *v, const hearth_token *ids, size_t n, const char *text,
                   size_t len, const char *stop, unsigned flags)
{
    const char *stops[1] = {stop};
    hearth_text_stream_options o = {flags, stops, stop ? 1 : 0};
    hearth_text_stream *s;
    if (hearth_text_stream_new(v, &o, &s) != HEARTH_OK) fail("stream_new failed", len);
    /* U+FFFD (3 bytes) for every byte at most */
    size_t cap = len, out_len = 0;
    if (ids) {
        cap = 0;
        for (size_t k = 0; k < n; k++) {
            size_t piece;
            hearth_token_piece(v, ids[k], flags, &piece);
            cap += piece;
        }
    }
    cap = cap * 3 + 64;
    char *out = malloc(cap);
    if (!out) abort();
    const char *chunk;
    size_t chunk_len;
    size_t i = 0;
    while (ids ? i < n : i < len) {
        hearth_status st;
        if (ids) {
            st = hearth_text_stream_push_token(s, ids[i], &chunk, &chunk_len);
            i++;
        } else {
            size_t step = HEARTH_MIN(len - i, (size_t)(1 + (unsigned char)text[i] % 7));
            st = hearth_text_stream_push_bytes(s, text + i, step, &chunk, &chunk_len);
            i += step;
        }
        if (st != HEARTH_OK) fail("push failed", len);
        if (!utf8_is_valid(chunk, chunk_len)) fail("stream chunk is not valid UTF-8", len);
        if (out_len + chunk_len > cap) fail("stream gave more text than it was given", len);
        memcpy(out + out_len, chunk, chunk_len);
        out_len += chunk_len;
    }
    if (hearth_text_stream_finish(s, &chunk, &chunk_len) != HEARTH_OK) fail("finish failed", len);
    if (out_len + chunk_len > cap) fail("stream gave more text than it was given", len);
    memcpy(out + out_len, chunk, chunk_len);
    out_len += chunk_len;
    if (!utf8_is_valid(out, out_len)) fail("stream output is not valid UTF-8", len);
    if (stop) {
        size_t sl = strlen(stop);
        for (size_t k = 0; k + sl <= out_len; k++)
            if (memcmp(out + k, stop, sl) == 0) fail("the stop string was shown", len);
    }
    free(out);
    hearth_text_stream_free(s);
}

static void check_text(const hearth_vocab *v, const char *text, size_t len, unsigned control);

/* A vocabulary file from the input: whatever its metadata says, loading
 * either fails cleanly or gives a vocabulary that works. */
static void fuzz_vocab_file(const uint8_t *data, size_t size)
{
    static const char *const texts[] = {
        "Hello world", " <s>\n\t  a\xC3\xA9\xE2\x96\x81 <|im_start|>x", "\xF0\x9F\xA6\x99\xFF 12345", "",
    };
    hearth_gguf *g;
    if (hearth_gguf_open_memory(data, size, "fuzz.gguf", &g) != HEARTH_OK) return;
    hearth_vocab_options o = {true};
    hearth_vocab *v;
    if (hearth_vocab_load(g, &o, &v) == HEARTH_OK) {
        hearth_gguf_close(g); /* the vocabulary must not refer to the file */
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
            for (unsigned control = 0; control < 0x20; control += 4)
                check_text(v, texts[i], strlen(texts[i]), control);
        for (int32_t id = 0; id < hearth_vocab_n_tokens(v) && id < 4096; id++) {
            size_t len;
            if (!hearth_token_piece(v, id, HEARTH_DECODE_SPECIAL, &len)) fail("no piece", size);
            (void)hearth_vocab_is_eog(v, id);
        }
        hearth_vocab_free(v);
    } else {
        hearth_gguf_close(g);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool loaded;
    if (!loaded) {
        load_vocabs();
        loaded = true;
    }
    if (size >= 4 && memcmp(data, "GGUF", 4) == 0) {
        fuzz_vocab_file(data, size);
        return 0;
    }
    if (size < 1 || size > MAX_INPUT || !vocabs[data[0] % N_VOCABS]) return 0;
    check_text(vocabs[data[0] % N_VOCABS], (const char *)data + 1, size - 1, data[0]);
    return 0;
}

static void check_text(const hearth_vocab *v, const char *text, size_t len, unsigned control)
{
    size_t size = len + 1;
    unsigned flags = 0;
    if (control & 0x04) flags |= HEARTH_TOKENIZE_ADD_SPECIAL;
    if (control & 0x08) flags |= HEARTH_TOKENIZE_PARSE_SPECIAL;
    unsigned decode = (control & 0x10) ? HEARTH_DECODE_SPECIAL : 0;
    size_t n = 0, cap = len + 8;
    hearth_token *ids = malloc(cap * sizeof *ids);
    if (!ids) abort();
    hearth_status st = hearth_tokenize(v, text, len, flags, ids, cap, &n);
    if (st == HEARTH_E_RANGE) {
        free(ids);
        cap = n;
        ids = malloc(cap * sizeof *ids);
        if (!ids) abort();
        st = hearth_tokenize(v, text, len, flags, ids, cap, &n);
    }
    if (st != HEARTH_OK) fail("tokenize failed", size);
    int32_t n_vocab = hearth_vocab_n_tokens(v);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= n_vocab) fail("id out of the vocabulary", size);

    size_t back_len;
    st = hearth_detokenize(v, ids, n, decode, NULL, 0, &back_len);
    if (st != HEARTH_OK && st != HEARTH_E_RANGE) fail("detokenize failed", size);
    char *back = malloc(back_len + 1);
    if (!back) abort();
    if (hearth_detokenize(v, ids, n, decode, back, back_len, &back_len) != HEARTH_OK)
        fail("detokenize failed", size);
    /* Plain text comes back as it was: byte-level BPE spells every byte,
     * and the shared SentencePiece vocabulary has every byte token -- but
     * writes U+2581 as a space. */
    bool shared = false;
    for (size_t i = 0; i < N_VOCABS; i++) shared |= vocabs[i] && v == vocabs[i];
    bool spm = hearth_vocab_get_kind(v) == HEARTH_VOCAB_SPM;
    /* WordPiece's normalisation loses case, accents and whitespace */
    shared &= hearth_vocab_get_kind(v) != HEARTH_VOCAB_WPM;
    bool plain = !(flags & HEARTH_TOKENIZE_PARSE_SPECIAL) && !(flags & HEARTH_TOKENIZE_ADD_SPECIAL);
    bool has_spm_space = false;
    for (size_t i = 0; i + 3 <= len && !has_spm_space; i++)
        has_spm_space = memcmp(text + i, "\xE2\x96\x81", 3) == 0;
    /* RWKV World matches control tokens ("<s>") in plain text too, and
     * they are hidden when decoded */
    bool rwkv_control = false;
    for (size_t i = 0; i < n && hearth_vocab_get_kind(v) == HEARTH_VOCAB_RWKV; i++)
        rwkv_control |= hearth_vocab_token_type(v, ids[i]) == HEARTH_TOKEN_CONTROL;
    if (shared && plain && !(spm && has_spm_space) && !rwkv_control &&
        (back_len != len || memcmp(back, text, len) != 0))
        fail("plain text does not decode to itself", size);
    free(back);

    /* A stop string taken from the text, so that it does occur. */
    char stop[8];
    const char *stop_ptr = NULL;
    size_t stop_len = HEARTH_MIN(len / 3, (size_t)(1 + control % 5));
    if (stop_len > 0) {
        memcpy(stop, text + len / 2, stop_len);
        stop[stop_len] = '\0';
        if (strlen(stop) == stop_len && utf8_is_valid(stop, stop_len)) stop_ptr = stop;
    }
    stream(v, ids, n, text, len, stop_ptr, decode);
    stream(v, NULL, 0, text, len, stop_ptr, decode);
    free(ids);
}

/*
 * tokenize-cases.c -- the token ids of every case of a file in the shared
 * tokenizer-tests.inp layout (each case followed by a line
 * "__ggml_vocab_test__"), one line of space-separated ids per case, as
 * the shared .out files hold them: no BOS (with --add-special, the
 * tokens the vocabulary adds around a text: BOS, EOS, WordPiece's [CLS]
 * and [SEP]), and special-token text parsed only with --special.  The
 * vocabulary is loaded once for all cases (tests/tokenizer-o200k.sh
 * compares the lines with a reference tokenizer's).  Each case's ids must
 * decode to the case's bytes again, but for WordPiece, whose
 * normalisation loses case, accents and whitespace.
 *
 * With --words NAME, no vocabulary: the words the pre-tokenizer NAME (a
 * tokenizer.ggml.pre value) cuts each case into, one line per case of
 * the words' lengths in bytes (tests/tokenizer-kimi.sh compares them
 * with an independent reading of the pre-tokenizer's expression).  The
 * words must cover the case, in order.
 *
 *     tokenize-cases [--special] [--add-special] VOCAB.gguf CASES
 *     tokenize-cases --words NAME CASES
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hearth.h"
#include "tokenizer.h"

#define SEPARATOR "\n__ggml_vocab_test__\n"

static int die(const char *what)
{
    fprintf(stderr, "tokenize-cases: %s: %s\n", what, hearth_last_error());
    return 1;
}

/* The whole file, NUL-terminated; NULL when it cannot be read. */
static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (size >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)size + 1)) != NULL) {
        if (fread(buf, 1, (size_t)size, f) == (size_t)size) {
            buf[size] = '\0';
        } else {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

/* One case's ids, and the check that they decode to its text. */
static int print_ids(const hearth_vocab *v, const char *text, size_t len, unsigned tok_flags,
                     unsigned dec_flags, size_t case_no)
{
    hearth_token *ids;
    size_t n;
    if (hearth_tokenize_alloc(v, text, len, tok_flags, &ids, &n) != HEARTH_OK) return die("tokenize");
    for (size_t i = 0; i < n; i++) printf("%s%ld", i ? " " : "", (long)ids[i]);
    putchar('\n');
    int rc = 0;
    char *back = NULL;
    size_t back_len = 0;
    if (hearth_detokenize_alloc(v, ids, n, dec_flags, &back, &back_len) != HEARTH_OK) {
        rc = die("detokenize");
    } else if (hearth_vocab_get_kind(v) != HEARTH_VOCAB_WPM && !(tok_flags & HEARTH_TOKENIZE_ADD_SPECIAL) &&
               (back_len != len || memcmp(back, text, len) != 0)) {
        fprintf(stderr, "tokenize-cases: case %zu does not decode to its text: '%s'\n", case_no, back);
        rc = 1;
    }
    hearth_free(back);
    hearth_free(ids);
    return rc;
}

/* The words of one case so far: where the next one must start. */
struct words {
    const char *text;
    size_t at;
    bool in_order;
};

static hearth_status print_word(const char *word, size_t len, void *ctx)
{
    struct words *w = ctx;
    if (word != w->text + w->at) w->in_order = false;
    printf("%s%zu", w->at ? " " : "", len);
    w->at = (size_t)(word - w->text) + len;
    return HEARTH_OK;
}

/* One case's words, and the check that they cover it in order. */
static int print_words(const struct pretok *p, tok_scratch *scratch, const char *text, size_t len,
                       size_t case_no)
{
    struct words w = {text, 0, true};
    if (pretok_split(p, text, len, scratch, print_word, &w) != HEARTH_OK) return die("pre-tokenize");
    putchar('\n');
    if (!w.in_order || w.at != len) {
        fprintf(stderr, "tokenize-cases: the words of case %zu do not cover it in order\n", case_no);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    unsigned tok_flags = 0, dec_flags = 0;
    const char *pretok_name = NULL;
    while (argc >= 4 && (strcmp(argv[1], "--special") == 0 || strcmp(argv[1], "--add-special") == 0)) {
        if (argv[1][2] == 's') {
            tok_flags |= HEARTH_TOKENIZE_PARSE_SPECIAL;
            dec_flags |= HEARTH_DECODE_SPECIAL;
        } else {
            tok_flags |= HEARTH_TOKENIZE_ADD_SPECIAL;
        }
        argv++;
        argc--;
    }
    if (argc == 4 && strcmp(argv[1], "--words") == 0) {
        pretok_name = argv[2];
        argv++;
        argc--;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: tokenize-cases [--special] [--add-special] VOCAB.gguf CASES\n"
                        "       tokenize-cases --words NAME CASES\n");
        return 2;
    }
    hearth_vocab *v = NULL;
    hearth_vocab words_only = {0};
    if (pretok_name) {
        if (pretok_load(&words_only, pretok_name, false) != HEARTH_OK) return die(pretok_name);
    } else {
        hearth_gguf *g;
        if (hearth_gguf_open(argv[1], &g) != HEARTH_OK) return die("open");
        hearth_status st = hearth_vocab_load(g, NULL, &v);
        hearth_gguf_close(g);
        if (st != HEARTH_OK) return die(argv[1]);
    }
    char *cases = read_file(argv[2]);
    if (!cases) {
        fprintf(stderr, "tokenize-cases: cannot read %s\n", argv[2]);
        hearth_vocab_free(v);
        pretok_free(words_only.pretok);
        return 1;
    }

    int rc = 0;
    size_t n_cases = 0;
    tok_scratch scratch = {0};
    for (char *p = cases, *sep; rc == 0 && (sep = strstr(p, SEPARATOR)) != NULL;
         p = sep + strlen(SEPARATOR)) {
        size_t len = (size_t)(sep - p);
        n_cases++;
        rc = pretok_name ? print_words(words_only.pretok, &scratch, p, len, n_cases)
                         : print_ids(v, p, len, tok_flags, dec_flags, n_cases);
    }
    tok_scratch_free(&scratch);
    free(cases);
    hearth_vocab_free(v);
    pretok_free(words_only.pretok);
    if (fflush(stdout) != 0) rc = 1;
    return rc;
}

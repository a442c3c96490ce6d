/*
 * tokenize-cases.c -- the token ids of every case of a file in the shared
 * tokenizer-tests.inp layout (each case followed by a line
 * "__ggml_vocab_test__"), one line of space-separated ids per case, as
 * the shared .out files hold them: no BOS, and special-token text parsed
 * only with --special.  The vocabulary is loaded once for all cases
 * (tests/tokenizer-o200k.sh compares the lines with a reference
 * tokenizer's).  Each case's ids must decode to the case's bytes again.
 *
 *     tokenize-cases [--special] VOCAB.gguf CASES
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hearth.h"

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

int main(int argc, char **argv)
{
    unsigned tok_flags = 0, dec_flags = 0;
    if (argc == 4 && strcmp(argv[1], "--special") == 0) {
        tok_flags = HEARTH_TOKENIZE_PARSE_SPECIAL;
        dec_flags = HEARTH_DECODE_SPECIAL;
        argv++;
        argc--;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: tokenize-cases [--special] VOCAB.gguf CASES\n");
        return 2;
    }
    hearth_gguf *g;
    if (hearth_gguf_open(argv[1], &g) != HEARTH_OK) return die("open");
    hearth_vocab *v;
    hearth_status st = hearth_vocab_load(g, NULL, &v);
    hearth_gguf_close(g);
    if (st != HEARTH_OK) return die(argv[1]);
    char *cases = read_file(argv[2]);
    if (!cases) {
        fprintf(stderr, "tokenize-cases: cannot read %s\n", argv[2]);
        hearth_vocab_free(v);
        return 1;
    }

    int rc = 0;
    size_t n_cases = 0;
    for (char *p = cases, *sep; rc == 0 && (sep = strstr(p, SEPARATOR)) != NULL;
         p = sep + strlen(SEPARATOR), n_cases++) {
        size_t len = (size_t)(sep - p);
        hearth_token *ids;
        size_t n;
        if (hearth_tokenize_alloc(v, p, len, tok_flags, &ids, &n) != HEARTH_OK) {
            rc = die("tokenize");
            break;
        }
        for (size_t i = 0; i < n; i++) printf("%s%ld", i ? " " : "", (long)ids[i]);
        putchar('\n');
        char *text = NULL;
        size_t text_len = 0;
        if (hearth_detokenize_alloc(v, ids, n, dec_flags, &text, &text_len) != HEARTH_OK) {
            rc = die("detokenize");
        } else if (text_len != len || memcmp(text, p, len) != 0) {
            fprintf(stderr, "tokenize-cases: case %zu does not decode to its text: '%s'\n", n_cases + 1,
                    text);
            rc = 1;
        }
        hearth_free(text);
        hearth_free(ids);
    }
    free(cases);
    hearth_vocab_free(v);
    if (fflush(stdout) != 0) rc = 1;
    return rc;
}

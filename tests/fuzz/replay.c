/*
 * replay.c -- runs a fuzz target's LLVMFuzzerTestOneInput over the files
 * named on the command line, without libFuzzer.  make check uses it to
 * replay the seed inputs and every crash reproducer kept in the tree, in
 * ordinary and sanitizer builds.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        size_t cap = 1 << 20, len = 0;
        uint8_t *buf = malloc(cap);
        size_t n;
        while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
            len += n;
            if (len == cap) {
                uint8_t *bigger = realloc(buf, cap *= 2);
                if (!bigger) {
                    free(buf);
                    buf = NULL;
                }
                buf = bigger;
            }
        }
        fclose(f);
        if (!buf) {
            fprintf(stderr, "%s: out of memory\n", argv[i]);
            return 1;
        }
        /* An exact-size copy, so ASan catches reads one past the end. */
        uint8_t *exact = malloc(len ? len : 1);
        if (!exact) return 1;
        memcpy(exact, buf, len);
        free(buf);
        LLVMFuzzerTestOneInput(exact, len);
        free(exact);
        printf("replayed %s (%zu bytes)\n", argv[i], len);
    }
    return 0;
}

/*
 * gguf-edit.c -- a copy of a GGUF file with metadata or tensors left out
 * or a number changed, for the tests that check how a loader refuses a
 * broken file (tests/cli-glm4moe.sh).
 *
 *     gguf-edit IN OUT [--drop-key KEY] [--set-u32 KEY VALUE]
 *                      [--drop-tensor NAME] [--drop-tensors PREFIX] ...
 *
 * --set-u32 changes a key's value, or adds the key; --drop-tensors leaves
 * out every tensor whose name starts with PREFIX.  The other entries and
 * tensors are copied as they are, in their order.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hearth.h"

enum edit_kind { DROP_KEY, SET_U32, DROP_TENSOR, DROP_TENSORS };

struct edit {
    enum edit_kind kind;
    const char *name;
    uint32_t value;
};

static int usage(void)
{
    fputs("usage: gguf-edit IN OUT [--drop-key KEY] [--set-u32 KEY VALUE] [--drop-tensor NAME]\n"
          "                 [--drop-tensors PREFIX] ...\n", stderr);
    return 2;
}

/* Whether an edit of the kind names name (DROP_TENSORS: by its start). */
static bool edited(const struct edit *edits, int n, enum edit_kind kind, const char *name)
{
    for (int i = 0; i < n; i++) {
        const struct edit *e = &edits[i];
        if (e->kind == kind &&
            (kind == DROP_TENSORS ? strncmp(e->name, name, strlen(e->name)) : strcmp(e->name, name)) == 0)
            return true;
    }
    return false;
}

int main(int argc, char **argv)
{
    if (argc < 3) return usage();
    struct edit *edits = calloc((size_t)argc, sizeof *edits);
    int n = 0;
    if (!edits) return 1;
    for (int i = 3; i < argc; i++) {
        const char *opt = argv[i];
        if (strcmp(opt, "--set-u32") == 0 && i + 2 < argc) {
            edits[n++] = (struct edit){SET_U32, argv[i + 1], (uint32_t)strtoul(argv[i + 2], NULL, 10)};
            i += 2;
        } else if (i + 1 < argc && strcmp(opt, "--drop-key") == 0) {
            edits[n++] = (struct edit){DROP_KEY, argv[++i], 0};
        } else if (i + 1 < argc && strcmp(opt, "--drop-tensor") == 0) {
            edits[n++] = (struct edit){DROP_TENSOR, argv[++i], 0};
        } else if (i + 1 < argc && strcmp(opt, "--drop-tensors") == 0) {
            edits[n++] = (struct edit){DROP_TENSORS, argv[++i], 0};
        } else {
            free(edits);
            return usage();
        }
    }
    hearth_gguf *in;
    hearth_gguf_writer *w;
    if (hearth_gguf_open(argv[1], &in) != HEARTH_OK || hearth_gguf_writer_new(&w) != HEARTH_OK) {
        fprintf(stderr, "gguf-edit: %s\n", hearth_last_error());
        return 1;
    }
    hearth_status st = hearth_gguf_writer_set_alignment(w, hearth_gguf_alignment(in));
    for (int64_t i = 0; !st && i < hearth_gguf_n_kv(in); i++) {
        const char *key = hearth_gguf_kv_key(in, i);
        /* a value set is written below */
        if (!edited(edits, n, DROP_KEY, key) && !edited(edits, n, SET_U32, key))
            st = hearth_gguf_writer_copy_kv(w, in, i);
    }
    for (int i = 0; !st && i < n; i++)
        if (edits[i].kind == SET_U32) st = hearth_gguf_writer_set_u32(w, edits[i].name, edits[i].value);
    for (int64_t i = 0; !st && i < hearth_gguf_n_tensors(in); i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(in, i);
        if (edited(edits, n, DROP_TENSOR, t->name) || edited(edits, n, DROP_TENSORS, t->name)) continue;
        st = hearth_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->bytes);
    }
    if (!st) st = hearth_gguf_writer_write(w, argv[2]);
    if (st) fprintf(stderr, "gguf-edit: %s\n", hearth_last_error());
    hearth_gguf_writer_free(w);
    hearth_gguf_close(in);
    free(edits);
    return st ? 1 : 0;
}

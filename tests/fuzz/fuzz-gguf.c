/*
 * fuzz-gguf.c -- fuzz target for the GGUF reader: any byte string is opened
 * as a file; when it is accepted, every metadata value, array element and
 * tensor is visited, so that a reader that validated too little shows up as
 * an out-of-bounds read under ASan.
 */
#include "internal.h"

#include <stddef.h>
#include <stdint.h>

static volatile uint8_t sink;

static void visit(const hearth_gguf *g, const hearth_gguf_value *v)
{
    if (v->type == HEARTH_GGUF_STRING) {
        for (uint64_t k = 0; k < v->v.str.len; k++) sink ^= (uint8_t)v->v.str.ptr[k];
    } else if (v->type == HEARTH_GGUF_ARRAY) {
        for (uint64_t j = 0; j < v->v.arr.n; j++) {
            hearth_gguf_value e;
            if (hearth_gguf_array_get(g, v, j, &e) == HEARTH_OK) visit(g, &e);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hearth_gguf *g;
    if (hearth_gguf_open_memory(data, size, "fuzz.gguf", &g) != HEARTH_OK) return 0;
    for (int64_t i = 0; i < hearth_gguf_n_kv(g); i++) {
        hearth_gguf_value v;
        if (hearth_gguf_kv_value(g, i, &v) == HEARTH_OK) visit(g, &v);
        (void)hearth_gguf_find_key(g, hearth_gguf_kv_key(g, i));
    }
    for (int64_t i = 0; i < hearth_gguf_n_tensors(g); i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(g, i);
        const uint8_t *d = t->data;
        if (t->bytes) sink ^= d[0] ^ d[t->bytes - 1];
        (void)hearth_gguf_find_tensor(g, t->name);
    }
    hearth_gguf_close(g);
    return 0;
}

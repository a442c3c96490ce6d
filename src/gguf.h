/*
 * gguf.h -- internal interface between the GGUF reader and writer.
 */
#ifndef HEARTH_GGUF_H
#define HEARTH_GGUF_H

#include "internal.h"

/* The encoded bytes of metadata entry index as they appear in the file
 * (the value only, without key and type), so the writer can copy any value,
 * nested arrays included, verbatim. */
const void *gguf_kv_raw(const hearth_gguf *gguf, int64_t index, size_t *bytes);

#endif /* HEARTH_GGUF_H */

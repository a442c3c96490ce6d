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

/* Produce the data of tensor index (in the order tensors were added) into
 * buf, which holds exactly the bytes its type and shape need. */
typedef hearth_status (*gguf_tensor_fill_fn)(void *user, size_t index, void *buf, size_t bytes);

/* Write the file like hearth_gguf_writer_write(), except that each tensor
 * added with data NULL is produced by fill just before it is written.  A
 * status other than HEARTH_OK from fill stops the write (no file is left
 * behind) and is returned. */
hearth_status gguf_writer_write_streaming(hearth_gguf_writer *w, const char *path,
                                          gguf_tensor_fill_fn fill, void *user);

#endif /* HEARTH_GGUF_H */

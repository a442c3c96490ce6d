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

/* Write the model as a split model of parts of at most max_tensors tensors
 * each (the last may have fewer), named PREFIX-00001-of-0000N.gguf and so
 * on, with the keys split.no, split.count and split.tensors.count in each:
 * all other metadata in the first part.  Tensors added with data NULL are
 * produced by fill (NULL when every tensor has data) as in
 * gguf_writer_write_streaming().  *n_parts: N. */
hearth_status gguf_writer_write_split(hearth_gguf_writer *w, const char *prefix, size_t max_tensors,
                                      gguf_tensor_fill_fn fill, void *user, uint32_t *n_parts);

/* The names of a split model's parts, as the common tooling's gguf-split
 * gives them: PREFIX-00001-of-00003.gguf (the part from 1, five digits).
 * Whether path is such a name, with the length of its prefix, the part
 * number and the count; and the malloc'ed name of part no of count
 * (NULL, with the error recorded, when out of memory). */
bool gguf_split_name_parse(const char *path, size_t *prefix_len, uint32_t *no, uint32_t *count);
char *gguf_split_name(const char *prefix, size_t prefix_len, uint32_t no, uint32_t count);

/* Give back the memory pages of bytes at data, inside the mapping of one
 * of the files of gguf, to the file: the pages the range touches are
 * dropped from this process (madvise MADV_DONTNEED) and read again from
 * the file if anything touches them later.  Nothing changes for data in
 * a copy read into memory (returns false there, true where the pages
 * were given back). */
bool gguf_release_pages(const hearth_gguf *gguf, const void *data, size_t bytes);

#endif /* HEARTH_GGUF_H */

/*
 * download.h -- internal interface of the model downloader: the parts that
 * need no network (names, cache paths, response headers, choosing a file),
 * in download_names.c, so that they can be tested on their own.
 */
#ifndef HEARTH_DOWNLOAD_H
#define HEARTH_DOWNLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"
#include "sha256.h"

#define DOWNLOAD_DEFAULT_HF_ENDPOINT "https://huggingface.co"

/* "OWNER/REPO[:FILE]", checked: OWNER and REPO are 1 to 96 letters,
 * digits, '.', '_' or '-' starting with a letter or digit; FILE is a
 * relative path of such names (up to 255 bytes each, '+' allowed too, none
 * starting with '.') and does not end in ".part". */
typedef struct hf_spec {
    char *owner;
    char *repo;
    char *file;        /* NULL when the spec names no file */
} hf_spec;

hearth_status hf_spec_parse(const char *spec, hf_spec *out);
void hf_spec_free(hf_spec *spec);

/* Check a FILE part on its own (the rules above). */
hearth_status download_check_file_path(const char *file);

/* An http:// or https:// URL without spaces or control characters. */
hearth_status download_check_url(const char *url);

/* The hub's base URL: configured, else $HEARTH_HF_ENDPOINT, else the
 * default; checked, trailing slashes removed. */
hearth_status download_endpoint(const char *configured, char **out);

/* {endpoint}/{owner}/{repo}/resolve/main/{file} and
 * {endpoint}/api/models/{owner}/{repo}. */
hearth_status download_hf_file_url(const char *endpoint, const hf_spec *spec, char **out);
hearth_status download_hf_api_url(const char *endpoint, const hf_spec *spec, char **out);

/* The cache directory: configured, else $XDG_CACHE_HOME/hearth (when set
 * to an absolute path), else $HOME/.cache/hearth. */
hearth_status download_cache_dir(const char *configured, char **out);

/* Where a repository file or a URL is kept in the cache. */
hearth_status download_hf_cache_path(const char *cache, const hf_spec *spec, char **out);
hearth_status download_url_cache_path(const char *cache, const char *url, char **out);

/* Where a response header says the SHA-256 of the whole file is. */
typedef enum digest_source {
    DIGEST_NONE = 0,
    DIGEST_ETAG,         /* ETag of 64 hex digits (trusted for the hub only) */
    DIGEST_REPR,         /* Repr-Digest or Digest with a sha-256 member */
    DIGEST_LINKED_ETAG   /* X-Linked-ETag: the hub's digest of an LFS file */
} digest_source;

/* Parse one header line "Name: value" (CR LF optional).  Returns where a
 * usable SHA-256 came from and fills digest, or DIGEST_NONE. */
digest_source download_header_digest(const char *line, size_t len,
                                      uint8_t digest[SHA256_DIGEST_BYTES]);

/* If line is header name (case-insensitive), point *value at its value
 * with surrounding blanks and CR LF removed; *value_len its length. */
bool download_header_value(const char *line, size_t len, const char *name,
                           const char **value, size_t *value_len);

/* Content-Range: "bytes FIRST-LAST/TOTAL" or "bytes * /TOTAL" (written
 * without the space); TOTAL "*" gives UINT64_MAX.  For the second form
 * *first is UINT64_MAX. */
bool download_parse_content_range(const char *value, size_t len, uint64_t *first,
                                  uint64_t *last, uint64_t *total);

/* The file to fetch from a repository listing: the one GGUF file whose name
 * has Q4_K_M, else the only GGUF file (the parts of a split model count as
 * one file, named by the first part).  Otherwise HEARTH_E_NOT_FOUND (no
 * GGUF file) or HEARTH_E_INVALID listing the candidates; label names the
 * repository in messages. */
hearth_status download_choose_gguf(const char *label, const char *const *files, size_t n,
                                   const char **chosen);

#endif /* HEARTH_DOWNLOAD_H */

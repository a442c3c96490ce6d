/*
 * download.c -- fetching model files into the cache with libcurl: one
 * transfer writes PLACE.part (resuming it with a Range request), hashes
 * what it writes, checks the digest the server announced and renames the
 * file into place.  The contract is in the downloads section of hearth.h.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#ifdef HAVE_CURL
#include <curl/curl.h>
#include <pthread.h>
#endif

#include "download.h"
#include "gguf.h"
#include "json.h"
#include "value.h"

#define DEFAULT_CONNECT_TIMEOUT_S 30
#define DEFAULT_STALL_TIMEOUT_S 60
#define MAX_REDIRECTS 10

void hearth_download_options_default(hearth_download_options *opts)
{
    memset(opts, 0, sizeof *opts);
}

bool hearth_download_supported(void)
{
#ifdef HAVE_CURL
    return true;
#else
    return false;
#endif
}

hearth_status hearth_cache_dir(const hearth_download_options *opts, char **dir_out)
{
    if (!dir_out) return hearth_error(HEARTH_E_INVALID, "hearth_cache_dir: dir_out is NULL");
    return download_cache_dir(opts ? opts->cache_dir : NULL, dir_out);
}

#ifndef HAVE_CURL

static hearth_status no_curl(void)
{
    return hearth_error(HEARTH_E_UNSUPPORTED,
                        "this hearth was built without libcurl and cannot download; fetch the "
                        "file with another tool and pass its path with -m");
}

hearth_status hearth_download_hf(const char *spec, const hearth_download_options *opts,
                                 char **path_out)
{
    (void)spec;
    (void)opts;
    if (path_out) *path_out = NULL;
    return no_curl();
}

hearth_status hearth_download_url(const char *url, const hearth_download_options *opts,
                                  char **path_out)
{
    (void)url;
    (void)opts;
    if (path_out) *path_out = NULL;
    return no_curl();
}

#else /* HAVE_CURL */

/* Create every missing directory above path (mkdir -p of its dirname). */
static hearth_status make_parent_dirs(const char *path)
{
    char *copy = hearth_strdup(path, "a directory path");
    if (!copy) return HEARTH_E_NOMEM;
    for (char *p = copy + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(copy, 0777) != 0 && errno != EEXIST) {
            hearth_status st = hearth_error(HEARTH_E_IO, "cannot create directory %s: %s", copy,
                                            strerror(errno));
            free(copy);
            return st;
        }
        *p = '/';
    }
    free(copy);
    return HEARTH_OK;
}

static bool is_regular_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static void curl_init_once(void)
{
    curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* One HTTP GET and what its responses said. */
struct transfer {
    const char *url;
    const hearth_download_options *opts;
    bool trust_etag;            /* an ETag of 64 hex digits is a SHA-256 */

    /* the current response of the redirect chain */
    long status;
    bool have_range;
    uint64_t range_first, range_total;
    bool have_length;
    uint64_t content_length;
    uint8_t repr_digest[SHA256_DIGEST_BYTES];
    bool have_repr_digest;

    /* across the chain: what the hub said */
    uint8_t linked_digest[SHA256_DIGEST_BYTES], etag_digest[SHA256_DIGEST_BYTES];
    bool have_linked_digest, have_etag_digest;

    /* the body */
    int fd;                     /* the .part file */
    uint64_t offset;            /* bytes already there when the body began */
    uint64_t received;
    uint64_t total;             /* expected size of the whole file, 0 unknown */
    sha256_ctx hash;
    bool body_started;
    bool stop_wrong_status;     /* the body is an error page: not kept */
    bool stop_bad_range;
    bool cancelled;
    int write_errno;
};

static hearth_status write_all(int fd, const void *data, size_t len, int *err)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            *err = errno;
            return HEARTH_E_IO;
        }
        p += n;
        len -= (size_t)n;
    }
    return HEARTH_OK;
}

static size_t on_header(char *line, size_t size, size_t nitems, void *user)
{
    struct transfer *t = user;
    size_t len = size * nitems;
    if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) {
        /* a new response: only the hub-wide digests carry over.  The
         * line is not NUL-terminated: read the code within len. */
        const char *sp = memchr(line, ' ', len);
        long status = 0;
        for (size_t i = sp ? (size_t)(sp - line) + 1 : len; i < len && status < 1000; i++) {
            if (line[i] < '0' || line[i] > '9') break;
            status = status * 10 + (line[i] - '0');
        }
        t->status = status;
        t->have_range = t->have_length = t->have_repr_digest = false;
        return len;
    }
    const char *v;
    size_t n;
    uint8_t digest[SHA256_DIGEST_BYTES];
    switch (download_header_digest(line, len, digest)) {
    case DIGEST_LINKED_ETAG:
        if (!t->have_linked_digest) memcpy(t->linked_digest, digest, sizeof digest);
        t->have_linked_digest = true;
        return len;
    case DIGEST_ETAG:
        if (!t->have_etag_digest) memcpy(t->etag_digest, digest, sizeof digest);
        t->have_etag_digest = true;
        return len;
    case DIGEST_REPR:
        memcpy(t->repr_digest, digest, sizeof digest);
        t->have_repr_digest = true;
        return len;
    case DIGEST_NONE:
        break;
    }
    if (download_header_value(line, len, "Content-Range", &v, &n)) {
        uint64_t first, last, total;
        if (download_parse_content_range(v, n, &first, &last, &total)) {
            t->have_range = true;
            t->range_first = first;
            t->range_total = total;
        }
    } else if (download_header_value(line, len, "Content-Length", &v, &n)) {
        const char *p = v;
        uint64_t x = 0;
        size_t digits = 0;
        while (digits < n && digits < 19 && p[digits] >= '0' && p[digits] <= '9')
            x = x * 10 + (uint64_t)(p[digits++] - '0');
        if (digits == n && n > 0) {
            t->have_length = true;
            t->content_length = x;
        }
    }
    return len;
}

/* The first bytes of the body decide what becomes of the .part file. */
static bool begin_body(struct transfer *t)
{
    t->body_started = true;
    if (t->status != 200 && t->status != 206) {
        t->stop_wrong_status = true;
        return false;
    }
    if (t->status == 206) {
        if (!t->have_range || t->range_first != t->offset) {
            t->stop_bad_range = true;
            return false;
        }
        if (t->range_total != UINT64_MAX) t->total = t->range_total;
    } else {
        /* 200: the whole file, whatever was asked; what the .part held is
         * replaced rather than appended to. */
        if (t->offset > 0) {
            if (ftruncate(t->fd, 0) != 0 || lseek(t->fd, 0, SEEK_SET) != 0) {
                t->write_errno = errno;
                return false;
            }
            t->offset = 0;
            sha256_init(&t->hash);
        }
        t->total = t->have_length ? t->content_length : 0;
    }
    return true;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *user)
{
    struct transfer *t = user;
    size_t len = size * nmemb;
    if (!t->body_started && !begin_body(t)) return 0;
    if (write_all(t->fd, data, len, &t->write_errno) != HEARTH_OK) return 0;
    sha256_update(&t->hash, data, len);
    t->received += len;
    return len;
}

static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    struct transfer *t = user;
    if (!t->opts->progress) return 0;
    if (!t->opts->progress(t->opts->progress_user, t->offset + t->received, t->total)) {
        t->cancelled = true;
        return 1;
    }
    return 0;
}

static const char *status_meaning(long status)
{
    switch (status) {
    case 401:
    case 403: return "access denied: a private or gated repository?";
    case 404: return "not found";
    case 410: return "gone";
    case 416: return "range not satisfiable";
    case 429: return "too many requests; try again later";
    }
    if (status >= 500) return "server error";
    return "unexpected status";
}

static hearth_status http_status_error(const struct transfer *t)
{
    return hearth_error(t->status == 404 ? HEARTH_E_NOT_FOUND : HEARTH_E_NETWORK,
                        "%s: HTTP %ld (%s)", t->url, t->status, status_meaning(t->status));
}

/* Run one GET of t->url (from t->offset when resuming). */
static hearth_status perform(struct transfer *t)
{
    if (pthread_once(&curl_once, curl_init_once) != 0 || curl_init_result != CURLE_OK)
        return hearth_error(HEARTH_E_NETWORK, "cannot initialise libcurl");
    CURL *curl = curl_easy_init();
    if (!curl) return hearth_error(HEARTH_E_NOMEM, "cannot create a libcurl handle");
    char errbuf[CURL_ERROR_SIZE] = "";
    char range[32];
    const hearth_download_options *o = t->opts;
    long connect_s = o->connect_timeout_s > 0 ? o->connect_timeout_s : DEFAULT_CONNECT_TIMEOUT_S;
    long stall_s = o->stall_timeout_s > 0 ? o->stall_timeout_s : DEFAULT_STALL_TIMEOUT_S;

    curl_easy_setopt(curl, CURLOPT_URL, t->url);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, (long)MAX_REDIRECTS);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "hearth/" PACKAGE_VERSION);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, connect_s);
    /* a stall: under one byte a second for stall_s seconds */
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, stall_s);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, t);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, t);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    if (t->offset > 0) {
        snprintf(range, sizeof range, "%llu-", (unsigned long long)t->offset);
        curl_easy_setopt(curl, CURLOPT_RANGE, range);
    }

    CURLcode rc = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(curl);
    if (status) t->status = status;

    if (t->cancelled) return hearth_error(HEARTH_E_INTERRUPTED, "%s: download cancelled", t->url);
    if (t->write_errno)
        return hearth_error(HEARTH_E_IO, "%s: cannot store the download: %s", t->url,
                            strerror(t->write_errno));
    if (t->stop_bad_range)
        return hearth_error(HEARTH_E_NETWORK,
                            "%s: the server answered a request for the bytes from %llu with "
                            "another range",
                            t->url, (unsigned long long)t->offset);
    if (rc == CURLE_OK || t->stop_wrong_status) {
        if (t->status == 200 || t->status == 206) return HEARTH_OK;
        if (t->status == 416 && t->offset > 0) return HEARTH_OK;   /* the caller decides */
        return http_status_error(t);
    }
    if (rc == CURLE_OPERATION_TIMEDOUT) {
        if (t->body_started)
            return hearth_error(HEARTH_E_NETWORK,
                                "%s: timed out: no data arrived for %ld seconds; run again to "
                                "resume",
                                t->url, stall_s);
        return hearth_error(HEARTH_E_NETWORK, "%s: timed out: %s", t->url,
                            errbuf[0] ? errbuf : "no answer");
    }
    return hearth_error(HEARTH_E_NETWORK, "%s: %s", t->url, errbuf[0] ? errbuf : curl_easy_strerror(rc));
}

/* Hash what the .part file already holds, for the digest of the whole. */
static hearth_status hash_existing(int fd, const char *part, uint64_t size, sha256_ctx *hash)
{
    char buf[1 << 16];
    uint64_t done = 0;
    if (lseek(fd, 0, SEEK_SET) != 0)
        return hearth_error(HEARTH_E_IO, "%s: cannot seek: %s", part, strerror(errno));
    while (done < size) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            return hearth_error(HEARTH_E_IO, "%s: cannot read: %s", part,
                                n < 0 ? strerror(errno) : "unexpected end of file");
        sha256_update(hash, buf, (size_t)n);
        done += (uint64_t)n;
    }
    return HEARTH_OK;
}

/* The digest the responses announced, most trusted first. */
static const uint8_t *announced_digest(const struct transfer *t)
{
    if (t->have_linked_digest) return t->linked_digest;
    if (t->have_repr_digest) return t->repr_digest;
    if (t->trust_etag && t->have_etag_digest) return t->etag_digest;
    return NULL;
}

static void discard(const char *part, int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
    unlink(part);
}

/* Download url to path through path.part; the heart of the module. */
static hearth_status fetch_to_file(const char *url, const char *path, bool trust_etag,
                                   const hearth_download_options *opts)
{
    hearth_status st = make_parent_dirs(path);
    if (st) return st;
    size_t path_len = strlen(path);
    char *part = hearth_malloc(path_len + 6, "a partial download path");
    if (!part) return HEARTH_E_NOMEM;
    memcpy(part, path, path_len);
    memcpy(part + path_len, ".part", 6);

    int fd = open(part, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        st = hearth_error(HEARTH_E_IO, "cannot create %s: %s", part, strerror(errno));
        free(part);
        return st;
    }
    /* Two processes filling one .part file would interleave their bytes. */
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_SETLK, &lock) != 0) {
        st = hearth_error(HEARTH_E_IO, "%s: %s", part,
                          errno == EACCES || errno == EAGAIN
                              ? "another process is downloading this file"
                              : strerror(errno));
        close(fd);
        free(part);
        return st;
    }

    bool resumed_once = false;
    for (;;) {
        struct stat sb;
        if (fstat(fd, &sb) != 0) {
            st = hearth_error(HEARTH_E_IO, "%s: %s", part, strerror(errno));
            break;
        }
        struct transfer t = {.url = url, .opts = opts, .trust_etag = trust_etag, .fd = fd,
                             .offset = (uint64_t)sb.st_size};
        sha256_init(&t.hash);
        if (t.offset > 0 && (st = hash_existing(fd, part, t.offset, &t.hash))) break;
        if (lseek(fd, 0, SEEK_END) < 0) {
            st = hearth_error(HEARTH_E_IO, "%s: cannot seek: %s", part, strerror(errno));
            break;
        }
        st = perform(&t);
        if (st) {
            /* What a refused range or a missing file left is not worth
             * resuming; what a network failure, a server error or a
             * cancel left is. */
            bool client_error = t.status >= 400 && t.status < 500 && t.status != 408 &&
                                t.status != 429;
            if (t.stop_bad_range || client_error || t.offset + t.received == 0)
                discard(part, &fd);
            break;
        }
        if (t.status == 416) {
            /* Range not satisfiable: the .part is complete when its size is
             * the size the server gives; otherwise start again, once. */
            if (t.have_range && t.range_total == t.offset) {
                t.total = t.offset;
            } else if (!resumed_once) {
                resumed_once = true;
                if (ftruncate(fd, 0) != 0) {
                    st = hearth_error(HEARTH_E_IO, "%s: %s", part, strerror(errno));
                    break;
                }
                continue;
            } else {
                st = http_status_error(&t);
                discard(part, &fd);
                break;
            }
        }
        uint64_t size = t.offset + t.received;
        if (t.total > 0 && size > t.total) {
            st = hearth_error(HEARTH_E_NETWORK,
                              "%s: the server sent %llu bytes of a file it said has %llu; the "
                              "download was discarded",
                              url, (unsigned long long)size, (unsigned long long)t.total);
            discard(part, &fd);
            break;
        }
        if (t.total > 0 && size != t.total) {
            st = hearth_error(HEARTH_E_NETWORK,
                              "%s: the connection ended after %llu of %llu bytes; run again to "
                              "resume",
                              url, (unsigned long long)size, (unsigned long long)t.total);
            break;
        }
        const uint8_t *want = announced_digest(&t);
        if (want) {
            uint8_t got[SHA256_DIGEST_BYTES];
            char want_hex[SHA256_HEX_BYTES], got_hex[SHA256_HEX_BYTES];
            sha256_final(&t.hash, got);
            if (memcmp(got, want, sizeof got) != 0) {
                sha256_hex(want, want_hex);
                sha256_hex(got, got_hex);
                st = hearth_error(HEARTH_E_NETWORK,
                                  "%s: SHA-256 mismatch: the server announced %s, the %llu bytes "
                                  "received hash to %s; the download was discarded",
                                  url, want_hex, (unsigned long long)size, got_hex);
                discard(part, &fd);
                break;
            }
        }
        /* A .gguf that does not start with the GGUF magic is an error page
         * or a wrong URL; do not cache it as a model. */
        if (path_len >= 5 && strcasecmp(path + path_len - 5, ".gguf") == 0) {
            char magic[4] = {0};
            if (pread(fd, magic, 4, 0) != 4 || memcmp(magic, "GGUF", 4) != 0) {
                st = hearth_error(HEARTH_E_FORMAT,
                                  "%s: the %llu bytes received are not a GGUF file (no GGUF magic "
                                  "at offset 0); the download was discarded",
                                  url, (unsigned long long)size);
                discard(part, &fd);
                break;
            }
        }
        if (fsync(fd) != 0) {
            st = hearth_error(HEARTH_E_IO, "%s: %s", part, strerror(errno));
            break;
        }
        if (rename(part, path) != 0) {
            st = hearth_error(HEARTH_E_IO, "cannot rename %s to %s: %s", part, path,
                              strerror(errno));
            break;
        }
        st = HEARTH_OK;
        break;
    }
    if (fd >= 0) close(fd);
    free(part);
    return st;
}

/* The repository listing is a small JSON document; anything larger is
 * not one. */
#define MAX_LISTING_BYTES (16u << 20)

/* GET url into memory (NUL-terminated), without progress reports. */
static hearth_status fetch_to_memory(const char *url, const hearth_download_options *opts,
                                     char **text, size_t *len)
{
    hearth_download_options quiet = *opts;
    quiet.progress = NULL;
    FILE *f = tmpfile();
    if (!f) return hearth_error(HEARTH_E_IO, "cannot create a temporary file: %s", strerror(errno));
    struct transfer t = {.url = url, .opts = &quiet, .fd = fileno(f)};
    sha256_init(&t.hash);
    hearth_status st = perform(&t);
    if (!st && t.received > MAX_LISTING_BYTES)
        st = hearth_error(HEARTH_E_FORMAT, "%s: the listing is %llu bytes, more than a listing "
                          "can be", url, (unsigned long long)t.received);
    char *buf = NULL;
    if (!st && !(buf = hearth_malloc(t.received + 1, "a repository listing"))) st = HEARTH_E_NOMEM;
    if (!st && pread(t.fd, buf, t.received, 0) != (ssize_t)t.received)
        st = hearth_error(HEARTH_E_IO, "cannot read back the listing of %s", url);
    fclose(f);
    if (st) {
        free(buf);
        return st;
    }
    buf[t.received] = '\0';
    *text = buf;
    *len = t.received;
    return HEARTH_OK;
}

/* The file names in a hub listing: {"siblings": [{"rfilename": NAME}...]}.
 * The strings stay owned by root. */
static hearth_status listing_files(const char *url, value root, const char ***files, size_t *n)
{
    value *siblings = root.kind == VALUE_DICT ? value_dict_get(root, "siblings", 8) : NULL;
    if (!siblings || siblings->kind != VALUE_LIST)
        return hearth_error(HEARTH_E_FORMAT, "%s: the listing has no \"siblings\" array", url);
    size_t count = value_list_len(*siblings);
    const char **names = hearth_malloc((count + 1) * sizeof *names, "a file list");
    if (!names) return HEARTH_E_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < count; i++) {
        value entry = value_list_at(*siblings, i);
        value *name = entry.kind == VALUE_DICT ? value_dict_get(entry, "rfilename", 9) : NULL;
        if (name && name->kind == VALUE_STRING && strlen(name->u.s->data) == name->u.s->len)
            names[k++] = name->u.s->data;
    }
    *files = names;
    *n = k;
    return HEARTH_OK;
}

/* When the spec names no file, ask the hub for the repository's files and
 * take the one download_choose_gguf() picks (the Q4_K_M GGUF, or the only
 * GGUF).  The name comes from the network: it is checked like a name the
 * user typed before it becomes a cache path. */
static hearth_status choose_repository_file(const char *endpoint, hf_spec *spec,
                                            const hearth_download_options *opts)
{
    char *url = NULL, *text = NULL, *label = NULL;
    const char **files = NULL;
    size_t len = 0, n = 0;
    value root = value_null();
    hearth_status st = download_hf_api_url(endpoint, spec, &url);
    if (st) return st;
    size_t label_len = strlen(spec->owner) + strlen(spec->repo) + 2;
    if (!(label = hearth_malloc(label_len, "a repository name"))) {
        st = HEARTH_E_NOMEM;
        goto done;
    }
    snprintf(label, label_len, "%s/%s", spec->owner, spec->repo);
    if ((st = fetch_to_memory(url, opts, &text, &len))) goto done;
    if ((st = json_parse(text, len, url, &root))) goto done;
    if ((st = listing_files(url, root, &files, &n))) goto done;
    const char *chosen;
    if ((st = download_choose_gguf(label, files, n, &chosen))) goto done;
    if ((st = download_check_file_path(chosen))) {
        char why[256];
        snprintf(why, sizeof why, "%s", hearth_last_error());
        st = hearth_error(HEARTH_E_FORMAT,
                          "%s: the listing names the file '%s', which is not a safe name: %s",
                          url, chosen, why);
        goto done;
    }
    if (!(spec->file = hearth_strdup(chosen, "a file name"))) st = HEARTH_E_NOMEM;
done:
    free(files);
    value_unref(root);
    free(text);
    free(label);
    free(url);
    return st;
}

/* Fetch spec's file into the cache unless it is there; part (from 1) of
 * n_parts of a split model, 0 of 0 for a file that is not split. */
static hearth_status fetch_hf_file(const char *endpoint, const char *cache, const hf_spec *spec,
                                   const hearth_download_options *opts, uint32_t part, uint32_t n_parts,
                                   char **path_out)
{
    char *url = NULL, *path = NULL;
    hearth_status st = download_hf_cache_path(cache, spec, &path);
    if (!st && !is_regular_file(path)) {
        if (n_parts > 0 && opts->part) opts->part(opts->progress_user, spec->file, (int)part, (int)n_parts);
        st = download_hf_file_url(endpoint, spec, &url);
        if (!st) st = fetch_to_file(url, path, true, opts);
    }
    free(url);
    if (st) {
        free(path);
        return st;
    }
    *path_out = path;
    return HEARTH_OK;
}

/* Fetch a split model's parts (NAME-00001-of-0000N.gguf, ...), spec
 * naming any of them; *path_out: the first part's local path. */
static hearth_status fetch_hf_parts(const char *endpoint, const char *cache, hf_spec *spec,
                                    const hearth_download_options *opts, size_t prefix_len, uint32_t count,
                                    char **path_out)
{
    char *const named = spec->file;
    hearth_status st = HEARTH_OK;
    for (uint32_t k = 1; k <= count && !st; k++) {
        char *path = NULL;
        spec->file = gguf_split_name(named, prefix_len, k, count);
        if (!spec->file) st = HEARTH_E_NOMEM;
        if (!st) st = fetch_hf_file(endpoint, cache, spec, opts, k, count, &path);
        free(spec->file);
        if (!st && k == 1) *path_out = path;
        else free(path);
    }
    spec->file = named;
    if (st) {
        free(*path_out);
        *path_out = NULL;
    }
    return st;
}

hearth_status hearth_download_hf(const char *spec_text, const hearth_download_options *opts,
                                 char **path_out)
{
    hearth_download_options defaults;
    hf_spec spec;
    char *endpoint = NULL, *cache = NULL;
    if (!path_out) return hearth_error(HEARTH_E_INVALID, "hearth_download_hf: path_out is NULL");
    *path_out = NULL;
    if (!opts) {
        hearth_download_options_default(&defaults);
        opts = &defaults;
    }
    hearth_status st = hf_spec_parse(spec_text, &spec);
    if (st) return st;
    if ((st = download_endpoint(opts->hf_endpoint, &endpoint))) goto done;
    if (!spec.file && (st = choose_repository_file(endpoint, &spec, opts))) goto done;
    if ((st = download_cache_dir(opts->cache_dir, &cache))) goto done;
    size_t prefix_len;
    uint32_t no, count;
    if (gguf_split_name_parse(spec.file, &prefix_len, &no, &count) && count > 1)
        st = fetch_hf_parts(endpoint, cache, &spec, opts, prefix_len, count, path_out);
    else
        st = fetch_hf_file(endpoint, cache, &spec, opts, 0, 0, path_out);
done:
    hf_spec_free(&spec);
    free(endpoint);
    free(cache);
    return st;
}

hearth_status hearth_download_url(const char *url, const hearth_download_options *opts,
                                  char **path_out)
{
    hearth_download_options defaults;
    char *cache = NULL, *path = NULL;
    if (!path_out) return hearth_error(HEARTH_E_INVALID, "hearth_download_url: path_out is NULL");
    *path_out = NULL;
    if (!opts) {
        hearth_download_options_default(&defaults);
        opts = &defaults;
    }
    hearth_status st = download_check_url(url);
    if (st) return st;
    if ((st = download_cache_dir(opts->cache_dir, &cache))) goto done;
    if ((st = download_url_cache_path(cache, url, &path))) goto done;
    if (!is_regular_file(path) && (st = fetch_to_file(url, path, false, opts))) goto done;
    *path_out = path;
    path = NULL;
done:
    free(cache);
    free(path);
    return st;
}

#endif /* HAVE_CURL */

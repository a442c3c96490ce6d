/*
 * download_names.c -- everything about a download that needs no network:
 * checking repository specs and URLs (nothing may lead outside the
 * cache), building URLs and cache paths, reading the digest and range
 * headers of a response, choosing a GGUF file from a repository listing.
 */
#include "internal.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "download.h"
#include "gguf.h"

#define NAME_MAX_BYTES 96       /* owner and repository names on the hub */
#define COMPONENT_MAX_BYTES 255 /* one file name */
#define FILE_PATH_MAX_BYTES 1024
#define URL_MAX_BYTES 8192

/* malloc'ed printf; NULL after recording HEARTH_E_NOMEM. */
static char *format(const char *fmt, ...) HEARTH_PRINTF(1, 2);

static char *format(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        hearth_error(HEARTH_E_INTERNAL, "cannot format '%s'", fmt);
        return NULL;
    }
    char *s = hearth_malloc((size_t)n + 1, "a download path");
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

static bool is_name_char(char c, bool allow_plus)
{
    return isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-' || (allow_plus && c == '+');
}

static bool ends_with(const char *s, size_t len, const char *suffix)
{
    size_t n = strlen(suffix);
    return len >= n && strncasecmp(s + len - n, suffix, n) == 0;
}

/* ------------------------------------------------------------------------
 * Repository specs
 * ------------------------------------------------------------------------ */

static hearth_status check_hub_name(const char *spec, const char *what, const char *name,
                                    size_t len)
{
    if (len == 0)
        return hearth_error(HEARTH_E_INVALID, "'%s': the %s name is empty (expected OWNER/REPO[:FILE])",
                            spec, what);
    if (len > NAME_MAX_BYTES)
        return hearth_error(HEARTH_E_INVALID, "'%s': the %s name is longer than %d characters",
                            spec, what, NAME_MAX_BYTES);
    if (!isalnum((unsigned char)name[0]))
        return hearth_error(HEARTH_E_INVALID,
                            "'%s': the %s name '%.*s' must start with a letter or a digit", spec,
                            what, (int)len, name);
    for (size_t i = 0; i < len; i++) {
        if (!is_name_char(name[i], false))
            return hearth_error(HEARTH_E_INVALID,
                                "'%s': the %s name '%.*s' may only contain letters, digits, "
                                "'.', '_' and '-'",
                                spec, what, (int)len, name);
    }
    return HEARTH_OK;
}

hearth_status download_check_file_path(const char *file)
{
    size_t len = strlen(file);
    if (len == 0) return hearth_error(HEARTH_E_INVALID, "the file name is empty");
    if (len > FILE_PATH_MAX_BYTES)
        return hearth_error(HEARTH_E_INVALID, "the file name is longer than %d bytes",
                            FILE_PATH_MAX_BYTES);
    if (ends_with(file, len, ".part"))
        return hearth_error(HEARTH_E_INVALID,
                            "file '%s': names ending in .part are reserved for partial downloads",
                            file);
    const char *p = file;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 0)
            return hearth_error(HEARTH_E_INVALID,
                                "file '%s': empty path component (leading, trailing or double '/')",
                                file);
        if (p[0] == '.')
            return hearth_error(HEARTH_E_INVALID,
                                "file '%s': path component '%.*s' starts with '.'", file, (int)n, p);
        if (n > COMPONENT_MAX_BYTES)
            return hearth_error(HEARTH_E_INVALID, "file '%s': a path component is longer than %d bytes",
                                file, COMPONENT_MAX_BYTES);
        for (size_t i = 0; i < n; i++) {
            if (!is_name_char(p[i], true))
                return hearth_error(HEARTH_E_INVALID,
                                    "file '%s': character '%c' is not allowed (letters, digits, "
                                    "'.', '_', '-', '+' and '/' are)",
                                    file, isprint((unsigned char)p[i]) ? p[i] : '?');
        }
        if (!slash) break;
        p = slash + 1;
    }
    return HEARTH_OK;
}

void hf_spec_free(hf_spec *spec)
{
    if (!spec) return;
    free(spec->owner);
    free(spec->repo);
    free(spec->file);
    memset(spec, 0, sizeof *spec);
}

hearth_status hf_spec_parse(const char *spec, hf_spec *out)
{
    hearth_status st;
    memset(out, 0, sizeof *out);
    if (!spec) return hearth_error(HEARTH_E_INVALID, "no repository given (expected OWNER/REPO[:FILE])");
    const char *slash = strchr(spec, '/');
    const char *colon = strchr(spec, ':');
    if (!slash || (colon && colon < slash))
        return hearth_error(HEARTH_E_INVALID, "'%s': expected OWNER/REPO[:FILE]", spec);
    const char *repo = slash + 1;
    size_t repo_len = colon ? (size_t)(colon - repo) : strlen(repo);
    if ((st = check_hub_name(spec, "owner", spec, (size_t)(slash - spec)))) return st;
    if (memchr(repo, '/', repo_len))
        return hearth_error(HEARTH_E_INVALID,
                            "'%s': expected OWNER/REPO[:FILE], with a ':' before the file name",
                            spec);
    if ((st = check_hub_name(spec, "repository", repo, repo_len))) return st;
    if (colon) {
        if ((st = download_check_file_path(colon + 1))) {
            hearth_error_prefix("'%s'", spec);
            return st;
        }
    }
    out->owner = hearth_strndup(spec, (size_t)(slash - spec), "a repository owner");
    out->repo = hearth_strndup(repo, repo_len, "a repository name");
    out->file = colon ? hearth_strdup(colon + 1, "a file name") : NULL;
    if (!out->owner || !out->repo || (colon && !out->file)) {
        hf_spec_free(out);
        return HEARTH_E_NOMEM;
    }
    return HEARTH_OK;
}

/* ------------------------------------------------------------------------
 * URLs
 * ------------------------------------------------------------------------ */

/* Length of the scheme prefix ("http://" or "https://"), or 0. */
static size_t http_scheme_len(const char *url)
{
    if (strncasecmp(url, "http://", 7) == 0) return 7;
    if (strncasecmp(url, "https://", 8) == 0) return 8;
    return 0;
}

hearth_status download_check_url(const char *url)
{
    if (!url || !*url) return hearth_error(HEARTH_E_INVALID, "the URL is empty");
    size_t len = strlen(url);
    if (len > URL_MAX_BYTES)
        return hearth_error(HEARTH_E_INVALID, "the URL is longer than %d bytes", URL_MAX_BYTES);
    size_t scheme = http_scheme_len(url);
    if (scheme == 0)
        return hearth_error(HEARTH_E_INVALID, "'%s': only http:// and https:// URLs can be downloaded",
                            url);
    if (url[scheme] == '\0' || url[scheme] == '/')
        return hearth_error(HEARTH_E_INVALID, "'%s': the URL names no host", url);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)url[i];
        if (c <= ' ' || c == 0x7f)
            return hearth_error(HEARTH_E_INVALID,
                                "'%s': the URL contains a space or a control character at byte %zu",
                                url, i);
    }
    return HEARTH_OK;
}

hearth_status download_endpoint(const char *configured, char **out)
{
    hearth_status st;
    const char *endpoint = configured;
    const char *origin = "the hub endpoint";
    if (!endpoint || !*endpoint) {
        endpoint = getenv("HEARTH_HF_ENDPOINT");
        origin = "HEARTH_HF_ENDPOINT";
    }
    if (!endpoint || !*endpoint) {
        endpoint = DOWNLOAD_DEFAULT_HF_ENDPOINT;
        origin = "the default hub endpoint";
    }
    if ((st = download_check_url(endpoint))) {
        hearth_error_prefix("%s", origin);
        return st;
    }
    if (strchr(endpoint, '?') || strchr(endpoint, '#'))
        return hearth_error(HEARTH_E_INVALID, "%s '%s': a query or fragment is not allowed", origin,
                            endpoint);
    size_t len = strlen(endpoint);
    while (len > 0 && endpoint[len - 1] == '/') len--;
    *out = hearth_strndup(endpoint, len, "the hub endpoint");
    return *out ? HEARTH_OK : HEARTH_E_NOMEM;
}

hearth_status download_hf_file_url(const char *endpoint, const hf_spec *spec, char **out)
{
    *out = format("%s/%s/%s/resolve/main/%s", endpoint, spec->owner, spec->repo, spec->file);
    return *out ? HEARTH_OK : HEARTH_E_NOMEM;
}

hearth_status download_hf_api_url(const char *endpoint, const hf_spec *spec, char **out)
{
    *out = format("%s/api/models/%s/%s", endpoint, spec->owner, spec->repo);
    return *out ? HEARTH_OK : HEARTH_E_NOMEM;
}

/* ------------------------------------------------------------------------
 * Cache paths
 * ------------------------------------------------------------------------ */

hearth_status download_cache_dir(const char *configured, char **out)
{
    if (configured && *configured) {
        *out = hearth_strdup(configured, "the cache directory");
    } else {
        /* XDG Base Directory Specification: a relative XDG_CACHE_HOME is
         * invalid and ignored. */
        const char *xdg = getenv("XDG_CACHE_HOME");
        const char *home = getenv("HOME");
        if (xdg && xdg[0] == '/') {
            *out = format("%s/hearth", xdg);
        } else if (home && *home) {
            *out = format("%s/.cache/hearth", home);
        } else {
            return hearth_error(HEARTH_E_INVALID,
                                "cannot tell where the download cache is: neither XDG_CACHE_HOME "
                                "nor HOME is set");
        }
    }
    return *out ? HEARTH_OK : HEARTH_E_NOMEM;
}

hearth_status download_hf_cache_path(const char *cache, const hf_spec *spec, char **out)
{
    *out = format("%s/hf/%s/%s/%s", cache, spec->owner, spec->repo, spec->file);
    return *out ? HEARTH_OK : HEARTH_E_NOMEM;
}

hearth_status download_url_cache_path(const char *cache, const char *url, char **out)
{
    /* The name is the last path segment, without query or fragment, with
     * anything but letters, digits, '.', '_', '-' and '+' replaced, so it
     * is always one plain file name. */
    size_t scheme = http_scheme_len(url);
    size_t end = scheme + strcspn(url + scheme, "?#");
    size_t start = end;
    while (start > scheme && url[start - 1] != '/') start--;
    if (start == scheme) start = end;           /* only a host: no name */
    char name[COMPONENT_MAX_BYTES - 16];
    size_t n = 0;
    for (size_t i = start; i < end && n + 1 < sizeof name; i++)
        name[n++] = is_name_char(url[i], true) ? url[i] : '_';
    name[n] = '\0';
    if (n == 0) snprintf(name, sizeof name, "download");
    if (name[0] == '.') name[0] = '_';
    if (ends_with(name, strlen(name), ".part") && strlen(name) + 1 < sizeof name)
        strcat(name, "_");

    uint8_t digest[SHA256_DIGEST_BYTES];
    char hex[SHA256_HEX_BYTES];
    sha256(url, strlen(url), digest);
    sha256_hex(digest, hex);
    *out = format("%s/url/%.16s/%s", cache, hex, name);
    return *out ? HEARTH_OK : HEARTH_E_NOMEM;
}

/* ------------------------------------------------------------------------
 * Response headers
 * ------------------------------------------------------------------------ */

bool download_header_value(const char *line, size_t len, const char *name, const char **value,
                           size_t *value_len)
{
    size_t n = strlen(name);
    if (len <= n || line[n] != ':' || strncasecmp(line, name, n) != 0) return false;
    const char *v = line + n + 1;
    const char *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *value = v;
    *value_len = (size_t)(end - v);
    return true;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* An entity tag holding exactly 64 hex digits ("...", W/"..." or bare). */
static bool parse_hex_etag(const char *v, size_t len, uint8_t digest[SHA256_DIGEST_BYTES])
{
    if (len >= 2 && (v[0] == 'W' || v[0] == 'w') && v[1] == '/') {
        v += 2;
        len -= 2;
    }
    if (len >= 2 && v[0] == '"' && v[len - 1] == '"') {
        v++;
        len -= 2;
    }
    if (len != 2 * SHA256_DIGEST_BYTES) return false;
    for (size_t i = 0; i < SHA256_DIGEST_BYTES; i++) {
        int hi = hex_value(v[2 * i]), lo = hex_value(v[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        digest[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

static int base64_value(char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Standard base64 (RFC 4648 section 4) of exactly 32 bytes, padding
 * optional. */
static bool parse_base64_digest(const char *v, size_t len, uint8_t digest[SHA256_DIGEST_BYTES])
{
    while (len > 0 && v[len - 1] == '=') len--;
    if (len != 43) return false;        /* ceil(32 * 8 / 6) symbols */
    uint32_t acc = 0;
    int bits = 0;
    size_t out = 0;
    for (size_t i = 0; i < len; i++) {
        int x = base64_value(v[i]);
        if (x < 0) return false;
        acc = acc << 6 | (uint32_t)x;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            digest[out++] = (uint8_t)(acc >> bits);
        }
    }
    return out == SHA256_DIGEST_BYTES && (acc & ((1u << bits) - 1)) == 0;
}

/* The sha-256 member of a Repr-Digest (RFC 9530: sha-256=:BASE64:) or
 * Digest (RFC 3230: SHA-256=BASE64) list. */
static bool parse_digest_list(const char *v, size_t len, uint8_t digest[SHA256_DIGEST_BYTES])
{
    const char *end = v + len;
    while (v < end) {
        const char *comma = memchr(v, ',', (size_t)(end - v));
        const char *item_end = comma ? comma : end;
        while (v < item_end && (*v == ' ' || *v == '\t')) v++;
        const char *eq = memchr(v, '=', (size_t)(item_end - v));
        if (eq && eq - v == 7 && strncasecmp(v, "sha-256", 7) == 0) {
            const char *val = eq + 1;
            const char *val_end = item_end;
            while (val_end > val && (val_end[-1] == ' ' || val_end[-1] == '\t')) val_end--;
            /* structured-field parameters (";...") are not part of it */
            const char *semi = memchr(val, ';', (size_t)(val_end - val));
            if (semi) val_end = semi;
            if (val_end - val >= 2 && val[0] == ':' && val_end[-1] == ':') {
                val++;
                val_end--;
            }
            return parse_base64_digest(val, (size_t)(val_end - val), digest);
        }
        v = comma ? comma + 1 : end;
    }
    return false;
}

digest_source download_header_digest(const char *line, size_t len,
                                      uint8_t digest[SHA256_DIGEST_BYTES])
{
    const char *v;
    size_t n;
    if (download_header_value(line, len, "X-Linked-ETag", &v, &n))
        return parse_hex_etag(v, n, digest) ? DIGEST_LINKED_ETAG : DIGEST_NONE;
    if (download_header_value(line, len, "ETag", &v, &n))
        return parse_hex_etag(v, n, digest) ? DIGEST_ETAG : DIGEST_NONE;
    if (download_header_value(line, len, "Repr-Digest", &v, &n) ||
        download_header_value(line, len, "Digest", &v, &n))
        return parse_digest_list(v, n, digest) ? DIGEST_REPR : DIGEST_NONE;
    return DIGEST_NONE;
}

/* A decimal number of at most 19 digits from *p, which is advanced. */
static bool parse_u64(const char **p, const char *end, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    int digits = 0;
    while (s < end && *s >= '0' && *s <= '9' && digits < 19) {
        v = v * 10 + (uint64_t)(*s - '0');
        s++;
        digits++;
    }
    if (digits == 0 || (s < end && *s >= '0' && *s <= '9')) return false;
    *p = s;
    *out = v;
    return true;
}

bool download_parse_content_range(const char *value, size_t len, uint64_t *first,
                                  uint64_t *last, uint64_t *total)
{
    const char *p = value, *end = value + len;
    if (len < 6 || strncasecmp(p, "bytes ", 6) != 0) return false;
    p += 6;
    while (p < end && *p == ' ') p++;
    if (p < end && *p == '*') {
        *first = *last = UINT64_MAX;
        p++;
    } else {
        if (!parse_u64(&p, end, first) || p >= end || *p++ != '-' || !parse_u64(&p, end, last) ||
            *last < *first)
            return false;
    }
    if (p >= end || *p++ != '/') return false;
    if (p < end && *p == '*' && p + 1 == end) {
        if (*first == UINT64_MAX) return false;     /* "*" and "*" says nothing */
        *total = UINT64_MAX;
        return true;
    }
    if (!parse_u64(&p, end, total) || p != end) return false;
    return *first == UINT64_MAX || *last < *total;
}

/* ------------------------------------------------------------------------
 * Choosing a file
 * ------------------------------------------------------------------------ */

static bool contains_nocase(const char *s, const char *needle)
{
    size_t n = strlen(needle);
    for (; *s; s++)
        if (strncasecmp(s, needle, n) == 0) return true;
    return false;
}

/* A GGUF file of a listing that could be the model: a split model counts
 * once, as its first part (which brings the others). */
static bool is_candidate(const char *file)
{
    size_t prefix_len;
    uint32_t no, count;
    if (!ends_with(file, strlen(file), ".gguf")) return false;
    return !gguf_split_name_parse(file, &prefix_len, &no, &count) || no == 1;
}

static hearth_status list_candidates(const char *label, const char *why,
                                     const char *const *files, size_t n, const char *needle)
{
    char list[768];
    size_t used = 0, shown = 0, total = 0;
    list[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (!is_candidate(files[i]) || (needle && !contains_nocase(files[i], needle))) continue;
        total++;
        int w = snprintf(list + used, sizeof list - used, "%s%s", shown ? ", " : "", files[i]);
        if (w > 0 && used + (size_t)w < sizeof list - 32) {
            used += (size_t)w;
            shown++;
        } else {
            list[used] = '\0';
        }
    }
    if (shown < total) snprintf(list + used, sizeof list - used, " and %zu more", total - shown);
    return hearth_error(HEARTH_E_INVALID, "%s %s; name one as %s:FILE: %s", label, why, label, list);
}

hearth_status download_choose_gguf(const char *label, const char *const *files, size_t n,
                                   const char **chosen)
{
    size_t n_gguf = 0, n_q4km = 0;
    const char *gguf = NULL, *q4km = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!is_candidate(files[i])) continue;
        n_gguf++;
        gguf = files[i];
        if (contains_nocase(files[i], "Q4_K_M")) {
            n_q4km++;
            q4km = files[i];
        }
    }
    if (n_gguf == 0) return hearth_error(HEARTH_E_NOT_FOUND, "%s has no GGUF file", label);
    if (n_q4km == 1) {
        *chosen = q4km;
        return HEARTH_OK;
    }
    if (n_q4km > 1)
        return list_candidates(label, "has several Q4_K_M GGUF files", files, n, "Q4_K_M");
    if (n_gguf == 1) {
        *chosen = gguf;
        return HEARTH_OK;
    }
    return list_candidates(label, "has several GGUF files and none is Q4_K_M", files, n, NULL);
}

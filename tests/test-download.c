/*
 * test-download.c -- the parts of the downloader that need no network:
 * repository specs and the names that must never lead outside the cache,
 * URLs, cache paths, digest and range headers, choosing a GGUF file.
 * The transfers themselves are tested end to end by tests/cli-pull.sh.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "download.h"
#include <stdio.h>

#include "testutil.h"

/* sha256("abc") in hex and base64, from FIPS 180-4's example */
#define ABC_HEX "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define ABC_B64 "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="
static const uint8_t abc_digest[32] = {
    0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
    0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad,
};

static void expect_spec(const char *text, const char *owner, const char *repo, const char *file)
{
    hf_spec spec;
    hearth_status st = hf_spec_parse(text, &spec);
    ck_assert_msg(st == HEARTH_OK, "'%s': %s", text, hearth_last_error());
    ck_assert_str_eq(spec.owner, owner);
    ck_assert_str_eq(spec.repo, repo);
    if (file) ck_assert_str_eq(spec.file, file);
    else ck_assert_ptr_null(spec.file);
    hf_spec_free(&spec);
}

static void expect_bad_spec(const char *text, const char *needle)
{
    hf_spec spec;
    hearth_status st = hf_spec_parse(text, &spec);
    ck_assert_msg(st == HEARTH_E_INVALID, "'%s' was accepted", text);
    ck_assert_msg(strstr(hearth_last_error(), needle), "'%s': message '%s' lacks '%s'", text,
                  hearth_last_error(), needle);
    ck_assert_ptr_null(spec.owner);
}

START_TEST(test_specs)
{
    expect_spec("owner/repo:model.gguf", "owner", "repo", "model.gguf");
    expect_spec("Qwen/Qwen2.5-0.5B-Instruct-GGUF:qwen2.5-0.5b-instruct-q4_k_m.gguf", "Qwen",
                "Qwen2.5-0.5B-Instruct-GGUF", "qwen2.5-0.5b-instruct-q4_k_m.gguf");
    expect_spec("a/b", "a", "b", NULL);
    expect_spec("a/b:Q4_K_M/model-00001-of-00002.gguf", "a", "b",
                "Q4_K_M/model-00001-of-00002.gguf");
    expect_spec("a_1/b.c-d:x+y.gguf", "a_1", "b.c-d", "x+y.gguf");
}
END_TEST

START_TEST(test_spec_traversal)
{
    /* nothing may climb out of CACHE/hf/OWNER/REPO or hide in it */
    expect_bad_spec("../x:y.gguf", "owner name '..'");
    expect_bad_spec("a/..:y.gguf", "repository name '..'");
    expect_bad_spec("a/.git:y.gguf", "repository name '.git'");
    expect_bad_spec("a/b:../y.gguf", "'..' starts with '.'");
    expect_bad_spec("a/b:dir/../../y.gguf", "'..' starts with '.'");
    expect_bad_spec("a/b:./y.gguf", "'.' starts with '.'");
    expect_bad_spec("a/b:.hidden.gguf", "starts with '.'");
    expect_bad_spec("a/b:/etc/passwd", "empty path component");
    expect_bad_spec("a/b:x//y.gguf", "empty path component");
    expect_bad_spec("a/b:dir/", "empty path component");
    expect_bad_spec("a/b:x\\..\\y.gguf", "'\\' is not allowed");
    expect_bad_spec("a/b:x y.gguf", "' ' is not allowed");
    expect_bad_spec("a/b:x\ny.gguf", "'?' is not allowed");
    expect_bad_spec("a/b:x.gguf.part", "reserved for partial downloads");
    expect_bad_spec("a/b:", "file name is empty");
    expect_bad_spec("a/b/c:x.gguf", "with a ':' before the file name");
    expect_bad_spec("a:b/c", "expected OWNER/REPO[:FILE]");
    expect_bad_spec("abc", "expected OWNER/REPO[:FILE]");
    expect_bad_spec("", "expected OWNER/REPO[:FILE]");
    expect_bad_spec("/b:x.gguf", "owner name is empty");
    expect_bad_spec("a/:x.gguf", "repository name is empty");
    expect_bad_spec("a b/c:x.gguf", "may only contain");
    expect_bad_spec("-a/c:x.gguf", "must start with a letter or a digit");
    char long_name[200];
    memset(long_name, 'x', 97);
    strcpy(long_name + 97, "/r:f.gguf");
    expect_bad_spec(long_name, "longer than 96");
    char long_file[300] = "a/b:";
    memset(long_file + 4, 'f', 256);
    long_file[260] = '\0';
    expect_bad_spec(long_file, "longer than 255");
    ck_assert_int_eq(download_check_file_path("ok/fine.gguf"), HEARTH_OK);
}
END_TEST

START_TEST(test_urls)
{
    ck_assert_int_eq(download_check_url("https://huggingface.co/a/b/resolve/main/c.gguf"), HEARTH_OK);
    ck_assert_int_eq(download_check_url("HTTP://127.0.0.1:8080/x"), HEARTH_OK);
    ck_assert_int_eq(download_check_url("file:///etc/passwd"), HEARTH_E_INVALID);
    ck_assert_msg(strstr(hearth_last_error(), "only http:// and https://"), "%s", hearth_last_error());
    ck_assert_int_eq(download_check_url("ftp://host/x"), HEARTH_E_INVALID);
    ck_assert_int_eq(download_check_url("http://"), HEARTH_E_INVALID);
    ck_assert_int_eq(download_check_url("http:///x"), HEARTH_E_INVALID);
    ck_assert_int_eq(download_check_url("http://h/a b"), HEARTH_E_INVALID);
    ck_assert_msg(strstr(hearth_last_error(), "byte 10"), "%s", hearth_last_error());
    ck_assert_int_eq(download_check_url("http://h/a\r\nX: y"), HEARTH_E_INVALID);
    ck_assert_int_eq(download_check_url(""), HEARTH_E_INVALID);

    char *endpoint;
    unsetenv("HEARTH_HF_ENDPOINT");
    ck_assert_int_eq(download_endpoint(NULL, &endpoint), HEARTH_OK);
    ck_assert_str_eq(endpoint, "https://huggingface.co");
    free(endpoint);
    setenv("HEARTH_HF_ENDPOINT", "http://127.0.0.1:8080/mirror//", 1);
    ck_assert_int_eq(download_endpoint(NULL, &endpoint), HEARTH_OK);
    ck_assert_str_eq(endpoint, "http://127.0.0.1:8080/mirror");
    hf_spec spec;
    ck_assert_int_eq(hf_spec_parse("o/r:d/f.gguf", &spec), HEARTH_OK);
    char *url;
    ck_assert_int_eq(download_hf_file_url(endpoint, &spec, &url), HEARTH_OK);
    ck_assert_str_eq(url, "http://127.0.0.1:8080/mirror/o/r/resolve/main/d/f.gguf");
    free(url);
    ck_assert_int_eq(download_hf_api_url(endpoint, &spec, &url), HEARTH_OK);
    ck_assert_str_eq(url, "http://127.0.0.1:8080/mirror/api/models/o/r");
    free(url);
    hf_spec_free(&spec);
    free(endpoint);
    /* the option wins over the environment */
    ck_assert_int_eq(download_endpoint("https://hub.example/", &endpoint), HEARTH_OK);
    ck_assert_str_eq(endpoint, "https://hub.example");
    free(endpoint);
    setenv("HEARTH_HF_ENDPOINT", "ftp://mirror", 1);
    ck_assert_int_eq(download_endpoint(NULL, &endpoint), HEARTH_E_INVALID);
    ck_assert_msg(strstr(hearth_last_error(), "HEARTH_HF_ENDPOINT"), "%s", hearth_last_error());
    setenv("HEARTH_HF_ENDPOINT", "http://mirror/?x=1", 1);
    ck_assert_int_eq(download_endpoint(NULL, &endpoint), HEARTH_E_INVALID);
    setenv("HEARTH_HF_ENDPOINT", "", 1);
    ck_assert_int_eq(download_endpoint(NULL, &endpoint), HEARTH_OK);
    ck_assert_str_eq(endpoint, "https://huggingface.co");
    free(endpoint);
    unsetenv("HEARTH_HF_ENDPOINT");
}
END_TEST

START_TEST(test_cache_paths)
{
    char *dir;
    setenv("XDG_CACHE_HOME", "/var/cache/u", 1);
    setenv("HOME", "/home/u", 1);
    ck_assert_int_eq(download_cache_dir(NULL, &dir), HEARTH_OK);
    ck_assert_str_eq(dir, "/var/cache/u/hearth");
    free(dir);
    ck_assert_int_eq(hearth_cache_dir(NULL, &dir), HEARTH_OK);
    ck_assert_str_eq(dir, "/var/cache/u/hearth");
    free(dir);
    /* a relative XDG_CACHE_HOME is invalid and ignored (XDG base directories) */
    setenv("XDG_CACHE_HOME", "relative/cache", 1);
    ck_assert_int_eq(download_cache_dir(NULL, &dir), HEARTH_OK);
    ck_assert_str_eq(dir, "/home/u/.cache/hearth");
    free(dir);
    unsetenv("XDG_CACHE_HOME");
    ck_assert_int_eq(download_cache_dir(NULL, &dir), HEARTH_OK);
    ck_assert_str_eq(dir, "/home/u/.cache/hearth");
    free(dir);
    ck_assert_int_eq(download_cache_dir("/srv/models", &dir), HEARTH_OK);
    ck_assert_str_eq(dir, "/srv/models");
    free(dir);
    hearth_download_options opts;
    hearth_download_options_default(&opts);
    opts.cache_dir = "/opt/c";
    ck_assert_int_eq(hearth_cache_dir(&opts, &dir), HEARTH_OK);
    ck_assert_str_eq(dir, "/opt/c");
    free(dir);
    unsetenv("HOME");
    ck_assert_int_eq(download_cache_dir(NULL, &dir), HEARTH_E_INVALID);
    ck_assert_msg(strstr(hearth_last_error(), "XDG_CACHE_HOME"), "%s", hearth_last_error());

    hf_spec spec;
    char *path;
    ck_assert_int_eq(hf_spec_parse("owner/repo:q4/model.gguf", &spec), HEARTH_OK);
    ck_assert_int_eq(download_hf_cache_path("/c/hearth", &spec, &path), HEARTH_OK);
    ck_assert_str_eq(path, "/c/hearth/hf/owner/repo/q4/model.gguf");
    free(path);
    hf_spec_free(&spec);

    /* URL files: CACHE/url/<first 16 hex digits of the URL's SHA-256>/NAME,
     * digests computed independently */
    static const struct { const char *url, *want; } urls[] = {
        {"https://example.com/models/x.gguf?download=true", "/c/url/41f6cca5c3e1f88c/x.gguf"},
        {"http://h/a%20b.gguf", "/c/url/22b384c3076848e3/a_20b.gguf"},
        {"http://h/", "/c/url/ad8295a7a69d6f00/download"},
        {"http://h", "/c/url/4f8d848825a112f9/download"},
        {"http://h/.hidden", "/c/url/542ab973ba7a7a92/_hidden"},
        {"http://h/x.part", "/c/url/19a584f6e942b773/x.part_"},
    };
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(urls); i++) {
        ck_assert_int_eq(download_url_cache_path("/c", urls[i].url, &path), HEARTH_OK);
        ck_assert_str_eq(path, urls[i].want);
        free(path);
    }
}
END_TEST

static void expect_digest(const char *line, digest_source want)
{
    uint8_t d[32];
    memset(d, 0, sizeof d);
    digest_source got = download_header_digest(line, strlen(line), d);
    ck_assert_msg(got == want, "'%s': source %d, expected %d", line, got, want);
    if (want != DIGEST_NONE) ck_assert_msg(memcmp(d, abc_digest, 32) == 0, "'%s': wrong digest", line);
}

START_TEST(test_digest_headers)
{
    expect_digest("X-Linked-Etag: \"" ABC_HEX "\"\r\n", DIGEST_LINKED_ETAG);
    expect_digest("x-linked-etag: " ABC_HEX, DIGEST_LINKED_ETAG);
    expect_digest("X-Linked-ETag: \"BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD\"\r\n",
                  DIGEST_LINKED_ETAG);
    expect_digest("ETag: \"" ABC_HEX "\"\r\n", DIGEST_ETAG);
    expect_digest("ETag: W/\"" ABC_HEX "\"\r\n", DIGEST_ETAG);
    expect_digest("Repr-Digest: sha-256=:" ABC_B64 ":\r\n", DIGEST_REPR);
    expect_digest("Repr-Digest: sha-512=:AAAA:, sha-256=:" ABC_B64 ":\r\n", DIGEST_REPR);
    expect_digest("Digest: SHA-256=" ABC_B64 "\r\n", DIGEST_REPR);
    expect_digest("Digest: md5=HUXZLQLMuI/KZ5KDcJPcOA==, sha-256=" ABC_B64, DIGEST_REPR);
    expect_digest("Digest: SHA-256=ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0", DIGEST_REPR);
    /* not a usable SHA-256 */
    expect_digest("ETag: \"d41d8cd98f00b204e9800998ecf8427e\"", DIGEST_NONE);        /* md5 */
    expect_digest("ETag: \"d41d8cd98f00b204e9800998ecf8427e-12\"", DIGEST_NONE);     /* multipart */
    expect_digest("ETag: \"" ABC_HEX "0\"", DIGEST_NONE);
    expect_digest("ETag: \"zz7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\"",
                  DIGEST_NONE);
    expect_digest("Repr-Digest: sha-512=:" ABC_B64 ":", DIGEST_NONE);
    expect_digest("Repr-Digest: sha-256=:ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa:", DIGEST_NONE);
    expect_digest("Repr-Digest: sha-256=:ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAF!0=:", DIGEST_NONE);
    expect_digest("Content-Digest: sha-256=:" ABC_B64 ":", DIGEST_NONE);
    expect_digest("X-ETag: \"" ABC_HEX "\"", DIGEST_NONE);
    expect_digest("ETag", DIGEST_NONE);
    expect_digest("", DIGEST_NONE);

    const char *v;
    size_t n;
    ck_assert(download_header_value("content-length:  1234 \r\n", 24, "Content-Length", &v, &n));
    ck_assert_uint_eq(n, 4);
    ck_assert(strncmp(v, "1234", 4) == 0);
    ck_assert(!download_header_value("Content-Lengthy: 1\r\n", 20, "Content-Length", &v, &n));
}
END_TEST

static void expect_range(const char *text, bool ok, uint64_t first, uint64_t last, uint64_t total)
{
    uint64_t f = 7, l = 7, t = 7;
    bool got = download_parse_content_range(text, strlen(text), &f, &l, &t);
    ck_assert_msg(got == ok, "'%s': %d", text, got);
    if (ok) {
        ck_assert_uint_eq(f, first);
        ck_assert_uint_eq(l, last);
        ck_assert_uint_eq(t, total);
    }
}

START_TEST(test_content_range)
{
    expect_range("bytes 100-999/1000", true, 100, 999, 1000);
    expect_range("bytes 0-0/1", true, 0, 0, 1);
    expect_range("bytes */1000", true, UINT64_MAX, UINT64_MAX, 1000);
    expect_range("bytes 5-9/*", true, 5, 9, UINT64_MAX);
    expect_range("bytes 5-4/10", false, 0, 0, 0);
    expect_range("bytes 0-10/10", false, 0, 0, 0);
    expect_range("bytes */*", false, 0, 0, 0);
    expect_range("items 0-1/2", false, 0, 0, 0);
    expect_range("bytes -1/2", false, 0, 0, 0);
    expect_range("bytes 1-2/x", false, 0, 0, 0);
    expect_range("bytes 1-2/3x", false, 0, 0, 0);
    expect_range("bytes 1-2", false, 0, 0, 0);
    expect_range("bytes 0-1/99999999999999999999", false, 0, 0, 0);
    expect_range("", false, 0, 0, 0);
}
END_TEST

START_TEST(test_choose_gguf)
{
    const char *chosen;
    const char *q[] = {"README.md", "m-Q8_0.gguf", "m-Q4_K_M.gguf", "m-F16.gguf"};
    ck_assert_int_eq(download_choose_gguf("o/r", q, 4, &chosen), HEARTH_OK);
    ck_assert_str_eq(chosen, "m-Q4_K_M.gguf");
    const char *lower[] = {"m-q8_0.gguf", "sub/m-q4_k_m.gguf"};
    ck_assert_int_eq(download_choose_gguf("o/r", lower, 2, &chosen), HEARTH_OK);
    ck_assert_str_eq(chosen, "sub/m-q4_k_m.gguf");
    const char *one[] = {".gitattributes", "model.GGUF", "config.json"};
    ck_assert_int_eq(download_choose_gguf("o/r", one, 3, &chosen), HEARTH_OK);
    ck_assert_str_eq(chosen, "model.GGUF");
    const char *two[] = {"m-Q8_0.gguf", "README.md", "m-F16.gguf"};
    ck_assert_int_eq(download_choose_gguf("o/r", two, 3, &chosen), HEARTH_E_INVALID);
    ck_assert_str_eq(hearth_last_error(),
                     "o/r has several GGUF files and none is Q4_K_M; name one as o/r:FILE: "
                     "m-Q8_0.gguf, m-F16.gguf");
    /* the parts of a split model are one model, named by its first part */
    const char *split[] = {"m-Q4_K_M-00002-of-00002.gguf", "m-Q4_K_M-00001-of-00002.gguf"};
    ck_assert_int_eq(download_choose_gguf("o/r", split, 2, &chosen), HEARTH_OK);
    ck_assert_str_eq(chosen, "m-Q4_K_M-00001-of-00002.gguf");
    const char *splits[] = {"q8/m-Q8_0-00001-of-00003.gguf", "q8/m-Q8_0-00002-of-00003.gguf",
                            "q8/m-Q8_0-00003-of-00003.gguf", "m-F16-00001-of-00002.gguf",
                            "m-F16-00002-of-00002.gguf"};
    ck_assert_int_eq(download_choose_gguf("o/r", splits, 5, &chosen), HEARTH_E_INVALID);
    ck_assert_str_eq(hearth_last_error(),
                     "o/r has several GGUF files and none is Q4_K_M; name one as o/r:FILE: "
                     "q8/m-Q8_0-00001-of-00003.gguf, m-F16-00001-of-00002.gguf");
    const char *none[] = {"model.safetensors", "config.json"};
    ck_assert_int_eq(download_choose_gguf("o/r", none, 2, &chosen), HEARTH_E_NOT_FOUND);
    ck_assert_str_eq(hearth_last_error(), "o/r has no GGUF file");
    ck_assert_int_eq(download_choose_gguf("o/r", NULL, 0, &chosen), HEARTH_E_NOT_FOUND);

    /* a long listing is cut short, saying how many were left out */
    enum { MANY = 200 };
    char names[MANY][32];
    const char *many[MANY];
    for (int i = 0; i < MANY; i++) {
        snprintf(names[i], sizeof names[i], "model-%03d.gguf", i);
        many[i] = names[i];
    }
    ck_assert_int_eq(download_choose_gguf("o/r", many, MANY, &chosen), HEARTH_E_INVALID);
    ck_assert_msg(strstr(hearth_last_error(), "more"), "%s", hearth_last_error());
}
END_TEST

START_TEST(test_without_network)
{
#ifdef HAVE_CURL
    ck_assert(hearth_download_supported());
    /* bad names fail before any connection is tried */
    char *path = (char *)1;
    ck_assert_int_eq(hearth_download_hf("a/b:../../etc/passwd", NULL, &path), HEARTH_E_INVALID);
    ck_assert_ptr_null(path);
    ck_assert_int_eq(hearth_download_url("file:///etc/passwd", NULL, &path), HEARTH_E_INVALID);
#else
    ck_assert(!hearth_download_supported());
    char *path = (char *)1;
    ck_assert_int_eq(hearth_download_hf("a/b:c.gguf", NULL, &path), HEARTH_E_UNSUPPORTED);
    ck_assert_ptr_null(path);
    ck_assert_msg(strstr(hearth_last_error(), "without libcurl"), "%s", hearth_last_error());
    ck_assert_int_eq(hearth_download_url("https://h/c.gguf", NULL, &path), HEARTH_E_UNSUPPORTED);
#endif
}
END_TEST

static Suite *download_suite(void)
{
    Suite *s = suite_create("download");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_specs);
    tcase_add_test(tc, test_spec_traversal);
    tcase_add_test(tc, test_urls);
    tcase_add_test(tc, test_cache_paths);
    tcase_add_test(tc, test_digest_headers);
    tcase_add_test(tc, test_content_range);
    tcase_add_test(tc, test_choose_gguf);
    tcase_add_test(tc, test_without_network);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return test_run_suite(download_suite());
}

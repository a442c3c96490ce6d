/*
 * test-sha256.c -- SHA-256 against the examples published with FIPS 180-4
 * (and the long-message vector of the NIST example set), padding at every
 * block boundary, and incremental hashing in ragged pieces.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "sha256.h"
#include "testutil.h"

static void expect_hash(const void *data, size_t len, const char *want)
{
    uint8_t d[SHA256_DIGEST_BYTES];
    char hex[SHA256_HEX_BYTES];
    sha256(data, len, d);
    sha256_hex(d, hex);
    ck_assert_str_eq(hex, want);
}

START_TEST(test_fips_vectors)
{
    expect_hash("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    expect_hash(two, strlen(two), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *long896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
                          "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    expect_hash(long896, strlen(long896),
                "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    expect_hash("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    char *million = malloc(1000000);
    ck_assert_ptr_nonnull(million);
    memset(million, 'a', 1000000);
    expect_hash(million, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(million);
}
END_TEST

START_TEST(test_padding_boundaries)
{
    /* Messages of bytes i mod 251 around the 56- and 64-byte boundaries
     * where the padding needs one or two extra blocks. */
    static const struct { size_t len; const char *hex; } v[] = {
        {55, "463eb28e72f82e0a96c0a4cc53690c571281131f672aa229e0d45ae59b598b59"},
        {56, "da2ae4d6b36748f2a318f23e7ab1dfdf45acdc9d049bd80e59de82a60895f562"},
        {63, "29af2686fd53374a36b0846694cc342177e428d1647515f078784d69cdb9e488"},
        {64, "fdeab9acf3710362bd2658cdc9a29e8f9c757fcf9811603a8c447cd1d9151108"},
        {65, "4bfd2c8b6f1eec7a2afeb48b934ee4b2694182027e6d0fc075074f2fabb31781"},
        {119, "da18797ed7c3a777f0847f429724a2d8cd5138e6ed2895c3fa1a6d39d18f7ec6"},
        {120, "f52b23db1fbb6ded89ef42a23ce0c8922c45f25c50b568a93bf1c075420bbb7c"},
    };
    uint8_t msg[128];
    for (size_t i = 0; i < sizeof msg; i++) msg[i] = (uint8_t)(i % 251);
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(v); i++) expect_hash(msg, v[i].len, v[i].hex);
}
END_TEST

START_TEST(test_incremental)
{
    /* Any split of the input gives the one-shot digest. */
    enum { N = 5000 };
    uint8_t *msg = malloc(N);
    ck_assert_ptr_nonnull(msg);
    test_rng rng;
    test_rng_seed(&rng, 9);
    for (size_t i = 0; i < N; i++) msg[i] = (uint8_t)test_rng_next(&rng);
    uint8_t want[SHA256_DIGEST_BYTES], got[SHA256_DIGEST_BYTES];
    for (size_t len = 0; len <= N; len += len < 200 ? 1 : 397) {
        sha256(msg, len, want);
        sha256_ctx ctx;
        sha256_init(&ctx);
        size_t done = 0;
        while (done < len) {
            size_t piece = (size_t)(test_rng_next(&rng) % 150);
            if (piece > len - done) piece = len - done;
            sha256_update(&ctx, msg + done, piece);
            done += piece;
        }
        sha256_final(&ctx, got);
        ck_assert_msg(memcmp(want, got, sizeof want) == 0, "length %zu", len);
    }
    free(msg);
}
END_TEST

static Suite *sha256_suite(void)
{
    Suite *s = suite_create("sha256");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_fips_vectors);
    tcase_add_test(tc, test_padding_boundaries);
    tcase_add_test(tc, test_incremental);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return test_run_suite(sha256_suite());
}

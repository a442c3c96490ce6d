/*
 * test-disk-cache.c -- the disk tier of the prefix cache
 * (engine/disk_cache.h).
 *
 * - The file format: a sealed block file checks as the block it was
 *   written for; a change to any field of its header, its tokens, its
 *   checksum or its payload, a truncation or a trailing byte is named;
 *   the same file checked for another block, another identity or
 *   another layout is refused.
 * - The directory: a queued block is written (atomically, no temporary
 *   file left) and read back after a reopen; a corrupt or foreign file
 *   is not returned and is removed; a temporary file an interrupted
 *   writer left is removed at open; the size bound removes the least
 *   recently written or read files first; a second open of a directory
 *   in use and a directory that cannot be created are refused.
 * - The snapshot files: the same for a recurrent state's file (its
 *   positions, its state layout, its last block); a directory keeps them
 *   beside the blocks, under one size bound, and rejects a corrupt one.
 * - The engine: a prompt computed by one engine is read back from disk
 *   by a new engine on the same directory, counted as disk hits and in
 *   the request's n_cached_disk, and its logits are the same bits as
 *   when computed and as from the pool.  For recurrent models (RWKV-6,
 *   and RWKV-6 time mixing on a Qwen2 body) a new engine resumes from
 *   the prompt's snapshot file, with the same bits as an engine without
 *   the disk tier; a corrupt snapshot file is rejected and the prompt
 *   computed, with the same bits again.  An engine the disk tier cannot
 *   serve (no prefix cache) is refused with the reason.
 */
#include "internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "disk_cache.h"
#include "engine_drain.h"
#include "testutil.h"

#define B 16

static struct disk_layout layout(uint64_t identity)
{
    struct disk_layout l = {
        .identity = identity,
        .cache_type = HEARTH_TYPE_F16,
        .block_tokens = B,
        .n_layer = 3,
        .flags = 0,
        .row_bytes = 64,
        .payload_bytes = 3 * 2 * B * 64,
    };
    return l;
}

/* A block file of l for tokens seeded by seed (payload from the seed too). */
static uint8_t *make_file(const struct disk_layout *l, uint64_t parent, uint64_t hash, int32_t *tokens,
                          uint32_t seed)
{
    for (int32_t i = 0; i < B; i++) tokens[i] = (int32_t)(seed * 100 + (uint32_t)i);
    uint8_t *file = test_malloc(disk_file_bytes(l));
    test_rng rng;
    test_rng_seed(&rng, seed);
    for (size_t i = 0; i < l->payload_bytes; i++) file[disk_header_bytes(l) + i] = (uint8_t)test_rng_next(&rng);
    disk_file_seal(l, parent, hash, tokens, file);
    return file;
}

START_TEST(test_format_round_trip)
{
    const struct disk_layout l = layout(0x1234);
    int32_t tokens[B];
    uint8_t *file = make_file(&l, 7, 8, tokens, 1);
    const size_t n = disk_file_bytes(&l);
    ck_assert_uint_eq(disk_header_bytes(&l), 76 + 4 * B + 32);
    ck_assert_ptr_null(disk_file_check(&l, 7, 8, tokens, file, n));
    ck_assert_int_eq(memcmp(file, "HEARTHKV", 8), 0);
    free(file);
}
END_TEST

/* Every field, changed by one bit, is named (the payload and the checksum
 * by the checksum). */
START_TEST(test_format_corruption)
{
    const struct disk_layout l = layout(0x1234);
    int32_t tokens[B];
    uint8_t *file = make_file(&l, 7, 8, tokens, 2);
    const size_t n = disk_file_bytes(&l), hb = disk_header_bytes(&l);
    static const struct {
        size_t offset;
        const char *why;
    } fields[] = {
        {0, "magic"},         {7, "magic"},          {8, "version"},       {12, "header size"},
        {16, "identity"},     {23, "identity"},      {24, "cache type"},   {28, "block tokens"},
        {32, "layers"},       {36, "flags"},         {40, "row bytes"},    {48, "payload size"},
        {56, "parent hash"},  {64, "hash"},          {72, "reserved"},     {76, "tokens"},
        {76 + 4 * B - 1, "tokens"},
    };
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
        file[fields[f].offset] ^= 0x10;
        const char *why = disk_file_check(&l, 7, 8, tokens, file, n);
        ck_assert_msg(why && strcmp(why, fields[f].why) == 0, "offset %zu: '%s', expected '%s'", fields[f].offset,
                      why ? why : "(valid)", fields[f].why);
        file[fields[f].offset] ^= 0x10;
    }
    const size_t sums[] = {hb - 32, hb - 1, hb, hb + 100, n - 1};
    for (size_t k = 0; k < sizeof sums / sizeof sums[0]; k++) {
        file[sums[k]] ^= 0x01;
        const char *why = disk_file_check(&l, 7, 8, tokens, file, n);
        ck_assert_msg(why && strcmp(why, "checksum") == 0, "byte %zu: '%s'", sums[k], why ? why : "(valid)");
        file[sums[k]] ^= 0x01;
    }
    ck_assert_str_eq(disk_file_check(&l, 7, 8, tokens, file, n - 1), "truncated");
    ck_assert_str_eq(disk_file_check(&l, 7, 8, tokens, file, hb), "truncated");
    ck_assert_str_eq(disk_file_check(&l, 7, 8, tokens, file, 40), "truncated header");
    uint8_t *longer = test_malloc(n + 1);
    memcpy(longer, file, n);
    longer[n] = 0;
    ck_assert_str_eq(disk_file_check(&l, 7, 8, tokens, longer, n + 1), "trailing bytes");
    free(longer);
    ck_assert_ptr_null(disk_file_check(&l, 7, 8, tokens, file, n));
    free(file);
}
END_TEST

/* A valid file is refused for another block or another engine. */
START_TEST(test_format_foreign)
{
    const struct disk_layout l = layout(0x1234);
    int32_t tokens[B];
    uint8_t *file = make_file(&l, 7, 8, tokens, 3);
    const size_t n = disk_file_bytes(&l);
    struct disk_layout other = layout(0x1235);
    ck_assert_str_eq(disk_file_check(&other, 7, 8, tokens, file, n), "identity");
    other = layout(0x1234);
    other.cache_type = HEARTH_TYPE_Q8_0;
    ck_assert_str_eq(disk_file_check(&other, 7, 8, tokens, file, n), "cache type");
    other = layout(0x1234);
    other.n_layer = 4;
    ck_assert_str_eq(disk_file_check(&other, 7, 8, tokens, file, n), "layers");
    ck_assert_str_eq(disk_file_check(&l, 6, 8, tokens, file, n), "parent hash");
    ck_assert_str_eq(disk_file_check(&l, 7, 9, tokens, file, n), "hash");
    tokens[5]++;
    ck_assert_str_eq(disk_file_check(&l, 7, 8, tokens, file, n), "tokens");
    free(file);
}
END_TEST

/* ---- the directory ------------------------------------------------------------------------ */

static char *temp_dir(void)
{
    const char *t = getenv("TMPDIR");
    char *dir = test_malloc(4096);
    snprintf(dir, 4096, "%s/hearth-disk-cache-XXXXXX", t && *t ? t : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    return dir;
}

static void remove_dir(char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        char path[4400];
        while ((de = readdir(d)) != NULL) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
    free(dir);
}

static const char *file_of(const char *dir, uint64_t hash)
{
    static char path[4400];
    snprintf(path, sizeof path, "%s/%016llx.kvb", dir, (unsigned long long)hash);
    return path;
}

static bool exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Give block hash's file the modification time `ago` seconds before now:
 * the order of use a reopen reads (file times have a coarse clock, so
 * files written in one tick would tie). */
static void set_age(const char *dir, uint64_t hash, int ago)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    const struct timespec t[2] = {{now.tv_sec - ago, 0}, {now.tv_sec - ago, 0}};
    ck_assert_int_eq(utimensat(AT_FDCWD, file_of(dir, hash), t, 0), 0);
}

/* The names in dir that start with prefix. */
static int count_named(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

static struct disk_cache *open_dir(const char *dir, uint64_t max_bytes, const struct disk_layout *l)
{
    struct disk_cache *dc;
    hearth_status st = disk_cache_open(dir, max_bytes, 1 << 20, l, NULL, &dc);
    ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
    return dc;
}

/* Queue block `seed` (parent seed - 1, hash seed) for writing. */
static void put_block(struct disk_cache *dc, const struct disk_layout *l, uint32_t seed)
{
    int32_t tokens[B];
    uint8_t *file = make_file(l, seed - 1, seed, tokens, seed);
    ck_assert(disk_cache_wants(dc, seed));
    disk_cache_put(dc, seed - 1, seed, tokens, file);
    ck_assert(!disk_cache_wants(dc, seed)); /* queued or written: not twice */
}

/* Whether block `seed` reads back with its payload. */
static bool get_block(struct disk_cache *dc, const struct disk_layout *l, uint32_t seed)
{
    int32_t tokens[B];
    uint8_t *want = make_file(l, seed - 1, seed, tokens, seed);
    const uint8_t *got = disk_cache_get(dc, seed - 1, seed, tokens);
    const bool ok = got && memcmp(got, want + disk_header_bytes(l), l->payload_bytes) == 0;
    ck_assert(!got || ok);
    free(want);
    return ok;
}

START_TEST(test_dir_round_trip)
{
    char *dir = temp_dir();
    const struct disk_layout l = layout(0x55);
    struct disk_cache *dc = open_dir(dir, 1 << 20, &l);
    put_block(dc, &l, 10);
    put_block(dc, &l, 11);
    disk_cache_close(dc); /* writes what is queued */
    ck_assert(exists(file_of(dir, 10)) && exists(file_of(dir, 11)));
    ck_assert_int_eq(count_named(dir, ".tmp-"), 0);
    dc = open_dir(dir, 1 << 20, &l);
    struct disk_cache_counts c;
    disk_cache_counts(dc, &c);
    ck_assert_uint_eq(c.files, 2);
    ck_assert_uint_eq(c.bytes, 2 * disk_file_bytes(&l));
    ck_assert(get_block(dc, &l, 10));
    ck_assert(get_block(dc, &l, 11));
    ck_assert(!get_block(dc, &l, 12)); /* no such file: a miss, nothing rejected */
    disk_cache_counts(dc, &c);
    ck_assert_uint_eq(c.hits, 2);
    ck_assert_uint_eq(c.rejected, 0);
    disk_cache_close(dc);
    remove_dir(dir);
}
END_TEST

/* A file with a flipped byte, one cut short and one of another engine's
 * identity are refused and removed. */
START_TEST(test_dir_invalid_files)
{
    char *dir = temp_dir();
    const struct disk_layout l = layout(0x66);
    struct disk_cache *dc = open_dir(dir, 1 << 20, &l);
    put_block(dc, &l, 20);
    put_block(dc, &l, 21);
    put_block(dc, &l, 22);
    disk_cache_close(dc);
    /* 20: a payload byte flipped; 21: cut short */
    FILE *f = fopen(file_of(dir, 20), "r+b");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, (long)disk_header_bytes(&l) + 5, SEEK_SET), 0);
    const int ch = fgetc(f);
    ck_assert_int_eq(fseek(f, (long)disk_header_bytes(&l) + 5, SEEK_SET), 0);
    fputc(ch ^ 0x40, f);
    fclose(f);
    ck_assert_int_eq(truncate(file_of(dir, 21), (off_t)disk_file_bytes(&l) - 3), 0);
    dc = open_dir(dir, 1 << 20, &l);
    ck_assert(!get_block(dc, &l, 20));
    ck_assert(!get_block(dc, &l, 21));
    ck_assert(!exists(file_of(dir, 20)) && !exists(file_of(dir, 21)));
    struct disk_cache_counts c;
    disk_cache_counts(dc, &c);
    ck_assert_uint_eq(c.rejected, 2);
    ck_assert_uint_eq(c.files, 1);
    disk_cache_close(dc);
    /* 22 read by an engine of another identity: refused too */
    const struct disk_layout other = layout(0x67);
    dc = open_dir(dir, 1 << 20, &other);
    ck_assert(!get_block(dc, &other, 22));
    ck_assert(!exists(file_of(dir, 22)));
    disk_cache_close(dc);
    remove_dir(dir);
}
END_TEST

/* Beyond the bound, the least recently written or read files go. */
START_TEST(test_dir_size_bound)
{
    char *dir = temp_dir();
    const struct disk_layout l = layout(0x77);
    const uint64_t bound = 3 * disk_file_bytes(&l);
    struct disk_cache *dc = open_dir(dir, bound, &l);
    for (uint32_t s = 30; s < 35; s++) put_block(dc, &l, s);
    disk_cache_close(dc);
    for (uint32_t s = 30; s < 35; s++) ck_assert_int_eq(exists(file_of(dir, s)), s >= 32);
    set_age(dir, 32, 30);
    set_age(dir, 33, 20);
    set_age(dir, 34, 10);
    dc = open_dir(dir, bound, &l);
    ck_assert(get_block(dc, &l, 32)); /* now the most recently used */
    put_block(dc, &l, 35);
    disk_cache_close(dc);
    ck_assert(exists(file_of(dir, 32)));
    ck_assert(!exists(file_of(dir, 33)));
    ck_assert(exists(file_of(dir, 34)) && exists(file_of(dir, 35)));
    /* a smaller bound at open removes the oldest at once */
    set_age(dir, 32, 3);
    set_age(dir, 34, 2);
    set_age(dir, 35, 1);
    dc = open_dir(dir, disk_file_bytes(&l), &l);
    struct disk_cache_counts c;
    disk_cache_counts(dc, &c);
    ck_assert_uint_eq(c.files, 1);
    ck_assert_uint_eq(c.evictions, 2);
    disk_cache_close(dc);
    ck_assert(exists(file_of(dir, 35)));
    remove_dir(dir);
}
END_TEST

START_TEST(test_dir_lock_and_errors)
{
    char *dir = temp_dir();
    const struct disk_layout l = layout(0x88);
    /* a temporary file an interrupted writer left goes at open */
    char tmp[4400];
    snprintf(tmp, sizeof tmp, "%s/.tmp-0000000000000001", dir);
    FILE *f = fopen(tmp, "wb");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    struct disk_cache *dc = open_dir(dir, 1 << 20, &l);
    ck_assert(!exists(tmp));
    struct disk_cache *second = NULL;
    ck_assert_int_eq(disk_cache_open(dir, 1 << 20, 1 << 20, &l, NULL, &second), HEARTH_E_IO);
    ck_assert_ptr_null(second);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "in use by another process"));
    disk_cache_close(dc);
    /* free again once closed */
    dc = open_dir(dir, 1 << 20, &l);
    disk_cache_close(dc);
    /* under a regular file: cannot be created */
    char bad[4400];
    snprintf(bad, sizeof bad, "%s/lock/sub", dir);
    ck_assert_int_eq(disk_cache_open(bad, 1 << 20, 1 << 20, &l, NULL, &second), HEARTH_E_IO);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "cannot create the cache directory"));
    remove_dir(dir);
}
END_TEST

/* ---- the snapshot files ------------------------------------------------------------------- */

static struct disk_state_layout state_layout(uint64_t identity)
{
    struct disk_state_layout l = {
        .identity = identity,
        .block_tokens = B,
        .n_layer = 4,
        .n_state_layers = 3,
        .layer_floats = 40,
        .hidden_floats = 8,
        .payload_bytes = 4 * (3 * 40 + 8),
    };
    return l;
}

/* A snapshot file of l after n_pos positions, its last block's tokens
 * and its payload seeded by seed. */
static uint8_t *make_state(const struct disk_state_layout *l, uint64_t parent, uint64_t hash, uint32_t n_pos,
                           int32_t *tokens, uint32_t seed)
{
    for (int32_t i = 0; i < B; i++) tokens[i] = (int32_t)(seed * 100 + (uint32_t)i);
    uint8_t *file = test_malloc(disk_state_file_bytes(l));
    test_rng rng;
    test_rng_seed(&rng, seed);
    for (size_t i = 0; i < l->payload_bytes; i++)
        file[disk_state_header_bytes(l) + i] = (uint8_t)test_rng_next(&rng);
    disk_state_seal(l, parent, hash, n_pos, tokens, file);
    return file;
}

START_TEST(test_state_format)
{
    const struct disk_state_layout l = state_layout(0x4321);
    int32_t tokens[B];
    uint8_t *file = make_state(&l, 7, 8, 3 * B, tokens, 4);
    const size_t n = disk_state_file_bytes(&l), hb = disk_state_header_bytes(&l);
    ck_assert_uint_eq(hb, 84 + 4 * B + 32);
    ck_assert_int_eq(memcmp(file, "HEARTHRS", 8), 0);
    ck_assert_ptr_null(disk_state_check(&l, 7, 8, 3 * B, tokens, file, n));
    static const struct {
        size_t offset;
        const char *why;
    } fields[] = {
        {0, "magic"},          {8, "version"},       {12, "header size"},    {16, "identity"},
        {24, "block tokens"},  {28, "layers"},       {32, "state layers"},   {36, "positions"},
        {40, "layer floats"},  {48, "hidden floats"}, {56, "payload size"},  {64, "parent hash"},
        {72, "hash"},          {80, "reserved"},     {84, "tokens"},         {84 + 4 * B - 1, "tokens"},
    };
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
        file[fields[f].offset] ^= 0x10;
        const char *why = disk_state_check(&l, 7, 8, 3 * B, tokens, file, n);
        ck_assert_msg(why && strcmp(why, fields[f].why) == 0, "offset %zu: '%s', expected '%s'", fields[f].offset,
                      why ? why : "(valid)", fields[f].why);
        file[fields[f].offset] ^= 0x10;
    }
    const size_t sums[] = {hb - 32, hb - 1, hb, n - 1};
    for (size_t k = 0; k < sizeof sums / sizeof sums[0]; k++) {
        file[sums[k]] ^= 0x01;
        const char *why = disk_state_check(&l, 7, 8, 3 * B, tokens, file, n);
        ck_assert_msg(why && strcmp(why, "checksum") == 0, "byte %zu: '%s'", sums[k], why ? why : "(valid)");
        file[sums[k]] ^= 0x01;
    }
    ck_assert_str_eq(disk_state_check(&l, 7, 8, 3 * B, tokens, file, n - 1), "truncated");
    ck_assert_str_eq(disk_state_check(&l, 7, 8, 3 * B, tokens, file, 50), "truncated header");
    /* a block file is not a snapshot file, nor the other way round */
    const struct disk_layout bl = layout(0x4321);
    ck_assert_str_eq(disk_file_check(&bl, 7, 8, tokens, file, n), "magic");
    /* another snapshot: other positions, another block, another engine */
    ck_assert_str_eq(disk_state_check(&l, 7, 8, 2 * B, tokens, file, n), "positions");
    ck_assert_str_eq(disk_state_check(&l, 6, 8, 3 * B, tokens, file, n), "parent hash");
    ck_assert_str_eq(disk_state_check(&l, 7, 9, 3 * B, tokens, file, n), "hash");
    struct disk_state_layout other = state_layout(0x4322);
    ck_assert_str_eq(disk_state_check(&other, 7, 8, 3 * B, tokens, file, n), "identity");
    other = state_layout(0x4321);
    other.hidden_floats = 0;
    other.payload_bytes = 4 * 3 * 40;
    ck_assert_str_eq(disk_state_check(&other, 7, 8, 3 * B, tokens, file, n), "hidden floats");
    tokens[3]++;
    ck_assert_str_eq(disk_state_check(&l, 7, 8, 3 * B, tokens, file, n), "tokens");
    free(file);
}
END_TEST

static const char *state_file_of(const char *dir, uint64_t hash, uint32_t n_pos)
{
    static char path[4400];
    snprintf(path, sizeof path, "%s/%016llx-%08x.rss", dir, (unsigned long long)hash, n_pos);
    return path;
}

/* Queue snapshot `seed` (parent seed - 1, hash seed, seed blocks) for writing. */
static void put_state(struct disk_cache *dc, const struct disk_state_layout *l, uint32_t seed)
{
    int32_t tokens[B];
    uint8_t *file = make_state(l, seed - 1, seed, seed * B, tokens, seed);
    ck_assert(disk_cache_wants_state(dc, seed, seed * B));
    disk_cache_put_state(dc, seed - 1, seed, seed * B, tokens, file);
    ck_assert(!disk_cache_wants_state(dc, seed, seed * B));
}

static bool get_state(struct disk_cache *dc, const struct disk_state_layout *l, uint32_t seed)
{
    int32_t tokens[B];
    uint8_t *want = make_state(l, seed - 1, seed, seed * B, tokens, seed);
    const uint8_t *got = disk_cache_get_state(dc, seed - 1, seed, seed * B, tokens);
    const bool ok = got && memcmp(got, want + disk_state_header_bytes(l), l->payload_bytes) == 0;
    ck_assert(!got || ok);
    free(want);
    return ok;
}

/* Snapshots beside blocks of the same hash: both written and read back
 * after a reopen; one size bound over both; a corrupt snapshot removed. */
START_TEST(test_dir_states)
{
    char *dir = temp_dir();
    const struct disk_layout l = layout(0x99);
    const struct disk_state_layout sl = state_layout(0x99);
    struct disk_cache *dc;
    ck_assert_int_eq(disk_cache_open(dir, 1 << 20, 1 << 20, &l, &sl, &dc), HEARTH_OK);
    put_block(dc, &l, 3);
    put_state(dc, &sl, 3);
    put_state(dc, &sl, 4);
    disk_cache_close(dc);
    ck_assert(exists(file_of(dir, 3)) && exists(state_file_of(dir, 3, 3 * B)) && exists(state_file_of(dir, 4, 4 * B)));
    ck_assert_int_eq(count_named(dir, ".tmp-"), 0);
    ck_assert_int_eq(disk_cache_open(dir, 1 << 20, 1 << 20, &l, &sl, &dc), HEARTH_OK);
    struct disk_cache_counts c;
    disk_cache_counts(dc, &c);
    ck_assert_uint_eq(c.files, 3);
    ck_assert_uint_eq(c.bytes, disk_file_bytes(&l) + 2 * disk_state_file_bytes(&sl));
    ck_assert(get_block(dc, &l, 3));
    ck_assert(get_state(dc, &sl, 3));
    ck_assert(!get_state(dc, &sl, 5));
    /* the same hash at other positions is another snapshot */
    int32_t tokens[B];
    uint8_t *want = make_state(&sl, 2, 3, 3 * B, tokens, 3);
    ck_assert_ptr_null(disk_cache_get_state(dc, 2, 3, 2 * B, tokens));
    free(want);
    disk_cache_counts(dc, &c);
    ck_assert_uint_eq(c.hits, 1);
    ck_assert_uint_eq(c.state_hits, 1);
    ck_assert_uint_eq(c.rejected, 0);
    disk_cache_close(dc);
    /* snapshot 4 with a flipped payload byte: rejected, removed */
    FILE *f = fopen(state_file_of(dir, 4, 4 * B), "r+b");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, (long)disk_state_header_bytes(&sl) + 9, SEEK_SET), 0);
    const int ch = fgetc(f);
    ck_assert_int_eq(fseek(f, (long)disk_state_header_bytes(&sl) + 9, SEEK_SET), 0);
    fputc(ch ^ 0x04, f);
    fclose(f);
    ck_assert_int_eq(disk_cache_open(dir, 1 << 20, 1 << 20, &l, &sl, &dc), HEARTH_OK);
    ck_assert(!get_state(dc, &sl, 4));
    ck_assert(!exists(state_file_of(dir, 4, 4 * B)));
    disk_cache_counts(dc, &c);
    ck_assert_uint_eq(c.rejected, 1);
    disk_cache_close(dc);
    /* a bound of one snapshot file: the oldest files go, whatever kind */
    set_age(dir, 3, 20);
    ck_assert_int_eq(utimensat(AT_FDCWD, state_file_of(dir, 3, 3 * B), NULL, 0), 0);
    ck_assert_int_eq(disk_cache_open(dir, disk_state_file_bytes(&sl), 1 << 20, &l, &sl, &dc), HEARTH_OK);
    disk_cache_close(dc);
    ck_assert(!exists(file_of(dir, 3)));
    ck_assert(exists(state_file_of(dir, 3, 3 * B)));
    remove_dir(dir);
}
END_TEST

/* ---- the engine ------------------------------------------------------------------------------- */

#define MAX_OUT 16

struct run {
    uint64_t logits_hash[MAX_OUT];
    hearth_token tokens[MAX_OUT];
    int32_t n;
    int32_t n_vocab;
    hearth_request_stats stats;
};

static void on_event(void *user, const hearth_event *ev)
{
    struct run *r = user;
    if (ev->token >= 0 && r->n < MAX_OUT) {
        ck_assert_ptr_nonnull(ev->logits);
        r->tokens[r->n] = ev->token;
        r->logits_hash[r->n++] = test_fnv1a(ev->logits, (size_t)r->n_vocab * sizeof(float));
    }
    if (ev->finish != HEARTH_FINISH_NONE) r->stats = *ev->stats;
}

/* An engine on m, with the disk tier in dir (NULL: none). */
static hearth_engine *engine_on(const hearth_model *m, const char *dir)
{
    hearth_engine_params p;
    hearth_engine_default_params(&p);
    p.n_ctx = 256;
    p.n_batch = 64;
    p.n_threads = 2;
    p.block_tokens = 16;
    p.cache_dir = dir;
    hearth_engine *e;
    hearth_status st = hearth_engine_new(m, &p, &e);
    ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
    return e;
}

static struct run generate(hearth_engine *e, const hearth_model *m, const int32_t *prompt, int32_t n_prompt)
{
    struct run r = {.n_vocab = hearth_model_n_vocab(m)};
    hearth_request q;
    hearth_request_default(&q);
    q.prompt = prompt;
    q.n_prompt = (size_t)n_prompt;
    q.max_tokens = 8;
    q.ignore_eos = true;
    q.sampling.temperature = 0;
    q.on_event = on_event;
    q.user = &r;
    uint64_t id;
    hearth_status st = hearth_engine_submit(e, &q, &id);
    ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
    test_engine_drain(e, 10000);
    ck_assert_int_eq(r.n, 8);
    return r;
}

static void same_run(const struct run *a, const struct run *b)
{
    ck_assert_int_eq(a->n, b->n);
    for (int32_t i = 0; i < a->n; i++) {
        ck_assert_int_eq(a->tokens[i], b->tokens[i]);
        ck_assert_msg(a->logits_hash[i] == b->logits_hash[i], "the logits of token %d differ", i);
    }
}

START_TEST(test_engine_restart)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("stories260K.gguf");
    char *dir = temp_dir();
    int32_t prompt[100];
    test_rng rng;
    test_rng_seed(&rng, 42);
    prompt[0] = 1;
    for (int32_t i = 1; i < 100; i++) prompt[i] = (int32_t)(3 + test_rng_next(&rng) % 500);

    /* computed, then from the pool */
    hearth_engine *e = engine_on(m, dir);
    const struct run computed = generate(e, m, prompt, 100);
    ck_assert_int_eq(computed.stats.n_cached, 0);
    const struct run pooled = generate(e, m, prompt, 100);
    ck_assert_int_eq(pooled.stats.n_cached, 96);
    ck_assert_int_eq(pooled.stats.n_cached_disk, 0);
    same_run(&computed, &pooled);
    hearth_engine_free(e); /* the queued blocks are written */

    /* a new engine reads them back */
    e = engine_on(m, dir);
    hearth_engine_stats st;
    hearth_engine_get_stats(e, &st);
    /* the prompt's 6 full blocks and the generation's first */
    ck_assert_uint_ge(st.disk_files, 6);
    const struct run disk = generate(e, m, prompt, 100);
    ck_assert_int_eq(disk.stats.n_cached, 96);
    ck_assert_int_eq(disk.stats.n_cached_disk, 96);
    hearth_engine_get_stats(e, &st);
    ck_assert_uint_eq(st.disk_hits, 6);
    ck_assert_uint_ge(st.prefix_hits, 6);
    same_run(&computed, &disk);

    /* a second engine on the directory is refused while it is in use */
    hearth_engine *second = NULL;
    hearth_engine_params p;
    hearth_engine_default_params(&p);
    p.n_ctx = 256;
    p.cache_dir = dir;
    ck_assert_int_eq(hearth_engine_new(m, &p, &second), HEARTH_E_IO);
    ck_assert_ptr_null(second);
    hearth_engine_free(e);

    /* another cache type is another identity: nothing is read */
    hearth_engine_default_params(&p);
    p.n_ctx = 256;
    p.n_batch = 64;
    p.n_threads = 2;
    p.block_tokens = 16;
    p.cache_type = HEARTH_TYPE_F32;
    p.cache_dir = dir;
    ck_assert_int_eq(hearth_engine_new(m, &p, &e), HEARTH_OK);
    const struct run f32 = generate(e, m, prompt, 100);
    ck_assert_int_eq(f32.stats.n_cached_disk, 0);
    hearth_engine_free(e);
    remove_dir(dir);
    hearth_model_free(m);
}
END_TEST

/* The names in dir that end with suffix. */
static int count_suffix(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const size_t len = strlen(de->d_name), sl = strlen(suffix);
        n += len >= sl && strcmp(de->d_name + len - sl, suffix) == 0;
    }
    closedir(d);
    return n;
}

/* Flip one payload byte of every snapshot file in dir. */
static void corrupt_states(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    char path[4400];
    while ((de = readdir(d)) != NULL) {
        const size_t len = strlen(de->d_name);
        if (len < 4 || strcmp(de->d_name + len - 4, ".rss") != 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        FILE *f = fopen(path, "r+b");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(fseek(f, -17, SEEK_END), 0);
        const int ch = fgetc(f);
        ck_assert_int_eq(fseek(f, -17, SEEK_END), 0);
        fputc(ch ^ 0x08, f);
        fclose(f);
    }
    closedir(d);
}

/* A recurrent model: the prompt's state at its last block boundary is
 * written as a snapshot file beside its blocks; a new engine resumes
 * from it with the bits of an engine without the disk tier; a corrupt
 * snapshot file is rejected and the prompt computed. */
static void recurrent_restart(const char *model)
{
    hearth_model *m = test_load_model(model);
    char *dir = temp_dir();
    int32_t prompt[100];
    test_rng rng;
    test_rng_seed(&rng, 7);
    prompt[0] = 1;
    for (int32_t i = 1; i < 100; i++) prompt[i] = (int32_t)(3 + test_rng_next(&rng) % 500);

    hearth_engine *e = engine_on(m, NULL);
    const struct run reference = generate(e, m, prompt, 100);
    hearth_engine_free(e);

    e = engine_on(m, dir);
    const struct run computed = generate(e, m, prompt, 100);
    ck_assert_int_eq(computed.stats.n_cached, 0);
    same_run(&reference, &computed);
    hearth_engine_free(e); /* the queued files are written */
    ck_assert_int_ge(count_suffix(dir, ".kvb"), 6);
    /* the prompt's (96 positions) and the generation's last boundary (96 + 16 = 112 > 107: none) */
    ck_assert_int_eq(count_suffix(dir, ".rss"), 1);

    e = engine_on(m, dir);
    const struct run disk = generate(e, m, prompt, 100);
    ck_assert_int_eq(disk.stats.n_cached, 96);
    ck_assert_int_eq(disk.stats.n_cached_disk, 96);
    hearth_engine_stats st;
    hearth_engine_get_stats(e, &st);
    ck_assert_uint_eq(st.disk_rejected, 0);
    ck_assert_uint_eq(st.disk_snapshot_hits, 1);
    same_run(&reference, &disk);
    hearth_engine_free(e);

    /* a longer prompt on the same prefix resumes there too */
    int32_t longer[140];
    memcpy(longer, prompt, sizeof prompt);
    for (int32_t i = 100; i < 140; i++) longer[i] = (int32_t)(3 + test_rng_next(&rng) % 500);
    e = engine_on(m, NULL);
    const struct run longer_ref = generate(e, m, longer, 140);
    hearth_engine_free(e);
    e = engine_on(m, dir);
    const struct run longer_disk = generate(e, m, longer, 140);
    ck_assert_int_eq(longer_disk.stats.n_cached_disk, 96);
    same_run(&longer_ref, &longer_disk);
    hearth_engine_free(e);

    /* every snapshot file corrupted: rejected and removed, the prompt computed */
    corrupt_states(dir);
    e = engine_on(m, dir);
    const struct run corrupt = generate(e, m, prompt, 100);
    ck_assert_int_eq(corrupt.stats.n_cached, 0);
    ck_assert_int_eq(corrupt.stats.n_cached_disk, 0);
    hearth_engine_get_stats(e, &st);
    ck_assert_uint_ge(st.disk_rejected, 1);
    same_run(&reference, &corrupt);
    hearth_engine_free(e);
    /* and written again, good */
    e = engine_on(m, dir);
    const struct run again = generate(e, m, prompt, 100);
    ck_assert_int_eq(again.stats.n_cached_disk, 96);
    same_run(&reference, &again);
    hearth_engine_free(e);
    remove_dir(dir);
    hearth_model_free(m);
}

START_TEST(test_engine_rwkv6)
{
    if (!test_require_data()) return;
    recurrent_restart("micro-rwkv6-f32.gguf");
}
END_TEST

START_TEST(test_engine_rwkv6qwen2)
{
    if (!test_require_data()) return;
    recurrent_restart("micro-rwkv6qwen2-f32.gguf");
}
END_TEST

/* What the disk tier cannot serve is refused, and says why: here, an
 * engine without the prefix cache. */
START_TEST(test_engine_unsupported)
{
    if (!test_require_data()) return;
    hearth_model *m = test_load_model("micro-rwkv6-f32.gguf");
    char *dir = temp_dir();
    hearth_engine_params p;
    hearth_engine_default_params(&p);
    p.n_ctx = 64;
    p.no_prefix_cache = true;
    p.cache_dir = dir;
    hearth_engine *e = NULL;
    ck_assert_int_eq(hearth_engine_new(m, &p, &e), HEARTH_E_UNSUPPORTED);
    ck_assert_ptr_null(e);
    ck_assert_ptr_nonnull(strstr(hearth_last_error(), "without the prefix cache"));
    remove_dir(dir);
    hearth_model_free(m);
}
END_TEST

static Suite *disk_cache_suite(void)
{
    Suite *s = suite_create("disk-cache");
    TCase *tc = tcase_create("format");
    tcase_add_test(tc, test_format_round_trip);
    tcase_add_test(tc, test_format_corruption);
    tcase_add_test(tc, test_format_foreign);
    tcase_add_test(tc, test_state_format);
    suite_add_tcase(s, tc);
    TCase *td = tcase_create("directory");
    tcase_add_test(td, test_dir_round_trip);
    tcase_add_test(td, test_dir_invalid_files);
    tcase_add_test(td, test_dir_size_bound);
    tcase_add_test(td, test_dir_lock_and_errors);
    tcase_add_test(td, test_dir_states);
    suite_add_tcase(s, td);
    TCase *te = tcase_create("engine");
    tcase_set_timeout(te, 300);
    tcase_add_test(te, test_engine_restart);
    tcase_add_test(te, test_engine_rwkv6);
    tcase_add_test(te, test_engine_rwkv6qwen2);
    tcase_add_test(te, test_engine_unsupported);
    suite_add_tcase(s, te);
    return s;
}

int main(void)
{
    return test_run_suite(disk_cache_suite());
}

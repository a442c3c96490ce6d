/*
 * fuzz-diskcache.c -- fuzz target for the block and snapshot files of
 * the prefix cache's disk tier (src/engine/disk_cache.c,
 * disk_file_check() and disk_state_check()).  The input is a file as
 * found in a cache directory.  It is checked as the block and as the
 * snapshot a fixed layout looks up, then as the block or snapshot its
 * own header names (by its magic: its layout, parent, hash, positions
 * and tokens, when they are within bounds), which reaches the checksum.
 * A file that passes must be, byte for byte, what disk_file_seal() or
 * disk_state_seal() writes for it; a sealed copy of any input must pass.
 * Nothing may crash, read out of bounds or leak.
 *
 * Run (see configure --enable-fuzzing) with a corpus directory seeded
 * from tests/fuzz/corpus-diskcache:
 *   tests/fuzz/fuzz-diskcache -max_len=65536 corpus
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "disk_cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TOKENS 1024

static uint32_t get_u32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static uint64_t get_u64(const uint8_t *p) { return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }

/* The input as the snapshot its own header names. */
static void own_state(const uint8_t *data, size_t size, int32_t *tokens)
{
    if (size < 84) return;
    struct disk_state_layout l = {0};
    l.identity = get_u64(data + 16);
    l.block_tokens = get_u32(data + 24);
    l.n_layer = get_u32(data + 28);
    l.n_state_layers = get_u32(data + 32);
    const uint32_t n_pos = get_u32(data + 36);
    l.layer_floats = get_u64(data + 40);
    l.hidden_floats = get_u64(data + 48);
    l.payload_bytes = get_u64(data + 56);
    if (l.block_tokens > MAX_TOKENS || l.payload_bytes > size) return;
    const size_t hb = disk_state_header_bytes(&l);
    for (uint32_t i = 0; i < l.block_tokens; i++)
        tokens[i] = 84 + 4 * (size_t)i + 4 <= size ? (int32_t)get_u32(data + 84 + 4 * (size_t)i) : 0;
    const uint64_t parent = get_u64(data + 64), hash = get_u64(data + 72);
    const char *why = disk_state_check(&l, parent, hash, n_pos, tokens, data, size);

    const size_t n = disk_state_file_bytes(&l);
    uint8_t *file = calloc(1, n);
    if (!file) return;
    memcpy(file + hb, data + (size - l.payload_bytes), l.payload_bytes);
    disk_state_seal(&l, parent, hash, n_pos, tokens, file);
    if (disk_state_check(&l, parent, hash, n_pos, tokens, file, n) != NULL) abort();
    if (!why && (size != n || memcmp(file, data, hb) != 0 || memcmp(file + hb, data + hb, l.payload_bytes) != 0))
        abort();
    free(file);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int32_t tokens[MAX_TOKENS];
    struct disk_layout l = {0x1234, 1, 16, 2, 0, 64, 2 * 2 * 16 * 64};
    for (int32_t i = 0; i < 16; i++) tokens[i] = i;
    (void)disk_file_check(&l, 1, 2, tokens, data, size);
    const struct disk_state_layout sl = {0x1234, 16, 3, 2, 24, 8, 4 * (2 * 24 + 8)};
    (void)disk_state_check(&sl, 1, 2, 32, tokens, data, size);

    if (size >= 8 && memcmp(data, DISK_STATE_MAGIC, 8) == 0) {
        own_state(data, size, tokens);
        return 0;
    }
    if (size < 76) return 0;
    l.identity = get_u64(data + 16);
    l.cache_type = get_u32(data + 24);
    l.block_tokens = get_u32(data + 28);
    l.n_layer = get_u32(data + 32);
    l.flags = get_u32(data + 36);
    l.row_bytes = get_u64(data + 40);
    l.payload_bytes = get_u64(data + 48);
    if (l.block_tokens > MAX_TOKENS || l.payload_bytes > size) return 0;
    const size_t hb = disk_header_bytes(&l);
    for (uint32_t i = 0; i < l.block_tokens; i++)
        tokens[i] = 76 + 4 * (size_t)i + 4 <= size ? (int32_t)get_u32(data + 76 + 4 * (size_t)i) : 0;
    const uint64_t parent = get_u64(data + 56), hash = get_u64(data + 64);
    const char *why = disk_file_check(&l, parent, hash, tokens, data, size);

    /* the sealed copy: a file of exactly the layout's size, the input's
     * bytes as its payload where they reach */
    const size_t n = disk_file_bytes(&l);
    uint8_t *file = calloc(1, n);
    if (!file) return 0;
    memcpy(file + hb, data + (size - l.payload_bytes), l.payload_bytes);
    disk_file_seal(&l, parent, hash, tokens, file);
    if (disk_file_check(&l, parent, hash, tokens, file, n) != NULL) abort();
    /* a file that passed is that sealed file */
    if (!why && (size != n || memcmp(file, data, hb) != 0 || memcmp(file + hb, data + hb, l.payload_bytes) != 0))
        abort();
    free(file);
    return 0;
}

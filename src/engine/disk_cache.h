/*
 * disk_cache.h -- the disk tier of the prefix cache: full KV blocks, and
 * the recurrent-state snapshots of recurrent and hybrid models, kept in
 * files of a directory, so that a prefix computed before a restart is a
 * cache hit again.
 *
 * One file per block, named by its chain hash (16 hex digits, ".kvb").
 * A file is a header and the block's keys and values
 * (kv_cache_save_block(); none for a model whose layers all keep a
 * recurrent state: the file then holds the block's tokens alone, the
 * link of the chain a snapshot is found by); the header holds,
 * little-endian:
 *
 *   offset  bytes  field
 *        0      8  magic "HEARTHKV"
 *        8      4  version (1)
 *       12      4  header bytes (76 + 4 x block tokens + 32)
 *       16      8  identity key (prefix.c: weights, cache type, block
 *                  size, RoPE)
 *       24      4  cache type (hearth_type)
 *       28      4  block tokens
 *       32      4  layers
 *       36      4  flags (bit 0: values in the keys)
 *       40      8  row bytes
 *       48      8  payload bytes
 *       56      8  parent's chain hash
 *       64      8  the block's chain hash
 *       72      4  reserved, 0
 *       76  4 x B  the block's tokens
 *    +4 B      32  SHA-256 of every byte before it and of the payload
 *
 * One file per recurrent-state snapshot (prefix.c), named by the chain
 * hash of the block that ends where it was kept and the positions it
 * covers (16 and 8 hex digits, "<hash>-<positions>.rss").  Its payload
 * is the state of every layer that keeps one (rstate.h, a slot's floats
 * as the engine holds them), then, with a prediction layer, its input
 * at that position (n_embd floats); the header:
 *
 *   offset  bytes  field
 *        0      8  magic "HEARTHRS"
 *        8      4  version (1)
 *       12      4  header bytes (84 + 4 x block tokens + 32)
 *       16      8  identity key
 *       24      4  block tokens
 *       28      4  layers
 *       32      4  layers that keep a state
 *       36      4  positions (a multiple of the block tokens)
 *       40      8  floats of a layer's state
 *       48      8  floats of the prediction layer's input (0: none)
 *       56      8  payload bytes
 *       64      8  the last block's parent's chain hash
 *       72      8  the last block's chain hash
 *       80      4  reserved, 0
 *       84  4 x B  the last block's tokens
 *    +4 B      32  SHA-256 of every byte before it and of the payload
 *
 * A file is trusted only when every field matches what the engine would
 * write for the block or snapshot it looks up (the layout, the identity,
 * the parent, the hash, the positions and every token), its size is
 * exactly header + payload, and its checksum holds; any other file under
 * that name is removed.  Files are written whole under a temporary name
 * and renamed, by a writer thread, so that the engine's step never waits
 * for the disk: the engine copies a block's bytes out of the pool when
 * the block is registered (full: its contents never change again), a
 * snapshot's when it is kept, and queues them, up to a bound in bytes
 * beyond which a file is not written.  The directory holds at most
 * max_bytes of block and snapshot files together; the least recently
 * written or read go first.  One process uses a directory at a time
 * (flock of its file "lock").
 */
#ifndef HEARTH_DISK_CACHE_H
#define HEARTH_DISK_CACHE_H

#include "internal.h"

#define DISK_CACHE_VERSION 1
#define DISK_CACHE_MAGIC "HEARTHKV"
#define DISK_STATE_MAGIC "HEARTHRS"

/* What a block file must match besides its own block. */
struct disk_layout {
    uint64_t identity;
    uint32_t cache_type;
    uint32_t block_tokens;
    uint32_t n_layer;
    uint32_t flags;         /* DISK_VALUES_IN_KEYS */
    uint64_t row_bytes;
    uint64_t payload_bytes; /* kv_cache_block_save_bytes() */
};
#define DISK_VALUES_IN_KEYS 1u

/* What a snapshot file must match besides its own snapshot. */
struct disk_state_layout {
    uint64_t identity;
    uint32_t block_tokens;
    uint32_t n_layer;
    uint32_t n_state_layers;
    uint64_t layer_floats;
    uint64_t hidden_floats;  /* 0: no prediction layer */
    uint64_t payload_bytes;  /* 4 x (n_state_layers x layer_floats + hidden_floats) */
};

/* ---- the file format (no directory, no thread) -------------------------------------- */

size_t disk_header_bytes(const struct disk_layout *l);
/* header + payload */
size_t disk_file_bytes(const struct disk_layout *l);
/* Fill the header of file (disk_file_bytes() long, its payload already at
 * disk_header_bytes()) and its checksum. */
void disk_file_seal(const struct disk_layout *l, uint64_t parent, uint64_t hash, const int32_t *tokens,
                    uint8_t *file);
/* NULL when file (n bytes) is the block (parent, hash, tokens) of layout
 * l, else what is wrong with it ("magic", "version", "identity", ...,
 * "truncated", "checksum"). */
const char *disk_file_check(const struct disk_layout *l, uint64_t parent, uint64_t hash, const int32_t *tokens,
                            const uint8_t *file, size_t n);

/* The same for snapshot files: the snapshot after n_pos positions whose
 * last block is (parent, hash, tokens). */
size_t disk_state_header_bytes(const struct disk_state_layout *l);
size_t disk_state_file_bytes(const struct disk_state_layout *l);
void disk_state_seal(const struct disk_state_layout *l, uint64_t parent, uint64_t hash, uint32_t n_pos,
                     const int32_t *tokens, uint8_t *file);
const char *disk_state_check(const struct disk_state_layout *l, uint64_t parent, uint64_t hash, uint32_t n_pos,
                             const int32_t *tokens, const uint8_t *file, size_t n);

/* ---- the directory -------------------------------------------------------------------- */

struct disk_cache;

struct disk_cache_counts {
    uint64_t hits;          /* blocks read back */
    uint64_t writes;        /* blocks written */
    uint64_t state_hits;    /* snapshots read back */
    uint64_t state_writes;  /* snapshots written */
    uint64_t rejected;      /* files found invalid (removed) */
    uint64_t dropped;       /* files not written: the queue was full */
    uint64_t write_errors;  /* files whose write failed (disk full, ...) */
    uint64_t evictions;     /* files removed for the size bound */
    uint64_t bytes;         /* of the block and snapshot files in the directory */
    uint64_t files;
};

/* Open (creating it when missing, one level) and lock dir, for blocks of
 * layout l and snapshots of layout sl (NULL: none), keeping at most
 * max_bytes of files and queueing at most queue_bytes of writes; starts
 * the writer thread.  HEARTH_E_IO naming the directory when it cannot be
 * created, written or locked (another process uses it). */
hearth_status disk_cache_open(const char *dir, uint64_t max_bytes, uint64_t queue_bytes,
                              const struct disk_layout *l, const struct disk_state_layout *sl,
                              struct disk_cache **out);
/* Write what is queued, stop the writer, unlock.  NULL is fine. */
void disk_cache_close(struct disk_cache *dc);

/* Whether a block with this hash should be written: not on disk nor
 * queued, and room in the queue (counted as dropped otherwise). */
bool disk_cache_wants(struct disk_cache *dc, uint64_t hash);
/* Queue a block for writing: file is disk_file_bytes() long with the
 * payload in place (disk_cache takes it and frees it). */
void disk_cache_put(struct disk_cache *dc, uint64_t parent, uint64_t hash, const int32_t *tokens, uint8_t *file);
/* Read the block (parent, hash, tokens): its payload (valid until the next
 * call), or NULL when there is no such file or it is not valid (then
 * removed). */
const uint8_t *disk_cache_get(struct disk_cache *dc, uint64_t parent, uint64_t hash, const int32_t *tokens);

/* The same for the snapshot after n_pos positions whose last block is
 * (parent, hash, tokens); file is disk_state_file_bytes() long (only
 * with a snapshot layout). */
bool disk_cache_wants_state(struct disk_cache *dc, uint64_t hash, uint32_t n_pos);
void disk_cache_put_state(struct disk_cache *dc, uint64_t parent, uint64_t hash, uint32_t n_pos,
                          const int32_t *tokens, uint8_t *file);
const uint8_t *disk_cache_get_state(struct disk_cache *dc, uint64_t parent, uint64_t hash, uint32_t n_pos,
                                    const int32_t *tokens);

void disk_cache_counts(struct disk_cache *dc, struct disk_cache_counts *out);
/* The directory's name (the cache's own copy). */
const char *disk_cache_dir(const struct disk_cache *dc);

#endif /* HEARTH_DISK_CACHE_H */

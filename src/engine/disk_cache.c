/*
 * disk_cache.c -- the disk tier of the prefix cache (disk_cache.h): the
 * block and snapshot files' formats, the locked directory with its size
 * bound, and the writer thread.
 */
#include "disk_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sha256.h"

/* ---- the file format -------------------------------------------------------------------- */

#define HDR_FIXED 76 /* the fields before the tokens */

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

size_t disk_header_bytes(const struct disk_layout *l)
{
    return HDR_FIXED + 4 * (size_t)l->block_tokens + SHA256_DIGEST_BYTES;
}

size_t disk_file_bytes(const struct disk_layout *l)
{
    return disk_header_bytes(l) + (size_t)l->payload_bytes;
}

/* The checksum of a file of either kind whose header (the checksum its
 * last bytes) takes hb bytes: every header byte before the checksum,
 * then the payload. */
static void digest_of(const uint8_t *file, size_t hb, size_t payload, uint8_t digest[SHA256_DIGEST_BYTES])
{
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, file, hb - SHA256_DIGEST_BYTES);
    sha256_update(&c, file + hb, payload);
    sha256_final(&c, digest);
}

static void file_digest(const struct disk_layout *l, const uint8_t *file, uint8_t digest[SHA256_DIGEST_BYTES])
{
    digest_of(file, disk_header_bytes(l), (size_t)l->payload_bytes, digest);
}

void disk_file_seal(const struct disk_layout *l, uint64_t parent, uint64_t hash, const int32_t *tokens,
                    uint8_t *file)
{
    const size_t hb = disk_header_bytes(l);
    memcpy(file, DISK_CACHE_MAGIC, 8);
    put_u32(file + 8, DISK_CACHE_VERSION);
    put_u32(file + 12, (uint32_t)hb);
    put_u64(file + 16, l->identity);
    put_u32(file + 24, l->cache_type);
    put_u32(file + 28, l->block_tokens);
    put_u32(file + 32, l->n_layer);
    put_u32(file + 36, l->flags);
    put_u64(file + 40, l->row_bytes);
    put_u64(file + 48, l->payload_bytes);
    put_u64(file + 56, parent);
    put_u64(file + 64, hash);
    put_u32(file + 72, 0);
    for (uint32_t i = 0; i < l->block_tokens; i++) put_u32(file + HDR_FIXED + 4 * (size_t)i, (uint32_t)tokens[i]);
    file_digest(l, file, file + hb - SHA256_DIGEST_BYTES);
}

const char *disk_file_check(const struct disk_layout *l, uint64_t parent, uint64_t hash, const int32_t *tokens,
                            const uint8_t *file, size_t n)
{
    const size_t hb = disk_header_bytes(l);
    if (n < HDR_FIXED) return "truncated header";
    if (memcmp(file, DISK_CACHE_MAGIC, 8) != 0) return "magic";
    if (get_u32(file + 8) != DISK_CACHE_VERSION) return "version";
    if (get_u32(file + 12) != hb) return "header size";
    if (get_u64(file + 16) != l->identity) return "identity";
    if (get_u32(file + 24) != l->cache_type) return "cache type";
    if (get_u32(file + 28) != l->block_tokens) return "block tokens";
    if (get_u32(file + 32) != l->n_layer) return "layers";
    if (get_u32(file + 36) != l->flags) return "flags";
    if (get_u64(file + 40) != l->row_bytes) return "row bytes";
    if (get_u64(file + 48) != l->payload_bytes) return "payload size";
    if (n != disk_file_bytes(l)) return n < disk_file_bytes(l) ? "truncated" : "trailing bytes";
    if (get_u64(file + 56) != parent) return "parent hash";
    if (get_u64(file + 64) != hash) return "hash";
    if (get_u32(file + 72) != 0) return "reserved";
    for (uint32_t i = 0; i < l->block_tokens; i++)
        if (get_u32(file + HDR_FIXED + 4 * (size_t)i) != (uint32_t)tokens[i]) return "tokens";
    uint8_t digest[SHA256_DIGEST_BYTES];
    file_digest(l, file, digest);
    if (memcmp(digest, file + hb - SHA256_DIGEST_BYTES, SHA256_DIGEST_BYTES) != 0) return "checksum";
    return NULL;
}

/* ---- the snapshot files' format ------------------------------------------------------------ */

#define STATE_FIXED 84 /* the fields before the tokens */

size_t disk_state_header_bytes(const struct disk_state_layout *l)
{
    return STATE_FIXED + 4 * (size_t)l->block_tokens + SHA256_DIGEST_BYTES;
}

size_t disk_state_file_bytes(const struct disk_state_layout *l)
{
    return disk_state_header_bytes(l) + (size_t)l->payload_bytes;
}

static void state_digest(const struct disk_state_layout *l, const uint8_t *file, uint8_t digest[SHA256_DIGEST_BYTES])
{
    digest_of(file, disk_state_header_bytes(l), (size_t)l->payload_bytes, digest);
}

void disk_state_seal(const struct disk_state_layout *l, uint64_t parent, uint64_t hash, uint32_t n_pos,
                     const int32_t *tokens, uint8_t *file)
{
    const size_t hb = disk_state_header_bytes(l);
    memcpy(file, DISK_STATE_MAGIC, 8);
    put_u32(file + 8, DISK_CACHE_VERSION);
    put_u32(file + 12, (uint32_t)hb);
    put_u64(file + 16, l->identity);
    put_u32(file + 24, l->block_tokens);
    put_u32(file + 28, l->n_layer);
    put_u32(file + 32, l->n_state_layers);
    put_u32(file + 36, n_pos);
    put_u64(file + 40, l->layer_floats);
    put_u64(file + 48, l->hidden_floats);
    put_u64(file + 56, l->payload_bytes);
    put_u64(file + 64, parent);
    put_u64(file + 72, hash);
    put_u32(file + 80, 0);
    for (uint32_t i = 0; i < l->block_tokens; i++) put_u32(file + STATE_FIXED + 4 * (size_t)i, (uint32_t)tokens[i]);
    state_digest(l, file, file + hb - SHA256_DIGEST_BYTES);
}

const char *disk_state_check(const struct disk_state_layout *l, uint64_t parent, uint64_t hash, uint32_t n_pos,
                             const int32_t *tokens, const uint8_t *file, size_t n)
{
    const size_t hb = disk_state_header_bytes(l);
    if (n < STATE_FIXED) return "truncated header";
    if (memcmp(file, DISK_STATE_MAGIC, 8) != 0) return "magic";
    if (get_u32(file + 8) != DISK_CACHE_VERSION) return "version";
    if (get_u32(file + 12) != hb) return "header size";
    if (get_u64(file + 16) != l->identity) return "identity";
    if (get_u32(file + 24) != l->block_tokens) return "block tokens";
    if (get_u32(file + 28) != l->n_layer) return "layers";
    if (get_u32(file + 32) != l->n_state_layers) return "state layers";
    if (get_u32(file + 36) != n_pos) return "positions";
    if (get_u64(file + 40) != l->layer_floats) return "layer floats";
    if (get_u64(file + 48) != l->hidden_floats) return "hidden floats";
    if (get_u64(file + 56) != l->payload_bytes) return "payload size";
    if (n != disk_state_file_bytes(l)) return n < disk_state_file_bytes(l) ? "truncated" : "trailing bytes";
    if (get_u64(file + 64) != parent) return "parent hash";
    if (get_u64(file + 72) != hash) return "hash";
    if (get_u32(file + 80) != 0) return "reserved";
    for (uint32_t i = 0; i < l->block_tokens; i++)
        if (get_u32(file + STATE_FIXED + 4 * (size_t)i) != (uint32_t)tokens[i]) return "tokens";
    uint8_t digest[SHA256_DIGEST_BYTES];
    state_digest(l, file, digest);
    if (memcmp(digest, file + hb - SHA256_DIGEST_BYTES, SHA256_DIGEST_BYTES) != 0) return "checksum";
    return NULL;
}

/* ---- the directory ---------------------------------------------------------------------- */

/* A file the directory holds, or one queued for writing: a block's
 * (n_pos 0) or a snapshot's. */
struct entry {
    uint64_t hash;
    uint32_t n_pos;
    uint64_t bytes;   /* 0 while queued */
    uint64_t used;    /* ns since the epoch: its write or latest read */
    bool queued;
};

struct job {
    uint64_t parent, hash;
    uint32_t n_pos;   /* 0: a block */
    int32_t *tokens;
    uint8_t *file;
    struct job *next;
};

struct disk_cache {
    char *dir;
    int lock_fd;
    struct disk_layout layout;
    struct disk_state_layout state_layout;
    size_t file_bytes;          /* of a block file */
    size_t state_bytes;         /* of a snapshot file; 0: no snapshots */
    uint64_t max_bytes, queue_bytes;
    uint8_t *rbuf;              /* disk_cache_get's file (either kind) */

    pthread_mutex_t mu;         /* everything below */
    pthread_cond_t cv;
    pthread_t writer;
    bool writer_started, stop;
    struct job *head, *tail;
    uint64_t queued_bytes;
    struct entry *entries;
    size_t n_entries, cap_entries;
    struct disk_cache_counts counts;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A block's file dir/<hash>.kvb (with tmp dir/.tmp-<hash>), a
 * snapshot's dir/<hash>-<n_pos>.rss (dir/.tmp-<hash>-<n_pos>). */
static void file_path(const struct disk_cache *dc, uint64_t hash, uint32_t n_pos, bool tmp, char *out, size_t n)
{
    if (n_pos == 0)
        snprintf(out, n, tmp ? "%s/.tmp-%016llx" : "%s/%016llx.kvb", dc->dir, (unsigned long long)hash);
    else
        snprintf(out, n, tmp ? "%s/.tmp-%016llx-%08x" : "%s/%016llx-%08x.rss", dc->dir, (unsigned long long)hash,
                 (unsigned)n_pos);
}

static size_t path_bytes(const struct disk_cache *dc) { return strlen(dc->dir) + 40; }

/* The bytes of a file of that kind. */
static size_t kind_bytes(const struct disk_cache *dc, uint32_t n_pos)
{
    return n_pos == 0 ? dc->file_bytes : dc->state_bytes;
}

static struct entry *find_locked(struct disk_cache *dc, uint64_t hash, uint32_t n_pos)
{
    for (size_t i = 0; i < dc->n_entries; i++)
        if (dc->entries[i].hash == hash && dc->entries[i].n_pos == n_pos) return &dc->entries[i];
    return NULL;
}

static bool add_locked(struct disk_cache *dc, uint64_t hash, uint32_t n_pos, uint64_t bytes, uint64_t used,
                       bool queued)
{
    if (dc->n_entries == dc->cap_entries) {
        const size_t cap = dc->cap_entries ? 2 * dc->cap_entries : 64;
        struct entry *e = realloc(dc->entries, cap * sizeof *e);
        if (!e) return false;
        dc->entries = e;
        dc->cap_entries = cap;
    }
    dc->entries[dc->n_entries++] = (struct entry){hash, n_pos, bytes, used, queued};
    if (!queued) {
        dc->counts.bytes += bytes;
        dc->counts.files++;
    }
    return true;
}

static void remove_locked(struct disk_cache *dc, struct entry *e)
{
    if (!e->queued) {
        dc->counts.bytes -= e->bytes;
        dc->counts.files--;
    }
    *e = dc->entries[--dc->n_entries];
}

/* Remove the least recently used files until the directory holds at
 * most max_bytes. */
static void evict_locked(struct disk_cache *dc)
{
    char *path = malloc(path_bytes(dc));
    if (!path) return;
    while (dc->counts.bytes > dc->max_bytes) {
        struct entry *old = NULL;
        for (size_t i = 0; i < dc->n_entries; i++)
            if (!dc->entries[i].queued && (!old || dc->entries[i].used < old->used)) old = &dc->entries[i];
        if (!old) break;
        file_path(dc, old->hash, old->n_pos, false, path, path_bytes(dc));
        unlink(path);
        dc->counts.evictions++;
        remove_locked(dc, old);
    }
    free(path);
}

/* Write a whole buffer; false on any failure. */
static bool write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        const ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Write one block or snapshot file: under a temporary name, then
 * renamed (under the lock, so that a reader's removal of an invalid file
 * never races it). */
static void write_job(struct disk_cache *dc, struct job *j, char *tmp, char *path)
{
    const size_t bytes = kind_bytes(dc, j->n_pos);
    if (j->n_pos == 0) disk_file_seal(&dc->layout, j->parent, j->hash, j->tokens, j->file);
    else disk_state_seal(&dc->state_layout, j->parent, j->hash, j->n_pos, j->tokens, j->file);
    file_path(dc, j->hash, j->n_pos, true, tmp, path_bytes(dc));
    file_path(dc, j->hash, j->n_pos, false, path, path_bytes(dc));
    bool ok = false;
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        ok = write_all(fd, j->file, bytes);
        ok = close(fd) == 0 && ok;
    }
    pthread_mutex_lock(&dc->mu);
    struct entry *e = find_locked(dc, j->hash, j->n_pos);
    if (ok) ok = rename(tmp, path) == 0;
    if (!ok) {
        unlink(tmp);
        dc->counts.write_errors++;
        if (e) remove_locked(dc, e);
    } else {
        if (e) {
            e->queued = false;
            e->bytes = bytes;
            e->used = now_ns();
            dc->counts.bytes += e->bytes;
            dc->counts.files++;
        } else {
            add_locked(dc, j->hash, j->n_pos, bytes, now_ns(), false);
        }
        if (j->n_pos == 0) dc->counts.writes++;
        else dc->counts.state_writes++;
        evict_locked(dc);
    }
    pthread_mutex_unlock(&dc->mu);
}

static void job_free(struct job *j)
{
    if (!j) return;
    free(j->tokens);
    free(j->file);
    free(j);
}

static void *writer_main(void *arg)
{
    struct disk_cache *dc = arg;
    char *tmp = malloc(path_bytes(dc)), *path = malloc(path_bytes(dc));
    pthread_mutex_lock(&dc->mu);
    for (;;) {
        while (!dc->head && !dc->stop) pthread_cond_wait(&dc->cv, &dc->mu);
        struct job *j = dc->head;
        if (!j) break; /* stopped, and nothing left to write */
        dc->head = j->next;
        if (!dc->head) dc->tail = NULL;
        pthread_mutex_unlock(&dc->mu);
        if (tmp && path) {
            write_job(dc, j, tmp, path);
        } else {
            pthread_mutex_lock(&dc->mu);
            struct entry *e = find_locked(dc, j->hash, j->n_pos);
            if (e) remove_locked(dc, e);
            dc->counts.write_errors++;
            pthread_mutex_unlock(&dc->mu);
        }
        pthread_mutex_lock(&dc->mu);
        dc->queued_bytes -= kind_bytes(dc, j->n_pos);
        job_free(j);
    }
    pthread_mutex_unlock(&dc->mu);
    free(tmp);
    free(path);
    return NULL;
}

/* n lowercase hex digits at p */
static bool hex_digits(const char *p, int n, uint64_t *out)
{
    uint64_t h = 0;
    for (int i = 0; i < n; i++) {
        const char c = p[i];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return false;
        h = h << 4 | (uint64_t)d;
    }
    *out = h;
    return true;
}

/* "<16 hex digits>.kvb" (*n_pos 0), or "<16 hex digits>-<8 hex
 * digits>.rss" (a position count not 0); a snapshot file counts in the
 * size bound even for an engine that keeps none (it is never read) */
static bool file_name(const char *name, uint64_t *hash, uint32_t *n_pos)
{
    const size_t n = strlen(name);
    *n_pos = 0;
    if (n == 20 && strcmp(name + 16, ".kvb") == 0) return hex_digits(name, 16, hash);
    uint64_t pos;
    if (n != 29 || name[16] != '-' || strcmp(name + 25, ".rss") != 0 ||
        !hex_digits(name, 16, hash) || !hex_digits(name + 17, 8, &pos) || pos == 0)
        return false;
    *n_pos = (uint32_t)pos;
    return true;
}

/* The block files already there (their order of use from their
 * modification times); temporary files an interrupted writer left are
 * removed. */
static hearth_status scan(struct disk_cache *dc)
{
    DIR *d = opendir(dc->dir);
    if (!d) return hearth_error(HEARTH_E_IO, "cache directory %s: %s", dc->dir, strerror(errno));
    char *path = hearth_malloc(strlen(dc->dir) + 258, "a cache file's name");
    if (!path) {
        closedir(d);
        return HEARTH_E_NOMEM;
    }
    hearth_status st = HEARTH_OK;
    struct dirent *de;
    while (!st && (de = readdir(d)) != NULL) {
        uint64_t hash;
        uint32_t n_pos;
        snprintf(path, strlen(dc->dir) + 258, "%s/%s", dc->dir, de->d_name);
        if (strncmp(de->d_name, ".tmp-", 5) == 0) {
            unlink(path);
            continue;
        }
        struct stat sb;
        if (!file_name(de->d_name, &hash, &n_pos) || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        const uint64_t used = (uint64_t)sb.st_mtim.tv_sec * 1000000000u + (uint64_t)sb.st_mtim.tv_nsec;
        if (!add_locked(dc, hash, n_pos, (uint64_t)sb.st_size, used, false))
            st = hearth_error(HEARTH_E_NOMEM, "out of memory for the index of cache directory %s", dc->dir);
    }
    closedir(d);
    free(path);
    if (!st) evict_locked(dc);
    return st;
}

hearth_status disk_cache_open(const char *dir, uint64_t max_bytes, uint64_t queue_bytes,
                              const struct disk_layout *l, const struct disk_state_layout *sl,
                              struct disk_cache **out)
{
    *out = NULL;
    if (!dir || !*dir) return hearth_error(HEARTH_E_INVALID, "the cache directory's name is empty");
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return hearth_error(HEARTH_E_IO, "cannot create the cache directory %s: %s", dir, strerror(errno));
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return hearth_error(HEARTH_E_IO, "the cache directory %s is not a directory", dir);
    if (access(dir, W_OK | X_OK) != 0)
        return hearth_error(HEARTH_E_IO, "the cache directory %s is not writable: %s", dir, strerror(errno));
    struct disk_cache *dc = hearth_calloc(1, sizeof *dc, "the disk cache");
    if (!dc) return HEARTH_E_NOMEM;
    dc->lock_fd = -1;
    pthread_mutex_init(&dc->mu, NULL);
    pthread_cond_init(&dc->cv, NULL);
    dc->layout = *l;
    dc->file_bytes = disk_file_bytes(l);
    if (sl) {
        dc->state_layout = *sl;
        dc->state_bytes = disk_state_file_bytes(sl);
    }
    dc->max_bytes = max_bytes;
    dc->queue_bytes = queue_bytes;
    hearth_status st = HEARTH_OK;
    dc->dir = hearth_strdup(dir, "the cache directory's name");
    dc->rbuf = hearth_malloc(HEARTH_MAX(dc->file_bytes, dc->state_bytes), "a cache file's buffer");
    char *lock = dc->dir ? hearth_malloc(strlen(dir) + 8, "the cache directory's lock") : NULL;
    if (!dc->dir || !dc->rbuf || !lock) st = HEARTH_E_NOMEM;
    if (!st) {
        snprintf(lock, strlen(dir) + 8, "%s/lock", dir);
        dc->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (dc->lock_fd < 0)
            st = hearth_error(HEARTH_E_IO, "cannot write the cache directory %s (its lock file): %s", dir,
                              strerror(errno));
        else if (flock(dc->lock_fd, LOCK_EX | LOCK_NB) != 0)
            st = errno == EWOULDBLOCK
                     ? hearth_error(HEARTH_E_IO, "the cache directory %s is in use by another process "
                                    "(%s is locked)", dir, lock)
                     : hearth_error(HEARTH_E_IO, "cannot lock the cache directory %s: %s", dir, strerror(errno));
    }
    free(lock);
    if (!st) st = scan(dc);
    if (!st) {
        if (pthread_create(&dc->writer, NULL, writer_main, dc) != 0)
            st = hearth_error(HEARTH_E_IO, "cannot start the cache directory's writer thread");
        else dc->writer_started = true;
    }
    if (st) {
        disk_cache_close(dc);
        return st;
    }
    *out = dc;
    return HEARTH_OK;
}

void disk_cache_close(struct disk_cache *dc)
{
    if (!dc) return;
    if (dc->writer_started) {
        pthread_mutex_lock(&dc->mu);
        dc->stop = true;
        pthread_cond_signal(&dc->cv);
        pthread_mutex_unlock(&dc->mu);
        pthread_join(dc->writer, NULL);
    }
    while (dc->head) {
        struct job *j = dc->head;
        dc->head = j->next;
        job_free(j);
    }
    if (dc->lock_fd >= 0) close(dc->lock_fd); /* and with it the lock */
    pthread_cond_destroy(&dc->cv);
    pthread_mutex_destroy(&dc->mu);
    free(dc->entries);
    free(dc->rbuf);
    free(dc->dir);
    free(dc);
}

static bool wants(struct disk_cache *dc, uint64_t hash, uint32_t n_pos)
{
    const size_t bytes = kind_bytes(dc, n_pos);
    pthread_mutex_lock(&dc->mu);
    bool want = bytes > 0 && !find_locked(dc, hash, n_pos) && bytes <= dc->max_bytes;
    if (want && dc->queued_bytes + bytes > dc->queue_bytes) {
        dc->counts.dropped++;
        want = false;
    }
    pthread_mutex_unlock(&dc->mu);
    return want;
}

bool disk_cache_wants(struct disk_cache *dc, uint64_t hash) { return wants(dc, hash, 0); }

bool disk_cache_wants_state(struct disk_cache *dc, uint64_t hash, uint32_t n_pos)
{
    return n_pos > 0 && wants(dc, hash, n_pos);
}

static void put(struct disk_cache *dc, uint64_t parent, uint64_t hash, uint32_t n_pos, const int32_t *tokens,
                uint8_t *file)
{
    const size_t tb = (size_t)dc->layout.block_tokens * sizeof *tokens;
    struct job *j = malloc(sizeof *j);
    int32_t *t = malloc(tb);
    pthread_mutex_lock(&dc->mu);
    if (!j || !t || kind_bytes(dc, n_pos) == 0 || find_locked(dc, hash, n_pos) ||
        !add_locked(dc, hash, n_pos, 0, 0, true)) {
        dc->counts.dropped++;
        pthread_mutex_unlock(&dc->mu);
        free(j);
        free(t);
        free(file);
        return;
    }
    memcpy(t, tokens, tb);
    *j = (struct job){parent, hash, n_pos, t, file, NULL};
    if (dc->tail) dc->tail->next = j;
    else dc->head = j;
    dc->tail = j;
    dc->queued_bytes += kind_bytes(dc, n_pos);
    pthread_cond_signal(&dc->cv);
    pthread_mutex_unlock(&dc->mu);
}

void disk_cache_put(struct disk_cache *dc, uint64_t parent, uint64_t hash, const int32_t *tokens, uint8_t *file)
{
    put(dc, parent, hash, 0, tokens, file);
}

void disk_cache_put_state(struct disk_cache *dc, uint64_t parent, uint64_t hash, uint32_t n_pos,
                          const int32_t *tokens, uint8_t *file)
{
    if (n_pos == 0) {
        free(file);
        return;
    }
    put(dc, parent, hash, n_pos, tokens, file);
}

/* Read a whole file of exactly n bytes into buf; false when it has
 * another size (*size: what it has) or reading fails. */
static bool read_file(int fd, uint8_t *buf, size_t n, size_t *size)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0) return false;
    *size = (size_t)sb.st_size;
    if (*size != n) return false;
    size_t got = 0;
    while (got < n) {
        const ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        got += (size_t)r;
    }
    return true;
}

static const uint8_t *get(struct disk_cache *dc, uint64_t parent, uint64_t hash, uint32_t n_pos,
                          const int32_t *tokens)
{
    const size_t bytes = kind_bytes(dc, n_pos);
    if (bytes == 0) return NULL;
    if (n_pos > 0) {
        /* the directory's index first: a sequence looks for a snapshot
         * at every boundary of its prefix, and most have none */
        pthread_mutex_lock(&dc->mu);
        const struct entry *e = find_locked(dc, hash, n_pos);
        const bool there = e && !e->queued;
        pthread_mutex_unlock(&dc->mu);
        if (!there) return NULL;
    }
    char *path = malloc(path_bytes(dc));
    if (!path) return NULL;
    file_path(dc, hash, n_pos, false, path, path_bytes(dc));
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        free(path);
        return NULL;
    }
    size_t size = 0;
    const bool whole = read_file(fd, dc->rbuf, bytes, &size);
    const char *why = !whole     ? size < bytes ? "truncated" : "size"
                      : n_pos == 0 ? disk_file_check(&dc->layout, parent, hash, tokens, dc->rbuf, size)
                                   : disk_state_check(&dc->state_layout, parent, hash, n_pos, tokens, dc->rbuf, size);
    if (!why) futimens(fd, NULL); /* its place in the order of use survives a restart */
    close(fd);
    pthread_mutex_lock(&dc->mu);
    struct entry *e = find_locked(dc, hash, n_pos);
    if (why) {
        /* never trusted, and removed (unless a new one is being written) */
        dc->counts.rejected++;
        if (!e || !e->queued) {
            unlink(path);
            if (e) remove_locked(dc, e);
        }
    } else {
        if (n_pos == 0) dc->counts.hits++;
        else dc->counts.state_hits++;
        if (e) e->used = now_ns();
        else add_locked(dc, hash, n_pos, bytes, now_ns(), false);
    }
    pthread_mutex_unlock(&dc->mu);
    free(path);
    if (why) return NULL;
    return dc->rbuf + (n_pos == 0 ? disk_header_bytes(&dc->layout) : disk_state_header_bytes(&dc->state_layout));
}

const uint8_t *disk_cache_get(struct disk_cache *dc, uint64_t parent, uint64_t hash, const int32_t *tokens)
{
    return get(dc, parent, hash, 0, tokens);
}

const uint8_t *disk_cache_get_state(struct disk_cache *dc, uint64_t parent, uint64_t hash, uint32_t n_pos,
                                    const int32_t *tokens)
{
    return n_pos > 0 ? get(dc, parent, hash, n_pos, tokens) : NULL;
}

void disk_cache_counts(struct disk_cache *dc, struct disk_cache_counts *out)
{
    pthread_mutex_lock(&dc->mu);
    *out = dc->counts;
    pthread_mutex_unlock(&dc->mu);
}

const char *disk_cache_dir(const struct disk_cache *dc) { return dc->dir; }

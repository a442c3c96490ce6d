/*
 * prefix.c -- a sequence's block table in the pool: the identity key and
 * chain hashes of the prefix cache, taking a cached prefix, registering
 * full blocks, giving back blocks outside every layer's window, room for
 * the tokens a step adds, and the recurrent-state snapshots that let a
 * recurrent model's sequence resume from a cached prefix.  With a disk
 * tier (disk_cache.h), a block the pool misses is read back from its
 * file, and a block registered is queued to be written; so is a
 * snapshot, and one the engine does not hold is read back where a
 * sequence would resume from it.
 */
#include "engine_impl.h"

/* ---- the identity key ------------------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + UINT64_C(0x9e3779b97f4a7c15) + (h << 6) + (h >> 2);
    h = (h ^ (h >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    h = (h ^ (h >> 27)) * UINT64_C(0x94d049bb133111eb);
    return h ^ (h >> 31);
}

static uint64_t mix_bytes(uint64_t h, const void *data, size_t n)
{
    const uint8_t *p = data;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = mix(h, v);
        p += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, p, n);
    return mix(h, v ^ ((uint64_t)n << 56));
}

static uint64_t mix_float(uint64_t h, float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return mix(h, u);
}

/* Everything that changes the keys and values of a token at a position:
 * the weights (every tensor's name, type, shape and place, and samples of
 * its data: the first, middle and last 256 bytes), the cache type and
 * block size, RoPE with its scaling and frequency factors, and for a
 * recurrent model the prefill's chunk size.  Sampling
 * parameters change no key or value and are not part of it. */
uint64_t engine_identity_key(const hearth_engine *e)
{
    const hearth_gguf *g = e->model->gguf;
    uint64_t h = mix(0, UINT64_C(0x6865617274680001)); /* "hearth", version 1 of the key */
    h = mix(h, hearth_gguf_file_size(g));
    const int64_t n = hearth_gguf_n_tensors(g);
    for (int64_t i = 0; i < n; i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(g, i);
        h = mix_bytes(h, t->name, strlen(t->name));
        h = mix(h, (uint64_t)t->type);
        for (int d = 0; d < 4; d++) h = mix(h, (uint64_t)t->ne[d]);
        h = mix(h, t->offset);
        const size_t sample = t->bytes < 256 ? t->bytes : 256;
        const uint8_t *data = t->data;
        h = mix_bytes(h, data, sample);
        h = mix_bytes(h, data + (t->bytes - sample) / 2, sample);
        h = mix_bytes(h, data + t->bytes - sample, sample);
    }
    const struct rope_params *r = &e->model->hp.rope;
    h = mix(h, (uint64_t)r->style);
    h = mix(h, (uint64_t)r->n_dims);
    h = mix_float(h, r->freq_base);
    h = mix_float(h, r->freq_scale);
    if (r->freq_factors)
        for (int32_t i = 0; i < r->n_dims / 2; i++) h = mix_float(h, r->freq_factors[i]);
    h = mix(h, (uint64_t)e->params.cache_type);
    h = mix(h, (uint64_t)e->B);
    /* a recurrent state's rounding depends on the prefill's chunks (a
     * snapshot file from another chunk size would not be the bits this
     * engine computes) */
    if (hearth_model_is_recurrent(e->model))
        h = mix(h, (uint64_t)(e->params.chunk_size > 0 ? e->params.chunk_size : 1));
    return h;
}

uint64_t engine_identity(const hearth_engine *e) { return e->identity; }

/* ---- prefix cache and blocks ------------------------------------------------------ */

static void resume_point(hearth_engine *e, struct seq *s);
static hearth_status window_prefix(hearth_engine *e, struct seq *s);

hearth_status engine_grow_array(void **p, int32_t *cap, int32_t need, size_t elem, const char *what)
{
    if (need <= *cap) return HEARTH_OK;
    int32_t c = *cap ? *cap : 8;
    while (c < need) c *= 2;
    void *n = hearth_realloc(*p, (size_t)c * elem, what);
    if (!n) return HEARTH_E_NOMEM;
    *p = n;
    *cap = c;
    return HEARTH_OK;
}

/* Room for n blocks in s's table, and for their chain hashes (a block
 * is hashed only once the table holds it). */
hearth_status engine_reserve_blocks(hearth_engine *e, size_t n_blocks)
{
    if (n_blocks <= e->blocks_cap) return HEARTH_OK;
    int32_t *b = hearth_realloc(e->blocks, n_blocks * sizeof *b, "the step's block tables");
    if (!b) return HEARTH_E_NOMEM;
    e->blocks = b;
    e->blocks_cap = n_blocks;
    return HEARTH_OK;
}

hearth_status engine_table_reserve(struct seq *s, int32_t n)
{
    if (n <= s->table_cap) return HEARTH_OK;
    int32_t cap = s->table_cap;
    HEARTH_TRY(engine_grow_array((void **)&s->table, &cap, n, sizeof *s->table, "a block table"));
    uint64_t *h = hearth_realloc(s->hashes, (size_t)cap * sizeof *h, "block hashes");
    if (!h) return HEARTH_E_NOMEM; /* table_cap stays: the hashes have the old room */
    s->hashes = h;
    int32_t *w = hearth_realloc(s->wtable, (size_t)cap * sizeof *w, "a window block table");
    if (!w) return HEARTH_E_NOMEM;
    s->wtable = w;
    s->table_cap = cap;
    return HEARTH_OK;
}

/* Append block b to s's table, or to its window table. */
static hearth_status table_push(struct seq *s, bool window, int32_t b)
{
    HEARTH_TRY(engine_table_reserve(s, (window ? s->n_wtable : s->n_table) + 1));
    if (window) s->wtable[s->n_wtable++] = b;
    else s->table[s->n_table++] = b;
    return HEARTH_OK;
}

/* The chain hash of the block before s's block i (the identity key
 * before the first). */
static uint64_t parent_hash(const hearth_engine *e, const struct seq *s, int32_t i)
{
    return i == 0 ? e->identity : s->hashes[i - 1];
}

/* The chain hash of s's full block i, and its parent's in *parent. */
static uint64_t block_hash(const hearth_engine *e, const struct seq *s, int32_t i, uint64_t *parent)
{
    *parent = parent_hash(e, s, i);
    return kv_pool_hash(*parent, s->tokens + (size_t)i * e->B, e->B);
}

/* Block i of s from the disk tier: read into a block of the pool,
 * registered there as if computed, held by s (ref 1); -1 when the disk
 * has no valid file of it or the pool no room. */
static int32_t disk_take(hearth_engine *e, const struct seq *s, int32_t i, uint64_t parent, uint64_t h)
{
    const int32_t *tokens = s->tokens + (size_t)i * e->B;
    /* the file first: a block is taken from the pool (evicting the least
     * recently used cached one) only for a block that is there */
    const uint8_t *payload = disk_cache_get(e->disk, parent, h, tokens);
    if (!payload) return -1;
    const int32_t b = kv_pool_alloc(e->pool);
    if (b < 0) return -1;
    if (!kv_pool_register(e->pool, b, parent, h, tokens)) {
        kv_pool_release(e->pool, b);
        return -1;
    }
    kv_cache_load_block(runner_kv(e->runner), b, payload);
    return b;
}

/* Queue s's newly registered block i (in pool block b) for the disk
 * tier: its rows are copied now, since the block may be evicted and
 * reused before the writer gets to it. */
static void disk_put(hearth_engine *e, const struct seq *s, int32_t i, uint64_t parent, int32_t b)
{
    const struct kv_cache *kv = runner_kv(e->runner);
    if (!disk_cache_wants(e->disk, s->hashes[i])) return;
    struct disk_layout l = {.block_tokens = (uint32_t)e->B, .payload_bytes = kv_cache_block_save_bytes(kv)};
    uint8_t *file = malloc(disk_file_bytes(&l));
    if (!file) return; /* a cache: the block is just not written */
    kv_cache_save_block(kv, b, file + disk_header_bytes(&l));
    disk_cache_put(e->disk, parent, s->hashes[i], s->tokens + (size_t)i * e->B, file);
}

/* Take the cached blocks of s's known tokens, leaving at least the last
 * token to compute (its logits are needed): from the pool, else from the
 * disk tier.  Returns the positions covered. */
hearth_status engine_take_prefix(hearth_engine *e, struct seq *s)
{
    const int32_t B = e->B;
    const int32_t n_full = (s->n_tokens - 1) / B;
    if (e->params.no_prefix_cache || n_full == 0 || !engine_embed_takes_prefix(e, s)) return HEARTH_OK;
    for (int32_t i = 0; i < n_full; i++) {
        uint64_t parent;
        const uint64_t h = block_hash(e, s, i, &parent);
        int32_t b = kv_pool_lookup(e->pool, parent, h, s->tokens + (size_t)i * B);
        if (b >= 0) kv_pool_ref(e->pool, b);
        else if (e->disk && (b = disk_take(e, s, i, parent, h)) >= 0) s->n_disk += B;
        if (b < 0) break;
        hearth_status st = table_push(s, false, b);
        if (st) {
            kv_pool_release(e->pool, b);
            return st;
        }
        s->hashes[i] = h;
        s->n_hashed = i + 1;
        s->n_computed = (i + 1) * B;
    }
    if (e->snaps) resume_point(e, s);
    if (e->wpool) HEARTH_TRY(window_prefix(e, s));
    if (e->block_h && s->mtp_h && s->n_computed > 0) {
        /* the prediction layer's input at the resume point: the trunk's
         * hidden state at the last cached position, kept with its block */
        const size_t E = (size_t)hearth_model_n_embd(e->model);
        memcpy(s->mtp_h, e->block_h + (size_t)s->table[s->n_computed / B - 1] * E, E * sizeof *s->mtp_h);
        s->mtp_pos = s->n_computed;
    }
    return HEARTH_OK;
}

/* The first block of the window of a sequence whose next position is n:
 * the blocks before it lie wholly before the window of every row it has
 * still to compute. */
static int32_t window_first_block(const hearth_engine *e, int32_t window, int32_t n)
{
    return HEARTH_MAX(0, n + 1 - window) / e->B;
}

/* With a window space, a cached prefix of k blocks serves only when the
 * window pool still holds its last window's blocks (registered under
 * the same chain hashes): the deepest such k is kept, the blocks past it
 * given back, and the window table has -1 before its window. */
static hearth_status window_prefix(hearth_engine *e, struct seq *s)
{
    const int32_t B = e->B;
    int32_t k = s->n_table, lo = 0;
    for (; k > 0; k--) {
        lo = window_first_block(e, e->wwindow, k * B);
        bool whole = true;
        for (int32_t i = 0; i < k; i++) {
            int32_t b = -1;
            if (i >= lo) {
                b = kv_pool_lookup(e->wpool, parent_hash(e, s, i), s->hashes[i], s->tokens + (size_t)i * B);
                whole = b >= 0;
                if (!whole) break;
                kv_pool_ref(e->wpool, b);
            }
            s->wtable[s->n_wtable++] = b; /* room: table_cap entries, k at most */
        }
        if (whole) break;
        while (s->n_wtable > 0) {
            const int32_t b = s->wtable[--s->n_wtable];
            if (b >= 0) kv_pool_release(e->wpool, b);
        }
    }
    while (s->n_table > k) kv_pool_release(e->pool, s->table[--s->n_table]);
    s->n_hashed = k;
    s->n_computed = k * B;
    s->n_wdropped = k > 0 ? lo : 0;
    return HEARTH_OK;
}

/* ---- recurrent-state snapshots ------------------------------------------------------ */

/* The snapshot of the state after n_pos positions whose last block has
 * chain hash h, or -1. */
static int32_t snapshot_find(const hearth_engine *e, uint64_t h, int32_t n_pos)
{
    for (int32_t k = 0; k < e->n_snaps; k++)
        if (e->snaps[k].n_pos == n_pos && e->snaps[k].hash == h) return k;
    return -1;
}

/* The entry a new snapshot takes: a free one, else the least recently
 * used. */
static int32_t snapshot_victim(const hearth_engine *e)
{
    int32_t k = 0;
    for (int32_t i = 1; i < e->n_snaps && e->snaps[k].n_pos > 0; i++)
        if (e->snaps[i].n_pos == 0 || e->snaps[i].used < e->snaps[k].used) k = i;
    return k;
}

/* A snapshot file's payload: the state of every layer that keeps one,
 * then the prediction layer's input (with one). */
static size_t snapshot_payload_bytes(const hearth_engine *e)
{
    const size_t E = (size_t)hearth_model_n_embd(e->model);
    return rstate_bytes_per_seq(runner_rstate(e->runner)) + (e->snap_h ? E * sizeof *e->snap_h : 0);
}

/* Queue snapshot k, of s's first snaps[k].n_pos positions, for the disk
 * tier: its state is copied now (the entry may be reused before the
 * writer gets to it). */
static void disk_put_state(hearth_engine *e, const struct seq *s, int32_t k)
{
    const struct snapshot *sn = &e->snaps[k];
    const int32_t i = sn->n_pos / e->B - 1;
    if (!disk_cache_wants_state(e->disk, sn->hash, (uint32_t)sn->n_pos)) return;
    const struct disk_state_layout l = {.block_tokens = (uint32_t)e->B, .payload_bytes = snapshot_payload_bytes(e)};
    uint8_t *file = malloc(disk_state_file_bytes(&l));
    if (!file) return; /* a cache: the snapshot is just not written */
    uint8_t *p = file + disk_state_header_bytes(&l);
    const struct rstate *rs = runner_rstate(e->runner);
    memcpy(p, rstate_slot(rs, sn->slot), rstate_bytes_per_seq(rs));
    if (e->snap_h) {
        const size_t E = (size_t)hearth_model_n_embd(e->model);
        memcpy(p + rstate_bytes_per_seq(rs), e->snap_h + (size_t)k * E, E * sizeof *e->snap_h);
    }
    disk_cache_put_state(e->disk, parent_hash(e, s, i), sn->hash, (uint32_t)sn->n_pos,
                         s->tokens + (size_t)i * e->B, file);
}

/* The snapshot after s's block i from the disk tier, read into an entry
 * as if kept; -1 when the disk has no valid file of it. */
static int32_t disk_take_state(hearth_engine *e, const struct seq *s, int32_t i)
{
    const int32_t n_pos = (i + 1) * e->B;
    const uint8_t *p = disk_cache_get_state(e->disk, parent_hash(e, s, i), s->hashes[i], (uint32_t)n_pos,
                                            s->tokens + (size_t)i * e->B);
    if (!p) return -1;
    const int32_t k = snapshot_victim(e);
    struct snapshot *sn = &e->snaps[k];
    const struct rstate *rs = runner_rstate(e->runner);
    memcpy(rstate_slot(rs, sn->slot), p, rstate_bytes_per_seq(rs));
    if (e->snap_h) {
        const size_t E = (size_t)hearth_model_n_embd(e->model);
        memcpy(e->snap_h + (size_t)k * E, p + rstate_bytes_per_seq(rs), E * sizeof *e->snap_h);
    }
    sn->hash = s->hashes[i];
    sn->n_pos = n_pos;
    sn->used = ++e->snap_tick;
    return k;
}

/* A recurrent sequence can resume only where a state was kept: of the
 * cached blocks s took, it keeps those up to the deepest boundary with a
 * snapshot, held or on disk (its state is copied when the sequence gets
 * its slot, engine_take_state()), and gives the rest back. */
static void resume_point(hearth_engine *e, struct seq *s)
{
    int32_t keep = 0;
    s->resume = -1;
    for (int32_t i = s->n_table - 1; i >= 0 && s->resume < 0; i--) {
        s->resume = snapshot_find(e, s->hashes[i], (i + 1) * e->B);
        if (s->resume < 0 && e->disk && (s->resume = disk_take_state(e, s, i)) >= 0)
            s->n_disk = HEARTH_MAX(s->n_disk, (i + 1) * e->B); /* every position resumed from disk */
        if (s->resume >= 0) keep = i + 1;
    }
    while (s->n_table > keep) kv_pool_release(e->pool, s->table[--s->n_table]);
    s->n_hashed = keep;
    s->n_computed = keep * e->B;
}

/* The last block boundary before s's last known token: where its prompt
 * (or, after a preemption, everything it knows) can be resumed from. */
static int32_t last_boundary(const hearth_engine *e, int32_t n_tokens)
{
    return n_tokens > 0 ? (n_tokens - 1) / e->B * e->B : 0;
}

/* A prefill chunk of up to n rows for s: one that would run past the last
 * boundary of a recurrent sequence's known tokens stops there, so that
 * the state at that boundary can be kept (engine_keep_snapshot()). */
int32_t engine_prefill_chunk(const hearth_engine *e, const struct seq *s, int32_t n)
{
    if (!e->snaps) return n;
    const int32_t b = last_boundary(e, s->n_tokens);
    return s->n_computed < b && s->n_computed + n > b ? b - s->n_computed : n;
}

/* After a step: when s's state stands at a block boundary worth keeping,
 * save it.  Two kinds are kept: the last boundary of a prompt (or of
 * what a preempted sequence knows), which every request sharing that
 * prefix can resume from, and the latest boundary of the sequence's own
 * generation, which replaces its previous one (a chat's next turn
 * resumes there).  A snapshot already kept is only marked used; a new
 * one takes a free entry, else the least recently used.  With a disk
 * tier, a prompt's snapshot is queued to be written at once, a
 * generation's when its sequence ends (engine_snapshot_to_disk()). */
void engine_keep_snapshot(hearth_engine *e, struct seq *s)
{
    const int32_t B = e->B, n = s->n_computed;
    if (!e->snaps || s->state_slot < 0 || n == 0 || n % B != 0 || s->n_hashed < n / B) return;
    const bool own = n > last_boundary(e, s->req->n_prompt);
    if (!own && n != last_boundary(e, s->n_tokens)) return; /* a boundary inside a prompt */
    const uint64_t h = s->hashes[n / B - 1];
    int32_t k = snapshot_find(e, h, n);
    if (k >= 0) {
        e->snaps[k].used = ++e->snap_tick;
        return;
    }
    if (own && s->own_snap >= 0 && e->snaps[s->own_snap].hash == s->own_hash) k = s->own_snap;
    else k = snapshot_victim(e);
    struct snapshot *sn = &e->snaps[k];
    rstate_copy(runner_rstate(e->runner), sn->slot, s->state_slot);
    if (e->snap_h) {
        /* the prediction layer's input at the boundary goes with it */
        const size_t E = (size_t)hearth_model_n_embd(e->model);
        if (s->mtp_pos == n) memcpy(e->snap_h + (size_t)k * E, s->mtp_h, E * sizeof *e->snap_h);
        else memset(e->snap_h + (size_t)k * E, 0, E * sizeof *e->snap_h);
    }
    sn->hash = h;
    sn->n_pos = n;
    sn->used = ++e->snap_tick;
    if (own) {
        s->own_snap = k;
        s->own_hash = h;
    } else if (e->disk) {
        disk_put_state(e, s, k);
    }
}

/* A sequence that ends: the snapshot of its generation's latest
 * boundary, where a chat's next turn resumes, is replaced no more and
 * goes to the disk tier (when the engine still holds it). */
void engine_snapshot_to_disk(hearth_engine *e, struct seq *s)
{
    if (!e->disk || !e->snaps || s->own_snap < 0) return;
    const struct snapshot *sn = &e->snaps[s->own_snap];
    const int32_t i = sn->n_pos / e->B - 1;
    if (sn->n_pos > 0 && sn->hash == s->own_hash && i < s->n_hashed && s->hashes[i] == sn->hash)
        disk_put_state(e, s, s->own_snap);
}

/* Register the blocks s has filled since the last call. */
hearth_status engine_register_full_blocks(hearth_engine *e, struct seq *s)
{
    const int32_t B = e->B;
    const int32_t n_full = s->n_computed / B;
    if (e->params.no_prefix_cache || n_full <= s->n_hashed) return HEARTH_OK;
    for (int32_t i = s->n_hashed; i < n_full; i++) {
        uint64_t parent;
        s->hashes[i] = block_hash(e, s, i, &parent);
        if (kv_pool_register(e->pool, s->table[i], parent, s->hashes[i], s->tokens + (size_t)i * B) && e->disk)
            disk_put(e, s, i, parent, s->table[i]);
        /* the window's block of the same positions, under the same hash */
        if (e->wpool && i < s->n_wtable && s->wtable[i] >= 0)
            kv_pool_register(e->wpool, s->wtable[i], parent, s->hashes[i], s->tokens + (size_t)i * B);
    }
    s->n_hashed = n_full;
    return HEARTH_OK;
}

/* Give back the blocks of a table wholly before the window of a
 * sequence whose next position is n (to the prefix cache when
 * registered), their entries -1. */
static void drop_before_window(hearth_engine *e, struct kv_pool *pool, int32_t *table, int32_t n_table,
                               int32_t *n_dropped, int32_t window, int32_t n)
{
    const int32_t n_old = HEARTH_MIN(window_first_block(e, window, n), n_table);
    for (; *n_dropped < n_old; (*n_dropped)++) {
        kv_pool_release(pool, table[*n_dropped]);
        table[*n_dropped] = -1;
    }
}

/* A sliding layer reads, for its next row at position n_computed, keys
 * from n_computed + 1 - W on, and the CPU attention starts reading at the
 * block holding that position (see cpu_attention): every block wholly
 * before it goes back to its pool.  That is the whole table of a model
 * whose layers all slide, and the window table of a window space. */
void engine_drop_outside_window(hearth_engine *e, struct seq *s)
{
    if (e->window > 0) drop_before_window(e, e->pool, s->table, s->n_table, &s->n_dropped, e->window, s->n_computed);
    if (e->wpool)
        drop_before_window(e, e->wpool, s->wtable, s->n_wtable, &s->n_wdropped, e->wwindow, s->n_computed);
}

/* Make room in one of s's tables (window: the window table, its blocks
 * from the window pool) for positions first .. end - 1: new blocks where
 * the table ends, a private copy of a shared block that would be written
 * (copy-on-write).  Stops at the first block it cannot get; *n_room: how
 * many of the positions have room. */
static hearth_status table_room(hearth_engine *e, struct seq *s, bool window, int32_t first, int32_t end,
                                int32_t *n_room)
{
    const int32_t B = e->B;
    struct kv_pool *pool = window ? e->wpool : e->pool;
    *n_room = 0;
    for (int32_t bi = first / B; bi * B < end; bi++) {
        const int32_t have_to = HEARTH_MIN(end, (bi + 1) * B);
        int32_t *table = window ? s->wtable : s->table;
        if (bi < (window ? s->n_wtable : s->n_table)) {
            const int32_t old = table[bi];
            /* a registered block is written only after a rollback into it:
             * its cached contents must stay */
            if (kv_pool_refs(pool, old) > 1 || kv_pool_registered(pool, old)) {
                const int32_t b = kv_pool_alloc(pool);
                if (b < 0) return HEARTH_OK;
                hearth_status st = runner_copy_block(e->runner, old, b, first - bi * B, window);
                if (st) {
                    kv_pool_release(pool, b);
                    return st;
                }
                kv_pool_release(pool, old);
                table[bi] = b;
                if (s->n_hashed > bi) s->n_hashed = bi;
            }
        } else {
            const int32_t b = kv_pool_alloc(pool);
            if (b < 0) return HEARTH_OK;
            hearth_status st = table_push(s, window, b);
            if (st) {
                kv_pool_release(pool, b);
                return st;
            }
        }
        *n_room = have_to - first;
    }
    return HEARTH_OK;
}

/* Room for positions n_computed .. n_computed + n - 1 in s's table and,
 * with a window space, in its window table; returns how many of the n
 * positions have room in both. */
hearth_status engine_make_room(hearth_engine *e, struct seq *s, int32_t n, int32_t *n_room)
{
    HEARTH_TRY(table_room(e, s, false, s->n_computed, s->n_computed + n, n_room));
    if (e->wpool && *n_room > 0) HEARTH_TRY(table_room(e, s, true, s->n_computed, s->n_computed + *n_room, n_room));
    return HEARTH_OK;
}

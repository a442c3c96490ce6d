/*
 * rstate.c -- allocation and snapshots of the recurrent states (rstate.h).
 */
#include "rstate.h"

#include <stdlib.h>
#include <string.h>

/* States as rstate_new() makes them, all zero when `zero` (else their
 * pages are untouched until written). */
static hearth_status make_states(int32_t n_slots, int32_t n_layer, size_t layer_floats, const bool *stateless,
                                 bool zero, struct rstate **out)
{
    size_t per_slot, n;
    int32_t n_state = 0;
    for (int32_t il = 0; il < n_layer; il++) n_state += !(stateless && stateless[il]);
    if (n_slots <= 0 || n_state <= 0 || layer_floats == 0 ||
        hearth_mul_overflow((size_t)n_state, layer_floats, &per_slot) ||
        hearth_mul_overflow(per_slot, (size_t)n_slots, &n) || n > SIZE_MAX / sizeof(float))
        return hearth_error(HEARTH_E_INVALID, "recurrent state of %d sequences x %d layers x %zu "
                            "floats is invalid", n_slots, n_layer, layer_floats);
    struct rstate *rs = hearth_calloc(1, sizeof *rs, "the recurrent state");
    if (!rs) return HEARTH_E_NOMEM;
    rs->n_slots = n_slots;
    rs->n_layer = n_layer;
    rs->n_state_layers = n_state;
    rs->layer_floats = layer_floats;
    rs->snapshot_pos = -1;
    rs->index = hearth_calloc((size_t)n_layer, sizeof *rs->index, "the recurrent state");
    if (!rs->index) {
        free(rs);
        return HEARTH_E_NOMEM;
    }
    for (int32_t il = 0, k = 0; il < n_layer; il++) rs->index[il] = stateless && stateless[il] ? -1 : k++;
    rs->data = hearth_aligned_alloc(64, n * sizeof(float), "the recurrent state");
    if (!rs->data) {
        free(rs->index);
        free(rs);
        return hearth_error(HEARTH_E_NOMEM, "out of memory for the recurrent state of %d "
                            "sequences (%zu bytes each)", n_slots, per_slot * sizeof(float));
    }
    if (zero) memset(rs->data, 0, n * sizeof(float));
    *out = rs;
    return HEARTH_OK;
}

hearth_status rstate_new(int32_t n_slots, int32_t n_layer, size_t layer_floats, const bool *stateless,
                         struct rstate **out)
{
    return make_states(n_slots, n_layer, layer_floats, stateless, true, out);
}

void rstate_free(struct rstate *rs)
{
    if (!rs) return;
    hearth_aligned_free(rs->data);
    hearth_aligned_free(rs->snapshot);
    free(rs->index);
    free(rs);
}

size_t rstate_bytes_per_seq(const struct rstate *rs)
{
    return rs ? (size_t)rs->n_state_layers * rs->layer_floats * sizeof(float) : 0;
}

hearth_status rstate_new_like(const struct rstate *rs, int32_t n_slots, struct rstate **out)
{
    bool *stateless = hearth_calloc((size_t)rs->n_layer, sizeof *stateless, "the recurrent state");
    if (!stateless) return HEARTH_E_NOMEM;
    for (int32_t il = 0; il < rs->n_layer; il++) stateless[il] = rs->index[il] < 0;
    hearth_status st = make_states(n_slots, rs->n_layer, rs->layer_floats, stateless, false, out);
    free(stateless);
    return st;
}

void rstate_copy_from(struct rstate *rs, int32_t dst, const struct rstate *from, int32_t src)
{
    memcpy(rstate_slot(rs, dst), rstate_slot(from, src), rstate_bytes_per_seq(rs));
}

void rstate_copy(struct rstate *rs, int32_t dst, int32_t src)
{
    if (dst != src) rstate_copy_from(rs, dst, rs, src);
}

hearth_status rstate_save(struct rstate *rs, int32_t slot, int32_t pos)
{
    const size_t bytes = rstate_bytes_per_seq(rs);
    if (!rs->snapshot) {
        rs->snapshot = hearth_aligned_alloc(64, bytes, "a recurrent state snapshot");
        if (!rs->snapshot) return HEARTH_E_NOMEM;
    }
    memcpy(rs->snapshot, rstate_slot(rs, slot), bytes);
    rs->snapshot_pos = pos;
    return HEARTH_OK;
}

void rstate_restore(const struct rstate *rs, int32_t slot)
{
    memcpy(rstate_slot(rs, slot), rs->snapshot, rstate_bytes_per_seq(rs));
}

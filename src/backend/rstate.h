/*
 * rstate.h -- the recurrent state of sequences: what a recurrent layer
 * (RWKV-6, models/rwkv6.c) keeps instead of keys and values.  Each slot
 * holds one sequence's state for every layer, a fixed number of floats
 * per layer however long the sequence is (the token-shift rows, then the
 * WKV state of every head).  A sequence's slot is named in its batch
 * (struct batch_pos, state_slot) as its KV blocks are in its block table.
 *
 * A state summarizes every position before it: it cannot be cut back to
 * an earlier position.  Rewinding a recurrent sequence is possible only to
 * position 0 (a fresh state) or to a position whose state was saved
 * (rstate_save / rstate_restore, a snapshot).  The layers start a
 * sequence's state from zero at its position 0.
 */
#ifndef HEARTH_RSTATE_H
#define HEARTH_RSTATE_H

#include "internal.h"

struct rstate {
    int32_t n_slots;       /* sequences that hold a state at once */
    int32_t n_layer;       /* the model's layers */
    int32_t n_state_layers; /* of those, the ones that keep a state (all
                            * but a hybrid family's attention layers) */
    int32_t *index;        /* n_layer: a layer's place among those, -1: none */
    size_t layer_floats;   /* per slot and layer that keeps a state */
    float *data;           /* n_slots x n_state_layers x layer_floats */
    float *snapshot;       /* one saved slot (rstate_bytes_per_seq()), or NULL */
    int32_t snapshot_pos;  /* the position it was saved at; -1: none */
};

/* States of n_slots sequences for a model of n_layer layers, of which
 * those with stateless[il] keep none (stateless NULL: every layer keeps
 * one). */
hearth_status rstate_new(int32_t n_slots, int32_t n_layer, size_t layer_floats, const bool *stateless,
                         struct rstate **out);
void rstate_free(struct rstate *rs);

/* Layer il's state of slot (il keeps one). */
static inline float *rstate_layer(const struct rstate *rs, int32_t slot, int32_t il)
{
    return rs->data + ((size_t)slot * (size_t)rs->n_state_layers + (size_t)rs->index[il]) * rs->layer_floats;
}

/* Slot's whole state (every layer), rstate_bytes_per_seq() bytes. */
static inline float *rstate_slot(const struct rstate *rs, int32_t slot)
{
    return rs->data + (size_t)slot * (size_t)rs->n_state_layers * rs->layer_floats;
}

/* Bytes of one sequence's state (every layer). */
size_t rstate_bytes_per_seq(const struct rstate *rs);

/* Copy slot src's state to slot dst. */
void rstate_copy(struct rstate *rs, int32_t dst, int32_t src);

/* States of n_slots sequences laid out as rs's (checkpoints of them),
 * holding nothing until written: a slot is read only after a copy or an
 * operation wrote it (its memory is not touched before, so a large
 * store costs only what is used). */
hearth_status rstate_new_like(const struct rstate *rs, int32_t n_slots, struct rstate **out);
/* Copy slot src of from to slot dst of rs (both laid out alike). */
void rstate_copy_from(struct rstate *rs, int32_t dst, const struct rstate *from, int32_t src);

/* Save slot's state as the snapshot of position pos, and put it back. */
hearth_status rstate_save(struct rstate *rs, int32_t slot, int32_t pos);
void rstate_restore(const struct rstate *rs, int32_t slot);

#endif /* HEARTH_RSTATE_H */

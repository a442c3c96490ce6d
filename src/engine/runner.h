/*
 * runner.h -- the forward pass over one batch of tokens from any number
 * of sequences: the backends a model's layers run on, their activation
 * buffers, the KV storage of a pool, and the logits of the rows that need
 * them.
 *
 * Every weight matrix is applied once to all the batch's rows (decode
 * tokens and prompt chunks of different sequences together, one GEMM);
 * attention reads each row's own sequence through its block table
 * (struct batch_pos); the LM head runs only for the rows asked for.  A
 * row's results depend only on its own token, position and sequence, never
 * on the other rows of the batch (DESIGN.md, "Batch invariance").
 *
 * A hearth_context (one sequence) and a hearth_engine (many) both run on
 * a runner.
 */
#ifndef HEARTH_RUNNER_H
#define HEARTH_RUNNER_H

#include "backend.h"
#include "kv_cache.h"
#include "model.h"

struct runner_params {
    int32_t n_batch;       /* most rows per step */
    int32_t n_ctx;         /* most positions of one sequence */
    int32_t n_threads;
    hearth_type cache_type;
    int32_t block_tokens;  /* positions per KV block */
    int32_t n_blocks;      /* blocks of the pool */
    int32_t n_blocks_window; /* a model mixing sliding-window and full
                            * layers, every layer on the host: blocks of
                            * the sliding layers' own space (kv_cache.h);
                            * 0: they share the pool's blocks */
    int32_t n_states;      /* recurrent models: sequences holding a state at
                            * once (state slots, rstate.h); 0: 1 */
    int32_t chunk_size;    /* recurrent models: tokens per chunk of a
                            * prompt; 0: the default (DESIGN.md) */
    bool mtp;              /* run the model's prediction layer too
                            * (runner_eval_mtp(); model.h, n_mtp): its keys
                            * and values in the same blocks, one layer
                            * more, and every step keeps the output-normed
                            * hidden state of its rows (runner_hidden()) */
};

struct runner;

/* One step: n rows (bp.n_tokens) of tokens with their places, the rows
 * whose logits are wanted (increasing), and the rows whose output-normed
 * hidden state is wanted (increasing; embeddings, pooling.h). */
struct runner_step {
    const int32_t *tokens;
    struct batch_pos bp;
    const int32_t *logit_rows;
    int32_t n_logits;
    const int32_t *hidden_rows;
    int32_t n_hidden;
};

/* The sizes a context and an engine share, resolved and checked: n_ctx
 * (0: the model's training context, at most 4096; at most 2^24), n_batch
 * (0: 512) and n_threads (0: one per processor; at most 1024). */
hearth_status runner_resolve_sizes(const hearth_model *model, int32_t *n_ctx, int32_t *n_batch,
                                   int32_t *n_threads);

/* A runner for the model; with offloaded layers, their KV blocks live on
 * the device (or, when that fails and the model allows it, everything runs
 * on the CPU and runner_gpu_fallback() says why). */
hearth_status runner_new(const hearth_model *model, const struct runner_params *params,
                         struct runner **out);
void runner_free(struct runner *r);

/* Run one step (1 .. n_batch rows; the caller guarantees the places are
 * valid).  Logits of the wanted rows are read with runner_logits(). */
hearth_status runner_eval(struct runner *r, const struct runner_step *step);
const float *runner_logits(const struct runner *r, int32_t i);

/* Steps in flight (DESIGN.md, "Several machines"): runner_submit() begins
 * a step and runner_collect() takes the results of the oldest step
 * submitted and not yet collected (runner_logits(), runner_output_hidden()
 * then read them), in the order submitted; runner_eval() is refused while
 * any is in flight.  On rank 0 of a pipeline of stages (without tensor
 * parallelism), a submission runs rank 0's layers and hands the step on
 * without waiting, so that up to runner_max_in_flight() steps (the
 * stages, at most RUNNER_IN_FLIGHT_MAX) keep every rank working; a
 * collection waits for the last rank's answer.  Elsewhere a submission
 * runs the whole step and keeps its results for the collection (the
 * engine's tests run its groups so in one process). */
#define RUNNER_IN_FLIGHT_MAX 8
int32_t runner_max_in_flight(const struct runner *r);
int32_t runner_in_flight(const struct runner *r);
hearth_status runner_submit(struct runner *r, const struct runner_step *step);
hearth_status runner_collect(struct runner *r);

/* A rank other than 0 of a pipeline (model.h, stage_first): run this
 * rank's layers over the step that rank 0 began, from x, the hidden state
 * of its rows (n_embd floats each) as the rank before handed it on; then
 * hand it on to the next rank, or, on the last, answer rank 0 with the
 * logits and hidden states it wants (dist/pipeline.h); id: the runner's
 * in the messages, as rank 0 named it. */
hearth_status runner_eval_stage(struct runner *r, int32_t id, const struct runner_step *step, const float *x);

/* With params.mtp: the prediction layer over one batch of rows, each with
 * its token and, in h (n_embd floats a row), the trunk's output-normed
 * hidden state of the position before (or the prediction layer's own, of
 * the token before, when drafting further).  Its keys and values go to
 * the rows' slots; the logits of the wanted rows replace those of the last
 * step only when step->n_logits > 0.  runner_mtp_hidden() gives each
 * row's output-normed hidden state. */
hearth_status runner_eval_mtp(struct runner *r, const struct runner_step *step, const float *h);
/* Row i's output-normed hidden state (n_embd floats) of the last
 * runner_eval() and of the last runner_eval_mtp(). */
const float *runner_hidden(const struct runner *r, int32_t i);
const float *runner_mtp_hidden(const struct runner *r, int32_t i);
/* The output-normed hidden state (n_embd floats) of the i-th of the last
 * runner_eval()'s hidden_rows: the output layer's input, the same bits
 * whatever else the step held. */
const float *runner_output_hidden(const struct runner *r, int32_t i);

/* Copy the first n_rows rows of KV block src into block dst of one space
 * (the window space's or the other's), on every backend holding layers
 * of the cache. */
hearth_status runner_copy_block(struct runner *r, int32_t src, int32_t dst, int32_t n_rows, bool window);

const struct kv_cache *runner_kv(const struct runner *r);
/* The recurrent states (NULL for attention models, whose KV cache then
 * holds everything a sequence keeps). */
struct rstate *runner_rstate(const struct runner *r);
/* Bytes a sequence keeps: its recurrent state, or its KV cache. */
size_t runner_memory_bytes(const struct runner *r);
/* The layers that keep keys and values (all but a recurrent family's
 * linear ones). */
int32_t runner_kv_layers(const struct runner *r);
const struct runner_params *runner_params(const struct runner *r);
int32_t runner_n_gpu_layers(const struct runner *r);
const char *runner_gpu_fallback(const struct runner *r);
/* Bytes of KV cache held on the device, and of the runner_memory_bytes()
 * in host memory. */
size_t runner_kv_device_bytes(const struct runner *r);
size_t runner_host_bytes(const struct runner *r);

/* A function polled between layers; when it returns true, runner_eval()
 * stops with HEARTH_E_INTERRUPTED. */
void runner_set_abort(struct runner *r, bool (*should_abort)(void *data), void *data);

#endif /* HEARTH_RUNNER_H */

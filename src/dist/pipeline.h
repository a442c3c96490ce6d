/*
 * pipeline.h -- the messages of a pipeline between ranks, as the runner
 * sends and receives them (hearth.h, "Pipeline parallelism"; DESIGN.md,
 * "Several machines").
 *
 * Rank 0's runner runs the first layers of every step, then hands the
 * step on: pipe_send_step() gives rank 1 the step's description (rows'
 * positions and slots, the sequences' rows and block tables, the rows
 * whose logits and output-normed hidden states are wanted) and the rows'
 * hidden state; each rank runs its layers (runner_eval_stage()) and hands
 * the step on the same way, and the last rank sends the wanted logits and
 * hidden states back to rank 0 (pipe_send_out(), pipe_recv_out()).  A
 * runner made on rank 0 is made on every rank with the same parameters
 * (pipe_setup()), freed with it (pipe_release()), and its block copies
 * are made on every rank (pipe_copy_block()); the other ranks' loop
 * (hearth_pipeline_serve(), engine/stage.c) takes these from pipe_recv().
 *
 * A rank that fails a step passes the failure on instead of the step;
 * rank 0 gets it from the last rank as the step's answer.  Rank 0 waits
 * for an answer at most the pipeline's timeout, and every send and
 * receive returns an error where MPI reports one, so a dead rank fails the
 * step with a message rather than a wait without end.
 *
 * pipeline_mpi.c implements this over MPI; pipeline_none.c, built without
 * MPI, only refuses to open a pipeline.
 */
#ifndef HEARTH_DIST_PIPELINE_H
#define HEARTH_DIST_PIPELINE_H

#include "internal.h"

#include "backend.h"
#include "tp_group.h"

int32_t pipe_rank(const struct hearth_pipeline *p);
int32_t pipe_size(const struct hearth_pipeline *p);

/* What the other ranks need to make a runner like rank 0's (runner.h,
 * struct runner_params; each rank its own thread count). */
struct pipe_setup {
    int32_t n_batch, n_ctx;
    hearth_type cache_type;
    int32_t block_tokens, n_blocks, n_blocks_window, chunk_size;
};

/* The rows of a step a rank hands on: their places (a batch_pos without
 * recurrent states), the rows whose logits and output-normed hidden
 * states are wanted, and their hidden state (n_embd floats a row). */
struct pipe_step {
    struct batch_pos bp;
    const int32_t *logit_rows;
    int32_t n_logits;
    const int32_t *hidden_rows;
    int32_t n_hidden;
    const float *x;
    int64_t n_embd;
};

/* Rank 0: every other rank makes a runner (pipe_recv(): PIPE_SETUP);
 * fails when one cannot.  *id names it in the messages below (rank 0
 * may hold several runners: a context and an engine). */
hearth_status pipe_setup(struct hearth_pipeline *p, const struct pipe_setup *setup, int32_t *id);
/* Rank 0: every other rank frees its runner id. */
void pipe_release(struct hearth_pipeline *p, int32_t id);
/* Rank 0: every other rank copies a KV block (runner_copy_block()). */
hearth_status pipe_copy_block(struct hearth_pipeline *p, int32_t id, int32_t src, int32_t dst, int32_t n_rows,
                              bool window);
/* Hand a step of runner id on to the next rank; block_tokens says how
 * long the block tables are. */
hearth_status pipe_send_step(struct hearth_pipeline *p, int32_t id, const struct pipe_step *step,
                             int32_t block_tokens);
/* A rank but the last of a pipeline without tensor parallelism: hand a
 * step on as pipe_send_step() does, without waiting for the send to
 * complete, so that this rank can run the next step's layers while this
 * one is on the next ranks.  On rank 0, its answer is taken by a later
 * pipe_recv_out(): answers come back in the order the steps were handed
 * on, checked by the steps' serial numbers, and while steps are in
 * flight (pipe_in_flight()) a step sent with pipe_send_step() and a
 * pipe_setup() are refused.  The sends complete while the rank waits for
 * a message, or in pipe_progress(), which it calls between its layers. */
hearth_status pipe_post_step(struct hearth_pipeline *p, int32_t id, const struct pipe_step *step,
                             int32_t block_tokens);
void pipe_progress(struct hearth_pipeline *p);
/* Rank 0: steps handed on whose answers are not taken yet. */
int64_t pipe_in_flight(const struct hearth_pipeline *p);
/* A stage's first rank: the step as it enters the stage's layers, to the
 * stage's other ranks (tensor parallelism), which run them alongside. */
hearth_status pipe_send_peers(struct hearth_pipeline *p, int32_t id, const struct pipe_step *step,
                              int32_t block_tokens);
/* The last rank: the step's answer to rank 0, logits (n_logits floats)
 * then hidden states (n_hidden floats). */
hearth_status pipe_send_out(struct hearth_pipeline *p, const float *logits, int64_t n_logits, const float *hidden,
                            int64_t n_hidden);
/* Rank 0: the answer to the oldest step handed on and not yet answered,
 * into logits and hidden (as many floats as pipe_send_out() sent). */
hearth_status pipe_recv_out(struct hearth_pipeline *p, float *logits, int64_t n_logits, float *hidden,
                            int64_t n_hidden);

/* A step failed halfway on a rank of a stage of several: its ranks are
 * out of step, and the pipeline is broken with the error st. */
void pipe_break(struct hearth_pipeline *p, hearth_status st);

/* A rank other than 0: the next message from the rank before, as long as
 * it takes.  Setups, copies, releases and the end are handed on to the
 * next rank before pipe_recv() returns them; a step is handed on by
 * pipe_send_step() once this rank has run its layers, and a failure
 * passed on from an earlier rank goes on towards rank 0 by itself (it is
 * never returned). */
enum pipe_kind { PIPE_SETUP = 1, PIPE_STEP, PIPE_COPY, PIPE_RELEASE, PIPE_QUIT };
struct pipe_msg {
    enum pipe_kind kind;
    int32_t id;                 /* the runner */
    struct pipe_setup setup;    /* PIPE_SETUP */
    struct pipe_step step;      /* PIPE_STEP: its arrays are valid until the next pipe_recv() */
    int32_t src, dst, n_rows;   /* PIPE_COPY */
    bool window;
};
hearth_status pipe_recv(struct hearth_pipeline *p, int64_t n_embd, struct pipe_msg *msg);
/* This rank made its runner for the setup msg: hand it on (the last
 * rank: answer rank 0's pipe_setup()). */
hearth_status pipe_setup_done(struct hearth_pipeline *p, const struct pipe_msg *msg);
/* This rank failed the last message (the error is hearth_last_error()):
 * the failure goes on towards rank 0, naming this rank. */
hearth_status pipe_fail(struct hearth_pipeline *p, hearth_status st);

#endif /* HEARTH_DIST_PIPELINE_H */

/*
 * pipeline_none.c -- a build without MPI: the pipeline functions exist
 * (hearth.h), and opening a pipeline says why it cannot be.
 */
#include "internal.h"

#include "hearth.h"
#include "pipeline.h"

hearth_status hearth_pipeline_open(int32_t n_ranks, int32_t timeout_ms, hearth_pipeline **out)
{
    (void)n_ranks;
    (void)timeout_ms;
    if (out) *out = NULL;
    return hearth_error(HEARTH_E_UNSUPPORTED, "this hearth was built without MPI: no pipeline of ranks "
                        "(configure --with-mpi)");
}

hearth_status hearth_pipeline_open_tp(int32_t n_stages, int32_t n_tp, int32_t timeout_ms, hearth_pipeline **out)
{
    (void)n_stages;
    (void)n_tp;
    return hearth_pipeline_open(2, timeout_ms, out);
}

/* Nothing below is reached: no pipeline can be opened. */
int32_t hearth_pipeline_rank(const hearth_pipeline *p) { (void)p; return 0; }
int32_t hearth_pipeline_size(const hearth_pipeline *p) { (void)p; return 1; }
int32_t hearth_pipeline_stages(const hearth_pipeline *p) { (void)p; return 1; }
int32_t hearth_pipeline_tp(const hearth_pipeline *p) { (void)p; return 1; }
int32_t pipe_rank(const struct hearth_pipeline *p) { (void)p; return 0; }
int32_t pipe_stages(const struct hearth_pipeline *p) { (void)p; return 1; }
int32_t pipe_tp(const struct hearth_pipeline *p) { (void)p; return 1; }
int32_t pipe_tp_rank(const struct hearth_pipeline *p) { (void)p; return 0; }
int32_t pipe_size(const struct hearth_pipeline *p) { (void)p; return 1; }

void hearth_pipeline_layers(const hearth_pipeline *p, int32_t n_layer, int32_t *first, int32_t *end)
{
    (void)p;
    *first = 0;
    *end = n_layer;
}

hearth_status hearth_pipeline_handshake(hearth_pipeline *p, const hearth_model *model, const char *options)
{
    (void)p;
    (void)model;
    (void)options;
    return hearth_error(HEARTH_E_UNSUPPORTED, "this hearth was built without MPI");
}

hearth_status hearth_pipeline_check(hearth_pipeline *p, bool ping)
{
    (void)p;
    (void)ping;
    return hearth_error(HEARTH_E_UNSUPPORTED, "this hearth was built without MPI");
}

void hearth_pipeline_close(hearth_pipeline *p, bool failed) { (void)p; (void)failed; }

/* The pipeline's messages: only ever called with a pipeline open. */
hearth_status pipe_setup(struct hearth_pipeline *p, const struct pipe_setup *setup, int32_t *id)
{
    (void)p;
    (void)setup;
    (void)id;
    return hearth_error(HEARTH_E_INTERNAL, "a pipeline in a build without MPI");
}

void pipe_release(struct hearth_pipeline *p, int32_t id) { (void)p; (void)id; }

hearth_status pipe_copy_block(struct hearth_pipeline *p, int32_t id, int32_t src, int32_t dst, int32_t n_rows,
                              bool window)
{
    (void)p;
    (void)id;
    (void)src;
    (void)dst;
    (void)n_rows;
    (void)window;
    return hearth_error(HEARTH_E_INTERNAL, "a pipeline in a build without MPI");
}

hearth_status pipe_send_step(struct hearth_pipeline *p, int32_t id, const struct pipe_step *step,
                             int32_t block_tokens)
{
    (void)p;
    (void)id;
    (void)step;
    (void)block_tokens;
    return hearth_error(HEARTH_E_INTERNAL, "a pipeline in a build without MPI");
}

hearth_status pipe_post_step(struct hearth_pipeline *p, int32_t id, const struct pipe_step *step,
                             int32_t block_tokens)
{
    return pipe_send_step(p, id, step, block_tokens);
}

void pipe_progress(struct hearth_pipeline *p)
{
    (void)p;
}

int64_t pipe_in_flight(const struct hearth_pipeline *p)
{
    (void)p;
    return 0;
}

hearth_status pipe_send_peers(struct hearth_pipeline *p, int32_t id, const struct pipe_step *step,
                              int32_t block_tokens)
{
    return pipe_send_step(p, id, step, block_tokens);
}

hearth_status pipe_tp_gather(struct hearth_pipeline *p, const float *mine, const int64_t *counts, float *all)
{
    (void)p;
    (void)mine;
    (void)counts;
    (void)all;
    return hearth_error(HEARTH_E_INTERNAL, "a pipeline in a build without MPI");
}

void pipe_break(struct hearth_pipeline *p, hearth_status st) { (void)p; (void)st; }

hearth_status pipe_send_out(struct hearth_pipeline *p, const float *logits, int64_t n_logits, const float *hidden,
                            int64_t n_hidden)
{
    (void)p;
    (void)logits;
    (void)n_logits;
    (void)hidden;
    (void)n_hidden;
    return hearth_error(HEARTH_E_INTERNAL, "a pipeline in a build without MPI");
}

hearth_status pipe_recv_out(struct hearth_pipeline *p, float *logits, int64_t n_logits, float *hidden,
                            int64_t n_hidden)
{
    (void)p;
    (void)logits;
    (void)n_logits;
    (void)hidden;
    (void)n_hidden;
    return hearth_error(HEARTH_E_INTERNAL, "a pipeline in a build without MPI");
}

hearth_status pipe_recv(struct hearth_pipeline *p, int64_t n_embd, struct pipe_msg *msg)
{
    (void)p;
    (void)n_embd;
    (void)msg;
    return hearth_error(HEARTH_E_UNSUPPORTED, "this hearth was built without MPI");
}

hearth_status pipe_setup_done(struct hearth_pipeline *p, const struct pipe_msg *msg)
{
    (void)p;
    (void)msg;
    return hearth_error(HEARTH_E_INTERNAL, "a pipeline in a build without MPI");
}

hearth_status pipe_fail(struct hearth_pipeline *p, hearth_status st)
{
    (void)p;
    return st;
}

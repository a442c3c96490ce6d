/*
 * stage.c -- a rank other than 0 of a pipeline (hearth.h,
 * hearth_pipeline_serve()): the runners rank 0 has it make, by the ids
 * rank 0 gave, and its part of their steps (dist/pipeline.h has the
 * messages, runner.c the layers).
 */
#include "internal.h"

#include <stdlib.h>

#include "hearth.h"
#include "model.h"
#include "pipeline.h"
#include "runner.h"

struct runners {
    struct runner **r;
    int32_t *id;
    int32_t n, cap;
};

static struct runner *find(const struct runners *rs, int32_t id)
{
    for (int32_t i = 0; i < rs->n; i++)
        if (rs->id[i] == id) return rs->r[i];
    return NULL;
}

static hearth_status add(struct runners *rs, int32_t id, struct runner *r)
{
    if (rs->n == rs->cap) {
        const int32_t cap = rs->cap ? 2 * rs->cap : 4;
        struct runner **nr = hearth_realloc(rs->r, (size_t)cap * sizeof *nr, "the pipeline's runners");
        if (!nr) return HEARTH_E_NOMEM;
        rs->r = nr;
        int32_t *ni = hearth_realloc(rs->id, (size_t)cap * sizeof *ni, "the pipeline's runners");
        if (!ni) return HEARTH_E_NOMEM;
        rs->id = ni;
        rs->cap = cap;
    }
    rs->r[rs->n] = r;
    rs->id[rs->n++] = id;
    return HEARTH_OK;
}

static void drop(struct runners *rs, int32_t id)
{
    for (int32_t i = 0; i < rs->n; i++)
        if (rs->id[i] == id) {
            runner_free(rs->r[i]);
            rs->r[i] = rs->r[--rs->n];
            rs->id[i] = rs->id[rs->n];
            return;
        }
}

/* Make runner msg->id as rank 0 made its own. */
static hearth_status make(struct runners *rs, const hearth_model *model, int32_t n_threads,
                          const struct pipe_msg *msg)
{
    if (find(rs, msg->id)) return hearth_error(HEARTH_E_INTERNAL, "runner %d made twice", msg->id);
    const struct pipe_setup *s = &msg->setup;
    struct runner_params rp = {
        .n_batch = s->n_batch, .n_ctx = s->n_ctx, .n_threads = n_threads, .cache_type = s->cache_type,
        .block_tokens = s->block_tokens, .n_blocks = s->n_blocks, .n_blocks_window = s->n_blocks_window,
        .chunk_size = s->chunk_size,
    };
    HEARTH_TRY(runner_resolve_sizes(model, &rp.n_ctx, &rp.n_batch, &rp.n_threads));
    struct runner *r;
    HEARTH_TRY(runner_new(model, &rp, &r));
    hearth_status st = add(rs, msg->id, r);
    if (st) runner_free(r);
    return st;
}

hearth_status hearth_pipeline_serve(hearth_pipeline *p, const hearth_model *model, int32_t n_threads)
{
    if (!p || !model) return hearth_error(HEARTH_E_INVALID, "hearth_pipeline_serve: NULL argument");
    if (pipe_rank(p) == 0 || model->pipe != p)
        return hearth_error(HEARTH_E_INVALID, "hearth_pipeline_serve: rank 0, or a model loaded for another "
                            "pipeline");
    struct runners rs = {0};
    hearth_status st = HEARTH_OK;
    for (bool quit = false; !st && !quit;) {
        struct pipe_msg msg;
        st = pipe_recv(p, model->hp.n_embd, &msg);
        if (st) break;
        struct runner *r = find(&rs, msg.id);
        switch (msg.kind) {
        case PIPE_SETUP: {
            hearth_status made = make(&rs, model, n_threads, &msg);
            st = made ? pipe_fail(p, made) : pipe_setup_done(p, &msg);
            break;
        }
        case PIPE_STEP: {
            hearth_status done = HEARTH_OK;
            if (!r) done = hearth_error(HEARTH_E_INTERNAL, "a step of runner %d, which is not here", msg.id);
            else if (msg.step.bp.n_tokens > runner_params(r)->n_batch)
                done = hearth_error(HEARTH_E_INTERNAL, "a step of %lld rows (at most %d)",
                                    (long long)msg.step.bp.n_tokens, runner_params(r)->n_batch);
            if (!done) {
                const struct runner_step step = {
                    .bp = msg.step.bp,
                    .logit_rows = msg.step.logit_rows,
                    .n_logits = msg.step.n_logits,
                    .hidden_rows = msg.step.hidden_rows,
                    .n_hidden = msg.step.n_hidden,
                };
                done = runner_eval_stage(r, msg.id, &step, msg.step.x);
            }
            if (done) st = pipe_fail(p, done);
            break;
        }
        case PIPE_COPY:
            if (r) st = runner_copy_block(r, msg.src, msg.dst, msg.n_rows, msg.window);
            break;
        case PIPE_RELEASE: drop(&rs, msg.id); break;
        case PIPE_QUIT: quit = true; break;
        }
    }
    while (rs.n > 0) drop(&rs, rs.id[0]);
    free(rs.r);
    free(rs.id);
    return st;
}

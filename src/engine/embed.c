/*
 * embed.c -- embedding requests in the serving engine (hearth.h,
 * hearth_request.pooling): a sequence that computes its prompt and
 * samples nothing.  Each step, the rows its pooling reads (every
 * position for mean pooling, the first or the last for CLS and last
 * pooling) are the step's hidden rows, whose output-normed hidden states
 * the runner gives beside the logits of the others (runner.h); they are
 * added to the sequence's sum in position order (pooling.h), and when
 * the prompt's last position has been computed, the vector goes out
 * with the sequence's final event.
 *
 * Such sequences run in the same steps as generating ones (continuous
 * batching, chunked prompts, preemption); a row's hidden state does not
 * depend on the other rows of its step, so the vector is the same in
 * any company.  The prefix cache serves last pooling only (its keys and
 * values are all it needs of the positions before the last); mean and
 * CLS pooling need the rows of the positions the cache would skip.
 *
 * An encoder (hparams.bidirectional: bert, nomic-bert) attends to the
 * positions after a row as well as before it, so its input runs whole in
 * one step (schedule.c waits until the step has room for all of it, and
 * a prompt longer than a step is refused at submission), and the prefix
 * cache never serves it: its keys depend on the tokens that follow.
 */
#include "engine_impl.h"
#include "pooling.h"

hearth_status engine_embed_request(hearth_engine *e, struct request *r)
{
    const hearth_request *q = &r->params;
    if (q->pooling == HEARTH_POOLING_NONE && model_embedding_only(e->model))
        return hearth_error(HEARTH_E_UNSUPPORTED, "the model (%s) is an embedding model: it has no output layer to "
                            "generate text with; it computes embeddings (a request with a pooling: hearth embed, "
                            "/v1/embeddings)", hearth_model_arch(e->model));
    if (q->pooling == HEARTH_POOLING_NONE) return HEARTH_OK;
    if (q->pooling == HEARTH_POOLING_RANK)
        return hearth_error(HEARTH_E_UNSUPPORTED, "rank pooling (a reranker's classification head) is not "
                            "supported: pool with mean, cls or last");
    if (q->pooling != HEARTH_POOLING_MEAN && q->pooling != HEARTH_POOLING_CLS && q->pooling != HEARTH_POOLING_LAST)
        return hearth_error(HEARTH_E_INVALID, "pooling %d: an embedding request pools with mean (1), cls (2) "
                            "or last (3)", (int)q->pooling);
    if (q->n > 1) return hearth_error(HEARTH_E_INVALID, "n = %d: an embedding request has one vector", q->n);
    /* nothing is sampled */
    r->params.max_tokens = 0;
    r->params.speculation.draft_max = 0;
    r->params.reasoning = HEARTH_REASONING_NONE;
    return HEARTH_OK;
}

hearth_status engine_embed_prompt(hearth_engine *e, const struct request *r)
{
    const hearth_model *m = e->model;
    if (!m->hp.bidirectional) return HEARTH_OK;
    if (r->n_prompt > e->params.n_batch)
        return hearth_error(HEARTH_E_RANGE, "the input has %d tokens but an encoder (%s) computes an input in one "
                            "step of at most %d tokens (the batch size)", r->n_prompt, hearth_model_arch(m),
                            e->params.n_batch);
    if (m->pos_embd.data && r->n_prompt > m->pos_embd.n_out)
        return hearth_error(HEARTH_E_RANGE, "the input has %d tokens but the model (%s) has positions for %lld",
                            r->n_prompt, hearth_model_arch(m), (long long)m->pos_embd.n_out);
    return HEARTH_OK;
}

hearth_status engine_embed_seq_new(hearth_engine *e, struct seq *s)
{
    if (!engine_seq_embeds(s)) return HEARTH_OK;
    const size_t E = (size_t)hearth_model_n_embd(e->model);
    s->pool_sum = hearth_calloc(E, sizeof *s->pool_sum, "an embedding's sum");
    s->embedding = hearth_calloc(E, sizeof *s->embedding, "an embedding");
    return s->pool_sum && s->embedding ? HEARTH_OK : HEARTH_E_NOMEM;
}

bool engine_embed_takes_prefix(const hearth_engine *e, const struct seq *s)
{
    /* an encoder's keys and values depend on the positions after them */
    if (e->model->hp.bidirectional) return false;
    return !engine_seq_embeds(s) || s->req->params.pooling == HEARTH_POOLING_LAST;
}

void engine_embed_rows(hearth_engine *e, struct seq *s, int32_t row, int32_t *n)
{
    const hearth_pooling pooling = s->req->params.pooling;
    for (int32_t k = 0; k < s->chunk; k++) {
        const int32_t pos = s->n_computed + k;
        if (pos < s->n_pooled || !pooling_wants(pooling, pos, s->n_tokens)) continue;
        e->hidden_rows[*n] = row + k;
        e->hidden_seqs[(*n)++] = s;
    }
}

void engine_embed_pool(hearth_engine *e, int32_t n)
{
    const int64_t E = hearth_model_n_embd(e->model);
    /* a sequence's rows are in position order within the step */
    for (int32_t i = 0; i < n; i++) {
        struct seq *s = e->hidden_seqs[i];
        const int32_t pos = e->pos[e->hidden_rows[i]];
        if (pos < s->n_pooled) continue;
        pooling_add_row(s->pool_sum, runner_output_hidden(e->runner, i), E);
        s->n_pooled = pos + 1;
        s->n_pool_rows++;
    }
}

void engine_embed_finish(hearth_engine *e, struct seq *s)
{
    const hearth_request *q = &s->req->params;
    pooling_finish(q->pooling, s->pool_sum, s->n_pool_rows, !q->no_normalize, s->embedding,
                   hearth_model_n_embd(e->model));
    engine_finish_seq(e, s, -1, NULL, HEARTH_FINISH_LENGTH, HEARTH_OK);
}

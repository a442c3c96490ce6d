/*
 * embeddings.c -- POST /v1/embeddings: each input of the request becomes
 * an embedding request of the engine (hearth_request.pooling), so the
 * inputs run batched together and beside the generation requests, in
 * the job machinery of jobs.c (the queue's bound, waiting for the
 * events, the client's hang-up, the deadline, the drain).  The vectors
 * come back scaled to unit length; "dimensions" cuts them to their first
 * components and scales those to unit length again (what Matryoshka-
 * trained models, Qwen3-Embedding among them, are made for; the file
 * does not say whether a model was, so it is allowed for every model and
 * hearth-serve(1) says so).  "base64" sends the little-endian float32
 * bytes, which the official clients decode themselves.
 */
#define _GNU_SOURCE
#include "config.h"

#include "server_impl.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "request.h"

struct embed_ref {                  /* the user of one input's engine request */
    struct job *job;
    size_t index;
    uint64_t id;
    bool submitted;
};

struct embed_job {
    struct srv_embeddings req;
    hearth_token **tokens;          /* each input's */
    size_t *n_tokens;
    struct embed_ref *refs;
    float *vectors;                 /* n_inputs x n_embd */
    bool *done;
    int32_t n_embd;
    size_t n_submitted;
};

void embed_job_free(struct embed_job *ej)
{
    if (!ej) return;
    for (size_t i = 0; ej->tokens && i < ej->req.n_inputs; i++) hearth_free(ej->tokens[i]);
    free(ej->tokens);
    free(ej->n_tokens);
    free(ej->refs);
    free(ej->vectors);
    free(ej->done);
    srv_embeddings_free(&ej->req);
    free(ej);
}

void embed_job_cancel(struct job *j)
{
    struct embed_job *ej = j->embed;
    for (size_t i = 0; ej->refs && i < ej->req.n_inputs; i++)
        if (ej->refs[i].submitted) hearth_engine_cancel(j->m->loaded.engine, ej->refs[i].id);
}

/* The engine's thread: an input's final event (the only one it has). */
static void on_event(void *user, const hearth_event *ev)
{
    struct embed_ref *ref = user;
    struct job *j = ref->job;
    struct embed_job *ej = j->embed;
    if (ev->finish == HEARTH_FINISH_NONE) return;
    pthread_mutex_lock(&j->mu);
    if (ev->embedding) {
        memcpy(ej->vectors + ref->index * (size_t)ej->n_embd, ev->embedding, (size_t)ej->n_embd * sizeof(float));
        ej->done[ref->index] = true;
    } else if (ev->finish == HEARTH_FINISH_ERROR && !j->failed) {
        j->failed = true;
        const char *why = hearth_last_error();
        snprintf(j->error, sizeof j->error, "input %zu: %s", ref->index,
                 why && *why ? why : hearth_strerror(ev->status));
    }
    j->n_open--;
    if (j->n_open == 0) job_leave_gauges(j);
    job_signal(j);
    const bool last = j->n_open == 0 && j->http_gone;
    pthread_mutex_unlock(&j->mu);
    if (last) job_destroy(j);
}

/* The pooling the server's embeddings use, or NONE where the model is no
 * embedding model and --pooling forces none. */
static hearth_pooling server_pooling(const struct srv_server *s, const struct srv_model *m)
{
    if (s->cfg.pooling != HEARTH_POOLING_NONE) return s->cfg.pooling;
    const hearth_pooling p = hearth_model_pooling(m->loaded.model);
    return p == HEARTH_POOLING_MEAN || p == HEARTH_POOLING_CLS || p == HEARTH_POOLING_LAST ? p
                                                                                         : HEARTH_POOLING_NONE;
}

/* Tokenize and check the inputs; false with *e set. */
static bool input_tokens(const struct srv_model *s, struct embed_job *ej, struct srv_error *e)
{
    const size_t n = ej->req.n_inputs;
    ej->tokens = calloc(n, sizeof *ej->tokens);
    ej->n_tokens = calloc(n, sizeof *ej->n_tokens);
    if (!ej->tokens || !ej->n_tokens) return srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        struct srv_prompt *in = &ej->req.inputs[i];
        char param[32];
        snprintf(param, sizeof param, n == 1 ? "input" : "input[%zu]", i);
        if (in->tokens) {
            ej->tokens[i] = in->tokens; /* as the client gave them: no BOS or EOS added */
            ej->n_tokens[i] = in->n_tokens;
            in->tokens = NULL;
        } else {
            if (!s->vocab)
                return srv_fail(e, 400, "invalid_request_error", "invalid_value", param,
                                "the model has no tokenizer: give token ids");
            hearth_status st = hearth_tokenize_alloc(s->vocab, in->text, in->len, HEARTH_TOKENIZE_ADD_SPECIAL,
                                                     &ej->tokens[i], &ej->n_tokens[i]);
            if (st)
                return srv_fail(e, 500, "server_error", NULL, NULL, "tokenization failed: %s", hearth_last_error());
        }
        if (ej->n_tokens[i] == 0)
            return srv_fail(e, 400, "invalid_request_error", "invalid_value", param, "'%s' has no tokens", param);
        if (ej->n_tokens[i] > (size_t)s->n_ctx)
            return srv_fail(e, 400, "invalid_request_error", "context_length_exceeded", param,
                            "'%s' has %zu tokens; this model's maximum context length is %d tokens", param,
                            ej->n_tokens[i], s->n_ctx);
    }
    return true;
}

/* Standard base64 (RFC 4648, section 4) of n bytes, NUL-terminated. */
static char *base64(const unsigned char *p, size_t n)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        const unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
                           (i + 2 < n ? (unsigned)p[i + 2] : 0);
        *o++ = abc[v >> 18 & 63];
        *o++ = abc[v >> 12 & 63];
        *o++ = i + 1 < n ? abc[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? abc[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

/* One vector as the request asks: cut to its dimensions (scaled to unit
 * length again), as numbers or as base64 of little-endian float32. */
static json_t *vector_json(const struct embed_job *ej, float *v)
{
    const int32_t d = ej->req.dimensions > 0 ? ej->req.dimensions : ej->n_embd;
    if (d < ej->n_embd) hearth_embedding_normalize(v, (size_t)d);
    if (!ej->req.base64) {
        json_t *a = json_array();
        for (int32_t k = 0; a && k < d; k++)
            if (json_array_append_new(a, json_real((double)v[k]))) {
                json_decref(a);
                return NULL;
            }
        return a;
    }
    unsigned char *bytes = malloc((size_t)d * 4);
    if (!bytes) return NULL;
    for (int32_t k = 0; k < d; k++) {
        uint32_t bits;
        memcpy(&bits, &v[k], sizeof bits);
        for (int b = 0; b < 4; b++) bytes[4 * (size_t)k + (size_t)b] = (unsigned char)(bits >> (8 * b));
    }
    char *text = base64(bytes, (size_t)d * 4);
    free(bytes);
    json_t *str = text ? json_string(text) : NULL;
    free(text);
    return str;
}

/* The response (job locked). */
static json_t *embeddings_response(struct job *j)
{
    struct embed_job *ej = j->embed;
    json_t *data = json_array(), *o = json_object(), *usage = json_object();
    if (!data || !o || !usage) goto oom;
    size_t prompt = 0;
    for (size_t i = 0; i < ej->req.n_inputs; i++) {
        json_t *item = json_object(), *vec = vector_json(ej, ej->vectors + i * (size_t)ej->n_embd);
        if (!item || !vec || json_object_set_new(item, "object", json_string("embedding")) ||
            json_object_set_new(item, "index", json_integer((json_int_t)i)) ||
            json_object_set_new(item, "embedding", vec) || json_array_append_new(data, item)) {
            json_decref(item);
            goto oom;
        }
        prompt += ej->n_tokens[i];
    }
    json_object_set_new(usage, "prompt_tokens", json_integer((json_int_t)prompt));
    json_object_set_new(usage, "total_tokens", json_integer((json_int_t)prompt));
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", data);
    json_object_set_new(o, "model", json_string(j->m->alias));
    json_object_set_new(o, "usage", usage);
    return o;
oom:
    json_decref(data);
    json_decref(o);
    json_decref(usage);
    return NULL;
}

/* Check, tokenize and submit the inputs; NULL with *e set when refused. */
static struct job *embed_start(struct conn *cn, struct srv_error *e)
{
    struct srv_server *s = cn->s;
    struct job *j = job_new(cn, e);
    if (!j) return NULL;
    struct srv_model *m = j->m;
    const hearth_pooling pooling = server_pooling(s, m);
    if (pooling == HEARTH_POOLING_NONE) {
        srv_fail(e, 400, "invalid_request_error", "model_not_supported", "model",
                 "the model '%s' is not an embedding model (its file declares %s pooling); start the server with "
                 "--pooling mean, cls or last to pool its hidden states anyway", m->alias,
                 hearth_pooling_name(hearth_model_pooling(m->loaded.model)));
        job_discard(j);
        return NULL;
    }
    struct embed_job *ej = calloc(1, sizeof *ej);
    if (!ej) {
        srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        job_discard(j);
        return NULL;
    }
    j->embed = ej;
    ej->n_embd = hearth_model_n_embd(m->loaded.model);
    if (!srv_embeddings_parse(cn->body.p, cn->body.len, m->n_vocab, ej->n_embd, &ej->req, e) ||
        !input_tokens(m, ej, e)) {
        job_discard(j);
        return NULL;
    }
    const size_t n = ej->req.n_inputs;
    ej->refs = calloc(n, sizeof *ej->refs);
    ej->done = calloc(n, sizeof *ej->done);
    ej->vectors = calloc(n * (size_t)ej->n_embd, sizeof *ej->vectors);
    if (!ej->refs || !ej->done || !ej->vectors) {
        srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        job_discard(j);
        return NULL;
    }
    snprintf(j->id, sizeof j->id, "embd-%016llx", (unsigned long long)cn->rid);
    if (!job_enlist(j, e)) {
        job_discard(j);
        return NULL;
    }
    pthread_mutex_lock(&j->mu);
    for (size_t i = 0; i < n; i++) {
        hearth_request q;
        hearth_request_default(&q);
        q.prompt = ej->tokens[i];
        q.n_prompt = ej->n_tokens[i];
        q.pooling = pooling;
        q.on_event = on_event;
        ej->refs[i] = (struct embed_ref){.job = j, .index = i};
        q.user = &ej->refs[i];
        hearth_status st = hearth_engine_submit(m->loaded.engine, &q, &ej->refs[i].id);
        if (st) {
            /* the lengths were checked above: what is left is the pool */
            srv_fail(e, st == HEARTH_E_NOMEM ? 500 : 400, st == HEARTH_E_NOMEM ? "server_error"
                     : "invalid_request_error", st == HEARTH_E_NOMEM ? NULL : "invalid_value",
                     st == HEARTH_E_NOMEM ? NULL : "input", "input %zu: %s", i, hearth_last_error());
            job_cancel_locked(j, END_CLIENT);
            j->http_gone = true;
            bool last = j->n_open == 0;
            pthread_mutex_unlock(&j->mu);
            if (last) job_destroy(j);
            return NULL;
        }
        ej->refs[i].submitted = true;
        j->n_open++;
    }
    pthread_mutex_unlock(&j->mu);
    srv_wake_engine(m);
    return j;
}

bool handle_embeddings(struct conn *cn, struct http_exchange *c)
{
    struct srv_error e;
    struct job *j = embed_start(cn, &e);
    if (!j) return send_srv_error(cn, c, &e);
    cn->job = j;
    if (j->embed->req.user) {
        /* for the access log: printable ASCII, no spaces, at most 64 bytes */
        size_t k = 0;
        for (const char *u = j->embed->req.user; *u && k < 64; u++) cn->user[k++] = (*u > ' ' && *u < 127) ? *u : '_';
        cn->user[k] = '\0';
    }
    bool answered;
    if (!job_wait_all(cn, c, j, &answered)) return answered;
    bool failed = j->failed;
    for (size_t i = 0; !failed && i < j->embed->req.n_inputs; i++)
        if (!j->embed->done[i]) {
            failed = true;
            snprintf(j->error, sizeof j->error, "input %zu got no vector", i);
        }
    char error[sizeof j->error];
    memcpy(error, j->error, sizeof error);
    json_t *o = failed ? NULL : embeddings_response(j);
    pthread_mutex_unlock(&j->mu);
    if (failed) return send_error(cn, c, 500, "server_error", "embedding_failed", NULL, "%s", error);
    if (!o) return send_error(cn, c, 500, "server_error", NULL, NULL, "out of memory");
    return send_json(cn, c, 200, o, NULL);
}

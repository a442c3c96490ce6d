/*
 * server_impl.h -- the types the server's files share (the server, a
 * job with its choices, a connection's request) with the functions each
 * offers the others: server.c sends responses, jobs.c runs jobs,
 * openai.c writes their JSON.  Not part of server.h's interface.
 */
#ifndef HEARTH_SERVER_SERVER_IMPL_H
#define HEARTH_SERVER_SERVER_IMPL_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "buf.h"
#include "hearth.h"
#include "http.h"
#include "metrics.h"
#include "request.h"
#include "server.h"
#include "toolcall.h"

#define LOG_PREFIX "hearth: serve: "

enum srv_state { STATE_LOADING, STATE_READY, STATE_DRAINING, STATE_FAILED };

#define SRV_GRAMMAR_CACHE 16

/* Past responses of the Responses API, for previous_response_id and GET
 * /v1/responses/{id} (responses.c): bounded by count and bytes, the least
 * recently used given up first. */
struct resp_store {
    pthread_mutex_t mu;
    struct resp_entry *head, *tail;
    size_t n, bytes;
    size_t max_n, max_bytes;
    uint64_t evicted;
};

/* One model of the table (models.c).  Its alias, path and counters are
 * fixed or change under the table's mutex; what it serves with (loaded,
 * vocab, n_ctx, n_vocab, the engine's thread) is set by its load and
 * read, without a lock, by the requests that hold it (users), which keep
 * it from being unloaded. */
enum srv_model_state { MODEL_UNLOADED, MODEL_LOADING, MODEL_LOADED, MODEL_UNLOADING };

struct srv_model {
    struct srv_server *s;
    char *alias, *path;
    uint64_t file_bytes;      /* the files' size: the estimate before a first load */
    uint64_t bytes;           /* weights and KV pool, measured at its last load; 0: never loaded */
    enum srv_model_state state;
    int32_t users;            /* requests holding it: waiting for its load, queued, running */
    double last_used;         /* when the last of them let go (srv_now_s) */
    uint64_t load_gen;        /* loads begun */
    uint64_t failed_gen;      /* the last load that failed ... */
    char error[512];          /* ... and why */
    bool too_large;           /* it failed for --max-memory */
    uint64_t loads, load_failures, unloads_idle, unloads_memory;
    double load_seconds;

    struct srv_loaded loaded; /* while MODEL_LOADED */
    const hearth_vocab *vocab;
    int32_t n_ctx, n_vocab;

    /* the engine's thread */
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t wake_mu;
    pthread_cond_t wake_cv;
    bool wake_pending, quit;

    /* compiled grammars of recent requests, so that requests with the same
     * schema or grammar share its mask cache (they are the vocabulary's) */
    pthread_mutex_t grammars_mu;
    struct {
        enum srv_grammar kind;
        char *text;
        hearth_grammar *grammar;
    } grammars[SRV_GRAMMAR_CACHE];
    size_t grammars_next;
};

/* The model table: the models, the memory their loads take, the thread
 * that unloads idle ones. */
struct srv_models {
    pthread_mutex_t mu;
    pthread_cond_t changed;   /* a load ended, a model was let go or unloaded */
    struct srv_model *m;
    size_t n;
    struct srv_model_loader loader;
    uint64_t used_bytes;      /* of the loaded models and those loading (their estimate) */
    hearth_engine_stats retired; /* the counters of the engines unloaded */
    int32_t block_tokens;     /* of the last engine loaded */
    pthread_t reaper;         /* unloads the models idle for keep_alive_s */
    bool reaper_started, reaper_quit;
    pthread_cond_t reaper_cv;
};

struct srv_server {
    struct srv_config cfg;
    struct http_server *http;
    _Atomic int state;
    struct srv_metrics metrics;
    char fingerprint[64];
    time_t created;

    struct srv_models models;

    /* live jobs */
    pthread_mutex_t jobs_mu;
    struct job *jobs;
    int32_t n_jobs;
    _Atomic bool forced_end;  /* drain's grace is over */

    /* STATE_FAILED: why, and the error code of the requests it fails;
     * written once, before the state is */
    pthread_mutex_t fail_mu;
    char failure[512];
    const char *failure_code;

    _Atomic uint64_t next_id;
    _Atomic uint64_t seeds_drawn; /* by requests without a seed (hearth_seed_derive) */

    struct resp_store responses;
};

/* ---- jobs ---------------------------------------------------------- */

struct lp_rec {
    hearth_token token;
    float logprob;
    size_t offset;                  /* of its text in the choice's text */
    int32_t n_top;
    hearth_token top[SRV_MAX_TOP_LOGPROBS];
    float top_lp[SRV_MAX_TOP_LOGPROBS];
};

struct choice {
    struct buf text;
    struct lp_rec *lp;
    size_t n_lp, cap_lp, lp_sent;   /* records; those a stream has sent */
    size_t text_bytes;              /* bytes of token pieces so far (text_offset) */
    hearth_finish_reason finish;
    hearth_request_stats stats;
    bool done;
    size_t sent;                    /* a stream reading tool calls: bytes of content sent */
    struct srv_tool_parser tp;      /* ... the calls read from its text so far */
    size_t calls_sent;              /* ... the calls begun in the stream */
    size_t args_sent;               /* ... the bytes of the last one's arguments sent */
    hearth_reasoning_split *split;  /* chat with reasoning: the text's two parts */
    struct buf reasoning;           /* the reasoning (text holds the answer) */
    long n_reasoning_tokens;
};

struct sub {                        /* one engine request: one prompt */
    struct job *job;
    size_t prompt;
    uint64_t id;
    bool submitted;
};

enum end_reason { END_NONE, END_CLIENT, END_TIMEOUT, END_SHUTDOWN };

/* A Responses stream's state (job locked). */
struct resp_stream {
    uint64_t seq;                   /* the next event's sequence_number */
    json_t *output;                 /* the output items done */
    int open;                       /* the item being written: none, reasoning, message, call */
    bool had_message;               /* a message item was written */
    char item_id[48];               /* the open item's */
    struct buf item_text;           /* its text so far (a call's: its arguments) */
    char *call_name;                /* a call's: its name, its call_id */
    char call_id[48];
};

struct job {
    struct srv_server *s;
    struct srv_model *m;                     /* its model, held (srv_model_release() when freed) */
    pthread_mutex_t mu;
    int efd;
    struct srv_request req;
    hearth_token *tokens[SRV_MAX_PROMPTS];   /* each prompt's tokens */
    size_t n_tokens[SRV_MAX_PROMPTS];
    char *echo[SRV_MAX_PROMPTS];             /* completions with echo */
    char *prompt_tail;                       /* chat: the rendered prompt's end, where the
                                                reasoning split starts */
    size_t prompt_tail_len;
    size_t echo_len[SRV_MAX_PROMPTS];
    struct sub subs[SRV_MAX_PROMPTS];
    size_t n_subs;
    struct choice *choices;
    size_t n_choices, n_open;
    enum { GAUGE_WAITING, GAUGE_RUNNING, GAUGE_NONE } gauge; /* where the job counts in
                                                 hearth_requests_waiting/_running */
    bool stream_closed;                      /* nothing more is sent */
    enum end_reason ended;
    struct buf out;                          /* server-sent events to write */
    size_t out_pos;
    bool http_gone;
    bool failed;                             /* a sample ended in error */
    const char *error_param;                 /* NULL, or the field at fault: the request's own grammar */
    const char *error_code;                  /* NULL (generation_failed), or the failed check's */
    char error[256];
    char id[48];
    time_t created;
    struct resp_stream rs;                   /* the Responses API's stream */
    double t0, deadline;
    struct embed_job *embed;                 /* an embeddings request's (embeddings.c), or NULL */
    struct job *next, *prev;
};

/* ---- connections ---------------------------------------------------- */

enum route { R_NONE, R_PAGE, R_HEALTH, R_MODELS, R_METRICS, R_CHAT, R_COMPLETIONS, R_EMBEDDINGS, R_TOKENIZE,
             R_DETOKENIZE, R_RESPONSES, R_RESPONSE };

struct conn {
    struct srv_server *s;
    enum route route;
    uint64_t rid;
    char method[16];
    char path[96];
    struct buf body;    /* the exchange's (not owned) */
    bool responded;
    int status;
    struct http_exchange *x;
    double t0;
    struct job *job;
    bool stream;        /* the request asked for a stream */
    char user[72];      /* the request's user field, printable ASCII only */
    const char *model;  /* the alias of the model it was served by, or NULL */
};

/* ---- server.c ------------------------------------------------------- */

/* The monotonic clock, in seconds (deadlines, durations). */
double srv_now_s(void);
/* The realtime clock seconds from now, for pthread_cond_timedwait(). */
struct timespec srv_realtime_in(double seconds);

/* A response: JSON (o is consumed), or an error object of a message;
 * 429 and 503 come with Retry-After. */
bool send_json(struct conn *cn, struct http_exchange *c, int status, json_t *o, const char *retry_after);
bool send_error(struct conn *cn, struct http_exchange *c, int status, const char *type, const char *code,
                const char *param, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 7, 8)))
#endif
    ;
bool send_srv_error(struct conn *cn, struct http_exchange *c, const struct srv_error *e);
/* The server can take no more requests: mark it failed with why (the
 * first failure stays). */
void srv_server_fail(struct srv_server *s, const char *code, const char *why);
/* The 503 of a request that comes when the server is not ready:
 * draining, or failed with why. */
bool srv_unavailable(struct srv_server *s, struct srv_error *e);

/* ---- jobs.c --------------------------------------------------------- */

/* A job for the connection's request, not yet in the server's list
 * (job_discard() frees it then); NULL with *e set. */
struct job *job_new(struct conn *cn, struct srv_error *e);
void job_discard(struct job *j);
/* Put the job in the server's list, within the queue's bound; false
 * with *e set (503 draining, 429 full), the job still the caller's. */
bool job_enlist(struct job *j, struct srv_error *e);
/* The job no longer counts in hearth_requests_waiting or _running (job
 * locked). */
void job_leave_gauges(struct job *j);
/* Wait until every sample of the job has ended: true with the job
 * locked; false when the client went, the deadline passed or the server
 * shuts down, the job's requests cancelled and the response (an error)
 * sent, *answered saying whether it was. */
bool job_wait_all(struct conn *cn, struct http_exchange *c, struct job *j, bool *answered);
/* Whether the client of a connection has gone (see jobs.c's top). */
bool srv_client_gone(struct conn *cn);
/* Wake a model's engine thread: there is work. */
void srv_wake_engine(struct srv_model *m);
/* Wake a job's connection (its eventfd). */
void job_signal(struct job *j);
/* Take a job out of the server's list and free it. */
void job_destroy(struct job *j);
/* Cancel the job's engine requests (job locked). */
void job_cancel_locked(struct job *j, enum end_reason why);
/* A model's engine thread (arg: the model). */
void *engine_main(void *arg);
/* Answer a chat or completion request. */
bool handle_generate(struct conn *cn, struct http_exchange *c, enum srv_kind kind);

/* ---- embeddings.c --------------------------------------------------- */

/* Answer POST /v1/embeddings. */
bool handle_embeddings(struct conn *cn, struct http_exchange *c);
void embed_job_free(struct embed_job *ej);
/* Cancel the engine requests of an embeddings job (job locked). */
void embed_job_cancel(struct job *j);

/* ---- openai.c ------------------------------------------------------- */

json_t *lossy_string(const char *p, size_t n);
const char *finish_name(hearth_finish_reason f);
json_t *error_object(const char *message, const char *type, const char *param, const char *code);
json_t *hearth_json(const struct job *j);
/* An id for a tool call, as the template's format takes them. */
void tool_call_id(const struct job *j, char *out, size_t cap);
/* The tool calls of a choice's text (false: plain content; true: free
 * tc with srv_tool_calls_free()). */
bool choice_tool_calls(const struct job *j, const struct choice *c, struct srv_tool_calls *tc);
json_t *piece_json(const struct srv_model *m, hearth_token t, bool with_bytes, json_t **bytes);
void job_usage(const struct job *j, long *prompt, long *cached, long *completion);
/* Of the cached prompt tokens, those read from the disk tier (job locked). */
long job_disk_cached(const struct job *j);
bool reads_tool_calls(const struct job *j);
/* How much of p[0..n) may be sent before more text comes: all but a
 * character cut off at its end. */
size_t whole_chars(const char *p, size_t n);
/* Where a stream's content and tool calls go (stream_calls_progress):
 * content, a call's head (index, id, name), more of a call's
 * arguments; after a call sent whole (harmony's), whole if not NULL;
 * arguments go to the last call opened only while args_open (NULL:
 * always). */
struct call_sink {
    void (*content)(struct job *j, size_t ci, const char *p, size_t n);
    void (*head)(struct job *j, size_t ci, size_t index, const struct srv_tool_call *call);
    void (*args)(struct job *j, size_t ci, size_t index, const char *p, size_t n);
    void (*whole)(struct job *j);
    bool (*args_open)(const struct job *j);
};
void stream_calls_progress(struct job *j, size_t ci, bool last, const struct call_sink *k);
/* A stream's events (job locked). */
void emit_chunk(struct job *j, size_t ci, const char *text, size_t len, bool role, const char *finish);
void stream_tool_text(struct job *j, size_t ci);
void stream_tool_end(struct job *j, size_t ci, const char *finish);
void emit_reasoning(struct job *j, size_t ci, const char *text, size_t len);
void emit_end(struct job *j);
void emit_error(struct job *j, const char *message, const char *type, const char *code, const char *param);
json_t *final_response(struct job *j);

/* ---- models.c ------------------------------------------------------- */

void srv_models_init(struct srv_models *t, const struct srv_model_loader *loader);
/* Unload every model and free the table (no request holds one). */
void srv_models_free(struct srv_server *s);
bool srv_models_add(struct srv_server *s, const char *alias, const char *path, uint64_t file_bytes);
/* Start the thread that unloads idle models. */
bool srv_models_start(struct srv_server *s);
/* The model a request's "model" names (name NULL: not given); NULL with
 * *e set: 404 model_not_found for a name not in a table of several
 * models, 400 when several are served and none is named.  With one model
 * every name is that model's. */
struct srv_model *srv_model_find(struct srv_server *s, const char *name, struct srv_error *e);
/* Hold a model: load it if it is not loaded (waiting while another
 * request loads it or memory is needed, until the deadline, the client
 * of cn hangs up or the server shuts down); queued: the request counts
 * in the model's queue bound.  false with *e set; true: the model is
 * loaded until srv_model_release(). */
bool srv_model_acquire(struct srv_model *m, struct conn *cn, double deadline, bool queued, struct srv_error *e);
void srv_model_release(struct srv_model *m);
/* GET /v1/models's list. */
json_t *srv_models_json(struct srv_server *s);
/* The sum of the engines' statistics, those unloaded included in the
 * counters. */
void srv_models_stats(struct srv_server *s, hearth_engine_stats *out);
/* The table's lines of /metrics, added to o's text (false: out of memory). */
bool srv_models_metrics(struct srv_server *s, struct buf *o);

/* ---- responses.c ---------------------------------------------------- */

void resp_store_init(struct resp_store *st, size_t max_n, size_t max_bytes);
void resp_store_free(struct resp_store *st);
/* Put the previous response's conversation before the request's input;
 * a 400 naming previous_response_id when it is not kept. */
bool responses_prepare(struct srv_server *s, struct job *j, struct srv_error *e);
/* The response object of a job that did not stream (job locked). */
json_t *responses_final(struct job *j);
/* A stream's events (job locked): its start, the answer's text so far
 * (the choice's text past what was sent), reasoning, the end, a failure. */
void responses_stream_begin(struct job *j);
void responses_stream_text(struct job *j);
void responses_stream_reasoning(struct job *j, const char *text, size_t len);
void responses_stream_end(struct job *j);
void responses_stream_error(struct job *j, const char *message, const char *code, const char *param);
void responses_stream_free(struct job *j);
/* GET (del false) or DELETE /v1/responses/{id}. */
bool handle_response_item(struct conn *cn, struct http_exchange *c, const char *id, bool del);

#endif /* HEARTH_SERVER_SERVER_IMPL_H */

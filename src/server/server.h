/*
 * server.h -- hearth serve's HTTP server: the OpenAI API over a table of
 * models, each loaded on first use with an engine of its own.  A
 * request's path: http.c reads it and hands it to a worker thread,
 * server.c routes it, jobs.c finds the model its "model" names in the
 * table (models.c, which loads it when it is not loaded), checks the
 * request (request.c), renders and tokenizes the prompt, submits it to
 * that model's engine and waits; the engine's thread steps every running
 * request and hands tokens back through events, which become the
 * response or its server-sent events (openai.c); metrics.c counts it
 * all.
 */
#ifndef HEARTH_SERVER_SERVER_H
#define HEARTH_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"
#include "toolcall.h"

struct srv_config {
    const char *host;            /* address to listen on */
    bool disk_cache;             /* the engines have a disk tier (--cache-dir) */
    int port;                    /* 0: any free port */
    int32_t parallel;            /* sequences the engine runs at once */
    int32_t max_queue;           /* requests waiting beyond those */
    int32_t max_connections;
    size_t max_body;             /* bytes of a request body */
    double timeout_s;            /* a request's deadline; 0: none */
    int32_t idle_timeout_s;      /* an idle connection is closed after it */
    double request_timeout_s;    /* a request's head and body arrive within it */
    const char *const *api_keys; /* NULL-free list; none: no authentication */
    size_t n_api_keys;
    const char *tls_key_pem;     /* both or neither: HTTPS */
    const char *tls_cert_pem;
    hearth_sampler_params sampling; /* defaults of the requests; sampling.seed
                                 * starts the stream of seeds of those
                                 * without one (hearth_seed_derive) */
    int32_t reasoning_budget;    /* of chat requests that give none; -1: no limit */
    bool no_webui;               /* GET / answers 404 instead of the chat page */
    size_t responses_store;      /* past responses kept (0: none) ... */
    size_t responses_store_bytes; /* ... in at most these bytes */
    hearth_pooling pooling;      /* of /v1/embeddings: MEAN, CLS or LAST whatever
                                  * the model declares; NONE: the model's */
    double keep_alive_s;         /* an idle model is unloaded after it; 0: at
                                  * once; < 0: never */
    uint64_t max_memory;         /* most bytes of weights and KV pools of the
                                  * loaded models together; 0: no bound */
};

/* A loaded model: what its loader made (serve.c), owned by the loader
 * until it is given back to its unload. */
struct srv_loaded {
    hearth_model *model;
    hearth_engine *engine;
    const hearth_template *tmpl;         /* NULL: chat requests are refused */
    enum srv_tool_format tool_format;    /* srv_tool_format_detect() */
    hearth_reasoning_format reasoning;   /* of chat replies; NONE: all content */
    const char *bos_text, *eos_text;     /* the texts of the BOS and EOS tokens */
    int32_t max_tokens_cap;              /* most max_tokens; also the default */
    hearth_speculation speculation;      /* of every request (draft_max 0: none) */
    /* An engine that depends on other processes (the ranks of a pipeline,
     * hearth-mpi(7)): whether they are well, asked on the engine's thread
     * between steps -- after a request failed (wait false: it answers at
     * once), and every check_interval_s seconds while the engine is idle
     * (wait true: it may wait for them).  false with why set: the server
     * has failed (srv_server_failure()); the requests failed so, and those
     * that come after, get check_code.  NULL: nothing to check. */
    bool (*check)(void *owner, bool wait, char *why, size_t why_size);
    double check_interval_s;
    const char *check_code;
    void *owner;                         /* the loader's own */
};

/* How the table loads a model and lets it go.  load runs on the thread
 * of the request that needs the model (several may load different models
 * at once); false with why set (the file's error, a pool that does not
 * fit) and nothing to unload.  unload frees what load made. */
struct srv_model_loader {
    bool (*load)(void *user, const char *alias, const char *path, struct srv_loaded *out, char *why,
                 size_t why_size);
    void (*unload)(void *user, struct srv_loaded *loaded);
    void *user;
};

struct srv_server;

/* Listen (the server answers 503 "loading" until srv_server_ready()).
 * The port it got goes to *port.  false after printing why. */
bool srv_server_start(const struct srv_config *config, const struct srv_model_loader *loader,
                      struct srv_server **out, int *port);

/* Put a model in the table (before srv_server_ready()): its name in the
 * API and its file (both copied); its file's size in bytes is the
 * estimate of its memory until it has been loaded once.  false after
 * printing why (out of memory, a name given twice). */
bool srv_server_add_model(struct srv_server *s, const char *alias, const char *path, uint64_t file_bytes);

/* Load a model of the table now (hearth serve -m FILE: the one model is
 * loaded before the server is ready); *loaded (may be NULL) points at
 * what its loader made.  false with why set. */
bool srv_server_preload(struct srv_server *s, const char *alias, const struct srv_loaded **loaded, char *why,
                        size_t why_size);

/* Take requests: the models are loaded as they are named. */
bool srv_server_ready(struct srv_server *s);

/* NULL while the server is well; once a loaded model's check has failed
 * (struct srv_loaded), why: /health and every new request answer 503
 * with it, and the command should end the server (srv_server_drain() lets
 * the running requests, which fail with it, be answered). */
const char *srv_server_failure(struct srv_server *s);

/* Stop taking requests (503), wait up to grace_s seconds for those
 * running, then end the rest; returns how many had to be ended. */
int srv_server_drain(struct srv_server *s, double grace_s);

/* Close the listener and every connection, unload every model. */
void srv_server_free(struct srv_server *s);

#endif /* HEARTH_SERVER_SERVER_H */

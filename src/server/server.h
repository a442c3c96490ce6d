/*
 * server.h -- hearth serve's HTTP server: the OpenAI API over one
 * engine.  A request's path: http.c reads it and hands it to a worker
 * thread, server.c routes it, jobs.c checks it (request.c), renders and
 * tokenizes the prompt, submits it to the engine and waits; the engine's
 * thread steps every running request and hands tokens back through
 * events, which become the response or its server-sent events
 * (openai.c); metrics.c counts it all.
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
    int port;                    /* 0: any free port */
    const char *alias;           /* the model's name in the API */
    int32_t parallel;            /* sequences the engine runs at once */
    int32_t max_queue;           /* requests waiting beyond those */
    int32_t max_connections;
    size_t max_body;             /* bytes of a request body */
    int32_t max_tokens_cap;      /* most max_tokens; also the default */
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
    hearth_speculation speculation; /* of every request (draft_max 0: none) */
    int32_t reasoning_budget;    /* of chat requests that give none; -1: no limit */
    bool no_webui;               /* GET / answers 404 instead of the chat page */
    size_t responses_store;      /* past responses kept (0: none) ... */
    size_t responses_store_bytes; /* ... in at most these bytes */
    hearth_pooling pooling;      /* of /v1/embeddings: MEAN, CLS or LAST whatever
                                  * the model declares; NONE: the model's */
};

struct srv_server;

/* Listen (the server answers 503 "loading" until srv_server_ready()).
 * The port it got goes to *port.  false after printing why. */
bool srv_server_start(const struct srv_config *config, struct srv_server **out, int *port);

/* What is known only once the model is loaded: its name in the API
 * (kept as a pointer), the max_tokens cap and the speculation every
 * request gets (the model's prediction layer drafts by default). */
bool srv_server_set_limits(struct srv_server *s, const char *alias, int32_t max_tokens_cap,
                           const hearth_speculation *speculation);

/* Serve with this model and engine (both owned by the caller, kept until
 * srv_server_free()).  tmpl may be NULL when the model has none: chat
 * requests are then refused.  tool_format is the syntax of the
 * template's tool calls (srv_tool_format_detect()).  bos_text and
 * eos_text are the texts of the model's BOS and EOS tokens. */
bool srv_server_ready(struct srv_server *s, const hearth_model *model, hearth_engine *engine,
                      const hearth_template *tmpl, enum srv_tool_format tool_format,
                      const char *bos_text, const char *eos_text);

/* Split chat replies into reasoning_content and content in format
 * (before srv_server_ready(); HEARTH_REASONING_NONE, the default: all of
 * a reply is content). */
void srv_server_set_reasoning(struct srv_server *s, hearth_reasoning_format format);

/* Stop taking requests (503), wait up to grace_s seconds for those
 * running, then end the rest; returns how many had to be ended. */
int srv_server_drain(struct srv_server *s, double grace_s);

/* Close the listener and every connection, stop the engine's thread. */
void srv_server_free(struct srv_server *s);

#endif /* HEARTH_SERVER_SERVER_H */

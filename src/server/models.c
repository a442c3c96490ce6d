/*
 * models.c -- the model table of hearth serve: the models it may serve,
 * each loaded on first use with an engine and an engine thread of its
 * own, unloaded after --keep-alive of idleness or when another needs the
 * memory (--max-memory).
 *
 * A request finds its model (srv_model_find) and holds it
 * (srv_model_acquire) from before its body is checked against the
 * model's limits until its job is freed (srv_model_release): a model
 * held by any request -- waiting for its load, queued or running -- is
 * never unloaded.  The request that finds its model unloaded loads it on
 * its own thread through the loader (serve.c); the others wait for that
 * load, and a load that fails fails them with its error.
 *
 * Memory: the bytes of each loaded model (its weights and KV pool,
 * measured when it was loaded) count against --max-memory, and so does a
 * model being loaded: by its last measure, or by its file's size before
 * its first load.  A load that does not fit beside the others unloads
 * the idle ones, least recently used first, and waits for more to become
 * idle when that is not enough.  A model whose measure exceeds the bound
 * alone is refused (400, the sizes named).  A first load measures more
 * than its file (the KV pool): the idle models are unloaded to make up
 * for it, and the bound may be passed by that much while the others are
 * busy, until the next load.
 */
#define _GNU_SOURCE
#include "config.h"

#include "server_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "request.h"

void srv_models_init(struct srv_models *t, const struct srv_model_loader *loader)
{
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->changed, NULL);
    pthread_cond_init(&t->reaper_cv, NULL);
    t->loader = *loader;
}

bool srv_models_add(struct srv_server *s, const char *alias, const char *path, uint64_t file_bytes)
{
    struct srv_models *t = &s->models;
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->m[i].alias, alias) == 0) {
            fprintf(stderr, LOG_PREFIX "two models are named '%s' (%s and %s)\n", alias, t->m[i].path, path);
            return false;
        }
    struct srv_model *p = realloc(t->m, (t->n + 1) * sizeof *p);
    if (!p) return false;
    t->m = p;
    struct srv_model *m = &t->m[t->n];
    memset(m, 0, sizeof *m);
    m->s = s;
    m->alias = strdup(alias);
    m->path = strdup(path);
    if (!m->alias || !m->path) {
        free(m->alias);
        free(m->path);
        return false;
    }
    m->file_bytes = file_bytes;
    pthread_mutex_init(&m->wake_mu, NULL);
    pthread_cond_init(&m->wake_cv, NULL);
    pthread_mutex_init(&m->grammars_mu, NULL);
    t->n++;
    return true;
}

/* Add the counters of an engine's statistics to r's. */
static void add_counters(hearth_engine_stats *r, const hearth_engine_stats *es)
{
    r->prompt_tokens += es->prompt_tokens;
    r->generated_tokens += es->generated_tokens;
    r->prefix_queries += es->prefix_queries;
    r->prefix_hits += es->prefix_hits;
    r->evictions += es->evictions;
    r->preemptions += es->preemptions;
    r->steps += es->steps;
    r->draft_steps += es->draft_steps;
    r->drafted_tokens += es->drafted_tokens;
    r->accepted_tokens += es->accepted_tokens;
    r->verify_steps += es->verify_steps;
    r->disk_hits += es->disk_hits;
    r->disk_writes += es->disk_writes;
    r->disk_rejected += es->disk_rejected;
    r->disk_dropped += es->disk_dropped;
    r->disk_write_errors += es->disk_write_errors;
    r->disk_evictions += es->disk_evictions;
    r->disk_snapshot_hits += es->disk_snapshot_hits;
    r->disk_snapshot_writes += es->disk_snapshot_writes;
}

/* Stop a thread that sleeps on cv until *quit (mu guards both). */
static void stop_thread(pthread_mutex_t *mu, pthread_cond_t *cv, bool *quit, pthread_t thread)
{
    pthread_mutex_lock(mu);
    *quit = true;
    pthread_cond_signal(cv);
    pthread_mutex_unlock(mu);
    pthread_join(thread, NULL);
}

/* Unload a model marked MODEL_UNLOADING (table unlocked): stop its
 * engine's thread, free its grammars, give it back to the loader. */
static void model_unload(struct srv_model *m, const char *why)
{
    struct srv_models *t = &m->s->models;
    if (m->thread_started) {
        stop_thread(&m->wake_mu, &m->wake_cv, &m->quit, m->thread);
        m->thread_started = false;
        m->quit = false;
    }
    hearth_engine_stats es;
    hearth_engine_get_stats(m->loaded.engine, &es);
    for (size_t i = 0; i < SRV_GRAMMAR_CACHE; i++) {
        hearth_grammar_free(m->grammars[i].grammar);
        free(m->grammars[i].text);
        m->grammars[i].grammar = NULL;
        m->grammars[i].text = NULL;
    }
    t->loader.unload(t->loader.user, &m->loaded);
    memset(&m->loaded, 0, sizeof m->loaded);
    m->vocab = NULL;
    pthread_mutex_lock(&t->mu);
    add_counters(&t->retired, &es);
    t->used_bytes -= m->bytes;
    m->state = MODEL_UNLOADED;
    if (why) {
        if (strcmp(why, "idle") == 0) m->unloads_idle++;
        else m->unloads_memory++;
    }
    pthread_cond_broadcast(&t->changed);
    pthread_mutex_unlock(&t->mu);
    if (why) fprintf(stderr, LOG_PREFIX "model %s: unloaded (%s)\n", m->alias, why);
}

/* The loaded model, held by no request, that was let go longest ago,
 * other than keep (table locked); NULL when there is none. */
static struct srv_model *lru_idle(struct srv_models *t, const struct srv_model *keep)
{
    struct srv_model *best = NULL;
    for (size_t i = 0; i < t->n; i++) {
        struct srv_model *m = &t->m[i];
        if (m == keep || m->state != MODEL_LOADED || m->users > 0) continue;
        if (!best || m->last_used < best->last_used) best = m;
    }
    return best;
}

/* Unload idle models, the least recently used first, while the loaded
 * ones take more than the bound (table locked; unlocked while each is
 * unloaded).  Returns whether they fit now. */
static bool make_room(struct srv_models *t, uint64_t max, uint64_t need, const struct srv_model *keep)
{
    while (t->used_bytes + need > max) {
        struct srv_model *v = lru_idle(t, keep);
        if (!v) return false;
        v->state = MODEL_UNLOADING;
        pthread_mutex_unlock(&t->mu);
        char why[160];
        snprintf(why, sizeof why, "memory: %s needs room under --max-memory", keep ? keep->alias : "a model");
        model_unload(v, why);
        pthread_mutex_lock(&t->mu);
    }
    return true;
}

static void format_mib(char *out, size_t n, uint64_t bytes)
{
    snprintf(out, n, "%.1f MiB", (double)bytes / 1048576.0);
}

/* Load m (table locked, m MODEL_LOADING with need reserved; unlocked
 * while the loader runs).  false with m's error set. */
static bool model_load(struct srv_model *m, uint64_t need)
{
    struct srv_models *t = &m->s->models;
    /* the one model of -m FILE, before the server is ready: hearth serve
     * reports its load itself */
    const bool quiet = m->s->state == STATE_LOADING;
    pthread_mutex_unlock(&t->mu);
    if (!quiet) fprintf(stderr, LOG_PREFIX "model %s: loading %s\n", m->alias, m->path);
    const double t0 = srv_now_s();
    char why[sizeof m->error];
    why[0] = '\0';
    struct srv_loaded l;
    memset(&l, 0, sizeof l);
    bool ok = t->loader.load(t->loader.user, m->alias, m->path, &l, why, sizeof why);
    hearth_engine_stats es;
    memset(&es, 0, sizeof es);
    if (ok) {
        m->loaded = l;
        m->vocab = hearth_model_vocab(l.model);
        hearth_engine_params p;
        hearth_engine_get_params(l.engine, &p);
        m->n_ctx = p.n_ctx;
        m->n_vocab = hearth_model_n_vocab(l.model);
        hearth_engine_get_stats(l.engine, &es);
        m->quit = false;
        m->wake_pending = false;
        if (pthread_create(&m->thread, NULL, engine_main, m) != 0) {
            snprintf(why, sizeof why, "cannot start the engine's thread");
            t->loader.unload(t->loader.user, &m->loaded);
            memset(&m->loaded, 0, sizeof m->loaded);
            ok = false;
        } else {
            m->thread_started = true;
        }
    }
    const double secs = srv_now_s() - t0;
    pthread_mutex_lock(&t->mu);
    if (!ok) {
        t->used_bytes -= need;
        m->state = MODEL_UNLOADED;
        m->failed_gen = m->load_gen;
        m->load_failures++;
        m->too_large = false;
        snprintf(m->error, sizeof m->error, "%s", why[0] ? why : "the load failed");
        pthread_cond_broadcast(&t->changed);
        pthread_mutex_unlock(&t->mu);
        if (!quiet) fprintf(stderr, LOG_PREFIX "model %s: the load failed: %s\n", m->alias, m->error);
        pthread_mutex_lock(&t->mu);
        return false;
    }
    const uint64_t bytes = es.weights_bytes + es.kv_bytes;
    t->used_bytes = t->used_bytes - need + bytes;
    m->bytes = bytes;
    m->loads++;
    m->load_seconds += secs;
    if (es.block_tokens) t->block_tokens = es.block_tokens;
    const uint64_t max = m->s->cfg.max_memory;
    if (max && bytes > max) {
        /* it cannot be served within the bound, even alone: the requests
         * that wait for it fail (the error first), then it goes */
        char b[32], mx[32];
        format_mib(b, sizeof b, bytes);
        format_mib(mx, sizeof mx, max);
        m->failed_gen = m->load_gen;
        m->too_large = true;
        snprintf(m->error, sizeof m->error, "the model '%s' needs %s (weights and KV pool), more than "
                 "--max-memory %s allows", m->alias, b, mx);
        m->state = MODEL_UNLOADING;
        pthread_mutex_unlock(&t->mu);
        model_unload(m, NULL);
        pthread_mutex_lock(&t->mu);
        return false;
    }
    m->state = MODEL_LOADED;
    pthread_cond_broadcast(&t->changed);
    char w[32], kv[32];
    format_mib(w, sizeof w, es.weights_bytes);
    format_mib(kv, sizeof kv, es.kv_bytes);
    if (!quiet)
        fprintf(stderr, LOG_PREFIX "model %s: loaded in %.2f s (%s, weights %s, KV pool %s)\n", m->alias, secs,
                hearth_model_desc(m->loaded.model), w, kv);
    /* its measure may exceed the estimate it was loaded under */
    if (max) make_room(t, max, 0, m);
    return true;
}

/* Whether the client of cn has gone (cn may be NULL). */
static bool gone(struct conn *cn)
{
    return cn && srv_client_gone(cn);
}

/* Wait on the table's condition for a while (table locked). */
static void wait_changed(struct srv_models *t)
{
    const struct timespec ts = srv_realtime_in(0.2);
    pthread_cond_timedwait(&t->changed, &t->mu, &ts);
}

/* The error of m's last load, for the requests that needed it. */
static void load_error(const struct srv_model *m, struct srv_error *e)
{
    if (m->too_large)
        srv_fail(e, 400, "invalid_request_error", "model_too_large", "model", "%s", m->error);
    else
        srv_fail(e, 500, "server_error", "model_load_failed", NULL, "the model '%s' could not be loaded: %s",
                 m->alias, m->error);
}

bool srv_model_acquire(struct srv_model *m, struct conn *cn, double deadline, bool queued, struct srv_error *e)
{
    struct srv_server *s = m->s;
    struct srv_models *t = &s->models;
    const uint64_t max = s->cfg.max_memory;
    bool ok = false, counted = false;
    uint64_t waited_gen = 0;
    bool waiting_load = false;
    pthread_mutex_lock(&t->mu);
    if (queued && m->users >= s->cfg.parallel + s->cfg.max_queue) {
        int32_t n = m->users;
        pthread_mutex_unlock(&t->mu);
        return srv_fail(e, 429, "rate_limit_error", "queue_full", NULL,
                        "the server is busy: %d requests for the model '%s' are running or waiting (--parallel %d, "
                        "--max-queue %d); retry later", n, m->alias, s->cfg.parallel, s->cfg.max_queue);
    }
    m->users++;
    for (;;) {
        if (m->state == MODEL_LOADED) {
            ok = true;
            break;
        }
        if (waiting_load && m->state != MODEL_LOADING && m->failed_gen == waited_gen) {
            load_error(m, e);
            break;
        }
        if (s->state == STATE_DRAINING || s->state == STATE_FAILED || s->forced_end) {
            srv_unavailable(s, e);
            break;
        }
        if (srv_now_s() >= deadline) {
            srv_fail(e, 504, "timeout_error", "timeout", NULL,
                     "the request ran past its deadline of %g s (--timeout) while its model '%s' was loading",
                     s->cfg.timeout_s, m->alias);
            break;
        }
        if (m->state == MODEL_UNLOADED) {
            const uint64_t need = m->bytes ? m->bytes : m->file_bytes;
            if (max && need > max) {
                char b[32], mx[32];
                format_mib(b, sizeof b, need);
                format_mib(mx, sizeof mx, max);
                srv_fail(e, 400, "invalid_request_error", "model_too_large", "model",
                         "the model '%s' needs %s (%s), more than --max-memory %s allows", m->alias, b,
                         m->bytes ? "weights and KV pool" : "its file", mx);
                break;
            }
            if (!max || make_room(t, max, need, m)) {
                if (m->state != MODEL_UNLOADED) continue; /* the lock was let go */
                if (max && t->used_bytes + need > max) continue;
                m->state = MODEL_LOADING;
                m->load_gen++;
                t->used_bytes += need;
                if (!counted) srv_metrics_requests(&s->metrics, 0, 1), counted = true;
                if (model_load(m, need)) ok = true;
                else load_error(m, e);
                break;
            }
            /* the others are busy: wait for one to become idle */
        } else if (m->state == MODEL_LOADING && !waiting_load) {
            waiting_load = true;
            waited_gen = m->load_gen;
        }
        if (!counted) srv_metrics_requests(&s->metrics, 0, 1), counted = true;
        /* the socket is looked at unlocked: a half-close writes to it */
        pthread_mutex_unlock(&t->mu);
        const bool went = gone(cn);
        pthread_mutex_lock(&t->mu);
        if (went) {
            srv_fail(e, 499, "invalid_request_error", "client_gone", NULL, "the client went away");
            break;
        }
        wait_changed(t);
    }
    if (!ok) {
        m->users--;
        m->last_used = srv_now_s();
        pthread_cond_broadcast(&t->changed);
        pthread_cond_signal(&t->reaper_cv);
    }
    pthread_mutex_unlock(&t->mu);
    if (counted) srv_metrics_requests(&s->metrics, 0, -1);
    return ok;
}

void srv_model_release(struct srv_model *m)
{
    struct srv_models *t = &m->s->models;
    pthread_mutex_lock(&t->mu);
    m->users--;
    m->last_used = srv_now_s();
    if (m->users == 0) {
        pthread_cond_broadcast(&t->changed);
        pthread_cond_signal(&t->reaper_cv);
    }
    pthread_mutex_unlock(&t->mu);
}

struct srv_model *srv_model_find(struct srv_server *s, const char *name, struct srv_error *e)
{
    struct srv_models *t = &s->models;
    if (t->n == 1) return &t->m[0];
    if (!name) {
        char list[300] = "";
        for (size_t i = 0; i < t->n && strlen(list) < 240; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", t->m[i].alias);
        srv_fail(e, 400, "invalid_request_error", "missing_required_parameter", "model",
                 "'model' is required: this server serves %zu models (%s; see GET /v1/models)", t->n, list);
        return NULL;
    }
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->m[i].alias, name) == 0) return &t->m[i];
    srv_fail(e, 404, "invalid_request_error", "model_not_found", "model",
             "The model '%.200s' does not exist (GET /v1/models lists those served)", name);
    return NULL;
}

/* ---- idle models ------------------------------------------------------ */

/* The thread that unloads the models idle for --keep-alive. */
static void *reaper_main(void *arg)
{
    struct srv_server *s = arg;
    struct srv_models *t = &s->models;
    const double keep = s->cfg.keep_alive_s;
    pthread_mutex_lock(&t->mu);
    while (!t->reaper_quit) {
        const double now = srv_now_s();
        double next = INFINITY;
        struct srv_model *due = NULL;
        for (size_t i = 0; keep >= 0 && i < t->n; i++) {
            struct srv_model *m = &t->m[i];
            if (m->state != MODEL_LOADED || m->users > 0) continue;
            const double at = m->last_used + keep;
            if (at <= now) {
                due = m;
                break;
            }
            if (at < next) next = at;
        }
        if (due) {
            due->state = MODEL_UNLOADING;
            pthread_mutex_unlock(&t->mu);
            model_unload(due, "idle");
            pthread_mutex_lock(&t->mu);
            continue;
        }
        if (isinf(next)) {
            pthread_cond_wait(&t->reaper_cv, &t->mu);
        } else {
            /* the monotonic deadline as a realtime one */
            const struct timespec ts = srv_realtime_in(next - now + 0.001);
            pthread_cond_timedwait(&t->reaper_cv, &t->mu, &ts);
        }
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

bool srv_models_start(struct srv_server *s)
{
    struct srv_models *t = &s->models;
    if (s->cfg.keep_alive_s < 0 || t->reaper_started) return true;
    if (pthread_create(&t->reaper, NULL, reaper_main, s) != 0) {
        fprintf(stderr, LOG_PREFIX "cannot start the thread that unloads idle models\n");
        return false;
    }
    t->reaper_started = true;
    return true;
}

void srv_models_free(struct srv_server *s)
{
    struct srv_models *t = &s->models;
    if (t->reaper_started) stop_thread(&t->mu, &t->reaper_cv, &t->reaper_quit, t->reaper);
    for (size_t i = 0; i < t->n; i++) {
        struct srv_model *m = &t->m[i];
        if (m->state == MODEL_LOADED) {
            m->state = MODEL_UNLOADING;
            model_unload(m, NULL);
        }
    }
    /* jobs whose samples an engine never ended (it stopped first) */
    while (s->jobs) job_destroy(s->jobs);
    for (size_t i = 0; i < t->n; i++) {
        struct srv_model *m = &t->m[i];
        pthread_mutex_destroy(&m->wake_mu);
        pthread_cond_destroy(&m->wake_cv);
        pthread_mutex_destroy(&m->grammars_mu);
        free(m->alias);
        free(m->path);
    }
    free(t->m);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->changed);
    pthread_cond_destroy(&t->reaper_cv);
}

/* ---- what the table shows --------------------------------------------- */

json_t *srv_models_json(struct srv_server *s)
{
    struct srv_models *t = &s->models;
    json_t *data = json_array();
    if (!data) return NULL;
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < t->n; i++) {
        struct srv_model *m = &t->m[i];
        json_t *o = json_object();
        json_t *h = json_object();
        if (!o || !h) {
            json_decref(o);
            json_decref(h);
            json_decref(data);
            data = NULL;
            break;
        }
        json_object_set_new(o, "id", json_string(m->alias));
        json_object_set_new(o, "object", json_string("model"));
        json_object_set_new(o, "created", json_integer((json_int_t)s->created));
        json_object_set_new(o, "owned_by", json_string("hearth"));
        const bool loaded = m->state == MODEL_LOADED;
        json_object_set_new(h, "loaded", json_boolean(loaded));
        json_object_set_new(h, "state", json_string(m->state == MODEL_LOADED    ? "loaded"
                                                    : m->state == MODEL_LOADING ? "loading"
                                                    : m->state == MODEL_UNLOADING ? "unloading"
                                                                                  : "unloaded"));
        json_object_set_new(h, "requests", json_integer(m->users));
        json_object_set_new(h, "memory_bytes", json_integer((json_int_t)(m->bytes ? m->bytes : m->file_bytes)));
        json_object_set_new(h, "loads", json_integer((json_int_t)m->loads));
        if (m->failed_gen && m->failed_gen == m->load_gen) json_object_set_new(h, "error", json_string(m->error));
        json_object_set_new(o, "hearth", h);
        if (loaded) {
            /* what only a loaded model says (read under the table's lock:
             * it is not unloaded meanwhile) */
            const hearth_model *hm = m->loaded.model;
            json_t *meta = json_object();
            json_object_set_new(meta, "description", json_string(hearth_model_desc(hm)));
            json_object_set_new(meta, "n_ctx", json_integer(m->n_ctx));
            json_object_set_new(meta, "n_ctx_train", json_integer(hearth_model_n_ctx_train(hm)));
            json_object_set_new(meta, "n_vocab", json_integer(m->n_vocab));
            json_object_set_new(meta, "n_params", json_integer((json_int_t)hearth_model_n_params(hm)));
            json_object_set_new(meta, "size", json_integer((json_int_t)hearth_model_size_bytes(hm)));
            json_object_set_new(o, "meta", meta);
        }
        json_array_append_new(data, o);
    }
    pthread_mutex_unlock(&t->mu);
    return data;
}

void srv_models_stats(struct srv_server *s, hearth_engine_stats *out)
{
    struct srv_models *t = &s->models;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&t->mu);
    *out = t->retired;
    out->block_tokens = t->block_tokens;
    for (size_t i = 0; i < t->n; i++) {
        struct srv_model *m = &t->m[i];
        if (m->state != MODEL_LOADED) continue;
        hearth_engine_stats es;
        hearth_engine_get_stats(m->loaded.engine, &es);
        out->running += es.running;
        out->waiting += es.waiting;
        out->n_blocks += es.n_blocks;
        out->blocks_used += es.blocks_used;
        out->blocks_cached += es.blocks_cached;
        out->window = es.window > out->window ? es.window : out->window;
        out->window_blocks += es.window_blocks;
        out->window_blocks_used += es.window_blocks_used;
        out->window_blocks_cached += es.window_blocks_cached;
        out->kv_bytes += es.kv_bytes;
        out->weights_bytes += es.weights_bytes;
        out->disk_bytes += es.disk_bytes;
        out->disk_files += es.disk_files;
        add_counters(out, &es);
    }
    pthread_mutex_unlock(&t->mu);
}

/* A model's name as a label value: quotes, backslashes and newlines
 * escaped as the exposition format asks. */
static void label_value(char *out, size_t n, const char *v)
{
    size_t k = 0;
    for (; *v && k + 3 < n; v++) {
        if (*v == '"' || *v == '\\') out[k++] = '\\', out[k++] = *v;
        else if (*v == '\n') out[k++] = '\\', out[k++] = 'n';
        else out[k++] = *v;
    }
    out[k] = '\0';
}

bool srv_models_metrics(struct srv_server *s, struct buf *o)
{
    struct srv_models *t = &s->models;
    static const struct {
        const char *name, *type, *help;
    } info[] = {
        {"hearth_model_loaded", "gauge", "Whether the model is loaded (1) or not (0)."},
        {"hearth_model_memory_bytes", "gauge", "Weights and KV pool of the model (its file's size before its first load)."},
        {"hearth_model_loads_total", "counter", "Loads of the model that succeeded."},
        {"hearth_model_load_failures_total", "counter", "Loads of the model that failed."},
        {"hearth_model_load_seconds_total", "counter", "Seconds spent loading the model."},
        {"hearth_model_unloads_total", "counter", "Unloads of the model, by reason (idle: --keep-alive; memory: --max-memory)."},
    };
    char line[1024];
    bool ok = true;
    pthread_mutex_lock(&t->mu);
    int32_t n_loaded = 0;
    for (size_t i = 0; i < t->n; i++) n_loaded += t->m[i].state == MODEL_LOADED;
    snprintf(line, sizeof line,
             "# HELP hearth_models_loaded Models loaded.\n# TYPE hearth_models_loaded gauge\n"
             "hearth_models_loaded %d\n"
             "# HELP hearth_models_memory_bytes Weights and KV pools of the models loaded and loading.\n"
             "# TYPE hearth_models_memory_bytes gauge\nhearth_models_memory_bytes %" PRIu64 "\n",
             (int)n_loaded, t->used_bytes);
    ok = ok && buf_add(o, line, strlen(line));
    for (size_t k = 0; k < sizeof info / sizeof info[0]; k++) {
        snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n", info[k].name, info[k].help, info[k].name,
                 info[k].type);
        ok = ok && buf_add(o, line, strlen(line));
        for (size_t i = 0; i < t->n; i++) {
            const struct srv_model *m = &t->m[i];
            char label[300];
            label_value(label, sizeof label, m->alias);
            switch (k) {
            case 0: snprintf(line, sizeof line, "%s{model=\"%s\"} %d\n", info[k].name, label, m->state == MODEL_LOADED); break;
            case 1:
                snprintf(line, sizeof line, "%s{model=\"%s\"} %" PRIu64 "\n", info[k].name, label,
                         m->bytes ? m->bytes : m->file_bytes);
                break;
            case 2: snprintf(line, sizeof line, "%s{model=\"%s\"} %" PRIu64 "\n", info[k].name, label, m->loads); break;
            case 3:
                snprintf(line, sizeof line, "%s{model=\"%s\"} %" PRIu64 "\n", info[k].name, label, m->load_failures);
                break;
            case 4: snprintf(line, sizeof line, "%s{model=\"%s\"} %.6f\n", info[k].name, label, m->load_seconds); break;
            default:
                snprintf(line, sizeof line, "%s{model=\"%s\",reason=\"idle\"} %" PRIu64 "\n%s{model=\"%s\",reason=\"memory\"} %" PRIu64 "\n",
                         info[k].name, label, m->unloads_idle, info[k].name, label, m->unloads_memory);
                break;
            }
            ok = ok && buf_add(o, line, strlen(line));
        }
    }
    pthread_mutex_unlock(&t->mu);
    return ok;
}

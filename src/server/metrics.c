/*
 * metrics.c -- counters, gauges and latency histograms of hearth serve in
 * the Prometheus text format (see metrics.h).
 */
#include "metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Upper bounds of the latency buckets, in seconds. */
static const double bounds[SRV_HIST_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5,
                                                 0.75, 1, 2.5, 5, 10, 30, 60, 300};

static const struct {
    const char *name, *help;
} hist_info[SRV_N_LATENCY] = {
    {"hearth_time_to_first_token_seconds", "Time from a request's arrival to its first token."},
    {"hearth_time_per_output_token_seconds",
     "Mean time between a sample's output tokens after the first (inter-token latency)."},
    {"hearth_request_duration_seconds", "Time from a request's arrival to its last token."},
    {"hearth_queue_time_seconds", "Time a request waited before it was first scheduled."},
};

static const char *const outcome_names[SRV_N_OUTCOME] = {"stop", "length", "cancelled", "error",
                                                         "timeout"};

void srv_metrics_init(struct srv_metrics *m)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
}

void srv_metrics_destroy(struct srv_metrics *m)
{
    pthread_mutex_destroy(&m->mu);
}

static void observe_locked(struct srv_metrics *m, enum srv_latency which, double s)
{
    struct srv_histogram *h = &m->hist[which];
    int b = 0;
    while (b < SRV_HIST_BUCKETS && s > bounds[b]) b++;
    h->counts[b]++;
    h->sum += s;
    h->count++;
}

void srv_metrics_observe(struct srv_metrics *m, enum srv_latency which, double seconds)
{
    pthread_mutex_lock(&m->mu);
    observe_locked(m, which, seconds);
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_sample(struct srv_metrics *m, enum srv_outcome outcome,
                        const hearth_request_stats *st)
{
    pthread_mutex_lock(&m->mu);
    m->outcomes[outcome]++;
    if (st) {
        m->prompt_tokens += (uint64_t)st->n_prompt;
        m->cached_tokens += (uint64_t)st->n_cached;
        m->cached_disk_tokens += (uint64_t)st->n_cached_disk;
        m->generated_tokens += (uint64_t)st->n_generated;
        if (st->n_generated > 0) {
            observe_locked(m, SRV_TTFT, st->ttft_ms / 1000);
            if (st->n_generated > 1) observe_locked(m, SRV_TPOT, st->tpot_ms / 1000);
            observe_locked(m, SRV_E2E, st->total_ms / 1000);
        }
        if (st->queue_ms >= 0 && (st->n_generated > 0 || outcome != SRV_OUT_CANCELLED))
            observe_locked(m, SRV_QUEUE, st->queue_ms / 1000);
    }
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_status(struct srv_metrics *m, int status)
{
    pthread_mutex_lock(&m->mu);
    int i = 0;
    while (i < SRV_MAX_STATUS && m->statuses[i] && m->statuses[i] != status) i++;
    if (i < SRV_MAX_STATUS) {
        m->statuses[i] = status;
        m->status_counts[i]++;
    }
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_requests(struct srv_metrics *m, int64_t d_running, int64_t d_waiting)
{
    pthread_mutex_lock(&m->mu);
    m->requests_running += d_running;
    m->requests_waiting += d_waiting;
    pthread_mutex_unlock(&m->mu);
}

struct out {
    char *p;
    size_t len, cap;
    int failed;
};

static void put(struct out *o, const char *fmt, ...)
{
    if (o->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            o->failed = 1;
            return;
        }
        if ((size_t)n < o->cap - o->len) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = o->cap * 2 + (size_t)n;
        char *p = realloc(o->p, cap);
        if (!p) {
            o->failed = 1;
            return;
        }
        o->p = p;
        o->cap = cap;
    }
}

static void metric(struct out *o, const char *type, const char *name, const char *help, double v)
{
    put(o, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

char *srv_metrics_render(struct srv_metrics *m, const hearth_engine_stats *es, bool disk, size_t *len)
{
    struct out o = {malloc(8192), 0, 8192, 0};
    if (!o.p) return NULL;
    pthread_mutex_lock(&m->mu);
    struct srv_metrics c = *m;
    pthread_mutex_unlock(&m->mu);
    metric(&o, "gauge", "hearth_requests_running", "Requests generating (their first token came).",
           (double)c.requests_running);
    metric(&o, "gauge", "hearth_requests_waiting", "Requests without a first token yet (queued or in prefill).",
           (double)c.requests_waiting);
    metric(&o, "gauge", "hearth_sequences_running", "Sequences the engine runs.", es->running);
    metric(&o, "gauge", "hearth_sequences_waiting", "Sequences queued in the engine (preempted ones too).",
           es->waiting);
    metric(&o, "gauge", "hearth_kv_blocks_used", "KV blocks held by sequences.", es->blocks_used);
    metric(&o, "gauge", "hearth_kv_blocks_cached", "KV blocks kept for the prefix cache (free to evict).",
           es->blocks_cached);
    metric(&o, "gauge", "hearth_kv_blocks_total", "KV blocks of the pool.", es->n_blocks);
    metric(&o, "gauge", "hearth_kv_block_tokens", "Positions per KV block.", es->block_tokens);
    if (es->window > 0) {
        metric(&o, "gauge", "hearth_kv_window_blocks_used", "Blocks of the sliding layers' pool held by sequences.",
               es->window_blocks_used);
        metric(&o, "gauge", "hearth_kv_window_blocks_cached",
               "Blocks of the sliding layers' pool kept for the prefix cache.", es->window_blocks_cached);
        metric(&o, "gauge", "hearth_kv_window_blocks_total", "Blocks of the sliding layers' pool.",
               es->window_blocks);
    }
    metric(&o, "counter", "hearth_prompt_tokens_total", "Prompt tokens of finished samples.",
           (double)c.prompt_tokens);
    metric(&o, "counter", "hearth_prompt_tokens_cached_total",
           "Prompt tokens of finished samples taken from the prefix cache.", (double)c.cached_tokens);
    metric(&o, "counter", "hearth_prompt_tokens_computed_total", "Prompt tokens computed in prefill.",
           (double)es->prompt_tokens);
    metric(&o, "counter", "hearth_generated_tokens_total", "Tokens generated.",
           (double)es->generated_tokens);
    metric(&o, "counter", "hearth_prefix_cache_queries_total", "Prefix-cache block lookups.",
           (double)es->prefix_queries);
    metric(&o, "counter", "hearth_prefix_cache_hits_total", "Prefix-cache blocks found.",
           (double)es->prefix_hits);
    metric(&o, "counter", "hearth_kv_evictions_total", "Cached KV blocks reused for new positions.",
           (double)es->evictions);
    if (disk) {
        metric(&o, "counter", "hearth_prompt_tokens_cached_disk_total",
               "Prompt tokens of finished samples read from the prefix cache's disk tier.",
               (double)c.cached_disk_tokens);
        metric(&o, "counter", "hearth_prefix_cache_disk_hits_total",
               "Prefix-cache blocks read from the disk tier (also counted in the hits).", (double)es->disk_hits);
        metric(&o, "counter", "hearth_prefix_cache_disk_writes_total", "Blocks written to the disk tier.",
               (double)es->disk_writes);
        metric(&o, "counter", "hearth_prefix_cache_disk_rejected_total",
               "Files of the disk tier found invalid (corrupt, truncated, foreign) and removed.",
               (double)es->disk_rejected);
        metric(&o, "counter", "hearth_prefix_cache_disk_snapshot_hits_total",
               "Recurrent-state snapshots read from the disk tier.", (double)es->disk_snapshot_hits);
        metric(&o, "counter", "hearth_prefix_cache_disk_snapshot_writes_total",
               "Recurrent-state snapshots written to the disk tier.", (double)es->disk_snapshot_writes);
        metric(&o, "counter", "hearth_prefix_cache_disk_dropped_total",
               "Files (blocks, snapshots) not written because the writer's queue was full.",
               (double)es->disk_dropped);
        metric(&o, "counter", "hearth_prefix_cache_disk_write_errors_total",
               "Files whose write to the disk tier failed.", (double)es->disk_write_errors);
        metric(&o, "counter", "hearth_prefix_cache_disk_evictions_total",
               "Files of the disk tier removed for its size bound.", (double)es->disk_evictions);
        metric(&o, "gauge", "hearth_prefix_cache_disk_bytes", "Bytes of the disk tier's files.",
               (double)es->disk_bytes);
        metric(&o, "gauge", "hearth_prefix_cache_disk_files",
               "Files of the disk tier (blocks and recurrent-state snapshots).",
               (double)es->disk_files);
    }
    metric(&o, "counter", "hearth_preemptions_total", "Sequences preempted for want of KV blocks.",
           (double)es->preemptions);
    metric(&o, "counter", "hearth_engine_steps_total", "Forward passes run.", (double)es->steps);
    metric(&o, "counter", "hearth_draft_steps_total", "Forward passes of the draft model.",
           (double)es->draft_steps);
    metric(&o, "counter", "hearth_drafted_tokens_total", "Drafted tokens verified (speculative decoding).",
           (double)es->drafted_tokens);
    metric(&o, "counter", "hearth_accepted_tokens_total", "Drafted tokens accepted.",
           (double)es->accepted_tokens);
    metric(&o, "counter", "hearth_verify_steps_total", "Verifications of a sequence's drafted tokens.",
           (double)es->verify_steps);
    put(&o, "# HELP hearth_requests_total Samples finished, by how they ended.\n"
            "# TYPE hearth_requests_total counter\n");
    for (int i = 0; i < SRV_N_OUTCOME; i++)
        put(&o, "hearth_requests_total{finish_reason=\"%s\"} %llu\n", outcome_names[i],
            (unsigned long long)c.outcomes[i]);
    put(&o, "# HELP hearth_http_responses_total HTTP responses, by status.\n"
            "# TYPE hearth_http_responses_total counter\n");
    for (int i = 0; i < SRV_MAX_STATUS && c.statuses[i]; i++)
        put(&o, "hearth_http_responses_total{status=\"%d\"} %llu\n", c.statuses[i],
            (unsigned long long)c.status_counts[i]);
    for (int h = 0; h < SRV_N_LATENCY; h++) {
        const struct srv_histogram *hg = &c.hist[h];
        put(&o, "# HELP %s %s\n# TYPE %s histogram\n", hist_info[h].name, hist_info[h].help,
            hist_info[h].name);
        uint64_t cum = 0;
        for (int b = 0; b < SRV_HIST_BUCKETS; b++) {
            cum += hg->counts[b];
            put(&o, "%s_bucket{le=\"%g\"} %llu\n", hist_info[h].name, bounds[b], (unsigned long long)cum);
        }
        cum += hg->counts[SRV_HIST_BUCKETS];
        put(&o, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", hist_info[h].name,
            (unsigned long long)cum, hist_info[h].name, hg->sum, hist_info[h].name,
            (unsigned long long)hg->count);
    }
    if (o.failed) {
        free(o.p);
        return NULL;
    }
    *len = o.len;
    return o.p;
}

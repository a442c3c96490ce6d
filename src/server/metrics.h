/*
 * metrics.h -- what hearth serve counts, and its rendering in the
 * Prometheus text exposition format for GET /metrics.  Every call is
 * thread-safe (one mutex; the counts are updated a few times a request).
 */
#ifndef HEARTH_SERVER_METRICS_H
#define HEARTH_SERVER_METRICS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "hearth.h"

enum srv_latency { SRV_TTFT, SRV_TPOT, SRV_E2E, SRV_QUEUE, SRV_N_LATENCY };

/* How a request's samples ended, as /metrics labels them. */
enum srv_outcome { SRV_OUT_STOP, SRV_OUT_LENGTH, SRV_OUT_CANCELLED, SRV_OUT_ERROR, SRV_OUT_TIMEOUT,
                   SRV_N_OUTCOME };

#define SRV_HIST_BUCKETS 16
#define SRV_MAX_STATUS 16

struct srv_histogram {
    uint64_t counts[SRV_HIST_BUCKETS + 1]; /* per bucket; the last is +Inf */
    double sum;
    uint64_t count;
};

struct srv_metrics {
    pthread_mutex_t mu;
    struct srv_histogram hist[SRV_N_LATENCY];
    uint64_t outcomes[SRV_N_OUTCOME];
    int statuses[SRV_MAX_STATUS];
    uint64_t status_counts[SRV_MAX_STATUS];
    uint64_t prompt_tokens, cached_tokens, cached_disk_tokens, generated_tokens;
    int64_t requests_running, requests_waiting;
};

void srv_metrics_init(struct srv_metrics *m);
void srv_metrics_destroy(struct srv_metrics *m);
/* One observation in seconds. */
void srv_metrics_observe(struct srv_metrics *m, enum srv_latency which, double seconds);
/* One finished sample: its outcome and statistics (stats may be NULL). */
void srv_metrics_sample(struct srv_metrics *m, enum srv_outcome outcome,
                        const hearth_request_stats *stats);
void srv_metrics_status(struct srv_metrics *m, int status);
/* Requests admitted (running) and queued: deltas. */
void srv_metrics_requests(struct srv_metrics *m, int64_t d_running, int64_t d_waiting);
/* The exposition text, malloc'ed, with the engine's statistics. */
char *srv_metrics_render(struct srv_metrics *m, const hearth_engine_stats *es, bool disk, size_t *len);

#endif /* HEARTH_SERVER_METRICS_H */

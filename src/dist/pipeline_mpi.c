/*
 * pipeline_mpi.c -- a pipeline of ranks over MPI (hearth.h, "Pipeline
 * parallelism"; the messages the runner sends in pipeline.h).
 *
 * Every message is a header of PIPE_HDR 64-bit integers -- its kind, the
 * bytes of the payload after it, a status, the kind's fields and the
 * runner it is for (rank 0 may hold several: H_ID) -- then
 * the payload, both with one tag, so that a link delivers them in order.
 * The chain (tag TAG_CHAIN) goes from each stage's first rank to the
 * next's; the answers (TAG_OUT) go from the last stage's to rank 0.  With
 * tensor parallelism (hearth_pipeline_open_tp) a stage's first rank hands
 * the messages on to the stage's other ranks (TAG_TP), which answer
 * setups and checks (TAG_TP_UP), and the stage's ranks exchange the rows
 * of their split products (TAG_GATHER, pipe_tp_gather()).
 *
 * Nothing waits without end where an answer is due: a request is polled
 * (MPI_Testall) until it completes, MPI reports an error (the
 * communicator's error handler returns them), or the pipeline's timeout
 * passes (wait_reqs()).  A rank waiting for rank 0's next step waits as
 * long as it takes.  MPI moves a message only while its ranks are inside
 * MPI calls (over TCP, the sender's and the receiver's both), so a wait
 * polls often: it tests without pause for its first SPIN_US / 2 (a
 * message over shared memory is there within microseconds, and giving
 * the processor away on a busy machine loses it for a scheduler's
 * slice), tests and yields the processor until SPIN_US (over TCP the
 * kernel's own work on the message may need it), then sleeps between
 * tests (a sleeper woken is scheduled at once), each nap at most a
 * sixteenth of the time waited so far, from NAP_MIN_US up to NAP_STEP_US
 * -- up to NAP_IDLE_US
 * once a wait for the next message has lasted IDLE_MS, so that an idle
 * rank takes little of a processor.
 *
 * A rank other than 0 keeps a receive of rank 0's check (TAG_PROBE)
 * posted and answers it from every wait; when rank 0 has waited out its
 * timeout, it checks every rank (find_silent()), so that the error names
 * the rank that stopped or died, not only the one it waited for (the
 * last stage's leader, with more than two ranks).  The other ranks wait
 * three times as long before they give up, so that rank 0, which
 * reports, is the first to.
 *
 * Steps in flight (pipe_post_step()): rank 0 may hand on a step without
 * waiting for its send to complete, and hand on more before the first
 * step's answer comes back; each posted step keeps its own buffer until
 * its sends complete, which pipe_progress() and every wait for an answer
 * look after.  Every step rank 0 hands on carries a serial number
 * (H_H), which the last rank's answer repeats (H_C): answers come back in
 * the order the steps went, and one that is not the oldest step's breaks
 * the pipeline rather than give a step another's logits.
 *
 * A message that could not be sent or received within the timeout breaks
 * the pipeline: the links may hold half a message, so every later send or
 * receive fails at once with the first error (hearth_pipeline_check()
 * tells the server so) and the job can only be ended.  A rank that fails
 * a step and says so (MSG_FAIL) does not break it, unless its stage has
 * several ranks: they are out of step.
 */
#include "internal.h"

#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "hearth.h"
#include "model.h"
#include "pipeline.h"
#include "sha256.h"

enum { TAG_CHAIN = 1, TAG_OUT = 2, TAG_TP = 3, TAG_TP_UP = 4, TAG_GATHER = 5, TAG_PROBE = 6, TAG_PROBE_UP = 7 };
enum { MSG_SETUP = 1, MSG_STEP, MSG_COPY, MSG_RELEASE, MSG_QUIT, MSG_FAIL, MSG_PING };
enum { H_KIND, H_BYTES, H_STATUS, H_A, H_B, H_C, H_D, H_E, H_F, H_G, H_H, H_ID = 15, PIPE_HDR = 16 };

#define DEFAULT_TIMEOUT_MS 120000
/* Steps rank 0 may have posted and not yet seen sent (pipe_post_step()). */
#define POSTED_MAX 8
/* How a wait polls (see above): test, then test and yield, for SPIN_US in
 * all, then naps of a sixteenth of the time waited, NAP_MIN_US to
 * NAP_STEP_US, or up to NAP_IDLE_US once the wait for the next message
 * has lasted IDLE_MS. */
#define SPIN_US 100.0
#define NAP_MIN_US 10.0
#define NAP_STEP_US 100.0
#define NAP_IDLE_US 20000.0
#define IDLE_MS 100.0
/* The longest rank 0 waits for the answers to its check of every rank. */
#define PROBE_MS 2000
/* The longest the handshake's texts may be (each). */
#define IDENT_BYTES 1024

struct hearth_pipeline {
    MPI_Comm comm;
    int rank, size;
    /* size = pp stages x tp ranks; rank = stage * tp + tpi.  The chain
     * runs through the stages' leaders (tpi 0); a leader hands every
     * message on to its stage's other ranks (TAG_TP), which answer setups
     * and checks (TAG_TP_UP); the stage's matrix products gather their
     * rows over tp_comm (TAG_GATHER). */
    int pp, tp, stage, tpi;
    MPI_Comm tp_comm;
    bool tp_setup;      /* a leader: its peers owe an answer to a setup; a
                         * peer: the last message was a setup */
    int *counts, *displs; /* tp each: a gather's parts */
    MPI_Request *reqs;  /* 2 (tp - 1): its messages */
    int timeout_ms;
    bool initialized;   /* MPI_Init was called here */
    uint8_t *in;        /* a received payload */
    size_t in_cap;
    uint8_t *out;       /* a payload being sent */
    size_t out_cap;
    int32_t next_id;    /* rank 0: the id of the next runner */
    /* rank 0: steps handed on and answers taken (serial numbers); the
     * other ranks: the serial of the step last received */
    int64_t sent, answered, serial;
    /* posted steps whose sends may not have completed, each with its
     * header (its serial number the order they were posted in), payload
     * and requests */
    struct posted {
        int64_t hdr[PIPE_HDR];
        uint8_t *buf;
        size_t cap;
        MPI_Request req[2];
        bool busy;
    } posted[POSTED_MAX];
    MPI_Request probe;  /* a rank other than 0: the receive of rank 0's
                         * check, posted while the pipeline is open */
    int64_t probe_in, probe_out;
    char broken[512];   /* why a message was lost (a rank died or went
                         * silent, MPI failed): every later message fails
                         * with it, and the job can only be ended */
};

static hearth_status mpi_error(int rc, int peer, const char *what)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "error %d", rc);
    if (peer < 0) return hearth_error(HEARTH_E_IO, "pipeline: %s: %s", what, text);
    return hearth_error(HEARTH_E_IO, "pipeline: %s rank %d: %s", what, peer, text);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Sleeps as short as asked: the default slack of a thread's timers
 * (50 us on Linux) would make every short nap of a wait 50 us longer.
 * Once per thread; a thread made by the waiting one inherits it. */
static void precise_naps(void)
{
#if defined(__linux__) && defined(PR_SET_TIMERSLACK)
    static _Thread_local bool set;
    if (!set) {
        prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
        set = true;
    }
#endif
}

/* Between two tests of a wait that has lasted waited_ms: nothing, yield,
 * or nap (see the comment at the top); next: the wait for the next
 * message. */
static void pause_wait(double waited_ms, bool next)
{
    const double us = waited_ms * 1e3;
    if (us < SPIN_US / 2) return;
    if (us < SPIN_US) {
        sched_yield();
        return;
    }
    const double cap = next && waited_ms >= IDLE_MS ? NAP_IDLE_US : NAP_STEP_US;
    double nap = us / 16;
    if (nap < NAP_MIN_US) nap = NAP_MIN_US;
    if (nap > cap) nap = cap;
    const long ns = (long)(nap * 1e3);
    struct timespec t = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&t, NULL);
}

/* A rank other than 0: answer rank 0's check if it came (the receive is
 * posted again).  Errors are left to the wait's own requests. */
static void answer_probe(struct hearth_pipeline *p)
{
    int came = 0;
    if (p->probe == MPI_REQUEST_NULL || MPI_Test(&p->probe, &came, MPI_STATUS_IGNORE) != MPI_SUCCESS || !came)
        return;
    p->probe_out = p->probe_in;
    MPI_Request ans;
    /* one int64, sent at once: never waited for */
    if (MPI_Isend(&p->probe_out, 1, MPI_INT64_T, 0, TAG_PROBE_UP, p->comm, &ans) == MPI_SUCCESS)
        MPI_Request_free(&ans);
    if (MPI_Irecv(&p->probe_in, 1, MPI_INT64_T, 0, TAG_PROBE, p->comm, &p->probe) != MPI_SUCCESS)
        p->probe = MPI_REQUEST_NULL;
}

static void cancel_reqs(MPI_Request *reqs, int n)
{
    for (int i = 0; i < n; i++)
        if (reqs[i] != MPI_REQUEST_NULL) {
            MPI_Cancel(&reqs[i]);
            MPI_Request_free(&reqs[i]);
        }
}

/* Rank 0, a wait timed out: check every other rank (a message each, to
 * be answered within PROBE_MS from whatever wait it is in).  The ranks
 * that do not answer, or whose messages fail, go to silent (at most max
 * of them); returns their count. */
static int find_silent(struct hearth_pipeline *p, int *silent, int max)
{
    const int others = p->size - 1;
    MPI_Request *reqs = hearth_calloc(2 * (size_t)others, sizeof *reqs, "the pipeline's check");
    int64_t *got = hearth_calloc((size_t)others + 1, sizeof *got, "the pipeline's check");
    if (!reqs || !got) {
        free(reqs);
        free(got);
        return 0;
    }
    static const int64_t token = 1; /* a send left pending outlives this call */
    for (int r = 1; r <= others; r++) {
        MPI_Request *rq = &reqs[2 * (r - 1)];
        rq[0] = rq[1] = MPI_REQUEST_NULL;
        if (MPI_Irecv(&got[r], 1, MPI_INT64_T, r, TAG_PROBE_UP, p->comm, &rq[0]) != MPI_SUCCESS ||
            MPI_Isend(&token, 1, MPI_INT64_T, r, TAG_PROBE, p->comm, &rq[1]) != MPI_SUCCESS)
            got[r] = -1;
    }
    const int limit = p->timeout_ms < PROBE_MS ? p->timeout_ms : PROBE_MS;
    const double t0 = now_ms();
    for (;;) {
        bool done = true;
        for (int r = 1; r <= others; r++) {
            MPI_Request *rq = &reqs[2 * (r - 1)];
            for (int k = 0; k < 2 && got[r] >= 0; k++) {
                int ok = 0;
                if (rq[k] != MPI_REQUEST_NULL && MPI_Test(&rq[k], &ok, MPI_STATUS_IGNORE) != MPI_SUCCESS)
                    got[r] = -1;
            }
            if (got[r] >= 0 && (rq[0] != MPI_REQUEST_NULL || rq[1] != MPI_REQUEST_NULL)) done = false;
        }
        const double waited = now_ms() - t0;
        if (done || waited > limit) break;
        pause_wait(waited, false);
    }
    int n = 0;
    for (int r = 1; r <= others; r++) {
        /* answered: its receive completed */
        if (got[r] >= 0 && reqs[2 * (r - 1)] == MPI_REQUEST_NULL) continue;
        if (n < max) silent[n] = r;
        n++;
    }
    cancel_reqs(reqs, 2 * others);
    free(reqs);
    free(got);
    return n < max ? n : max;
}

/* The error of a wait that timed out after timeout_ms (see wait_reqs()).
 * On rank 0, the ranks that do not answer a check are named first, where
 * they are others than the one waited for. */
static hearth_status timed_out(struct hearth_pipeline *p, int peer, int timeout_ms, const char *what)
{
    const int s = (timeout_ms + 999) / 1000;
    int silent[8];
    const int n = p->rank == 0 ? find_silent(p, silent, 8) : 0;
    if (n == 0 || (n == 1 && silent[0] == peer)) {
        const char *more = p->rank == 0 && n == 0 ? "; every rank answers a check: a step takes longer than the "
                                                    "timeout" : "";
        if (peer < 0)
            return hearth_error(HEARTH_E_IO, "pipeline: %s: no answer within %d s (a rank stopped, or is stuck)%s",
                                what, s, more);
        return hearth_error(HEARTH_E_IO, "pipeline: %s rank %d: no answer within %d s (the rank stopped, or is "
                            "stuck)%s", what, peer, s, more);
    }
    /* "rank 1", "ranks 1 and 3", "ranks 1, 2 and 3" */
    char names[128];
    int len = snprintf(names, sizeof names, "rank%s %d", n > 1 ? "s" : "", silent[0]);
    for (int i = 1; i < n && len > 0 && (size_t)len < sizeof names; i++)
        len += snprintf(names + len, sizeof names - (size_t)len, "%s%d", i == n - 1 ? " and " : ", ", silent[i]);
    const char *verb = n == 1 ? "does" : "do";
    if (peer < 0)
        return hearth_error(HEARTH_E_IO, "pipeline: %s %s not answer (stopped, dead, or stuck): %s: no answer "
                            "within %d s", names, verb, what, s);
    return hearth_error(HEARTH_E_IO, "pipeline: %s %s not answer (stopped, dead, or stuck): %s rank %d: no answer "
                        "within %d s", names, verb, what, peer, s);
}

/* Wait for the n requests reqs to complete, at most timeout_ms (0: no
 * limit, the wait for the next message; three times as long on a rank
 * other than 0), answering rank 0's checks meanwhile.  On an error or the
 * timeout the requests left are cancelled.  The errors name peer after
 * what; peer < 0: what names the ranks. */
static hearth_status wait_reqs(struct hearth_pipeline *p, MPI_Request *reqs, int n, int timeout_ms, int peer,
                               const char *what)
{
    const bool next = timeout_ms == 0;
    if (p->rank != 0 && timeout_ms > 0) timeout_ms = timeout_ms > INT_MAX / 3 ? INT_MAX : 3 * timeout_ms;
    precise_naps();
    const double t0 = now_ms();
    for (;;) {
        int done = 0;
        int rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (rc == MPI_SUCCESS && done) return HEARTH_OK;
        hearth_status st = HEARTH_OK;
        const double waited = now_ms() - t0;
        if (rc != MPI_SUCCESS) {
            st = mpi_error(rc, peer, what);
        } else if (timeout_ms > 0 && waited > timeout_ms) {
            cancel_reqs(reqs, n);
            return timed_out(p, peer, timeout_ms, what);
        } else {
            answer_probe(p);
            pause_wait(waited, next);
            continue;
        }
        cancel_reqs(reqs, n);
        return st;
    }
}

static hearth_status wait_req(struct hearth_pipeline *p, MPI_Request *req, int peer, int timeout_ms, const char *what)
{
    return wait_reqs(p, req, 1, timeout_ms, peer, what);
}

/* Posted steps' sends: cancelled (the pipeline broke) or let go. */
static void drop_posted(struct hearth_pipeline *p)
{
    for (int i = 0; i < POSTED_MAX; i++) {
        cancel_reqs(p->posted[i].req, 2);
        p->posted[i].busy = false;
    }
}

/* The pipeline breaks with the error st (hearth_last_error()). */
static hearth_status broke(struct hearth_pipeline *p, hearth_status st)
{
    if (st && !p->broken[0]) {
        const char *why = hearth_last_error();
        snprintf(p->broken, sizeof p->broken, "%s", why && *why ? why : hearth_strerror(st));
        drop_posted(p);
    }
    return st;
}

static hearth_status send_msg_once(struct hearth_pipeline *p, int dest, int tag, int64_t *hdr, const void *payload,
                                   size_t bytes)
{
    if (bytes > (size_t)INT32_MAX)
        return hearth_error(HEARTH_E_RANGE, "pipeline: a message of %zu bytes (at most %d)", bytes, INT32_MAX);
    hdr[H_BYTES] = (int64_t)bytes;
    MPI_Request req;
    int rc = MPI_Isend(hdr, PIPE_HDR, MPI_INT64_T, dest, tag, p->comm, &req);
    if (rc != MPI_SUCCESS) return mpi_error(rc, dest, "sending to");
    HEARTH_TRY(wait_req(p, &req, dest, p->timeout_ms, "sending to"));
    if (bytes == 0) return HEARTH_OK;
    rc = MPI_Isend(payload, (int)bytes, MPI_BYTE, dest, tag, p->comm, &req);
    if (rc != MPI_SUCCESS) return mpi_error(rc, dest, "sending to");
    return wait_req(p, &req, dest, p->timeout_ms, "sending to");
}

static hearth_status send_msg(struct hearth_pipeline *p, int dest, int tag, int64_t *hdr, const void *payload,
                              size_t bytes)
{
    if (p->broken[0]) return hearth_error(HEARTH_E_IO, "%s", p->broken);
    return broke(p, send_msg_once(p, dest, tag, hdr, payload, bytes));
}

static hearth_status grow(uint8_t **buf, size_t *cap, size_t bytes)
{
    if (bytes <= *cap) return HEARTH_OK;
    uint8_t *b = hearth_aligned_alloc(64, bytes, "a pipeline message");
    if (!b) return HEARTH_E_NOMEM;
    hearth_aligned_free(*buf);
    *buf = b;
    *cap = bytes;
    return HEARTH_OK;
}

static hearth_status recv_msg_once(struct hearth_pipeline *p, int src, int tag, int64_t *hdr, int timeout_ms)
{
    MPI_Request req;
    int rc = MPI_Irecv(hdr, PIPE_HDR, MPI_INT64_T, src, tag, p->comm, &req);
    if (rc != MPI_SUCCESS) return mpi_error(rc, src, "receiving from");
    HEARTH_TRY(wait_req(p, &req, src, timeout_ms, "waiting for"));
    if (hdr[H_BYTES] < 0 || hdr[H_BYTES] > INT32_MAX)
        return hearth_error(HEARTH_E_FORMAT, "pipeline: rank %d sent a message of %lld bytes", src,
                            (long long)hdr[H_BYTES]);
    if (hdr[H_BYTES] == 0) return HEARTH_OK;
    HEARTH_TRY(grow(&p->in, &p->in_cap, (size_t)hdr[H_BYTES]));
    rc = MPI_Irecv(p->in, (int)hdr[H_BYTES], MPI_BYTE, src, tag, p->comm, &req);
    if (rc != MPI_SUCCESS) return mpi_error(rc, src, "receiving from");
    return wait_req(p, &req, src, timeout_ms, "waiting for");
}

/* Receive a message into hdr and p->in; timeout_ms 0: no limit. */
static hearth_status recv_msg(struct hearth_pipeline *p, int src, int tag, int64_t *hdr, int timeout_ms)
{
    if (p->broken[0]) return hearth_error(HEARTH_E_IO, "%s", p->broken);
    return broke(p, recv_msg_once(p, src, tag, hdr, timeout_ms));
}

static hearth_status send_kind(struct hearth_pipeline *p, int dest, int tag, int kind)
{
    int64_t hdr[PIPE_HDR] = {[H_KIND] = kind};
    return send_msg(p, dest, tag, hdr, NULL, 0);
}

/* The ranks a message goes to: the leaders (tpi 0) of the next and the
 * previous stage, of the last one, and this rank's own leader. */
static int next_leader(const struct hearth_pipeline *p) { return (p->stage + 1) * p->tp; }
static int prev_leader(const struct hearth_pipeline *p) { return (p->stage - 1) * p->tp; }
static int last_leader(const struct hearth_pipeline *p) { return (p->pp - 1) * p->tp; }
static int own_leader(const struct hearth_pipeline *p) { return p->stage * p->tp; }

/* A leader: the message to the other ranks of its stage. */
static hearth_status to_peers(struct hearth_pipeline *p, int64_t *hdr, const void *payload, size_t bytes)
{
    for (int r = 1; p->tpi == 0 && r < p->tp; r++)
        HEARTH_TRY(send_msg(p, own_leader(p) + r, TAG_TP, hdr, payload, bytes));
    return HEARTH_OK;
}

/* Rank 0: a message without payload down the chain and to its stage. */
static hearth_status send_down(struct hearth_pipeline *p, int64_t *hdr)
{
    if (p->pp > 1) HEARTH_TRY(send_msg(p, next_leader(p), TAG_CHAIN, hdr, NULL, 0));
    return to_peers(p, hdr, NULL, 0);
}

/* A leader: the answers its peers owe to a setup, or a check (kind).  The
 * first failure among them is the result (its text, naming the rank, is
 * the error); every answer is taken, failed or not. */
static hearth_status collect_peers(struct hearth_pipeline *p, int kind)
{
    hearth_status first = HEARTH_OK;
    char why[1024] = "";
    for (int r = 1; p->tpi == 0 && r < p->tp; r++) {
        int64_t hdr[PIPE_HDR];
        HEARTH_TRY(recv_msg(p, own_leader(p) + r, TAG_TP_UP, hdr, p->timeout_ms));
        if (hdr[H_KIND] == kind) continue;
        if (first) continue;
        if (hdr[H_KIND] != MSG_FAIL) {
            return broke(p, hearth_error(HEARTH_E_INTERNAL, "pipeline: rank %d answered with a message of kind "
                                         "%lld", own_leader(p) + r, (long long)hdr[H_KIND]));
        }
        first = (hearth_status)hdr[H_STATUS];
        if (first <= HEARTH_OK || first > HEARTH_E_INTERNAL) first = HEARTH_E_INTERNAL;
        snprintf(why, sizeof why, "%.*s", (int)HEARTH_MIN(hdr[H_BYTES], 1000), (const char *)p->in);
    }
    return first ? hearth_error(first, "%s", why) : HEARTH_OK;
}

/* ---- the handle ---------------------------------------------------------- */

static void free_handle(struct hearth_pipeline *p)
{
    drop_posted(p);
    cancel_reqs(&p->probe, 1);
    if (p->tp_comm != MPI_COMM_NULL) MPI_Comm_free(&p->tp_comm);
    if (p->comm != MPI_COMM_NULL) MPI_Comm_free(&p->comm);
    if (p->initialized) MPI_Finalize();
    for (int i = 0; i < POSTED_MAX; i++) hearth_aligned_free(p->posted[i].buf);
    hearth_aligned_free(p->in);
    hearth_aligned_free(p->out);
    free(p->counts);
    free(p->displs);
    free(p->reqs);
    free(p);
}

hearth_status hearth_pipeline_open_tp(int32_t n_stages, int32_t n_tp, int32_t timeout_ms, hearth_pipeline **out)
{
    if (!out) return hearth_error(HEARTH_E_INVALID, "hearth_pipeline_open: NULL argument");
    *out = NULL;
    if (n_stages < 1 || n_tp < 1 || (int64_t)n_stages * n_tp < 2 || (int64_t)n_stages * n_tp > 65536)
        return hearth_error(HEARTH_E_INVALID, "a pipeline of %d stages of %d ranks (at least 2 ranks in all, at "
                            "most 65536)", n_stages, n_tp);
    if (timeout_ms < 0) return hearth_error(HEARTH_E_INVALID, "pipeline timeout %d ms is negative", timeout_ms);
    struct hearth_pipeline *p = hearth_calloc(1, sizeof *p, "a pipeline");
    if (!p) return HEARTH_E_NOMEM;
    p->comm = p->tp_comm = MPI_COMM_NULL;
    for (int i = 0; i < POSTED_MAX; i++) p->posted[i].req[0] = p->posted[i].req[1] = MPI_REQUEST_NULL;
    p->probe = MPI_REQUEST_NULL;
    p->timeout_ms = timeout_ms > 0 ? timeout_ms : DEFAULT_TIMEOUT_MS;
    p->pp = n_stages;
    p->tp = n_tp;
    p->counts = hearth_calloc((size_t)n_tp, sizeof *p->counts, "a pipeline");
    p->displs = hearth_calloc((size_t)n_tp, sizeof *p->displs, "a pipeline");
    p->reqs = hearth_calloc(2 * (size_t)n_tp, sizeof *p->reqs, "a pipeline");
    if (!p->counts || !p->displs || !p->reqs) {
        free_handle(p);
        return HEARTH_E_NOMEM;
    }
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
        /* the engine's thread makes the calls, one at a time */
        int provided;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
            free_handle(p);
            return hearth_error(HEARTH_E_IO, "pipeline: MPI could not start");
        }
        p->initialized = true;
    }
    if (MPI_Comm_dup(MPI_COMM_WORLD, &p->comm) != MPI_SUCCESS) {
        hearth_pipeline_close(p, true);
        return HEARTH_E_IO;
    }
    MPI_Comm_set_errhandler(p->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(p->comm, &p->rank);
    MPI_Comm_size(p->comm, &p->size);
    if (p->size != n_stages * n_tp) {
        hearth_status st;
        if (n_tp == 1)
            st = hearth_error(HEARTH_E_INVALID, "a pipeline of %d ranks, but the MPI job has %d (mpirun -np %d)",
                              n_stages, p->size, n_stages);
        else if (n_stages == 1)
            st = hearth_error(HEARTH_E_INVALID, "%d tensor-parallel ranks, but the MPI job has %d (mpirun -np %d)",
                              n_tp, p->size, n_tp);
        else
            st = hearth_error(HEARTH_E_INVALID, "%d pipeline stages of %d tensor-parallel ranks are %d ranks, but "
                              "the MPI job has %d (mpirun -np %d)", n_stages, n_tp, n_stages * n_tp, p->size,
                              n_stages * n_tp);
        free_handle(p);
        return st;
    }
    p->stage = p->rank / n_tp;
    p->tpi = p->rank % n_tp;
    /* every rank of the job takes part in the split */
    if (MPI_Comm_split(p->comm, p->stage, p->tpi, &p->tp_comm) != MPI_SUCCESS) {
        hearth_pipeline_close(p, true);
        return HEARTH_E_IO;
    }
    MPI_Comm_set_errhandler(p->tp_comm, MPI_ERRORS_RETURN);
    /* rank 0's check, answered from every wait (wait_reqs()) */
    if (p->rank != 0 && MPI_Irecv(&p->probe_in, 1, MPI_INT64_T, 0, TAG_PROBE, p->comm, &p->probe) != MPI_SUCCESS) {
        hearth_pipeline_close(p, true);
        return HEARTH_E_IO;
    }
    *out = p;
    return HEARTH_OK;
}

hearth_status hearth_pipeline_open(int32_t n_ranks, int32_t timeout_ms, hearth_pipeline **out)
{
    if (!out) return hearth_error(HEARTH_E_INVALID, "hearth_pipeline_open: NULL argument");
    if (n_ranks < 2) return hearth_error(HEARTH_E_INVALID, "a pipeline of %d ranks (at least 2)", n_ranks);
    return hearth_pipeline_open_tp(n_ranks, 1, timeout_ms, out);
}

int32_t hearth_pipeline_rank(const hearth_pipeline *p) { return p->rank; }
int32_t hearth_pipeline_size(const hearth_pipeline *p) { return p->size; }
int32_t hearth_pipeline_stages(const hearth_pipeline *p) { return p->pp; }
int32_t hearth_pipeline_tp(const hearth_pipeline *p) { return p->tp; }
int32_t pipe_rank(const struct hearth_pipeline *p) { return p->rank; }
int32_t pipe_size(const struct hearth_pipeline *p) { return p->size; }
int32_t pipe_stages(const struct hearth_pipeline *p) { return p->pp; }
int32_t pipe_tp(const struct hearth_pipeline *p) { return p->tp; }
int32_t pipe_tp_rank(const struct hearth_pipeline *p) { return p->tpi; }

void hearth_pipeline_layers(const hearth_pipeline *p, int32_t n_layer, int32_t *first, int32_t *end)
{
    const int32_t base = n_layer / p->pp, extra = n_layer % p->pp, r = p->stage;
    *first = r * base + (r < extra ? r : extra);
    *end = *first + base + (r < extra);
}

void hearth_pipeline_close(hearth_pipeline *p, bool failed)
{
    if (!p) return;
    /* a lost message: the others cannot be told to stop */
    if (p->broken[0]) failed = true;
    if (failed) {
        /* the others may wait for this rank: end them all */
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
        exit(1);
    }
    int64_t quit[PIPE_HDR] = {[H_KIND] = MSG_QUIT};
    if (p->rank == 0 && send_down(p, quit) != HEARTH_OK) {
        fprintf(stderr, "hearth: %s\n", hearth_last_error());
        hearth_pipeline_close(p, true);
    }
    free_handle(p);
}

/* ---- the handshake ------------------------------------------------------- */

/* A digest of what makes the model this model: its family, its
 * hyperparameters as loaded, and each tensor's name, type, shape, place
 * and first bytes. */
static void model_digest(const hearth_model *m, char hex[SHA256_HEX_BYTES])
{
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, m->arch->name, strlen(m->arch->name) + 1);
    const struct hparams *hp = &m->hp;
    const int64_t dims[] = {hp->n_layer, hp->n_embd, hp->n_vocab, hp->n_head, hp->n_head_kv, hp->head_dim,
                            hp->n_ff, hp->n_ctx_train, hp->n_expert};
    sha256_update(&c, dims, sizeof dims);
    const hearth_gguf *g = m->gguf;
    for (int64_t i = 0; i < hearth_gguf_n_tensors(g); i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(g, i);
        sha256_update(&c, t->name, strlen(t->name) + 1);
        const int64_t fields[] = {t->type, t->n_dims, t->ne[0], t->ne[1], t->ne[2], t->ne[3],
                                  (int64_t)t->offset, (int64_t)t->bytes, t->split};
        sha256_update(&c, fields, sizeof fields);
        sha256_update(&c, t->data, t->bytes < 64 ? t->bytes : 64);
    }
    uint8_t d[SHA256_DIGEST_BYTES];
    sha256_final(&c, d);
    sha256_hex(d, hex);
}

hearth_status hearth_pipeline_handshake(hearth_pipeline *p, const hearth_model *model, const char *options)
{
    if (!p || !model || !options) return hearth_error(HEARTH_E_INVALID, "hearth_pipeline_handshake: NULL argument");
    if (strlen(options) >= IDENT_BYTES)
        return hearth_error(HEARTH_E_INVALID, "pipeline: the options' text is too long (%zu bytes)", strlen(options));
    static const char *what[] = {"hearth versions", "models", "options"};
    char *all = hearth_calloc((size_t)p->size + 1, 3 * IDENT_BYTES, "the pipeline's handshake");
    if (!all) return HEARTH_E_NOMEM;
    char *mine = all + (size_t)p->size * 3 * IDENT_BYTES;
    snprintf(mine, IDENT_BYTES, "%s", hearth_version());
    char hex[SHA256_HEX_BYTES];
    model_digest(model, hex);
    snprintf(mine + IDENT_BYTES, IDENT_BYTES, "%s (%s)", hex, model->desc);
    snprintf(mine + 2 * IDENT_BYTES, IDENT_BYTES, "%s", options);
    MPI_Request req;
    int rc = MPI_Iallgather(mine, 3 * IDENT_BYTES, MPI_CHAR, all, 3 * IDENT_BYTES, MPI_CHAR, p->comm, &req);
    hearth_status st = rc != MPI_SUCCESS ? mpi_error(rc, 0, "the handshake with")
                                         : wait_req(p, &req, 0, p->timeout_ms, "the handshake with");
    for (int r = 1; !st && r < p->size; r++)
        for (int k = 0; k < 3 && !st; k++) {
            const char *theirs = all + ((size_t)r * 3 + k) * IDENT_BYTES, *first = all + (size_t)k * IDENT_BYTES;
            if (strcmp(theirs, first) != 0)
                st = hearth_error(HEARTH_E_INVALID, "pipeline: ranks 0 and %d run different %s: '%s' on rank "
                                  "0, '%s' on rank %d", r, what[k], first, theirs, r);
        }
    free(all);
    return st;
}

/* ---- the messages of a step ---------------------------------------------- */

/* Rank 0: a step's answer is due while steps are in flight; what may not
 * come between them (a step sent and waited for, a setup) is refused. */
static hearth_status none_in_flight(const struct hearth_pipeline *p, const char *what)
{
    if (p->rank != 0 || p->sent == p->answered) return HEARTH_OK;
    return hearth_error(HEARTH_E_INTERNAL, "pipeline: %s while %lld steps are in flight", what,
                        (long long)(p->sent - p->answered));
}

/* The error of an answer to rank 0 that is not the one expected: a
 * failure passed on (its text names the rank), or a stray message. */
static hearth_status failure_of(struct hearth_pipeline *p, const int64_t *hdr)
{
    if (hdr[H_KIND] != MSG_FAIL)
        return hearth_error(HEARTH_E_INTERNAL, "pipeline: rank %d answered with a message of kind %lld",
                            last_leader(p), (long long)hdr[H_KIND]);
    hearth_status st = (hearth_status)hdr[H_STATUS];
    if (st <= HEARTH_OK || st > HEARTH_E_INTERNAL) st = HEARTH_E_INTERNAL;
    return hearth_error(st, "%.*s", hdr[H_BYTES] > 0 ? (int)hdr[H_BYTES] : 0,
                        hdr[H_BYTES] > 0 ? (const char *)p->in : "");
}

static void setup_header(int64_t *hdr, const struct pipe_setup *rp, int32_t id)
{
    const int64_t h[PIPE_HDR] = {[H_KIND] = MSG_SETUP, [H_A] = rp->n_batch, [H_B] = rp->n_ctx,
                                 [H_C] = rp->cache_type, [H_D] = rp->block_tokens, [H_E] = rp->n_blocks,
                                 [H_F] = rp->n_blocks_window, [H_G] = rp->chunk_size, [H_ID] = id};
    memcpy(hdr, h, sizeof h);
}

hearth_status hearth_pipeline_check(hearth_pipeline *p, bool ping)
{
    if (!p) return hearth_error(HEARTH_E_INVALID, "hearth_pipeline_check: NULL argument");
    if (p->broken[0]) return hearth_error(HEARTH_E_IO, "%s", p->broken);
    /* steps in flight: their answers are the check */
    if (!ping || p->rank != 0 || p->sent != p->answered) return HEARTH_OK;
    /* through every rank and back, as a step goes */
    int64_t hdr[PIPE_HDR] = {[H_KIND] = MSG_PING};
    HEARTH_TRY(send_down(p, hdr));
    hearth_status st = collect_peers(p, MSG_PING);
    if (st) return broke(p, st);
    if (p->pp == 1) return HEARTH_OK;
    HEARTH_TRY(recv_msg(p, last_leader(p), TAG_OUT, hdr, p->timeout_ms));
    if (hdr[H_KIND] == MSG_PING) return HEARTH_OK;
    return broke(p, hearth_error(HEARTH_E_INTERNAL, "pipeline: rank %d answered a check with a message of kind %lld",
                                 last_leader(p), (long long)hdr[H_KIND]));
}

hearth_status pipe_setup(struct hearth_pipeline *p, const struct pipe_setup *rp, int32_t *id)
{
    HEARTH_TRY(none_in_flight(p, "a runner made"));
    *id = p->next_id++;
    int64_t hdr[PIPE_HDR];
    setup_header(hdr, rp, *id);
    HEARTH_TRY(send_down(p, hdr));
    /* every answer is taken before the first failure is returned */
    hearth_status st = collect_peers(p, MSG_SETUP);
    if (p->broken[0]) return st;
    char why[1024] = "";
    if (st) snprintf(why, sizeof why, "%s", hearth_last_error());
    if (p->pp > 1) {
        HEARTH_TRY(recv_msg(p, last_leader(p), TAG_OUT, hdr, p->timeout_ms));
        if (hdr[H_KIND] != MSG_SETUP && !st) {
            st = failure_of(p, hdr);
            snprintf(why, sizeof why, "%s", hearth_last_error());
        }
    }
    if (!st) return HEARTH_OK;
    /* the ranks that made their runner free it */
    pipe_release(p, *id);
    return hearth_error(st, "%s", why);
}

void pipe_release(struct hearth_pipeline *p, int32_t id)
{
    int64_t hdr[PIPE_HDR] = {[H_KIND] = MSG_RELEASE, [H_ID] = id};
    /* broken: the job is ended, not told */
    if (p->broken[0]) return;
    if (send_down(p, hdr) != HEARTH_OK) {
        fprintf(stderr, "hearth: %s\n", hearth_last_error());
        hearth_pipeline_close(p, true);
    }
}

hearth_status pipe_copy_block(struct hearth_pipeline *p, int32_t id, int32_t src, int32_t dst, int32_t n_rows,
                              bool window)
{
    int64_t hdr[PIPE_HDR] = {[H_KIND] = MSG_COPY, [H_A] = src, [H_B] = dst, [H_C] = n_rows, [H_D] = window,
                             [H_ID] = id};
    return send_down(p, hdr);
}

/* Entries of the block tables a step reads: up to the page of each
 * sequence's last position. */
static int64_t table_entries(const struct batch_pos *bp, int32_t block_tokens)
{
    int64_t n = 0;
    for (int32_t s = 0; s < bp->n_seqs; s++) {
        int32_t last = 0;
        for (int32_t t = bp->seq_start[s]; t < bp->seq_start[s + 1]; t++)
            if (bp->pos[t] > last) last = bp->pos[t];
        int64_t start = bp->table_start[s];
        if (bp->wtable_start && bp->wtable_start[s] > start) start = bp->wtable_start[s];
        const int64_t end = start + last / block_tokens + 1;
        if (end > n) n = end;
    }
    return n;
}

static uint8_t *put(uint8_t *at, const void *src, size_t bytes)
{
    if (bytes) memcpy(at, src, bytes);
    return at + bytes;
}

/* The message of a step into hdr and *buf (*cap bytes, grown as
 * needed); *bytes its payload. */
static hearth_status build_step(struct hearth_pipeline *p, int32_t id, const struct pipe_step *step,
                                int32_t block_tokens, int64_t *hdr, uint8_t **buf, size_t *cap, size_t *out_bytes)
{
    const struct batch_pos *bp = &step->bp;
    const float *x = step->x;
    const int64_t n_embd = step->n_embd;
    if (bp->state_slot || bp->ckpt)
        return hearth_error(HEARTH_E_UNSUPPORTED, "pipeline: recurrent states do not cross ranks yet");
    const int64_t n = bp->n_tokens, S = bp->n_seqs, T = table_entries(bp, block_tokens);
    const bool window = bp->wslot != NULL;
    const size_t I = sizeof(int32_t);
    size_t bytes = I * (size_t)(2 * n + (S + 1) + S + T + step->n_logits + step->n_hidden);
    if (window) bytes += I * (size_t)(n + S + T);
    bytes += sizeof(float) * (size_t)(n * n_embd);
    HEARTH_TRY(grow(buf, cap, bytes));
    uint8_t *at = *buf;
    at = put(at, bp->pos, I * (size_t)n);
    at = put(at, bp->slot, I * (size_t)n);
    at = put(at, bp->seq_start, I * (size_t)(S + 1));
    at = put(at, bp->table_start, I * (size_t)S);
    at = put(at, bp->blocks, I * (size_t)T);
    if (window) {
        at = put(at, bp->wslot, I * (size_t)n);
        at = put(at, bp->wtable_start, I * (size_t)S);
        at = put(at, bp->wblocks, I * (size_t)T);
    }
    at = put(at, step->logit_rows, I * (size_t)step->n_logits);
    at = put(at, step->hidden_rows, I * (size_t)step->n_hidden);
    put(at, x, sizeof(float) * (size_t)(n * n_embd));
    const int64_t h[PIPE_HDR] = {[H_KIND] = MSG_STEP, [H_A] = n, [H_B] = S, [H_C] = T, [H_D] = window,
                                 [H_E] = step->n_logits, [H_F] = step->n_hidden, [H_G] = n_embd,
                                 [H_H] = p->rank == 0 ? p->sent + 1 : p->serial, [H_ID] = id};
    memcpy(hdr, h, sizeof h);
    *out_bytes = bytes;
    return HEARTH_OK;
}

hearth_status pipe_send_step(struct hearth_pipeline *p, int32_t id, const struct pipe_step *step,
                             int32_t block_tokens)
{
    if (p->rank == 0) HEARTH_TRY(none_in_flight(p, "a step"));
    int64_t hdr[PIPE_HDR];
    size_t bytes;
    HEARTH_TRY(build_step(p, id, step, block_tokens, hdr, &p->out, &p->out_cap, &bytes));
    HEARTH_TRY(send_msg(p, next_leader(p), TAG_CHAIN, hdr, p->out, bytes));
    if (p->rank == 0) p->sent++;
    return HEARTH_OK;
}

/* Posted steps whose sends completed are let go; with wait, the oldest
 * one is waited for (at most the timeout) first. */
static hearth_status reap_posted(struct hearth_pipeline *p, bool wait)
{
    if (p->broken[0]) return hearth_error(HEARTH_E_IO, "%s", p->broken);
    int oldest = -1;
    for (int i = 0; i < POSTED_MAX; i++) {
        struct posted *q = &p->posted[i];
        if (!q->busy) continue;
        if (oldest < 0 || q->hdr[H_H] < p->posted[oldest].hdr[H_H]) oldest = i;
        for (int k = 0; k < 2; k++) {
            if (q->req[k] == MPI_REQUEST_NULL) continue;
            int done = 0;
            const int rc = MPI_Test(&q->req[k], &done, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) return broke(p, mpi_error(rc, next_leader(p), "sending to"));
        }
        q->busy = q->req[0] != MPI_REQUEST_NULL || q->req[1] != MPI_REQUEST_NULL;
    }
    if (!wait || oldest < 0 || !p->posted[oldest].busy) return HEARTH_OK;
    struct posted *q = &p->posted[oldest];
    for (int k = 0; k < 2; k++)
        if (q->req[k] != MPI_REQUEST_NULL)
            HEARTH_TRY(broke(p, wait_req(p, &q->req[k], next_leader(p), p->timeout_ms, "sending to")));
    q->busy = false;
    return HEARTH_OK;
}

hearth_status pipe_post_step(struct hearth_pipeline *p, int32_t id, const struct pipe_step *step,
                             int32_t block_tokens)
{
    if (p->tp > 1 || p->stage == p->pp - 1)
        return hearth_error(HEARTH_E_INTERNAL, "pipeline: steps are posted on the chain of a pipeline without "
                            "tensor parallelism");
    /* a free place, once the oldest step's sends are waited for if none is */
    struct posted *q = NULL;
    for (int pass = 0; pass < 2 && !q; pass++) {
        HEARTH_TRY(reap_posted(p, pass == 1));
        for (int i = 0; i < POSTED_MAX && !q; i++)
            if (!p->posted[i].busy) q = &p->posted[i];
    }
    size_t bytes;
    HEARTH_TRY(build_step(p, id, step, block_tokens, q->hdr, &q->buf, &q->cap, &bytes));
    if (bytes > (size_t)INT32_MAX)
        return hearth_error(HEARTH_E_RANGE, "pipeline: a message of %zu bytes (at most %d)", bytes, INT32_MAX);
    q->hdr[H_BYTES] = (int64_t)bytes;
    /* the header, then the payload, as send_msg() sends them: a link
     * delivers both in order, after what was sent before */
    const int dest = next_leader(p);
    int rc = MPI_Isend(q->hdr, PIPE_HDR, MPI_INT64_T, dest, TAG_CHAIN, p->comm, &q->req[0]);
    if (rc == MPI_SUCCESS) {
        q->busy = true;
        rc = MPI_Isend(q->buf, (int)bytes, MPI_BYTE, dest, TAG_CHAIN, p->comm, &q->req[1]);
    }
    if (rc != MPI_SUCCESS) return broke(p, mpi_error(rc, dest, "sending to"));
    if (p->rank == 0) p->sent++;
    return HEARTH_OK;
}

void pipe_progress(struct hearth_pipeline *p)
{
    if (!p->broken[0]) (void)reap_posted(p, false);
}

int64_t pipe_in_flight(const struct hearth_pipeline *p)
{
    return p->rank == 0 ? p->sent - p->answered : 0;
}

hearth_status pipe_send_peers(struct hearth_pipeline *p, int32_t id, const struct pipe_step *step,
                              int32_t block_tokens)
{
    int64_t hdr[PIPE_HDR];
    size_t bytes;
    HEARTH_TRY(build_step(p, id, step, block_tokens, hdr, &p->out, &p->out_cap, &bytes));
    return to_peers(p, hdr, p->out, bytes);
}

/* The step in p->in from rank src, described by hdr: its arrays point
 * into p->in. */
static hearth_status read_step(struct hearth_pipeline *p, int src, const int64_t *hdr, int64_t n_embd,
                               struct pipe_step *step)
{
    const int64_t n = hdr[H_A], S = hdr[H_B], T = hdr[H_C], nl = hdr[H_E], nh = hdr[H_F];
    const bool window = hdr[H_D] != 0;
    const size_t I = sizeof(int32_t);
    if (n <= 0 || n > INT32_MAX || S <= 0 || S > n || T < 0 || nl < 0 || nl > n || nh < 0 || nh > n ||
        hdr[H_G] != n_embd)
        return hearth_error(HEARTH_E_FORMAT, "pipeline: rank %d sent a step that does not fit (%lld rows)", src,
                            (long long)n);
    size_t bytes = I * (size_t)(2 * n + (S + 1) + S + T + nl + nh) + sizeof(float) * (size_t)(n * n_embd);
    if (window) bytes += I * (size_t)(n + S + T);
    if ((int64_t)bytes != hdr[H_BYTES])
        return hearth_error(HEARTH_E_FORMAT, "pipeline: rank %d sent a step of %lld bytes (%zu expected)", src,
                            (long long)hdr[H_BYTES], bytes);
    const int32_t *at = (const int32_t *)p->in;
    struct batch_pos *bp = &step->bp;
    *step = (struct pipe_step){.n_embd = n_embd};
    bp->n_tokens = n;
    bp->n_seqs = (int32_t)S;
    bp->pos = at, at += n;
    bp->slot = at, at += n;
    bp->seq_start = at, at += S + 1;
    bp->table_start = at, at += S;
    bp->blocks = at, at += T;
    if (window) {
        bp->wslot = at, at += n;
        bp->wtable_start = at, at += S;
        bp->wblocks = at, at += T;
    }
    step->logit_rows = at, at += nl;
    step->n_logits = (int32_t)nl;
    step->hidden_rows = at, at += nh;
    step->n_hidden = (int32_t)nh;
    step->x = (const float *)at;
    p->serial = hdr[H_H];
    return HEARTH_OK;
}

hearth_status pipe_send_out(struct hearth_pipeline *p, const float *logits, int64_t n_logits, const float *hidden,
                            int64_t n_hidden)
{
    const size_t bytes = sizeof(float) * (size_t)(n_logits + n_hidden);
    HEARTH_TRY(grow(&p->out, &p->out_cap, bytes));
    put(put(p->out, logits, sizeof(float) * (size_t)n_logits), hidden, sizeof(float) * (size_t)n_hidden);
    int64_t hdr[PIPE_HDR] = {[H_KIND] = MSG_STEP, [H_A] = n_logits, [H_B] = n_hidden, [H_C] = p->serial};
    return send_msg(p, 0, TAG_OUT, hdr, p->out, bytes);
}

hearth_status pipe_recv_out(struct hearth_pipeline *p, float *logits, int64_t n_logits, float *hidden,
                            int64_t n_hidden)
{
    int64_t hdr[PIPE_HDR];
    if (p->sent == p->answered)
        return hearth_error(HEARTH_E_INTERNAL, "pipeline: an answer is waited for, but no step is in flight");
    /* the posted steps' sends complete while this waits */
    HEARTH_TRY(recv_msg(p, last_leader(p), TAG_OUT, hdr, p->timeout_ms));
    const int64_t due = ++p->answered;
    HEARTH_TRY(reap_posted(p, false));
    if (hdr[H_KIND] != MSG_STEP) return failure_of(p, hdr);
    if (hdr[H_C] != due)
        return broke(p, hearth_error(HEARTH_E_INTERNAL, "pipeline: rank %d answered step %lld where step %lld "
                                     "was due", last_leader(p), (long long)hdr[H_C], (long long)due));
    if (hdr[H_A] != n_logits || hdr[H_B] != n_hidden ||
        hdr[H_BYTES] != (int64_t)(sizeof(float) * (size_t)(n_logits + n_hidden)))
        return hearth_error(HEARTH_E_INTERNAL, "pipeline: rank %d answered a step with another shape",
                            last_leader(p));
    if (n_logits) memcpy(logits, p->in, sizeof(float) * (size_t)n_logits);
    if (n_hidden) memcpy(hidden, p->in + sizeof(float) * (size_t)n_logits, sizeof(float) * (size_t)n_hidden);
    return HEARTH_OK;
}

void pipe_break(struct hearth_pipeline *p, hearth_status st)
{
    broke(p, st);
}

/* ---- the rows of a stage's products ------------------------------------- */

/* Every rank of the stage sends its rows to every other one, point to
 * point (a collective's peer that dies may end the process in the MPI
 * library, where a point-to-point message fails with an error or waits
 * out the timeout); a pair's messages arrive in the order sent, so the
 * gathers of consecutive products do not mix. */
hearth_status pipe_tp_gather(struct hearth_pipeline *p, const float *mine, const int64_t *counts, float *all)
{
    if (p->broken[0]) return hearth_error(HEARTH_E_IO, "%s", p->broken);
    int64_t at = 0;
    for (int r = 0; r < p->tp; r++) {
        if (counts[r] < 0 || counts[r] > INT32_MAX || at + counts[r] > INT32_MAX)
            return hearth_error(HEARTH_E_RANGE, "pipeline: a gather of %lld floats (at most %d)",
                                (long long)(at + counts[r]), INT32_MAX);
        p->counts[r] = (int)counts[r];
        p->displs[r] = (int)at;
        at += counts[r];
    }
    float *own = all + p->displs[p->tpi];
    if (own != mine && p->counts[p->tpi] > 0) memcpy(own, mine, sizeof(float) * (size_t)p->counts[p->tpi]);
    /* the stage's other ranks, any of which may be the one missing */
    char who[256] = "gathering a product's rows from";
    for (int r = 0, k = 0; r < p->tp; r++) {
        if (r == p->tpi) continue;
        const size_t len = strlen(who);
        const bool last = k == p->tp - 2;
        snprintf(who + len, sizeof who - len, "%s rank %d", k == 0 ? "" : last ? " or" : ",", own_leader(p) + r);
        k++;
    }
    int n = 0, rc = MPI_SUCCESS;
    for (int r = 0; r < p->tp && rc == MPI_SUCCESS; r++) {
        if (r == p->tpi) continue;
        rc = MPI_Irecv(all + p->displs[r], p->counts[r], MPI_FLOAT, r, TAG_GATHER, p->tp_comm, &p->reqs[n++]);
        if (rc == MPI_SUCCESS)
            rc = MPI_Isend(own, p->counts[p->tpi], MPI_FLOAT, r, TAG_GATHER, p->tp_comm, &p->reqs[n++]);
    }
    if (rc != MPI_SUCCESS) {
        n--;
        hearth_status st = mpi_error(rc, -1, who);
        for (int i = 0; i < n; i++) {
            MPI_Cancel(&p->reqs[i]);
            MPI_Request_free(&p->reqs[i]);
        }
        return broke(p, st);
    }
    return broke(p, wait_reqs(p, p->reqs, n, p->timeout_ms, -1, who));
}

/* ---- the other ranks ----------------------------------------------------- */

/* Pass a failure on: to the next stage, or from the last to rank 0. */
static hearth_status pass_failure(struct hearth_pipeline *p, hearth_status st, const char *text)
{
    int64_t hdr[PIPE_HDR] = {[H_KIND] = MSG_FAIL, [H_STATUS] = st};
    const bool last = p->stage == p->pp - 1;
    return send_msg(p, last ? 0 : next_leader(p), last ? TAG_OUT : TAG_CHAIN, hdr, text, strlen(text));
}

hearth_status pipe_fail(struct hearth_pipeline *p, hearth_status st)
{
    char text[1024];
    snprintf(text, sizeof text, "pipeline: rank %d: %s", p->rank, hearth_last_error() ? hearth_last_error() : "");
    if (p->tpi > 0) {
        if (p->tp_setup) {
            /* a setup: the leader answers for the stage */
            p->tp_setup = false;
            int64_t hdr[PIPE_HDR] = {[H_KIND] = MSG_FAIL, [H_STATUS] = st};
            return send_msg(p, own_leader(p), TAG_TP_UP, hdr, text, strlen(text));
        }
        /* a step: the stage's gathers are out of step, and this rank ends */
        return broke(p, hearth_error(st, "%s", text));
    }
    const bool setup = p->tp_setup;
    if (setup) {
        p->tp_setup = false;
        hearth_status peers = collect_peers(p, MSG_SETUP);
        if (p->broken[0]) return peers;
    }
    HEARTH_TRY(pass_failure(p, st, text));
    /* a step of a stage of several ranks: they may wait in a gather */
    if (p->tp > 1 && !setup) return broke(p, hearth_error(st, "%s", text));
    return HEARTH_OK;
}

hearth_status pipe_setup_done(struct hearth_pipeline *p, const struct pipe_msg *msg)
{
    if (p->tpi > 0) {
        p->tp_setup = false;
        return send_kind(p, own_leader(p), TAG_TP_UP, MSG_SETUP);
    }
    if (p->tp_setup) {
        p->tp_setup = false;
        hearth_status st = collect_peers(p, MSG_SETUP);
        if (p->broken[0]) return st;
        if (st) {
            char text[1024];
            snprintf(text, sizeof text, "%s", hearth_last_error());
            return pass_failure(p, st, text);
        }
    }
    if (p->stage == p->pp - 1) return send_kind(p, 0, TAG_OUT, MSG_SETUP);
    int64_t hdr[PIPE_HDR];
    setup_header(hdr, &msg->setup, msg->id);
    return send_msg(p, next_leader(p), TAG_CHAIN, hdr, NULL, 0);
}

hearth_status pipe_recv(struct hearth_pipeline *p, int64_t n_embd, struct pipe_msg *msg)
{
    const bool peer = p->tpi > 0;
    const int src = peer ? own_leader(p) : prev_leader(p);
    const int tag = peer ? TAG_TP : TAG_CHAIN;
    for (;;) {
        int64_t hdr[PIPE_HDR];
        HEARTH_TRY(recv_msg(p, src, tag, hdr, 0));
        *msg = (struct pipe_msg){.id = (int32_t)hdr[H_ID]};
        p->tp_setup = false;
        switch (hdr[H_KIND]) {
        case MSG_SETUP:
            msg->kind = PIPE_SETUP;
            msg->setup = (struct pipe_setup){
                .n_batch = (int32_t)hdr[H_A], .n_ctx = (int32_t)hdr[H_B], .cache_type = (hearth_type)hdr[H_C],
                .block_tokens = (int32_t)hdr[H_D], .n_blocks = (int32_t)hdr[H_E],
                .n_blocks_window = (int32_t)hdr[H_F], .chunk_size = (int32_t)hdr[H_G],
            };
            /* the stage's other ranks make theirs meanwhile; on the
             * chain, handed on once this stage has made its runners: a
             * failure goes on instead */
            HEARTH_TRY(to_peers(p, hdr, NULL, 0));
            p->tp_setup = peer || p->tp > 1;
            return HEARTH_OK;
        case MSG_STEP:
            msg->kind = PIPE_STEP;
            /* the stage's other ranks run it alongside */
            HEARTH_TRY(to_peers(p, hdr, p->in, (size_t)hdr[H_BYTES]));
            return read_step(p, src, hdr, n_embd, &msg->step);
        case MSG_COPY:
            msg->kind = PIPE_COPY;
            msg->src = (int32_t)hdr[H_A];
            msg->dst = (int32_t)hdr[H_B];
            msg->n_rows = (int32_t)hdr[H_C];
            msg->window = hdr[H_D] != 0;
            break;
        case MSG_RELEASE: msg->kind = PIPE_RELEASE; break;
        case MSG_QUIT: msg->kind = PIPE_QUIT; break;
        case MSG_PING:
            /* rank 0 checks that every rank is there: on, or back */
            if (peer) {
                HEARTH_TRY(send_kind(p, own_leader(p), TAG_TP_UP, MSG_PING));
                continue;
            }
            HEARTH_TRY(to_peers(p, hdr, NULL, 0));
            HEARTH_TRY(collect_peers(p, MSG_PING));
            if (p->stage == p->pp - 1) HEARTH_TRY(send_kind(p, 0, TAG_OUT, MSG_PING));
            else HEARTH_TRY(send_msg(p, next_leader(p), TAG_CHAIN, hdr, NULL, 0));
            continue;
        case MSG_FAIL: {
            /* an earlier stage failed: on towards rank 0 */
            char text[1024] = "";
            if (hdr[H_BYTES] > 0)
                snprintf(text, sizeof text, "%.*s", (int)HEARTH_MIN(hdr[H_BYTES], 1000), (const char *)p->in);
            HEARTH_TRY(pass_failure(p, (hearth_status)hdr[H_STATUS], text));
            continue;
        }
        default:
            return hearth_error(HEARTH_E_FORMAT, "pipeline: rank %d sent a message of kind %lld", src,
                                (long long)hdr[H_KIND]);
        }
        /* copies, releases and the end: on to the next stage and this
         * stage's other ranks first */
        if (!peer && p->stage < p->pp - 1) HEARTH_TRY(send_msg(p, next_leader(p), TAG_CHAIN, hdr, NULL, 0));
        HEARTH_TRY(to_peers(p, hdr, NULL, 0));
        return HEARTH_OK;
    }
}

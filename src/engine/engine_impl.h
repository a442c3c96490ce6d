/*
 * engine_impl.h -- what the files of the serving engine share (hearth.h,
 * "serving engine"): requests and their sequences, the engine itself, a
 * step's plan, and the functions one file of src/engine/ calls in another.
 *
 * A sequence is the tokens it knows (prompt and generated so far), how
 * many of them have keys and values in the pool (n_computed), and its
 * block table.  Every sequence in the running set has work in each step:
 * the tokens it knows but has not computed.  A decoding sequence has one
 * (the token it sampled last); a sequence in prefill has the rest of its
 * prompt, of which a step takes a chunk.  When a step computes a
 * sequence's last known token, its logits are sampled and the sequence
 * knows one token more.  Prefill and decode are the same operation, which
 * is also how a preempted sequence is recomputed: it is put back with
 * n_computed 0 and runs its whole known text again, through the prefix
 * cache where its blocks are still there.
 *
 * Each step (engine_schedule()):
 *   1. running sequences with one token to compute (decode), oldest
 *      admission first, each taking a row of the budget; one that needs a
 *      new block and finds none preempts the most recently admitted
 *      running sequence (itself if that is the newest);
 *   2. running sequences in prefill, oldest first, each taking a chunk of
 *      what is left of the budget and of the free blocks;
 *   3. waiting sequences, in order, admitted while the running set has
 *      room and the pool has blocks for their whole prompt: their cached
 *      prefix is taken from the pool, and their first chunk joins the step;
 *   4. decode rows that 1 passed over, in what 2 and 3 left.
 * The prompts of 2 and 3 have a share of the budget (params.prefill_share):
 * step 1 leaves it to them while they wait (as much of it as they need),
 * and while any sequence decodes they take no more.
 *
 * Speculation (hearth.h, hearth_speculation): a decoding sequence whose
 * request asks for it plans k drafted tokens in step 1 (the length chosen
 * from its acceptance rate and the measured costs, speculate.h) and takes
 * room for 1 + k rows.  Before the forward pass the drafts are made (by
 * prompt lookup, or by the draft model in passes of its own over all the
 * drafting sequences, which first catch its KV up with the tokens the
 * sequence knows), and the sequence's rows are its last token and the
 * drafts, every row with logits.  Verification then takes tokens one by
 * one (greedy match or the rejection rule) until one differs from the
 * draft; the keys and values of the rejected rows are dropped by
 * truncating the block tables (engine_seq_truncate(): n_computed goes back and
 * the blocks past it return to the pool), of the model and of the draft.
 * Positions past n_computed are never read: attention sees only
 * positions up to a row's own, which the row writes first.  A model's own
 * prediction layer (params.mtp) drafts instead of a draft model: it runs
 * over every step's rows after the trunk (engine_mtp_follow()), its keys
 * and values in the sequence's own blocks, and drafts in passes of one
 * row per sequence from the trunk's last hidden state.
 *
 * Steps in flight (n_groups > 1: rank 0 of a pipeline of stages, DESIGN.md
 * "Several machines"): each running sequence belongs to one of n_groups
 * groups, the one with the fewest members at its admission (or, admitted
 * in a group's step, that group, while it holds no more than its share of
 * the sequences).  A step is a group's: the scheduler plans only that
 * group's sequences (sched_group), the runner takes the step
 * (runner_submit()) and the engine goes on to the next group's step while
 * the first is on the other ranks; when every group has a step in flight
 * (or none has rows), the oldest step's results are taken
 * (runner_collect()) and its sequences sampled, as one step's are.  A
 * sequence is in at most one step in flight, and its own results come
 * back to it: its tokens are those of one step at a time, bit for bit
 * (batch invariance).  Speculation, embeddings, a draft model, a
 * prediction layer and recurrent states keep one step at a time: the
 * steps in flight are collected first.
 */
#ifndef HEARTH_ENGINE_IMPL_H
#define HEARTH_ENGINE_IMPL_H

#include "internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "disk_cache.h"
#include "engine.h"
#include "kv_cache.h"
#include "kv_pool.h"
#include "model.h"
#include "rng.h"
#include "rstate.h"
#include "runner.h"
#include "speculate.h"

#define DEFAULT_N_SEQ_MAX 64
/* hearth_engine_params.prefill_share when it is 0 */
#define DEFAULT_PREFILL_SHARE 0.125f
#define MAX_SAMPLES 64
#define MAX_DRAFT 256          /* most drafted tokens per step */
#define MAX_LOOKUP_NGRAM 64
/* A sequence whose drafts do not pay drafts again after this many decode
 * steps, to measure its acceptance rate again, and only once the time of
 * its tokens since is enough that the probe's rows and drafts cost at
 * most SPEC_PROBE_SHARE of it: where a row costs as much as a token, a
 * probe is rare. */
#define SPEC_PROBE_STEPS 16
#define SPEC_PROBE_SHARE 0.02
/* What a draft pass costs against a step's before one is timed: little,
 * so that drafts are tried and timed (engine.c: not for a draft model
 * larger than its target). */
#define SPEC_DRAFT_PRIOR 0.1
/* The decay of a sequence's acceptance counts at every verification. */
#define SPEC_ALPHA_DECAY 0.9
/* Recurrent models: the most tokens a sequence drafts in a step, and the
 * state checkpoints of one step (each a sequence's whole state) that
 * roll a verification back. */
#define SPEC_RECURRENT_DRAFT 4
#define SPEC_CHECKPOINTS 16

struct request;

struct seq {
    struct request *req;
    int32_t index;               /* sample of the request */
    hearth_token *tokens;        /* prompt, then generated tokens */
    int32_t n_tokens, tokens_cap;
    int32_t n_computed;          /* positions with keys and values in the pool */
    int32_t *table;              /* block table; -1: a block given back because
                                  * it lies wholly before every layer's window */
    int32_t n_table, table_cap;
    int32_t n_dropped;           /* leading table entries given back so */
    int32_t *wtable;             /* with a window space (engine wpool): the
                                  * sliding layers' blocks of the same
                                  * positions, from wpool (table_cap
                                  * allocated); -1: given back, before the
                                  * window */
    int32_t n_wtable, n_wdropped;
    uint64_t *hashes;            /* chain hash of each full block so far (as
                                  * many allocated as table_cap) */
    int32_t n_hashed;
    hearth_sampler *sampler;
    hearth_text_stream *stream;
    hearth_request_stats stats;
    double t_first, t_last;      /* first and latest token, s */
    int32_t state_slot;          /* recurrent models: its state (rstate.h); -1: none */
    int32_t resume;              /* recurrent models: the snapshot its admission
                                  * resumes from (engine_take_prefix()); -1: none */
    int32_t own_snap;            /* the snapshot of its latest block boundary
                                  * past the prompt's, while it is still that;
                                  * -1: none */
    uint64_t own_hash;           /* and that snapshot's chain hash */
    int32_t n_disk;              /* positions its admissions read from the
                                  * disk tier */
    bool running;
    bool finished;
    int32_t group;               /* its group of steps in flight (engine
                                  * n_groups), set at its admission */
    bool in_flight;              /* a step of it is in flight: its results
                                  * are not taken yet */
    /* this step */
    int32_t chunk;               /* tokens scheduled */
    struct seq *prev, *next;     /* in the waiting or running list */
    /* speculation */
    int32_t *draft;              /* this step's drafted tokens, positions
                                  * n_tokens .. n_tokens + n_draft - 1 */
    int32_t n_draft;
    int32_t k_plan;              /* tokens to draft this step */
    float *draft_q;              /* the draft's distribution of each drafted
                                  * token (sampled requests with a draft
                                  * model), n_vocab floats each; NULL: the
                                  * drafts are point masses */
    bool drafting;               /* in this step's draft passes */
    int32_t d_chunk;             /* rows in the current draft pass */
    int32_t *dtable;             /* the draft model's block table */
    int32_t n_dtable, dtable_cap;
    int32_t d_computed;          /* positions with keys and values in the
                                  * draft's pool */
    hearth_sampler *dsampler;    /* the request's sampling chain over the
                                  * draft's logits */
    hearth_rng rng;              /* draws of drafts, acceptances, residuals */
    double acc_w, tested_w;      /* decayed counts: drafted tokens accepted
                                  * and tested */
    /* with no confidence limit given (draft_p_min negative): the
     * acceptance it learned by the draft's confidence, the confidence of
     * each of this step's drafted tokens (draft_max of them), how likely
     * the tokens drafted so far this step are all kept, what a drafted
     * token's row and what a row and a draft pass cost over a token's
     * time (the latest plan's; 0: not measured, nothing is stopped), and
     * the tokens it stopped since the last that passed as a probe */
    struct spec_conf conf;
    float *draft_conf;
    double d_chain, d_row, d_cost;
    int32_t conf_cut;
    int32_t idle;                /* decode steps without drafting */
    double idle_s;               /* and their tokens' time, estimated */
    int32_t ckpt;                /* recurrent models, in a verification: its
                                  * first checkpoint slot (engine->ckpt) */
    /* multi-token prediction (engine params.mtp): the trunk's
     * output-normed hidden state of position mtp_pos - 1, the prediction
     * layer's input beside the token at mtp_pos (valid while mtp_pos is
     * n_computed; else zeros stand in), and its row in a draft pass */
    float *mtp_h;
    int32_t mtp_pos;
    int32_t mtp_row;
    struct thinking *thinking;   /* with a reasoning format: where its reply
                                  * stands (thinking.c); NULL: none */
    /* an embedding request's (req->params.pooling; embed.c): the sum of
     * the rows its pooling read so far (n_embd doubles), how many
     * positions it has read (rows of positions below it are not read
     * again when a preempted sequence recomputes them), and its vector
     * at the end */
    double *pool_sum;
    int32_t n_pooled, n_pool_rows;
    float *embedding;
};

/* s's rate of accepted drafted tokens, a prior of one half weighing one
 * token. */
static inline double engine_seq_alpha(const struct seq *s)
{
    return (s->acc_w + 0.5) / (s->tested_w + 1.0);
}

struct request {
    uint64_t id;
    hearth_request params;       /* with the arrays below */
    char **stop;                 /* copies of the stop strings */
    hearth_logit_bias *bias;
    hearth_grammar *grammar;     /* the reference this request holds */
    hearth_token *prompt;
    int32_t n_prompt;
    int32_t n;                   /* samples */
    struct seq **seqs;           /* n; seqs[i] NULL until forked */
    bool forked;
    double t_submit;
    struct request *next_new;    /* in the submission queue */
    /* with a reasoning format (thinking.c): the text of the prompt's last
     * tokens, where the reply starts; the tokens that end the reasoning
     * (with a budget); those that open it or a header where the answer
     * may also start */
    char *prompt_end;
    size_t prompt_end_len;
    hearth_token *close;
    int32_t n_close;
    hearth_token openers[2];
    int32_t n_openers;
};

/* A recurrent state kept for the prefix cache (prefix.c): the state of
 * a sequence after positions 0 .. n_pos - 1 (a block boundary), found by
 * the chain hash of the block that ends there. */
struct snapshot {
    uint64_t hash;
    int32_t n_pos;               /* 0: the entry is free */
    int32_t slot;                /* the rstate slot holding it */
    uint64_t used;               /* the tick of its last save or resume */
};

struct seq_list {
    struct seq *head, *tail;
    int32_t n;
};

struct step_plan {
    int32_t n_rows;
    int32_t n_seqs;
    int32_t budget;
};

/* A group's step in flight: its plan, its sequences and those whose
 * logits it brings, in the step's order. */
struct engine_flight {
    struct step_plan plan;
    int32_t group;
    int32_t n_logits;
    struct seq **seqs, **logit_seqs;   /* n_batch each */
};

struct hearth_engine {
    const hearth_model *model;
    const hearth_vocab *vocab;
    hearth_engine_params params;
    struct runner *runner;
    struct kv_pool *pool;
    struct disk_cache *disk;     /* the prefix cache's disk tier (params.cache_dir); NULL: none */
    uint64_t identity;
    uint64_t memory_available;   /* what the weights and pools were checked
                                  * against (model_memory_check) */
    int32_t B;                   /* positions per block */
    int32_t window;              /* hparams_max_window: when every layer slides,
                                  * the positions a sequence must keep; 0: all */
    int32_t *refs_scratch;       /* engine_check */
    /* A model mixing sliding-window and full layers (unless swa_full or
     * offloaded): the sliding layers' pool, its window and the step's
     * slots and tables in it (kv_cache.h, "window space") */
    struct kv_pool *wpool;
    int32_t wwindow;
    int32_t *wslot, *wtable_start, *wblocks;
    size_t wblocks_cap;
    int32_t *wrefs_scratch;

    struct seq_list waiting, running; /* running: in admission order */

    /* the step's batch */
    int32_t *tokens, *pos, *slot, *seq_start, *table_start, *logit_rows;
    int32_t *hidden_rows;        /* rows an embedding's pooling reads (embed.c) */
    struct seq **hidden_seqs;    /* and their sequences */
    int32_t *blocks;
    size_t blocks_cap;
    /* recurrent models: the free state slots (n_seq_max in all) and the
     * step's sequences' slots */
    int32_t *free_states;
    int32_t n_free_states;
    int32_t *state_slot;
    /* recurrent models with the prefix cache: the snapshots (2 x n_seq_max,
     * in the rstate slots after the sequences'), the LRU clock */
    struct snapshot *snaps;
    int32_t n_snaps;
    uint64_t snap_tick;
    /* recurrent models that can roll back (arch_recurrent.checkpoints):
     * the checkpoints of a step's verifications, allocated at the first,
     * how many this step's plan holds, the step's slots per sequence */
    struct rstate *ckpt;
    int32_t ckpt_planned;
    int32_t *ckpt_slot;
    struct seq **step_seqs;
    struct seq **logit_seqs;

    /* speculation */
    const hearth_model *draft_model;
    struct runner *drunner;      /* the draft model's forward pass and KV */
    struct kv_pool *dpool;       /* its blocks (no prefix cache) */
    int32_t *drefs_scratch;
    struct seq **draft_seqs;     /* this step's drafting sequences */
    float *p_buf, *r_buf;        /* n_vocab each: the model's distribution,
                                  * the residual */
    struct spec_fit target_fit;  /* a step's time by its rows */
    struct spec_fit draft_fit;   /* a draft pass's time by its rows */
    double draft_prior;          /* a draft pass's time over a step's of the
                                  * same rows before one is timed:
                                  * SPEC_DRAFT_PRIOR, or for a draft model
                                  * larger than its target the ratio of
                                  * their bytes of weights */
    float *mtp_in;               /* params.mtp: a step's hidden-state inputs
                                  * (n_batch x n_embd) */
    float *snap_h;               /* and each snapshot's mtp_h (n_embd each) */
    float *block_h;              /* or, without a recurrent state, each block's
                                  * (of the pool): the trunk's hidden state at
                                  * its last position, a resume's mtp_h */
    void (*draft_hook)(void *user, uint64_t request, int32_t index, int32_t *draft, int32_t n);
    void *draft_hook_user;
    void (*mtp_hook)(void *user, int32_t pass, int32_t pos, const float *logits);
    void *mtp_hook_user;
    double spec_cost;            /* tests: engine_set_spec_cost(); 0: measured */

    /* steps in flight (see the top): the groups, the group the scheduler
     * plans for (-1: every sequence), the group tried first, the steps
     * (the oldest at fl_first) */
    int32_t n_groups;
    int32_t sched_group;
    int32_t next_group;
    struct engine_flight flights[RUNNER_IN_FLIGHT_MAX];
    int32_t fl_first, fl_n;

    /* submissions and cancellations from other threads */
    pthread_mutex_t lock;
    struct request *new_head, *new_tail;
    uint64_t *cancels;
    size_t n_cancels, cancels_cap;
    uint64_t next_id;
    hearth_engine_stats stats;   /* the snapshot hearth_engine_get_stats() reads */
    uint64_t steps, preemptions, prompt_tokens, generated_tokens;
    uint64_t draft_steps, drafted_tokens, accepted_tokens, verify_steps;
    /* requests not finished, for cancellation: all that were taken in */
    struct request **live;
    size_t n_live, live_cap;
};


/* ---- lists ----------------------------------------------------------------------- */

static inline void list_remove(struct seq_list *l, struct seq *s)
{
    if (s->prev) s->prev->next = s->next;
    else l->head = s->next;
    if (s->next) s->next->prev = s->prev;
    else l->tail = s->prev;
    s->prev = s->next = NULL;
    l->n--;
}

static inline void list_append(struct seq_list *l, struct seq *s)
{
    s->prev = l->tail;
    s->next = NULL;
    if (l->tail) l->tail->next = s;
    else l->head = s;
    l->tail = s;
    l->n++;
}

static inline void list_prepend(struct seq_list *l, struct seq *s)
{
    s->prev = NULL;
    s->next = l->head;
    if (l->head) l->head->prev = s;
    else l->tail = s;
    l->head = s;
    l->n++;
}

/* engine.c */
double engine_now_s(void);
void engine_update_stats_locked(hearth_engine *e);

/* requests.c */
void engine_request_free(struct request *r);
hearth_status engine_seq_new(hearth_engine *e, struct request *r, int32_t index, struct seq **out);
void engine_reap(hearth_engine *e);
hearth_status engine_take_submissions(hearth_engine *e);

/* prefix.c */
uint64_t engine_identity_key(const hearth_engine *e);
hearth_status engine_grow_array(void **p, int32_t *cap, int32_t need, size_t elem, const char *what);
hearth_status engine_table_reserve(struct seq *s, int32_t n);
/* Room in e->blocks for a step's block tables of n_blocks entries in all. */
hearth_status engine_reserve_blocks(hearth_engine *e, size_t n_blocks);
hearth_status engine_take_prefix(hearth_engine *e, struct seq *s);
hearth_status engine_register_full_blocks(hearth_engine *e, struct seq *s);
void engine_drop_outside_window(hearth_engine *e, struct seq *s);
hearth_status engine_make_room(hearth_engine *e, struct seq *s, int32_t n, int32_t *n_room);
int32_t engine_prefill_chunk(const hearth_engine *e, const struct seq *s, int32_t n);
void engine_keep_snapshot(hearth_engine *e, struct seq *s);
void engine_snapshot_to_disk(hearth_engine *e, struct seq *s);

/* schedule.c */
void engine_take_state(hearth_engine *e, struct seq *s);
void engine_preempt(hearth_engine *e, struct seq *s);
struct seq *engine_newest_running(hearth_engine *e);
hearth_status engine_schedule(hearth_engine *e, struct step_plan *p);

/* sample.c */
void engine_release_blocks(hearth_engine *e, struct seq *s);
void engine_seq_truncate(hearth_engine *e, struct seq *s, int32_t n);
void engine_finish_seq(hearth_engine *e, struct seq *s, hearth_token token, const float *logits,
                       hearth_finish_reason why, hearth_status status);
hearth_status engine_fork_samples(hearth_engine *e, struct request *r);
hearth_status engine_sample_seq(hearth_engine *e, struct seq *s, const float *logits);
hearth_status engine_verify_seq(hearth_engine *e, struct seq *s, int32_t first);

/* thinking.c */
hearth_status engine_thinking_request(hearth_engine *e, struct request *r);
void engine_thinking_request_free(struct request *r);
hearth_status engine_thinking_seq_new(hearth_engine *e, struct seq *s);
void engine_thinking_seq_free(struct seq *s);
/* Before s's next token: the grammar's mode for it; the token the
 * reasoning budget writes there, or -1 (sample). */
hearth_token engine_thinking_next(struct seq *s);
/* Sample s's next token (after engine_thinking_next() gave -1), refusing
 * a token that would end a marker and go on with the answer. */
hearth_status engine_thinking_sample(hearth_engine *e, struct seq *s, const float *logits, hearth_token *out);
/* s took token t: where its text stands now, the reasoning's count. */
hearth_status engine_thinking_take(struct seq *s, hearth_token t);

/* embed.c: embedding requests (hearth_request.pooling) */
/* The checks and the state of an embedding request at its submission. */
hearth_status engine_embed_request(hearth_engine *e, struct request *r);
hearth_status engine_embed_seq_new(hearth_engine *e, struct seq *s);
static inline bool engine_seq_embeds(const struct seq *s) { return s->req->params.pooling != HEARTH_POOLING_NONE; }
/* Whether the prefix cache may serve s: an embedding that reads rows
 * before its last needs them computed. */
bool engine_embed_takes_prefix(const hearth_engine *e, const struct seq *s);
/* The checks of a prompt an encoder (hparams.bidirectional) computes: one
 * step holds all of it, and its positions are the model's. */
hearth_status engine_embed_prompt(hearth_engine *e, const struct request *r);
/* The rows of s's chunk its pooling reads, from row `row` on (its first
 * in the step), into the step's hidden rows; n: how many so far. */
void engine_embed_rows(hearth_engine *e, struct seq *s, int32_t row, int32_t *n);
/* After the forward pass: the step's n hidden rows into their sums. */
void engine_embed_pool(hearth_engine *e, int32_t n);
/* s has computed its whole prompt: its vector, its final event. */
void engine_embed_finish(hearth_engine *e, struct seq *s);

/* draft.c */
int32_t engine_known_token(const struct seq *s, int32_t pos);
hearth_status engine_make_drafts(hearth_engine *e, struct step_plan *p);
hearth_status engine_mtp_follow(hearth_engine *e, const struct runner_step *step);
void engine_mtp_keep(hearth_engine *e, struct seq *s, int32_t row);

#endif /* HEARTH_ENGINE_IMPL_H */

/*
 * bench_parallel.c -- `hearth bench --parallel B,...`: many sequences at
 * once through the serving engine, measured the way the common batched
 * benchmark tool measures it, so the two tables read side by side.
 *
 * For each B: B requests, each with its own random prompt of P tokens
 * (no two share a prefix, so the prefix cache plays no part), are
 * submitted together.  PP is the time until every one of them has its
 * first token (their prompts are prefilled in steps of up to n_batch
 * tokens); TG is the time of the G steps that follow, each computing one
 * token of every sequence.  S_PP = B * P / T_PP, S_TG = B * G / T_TG,
 * N_KV = B * (P + G) the positions the pool holds at the end.
 *
 * With --shared-prefix N the table is of the prefix cache instead: one
 * request with an N-token prefix and its own question runs alone (a
 * miss), then one with another question (a hit), then B requests with
 * the same prefix and other questions together: blocks in use, the hit
 * rate and the time to first token of each.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_parallel.h"
#include "cli.h"

#define MAX_INT(a, b) ((a) > (b) ? (a) : (b))
#define MIN_INT(a, b) ((a) < (b) ? (a) : (b))

uint64_t bench_next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

void bench_print_version(const char *cmd, int n_threads, bool quiet)
{
    if (quiet) return;
    fprintf(stderr, "hearth: %s: hearth %s", cmd, hearth_version());
    if (n_threads > 0) fprintf(stderr, ", %d thread%s", n_threads, n_threads == 1 ? "" : "s");
    fputc('\n', stderr);
}

hearth_token bench_bos(const hearth_model *model)
{
    const hearth_vocab *vocab = hearth_model_vocab(model);
    if (vocab && hearth_vocab_adds_bos(vocab)) return hearth_vocab_special(vocab, HEARTH_SPECIAL_BOS);
    return HEARTH_TOKEN_NONE;
}

/* n random token ids (a fixed sequence per seed), BOS first when given. */
static void random_tokens(uint64_t seed, int32_t n_vocab, hearth_token bos, hearth_token *out, int n)
{
    uint64_t state = seed;
    for (int i = 0; i < n; i++) out[i] = (hearth_token)(bench_next_random(&state) % (uint64_t)n_vocab);
    if (n > 0 && bos != HEARTH_TOKEN_NONE) out[0] = bos;
}

struct par_seq {
    int n_tokens;          /* events with a token */
    bool done;
    double ttft_ms;
    int32_t n_cached;
};

struct par_state {
    int n_first;           /* sequences with a first token */
    int n_done;
    bool failed;
    hearth_status status;  /* of the first failure */
};

/* The user pointer of each request: its own counts and the batch's. */
struct par_req {
    struct par_state *state;
    struct par_seq *seq;
};

static void on_seq_event(void *user, const hearth_event *ev)
{
    struct par_req *r = user;
    if (ev->token >= 0) {
        if (r->seq->n_tokens++ == 0) r->state->n_first++;
    }
    if (ev->finish != HEARTH_FINISH_NONE) {
        if (ev->finish == HEARTH_FINISH_ERROR && !r->state->failed) {
            r->state->failed = true;
            r->state->status = ev->status ? ev->status : HEARTH_E_INTERNAL;
        }
        if (ev->stats) {
            r->seq->ttft_ms = ev->stats->ttft_ms;
            r->seq->n_cached = ev->stats->n_cached;
        }
        r->seq->done = true;
        r->state->n_done++;
    }
}

static hearth_status new_engine(hearth_model *model, const struct parallel_opts *po, int n_seqs, int n_ctx,
                                int64_t kv_tokens, int n_batch, bool prefix_cache, hearth_engine **e)
{
    hearth_engine_params p;
    hearth_engine_default_params(&p);
    p.n_ctx = n_ctx;
    p.n_batch = n_batch;
    p.n_seq_max = n_seqs;
    p.kv_tokens = kv_tokens;
    p.n_threads = po->n_threads;
    p.block_tokens = po->kv_block;
    p.cache_type = po->cache_type;
    p.no_prefix_cache = !prefix_cache;
    return hearth_engine_new(model, &p, e);
}

/* n positions rounded up to whole KV blocks: what a sequence of n
 * positions holds of the pool, so that B of them fit without preempting
 * each other. */
static int64_t whole_blocks(const struct parallel_opts *po, int64_t n)
{
    const int64_t bt = po->kv_block > 0 ? po->kv_block : 64; /* hearth.h: block_tokens 0 is 64 */
    return (n + bt - 1) / bt * bt;
}

/* Submit one greedy request of prompt, generating n_gen tokens. */
static hearth_status submit(hearth_engine *e, const hearth_token *prompt, int n_prompt, int n_gen,
                            struct par_req *r)
{
    hearth_request q;
    hearth_request_default(&q);
    q.prompt = prompt;
    q.n_prompt = (size_t)n_prompt;
    q.max_tokens = n_gen;
    q.sampling.temperature = 0.0f;
    q.ignore_eos = true;
    q.on_event = on_seq_event;
    q.user = r;
    return hearth_engine_submit(e, &q, NULL);
}

struct par_row {
    int pp, tg, b, n_kv;
    double t_pp, t_tg;
};

/* One measurement of B sequences. */
/* The pool an engine allocated, on standard error. */
static void report_pool(const char *cmd, hearth_engine *e)
{
    hearth_engine_stats s;
    hearth_engine_get_stats(e, &s);
    fprintf(stderr, "hearth: %s: KV pool: %d blocks of %d positions, %.2f MiB (%llu bytes a position), "
            "%d sequence%s of the full context (%d positions) at once\n", cmd, s.n_blocks, s.block_tokens,
            (double)s.kv_bytes / (1 << 20), (unsigned long long)s.bytes_per_token, s.max_full_sequences,
            s.max_full_sequences == 1 ? "" : "s", s.n_ctx);
    if (s.window > 0)
        fprintf(stderr, "hearth: %s: KV pool of the sliding-window layers: %d blocks for windows of %d "
                "positions (%llu bytes a position)\n", cmd, s.window_blocks, s.window,
                (unsigned long long)s.window_bytes_per_token);
}

static hearth_status run_batch(hearth_model *model, const struct parallel_opts *po, int B, struct par_row *row,
                               const char *report_as)
{
    const int P = po->n_prompt, G = po->n_gen;
    const int32_t n_vocab = hearth_model_n_vocab(model);
    const hearth_token bos = bench_bos(model);
    /* all prompts in one step unless -b says otherwise */
    const int n_batch = po->n_batch > 0 ? po->n_batch : MAX_INT(B * P, B);
    hearth_engine *e = NULL;
    hearth_status st = new_engine(model, po, B, P + G + 1, B * whole_blocks(po, P + G + 1), n_batch, false, &e);
    if (st) return st;
    if (report_as) report_pool(report_as, e);
    hearth_token *prompts = calloc((size_t)B * (size_t)(P > 0 ? P : 1), sizeof *prompts);
    struct par_seq *seqs = calloc((size_t)B, sizeof *seqs);
    struct par_req *reqs = calloc((size_t)B, sizeof *reqs);
    struct par_state state = {0};
    if (!prompts || !seqs || !reqs) st = HEARTH_E_NOMEM;
    /* G tokens computed after the first: G + 1 sampled */
    for (int i = 0; i < B && !st; i++) {
        random_tokens(1000 + (uint64_t)i * 7919 + (uint64_t)B * 104729, n_vocab, bos, prompts + (size_t)i * P, P);
        reqs[i] = (struct par_req){&state, &seqs[i]};
        st = submit(e, prompts + (size_t)i * P, P, G + 1, &reqs[i]);
    }
    const double t0 = cli_now_s();
    while (!st && state.n_first < B && !state.failed && !cli_interrupted()) st = hearth_engine_step(e, NULL);
    const double t1 = cli_now_s();
    while (!st && state.n_done < B && !state.failed && !cli_interrupted()) st = hearth_engine_step(e, NULL);
    const double t2 = cli_now_s();
    if (!st && cli_interrupted()) st = HEARTH_E_INTERRUPTED;
    if (!st && state.failed) st = state.status;
    *row = (struct par_row){.pp = P, .tg = G, .b = B, .n_kv = B * (P + G), .t_pp = t1 - t0, .t_tg = t2 - t1};
    free(prompts);
    free(seqs);
    free(reqs);
    hearth_engine_free(e);
    return st;
}

static int run_throughput(const char *cmd, hearth_model *model, const struct parallel_opts *po)
{
    struct par_row *rows = calloc((size_t)po->n_parallel, sizeof *rows);
    if (!rows) return cli_error(cmd, "out of memory");
    /* a short warm-up: first touches of the weights and buffers */
    struct parallel_opts warm = *po;
    warm.n_prompt = MIN_INT(po->n_prompt, 16);
    warm.n_gen = 2;
    struct par_row dummy;
    hearth_status st = run_batch(model, &warm, 1, &dummy, NULL);
    for (int i = 0; i < po->n_parallel && !st; i++) {
        const int B = po->parallel[i];
        double best_pp = 0, best_tg = 0;
        for (int rep = 0; rep < po->reps && !st; rep++) {
            st = run_batch(model, po, B, &rows[i], !po->quiet && rep == 0 ? cmd : NULL);
            if (st) break;
            /* the median would need more runs than this takes: keep the mean */
            best_pp += rows[i].t_pp;
            best_tg += rows[i].t_tg;
        }
        if (st) break;
        rows[i].t_pp = best_pp / po->reps;
        rows[i].t_tg = best_tg / po->reps;
        if (!po->quiet)
            fprintf(stderr, "hearth: %s: [%d/%d] B=%d: S_PP %.2f t/s, S_TG %.2f t/s\n", cmd, i + 1,
                    po->n_parallel, B, rows[i].t_pp > 0 ? B * po->n_prompt / rows[i].t_pp : 0.0,
                    rows[i].t_tg > 0 ? B * po->n_gen / rows[i].t_tg : 0.0);
    }
    if (st) {
        free(rows);
        return st == HEARTH_E_INTERRUPTED ? (cli_error(cmd, "interrupted"), CLI_EXIT_INTERRUPTED)
                                          : cli_fail(cmd, st);
    }
    if (po->json) {
        printf("[");
        for (int i = 0; i < po->n_parallel; i++) {
            const struct par_row *r = &rows[i];
            const double t = r->t_pp + r->t_tg;
            printf("%s\n  {\"n_prompt\": %d, \"n_gen\": %d, \"n_parallel\": %d, \"n_kv\": %d, \"n_threads\": %d, "
                   "\"t_pp\": %.6f, \"speed_pp\": %.6f, \"t_tg\": %.6f, \"speed_tg\": %.6f, \"t\": %.6f, "
                   "\"speed\": %.6f}",
                   i ? "," : "", r->pp, r->tg, r->b, r->n_kv, po->n_threads, r->t_pp, r->b * r->pp / r->t_pp,
                   r->t_tg, r->b * r->tg / r->t_tg, t, r->n_kv / t);
        }
        printf("\n]\n");
    } else {
        printf("|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |\n");
        printf("|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|\n");
        for (int i = 0; i < po->n_parallel; i++) {
            const struct par_row *r = &rows[i];
            const double t = r->t_pp + r->t_tg;
            printf("| %5d | %6d | %4d | %6d | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f |\n", r->pp, r->tg, r->b,
                   r->n_kv, r->t_pp, r->b * r->pp / r->t_pp, r->t_tg, r->b * r->tg / r->t_tg, t, r->n_kv / t);
        }
        bench_print_version(cmd, po->n_threads, po->quiet);
    }
    free(rows);
    if (fflush(stdout) != 0 || ferror(stdout)) return cli_error(cmd, "cannot write to standard output");
    return CLI_EXIT_OK;
}

static int compare_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The prefix-cache measurement for B requests sharing an N-token prefix. */
static hearth_status run_shared(const char *cmd, hearth_model *model, const struct parallel_opts *po, int B)
{
    const int N = po->shared_prefix, P = po->n_prompt, G = po->n_gen;
    const int32_t n_vocab = hearth_model_n_vocab(model);
    const hearth_token bos = bench_bos(model);
    const int len = N + P;
    /* room for every request's suffix and one copy of the prefix, and then some */
    const int64_t kv = (int64_t)(B + 1) * whole_blocks(po, len + G + 1);
    hearth_engine *e = NULL;
    hearth_status st = new_engine(model, po, B, len + G + 1, kv, po->n_batch > 0 ? po->n_batch : 512, true, &e);
    if (st) return st;
    if (!po->quiet) report_pool(cmd, e);
    /* request 0 the miss, 1 .. B the hits together, B + 1 a hit alone */
    hearth_token *prompts = calloc((size_t)(B + 2) * (size_t)len, sizeof *prompts);
    struct par_seq *seqs = calloc((size_t)B + 2, sizeof *seqs);
    struct par_req *reqs = calloc((size_t)B + 2, sizeof *reqs);
    double *ttft = calloc((size_t)B, sizeof *ttft);
    struct par_state state = {0};
    if (!prompts || !seqs || !reqs || !ttft) st = HEARTH_E_NOMEM;
    for (int i = 0; i <= B + 1 && !st; i++) {
        hearth_token *p = prompts + (size_t)i * len;
        random_tokens(77, n_vocab, bos, p, N);                         /* the shared prefix */
        random_tokens(5000 + (uint64_t)i, n_vocab, HEARTH_TOKEN_NONE, p + N, P); /* the question */
        reqs[i] = (struct par_req){&state, &seqs[i]};
    }
    /* the miss: one request alone */
    if (!st) st = submit(e, prompts, len, G, &reqs[0]);
    while (!st && state.n_done < 1 && !state.failed) st = hearth_engine_step(e, NULL);
    /* one hit alone */
    if (!st) st = submit(e, prompts + (size_t)(B + 1) * len, len, G, &reqs[B + 1]);
    while (!st && state.n_done < 2 && !state.failed) st = hearth_engine_step(e, NULL);
    hearth_engine_stats s0, s;
    hearth_engine_get_stats(e, &s0);
    /* the hits: B requests at once */
    for (int i = 1; i <= B && !st; i++) st = submit(e, prompts + (size_t)i * len, len, G, &reqs[i]);
    int32_t peak_used = 0;
    while (!st && state.n_done < B + 2 && !state.failed) {
        st = hearth_engine_step(e, NULL);
        hearth_engine_get_stats(e, &s);
        if (s.blocks_used > peak_used) peak_used = s.blocks_used;
    }
    if (!st && state.failed) st = state.status;
    if (!st) {
        hearth_engine_get_stats(e, &s);
        int64_t cached = 0;
        for (int i = 1; i <= B; i++) {
            ttft[i - 1] = seqs[i].ttft_ms;
            cached += seqs[i].n_cached;
        }
        qsort(ttft, (size_t)B, sizeof *ttft, compare_double);
        const int bt = s.block_tokens;
        const int prefix_blocks = N / bt;
        const int own_blocks = (len + G + bt - 1) / bt - prefix_blocks;
        const uint64_t queries = s.prefix_queries - s0.prefix_queries, hits = s.prefix_hits - s0.prefix_hits;
        printf("| requests | prefix | question | gen | block | peak blocks used | one prefix + %d own | "
               "prompt tokens cached | prefix hit rate | TTFT miss alone ms | TTFT hit alone ms | "
               "TTFT of the %d together ms (median) |\n", B, B);
        printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        printf("| %d | %d | %d | %d | %d | %d | %d | %lld of %lld | %.1f%% | %.2f | %.2f | %.2f |\n", B, N, P, G,
               bt, peak_used, prefix_blocks + B * own_blocks, (long long)cached, (long long)B * len,
               queries ? 100.0 * (double)hits / (double)queries : 0.0, seqs[0].ttft_ms, seqs[B + 1].ttft_ms,
               ttft[B / 2]);
        bench_print_version(cmd, po->n_threads, po->quiet);
    }
    free(prompts);
    free(seqs);
    free(reqs);
    free(ttft);
    hearth_engine_free(e);
    return st;
}

int bench_parallel(const char *cmd, hearth_model *model, const struct parallel_opts *po)
{
    if (po->shared_prefix <= 0) return run_throughput(cmd, model, po);
    for (int i = 0; i < po->n_parallel; i++) {
        hearth_status st = run_shared(cmd, model, po, po->parallel[i]);
        if (st) return cli_fail(cmd, st);
    }
    return CLI_EXIT_OK;
}

/*
 * bench_parallel.h -- the parallel mode of `hearth bench`
 * (bench_parallel.c), and the token ids both of its modes use.
 */
#ifndef HEARTH_CLI_BENCH_PARALLEL_H
#define HEARTH_CLI_BENCH_PARALLEL_H

#include <stdbool.h>

#include "hearth.h"

struct parallel_opts {
    const int *parallel;   /* the batch sizes B */
    int n_parallel;
    int n_prompt;          /* P */
    int n_gen;             /* G */
    int n_threads;
    int n_batch;           /* tokens per step; 0: all prompts in one step */
    int reps;
    int shared_prefix;     /* > 0: the prefix-cache measurement */
    int kv_block;          /* positions per KV block; 0: the engine default */
    hearth_type cache_type;
    bool json;
    bool quiet;
};

/* splitmix64: the fixed sequence benchmark token ids are drawn from, the
 * same on every run. */
uint64_t bench_next_random(uint64_t *state);

/* The token a benchmark prompt starts with: BOS when the model's
 * vocabulary puts one in front of a text, else HEARTH_TOKEN_NONE. */
hearth_token bench_bos(const hearth_model *model);

/* What ran, after the table: "hearth: CMD: hearth VERSION, N threads" on
 * stderr (stdout holds the table alone); nothing when quiet.  n_threads
 * 0 leaves the threads out (the table has a column for them). */
void bench_print_version(const char *cmd, int n_threads, bool quiet);

/* Run the measurements and print the table; returns the exit status. */
int bench_parallel(const char *cmd, hearth_model *model, const struct parallel_opts *po);

#endif /* HEARTH_CLI_BENCH_PARALLEL_H */

/*
 * test-cli-sampling.c -- the sampling flags shared by the text-generating
 * commands: values reach the sampler parameters, the library's ranges are
 * enforced with the flag named, --logit-bias syntax, seed selection.
 */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sampling_options.h"
#include "testutil.h"

int cli_verbose = 0;

/* Parse argv (NULL-terminated) the way a command would; returns the
 * number of usage errors and leaves anything else in *other. */
static int parse(struct cli_sampling *s, const char *const *args, int *other)
{
    static const struct option longopts[] = {
        CLI_SAMPLING_LONG_OPTIONS,
        {"other", no_argument, NULL, 'o'},
        {NULL, 0, NULL, 0},
    };
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)"test";
    for (; *args; args++) argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    optind = 0;                 /* full reset of getopt between parses */
    opterr = 0;
    int errors = 0, opt;
    *other = 0;
    while ((opt = getopt_long(argc, argv, "o", longopts, NULL)) != -1) {
        int r = cli_sampling_option("test", s, opt, optarg);
        if (r < 0) errors++;
        else if (r == 0) (*other)++;
    }
    return errors;
}

START_TEST(test_values)
{
    struct cli_sampling s;
    cli_sampling_init(&s);
    ck_assert(s.params.temperature == 0.8f);
    ck_assert(!s.seed_given);
    const char *args[] = {"--temp", "0.25", "--top-k", "7", "--top-p", "0.5", "--min-p", "0.1",
                          "--repeat-penalty", "1.15", "--repeat-last-n", "128",
                          "--presence-penalty", "-0.5", "--frequency-penalty", "0.75",
                          "--seed", "9223372036854775807", "-o", "--logit-bias", "15043+1.5",
                          "--logit-bias=2-inf", "--logit-bias", "7-0.25", NULL};
    int other;
    ck_assert_int_eq(parse(&s, args, &other), 0);
    ck_assert_int_eq(other, 1);
    const hearth_sampler_params *p = &s.params;
    ck_assert(p->temperature == 0.25f);
    ck_assert_int_eq(p->top_k, 7);
    ck_assert(p->top_p == 0.5f);
    ck_assert(p->min_p == 0.1f);
    ck_assert(p->repeat_penalty == 1.15f);
    ck_assert_int_eq(p->repeat_last_n, 128);
    ck_assert(p->presence_penalty == -0.5f);
    ck_assert(p->frequency_penalty == 0.75f);
    ck_assert_uint_eq(p->seed, HEARTH_SEED_MAX);
    ck_assert(s.seed_given);
    ck_assert_uint_eq(p->n_logit_bias, 3);
    ck_assert_int_eq(p->logit_bias[0].token, 15043);
    ck_assert(p->logit_bias[0].bias == 1.5f);
    ck_assert_int_eq(p->logit_bias[1].token, 2);
    ck_assert(p->logit_bias[1].bias == -INFINITY);
    ck_assert_int_eq(p->logit_bias[2].token, 7);
    ck_assert(p->logit_bias[2].bias == -0.25f);

    /* the seed given is kept */
    cli_sampling_finish(&s);
    ck_assert_uint_eq(s.params.seed, HEARTH_SEED_MAX);

    /* the tuple reads back as the same flags */
    char line[512];
    hearth_sampler_params_format(&s.params, line, sizeof line);
    ck_assert_str_eq(line, "temp=0.25 top-k=7 top-p=0.5 min-p=0.1 repeat-penalty=1.15 "
                           "repeat-last-n=128 presence-penalty=-0.5 frequency-penalty=0.75 "
                           "seed=9223372036854775807 logit-bias=15043+1.5,2-inf,7-0.25");
    cli_sampling_free(&s);
}
END_TEST

START_TEST(test_many_biases)
{
    struct cli_sampling s;
    cli_sampling_init(&s);
    char bufs[20][16];
    const char *args[41];
    for (int i = 0; i < 20; i++) {
        snprintf(bufs[i], sizeof bufs[i], "%d+%d", i * 3, i);
        args[2 * i] = "--logit-bias";
        args[2 * i + 1] = bufs[i];
    }
    args[40] = NULL;
    int other;
    ck_assert_int_eq(parse(&s, args, &other), 0);
    ck_assert_uint_eq(s.params.n_logit_bias, 20);
    for (int i = 0; i < 20; i++) {
        ck_assert_int_eq(s.params.logit_bias[i].token, i * 3);
        ck_assert(s.params.logit_bias[i].bias == (float)i);
    }
    cli_sampling_free(&s);
}
END_TEST

/* One bad value: a usage error, and the parameters keep their old value. */
static void expect_rejected(const char *flag, const char *value)
{
    struct cli_sampling s;
    cli_sampling_init(&s);
    hearth_sampler_params before = s.params;
    const char *args[] = {flag, value, NULL};
    int other;
    ck_assert_msg(parse(&s, args, &other) == 1, "%s %s was accepted", flag, value);
    ck_assert_msg(memcmp(&before, &s.params, sizeof before) == 0, "%s %s changed the parameters",
                  flag, value);
    ck_assert_uint_eq(s.n_bias, 0);
    cli_sampling_free(&s);
}

START_TEST(test_rejected)
{
    expect_rejected("--temp", "-1");
    expect_rejected("--temp", "nan");
    expect_rejected("--temp", "inf");
    expect_rejected("--temp", "warm");
    expect_rejected("--temp", "");
    expect_rejected("--top-k", "-3");
    expect_rejected("--top-k", "4.5");
    expect_rejected("--top-k", "99999999999");
    expect_rejected("--top-p", "1.01");
    expect_rejected("--min-p", "-0.2");
    expect_rejected("--repeat-penalty", "0");
    expect_rejected("--repeat-last-n", "-1");
    expect_rejected("--presence-penalty", "1e30");
    expect_rejected("--frequency-penalty", "x");
    expect_rejected("--seed", "-1");
    expect_rejected("--seed", "9223372036854775808"); /* above HEARTH_SEED_MAX */
    expect_rejected("--seed", "12abc");
    expect_rejected("--seed", "99999999999999999999999");
    expect_rejected("--logit-bias", "15043");
    expect_rejected("--logit-bias", "+1");
    expect_rejected("--logit-bias", "abc+1");
    expect_rejected("--logit-bias", "5+");
    expect_rejected("--logit-bias", "5+1x");
    expect_rejected("--logit-bias", "5+inf");
    expect_rejected("--logit-bias", "5-nan");
    expect_rejected("--logit-bias", "5+1e999");
    expect_rejected("--logit-bias", "5+5000");
    expect_rejected("--logit-bias", "99999999999+1");
    expect_rejected("--logit-bias", "5+-1");
}
END_TEST

START_TEST(test_seed_chosen)
{
    /* without --seed, each run gets its own seed */
    struct cli_sampling a, b;
    cli_sampling_init(&a);
    cli_sampling_init(&b);
    cli_sampling_finish(&a);
    cli_sampling_finish(&b);
    /* a seed chosen here is not one given: hearth serve's requests
     * without a seed must not all take it */
    ck_assert(!a.seed_given && !b.seed_given);
    ck_assert_uint_ne(a.params.seed, b.params.seed);
    cli_sampling_free(&a);
    cli_sampling_free(&b);
}
END_TEST

START_TEST(test_seed_stream)
{
    /* a session's seeds: all different, below 2^53, and the same again
     * for the same session seed */
    enum { N = 1000 };
    static uint64_t first[N];
    for (int i = 0; i < N; i++) {
        first[i] = hearth_seed_derive(42, (uint64_t)i);
        ck_assert_uint_lt(first[i], UINT64_C(1) << 53);
        for (int k = 0; k < i; k++) ck_assert_uint_ne(first[i], first[k]);
    }
    for (int i = 0; i < N; i++) ck_assert_uint_eq(hearth_seed_derive(42, (uint64_t)i), first[i]);
    ck_assert_uint_ne(hearth_seed_derive(43, 0), first[0]);
    /* the largest session seed wraps around */
    ck_assert_uint_ne(hearth_seed_derive(UINT64_MAX, 0), hearth_seed_derive(UINT64_MAX, 1));
}
END_TEST

START_TEST(test_help)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    cli_sampling_help(f);
    fclose(f);
    static const char *const flags[] = {"--temp", "--top-k", "--top-p", "--min-p",
                                        "--repeat-penalty", "--repeat-last-n",
                                        "--presence-penalty", "--frequency-penalty", "--seed",
                                        "--logit-bias"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        ck_assert_msg(strstr(text, flags[i]), "help does not mention %s", flags[i]);
    free(text);
}
END_TEST

/* cli_parse_size, the one reader of every option that takes a size */
START_TEST(test_sizes)
{
    static const struct { const char *arg; uint64_t min, want; } good[] = {
        {"0", 0, 0},
        {"1", 1, 1},
        {"4096", 1, 4096},
        {"512M", 1, 512ull << 20},
        {"512m", 1, 512ull << 20},
        {"1.5G", 1, 3ull << 29},
        {"4GiB", 1, 4ull << 30},
        {"2KB", 1, 2048},
        {"2kB", 1, 2048},
        {"100B", 1, 100},
        {"0.5K", 1, 512},
        {"16777215T", 1, 16777215ull << 40},
        {"18446744073709551615", 1, UINT64_MAX},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint64_t v = 7;
        ck_assert_msg(cli_parse_size("test", "--size", good[i].arg, good[i].min, &v), "'%s' was refused",
                      good[i].arg);
        ck_assert_msg(v == good[i].want, "'%s' read as %llu, not %llu", good[i].arg, (unsigned long long)v,
                      (unsigned long long)good[i].want);
    }
    static const char *const bad[] = {"", "abc", "12X", "-1", "1e3", "+5", " 5", "5 ", "5MM", "5iB", "G",
                                      ".", "18446744073709551616", "16777216T", "99999999999999999999K",
                                      "0", "0.0001", "nan", "inf"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 7;
        ck_assert_msg(!cli_parse_size("test", "--size", bad[i], 1, &v), "'%s' was taken", bad[i]);
        ck_assert_msg(v == 7, "a refused '%s' changed the value", bad[i]);
    }
}
END_TEST

static Suite *cli_sampling_suite(void)
{
    Suite *s = suite_create("cli-sampling");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_values);
    tcase_add_test(tc, test_many_biases);
    tcase_add_test(tc, test_rejected);
    tcase_add_test(tc, test_seed_chosen);
    tcase_add_test(tc, test_seed_stream);
    tcase_add_test(tc, test_help);
    tcase_add_test(tc, test_sizes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return test_run_suite(cli_sampling_suite());
}

/*
 * sampling_options.c -- parsing of the sampling flags shared by the
 * commands that generate text.  Ranges are the library's: each value is
 * checked by hearth_sampler_params_check() as soon as it is parsed, so the
 * program and the library can never disagree about what is valid.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "sampling_options.h"

void cli_sampling_init(struct cli_sampling *s)
{
    memset(s, 0, sizeof *s);
    hearth_sampler_params_default(&s->params);
}

void cli_sampling_free(struct cli_sampling *s)
{
    free(s->bias);
    s->bias = NULL;
    s->n_bias = s->bias_capacity = 0;
    s->params.logit_bias = NULL;
    s->params.n_logit_bias = 0;
}

static const char *flag_name(int opt)
{
    switch (opt) {
    case CLI_OPT_TEMP: return "--temp";
    case CLI_OPT_TOP_K: return "--top-k";
    case CLI_OPT_TOP_P: return "--top-p";
    case CLI_OPT_MIN_P: return "--min-p";
    case CLI_OPT_REPEAT_PENALTY: return "--repeat-penalty";
    case CLI_OPT_REPEAT_LAST_N: return "--repeat-last-n";
    case CLI_OPT_PRESENCE_PENALTY: return "--presence-penalty";
    case CLI_OPT_FREQUENCY_PENALTY: return "--frequency-penalty";
    case CLI_OPT_SEED: return "--seed";
    case CLI_OPT_LOGIT_BIAS: return "--logit-bias";
    }
    return NULL;
}

/* TOKEN+BIAS or TOKEN-BIAS, BIAS a number or "inf". */
static bool parse_logit_bias(const char *cmd, const char *arg, hearth_logit_bias *out)
{
    const char *p = arg;
    while (*p >= '0' && *p <= '9') p++;
    if (p == arg || (*p != '+' && *p != '-')) {
        cli_usage_error(cmd, "--logit-bias: expected TOKEN+BIAS or TOKEN-BIAS, got '%s'", arg);
        return false;
    }
    errno = 0;
    long token = strtol(arg, NULL, 10);
    if (errno == ERANGE || token > INT32_MAX) {
        cli_usage_error(cmd, "--logit-bias: token id in '%s' is too large", arg);
        return false;
    }
    char *end;
    errno = 0;
    double bias = strtod(p, &end);
    if (end == p || *end != '\0' || isnan(bias) || errno == ERANGE) {
        cli_usage_error(cmd, "--logit-bias: expected a number after the sign in '%s'", arg);
        return false;
    }
    out->token = (int32_t)token;
    out->bias = (float)bias;
    return true;
}

int cli_sampling_option(const char *cmd, struct cli_sampling *s, int opt, const char *arg)
{
    const char *flag = flag_name(opt);
    if (!flag) return 0;
    hearth_sampler_params *p = &s->params;
    hearth_sampler_params before = *p;
    bool ok = true;
    int i;
    switch (opt) {
    case CLI_OPT_TEMP: ok = cli_parse_float(cmd, flag, arg, -HUGE_VAL, HUGE_VAL, &p->temperature); break;
    case CLI_OPT_TOP_P: ok = cli_parse_float(cmd, flag, arg, -HUGE_VAL, HUGE_VAL, &p->top_p); break;
    case CLI_OPT_MIN_P: ok = cli_parse_float(cmd, flag, arg, -HUGE_VAL, HUGE_VAL, &p->min_p); break;
    case CLI_OPT_REPEAT_PENALTY:
        ok = cli_parse_float(cmd, flag, arg, -HUGE_VAL, HUGE_VAL, &p->repeat_penalty);
        break;
    case CLI_OPT_PRESENCE_PENALTY:
        ok = cli_parse_float(cmd, flag, arg, -HUGE_VAL, HUGE_VAL, &p->presence_penalty);
        break;
    case CLI_OPT_FREQUENCY_PENALTY:
        ok = cli_parse_float(cmd, flag, arg, -HUGE_VAL, HUGE_VAL, &p->frequency_penalty);
        break;
    case CLI_OPT_TOP_K:
        if ((ok = cli_parse_int(cmd, flag, arg, INT_MIN, INT_MAX, &i))) p->top_k = i;
        break;
    case CLI_OPT_REPEAT_LAST_N:
        if ((ok = cli_parse_int(cmd, flag, arg, INT_MIN, INT_MAX, &i))) p->repeat_last_n = i;
        break;
    case CLI_OPT_SEED: {
        uint64_t seed;
        if ((ok = cli_parse_u64(cmd, flag, arg, &seed)) && seed > HEARTH_SEED_MAX) {
            cli_usage_error(cmd, "%s: %s is out of range (0 to %llu)", flag, arg,
                            (unsigned long long)HEARTH_SEED_MAX);
            ok = false;
        }
        if (ok) {
            p->seed = seed;
            s->seed_given = true;
        }
        break;
    }
    case CLI_OPT_LOGIT_BIAS: {
        hearth_logit_bias b;
        if (!(ok = parse_logit_bias(cmd, arg, &b))) break;
        if (s->n_bias == s->bias_capacity) {
            size_t cap = s->bias_capacity ? 2 * s->bias_capacity : 8;
            hearth_logit_bias *grown = realloc(s->bias, cap * sizeof *grown);
            if (!grown) {
                cli_error(cmd, "out of memory");
                return -1;
            }
            s->bias = grown;
            s->bias_capacity = cap;
        }
        s->bias[s->n_bias++] = b;
        p->logit_bias = s->bias;
        p->n_logit_bias = s->n_bias;
        break;
    }
    }
    if (!ok) return -1;
    if (hearth_sampler_params_check(p) != HEARTH_OK) {
        cli_usage_error(cmd, "%s %s: %s", flag, arg, hearth_last_error());
        if (opt == CLI_OPT_LOGIT_BIAS) {
            s->n_bias--;
            p->n_logit_bias = s->n_bias;
            p->logit_bias = s->n_bias ? s->bias : NULL;
        } else {
            *p = before;
        }
        return -1;
    }
    return 1;
}

static uint64_t draw_seed(void);

/* 53 bits from the system's entropy source, or from the clock and the
 * process id where there is none: below 2^53, as every seed hearth draws,
 * so that a JSON client reads a reported seed back exactly. */
static uint64_t fresh_seed(void)
{
    return draw_seed() & ((UINT64_C(1) << 53) - 1);
}

/* 64 bits of entropy. */
static uint64_t draw_seed(void)
{
    uint64_t seed = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, &seed, sizeof seed);
        close(fd);
        if (n == (ssize_t)sizeof seed) return seed;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    seed = (uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    return seed;
}

void cli_sampling_finish(struct cli_sampling *s)
{
    if (!s->seed_given) s->params.seed = fresh_seed();
}

int cli_sampling_check_model(const char *cmd, const struct cli_sampling *s,
                             const hearth_model *model)
{
    hearth_sampler *sampler;
    hearth_status st = hearth_sampler_new(&s->params, hearth_model_n_vocab(model), &sampler);
    if (st != HEARTH_OK) return cli_usage_error(cmd, "%s", hearth_last_error());
    hearth_sampler_free(sampler);
    return CLI_EXIT_OK;
}

void cli_sampling_help(FILE *out)
{
    fputs("Sampling (see hearth-sampling(7)):\n"
          "  --temp T               temperature; 0 is greedy decoding (0.8)\n"
          "  --top-k K              keep the K most likely tokens; 0 keeps all (40)\n"
          "  --top-p P              keep the most likely tokens up to mass P (0.95)\n"
          "  --min-p P              drop tokens less likely than P times the top one (0.05)\n"
          "  --repeat-penalty X     penalize the logits of recent tokens by X (1: off)\n"
          "  --repeat-last-n N      recent tokens the penalties look at (64)\n"
          "  --presence-penalty X   subtract X from the logit of each recent token (0)\n"
          "  --frequency-penalty X  subtract X per occurrence of a recent token (0)\n"
          "  --seed N               random seed (default: a new one for each run)\n"
          "  --logit-bias T+B, T-B  add B to (or subtract it from) token T's logit;\n"
          "                         T-inf bans the token; may be repeated\n",
          out);
}

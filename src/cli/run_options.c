/*
 * run_options.c -- hearth run's option table and loop (run_options.h).
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "run_options.h"

enum {
    OPT_STOP = 0x2000, OPT_CHAT, OPT_SYSTEM, OPT_CHAT_TEMPLATE, OPT_SPECIAL, OPT_NO_ECHO, OPT_REASONING,
    OPT_REASONING_BUDGET, OPT_GRAMMAR, OPT_GRAMMAR_FILE, OPT_JSON_SCHEMA, OPT_JSON
};

static const struct option longopts[] = {
    {"prompt", required_argument, NULL, 'p'},
    {"file", required_argument, NULL, 'f'},
    {"n-predict", required_argument, NULL, 'n'},
    CLI_CONTEXT_LONG_OPTIONS,
    {"stop", required_argument, NULL, OPT_STOP},
    {"chat", no_argument, NULL, OPT_CHAT},
    {"system", required_argument, NULL, OPT_SYSTEM},
    {"chat-template", required_argument, NULL, OPT_CHAT_TEMPLATE},
    {"reasoning", required_argument, NULL, OPT_REASONING},
    {"reasoning-budget", required_argument, NULL, OPT_REASONING_BUDGET},
    {"special", no_argument, NULL, OPT_SPECIAL},
    {"no-echo", no_argument, NULL, OPT_NO_ECHO},
    {"grammar", required_argument, NULL, OPT_GRAMMAR},
    {"grammar-file", required_argument, NULL, OPT_GRAMMAR_FILE},
    {"json-schema", required_argument, NULL, OPT_JSON_SCHEMA},
    {"json", no_argument, NULL, OPT_JSON},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    CLI_MODEL_LONG_OPTIONS,
    CLI_SAMPLING_LONG_OPTIONS,
    CLI_SPEC_LONG_OPTIONS,
    CLI_PIPELINE_LONG_OPTIONS,
    {NULL, 0, NULL, 0},
};

static enum run_grammar_kind grammar_kind_of(int opt)
{
    switch (opt) {
    case OPT_GRAMMAR: return RUN_GRAMMAR;
    case OPT_GRAMMAR_FILE: return RUN_GRAMMAR_FILE;
    case OPT_JSON_SCHEMA: return RUN_JSON_SCHEMA;
    default: return RUN_JSON;
    }
}

int run_options_parse(const char *cmd, int argc, char **argv, struct run_options *o)
{
    memset(o, 0, sizeof *o);
    cli_spec_init(&o->spec);
    cli_model_source_init(&o->src);
    cli_sampling_init(&o->sampling);
    o->copts = (struct cli_context_opts)CLI_CONTEXT_OPTS_INIT;
    o->n_predict = -1;
    o->reasoning_budget = -1;
    o->echo = true;
    o->verbose = cli_verbose > 0;

    cli_model_normalize_args(argc, argv);
    cli_spec_normalize_args(argc, argv);
    int c;
    optind = 0;
    while ((c = cli_getopt(argc, argv, ":m:p:f:n:c:b:t:vh", longopts)) != -1) {
        int r = cli_model_option(cmd, &o->src, c, optarg);
        if (r == 0) r = cli_sampling_option(cmd, &o->sampling, c, optarg);
        if (r == 0) r = cli_spec_option(cmd, &o->spec, c, optarg);
        if (r == 0) r = cli_context_option(cmd, &o->copts, c, optarg);
        if (r == 0) r = cli_pipeline_option(cmd, &o->pp, c, optarg);
        if (r < 0) return CLI_EXIT_USAGE;
        if (r > 0) continue;
        switch (c) {
        case 'p': o->prompt_arg = optarg; break;
        case 'f': o->prompt_file = optarg; break;
        case 'n':
            if (!cli_parse_int(cmd, "--n-predict", optarg, -1, 1 << 30, &o->n_predict))
                return CLI_EXIT_USAGE;
            break;
        case OPT_STOP:
            if (!*optarg) return cli_usage_error(cmd, "--stop: the stop string is empty");
            if (o->n_stop == RUN_MAX_STOP)
                return cli_usage_error(cmd, "--stop: at most %d stop strings", RUN_MAX_STOP);
            o->stops[o->n_stop++] = optarg;
            break;
        case OPT_CHAT: o->chat = true; break;
        case OPT_SYSTEM: o->system = optarg; break;
        case OPT_GRAMMAR: case OPT_GRAMMAR_FILE: case OPT_JSON_SCHEMA: case OPT_JSON:
            if (o->grammar_kind)
                return cli_usage_error(cmd, "give at most one of --grammar, --grammar-file, "
                                       "--json-schema and --json");
            o->grammar_kind = grammar_kind_of(c);
            o->grammar_arg = optarg;
            break;
        case OPT_CHAT_TEMPLATE: o->template_spec = optarg; break;
        case OPT_SPECIAL: o->special = true; break;
        case OPT_REASONING:
            if (!cli_parse_reasoning(cmd, optarg, &o->hide_reasoning)) return CLI_EXIT_USAGE;
            break;
        case OPT_REASONING_BUDGET:
            if (!cli_parse_reasoning_budget(cmd, optarg, &o->reasoning_budget)) return CLI_EXIT_USAGE;
            o->reasoning_budget_given = true;
            break;
        case OPT_NO_ECHO: o->echo = false; break;
        case 'v': o->verbose = true; break;
        case 'h': return RUN_OPTIONS_HELP;
        default: return cli_option_error(cmd, c, argv);
        }
    }
    if (optind < argc)
        return cli_usage_error(cmd, "unexpected argument '%s' (the prompt goes after -p)", argv[optind]);
    if (cli_model_check(cmd, &o->src, true) != CLI_EXIT_OK) return CLI_EXIT_USAGE;
    if (!o->prompt_arg == !o->prompt_file)
        return cli_usage_error(cmd, "give the prompt with one of -p TEXT or -f FILE");
    if ((o->system || o->template_spec) && !o->chat)
        return cli_usage_error(cmd, "--system and --chat-template need --chat");
    if (o->reasoning_budget_given && !o->chat)
        return cli_usage_error(cmd, "--reasoning-budget needs --chat (the chat template says how the "
                               "model marks its reasoning)");
    cli_sampling_finish(&o->sampling);
    if (cli_spec_finish(cmd, &o->spec) != CLI_EXIT_OK) return CLI_EXIT_USAGE;
    return CLI_EXIT_OK;
}

void run_options_free(struct run_options *o)
{
    cli_sampling_free(&o->sampling);
}

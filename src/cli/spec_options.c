/*
 * spec_options.c -- the speculative-decoding flags of hearth run, chat
 * and serve (spec_options.h).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "spec_options.h"

#define DEFAULT_DRAFT_MAX 16
#define DEFAULT_LOOKUP_MAX 10
#define DEFAULT_P_MIN 0.75f

void cli_spec_init(struct cli_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    spec->speculation.draft_p_min = DEFAULT_P_MIN;
}

void cli_spec_normalize_args(int argc, char **argv)
{
    static char long_md[] = "--md";
    static char long_ngld[] = "--ngld";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) break;
        if (strcmp(argv[i], "-md") == 0) argv[i] = long_md;
        if (strcmp(argv[i], "-ngld") == 0) argv[i] = long_ngld;
    }
}

int cli_spec_option(const char *cmd, struct cli_spec *spec, int opt, const char *arg)
{
    hearth_speculation *sp = &spec->speculation;
    int v;
    switch (opt) {
    case CLI_OPT_DRAFT_MODEL:
        if (!*arg) {
            cli_usage_error(cmd, "-md: empty argument");
            return -1;
        }
        spec->draft_path = arg;
        return 1;
    case CLI_OPT_DRAFT_MAX:
        if (!cli_parse_int(cmd, "--draft-max", arg, 0, 256, &v)) return -1;
        sp->draft_max = v;
        spec->draft_max_given = true;
        return 1;
    case CLI_OPT_DRAFT_MIN:
        if (!cli_parse_int(cmd, "--draft-min", arg, 0, 256, &v)) return -1;
        sp->draft_min = v;
        return 1;
    case CLI_OPT_DRAFT_P_MIN:
        return cli_parse_float(cmd, "--draft-p-min", arg, 0.0, 1.0, &sp->draft_p_min) ? 1 : -1;
    case CLI_OPT_DRAFT_FIXED:
        sp->fixed = true;
        return 1;
    case CLI_OPT_DRAFT_GPU_LAYERS:
        if (!cli_parse_int(cmd, "--gpu-layers-draft", arg, 0, 1 << 20, &v)) return -1;
        spec->draft_gpu_layers = v;
        return 1;
    case CLI_OPT_LOOKUP:
        if (!cli_parse_int(cmd, "--lookup", arg, 1, 64, &v)) return -1;
        sp->lookup = v;
        return 1;
    default:
        return 0;
    }
}

int cli_spec_finish(const char *cmd, struct cli_spec *spec)
{
    hearth_speculation *sp = &spec->speculation;
    if (spec->draft_path && sp->lookup > 0)
        return cli_usage_error(cmd, "give one of -md FILE and --lookup N: a draft model or prompt lookup");
    const bool any = spec->draft_path || sp->lookup > 0;
    if (!any) {
        if (spec->draft_max_given || sp->draft_min || sp->fixed || spec->draft_gpu_layers)
            return cli_usage_error(cmd, "--draft-max, --draft-min, --draft-fixed and --gpu-layers-draft need "
                                   "-md FILE or --lookup N");
        sp->draft_max = 0;
        return CLI_EXIT_OK;
    }
    if (!spec->draft_max_given) sp->draft_max = spec->draft_path ? DEFAULT_DRAFT_MAX : DEFAULT_LOOKUP_MAX;
    if (sp->draft_min > sp->draft_max)
        return cli_usage_error(cmd, "--draft-min %d is more than --draft-max %d", sp->draft_min, sp->draft_max);
    if (sp->lookup > 0) sp->draft_p_min = 0.0f; /* a lookup draft has no probabilities */
    return CLI_EXIT_OK;
}

int cli_spec_load_draft(const char *cmd, const struct cli_spec *spec, const hearth_model_params *model_params,
                        hearth_model **out)
{
    *out = NULL;
    if (!spec->draft_path || spec->speculation.draft_max == 0) return CLI_EXIT_OK;
    hearth_model_params p = *model_params;
    p.n_gpu_layers = spec->draft_gpu_layers;
    hearth_status st = hearth_model_load(spec->draft_path, &p, out);
    if (st) return cli_error(cmd, "draft model: %s", hearth_last_error());
    return CLI_EXIT_OK;
}

void cli_spec_help(FILE *out)
{
    fprintf(out,
            "\n"
            "Speculative decoding (the output is what the model alone would give):\n"
            "  -md, --model-draft FILE  draft tokens with FILE, a small model with the same\n"
            "                           vocabulary\n"
            "  --lookup N               draft by prompt lookup: the tokens that followed the\n"
            "                           latest earlier occurrence of the last N (or fewer)\n"
            "                           tokens of the text\n"
            "  --draft-max N            most tokens drafted per step (default 16 with -md,\n"
            "                           10 with --lookup; the length adapts below it)\n"
            "  --draft-min N            do not verify drafts shorter than N (default 0)\n"
            "  --draft-p-min P          stop drafting where the draft's probability of its\n"
            "                           token is below P (default 0.75)\n"
            "  --draft-fixed            always draft --draft-max tokens (no adaptation)\n"
            "  -ngld, --gpu-layers-draft N  offload N layers of the draft model\n");
}

void cli_spec_print_stats(const char *cmd, const struct cli_spec *spec, int32_t n_generated, int32_t n_steps,
                          int32_t n_drafted, int32_t n_accepted)
{
    if (spec->speculation.draft_max == 0) return;
    fprintf(stderr, "hearth: %s: speculation (%s): %d drafted, %d accepted (alpha %.3f), %.2f tokens per "
            "model step\n", cmd, spec->draft_path ? "draft model" : "prompt lookup", n_drafted, n_accepted,
            n_drafted > 0 ? (double)n_accepted / n_drafted : 0.0,
            n_steps > 0 ? (double)n_generated / n_steps : 0.0);
}

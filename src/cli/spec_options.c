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
/* a hybrid model rolls back at most 4 drafted tokens a step (its state's
 * checkpoints), and one prediction layer drafts well only a few ahead */
#define DEFAULT_MTP_MAX 4
/* no --draft-p-min: the engine learns where the draft's confidence pays */
#define DEFAULT_P_MIN (-1.0f)

void cli_spec_init(struct cli_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    spec->mtp = -1;
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
    case CLI_OPT_MTP:
        spec->mtp = 1;
        return 1;
    case CLI_OPT_NO_MTP:
        spec->mtp = 0;
        return 1;
    default:
        return 0;
    }
}

int cli_spec_finish(const char *cmd, struct cli_spec *spec)
{
    hearth_speculation *sp = &spec->speculation;
    if ((spec->draft_path != NULL) + (sp->lookup > 0) + (spec->mtp == 1) > 1)
        return cli_usage_error(cmd, "give one of -md FILE, --lookup N and --mtp: a draft model, prompt lookup "
                               "or the model's prediction layer");
    if (spec->draft_gpu_layers && !spec->draft_path && sp->lookup == 0)
        return cli_usage_error(cmd, "--gpu-layers-draft needs -md FILE");
    const bool any = spec->draft_path || sp->lookup > 0 || spec->mtp == 1;
    if (!any) {
        /* hearth serve may still turn the prediction layer on
         * (cli_spec_use_mtp()), with these */
        if ((spec->draft_max_given || sp->draft_min || sp->fixed) && spec->mtp == 0)
            return cli_usage_error(cmd, "--draft-max, --draft-min and --draft-fixed need -md FILE, --lookup N "
                                   "or --mtp");
        if (sp->draft_min > sp->draft_max && spec->draft_max_given)
            return cli_usage_error(cmd, "--draft-min %d is more than --draft-max %d", sp->draft_min, sp->draft_max);
        if (!spec->draft_max_given) sp->draft_max = 0;
        return CLI_EXIT_OK;
    }
    if (!spec->draft_max_given)
        sp->draft_max = spec->draft_path ? DEFAULT_DRAFT_MAX : sp->lookup > 0 ? DEFAULT_LOOKUP_MAX : DEFAULT_MTP_MAX;
    if (sp->draft_min > sp->draft_max)
        return cli_usage_error(cmd, "--draft-min %d is more than --draft-max %d", sp->draft_min, sp->draft_max);
    if (sp->lookup > 0) sp->draft_p_min = 0.0f; /* a lookup draft has no probabilities */
    return CLI_EXIT_OK;
}

int cli_spec_use_mtp(const char *cmd, struct cli_spec *spec, const hearth_model *model, bool by_default,
                     bool *use)
{
    hearth_speculation *sp = &spec->speculation;
    const bool has = hearth_model_mtp_layers(model) > 0;
    *use = false;
    if (spec->mtp == 1 && !has)
        return cli_error(cmd, "--mtp: the model (%s) has no multi-token-prediction layers", hearth_model_arch(model));
    if (spec->mtp == -1) {
        if (spec->draft_path || sp->lookup > 0) return CLI_EXIT_OK; /* another draft */
        if (!by_default || !has) {
            /* --draft-max and the like without a draft */
            if (spec->draft_max_given || sp->draft_min || sp->fixed)
                return cli_usage_error(cmd, "--draft-max, --draft-min and --draft-fixed need -md FILE, --lookup N "
                                       "or --mtp%s", has ? "" : " (the model has no prediction layers)");
            return CLI_EXIT_OK;
        }
        if (!spec->draft_max_given) sp->draft_max = DEFAULT_MTP_MAX;
        if (sp->draft_min > sp->draft_max)
            return cli_usage_error(cmd, "--draft-min %d is more than --draft-max %d", sp->draft_min, sp->draft_max);
    }
    *use = spec->mtp != 0 && has && sp->draft_max > 0;
    spec->mtp = *use; /* the statistics name the source */
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
            "                           token is below P (default: learned from what is\n"
            "                           accepted, where drafting stops paying)\n"
            "  --draft-fixed            always draft --draft-max tokens (no adaptation)\n"
            "  --mtp                    draft with the model's own multi-token-prediction\n"
            "                           layer (Qwen3.5 and Qwen3-Next files that have one;\n"
            "                           --draft-max default 4); hearth serve does so by\n"
            "                           default where the model has one\n"
            "  --no-mtp                 do not (hearth serve)\n"
            "  -ngld, --gpu-layers-draft N  offload N layers of the draft model\n");
}

void cli_spec_print_stats(const char *cmd, const struct cli_spec *spec, int32_t n_generated, int32_t n_steps,
                          int32_t n_drafted, int32_t n_accepted)
{
    if (spec->speculation.draft_max == 0) return;
    fprintf(stderr, "hearth: %s: speculation (%s): %d drafted, %d accepted (alpha %.3f), %.2f tokens per "
            "model step\n", cmd,
            spec->draft_path ? "draft model" : spec->mtp == 1 ? "prediction layer" : "prompt lookup", n_drafted,
            n_accepted,
            n_drafted > 0 ? (double)n_accepted / n_drafted : 0.0,
            n_steps > 0 ? (double)n_generated / n_steps : 0.0);
}

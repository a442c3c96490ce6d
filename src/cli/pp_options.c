/*
 * pp_options.c -- --pp and --pp-timeout (pp_options.h).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "pp_options.h"

int cli_pipeline_option(const char *cmd, struct cli_pipeline_opts *o, int opt, const char *arg)
{
    bool ok;
    if (opt == CLI_OPT_PP) ok = cli_parse_int(cmd, "--pp", arg, 1, 4096, &o->pp);
    else if (opt == CLI_OPT_TP) ok = cli_parse_int(cmd, "--tp", arg, 1, 4096, &o->tp);
    else if (opt == CLI_OPT_PP_TIMEOUT) ok = cli_parse_int(cmd, "--pp-timeout", arg, 1, 86400, &o->timeout_s);
    else return 0;
    return ok ? 1 : -1;
}

void cli_pipeline_help(FILE *out)
{
    fprintf(out,
            "Several processes (under mpirun, see hearth-mpi(7)):\n"
            "  --pp N                   split the layers over N stages of ranks of the MPI job\n"
            "  --tp N                   split the attention's heads, a mixture's experts and\n"
            "                           every other matrix's rows over the N ranks of each\n"
            "                           stage (tensor parallel; the job has pp x tp ranks)\n"
            "  --pp-timeout S           fail a step when the other ranks have not answered\n"
            "                           within S seconds (default 120)\n");
}

int cli_pipeline_open(const char *cmd, const struct cli_pipeline_opts *o, struct cli_model_source *src,
                      hearth_pipeline **out)
{
    *out = NULL;
    const int pp = o->pp > 1 ? o->pp : 1, tp = o->tp > 1 ? o->tp : 1;
    if (pp == 1 && tp == 1) return CLI_EXIT_OK;
    if (tp == 1 && hearth_pipeline_open(pp, o->timeout_s * 1000, out) != HEARTH_OK)
        return cli_error(cmd, "--pp %d: %s", pp, hearth_last_error());
    if (tp > 1 && hearth_pipeline_open_tp(pp, tp, o->timeout_s * 1000, out) != HEARTH_OK) {
        if (pp == 1) return cli_error(cmd, "--tp %d: %s", tp, hearth_last_error());
        return cli_error(cmd, "--pp %d --tp %d: %s", pp, tp, hearth_last_error());
    }
    src->params.pipeline = *out;
    return CLI_EXIT_OK;
}

int cli_pipeline_start(const char *cmd, hearth_pipeline *p, const struct cli_pipeline_opts *o,
                       const struct cli_context_opts *copts, const hearth_model *model, bool *served)
{
    *served = false;
    if (!p) return CLI_EXIT_OK;
    /* what every rank must agree on; the thread counts may differ */
    char options[256];
    snprintf(options, sizeof options, "%s --pp %d --tp %d --pp-timeout %d -c %d -b %d --cache-type %s --chunk-size "
             "%d%s", cmd, o->pp > 1 ? o->pp : 1, o->tp > 1 ? o->tp : 1, o->timeout_s, copts->n_ctx, copts->n_batch,
             hearth_type_name(copts->cache_type), copts->chunk_size, copts->swa_full ? " --swa-full" : "");
    if (hearth_pipeline_handshake(p, model, options) != HEARTH_OK)
        return cli_error(cmd, "rank %d: %s", hearth_pipeline_rank(p), hearth_last_error());
    if (hearth_pipeline_rank(p) == 0) return CLI_EXIT_OK;
    *served = true;
    if (hearth_pipeline_serve(p, model, copts->n_threads) != HEARTH_OK)
        return cli_error(cmd, "rank %d: %s", hearth_pipeline_rank(p), hearth_last_error());
    return CLI_EXIT_OK;
}

void cli_pipeline_close(hearth_pipeline *p, int rc)
{
    hearth_pipeline_close(p, rc == CLI_EXIT_FAILURE || rc == CLI_EXIT_USAGE);
}

void cli_pipeline_report(FILE *out, const char *cmd, const hearth_pipeline *p, const hearth_model *model)
{
    if (!p) return;
    const int32_t n = hearth_model_n_layer(model);
    int32_t first, end;
    hearth_pipeline_layers(p, n, &first, &end);
    const int32_t tp = hearth_pipeline_tp(p), rank = hearth_pipeline_rank(p);
    if (tp == 1) {
        fprintf(out, "hearth: %s: pipeline rank %d of %d: layers %d to %d of %d\n", cmd, rank,
                hearth_pipeline_size(p), first, end - 1, n);
        return;
    }
    /* the attention by key/value heads where the model splits it, the
     * other matrices by rows */
    int32_t head0, n_heads, heads;
    const char *whole;
    hearth_model_kv_heads(model, &head0, &n_heads, &heads, &whole);
    char split[256];
    if (*whole)
        snprintf(split, sizeof split, "every matrix's rows split %d ways; attention whole: %s", tp, whole);
    else
        snprintf(split, sizeof split, "key/value heads %d to %d of %d, the other matrices' rows split %d ways",
                 head0, head0 + n_heads - 1, heads, tp);
    /* and the routed experts, whole ones */
    int32_t expert0, n_experts, experts;
    hearth_model_experts(model, &expert0, &n_experts, &experts);
    const size_t len = strlen(split);
    if (experts > 0 && n_experts < experts)
        snprintf(split + len, sizeof split - len, "; experts %d to %d of %d", expert0, expert0 + n_experts - 1,
                 experts);
    else if (experts > 0)
        snprintf(split + len, sizeof split - len, "; all %d experts", experts);
    fprintf(out, "hearth: %s: rank %d of %d: stage %d of %d, layers %d to %d of %d; tensor-parallel rank %d of %d "
            "(%s)\n", cmd, rank, hearth_pipeline_size(p), rank / tp, hearth_pipeline_stages(p), first, end - 1, n,
            rank % tp, tp, split);
}

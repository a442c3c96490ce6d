/*
 * pp_options.h -- --pp N and --pp-timeout S for the commands that run one
 * model over the ranks of an MPI job (hearth-mpi(7)): hearth run and
 * hearth bench.
 *
 * With --tp N each stage (the whole model without --pp) runs on N ranks,
 * each computing its share of every matrix's rows, or of the attention's
 * heads.
 *
 * A command offers its options to cli_pipeline_option(), calls
 * cli_pipeline_open() before loading the model (which then loads only
 * this rank's layers), cli_pipeline_start() once it is loaded (the
 * handshake; a rank other than 0 then runs its layers for rank 0 until
 * rank 0 is done, and the command returns), and cli_pipeline_close() at
 * its end.  Without --pp and --tp (or with 1 each), all of them do
 * nothing.
 */
#ifndef HEARTH_CLI_PP_OPTIONS_H
#define HEARTH_CLI_PP_OPTIONS_H

#include <stdbool.h>
#include <stdio.h>

#include "hearth.h"
#include "model_options.h"
#include "prompt.h"

struct cli_pipeline_opts {
    int pp;          /* stages; 0 or 1: none */
    int tp;          /* ranks of each stage (tensor parallel); 0 or 1: one */
    int timeout_s;   /* --pp-timeout; 0: the library's default */
};

#define CLI_OPT_PP 0x3d00
#define CLI_OPT_PP_TIMEOUT 0x3d01
#define CLI_OPT_TP 0x3d02
#define CLI_PIPELINE_LONG_OPTIONS \
    {"pp", required_argument, NULL, CLI_OPT_PP}, \
    {"tp", required_argument, NULL, CLI_OPT_TP}, \
    {"pp-timeout", required_argument, NULL, CLI_OPT_PP_TIMEOUT}

/* 1: the option was taken, 0: not one of these, -1: a usage error. */
int cli_pipeline_option(const char *cmd, struct cli_pipeline_opts *o, int opt, const char *arg);
void cli_pipeline_help(FILE *out);
/* With --pp N > 1 or --tp N > 1: join the MPI job and load only this
 * rank's layers, and of their matrices its rows (src->params.pipeline).  Returns a CLI exit status. */
int cli_pipeline_open(const char *cmd, const struct cli_pipeline_opts *o, struct cli_model_source *src,
                      hearth_pipeline **out);
/* The start-up check on every rank, with the options that shape the
 * computation; on a rank other than 0, then its part of every step until
 * rank 0 closes (*served set: the command has nothing more to do).
 * Returns a CLI exit status. */
int cli_pipeline_start(const char *cmd, hearth_pipeline *p, const struct cli_pipeline_opts *o,
                       const struct cli_context_opts *copts, const hearth_model *model, bool *served);
/* Leave the job at the command's end with its exit status: a failure
 * ends every rank. */
void cli_pipeline_close(hearth_pipeline *p, int rc);
/* -v: which layers this rank runs, its share of their rows, and the
 * attention heads it runs and keeps the keys and values of. */
void cli_pipeline_report(FILE *out, const char *cmd, const hearth_pipeline *p, const hearth_model *model);

#endif /* HEARTH_CLI_PP_OPTIONS_H */

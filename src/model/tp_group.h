/*
 * tp_group.h -- what the model and the backend need of the ranks they run
 * beside (DESIGN.md, "Tensor parallelism"): the stages of layers, the
 * ranks of this rank's stage, its index there, and the gather of a split
 * product's rows.  The pipeline implements them (src/dist/pipeline_mpi.c,
 * pipeline_none.c without MPI); they are declared here, below the model
 * and the backend, so that these call them without including the
 * pipeline's folder, which includes theirs.
 */
#ifndef HEARTH_MODEL_TP_GROUP_H
#define HEARTH_MODEL_TP_GROUP_H

#include "internal.h"

/* The stages of layers (--pp), the ranks of a stage (--tp) and this
 * rank's index among those. */
int32_t pipe_stages(const struct hearth_pipeline *p);
int32_t pipe_tp(const struct hearth_pipeline *p);
int32_t pipe_tp_rank(const struct hearth_pipeline *p);

/* A rank of a stage of several (tensor parallelism): the rows of a
 * product its stage's ranks computed a part of each -- counts[r] floats
 * from the stage's rank r, mine this rank's -- into all, rank after rank
 * (mine may lie in place there).  At most the pipeline's timeout; a
 * failure breaks the pipeline. */
hearth_status pipe_tp_gather(struct hearth_pipeline *p, const float *mine, const int64_t *counts, float *all);

#endif /* HEARTH_MODEL_TP_GROUP_H */

/*
 * pooling.h -- an embedding from the output-normed final hidden states of
 * a sequence's positions (hearth.h, hearth_pooling): the rows the pooling
 * reads, their sum kept in double precision as the steps compute them,
 * and the vector it ends as.
 *
 * Mean pooling sums every position's row, in position order, and divides
 * by their count; CLS and last pooling take one row (position 0, or the
 * last).  Rows are added in position order whatever steps they were
 * computed in, so the sum -- and the vector -- depends only on the rows,
 * which batch invariance makes the same in any batch.
 */
#ifndef HEARTH_POOLING_H
#define HEARTH_POOLING_H

#include "internal.h"

/* Whether the row of position pos of a sequence of n_tokens is one the
 * pooling reads. */
bool pooling_wants(hearth_pooling pooling, int32_t pos, int32_t n_tokens);

/* sum[0 .. n) += h[0 .. n). */
void pooling_add_row(double *sum, const float *h, int64_t n);

/* The embedding of n_rows rows summed in sum: their mean for
 * HEARTH_POOLING_MEAN, the one row otherwise; scaled to unit length
 * unless normalize is false. */
void pooling_finish(hearth_pooling pooling, const double *sum, int32_t n_rows, bool normalize, float *out,
                    int64_t n);

#endif /* HEARTH_POOLING_H */

/*
 * pooling.c -- an embedding from a sequence's hidden states (pooling.h),
 * and the unit-length scaling the OpenAI API's vectors have.
 */
#include "pooling.h"

#include <math.h>

const char *hearth_pooling_name(hearth_pooling pooling)
{
    switch (pooling) {
    case HEARTH_POOLING_NONE: return "none";
    case HEARTH_POOLING_MEAN: return "mean";
    case HEARTH_POOLING_CLS: return "cls";
    case HEARTH_POOLING_LAST: return "last";
    case HEARTH_POOLING_RANK: return "rank";
    }
    return NULL;
}

bool pooling_wants(hearth_pooling pooling, int32_t pos, int32_t n_tokens)
{
    switch (pooling) {
    case HEARTH_POOLING_MEAN: return true;
    case HEARTH_POOLING_CLS: return pos == 0;
    case HEARTH_POOLING_LAST: return pos == n_tokens - 1;
    default: return false;
    }
}

void pooling_add_row(double *sum, const float *h, int64_t n)
{
    for (int64_t i = 0; i < n; i++) sum[i] += (double)h[i];
}

void hearth_embedding_normalize(float *v, size_t n)
{
    double ss = 0.0;
    for (size_t i = 0; i < n; i++) ss += (double)v[i] * (double)v[i];
    if (!(ss > 0.0)) return;
    const double inv = 1.0 / sqrt(ss);
    for (size_t i = 0; i < n; i++) v[i] = (float)((double)v[i] * inv);
}

void pooling_finish(hearth_pooling pooling, const double *sum, int32_t n_rows, bool normalize, float *out,
                    int64_t n)
{
    const double div = pooling == HEARTH_POOLING_MEAN && n_rows > 0 ? (double)n_rows : 1.0;
    if (normalize) {
        /* the mean's scale cancels: the sum itself is scaled, in double */
        double ss = 0.0;
        for (int64_t i = 0; i < n; i++) ss += sum[i] * sum[i];
        const double inv = ss > 0.0 ? 1.0 / sqrt(ss) : 0.0;
        for (int64_t i = 0; i < n; i++) out[i] = (float)(sum[i] * inv);
        return;
    }
    for (int64_t i = 0; i < n; i++) out[i] = (float)(sum[i] / div);
}

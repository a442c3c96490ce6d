/*
 * dispatch.c -- choosing the kernel table once, at first use, from the
 * CPU's features (or HEARTH_CPU).
 */
#include "internal.h"

#include "kernels.h"

const hearth_kernels *hearth_kernels_get(void)
{
    return hearth_kernels_scalar();
}

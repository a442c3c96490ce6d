/*
 * quantize.h -- the recipes of hearth_quantize_model() (which type each
 * tensor of a model gets) and the row-parallel tensor conversion, shared
 * with the benchmark-model generator so that generated files follow the
 * same mix as quantized ones.
 */
#ifndef HEARTH_QUANTIZE_H
#define HEARTH_QUANTIZE_H

#include "internal.h"

/* What a recipe needs to know about the model. */
struct quant_recipe {
    hearth_ftype ftype;
    hearth_type base;     /* the recipe's main type */
    int32_t n_layer;      /* transformer blocks */
    int32_t n_gqa;        /* query heads per key/value head (1 when unknown) */
    bool has_output;      /* a separate output.weight exists */
};

/* Fill r for ftype; HEARTH_E_INVALID for an unknown ftype. */
hearth_status quant_recipe_init(struct quant_recipe *r, hearth_ftype ftype, int32_t n_layer,
                                int32_t n_gqa, bool has_output);

/* The recipe's values read from a model file's metadata and tensors. */
hearth_status quant_recipe_from_gguf(struct quant_recipe *r, hearth_ftype ftype,
                                     const hearth_gguf *gguf);

/* The type a tensor gets: *chosen receives the recipe's choice and the
 * result is what is written (a fallback when the rows do not fit the
 * chosen type's blocks).  type_in is the tensor's current type, kept for
 * tensors that are neither matrices nor vectors of the model. */
hearth_type quant_recipe_type(const struct quant_recipe *r, const char *name, uint32_t n_dims,
                              const int64_t ne[4], hearth_type type_in, hearth_type *chosen);

/* Convert n_rows rows of row_n elements from type_in to type_out with
 * n_threads threads (0: all), each row on its own so the result does not
 * depend on the thread count.  Copies when the types are equal.
 * HEARTH_E_UNSUPPORTED when one of the types cannot be converted. */
hearth_status quant_convert_rows(hearth_type type_in, const void *src, hearth_type type_out,
                                 void *dst, int64_t row_n, int64_t n_rows, int n_threads);

#endif /* HEARTH_QUANTIZE_H */

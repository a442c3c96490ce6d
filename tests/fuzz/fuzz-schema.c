/*
 * fuzz-schema.c -- fuzz target for the JSON Schema translator.  Each
 * input is read as a schema; when it translates, the GBNF text it gives
 * must compile (the translator checks that itself, so a refusal here
 * means the check and the compiler disagree).
 * Every failure must be a status with a message, never a crash, a hang
 * or a leak.
 */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 16384) return 0;
    char *gbnf = NULL;
    if (json_schema_to_gbnf((const char *)data, size, NULL, &gbnf)) return 0;
    struct grammar_ir ir;
    hearth_status st = grammar_ir_parse(gbnf, strlen(gbnf), NULL, NULL, &ir);
    if (st && st != HEARTH_E_NOMEM) abort();
    if (!st) grammar_ir_free(&ir);
    free(gbnf);
    return 0;
}

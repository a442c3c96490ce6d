/*
 * json.h -- a strict JSON reader (RFC 8259) into the values of value.h, and
 * a writer whose output matches Python's json.dumps byte for byte, which is
 * what chat templates' tojson produces.
 */
#ifndef HEARTH_JSON_H
#define HEARTH_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "hearth.h"
#include "textbuf.h"
#include "value.h"

/* Deepest nesting of arrays and objects the reader accepts. */
#define JSON_MAX_DEPTH 256

/* Parse one JSON text (whitespace around it allowed, nothing else).
 *
 * Strict RFC 8259: the text must be valid UTF-8, strings may not hold raw
 * control characters, \u escapes must pair surrogates, and numbers follow
 * the RFC grammar.  Integers that fit in 64 bits become ints; other numbers
 * become floats (like Python, large exponents give infinity).  Objects keep
 * their keys in order; a repeated key keeps its first position and takes
 * the last value, as Python's json module does.
 *
 * Errors are HEARTH_E_FORMAT with a message "WHAT: byte N (line L, column
 * C): problem"; `what` names the text for the user ("messages"). */
hearth_status json_parse(const char *text, size_t len, const char *what, value *out);

/* How json_write lays its output out; the fields mean what the arguments of
 * the same names to Python's json.dumps mean. */
typedef struct json_format {
    const char *indent;     /* NULL: everything on one line */
    const char *item_sep;   /* NULL: ", ", or "," when indent is set */
    const char *key_sep;    /* NULL: ": " */
    bool ensure_ascii;      /* escape everything beyond ASCII as \uXXXX */
    bool sort_keys;
} json_format;

/* Append the JSON text of v (fmt NULL: json.dumps defaults with
 * ensure_ascii off).  Values JSON cannot hold (undefined, namespaces,
 * functions) fail with HEARTH_E_INVALID, worded as Python words it. */
hearth_status json_write(value v, const json_format *fmt, textbuf *tb);

#endif /* HEARTH_JSON_H */

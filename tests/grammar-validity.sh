#!/bin/sh
# grammar-validity.sh -- valid by construction: samples at temperature 1
# from the shared random-weight models under JSON Schemas and GBNF
# grammars, judged by Python's jsonschema and recognisers of their own
# (tests/grammar-validity.py).  Skipped when python3 or python3-jsonschema
# is missing.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data models/micro-llama-F16.gguf models/micro-qwen2-Q8_0.gguf
command -v python3 >/dev/null 2>&1 || { echo "python3 is missing; skipped" >&2; exit 77; }
python3 -c 'import jsonschema' 2>/dev/null || { echo "python3-jsonschema is missing; skipped" >&2; exit 77; }
if python3 "$HEARTH_SRCDIR/tests/grammar-validity.py" "$HEARTH" "$HEARTH_TEST_DATA" >"$tmpdir/log" 2>&1; then
    pass "$(tail -1 "$tmpdir/log")"
else
    fail "grammar validity"; cat "$tmpdir/log" >&2
fi
finish

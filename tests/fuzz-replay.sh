#!/bin/sh
# fuzz-replay.sh -- replays the fuzz targets' seed inputs (the shared models
# and vocabularies) and the crash reproducers kept under tests/fuzz/, so
# every past finding stays fixed.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data models/stories260K.gguf

bin="${HEARTH_BUILDDIR:-.}/tests/fuzz"
for target in gguf; do
    replay="$bin/replay-$target"
    [ -x "$replay" ] || { fail "missing $replay"; continue; }
    set -- "$HEARTH_TEST_DATA"/models/*.gguf "$HEARTH_TEST_DATA"/vocab/*.gguf
    for f in "$HEARTH_SRCDIR"/tests/fuzz/regressions-$target/*; do
        [ -f "$f" ] && set -- "$@" "$f"
    done
    if "$replay" "$@" >"$tmpdir/out" 2>&1; then pass "replay $target ($# inputs)"
    else fail "replay $target"; cat "$tmpdir/out" >&2; fi
done
finish

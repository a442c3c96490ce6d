#!/bin/sh
# layout.sh -- no two folders of the sources include each other, directly
# or around a cycle (tests/layout.py; DESIGN.md, "Layout").  Skipped when
# python3 is missing.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
command -v python3 >/dev/null 2>&1 || { echo "python3 is missing; skipped" >&2; exit 77; }
if python3 "$HEARTH_SRCDIR/tests/layout.py" "$HEARTH_SRCDIR" >"$tmpdir/log" 2>&1; then
    pass "$(tail -1 "$tmpdir/log")"
else
    fail "the folders' includes"; cat "$tmpdir/log" >&2
fi
finish

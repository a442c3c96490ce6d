#!/bin/sh
# cli-basics.sh -- global options, unknown commands and exit statuses.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"

expect_status 0 "--version" -- "$HEARTH" --version
grep -q "^hearth " "$tmpdir/out" || fail "--version prints the version"

expect_status 0 "--help" -- "$HEARTH" --help
grep -q "usage: hearth" "$tmpdir/out" || fail "--help prints usage on stdout"

expect_status 2 "no command" -- "$HEARTH"
expect_status 2 "unknown command" -- "$HEARTH" no-such-command
grep -q "not a hearth command" "$tmpdir/err" || fail "unknown command is named"
expect_status 2 "unknown global option" -- "$HEARTH" --no-such-option

finish

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
grep -q "  help  " "$tmpdir/out" "$tmpdir/err" || fail "--help lists help"

# An option is matched as a whole word: a word that starts with -h is not
# --help, in any command, whether or not the command takes -hf.
for cmd in run chat serve perplexity bench devices inspect quantize pull template tokenize; do
    expect_status 2 "$cmd -hx" -- "$HEARTH" $cmd -hx
    grep -q "^hearth: $cmd: unknown option '-hx'" "$tmpdir/err" || fail "$cmd: the whole word is named"
    [ -s "$tmpdir/out" ] && fail "$cmd -hx: nothing on stdout"
done
for cmd in inspect quantize; do
    expect_status 2 "$cmd -hf" -- "$HEARTH" $cmd -hf o/r:m.gguf x
    grep -q "unknown option '-hf'" "$tmpdir/err" || fail "$cmd takes no -hf"
done
expect_status 2 "a flag inside a word" -- "$HEARTH" run -vh -m x -p y
grep -q "unknown option '-vh'" "$tmpdir/err" || fail "-vh is one unknown word"
expect_status 2 "a flag inside a word after a non-option" -- "$HEARTH" tokenize -m x text -vx
grep -q "unknown option '-vx'\|unknown option '-v'" "$tmpdir/err" || fail "tokenize -vx is unknown"
expect_status 0 "-h alone is help" -- "$HEARTH" run -h
grep -q "usage: hearth run" "$tmpdir/out" || fail "run -h prints the usage"

# help: a command's or a topic's page, from the build tree when run from it
expect_status 2 "help for no such command" -- "$HEARTH" help bogus
grep -q "^hearth: help: 'bogus' is not a hearth command or topic" "$tmpdir/err" || fail "help bogus is named"
expect_status 2 "help with two names" -- "$HEARTH" help run chat
expect_status 0 "help alone" -- "$HEARTH" help
grep -q "usage: hearth" "$tmpdir/out" || fail "help alone prints the usage"
if command -v man >/dev/null 2>&1 && [ -f "$HEARTH_SRCDIR/man/hearth-run.1" ] &&
   [ "$(cd "$HEARTH_SRCDIR" && pwd -P)" = "$(cd "$(dirname "$HEARTH")/.." && pwd -P)" ]; then
    expect_status 0 "help run in the build tree" -- env MANPAGER=cat PAGER=cat MANWIDTH=80 "$HEARTH" help run
    grep -q "hearth run" "$tmpdir/out" || fail "help run shows hearth-run(1)"
    expect_status 0 "help on a topic" -- env MANPAGER=cat PAGER=cat MANWIDTH=80 "$HEARTH" help grammar
    grep -q "GBNF" "$tmpdir/out" || fail "help grammar shows hearth-grammar(7)"
fi

finish

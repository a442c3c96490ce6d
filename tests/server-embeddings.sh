#!/bin/sh
# server-embeddings.sh -- POST /v1/embeddings through the official OpenAI
# Node.js client (tests/server-embeddings.mjs): a server on
# micro-qwen3-embedding (tools/gen-model) and one on stories260K, a
# generative model, which refuses embeddings.  The vector of a text must
# be the one hearth embed writes, bit for bit.  Skips (77) when node or
# npm is not installed, when hearth has no serve command, or when the
# npm registry cannot be reached; HEARTH_OPENAI_NODE_MODULES=DIR uses
# DIR/openai instead of installing.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data models/stories260K.gguf

gen="${HEARTH_BUILDDIR:-.}/tools/gen-model"
key="test-key-$$"

skip() { echo "SKIP: $*" >&2; exit 77; }
command -v node >/dev/null 2>&1 || skip "node is not installed"
command -v npm >/dev/null 2>&1 || skip "npm is not installed"
"$HEARTH" serve --help 2>/dev/null | grep -q "no HTTP server" && skip "$HEARTH has no HTTP server"

serve_tracking

work="$tmpdir/node"
mkdir -p "$work/node_modules"
if [ -n "${HEARTH_OPENAI_NODE_MODULES:-}" ] && [ -d "$HEARTH_OPENAI_NODE_MODULES/openai" ]; then
    ln -s "$HEARTH_OPENAI_NODE_MODULES/openai" "$work/node_modules/openai"
else
    npm_install "$work" openai
fi
cp "${HEARTH_SRCDIR:-.}/tests/server-embeddings.mjs" "$work/"

m="$tmpdir/emb.gguf"
"$gen" --shape micro-qwen3-embedding --type F32 --threads 2 "$m" 2>"$tmpdir/gen.err" ||
    { cat "$tmpdir/gen.err" >&2; fail "gen-model writes micro-qwen3-embedding"; finish; }
# the command line's vector of a text, for the server's to equal
"$HEARTH" embed -m "$m" --format jsonl "hello world" >"$tmpdir/cli.jsonl" 2>"$tmpdir/cli.err" ||
    { cat "$tmpdir/cli.err" >&2; fail "hearth embed"; finish; }

# start_server NAME ARGS...: a server with the key.
start_server() {
    name=$1; shift
    serve_start "$name" --api-key "$key" "$@"
}

# a small context, so that an input past it is easy to write; small steps,
# so that a request's inputs run in chunks beside each other
start_server embed -m "$m" --alias micro-embed -c 64 -b 16 -np 4
embed_pid=$pid embed_port=$port
start_server chat -m "$HEARTH_TEST_DATA/models/stories260K.gguf" --alias stories260K -c 256
chat_pid=$pid chat_port=$port

HEARTH_URL="http://127.0.0.1:$embed_port" HEARTH_CHAT_URL="http://127.0.0.1:$chat_port" HEARTH_KEY="$key" \
HEARTH_CLI_VECTOR="$tmpdir/cli.jsonl" \
    timeout 300 node "$work/server-embeddings.mjs" >"$tmpdir/node.out" 2>"$tmpdir/node.err"
rc=$?
cat "$tmpdir/node.out"
if [ "$rc" -ne 0 ]; then
    fail "server-embeddings.mjs: exit status $rc"
    sed 's/^/  node: /' "$tmpdir/node.err" >&2
    tail -n 30 "$tmpdir/embed.err" | sed 's/^/  embed server: /' >&2
fi
grep -q 'POST /v1/embeddings 200' "$tmpdir/embed.err" && pass "the access log has the embeddings requests" ||
    fail "the access log has the embeddings requests"

serve_stop embed "$embed_pid"
serve_stop chat "$chat_pid"
pids=''
finish

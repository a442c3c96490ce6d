#!/bin/sh
# server-embeddings.sh -- POST /v1/embeddings through the official OpenAI
# Node.js client (tests/server-embeddings.mjs): a server on
# micro-qwen3-embedding (tools/gen-model) and one on stories260K, a
# generative model, which refuses embeddings.  The vector of a text must
# be the one hearth embed writes, bit for bit.  A third server on
# micro-bert, an encoder (embeddings only), answers /v1/embeddings with
# hearth embed's vectors, batched, and refuses chat completions with 400
# naming the model (a fetch from node, without the client).  Skips (77) when node or
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

# an encoder: its inputs batched, and no chat
b="$tmpdir/bert.gguf"
"$gen" --shape micro-bert --type F32 --threads 2 "$b" 2>"$tmpdir/gen.err" ||
    { cat "$tmpdir/gen.err" >&2; fail "gen-model writes micro-bert"; finish; }
"$HEARTH" embed -m "$b" --format jsonl "hello world" "The quick brown fox." "a" >"$tmpdir/bert.jsonl" \
    2>"$tmpdir/cli.err" || { cat "$tmpdir/cli.err" >&2; fail "hearth embed micro-bert"; finish; }
start_server bert -m "$b" --alias micro-bert -b 64 -np 4
bert_pid=$pid bert_port=$port
cat >"$work/bert.mjs" <<'JS'
import { readFileSync } from "node:fs";
const [url, key, cli] = process.argv.slice(2);
const want = readFileSync(cli, "utf8").trim().split("\n").map((l) => JSON.parse(l));
const post = (path, body) => fetch(url + path, {
  method: "POST", headers: { "Content-Type": "application/json", Authorization: `Bearer ${key}` },
  body: JSON.stringify(body),
});
let r = await post("/v1/embeddings", { input: ["hello world", "The quick brown fox.", "a"], model: "micro-bert" });
if (r.status !== 200) throw new Error(`embeddings: ${r.status} ${await r.text()}`);
const got = (await r.json()).data.map((d) => d.embedding);
got.forEach((v, i) => {
  if (v.length !== want[i].length || v.some((x, k) => Math.fround(x) !== Math.fround(want[i][k]))) {
    throw new Error(`input ${i}: the server's vector is not hearth embed's`);
  }
});
console.log("ok: micro-bert: /v1/embeddings gives hearth embed's vectors, three inputs batched");
r = await post("/v1/chat/completions", { model: "micro-bert", messages: [{ role: "user", content: "hi" }] });
const body = await r.json();
if (r.status !== 400 || body.error?.param !== "model" || !/embedding model/.test(body.error?.message)) {
  throw new Error(`chat on an encoder: ${r.status} ${JSON.stringify(body)}`);
}
console.log("ok: micro-bert: /v1/chat/completions is refused with 400 naming the model");
JS
if timeout 120 node "$work/bert.mjs" "http://127.0.0.1:$bert_port" "$key" "$tmpdir/bert.jsonl" \
        >"$tmpdir/node.out" 2>"$tmpdir/node.err"; then
    cat "$tmpdir/node.out"
else
    fail "micro-bert server"
    sed 's/^/  node: /' "$tmpdir/node.err" >&2
    tail -n 30 "$tmpdir/bert.err" | sed 's/^/  bert server: /' >&2
fi

serve_stop embed "$embed_pid"
serve_stop chat "$chat_pid"
serve_stop bert "$bert_pid"
pids=''
finish

#!/bin/sh
# server-models.sh -- hearth serve with several models, each loaded when a
# request names it: tests/server-models.py (the list, loading on first
# use, the same text as the model served alone with the same seed,
# --keep-alive, --max-memory's least-recently-used unloading, requests to
# two models at once, unknown names, a broken file, /metrics, the log and
# the flags' usage errors) on stories260K and micro-llama, then the
# official OpenAI Node.js client's models.list() (tests/server-models.mjs)
# when node and npm are there (HEARTH_OPENAI_NODE_MODULES=DIR uses
# DIR/openai instead of installing).  Skips (77) when python3 is missing
# or hearth has no HTTP server, unless CI is set.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data models/stories260K.gguf models/micro-llama-Q8_0.gguf

command -v python3 >/dev/null 2>&1 || unavailable "python3 is not installed"
"$HEARTH" serve --help 2>/dev/null | grep -q "no HTTP server" && unavailable "$HEARTH has no HTTP server"

gen="${HEARTH_BUILDDIR:-.}/tools/gen-model"
[ -x "$gen" ] || gen=''
python3 "${HEARTH_SRCDIR:-.}/tests/server-models.py" "$HEARTH" "$HEARTH_TEST_DATA" "$tmpdir" $gen ||
    fail "hearth serve with several models (see the FAIL lines above)"

# The official client, where node and npm are (its own subshell: a
# registry out of reach skips this part alone).
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
    serve_tracking
    work="$tmpdir/node"
    mkdir -p "$work/node_modules"
    if [ -n "${HEARTH_OPENAI_NODE_MODULES:-}" ] && [ -d "$HEARTH_OPENAI_NODE_MODULES/openai" ]; then
        ln -s "$HEARTH_OPENAI_NODE_MODULES/openai" "$work/node_modules/openai"
        rc=0
    else
        ( npm_install "$work" openai )
        rc=$?
    fi
    if [ "$rc" -eq 0 ]; then
        cp "${HEARTH_SRCDIR:-.}/tests/server-models.mjs" "$work/"
        key="test-key-$$"
        serve_start node -m "story=$HEARTH_TEST_DATA/models/stories260K.gguf" \
            -m "llama=$HEARTH_TEST_DATA/models/micro-llama-Q8_0.gguf" -c 256 -np 2 --api-key "$key"
        node_pid=$pid
        if HEARTH_URL="http://127.0.0.1:$port" HEARTH_KEY="$key" timeout 120 node "$work/server-models.mjs"; then
            pass "the OpenAI client's models.list() and model names"
        else
            fail "the OpenAI client (tests/server-models.mjs)"
            tail -n 20 "$tmpdir/node.err" | sed 's/^/  server: /' >&2
        fi
        serve_stop node "$node_pid"
        pids=''
    elif [ "$rc" -eq 77 ] && [ -z "${CI:-}" ]; then
        echo "SKIP: the OpenAI client part (npm install openai)" >&2
    else
        fail "npm install openai"
    fi
elif [ -n "${CI:-}" ]; then
    fail "node and npm are needed for the OpenAI client part (CI is set)"
else
    echo "SKIP: the OpenAI client part: node or npm is not installed" >&2
fi
finish

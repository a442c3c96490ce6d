#!/bin/sh
# server-openai.sh -- hearth serve through the official OpenAI Node.js
# client: chat and text completions (tests/server-openai.mjs) and the
# Responses API (tests/server-responses.mjs).  The npm package openai is
# installed into a temporary directory, three servers are started on
# stories260K (one with the default deadline, one with --timeout 1 for
# the error that comes in the middle of a stream, one whose template lets
# replies think in <think> blocks and which keeps few past responses, by
# count and by bytes), all with an API key, and stopped with
# SIGTERM at the end, which must give exit status 0 and no sanitizer
# report.  Skips (77) when node or npm is not installed, when hearth has
# no serve command, or when the npm registry cannot be reached;
# HEARTH_OPENAI_NODE_MODULES=DIR uses DIR/openai instead of installing.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data models/stories260K.gguf
require_data chat/Qwen-Qwen2.5-7B-Instruct.jinja

m="$HEARTH_TEST_DATA/models/stories260K.gguf"
alias=stories260K
key="test-key-$$"

skip() { echo "SKIP: $*" >&2; exit 77; }
command -v node >/dev/null 2>&1 || skip "node is not installed"
command -v npm >/dev/null 2>&1 || skip "npm is not installed"
"$HEARTH" serve --help >/dev/null 2>&1 || skip "$HEARTH has no serve command"

serve_tracking

# The client, in a directory of its own; the test script is copied beside
# its node_modules so that `import "openai"` finds it.
work="$tmpdir/node"
mkdir -p "$work/node_modules"
if [ -n "${HEARTH_OPENAI_NODE_MODULES:-}" ] && [ -d "$HEARTH_OPENAI_NODE_MODULES/openai" ]; then
    ln -s "$HEARTH_OPENAI_NODE_MODULES/openai" "$work/node_modules/openai"
else
    npm_install "$work" openai
fi
for f in openai-checks.mjs server-openai.mjs server-responses.mjs; do
    cp "${HEARTH_SRCDIR:-.}/tests/$f" "$work/"
done

# A template of a reasoning model's shape: replies think in <think> ...
# </think> first (a reasoning split), the effort is a variable.
think_template="$tmpdir/think.jinja"
cat >"$think_template" <<'EOF'
{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor -%}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if reasoning_effort is defined %}Effort: {{ reasoning_effort }}
{% endif %}{% endif %}
{#- replies think in <think> ... </think> first #}
EOF

# start_server NAME TEMPLATE ARGS...: the model under its alias and the
# key, with that chat template.  The main servers' template is one that
# writes tools into the prompt (a request with tools is refused under one
# that does not).
start_server() {
    name=$1 template=$2; shift 2
    serve_start "$name" -m "$m" --alias "$alias" --chat-template "$template" --api-key "$key" "$@"
}

qwen="$HEARTH_TEST_DATA/chat/Qwen-Qwen2.5-7B-Instruct.jinja"
start_server main "$qwen" -c 2048
main_pid=$pid main_port=$port
start_server deadline "$qwen" -c 4096 -np 8 --timeout 1
deadline_pid=$pid deadline_port=$port
start_server think "$think_template" -c 512 -np 2 --responses-store 2 --responses-store-bytes 6000
think_pid=$pid think_port=$port

# run_node SCRIPT: run one of the .mjs against the three servers; a
# failure shows its output and the servers' last lines.
run_node() {
    HEARTH_URL="http://127.0.0.1:$main_port" HEARTH_TIMEOUT_URL="http://127.0.0.1:$deadline_port" \
    HEARTH_THINK_URL="http://127.0.0.1:$think_port" HEARTH_KEY="$key" HEARTH_ALIAS="$alias" \
        timeout 300 node "$work/$1" >"$tmpdir/$1.out" 2>"$tmpdir/$1.err"
    rc=$?
    cat "$tmpdir/$1.out"
    if [ "$rc" -ne 0 ]; then
        fail "$1: exit status $rc"
        sed 's/^/  node: /' "$tmpdir/$1.err" >&2
        for name in main deadline think; do
            tail -n 20 "$tmpdir/$name.err" | sed "s/^/  $name server: /" >&2
        done
    fi
}
run_node server-openai.mjs
run_node server-responses.mjs

serve_stop main "$main_pid"
serve_stop deadline "$deadline_pid"
serve_stop think "$think_pid"
pids=''
finish

#!/bin/sh
# server-chatpage.sh -- the chat page of hearth serve in a real browser:
# three servers on stories260K (one with an API key and small KV blocks, so
# that a conversation's second turn meets the prefix cache; one whose
# template opens the reply's reasoning, with a reasoning budget; one with
# the model under two names, neither loaded until a message), then
# tests/server-chatpage.py drives headless Chromium through the DevTools
# protocol: the key asked for, two turns streamed and compared with the
# server's own answers, a long answer stopped midway (the server cancels
# it), a new chat, the reasoning shown apart, the picker of several
# models (a message loads the model picked).  It leaves a screenshot,
# tests/server-chatpage.png in the build directory.  The servers are
# stopped with SIGTERM, which must give exit status 0, no sanitizer
# report, and the stopped request logged as 499.
# Skipped when hearth has no serve command, or python3 or Chromium is
# missing, unless CI is set; CHROMIUM=PROGRAM names the browser.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data models/stories260K.gguf

m="$HEARTH_TEST_DATA/models/stories260K.gguf"
alias=stories260K
key="test-key-$$"
shot="${HEARTH_BUILDDIR:-.}/tests/server-chatpage.png"

command -v python3 >/dev/null 2>&1 || unavailable "python3 is not installed"
if "$HEARTH" serve --help >"$tmpdir/help" 2>&1; then
    grep -qi 'no HTTP server' "$tmpdir/help" && unavailable "hearth serve is not available: this build has no HTTP server"
else
    fail "hearth serve --help failed"
    sed 's/^/  /' "$tmpdir/help" >&2
    finish
fi
chromium=${CHROMIUM:-}
if [ -z "$chromium" ]; then
    for c in chromium chromium-browser google-chrome-stable google-chrome; do
        if command -v "$c" >/dev/null 2>&1; then chromium=$(command -v "$c"); break; fi
    done
fi
[ -n "$chromium" ] || unavailable "Chromium is not installed (apt-get install chromium)"

serve_tracking

# start_server NAME ARGS...: the model under its alias.
start_server() {
    name=$1; shift
    serve_start "$name" -m "$m" --alias "$alias" "$@"
}

# wait_ready NAME PORT: until /health answers 200 (the model is loaded).
wait_ready() {
    python3 - "$2" <<'EOF' || { fail "$1 server: /health never answered 200"; sed 's/^/  stderr: /' "$tmpdir/$1.err" >&2; }
import sys, time, urllib.request
end = time.monotonic() + 120
while time.monotonic() < end:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=5) as r:
            if r.status == 200:
                sys.exit(0)
    except OSError:
        pass
    time.sleep(0.1)
sys.exit(1)
EOF
}

# A chatml-like template whose generation prompt opens the reasoning: the
# reply is reasoning until the budget closes it, then the answer.
cat >"$tmpdir/think.jinja" <<'EOF'
{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor -%}
{%- if add_generation_prompt %}<|im_start|>assistant
<think>
{% endif %}{#- replies think in <think> ... </think> first #}
EOF

start_server main --chat-template chatml -c 16384 -np 2 --kv-block 16 --api-key "$key"
main_pid=$pid main_port=$port
start_server think --chat-template "$tmpdir/think.jinja" -c 512 -np 1 --reasoning-budget 6
think_pid=$pid think_port=$port
# two models (the same file under two names), loaded by the page's message
serve_start table -m "$alias=$m" -m "$alias-twin=$m" --chat-template chatml -c 512 -np 1
table_pid=$pid table_port=$port
wait_ready main "$main_port"
wait_ready think "$think_port"
wait_ready table "$table_port"
grep -q "the chat page: http://127.0.0.1:$main_port/" "$tmpdir/main.err" &&
    pass "the server names the chat page's address" || fail "the server names the chat page's address"

rm -f "$shot"
HEARTH_URL="http://127.0.0.1:$main_port" HEARTH_KEY="$key" HEARTH_THINK_URL="http://127.0.0.1:$think_port" \
HEARTH_ALIAS="$alias" HEARTH_TABLE_URL="http://127.0.0.1:$table_port" \
    python3 "${HEARTH_SRCDIR:-.}/tests/server-chatpage.py" "$chromium" "$shot" \
        >"$tmpdir/driver.out" 2>"$tmpdir/driver.err"
rc=$?
cat "$tmpdir/driver.out"
if [ "$rc" -ne 0 ]; then
    fail "server-chatpage.py: exit status $rc"
    sed 's/^/  driver: /' "$tmpdir/driver.err" >&2
    tail -n 30 "$tmpdir/main.err" | sed 's/^/  main server: /' >&2
    tail -n 10 "$tmpdir/think.err" | sed 's/^/  think server: /' >&2
fi
[ -s "$shot" ] && pass "the screenshot is there: $shot" || fail "no screenshot at $shot"

# The page's own requests, as the server logged them: the page without a
# key, the models with it, and the stopped stream as 499 (the client went
# away).
grep -Eq 'req-[0-9]+ GET / 200 ' "$tmpdir/main.err" && pass "the log has GET / 200" ||
    fail "the log has GET / 200"
grep -Eq 'req-[0-9]+ GET /v1/models 401 ' "$tmpdir/main.err" && grep -Eq 'req-[0-9]+ GET /v1/models 200 ' "$tmpdir/main.err" &&
    pass "the log has the page's models call refused without the key, then answered" ||
    fail "the log has the page's models call refused without the key, then answered"
grep -Eq 'req-[0-9]+ POST /v1/chat/completions 499 ' "$tmpdir/main.err" &&
    pass "the log has the stopped stream as 499" || fail "the log has the stopped stream as 499"

serve_stop main "$main_pid"
serve_stop think "$think_pid"
serve_stop table "$table_pid"
pids=''
finish

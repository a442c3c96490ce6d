#!/bin/sh
# cli-serve.sh -- hearth serve end to end: tests/server-api.py starts
# servers on stories260K with the chatml template and checks every
# endpoint, the response and stream formats, errors and limits, API keys,
# the queue, cancellation when a client goes away, 16 requests at once
# against the same requests alone, metrics and the drain on SIGTERM.
# Skipped when hearth was built without the server (jansson) or python3 is missing, unless CI is set.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"

require_data models/stories260K.gguf reference/stories260K-greedy.txt
command -v python3 >/dev/null 2>&1 || unavailable "python3 is not installed"

# A build without the server's libraries has no serve command, or one
# whose help or error says the build has no HTTP server; any other
# failure is a failure.
if "$HEARTH" serve --help >"$tmpdir/help" 2>&1; then
    grep -qi 'no HTTP server' "$tmpdir/help" &&
        unavailable "hearth serve is not available: $(grep -i 'no HTTP server' "$tmpdir/help" | head -n 1)"
else
    if grep -qi 'not a hearth command\|no HTTP server\|microhttpd\|jansson' "$tmpdir/help"; then
        unavailable "hearth serve is not available: $(head -n 1 "$tmpdir/help")"
    fi
    fail "hearth serve --help failed"
    sed 's/^/  /' "$tmpdir/help" >&2
    finish
fi

# A block size the engine refuses is a usage error before the port is bound.
expect_status 2 "--kv-block not a power of two" -- "$HEARTH" serve -m "$HEARTH_TEST_DATA/models/stories260K.gguf" \
    --kv-block 17 --port 0
grep -q "^hearth: serve: --kv-block: 17 is not a power of two" "$tmpdir/err" || fail "the block size is explained"
for bad in -5 abc 99999999999; do
    expect_status 2 "--reasoning-budget $bad" -- "$HEARTH" serve -m "$HEARTH_TEST_DATA/models/stories260K.gguf" \
        --reasoning-budget "$bad" --port 0
    grep -q "^hearth: serve: --reasoning-budget: " "$tmpdir/err" || fail "--reasoning-budget $bad is explained"
done
# The prompts' share of a step: above 0, at most 1.
for bad in 0 -0.5 1.01 abc nan ''; do
    expect_status 2 "--prefill-share '$bad'" -- "$HEARTH" serve -m "$HEARTH_TEST_DATA/models/stories260K.gguf" \
        --prefill-share "$bad" --port 0
    grep -q "^hearth: serve: --prefill-share: " "$tmpdir/err" || fail "--prefill-share '$bad' is explained"
done
# 1 and a small share are taken (the next flag's error is the one reported)
for good in 1 0.01; do
    expect_status 2 "--prefill-share $good then a bad --kv-block" -- "$HEARTH" serve \
        -m "$HEARTH_TEST_DATA/models/stories260K.gguf" --prefill-share "$good" --kv-block 17 --port 0
    grep -q "^hearth: serve: --kv-block: 17" "$tmpdir/err" || fail "--prefill-share $good is taken"
done

python3 "${HEARTH_SRCDIR:-.}/tests/server-api.py" "$HEARTH" || fail "hearth serve end to end (see the FAIL lines above)"
finish

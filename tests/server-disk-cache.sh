#!/bin/sh
# server-disk-cache.sh -- hearth serve --cache-dir: the prefix cache's
# blocks survive a restart.  A server on stories260K answers a long
# prompt (computed), then again (from the pool); a second server on the
# same directory is refused while the first runs; after the first
# stops, a new server on the directory answers the prompt from disk
# (its usage and /metrics count the disk hits) with the same text and
# logprobs as when computed; with the files corrupted, a new server
# rejects them and still answers the same.  The same for recurrent
# models, whose prompts resume from the state snapshot kept at their
# last block boundary: RWKV-6, and a hybrid Qwen3.5 with a prediction
# layer (written by tools/gen-model) whose snapshot carries that layer's
# input; a corrupt snapshot file is rejected and the prompt computed.
# A directory that cannot be created and bad sizes are start-up errors.  Skipped when hearth has no
# serve command or python3 is missing, unless CI is set.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data models/stories260K.gguf models/micro-rwkv6-f32.gguf
command -v python3 >/dev/null 2>&1 || unavailable "python3 is not installed"
"$HEARTH" serve --help 2>&1 | grep -qi 'no HTTP server' && unavailable "hearth serve is not available"

serve_tracking
model="$HEARTH_TEST_DATA/models/stories260K.gguf"
cache="$tmpdir/cache"

# http PORT METHOD PATH [BODY]: the response body on stdout (the status
# must be 200); waits for /health first.  (Not named http.py: that would
# shadow Python's own http package.)
cat >"$tmpdir/client.py" <<'EOF'
import json, sys, time, urllib.request, urllib.error
port, method, path = sys.argv[1], sys.argv[2], sys.argv[3]
body = sys.argv[4].encode() if len(sys.argv) > 4 else None
base = "http://127.0.0.1:" + port
for _ in range(600):
    try:
        if urllib.request.urlopen(base + "/health", timeout=5).status == 200:
            break
    except (urllib.error.URLError, OSError):
        pass
    time.sleep(0.1)
req = urllib.request.Request(base + path, data=body, method=method,
                             headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=120) as r:
    sys.stdout.write(r.read().decode())
EOF
http() { python3 "$tmpdir/client.py" "$@"; }

# field FILE EXPR: a Python expression over the response r.
field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }

# metric FILE NAME: a sample's value in a /metrics text.
metric() { sed -n "s/^$2 //p" "$1"; }

# A long prompt (a few hundred tokens: several blocks of 64), greedy, with logprobs.
prompt=$(python3 -c 'print(" ".join(["Once upon a time, a little girl named Lily went to the park with her mom."] * 16))')
body=$(python3 -c 'import json,sys; print(json.dumps({"model": "m", "prompt": sys.argv[1], "max_tokens": 24,
    "temperature": 0, "logprobs": 3}))' "$prompt")

# ask NAME PORT: the completion in $tmpdir/NAME.json, its text and
# logprobs in $tmpdir/NAME.answer.
ask() {
    http "$2" POST /v1/completions "$body" >"$tmpdir/$1.json" || { fail "$1: the request failed"; return; }
    field "$tmpdir/$1.json" 'json.dumps([r["choices"][0]["text"], r["choices"][0]["logprobs"]], sort_keys=True)' \
        >"$tmpdir/$1.answer"
}

# same NAME: NAME's answer is the computed one, bit for bit.
same() {
    if cmp -s "$tmpdir/computed.answer" "$tmpdir/$1.answer"; then pass "$1: the same text and logprobs as computed"
    else fail "$1: the text or logprobs differ from the computed ones"; fi
}

serve_start first -m "$model" -c 512 --cache-dir "$cache"
first=$pid first_port=$port
ask computed "$first_port"
[ "$(field "$tmpdir/computed.json" 'r["usage"]["prompt_tokens_details"]["cached_tokens"]')" = 0 ] &&
    pass "first request: nothing cached" || fail "first request: something cached"
[ -s "$tmpdir/computed.answer" ] && grep -q '"token_logprobs"' "$tmpdir/computed.answer" ||
    fail "first request: no text and logprobs"
ask memory "$first_port"
same memory
[ "$(field "$tmpdir/memory.json" 'r["usage"]["prompt_tokens_details"]["cached_tokens"] > 0 and
    r["usage"]["prompt_tokens_details"]["hearth_disk_cached_tokens"] == 0')" = True ] &&
    pass "second request: a hit in the pool" || fail "second request: not a hit in the pool"

# a second server on the directory in use is refused
expect_status 1 "a second server on the cache directory" -- "$HEARTH" serve -m "$model" -c 512 --port 0 \
    --host 127.0.0.1 --cache-dir "$cache"
grep -q "cache directory .* is in use by another process" "$tmpdir/err" &&
    pass "the second server says the directory is in use" ||
    { fail "the second server does not say why"; sed 's/^/  stderr: /' "$tmpdir/err" >&2; }
serve_stop first "$first"
n_files=$(ls "$cache" | grep -c '\.kvb$')
[ "$n_files" -gt 0 ] && pass "the blocks are on disk ($n_files files)" || fail "no block files in the directory"
ls -a "$cache" | grep -q '^\.tmp-' && fail "a temporary file is left"

# after a restart: a disk hit, the same answer
serve_start restarted -m "$model" -c 512 --cache-dir "$cache"
restarted=$pid
ask disk "$port"
same disk
disk_tokens=$(field "$tmpdir/disk.json" 'r["usage"]["prompt_tokens_details"]["hearth_disk_cached_tokens"]')
cached_tokens=$(field "$tmpdir/disk.json" 'r["usage"]["prompt_tokens_details"]["cached_tokens"]')
[ "$disk_tokens" -gt 0 ] && [ "$disk_tokens" = "$cached_tokens" ] &&
    pass "after the restart: $disk_tokens prompt tokens from disk" ||
    fail "after the restart: $disk_tokens tokens from disk, $cached_tokens cached"
http "$port" GET /metrics >"$tmpdir/metrics.txt"
hits=$(metric "$tmpdir/metrics.txt" hearth_prefix_cache_disk_hits_total)
[ -n "$hits" ] && [ "$hits" -gt 0 ] && pass "/metrics: $hits disk hits" || fail "/metrics: disk hits '$hits'"
[ -n "$disk_tokens" ] && [ "$(metric "$tmpdir/metrics.txt" hearth_prompt_tokens_cached_disk_total)" = "$disk_tokens" ] &&
    pass "/metrics: the disk's prompt tokens" || fail "/metrics: the disk's prompt tokens"
serve_stop restarted "$restarted"

# every file corrupted (one byte of its keys flipped): rejected, the
# answer computed again and still the same
for f in "$cache"/*.kvb; do
    python3 -c 'import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[-100] ^= 0x20; open(p, "wb").write(b)' "$f"
done
serve_start corrupt -m "$model" -c 512 --cache-dir "$cache"
corrupt=$pid
ask corrupted "$port"
same corrupted
[ "$(field "$tmpdir/corrupted.json" 'r["usage"]["prompt_tokens_details"]["hearth_disk_cached_tokens"]')" = 0 ] &&
    pass "corrupt files: nothing from disk" || fail "corrupt files: tokens from disk"
http "$port" GET /metrics >"$tmpdir/metrics.txt"
rejected=$(metric "$tmpdir/metrics.txt" hearth_prefix_cache_disk_rejected_total)
[ -n "$rejected" ] && [ "$rejected" -gt 0 ] && pass "/metrics: $rejected files rejected" ||
    fail "/metrics: rejected '$rejected'"
serve_stop corrupt "$corrupt"

# recurrent models: the prompt's state snapshot is a file too, and a
# restarted server resumes from it with the same answer
gen="${HEARTH_BUILDDIR:-.}/tools/gen-model"
hybrid="$tmpdir/micro-qwen35.gguf"
if ! "$gen" --shape micro-qwen35 --type F32 --threads 2 --mtp-layers 1 "$hybrid" 2>"$tmpdir/gen-err"; then
    sed 's/^/  stderr: /' "$tmpdir/gen-err" >&2
    fail "gen-model writes micro-qwen35"
    hybrid=
fi
for rec in "$HEARTH_TEST_DATA/models/micro-rwkv6-f32.gguf" $hybrid; do
    mname=$(basename "$rec" .gguf)
    dir="$tmpdir/cache-$mname"
    serve_start "$mname" -m "$rec" -c 2048 --cache-dir "$dir"
    rec_pid=$pid
    ask "$mname-computed" "$port"
    [ "$(field "$tmpdir/$mname-computed.json" 'r["usage"]["prompt_tokens_details"]["cached_tokens"]')" = 0 ] ||
        fail "$mname: the first request is not computed"
    serve_stop "$mname" "$rec_pid"
    n_states=$(ls "$dir" | grep -c '\.rss$')
    [ "$n_states" -gt 0 ] && pass "$mname: the prompt's snapshot is on disk ($n_states files)" ||
        { fail "$mname: no snapshot file in the directory"; ls "$dir" >&2; }
    serve_start "$mname-restarted" -m "$rec" -c 2048 --cache-dir "$dir"
    rec_pid=$pid
    ask "$mname-disk" "$port"
    cmp -s "$tmpdir/$mname-computed.answer" "$tmpdir/$mname-disk.answer" &&
        pass "$mname: after the restart, the same text and logprobs as computed" ||
        fail "$mname: after the restart, the text or logprobs differ"
    disk_tokens=$(field "$tmpdir/$mname-disk.json" 'r["usage"]["prompt_tokens_details"]["hearth_disk_cached_tokens"]')
    cached_tokens=$(field "$tmpdir/$mname-disk.json" 'r["usage"]["prompt_tokens_details"]["cached_tokens"]')
    [ "$disk_tokens" -gt 0 ] && [ "$disk_tokens" = "$cached_tokens" ] &&
        pass "$mname: after the restart, $disk_tokens prompt tokens resumed from disk" ||
        fail "$mname: after the restart, $disk_tokens tokens from disk, $cached_tokens cached"
    http "$port" GET /metrics >"$tmpdir/metrics.txt"
    hits=$(metric "$tmpdir/metrics.txt" hearth_prefix_cache_disk_snapshot_hits_total)
    [ "$hits" = 1 ] && pass "$mname: /metrics: a snapshot read from disk" ||
        fail "$mname: /metrics: snapshot hits '$hits'"
    serve_stop "$mname-restarted" "$rec_pid"
    for f in "$dir"/*.rss; do
        python3 -c 'import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[-100] ^= 0x20; open(p, "wb").write(b)' "$f"
    done
    serve_start "$mname-corrupt" -m "$rec" -c 2048 --cache-dir "$dir"
    rec_pid=$pid
    ask "$mname-corrupted" "$port"
    cmp -s "$tmpdir/$mname-computed.answer" "$tmpdir/$mname-corrupted.answer" &&
        pass "$mname: corrupt snapshot: the same answer, computed" ||
        fail "$mname: corrupt snapshot: the text or logprobs differ"
    [ "$(field "$tmpdir/$mname-corrupted.json" 'r["usage"]["prompt_tokens_details"]["cached_tokens"]')" = 0 ] &&
        pass "$mname: corrupt snapshot: nothing resumed" || fail "$mname: corrupt snapshot: something was resumed"
    http "$port" GET /metrics >"$tmpdir/metrics.txt"
    rejected=$(metric "$tmpdir/metrics.txt" hearth_prefix_cache_disk_rejected_total)
    [ -n "$rejected" ] && [ "$rejected" -gt 0 ] && pass "$mname: corrupt snapshot rejected" ||
        fail "$mname: rejected '$rejected'"
    serve_stop "$mname-corrupt" "$rec_pid"
done

# a table of models: each keeps its blocks in a directory of its own,
# and the same request to the same model is a disk hit after a restart
table="$tmpdir/table-cache"
serve_start table -m "one=$model" -m "two=$model" -c 512 --cache-dir "$table"
table_pid=$pid
body=$(printf '%s' "$body" | sed 's/"model": "m"/"model": "one"/')
ask table-one "$port"
serve_stop table "$table_pid"
if [ -f "$table/one/lock" ] && [ "$(ls "$table/one" | grep -c '\.kvb$')" -gt 0 ] &&
    ! ls "$table/two" 2>/dev/null | grep -q '\.kvb$'; then
    pass "a table: the blocks in the directory of the model that computed them"
else
    fail "a table: the blocks are not in the model's own directory"; ls -R "$table" >&2
fi
serve_start table2 -m "one=$model" -m "two=$model" -c 512 --cache-dir "$table"
table_pid=$pid
ask table-again "$port"
[ "$(field "$tmpdir/table-again.json" 'r["usage"]["prompt_tokens_details"]["hearth_disk_cached_tokens"] > 0')" = True ] &&
    pass "a table: a disk hit after the restart" || fail "a table: no disk hit after the restart"
cmp -s "$tmpdir/table-one.answer" "$tmpdir/table-again.answer" && pass "a table: the same answer" ||
    fail "a table: the answers differ"
serve_stop table2 "$table_pid"

# start-up errors
touch "$tmpdir/plain"
expect_status 1 "a cache directory that cannot be created" -- "$HEARTH" serve -m "$model" -c 512 --port 0 \
    --host 127.0.0.1 --cache-dir "$tmpdir/plain/sub"
grep -q "cannot create the cache directory" "$tmpdir/err" && pass "the directory's error is explained" ||
    { fail "the directory's error is not explained"; sed 's/^/  stderr: /' "$tmpdir/err" >&2; }
for bad in 0 abc 12X -1; do
    expect_status 2 "--cache-disk-size $bad" -- "$HEARTH" serve -m "$model" --port 0 --cache-dir "$cache" \
        --cache-disk-size "$bad"
    grep -q "^hearth: serve: --cache-disk-size: " "$tmpdir/err" || fail "--cache-disk-size $bad is explained"
done
expect_status 2 "--cache-disk-size without --cache-dir" -- "$HEARTH" serve -m "$model" --port 0 \
    --cache-disk-size 1G
expect_status 2 "--cache-dir with --no-prefix-cache" -- "$HEARTH" serve -m "$model" --port 0 \
    --cache-dir "$cache" --no-prefix-cache
finish

#!/bin/sh
# cli-inspect.sh -- hearth inspect on the shared models and on corrupt files.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data models/micro-llama-Q4_K_M.gguf models/micro-qwen2-F16.gguf

m="$HEARTH_TEST_DATA/models/micro-llama-Q4_K_M.gguf"
expect_status 0 "inspect a Q4_K_M model" -- "$HEARTH" inspect "$m"
grep -q "KV cache per token *512 bytes" "$tmpdir/out" || fail "reports 512 bytes of F16 KV cache per token"
grep -q "blk.1.ffn_down.weight *Q6_K *512 x 256" "$tmpdir/out" || fail "shows the true type of a Q6_K tensor in a Q4_K_M file"
grep -q "blk.0.ffn_down.weight *Q4_K" "$tmpdir/out" || fail "shows Q4_K tensors"
[ "$(grep -c '^  blk\.\|^  output\|^  token_embd' "$tmpdir/out")" -eq 21 ] || fail "lists all 21 tensors"
[ -s "$tmpdir/err" ] && fail "nothing on stderr on success"

expect_status 0 "inspect --json" -- "$HEARTH" inspect --json "$m"
if command -v python3 >/dev/null 2>&1; then
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["summary"]["kv_cache_bytes_per_token"] == 512, d["summary"]
assert d["summary"]["layers"] == 2 and d["summary"]["kv_heads"] == 2
assert len(d["tensors"]) == 21
t = [x for x in d["tensors"] if x["name"] == "blk.1.attn_v.weight"][0]
assert t["type"] == "Q6_K" and t["shape"] == [256, 64], t
assert d["metadata"]["tokenizer.ggml.tokens"]["value"]["length"] == 512
' "$tmpdir/out" || fail "--json output is valid JSON with the expected summary"
fi

q="$HEARTH_TEST_DATA/models/micro-qwen2-F16.gguf"
expect_status 0 "inspect a qwen2 model" -- "$HEARTH" inspect "$q"
grep -q "architecture *qwen2" "$tmpdir/out" || fail "qwen2 architecture in the summary"

# Corrupt input: one clear line on stderr, exit status 1.
head -c 1000 "$m" > "$tmpdir/truncated.gguf"
expect_status 1 "truncated file" -- "$HEARTH" inspect "$tmpdir/truncated.gguf"
[ "$(wc -l < "$tmpdir/err")" -eq 1 ] || fail "truncated file: exactly one line on stderr"
grep -q "truncated.gguf: at byte" "$tmpdir/err" || fail "truncated file: names the file and the offset"

{ printf 'GGUF\003\000\000\000'; printf '\377\377\377\377\377\377\377\177'; tail -c +17 "$m"; } > "$tmpdir/flipped.gguf"
expect_status 1 "bit-flipped tensor count" -- "$HEARTH" inspect "$tmpdir/flipped.gguf"
grep -q "tensors, more than the file can hold" "$tmpdir/err" || fail "absurd tensor count is named"

printf 'not a model at all\n' > "$tmpdir/text.gguf"
expect_status 1 "not a GGUF file" -- "$HEARTH" inspect "$tmpdir/text.gguf"
grep -q "not a GGUF file" "$tmpdir/err" || fail "non-GGUF input is named"

expect_status 1 "missing file" -- "$HEARTH" inspect "$tmpdir/missing.gguf"
expect_status 2 "no file argument" -- "$HEARTH" inspect
expect_status 2 "unknown option" -- "$HEARTH" inspect --bogus "$m"
grep -q "unknown option '--bogus'" "$tmpdir/err" || fail "unknown option is named"

finish

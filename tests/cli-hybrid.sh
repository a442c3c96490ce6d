#!/bin/sh
# cli-hybrid.sh -- the hybrid Qwen3.5 family end to end, on a micro
# qwen35 file that tools/gen-model writes here (F32, and Q4_K_M made by
# hearth quantize): hearth inspect shows the linear layers, the state per
# sequence (from the file's own sizes) and the KV bytes of the attention
# layers alone; hearth run generates; prompt, decode and the serving engine
# agree bit for bit (tests/dump-logits); a chunk-parallel prefill changes
# the perplexity only by rounding; hearth quantize keeps the convolution
# taps F32; offloading is refused, or runs on the CPU with --gpu-fallback;
# speculation is refused.  (tests/archs-oracle.sh checks the logits
# against the NumPy forward pass.)
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"

gen="${HEARTH_BUILDDIR:-.}/tools/gen-model"
dump="${HEARTH_BUILDDIR:-.}/tests/dump-logits"
tokens="1 300 301 302 17 400 259 260 511 42 7 8 9 300 301 302 5 6 7 8 9 10 11 12"
require_data text/GPL-3.txt
text="$HEARTH_TEST_DATA/text/GPL-3.txt"

m="$tmpdir/micro-qwen35.gguf"
if ! "$gen" --shape micro-qwen35 --type F32 --threads 2 "$m" 2>"$tmpdir/gen-err"; then
    sed 's/^/  stderr: /' "$tmpdir/gen-err" >&2
    fail "gen-model writes micro-qwen35"
    finish
fi

# inspect: the sizes from the file's metadata, the state computed here
expect_status 0 "inspect --json" -- "$HEARTH" inspect --json "$m"
json=$tmpdir/out
key() { sed -n "s/^  *\"qwen35\\.$1\": {\"type\": \"uint32\", \"value\": \\([0-9]*\\)}.*/\\1/p" "$json" | head -1; }
K=$(key ssm.conv_kernel) d=$(key ssm.state_size) nk=$(key ssm.group_count) nv=$(key ssm.time_step_rank)
L=$(key block_count) every=$(key full_attention_interval)
heads=$(key attention.head_count_kv) dim=$(key attention.key_length)
[ -n "$K" ] && [ -n "$d" ] && [ -n "$nk" ] && [ -n "$nv" ] && [ -n "$L" ] && [ -n "$every" ] &&
    [ -n "$heads" ] && [ -n "$dim" ] ||
    fail "inspect --json shows the linear attention's sizes"
linear=$((L - L / every))
state=$((linear * ((K - 1) * (2 * nk * d + nv * d) + nv * d * d) * 4))
grep -q "\"linear_attention_layers\": $linear," "$json" || fail "the JSON summary counts $linear linear layers"
grep -q "\"state_bytes_per_sequence\": $state," "$json" || fail "the JSON summary's state is $state bytes"
expect_status 0 "inspect" -- "$HEARTH" inspect "$m"
grep -q "^  linear layers  *$linear of $L " "$tmpdir/out" || fail "inspect shows $linear linear layers of $L"
grep -q "^  state per sequence  *$state bytes" "$tmpdir/out" || fail "inspect shows the state per sequence"
kv=$(sed -n 's/^  KV cache per token  *\([0-9]*\) bytes.*/\1/p' "$tmpdir/out")
[ "$kv" = $(((L / every) * heads * dim * 2 * 2)) ] || fail "the KV bytes per token count the attention layers alone ($kv)"

expect_status 0 "run" -- "$HEARTH" run -m "$m" -p "once upon a time" -n 8 --temp 0 -t 2

# chunk-parallel prefill: the same perplexity but for rounding
ppl() { "$HEARTH" perplexity -m "$1" -f "$text" -c 128 --chunks 3 -t 2 ${2:+--chunk-size $2} 2>&1 |
        sed -n 's/.*PPL = \([0-9.e+]*\).*/\1/p' | tail -1; }
p1=$(ppl "$m") p16=$(ppl "$m" 16) p64=$(ppl "$m" 64)
if [ -n "$p1" ] && [ -n "$p16" ] && [ -n "$p64" ] &&
    awk -v a="$p1" -v b="$p16" -v c="$p64" 'BEGIN { d1 = (a - b) / a; d2 = (a - c) / a;
        exit !(d1 < 1e-4 && d1 > -1e-4 && d2 < 1e-4 && d2 > -1e-4) }'; then
    pass "chunks of 16 and 64 give the perplexity of token-by-token prefill ($p1, $p16, $p64)"
else
    fail "chunked prefill: perplexity $p1 token by token, $p16 and $p64 in chunks"
fi

for q in F32 Q4_K_M; do
    f=$m
    if [ $q != F32 ]; then
        f="$tmpdir/micro-qwen35-$q.gguf"
        expect_status 0 "quantize $q" -- "$HEARTH" quantize -q "$m" "$f" $q
        "$HEARTH" inspect "$f" >"$tmpdir/types"
        grep -q "^  blk.0.ssm_conv1d.weight  *F32 " "$tmpdir/types" || fail "the convolution taps stay F32"
        grep -q "^  blk.0.attn_qkv.weight  *Q4_K " "$tmpdir/types" || fail "the projections are quantized"
    fi
    # shellcheck disable=SC2086
    if "$dump" -e 24 "$f" "$tmpdir/logits.f32" $tokens >"$tmpdir/engine" 2>"$tmpdir/err"; then
        pass "$q: prompt, decode and the serving engine agree bit for bit"
    else
        fail "$q: dump-logits: prompt, decode and engine"
        sed 's/^/  stderr: /' "$tmpdir/err" >&2
    fi
done

expect_status 1 "offload refused" -- "$HEARTH" run -m "$m" -p "once" -n 1 -ngl 99
grep -q "recurrent layers of qwen35" "$tmpdir/err" || fail "the refusal names the recurrent layers"
expect_status 0 "--gpu-fallback runs on the CPU" -- "$HEARTH" run -m "$m" -p "once" -n 1 -ngl 99 --gpu-fallback
finish

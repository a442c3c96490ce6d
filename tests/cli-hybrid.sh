#!/bin/sh
# cli-hybrid.sh -- the hybrid Qwen3.5 families end to end, on the micro
# qwen35, qwen35moe and qwen3next files that tools/gen-model writes here
# (F32, and Q4_K_M made by hearth quantize): hearth inspect shows the
# linear layers, the state per sequence (from the file's own sizes) and
# the KV bytes of the attention layers alone; hearth run generates;
# prompt, decode and the serving engine agree bit for bit
# (tests/dump-logits); a chunk-parallel prefill changes the perplexity
# only by rounding; hearth quantize keeps the convolution taps (and the
# mixtures' routers) F32; offloading is refused, or runs on the CPU with
# --gpu-fallback.  (tests/archs-oracle.sh checks the logits against the
# NumPy forward pass.)
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"

gen="${HEARTH_BUILDDIR:-.}/tools/gen-model"
dump="${HEARTH_BUILDDIR:-.}/tests/dump-logits"
tokens="1 300 301 302 17 400 259 260 511 42 7 8 9 300 301 302 5 6 7 8 9 10 11 12"
require_data text/GPL-3.txt
text="$HEARTH_TEST_DATA/text/GPL-3.txt"

for shape in micro-qwen35 micro-qwen35moe micro-qwen3next; do
    arch=${shape#micro-}
    m="$tmpdir/$shape.gguf"
    if ! "$gen" --shape "$shape" --type F32 --threads 2 "$m" 2>"$tmpdir/gen-err"; then
        sed 's/^/  stderr: /' "$tmpdir/gen-err" >&2
        fail "gen-model writes $shape"
        continue
    fi

    # inspect: the sizes from the file's metadata, the state computed here
    expect_status 0 "$shape: inspect --json" -- "$HEARTH" inspect --json "$m"
    json=$tmpdir/out
    key() { sed -n "s/^  *\"$arch\\.$1\": {\"type\": \"uint32\", \"value\": \\([0-9]*\\)}.*/\\1/p" "$json" | head -1; }
    K=$(key ssm.conv_kernel) d=$(key ssm.state_size) nk=$(key ssm.group_count) nv=$(key ssm.time_step_rank)
    L=$(key block_count) every=$(key full_attention_interval)
    heads=$(key attention.head_count_kv) dim=$(key attention.key_length)
    if [ -z "$K" ] || [ -z "$d" ] || [ -z "$nk" ] || [ -z "$nv" ] || [ -z "$L" ] || [ -z "$every" ] ||
        [ -z "$heads" ] || [ -z "$dim" ]; then
        fail "$shape: inspect --json shows the linear attention's sizes"
        continue
    fi
    mtp=$(key nextn_predict_layers)
    mtp=${mtp:-0}
    [ "$shape" != micro-qwen3next ] || [ "$mtp" = 1 ] || fail "$shape: gen-model writes a prediction layer"
    L=$((L - mtp))
    linear=$((L - L / every))
    state=$((linear * ((K - 1) * (2 * nk * d + nv * d) + nv * d * d) * 4))
    grep -q "\"linear_attention_layers\": $linear," "$json" || fail "$shape: the JSON summary counts $linear linear layers"
    grep -q "\"state_bytes_per_sequence\": $state," "$json" || fail "$shape: the JSON summary's state is $state bytes"
    grep -q "\"prediction_layers\": $mtp," "$json" || fail "$shape: the JSON summary counts $mtp prediction layers"
    expect_status 0 "$shape: inspect" -- "$HEARTH" inspect "$m"
    grep -q "^  linear layers  *$linear of $L " "$tmpdir/out" || fail "$shape: inspect shows $linear linear layers of $L"
    grep -q "^  state per sequence  *$state bytes" "$tmpdir/out" || fail "$shape: inspect shows the state per sequence"
    if [ "$mtp" -gt 0 ]; then
        grep -q "^  prediction layers  *$mtp after the $L of the trunk" "$tmpdir/out" ||
            fail "$shape: inspect shows the prediction layers apart from the trunk"
    fi
    kv=$(sed -n 's/^  KV cache per token  *\([0-9]*\) bytes.*/\1/p' "$tmpdir/out")
    [ "$kv" = $(((L / every) * heads * dim * 2 * 2)) ] ||
        fail "$shape: the KV bytes per token count the attention layers alone ($kv)"

    expect_status 0 "$shape: run" -- "$HEARTH" run -m "$m" -p "once upon a time" -n 8 --temp 0 -t 2

    # chunk-parallel prefill: the same perplexity but for rounding
    ppl() { "$HEARTH" perplexity -m "$1" -f "$text" -c 128 --chunks 3 -t 2 ${2:+--chunk-size $2} 2>&1 |
            sed -n 's/.*PPL = \([0-9.e+]*\).*/\1/p' | tail -1; }
    p1=$(ppl "$m") p16=$(ppl "$m" 16) p64=$(ppl "$m" 64)
    if [ -n "$p1" ] && [ -n "$p16" ] && [ -n "$p64" ] &&
        awk -v a="$p1" -v b="$p16" -v c="$p64" 'BEGIN { d1 = (a - b) / a; d2 = (a - c) / a;
            exit !(d1 < 1e-4 && d1 > -1e-4 && d2 < 1e-4 && d2 > -1e-4) }'; then
        pass "$shape: chunks of 16 and 64 give the perplexity of token-by-token prefill ($p1, $p16, $p64)"
    else
        fail "$shape: chunked prefill: perplexity $p1 token by token, $p16 and $p64 in chunks"
    fi

    for q in F32 Q4_K_M; do
        f=$m
        if [ $q != F32 ]; then
            f="$tmpdir/$shape-$q.gguf"
            expect_status 0 "$shape: quantize $q" -- "$HEARTH" quantize -q "$m" "$f" $q
            "$HEARTH" inspect "$f" >"$tmpdir/types"
            grep -q "^  blk.0.ssm_conv1d.weight  *F32 " "$tmpdir/types" || fail "$shape: the convolution taps stay F32"
            grep -q "^  blk.0.attn_qkv.weight  *Q4_K " "$tmpdir/types" || fail "$shape: the projections are quantized"
            case $arch in
                *moe | *next)
                    grep -q "^  blk.0.ffn_gate_inp.weight  *F32 " "$tmpdir/types" || fail "$shape: the router stays F32"
                    grep -q "^  blk.0.ffn_gate_exps.weight  *Q4_K " "$tmpdir/types" ||
                        fail "$shape: the experts are quantized" ;;
            esac
        fi
        # shellcheck disable=SC2086
        if "$dump" -e 24 "$f" "$tmpdir/logits.f32" $tokens >"$tmpdir/engine" 2>"$tmpdir/err"; then
            pass "$shape: $q: prompt, decode and the serving engine agree bit for bit"
        else
            fail "$shape: $q: dump-logits: prompt, decode and engine"
            sed 's/^/  stderr: /' "$tmpdir/err" >&2
        fi
    done

    expect_status 1 "$shape: offload refused" -- "$HEARTH" run -m "$m" -p "once" -n 1 -ngl 99
    # the first part the CPU alone runs: the experts, else the recurrent layers
    case $arch in
        qwen35) why="the recurrent layers of $arch" ;;
        *) why="offloading mixture-of-experts layers ($arch, 8 experts)" ;;
    esac
    grep -qF "$why" "$tmpdir/err" || fail "$shape: the refusal names what cannot be offloaded"
    expect_status 0 "$shape: --gpu-fallback runs on the CPU" -- "$HEARTH" run -m "$m" -p "once" -n 1 -ngl 99 --gpu-fallback
done
finish

#!/bin/sh
# cli-moe.sh -- mixture-of-experts models end to end, on micro qwen2moe
# and Mixtral-style llama files that tools/gen-model writes here (F32 and
# Q4_K_M): hearth inspect shows the expert counts; hearth run generates;
# the logits of a prompt run in batches equal those of the same tokens
# decoded one at a time, bit for bit (tests/dump-logits), for the F32
# files and the quantized ones; hearth quantize keeps the routers in F32
# and quantizes the 3-D expert tensors; offloading is refused, or runs on
# the CPU with --gpu-fallback.  (tests/archs-oracle.sh checks the logits
# against the NumPy forward pass.)
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"

gen="${HEARTH_BUILDDIR:-.}/tools/gen-model"
dump="${HEARTH_BUILDDIR:-.}/tests/dump-logits"
tokens="1 300 301 302 17 400 259 260 511 42 7 8 9 300 301 302"

for shape in micro-qwen2moe micro-qwen3moe micro-mixtral; do
    m="$tmpdir/$shape.gguf"
    if ! "$gen" --shape "$shape" --type F32 --threads 2 "$m" 2>"$tmpdir/gen-err"; then
        fail "gen-model writes $shape"
        sed 's/^/  stderr: /' "$tmpdir/gen-err" >&2
        continue
    fi
    expect_status 0 "$shape: inspect" -- "$HEARTH" inspect "$m"
    case $shape in
        *qwen3moe) want="16 (4 used per token)" ;;
        *) want="8 (2 used per token)" ;;
    esac
    grep -q "^  experts  *$want\$" "$tmpdir/out" || fail "$shape: inspect shows the experts"
    case $shape in
        *qwen2moe)
            grep -q "^  expert FF length  *256$" "$tmpdir/out" || fail "$shape: the expert FF length"
            grep -q "^  shared expert FF  *512$" "$tmpdir/out" || fail "$shape: the shared expert's" ;;
    esac
    expect_status 0 "$shape: inspect --json" -- "$HEARTH" inspect --json "$m"
    grep -q '"experts": [0-9]*,' "$tmpdir/out" && grep -q '"experts_used": [0-9]*,' "$tmpdir/out" ||
        fail "$shape: the JSON summary has the expert counts"
    expect_status 0 "$shape: run" -- "$HEARTH" run -m "$m" -p "once upon a time" -n 8 --temp 0 -t 2
    for q in F32 Q4_K_M; do
        f=$m
        if [ $q != F32 ]; then
            f="$tmpdir/$shape-$q.gguf"
            expect_status 0 "$shape: quantize $q" -- "$HEARTH" quantize -q "$m" "$f" $q
            "$HEARTH" inspect "$f" >"$tmpdir/types"
            grep -q "^  blk.0.ffn_gate_inp.weight  *F32 " "$tmpdir/types" || fail "$shape: the router stays F32"
            grep -q "^  blk.0.ffn_up_exps.weight  *Q4_K " "$tmpdir/types" ||
                fail "$shape: the 3-D expert tensors are quantized"
        fi
        # shellcheck disable=SC2086
        if "$dump" -e 24 "$f" "$tmpdir/logits.f32" $tokens >"$tmpdir/engine" 2>"$tmpdir/err"; then
            pass "$shape $q: prompt, decode and the serving engine agree bit for bit"
        else
            fail "$shape $q: dump-logits: prompt, decode and engine"
            sed 's/^/  stderr: /' "$tmpdir/err" >&2
        fi
    done
    expect_status 1 "$shape: offload refused" -- "$HEARTH" run -m "$m" -p "once" -n 1 -ngl 99
    grep -q "mixture-of-experts" "$tmpdir/err" || fail "$shape: the refusal names the mixture of experts"
    expect_status 0 "$shape: --gpu-fallback runs on the CPU" -- \
        "$HEARTH" run -m "$m" -p "once" -n 1 -ngl 99 --gpu-fallback
done
finish

#!/bin/sh
# cli-glm4moe.sh -- the GLM-4.5 family end to end, on the micro glm4moe
# file that tools/gen-model writes here (F32, and Q4_K_M made by hearth
# quantize): hearth inspect shows the experts, the leading dense layer,
# the partial rotary embedding and the prediction layer apart from the
# trunk; hearth run drafting with the prediction layer (--mtp) gives the
# greedy text of plain decoding; prompt, decode and the serving engine
# agree bit for bit (tests/dump-logits, which also checks the drafts'
# logits); a file without expert_gating_func routes by sigmoid scores, as
# the converters write it; a trunk-only file runs without drafts; broken
# files are refused, naming what is wrong (tests/gguf-edit makes them);
# offloading is refused.  (tests/archs-oracle.sh checks the logits
# against the NumPy forward pass.)
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"

gen="${HEARTH_BUILDDIR:-.}/tools/gen-model"
dump="${HEARTH_BUILDDIR:-.}/tests/dump-logits"
edit="${HEARTH_BUILDDIR:-.}/tests/gguf-edit"
tokens="1 300 301 302 17 400 259 260 511 42 7 8 9 300 301 302 5 6 7 8 9 10 11 12"

m="$tmpdir/micro-glm4moe.gguf"
if ! "$gen" --shape micro-glm4moe --type F32 --threads 2 "$m" 2>"$tmpdir/gen-err"; then
    sed 's/^/  stderr: /' "$tmpdir/gen-err" >&2
    fail "gen-model writes micro-glm4moe"
    finish
fi

expect_status 0 "inspect" -- "$HEARTH" inspect "$m"
grep -q "^  experts  *8 (2 used per token)$" "$tmpdir/out" || fail "inspect shows the experts"
grep -q "^  shared experts  *1$" "$tmpdir/out" || fail "inspect shows the shared expert"
grep -q "^  leading dense layers  *1$" "$tmpdir/out" || fail "inspect shows the leading dense layer"
grep -q "^  rotary dims  *32 of 64 per head$" "$tmpdir/out" || fail "inspect shows the partial rotary embedding"
grep -q "^  prediction layers  *1 after the 3 of the trunk" "$tmpdir/out" ||
    fail "inspect shows the prediction layer apart from the trunk"
# the trunk's 3 layers of 2 key/value heads of 64, keys and values in F16
grep -q "^  KV cache per token  *1536 bytes" "$tmpdir/out" || fail "the KV bytes per token count the trunk's layers"
expect_status 0 "inspect --json" -- "$HEARTH" inspect --json "$m"
grep -q '"prediction_layers": 1,' "$tmpdir/out" || fail "the JSON summary counts the prediction layer"

# drafts by the prediction layer: the greedy text without them
expect_status 0 "run" -- "$HEARTH" run -m "$m" -p "once upon a time" -n 40 --temp 0 -t 2
mv "$tmpdir/out" "$tmpdir/plain"
expect_status 0 "run --mtp" -- "$HEARTH" run -m "$m" -p "once upon a time" -n 40 --temp 0 -t 2 \
    --mtp --draft-fixed --draft-p-min 0
cmp -s "$tmpdir/plain" "$tmpdir/out" && pass "--mtp gives the greedy text of plain decoding" ||
    fail "--mtp changes the greedy text"
grep -q "speculation (prediction layer): [1-9][0-9]* drafted" "$tmpdir/err" ||
    { fail "--mtp: no drafts"; sed 's/^/  stderr: /' "$tmpdir/err" >&2; }

for q in F32 Q4_K_M; do
    f=$m
    if [ $q != F32 ]; then
        f="$tmpdir/micro-glm4moe-$q.gguf"
        expect_status 0 "quantize $q" -- "$HEARTH" quantize -q "$m" "$f" $q
        "$HEARTH" inspect "$f" >"$tmpdir/types"
        grep -q "^  blk.1.ffn_gate_inp.weight  *F32 " "$tmpdir/types" || fail "the router stays F32"
        grep -q "^  blk.1.exp_probs_b.bias  *F32 " "$tmpdir/types" || fail "the selection bias stays F32"
        grep -q "^  blk.1.ffn_up_exps.weight  *Q4_K " "$tmpdir/types" || fail "the experts are quantized"
        grep -q "^  blk.3.nextn.eh_proj.weight  *Q4_K " "$tmpdir/types" || fail "the prediction layer is quantized"
    fi
    # shellcheck disable=SC2086
    if "$dump" -e 24 "$f" "$tmpdir/logits-$q.f32" $tokens >"$tmpdir/engine" 2>"$tmpdir/err"; then
        pass "$q: prompt, decode, the serving engine and the prediction layer's drafts agree bit for bit"
    else
        fail "$q: dump-logits: prompt, decode and engine"
        sed 's/^/  stderr: /' "$tmpdir/err" >&2
    fi
done

# Without expert_gating_func the experts are chosen by sigmoid scores:
# the same logits.  Without the prediction layer's tensors the trunk
# runs alone, with the same logits, and --mtp is refused.
for variant in "no-gating --drop-key glm4moe.expert_gating_func" "trunk-only --drop-tensors blk.3."; do
    # shellcheck disable=SC2086
    set -- $variant
    name=$1
    shift
    f="$tmpdir/$name.gguf"
    "$edit" "$m" "$f" "$@" || { fail "$name: gguf-edit"; continue; }
    # shellcheck disable=SC2086
    if "$dump" "$f" "$tmpdir/logits-$name.f32" $tokens 2>"$tmpdir/err" &&
        cmp -s "$tmpdir/logits-$name.f32" "$tmpdir/logits-F32.f32"; then
        pass "$name: the logits of the whole file"
    else
        fail "$name: other logits than the whole file's"
        sed 's/^/  stderr: /' "$tmpdir/err" >&2
    fi
done
expect_status 1 "trunk-only: --mtp refused" -- "$HEARTH" run -m "$tmpdir/trunk-only.gguf" -p x -n 1 --mtp
grep -q "has no multi-token-prediction layers" "$tmpdir/err" || fail "trunk-only: --mtp: message"

# broken files: what is wrong, named
refused() {
    message=$1
    shift
    f="$tmpdir/bad.gguf"
    "$edit" "$m" "$f" "$@" || { fail "gguf-edit $*"; return; }
    expect_status 1 "refused: $*" -- "$HEARTH" run -m "$f" -p x -n 1
    grep -qF "$message" "$tmpdir/err" ||
        { fail "$*: the error does not say '$message'"; sed 's/^/  stderr: /' "$tmpdir/err" >&2; }
}
refused "required metadata 'glm4moe.expert_shared_count' is missing" --drop-key glm4moe.expert_shared_count
refused "required metadata 'glm4moe.expert_count' is missing" --drop-key glm4moe.expert_count
refused "'glm4moe.expert_used_count' = 9 is out of range" --set-u32 glm4moe.expert_used_count 9
refused "'glm4moe.expert_gating_func' = 3 is not supported" --set-u32 glm4moe.expert_gating_func 3
refused "'glm4moe.leading_dense_block_count' = 4 is more than the 3 layers" \
    --set-u32 glm4moe.leading_dense_block_count 4
refused "'glm4moe.nextn_predict_layers' = 4 leaves no trunk" --set-u32 glm4moe.nextn_predict_layers 4
refused "RoPE dimension count 80 must be even and at most the head dimension 64" \
    --set-u32 glm4moe.rope.dimension_count 80
refused "'glm4moe.rope.dimension_sections'" --set-u32 glm4moe.rope.dimension_sections 8
refused "tensor 'blk.1.exp_probs_b.bias' is missing" --drop-tensor blk.1.exp_probs_b.bias
refused "tensor 'blk.1.ffn_down_shexp.weight' is missing" --drop-tensor blk.1.ffn_down_shexp.weight
refused "tensor 'blk.0.ffn_gate.weight' is missing" --drop-tensor blk.0.ffn_gate.weight
refused "tensor 'blk.2.post_attention_norm.weight' is missing" --drop-tensor blk.2.post_attention_norm.weight
refused "layer 1 normalises the query heads but not the key: tensor 'blk.1.attn_k_norm.weight' is missing" \
    --drop-tensor blk.1.attn_k_norm.weight
refused "tensor 'blk.3.nextn.eh_proj.weight' is missing" --drop-tensor blk.3.nextn.eh_proj.weight
refused "tensor 'blk.3.ffn_gate_exps.weight' is missing" --drop-tensor blk.3.ffn_gate_exps.weight

expect_status 1 "offload refused" -- "$HEARTH" run -m "$m" -p "once" -n 1 -ngl 99
grep -qF "architecture glm4moe cannot be offloaded to an OpenCL device: its mixture-of-experts layers" "$tmpdir/err" ||
    fail "the refusal names what cannot be offloaded"
expect_status 0 "--gpu-fallback runs on the CPU" -- "$HEARTH" run -m "$m" -p "once" -n 1 -ngl 99 --gpu-fallback
finish

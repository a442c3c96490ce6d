#!/bin/sh
# archs-oracle.sh -- every architecture against an independent forward
# pass: random-weight micro models of each family (tools/gen-model, F32,
# made here), their all-position logits from hearth (tests/dump-logits,
# which also checks that decode equals the prompt bit for bit) compared
# with tests/oracle-forward.py's NumPy implementation of the published
# equations.  Sequences run past the sliding windows of the micro shapes.
# The mixture-of-experts families (micro-qwen2moe, micro-qwen3moe,
# micro-mixtral) are checked the same way, and the hybrid Qwen3.5
# families (Gated DeltaNet and gated attention layers: micro-qwen35, and
# with experts micro-qwen35moe and micro-qwen3next), and gpt-oss
# (micro-gpt-oss: attention sinks, alternating windows, YaRN, experts
# with biases and the clamped SwiGLU), and deepseek2 (micro-deepseek2,
# micro-deepseek2-v2, micro-deepseek3: hearth's latent attention in its
# absorbed form, a multi-query attention over the cached latent, against
# the oracle's decompressed multi-head form; with and without low-rank
# queries, softmax and sigmoid routing, groups, the selection bias and
# the routed scaling factor, shared experts, a leading dense layer, YaRN
# with DeepSeek's mscale; micro-kimi-k2: one expert group and the YaRN
# ramp's ends from the file), and glm4moe (micro-glm4moe: q/k/v biases and
# head norms, RoPE on half of each head, a leading dense layer, sigmoid
# routing with the selection bias, the routed scaling factor and a shared
# expert).  The prediction ("NextN") layers of micro-glm4moe and
# micro-qwen3next are checked against the oracle too (dump-logits -m).
# dump-logits -e also runs each model in the serving engine: two greedy
# samples whose logits must equal the context's bit for bit, the pool
# consistent after every step, and for micro-phi3 (every layer slides)
# the blocks wholly before the window given back.
# Skips (77) where NumPy is missing, unless CI is set.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
# the first Python 3 with NumPy: $PYTHON3, python3 on the PATH, the system's
python=
for p in ${PYTHON3:-} python3 /usr/bin/python3; do
    if "$p" -c 'import numpy' 2>/dev/null; then python=$p; break; fi
done
if [ -z "$python" ]; then
    if [ -n "${CI:-}" ]; then
        echo "FAIL: NumPy (python3-numpy) is needed for the architecture oracle" >&2
        exit 1
    fi
    echo "skip: NumPy is not installed"
    exit 77
fi
gen="${HEARTH_BUILDDIR:-.}/tools/gen-model"
dump="${HEARTH_BUILDDIR:-.}/tests/dump-logits"
oracle="${HEARTH_SRCDIR:-.}/tests/oracle-forward.py"

# 80 tokens of a fixed pseudo-random sequence over the micro vocabulary
tokens=$(awk 'BEGIN { x = 12345; for (i = 0; i < 80; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%d ", 1 + x % 511 } }')

for shape in ${ARCHS_ORACLE_SHAPES:-micro-qwen3 micro-gemma2 micro-gemma3 micro-phi3 micro-qwen2moe micro-qwen3moe micro-mixtral micro-qwen35 micro-qwen35moe micro-qwen3next micro-gpt-oss micro-deepseek2 micro-deepseek2-v2 micro-deepseek3 micro-kimi-k2 micro-glm4moe}; do
    model="$tmpdir/$shape.gguf"
    if ! "$gen" --shape "$shape" --type F32 --threads 2 "$model" 2>"$tmpdir/gen.err"; then
        cat "$tmpdir/gen.err" >&2
        fail "$shape: gen-model writes the model"
        continue
    fi
    # the prediction layer's logits where the model has one
    mtp="$tmpdir/$shape-mtp.f32"
    rm -f "$mtp"
    # shellcheck disable=SC2086
    if ! "$dump" -e 200 -m "$mtp" "$model" "$tmpdir/$shape.f32" $tokens >"$tmpdir/engine" 2>"$tmpdir/err"; then
        cat "$tmpdir/err" >&2
        fail "$shape: hearth computes the logits, decode and the engine equal to the prompt"
        continue
    fi
    [ -s "$tmpdir/engine" ] && sed "s/^/ok: $shape: /" "$tmpdir/engine"
    mtp_opt=
    [ -f "$mtp" ] && mtp_opt="--mtp $mtp"
    # shellcheck disable=SC2086
    if "$python" "$oracle" --n-ctx 512 $mtp_opt "$model" "$tmpdir/$shape.f32" $tokens >"$tmpdir/out" 2>&1; then
        sed "s/^/ok: /" "$tmpdir/out"
    else
        cat "$tmpdir/out" >&2
        fail "$shape: hearth's logits agree with the oracle"
    fi
done
# hearth inspect shows the window and its layer pattern and the soft-cap;
# the CPU-only families refuse to be offloaded, naming what is missing.
m="$tmpdir/micro-gemma3.gguf"
if [ -f "$m" ]; then
    "$HEARTH" inspect "$m" >"$tmpdir/inspect" 2>&1
    grep -q "sliding window *24 (2 of every 3 layers)" "$tmpdir/inspect" &&
        grep -q "logit soft-cap *8" "$tmpdir/inspect" && pass "inspect shows the window and the soft-cap" ||
        fail "inspect shows the window and the soft-cap"
    expect_status 1 "gemma3 is not offloaded" -- "$HEARTH" run -m "$m" -p hi -n 1 -ngl 1
    grep -q "architecture gemma3 cannot be offloaded to an OpenCL device: the OpenCL backend has no GELU" \
        "$tmpdir/err" && pass "the refusal names what is missing" || fail "the refusal names what is missing"
    expect_status 0 "gemma3 falls back to the CPU" -- "$HEARTH" run -m "$m" -p hi -n 1 -ngl 1 --gpu-fallback
fi
m="$tmpdir/micro-gpt-oss.gguf"
if [ -f "$m" ]; then
    expect_status 1 "gpt-oss is not offloaded" -- "$HEARTH" run -m "$m" -p hi -n 1 -ngl 1
    grep -q "architecture gpt-oss cannot be offloaded to an OpenCL device: its attention sinks" "$tmpdir/err" &&
        pass "the gpt-oss refusal names what is missing" || fail "the gpt-oss refusal names what is missing"
    "$HEARTH" inspect "$m" >"$tmpdir/inspect" 2>&1
    grep -q "sliding window *32 (1 of every 2 layers)" "$tmpdir/inspect" &&
        pass "inspect shows gpt-oss's alternating window" || fail "inspect shows gpt-oss's alternating window"
fi
# deepseek2's cache keeps the latent and the rotary key, no values apart:
# 3 layers x (64 + 32) x 2 bytes in F16, as inspect computes it and as
# the engine allocates it; the family is not offloaded.
m="$tmpdir/micro-deepseek3.gguf"
if [ -f "$m" ]; then
    "$HEARTH" inspect "$m" >"$tmpdir/inspect" 2>&1
    grep -q "KV cache per token *576 bytes (F16 latent and rotary key" "$tmpdir/inspect" &&
        grep -q "latent attention *latent 64 + rotary 32 per position, queries of rank 96" "$tmpdir/inspect" &&
        pass "inspect shows the latent and its bytes per token" || fail "inspect shows the latent and its bytes per token"
    "$HEARTH" bench -m "$m" --parallel 1 -p 8 -n 2 -t 1 >"$tmpdir/bench" 2>&1
    grep -q "KV pool: .*(576 bytes a position)" "$tmpdir/bench" &&
        pass "the engine's pool takes the latent's bytes per position" ||
        fail "the engine's pool takes the latent's bytes per position"
    expect_status 1 "deepseek2 is not offloaded" -- "$HEARTH" run -m "$m" -p hi -n 1 -ngl 1
    grep -q "architecture deepseek2 cannot be offloaded to an OpenCL device: its latent attention" "$tmpdir/err" &&
        pass "the deepseek2 refusal names what is missing" || fail "the deepseek2 refusal names what is missing"
fi
# micro-kimi-k2's vocabulary is byte-level BPE under the kimi-k2
# pre-tokenizer, which a prompt of mixed scripts goes through.
m="$tmpdir/micro-kimi-k2.gguf"
if [ -f "$m" ]; then
    expect_status 0 "a Kimi-K2 style file runs a prompt" -- \
        "$HEARTH" run -m "$m" -p "Kimi是月之暗面 HelloWorld it's 1234" -n 4
fi
finish

#!/bin/sh
# cli-quantize.sh -- hearth quantize end to end: recipes on the shared
# micro models (the types the common GGUF tooling chose, read from the
# shared files), fallbacks on a generated model with 96-wide rows, dry
# runs, interruption-free failures and usage errors.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data models/micro-llama-f32.gguf models/micro-llama-Q4_K_M.gguf \
    models/micro-qwen2-f32.gguf models/micro-qwen2-Q3_K_M.gguf models/micro-llama-Q8_0.gguf

llama="$HEARTH_TEST_DATA/models/micro-llama-f32.gguf"
qwen="$HEARTH_TEST_DATA/models/micro-qwen2-f32.gguf"

# The tensor table of a file: "name type" per line, sorted.
types() {
    "$HEARTH" inspect "$1" | awk '/^tensors/ {t = 1; next} /^summary/ {t = 0}
        t && NF >= 3 && $1 != "name" {print $1, $2}' | sort
}

for pair in "$llama Q4_K_M micro-llama-Q4_K_M" "$qwen Q3_K_M micro-qwen2-Q3_K_M" \
            "$llama q8_0 micro-llama-Q8_0"; do
    set -- $pair
    out="$tmpdir/out-$2.gguf"
    expect_status 0 "quantize $3" -- "$HEARTH" quantize "$1" "$out" "$2"
    [ -s "$tmpdir/out" ] && fail "$3: nothing on stdout"
    grep -q "blk.0.attn_q.weight" "$tmpdir/err" || fail "$3: a line per tensor on stderr"
    grep -q "wrote $out" "$tmpdir/err" || fail "$3: a closing summary on stderr"
    types "$out" > "$tmpdir/ours"
    types "$HEARTH_TEST_DATA/models/$3.gguf" > "$tmpdir/theirs"
    cmp -s "$tmpdir/ours" "$tmpdir/theirs" || fail "$3: the same tensor types as the shared file"
    "$HEARTH" inspect "$out" > "$tmpdir/inspect"
    "$HEARTH" inspect "$HEARTH_TEST_DATA/models/$3.gguf" > "$tmpdir/inspect-theirs"
    grep 'general.file_type' "$tmpdir/inspect" > "$tmpdir/ft-ours"
    grep 'general.file_type' "$tmpdir/inspect-theirs" > "$tmpdir/ft-theirs"
    cmp -s "$tmpdir/ft-ours" "$tmpdir/ft-theirs" || fail "$3: the same general.file_type"
    grep -q 'general.quantization_version *uint32 *2' "$tmpdir/inspect" ||
        fail "$3: general.quantization_version 2"
done

expect_status 0 "quiet" -- "$HEARTH" quantize -q -t 1 "$llama" "$tmpdir/q.gguf" Q5_1
[ "$(wc -l < "$tmpdir/err")" -eq 1 ] || fail "--quiet: only the summary line"

expect_status 0 "dry run" -- "$HEARTH" quantize --dry-run "$llama" Q4_K_M
[ -e "$tmpdir/none.gguf" ] && fail "dry run wrote a file"
grep -q "^blk.1.ffn_down.weight *F32 *-> Q6_K *512 x 256$" "$tmpdir/out" ||
    fail "dry run: the plan on stdout"
grep -q "^Q4_K_M: 21 tensors, .* 4.94 bits per weight$" "$tmpdir/out" ||
    fail "dry run: the size of the result (4.94 bits per weight, as the shared file)"
expect_status 0 "dry run with an output name" -- "$HEARTH" quantize -n "$llama" "$tmpdir/none.gguf" Q2_K
[ -e "$tmpdir/none.gguf" ] && fail "dry run with OUT wrote a file"

# Quantized input is converted again, with a warning.
expect_status 0 "requantize" -- "$HEARTH" quantize -q \
    "$HEARTH_TEST_DATA/models/micro-llama-Q8_0.gguf" "$tmpdir/re.gguf" Q4_0
grep -q "warning: .* holds quantized tensors (Q8_0 first)" "$tmpdir/err" ||
    fail "requantizing warns once"
[ "$(grep -c warning "$tmpdir/err")" -eq 1 ] || fail "only one warning"

# Rows of 96 elements fill no K-quant block: fallbacks are reported.
gen="${HEARTH_BUILDDIR:-.}/tools/gen-model"
if [ -x "$gen" ]; then
    "$gen" --shape qwen2.5-0.5b --layers 2 --embd 96 --heads 6 --kv-heads 2 --ff 256 \
        --n-vocab 300 --type F32 "$tmpdir/narrow.gguf" 2>"$tmpdir/gen-err" ||
        fail "gen-model writes a small F32 model"
    expect_status 0 "fallbacks" -- "$HEARTH" quantize -q "$tmpdir/narrow.gguf" "$tmpdir/nq.gguf" Q4_K_M
    grep -q "blk.0.attn_q.weight: rows of 96 elements do not fill Q4_K's 256-element blocks; using Q5_0" \
        "$tmpdir/err" || fail "a K-quant fallback is named"
    grep -q "blk.1.attn_v.weight: .* Q6_K's .*; using Q8_0" "$tmpdir/err" ||
        fail "Q6_K falls back to Q8_0"
    grep -q ", [0-9]* fallbacks," "$tmpdir/err" || fail "the summary counts fallbacks"
    types "$tmpdir/nq.gguf" | grep -q "^blk.1.ffn_down.weight Q6_K$" ||
        fail "256-wide ffn_down rows keep their K-quant"
    expect_status 0 "the converted model runs" -- "$HEARTH" bench -m "$tmpdir/nq.gguf" -p 8 -n 2 -r 1 -q
fi

# Failures and usage errors.
expect_status 1 "missing input" -- "$HEARTH" quantize "$tmpdir/missing.gguf" "$tmpdir/x.gguf" Q4_0
grep -q "missing.gguf" "$tmpdir/err" || fail "the missing file is named"
[ -e "$tmpdir/x.gguf" ] && fail "nothing written for a missing input"
printf 'not a model\n' > "$tmpdir/junk.gguf"
expect_status 1 "not a GGUF file" -- "$HEARTH" quantize "$tmpdir/junk.gguf" "$tmpdir/x.gguf" Q4_0
expect_status 1 "unwritable output" -- "$HEARTH" quantize -q "$llama" "$tmpdir/no/such/dir/x.gguf" Q4_0
expect_status 2 "unknown type" -- "$HEARTH" quantize "$llama" "$tmpdir/x.gguf" Q4_K
grep -q "unknown quantization type 'Q4_K' (known: .*Q4_K_M" "$tmpdir/err" || fail "the known types are listed"
expect_status 2 "same file" -- "$HEARTH" quantize "$llama" "$llama" Q4_0
expect_status 2 "too few arguments" -- "$HEARTH" quantize "$llama" Q4_0
expect_status 2 "too many arguments" -- "$HEARTH" quantize "$llama" a b c
expect_status 2 "bad thread count" -- "$HEARTH" quantize -t 0 "$llama" "$tmpdir/x.gguf" Q4_0
expect_status 2 "unknown option" -- "$HEARTH" quantize --bogus "$llama" "$tmpdir/x.gguf" Q4_0
expect_status 0 "help" -- "$HEARTH" quantize --help
grep -q "Q3_K_M" "$tmpdir/out" || fail "--help lists the types"

finish

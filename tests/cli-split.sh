#!/bin/sh
# cli-split.sh -- models split over several files (NAME-00001-of-0000N.gguf,
# the common gguf-split format) end to end, on files tools/gen-model
# writes here: every command that takes -m loads a split model from its
# first part's name, with the same logits bit for bit as the model in one
# file (tests/dump-logits) and the same text, and hearth quantize writes
# the same file from either; parts that do not belong
# together are refused naming the file and the fault; and a KV pool that
# does not fit beside the weights in HEARTH_MEMORY_LIMIT is refused naming
# both sizes.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"

gen="${HEARTH_BUILDDIR:-.}/tools/gen-model"
dump="${HEARTH_BUILDDIR:-.}/tests/dump-logits"
tokens="1 300 301 302 17 400 259 260 511 42 7 8 9 300 301 302"

# generate ARGS...: tools/gen-model, failing the script when it does
generate() {
    if ! "$gen" --threads 2 "$@" 2>"$tmpdir/gen-err"; then
        fail "gen-model $*"
        sed 's/^/  stderr: /' "$tmpdir/gen-err" >&2
        finish
    fi
}

# --- the same model in one file and in five ---------------------------------

whole=$tmpdir/whole.gguf
generate --shape micro-deepseek2 --type Q4_K_M "$whole"
generate --shape micro-deepseek2 --type Q4_K_M --split-max-tensors 10 "$tmpdir/ds.gguf"
first=$tmpdir/ds-00001-of-00005.gguf
for k in 1 2 3 4 5; do
    [ -f "$tmpdir/ds-0000$k-of-00005.gguf" ] || fail "gen-model wrote part $k of 5"
done

expect_status 0 "inspect a split model" -- "$HEARTH" inspect "$first"
grep -q "^split into 5 files:" "$tmpdir/out" || fail "inspect lists the parts"
grep -q "^  5  $tmpdir/ds-00005-of-00005.gguf (" "$tmpdir/out" || fail "inspect names the last part"
grep -q "^  blk.2.ffn_down_exps.weight .*  5$" "$tmpdir/out" || fail "inspect says which file holds a tensor"
expect_status 0 "inspect --json" -- "$HEARTH" inspect --json "$first"
grep -q '"splits": \[{"file": ' "$tmpdir/out" || fail "the JSON lists the parts"

"$dump" "$whole" "$tmpdir/whole.f32" $tokens 2>"$tmpdir/err" || fail "dump-logits of the model in one file"
"$dump" "$first" "$tmpdir/split.f32" $tokens 2>"$tmpdir/err" || fail "dump-logits of the split model"
if cmp -s "$tmpdir/whole.f32" "$tmpdir/split.f32"; then pass "the split model's logits are the same, bit for bit"
else fail "the split model's logits differ from the model in one file"; fi

expect_status 0 "run the model in one file" -- "$HEARTH" run -m "$whole" -p "once upon a time" -n 12 --temp 0 -t 2
cp "$tmpdir/out" "$tmpdir/whole.txt"
expect_status 0 "run the split model" -- "$HEARTH" run -m "$first" -p "once upon a time" -n 12 --temp 0 -t 2 -v
if cmp -s "$tmpdir/out" "$tmpdir/whole.txt"; then pass "the same text"; else fail "the split model writes another text"; fi
stderr_has "^hearth: run: memory: weights .* resident (.* in the file), KV pool .*, of .* available$" \
    "run -v reports the memory"
expect_status 0 "bench the split model" -- "$HEARTH" bench -m "$first" -p 8 -n 2 -r 1 -t 2
expect_status 0 "tokenize with the split model's vocabulary" -- "$HEARTH" tokenize -m "$first" "once upon"
expect_status 0 "perplexity of the split model" -- \
    "$HEARTH" perplexity -m "$first" -f "$HEARTH_SRCDIR/README.md" -c 64 --chunks 1 -t 2

# hearth quantize of a split model writes one file, the same as from the
# model in one file
generate --shape micro-deepseek2 --type F32 "$tmpdir/f32.gguf"
generate --shape micro-deepseek2 --type F32 --split-max-tensors 20 "$tmpdir/f32s.gguf"
expect_status 0 "quantize the model in one file" -- "$HEARTH" quantize -q -t 2 "$tmpdir/f32.gguf" "$tmpdir/q8.gguf" Q8_0
expect_status 0 "quantize the split model" -- \
    "$HEARTH" quantize -q -t 2 "$tmpdir/f32s-00001-of-00003.gguf" "$tmpdir/q8s.gguf" Q8_0
if cmp -s "$tmpdir/q8.gguf" "$tmpdir/q8s.gguf"; then pass "the same file, without the split keys"
else fail "quantizing the split model writes another file"; fi

# hearth serve, when built with its server: ready with the split model,
# saying what the memory takes
if "$HEARTH" serve --help >/dev/null 2>&1; then
    "$HEARTH" serve -m "$first" --port 0 -t 2 -c 256 >"$tmpdir/serve.out" 2>"$tmpdir/serve.err" &
    server=$!
    i=0
    while ! grep -q "ready:" "$tmpdir/serve.err" && kill -0 "$server" 2>/dev/null && [ $i -lt 300 ]; do
        sleep 0.1; i=$((i + 1))
    done
    kill -TERM "$server" 2>/dev/null
    wait "$server"
    cp "$tmpdir/serve.err" "$tmpdir/err"
    stderr_has "^hearth: serve: ready: model ds-00001-of-00005 " "serve is ready with the split model"
    stderr_has "^hearth: serve: memory: weights .* resident (.* in the file), KV pool .*, of .* available$" \
        "serve reports the memory at start"
fi

# --- parts that do not belong together -------------------------------------

# refused DESCRIPTION MODEL MESSAGE: hearth run -m MODEL fails, saying MESSAGE
refused() {
    expect_status 1 "$1" -- "$HEARTH" run -m "$2" -p hi -n 1
    stderr_has "$3" "$1: the error names the file and the fault"
}

refused "a later part" "$tmpdir/ds-00003-of-00005.gguf" \
    "ds-00003-of-00005.gguf is part 3 of 5 of a split model: open the first part, $first"

mkdir "$tmpdir/missing"
cp "$tmpdir"/ds-0000[1245]-of-00005.gguf "$tmpdir/missing/"
refused "a missing part" "$tmpdir/missing/ds-00001-of-00005.gguf" \
    "part 3 of 5 of the split model is missing or unreadable ($tmpdir/missing/ds-00003-of-00005.gguf: cannot open"

# the same model split into 4, and into 4 at other places
generate --shape micro-deepseek2 --type Q4_K_M --split-max-tensors 12 "$tmpdir/four.gguf"
generate --shape micro-deepseek2 --type Q4_K_M --split-max-tensors 11 "$tmpdir/other.gguf"
mkdir "$tmpdir/count"
cp "$tmpdir"/ds-0000?-of-00005.gguf "$tmpdir/count/"
cp "$tmpdir/four-00002-of-00004.gguf" "$tmpdir/count/ds-00002-of-00005.gguf"
refused "a part of a split into another count" "$tmpdir/count/ds-00001-of-00005.gguf" \
    "count/ds-00002-of-00005.gguf: split.count is 4, but .* says the model is in 5 parts"

mkdir "$tmpdir/twice"
for k in 1 2 3 4; do cp "$tmpdir/four-0000$k-of-00004.gguf" "$tmpdir/twice/"; done
cp "$tmpdir/other-00002-of-00004.gguf" "$tmpdir/twice/four-00002-of-00004.gguf"
refused "a tensor in two parts" "$tmpdir/twice/four-00001-of-00004.gguf" \
    "tensor '.*' is in two parts of the split model: .*four-00001-of-00004.gguf and .*four-00002-of-00004.gguf"

# part 2 of another model split in 3
generate --shape micro-deepseek2 --type Q4_K_M --split-max-tensors 16 "$tmpdir/three.gguf"
generate --shape micro-qwen3 --type Q4_K_M --split-max-tensors 10 "$tmpdir/qwen.gguf"
mkdir "$tmpdir/mixed"
cp "$tmpdir"/three-0000[13]-of-00003.gguf "$tmpdir/mixed/"
cp "$tmpdir/qwen-00002-of-00003.gguf" "$tmpdir/mixed/three-00002-of-00003.gguf"
refused "parts of different models" "$tmpdir/mixed/three-00001-of-00003.gguf" \
    "mixed/three-00002-of-00003.gguf: split.tensors.count is .*: parts of different models"

cp "$first" "$tmpdir/renamed.gguf"
refused "a renamed first part" "$tmpdir/renamed.gguf" \
    "renamed.gguf: the model is split into 5 files (split.count), but the name does not end in -00001-of-00005.gguf"

# --- memory ---------------------------------------------------------------------

expect_status 1 "a pool that does not fit" -- env HEARTH_MEMORY_LIMIT=3M \
    "$HEARTH" run -m "$first" -p hi -n 1 -c 4096
stderr_has "not enough memory: the weights need .* MiB resident and the KV pool .* MiB, .* in all, but 3.0 MiB is available (HEARTH_MEMORY_LIMIT)" \
    "both sizes and the limit are named"
stderr_has "a smaller context (-c) needs less" "what to do is said"
expect_status 0 "a pool that fits" -- env HEARTH_MEMORY_LIMIT=64M "$HEARTH" run -m "$first" -p hi -n 1 -c 256
expect_status 1 "a malformed HEARTH_MEMORY_LIMIT" -- env HEARTH_MEMORY_LIMIT=lots "$HEARTH" run -m "$first" -p hi -n 1
stderr_has "HEARTH_MEMORY_LIMIT='lots' is not a byte count" "the variable is named"

finish

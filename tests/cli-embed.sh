#!/bin/sh
# cli-embed.sh -- hearth embed: the vectors of micro-qwen3-embedding
# (tools/gen-model: qwen3 pooled at the last token, EOS added to the
# input) against tests/oracle-forward.py's pooled hidden states, in F32
# and F16 (cosine at least 0.99999) and Q8_0 and Q4_0 against the F32
# model (the weights' rounding: at least 0.999 and 0.9 on this model,
# whose weights are spread to make every rounding show; see
# hearth-embed(1)); the output
# formats, inputs from arguments, files and standard input, --pooling,
# --no-normalize, the same vectors alone and batched, and the errors with
# their exit statuses.  The oracle checks skip (the rest runs) where NumPy
# is missing, unless CI is set.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data models/micro-llama-Q8_0.gguf

gen="${HEARTH_BUILDDIR:-.}/tools/gen-model"
oracle="${HEARTH_SRCDIR:-.}/tests/oracle-forward.py"
python=
for p in ${PYTHON3:-} python3 /usr/bin/python3; do
    if "$p" -c 'import numpy' 2>/dev/null; then python=$p; break; fi
done
if [ -z "$python" ] && [ -n "${CI:-}" ]; then
    fail "NumPy (python3-numpy) is needed for the embedding oracle"
fi

model="$tmpdir/emb-f32.gguf"
for t in F32 F16 Q8_0 Q4_0; do
    if ! "$gen" --shape micro-qwen3-embedding --type "$t" --threads 2 "$tmpdir/emb-$(echo $t | tr A-Z a-z).gguf" \
        2>"$tmpdir/gen.err"; then
        cat "$tmpdir/gen.err" >&2
        fail "gen-model writes micro-qwen3-embedding in $t"
        finish
    fi
done

"$HEARTH" inspect "$model" >"$tmpdir/inspect" 2>&1
grep -q "qwen3.pooling_type" "$tmpdir/inspect" && pass "the file declares its pooling" ||
    fail "the file declares its pooling"
grep -q "pooling  *last (an embedding model" "$tmpdir/inspect" && pass "inspect names the pooling" ||
    fail "inspect names the pooling"

# the texts, as the oracle's token ids (the vocabulary adds BOS and EOS)
printf '%s\n' "hello world" "the quick brown fox jumps over the lazy dog" "a" \
    "embeddings of many words in one line of text" >"$tmpdir/lines"
expect_status 0 "tokenize" -- "$HEARTH" tokenize -m "$model" --ids "a"
last=$(awk '{ print $NF }' "$tmpdir/out")
[ "$last" = 2 ] && pass "the input ends with EOS (add_eos_token)" || fail "the input ends with EOS, not $last"

if [ -n "$python" ]; then
    for t in f32 f16 q8_0 q4_0; do
        case $t in
        f32 | f16) min=0.99999 ;;
        q8_0) min=0.999 ;;
        q4_0) min=0.9 ;;
        esac
        while IFS= read -r text; do
            "$HEARTH" embed -m "$tmpdir/emb-$t.gguf" --format tsv -t 2 "$text" >"$tmpdir/vec" 2>"$tmpdir/err" ||
                { cat "$tmpdir/err" >&2; fail "$t: hearth embed '$text'"; continue; }
            ids=$("$HEARTH" tokenize -m "$model" --ids "$text")
            # shellcheck disable=SC2086
            if "$python" "$oracle" --embed --min-cos "$min" "$model" "$tmpdir/vec" $ids >"$tmpdir/o" 2>&1; then
                sed "s/^/ok: $t: /" "$tmpdir/o"
            else
                cat "$tmpdir/o" >&2
                fail "$t: the vector of '$text' agrees with the oracle (cosine >= $min)"
            fi
        done <"$tmpdir/lines"
    done
    # mean and CLS pooling forced, and a vector left as it is
    for opt in "--pooling mean" "--pooling cls" "--no-normalize"; do
        # shellcheck disable=SC2086
        "$HEARTH" embed -m "$model" --format tsv $opt "the quick brown fox" >"$tmpdir/vec" 2>"$tmpdir/err" ||
            { cat "$tmpdir/err" >&2; fail "hearth embed $opt"; continue; }
        ids=$("$HEARTH" tokenize -m "$model" --ids "the quick brown fox")
        # shellcheck disable=SC2086
        if "$python" "$oracle" --embed $opt "$model" "$tmpdir/vec" $ids >"$tmpdir/o" 2>&1; then
            sed "s/^/ok: $opt: /" "$tmpdir/o"
        else
            cat "$tmpdir/o" >&2
            fail "$opt: the vector agrees with the oracle"
        fi
    done
else
    echo "skip: NumPy is not installed: no oracle checks"
fi

# Batched or alone, the same bytes: each line alone, then all lines in one
# run with small steps (prompts in chunks beside each other).
expect_status 0 "lines from a file, JSON lines" -- "$HEARTH" embed -m "$model" -f "$tmpdir/lines" --format jsonl -b 5
cp "$tmpdir/out" "$tmpdir/batched"
[ "$(wc -l <"$tmpdir/batched")" -eq 4 ] && pass "one line per input" || fail "one line per input"
: >"$tmpdir/alone"
while IFS= read -r text; do
    "$HEARTH" embed -m "$model" --format jsonl "$text" >>"$tmpdir/alone" 2>/dev/null || fail "alone: '$text'"
done <"$tmpdir/lines"
cmp -s "$tmpdir/alone" "$tmpdir/batched" && pass "the same vectors alone and batched" ||
    fail "the vectors batched differ from those alone"
expect_status 0 "standard input" -- sh -c "\"\$HEARTH\" embed -m \"$model\" --format jsonl -b 5 <\"$tmpdir/lines\""
cmp -s "$tmpdir/out" "$tmpdir/batched" && pass "standard input is read like a file" ||
    fail "standard input gives other vectors"
printf 'hello world\r\na\r\n' >"$tmpdir/crlf"
expect_status 0 "CRLF lines" -- "$HEARTH" embed -m "$model" --format jsonl -f "$tmpdir/crlf"
sed -n 1p "$tmpdir/batched" >"$tmpdir/want"
sed -n 3p "$tmpdir/batched" >>"$tmpdir/want"
cmp -s "$tmpdir/out" "$tmpdir/want" && pass "a carriage return ends a line" || fail "CRLF lines embed their text"

# the formats: one JSON array of arrays; tab-separated lines
expect_status 0 "json" -- "$HEARTH" embed -m "$model" "hello world" "a"
if [ -n "$python" ]; then
    "$python" -c 'import json, sys; v = json.load(open(sys.argv[1])); assert len(v) == 2 and len(v[0]) == 256' \
        "$tmpdir/out" && pass "json: an array of 2 arrays of 256" || fail "json: an array of arrays"
fi
expect_status 0 "tsv" -- "$HEARTH" embed -m "$model" --format tsv "hello world" "a"
awk -F '\t' 'NF != 256 { bad = 1 } END { exit bad || NR != 2 }' "$tmpdir/out" && pass "tsv: 2 lines of 256 fields" ||
    fail "tsv: 2 lines of 256 fields"
# unit length by default
awk -F '\t' '{ s = 0; for (i = 1; i <= NF; i++) s += $i * $i; if (s < 0.9999 || s > 1.0001) bad = 1 } END { exit bad }' \
    "$tmpdir/out" && pass "unit length" || fail "the vectors have unit length"

# errors: usage 2, failures 1
expect_status 2 "an unknown format" -- "$HEARTH" embed -m "$model" --format xml "a"
grep -q "json, jsonl or tsv" "$tmpdir/err" || fail "the formats are named"
expect_status 2 "an unknown pooling" -- "$HEARTH" embed -m "$model" --pooling max "a"
expect_status 2 "arguments and -f" -- "$HEARTH" embed -m "$model" -f "$tmpdir/lines" "a"
expect_status 2 "no model" -- "$HEARTH" embed "a"
printf 'one\n\nthree\n' >"$tmpdir/empty-line"
expect_status 1 "an empty line" -- "$HEARTH" embed -m "$model" -f "$tmpdir/empty-line"
grep -q "line 2 is empty" "$tmpdir/err" || fail "the empty line is named"
expect_status 1 "no input" -- sh -c "\"\$HEARTH\" embed -m \"$model\" </dev/null"
grep -q "no input" "$tmpdir/err" || fail "no input is named"
expect_status 1 "longer than the context" -- "$HEARTH" embed -m "$model" -c 8 "a" "a longer line of words"
grep -q "argument 2 has [0-9]* tokens, more than the context of 8" "$tmpdir/err" ||
    fail "the input past the context is named"
expect_status 1 "a generative model" -- "$HEARTH" embed -m "$HEARTH_TEST_DATA/models/micro-llama-Q8_0.gguf" "a"
grep -q "not an embedding model" "$tmpdir/err" || fail "a model without pooling is refused, saying why"
expect_status 0 "a generative model with --pooling" -- \
    "$HEARTH" embed -m "$HEARTH_TEST_DATA/models/micro-llama-Q8_0.gguf" --pooling mean --format tsv "a"
expect_status 1 "a missing file" -- "$HEARTH" embed -m "$model" -f "$tmpdir/none"
finish

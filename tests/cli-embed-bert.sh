#!/bin/sh
# cli-embed-bert.sh -- the encoders (bert, nomic-bert) in hearth embed:
# the vectors of micro-bert (learned positions, GELU, pooled at [CLS])
# and micro-nomic-bert (rotary positions, fused q/k/v, SwiGLU, mean
# pooling) that tools/gen-model writes, with their synthetic WordPiece
# vocabularies, against tests/oracle-forward.py's encoder (cosine at
# least 0.99999 in F32 and F16); [CLS] and [SEP] around the input; the
# same vectors alone and batched beside each other in small steps; and
# the refusals: generating with an encoder (hearth run), an input longer
# than a step or than bert's positions.  The oracle checks skip (the rest
# runs) where NumPy is missing, unless CI is set.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"

gen="${HEARTH_BUILDDIR:-.}/tools/gen-model"
oracle="${HEARTH_SRCDIR:-.}/tests/oracle-forward.py"
python=
for p in ${PYTHON3:-} python3 /usr/bin/python3; do
    if "$p" -c 'import numpy' 2>/dev/null; then python=$p; break; fi
done
if [ -z "$python" ] && [ -n "${CI:-}" ]; then
    fail "NumPy (python3-numpy) is needed for the embedding oracle"
fi

printf '%s\n' "hello world" "The quick brown fox jumps over the lazy dog." "a" \
    "Embeddings read the whole input, in both directions!" "naïve CAFÉ, 中文 and 12345 (qq)" >"$tmpdir/lines"

for shape in micro-bert micro-nomic-bert; do
    for t in F32 F16; do
        if ! "$gen" --shape "$shape" --type "$t" --threads 2 "$tmpdir/$shape-$t.gguf" 2>"$tmpdir/gen.err"; then
            cat "$tmpdir/gen.err" >&2
            fail "gen-model writes $shape in $t"
            finish
        fi
    done
    model="$tmpdir/$shape-F32.gguf"
    expect_status 0 "$shape: tokenize" -- "$HEARTH" tokenize -m "$model" --ids "hello world"
    ids=$(cat "$tmpdir/out")
    case "$ids" in
    "101 "*" 102") pass "$shape: [CLS] ... [SEP] around the input" ;;
    *) fail "$shape: [CLS] ... [SEP] around the input, not '$ids'" ;;
    esac
    if [ -n "$python" ]; then
        for t in F32 F16; do
            while IFS= read -r text; do
                "$HEARTH" embed -m "$tmpdir/$shape-$t.gguf" --format tsv -t 2 "$text" >"$tmpdir/vec" 2>"$tmpdir/err" ||
                    { cat "$tmpdir/err" >&2; fail "$shape $t: hearth embed '$text'"; continue; }
                ids=$("$HEARTH" tokenize -m "$model" --ids "$text")
                # shellcheck disable=SC2086
                if "$python" "$oracle" --embed --min-cos 0.99999 "$tmpdir/$shape-$t.gguf" "$tmpdir/vec" $ids \
                    >"$tmpdir/o" 2>&1; then
                    sed "s/^/ok: $shape $t: /" "$tmpdir/o"
                else
                    cat "$tmpdir/o" >&2
                    fail "$shape $t: the vector of '$text' agrees with the oracle (cosine >= 0.99999)"
                fi
            done <"$tmpdir/lines"
        done
        # a forced pooling
        "$HEARTH" embed -m "$model" --format tsv --pooling mean "the quick brown fox" >"$tmpdir/vec" 2>"$tmpdir/err" ||
            { cat "$tmpdir/err" >&2; fail "$shape: hearth embed --pooling mean"; }
        ids=$("$HEARTH" tokenize -m "$model" --ids "the quick brown fox")
        # shellcheck disable=SC2086
        "$python" "$oracle" --embed --pooling mean "$model" "$tmpdir/vec" $ids >"$tmpdir/o" 2>&1 &&
            sed "s/^/ok: $shape --pooling mean: /" "$tmpdir/o" ||
            { cat "$tmpdir/o" >&2; fail "$shape: --pooling mean agrees with the oracle"; }
    else
        echo "skip: NumPy is not installed: no oracle checks"
    fi

    # alone and batched (several inputs in one step, -b just above the longest)
    : >"$tmpdir/alone"
    while IFS= read -r text; do
        "$HEARTH" embed -m "$model" --format jsonl -t 2 "$text" >>"$tmpdir/alone" 2>/dev/null || fail "alone: '$text'"
    done <"$tmpdir/lines"
    expect_status 0 "$shape: batched" -- "$HEARTH" embed -m "$model" -f "$tmpdir/lines" --format jsonl -b 32 -t 2
    cmp -s "$tmpdir/alone" "$tmpdir/out" && pass "$shape: the same vectors alone and batched" ||
        fail "$shape: the vectors batched differ from those alone"
    expect_status 0 "$shape: one at a time" -- "$HEARTH" embed -m "$model" -f "$tmpdir/lines" --format jsonl \
        --parallel 1 -t 2
    cmp -s "$tmpdir/alone" "$tmpdir/out" && pass "$shape: the same vectors one at a time" ||
        fail "$shape: the vectors one at a time differ"

    # refusals
    expect_status 1 "$shape: hearth run" -- "$HEARTH" run -m "$model" -n 4 -p "hello"
    grep -q "embedding model" "$tmpdir/err" && pass "$shape: generating is refused, saying why" ||
        { cat "$tmpdir/err" >&2; fail "$shape: generating is refused, saying why"; }
    expect_status 1 "$shape: an input longer than a step" -- "$HEARTH" embed -m "$model" -b 8 "a b c d e f g h i j"
    grep -q "in one step of at most 8 tokens" "$tmpdir/err" && pass "$shape: the step's limit is named" ||
        { cat "$tmpdir/err" >&2; fail "$shape: the step's limit is named"; }
done

# bert's learned positions: 512
long=$(awk 'BEGIN { for (i = 0; i < 600; i++) printf "a "; }')
expect_status 1 "micro-bert: an input past its positions" -- \
    "$HEARTH" embed -m "$tmpdir/micro-bert-F32.gguf" -c 1024 -b 1024 "$long"
grep -q "has positions for 512" "$tmpdir/err" && pass "micro-bert: its positions are named" ||
    { cat "$tmpdir/err" >&2; fail "micro-bert: its positions are named"; }
finish

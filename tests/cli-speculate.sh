#!/bin/sh
# cli-speculate.sh -- hearth run with speculative decoding: the reference
# greedy story with a draft model (the model itself, and another of the
# same vocabulary; with the confidence limit learned and fixed) and with
# prompt lookup, the speculation statistics, and
# the usage errors of the options.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data models/stories260K.gguf models/micro-llama-Q8_0.gguf reference/stories260K-greedy.txt

m="$HEARTH_TEST_DATA/models/stories260K.gguf"
other="$HEARTH_TEST_DATA/models/micro-llama-Q8_0.gguf"
ref="$HEARTH_TEST_DATA/reference/stories260K-greedy.txt"
sed -n '/^--- output/,$p' "$ref" | tail -n +2 | sed '1s/^<s> //' > "$tmpdir/want"

# (-md alone learns where to stop drafting; --draft-p-min fixes it)
for opts in "-md $m --draft-fixed --draft-max 5" "-md $m" "-md $other --draft-p-min 0" "-md $other" \
            "-md $other --draft-p-min 0.75" "--lookup 3" "--lookup 1 --draft-fixed --draft-max 4 --draft-min 2"; do
    # shellcheck disable=SC2086
    expect_status 0 "greedy story, $opts" -- "$HEARTH" run -m "$m" -p "Once upon a time" -n 100 --temp 0 $opts
    cmp -s "$tmpdir/want" "$tmpdir/out" || { fail "greedy output with $opts differs from the reference"; diff "$tmpdir/want" "$tmpdir/out" >&2; }
    grep -q "speculation (.*): [0-9]* drafted, [0-9]* accepted (alpha [0-9.]*), [0-9.]* tokens per model step" "$tmpdir/err" ||
        { fail "no speculation statistics with $opts"; cat "$tmpdir/err" >&2; }
done
# the model drafting for itself: every drafted token is kept
"$HEARTH" run -m "$m" -p "Once upon a time" -n 60 --temp 0 -md "$m" --draft-fixed --draft-max 4 --draft-p-min 0 \
    >/dev/null 2>"$tmpdir/err"
grep -q "speculation (draft model): \([0-9]*\) drafted, \1 accepted (alpha 1.000)" "$tmpdir/err" ||
    { fail "the model as its own draft does not keep every token"; cat "$tmpdir/err" >&2; }
# a sampled run speculates and finishes
expect_status 0 "sampled, lookup" -- "$HEARTH" run -m "$m" -p "Once upon a time" -n 50 --seed 3 --lookup 2
expect_status 0 "sampled, draft" -- "$HEARTH" run -m "$m" -p "Once upon a time" -n 50 --seed 3 -md "$other"

expect_status 2 "-md and --lookup together" -- "$HEARTH" run -m "$m" -p x -md "$m" --lookup 2
grep -q "one of -md FILE, --lookup N and --mtp" "$tmpdir/err" || fail "-md with --lookup: message"
expect_status 2 "--draft-max without a drafter" -- "$HEARTH" run -m "$m" -p x --draft-max 4
expect_status 2 "--draft-min above --draft-max" -- "$HEARTH" run -m "$m" -p x --lookup 2 --draft-max 2 --draft-min 3
expect_status 2 "--lookup 0" -- "$HEARTH" run -m "$m" -p x --lookup 0
expect_status 2 "--draft-p-min 2" -- "$HEARTH" run -m "$m" -p x -md "$m" --draft-p-min 2
expect_status 1 "a missing draft model" -- "$HEARTH" run -m "$m" -p x -md "$tmpdir/none.gguf"
grep -q "draft model:" "$tmpdir/err" || fail "a missing draft model: message"
"$HEARTH" run --help | grep -q -- "--draft-p-min" || fail "run --help lacks the speculation options"
finish

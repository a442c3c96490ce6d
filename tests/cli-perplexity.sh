#!/bin/sh
# cli-perplexity.sh -- hearth perplexity -c 128 on every model of the
# reference table: within 0.5% of the reference value for F32, F16 and
# BF16 files, within 2% for quantized files.  Models of architectures
# this build does not run yet are reported and skipped.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data reference/perplexity-GPL-3-c128.tsv text/GPL-3.txt

text="$HEARTH_TEST_DATA/text/GPL-3.txt"
grep -v '^#' "$HEARTH_TEST_DATA/reference/perplexity-GPL-3-c128.tsv" | while IFS="$(printf '\t')" read -r model want; do
    [ -n "$model" ] || continue
    case "$model" in
        *-f32.gguf|*-F16.gguf|*-BF16.gguf|stories260K.gguf) tol=0.005 ;;
        *) tol=0.02 ;;
    esac
    if ! "$HEARTH" perplexity -m "$HEARTH_TEST_DATA/models/$model" -f "$text" -c 128 \
            >"$tmpdir/out" 2>"$tmpdir/err"; then
        # the table also lists models of architectures still to come
        if grep -q "architecture '.*' is not supported" "$tmpdir/err"; then
            echo "skip: $model: $(sed -n "s/.*\(architecture '[^']*'\).*/\1/p" "$tmpdir/err") is not supported yet"
            continue
        fi
        echo "FAIL: $model: hearth perplexity failed" >&2
        cat "$tmpdir/err" >&2
        echo x >> "$tmpdir/failures"
        continue
    fi
    got=$(sed -n 's/^Final estimate: PPL = \([0-9.]*\) .*/\1/p' "$tmpdir/out")
    if awk -v g="$got" -v w="$want" -v t="$tol" 'BEGIN { d = (g - w) / w; if (d < 0) d = -d; exit !(g != "" && d <= t) }'; then
        echo "ok: $model: $got (reference $want)"
    else
        echo "FAIL: $model: perplexity '$got', reference $want, tolerance $tol" >&2
        echo x >> "$tmpdir/failures"
    fi
done
[ -f "$tmpdir/failures" ] && tests_failed=$(wc -l < "$tmpdir/failures")

# Errors: a text shorter than two chunks, no text.
printf 'Too short.\n' > "$tmpdir/short.txt"
expect_status 1 "text too short" -- "$HEARTH" perplexity -m "$HEARTH_TEST_DATA/models/stories260K.gguf" -f "$tmpdir/short.txt" -c 128
grep -q "at least 256" "$tmpdir/err" || fail "short text is explained"
expect_status 2 "no text" -- "$HEARTH" perplexity -m "$HEARTH_TEST_DATA/models/stories260K.gguf"

# Every line on stderr is the command's: "hearth: perplexity: ...".
expect_status 0 "one thread" -- "$HEARTH" perplexity -m "$HEARTH_TEST_DATA/models/stories260K.gguf" -f "$text" \
    -c 128 -t 1
if grep -v "^hearth: perplexity: " "$tmpdir/err" | grep -q .; then
    fail "every diagnostic starts with 'hearth: perplexity:'"
    grep -v "^hearth: perplexity: " "$tmpdir/err" | head -n 3 >&2
fi
grep -q ", 1 thread$" "$tmpdir/err" || fail "1 thread, not 1 threads"
finish

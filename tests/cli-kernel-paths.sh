#!/bin/sh
# cli-kernel-paths.sh -- perplexity of the shared models on every kernel
# path this processor runs (HEARTH_CPU=scalar, avx2, avx512, ...), each
# against the scalar reference path on the same chunks.  cli-perplexity.sh
# checks the default path against the reference values on the whole text;
# this checks that every other path gives the same answer: identical for
# the integer formats up to the float work around them.  That work (the
# attention over the F16 cache, whose vector kernels agree with the scalar
# one within rounding, not bit for bit) moves the perplexity of these
# random-weight files, which amplify a rounding difference into a changed
# prediction, by up to about half a per cent (micro-llama-Q5_0 on AVX-512:
# 0.51%; with an F32 cache the paths give its scalar value exactly), so
# within 1% for every file.  Short runs (the first chunks of the text) keep
# the scalar path affordable.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data text/GPL-3.txt models/stories260K.gguf models/micro-llama-Q4_K_M.gguf

text="$HEARTH_TEST_DATA/text/GPL-3.txt"
chunks=3

# The paths this build and processor run: those HEARTH_CPU accepts.
paths=''
for p in scalar avx2 avx512 avx512vnni neon neon-dotprod; do
    got=$(HEARTH_CPU=$p "$HEARTH" --version -v 2>/dev/null | sed -n 's/^kernels: //p')
    [ "$got" = "$p" ] && paths="$paths $p"
done
case "$paths" in
    " scalar"*) pass "paths available:$paths" ;;
    *) fail "the scalar path is not available (paths:$paths)" ;;
esac

ppl() { # ppl PATH MODEL: the perplexity of the first chunks, or nothing
    HEARTH_CPU=$1 "$HEARTH" perplexity -m "$2" -f "$text" -c 128 --chunks "$chunks" \
        2>"$tmpdir/err" | sed -n 's/^Final estimate: PPL = \([0-9.]*\) .*/\1/p'
}

for f in "$HEARTH_TEST_DATA"/models/stories260K.gguf "$HEARTH_TEST_DATA"/models/micro-llama-*.gguf \
         "$HEARTH_TEST_DATA"/models/micro-qwen2-Q4_K_M.gguf "$HEARTH_TEST_DATA"/models/micro-qwen2-F16.gguf; do
    [ -e "$f" ] || continue
    name=${f##*/}
    want=$(ppl scalar "$f")
    if [ -z "$want" ]; then
        fail "$name: perplexity failed on the scalar path"; sed 's/^/  stderr: /' "$tmpdir/err" >&2
        continue
    fi
    for p in $paths; do
        [ "$p" = scalar ] && continue
        got=$(ppl "$p" "$f")
        if awk -v g="$got" -v w="$want" 'BEGIN { d = (g - w) / w; if (d < 0) d = -d; exit !(g != "" && d <= 0.01) }'; then
            pass "$name: $p $got, scalar $want"
        else
            fail "$name: $p gives perplexity '$got', the scalar path $want"
            sed 's/^/  stderr: /' "$tmpdir/err" >&2
        fi
    done
done
finish

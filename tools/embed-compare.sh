#!/bin/sh
# embed-compare.sh -- hearth embed against another engine's embedding
# program on random-weight encoder models (tools/gen-model): for each
# shape and type, each text is embedded by both (each tokenizing it with
# the model's own vocabulary, pooling as the file says, vectors scaled to
# unit length) and their cosine similarity printed; exit 1 when one is
# below the minimum (default 0.99999).  Not a test: the other engine is
# not needed to build or check hearth.
#
#   tools/embed-compare.sh [-s "SHAPE..."] [-t "TYPE..."] [-m MIN] HEARTH REF-EMBEDDING
#
# REF-EMBEDDING is called as: REF -m MODEL -p TEXT --embd-output-format json
# --embd-normalize 2 -t 2 --no-warmup (the options of llama.cpp's
# llama-embedding), printing an OpenAI-style list whose "embedding" line
# holds the vector.
set -u
shapes="micro-bert micro-nomic-bert"
types="F32 F16"
min=0.99999
while getopts s:t:m: opt; do
    case $opt in
    s) shapes=$OPTARG ;;
    t) types=$OPTARG ;;
    m) min=$OPTARG ;;
    *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
hearth=$1
ref=$2
gen="$(dirname "$0")/gen-model"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

bad=0
for shape in $shapes; do
    for type in $types; do
        model="$tmp/$shape-$type.gguf"
        "$gen" --shape "$shape" --type "$type" --threads 2 "$model" 2>"$tmp/gen.err" ||
            { cat "$tmp/gen.err" >&2; exit 1; }
        for text in "hello world" "The quick brown fox jumps over the lazy dog." "a" \
            "Embedding models read the whole input at once, in both directions!" \
            "tokens, punctuation; and 12345 numbers (in parentheses)"; do
            "$hearth" embed -m "$model" --format tsv -t 2 "$text" >"$tmp/hearth" 2>"$tmp/err" ||
                { cat "$tmp/err" >&2; bad=1; continue; }
            # (its output, written by a logging thread, is now and then cut short at
            # exit: up to ten tries)
            for try in 1 2 3 4 5 6 7 8 9 10; do
                "$ref" -m "$model" -p "$text" --embd-output-format json --embd-normalize 2 -t 2 --no-warmup \
                    >"$tmp/ref.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; bad=1; continue 2; }
                grep -q '"embedding": *\[.*\]' "$tmp/ref.json" && break
            done
            sed -n 's/.*"embedding": *\[\(.*\)\].*/\1/p' "$tmp/ref.json" | tr ',' ' ' >"$tmp/ref"
            cos=$(awk 'NR == FNR { for (i = 1; i <= NF; i++) a[i] = $i; n = NF; next }
                       { for (i = 1; i <= NF; i++) { d += a[i] * $i; x += a[i] * a[i]; y += $i * $i } m = NF }
                       END { if (n != m || x == 0 || y == 0) print "nan"; else printf "%.9f", d / sqrt(x * y) }' \
                "$tmp/hearth" "$tmp/ref")
            ok=$(awk -v c="$cos" -v m="$min" 'BEGIN { print (c != "nan" && c + 0 >= m) ? "ok" : "LOW" }')
            [ "$ok" = ok ] || bad=1
            printf '%-18s %-4s cosine %s %s  %s\n' "$shape" "$type" "$cos" "$ok" "$text"
        done
    done
done
exit $bad

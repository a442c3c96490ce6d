#!/bin/sh
# bench-compare.sh -- hearth bench and the reference engine's benchmark tool
# side by side, on the same model files, with the same thread count,
# interleaved so that a change in machine load hits both alike; plus the
# machine's streaming-read memory bandwidth and the decode speed limit it
# implies (bandwidth / bytes of weights).  Writes a Markdown report on
# standard output and progress on standard error.  See BENCHMARKS.md.
#
# usage: tools/bench-compare.sh --ref PATH/llama-bench [options] [MODEL...]
#   --ref PATH      the reference benchmark tool (required)
#   --hearth PATH   the hearth program (default: src/hearth of this tree)
#   --gen-dir DIR   with no MODEL given: benchmark TinyLlama-shaped random
#                   models in DIR (Q4_0, Q8_0, Q4_K_M), generating any that
#                   are missing with tools/gen-model
#   --vocab FILE    vocabulary for generated models (see tools/gen-model)
#   -t N            threads for both tools (default: all processors)
#   -p N, -n N      prompt and generation lengths (default 512 and 128)
#   --rounds N      rounds per model and test (default 3); each round runs
#                   both tools, in alternating order
#   --reps N        measured runs per tool invocation (default 3); medians
#                   are taken over rounds x reps runs
#   --membw PATH    the bandwidth probe (default: tools/membw of this tree)
#   --cpu PATH      hearth's kernel path (HEARTH_CPU: scalar, avx2, ...;
#                   default: the best this processor runs)
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
ref='' hearth="$here/src/hearth" gen_dir='' vocab='' membw="$here/tools/membw"
threads=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
n_prompt=512 n_gen=128 rounds=3 reps=3

die() { echo "bench-compare: $*" >&2; exit 2; }
say() { echo "bench-compare: $*" >&2; }

while [ $# -gt 0 ]; do
    case $1 in
    --ref) ref=$2; shift 2 ;;
    --hearth) hearth=$2; shift 2 ;;
    --gen-dir) gen_dir=$2; shift 2 ;;
    --vocab) vocab=$2; shift 2 ;;
    --membw) membw=$2; shift 2 ;;
    --cpu) HEARTH_CPU=$2; export HEARTH_CPU; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -p) n_prompt=$2; shift 2 ;;
    -n) n_gen=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    -*) die "unknown option $1" ;;
    *) break ;;
    esac
done
[ -n "$ref" ] || die "--ref PATH/llama-bench is required"
[ -x "$ref" ] || die "$ref is not an executable"
[ -x "$hearth" ] || die "$hearth is not an executable (build hearth first)"
if [ "$rounds" -lt 1 ] || [ "$reps" -lt 1 ]; then die "--rounds and --reps must be positive"; fi
[ $((rounds * reps)) -ge 3 ] || die "at least 3 runs per test are needed for a median"

if [ $# -eq 0 ]; then
    [ -n "$gen_dir" ] || die "give MODEL files or --gen-dir DIR"
    mkdir -p "$gen_dir"
    for type in Q4_0 Q8_0 Q4_K_M; do
        f="$gen_dir/tinyllama-1.1b-$type.gguf"
        if [ ! -s "$f" ]; then
            say "generating $f"
            "$here/tools/gen-model" --shape tinyllama-1.1b --type "$type" \
                ${vocab:+--vocab "$vocab"} "$f" 2>/dev/null || die "gen-model failed for $f"
        fi
        set -- "$@" "$f"
    done
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-compare.XXXXXX")
trap 'rm -rf "$work"' EXIT

load() { cut -d, -f1 /proc/loadavg 2>/dev/null | awk '{print $1}' || uptime; }

# samples_ts of every test in a JSON output, one number per line.
samples() {
    tr -d '\n' < "$1" | sed 's/"samples_ts"/\n&/g' | sed -n 's/^"samples_ts": *\[\([^]]*\)\].*/\1/p' |
        tr ',' '\n' | tr -d ' '
}

# median, minimum and maximum of the numbers in a file
stats() {
    sort -g "$1" | awk '{v[NR] = $1} END {
        if (NR == 0) { print "- - -"; exit }
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.2f %.2f %.2f\n", m, v[1], v[NR] }'
}

# run TOOL MODEL TEST OUT: one invocation, samples appended to OUT
run() {
    tool=$1 model=$2 test=$3 out=$4
    case $test in
    pp) args="-p $n_prompt -n 0" ;;
    tg) args="-p 0 -n $n_gen" ;;
    esac
    if [ "$tool" = hearth ]; then
        # shellcheck disable=SC2086
        "$hearth" bench -m "$model" $args -t "$threads" -r "$reps" -o json -q > "$work/json" ||
            die "hearth bench failed on $model"
    else
        # shellcheck disable=SC2086
        "$ref" -m "$model" $args -t "$threads" -r "$reps" -o json > "$work/json" 2>/dev/null ||
            die "$ref failed on $model"
    fi
    # one number per line, the last one too (the JSON may end without a
    # newline), so that the samples of successive runs never run together
    samples "$work/json" | awk 'NF' >> "$out"
}

load_before=$(load)
say "load average before: $load_before"

# The bound uses the best of one thread and all of them: one core may
# already draw all the bandwidth there is.
bw_report='' bandwidth=''
if [ -x "$membw" ]; then
    say "measuring memory bandwidth"
    "$membw" -t "1,$threads" -r 10 > "$work/membw"
    bw_report=$(awk '{printf("%s%s thread%s %s GB/s", (NR > 1 ? ", " : ""), $2 + 0, ($2 + 0 == 1 ? "" : "s"), $3)}' "$work/membw")
    bandwidth=$(awk '$3 > best {best = $3} END {print best}' "$work/membw")
fi

rows=
for model in "$@"; do
    [ -s "$model" ] || die "$model: no such model file"
    "$hearth" bench -m "$model" -p 0 -n 1 -r 1 -t 1 -o json -q > "$work/info" ||
        die "hearth cannot load $model"
    desc=$(sed -n 's/.*"model_type": "\(.*\)",$/\1/p' "$work/info" | head -1)
    bytes=$(sed -n 's/.*"model_size": \([0-9]*\),$/\1/p' "$work/info" | head -1)
    kernels=$(sed -n 's/.*"kernels": "\(.*\)",$/\1/p' "$work/info" | head -1)
    for test in pp tg; do
        : > "$work/hearth-$test"
        : > "$work/ref-$test"
        r=1
        while [ "$r" -le "$rounds" ]; do
            say "$(basename "$model") $test round $r/$rounds (load $(load))"
            if [ $((r % 2)) -eq 1 ]; then
                run hearth "$model" "$test" "$work/hearth-$test"
                run ref "$model" "$test" "$work/ref-$test"
            else
                run ref "$model" "$test" "$work/ref-$test"
                run hearth "$model" "$test" "$work/hearth-$test"
            fi
            r=$((r + 1))
        done
        read -r h_med h_min h_max <<STATS
$(stats "$work/hearth-$test")
STATS
        read -r r_med r_min r_max <<STATS
$(stats "$work/ref-$test")
STATS
        if [ "$test" = pp ]; then name=pp$n_prompt; else name=tg$n_gen; fi
        ratio=$(awk -v h="$h_med" -v r="$r_med" 'BEGIN { if (r > 0) printf "%.2f", h / r; else print "-" }')
        bound=-
        if [ "$test" = tg ] && [ -n "$bandwidth" ] && [ -n "$bytes" ]; then
            bound=$(awk -v bw="$bandwidth" -v b="$bytes" 'BEGIN { printf "%.1f", bw * 1e9 / b }')
        fi
        size=$(awk -v b="$bytes" 'BEGIN { printf (b < 2^30 ? "%.2f MiB" : "%.2f GiB"), (b < 2^30 ? b / 2^20 : b / 2^30) }')
        rows="$rows| $desc | $size | $name | $h_med ($h_min-$h_max) | $r_med ($r_min-$r_max) | $ratio | $bound |
"
    done
done
load_after=$(load)

cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo "?")
mem=$(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo 2>/dev/null || echo "?")

cat <<EOF
## hearth vs reference, $(date -u +%Y-%m-%d)

- machine: ${cpu:-unknown CPU}, $cores processors online, $mem memory
- hearth: $("$hearth" --version | head -1), kernels: ${kernels:-?}
- reference: $ref
- threads: $threads; $rounds rounds x $reps runs per tool and test, interleaved
- load average: $load_before before, $load_after after
- streaming-read memory bandwidth, best of 10 passes: ${bw_report:-not measured}

| model | size | test | hearth t/s median (min-max) | reference t/s median (min-max) | hearth/ref | decode bound t/s |
| --- | ---: | ---: | ---: | ---: | ---: | ---: |
$rows
The decode bound is bandwidth / bytes of weights: every generated token
reads every weight once.
EOF

#!/bin/sh
# bench-compare.sh -- hearth bench and one or more reference benchmark
# tools (llama.cpp's llama-bench of any release, ik_llama.cpp's) side by
# side, on the same model files, with the same thread count, interleaved
# so that a change in machine load hits all alike; plus the machine's
# streaming-read memory bandwidth, the decode speed limit it implies
# (bandwidth / bytes of weights) and each engine's fraction of it.
# Writes a Markdown report on standard output and progress on standard
# error.  See BENCHMARKS.md.
#
# usage: tools/bench-compare.sh --ref [NAME=]PATH[' ARGS'] [--ref ...] [options] [MODEL...]
#   --ref SPEC      a reference benchmark tool (at least one; repeatable):
#                   PATH, or NAME=PATH, followed by arguments of its own
#                   in the same word, e.g. --ref 'ik-rtr=ik/llama-bench -rtr 1'
#                   (NAME defaults to ref1, ref2, ...)
#   --hearth PATH   the hearth program (default: src/hearth of this tree)
#   --gen-dir DIR   with no MODEL given: benchmark TinyLlama-shaped random
#                   models in DIR (Q4_0, Q8_0, Q4_K_M), generating any that
#                   are missing with tools/gen-model
#   --vocab FILE    vocabulary for generated models (see tools/gen-model)
#   -t N            threads for every tool (default: all processors)
#   -p N, -n N      prompt and generation lengths (default 512 and 128;
#                   0 leaves that test out)
#   -d N            tokens already in the cache when each test starts
#                   (default 0; llama-bench's -d)
#   --cache-type T  KV cache type for every tool (f16, q8_0; the
#                   references get -ctk T -ctv T)
#   --rounds N      rounds per model and test (default 3); each round runs
#                   every tool, starting with a different one each round
#   --reps N        measured runs per tool invocation (default 3); medians
#                   are taken over rounds x reps runs
#   --membw PATH    the bandwidth probe (default: tools/membw of this tree)
#   --cpu PATH      hearth's kernel path (HEARTH_CPU: scalar, avx2, ...;
#                   default: the best this processor runs)
# A reference that fails a test (an option it lacks, a file it cannot
# load) is reported as failed in its column, with its error on standard
# error; the other columns are still measured.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
nref=0 hearth="$here/src/hearth" gen_dir='' vocab='' membw="$here/tools/membw"
threads=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
n_prompt=512 n_gen=128 depth=0 cache_type='' rounds=3 reps=3

die() { echo "bench-compare: $*" >&2; exit 2; }
say() { echo "bench-compare: $*" >&2; }

while [ $# -gt 0 ]; do
    case $1 in
    --ref)
        [ $# -ge 2 ] || die "--ref needs a value"
        nref=$((nref + 1))
        case ${2%% *} in
        *=*) name=${2%%=*} spec=${2#*=} ;;
        *) name=ref$nref spec=$2 ;;
        esac
        case $name in
        ''|*[!A-Za-z0-9._-]*) die "--ref $2: the name '$name' is not letters, digits, '.', '_' or '-'" ;;
        esac
        eval "ref_name_$nref=\$name ref_spec_$nref=\$spec"
        shift 2 ;;
    --hearth) hearth=$2; shift 2 ;;
    --gen-dir) gen_dir=$2; shift 2 ;;
    --vocab) vocab=$2; shift 2 ;;
    --membw) membw=$2; shift 2 ;;
    --cpu) HEARTH_CPU=$2; export HEARTH_CPU; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -p) n_prompt=$2; shift 2 ;;
    -n) n_gen=$2; shift 2 ;;
    -d) depth=$2; shift 2 ;;
    --cache-type) cache_type=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    -*) die "unknown option $1" ;;
    *) break ;;
    esac
done
[ "$nref" -ge 1 ] || die "--ref PATH/llama-bench is required (at least one)"
i=1
while [ "$i" -le "$nref" ]; do
    eval "spec=\$ref_spec_$i"
    tool=${spec%% *}
    [ -x "$tool" ] || die "$tool is not an executable"
    i=$((i + 1))
done
[ -x "$hearth" ] || die "$hearth is not an executable (build hearth first)"
for v in "$n_prompt" "$n_gen" "$depth" "$rounds" "$reps" "$threads"; do
    case $v in ''|*[!0-9]*) die "'$v' is not a whole number" ;; esac
done
if [ "$rounds" -lt 1 ] || [ "$reps" -lt 1 ]; then die "--rounds and --reps must be positive"; fi
[ "$n_prompt" -gt 0 ] || [ "$n_gen" -gt 0 ] || die "-p 0 and -n 0 leave nothing to measure"
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

# run INDEX MODEL TEST OUT: one invocation of tool INDEX (0: hearth, 1..:
# the references), samples appended to OUT; a reference's failure writes
# "failed" there and its error to standard error.
run() {
    idx=$1 model=$2 test=$3 out=$4
    case $test in
    pp) args="-p $n_prompt -n 0" ;;
    tg) args="-p 0 -n $n_gen" ;;
    esac
    [ "$depth" -gt 0 ] && args="$args -d $depth"
    if [ "$idx" -eq 0 ]; then
        [ -n "$cache_type" ] && args="$args --cache-type $cache_type"
        # shellcheck disable=SC2086
        "$hearth" bench -m "$model" $args -t "$threads" -r "$reps" -o json -q > "$work/json" ||
            die "hearth bench failed on $model"
    else
        eval "spec=\$ref_spec_$idx name=\$ref_name_$idx"
        [ -n "$cache_type" ] && args="$args -ctk $cache_type -ctv $cache_type"
        # shellcheck disable=SC2086
        if ! $spec -m "$model" $args -t "$threads" -r "$reps" -o json > "$work/json" 2> "$work/err"; then
            say "$name failed on $(basename "$model") $test: $(tail -n 3 "$work/err" | tr '\n' ' ')"
            echo failed >> "$out"
            return 0
        fi
    fi
    # one number per line, the last one too (the JSON may end without a
    # newline), so that the samples of successive runs never run together
    samples "$work/json" | awk 'NF' >> "$out"
}

# cell FILE: "median (min-max)", or "failed" when a run of it failed
cell() {
    if grep -q '^failed$' "$1"; then echo failed; return; fi
    stats "$1" | awk '{ if ($1 == "-") print "-"; else printf "%s (%s-%s)\n", $1, $2, $3 }'
}
# median FILE: the median, or "-"
median() {
    if grep -q '^failed$' "$1"; then echo -; return; fi
    stats "$1" | awk '{print $1}'
}

load_before=$(load)
say "load average before: $load_before"

# The bound uses the best of one thread and all of them: one core may
# already draw all the bandwidth there is.
bw_report='' bandwidth=''
if [ -x "$membw" ]; then
    say "measuring memory bandwidth"
    if [ "$threads" -eq 1 ]; then tlist=1; else tlist="1,$threads"; fi
    "$membw" -t "$tlist" -r 10 > "$work/membw"
    bw_report=$(awk '{printf("%s%s thread%s %s GB/s", (NR > 1 ? ", " : ""), $2 + 0, ($2 + 0 == 1 ? "" : "s"), $3)}' "$work/membw")
    bandwidth=$(awk '$3 > best {best = $3} END {print best}' "$work/membw")
fi

tests=
[ "$n_prompt" -gt 0 ] && tests=pp
[ "$n_gen" -gt 0 ] && tests="$tests tg"
ntools=$((nref + 1))
rows=
for model in "$@"; do
    [ -s "$model" ] || die "$model: no such model file"
    "$hearth" bench -m "$model" -p 0 -n 1 -r 1 -t 1 -o json -q > "$work/info" ||
        die "hearth cannot load $model"
    desc=$(sed -n 's/.*"model_type": "\(.*\)",$/\1/p' "$work/info" | head -1)
    bytes=$(sed -n 's/.*"model_size": \([0-9]*\),$/\1/p' "$work/info" | head -1)
    kernels=$(sed -n 's/.*"kernels": "\(.*\)",$/\1/p' "$work/info" | head -1)
    for test in $tests; do
        i=0
        while [ "$i" -lt "$ntools" ]; do : > "$work/out-$i-$test"; i=$((i + 1)); done
        r=1
        while [ "$r" -le "$rounds" ]; do
            say "$(basename "$model") $test round $r/$rounds (load $(load))"
            # each round starts with the next tool in turn
            k=0
            while [ "$k" -lt "$ntools" ]; do
                i=$(((r - 1 + k) % ntools))
                run "$i" "$model" "$test" "$work/out-$i-$test"
                k=$((k + 1))
            done
            r=$((r + 1))
        done
        if [ "$test" = pp ]; then name=pp$n_prompt; else name=tg$n_gen; fi
        [ "$depth" -gt 0 ] && name="$name @ d$depth"
        bound=-
        if [ "$test" = tg ] && [ -n "$bandwidth" ] && [ -n "$bytes" ]; then
            bound=$(awk -v bw="$bandwidth" -v b="$bytes" 'BEGIN { printf "%.1f", bw * 1e9 / b }')
        fi
        size=$(awk -v b="$bytes" 'BEGIN { printf (b < 2^30 ? "%.2f MiB" : "%.2f GiB"), (b < 2^30 ? b / 2^20 : b / 2^30) }')
        # each tool's cell and median once; then hearth's ratio to each
        # reference and every tool's fraction of the decode bound
        cells= ratios= fr=
        i=0
        while [ "$i" -lt "$ntools" ]; do
            cells="$cells $(cell "$work/out-$i-$test") |"
            med=$(median "$work/out-$i-$test")
            if [ "$i" -eq 0 ]; then
                h_med=$med
            else
                ratios="$ratios $(awk -v h="$h_med" -v r="$med" \
                    'BEGIN { if (h != "-" && r != "-" && r > 0) printf "%.2f", h / r; else print "-" }') |"
            fi
            if [ "$bound" != - ] && [ "$depth" -eq 0 ]; then
                fr="$fr${fr:+, }$(awk -v m="$med" -v b="$bound" \
                    'BEGIN { if (m == "-") print "-"; else printf "%.0f%%", 100 * m / b }')"
            fi
            i=$((i + 1))
        done
        row="| $desc | $size | $name |$cells$ratios"
        rows="$rows$row $bound | ${fr:--} |
"
    done
done
load_after=$(load)

cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo "?")
mem=$(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo 2>/dev/null || echo "?")

head="| model | size | test | hearth t/s median (min-max) |" sep="| --- | ---: | ---: | ---: |"
ratio_head= refs_line=
i=1
while [ "$i" -le "$nref" ]; do
    eval "name=\$ref_name_$i spec=\$ref_spec_$i"
    head="$head $name t/s |"; ratio_head="$ratio_head hearth/$name |"; sep="$sep ---: | ---: |"
    refs_line="$refs_line
- $name: \`$spec\`"
    i=$((i + 1))
done
head="$head$ratio_head"
head="$head decode bound t/s | of the bound (hearth, then each reference) |"; sep="$sep ---: | ---: |"

cat <<EOF
## hearth against the references, $(date -u +%Y-%m-%d)

- machine: ${cpu:-unknown CPU}, $cores processors online, $mem memory
- hearth: $("$hearth" --version | head -1), kernels: ${kernels:-?}$refs_line
- threads: $threads; $rounds rounds x $reps runs per tool and test, interleaved
- depth: $depth tokens in the cache before each test; KV cache: ${cache_type:-each tool's default}
- load average: $load_before before, $load_after after
- streaming-read memory bandwidth, best of 10 passes: ${bw_report:-not measured}

$head
$sep
$rows
The decode bound is bandwidth / bytes of weights: every generated token
reads every weight once (at depth 0; the cache adds its own reads there).
EOF

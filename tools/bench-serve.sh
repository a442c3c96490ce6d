#!/bin/sh
# bench-serve.sh -- the same streaming load against `hearth serve` and the
# reference engine's server, on one model file with the same thread count
# and as many sequences at once as there are clients, one server after the
# other (alternating the order between rounds); prints both results and
# their ratio hearth/reference (above 1 for tokens/s means hearth is
# faster; below 1 for TTFT and TPOT means hearth is faster).  The load
# itself is tools/loadtest.py; see its --help.
#
# usage: tools/bench-serve.sh --ref PATH/llama-server -m MODEL [options]
#                             [-- extra loadtest.py options]
#   --ref PATH      the reference server program (required)
#   --hearth PATH   the hearth program (default: src/hearth of this tree)
#   --hearth-opt OPT  one more option for `hearth serve` (repeatable), e.g.
#                   --hearth-opt --prefill-share=0.5
#   -m MODEL        the GGUF file both servers load
#   -t N            threads for both servers (default: all processors)
#   -c N            concurrent clients = sequences at once (-np) (default 8)
#   -p N, -g N      prompt tokens and max_tokens per request (default 128, 64)
#   --ctx N         context per sequence (default: p + g rounded up to 256);
#                   the reference server gets -c N*clients, as it splits its
#                   context among its slots
#   -n N            requests per server and round (default 4 per client)
#   -d SECONDS      or: send for this many seconds per server and round
#   --rate R        open loop at R requests/s instead of closed loop
#   --rounds N      rounds (default 1); medians over rounds are reported
#   --json FILE     also write the results as JSON
#   --log-dir DIR   server logs (default: $TMPDIR or /tmp)
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
ref='' hearth="$here/src/hearth" model='' hopts=''
threads=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
clients=8 prompt=128 gen=64 ctx='' requests='' duration='' rate='' rounds=1 json=''
log_dir=${TMPDIR:-/tmp}

die() { echo "bench-serve: $*" >&2; exit 2; }
q() { printf "'%s'" "$(printf %s "$1" | sed "s/'/'\\\\''/g")"; }

while [ $# -gt 0 ]; do
    case $1 in
    --ref) ref=$2; shift 2 ;;
    --hearth) hearth=$2; shift 2 ;;
    --hearth-opt) hopts="$hopts $(q "$2")"; shift 2 ;;
    -m) model=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -c) clients=$2; shift 2 ;;
    -p) prompt=$2; shift 2 ;;
    -g) gen=$2; shift 2 ;;
    --ctx) ctx=$2; shift 2 ;;
    -n) requests=$2; shift 2 ;;
    -d) duration=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    --log-dir) log_dir=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
    esac
done
[ -n "$ref" ] || die "--ref PATH/llama-server is required"
[ -n "$model" ] || die "-m MODEL is required"
[ -f "$model" ] || die "no model file $model"
[ -x "$ref" ] || die "$ref is not a program"
[ -x "$hearth" ] || die "$hearth is not a program"
"$hearth" serve --help >/dev/null 2>&1 || die "$hearth has no serve command"
if [ -z "$ctx" ]; then
    ctx=$(( (prompt + gen + 255) / 256 * 256 ))
fi
ref_ctx=$((ctx * clients))
# The reference server finds its shared libraries beside itself.
ref_dir=$(cd "$(dirname "$ref")" && pwd)

hcmd="exec $(q "$hearth") serve -m $(q "$model") -t $threads -np $clients -c $ctx$hopts --host 127.0.0.1 --port {port}"
rcmd="LD_LIBRARY_PATH=$(q "$ref_dir")\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH} exec $(q "$ref") -m $(q "$model") -t $threads -np $clients -c $ref_ctx --host 127.0.0.1 --port {port}"

set -- -c "$clients" -p "$prompt" -g "$gen" --rounds "$rounds" \
    --server-log "$log_dir/bench-serve.log" \
    --compare "hearth=$hcmd" --compare "reference=$rcmd" "$@"
[ -n "$requests" ] && set -- "$@" -n "$requests"
[ -n "$duration" ] && set -- "$@" -d "$duration"
[ -n "$rate" ] && set -- "$@" --rate "$rate"
[ -n "$json" ] && set -- "$@" --json "$json"

echo "bench-serve: $(basename "$model"), $threads threads, $clients clients/sequences, prompt $prompt, max_tokens $gen, context $ctx per sequence" >&2
exec python3 "$here/tools/loadtest.py" "$@"

#!/bin/sh
# bench-mpi-net.sh -- hearth over two MPI ranks joined by a simulated
# network link, against one process on the same cores: what each layout
# (--pp, and --tp where this hearth has it) costs per token at a given
# link speed and latency, beside what a simple model of its messages
# predicts.  Writes a Markdown report on standard output and progress on
# standard error.  See BENCHMARKS.md ("Several machines") and hearth-mpi(7).
#
# The second rank runs in a network namespace of its own, joined to this
# one by a veth pair; mpirun treats the namespace as a second host (its
# rsh agent enters the namespace), and the ranks talk over TCP on the
# veth addresses only, so neither shared memory nor loopback carries
# their messages.  Each link is shaped on both ends of the pair with
# netem (delay and rate); on a kernel without netem the rate is set with
# tbf and the delay is not simulated, which the report says.  The
# namespace, the pair and their queueing disciplines are made by this
# script and removed when it ends, whatever the outcome; no other
# interface is touched.  Needs root, ip and tc (iproute2), and an MPI
# build of hearth with Open MPI's mpirun.
#
# usage: tools/bench-mpi-net.sh -m MODEL [options]
#   -m FILE         the model (required)
#   --hearth PATH   the hearth program (default: src/hearth of this tree)
#   -t N            threads per rank (default 1); one process gets 2N
#   -p N, -n N      prompt and generation lengths (default 128 and 32)
#   --parallel B    also B sequences at once, hearth bench --parallel
#                   (default 8; 0: not)
#   --links LIST    the links, each RATE[/DELAY] in tc's units, or veth
#                   for the pair unshaped (default: "veth 10gbit/0.1ms
#                   1gbit/0.5ms")
#   --layouts LIST  pp, tp or both (default: those this hearth has)
#   --rounds N      rounds (default 3); each runs every layout on every
#                   link and one process, and the medians are over rounds
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
hearth="$here/src/hearth" model='' threads=1 n_prompt=128 n_gen=32 parallel=8
links="veth 10gbit/0.1ms 1gbit/0.5ms" layouts='' rounds=3

die() { echo "bench-mpi-net: $*" >&2; exit 2; }
say() { echo "bench-mpi-net: $*" >&2; }

while [ $# -gt 0 ]; do
    case $1 in
    -m) model=$2; shift 2 ;;
    --hearth) hearth=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -p) n_prompt=$2; shift 2 ;;
    -n) n_gen=$2; shift 2 ;;
    --parallel) parallel=$2; shift 2 ;;
    --links) links=$2; shift 2 ;;
    --layouts) layouts=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
    esac
done
[ -n "$model" ] || die "-m MODEL is required"
[ -r "$model" ] || die "cannot read $model"
model=$(cd "$(dirname "$model")" && pwd)/$(basename "$model")
case $hearth in /*) ;; *) hearth=$(pwd)/$hearth ;; esac
[ -x "$hearth" ] || die "$hearth is not an executable (build hearth first)"
for v in "$threads" "$n_prompt" "$n_gen" "$parallel" "$rounds"; do
    case $v in ''|*[!0-9]*) die "-t, -p, -n, --parallel and --rounds take whole numbers, not '$v'" ;; esac
done
[ "$threads" -ge 1 ] && [ "$rounds" -ge 1 ] || die "-t and --rounds must be at least 1"
[ "$n_prompt" -ge 1 ] && [ "$n_gen" -ge 1 ] || die "-p and -n must be at least 1"
[ "$(id -u)" -eq 0 ] || die "needs root: it makes a network namespace and a veth pair"
for tool in ip tc mpirun python3; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is not installed"
done
"$hearth" --version -v | grep -q '^features:.* mpi' || die "$hearth is built without MPI"
if [ -z "$layouts" ]; then
    layouts=pp
    "$hearth" bench --help 2>&1 | grep -q -- '--tp' && layouts="pp tp"
fi
for l in $layouts; do
    case $l in
    pp) ;;
    tp) "$hearth" bench --help 2>&1 | grep -q -- '--tp' || die "this hearth has no --tp" ;;
    *) die "unknown layout $l (pp or tp)" ;;
    esac
done
for link in $links; do
    case $link in
    veth|[0-9]*bit|[0-9]*bit/[0-9]*ms|[0-9]*bit/[0-9]*us) ;;
    *) die "link '$link' is not veth or RATE[/DELAY] (e.g. 1gbit/0.5ms)" ;;
    esac
done

# --- the namespace and the pair -------------------------------------------
ns=hbn$$ dev0=hbn$$a dev1=hbn$$b
ip netns list | grep -q "^$ns\b" && die "network namespace $ns exists already"
# a /30 no interface of this machine uses
net='' a0='' a1=''
for third in 213 214 215 216 217; do
    if ! ip -o -4 addr show | grep -q " 10\.213\.$third\."; then
        net=10.213.$third.0/30 a0=10.213.$third.1 a1=10.213.$third.2
        break
    fi
done
[ -n "$net" ] || die "no free 10.213.x.0/30 network for the pair"

tmp=$(mktemp -d)
cleanup() {
    ip link del "$dev0" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$ns"
ip link add "$dev0" type veth peer name "$dev1"
ip link set "$dev1" netns "$ns"
ip addr add "$a0/30" dev "$dev0"
ip link set "$dev0" up
ip netns exec "$ns" ip addr add "$a1/30" dev "$dev1"
ip netns exec "$ns" ip link set "$dev1" up
ip netns exec "$ns" ip link set lo up

# mpirun's rsh agent: the second "host" is the namespace
cat >"$tmp/agent" <<EOF
#!/bin/sh
host=\$1
shift
if [ "\$host" = "$a1" ]; then exec ip netns exec "$ns" sh -c "\$*"; fi
exec sh -c "\$*"
EOF
chmod +x "$tmp/agent"
printf '%s slots=1\n%s slots=1\n' "$a0" "$a1" >"$tmp/hosts"
mpi="mpirun --hostfile $tmp/hosts --mca plm_rsh_agent $tmp/agent --mca btl tcp,self"
mpi="$mpi --mca btl_tcp_if_include $net --mca oob_tcp_if_include $net -x OMP_WAIT_POLICY=passive -np 2"
[ "$(id -u)" -eq 0 ] && mpi="mpirun --allow-run-as-root ${mpi#mpirun }"

netem=yes
tc qdisc add dev "$dev0" root netem delay 1ms 2>/dev/null || netem=no
tc qdisc del dev "$dev0" root 2>/dev/null || true
[ "$netem" = yes ] || say "this kernel has no netem: links get their rate (tbf), not their delay"

# shape LINK: the queueing discipline of both ends
shape() {
    for side in "" "ip netns exec $ns"; do
        d=$dev0
        [ -n "$side" ] && d=$dev1
        $side tc qdisc del dev "$d" root 2>/dev/null || true
        [ "$1" = veth ] && continue
        rate=${1%%/*} delay=
        case $1 in */*) delay=${1#*/} ;; esac
        if [ "$netem" = yes ]; then
            $side tc qdisc add dev "$d" root netem ${delay:+delay $delay} rate "$rate"
        else
            $side tc qdisc add dev "$d" root tbf rate "$rate" burst 256kb latency 100ms
        fi
    done
}

# --- the runs ---------------------------------------------------------------
# results: one line per run, "LAYOUT LINK TEST T/S"
results=$tmp/results
: >"$results"
record() { # LAYOUT LINK JSON-FILE
    python3 - "$1" "$2" "$3" >>"$results" <<'EOF'
import json, sys
layout, link, path = sys.argv[1:4]
rows = json.load(open(path))
for r in rows:
    if "test" in r:
        print(layout, link, r["test"], r["avg_ts"])
    else:  # --parallel: aggregate decode speed of B sequences
        print(layout, link, "B%d_S_TG" % r["n_parallel"], r["speed_tg"])
        print(layout, link, "B%d_S_PP" % r["n_parallel"], r["speed_pp"])
EOF
}
run() { # LAYOUT LINK CMD...: run, keep the JSON, say the failure
    layout=$1 link=$2
    shift 2
    if "$@" >"$tmp/out.json" 2>"$tmp/err"; then
        record "$layout" "$link" "$tmp/out.json"
    else
        say "failed: $*"
        tail -n 5 "$tmp/err" >&2
        exit 1
    fi
}
bench_args="-m $model -p $n_prompt -n $n_gen -r 1 -o json -q"
par_args=''
[ "$parallel" -gt 0 ] && par_args="-m $model --parallel $parallel -p $n_prompt -n $n_gen -r 1 -o json -q"

r=1
while [ "$r" -le "$rounds" ]; do
    say "round $r of $rounds: one process, -t $((2 * threads))"
    run one - "$hearth" bench $bench_args -t $((2 * threads))
    [ -z "$par_args" ] || run one - "$hearth" bench $par_args -t $((2 * threads))
    for link in $links; do
        shape "$link"
        for layout in $layouts; do
            say "round $r of $rounds: --$layout 2 over $link"
            run "$layout" "$link" $mpi "$hearth" bench $bench_args -t "$threads" --"$layout" 2
            [ -z "$par_args" ] || run "$layout" "$link" $mpi "$hearth" bench $par_args -t "$threads" --"$layout" 2
        done
    done
    r=$((r + 1))
done
shape veth

# --- the report ------------------------------------------------------------
# The sizes the link model needs: the width of the hidden rows and of the
# logits, and the layer count.
"$hearth" inspect "$model" >"$tmp/inspect" 2>/dev/null || die "hearth inspect $model failed"
python3 - "$results" "$tmp/inspect" "$netem" "$threads" "$n_prompt" "$n_gen" "$parallel" "$model" "$links" \
    "$layouts" <<'EOF'
import re, statistics, sys
results, inspect, netem, threads, n_prompt, n_gen, parallel, model, links, layouts = sys.argv[1:11]
threads, n_prompt, n_gen, parallel = int(threads), int(n_prompt), int(n_gen), int(parallel)
runs = {}
for line in open(results):
    layout, link, test, ts = line.split()
    runs.setdefault((layout, link, test), []).append(float(ts))
text = open(inspect).read()
def meta(key):
    m = re.search(r"\.%s\s+\S+\s+(\d+)" % key, text)
    return int(m.group(1)) if m else None
n_embd = meta("embedding_length")
m = re.search(r"vocab size\s+(\d+)", text)
n_vocab = int(m.group(1)) if m else None
m = re.search(r"^\s*layers\s+(\d+)", text, re.M)
n_layer = int(m.group(1)) if m else None

def rate_bps(link):
    if link in ("veth", "-"): return None
    rate = link.split("/")[0]
    m = re.fullmatch(r"([\d.]+)([kmgt]?)bit", rate)
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2)]
def delay_s(link):
    if "/" not in link: return 0.0
    d = link.split("/")[1]
    return float(d[:-2]) * (1e-3 if d.endswith("ms") else 1e-6)

tests = ["pp%d" % n_prompt, "tg%d" % n_gen]
if parallel: tests.append("B%d_S_TG" % parallel)
print("# hearth over two ranks and a simulated link\n")
print("Model %s (n_embd %s, vocabulary %s, %s layers); %d thread(s) a rank, one "
      "process %d; medians of %d round(s)." % (model.split("/")[-1], n_embd, n_vocab, n_layer, threads,
                                               2 * threads, len(runs.get(("one", "-", tests[0]), []))))
if netem != "yes":
    print("This kernel has no netem: each link had its rate (tbf) but not its delay, "
          "and the model column leaves the delay out too; a pipeline's step adds twice "
          "the link's delay to that.")
print("ms a token: the inverse of the median speed (of the aggregate speed for B "
      "sequences); over veth: that less the same layout's over the unshaped pair, what "
      "the link added; model: the link's time a token predicted from its rate and delay "
      "(the pipeline's step crosses it twice: the hidden rows one way, the logits back).")
print()
print("| layout | link | test | t/s median (min-max) | vs one process | ms a token | over veth | model |")
print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
def row(layout, link, test):
    v = runs.get((layout, link, test))
    if not v: return
    med = statistics.median(v)
    one = runs.get(("one", "-", test))
    ratio = "%.2f" % (med / statistics.median(one)) if one and layout != "one" else ""
    # link time a token by the model: for the pipeline, each step crosses
    # the link twice (the hidden rows down, the logits back): 2 delays,
    # and per token n_embd + n_vocab floats; decode steps carry one token
    # per sequence, prefill one step of n_prompt tokens with one row of
    # logits.
    model_ms = ""
    bps = rate_bps(link)
    if layout == "pp" and link != "-" and n_embd and n_vocab:
        d = delay_s(link) if netem == "yes" else 0.0
        if test.startswith("tg"):
            t = 2 * d + ((n_embd + n_vocab) * 4 * 8 / bps if bps else 0)
        elif test.startswith("pp"):
            t = (2 * d + ((n_prompt * n_embd + n_vocab) * 4 * 8 / bps if bps else 0)) / n_prompt
        else:
            t = (2 * d + (parallel * (n_embd + n_vocab) * 4 * 8 / bps if bps else 0)) / parallel
        model_ms = "%.3f" % (t * 1e3)
    # what the link added: this link's time a token less the unshaped pair's
    over = ""
    base = runs.get((layout, "veth", test))
    if layout != "one" and link != "veth" and base:
        over = "%.3f" % (1e3 / med - 1e3 / statistics.median(base))
    print("| %s | %s | %s | %.2f (%.2f-%.2f) | %s | %.3f | %s | %s |" % (
        "one process" if layout == "one" else "--%s 2" % layout, link if link != "-" else "",
        test.replace("_", " "), med, min(v), max(v), ratio, 1e3 / med, over, model_ms))
for test in tests:
    row("one", "-", test)
    for link in links.split():
        for layout in layouts.split():
            row(layout, link, test)
EOF

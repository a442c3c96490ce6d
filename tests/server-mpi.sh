#!/bin/sh
# server-mpi.sh -- hearth serve --pp 2 under mpirun (hearth-mpi(7)): rank
# 0 serves, rank 1 runs the later layers; and hearth serve --tp 2, rank 1
# computing half the rows of every matrix.  Greedy completions with
# logprobs, whole, long and streamed, and four at once (the pipeline's
# steps in flight), are those of a one-process server
# bit for bit, on stories260K and on a random-weight llama; a SIGTERM to
# rank 0 drains (its running stream ends whole, the same as one
# process's drained stream) and the job exits 0; rank 1 killed in the
# middle of two streams fails each with a pipeline_failed error naming
# rank 1, /health answers 503 naming it, a new request gets 503, and the
# job exits non-zero within a bound; rank 1 stopped while the server is
# idle turns /health into 503 within --pp-timeout.  With --tp 2 the
# answers are one process's bit for bit too, and rank 1 killed in the
# middle of a stream fails it naming rank 1 within --pp-timeout, as does
# rank 1 stopped while idle.  Over more ranks -- --pp 3 with rank 1
# stopped (SIGSTOP), --pp 2 --tp 2 with rank 3 killed or stopped, where
# rank 0 waits for another rank than the one that failed -- the stream,
# /health and rank 0's log name the rank that failed, and the job exits
# non-zero within a bound.  What a pipeline does not run is refused at
# start-up, exit status 2, naming the options.
# Skipped, saying so, without MPI, mpirun, python3 or the server (a
# failure under CI where MPI and the server are built).
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"

require_data models/stories260K.gguf models/micro-llama-Q4_K_M.gguf
command -v python3 >/dev/null 2>&1 || unavailable "python3 is not installed"
"$HEARTH" serve --help 2>&1 | grep -qi 'no HTTP server' && unavailable "hearth serve is not available"
m260k="$HEARTH_TEST_DATA/models/stories260K.gguf"
llama="$HEARTH_TEST_DATA/models/micro-llama-Q4_K_M.gguf"
client="$HEARTH_SRCDIR/tests/server-mpi.py"

# --- refused before MPI starts: what a pipeline does not serve --------------

expect_status 2 "--pp with two models" -- "$HEARTH" serve -m a="$m260k" -m b="$llama" --port 0 --pp 2
stderr_has "serve: --pp 2: not with --models-dir and -m ALIAS=FILE" "the refusal names the options"
expect_status 2 "--pp with --models-dir" -- "$HEARTH" serve --models-dir "$HEARTH_TEST_DATA/models" --port 0 --pp 2
stderr_has "serve: --pp 2: not with --models-dir" "the refusal names --models-dir"
expect_status 2 "--pp with --cache-dir" -- "$HEARTH" serve -m "$m260k" --port 0 --pp 2 --cache-dir "$tmpdir/c"
stderr_has "serve: --pp 2: not with --cache-dir" "the refusal names --cache-dir"
expect_status 2 "--pp with --keep-alive" -- "$HEARTH" serve -m "$m260k" --port 0 --pp 2 --keep-alive 5m
stderr_has "serve: --pp 2: not with --keep-alive" "the refusal names --keep-alive"
expect_status 2 "--pp with --model-draft" -- "$HEARTH" serve -m "$m260k" --port 0 --pp 2 --model-draft "$m260k"
stderr_has "serve: --pp 2: not with --model-draft" "the refusal names --model-draft"
expect_status 2 "--pp with -ngl" -- "$HEARTH" serve -m "$m260k" --port 0 --pp 2 -ngl 1
stderr_has "serve: --pp 2: not with offloading" "the refusal names offloading"
expect_status 2 "--tp with --model-draft" -- "$HEARTH" serve -m "$m260k" --port 0 --tp 2 --model-draft "$m260k"
stderr_has "serve: --tp 2: not with --model-draft" "the refusal names --tp and --model-draft"
expect_status 2 "--tp 0" -- "$HEARTH" serve -m "$m260k" --port 0 --tp 0
expect_status 2 "--pp 0" -- "$HEARTH" serve -m "$m260k" --port 0 --pp 0
expect_status 2 "--pp-timeout 0" -- "$HEARTH" serve -m "$m260k" --port 0 --pp 2 --pp-timeout 0

require_mpi serve -m "$m260k" --port 0 --pp 2

serve_tracking
mpi_launcher
# A rank that dies on a signal makes Open MPI end the whole job at once
# (rank 0 gets SIGTERM, then SIGKILL); with this, ending it is left to
# rank 0, whose failure is what is checked (hearth-mpi(7), FAILURES).
mpi="$mpi --mca orte_abort_on_non_zero_status 0"

# Each rank writes its pid to $tmpdir/NAME.rankR.pid, then becomes hearth.
cat >"$tmpdir/rank.sh" <<'EOF'
#!/bin/sh
name=$1; shift
echo $$ >"$name.rank$OMPI_COMM_WORLD_RANK.pid.tmp" && mv "$name.rank$OMPI_COMM_WORLD_RANK.pid.tmp" \
    "$name.rank$OMPI_COMM_WORLD_RANK.pid"
exec "$@"
EOF
chmod +x "$tmpdir/rank.sh"

# mpi_start NAME ARGS...: hearth serve --pp 2 (or $layout, over $np
# ranks) under mpirun (its output in $tmpdir/NAME.out and .err); sets
# $pid (mpirun's) and $port once rank 0 listens, and every rank's pid
# file is there.
layout="--pp 2" np=2
mpi_start() {
    name=$1; shift
    $mpi -np $np "$tmpdir/rank.sh" "$tmpdir/$name" "$HEARTH" serve --host 127.0.0.1 --port 0 -t 1 $layout "$@" \
        >"$tmpdir/$name.out" 2>"$tmpdir/$name.err" &
    pid=$!
    pids="$pids $pid"
    port=''
    i=0
    while [ $i -lt 600 ]; do
        port=$(listening_port "$name")
        all=yes r=0
        while [ $r -lt $np ]; do
            [ -f "$tmpdir/$name.rank$r.pid" ] || all=no
            r=$((r + 1))
        done
        [ -n "$port" ] && [ $all = yes ] && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
        i=$((i + 1))
    done
    fail "$name: no 'listening on' line from rank 0"
    sed 's/^/  stderr: /' "$tmpdir/$name.err" >&2
    finish
}

# job_end NAME PID BOUND: wait at most BOUND seconds for the job to end;
# sets $rc (its exit status; 255 when it had to be killed).  It polls:
# a watchdog process killed at once, still holding the script's traps
# before it has started, could run the EXIT trap.
job_end() {
    i=0
    while [ $i -lt $(($3 * 10)) ]; do
        proc_running "$2" || break
        sleep 0.1
        i=$((i + 1))
    done
    if [ $i -ge $(($3 * 10)) ]; then
        kill -KILL "$2" 2>/dev/null
        wait "$2"
        rc=255
    else
        wait "$2"
        rc=$?
    fi
    if grep -Eq 'ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer' "$tmpdir/$1.err"; then
        fail "$1: sanitizer report"
        sed 's/^/  stderr: /' "$tmpdir/$1.err" >&2
    fi
}

# client WHAT ARGS...: the checks of server-mpi.py; its output in $tmpdir/client.log
client() {
    if python3 "$client" "$@" >"$tmpdir/client.log" 2>&1; then return 0; fi
    sed 's/^/  client: /' "$tmpdir/client.log" >&2
    return 1
}

# --- the same answers as one process -----------------------------------------

# same_answers MODEL LAYOUT WHAT: the answers of the server on $port
# (client answers) are those of one process, bit for bit
same_answers() {
    if client answers "$port" "$tmpdir/$1.$2.json"; then
        if cmp -s "$tmpdir/$1.one.json" "$tmpdir/$1.$2.json"; then
            pass "$1 $3: the text and logprobs of one process, bit for bit (whole, long, streamed)"
        else
            fail "$1 $3: the answers differ from one process's"
        fi
    else
        fail "$1 $3: the requests failed"
    fi
}


for model in stories260K micro-llama; do
    file=$m260k
    [ "$model" = micro-llama ] && file=$llama
    serve_start "$model-one" -m "$file" -c 512
    client answers "$port" "$tmpdir/$model.one.json" || fail "$model: one process's answers"
    # the one-process server takes SIGTERM in the middle of a stream
    echo "$pid" >"$tmpdir/$model-one.rank0.pid"
    client drain "$port" "$tmpdir/$model-one.rank0.pid" "$tmpdir/$model.one-drain.json" ||
        fail "$model: one process's drained stream"
    job_end "$model-one" "$pid" 60
    [ "$rc" -eq 0 ] || fail "$model: one process exits $rc after its drain"

    mpi_start "$model-pp" -m "$file" -c 512
    pp_pid=$pid
    same_answers "$model" pp "over 2 ranks"
    grep -q "pipeline rank 0 of 2: layers" "$tmpdir/$model-pp.err" || fail "$model: rank 0 names its layers"
    # SIGTERM to rank 0 in the middle of a stream: it ends whole, then the job
    if client drain "$port" "$tmpdir/$model-pp.rank0.pid" "$tmpdir/$model.pp-drain.json" &&
        cmp -s "$tmpdir/$model.one-drain.json" "$tmpdir/$model.pp-drain.json"; then
        pass "$model over 2 ranks: SIGTERM drains, the running stream ends whole and the same"
    else
        fail "$model over 2 ranks: the stream running at SIGTERM differs or failed"
    fi
    job_end "$model-pp" "$pp_pid" 60
    if [ "$rc" -eq 0 ]; then pass "$model over 2 ranks: the job exits 0 after the drain"
    else fail "$model over 2 ranks: the job exits $rc after the drain"; tail -n 20 "$tmpdir/$model-pp.err" >&2; fi
done

# health.py PORT: /health turns 503 naming rank 1 within 30 s
cat >"$tmpdir/health.py" <<'EOF'
import json, sys, time, urllib.request, urllib.error
for _ in range(300):
    try:
        urllib.request.urlopen("http://127.0.0.1:" + sys.argv[1] + "/health", timeout=10)
    except urllib.error.HTTPError as e:
        h = json.load(e)
        if e.code == 503 and h.get("status") == "error" and "rank 1" in h.get("error", ""):
            print(json.dumps(h))
            sys.exit(0)
        sys.exit("/health: %d %r" % (e.code, h))
    time.sleep(0.1)
sys.exit("/health still answers 200")
EOF

# --- tensor parallel: the same answers, and a rank that dies -------------------

layout="--tp 2"
for model in stories260K micro-llama; do
    file=$m260k
    [ "$model" = micro-llama ] && file=$llama
    mpi_start "$model-tp" -m "$file" -c 512
    tp_pid=$pid
    same_answers "$model" tp "with --tp 2"
    grep -q "tensor-parallel rank 0 of 2" "$tmpdir/$model-tp.err" || fail "$model: rank 0 names its share"
    kill -TERM "$(cat "$tmpdir/$model-tp.rank0.pid")"
    job_end "$model-tp" "$tp_pid" 60
    [ "$rc" -eq 0 ] || fail "$model with --tp 2: the job exits $rc after SIGTERM"
done

mpi_start dies-tp -m "$m260k" -c 2048 --pp-timeout 3 --grace 5
dies_pid=$pid
if client kill "$port" "$tmpdir/dies-tp.rank1.pid"; then
    pass "--tp 2, rank 1 killed mid-stream: the stream fails naming rank 1, /health and new requests get 503"
else
    fail "--tp 2, rank 1 killed mid-stream"
    sed 's/^/  stderr: /' "$tmpdir/dies-tp.err" >&2
fi
job_end dies-tp "$dies_pid" 60
if [ "$rc" -ne 0 ] && [ "$rc" -ne 255 ]; then pass "--tp 2, rank 1 killed: the job exits non-zero ($rc) by itself"
else fail "--tp 2, rank 1 killed: the job's exit status is $rc (255: it did not end within 60 s)"; fi

# rank 1 stopped while the server is idle: the check through the ranks
# (rank 0 to its tensor-parallel rank and back) finds it
mpi_start stops-tp -m "$m260k" -c 512 --pp-timeout 2 --grace 30
stops_pid=$pid
kill -STOP "$(cat "$tmpdir/stops-tp.rank1.pid")"
if python3 "$tmpdir/health.py" "$port" >"$tmpdir/client.log" 2>&1; then
    pass "--tp 2, rank 1 stopped: the idle server's /health answers 503 naming rank 1"
else
    fail "--tp 2, rank 1 stopped: /health"
    sed 's/^/  client: /' "$tmpdir/client.log" >&2
fi
kill -TERM "$(cat "$tmpdir/stops-tp.rank0.pid")"
job_end stops-tp "$stops_pid" 60
if [ "$rc" -ne 0 ] && [ "$rc" -ne 255 ]; then pass "--tp 2, rank 1 stopped: the job exits non-zero ($rc)"
else fail "--tp 2, rank 1 stopped: the job's exit status is $rc (255: it did not end within 60 s)"; fi
kill -KILL "$(cat "$tmpdir/stops-tp.rank1.pid")" 2>/dev/null
layout="--pp 2"

# --- a rank that dies ----------------------------------------------------------

mpi_start dies -m "$m260k" -c 2048 --pp-timeout 3 --grace 5
dies_pid=$pid
if client kill "$port" "$tmpdir/dies.rank1.pid"; then
    pass "rank 1 killed mid-stream: the stream fails naming the pipeline, /health and new requests get 503"
else
    fail "rank 1 killed mid-stream"
    sed 's/^/  stderr: /' "$tmpdir/dies.err" >&2
fi
# the pipeline's timeout, the grace, and Open MPI's own end of the job
job_end dies "$dies_pid" 60
if [ "$rc" -ne 0 ] && [ "$rc" -ne 255 ]; then pass "rank 1 killed: the job exits non-zero ($rc) by itself"
else fail "rank 1 killed: the job's exit status is $rc (255: it did not end within 60 s)"; fi
grep -q "serve: failed: pipeline: .*rank 1" "$tmpdir/dies.err" || fail "rank 0's log names the failure"

# --- a rank that stops answering while the server is idle ------------------------

mpi_start stops -m "$m260k" -c 512 --pp-timeout 2 --grace 30
stops_pid=$pid
kill -STOP "$(cat "$tmpdir/stops.rank1.pid")"
if python3 "$tmpdir/health.py" "$port" >"$tmpdir/client.log" 2>&1; then
    pass "rank 1 stopped: the idle server's /health answers 503 naming rank 1"
else
    fail "rank 1 stopped: /health"
    sed 's/^/  client: /' "$tmpdir/client.log" >&2
fi
# rank 0 ends at SIGTERM, before its grace runs out, and ends the job
kill -TERM "$(cat "$tmpdir/stops.rank0.pid")"
job_end stops "$stops_pid" 60
if [ "$rc" -ne 0 ] && [ "$rc" -ne 255 ]; then pass "rank 1 stopped: the job exits non-zero ($rc)"
else fail "rank 1 stopped: the job's exit status is $rc (255: it did not end within 60 s)"; fi
kill -KILL "$(cat "$tmpdir/stops.rank1.pid")" 2>/dev/null

# --- more ranks: the error names the rank that failed ------------------------

# fault NAME LAYOUT NP RANK SIGNAL: over NP ranks, rank RANK killed
# (SIGNAL KILL) or stopped (STOP) in the middle of a stream fails the
# stream naming it; /health answers 503 naming it, a new request gets
# 503, and the job exits non-zero within a bound.  Rank 0 waits for the
# last stage's leader, not necessarily the rank that failed: once its
# wait times out it checks every rank, and names the one that does not
# answer.
fault() {
    name=$1 layout=$2 np=$3
    mpi_start "$name" -m "$m260k" -c 2048 --pp-timeout 3 --grace 5
    job=$pid
    if client kill "$port" "$tmpdir/$name.rank$4.pid" "$4" "$5"; then
        pass "$layout, rank $4 (SIG$5) mid-stream: the stream fails naming rank $4, /health and new requests get 503"
    else
        fail "$layout, rank $4 (SIG$5) mid-stream"
        sed 's/^/  stderr: /' "$tmpdir/$name.err" >&2
    fi
    job_end "$name" "$job" 60
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 255 ]; then pass "$layout, rank $4 (SIG$5): the job exits non-zero ($rc)"
    else fail "$layout, rank $4 (SIG$5): the job's exit status is $rc (255: it did not end within 60 s)"; fi
    grep -q "serve: failed: pipeline: .*rank $4\b" "$tmpdir/$name.err" || fail "$layout: rank 0's log names rank $4"
    kill -KILL "$(cat "$tmpdir/$name.rank$4.pid")" 2>/dev/null
    layout="--pp 2" np=2
}

# a middle rank of a pipeline stopped: rank 0 waits for rank 2
fault stops-pp3 "--pp 3" 3 1 STOP
# the second stage's other rank, killed or stopped: rank 0 waits for its
# leader, rank 2, which waits for it in a gather
fault dies-pp2tp2 "--pp 2 --tp 2" 4 3 KILL
fault stops-pp2tp2 "--pp 2 --tp 2" 4 3 STOP

finish

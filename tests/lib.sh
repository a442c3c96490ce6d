# lib.sh -- helpers for the end-to-end shell tests of the hearth program.
# Sourced by tests/cli-*.sh; $HEARTH, $HEARTH_TEST_DATA and $HEARTH_SRCDIR
# come from the test environment set up in tests/local.mk.

set -u

: "${HEARTH:=./src/hearth}"
tests_failed=0
tmpdir=$(mktemp -d "${TMPDIR:-/tmp}/hearth-test.XXXXXX")
trap 'rm -rf "$tmpdir"' EXIT

fail() {
    echo "FAIL: $*" >&2
    tests_failed=$((tests_failed + 1))
}

pass() {
    echo "ok: $*"
}

# unavailable WHY...: skip the whole script (exit 77) because something it
# needs is missing, unless CI is set, in which case that is a failure.
unavailable() {
    if [ -n "${CI:-}" ]; then
        echo "FAIL: $* and CI is set" >&2
        exit 1
    fi
    echo "SKIP: $*" >&2
    exit 77
}

# require_data FILE...: skip the whole script (exit 77) when shared data is
# missing, unless CI is set, in which case that is a failure.
require_data() {
    for f in "$@"; do
        if [ ! -e "$HEARTH_TEST_DATA/$f" ]; then
            if [ -n "${CI:-}" ]; then
                echo "FAIL: shared test data $HEARTH_TEST_DATA/$f is missing and CI is set" >&2
                exit 1
            fi
            echo "SKIP: shared test data $HEARTH_TEST_DATA/$f is missing" >&2
            exit 77
        fi
    done
}

# require_pcre2: skip the whole script (exit 77) when hearth is built
# without PCRE2, which byte-level BPE vocabularies need.
require_pcre2() {
    "$HEARTH" --version -v | grep -q pcre2 && return 0
    echo "SKIP: hearth is built without PCRE2, which byte-level BPE vocabularies need" >&2
    exit 77
}

# require_node: skip the whole script (exit 77) when node is not installed,
# unless CI is set, in which case that is a failure.
require_node() {
    command -v node >/dev/null 2>&1 && return 0
    if [ -n "${CI:-}" ]; then
        echo "FAIL: node is not installed and CI is set" >&2
        exit 1
    fi
    echo "SKIP: node is not installed" >&2
    exit 77
}

# require_opencl_device: for a build with OpenCL, skip the whole script
# (exit 77) when no OpenCL device is there, unless CI is set, in which case
# that is a failure.
require_opencl_device() {
    "$HEARTH" devices >/dev/null 2>&1 && return 0
    if [ -n "${CI:-}" ]; then
        echo "FAIL: no OpenCL device, the build has OpenCL and CI is set" >&2
        exit 1
    fi
    echo "SKIP: no OpenCL device" >&2
    exit 77
}

# expect_status WANT DESCRIPTION -- COMMAND...: run COMMAND, check its exit status.
expect_status() {
    want=$1; desc=$2; shift 3
    "$@" >"$tmpdir/out" 2>"$tmpdir/err"
    got=$?
    if [ "$got" -eq "$want" ]; then pass "$desc"; else
        fail "$desc: exit status $got, expected $want"; sed 's/^/  stderr: /' "$tmpdir/err" >&2
    fi
}

# stderr_has TEXT DESCRIPTION: the last expect_status's standard error
# holds TEXT (a grep pattern).
stderr_has() {
    if grep -q -- "$1" "$tmpdir/err"; then pass "$2"; else
        fail "$2: stderr lacks '$1'"; sed 's/^/  stderr: /' "$tmpdir/err" >&2
    fi
}

# mpi_launcher: set $mpi to the mpirun command the MPI tests start ranks
# with.  The ranks wait for each other polling, not spinning; with more
# ranks than processors they take turns.  Open MPI's components (loaded
# with dlopen, unloaded by MPI_Finalize) leave allocations that
# LeakSanitizer reports and cannot attribute (their frames lie in modules
# already unloaded): in a sanitizer build the ranks run without leak
# detection.  The same code without MPI runs with it in the other tests,
# and every other sanitizer check stays on.
# require_mpi COMMAND...: in a build without MPI, check that COMMAND (a
# hearth command asking for several ranks) exits 1 naming what is
# missing, then skip the script (exit 77, or fail if a check did);
# without mpirun, skip it.
require_mpi() {
    if ! "$HEARTH" --version -v | grep -q '^features:.* mpi'; then
        expect_status 1 "$* in a build without MPI" -- "$HEARTH" "$@"
        grep -q "built without MPI" "$tmpdir/err" || fail "the refusal says the build has no MPI"
        echo "SKIP: hearth is built without MPI (configure --with-mpi)" >&2
        [ "$tests_failed" -eq 0 ] || finish
        exit 77
    fi
    command -v mpirun >/dev/null 2>&1 || unavailable "mpirun is not installed (openmpi-bin)"
}

# kv_bytes: the bytes of (rank 0's) KV cache that the last hearth run -v
# reported in $tmpdir/err
kv_bytes() {
    sed -n 's/^hearth: run: KV cache [A-Z0-9_]*, \([0-9][0-9]*\) bytes .*/\1/p' "$tmpdir/err"
}

mpi_launcher() {
    OMP_WAIT_POLICY=passive; export OMP_WAIT_POLICY
    mpi="mpirun --oversubscribe"
    [ "$(id -u)" -eq 0 ] && mpi="$mpi --allow-run-as-root"
    mpi="$mpi -x ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
}

# npm_install DIR PACKAGE...: install the npm packages into DIR/node_modules
# (a package.json of its own in DIR); skip the whole script (exit 77) when
# node or npm is missing or the npm registry cannot be reached, and fail
# (exit 1) when the install fails otherwise.
npm_install() {
    dir=$1; shift
    command -v node >/dev/null 2>&1 || { echo "SKIP: node is not installed" >&2; exit 77; }
    command -v npm >/dev/null 2>&1 || { echo "SKIP: npm is not installed" >&2; exit 77; }
    mkdir -p "$dir/node_modules"
    echo '{"name": "hearth-test", "private": true}' > "$dir/package.json"
    npm_config_update_notifier=false; export npm_config_update_notifier
    if [ -z "${HOME:-}" ] || [ ! -w "$HOME" ]; then
        npm_config_cache="$tmpdir/npm-cache"; export npm_config_cache
    fi
    if ! (cd "$dir" && timeout 600 npm install --no-audit --no-fund --no-save "$@") \
            >"$tmpdir/npm.log" 2>&1; then
        if grep -Eq 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|network|socket hang up|getaddrinfo' "$tmpdir/npm.log"; then
            sed 's/^/  npm: /' "$tmpdir/npm.log" | tail -n 5 >&2
            echo "SKIP: the npm registry cannot be reached; npm install $* failed" >&2
            exit 77
        fi
        sed 's/^/  npm: /' "$tmpdir/npm.log" >&2
        echo "FAIL: npm install $* failed" >&2
        exit 1
    fi
}

# The scripts that start hearth serve on loopback: serve_tracking kills
# whatever is left of them when the script exits; serve_start NAME
# ARGS... starts one (hearth serve --host 127.0.0.1 --port 0 -t 1 ARGS,
# output in $tmpdir/NAME.out and .err) and sets $pid and $port once its
# "listening on" line is there; serve_stop NAME PID checks that SIGTERM
# ends it with exit status 0 and no sanitizer report.
serve_tracking() {
    pids=''
    trap 'serve_kill_all; rm -rf "$tmpdir"' EXIT
    trap 'exit 130' INT TERM
}

serve_kill_all() {
    for p in $pids; do kill -KILL "$p" 2>/dev/null; done
    pids=''
}

# The port in server NAME's "listening on" line ($tmpdir/NAME.err), or
# nothing while there is none.
listening_port() {
    sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9][0-9]*\).*|\1|p' "$tmpdir/$1.err" 2>/dev/null | head -n 1
}

serve_start() {
    name=$1; shift
    "$HEARTH" serve --host 127.0.0.1 --port 0 -t 1 "$@" >"$tmpdir/$name.out" 2>"$tmpdir/$name.err" &
    pid=$!
    pids="$pids $pid"
    port=''
    i=0
    while [ $i -lt 300 ]; do
        port=$(listening_port "$name")
        [ -n "$port" ] && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
        i=$((i + 1))
    done
    fail "$name server: no 'listening on' line"
    sed 's/^/  stderr: /' "$tmpdir/$name.err" >&2
    finish
}

# Whether process P runs: not gone, not a zombie waiting to be reaped
# (which kill -0 still finds).
proc_running() {
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
    [ -n "$st" ] && [ "$st" != Z ]
}

serve_stop() {
    name=$1 p=$2
    kill -TERM "$p" 2>/dev/null
    # at most 60 s, then SIGKILL; polled here, with no watchdog process: a
    # subshell signalled before it has reset the traps it inherits runs
    # serve_tracking's EXIT trap, which kills the other servers and
    # removes $tmpdir under the script
    i=0
    while [ $i -lt 600 ] && proc_running "$p"; do
        sleep 0.1
        i=$((i + 1))
    done
    kill -KILL "$p" 2>/dev/null
    wait "$p"
    rc=$?
    [ "$rc" -eq 0 ] && pass "$name server: exit status 0 after SIGTERM" ||
        { fail "$name server: exit status $rc after SIGTERM"; tail -n 20 "$tmpdir/$name.err" | sed 's/^/  stderr: /' >&2; }
    if grep -Eq 'ERROR: AddressSanitizer|runtime error:|LeakSanitizer' "$tmpdir/$name.err"; then
        fail "$name server: sanitizer report"
        sed 's/^/  stderr: /' "$tmpdir/$name.err" >&2
    fi
}

finish() {
    if [ "$tests_failed" -ne 0 ]; then
        echo "$tests_failed check(s) failed" >&2
        exit 1
    fi
    exit 0
}

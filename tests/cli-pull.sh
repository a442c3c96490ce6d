#!/bin/sh
# cli-pull.sh -- hearth pull end to end, against a local model hub started
# here (tests/http-server.py): downloads, the cache, resuming, checksums,
# HTTP errors, the hub endpoint variable, stalls, interruption, names
# that must not escape the cache and the parts of split models.  Needs
# libcurl in hearth and python3; skipped without them unless CI is set.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"

"$HEARTH" --version -v | grep -q ' curl' || unavailable "hearth was built without libcurl"
command -v python3 >/dev/null 2>&1 || unavailable "python3 is not installed"
require_data models/stories260K.gguf models/micro-llama-Q4_0.gguf models/micro-llama-Q8_0.gguf \
    models/micro-llama-Q6_K.gguf models/micro-llama-Q5_0.gguf models/micro-qwen2-Q4_0.gguf

# start_hub ROOT NAME: a hub serving ROOT, its port in $tmpdir/NAME.port,
# its requests logged in $tmpdir/NAME.requests; its process id is added
# to $servers
servers=
trap 'kill $servers 2>/dev/null; rm -rf "$tmpdir"' EXIT
start_hub() {
    python3 "$HEARTH_SRCDIR/tests/http-server.py" "$1" "$tmpdir/$2.port" "$tmpdir/$2.requests" \
        2>"$tmpdir/$2.log" &
    servers="$servers $!"
    i=0
    while [ ! -s "$tmpdir/$2.port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    [ -s "$tmpdir/$2.port" ] || { cat "$tmpdir/$2.log" >&2; echo "FAIL: the test server did not start" >&2; exit 1; }
}

models=$HEARTH_TEST_DATA/models
start_hub "$models" server
base=http://127.0.0.1:$(cat "$tmpdir/server.port")
XDG_CACHE_HOME=$tmpdir/cache
HEARTH_HF_ENDPOINT=$base
export XDG_CACHE_HOME HEARTH_HF_ENDPOINT
cache=$XDG_CACHE_HOME/hearth
: >"$tmpdir/server.requests"

# same FILE1 FILE2 DESCRIPTION: the files are identical
same() {
    if cmp -s "$1" "$2"; then pass "$3"; else fail "$3: $1 differs from $2"; fi
}

# requested PATTERN DESCRIPTION: the server saw a request line matching PATTERN
requested() {
    if grep -q "$1" "$tmpdir/server.requests"; then pass "$2"; else
        fail "$2: no request matching '$1'"; sed 's/^/  request: /' "$tmpdir/server.requests" >&2
    fi
}

stdout_is() {
    if [ "$(cat "$tmpdir/out")" = "$1" ]; then pass "$2"; else
        fail "$2: printed '$(cat "$tmpdir/out")', expected '$1'"
    fi
}

absent() {
    if [ -e "$1" ]; then fail "$2: $1 exists"; else pass "$2"; fi
}

# --- a full download, then the cache ----------------------------------------

f=stories260K.gguf
expect_status 0 "download from the hub" -- "$HEARTH" pull -hf test/models:$f
stdout_is "$cache/hf/test/models/$f" "the local path is printed"
same "$cache/hf/test/models/$f" "$models/$f" "the download is the file"
absent "$cache/hf/test/models/$f.part" "no partial file is left"
requested "GET /test/models/resolve/main/$f -" "the hub URL was requested"
requested "GET /cdn/$f -" "the redirect was followed"

: >"$tmpdir/server.requests"
expect_status 0 "second pull" -- "$HEARTH" pull -hf test/models:$f
stdout_is "$cache/hf/test/models/$f" "the second pull prints the same path"
if [ -s "$tmpdir/server.requests" ]; then fail "the second pull made a request"; else
    pass "the second pull is served from the cache"; fi

# --- resuming --------------------------------------------------------------

f=micro-llama-Q4_0.gguf
mkdir -p "$cache/hf/test/models"
head -c 300000 "$models/$f" >"$cache/hf/test/models/$f.part"
expect_status 0 "resume a partial download" -- "$HEARTH" pull -q -hf test/models:$f
same "$cache/hf/test/models/$f" "$models/$f" "the resumed download is the file"
requested "GET /cdn/$f bytes=300000-" "only the missing bytes were asked for"

# A complete .part file: the server answers 416 for the range after its
# end, and the file only needs checking and renaming.
f=micro-llama-Q5_0.gguf
cp "$models/$f" "$cache/hf/test/models/$f.part"
expect_status 0 "a complete partial file" -- "$HEARTH" pull -q -hf test/models:$f
same "$cache/hf/test/models/$f" "$models/$f" "the complete partial file was kept"
requested "GET /cdn/$f bytes=$(wc -c <"$models/$f" | tr -d ' ')-" "the range after its end was asked for"
absent "$cache/hf/test/models/$f.part" "and renamed"

# A .part file longer than the file: the download starts over.
f=micro-llama-Q6_K.gguf
cat "$models/$f" "$models/$f" >"$cache/hf/test/models/$f.part"
expect_status 0 "a partial file longer than the file" -- "$HEARTH" pull -q -hf test/models:$f
same "$cache/hf/test/models/$f" "$models/$f" "the download started over"
requested "GET /cdn/$f -" "the whole file was asked for after the 416"

# A server that ignores Range sends everything again: the partial file
# (here deliberately wrong bytes) must be replaced, not appended to.
mkdir -p "$cache/hf/test/norange"
head -c 300000 "$models/micro-qwen2-Q4_0.gguf" >"$cache/hf/test/norange/$f.part"
expect_status 0 "resume against a server without ranges" -- "$HEARTH" pull -q -hf test/norange:$f
same "$cache/hf/test/norange/$f" "$models/$f" "the whole file replaced the partial one"
requested "GET /test/norange/resolve/main/$f bytes=300000-" "a range was asked for"

# --- checksums ---------------------------------------------------------------

expect_status 1 "a wrong X-Linked-ETag" -- "$HEARTH" pull -hf test/badsum:$f
stderr_has "SHA-256 mismatch" "the mismatch is reported"
absent "$cache/hf/test/badsum/$f" "the bad download does not get the final name"
absent "$cache/hf/test/badsum/$f.part" "the bad download is removed"

expect_status 0 "an ETag with the SHA-256" -- "$HEARTH" pull -q -hf test/etag:$f
same "$cache/hf/test/etag/$f" "$models/$f" "the ETag-checked download is the file"

expect_status 0 "a Repr-Digest" -- "$HEARTH" pull -q --url "$base/digest/$f"
same "$(cat "$tmpdir/out")" "$models/$f" "the Repr-Digest-checked download is the file"
expect_status 1 "a wrong Repr-Digest" -- "$HEARTH" pull -q --url "$base/baddigest/$f"
stderr_has "SHA-256 mismatch" "the Repr-Digest mismatch is reported"
if ls "$cache"/url/*/* 2>/dev/null | grep -q baddigest; then fail "bad file kept"; fi
n=$(find "$cache/url" -type f | wc -l)
[ "$n" -eq 1 ] && pass "only the good URL download is in the cache" || fail "$n files under url/"

# --- errors ----------------------------------------------------------------------

expect_status 1 "a missing file" -- "$HEARTH" pull -hf test/models:missing.gguf
stderr_has "$base/test/models/resolve/main/missing.gguf: HTTP 404 (not found)" \
    "404 is reported with the URL"
absent "$cache/hf/test/models/missing.gguf.part" "nothing is left of a 404"

expect_status 1 "an HTML page instead of a model" -- "$HEARTH" pull -hf test/html:$f
stderr_has "not a GGUF file" "the page is recognised"
absent "$cache/hf/test/html/$f" "the page is not cached"

# --- the endpoint variable and plain URLs ---------------------------------------

f=micro-llama-Q8_0.gguf
: >"$tmpdir/server.requests"
expect_status 0 "HEARTH_HF_ENDPOINT with a path" -- \
    env HEARTH_HF_ENDPOINT="$base/mirror/" "$HEARTH" pull -q -hf test/models:$f
requested "GET /mirror/test/models/resolve/main/$f" "the endpoint's path prefix was used"
same "$cache/hf/test/models/$f" "$models/$f" "the mirrored download is the file"

f=micro-llama-Q6_K.gguf
expect_status 0 "download a URL" -- "$HEARTH" pull -q --url "$base/plain/$f?download=true"
case $(cat "$tmpdir/out") in
"$cache"/url/????????????????/$f) pass "the URL lands under url/HASH/NAME" ;;
*) fail "unexpected URL path $(cat "$tmpdir/out")" ;;
esac
same "$(cat "$tmpdir/out")" "$models/$f" "the URL download is the file"
: >"$tmpdir/server.requests"
expect_status 0 "the same URL again" -- "$HEARTH" pull -q --url "$base/plain/$f?download=true"
[ -s "$tmpdir/server.requests" ] && fail "the second URL pull made a request" || pass "URL cache hit"

# --- stalls, interruption, concurrent pulls ------------------------------------------

f=micro-llama-Q5_0.gguf
start=$(date +%s)
expect_status 1 "a stalled transfer times out" -- "$HEARTH" pull -q --timeout 2 -hf test/stall:$f
elapsed=$(($(date +%s) - start))
stderr_has "no data arrived for 2 seconds" "the stall is reported"
[ "$elapsed" -lt 30 ] && pass "the timeout took ${elapsed}s" || fail "the timeout took ${elapsed}s"
[ -s "$cache/hf/test/stall/$f.part" ] && pass "the partial file is kept for a resume" ||
    fail "no partial file after the stall"

# SIGINT must reach hearth although it runs in the background of a script.
python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' \
    "$HEARTH" pull -q -hf test/stall:$f >"$tmpdir/bg.out" 2>"$tmpdir/bg.err" &
puller=$!
i=0
while ! grep -q "GET /test/stall/resolve/main/$f bytes=" "$tmpdir/server.requests" && [ $i -lt 100 ]; do
    sleep 0.1; i=$((i + 1))
done
sleep 0.5
expect_status 1 "a second pull of a file being downloaded" -- "$HEARTH" pull -q -hf test/stall:$f
stderr_has "another process is downloading" "the concurrent pull is refused"
kill -INT "$puller"
wait "$puller"
status=$?
[ "$status" -eq 130 ] && pass "Ctrl-C exits with 130" || fail "Ctrl-C: exit status $status"
grep -q "interrupted" "$tmpdir/bg.err" && pass "the interruption is reported" ||
    fail "no interruption message: $(cat "$tmpdir/bg.err")"
[ -s "$cache/hf/test/stall/$f.part" ] && pass "the partial file survives Ctrl-C" ||
    fail "the partial file is gone after Ctrl-C"

# --- a split model -----------------------------------------------------------------

# A hub of its own holding the three parts of a model: naming any part
# fetches them all, into one folder of the cache, and prints the first's
# path, which every command that takes a model loads.
gen="${HEARTH_BUILDDIR:-.}/tools/gen-model"
mkdir "$tmpdir/hub"
"$gen" --threads 2 --shape micro-qwen3 --type Q8_0 --split-max-tensors 10 "$tmpdir/hub/tiny-split.gguf" \
    2>"$tmpdir/gen-err" || { fail "gen-model writes a split model"; sed 's/^/  /' "$tmpdir/gen-err" >&2; }
start_hub "$tmpdir/hub" hub
hub2=http://127.0.0.1:$(cat "$tmpdir/hub.port")
: >"$tmpdir/hub.requests"
expect_status 0 "pull a split model by its first part" -- \
    env HEARTH_HF_ENDPOINT="$hub2" "$HEARTH" pull -hf test/models:tiny-split-00001-of-00003.gguf
stdout_is "$cache/hf/test/models/tiny-split-00001-of-00003.gguf" "the first part's path is printed"
for k in 1 2 3; do
    part=tiny-split-0000$k-of-00003.gguf
    same "$cache/hf/test/models/$part" "$tmpdir/hub/$part" "part $k arrives whole"
    grep -q "GET /test/models/resolve/main/$part -" "$tmpdir/hub.requests" || fail "part $k was not asked for"
done
stderr_has "tiny-split-00002-of-00003.gguf (part 2 of 3): " "the progress names the part"
: >"$tmpdir/hub.requests"
expect_status 0 "pull a split model by a later part" -- \
    env HEARTH_HF_ENDPOINT="$hub2" "$HEARTH" pull -q -hf test/models:tiny-split-00003-of-00003.gguf
stdout_is "$cache/hf/test/models/tiny-split-00001-of-00003.gguf" "the first part's path, from the cache"
[ -s "$tmpdir/hub.requests" ] && fail "parts in the cache were fetched again" || pass "the parts come from the cache"
expect_status 0 "run a split model from the hub" -- env HEARTH_HF_ENDPOINT="$hub2" \
    "$HEARTH" run -hf test/models:tiny-split-00001-of-00003.gguf -p "once upon" -n 4 --temp 0 -t 2
expect_status 0 "the repository's split model" -- env HEARTH_HF_ENDPOINT="$hub2" "$HEARTH" pull -q -hf test/only-split
stdout_is "$cache/hf/test/only-split/tiny-split-00001-of-00003.gguf" "the parts count as one model"
[ -f "$cache/hf/test/only-split/tiny-split-00003-of-00003.gguf" ] && pass "its parts came along" ||
    fail "the chosen split model's parts are missing"
rm "$tmpdir/hub/tiny-split-00003-of-00003.gguf"
expect_status 1 "a part missing on the hub" -- env HEARTH_HF_ENDPOINT="$hub2" \
    "$HEARTH" pull -q -hf gone/models:tiny-split-00001-of-00003.gguf
stderr_has "gone/models/resolve/main/tiny-split-00003-of-00003.gguf: HTTP 404" "the missing part's URL is named"

# --- usage ----------------------------------------------------------------------

expect_status 0 "--help" -- "$HEARTH" pull --help
grep -q "usage: hearth pull" "$tmpdir/out" || fail "--help prints the usage on stdout"
expect_status 2 "no source" -- "$HEARTH" pull
expect_status 2 "two sources" -- "$HEARTH" pull -hf a/b:c.gguf --url "$base/plain/x.gguf"
stderr_has "only one of" "two sources are named"
expect_status 2 "an unknown option" -- "$HEARTH" pull --frobnicate
expect_status 2 "an extra argument" -- "$HEARTH" pull -hf a/b:c.gguf extra
expect_status 2 "a bad timeout" -- "$HEARTH" pull --timeout 0 -hf a/b:c.gguf
expect_status 2 "a non-HTTP URL" -- "$HEARTH" pull --url file:///etc/passwd
: >"$tmpdir/server.requests"
for spec in '../x:y.gguf' 'a/..:y.gguf' 'a/b:../../../escaped.gguf' 'a/b:/tmp/escaped.gguf' \
    'a/b:x/../../escaped.gguf' 'a/b:.hidden'; do
    expect_status 2 "rejected spec $spec" -- "$HEARTH" pull -hf "$spec"
done
[ -s "$tmpdir/server.requests" ] && fail "a rejected spec made a request" || pass "rejected specs make no request"

# OWNER/REPO without a file: the listing decides.
expect_status 0 "the repository's Q4_K_M file" -- "$HEARTH" pull -hf test/only-micro-qwen2-Q4
stdout_is "$cache/hf/test/only-micro-qwen2-Q4/micro-qwen2-Q4_K_M.gguf" "the Q4_K_M file is chosen"
same "$cache/hf/test/only-micro-qwen2-Q4/micro-qwen2-Q4_K_M.gguf" "$models/micro-qwen2-Q4_K_M.gguf" \
    "the chosen file arrives whole"
requested "GET /api/models/test/only-micro-qwen2-Q4 " "the listing is asked for"
expect_status 0 "the repository's only GGUF file" -- "$HEARTH" pull -hf test/only-stories
stdout_is "$cache/hf/test/only-stories/stories260K.gguf" "the only GGUF file is chosen"
expect_status 2 "several Q4_K_M files" -- "$HEARTH" pull -hf test/models
stderr_has "test/models has several Q4_K_M GGUF files; name one as test/models:FILE" \
    "the choice is left to the user"
stderr_has "micro-llama-Q4_K_M.gguf" "the candidates are listed"
expect_status 2 "several GGUF files, no Q4_K_M" -- "$HEARTH" pull -hf test/only-Q8_0
stderr_has "none is Q4_K_M" "why none was chosen is said"
expect_status 1 "no GGUF file" -- "$HEARTH" pull -hf test/only-nothing-matches
stderr_has "has no GGUF file" "an empty repository is named"
expect_status 1 "a broken listing" -- "$HEARTH" pull -hf test/badjson
stderr_has "api/models/test/badjson" "the broken listing is named"
expect_status 1 "an unsafe listed name" -- "$HEARTH" pull -hf test/unsafe
stderr_has "not a safe name" "an unsafe listed name is refused"
if find "$tmpdir" -name '*escaped*' | grep -q .; then fail "a file escaped the cache"; else
    pass "nothing escaped the cache"; fi

finish

#!/bin/sh
# cli-bench.sh -- hearth bench: the table layout, the test combinations,
# the CSV and JSON outputs, progress on stderr only, and usage errors.
# Speeds are not checked (no timing in tests), only that they are numbers.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data models/stories260K.gguf

m="$HEARTH_TEST_DATA/models/stories260K.gguf"

expect_status 0 "markdown" -- "$HEARTH" bench -m "$m" -p 16 -n 4 -r 2 -t 1,2
head -1 "$tmpdir/out" | grep -q '^| model  *| *size | *params | backend  *| threads | *test | *t/s |$' ||
    fail "the header has the common tool's columns"
sed -n 2p "$tmpdir/out" | grep -q '^| -* | -*: | -*: | -* | -*: | -*: | -*: |$' ||
    fail "the separator row aligns numbers to the right"
[ "$(grep -c '^| llama ' "$tmpdir/out")" -eq 4 ] || fail "two tests for each of two thread counts"
sed -n 3p "$tmpdir/out" | grep -q '| *1 | *pp16 | *[0-9.]* ± [0-9.]* |$' || fail "row 1: pp16 with 1 thread"
sed -n 4p "$tmpdir/out" | grep -q '| *1 | *tg4 | ' || fail "row 2: tg4 with 1 thread"
sed -n 5p "$tmpdir/out" | grep -q '| *2 | *pp16 | ' || fail "row 3: pp16 with 2 threads"
grep -q '1.12 MiB |  *0.29 M | CPU' "$tmpdir/out" || fail "model size and parameters"
grep -q 'pp16, 1 thread' "$tmpdir/err" || fail "progress on stderr"
grep -q '^| ' "$tmpdir/err" && fail "no table on stderr"

expect_status 0 "quiet, lists and repeats" -- "$HEARTH" bench -m "$m" -p 8,0 -p 4 -n 0 -r 1 -q -b 2
[ -s "$tmpdir/err" ] && fail "--quiet: nothing on stderr"
[ "$(grep -c '^| llama ' "$tmpdir/out")" -eq 2 ] || fail "-p 8,0 -p 4 -n 0: two pp tests"
grep -q 'n_batch' "$tmpdir/out" || fail "a batch size other than 512 gets a column"

expect_status 0 "csv" -- "$HEARTH" bench -m "$m" -p 8 -n 2 -r 3 -o csv -q
[ "$(wc -l < "$tmpdir/out")" -eq 3 ] || fail "csv: a header and two rows"
head -1 "$tmpdir/out" | grep -q '^hearth_version,.*,model_filename,model_type,model_size,model_n_params,n_batch,n_threads,.*n_prompt,n_gen,n_depth,test,test_time,avg_ns,stddev_ns,avg_ts,stddev_ts$' ||
    fail "csv: the column names"
grep -q '"1171200","292800","512",' "$tmpdir/out" || fail "csv: size, parameters, batch"
grep -q '"8","0","0","pp8",' "$tmpdir/out" || fail "csv: the pp row"

expect_status 0 "json" -- "$HEARTH" bench -m "$m" -p 8 -n 2 -r 3 -o json -q --cache-type f32
if command -v python3 >/dev/null 2>&1; then
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d) == 2, d
pp, tg = d
assert pp["test"] == "pp8" and pp["n_prompt"] == 8 and pp["n_gen"] == 0, pp
assert tg["test"] == "tg2" and tg["n_gen"] == 2, tg
assert pp["type_k"] == "f32" and pp["model_n_params"] == 292800
for r in d:
    assert len(r["samples_ns"]) == 3 and len(r["samples_ts"]) == 3
    assert r["avg_ts"] > 0 and r["stddev_ts"] >= 0
    n = r["n_prompt"] + r["n_gen"]
    mean = sum(n * 1e9 / s for s in r["samples_ns"]) / 3
    assert abs(mean - r["avg_ts"]) <= 1e-3 * mean, (mean, r["avg_ts"])
' "$tmpdir/out" || fail "json: valid, with the samples and their mean"
fi

# -d: the tests again after that many tokens in the cache, named as the
# common tool names them; the depth counts against the model's context.
expect_status 0 "depth" -- "$HEARTH" bench -m "$m" -p 8 -n 2 -d 0,24 -r 2 -o json -q
if command -v python3 >/dev/null 2>&1; then
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert [r["test"] for r in d] == ["pp8", "tg2", "pp8 @ d24", "tg2 @ d24"], d
assert [r["n_depth"] for r in d] == [0, 0, 24, 24], d
assert all(len(r["samples_ns"]) == 2 and r["avg_ts"] > 0 for r in d)
' "$tmpdir/out" || fail "depth: a row per depth, named and counted"
fi
expect_status 0 "depth, markdown, verbose" -- "$HEARTH" -v bench -m "$m" -p 4 -n 0 -d 16 -r 1
grep -q '| *pp4 @ d16 | ' "$tmpdir/out" || fail "depth: the test column"
grep -q 'depth of 16 tokens filled in' "$tmpdir/err" || fail "depth: filling it is said with -v"
ctx=$("$HEARTH" inspect "$m" | awk '$1 ~ /\.context_length$/ { print $3; exit }')
if [ -n "$ctx" ]; then
    expect_status 2 "depth beyond the context" -- "$HEARTH" bench -m "$m" -p 8 -n 0 -d "$ctx" -q
    grep -q "a test of $((ctx + 8)) tokens does not fit the model's context of $ctx tokens" \
        "$tmpdir/err" || fail "depth beyond the context: the sizes are named"
fi
expect_status 2 "depth with --parallel" -- "$HEARTH" bench -m "$m" --parallel 2 -d 8
expect_status 2 "a depth that is not a number" -- "$HEARTH" bench -m "$m" -d deep
if [ -f "$HEARTH_TEST_DATA/models/micro-rwkv6-F16.gguf" ]; then
    # a recurrent model returns to the depth through its state snapshot
    expect_status 0 "depth, recurrent model" -- \
        "$HEARTH" bench -m "$HEARTH_TEST_DATA/models/micro-rwkv6-F16.gguf" -p 8 -n 2 -d 16 -r 2 -q
    [ "$(grep -c ' @ d16 |' "$tmpdir/out")" -eq 2 ] || fail "depth, recurrent model: both tests"
fi

expect_status 0 "the kernel path forced" -- env HEARTH_CPU=scalar "$HEARTH" bench -m "$m" -p 4 -n 0 -r 1 -q
grep -q '| CPU/scalar *|' "$tmpdir/out" || fail "the backend column names the kernel path"
expect_status 0 "the kernel path in csv" -- env HEARTH_CPU=scalar "$HEARTH" bench -m "$m" -p 4 -n 0 -r 1 -q -o csv
grep -q '^"[^"]*","[^"]*","CPU","scalar",' "$tmpdir/out" || fail "csv: backends and kernels"
expect_status 1 "an unknown kernel path" -- env HEARTH_CPU=bogus "$HEARTH" bench -m "$m" -p 4 -n 0
grep -q "HEARTH_CPU=bogus" "$tmpdir/err" || fail "the unknown kernel path is named"

# --parallel: the batched table, one row per B, its numbers consistent
expect_status 0 "parallel" -- "$HEARTH" bench -m "$m" --parallel 1,3 -p 20 -n 6 -t 2
grep -q '^|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |$' \
    "$tmpdir/out" || fail "parallel: the batched benchmark's header"
awk -F'|' '$2 ~ /^ *[0-9]+ *$/ { n++; b = $4 + 0;
        if ($2 + 0 != 20 || $3 + 0 != 6 || $5 + 0 != b * 26) bad = 1;
        if ($7 <= 0 || $9 <= 0) bad = 1;
        # the speeds follow from the times (printed to the millisecond)
        if ($6 >= 0.1 && (b * 20 / $6 / $7 > 1.05 || b * 20 / $6 / $7 < 0.95)) bad = 1;
        if ($8 >= 0.1 && (b * 6 / $8 / $9 > 1.05 || b * 6 / $8 / $9 < 0.95)) bad = 1 }
     END { exit !(n == 2 && !bad) }' "$tmpdir/out" || fail "parallel: two rows, N_KV and speeds follow from the times"
grep -q "KV pool: [0-9]* blocks of 64 positions" "$tmpdir/err" || fail "parallel: the pool is reported"
# every sequence holds whole blocks: 8 sequences of 33 positions need 8
# blocks of 64, not the 264 positions' 5 (they would preempt each other)
expect_status 0 "parallel: short sequences" -- "$HEARTH" bench -m "$m" --parallel 8 -p 16 -n 16 -t 1 -r 1
grep -q "KV pool: 8 blocks of 64 positions" "$tmpdir/err" || fail "parallel: a block for each short sequence"
expect_status 0 "parallel json" -- "$HEARTH" bench -m "$m" --parallel 2 -p 8 -n 4 -o json -q --kv-block 16
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r[0]["n_parallel"] == 2 and r[0]["speed_tg"] > 0' \
    "$tmpdir/out" || fail "parallel json: valid"
expect_status 0 "shared prefix" -- "$HEARTH" bench -m "$m" --parallel 4 --shared-prefix 100 -p 10 -n 4 -q
awk -F'|' '$2 ~ /^ *4 *$/ { split($9, c, " of "); if (c[1] + 0 >= 4 * 64 && $10 + 0 > 50) ok = 1 } END { exit !ok }' \
    "$tmpdir/out" || fail "shared prefix: the prefix's full blocks come from the cache"
expect_status 2 "shared prefix without parallel" -- "$HEARTH" bench -m "$m" --shared-prefix 10
expect_status 2 "a bad block size" -- "$HEARTH" bench -m "$m" --parallel 2 --kv-block 48
grep -q "power of two" "$tmpdir/err" || fail "the bad block size is explained"
expect_status 2 "parallel with lists" -- "$HEARTH" bench -m "$m" --parallel 2 -p 8,16
expect_status 2 "parallel in csv" -- "$HEARTH" bench -m "$m" --parallel 2 -o csv

expect_status 2 "no model" -- "$HEARTH" bench -p 8
expect_status 2 "nothing to run" -- "$HEARTH" bench -m "$m" -p 0 -n 0
expect_status 2 "bad list" -- "$HEARTH" bench -m "$m" -t 1,,2
grep -q -- "--threads" "$tmpdir/err" || fail "the bad option is named"
expect_status 2 "zero threads" -- "$HEARTH" bench -m "$m" -t 0
expect_status 2 "bad output format" -- "$HEARTH" bench -m "$m" -o xml
expect_status 2 "bad cache type" -- "$HEARTH" bench -m "$m" --cache-type q4_0
expect_status 2 "unexpected argument" -- "$HEARTH" bench -m "$m" extra
expect_status 1 "missing model" -- "$HEARTH" bench -m "$tmpdir/missing.gguf"
expect_status 0 "help" -- "$HEARTH" bench --help
grep -q -- "-ngl, --gpu-layers N" "$tmpdir/out" || fail "--help lists the offload options"
expect_status 2 "bad -ngl" -- "$HEARTH" bench -m "$m" -ngl all
grep -q -- "expected an integer, got 'all'" "$tmpdir/err" || fail "the bad layer count is named"

# What cannot fit the model's context is refused before anything runs.
expect_status 2 "a prompt beyond the context" -- "$HEARTH" bench -m "$m" -p 100000 -n 0 -r 1
grep -q "^hearth: bench: a test of 100000 tokens does not fit the model's context" "$tmpdir/err" ||
    fail "the test that does not fit is named"
[ -s "$tmpdir/out" ] && fail "nothing on stdout when refused"
expect_status 2 "parallel beyond the context" -- "$HEARTH" bench -m "$m" --parallel 2 -p 100000 -n 4

# The table is the last thing on stdout; what ran goes to stderr.
expect_status 0 "the table alone on stdout" -- "$HEARTH" bench -m "$m" -p 8 -n 0 -r 1 -t 1
tail -n 1 "$tmpdir/out" | grep -q '^| ' || fail "stdout ends with the table"
grep -q "^hearth: bench: hearth " "$tmpdir/err" || fail "the version on stderr"
grep -q "1 threads" "$tmpdir/err" && fail "1 thread, not 1 threads"
expect_status 0 "parallel: the table alone on stdout" -- "$HEARTH" bench -m "$m" --parallel 1 -p 8 -n 2 -t 1
tail -n 1 "$tmpdir/out" | grep -q '^| ' || fail "parallel: stdout ends with the table"
grep -q "^hearth: bench: hearth .*, 1 thread$" "$tmpdir/err" || fail "parallel: version and 1 thread on stderr"

finish

#!/bin/sh
# cli-devices.sh -- hearth devices: the device list, the offload report of
# -m with --gpu-layers / --device / --gpu-fallback, and the errors when
# there is no OpenCL platform, no such device or no OpenCL in the build;
# the same options in hearth run and hearth bench.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data models/micro-llama-Q4_K_M.gguf models/stories260K.gguf

m="$HEARTH_TEST_DATA/models/micro-llama-Q4_K_M.gguf"
s="$HEARTH_TEST_DATA/models/stories260K.gguf"

expect_status 2 "--gpu-layers needs -m" -- "$HEARTH" devices --gpu-layers 2
expect_status 2 "-ngl takes a number" -- "$HEARTH" devices -m "$m" -ngl many
grep -q "expected an integer, got 'many'" "$tmpdir/err" || fail "bad -ngl value is named"
expect_status 2 "negative layer count" -- "$HEARTH" devices -m "$m" --gpu-layers -1
expect_status 2 "unknown option" -- "$HEARTH" devices --bogus
expect_status 2 "-m with --json" -- "$HEARTH" devices -m "$m" --json
expect_status 0 "--help" -- "$HEARTH" devices --help
grep -q "gpu-fallback" "$tmpdir/out" || fail "--help lists the offload options"
expect_status 0 "no offload asked: runs on the CPU" -- "$HEARTH" devices -m "$m"
grep -q "all 2 layers on the CPU$" "$tmpdir/out" || fail "CPU-only report"

if ! "$HEARTH" --version -v | grep -q opencl; then
    expect_status 1 "no OpenCL in the build" -- "$HEARTH" devices
    grep -q "no OpenCL support" "$tmpdir/err" || fail "says the build has no OpenCL"
    expect_status 1 "offload without OpenCL" -- "$HEARTH" devices -m "$m" -ngl 1
    expect_status 0 "offload without OpenCL, fallback" -- "$HEARTH" devices -m "$m" -ngl 1 --gpu-fallback
    grep -q "on the CPU (offload failed: .*OpenCL support" "$tmpdir/out" || fail "fallback reason"
    expect_status 1 "bench offload without OpenCL" -- "$HEARTH" bench -m "$s" -p 4 -n 0 -r 1 -ngl 1
    expect_status 0 "bench offload without OpenCL, fallback" -- \
        "$HEARTH" bench -m "$s" -p 4 -n 0 -r 1 -q -ngl 1 --gpu-fallback
    grep -q "offload: all 5 layers on the CPU (offload failed: " "$tmpdir/err" ||
        fail "bench: the fallback is reported even with -q"
    finish
fi

# No platform at all: the loader finds no vendor files.
mkdir "$tmpdir/vendors"
expect_status 1 "no OpenCL platform" -- env OCL_ICD_VENDORS="$tmpdir/vendors" "$HEARTH" devices
grep -q "CL_PLATFORM_NOT_FOUND_KHR" "$tmpdir/err" || fail "no platform: the OpenCL error is named"
[ "$(wc -l < "$tmpdir/err")" -eq 1 ] || fail "no platform: one line on stderr"
expect_status 1 "offload, no platform" -- env OCL_ICD_VENDORS="$tmpdir/vendors" "$HEARTH" devices -m "$m" -ngl 1
expect_status 0 "offload, no platform, fallback" -- env OCL_ICD_VENDORS="$tmpdir/vendors" \
    "$HEARTH" devices -m "$m" -ngl 1 --gpu-fallback
grep -q "all 2 layers on the CPU (offload failed: .*CL_PLATFORM_NOT_FOUND_KHR" "$tmpdir/out" ||
    fail "fallback report names the reason"
expect_status 0 "bench, no platform, fallback" -- env OCL_ICD_VENDORS="$tmpdir/vendors" \
    "$HEARTH" bench -m "$s" -p 4 -n 0 -r 1 -q -ngl 2 --gpu-fallback -o csv
grep -q "^hearth: bench: offload: all 5 layers on the CPU (offload failed: .*CL_PLATFORM_NOT_FOUND_KHR" \
    "$tmpdir/err" || fail "bench: the fallback reason on stderr"
grep -q '^"[^"]*","[^"]*","CPU","[^"]*","",' "$tmpdir/out" || fail "bench: the fallback ran on the CPU"

require_opencl_device

expect_status 0 "list devices" -- "$HEARTH" devices
grep -q "^0: " "$tmpdir/out" || fail "device 0 is listed"
grep -q "^  OpenCL  *OpenCL [0-9]" "$tmpdir/out" || fail "OpenCL version is listed"
grep -q "^  fp16  *\(yes\|no\)$" "$tmpdir/out" || fail "fp16 support is listed"
[ -s "$tmpdir/err" ] && fail "nothing on stderr"
n=$(grep -c '^[0-9][0-9]*: ' "$tmpdir/out")

expect_status 0 "--json --compile" -- "$HEARTH" devices --json --compile
if command -v python3 >/dev/null 2>&1; then
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["devices"]
assert len(d) == int(sys.argv[2]), d
for i, x in enumerate(d):
    assert x["index"] == i and x["name"] and x["global_mem_bytes"] > 0, x
    assert x["kernels"]["ok"] is True and x["kernels"]["ms"] >= 0, x
' "$tmpdir/out" "$n" || fail "--json is valid JSON with every device"
fi
expect_status 0 "--compile again: from the cache" -- "$HEARTH" devices --compile
grep -q "kernels  *loaded from the cache" "$tmpdir/out" || fail "second build comes from the cache"

expect_status 0 "offload one layer" -- "$HEARTH" devices -m "$m" -ngl 1
grep -q ": 1 of 2 layers on OpenCL device 0 (.*), .* uploaded; 1 layer and the output layer on the CPU$" \
    "$tmpdir/out" || fail "one-layer report"
expect_status 0 "offload everything" -- "$HEARTH" devices -m "$m" --gpu-layers 3
grep -q ": 2 of 2 layers and the output layer on OpenCL device 0 (.*), .*KiB uploaded$" "$tmpdir/out" ||
    fail "full offload report"
grep -q "^KV cache on the device: " "$tmpdir/out" || fail "device KV cache is reported"
expect_status 0 "offload all layers, not the output" -- "$HEARTH" devices -m "$s" -ngl 5
grep -q ": 5 of 5 layers on .*; the output layer on the CPU$" "$tmpdir/out" || fail "output layer on the CPU"

# The commands that load models take the same options and report the
# split on stderr; offloading does not change greedy output.
expect_status 0 "run on the CPU" -- "$HEARTH" run -m "$s" -p "Once upon a time" -n 40 --temp 0
cp "$tmpdir/out" "$tmpdir/cpu.txt"
grep -q "offload:" "$tmpdir/err" && fail "no offload report without offload"
expect_status 0 "run with every layer offloaded" -- "$HEARTH" run -m "$s" -p "Once upon a time" -n 40 --temp 0 -ngl 99
cmp -s "$tmpdir/out" "$tmpdir/cpu.txt" || fail "offloaded greedy text differs from the CPU's"
grep -q "^hearth: run: offload: 5 of 5 layers and the output layer on OpenCL device 0 " "$tmpdir/err" ||
    fail "run reports the split on stderr"
expect_status 0 "run with two layers offloaded" -- "$HEARTH" run -m "$s" -p "Once upon a time" -n 40 --temp 0 --gpu-layers 2
cmp -s "$tmpdir/out" "$tmpdir/cpu.txt" || fail "partly offloaded greedy text differs from the CPU's"
grep -q "offload: 2 of 5 layers on .*; 3 layers and the output layer on the CPU" "$tmpdir/err" ||
    fail "run reports a partial split"
expect_status 1 "run on a missing device" -- "$HEARTH" run -m "$s" -p "Once" -n 2 -ngl 2 --device "$n"
grep -q "OpenCL device $n does not exist" "$tmpdir/err" || fail "run names the missing device"

# hearth bench: the device in the table, the CSV and the JSON.
expect_status 0 "bench, every layer offloaded" -- "$HEARTH" bench -m "$s" -p 8 -n 2 -r 1 -ngl 99
head -1 "$tmpdir/out" | grep -q '| backend  *| ngl | device  *| threads |' || fail "bench: ngl and device columns"
[ "$(grep -c '| OpenCL+CPU/[a-z0-9]* *| *99 | 0: [^|]*[^ |] *|' "$tmpdir/out")" -eq 2 ] ||
    fail "bench: each row names the backend and the device"
grep -q "^hearth: bench: offload: 5 of 5 layers and the output layer on OpenCL device 0 " "$tmpdir/err" ||
    fail "bench: the split on stderr"
expect_status 0 "bench, one layer, csv" -- "$HEARTH" bench -m "$s" -p 8 -n 0 -r 1 -q -o csv -ngl 1 --device 0
head -1 "$tmpdir/out" | grep -q '^hearth_version,cpu_info,backends,kernels,gpu_info,.*,n_gpu_layers,main_gpu,' ||
    fail "bench csv: gpu_info and main_gpu"
grep -q '^"[^"]*","[^"]*","OpenCL,CPU","[^"]*","[^"][^"]*",.*,"1","0","8","0","0","pp8",' "$tmpdir/out" ||
    fail "bench csv: the device ran one layer"
[ -s "$tmpdir/err" ] && fail "bench -q: nothing on stderr"
expect_status 0 "bench, every layer offloaded, json" -- "$HEARTH" bench -m "$s" -p 8 -n 0 -r 1 -q -o json -ngl 99
if command -v python3 >/dev/null 2>&1; then
    python3 -c '
import json, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == 1, rows
r = rows[0]
assert r["backends"] == "OpenCL,CPU" and r["gpu_info"] and r["main_gpu"] == 0, r
assert r["n_gpu_layers"] == 99 and r["test"] == "pp8", r
' "$tmpdir/out" || fail "bench json: the device that ran"
else
    grep -q '"gpu_info": "[^"]' "$tmpdir/out" || fail "bench json: gpu_info"
fi
expect_status 1 "bench on a missing device" -- "$HEARTH" bench -m "$s" -p 4 -n 0 -r 1 -ngl 1 --device "$n"
grep -q "OpenCL device $n does not exist" "$tmpdir/err" || fail "bench names the missing device"
expect_status 0 "bench on a missing device, fallback" -- \
    "$HEARTH" bench -m "$s" -p 4 -n 0 -r 1 -q -ngl 1 --device "$n" --gpu-fallback
grep -q "offload failed: OpenCL device $n does not exist" "$tmpdir/err" || fail "bench: the fallback reason"
grep -q '| CPU/[a-z0-9]* *|' "$tmpdir/out" || fail "bench: the fallback ran on the CPU"

expect_status 1 "no such device" -- "$HEARTH" devices -m "$m" -ngl 1 --device "$n"
grep -q "OpenCL device $n does not exist" "$tmpdir/err" || fail "bad device index is named"
expect_status 0 "no such device, fallback" -- "$HEARTH" devices -m "$m" -ngl 1 --device "$n" --gpu-fallback
grep -q "on the CPU (offload failed: OpenCL device $n does not exist" "$tmpdir/out" || fail "fallback reason"

finish

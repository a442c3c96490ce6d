#!/bin/sh
# cli-offload-errors.sh -- OpenCL failures with offload: too little device
# memory (HEARTH_OPENCL_MEM_LIMIT) for the weights or for a context, a
# kernel build that fails (HEARTH_OPENCL_BUILD_OPTIONS) and a corrupt
# program cache.  Without --gpu-fallback each failure is an error naming
# the cause; with it the command says why on stderr and prints what the
# CPU prints.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data models/stories260K.gguf

s="$HEARTH_TEST_DATA/models/stories260K.gguf"

if ! "$HEARTH" --version -v | grep -q opencl; then
    echo "SKIP: no OpenCL in the build" >&2
    exit 77
fi
require_opencl_device

HEARTH_OPENCL_CACHE="$tmpdir/cache"
export HEARTH_OPENCL_CACHE
unset HEARTH_OPENCL_MEM_LIMIT HEARTH_OPENCL_BUILD_OPTIONS

run_story() {
    "$HEARTH" run -m "$s" -p "Once upon a time" -n 40 --temp 0 "$@"
}

# with NAME=VALUE COMMAND...: COMMAND (also a function) with NAME set.
with() {
    (export "$1" && shift && "$@")
}

expect_status 0 "the CPU's story" -- run_story
cp "$tmpdir/out" "$tmpdir/cpu.txt"
expect_status 0 "the device's story" -- run_story -ngl 99
cmp -s "$tmpdir/out" "$tmpdir/cpu.txt" || fail "offloaded greedy text differs from the CPU's"

# ---- device memory ---------------------------------------------------------------------

expect_status 1 "a limit that is not a byte count" -- \
    with HEARTH_OPENCL_MEM_LIMIT=lots "$HEARTH" devices -m "$s" -ngl 99
grep -q "HEARTH_OPENCL_MEM_LIMIT='lots' is not a byte count" "$tmpdir/err" || fail "bad limit is named"
expect_status 1 "a limit of 0" -- with HEARTH_OPENCL_MEM_LIMIT=0 "$HEARTH" devices -m "$s" -ngl 99

# The weights do not fit.
expect_status 1 "weights over the limit" -- with HEARTH_OPENCL_MEM_LIMIT=1K run_story -ngl 99
grep -q "^hearth: run: .*stories260K.gguf: not enough memory on OpenCL device 0 (.*) for the weights of 5 layers and the output layer: [0-9]* bytes needed, 1024 available (HEARTH_OPENCL_MEM_LIMIT 1024 bytes, device memory [0-9]* bytes, 0 in use); offload fewer layers$" \
    "$tmpdir/err" || fail "weights over the limit: bytes needed and available, the device"
[ -s "$tmpdir/out" ] && fail "weights over the limit: nothing on stdout"
expect_status 0 "weights over the limit, fallback" -- \
    with HEARTH_OPENCL_MEM_LIMIT=1K run_story -ngl 99 --gpu-fallback
cmp -s "$tmpdir/out" "$tmpdir/cpu.txt" || fail "weights over the limit, fallback: not the CPU's text"
grep -q "^hearth: run: offload: all 5 layers on the CPU (offload failed: .*not enough memory on OpenCL device 0 .* 1024 available" \
    "$tmpdir/err" || fail "weights over the limit, fallback: the reason on stderr"
expect_status 1 "devices: weights over the limit" -- \
    with HEARTH_OPENCL_MEM_LIMIT=1k "$HEARTH" devices -m "$s" -ngl 2
grep -q "for the weights of 2 layers: " "$tmpdir/err" || fail "devices: the layers are counted"

# The weights fit, a context's KV cache and work buffers do not: about
# 1 MiB of weights, 1.25 MiB of KV cache for 2048 positions.
expect_status 1 "context over the limit" -- with HEARTH_OPENCL_MEM_LIMIT=2M run_story -ngl 99 -c 2048
grep -q "^hearth: run: not enough memory on OpenCL device 0 (.*) for a context's KV cache (1310720 bytes) and work buffers (up to [0-9]* bytes): [0-9]* bytes needed, [0-9]* available (HEARTH_OPENCL_MEM_LIMIT 2097152 bytes, device memory [0-9]* bytes, [1-9][0-9]* in use); use a smaller context" \
    "$tmpdir/err" || fail "context over the limit: bytes needed and available"
expect_status 0 "context over the limit, fallback" -- \
    with HEARTH_OPENCL_MEM_LIMIT=2M run_story -ngl 99 -c 2048 --gpu-fallback
cmp -s "$tmpdir/out" "$tmpdir/cpu.txt" || fail "context over the limit, fallback: not the CPU's text"
grep -q "^hearth: run: offload: all 5 layers on the CPU (offload failed: not enough memory on OpenCL device 0 .*KV cache" \
    "$tmpdir/err" || fail "context over the limit, fallback: the reason on stderr"
expect_status 0 "bench, weights over the limit, fallback" -- \
    with HEARTH_OPENCL_MEM_LIMIT=1K "$HEARTH" bench -m "$s" -p 8 -n 0 -r 1 -q -ngl 99 --gpu-fallback
grep -q "offload failed: .*not enough memory on OpenCL device 0" "$tmpdir/err" || fail "bench: the fallback reason"
grep -q '| CPU/[a-z0-9]* *|' "$tmpdir/out" || fail "bench: the fallback ran on the CPU"

# Enough memory: the limit changes nothing.
expect_status 0 "under the limit" -- with HEARTH_OPENCL_MEM_LIMIT=64M run_story -ngl 99 -c 256
cmp -s "$tmpdir/out" "$tmpdir/cpu.txt" || fail "under the limit: not the CPU's text"
grep -q "offload: 5 of 5 layers and the output layer on OpenCL device 0" "$tmpdir/err" ||
    fail "under the limit: runs on the device"

# ---- kernel build failures ----------------------------------------------------------------

# A macro that breaks every kernel declaration: the compiler refuses the source.
expect_status 1 "kernels that do not compile" -- \
    with HEARTH_OPENCL_BUILD_OPTIONS=-D__kernel=hearth_broken run_story -ngl 99
grep -q "^hearth: run: device 0 (.*): building the OpenCL kernels with options '-D__kernel=hearth_broken' failed: CL_BUILD_PROGRAM_FAILURE (-11); build log: .*hearth_broken" \
    "$tmpdir/err" || fail "build failure: the OpenCL error and the build log"
[ -s "$tmpdir/out" ] && fail "build failure: nothing on stdout"
expect_status 0 "kernels that do not compile, fallback" -- \
    with HEARTH_OPENCL_BUILD_OPTIONS=-D__kernel=hearth_broken run_story -ngl 99 --gpu-fallback
cmp -s "$tmpdir/out" "$tmpdir/cpu.txt" || fail "build failure, fallback: not the CPU's text"
grep -q "^hearth: run: offload: all 5 layers on the CPU (offload failed: .*CL_BUILD_PROGRAM_FAILURE" \
    "$tmpdir/err" || fail "build failure, fallback: the reason on stderr"
expect_status 1 "devices --compile, kernels that do not compile" -- \
    with HEARTH_OPENCL_BUILD_OPTIONS=-D__kernel=hearth_broken "$HEARTH" devices --compile
grep -q "CL_BUILD_PROGRAM_FAILURE" "$tmpdir/out" "$tmpdir/err" || fail "devices --compile names the failure"

# An option the compiler does not know.
expect_status 1 "an unknown compiler option" -- \
    with HEARTH_OPENCL_BUILD_OPTIONS=-hearth-no-such-option run_story -ngl 99
grep -q "building the OpenCL kernels with options '-hearth-no-such-option' failed: CL_\(INVALID_BUILD_OPTIONS (-43)\|BUILD_PROGRAM_FAILURE (-11)\)" \
    "$tmpdir/err" || fail "unknown option: the OpenCL error is named"
expect_status 0 "an unknown compiler option, fallback" -- \
    with HEARTH_OPENCL_BUILD_OPTIONS=-hearth-no-such-option run_story -ngl 99 --gpu-fallback
cmp -s "$tmpdir/out" "$tmpdir/cpu.txt" || fail "unknown option, fallback: not the CPU's text"

# Options that compile are kept apart in the cache.
expect_status 0 "harmless extra options" -- with HEARTH_OPENCL_BUILD_OPTIONS=-DHEARTH_UNUSED=1 \
    run_story -ngl 99
cmp -s "$tmpdir/out" "$tmpdir/cpu.txt" || fail "harmless options: not the CPU's text"

# ---- the program cache ---------------------------------------------------------------------

rm -rf "$HEARTH_OPENCL_CACHE"
expect_status 0 "build into an empty cache" -- "$HEARTH" devices --compile
grep -q "kernels  *built in" "$tmpdir/out" || fail "an empty cache: built"
expect_status 0 "load from the cache" -- "$HEARTH" devices --compile
grep -q "kernels  *loaded from the cache" "$tmpdir/out" || fail "second time: from the cache"
if [ "$(ls "$HEARTH_OPENCL_CACHE" | wc -l)" -ne 1 ]; then
    echo "note: more than one device, the damaged-entry checks are left out" >&2
    finish
fi
entry="$HEARTH_OPENCL_CACHE/$(ls "$HEARTH_OPENCL_CACHE")"
size=$(wc -c < "$entry")

# Each kind of damage: the command still works (and prints what the CPU
# prints), the entry is rebuilt, and the next run loads it again.
for damage in garbage truncated empty tail; do
    case $damage in
    garbage) printf 'this is not a program binary\n' > "$entry" ;;
    truncated) head -c $((size / 2)) "$entry" > "$tmpdir/part" && cat "$tmpdir/part" > "$entry" ;;
    empty) : > "$entry" ;;
    tail) printf 'XXXXXXXXXXXXXXXX' | dd of="$entry" bs=1 seek=$((size - 16)) conv=notrunc 2>/dev/null ;;
    esac
    expect_status 0 "a $damage cache entry" -- run_story -ngl 99
    cmp -s "$tmpdir/out" "$tmpdir/cpu.txt" || fail "a $damage cache entry: not the CPU's text"
    expect_status 0 "after a $damage cache entry" -- "$HEARTH" devices --compile
    grep -q "kernels  *loaded from the cache" "$tmpdir/out" || fail "a $damage cache entry is replaced"
    size=$(wc -c < "$entry")
done

finish

#!/bin/sh
# cli-mpi-tp.sh -- one model over the ranks of an MPI job in tensor
# parallel (hearth-mpi(7)): with --tp N every rank runs its share of the
# attention's key/value heads and of a mixture's experts and computes its
# share of the rows of every other matrix, the ranks gather the rest
# (every rank's heads and experts checked), and the logits are those of
# one process bit for bit -- a prompt in batches, one token at a time, and
# the serving engine with its prefix cache and speculation (tests/
# dump-logits -T) -- for several families (q/k/v biases, head norms,
# phi3's fused q/k/v, gpt-oss's sinks, experts, latent attention),
# quantizations (a K-quant, F16, Q4_0, Q8_0) and KV cache types, over 2
# and 3 ranks (an odd split of the heads and of the row groups; a model
# with fewer key/value heads than ranks keeps its attention whole) and
# over 2 stages of 2 (--pp 2 --tp 2, 4 ranks); each rank keeps the keys
# and values of its heads only (the bytes rank 0 reports against one
# process's, every rank's heads); hearth run writes the same greedy text;
# hearth bench runs and names the layout; and a layout the job or the
# model does not fit is refused naming both.  Skipped, saying so, in a
# build without MPI or without mpirun.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"

require_data models/stories260K.gguf models/micro-llama-Q4_K_M.gguf models/micro-llama-F16.gguf \
    models/micro-qwen2-Q8_0.gguf models/micro-qwen2-Q4_0.gguf models/micro-rwkv6-Q8_0.gguf
m260k="$HEARTH_TEST_DATA/models/stories260K.gguf"
dump="${HEARTH_BUILDDIR:-.}/tests/dump-logits"
gen="${HEARTH_BUILDDIR:-.}/tools/gen-model"

require_mpi run -m "$m260k" -p x -n 1 --tp 2

mpi_launcher

# --- logits, bit for bit ----------------------------------------------------

short="1 300 301 302 17 400 259 260 111 42 7 8 9 300 301 302 5 6 7 8 9"
# past a block of 64 positions: the prefix cache resumes and copies blocks
long=$(awk 'BEGIN { for (i = 0; i < 90; i++) printf "%d ", (i * 37 + 11) % 500 + 1 }')
# past three blocks: gpt-oss's sliding layers (a window of 32) hold fewer
# blocks than its full layers
longer=$(awk 'BEGIN { for (i = 0; i < 200; i++) printf "%d ", (i * 37 + 11) % 500 + 1 }')

# same_logits NAME MODEL CACHE PP TP TOKENS...: dump-logits of one process
# and of PP x TP ranks (PP stages of TP ranks; prompt, decode and engine
# checks on both), with a KV cache of type CACHE, write the same bits
same_logits() {
    name=$1 model=$2 cache=$3 pp=$4 tp=$5
    shift 5
    np=$((pp * tp))
    if [ ! -f "$tmpdir/$name.$cache.one.f32" ] &&
        ! "$dump" -e 20 -k "$cache" "$model" "$tmpdir/$name.$cache.one.f32" "$@" >/dev/null 2>"$tmpdir/err"; then
        fail "$name: dump-logits in one process"
        sed 's/^/  stderr: /' "$tmpdir/err" >&2
        return
    fi
    out="$tmpdir/$name.$cache.$pp.$tp.f32"
    if ! $mpi -np "$np" "$dump" -e 20 -k "$cache" -P "$pp" -T "$tp" "$model" "$out" "$@" >/dev/null 2>"$tmpdir/err"
    then
        fail "$name: dump-logits over $pp x $tp ranks"
        sed 's/^/  stderr: /' "$tmpdir/err" >&2
    elif cmp -s "$tmpdir/$name.$cache.one.f32" "$out"; then
        pass "$name, $cache cache, $pp stage(s) of $tp tensor-parallel ranks: the logits of one process, bit for bit"
    else
        fail "$name, $cache cache, $pp stage(s) of $tp tensor-parallel ranks: the logits differ from one process's"
    fi
}

same_logits stories260K "$m260k" F32 1 2 $long
same_logits stories260K "$m260k" F32 1 3 $long
same_logits stories260K "$m260k" F16 2 2 $long
same_logits llama-Q4_K_M "$HEARTH_TEST_DATA/models/micro-llama-Q4_K_M.gguf" F32 1 2 $short
same_logits llama-Q4_K_M "$HEARTH_TEST_DATA/models/micro-llama-Q4_K_M.gguf" Q8_0 1 3 $short
same_logits llama-F16 "$HEARTH_TEST_DATA/models/micro-llama-F16.gguf" F16 1 2 $short
same_logits qwen2-Q8_0 "$HEARTH_TEST_DATA/models/micro-qwen2-Q8_0.gguf" F32 1 3 $short
same_logits qwen2-Q4_0 "$HEARTH_TEST_DATA/models/micro-qwen2-Q4_0.gguf" Q8_0 1 2 $short
# sliding-window layers in a space of their own, soft-capped logits and
# head norms; phi3's q, k and v rows of one fused matrix, 4 key/value
# heads as 2, 1 and 1; gpt-oss's sinks (one per query head) and q/k/v
# biases, its 8 experts with biases as 4 and 4; qwen2moe's 8 experts as
# 3, 3 and 2 beside its shared expert; latent attention (its keys and
# values whole on each rank) with experts
if "$gen" --threads 2 --shape micro-gemma3 --type Q4_K_M "$tmpdir/gemma3.gguf" 2>"$tmpdir/err" &&
    "$gen" --threads 2 --shape micro-phi3 --type Q8_0 "$tmpdir/phi3.gguf" 2>"$tmpdir/err" &&
    "$gen" --threads 2 --shape micro-gpt-oss --type Q8_0 "$tmpdir/gpt-oss.gguf" 2>"$tmpdir/err" &&
    "$gen" --threads 2 --shape micro-qwen2moe --type Q8_0 "$tmpdir/qwen2moe.gguf" 2>"$tmpdir/err" &&
    "$gen" --threads 2 --shape micro-deepseek2 --type Q8_0 "$tmpdir/deepseek2.gguf" 2>"$tmpdir/err"; then
    same_logits gemma3 "$tmpdir/gemma3.gguf" F32 1 2 $long
    same_logits phi3 "$tmpdir/phi3.gguf" Q8_0 1 3 $long
    same_logits gpt-oss "$tmpdir/gpt-oss.gguf" F16 1 2 $longer
    same_logits qwen2moe "$tmpdir/qwen2moe.gguf" F32 1 3 $short
    same_logits deepseek2 "$tmpdir/deepseek2.gguf" F32 1 2 $long
else
    fail "gen-model"
    sed 's/^/  stderr: /' "$tmpdir/err" >&2
fi

# --- hearth run and hearth bench --------------------------------------------

# stories260K has 4 key/value heads (8 query heads): over 2 ranks 2 and
# 2, over 3 ranks 2, 1 and 1 (the earlier ranks take the extra one).
# Rank 0 keeps the keys and values of its 2 heads only: half of one
# process's cache, bit for bit the same text.
run_args="-p Once_upon_a_time -n 40 --temp 0 -t 1"
expect_status 0 "run in one process" -- "$HEARTH" run -m "$m260k" $run_args -v
cp "$tmpdir/out" "$tmpdir/one.txt"
one_kv=$(kv_bytes)
[ -n "$one_kv" ] && [ "$one_kv" -gt 0 ] || fail "run -v in one process reports its KV cache's bytes"
for np in 2 3; do
    expect_status 0 "run with --tp $np" -- $mpi -np "$np" "$HEARTH" run -m "$m260k" $run_args --tp "$np" -v
    if cmp -s "$tmpdir/out" "$tmpdir/one.txt"; then pass "run with --tp $np: the same greedy text"
    else fail "run with --tp $np writes another text"; fi
    got=$(kv_bytes)
    if [ -n "$one_kv" ] && [ "$got" = $((one_kv * 2 / 4)) ]; then
        pass "--tp $np: rank 0's KV cache is one process's for 2 of 4 heads ($got of $one_kv bytes)"
    else
        fail "--tp $np: rank 0's KV cache has ${got:-no} bytes, not $((one_kv * 2 / 4)) (2 of 4 heads of $one_kv)"
    fi
    if [ "$np" -eq 2 ]; then
        stderr_has "tensor-parallel rank 0 of 2 (key/value heads 0 to 1 of 4, the other matrices' rows split 2 ways)" \
            "--tp 2: rank 0 runs heads 0 and 1"
        stderr_has "tensor-parallel rank 1 of 2 (key/value heads 2 to 3 of 4," "--tp 2: rank 1 runs heads 2 and 3"
    fi
done
stderr_has "^hearth: run: rank 0 of 3: stage 0 of 1, layers 0 to 4 of 5; tensor-parallel rank 0 of 3" \
    "run -v names rank 0's share"
stderr_has "tensor-parallel rank 0 of 3 (key/value heads 0 to 1 of 4, the other matrices' rows split 3 ways)" \
    "--tp 3: rank 0 runs heads 0 and 1"
stderr_has "^hearth: run: rank 1 of 3: .*tensor-parallel rank 1 of 3 (key/value heads 2 to 2 of 4," \
    "--tp 3: rank 1 runs head 2 and names it"
stderr_has "^hearth: run: rank 2 of 3: .*tensor-parallel rank 2 of 3 (key/value heads 3 to 3 of 4," \
    "--tp 3: rank 2 runs head 3 and names it"
# micro-llama has 2 key/value heads: over 2 ranks one each (head_dim 32:
# a Q8_0 cache), over 3 its attention stays whole on every rank, the
# query, key and value matrices split by rows
mllama="$HEARTH_TEST_DATA/models/micro-llama-Q4_K_M.gguf"
expect_status 0 "micro-llama in one process" -- "$HEARTH" run -m "$mllama" $run_args -v --cache-type q8_0
cp "$tmpdir/out" "$tmpdir/one-llama.txt"
one_kv=$(kv_bytes)
expect_status 0 "micro-llama with --tp 2" -- $mpi -np 2 "$HEARTH" run -m "$mllama" $run_args -v --cache-type q8_0 --tp 2
cmp -s "$tmpdir/out" "$tmpdir/one-llama.txt" || fail "micro-llama with --tp 2 writes another text"
got=$(kv_bytes)
if [ -n "$one_kv" ] && [ "$got" = $((one_kv / 2)) ]; then
    pass "micro-llama --tp 2: rank 0's Q8_0 KV cache is one process's for 1 of 2 heads"
else fail "micro-llama --tp 2: rank 0's KV cache has ${got:-no} bytes, not $((one_kv / 2))"; fi
stderr_has "tensor-parallel rank 1 of 2 (key/value heads 1 to 1 of 2," "micro-llama --tp 2: rank 1 runs head 1"
expect_status 0 "micro-llama with --tp 3" -- $mpi -np 3 "$HEARTH" run -m "$mllama" $run_args -v --cache-type q8_0 --tp 3
cmp -s "$tmpdir/out" "$tmpdir/one-llama.txt" || fail "micro-llama with --tp 3 writes another text"
[ "$(kv_bytes)" = "$one_kv" ] || fail "micro-llama --tp 3: the whole attention keeps every head's keys and values"
stderr_has "tensor-parallel rank 2 of 3 (every matrix's rows split 3 ways; attention whole: 2 key/value heads for 3 ranks)" \
    "micro-llama --tp 3: the attention stays whole, saying why"
# the experts of a mixture, whole ones: 8 over 3 ranks as 3, 3 and 2
if [ -f "$tmpdir/qwen2moe.gguf" ]; then
    expect_status 0 "qwen2moe with --tp 3" -- $mpi -np 3 "$HEARTH" run -m "$tmpdir/qwen2moe.gguf" -p x -n 2 -t 1 -v --tp 3
    stderr_has "tensor-parallel rank 0 of 3 (.*; experts 0 to 2 of 8)" "qwen2moe --tp 3: rank 0 runs experts 0 to 2"
    stderr_has "tensor-parallel rank 1 of 3 (.*; experts 3 to 5 of 8)" "qwen2moe --tp 3: rank 1 runs experts 3 to 5"
    stderr_has "tensor-parallel rank 2 of 3 (.*; experts 6 to 7 of 8)" "qwen2moe --tp 3: rank 2 runs experts 6 and 7"
fi
# latent attention keeps its compressed keys and values whole
if [ -f "$tmpdir/deepseek2.gguf" ]; then
    expect_status 0 "deepseek2 with --tp 2" -- $mpi -np 2 "$HEARTH" run -m "$tmpdir/deepseek2.gguf" -p x -n 2 -t 1 -v --tp 2
    stderr_has "tensor-parallel rank 1 of 2 (every matrix's rows split 2 ways; attention whole: latent attention; experts 4 to 7 of 8)" \
        "deepseek2 --tp 2: latent attention stays whole, saying so; rank 1 runs experts 4 to 7"
fi
expect_status 0 "run with --pp 2 --tp 2" -- $mpi -np 4 "$HEARTH" run -m "$m260k" $run_args --pp 2 --tp 2
if cmp -s "$tmpdir/out" "$tmpdir/one.txt"; then pass "run with --pp 2 --tp 2: the same greedy text"
else fail "run with --pp 2 --tp 2 writes another text"; fi

expect_status 0 "bench with --tp 2" -- $mpi -np 2 "$HEARTH" bench -m "$m260k" -p 16 -n 4 -r 1 -t 1 -o json --tp 2
python3 -c 'import json, sys; rows = json.load(open(sys.argv[1])); assert len(rows) == 2' "$tmpdir/out" ||
    fail "bench with --tp 2 writes its two rows"
stderr_has "^hearth: bench: rank 0 of 2: stage 0 of 1, layers 0 to 4 of 5; tensor-parallel rank 0 of 2" \
    "bench names the layout"

# --- refused at start-up ----------------------------------------------------

# a singleton MPI job: Open MPI's allocations are no leak of ours (see mpi_launcher)
expect_status 1 "--tp 2 without mpirun" -- env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    "$HEARTH" run -m "$m260k" -p x -n 4 --tp 2
stderr_has "run: --tp 2: 2 tensor-parallel ranks, but the MPI job has 1 (mpirun -np 2)" \
    "the refusal names both sizes"
expect_status 1 "--pp 2 --tp 2 in a job of 3" -- $mpi -np 3 "$HEARTH" run -m "$m260k" -p x -n 4 --pp 2 --tp 2
stderr_has "2 pipeline stages of 2 tensor-parallel ranks are 4 ranks, but the MPI job has 3 (mpirun -np 4)" \
    "the refusal names the layout and the job's size"
# stories260K's key and value matrices have 32 rows: 4 groups of 8
expect_status 1 "--tp 5 over matrices of 4 row groups" -- $mpi -np 5 "$HEARTH" run -m "$m260k" -p x -n 4 --tp 5
stderr_has "tensor 'blk.0.attn_k.weight' has 32 rows, which cannot be split over 5 tensor-parallel ranks" \
    "the refusal names the tensor, its rows and the ranks"
one="run -m $m260k -p x -n 4 --temp 0 -t 1 --tp 2"
expect_status 1 "a tensor-parallel rank with another context size" -- $mpi -np 1 "$HEARTH" $one : -np 1 "$HEARTH" $one -c 256
stderr_has "ranks 0 and 1 run different options" "the handshake covers the tensor-parallel ranks"
expect_status 1 "a recurrent model" -- $mpi -np 2 "$HEARTH" run -m \
    "$HEARTH_TEST_DATA/models/micro-rwkv6-Q8_0.gguf" -p x -n 4 --tp 2
stderr_has "a recurrent model (rwkv6) does not run in a pipeline yet" "the refusal names the family"
expect_status 2 "--tp 0" -- "$HEARTH" run -m "$m260k" -p x -n 4 --tp 0
expect_status 0 "bench --parallel over 2 tensor-parallel ranks" -- $mpi -np 2 "$HEARTH" bench -m "$m260k" \
    --parallel 2 -p 8 -n 4 -r 1 -t 1 -o json --tp 2
python3 -c 'import json, sys
rows = json.load(open(sys.argv[1]))
assert [r["n_parallel"] for r in rows] == [2] and rows[0]["speed_tg"] > 0' "$tmpdir/out" ||
    fail "bench --parallel over 2 tensor-parallel ranks writes its row"

finish

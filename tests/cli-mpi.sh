#!/bin/sh
# cli-mpi.sh -- one model over the ranks of an MPI job (hearth-mpi(7)):
# with --pp N each rank runs its share of the layers, and the logits are
# those of one process bit for bit -- a prompt in batches, one token at a
# time, and the serving engine with its prefix cache and speculation, and
# eight requests together in groups of steps in flight, each with its own
# logits (tests/dump-logits -P) -- for several families and quantizations and
# for splits of 2 and 3 ranks (odd ones: 5 layers over 3 ranks, 2, 2 and
# 1); hearth run writes the same greedy text; hearth bench runs, one
# sequence and several (--parallel); and a
# rank with other options or another model is refused at start-up naming
# it, as are a job of another size and a model that cannot be split.
# Skipped, saying so, in a build without MPI or without mpirun.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"

require_data models/stories260K.gguf models/micro-llama-Q4_K_M.gguf models/micro-qwen2-Q8_0.gguf \
    models/micro-rwkv6-Q8_0.gguf
m260k="$HEARTH_TEST_DATA/models/stories260K.gguf"
dump="${HEARTH_BUILDDIR:-.}/tests/dump-logits"
gen="${HEARTH_BUILDDIR:-.}/tools/gen-model"

require_mpi run -m "$m260k" -p x -n 1 --pp 2

mpi_launcher

# --- logits, bit for bit ----------------------------------------------------

short="1 300 301 302 17 400 259 260 111 42 7 8 9 300 301 302 5 6 7 8 9"
# past a block of 64 positions: the prefix cache resumes and copies blocks
long=$(awk 'BEGIN { for (i = 0; i < 90; i++) printf "%d ", (i * 37 + 11) % 500 + 1 }')

# same_logits NAME MODEL NP TOKENS...: dump-logits of one process and of
# NP ranks (prompt, decode and engine checks on both) write the same bits
same_logits() {
    name=$1 model=$2 np=$3
    shift 3
    if [ ! -f "$tmpdir/$name.one.f32" ] &&
        ! "$dump" -e 20 "$model" "$tmpdir/$name.one.f32" "$@" >/dev/null 2>"$tmpdir/err"; then
        fail "$name: dump-logits in one process"
        sed 's/^/  stderr: /' "$tmpdir/err" >&2
        return
    fi
    if ! $mpi -np "$np" "$dump" -e 20 -P "$np" "$model" "$tmpdir/$name.$np.f32" "$@" >/dev/null 2>"$tmpdir/err"
    then
        fail "$name: dump-logits over $np ranks"
        sed 's/^/  stderr: /' "$tmpdir/err" >&2
    elif cmp -s "$tmpdir/$name.one.f32" "$tmpdir/$name.$np.f32"; then
        pass "$name over $np ranks: the logits of one process, bit for bit"
    else
        fail "$name over $np ranks: the logits differ from one process's"
    fi
}

same_logits stories260K "$m260k" 2 $long
same_logits stories260K "$m260k" 3 $long
same_logits llama-Q4_K_M "$HEARTH_TEST_DATA/models/micro-llama-Q4_K_M.gguf" 2 $short
same_logits qwen2-Q8_0 "$HEARTH_TEST_DATA/models/micro-qwen2-Q8_0.gguf" 2 $short
# sliding-window layers in a space of their own, soft-capped logits;
# latent attention with experts
if "$gen" --threads 2 --shape micro-gemma3 --type Q4_K_M "$tmpdir/gemma3.gguf" 2>"$tmpdir/err" &&
    "$gen" --threads 2 --shape micro-deepseek2 --type Q8_0 "$tmpdir/deepseek2.gguf" 2>"$tmpdir/err"; then
    same_logits gemma3 "$tmpdir/gemma3.gguf" 3 $long
    same_logits deepseek2 "$tmpdir/deepseek2.gguf" 3 $long
else
    fail "gen-model"
    sed 's/^/  stderr: /' "$tmpdir/err" >&2
fi

# --- hearth run and hearth bench --------------------------------------------

run_args="-p Once_upon_a_time -n 40 --temp 0 -t 1"
expect_status 0 "run in one process" -- "$HEARTH" run -m "$m260k" $run_args -v
cp "$tmpdir/out" "$tmpdir/one.txt"
one_kv=$(kv_bytes)
[ -n "$one_kv" ] && [ "$one_kv" -gt 0 ] || fail "run -v in one process reports its KV cache's bytes"
for np in 2 3; do
    expect_status 0 "run over $np ranks" -- $mpi -np "$np" "$HEARTH" run -m "$m260k" $run_args --pp "$np"
    if cmp -s "$tmpdir/out" "$tmpdir/one.txt"; then pass "run over $np ranks: the same greedy text"
    else fail "run over $np ranks writes another text"; fi
done
# speculative decoding with a draft model: the draft is split over the
# ranks as the model is, and the text is still the model's alone
expect_status 0 "run with a draft model over 2 ranks" -- $mpi -np 2 "$HEARTH" run -m "$m260k" $run_args \
    --model-draft "$m260k" --pp 2
if cmp -s "$tmpdir/out" "$tmpdir/one.txt"; then pass "run with a draft model over 2 ranks: the same greedy text"
else fail "run with a draft model over 2 ranks writes another text"; fi
grep -q "speculation (draft model): [1-9][0-9]* drafted" "$tmpdir/err" ||
    fail "run with a draft model over 2 ranks drafts"
expect_status 0 "run -v over 3 ranks" -- $mpi -np 3 "$HEARTH" run -m "$m260k" $run_args --pp 3 -v
grep -q "^hearth: run: pipeline rank 0 of 3: layers 0 to 1 of 5$" "$tmpdir/err" ||
    fail "run -v names rank 0's layers"
# rank 0 holds the keys and values of its 2 layers of 5 only
got=$(kv_bytes)
if [ -n "$one_kv" ] && [ "$got" = $((one_kv * 2 / 5)) ]; then
    pass "--pp 3: rank 0's KV cache is one process's for 2 of 5 layers ($got of $one_kv bytes)"
else
    fail "--pp 3: rank 0's KV cache has ${got:-no} bytes, not $((one_kv * 2 / 5)) (2 of 5 layers of $one_kv)"
fi

expect_status 0 "bench over 2 ranks" -- $mpi -np 2 "$HEARTH" bench -m "$m260k" -p 16 -n 4 -r 1 -t 1 -o json \
    --pp 2
python3 -c 'import json, sys; rows = json.load(open(sys.argv[1])); assert len(rows) == 2' "$tmpdir/out" ||
    fail "bench over 2 ranks writes its two rows"
# several sequences through the serving engine over the ranks: an engine
# made and freed for each B, the other ranks making and freeing theirs;
# 3 and 8 sequences in two groups of steps in flight
expect_status 0 "bench --parallel over 2 ranks" -- $mpi -np 2 "$HEARTH" bench -m "$m260k" --parallel 1,3,8 \
    -p 8 -n 4 -r 1 -t 1 -o json --pp 2
python3 -c 'import json, sys
rows = json.load(open(sys.argv[1]))
assert [r["n_parallel"] for r in rows] == [1, 3, 8] and all(r["speed_tg"] > 0 for r in rows)' "$tmpdir/out" ||
    fail "bench --parallel over 2 ranks writes a row for B = 1, 3 and 8"

# --- refused at start-up ----------------------------------------------------

one="run -m $m260k -p x -n 4 --temp 0 -t 1 --pp 2"
expect_status 1 "a rank with another context size" -- $mpi -np 1 "$HEARTH" $one -c 128 : -np 1 "$HEARTH" $one -c 256
stderr_has "ranks 0 and 1 run different options: 'run --pp 2 .* -c 128 .*' on rank 0, 'run --pp 2 .* -c 256 .*' on rank 1" \
    "the handshake names the options that differ"
expect_status 1 "a rank with another model" -- $mpi -np 1 "$HEARTH" $one : -np 1 "$HEARTH" run -m \
    "$HEARTH_TEST_DATA/models/micro-llama-Q4_K_M.gguf" -p x -n 4 --temp 0 -t 1 --pp 2
stderr_has "ranks 0 and 1 run different models: '[0-9a-f]* (llama 293K F32)' on rank 0" \
    "the handshake names the models"
expect_status 1 "--pp 2 in a job of 3" -- $mpi -np 3 "$HEARTH" $one
stderr_has "a pipeline of 2 ranks, but the MPI job has 3" "the refusal names both sizes"
expect_status 1 "2 layers over 3 ranks" -- $mpi -np 3 "$HEARTH" run -m \
    "$HEARTH_TEST_DATA/models/micro-qwen2-Q8_0.gguf" -p x -n 4 --pp 3
stderr_has "2 layers cannot be split over 3 ranks" "the refusal names the layers and ranks"
expect_status 1 "a recurrent model" -- $mpi -np 2 "$HEARTH" run -m \
    "$HEARTH_TEST_DATA/models/micro-rwkv6-Q8_0.gguf" -p x -n 4 --pp 2
stderr_has "a recurrent model (rwkv6) does not run in a pipeline yet" "the refusal names the family"

finish

#!/bin/sh
# cli-hybrid.sh -- the hybrid Qwen3.5 families end to end, on the micro
# qwen35, qwen35moe and qwen3next files that tools/gen-model writes here
# (F32, and Q4_K_M made by hearth quantize): hearth inspect shows the
# linear layers, the state per sequence (from the file's own sizes) and
# the KV bytes of the attention layers alone; hearth run generates;
# prompt, decode and the serving engine agree bit for bit
# (tests/dump-logits); a chunk-parallel prefill changes the perplexity
# only by rounding; hearth quantize keeps the convolution taps (and the
# mixtures' routers) F32; offloading is refused, or runs on the CPU with
# --gpu-fallback.  (tests/archs-oracle.sh checks the logits against the
# NumPy forward pass.)
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"

gen="${HEARTH_BUILDDIR:-.}/tools/gen-model"
dump="${HEARTH_BUILDDIR:-.}/tests/dump-logits"
tokens="1 300 301 302 17 400 259 260 511 42 7 8 9 300 301 302 5 6 7 8 9 10 11 12"
require_data text/GPL-3.txt
text="$HEARTH_TEST_DATA/text/GPL-3.txt"

for shape in micro-qwen35 micro-qwen35moe micro-qwen3next; do
    arch=${shape#micro-}
    m="$tmpdir/$shape.gguf"
    # every shape with a prediction layer (micro-qwen3next has one anyway)
    if ! "$gen" --shape "$shape" --type F32 --threads 2 --mtp-layers 1 "$m" 2>"$tmpdir/gen-err"; then
        sed 's/^/  stderr: /' "$tmpdir/gen-err" >&2
        fail "gen-model writes $shape"
        continue
    fi

    # inspect: the sizes from the file's metadata, the state computed here
    expect_status 0 "$shape: inspect --json" -- "$HEARTH" inspect --json "$m"
    json=$tmpdir/out
    key() { sed -n "s/^  *\"$arch\\.$1\": {\"type\": \"uint32\", \"value\": \\([0-9]*\\)}.*/\\1/p" "$json" | head -1; }
    K=$(key ssm.conv_kernel) d=$(key ssm.state_size) nk=$(key ssm.group_count) nv=$(key ssm.time_step_rank)
    L=$(key block_count) every=$(key full_attention_interval)
    heads=$(key attention.head_count_kv) dim=$(key attention.key_length)
    if [ -z "$K" ] || [ -z "$d" ] || [ -z "$nk" ] || [ -z "$nv" ] || [ -z "$L" ] || [ -z "$every" ] ||
        [ -z "$heads" ] || [ -z "$dim" ]; then
        fail "$shape: inspect --json shows the linear attention's sizes"
        continue
    fi
    mtp=$(key nextn_predict_layers)
    mtp=${mtp:-0}
    [ "$mtp" = 1 ] || fail "$shape: gen-model writes a prediction layer"
    L=$((L - mtp))
    linear=$((L - L / every))
    state=$((linear * ((K - 1) * (2 * nk * d + nv * d) + nv * d * d) * 4))
    grep -q "\"linear_attention_layers\": $linear," "$json" || fail "$shape: the JSON summary counts $linear linear layers"
    grep -q "\"state_bytes_per_sequence\": $state," "$json" || fail "$shape: the JSON summary's state is $state bytes"
    grep -q "\"prediction_layers\": $mtp," "$json" || fail "$shape: the JSON summary counts $mtp prediction layers"
    expect_status 0 "$shape: inspect" -- "$HEARTH" inspect "$m"
    grep -q "^  linear layers  *$linear of $L " "$tmpdir/out" || fail "$shape: inspect shows $linear linear layers of $L"
    grep -q "^  state per sequence  *$state bytes" "$tmpdir/out" || fail "$shape: inspect shows the state per sequence"
    if [ "$mtp" -gt 0 ]; then
        grep -q "^  prediction layers  *$mtp after the $L of the trunk" "$tmpdir/out" ||
            fail "$shape: inspect shows the prediction layers apart from the trunk"
    fi
    kv=$(sed -n 's/^  KV cache per token  *\([0-9]*\) bytes.*/\1/p' "$tmpdir/out")
    [ "$kv" = $(((L / every) * heads * dim * 2 * 2)) ] ||
        fail "$shape: the KV bytes per token count the attention layers alone ($kv)"

    expect_status 0 "$shape: run" -- "$HEARTH" run -m "$m" -p "once upon a time" -n 8 --temp 0 -t 2

    # drafts by the prediction layer: the greedy text without them
    expect_status 0 "$shape: run" -- "$HEARTH" run -m "$m" -p "once upon a time" -n 40 --temp 0 -t 2
    mv "$tmpdir/out" "$tmpdir/plain"
    expect_status 0 "$shape: run --mtp" -- "$HEARTH" run -m "$m" -p "once upon a time" -n 40 --temp 0 -t 2 \
        --mtp --draft-fixed --draft-p-min 0
    cmp -s "$tmpdir/plain" "$tmpdir/out" || fail "$shape: --mtp changes the greedy text"
    grep -q "speculation (prediction layer): [1-9][0-9]* drafted" "$tmpdir/err" ||
        { fail "$shape: --mtp: no drafts"; sed 's/^/  stderr: /' "$tmpdir/err" >&2; }
    expect_status 2 "$shape: --mtp with -md" -- "$HEARTH" run -m "$m" -p x --mtp -md "$m"

    # chunk-parallel prefill: the same perplexity but for rounding
    ppl() { "$HEARTH" perplexity -m "$1" -f "$text" -c 128 --chunks 3 -t 2 ${2:+--chunk-size $2} 2>&1 |
            sed -n 's/.*PPL = \([0-9.e+]*\).*/\1/p' | tail -1; }
    p1=$(ppl "$m") p16=$(ppl "$m" 16) p64=$(ppl "$m" 64)
    if [ -n "$p1" ] && [ -n "$p16" ] && [ -n "$p64" ] &&
        awk -v a="$p1" -v b="$p16" -v c="$p64" 'BEGIN { d1 = (a - b) / a; d2 = (a - c) / a;
            exit !(d1 < 1e-4 && d1 > -1e-4 && d2 < 1e-4 && d2 > -1e-4) }'; then
        pass "$shape: chunks of 16 and 64 give the perplexity of token-by-token prefill ($p1, $p16, $p64)"
    else
        fail "$shape: chunked prefill: perplexity $p1 token by token, $p16 and $p64 in chunks"
    fi

    for q in F32 Q4_K_M; do
        f=$m
        if [ $q != F32 ]; then
            f="$tmpdir/$shape-$q.gguf"
            expect_status 0 "$shape: quantize $q" -- "$HEARTH" quantize -q "$m" "$f" $q
            "$HEARTH" inspect "$f" >"$tmpdir/types"
            grep -q "^  blk.0.ssm_conv1d.weight  *F32 " "$tmpdir/types" || fail "$shape: the convolution taps stay F32"
            grep -q "^  blk.0.attn_qkv.weight  *Q4_K " "$tmpdir/types" || fail "$shape: the projections are quantized"
            case $arch in
                *moe | *next)
                    grep -q "^  blk.0.ffn_gate_inp.weight  *F32 " "$tmpdir/types" || fail "$shape: the router stays F32"
                    grep -q "^  blk.0.ffn_gate_exps.weight  *Q4_K " "$tmpdir/types" ||
                        fail "$shape: the experts are quantized" ;;
            esac
        fi
        # shellcheck disable=SC2086
        if "$dump" -e 24 "$f" "$tmpdir/logits.f32" $tokens >"$tmpdir/engine" 2>"$tmpdir/err"; then
            pass "$shape: $q: prompt, decode and the serving engine agree bit for bit"
        else
            fail "$shape: $q: dump-logits: prompt, decode and engine"
            sed 's/^/  stderr: /' "$tmpdir/err" >&2
        fi
    done

    expect_status 1 "$shape: offload refused" -- "$HEARTH" run -m "$m" -p "once" -n 1 -ngl 99
    # the first part the CPU alone runs: the experts, else the recurrent layers
    case $arch in
        qwen35) why="the recurrent layers of $arch" ;;
        *) why="offloading mixture-of-experts layers ($arch, 8 experts)" ;;
    esac
    grep -qF "$why" "$tmpdir/err" || fail "$shape: the refusal names what cannot be offloaded"
    expect_status 0 "$shape: --gpu-fallback runs on the CPU" -- "$HEARTH" run -m "$m" -p "once" -n 1 -ngl 99 --gpu-fallback
done

# a model without prediction layers
m=$HEARTH_TEST_DATA/models/stories260K.gguf
if [ -f "$m" ]; then
    expect_status 1 "--mtp, no prediction layers" -- "$HEARTH" run -m "$m" -p x -n 1 --mtp
    grep -q "has no multi-token-prediction layers" "$tmpdir/err" || fail "--mtp without prediction layers: message"
fi

# hearth serve drafts with the layer by default and says so; --no-mtp
# does not; both give the same greedy text
if "$HEARTH" serve --help >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1; then
    if python3 - "$HEARTH" "$tmpdir/micro-qwen3next.gguf" <<'PY'
import json, re, subprocess, sys, time, urllib.request
hearth, model = sys.argv[1], sys.argv[2]
texts, bad = {}, False
for name, extra in (("default", []), ("--no-mtp", ["--no-mtp"])):
    p = subprocess.Popen([hearth, "serve", "-m", model, "-t", "2", "--host", "127.0.0.1", "--port", "0",
                          "--chat-template", "chatml"] + extra,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    lines, port = [], None
    try:
        deadline = time.time() + 60
        while port is None and time.time() < deadline:
            line = p.stderr.readline().decode()
            if not line:
                break
            lines.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                port = int(m.group(1))
        if port is None:
            print(f"FAIL: serve {name}: no port; {lines}", file=sys.stderr)
            bad = True
            continue
        body = json.dumps({"prompt": "once upon a time", "max_tokens": 32, "temperature": 0}).encode()
        for _ in range(600):
            try:
                req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                             {"Content-Type": "application/json"})
                j = json.load(urllib.request.urlopen(req, timeout=60))
                break
            except urllib.error.HTTPError as e:
                if e.code != 503:
                    raise
                time.sleep(0.1)
        texts[name] = j["choices"][0]["text"]
        spec = j["usage"].get("hearth_speculation")
        if (spec is not None) != (name == "default"):
            print(f"FAIL: serve {name}: usage.hearth_speculation is {spec}", file=sys.stderr)
            bad = True
    finally:
        p.terminate()
        # what readline() left in the reader's buffer and the rest: not
        # communicate(timeout=...), which reads the pipe past that buffer
        p.wait(timeout=30)
        rest = p.stderr.read().decode()
    said = "multi-token-prediction layer drafts" in "".join(lines) + rest
    if said != (name == "default"):
        print(f"FAIL: serve {name}: the start-up line on the prediction layer {'missing' if not said else 'shown'}",
              file=sys.stderr)
        bad = True
if len(texts) == 2 and texts["default"] != texts["--no-mtp"]:
    print(f"FAIL: serve: greedy text with drafts {texts['default']!r}, without {texts['--no-mtp']!r}", file=sys.stderr)
    bad = True
sys.exit(1 if bad else 0)
PY
    then
        pass "hearth serve drafts with the prediction layer by default, not with --no-mtp, and the text is the same"
    else
        fail "hearth serve with a prediction layer"
    fi
fi
finish

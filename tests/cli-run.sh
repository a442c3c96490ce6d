#!/bin/sh
# cli-run.sh -- hearth run: the reference greedy story, statistics, stop
# strings, limits and errors.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data models/stories260K.gguf reference/stories260K-greedy.txt

m="$HEARTH_TEST_DATA/models/stories260K.gguf"
ref="$HEARTH_TEST_DATA/reference/stories260K-greedy.txt"

# The reference continuation: the text after the header line "--- output",
# without the BOS marker.  The story does not end in a newline; hearth
# writes one after it, before the statistics.
sed -n '/^--- output/,$p' "$ref" | tail -n +2 | sed '1s/^<s> //' > "$tmpdir/want"

expect_status 0 "greedy story" -- "$HEARTH" run -m "$m" -p "Once upon a time" -n 100 --temp 0
cmp -s "$tmpdir/want" "$tmpdir/out" || { fail "greedy output differs from the reference"; diff "$tmpdir/want" "$tmpdir/out" >&2; }
for field in "prompt: 5 tokens (0 from the cache), " "time to first token:" "generated: 100 tokens" \
             "ms per output token" "finish reason: length" "sampling: temp=0 " "seed="; do
    grep -q "$field" "$tmpdir/err" || fail "statistics lack '$field'"
done

# The same with prefill in batches of one token and a single thread.
expect_status 0 "greedy story, batch 1" -- "$HEARTH" run -m "$m" -p "Once upon a time" -n 100 --temp 0 -b 1 -t 1
cmp -s "$tmpdir/want" "$tmpdir/out" || fail "greedy output with -b 1 differs"

# The statistics start on a line of their own, also on a shared output;
# text that ends in a newline gets no second one.
"$HEARTH" run -m "$m" -p "Once upon a time" -n 10 --temp 0 >"$tmpdir/both" 2>&1
[ "$(tail -c 1 "$tmpdir/both" | od -An -tx1 | tr -d ' ')" = 0a ] || fail "output does not end in a newline"
grep -q '^hearth: run: prompt: 5 tokens (0 from the cache), ' "$tmpdir/both" ||
    { fail "the statistics' first line is not on its own line"; cat "$tmpdir/both" >&2; }
grep -q 'Once upon a time.*hearth:' "$tmpdir/both" && fail "text and statistics share a line"
printf 'Once upon a time\n' > "$tmpdir/prompt"
expect_status 0 "prompt ending in a newline, -n 0" -- "$HEARTH" run -m "$m" -f "$tmpdir/prompt" -n 0
cmp -s "$tmpdir/prompt" "$tmpdir/out" || fail "a newline was added after text ending in one"

# Stop strings: never shown, found across token boundaries.
expect_status 0 "stop string" -- "$HEARTH" run -m "$m" -p "Once upon a time" -n 100 --temp 0 --stop "little girl"
[ "$(cat "$tmpdir/out")" = "Once upon a time, there was a " ] || fail "stop string output: '$(cat "$tmpdir/out")'"
grep -q "finish reason: stop" "$tmpdir/err" || fail "finish reason stop"
grep -q "stopped by --stop 'little girl'" "$tmpdir/err" || fail "names the stop string"
expect_status 0 "stop string not generated" -- "$HEARTH" run -m "$m" -p "Once upon a time" -n 20 --temp 0 --stop "zebra"
grep -q "finish reason: length" "$tmpdir/err" || fail "unmatched stop string: finish reason length"

# Reproducible sampling: the same seed gives the same text.
"$HEARTH" run -m "$m" -p "One day" -n 40 --temp 1 --seed 42 >"$tmpdir/s1" 2>/dev/null
"$HEARTH" run -m "$m" -p "One day" -n 40 --temp 1 --seed 42 >"$tmpdir/s2" 2>"$tmpdir/s2err"
cmp -s "$tmpdir/s1" "$tmpdir/s2" || fail "same seed, different text"
grep -q "seed=42 " "$tmpdir/s2err" || fail "seed reported"

# Limits: a prompt longer than the context, a full context.
expect_status 1 "prompt longer than the context" -- "$HEARTH" run -m "$m" -p "Once upon a time there was" -c 4
grep -q "the prompt has [0-9]* tokens but the context holds 4" "$tmpdir/err" || fail "names the prompt and context sizes"
expect_status 0 "context runs full" -- "$HEARTH" run -m "$m" -p "Once upon a time" -c 16 --temp 0
grep -q "finish reason: length (the context is full)" "$tmpdir/err" || fail "full context: finish reason length"
grep -q "context of 16 tokens is full" "$tmpdir/err" || fail "full context is explained"
expect_status 0 "-n 0 generates nothing" -- "$HEARTH" run -m "$m" -p "Once" -n 0 --no-echo
# seeds: 0 .. 2^63-1, the range hearth serve's JSON takes too
expect_status 0 "--seed 2^63-1" -- "$HEARTH" run -m "$m" -p "Once" -n 2 --seed 9223372036854775807
expect_status 2 "--seed 2^63 is out of range" -- "$HEARTH" run -m "$m" -p "Once" -n 2 --seed 9223372036854775808
[ -s "$tmpdir/out" ] && fail "-n 0 printed text"

# Verbose: the KV cache bytes (2 (K and V) x 64 positions x 5 layers x 4 KV
# heads x 8 dims x 2 bytes).
expect_status 0 "-v" -- "$HEARTH" run -m "$m" -p "Once" -n 1 -c 64 -v
grep -q "KV cache F16, 40960 bytes" "$tmpdir/err" || fail "-v reports the KV cache bytes"

# SIGINT mid-generation: the text so far and the partial statistics, exit
# status 130.  The model's end-of-sequence token is banned and the context
# is long, so generation is still running when the signal comes; the test
# waits for the first generated text before sending it.
micro="$HEARTH_TEST_DATA/models/micro-llama-f32.gguf"
if [ -f "$micro" ] && mkfifo "$tmpdir/fifo"; then
    "$HEARTH" run -m "$micro" -p "Once upon a time" -c 8192 -n 8000 --temp 1 --logit-bias 2-inf \
        --no-echo >"$tmpdir/fifo" 2>"$tmpdir/int.err" &
    pid=$!
    exec 3<"$tmpdir/fifo"
    head -c 16 <&3 >/dev/null
    kill -INT "$pid"
    # A program that ignores the signal must fail the test, not hang it.
    ( sleep 120; kill -KILL "$pid" 2>/dev/null ) &
    watchdog=$!
    cat <&3 >/dev/null
    wait "$pid"
    rc=$?
    kill "$watchdog" 2>/dev/null
    exec 3<&-
    [ "$rc" -eq 130 ] && pass "SIGINT: exit status 130" || fail "SIGINT: exit status $rc, expected 130"
    grep -q "finish reason: interrupted" "$tmpdir/int.err" || fail "SIGINT: finish reason interrupted"
    grep -q "generated: [1-9][0-9]* tokens" "$tmpdir/int.err" || fail "SIGINT: partial statistics"
fi

# Usage errors.
expect_status 2 "no prompt" -- "$HEARTH" run -m "$m"
expect_status 2 "two prompts" -- "$HEARTH" run -m "$m" -p a -f b
expect_status 2 "no model" -- "$HEARTH" run -p a
expect_status 2 "bad temperature" -- "$HEARTH" run -m "$m" -p a --temp -1
expect_status 2 "bad -n" -- "$HEARTH" run -m "$m" -p a -n x
expect_status 2 "--system without --chat" -- "$HEARTH" run -m "$m" -p a --system b
expect_status 1 "missing model" -- "$HEARTH" run -m "$tmpdir/none.gguf" -p a

# Every option is checked before anything is printed or a model is read:
# the grammar and the schema before the model, the token of a logit bias
# against the vocabulary before the prompt is echoed.
expect_status 2 "a malformed grammar" -- "$HEARTH" run -m "$tmpdir/none.gguf" -p a --grammar 'root ::= ('
grep -q "^hearth: run: --grammar: " "$tmpdir/err" || fail "the grammar is named"
expect_status 2 "a malformed schema" -- "$HEARTH" run -m "$tmpdir/none.gguf" -p a --json-schema '{"enum":[1,2'
grep -q "^hearth: run: --json-schema: " "$tmpdir/err" || fail "the schema is named"
printf 'root ::= "a" (' > "$tmpdir/bad.gbnf"
expect_status 2 "a malformed grammar file" -- "$HEARTH" run -m "$tmpdir/none.gguf" -p a --grammar-file "$tmpdir/bad.gbnf"
expect_status 2 "a logit bias beyond the vocabulary" -- "$HEARTH" run -m "$m" -p "Once upon" --logit-bias 99999+5
grep -q "^hearth: run: .*token 99999 is not in the vocabulary" "$tmpdir/err" || fail "the token is named"
[ -s "$tmpdir/out" ] && fail "a bad logit bias: the prompt is not echoed"

# A schema whose one property is an enum of 6,000 strings sharing their
# beginnings is served: the output is one of them.
awk 'BEGIN { printf "{\"type\":\"object\",\"properties\":{\"k\":{\"enum\":[";
             for (i = 0; i < 6000; i++) printf "%s\"v%d_%04d\"", i ? "," : "", i % 97, i;
             printf "]}},\"required\":[\"k\"]}" }' > "$tmpdir/wide.json"
for seed in 1 2 3; do
    expect_status 0 "an enum of 6000 strings, seed $seed" -- \
        "$HEARTH" run -m "$m" -p "Once" -n 60 --seed $seed --json-schema "$tmpdir/wide.json"
    v=$(sed -n 's/^Once{ *"k" *: *"\(v[0-9]*_[0-9]*\)" *}$/\1/p' "$tmpdir/out")
    n=${v#*_}
    [ -n "$v" ] && [ "$v" = "v$(expr "$n" % 97)_$n" ] ||
        fail "an enum of 6000 strings, seed $seed: '$(cat "$tmpdir/out")' is not one of them"
done

# Inputs are bounded: a file without end is refused, not read until memory
# runs out.
expect_status 1 "a prompt file without end" -- "$HEARTH" run -m "$m" -f /dev/zero
grep -q "^hearth: run: '/dev/zero' is larger than the 64 MiB a command reads" "$tmpdir/err" ||
    fail "the endless file is named"
expect_status 1 "--chat without a template" -- "$HEARTH" run -m "$m" -p a --chat
grep -q "no chat template" "$tmpdir/err" || fail "missing template is explained"

# Chat with a built-in template: control-token text is parsed in the
# template's output, not in the user's text.
expect_status 0 "--chat with a built-in template" -- "$HEARTH" run -m "$m" -p "Hi" --chat --chat-template chatml -n 5 --temp 0 -v
grep -q "(chat template)" "$tmpdir/err" || fail "chat prompt reported"

# A reasoning model's thinking (the template opens a <think> block) goes
# to standard error, the answer to standard output; a grammar constrains
# the answer alone, so stories260K, which never ends its thinking, thinks
# until --reasoning-budget writes </think>; --reasoning hide drops the
# thinking.
printf '%s\n' '{%- for m in messages %}<|im_start|>{{ m.role }}' '{{ m.content }}<|im_end|>' \
    '{% endfor -%}{%- if add_generation_prompt %}<|im_start|>assistant' '<think>' '{% endif %}' > "$tmpdir/think.jinja"
answer='root ::= "Answer."'
expect_status 0 "--chat with a template that thinks" -- "$HEARTH" run -m "$m" -p "Hi" --chat \
    --chat-template "$tmpdir/think.jinja" -n 60 --temp 0 --grammar "$answer" --reasoning-budget 4
[ "$(cat "$tmpdir/out")" = "Answer." ] || fail "the answer alone on standard output: '$(cat "$tmpdir/out")'"
thought=$(sed -n 1p "$tmpdir/err")
case $thought in ""|hearth:*) fail "the reasoning on standard error: '$thought'" ;; esac
grep -q "^hearth: run: reasoning: 4 tokens$" "$tmpdir/err" || fail "the statistics count 4 tokens of reasoning"
grep -q "the grammar is complete" "$tmpdir/err" || fail "the grammar ends the answer"
expect_status 0 "--reasoning hide" -- "$HEARTH" run -m "$m" -p "Hi" --chat \
    --chat-template "$tmpdir/think.jinja" -n 60 --temp 0 --grammar "$answer" --reasoning-budget 4 --reasoning hide
[ "$(cat "$tmpdir/out")" = "Answer." ] && ! grep -qF "$thought" "$tmpdir/err" ||
    fail "--reasoning hide shows the answer alone"
expect_status 0 "--reasoning-budget 0" -- "$HEARTH" run -m "$m" -p "Hi" --chat \
    --chat-template "$tmpdir/think.jinja" -n 60 --temp 0 --grammar "$answer" --reasoning-budget 0
[ "$(cat "$tmpdir/out")" = "Answer." ] && grep -q "^hearth: run: reasoning: 0 tokens$" "$tmpdir/err" ||
    fail "--reasoning-budget 0: no reasoning, the answer"
expect_status 0 "a grammar waits through the thinking" -- "$HEARTH" run -m "$m" -p "Hi" --chat \
    --chat-template "$tmpdir/think.jinja" -n 8 --temp 0 --grammar "$answer"
[ -s "$tmpdir/out" ] && fail "no answer after 8 tokens of thinking: '$(cat "$tmpdir/out")'"
grep -q "^hearth: run: reasoning: 8 tokens$" "$tmpdir/err" || fail "8 tokens of reasoning"
expect_status 2 "--reasoning maybe" -- "$HEARTH" run -m "$m" -p "Hi" --reasoning maybe
for bad in -5 abc 99999999999 ""; do
    expect_status 2 "--reasoning-budget '$bad'" -- "$HEARTH" run -m "$m" -p "Hi" --chat --reasoning-budget "$bad"
    [ -s "$tmpdir/out" ] && fail "--reasoning-budget '$bad': output before the error"
    grep -q "^hearth: run: --reasoning-budget: " "$tmpdir/err" || fail "--reasoning-budget '$bad' is explained"
done
expect_status 2 "--reasoning-budget without --chat" -- "$HEARTH" run -m "$m" -p "Hi" --reasoning-budget 3
grep -q "^hearth: run: --reasoning-budget needs --chat" "$tmpdir/err" || fail "--reasoning-budget needs --chat"

finish

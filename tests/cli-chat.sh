#!/bin/sh
# cli-chat.sh -- hearth chat: turns read from stdin, each the whole
# conversation as the prompt with the earlier turns' KV blocks taken from
# the prefix cache, /reset.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data models/stories260K.gguf

m="$HEARTH_TEST_DATA/models/stories260K.gguf"
opts="--chat-template chatml --temp 0 -n 12 -v"
# A system message long enough that the first turn fills a KV block (64
# positions) of the prefix cache.
system="You are a kind old man who tells stories."

printf 'Hello there\nTell me a story\n' > "$tmpdir/in"
expect_status 0 "two turns" -- sh -c "\"$HEARTH\" chat -m \"$m\" $opts --system \"$system\" < \"$tmpdir/in\""
[ "$(grep -c 'generated: 12 tokens' "$tmpdir/err")" -eq 2 ] || fail "two replies of 12 tokens"
grep 'prompt: ' "$tmpdir/err" | sed -n 1p | grep -q '(0 from the cache)' || fail "turn 1 found something in the cache"
turn2=$(grep 'prompt: ' "$tmpdir/err" | sed -n '2s/.*prompt: \([0-9]*\) tokens.*/\1/p')
cached2=$(grep 'prompt: ' "$tmpdir/err" | sed -n '2s/.*prompt: [0-9]* tokens (\([0-9]*\) from the cache).*/\1/p')

# The whole conversation as the second turn renders it: the first reply is
# the text of the first turn's output.
reply1=$(printf 'Hello there\n' | "$HEARTH" chat -m "$m" $opts --system "$system" 2>/dev/null)
python3 - "$system" "$reply1" > "$tmpdir/conv.json" <<'PY' || { echo "SKIP: python3 is needed" >&2; exit 77; }
import json, sys
system, reply = sys.argv[1], sys.argv[2].rstrip("\n")
print(json.dumps([{"role": "system", "content": system},
                  {"role": "user", "content": "Hello there"},
                  {"role": "assistant", "content": reply},
                  {"role": "user", "content": "Tell me a story"}]))
PY
"$HEARTH" template --chat-template chatml --messages "$tmpdir/conv.json" > "$tmpdir/conv.txt"
total=$("$HEARTH" tokenize -m "$m" --special --count -f "$tmpdir/conv.txt")
[ -n "$turn2" ] && [ -n "$cached2" ] && [ -n "$total" ] ||
    fail "could not read token counts (turn 2: '$turn2', cached: '$cached2', total: '$total')"
[ "$turn2" = "$total" ] || fail "turn 2's prompt has $turn2 tokens; the whole conversation is $total"
if [ "$cached2" -gt 0 ] 2>/dev/null && [ "$cached2" -lt "$turn2" ]; then
    pass "turn 2 took $cached2 of its $turn2 prompt tokens from the cache"
else
    fail "turn 2 took $cached2 of its $turn2 prompt tokens from the cache: the earlier turn was not reused"
fi

# /reset: the next turn's prompt is the conversation from the start, like
# the first, and gets the same reply.
printf 'Hello there\n/reset\nHello there\n' > "$tmpdir/in"
expect_status 0 "/reset" -- sh -c "\"$HEARTH\" chat -m \"$m\" $opts < \"$tmpdir/in\""
p1=$(grep 'prompt: ' "$tmpdir/err" | sed -n '1s/.*prompt: \([0-9]*\) tokens.*/\1/p')
p2=$(grep 'prompt: ' "$tmpdir/err" | sed -n '2s/.*prompt: \([0-9]*\) tokens.*/\1/p')
[ "$p1" = "$p2" ] || fail "after /reset the turn is prefilled whole ($p1 vs $p2)"
[ "$(sed -n 1p "$tmpdir/out")" = "$(sed -n 2p "$tmpdir/out")" ] || fail "after /reset the same reply"

# Each turn draws its own seed (the same message twice at temperature 1.5
# must not get one seed), and --seed makes the whole session repeat.
printf 'Hello there\n/reset\nHello there\n' > "$tmpdir/in"
expect_status 0 "two sampled turns" -- sh -c "\"$HEARTH\" chat -m \"$m\" --chat-template chatml --temp 1.5 -n 12 -v --seed 7 < \"$tmpdir/in\""
grep -o 'seed=[0-9]*' "$tmpdir/err" > "$tmpdir/seeds"
[ "$(wc -l < "$tmpdir/seeds")" -eq 2 ] && [ "$(sort -u "$tmpdir/seeds" | wc -l)" -eq 2 ] ||
    fail "two turns, two seeds: $(tr '\n' ' ' < "$tmpdir/seeds")"
cp "$tmpdir/out" "$tmpdir/out.first"
expect_status 0 "the session again" -- sh -c "\"$HEARTH\" chat -m \"$m\" --chat-template chatml --temp 1.5 -n 12 -v --seed 7 < \"$tmpdir/in\""
grep -o 'seed=[0-9]*' "$tmpdir/err" | cmp -s - "$tmpdir/seeds" && cmp -s "$tmpdir/out" "$tmpdir/out.first" ||
    fail "--seed 7 twice: the same seeds and replies"

printf '/exit\nnot read\n' > "$tmpdir/in"
expect_status 0 "/exit" -- sh -c "\"$HEARTH\" chat -m \"$m\" $opts < \"$tmpdir/in\""
[ -s "$tmpdir/out" ] && fail "/exit ends before the next line"
expect_status 1 "no chat template" -- sh -c "\"$HEARTH\" chat -m \"$m\" < /dev/null"
expect_status 2 "usage error" -- "$HEARTH" chat -m "$m" extra
for bad in -5 abc 99999999999; do
    expect_status 2 "--reasoning-budget $bad" -- "$HEARTH" chat -m "$m" --reasoning-budget "$bad"
    grep -q "^hearth: chat: --reasoning-budget: " "$tmpdir/err" || fail "--reasoning-budget $bad is explained"
done
finish

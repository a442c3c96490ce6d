#!/bin/sh
# cli-template.sh -- hearth template: exact output for built-in, file and
# model templates, option handling, and failures with their exit statuses.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data chat/conversations.json chat/qwen3.jinja vocab/vocab-llama3.gguf vocab/vocab-qwen3.gguf \
    models/stories260K.gguf

chat="$HEARTH_TEST_DATA/chat"

# same_output DESCRIPTION EXPECTED-FILE: the last output is exactly that file
same_output() {
    if cmp -s "$2" "$tmpdir/out"; then pass "$1: exact output"
    else fail "$1: output differs"; od -c "$tmpdir/out" | head -20 >&2; fi
}

# The default conversation with a built-in template; no newline is added.
printf '<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n' > "$tmpdir/want"
expect_status 0 "built-in chatml" -- "$HEARTH" template --chat-template chatml
same_output "built-in chatml" "$tmpdir/want"
[ -s "$tmpdir/err" ] && fail "nothing on stderr on success"

printf '<|im_start|>user\nHello!<|im_end|>\n' > "$tmpdir/want"
expect_status 0 "--no-generation-prompt" -- "$HEARTH" template -t chatml --no-generation-prompt
same_output "--no-generation-prompt" "$tmpdir/want"

# Messages from a file and from standard input, with token texts.
printf '[{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]' > "$tmpdir/msgs.json"
printf '<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nU [/INST]' > "$tmpdir/want"
expect_status 0 "llama2 with --messages" -- "$HEARTH" template -t llama2 --bos '<s>' --messages "$tmpdir/msgs.json"
same_output "llama2 with --messages" "$tmpdir/want"
"$HEARTH" template -t llama2 --bos '<s>' -f - < "$tmpdir/msgs.json" > "$tmpdir/out" 2>"$tmpdir/err" ||
    fail "messages from standard input"
same_output "messages from standard input" "$tmpdir/want"

# A template read from a file: the reference rendering of the shared llama3
# template for the "user-only" conversation.
printf '[{"role": "user", "content": "What is the capital of France?"}]' > "$tmpdir/user.json"
printf '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat is the capital of France?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n' > "$tmpdir/want"
expect_status 0 "template file" -- "$HEARTH" template --chat-template "$chat/llama3.jinja" \
    --bos '<|begin_of_text|>' --eos '<|end_of_text|>' -f "$tmpdir/user.json"
same_output "template file" "$tmpdir/want"

# The same from the model: its tokenizer.chat_template and its BOS text.
expect_status 0 "template of a model" -- "$HEARTH" template -m "$HEARTH_TEST_DATA/vocab/vocab-llama3.gguf" \
    -f "$tmpdir/user.json"
same_output "template of a model" "$tmpdir/want"
# --bos overrides the model's token text
expect_status 0 "--bos overrides the model" -- "$HEARTH" template -m "$HEARTH_TEST_DATA/vocab/vocab-llama3.gguf" \
    -f "$tmpdir/user.json" --bos 'BOS'
grep -q '^BOS<|start_header_id|>' "$tmpdir/out" || fail "--bos overrides the model's BOS text"

# qwen3: model template == shared file with the model's EOS; --vars reaches it.
"$HEARTH" template -m "$HEARTH_TEST_DATA/vocab/vocab-qwen3.gguf" -f "$tmpdir/msgs.json" > "$tmpdir/model.txt" ||
    fail "qwen3 model template"
expect_status 0 "qwen3 file" -- "$HEARTH" template -t "$chat/qwen3.jinja" --eos '<|im_end|>' -f "$tmpdir/msgs.json"
same_output "qwen3 model and file agree" "$tmpdir/model.txt"
expect_status 0 "--vars" -- "$HEARTH" template -m "$HEARTH_TEST_DATA/vocab/vocab-qwen3.gguf" \
    --vars '{"enable_thinking": false}'
printf '<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n' > "$tmpdir/want"
same_output "--vars enable_thinking" "$tmpdir/want"

# Tools and the date.
printf '[{"type": "function", "function": {"name": "f"}}]' > "$tmpdir/tools.json"
printf '{{ tools[0].function.name }} {{ date_string }} {{ strftime_now("%%A") }}' > "$tmpdir/t.jinja"
printf 'f 29 Nov 2026 Sunday' > "$tmpdir/want"
expect_status 0 "--tools and --date" -- "$HEARTH" template -t "$tmpdir/t.jinja" --tools "$tmpdir/tools.json" \
    --date 2026-11-29
same_output "--tools and --date" "$tmpdir/want"
expect_status 2 "invalid --date (a usage error)" -- "$HEARTH" template -t chatml --date "30 Feb 2026"
grep -q "is not a valid date" "$tmpdir/err" || fail "invalid date is named"

# A template that raises: status 1, its message, nothing on stdout.
expect_status 1 "raise_exception" -- "$HEARTH" template -t "$chat/google-gemma-2-2b-it.jinja" -f "$tmpdir/msgs.json"
grep -q "^hearth: template: chat template line 1, column [0-9]*: System role not supported$" "$tmpdir/err" ||
    fail "the raised message with its position"
[ -s "$tmpdir/out" ] && fail "nothing on stdout when the template raises"

# Broken input.
printf '{%% for m in messages %%}' > "$tmpdir/bad.jinja"
expect_status 1 "unterminated for" -- "$HEARTH" template -t "$tmpdir/bad.jinja"
grep -q "bad.jinja: chat template line 1, column 24: unexpected end of template" "$tmpdir/err" ||
    fail "parse error names the file, line and column"
printf '[{"role": "user",}]' > "$tmpdir/bad.json"
expect_status 1 "malformed messages" -- "$HEARTH" template -t chatml -f "$tmpdir/bad.json"
grep -q "messages: byte 17 (line 1, column 18)" "$tmpdir/err" || fail "malformed JSON names the byte"
expect_status 1 "model without a template" -- "$HEARTH" template -m "$HEARTH_TEST_DATA/models/stories260K.gguf"
grep -q "has no chat template" "$tmpdir/err" || fail "missing template is named"
expect_status 1 "missing template file" -- "$HEARTH" template -t "$tmpdir/nonexistent.jinja"
expect_status 1 "missing messages file" -- "$HEARTH" template -t chatml -f "$tmpdir/nonexistent.json"

# Usage errors.
expect_status 2 "neither -m nor --chat-template" -- "$HEARTH" template
expect_status 2 "both -m and --chat-template" -- "$HEARTH" template -m x.gguf -t chatml
expect_status 2 "unknown option" -- "$HEARTH" template -t chatml --no-such-option
expect_status 2 "missing option argument" -- "$HEARTH" template -t
expect_status 2 "stray argument" -- "$HEARTH" template -t chatml extra
expect_status 2 "a malformed --date" -- "$HEARTH" template -t chatml --date bogus
grep -q "^hearth: template: date 'bogus' is not a valid date" "$tmpdir/err" || fail "the bad date is named"
expect_status 2 "--vars not an object" -- "$HEARTH" template -t chatml --vars '[1]'
grep -q "^hearth: template: extra variables: expected a JSON object" "$tmpdir/err" || fail "the bad --vars is named"
expect_status 2 "--vars malformed" -- "$HEARTH" template -m "$tmpdir/nonexistent.gguf" --vars '{"a":'
[ -s "$tmpdir/out" ] && fail "a bad option prints nothing on stdout"
expect_status 2 "-hf and -m" -- "$HEARTH" template -hf o/r:m.gguf -m x.gguf
grep -q "already given" "$tmpdir/err" || fail "template takes -hf as a model source"
expect_status 0 "--help" -- "$HEARTH" template --help
grep -q "chatml, gemma, llama2, llama3, mistral, phi3, rwkv-world, zephyr" "$tmpdir/out" || fail "--help lists the built-in templates"
grep -q -- "-hf, --hf OWNER/REPO" "$tmpdir/out" || fail "--help lists -hf"

# Every built-in template is named wherever the pages list them.
names=$(sed -n 's/.*a built-in template (\([^)]*\)).*/\1/p' "$tmpdir/out" | tr -d ',')
[ -n "$names" ] || fail "the built-in names are in --help"
for page in hearth-run.1 hearth-serve.1 hearth-template.1 hearth-tokenize.1; do
    for name in $names; do
        grep -q "$name" "$HEARTH_SRCDIR/man/$page" || fail "$page names the built-in template $name"
    done
done

finish

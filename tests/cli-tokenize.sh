#!/bin/sh
# cli-tokenize.sh -- hearth tokenize on the shared vocabularies: the output
# formats, special tokens, BOS, files and standard input, and errors.
. "${HEARTH_SRCDIR:-.}/tests/lib.sh"
require_data vocab/ggml-vocab-llama-spm.gguf vocab/vocab-qwen3.gguf vocab/vocab-llama3.gguf \
    vocab/tokenizer-tests.inp models/stories260K.gguf

spm="$HEARTH_TEST_DATA/vocab/ggml-vocab-llama-spm.gguf"
qwen="$HEARTH_TEST_DATA/vocab/vocab-qwen3.gguf"
llama3="$HEARTH_TEST_DATA/vocab/vocab-llama3.gguf"
stories="$HEARTH_TEST_DATA/models/stories260K.gguf"

# Byte-level BPE needs PCRE2; without it such vocabularies fail clearly.
if ! "$HEARTH" --version -v | grep -q pcre2; then
    expect_status 1 "BPE without PCRE2" -- "$HEARTH" tokenize -m "$qwen" a
    grep -q "without PCRE2" "$tmpdir/err" || fail "the missing PCRE2 is named"
    qwen= llama3=
fi

# The ids the reference tokenizer gives for this text (no BOS), from the
# shared reference file.
expect_status 0 "--ids" -- "$HEARTH" tokenize -m "$spm" --ids --no-bos "Hello world"
[ "$(cat "$tmpdir/out")" = "15043 3186" ] || fail "--ids prints the ids on one line"
[ -s "$tmpdir/err" ] && fail "nothing on stderr on success"

expect_status 0 "BOS by default" -- "$HEARTH" tokenize -m "$stories" --ids "Once upon a time"
[ "$(cat "$tmpdir/out")" = "1 403 407 261 378" ] || fail "Once upon a time as the reference tokenizes it"

expect_status 0 "pieces" -- "$HEARTH" tokenize -m "$stories" "Once upon a time"
printf '1\t"<s>"\n403\t" Once"\n407\t" upon"\n261\t" a"\n378\t" time"\n' > "$tmpdir/want"
cmp -s "$tmpdir/out" "$tmpdir/want" || fail "one token per line: id, tab, quoted piece"

expect_status 0 "escaped pieces" -- "$HEARTH" tokenize -m "$spm" --no-bos "$(printf 'a\tb\n\342\202')"
grep -q '"\\t"' "$tmpdir/out" || fail "a tab is shown as \\t"
grep -q '"\\n"' "$tmpdir/out" || fail "a newline is shown as \\n"
grep -q '"\\xe2"' "$tmpdir/out" || fail "a byte token is shown as \\xHH"

expect_status 0 "--count" -- "$HEARTH" tokenize -m "$spm" --count "Hello world"
[ "$(cat "$tmpdir/out")" = "3" ] || fail "--count: BOS and two tokens"

# Special tokens only with --special.
expect_status 0 "--special" -- "$HEARTH" tokenize -m "$spm" --ids --special "<s>Hello"
[ "$(cat "$tmpdir/out")" = "1 1 15043" ] || fail "--special matches <s>"
expect_status 0 "no --special" -- "$HEARTH" tokenize -m "$spm" --ids --no-bos "<s>"
grep -qw 1 "$tmpdir/out" && fail "without --special <s> is ordinary text"
if [ -n "$qwen" ]; then
    chat='<|im_start|>user'
    expect_status 0 "--special (BPE)" -- "$HEARTH" tokenize -m "$qwen" --ids --special "$chat"
    [ "$(cat "$tmpdir/out")" = "151644 872" ] || fail "--special matches <|im_start|>"
    expect_status 0 "no --special (BPE)" -- "$HEARTH" tokenize -m "$qwen" --ids "$chat"
    grep -q 151644 "$tmpdir/out" && fail "without --special <|im_start|> is ordinary text"
    expect_status 0 "--count (BPE)" -- "$HEARTH" tokenize -m "$llama3" --count "Hello world"
    [ "$(cat "$tmpdir/out")" = "3" ] || fail "--count: BOS and two tokens (BPE)"
fi

# The reference cases, from a file and from standard input, give the same
# count either way.
inp="$HEARTH_TEST_DATA/vocab/tokenizer-tests.inp"
expect_status 0 "-f FILE" -- "$HEARTH" tokenize -m "$spm" --count -f "$inp"
from_file=$(cat "$tmpdir/out")
"$HEARTH" tokenize -m "$spm" --count -f - < "$inp" > "$tmpdir/stdin.out" 2>&1 ||
    fail "-f - reads standard input"
[ "$(cat "$tmpdir/stdin.out")" = "$from_file" ] || fail "-f - and -f FILE agree"
[ "$from_file" -gt 100 ] || fail "the reference cases make more than 100 tokens"

# Errors.
expect_status 2 "no model" -- "$HEARTH" tokenize "text"
expect_status 2 "no text" -- "$HEARTH" tokenize -m "$spm"
expect_status 2 "text and file" -- "$HEARTH" tokenize -m "$spm" -f "$inp" "text"
expect_status 2 "two texts" -- "$HEARTH" tokenize -m "$spm" a b
expect_status 2 "--ids and --count" -- "$HEARTH" tokenize -m "$spm" --ids --count a
expect_status 2 "unknown option" -- "$HEARTH" tokenize -m "$spm" --bogus a
grep -q "unknown option '--bogus'" "$tmpdir/err" || fail "unknown option is named"
expect_status 1 "missing model" -- "$HEARTH" tokenize -m "$tmpdir/missing.gguf" a
expect_status 1 "missing file" -- "$HEARTH" tokenize -m "$spm" -f "$tmpdir/missing.txt"
grep -q "missing.txt" "$tmpdir/err" || fail "missing file is named"
printf 'not a model\n' > "$tmpdir/text.gguf"
expect_status 1 "not a GGUF file" -- "$HEARTH" tokenize -m "$tmpdir/text.gguf" a
expect_status 0 "--help" -- "$HEARTH" tokenize --help
grep -q "usage: hearth tokenize" "$tmpdir/out" || fail "--help prints usage"

# A model with no tokenizer: a model file with its tokenizer keys renamed
# (same length, so the file stays valid).
if command -v perl >/dev/null 2>&1; then
    perl -pe 's/tokenizer\.ggml\.model/tokenizer.ggml.mode1/g' "$stories" > "$tmpdir/notok.gguf"
    expect_status 1 "no tokenizer" -- "$HEARTH" tokenize -m "$tmpdir/notok.gguf" a
    grep -q "no tokenizer" "$tmpdir/err" || fail "a model without tokenizer is named"
fi
if command -v perl >/dev/null 2>&1 && [ -n "$qwen" ]; then
    # An unknown pre-tokenizer: "qwen2" renamed in the vocabulary.
    perl -pe 's/\x05\x00\x00\x00\x00\x00\x00\x00qwen2/\x05\x00\x00\x00\x00\x00\x00\x00qwen9/' \
        "$qwen" > "$tmpdir/pre.gguf"
    expect_status 1 "unknown pre-tokenizer" -- "$HEARTH" tokenize -m "$tmpdir/pre.gguf" a
    grep -q "unknown pre-tokenizer 'qwen9'" "$tmpdir/err" || fail "the unknown pre-tokenizer is named"
    grep -q "llama-bpe" "$tmpdir/err" || fail "the supported pre-tokenizers are listed"
    grep -q -- "--default-pretokenizer" "$tmpdir/err" || fail "the way out is named"
    expect_status 0 "--default-pretokenizer" -- "$HEARTH" tokenize -m "$tmpdir/pre.gguf" \
        --default-pretokenizer --ids "Hello"
    [ "$(cat "$tmpdir/out")" = "9707" ] || fail "--default-pretokenizer tokenizes anyway"
fi

# --chat: the tokens of exactly the text `hearth template` renders for the
# same conversation, tokenized with special tokens parsed.
if [ -n "$qwen" ]; then
    printf '[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi <|im_end|> there"}]' \
        > "$tmpdir/conv.json"
    "$HEARTH" template -m "$qwen" --messages "$tmpdir/conv.json" > "$tmpdir/rendered" ||
        fail "template renders the conversation"
    "$HEARTH" tokenize -m "$qwen" --special --no-bos --ids -f "$tmpdir/rendered" > "$tmpdir/want" ||
        fail "tokenize the rendered text"
    expect_status 0 "--chat" -- "$HEARTH" tokenize -m "$qwen" --chat --system "Be brief." \
        --ids "Hi <|im_end|> there"
    cmp -s "$tmpdir/out" "$tmpdir/want" || fail "--chat tokens are the rendered template's tokens"
    # The template's markers are special tokens; the user's text stays text.
    expect_status 0 "--chat pieces" -- "$HEARTH" tokenize -m "$qwen" --chat "Hi"
    [ "$(head -n 1 "$tmpdir/out" | cut -f 2)" = '"<|im_start|>"' ] ||
        fail "--chat begins with the template's first marker"
fi
expect_status 1 "--chat without a template" -- "$HEARTH" tokenize -m "$stories" --chat "Hi"
grep -q "no chat template" "$tmpdir/err" || fail "a model without a chat template is named"
expect_status 0 "--chat-template" -- "$HEARTH" tokenize -m "$stories" --chat --chat-template chatml \
    --count "Hi"
[ "$(cat "$tmpdir/out")" -gt 5 ] || fail "--chat-template chatml renders the markers"
expect_status 2 "--system without --chat" -- "$HEARTH" tokenize -m "$stories" --system x "Hi"
expect_status 2 "--chat with --no-bos" -- "$HEARTH" tokenize -m "$stories" --chat --no-bos "Hi"

# Inputs are bounded.
expect_status 1 "a text file without end" -- "$HEARTH" tokenize -m "$spm" -f /dev/urandom
grep -q "^hearth: tokenize: '/dev/urandom' is larger than the 64 MiB a command reads" "$tmpdir/err" ||
    fail "the endless file is named"
# -hf and --url like every command that takes -m
expect_status 2 "-hf and -m" -- "$HEARTH" tokenize -hf o/r:m.gguf -m "$spm" hi
grep -q "already given" "$tmpdir/err" || fail "tokenize takes -hf as a model source"
expect_status 0 "--help" -- "$HEARTH" tokenize --help
grep -q -- "--url URL" "$tmpdir/out" || fail "--help lists --url"

finish

// tokenizer-o200k.mjs -- hearth's o200k tokenizer (byte-level BPE with
// the o200k pre-tokenizer expression, as gpt-oss uses it) against the
// Hugging Face tokenizer implementation (the npm package
// @huggingface/tokenizers, the JavaScript port of the tokenizers library)
// reading gpt-oss's published tokenizer.json.
//
// From tokenizer.json this writes the vocabulary-only GGUF file that a
// gpt-oss GGUF carries: tokenizer.ggml.model "gpt2", tokenizer.ggml.pre
// "gpt-4o", the tokens in their byte-to-unicode spelling, the merges in
// rank order, the harmony markers (<|start|>, <|message|>, <|return|>, ...)
// as control tokens at their o200k_harmony ids 199998-200018, and unused
// [PADn] rows up to the model's 201,088 embedding rows.  Then every case
// of the shared tokenizer-tests.inp and this file's own harder ones is
// tokenized by both (hearth's side by tests/tokenize-cases, which loads
// the vocabulary once), without special tokens, and a harmony
// conversation with them; the first text on which the two differ is named
// with both token lists.
//
//   node tokenizer-o200k.mjs TOKENIZE-CASES TOKENIZER.json TOKENIZER_CONFIG.json TESTS.inp TMPDIR
import { Tokenizer } from "@huggingface/tokenizers";
import { readFileSync, writeFileSync } from "node:fs";
import { readCases, runTokenizeCases } from "./tokenize-cases.mjs";

const [tokenizeCases, jsonPath, configPath, inpPath, tmp] = process.argv.slice(2);
const tokenizerJson = JSON.parse(readFileSync(jsonPath, "utf8"));
const tokenizerConfig = JSON.parse(readFileSync(configPath, "utf8"));
const N_ROWS = 201088; // gpt-oss's vocab_size: its embedding rows

// ---- the vocabulary -------------------------------------------------------

const model = tokenizerJson.model;
if (model.type !== "BPE") throw new Error(`tokenizer.json: model ${model.type}, not BPE`);
const tokens = new Array(N_ROWS).fill(null);
const types = new Array(N_ROWS).fill(5); // unused
for (const [text, id] of Object.entries(model.vocab)) {
  tokens[id] = text;
  types[id] = 1; // normal
}
for (const added of tokenizerJson.added_tokens) {
  tokens[added.id] = added.content;
  types[added.id] = added.special ? 3 : 4; // control, user-defined
}
for (let id = 0; id < N_ROWS; id++) if (tokens[id] === null) tokens[id] = `[PAD${id}]`;
const merges = model.merges.map((m) => (Array.isArray(m) ? m.join(" ") : m));

// The harmony markers where o200k_harmony has them.
const harmony = {
  "<|startoftext|>": 199998, "<|endoftext|>": 199999, "<|return|>": 200002,
  "<|constrain|>": 200003, "<|channel|>": 200005, "<|start|>": 200006, "<|end|>": 200007,
  "<|message|>": 200008, "<|call|>": 200012, "<|endofprompt|>": 200018,
};
for (const [text, id] of Object.entries(harmony)) {
  if (tokens[id] !== text || types[id] !== 3) {
    throw new Error(`tokenizer.json: ${text} is not the control token ${id} (${tokens[id]})`);
  }
}
const idOf = (name) => {
  const text = tokenizerConfig[name];
  const id = harmony[typeof text === "string" ? text : text?.content];
  if (id === undefined) throw new Error(`tokenizer_config.json: ${name} is not a harmony marker`);
  return id;
};

// A GGUF (version 3) of metadata only.
function gguf(entries) {
  const parts = [];
  const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); parts.push(b); };
  const u64 = (v) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); parts.push(b); };
  const str = (s) => { const b = Buffer.from(s, "utf8"); u64(b.length); parts.push(b); };
  parts.push(Buffer.from("GGUF"));
  u32(3);
  u64(0); // tensors
  u64(entries.length);
  for (const [key, type, value] of entries) {
    str(key);
    if (type === "str") { u32(8); str(value); }
    else if (type === "u32") { u32(4); u32(value); }
    else if (type === "bool") { u32(7); parts.push(Buffer.from([value ? 1 : 0])); }
    else if (type === "str[]") { u32(9); u32(8); u64(value.length); for (const s of value) str(s); }
    else if (type === "i32[]") {
      u32(9); u32(5); u64(value.length);
      const b = Buffer.alloc(4 * value.length);
      value.forEach((v, i) => b.writeInt32LE(v, 4 * i));
      parts.push(b);
    } else throw new Error(`GGUF value type ${type}`);
  }
  const size = parts.reduce((n, b) => n + b.length, 0);
  parts.push(Buffer.alloc((32 - (size % 32)) % 32)); // the (empty) data section's alignment
  return Buffer.concat(parts);
}

const vocabPath = `${tmp}/o200k.gguf`;
writeFileSync(vocabPath, gguf([
  ["general.architecture", "str", "gpt-oss"],
  ["general.name", "str", "gpt-oss vocabulary"],
  ["tokenizer.ggml.model", "str", "gpt2"],
  ["tokenizer.ggml.pre", "str", "gpt-4o"],
  ["tokenizer.ggml.tokens", "str[]", tokens],
  ["tokenizer.ggml.token_type", "i32[]", types],
  ["tokenizer.ggml.merges", "str[]", merges],
  ["tokenizer.ggml.bos_token_id", "u32", idOf("bos_token")],
  ["tokenizer.ggml.eos_token_id", "u32", idOf("eos_token")],
  ["tokenizer.ggml.padding_token_id", "u32", idOf("pad_token")],
  ["tokenizer.ggml.add_bos_token", "bool", false],
]));

// ---- the texts ------------------------------------------------------------

const shared = readCases(inpPath);

const own = [
  // CJK, kana, Hangul, full-width forms
  "我想在apple工作1314151天～", "日本語のテキストです。カタカナとひらがな、漢字。",
  "한국어 문장입니다. 서울특별시", "ＡＢＣ ｆｕｌｌ－ｗｉｄｔｈ ０１２３",
  // emoji: ZWJ sequences, skin tones, flags, keycaps
  "👨‍👩‍👧‍👦 family 🏳️‍🌈 flag 👍🏽 ok 🇫🇷🇩🇪 1️⃣#️⃣",
  // digits: groups of up to three, any Unicode number
  "1234567890", "3.14159265358979", "1,000,000 and 12345678901234567890",
  " 2026-12-06T14:08:00Z", "٣٤٥٦٧ ۱۲۳۴ ०१२३४५", "½ ¾ ⅓ Ⅻ ² x²+y³", "v1.2.3-rc4 0x1F 1e-9",
  // contractions in every case, and apostrophes that are not
  "I'M HERE, YOU'LL SEE, IT'S", "don't DON'T Don'T dOn'T we'Ve they'RE she'D",
  "'S 'LL 'd 'D 's 'll 't 'T 're 'RE 've 'VE 'm 'M", "JOHN'S o'clock rock'n'roll ''quoted''",
  "It’s a curly apostrophe’s turn", " 's", "x's", "X'S",
  // capitalised-word shapes and marks
  "HTTPServer HelloWorld iPhone McDonald's XMLHttpRequest camelCaseWord snake_case_word",
  "ǄEMAL ǅemal ǆemal ʰʲʷ ᵃᵇ", "e\u0301te\u0301 Cafe\u0301 naïve résumé", "नमस्ते दुनिया",
  "Ελληνικά ΑΒΓ αβγ Ωmega", "Pneumonoultramicroscopicsilicovolcanoconiosis",
  // whitespace: runs, tabs, newlines, carriage returns, other spaces
  "a  b   c    d     e", "  \t  leading and trailing  \t ", "\r\n\r\nwindows\r\nlines\r\n",
  "line1\n\n\nline2 \n  \nend   \n", " ".repeat(40) + "x", "\t\t\tindent\n\t\t\tindent",
  "a\u00a0b\u2003c\u3000d\u202fe", "a\u0085b\u2028c\u2029d", "x\u00a0\u00a0\u00a0y\u3000\u3000",
  // characters that are not white space: U+180E (PCRE2's \h lists it), U+200B, U+FEFF
  "word\u180eword", "!\u180e! ?\u180e\u180e x", "\u200bzero\u200dwidth\ufeff", "!\u200b!",
  // punctuation with its newlines and slashes, code, markup
  "path/to/file.txt\n// comment\n/* block */", "https://example.com/a/b?c=d&e=f#g",
  "foo()\n\n{bar}\n", "!!!\n\n...///\n--", "x;\n//y\n}\r\n/z\n\n/", "def f(x):\n    return x**2  # square\n",
  "int main(void) { return 0; }\n", '{"key": [1, 2, 3], "nested": {"a": null}}',
  "# Title\n\n- item one\n- item two\n\n**bold** _it_ `code`", "<div class=\"x\">&amp;</div>",
  // mixed scripts
  "Hello мир 世界 مرحبا שלום नमस्ते สวัสดี", "Москва2026год", "abcабв", "日本Japan日本",
  "The price is $1,234.56 (≈€1.1k)!", "¿Qué? ¡Sí! «Ça va» — “quotes”",
];

// With special tokens parsed: a harmony conversation and a tool call.
const specials = [
  "<|start|>system<|message|>You are a helpful assistant.<|end|><|start|>user<|message|>What is 2+2?<|end|>" +
    "<|start|>assistant<|channel|>analysis<|message|>Simple arithmetic.<|end|>" +
    "<|start|>assistant<|channel|>final<|message|>4<|return|>",
  "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" +
    '{"city":"Tokyo"}<|call|>',
  "text<|endoftext|>more<|startoftext|> <|endofprompt|>\n",
];
for (const text of shared.concat(own)) {
  if (Object.keys(harmony).some((marker) => text.includes(marker))) {
    throw new Error(`${JSON.stringify(text)} holds a special token's text`);
  }
}

// ---- both tokenizers ------------------------------------------------------

const reference = new Tokenizer(tokenizerJson, tokenizerConfig);

// hearth's ids for each text, one line each: the vocabulary loaded once
// for them all (tests/tokenize-cases).
function hearthTokenize(name, texts, special) {
  const args = (special ? ["--special"] : []).concat([vocabPath]);
  return runTokenizeCases(tokenizeCases, args, `${tmp}/${name}.inp`, texts);
}

const groups = [
  ["tokenizer-tests.inp", shared, false],
  ["tokenizer-o200k.mjs", own, false],
  ["tokenizer-o200k.mjs, special tokens parsed", specials, true],
];
let compared = 0;
let failed = 0;
for (const [group, texts, special] of groups) {
  const got = hearthTokenize(`cases${compared}`, texts, special);
  texts.forEach((text, i) => {
    // The Hugging Face tokenizer always parses its added tokens.
    const want = reference.encode(text, { add_special_tokens: false });
    compared++;
    if (got[i] === want.ids.join(" ")) return;
    if (failed++ > 0) return; // the first difference is named
    const pieces = (ids) => JSON.stringify(ids.map((id) => reference.id_to_token(id) ?? tokens[id]));
    const ids = got[i] === "" ? [] : got[i].split(" ").map(Number);
    console.error(`${group}: ${JSON.stringify(text)} is tokenized differently`);
    console.error(`  reference: ${want.ids.join(" ")}`);
    console.error(`             ${pieces(want.ids)}`);
    console.error(`  hearth:    ${got[i]}`);
    console.error(`             ${pieces(ids)}`);
  });
}

if (failed) {
  console.error(`${failed} of ${compared} texts differ from the reference`);
  process.exit(1);
}
console.log(`${compared} texts (${shared.length} shared, ${own.length + specials.length} more) ` +
  "tokenized as the Hugging Face tokenizer does");

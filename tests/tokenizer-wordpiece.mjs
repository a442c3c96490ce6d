// tokenizer-wordpiece.mjs -- hearth's WordPiece tokenizer (tokenizer
// model "bert": BERT's basic tokenization, then greedy longest-match
// word pieces) against the Hugging Face tokenizer implementation (the npm
// package @huggingface/tokenizers, the JavaScript port of the tokenizers
// library).
//
// There is no shared WordPiece vocabulary, so this writes one from the
// texts themselves: the control tokens of BERT's layout ([PAD] 0, [UNK]
// 100, [CLS] 101, [SEP] 102, [MASK] 103), every character of the
// (normalised) texts but a few left out so that words fall back to
// [UNK], as a word start and as a continuation, the words' first two to
// four characters as word starts and their two- and three-character
// pieces at even offsets as continuations.  The same vocabulary goes into
// a tokenizer.json (BertNormalizer, BertPreTokenizer, WordPiece with
// "##", [CLS] ... [SEP] around a text) and into the vocabulary-only GGUF
// hearth reads, in the GGUF converters' form: a word start "▁piece", a
// continuation "piece" without its "##", control tokens as they are.
// Two vocabularies are checked: an uncased one (lower-cased, accents
// stripped, the default of a file without the normaliser keys) and a
// cased one (tokenizer.ggml.normalizer.lowercase false).  Every case of
// the shared tokenizer-tests.inp and this file's own is tokenized by both
// sides, without and with the added [CLS] and [SEP]; the first text on
// which they differ is named with both token lists.
//
//   node tokenizer-wordpiece.mjs TOKENIZE-CASES TESTS.inp TMPDIR
import { Tokenizer } from "@huggingface/tokenizers";
import { writeFileSync } from "node:fs";
import { readCases, runTokenizeCases } from "./tokenize-cases.mjs";

const [tokenizeCases, inpPath, tmp] = process.argv.slice(2);

const shared = readCases(inpPath);
const own = [
  "Hello, World! HELLO world.", "naïve café résumé Ångström façade", "e\u0301te\u0301 Cafe\u0301",
  "我想在apple工作1314151天～", "日本語のテキストです。カタカナ", "한국어 문장입니다. 서울특별시",
  "Ελληνικά ΑΒΓ αβγ", "Москва2026год", "tab\there\nnew line\r\nend", "a\u00a0b\u2003c\u3000d",
  "zero\u200bwidth\u200dchars\ufeff", "ctrl\u0001chars\u0007here", "don't stop-believing (now)",
  "$100 + 20% = ¥5,000?!", "https://example.com/a/b?c=d&e=f#g", "x".repeat(101), "y".repeat(100),
  "supercalifragilisticexpialidocious", "ǅemal ǆ İstanbul ß ﬁ", "👍 emoji 🇫🇷 flags", "",
  "   ", "¿Qué? ¡Sí! «Ça va» — “quotes”", "under_score and-dash", "[CLS] literal [SEP] text",
];

// ---- the vocabulary -------------------------------------------------------

const LEFT_OUT = new Set(["q", "Q", "ж", "ж".toUpperCase(), "👍"]); // words with these are [UNK]
const SPECIAL = { "[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103 };

function normalise(text, lowercase) {
  let t = text.replace(/[\u0000\ufffd]|(?![\t\n\r])\p{C}/gu, "");
  if (lowercase) t = t.normalize("NFD").replace(/\p{Mn}/gu, "").toLowerCase();
  return t;
}

function words(text) {
  return text.split(/[\s]+|(\p{P}|[\u0021-\u002f\u003a-\u0040\u005b-\u0060\u007b-\u007e]|[\u3400-\u9fff])/u)
    .filter((w) => w);
}

function vocabulary(lowercase) {
  const starts = new Set(), conts = new Set();
  for (const text of shared.concat(own)) {
    for (const w of words(normalise(text, lowercase))) {
      const chars = [...w];
      for (const c of chars) {
        if (LEFT_OUT.has(c)) continue;
        starts.add(c);
        conts.add(c);
      }
      if (chars.some((c) => LEFT_OUT.has(c))) continue;
      for (let n = 2; n <= 4 && n <= chars.length; n++) starts.add(chars.slice(0, n).join(""));
      for (let i = 2; i < chars.length; i += 2) {
        for (let n = 2; n <= 3 && i + n <= chars.length; n++) conts.add(chars.slice(i, i + n).join(""));
      }
    }
  }
  const tokens = new Array(104).fill(null).map((_, i) => `[unused${i}]`);
  const types = new Array(104).fill(3);
  for (const [text, id] of Object.entries(SPECIAL)) tokens[id] = text;
  types[100] = 2;
  const hf = {}; // tokenizer.json's vocab
  tokens.forEach((t, id) => { hf[t] = id; });
  for (const s of [...starts].sort()) {
    hf[s] = tokens.length;
    tokens.push("\u2581" + s);
    types.push(1);
  }
  for (const c of [...conts].sort()) {
    hf["##" + c] = tokens.length;
    tokens.push(c);
    types.push(1);
  }
  return { tokens, types, hf };
}

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

function tokenizerJson(hf, lowercase) {
  const added = Object.entries(SPECIAL).map(([content, id]) => ({
    id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
  }));
  const special = (name) => ({ SpecialToken: { id: name, type_id: 0 } });
  return {
    version: "1.0", truncation: null, padding: null, added_tokens: added,
    normalizer: { type: "BertNormalizer", clean_text: true, handle_chinese_chars: true, strip_accents: null,
      lowercase },
    pre_tokenizer: { type: "BertPreTokenizer" },
    post_processor: {
      type: "TemplateProcessing",
      single: [special("[CLS]"), { Sequence: { id: "A", type_id: 0 } }, special("[SEP]")],
      pair: [special("[CLS]"), { Sequence: { id: "A", type_id: 0 } }, special("[SEP]"),
        { Sequence: { id: "B", type_id: 1 } }, special("[SEP]")],
      special_tokens: {
        "[CLS]": { id: "[CLS]", ids: [101], tokens: ["[CLS]"] },
        "[SEP]": { id: "[SEP]", ids: [102], tokens: ["[SEP]"] },
      },
    },
    decoder: { type: "WordPiece", prefix: "##", cleanup: true },
    model: { type: "WordPiece", unk_token: "[UNK]", continuing_subword_prefix: "##",
      max_input_chars_per_word: 100, vocab: hf },
  };
}

// ---- both tokenizers ------------------------------------------------------

let compared = 0;
let failed = 0;
for (const lowercase of [true, false]) {
  const name = lowercase ? "uncased" : "cased";
  const { tokens, types, hf } = vocabulary(lowercase);
  const vocabPath = `${tmp}/wordpiece-${name}.gguf`;
  const entries = [
    ["general.architecture", "str", "bert"],
    ["general.name", "str", `WordPiece vocabulary, ${name}`],
    ["tokenizer.ggml.model", "str", "bert"],
    ["tokenizer.ggml.tokens", "str[]", tokens],
    ["tokenizer.ggml.token_type", "i32[]", types],
    ["tokenizer.ggml.unknown_token_id", "u32", 100],
    ["tokenizer.ggml.cls_token_id", "u32", 101],
    ["tokenizer.ggml.seperator_token_id", "u32", 102],
    ["tokenizer.ggml.padding_token_id", "u32", 0],
  ];
  if (!lowercase) entries.push(["tokenizer.ggml.normalizer.lowercase", "bool", false]);
  writeFileSync(vocabPath, gguf(entries));
  const reference = new Tokenizer(tokenizerJson(hf, lowercase), {});
  for (const addSpecial of [false, true]) {
    const texts = shared.concat(own);
    const args = (addSpecial ? ["--add-special"] : []).concat(["--special", vocabPath]);
    const got = runTokenizeCases(tokenizeCases, args, `${tmp}/cases-${name}-${addSpecial}.inp`, texts);
    texts.forEach((text, i) => {
      const want = reference.encode(text, { add_special_tokens: addSpecial });
      compared++;
      if (got[i] === want.ids.join(" ")) return;
      if (failed++ > 0) return; // the first difference is named
      const pieces = (ids) => JSON.stringify(ids.map((id) => tokens[id]));
      const ids = got[i] === "" ? [] : got[i].split(" ").map(Number);
      console.error(`${name}${addSpecial ? ", [CLS] and [SEP] added" : ""}: ${JSON.stringify(text)} is ` +
        "tokenized differently");
      console.error(`  reference: ${want.ids.join(" ")}`);
      console.error(`             ${pieces(want.ids)}`);
      console.error(`  hearth:    ${got[i]}`);
      console.error(`             ${pieces(ids)}`);
    });
  }
}

if (failed) {
  console.error(`${failed} of ${compared} tokenizations differ from the reference`);
  process.exit(1);
}
console.log(`${compared} tokenizations (${shared.length} shared texts, ${own.length} more; cased and uncased; ` +
  "with and without [CLS] and [SEP]) as the Hugging Face tokenizer makes them");

// tokenizer-kimi.mjs -- hearth's kimi-k2 pre-tokenizer (PCRE2) against an
// independent reading of the expression it implements: the pat_str of
// Kimi-K2's tokenization_kimi.py, which tiktoken runs on Rust's regex
// engine, here run on V8's.
//
// The published expression is kept as it is written and translated
// mechanically into a JavaScript expression (the v flag, for the class
// intersections): \p{Han} is the Script property, as in Rust; \s and \S
// are Unicode White_Space, as in Rust (JavaScript's \s also takes U+FEFF);
// the case-insensitive contractions become classes of every character that
// JavaScript's Unicode case-insensitive matching takes for each letter,
// since Node 20 has no (?i:...) groups.
//
// Ill-formed UTF-8 is handled as hearth defines it: it matches nothing, so
// the expression runs on each well-formed stretch of the text alone and
// each run of bytes that are not part of a well-formed character is one
// word.
//
// Every case of the shared tokenizer-tests.inp, this file's own cases and
// a few thousand random mixtures of scripts, digits, punctuation, white
// space, emoji and ill-formed bytes are cut by both (hearth's side by
// tests/tokenize-cases --words kimi-k2); the first text on which the two
// differ is named with both cuts.  Texts hold only characters of
// Unicode 14 or older, which PCRE2 10.40 and V8 agree on.
//
//   node tokenizer-kimi.mjs TOKENIZE-CASES TESTS.inp TMPDIR
import { SEPARATOR, readCases, runTokenizeCases } from "./tokenize-cases.mjs";

const [tokenizeCases, inpPath, tmp] = process.argv.slice(2);

// ---- the oracle -------------------------------------------------------------

// tokenization_kimi.py's pat_str, one alternative a line.
const PUBLISHED = [
  String.raw`[\p{Han}]+`,
  String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
  String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
  String.raw`\p{N}{1,3}`,
  String.raw` ?[^\s\p{L}\p{N}]+[\r\n]*`,
  String.raw`\s*[\r\n]+`,
  String.raw`\s+(?!\S)`,
  String.raw`\s+`,
].join("|");

// Every character JavaScript's Unicode case-insensitive matching takes
// for the ASCII letter c, as a class.
function caseClass(c) {
  const re = new RegExp(`^${c}$`, "iu");
  let cls = "";
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    const ch = String.fromCodePoint(cp);
    if (re.test(ch)) cls += ch;
  }
  return `[${cls}]`;
}

function translate(pattern) {
  return pattern
    // [A&&[^B]] is written [[A]&&[^B]] in a v-flag class
    .replace(/\[((?:\\p\{\w+\})+)&&(\[\^\\p\{\w+\}\])\]/g, "[[$1]&&$2]")
    .replace(/\\p\{Han\}/g, String.raw`\p{Script=Han}`)
    .replace(/\\s/g, String.raw`\p{White_Space}`)
    .replace(/\\S/g, String.raw`\P{White_Space}`)
    .replace(/\(\?i:([^)]*)\)/g, (_, body) => `(?:${body.replace(/[a-z]/g, caseClass)})`);
}

const oracle = new RegExp(translate(PUBLISHED), "gv");

// The length in bytes of the well-formed UTF-8 character at bytes[i]
// (Unicode 15.0, table 3-7), or 0.
function charLength(bytes, i) {
  const b = bytes[i];
  const cont = (k, lo = 0x80, hi = 0xbf) => i + k < bytes.length && bytes[i + k] >= lo && bytes[i + k] <= hi;
  if (b < 0x80) return 1;
  if (b >= 0xc2 && b <= 0xdf) return cont(1) ? 2 : 0;
  if (b >= 0xe0 && b <= 0xef) {
    const lo = b === 0xe0 ? 0xa0 : 0x80, hi = b === 0xed ? 0x9f : 0xbf;
    return cont(1, lo, hi) && cont(2) ? 3 : 0;
  }
  if (b >= 0xf0 && b <= 0xf4) {
    const lo = b === 0xf0 ? 0x90 : 0x80, hi = b === 0xf4 ? 0x8f : 0xbf;
    return cont(1, lo, hi) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

// The oracle's words of a text, as lengths in bytes.
function oracleWords(bytes) {
  const words = [];
  const cut = (text) => {
    let at = 0;
    for (const m of text.matchAll(oracle)) {
      if (m.index > at) words.push(Buffer.byteLength(text.slice(at, m.index)));
      words.push(Buffer.byteLength(m[0]));
      at = m.index + m[0].length;
    }
    if (at < text.length) words.push(Buffer.byteLength(text.slice(at)));
  };
  let i = 0;
  while (i < bytes.length) {
    let j = i, n;
    while (j < bytes.length && (n = charLength(bytes, j)) > 0) j += n;
    if (j > i) cut(bytes.subarray(i, j).toString("utf8"));
    for (i = j; j < bytes.length && charLength(bytes, j) === 0; j++);
    if (j > i) words.push(j - i);
    i = j;
  }
  return words;
}

// ---- the texts --------------------------------------------------------------

const shared = readCases(inpPath).map((text) => Buffer.from(text, "utf8"));

const bytes = (...parts) => Buffer.concat(parts.map((p) => (typeof p === "string" ? Buffer.from(p, "utf8") : Buffer.from(p))));

const own = [
  // Han runs apart from everything else; kana, Hangul and Bopomofo are letters
  "我想在apple工作1314151天～", "中文Chinese漢字English", "日本語のテキストです。カタカナとひらがな、漢字。",
  "한국어 문장입니다. 서울특별시", "ㄅㄆㄇ注音符號", "Kimi是月之暗面开发的模型",
  // Han characters that are not Lo: 々 (Lm), 〇 and 〡 (Nl), radicals (So),
  // compatibility and Extension B ideographs; U+3001 and U+30FC are Common
  "人々時々 〇一二三 〡〢〣 ⺀⺁⼀⼁ 豈更 𠀀𠀁", "、。「引用」・ー", "a、b。c", "x々y", "1〇2〇〇〇3",
  "!⺀! ?⼀ x", "中\u0301文\u0308 e\u0301",
  // capitalised-word shapes
  "HelloWorld HTTPServer iPhone McDonald's XMLHttpRequest camelCaseWord", "ǄEMAL ǅemal ǆemal ʰʲʷ ᵃᵇ",
  "Ελληνικά ΑΒΓ αβγ Ωmega", "Москва2026год", "नमस्ते दुनिया", "مرحبا بالعالم", "สวัสดีครับ",
  // contractions, case-insensitive the Unicode way
  "I'M HERE, YOU'LL SEE, IT'S", "don't DON'T Don'T dOn'T we'Ve they'RE she'D", "'S 'LL 'd 'D 's 'll 't 'T",
  "don'ſ it'ſ IT'ſ 'ſ", "it'K it'\u212a", "x'S X's ''quoted''", "It’s a curly apostrophe", "中文's 中's",
  // digits
  "1234567890", "3.14159265358979", "٣٤٥٦٧ ۱۲۳۴ ०१२३४५ ０１２３４", "½ ¾ ⅓ Ⅻ ² x²+y³ ①②", "v1.2.3-rc4 0x1F 1e-9",
  // white space: the property's characters, and those that are not
  "a  b   c    d     e", "  \t  leading and trailing  \t ", "\r\n\r\nwindows\r\nlines\r\n",
  "line1\n\n\nline2 \n  \nend   \n", " ".repeat(40) + "x", "\t\t\tindent\n\t\t\tindent", "\v\f\v x\f",
  "a\u00a0b\u2003c\u3000d\u202fe\u205ff\u1680g", "a\u0085b\u2028c\u2029d", "x\u00a0\u00a0\u00a0y\u3000\u3000",
  "word\u180eword", "!\u180e! ?\u180e\u180e x", "\u200bzero\u200dwidth\ufeff", "!\u200b! \ufeff\ufeff x",
  "　全角スペース　", "end\u3000", "\u3000\u3000\n\u3000",
  // punctuation with its newlines (and slashes, which are not absorbed)
  "path/to/file.txt\n// comment\n/* block */", "https://example.com/a/b?c=d&e=f#g", "!!!\n\n...///\n--",
  "x;\n//y\n}\r\n/z\n\n/", "def f(x):\n    return x**2  # square\n", '{"key": [1, 2, 3], "nested": {"a": null}}',
  "<|im_user|>user<|im_middle|>你好<|im_end|>", "¿Qué? ¡Sí! «Ça va» — “quotes”", "The price is $1,234.56 (≈€1.1k)!",
  // emoji
  "👨‍👩‍👧‍👦 family 🏳️‍🌈 flag 👍🏽 ok 🇫🇷🇩🇪 1️⃣#️⃣", "😀😃中😄a😁",
  // long runs of one class (each letter of a run once took a frame of
  // the matcher's stack, which ran out)
  "A".repeat(200000), "Ab".repeat(100000) + "'S", "ก".repeat(100000), "中".repeat(100000) + "x",
  " ".repeat(200000) + "x", "\u0301".repeat(100000), "1".repeat(200000),
];
const illFormed = [
  bytes("a", [0xff], "b"), bytes([0x80, 0xbf], "中文", [0xc0, 0x80]), bytes("中", [0xe4, 0xb8], "文"),
  bytes("x ", [0xed, 0xa0, 0x80], " y"), bytes("  ", [0xf4, 0x90, 0x80, 0x80], "  "), bytes("don", [0xfe], "'t"),
  bytes("12", [0xc3], "34"), bytes("Hello", [0xf0, 0x9f, 0x98]), bytes([0xe2, 0x82], "\n\n", [0xe2]),
  bytes("HTTP", [0xff, 0xfe], "Server"), bytes("   ", [0x80], "\n"), bytes([0xf8, 0x88, 0x80, 0x80, 0x80]),
];

// Random texts: a fixed generator, fragments of these pools.
let seed = 0x6b696d69;
const random = () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const pick = (list) => list[Math.floor(random() * list.length)];
const range = (lo, hi) => () => String.fromCodePoint(lo + Math.floor(random() * (hi - lo + 1)));
const oneOf = (chars) => () => pick([...chars]);
const pools = [
  range(0x4e00, 0x9fa5), range(0x3400, 0x4db5), range(0xf900, 0xfa0d), range(0x2f00, 0x2fd5),
  oneOf("々〆〇〡〢〻⺀⺁"), range(0x3041, 0x3096), range(0x30a1, 0x30fa), oneOf("ー・ヽゝ"), range(0xac00, 0xd7a3),
  range(0x61, 0x7a), range(0x41, 0x5a), range(0x61, 0x7a), range(0x41, 0x5a), range(0xc0, 0xd6), range(0xe0, 0xff),
  range(0x391, 0x3a9), range(0x3b1, 0x3c9), range(0x410, 0x44f), oneOf("ǅǈǋǲᾈᾉ"), oneOf("ʰʲʷˠᵃᵇ"),
  range(0x300, 0x36f), range(0x915, 0x939), oneOf("\u093e\u093f\u0940\u094d"), range(0x627, 0x64a), range(0xe01, 0xe2e),
  range(0x30, 0x39), range(0x30, 0x39), range(0x660, 0x669), range(0xff10, 0xff19), oneOf("²³¹½¾ⅠⅡⅫ①②"),
  oneOf("'''’"), oneOf("sStTmMdDſ\u212a"), () => pick(["'s", "'S", "'t", "'re", "'RE", "'ve", "'Ve", "'m", "'ll", "'LL", "'d", "'ſ"]),
  range(0x21, 0x2f), range(0x3a, 0x40), range(0x5b, 0x60), range(0x7b, 0x7e), range(0x3001, 0x3011),
  range(0xff01, 0xff0f), oneOf("©®€£¥§¶•…–—“”«»"), range(0x1f600, 0x1f64f), oneOf("\u200d\ufe0f\u20e3"),
  oneOf(["\u{1f3fb}", "\u{1f3fd}", "\u{1f1eb}", "\u{1f1f7}"]),
  oneOf(" "), oneOf(" "), () => " ".repeat(1 + Math.floor(random() * 6)), oneOf("\t\n\r\v\f"), () => pick(["\r\n", "\n\n", " \n", "\n "]),
  oneOf("\u00a0\u0085\u1680\u2000\u2005\u200a\u2028\u2029\u202f\u205f\u3000"), oneOf("\u180e\u200b\ufeff\u2060"),
];
const invalid = [[0x80], [0xbf], [0xc0, 0x80], [0xe4, 0xb8], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xff],
  [0xfe], [0xf0, 0x9f, 0x98], [0xc3]];
function randomText() {
  const parts = [];
  const n = 1 + Math.floor(random() * 14);
  for (let k = 0; k < n; k++) {
    if (random() < 0.04) {
      parts.push(Buffer.from(pick(invalid)));
      continue;
    }
    const gen = pick(pools), run = 1 + Math.floor(random() * (random() < 0.3 ? 8 : 3));
    let s = "";
    for (let r = 0; r < run; r++) s += gen();
    parts.push(Buffer.from(s, "utf8"));
  }
  return Buffer.concat(parts);
}
const randomTexts = Array.from({ length: 4000 }, randomText);

const ownTexts = own.map((t) => Buffer.from(t, "utf8")).concat(illFormed);
const groups = [
  ["tokenizer-tests.inp", shared],
  ["tokenizer-kimi.mjs", ownTexts],
  ["tokenizer-kimi.mjs, random", randomTexts],
];
const SEPARATOR_BYTES = Buffer.from(SEPARATOR, "utf8");
for (const [group, texts] of groups) {
  for (const text of texts) {
    if (text.includes(0) || text.includes(SEPARATOR_BYTES)) {
      throw new Error(`${group}: a text holds a NUL byte or the case separator`);
    }
  }
}

// ---- both -------------------------------------------------------------------

// hearth's words of each text, one line of byte lengths each.
const hearthWords = (name, texts) =>
  runTokenizeCases(tokenizeCases, ["--words", "kimi-k2"], `${tmp}/${name}.inp`, texts);

// A text's words, each shown as JSON (ill-formed bytes as \xNN).
function show(text, lengths) {
  const words = [];
  let at = 0;
  for (const n of lengths) {
    const word = text.subarray(at, at + n);
    const valid = Buffer.from(word.toString("utf8"), "utf8").equals(word);
    words.push(valid ? JSON.stringify(word.toString("utf8")) : `<${[...word].map((b) => `\\x${b.toString(16)}`).join("")}>`);
    at += n;
  }
  return words.join(" ");
}

let compared = 0;
let failed = 0;
groups.forEach(([group, texts], g) => {
  const got = hearthWords(`cases${g}`, texts);
  texts.forEach((text, i) => {
    const want = oracleWords(text).join(" ");
    compared++;
    if (got[i] === want) return;
    if (failed++ > 0) return; // the first difference is named
    const ids = got[i] === "" ? [] : got[i].split(" ").map(Number);
    console.error(`${group}, text ${i + 1}: ${show(text, [text.length])} is cut differently`);
    console.error(`  oracle: ${show(text, oracleWords(text))}`);
    console.error(`  hearth: ${show(text, ids)}`);
  });
});

if (failed) {
  console.error(`${failed} of ${compared} texts are cut differently from the oracle`);
  process.exit(1);
}
console.log(`${compared} texts (${shared.length} shared, ${ownTexts.length} own, ${randomTexts.length} random) ` +
  "cut into the same words as the published expression on V8");

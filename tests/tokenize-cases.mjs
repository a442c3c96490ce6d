// tokenize-cases.mjs -- the shared test strings and tests/tokenize-cases
// for the tokenizer comparisons in JavaScript (tests/tokenizer-*.mjs).
import { readFileSync, writeFileSync } from "node:fs";
import { spawnSync } from "node:child_process";

// A line that follows every case of a tokenizer-tests.inp-style file.
export const SEPARATOR = "\n__ggml_vocab_test__\n";

// The cases of such a file (the shared tokenizer-tests.inp has over 40).
export function readCases(path) {
  const inp = readFileSync(path, "utf8");
  const cases = [];
  for (let at = 0, sep; (sep = inp.indexOf(SEPARATOR, at)) >= 0; at = sep + SEPARATOR.length) {
    cases.push(inp.slice(at, sep));
  }
  if (cases.length < 40) throw new Error(`${path}: ${cases.length} cases`);
  return cases;
}

// tokenize-cases ARGS... PATH over texts (strings or byte buffers) written
// to PATH: its output, one line per text.
export function runTokenizeCases(program, args, path, texts) {
  const separator = Buffer.from(SEPARATOR, "utf8");
  writeFileSync(path, Buffer.concat(texts.flatMap((text) => [Buffer.from(text), separator])));
  const all = args.concat([path]);
  const r = spawnSync(program, all, { encoding: "utf8", maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`tokenize-cases ${all.join(" ")}: exit ${r.status}: ${r.stderr}`);
  const lines = r.stdout.split("\n");
  if (lines.pop() !== "" || lines.length !== texts.length) {
    throw new Error(`tokenize-cases ${all.join(" ")}: ${lines.length} lines for ${texts.length} texts`);
  }
  return lines;
}

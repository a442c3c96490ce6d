// template-models.mjs -- chat templates that models ship, rendered by
// hearth and by an independent Jinja implementation (the npm package
// @huggingface/jinja), compared byte for byte.  The templates are read
// from the npm package @huggingface/ollama-utils, which carries the
// tokenizer.chat_template of published GGUF files; the conversations are
// the shared ones (../shared/chat/conversations.json) and a few of this
// file's own for the templates' other branches.  Where the independent
// renderer raises, hearth must refuse the conversation too.
//
// Templates that the package does not carry come as NAME=FILE arguments
// (Qwen3.5's, gpt-oss's and Kimi-K2's: tests/template-models.sh takes
// them from the llama.cpp source that the npm package node-llama-cpp
// carries).
//
//   node template-models.mjs HEARTH CONVERSATIONS.json TMPDIR [NAME=FILE...]
import { Template } from "@huggingface/jinja";
import { readFileSync, writeFileSync } from "node:fs";
import { spawnSync } from "node:child_process";

const [hearth, convPath, tmp, ...extra] = process.argv.slice(2);
const automap = readFileSync(
  new URL("./node_modules/@huggingface/ollama-utils/src/chat-template-automap.ts", import.meta.url),
  "utf8",
);

// The template of one entry of the package's table, by its model name.
function shipped(model) {
  const at = automap.indexOf(`model: "${model}",`);
  if (at < 0) throw new Error(`no template for ${model} in @huggingface/ollama-utils`);
  const m = /gguf: ("(?:[^"\\]|\\.)*")/.exec(automap.slice(at));
  if (!m) throw new Error(`no gguf template text for ${model}`);
  return JSON.parse(m[1]);
}

const models = [
  // Gemma 3 (the current template: a string or a list as system content)
  { model: "library/gemma3:270m", bos: "<bos>", eos: "<eos>" },
  // Gemma 3 1B's file (the first template: list content only)
  { model: "library/gemma3:1b", bos: "<bos>", eos: "<eos>" },
  // Phi-4-mini (tools in the system message) and Phi-4
  { model: "library/phi4-mini:3.8b", bos: "<|endoftext|>", eos: "<|endoftext|>" },
  { model: "library/phi4:14b", bos: "<|endoftext|>", eos: "<|im_end|>" },
  // Qwen3-Next (tools, tool calls and responses in ChatML)
  { model: "library/qwen3-next:80b", bos: "", eos: "<|im_end|>" },
].concat(
  // Qwen3.5 (reasoning in <think>, XML tool calls, enable_thinking)
  extra.map((arg) => {
    const at = arg.indexOf("=");
    const model = arg.slice(0, at);
    const harmony = model.startsWith("gpt-oss");
    return { model, file: arg.slice(at + 1), bos: harmony ? "<|startoftext|>" : "",
             eos: harmony ? "<|return|>" : "<|im_end|>" };
  }),
);

const tools = JSON.stringify([
  { name: "get_weather", description: "Current weather «here»", parameters: { city: { type: "str" } } },
]);
const qwenTools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Current weather «here»",
      parameters: {
        type: "object",
        properties: { city: { type: "string" }, days: { type: "integer" }, units: { type: "array" } },
        required: ["city"],
      },
    },
  },
];
const conversations = JSON.parse(readFileSync(convPath, "utf8")).concat([
  {
    // Only for the Gemma templates, which read a list's items: where a
    // template adds a list to a string, Python's Jinja (the renderer
    // transformers uses, and hearth's model) raises, while
    // @huggingface/jinja joins them.
    name: "list-content",
    only: "gemma3",
    messages: [
      { role: "system", content: [{ type: "text", text: "  Be brief.  " }] },
      { role: "user", content: [{ type: "image" }, { type: "text", text: "What is this?\n" }] },
      { role: "assistant", content: [{ type: "text", text: "A cat." }] },
      { role: "user", content: "And now?" },
    ],
  },
  {
    name: "system-tools",
    messages: [
      { role: "system", content: "You may call tools.", tools },
      { role: "user", content: "Weather in Paris?" },
    ],
  },
  // The Qwen families: tools offered, called, answered; reasoning kept
  // in earlier turns; thinking switched off.  Kimi-K2's templates take
  // the same conversations: Moonshot's own renders the tool calls; the
  // adapted Instruct and Thinking copies keep a queue of the calls' ids
  // with a list's append(), which hearth, the reference and transformers'
  // immutable sandbox all refuse.
  {
    name: "tools",
    only: ["qwen", "kimi"],
    tools: qwenTools,
    messages: [
      { role: "system", content: "You are a weather bot." },
      { role: "user", content: "Weather in Paris and in Oslo?" },
    ],
  },
  {
    name: "tool-calls",
    only: ["qwen", "kimi"],
    tools: qwenTools,
    messages: [
      { role: "user", content: "Weather in Paris and in Oslo?" },
      {
        role: "assistant",
        content: "",
        tool_calls: [
          { type: "function", function: { name: "get_weather", arguments: { city: "Paris", days: 2 } } },
          { type: "function", function: { name: "get_weather", arguments: { city: "Oslo", units: ["c", "f"] } } },
        ],
      },
      { role: "tool", content: "{\"temp\": 21}" },
      { role: "tool", content: "{\"temp\": -3}" },
      { role: "assistant", content: "Paris 21 °C, Oslo -3 °C." },
      { role: "user", content: "Thanks." },
    ],
  },
  {
    name: "reasoning",
    only: ["qwen", "kimi"],
    messages: [
      { role: "user", content: "2 + 2?" },
      { role: "assistant", reasoning_content: "Two and two.", content: "4" },
      { role: "user", content: "And 3 + 3?" },
      { role: "assistant", content: "<think>\nThree and three.\n</think>\n\n6" },
      { role: "user", content: "And 4 + 4?" },
    ],
  },
  {
    name: "no-thinking",
    only: "qwen",
    vars: { enable_thinking: false },
    messages: [{ role: "user", content: "Hello." }],
  },
  // gpt-oss (harmony): reasoning effort, tools in the developer message,
  // reasoning ("thinking") and tool calls in the commentary channel.
  {
    name: "effort-high",
    only: "gpt-oss",
    vars: { reasoning_effort: "high" },
    messages: [
      { role: "system", content: "Be brief." },
      { role: "user", content: "2 + 2?" },
    ],
  },
  {
    name: "harmony-tools",
    only: "gpt-oss",
    vars: { reasoning_effort: "low" },
    tools: qwenTools,
    messages: [
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        thinking: "The user wants the weather; call the tool.",
        content: "",
        tool_calls: [{ type: "function", function: { name: "get_weather", arguments: { city: "Paris" } } }],
      },
      { role: "tool", content: "{\"temp\": 21}" },
      { role: "assistant", thinking: "Answer with the temperature.", content: "21 °C in Paris." },
      { role: "user", content: "Thanks." },
    ],
  },
  {
    name: "not-alternating",
    messages: [
      { role: "user", content: "One." },
      { role: "user", content: "Two." },
    ],
  },
]);

let failures = 0, rendered = 0, raised = 0;
const perModel = [];
for (const { model, file, bos, eos } of models) {
  const text = file ? readFileSync(file, "utf8") : shipped(model);
  const before = rendered;
  const tmplPath = `${tmp}/template.jinja`;
  writeFileSync(tmplPath, text);
  const reference = new Template(text);
  for (const conv of conversations) {
    if (conv.only && ![].concat(conv.only).some((family) => model.toLowerCase().includes(family))) continue;
    for (const agp of [true, false]) {
      const where = `${model} / ${conv.name} / add_generation_prompt=${agp}`;
      let want = null, why = "";
      try {
        want = reference.render({
          ...(conv.vars || {}),
          ...(conv.tools ? { tools: conv.tools } : {}),
          messages: conv.messages,
          bos_token: bos,
          eos_token: eos,
          add_generation_prompt: agp,
        });
      } catch (e) {
        why = String(e);
      }
      const msgPath = `${tmp}/messages.json`;
      writeFileSync(msgPath, JSON.stringify(conv.messages));
      // the renderer's strftime_now() is today's date: hearth is given it
      // for the templates that call it (gpt-oss), a fixed one otherwise
      const now = new Date();
      const today = `${now.getDate()} ${now.toLocaleString("en-US", { month: "short" })} ${now.getFullYear()}`;
      const args = ["template", "--chat-template", tmplPath, "-f", msgPath, "--bos", bos, "--eos", eos,
                    "--date", text.includes("strftime_now") ? today : "29 Nov 2026"];
      if (!agp) args.push("--no-generation-prompt");
      if (conv.tools) {
        writeFileSync(`${tmp}/tools.json`, JSON.stringify(conv.tools));
        args.push("--tools", `${tmp}/tools.json`);
      }
      if (conv.vars) args.push("--vars", JSON.stringify(conv.vars));
      const got = spawnSync(hearth, args, { encoding: "utf8" });
      if (got.error) throw got.error;
      if (want === null) {
        if (got.status === 0) {
          failures++;
          console.error(`FAIL: ${where}: the reference raises (${why}), hearth rendered ${JSON.stringify(got.stdout)}`);
        } else if (!/\S/.test(got.stderr)) {
          failures++;
          console.error(`FAIL: ${where}: hearth refused it without a message`);
        } else raised++;
      } else if (got.status !== 0) {
        failures++;
        console.error(`FAIL: ${where}: hearth exit status ${got.status}: ${got.stderr.trim()}`);
      } else if (got.stdout !== want) {
        failures++;
        console.error(`FAIL: ${where}:\n  hearth    ${JSON.stringify(got.stdout)}\n  reference ${JSON.stringify(want)}`);
      } else rendered++;
    }
  }
  perModel.push(`${model} ${rendered - before}`);
  if (rendered - before < 6) {
    failures++;
    console.error(`FAIL: ${model}: only ${rendered - before} renderings compared`);
  }
}
if (raised < 4) {
  failures++;
  console.error(`FAIL: only ${raised} refusals compared`);
}
console.log(
  `${models.length} shipped templates, ${rendered} renderings equal (${perModel.join(", ")}), ` +
    `${raised} refused by both, ${failures} failures`,
);
process.exit(failures ? 1 : 0);

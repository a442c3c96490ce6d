// server-embeddings.mjs -- POST /v1/embeddings through the official OpenAI
// Node.js client: a string, an array of strings, token ids and arrays of
// them; the client's default base64 (which it decodes itself) against
// "float"; the same vectors alone and in a batch of mixed lengths, and the
// same as hearth embed's; dimensions; the usage; and the errors as the
// client's APIError classes.  Run by tests/server-embeddings.sh with:
//   HEARTH_URL          a server on micro-qwen3-embedding, -c 64
//   HEARTH_CHAT_URL     a server on a generative model
//   HEARTH_KEY          both servers' API key
//   HEARTH_CLI_VECTOR   hearth embed --format jsonl's line for "hello world"
// Prints "ok: ..." per check, "FAIL: ..." per failure, and exits 1 if any
// check failed.
import fs from 'node:fs';
import OpenAI from 'openai';

const base = process.env.HEARTH_URL;
const chatBase = process.env.HEARTH_CHAT_URL;
const key = process.env.HEARTH_KEY;
let failed = 0;

function ok(what) { console.log(`ok: ${what}`); }
function fail(what) { console.error(`FAIL: ${what}`); failed++; }
function check(cond, what, detail) {
  if (cond) ok(what); else fail(detail === undefined ? what : `${what}: ${detail}`);
  return cond;
}

async function waitHealthy(url, seconds) {
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    try {
      if ((await fetch(`${url}/health`)).status === 200) return;
    } catch (e) { /* not yet */ }
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error(`${url}/health not 200 after ${seconds}s`);
}

async function group(name, fn) {
  try {
    await fn();
  } catch (e) {
    fail(`${name}: ${e?.constructor?.name}: ${e?.message}${e?.status ? ` (status ${e.status})` : ''}`);
  }
}

// The same 32-bit floats, component for component.
function same(a, b) {
  if (a.length !== b.length) return false;
  const fa = Float32Array.from(a), fb = Float32Array.from(b);
  for (let i = 0; i < fa.length; i++) if (!Object.is(fa[i], fb[i])) return false;
  return true;
}
const norm = (v) => Math.sqrt(Array.from(v).reduce((s, x) => s + x * x, 0));

// Expect the call to be refused with status and the param named.
async function refused(what, status, param, fn) {
  try {
    await fn();
    fail(`${what}: accepted`);
  } catch (e) {
    check(e instanceof OpenAI.APIError && e.status === status && (param === null || e.param === param), what,
      `${e?.constructor?.name} status ${e?.status} param ${e?.param}: ${e?.message}`);
  }
}

const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0, timeout: 60000 });
const chatClient = new OpenAI({ baseURL: `${chatBase}/v1`, apiKey: key, maxRetries: 0, timeout: 60000 });
await waitHealthy(base, 120);
await waitHealthy(chatBase, 120);

const texts = ['hello world', 'the quick brown fox jumps over the lazy dog and runs far away into the wood', 'a',
  'embeddings of several words'];
const alone = [];

await group('a string', async () => {
  const r = await client.embeddings.create({ model: 'micro-embed', input: 'hello world' });
  check(r.object === 'list' && r.data.length === 1 && r.data[0].object === 'embedding' && r.data[0].index === 0,
    'a string: one embedding object at index 0', JSON.stringify({ ...r, data: r.data.length }));
  check(r.model === 'micro-embed', 'the model is the alias', r.model);
  const v = r.data[0].embedding;
  check(v.length === 256, 'the client decodes base64 to 256 floats', v.length);
  check(Math.abs(norm(v) - 1) < 1e-5, 'unit length', norm(v));
  check(r.usage.prompt_tokens > 2 && r.usage.total_tokens === r.usage.prompt_tokens, 'usage counts the tokens',
    JSON.stringify(r.usage));
  const f = await client.embeddings.create({ model: 'micro-embed', input: 'hello world', encoding_format: 'float' });
  check(Array.isArray(f.data[0].embedding) && same(f.data[0].embedding, v), 'float and base64 are the same floats');
  const cli = JSON.parse(fs.readFileSync(process.env.HEARTH_CLI_VECTOR, 'utf8').split('\n')[0]);
  check(same(cli, v), 'the server\'s vector is hearth embed\'s, bit for bit');
});

await group('batch invariance', async () => {
  for (const t of texts) alone.push((await client.embeddings.create({ model: 'm', input: t })).data[0].embedding);
  const r = await client.embeddings.create({ model: 'm', input: texts });
  check(r.data.length === texts.length && r.data.every((d, i) => d.index === i), 'an array: one vector per input, in order');
  check(r.data.every((d, i) => same(d.embedding, alone[i])), 'a batch of mixed lengths gives each input\'s vector alone');
  let sum = 0;
  for (const t of texts) sum += (await client.embeddings.create({ model: 'm', input: t })).usage.prompt_tokens;
  check(r.usage.prompt_tokens === sum, 'the usage of a batch is the sum', `${r.usage.prompt_tokens} vs ${sum}`);
});

await group('token ids', async () => {
  const tok = await (await fetch(`${base}/tokenize`, {
    method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ content: 'hello world', add_special: true }),
  })).json();
  const ids = tok.tokens;
  check(Array.isArray(ids) && ids.length > 2, 'the tokens of hello world', JSON.stringify(tok));
  const one = await client.embeddings.create({ model: 'm', input: ids });
  check(one.data.length === 1 && same(one.data[0].embedding, alone[0]), 'token ids give the text\'s vector');
  const two = await client.embeddings.create({ model: 'm', input: [ids, ids.slice(0, 3)] });
  check(two.data.length === 2 && same(two.data[0].embedding, alone[0]), 'arrays of token ids: one vector each');
  check(two.usage.prompt_tokens === ids.length + 3, 'their usage', two.usage.prompt_tokens);
});

await group('dimensions', async () => {
  const r = await client.embeddings.create({ model: 'm', input: 'hello world', dimensions: 64, encoding_format: 'float' });
  const v = r.data[0].embedding;
  check(v.length === 64 && Math.abs(norm(v) - 1) < 1e-5, 'dimensions: 64 components of unit length', v.length);
  const head = alone[0].slice(0, 64), n = norm(head);
  check(v.every((x, i) => Math.abs(x - head[i] / n) < 1e-6), 'the first components, scaled to unit length again');
});

await group('errors', async () => {
  await refused('an empty string', 400, 'input', () => client.embeddings.create({ model: 'm', input: '' }));
  await refused('an empty string in an array', 400, 'input[1]',
    () => client.embeddings.create({ model: 'm', input: ['a', ''] }));
  await refused('an empty array', 400, 'input', () => client.embeddings.create({ model: 'm', input: [] }));
  await refused('an input past the context', 400, 'input[1]',
    () => client.embeddings.create({ model: 'm', input: ['a', 'word '.repeat(80)] }));
  await refused('a token id outside the vocabulary', 400, 'input',
    () => client.embeddings.create({ model: 'm', input: [1, 100000] }));
  await refused('dimensions 0', 400, 'dimensions',
    () => client.embeddings.create({ model: 'm', input: 'a', dimensions: 0 }));
  await refused('dimensions past the vector', 400, 'dimensions',
    () => client.embeddings.create({ model: 'm', input: 'a', dimensions: 257 }));
  await refused('an unknown encoding', 400, 'encoding_format',
    () => client.embeddings.create({ model: 'm', input: 'a', encoding_format: 'hex' }));
  await refused('an unknown field', 400, 'temperature',
    () => client.embeddings.create({ model: 'm', input: 'a', temperature: 1 }));
  await refused('a generative model', 400, 'model',
    () => chatClient.embeddings.create({ model: 'stories260K', input: 'a' }));
  // user is accepted
  const r = await client.embeddings.create({ model: 'm', input: 'a', user: 'tester' });
  check(r.data.length === 1, 'user is accepted');
});

if (failed) {
  console.error(`${failed} check(s) failed`);
  process.exit(1);
}

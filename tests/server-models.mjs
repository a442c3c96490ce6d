// server-models.mjs -- a table of models through the official OpenAI
// Node.js client: models.list() names every model with its "hearth"
// object (loaded or not), a completion names its model and is served by
// it (loading it), the list then says so, and an unknown model is the
// client's NotFoundError.  Run by tests/server-models.sh with:
//   HEARTH_URL     a server on -m story=... -m llama=... (nothing loaded)
//   HEARTH_KEY     its API key
// Prints "ok: ..." per check, "FAIL: ..." per failure, and exits 1 if any
// check failed.
import OpenAI from 'openai';

let failed = 0;
function check(cond, what, detail) {
  if (cond) console.log(`ok: ${what}`);
  else { console.error(`FAIL: ${what}${detail === undefined ? '' : ': ' + detail}`); failed++; }
  return cond;
}

const client = new OpenAI({ baseURL: `${process.env.HEARTH_URL}/v1`, apiKey: process.env.HEARTH_KEY, maxRetries: 0 });

async function listed() {
  const out = {};
  for await (const m of client.models.list()) out[m.id] = m;
  return out;
}

let ms = await listed();
check(Object.keys(ms).sort().join(',') === 'llama,story', 'models.list() names both models', Object.keys(ms).join(','));
check(Object.values(ms).every((m) => m.object === 'model' && m.hearth && m.hearth.loaded === false),
  'neither is loaded yet', JSON.stringify(ms));
const r = await client.completions.create({ model: 'llama', prompt: 'Once upon a time', max_tokens: 8, seed: 1 });
check(r.model === 'llama' && typeof r.choices[0].text === 'string', 'a completion is served by the model it names',
  JSON.stringify(r));
ms = await listed();
check(ms.llama.hearth.loaded === true && ms.story.hearth.loaded === false, 'models.list() says which is loaded',
  JSON.stringify(ms));
try {
  await client.chat.completions.create({ model: 'gpt-nothing', messages: [{ role: 'user', content: 'hi' }] });
  check(false, 'an unknown model is refused');
} catch (e) {
  check(e instanceof OpenAI.NotFoundError && e.code === 'model_not_found', 'an unknown model: NotFoundError, model_not_found',
    `${e.constructor.name} ${e.status} ${e.code}`);
}
process.exit(failed ? 1 : 0);

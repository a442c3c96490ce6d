// server-responses.mjs -- hearth serve's Responses API (POST /v1/responses)
// through the official OpenAI Node.js client: text as the equivalent chat
// completion gives it, the response object's fields and usage, incomplete
// on max_output_tokens, the stream's typed events in their order (through
// create({stream: true}), the raw SSE and responses.stream()), tool calls
// and their results with and without previous_response_id, JSON formats,
// a reasoning model's reasoning item, the store (retrieve, delete,
// store: false, an unknown id, its bounds), the 400s of unsupported fields, and an
// error in the middle of a stream.  Run by tests/server-openai.sh with
// the environment:
//   HEARTH_URL          base URL of a server started with --api-key KEY
//   HEARTH_TIMEOUT_URL  base URL of one started with --timeout 1
//   HEARTH_THINK_URL    base URL of one whose template's replies think in
//                       <think> ... </think> (a reasoning split)
//   HEARTH_KEY          the key
//   HEARTH_ALIAS        the model alias the servers report
// Prints "ok: ..." per check, "FAIL: ..." per failure, and exits 1 if any
// check failed.
import OpenAI from 'openai';
import { check, fail, finish, group, ok, show, waitHealthy, weather, weatherArgsValid } from './openai-checks.mjs';

const base = process.env.HEARTH_URL;
const timeoutBase = process.env.HEARTH_TIMEOUT_URL;
const thinkBase = process.env.HEARTH_THINK_URL;
const key = process.env.HEARTH_KEY;
const alias = process.env.HEARTH_ALIAS;

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

// The error a request raises, or null.
async function raises(p) {
  try {
    await p;
    return null;
  } catch (e) {
    return e;
  }
}

const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0, timeout: 60000 });

await waitHealthy(base, 120);
await waitHealthy(timeoutBase, 120);
await waitHealthy(thinkBase, 120);

const instructions = 'You are a storyteller.';
const story = 'Tell me a story about a cat.';
const sampling = { temperature: 0, seed: 42 };

// The events of a stream, collected.
async function events(stream) {
  const all = [];
  for await (const ev of stream) all.push(ev);
  return all;
}

// Problems with a stream's event order: sequence numbers 0, 1, 2, ...;
// created and in_progress first; every item added, then its parts and
// deltas, then done, in output order; a final response event last.
function sequenceProblems(evs) {
  const problems = [];
  evs.forEach((e, i) => { if (e.sequence_number !== i) problems.push(`event ${i} has sequence_number ${e.sequence_number}`); });
  if (evs[0]?.type !== 'response.created') problems.push(`first event ${evs[0]?.type}`);
  if (evs[1]?.type !== 'response.in_progress') problems.push(`second event ${evs[1]?.type}`);
  const last = evs[evs.length - 1]?.type;
  if (!['response.completed', 'response.incomplete'].includes(last)) problems.push(`last event ${last}`);
  let open = null, next = 0;
  for (const e of evs.slice(2, -1)) {
    if (e.type === 'response.output_item.added') {
      if (open !== null) problems.push(`item ${e.output_index} added while ${open} is open`);
      if (e.output_index !== next) problems.push(`item ${e.output_index} added, ${next} expected`);
      open = e.output_index;
    } else if (e.type === 'response.output_item.done') {
      if (e.output_index !== open) problems.push(`item ${e.output_index} done while ${open} is open`);
      open = null;
      next++;
    } else if (e.output_index !== open) {
      problems.push(`${e.type} for item ${e.output_index} while ${open} is open`);
    }
  }
  if (open !== null) problems.push(`item ${open} never done`);
  return problems;
}

// The types of events in order, runs of the same delta type as one.
function shape(evs) {
  const out = [];
  for (const e of evs) if (out[out.length - 1] !== e.type || !e.type.endsWith('.delta')) out.push(e.type);
  return out;
}

let first = null;

await group('responses.create', async () => {
  const r = await client.responses.create({
    model: alias, instructions, input: story, ...sampling, max_output_tokens: 48, metadata: { run: 'a' },
  });
  first = r;
  check(r.object === 'response', 'responses: object is response', r.object);
  check(/^resp_[0-9a-f]+$/.test(r.id), 'responses: id resp_...', r.id);
  check(r.model === alias && Number.isInteger(r.created_at), 'responses: model and created_at', show([r.model, r.created_at]));
  check(['completed', 'incomplete'].includes(r.status), 'responses: status', r.status);
  check(r.output.length === 1 && r.output[0].type === 'message' && r.output[0].role === 'assistant' &&
        /^msg_/.test(r.output[0].id) && r.output[0].content.length === 1 &&
        r.output[0].content[0].type === 'output_text' && Array.isArray(r.output[0].content[0].annotations),
        'responses: one assistant message of one output_text part', show(r.output));
  check(typeof r.output_text === 'string' && r.output_text.length > 0 && r.output_text === r.output[0].content[0].text,
        'responses: the client\'s output_text is the message\'s text', show(r.output_text));
  const u = r.usage;
  check(u && u.input_tokens > 0 && u.output_tokens > 0 && u.output_tokens <= 48 &&
        u.total_tokens === u.input_tokens + u.output_tokens && Number.isInteger(u.input_tokens_details?.cached_tokens) &&
        u.output_tokens_details?.reasoning_tokens === 0, 'responses: usage', show(u));
  check(r.instructions === instructions && r.temperature === 0 && r.max_output_tokens === 48 &&
        r.tool_choice === 'auto' && Array.isArray(r.tools) && r.tools.length === 0 && r.parallel_tool_calls === true &&
        r.previous_response_id === null && r.text?.format?.type === 'text' && r.metadata?.run === 'a' &&
        r.error === null && r.incomplete_details === (r.status === 'incomplete' ? r.incomplete_details : null),
        'responses: the request\'s fields repeated', show(r));
  // the same conversation as a chat completion gives the same text and tokens
  const c = await client.chat.completions.create({
    model: alias, ...sampling, max_tokens: 48,
    messages: [{ role: 'system', content: instructions }, { role: 'user', content: story }],
  });
  check(c.choices[0].message.content === r.output_text, 'responses: the text of the equivalent chat completion',
        `${show(c.choices[0].message.content)} vs ${show(r.output_text)}`);
  check(c.usage.prompt_tokens === u.input_tokens && c.usage.completion_tokens === u.output_tokens,
        'responses: the tokens of the equivalent chat completion', `${show(c.usage)} vs ${show(u)}`);
  // input as a list of messages with content parts, a developer message
  const parts = await client.responses.create({
    model: alias, ...sampling, max_output_tokens: 48,
    input: [{ role: 'developer', content: instructions },
            { type: 'message', role: 'user', content: [{ type: 'input_text', text: story }] }],
  });
  check(parts.output_text === r.output_text, 'responses: input items give the same text as instructions and a string',
        `${show(parts.output_text)} vs ${show(r.output_text)}`);
});

await group('incomplete', async () => {
  const r = await client.responses.create({
    model: alias, input: story, ...sampling, max_output_tokens: 4, ignore_eos: true,
  });
  check(r.status === 'incomplete' && r.incomplete_details?.reason === 'max_output_tokens',
        'incomplete: status and reason on max_output_tokens', show([r.status, r.incomplete_details]));
  check(r.usage.output_tokens === 4 && r.output[0]?.status === 'incomplete',
        'incomplete: four tokens, the message incomplete', show([r.usage, r.output]));
  const evs = await events(await client.responses.create({
    model: alias, input: story, ...sampling, max_output_tokens: 4, ignore_eos: true, stream: true,
  }));
  const last = evs[evs.length - 1];
  check(last?.type === 'response.incomplete' && last.response.status === 'incomplete' &&
        last.response.incomplete_details?.reason === 'max_output_tokens',
        'incomplete: the stream ends with response.incomplete', show(last));
  check(sequenceProblems(evs).length === 0, 'incomplete: the stream\'s event order', show(sequenceProblems(evs)));
});

await group('stream', async () => {
  if (!first) throw new Error('no non-streamed response to compare with');
  const req = { model: alias, instructions, input: story, ...sampling, max_output_tokens: 48 };
  const evs = await events(await client.responses.create({ ...req, stream: true }));
  const problems = sequenceProblems(evs);
  check(problems.length === 0, 'stream: sequence numbers and event order', show(problems));
  const want = ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added',
                'response.output_text.delta', 'response.output_text.done', 'response.content_part.done',
                'response.output_item.done', first.status === 'completed' ? 'response.completed' : 'response.incomplete'];
  check(same(shape(evs), want), 'stream: the events of a text reply', show(shape(evs)));
  const deltas = evs.filter((e) => e.type === 'response.output_text.delta');
  const text = deltas.map((e) => e.delta).join('');
  check(text === first.output_text, 'stream: the deltas are the non-streamed text', `${show(text)} vs ${show(first.output_text)}`);
  const added = evs.find((e) => e.type === 'response.output_item.added');
  check(deltas.every((e) => e.item_id === added.item.id && e.output_index === 0 && e.content_index === 0),
        'stream: the deltas name their item, output and content index', show(deltas[0]));
  check(added.item.status === 'in_progress' && evs[0].response.status === 'in_progress' &&
        evs[0].response.usage === null, 'stream: in_progress first', show([added.item, evs[0].response.status]));
  const done = evs.find((e) => e.type === 'response.output_text.done');
  check(done?.text === first.output_text, 'stream: output_text.done holds the text', show(done));
  const end = evs[evs.length - 1].response;
  check(end.usage?.output_tokens === first.usage.output_tokens && end.usage?.input_tokens === first.usage.input_tokens,
        'stream: the final response\'s usage', `${show(end.usage)} vs ${show(first.usage)}`);
  check(end.output?.[0]?.content?.[0]?.text === first.output_text && end.output[0].id === added.item.id,
        'stream: the final response\'s output', show(end.output));

  // every SSE message has an event: line naming its data's type
  const raw = await fetch(`${base}/v1/responses`, {
    method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ ...req, max_output_tokens: 8, stream: true }),
  });
  const body = await raw.text();
  const messages = body.split('\n\n').filter((m) => m.trim() !== '');
  const bad = messages.filter((m) => {
    const lines = m.split('\n');
    const ev = lines.find((l) => l.startsWith('event: '))?.slice(7);
    const data = lines.find((l) => l.startsWith('data: '))?.slice(6);
    try {
      return !ev || JSON.parse(data).type !== ev;
    } catch {
      return true;
    }
  });
  check(raw.headers.get('content-type')?.startsWith('text/event-stream') && messages.length >= 8 && bad.length === 0,
        'stream: each message an event: line and a data: line of that type', show(bad[0] ?? messages.length));

  // the client's stream helper accumulates the same response
  const helper = client.responses.stream(req);
  let helperDeltas = '';
  helper.on('response.output_text.delta', (e) => { helperDeltas += e.delta; });
  const fin = await helper.finalResponse();
  check(fin.output_text === first.output_text && helperDeltas === first.output_text,
        'stream: responses.stream() gives the same output_text', show(fin.output_text));
});

const tools = [{ type: 'function', ...weather, strict: true }];
const valid = weatherArgsValid;

await group('tool calls', async () => {
  const question = 'The weather in Paris?';
  const req = {
    model: alias, instructions, input: question, tools, tool_choice: { type: 'function', name: 'get_weather' },
    max_output_tokens: 300, temperature: 1, seed: 5, parallel_tool_calls: false,
  };
  const r = await client.responses.create(req);
  const calls = r.output.filter((o) => o.type === 'function_call');
  const call = calls[0];
  check(calls.length === 1 && r.output.length === 1 && /^fc_/.test(call.id) && /^call_/.test(call.call_id) &&
        call.name === 'get_weather' && call.status === 'completed' && valid(call.arguments),
        'tools: one get_weather function_call with valid arguments', show(r.output));
  check(r.output_text === '' && r.status === 'completed', 'tools: no text, completed', show([r.output_text, r.status]));
  check(r.tools.length === 1 && r.tools[0].name === 'get_weather' && r.tools[0].type === 'function' &&
        r.tool_choice?.name === 'get_weather', 'tools: the tools and tool_choice repeated', show([r.tools, r.tool_choice]));

  // streamed: the same call, its arguments as function_call_arguments events
  const evs = await events(await client.responses.create({ ...req, stream: true }));
  check(sequenceProblems(evs).length === 0, 'tools stream: event order', show(sequenceProblems(evs)));
  const want = ['response.created', 'response.in_progress', 'response.output_item.added',
                'response.function_call_arguments.delta', 'response.function_call_arguments.done',
                'response.output_item.done', 'response.completed'];
  check(same(shape(evs), want), 'tools stream: the events of a function call', show(shape(evs)));
  const argsDone = evs.find((e) => e.type === 'response.function_call_arguments.done');
  const argsDelta = evs.filter((e) => e.type === 'response.function_call_arguments.delta').map((e) => e.delta).join('');
  check(argsDone?.arguments === call.arguments && argsDelta === call.arguments && argsDone?.name === 'get_weather',
        'tools stream: the arguments of the non-streamed call', show(argsDone));
  const nDeltas = evs.filter((e) => e.type === 'response.function_call_arguments.delta').length;
  check(nDeltas > 1, 'tools stream: the arguments come in several deltas', `${nDeltas}`);
  const helper = await client.responses.stream(req).finalResponse();
  const hc = helper.output.find((o) => o.type === 'function_call');
  check(hc?.arguments === call.arguments && hc?.name === 'get_weather',
        'tools stream: responses.stream() accumulates the call', show(helper.output));

  // the conversation goes on with the call's output: after the stored
  // response, or with the items given back; both prompt the same tokens
  const follow = { model: alias, instructions, tools, temperature: 0, seed: 1, max_output_tokens: 6 };
  const output = { type: 'function_call_output', call_id: call.call_id, output: '{"temp": 21}' };
  const a = await client.responses.create({ ...follow, previous_response_id: r.id, input: [output] });
  const b = await client.responses.create({ ...follow, input: [{ role: 'user', content: question }, call, output] });
  check(a.status !== 'failed' && a.previous_response_id === r.id, 'tools: previous_response_id with the call\'s output',
        show([a.status, a.previous_response_id]));
  check(a.usage.input_tokens === b.usage.input_tokens && a.output_text === b.output_text,
        'tools: the stored conversation is the one given back as items',
        `${a.usage.input_tokens} vs ${b.usage.input_tokens} input tokens`);
  check(a.usage.input_tokens > r.usage.input_tokens + r.usage.output_tokens,
        'tools: the follow-up prompts the question, the call and its output',
        `${a.usage.input_tokens} vs ${r.usage.input_tokens} + ${r.usage.output_tokens}`);
  // a chain: the follow-up's own id continues it
  const c = await client.responses.create({ ...follow, previous_response_id: a.id, input: 'Thanks.' });
  check(c.usage.input_tokens > a.usage.input_tokens, 'tools: a chain of previous_response_id grows the conversation',
        `${c.usage.input_tokens} vs ${a.usage.input_tokens}`);
  // tool_choice "required" forces a call of one of the tools
  const req2 = await client.responses.create({ ...req, tool_choice: 'required' });
  check(req2.output.some((o) => o.type === 'function_call' && valid(o.arguments)), 'tools: tool_choice required',
        show(req2.output));

  // parallel_tool_calls (the default): with the end of text banned the
  // forced calls go on to a second, each a function_call item of its own,
  // streamed one after another; false keeps one
  const several = { ...req, tool_choice: 'required', max_output_tokens: 240, logit_bias: { 2: -100 } };
  delete several.parallel_tool_calls;
  const r2 = await client.responses.create(several);
  const calls2 = r2.output.filter((o) => o.type === 'function_call');
  check(calls2.length >= 2 && valid(calls2[0].arguments) && new Set(calls2.map((o) => o.call_id)).size === calls2.length,
        'tools: several function_call items in one response', show(r2.output));
  const evs2 = await events(await client.responses.create({ ...several, stream: true }));
  check(sequenceProblems(evs2).length === 0, 'tools stream, several calls: event order', show(sequenceProblems(evs2)));
  const pick = (items) => JSON.stringify(items.filter((o) => o.type === 'function_call').map((o) => [o.name, o.arguments]));
  const doneItems = evs2.filter((e) => e.type === 'response.output_item.done').map((e) => e.item);
  check(pick(doneItems) === pick(calls2), 'tools stream, several calls: the non-streamed items', show(doneItems));
  const helper2 = await client.responses.stream(several).finalResponse();
  check(pick(helper2.output) === pick(calls2), 'tools stream, several calls: responses.stream() accumulates them',
        show(helper2.output));
  const one = await client.responses.create({ ...several, parallel_tool_calls: false });
  check(one.output.filter((o) => o.type === 'function_call').length === 1,
        'tools: parallel_tool_calls false gives one function_call', show(one.output));
});

await group('text formats', async () => {
  const schema = {
    type: 'object', additionalProperties: false, required: ['n', 'ok'],
    properties: { n: { type: 'integer', minimum: 1, maximum: 9 }, ok: { type: 'boolean' } },
  };
  const r = await client.responses.create({
    model: alias, input: 'A number?', max_output_tokens: 60, temperature: 1, seed: 3,
    text: { format: { type: 'json_schema', name: 'answer', schema, strict: true } },
  });
  let v = null;
  try { v = JSON.parse(r.output_text); } catch { /* checked below */ }
  check(v && Number.isInteger(v.n) && v.n >= 1 && v.n <= 9 && typeof v.ok === 'boolean' && Object.keys(v).length === 2,
        'json_schema: the text is a document of the schema', show(r.output_text));
  check(r.text?.format?.type === 'json_schema' && r.text.format.name === 'answer',
        'json_schema: text.format repeated', show(r.text));
  const o = await client.responses.create({
    model: alias, input: 'JSON?', max_output_tokens: 60, temperature: 1, seed: 3, text: { format: { type: 'json_object' } },
  });
  let ov = null;
  try { ov = JSON.parse(o.output_text); } catch { /* checked below */ }
  check(o.status === 'incomplete' || (ov !== null && typeof ov === 'object' && !Array.isArray(ov)),
        'json_object: the text is a JSON object', show(o.output_text));
});

await group('reasoning', async () => {
  // the think server's template lets replies think in <think> ... </think>;
  // a grammar (hearth's extension) spells the reply
  const tclient = new OpenAI({ baseURL: `${thinkBase}/v1`, apiKey: key, maxRetries: 0 });
  const req = {
    model: alias, input: 'Why?', max_output_tokens: 60, reasoning: { effort: 'low' },
    grammar: 'root ::= "<think>Plan it.</think>\\n\\nAnswer."',
  };
  const r = await tclient.responses.create(req);
  check(r.output.length === 2 && r.output[0].type === 'reasoning' && /^rs_/.test(r.output[0].id) &&
        r.output[0].content?.[0]?.type === 'reasoning_text' && r.output[0].content[0].text === 'Plan it.' &&
        Array.isArray(r.output[0].summary) && r.output[1].type === 'message' && r.output_text === 'Answer.',
        'reasoning: a reasoning item, then the answer', show(r.output));
  const rt = r.usage?.output_tokens_details?.reasoning_tokens;
  check(Number.isInteger(rt) && rt > 0 && rt < r.usage.output_tokens, 'reasoning: usage counts the reasoning tokens',
        show(r.usage));
  check(r.reasoning?.effort === 'low', 'reasoning: the effort repeated', show(r.reasoning));
  const evs = await events(await tclient.responses.create({ ...req, stream: true }));
  check(sequenceProblems(evs).length === 0, 'reasoning stream: event order', show(sequenceProblems(evs)));
  const want = ['response.created', 'response.in_progress',
                'response.output_item.added', 'response.content_part.added', 'response.reasoning_text.delta',
                'response.reasoning_text.done', 'response.content_part.done', 'response.output_item.done',
                'response.output_item.added', 'response.content_part.added', 'response.output_text.delta',
                'response.output_text.done', 'response.content_part.done', 'response.output_item.done',
                'response.completed'];
  check(same(shape(evs), want), 'reasoning stream: the reasoning item\'s events, then the message\'s',
        show(shape(evs)));
  const thought = evs.filter((e) => e.type === 'response.reasoning_text.delta').map((e) => e.delta).join('');
  check(thought === 'Plan it.', 'reasoning stream: the reasoning as deltas', show(thought));
  const fin = await tclient.responses.stream(req).finalResponse();
  check(fin.output[0]?.content?.[0]?.text === 'Plan it.' && fin.output_text === 'Answer.',
        'reasoning stream: responses.stream() accumulates both items', show(fin.output));
});

await group('store', async () => {
  const r = await client.responses.create({ model: alias, input: story, ...sampling, max_output_tokens: 8 });
  const got = await client.responses.retrieve(r.id);
  check(got.id === r.id && got.output_text === r.output_text && got.status === r.status &&
        same(got.usage, r.usage), 'store: retrieve gives the response back', show(got));
  const del = await raises(client.responses.delete(r.id));
  check(del === null, 'store: delete', show(del?.message));
  const gone = await raises(client.responses.retrieve(r.id));
  check(gone instanceof OpenAI.NotFoundError, 'store: a deleted response is not found (404)',
        `${gone?.constructor?.name} ${gone?.status}`);
  const prev = await raises(client.responses.create({ model: alias, input: 'x', previous_response_id: r.id }));
  check(prev instanceof OpenAI.BadRequestError && prev.code === 'previous_response_not_found' &&
        prev.param === 'previous_response_id' && prev.message.includes(r.id),
        'store: a deleted previous_response_id is previous_response_not_found, naming the id',
        `${prev?.constructor?.name} ${prev?.status} ${prev?.code} ${prev?.message}`);
  const unknown = await raises(client.responses.create({ model: alias, input: 'x', previous_response_id: 'resp_nope' }));
  check(unknown instanceof OpenAI.BadRequestError && unknown.code === 'previous_response_not_found',
        'store: an unknown previous_response_id', `${unknown?.constructor?.name} ${unknown?.code}`);
  const nostore = await client.responses.create({ model: alias, input: story, max_output_tokens: 2, store: false });
  check(nostore.store === false, 'store: store false repeated', show(nostore.store));
  const ns = await raises(client.responses.retrieve(nostore.id));
  check(ns instanceof OpenAI.NotFoundError, 'store: a store: false response is not kept',
        `${ns?.constructor?.name} ${ns?.status}`);
});

await group('store bounds', async () => {
  // the think server keeps 2 responses: a third gives up the least
  // recently used, and reading one uses it
  const tclient = new OpenAI({ baseURL: `${thinkBase}/v1`, apiKey: key, maxRetries: 0 });
  const make = async () => (await tclient.responses.create({ model: alias, input: 'Hi.', max_output_tokens: 2 })).id;
  const kept = async (id) => (await raises(tclient.responses.retrieve(id))) === null;
  const a = await make();
  const b = await make();
  check(await kept(a) && await kept(b), 'store bounds: two responses kept');
  await kept(a); // read last: b is now the least recently used
  const c = await make();
  check(await kept(a) && !(await kept(b)) && await kept(c), 'store bounds: the least recently used given up first',
        show([a, b, c]));
  // and 6000 bytes: one whose metadata alone passes them is not kept
  const meta = Object.fromEntries([...Array(16).keys()].map((i) => [`k${i}`, 'x'.repeat(500)]));
  const big = await tclient.responses.create({ model: alias, input: 'Hi.', max_output_tokens: 2, metadata: meta });
  const e = await raises(tclient.responses.retrieve(big.id));
  check(e instanceof OpenAI.NotFoundError, 'store bounds: a response larger than the bytes is not kept',
        `${e?.constructor?.name} ${e?.status}`);
  check(await kept(c), 'store bounds: what was kept stays', c);
});

await group('unsupported fields', async () => {
  const cases = [
    [{ tools: [{ type: 'web_search' }] }, 'tools[0].type'],
    [{ background: true }, 'background'],
    [{ include: ['reasoning.encrypted_content'] }, 'include'],
    [{ truncation: 'auto' }, 'truncation'],
    [{ conversation: 'conv_1' }, 'conversation'],
    [{ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'http://x/y.png' }] }] }, 'input[0].content[0]'],
    [{ input: [{ type: 'web_search_call', id: 'ws_1' }] }, 'input[0].type'],
    [{ max_tokens: 5 }, 'max_tokens'],
    [{ reasoning: { effort: 'minimal' } }, 'reasoning.effort'],
    [{ tool_choice: { type: 'file_search' } }, 'tool_choice'],
    [{ text: { format: { type: 'yaml' } } }, 'text.format'],
    [{ temperature: 5 }, 'temperature'],
    [{ max_output_tokens: 'many' }, 'max_output_tokens'],
  ];
  for (const [body, param] of cases) {
    const e = await raises(client.responses.create({ model: alias, input: 'x', ...body }));
    check(e instanceof OpenAI.BadRequestError && e.param === param && typeof e.message === 'string' && e.message.length,
          `400 naming ${param} for ${show(body)}`, `${e?.constructor?.name} ${e?.status} ${show(e?.param)} ${e?.message}`);
  }
  const none = await raises(client.responses.create({ model: alias }));
  check(none instanceof OpenAI.BadRequestError && none.param === 'input', 'no input: 400 naming input',
        `${none?.constructor?.name} ${none?.param}`);
});

await group('error mid-stream', async () => {
  // As the chat test's: on the server with a 1 s deadline, eight streams
  // of 4000 tokens each (32000 tokens) cannot end in time; each ends with
  // an error event and response.failed after it has begun (with or
  // without text before: a slow machine may not have written any).
  const tclient = new OpenAI({ baseURL: `${timeoutBase}/v1`, apiKey: key, maxRetries: 0 });
  const runs = await Promise.all([...Array(8).keys()].map(async (i) => events(await tclient.responses.create({
    model: alias, input: 'Once upon a time', max_output_tokens: 4000, stream: true, ignore_eos: true,
    logit_bias: { 2: -100 }, temperature: 1, seed: i,
  }))));
  for (const evs of runs) {
    const types = evs.map((e) => e.type);
    const err = evs.find((e) => e.type === 'error');
    const last = evs[evs.length - 1];
    if (!check(err?.code === 'timeout' && typeof err.message === 'string' && last?.type === 'response.failed' &&
               last.response.status === 'failed' && last.response.error?.message?.length > 0 &&
               types[0] === 'response.created' && types.indexOf('error') === types.length - 2,
               'error mid-stream: after the stream began, an error event and response.failed',
               show([types.slice(-3), err, last?.response?.error])))
      break;
  }
});

finish();

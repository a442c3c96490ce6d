// server-openai.mjs -- hearth serve through the official OpenAI Node.js
// client: chat and text completions, streaming or not, the usage chunk of
// a stream, models.list, errors raised as the client's APIError classes
// (400 for a bad parameter, 401 for a wrong key, an error event in the
// middle of a stream), and a stream the client aborts.  Run by
// tests/server-openai.sh with the environment:
//   HEARTH_URL          base URL of a server started with --api-key KEY
//   HEARTH_TIMEOUT_URL  base URL of one started with --timeout 1
//   HEARTH_KEY          the key
//   HEARTH_ALIAS        the model alias both servers report
// Prints "ok: ..." per check, "FAIL: ..." per failure, and exits 1 if any
// check failed.
import OpenAI from 'openai';
import { check, fail, finish, group, ok, show, waitHealthy, weather, weatherArgsValid } from './openai-checks.mjs';

const base = process.env.HEARTH_URL;
const timeoutBase = process.env.HEARTH_TIMEOUT_URL;
const key = process.env.HEARTH_KEY;
const alias = process.env.HEARTH_ALIAS;

const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0, timeout: 60000 });

await waitHealthy(base, 120);
await waitHealthy(timeoutBase, 120);

const messages = [
  { role: 'system', content: 'You are a storyteller.' },
  { role: 'user', content: 'Tell me a story about a cat.' },
];
const sampling = { temperature: 0, seed: 42, max_tokens: 48 };

await group('chat.completions.create', async () => {
  const r = await client.chat.completions.create({ model: alias, messages, ...sampling });
  check(r.object === 'chat.completion', 'chat: object is chat.completion', r.object);
  check(typeof r.id === 'string' && r.id.startsWith('chatcmpl-'), 'chat: id chatcmpl-...', r.id);
  check(r.model === alias, 'chat: model is the alias', r.model);
  check(Number.isInteger(r.created), 'chat: created is an integer', r.created);
  check(r.choices.length === 1, 'chat: one choice', r.choices.length);
  const c = r.choices[0];
  check(c.message.role === 'assistant', 'chat: role assistant', c.message.role);
  check(typeof c.message.content === 'string' && c.message.content.length > 0,
        'chat: non-empty content', show(c.message.content));
  check(['stop', 'length'].includes(c.finish_reason), 'chat: finish_reason', c.finish_reason);
  const u = r.usage;
  check(u && u.prompt_tokens > 0 && u.completion_tokens > 0 &&
        u.total_tokens === u.prompt_tokens + u.completion_tokens &&
        u.completion_tokens <= sampling.max_tokens, 'chat: usage', show(u));

  // The same request streamed, with the usage chunk.
  const stream = await client.chat.completions.create({
    model: alias, messages, ...sampling, stream: true, stream_options: { include_usage: true },
  });
  let text = '', first = null, finish = null, usage = null, chunks = 0, afterUsage = 0;
  let usageNullEverywhere = true;
  for await (const chunk of stream) {
    chunks++;
    if (usage) afterUsage++;
    if (chunk.object !== 'chat.completion.chunk') fail(`chat stream: chunk object ${chunk.object}`);
    if (chunk.usage) {
      usage = chunk.usage;
      check(chunk.choices.length === 0, 'chat stream: the usage chunk has no choices',
            show(chunk.choices));
    } else if (chunk.usage !== null) {
      usageNullEverywhere = false;
    }
    for (const ch of chunk.choices) {
      if (first === null) first = ch.delta;
      if (ch.delta?.content) text += ch.delta.content;
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  check(first && first.role === 'assistant', 'chat stream: first delta has role assistant', show(first));
  check(usageNullEverywhere, 'chat stream: usage null in the other chunks');
  check(text === c.message.content, 'chat stream: deltas equal the non-streaming text',
        `${show(text)} vs ${show(c.message.content)}`);
  check(finish === c.finish_reason, 'chat stream: same finish_reason', `${finish} vs ${c.finish_reason}`);
  check(usage !== null, 'chat stream: a usage chunk');
  check(afterUsage === 0, 'chat stream: the usage chunk is the last');
  if (usage) {
    check(usage.completion_tokens === u.completion_tokens && usage.prompt_tokens === u.prompt_tokens,
          'chat stream: same usage as the non-streaming request', `${show(usage)} vs ${show(u)}`);
  }
  check(chunks >= 3, 'chat stream: several chunks', chunks);
});

await group('chat logprobs', async () => {
  const r = await client.chat.completions.create({
    model: alias, messages, ...sampling, max_tokens: 8, logprobs: true, top_logprobs: 2,
  });
  const lp = r.choices[0].logprobs?.content;
  check(Array.isArray(lp) && lp.length === r.usage.completion_tokens,
        'chat: one logprobs entry per token', show(r.choices[0].logprobs)?.slice(0, 300));
  if (Array.isArray(lp) && lp.length) {
    const e = lp[0];
    check(typeof e.token === 'string' && typeof e.logprob === 'number' && e.logprob <= 0 &&
          Array.isArray(e.bytes) && e.top_logprobs.length === 2, 'chat: logprobs entry fields', show(e));
  }
});

await group('completions.create', async () => {
  const req = { model: alias, prompt: 'Once upon a time', ...sampling };
  const r = await client.completions.create(req);
  check(r.object === 'text_completion', 'completions: object text_completion', r.object);
  check(r.id.startsWith('cmpl-'), 'completions: id cmpl-...', r.id);
  check(r.model === alias, 'completions: model is the alias', r.model);
  const c = r.choices[0];
  check(typeof c.text === 'string' && c.text.length > 0, 'completions: non-empty text', show(c.text));
  check(['stop', 'length'].includes(c.finish_reason), 'completions: finish_reason', c.finish_reason);
  check(r.usage.completion_tokens > 0 && r.usage.completion_tokens <= sampling.max_tokens,
        'completions: usage', show(r.usage));

  const stream = await client.completions.create({
    ...req, stream: true, stream_options: { include_usage: true },
  });
  let text = '', finish = null, usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    if (chunk.object !== 'text_completion') fail(`completions stream: chunk object ${chunk.object}`);
    for (const ch of chunk.choices) {
      text += ch.text ?? '';
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  check(text === c.text, 'completions stream: chunks equal the non-streaming text',
        `${show(text)} vs ${show(c.text)}`);
  check(finish === c.finish_reason, 'completions stream: same finish_reason', `${finish} vs ${c.finish_reason}`);
  check(usage && usage.completion_tokens === r.usage.completion_tokens,
        'completions stream: usage chunk', show(usage));

  // Without stream_options the stream has no usage chunk.
  const plain = await client.completions.create({ ...req, max_tokens: 4, stream: true });
  let sawUsage = false;
  for await (const chunk of plain) if (chunk.usage) sawUsage = true;
  check(!sawUsage, 'completions stream: no usage chunk unless asked for');

  // Token ids as the prompt, n > 1: choice i is sampled with seed + i.
  const n2 = await client.completions.create({
    model: alias, prompt: [1, 403, 407, 261], max_tokens: 8, n: 2, temperature: 1, seed: 7,
  });
  check(n2.choices.length === 2 && n2.choices.map((c) => c.index).join() === '0,1',
        'completions: n=2 gives choices 0 and 1', show(n2.choices.map((c) => c.index)));
});

await group('tool calls', async () => {
  // tool_choice forces a call; its arguments follow the tool's schema
  const tools = [{ type: 'function', function: weather }];
  const valid = weatherArgsValid;
  const req = {
    model: alias, messages: [{ role: 'user', content: 'The weather in Paris?' }], tools,
    tool_choice: { type: 'function', function: { name: 'get_weather' } }, max_tokens: 300, temperature: 1, seed: 5,
    parallel_tool_calls: false,
  };
  const r = await client.chat.completions.create(req);
  const c = r.choices[0];
  check(c.finish_reason === 'tool_calls', 'tools: finish_reason tool_calls', c.finish_reason);
  const call = c.message.tool_calls?.[0];
  check(c.message.tool_calls?.length === 1 && call.type === 'function' && call.id.startsWith('call_') &&
        call.function.name === 'get_weather' && valid(call.function.arguments),
        'tools: one get_weather call with valid arguments', show(c.message));
  // streamed: the client's own accumulation of the deltas gives the same call
  const streamer = client.chat.completions.stream ?? client.beta?.chat?.completions?.stream;
  if (streamer) {
    const st = streamer.call(client.chat.completions.stream ? client.chat.completions : client.beta.chat.completions, req);
    const done = await st.finalChatCompletion();
    const sc = done.choices[0];
    check(sc.finish_reason === 'tool_calls', 'tools stream: finish_reason tool_calls', sc.finish_reason);
    check(sc.message.tool_calls?.length === 1 && sc.message.tool_calls[0].function.name === 'get_weather' &&
          sc.message.tool_calls[0].function.arguments === call.function.arguments,
          'tools stream: the accumulated call equals the non-streaming one', show(sc.message));
  }
  // the raw stream: the call's first chunk, then its arguments in several
  // deltas as they are generated
  const deltas = [];
  let head = null;
  for await (const chunk of await client.chat.completions.create({ ...req, stream: true })) {
    for (const t of chunk.choices[0]?.delta?.tool_calls ?? []) {
      if (t.id) head = t;
      else deltas.push(t);
    }
  }
  check(head?.index === 0 && head.type === 'function' && head.function?.name === 'get_weather' &&
        head.function?.arguments === '', 'tools stream: the first chunk names the call, arguments empty', show(head));
  check(deltas.length > 1 && deltas.every((t) => t.index === 0) &&
        deltas.map((t) => t.function.arguments).join('') === call.function.arguments,
        'tools stream: the arguments come in several deltas that add up to the call\'s', show(deltas));
  // the conversation goes on with the call's result
  const next = await client.chat.completions.create({
    model: alias, tools, max_tokens: 4, messages: [
      ...req.messages, c.message, { role: 'tool', tool_call_id: call.id, content: '{"temp": 21}' }],
  });
  check(next.choices.length === 1, 'tools: the call and its result are accepted back');

  // parallel_tool_calls (the default): with the end of text banned the
  // forced calls go on to a second, streamed with indices 0, 1, ...
  const several = { ...req, tool_choice: 'required', max_tokens: 240, logit_bias: { 2: -100 } };
  delete several.parallel_tool_calls;
  const r2 = await client.chat.completions.create(several);
  const calls2 = r2.choices[0].message.tool_calls ?? [];
  check(calls2.length >= 2 && r2.choices[0].finish_reason === 'tool_calls' &&
        calls2[0].function.name === 'get_weather' && valid(calls2[0].function.arguments),
        'tools: several calls in one turn', show(r2.choices[0].message));
  if (streamer) {
    const st = streamer.call(client.chat.completions.stream ? client.chat.completions : client.beta.chat.completions,
      several);
    const indices = new Set();
    st.on('chunk', (chunk) => { for (const t of chunk.choices[0]?.delta?.tool_calls ?? []) indices.add(t.index); });
    const sc = (await st.finalChatCompletion()).choices[0];
    const pick = (cs) => cs.map((x) => [x.function.name, x.function.arguments]);
    check([...indices].join() === calls2.map((_, i) => i).join() &&
          JSON.stringify(pick(sc.message.tool_calls ?? [])) === JSON.stringify(pick(calls2)),
          'tools stream: several calls accumulated by index equal the non-streaming ones',
          show([[...indices], sc.message.tool_calls]));
  }
  const one = await client.chat.completions.create({ ...several, parallel_tool_calls: false });
  check(one.choices[0].message.tool_calls?.length === 1, 'tools: parallel_tool_calls false gives one call',
        show(one.choices[0].message));
});

await group('models.list', async () => {
  const page = await client.models.list();
  const ids = page.data.map((m) => m.id);
  check(ids.includes(alias), 'models.list: the alias is listed', show(ids));
  const m = page.data.find((x) => x.id === alias);
  if (m) check(m.object === 'model' && m.owned_by === 'hearth', 'models.list: fields', show(m));
  const all = [];
  for await (const x of client.models.list()) all.push(x.id);
  check(all.length === ids.length, 'models.list: auto-pagination', show(all));
});

await group('bad parameter', async () => {
  try {
    await client.chat.completions.create({ model: alias, messages, temperature: 5 });
    fail('temperature 5: no error');
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.status === 400,
          'temperature 5: BadRequestError, status 400', `${e?.constructor?.name} ${e?.status}`);
    check(e.param === 'temperature', 'temperature 5: param temperature', show(e.param));
    check(e.type === 'invalid_request_error', 'temperature 5: type invalid_request_error', show(e.type));
  }
  try {
    await client.completions.create({ model: alias, prompt: 'Once upon a time '.repeat(1500), max_tokens: 4 });
    fail('over-long prompt: no error');
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.code === 'context_length_exceeded',
          'over-long prompt: 400 context_length_exceeded', `${e?.constructor?.name} ${e?.status} ${e?.code}`);
  }
});

await group('wrong key', async () => {
  const bad = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'not-the-key', maxRetries: 0 });
  try {
    await bad.models.list();
    fail('wrong key: no error');
  } catch (e) {
    check(e instanceof OpenAI.AuthenticationError && e.status === 401,
          'wrong key: AuthenticationError, status 401', `${e?.constructor?.name} ${e?.status}`);
    check(e.code === 'invalid_api_key', 'wrong key: code invalid_api_key', show(e.code));
  }
});

await group('client abort', async () => {
  const stream = await client.completions.create({
    model: alias, prompt: 'Once upon a time', max_tokens: 1500, stream: true, ignore_eos: true,
    logit_bias: { 2: -100 },
  });
  let n = 0;
  for await (const chunk of stream) {
    if (++n === 5) break; // leaving the loop aborts the request
  }
  check(n === 5, 'client abort: five chunks read, then the stream left');
  const r = await client.completions.create({ model: alias, prompt: 'One day', max_tokens: 4 });
  check(r.choices[0].text.length > 0, 'client abort: the server answers the next request');
});

await group('error mid-stream', async () => {
  // The second server's deadline is 1 s.  One stream of stories260K runs
  // at some 2000 tokens/s on an idle machine, so a single request of the
  // whole context could end in time; 8 choices of 4000 tokens each (32000
  // tokens, several seconds at any speed seen) cannot, and the error comes
  // after the stream has begun.
  const tclient = new OpenAI({ baseURL: `${timeoutBase}/v1`, apiKey: key, maxRetries: 0 });
  const stream = await tclient.completions.create({
    model: alias, prompt: 'Once upon a time', max_tokens: 4000, n: 8, stream: true, ignore_eos: true,
    logit_bias: { 2: -100 }, temperature: 1, seed: 1,
  });
  let chunks = 0;
  const t0 = Date.now();
  try {
    for await (const chunk of stream) chunks++;
    fail(`error mid-stream: the stream ended without an error after ${chunks} chunks, ${Date.now() - t0} ms`);
  } catch (e) {
    check(e instanceof OpenAI.APIError && !(e instanceof OpenAI.APIConnectionError),
          'error mid-stream: the client raises APIError', `${e?.constructor?.name}: ${e?.message}`);
    check(chunks > 0, 'error mid-stream: after some chunks', chunks);
    check(e.code === 'timeout', 'error mid-stream: code timeout', show(e.code));
    check(typeof e.error?.message === 'string' && e.error.message.length > 0,
          'error mid-stream: the error has a message', show(e.error));
  }
});

finish();

// openai-checks.mjs -- what the tests of hearth serve through the official
// OpenAI Node.js client share (tests/server-openai.mjs,
// tests/server-responses.mjs): "ok: ..." and "FAIL: ..." lines, groups of
// checks that an exception fails without stopping the others, and the
// wait for a server's /health.
let failures = 0;

export function ok(what) { console.log(`ok: ${what}`); }
export function fail(what) { console.error(`FAIL: ${what}`); failures++; }
export function check(cond, what, detail) {
  if (cond) ok(what); else fail(detail === undefined ? what : `${what}: ${detail}`);
  return cond;
}
export const show = (x) => JSON.stringify(x)?.slice(0, 600);

export async function waitHealthy(url, seconds) {
  const end = Date.now() + seconds * 1000;
  let last = 'no answer';
  while (Date.now() < end) {
    try {
      const r = await fetch(`${url}/health`);
      if (r.status === 200) return;
      last = `HTTP ${r.status}`;
    } catch (e) {
      last = String(e);
    }
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error(`${url}/health not 200 after ${seconds}s (${last})`);
}

// Runs one named group of checks; an exception fails the group and the
// next group still runs.
export async function group(name, fn) {
  try {
    await fn();
  } catch (e) {
    fail(`${name}: ${e?.constructor?.name}: ${e?.message}${e?.status ? ` (status ${e.status})` : ''}`);
  }
}

// Exit 1 when a check failed.
export function finish() {
  if (failures) {
    console.error(`${failures} check(s) failed`);
    process.exit(1);
  }
}

// The tool both APIs' tests force a call of, and whether a call's
// arguments (a JSON string) follow its schema exactly.
export const weather = {
  name: 'get_weather', description: 'The weather in a city',
  parameters: {
    type: 'object', additionalProperties: false, required: ['city', 'days'],
    properties: { city: { type: 'string', maxLength: 8 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
  },
};
export const weatherArgsValid = (args) => {
  try {
    const v = JSON.parse(args);
    return typeof v.city === 'string' && v.city.length <= 8 && Number.isInteger(v.days) && v.days >= 1 &&
      v.days <= 7 && Object.keys(v).length === 2;
  } catch {
    return false;
  }
};

// The official Anthropic SDK through Gatehouse to an OpenAI-compatible upstream (the fake's
// `/v1/chat/completions`): a JSON and a streamed text answer, a streamed tool call and its
// result sent back, and two upstream errors as the SDK reads them. Prints a JSON summary
// on stdout for the Rust test that runs this script.
// Env: GATEHOUSE_URL, GATEHOUSE_KEY, FAKE_URL (the fake's origin, to queue faults).
import Anthropic from '@anthropic-ai/sdk';

const client = new Anthropic({ baseURL: process.env.GATEHOUSE_URL, apiKey: process.env.GATEHOUSE_KEY, maxRetries: 0, timeout: 30_000 });
const model = 'claude-sonnet-4-6';
const tools = [{ name: 'Bash', description: 'Run a shell command', input_schema: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } }];
const ask = { role: 'user', content: 'run the marker command' };

async function fault(body) {
  const r = await fetch(`${process.env.FAKE_URL}/_fake/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (r.status !== 204) throw new Error(`fault not queued: ${r.status}`);
}

async function apiError(promise) {
  try {
    await promise;
    return null;
  } catch (e) {
    if (!(e instanceof Anthropic.APIError)) throw e;
    return { status: e.status, type: e.error?.error?.type ?? null, message: e.error?.error?.message ?? null, retry_after: e.headers?.get('retry-after') ?? null };
  }
}

const json = await client.messages.create({ model, max_tokens: 256, messages: [{ role: 'user', content: 'hello' }] });

const events = [];
let text = '';
const s = client.messages.stream({ model, max_tokens: 256, messages: [{ role: 'user', content: 'hello' }] });
s.on('streamEvent', (e) => events.push(e.type));
s.on('text', (t) => { text += t; });
const streamed = await s.finalMessage();

const toolStream = client.messages.stream({ model, max_tokens: 256, tools, messages: [ask] });
const withTool = await toolStream.finalMessage();
const use = withTool.content.find((b) => b.type === 'tool_use');
const answered = await client.messages.create({
  model, max_tokens: 256, tools,
  messages: [ask, { role: 'assistant', content: withTool.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'gatehouse-ok' }] }],
});

await fault({ kind: 'status', status: 429, retry_after: 7, error_type: 'rate_limit_exceeded', message: 'Rate limit reached for org-acct-secret-42' });
const limited = await apiError(client.messages.create({ model, max_tokens: 16, messages: [{ role: 'user', content: 'x' }] }));
await fault({ kind: 'status', status: 400, error_type: 'context_length_exceeded', message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens." });
const overflow = await apiError(client.messages.create({ model, max_tokens: 16, messages: [{ role: 'user', content: 'x' }] }));

console.log(JSON.stringify({
  json: { id: json.id, text: json.content[0]?.text, stop_reason: json.stop_reason, usage: json.usage },
  streamed: { text, events, stop_reason: streamed.stop_reason, usage: streamed.usage },
  tool: { id: use.id, name: use.name, input: use.input, stop_reason: withTool.stop_reason },
  answered: { text: answered.content.find((b) => b.type === 'text')?.text, stop_reason: answered.stop_reason },
  limited, overflow,
}));

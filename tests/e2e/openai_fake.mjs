// Validates the fake upstream's OpenAI-compatible face with the official `openai` SDK:
// a non-streaming and a streaming tool call, the tool result answered, a streamed text
// with its usage chunk and reasoning, and a 429 and a context overflow read as API errors.
// Prints a JSON summary on stdout for the Rust test that runs this script.
// Env: FAKE_URL (the fake's origin; the SDK's base URL is FAKE_URL/v1).
import OpenAI from 'openai';

const origin = process.env.FAKE_URL;
const client = new OpenAI({ baseURL: `${origin}/v1`, apiKey: 'sk-fake-openai', maxRetries: 0, timeout: 30_000 });
const tools = [{
  type: 'function',
  function: { name: 'Bash', description: 'Run a shell command', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } },
}];
const ask = [{ role: 'user', content: 'run the marker command' }];

async function fault(body) {
  const r = await fetch(`${origin}/_fake/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (r.status !== 204) throw new Error(`fault not queued: ${r.status}`);
}

async function apiError(promise) {
  try {
    await promise;
    return null;
  } catch (e) {
    if (!(e instanceof OpenAI.APIError)) throw e;
    return { status: e.status, code: e.code ?? null, message: e.error?.message ?? null, retry_after: e.headers?.get('retry-after') ?? null };
  }
}

// Non-streaming: the scripted tool call, then the answer to its result.
const first = await client.chat.completions.create({ model: 'fake-model', messages: ask, tools });
const call = first.choices[0].message.tool_calls[0];
const second = await client.chat.completions.create({
  model: 'fake-model',
  tools,
  messages: [...ask, first.choices[0].message, { role: 'tool', tool_call_id: call.id, content: 'gatehouse-ok\n' }],
});

// Streaming through the SDK's accumulator: the tool call comes back whole.
const toolStream = client.chat.completions.stream({ model: 'fake-model', messages: ask, tools, stream_options: { include_usage: true } });
const streamedTool = await toolStream.finalChatCompletion();

// Streaming text with reasoning, chunk by chunk.
let text = '';
let reasoning = '';
let usage = null;
let chunks = 0;
const textStream = await client.chat.completions.create({ model: 'fake-reasoner', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } });
for await (const chunk of textStream) {
  chunks += 1;
  const delta = chunk.choices[0]?.delta ?? {};
  text += delta.content ?? '';
  reasoning += delta.reasoning_content ?? '';
  if (chunk.usage) usage = chunk.usage;
}

// A tool message that answers no call is refused like OpenAI does.
const orphan = await apiError(client.chat.completions.create({ model: 'fake-model', messages: [...ask, { role: 'tool', tool_call_id: 'nope', content: 'x' }] }));

await fault({ kind: 'status', status: 429, retry_after: 7, error_type: 'rate_limit_exceeded', message: 'Rate limit reached' });
const limited = await apiError(client.chat.completions.create({ model: 'fake-model', messages: ask }));
await fault({ kind: 'status', status: 400, error_type: 'context_length_exceeded', message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens." });
const overflow = await apiError(client.chat.completions.create({ model: 'fake-model', messages: ask }));

console.log(JSON.stringify({
  tool_call: { id: call.id, name: call.function.name, arguments: JSON.parse(call.function.arguments), finish: first.choices[0].finish_reason },
  answer: { text: second.choices[0].message.content, finish: second.choices[0].finish_reason, usage: second.usage },
  streamed_tool: { name: streamedTool.choices[0].message.tool_calls[0].function.name, arguments: JSON.parse(streamedTool.choices[0].message.tool_calls[0].function.arguments), finish: streamedTool.choices[0].finish_reason },
  streamed_text: { text, reasoning, usage, chunks },
  orphan, limited, overflow,
}));

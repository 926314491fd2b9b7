// The official OpenAI TypeScript SDK against Gatehouse's OpenAI-compatible front door
// (/v1/chat/completions, /v1/models). Prints one JSON summary on stdout for the Rust test
// (tests/tests/integration/chat_door.rs) that runs it and checks every field.
// Usage: node openai_chat.mjs <scenario>; env GATEHOUSE_URL, GATEHOUSE_KEY, MODEL.
//   chat   non-streaming, streaming with include_usage, models.list(), a bad key, a bad request
//   tools  a tool call round trip, non-streaming then streaming (the SDK's stream helper)
//   error  one request whose error the test arranged (upstream 429, spend cap)
//   stream_error  one streamed request the upstream breaks off with an error event
import OpenAI from 'openai';

const baseURL = `${process.env.GATEHOUSE_URL}/v1`;
const model = process.env.MODEL ?? 'claude-sonnet-4-5';
const client = new OpenAI({ baseURL, apiKey: process.env.GATEHOUSE_KEY, maxRetries: 0, timeout: 30_000 });
const user = { role: 'user', content: 'Say hello.' };

function failure(e) {
  return {
    class: e?.constructor?.name ?? null,
    status: e?.status ?? null,
    error: e?.error ?? null,
    retry_after: e?.headers?.get?.('retry-after') ?? null,
    message: String(e?.message ?? e),
  };
}

async function expectFailure(promise) {
  try {
    await promise;
    return { class: null, status: 'succeeded' };
  } catch (e) {
    return failure(e);
  }
}

async function chat() {
  const plain = await client.chat.completions.create({ model, messages: [user], max_tokens: 64 });

  const stream = await client.chat.completions.create({
    model,
    messages: [{ role: 'system', content: 'Be brief.' }, user],
    stream: true,
    stream_options: { include_usage: true },
  });
  const chunks = [];
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    chunks.push({ object: chunk.object, choices: chunk.choices.length });
    for (const c of chunk.choices) {
      text += c.delta?.content ?? '';
      finish = c.finish_reason ?? finish;
    }
    if (chunk.usage) usage = chunk.usage;
  }

  const models = [];
  for await (const m of client.models.list()) models.push(m);

  const bad = new OpenAI({ baseURL, apiKey: 'wrong-key', maxRetries: 0 });
  const denied = await expectFailure(bad.chat.completions.create({ model, messages: [user] }));
  const invalid = await expectFailure(client.chat.completions.create({ model, messages: [user], n: 2 }));
  return { plain, streamed: { text, finish, usage, chunks }, models, denied, invalid };
}

const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}];
const question = { role: 'user', content: 'Weather in Paris and Oslo?' };

async function toolRoundTrip() {
  const first = await client.chat.completions.create({ model, messages: [question], tools, tool_choice: 'auto' });
  const asked = first.choices[0].message;
  const results = asked.tool_calls.map((c) => ({
    role: 'tool',
    tool_call_id: c.id,
    content: `sunny in ${JSON.parse(c.function.arguments).city}`,
  }));
  const second = await client.chat.completions.create({ model, messages: [question, asked, ...results], tools });

  const stream = client.chat.completions.stream({ model, messages: [question], tools, parallel_tool_calls: true });
  const streamed = await stream.finalChatCompletion();
  return { first, second, streamed };
}

async function error() {
  return { failed: await expectFailure(client.chat.completions.create({ model, messages: [user] })) };
}

async function streamError() {
  let text = '';
  const failed = await expectFailure((async () => {
    const stream = await client.chat.completions.create({ model, messages: [user], stream: true });
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  })());
  return { text, failed };
}

const scenarios = { chat, tools: toolRoundTrip, error, stream_error: streamError };
const run = scenarios[process.argv[2]];
if (!run) {
  console.error(`unknown scenario ${process.argv[2]}`);
  process.exit(2);
}
console.log(JSON.stringify(await run()));

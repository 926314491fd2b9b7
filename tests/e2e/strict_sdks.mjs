// Validates the fake upstream's strict mode (`FakeConfig.strict` and its context window,
// text-only models and Mistral ids) with the providers' official SDKs, talking to the fake
// directly: each refusal must reach the SDK as its own API error with the status and the
// provider's message, and the valid request beside it must still succeed. Anthropic's SDK
// (signed thinking round trip, foreign and missing signatures, tool ids, the context window),
// Anthropic's Bedrock and Vertex clients (unknown betas and body keys) and the `openai` SDK
// (DeepSeek's reasoning rule, a text-only model, the context window, Mistral's ids).
// Prints one JSON summary on stdout. Env: FAKE_URL (the fake's origin).
import Anthropic from '@anthropic-ai/sdk';
import AnthropicBedrock from '@anthropic-ai/bedrock-sdk';
import AnthropicVertex from '@anthropic-ai/vertex-sdk';
import OpenAI from 'openai';

const base = process.env.FAKE_URL;

async function configure(config) {
  const r = await fetch(`${base}/_fake/config`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(config) });
  if (r.status !== 204) throw new Error(`config not set: ${r.status}`);
}

// The API error a call ends with, as the SDK raised it; null when it succeeded.
async function apiError(promise, ErrorClass) {
  try {
    await promise;
    return null;
  } catch (e) {
    if (!(e instanceof ErrorClass)) throw e;
    const body = e.error ?? {};
    return {
      status: e.status,
      message: body.error?.message ?? body.message ?? e.message,
      type: body.error?.type ?? body.type ?? null,
      code: body.error?.code ?? body.code ?? null,
    };
  }
}

const tool = { name: 'Bash', description: 'Run a command', input_schema: { type: 'object', properties: { command: { type: 'string' } } } };
const thinking = { type: 'enabled', budget_tokens: 1024 };
const out = {};

await configure({
  strict: true,
  context_window: 2000,
  text_only_models: ['deepseek-chat'],
  tool_uses: [{ id: 'toolu_strict_1', name: 'Bash', input: { command: 'echo ok' } }],
});

// Anthropic: a thinking answer, handed back as it came, with the tool's result.
const anthropic = new Anthropic({ baseURL: base, apiKey: 'sk-fake', maxRetries: 0 });
const model = 'claude-sonnet-4-6';
const ask = [{ role: 'user', content: 'run it' }];
const first = await anthropic.messages.create({ model, max_tokens: 2048, thinking, tools: [tool], messages: ask });
const signed = first.content.find((b) => b.type === 'thinking');
const followUp = (content) => [...ask, { role: 'assistant', content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_strict_1', content: 'ok' }] }];
const second = await anthropic.messages.create({ model, max_tokens: 2048, thinking, tools: [tool], messages: followUp(first.content) });
const streamed = await anthropic.messages.stream({ model, max_tokens: 2048, thinking, tools: [tool], messages: ask }).finalMessage();
const withSignature = (signature) => first.content.map((b) => (b.type === 'thinking' ? { ...b, signature } : b));
out.anthropic = {
  first_blocks: first.content.map((b) => b.type),
  signature: signed?.signature ?? null,
  streamed_blocks: streamed.content.map((b) => b.type),
  streamed_signature: streamed.content.find((b) => b.type === 'thinking')?.signature ?? null,
  second_stop: second.stop_reason,
  foreign: await apiError(anthropic.messages.create({ model, max_tokens: 2048, thinking, tools: [tool], messages: followUp(withSignature('c2lnbmVkIGJ5IGFub3RoZXIgbW9kZWw=')) }), Anthropic.APIError),
  empty: await apiError(anthropic.messages.create({ model, max_tokens: 2048, thinking, tools: [tool], messages: followUp(withSignature('')) }), Anthropic.APIError),
  missing: await apiError(anthropic.messages.create({
    model, max_tokens: 2048, thinking, tools: [tool],
    messages: followUp(first.content.map((b) => (b.type === 'thinking' ? { type: 'thinking', thinking: b.thinking } : b))),
  }), Anthropic.APIError),
  tool_id: await apiError(anthropic.messages.create({
    model, max_tokens: 64, tools: [tool],
    messages: [...ask, { role: 'assistant', content: [{ type: 'tool_use', id: 'functions.Bash:0', name: 'Bash', input: {} }] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'functions.Bash:0', content: 'ok' }] }],
  }), Anthropic.APIError),
  too_long: await apiError(anthropic.messages.create({ model, max_tokens: 64, messages: [{ role: 'user', content: 'x'.repeat(9000) }] }), Anthropic.APIError),
};

// Bedrock: betas go into the body's anthropic_beta; one Bedrock does not know, and a key
// its InvokeModel body does not take, are refused; the documented ones pass.
const bedrock = new AnthropicBedrock({ baseURL: base, awsRegion: 'us-east-1', awsAccessKey: 'AKIDFAKEFAKEFAKE', awsSecretKey: 'fake-secret-key', maxRetries: 0 });
const bedrockModel = 'us.anthropic.claude-sonnet-4-6';
const small = { max_tokens: 64, messages: ask };
out.bedrock = {
  known_beta: (await bedrock.beta.messages.create({ model: bedrockModel, ...small, betas: ['interleaved-thinking-2025-05-14'] })).stop_reason,
  unknown_beta: await apiError(bedrock.beta.messages.create({ model: bedrockModel, ...small, betas: ['per-turn-control-2026-07-01'] }), AnthropicBedrock.APIError),
  extra_key: await apiError(bedrock.messages.create({ model: bedrockModel, ...small, service_tier: 'auto' }), AnthropicBedrock.APIError),
  too_long: await apiError(bedrock.messages.create({ model: bedrockModel, max_tokens: 64, messages: [{ role: 'user', content: 'x'.repeat(9000) }] }), AnthropicBedrock.APIError),
};

// Vertex: the same, in Vertex's words.
const vertex = new AnthropicVertex({
  baseURL: `${base}/v1`, region: 'us-east5', projectId: 'fake-project', maxRetries: 0,
  authClient: { projectId: 'fake-project', getRequestHeaders: async () => new Headers({ Authorization: 'Bearer fake-token' }) },
});
out.vertex = {
  known_beta: (await vertex.beta.messages.create({ model, ...small, betas: ['context-1m-2025-08-07'] })).stop_reason,
  unknown_beta: await apiError(vertex.beta.messages.create({ model, ...small, betas: ['context-1m-2025-08-07', 'prompt-caching-scope-2026-01-05'] }), AnthropicVertex.APIError),
  extra_key: await apiError(vertex.messages.create({ model, ...small, service_tier: 'auto' }), AnthropicVertex.APIError),
};

// OpenAI-compatible: DeepSeek's thinking mode, a text-only model, the context window.
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-fake', maxRetries: 0, timeout: 30_000 });
const functions = [{ type: 'function', function: { name: 'Bash', parameters: { type: 'object', properties: { command: { type: 'string' } } } } }];
const called = await openai.chat.completions.create({ model: 'deepseek-reasoner', messages: ask, tools: functions });
const assistant = called.choices[0].message;
const answered = (message) => [...ask, message, { role: 'tool', tool_call_id: assistant.tool_calls[0].id, content: 'ok' }];
const image = { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } };
out.openai = {
  reasoning: assistant.reasoning_content ?? null,
  handed_back: (await openai.chat.completions.create({ model: 'deepseek-reasoner', tools: functions, messages: answered(assistant) })).choices[0].finish_reason,
  reasoning_missing: await apiError(openai.chat.completions.create({ model: 'deepseek-reasoner', tools: functions, messages: answered({ role: 'assistant', content: null, tool_calls: assistant.tool_calls }) }), OpenAI.APIError),
  image_text_only: await apiError(openai.chat.completions.create({ model: 'deepseek-chat', messages: [{ role: 'user', content: [{ type: 'text', text: 'what is this' }, image] }] }), OpenAI.APIError),
  image_vision: (await openai.chat.completions.create({ model: 'fake-vision', messages: [{ role: 'user', content: [{ type: 'text', text: 'what is this' }, image] }] })).choices[0].finish_reason,
  too_long: await apiError(openai.chat.completions.create({ model: 'deepseek-chat', messages: [{ role: 'user', content: 'x'.repeat(9000) }] }), OpenAI.APIError),
};

// Mistral's ids: the fake issues nine alphanumerics and refuses anything else.
await configure({ strict: true, mistral_tool_ids: true });
const mistral = await openai.chat.completions.create({ model: 'mistral-large-latest', messages: ask, tools: functions });
const call = mistral.choices[0].message.tool_calls[0];
out.mistral = {
  id: call.id,
  answered: (await openai.chat.completions.create({ model: 'mistral-large-latest', tools: functions, messages: [...ask, mistral.choices[0].message, { role: 'tool', tool_call_id: call.id, content: 'ok' }] })).choices[0].finish_reason,
  foreign_id: await apiError(openai.chat.completions.create({
    model: 'mistral-large-latest', tools: functions,
    messages: [...ask, { ...mistral.choices[0].message, tool_calls: [{ ...call, id: 'call_0fypS1hVX' }] }, { role: 'tool', tool_call_id: 'call_0fypS1hVX', content: 'ok' }],
  }), OpenAI.APIError),
};

const refusals = await (await fetch(`${base}/_fake/refusals`)).json();
out.refusals = refusals.length;
console.log(JSON.stringify(out));

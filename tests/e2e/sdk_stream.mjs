// Streams one message through Gatehouse with the official Anthropic TypeScript SDK and
// prints a JSON summary on stdout for the Rust test that runs this script.
// Env: GATEHOUSE_URL, GATEHOUSE_KEY.
import Anthropic from '@anthropic-ai/sdk';

const client = new Anthropic({
  baseURL: process.env.GATEHOUSE_URL,
  apiKey: process.env.GATEHOUSE_KEY,
  maxRetries: 0,
  timeout: 30_000,
});

const events = [];
let text = '';
const stream = client.messages.stream({
  model: 'claude-sonnet-4-6',
  max_tokens: 128,
  messages: [{ role: 'user', content: 'say hello' }],
});
stream.on('streamEvent', (e) => events.push(e.type));
stream.on('text', (t) => { text += t; });
const final = await stream.finalMessage();

let denied = null;
try {
  const bad = new Anthropic({ baseURL: process.env.GATEHOUSE_URL, apiKey: 'wrong-key', maxRetries: 0 });
  await bad.messages.create({ model: 'claude-sonnet-4-6', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] });
} catch (e) {
  denied = { status: e.status, type: e.error?.error?.type ?? null };
}

console.log(JSON.stringify({ text, events, usage: final.usage, stop_reason: final.stop_reason, denied }));

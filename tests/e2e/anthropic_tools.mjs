// Validates the fake upstream's scripted tool calls with the official Anthropic SDK: one
// streamed and one plain Messages request through Gatehouse; prints both final messages.
// Env: GATEHOUSE_URL, GATEHOUSE_KEY.
import Anthropic from '@anthropic-ai/sdk';

const client = new Anthropic({
  baseURL: process.env.GATEHOUSE_URL,
  apiKey: process.env.GATEHOUSE_KEY,
  maxRetries: 0,
  timeout: 30_000,
});
const request = {
  model: 'claude-sonnet-4-5',
  max_tokens: 256,
  tools: [{ name: 'get_weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }],
  messages: [{ role: 'user', content: 'Weather in Paris?' }],
};
const streamed = await client.messages.stream(request).finalMessage();
const plain = await client.messages.create(request);
console.log(JSON.stringify({ streamed, plain }));

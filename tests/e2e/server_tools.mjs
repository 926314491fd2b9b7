// The official Anthropic SDK through Gatehouse to an upstream that cannot run Anthropic's
// server tools: a `web_search` request (as Claude Code's WebSearch sends it) answered with
// the gateway's own search, as JSON and streamed, then the answer sent back as history.
// Prints a JSON summary on stdout for the Rust test that runs this script.
// Env: GATEHOUSE_URL, GATEHOUSE_KEY.
import Anthropic from '@anthropic-ai/sdk';

const client = new Anthropic({ baseURL: process.env.GATEHOUSE_URL, apiKey: process.env.GATEHOUSE_KEY, maxRetries: 0, timeout: 60_000 });
const ask = { role: 'user', content: 'Perform a web search for the query: gatehouse gateway' };
const params = {
  model: 'claude-sonnet-4-6',
  max_tokens: 512,
  tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 8 }],
  tool_choice: { type: 'tool', name: 'web_search' },
  messages: [ask],
};

function summary(m) {
  const use = m.content.find((b) => b.type === 'server_tool_use');
  const result = m.content.find((b) => b.type === 'web_search_tool_result');
  return {
    id: m.id,
    types: m.content.map((b) => b.type),
    server_tool_use: use ?? null,
    result_tool_use_id: result?.tool_use_id ?? null,
    results: Array.isArray(result?.content) ? result.content : null,
    text: m.content.filter((b) => b.type === 'text').map((b) => b.text).join(''),
    stop_reason: m.stop_reason,
    usage: m.usage,
  };
}

const json = await client.messages.create(params);

const events = [];
const s = client.messages.stream(params);
s.on('streamEvent', (e) => events.push(e.type === 'content_block_start' ? `${e.type}:${e.content_block.type}` : e.type));
const streamed = await s.finalMessage();

// The answer back as history, as a client continuing the conversation sends it.
const followup = await client.messages.create({
  ...params,
  tool_choice: undefined,
  messages: [ask, { role: 'assistant', content: json.content }, { role: 'user', content: 'Thanks.' }],
});

console.log(JSON.stringify({ json: summary(json), streamed: summary(streamed), events, followup: summary(followup) }));

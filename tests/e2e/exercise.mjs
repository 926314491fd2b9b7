// What every SDK check does with its client against the fake: one JSON message, one stream
// (its event types, text and final usage) and, unless the face has none, a token count.
export const ask = { max_tokens: 64, messages: [{ role: 'user', content: 'say hello' }] };

export async function exercise(client, model, { withCount = true } = {}) {
  const message = await client.messages.create({ model, ...ask });
  const events = [];
  let text = '';
  const stream = client.messages.stream({ model, ...ask });
  stream.on('streamEvent', (e) => events.push(e.type));
  stream.on('text', (t) => { text += t; });
  const final = await stream.finalMessage();
  const count = withCount ? await client.messages.countTokens({ model, messages: ask.messages }) : null;
  return {
    json_text: message.content.map((b) => b.text ?? '').join(''),
    json_usage: message.usage,
    stream_text: text,
    events,
    stream_usage: final.usage,
    count,
  };
}

//! Anthropic server-sent events → OpenAI `chat.completion.chunk` events, as they arrive.
//!
//! ```text
//! message_start            -> first chunk: delta {role: assistant, content: ""}
//! content_block_start      -> tool_use: delta tool_calls[{index, id, type, function {name, arguments: ""}}]
//! content_block_delta      -> text_delta: delta content; input_json_delta: delta
//!                             tool_calls[{index, function {arguments}}]; thinking_delta:
//!                             delta reasoning_content
//! message_delta            -> remembered (stop reason, usage)
//! message_stop             -> final chunk with finish_reason, the usage chunk (empty
//!                             choices) when include_usage, then `data: [DONE]`
//! error                    -> `data: {"error": {...}}` (OpenAI's stream error), end
//! ping, signature_delta    -> dropped
//! ```
//!
//! The stream wraps the metered Anthropic stream, so metering and the usage row see the
//! upstream's own events; only the caller's copy is translated. A stream that breaks or ends
//! without `message_stop` ends with an error chunk, never with `[DONE]`.

use std::collections::{HashMap, VecDeque};

use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt};
use http::StatusCode;
use serde_json::{Value, json};

use super::response::{Context, completion_id, finish_reason, usage};

/// The largest SSE event kept whole (a `content_block_start` can carry a large tool input).
const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

const DONE: &[u8] = b"data: [DONE]\n\n";

#[derive(Debug, Clone, Copy)]
enum Block {
    /// A `tool_use` block and its index among the answer's tool calls.
    Tool(u64),
    Other,
}

/// The translation state of one stream.
#[derive(Debug)]
pub struct Translator {
    ctx: Context,
    id: String,
    blocks: HashMap<u64, Block>,
    tools: u64,
    stop_reason: Option<String>,
    usage: serde_json::Map<String, Value>,
    /// `message_stop` or an error was translated; nothing more is sent.
    ended: bool,
}

fn event(v: &Value) -> Bytes {
    let mut out = BytesMut::with_capacity(64);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(v.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
    out.freeze()
}

impl Translator {
    pub fn new(ctx: Context) -> Translator {
        Translator {
            id: completion_id(None),
            ctx,
            blocks: HashMap::new(),
            tools: 0,
            stop_reason: None,
            usage: serde_json::Map::new(),
            ended: false,
        }
    }

    fn chunk(&self, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.ctx.created,
            "model": self.ctx.model,
            "choices": choices,
        })
    }

    fn delta(&self, delta: Value) -> Bytes {
        event(
            &self.chunk(
                json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]),
            ),
        )
    }

    fn tool_delta(&self, index: u64, call: Value) -> Bytes {
        let mut call = call;
        call["index"] = index.into();
        self.delta(json!({"tool_calls": [call]}))
    }

    fn merge_usage(&mut self, u: &Value) {
        if let Some(u) = u.as_object() {
            for (k, v) in u {
                self.usage.insert(k.clone(), v.clone());
            }
        }
    }

    /// The caller's events for one Anthropic event.
    pub fn event(&mut self, data: &Value) -> Vec<Bytes> {
        if self.ended {
            return Vec::new();
        }
        let index = data["index"].as_u64().unwrap_or(0);
        match data["type"].as_str() {
            Some("message_start") => {
                let m = &data["message"];
                self.id = completion_id(m["id"].as_str());
                self.merge_usage(&m["usage"]);
                vec![self.delta(json!({"role": "assistant", "content": ""}))]
            }
            Some("content_block_start") => self.block_start(index, &data["content_block"]),
            Some("content_block_delta") => self.block_delta(index, &data["delta"]),
            Some("message_delta") => {
                if let Some(r) = data["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(r.to_owned());
                }
                self.merge_usage(&data["usage"]);
                Vec::new()
            }
            Some("message_stop") => self.stop(),
            Some("error") => {
                let e = &data["error"];
                let kind = e["type"].as_str().unwrap_or("api_error");
                let message = e["message"]
                    .as_str()
                    .unwrap_or("the upstream stream failed");
                self.fail_with(kind, message)
            }
            // ping, content_block_stop and events this translation does not know.
            _ => Vec::new(),
        }
    }

    fn block_start(&mut self, index: u64, block: &Value) -> Vec<Bytes> {
        match block["type"].as_str() {
            Some("tool_use") => {
                let i = self.tools;
                self.tools += 1;
                self.blocks.insert(index, Block::Tool(i));
                let mut out = vec![self.tool_delta(
                    i,
                    json!({"id": block["id"], "type": "function",
                           "function": {"name": block["name"], "arguments": ""}}),
                )];
                // A start that already carries the input (not Anthropic's own streams).
                if block["input"].as_object().is_some_and(|o| !o.is_empty()) {
                    let args = block["input"].to_string();
                    out.push(self.tool_delta(i, json!({"function": {"arguments": args}})));
                }
                out
            }
            Some("text") => {
                self.blocks.insert(index, Block::Other);
                match block["text"].as_str() {
                    Some(t) if !t.is_empty() => vec![self.delta(json!({"content": t}))],
                    _ => Vec::new(),
                }
            }
            _ => {
                self.blocks.insert(index, Block::Other);
                Vec::new()
            }
        }
    }

    fn block_delta(&mut self, index: u64, delta: &Value) -> Vec<Bytes> {
        match (delta["type"].as_str(), self.blocks.get(&index)) {
            (Some("text_delta"), _) => vec![self.delta(json!({"content": delta["text"]}))],
            (Some("thinking_delta"), _) => {
                vec![self.delta(json!({"reasoning_content": delta["thinking"]}))]
            }
            (Some("input_json_delta"), Some(Block::Tool(i))) => {
                let i = *i;
                vec![self.tool_delta(i, json!({"function": {"arguments": delta["partial_json"]}}))]
            }
            _ => Vec::new(),
        }
    }

    fn stop(&mut self) -> Vec<Bytes> {
        self.ended = true;
        let reason = finish_reason(self.stop_reason.as_deref());
        let mut out = vec![event(&self.chunk(
            json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": reason}]),
        ))];
        if self.ctx.include_usage {
            let mut last = self.chunk(json!([]));
            last["usage"] = usage(&Value::Object(self.usage.clone()));
            out.push(event(&last));
        }
        out.push(Bytes::from_static(DONE));
        out
    }

    fn fail_with(&mut self, kind: &str, message: &str) -> Vec<Bytes> {
        self.ended = true;
        let status = StatusCode::INTERNAL_SERVER_ERROR;
        vec![event(&crate::error::openai_envelope(status, kind, message))]
    }

    /// The upstream stream broke or ended early: an error chunk unless it ended properly.
    pub fn end(&mut self, why: &str) -> Vec<Bytes> {
        if self.ended {
            return Vec::new();
        }
        self.fail_with("api_error", why)
    }
}

/// One SSE event grew past [`MAX_EVENT_BYTES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventTooLarge;

/// Splits bytes into SSE events and hands each event's JSON `data` to the translator.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: BytesMut,
    /// How much of `buf` is known to hold no event end (each byte is searched once).
    scanned: usize,
}

impl Decoder {
    /// The complete events in `chunk` (and what was buffered), translated; `Err` when one
    /// event grows past [`MAX_EVENT_BYTES`].
    pub fn feed(&mut self, chunk: &[u8], t: &mut Translator) -> Result<Vec<Bytes>, EventTooLarge> {
        // JSON never holds a raw CR, so dropping them turns CRLF framing into LF framing.
        self.buf
            .extend(chunk.iter().copied().filter(|b| *b != b'\r'));
        let mut out = Vec::new();
        loop {
            let from = self.scanned.saturating_sub(1);
            let Some(end) = self.buf[from..].windows(2).position(|w| w == b"\n\n") else {
                self.scanned = self.buf.len();
                break;
            };
            let frame = self.buf.split_to(from + end + 2);
            self.scanned = 0;
            let data: Vec<&[u8]> = frame[..]
                .split(|b| *b == b'\n')
                .filter_map(|line| line.strip_prefix(b"data:"))
                .map(|d| d.strip_prefix(b" ").unwrap_or(d))
                .collect();
            if data.is_empty() {
                continue;
            }
            if let Ok(v) = serde_json::from_slice::<Value>(&data.join(&b'\n')) {
                out.extend(t.event(&v));
            }
        }
        if self.buf.len() > MAX_EVENT_BYTES {
            return Err(EventTooLarge);
        }
        Ok(out)
    }
}

/// The caller's stream: `upstream` (the metered Anthropic SSE body) translated.
pub fn translate<S, E>(upstream: S, ctx: Context) -> impl Stream<Item = Result<Bytes, E>> + Send
where
    S: Stream<Item = Result<Bytes, E>> + Send + Unpin + 'static,
    E: Send + 'static,
{
    struct State<S> {
        upstream: Option<S>,
        decoder: Decoder,
        translator: Translator,
        pending: VecDeque<Bytes>,
    }
    let state = State {
        upstream: Some(upstream),
        decoder: Decoder::default(),
        translator: Translator::new(ctx),
        pending: VecDeque::new(),
    };
    futures_util::stream::unfold(state, |mut s| async move {
        loop {
            if let Some(b) = s.pending.pop_front() {
                return Some((Ok(b), s));
            }
            let up = s.upstream.as_mut()?;
            let more = match up.next().await {
                Some(Ok(chunk)) => {
                    s.decoder
                        .feed(&chunk, &mut s.translator)
                        .unwrap_or_else(|EventTooLarge| {
                            s.upstream = None;
                            s.translator
                                .end("an upstream event exceeded the gateway's size limit")
                        })
                }
                Some(Err(_)) => {
                    s.upstream = None;
                    s.translator.end("the upstream stream was interrupted")
                }
                None => {
                    s.upstream = None;
                    s.translator
                        .end("the upstream stream ended before the message was complete")
                }
            };
            // After the end the upstream is still read to its own end (the translator
            // ignores it), so the meter sees a complete stream.
            s.pending.extend(more);
        }
    })
}

//! OpenAI Chat Completions stream (`data: {chunk}` … `data: [DONE]`) → Anthropic SSE.
//!
//! Each chunk's deltas open, feed and close Anthropic content blocks one at a time:
//! reasoning → a `thinking` block, content → a `text` block, each tool call (by its
//! `index`) → a `tool_use` block with its arguments as `input_json_delta`s. A block closes
//! when another kind or another tool call starts, so parallel calls get consecutive block
//! indices. The end (`[DONE]`, or the upstream closing) closes the open block and sends
//! `message_delta` with the mapped stop reason and the usage of the final chunk
//! (`stream_options.include_usage`), then `message_stop`.
//!
//! Without a usage chunk the output tokens are estimated from the streamed bytes (4 a
//! token) and the input is 0.
//!
//! Limit: a provider that interleaves the argument deltas of several tool calls (none
//! known does) would have the late deltas of an already closed call dropped; each such
//! delta is logged.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::response::{reasoning, stop_reason, usage};
use super::{errors, ids};
use crate::upstream::{BodyError, BodyStream, sse};

/// Largest SSE line kept while it arrives (a chunk never comes near it).
const MAX_LINE: usize = 8 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    None,
    Thinking,
    Text,
    /// The tool call with this upstream `index`.
    Tool(u64),
}

/// The translation state of one stream.
pub struct Translator {
    model: String,
    started: bool,
    ended: bool,
    open: Open,
    /// The next Anthropic block index.
    next_index: u64,
    /// Upstream tool indices whose block was opened (and maybe closed).
    seen_tools: Vec<u64>,
    finish: Option<String>,
    usage: Option<Value>,
    /// Bytes of text, thinking and arguments streamed (an estimate when no usage came).
    streamed: usize,
}

impl Translator {
    pub fn new(model: &str) -> Self {
        Self {
            model: model.to_owned(),
            started: false,
            ended: false,
            open: Open::None,
            next_index: 0,
            seen_tools: Vec::new(),
            finish: None,
            usage: None,
            streamed: 0,
        }
    }

    /// The Anthropic events for one `data:` payload.
    pub fn data(&mut self, data: &str) -> Vec<Value> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        if data.trim() == "[DONE]" {
            self.end(&mut out);
            return out;
        }
        let Ok(chunk) = serde_json::from_str::<Value>(data) else {
            tracing::warn!("openai stream: a data line that is not JSON was skipped");
            return out;
        };
        if chunk.get("error").is_some_and(|e| !e.is_null()) {
            self.ended = true;
            let (kind, message) = errors::stream_error(&chunk["error"]);
            out.push(json!({"type": "error", "error": {"type": kind, "message": message}}));
            return out;
        }
        self.start(&chunk, &mut out);
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage(u));
        }
        let choice = &chunk["choices"][0];
        let delta = &choice["delta"];
        if let Some(r) = reasoning(delta) {
            self.streamed += r.len();
            self.switch(Open::Thinking, &mut out);
            out.push(self.delta(json!({"type": "thinking_delta", "thinking": r})));
        }
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            self.streamed += text.len();
            self.switch(Open::Text, &mut out);
            out.push(self.delta(json!({"type": "text_delta", "text": text})));
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            self.tool_call(call, &mut out);
        }
        if let Some(f) = choice["finish_reason"].as_str() {
            self.finish = Some(f.to_owned());
        }
        out
    }

    /// The closing events when the upstream ended without `[DONE]`.
    pub fn finish(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        if !self.ended {
            self.end(&mut out);
        }
        out
    }

    fn start(&mut self, chunk: &Value, out: &mut Vec<Value>) {
        if self.started {
            return;
        }
        self.started = true;
        out.push(json!({
            "type": "message_start",
            "message": {
                "id": ids::message(chunk["id"].as_str()),
                "type": "message",
                "role": "assistant",
                "model": chunk["model"].as_str().unwrap_or(&self.model),
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            },
        }));
    }

    fn tool_call(&mut self, call: &Value, out: &mut Vec<Value>) {
        let index = call["index"].as_u64().unwrap_or(0);
        if self.open != Open::Tool(index) {
            if self.seen_tools.contains(&index) {
                tracing::warn!(index, "openai stream: a late delta of a closed tool call");
                return;
            }
            self.close(out);
            self.seen_tools.push(index);
            self.open = Open::Tool(index);
            out.push(json!({
                "type": "content_block_start",
                "index": self.next_index,
                "content_block": {
                    "type": "tool_use",
                    "id": ids::to_anthropic(call["id"].as_str()),
                    "name": call["function"]["name"].as_str().unwrap_or_default(),
                    "input": {},
                },
            }));
        }
        if let Some(args) = call["function"]["arguments"]
            .as_str()
            .filter(|a| !a.is_empty())
        {
            self.streamed += args.len();
            out.push(self.delta(json!({"type": "input_json_delta", "partial_json": args})));
        }
    }

    /// Makes `kind` the open block (closing another one first).
    fn switch(&mut self, kind: Open, out: &mut Vec<Value>) {
        if self.open == kind {
            return;
        }
        self.close(out);
        self.open = kind;
        let block = match kind {
            Open::Thinking => json!({"type": "thinking", "thinking": "", "signature": ""}),
            _ => json!({"type": "text", "text": ""}),
        };
        out.push(json!({
            "type": "content_block_start",
            "index": self.next_index,
            "content_block": block,
        }));
    }

    fn delta(&self, delta: Value) -> Value {
        json!({"type": "content_block_delta", "index": self.next_index, "delta": delta})
    }

    fn close(&mut self, out: &mut Vec<Value>) {
        if self.open == Open::None {
            return;
        }
        out.push(json!({"type": "content_block_stop", "index": self.next_index}));
        self.open = Open::None;
        self.next_index += 1;
    }

    fn end(&mut self, out: &mut Vec<Value>) {
        self.ended = true;
        self.start(&Value::Null, out);
        self.close(out);
        // Without reported usage (a server that ignores `include_usage`), the output is
        // estimated at 4 bytes a token so caps still see it; the input stays unknown (0).
        let usage = self.usage.clone().unwrap_or_else(|| {
            tracing::warn!("openai stream ended without usage; output tokens estimated");
            usage(&json!({"completion_tokens": self.streamed.div_ceil(4)}))
        });
        out.push(json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(self.finish.as_deref()), "stop_sequence": null},
            "usage": usage,
        }));
        out.push(json!({"type": "message_stop"}));
    }
}

/// The events of a whole Message (a server that ignored `stream: true` and answered one
/// JSON completion): each block in one delta.
pub fn from_message(message: &Value) -> Vec<Value> {
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["usage"]["output_tokens"] = json!(0);
    let mut out = vec![json!({"type": "message_start", "message": start})];
    for (index, block) in message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let (empty, delta) = match block["type"].as_str() {
            Some("thinking") => (
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                json!({"type": "thinking_delta", "thinking": block["thinking"]}),
            ),
            Some("tool_use") => (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
            ),
            _ => (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": block["text"]}),
            ),
        };
        out.push(json!({"type": "content_block_start", "index": index, "content_block": empty}));
        out.push(json!({"type": "content_block_delta", "index": index, "delta": delta}));
        out.push(json!({"type": "content_block_stop", "index": index}));
    }
    out.push(json!({
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": null},
        "usage": message["usage"],
    }));
    out.push(json!({"type": "message_stop"}));
    out
}

/// Splits SSE bytes into the `data` of each event.
#[derive(Default)]
pub struct DataLines {
    buf: BytesMut,
    data: String,
}

impl DataLines {
    /// The complete events' data in `chunk` (with what came before).
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<String>, BodyError> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
            let line = self.buf.split_to(pos + 1);
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if !self.data.is_empty() {
                    out.push(std::mem::take(&mut self.data));
                }
            } else if let Some(d) = line.strip_prefix("data:") {
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(d.strip_prefix(' ').unwrap_or(d));
            }
        }
        if self.buf.len() + self.data.len() > MAX_LINE {
            return Err(BodyError("an upstream stream event is too large".into()));
        }
        Ok(out)
    }

    /// What is left when the stream ends (an event without its blank line).
    pub fn flush(&mut self) -> Option<String> {
        let rest = String::from_utf8_lossy(&self.buf).into_owned();
        self.buf.clear();
        if let Some(d) = rest.trim_end().strip_prefix("data:") {
            if !self.data.is_empty() {
                self.data.push('\n');
            }
            self.data.push_str(d.trim_start());
        }
        (!self.data.is_empty()).then(|| std::mem::take(&mut self.data))
    }
}

struct State {
    upstream: BodyStream,
    lines: DataLines,
    translator: Translator,
    queue: VecDeque<Bytes>,
    done: bool,
}

/// The Anthropic SSE body for an OpenAI stream (without pings; the caller adds them).
pub fn translate(upstream: BodyStream, model: &str) -> BodyStream {
    let state = State {
        upstream,
        lines: DataLines::default(),
        translator: Translator::new(model),
        queue: VecDeque::new(),
        done: false,
    };
    futures_util::stream::unfold(state, |mut s| async move {
        loop {
            if let Some(frame) = s.queue.pop_front() {
                return Some((Ok(frame), s));
            }
            if s.done {
                return None;
            }
            let events = match s.upstream.next().await {
                Some(Ok(chunk)) => match s.lines.push(&chunk) {
                    Ok(datas) => datas
                        .iter()
                        .flat_map(|d| s.translator.data(d))
                        .collect::<Vec<_>>(),
                    Err(e) => return broken(s, &e.0),
                },
                Some(Err(e)) => return broken(s, &e.0),
                None => {
                    s.done = true;
                    let mut events = Vec::new();
                    if let Some(d) = s.lines.flush() {
                        events.extend(s.translator.data(&d));
                    }
                    events.extend(s.translator.finish());
                    events
                }
            };
            s.queue
                .extend(events.iter().map(|e| sse::frame(e.to_string().as_bytes())));
        }
    })
    .boxed()
}

/// A stream that broke mid-way: an `error` event, then the end.
fn broken(mut s: State, why: &str) -> Option<(Result<Bytes, BodyError>, State)> {
    tracing::warn!(error = %why, "openai stream broke");
    s.done = true;
    s.queue.clear();
    Some((
        Ok(sse::error_frame(
            "api_error",
            "the upstream stream was interrupted",
        )),
        s,
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Duration;

    use super::*;

    /// The byte-level translation with pings: a silent upstream gets `event: ping`, the
    /// events arrive as SSE frames, and the end closes the message.
    #[tokio::test(start_paused = true)]
    async fn silence_gets_pings_and_chunks_become_frames() {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, BodyError>>(4);
        let upstream = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        })
        .boxed();
        let mut out = sse::with_pings(translate(upstream, "m"), Duration::from_secs(15));
        tokio::spawn(async move {
            let first = "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n";
            tx.send(Ok(Bytes::from(first))).await.unwrap();
            tokio::time::sleep(Duration::from_secs(20)).await;
            let rest = "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
            tx.send(Ok(Bytes::from(rest))).await.unwrap();
        });
        let mut frames = Vec::new();
        while let Some(frame) = out.next().await {
            frames.push(String::from_utf8(frame.unwrap().to_vec()).unwrap());
        }
        let kinds: Vec<&str> = frames
            .iter()
            .map(|f| f.lines().next().unwrap().trim_start_matches("event: "))
            .collect();
        assert_eq!(
            kinds,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "ping",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
    }

    #[test]
    fn a_whole_message_becomes_its_events() {
        let completion = serde_json::json!({"id": "x", "choices": [{"message": {
            "reasoning_content": "r", "content": "hi",
            "tool_calls": [{"id": "c1", "function": {"name": "Bash", "arguments": "{\"a\":1}"}}]
        }, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 5, "completion_tokens": 2}});
        let message = super::super::response::translate(&completion, "m");
        let events = from_message(&message);
        let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(kinds.len(), 1 + 3 * 3 + 2);
        assert_eq!(events[0]["message"]["content"], serde_json::json!([]));
        assert_eq!(events[8]["delta"]["partial_json"], "{\"a\":1}");
        assert_eq!(events[10]["delta"]["stop_reason"], "tool_use");
        assert_eq!(events[10]["usage"]["input_tokens"], 5);
    }

    #[tokio::test]
    async fn a_broken_upstream_ends_with_an_error_event() {
        let chunks: Vec<Result<Bytes, BodyError>> = vec![
            Ok(Bytes::from_static(
                b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
            )),
            Err(BodyError("connection reset".into())),
        ];
        let out: Vec<Bytes> = translate(futures_util::stream::iter(chunks).boxed(), "m")
            .map(Result::unwrap)
            .collect()
            .await;
        let last = String::from_utf8(out.last().unwrap().to_vec()).unwrap();
        assert!(last.starts_with("event: error\n"), "{last}");
        assert!(!last.contains("connection reset"), "{last}");
    }
}

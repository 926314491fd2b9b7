//! The answer the caller gets when the gateway ran the server tools: one Anthropic message
//! (JSON, or the same message as an SSE stream) in which each search or fetch appears as
//! Anthropic's API shows its own: a `server_tool_use` block followed by its
//! `web_search_tool_result` / `web_fetch_tool_result` block, between the model's text.
//! Usage is summed over the steps, with `server_tool_use.web_search_requests` and
//! `web_fetch_requests` counting what ran.
//!
//! `encrypted_content` is not encrypted: it is the base64 of a marker and the result's
//! snippet, which the gateway reads back ([`snippet_of`]) when a later request carries the
//! block in its history. Anthropic's own values do not decode to the marker.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

/// One search result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hit {
    pub url: String,
    pub title: String,
    pub snippet: String,
    /// When the page was published, as Anthropic writes it (`April 30, 2025`).
    pub page_age: Option<String>,
}

/// One fetched page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Page {
    pub url: String,
    pub title: Option<String>,
    /// Plain text (HTML reduced to its text), within the configured size.
    pub text: String,
    /// ISO 8601, UTC.
    pub retrieved_at: String,
}

/// A block of the answer, in order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Block {
    /// A block the model produced (text, thinking, a client tool's `tool_use`), as it is.
    Model(Value),
    /// A search the gateway ran: the `server_tool_use` id, the query, and the results or
    /// Anthropic's error code.
    Search {
        id: String,
        query: String,
        outcome: Result<Vec<Hit>, &'static str>,
    },
    /// A fetch the gateway ran.
    Fetch {
        id: String,
        url: String,
        outcome: Result<Page, &'static str>,
    },
}

/// Token counts summed over the steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub cache_write_5m: u64,
    pub cache_write_1h: u64,
}

impl Tokens {
    /// Adds one step's `usage` object.
    pub fn add(&mut self, usage: &Value) {
        let n = |k: &str| usage[k].as_u64().unwrap_or(0);
        self.input = self.input.saturating_add(n("input_tokens"));
        self.output = self.output.saturating_add(n("output_tokens"));
        self.cache_read = self.cache_read.saturating_add(n("cache_read_input_tokens"));
        let written = n("cache_creation_input_tokens");
        self.cache_write = self.cache_write.saturating_add(written);
        let split = &usage["cache_creation"];
        let one_hour = split["ephemeral_1h_input_tokens"].as_u64().unwrap_or(0);
        let five = split["ephemeral_5m_input_tokens"]
            .as_u64()
            .unwrap_or(written.saturating_sub(one_hour));
        self.cache_write_5m = self.cache_write_5m.saturating_add(five);
        self.cache_write_1h = self.cache_write_1h.saturating_add(one_hour);
    }
}

/// What the message says besides its blocks.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Summary {
    pub id: String,
    pub model: String,
    pub stop_reason: String,
    pub stop_sequence: Value,
    pub tokens: Tokens,
}

/// What the answer's blocks count: searches and fetches that ran (failed ones are not
/// billed, as Anthropic does not bill them).
pub(crate) fn counts(blocks: &[Block]) -> (u64, u64) {
    let mut counts = (0, 0);
    for b in blocks {
        match b {
            Block::Search { outcome: Ok(_), .. } => counts.0 += 1,
            Block::Fetch { outcome: Ok(_), .. } => counts.1 += 1,
            _ => {}
        }
    }
    counts
}

const MARKER: &[u8] = b"gatehouse-snippet:1\n";

/// The opaque `encrypted_content` the gateway gives a result.
pub(crate) fn encrypted_content(snippet: &str) -> String {
    let mut bytes = MARKER.to_vec();
    bytes.extend_from_slice(snippet.as_bytes());
    STANDARD.encode(bytes)
}

/// The snippet in an `encrypted_content` the gateway made (`None` for Anthropic's own).
pub(crate) fn snippet_of(encrypted: &str) -> Option<String> {
    let bytes = STANDARD.decode(encrypted.trim()).ok()?;
    let rest = bytes.strip_prefix(MARKER)?;
    String::from_utf8(rest.to_vec()).ok()
}

fn usage(s: &Summary, counts: (u64, u64)) -> Value {
    let t = &s.tokens;
    json!({
        "input_tokens": t.input,
        "cache_creation_input_tokens": t.cache_write,
        "cache_read_input_tokens": t.cache_read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": t.cache_write_5m,
            "ephemeral_1h_input_tokens": t.cache_write_1h,
        },
        "output_tokens": t.output,
        "server_tool_use": {
            "web_search_requests": counts.0,
            "web_fetch_requests": counts.1,
        },
    })
}

fn search_result(id: &str, outcome: &Result<Vec<Hit>, &'static str>) -> Value {
    let content = match outcome {
        Ok(hits) => Value::Array(
            hits.iter()
                .map(|h| {
                    json!({
                        "type": "web_search_result",
                        "url": h.url,
                        "title": h.title,
                        "encrypted_content": encrypted_content(&h.snippet),
                        "page_age": h.page_age,
                    })
                })
                .collect(),
        ),
        Err(code) => json!({"type": "web_search_tool_result_error", "error_code": code}),
    };
    json!({"type": "web_search_tool_result", "tool_use_id": id, "content": content})
}

fn fetch_result(id: &str, outcome: &Result<Page, &'static str>) -> Value {
    let content = match outcome {
        Ok(page) => json!({
            "type": "web_fetch_result",
            "url": page.url,
            "content": {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": page.text},
                "title": page.title,
                "citations": null,
            },
            "retrieved_at": page.retrieved_at,
        }),
        Err(code) => json!({"type": "web_fetch_tool_result_error", "error_code": code}),
    };
    json!({"type": "web_fetch_tool_result", "tool_use_id": id, "content": content})
}

fn server_tool_use(id: &str, name: &str, input: Value) -> Value {
    json!({"type": "server_tool_use", "id": id, "name": name, "input": input})
}

/// The content blocks, in order.
fn content(blocks: &[Block]) -> Vec<Value> {
    let mut out = Vec::with_capacity(blocks.len() * 2);
    for b in blocks {
        match b {
            Block::Model(v) => out.push(v.clone()),
            Block::Search { id, query, outcome } => {
                out.push(server_tool_use(id, "web_search", json!({"query": query})));
                out.push(search_result(id, outcome));
            }
            Block::Fetch { id, url, outcome } => {
                out.push(server_tool_use(id, "web_fetch", json!({"url": url})));
                out.push(fetch_result(id, outcome));
            }
        }
    }
    out
}

/// The whole message, as a JSON answer carries it.
pub(crate) fn message(summary: &Summary, blocks: &[Block]) -> Value {
    json!({
        "id": summary.id,
        "type": "message",
        "role": "assistant",
        "model": summary.model,
        "content": content(blocks),
        "stop_reason": summary.stop_reason,
        "stop_sequence": summary.stop_sequence,
        "usage": usage(summary, counts(blocks)),
    })
}

fn event(out: &mut String, v: &Value) {
    let kind = v["type"].as_str().unwrap_or("message");
    out.push_str("event: ");
    out.push_str(kind);
    out.push_str("\ndata: ");
    out.push_str(&v.to_string());
    out.push_str("\n\n");
}

/// The block as `content_block_start` shows it, and the deltas that complete it.
fn streamed(block: &Value) -> (Value, Vec<Value>) {
    let mut start = block.clone();
    let mut deltas = Vec::new();
    match block["type"].as_str() {
        Some("text") => {
            start["text"] = json!("");
            if let Some(t) = block["text"].as_str().filter(|t| !t.is_empty()) {
                deltas.push(json!({"type": "text_delta", "text": t}));
            }
            if let Some(Value::Array(citations)) = block.get("citations") {
                start["citations"] = json!([]);
                for c in citations {
                    deltas.push(json!({"type": "citations_delta", "citation": c}));
                }
            }
        }
        Some("thinking") => {
            start["thinking"] = json!("");
            start["signature"] = json!("");
            if let Some(t) = block["thinking"].as_str().filter(|t| !t.is_empty()) {
                deltas.push(json!({"type": "thinking_delta", "thinking": t}));
            }
            if let Some(s) = block["signature"].as_str().filter(|s| !s.is_empty()) {
                deltas.push(json!({"type": "signature_delta", "signature": s}));
            }
        }
        Some("tool_use" | "server_tool_use") => {
            start["input"] = json!({});
            let input = block.get("input").cloned().unwrap_or_else(|| json!({}));
            deltas.push(json!({"type": "input_json_delta", "partial_json": input.to_string()}));
        }
        // Result blocks (and anything else) arrive whole in their start event.
        _ => {}
    }
    (start, deltas)
}

/// The message as Anthropic streams it: `message_start` (input usage), each block's
/// start, deltas and stop, `message_delta` (stop reason, the whole usage), `message_stop`.
pub(crate) fn sse(message: &Value) -> String {
    let mut out = String::new();
    let mut head = Map::new();
    for key in ["id", "type", "role", "model"] {
        head.insert(key.into(), message[key].clone());
    }
    head.insert("content".into(), json!([]));
    head.insert("stop_reason".into(), Value::Null);
    head.insert("stop_sequence".into(), Value::Null);
    let mut start_usage = message["usage"].clone();
    if let Some(u) = start_usage.as_object_mut() {
        u.insert("output_tokens".into(), json!(0));
        u.remove("server_tool_use");
    }
    head.insert("usage".into(), start_usage);
    event(
        &mut out,
        &json!({"type": "message_start", "message": Value::Object(head)}),
    );
    for (index, block) in message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let (start, deltas) = streamed(block);
        event(
            &mut out,
            &json!({"type": "content_block_start", "index": index, "content_block": start}),
        );
        for delta in deltas {
            event(
                &mut out,
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            );
        }
        event(
            &mut out,
            &json!({"type": "content_block_stop", "index": index}),
        );
    }
    event(
        &mut out,
        &json!({
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": message["stop_sequence"]},
            "usage": message["usage"],
        }),
    );
    event(&mut out, &json!({"type": "message_stop"}));
    out
}

#[cfg(test)]
#[path = "answer_tests.rs"]
mod tests;

//! Anthropic Messages answer (JSON) → OpenAI `chat.completion`, and the pieces the stream
//! translation shares: the id, the finish reason and the usage object.
//!
//! Text blocks are joined into `content`; `tool_use` blocks become `tool_calls` (the input
//! serialised as the `arguments` string); thinking becomes `reasoning_content` (the field
//! DeepSeek-style APIs use); server tools' blocks and redacted thinking are left out.

use serde_json::{Value, json};

/// What the answer's translation needs to know of the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    /// The model the client asked for (the upstream may name it otherwise).
    pub model: String,
    /// Unix seconds, from the gateway's clock.
    pub created: i64,
    /// `stream_options.include_usage`.
    pub include_usage: bool,
}

/// `chatcmpl-` and the upstream message id.
pub fn completion_id(message_id: Option<&str>) -> String {
    format!("chatcmpl-{}", message_id.unwrap_or("gatehouse"))
}

/// Anthropic `stop_reason` → OpenAI `finish_reason`.
pub fn finish_reason(stop_reason: Option<&str>) -> &'static str {
    match stop_reason {
        Some("max_tokens" | "model_context_window_exceeded") => "length",
        Some("tool_use") => "tool_calls",
        Some("refusal") => "content_filter",
        // end_turn, stop_sequence, pause_turn, or none given.
        _ => "stop",
    }
}

fn count(u: &Value, key: &str) -> u64 {
    u[key].as_u64().unwrap_or(0)
}

/// Anthropic usage → OpenAI usage: the prompt counts every input token (fresh, read from
/// the cache and written to it), as OpenAI's `prompt_tokens` does.
pub fn usage(u: &Value) -> Value {
    let cached = count(u, "cache_read_input_tokens");
    let prompt = count(u, "input_tokens")
        .saturating_add(cached)
        .saturating_add(count(u, "cache_creation_input_tokens"));
    let completion = count(u, "output_tokens");
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt.saturating_add(completion),
        "prompt_tokens_details": {"cached_tokens": cached},
    })
}

/// The `chat.completion` for a Messages answer.
pub fn completion(message: &Value, ctx: &Context) -> Value {
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut calls = Vec::new();
    for block in message["content"].as_array().into_iter().flatten() {
        match block["type"].as_str() {
            Some("text") => text.push_str(block["text"].as_str().unwrap_or_default()),
            Some("thinking") => reasoning.push_str(block["thinking"].as_str().unwrap_or_default()),
            Some("tool_use") => calls.push(json!({
                "id": block["id"],
                "type": "function",
                "function": {"name": block["name"], "arguments": block["input"].to_string()},
            })),
            _ => {}
        }
    }
    let mut msg = json!({
        "role": "assistant",
        "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { Value::String(text) },
        "refusal": null,
    });
    if !calls.is_empty() {
        msg["tool_calls"] = Value::Array(calls);
    }
    if !reasoning.is_empty() {
        msg["reasoning_content"] = Value::String(reasoning);
    }
    json!({
        "id": completion_id(message["id"].as_str()),
        "object": "chat.completion",
        "created": ctx.created,
        "model": ctx.model,
        "choices": [{
            "index": 0,
            "message": msg,
            "logprobs": null,
            "finish_reason": finish_reason(message["stop_reason"].as_str()),
        }],
        "usage": usage(&message["usage"]),
    })
}

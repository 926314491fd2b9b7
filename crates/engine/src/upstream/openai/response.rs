//! OpenAI Chat Completions response (JSON) → Anthropic Message, and the mappings the
//! stream shares: finish reason → `stop_reason`, usage → Anthropic usage.

use serde_json::{Value, json};

use super::ids;

/// `finish_reason` → `stop_reason` (an unknown or missing reason is a normal end).
pub fn stop_reason(finish: Option<&str>) -> &'static str {
    match finish {
        Some("length") => "max_tokens",
        Some("tool_calls" | "function_call") => "tool_use",
        Some("content_filter") => "refusal",
        _ => "end_turn",
    }
}

/// OpenAI usage → Anthropic usage: cached prompt tokens are `cache_read_input_tokens`
/// and left out of `input_tokens` (which Anthropic counts without the cache).
pub fn usage(u: &Value) -> Value {
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let prompt = n(&u["prompt_tokens"]);
    let cached = n(&u["prompt_tokens_details"]["cached_tokens"])
        .max(n(&u["prompt_cache_hit_tokens"]))
        .min(prompt);
    json!({
        "input_tokens": prompt - cached,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
        "output_tokens": n(&u["completion_tokens"]),
    })
}

/// The reasoning text of a message or delta (`reasoning_content`: DeepSeek, Qwen, vLLM;
/// `reasoning`: OpenRouter, Ollama).
pub fn reasoning(m: &Value) -> Option<&str> {
    m["reasoning_content"]
        .as_str()
        .or_else(|| m["reasoning"].as_str())
        .filter(|s| !s.is_empty())
}

/// A tool call's arguments as a JSON object (`{}` when empty or not JSON).
pub fn arguments(raw: &str) -> Value {
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({}),
    }
}

/// The Anthropic Message for a completion; `model` when the upstream names none.
pub fn translate(completion: &Value, model: &str) -> Value {
    let choice = &completion["choices"][0];
    let message = &choice["message"];
    let mut content = Vec::new();
    if let Some(r) = reasoning(message) {
        content.push(json!({"type": "thinking", "thinking": r, "signature": ""}));
    }
    if let Some(text) = message["content"].as_str().filter(|t| !t.is_empty()) {
        content.push(json!({"type": "text", "text": text}));
    }
    if let Some(refusal) = message["refusal"].as_str().filter(|t| !t.is_empty()) {
        content.push(json!({"type": "text", "text": refusal}));
    }
    for call in message["tool_calls"].as_array().into_iter().flatten() {
        content.push(json!({
            "type": "tool_use",
            "id": ids::to_anthropic(call["id"].as_str()),
            "name": call["function"]["name"].as_str().unwrap_or_default(),
            "input": arguments(call["function"]["arguments"].as_str().unwrap_or_default()),
        }));
    }
    json!({
        "id": ids::message(completion["id"].as_str()),
        "type": "message",
        "role": "assistant",
        "model": completion["model"].as_str().unwrap_or(model),
        "content": content,
        "stop_reason": stop_reason(choice["finish_reason"].as_str()),
        "stop_sequence": null,
        "usage": usage(&completion["usage"]),
    })
}

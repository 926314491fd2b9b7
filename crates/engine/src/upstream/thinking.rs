//! Thinking blocks across providers. A Claude upstream (Anthropic, Bedrock, Vertex,
//! Foundry and the platforms, which accept each other's signatures) refuses a `thinking`
//! block whose signature it did not make; the OpenAI-compatible translation carries a
//! model's reasoning as thinking with an empty signature. [`without_unsigned`] drops
//! those blocks from the messages before a Claude upstream sees them. When that empties
//! the thinking of the last assistant turn while the request asks for thinking, the
//! request's `thinking` is dropped too: the API wants that turn to open with a signed
//! thinking block, which no longer exists.

use bytes::Bytes;
use serde_json::Value;

use crate::error::ApiError;

/// `true` when `bytes` may hold an unsigned thinking block (the literal empty
/// signature); nothing is parsed otherwise.
fn may_hold_unsigned(bytes: &[u8]) -> bool {
    let find = |n: &[u8]| memchr::memmem::find(bytes, n).is_some();
    find(b"\"signature\":\"\"") || find(b"\"signature\": \"\"")
}

fn unsigned(block: &Value) -> bool {
    block.get("type").and_then(Value::as_str) == Some("thinking")
        && block
            .get("signature")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
}

/// The body without unsigned thinking blocks, or `None` when it has none.
pub fn without_unsigned(bytes: &Bytes) -> Result<Option<Bytes>, ApiError> {
    if !may_hold_unsigned(bytes) {
        return Ok(None);
    }
    let top: serde_json::Map<String, Value> = serde_json::from_slice(bytes)
        .map_err(|_| ApiError::InvalidRequest("request body must be a JSON object".into()))?;
    let Some(Value::Array(messages)) = top.get("messages") else {
        return Ok(None);
    };
    let mut messages = messages.clone();
    let last_assistant = messages
        .iter()
        .rposition(|m| m.get("role").and_then(Value::as_str) == Some("assistant"));
    let (mut dropped, mut emptied_last) = (false, false);
    for (i, m) in messages.iter_mut().enumerate() {
        let Some(Value::Array(content)) = m.get_mut("content") else {
            continue;
        };
        let before = content.len();
        content.retain(|b| !unsigned(b));
        if content.len() != before {
            dropped = true;
            let signed_left = content.iter().any(|b| {
                matches!(
                    b.get("type").and_then(Value::as_str),
                    Some("thinking" | "redacted_thinking")
                )
            });
            if Some(i) == last_assistant && !signed_left {
                emptied_last = true;
            }
            if content.is_empty() {
                content.push(serde_json::json!({"type": "text", "text": "(thinking)"}));
            }
        }
    }
    if !dropped {
        return Ok(None);
    }
    let set = [(
        "messages",
        serde_json::to_string(&messages).map_err(|_| ApiError::Internal)?,
    )];
    let thinking_on = top
        .get("thinking")
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str)
        .is_some_and(|t| t != "disabled");
    let remove: &[&str] = if emptied_last && thinking_on {
        &["thinking"]
    } else {
        &[]
    };
    super::body::edit(bytes, remove, &set)
        .map(Some)
        .map_err(ApiError::InvalidRequest)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn body(v: Value) -> Bytes {
        Bytes::from(serde_json::to_vec(&v).unwrap())
    }

    #[test]
    fn signed_thinking_stays_and_bodies_without_any_are_untouched() {
        let b = body(serde_json::json!({"model": "m", "messages": [
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "x", "signature": "EqQB"}]}
        ]}));
        assert!(without_unsigned(&b).unwrap().is_none());
    }

    #[test]
    fn unsigned_thinking_goes_and_so_does_thinking_when_the_last_turn_lost_its_own() {
        let b = body(serde_json::json!({
            "model": "m",
            "thinking": {"type": "enabled", "budget_tokens": 2000},
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "deepseek reasoning", "signature": ""},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}
                ]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}
            ]
        }));
        let out = without_unsigned(&b).unwrap().unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert!(v.get("thinking").is_none());
        let content = v["messages"][1]["content"].as_array().unwrap();
        assert_eq!(content.len(), 1);
        assert_eq!(content[0]["type"], "tool_use");
        assert_eq!(v["model"], "m");
    }

    #[test]
    fn an_older_turn_losing_thinking_keeps_the_request_thinking() {
        let b = body(serde_json::json!({
            "model": "m",
            "thinking": {"type": "enabled", "budget_tokens": 2000},
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "r", "signature": ""}, {"type": "text", "text": "a"}]},
                {"role": "user", "content": "more"},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "s", "signature": "EqQB"}, {"type": "text", "text": "b"}]},
                {"role": "user", "content": "again"}
            ]
        }));
        let v: Value = serde_json::from_slice(&without_unsigned(&b).unwrap().unwrap()).unwrap();
        assert_eq!(v["thinking"]["type"], "enabled");
        assert_eq!(v["messages"][1]["content"].as_array().unwrap().len(), 1);
        assert_eq!(v["messages"][3]["content"].as_array().unwrap().len(), 2);
    }
}

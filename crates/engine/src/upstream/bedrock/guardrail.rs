//! Bedrock guardrails: a body may not carry its own `amazon-bedrock-*` keys when the
//! operator set a guardrail, and `input_tagging` wraps the chosen content in guard tags
//! with a random suffix (`amazon-bedrock-guardrailConfig.tagSuffix`), so the guardrail
//! evaluates only that content. The trace Bedrock returns (with `guardrail_trace`) is
//! logged for the operator, never returned differently to the caller.

use rand::Rng;
use serde_json::{Value, json};

use crate::config::InputTagging;

/// The top-level `amazon-bedrock-*` key a caller sent, if any.
pub fn caller_guardrail_key(body: &[u8]) -> Option<String> {
    let v: serde_json::Map<String, Value> = serde_json::from_slice(body).ok()?;
    v.keys().find(|k| k.starts_with("amazon-bedrock-")).cloned()
}

fn wrap(text: &str, suffix: &str) -> String {
    let tag = format!("amazon-bedrock-guardrails-guardContent_{suffix}");
    format!("<{tag}>{text}</{tag}>")
}

/// Wraps every text of `content` (a string or a list of blocks).
fn tag_content(content: &mut Value, suffix: &str) {
    match content {
        Value::String(s) => *s = wrap(s, suffix),
        Value::Array(blocks) => {
            for b in blocks {
                if b["type"] == "text"
                    && let Some(t) = b["text"].as_str()
                {
                    b["text"] = Value::String(wrap(t, suffix));
                }
            }
        }
        _ => {}
    }
}

/// The body with the chosen content guard-tagged and the tag suffix set.
pub fn tag(body: &[u8], how: InputTagging) -> Result<Vec<u8>, String> {
    let mut v: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let suffix: String = rand::rng()
        .sample_iter(rand::distr::Alphanumeric)
        .take(12)
        .map(char::from)
        .collect();
    if let Some(messages) = v["messages"].as_array_mut() {
        let last = messages.len().saturating_sub(1);
        for (i, m) in messages.iter_mut().enumerate() {
            let chosen = match how {
                InputTagging::LastMessage => i == last,
                InputTagging::UserMessages => m["role"] == "user",
                InputTagging::AllMessages | InputTagging::AllMessagesAndSystem => true,
            };
            if chosen {
                tag_content(&mut m["content"], &suffix);
            }
        }
    }
    if how == InputTagging::AllMessagesAndSystem && v.get("system").is_some() {
        tag_content(&mut v["system"], &suffix);
    }
    v["amazon-bedrock-guardrailConfig"] = json!({"tagSuffix": suffix});
    serde_json::to_vec(&v).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn tagging_wraps_only_the_chosen_content() {
        let body = br#"{"system":"be nice","messages":[{"role":"user","content":"one"},{"role":"assistant","content":[{"type":"text","text":"two"}]},{"role":"user","content":[{"type":"text","text":"three"},{"type":"image","source":{}}]}]}"#;
        let out: Value =
            serde_json::from_slice(&tag(body, InputTagging::UserMessages).unwrap()).unwrap();
        let suffix = out["amazon-bedrock-guardrailConfig"]["tagSuffix"]
            .as_str()
            .unwrap()
            .to_owned();
        let tagged = |t: &str| wrap(t, &suffix);
        assert_eq!(out["messages"][0]["content"], tagged("one"));
        assert_eq!(out["messages"][1]["content"][0]["text"], "two");
        assert_eq!(out["messages"][2]["content"][0]["text"], tagged("three"));
        assert_eq!(out["system"], "be nice");
        let last: Value =
            serde_json::from_slice(&tag(body, InputTagging::LastMessage).unwrap()).unwrap();
        assert_eq!(last["messages"][0]["content"], "one");
        let all: Value =
            serde_json::from_slice(&tag(body, InputTagging::AllMessagesAndSystem).unwrap())
                .unwrap();
        assert!(
            all["system"]
                .as_str()
                .unwrap()
                .starts_with("<amazon-bedrock-guardrails-guardContent_")
        );
        assert_eq!(
            caller_guardrail_key(br#"{"amazon-bedrock-guardrailConfig":{}}"#).as_deref(),
            Some("amazon-bedrock-guardrailConfig")
        );
        assert_eq!(caller_guardrail_key(br#"{"model":"m"}"#), None);
    }
}

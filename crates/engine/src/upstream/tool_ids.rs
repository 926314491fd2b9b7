//! Tool-call ids an upstream does not take. Anthropic's ids (`toolu_…`) fit most
//! providers, but some restrict them further (Mistral: exactly nine letters or digits),
//! and a conversation that moved between providers carries the ids of both. Before such
//! an upstream, every `tool_use` id and `tool_result` reference it would refuse is
//! replaced by one derived from it (a hash, so the same id maps the same way in every
//! turn and both halves of a call still match). Answers carry the provider's own ids,
//! which it takes back as they are.

use bytes::Bytes;
use serde_json::Value;
use xxhash_rust::xxh3::xxh3_128;

use crate::config::shaping::ToolIds;
use crate::error::ApiError;

const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
/// Length of a derived id when the rule names none exactly.
const DERIVED: usize = 22;

/// The id `rule` takes for `id` (itself when it is taken already).
pub fn fit(id: &str, rule: &ToolIds) -> String {
    if rule.accepts(id) {
        return id.to_owned();
    }
    let len = rule
        .length
        .unwrap_or_else(|| rule.max_length.map_or(DERIVED, |m| m.min(DERIVED)));
    let mut n = xxh3_128(id.as_bytes());
    let mut out = String::with_capacity(len);
    for _ in 0..len {
        out.push(char::from(ALPHABET[(n % 62) as usize]));
        n /= 62;
    }
    out
}

/// The body with every id `rule` refuses replaced, or `None` when all are taken.
pub fn rewrite(bytes: &Bytes, rule: &ToolIds) -> Result<Option<Bytes>, ApiError> {
    if memchr::memmem::find(bytes, b"tool_use").is_none() {
        return Ok(None);
    }
    let top: serde_json::Map<String, Value> = serde_json::from_slice(bytes)
        .map_err(|_| ApiError::InvalidRequest("request body must be a JSON object".into()))?;
    let Some(Value::Array(messages)) = top.get("messages") else {
        return Ok(None);
    };
    let mut messages = messages.clone();
    let mut changed = false;
    for m in &mut messages {
        let Some(Value::Array(content)) = m.get_mut("content") else {
            continue;
        };
        for block in content {
            let key = match block.get("type").and_then(Value::as_str) {
                Some("tool_use") => "id",
                Some("tool_result") => "tool_use_id",
                _ => continue,
            };
            if let Some(Value::String(id)) = block.get_mut(key)
                && !rule.accepts(id)
            {
                *id = fit(id, rule);
                changed = true;
            }
        }
    }
    if !changed {
        return Ok(None);
    }
    let set = [(
        "messages",
        serde_json::to_string(&messages).map_err(|_| ApiError::Internal)?,
    )];
    super::body::edit(bytes, &[], &set)
        .map(Some)
        .map_err(ApiError::InvalidRequest)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const MISTRAL: ToolIds = ToolIds {
        alphanumeric: true,
        length: Some(9),
        max_length: None,
    };

    #[test]
    fn refused_ids_are_derived_the_same_way_each_time_and_pairs_still_match() {
        let body = Bytes::from(
            serde_json::to_vec(&serde_json::json!({"model": "mistral-large", "messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "Bash", "input": {}},
                    {"type": "tool_use", "id": "Ab3dE6gH9", "name": "Read", "input": {}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9", "content": "a"},
                    {"type": "tool_result", "tool_use_id": "Ab3dE6gH9", "content": "b"}
                ]}
            ]}))
            .unwrap(),
        );
        let out = rewrite(&body, &MISTRAL).unwrap().unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        let (calls, results) = (&v["messages"][1]["content"], &v["messages"][2]["content"]);
        let derived = calls[0]["id"].as_str().unwrap();
        assert!(MISTRAL.accepts(derived), "{derived}");
        assert_eq!(results[0]["tool_use_id"], derived);
        assert_eq!(calls[1]["id"], "Ab3dE6gH9", "an id it takes stays");
        assert_eq!(fit("toolu_01A09q90qw90lq917835lq9", &MISTRAL), derived);
        assert!(rewrite(&out, &MISTRAL).unwrap().is_none());
    }
}

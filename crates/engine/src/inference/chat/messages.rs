//! OpenAI `messages` → Anthropic `system` and `messages`.
//!
//! - `system` and `developer` messages, wherever they stand, become the top-level
//!   `system` blocks in their order (Anthropic has no system turn inside the conversation).
//! - `user` content (a string or parts: `text`, `image_url` with a `data:` URL → a base64
//!   image, with an `http(s)` URL → a URL image) becomes content blocks.
//! - `assistant` `content` and `tool_calls` become text and `tool_use` blocks (the
//!   arguments string parsed as the JSON object Anthropic wants).
//! - `tool` messages become `tool_result` blocks in a user turn.
//! - Consecutive turns of one role are merged, so the roles alternate as Anthropic requires
//!   (several `tool` results, or a result followed by the user's next words, share a turn).

use serde_json::{Value, json};

use super::bad;
use crate::error::ApiError;

/// The `system` blocks and the `messages` of the Anthropic request.
pub fn translate(messages: Option<&Value>) -> Result<(Vec<Value>, Vec<Value>), ApiError> {
    let list = match messages {
        Some(Value::Array(a)) => a,
        Some(_) => return Err(bad("messages: must be a list")),
        None => return Err(bad("messages: field required")),
    };
    let mut system = Vec::new();
    let mut turns: Vec<Value> = Vec::new();
    for (i, m) in list.iter().enumerate() {
        let at = |field: &str| format!("messages[{i}]{field}");
        let (role, blocks) = match m["role"].as_str() {
            Some("system" | "developer") => {
                system.extend(text_blocks(&m["content"], &at(".content"))?);
                continue;
            }
            Some("user") => ("user", user_blocks(&m["content"], &at(".content"))?),
            Some("assistant") => ("assistant", assistant_blocks(m, &at(""))?),
            Some("tool") => ("user", vec![tool_result(m, &at(""))?]),
            Some("function") => {
                return Err(bad(format!(
                    "{}: the legacy `function` role is not supported; use `tool`",
                    at(".role")
                )));
            }
            _ => {
                return Err(bad(format!(
                    "{}: must be system, developer, user, assistant or tool",
                    at(".role")
                )));
            }
        };
        match turns.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(content) = last["content"].as_array_mut() {
                    content.extend(blocks);
                }
            }
            _ => turns.push(json!({"role": role, "content": blocks})),
        }
    }
    if turns.is_empty() {
        return Err(bad(
            "messages: at least one user or assistant message is required",
        ));
    }
    Ok((system, turns))
}

fn text_block(text: &str) -> Option<Value> {
    // Anthropic refuses empty text blocks; an empty string says nothing.
    (!text.is_empty()).then(|| json!({"type": "text", "text": text}))
}

/// A string, or parts of type `text` (system, developer and tool content).
fn text_blocks(content: &Value, at: &str) -> Result<Vec<Value>, ApiError> {
    match content {
        Value::Null => Ok(Vec::new()),
        Value::String(s) => Ok(text_block(s).into_iter().collect()),
        Value::Array(parts) => {
            let mut out = Vec::with_capacity(parts.len());
            for (j, p) in parts.iter().enumerate() {
                match (p["type"].as_str(), p["text"].as_str()) {
                    (Some("text"), Some(t)) => out.extend(text_block(t)),
                    _ => {
                        return Err(bad(format!(
                            "{at}[{j}]: only text parts are supported here"
                        )));
                    }
                }
            }
            Ok(out)
        }
        _ => Err(bad(format!("{at}: must be a string or a list of parts"))),
    }
}

fn user_blocks(content: &Value, at: &str) -> Result<Vec<Value>, ApiError> {
    let Value::Array(parts) = content else {
        return text_blocks(content, at);
    };
    let mut out = Vec::with_capacity(parts.len());
    for (j, p) in parts.iter().enumerate() {
        match p["type"].as_str() {
            Some("text") => match p["text"].as_str() {
                Some(t) => out.extend(text_block(t)),
                None => return Err(bad(format!("{at}[{j}].text: must be a string"))),
            },
            Some("image_url") => out.push(image(&p["image_url"], &format!("{at}[{j}].image_url"))?),
            Some(other) => {
                return Err(bad(format!(
                    "{at}[{j}].type: `{other}` parts are not supported (text and image_url are)"
                )));
            }
            None => return Err(bad(format!("{at}[{j}].type: field required"))),
        }
    }
    Ok(out)
}

/// `image_url` (`{url}` or, as some clients send, the URL itself) → an image block.
fn image(v: &Value, at: &str) -> Result<Value, ApiError> {
    let Some(url) = v.as_str().or_else(|| v["url"].as_str()) else {
        return Err(bad(format!("{at}.url: field required")));
    };
    if let Some(rest) = url.strip_prefix("data:") {
        let Some((media, data)) = rest.split_once(";base64,") else {
            return Err(bad(format!(
                "{at}.url: a data URL must be base64 (data:<type>;base64,...)"
            )));
        };
        return Ok(json!({
            "type": "image",
            "source": {"type": "base64", "media_type": media, "data": data},
        }));
    }
    if url.starts_with("https://") || url.starts_with("http://") {
        return Ok(json!({"type": "image", "source": {"type": "url", "url": url}}));
    }
    Err(bad(format!("{at}.url: must be a data: or http(s) URL")))
}

fn assistant_blocks(m: &Value, at: &str) -> Result<Vec<Value>, ApiError> {
    let mut out = match &m["content"] {
        Value::Array(parts) => {
            let mut out = Vec::with_capacity(parts.len());
            for (j, p) in parts.iter().enumerate() {
                // A `refusal` part is what the assistant said; Anthropic keeps it as text.
                let text = match p["type"].as_str() {
                    Some("text") => p["text"].as_str(),
                    Some("refusal") => p["refusal"].as_str(),
                    _ => None,
                };
                match text {
                    Some(t) => out.extend(text_block(t)),
                    None => {
                        return Err(bad(format!(
                            "{at}.content[{j}]: only text and refusal parts are supported"
                        )));
                    }
                }
            }
            out
        }
        other => text_blocks(other, &format!("{at}.content"))?,
    };
    let calls = match &m["tool_calls"] {
        Value::Null => return Ok(out),
        Value::Array(calls) => calls,
        _ => return Err(bad(format!("{at}.tool_calls: must be a list"))),
    };
    for (j, c) in calls.iter().enumerate() {
        let at = format!("{at}.tool_calls[{j}]");
        let (Some(id), Some(name)) = (c["id"].as_str(), c["function"]["name"].as_str()) else {
            return Err(bad(format!("{at}: id and function.name are required")));
        };
        let input = match c["function"]["arguments"].as_str().map(str::trim) {
            None | Some("") => json!({}),
            Some(args) => match serde_json::from_str::<Value>(args) {
                Ok(v @ Value::Object(_)) => v,
                _ => {
                    return Err(bad(format!(
                        "{at}.function.arguments: must be a JSON object in a string"
                    )));
                }
            },
        };
        out.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
    }
    Ok(out)
}

fn tool_result(m: &Value, at: &str) -> Result<Value, ApiError> {
    let Some(id) = m["tool_call_id"].as_str() else {
        return Err(bad(format!("{at}.tool_call_id: field required")));
    };
    let content = match &m["content"] {
        Value::String(s) => Value::String(s.clone()),
        other => Value::Array(text_blocks(other, &format!("{at}.content"))?),
    };
    Ok(json!({"type": "tool_result", "tool_use_id": id, "content": content}))
}

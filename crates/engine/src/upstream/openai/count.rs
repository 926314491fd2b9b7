//! `count_tokens` for OpenAI-compatible upstreams, answered locally: Chat Completions has
//! no counting endpoint, and a real completion would cost money. The estimate is the
//! translated request counted with the `o200k_base` tokenizer (`tiktoken-rs`, whose
//! vocabulary is compiled in; nothing is downloaded), following OpenAI's published rule
//! for chat messages:
//!
//! - every message: 3 tokens, plus its role and its text (string or text parts);
//! - every tool call: its name and its JSON arguments; every tool definition: its JSON;
//! - every image: 765 tokens (a 1024×1024 image at high detail; the size is not decoded);
//! - every PDF: one token per 4 bytes of the decoded file;
//! - 3 tokens to prime the reply.
//!
//! Other models' tokenizers differ (DeepSeek, Qwen, GLM count roughly 10–30% apart on
//! code and prose), so the answer is flagged an estimate: the caller gets
//! `x-gatehouse-estimated: true` and the usage row's `usage_source` is `estimated`.

use std::sync::OnceLock;

use serde_json::Value;
use tiktoken_rs::CoreBPE;

/// Tokens charged per image part.
const IMAGE_TOKENS: u64 = 765;
/// Text longer than this is estimated at 4 bytes a token instead of being tokenised (a
/// bound on the work one request can cause).
const MAX_TOKENIZED: usize = 4 * 1024 * 1024;

fn bpe() -> Option<&'static CoreBPE> {
    static BPE: OnceLock<Option<CoreBPE>> = OnceLock::new();
    BPE.get_or_init(|| match tiktoken_rs::o200k_base() {
        Ok(b) => Some(b),
        Err(e) => {
            tracing::error!(error = %e, "o200k_base could not be loaded; counting 4 bytes a token");
            None
        }
    })
    .as_ref()
}

fn tokens(text: &str) -> u64 {
    match bpe() {
        Some(b) if text.len() <= MAX_TOKENIZED => b.encode_ordinary(text).len() as u64,
        _ => text.len().div_ceil(4) as u64,
    }
}

/// The estimated input tokens of a translated Chat Completions body.
pub fn estimate(openai: &Value) -> u64 {
    let mut n: u64 = 3;
    for m in openai["messages"].as_array().into_iter().flatten() {
        n = n.saturating_add(3 + tokens(m["role"].as_str().unwrap_or_default()));
        n = n.saturating_add(content(&m["content"]));
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            let f = &call["function"];
            n = n.saturating_add(tokens(f["name"].as_str().unwrap_or_default()));
            n = n.saturating_add(tokens(f["arguments"].as_str().unwrap_or_default()));
        }
    }
    for tool in openai["tools"].as_array().into_iter().flatten() {
        n = n.saturating_add(tokens(&tool["function"].to_string()));
    }
    n
}

fn content(c: &Value) -> u64 {
    match c {
        Value::String(s) => tokens(s),
        Value::Array(parts) => parts.iter().fold(0u64, |n, p| {
            n.saturating_add(match p["type"].as_str() {
                Some("text") => tokens(p["text"].as_str().unwrap_or_default()),
                Some("image_url") => IMAGE_TOKENS,
                Some("file") => {
                    let data = p["file"]["file_data"].as_str().unwrap_or_default();
                    let b64 = data.split_once(',').map_or(data, |(_, d)| d);
                    (b64.len() as u64 * 3 / 4).div_ceil(4)
                }
                _ => 0,
            })
        }),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_text_with_the_message_rule() {
        // "hello world" is 2 tokens in o200k_base, "user" 1: 3 + (3 + 1 + 2).
        let body = json!({"messages": [{"role": "user", "content": "hello world"}]});
        assert_eq!(estimate(&body), 9);
        let with_image = json!({"messages": [{"role": "user", "content": [
            {"type": "text", "text": "hello world"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
        ]}]});
        assert_eq!(estimate(&with_image), 9 + IMAGE_TOKENS);
    }
}

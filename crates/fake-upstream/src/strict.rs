//! Validation as the real providers do it, in their words, so that a gateway that sends
//! something a real provider refuses fails against the fake too. Each rule is switched on by
//! the [`FakeConfig`]: `strict` for the body rules, `context_window`, `text_only_models` and
//! `mistral_tool_ids` on their own. The faces call [`claude_refusal`] (every Claude face;
//! each renders the message in its provider's error shape) or [`openai_refusal`].
//!
//! Claude faces (`strict`), as the Messages API words them:
//! - a `thinking` block without `signature`: `messages.N.content.M.thinking.signature: Field
//!   required`; with an empty one or one no Claude face made (the fake signs its own thinking
//!   with [`sign`]; every face and every instance accepts them, as Anthropic, Bedrock and
//!   Vertex accept each other's): `messages.N.content.M: Invalid `signature` in `thinking`
//!   block`;
//! - a `tool_use` id or a `tool_result`'s `tool_use_id` outside `^[a-zA-Z0-9_-]+$`:
//!   `messages.N.content.M.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'`;
//! - `thinking.type: enabled` and a final assistant turn with tool calls that does not start
//!   with a thinking block: the API's `Expected `thinking` or `redacted_thinking`` sentence;
//! - Bedrock: a beta (the body's `anthropic_beta`, or the `anthropic-beta` header) not in the
//!   list AWS documents for Claude on InvokeModel: `invalid beta flag`; a top-level key the
//!   InvokeModel body does not document: `Malformed input request: #: extraneous key [k] is
//!   not permitted, please reformat your input and try again.`;
//! - Vertex: an `anthropic-beta` value Vertex does not serve: `Unexpected value(s) `b` for the
//!   `anthropic-beta` header. ...`; an undocumented top-level key: `k: Extra inputs are not
//!   permitted`.
//!
//! `context_window` (tokens, estimated as body bytes / 4): `prompt is too long: N tokens > M
//! maximum` (Bedrock relays it as `The model returned the following errors: ...`); the
//! OpenAI-compatible face answers `context_length_exceeded` with OpenAI's sentence.
//! `text_only_models`: an `image_url` part to such a model is refused as DeepSeek refuses it
//! (`Failed to deserialize the JSON body into the target type: messages[N]: unknown variant
//! `image_url`, expected `text` at line 1 column C`). `mistral_tool_ids`: tool call ids must
//! be 9 of `[a-zA-Z0-9]`, as Mistral's API requires (`Tool call id was X but must be a-z,
//! A-Z, 0-9, with a length of 9.`). DeepSeek's thinking-mode rule (a tool-calling assistant
//! message must bring its `reasoning_content` back) lives in the `openai` module.

use base64::Engine;
use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};
use serde_json::{Value, json};

use crate::config::FakeConfig;
use crate::record::Refusal;
use crate::server::{Shared, error_response, json_response};
use crate::sse::FakeBody;

/// The thinking text of the fake's thinking blocks.
pub(crate) const THINKING_TEXT: &str = "The user asked for this; the tools will tell.";

/// Leading bytes of a signature the fake made.
const SIGNATURE_MAGIC: &[u8] = b"gatehouse-fake-claude-thinking:";

/// Which provider's extra rules a Claude face applies.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Family {
    /// The Messages API as Anthropic serves it (also Foundry, Mantle, the platforms).
    Anthropic,
    Bedrock,
    Vertex,
}

/// Top-level keys of an InvokeModel body for Claude, as AWS documents them (the request
/// parameters of "Anthropic Claude Messages API", plus extended thinking, effort and
/// context management, which Bedrock serves behind their betas).
const BEDROCK_FIELDS: &[&str] = &[
    "anthropic_version",
    "anthropic_beta",
    "max_tokens",
    "system",
    "messages",
    "temperature",
    "top_p",
    "top_k",
    "tools",
    "tool_choice",
    "stop_sequences",
    "thinking",
    "metadata",
    "output_config",
    "context_management",
];

/// Betas Bedrock takes for Claude (AWS's list for InvokeModel, and Claude Code's own).
const BEDROCK_BETAS: &[&str] = &[
    "claude-code-20250219",
    "computer-use-2024-10-22",
    "computer-use-2025-01-24",
    "token-efficient-tools-2025-02-19",
    "interleaved-thinking-2025-05-14",
    "output-128k-2025-02-19",
    "dev-full-thinking-2025-05-14",
    "context-1m-2025-08-07",
    "context-management-2025-06-27",
    "effort-2025-11-24",
    "tool-search-tool-2025-10-19",
    "tool-examples-2025-10-29",
];

/// Top-level keys of a rawPredict body (the Messages API's, without `model`, with
/// `anthropic_version`).
const VERTEX_FIELDS: &[&str] = &[
    "anthropic_version",
    "max_tokens",
    "messages",
    "system",
    "metadata",
    "stop_sequences",
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "tools",
    "tool_choice",
    "thinking",
    "output_config",
    "context_management",
];

/// Betas Vertex serves for Claude.
const VERTEX_BETAS: &[&str] = &[
    "claude-code-20250219",
    "computer-use-2024-10-22",
    "computer-use-2025-01-24",
    "token-efficient-tools-2025-02-19",
    "interleaved-thinking-2025-05-14",
    "output-128k-2025-02-19",
    "context-1m-2025-08-07",
    "context-management-2025-06-27",
    "fine-grained-tool-streaming-2025-05-14",
    "tool-search-tool-2025-10-19",
];

/// FNV-1a, 64 bits: stable across builds and processes.
fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The signed bytes of a thinking block with this text.
fn signature_bytes(thinking: &str) -> Vec<u8> {
    let mut raw = SIGNATURE_MAGIC.to_vec();
    raw.extend_from_slice(&fnv64(thinking.as_bytes()).to_be_bytes());
    raw
}

/// The signature the fake gives a thinking block with this text.
pub(crate) fn sign(thinking: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(signature_bytes(thinking))
}

/// Whether `signature` is the fake's own for `thinking` (made by any Claude face).
fn signed_here(thinking: &str, signature: &str) -> bool {
    base64::engine::general_purpose::STANDARD
        .decode(signature)
        .is_ok_and(|raw| raw == signature_bytes(thinking))
}

/// Whether the request asks for thinking (`enabled` or `adaptive`).
pub(crate) fn wants_thinking(body: &Value) -> bool {
    matches!(
        body["thinking"]["type"].as_str(),
        Some("enabled" | "adaptive")
    )
}

/// The estimated prompt tokens of a body of `bytes` bytes.
pub(crate) fn estimate_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

fn header_betas(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all("anthropic-beta")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|b| b.trim().to_owned())
        .filter(|b| !b.is_empty())
        .collect()
}

fn id_ok(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

const ID_PATTERN: &str = "String should match pattern '^[a-zA-Z0-9_-]+$'";

/// The first block rule a conversation breaks: signatures and tool ids.
fn block_refusal(messages: &[Value]) -> Option<String> {
    for (i, m) in messages.iter().enumerate() {
        let Some(blocks) = m["content"].as_array() else {
            continue;
        };
        for (j, b) in blocks.iter().enumerate() {
            match b["type"].as_str() {
                Some("thinking") if m["role"] == "assistant" => {
                    let Some(signature) = b.get("signature") else {
                        return Some(format!(
                            "messages.{i}.content.{j}.thinking.signature: Field required"
                        ));
                    };
                    let text = b["thinking"].as_str().unwrap_or_default();
                    if !signature.as_str().is_some_and(|s| signed_here(text, s)) {
                        return Some(format!(
                            "messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
                        ));
                    }
                }
                Some("tool_use") if !b["id"].as_str().is_some_and(id_ok) => {
                    return Some(format!(
                        "messages.{i}.content.{j}.tool_use.id: {ID_PATTERN}"
                    ));
                }
                Some("tool_result") if !b["tool_use_id"].as_str().is_some_and(id_ok) => {
                    return Some(format!(
                        "messages.{i}.content.{j}.tool_result.tool_use_id: {ID_PATTERN}"
                    ));
                }
                _ => {}
            }
        }
    }
    None
}

/// With `thinking.type: enabled`, the last assistant turn that called tools answered by the
/// final user turn must start with a thinking block.
fn thinking_turn_refusal(body: &Value, messages: &[Value]) -> Option<String> {
    if body["thinking"]["type"] != "enabled" {
        return None;
    }
    let last_user = messages.last()?;
    let answers_tools = last_user["content"]
        .as_array()
        .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"));
    if !answers_tools {
        return None;
    }
    let i = messages.iter().rposition(|m| m["role"] == "assistant")?;
    let first = &messages[i]["content"][0];
    let kind = first["type"].as_str().unwrap_or("text");
    if matches!(kind, "thinking" | "redacted_thinking") {
        return None;
    }
    Some(format!(
        "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found \
         `{kind}`. When `thinking` is enabled, a final `assistant` message must start with a \
         thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). \
         We recommend you include thinking blocks from previous turns. To avoid this \
         requirement, disable `thinking`. Please consult our documentation at \
         https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
    ))
}

/// Bedrock's and Vertex's refusals of betas and top-level keys.
fn cloud_refusal(family: Family, headers: &HeaderMap, body: &Value) -> Option<String> {
    let (fields, betas): (&[&str], &[&str]) = match family {
        Family::Anthropic => return None,
        Family::Bedrock => (BEDROCK_FIELDS, BEDROCK_BETAS),
        Family::Vertex => (VERTEX_FIELDS, VERTEX_BETAS),
    };
    let mut sent = header_betas(headers);
    if family == Family::Bedrock {
        sent.extend(
            body["anthropic_beta"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned),
        );
    }
    let unknown: Vec<&String> = sent
        .iter()
        .filter(|b| !betas.contains(&b.as_str()))
        .collect();
    if !unknown.is_empty() {
        return Some(match family {
            Family::Bedrock => "invalid beta flag".to_owned(),
            _ => {
                let list: Vec<String> = unknown.iter().map(|b| format!("`{b}`")).collect();
                format!(
                    "Unexpected value(s) {} for the `anthropic-beta` header. Please consult our \
                     documentation at docs.anthropic.com or try again without the header.",
                    list.join(", ")
                )
            }
        });
    }
    let extra = body
        .as_object()?
        .keys()
        .find(|k| !fields.contains(&k.as_str()))?;
    Some(match family {
        Family::Bedrock => format!(
            "Malformed input request: #: extraneous key [{extra}] is not permitted, please \
             reformat your input and try again."
        ),
        _ => format!("{extra}: Extra inputs are not permitted"),
    })
}

/// Why a Claude face refuses request `index` (status 400), in its provider's words (noted
/// in the records); the face renders it in its own error shape. `bytes` is the body's size;
/// `count` marks a `count_tokens` request (only its betas and keys are checked).
pub(crate) fn claude_refusal(
    shared: &Shared,
    index: usize,
    family: Family,
    headers: &HeaderMap,
    body: &Value,
    bytes: usize,
    count: bool,
) -> Option<String> {
    let rendered = shared.rendered();
    let why = claude_rules(&rendered.config, family, headers, body, bytes, count)?;
    let message = if family == Family::Bedrock {
        bedrock_message(why)
    } else {
        why
    };
    note(shared, index, &message);
    Some(message)
}

/// Notes a 400 refusal of request `index` in the records.
pub(crate) fn note(shared: &Shared, index: usize, message: &str) {
    shared.records.lock().push_refusal(Refusal {
        request_index: index,
        status: 400,
        message: message.to_owned(),
    });
}

/// The rules of [`claude_refusal`], on a config.
fn claude_rules(
    config: &FakeConfig,
    family: Family,
    headers: &HeaderMap,
    body: &Value,
    bytes: usize,
    count: bool,
) -> Option<String> {
    if config.strict
        && let Some(why) = cloud_refusal(family, headers, body)
    {
        return Some(why);
    }
    if count {
        return None;
    }
    let messages = body["messages"].as_array().map_or(&[][..], Vec::as_slice);
    if config.strict
        && let Some(why) = block_refusal(messages).or_else(|| thinking_turn_refusal(body, messages))
    {
        return Some(why);
    }
    let window = config.context_window?;
    let tokens = estimate_tokens(bytes);
    (tokens > window).then(|| format!("prompt is too long: {tokens} tokens > {window} maximum"))
}

/// The Anthropic face's refusal of a `/v1/messages` or `/v1/messages/count_tokens` request
/// at `path` (other paths: `None`).
pub(crate) fn messages_refusal(
    shared: &Shared,
    index: usize,
    path: &str,
    headers: &HeaderMap,
    raw: &[u8],
) -> Option<Response<FakeBody>> {
    let count = match path {
        "/v1/messages" => false,
        "/v1/messages/count_tokens" => true,
        _ => return None,
    };
    let rendered = shared.rendered();
    if !rendered.config.strict && rendered.config.context_window.is_none() {
        return None;
    }
    let body = serde_json::from_slice::<Value>(raw).unwrap_or(Value::Null);
    let family = Family::Anthropic;
    let why = claude_refusal(shared, index, family, headers, &body, raw.len(), count)?;
    Some(error_response(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        &why,
    ))
}

/// Bedrock's wording of a refusal the model made (as opposed to its own schema checks).
fn bedrock_message(why: String) -> String {
    if why.starts_with("Malformed input request") {
        why
    } else {
        format!("The model returned the following errors: {why}")
    }
}

/// A Mistral-style tool call id: 9 of `[a-zA-Z0-9]`.
pub(crate) fn mistral_id(n: u64) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut h = fnv64(&n.to_be_bytes());
    (0..9)
        .map(|_| {
            let c = ALPHABET[(h % ALPHABET.len() as u64) as usize];
            h /= ALPHABET.len() as u64;
            h ^= 0x9e37_79b9_7f4a_7c15;
            char::from(c)
        })
        .collect()
}

fn mistral_id_ok(id: &str) -> bool {
    id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric())
}

fn openai_error(kind: &str, code: Value, param: Value, message: &str) -> Response<FakeBody> {
    let body = json!({"error": {"message": message, "type": kind, "param": param, "code": code}});
    json_response(StatusCode::BAD_REQUEST, Bytes::from(body.to_string()))
}

/// The column (1-based, the body being one line) of the first image part in `raw`.
fn image_column(raw: &[u8]) -> usize {
    let needle = b"\"image_url\"";
    raw.windows(needle.len())
        .position(|w| w == needle)
        .map_or(1, |p| p + 1)
}

/// The OpenAI-compatible face's refusal of chat request `index`, whole, in the refusing
/// provider's shape (noted in the records); `None` when the request passes.
pub(crate) fn openai_refusal(
    shared: &Shared,
    index: usize,
    body: &Value,
    raw: &[u8],
) -> Option<Response<FakeBody>> {
    let rendered = shared.rendered();
    let (message, response) = openai_rules(&rendered.config, body, raw)?;
    note(shared, index, &message);
    Some(response)
}

/// The rules of [`openai_refusal`], on a config: the message and the whole answer.
fn openai_rules(
    config: &FakeConfig,
    body: &Value,
    raw: &[u8],
) -> Option<(String, Response<FakeBody>)> {
    let messages = body["messages"].as_array().map_or(&[][..], Vec::as_slice);
    let model = body["model"].as_str().unwrap_or_default();
    if config.text_only_models.iter().any(|m| m == model) {
        let with_image = messages.iter().position(|m| {
            m["content"]
                .as_array()
                .is_some_and(|parts| parts.iter().any(|p| p["type"] == "image_url"))
        });
        if let Some(i) = with_image {
            let message = format!(
                "Failed to deserialize the JSON body into the target type: messages[{i}]: \
                 unknown variant `image_url`, expected `text` at line 1 column {}",
                image_column(raw)
            );
            let code = json!("invalid_request_error");
            let answer = openai_error("invalid_request_error", code, Value::Null, &message);
            return Some((message, answer));
        }
    }
    if config.mistral_tool_ids {
        let ids = messages.iter().flat_map(|m| {
            let calls = m["tool_calls"].as_array().into_iter().flatten();
            calls
                .map(|c| &c["id"])
                .chain(std::iter::once(&m["tool_call_id"]).filter(|v| !v.is_null()))
        });
        for id in ids {
            let id = id.as_str().unwrap_or_default();
            if !mistral_id_ok(id) {
                let message =
                    format!("Tool call id was {id} but must be a-z, A-Z, 0-9, with a length of 9.");
                let body = json!({"object": "error", "message": message, "type": "invalid_request_error", "param": null, "code": null});
                let answer = json_response(StatusCode::BAD_REQUEST, Bytes::from(body.to_string()));
                return Some((message, answer));
            }
        }
    }
    let window = config.context_window?;
    let tokens = estimate_tokens(raw.len());
    (tokens > window).then(|| {
        let message = format!(
            "This model's maximum context length is {window} tokens. However, your messages \
             resulted in {tokens} tokens. Please reduce the length of the messages."
        );
        let answer = openai_error(
            "invalid_request_error",
            json!("context_length_exceeded"),
            json!("messages"),
            &message,
        );
        (message, answer)
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn strict() -> FakeConfig {
        FakeConfig {
            strict: true,
            ..FakeConfig::default()
        }
    }

    fn refusal(family: Family, headers: &HeaderMap, body: &Value) -> Option<String> {
        let bytes = body.to_string().len();
        claude_rules(&strict(), family, headers, body, bytes, false)
    }

    fn thinking_turn(signature: Option<&str>) -> Value {
        let mut block = json!({"type": "thinking", "thinking": THINKING_TEXT});
        if let Some(s) = signature {
            block["signature"] = json!(s);
        }
        json!({"max_tokens": 9, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [block, {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}
        ]})
    }

    #[test]
    fn thinking_signatures_the_fake_made_pass_and_others_are_refused() {
        let h = HeaderMap::new();
        assert_eq!(
            refusal(
                Family::Anthropic,
                &h,
                &thinking_turn(Some(&sign(THINKING_TEXT)))
            ),
            None
        );
        assert_eq!(
            refusal(Family::Vertex, &h, &thinking_turn(None)).unwrap(),
            "messages.1.content.0.thinking.signature: Field required"
        );
        for bad in ["", "c2lnbmVkIGVsc2V3aGVyZQ==", &sign("other text")] {
            assert_eq!(
                refusal(Family::Bedrock, &h, &thinking_turn(Some(bad))).unwrap(),
                "messages.1.content.0: Invalid `signature` in `thinking` block",
                "{bad}"
            );
        }
        // Not strict: nothing is checked.
        let lax = FakeConfig::default();
        assert_eq!(
            claude_rules(&lax, Family::Anthropic, &h, &thinking_turn(None), 10, false),
            None
        );
    }

    #[test]
    fn tool_ids_must_match_the_pattern() {
        let body = json!({"messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "functions.Bash:0", "name": "Bash", "input": {}}]}
        ]});
        assert_eq!(
            refusal(Family::Anthropic, &HeaderMap::new(), &body).unwrap(),
            "messages.0.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
        );
    }

    #[test]
    fn enabled_thinking_needs_the_last_tool_turn_to_start_with_thinking() {
        let mut body = thinking_turn(Some(&sign(THINKING_TEXT)));
        body["thinking"] = json!({"type": "enabled", "budget_tokens": 1024});
        assert_eq!(refusal(Family::Anthropic, &HeaderMap::new(), &body), None);
        body["messages"][1]["content"]
            .as_array_mut()
            .unwrap()
            .remove(0);
        let why = refusal(Family::Anthropic, &HeaderMap::new(), &body).unwrap();
        assert!(
            why.starts_with("messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`"),
            "{why}"
        );
    }

    #[test]
    fn cloud_betas_and_keys() {
        let mut h = HeaderMap::new();
        h.insert(
            "anthropic-beta",
            "claude-code-20250219,effort-2025-11-24".parse().unwrap(),
        );
        let body = json!({"anthropic_version": "v", "max_tokens": 1, "messages": []});
        assert_eq!(refusal(Family::Bedrock, &h, &body), None);
        assert_eq!(
            refusal(Family::Vertex, &h, &body).unwrap(),
            "Unexpected value(s) `effort-2025-11-24` for the `anthropic-beta` header. Please consult our documentation at docs.anthropic.com or try again without the header."
        );
        let mut b = body.clone();
        b["anthropic_beta"] = json!(["per-turn-control-2026-07-01"]);
        assert_eq!(
            refusal(Family::Bedrock, &HeaderMap::new(), &b).unwrap(),
            "invalid beta flag"
        );
        let mut b = body.clone();
        b["service_tier"] = json!("auto");
        assert_eq!(
            refusal(Family::Bedrock, &HeaderMap::new(), &b).unwrap(),
            "Malformed input request: #: extraneous key [service_tier] is not permitted, please reformat your input and try again."
        );
        assert_eq!(
            refusal(Family::Vertex, &HeaderMap::new(), &b).unwrap(),
            "service_tier: Extra inputs are not permitted"
        );
        assert_eq!(refusal(Family::Anthropic, &HeaderMap::new(), &b), None);
    }

    #[test]
    fn the_context_window_counts_bytes_over_four() {
        let config = FakeConfig {
            context_window: Some(100),
            ..FakeConfig::default()
        };
        let body = json!({"messages": []});
        let h = HeaderMap::new();
        assert_eq!(
            claude_rules(&config, Family::Anthropic, &h, &body, 400, false),
            None
        );
        assert_eq!(
            claude_rules(&config, Family::Anthropic, &h, &body, 401, false).unwrap(),
            "prompt is too long: 101 tokens > 100 maximum"
        );
        assert_eq!(
            claude_rules(&config, Family::Anthropic, &h, &body, 4000, true),
            None,
            "count_tokens counts, it does not refuse"
        );
        assert_eq!(
            bedrock_message("prompt is too long: 101 tokens > 100 maximum".into()),
            "The model returned the following errors: prompt is too long: 101 tokens > 100 maximum"
        );
    }

    #[test]
    fn mistral_ids_are_nine_alphanumerics() {
        for n in 0..50 {
            assert!(mistral_id_ok(&mistral_id(n)), "{}", mistral_id(n));
        }
        assert_ne!(mistral_id(1), mistral_id(2));
        assert!(!mistral_id_ok("call_0fypS1hVX"));
    }
}

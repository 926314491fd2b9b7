//! Configuration of the fake upstream: what a successful answer looks like
//! ([`FakeConfig`]) and the one-shot failures that can be injected ([`Fault`]).

use serde::{Deserialize, Serialize};

/// Shape and pacing of successful `/v1/messages` answers.
///
/// Every field has a default, so `{}` is a valid JSON config and partial
/// JSON objects only override the fields they mention.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FakeConfig {
    /// Assistant text of the answer.
    pub reply_text: String,
    /// Number of `content_block_delta` events, also reported as
    /// `usage.output_tokens`. The reply text is split into that many pieces
    /// (at word boundaries, or into character runs when there are more tokens
    /// than words) that concatenate to exactly `reply_text`; only when there
    /// are more tokens than characters do the extra deltas carry one
    /// space-prefixed reply word each, cycling through the words.
    pub output_tokens: u32,
    /// Reported `usage.input_tokens` (and the `count_tokens` answer).
    pub input_tokens: u32,
    /// Reported `usage.cache_read_input_tokens`.
    pub cache_read_input_tokens: u32,
    /// Reported `usage.cache_creation.ephemeral_5m_input_tokens`.
    pub cache_creation_5m_tokens: u32,
    /// Reported `usage.cache_creation.ephemeral_1h_input_tokens`.
    /// `usage.cache_creation_input_tokens` is the sum of the 5m and 1h values.
    pub cache_creation_1h_tokens: u32,
    /// Reported `usage.server_tool_use.web_search_requests`; the
    /// `server_tool_use` object is only present when this is non-zero.
    pub web_search_requests: u32,
    /// Delay before the response headers are sent.
    pub header_delay_ms: u64,
    /// Delay between `message_start` (sent with the headers) and the first delta.
    pub first_token_delay_ms: u64,
    /// Delay between two consecutive deltas.
    pub token_interval_ms: u64,
    /// Model echoed in answers; `None` echoes the request's `model`.
    pub model_override: Option<String>,
    /// Tool calls the answer makes after its text (`tool_use` blocks, `stop_reason:
    /// tool_use`; streamed as `input_json_delta` fragments), unless the conversation
    /// already carries a `tool_result`: then the plain reply answers, as a model does once
    /// its tools ran. Empty: no tool calls.
    pub tool_uses: Vec<ToolUse>,
    /// Model Anthropic's prompt cache in this instance (the `prompt_cache` module): each
    /// `/v1/messages` answer then reports `input_tokens`, `cache_read_input_tokens` and
    /// `cache_creation_input_tokens` (5m) from the request's `cache_control` breakpoints and
    /// what earlier requests to this instance cached, instead of the three fixed values
    /// above. Off by default.
    pub prompt_cache: bool,
    /// Refuse what the real providers refuse, in their words (the `strict` module): thinking
    /// signatures, tool ids, and on Bedrock and Vertex unknown betas and top-level keys. A
    /// request asking for thinking is then answered with a thinking block the fake signed.
    pub strict: bool,
    /// The model's context window in tokens, estimated as request bytes / 4: a longer
    /// Messages or chat request is refused as its provider refuses an overflow. `None`: none.
    pub context_window: Option<u64>,
    /// Models the OpenAI-compatible face serves as text only: an `image_url` part to one of
    /// them is refused as DeepSeek refuses it.
    pub text_only_models: Vec<String>,
    /// The OpenAI-compatible face issues and requires Mistral's tool call ids (exactly nine
    /// of `[a-zA-Z0-9]`).
    pub mistral_tool_ids: bool,
    /// Make the scripted `tool_uses` on every turn whose last message is a new prompt, not
    /// tool results (a resumed conversation that already ran tools calls them again); off:
    /// only until the conversation carries any tool result. The OpenAI-compatible face then
    /// calls them too, instead of its own `Bash` script.
    pub tool_uses_every_turn: bool,
    /// The message of the `MidStreamError` fault's `error` event (default `Overloaded`),
    /// e.g. one naming an account, as a cloud's can.
    pub mid_stream_error_message: Option<String>,
}

/// One scripted tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolUse {
    pub id: String,
    pub name: String,
    pub input: serde_json::Value,
}

impl Default for FakeConfig {
    fn default() -> Self {
        Self {
            reply_text: "Hello from the fake upstream.".to_owned(),
            output_tokens: 8,
            input_tokens: 25,
            cache_read_input_tokens: 0,
            cache_creation_5m_tokens: 0,
            cache_creation_1h_tokens: 0,
            web_search_requests: 0,
            header_delay_ms: 0,
            first_token_delay_ms: 0,
            token_interval_ms: 0,
            model_override: None,
            tool_uses: Vec::new(),
            prompt_cache: false,
            strict: false,
            context_window: None,
            text_only_models: Vec::new(),
            mistral_tool_ids: false,
            tool_uses_every_turn: false,
            mid_stream_error_message: None,
        }
    }
}

/// A failure injected into the next inference request (`/v1/messages` or
/// `/v1/messages/count_tokens`). Faults are queued FIFO and each inference
/// request consumes at most one.
///
/// JSON form: `{"kind":"status","status":429,"retry_after":3}`,
/// `{"kind":"mid_stream_error","after_deltas":2}`, `{"kind":"reset_before_headers"}`,
/// `{"kind":"reset_mid_stream","after_deltas":2}`, `{"kind":"hang_before_headers","ms":5000}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fault {
    /// Answer with `status` and an Anthropic error envelope. `error_type`
    /// defaults from the status (see [`default_error_type`]); `retry_after`
    /// adds a `retry-after` header.
    Status {
        status: u16,
        #[serde(default)]
        retry_after: Option<u32>,
        #[serde(default)]
        error_type: Option<String>,
        #[serde(default)]
        message: Option<String>,
    },
    /// Stream normally, then after `after_deltas` deltas send an SSE `error`
    /// event (`overloaded_error`) and end the stream cleanly. A non-streaming
    /// request gets a plain 529 `overloaded_error` answer instead.
    MidStreamError { after_deltas: u32 },
    /// Read the request, then close the connection without answering.
    ResetBeforeHeaders,
    /// Send the headers and the events up to `after_deltas` deltas, then
    /// abort the connection. A non-streaming answer is cut in the middle of
    /// its JSON body.
    ResetMidStream { after_deltas: u32 },
    /// Wait `ms` before the headers (on top of `header_delay_ms`), then
    /// answer normally.
    HangBeforeHeaders { ms: u64 },
}

/// Anthropic `error.type` used for a status when a fault gives none.
pub fn default_error_type(status: u16) -> &'static str {
    match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

/// Human-readable default `error.message` for an error type.
pub(crate) fn default_error_message(error_type: &str) -> &'static str {
    match error_type {
        "invalid_request_error" => "Invalid request (injected by fake upstream)",
        "authentication_error" => "invalid x-api-key",
        "permission_error" => {
            "Your API key does not have permission to use the specified resource."
        }
        "not_found_error" => "Not found",
        "request_too_large" => "Request exceeds the maximum allowed number of bytes.",
        "rate_limit_error" => "Number of requests has exceeded your rate limit.",
        "overloaded_error" => "Overloaded",
        _ => "Internal server error",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn partial_config_uses_defaults() {
        let c: FakeConfig = serde_json::from_str(r#"{"output_tokens":3}"#).unwrap();
        assert_eq!(c.output_tokens, 3);
        assert_eq!(c.reply_text, FakeConfig::default().reply_text);
    }

    #[test]
    fn fault_json_forms() {
        let f: Fault = serde_json::from_str(r#"{"kind":"status","status":429}"#).unwrap();
        assert_eq!(
            f,
            Fault::Status {
                status: 429,
                retry_after: None,
                error_type: None,
                message: None
            }
        );
        let f: Fault = serde_json::from_str(r#"{"kind":"reset_before_headers"}"#).unwrap();
        assert_eq!(f, Fault::ResetBeforeHeaders);
        let s = serde_json::to_string(&Fault::MidStreamError { after_deltas: 2 }).unwrap();
        assert_eq!(s, r#"{"kind":"mid_stream_error","after_deltas":2}"#);
    }
}

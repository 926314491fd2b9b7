//! OpenAI-compatible errors → Anthropic's envelope, with the conventions of
//! [`crate::upstream::errors`]: the status's `error.type` and a fixed sentence for the
//! caller (a provider's message may name the account, organisation or project), the
//! provider's message in the operator log. Two cases keep what Claude Code's recovery
//! needs: a context overflow becomes a 400 `prompt is too long: …` (Claude Code then
//! compacts), and a 429 keeps its `retry-after`.

use http::{StatusCode, header};
use serde_json::Value;

use crate::upstream::errors::{envelope, error_type};
use crate::upstream::{Answer, errors};

/// Largest upstream error body read.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// Whether an upstream error says the prompt overflowed the model's context.
pub fn context_overflow(code: Option<&str>, message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    code == Some("context_length_exceeded")
        || m.contains("maximum context length")
        || m.contains("context_length_exceeded")
        || m.contains("context window")
        || m.contains("prompt is too long")
}

/// `prompt is too long: N tokens > M maximum` when the message gives both numbers
/// (OpenAI: "maximum context length is M tokens. However, your messages resulted in N
/// tokens"); numbers are not account details.
pub fn too_long_message(message: &str) -> String {
    let after = |marker: &str| -> Option<u64> {
        let lower = message.to_ascii_lowercase();
        let at = lower.find(marker)? + marker.len();
        lower[at..]
            .split(|c: char| !c.is_ascii_digit())
            .find(|s| !s.is_empty())?
            .parse()
            .ok()
    };
    let asked = after("resulted in").or_else(|| after("you requested"));
    match (asked, after("maximum context length is")) {
        (Some(n), Some(max)) => format!("prompt is too long: {n} tokens > {max} maximum"),
        _ => "prompt is too long: the conversation exceeds the upstream model's context window"
            .to_owned(),
    }
}

/// The caller's answer for an upstream error answer.
pub async fn clean(upstream_name: &str, answer: Answer) -> Answer {
    let status = answer.status;
    let retry_after = answer.headers.get(header::RETRY_AFTER).cloned();
    let body = answer.read_limited(ERROR_BODY_LIMIT).await;
    let parsed: Value = serde_json::from_slice(&body).unwrap_or_default();
    let error = &parsed["error"];
    let message = error["message"]
        .as_str()
        .or_else(|| error.as_str())
        .or_else(|| parsed["message"].as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
    let code = error["code"].as_str();
    let mut out = if matches!(status.as_u16(), 400 | 413 | 422) && context_overflow(code, &message)
    {
        tracing::warn!(upstream = %upstream_name, status = status.as_u16(), message = %message, "upstream context overflow");
        envelope(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            &too_long_message(&message),
        )
    } else {
        // 422 (a validation error some servers use) is a bad request to Anthropic clients.
        let status = if status.as_u16() == 422 {
            StatusCode::BAD_REQUEST
        } else {
            status
        };
        errors::answer(upstream_name, status, Some(&message))
    };
    if let Some(v) = retry_after.filter(|_| status == StatusCode::TOO_MANY_REQUESTS) {
        out.headers.insert(header::RETRY_AFTER, v);
    }
    out
}

/// An error event inside a stream: `error.type` from its code or status, a fixed sentence.
pub fn stream_error(error: &Value) -> (&'static str, String) {
    let message = error["message"].as_str().unwrap_or_default();
    tracing::warn!(message = %message, "openai stream error event");
    let status = error["code"]
        .as_u64()
        .or_else(|| error["status"].as_u64())
        .and_then(|c| u16::try_from(c).ok())
        .and_then(|c| StatusCode::from_u16(c).ok())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let kind = match error_type(status) {
        "rate_limit_error" => "rate_limit_error",
        "overloaded_error" => "overloaded_error",
        _ => "api_error",
    };
    (kind, errors::caller_message(status, None, None))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use bytes::Bytes;

    async fn cleaned(status: u16, body: Value, retry: Option<&str>) -> (Answer, Value) {
        let mut a = Answer::json(
            StatusCode::from_u16(status).unwrap(),
            Bytes::from(body.to_string()),
        );
        if let Some(r) = retry {
            a.headers
                .insert(header::RETRY_AFTER, http::HeaderValue::from_str(r).unwrap());
        }
        let mut out = clean("up", a).await;
        let body = std::mem::replace(&mut out.body, Box::pin(futures_util::stream::empty()));
        let bytes: Vec<Bytes> = futures_util::StreamExt::collect::<Vec<_>>(body)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        (out, serde_json::from_slice(&bytes.concat()).unwrap())
    }

    fn openai_error(message: &str, code: &str) -> Value {
        serde_json::json!({"error": {"message": message, "type": "x", "code": code}})
    }

    #[tokio::test]
    async fn statuses_map_to_anthropic_types_without_the_provider_words() {
        let secret = "Rate limit reached for org-acct-secret in project proj_42";
        let (a, v) = cleaned(429, openai_error(secret, "rate_limit_exceeded"), Some("12")).await;
        assert_eq!(a.status, 429);
        assert_eq!(a.headers[header::RETRY_AFTER], "12");
        assert_eq!(v["type"], "error");
        assert_eq!(v["error"]["type"], "rate_limit_error");
        assert!(!v.to_string().contains("acct-secret"), "{v}");
        for (status, kind) in [
            (401, "authentication_error"),
            (403, "permission_error"),
            (404, "not_found_error"),
            (500, "api_error"),
            (503, "api_error"),
            (422, "invalid_request_error"),
        ] {
            let (a, v) = cleaned(status, openai_error(secret, "x"), Some("5")).await;
            assert_eq!(v["error"]["type"], kind, "{status}");
            assert!(a.headers.get(header::RETRY_AFTER).is_none(), "{status}");
            assert!(!v.to_string().contains("acct-secret"), "{v}");
        }
    }

    #[tokio::test]
    async fn a_context_overflow_reads_prompt_is_too_long() {
        let m = "This model's maximum context length is 65536 tokens. However, you requested 70000 tokens (60000 in the messages, 10000 in the completion).";
        let (a, v) = cleaned(400, openai_error(m, "context_length_exceeded"), None).await;
        assert_eq!(a.status, 400);
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("prompt is too long: "),
            "{v}"
        );
        // Without the code, the wording alone is enough (vLLM, Ollama).
        let (_, v) = cleaned(
            400,
            serde_json::json!({"message": "input exceeds the context window"}),
            None,
        )
        .await;
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("prompt is too long")
        );
    }
}

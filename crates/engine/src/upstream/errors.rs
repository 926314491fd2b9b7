//! Cloud provider errors in Anthropic's envelope. Their messages can carry account ids,
//! ARNs and project ids, so the caller gets `error.type` from the status and a fixed
//! sentence, and the operator log gets the real message. The exceptions are the ones
//! Claude Code's recovery keys on: an Anthropic-envelope 400/413 of a known type keeps its
//! message (`prompt is too long: ...`), and Bedrock's `Input is too long.` and Vertex's
//! request-size 400 become exactly `Input is too long.`.
//!
//! Workload (CRI) callers get stricter hygiene on every provider, the raw Anthropic one
//! included, and for every status ([`for_workload`]): the status and an accurate
//! `error.type` are kept, the message is a `capability_rejected: <class>` token (400/413)
//! or the status's generic sentence, never the upstream's words.

use bytes::Bytes;
use http::StatusCode;
use serde_json::{Value, json};

use super::Answer;

/// Longest upstream message relayed in the exceptions.
const MAX_RELAYED: usize = 1000;

/// The Anthropic `error.type` for a status.
pub fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        501 => "not_supported",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

fn generic(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "the upstream refused the request",
        401 => "upstream authentication failed — check the gateway operator",
        403 => "upstream permission denied — check the gateway operator",
        404 => "the model or endpoint was not found upstream",
        413 => "the request is too large for the upstream",
        429 => "upstream rate limit exceeded",
        501 => "not supported by this upstream",
        529 => "the upstream is overloaded",
        _ => "the upstream failed",
    }
}

/// Whether `message` is one of the size errors Claude Code recovers from as
/// `Input is too long.` (Bedrock's exact sentence, Vertex's request or message size).
fn input_too_long(message: &str) -> bool {
    let m = message.trim();
    m == "Input is too long."
        || ((m.starts_with("The request size") || m.starts_with("The message size"))
            && m.contains("exceeds"))
}

/// What Bedrock's `ValidationException` quotes from the model when Claude Code recovers
/// on it: `The model returned the following errors: prompt is too long: …` (compaction)
/// or `… invalid beta flag` (it retries without the betas). Nothing else is relayed.
fn bedrock_model_error(message: &str) -> Option<&str> {
    let said = message
        .trim()
        .strip_prefix("The model returned the following errors:")?
        .trim();
    (said.starts_with("prompt is too long") || said == "invalid beta flag").then_some(said)
}

/// The caller's message for an upstream error: `upstream` is the provider's message,
/// `anthropic_type` the `error.type` when the body was an Anthropic envelope.
pub fn caller_message(
    status: StatusCode,
    upstream: Option<&str>,
    anthropic_type: Option<&str>,
) -> String {
    let Some(message) = upstream else {
        return generic(status).to_owned();
    };
    if matches!(status.as_u16(), 400 | 413) {
        if input_too_long(message) {
            return "Input is too long.".to_owned();
        }
        if let Some(model_said) = bedrock_model_error(message) {
            return model_said.chars().take(MAX_RELAYED).collect();
        }
        if anthropic_type.is_some_and(|t| t == "invalid_request_error" || t == "request_too_large")
        {
            return message.chars().take(MAX_RELAYED).collect();
        }
        if let Some(class) = crate::workload::capability_reason(message) {
            return format!("capability_rejected: {class}");
        }
    }
    generic(status).to_owned()
}

/// An error answer: the envelope with the status's type and the caller's message; the
/// upstream's own message goes to the operator log only.
pub fn answer(upstream_name: &str, status: StatusCode, upstream_message: Option<&str>) -> Answer {
    answer_with_type(upstream_name, status, upstream_message, None)
}

fn answer_with_type(
    upstream_name: &str,
    status: StatusCode,
    upstream_message: Option<&str>,
    anthropic_type: Option<&str>,
) -> Answer {
    if let Some(m) = upstream_message {
        tracing::warn!(upstream = %upstream_name, status = status.as_u16(), message = %m, "upstream error");
    }
    let kind = anthropic_type
        .filter(|t| t.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        .unwrap_or(error_type(status));
    let message = caller_message(status, upstream_message, anthropic_type);
    envelope(status, kind, &message)
}

/// The error body a workload (CRI) caller gets for an upstream's error answer `body`: the
/// upstream's `error.type` when it has a valid shape (else the status's), and as message
/// the capability class of a 400/413 or the status's generic sentence.
pub fn for_workload(status: StatusCode, body: &[u8]) -> Bytes {
    let parsed: Value = serde_json::from_slice(body).unwrap_or_default();
    let error = if parsed.is_array() {
        &parsed[0]["error"]
    } else {
        &parsed["error"]
    };
    let kind = error["type"]
        .as_str()
        .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        .unwrap_or(error_type(status));
    let message = error["message"]
        .as_str()
        .filter(|_| matches!(status.as_u16(), 400 | 413))
        .and_then(crate::workload::capability_reason)
        .map_or_else(
            || generic(status).to_owned(),
            |r| format!("capability_rejected: {r}"),
        );
    let body = json!({"type": "error", "error": {"type": kind, "message": message}});
    Bytes::from(body.to_string())
}

/// An answer in Anthropic's error envelope that a translation makes itself.
pub fn envelope(status: StatusCode, kind: &str, message: &str) -> Answer {
    let body = json!({"type": "error", "error": {"type": kind, "message": message}});
    Answer::json(status, Bytes::from(body.to_string()))
}

/// Cleans an HTTP provider's error answer (Vertex, Foundry): its body read (bounded) and
/// replaced by [`answer`]'s envelope; success answers pass through.
pub async fn clean(upstream_name: &str, answer: Answer) -> Answer {
    if answer.status.is_success() {
        return answer;
    }
    let status = answer.status;
    let retry_after = answer.headers.get(http::header::RETRY_AFTER).cloned();
    let body = answer.read_limited(64 * 1024).await;
    let parsed: Value = serde_json::from_slice(&body).unwrap_or_default();
    // Anthropic's envelope, Vertex's `[{"error": {...}}]` or Google's `{"error": {...}}`.
    let error = if parsed.is_array() {
        &parsed[0]["error"]
    } else {
        &parsed["error"]
    };
    let message = error["message"]
        .as_str()
        .map(str::to_owned)
        .or_else(|| (!body.is_empty()).then(|| String::from_utf8_lossy(&body).into_owned()));
    let anthropic_type = (parsed["type"] == "error")
        .then(|| error["type"].as_str())
        .flatten();
    let mut out = answer_with_type(upstream_name, status, message.as_deref(), anthropic_type);
    if let Some(v) = retry_after {
        out.headers.insert(http::header::RETRY_AFTER, v);
    }
    out
}

/// The Claude Platform upstreams (on AWS, on Google Cloud) take the workspace from the
/// upstream's config: a top-level `workspace_id` in the caller's body is refused with 400,
/// as the reference does.
pub fn workspace_id_in_body(body: &[u8]) -> Option<Answer> {
    if super::body::present(body, &["workspace_id"]).is_empty() {
        return None;
    }
    Some(envelope(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        "workspace_id: not supported through the gateway",
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn msg(status: u16, m: &str, t: Option<&str>) -> String {
        caller_message(StatusCode::from_u16(status).unwrap(), Some(m), t)
    }

    #[test]
    fn account_details_never_reach_the_caller() {
        let arn = "User: arn:aws:iam::123456789012:role/x is not authorized";
        assert_eq!(
            msg(403, arn, None),
            "upstream permission denied — check the gateway operator"
        );
        assert_eq!(
            msg(404, "project 4711 model not found", None),
            generic(StatusCode::NOT_FOUND)
        );
        assert_eq!(
            msg(429, "Too many tokens, account 1234", None),
            "upstream rate limit exceeded"
        );
    }

    fn workload(status: u16, body: &str) -> Value {
        let out = for_workload(StatusCode::from_u16(status).unwrap(), body.as_bytes());
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn workload_errors_keep_status_type_and_only_a_clean_message() {
        let arn = "arn:aws:bedrock:us-east-1:123456789012:model/x at api.internal.corp";
        for (status, kind) in [
            (400, "invalid_request_error"),
            (404, "not_found_error"),
            (429, "rate_limit_error"),
            (500, "api_error"),
            (529, "overloaded_error"),
        ] {
            let body = json!({"type": "error", "error": {"type": kind, "message": arn}});
            let v = workload(status, &body.to_string());
            assert_eq!(v["error"]["type"], kind, "{status}");
            assert_eq!(
                v["error"]["message"],
                generic(StatusCode::from_u16(status).unwrap()),
                "{status}"
            );
        }
        // Not JSON at all (an HTML error page): the status's type and sentence.
        let v = workload(404, "<html>nginx at 10.1.2.3</html>");
        assert_eq!(v["error"]["type"], "not_found_error");
        assert!(!v.to_string().contains("10.1.2.3"));
        // Only a 400/413 is classified; a 429 saying "too long" is still a rate limit.
        let long = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 5 > 4"}}"#;
        assert_eq!(
            workload(400, long)["error"]["message"],
            "capability_rejected: prompt_too_long"
        );
        assert_eq!(
            workload(429, long)["error"]["message"],
            generic(StatusCode::TOO_MANY_REQUESTS)
        );
    }

    #[test]
    fn bedrock_quoting_the_model_passes_its_recovery_words_only() {
        assert_eq!(
            msg(
                400,
                "The model returned the following errors: prompt is too long: 210000 tokens > 200000 maximum",
                None
            ),
            "prompt is too long: 210000 tokens > 200000 maximum"
        );
        assert_eq!(
            msg(
                400,
                "The model returned the following errors: invalid beta flag",
                None
            ),
            "invalid beta flag"
        );
        assert_eq!(
            msg(
                400,
                "The model returned the following errors: account 123456789012 is odd",
                None
            ),
            "the upstream refused the request"
        );
    }

    #[test]
    fn recovery_sentences_pass_exactly() {
        assert_eq!(msg(400, "Input is too long.", None), "Input is too long.");
        assert_eq!(
            msg(
                400,
                "The request size (30037042 bytes) exceeds 30.000MB limit.",
                None
            ),
            "Input is too long."
        );
        assert_eq!(
            msg(
                400,
                "prompt is too long: 210000 tokens > 200000 maximum",
                Some("invalid_request_error")
            ),
            "prompt is too long: 210000 tokens > 200000 maximum"
        );
        assert_eq!(
            msg(
                400,
                "Invalid `signature` in `thinking` block at arn:aws:x",
                None
            ),
            "capability_rejected: thinking_signature"
        );
        assert_eq!(
            msg(400, "malformed input for account 42", None),
            generic(StatusCode::BAD_REQUEST)
        );
    }
}

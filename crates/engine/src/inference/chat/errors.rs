//! Error answers for the OpenAI front door: an upstream's Anthropic error envelope (relayed,
//! retained after failover, or a workload caller's cleaned copy) rewritten into OpenAI's
//! `{"error": {message, type, param, code}}`, same status and headers (`retry-after`
//! kept). The type mapping is [`crate::error::openai_kind`], shared with the gateway's own
//! errors.

use http::StatusCode;
use serde_json::Value;

/// OpenAI's envelope for an upstream error body (an Anthropic envelope, or anything else).
pub fn translate(status: StatusCode, body: &[u8]) -> Value {
    let v = serde_json::from_slice::<Value>(body).unwrap_or(Value::Null);
    let error = &v["error"];
    let kind = error["type"]
        .as_str()
        .unwrap_or_else(|| fallback_type(status));
    let message = match error["message"].as_str() {
        Some(m) => m.to_owned(),
        None => format!(
            "the upstream answered {}",
            status
                .canonical_reason()
                .map_or_else(|| status.as_str().to_owned(), str::to_owned)
        ),
    };
    crate::error::openai_envelope(status, kind, &message)
}

/// The Anthropic type a bare status stands for.
fn fallback_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

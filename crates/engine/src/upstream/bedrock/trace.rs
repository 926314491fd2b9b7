//! The guardrail trace Bedrock returns with `guardrail_trace`: logged for the operator with
//! the request id and the person (`sub`, email), as the reference does; the caller's
//! answer is not changed.

use serde_json::Value;

use super::super::Caller;

/// Who a traced request was for.
#[derive(Debug, Clone, Default)]
pub struct Who {
    pub request_id: String,
    pub sub: String,
    pub email: Option<String>,
}

impl Who {
    pub fn of(c: &Caller<'_>) -> Self {
        Self {
            request_id: c.request_id.to_owned(),
            sub: c.sub.to_owned(),
            email: c.email.map(str::to_owned),
        }
    }
}

/// Logs the `amazon-bedrock-trace` of a JSON answer or stream chunk, if it has one.
pub fn log_json(upstream: &str, who: &Who, json: &[u8]) {
    let Ok(v) = serde_json::from_slice::<Value>(json) else {
        return;
    };
    if let Some(trace) = v.get("amazon-bedrock-trace") {
        tracing::info!(
            upstream,
            request_id = %who.request_id,
            sub = %who.sub,
            email = who.email.as_deref().unwrap_or_default(),
            trace = %trace,
            action = %v.get("amazon-bedrock-guardrailAction").cloned().unwrap_or_default(),
            "Bedrock guardrail trace"
        );
    }
}

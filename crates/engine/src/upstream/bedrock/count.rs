//! `count_tokens` on Bedrock: CountTokens with an InvokeModel-style body on the
//! foundation-model id (it takes no inference profiles), answered as
//! `{"input_tokens": N}`. The body drops `model`, `stream` and empty `tools`, keeps only the
//! betas the capability table lists for counting, and sets `max_tokens` just above any
//! thinking budget (else 1). An application inference profile or any failure answers
//! `501 not_supported`, as the reference does, so Claude Code falls back (or the router
//! asks the next upstream that can count). After a failure, counts of that model skip
//! Bedrock for [`SKIP_AFTER_FAILURE`] ([`Skips`], on the injected clock), as the reference
//! does: a missing `bedrock:CountTokens` permission would otherwise cost a round trip on
//! every count.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_bedrockruntime::primitives::Blob;
use aws_sdk_bedrockruntime::types::{CountTokensInput, InvokeModelTokensRequest};
use bytes::Bytes;
use http::{HeaderValue, StatusCode};
use serde_json::{Value, json};

use super::super::{Answer, Call, SendError, capabilities, errors};
use super::{Bedrock, VERSION};
use crate::deps::Clock;

/// How long counts of a model skip Bedrock after CountTokens failed for it.
pub const SKIP_AFTER_FAILURE: Duration = Duration::from_secs(600);

/// Models whose CountTokens failed lately, with when they may be tried again.
pub struct Skips {
    clock: Arc<dyn Clock>,
    until: Mutex<HashMap<String, chrono::DateTime<chrono::Utc>>>,
}

impl Skips {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            until: Mutex::new(HashMap::new()),
        }
    }

    /// Seconds left before `model` is counted on Bedrock again, if it is skipped now.
    pub fn skipping(&self, model: &str) -> Option<i64> {
        let now = self.clock.now();
        let mut until = self.until.lock().unwrap_or_else(|p| p.into_inner());
        match until.get(model) {
            Some(at) if *at > now => Some((*at - now).num_seconds().max(1)),
            Some(_) => {
                until.remove(model);
                None
            }
            None => None,
        }
    }

    pub fn failed(&self, model: &str) {
        let at = self.clock.now() + SKIP_AFTER_FAILURE;
        let mut until = self.until.lock().unwrap_or_else(|p| p.into_inner());
        until.insert(model.to_owned(), at);
    }
}

/// `us.anthropic.claude-...` -> `anthropic.claude-...`; `None` for an ARN (a profile).
pub fn foundation_id(model: &str) -> Option<String> {
    if model.starts_with("arn:") {
        return None;
    }
    match model.split_once('.') {
        Some((geo, rest)) if rest.starts_with("anthropic.") && !geo.contains(':') => {
            Some(rest.to_owned())
        }
        _ => Some(model.to_owned()),
    }
}

/// The InvokeModel body CountTokens takes.
pub fn count_body(call_body: &[u8], betas: &[String]) -> Result<Vec<u8>, String> {
    let mut v: Value = serde_json::from_slice(call_body).map_err(|e| e.to_string())?;
    let obj = v
        .as_object_mut()
        .ok_or("request body must be a JSON object")?;
    for k in ["model", "stream", "tags", "anthropic_beta"] {
        obj.remove(k);
    }
    if obj
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
    {
        obj.remove("tools");
    }
    let budget = obj
        .get("thinking")
        .and_then(|t| t.get("budget_tokens"))
        .and_then(Value::as_u64);
    obj.insert("max_tokens".into(), json!(budget.map_or(1, |b| b + 1)));
    obj.insert("anthropic_version".into(), json!(VERSION));
    let kept: Vec<&String> = match capabilities::table() {
        Some(t) => betas
            .iter()
            .filter(|b| t.count_tokens.bedrock_betas_kept.contains(b))
            .collect(),
        None => Vec::new(),
    };
    if !kept.is_empty() {
        obj.insert("anthropic_beta".into(), json!(kept));
    }
    serde_json::to_vec(&v).map_err(|e| e.to_string())
}

fn not_supported(why: &str) -> Answer {
    let message = format!("count_tokens is not supported by this upstream: {why}");
    let mut a = errors::envelope(StatusCode::NOT_IMPLEMENTED, "not_supported", &message);
    a.headers
        .insert("x-should-retry", HeaderValue::from_static("false"));
    a
}

pub async fn count(bedrock: &Bedrock, call: Call<'_>) -> Result<Answer, SendError> {
    let Some(model) = foundation_id(call.model) else {
        return Ok(not_supported(
            "an application inference profile cannot be counted",
        ));
    };
    if let Some(left) = bedrock.count_skips.skipping(&model) {
        tracing::debug!(upstream = %bedrock.name, model = %model, seconds_left = left,
            "Bedrock CountTokens skipped: it failed for this model lately");
        return Ok(not_supported(
            "Bedrock could not count this model lately (tried again after 10 minutes)",
        ));
    }
    let betas = capabilities::betas(call.headers);
    let body = count_body(&call.body, &betas).map_err(SendError::Build)?;
    let request = InvokeModelTokensRequest::builder()
        .body(Blob::new(body))
        .build()
        .map_err(|e| SendError::Build(e.to_string()))?;
    let sent = bedrock
        .clients
        .current()
        .client
        .count_tokens()
        .model_id(&model)
        .input(CountTokensInput::InvokeModel(request))
        .send()
        .await;
    match sent {
        Ok(out) => {
            let body = json!({"input_tokens": out.input_tokens()});
            Ok(Answer::json(StatusCode::OK, Bytes::from(body.to_string())))
        }
        Err(e) => {
            tracing::warn!(upstream = %bedrock.name, model = %model,
                error = %aws_sdk_bedrockruntime::error::DisplayErrorContext(&e),
                "Bedrock CountTokens failed (missing bedrock:CountTokens, a model it cannot count, or a proxy without /count-tokens); counts of this model skip this upstream for 10 minutes");
            bedrock.count_skips.failed(&model);
            Ok(not_supported("Bedrock could not count this request"))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn foundation_ids_drop_the_profile_prefix() {
        assert_eq!(
            foundation_id("us.anthropic.claude-opus-4-8").as_deref(),
            Some("anthropic.claude-opus-4-8")
        );
        assert_eq!(
            foundation_id("anthropic.claude-sonnet-4-20250514-v1:0").as_deref(),
            Some("anthropic.claude-sonnet-4-20250514-v1:0")
        );
        assert_eq!(
            foundation_id("arn:aws:bedrock:us-east-1:1:application-inference-profile/x"),
            None
        );
    }

    struct At(Mutex<chrono::DateTime<chrono::Utc>>);
    impl Clock for At {
        fn now(&self) -> chrono::DateTime<chrono::Utc> {
            *self.0.lock().unwrap()
        }
    }

    #[test]
    fn a_failed_model_is_skipped_for_ten_minutes_on_the_clock() {
        let clock = Arc::new(At(Mutex::new(chrono::Utc::now())));
        let skips = Skips::new(clock.clone());
        assert_eq!(skips.skipping("anthropic.m"), None);
        skips.failed("anthropic.m");
        assert_eq!(skips.skipping("anthropic.m"), Some(600));
        assert_eq!(skips.skipping("anthropic.other"), None, "per model");
        *clock.0.lock().unwrap() += chrono::Duration::seconds(599);
        assert_eq!(skips.skipping("anthropic.m"), Some(1));
        *clock.0.lock().unwrap() += chrono::Duration::seconds(1);
        assert_eq!(skips.skipping("anthropic.m"), None);
    }

    #[test]
    fn count_bodies_are_invoke_bodies() {
        let betas = vec![
            "claude-code-20250219".to_owned(),
            "interleaved-thinking-2025-05-14".to_owned(),
        ];
        let out = count_body(
            br#"{"model":"m","stream":true,"tools":[],"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}],"max_tokens":9000}"#,
            &betas,
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["max_tokens"], 1025);
        assert_eq!(v["anthropic_version"], VERSION);
        assert_eq!(v["anthropic_beta"], json!(["claude-code-20250219"]));
        for gone in ["model", "stream", "tools"] {
            assert!(v.get(gone).is_none(), "{gone}");
        }
    }
}

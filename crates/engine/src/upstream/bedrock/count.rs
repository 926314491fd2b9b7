//! `count_tokens` on Bedrock: CountTokens with an InvokeModel-style body on the
//! foundation-model id (it takes no inference profiles), answered as
//! `{"input_tokens": N}`. The body drops `model`, `stream` and empty `tools`, keeps only the
//! betas the capability table lists for counting, and sets `max_tokens` just above any
//! thinking budget (else 1). An application inference profile or any failure answers
//! `501 not_supported`, as the reference does, so Claude Code falls back.

use aws_sdk_bedrockruntime::primitives::Blob;
use aws_sdk_bedrockruntime::types::{CountTokensInput, InvokeModelTokensRequest};
use bytes::Bytes;
use http::{HeaderValue, StatusCode};
use serde_json::{Value, json};

use super::super::{Answer, Call, SendError, capabilities, errors};
use super::{Bedrock, VERSION};

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
                "Bedrock CountTokens failed (missing bedrock:CountTokens, a model it cannot count, or a proxy without /count-tokens)");
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

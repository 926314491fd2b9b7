//! The request body, read once: validated as a JSON object, with the few fields the gateway
//! needs (`model`, `stream`, `max_tokens`) taken out without re-serialising the rest.
//!
//! Top-level values are kept as raw JSON slices, so rewriting `model` for an upstream that
//! names it differently copies the other fields byte for byte, in their order.

use std::borrow::Cow;

use bytes::Bytes;
use indexmap::IndexMap;
use serde_json::value::RawValue;

use crate::error::ApiError;

/// What the gateway reads from a Messages request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub model: String,
    pub stream: bool,
    pub max_tokens: Option<u64>,
}

type TopLevel<'a> = IndexMap<Cow<'a, str>, &'a RawValue>;

fn top_level(bytes: &[u8]) -> Result<TopLevel<'_>, ApiError> {
    serde_json::from_slice::<TopLevel<'_>>(bytes).map_err(|e| {
        if e.is_data() {
            ApiError::InvalidRequest("request body must be a JSON object".into())
        } else {
            ApiError::InvalidRequest(format!("request body is not valid JSON: {e}"))
        }
    })
}

pub fn parse_head(bytes: &[u8]) -> Result<Head, ApiError> {
    let top = top_level(bytes)?;
    let model = match top.get("model") {
        None => return Err(ApiError::InvalidRequest("model: field required".into())),
        Some(raw) => serde_json::from_str::<String>(raw.get())
            .map_err(|_| ApiError::InvalidRequest("model: must be a string".into()))?,
    };
    if model.trim().is_empty() {
        return Err(ApiError::InvalidRequest("model: must not be empty".into()));
    }
    let stream = match top.get("stream") {
        None => false,
        Some(raw) => serde_json::from_str::<Option<bool>>(raw.get())
            .map_err(|_| ApiError::InvalidRequest("stream: must be a boolean".into()))?
            .unwrap_or(false),
    };
    let max_tokens = match top.get("max_tokens") {
        None => None,
        Some(raw) => Some(serde_json::from_str::<u64>(raw.get()).map_err(|_| {
            ApiError::InvalidRequest("max_tokens: must be a non-negative integer".into())
        })?),
    };
    Ok(Head {
        model,
        stream,
        max_tokens,
    })
}

/// The same body with `model` replaced, everything else byte for byte.
pub fn with_model(bytes: &[u8], model: &str) -> Result<Bytes, ApiError> {
    let model_json = serde_json::to_string(model).map_err(|_| ApiError::Internal)?;
    crate::upstream::body::edit(bytes, &[], &[("model", model_json)])
        .map_err(|_| ApiError::InvalidRequest("request body must be a JSON object".into()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn head_fields() {
        let h = parse_head(
            br#"{"model":"claude-sonnet-4-6","max_tokens":10,"stream":true,"messages":[]}"#,
        )
        .unwrap();
        assert_eq!(
            h,
            Head {
                model: "claude-sonnet-4-6".into(),
                stream: true,
                max_tokens: Some(10)
            }
        );
        let h = parse_head(br#"{"model":"m","stream":null}"#).unwrap();
        assert!(!h.stream);
    }

    #[test]
    fn bad_bodies_are_400_with_a_reason() {
        for (body, needle) in [
            (&b"{"[..], "not valid JSON"),
            (b"[1]", "JSON object"),
            (b"{}", "model: field required"),
            (br#"{"model":5}"#, "model: must be a string"),
            (br#"{"model":"m","stream":"yes"}"#, "stream"),
            (br#"{"model":"m","max_tokens":-1}"#, "max_tokens"),
            (b"", "not valid JSON"),
            (br#"{"model":"m"} trailing"#, "not valid JSON"),
        ] {
            let e = parse_head(body).unwrap_err();
            assert_eq!(e.outcome().0.as_u16(), 400);
            assert!(e.to_string().contains(needle), "{e}");
        }
    }

    #[test]
    fn model_rewrite_keeps_everything_else_verbatim() {
        let body = br#"{"model":"claude-sonnet-4-6","messages":[{"role":"user","content":"hi \u00e9"}],"z":1.50,"a":{"b":[1,2]}}"#;
        let out = with_model(body, "corp/sonnet").unwrap();
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"model":"corp/sonnet","messages":[{"role":"user","content":"hi \u00e9"}],"z":1.50,"a":{"b":[1,2]}}"#
        );
    }
}

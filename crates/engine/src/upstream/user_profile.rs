//! `user_profile_id` in a Messages body (2.1.336): every provider but the raw Anthropic
//! pass-through speaks through a library that takes the field out of the body and sends it
//! as the `anthropic-user-profile-id` header, as Anthropic's SDKs do (`null` sends no
//! header). A value a header cannot hold is refused before any upstream is called, as the
//! reference refuses it: 400 `invalid_request_error`, `user_profile_id: must be text that a
//! header can hold`. "Text a header can hold" is the reference's `[\t\x20-\x7e\x80-\xff]*`
//! over the string's UTF-16 code units: a tab, printable ASCII or a Latin-1 character, each
//! sent as one byte (a fetch `ByteString`); anything else, or a value that is not a string,
//! is refused.
//!
//! [`UserProfile`] wraps a provider's link; an OpenAI-compatible upstream (not a
//! reference provider) gets the same check and loses the field, but no header.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use http::{HeaderName, HeaderValue, StatusCode};
use serde_json::Value;

use super::{Answer, Call, SendError, Upstream, body, errors};

/// The body field.
pub const FIELD: &str = "user_profile_id";
/// The header the field moves to.
pub const HEADER: &str = "anthropic-user-profile-id";
/// The refusal's message, as the reference words it.
pub const REFUSAL: &str = "user_profile_id: must be text that a header can hold";

/// What a body's `user_profile_id` becomes.
pub enum Moved {
    /// No such field: the body goes as it is.
    Absent,
    /// The body without the field, and the header's value (`None` for `null`).
    Header(Bytes, Option<HeaderValue>),
}

/// A `user_profile_id` that is not text a header can hold.
#[derive(Debug, PartialEq, Eq)]
pub struct NotHeaderText;

/// The reference's answer to a [`NotHeaderText`].
pub fn refusal() -> Answer {
    errors::envelope(StatusCode::BAD_REQUEST, "invalid_request_error", REFUSAL)
}

/// Takes `user_profile_id` out of `bytes`.
pub fn take(bytes: &[u8]) -> Result<Moved, NotHeaderText> {
    let Some(raw) = body::raw(bytes, FIELD) else {
        return Ok(Moved::Absent);
    };
    let value = match serde_json::from_str::<Value>(&raw) {
        Ok(Value::Null) => None,
        Ok(Value::String(s)) => Some(header_value(&s).ok_or(NotHeaderText)?),
        _ => return Err(NotHeaderText),
    };
    let edited = body::edit(bytes, &[FIELD], &[]).map_err(|_| NotHeaderText)?;
    Ok(Moved::Header(edited, value))
}

/// The header value of `text` (each character one byte), if every character is a tab,
/// printable ASCII or Latin-1.
fn header_value(text: &str) -> Option<HeaderValue> {
    let bytes = text
        .chars()
        .map(|c| match c {
            '\t' | ' '..='~' | '\u{80}'..='\u{ff}' => u8::try_from(u32::from(c)).ok(),
            _ => None,
        })
        .collect::<Option<Vec<u8>>>()?;
    HeaderValue::from_bytes(&bytes).ok()
}

/// A provider's link with `user_profile_id` moved (or, `header: false`, only taken out).
pub struct UserProfile {
    inner: Arc<dyn Upstream>,
    header: bool,
}

impl UserProfile {
    pub fn new(inner: Arc<dyn Upstream>, header: bool) -> Self {
        Self { inner, header }
    }
}

#[async_trait]
impl Upstream for UserProfile {
    async fn send(&self, call: Call<'_>) -> Result<Answer, SendError> {
        let (body, value) = match take(&call.body) {
            Err(NotHeaderText) => return Ok(refusal()),
            Ok(Moved::Absent) => return self.inner.send(call).await,
            Ok(Moved::Header(body, value)) => (body, value),
        };
        // After the upstream's configured headers, as the SDKs' per-request headers win
        // over a client's default ones.
        let mut extra = call.extra_headers.to_vec();
        if let Some(v) = value.filter(|_| self.header) {
            extra.retain(|(n, _)| n != HEADER);
            extra.push((HeaderName::from_static(HEADER), v));
        }
        self.inner
            .send(Call {
                body,
                extra_headers: &extra,
                ..call
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    fn moved(body: &str) -> (String, Option<Vec<u8>>) {
        match take(body.as_bytes()) {
            Ok(Moved::Header(b, v)) => (
                String::from_utf8(b.to_vec()).unwrap(),
                v.map(|v| v.as_bytes().to_vec()),
            ),
            Ok(Moved::Absent) => panic!("absent: {body}"),
            Err(NotHeaderText) => panic!("refused: {body}"),
        }
    }

    #[test]
    fn the_field_moves_to_the_header_byte_for_byte() {
        let (body, header) = moved(r#"{"model":"m","user_profile_id":"up_1","max_tokens":1}"#);
        assert_eq!(body, r#"{"model":"m","max_tokens":1}"#);
        assert_eq!(header.unwrap(), b"up_1");
        // Latin-1 characters go as one byte each; a tab is kept.
        let (_, header) = moved("{\"user_profile_id\":\"caf\u{e9}\\tx\"}");
        assert_eq!(header.unwrap(), b"caf\xe9\tx");
        let (body, header) = moved(r#"{"user_profile_id":null,"a":1}"#);
        assert_eq!((body.as_str(), header), (r#"{"a":1}"#, None));
        let (_, header) = moved(r#"{"user_profile_id":""}"#);
        assert_eq!(header.unwrap(), b"");
        assert!(matches!(take(br#"{"model":"m"}"#), Ok(Moved::Absent)));
    }

    #[test]
    fn what_a_header_cannot_hold_is_refused() {
        for bad in [
            r#""a\nb""#,
            r#""a\rb""#,
            r#""\u0000""#,
            r#""\u007f""#,
            r#""\u0100""#,
            "\"\u{1F600}\"",
            "\"\u{2028}\"",
            "42",
            "true",
            r#"["up_1"]"#,
            r#"{"id":"up_1"}"#,
        ] {
            let body = format!(r#"{{"model":"m","user_profile_id":{bad}}}"#);
            assert!(
                matches!(take(body.as_bytes()), Err(NotHeaderText)),
                "accepted {bad}"
            );
        }
        let answer = refusal();
        assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    }
}

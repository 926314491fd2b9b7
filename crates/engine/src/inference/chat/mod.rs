//! The OpenAI-compatible front door: `POST /v1/chat/completions`, translated once at the
//! edge so it takes the same steps as `/v1/messages` (admission, webhook, model policy,
//! spend reservation, routing with failover, metering) and every upstream kind serves it.
//!
//! ```text
//! OpenAI body --request::translate--> Messages body --(the inference steps)--> Answer
//!   Answer (metered as Anthropic) --respond--> chat.completion | chunk stream | OpenAI error
//! ```
//!
//! [`request`] and [`messages`] translate the request, [`response`] a JSON answer,
//! [`stream`] an SSE answer, [`errors`] an upstream error body; the gateway's own errors
//! take OpenAI's envelope in [`crate::error::ApiError::into_openai_response`].

pub mod errors;
pub mod messages;
pub mod request;
pub mod response;
pub mod stream;

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};

use crate::error::ApiError;
pub use response::Context;

/// The route of the front door.
pub const PATH: &str = "/v1/chat/completions";

/// The most of an upstream error body read to translate it.
const ERROR_LIMIT: usize = 64 * 1024;
/// The most of a non-streaming answer read to translate it.
const JSON_LIMIT: usize = 32 * 1024 * 1024;

/// A 400 in the front door's words.
fn bad(message: impl Into<String>) -> ApiError {
    ApiError::InvalidRequest(message.into())
}

/// The request translated: a Messages body and what the answer's translation needs.
pub fn request(bytes: &[u8], created: i64) -> Result<(Bytes, Context), ApiError> {
    let t = request::translate(bytes)?;
    let body = serde_json::to_vec(&t.body).map_err(|_| ApiError::Internal)?;
    let ctx = Context {
        model: t.model,
        created,
        include_usage: t.stream && t.include_usage,
    };
    Ok((Bytes::from(body), ctx))
}

/// The caller's answer in OpenAI's shape: the relayed (metered) answer translated.
pub async fn respond(resp: Response<Body>, ctx: Context) -> Response<Body> {
    let (mut parts, body) = resp.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    let sse = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/event-stream"));
    if parts.status.is_success() && sse {
        let stream = stream::translate(body.into_data_stream(), ctx);
        return Response::from_parts(parts, Body::from_stream(stream));
    }
    let json = |mut parts: http::response::Parts, v: serde_json::Value| {
        parts.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        Response::from_parts(parts, Body::from(v.to_string()))
    };
    if !parts.status.is_success() {
        let bytes = read(body, ERROR_LIMIT).await.unwrap_or_default();
        let v = errors::translate(parts.status, &bytes);
        return json(parts, v);
    }
    let message = read(body, JSON_LIMIT)
        .await
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
    match message {
        Some(m) => json(parts, response::completion(&m, &ctx)),
        None => {
            parts.status = StatusCode::BAD_GATEWAY;
            let message = "the upstream's answer could not be read as a Messages response";
            let v = crate::error::openai_envelope(StatusCode::BAD_GATEWAY, "api_error", message);
            json(parts, v)
        }
    }
}

/// A body read whole, up to `limit` bytes (`None` past it or when it breaks).
async fn read(body: Body, limit: usize) -> Option<Bytes> {
    Limited::new(body, limit)
        .collect()
        .await
        .ok()
        .map(http_body_util::Collected::to_bytes)
}

#[cfg(test)]
mod tests;

//! Gateway errors and the one place they become HTTP responses.
//!
//! Each module returns its own error type; they convert into [`ApiError`], whose
//! [`ApiError::into_response`] maps every case to a status, an Anthropic error type and
//! `x-should-retry`: the Anthropic error envelope is built here and nowhere else (the admin
//! API adds its `request_id` through [`ApiError::into_response_for`]). Upstream error bodies
//! never pass through here: they are relayed as they came (Claude Code's recovery matches
//! their wording).

use axum::body::Body;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use serde_json::json;

/// A request the gateway answers itself with an error.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("request target longer than {limit} bytes")]
    UriTooLong { limit: usize },
    #[error("request headers larger than {limit} bytes")]
    HeadersTooLarge { limit: usize },
    #[error("Transfer-Encoding without Content-Length is not accepted; send Content-Length")]
    LengthRequired,
    #[error("{0}")]
    PayloadTooLarge(String),
    /// The request body stopped arriving (see `edge::listener`): 408.
    #[error("the request body arrived too slowly; the gateway stopped waiting for it")]
    BodyTimeout,
    #[error("{0}")]
    InvalidRequest(String),
    /// The policy webhook blocked the request (or could not be asked, failing closed).
    #[error("{0}")]
    PolicyBlocked(String),
    #[error("{message}")]
    Unauthenticated {
        message: &'static str,
        /// Stable reason for events (`missing`, `unknown_key`, ...).
        reason: &'static str,
    },
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("method {0} is not allowed on this path")]
    MethodNotAllowed(String),
    #[error("{0}")]
    UpstreamUnavailable(String),
    #[error("all upstreams failed ({attempted} attempted)")]
    AllUpstreamsFailed { attempted: usize },
    #[error("upstream did not answer within {0} ms")]
    UpstreamTimeout(u64),
    #[error("{0}")]
    ServiceUnavailable(String),
    #[error("{message}")]
    RetryLater {
        message: &'static str,
        retry_after_secs: u64,
    },
    /// A spend cap refused the request, or caps cannot be read and the gateway fails
    /// closed: 429 `billing_error` with `retry-after` and the unified rate-limit headers
    /// Claude Code reads (built by `spend::headers`).
    #[error("{message}")]
    SpendLimited {
        message: String,
        headers: Box<HeaderMap>,
        /// `error.details.error_code` (`spend_limit_reached` when the person's own cap
        /// blocked the request).
        code: Option<&'static str>,
    },
    /// An inference traffic limit (`rate_limits.inference`) refused the request: 429
    /// `rate_limit_error` with `retry-after` (at most 60 s) and the unified rate-limit
    /// headers (built by `limits::refusal`).
    #[error("{message}")]
    RateLimited {
        message: String,
        headers: Box<HeaderMap>,
    },
    /// An `Idempotency-Key` already used for another request body: 422.
    #[error("{0}")]
    Unprocessable(String),
    /// An `Idempotency-Key` whose first request is still running (or whose answer was
    /// not kept): 409.
    #[error("{0}")]
    Conflict(String),
    #[error("internal error")]
    Internal,
}

impl ApiError {
    /// Status, Anthropic `error.type`, and whether the client may retry.
    pub fn outcome(&self) -> (StatusCode, &'static str, Option<bool>) {
        use ApiError::*;
        match self {
            UriTooLong { .. } => (
                StatusCode::URI_TOO_LONG,
                "invalid_request_error",
                Some(false),
            ),
            HeadersTooLarge { .. } => (
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "invalid_request_error",
                Some(false),
            ),
            LengthRequired => (
                StatusCode::LENGTH_REQUIRED,
                "invalid_request_error",
                Some(false),
            ),
            PayloadTooLarge(_) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "request_too_large",
                Some(false),
            ),
            BodyTimeout => (StatusCode::REQUEST_TIMEOUT, "timeout_error", None),
            PolicyBlocked(_) => (StatusCode::BAD_REQUEST, "policy_blocked", Some(false)),
            InvalidRequest(_) => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                Some(false),
            ),
            Unauthenticated { .. } => (
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                Some(false),
            ),
            Forbidden(_) => (StatusCode::FORBIDDEN, "permission_error", Some(false)),
            NotFound(_) => (StatusCode::NOT_FOUND, "not_found_error", Some(false)),
            MethodNotAllowed(_) => (
                StatusCode::METHOD_NOT_ALLOWED,
                "invalid_request_error",
                Some(false),
            ),
            UpstreamUnavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "api_error", Some(false)),
            AllUpstreamsFailed { .. } => (StatusCode::BAD_GATEWAY, "api_error", None),
            UpstreamTimeout(_) => (StatusCode::GATEWAY_TIMEOUT, "api_error", None),
            ServiceUnavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "api_error", None),
            RetryLater { .. } => (StatusCode::SERVICE_UNAVAILABLE, "api_error", Some(true)),
            SpendLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "billing_error", Some(false)),
            RateLimited { .. } => (
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                Some(true),
            ),
            Unprocessable(_) => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_request_error",
                Some(false),
            ),
            Conflict(_) => (StatusCode::CONFLICT, "invalid_request_error", Some(true)),
            Internal => (StatusCode::INTERNAL_SERVER_ERROR, "api_error", None),
        }
    }

    /// The Anthropic error envelope with status and retry hint.
    pub fn into_response(self) -> Response<Body> {
        self.render(None)
    }

    /// The same answer in OpenAI's envelope (`{"error": {message, type, param, code}}`), for
    /// the OpenAI-compatible front door: same status and headers, the type and code mapped
    /// by [`openai_kind`].
    pub fn into_openai_response(self) -> Response<Body> {
        let (status, kind, _) = self.outcome();
        let message = self.to_string();
        let mut resp = self.render(None);
        let body = openai_envelope(status, kind, &message);
        resp.headers_mut().remove(header::CONTENT_LENGTH);
        *resp.body_mut() = Body::from(body.to_string());
        resp
    }

    /// The envelope as the admin API answers: `request_id` in the body and a `request-id`
    /// header, as Anthropic's Admin API does.
    pub fn into_response_for(self, request_id: &str) -> Response<Body> {
        self.render(Some(request_id))
    }

    fn render(self, request_id: Option<&str>) -> Response<Body> {
        let (status, kind, retry) = self.outcome();
        let mut body =
            json!({"type": "error", "error": {"type": kind, "message": self.to_string()}});
        if let ApiError::SpendLimited {
            code: Some(code), ..
        } = &self
        {
            body["error"]["details"] = json!({"error_code": code});
        }
        if let Some(id) = request_id {
            body["request_id"] = id.into();
        }
        let mut resp = Response::new(Body::from(body.to_string()));
        *resp.status_mut() = status;
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(retry) = retry {
            h.insert(
                "x-should-retry",
                HeaderValue::from_static(if retry { "true" } else { "false" }),
            );
        }
        if let Some(v) = request_id.and_then(|id| HeaderValue::from_str(id).ok()) {
            h.insert("request-id", v);
        }
        match self {
            ApiError::RetryLater {
                retry_after_secs, ..
            } => {
                h.insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
            }
            ApiError::SpendLimited { headers, .. } | ApiError::RateLimited { headers, .. } => {
                h.extend(*headers)
            }
            _ => {}
        }
        resp
    }
}

/// OpenAI's `error.type` and `error.code` for an Anthropic `error.type` (the one mapping,
/// for the gateway's own errors and for upstream errors relayed to the OpenAI front door).
/// OpenAI clients pick their exception by status; these keep the body's words close to
/// what OpenAI itself sends for the same case.
pub fn openai_kind(
    anthropic_type: &str,
    status: StatusCode,
) -> (&'static str, Option<&'static str>) {
    match anthropic_type {
        "invalid_request_error" => ("invalid_request_error", None),
        "authentication_error" => ("authentication_error", Some("invalid_api_key")),
        "permission_error" => ("permission_error", Some("permission_denied")),
        "not_found_error" => ("invalid_request_error", Some("not_found")),
        "request_too_large" => ("invalid_request_error", Some("request_too_large")),
        "rate_limit_error" => ("rate_limit_error", Some("rate_limit_exceeded")),
        "billing_error" => ("insufficient_quota", Some("insufficient_quota")),
        "timeout_error" => ("timeout_error", None),
        "overloaded_error" => ("server_error", Some("overloaded")),
        "api_error" => ("server_error", None),
        _ if status.is_client_error() => ("invalid_request_error", None),
        _ => ("server_error", None),
    }
}

/// OpenAI's error envelope for a status, an Anthropic error type and a message.
pub fn openai_envelope(
    status: StatusCode,
    anthropic_type: &str,
    message: &str,
) -> serde_json::Value {
    let (kind, code) = openai_kind(anthropic_type, status);
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn every_variant_has_an_error_envelope_status() {
        let cases = [
            (ApiError::UriTooLong { limit: 1 }, 414),
            (ApiError::HeadersTooLarge { limit: 1 }, 431),
            (ApiError::LengthRequired, 411),
            (ApiError::PayloadTooLarge("x".into()), 413),
            (ApiError::InvalidRequest("x".into()), 400),
            (ApiError::PolicyBlocked("x".into()), 400),
            (
                ApiError::Unauthenticated {
                    message: "m",
                    reason: "r",
                },
                401,
            ),
            (ApiError::Forbidden("x".into()), 403),
            (ApiError::NotFound("x".into()), 404),
            (ApiError::MethodNotAllowed("GET".into()), 405),
            (ApiError::UpstreamUnavailable("x".into()), 503),
            (ApiError::AllUpstreamsFailed { attempted: 2 }, 502),
            (ApiError::UpstreamTimeout(5), 504),
            (ApiError::ServiceUnavailable("x".into()), 503),
            (
                ApiError::RetryLater {
                    message: "m",
                    retry_after_secs: 30,
                },
                503,
            ),
            (
                ApiError::SpendLimited {
                    message: "m".into(),
                    headers: Box::default(),
                    code: None,
                },
                429,
            ),
            (
                ApiError::RateLimited {
                    message: "m".into(),
                    headers: Box::default(),
                },
                429,
            ),
            (ApiError::Unprocessable("x".into()), 422),
            (ApiError::Conflict("x".into()), 409),
            (ApiError::Internal, 500),
        ];
        for (err, status) in cases {
            assert_eq!(err.into_response().status().as_u16(), status);
        }
    }

    #[tokio::test]
    async fn openai_envelope_keeps_status_and_headers() {
        use http_body_util::BodyExt;
        let r = ApiError::RetryLater {
            message: "busy",
            retry_after_secs: 7,
        }
        .into_openai_response();
        assert_eq!(r.status(), 503);
        assert_eq!(r.headers()["retry-after"], "7");
        let body = r.into_body().collect().await.unwrap().to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            v,
            json!({"error": {"message": "busy", "type": "server_error", "param": null, "code": null}})
        );
        let r = ApiError::Unauthenticated {
            message: "m",
            reason: "r",
        }
        .into_openai_response();
        assert_eq!(r.status(), 401);
        let body = r.into_body().collect().await.unwrap().to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["error"]["code"], "invalid_api_key");
    }

    #[test]
    fn admin_errors_carry_the_request_id() {
        let r = ApiError::NotFound("no spend limit with that id".into()).into_response_for("req_1");
        assert_eq!(r.headers()["request-id"], "req_1");
        assert_eq!(r.headers()["x-should-retry"], "false");
    }
}

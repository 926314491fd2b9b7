//! `POST /v1/metrics|logs|traces`: accept a signed-in client's OTLP/HTTP payload, hand it
//! to the relay and answer 200 at once, whether it is forwarded, dropped or discarded (a
//! 404 or an error would make Claude Code's exporter complain on every flush).

use axum::body::Body;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};

use super::Signal;
use crate::auth::Principal;
use crate::error::ApiError;
use crate::gateway::Gateway;

pub async fn ingest(
    gw: &Gateway,
    principal: &Principal,
    signal: Signal,
    req: Request<Body>,
) -> Result<Response<Body>, ApiError> {
    if !matches!(principal, Principal::Session { .. }) {
        return Err(ApiError::Forbidden(
            "telemetry is accepted from people signed in to this gateway".into(),
        ));
    }
    let (parts, body) = req.into_parts();
    let limit = usize::try_from(gw.config.limits.max_request_bytes).unwrap_or(usize::MAX);
    let bytes = Limited::new(body, limit)
        .collect()
        .await
        .map_err(|e| {
            if crate::edge::listener::is_body_timeout(e.as_ref()) {
                ApiError::BodyTimeout
            } else {
                ApiError::PayloadTooLarge(format!("telemetry payload over {limit} bytes"))
            }
        })?
        .to_bytes();
    let content_type = parts.headers.get(header::CONTENT_TYPE).cloned();
    let json = content_type
        .as_ref()
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    gw.relay.submit(
        signal,
        content_type,
        parts.headers.get(header::CONTENT_ENCODING).cloned(),
        bytes,
    );
    // An empty Export*ServiceResponse: `{}` in JSON, zero bytes in protobuf.
    let (ct, body) = if json {
        ("application/json", Body::from("{}"))
    } else {
        ("application/x-protobuf", Body::empty())
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    Ok(resp)
}

//! Inference: `POST /v1/messages` and `/v1/messages/count_tokens`.
//!
//! Read the body (bounded), check it is a JSON object naming a model, resolve the model to
//! upstream legs, route with failover, and relay the answer as it arrives while the meter
//! reads usage on the side.

pub mod body;

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use futures_util::StreamExt;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use serde_json::Value;

use crate::auth::Principal;
use crate::dashboard::blocks::{Layer, blocked, spend_refused};
use crate::error::ApiError;
use crate::events::Event;
use crate::metering::{BodyFormat, Meter, MeteredStream, RequestFacts, RouteFacts};
use crate::server::Gateway;
use crate::upstream::headers;
use crate::upstream::router::{self, Leg, Routed};

/// Which inference endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Messages,
    CountTokens,
}

impl Endpoint {
    fn upstream_path(self) -> &'static str {
        match self {
            Endpoint::Messages => "v1/messages",
            Endpoint::CountTokens => "v1/messages/count_tokens",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Endpoint::Messages => "messages",
            Endpoint::CountTokens => "count_tokens",
        }
    }
}

pub async fn handle(
    gw: &Arc<Gateway>,
    request_id: &str,
    principal: &Principal,
    endpoint: Endpoint,
    req: Request<Body>,
) -> Result<Response<Body>, ApiError> {
    let started = Instant::now();
    if gw.local.paused() {
        gw.deps.emit(
            Event::new("access.denied")
                .with("request_id", request_id)
                .with("principal", principal.label())
                .with("reason", "paused")
                .with("layer", "paused"),
        );
        return Err(blocked(
            gw,
            request_id,
            Layer::Paused,
            None,
            ApiError::UpstreamUnavailable(
                "Gatehouse is paused; resume it from the tray menu".into(),
            ),
        ));
    }
    let (parts, body) = req.into_parts();
    let limit = usize::try_from(gw.config.limits.max_request_bytes).unwrap_or(usize::MAX);
    let bytes = match Limited::new(body, limit).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return Err(ApiError::PayloadTooLarge(format!(
                "request body exceeds the limit of {limit} bytes"
            )));
        }
        Err(_) => {
            return Err(ApiError::InvalidRequest(
                "the request body could not be read".into(),
            ));
        }
    };
    let head = body::parse_head(&bytes)?;
    // The policy webhook sees the parsed request before any routing decision.
    if let Some(webhook) = &gw.webhook {
        webhook_gate(gw, webhook, request_id, principal, &parts, &bytes)
            .await
            .map_err(|e| blocked(gw, request_id, Layer::Webhook, Some(&head.model), e))?;
    }
    // The caller's managed policy is checked before the operator's model map; on the
    // desktop, the cached central policy refuses locally what the central server would.
    let managed = match principal {
        Principal::Session { user, .. } => gw
            .policies
            .matched(user)
            .and_then(crate::policy::ResolvedPolicy::available_models)
            .map(|allowed| (allowed, "your managed policy")),
        _ => None,
    };
    let cached = gw
        .local
        .models()
        .map(|allowed| (allowed.to_vec(), "your organization's policy"));
    for (allowed, whose) in managed.into_iter().chain(cached) {
        if !crate::policy::model_allowed(&allowed, &head.model) {
            gw.deps.emit(
                Event::new("access.denied")
                    .with("request_id", request_id)
                    .with("principal", principal.label())
                    .with("reason", "model_not_allowed")
                    .with("layer", "policy")
                    .with("model", head.model.clone()),
            );
            let e = ApiError::InvalidRequest(format!(
                "model `{}` is not allowed by {whose} (availableModels: {})",
                head.model,
                allowed.join(", ")
            ));
            return Err(blocked(gw, request_id, Layer::Policy, Some(&head.model), e));
        }
    }
    let resolution = gw.catalog.resolve(&head.model).map_err(|e| {
        gw.deps.emit(
            Event::new("access.denied")
                .with("request_id", request_id)
                .with("principal", principal.label())
                .with("reason", "model_not_allowed")
                .with("layer", "operator")
                .with("model", head.model.clone()),
        );
        let e = ApiError::InvalidRequest(e.to_string());
        blocked(gw, request_id, Layer::Catalog, Some(&head.model), e)
    })?;
    let mut legs = Vec::with_capacity(resolution.targets.len());
    for (upstream, upstream_model) in resolution.targets {
        let body = if upstream_model == head.model {
            bytes.clone()
        } else {
            body::with_model(&bytes, &upstream_model)?
        };
        legs.push(Leg {
            upstream,
            upstream_model,
            body,
        });
    }
    let upstream_models: Vec<(usize, String)> = legs
        .iter()
        .map(|l| (l.upstream, l.upstream_model.clone()))
        .collect();
    // Spend: reserve the worst case against every binding cap, or refuse before any upstream.
    let local_user;
    let spender = match principal {
        Principal::Session { user, .. } => Some(user),
        // The desktop's personal budgets bind its one local key.
        Principal::ClientKey { id } if id == crate::auth::client_keys::LOCAL_KEY_ID => {
            local_user = crate::identity::session::UserIdentity::local();
            Some(&local_user)
        }
        _ => None,
    };
    let held = match spender {
        Some(user) if endpoint == Endpoint::Messages => {
            let models: Vec<&str> = std::iter::once(head.model.as_str())
                .chain(upstream_models.iter().map(|(_, m)| m.as_str()))
                .collect();
            match crate::spend::admission::reserve(
                gw,
                user,
                request_id,
                &models,
                bytes.len(),
                head.max_tokens,
            )
            .await
            {
                crate::spend::admission::Admitted::Refused(resp) => {
                    return Ok(spend_refused(gw, request_id, &head.model, resp).await);
                }
                crate::spend::admission::Admitted::Held(h) => Some(h),
                crate::spend::admission::Admitted::Unchecked => None,
            }
        }
        _ => None,
    };
    let facts_base = RequestFacts {
        request_id: request_id.to_owned(),
        created_at: gw.deps.clock.now(),
        started,
        principal: principal.label(),
        endpoint: endpoint.name(),
        model: head.model.clone(),
        stream: head.stream,
        reservation_id: None,
    };
    let routed = router::route(
        &gw.upstreams,
        endpoint.upstream_path(),
        parts.uri.query(),
        &parts.headers,
        legs,
        &resolution.not_configured,
        &gw.dashboard.health,
    )
    .await;
    // From here every path records usage, which settles the reservation.
    let (facts, standings) = match held {
        Some(h) => {
            let (id, standings) = h.hand_over();
            (
                RequestFacts {
                    reservation_id: Some(id),
                    ..facts_base
                },
                standings,
            )
        }
        None => (facts_base, Vec::new()),
    };
    let leg_facts = |leg: usize| {
        let (i, model) = &upstream_models[leg];
        (
            Some(gw.upstreams.list[*i].name.clone()),
            Some(model.clone()),
        )
    };
    match routed {
        Routed::Answer {
            response,
            leg,
            attempts,
            ttfb,
            route_reason,
        } => {
            let (upstream, upstream_model) = leg_facts(leg);
            let status = response.status();
            if matches!(principal, Principal::Workload(_)) && !status.is_success() {
                // Workload callers get a stable reason, never the upstream's wording (which
                // can carry account ids, ARNs or hosts).
                let mut out_headers = headers::to_caller(response.headers());
                add_route_headers(&mut out_headers, upstream.as_deref(), attempts);
                let body = response.bytes().await.unwrap_or_default();
                record_without_body(
                    gw,
                    facts,
                    upstream,
                    upstream_model,
                    status,
                    route_reason,
                    attempts,
                );
                return Ok(sanitized(status, out_headers, &body));
            }
            let mut out_headers = headers::to_caller(response.headers());
            add_route_headers(&mut out_headers, upstream.as_deref(), attempts);
            if status.is_success() {
                crate::spend::headers::on_success(&mut out_headers, &standings);
            }
            let format = BodyFormat::from_content_type(
                response
                    .headers()
                    .get(header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok()),
            );
            let route = RouteFacts {
                upstream,
                upstream_model,
                status: status.as_u16(),
                route_reason,
                ttfb: Some(ttfb),
                attempts,
            };
            let meter = Meter::new(facts, route, format, gw.recorder.clone());
            let stream = MeteredStream::new(
                response.bytes_stream().boxed(),
                meter,
                gw.config.timeouts.disconnect_drain,
                gw.tracker.clone(),
            );
            let mut resp = Response::new(Body::from_stream(stream));
            *resp.status_mut() = status;
            *resp.headers_mut() = out_headers;
            Ok(resp)
        }
        Routed::Retained {
            status,
            headers: upstream_headers,
            body,
            leg,
            attempts,
            route_reason,
        } => {
            let (upstream, upstream_model) = leg_facts(leg);
            central_spend_block(
                gw,
                request_id,
                principal,
                (upstream_models[leg].0, &facts.model),
                status,
                &body,
            );
            let mut out_headers = headers::to_caller(&upstream_headers);
            // The retained body may have been cut to the retention limit.
            out_headers.remove(header::CONTENT_LENGTH);
            add_route_headers(&mut out_headers, upstream.as_deref(), attempts);
            record_without_body(
                gw,
                facts,
                upstream,
                upstream_model,
                status,
                route_reason,
                attempts,
            );
            let mut resp = Response::new(Body::from(body));
            *resp.status_mut() = status;
            *resp.headers_mut() = out_headers;
            Ok(resp)
        }
        Routed::Failed {
            error,
            attempts,
            route_reason,
        } => {
            let status = error.outcome().0;
            record_without_body(gw, facts, None, None, status, route_reason, attempts);
            let mut resp = error.into_response();
            add_route_headers(resp.headers_mut(), None, attempts);
            Ok(resp)
        }
    }
}

fn add_route_headers(h: &mut http::HeaderMap, upstream: Option<&str>, attempts: usize) {
    if let Some(v) = upstream.and_then(|u| HeaderValue::from_str(u).ok()) {
        h.insert("x-gatehouse-upstream", v);
    }
    h.insert(
        "x-gatehouse-failover-count",
        HeaderValue::from(attempts.saturating_sub(1)),
    );
}

fn record_without_body(
    gw: &Gateway,
    facts: RequestFacts,
    upstream: Option<String>,
    upstream_model: Option<String>,
    status: StatusCode,
    route_reason: String,
    attempts: usize,
) {
    let route = RouteFacts {
        upstream,
        upstream_model,
        status: status.as_u16(),
        route_reason,
        ttfb: None,
        attempts,
    };
    Meter::new(facts, route, BodyFormat::Other, gw.recorder.clone()).finish(false, true);
}

/// The upstream's error, with its status and `error.type` kept and its message replaced by
/// `capability_rejected: <reason>` (or a generic sentence when it cannot be classified).
fn sanitized(status: StatusCode, mut out_headers: http::HeaderMap, body: &[u8]) -> Response<Body> {
    let upstream: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let kind = upstream["error"]["type"]
        .as_str()
        .filter(|t| t.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        .unwrap_or(match status.as_u16() {
            400 => "invalid_request_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            529 => "overloaded_error",
            _ => "api_error",
        })
        .to_owned();
    let message = upstream["error"]["message"]
        .as_str()
        .and_then(crate::workload::capability_reason)
        .map_or_else(
            || "upstream request failed".to_owned(),
            |r| format!("capability_rejected: {r}"),
        );
    let envelope =
        serde_json::json!({"type": "error", "error": {"type": kind, "message": message}});
    out_headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    out_headers.remove(header::CONTENT_LENGTH);
    let mut resp = Response::new(Body::from(envelope.to_string()));
    *resp.status_mut() = status;
    *resp.headers_mut() = out_headers;
    resp
}

async fn webhook_gate(
    gw: &Gateway,
    webhook: &crate::policy::webhook::Webhook,
    request_id: &str,
    principal: &Principal,
    parts: &http::request::Parts,
    body: &[u8],
) -> Result<(), ApiError> {
    use crate::policy::webhook::Decision;
    let sub = match principal {
        Principal::Session { user, .. } => user.sub.clone(),
        Principal::Workload(w) => w.sub.clone(),
        Principal::ClientKey { id } => format!("key:{id}"),
    };
    let decision = webhook
        .check(
            parts.uri.path(),
            parts.uri.query(),
            &parts.headers,
            body,
            request_id,
            &sub,
        )
        .await;
    match decision {
        Decision::Allow => Ok(()),
        Decision::Skipped { why } => {
            tracing::warn!(reason = %why, "policy webhook unavailable; failing open");
            gw.deps.emit(
                Event::new("policy.skipped")
                    .with("request_id", request_id)
                    .with("principal", principal.label())
                    .with("why", why),
            );
            Ok(())
        }
        Decision::Unavailable { why } => {
            tracing::warn!(reason = %why, "policy webhook unavailable; failing closed");
            gw.deps.emit(
                Event::new("policy.blocked")
                    .with("request_id", request_id)
                    .with("principal", principal.label())
                    .with("rule_id", Value::Null)
                    .with("reason", "policy check unavailable")
                    .with("why", why),
            );
            Err(ApiError::PolicyBlocked("policy check unavailable".into()))
        }
        Decision::Block { reason, rule_id } => {
            gw.deps.emit(
                Event::new("policy.blocked")
                    .with("request_id", request_id)
                    .with("principal", principal.label())
                    .with("rule_id", rule_id)
                    .with("reason", reason.clone()),
            );
            Err(ApiError::PolicyBlocked(reason))
        }
    }
}

/// A central Gatehouse (the desktop's connected upstream) refused on a spend cap: record
/// it like a local block, so the tray notifies and lists it, and relay the answer as is.
fn central_spend_block(
    gw: &Gateway,
    request_id: &str,
    principal: &Principal,
    (upstream, model): (usize, &str),
    status: http::StatusCode,
    body: &bytes::Bytes,
) {
    let central = matches!(
        gw.upstreams.list.get(upstream).and_then(|u| u.credential.as_ref()),
        Some(crate::config::UpstreamCredential::Dynamic(d))
            if d.scheme == crate::config::CredentialScheme::Bearer
    );
    if !central || status != http::StatusCode::TOO_MANY_REQUESTS {
        return;
    }
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
        return;
    };
    if v.pointer("/error/type").and_then(|t| t.as_str()) != Some("billing_error") {
        return;
    }
    let message = v
        .pointer("/error/message")
        .and_then(|m| m.as_str())
        .unwrap_or_default()
        .chars()
        .take(500)
        .collect::<String>();
    gw.deps.emit(
        Event::new("spend.blocked")
            .with("request_id", request_id)
            .with("principal", principal.label())
            .with("source", "central")
            .with("message", message.clone()),
    );
    let block = crate::dashboard::blocks::Block {
        at: gw.deps.clock.now(),
        request_id: request_id.to_owned(),
        layer: Layer::Spend,
        model: Some(model.to_owned()),
        status: status.as_u16(),
        message,
    };
    gw.dashboard.blocks.record(block, &gw.dashboard.live);
}

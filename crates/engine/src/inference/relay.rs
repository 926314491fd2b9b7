//! The answer to the caller, once routing has ended: an upstream answer relayed as it
//! arrives (metered on the side, settling the reservation), a retained failover answer, or
//! the gateway's own error. Every path leaves exactly one usage row.

use axum::body::Body;
use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode, header};

use super::Call;
use super::refusal::{Layer, keep};
use crate::auth::Principal;
use crate::limits::Charge;
use crate::metering::{
    BodyFormat, Meter, MeteredStream, OnUsage, RequestFacts, RouteFacts, StreamWatch,
};
use crate::spend::Standing;
use crate::spend::admission::Held;
use crate::upstream::router::Routed;
use crate::upstream::{Answer, headers};

/// The most of an upstream error body read to clean it for a workload caller.
const SANITIZE_LIMIT: usize = 64 * 1024;

pub(super) async fn respond(
    call: &Call<'_>,
    routed: Routed,
    facts: RequestFacts,
    held: Option<Held>,
    charge: Option<Charge>,
    upstream_models: &[(usize, String)],
) -> Response<Body> {
    let (facts, standings): (RequestFacts, Vec<Standing>) = match held {
        Some(h) => {
            let (ticket, standings) = h.hand_over();
            let facts = RequestFacts {
                charge: Some(std::sync::Arc::new(ticket)),
                ..facts
            };
            (facts, standings)
        }
        None => (facts, Vec::new()),
    };
    // Which upstream (by name) and model id a leg was.
    let route = |leg: Option<usize>, status: StatusCode, route_reason: String, attempts| {
        let (upstream, upstream_model) = leg.map_or((None, None), |leg| {
            let (i, model) = &upstream_models[leg];
            let name = call.gw.upstreams.list[*i].name.clone();
            (Some(name), Some(model.clone()))
        });
        RouteFacts {
            upstream,
            upstream_model,
            status: status.as_u16(),
            route_reason,
            ttfb: None,
            attempts,
            estimated: false,
            search_price: None,
        }
    };
    match routed {
        Routed::Answer {
            response,
            leg,
            attempts,
            ttfb,
            route_reason,
            search_price,
        } => {
            let route = RouteFacts {
                ttfb: Some(ttfb),
                estimated: response.estimated,
                search_price,
                ..route(Some(leg), response.status, route_reason, attempts)
            };
            let upstream = upstream_models[leg].0;
            relay(call, response, (upstream, route), facts, &standings, charge).await
        }
        Routed::Retained {
            status,
            headers: upstream_headers,
            body,
            leg,
            attempts,
            route_reason,
        } => {
            central_spend_block(call, upstream_models[leg].0, &facts.model, status, &body);
            let route = route(Some(leg), status, route_reason, attempts);
            let mut out_headers = headers::to_caller(&upstream_headers);
            // The retained body may have been cut to the retention limit.
            out_headers.remove(header::CONTENT_LENGTH);
            add_route_headers(&mut out_headers, route.upstream.as_deref(), attempts);
            record_without_body(call, facts, route, charge);
            let body = if is_workload(call) {
                for_workload(status, &mut out_headers, &body)
            } else {
                body
            };
            let mut resp = Response::new(Body::from(body));
            *resp.status_mut() = status;
            *resp.headers_mut() = out_headers;
            resp
        }
        Routed::Failed {
            error,
            attempts,
            route_reason,
        } => {
            record_without_body(
                call,
                facts,
                route(None, error.outcome().0, route_reason, attempts),
                charge,
            );
            let mut resp = error.into_response();
            add_route_headers(resp.headers_mut(), None, attempts);
            resp
        }
    }
}

/// An upstream's answer, relayed as it arrives and metered on the side (a workload
/// caller's error is cleaned first).
async fn relay(
    call: &Call<'_>,
    response: Answer,
    (upstream, mut route): (usize, RouteFacts),
    facts: RequestFacts,
    standings: &[Standing],
    charge: Option<Charge>,
) -> Response<Body> {
    let gw = call.gw;
    let status = response.status;
    let mut out_headers = headers::to_caller(&response.headers);
    add_route_headers(&mut out_headers, route.upstream.as_deref(), route.attempts);
    if response.estimated {
        // Set here: `to_caller` drops every `x-gatehouse-*` an upstream sends.
        out_headers.insert("x-gatehouse-estimated", HeaderValue::from_static("true"));
    }
    if is_workload(call) && !status.is_success() {
        // Workload callers get a stable reason, never the upstream's wording (which can
        // carry account ids, ARNs or hosts).
        let body = response.read_limited(SANITIZE_LIMIT).await;
        route.ttfb = None;
        record_without_body(call, facts, route, charge);
        let body = for_workload(status, &mut out_headers, &body);
        let mut resp = Response::new(Body::from(body));
        *resp.status_mut() = status;
        *resp.headers_mut() = out_headers;
        return resp;
    }
    if status.is_success() {
        crate::spend::headers::on_success(&mut out_headers, standings);
    }
    let mut response = response;
    if is_workload(call) && format_is_sse(&response.headers) {
        // An error event inside the stream gets the same hygiene as an error answer.
        let body = std::mem::replace(&mut response.body, futures_util::stream::empty().boxed());
        response.body = crate::upstream::workload_sse::clean(body);
        out_headers.remove(header::CONTENT_LENGTH);
    }
    let format = BodyFormat::from_content_type(
        response
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
    );
    let mut meter = Meter::new(facts, route, format, gw.recorder.clone()).on_usage(settles(charge));
    if status.is_success() {
        // A stream that breaks or stalls after its headers is its upstream's failure.
        meter = meter.watch(StreamWatch {
            health: gw.upstreams.health.clone(),
            upstream,
            stall: gw.upstreams.health.config().stream_stall,
        });
    }
    let length = out_headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let stream = MeteredStream::new(
        response.body,
        meter,
        gw.config.timeouts.disconnect_drain,
        gw.tracker.clone(),
    )
    .with_length(length);
    let mut resp = Response::new(Body::from_stream(stream));
    *resp.status_mut() = status;
    *resp.headers_mut() = out_headers;
    resp
}

fn add_route_headers(h: &mut HeaderMap, upstream: Option<&str>, attempts: usize) {
    const UPSTREAM: HeaderName = HeaderName::from_static("x-gatehouse-upstream");
    const FAILOVERS: HeaderName = HeaderName::from_static("x-gatehouse-failover-count");
    if let Some(v) = upstream.and_then(|u| HeaderValue::from_str(u).ok()) {
        h.insert(UPSTREAM, v);
    }
    h.insert(FAILOVERS, HeaderValue::from(attempts.saturating_sub(1)));
}

fn record_without_body(
    call: &Call<'_>,
    facts: RequestFacts,
    route: RouteFacts,
    charge: Option<Charge>,
) {
    let recorder = call.gw.recorder.clone();
    Meter::new(facts, route, BodyFormat::Other, recorder)
        .on_usage(settles(charge))
        .finish(false, true);
}

/// The traffic limits' token charge, corrected to the usage when the request ends.
fn settles(charge: Option<Charge>) -> Option<OnUsage> {
    charge.map(|c| -> OnUsage { Box::new(move |u| c.settle(crate::limits::counted(u))) })
}

fn format_is_sse(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

fn is_workload(call: &Call<'_>) -> bool {
    matches!(call.principal, Principal::Workload(_))
}

/// A workload caller's copy of an upstream error (relayed or retained after failover): the
/// one hygiene of [`crate::upstream::errors::for_workload`], as JSON.
fn for_workload(status: StatusCode, out_headers: &mut HeaderMap, body: &[u8]) -> Bytes {
    out_headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    out_headers.remove(header::CONTENT_LENGTH);
    crate::upstream::errors::for_workload(status, body)
}

/// A central Gatehouse (the desktop's connected upstream) refused on a spend cap: keep it
/// like a local block, so the tray notifies and lists it, and relay the answer as is.
fn central_spend_block(
    call: &Call<'_>,
    upstream: usize,
    model: &str,
    status: StatusCode,
    body: &Bytes,
) {
    let gw = call.gw;
    let central = gw
        .upstreams
        .list
        .get(upstream)
        .is_some_and(|u| u.is_central());
    if !central || status != StatusCode::TOO_MANY_REQUESTS {
        return;
    }
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
        return;
    };
    if v.pointer("/error/type").and_then(|t| t.as_str()) != Some("billing_error") {
        return;
    }
    let message: String = v
        .pointer("/error/message")
        .and_then(|m| m.as_str())
        .unwrap_or_default()
        .chars()
        .take(500)
        .collect();
    gw.deps.emit(
        call.event("spend.blocked")
            .with("source", "central")
            .with("message", message.clone()),
    );
    keep(
        gw,
        call.request_id,
        Layer::Spend,
        Some(model),
        status.as_u16(),
        message,
    );
}

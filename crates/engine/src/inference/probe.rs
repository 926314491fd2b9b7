//! The active probe (`routing.health.probe`, off by default): every `probe_interval_s`,
//! a tiny real request (`max_tokens: 1`, the probe model as the catalog names it there) to
//! each upstream that had no attempt for an interval, or whose open breaker is due its
//! trial; never to one that is cooling down or open before its time. The outcome feeds the
//! health like any attempt, and the answer is metered like any request (principal
//! `gatehouse:probe`, one usage row each), so its cost is visible.

use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::gateway::Gateway;
use crate::metering::{BodyFormat, Meter, RequestFacts, RouteFacts};
use crate::upstream::health::Admission;
use crate::upstream::router::fails_over;
use crate::upstream::{Call, Operation};

/// The probe's principal in usage rows and events.
pub const PRINCIPAL: &str = "gatehouse:probe";
/// The most of a probe's answer kept for metering.
const BODY_LIMIT: usize = 64 * 1024;

/// Starts the probe when it is configured.
pub fn spawn(gw: Arc<Gateway>, stop: CancellationToken) {
    let Some((interval, model)) = gw.config.routing.health.probe.clone() else {
        return;
    };
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => round(&gw, &model, interval).await,
                () = stop.cancelled() => break,
            }
        }
    });
}

async fn round(gw: &Gateway, model: &str, interval: std::time::Duration) {
    let Ok(resolution) = gw.catalog.resolve_for(model, &[]) else {
        return;
    };
    let health = &gw.upstreams.health;
    let now = gw.deps.clock.now();
    let idle_since = now - chrono::TimeDelta::from_std(interval).unwrap_or_default();
    for (upstream, upstream_model) in resolution.targets {
        let due = match health.peek(upstream) {
            Admission::Skip { .. } => false,
            Admission::Trial => true,
            Admission::Send => health
                .last_attempt(upstream)
                .is_none_or(|t| t <= idle_since),
        };
        // Claim the trial (or go as a normal attempt); skip if it changed meanwhile.
        if due && !matches!(health.admit(upstream), Admission::Skip { .. }) {
            probe(gw, model, upstream, &upstream_model).await;
        }
    }
}

async fn probe(gw: &Gateway, model: &str, upstream: usize, upstream_model: &str) {
    let ups = &gw.upstreams;
    let Some(up) = ups.list.get(upstream) else {
        return;
    };
    let value = match &up.credential {
        None => None,
        Some(c) if c.applied_by_link() => None,
        Some(c) => match c.current() {
            Some(v) => Some((c.scheme, v)),
            None => return,
        },
    };
    let body = serde_json::json!({
        "model": upstream_model,
        "max_tokens": 1,
        "messages": [{"role": "user", "content": "ping"}],
    });
    let headers = probe_headers();
    let call = Call {
        op: Operation::Messages,
        query: None,
        headers: &headers,
        model: upstream_model,
        body: bytes::Bytes::from(body.to_string()),
        stream: false,
        credential: value.as_ref().map(|(s, v)| (*s, v)),
        extra_headers: &up.headers,
        caller: None,
        affinity: None,
    };
    let request_id = format!("probe-{}", uuid::Uuid::new_v4());
    let started = Instant::now();
    let sent = tokio::time::timeout(ups.ttfb, ups.links[upstream].send(call)).await;
    let ttfb = started.elapsed();
    let facts = RequestFacts {
        request_id,
        created_at: gw.deps.clock.now(),
        started,
        principal: PRINCIPAL.to_owned(),
        endpoint: "messages",
        model: model.to_owned(),
        stream: false,
        charge: None,
        abandoned_micro: 0,
        billing_group: None,
        tags: None,
        conversation: None,
    };
    let route = |status: u16, reason: String| RouteFacts {
        upstream: Some(up.name.clone()),
        upstream_model: Some(upstream_model.to_owned()),
        status,
        route_reason: reason,
        ttfb: Some(ttfb),
        attempts: 1,
        estimated: false,
        search_price: None,
    };
    match sent {
        Ok(Ok(answer)) => {
            let status = answer.status;
            if fails_over(status) {
                ups.health.failure(
                    upstream,
                    Some(status.as_u16()),
                    &format!("HTTP {}", status.as_u16()),
                );
            } else {
                ups.health.success(upstream, status.as_u16(), Some(ttfb));
            }
            let reason = format!("{}: probe, {}", up.name, status.as_u16());
            let mut meter = Meter::new(
                facts,
                route(status.as_u16(), reason),
                BodyFormat::Json,
                gw.recorder.clone(),
            );
            meter.observe(&answer.read_limited(BODY_LIMIT).await);
            meter.finish(false, false);
        }
        Ok(Err(e)) => {
            ups.health.failure(upstream, None, e.kind());
            let reason = format!("{}: probe, {}", up.name, e.kind());
            Meter::new(
                facts,
                route(502, reason),
                BodyFormat::Other,
                gw.recorder.clone(),
            )
            .finish(false, true);
        }
        Err(_) => {
            ups.health.failure(upstream, None, "ttfb timeout");
            let reason = format!("{}: probe, ttfb timeout", up.name);
            Meter::new(
                facts,
                route(504, reason),
                BodyFormat::Other,
                gw.recorder.clone(),
            )
            .finish(false, true);
        }
    }
}

fn probe_headers() -> http::HeaderMap {
    let mut h = http::HeaderMap::new();
    h.insert(
        "anthropic-version",
        http::HeaderValue::from_static("2023-06-01"),
    );
    h.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    h
}

//! Ordered failover across the upstreams that can serve a model.
//!
//! Rules: try upstreams in order; fail over on 5xx, 429, 401, 403, 404, network errors and
//! the TTFB timeout; never on other 4xx (400 and 413 describe the request, not the
//! upstream), which pass through as they are. Failover only happens before the first byte
//! reached the caller: a leg is done once its headers are accepted. When every leg fails,
//! the highest-priority retained answer is returned (429 with its `retry-after`, then 404,
//! then 501);
//! otherwise `502 all upstreams failed (N attempted)`. Upstream 401/403 are never relayed:
//! the caller would take them for its own credential failing. Every decision is written
//! into a `route_reason`, and every attempt's outcome into the upstream health ([`super::health`]).

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, StatusCode};

use super::{Answer, Call, Operation, SendError, Upstreams};
use crate::error::ApiError;

/// A request ready to be sent, per candidate upstream.
pub struct Leg {
    pub upstream: usize,
    pub upstream_model: String,
    pub body: Bytes,
}

/// What routing produced.
pub enum Routed {
    /// An upstream answered with something to relay as a stream (2xx, or a non-failover error).
    Answer {
        response: Answer,
        leg: usize,
        attempts: usize,
        ttfb: Duration,
        route_reason: String,
    },
    /// Every leg failed; this retained answer is relayed with its body.
    Retained {
        status: StatusCode,
        headers: HeaderMap,
        body: Bytes,
        leg: usize,
        attempts: usize,
        route_reason: String,
    },
    /// Nothing to relay.
    Failed {
        error: ApiError,
        attempts: usize,
        route_reason: String,
    },
}

pub fn fails_over(status: StatusCode) -> bool {
    status.is_server_error() || matches!(status.as_u16(), 429 | 401 | 403 | 404)
}

/// Retained-answer priority; `None` means never relayed.
fn retain_rank(status: StatusCode) -> Option<u8> {
    match status.as_u16() {
        429 => Some(3),
        404 => Some(2),
        // `count_tokens` an upstream cannot answer (Bedrock with a profile): the client
        // falls back on it, where a 502 would be an outage.
        501 => Some(1),
        _ => None,
    }
}

/// Largest error body kept while other legs are tried.
const RETAINED_BODY_LIMIT: usize = 64 * 1024;

/// What every leg shares: the operation, the caller's query and headers, streaming.
pub struct Request<'a> {
    pub op: Operation,
    pub query: Option<&'a str>,
    pub headers: &'a HeaderMap,
    pub stream: bool,
    pub caller: Option<super::Caller<'a>>,
}

pub async fn route(
    upstreams: &Upstreams,
    req: &Request<'_>,
    legs: Vec<Leg>,
    skipped: &[String],
    abandoned: &mut Vec<usize>,
) -> Routed {
    let health = &upstreams.health;
    let mut failures: Vec<String> = skipped
        .iter()
        .map(|s| format!("{s}=model not configured"))
        .collect();
    let mut retained: Option<(u8, StatusCode, HeaderMap, Bytes, usize)> = None;
    let mut attempts = 0;
    let mut hints: Vec<String> = Vec::new();
    for (i, leg) in legs.into_iter().enumerate() {
        let (index, up) = (leg.upstream, &upstreams.list[leg.upstream]);
        // The credential's value is read once per attempt (the desktop's may change).
        let value = match &up.credential {
            None => None,
            Some(c) => match c.current() {
                Some(v) => Some((c.scheme, v)),
                None => {
                    failures.push(format!("{}=no credential", up.name));
                    hints.push(c.missing_hint.clone());
                    continue;
                }
            },
        };
        let credential = value.as_ref().map(|(scheme, v)| (*scheme, v));
        attempts += 1;
        let call = Call {
            op: req.op,
            query: req.query,
            headers: req.headers,
            model: &leg.upstream_model,
            body: leg.body,
            stream: req.stream,
            credential,
            extra_headers: &up.headers,
            caller: req.caller,
        };
        let started = Instant::now();
        let sent = tokio::time::timeout(upstreams.ttfb, upstreams.links[index].send(call)).await;
        let ttfb = started.elapsed();
        let response = match sent {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                let kind = e.kind();
                tracing::warn!(upstream = %up.name, error = %e, "upstream request failed");
                // A request that could not be built says nothing about the upstream.
                if !matches!(e, SendError::Build(_)) {
                    health.failure(index, None, kind);
                }
                failures.push(format!("{}={kind}", up.name));
                continue;
            }
            Err(_) => {
                tracing::warn!(upstream = %up.name, ms = upstreams.ttfb.as_millis() as u64, "upstream TTFB timeout");
                health.failure(index, None, "ttfb timeout");
                failures.push(format!("{}=ttfb timeout", up.name));
                abandoned.push(i);
                continue;
            }
        };
        let status = response.status;
        if !fails_over(status) {
            health.success(index, status.as_u16());
            let mut route_reason = reason(&up.name, &failures, status);
            if !response.notes.is_empty() {
                route_reason = format!("{route_reason} ({})", response.notes.join("; "));
            }
            return Routed::Answer {
                response,
                leg: i,
                attempts,
                ttfb,
                route_reason,
            };
        }
        tracing::warn!(upstream = %up.name, status = status.as_u16(), "upstream answered with a failover status");
        health.failure(
            index,
            Some(status.as_u16()),
            &format!("HTTP {}", status.as_u16()),
        );
        failures.push(format!("{}={}", up.name, status.as_u16()));
        if let Some(rank) = retain_rank(status)
            && retained.as_ref().is_none_or(|r| rank > r.0)
        {
            let headers = response.headers.clone();
            let body = response.read_limited(RETAINED_BODY_LIMIT).await;
            retained = Some((rank, status, headers, body, i));
        }
    }
    let summary = format!("all failed: {}", failures.join(", "));
    if let Some((_, status, headers, body, leg)) = retained {
        return Routed::Retained {
            status,
            headers,
            body,
            leg,
            attempts,
            route_reason: summary,
        };
    }
    if attempts == 0 && !hints.is_empty() {
        return Routed::Failed {
            error: ApiError::UpstreamUnavailable(hints.join("; ")),
            attempts,
            route_reason: summary,
        };
    }
    Routed::Failed {
        error: ApiError::AllUpstreamsFailed {
            attempted: attempts,
        },
        attempts,
        route_reason: summary,
    }
}

fn reason(name: &str, failures: &[String], status: StatusCode) -> String {
    let how = if status.is_success() { "ok" } else { "relayed" };
    if failures.is_empty() {
        format!("{name}: first in order, {how} {}", status.as_u16())
    } else {
        format!(
            "{name}: after {}, {how} {}",
            failures.join(", "),
            status.as_u16()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failover_statuses() {
        for s in [500, 502, 503, 529, 501, 429, 401, 403, 404] {
            assert!(
                fails_over(StatusCode::from_u16(s).unwrap_or_default()),
                "{s}"
            );
        }
        for s in [200, 400, 413, 422] {
            assert!(
                !fails_over(StatusCode::from_u16(s).unwrap_or_default()),
                "{s}"
            );
        }
    }
}

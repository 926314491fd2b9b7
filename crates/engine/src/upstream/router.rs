//! Ordered failover across the upstreams that can serve a model, steered by their health.
//!
//! Rules: try upstreams in order; fail over on 5xx, 429, 401, 403, 404, network errors and
//! the TTFB timeout; never on other 4xx (400 and 413 describe the request, not the
//! upstream), which pass through as they are. Failover only happens before the first byte
//! reached the caller: a leg is done once its headers are accepted. When every leg fails,
//! the highest-priority retained answer is returned (429 with its `retry-after`, then 404,
//! then 501);
//! a 429 from an identity-forwarding upstream for a person with an email is theirs and is
//! relayed at once;
//! otherwise `502 all upstreams failed (N attempted)`. Upstream 401/403 are never relayed:
//! the caller would take them for its own credential failing. Every decision is written
//! into a `route_reason`, and every attempt's outcome into the upstream health ([`super::health`]).
//!
//! Health steers it: an upstream whose breaker is open or that cools down after a 429 is
//! skipped (`a=breaker open`, `a=cooling down 12s` in `route_reason`). When every candidate
//! was skipped that way and none was tried, the one closest to recovery is tried anyway, as
//! its breaker's trial: a gateway with one upstream, or with all of them failing, still
//! relays the upstream's own answer instead of inventing an error. A 529 or a connection
//! error before any byte is retried on the same upstream after a jittered backoff, while
//! the retry budget ([`super::retry`]) allows, only where failover has nowhere left to go
//! (the last candidate, or the one tried anyway): before that, the next upstream is both
//! faster for the caller and kinder to the overloaded one.

use std::time::{Duration, Instant};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::{HeaderMap, StatusCode};

use super::health::Admission;
use super::strategy::Plan;
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
        /// Searches the gateway ran itself ([`crate::inference::server_tools`]) cost this
        /// (nano-USD each) instead of the served model's web search price.
        search_price: Option<u64>,
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
    /// The conversation's key when affinity applies (for key pools).
    pub affinity: Option<u64>,
}

/// What the legs tried so far left behind.
#[derive(Default)]
struct Run {
    failures: Vec<String>,
    retained: Option<(u8, StatusCode, HeaderMap, Bytes, usize)>,
    attempts: usize,
    hints: Vec<String>,
    /// Every candidate was skipped for its health; this one was tried anyway.
    forced: bool,
    /// What the strategy chose (none for `ordered`).
    note: Option<String>,
}

/// [`route_with`] in the `upstreams` order.
pub async fn route(
    upstreams: &Upstreams,
    req: &Request<'_>,
    legs: Vec<Leg>,
    skipped: &[String],
    abandoned: &mut Vec<usize>,
) -> Routed {
    route_with(upstreams, req, &Plan::ordered(), legs, skipped, abandoned).await
}

/// Routes `legs` in the order `plan`'s strategy gives them.
pub async fn route_with(
    upstreams: &Upstreams,
    req: &Request<'_>,
    plan: &Plan<'_>,
    legs: Vec<Leg>,
    skipped: &[String],
    abandoned: &mut Vec<usize>,
) -> Routed {
    upstreams.retry.request();
    // Legs keep the position they were given in (the caller's index of them), whatever
    // order the strategy tries them in. An upstream is a candidate at most once.
    let given: Vec<usize> = legs.iter().map(|l| l.upstream).collect();
    let (legs, note) = upstreams
        .strategist
        .order(plan, legs, &upstreams.list, &upstreams.health);
    let mut run = Run {
        failures: skipped
            .iter()
            .map(|s| format!("{s}=model not configured"))
            .collect(),
        note: note_for(plan, note),
        ..Run::default()
    };
    // Legs skipped for their health, with when each may be tried again.
    let mut held: Vec<(usize, Leg, DateTime<Utc>)> = Vec::new();
    let count = legs.len();
    for (tried, leg) in legs.into_iter().enumerate() {
        let i = given
            .iter()
            .position(|u| *u == leg.upstream)
            .unwrap_or(tried);
        if let Admission::Skip { why, ready_at } = upstreams.health.admit(leg.upstream) {
            let name = &upstreams.list[leg.upstream].name;
            run.failures.push(format!("{name}={why}"));
            held.push((i, leg, ready_at));
            continue;
        }
        let last = tried + 1 == count;
        if let Some(done) = attempt(upstreams, req, (i, leg, last), &mut run, abandoned).await {
            return done;
        }
    }
    if run.attempts == 0 {
        let closest = held
            .into_iter()
            .min_by_key(|(i, _, ready_at)| (*ready_at, *i));
        if let Some((i, leg, _)) = closest {
            upstreams.health.force(leg.upstream);
            run.forced = true;
            if let Some(done) = attempt(upstreams, req, (i, leg, true), &mut run, abandoned).await {
                return done;
            }
        }
    }
    all_failed(run)
}

/// One leg (its position, itself, whether it may be retried: nothing comes after it),
/// retried on the same upstream while that is allowed: `Some` when routing is done.
async fn attempt(
    upstreams: &Upstreams,
    req: &Request<'_>,
    (i, leg, may_retry): (usize, Leg, bool),
    run: &mut Run,
    abandoned: &mut Vec<usize>,
) -> Option<Routed> {
    let health = &upstreams.health;
    let (index, up) = (leg.upstream, &upstreams.list[leg.upstream]);
    let mut retries = 0;
    loop {
        // The credential's value is read once per attempt (the desktop's may change).
        let value = match &up.credential {
            None => None,
            // The link exchanges and applies a federated token itself.
            Some(c) if c.applied_by_link() => None,
            Some(c) => match c.current() {
                Some(v) => Some((c.scheme, v)),
                None => {
                    run.failures.push(format!("{}=no credential", up.name));
                    run.hints.push(c.missing_hint.clone());
                    return None;
                }
            },
        };
        let credential = value.as_ref().map(|(scheme, v)| (*scheme, v));
        run.attempts += 1;
        let call = Call {
            op: req.op,
            query: req.query,
            headers: req.headers,
            model: &leg.upstream_model,
            body: leg.body.clone(),
            stream: req.stream,
            credential,
            extra_headers: &up.headers,
            caller: req.caller,
            affinity: req.affinity,
        };
        let started = Instant::now();
        let sent = tokio::time::timeout(upstreams.ttfb, upstreams.links[index].send(call)).await;
        let ttfb = started.elapsed();
        let retryable = match sent {
            Ok(Ok(response)) if !fails_over(response.status) || own_limit(up, req, &response) => {
                let status = response.status;
                // A person's own 429 says nothing about the upstream's health.
                if !fails_over(status) {
                    health.success(index, status.as_u16(), Some(ttfb));
                }
                let mut route_reason = reason(&up.name, run, status);
                if !response.notes.is_empty() {
                    route_reason = format!("{route_reason} ({})", response.notes.join("; "));
                }
                return Some(Routed::Answer {
                    response,
                    leg: i,
                    attempts: run.attempts,
                    ttfb,
                    route_reason,
                    search_price: None,
                });
            }
            Ok(Ok(response)) => failed_answer(upstreams, (index, i, req.op), response, run).await,
            Ok(Err(e)) => {
                let kind = e.kind();
                tracing::warn!(upstream = %up.name, error = %e, "upstream request failed");
                // A request that could not be built says nothing about the upstream.
                if !matches!(e, SendError::Build(_)) {
                    health.failure(index, None, kind);
                }
                run.failures.push(format!("{}={kind}", up.name));
                matches!(e, SendError::Connect(_) | SendError::Network(_))
            }
            Err(_) => {
                tracing::warn!(upstream = %up.name, ms = upstreams.ttfb.as_millis() as u64, "upstream TTFB timeout");
                health.failure(index, None, "ttfb timeout");
                run.failures.push(format!("{}=ttfb timeout", up.name));
                abandoned.push(i);
                false
            }
        };
        if !(may_retry && retryable)
            || retries >= upstreams.retry.max_retries()
            || !upstreams.retry.try_retry()
        {
            return None;
        }
        tokio::time::sleep(upstreams.retry.backoff(retries)).await;
        retries += 1;
    }
}

/// A 429 from an upstream that knows who is asking (`forward_user_identity`, the person
/// has an email) is that person's own limit: relayed, since another upstream would only
/// route around it.
fn own_limit(up: &crate::config::UpstreamConfig, req: &Request<'_>, answer: &Answer) -> bool {
    answer.status == StatusCode::TOO_MANY_REQUESTS
        && super::headers::per_person_limit(up.forward_user_identity, req.caller.as_ref())
}

/// An answer with a failover status: reported, maybe retained, maybe a cooldown. `true`
/// when the same upstream may be tried again (overloaded).
/// Its warning is logged at most once a minute per upstream and status (the reference
/// logs no line per upstream 5xx, only a rate-limited `upstream 501 on <path>`).
async fn failed_answer(
    upstreams: &Upstreams,
    (index, leg, op): (usize, usize, super::Operation),
    response: Answer,
    run: &mut Run,
) -> bool {
    let (status, name) = (response.status, &upstreams.list[index].name);
    upstreams
        .repeats
        .warn(&if status == StatusCode::NOT_IMPLEMENTED {
            let path = match op {
                super::Operation::Messages => "/v1/messages",
                super::Operation::CountTokens => "/v1/messages/count_tokens",
            };
            format!("upstream 501 on {path}")
        } else {
            format!("upstream {name} answered {}; failing over", status.as_u16())
        });
    upstreams.health.failure(
        index,
        Some(status.as_u16()),
        &format!("HTTP {}", status.as_u16()),
    );
    let retry_after = retry_after(&response.headers, upstreams.health.now());
    if status == StatusCode::TOO_MANY_REQUESTS || retry_after.is_some() && status.is_server_error()
    {
        upstreams.health.cool_down(index, retry_after);
    }
    run.failures.push(format!("{name}={}", status.as_u16()));
    if let Some(rank) = retain_rank(status)
        && run.retained.as_ref().is_none_or(|r| rank > r.0)
    {
        let headers = response.headers.clone();
        let body = response.read_limited(RETAINED_BODY_LIMIT).await;
        run.retained = Some((rank, status, headers, body, leg));
    }
    status.as_u16() == 529
}

/// The rule and the strategy's choice, for `route_reason`.
fn note_for(plan: &Plan<'_>, strategy: Option<String>) -> Option<String> {
    let strategy = strategy.map(|n| match plan.source {
        "default" => n,
        source => format!("{n} (by {source})"),
    });
    let decided = match (plan.rule, strategy) {
        (None, s) => s,
        (Some(r), None) => Some(format!("rule {r}")),
        (Some(r), Some(s)) => Some(format!("rule {r}, {s}")),
    };
    match (decided, plan.shaped) {
        (d, None) => d,
        (None, Some(s)) => Some(format!("shaped: {s}")),
        (Some(d), Some(s)) => Some(format!("{d}; shaped: {s}")),
    }
}

/// `retry-after` as seconds or an HTTP date (relative to `now`).
fn retry_after(headers: &HeaderMap, now: DateTime<Utc>) -> Option<Duration> {
    let v = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = DateTime::parse_from_rfc2822(v).ok()?.with_timezone(&Utc);
    (at - now).to_std().ok()
}

fn all_failed(run: Run) -> Routed {
    let mut summary = format!("all failed: {}", run.failures.join(", "));
    if let Some(n) = &run.note {
        summary = format!("{summary} ({n})");
    }
    if let Some((_, status, headers, body, leg)) = run.retained {
        return Routed::Retained {
            status,
            headers,
            body,
            leg,
            attempts: run.attempts,
            route_reason: summary,
        };
    }
    if run.attempts == 0 && !run.hints.is_empty() {
        return Routed::Failed {
            error: ApiError::UpstreamUnavailable(run.hints.join("; ")),
            attempts: run.attempts,
            route_reason: summary,
        };
    }
    Routed::Failed {
        error: ApiError::AllUpstreamsFailed {
            attempted: run.attempts,
        },
        attempts: run.attempts,
        route_reason: summary,
    }
}

fn reason(name: &str, run: &Run, status: StatusCode) -> String {
    let how = if status.is_success() { "ok" } else { "relayed" };
    let outcome = format!("{how} {}", status.as_u16());
    let failures = run.failures.join(", ");
    let note = run.note.as_deref();
    if run.forced {
        let by = note.map(|n| format!("{n}; ")).unwrap_or_default();
        return format!(
            "{name}: {by}every upstream cooling down or open ({failures}), tried the closest to recovery, {outcome}"
        );
    }
    match (note, run.failures.is_empty()) {
        (None, true) => format!("{name}: first in order, {outcome}"),
        (Some(n), true) => format!("{name}: {n}, {outcome}"),
        (None, false) => format!("{name}: after {failures}, {outcome}"),
        (Some(n), false) => format!("{name}: {n}; after {failures}, {outcome}"),
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

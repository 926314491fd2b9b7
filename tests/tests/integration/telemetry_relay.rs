//! The OTLP relay against a real loopback collector the test controls (answer 200, fail
//! with 500, or hang until released): forwarding by signal with bytes and headers
//! untouched, the breaker per collector and signal, saturation per collector (a stalled
//! collector never starves a healthy one), and credential redaction.
//! The relay is built directly; the gateway's `/v1/{metrics,logs,traces}` routes are
//! tested where they are wired.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use base64::Engine;
use bytes::Bytes;
use gatehouse_engine::config::telemetry::{RawTelemetry, validate};
use gatehouse_engine::events::MemoryEventSink;
use gatehouse_engine::outbound::{FetchPolicy, SafeFetch};
use gatehouse_engine::telemetry::{Relay, Signal, Submitted};
use http::HeaderValue;
use serde_json::{Value, json};
use tokio::sync::watch;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Ok,
    Fail,
    Hang,
    /// Fail requests whose path ends with this, answer 200 to the rest.
    FailOn(&'static str),
}

#[derive(Debug, Clone)]
struct Seen {
    path: String,
    headers: HeaderMap,
    body: Bytes,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }
}

#[derive(Clone)]
struct Collector {
    base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    mode: Arc<Mutex<Mode>>,
    release: Arc<watch::Sender<bool>>,
}

impl Collector {
    async fn start(mode: Mode) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (release, _) = watch::channel(false);
        let c = Collector {
            base: format!("http://{}", listener.local_addr().unwrap()),
            seen: Arc::default(),
            mode: Arc::new(Mutex::new(mode)),
            release: Arc::new(release),
        };
        let app = Router::new().fallback(collect).with_state(c.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        c
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    fn set_mode(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    /// Waits (bounded) until the collector has received `n` requests.
    async fn wait_for(&self, n: usize) {
        for _ in 0..500 {
            if self.count() >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("collector saw {} requests, expected {n}", self.count());
    }
}

async fn collect(
    State(c): State<Collector>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    c.seen.lock().unwrap().push(Seen {
        path: uri.path().to_owned(),
        headers,
        body,
    });
    // A collector that refuses every payload it is given under `/refuse`.
    if uri.path().starts_with("/refuse/") {
        return StatusCode::UNPROCESSABLE_ENTITY;
    }
    let mode = *c.mode.lock().unwrap();
    match mode {
        Mode::Ok => StatusCode::OK,
        Mode::Fail => StatusCode::INTERNAL_SERVER_ERROR,
        Mode::FailOn(suffix) if uri.path().ends_with(suffix) => StatusCode::SERVICE_UNAVAILABLE,
        Mode::FailOn(_) => StatusCode::OK,
        Mode::Hang => {
            let mut rx = c.release.subscribe();
            let _ = tokio::time::timeout(Duration::from_secs(30), rx.wait_for(|r| *r)).await;
            StatusCode::OK
        }
    }
}

fn relay(forward_to: Value, allow_loopback: bool) -> (Relay, Arc<MemoryEventSink>) {
    let raw: RawTelemetry = serde_json::from_value(json!({ "forward_to": forward_to })).unwrap();
    let config = validate(&raw, true).unwrap();
    let fetch = SafeFetch::try_new(FetchPolicy {
        allow_loopback,
        timeout: Duration::from_secs(5),
    })
    .unwrap();
    let events = Arc::new(MemoryEventSink::default());
    (Relay::new(config, fetch, events.clone()), events)
}

fn submit(relay: &Relay, signal: Signal) -> Submitted {
    relay.submit(signal, None, None, Bytes::from_static(b"{}"))
}

const DRAIN: Duration = Duration::from_secs(10);

#[tokio::test]
async fn metrics_are_forwarded_with_bytes_and_headers_untouched() {
    let c = Collector::start(Mode::Ok).await;
    let (relay, _) = relay(
        json!([
            {"url": format!("{}/a", c.base), "headers": {"Authorization": "Bearer otel-token"}},
            {"url": format!("{}/b/", c.base), "metrics": false, "logs": true},
        ]),
        true,
    );
    // A gzip member header followed by bytes that are not UTF-8: must arrive as is.
    let body = Bytes::from_static(&[0x1f, 0x8b, 0x08, 0x00, 0xff, 0xfe, 0x00, 0x80, 0x7f, 0x01]);
    let queued = relay.submit(
        Signal::Metrics,
        Some(HeaderValue::from_static("application/x-protobuf")),
        Some(HeaderValue::from_static("gzip")),
        body.clone(),
    );
    assert_eq!(queued, Submitted::Queued);
    relay.drain(DRAIN).await;
    let seen = c.seen();
    assert_eq!(seen.len(), 1, "only the metrics destination: {seen:?}");
    assert_eq!(seen[0].path, "/a/v1/metrics");
    assert_eq!(seen[0].body, body);
    assert_eq!(
        seen[0].header("content-type"),
        Some("application/x-protobuf")
    );
    assert_eq!(seen[0].header("content-encoding"), Some("gzip"));
    assert_eq!(seen[0].header("authorization"), Some("Bearer otel-token"));

    // Logs go only to the logs destination, without the other one's headers.
    let logs = relay.submit(
        Signal::Logs,
        Some(HeaderValue::from_static("application/json")),
        None,
        Bytes::from_static(b"{\"resourceLogs\":[]}"),
    );
    assert_eq!(logs, Submitted::Queued);
    relay.drain(DRAIN).await;
    let seen = c.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].path, "/b/v1/logs");
    assert_eq!(seen[1].header("content-type"), Some("application/json"));
    assert_eq!(seen[1].header("content-encoding"), None);
    assert_eq!(seen[1].header("authorization"), None);

    assert_eq!(submit(&relay, Signal::Traces), Submitted::NoDestination);
    let stats = relay.stats();
    assert_eq!((stats.forwarded_ok, stats.forwarded_failed), (2, 0));
    assert_eq!(stats.in_flight, 0);
}

#[tokio::test]
async fn logs_are_not_sent_to_a_metrics_only_destination() {
    let c = Collector::start(Mode::Ok).await;
    let (relay, _) = relay(json!([{"url": c.base}]), true);
    assert_eq!(submit(&relay, Signal::Logs), Submitted::NoDestination);
    assert_eq!(submit(&relay, Signal::Traces), Submitted::NoDestination);
    assert_eq!(submit(&relay, Signal::Metrics), Submitted::Queued);
    relay.drain(DRAIN).await;
    let paths: Vec<String> = c.seen().into_iter().map(|s| s.path).collect();
    assert_eq!(paths, ["/v1/metrics"]);
}

#[tokio::test]
async fn breaker_opens_after_five_failures_then_probes() {
    let c = Collector::start(Mode::Fail).await;
    let (relay, events) = relay(json!([{"url": c.base}]), true);
    let relay = relay.with_limits(128, 5, Duration::from_millis(300));
    let redacted = format!("{}/", c.base);
    let endpoint = format!("{}/v1/metrics", c.base);

    for i in 1..=5 {
        assert_eq!(submit(&relay, Signal::Metrics), Submitted::Queued);
        relay.drain(DRAIN).await;
        assert_eq!(c.count(), i);
    }
    assert_eq!(relay.stats().open_breakers, vec![endpoint]);
    let opened = events.named("otlp.breaker_open");
    assert_eq!(opened.len(), 1);
    assert_eq!(opened[0]["destination"], redacted.as_str());
    assert_eq!(opened[0]["signal"], "metrics");

    // Open: the destination is skipped and the collector sees nothing more.
    for _ in 0..3 {
        assert_eq!(submit(&relay, Signal::Metrics), Submitted::Skipped);
    }
    relay.drain(DRAIN).await;
    assert_eq!(c.count(), 5);

    // After the open period one probe goes out; it fails, so the breaker opens again.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(submit(&relay, Signal::Metrics), Submitted::Queued);
    relay.drain(DRAIN).await;
    assert_eq!(c.count(), 6);
    assert_eq!(events.named("otlp.breaker_open").len(), 2);
    assert_eq!(submit(&relay, Signal::Metrics), Submitted::Skipped);
    assert_eq!(c.count(), 6);

    // The collector recovers: the next probe succeeds and closes the breaker.
    c.set_mode(Mode::Ok);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(submit(&relay, Signal::Metrics), Submitted::Queued);
    relay.drain(DRAIN).await;
    assert_eq!(c.count(), 7);
    assert!(relay.stats().open_breakers.is_empty());
    assert_eq!(submit(&relay, Signal::Metrics), Submitted::Queued);
    relay.drain(DRAIN).await;
    assert_eq!(c.count(), 8);

    let stats = relay.stats();
    assert_eq!((stats.forwarded_ok, stats.forwarded_failed), (2, 6));
    assert_eq!(stats.skipped, 4);
    assert_eq!(stats.dropped, 0);
}

#[tokio::test]
async fn saturation_drops_without_blocking() {
    let c = Collector::start(Mode::Hang).await;
    let (relay, events) = relay(json!([{"url": c.base}]), true);
    let relay = relay.with_limits(4, 5, Duration::from_secs(30));

    for _ in 0..4 {
        assert_eq!(submit(&relay, Signal::Metrics), Submitted::Queued);
    }
    // All four are now held by the hanging collector...
    c.wait_for(4).await;
    assert_eq!(relay.stats().in_flight, 4);
    // ...and further submits return at once, dropped.
    for _ in 0..6 {
        assert_eq!(submit(&relay, Signal::Metrics), Submitted::Dropped);
    }
    let stats = relay.stats();
    assert_eq!((stats.in_flight, stats.dropped), (4, 6));
    assert_eq!(c.count(), 4);

    c.release.send_replace(true);
    relay.drain(DRAIN).await;
    let stats = relay.stats();
    assert_eq!(
        (stats.in_flight, stats.forwarded_ok, stats.dropped),
        (0, 4, 6)
    );
    let reported: u64 = events
        .named("otlp.dropped")
        .iter()
        .map(|e| e["count"].as_u64().unwrap())
        .sum();
    assert_eq!(reported, 6);
    // Capacity is back.
    c.set_mode(Mode::Ok);
    assert_eq!(submit(&relay, Signal::Metrics), Submitted::Queued);
    relay.drain(DRAIN).await;
    assert_eq!(c.count(), 5);
}

/// Waits (bounded) until `n` exports are in flight.
async fn settle(relay: &Relay, n: usize) {
    for _ in 0..500 {
        if relay.stats().in_flight == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{} in flight, expected {n}", relay.stats().in_flight);
}

/// The bound of exports in flight is per collector (2.1.334): a collector that hangs fills
/// its own slots and drops its own exports while a healthy one keeps receiving all of them.
#[tokio::test]
async fn a_stalled_collector_does_not_starve_a_healthy_one() {
    let stalled = Collector::start(Mode::Hang).await;
    let healthy = Collector::start(Mode::Ok).await;
    let (relay, _) = relay(json!([{"url": stalled.base}, {"url": healthy.base}]), true);
    let relay = relay.with_limits(4, 5, Duration::from_secs(30));
    for _ in 0..4 {
        assert_eq!(submit(&relay, Signal::Metrics), Submitted::Queued);
    }
    stalled.wait_for(4).await;
    healthy.wait_for(4).await;
    // The stalled collector is full; every further export still reaches the healthy one
    // (each sent once the healthy one has answered the one before).
    for n in 5..=24 {
        settle(&relay, 4).await;
        assert_eq!(submit(&relay, Signal::Metrics), Submitted::Queued);
        healthy.wait_for(n).await;
    }
    settle(&relay, 4).await;
    let stats = relay.stats();
    assert_eq!((stats.in_flight, stats.dropped), (4, 20));
    assert_eq!(stalled.count(), 4);
    assert_eq!(healthy.count(), 24);
    stalled.release.send_replace(true);
    relay.drain(DRAIN).await;
    let stats = relay.stats();
    assert_eq!((stats.in_flight, stats.forwarded_ok), (0, 28));
}

/// The breaker is per collector and per signal: a collector failing its `/v1/logs` is
/// skipped for logs only, and its metrics keep flowing.
#[tokio::test]
async fn a_breaker_opens_for_the_failing_signal_only() {
    let c = Collector::start(Mode::FailOn("/v1/logs")).await;
    let (relay, events) = relay(json!([{"url": c.base, "logs": true}]), true);
    for i in 1..=5 {
        assert_eq!(submit(&relay, Signal::Logs), Submitted::Queued);
        relay.drain(DRAIN).await;
        assert_eq!(c.count(), i);
    }
    assert_eq!(
        relay.stats().open_breakers,
        vec![format!("{}/v1/logs", c.base)]
    );
    let opened = events.named("otlp.breaker_open");
    assert_eq!(opened.len(), 1);
    assert_eq!(opened[0]["signal"], "logs");
    assert_eq!(opened[0]["open_ms"], 30_000);
    assert_eq!(submit(&relay, Signal::Logs), Submitted::Skipped);
    for _ in 0..3 {
        assert_eq!(submit(&relay, Signal::Metrics), Submitted::Queued);
    }
    relay.drain(DRAIN).await;
    let paths: Vec<String> = c.seen().into_iter().skip(5).map(|s| s.path).collect();
    assert_eq!(paths, ["/v1/metrics"; 3]);
    let stats = relay.stats();
    assert_eq!((stats.forwarded_ok, stats.forwarded_failed), (3, 5));
    assert_eq!(stats.skipped, 1);
}

/// A collector that refuses the payload itself (400, 413, 415, 422, 431) is answering, not
/// failing: its breaker stays closed however often it refuses.
#[tokio::test]
async fn payload_refusals_do_not_open_the_breaker() {
    let c = Collector::start(Mode::Ok).await;
    let (relay, _) = relay(json!([{"url": format!("{}/refuse", c.base)}]), true);
    for _ in 0..7 {
        assert_eq!(submit(&relay, Signal::Metrics), Submitted::Queued);
        relay.drain(DRAIN).await;
    }
    let stats = relay.stats();
    assert_eq!((stats.refused, stats.forwarded_failed), (7, 0));
    assert!(stats.open_breakers.is_empty());
    assert_eq!(c.count(), 7);
}

#[tokio::test]
async fn url_credentials_are_sent_but_never_reported() {
    let c = Collector::start(Mode::Fail).await;
    let with_creds = c.base.replace("http://", "http://otel-user:s3cr3t-pw@");
    let (relay, events) = relay(json!([{"url": with_creds}]), true);
    let relay = relay.with_limits(128, 2, Duration::from_secs(60));
    for _ in 0..2 {
        assert_eq!(submit(&relay, Signal::Metrics), Submitted::Queued);
        relay.drain(DRAIN).await;
    }
    // The user info goes to the collector as basic auth...
    let basic = base64::engine::general_purpose::STANDARD.encode("otel-user:s3cr3t-pw");
    for s in c.seen() {
        assert_eq!(
            s.header("authorization"),
            Some(format!("Basic {basic}").as_str())
        );
    }
    // ...and nowhere else.
    let redacted = format!("{}/", c.base);
    let opened = events.named("otlp.breaker_open");
    assert_eq!(opened.len(), 1);
    assert_eq!(opened[0]["destination"], redacted.as_str());
    let stats = relay.stats();
    assert_eq!(stats.open_breakers, vec![format!("{}/v1/metrics", c.base)]);
    let reported = format!(
        "{} {stats:?}",
        serde_json::to_string(&events.events()).unwrap()
    );
    assert!(!reported.contains("s3cr3t"), "{reported}");
    assert!(!reported.contains("otel-user"), "{reported}");
}

#[tokio::test]
async fn loopback_destinations_are_refused_by_the_strict_policy() {
    let c = Collector::start(Mode::Ok).await;
    let (relay, _) = relay(json!([{"url": c.base}]), false);
    assert_eq!(submit(&relay, Signal::Metrics), Submitted::Queued);
    relay.drain(DRAIN).await;
    assert_eq!(c.count(), 0);
    assert_eq!(relay.stats().forwarded_failed, 1);
}

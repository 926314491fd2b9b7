//! Unit tests for the relay: signals, endpoints, and that destination credentials stay out
//! of operator logs and events (captured with a small in-test `tracing` subscriber).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use url::Url;

use super::*;
use crate::config::telemetry::{RawTelemetry, validate};
use crate::events::MemoryEventSink;
use crate::outbound::{FetchPolicy, SafeFetch};

#[test]
fn signals_from_paths() {
    for s in Signal::ALL {
        assert_eq!(Signal::from_path(s.path()), Some(s));
        assert_eq!(s.path(), format!("/v1/{}", s.as_str()));
    }
    assert_eq!(Signal::from_path("/v1/metric"), None);
    assert_eq!(Signal::from_path("/v1/metrics/"), None);
}

#[test]
fn endpoints_append_to_the_base_path() {
    let cases = [
        ("https://otel.example", "https://otel.example/v1/metrics"),
        ("https://otel.example/", "https://otel.example/v1/metrics"),
        (
            "https://otel.example/otlp",
            "https://otel.example/otlp/v1/metrics",
        ),
        (
            "https://otel.example/otlp/",
            "https://otel.example/otlp/v1/metrics",
        ),
        (
            "http://u:p@c:4318/a%20b?x=1",
            "http://u:p@c:4318/a%20b/v1/metrics?x=1",
        ),
    ];
    for (base, want) in cases {
        assert_eq!(
            endpoint(&Url::parse(base).unwrap(), Signal::Metrics).as_str(),
            want
        );
    }
}

/// A minimal subscriber that writes every event's fields into a string.
struct Capture {
    out: Arc<Mutex<String>>,
    next_id: AtomicU64,
}

struct Fields<'a>(&'a mut String);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={:?} ", field.name(), value));
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(self.next_id.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut line = String::new();
        event.record(&mut Fields(&mut line));
        let mut out = self.out.lock().unwrap();
        out.push_str(&line);
        out.push('\n');
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

fn config(json: serde_json::Value) -> TelemetryConfig {
    let raw: RawTelemetry = serde_json::from_value(json).unwrap();
    validate(&raw, true).unwrap()
}

/// A port nothing listens on (bound, then released).
async fn closed_port() -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap().port()
}

#[tokio::test(flavor = "current_thread")]
async fn credentials_never_reach_logs_or_events() {
    let out = Arc::new(Mutex::new(String::new()));
    let _guard = tracing::subscriber::set_default(Capture {
        out: out.clone(),
        next_id: AtomicU64::new(0),
    });
    let port = closed_port().await;
    let cfg = config(serde_json::json!({"forward_to": [{
        "url": format!("http://otel-user:hunter2-pw@127.0.0.1:{port}/otlp?token=qs-secret"),
        "headers": {"authorization": "Bearer header-secret"},
    }]}));
    let events = Arc::new(MemoryEventSink::default());
    let fetch = SafeFetch::new(FetchPolicy {
        allow_loopback: true,
        timeout: Duration::from_secs(5),
    });
    let relay = Relay::new(cfg, fetch, events.clone()).with_limits(1, 2, Duration::from_secs(60));
    for _ in 0..2 {
        assert_eq!(
            relay.submit(Signal::Metrics, None, None, Bytes::from_static(b"x")),
            Submitted::Queued
        );
        relay.drain(Duration::from_secs(10)).await;
    }
    assert_eq!(
        relay.submit(Signal::Metrics, None, None, Bytes::new()),
        Submitted::Skipped
    );
    let stats = relay.stats();
    assert_eq!(stats.forwarded_failed, 2);
    let at = format!("http://127.0.0.1:{port}/otlp/v1/metrics");
    assert_eq!(stats.open_breakers, vec![at.clone()]);

    // The reference's lines: the first failure counted, the second trips the breaker.
    let logs = out.lock().unwrap().clone();
    assert!(
        logs.contains(&format!("otel forward to {at} failed: ")),
        "{logs}"
    );
    assert!(
        logs.contains(&format!(
            "otel dest {at} tripped; skipping 60s (last failure: "
        )),
        "{logs}"
    );
    let opened = events.named("otlp.breaker_open");
    assert_eq!(opened.len(), 1);
    assert_eq!(
        opened[0]["destination"],
        format!("http://127.0.0.1:{port}/otlp")
    );
    let all_events = serde_json::to_string(&events.events()).unwrap();
    for secret in ["hunter2-pw", "otel-user", "qs-secret", "header-secret"] {
        assert!(!logs.contains(secret), "{secret} in logs: {logs}");
        assert!(
            !all_events.contains(secret),
            "{secret} in events: {all_events}"
        );
        assert!(!format!("{stats:?}").contains(secret));
    }
}

/// A saturated collector is named in the reference's line, for the first drop and every
/// hundredth after it (not once per drop).
#[tokio::test(flavor = "current_thread")]
async fn saturation_is_logged_per_collector_every_hundredth_drop() {
    let out = Arc::new(Mutex::new(String::new()));
    let _guard = tracing::subscriber::set_default(Capture {
        out: out.clone(),
        next_id: AtomicU64::new(0),
    });
    let cfg =
        config(serde_json::json!({"forward_to": [{"url": "http://u:pw@127.0.0.1:9/otlp?k=v"}]}));
    let fetch = SafeFetch::new(FetchPolicy {
        allow_loopback: true,
        timeout: Duration::from_secs(5),
    });
    let relay = Relay::new(cfg, fetch, Arc::new(MemoryEventSink::default())).with_limits(
        0,
        5,
        Duration::from_secs(30),
    );
    for _ in 0..100 {
        assert_eq!(
            relay.submit(Signal::Metrics, None, None, Bytes::new()),
            Submitted::Dropped
        );
    }
    let logs = out.lock().unwrap().clone();
    let line = "otel fanout saturated (0 in flight to http://127.0.0.1:9/otlp); dropping";
    assert_eq!(logs.matches(line).count(), 1, "{logs}");
    relay.submit(Signal::Metrics, None, None, Bytes::new());
    let logs = out.lock().unwrap().clone();
    assert_eq!(logs.matches(line).count(), 2, "{logs}");
    assert!(!logs.contains("pw") && !logs.contains("k=v"), "{logs}");
}

#[tokio::test(flavor = "current_thread")]
async fn drops_are_reported_in_batches() {
    let cfg = config(serde_json::json!({"forward_to": [{"url": "http://127.0.0.1:9/"}]}));
    let events = Arc::new(MemoryEventSink::default());
    let fetch = SafeFetch::new(FetchPolicy {
        allow_loopback: true,
        timeout: Duration::from_secs(5),
    });
    let relay = Relay::new(cfg, fetch, events.clone()).with_limits(0, 5, Duration::from_secs(30));
    for _ in 0..5 {
        assert_eq!(
            relay.submit(Signal::Metrics, None, None, Bytes::new()),
            Submitted::Dropped
        );
    }
    assert_eq!(
        relay.submit(Signal::Logs, None, None, Bytes::new()),
        Submitted::NoDestination
    );
    // The first drop is reported at once, the rest within the window only on drain.
    let counts = |e: &MemoryEventSink| -> Vec<u64> {
        e.named("otlp.dropped")
            .iter()
            .map(|v| v["count"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(counts(&events), vec![1]);
    relay.drain(Duration::from_secs(1)).await;
    assert_eq!(counts(&events), vec![1, 4]);
    assert_eq!(relay.stats().dropped, 5);
}

#[test]
fn submit_outside_a_runtime_drops() {
    let cfg = config(serde_json::json!({"forward_to": [{"url": "http://127.0.0.1:9/"}]}));
    let fetch = SafeFetch::new(FetchPolicy {
        allow_loopback: true,
        timeout: Duration::from_secs(1),
    });
    let relay = Relay::new(cfg, fetch, Arc::new(MemoryEventSink::default()));
    assert_eq!(
        relay.submit(Signal::Metrics, None, None, Bytes::new()),
        Submitted::Dropped
    );
    assert_eq!(relay.stats().in_flight, 0);
}

/// `auth.google`: each export carries the access token a service account gets from its
/// key file's `token_uri` (here a loopback token endpoint), replacing nothing the operator
/// set. The url rule (https `*.googleapis.com`) is the config's and is tested there; this
/// destination is built past it to reach a loopback collector.
#[tokio::test]
async fn google_auth_puts_a_service_account_token_on_each_export() {
    use axum::routing::post;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key.pem");
    let out = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
        ])
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success());
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let tokens: Arc<AtomicU64> = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (seen2, tokens2) = (seen.clone(), tokens.clone());
    let app = axum::Router::new()
        .route(
            "/token",
            post(move |body: String| {
                let tokens = tokens2.clone();
                async move {
                    assert!(body.contains("jwt-bearer"), "{body}");
                    tokens.fetch_add(1, Ordering::SeqCst);
                    axum::Json(serde_json::json!({"access_token": "ya29.otlp-token", "expires_in": 3600, "token_type": "Bearer"}))
                }
            }),
        )
        .route(
            "/otlp/v1/metrics",
            post(move |headers: http::HeaderMap| {
                let seen = seen2.clone();
                async move {
                    let auth = headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    seen.lock().unwrap().push(auth);
                    "ok"
                }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let sa = dir.path().join("sa.json");
    std::fs::write(
        &sa,
        serde_json::json!({
            "type": "service_account",
            "client_email": "otel@proj.iam.gserviceaccount.com",
            "private_key": std::fs::read_to_string(&key).unwrap(),
            "private_key_id": "k1",
            "project_id": "proj",
            "token_uri": format!("{base}/token"),
        })
        .to_string(),
    )
    .unwrap();
    let mut cfg = config(
        serde_json::json!({"forward_to": [{"url": format!("{base}/otlp"), "headers": {"x-goog-user-project": "proj"}}]}),
    );
    cfg.destinations[0].google = Some(crate::config::GoogleAuth::ServiceAccountFile(sa));
    let fetch = SafeFetch::new(FetchPolicy {
        allow_loopback: true,
        timeout: Duration::from_secs(5),
    });
    let relay = Relay::new(cfg, fetch, Arc::new(MemoryEventSink::default()));
    for _ in 0..2 {
        assert_eq!(
            relay.submit(Signal::Metrics, None, None, Bytes::from_static(b"x")),
            Submitted::Queued
        );
        relay.drain(Duration::from_secs(10)).await;
    }
    assert_eq!(
        *seen.lock().unwrap(),
        vec!["Bearer ya29.otlp-token".to_owned(); 2]
    );
    assert_eq!(tokens.load(Ordering::SeqCst), 1, "the token is cached");
    assert_eq!(relay.stats().forwarded_ok, 2);
}

/// Without usable Google credentials the export fails (counted, never sent bare).
#[tokio::test]
async fn google_auth_without_credentials_sends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(serde_json::json!({"forward_to": [{"url": "http://127.0.0.1:9/otlp"}]}));
    cfg.destinations[0].google = Some(crate::config::GoogleAuth::ServiceAccountFile(
        dir.path().join("missing.json"),
    ));
    let fetch = SafeFetch::new(FetchPolicy {
        allow_loopback: true,
        timeout: Duration::from_secs(5),
    });
    let relay = Relay::new(cfg, fetch, Arc::new(MemoryEventSink::default()));
    relay.submit(Signal::Metrics, None, None, Bytes::from_static(b"x"));
    relay.drain(Duration::from_secs(10)).await;
    let stats = relay.stats();
    assert_eq!((stats.forwarded_ok, stats.forwarded_failed), (0, 1));
}

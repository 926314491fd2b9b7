//! Health that steers routing: cooldown after a 429 (exactly its `retry-after`, on the
//! gateway's clock), a breaker opened by streams that fail after their first byte, the
//! half-open trial, stalled streams, same-upstream retry of 529s and connection errors, and
//! the retry budget in a total outage (counted at the fakes).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use fake_upstream::{FakeConfig, FakeUpstream, Fault};
use gatehouse_engine::deps::{Deps, MapEnvironment, NoCredentialStore};
use gatehouse_engine::events::MemoryEventSink;
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, OffsetClock, TestGateway, load, sonnet};

/// Gateway in front of fakes `a` (its `fake`) and `b`, in that order, with `routing` as
/// given and a clock the test moves.
async fn pair(
    routing: &str,
    a_config: FakeConfig,
) -> (TestGateway, FakeUpstream, Arc<OffsetClock>) {
    let a = FakeUpstream::start(a_config).await.unwrap();
    let b = FakeUpstream::start(FakeConfig {
        reply_text: "from b".into(),
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        r#"
listen: {{host: 127.0.0.1, port: 0}}
store: {{sqlite_path: "{db}"}}
upstreams:
  - {{name: a, provider: anthropic, base_url: "{a}", auth: {{api_key: "{OPERATOR_KEY}"}}}}
  - {{name: b, provider: anthropic, base_url: "{b}", auth: {{api_key: "{OPERATOR_KEY}"}}}}
client_keys: [{{id: tester, key: "{CLIENT_KEY}"}}]
{routing}
"#,
        db = dir.path().join("g.db").display(),
        a = a.url(),
        b = b.url(),
    );
    let config = load(&yaml, dir.path());
    let (gw, clock) = start(config, a, dir).await;
    (gw, b, clock)
}

/// A single upstream (`primary`, the fake).
async fn single(routing: &str) -> (TestGateway, Arc<OffsetClock>) {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        r#"
listen: {{host: 127.0.0.1, port: 0}}
store: {{sqlite_path: "{db}"}}
upstreams:
  - {{name: primary, provider: anthropic, base_url: "{url}", auth: {{api_key: "{OPERATOR_KEY}"}}}}
client_keys: [{{id: tester, key: "{CLIENT_KEY}"}}]
{routing}
"#,
        db = dir.path().join("g.db").display(),
        url = fake.url(),
    );
    let config = load(&yaml, dir.path());
    start(config, fake, dir).await
}

async fn start(
    config: gatehouse_engine::Config,
    fake: FakeUpstream,
    dir: tempfile::TempDir,
) -> (TestGateway, Arc<OffsetClock>) {
    let clock = Arc::new(OffsetClock::default());
    let events = Arc::new(MemoryEventSink::default());
    let deps = Deps {
        clock: clock.clone(),
        env: Arc::new(MapEnvironment::default()),
        credentials: Arc::new(NoCredentialStore),
        events: events.clone(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let handle = gatehouse_engine::server::start_on(listener, config, deps)
        .await
        .unwrap();
    let gw = TestGateway {
        handle,
        fake,
        events,
        dir,
        client: reqwest::Client::builder().no_proxy().build().unwrap(),
    };
    (gw, clock)
}

/// Sends one request; the upstream that answered (header), the status, the body.
async fn send(gw: &TestGateway, stream: bool) -> (u16, String, String) {
    let resp = gw.messages(sonnet(stream)).send().await.unwrap();
    let status = resp.status().as_u16();
    let upstream = resp
        .headers()
        .get("x-gatehouse-upstream")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, upstream, resp.text().await.unwrap())
}

fn status(status: u16, retry_after: Option<u32>) -> Fault {
    Fault::Status {
        status,
        retry_after,
        error_type: None,
        message: None,
    }
}

/// The newest usage row's route reason once `n` rows exist.
async fn last_reason(gw: &TestGateway, n: usize) -> String {
    gw.usage_rows(n).await[0].route_reason.clone()
}

#[tokio::test]
async fn a_429_cools_the_upstream_down_for_exactly_its_retry_after() {
    let (gw, b, clock) = pair("", FakeConfig::default()).await;
    gw.fake.push_fault(status(429, Some(30)));
    assert_eq!(send(&gw, false).await.1, "b");
    assert_eq!(last_reason(&gw, 1).await, "b: after a=429, ok 200");
    // The next requests go straight to b: a is not even asked.
    assert_eq!(send(&gw, false).await.1, "b");
    assert_eq!(
        last_reason(&gw, 2).await,
        "b: after a=cooling down 30s, ok 200"
    );
    clock.advance(29);
    assert_eq!(send(&gw, true).await.1, "b");
    assert_eq!(
        last_reason(&gw, 3).await,
        "b: after a=cooling down 1s, ok 200"
    );
    assert_eq!(gw.fake.requests().len(), 1);
    // 30 s after the 429, a is back first in line.
    clock.advance(1);
    assert_eq!(send(&gw, false).await.1, "a");
    assert_eq!(last_reason(&gw, 4).await, "a: first in order, ok 200");
    assert_eq!(gw.fake.requests().len(), 2);
    assert_eq!(b.requests().len(), 3);
    let cooldowns = gw.events.named("upstream.cooldown");
    assert_eq!(cooldowns.len(), 1);
    assert_eq!(cooldowns[0]["upstream"], "a");
    assert_eq!(cooldowns[0]["seconds"], 30);
}

#[tokio::test]
async fn streams_failing_after_the_first_byte_open_the_breaker() {
    let (gw, b, _) = pair(
        "routing: {health: {breaker_failures: 2, breaker_open_s: 60}}",
        FakeConfig::default(),
    )
    .await;
    // An error event mid-stream, then a connection reset mid-stream: both after a 200.
    gw.fake
        .push_fault(Fault::MidStreamError { after_deltas: 2 });
    gw.fake
        .push_fault(Fault::ResetMidStream { after_deltas: 2 });
    let (code, up, body) = send(&gw, true).await;
    assert_eq!((code, up.as_str()), (200, "a"));
    assert!(body.contains("event: error"));
    let resp = gw.messages(sonnet(true)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.text().await.is_err(), "the reset reaches the caller");
    // Two failures in the window: a's breaker is open, the next request goes to b.
    let (code, up, _) = send(&gw, true).await;
    assert_eq!((code, up.as_str()), (200, "b"));
    assert_eq!(last_reason(&gw, 3).await, "b: after a=breaker open, ok 200");
    assert_eq!(gw.fake.requests().len(), 2);
    assert_eq!(b.requests().len(), 1);
    let opened = gw.events.named("upstream.breaker");
    assert_eq!(opened.len(), 1);
    assert_eq!(opened[0]["upstream"], "a");
    assert_eq!(opened[0]["breaker"], "open");
    let errors: Vec<String> = gw
        .events
        .named("upstream.state")
        .iter()
        .filter(|e| e["upstream"] == "a")
        .map(|e| e["state"].as_str().unwrap().to_owned())
        .collect();
    // Each stream: healthy at its headers, degraded when it broke.
    assert_eq!(errors, ["healthy", "degraded", "healthy", "degraded"]);
}

#[tokio::test]
async fn half_open_lets_one_trial_through() {
    let (gw, b, clock) = pair(
        "routing: {health: {breaker_failures: 1, breaker_open_s: 30}}",
        FakeConfig::default(),
    )
    .await;
    gw.fake.push_fault(status(500, None));
    assert_eq!(send(&gw, false).await.1, "b");
    assert_eq!(send(&gw, false).await.1, "b");
    assert_eq!(last_reason(&gw, 2).await, "b: after a=breaker open, ok 200");
    clock.advance(30);
    // The trial is slow; while it is out, other requests still skip a.
    gw.fake.push_fault(Fault::HangBeforeHeaders { ms: 800 });
    let trial = {
        let req = gw.messages(sonnet(false));
        tokio::spawn(async move { req.send().await.unwrap() })
    };
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(send(&gw, false).await.1, "b", "only one trial at a time");
    let trial = trial.await.unwrap();
    assert_eq!(trial.headers()["x-gatehouse-upstream"], "a");
    // The trial succeeded: closed, a is first again.
    assert_eq!(send(&gw, false).await.1, "a");
    assert_eq!(gw.fake.requests().len(), 3);
    assert_eq!(b.requests().len(), 3);
    let phases: Vec<String> = gw
        .events
        .named("upstream.breaker")
        .iter()
        .map(|e| e["breaker"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(phases, ["open", "half_open", "closed"]);
}

#[tokio::test]
async fn with_every_upstream_cooling_the_closest_is_tried_anyway() {
    let (gw, _) = single("").await;
    gw.fake.push_fault(status(429, Some(30)));
    let (code, _, _) = send(&gw, false).await;
    assert_eq!(code, 429, "the upstream's own answer");
    let (code, up, _) = send(&gw, false).await;
    assert_eq!((code, up.as_str()), (200, "primary"));
    assert_eq!(
        last_reason(&gw, 2).await,
        "primary: every upstream cooling down or open (primary=cooling down 30s), tried the closest to recovery, ok 200"
    );
    assert_eq!(gw.fake.requests().len(), 2);
}

#[tokio::test]
async fn overload_and_connection_errors_are_retried_on_the_last_upstream() {
    let (gw, _) = single("routing: {retry: {backoff_ms: 5}}").await;
    gw.fake.push_fault(status(529, None));
    let resp = gw.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-gatehouse-failover-count"], "1");
    assert_eq!(
        last_reason(&gw, 1).await,
        "primary: after primary=529, ok 200"
    );
    gw.fake.push_fault(Fault::ResetBeforeHeaders);
    assert_eq!(send(&gw, true).await.0, 200);
    assert!(
        last_reason(&gw, 2)
            .await
            .starts_with("primary: after primary=network error"),
    );
    assert_eq!(gw.fake.requests().len(), 4);
    // Not retried: a 500 (the upstream said no), and anything once retries are off.
    gw.fake.push_fault(status(500, None));
    assert_eq!(send(&gw, false).await.0, 502);
    assert_eq!(gw.fake.requests().len(), 5);
}

#[tokio::test]
async fn retries_are_off_with_max_retries_zero() {
    let (gw, _) = single("routing: {retry: {max_retries: 0}}").await;
    gw.fake.push_fault(status(529, None));
    assert_eq!(send(&gw, false).await.0, 502);
    assert_eq!(gw.fake.requests().len(), 1);
}

#[tokio::test]
async fn the_retry_budget_caps_extra_load_in_a_total_outage() {
    // Breakers off, so that every request reaches both upstreams and only the budget
    // limits the retries: at most 10 % of the requests (at least 1) per 10 s.
    let (gw, b, _) = pair(
        "routing: {health: {enabled: false}, retry: {max_retries: 3, backoff_ms: 1, budget_ratio: 0.1, budget_min: 1}}",
        FakeConfig::default(),
    )
    .await;
    const N: usize = 20;
    for _ in 0..N * 3 {
        gw.fake.push_fault(status(529, None));
        b.push_fault(status(529, None));
    }
    for _ in 0..N {
        assert_eq!(send(&gw, false).await.0, 502);
    }
    let (a_count, b_count) = (gw.fake.requests().len(), b.requests().len());
    assert_eq!(a_count, N, "a is never retried: b comes after it");
    let retries = b_count - N;
    assert!(
        (1..=2).contains(&retries),
        "{retries} retries for {N} requests"
    );
}

#[tokio::test]
async fn a_stalled_stream_counts_as_a_failure_and_is_not_cut() {
    let (gw, _b, _) = pair(
        "routing: {health: {stream_stall_ms: 150}}",
        FakeConfig {
            first_token_delay_ms: 600,
            ..FakeConfig::default()
        },
    )
    .await;
    let (code, up, body) = send(&gw, true).await;
    assert_eq!((code, up.as_str()), (200, "a"));
    assert!(body.contains("message_stop"), "the stream ran to its end");
    let snap: serde_json::Value = gw
        .client
        .get(gw.url("/gatehouse/api/dashboard"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let a = &snap["upstreams"][0];
    assert_eq!(a["state"], "degraded");
    assert_eq!(a["last_error"], "stream stalled");
    assert_eq!(
        a["error_rate"], 0.5,
        "one success at the headers, one stall"
    );
    assert!(a["ttfb_p95_ms"].is_u64());
}

#[tokio::test]
async fn the_active_probe_finds_an_upstream_down_and_back_and_is_metered() {
    let (gw, b, _) = pair(
        "routing: {health: {breaker_failures: 1, breaker_open_s: 1, probe: true, probe_interval_s: 1, probe_model: claude-haiku-4-5}}",
        FakeConfig::default(),
    )
    .await;
    // No traffic at all: the first round finds a failing, the next one (its trial) back.
    gw.fake.push_fault(status(500, None));
    let mut phases = Vec::new();
    for _ in 0..60 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        phases = gw
            .events
            .named("upstream.breaker")
            .iter()
            .filter(|e| e["upstream"] == "a")
            .map(|e| e["breaker"].as_str().unwrap().to_owned())
            .collect();
        if phases.len() >= 3 {
            break;
        }
    }
    assert_eq!(phases, ["open", "half_open", "closed"]);
    let probes = gw.fake.requests();
    assert!(probes.len() >= 2);
    for r in probes.iter().chain(b.requests().iter()) {
        assert_eq!(r.body["max_tokens"], 1);
        // The probe model's dated first-party id, as any request for it is sent.
        assert_eq!(r.body["model"], "claude-haiku-4-5-20251001");
    }
    // Each probe is a usage row of its own, priced like any request.
    let rows = gw.usage_rows(3).await;
    assert!(rows.iter().all(|r| r.principal == "gatehouse:probe"));
    assert!(rows.iter().any(|r| r.route_reason == "a: probe, 500"));
    let ok = rows
        .iter()
        .find(|r| r.route_reason == "a: probe, 200")
        .expect("a's trial probe");
    assert!(ok.cost_micro_usd > 0 && ok.output_tokens > 0);
}

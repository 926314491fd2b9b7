//! The OTLP relay through the gateway: signed-in clients (the real Claude Code CLI among
//! them) post telemetry, the gateway answers 200 at once and forwards to a loopback
//! collector; managed settings tell clients where to send it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::routing::post;
use gatehouse_tests::{CLIENT_KEY, SESSION_SECRET_A, SignInGateway, sign_in_gateway, sonnet};
use serde_json::Value;

type Seen = Arc<Mutex<Vec<(String, HeaderMap, Bytes)>>>;

async fn collect(
    State(seen): State<Seen>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    seen.lock()
        .unwrap()
        .push((uri.path().to_owned(), headers, body));
    StatusCode::OK
}

async fn collector() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = Router::new()
        .route("/otlp/v1/metrics", post(collect))
        .route("/otlp/v1/logs", post(collect))
        .route("/otlp/v1/traces", post(collect))
        .with_state(seen.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("{url}/otlp"), seen)
}

fn alice(s: &SignInGateway) -> String {
    gatehouse_tests::session_token(&s.origin, "alice", "alice@corp.example", &["engineering"])
}

async fn wait_for(seen: &Seen, n: usize) -> Vec<(String, HeaderMap, Bytes)> {
    for _ in 0..200 {
        if seen.lock().unwrap().len() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    seen.lock().unwrap().clone()
}

async fn gateway(collector_url: &str) -> SignInGateway {
    let extra = format!(
        "telemetry:\n  allow_loopback: true\n  forward_to:\n    - {{url: \"{collector_url}\", headers: {{authorization: \"Bearer collector-secret\"}}, metrics: true, logs: true, traces: false}}\n  resource_attributes: {{department: eng, cost_center: cc-42}}\nmanaged:\n  policies:\n    - match: {{}}\n      cli: {{env: {{TEAM: all}}}}\n"
    );
    sign_in_gateway(&[SESSION_SECRET_A], &extra).await
}

#[tokio::test]
async fn payloads_are_accepted_at_once_and_forwarded() {
    let (url, seen) = collector().await;
    let s = gateway(&url).await;
    let token = alice(&s);
    let r =
        s.gw.client
            .post(s.gw.url("/v1/logs"))
            .bearer_auth(&token)
            .header("content-type", "application/x-protobuf")
            .body(vec![0x0a, 0x02, 0x08, 0x01])
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 200);
    let r =
        s.gw.client
            .post(s.gw.url("/v1/traces"))
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
    assert_eq!(
        r.status(),
        200,
        "traces are accepted even though no destination takes them"
    );
    assert_eq!(r.text().await.unwrap(), "{}");
    let got = wait_for(&seen, 1).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, "/otlp/v1/logs");
    assert_eq!(got[0].1["authorization"], "Bearer collector-secret");
    assert_eq!(got[0].2.as_ref(), &[0x0a, 0x02, 0x08, 0x01]);
    assert!(got[0].1.get("x-api-key").is_none());
    // Only people: a static key and an anonymous caller are refused.
    let r =
        s.gw.client
            .post(s.gw.url("/v1/metrics"))
            .header("x-api-key", CLIENT_KEY)
            .body("x")
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(
        s.gw.client
            .post(s.gw.url("/v1/metrics"))
            .body("x")
            .send()
            .await
            .unwrap()
            .status(),
        401
    );

    // Managed settings point clients at the gateway's OTLP endpoint.
    let settings: Value =
        s.gw.client
            .get(s.gw.url("/managed/settings"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let env = &settings["settings"]["env"];
    assert_eq!(env["TEAM"], "all");
    assert_eq!(env["CLAUDE_CODE_ENABLE_TELEMETRY"], "1");
    assert_eq!(env["OTEL_EXPORTER_OTLP_ENDPOINT"], s.origin);
    assert_eq!(env["OTEL_EXPORTER_OTLP_PROTOCOL"], "http/protobuf");
    // As the reference: an exporter per signal some collector takes, and the labels.
    assert_eq!(env["OTEL_METRICS_EXPORTER"], "otlp");
    assert_eq!(env["OTEL_LOGS_EXPORTER"], "otlp");
    assert_eq!(env["OTEL_TRACES_EXPORTER"], "none");
    assert_eq!(
        env["OTEL_RESOURCE_ATTRIBUTES"],
        "cost_center=cc-42,department=eng"
    );
}

#[tokio::test]
async fn a_dead_collector_does_not_touch_inference() {
    // A port nobody listens on.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let s = gateway(&dead).await;
    let token = alice(&s);
    for _ in 0..8 {
        let r =
            s.gw.client
                .post(s.gw.url("/v1/metrics"))
                .bearer_auth(&token)
                .body(vec![1, 2, 3])
                .send()
                .await
                .unwrap();
        assert_eq!(r.status(), 200);
        let r =
            s.gw.client
                .post(s.gw.url("/v1/messages"))
                .bearer_auth(&token)
                .json(&sonnet(false))
                .send()
                .await
                .unwrap();
        assert_eq!(r.status(), 200);
    }
    for _ in 0..100 {
        if !s.gw.events.named("otlp.breaker_open").is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let opened = s.gw.events.named("otlp.breaker_open");
    assert_eq!(opened.len(), 1, "five failures open the breaker once");
    assert!(
        !serde_json::to_string(&s.gw.events.events())
            .unwrap()
            .contains("collector-secret")
    );
}

#[tokio::test]
async fn claude_code_sends_its_telemetry_through_the_gateway() {
    let (url, seen) = collector().await;
    let s = gateway(&url).await;
    let token = alice(&s);
    let home = tempfile::tempdir().unwrap();
    // The OTLP variables are what managed settings hand a signed-in client (endpoint = the
    // gateway); the bearer is attached the way a gateway-connected client does.
    let auth_header = format!("Authorization=Bearer {token}");
    let out = gatehouse_tests::claude_print(
        "hello",
        home.path(),
        &[
            ("CLAUDE_CODE_USE_GATEWAY", "1"),
            ("ANTHROPIC_BASE_URL", s.origin.as_str()),
            ("ANTHROPIC_AUTH_TOKEN", token.as_str()),
            ("CLAUDE_CODE_MAX_RETRIES", "0"),
            ("CLAUDE_CODE_ENABLE_TELEMETRY", "1"),
            ("OTEL_METRICS_EXPORTER", "otlp"),
            ("OTEL_LOGS_EXPORTER", "otlp"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", s.origin.as_str()),
            ("OTEL_EXPORTER_OTLP_HEADERS", auth_header.as_str()),
            ("OTEL_METRIC_EXPORT_INTERVAL", "500"),
            ("OTEL_LOGS_EXPORT_INTERVAL", "500"),
        ],
    )
    .await;
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let got = wait_for(&seen, 1).await;
    assert!(
        !got.is_empty(),
        "Claude Code's telemetry reached the collector through the gateway: {:?} {:?}",
        s.gw.events.events(),
        s.gw.handle.gateway().relay.stats()
    );
    let paths: Vec<&str> = got.iter().map(|(p, _, _)| p.as_str()).collect();
    assert!(
        paths
            .iter()
            .all(|p| *p == "/otlp/v1/logs" || *p == "/otlp/v1/metrics"),
        "{paths:?}"
    );
    assert!(
        got.iter()
            .all(|(_, h, _)| h["authorization"] == "Bearer collector-secret"),
        "the collector never sees the user's token"
    );
}

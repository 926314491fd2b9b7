//! Strategies over two fakes: weighted shares, cheapest, fastest after warm-up, region, a
//! strategy per model, and the override header (refused for a caller that may not use it).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fake_upstream::{FakeConfig, FakeUpstream};
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, TestGateway, load, sonnet};

/// Gateway in front of fakes `a` (its `fake`) and `b` with `routing` as given.
async fn pair(routing: &str, a: FakeConfig, b: FakeConfig) -> (TestGateway, FakeUpstream) {
    let a = FakeUpstream::start(a).await.unwrap();
    let b = FakeUpstream::start(b).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        r#"
listen: {{host: 127.0.0.1, port: 0}}
store: {{sqlite_path: "{db}"}}
upstreams:
  - {{name: a, provider: anthropic, base_url: "{a}", auth: {{api_key: "{OPERATOR_KEY}"}}}}
  - {{name: b, provider: anthropic, base_url: "{b}", auth: {{api_key: "{OPERATOR_KEY}"}}}}
client_keys:
  - {{id: tester, key: "{CLIENT_KEY}"}}
  - {{id: ops, key: "{OPS_KEY}"}}
{routing}
"#,
        db = dir.path().join("g.db").display(),
        a = a.url(),
        b = b.url(),
    );
    let config = load(&yaml, dir.path());
    (TestGateway::start_config(config, a, dir).await, b)
}

const OPS_KEY: &str = "ops-client-key-0123456789abcdef0123456789ab";

/// Which upstream answered one request (with extra headers), and its route reason.
async fn who(gw: &TestGateway, key: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut req = gw
        .client
        .post(gw.url("/v1/messages"))
        .header("x-api-key", key)
        .header("anthropic-version", "2023-06-01")
        .json(&sonnet(false));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    match resp.headers().get("x-gatehouse-upstream") {
        Some(v) => (status, v.to_str().unwrap().to_owned()),
        None => (status, resp.text().await.unwrap()),
    }
}

async fn reason(gw: &TestGateway, n: usize) -> String {
    gw.usage_rows(n).await[0].route_reason.clone()
}

#[tokio::test]
async fn weighted_shares_follow_the_weights_inside_the_best_band() {
    let (gw, b) = pair(
        "routing: {strategy: weighted, random_seed: 11, upstreams: {a: {weight: 3}, b: {weight: 1}}}",
        FakeConfig::default(),
        FakeConfig::default(),
    )
    .await;
    // Each request a new conversation: conversations spread by weight (rendezvous).
    const N: usize = 200;
    for n in 0..N {
        let session = format!("share-{n}");
        let sent = who(&gw, CLIENT_KEY, &[("x-claude-code-session-id", &session)]).await;
        assert_eq!(sent.0, 200);
    }
    let (a_n, b_n) = (gw.fake.requests().len(), b.requests().len());
    assert_eq!(a_n + b_n, N);
    let share = a_n as f64 / N as f64;
    assert!((0.65..=0.85).contains(&share), "a's share {share} (3:1)");
    let r = reason(&gw, N).await;
    assert!(r.contains("by conversation (weighted)"), "{r}");
}

#[tokio::test]
async fn a_lower_priority_band_is_only_a_fallback() {
    let (gw, b) = pair(
        "routing: {strategy: weighted, upstreams: {a: {priority: 1, weight: 100}, b: {priority: 0}}}",
        FakeConfig::default(),
        FakeConfig::default(),
    )
    .await;
    for n in 1..=20 {
        let up = who(&gw, CLIENT_KEY, &[]).await.1;
        assert_eq!(up, "b", "{}", reason(&gw, n).await);
    }
    assert!(gw.fake.requests().is_empty());
    assert_eq!(b.requests().len(), 20);
}

#[tokio::test]
async fn cheapest_picks_the_cheaper_upstream() {
    let (gw, _b) = pair(
        "routing: {strategy: cheapest, upstreams: {a: {cost_weight: 1.0}, b: {cost_weight: 0.5}}}",
        FakeConfig::default(),
        FakeConfig::default(),
    )
    .await;
    for _ in 0..3 {
        assert_eq!(who(&gw, CLIENT_KEY, &[]).await.1, "b");
    }
    // Sonnet: $3 input + $15 output per million tokens; b at half.
    assert_eq!(
        reason(&gw, 3).await,
        "b: cheapest: b 9.00 < a 18.00 $/Mtok, ok 200"
    );
    // The row names the upstream that answered, whatever order the legs were tried in.
    assert_eq!(gw.usage_rows(3).await[0].upstream.as_deref(), Some("b"));
    assert!(gw.fake.requests().is_empty());
}

#[tokio::test]
async fn fastest_moves_to_the_faster_upstream_after_warm_up() {
    let (gw, _b) = pair(
        "routing: {strategy: fastest, random_seed: 5}",
        FakeConfig {
            header_delay_ms: 150,
            ..FakeConfig::default()
        },
        FakeConfig::default(),
    )
    .await;
    // Warm-up: new conversations spread (by conversation, weighted) until both have
    // enough samples.
    let mut warm = false;
    for n in 1..=60 {
        let session = format!("warm-up-{n}");
        who(&gw, CLIENT_KEY, &[("x-claude-code-session-id", &session)]).await;
        let r = reason(&gw, n).await;
        if r.contains("fastest: p95") {
            warm = true;
            break;
        }
        assert!(r.contains("by conversation (fastest)"), "{r}");
    }
    assert!(warm, "both upstreams got samples");
    let before = gw.fake.requests().len();
    for _ in 0..5 {
        assert_eq!(who(&gw, CLIENT_KEY, &[]).await.1, "b");
    }
    assert_eq!(gw.fake.requests().len(), before, "the slow one rests");
    let r = reason(&gw, 1).await;
    assert!(r.starts_with("b: fastest: p95 b "), "{r}");
}

#[tokio::test]
async fn region_prefers_the_callers_region() {
    let (gw, _b) = pair(
        "routing: {strategy: region, upstreams: {a: {region: us}, b: {region: eu}}}",
        FakeConfig::default(),
        FakeConfig::default(),
    )
    .await;
    assert_eq!(
        who(&gw, CLIENT_KEY, &[("x-gatehouse-region", "eu")])
            .await
            .1,
        "b"
    );
    assert_eq!(
        who(&gw, CLIENT_KEY, &[("x-gatehouse-region", "us")])
            .await
            .1,
        "a"
    );
    assert_eq!(reason(&gw, 2).await, "a: region us: drew a, ok 200");
}

#[tokio::test]
async fn a_strategy_per_model_overrides_the_default() {
    let (gw, _b) = pair(
        "routing: {strategy: ordered, models: {claude-sonnet-4-6: cheapest}, upstreams: {b: {cost_weight: 0.1}}}",
        FakeConfig::default(),
        FakeConfig::default(),
    )
    .await;
    assert_eq!(who(&gw, CLIENT_KEY, &[]).await.1, "b");
    assert!(reason(&gw, 1).await.contains("(by model)"));
}

#[tokio::test]
async fn the_override_header_is_only_for_allowed_callers() {
    let (gw, _b) = pair(
        "routing: {allow_override: {client_keys: [ops]}, upstreams: {b: {cost_weight: 0.1}}}",
        FakeConfig::default(),
        FakeConfig::default(),
    )
    .await;
    let h = [("x-gatehouse-strategy", "cheapest")];
    // `tester` may not choose: refused, nothing sent.
    let (status, body) = who(&gw, CLIENT_KEY, &h).await;
    assert_eq!(status, 403);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["type"], "permission_error");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("x-gatehouse-strategy")
    );
    assert!(gw.fake.requests().is_empty());
    let denied = gw.events.named("access.denied");
    assert_eq!(denied[0]["reason"], "routing_override_not_allowed");
    // `ops` may: honoured and named.
    assert_eq!(who(&gw, OPS_KEY, &h).await.1, "b");
    assert!(reason(&gw, 1).await.contains("(by header)"));
    // Without the header the default (ordered) applies.
    assert_eq!(who(&gw, OPS_KEY, &[]).await.1, "a");
    // An unknown strategy is a 400 for those allowed.
    let (status, _) = who(&gw, OPS_KEY, &[("x-gatehouse-strategy", "random")]).await;
    assert_eq!(status, 400);
}

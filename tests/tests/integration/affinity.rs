//! Conversation affinity and cache health over two fakes: a Claude Code session stays on
//! one upstream whatever the weighted draw would say, conversations spread by weight, two
//! gateways with nothing shared agree, a failover moves a conversation and it stays where
//! it went, affinity off (or excepted for a model) routes per request, and a cache that
//! breaks on a provider hop is reported with its cause.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use fake_upstream::{FakeConfig, FakeUpstream, Fault};
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, TestGateway, load};
use serde_json::{Value, json};

/// A gateway in front of fakes `a` (its `fake`) and `b`, and `b`.
async fn pair(routing: &str, a: FakeConfig, b: FakeConfig) -> (TestGateway, FakeUpstream) {
    let a = FakeUpstream::start(a).await.unwrap();
    let b = FakeUpstream::start(b).await.unwrap();
    let gw = gateway_for(routing, &a.url(), &b.url()).await;
    (TestGateway::start_config(gw.0, a, gw.1).await, b)
}

async fn gateway_for(
    routing: &str,
    a: &str,
    b: &str,
) -> (gatehouse_engine::Config, tempfile::TempDir) {
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
admin: {{read_keys: [{{id: prom, key: "{READ_KEY}"}}]}}
{routing}
"#,
        db = dir.path().join("g.db").display(),
    );
    (load(&yaml, dir.path()), dir)
}

const READ_KEY: &str = "prom-read-key-0123456789abcdef0123456789abcd";

const WEIGHTED: &str = "routing: {strategy: weighted, upstreams: {a: {weight: 1}, b: {weight: 1}}}";

/// A turn of Claude Code session `session`: the history grows, the system prompt stays.
fn turn(turns: usize, model: &str) -> Value {
    let mut messages = Vec::new();
    for t in 0..turns {
        messages.push(json!({"role": "user", "content": [{"type": "text", "text": format!("question {t} {}", "x".repeat(2000))}]}));
        if t + 1 < turns {
            messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": format!("answer {t}")}]}));
        }
    }
    if let Some(Value::Object(last)) = messages.last_mut()
        && let Some(Value::Array(content)) = last.get_mut("content")
    {
        content[0]["cache_control"] = json!({"type": "ephemeral"});
    }
    json!({
        "model": model,
        "max_tokens": 64,
        "system": [{"type": "text", "text": "You are Claude Code. ".repeat(400), "cache_control": {"type": "ephemeral"}}],
        "messages": messages,
    })
}

/// Sends one turn; the upstream that answered.
async fn send(gw: &TestGateway, session: &str, body: &Value) -> String {
    let resp = gw
        .messages(body.clone())
        .header("x-claude-code-session-id", session)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp.headers()
        .get("x-gatehouse-upstream")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned()
}

/// The upstream of each turn of `sessions` sessions × `turns` turns.
async fn run(gw: &TestGateway, sessions: usize, turns: usize) -> BTreeMap<String, Vec<String>> {
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in 1..=turns {
        for s in 0..sessions {
            let session = format!("0b5e{s:04}-6a5c-4c47-9b4e-{s:012}");
            let up = send(gw, &session, &turn(t, "claude-sonnet-4-6")).await;
            seen.entry(session).or_default().push(up);
        }
    }
    seen
}

#[tokio::test]
async fn a_session_stays_on_one_upstream_and_sessions_spread_by_weight() {
    let (gw, _b) = pair(WEIGHTED, FakeConfig::default(), FakeConfig::default()).await;
    let seen = run(&gw, 24, 4).await;
    let mut on_a = 0;
    for (session, ups) in &seen {
        assert!(
            ups.iter().all(|u| *u == ups[0]),
            "{session} hopped: {ups:?}"
        );
        on_a += usize::from(ups[0] == "a");
    }
    assert!((4..=20).contains(&on_a), "{on_a} of 24 sessions on a (1:1)");
    let rows = gw.usage_rows(24 * 4).await;
    assert!(
        rows.iter()
            .all(|r| r.route_reason.contains("affinity: ") && r.route_reason.contains("(weighted)")),
        "{:?}",
        rows.first().map(|r| &r.route_reason)
    );
    // From the second turn on, the previous turn's upstream is named.
    assert!(
        rows.iter()
            .any(|r| r.route_reason.contains("the previous turn's upstream"))
    );
}

#[tokio::test]
async fn two_gateways_sharing_nothing_send_a_session_to_the_same_upstream() {
    let a = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let b = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let (c1, d1) = gateway_for(WEIGHTED, &a.url(), &b.url()).await;
    let (c2, d2) = gateway_for(WEIGHTED, &a.url(), &b.url()).await;
    let other_a = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let g1 = TestGateway::start_config(c1, a, d1).await;
    let g2 = TestGateway::start_config(c2, other_a, d2).await;
    let mut spread = [0usize; 2];
    for s in 0..16 {
        let session = format!("replica-session-{s}");
        let first = send(&g1, &session, &turn(1, "claude-sonnet-4-6")).await;
        let second = send(&g2, &session, &turn(2, "claude-sonnet-4-6")).await;
        assert_eq!(first, second, "{session}: the replicas disagree");
        spread[usize::from(first == "a")] += 1;
    }
    assert!(spread[0] > 0 && spread[1] > 0, "{spread:?}");
}

#[tokio::test]
async fn a_failover_moves_the_conversation_and_it_stays_where_it_went() {
    let (gw, b) = pair(
        "routing: {strategy: weighted, health: {breaker_failures: 1, breaker_open_s: 1}, upstreams: {a: {weight: 1}, b: {weight: 1}}}",
        FakeConfig::default(),
        FakeConfig::default(),
    )
    .await;
    // A conversation whose rendezvous choice is a.
    let mut session = String::new();
    for s in 0..64 {
        session = format!("failover-session-{s}");
        if send(&gw, &session, &turn(1, "claude-sonnet-4-6")).await == "a" {
            break;
        }
    }
    let b_before = b.requests().len();
    gw.fake.push_fault(Fault::Status {
        status: 503,
        retry_after: None,
        error_type: None,
        message: None,
    });
    assert_eq!(
        send(&gw, &session, &turn(2, "claude-sonnet-4-6")).await,
        "b"
    );
    // a is healthy again after its breaker's open time; the conversation stays on b,
    // where its cache is, and says why.
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    gatehouse_tests::wait_until("the row of the failover", || async {
        gw.usage_rows(1).await[0].upstream.as_deref() == Some("b")
    })
    .await;
    assert_eq!(
        send(&gw, &session, &turn(3, "claude-sonnet-4-6")).await,
        "b"
    );
    gatehouse_tests::wait_until(
        "turn 3's row names the previous turn's upstream",
        || async {
            let r = gw.usage_rows(1).await[0].route_reason.clone();
            r.starts_with("b: affinity: b, the previous turn's upstream (weighted)")
        },
    )
    .await;
    assert_eq!(b.requests().len(), b_before + 2);
}

#[tokio::test]
async fn without_affinity_turns_are_routed_one_by_one() {
    for routing in [
        "routing: {strategy: weighted, affinity: {enabled: false}, upstreams: {a: {weight: 1}, b: {weight: 1}}}",
        "routing: {strategy: weighted, affinity: {except_models: [claude-sonnet-*]}, upstreams: {a: {weight: 1}, b: {weight: 1}}}",
    ] {
        let (gw, _b) = pair(routing, FakeConfig::default(), FakeConfig::default()).await;
        let seen = run(&gw, 8, 4).await;
        let hopped = seen
            .values()
            .filter(|ups| ups.iter().any(|u| *u != ups[0]))
            .count();
        assert!(
            hopped > 0,
            "{routing}: no session hopped in 8 × 4 turns: {seen:?}"
        );
        let rows = gw.usage_rows(32).await;
        assert!(rows.iter().all(|r| !r.route_reason.contains("affinity")));
    }
}

#[tokio::test]
async fn a_cache_broken_by_a_provider_hop_is_reported_with_its_cause() {
    let cached = FakeConfig {
        prompt_cache: true,
        ..FakeConfig::default()
    };
    let (gw, _b) = pair(
        "routing: {health: {breaker_failures: 1, breaker_open_s: 60}}",
        cached.clone(),
        cached,
    )
    .await;
    let session = "cache-session";
    for t in 1..=2 {
        assert_eq!(send(&gw, session, &turn(t, "claude-sonnet-4-6")).await, "a");
    }
    gatehouse_tests::wait_until("two rows", || async { gw.usage_rows(2).await.len() == 2 }).await;
    let rows = gw.usage_rows(2).await;
    assert!(
        rows[0].cache_read_tokens > 0,
        "the second turn reads a's cache"
    );
    gw.fake.push_fault(Fault::Status {
        status: 503,
        retry_after: None,
        error_type: None,
        message: None,
    });
    assert_eq!(send(&gw, session, &turn(3, "claude-sonnet-4-6")).await, "b");
    gatehouse_tests::wait_until("the cache.broken event", || async {
        gw.events
            .events()
            .iter()
            .any(|e| e["evt"] == "cache.broken")
    })
    .await;
    let events = gw.events.events();
    let broke = events.iter().find(|e| e["evt"] == "cache.broken").unwrap();
    assert_eq!(broke["cause"].as_str(), Some("upstream_switch"));
    assert_eq!(broke["upstream"].as_str(), Some("b"));
    assert_eq!(broke["session_id"].as_str(), Some(session));
    // The dashboard lists it with its explanation, and /metrics counts it.
    let dash: Value = gw
        .client
        .get(gw.url("/gatehouse/api/dashboard"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let listed = &dash["cache_breaks"][0];
    assert_eq!(listed["cause"], "upstream_switch");
    assert!(
        listed["explanation"]
            .as_str()
            .unwrap()
            .contains("moved from upstream a")
    );
    let metrics = gw
        .client
        .get(gw.url("/metrics"))
        .header("x-api-key", READ_KEY)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .contains("gatehouse_cache_breaks_total{upstream=\"b\",cause=\"upstream_switch\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("gatehouse_prompt_tokens_total{upstream=\"a\",model=\"claude-sonnet-4-6\",kind=\"cache_read\"}"));
}

#[tokio::test]
async fn a_conversation_keeps_its_pool_key() {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let keys: Vec<String> = (0..4)
        .map(|i| format!("sk-pool-key-{i}-never-shown"))
        .collect();
    let yaml = format!(
        r#"
listen: {{host: 127.0.0.1, port: 0}}
store: {{sqlite_path: "{db}"}}
upstreams:
  - name: pool
    provider: anthropic
    base_url: "{url}"
    auth: {{api_keys: [{keys}]}}
client_keys: [{{id: tester, key: "{CLIENT_KEY}"}}]
"#,
        db = dir.path().join("g.db").display(),
        url = fake.url(),
        keys = keys
            .iter()
            .map(|k| format!("\"{k}\""))
            .collect::<Vec<_>>()
            .join(", "),
    );
    let gw = TestGateway::start_config(load(&yaml, dir.path()), fake, dir).await;
    let mut used_by_session: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in 1..=3 {
        for s in 0..8 {
            let session = format!("pool-session-{s}");
            send(&gw, &session, &turn(t, "claude-sonnet-4-6")).await;
            let last = gw.fake.requests().last().cloned().unwrap();
            let key = last
                .headers
                .iter()
                .find(|(k, _)| k == "x-api-key")
                .map(|(_, v)| v.clone())
                .unwrap();
            used_by_session.entry(session).or_default().push(key);
        }
    }
    let mut distinct = std::collections::BTreeSet::new();
    for (session, used) in &used_by_session {
        assert!(
            used.iter().all(|k| *k == used[0]),
            "{session} changed keys: {used:?}"
        );
        distinct.insert(used[0].clone());
    }
    assert!(
        distinct.len() > 1,
        "8 conversations all on one key: {distinct:?}"
    );
}

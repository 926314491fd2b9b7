//! `Idempotency-Key`: a repeat gets the first answer (JSON or stream, byte for byte) marked
//! `idempotent-replayed: true` without reaching the upstream or adding a usage row; a
//! different body under the key is 422; keys are per principal; a duplicate arriving while
//! the first runs waits for it (or gets 409 once its wait is over); an answer too long to
//! keep is never run twice.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use fake_upstream::FakeConfig;
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, TestGateway, sonnet};
use serde_json::{Value, json};

const OTHER_KEY: &str = "other-client-key-0123456789abcdef0123456789";

async fn gateway(fake: FakeConfig, idempotency: &str) -> TestGateway {
    let idempotency = idempotency.to_owned();
    TestGateway::start_with(fake, move |url: &str, db: &Path| {
        format!(
            r#"
listen: {{host: 127.0.0.1, port: 0}}
store: {{sqlite_path: "{db}"}}
upstreams:
  - {{name: primary, provider: anthropic, base_url: "{url}", auth: {{api_key: "{OPERATOR_KEY}"}}}}
client_keys: [{{id: tester, key: "{CLIENT_KEY}"}}, {{id: other, key: "{OTHER_KEY}"}}]
idempotency: {idempotency}
"#,
            db = db.display()
        )
    })
    .await
}

fn paced(ms: u64) -> FakeConfig {
    FakeConfig {
        output_tokens: u32::try_from(ms / 50).unwrap(),
        first_token_delay_ms: 10,
        token_interval_ms: 50,
        ..FakeConfig::default()
    }
}

async fn send(gw: &TestGateway, key: &str, body: &Value) -> (u16, http::HeaderMap, bytes::Bytes) {
    let r = gw
        .messages(body.clone())
        .header("idempotency-key", key)
        .send()
        .await
        .unwrap();
    let (status, headers) = (r.status().as_u16(), r.headers().clone());
    (status, headers, r.bytes().await.unwrap())
}

/// The usage rows stay at `n` (a replay would add none).
async fn settled_rows(gw: &TestGateway, n: usize) {
    gw.usage_rows(n).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(gw.handle.store().recent_usage(100).await.unwrap().len(), n);
}

#[tokio::test]
async fn a_repeat_is_replayed_byte_for_byte_without_the_upstream_or_a_charge() {
    let gw = gateway(FakeConfig::default(), "{}").await;
    for (i, stream) in [false, true].into_iter().enumerate() {
        let key = format!("retry-{i}");
        let (s1, h1, b1) = send(&gw, &key, &sonnet(stream)).await;
        assert_eq!(s1, 200);
        assert!(!h1.contains_key("idempotent-replayed"));
        // The answer is kept once it was sent whole.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (s2, h2, b2) = send(&gw, &key, &sonnet(stream)).await;
        assert_eq!(s2, 200, "{}", String::from_utf8_lossy(&b2));
        assert_eq!(h2["idempotent-replayed"], "true");
        assert_eq!(h2["content-type"], h1["content-type"]);
        assert_eq!(b1, b2, "the same answer, message id included");
        assert_eq!(gw.fake.requests().len(), i + 1, "one upstream call per key");
    }
    settled_rows(&gw, 2).await;

    // Another body under a used key: 422, nothing sent.
    let mut other = sonnet(false);
    other["max_tokens"] = 7.into();
    let (s, _, b) = send(&gw, "retry-0", &other).await;
    assert_eq!(s, 422);
    let v: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(v["error"]["type"], "invalid_request_error");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("different request body")
    );

    // Another principal with the same key is not served the stored answer.
    let r = gw
        .client
        .post(gw.url("/v1/messages"))
        .header("x-api-key", OTHER_KEY)
        .header("idempotency-key", "retry-0")
        .json(&sonnet(false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(!r.headers().contains_key("idempotent-replayed"));
    r.bytes().await.unwrap();
    assert_eq!(gw.fake.requests().len(), 3);
    settled_rows(&gw, 3).await;
}

#[tokio::test]
async fn a_duplicate_in_flight_waits_for_the_first_answer() {
    let gw = gateway(paced(1000), "{wait_seconds: 10}").await;
    let body = sonnet(true);
    let first = send(&gw, "k", &body);
    let second = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        send(&gw, "k", &body).await
    };
    let ((s1, _, b1), (s2, h2, b2)) = tokio::join!(first, second);
    assert_eq!((s1, s2), (200, 200));
    assert_eq!(h2["idempotent-replayed"], "true");
    assert_eq!(b1, b2);
    assert_eq!(gw.fake.requests().len(), 1, "the upstream was called once");
    settled_rows(&gw, 1).await;
}

#[tokio::test]
async fn a_duplicate_past_its_wait_gets_409_and_a_long_answer_is_never_run_twice() {
    let gw = gateway(paced(1000), "{wait_seconds: 0, max_body_bytes: 200}").await;
    let body = sonnet(true);
    let first = send(&gw, "k", &body);
    let second = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        send(&gw, "k", &body).await
    };
    let ((s1, _, b1), (s2, _, b2)) = tokio::join!(first, second);
    assert_eq!(s1, 200);
    assert!(b1.len() > 200, "the stream is longer than the bound");
    assert_eq!(s2, 409);
    let v: Value = serde_json::from_slice(&b2).unwrap();
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("in progress")
    );
    // The answer was too long to keep: a repeat is refused rather than run (and charged)
    // again.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (s3, _, b3) = send(&gw, "k", &body).await;
    assert_eq!(s3, 409);
    let v: Value = serde_json::from_slice(&b3).unwrap();
    assert!(v["error"]["message"].as_str().unwrap().contains("not kept"));
    assert_eq!(gw.fake.requests().len(), 1);
}

#[tokio::test]
async fn a_refused_request_gives_its_key_back() {
    // The bad model is refused before routing: a corrected retry under the same key runs.
    let gw = gateway(FakeConfig::default(), "{wait_seconds: 1}").await;
    let bad = json!({"model": "claude-nonexistent-9", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]});
    let (s, _, _) = send(&gw, "k", &bad).await;
    assert_eq!(s, 400);
    let (s, h, _) = send(&gw, "k", &bad).await;
    assert_eq!(s, 400);
    assert!(!h.contains_key("idempotent-replayed"));
    assert_eq!(gw.fake.requests().len(), 0);
}

#[tokio::test]
async fn concurrent_duplicates_across_two_postgres_replicas_reach_the_upstream_once() {
    use gatehouse_tests::caps::{msg, token};
    let db = gatehouse_tests::postgres::TestDatabase::create().await;
    let r = gatehouse_tests::replicas::start(2, |_| db.store_yaml(), "").await;
    r.fake.set_config(paced(500));
    let alice = token(&r.origin, "alice", &["engineering"]);
    let body = msg(32);
    let answers = futures_util::future::join_all((0..8).map(|i| {
        let url = format!("{}/v1/messages", r.replicas[i % 2].url);
        let req = r
            .client
            .post(url)
            .bearer_auth(&alice)
            .header("idempotency-key", "same")
            .json(&body);
        async move {
            let resp = req.send().await.unwrap();
            let replayed = resp.headers().contains_key("idempotent-replayed");
            (
                resp.status().as_u16(),
                replayed,
                resp.bytes().await.unwrap(),
            )
        }
    }))
    .await;
    assert!(answers.iter().all(|(s, _, _)| *s == 200));
    assert_eq!(
        answers.iter().filter(|(_, replayed, _)| !replayed).count(),
        1
    );
    assert!(answers.iter().all(|(_, _, b)| *b == answers[0].2));
    assert_eq!(r.fake.requests().len(), 1);
    let store = r.replicas[0].handle.store();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        store.recent_usage(100).await.unwrap().len(),
        1,
        "charged once"
    );
    r.shutdown().await;
}

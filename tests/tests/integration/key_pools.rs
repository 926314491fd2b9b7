//! Key pools (`auth.api_keys`): a revoked key and a rate-limited key are set aside while
//! the good key carries every request; events and the dashboard name key ids only.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use fake_upstream::FakeConfig;
use gatehouse_tests::{CLIENT_KEY, TestGateway, sonnet};
use serde_json::Value;

const REVOKED: &str = "sk-pool-revoked-key-never-shown";
const BUSY: &str = "sk-pool-busy-key-never-shown";
const GOOD: &str = "sk-pool-good-key-never-shown";

async fn pooled() -> TestGateway {
    let gw = TestGateway::start_with(FakeConfig::default(), |url: &str, db: &Path| {
        format!(
            r#"
listen: {{host: 127.0.0.1, port: 0}}
store: {{sqlite_path: "{db}"}}
upstreams:
  - name: pool
    provider: anthropic
    base_url: "{url}"
    auth:
      api_keys: ["{REVOKED}", {{id: busy, key: "{BUSY}"}}, "{GOOD}"]
client_keys: [{{id: tester, key: "{CLIENT_KEY}"}}]
# Keys in turn, request by request (with affinity a conversation keeps its key).
routing: {{affinity: {{enabled: false}}}}
"#,
            db = db.display()
        )
    })
    .await;
    gw.fake.refuse_key(REVOKED, 401, None);
    gw.fake.refuse_key(BUSY, 429, Some(30));
    gw
}

fn key_of(headers: &[(String, String)]) -> String {
    headers
        .iter()
        .find(|(k, _)| k == "x-api-key")
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn bad_keys_are_set_aside_and_requests_keep_succeeding() {
    let gw = pooled().await;
    for stream in [false, true, false, true, false, true] {
        let resp = gw.messages(sonnet(stream)).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        let body = resp.text().await.unwrap();
        let done = if stream {
            "message_stop"
        } else {
            "fake upstream"
        };
        assert!(body.contains(done), "{body}");
    }
    let used: Vec<String> = gw
        .fake
        .requests()
        .iter()
        .map(|r| key_of(&r.headers))
        .collect();
    // The revoked and the busy key were each tried once, then only the good key.
    assert_eq!(used.iter().filter(|k| *k == REVOKED).count(), 1, "{used:?}");
    assert_eq!(used.iter().filter(|k| *k == BUSY).count(), 1, "{used:?}");
    assert_eq!(used.iter().filter(|k| *k == GOOD).count(), 6, "{used:?}");
    let rows = gw.usage_rows(6).await;
    assert!(rows.iter().all(|r| r.status == 200));

    let aside = gw.events.named("upstream.key_set_aside");
    assert_eq!(aside.len(), 1);
    assert_eq!(aside[0]["key_id"], "key-1");
    assert_eq!(aside[0]["status"], 401);
    let cooling = gw.events.named("upstream.key_cooling");
    assert_eq!(cooling.len(), 1);
    assert_eq!(cooling[0]["key_id"], "busy");

    let snap: Value = gw
        .client
        .get(gw.url("/gatehouse/api/dashboard"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let keys = snap["upstreams"][0]["keys"].as_array().unwrap().clone();
    let states: Vec<(&str, &str)> = keys
        .iter()
        .map(|k| (k["id"].as_str().unwrap(), k["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        states,
        [
            ("key-1", "set_aside"),
            ("busy", "cooling"),
            ("key-3", "ready")
        ]
    );
    assert_eq!(keys[2]["uses"], 6);

    // No key value, or any part of one, in events or the page.
    let everything = format!("{:?}{snap}", gw.events.events());
    for key in [REVOKED, BUSY, GOOD] {
        assert!(!everything.contains(&key[8..]), "a key leaked");
    }
}

#[tokio::test]
async fn a_pool_with_every_key_cooling_answers_429_with_the_soonest_retry_after() {
    let gw = pooled().await;
    gw.fake.refuse_key(GOOD, 429, Some(5));
    let resp = gw.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(resp.status(), 429);
    let wait: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (1..=5).contains(&wait),
        "the good key's 5 s, not 30: {wait}"
    );
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["type"], "rate_limit_error");
    // While every key cools down, nothing more is sent upstream.
    let before = gw.fake.requests().len();
    assert_eq!(before, 3);
    let resp = gw.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(gw.fake.requests().len(), before);
}

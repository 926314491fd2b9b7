//! Two replicas on the test PostgreSQL share upstream health: a breaker opened by one, and
//! a cooldown one of them learned from a 429, are respected by the other within a second.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use fake_upstream::{FakeConfig, FakeUpstream, Fault};
use gatehouse_engine::Handle;
use gatehouse_engine::deps::{Deps, MapEnvironment, NoCredentialStore, SystemClock};
use gatehouse_engine::events::MemoryEventSink;
use gatehouse_tests::postgres::TestDatabase;
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, load, sonnet};

struct Replica {
    handle: Handle,
    events: Arc<MemoryEventSink>,
}

async fn replica(db: &TestDatabase, a: &FakeUpstream, b: &FakeUpstream) -> Replica {
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        r#"
listen: {{host: 127.0.0.1, port: 0}}
{store}
upstreams:
  - {{name: a, provider: anthropic, base_url: "{a}", auth: {{api_key: "{OPERATOR_KEY}"}}}}
  - {{name: b, provider: anthropic, base_url: "{b}", auth: {{api_key: "{OPERATOR_KEY}"}}}}
client_keys: [{{id: tester, key: "{CLIENT_KEY}"}}]
routing: {{health: {{breaker_failures: 1, breaker_open_s: 60}}}}
"#,
        store = db.store_yaml(),
        a = a.url(),
        b = b.url(),
    );
    let config = load(&yaml, dir.path());
    let events = Arc::new(MemoryEventSink::default());
    let deps = Deps {
        clock: Arc::new(SystemClock),
        env: Arc::new(MapEnvironment::default()),
        credentials: Arc::new(NoCredentialStore),
        events: events.clone(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let handle = gatehouse_engine::server::start_on(listener, config, deps)
        .await
        .unwrap();
    Replica { handle, events }
}

/// The upstream that answered a request to `r`.
async fn send(r: &Replica) -> String {
    let resp = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("{}/v1/messages", r.handle.base_url()))
        .header("x-api-key", CLIENT_KEY)
        .header("anthropic-version", "2023-06-01")
        .json(&sonnet(false))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp.headers()["x-gatehouse-upstream"]
        .to_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_breaker_opened_by_one_replica_is_respected_by_the_other_within_a_second() {
    let db = TestDatabase::create().await;
    let a = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let b = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let (one, two) = (replica(&db, &a, &b).await, replica(&db, &a, &b).await);
    assert_eq!(send(&two).await, "a", "closed everywhere at first");
    // One sees a fail: its breaker opens.
    a.push_fault(Fault::Status {
        status: 500,
        retry_after: None,
        error_type: None,
        message: None,
    });
    assert_eq!(send(&one).await, "b");
    let seen = a.requests().len();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // Two never saw a fail, but skips it now.
    assert_eq!(send(&two).await, "b");
    assert_eq!(a.requests().len(), seen, "two did not ask a");
    let adopted = two.events.named("upstream.breaker");
    assert_eq!(adopted.len(), 1);
    assert_eq!(adopted[0]["breaker"], "open");
    assert_eq!(adopted[0]["source"], "replica");
    assert!(
        one.events.named("upstream.breaker")[0]
            .get("source")
            .is_none()
    );
}

#[tokio::test]
async fn a_cooldown_learned_by_one_replica_is_respected_by_the_other() {
    let db = TestDatabase::create().await;
    let a = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let b = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let (one, two) = (replica(&db, &a, &b).await, replica(&db, &a, &b).await);
    a.push_fault(Fault::Status {
        status: 429,
        retry_after: Some(30),
        error_type: None,
        message: None,
    });
    assert_eq!(send(&one).await, "b");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(send(&two).await, "b");
    assert_eq!(a.requests().len(), 1);
    let cool = two.events.named("upstream.cooldown");
    assert_eq!(cool[0]["source"], "replica");
}

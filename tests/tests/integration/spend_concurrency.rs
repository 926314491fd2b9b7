//! The cap holds under a burst: 200 requests released at once against a cap that admits
//! exactly N requests' worth, across two gateway replicas sharing one PostgreSQL database,
//! and in one gateway on SQLite. Exactly N are admitted, the refused ones never reach the
//! upstream, at most the cap is charged, and no reservation stays open.
//!
//! The fake upstream reports almost the worst case the gateway reserves, so a request that
//! settles early frees next to nothing: the admitted count does not depend on timing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fake_upstream::FakeConfig;
use gatehouse_engine::metering::usage::Usage;
use gatehouse_engine::spend::GroupMode;
use gatehouse_tests::caps::{ADMIN, infer, list_prices, msg, set_limit, token, worst_case};
use gatehouse_tests::postgres::TestDatabase;
use gatehouse_tests::replicas::{self, Replicas};
use serde_json::{Value, json};

/// What the cap admits.
const N: u64 = 25;
const REQUESTS: usize = 200;

/// Store failures refuse (instead of letting requests through unchecked), so a slow store
/// could only lower the admitted count, never raise it, and shows up as `spend.unavailable`.
fn extra() -> String {
    format!("{ADMIN}enforcement: {{fail_closed_on_error: true}}\n")
}

async fn burst(r: &Replicas) {
    let body = msg(2048);
    let worst = worst_case(&body);
    let prompt = serde_json::to_vec(&body).unwrap().len() as u64;
    // Reported usage: every prompt byte as a 1-hour cache write but four, and all of
    // max_tokens: the worst case minus a few micro-USD.
    let fake = FakeConfig {
        input_tokens: 0,
        cache_creation_1h_tokens: u32::try_from(prompt - 4).unwrap(),
        output_tokens: 2048,
        ..FakeConfig::default()
    };
    let (actual, _) = list_prices().cost_micro_usd(
        "claude-sonnet-4-6",
        &Usage {
            output_tokens: 2048,
            cache_write_1h_tokens: prompt - 4,
            ..Usage::default()
        },
    );
    let cap_cents = (N * worst).div_ceil(10_000);
    let cap_micro = cap_cents * 10_000;
    // Premise: N reservations fit, and whatever N requests are charged, one more does not.
    assert!(
        actual <= worst && N * worst <= cap_micro,
        "{actual} {worst} {cap_micro}"
    );
    assert!(
        N * actual + worst > cap_micro,
        "{actual} {worst} {cap_micro}"
    );
    r.fake.set_config(fake);
    set_limit(
        &r.client,
        &r.replicas[0].url,
        json!({"scope": {"type": "user", "user_id": "alice"}, "amount": cap_cents.to_string(), "period": "daily"}),
    )
    .await;
    let alice = token(&r.origin, "alice", &["engineering"]);

    // Released at once, spread over the replicas.
    let started = std::time::Instant::now();
    let results = futures_util::future::join_all((0..REQUESTS).map(|i| {
        let replica = &r.replicas[i % r.replicas.len()];
        infer(&r.client, &replica.url, &alice, &body)
    }))
    .await;
    eprintln!(
        "{REQUESTS} requests over {} replica(s) answered in {:?}",
        r.replicas.len(),
        started.elapsed()
    );
    let unavailable: usize = r
        .replicas
        .iter()
        .map(|x| x.events.named("spend.unavailable").len())
        .sum();
    assert_eq!(
        unavailable, 0,
        "the store answered every reservation in time"
    );
    let admitted = results.iter().filter(|x| x.status() == 200).count();
    let refused: Vec<&reqwest::Response> = results.iter().filter(|x| x.status() == 429).collect();
    assert_eq!(admitted as u64, N, "exactly what the reservations allow");
    assert_eq!(admitted + refused.len(), REQUESTS);
    assert!(
        refused
            .iter()
            .all(|x| x.headers()["x-should-retry"] == "false")
    );
    if r.replicas.len() > 1 {
        for (k, replica) in r.replicas.iter().enumerate() {
            let blocked = replica.events.named("spend.blocked").len();
            assert!(blocked > 0, "replica {k} refused some of its share");
        }
    }
    assert_eq!(
        r.fake.requests().len(),
        admitted,
        "refused requests never reached the upstream"
    );
    for x in results {
        if x.status() == 429 {
            let v: Value = x.json().await.unwrap();
            assert_eq!(v["error"]["type"], "billing_error");
        }
    }

    // Books: every admitted request settled to its usage, at most the cap, nothing held.
    let store = r.replicas[0].handle.store();
    let mut rows = Vec::new();
    for _ in 0..400 {
        rows = store.recent_usage(1000).await.unwrap();
        if rows.len() >= admitted {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(rows.len(), admitted, "one usage row per admitted request");
    assert!(rows.iter().all(|u| u.cost_micro_usd == actual));
    let charged: u64 = rows.iter().map(|u| u.cost_micro_usd).sum();
    assert!(
        charged <= cap_micro,
        "charged {charged} against a cap of {cap_micro}"
    );
    let mut standing = Vec::new();
    for _ in 0..400 {
        standing = store
            .standings(
                "alice",
                &["engineering".into()],
                GroupMode::Min,
                chrono::Utc::now(),
            )
            .await
            .unwrap();
        if standing[0].reserved_micro == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(standing[0].reserved_micro, 0, "no hold left");
    assert_eq!(standing[0].spent_micro, charged);
    for replica in &r.replicas {
        assert!(
            replica
                .handle
                .store()
                .open_reservations()
                .await
                .unwrap()
                .is_empty()
        );
    }
}

#[tokio::test]
async fn two_postgres_replicas_admit_exactly_what_the_cap_allows() {
    let db = TestDatabase::create().await;
    let r = replicas::start(2, |_| db.store_yaml(), &extra()).await;
    assert!(
        r.replicas
            .iter()
            .all(|x| x.handle.store().backend() == "postgres")
    );
    burst(&r).await;
    r.shutdown().await;
}

#[tokio::test]
async fn one_sqlite_gateway_admits_exactly_what_the_cap_allows() {
    let r = replicas::start(
        1,
        |dir| format!("store: {{sqlite_path: \"{}\"}}", dir.join("g.db").display()),
        &extra(),
    )
    .await;
    burst(&r).await;
    r.shutdown().await;
}

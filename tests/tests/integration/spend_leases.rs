//! Spend leases: capped requests are admitted out of a few leases instead of one store
//! reservation each, the stored open amount always covers what is in flight (the crash
//! argument), idle leases are released, the books balance, and a cap change through the
//! admin API takes effect at the next request.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fake_upstream::FakeConfig;
use gatehouse_engine::spend::GroupMode;
use gatehouse_tests::caps::{ADMIN, msg};
use gatehouse_tests::{SESSION_SECRET_A, SignInGateway, sign_in_gateway, wait_until};
use serde_json::{Value, json};

fn reservations_made(s: &SignInGateway) -> i64 {
    rusqlite::Connection::open(s.gw.db_path())
        .unwrap()
        .query_row("SELECT count(*) FROM reservations", [], |r| r.get(0))
        .unwrap()
}

async fn set_limit(s: &SignInGateway, body: Value) -> Value {
    gatehouse_tests::caps::set_limit(&s.gw.client, &s.gw.url(""), body).await
}

async fn books_balance(s: &SignInGateway, sub: &str) {
    let store = s.gw.handle.store();
    wait_until("idle leases released", || async {
        store.open_reservations().await.unwrap().is_empty()
    })
    .await;
    let cost: u64 = store
        .recent_usage(10_000)
        .await
        .unwrap()
        .iter()
        .filter(|r| r.principal == format!("user:{sub}"))
        .map(|r| r.cost_micro_usd)
        .sum();
    let st = store
        .standings(sub, &[], GroupMode::Min, chrono::Utc::now())
        .await
        .unwrap();
    assert_eq!((st[0].spent_micro, st[0].reserved_micro), (cost, 0));
}

#[tokio::test]
async fn sequential_requests_share_a_lease_and_the_books_balance() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], ADMIN).await;
    set_limit(
        &s,
        json!({"scope": {"type": "user", "user_id": "alice"}, "amount": "10000", "period": "daily"}),
    )
    .await;
    let alice = gatehouse_tests::caps::token(&s.origin, "alice", &[]);
    for _ in 0..40 {
        let r = gatehouse_tests::caps::infer(&s.gw.client, &s.gw.url(""), &alice, &msg(256)).await;
        assert_eq!(r.status(), 200);
    }
    s.gw.usage_rows(40).await;
    let made = reservations_made(&s);
    assert!(
        (1..=5).contains(&made),
        "40 requests took {made} store reservations"
    );
    books_balance(&s, "alice").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stored_leases_cover_every_request_in_flight() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], ADMIN).await;
    s.gw.fake.set_config(FakeConfig {
        header_delay_ms: 800,
        ..FakeConfig::default()
    });
    set_limit(
        &s,
        json!({"scope": {"type": "user", "user_id": "bo"}, "amount": "10000", "period": "daily"}),
    )
    .await;
    let bo = gatehouse_tests::caps::token(&s.origin, "bo", &[]);
    let body = msg(4_000);
    let worst = gatehouse_tests::caps::worst_case(&body);
    let n = 12u64;
    let base = s.gw.url("");
    let requests = futures_util::future::join_all(
        (0..n).map(|_| gatehouse_tests::caps::infer(&s.gw.client, &base, &bo, &body)),
    );
    let store = s.gw.handle.store();
    let watch = async {
        // Every request waits for the upstream: were the gateway to die now, the open
        // leases (charged as estimated at the next start) must cover all of them.
        wait_until("all requests reached the upstream", || async {
            s.gw.fake.requests().len() as u64 >= n
        })
        .await;
        let open: u64 = store
            .open_reservations()
            .await
            .unwrap()
            .iter()
            .map(|r| r.amount_micro)
            .sum();
        let st = store
            .standings("bo", &[], GroupMode::Min, chrono::Utc::now())
            .await
            .unwrap();
        (open, st[0].reserved_micro)
    };
    let (results, (open, reserved)) = tokio::join!(requests, watch);
    assert!(results.iter().all(|r| r.status() == 200));
    assert!(open >= n * worst, "open leases {open} < {n} × {worst}");
    assert_eq!(reserved, open, "the spend rows hold what the leases hold");
    s.gw.usage_rows(n as usize).await;
    books_balance(&s, "bo").await;
}

#[tokio::test]
async fn a_lowered_cap_applies_to_the_next_request() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], ADMIN).await;
    set_limit(
        &s,
        json!({"scope": {"type": "user", "user_id": "cy"}, "amount": "10000", "period": "daily"}),
    )
    .await;
    let cy = gatehouse_tests::caps::token(&s.origin, "cy", &[]);
    let (base, body) = (s.gw.url(""), msg(256));
    let infer = || gatehouse_tests::caps::infer(&s.gw.client, &base, &cy, &body);
    assert_eq!(infer().await.status(), 200);
    // The open lease has room for more, but the cap now allows nothing.
    set_limit(
        &s,
        json!({"scope": {"type": "user", "user_id": "cy"}, "amount": "0", "period": "daily"}),
    )
    .await;
    let r = infer().await;
    assert_eq!(r.status(), 429);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["details"]["error_code"], "spend_limit_reached");
}

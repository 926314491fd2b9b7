//! Floods of public routes against a store with a busy month of usage: caps hold, no
//! reservation is left open, readiness answers at once afterwards, and the status data
//! stays private off loopback unless the operator makes it public.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use gatehouse_engine::store::UsageRecord;
use gatehouse_tests::caps::{ADMIN, READ_KEY, infer, msg, set_limit, token};
use gatehouse_tests::{SESSION_SECRET_A, sign_in_gateway};
use serde_json::json;

/// Usage rows written before the flood (a busy month).
const ROWS: usize = 100_000;
/// Flooders, and how long each floods (bounded twice: by time and by count).
const FLOODERS: usize = 32;
const FLOOD_FOR: Duration = Duration::from_secs(4);
const FLOOD_MAX: usize = 4_000;

fn row(i: usize) -> UsageRecord {
    UsageRecord {
        request_id: format!("old-{i}"),
        row_key: UsageRecord::new_row_key(),
        created_at: Utc::now() - chrono::Duration::seconds(i as i64 % 86_400),
        principal: format!("user:p{}", i % 300),
        endpoint: "messages".into(),
        model: ["claude-sonnet-4-6", "claude-opus-4-6", "claude-haiku-4-5"][i % 3].into(),
        upstream: Some("primary".into()),
        upstream_model: None,
        status: 200,
        route_reason: "primary: first in order, ok 200".into(),
        stream: true,
        input_tokens: 1_000,
        output_tokens: 200,
        cache_read_tokens: 0,
        cache_write_5m_tokens: 0,
        cache_write_1h_tokens: 0,
        web_search_requests: 0,
        cost_micro_usd: 6_000,
        usage_source: "reported".into(),
        latency_ms: 900,
        ttfb_ms: Some(300),
        client_disconnected: false,
        reservation_id: None,
        tags: Default::default(),
    }
}

#[tokio::test]
async fn a_flood_of_public_routes_cannot_lift_a_cap_or_strand_a_reservation() {
    // The operator made the status data public: the flood reaches the store's reports.
    let s = sign_in_gateway(
        &[SESSION_SECRET_A],
        &format!("{ADMIN}dashboard: {{public: true}}\n"),
    )
    .await;
    let store = s.gw.handle.store();
    let rows: Vec<UsageRecord> = (0..ROWS).map(row).collect();
    for chunk in rows.chunks(5_000) {
        store.insert_usage(Arc::new(chunk.to_vec())).await.unwrap();
    }
    let (client, base) = (&s.gw.client, s.gw.url(""));
    for (who, cents) in [("zero", "0"), ("ann", "100000")] {
        set_limit(
            client,
            &base,
            json!({"scope": {"type": "user", "user_id": who}, "amount": cents, "period": "daily"}),
        )
        .await;
    }
    let zero = token(&s.origin, "zero", &[]);
    let ann = token(&s.origin, "ann", &[]);

    let started = Instant::now();
    let flood = (0..FLOODERS)
        .map(|i| {
            let (client, base) = (s.gw.client.clone(), s.gw.url(""));
            tokio::spawn(async move {
                let mut sent = 0;
                while started.elapsed() < FLOOD_FOR && sent < FLOOD_MAX / FLOODERS {
                    let path = ["/gatehouse/api/dashboard", "/readyz"][i % 2];
                    if let Ok(r) = client.get(format!("{base}{path}")).send().await {
                        let _ = r.bytes().await;
                    }
                    sent += 1;
                }
                sent
            })
        })
        .collect::<Vec<_>>();

    // During the flood: the zero cap refuses every time, the ample one admits every time.
    let (mut refused, mut admitted) = (0, 0);
    while started.elapsed() < FLOOD_FOR {
        let r = infer(&s.gw.client, &s.gw.url(""), &zero, &msg(64)).await;
        assert_eq!(r.status(), 429, "a zero cap never admits");
        let v: serde_json::Value = r.json().await.unwrap();
        assert_eq!(v["error"]["type"], "billing_error");
        refused += 1;
        let r = infer(&s.gw.client, &s.gw.url(""), &ann, &msg(64)).await;
        assert_eq!(r.status(), 200, "admission is not starved by the flood");
        let _ = r.bytes().await;
        admitted += 1;
    }
    let mut sent = 0;
    for f in flood {
        sent += f.await.unwrap();
    }
    assert!(sent >= FLOODERS, "the flood ran: {sent}");
    assert!(refused > 0 && admitted > 0);

    // Right after the flood the gateway is ready, and nothing stays reserved.
    let r = tokio::time::timeout(
        Duration::from_secs(3),
        s.gw.client.get(s.gw.url("/readyz")).send(),
    )
    .await
    .expect("readiness answers at once after a flood")
    .unwrap();
    assert_eq!(r.status(), 200);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let open = store.open_reservations().await.unwrap();
        if open.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "reservations left open: {open:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let standing = store
        .standings(
            "zero",
            &[],
            gatehouse_engine::spend::GroupMode::Min,
            Utc::now(),
        )
        .await
        .unwrap();
    assert!(
        standing
            .iter()
            .all(|s| s.spent_micro == 0 && s.reserved_micro == 0)
    );
    // The snapshot still reads the whole month.
    let snap: serde_json::Value =
        s.gw.client
            .get(s.gw.url("/gatehouse/api/dashboard"))
            .header("x-api-key", READ_KEY)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let month_start = gatehouse_engine::spend::windows(Utc::now())[2].start;
    let in_month = rows.iter().filter(|r| r.created_at >= month_start).count() as u64;
    assert!(snap["usage"]["month"]["requests"].as_u64().unwrap() >= in_month);
}

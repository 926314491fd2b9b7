//! Shared group budgets (`pooled_budget`): one monthly amount a whole group spends
//! together. A burst of 200 requests from three members at once, spread over two
//! PostgreSQL replicas (and in one SQLite gateway), is admitted exactly up to the pool and
//! never past it; the refusal is the reference's `group_pool` 429; which pool pays
//! follows `admin.pooled_conflict_rule`; the admin API round-trips the budget with the
//! group's spend this month.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fake_upstream::FakeConfig;
use gatehouse_engine::metering::usage::Usage;
use gatehouse_tests::caps::{
    ADMIN, READ_KEY, WRITE_KEY, infer, list_prices, msg, set_limit, token, worst_case,
};
use gatehouse_tests::postgres::TestDatabase;
use gatehouse_tests::replicas::{self, Replicas};
use serde_json::{Value, json};

/// What the pool admits.
const N: u64 = 25;
const REQUESTS: usize = 200;
const MEMBERS: [&str; 3] = ["alice", "bob", "carol"];
/// Each member's own monthly limit in the group: far above the pool.
const OWN: &str = "100000000";

fn extra(more: &str) -> String {
    format!("{ADMIN}{more}enforcement: {{fail_closed_on_error: true}}\n")
}

fn sqlite(dir: &std::path::Path) -> String {
    format!("store: {{sqlite_path: \"{}\"}}", dir.join("g.db").display())
}

/// A pooled monthly limit for `group`.
async fn pool(r: &Replicas, group: &str, cents: u64) -> Value {
    set_limit(
        &r.client,
        &r.replicas[0].url,
        json!({"scope": {"type": "rbac_group", "rbac_group_id": group}, "amount": OWN,
               "pooled_budget": {"amount": cents.to_string()}}),
    )
    .await
}

/// `(spent, reserved)` of a group's pool this month, once nothing is held any more.
async fn settled_pool(r: &Replicas, group: &str) -> (u64, u64) {
    let store = r.replicas[0].handle.store();
    let mut last = (0, 0);
    for _ in 0..400 {
        let found = store
            .pool_totals(vec![group.to_owned()], chrono::Utc::now())
            .await
            .unwrap();
        last = found.first().map_or((0, 0), |p| (p.1, p.2));
        if last.1 == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    last
}

/// The fake reports almost the worst case of `msg(2048)`, so the admitted count does not
/// depend on timing (a request that settles early frees next to nothing): `(body, worst
/// case, metered cost)`.
fn near_worst(r: &Replicas) -> (Value, u64, u64) {
    let body = msg(2048);
    let worst = worst_case(&body);
    let prompt = serde_json::to_vec(&body).unwrap().len() as u64;
    r.fake.set_config(FakeConfig {
        input_tokens: 0,
        cache_creation_1h_tokens: u32::try_from(prompt - 4).unwrap(),
        output_tokens: 2048,
        ..FakeConfig::default()
    });
    let (actual, _) = list_prices().cost_micro_usd(
        "claude-sonnet-4-6",
        &Usage {
            output_tokens: 2048,
            cache_write_1h_tokens: prompt - 4,
            ..Usage::default()
        },
    );
    (body, worst, actual)
}

async fn burst(r: &Replicas) {
    let (body, worst, actual) = near_worst(r);
    let pool_cents = (N * worst).div_ceil(10_000);
    let pool_micro = pool_cents * 10_000;
    assert!(actual <= worst && N * worst <= pool_micro);
    assert!(N * actual + worst > pool_micro, "one more never fits");
    pool(r, "eng", pool_cents).await;
    let tokens: Vec<String> = MEMBERS
        .iter()
        .map(|m| token(&r.origin, m, &["eng"]))
        .collect();
    let results = futures_util::future::join_all((0..REQUESTS).map(|i| {
        let replica = &r.replicas[i % r.replicas.len()];
        infer(&r.client, &replica.url, &tokens[i % tokens.len()], &body)
    }))
    .await;
    let unavailable: usize = r
        .replicas
        .iter()
        .map(|x| x.events.named("spend.unavailable").len())
        .sum();
    assert_eq!(unavailable, 0, "the store answered every reservation");
    let admitted = results.iter().filter(|x| x.status() == 200).count();
    assert_eq!(admitted as u64, N, "exactly what the pool allows");
    assert_eq!(r.fake.requests().len(), admitted, "refusals never went up");
    for x in results {
        if x.status() == 200 {
            continue;
        }
        assert_eq!(x.status(), 429);
        assert_eq!(
            x.headers()["anthropic-ratelimit-unified-overage-scope"],
            "group_pool"
        );
        let v: Value = x.json().await.unwrap();
        assert_eq!(v["error"]["type"], "billing_error");
    }
    let (spent, reserved) = settled_pool(r, "eng").await;
    assert_eq!(reserved, 0, "no hold left on the pool");
    assert_eq!(
        spent,
        N * actual,
        "the pool was charged what its members spent"
    );
    assert!(spent <= pool_micro, "{spent} over a pool of {pool_micro}");
    for replica in &r.replicas {
        let open = replica.handle.store().open_reservations().await.unwrap();
        assert!(open.is_empty());
    }
}

#[tokio::test]
async fn a_pool_shared_by_three_holds_across_two_postgres_replicas() {
    let db = TestDatabase::create().await;
    let r = replicas::start(2, |_| db.store_yaml(), &extra("")).await;
    assert!(
        r.replicas
            .iter()
            .all(|x| x.handle.store().backend() == "postgres")
    );
    burst(&r).await;
    r.shutdown().await;
}

#[tokio::test]
async fn a_pool_shared_by_three_holds_in_one_sqlite_gateway() {
    let r = replicas::start(1, sqlite, &extra("")).await;
    burst(&r).await;
    r.shutdown().await;
}

/// The refusal when the pool is used up: the reference's monthly shape with
/// `overage-scope: group_pool`, its sentence (with `blocked_message`) and no `details`.
#[tokio::test]
async fn a_used_up_pool_refuses_with_the_group_pool_shape() {
    let r = replicas::start(1, sqlite, &extra("")).await;
    pool(&r, "eng", 0).await;
    let alice = token(&r.origin, "alice", &["eng"]);
    let x = infer(&r.client, &r.replicas[0].url, &alice, &msg(64)).await;
    assert_eq!(x.status(), 429);
    let h = x.headers().clone();
    let month = gatehouse_engine::spend::Period::Monthly.window(chrono::Utc::now());
    let reset = month.reset.timestamp().to_string();
    for (name, value) in [
        ("x-should-retry", "false"),
        ("anthropic-ratelimit-unified-status", "rejected"),
        ("anthropic-ratelimit-unified-reset", reset.as_str()),
        ("anthropic-ratelimit-unified-overage-reset", reset.as_str()),
        ("anthropic-ratelimit-unified-overage-period", "monthly"),
        ("anthropic-ratelimit-unified-overage-scope", "group_pool"),
        (
            "anthropic-ratelimit-unified-overage-disabled-reason",
            "org_spend_cap_reached",
        ),
    ] {
        assert_eq!(h[name], value, "{name}");
    }
    assert!(h.contains_key("retry-after"));
    assert!(!h.contains_key("anthropic-ratelimit-unified-representative-claim"));
    let v: Value = x.json().await.unwrap();
    let expected = format!(
        "This request exceeds your group's budget. Ask your organization's admins to raise it, \
         or try again after it resets on {} at 00:00 UTC · Ask the platform team for more.",
        month.reset.format("%B %-d")
    );
    assert_eq!(
        v,
        json!({"type": "error", "error": {"type": "billing_error", "message": expected}})
    );
    let blocked = r.replicas[0].events.named("spend.blocked");
    assert_eq!(blocked[0]["source"], "group_pool");
    // A paused pool admits again (the member's own limit still applies).
    set_limit(
        &r.client,
        &r.replicas[0].url,
        json!({"scope": {"type": "rbac_group", "rbac_group_id": "eng"},
               "pooled_budget": {"paused": true}}),
    )
    .await;
    let x = infer(&r.client, &r.replicas[0].url, &alice, &msg(64)).await;
    assert_eq!(x.status(), 200);
    r.shutdown().await;
}

/// Which pool pays: the largest first by default; the listed groups first with
/// `priority_list`; the next in order once one is used up.
#[tokio::test]
async fn the_conflict_rule_picks_the_paying_pool() {
    for (more, first, second) in [
        ("", "big", "small"),
        (
            "  pooled_conflict_rule: priority_list\n  pooled_priority_order: [small]\n",
            "small",
            "big",
        ),
    ] {
        let r = replicas::start(1, sqlite, &extra(more)).await;
        let (body, worst, actual) = near_worst(&r);
        // Room for exactly one request each, and none after it was charged.
        let one = worst.div_ceil(10_000);
        assert!((one + 1) * 10_000 < worst + actual, "{worst} {actual}");
        pool(&r, "small", one).await;
        pool(&r, "big", one + 1).await;
        let alice = token(&r.origin, "alice", &["small", "big"]);
        let url = &r.replicas[0].url;
        assert_eq!(infer(&r.client, url, &alice, &body).await.status(), 200);
        let (spent, _) = settled_pool(&r, first).await;
        assert!(spent > 0, "{more:?}: {first} pays first");
        assert_eq!(settled_pool(&r, second).await.0, 0, "{more:?}");
        assert_eq!(infer(&r.client, url, &alice, &body).await.status(), 200);
        assert!(settled_pool(&r, second).await.0 > 0, "then {second}");
        let x = infer(&r.client, url, &alice, &body).await;
        assert_eq!(x.status(), 429, "both used up");
        assert_eq!(
            x.headers()["anthropic-ratelimit-unified-overage-scope"],
            "group_pool"
        );
        r.shutdown().await;
    }
}

/// The admin API keeps the budget, shows the group's spend this month, and answers the
/// reference's messages for a budget that cannot run.
#[tokio::test]
async fn the_admin_api_round_trips_a_pooled_budget() {
    let r = replicas::start(1, sqlite, &extra("")).await;
    let url = &r.replicas[0].url;
    let created = pool(&r, "eng", 100_000).await;
    assert_eq!(
        created["pooled_budget"],
        json!({"amount": "100000", "paused": false, "currency": "USD", "period_to_date_spend": "0"})
    );
    let alice = token(&r.origin, "alice", &["eng"]);
    assert_eq!(infer(&r.client, url, &alice, &msg(64)).await.status(), 200);
    let (spent, _) = settled_pool(&r, "eng").await;
    assert!(spent > 0);
    let id = created["id"].as_str().unwrap();
    let got: Value = r
        .client
        .get(format!("{url}/v1/organizations/spend_limits/{id}"))
        .header("x-api-key", READ_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        got["pooled_budget"]["period_to_date_spend"],
        gatehouse_engine::spend::admin::cents_text(spent)
    );
    let listed: Value = r
        .client
        .get(format!(
            "{url}/v1/organizations/spend_limits?scope_type=rbac_group"
        ))
        .header("x-api-key", READ_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["data"][0]["pooled_budget"], got["pooled_budget"]);
    // Only the member amount changes: the budget stays.
    let kept = set_limit(
        &r.client,
        url,
        json!({"scope": {"type": "rbac_group", "rbac_group_id": "eng"}, "amount": "5"}),
    )
    .await;
    assert_eq!(kept["pooled_budget"]["amount"], "100000");
    assert_eq!(kept["amount"], "5");
    let refused = r
        .client
        .post(format!("{url}/v1/organizations/spend_limits"))
        .header("x-api-key", WRITE_KEY)
        .json(
            &json!({"scope": {"type": "rbac_group", "rbac_group_id": "ops"}, "amount": null,
                      "pooled_budget": {"amount": "5"}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let v: Value = refused.json().await.unwrap();
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("A pooled budget that isn't paused needs amount")
    );
    r.shutdown().await;
}

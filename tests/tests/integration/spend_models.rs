//! Spend caps per model family and the lifetime (`total`) period (issue 33): an Opus-only
//! cap refuses Opus at the cap and leaves Sonnet alone, and names itself in the 429; a
//! `total` cap holds across days and months; under a burst over two PostgreSQL replicas
//! (and one SQLite gateway) neither a family's cap nor the all-model cap beside it is
//! passed; a family's open reservation left by a crash (or by a dead PostgreSQL replica)
//! is charged as estimated on its family's rows at the next start; the upgrade to 0010
//! seeds lifetime and family spend on PostgreSQL (SQLite's seeding is a unit test in
//! `store::migrations`).
//!
//! The fake upstream reports almost the worst case the gateway reserves, so how many
//! requests a cap admits does not depend on timing (as in `spend_concurrency`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fake_upstream::FakeConfig;
use gatehouse_engine::metering::usage::Usage;
use gatehouse_engine::spend::{Family, GroupMode, Period, Standing};
use gatehouse_tests::caps::{ADMIN, infer, list_prices, set_limit, token, worst_case};
use gatehouse_tests::postgres::TestDatabase;
use gatehouse_tests::replicas::{self, Replicas};
use gatehouse_tests::{SESSION_SECRET_A, SignInGateway, sign_in_gateway};
use serde_json::{Value, json};

const OPUS: &str = "claude-opus-4-6";
const SONNET: &str = "claude-sonnet-4-6";

fn body(model: &str) -> Value {
    json!({"model": model, "max_tokens": 2048, "stream": false,
           "messages": [{"role": "user", "content": "hi"}]})
}

/// Makes the fake report, for `body`, every prompt byte but four as a 1-hour cache write
/// and all of `max_tokens`; what one such request costs (a little under its worst case).
fn near_worst(fake: &fake_upstream::FakeUpstream, body: &Value) -> u64 {
    let prompt = serde_json::to_vec(body).unwrap().len() as u64;
    fake.set_config(FakeConfig {
        input_tokens: 0,
        cache_creation_1h_tokens: u32::try_from(prompt - 4).unwrap(),
        output_tokens: 2048,
        ..FakeConfig::default()
    });
    let usage = Usage {
        output_tokens: 2048,
        cache_write_1h_tokens: prompt - 4,
        ..Usage::default()
    };
    let (actual, _) = list_prices().cost_micro_usd(body["model"].as_str().unwrap(), &usage);
    assert!(actual <= worst_case(body));
    actual
}

/// A cap in cents that admits exactly `n` requests of `worst` each costing `actual`, after
/// `spent` micro-USD already spent: `n` worst cases fit, and after `n` charges no further
/// worst case does.
fn cap_for(n: u64, worst: u64, actual: u64, spent: u64) -> u64 {
    let cents = (spent + n * worst).div_ceil(10_000);
    assert!(spent + n * actual + worst > cents * 10_000, "premise");
    cents
}

async fn limit(s: &SignInGateway, body: Value) -> Value {
    set_limit(&s.gw.client, &s.gw.url(""), body).await
}

/// A person's standings as of the gateway's clock.
async fn standings(s: &SignInGateway, sub: &str) -> Vec<Standing> {
    let now = gatehouse_engine::deps::Clock::now(s.clock.as_ref());
    s.gw.handle
        .store()
        .standings(sub, &[], GroupMode::Min, now)
        .await
        .unwrap()
}

/// Waits until nothing is held for `sub` and their spend of every model today is `want`.
async fn settled(
    store: &dyn gatehouse_engine::store::Store,
    sub: &str,
    want: u64,
) -> Vec<Standing> {
    for _ in 0..400 {
        let st = store
            .standings(sub, &[], GroupMode::Min, chrono::Utc::now())
            .await
            .unwrap();
        if st.iter().all(|x| x.reserved_micro == 0) && st[0].spent_micro == want {
            return st;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("{sub} not settled to {want}");
}

fn family(name: &str) -> Option<Family> {
    Family::parse(name)
}

/// A session token for `sub` minted as of the gateway's (advanced) clock, so it is live
/// there.
fn token_now(s: &SignInGateway, sub: &str) -> String {
    use gatehouse_engine::identity::keys::KeyRing;
    use gatehouse_engine::identity::session::{UserIdentity, mint};
    let who = UserIdentity {
        sub: sub.into(),
        email: Some(format!("{sub}@corp.example")),
        name: None,
        groups: vec![],
    };
    let now = gatehouse_engine::deps::Clock::now(s.clock.as_ref());
    let keys = KeyRing::new(&[gatehouse_engine::secret::Secret::new(SESSION_SECRET_A)]);
    mint(&keys, &s.origin, 3600, now, &who).unwrap().0
}

/// Sends `body` as `who` and, when it is served, waits for its usage row (the `n`-th).
async fn send(s: &SignInGateway, who: &str, body: &Value, n: &mut usize) -> reqwest::Response {
    let r = infer(&s.gw.client, &s.gw.url(""), who, body).await;
    if r.status() == 200 {
        *n += 1;
        s.gw.usage_rows(*n).await;
    }
    r
}

#[tokio::test]
async fn an_opus_cap_refuses_opus_at_the_cap_and_still_serves_sonnet() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], ADMIN).await;
    let (opus, sonnet) = (body(OPUS), body(SONNET));
    let actual = near_worst(&s.gw.fake, &opus);
    let cap = cap_for(2, worst_case(&opus), actual, 0);
    let made = limit(
        &s,
        json!({"scope": {"type": "user", "user_id": "alice"}, "amount": cap.to_string(),
               "period": "daily", "model": "opus"}),
    )
    .await;
    assert_eq!(made["model"], "opus");
    assert_eq!(made["period"], "daily");
    // An all-model cap of the same scope and period is a limit of its own.
    let plain = limit(
        &s,
        json!({"scope": {"type": "user", "user_id": "alice"}, "amount": "100000", "period": "daily"}),
    )
    .await;
    assert_eq!(plain["model"], Value::Null);
    assert_ne!(plain["id"], made["id"]);

    let alice = token(&s.origin, "alice", &[]);
    let mut rows = 0;
    for _ in 0..2 {
        assert_eq!(send(&s, &alice, &opus, &mut rows).await.status(), 200);
    }
    let refused = send(&s, &alice, &opus, &mut rows).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["x-gatehouse-spend-model"], "opus");
    assert_eq!(
        refused.headers()["anthropic-ratelimit-unified-overage-period"],
        "daily"
    );
    let v: Value = refused.json().await.unwrap();
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("spend limit reached (daily Opus limit; resets "),
        "{message}"
    );
    assert_eq!(v["error"]["type"], "billing_error");
    // Sonnet is bound by the all-model cap only, which has room.
    let sonnet_cost = near_worst(&s.gw.fake, &sonnet);
    for _ in 0..3 {
        assert_eq!(send(&s, &alice, &sonnet, &mut rows).await.status(), 200);
    }

    // The Opus cap counts only Opus spend; the all-model daily counts both.
    let st = standings(&s, "alice").await;
    let daily = st
        .iter()
        .find(|x| x.period == Period::Daily && x.family.is_none());
    let daily_opus = st.iter().find(|x| x.family == family("opus")).unwrap();
    assert_eq!(daily.unwrap().spent_micro, 2 * actual + 3 * sonnet_cost);
    assert_eq!(
        (daily_opus.spent_micro, daily_opus.cap_cents),
        (2 * actual, Some(cap as i64))
    );
    let me: Value =
        s.gw.client
            .get(s.gw.url("/v1/me/spend"))
            .bearer_auth(&alice)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let entry = me["periods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["model"] == "opus")
        .cloned()
        .unwrap();
    assert_eq!(entry["period"], "daily");
    assert_eq!(entry["limit_cents"], cap);
    assert_eq!(entry["spent_micro_usd"], 2 * actual);
    assert_eq!(me["periods"][0]["model"], Value::Null);
    // The admin view names the binding limit of the Opus row.
    let eff: Value = s
        .gw
        .client
        .get(s.gw.url("/v1/organizations/spend_limits/effective?user_ids[]=alice&period[]=daily"))
        .header("x-api-key", gatehouse_tests::caps::READ_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rows: Vec<&Value> = eff["data"].as_array().unwrap().iter().collect();
    assert_eq!(rows.len(), 2, "{eff}");
    assert_eq!(rows[0]["model"], Value::Null);
    assert_eq!(rows[1]["model"], "opus");
    assert_eq!(rows[1]["spend_limit_id"], made["id"]);
    assert_eq!(rows[1]["amount"], cap.to_string());
}

#[tokio::test]
async fn a_total_cap_holds_across_days_and_months() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], ADMIN).await;
    let sonnet = body(SONNET);
    let actual = near_worst(&s.gw.fake, &sonnet);
    let cap = cap_for(2, worst_case(&sonnet), actual, 0);
    let made = limit(
        &s,
        json!({"scope": {"type": "user", "user_id": "bob"}, "amount": cap.to_string(), "period": "total"}),
    )
    .await;
    assert_eq!(
        (made["period"].clone(), made["model"].clone()),
        (json!("total"), Value::Null)
    );
    // A daily cap of the same amount beside it: it resets, the total does not.
    limit(
        &s,
        json!({"scope": {"type": "user", "user_id": "bob"}, "amount": cap.to_string(), "period": "daily"}),
    )
    .await;
    let mut rows = 0;
    let bob = token_now(&s, "bob");
    assert_eq!(send(&s, &bob, &sonnet, &mut rows).await.status(), 200);
    s.clock.advance(86_400 + 3_600);
    let bob = token_now(&s, "bob");
    assert_eq!(send(&s, &bob, &sonnet, &mut rows).await.status(), 200);
    s.clock.advance(86_400);
    let st = standings(&s, "bob").await;
    let total = st.iter().find(|x| x.period == Period::Total).unwrap();
    assert_eq!((total.spent_micro, total.reset), (2 * actual, None));
    assert_eq!(st[0].spent_micro, 0, "the daily spend has reset");
    for days in [0, 40] {
        s.clock.advance(days * 86_400);
        let bob = token_now(&s, "bob");
        let refused = send(&s, &bob, &sonnet, &mut rows).await;
        assert_eq!(refused.status(), 429, "{days} days on");
        assert!(
            refused.headers().get("retry-after").is_none(),
            "it never resets"
        );
        assert_eq!(
            refused.headers()["anthropic-ratelimit-unified-overage-period"],
            "total"
        );
        let v: Value = refused.json().await.unwrap();
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("spend limit reached (total; never resets)"),
            "{message}"
        );
    }
    let bob = token_now(&s, "bob");
    let me: Value =
        s.gw.client
            .get(s.gw.url("/v1/me/spend"))
            .bearer_auth(&bob)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let total = me["periods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["period"] == "total")
        .cloned()
        .unwrap();
    assert_eq!(total["resets_at"], Value::Null);
    assert_eq!(total["spent_micro_usd"], 2 * actual);
}

#[tokio::test]
async fn a_restart_charges_a_family_caps_open_reservation_as_estimated() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], ADMIN).await;
    limit(
        &s,
        json!({"scope": {"type": "user", "user_id": "zed"}, "amount": "10", "period": "daily", "model": "opus"}),
    )
    .await;
    // A lease for Opus requests, open when the gateway stopped (as a crash leaves it).
    let store = s.gw.handle.store();
    let now = chrono::Utc::now();
    let held = gatehouse_engine::spend::ReserveRequest {
        reservation_id: "rsv_opus".into(),
        request_id: "req-opus".into(),
        sub: "zed".into(),
        groups: vec![],
        amount_micro: 100_000,
        family: family("opus"),
        keep_free_micro: 0,
        windows: gatehouse_engine::spend::windows(now),
        mode: GroupMode::Min,
        pool_rule: Default::default(),
        now,
    };
    let outcome = store.reserve(held).await.unwrap();
    assert!(matches!(
        outcome,
        gatehouse_engine::spend::ReserveOutcome::Reserved(_)
    ));
    let SignInGateway {
        gw, idp, origin, ..
    } = s;
    let gatehouse_tests::TestGateway {
        handle, fake, dir, ..
    } = gw;
    let config = handle.gateway().config.clone();
    handle.shutdown().await;
    let restarted = gatehouse_tests::TestGateway::start_config(config, fake, dir).await;
    let estimated = restarted.events.named("spend.reservation_estimated");
    assert_eq!(estimated.len(), 1);
    assert_eq!(estimated[0]["reservation"], "rsv_opus");
    let st = restarted
        .handle
        .store()
        .standings("zed", &[], GroupMode::Min, now)
        .await
        .unwrap();
    let opus = st.iter().find(|x| x.family == family("opus")).unwrap();
    assert_eq!((opus.spent_micro, opus.reserved_micro), (100_000, 0));
    assert_eq!((st[0].spent_micro, st[0].reserved_micro), (100_000, 0));
    assert!(st.iter().all(|x| x.reserved_micro == 0));
    // The estimate used up the Opus cap; Sonnet is still served.
    let zed = token(&origin, "zed", &[]);
    let r = infer(&restarted.client, &restarted.url(""), &zed, &body(OPUS)).await;
    assert_eq!(r.status(), 429);
    let r = infer(&restarted.client, &restarted.url(""), &zed, &body(SONNET)).await;
    assert_eq!(r.status(), 200);
    drop(idp);
}

/// Sends `REQUESTS` copies of `body` at once, spread over the replicas; how many were
/// served, after checking the refusals.
async fn burst(r: &Replicas, who: &str, body: &Value, model_header: Option<&str>) -> usize {
    const REQUESTS: usize = 60;
    let results = futures_util::future::join_all((0..REQUESTS).map(|i| {
        let replica = &r.replicas[i % r.replicas.len()];
        infer(&r.client, &replica.url, who, body)
    }))
    .await;
    let mut served = 0;
    for x in results {
        match x.status().as_u16() {
            200 => served += 1,
            429 => assert_eq!(
                x.headers()
                    .get("x-gatehouse-spend-model")
                    .map(|v| v.to_str().unwrap()),
                model_header
            ),
            other => panic!("{other}"),
        }
    }
    served
}

/// An Opus cap and an all-model cap over the replicas of `r`: an Opus burst stops at the
/// Opus cap exactly, then a Sonnet burst at what the all-model cap has left.
async fn both_caps_hold(r: &Replicas) {
    const N_OPUS: u64 = 6;
    const N_SONNET: u64 = 9;
    let (opus, sonnet) = (body(OPUS), body(SONNET));
    let opus_cost = near_worst(&r.fake, &opus);
    let sonnet_cost = near_worst(&r.fake, &sonnet);
    let opus_cap = cap_for(N_OPUS, worst_case(&opus), opus_cost, 0);
    let all_cap = cap_for(
        N_SONNET,
        worst_case(&sonnet),
        sonnet_cost,
        N_OPUS * opus_cost,
    );
    let url = &r.replicas[0].url;
    for (amount, model) in [(opus_cap, json!("opus")), (all_cap, Value::Null)] {
        set_limit(
            &r.client,
            url,
            json!({"scope": {"type": "user", "user_id": "alice"}, "amount": amount.to_string(),
                   "period": "daily", "model": model}),
        )
        .await;
    }
    let alice = token(&r.origin, "alice", &[]);
    near_worst(&r.fake, &opus);
    assert_eq!(burst(r, &alice, &opus, Some("opus")).await as u64, N_OPUS);
    let store = r.replicas[0].handle.store();
    let st = settled(store.as_ref(), "alice", N_OPUS * opus_cost).await;
    let o = st.iter().find(|x| x.family == family("opus")).unwrap();
    assert!(o.spent_micro <= opus_cap * 10_000);
    near_worst(&r.fake, &sonnet);
    assert_eq!(burst(r, &alice, &sonnet, None).await as u64, N_SONNET);
    let st = settled(
        store.as_ref(),
        "alice",
        N_OPUS * opus_cost + N_SONNET * sonnet_cost,
    )
    .await;
    assert!(st[0].spent_micro <= all_cap * 10_000);
    assert_eq!(
        r.fake.requests().len() as u64,
        N_OPUS + N_SONNET,
        "refused requests never reached the upstream"
    );
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

fn fail_closed() -> String {
    format!("{ADMIN}enforcement: {{fail_closed_on_error: true}}\n")
}

#[tokio::test]
async fn two_postgres_replicas_pass_neither_a_family_cap_nor_the_all_model_cap() {
    let db = TestDatabase::create().await;
    let r = replicas::start(2, |_| db.store_yaml(), &fail_closed()).await;
    assert!(
        r.replicas
            .iter()
            .all(|x| x.handle.store().backend() == "postgres")
    );
    both_caps_hold(&r).await;
    r.shutdown().await;
}

#[tokio::test]
async fn one_sqlite_gateway_passes_neither_a_family_cap_nor_the_all_model_cap() {
    let r = replicas::start(
        1,
        |dir| format!("store: {{sqlite_path: \"{}\"}}", dir.join("g.db").display()),
        &fail_closed(),
    )
    .await;
    both_caps_hold(&r).await;
    r.shutdown().await;
}

#[tokio::test]
async fn a_dead_replicas_family_lease_is_charged_as_estimated_by_the_next_start() {
    use gatehouse_engine::store::{PostgresStore, Store};
    let db = TestDatabase::create().await;
    let now = chrono::Utc::now();
    let a = PostgresStore::open(&db.config(), now).await.unwrap();
    let opus = family("opus").unwrap();
    a.upsert_model_limit(
        gatehouse_engine::spend::ScopeType::User,
        "alice",
        Period::Daily,
        opus,
        Some(10),
        "admin-key:ops",
        now,
    )
    .await
    .unwrap();
    let lease = gatehouse_engine::spend::ReserveRequest {
        reservation_id: "rsv_dead".into(),
        request_id: "req-dead".into(),
        sub: "alice".into(),
        groups: vec![],
        amount_micro: 100_000,
        family: Some(opus),
        keep_free_micro: 0,
        windows: gatehouse_engine::spend::windows(now),
        mode: GroupMode::Min,
        pool_rule: Default::default(),
        now,
    };
    let held = a.reserve(lease.clone()).await.unwrap();
    assert!(matches!(
        held,
        gatehouse_engine::spend::ReserveOutcome::Reserved(_)
    ));
    // The Opus cap is full: a second Opus lease is refused, naming the Opus meter.
    let again = gatehouse_engine::spend::ReserveRequest {
        reservation_id: "rsv_more".into(),
        amount_micro: 1,
        ..lease
    };
    match a.reserve(again).await.unwrap() {
        gatehouse_engine::spend::ReserveOutcome::Refused { exceeded, .. } => assert_eq!(
            exceeded,
            [gatehouse_engine::spend::Meter {
                period: Period::Daily,
                family: Some(opus)
            }]
        ),
        other => panic!("{other:?}"),
    }
    // The gateway that held it dies; the next one to start charges it as estimated.
    drop(a);
    let probe = PostgresStore::open(&db.config(), now).await.unwrap();
    gatehouse_tests::wait_until("the dead gateway's lock is free", || async {
        !probe.open_reservations().await.unwrap().is_empty()
    })
    .await;
    drop(probe);
    let r = replicas::start(1, |_| db.store_yaml(), ADMIN).await;
    let estimated = r.replicas[0].events.named("spend.reservation_estimated");
    assert_eq!(estimated.len(), 1, "{estimated:?}");
    assert_eq!(estimated[0]["reservation"], "rsv_dead");
    let st = r.replicas[0]
        .handle
        .store()
        .standings("alice", &[], GroupMode::Min, chrono::Utc::now())
        .await
        .unwrap();
    let o = st.iter().find(|x| x.family == Some(opus)).unwrap();
    assert_eq!((o.spent_micro, o.reserved_micro), (100_000, 0));
    assert!(st.iter().all(|x| x.reserved_micro == 0));
    let alice = token(&r.origin, "alice", &[]);
    let url = &r.replicas[0].url;
    assert_eq!(
        infer(&r.client, url, &alice, &body(OPUS)).await.status(),
        429
    );
    assert_eq!(
        infer(&r.client, url, &alice, &body(SONNET)).await.status(),
        200
    );
    r.shutdown().await;
}

/// Migration 0010 on a PostgreSQL database of 0009 with spend: the limits keep their
/// fields, lifetime spend is seeded from the kept months and open holds, and each family's
/// spend so far from the usage rows (in the same windows the gateway uses).
#[tokio::test]
async fn the_upgrade_to_0010_seeds_lifetime_and_family_spend_on_postgres() {
    use gatehouse_engine::store::Store;
    use gatehouse_engine::store::migrations::POSTGRES;
    let db = TestDatabase::create().await;
    let c = db.client().await;
    c.batch_execute(
        "CREATE TABLE _migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL,
             applied_at BIGINT NOT NULL);",
    )
    .await
    .unwrap();
    for m in POSTGRES.iter().filter(|m| m.version <= 9) {
        c.batch_execute(m.sql).await.unwrap();
        c.execute(
            "INSERT INTO _migrations VALUES ($1, $2, 0)",
            &[&m.version, &m.name],
        )
        .await
        .unwrap();
    }
    let at = chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, 2026, 12, 31, 23, 59, 0)
        .single()
        .unwrap();
    let ms = at.timestamp_millis();
    c.batch_execute(
        "INSERT INTO spend VALUES ('alice', 'monthly', 100, 7, 0, 1), ('alice', 'monthly', 200, 5, 3, 2);
         INSERT INTO reservations (id, principal, request_id, created_at, amount_micro, daily_start,
             weekly_start, monthly_start, state, owner_key)
             VALUES ('rsv_1', 'alice', 'r', 3, 3, 200, 200, 200, 'open', 1);",
    )
    .await
    .unwrap();
    for (who, model, cost) in [
        ("user:alice", "claude-opus-4-6", 40i64),
        ("user:alice", "Claude-Opus-4-6-20260101", 2),
        ("user:alice", "claude-3-5-sonnet-20241022", 9),
        ("user:alice", "gpt-4o", 100),
        ("user:nobody", "claude-opus-4-6", 1000),
    ] {
        c.execute(
            "INSERT INTO usage_events (request_id, created_at, principal, endpoint, model, status,
                 route_reason, stream, cost_micro_usd, usage_source, latency_ms)
             VALUES ('r', $1, $2, 'messages', $3, 200, 'x', false, $4, 'reported', 1)",
            &[&ms, &who, &model, &cost],
        )
        .await
        .unwrap();
    }
    let store = gatehouse_engine::store::PostgresStore::open(&db.config(), chrono::Utc::now())
        .await
        .unwrap();
    let st = store
        .standings("alice", &[], GroupMode::Min, chrono::Utc::now())
        .await
        .unwrap();
    assert_eq!(st.len(), 3, "no cap: only the three plain periods");
    let rows = c
        .query(
            "SELECT family, period, period_start, spent_micro FROM family_spend
             WHERE principal = 'alice' ORDER BY family, period",
            &[],
        )
        .await
        .unwrap();
    let got: Vec<(String, String, i64, i64)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    let start = |p: Period| p.window(at).start.timestamp_millis();
    let mut want = Vec::new();
    for (family, cost) in [("opus", 42), ("sonnet", 9)] {
        for (period, s) in [
            ("daily", start(Period::Daily)),
            ("monthly", start(Period::Monthly)),
            ("total", 0),
            ("weekly", start(Period::Weekly)),
        ] {
            want.push((family.to_owned(), period.to_owned(), s, cost));
        }
    }
    assert_eq!(got, want);
    let nobody: i64 = c
        .query_one(
            "SELECT count(*) FROM family_spend WHERE principal = 'nobody'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(nobody, 0, "no spend kept for them");
    let total = c
        .query_one(
            "SELECT spent_micro, reserved_micro FROM spend WHERE principal = 'alice' AND period = 'total'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!((total.get::<_, i64>(0), total.get::<_, i64>(1)), (12, 3));
}

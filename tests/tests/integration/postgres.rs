//! PostgreSQL for several replicas, against a real server (the cluster `scripts/test.sh`
//! starts): migrations under concurrent start and the refusal of a newer schema, a live
//! replica's reservations kept out of another's reconciliation (and taken in once it is
//! gone), reservations from two stores never overshooting, start errors that name the
//! server but never the password, two gateways sharing device grants and rate counters, and
//! a refresh token redeemed once across them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use chrono::Utc;
use gatehouse_engine::spend::{
    GroupMode, Period, ReserveOutcome, ReserveRequest, ScopeType, windows,
};
use gatehouse_engine::store::{PostgresStore, SettleAs, Store, StoreError};
use gatehouse_tests::postgres::TestDatabase;
use gatehouse_tests::{PASSWORD, browser_login, replicas, sonnet};
use serde_json::Value;

fn reserve(id: &str, sub: &str, amount: u64) -> ReserveRequest {
    let now = Utc::now();
    ReserveRequest {
        reservation_id: id.into(),
        request_id: format!("req-{id}"),
        sub: sub.into(),
        groups: vec![],
        amount_micro: amount,
        family: None,
        keep_free_micro: 0,
        windows: windows(now),
        mode: GroupMode::Min,
        pool_rule: Default::default(),
        now,
    }
}

#[tokio::test]
async fn replicas_starting_together_migrate_once_and_a_newer_schema_is_refused() {
    let db = TestDatabase::create().await;
    let cfg = db.config();
    let (a, b, c) = tokio::join!(
        PostgresStore::open(&cfg, Utc::now()),
        PostgresStore::open(&cfg, Utc::now()),
        PostgresStore::open(&cfg, Utc::now()),
    );
    let (a, _b, _c) = (a.unwrap(), b.unwrap(), c.unwrap());
    a.ready().await.unwrap();
    let pg = db.client().await;
    let versions: Vec<i64> = pg
        .query("SELECT version FROM _migrations ORDER BY version", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let all: Vec<i64> = gatehouse_engine::store::migrations::POSTGRES
        .iter()
        .map(|m| m.version)
        .collect();
    assert_eq!(versions, all, "each migration applied once");

    pg.execute(
        "INSERT INTO _migrations (version, name, applied_at) VALUES (99, 'future', 0)",
        &[],
    )
    .await
    .unwrap();
    let refused = PostgresStore::open(&cfg, Utc::now()).await;
    assert!(
        matches!(
            refused,
            Err(StoreError::TooNew {
                found: 99,
                supported,
            }) if supported == *all.last().unwrap()
        ),
        "{:?}",
        refused.err()
    );
}

#[tokio::test]
async fn a_live_replicas_reservations_are_not_reconciled_by_another() {
    let db = TestDatabase::create().await;
    let a = PostgresStore::open(&db.config(), Utc::now()).await.unwrap();
    let b = PostgresStore::open(&db.config(), Utc::now()).await.unwrap();
    assert!(matches!(
        a.reserve(reserve("rsv_a", "alice", 5_000)).await.unwrap(),
        ReserveOutcome::Reserved(_)
    ));
    assert!(matches!(
        b.reserve(reserve("rsv_b", "alice", 5_000)).await.unwrap(),
        ReserveOutcome::Reserved(_)
    ));
    // Both gateways are alive: nothing is anyone's to reconcile.
    assert!(a.open_reservations().await.unwrap().is_empty());
    assert!(b.open_reservations().await.unwrap().is_empty());

    // A dies (its session ends); its hold becomes B's to reconcile, B's own stays.
    drop(a);
    let mut orphans = Vec::new();
    for _ in 0..200 {
        orphans = b.open_reservations().await.unwrap();
        if !orphans.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let found: Vec<_> = orphans
        .iter()
        .map(|o| (o.id.as_str(), o.request_id.as_str(), o.amount_micro))
        .collect();
    assert_eq!(found, [("rsv_a", "req-rsv_a", 5_000)]);
    // Reconciled as the gateway does: charged the reserved worst case, flagged estimated.
    assert!(
        b.settle("rsv_a", 5_000, SettleAs::Estimated, Utc::now())
            .await
            .unwrap()
    );
    let st = b
        .standings("alice", &[], GroupMode::Min, Utc::now())
        .await
        .unwrap();
    assert_eq!(st[0].reserved_micro, 5_000, "only B's hold is left");
    assert_eq!(st[0].spent_micro, 5_000, "A's hold is charged as estimated");

    // Had A been alive after all and finished its request, its metered cost replaces the
    // estimate, once.
    let c = PostgresStore::open(&db.config(), Utc::now()).await.unwrap();
    assert!(
        c.settle("rsv_a", 1_234, SettleAs::Charged, Utc::now())
            .await
            .unwrap()
    );
    assert!(
        !c.settle("rsv_a", 1_234, SettleAs::Charged, Utc::now())
            .await
            .unwrap()
    );
    let st = c
        .standings("alice", &[], GroupMode::Min, Utc::now())
        .await
        .unwrap();
    assert_eq!((st[0].spent_micro, st[0].reserved_micro), (1_234, 5_000));
}

#[tokio::test]
async fn reservations_from_two_replicas_never_overshoot() {
    let db = TestDatabase::create().await;
    let a = Arc::new(PostgresStore::open(&db.config(), Utc::now()).await.unwrap());
    let b = Arc::new(PostgresStore::open(&db.config(), Utc::now()).await.unwrap());
    a.upsert_limit(
        ScopeType::Organization,
        "",
        Period::Weekly,
        Some(10),
        "key:t",
        Utc::now(),
    )
    .await
    .unwrap();
    // 10 cents = 100,000 micro-USD; 7,000 each: 14 fit. Two people, 80 attempts each,
    // half through each replica, all at once; a third of them settle right away.
    let attempt = |i: usize| {
        let store: Arc<dyn Store> = if i.is_multiple_of(2) {
            a.clone()
        } else {
            b.clone()
        };
        let sub = if i % 4 < 2 { "dora" } else { "eli" };
        async move {
            let id = format!("rsv_{i:03}");
            let out = store.reserve(reserve(&id, sub, 7_000)).await.unwrap();
            let held = matches!(out, ReserveOutcome::Reserved(_));
            if held && i.is_multiple_of(3) {
                assert!(
                    store
                        .settle(&id, 7_000, SettleAs::Charged, Utc::now())
                        .await
                        .unwrap()
                );
            }
            (sub, held)
        }
    };
    let outcomes = futures_util::future::join_all((0..160).map(attempt)).await;
    for sub in ["dora", "eli"] {
        let held = outcomes.iter().filter(|(s, h)| *s == sub && *h).count();
        assert_eq!(held, 14, "{sub}");
        let st = a
            .standings(sub, &[], GroupMode::Min, Utc::now())
            .await
            .unwrap();
        assert_eq!(
            st[1].spent_micro + st[1].reserved_micro,
            14 * 7_000,
            "{sub}"
        );
    }
}

#[tokio::test]
async fn start_errors_name_the_server_and_never_the_password() {
    let db = TestDatabase::create().await;
    let mut url = url::Url::parse(&db.url).unwrap();
    url.set_password(Some("wrong-password-do-not-print"))
        .unwrap();
    let mut cfg = db.config();
    cfg.url = gatehouse_engine::secret::Secret::new(url.to_string());
    let Err(e) = PostgresStore::open(&cfg, Utc::now()).await else {
        panic!("a wrong password connects");
    };
    let host = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap());
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!(
            "cannot connect to PostgreSQL at {host}/{}",
            db.name
        )),
        "{msg}"
    );
    assert!(msg.contains("password authentication failed"), "{msg}");
    assert!(!msg.contains("wrong-password"), "{msg}");

    // Nobody listens on this port any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    cfg.url = gatehouse_engine::secret::Secret::new(format!(
        "postgres://gatehouse:pw-do-not-print@127.0.0.1:{port}/x"
    ));
    let Err(e) = PostgresStore::open(&cfg, Utc::now()).await else {
        panic!("connected to a closed port");
    };
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!(
            "cannot connect to PostgreSQL at 127.0.0.1:{port}/x: "
        )),
        "{msg}"
    );
    assert!(!msg.contains("pw-do-not-print"), "{msg}");
}

async fn form(
    r: &replicas::Replicas,
    base: &str,
    path: &str,
    pairs: &[(&str, &str)],
) -> (u16, Value) {
    let resp = r
        .client
        .post(format!("{base}{path}"))
        .form(pairs)
        .send()
        .await
        .unwrap();
    (
        resp.status().as_u16(),
        resp.json().await.unwrap_or(Value::Null),
    )
}

const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

#[tokio::test]
async fn replicas_share_device_grants_and_rate_counters() {
    let db = TestDatabase::create().await;
    let r = replicas::start(
        2,
        |_| db.store_yaml(),
        "rate_limits: {device_authorization: {limit: 3, window_seconds: 600}}\n",
    )
    .await;
    let (a, b) = (&r.replicas[0].url, &r.replicas[1].url);
    let (status, grant) = form(&r, a, "/oauth/device_authorization", &[]).await;
    assert_eq!(status, 200, "{grant}");
    let device_code = grant["device_code"].as_str().unwrap();
    let user_code = grant["user_code"].as_str().unwrap();
    // Started on A, pending on B; B's poll time is what A sees next.
    let poll = [("grant_type", DEVICE_GRANT), ("device_code", device_code)];
    let (status, body) = form(&r, b, "/oauth/token", &poll).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("authorization_pending"))
    );
    let (status, body) = form(&r, a, "/oauth/token", &poll).await;
    assert_eq!((status, body["error"].as_str()), (429, Some("slow_down")));
    let unknown = [
        ("grant_type", DEVICE_GRANT),
        ("device_code", "no-such-code"),
    ];
    assert_eq!(
        form(&r, b, "/oauth/token", &unknown).await.1["error"],
        "invalid_grant"
    );
    // The user code typed on B's page is known there: off to the IdP.
    let resp = r
        .client
        .post(format!("{b}/device"))
        .header("origin", &r.origin)
        .form(&[("user_code", user_code)])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 303);
    let to = resp.headers()["location"].to_str().unwrap();
    assert!(to.starts_with(&r.idp.issuer), "{to}");

    // One counter per address across replicas: A took one, two more fit, the fourth not.
    assert_eq!(form(&r, b, "/oauth/device_authorization", &[]).await.0, 200);
    assert_eq!(form(&r, a, "/oauth/device_authorization", &[]).await.0, 200);
    let (status, body) = form(&r, b, "/oauth/device_authorization", &[]).await;
    assert_eq!((status, body["error"].as_str()), (429, Some("slow_down")));
    r.shutdown().await;
}

#[tokio::test]
async fn a_sign_in_started_on_one_replica_finishes_on_the_other() {
    let db = TestDatabase::create().await;
    let r = replicas::start(2, |_| db.store_yaml(), "").await;
    let (public, b) = (&r.replicas[0].url, &r.replicas[1].url);
    assert_eq!(public, &r.origin);
    // Claude Code asks B; the person signs in through the public origin (A).
    let (status, grant) = form(&r, b, "/oauth/device_authorization", &[]).await;
    assert_eq!(status, 200, "{grant}");
    let complete = grant["verification_uri_complete"].as_str().unwrap();
    assert!(complete.starts_with(&r.origin), "{complete}");
    let page = browser_login(complete, "alice", PASSWORD, None).await;
    assert_eq!(page["result"], "Signed in", "{page}");
    // B redeems what A approved, once.
    let poll = [
        ("grant_type", DEVICE_GRANT),
        ("device_code", grant["device_code"].as_str().unwrap()),
    ];
    let (status, tokens) = form(&r, b, "/oauth/token", &poll).await;
    assert_eq!(status, 200, "{tokens}");
    let (status, again) = form(&r, public, "/oauth/token", &poll).await;
    assert_eq!(
        (status, again["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    let access = tokens["access_token"].as_str().unwrap();
    for base in [public, b] {
        let resp = r
            .client
            .post(format!("{base}/v1/messages"))
            .bearer_auth(access)
            .json(&sonnet(false))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{base}");
    }
    // Revoked through A, the session stops working on B too (B reloads revocations from
    // the shared store every few seconds; this waits at most a few of those).
    let (status, _) = form(&r, public, "/oauth/revoke", &[("token", access)]).await;
    assert_eq!(status, 200);
    let deadline = std::time::Instant::now() + 4 * gatehouse_engine::server::REVOCATION_SYNC;
    let mut refused = false;
    while std::time::Instant::now() < deadline {
        let resp = r
            .client
            .post(format!("{b}/v1/messages"))
            .bearer_auth(access)
            .json(&sonnet(false))
            .send()
            .await
            .unwrap();
        if resp.status() == 401 {
            refused = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    assert!(refused, "a session revoked on A still works on B");
    r.shutdown().await;
}

/// Two replicas, an IdP that does not rotate refresh tokens: the same refresh token sent to
/// both at once gives exactly one session (the claim is one conditional write in the
/// shared store), and the IdP sees one refresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_token_is_redeemed_once_across_replicas() {
    let db = TestDatabase::create().await;
    let r =
        replicas::start_with_idp(2, |_| db.store_yaml(), "", &[("IDP_ROTATE_REFRESH", "0")]).await;
    let (a, b) = (&r.replicas[0].url, &r.replicas[1].url);
    let (status, grant) = form(&r, b, "/oauth/device_authorization", &[]).await;
    assert_eq!(status, 200, "{grant}");
    let complete = grant["verification_uri_complete"].as_str().unwrap();
    let page = browser_login(complete, "alice", PASSWORD, None).await;
    assert_eq!(page["result"], "Signed in", "{page}");
    let poll = [
        ("grant_type", DEVICE_GRANT),
        ("device_code", grant["device_code"].as_str().unwrap()),
    ];
    let (status, tokens) = form(&r, a, "/oauth/token", &poll).await;
    assert_eq!(status, 200, "{tokens}");
    let refresh = tokens["refresh_token"].as_str().unwrap();
    r.idp
        .control("delay-token", serde_json::json!({"ms": 400}))
        .await;
    r.idp.control("reset-stats", serde_json::json!({})).await;
    let pairs = [("grant_type", "refresh_token"), ("refresh_token", refresh)];
    let results = futures_util::future::join_all(
        [a, b, a, b].map(|base| form(&r, base, "/oauth/token", &pairs)),
    )
    .await;
    let won = results.iter().filter(|(st, _)| *st == 200).count();
    let statuses: Vec<u16> = results.iter().map(|(st, _)| *st).collect();
    assert_eq!(won, 1, "{statuses:?}");
    for (status, body) in results.iter().filter(|(st, _)| *st != 200) {
        assert_eq!(
            (*status, body["error"].as_str()),
            (401, Some("invalid_grant"))
        );
    }
    let stats = r.idp.stats().await;
    assert_eq!(stats["by_grant_type"]["refresh_token"], 1, "{stats}");
    r.shutdown().await;
}

//! Upgrades, on SQLite and PostgreSQL: for every proper prefix of the released migration
//! set (so a migration added later is covered without touching this file), a database is
//! built with only those migrations, each filled right after its migration with the rows a
//! gateway of that version writes (usage, keyed state, the local key, caps, audit, spend,
//! reservations, principals). The current gateway then starts on it, migrates, serves a
//! request, and the test checks every old row through the store and that the new schema
//! works (caps, reservations, principals). A database whose recorded version is newer than
//! this binary knows stops the gateway at start, naming both versions.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use fake_upstream::{FakeConfig, FakeUpstream};
use gatehouse_engine::deps::{Deps, MapEnvironment, NoCredentialStore, SystemClock};
use gatehouse_engine::events::MemoryEventSink;
use gatehouse_engine::identity::user::UserIdentity;
use gatehouse_engine::spend::{
    GroupMode, Period, ReserveOutcome, ReserveRequest, ScopeType, windows,
};
use gatehouse_engine::store::migrations::{self, Migration};
use gatehouse_engine::store::{SettleAs, Store};
use gatehouse_tests::postgres::TestDatabase;
use gatehouse_tests::{TestGateway, base_yaml, load, sonnet};

#[derive(Clone, Copy, PartialEq)]
enum Backend {
    Sqlite,
    Postgres,
}

const LOCAL_HASH: [u8; 32] = [7; 32];
const ALICE_SPENT: u64 = 1_500_000;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn bytes_literal(b: Backend, bytes: &[u8]) -> String {
    match b {
        Backend::Sqlite => format!("X'{}'", hex(bytes)),
        Backend::Postgres => format!("'\\x{}'::bytea", hex(bytes)),
    }
}

/// The rows a gateway at schema `version` writes into the tables that migration created.
fn seed_sql(b: Backend, version: i64, now: DateTime<Utc>) -> String {
    let ms = |t: DateTime<Utc>| t.timestamp_millis();
    let hour_ago = ms(now - Duration::hours(1));
    match version {
        1 => {
            let mut sql = String::new();
            for (i, (model, cost)) in [
                ("claude-sonnet-4-6", 600_000),
                ("claude-opus-4-1", 800_000),
                ("claude-haiku-4-5", 100_000),
            ]
            .iter()
            .enumerate()
            {
                sql.push_str(&format!(
                    "INSERT INTO usage_events (request_id, created_at, principal, endpoint, model,
                        upstream, upstream_model, status, route_reason, stream, input_tokens,
                        output_tokens, cache_read_tokens, cache_write_5m_tokens,
                        cache_write_1h_tokens, web_search_requests, cost_micro_usd, usage_source,
                        latency_ms, ttfb_ms, client_disconnected)
                     VALUES ('req_old_{i}', {t}, 'alice', 'messages', '{model}', 'primary',
                        '{model}', 200, 'ordered', TRUE, {inp}, 250, 10, 0, 0, 0, {cost},
                        'reported', 900, 120, FALSE);\n",
                    t = hour_ago + i as i64,
                    inp = 1000 + i,
                ));
            }
            sql + &format!(
                "INSERT INTO kv (key, value, expires_at) VALUES ('device:grant-1', {grant}, {exp});
                 INSERT INTO kv (key, value, expires_at) VALUES ('rate:auth:127.0.0.1', {one}, NULL);
                 INSERT INTO local_keys (id, key_hash, created_at) VALUES ('local', {hash}, {hour_ago});",
                grant = bytes_literal(b, b"grant-bytes"),
                exp = ms(now + Duration::hours(1)),
                one = bytes_literal(b, b"1"),
                hash = bytes_literal(b, &LOCAL_HASH),
            )
        }
        2 => {
            let owner = if b == Backend::Postgres { ", 0" } else { "" };
            let owner_col = if b == Backend::Postgres {
                ", owner_key"
            } else {
                ""
            };
            let [d, w, m] = windows(now).map(|w| ms(w.start));
            format!(
                "INSERT INTO spend_limits (id, scope_type, scope_id, period, amount_cents, created_at, updated_at)
                   VALUES ('lim_alice_daily', 'user', 'alice', 'daily', 500, {hour_ago}, {hour_ago});
                 INSERT INTO spend_limits (id, scope_type, scope_id, period, amount_cents, created_at, updated_at)
                   VALUES ('lim_org_monthly', 'organization', '', 'monthly', 100000, {hour_ago}, {hour_ago});
                 INSERT INTO admin_audit (id, at, actor, action, limit_id, before, after)
                   VALUES ('aud_1', {hour_ago}, 'admin-key:ops', 'spend_limit.create', 'lim_alice_daily',
                           NULL, '{{\"id\":\"lim_alice_daily\",\"amount_cents\":500}}');
                 INSERT INTO admin_audit (id, at, actor, action, limit_id, before, after)
                   VALUES ('aud_2', {t2}, 'admin-key:ops', 'spend_limit.create', 'lim_org_monthly',
                           NULL, '{{\"id\":\"lim_org_monthly\",\"amount_cents\":100000}}');
                 INSERT INTO spend (principal, period, period_start, spent_micro, reserved_micro, updated_at)
                   VALUES ('alice', 'daily', {d}, {ALICE_SPENT}, 0, {hour_ago}),
                          ('alice', 'weekly', {w}, {ALICE_SPENT}, 0, {hour_ago}),
                          ('alice', 'monthly', {m}, {ALICE_SPENT}, 0, {hour_ago});
                 INSERT INTO reservations (id, principal, request_id, created_at, amount_micro,
                     daily_start, weekly_start, monthly_start, state, settled_micro{owner_col})
                   VALUES ('res_old_0', 'alice', 'req_old_0', {hour_ago}, 900000, {d}, {w}, {m},
                           'settled', 600000{owner});",
                t2 = hour_ago + 1,
            )
        }
        3 => format!(
            "INSERT INTO principals (sub, email, name, groups, updated_at)
               VALUES ('alice', 'alice@example.com', 'Alice', '[\"eng\"]', {hour_ago});"
        ),
        // Later migrations' tables are exercised through the store after the upgrade.
        _ => String::new(),
    }
}

/// The runner's bookkeeping table, as it creates it.
fn migrations_table(b: Backend) -> String {
    let int = if b == Backend::Sqlite {
        "INTEGER"
    } else {
        "BIGINT"
    };
    format!(
        "CREATE TABLE IF NOT EXISTS _migrations (
             version {int} PRIMARY KEY, name TEXT NOT NULL, applied_at {int} NOT NULL);"
    )
}

fn insert_migration(m: &Migration, at: i64) -> String {
    format!(
        "INSERT INTO _migrations (version, name, applied_at) VALUES ({}, '{}', {at});",
        m.version, m.name
    )
}

/// A SQLite file at `path` with the first `k` migrations, each followed by its rows.
fn sqlite_at(path: &std::path::Path, k: usize, now: DateTime<Utc>) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(&migrations_table(Backend::Sqlite))
        .unwrap();
    for m in &migrations::SQLITE[..k] {
        conn.execute_batch(m.sql).unwrap();
        conn.execute_batch(&insert_migration(m, now.timestamp_millis()))
            .unwrap();
        conn.execute_batch(&seed_sql(Backend::Sqlite, m.version, now))
            .unwrap();
    }
}

/// The same on a fresh PostgreSQL database.
async fn postgres_at(db: &TestDatabase, k: usize, now: DateTime<Utc>) {
    let c = db.client().await;
    c.batch_execute(&migrations_table(Backend::Postgres))
        .await
        .unwrap();
    for m in &migrations::POSTGRES[..k] {
        c.batch_execute(m.sql).await.unwrap();
        c.batch_execute(&insert_migration(m, now.timestamp_millis()))
            .await
            .unwrap();
        c.batch_execute(&seed_sql(Backend::Postgres, m.version, now))
            .await
            .unwrap();
    }
}

/// Starts the current gateway on `store_line`; its error as text when it refuses.
async fn start(store_line: &str) -> Result<TestGateway, String> {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gatehouse.db");
    let sqlite = format!("store: {{sqlite_path: \"{}\"}}", db.display());
    let yaml = base_yaml(&fake.url(), &db).replace(&sqlite, store_line);
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
        .map_err(|e| e.to_string())?;
    Ok(TestGateway {
        handle,
        fake,
        events,
        dir,
        client: reqwest::Client::builder().no_proxy().build().unwrap(),
    })
}

/// Every seeded row of the first `k` migrations is readable through the store.
async fn check_old_rows(store: &dyn Store, k: usize, now: DateTime<Utc>) {
    let rows = store.recent_usage(100).await.unwrap();
    for (i, cost) in [600_000, 800_000, 100_000].iter().enumerate() {
        let id = format!("req_old_{i}");
        let row = rows.iter().find(|r| r.request_id == id).expect(&id);
        assert_eq!(
            (
                row.principal.as_str(),
                row.cost_micro_usd,
                row.input_tokens,
                row.stream
            ),
            ("alice", *cost, 1000 + i as u64, true),
            "k={k}"
        );
    }
    let key = store.kv_get("device:grant-1", now).await.unwrap();
    assert_eq!(key.as_deref(), Some(&b"grant-bytes"[..]), "k={k}");
    let hash = store.local_key_hash().await.unwrap().expect("local key");
    assert_eq!(hash.0, LOCAL_HASH);
    if k >= 2 {
        let cap = store
            .get_limit("lim_alice_daily")
            .await
            .unwrap()
            .expect("cap");
        assert_eq!(
            (cap.scope_type, cap.amount_cents),
            (ScopeType::User, Some(500))
        );
        let (audit, _) = store
            .audit_page(gatehouse_engine::store::AuditQuery {
                limit: 50,
                ..Default::default()
            })
            .await
            .unwrap();
        let ids: Vec<&str> = audit.iter().map(|a| a.id.as_str()).collect();
        assert!(ids.contains(&"aud_1") && ids.contains(&"aud_2"), "{ids:?}");
        let standings = store
            .standings("alice", &[], GroupMode::Min, now)
            .await
            .unwrap();
        let daily = standings
            .iter()
            .find(|s| s.period == Period::Daily)
            .unwrap();
        assert_eq!(
            (daily.spent_micro, daily.cap_cents),
            (ALICE_SPENT, Some(500))
        );
        assert_eq!(store.usage_cost("req_old_1").await.unwrap(), Some(800_000));
    }
    if k >= 3 {
        let who = store.principals(Some(vec!["alice".into()])).await.unwrap();
        assert_eq!(who[0].email.as_deref(), Some("alice@example.com"));
        assert_eq!(who[0].groups, ["eng"]);
    }
}

/// The whole current schema works on the upgraded database.
async fn check_new_schema(g: &TestGateway, old_usage: usize) {
    let r = g.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    g.usage_rows(old_usage + 1).await;
    let store = g.handle.store();
    let now = Utc::now();
    let who = UserIdentity {
        sub: "bob".into(),
        email: Some("bob@example.com".into()),
        name: None,
        groups: vec!["eng".into()],
    };
    store.upsert_principal(who, now).await.unwrap();
    store
        .upsert_limit(
            ScopeType::User,
            "bob",
            Period::Daily,
            Some(100),
            "test",
            now,
        )
        .await
        .unwrap();
    let outcome = store
        .reserve(ReserveRequest {
            reservation_id: "res_new".into(),
            request_id: "req_new".into(),
            sub: "bob".into(),
            groups: vec!["eng".into()],
            amount_micro: 200_000,
            family: None,
            keep_free_micro: 0,
            windows: windows(now),
            mode: GroupMode::Min,
            pool_rule: Default::default(),
            now,
        })
        .await
        .unwrap();
    assert!(
        matches!(outcome, ReserveOutcome::Reserved(_)),
        "{outcome:?}"
    );
    assert!(
        store
            .settle("res_new", 150_000, SettleAs::Estimated, now)
            .await
            .unwrap()
    );
    let standings = store
        .standings("bob", &["eng".into()], GroupMode::Min, now)
        .await
        .unwrap();
    let daily = standings
        .iter()
        .find(|s| s.period == Period::Daily)
        .unwrap();
    assert_eq!((daily.spent_micro, daily.reserved_micro), (150_000, 0));
    assert_eq!(
        store
            .principals(Some(vec!["bob".into()]))
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn sqlite_databases_of_every_earlier_schema_upgrade_with_their_data() {
    let latest = migrations::latest(migrations::SQLITE) as usize;
    assert!(latest >= 2);
    for k in 1..latest {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        let now = Utc::now();
        sqlite_at(&path, k, now);
        let g = start(&format!("store: {{sqlite_path: \"{}\"}}", path.display()))
            .await
            .unwrap_or_else(|e| panic!("k={k}: {e}"));
        check_old_rows(g.handle.store().as_ref(), k, now).await;
        check_new_schema(&g, 3).await;
        let conn = rusqlite::Connection::open(&path).unwrap();
        let version: i64 = conn
            .query_row("SELECT MAX(version) FROM _migrations", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, latest as i64);
    }
}

#[tokio::test]
async fn postgres_databases_of_every_earlier_schema_upgrade_with_their_data() {
    let latest = migrations::latest(migrations::POSTGRES) as usize;
    assert!(latest >= 2);
    for k in 1..latest {
        let db = TestDatabase::create().await;
        let now = Utc::now();
        postgres_at(&db, k, now).await;
        let g = start(&db.store_yaml())
            .await
            .unwrap_or_else(|e| panic!("k={k}: {e}"));
        check_old_rows(g.handle.store().as_ref(), k, now).await;
        check_new_schema(&g, 3).await;
        let version: i64 = db
            .client()
            .await
            .query_one("SELECT MAX(version) FROM _migrations", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(version, latest as i64);
    }
}

fn assert_refused_naming_both(err: &str, found: i64, supported: i64) {
    assert!(
        err.contains(&format!(
            "database schema version {found} is newer than this binary supports ({supported})"
        )),
        "{err}"
    );
}

#[tokio::test]
async fn a_database_from_a_newer_gatehouse_is_refused_naming_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db");
    let latest = migrations::latest(migrations::SQLITE);
    // Every migration applied (a version number may be skipped: count the list).
    sqlite_at(&path, migrations::SQLITE.len(), Utc::now());
    let newer = Migration {
        version: latest + 1,
        name: "9999_future.sql",
        sql: "",
    };
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(&insert_migration(&newer, 0)).unwrap();
    drop(conn);
    let err = start(&format!("store: {{sqlite_path: \"{}\"}}", path.display()))
        .await
        .err()
        .expect("a newer SQLite schema is refused");
    assert_refused_naming_both(&err, latest + 1, latest);
    // Refused before anything was written: the file is as the newer gatehouse left it.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let usage: i64 = conn
        .query_row("SELECT COUNT(*) FROM usage_events", [], |r| r.get(0))
        .unwrap();
    assert_eq!(usage, 3);

    let db = TestDatabase::create().await;
    let latest = migrations::latest(migrations::POSTGRES);
    postgres_at(&db, migrations::POSTGRES.len(), Utc::now()).await;
    db.client()
        .await
        .batch_execute(&insert_migration(&newer, 0))
        .await
        .unwrap();
    let err = start(&db.store_yaml())
        .await
        .err()
        .expect("a newer PostgreSQL schema is refused");
    assert_refused_naming_both(&err, latest + 1, latest);
}

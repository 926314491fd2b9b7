//! The `Store` contract, run against both backends: SQLite (a temporary file) and
//! PostgreSQL (a fresh database in the cluster `scripts/test.sh` starts). Each test runs
//! the same steps on each and expects the same answers: kv compare-and-swap, insert-if-absent,
//! expiry and counters (also under concurrency), reservations and settlement, caps with their audit
//! trail, the identity directory, usage, and retention.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use gatehouse_engine::identity::UserIdentity;
use gatehouse_engine::spend::{
    GroupMode, Meter, Period, ReserveOutcome, ReserveRequest, ScopeType, windows,
};
use gatehouse_engine::store::{PostgresStore, SettleAs, SqliteStore, Store, UsageRecord};
use gatehouse_tests::postgres::TestDatabase;
use serde_json::Value;

struct Backend {
    name: &'static str,
    store: Arc<dyn Store>,
    _db: Option<TestDatabase>,
    _dir: tempfile::TempDir,
}

impl Backend {
    /// Stops this store and opens the same database again, as a gateway restart after a
    /// crash would; returns the open reservations the new store finds nobody holding.
    async fn restart(&mut self) -> Vec<gatehouse_engine::store::OpenReservation> {
        let now = Utc::now();
        match &self._db {
            None => {
                let path = self._dir.path().join("store.db");
                self.store = Arc::new(
                    tokio::task::spawn_blocking(move || SqliteStore::open(&path, now))
                        .await
                        .unwrap()
                        .unwrap(),
                );
                self.store.open_reservations().await.unwrap()
            }
            Some(db) => {
                self.store = Arc::new(PostgresStore::open(&db.config(), now).await.unwrap());
                // The old store's session ends asynchronously after the drop.
                for _ in 0..200 {
                    let open = self.store.open_reservations().await.unwrap();
                    if !open.is_empty() {
                        return open;
                    }
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                Vec::new()
            }
        }
    }
}

async fn backends() -> Vec<Backend> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let sqlite = tokio::task::spawn_blocking(move || SqliteStore::open(&path, Utc::now()))
        .await
        .unwrap()
        .unwrap();
    let db = TestDatabase::create().await;
    let pg = PostgresStore::open(&db.config(), Utc::now()).await.unwrap();
    vec![
        Backend {
            name: "sqlite",
            store: Arc::new(sqlite),
            _db: None,
            _dir: dir,
        },
        Backend {
            name: "postgres",
            store: Arc::new(pg),
            _db: Some(db),
            _dir: tempfile::tempdir().unwrap(),
        },
    ]
}

fn secs(s: i64) -> chrono::Duration {
    chrono::Duration::seconds(s)
}

#[tokio::test]
async fn kv_compare_and_swap_expiry_and_scan() {
    for b in backends().await {
        let (s, n) = (&b.store, b.name);
        let now = Utc::now().trunc_subsecs(3);
        s.kv_put("grant:a", b"v1".to_vec(), Some(now + secs(60)))
            .await
            .unwrap();
        assert_eq!(
            s.kv_get("grant:a", now).await.unwrap(),
            Some(b"v1".to_vec()),
            "{n}"
        );
        assert!(
            !s.kv_replace("grant:a", b"other".to_vec(), b"v2".to_vec(), None, now)
                .await
                .unwrap(),
            "{n}: a stale expected value does not swap"
        );
        assert!(
            s.kv_replace(
                "grant:a",
                b"v1".to_vec(),
                b"v2".to_vec(),
                Some(now + secs(5)),
                now
            )
            .await
            .unwrap(),
            "{n}"
        );
        // Expired: invisible at once, and no longer swappable.
        let later = now + secs(6);
        assert_eq!(s.kv_get("grant:a", later).await.unwrap(), None, "{n}");
        assert!(
            !s.kv_replace("grant:a", b"v2".to_vec(), b"v3".to_vec(), None, later)
                .await
                .unwrap(),
            "{n}"
        );
        assert!(
            !s.kv_delete("grant:a", Some(b"nope".to_vec()))
                .await
                .unwrap(),
            "{n}"
        );
        assert!(
            s.kv_delete("grant:a", Some(b"v2".to_vec())).await.unwrap(),
            "{n}"
        );
        assert!(!s.kv_delete("grant:a", None).await.unwrap(), "{n}");

        // Prefix scans treat `_` and `%` literally and return keys in byte order.
        for (k, exp) in [
            ("p_x:2", None),
            ("p_x:1", None),
            ("p_x:B", Some(now + secs(60))),
            ("p_x:a", Some(now - secs(1))),
            ("pax:1", None),
            ("p%x:1", None),
        ] {
            s.kv_put(k, k.as_bytes().to_vec(), exp).await.unwrap();
        }
        let keys: Vec<String> = s
            .kv_scan("p_x:", now)
            .await
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(keys, ["p_x:1", "p_x:2", "p_x:B"], "{n}");
        assert_eq!(s.kv_purge_expired(now).await.unwrap(), 1, "{n}");
        assert_eq!(s.kv_scan("p%", now).await.unwrap().len(), 1, "{n}");
    }
}

#[tokio::test]
async fn kv_swaps_and_counters_under_concurrency() {
    for b in backends().await {
        let (s, n) = (&b.store, b.name);
        let now = Utc::now().trunc_subsecs(3);
        s.kv_put("grant:race", b"pending".to_vec(), None)
            .await
            .unwrap();
        // Twenty pollers redeem the same grant at once: exactly one wins.
        let wins = futures_util::future::join_all((0..20).map(|i| {
            s.kv_replace(
                "grant:race",
                b"pending".to_vec(),
                format!("redeemed-{i}").into_bytes(),
                None,
                now,
            )
        }))
        .await;
        assert_eq!(
            wins.into_iter().filter(|w| *w.as_ref().unwrap()).count(),
            1,
            "{n}"
        );

        // Twenty redeemers claim the same absent key at once: exactly one inserts.
        let claims = futures_util::future::join_all((0..20).map(|i| {
            s.kv_insert(
                "revoked:rt:race",
                format!("claimed-{i}").into_bytes(),
                Some(now + secs(60)),
                now,
            )
        }))
        .await;
        assert_eq!(
            claims.into_iter().filter(|w| *w.as_ref().unwrap()).count(),
            1,
            "{n}"
        );
        // A live entry is never overwritten; an expired one is.
        assert!(
            !s.kv_insert("revoked:rt:race", b"x".to_vec(), None, now)
                .await
                .unwrap(),
            "{n}"
        );
        let later = now + secs(61);
        assert!(
            s.kv_insert("revoked:rt:race", b"again".to_vec(), None, later)
                .await
                .unwrap(),
            "{n}"
        );
        assert_eq!(
            s.kv_get("revoked:rt:race", later).await.unwrap(),
            Some(b"again".to_vec()),
            "{n}"
        );

        let window = Duration::from_secs(600);
        let mut counts: Vec<u64> =
            futures_util::future::join_all((0..40).map(|_| s.kv_incr("rate:ip", window, now)))
                .await
                .into_iter()
                .map(Result::unwrap)
                .collect();
        counts.sort_unstable();
        assert_eq!(
            counts,
            (1..=40).collect::<Vec<u64>>(),
            "{n}: every increment counted once"
        );
        // A new window starts from one.
        assert_eq!(
            s.kv_incr("rate:ip", window, now + secs(601)).await.unwrap(),
            1,
            "{n}"
        );
        assert_eq!(
            s.kv_incr("rate:ip", window, now + secs(602)).await.unwrap(),
            2,
            "{n}"
        );
    }
}

fn reserve(
    id: &str,
    sub: &str,
    groups: &[&str],
    amount: u64,
    now: DateTime<Utc>,
) -> ReserveRequest {
    ReserveRequest {
        reservation_id: id.into(),
        request_id: format!("req-{id}"),
        sub: sub.into(),
        groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        amount_micro: amount,
        family: None,
        keep_free_micro: 0,
        windows: windows(now),
        mode: GroupMode::Min,
        pool_rule: Default::default(),
        now,
    }
}

fn usage(request_id: &str, cost: u64, reservation: Option<&str>, at: DateTime<Utc>) -> UsageRecord {
    UsageRecord {
        request_id: request_id.into(),
        row_key: UsageRecord::new_row_key(),
        created_at: at,
        principal: "user:alice".into(),
        endpoint: "messages".into(),
        model: "claude-sonnet-4-6".into(),
        upstream: Some("primary".into()),
        upstream_model: Some("claude-sonnet-4-6".into()),
        status: 200,
        route_reason: "primary: first in order, ok 200".into(),
        stream: false,
        input_tokens: 10,
        output_tokens: 20,
        cache_read_tokens: 0,
        cache_write_5m_tokens: 0,
        cache_write_1h_tokens: 0,
        web_search_requests: 0,
        cost_micro_usd: cost,
        usage_source: "reported".into(),
        latency_ms: 7,
        ttfb_ms: Some(2),
        client_disconnected: false,
        reservation_id: reservation.map(str::to_owned),
        tags: Default::default(),
    }
}

/// Amounts past `i64::MAX` (the engine never sends them: it caps every amount at 2^53 - 1)
/// never leave a spend row that cannot be read back: both stores saturate their sums
/// (PostgreSQL's `gatehouse_reserve_pooled` since migration 0009).
#[tokio::test]
async fn spend_sums_never_overflow_the_rows() {
    for b in backends().await {
        let (s, n) = (&b.store, b.name);
        let now = Utc::now().trunc_subsecs(3);
        let huge = u64::MAX;
        let first = s.reserve(reserve("rsv_h1", "zed", &[], huge, now)).await;
        assert!(matches!(first, Ok(ReserveOutcome::Reserved(_))), "{n}");
        let second = s.reserve(reserve("rsv_h2", "zed", &[], huge, now)).await;
        assert!(
            matches!(second, Ok(ReserveOutcome::Reserved(_))),
            "{n}: the hold saturates, never a store error: {second:?}"
        );
        let st = s.standings("zed", &[], GroupMode::Min, now).await.unwrap();
        assert_eq!(st[0].reserved_micro, i64::MAX as u64, "{n}");
        // Two settlements of i64::MAX each: spent stops at i64::MAX and still reads.
        s.insert_usage(Arc::new(vec![usage("req-h1", huge, Some("rsv_h1"), now)]))
            .await
            .unwrap();
        let small = s.reserve(reserve("rsv_h3", "zed", &[], 1, now)).await;
        assert!(matches!(small, Ok(ReserveOutcome::Reserved(_))), "{n}");
        s.insert_usage(Arc::new(vec![usage("req-h3", huge, Some("rsv_h3"), now)]))
            .await
            .unwrap();
        let st = s.standings("zed", &[], GroupMode::Min, now).await.unwrap();
        assert_eq!(st[0].spent_micro, i64::MAX as u64, "{n}");
    }
}

/// A reservation on top of holds and spend near `i64::MAX` is decided by the cap rule
/// (`spend::caps`: sums in u128 against the cap in micro-USD), never failed by the store:
/// within a cap it is admitted with the holds (the person's and their shared budget's)
/// saturated at `i64::MAX`; past a cap it is refused naming the period. Before migration
/// 0009 PostgreSQL's `gatehouse_reserve_pooled` raised `bigint out of range` here.
#[tokio::test]
async fn reservations_near_i64_max_saturate_or_are_refused_never_a_store_error() {
    for b in backends().await {
        let (s, n) = (&b.store, b.name);
        let now = Utc::now().trunc_subsecs(3);
        let max = i64::MAX as u64;
        let reserved = |r: &Result<ReserveOutcome, _>| matches!(r, Ok(ReserveOutcome::Reserved(_)));

        // A cap of i64::MAX cents is far above i64::MAX micro-USD: everything fits.
        s.upsert_limit(
            ScopeType::User,
            "yan",
            Period::Monthly,
            Some(i64::MAX),
            "key:t",
            now,
        )
        .await
        .unwrap();
        let r = s.reserve(reserve("rsv_m1", "yan", &[], max, now)).await;
        assert!(reserved(&r), "{n}: {r:?}");
        let r = s.reserve(reserve("rsv_m2", "yan", &[], 1_000, now)).await;
        assert!(reserved(&r), "{n}: admitted, the hold saturates: {r:?}");
        let st = s.standings("yan", &[], GroupMode::Min, now).await.unwrap();
        assert!(st.iter().all(|p| p.reserved_micro == max), "{n}: {st:?}");
        // Spent near i64::MAX as well: one more is still admitted, still saturated.
        s.insert_usage(Arc::new(vec![usage(
            "req-m1",
            max - 5,
            Some("rsv_m1"),
            now,
        )]))
        .await
        .unwrap();
        let r = s.reserve(reserve("rsv_m3", "yan", &[], max, now)).await;
        assert!(reserved(&r), "{n}: {r:?}");
        let r = s.reserve(reserve("rsv_m4", "yan", &[], 1_000, now)).await;
        assert!(reserved(&r), "{n}: {r:?}");
        let st = s.standings("yan", &[], GroupMode::Min, now).await.unwrap();
        assert!(
            st.iter()
                .all(|p| p.spent_micro == max - 5 && p.reserved_micro == max),
            "{n}: {st:?}"
        );

        // A shared budget's hold saturates too.
        let pooled = gatehouse_engine::spend::PooledBudget {
            amount_cents: i64::MAX,
            paused: false,
        };
        s.upsert_pooled_limit("big", Some(i64::MAX), Some(pooled), "key:t", now)
            .await
            .unwrap();
        let r = s
            .reserve(reserve("rsv_m5", "zoe", &["big"], max, now))
            .await;
        assert!(reserved(&r), "{n}: {r:?}");
        let r = s
            .reserve(reserve("rsv_m6", "zoe", &["big"], 1_000, now))
            .await;
        assert!(reserved(&r), "{n}: {r:?}");
        let pool = s.pool_totals(vec!["big".into()], now).await.unwrap();
        assert_eq!(pool, vec![("big".to_owned(), 0, max)], "{n}");

        // A cap just below i64::MAX micro-USD, held in full: one micro-USD more is refused.
        let cap_cents = i64::MAX / 10_000;
        let cap_micro = cap_cents as u64 * 10_000;
        s.upsert_limit(
            ScopeType::User,
            "xia",
            Period::Monthly,
            Some(cap_cents),
            "key:t",
            now,
        )
        .await
        .unwrap();
        let r = s
            .reserve(reserve("rsv_m7", "xia", &[], cap_micro, now))
            .await;
        assert!(reserved(&r), "{n}: {r:?}");
        match s.reserve(reserve("rsv_m8", "xia", &[], 1, now)).await {
            Ok(ReserveOutcome::Refused { exceeded, pool, .. }) => {
                assert_eq!(exceeded, vec![Meter::all(Period::Monthly)], "{n}");
                assert!(pool.is_none(), "{n}");
            }
            other => panic!("{n}: expected a refusal over the cap, got {other:?}"),
        }
        let r = s.reserve(reserve("rsv_m9", "xia", &[], max, now)).await;
        assert!(!reserved(&r) && r.is_ok(), "{n}: {r:?}");
    }
}

#[tokio::test]
async fn reservations_hold_settle_and_release() {
    for b in backends().await {
        let (s, n) = (&b.store, b.name);
        let now = Utc::now().trunc_subsecs(3);
        // One cent a day for alice; the org's ten cents a month bind each person alone.
        s.upsert_limit(
            ScopeType::User,
            "alice",
            Period::Daily,
            Some(1),
            "key:t",
            now,
        )
        .await
        .unwrap();
        s.upsert_limit(
            ScopeType::Organization,
            "",
            Period::Monthly,
            Some(10),
            "key:t",
            now,
        )
        .await
        .unwrap();
        let r = s
            .reserve(reserve("rsv_1", "alice", &[], 6_000, now))
            .await
            .unwrap();
        let ReserveOutcome::Reserved(st) = r else {
            panic!("{n}: {r:?}")
        };
        assert_eq!(
            (st[0].cap_cents, st[0].reserved_micro),
            (Some(1), 6_000),
            "{n}"
        );
        assert_eq!(st[2].cap_scope, Some(ScopeType::Organization), "{n}");
        // The second does not fit next to the first: refused, and nothing is written.
        let r = s
            .reserve(reserve("rsv_2", "alice", &[], 6_000, now))
            .await
            .unwrap();
        let ReserveOutcome::Refused {
            exceeded,
            standings,
            ..
        } = r
        else {
            panic!("{n}: {r:?}")
        };
        assert_eq!(exceeded, vec![Meter::all(Period::Daily)], "{n}");
        assert_eq!(standings[0].reserved_micro, 6_000, "{n}");
        // Bob has his own share of the org cap.
        assert!(matches!(
            s.reserve(reserve("rsv_b", "bob", &[], 90_000, now))
                .await
                .unwrap(),
            ReserveOutcome::Reserved(_)
        ));
        // Nobody will settle these until the store is opened again after a stop.
        let mut b = b;
        let open: Vec<_> = b
            .restart()
            .await
            .into_iter()
            .map(|o| (o.id, o.request_id))
            .collect();
        assert_eq!(
            open,
            vec![
                ("rsv_1".to_owned(), "req-rsv_1".to_owned()),
                ("rsv_b".to_owned(), "req-rsv_b".to_owned())
            ],
            "{n}"
        );
        let s = &b.store;

        // Charged with its usage rows (a lease): the hold shrinks by the real cost, the
        // spend grows by it, and the lease stays open until released. Two requests that
        // share a caller's request id in the same millisecond are two rows, two charges.
        let batch = std::sync::Arc::new(vec![
            usage("req-rsv_1", 1_000, Some("rsv_1"), now),
            usage("req-rsv_1", 500, Some("rsv_1"), now),
            usage("req-rsv_1b", 1_000, Some("rsv_1"), now),
        ]);
        // Then the same batch again (the writer's retry after a commit whose answer was
        // lost): no row twice, no charge twice.
        for attempt in ["first write", "replayed batch"] {
            s.insert_usage(batch.clone()).await.unwrap();
            let st = s
                .standings("alice", &[], GroupMode::Min, now)
                .await
                .unwrap();
            assert_eq!(
                (st[0].spent_micro, st[0].reserved_micro),
                (2_500, 3_500),
                "{n}: {attempt}"
            );
            assert_eq!(s.recent_usage(10).await.unwrap().len(), 3, "{n}: {attempt}");
        }
        let open = s.open_reservations().await.unwrap();
        assert_eq!(open.len(), 2, "{n}: {open:?}");
        assert_eq!(
            (open[0].id.as_str(), open[0].amount_micro),
            ("rsv_1", 3_500),
            "{n}"
        );
        assert!(
            s.settle("rsv_1", 0, SettleAs::Released, now).await.unwrap(),
            "{n}: the rest is released"
        );
        assert!(
            !s.settle("rsv_1", 9_999, SettleAs::Released, now)
                .await
                .unwrap(),
            "{n}: released once"
        );
        let st = s
            .standings("alice", &[], GroupMode::Min, now)
            .await
            .unwrap();
        assert_eq!((st[0].spent_micro, st[0].reserved_micro), (2_500, 0), "{n}");
        assert_eq!((st[2].spent_micro, st[2].reserved_micro), (2_500, 0), "{n}");
        assert_eq!(s.usage_cost("req-rsv_1").await.unwrap(), Some(1_500), "{n}");
        assert_eq!(s.usage_cost("req-none").await.unwrap(), None, "{n}");
        // Now 7,500 fit, 7,501 do not.
        let refused = s
            .reserve(reserve("rsv_3", "alice", &[], 7_501, now))
            .await
            .unwrap();
        assert!(matches!(refused, ReserveOutcome::Refused { .. }), "{n}");
        let held = s
            .reserve(reserve("rsv_4", "alice", &[], 7_500, now))
            .await
            .unwrap();
        assert!(matches!(held, ReserveOutcome::Reserved(_)), "{n}");
        // Released (the client left before any upstream answered): nothing is charged.
        assert!(
            s.settle("rsv_4", 0, SettleAs::Released, now).await.unwrap(),
            "{n}"
        );
        assert!(
            s.settle("rsv_b", 1_000, SettleAs::Charged, now)
                .await
                .unwrap(),
            "{n}"
        );
        let st = s
            .standings("alice", &[], GroupMode::Min, now)
            .await
            .unwrap();
        assert_eq!((st[0].spent_micro, st[0].reserved_micro), (2_500, 0), "{n}");
        assert!(s.open_reservations().await.unwrap().is_empty(), "{n}");
        // A zero cap blocks any amount; group caps bind by mode.
        s.upsert_limit(
            ScopeType::RbacGroup,
            "interns",
            Period::Weekly,
            Some(0),
            "key:t",
            now,
        )
        .await
        .unwrap();
        let r = s
            .reserve(reserve("rsv_5", "ivy", &["interns"], 1, now))
            .await
            .unwrap();
        assert!(
            matches!(&r, ReserveOutcome::Refused { exceeded, .. } if exceeded == &vec![Meter::all(Period::Weekly)]),
            "{n}: {r:?}"
        );
    }
}

#[tokio::test]
async fn concurrent_reservations_admit_exactly_what_fits() {
    for b in backends().await {
        let (s, n) = (&b.store, b.name);
        let now = Utc::now().trunc_subsecs(3);
        // 7 cents = 70,000 micro-USD; 3,000 each: 23 fit, 24 do not.
        s.upsert_limit(
            ScopeType::RbacGroup,
            "eng",
            Period::Daily,
            Some(7),
            "key:t",
            now,
        )
        .await
        .unwrap();
        let outcomes = futures_util::future::join_all((0..100).map(|i| {
            s.reserve(reserve(
                &format!("rsv_{i:03}"),
                "carol",
                &["eng"],
                3_000,
                now,
            ))
        }))
        .await;
        let held = outcomes
            .iter()
            .filter(|o| matches!(o.as_ref().unwrap(), ReserveOutcome::Reserved(_)))
            .count();
        assert_eq!(held, 23, "{n}");
        let st = s
            .standings("carol", &["eng".into()], GroupMode::Min, now)
            .await
            .unwrap();
        assert_eq!(st[0].reserved_micro, 23 * 3_000, "{n}");
        let mut b = b;
        assert_eq!(b.restart().await.len(), 23, "{n}");
    }
}

/// A shared group budget on both stores: members reserving at once are admitted exactly up
/// to it (refusals name the budget), and every charge, release and estimate moves the
/// budget's row as the person's.
#[tokio::test]
async fn pooled_budgets_hold_charge_release_and_estimate() {
    for b in backends().await {
        let (s, n) = (&b.store, b.name);
        let now = Utc::now().trunc_subsecs(3);
        let pool = |cents| {
            Some(gatehouse_engine::spend::PooledBudget {
                amount_cents: cents,
                paused: false,
            })
        };
        // 7 cents = 70,000 micro-USD shared; each member's own limit is far above it.
        let l = s
            .upsert_pooled_limit("eng", Some(1_000_000), pool(7), "key:t", now)
            .await
            .unwrap();
        assert_eq!(l.pooled, pool(7), "{n}");
        assert_eq!(s.get_limit(&l.id).await.unwrap().unwrap().pooled, pool(7));
        let members = ["carol", "dave", "erin", "frank"];
        let outcomes = futures_util::future::join_all((0..100).map(|i| {
            s.reserve(reserve(
                &format!("rsv_p{i:03}"),
                members[i % 4],
                &["eng", "other"],
                3_000,
                now,
            ))
        }))
        .await;
        let mut held = Vec::new();
        for (i, o) in outcomes.into_iter().enumerate() {
            match o.unwrap() {
                ReserveOutcome::Reserved(_) => held.push(format!("rsv_p{i:03}")),
                ReserveOutcome::Refused { pool, exceeded, .. } => {
                    let pool = pool.expect("refused by the pool");
                    assert_eq!((pool.group.as_str(), pool.cap_cents), ("eng", 7), "{n}");
                    assert_eq!(exceeded, vec![Meter::all(Period::Monthly)]);
                }
            }
        }
        assert_eq!(held.len(), 23, "{n}: 23 x 3,000 fit in 70,000");
        let totals = |s: &Arc<dyn Store>| {
            let s = s.clone();
            async move {
                let t = s.pool_totals(vec!["eng".into()], now).await.unwrap();
                (t[0].1, t[0].2)
            }
        };
        assert_eq!(totals(s).await, (0, 23 * 3_000), "{n}");
        // A usage row charges the lease and its pool; a release frees the rest; an
        // estimate charges everything held.
        s.insert_usage(Arc::new(vec![usage("req_p1", 2_000, Some(&held[0]), now)]))
            .await
            .unwrap();
        assert_eq!(totals(s).await, (2_000, 22 * 3_000 + 1_000), "{n}");
        assert!(
            s.settle(&held[0], 0, SettleAs::Released, now)
                .await
                .unwrap()
        );
        assert_eq!(totals(s).await, (2_000, 22 * 3_000), "{n}");
        assert!(
            s.settle(&held[1], 3_000, SettleAs::Estimated, now)
                .await
                .unwrap()
        );
        assert_eq!(totals(s).await, (5_000, 21 * 3_000), "{n}");
        // A paused budget binds nobody.
        s.upsert_pooled_limit(
            "eng",
            Some(1_000_000),
            Some(gatehouse_engine::spend::PooledBudget {
                amount_cents: 7,
                paused: true,
            }),
            "key:t",
            now,
        )
        .await
        .unwrap();
        let more = s
            .reserve(reserve("rsv_p_after", "carol", &["eng"], 3_000, now))
            .await
            .unwrap();
        assert!(matches!(more, ReserveOutcome::Reserved(_)), "{n}");
        assert_eq!(
            totals(s).await,
            (5_000, 21 * 3_000),
            "not charged to the pool"
        );
    }
}

#[tokio::test]
async fn caps_and_their_audit_trail() {
    for b in backends().await {
        let (s, n) = (&b.store, b.name);
        let now = Utc::now().trunc_subsecs(3);
        let created = s
            .upsert_limit(
                ScopeType::Organization,
                "",
                Period::Monthly,
                Some(500),
                "key:a",
                now,
            )
            .await
            .unwrap();
        let replaced = s
            .upsert_limit(
                ScopeType::Organization,
                "",
                Period::Monthly,
                None,
                "user:pat",
                now,
            )
            .await
            .unwrap();
        assert_eq!(replaced.id, created.id, "{n}: one cap per scope and period");
        assert_eq!(replaced.amount_cents, None, "{n}");
        // Racing creates of one new scope: one create, the rest updates, one row.
        let racing = futures_util::future::join_all((0..10).map(|i| {
            s.upsert_limit(
                ScopeType::User,
                "dave",
                Period::Weekly,
                Some(i),
                "key:a",
                now,
            )
        }))
        .await;
        let ids: std::collections::HashSet<String> =
            racing.into_iter().map(|l| l.unwrap().id).collect();
        assert_eq!(ids.len(), 1, "{n}");
        s.upsert_limit(
            ScopeType::RbacGroup,
            "eng",
            Period::Daily,
            Some(0),
            "key:a",
            now,
        )
        .await
        .unwrap();

        let (all, more) = s.list_limits(None, None, None, 10).await.unwrap();
        assert_eq!((all.len(), more), (3, false), "{n}");
        assert!(all.windows(2).all(|w| w[0].id < w[1].id), "{n}: id order");
        let (page, more) = s.list_limits(None, None, None, 1).await.unwrap();
        assert!(more, "{n}");
        let (next, _) = s
            .list_limits(None, Some(page[0].id.clone()), None, 5)
            .await
            .unwrap();
        assert_eq!(next.len(), 2, "{n}");
        let (prev, _) = s
            .list_limits(None, None, Some(all[2].id.clone()), 5)
            .await
            .unwrap();
        assert_eq!(prev, all[..2].to_vec(), "{n}");
        let (groups, _) = s
            .list_limits(Some(ScopeType::RbacGroup), None, None, 5)
            .await
            .unwrap();
        assert_eq!(groups.len(), 1, "{n}");
        assert_eq!(
            s.get_limit(&created.id)
                .await
                .unwrap()
                .unwrap()
                .amount_cents,
            None
        );

        let gone = s
            .delete_limit(&groups[0].id, "user:pat", now)
            .await
            .unwrap();
        assert_eq!(gone.unwrap().scope_id, "eng", "{n}");
        assert!(
            s.delete_limit(&groups[0].id, "user:pat", now)
                .await
                .unwrap()
                .is_none()
        );
        assert!(s.get_limit(&groups[0].id).await.unwrap().is_none(), "{n}");

        let page = |after_id: Option<String>, limit| gatehouse_engine::store::AuditQuery {
            after_id,
            limit,
            ..Default::default()
        };
        let (audit, more) = s.audit_page(page(None, 100)).await.unwrap();
        assert!(!more, "{n}");
        // Ids order by creation time in milliseconds; within one millisecond, any order.
        let count = |action: &str| audit.iter().filter(|a| a.action == action).count();
        assert_eq!(audit.len(), 14, "{n}");
        assert_eq!(count("spend_limit.create"), 3, "{n}");
        assert_eq!(count("spend_limit.update"), 10, "{n}");
        let deleted = audit
            .iter()
            .find(|a| a.action == "spend_limit.delete")
            .unwrap();
        assert_eq!(deleted.actor, "user:pat", "{n}");
        assert_eq!(deleted.before.as_ref().unwrap()["amount"], "0", "{n}");
        assert_eq!(deleted.after, None, "{n}");
        let update = audit
            .iter()
            .find(|a| a.action == "spend_limit.update" && a.actor == "user:pat")
            .unwrap();
        assert_eq!(update.before.as_ref().unwrap()["amount"], "500", "{n}");
        assert_eq!(update.after.as_ref().unwrap()["amount"], Value::Null, "{n}");
        assert!(
            audit.windows(2).all(|w| w[0].id > w[1].id),
            "{n}: newest first"
        );
        let (first_page, more) = s.audit_page(page(None, 4)).await.unwrap();
        assert!(more, "{n}");
        let (rest, _) = s
            .audit_page(page(Some(first_page[3].id.clone()), 100))
            .await
            .unwrap();
        let paged: Vec<&str> = first_page
            .iter()
            .chain(&rest)
            .map(|a| a.id.as_str())
            .collect();
        let all: Vec<&str> = audit.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(paged, all, "{n}");
    }
}

#[tokio::test]
async fn principals_usage_retention_and_the_local_key() {
    for b in backends().await {
        let (s, n) = (&b.store, b.name);
        let now = Utc::now().trunc_subsecs(3);
        let days = chrono::Duration::days;
        let who = |sub: &str, groups: &[&str]| UserIdentity {
            sub: sub.into(),
            email: Some(format!("{sub}@corp.example")),
            name: None,
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        };
        s.upsert_principal(who("zed", &["eng"]), now - days(91))
            .await
            .unwrap();
        s.upsert_principal(who("amy", &["eng", "ops"]), now)
            .await
            .unwrap();
        s.upsert_principal(who("zed", &["sales"]), now - days(91))
            .await
            .unwrap();
        let all = s.principals(None).await.unwrap();
        assert_eq!(
            all.iter().map(|p| p.sub.as_str()).collect::<Vec<_>>(),
            ["amy", "zed"]
        );
        assert_eq!(all[1].groups, vec!["sales".to_owned()], "{n}");
        let some = s
            .principals(Some(vec!["zed".into(), "nobody".into()]))
            .await
            .unwrap();
        assert_eq!(some.len(), 1, "{n}");

        let old = now - days(400);
        s.upsert_limit(
            ScopeType::Organization,
            "",
            Period::Daily,
            Some(5),
            "key:a",
            old,
        )
        .await
        .unwrap();
        let mut opus = usage("new-2", 40, None, now);
        opus.model = "claude-opus-4-6".into();
        let (oldest, new_1) = (usage("old", 1, None, old), usage("new-1", 7, None, now));
        s.insert_usage(vec![oldest.clone(), new_1.clone(), opus].into())
            .await
            .unwrap();
        // The same row again (same time and row key) is ignored.
        s.insert_usage(vec![new_1].into()).await.unwrap();
        let recent = s.recent_usage(10).await.unwrap();
        assert_eq!(recent.len(), 3, "{n}");
        assert_eq!(recent[2], oldest, "{n}: round trip");
        let totals = s.usage_totals(now - days(1)).await.unwrap();
        assert_eq!((totals.requests, totals.cost_micro_usd), (2, 47), "{n}");
        let by_model = s.usage_by_model(now - days(1)).await.unwrap();
        assert_eq!(by_model[0].0, "claude-opus-4-6", "{n}");
        assert_eq!(by_model[1].1.cost_micro_usd, 7, "{n}");

        let removed = s
            .retention(now - days(365), now - days(396), now - days(90))
            .await
            .unwrap();
        assert_eq!(
            removed, 4,
            "{n}: the audit row, the old usage row and its rollup row, zed"
        );
        assert_eq!(s.recent_usage(10).await.unwrap().len(), 2, "{n}");
        assert_eq!(s.principals(None).await.unwrap().len(), 1, "{n}");
        assert_eq!(
            s.list_limits(None, None, None, 10).await.unwrap().0.len(),
            1,
            "{n}"
        );

        assert!(s.local_key_hash().await.unwrap().is_none(), "{n}");
        s.set_local_key_hash([1; 32], now).await.unwrap();
        s.set_local_key_hash([2; 32], now).await.unwrap();
        assert_eq!(s.local_key_hash().await.unwrap().unwrap().0, [2; 32], "{n}");
        s.ready().await.unwrap();
    }
}

/// Claude Code's tags are stored with each row and summed into the rollup in the rows'
/// transaction: per hour, session and agent kind, a replayed batch adding nothing; a
/// session's rows are read back by time.
#[tokio::test]
async fn session_tags_and_the_rollup_follow_the_rows_exactly_once() {
    use gatehouse_engine::store::rollup::hour_of;
    use gatehouse_engine::store::{ClientTags, RowQuery};
    for b in backends().await {
        let (s, n) = (&b.store, b.name);
        let now = Utc::now().trunc_subsecs(3);
        let tagged = |id: &str, cost: u64, session: Option<&str>, agent: Option<&str>, ms: i64| {
            let mut r = usage(id, cost, None, now + chrono::Duration::milliseconds(ms));
            r.tags = ClientTags {
                session_id: session.map(Into::into),
                agent_id: agent.map(Into::into),
                parent_agent_id: agent.map(|_| "p1".to_owned()),
                request_class: Some(if agent.is_some() { "subagent" } else { "main" }),
                client: Some("claude-cli/2.1.337".into()),
            };
            r
        };
        let batch = Arc::new(vec![
            tagged("t1", 100, Some("s-1"), None, 0),
            tagged("t2", 30, Some("s-1"), Some("a-1"), 1),
            tagged("t3", 7, None, None, 2),
        ]);
        s.insert_usage(batch.clone()).await.unwrap();
        s.insert_usage(batch.clone()).await.unwrap();
        let hour = hour_of(now + chrono::Duration::milliseconds(2));
        let mut rolled = s.usage_rollup(hour - 1, hour + 1, None).await.unwrap();
        rolled.sort_by(|a, b| a.key.cmp(&b.key));
        let got: Vec<(&str, bool, u64, u64)> = rolled
            .iter()
            .map(|r| {
                (
                    r.key.session_id.as_str(),
                    r.key.subagent,
                    r.sums.requests,
                    r.sums.cost_micro_usd,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("", false, 1, 7),
                ("s-1", false, 1, 100),
                ("s-1", true, 1, 30)
            ],
            "{n}"
        );
        let one = s
            .usage_rollup(hour - 1, hour + 1, Some("s-1".into()))
            .await
            .unwrap();
        assert_eq!(one.len(), 2, "{n}");
        let rows = s
            .usage_between(RowQuery {
                from: now,
                to: now + secs(1),
                session_id: Some("s-1".into()),
                newest_first: true,
                limit: 10,
            })
            .await
            .unwrap();
        assert_eq!(rows.len(), 2, "{n}");
        assert_eq!(rows[0], batch[1], "{n}: tags read back as written");
        assert_eq!(rows[1], batch[0], "{n}");
    }
}

#[tokio::test]
async fn the_admin_views_page_filter_and_sum_alike() {
    use gatehouse_engine::store::{AuditQuery, DirectoryQuery};
    for b in backends().await {
        let s = &b.store;
        let now = Utc::now().trunc_subsecs(3);
        for (sub, email) in [
            ("ann", "ann@corp.example"),
            ("bo_b", "B%b@corp.example"),
            ("cy", "cy@x.example"),
        ] {
            let who = UserIdentity {
                sub: sub.into(),
                email: Some(email.into()),
                name: Some(format!("Name {sub}")),
                groups: vec!["eng".into()],
            };
            s.upsert_principal(who, now).await.unwrap();
        }
        let page = |after: Option<&str>, needle: Option<&str>, limit| DirectoryQuery {
            after: after.map(str::to_owned),
            needle: needle.map(str::to_owned),
            limit,
            exact: None,
        };
        let (first, more) = s.directory(page(None, None, 2)).await.unwrap();
        let subs: Vec<_> = first.iter().map(|e| e.who.sub.as_str()).collect();
        assert_eq!((subs, more), (vec!["ann", "bo_b"], true), "{}", b.name);
        assert_eq!(first[0].seen_at, now, "{}", b.name);
        let (rest, more) = s.directory(page(Some("bo_b"), None, 2)).await.unwrap();
        assert_eq!((rest.len(), more), (1, false), "{}", b.name);
        // The needle matches case-insensitively, and its own `%` and `_` are literal.
        let (hit, _) = s.directory(page(None, Some("b%B"), 10)).await.unwrap();
        assert_eq!(hit.len(), 1, "{}", b.name);
        let (hit, _) = s.directory(page(None, Some("_"), 10)).await.unwrap();
        assert_eq!(hit.len(), 1, "{}: only bo_b has an underscore", b.name);
        let exact = DirectoryQuery {
            exact: Some("cy".into()),
            limit: 1,
            ..Default::default()
        };
        assert_eq!(
            s.directory(exact).await.unwrap().0[0].who.sub,
            "cy",
            "{}",
            b.name
        );

        for (i, action) in [
            "user.sessions_revoke",
            "spend_limit.delete",
            "user.sessions_revoke",
        ]
        .iter()
        .enumerate()
        {
            s.append_audit(gatehouse_engine::spend::AuditRow {
                id: gatehouse_engine::spend::new_id("spla"),
                at: now,
                actor: format!("oidc:a{i}"),
                action: (*action).into(),
                limit_id: Some("ann".into()),
                before: None,
                after: Some(serde_json::json!({"n": i})),
            })
            .await
            .unwrap();
        }
        let q = AuditQuery {
            limit: 10,
            actions: vec!["user.sessions_revoke".into()],
            ..Default::default()
        };
        let (rows, _) = s.audit_page(q).await.unwrap();
        assert_eq!(rows.len(), 2, "{}", b.name);
        assert_eq!(
            rows[0].after,
            Some(serde_json::json!({"n": 2})),
            "{}: newest first",
            b.name
        );
        let q = AuditQuery {
            limit: 10,
            actor: Some("oidc:a1".into()),
            target_id: Some("ann".into()),
            ..Default::default()
        };
        assert_eq!(s.audit_page(q).await.unwrap().0.len(), 1, "{}", b.name);

        let mut other = usage("r2", 50, None, now);
        other.upstream = None;
        s.insert_usage(Arc::new(vec![usage("r1", 100, None, now), other]))
            .await
            .unwrap();
        let by = s
            .usage_by_upstream(now - secs(60), now + secs(60))
            .await
            .unwrap();
        let flat: Vec<_> = by
            .iter()
            .map(|(u, t)| (u.as_str(), t.requests, t.cost_micro_usd))
            .collect();
        assert_eq!(flat, vec![("primary", 1, 100), ("", 1, 50)], "{}", b.name);
        assert!(
            s.usage_by_upstream(now + secs(1), now + secs(60))
                .await
                .unwrap()
                .is_empty()
        );
    }
}

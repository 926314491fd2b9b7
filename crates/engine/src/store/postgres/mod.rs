//! PostgreSQL store: several `gatehouse serve` replicas share one database, and with it
//! device grants, rate counters, caps, reservations, spend and the audit trail.
//!
//! Connections come from a `deadpool-postgres` pool (`store.max_connections`, waits bounded
//! by `store.connect_timeout_ms`); statements are prepared once per connection. Plain TCP, or
//! TLS (rustls) when the URL asks for it with libpq's `sslmode` and friends
//! ([`crate::config::postgres_tls`]). Connect directly or through a
//! session-pooling proxy: the ownership locks below are session advisory locks.
//!
//! **How a cap stays exact across replicas.** Every write that checks before it writes runs
//! in one READ COMMITTED transaction that first takes row locks, so the check sees the
//! latest committed state and nothing changes it before the commit (row locks, not
//! SERIALIZABLE: no retry storms under a burst, and waits only between the same rows):
//! - `reserve` is one statement, the `gatehouse_reserve_meters` function (migration 0010:
//!   0006's `gatehouse_reserve_pooled`, which is 0002's `gatehouse_reserve` with shared
//!   budgets, over four periods and a model family): it locks the person's spend rows
//!   (daily, weekly, monthly, total, then the same four of the request's model family;
//!   created if missing) with `SELECT .. FOR UPDATE` in that fixed order, which returns their latest committed
//!   totals, checks every binding cap and writes the hold and the reservation row, all
//!   inside the server: the rows stay locked for microseconds, not for client round trips.
//!   A second reservation for the same person, on any replica, waits for the lock and then
//!   sees the first one's hold. Caps are per person (group and organization caps are
//!   per-person defaults), so for them the person's rows are the whole critical section:
//!   different people never wait for each other. A *shared group budget* (pool) is the one
//!   row several people share: once the person's caps fit, the function locks the rows of
//!   the person's pools for the month (created if missing, `FOR UPDATE` in group order),
//!   picks the first pool in paying order with room and adds the hold to it in the same
//!   statement, so members on any replica are admitted against the pool one after the
//!   other and never together past it. The binding caps and the pools' paying order are read and resolved
//!   (by the same code as on SQLite) in the statement before; a cap changed in between
//!   acts as if changed just after this reservation.
//! - `settle` flips the reservation from `open` with a conditional UPDATE (so it settles
//!   once), then moves its amount in the spend rows in the same fixed order, then in its
//!   pool's row; a batch of usage rows settles person by person in sorted order and the
//!   pools' rows last, in group order. Every transaction thus locks person rows before
//!   pool rows, each kind in one order, so no two can wait on each other in a cycle.
//! - Cap mutations take a transaction-scoped advisory lock on (scope, period), so a
//!   create-or-replace and its audit row are serialised even before the cap row exists;
//!   `kv_incr` locks its row with an upsert before it counts; `kv_insert`, `kv_replace` and
//!   `kv_delete` are single conditional statements (compare-and-swap).
//!
//! A deadlock or serialisation failure (which this ordering should prevent) is retried.
//!
//! **Reservations of a replica that died.** Each store holds a session advisory lock on
//! its own random key for its lifetime (a dedicated connection, re-taken if it drops) and
//! stamps its reservations with that key. `open_reservations` returns only reservations
//! whose key nobody holds, so a replica that starts and reconciles never releases a live
//! replica's hold. Should a live replica's hold be released anyway (its lock connection
//! dropped and another replica reconciled meanwhile), its later usage row still charges
//! the spend.
//!
//! The SQL lives by concern: `usage` (usage rows), `kv` (keyed state, the local key
//! hash) and `spend` (reservations, settlement, caps and audit, the identity directory,
//! retention); the [`Store`] impl here takes a pooled connection (retrying where noted)
//! and delegates to them. The cap arithmetic is in [`crate::spend::caps`].

mod admin_views;
mod kv;
mod spend;
mod usage;

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Row};
use tokio_util::sync::CancellationToken;

use super::convert::ms;
use super::rollup::RollupRow;
use super::{
    OpenReservation, RowQuery, SettleAs, Store, StoreError, UsageRecord, UsageTotals, migrations,
};
use crate::config::PostgresConfig;
use crate::config::postgres::describe;
pub use crate::config::postgres::{PgConfigError, PgConnect, connect_config};
use tokio_postgres_rustls::MakeRustlsConnect;

/// Advisory-lock namespace (first `int4` key) of the per-store ownership locks.
const OWNER_LOCK_NAMESPACE: i32 = 0x4748_4f57; // "GHOW"
/// Pooled connections opened at start.
const WARM_CONNECTIONS: u32 = 4;
/// How often a transaction is tried again after a deadlock or serialisation failure.
const RETRIES: u32 = 5;

pub type PgError = tokio_postgres::Error;
pub type Client = deadpool_postgres::Object;

impl From<PgError> for StoreError {
    fn from(e: PgError) -> Self {
        StoreError::Database(describe(&e))
    }
}

fn retryable(e: &PgError) -> bool {
    matches!(
        e.code(),
        Some(c) if *c == SqlState::T_R_DEADLOCK_DETECTED || *c == SqlState::T_R_SERIALIZATION_FAILURE
    )
}

/// Rows of a statement prepared once per connection.
async fn rows(
    c: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, PgError> {
    let st = c.prepare_cached(sql).await?;
    c.query(&st, params).await
}

async fn row_opt(
    c: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<Row>, PgError> {
    let st = c.prepare_cached(sql).await?;
    c.query_opt(&st, params).await
}

async fn exec(
    c: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<u64, PgError> {
    let st = c.prepare_cached(sql).await?;
    c.execute(&st, params).await
}

/// Runs `$body` (which uses a fresh pooled `$client`) again after a deadlock or a
/// serialisation failure, at most [`RETRIES`] times.
macro_rules! retrying {
    ($store:expr, |$client:ident| $body:expr) => {{
        let mut attempt = 0u32;
        loop {
            #[allow(unused_mut)]
            let mut $client = $store.client().await?;
            match $body.await {
                Ok(v) => break Ok(v),
                Err(e) if attempt < RETRIES && retryable(&e) => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(5 * u64::from(attempt))).await;
                }
                Err(e) => break Err(StoreError::from(e)),
            }
        }
    }};
}

// After the macro, which it uses.
mod limits;

/// A pool and the server it reaches (for errors: never the URL).
#[derive(Clone)]
struct Pooled {
    pool: Pool,
    target: std::sync::Arc<str>,
}

impl Pooled {
    async fn client(&self) -> Result<Client, StoreError> {
        self.pool.get().await.map_err(|e| match e {
            deadpool_postgres::PoolError::Timeout(_) => StoreError::Busy,
            e => StoreError::Connect {
                target: self.target.to_string(),
                message: pool_error(&e),
            },
        })
    }
}

/// Connections for reports (dashboard aggregates, admin lists): a separate small pool, so
/// a flood of reports never takes a connection a reservation needs, whose statements the
/// server stops after [`REPORT_STATEMENT_TIMEOUT`], and whose waits are short.
const REPORT_CONNECTIONS: usize = 2;
const REPORT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(3);
const REPORT_WAIT: Duration = Duration::from_millis(250);

pub struct PostgresStore {
    main: Pooled,
    reports: Pooled,
    target: String,
    /// This store's ownership-lock key, stamped on its reservations.
    owner_key: i32,
    stop_owner_lock: CancellationToken,
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        self.stop_owner_lock.cancel();
    }
}

impl PostgresStore {
    /// Connects, migrates (under the migration lock) and takes this store's ownership lock.
    pub async fn open(cfg: &PostgresConfig, now: DateTime<Utc>) -> Result<Self, StoreError> {
        let PgConnect {
            config: pg,
            tls,
            target,
        } = connect_config(cfg).map_err(|e| StoreError::Open {
            path: e.field().to_owned(),
            message: e.to_string(),
        })?;
        let connect_err = |message: String| StoreError::Connect {
            target: target.clone(),
            message,
        };
        let pool = Pool::builder(manager(pg.clone(), tls.as_ref()))
            .max_size(cfg.max_connections as usize)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(cfg.connect_timeout))
            .create_timeout(Some(cfg.connect_timeout))
            .recycle_timeout(Some(cfg.connect_timeout))
            .build()
            .map_err(|e| connect_err(e.to_string()))?;
        let mut report_pg = pg.clone();
        report_pg.options(format!(
            "-c statement_timeout={}",
            REPORT_STATEMENT_TIMEOUT.as_millis()
        ));
        let reports = Pool::builder(manager(report_pg, tls.as_ref()))
            .max_size(REPORT_CONNECTIONS)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(REPORT_WAIT))
            .create_timeout(Some(cfg.connect_timeout))
            .recycle_timeout(Some(cfg.connect_timeout))
            .build()
            .map_err(|e| connect_err(e.to_string()))?;
        let mut client = pool.get().await.map_err(|e| connect_err(pool_error(&e)))?;
        migrations::apply_postgres(&mut client, ms(now)).await?;
        // A few connections ready before the first request, so a burst right after start
        // does not wait for logins; the rest open on demand.
        let warm = futures_util::future::join_all(
            (1..cfg.max_connections.min(WARM_CONNECTIONS)).map(|_| pool.get()),
        )
        .await;
        drop(client);
        drop(warm);
        let stop_owner_lock = CancellationToken::new();
        let owner_key = take_owner_lock(&pg, tls, stop_owner_lock.clone())
            .await
            .map_err(|e| connect_err(describe(&e)))?
            .ok_or_else(|| connect_err("no free reservation-ownership lock key".into()))?;
        let shared: std::sync::Arc<str> = target.clone().into();
        Ok(Self {
            main: Pooled {
                pool,
                target: shared.clone(),
            },
            reports: Pooled {
                pool: reports,
                target: shared,
            },
            target,
            owner_key,
            stop_owner_lock,
        })
    }

    /// `host:port/database` (no credentials).
    pub fn target(&self) -> &str {
        &self.target
    }

    async fn client(&self) -> Result<Client, StoreError> {
        self.main.client().await
    }

    async fn report_client(&self) -> Result<Client, StoreError> {
        self.reports.client().await
    }
}

/// A pool manager over plain TCP or TLS.
fn manager(pg: tokio_postgres::Config, tls: Option<&MakeRustlsConnect>) -> Manager {
    let config = ManagerConfig {
        recycling_method: RecyclingMethod::Fast,
    };
    match tls {
        Some(tls) => Manager::from_config(pg, tls.clone(), config),
        None => Manager::from_config(pg, NoTls, config),
    }
}

type Connected = (
    tokio_postgres::Client,
    tokio::task::JoinHandle<Result<(), PgError>>,
);

/// A connection outside the pools, its driver spawned on this runtime.
async fn connect(
    pg: &tokio_postgres::Config,
    tls: Option<&MakeRustlsConnect>,
) -> Result<Connected, PgError> {
    Ok(match tls {
        Some(tls) => {
            let (client, connection) = pg.connect(tls.clone()).await?;
            (client, tokio::spawn(connection))
        }
        None => {
            let (client, connection) = pg.connect(NoTls).await?;
            (client, tokio::spawn(connection))
        }
    })
}

fn pool_error(e: &deadpool_postgres::PoolError) -> String {
    match e {
        deadpool_postgres::PoolError::Backend(pg) => describe(pg),
        other => other.to_string(),
    }
}

/// Takes a session advisory lock on a fresh random key on a dedicated connection and keeps
/// it until `stop`: if that connection drops, it reconnects and takes the same key again.
async fn take_owner_lock(
    pg: &tokio_postgres::Config,
    tls: Option<MakeRustlsConnect>,
    stop: CancellationToken,
) -> Result<Option<i32>, PgError> {
    let (client, connection) = connect(pg, tls.as_ref()).await?;
    let mut key = 0;
    for _ in 0..16 {
        let candidate = rand::random_range(1..i32::MAX);
        let row = client
            .query_one(
                "SELECT pg_try_advisory_lock($1, $2)",
                &[&OWNER_LOCK_NAMESPACE, &candidate],
            )
            .await?;
        if row.try_get::<_, bool>(0)? {
            key = candidate;
            break;
        }
    }
    if key == 0 {
        // Sixteen random keys all held: only if something floods the lock table.
        return Ok(None);
    }
    let pg = pg.clone();
    tokio::spawn(async move {
        let mut held = (client, connection);
        loop {
            let (client, mut connection) = held;
            tokio::select! {
                _ = &mut connection => {
                    tracing::warn!("lost the PostgreSQL connection holding this gateway's reservation lock; reconnecting");
                }
                () = stop.cancelled() => {
                    // Ending the session frees the lock.
                    drop(client);
                    let _ = tokio::time::timeout(Duration::from_secs(2), connection).await;
                    return;
                }
            }
            drop(client);
            held = loop {
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                    () = stop.cancelled() => return,
                }
                match relock(&pg, tls.as_ref(), key).await {
                    Ok(again) => break again,
                    Err(e) => {
                        tracing::warn!(error = %describe(&e), "cannot take the reservation lock again yet")
                    }
                }
            };
        }
    });
    Ok(Some(key))
}

async fn relock(
    pg: &tokio_postgres::Config,
    tls: Option<&MakeRustlsConnect>,
    key: i32,
) -> Result<Connected, PgError> {
    let (client, connection) = connect(pg, tls).await?;
    // Another process that picked the same key also keeps these reservations alive, so
    // a held lock is as good as ours.
    client
        .query_one(
            "SELECT pg_try_advisory_lock($1, $2)",
            &[&OWNER_LOCK_NAMESPACE, &key],
        )
        .await?;
    Ok((client, connection))
}

#[async_trait]
impl Store for PostgresStore {
    fn limit_rows(&self) -> Option<&dyn super::LimitRows> {
        Some(self)
    }

    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn ready(&self) -> Result<(), StoreError> {
        let c = self.client().await?;
        // A real write, so a read-only or full server shows here.
        exec(
            &c,
            "INSERT INTO kv (key, value, expires_at) VALUES ('__readyz_probe__', ''::bytea, NULL)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            &[],
        )
        .await?;
        Ok(())
    }

    async fn insert_usage(&self, rows: std::sync::Arc<Vec<UsageRecord>>) -> Result<(), StoreError> {
        retrying!(self, |c| usage::insert(&mut c, &rows))
    }

    async fn recent_usage(&self, limit: usize) -> Result<Vec<UsageRecord>, StoreError> {
        let c = self.report_client().await?;
        Ok(usage::recent(&c, limit).await?)
    }

    async fn usage_totals(&self, since: DateTime<Utc>) -> Result<UsageTotals, StoreError> {
        let c = self.report_client().await?;
        Ok(usage::totals(&c, since).await?)
    }

    async fn usage_by_model(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<(String, UsageTotals)>, StoreError> {
        let c = self.report_client().await?;
        Ok(usage::by_model(&c, since).await?)
    }

    async fn usage_between(&self, query: RowQuery) -> Result<Vec<UsageRecord>, StoreError> {
        let c = self.report_client().await?;
        Ok(usage::between(&c, &query).await?)
    }

    async fn usage_rollup(
        &self,
        from_hour: i64,
        to_hour: i64,
        session_id: Option<String>,
    ) -> Result<Vec<RollupRow>, StoreError> {
        let c = self.report_client().await?;
        Ok(usage::rollup_rows(&c, from_hour, to_hour, session_id.as_deref(), None).await?)
    }

    async fn usage_rollup_of(
        &self,
        principal: String,
        from_hour: i64,
        to_hour: i64,
    ) -> Result<Vec<RollupRow>, StoreError> {
        let c = self.report_client().await?;
        Ok(usage::rollup_rows(&c, from_hour, to_hour, None, Some(&principal)).await?)
    }

    async fn daily_spend(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<(String, DateTime<Utc>, u64)>, StoreError> {
        let c = self.report_client().await?;
        Ok(spend::daily_spend(&c, from, to).await?)
    }

    async fn local_key_hash(&self) -> Result<Option<([u8; 32], DateTime<Utc>)>, StoreError> {
        let c = self.client().await?;
        Ok(kv::local_key_hash(&c).await?)
    }

    async fn set_local_key_hash(
        &self,
        hash: [u8; 32],
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let c = self.client().await?;
        Ok(kv::set_local_key_hash(&c, hash, at).await?)
    }

    async fn kv_get(&self, key: &str, now: DateTime<Utc>) -> Result<Option<Vec<u8>>, StoreError> {
        let c = self.client().await?;
        Ok(kv::get(&c, key, now).await?)
    }

    async fn kv_put(
        &self,
        key: &str,
        value: Vec<u8>,
        expires_at: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError> {
        let c = self.client().await?;
        Ok(kv::put(&c, key, &value, expires_at).await?)
    }

    async fn kv_insert(
        &self,
        key: &str,
        value: Vec<u8>,
        expires_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let c = self.client().await?;
        Ok(kv::insert(&c, key, &value, expires_at, now).await?)
    }

    async fn kv_replace(
        &self,
        key: &str,
        expected: Vec<u8>,
        value: Vec<u8>,
        expires_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let c = self.client().await?;
        Ok(kv::replace(&c, key, &expected, &value, expires_at, now).await?)
    }

    async fn kv_delete(&self, key: &str, expected: Option<Vec<u8>>) -> Result<bool, StoreError> {
        let c = self.client().await?;
        Ok(kv::delete(&c, key, expected.as_deref()).await?)
    }

    async fn kv_incr(
        &self,
        key: &str,
        window: Duration,
        now: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        retrying!(self, |c| kv::incr(&mut c, key, window, now))
    }

    async fn kv_scan(
        &self,
        prefix: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let c = self.client().await?;
        Ok(kv::scan(&c, prefix, now).await?)
    }

    async fn kv_purge_expired(&self, now: DateTime<Utc>) -> Result<u64, StoreError> {
        let c = self.client().await?;
        Ok(kv::purge_expired(&c, now).await?)
    }

    async fn reserve(
        &self,
        req: crate::spend::ReserveRequest,
    ) -> Result<crate::spend::ReserveOutcome, StoreError> {
        // Run to completion even if the caller stops waiting; a reservation committed for a
        // caller that left is released at once, so none stays open with nothing in flight.
        let (main, owner_key) = (self.main.clone(), self.owner_key);
        let (reply, answer) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let outcome = async { retrying!(main, |c| spend::reserve(&c, &req, owner_key)) }.await;
            if let Err(Ok(crate::spend::ReserveOutcome::Reserved(_))) = reply.send(outcome) {
                let now = chrono::Utc::now();
                let released = async {
                    retrying!(main, |c| spend::settle(
                        &mut c,
                        &req.reservation_id,
                        0,
                        SettleAs::Released,
                        now
                    ))
                }
                .await;
                if let Err(e) = released {
                    tracing::warn!(error = %e, "could not release an abandoned reservation");
                }
            }
        });
        answer.await.map_err(|_| StoreError::Closed)?
    }

    async fn settle(
        &self,
        reservation_id: &str,
        actual_micro: u64,
        how: SettleAs,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        retrying!(self, |c| spend::settle(
            &mut c,
            reservation_id,
            actual_micro,
            how,
            now
        ))
    }

    async fn open_reservations(&self) -> Result<Vec<OpenReservation>, StoreError> {
        let c = self.client().await?;
        Ok(spend::orphaned_reservations(&c).await?)
    }

    async fn open_reservation_count(&self) -> Result<u64, StoreError> {
        let c = self.report_client().await?;
        let row = row_opt(
            &c,
            "SELECT count(*) FROM reservations WHERE state = 'open'",
            &[],
        )
        .await?;
        let n: i64 = row.map(|r| r.try_get(0)).transpose()?.unwrap_or(0);
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn usage_cost(&self, request_id: &str) -> Result<Option<u64>, StoreError> {
        let c = self.client().await?;
        Ok(usage::cost(&c, request_id).await?)
    }

    async fn standings(
        &self,
        sub: &str,
        groups: &[String],
        mode: crate::spend::GroupMode,
        now: DateTime<Utc>,
    ) -> Result<Vec<crate::spend::Standing>, StoreError> {
        let mut c = self.client().await?;
        Ok(spend::standings(&mut c, sub, groups, mode, now).await?)
    }

    async fn upsert_limit(
        &self,
        scope_type: crate::spend::ScopeType,
        scope_id: &str,
        period: crate::spend::Period,
        amount_cents: Option<i64>,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<crate::spend::SpendLimit, StoreError> {
        retrying!(self, |c| spend::upsert_limit(
            &mut c,
            scope_type,
            scope_id,
            period,
            None,
            amount_cents,
            None,
            actor,
            now
        ))
    }

    async fn upsert_model_limit(
        &self,
        scope_type: crate::spend::ScopeType,
        scope_id: &str,
        period: crate::spend::Period,
        model: crate::spend::Family,
        amount_cents: Option<i64>,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<crate::spend::SpendLimit, StoreError> {
        retrying!(self, |c| spend::upsert_limit(
            &mut c,
            scope_type,
            scope_id,
            period,
            Some(model),
            amount_cents,
            None,
            actor,
            now
        ))
    }

    async fn upsert_pooled_limit(
        &self,
        group: &str,
        amount_cents: Option<i64>,
        pooled: Option<crate::spend::PooledBudget>,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<crate::spend::SpendLimit, StoreError> {
        retrying!(self, |c| spend::upsert_limit(
            &mut c,
            crate::spend::ScopeType::RbacGroup,
            group,
            crate::spend::Period::Monthly,
            None,
            amount_cents,
            Some(pooled),
            actor,
            now
        ))
    }

    async fn pool_totals(
        &self,
        groups: Vec<String>,
        now: DateTime<Utc>,
    ) -> Result<Vec<(String, u64, u64)>, StoreError> {
        let c = self.client().await?;
        Ok(spend::pool_totals(&c, &groups, now).await?)
    }

    async fn get_limit(&self, id: &str) -> Result<Option<crate::spend::SpendLimit>, StoreError> {
        let c = self.client().await?;
        Ok(spend::get_limit(&c, id).await?)
    }

    async fn delete_limit(
        &self,
        id: &str,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<crate::spend::SpendLimit>, StoreError> {
        retrying!(self, |c| spend::delete_limit(&mut c, id, actor, now))
    }

    async fn list_limits(
        &self,
        scope_type: Option<crate::spend::ScopeType>,
        after_id: Option<String>,
        before_id: Option<String>,
        limit: usize,
    ) -> Result<(Vec<crate::spend::SpendLimit>, bool), StoreError> {
        let c = self.report_client().await?;
        Ok(spend::list_limits(&c, scope_type, after_id, before_id, limit).await?)
    }

    async fn upsert_principal(
        &self,
        who: crate::identity::user::UserIdentity,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let c = self.client().await?;
        Ok(spend::upsert_principal(&c, &who, now).await?)
    }

    async fn principals(
        &self,
        subs: Option<Vec<String>>,
    ) -> Result<Vec<crate::identity::user::UserIdentity>, StoreError> {
        let c = self.report_client().await?;
        Ok(spend::principals(&c, subs).await?)
    }

    async fn directory(
        &self,
        query: super::DirectoryQuery,
    ) -> Result<(Vec<super::DirectoryEntry>, bool), StoreError> {
        let c = self.report_client().await?;
        Ok(admin_views::directory(&c, query).await?)
    }

    async fn audit_page(
        &self,
        query: super::AuditQuery,
    ) -> Result<(Vec<crate::spend::AuditRow>, bool), StoreError> {
        let c = self.report_client().await?;
        Ok(admin_views::audit_page(&c, query).await?)
    }

    async fn append_audit(&self, row: crate::spend::AuditRow) -> Result<(), StoreError> {
        let c = self.client().await?;
        Ok(admin_views::append_audit(&c, &row).await?)
    }

    async fn usage_by_upstream(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<(String, UsageTotals)>, StoreError> {
        let c = self.report_client().await?;
        Ok(admin_views::usage_by_upstream(&c, from, to).await?)
    }

    async fn retention(
        &self,
        audit_before: DateTime<Utc>,
        spend_before: DateTime<Utc>,
        principals_before: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        let c = self.client().await?;
        Ok(spend::retention(&c, audit_before, spend_before, principals_before).await?)
    }
}

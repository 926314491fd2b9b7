//! SQLite store: no SQLite call ever runs on an async worker. One thread owns the only
//! writing connection and commits waiting writes together (group commit); point reads and
//! reports have their own connections and threads, each behind a bounded queue (see
//! [`lanes`]).
//!
//! WAL journal, `synchronous=NORMAL`, a 5 s busy timeout, and `BEGIN IMMEDIATE` for write
//! batches. Automatic checkpoints are off on the writer: a further connection on its own
//! thread checkpoints (`PASSIVE`) every 500 ms, so the fsync a checkpoint does never sits
//! in a request's write.
//!
//! The SQL lives by concern: `usage` (usage rows), `kv` (keyed state, the local key
//! hash) and `spend` (reservations, caps and audit, the identity directory, retention);
//! the [`Store`] impl here only sends each call to its lane.

mod admin_views;
mod kv;
mod lanes;
mod spend;
mod usage;

use std::path::{Path, PathBuf};
use std::sync::mpsc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::Connection;

use super::rollup::RollupRow;
use super::{
    OpenReservation, RowQuery, SettleAs, Store, StoreError, UsageRecord, UsageTotals, migrations,
};
pub use lanes::REPORT_BUDGET;
use lanes::{Detached, Lanes, Read};

pub struct SqliteStore {
    lanes: Lanes,
    path: PathBuf,
    /// Dropping it stops the checkpoint thread.
    _checkpoint_stop: mpsc::Sender<()>,
}

impl SqliteStore {
    /// Opens (creating if needed) and migrates the database. Blocking: call it from a
    /// blocking context at startup.
    pub fn open(path: &Path, now: DateTime<Utc>) -> Result<Self, StoreError> {
        let open_err = |message: String| StoreError::Open {
            path: path.display().to_string(),
            message,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| open_err(e.to_string()))?;
        }
        create_private(path).map_err(|e| open_err(e.to_string()))?;
        let mut conn = Connection::open(path).map_err(|e| open_err(e.to_string()))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        migrations::apply_sqlite(&mut conn, now.timestamp_millis())?;
        // Checkpoints (which fsync the database file) run on their own connection and
        // thread, so a request's write never waits for one.
        conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        let checkpoint_stop = spawn_checkpointer(path).map_err(open_err)?;
        let lanes = Lanes::start(conn, path).map_err(open_err)?;
        Ok(Self {
            lanes,
            path: path.to_owned(),
            _checkpoint_stop: checkpoint_stop,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.lanes.write(f).await
    }

    async fn point<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.lanes.read(Read::Point, f).await
    }

    async fn report<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.lanes.read(Read::Report, f).await
    }
}

/// How often the background connection moves the WAL into the database file.
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// Starts the checkpointer; it stops when the returned sender (held by the store) drops.
fn spawn_checkpointer(path: &Path) -> Result<mpsc::Sender<()>, String> {
    let conn = Connection::open(path).map_err(|e| e.to_string())?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(|e| e.to_string())?;
    let (stop, stopped) = mpsc::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("gatehouse-sqlite-checkpoint".into())
        .spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(CHECKPOINT_EVERY)
            {
                // PASSIVE never blocks the writer; a busy or vanished file is retried later.
                if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
                    tracing::debug!(error = %e, "WAL checkpoint skipped");
                }
            }
        });
    spawned.map_err(|e| format!("cannot start the checkpoint thread: {e}"))?;
    Ok(stop)
}

/// Creates the file readable by its owner only, before SQLite opens it.
fn create_private(path: &Path) -> std::io::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(path).map(drop)
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn ready(&self) -> Result<(), StoreError> {
        self.point(|c| {
            c.query_row(
                "SELECT count(*) FROM kv WHERE key = '__readyz_probe__'",
                [],
                |r| r.get::<_, i64>(0),
            )?;
            Ok(())
        })
        .await?;
        // A real write, so a full disk or a failing file shows here.
        self.write(|c| {
            c.prepare_cached(
                "INSERT INTO kv (key, value, expires_at) VALUES ('__readyz_probe__', x'01', NULL)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            )?
            .execute([])?;
            Ok(())
        })
        .await
    }

    async fn insert_usage(&self, rows: std::sync::Arc<Vec<UsageRecord>>) -> Result<(), StoreError> {
        self.write(move |c| usage::insert(c, &rows)).await
    }

    async fn recent_usage(&self, limit: usize) -> Result<Vec<UsageRecord>, StoreError> {
        self.report(move |c| usage::recent(c, limit)).await
    }

    async fn usage_totals(&self, since: DateTime<Utc>) -> Result<UsageTotals, StoreError> {
        self.report(move |c| usage::totals(c, since)).await
    }

    async fn usage_by_model(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<(String, UsageTotals)>, StoreError> {
        self.report(move |c| usage::by_model(c, since)).await
    }

    async fn usage_between(&self, query: RowQuery) -> Result<Vec<UsageRecord>, StoreError> {
        self.report(move |c| usage::between(c, &query)).await
    }

    async fn usage_rollup(
        &self,
        from_hour: i64,
        to_hour: i64,
        session_id: Option<String>,
    ) -> Result<Vec<RollupRow>, StoreError> {
        self.report(move |c| usage::rollup_rows(c, from_hour, to_hour, session_id.as_deref(), None))
            .await
    }

    async fn usage_rollup_of(
        &self,
        principal: String,
        from_hour: i64,
        to_hour: i64,
    ) -> Result<Vec<RollupRow>, StoreError> {
        self.report(move |c| usage::rollup_rows(c, from_hour, to_hour, None, Some(&principal)))
            .await
    }

    async fn daily_spend(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<(String, DateTime<Utc>, u64)>, StoreError> {
        self.report(move |c| spend::daily_spend(c, from, to)).await
    }

    async fn local_key_hash(&self) -> Result<Option<([u8; 32], DateTime<Utc>)>, StoreError> {
        self.point(|c| kv::local_key_hash(c)).await
    }

    async fn set_local_key_hash(
        &self,
        hash: [u8; 32],
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.write(move |c| kv::set_local_key_hash(c, hash, at))
            .await
    }

    async fn kv_get(&self, key: &str, now: DateTime<Utc>) -> Result<Option<Vec<u8>>, StoreError> {
        let key = key.to_owned();
        self.point(move |c| kv::get(c, &key, now)).await
    }

    async fn kv_put(
        &self,
        key: &str,
        value: Vec<u8>,
        expires_at: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError> {
        let key = key.to_owned();
        self.write(move |c| kv::put(c, &key, value, expires_at))
            .await
    }

    async fn kv_insert(
        &self,
        key: &str,
        value: Vec<u8>,
        expires_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let key = key.to_owned();
        self.write(move |c| kv::insert(c, &key, value, expires_at, now))
            .await
    }

    async fn kv_replace(
        &self,
        key: &str,
        expected: Vec<u8>,
        value: Vec<u8>,
        expires_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let key = key.to_owned();
        self.write(move |c| kv::replace(c, &key, expected, value, expires_at, now))
            .await
    }

    async fn kv_delete(&self, key: &str, expected: Option<Vec<u8>>) -> Result<bool, StoreError> {
        let key = key.to_owned();
        self.write(move |c| kv::delete(c, &key, expected)).await
    }

    async fn kv_incr(
        &self,
        key: &str,
        window: std::time::Duration,
        now: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        let key = key.to_owned();
        self.write(move |c| kv::incr(c, &key, window, now)).await
    }

    async fn kv_scan(
        &self,
        prefix: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let prefix = prefix.to_owned();
        self.point(move |c| kv::scan(c, &prefix, now)).await
    }

    async fn kv_purge_expired(&self, now: DateTime<Utc>) -> Result<u64, StoreError> {
        self.write(move |c| kv::purge_expired(c, now)).await
    }

    async fn reserve(
        &self,
        req: crate::spend::ReserveRequest,
    ) -> Result<crate::spend::ReserveOutcome, StoreError> {
        // A reservation committed after its caller stopped waiting is released at once
        // by the writer, so nothing stays held with no request in flight.
        let (id, now) = (req.reservation_id.clone(), req.now);
        let orphan: lanes::Orphan<crate::spend::ReserveOutcome> = Box::new(move |outcome| {
            matches!(outcome, crate::spend::ReserveOutcome::Reserved(_)).then(|| {
                Detached::new("release an abandoned reservation", move |c| {
                    spend::settle(c, &id, 0, SettleAs::Released.as_str(), now).map(drop)
                })
            })
        });
        self.lanes
            .write_or(move |c| spend::reserve(c, &req), Some(orphan))
            .await
    }

    async fn settle(
        &self,
        reservation_id: &str,
        actual_micro: u64,
        how: SettleAs,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let id = reservation_id.to_owned();
        self.write(move |c| spend::settle(c, &id, actual_micro, how.as_str(), now))
            .await
    }

    async fn open_reservations(&self) -> Result<Vec<OpenReservation>, StoreError> {
        self.point(spend::open_reservations).await
    }

    async fn open_reservation_count(&self) -> Result<u64, StoreError> {
        self.report(|c| {
            let n: i64 = c.query_row(
                "SELECT count(*) FROM reservations WHERE state = 'open'",
                [],
                |r| r.get(0),
            )?;
            Ok(u64::try_from(n).unwrap_or(0))
        })
        .await
    }

    async fn usage_cost(&self, request_id: &str) -> Result<Option<u64>, StoreError> {
        let id = request_id.to_owned();
        self.point(move |c| usage::cost(c, &id)).await
    }

    async fn standings(
        &self,
        sub: &str,
        groups: &[String],
        mode: crate::spend::GroupMode,
        now: DateTime<Utc>,
    ) -> Result<Vec<crate::spend::Standing>, StoreError> {
        let (sub, groups) = (sub.to_owned(), groups.to_vec());
        self.point(move |c| spend::standings(c, &sub, &groups, mode, now))
            .await
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
        let (scope_id, actor) = (scope_id.to_owned(), actor.to_owned());
        self.write(move |c| {
            spend::upsert_limit(
                c,
                scope_type,
                &scope_id,
                period,
                None,
                amount_cents,
                None,
                &actor,
                now,
            )
        })
        .await
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
        let (scope_id, actor) = (scope_id.to_owned(), actor.to_owned());
        self.write(move |c| {
            spend::upsert_limit(
                c,
                scope_type,
                &scope_id,
                period,
                Some(model),
                amount_cents,
                None,
                &actor,
                now,
            )
        })
        .await
    }

    async fn upsert_pooled_limit(
        &self,
        group: &str,
        amount_cents: Option<i64>,
        pooled: Option<crate::spend::PooledBudget>,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<crate::spend::SpendLimit, StoreError> {
        let (group, actor) = (group.to_owned(), actor.to_owned());
        self.write(move |c| {
            spend::upsert_limit(
                c,
                crate::spend::ScopeType::RbacGroup,
                &group,
                crate::spend::Period::Monthly,
                None,
                amount_cents,
                Some(pooled),
                &actor,
                now,
            )
        })
        .await
    }

    async fn pool_totals(
        &self,
        groups: Vec<String>,
        now: DateTime<Utc>,
    ) -> Result<Vec<(String, u64, u64)>, StoreError> {
        let start = crate::store::convert::ms(crate::spend::Period::Monthly.window(now).start);
        self.point(move |c| spend::pool_totals(c, &groups, start))
            .await
    }

    async fn get_limit(&self, id: &str) -> Result<Option<crate::spend::SpendLimit>, StoreError> {
        let id = id.to_owned();
        self.point(move |c| spend::get_limit(c, &id)).await
    }

    async fn delete_limit(
        &self,
        id: &str,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<crate::spend::SpendLimit>, StoreError> {
        let (id, actor) = (id.to_owned(), actor.to_owned());
        self.write(move |c| spend::delete_limit(c, &id, &actor, now))
            .await
    }

    async fn list_limits(
        &self,
        scope_type: Option<crate::spend::ScopeType>,
        after_id: Option<String>,
        before_id: Option<String>,
        limit: usize,
    ) -> Result<(Vec<crate::spend::SpendLimit>, bool), StoreError> {
        self.report(move |c| spend::list_limits(c, scope_type, after_id, before_id, limit))
            .await
    }

    async fn upsert_principal(
        &self,
        who: crate::identity::user::UserIdentity,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.write(move |c| spend::upsert_principal(c, &who, now))
            .await
    }

    async fn principals(
        &self,
        subs: Option<Vec<String>>,
    ) -> Result<Vec<crate::identity::user::UserIdentity>, StoreError> {
        self.report(move |c| spend::principals(c, subs)).await
    }

    async fn directory(
        &self,
        query: super::DirectoryQuery,
    ) -> Result<(Vec<super::DirectoryEntry>, bool), StoreError> {
        self.report(move |c| admin_views::directory(c, query)).await
    }

    async fn audit_page(
        &self,
        query: super::AuditQuery,
    ) -> Result<(Vec<crate::spend::AuditRow>, bool), StoreError> {
        self.report(move |c| admin_views::audit_page(c, query))
            .await
    }

    async fn append_audit(&self, row: crate::spend::AuditRow) -> Result<(), StoreError> {
        self.write(move |c| admin_views::append_audit(c, &row))
            .await
    }

    async fn usage_by_upstream(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<(String, UsageTotals)>, StoreError> {
        self.report(move |c| admin_views::usage_by_upstream(c, from, to))
            .await
    }

    async fn retention(
        &self,
        audit_before: DateTime<Utc>,
        spend_before: DateTime<Utc>,
        principals_before: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        let steps = spend::retention_steps(audit_before, spend_before, principals_before);
        let mut total = 0;
        for (sql, cut) in steps {
            for _ in 0..spend::RETENTION_BATCHES {
                let n = self
                    .write(move |c| spend::retention_batch(c, sql, cut))
                    .await?;
                total += n;
                if n < spend::RETENTION_BATCH as u64 {
                    break;
                }
            }
        }
        Ok(total)
    }
}

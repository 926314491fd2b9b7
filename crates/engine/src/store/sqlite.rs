//! SQLite store: one connection owned by a dedicated thread, so no SQLite call ever runs on
//! an async worker. Callers send closures over a channel and await the answer.
//!
//! WAL journal, `synchronous=NORMAL`, a 5 s busy timeout, and `BEGIN IMMEDIATE` for writes.
//! Automatic checkpoints are off on that connection: a second connection on its own thread
//! checkpoints (`PASSIVE`) every 500 ms, so the fsync a checkpoint does never sits in a
//! request's write.

use std::path::{Path, PathBuf};
use std::sync::mpsc;

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use tokio::sync::oneshot;

use super::{Store, StoreError, UsageRecord, UsageTotals, migrations};

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

pub struct SqliteStore {
    jobs: mpsc::Sender<Job>,
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
        let (jobs, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("gatehouse-sqlite".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    job(&mut conn);
                }
            })
            .map_err(|e| open_err(e.to_string()))?;
        Ok(Self {
            jobs,
            path: path.to_owned(),
            _checkpoint_stop: checkpoint_stop,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn call<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.jobs
            .send(Box::new(move |conn| {
                let _ = tx.send(f(conn));
            }))
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
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

fn ms(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis()
}

fn from_ms(v: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(v).single().unwrap_or_default()
}

fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn u(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn ready(&self) -> Result<(), StoreError> {
        self.call(|c| {
            c.query_row(
                "SELECT value FROM kv WHERE key = '__readyz_probe__'",
                [],
                |r| r.get::<_, Vec<u8>>(0),
            )
            .optional()?;
            Ok(())
        })
        .await
    }

    async fn insert_usage(&self, rows: std::sync::Arc<Vec<UsageRecord>>) -> Result<(), StoreError> {
        self.call(move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            {
                let mut stmt = tx.prepare_cached(
                    "INSERT OR IGNORE INTO usage_events (request_id, created_at, principal, endpoint,
                        model, upstream, upstream_model, status, route_reason, stream, input_tokens,
                        output_tokens, cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens,
                        web_search_requests, cost_micro_usd, usage_source, latency_ms, ttfb_ms,
                        client_disconnected)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                        ?17, ?18, ?19, ?20, ?21)",
                )?;
                for r in rows.iter() {
                    stmt.execute(params![
                        r.request_id,
                        ms(r.created_at),
                        r.principal,
                        r.endpoint,
                        r.model,
                        r.upstream,
                        r.upstream_model,
                        r.status,
                        r.route_reason,
                        r.stream,
                        i(r.input_tokens),
                        i(r.output_tokens),
                        i(r.cache_read_tokens),
                        i(r.cache_write_5m_tokens),
                        i(r.cache_write_1h_tokens),
                        i(r.web_search_requests),
                        i(r.cost_micro_usd),
                        r.usage_source,
                        i(r.latency_ms),
                        r.ttfb_ms.map(i),
                        r.client_disconnected,
                    ])?;
                }
            }
            // The charge lands with its usage row, atomically.
            for r in rows.iter() {
                if let Some(id) = &r.reservation_id {
                    super::sqlite_spend::settle_in(&tx, id, r.cost_micro_usd, false, r.created_at)?;
                }
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn recent_usage(&self, limit: usize) -> Result<Vec<UsageRecord>, StoreError> {
        self.call(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT request_id, created_at, principal, endpoint, model, upstream,
                    upstream_model, status, route_reason, stream, input_tokens, output_tokens,
                    cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens,
                    web_search_requests, cost_micro_usd, usage_source, latency_ms, ttfb_ms,
                    client_disconnected
                 FROM usage_events ORDER BY created_at DESC, id DESC LIMIT ?1",
            )?;
            let rows = stmt
                .query_map(params![i64::try_from(limit).unwrap_or(i64::MAX)], |r| {
                    Ok(UsageRecord {
                        request_id: r.get(0)?,
                        created_at: from_ms(r.get(1)?),
                        principal: r.get(2)?,
                        endpoint: r.get(3)?,
                        model: r.get(4)?,
                        upstream: r.get(5)?,
                        upstream_model: r.get(6)?,
                        status: r.get(7)?,
                        route_reason: r.get(8)?,
                        stream: r.get(9)?,
                        input_tokens: u(r.get(10)?),
                        output_tokens: u(r.get(11)?),
                        cache_read_tokens: u(r.get(12)?),
                        cache_write_5m_tokens: u(r.get(13)?),
                        cache_write_1h_tokens: u(r.get(14)?),
                        web_search_requests: u(r.get(15)?),
                        cost_micro_usd: u(r.get(16)?),
                        usage_source: r.get(17)?,
                        latency_ms: u(r.get(18)?),
                        ttfb_ms: r.get::<_, Option<i64>>(19)?.map(u),
                        client_disconnected: r.get(20)?,
                        reservation_id: None,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    async fn usage_totals(&self, since: DateTime<Utc>) -> Result<UsageTotals, StoreError> {
        self.call(move |c| {
            let totals = c.query_row(
                "SELECT COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),
                        COALESCE(SUM(cost_micro_usd), 0)
                 FROM usage_events WHERE created_at >= ?1",
                params![ms(since)],
                |r| {
                    Ok(UsageTotals {
                        requests: u(r.get(0)?),
                        input_tokens: u(r.get(1)?),
                        output_tokens: u(r.get(2)?),
                        cost_micro_usd: u(r.get(3)?),
                    })
                },
            )?;
            Ok(totals)
        })
        .await
    }

    async fn usage_by_model(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<(String, UsageTotals)>, StoreError> {
        self.call(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT model, COUNT(*), COALESCE(SUM(input_tokens), 0),
                        COALESCE(SUM(output_tokens), 0), COALESCE(SUM(cost_micro_usd), 0)
                 FROM usage_events WHERE created_at >= ?1
                 GROUP BY model ORDER BY 5 DESC, model ASC LIMIT 100",
            )?;
            let rows = stmt
                .query_map(params![ms(since)], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        UsageTotals {
                            requests: u(r.get(1)?),
                            input_tokens: u(r.get(2)?),
                            output_tokens: u(r.get(3)?),
                            cost_micro_usd: u(r.get(4)?),
                        },
                    ))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    async fn local_key_hash(&self) -> Result<Option<([u8; 32], DateTime<Utc>)>, StoreError> {
        self.call(|c| {
            let row = c
                .query_row(
                    "SELECT key_hash, created_at FROM local_keys WHERE id = 'local'",
                    [],
                    |r| Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, i64>(1)?)),
                )
                .optional()?;
            Ok(row.and_then(|(h, at)| {
                let hash: [u8; 32] = h.try_into().ok()?;
                Some((hash, from_ms(at)))
            }))
        })
        .await
    }

    async fn set_local_key_hash(
        &self,
        hash: [u8; 32],
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.call(move |c| {
            c.execute(
                "INSERT INTO local_keys (id, key_hash, created_at) VALUES ('local', ?1, ?2)
                 ON CONFLICT (id) DO UPDATE SET key_hash = excluded.key_hash,
                     created_at = excluded.created_at",
                params![hash.to_vec(), ms(at)],
            )?;
            Ok(())
        })
        .await
    }

    async fn kv_get(&self, key: &str, now: DateTime<Utc>) -> Result<Option<Vec<u8>>, StoreError> {
        let key = key.to_owned();
        self.call(move |c| {
            Ok(c.query_row(
                &format!("SELECT value FROM kv WHERE key = ?1 AND {LIVE}"),
                params![key, ms(now)],
                |r| r.get::<_, Vec<u8>>(0),
            )
            .optional()?)
        })
        .await
    }

    async fn kv_put(
        &self,
        key: &str,
        value: Vec<u8>,
        expires_at: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError> {
        let key = key.to_owned();
        self.call(move |c| {
            c.execute(
                "INSERT INTO kv (key, value, expires_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at",
                params![key, value, expires_at.map(ms)],
            )?;
            Ok(())
        })
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
        self.call(move |c| {
            let n = c.execute(
                &format!("UPDATE kv SET value = ?3, expires_at = ?4 WHERE key = ?1 AND value = ?5 AND {LIVE}"),
                params![key, ms(now), value, expires_at.map(ms), expected],
            )?;
            Ok(n == 1)
        })
        .await
    }

    async fn kv_delete(&self, key: &str, expected: Option<Vec<u8>>) -> Result<bool, StoreError> {
        let key = key.to_owned();
        self.call(move |c| {
            let n = match expected {
                Some(v) => c.execute(
                    "DELETE FROM kv WHERE key = ?1 AND value = ?2",
                    params![key, v],
                )?,
                None => c.execute("DELETE FROM kv WHERE key = ?1", params![key])?,
            };
            Ok(n == 1)
        })
        .await
    }

    async fn kv_incr(
        &self,
        key: &str,
        window: std::time::Duration,
        now: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        let key = key.to_owned();
        let window_ms = i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
        self.call(move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let now_ms = ms(now);
            let current: Option<(Vec<u8>, Option<i64>)> = tx
                .query_row(
                    "SELECT value, expires_at FROM kv WHERE key = ?1",
                    params![key],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            let (count, expires) = match current {
                Some((v, Some(exp))) if exp > now_ms => {
                    let n = std::str::from_utf8(&v).ok().and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
                    (n + 1, exp)
                }
                _ => (1, now_ms.saturating_add(window_ms)),
            };
            tx.execute(
                "INSERT INTO kv (key, value, expires_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at",
                params![key, count.to_string().into_bytes(), expires],
            )?;
            tx.commit()?;
            Ok(count)
        })
        .await
    }

    async fn kv_scan(
        &self,
        prefix: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let pattern = format!(
            "{}%",
            prefix
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        );
        self.call(move |c| {
            let mut stmt = c.prepare_cached(&format!(
                "SELECT key, value FROM kv WHERE key LIKE ?1 ESCAPE '\\' AND {LIVE} ORDER BY key"
            ))?;
            let rows = stmt
                .query_map(params![pattern, ms(now)], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    async fn kv_purge_expired(&self, now: DateTime<Utc>) -> Result<u64, StoreError> {
        self.call(move |c| {
            let n = c.execute(
                "DELETE FROM kv WHERE expires_at IS NOT NULL AND expires_at <= ?1",
                params![ms(now)],
            )?;
            Ok(n as u64)
        })
        .await
    }
    async fn reserve(
        &self,
        req: crate::spend::ReserveRequest,
    ) -> Result<crate::spend::ReserveOutcome, StoreError> {
        self.call(move |c| super::sqlite_spend::reserve(c, &req))
            .await
    }

    async fn settle(
        &self,
        reservation_id: &str,
        actual_micro: u64,
        released: bool,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let id = reservation_id.to_owned();
        self.call(move |c| super::sqlite_spend::settle(c, &id, actual_micro, released, now))
            .await
    }

    async fn open_reservations(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.call(super::sqlite_spend::open_reservations).await
    }

    async fn usage_cost(&self, request_id: &str) -> Result<Option<u64>, StoreError> {
        let id = request_id.to_owned();
        self.call(move |c| super::sqlite_spend::usage_cost(c, &id))
            .await
    }

    async fn standings(
        &self,
        sub: &str,
        groups: &[String],
        mode: crate::spend::GroupMode,
        now: DateTime<Utc>,
    ) -> Result<Vec<crate::spend::Standing>, StoreError> {
        let (sub, groups) = (sub.to_owned(), groups.to_vec());
        self.call(move |c| super::sqlite_spend::standings(c, &sub, &groups, mode, now))
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
        self.call(move |c| {
            super::sqlite_spend::upsert_limit(
                c,
                scope_type,
                &scope_id,
                period,
                amount_cents,
                &actor,
                now,
            )
        })
        .await
    }

    async fn get_limit(&self, id: &str) -> Result<Option<crate::spend::SpendLimit>, StoreError> {
        let id = id.to_owned();
        self.call(move |c| super::sqlite_spend::get_limit(c, &id))
            .await
    }

    async fn delete_limit(
        &self,
        id: &str,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<crate::spend::SpendLimit>, StoreError> {
        let (id, actor) = (id.to_owned(), actor.to_owned());
        self.call(move |c| super::sqlite_spend::delete_limit(c, &id, &actor, now))
            .await
    }

    async fn list_limits(
        &self,
        scope_type: Option<crate::spend::ScopeType>,
        after_id: Option<String>,
        before_id: Option<String>,
        limit: usize,
    ) -> Result<(Vec<crate::spend::SpendLimit>, bool), StoreError> {
        self.call(move |c| {
            super::sqlite_spend::list_limits(c, scope_type, after_id, before_id, limit)
        })
        .await
    }

    async fn upsert_principal(
        &self,
        who: crate::identity::session::UserIdentity,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.call(move |c| super::sqlite_spend::upsert_principal(c, &who, now))
            .await
    }

    async fn principals(
        &self,
        subs: Option<Vec<String>>,
    ) -> Result<Vec<crate::identity::session::UserIdentity>, StoreError> {
        self.call(move |c| super::sqlite_spend::principals(c, subs))
            .await
    }

    async fn retention(
        &self,
        audit_before: DateTime<Utc>,
        spend_before: DateTime<Utc>,
        principals_before: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        self.call(move |c| {
            super::sqlite_spend::retention(c, audit_before, spend_before, principals_before)
        })
        .await
    }

    async fn list_audit(
        &self,
        after_id: Option<String>,
        limit: usize,
    ) -> Result<(Vec<crate::spend::AuditRow>, bool), StoreError> {
        self.call(move |c| super::sqlite_spend::list_audit(c, after_id, limit))
            .await
    }
}

const LIVE: &str = "(expires_at IS NULL OR expires_at > ?2)";

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn record(id: &str, at_ms: i64, cost: u64) -> UsageRecord {
        UsageRecord {
            request_id: id.into(),
            created_at: from_ms(at_ms),
            principal: "key:ci".into(),
            endpoint: "messages".into(),
            model: "claude-sonnet-4-6".into(),
            upstream: Some("primary".into()),
            upstream_model: Some("claude-sonnet-4-6".into()),
            status: 200,
            route_reason: "primary: first healthy".into(),
            stream: true,
            input_tokens: 10,
            output_tokens: 20,
            cache_read_tokens: 1,
            cache_write_5m_tokens: 2,
            cache_write_1h_tokens: 3,
            web_search_requests: 0,
            cost_micro_usd: cost,
            usage_source: "reported".into(),
            latency_ms: 12,
            ttfb_ms: Some(3),
            client_disconnected: false,
            reservation_id: None,
        }
    }

    #[tokio::test]
    async fn usage_round_trip_and_totals() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("a/b.db"), Utc::now()).unwrap();
        store.ready().await.unwrap();
        store
            .insert_usage(vec![record("r1", 1_000, 5), record("r2", 2_000, 7)].into())
            .await
            .unwrap();
        let rows = store.recent_usage(10).await.unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0], record("r2", 2_000, 7));
        let totals = store.usage_totals(from_ms(1_500)).await.unwrap();
        assert_eq!(totals.requests, 1);
        assert_eq!(totals.cost_micro_usd, 7);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(store.path())
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "database must be private: {mode:o}");
        }
    }

    #[tokio::test]
    async fn retention_removes_only_old_rows() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("r.db"), Utc::now()).unwrap();
        let now = Utc::now();
        let old = now - chrono::Duration::days(400);
        use crate::spend::{Period, ScopeType};
        store
            .upsert_limit(
                ScopeType::Organization,
                "",
                Period::Daily,
                Some(5),
                "key:a",
                old,
            )
            .await
            .unwrap();
        store
            .upsert_limit(
                ScopeType::Organization,
                "",
                Period::Weekly,
                Some(5),
                "key:a",
                now,
            )
            .await
            .unwrap();
        let who = |s: &str| crate::identity::session::UserIdentity {
            sub: s.into(),
            email: None,
            name: None,
            groups: vec![],
        };
        store
            .upsert_principal(who("gone"), now - chrono::Duration::days(91))
            .await
            .unwrap();
        store.upsert_principal(who("here"), now).await.unwrap();
        store
            .insert_usage(
                vec![
                    record("old", old.timestamp_millis(), 1),
                    record("new", now.timestamp_millis(), 1),
                ]
                .into(),
            )
            .await
            .unwrap();
        let days = chrono::Duration::days;
        let removed = store
            .retention(now - days(365), now - days(396), now - days(90))
            .await
            .unwrap();
        assert_eq!(removed, 3);
        let (audit, _) = store.list_audit(None, 10).await.unwrap();
        assert_eq!(audit.len(), 1);
        let people = store.principals(None).await.unwrap();
        assert_eq!(people.len(), 1);
        assert_eq!(people[0].sub, "here");
        assert_eq!(store.recent_usage(10).await.unwrap().len(), 1);
        assert_eq!(
            store
                .list_limits(None, None, None, 10)
                .await
                .unwrap()
                .0
                .len(),
            2,
            "caps are never expired"
        );
    }

    #[tokio::test]
    async fn local_key_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("k.db"), Utc::now()).unwrap();
        assert!(store.local_key_hash().await.unwrap().is_none());
        store.set_local_key_hash([1; 32], from_ms(5)).await.unwrap();
        store.set_local_key_hash([2; 32], from_ms(6)).await.unwrap();
        assert_eq!(
            store.local_key_hash().await.unwrap(),
            Some(([2; 32], from_ms(6)))
        );
    }
}

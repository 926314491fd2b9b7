//! Storage behind one interface. SQLite (rusqlite, on its own thread) is the embedded
//! default; PostgreSQL (`tokio-postgres` with a `deadpool` pool) lets several replicas
//! share one database. Both implement [`Store`] with the same meaning; migrations are
//! plain numbered `.sql` files under `migrations/<backend>/`.
//!
//! Each backend is split by concern: `usage` (usage rows), `kv` (keyed state and the local
//! key hash) and `spend` (reservations, settlement, caps with their audit rows, the
//! identity directory, retention); its `mod.rs` holds the connection handling and the
//! [`Store`] impl that delegates to them. The shared column conversions live in `convert`;
//! the cap arithmetic is not here but in [`crate::spend::caps`].

pub mod backup;
mod convert;
pub mod migrations;
pub mod postgres;
pub mod rollup;
pub mod sqlite;
pub mod timed;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

pub use crate::metering::tags::ClientTags;

pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(String),
    #[error(
        "database schema version {found} is newer than this binary supports ({supported}); use a newer gatehouse"
    )]
    TooNew { found: i64, supported: i64 },
    #[error("cannot open database {path}: {message}")]
    Open { path: String, message: String },
    /// `target` is `host:port/database`; never the URL (it may carry a password).
    #[error("cannot connect to PostgreSQL at {target}: {message}")]
    Connect { target: String, message: String },
    #[error("the store is shut down")]
    Closed,
    /// A bounded queue in front of the store is full: the call was refused at once rather
    /// than queued behind others.
    #[error("the store is busy")]
    Busy,
}

/// How a reservation is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettleAs {
    /// Charged the request's metered cost (with its usage row).
    Charged,
    /// Nothing reached an upstream: released at no charge.
    Released,
    /// The gateway stopped before the request was metered: charged the reserved worst case.
    Estimated,
}

impl SettleAs {
    /// The reservation's stored state.
    pub fn as_str(self) -> &'static str {
        match self {
            SettleAs::Charged => "settled",
            SettleAs::Released => "released",
            SettleAs::Estimated => "estimated",
        }
    }
}

/// An open reservation found at start: no running gateway will settle it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenReservation {
    pub id: String,
    pub request_id: String,
    pub amount_micro: u64,
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Database(e.to_string())
    }
}

/// A read of usage rows by time (see [`Store::usage_between`]).
#[derive(Debug, Clone)]
pub struct RowQuery {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub session_id: Option<String>,
    pub newest_first: bool,
    pub limit: usize,
}

/// One persisted usage row.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UsageRecord {
    pub request_id: String,
    /// The gateway's own key for this row: random, made once per request (see
    /// [`UsageRecord::new_row_key`]). Rows are unique by `(created_at, row_key)`, so a
    /// replayed batch inserts and charges nothing twice, while two requests that share a
    /// `request_id` (a caller's own id, reused) are two rows. 0 on rows from before it.
    pub row_key: i64,
    pub created_at: DateTime<Utc>,
    pub principal: String,
    /// `messages`, `count_tokens` or `chat_completions` (the OpenAI front door).
    pub endpoint: String,
    /// The model as the caller asked for it.
    pub model: String,
    pub upstream: Option<String>,
    pub upstream_model: Option<String>,
    pub status: u16,
    pub route_reason: String,
    pub stream: bool,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_5m_tokens: u64,
    pub cache_write_1h_tokens: u64,
    pub web_search_requests: u64,
    pub cost_micro_usd: u64,
    /// `reported`, `estimated` or `none`.
    pub usage_source: String,
    pub latency_ms: u64,
    pub ttfb_ms: Option<u64>,
    pub client_disconnected: bool,
    /// The spend reservation this request settles (written in the same transaction).
    pub reservation_id: Option<String>,
    /// Claude Code's session, agent and request class, and the client (all optional).
    pub tags: ClientTags,
}

impl UsageRecord {
    /// A fresh row key: 63 random bits (never 0, which marks rows from before keys).
    pub fn new_row_key() -> i64 {
        (rand::random::<u64>() >> 1).max(1) as i64
    }
}

/// A batch's charges summed per lease, keyed (person, reservation id) so they are applied
/// in one fixed order: the cost (saturating) and the newest row's time. Callers pass the
/// rows their insert actually wrote, so a row already stored (a replayed batch) is not
/// charged again.
pub fn charges_by_lease<'a>(
    rows: impl IntoIterator<Item = &'a UsageRecord>,
) -> std::collections::BTreeMap<(&'a str, &'a str), (u64, DateTime<Utc>)> {
    let mut by = std::collections::BTreeMap::new();
    for r in rows {
        if let Some(id) = &r.reservation_id {
            let e = by
                .entry((r.principal.as_str(), id.as_str()))
                .or_insert((0u64, r.created_at));
            e.0 = e.0.saturating_add(r.cost_micro_usd);
            e.1 = e.1.max(r.created_at);
        }
    }
    by
}

/// Totals over a time range.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct UsageTotals {
    pub requests: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_micro_usd: u64,
}

/// A page of the identity directory (admin views): people after `after` (by `sub`), whose
/// sub, email or name contains `needle` (case-insensitive), at most `limit` (or only the
/// person `exact`).
#[derive(Debug, Clone, Default)]
pub struct DirectoryQuery {
    pub after: Option<String>,
    pub needle: Option<String>,
    pub limit: usize,
    /// Only this person.
    pub exact: Option<String>,
}

/// One person of the directory with when they were last written (seen).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryEntry {
    pub who: crate::identity::user::UserIdentity,
    pub seen_at: DateTime<Utc>,
}

/// A page of the admin audit trail, newest first, with optional exact filters.
#[derive(Debug, Clone, Default)]
pub struct AuditQuery {
    pub after_id: Option<String>,
    pub limit: usize,
    pub actor: Option<String>,
    /// Stored action names (e.g. `spend_limit.create`, `user.sessions_revoke`).
    pub actions: Vec<String>,
    pub target_id: Option<String>,
}

/// Rows of the inference limits shared by replicas (PostgreSQL; a SQLite gateway keeps its
/// limits in process memory). The arithmetic is [`crate::limits`]'s, mirrored by the
/// admission function of migration 0004.
#[async_trait]
pub trait LimitRows: Send + Sync {
    /// Checks every draw and the slot in one statement and writes all or nothing.
    async fn limit_admit(
        &self,
        draws: Vec<crate::limits::Draw>,
        slot: Option<crate::limits::SlotDraw>,
        now_ms: i64,
    ) -> Result<crate::limits::Verdict, StoreError>;
    /// Gives `refund` tokens back to each draw's row (negative: takes them).
    async fn limit_refund(
        &self,
        refunds: Vec<(crate::limits::Draw, f64)>,
    ) -> Result<(), StoreError>;
    /// Frees a concurrency slot.
    async fn limit_release(&self, slot_id: &str) -> Result<(), StoreError>;
    /// Removes slots whose gateway is gone and rows untouched since `stale_before_ms`.
    async fn limit_reap(&self, stale_before_ms: i64) -> Result<u64, StoreError>;
}

#[async_trait]
pub trait Store: Send + Sync {
    /// `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;
    /// The shared limit rows, on a store replicas share (PostgreSQL).
    fn limit_rows(&self) -> Option<&dyn LimitRows> {
        None
    }
    /// A real read and a real write, for `/readyz`.
    async fn ready(&self) -> Result<(), StoreError>;
    /// Writes the rows and charges the leases they carry, in one transaction. A row
    /// already stored (same `created_at` and `row_key`) is skipped with its charge, so a
    /// retry of a batch whose outcome was unknown is safe. Shared, so a retry does not
    /// copy the batch.
    async fn insert_usage(&self, rows: std::sync::Arc<Vec<UsageRecord>>) -> Result<(), StoreError>;
    /// Newest first.
    async fn recent_usage(&self, limit: usize) -> Result<Vec<UsageRecord>, StoreError>;
    async fn usage_totals(&self, since: DateTime<Utc>) -> Result<UsageTotals, StoreError>;
    /// Totals per requested `model` since `since`, highest cost first (then model name),
    /// at most 100 models: the dashboard's spend per model.
    async fn usage_by_model(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<(String, UsageTotals)>, StoreError>;
    /// Usage rows with `from <= created_at < to`, of one session when the query names
    /// one (a session's requests, the raw export), through the time index.
    async fn usage_between(&self, query: RowQuery) -> Result<Vec<UsageRecord>, StoreError>;
    /// The usage rollup's rows of hours `from_hour..=to_hour` ([`rollup::hour_of`]), of
    /// one session when named: the projects, sessions and charts views.
    async fn usage_rollup(
        &self,
        from_hour: i64,
        to_hour: i64,
        session_id: Option<String>,
    ) -> Result<Vec<rollup::RollupRow>, StoreError>;
    /// The rollup rows of one principal (`user:<sub>`) in hours `from_hour..=to_hour`: a
    /// person's page.
    async fn usage_rollup_of(
        &self,
        principal: String,
        from_hour: i64,
        to_hour: i64,
    ) -> Result<Vec<rollup::RollupRow>, StoreError>;
    /// Each person's settled spend per UTC day for the days starting in `[from, to)`, days
    /// with no spend left out: `(person, day start, micro-USD)`, by day then person (the
    /// cost report).
    async fn daily_spend(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<(String, DateTime<Utc>, u64)>, StoreError>;
    /// Hash of the per-install local key, if one was issued.
    async fn local_key_hash(&self) -> Result<Option<([u8; 32], DateTime<Utc>)>, StoreError>;
    /// Replaces the per-install local key.
    async fn set_local_key_hash(&self, hash: [u8; 32], at: DateTime<Utc>)
    -> Result<(), StoreError>;

    // Short-lived keyed state (device grants, user codes, rate counters, revocations).
    // Expired entries are invisible at once; `kv_purge_expired` removes them physically.

    async fn kv_get(&self, key: &str, now: DateTime<Utc>) -> Result<Option<Vec<u8>>, StoreError>;
    async fn kv_put(
        &self,
        key: &str,
        value: Vec<u8>,
        expires_at: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError>;
    /// Writes `value` only if the key holds no live entry (an expired one is replaced); true
    /// if written. Of several callers racing on one key, on any replica, exactly one wins.
    async fn kv_insert(
        &self,
        key: &str,
        value: Vec<u8>,
        expires_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError>;
    /// Writes `value` only if the live entry still equals `expected` (compare-and-swap).
    async fn kv_replace(
        &self,
        key: &str,
        expected: Vec<u8>,
        value: Vec<u8>,
        expires_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError>;
    /// Deletes the entry (only if it still equals `expected`, when given); true if deleted.
    async fn kv_delete(&self, key: &str, expected: Option<Vec<u8>>) -> Result<bool, StoreError>;
    /// Fixed-window counter: the count in the current window after this increment.
    async fn kv_incr(
        &self,
        key: &str,
        window: std::time::Duration,
        now: DateTime<Utc>,
    ) -> Result<u64, StoreError>;
    /// Live entries whose key starts with `prefix`.
    async fn kv_scan(
        &self,
        prefix: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError>;
    async fn kv_purge_expired(&self, now: DateTime<Utc>) -> Result<u64, StoreError>;

    // Spend: caps, reservations, standings and the admin audit trail.

    /// Checks every binding cap and reserves in one transaction, or writes nothing.
    async fn reserve(
        &self,
        req: crate::spend::ReserveRequest,
    ) -> Result<crate::spend::ReserveOutcome, StoreError>;
    /// Closes an open reservation, charging `actual_micro`; false if it was not open.
    async fn settle(
        &self,
        reservation_id: &str,
        actual_micro: u64,
        how: SettleAs,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError>;
    /// Open reservations no running gateway will settle: on SQLite (one process per file)
    /// every open one; on PostgreSQL those whose gateway is gone (its advisory lock is
    /// free), never another live replica's.
    async fn open_reservations(&self) -> Result<Vec<OpenReservation>, StoreError>;
    /// Reservations open now, on every gateway sharing the store (the metrics gauge).
    async fn open_reservation_count(&self) -> Result<u64, StoreError>;
    /// Cost of a recorded request (its rows under that id, at any time), if one exists. No
    /// index leads with the request id (rows are indexed by time), so this scans: for tests
    /// and support lookups, never the request path.
    async fn usage_cost(&self, request_id: &str) -> Result<Option<u64>, StoreError>;
    /// A person's standing in each period of every model (daily, weekly, monthly), then on
    /// every other period or model family where a cap binds them.
    async fn standings(
        &self,
        sub: &str,
        groups: &[String],
        mode: crate::spend::GroupMode,
        now: DateTime<Utc>,
    ) -> Result<Vec<crate::spend::Standing>, StoreError>;
    /// Creates or replaces the cap of every model for a scope and period, with its audit row.
    async fn upsert_limit(
        &self,
        scope_type: crate::spend::ScopeType,
        scope_id: &str,
        period: crate::spend::Period,
        amount_cents: Option<i64>,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<crate::spend::SpendLimit, StoreError>;
    /// Creates or replaces the cap of one model family for a scope and period (beside the
    /// scope's cap of every model for that period), with its audit row.
    #[allow(clippy::too_many_arguments)]
    async fn upsert_model_limit(
        &self,
        scope_type: crate::spend::ScopeType,
        scope_id: &str,
        period: crate::spend::Period,
        model: crate::spend::Family,
        amount_cents: Option<i64>,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<crate::spend::SpendLimit, StoreError>;
    /// Creates or replaces a group's monthly cap together with its shared budget (`pooled`
    /// as given; [`Store::upsert_limit`] keeps the stored one), with its audit row.
    async fn upsert_pooled_limit(
        &self,
        group: &str,
        amount_cents: Option<i64>,
        pooled: Option<crate::spend::PooledBudget>,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<crate::spend::SpendLimit, StoreError>;
    /// Shared budgets' `(group, spent, reserved)` micro-USD in the month containing `now`
    /// (groups with nothing recorded are left out).
    async fn pool_totals(
        &self,
        groups: Vec<String>,
        now: DateTime<Utc>,
    ) -> Result<Vec<(String, u64, u64)>, StoreError>;
    async fn get_limit(&self, id: &str) -> Result<Option<crate::spend::SpendLimit>, StoreError>;
    /// Deletes a cap with its audit row; the deleted cap, if it existed.
    async fn delete_limit(
        &self,
        id: &str,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<crate::spend::SpendLimit>, StoreError>;
    /// Caps in id order, paged; `true` when more follow.
    async fn list_limits(
        &self,
        scope_type: Option<crate::spend::ScopeType>,
        after_id: Option<String>,
        before_id: Option<String>,
        limit: usize,
    ) -> Result<(Vec<crate::spend::SpendLimit>, bool), StoreError>;
    /// Records who a person is (email, name, groups) for admin views.
    async fn upsert_principal(
        &self,
        who: crate::identity::user::UserIdentity,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;
    /// Known people, optionally only these subs; each with their stored identity.
    async fn principals(
        &self,
        subs: Option<Vec<String>>,
    ) -> Result<Vec<crate::identity::user::UserIdentity>, StoreError>;
    /// Deletes rows older than the cut-offs, in batches; the number of rows deleted.
    async fn retention(
        &self,
        audit_before: DateTime<Utc>,
        spend_before: DateTime<Utc>,
        principals_before: DateTime<Utc>,
    ) -> Result<u64, StoreError>;
    /// The identity directory, a page at a time, by `sub` ([`DirectoryQuery`]).
    async fn directory(
        &self,
        query: DirectoryQuery,
    ) -> Result<(Vec<DirectoryEntry>, bool), StoreError>;
    /// Audit rows, newest first, filtered ([`AuditQuery`]).
    async fn audit_page(
        &self,
        query: AuditQuery,
    ) -> Result<(Vec<crate::spend::AuditRow>, bool), StoreError>;
    /// Records an admin action that changes no limit (e.g. a person's sessions revoked).
    async fn append_audit(&self, row: crate::spend::AuditRow) -> Result<(), StoreError>;
    /// Totals per upstream (`""` for requests that reached none) of the usage rows with
    /// `from <= created_at < to`, highest cost first, at most 100.
    async fn usage_by_upstream(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<(String, UsageTotals)>, StoreError>;
}

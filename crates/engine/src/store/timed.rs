//! [`Timed`]: any [`Store`] with each operation's duration reported by name (the
//! `gatehouse_store_operation_seconds{op}` histogram). It only delegates and times; the
//! limit rows a shared store offers pass through untimed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::rollup::RollupRow;
use super::{
    LimitRows, OpenReservation, RowQuery, SettleAs, Store, StoreError, UsageRecord, UsageTotals,
};
use crate::identity::user::UserIdentity;
use crate::spend;

/// Told each operation's name and duration.
pub type Observe = Arc<dyn Fn(&'static str, Duration) + Send + Sync>;

pub struct Timed {
    inner: Arc<dyn Store>,
    observe: Observe,
}

impl Timed {
    pub fn new(inner: Arc<dyn Store>, observe: Observe) -> Self {
        Self { inner, observe }
    }
}

macro_rules! timed {
    ($self:ident, $op:literal, $call:expr) => {{
        let started = Instant::now();
        let out = $call.await;
        ($self.observe)($op, started.elapsed());
        out
    }};
}

#[async_trait]
impl Store for Timed {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    fn limit_rows(&self) -> Option<&dyn LimitRows> {
        self.inner.limit_rows()
    }

    async fn ready(&self) -> Result<(), StoreError> {
        timed!(self, "ready", self.inner.ready())
    }

    async fn insert_usage(&self, rows: Arc<Vec<UsageRecord>>) -> Result<(), StoreError> {
        timed!(self, "insert_usage", self.inner.insert_usage(rows))
    }

    async fn recent_usage(&self, limit: usize) -> Result<Vec<UsageRecord>, StoreError> {
        timed!(self, "recent_usage", self.inner.recent_usage(limit))
    }

    async fn usage_totals(&self, since: DateTime<Utc>) -> Result<UsageTotals, StoreError> {
        timed!(self, "usage_totals", self.inner.usage_totals(since))
    }

    async fn usage_by_model(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<(String, UsageTotals)>, StoreError> {
        timed!(self, "usage_by_model", self.inner.usage_by_model(since))
    }

    async fn usage_between(&self, query: RowQuery) -> Result<Vec<UsageRecord>, StoreError> {
        timed!(self, "usage_between", self.inner.usage_between(query))
    }

    async fn usage_rollup(
        &self,
        from_hour: i64,
        to_hour: i64,
        session_id: Option<String>,
    ) -> Result<Vec<RollupRow>, StoreError> {
        timed!(
            self,
            "usage_rollup",
            self.inner.usage_rollup(from_hour, to_hour, session_id)
        )
    }

    async fn usage_rollup_of(
        &self,
        principal: String,
        from_hour: i64,
        to_hour: i64,
    ) -> Result<Vec<RollupRow>, StoreError> {
        timed!(
            self,
            "usage_rollup_of",
            self.inner.usage_rollup_of(principal, from_hour, to_hour)
        )
    }

    async fn daily_spend(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<(String, DateTime<Utc>, u64)>, StoreError> {
        timed!(self, "daily_spend", self.inner.daily_spend(from, to))
    }

    async fn local_key_hash(&self) -> Result<Option<([u8; 32], DateTime<Utc>)>, StoreError> {
        timed!(self, "local_key_hash", self.inner.local_key_hash())
    }

    async fn set_local_key_hash(
        &self,
        hash: [u8; 32],
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        timed!(
            self,
            "set_local_key_hash",
            self.inner.set_local_key_hash(hash, at)
        )
    }

    async fn kv_get(&self, key: &str, now: DateTime<Utc>) -> Result<Option<Vec<u8>>, StoreError> {
        timed!(self, "kv_get", self.inner.kv_get(key, now))
    }

    async fn kv_put(
        &self,
        key: &str,
        value: Vec<u8>,
        expires_at: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError> {
        timed!(self, "kv_put", self.inner.kv_put(key, value, expires_at))
    }

    async fn kv_insert(
        &self,
        key: &str,
        value: Vec<u8>,
        expires_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        timed!(
            self,
            "kv_insert",
            self.inner.kv_insert(key, value, expires_at, now)
        )
    }

    async fn kv_replace(
        &self,
        key: &str,
        expected: Vec<u8>,
        value: Vec<u8>,
        expires_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        timed!(
            self,
            "kv_replace",
            self.inner.kv_replace(key, expected, value, expires_at, now)
        )
    }

    async fn kv_delete(&self, key: &str, expected: Option<Vec<u8>>) -> Result<bool, StoreError> {
        timed!(self, "kv_delete", self.inner.kv_delete(key, expected))
    }

    async fn kv_incr(
        &self,
        key: &str,
        window: Duration,
        now: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        timed!(self, "kv_incr", self.inner.kv_incr(key, window, now))
    }

    async fn kv_scan(
        &self,
        prefix: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        timed!(self, "kv_scan", self.inner.kv_scan(prefix, now))
    }

    async fn kv_purge_expired(&self, now: DateTime<Utc>) -> Result<u64, StoreError> {
        timed!(self, "kv_purge_expired", self.inner.kv_purge_expired(now))
    }

    async fn reserve(
        &self,
        req: spend::ReserveRequest,
    ) -> Result<spend::ReserveOutcome, StoreError> {
        timed!(self, "reserve", self.inner.reserve(req))
    }

    async fn settle(
        &self,
        reservation_id: &str,
        actual_micro: u64,
        how: SettleAs,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        timed!(
            self,
            "settle",
            self.inner.settle(reservation_id, actual_micro, how, now)
        )
    }

    async fn open_reservations(&self) -> Result<Vec<OpenReservation>, StoreError> {
        timed!(self, "open_reservations", self.inner.open_reservations())
    }

    async fn open_reservation_count(&self) -> Result<u64, StoreError> {
        timed!(
            self,
            "open_reservation_count",
            self.inner.open_reservation_count()
        )
    }

    async fn usage_cost(&self, request_id: &str) -> Result<Option<u64>, StoreError> {
        timed!(self, "usage_cost", self.inner.usage_cost(request_id))
    }

    async fn standings(
        &self,
        sub: &str,
        groups: &[String],
        mode: spend::GroupMode,
        now: DateTime<Utc>,
    ) -> Result<Vec<spend::Standing>, StoreError> {
        timed!(
            self,
            "standings",
            self.inner.standings(sub, groups, mode, now)
        )
    }

    async fn upsert_limit(
        &self,
        scope_type: spend::ScopeType,
        scope_id: &str,
        period: spend::Period,
        amount_cents: Option<i64>,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<spend::SpendLimit, StoreError> {
        timed!(
            self,
            "upsert_limit",
            self.inner
                .upsert_limit(scope_type, scope_id, period, amount_cents, actor, now)
        )
    }

    async fn upsert_model_limit(
        &self,
        scope_type: spend::ScopeType,
        scope_id: &str,
        period: spend::Period,
        model: spend::Family,
        amount_cents: Option<i64>,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<spend::SpendLimit, StoreError> {
        timed!(
            self,
            "upsert_model_limit",
            self.inner.upsert_model_limit(
                scope_type,
                scope_id,
                period,
                model,
                amount_cents,
                actor,
                now
            )
        )
    }

    async fn upsert_pooled_limit(
        &self,
        group: &str,
        amount_cents: Option<i64>,
        pooled: Option<spend::PooledBudget>,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<spend::SpendLimit, StoreError> {
        timed!(
            self,
            "upsert_pooled_limit",
            self.inner
                .upsert_pooled_limit(group, amount_cents, pooled, actor, now)
        )
    }

    async fn pool_totals(
        &self,
        groups: Vec<String>,
        now: DateTime<Utc>,
    ) -> Result<Vec<(String, u64, u64)>, StoreError> {
        timed!(self, "pool_totals", self.inner.pool_totals(groups, now))
    }

    async fn get_limit(&self, id: &str) -> Result<Option<spend::SpendLimit>, StoreError> {
        timed!(self, "get_limit", self.inner.get_limit(id))
    }

    async fn delete_limit(
        &self,
        id: &str,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<spend::SpendLimit>, StoreError> {
        timed!(
            self,
            "delete_limit",
            self.inner.delete_limit(id, actor, now)
        )
    }

    async fn list_limits(
        &self,
        scope_type: Option<spend::ScopeType>,
        after_id: Option<String>,
        before_id: Option<String>,
        limit: usize,
    ) -> Result<(Vec<spend::SpendLimit>, bool), StoreError> {
        timed!(
            self,
            "list_limits",
            self.inner
                .list_limits(scope_type, after_id, before_id, limit)
        )
    }

    async fn upsert_principal(
        &self,
        who: UserIdentity,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        timed!(
            self,
            "upsert_principal",
            self.inner.upsert_principal(who, now)
        )
    }

    async fn principals(&self, subs: Option<Vec<String>>) -> Result<Vec<UserIdentity>, StoreError> {
        timed!(self, "principals", self.inner.principals(subs))
    }

    async fn directory(
        &self,
        query: super::DirectoryQuery,
    ) -> Result<(Vec<super::DirectoryEntry>, bool), StoreError> {
        timed!(self, "directory", self.inner.directory(query))
    }

    async fn audit_page(
        &self,
        query: super::AuditQuery,
    ) -> Result<(Vec<crate::spend::AuditRow>, bool), StoreError> {
        timed!(self, "audit_page", self.inner.audit_page(query))
    }

    async fn append_audit(&self, row: crate::spend::AuditRow) -> Result<(), StoreError> {
        timed!(self, "append_audit", self.inner.append_audit(row))
    }

    async fn usage_by_upstream(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<(String, UsageTotals)>, StoreError> {
        timed!(
            self,
            "usage_by_upstream",
            self.inner.usage_by_upstream(from, to)
        )
    }

    async fn retention(
        &self,
        audit_before: DateTime<Utc>,
        spend_before: DateTime<Utc>,
        principals_before: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        timed!(
            self,
            "retention",
            self.inner
                .retention(audit_before, spend_before, principals_before)
        )
    }
}

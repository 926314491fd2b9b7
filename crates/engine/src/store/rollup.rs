//! The usage rollup: usage summed per UTC hour, session, principal, model and agent kind
//! (`usage_rollup`, migration 0008). Both stores add a batch's inserted rows to it in the
//! batch's transaction, with the sums made here, so a replayed batch adds nothing and the
//! rollup always equals its rows. Keys are applied in one sorted order, so two
//! transactions (two PostgreSQL replicas) never wait on each other's rollup rows in a
//! cycle.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::UsageRecord;

const HOUR_MS: i64 = 3_600_000;

/// An hour as stored: whole UTC hours since 1970-01-01 00:00.
pub fn hour_of(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis().div_euclid(HOUR_MS)
}

/// The start of a stored hour.
pub fn hour_start(hour: i64) -> DateTime<Utc> {
    super::convert::from_ms(hour.saturating_mul(HOUR_MS))
}

/// The summed columns, in the order both stores bind them after the key.
pub const SUM_COLUMNS: [&str; 8] = [
    "requests",
    "errors",
    "compactions",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_micro_usd",
];

/// The `DO UPDATE SET` of the rollup's upsert: each sum added saturating at `i64::MAX`
/// (an overflow would fail the batch, and with it the usage rows), the times widened.
/// `table` qualifies the stored row (`usage_rollup` on PostgreSQL, empty on SQLite).
pub fn upsert_set(table: &str) -> String {
    let t = if table.is_empty() {
        String::new()
    } else {
        format!("{table}.")
    };
    let mut set: Vec<String> = SUM_COLUMNS
        .iter()
        .map(|c| {
            format!(
                "{c} = CASE WHEN {t}{c} > 9223372036854775807 - excluded.{c} \
                 THEN 9223372036854775807 ELSE {t}{c} + excluded.{c} END"
            )
        })
        .collect();
    let (min, max) = if table.is_empty() {
        ("MIN", "MAX")
    } else {
        ("LEAST", "GREATEST")
    };
    set.push(format!("first_at = {min}({t}first_at, excluded.first_at)"));
    set.push(format!("last_at = {max}({t}last_at, excluded.last_at)"));
    set.join(", ")
}

/// What one rollup row is kept by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RollupKey {
    /// [`hour_of`] the requests summed.
    pub hour: i64,
    /// `""` for requests without a session.
    pub session_id: String,
    pub principal: String,
    pub model: String,
    pub subagent: bool,
}

/// What one rollup row sums.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RollupSums {
    pub requests: u64,
    pub errors: u64,
    pub compactions: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    /// 5-minute and 1-hour cache writes together.
    pub cache_write_tokens: u64,
    pub cost_micro_usd: u64,
    pub first_at_ms: i64,
    pub last_at_ms: i64,
}

impl RollupSums {
    /// Adds one usage row.
    pub fn add(&mut self, r: &UsageRecord) {
        let at = r.created_at.timestamp_millis();
        if self.requests == 0 {
            self.first_at_ms = at;
            self.last_at_ms = at;
        }
        self.requests += 1;
        self.errors += u64::from(r.status >= 400);
        self.compactions += u64::from(r.tags.is_compaction());
        self.input_tokens = self.input_tokens.saturating_add(r.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(r.output_tokens);
        self.cache_read_tokens = self.cache_read_tokens.saturating_add(r.cache_read_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_add(r.cache_write_5m_tokens)
            .saturating_add(r.cache_write_1h_tokens);
        self.cost_micro_usd = self.cost_micro_usd.saturating_add(r.cost_micro_usd);
        self.first_at_ms = self.first_at_ms.min(at);
        self.last_at_ms = self.last_at_ms.max(at);
    }

    /// Adds another sum of the same key (reading several rows back into one).
    pub fn merge(&mut self, o: &RollupSums) {
        if o.requests == 0 {
            return;
        }
        if self.requests == 0 {
            *self = o.clone();
            return;
        }
        self.requests += o.requests;
        self.errors += o.errors;
        self.compactions += o.compactions;
        self.input_tokens = self.input_tokens.saturating_add(o.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(o.output_tokens);
        self.cache_read_tokens = self.cache_read_tokens.saturating_add(o.cache_read_tokens);
        self.cache_write_tokens = self.cache_write_tokens.saturating_add(o.cache_write_tokens);
        self.cost_micro_usd = self.cost_micro_usd.saturating_add(o.cost_micro_usd);
        self.first_at_ms = self.first_at_ms.min(o.first_at_ms);
        self.last_at_ms = self.last_at_ms.max(o.last_at_ms);
    }
}

/// One stored rollup row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollupRow {
    pub key: RollupKey,
    pub sums: RollupSums,
}

/// The rollup additions of the rows a transaction inserted, in key order.
pub fn sums_of<'a>(
    rows: impl IntoIterator<Item = &'a UsageRecord>,
) -> BTreeMap<RollupKey, RollupSums> {
    let mut out: BTreeMap<RollupKey, RollupSums> = BTreeMap::new();
    for r in rows {
        let key = RollupKey {
            hour: hour_of(r.created_at),
            session_id: r.tags.session_id.clone().unwrap_or_default(),
            principal: r.principal.clone(),
            model: r.model.clone(),
            subagent: r.tags.is_subagent(),
        };
        out.entry(key).or_default().add(r);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::store::ClientTags;

    fn row(at_ms: i64, session: Option<&str>, agent: Option<&str>, cost: u64) -> UsageRecord {
        UsageRecord {
            request_id: format!("r{at_ms}"),
            row_key: 1,
            created_at: super::super::convert::from_ms(at_ms),
            principal: "p".into(),
            endpoint: "messages".into(),
            model: "m".into(),
            upstream: None,
            upstream_model: None,
            status: if cost == 0 { 500 } else { 200 },
            route_reason: "r".into(),
            stream: false,
            input_tokens: 10,
            output_tokens: 5,
            cache_read_tokens: 100,
            cache_write_5m_tokens: 1,
            cache_write_1h_tokens: 2,
            web_search_requests: 0,
            cost_micro_usd: cost,
            usage_source: "reported".into(),
            latency_ms: 1,
            ttfb_ms: None,
            client_disconnected: false,
            reservation_id: None,
            tags: ClientTags {
                session_id: session.map(Into::into),
                agent_id: agent.map(Into::into),
                ..Default::default()
            },
        }
    }

    #[test]
    fn rows_sum_by_hour_session_and_agent_kind() {
        let d = HOUR_MS;
        let rows = [
            row(d + 5, Some("s1"), None, 10),
            row(d + 9, Some("s1"), None, 0),
            row(d + 7, Some("s1"), Some("a1"), 3),
            row(2 * d, Some("s1"), None, 4),
            row(d + 1, None, None, 6),
        ];
        let sums = sums_of(&rows);
        assert_eq!(sums.len(), 4);
        let keys: Vec<_> = sums
            .keys()
            .map(|k| (k.hour, k.session_id.as_str(), k.subagent))
            .collect();
        assert_eq!(
            keys,
            [
                (1, "", false),
                (1, "s1", false),
                (1, "s1", true),
                (2, "s1", false)
            ]
        );
        let main = &sums.values().nth(1).unwrap();
        assert_eq!(
            (main.requests, main.errors, main.cost_micro_usd),
            (2, 1, 10)
        );
        assert_eq!((main.first_at_ms, main.last_at_ms), (d + 5, d + 9));
        assert_eq!(main.cache_write_tokens, 6);
        let mut merged = (*main).clone();
        merged.merge(sums.values().next().unwrap());
        assert_eq!((merged.requests, merged.first_at_ms), (3, d + 1));
    }

    #[test]
    fn hours_are_utc_and_negative_safe() {
        assert_eq!(hour_of(super::super::convert::from_ms(HOUR_MS - 1)), 0);
        assert_eq!(hour_of(super::super::convert::from_ms(HOUR_MS)), 1);
        assert_eq!(hour_of(super::super::convert::from_ms(-1)), -1);
        assert_eq!(hour_start(2).timestamp_millis(), 2 * HOUR_MS);
    }
}

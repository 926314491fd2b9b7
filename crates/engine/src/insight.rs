//! Usage insight: sessions and spend over time, summed from the usage rollup
//! ([`crate::store::rollup`]). Pure functions over rollup rows, so the desktop's
//! Projects and Sessions views, its charts, its export and the server's reports share
//! one arithmetic. What a project is (Claude Code's transcript index) is the desktop's
//! concern; here a session is only its id.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use crate::store::rollup::{RollupRow, RollupSums};

/// A stored millisecond time; the epoch if out of range.
pub fn from_ms(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

/// One Claude Code session's usage.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionSummary {
    pub session_id: String,
    /// Who sent it (one principal in practice; the first seen when several).
    pub principal: String,
    pub models: BTreeSet<String>,
    /// Everything, main agent and subagents.
    pub total: RollupSums,
    /// The subagents' share of [`SessionSummary::total`].
    pub subagent: RollupSums,
}

impl SessionSummary {
    pub fn first_at(&self) -> DateTime<Utc> {
        from_ms(self.total.first_at_ms)
    }

    pub fn last_at(&self) -> DateTime<Utc> {
        from_ms(self.total.last_at_ms)
    }
}

/// The share of the prompt read from the cache: cache reads over everything sent as
/// input (plain, cache read, cache write); `None` when nothing was sent.
pub fn cache_read_ratio(s: &RollupSums) -> Option<f64> {
    let all = s
        .input_tokens
        .saturating_add(s.cache_read_tokens)
        .saturating_add(s.cache_write_tokens);
    (all > 0).then(|| s.cache_read_tokens as f64 / all as f64)
}

/// The sessions in `rows` (rows without a session are left out), newest activity first.
pub fn sessions(rows: &[RollupRow]) -> Vec<SessionSummary> {
    let mut by_id: BTreeMap<&str, SessionSummary> = BTreeMap::new();
    for r in rows.iter().filter(|r| !r.key.session_id.is_empty()) {
        let s = by_id
            .entry(r.key.session_id.as_str())
            .or_insert_with(|| SessionSummary {
                session_id: r.key.session_id.clone(),
                principal: r.key.principal.clone(),
                ..Default::default()
            });
        s.models.insert(r.key.model.clone());
        s.total.merge(&r.sums);
        if r.key.subagent {
            s.subagent.merge(&r.sums);
        }
    }
    let mut out: Vec<SessionSummary> = by_id.into_values().collect();
    out.sort_by(|a, b| {
        b.total
            .last_at_ms
            .cmp(&a.total.last_at_ms)
            .then_with(|| a.session_id.cmp(&b.session_id))
    });
    out
}

/// Cost per day and per series for days `from_day..=to_day`: `series_of` names the series a
/// rollup row belongs to. Series by total cost, highest first; each holds one value per day.
pub fn daily_cost<'a>(
    rows: &'a [RollupRow],
    from_day: i64,
    to_day: i64,
    mut series_of: impl FnMut(&'a RollupRow) -> String,
) -> Vec<(String, Vec<u64>)> {
    let days = usize::try_from(to_day.saturating_sub(from_day).saturating_add(1)).unwrap_or(0);
    let mut series: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for r in rows {
        let Ok(at) = usize::try_from(r.key.day - from_day) else {
            continue;
        };
        if at >= days {
            continue;
        }
        let values = series.entry(series_of(r)).or_insert_with(|| vec![0; days]);
        values[at] = values[at].saturating_add(r.sums.cost_micro_usd);
    }
    let mut out: Vec<(String, Vec<u64>)> = series.into_iter().collect();
    out.sort_by_key(|(name, v)| (std::cmp::Reverse(v.iter().sum::<u64>()), name.clone()));
    out
}

/// Everything of each day summed, for days `from_day..=to_day` (the cache-read ratio per day).
pub fn per_day(rows: &[RollupRow], from_day: i64, to_day: i64) -> Vec<RollupSums> {
    let days = usize::try_from(to_day.saturating_sub(from_day).saturating_add(1)).unwrap_or(0);
    let mut out = vec![RollupSums::default(); days];
    for r in rows {
        if let Ok(at) = usize::try_from(r.key.day - from_day)
            && at < days
        {
            out[at].merge(&r.sums);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::store::rollup::RollupKey;

    fn row(day: i64, session: &str, model: &str, subagent: bool, cost: u64, at: i64) -> RollupRow {
        RollupRow {
            key: RollupKey {
                day,
                session_id: session.into(),
                principal: "p".into(),
                model: model.into(),
                subagent,
            },
            sums: RollupSums {
                requests: 1,
                input_tokens: 10,
                cache_read_tokens: 30,
                cost_micro_usd: cost,
                first_at_ms: at,
                last_at_ms: at,
                ..Default::default()
            },
        }
    }

    #[test]
    fn sessions_sum_main_and_subagents_newest_first() {
        let rows = [
            row(1, "a", "opus", false, 10, 100),
            row(1, "a", "haiku", true, 4, 150),
            row(2, "b", "opus", false, 7, 300),
            row(2, "", "opus", false, 99, 400),
        ];
        let s = sessions(&rows);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].session_id, "b");
        let a = &s[1];
        assert_eq!((a.total.cost_micro_usd, a.subagent.cost_micro_usd), (14, 4));
        assert_eq!((a.total.first_at_ms, a.total.last_at_ms), (100, 150));
        assert_eq!(a.models.iter().collect::<Vec<_>>(), ["haiku", "opus"]);
        assert_eq!(cache_read_ratio(&a.total), Some(0.75));
        assert_eq!(cache_read_ratio(&RollupSums::default()), None);
    }

    #[test]
    fn daily_series_fill_every_day_and_skip_outside() {
        let rows = [
            row(10, "a", "opus", false, 5, 0),
            row(12, "a", "opus", false, 6, 0),
            row(12, "a", "haiku", false, 20, 0),
            row(13, "a", "opus", false, 1000, 0),
            row(9, "a", "opus", false, 1000, 0),
        ];
        let d = daily_cost(&rows, 10, 12, |r| r.key.model.clone());
        assert_eq!(
            d,
            [
                ("haiku".to_owned(), vec![0, 0, 20]),
                ("opus".to_owned(), vec![5, 0, 6])
            ]
        );
        let per = per_day(&rows, 10, 12);
        assert_eq!(
            per.iter().map(|s| s.cost_micro_usd).collect::<Vec<_>>(),
            [5, 0, 26]
        );
    }
}

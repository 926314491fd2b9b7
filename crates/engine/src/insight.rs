//! Usage insight: sessions and spend over time, summed from the usage rollup
//! ([`crate::store::rollup`]). Pure functions over rollup rows, so the desktop's
//! Projects and Sessions views, its charts, its export and the server's reports share
//! one arithmetic. What a project is (Claude Code's transcript index) is the desktop's
//! concern; here a session is only its id.
//!
//! Days are the viewer's ([`Days`]: a fixed offset from UTC, as a browser or the OS reports
//! it now). The rollup keeps whole UTC hours, so a day is exact for offsets of whole hours
//! and rounded to the hour for the few zones with half- or quarter-hour offsets.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, NaiveDate, Utc};

use crate::store::rollup::{RollupRow, RollupSums, hour_of};

/// The most a time-zone offset may be, in minutes either side of UTC.
pub const MAX_OFFSET_MINUTES: i32 = 14 * 60;

/// Days as the viewer counts them: a fixed offset from UTC, in minutes east.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Days {
    pub offset_minutes: i32,
}

impl Days {
    /// `None` when the offset is beyond [`MAX_OFFSET_MINUTES`].
    pub fn new(offset_minutes: i32) -> Option<Days> {
        (offset_minutes.abs() <= MAX_OFFSET_MINUTES).then_some(Days { offset_minutes })
    }

    /// The local day (days since 1970-01-01 there) a stored hour falls in.
    pub fn of_hour(self, hour: i64) -> i64 {
        (hour * 60 + i64::from(self.offset_minutes)).div_euclid(24 * 60)
    }

    /// The local hour of the day (0–23) a stored hour falls in.
    pub fn hour_of_day(self, hour: i64) -> usize {
        let minute = (hour * 60 + i64::from(self.offset_minutes)).rem_euclid(24 * 60);
        usize::try_from(minute / 60).unwrap_or(0)
    }

    /// The local day of a time.
    pub fn of(self, at: DateTime<Utc>) -> i64 {
        self.of_hour(hour_of(at))
    }

    /// The first stored hour of a local day (its start rounded down to the hour).
    pub fn first_hour(self, day: i64) -> i64 {
        (day * 24 * 60 - i64::from(self.offset_minutes)).div_euclid(60)
    }

    /// The start of a local day, as a UTC time.
    pub fn start(self, day: i64) -> DateTime<Utc> {
        DateTime::UNIX_EPOCH + Duration::minutes(day * 24 * 60 - i64::from(self.offset_minutes))
    }

    /// A local day's date, `YYYY-MM-DD`.
    pub fn label(self, day: i64) -> String {
        NaiveDate::from_num_days_from_ce_opt(i32::try_from(day + 719_163).unwrap_or(719_163))
            .unwrap_or_default()
            .format("%Y-%m-%d")
            .to_string()
    }
}

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

/// Cost per local day and per series for days `from_day..=to_day`: `series_of` names the
/// series a rollup row belongs to. Series by total cost, highest first; each holds one value
/// per day.
pub fn daily_cost<'a>(
    rows: &'a [RollupRow],
    days: Days,
    from_day: i64,
    to_day: i64,
    mut series_of: impl FnMut(&'a RollupRow) -> String,
) -> Vec<(String, Vec<u64>)> {
    let n = usize::try_from(to_day.saturating_sub(from_day).saturating_add(1)).unwrap_or(0);
    let mut series: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for r in rows {
        let Ok(at) = usize::try_from(days.of_hour(r.key.hour) - from_day) else {
            continue;
        };
        if at >= n {
            continue;
        }
        let values = series.entry(series_of(r)).or_insert_with(|| vec![0; n]);
        values[at] = values[at].saturating_add(r.sums.cost_micro_usd);
    }
    let mut out: Vec<(String, Vec<u64>)> = series.into_iter().collect();
    out.sort_by_key(|(name, v)| (std::cmp::Reverse(v.iter().sum::<u64>()), name.clone()));
    out
}

/// Everything of each local day summed, for days `from_day..=to_day` (the cache-read ratio
/// per day).
pub fn per_day(rows: &[RollupRow], days: Days, from_day: i64, to_day: i64) -> Vec<RollupSums> {
    let n = usize::try_from(to_day.saturating_sub(from_day).saturating_add(1)).unwrap_or(0);
    let mut out = vec![RollupSums::default(); n];
    for r in rows {
        if let Ok(at) = usize::try_from(days.of_hour(r.key.hour) - from_day)
            && at < n
        {
            out[at].merge(&r.sums);
        }
    }
    out
}

/// One local day's usage per local hour of the day.
pub fn hourly(rows: &[RollupRow], days: Days, day: i64) -> [RollupSums; 24] {
    let mut out: [RollupSums; 24] = Default::default();
    for r in rows.iter().filter(|r| days.of_hour(r.key.hour) == day) {
        out[days.hour_of_day(r.key.hour)].merge(&r.sums);
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
                hour: day * 24 + 12,
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
        let utc = Days::default();
        let d = daily_cost(&rows, utc, 10, 12, |r| r.key.model.clone());
        assert_eq!(
            d,
            [
                ("haiku".to_owned(), vec![0, 0, 20]),
                ("opus".to_owned(), vec![5, 0, 6])
            ]
        );
        let per = per_day(&rows, utc, 10, 12);
        assert_eq!(
            per.iter().map(|s| s.cost_micro_usd).collect::<Vec<_>>(),
            [5, 0, 26]
        );
    }

    #[test]
    fn local_days_follow_the_offset() {
        let utc = Days::default();
        let tokyo = Days::new(9 * 60).unwrap();
        let new_york = Days::new(-5 * 60).unwrap();
        assert!(Days::new(15 * 60).is_none());
        // 1970-01-02 20:00 UTC is the 3rd in Tokyo and still the 2nd in New York.
        let h = 24 + 20;
        assert_eq!(
            (utc.of_hour(h), tokyo.of_hour(h), new_york.of_hour(h)),
            (1, 2, 1)
        );
        assert_eq!((tokyo.hour_of_day(h), new_york.hour_of_day(h)), (5, 15));
        assert_eq!(tokyo.first_hour(2), 24 + 15);
        assert_eq!(new_york.start(1).timestamp(), (24 + 5) * 3600);
        assert_eq!(utc.label(0), "1970-01-01");
        assert_eq!(utc.label(20_428), "2025-12-06");
        let rows = [row(1, "a", "opus", false, 5, 0)];
        let by_hour = hourly(&rows, tokyo, tokyo.of_hour(36));
        assert_eq!(by_hour[21].cost_micro_usd, 5);
    }
}

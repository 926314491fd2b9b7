//! `GET /v1/organizations/analytics/usage` (a Gatehouse extension beside the cost report):
//! usage and cost grouped by `day`, `user`, `group`, `model`, `upstream` or `session`
//! over at most 31 days (default the last 30), as JSON (`limit` rows, default 1000,
//! highest cost first; `has_more`) or `format=csv`. Identical reports asked within 15
//! seconds share one computation (`Gateway::admin_reports`).
//!
//! Sources, so the figures agree with the reports they stand beside: per day, person and
//! group the cost is people's settled spend (the daily spend rows of the cost report, so
//! `GET /v1/organizations/analytics/cost` gives the same amounts) and requests and tokens
//! are people's rows of the usage rollup; per model and session everything comes from the
//! rollup (every caller, client keys included); per upstream from the usage rows. A
//! person in several groups counts in each; one in none counts under `""`.

use std::collections::{BTreeMap, HashMap};

use axum::body::Body;
use chrono::{DateTime, Duration, Utc};
use http::Response;
use serde_json::{Value, json};

use super::{bad, iso, ok, param, store_failed};
use crate::error::ApiError;
use crate::gateway::Gateway;
use crate::spend::admin::sessions::time;
use crate::store::rollup::{RollupRow, RollupSums, hour_of};

const MAX_DAYS: i64 = 31;
/// Rows of a JSON report by default and at most (`limit`), highest cost first; a CSV holds
/// up to [`CSV_ROWS`]. `total` always covers every row.
const DEFAULT_ROWS: usize = 1000;
const MAX_ROWS: usize = 10_000;
const CSV_ROWS: usize = 100_000;
const COLUMNS: [&str; 9] = [
    "key",
    "requests",
    "errors",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_creation_tokens",
    "cost_micro_usd",
    "cost_usd",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GroupBy {
    Day,
    User,
    Group,
    Model,
    Upstream,
    Session,
}

impl GroupBy {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "day" => Self::Day,
            "user" => Self::User,
            "group" => Self::Group,
            "model" => Self::Model,
            "upstream" => Self::Upstream,
            "session" => Self::Session,
            _ => return None,
        })
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Day => "day",
            Self::User => "user",
            Self::Group => "group",
            Self::Model => "model",
            Self::Upstream => "upstream",
            Self::Session => "session",
        }
    }
}

/// A report's sums per key.
pub type Groups = BTreeMap<String, Sums>;

/// One group's sums.
#[derive(Debug, Default, Clone)]
pub struct Sums {
    requests: u64,
    errors: u64,
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
    cost: u64,
}

impl Sums {
    fn add_rollup(&mut self, s: &RollupSums, with_cost: bool) {
        self.requests += s.requests;
        self.errors += s.errors;
        self.input += s.input_tokens;
        self.output += s.output_tokens;
        self.cache_read += s.cache_read_tokens;
        self.cache_write += s.cache_write_tokens;
        if with_cost {
            self.cost += s.cost_micro_usd;
        }
    }

    fn json(&self, key: &str) -> Value {
        json!({
            "key": key,
            "requests": self.requests,
            "errors": self.errors,
            "input_tokens": self.input,
            "output_tokens": self.output,
            "cache_read_tokens": self.cache_read,
            "cache_creation_tokens": self.cache_write,
            "cost_micro_usd": self.cost,
            "cost_usd": format!("{}.{:06}", self.cost / 1_000_000, self.cost % 1_000_000),
        })
    }
}

pub async fn report(
    gw: &Gateway,
    q: &[(String, String)],
    request_id: &str,
) -> Result<Response<Body>, ApiError> {
    let now = gw.deps.clock.now();
    let by = param(q, "group_by")
        .map(|g| {
            GroupBy::parse(g).ok_or_else(|| {
                bad("group_by: must be one of day, user, group, model, upstream, session")
            })
        })
        .transpose()?
        .unwrap_or(GroupBy::Day);
    let csv = match param(q, "format") {
        None | Some("json") => false,
        Some("csv") => true,
        Some(_) => return Err(bad("format: must be json or csv")),
    };
    let until = time(q, "ending_at")?.unwrap_or(now);
    let start = time(q, "starting_at")?.unwrap_or(until - Duration::days(30));
    if start >= until {
        return Err(bad(
            "starting_at: must be before ending_at, which defaults to now",
        ));
    }
    if until - start > Duration::days(MAX_DAYS) {
        return Err(bad(&format!(
            "ending_at: the range may span at most {MAX_DAYS} days"
        )));
    }
    let limit = match param(q, "limit") {
        None => DEFAULT_ROWS,
        Some(v) => v
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_ROWS).contains(n))
            .ok_or_else(|| bad(&format!("limit: must be between 1 and {MAX_ROWS}")))?,
    };
    // Identical reports (many open consoles, a poll) within a few seconds share one
    // computation: the range's ends count by 15-second steps.
    let key = format!(
        "{}:{}:{}",
        by.as_str(),
        start.timestamp() / 15,
        until.timestamp() / 15
    );
    let groups = gw
        .admin_reports
        .get(&key, Option::is_some, || async {
            sums(gw, by, start, until)
                .await
                .ok()
                .map(std::sync::Arc::new)
        })
        .await
        .ok_or_else(|| ApiError::ServiceUnavailable("the usage report could not be read".into()))?;
    let mut total = Sums::default();
    for s in groups.values() {
        for (t, v) in [
            (&mut total.requests, s.requests),
            (&mut total.errors, s.errors),
            (&mut total.input, s.input),
            (&mut total.output, s.output),
            (&mut total.cache_read, s.cache_read),
            (&mut total.cache_write, s.cache_write),
            (&mut total.cost, s.cost),
        ] {
            *t = t.saturating_add(v);
        }
    }
    let mut rows: Vec<(&String, &Sums)> = groups.iter().collect();
    if by != GroupBy::Day {
        rows.sort_by(|a, b| b.1.cost.cmp(&a.1.cost).then_with(|| a.0.cmp(b.0)));
    }
    let more = rows.len() > if csv { CSV_ROWS } else { limit };
    rows.truncate(if csv { CSV_ROWS } else { limit });
    let data: Vec<Value> = rows.iter().map(|(k, s)| s.json(k)).collect();
    if csv {
        let name = format!(
            "gatehouse-usage-by-{}-{}-{}.csv",
            by.as_str(),
            start.date_naive(),
            until.date_naive()
        );
        return Ok(super::csv::response(
            &name,
            super::csv::document(&COLUMNS, &data),
        ));
    }
    Ok(ok(
        json!({
            "type": "usage_report",
            "group_by": by.as_str(),
            "starting_at": iso(start),
            "ending_at": iso(until),
            "data": data,
            "has_more": more,
            "total": total.json(""),
        }),
        request_id,
    ))
}

/// The sums per key of `by` over `[start, until)`.
async fn sums(
    gw: &Gateway,
    by: GroupBy,
    start: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<BTreeMap<String, Sums>, ApiError> {
    let mut out: BTreeMap<String, Sums> = BTreeMap::new();
    if by == GroupBy::Upstream {
        let rows = gw
            .store
            .usage_by_upstream(start, until)
            .await
            .map_err(store_failed)?;
        for (up, t) in rows {
            let s = out.entry(up).or_default();
            s.requests = t.requests;
            s.input = t.input_tokens;
            s.output = t.output_tokens;
            s.cost = t.cost_micro_usd;
        }
        return Ok(out);
    }
    let rollup = gw
        .store
        .usage_rollup(
            hour_of(start),
            hour_of(until - Duration::milliseconds(1)),
            None,
        )
        .await
        .map_err(store_failed)?;
    match by {
        GroupBy::Model | GroupBy::Session => {
            for r in &rollup {
                let key = if by == GroupBy::Model {
                    r.key.model.clone()
                } else if r.key.session_id.is_empty() {
                    continue;
                } else {
                    r.key.session_id.clone()
                };
                out.entry(key).or_default().add_rollup(&r.sums, true);
            }
            Ok(out)
        }
        _ => people_sums(gw, by, &rollup, start, until).await,
    }
}

/// Per day, person or group: people's rollup rows, cost from the daily spend rows.
async fn people_sums(
    gw: &Gateway,
    by: GroupBy,
    rollup: &[RollupRow],
    start: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<BTreeMap<String, Sums>, ApiError> {
    let first_day = crate::spend::Period::Daily.window(start).start;
    let spend = gw
        .store
        .daily_spend(first_day, until)
        .await
        .map_err(store_failed)?;
    let groups: HashMap<String, Vec<String>> = if by == GroupBy::Group {
        gw.store
            .principals(None)
            .await
            .map_err(store_failed)?
            .into_iter()
            .map(|p| (p.sub, p.groups))
            .collect()
    } else {
        HashMap::new()
    };
    let keys = |sub: &str, at: DateTime<Utc>| -> Vec<String> {
        match by {
            GroupBy::Day => vec![at.date_naive().to_string()],
            GroupBy::User => vec![sub.to_owned()],
            _ => match groups.get(sub).filter(|g| !g.is_empty()) {
                Some(g) => g.clone(),
                None => vec![String::new()],
            },
        }
    };
    let mut out: BTreeMap<String, Sums> = BTreeMap::new();
    if by == GroupBy::Day {
        let mut d = first_day;
        while d < until {
            out.entry(d.date_naive().to_string()).or_default();
            d += Duration::days(1);
        }
    }
    for r in rollup {
        let Some(sub) = r.key.principal.strip_prefix("user:") else {
            continue;
        };
        let at = DateTime::from_timestamp(r.key.hour * 3600, 0).unwrap_or(start);
        for k in keys(sub, at) {
            out.entry(k).or_default().add_rollup(&r.sums, false);
        }
    }
    for (sub, day, micro) in &spend {
        for k in keys(sub, *day) {
            let s = out.entry(k).or_default();
            s.cost = s.cost.saturating_add(*micro);
        }
    }
    Ok(out)
}

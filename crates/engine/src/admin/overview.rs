//! `GET /v1/organizations/overview`: the console's first page in one answer — spend today
//! and this month with the organisation's limits, requests and errors of the last 24
//! hours (by whole hours), the people nearest their caps, the last 30 days per day, spend
//! per model (30 days) and per upstream (7 days), and upstream health. Everything but the
//! upstreams' share comes from the usage rollup and the daily spend rows, never a scan of
//! a month of usage rows. Computed once for every caller for [`TTL`] (single
//! flight, [`crate::memo`]), so many open consoles cost one set of store reads.
//!
//! "Nearest their caps" is settled spend over each person's binding cap, for the people
//! who spent in the window (the daily spend rows: one read, not one per person).

use std::collections::HashMap;
use std::time::Duration;

use axum::body::Body;
use chrono::{DateTime, Utc};
use http::Response;
use serde_json::{Value, json};

use super::{iso, ok, store_failed};
use crate::error::ApiError;
use crate::gateway::Gateway;
use crate::spend::{Period, ScopeType, SpendLimit, binding_limit};
use crate::store::rollup::hour_of;

/// How long one overview is shared.
pub const TTL: Duration = Duration::from_secs(15);
const DAYS: i64 = 30;
const NEAREST: usize = 10;

/// The shared overview (an error is not kept).
pub struct Overview(crate::memo::Memo<Option<Value>>);

impl Default for Overview {
    fn default() -> Self {
        Self(crate::memo::Memo::new(TTL))
    }
}

pub async fn get(gw: &Gateway, request_id: &str) -> Result<Response<Body>, ApiError> {
    let v = gw
        .admin_overview
        .0
        .get_kept(Option::is_some, || async { build(gw).await.ok() })
        .await;
    match v {
        Some(v) => Ok(ok(v, request_id)),
        None => Err(ApiError::ServiceUnavailable(
            "the overview could not be read from the store".into(),
        )),
    }
}

async fn build(gw: &Gateway) -> Result<Value, ApiError> {
    let now = gw.deps.clock.now();
    let store = &gw.store;
    let day0 = Period::Daily.window(now).start;
    let first = day0 - chrono::Duration::days(DAYS - 1);
    let month = Period::Monthly.window(now);
    let limits = crate::spend::admin::all_limits(gw).await?;
    let from = first.min(month.start);
    // The last 7 days per upstream: the one figure read from the usage rows themselves
    // (the rollup has no upstream).
    let week = now - chrono::Duration::days(7);
    let (by_upstream, daily, rollup) = tokio::join!(
        store.usage_by_upstream(week, now + chrono::Duration::seconds(1)),
        store.daily_spend(from, day0 + chrono::Duration::days(1)),
        store.usage_rollup(hour_of(from), hour_of(now), None),
    );
    let daily = daily.map_err(store_failed)?;
    let rollup = rollup.map_err(store_failed)?;
    let since = |hour: i64| {
        rollup.iter().filter(move |r| r.key.hour >= hour).fold(
            (0u64, 0u64, 0u64),
            |(c, n, e), r| {
                (
                    c + r.sums.cost_micro_usd,
                    n + r.sums.requests,
                    e + r.sums.errors,
                )
            },
        )
    };
    let (today_cost, _, _) = since(hour_of(day0));
    let (month_cost, _, _) = since(hour_of(month.start));
    let (_, requests_24h, errors_24h) = since(hour_of(now) - 23);
    let rollup: Vec<_> = rollup
        .into_iter()
        .filter(|r| r.key.hour >= hour_of(first))
        .collect();
    let nearest = nearest(gw, &limits, &daily, now).await?;
    let org_limits: Vec<Value> = limits
        .iter()
        .filter(|l| l.scope_type == ScopeType::Organization)
        .map(|l| {
            let w = l.period.window(now);
            // Everyone's spend in the window, from the rows read (the last 30 days and this
            // month); not for a family's or a lifetime limit.
            let spent: Option<u64> = (l.model.is_none() && l.period != Period::Total).then(|| {
                daily
                    .iter()
                    .filter(|(_, d, _)| *d >= w.start && *d < w.reset)
                    .map(|(_, _, m)| *m)
                    .sum()
            });
            json!({"period": l.period.as_str(), "model": l.model.map(|m| m.as_str()),
                   "amount": l.amount_cents.map(|a| a.to_string()),
                   "per_person": true, "spent_micro_usd": spent,
                   "spend_limit_id": l.id, "resets_at": w.resets().map(iso)})
        })
        .collect();
    let totals = |(k, t): &(String, crate::store::UsageTotals), name: &str| {
        json!({name: k, "cost_micro_usd": t.cost_micro_usd, "requests": t.requests,
               "input_tokens": t.input_tokens, "output_tokens": t.output_tokens})
    };
    Ok(json!({
        "type": "overview",
        "generated_at": iso(now),
        "spend": {
            "today_micro_usd": today_cost,
            "month_micro_usd": month_cost,
            "organization_limits": org_limits,
        },
        "requests": {
            "last_24h": requests_24h,
            "errors_24h": errors_24h,
            "error_rate": if requests_24h == 0 { 0.0 }
                          else { errors_24h as f64 / requests_24h as f64 },
        },
        "nearest": nearest,
        "daily": per_day(&rollup, first),
        "by_model": by_model(&rollup).iter().map(|m| totals(m, "model")).collect::<Vec<_>>(),
        "by_upstream": by_upstream.map_err(store_failed)?.iter().map(|u| totals(u, "upstream")).collect::<Vec<_>>(),
        "upstreams": super::routing::upstreams(gw)["data"].clone(),
    }))
}

/// Totals per model from the rollup rows, highest cost first.
fn by_model(
    rollup: &[crate::store::rollup::RollupRow],
) -> Vec<(String, crate::store::UsageTotals)> {
    let mut m: HashMap<&str, crate::store::UsageTotals> = HashMap::new();
    for r in rollup {
        let t = m.entry(r.key.model.as_str()).or_default();
        t.requests += r.sums.requests;
        t.input_tokens += r.sums.input_tokens;
        t.output_tokens += r.sums.output_tokens;
        t.cost_micro_usd += r.sums.cost_micro_usd;
    }
    let mut out: Vec<(String, crate::store::UsageTotals)> =
        m.into_iter().map(|(k, t)| (k.to_owned(), t)).collect();
    out.sort_by(|a, b| {
        b.1.cost_micro_usd
            .cmp(&a.1.cost_micro_usd)
            .then_with(|| a.0.cmp(&b.0))
    });
    out.truncate(100);
    out
}

/// Every one of the last [`DAYS`] UTC days, oldest first, from the usage rollup.
fn per_day(rollup: &[crate::store::rollup::RollupRow], first: DateTime<Utc>) -> Vec<Value> {
    let mut days: Vec<(u64, u64, u64)> = vec![(0, 0, 0); DAYS as usize];
    let first_hour = crate::store::rollup::hour_of(first);
    for r in rollup {
        let Ok(i) = usize::try_from((r.key.hour - first_hour) / 24) else {
            continue;
        };
        if let Some(d) = days.get_mut(i) {
            d.0 += r.sums.cost_micro_usd;
            d.1 += r.sums.requests;
            d.2 += r.sums.errors;
        }
    }
    days.iter()
        .enumerate()
        .map(|(i, (cost, requests, errors))| {
            let date = (first + chrono::Duration::days(i as i64)).date_naive();
            json!({"date": date.to_string(), "cost_micro_usd": cost,
                   "requests": requests, "errors": errors})
        })
        .collect()
}

/// The people with the highest settled spend over their binding cap, daily and monthly.
async fn nearest(
    gw: &Gateway,
    limits: &[SpendLimit],
    daily: &[(String, DateTime<Utc>, u64)],
    now: DateTime<Utc>,
) -> Result<Vec<Value>, ApiError> {
    if limits.is_empty() {
        return Ok(Vec::new());
    }
    let mut spent: HashMap<(&str, &str), u64> = HashMap::new();
    for p in Period::ALL {
        let w = p.window(now);
        for (who, _, m) in daily
            .iter()
            .filter(|(_, d, _)| *d >= w.start && *d < w.reset)
        {
            *spent.entry((who.as_str(), p.as_str())).or_default() += m;
        }
    }
    let subs: Vec<String> = spent.keys().map(|(s, _)| (*s).to_owned()).collect();
    let people = gw
        .store
        .principals(Some(subs))
        .await
        .map_err(store_failed)?;
    let mode = gw.config.group_mode();
    let mut rows: Vec<(f64, Value)> = Vec::new();
    for who in &people {
        for p in Period::ALL {
            let Some(&micro) = spent.get(&(who.sub.as_str(), p.as_str())) else {
                continue;
            };
            let Some(l) = binding_limit(limits, p, None, &who.sub, &who.groups, mode) else {
                continue;
            };
            let Some(cents) = l.amount_cents else {
                continue;
            };
            let ratio = if cents <= 0 {
                1.0
            } else {
                micro as f64 / (cents as f64 * 10_000.0)
            };
            rows.push((
                ratio,
                json!({"user_id": who.sub, "email": who.email, "name": who.name,
                       "period": p.as_str(), "amount": cents.to_string(),
                       "spent_micro_usd": micro, "ratio": ratio,
                       "source": l.scope_type.as_str(), "spend_limit_id": l.id}),
            ));
        }
    }
    rows.sort_by(|a, b| b.0.total_cmp(&a.0));
    rows.truncate(NEAREST);
    Ok(rows.into_iter().map(|(_, v)| v).collect())
}

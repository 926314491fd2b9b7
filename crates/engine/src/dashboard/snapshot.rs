//! `GET /gatehouse/api/dashboard`: one JSON snapshot of what the dashboard shows.
//!
//! Usage comes from the store (UTC day, ISO week from Monday, month: the spend windows);
//! meters are the spend standings of the local key's subject (the same numbers
//! `/v1/me/spend` reports); refusals and upstream health are in memory. Request-level
//! detail (`recent`, `blocks`) is only for callers entitled to it, see [`super::detail`].
//! Never carries a key, token, email or principal id.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use crate::gateway::Gateway;
use crate::identity::LOCAL_SUBJECT;
use crate::spend::{Period, Standing, windows};
use crate::store::{StoreError, UsageRecord, UsageTotals};

/// Rows in `recent` and `blocks`.
pub const DETAIL_ROWS: usize = 50;
/// How long the snapshot waits for each store read.
const STORE_TIMEOUT: Duration = Duration::from_secs(2);

pub(super) fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

pub(super) async fn bounded<T>(
    f: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    tokio::time::timeout(STORE_TIMEOUT, f)
        .await
        .unwrap_or_else(|_| Err(StoreError::Database("timed out".into())))
}

pub(super) fn totals(t: &UsageTotals) -> Value {
    json!({
        "requests": t.requests,
        "input_tokens": t.input_tokens,
        "output_tokens": t.output_tokens,
        "cost_micro_usd": t.cost_micro_usd,
    })
}

fn recent_row(r: &UsageRecord) -> Value {
    json!({
        "at": iso(r.created_at),
        "request_id": r.request_id,
        "model": r.model,
        "upstream": r.upstream,
        "status": r.status,
        "stream": r.stream,
        "input_tokens": r.input_tokens,
        "output_tokens": r.output_tokens,
        "cost_micro_usd": r.cost_micro_usd,
        "route_reason": r.route_reason,
        "latency_ms": r.latency_ms,
    })
}

/// One spend meter; `utilization` is `null` without a cap (as in `/v1/me/spend`).
pub fn meter(s: &Standing) -> Value {
    json!({
        "period": s.period.as_str(),
        "limit_micro_usd": s.cap_cents.map(|c| c.max(0).saturating_mul(10_000)),
        "spent_micro_usd": s.spent_micro,
        "utilization": s.cap_cents.map(|_| (s.utilization() * 10_000.0).round() / 10_000.0),
        "resets_at": s.reset.map(iso),
    })
}

/// Standings of the local key's subject, when this gateway has a local key and spend
/// caps are on (without caps nothing is reserved, so the standings would read zero).
pub(super) async fn meters(gw: &Gateway, now: DateTime<Utc>) -> Result<Vec<Value>, StoreError> {
    let Some(spend) = gw.config.spend.as_ref().filter(|_| gw.config.local_key) else {
        return Ok(Vec::new());
    };
    let standings = bounded(
        gw.store
            .standings(LOCAL_SUBJECT, &[], spend.group_mode, now),
    )
    .await?;
    Ok(Period::ALL
        .iter()
        .filter_map(|p| standings.iter().find(|s| s.period == *p))
        .map(meter)
        .collect())
}

/// The snapshot; `detail` adds the recent requests, the refusals and upstream hosts.
pub async fn build(gw: &Gateway, detail: bool) -> Value {
    let now = gw.deps.clock.now();
    let [day, week, month] = windows(now);
    let store = &gw.store;
    let (today, this_week, this_month, by_model, meters, recent) = tokio::join!(
        bounded(store.usage_totals(day.start)),
        bounded(store.usage_totals(week.start)),
        bounded(store.usage_totals(month.start)),
        bounded(store.usage_by_model(month.start)),
        meters(gw, now),
        async {
            if detail {
                bounded(store.recent_usage(DETAIL_ROWS)).await
            } else {
                Ok(Vec::new())
            }
        },
    );
    let ready = today.is_ok()
        && this_week.is_ok()
        && this_month.is_ok()
        && by_model.is_ok()
        && meters.is_ok()
        && recent.is_ok();
    if !ready {
        tracing::warn!("dashboard: a store read failed; usage figures are left out");
    }
    let blocks: Vec<Value> = if detail {
        gw.refusals
            .recent(DETAIL_ROWS)
            .iter()
            .map(|b| b.to_json())
            .collect()
    } else {
        Vec::new()
    };
    // Conversations whose prompt cache broke, with the likely cause (detail only: they
    // name sessions).
    let cache_breaks = if detail {
        gw.conversations.recent_breaks(DETAIL_ROWS)
    } else {
        Vec::new()
    };
    let mode = if gw.local.app().is_some() {
        "desktop"
    } else {
        "server"
    };
    json!({
        "server": {
            "version": env!("CARGO_PKG_VERSION"),
            "mode": mode,
            "started_at": iso(gw.started_at),
            "store": gw.store.backend(),
            "ready": ready,
            "paused": gw.local.paused(),
        },
        "detail": detail,
        "usage": {
            "today": totals(&today.unwrap_or_default()),
            "week": totals(&this_week.unwrap_or_default()),
            "month": totals(&this_month.unwrap_or_default()),
        },
        "by_model": by_model.unwrap_or_default().iter().map(|(model, t)| {
            let mut v = totals(t);
            v["model"] = json!(model);
            v
        }).collect::<Vec<_>>(),
        "meters": meters.unwrap_or_default(),
        "recent": recent.unwrap_or_default().iter().map(recent_row).collect::<Vec<_>>(),
        "blocks": blocks,
        "cache_breaks": cache_breaks,
        // Prompt tokens per upstream and model since start: the cache-read ratio.
        "prompt_cache": gw.conversations.tallies(),
        // Where each upstream is, only with detail.
        "upstreams": upstreams(gw, detail),
    })
}

/// Upstream health, each pooled upstream with its keys (ids and states, never values).
pub fn upstreams(gw: &Gateway, detail: bool) -> Vec<Value> {
    let mut list = gw.upstreams.health.to_json(detail);
    let ups = &gw.upstreams;
    for (up, pool) in ups.list.iter().zip(&ups.key_pools) {
        let Some(pool) = pool else { continue };
        if let Some(entry) = list.iter_mut().find(|e| e["name"] == up.name.as_str()) {
            entry["keys"] = Value::Array(pool.to_json());
        }
    }
    list
}

//! `GET /v1/organizations/analytics/sessions` (a Gatehouse extension beside the cost
//! report, for the same admin credentials): Claude Code sessions with who ran them, when,
//! which models, tokens, cost and the subagents' share, from the usage rollup.
//!
//! Query: `starting_at` / `ending_at` (RFC 3339; the last 7 days by default, at most 31
//! days; sessions active in the range, by whole UTC hours), `actor_ids[]` (people, by `sub`; at most 100), `limit` (1–1000,
//! default 100) and `page` (the previous answer's `next_page`). Newest activity first.
//! Amounts are cents with six decimals, as in the cost report.

use axum::body::Body;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Duration, Utc};
use http::Response;
use serde_json::{Value, json};

use super::cost::amount;
use super::{bad, ok, page_limit, store_failed};
use crate::error::ApiError;
use crate::gateway::Gateway;
use crate::insight::{self, SessionSummary};
use crate::store::rollup::hour_of;

/// The path.
pub const SESSIONS: &str = "/v1/organizations/analytics/sessions";
const MAX_DAYS: i64 = 31;

pub(crate) fn time(q: &[(String, String)], name: &str) -> Result<Option<DateTime<Utc>>, ApiError> {
    q.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| {
            DateTime::parse_from_rfc3339(v)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|_| bad(&format!("{name}: must be an RFC 3339 time")))
        })
        .transpose()
}

/// Who a rollup principal is, in the Admin API's actor shape.
fn actor(principal: &str) -> Value {
    match principal.split_once(':') {
        Some(("user", sub)) => json!({"type": "user_actor", "user_id": sub}),
        Some(("key", id)) => json!({"type": "api_key_actor", "api_key_id": id}),
        Some(("workload", id)) => json!({"type": "workload_actor", "workload_id": id}),
        _ => json!({"type": "unknown_actor", "id": principal}),
    }
}

pub(crate) fn row(s: &SessionSummary) -> Value {
    json!({
        "type": "session",
        "session_id": s.session_id,
        "actor": actor(&s.principal),
        "first_at": s.first_at(),
        "last_at": s.last_at(),
        "models": s.models,
        "requests": s.total.requests,
        "errors": s.total.errors,
        "compactions": s.total.compactions,
        "input_tokens": s.total.input_tokens,
        "output_tokens": s.total.output_tokens,
        "cache_read_tokens": s.total.cache_read_tokens,
        "cache_write_tokens": s.total.cache_write_tokens,
        "cache_read_ratio": insight::cache_read_ratio(&s.total),
        "cost": amount(s.total.cost_micro_usd),
        "subagent_requests": s.subagent.requests,
        "subagent_cost": amount(s.subagent.cost_micro_usd),
    })
}

/// The page token: the last row's `(last_at ms, session id)`.
fn cursor(s: &SessionSummary) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}:{}", s.total.last_at_ms, s.session_id))
}

fn after(page: &str) -> Result<(i64, String), ApiError> {
    let stale = || bad("page: not a page token of this report; start again without page");
    let text = URL_SAFE_NO_PAD
        .decode(page.trim_end_matches('='))
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(stale)?;
    let (ms, id) = text.split_once(':').ok_or_else(stale)?;
    Ok((ms.parse().map_err(|_| stale())?, id.to_owned()))
}

pub async fn report(
    gw: &Gateway,
    q: &[(String, String)],
    request_id: &str,
    now: DateTime<Utc>,
) -> Result<Response<Body>, ApiError> {
    let until = time(q, "ending_at")?.unwrap_or(now);
    let start = time(q, "starting_at")?.unwrap_or(until - Duration::days(7));
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
    let actors: Vec<String> = q
        .iter()
        .filter(|(k, _)| k == "actor_ids[]")
        .map(|(_, v)| format!("user:{v}"))
        .collect();
    if actors.len() > 100 {
        return Err(bad("actor_ids[]: at most 100 entries per request"));
    }
    let limit = page_limit(q, 100)?;
    let page = q
        .iter()
        .find(|(k, _)| k == "page")
        .map(|(_, v)| after(v))
        .transpose()?;
    let rows = gw
        .store
        .usage_rollup(hour_of(start), hour_of(until), None)
        .await
        .map_err(store_failed)?;
    let mut sessions: Vec<SessionSummary> = insight::sessions(&rows)
        .into_iter()
        .filter(|s| actors.is_empty() || actors.contains(&s.principal))
        .collect();
    if let Some((ms, id)) = page {
        // After the cursor in the report's order: newest first, then by id.
        sessions.retain(|s| {
            s.total.last_at_ms < ms
                || (s.total.last_at_ms == ms && s.session_id.as_str() > id.as_str())
        });
    }
    let has_more = sessions.len() > limit;
    sessions.truncate(limit);
    let next = has_more.then(|| sessions.last().map(cursor)).flatten();
    Ok(ok(
        json!({
            "data": sessions.iter().map(row).collect::<Vec<_>>(),
            "has_more": has_more,
            "next_page": next,
        }),
        request_id,
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn actors_amounts_and_page_tokens() {
        assert_eq!(actor("user:alice")["user_id"], "alice");
        assert_eq!(actor("key:ci")["api_key_id"], "ci");
        assert_eq!(amount(1_234_567), "123.456700");
        let s = SessionSummary {
            session_id: "s-1".into(),
            total: crate::store::rollup::RollupSums {
                last_at_ms: 42,
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(after(&cursor(&s)).unwrap(), (42, "s-1".to_owned()));
        assert!(after("not-a-token!").is_err());
    }
}

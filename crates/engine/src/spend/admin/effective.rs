//! `GET /v1/organizations/spend_limits/effective`: one `SpendSummary` row per person and
//! period, in the reference's shape (`scope`, `groups`, `actor`, `amount`, `currency`,
//! `period`, `source`, `spend_limit_id`, `period_to_date_spend`), with Gatehouse's exact
//! micro-USD amounts and the reset time as additions.
//!
//! Query: `user_ids[]` (at most 100: exactly those people, in that order, known or not),
//! `period[]`, `q` (matches id, email or name), `sort=spend_desc` (needs exactly one
//! period), `limit` (1-1000, default 20) and `page` (the `next_page` of the previous answer).
//! Without `user_ids[]` the people listed are those in the identity directory.

use axum::body::Body;
use http::Response;
use serde_json::{Value, json};

use super::{bad, ok, page_limit, unavailable};
use crate::error::ApiError;
use crate::gateway::Gateway;
use crate::identity::user::UserIdentity;
use crate::spend::{Period, SpendLimit, Standing, binding_limit};

/// Cents with up to three decimals and no trailing zeros, as the reference prints
/// `period_to_date_spend` (`"0"`, `"12.5"`, `"1234.001"`).
pub fn cents_text(micro: u64) -> String {
    let thousandths = micro.saturating_add(5) / 10;
    let text = format!("{}.{:03}", thousandths / 1000, thousandths % 1000);
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

struct Query {
    limit: usize,
    periods: Vec<Period>,
    users: Vec<String>,
    needle: Option<String>,
    spend_desc: bool,
    offset: usize,
}

fn parse(q: &[(String, String)]) -> Result<Query, ApiError> {
    let all = |k: &str| -> Vec<String> {
        q.iter()
            .filter(|(n, _)| n == k || n == &format!("{k}[]"))
            .map(|(_, v)| v.clone())
            .collect()
    };
    let one = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let limit = page_limit(q, 20)?;
    let mut periods = Vec::new();
    for p in all("period") {
        let p = Period::parse(&p)
            .ok_or_else(|| bad("period[]: must be one of daily, weekly, monthly"))?;
        if !periods.contains(&p) {
            periods.push(p);
        }
    }
    if periods.is_empty() {
        periods = Period::ALL.to_vec();
    }
    let users = all("user_ids");
    if users.len() > 100 {
        return Err(bad("user_ids[]: at most 100 entries per request"));
    }
    let needle = one("q");
    if needle.as_ref().is_some_and(|n| n.chars().count() > 256) {
        return Err(bad("q: too long"));
    }
    let spend_desc = match one("sort").as_deref() {
        None => false,
        Some("spend_desc") => true,
        Some(_) => return Err(bad("sort: must be spend_desc")),
    };
    if spend_desc && periods.len() != 1 {
        return Err(bad("sort=spend_desc requires exactly one period[]"));
    }
    // The cursor is an offset; one whose page end cannot be counted is not a cursor.
    let offset = match one("page").map(|p| p.parse::<usize>()) {
        None => 0,
        Some(Ok(o)) if o.checked_add(limit).is_some() => o,
        Some(_) => return Err(bad("page: invalid page token")),
    };
    Ok(Query {
        limit,
        periods,
        users,
        needle: needle.map(|n| n.to_lowercase()),
        spend_desc,
        offset,
    })
}

/// Every stored limit (the binding one decides `source` and `spend_limit_id`).
async fn all_limits(gw: &Gateway) -> Result<Vec<SpendLimit>, ApiError> {
    let mut out: Vec<SpendLimit> = Vec::new();
    loop {
        let after = out.last().map(|l| l.id.clone());
        let (page, more) = gw
            .store
            .list_limits(None, after, None, 1000)
            .await
            .map_err(|_| unavailable())?;
        out.extend(page);
        if !more {
            return Ok(out);
        }
    }
}

/// The people to report: exactly `user_ids[]` (unknown ones with no name and no groups),
/// else the identity directory filtered by `q`.
async fn people(gw: &Gateway, q: &Query) -> Result<Vec<UserIdentity>, ApiError> {
    let known = gw
        .store
        .principals((!q.users.is_empty()).then(|| q.users.clone()))
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "identity directory unavailable");
            unavailable()
        })?;
    if !q.users.is_empty() {
        return Ok(q
            .users
            .iter()
            .map(|sub| {
                known
                    .iter()
                    .find(|p| &p.sub == sub)
                    .cloned()
                    .unwrap_or_else(|| UserIdentity {
                        sub: sub.clone(),
                        email: None,
                        name: None,
                        groups: Vec::new(),
                    })
            })
            .collect());
    }
    Ok(known
        .into_iter()
        .filter(|who| {
            q.needle.as_ref().is_none_or(|n| {
                let hay = format!(
                    "{} {} {}",
                    who.sub,
                    who.email.as_deref().unwrap_or_default(),
                    who.name.as_deref().unwrap_or_default()
                );
                hay.to_lowercase().contains(n)
            })
        })
        .collect())
}

fn row(who: &UserIdentity, s: &Standing, binding: Option<&SpendLimit>) -> Value {
    let source = binding.map(|l| l.to_json()["scope"].clone());
    json!({
        "scope": {"type": "user", "user_id": who.sub},
        "groups": who.groups,
        "actor": {
            "type": "user_actor",
            "user_id": who.sub,
            "name": who.name,
            "email_address": who.email,
            "deleted": false,
        },
        "amount": binding.and_then(|l| l.amount_cents).map(|a| a.to_string()),
        "currency": "USD",
        "period": s.period.as_str(),
        "source": source,
        "spend_limit_id": binding.map(|l| l.id.clone()),
        "period_to_date_spend": cents_text(s.spent_micro),
        "spent_micro_usd": s.spent_micro,
        "reserved_micro_usd": s.reserved_micro,
        "resets_at": s.reset.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    })
}

pub async fn effective(
    gw: &Gateway,
    query: &[(String, String)],
    request_id: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Response<Body>, ApiError> {
    let q = parse(query)?;
    let people = people(gw, &q).await?;
    let limits = all_limits(gw).await?;
    let mode = gw.config.group_mode();
    // One person's rows stay together: (spend of the sorted period, rows).
    let mut found: Vec<(u64, Vec<Value>)> = Vec::new();
    for who in &people {
        let standings = gw
            .store
            .standings(&who.sub, &who.groups, mode, now)
            .await
            .map_err(|_| unavailable())?;
        let mut rows = Vec::new();
        let mut key = 0;
        for p in &q.periods {
            if let Some(s) = standings.iter().find(|s| s.period == *p) {
                key = key.max(s.spent_micro);
                let binding = binding_limit(&limits, *p, &who.sub, &who.groups, mode);
                rows.push(row(who, s, binding));
            }
        }
        found.push((key, rows));
    }
    if !q.users.is_empty() {
        let data: Vec<Value> = found.into_iter().flat_map(|(_, r)| r).collect();
        return Ok(ok(
            json!({"data": data, "next_page": null, "has_more": false}),
            request_id,
        ));
    }
    if q.spend_desc {
        found.sort_by_key(|r| std::cmp::Reverse(r.0));
    }
    let end = q.offset.saturating_add(q.limit);
    let more = found.len() > end;
    let data: Vec<Value> = found
        .into_iter()
        .skip(q.offset)
        .take(q.limit)
        .flat_map(|(_, r)| r)
        .collect();
    let next = more.then(|| end.to_string());
    Ok(ok(
        json!({"data": data, "next_page": next, "has_more": more}),
        request_id,
    ))
}

#[cfg(test)]
mod tests {
    use super::cents_text;

    #[test]
    fn cents_print_as_the_reference_prints_them() {
        assert_eq!(cents_text(0), "0");
        assert_eq!(cents_text(10_000), "1");
        assert_eq!(cents_text(1_000_000), "100");
        assert_eq!(cents_text(125_000), "12.5");
        assert_eq!(cents_text(12_345_674), "1234.567");
        assert_eq!(cents_text(4), "0");
        assert_eq!(cents_text(5), "0.001");
    }
}

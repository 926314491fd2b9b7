//! `GET /v1/organizations/analytics/cost`: the reference's cost report over the spend
//! rows (each person's settled spend per UTC day), in the Admin API's cost-report shape:
//! one bucket per day or for the whole range, optionally per person (`group_by[]=actor`)
//! and per IdP group (`group_by[]=rbac_group_id`, each person's spend counted in full in
//! each of their groups, as the reference counts it), ordered by amount (or by day), in
//! pages with an opaque keyset `page` token bound to the other parameters.
//!
//! Groups are the ones the identity directory holds for the person now (the reference
//! keeps the groups held on each day); amounts are cents with six decimals.

use std::cmp::Ordering;

use axum::body::Body;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Duration, NaiveDate, Utc};
use http::Response;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::cost_query::{CostQuery, parse};
use super::{bad, ok, store_failed};
use crate::error::ApiError;
use crate::gateway::Gateway;

/// One report row before it is rendered: (person or "", group or "", day, micro-USD).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    person: String,
    group: String,
    day: NaiveDate,
    micro: u64,
}

/// The `page` token: the last row of the previous page and the request it belongs to.
#[derive(Debug, Serialize, Deserialize)]
struct Cursor {
    c: String,
    p: String,
    g: String,
    d: String,
    q: String,
}

/// Cents with six decimals, as the reference prints `round(sum(cents), 6)`.
pub(super) fn amount(micro: u64) -> String {
    format!("{}.{:04}00", micro / 10_000, micro % 10_000)
}

/// Back from [`amount`] (at most micro-USD precision is kept).
fn micro_of(text: &str) -> Option<u64> {
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    let whole: u64 = whole.parse().ok()?;
    let frac = format!("{frac:0<4}");
    let frac: u64 = frac.get(..4)?.parse().ok()?;
    whole.checked_mul(10_000)?.checked_add(frac)
}

/// The order rows are reported in: by day first with `order_by=time` (daily buckets),
/// then by amount (descending under `order_by=time`), then person, group, day.
fn order(q: &CostQuery, a: &Row, b: &Row) -> Ordering {
    let dir = |o: Ordering| if q.ascending { o } else { o.reverse() };
    let by_day = if q.by_time {
        dir(a.day.cmp(&b.day))
    } else {
        Ordering::Equal
    };
    let by_amount = if q.by_time {
        b.micro.cmp(&a.micro)
    } else {
        dir(a.micro.cmp(&b.micro))
    };
    by_day
        .then(by_amount)
        .then_with(|| a.person.cmp(&b.person))
        .then_with(|| a.group.cmp(&b.group))
        .then_with(|| a.day.cmp(&b.day))
}

/// What a page token is bound to: every parameter but `page`, `limit` and `beta`, and
/// whether the range was still changing.
fn fingerprint(query: &[(String, String)], still_changing: bool) -> String {
    let mut kept: Vec<&(String, String)> = query
        .iter()
        .filter(|(k, _)| !["page", "limit", "beta"].contains(&k.as_str()))
        .collect();
    kept.sort();
    let text = json!([kept, still_changing]).to_string();
    URL_SAFE_NO_PAD.encode(Sha256::digest(text.as_bytes()))
}

fn start_of(day: NaiveDate) -> DateTime<Utc> {
    day.and_hms_opt(0, 0, 0)
        .map_or_else(Utc::now, |t| t.and_utc())
}

/// The rows of the report, summed per (person, group, day) as the query groups them.
async fn rows(gw: &Gateway, q: &CostQuery) -> Result<Vec<Row>, ApiError> {
    let spend = gw
        .store
        .daily_spend(start_of(q.first_day), start_of(q.end_day))
        .await
        .map_err(store_failed)?;
    let people: std::collections::HashMap<String, Vec<String>> =
        if q.by_group || !q.group_ids.is_empty() {
            gw.store
                .principals(None)
                .await
                .map_err(store_failed)?
                .into_iter()
                .map(|p| (p.sub, p.groups))
                .collect()
        } else {
            Default::default()
        };
    let mut sums: std::collections::BTreeMap<(String, String, NaiveDate), u64> = Default::default();
    for (sub, at, micro) in spend {
        if !q.actor_ids.is_empty() && !q.actor_ids.contains(&sub) {
            continue;
        }
        let held: &[String] = people.get(&sub).map_or(&[], Vec::as_slice);
        if !q.group_ids.is_empty() && !held.iter().any(|g| q.group_ids.contains(g)) {
            continue;
        }
        let mut groups: Vec<String> = if q.by_group {
            held.iter()
                .filter(|g| q.group_ids.is_empty() || q.group_ids.contains(g))
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        if groups.is_empty() {
            groups.push(String::new());
        }
        let person = if q.by_actor { sub } else { String::new() };
        let day = if q.daily {
            at.date_naive()
        } else {
            q.first_day
        };
        for g in groups {
            let e = sums.entry((person.clone(), g, day)).or_default();
            *e = e.saturating_add(micro);
        }
    }
    Ok(sums
        .into_iter()
        .map(|((person, group, day), micro)| Row {
            person,
            group,
            day,
            micro,
        })
        .collect())
}

fn render(q: &CostQuery, r: &Row, who: Option<&crate::identity::UserIdentity>) -> Value {
    let end = if q.daily {
        r.day + Duration::days(1)
    } else {
        q.end_day
    };
    let actor = q.by_actor.then(|| {
        json!({"type": "user_actor", "user_id": r.person,
               "email_address": who.and_then(|w| w.email.clone()),
               "name": who.and_then(|w| w.name.clone()), "deleted": false})
    });
    let group = (!r.group.is_empty()).then(|| r.group.clone());
    json!({
        "starting_at": format!("{}T00:00:00Z", r.day),
        "ending_at": format!("{end}T00:00:00Z"),
        "group": {
            "product": null, "model": null, "context_window": null, "inference_geo": null,
            "speed": null, "slack_channel_id": null, "claude_tag_category": null,
            "claude_tag_user_id": null, "rbac_group_id": group, "workspace_id": null,
            "service_tier": null, "user_profile_id": null, "agent_id": null,
            "environment_id": null, "deployment_id": null, "session_id": null,
            "actor": actor, "actor_type": null, "api_key_id": null, "cost_type": null,
            "token_type": null,
        },
        "cost": {"currency": "USD", "amount": amount(r.micro), "list_amount": amount(r.micro),
                 "requests": null},
    })
}

const STALE_PAGE: &str = "page: invalid page token, one from a request with other parameters, \
     or one made before the range's last day was over; start again without page";

pub async fn report(
    gw: &Gateway,
    query: &[(String, String)],
    request_id: &str,
    now: DateTime<Utc>,
) -> Result<Response<Body>, ApiError> {
    let q = parse(query, now)?;
    let bound = fingerprint(query, q.still_changing);
    let after = match &q.page {
        None => None,
        Some(p) => {
            let c = URL_SAFE_NO_PAD
                .decode(p.trim_end_matches('='))
                .ok()
                .and_then(|b| serde_json::from_slice::<Cursor>(&b).ok())
                .filter(|c| c.q == bound)
                .ok_or_else(|| bad(STALE_PAGE))?;
            if q.still_changing {
                return Err(bad(&still_changing(&q, now)));
            }
            let day = c.d.parse::<NaiveDate>().map_err(|_| bad(STALE_PAGE))?;
            let micro = micro_of(&c.c).ok_or_else(|| bad(STALE_PAGE))?;
            Some(Row {
                person: c.p,
                group: c.g,
                day,
                micro,
            })
        }
    };
    let mut found = rows(gw, &q).await?;
    found.sort_by(|a, b| order(&q, a, b));
    if let Some(after) = &after {
        found.retain(|r| order(&q, r, after) == Ordering::Greater);
    }
    let more = found.len() > q.limit;
    found.truncate(q.limit);
    let people = if q.by_actor && !found.is_empty() {
        let subs = found.iter().map(|r| r.person.clone()).collect();
        gw.store
            .principals(Some(subs))
            .await
            .map_err(store_failed)?
    } else {
        Vec::new()
    };
    let data: Vec<Value> = found
        .iter()
        .map(|r| render(&q, r, people.iter().find(|p| p.sub == r.person)))
        .collect();
    let next = found.last().filter(|_| more).map(|r| {
        let c = Cursor {
            c: amount(r.micro),
            p: r.person.clone(),
            g: r.group.clone(),
            d: r.day.to_string(),
            q: bound.clone(),
        };
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&c).unwrap_or_default())
    });
    Ok(ok(
        json!({"data": data, "has_more": more, "next_page": next,
               "data_refreshed_at": now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)}),
        request_id,
    ))
}

/// The reference's refusal of a page over days whose amounts still change.
fn still_changing(q: &CostQuery, now: DateTime<Utc>) -> String {
    let settled = (now - Duration::minutes(5)).date_naive();
    let how = if q.first_day < settled {
        format!("Start again with ending_at at {settled}T00:00:00Z or earlier, or read")
    } else {
        "Read".to_owned()
    };
    format!(
        "page: a range that includes today (UTC), or a day that ended less than 5 minutes ago, \
         can't be read in pages, because its amounts are still changing and rows could be \
         skipped or repeated. {how} the range in one page (limit up to 1000; if it has more \
         rows, split the developers across calls with actor_ids[], up to 100 a call)"
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn amounts_are_cents_with_six_decimals() {
        assert_eq!(amount(0), "0.000000");
        assert_eq!(amount(123_456), "12.345600");
        assert_eq!(micro_of("12.345600"), Some(123_456));
        assert_eq!(micro_of("12"), Some(120_000));
        assert_eq!(micro_of("x"), None);
    }
}

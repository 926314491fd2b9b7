//! `GET /v1/organizations/spend_limits/effective`: one `SpendSummary` row per person and
//! period, in the reference's shape (`scope`, `groups`, `actor`, `amount`, `currency`,
//! `period`, `source`, `spend_limit_id`, `period_to_date_spend`), with Gatehouse's exact
//! micro-USD amounts and the reset time as additions. Two more Gatehouse extensions: each
//! row names its model family (`model`, `null`: every model), and a person bound by a
//! `total` cap or by a family's cap has a row for it too (`period: "total"` with
//! `resets_at: null`; `model: "opus"` with that family's spend and cap).
//!
//! Query: `user_ids[]` (at most 100: exactly those people, in that order, known or not),
//! `period[]` (default: every period, `total` included), `q` (matches id, email or name), `sort=spend_desc` (needs exactly one
//! period), `limit` (1-1000, default 20) and `page` (the `next_page` of the previous answer:
//! a keyset cursor as the reference's, base64url JSON `{"p": <last user id>}`, or with
//! `sort=spend_desc` `{"p", "c": <their cents>, "s": true}`, so a page never repeats or
//! skips a person when others are added meanwhile). Without `user_ids[]` the people listed
//! are those in the identity directory, in user id order.

use axum::body::Body;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::Response;
use serde::{Deserialize, Serialize};
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
    after: Option<Cursor>,
}

/// The `page` token: the last person of the previous page (and, sorted by spend, their
/// spend in cents).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Cursor {
    p: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    c: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    s: Option<bool>,
}

impl Cursor {
    fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default())
    }

    /// A token of the right kind for this sort, or `None`.
    fn decode(token: &str, spend_desc: bool) -> Option<Self> {
        let bytes = URL_SAFE_NO_PAD.decode(token.trim_end_matches('=')).ok()?;
        let c: Cursor = serde_json::from_slice(&bytes).ok()?;
        let fits = if spend_desc {
            c.s == Some(true) && c.c.is_some_and(f64::is_finite)
        } else {
            c.s != Some(true)
        };
        fits.then_some(c)
    }

    /// Whether a person `(sub, spend in micro-USD)` comes after this cursor.
    fn before(&self, sub: &str, spent: u64) -> bool {
        match self.c {
            Some(c) => {
                let cents = spent as f64 / 10_000.0;
                cents < c || (cents == c && sub > self.p.as_str())
            }
            None => sub > self.p.as_str(),
        }
    }
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
        periods = Period::EVERY.to_vec();
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
    let after = match one("page") {
        None => None,
        Some(p) => {
            Some(Cursor::decode(&p, spend_desc).ok_or_else(|| bad("page: invalid page token"))?)
        }
    };
    Ok(Query {
        limit,
        periods,
        users,
        needle: needle.map(|n| n.to_lowercase()),
        spend_desc,
        after,
    })
}

/// Every stored limit (the binding one decides `source` and `spend_limit_id`).
pub(crate) async fn all_limits(gw: &Gateway) -> Result<Vec<SpendLimit>, ApiError> {
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

pub(crate) fn row(who: &UserIdentity, s: &Standing, binding: Option<&SpendLimit>) -> Value {
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
        "model": s.family.map(crate::spend::Family::as_str),
        "source": source,
        "spend_limit_id": binding.map(|l| l.id.clone()),
        "period_to_date_spend": cents_text(s.spent_micro),
        "spent_micro_usd": s.spent_micro,
        "reserved_micro_usd": s.reserved_micro,
        "resets_at": s.reset.map(|r| r.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
    })
}

pub async fn effective(
    gw: &Gateway,
    query: &[(String, String)],
    request_id: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Response<Body>, ApiError> {
    let q = parse(query)?;
    let mut people = people(gw, &q).await?;
    if !q.spend_desc && q.users.is_empty() {
        // In id order a page needs only its own people's standings.
        people.sort_by(|a, b| a.sub.cmp(&b.sub));
        if let Some(after) = &q.after {
            people.retain(|p| p.sub.as_str() > after.p.as_str());
        }
        people.truncate(q.limit + 1);
    }
    if q.spend_desc && q.users.is_empty() && q.periods[0] != Period::Total {
        // Sorted by spend, a page needs every person's spend but only its own people's
        // standings: the window's daily spend rows give the first in one read.
        let w = q.periods[0].window(now);
        let rows = gw
            .store
            .daily_spend(w.start, w.reset)
            .await
            .map_err(|_| unavailable())?;
        let mut spent: std::collections::HashMap<String, u64> = Default::default();
        for (sub, _, micro) in rows {
            *spent.entry(sub).or_default() += micro;
        }
        let of = |p: &UserIdentity| spent.get(&p.sub).copied().unwrap_or(0);
        people.sort_by(|a, b| of(b).cmp(&of(a)).then_with(|| a.sub.cmp(&b.sub)));
        if let Some(after) = &q.after {
            people.retain(|p| after.before(&p.sub, of(p)));
        }
        people.truncate(q.limit + 1);
    }
    let limits = all_limits(gw).await?;
    let mode = gw.config.group_mode();
    // One person's rows stay together: (id, spend of the sorted period, rows).
    let mut found: Vec<(String, u64, Vec<Value>)> = Vec::new();
    for who in &people {
        let standings = gw
            .store
            .standings(&who.sub, &who.groups, mode, now)
            .await
            .map_err(|_| unavailable())?;
        let mut rows = Vec::new();
        let mut key = 0;
        for p in &q.periods {
            for s in standings.iter().filter(|s| s.period == *p) {
                key = key.max(s.spent_micro);
                let binding = binding_limit(&limits, *p, s.family, &who.sub, &who.groups, mode);
                rows.push(row(who, s, binding));
            }
        }
        found.push((who.sub.clone(), key, rows));
    }
    if !q.users.is_empty() {
        let data: Vec<Value> = found.into_iter().flat_map(|(_, _, r)| r).collect();
        return Ok(ok(
            json!({"data": data, "next_page": null, "has_more": false}),
            request_id,
        ));
    }
    if q.spend_desc {
        found.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    } else {
        found.sort_by(|a, b| a.0.cmp(&b.0));
    }
    if let Some(after) = &q.after {
        found.retain(|(sub, spent, _)| after.before(sub, *spent));
    }
    let more = found.len() > q.limit;
    found.truncate(q.limit);
    let next = found.last().filter(|_| more).map(|(sub, spent, _)| {
        Cursor {
            p: sub.clone(),
            c: q.spend_desc.then(|| *spent as f64 / 10_000.0),
            s: q.spend_desc.then_some(true),
        }
        .encode()
    });
    let data: Vec<Value> = found.into_iter().flat_map(|(_, _, r)| r).collect();
    Ok(ok(
        json!({"data": data, "next_page": next, "has_more": more}),
        request_id,
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::{Cursor, cents_text};

    #[test]
    fn page_tokens_are_the_references_and_of_their_sort() {
        let plain = Cursor {
            p: "bob".into(),
            c: None,
            s: None,
        };
        // The reference's token for {"p":"bob"}.
        assert_eq!(plain.encode(), "eyJwIjoiYm9iIn0");
        assert_eq!(
            Cursor::decode("eyJwIjoiYm9iIn0", false),
            Some(plain.clone())
        );
        assert_eq!(Cursor::decode("eyJwIjoiYm9iIn0", true), None);
        let sorted = Cursor {
            p: "bob".into(),
            c: Some(12.5),
            s: Some(true),
        };
        assert_eq!(Cursor::decode(&sorted.encode(), true), Some(sorted.clone()));
        assert_eq!(Cursor::decode(&sorted.encode(), false), None);
        for bad in ["nope", "", "18446744073709551616", "eyJ4IjoxfQ"] {
            assert_eq!(Cursor::decode(bad, false), None, "{bad}");
        }
        assert!(plain.before("carol", 0) && !plain.before("bob", 0));
        assert!(sorted.before("alice", 100_000) && sorted.before("carol", 125_000));
        assert!(!sorted.before("alice", 125_000) && !sorted.before("zed", 200_000));
    }

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

//! People: `GET /v1/organizations/users` (the identity directory a page at a time),
//! `GET /v1/organizations/users/{id}` (a person's standings, sessions, models and recent
//! refusals) and `POST /v1/organizations/users/{id}/revoke_sessions` (every session and
//! refresh token issued to them until now stops working, console sessions included;
//! audited as `user.sessions_revoke`).

use axum::body::Body;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::Duration;
use http::Response;
use serde_json::{Value, json};

use super::{Caller, bad, iso, ok, param, store_failed};
use crate::error::ApiError;
use crate::events::Event;
use crate::gateway::Gateway;
use crate::spend::binding_limit;
use crate::store::rollup::hour_of;
use crate::store::{DirectoryEntry, DirectoryQuery};

/// The largest person id accepted in a path.
const MAX_ID: usize = 256;

fn entry(e: &DirectoryEntry) -> Value {
    json!({
        "type": "user",
        "id": e.who.sub,
        "email": e.who.email,
        "name": e.who.name,
        "groups": e.who.groups,
        "last_seen_at": iso(e.seen_at),
    })
}

/// `GET /v1/organizations/users`: `q`, `limit` (1–1000, default 20), `page`.
pub async fn list(
    gw: &Gateway,
    q: &[(String, String)],
    request_id: &str,
) -> Result<Response<Body>, ApiError> {
    let limit = crate::spend::admin::page_limit(q, 20)?;
    let needle = param(q, "q").filter(|n| !n.is_empty()).map(str::to_owned);
    if needle.as_ref().is_some_and(|n| n.chars().count() > 256) {
        return Err(bad("q: too long"));
    }
    let after = match param(q, "page") {
        None => None,
        Some(p) => Some(
            URL_SAFE_NO_PAD
                .decode(p.trim_end_matches('='))
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| bad("page: invalid page token"))?,
        ),
    };
    let (found, more) = gw
        .store
        .directory(DirectoryQuery {
            after,
            needle,
            limit,
            exact: None,
        })
        .await
        .map_err(store_failed)?;
    let next = found
        .last()
        .filter(|_| more)
        .map(|e| URL_SAFE_NO_PAD.encode(e.who.sub.as_bytes()));
    Ok(ok(
        json!({"data": found.iter().map(entry).collect::<Vec<_>>(),
               "has_more": more, "next_page": next}),
        request_id,
    ))
}

fn checked_id(id: &str) -> Result<String, ApiError> {
    let id = percent_encoding::percent_decode_str(id)
        .decode_utf8_lossy()
        .into_owned();
    if id.is_empty() || id.len() > MAX_ID || id.chars().any(char::is_control) {
        return Err(bad("user id: must be 1 to 256 printable characters"));
    }
    Ok(id)
}

/// `GET /v1/organizations/users/{id}`.
pub async fn one(gw: &Gateway, id: &str, request_id: &str) -> Result<Response<Body>, ApiError> {
    let sub = checked_id(id)?;
    let now = gw.deps.clock.now();
    let found = gw
        .store
        .directory(DirectoryQuery {
            exact: Some(sub.clone()),
            limit: 1,
            ..Default::default()
        })
        .await
        .map_err(store_failed)?
        .0
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::NotFound(format!("no person {sub} in the directory")))?;
    let (who, seen) = (found.who, iso(found.seen_at));
    let limits = crate::spend::admin::all_limits(gw).await?;
    let mode = gw.config.group_mode();
    let standings = gw
        .store
        .standings(&who.sub, &who.groups, mode, now)
        .await
        .map_err(store_failed)?;
    let standings: Vec<Value> = standings
        .iter()
        .map(|s| {
            let binding = binding_limit(&limits, s.period, s.family, &who.sub, &who.groups, mode);
            crate::spend::admin::effective::row(&who, s, binding)
        })
        .collect();
    let principal = format!("user:{sub}");
    let mine = gw
        .store
        .usage_rollup_of(
            principal.clone(),
            hour_of(now - Duration::days(30)),
            hour_of(now),
        )
        .await
        .map_err(store_failed)?;
    let week = hour_of(now - Duration::days(7));
    let recent: Vec<_> = mine
        .iter()
        .filter(|r| r.key.hour >= week)
        .cloned()
        .collect();
    let mut sessions = crate::insight::sessions(&recent);
    sessions.sort_by_key(|s| std::cmp::Reverse(s.total.last_at_ms));
    sessions.truncate(100);
    let mut models: std::collections::BTreeMap<&str, (u64, u64)> = Default::default();
    for r in &mine {
        let m = models.entry(r.key.model.as_str()).or_default();
        m.0 += r.sums.requests;
        m.1 += r.sums.cost_micro_usd;
    }
    let refusals: Vec<Value> = gw
        .refusals
        .recent(usize::MAX)
        .iter()
        .filter(|b| b.principal.as_deref() == Some(principal.as_str()))
        .take(50)
        .map(|b| b.to_json())
        .collect();
    let revoked = gw
        .identity
        .as_ref()
        .and_then(|id| id.revoked_before(&sub))
        .and_then(|t| chrono::DateTime::from_timestamp(t, 0))
        .map(iso);
    Ok(ok(
        json!({
            "type": "user",
            "id": who.sub,
            "email": who.email,
            "name": who.name,
            "groups": who.groups,
            "last_seen_at": seen,
            "standings": standings,
            "sessions": sessions.iter().map(crate::spend::admin::sessions::row).collect::<Vec<_>>(),
            "projects": [],
            "models": models.iter().map(|(m, (n, c))| json!({"model": m, "requests": n, "cost_micro_usd": c})).collect::<Vec<_>>(),
            "refusals": refusals,
            "sessions_revoked_before": revoked,
        }),
        request_id,
    ))
}

/// `POST /v1/organizations/users/{id}/revoke_sessions`.
pub async fn revoke(
    gw: &Gateway,
    caller: &Caller,
    id: &str,
    request_id: &str,
) -> Result<Response<Body>, ApiError> {
    let sub = checked_id(id)?;
    let Some(identity) = gw.identity.as_ref() else {
        return Err(ApiError::NotFound(
            "this gateway has no sign-in (oidc), so there are no sessions to revoke".into(),
        ));
    };
    let now = gw.deps.clock.now();
    let at = identity
        .revoke_person(gw.store.as_ref(), &sub, now)
        .await
        .map_err(store_failed)?;
    let when = chrono::DateTime::from_timestamp(at, 0).unwrap_or(now);
    gw.store
        .append_audit(crate::spend::AuditRow {
            id: crate::spend::new_id("spla"),
            at: now,
            actor: caller.actor.clone(),
            action: "user.sessions_revoke".into(),
            limit_id: Some(sub.clone()),
            before: None,
            after: Some(json!({"user_id": sub, "revoked_before": iso(when)})),
        })
        .await
        .map_err(store_failed)?;
    gw.deps.emit(
        Event::new("admin.sessions_revoke")
            .with("request_id", request_id)
            .with("actor", caller.actor.clone())
            .with("sub", sub.clone()),
    );
    Ok(ok(
        json!({"type": "sessions_revoked", "user_id": sub, "revoked_before": iso(when)}),
        request_id,
    ))
}

//! A signed-in person's own caps and spend: `GET /api/oauth/usage` (the shape newer Claude
//! Code clients read for `/usage`) and `GET /v1/me/spend` (everything, for the tray). A
//! person bound by a model family's cap or a `total` cap (Gatehouse extensions) gets an
//! entry for it too: `/v1/me/spend` entries all name their family (`model`, `null`: every
//! model), `/api/oauth/usage` limits only a family's (keeping Claude Code's shape for the
//! rest); a `total` cap, which never resets, has `resets_at: null`.

use axum::body::Body;
use http::{HeaderValue, Response, StatusCode, header};
use serde_json::{Value, json};

use super::{Period, Standing};
use crate::auth::Principal;
use crate::error::ApiError;
use crate::gateway::Gateway;

fn cents(micro: u64) -> u64 {
    micro / 10_000
}

async fn standings_for(gw: &Gateway, principal: &Principal) -> Result<Vec<Standing>, ApiError> {
    let Principal::Session { user, .. } = principal else {
        return Err(ApiError::Forbidden(
            "spend is reported to people signed in to this gateway".into(),
        ));
    };
    let mode = gw.config.group_mode();
    gw.store
        .standings(&user.sub, &user.groups, mode, gw.deps.clock.now())
        .await
        .map_err(|_| ApiError::ServiceUnavailable("spend is unavailable right now".into()))
}

fn iso(t: Option<chrono::DateTime<chrono::Utc>>) -> Value {
    t.map_or(Value::Null, |t| {
        t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            .into()
    })
}

fn percent(s: &Standing) -> u64 {
    (s.utilization() * 100.0).floor() as u64
}

pub async fn oauth_usage(gw: &Gateway, principal: &Principal) -> Result<Response<Body>, ApiError> {
    let standings = standings_for(gw, principal).await?;
    let by = |p: Period| {
        standings
            .iter()
            .find(|s| s.period == p && s.family.is_none())
    };
    let capped: Vec<&Standing> = standings.iter().filter(|s| s.cap_cents.is_some()).collect();
    let active = capped
        .iter()
        .copied()
        .max_by(|a, b| a.utilization().total_cmp(&b.utilization()));
    let body = match active {
        Some(a) => {
            let limits: Vec<Value> = capped
                .iter()
                .map(|s| {
                    let mut v = json!({
                        "kind": "spend",
                        "group": s.period.as_str(),
                        "percent": percent(s),
                        "resets_at": iso(s.reset),
                        "severity": if s.utilization() > 0.95 { "critical" } else if s.utilization() > 0.75 { "warning" } else { "normal" },
                        "is_active": std::ptr::eq(*s, a),
                    });
                    if let Some(f) = s.family {
                        v["model"] = f.as_str().into();
                    }
                    v
                })
                .collect();
            json!({
                "extra_usage": {
                    "is_enabled": true,
                    "monthly_limit": a.cap_cents.unwrap_or(0),
                    "used_credits": cents(a.spent_micro),
                    "utilization": percent(a),
                    "currency": "USD",
                },
                "limits": limits,
            })
        }
        None => {
            let used = |p: Period| by(p).map_or(0, |s| cents(s.spent_micro));
            json!({
                "extra_usage": {
                    "is_enabled": true,
                    "monthly_limit": null,
                    "used_credits": used(Period::Monthly),
                    "utilization": null,
                    "currency": "USD",
                    "daily": {"limit": null, "used_credits": used(Period::Daily), "utilization": null},
                    "weekly": {"limit": null, "used_credits": used(Period::Weekly), "utilization": null},
                },
                "limits": [],
            })
        }
    };
    let mut r = crate::edge::json_response(StatusCode::OK, body);
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(r)
}

pub async fn me_spend(gw: &Gateway, principal: &Principal) -> Result<Response<Body>, ApiError> {
    let standings = standings_for(gw, principal).await?;
    let periods: Vec<Value> = standings
        .iter()
        .map(|s| {
            json!({
                "period": s.period.as_str(),
                "model": s.family.map(super::Family::as_str),
                "limit_cents": s.cap_cents,
                "limit_scope": s.cap_scope.map(|c| c.as_str()),
                "spent_cents": cents(s.spent_micro),
                "spent_micro_usd": s.spent_micro,
                "reserved_micro_usd": s.reserved_micro,
                "utilization": s.cap_cents.map(|_| (s.utilization() * 10_000.0).round() / 10_000.0),
                "resets_at": iso(s.reset),
            })
        })
        .collect();
    Ok(crate::edge::json_response(
        StatusCode::OK,
        json!({"currency": "USD", "periods": periods}),
    ))
}

//! `POST /v1/organizations/spend_limits/preview` (a Gatehouse extension, read access):
//! what saving a create-or-replace body would do, without saving it — whether it creates
//! or replaces (and the limit it replaces), whom it binds (people of the identity
//! directory in its scope) and one sentence saying so, for the console to show before an
//! admin confirms.

use axum::body::Body;
use http::{Request, Response};
use http_body_util::{BodyExt, Limited};
use serde_json::{Value, json};

use super::{bad, body, existing, ok, store_failed};
use crate::error::ApiError;
use crate::gateway::Gateway;
use crate::spend::ScopeType;

/// People named in `binds.sample` at most.
const SAMPLE: usize = 20;

fn dollars(cents: Option<i64>) -> String {
    match cents {
        None => "no limit".to_owned(),
        Some(c) => format!("${}.{:02}", c / 100, c.rem_euclid(100)),
    }
}

pub async fn preview(
    gw: &Gateway,
    req: Request<Body>,
    request_id: &str,
) -> Result<Response<Body>, ApiError> {
    let bytes = Limited::new(req.into_body(), 64 * 1024)
        .collect()
        .await
        .map_err(|_| ApiError::PayloadTooLarge("body too large".into()))?
        .to_bytes();
    let b = body::parse(&bytes).map_err(|m| bad(&m))?;
    let stored = existing(gw, b.scope, &b.scope_id, b.period, b.model).await?;
    let people = gw.store.principals(None).await.map_err(store_failed)?;
    let bound: Vec<&str> = people
        .iter()
        .filter(|p| match b.scope {
            ScopeType::Organization => true,
            ScopeType::RbacGroup => p.groups.contains(&b.scope_id),
            ScopeType::User => p.sub == b.scope_id,
        })
        .map(|p| p.sub.as_str())
        .collect();
    let whom = match b.scope {
        ScopeType::Organization => "everyone without a closer limit".to_owned(),
        ScopeType::RbacGroup => format!("each member of the group {}", b.scope_id),
        ScopeType::User => format!("the person {}", b.scope_id),
    };
    let period = match b.model {
        Some(m) => format!("{} {}", b.period.as_str(), m.label()),
        None => b.period.as_str().to_owned(),
    };
    let amount = b
        .amount
        .unwrap_or_else(|| stored.as_ref().and_then(|l| l.amount_cents));
    let action = if stored.is_some() { "update" } else { "create" };
    let replaced = match &stored {
        Some(l) => format!(
            " It replaces the {period} limit of {}.",
            dollars(l.amount_cents)
        ),
        None => " No limit of this scope and period exists yet.".to_owned(),
    };
    let known = match (b.scope, bound.len()) {
        (ScopeType::User, 0) => " This person has not signed in yet.".to_owned(),
        (ScopeType::User, _) => String::new(),
        (_, n) => format!(" {n} people in the directory are in its scope."),
    };
    let message = format!(
        "Sets a {period} limit of {} for {whom}.{replaced}{known}",
        dollars(amount)
    );
    let scope = b.scope.to_json(&b.scope_id);
    Ok(ok(
        json!({
            "type": "spend_limit_preview",
            "action": action,
            "replaces": stored.map(|l| l.to_json()).unwrap_or(Value::Null),
            "binds": {"scope": scope, "people": bound.len(),
                      "sample": bound.iter().take(SAMPLE).collect::<Vec<_>>()},
            "message": message,
        }),
        request_id,
    ))
}

//! The managed policies as served, read-only: `GET /v1/organizations/policies` (each
//! policy with whom it is served to, its checksum and ETag, its merged settings) and
//! `GET /v1/organizations/policies/preview?user_id=` (what that person of the directory
//! receives at `/managed/settings`, by the same matching).

use axum::body::Body;
use http::Response;
use serde_json::{Value, json};

use super::{bad, ok, param, store_failed};
use crate::error::ApiError;
use crate::gateway::Gateway;
use crate::store::DirectoryQuery;

pub fn list(gw: &Gateway) -> Value {
    let data: Vec<Value> = gw
        .policies
        .all()
        .iter()
        .map(|p| {
            let (groups, domain) = p.audience();
            json!({
                "type": "managed_policy",
                "index": p.index,
                "match": {"groups": groups, "email_domain": domain},
                "catch_all": groups.is_none() && domain.is_none(),
                "checksum": p.checksum,
                "etag": format!("\"{}\"", p.checksum),
                "served_to_desktop": p.served_to_desktop,
                "settings": p.settings,
                "desktop": p.desktop,
            })
        })
        .collect();
    json!({"data": data, "policy_mode": gw.policies.mode()})
}

pub async fn preview(
    gw: &Gateway,
    q: &[(String, String)],
    request_id: &str,
) -> Result<Response<Body>, ApiError> {
    let sub = param(q, "user_id")
        .filter(|s| !s.is_empty() && s.len() <= 256)
        .ok_or_else(|| bad("user_id: required, at most 256 characters"))?;
    let who = gw
        .store
        .directory(DirectoryQuery {
            exact: Some(sub.to_owned()),
            limit: 1,
            ..Default::default()
        })
        .await
        .map_err(store_failed)?
        .0
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::NotFound(format!("no person {sub} in the directory")))?
        .who;
    let user = json!({"id": who.sub, "email": who.email, "name": who.name, "groups": who.groups});
    let body = match gw.policies.matched(&who) {
        None => json!({"type": "policy_preview", "user": user, "matched": [],
                       "settings": null, "checksum": null, "etag": null}),
        Some(p) => json!({
            "type": "policy_preview",
            "user": user,
            "matched": p.indexes,
            "settings": p.settings,
            "checksum": p.checksum,
            "etag": format!("\"{}\"", p.checksum),
        }),
    };
    Ok(ok(body, request_id))
}

//! `GET /managed/settings` and `GET /user/bootstrap`.

use axum::body::Body;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use serde_json::{Value, json};

use super::bootstrap::{self, BootstrapContext};
use crate::auth::Principal;
use crate::error::ApiError;
use crate::events::Event;
use crate::gateway::Gateway;

fn person(principal: &Principal) -> Result<&crate::identity::UserIdentity, ApiError> {
    match principal {
        Principal::Session { user, .. } => Ok(user),
        _ => Err(ApiError::Forbidden(
            "managed settings are served to people signed in to this gateway".into(),
        )),
    }
}

pub fn managed_settings(
    gw: &Gateway,
    request_id: &str,
    principal: &Principal,
    headers: &HeaderMap,
) -> Result<Response<Body>, ApiError> {
    let who = person(principal)?;
    let conditional = headers.contains_key(header::IF_NONE_MATCH);
    let event = |status: u16, policy: Option<usize>| {
        gw.deps.emit(
            Event::new("managed.serve")
                .with("request_id", request_id)
                .with("sub", who.sub.clone())
                .with("status", status)
                .with("policy", policy)
                .with("conditional", conditional),
        );
    };
    let Some(policy) = gw.policies.matched(who) else {
        event(404, None);
        return Err(ApiError::NotFound(
            "no managed policy applies to this user".into(),
        ));
    };
    let inm = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok());
    if let Some(resp) = super::desktop_session::answer(&policy, headers, inm) {
        event(resp.status().as_u16(), Some(policy.index));
        return Ok(resp);
    }
    let etag = format!("\"{}\"", policy.checksum);
    // `*` (Claude Desktop asking whether settings exist) is answered as if absent.
    if let Some(inm) = inm.filter(|v| v.trim() != "*")
        && super::checksum::if_none_match_hits(inm, &policy.checksum)
    {
        event(304, Some(policy.index));
        let mut resp = Response::new(Body::empty());
        *resp.status_mut() = StatusCode::NOT_MODIFIED;
        if let Ok(v) = HeaderValue::from_str(&etag) {
            resp.headers_mut().insert(header::ETAG, v);
        }
        return Ok(resp);
    }
    event(200, Some(policy.index));
    let body =
        json!({"uuid": policy.uuid, "checksum": policy.checksum, "settings": policy.settings});
    let mut resp = crate::edge::json_response(StatusCode::OK, body);
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-cache"),
    );
    if let Ok(v) = HeaderValue::from_str(&etag) {
        resp.headers_mut().insert(header::ETAG, v);
    }
    Ok(resp)
}

pub fn user_bootstrap(
    gw: &Gateway,
    request_id: &str,
    principal: &Principal,
) -> Result<Response<Body>, ApiError> {
    let who = person(principal)?;
    let deny = |reason: &'static str| {
        gw.deps.emit(
            Event::new("desktop_bootstrap.denied")
                .with("request_id", request_id)
                .with("sub", who.sub.clone())
                .with("reason", reason),
        );
        ApiError::NotFound(format!("no Claude Desktop policy for this user ({reason})"))
    };
    let policy = gw.policies.matched(who).ok_or_else(|| deny("no_policy"))?;
    if policy.desktop.is_none() {
        return Err(deny("policy_has_no_desktop_block"));
    }
    let identity = gw
        .identity
        .as_ref()
        .ok_or_else(|| deny("sign_in_not_configured"))?;
    let models = super::routes::visible_models(gw, Some(&policy), &who.groups);
    let origin = identity.base();
    let ttl = chrono::Duration::from_std(identity.cfg.session_ttl).unwrap_or_default();
    let doc = bootstrap::document(
        &policy,
        &BootstrapContext {
            public_origin: &origin,
            models,
            otlp_endpoint: gw.otlp_endpoint.as_deref(),
            resource_attributes: &gw.config.telemetry.resource_attributes,
            subject: &who.sub,
            expires_at: gw.deps.clock.now() + ttl,
        },
    );
    gw.deps.emit(
        Event::new("desktop_bootstrap.serve")
            .with("request_id", request_id)
            .with("sub", who.sub.clone())
            .with("policy", policy.index),
    );
    let mut resp = crate::edge::json_response(StatusCode::OK, doc);
    resp.headers_mut()
        .insert("x-gateway-spend-admin", HeaderValue::from_static("false"));
    Ok(resp)
}

/// The model list a caller in `groups` may use: the operator's catalog, without models no
/// upstream the caller can reach serves (`upstreams[].groups` and `models`), filtered by the
/// policy's `availableModels` and `deniedModels` when it has them. A model whose upstreams'
/// capability entries name a context window or an output limit carries the smallest of
/// them as `max_input_tokens` / `max_output_tokens` (the request may go to any of them).
pub fn visible_models(
    gw: &Gateway,
    policy: Option<&super::ResolvedPolicy>,
    groups: &[String],
) -> Vec<Value> {
    let list = gw.catalog.list();
    let data: Vec<Value> = list["data"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|mut m| {
            let id = m["id"].as_str()?.to_owned();
            let resolved = gw.catalog.resolve_for(&id, groups).ok()?;
            let caps: Vec<_> = resolved
                .targets
                .iter()
                .map(|(i, model)| gw.model_caps.get(*i, model))
                .collect();
            if let Some(w) = caps.iter().filter_map(|c| c.context_window).min() {
                m["max_input_tokens"] = w.into();
            }
            if let Some(o) = caps.iter().filter_map(|c| c.max_output_tokens).min() {
                m["max_output_tokens"] = o.into();
            }
            Some(m)
        })
        .collect();
    match policy.filter(|p| !p.rules.is_empty()) {
        Some(p) => data
            .into_iter()
            .filter(|m| {
                m["id"]
                    .as_str()
                    .is_some_and(|id| p.rules.check(id).is_none())
            })
            .collect(),
        None => data,
    }
}

/// `/v1/models` for this caller.
pub fn models_response(gw: &Gateway, principal: &Principal) -> Response<Body> {
    let (policy, groups): (_, &[String]) = match principal {
        Principal::Session { user, .. } => (gw.policies.matched(user), &user.groups),
        _ => (None, &[]),
    };
    let data = visible_models(gw, policy.as_deref(), groups);
    crate::edge::json_response(StatusCode::OK, crate::models::list_body(data))
}

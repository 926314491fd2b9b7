//! `POST /v1/gatehouse/route/explain`: where a Messages request would go, without sending
//! it. Admin only (an admin key, read or write, else an admin-group session — the admin
//! API's admission). The body is the Messages request; the explain request's own
//! `user-agent`, `x-gatehouse-region` and `x-gatehouse-strategy` are taken as the caller's,
//! and `?groups=a,b` names the caller's groups. Nothing is sent, reserved or metered; a
//! half-open breaker's trial is not claimed.

use std::sync::Arc;

use axum::body::Body;
use http::{Request, Response, header};
use http_body_util::{BodyExt, Limited};
use serde_json::{Value, json};

use super::body;
use super::plan::{STRATEGY_HEADER, plan_for, restrict};
use super::rules::{self, Facts};
use crate::config::routing::Strategy;
use crate::error::ApiError;
use crate::gateway::Gateway;
use crate::upstream::health::Admission;
use crate::upstream::router::Leg;

pub const PATH: &str = "/v1/gatehouse/route/explain";

pub async fn handle(
    gw: &Arc<Gateway>,
    request_id: &str,
    admission: &crate::auth::Admission<'_>,
    req: Request<Body>,
) -> Response<Body> {
    match explain(gw, admission, req).await {
        Ok(v) => {
            let mut resp = Response::new(Body::from(v.to_string()));
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
            resp
        }
        Err(e) => e.into_response_for(request_id),
    }
}

async fn explain(
    gw: &Arc<Gateway>,
    admission: &crate::auth::Admission<'_>,
    req: Request<Body>,
) -> Result<Value, ApiError> {
    if req.method() != http::Method::POST {
        return Err(ApiError::MethodNotAllowed("POST".into()));
    }
    if gw.config.spend.is_none() {
        return Err(ApiError::NotFound(
            "route explain needs the `admin` block (admin keys or admin_groups)".into(),
        ));
    }
    crate::spend::admin::authenticate(gw, req.method(), req.headers(), admission).await?;
    let (parts, body) = req.into_parts();
    let limit = usize::try_from(gw.config.limits.max_request_bytes).unwrap_or(usize::MAX);
    let bytes = Limited::new(body, limit)
        .collect()
        .await
        .map_err(|_| ApiError::InvalidRequest("the request body could not be read".into()))?
        .to_bytes();
    let head = body::parse_head(&bytes, false)?;
    let groups: Vec<String> = parts
        .uri
        .query()
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter_map(|kv| kv.strip_prefix("groups="))
        .flat_map(|v| v.split(','))
        .filter(|g| !g.is_empty())
        .map(str::to_owned)
        .collect();
    let facts = Facts::read(&head.model, &bytes, &parts.headers, &groups)?;
    let strategies = &gw.config.routing.strategies;
    let rule = rules::first_match(&strategies.rules, &facts);
    let target = rule.and_then(|r| r.model.as_deref()).unwrap_or(&head.model);
    let resolution = gw
        .catalog
        .resolve_for(target, &groups)
        .map_err(|e| ApiError::InvalidRequest(e.to_string()))?;
    let mut legs: Vec<Leg> = resolution
        .targets
        .into_iter()
        .map(|(upstream, upstream_model)| Leg {
            upstream,
            upstream_model,
            body: bytes::Bytes::new(),
        })
        .collect();
    if let Some(r) = rule.filter(|r| !r.upstreams.is_empty()) {
        legs = restrict(&gw.upstreams.list, r, legs);
    }
    let chosen = match parts.headers.get(STRATEGY_HEADER) {
        None => None,
        Some(v) => Some(v.to_str().ok().and_then(Strategy::parse).ok_or_else(|| {
            ApiError::InvalidRequest(format!("unknown routing strategy in {STRATEGY_HEADER}"))
        })?),
    };
    let mut plan = plan_for(gw, &parts.headers, &head.model, rule, &groups, chosen);
    // The conversation the body and headers name, as the admin key's (a request names
    // its caller's principal; an explained one has none but the key).
    let tags = crate::metering::tags::ClientTags::from_headers(&parts.headers);
    let key = crate::conversation::key(tags.as_deref(), "explain", head.system, head.first_turn);
    if gw.config.routing.affinity.applies(&head.model) {
        let previous = gw
            .conversations
            .previous(key, gw.deps.clock.now())
            .and_then(|name| gw.upstreams.list.iter().position(|u| *u.name == *name));
        plan.affinity = Some(crate::upstream::strategy::Affine { key, previous });
    }
    let ups = &gw.upstreams;
    let (ordered, note) = ups.strategist.order(&plan, legs, &ups.list, &ups.health);
    let candidates: Vec<Value> = ordered
        .iter()
        .map(|l| {
            let health = match ups.health.peek(l.upstream) {
                Admission::Send => "send".to_owned(),
                Admission::Trial => "trial (half-open)".to_owned(),
                Admission::Skip { why, .. } => format!("skip: {why}"),
            };
            json!({
                "upstream": ups.list.get(l.upstream).map(|u| u.name.clone()),
                "upstream_model": l.upstream_model,
                "health": health,
            })
        })
        .collect();
    let t = &facts.traits;
    Ok(json!({
        "model": head.model,
        "served_model": target,
        "rule": rule.map(|r| r.name.clone()),
        "strategy": plan.strategy.as_str(),
        "strategy_source": plan.source,
        "region": plan.region,
        "note": note,
        "candidates": candidates,
        "not_configured": resolution.not_configured,
        "request": {
            "client": facts.client.as_str(),
            "thinking": t.thinking,
            "tools": t.tools,
            "images": t.images,
            "est_input_tokens": t.est_input_tokens,
            "background": crate::models::family(&head.model) == Some("haiku"),
            "groups": groups,
        },
    }))
}

//! The admin API beyond spend limits and the cost report (`crate::spend::admin` keeps
//! those): who is calling (`me`), the `overview`, the identity directory and a person's
//! page with "revoke sessions" (`people`), usage analytics with CSV (`usage`), upstream
//! health (`routing`) and the managed policies as served (`policies`). The team console
//! is a client of these calls and nothing else; every answer is in the reference's object
//! style (`type`, `data`, `has_more`), amounts in micro-USD integers. Authentication is
//! [`caller`]'s, shared with the spend-limits API; a viewer's mutation is 403.

pub mod caller;
pub mod csv;
mod overview;
mod people;
mod policies;
mod routing;
mod usage;

use axum::body::Body;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::events::Event;
use crate::gateway::Gateway;
pub use caller::Caller;

pub use overview::Overview;

/// Usage reports by their parameters, each shared for a few seconds.
pub type Reports = crate::memo::MemoMap<Option<std::sync::Arc<usage::Groups>>>;

const ME: &str = "/v1/organizations/me";
const OVERVIEW: &str = "/v1/organizations/overview";
const USERS: &str = "/v1/organizations/users";
const UPSTREAMS: &str = "/v1/organizations/upstreams";
const POLICIES: &str = "/v1/organizations/policies";
const USAGE: &str = "/v1/organizations/analytics/usage";

pub(crate) fn ok(body: Value, request_id: &str) -> Response<Body> {
    let mut r = crate::edge::json_response(StatusCode::OK, body);
    if let Ok(v) = HeaderValue::from_str(request_id) {
        r.headers_mut().insert("request-id", v);
    }
    r
}

pub(crate) fn query(uri: &http::Uri) -> Vec<(String, String)> {
    uri.query()
        .and_then(|q| serde_urlencoded::from_str(q).ok())
        .unwrap_or_default()
}

pub(crate) fn param<'a>(q: &'a [(String, String)], name: &str) -> Option<&'a str> {
    q.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

pub(crate) fn bad(message: &str) -> ApiError {
    ApiError::InvalidRequest(message.to_owned())
}

pub(crate) fn store_failed(e: crate::store::StoreError) -> ApiError {
    tracing::error!(error = %e, "admin API store error");
    ApiError::ServiceUnavailable("the admin API's store is unavailable".into())
}

pub(crate) fn iso(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The calls of this module, for an authenticated `caller`.
pub async fn route(
    gw: &Gateway,
    request_id: &str,
    caller: &Caller,
    req: Request<Body>,
) -> Result<Response<Body>, ApiError> {
    let path = req.uri().path().to_owned();
    let q = query(req.uri());
    let method = req.method().clone();
    let rest = path.strip_prefix(USERS).map(|r| r.trim_start_matches('/'));
    match (method, path.as_str()) {
        (Method::GET, ME) => Ok(ok(me(caller), request_id)),
        (Method::GET, OVERVIEW) => overview::get(gw, request_id).await,
        (Method::GET, UPSTREAMS) => Ok(ok(routing::upstreams(gw), request_id)),
        (Method::GET, POLICIES) => Ok(ok(policies::list(gw), request_id)),
        (Method::GET, "/v1/organizations/policies/preview") => {
            policies::preview(gw, &q, request_id).await
        }
        (Method::GET, USAGE) => usage::report(gw, &q, request_id).await,
        (Method::GET, USERS) => people::list(gw, &q, request_id).await,
        (Method::POST, _) if rest.is_some_and(|r| r.ends_with("/revoke_sessions")) => {
            let id = rest
                .and_then(|r| r.strip_suffix("/revoke_sessions"))
                .unwrap_or_default();
            if !caller.may_write() {
                return Err(read_only(gw, request_id, caller));
            }
            people::revoke(gw, caller, id, request_id).await
        }
        (Method::GET, _) if rest.is_some_and(|r| !r.is_empty() && !r.contains('/')) => {
            people::one(gw, rest.unwrap_or_default(), request_id).await
        }
        _ => Err(ApiError::NotFound("not found".into())),
    }
}

/// 403 for a read-only caller's change, with its event.
pub fn read_only(gw: &Gateway, request_id: &str, caller: &Caller) -> ApiError {
    gw.deps.emit(
        Event::new("admin.denied")
            .with("request_id", request_id)
            .with("actor", caller.actor.clone())
            .with("reason", "read_only"),
    );
    ApiError::Forbidden("requires write:spend_limits (this caller may only read)".into())
}

fn me(caller: &Caller) -> Value {
    let user = caller
        .user
        .as_ref()
        .map(|u| json!({"id": u.sub, "email": u.email, "name": u.name, "groups": u.groups}));
    let console = caller.console.as_ref();
    json!({
        "type": "admin_principal",
        "actor": caller.actor,
        "via": caller.via.as_str(),
        "role": caller.role.as_str(),
        "user": user,
        "csrf_token": console.map(|c| c.csrf.clone()),
        "expires_at": console
            .and_then(|c| chrono::DateTime::from_timestamp(c.exp, 0))
            .map(iso),
    })
}

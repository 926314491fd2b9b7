//! The dashboard: the built UI (`ui/`) at `/`, its JSON snapshot at
//! `/gatehouse/api/dashboard` and its live event stream at `/gatehouse/api/events`.
//!
//! The same page is the desktop window and a headless server's read-only status page. The
//! routes are public (no credential); what they show is guarded instead: request-level
//! detail (recent requests, refusals) only for callers on loopback or presenting an admin
//! key ([`detail`]); aggregates and upstream health for anyone past the edge guards.
//!
//! The dashboard owns no engine state: it reads the store, the refusal ring
//! (`inference::refusal`), upstream health (`upstream::health`) and live events
//! (`events::live`).

pub mod assets;
pub mod snapshot;
pub mod stream;

use std::net::IpAddr;

use axum::body::Body;
use http::{HeaderMap, Response, StatusCode};

use crate::error::ApiError;
use crate::gateway::Gateway;

pub const API_DASHBOARD: &str = "/gatehouse/api/dashboard";
pub const API_EVENTS: &str = "/gatehouse/api/events";

/// Whether the caller may see request-level detail: the client address (after trusted
/// proxies) is loopback, or it presents an admin read or write key in `x-api-key`.
pub fn detail(gw: &Gateway, client_ip: IpAddr, headers: &HeaderMap) -> bool {
    if client_ip.to_canonical().is_loopback() {
        return true;
    }
    let (Some(spend), Some(key)) = (
        gw.config.spend.as_ref(),
        headers.get("x-api-key").and_then(|v| v.to_str().ok()),
    ) else {
        return false;
    };
    let admin_keys = spend.read_keys.iter().chain(&spend.write_keys);
    crate::auth::client_keys::find_hashed(admin_keys.map(|k| (k.id.as_str(), &k.hash)), key)
        .is_some()
}

/// Serves a public dashboard route (the pipeline has matched it against its table).
pub async fn serve(
    gw: &Gateway,
    client_ip: IpAddr,
    path: &str,
    headers: &HeaderMap,
) -> Result<Response<Body>, ApiError> {
    match path {
        API_DASHBOARD => {
            let body = snapshot::build(gw, detail(gw, client_ip, headers)).await;
            let mut resp = crate::edge::json_response(StatusCode::OK, body);
            resp.headers_mut().insert(
                http::header::CONTENT_SECURITY_POLICY,
                http::HeaderValue::from_static(assets::UI_CSP),
            );
            Ok(resp)
        }
        API_EVENTS => stream::sse(&gw.live),
        _ => assets::serve(path),
    }
}

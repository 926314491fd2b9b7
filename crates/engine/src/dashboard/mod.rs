//! The dashboard: the built UI (`ui/`) at `/`, its JSON snapshot at
//! `/gatehouse/api/dashboard` and its live event stream at `/gatehouse/api/events`.
//!
//! The same page is the desktop window and a headless server's read-only status page. The
//! page itself is public; its data is not: callers on loopback or presenting an admin key
//! ([`detail`]) see everything, including request-level detail (recent requests,
//! refusals); anyone else is refused unless the operator sets `dashboard.public`, and then
//! sees aggregates and upstream health without hosts. Snapshots go through
//! [`crate::memo`] (one computation at a time; the public one reused for a second), so
//! no amount of traffic queues store reads.
//!
//! The dashboard owns no engine state: it reads the store, the refusal ring
//! (`inference::refusal`), upstream health (`upstream::health`) and live events
//! (`events::live`).

pub mod assets;
pub mod snapshot;
pub mod status;
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
    let detail = detail(gw, client_ip, headers);
    if path == status::API_STATUS && !detail {
        return Err(ApiError::Unauthenticated {
            message: "the status needs an admin key in x-api-key off loopback",
            reason: "status_private",
        });
    }
    if matches!(path, API_DASHBOARD | API_EVENTS) && !detail && !gw.config.dashboard_public {
        return Err(ApiError::Unauthenticated {
            message: "the status data needs an admin key in x-api-key off loopback (or dashboard.public: true)",
            reason: "dashboard_private",
        });
    }
    match path {
        API_DASHBOARD => {
            let body = gw.snapshots[usize::from(detail)]
                .get(|| snapshot::build(gw, detail))
                .await;
            let mut resp = crate::edge::json_response(StatusCode::OK, body);
            resp.headers_mut().insert(
                http::header::CONTENT_SECURITY_POLICY,
                http::HeaderValue::from_static(assets::UI_CSP),
            );
            Ok(resp)
        }
        API_EVENTS => stream::sse(&gw.live),
        status::API_STATUS => Ok(crate::edge::json_response(
            StatusCode::OK,
            status::build(gw).await,
        )),
        _ => assets::serve(path),
    }
}

//! The dashboard: the built UI (`ui/`) at `/`, its JSON snapshot at
//! `/gatehouse/api/dashboard` and its live event stream at `/gatehouse/api/events`.
//!
//! The same page is the desktop window and a headless server's read-only status page. The
//! routes are public (no credential); what they show is guarded instead: request-level
//! detail (recent requests, refusals) only for callers on loopback or presenting an admin
//! key ([`detail`]); aggregates and upstream health for anyone past the edge guards.
//!
//! State kept here: the refusal ring ([`blocks`]), upstream health fed by the router
//! ([`health`]) and the broadcast of engine events ([`live`]).

pub mod assets;
pub mod blocks;
pub mod health;
pub mod live;
pub mod snapshot;

use std::net::IpAddr;
use std::sync::Arc;

use axum::body::Body;
use http::{HeaderMap, Response, StatusCode};
use subtle::ConstantTimeEq;

use crate::config::Config;
use crate::deps::Deps;
use crate::error::ApiError;
use crate::server::Gateway;

pub const API_DASHBOARD: &str = "/gatehouse/api/dashboard";
pub const API_EVENTS: &str = "/gatehouse/api/events";

/// The dashboard's in-memory state, part of the gateway.
pub struct Dashboard {
    pub live: live::Live,
    pub blocks: blocks::BlockLog,
    pub health: Arc<health::UpstreamHealth>,
}

impl Dashboard {
    /// `deps` are the tapped ones (see [`live::tap`]), so health changes reach `live` too.
    pub fn new(live: live::Live, config: &Config, deps: &Deps) -> Self {
        Self {
            live,
            blocks: blocks::BlockLog::default(),
            health: Arc::new(health::UpstreamHealth::new(
                &config.upstreams,
                deps.clock.clone(),
                deps.events.clone(),
            )),
        }
    }
}

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
    let presented = crate::auth::ClientKeys::hash(key);
    // Every key is compared, in constant time, whatever matched before.
    spend
        .read_keys
        .iter()
        .chain(&spend.write_keys)
        .fold(false, |found, k| {
            found | bool::from(k.hash.ct_eq(&presented))
        })
}

/// Serves a public dashboard route (the pipeline has matched it against its list).
pub async fn serve(
    gw: &Gateway,
    client_ip: IpAddr,
    path: &str,
    headers: &HeaderMap,
) -> Result<Response<Body>, ApiError> {
    match path {
        API_DASHBOARD => {
            let body = snapshot::build(gw, detail(gw, client_ip, headers)).await;
            let mut resp = crate::pipeline::json_response(StatusCode::OK, body);
            resp.headers_mut().insert(
                http::header::CONTENT_SECURITY_POLICY,
                http::HeaderValue::from_static(assets::UI_CSP),
            );
            Ok(resp)
        }
        API_EVENTS => live::sse(gw),
        _ => assets::serve(path),
    }
}

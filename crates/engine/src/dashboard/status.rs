//! `GET /gatehouse/api/status`: where this instance stands, for `gatehouse status` —
//! version, mode, listener, store (with a live readiness check), upstream health, today's
//! usage and spend, the organization caps and the local meters, and how people sign in
//! (for the desktop app: its mode and sign-in state, from the app). Only for loopback
//! callers and admin read or write keys, like the dashboard's detail. Never carries a
//! key, token, email or principal id.

use serde_json::{Value, json};

use super::snapshot::{bounded, iso, meters, totals};
use crate::gateway::Gateway;
use crate::spend::{ScopeType, windows};
use crate::store::StoreError;

pub const API_STATUS: &str = "/gatehouse/api/status";

pub async fn build(gw: &Gateway) -> Value {
    let now = gw.deps.clock.now();
    let [day, _, _] = windows(now);
    let store = &gw.store;
    let (ready, today, org_caps, meters, app) = tokio::join!(
        // The readiness probe's check, shared with concurrent `/readyz` probes.
        gw.readiness.get(|| async {
            match bounded(store.ready()).await {
                Ok(()) => (true, ""),
                Err(StoreError::Database(m)) if m == "timed out" => (false, "store timed out"),
                Err(_) => (false, "store failed"),
            }
        }),
        bounded(store.usage_totals(day.start)),
        bounded(store.list_limits(Some(ScopeType::Organization), None, None, 10)),
        meters(gw, now),
        async {
            match gw.local.app() {
                Some(app) => app.status().await,
                None => None,
            }
        },
    );
    let cfg = &gw.config;
    let caps: Vec<Value> = org_caps
        .as_ref()
        .map(|(limits, _)| {
            limits
                .iter()
                .map(|l| {
                    json!({
                        "period": l.period.as_str(),
                        "limit_micro_usd": l.amount_cents.map(|c| c.max(0).saturating_mul(10_000)),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let listen = &cfg.listen;
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "mode": if gw.local.app().is_some() { "desktop" } else { "server" },
        "started_at": iso(gw.started_at),
        "paused": gw.local.paused(),
        "listener": {
            "address": std::net::SocketAddr::new(listen.host, listen.port).to_string(),
            "tls": listen.tls.is_some(),
            "public_url": listen.public_url.as_ref().map(|u| u.as_str().trim_end_matches('/')),
        },
        "store": {
            "backend": store.backend(),
            "ready": ready.0,
            "error": (!ready.0).then_some(ready.1),
        },
        "upstreams": gw.upstreams.health.to_json(false),
        "today": {
            "since": iso(day.start),
            "usage": today.ok().map(|t| totals(&t)),
        },
        "spend": {
            "caps_enforced": cfg.spend.is_some(),
            "organization_caps": caps,
            "meters": meters.unwrap_or_default(),
        },
        "sign_in": {
            "oidc": cfg.identity.is_some(),
            "client_keys": cfg.client_keys.len(),
            "local_key": cfg.local_key,
            "app": app,
        },
    })
}

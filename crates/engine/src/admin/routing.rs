//! `GET /v1/organizations/upstreams`: each upstream's health as this replica sees it
//! (state, breaker, cooldown, TTFB percentiles, error rate, the breaker's recent
//! transitions; on PostgreSQL breaker openings are shared), pooled keys by id and state
//! only, and the default strategy. Read-only: routing stays in the config file.

use serde_json::{Value, json};

use crate::gateway::Gateway;

pub fn upstreams(gw: &Gateway) -> Value {
    json!({
        "data": crate::dashboard::snapshot::upstreams(gw, true),
        "strategy": gw.config.routing.strategies.default.as_str(),
    })
}

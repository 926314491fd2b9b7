//! The routing plan of one request: its strategy (the `x-gatehouse-strategy` header for a
//! caller `routing.allow_override` lets choose, else `routing.models.<model>`, else
//! `routing.strategy`) and the caller's region (`x-gatehouse-region`, else the first of
//! their groups in `routing.region_groups`). A header the caller may not use is refused
//! (403) rather than ignored, so nobody believes they chose a route they did not get.

use http::HeaderMap;

use super::Call;
use super::refusal::{Layer, refuse};
use crate::auth::Principal;
use crate::config::routing::Strategy;
use crate::error::ApiError;
use crate::upstream::strategy::Plan;

/// The override header.
pub const STRATEGY_HEADER: &str = "x-gatehouse-strategy";
/// The caller's region.
pub const REGION_HEADER: &str = "x-gatehouse-region";

impl<'a> Call<'a> {
    /// The plan for `model`, or a refusal of the override header.
    pub(super) fn plan(&self, headers: &'a HeaderMap, model: &str) -> Result<Plan<'a>, ApiError> {
        let gw: &'a crate::gateway::Gateway = self.gw;
        let s = &gw.config.routing.strategies;
        let groups: &[String] = match self.principal {
            Principal::Session { user, .. } => &user.groups,
            _ => &[],
        };
        let (strategy, source) = match headers.get(STRATEGY_HEADER) {
            Some(v) => (self.override_strategy(v, model, groups)?, "header"),
            None => match s.by_model.iter().find(|(m, _)| m == model) {
                Some((_, k)) => (*k, "model"),
                None => (s.default, "default"),
            },
        };
        let region = headers
            .get(REGION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .or_else(|| {
                s.region_groups
                    .iter()
                    .find(|(g, _)| groups.contains(g))
                    .map(|(_, r)| r.as_str())
            });
        Ok(Plan {
            strategy,
            source,
            region,
            pricing: Some(&gw.pricing),
        })
    }

    fn override_strategy(
        &self,
        value: &http::HeaderValue,
        model: &str,
        groups: &[String],
    ) -> Result<Strategy, ApiError> {
        let s = &self.gw.config.routing.strategies;
        let allowed = match self.principal {
            Principal::ClientKey { id } => s.override_keys.contains(id),
            Principal::Session { .. } => groups.iter().any(|g| s.override_groups.contains(g)),
            Principal::Workload(_) => false,
        };
        let (error, reason) = if !allowed {
            let e = ApiError::Forbidden(format!(
                "the {STRATEGY_HEADER} header is not allowed for this caller (routing.allow_override)"
            ));
            (e, "routing_override_not_allowed")
        } else {
            match value.to_str().ok().and_then(Strategy::parse) {
                Some(k) => return Ok(k),
                None => {
                    let e = ApiError::InvalidRequest(format!(
                        "unknown routing strategy in {STRATEGY_HEADER}; use one of ordered, weighted, cheapest, fastest, region"
                    ));
                    (e, "routing_override_unknown")
                }
            }
        };
        let event = self.denied(reason, "routing", Some(model));
        Err(refuse(
            self.gw,
            self.request_id,
            Layer::Routing,
            Some(model),
            event,
            error,
        ))
    }
}

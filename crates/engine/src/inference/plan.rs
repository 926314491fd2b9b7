//! The routing plan of one request: its strategy (the `x-gatehouse-strategy` header for a
//! caller `routing.allow_override` lets choose, else `routing.models.<model>`, else
//! `routing.strategy`) and the caller's region (`x-gatehouse-region`, else the first of
//! their groups in `routing.region_groups`). A header the caller may not use is refused
//! (403) rather than ignored, so nobody believes they chose a route they did not get.

use http::HeaderMap;

use super::Call;
use super::refusal::{Layer, refuse};
use super::rules::{self, Facts};
use crate::auth::Principal;
use crate::config::UpstreamConfig;
use crate::config::routing::{Rule, Strategy};
use crate::error::ApiError;
use crate::gateway::Gateway;
use crate::upstream::router::Leg;
use crate::upstream::strategy::Plan;

/// The override header.
pub const STRATEGY_HEADER: &str = "x-gatehouse-strategy";
/// The caller's region.
pub const REGION_HEADER: &str = "x-gatehouse-region";
// Parsed once: a lookup by `&str` parses the name every time.
const STRATEGY_NAME: http::HeaderName = http::HeaderName::from_static(STRATEGY_HEADER);
const REGION_NAME: http::HeaderName = http::HeaderName::from_static(REGION_HEADER);

impl<'a> Call<'a> {
    fn groups(&self) -> &'a [String] {
        match self.principal {
            Principal::Session { user, .. } => &user.groups,
            _ => &[],
        }
    }

    /// The first `routing.rules` entry this request matches (the body is read for it only
    /// when there are rules).
    pub(super) fn rule(
        &self,
        model: &str,
        bytes: &[u8],
        headers: &HeaderMap,
    ) -> Result<Option<&'a Rule>, ApiError> {
        let gw: &'a crate::gateway::Gateway = self.gw;
        let all = &gw.config.routing.strategies.rules;
        if all.is_empty() {
            return Ok(None);
        }
        let facts = Facts::read(model, bytes, headers, self.groups())?;
        Ok(rules::first_match(all, &facts))
    }

    /// A rule's `upstreams`: only those, in its order. None of them serving `model` is a
    /// configuration the caller cannot fix: refused with the rule's name.
    pub(super) fn only_rule_upstreams(
        &self,
        rule: Option<&Rule>,
        model: &str,
        legs: Vec<Leg>,
        mut not_configured: Vec<String>,
    ) -> Result<(Vec<Leg>, Vec<String>), ApiError> {
        let Some(rule) = rule.filter(|r| !r.upstreams.is_empty()) else {
            return Ok((legs, not_configured));
        };
        let kept = restrict(&self.gw.upstreams.list, rule, legs);
        not_configured.retain(|n| rule.upstreams.contains(n));
        if kept.is_empty() {
            let error = ApiError::InvalidRequest(format!(
                "routing rule `{}` sends `{model}` to upstreams that cannot serve it",
                rule.name
            ));
            let event = self.denied("routing_rule_unservable", "routing", Some(model));
            return Err(refuse(
                self.gw,
                self.request_id,
                Layer::Routing,
                Some(model),
                event,
                error,
            ));
        }
        Ok((kept, not_configured))
    }

    /// The plan for `model` (after `rule`), or a refusal of the override header.
    pub(super) fn plan(
        &self,
        headers: &'a HeaderMap,
        model: &str,
        rule: Option<&'a Rule>,
    ) -> Result<Plan<'a>, ApiError> {
        let gw: &'a crate::gateway::Gateway = self.gw;
        let groups = self.groups();
        let chosen = match headers.get(&STRATEGY_NAME) {
            Some(v) => Some(self.override_strategy(v, model, groups)?),
            None => None,
        };
        Ok(plan_for(gw, headers, model, rule, groups, chosen))
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

/// A rule's `upstreams`, in its order, of `legs` (those the rule names and can serve).
pub(super) fn restrict(list: &[UpstreamConfig], rule: &Rule, legs: Vec<Leg>) -> Vec<Leg> {
    let name = |l: &Leg| list.get(l.upstream).map_or("", |u| u.name.as_str());
    let mut kept = Vec::new();
    let mut rest = legs;
    for wanted in &rule.upstreams {
        if let Some(p) = rest.iter().position(|l| name(l) == wanted) {
            kept.push(rest.remove(p));
        }
    }
    kept
}

/// The plan: the strategy `chosen` by the header, else the rule's, the model's, the
/// default; the caller's region from the header, else from `groups`.
pub(super) fn plan_for<'a>(
    gw: &'a Gateway,
    headers: &'a HeaderMap,
    model: &str,
    rule: Option<&'a Rule>,
    groups: &[String],
    chosen: Option<Strategy>,
) -> Plan<'a> {
    let s = &gw.config.routing.strategies;
    let (strategy, source) = match (chosen, rule.and_then(|r| r.strategy)) {
        (Some(k), _) => (k, "header"),
        (None, Some(k)) => (k, "rule"),
        (None, None) => match s.by_model.iter().find(|(m, _)| m == model) {
            Some((_, k)) => (*k, "model"),
            None => (s.default, "default"),
        },
    };
    let region = headers
        .get(&REGION_NAME)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .or_else(|| {
            s.region_groups
                .iter()
                .find(|(g, _)| groups.contains(g))
                .map(|(_, r)| r.as_str())
        });
    Plan {
        strategy,
        source,
        region,
        pricing: Some(&gw.pricing),
        rule: rule.map(|r| r.name.as_str()),
        affinity: None,
        shaped: None,
    }
}

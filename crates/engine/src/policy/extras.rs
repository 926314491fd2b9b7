//! What the gateway adds to every served policy, as the reference does: the OTLP exporter
//! environment when telemetry is forwarded (with `telemetry.resource_attributes`), and
//! `pricing` as `modelPricing` (USD per million tokens) for clients' cost display, with
//! the 1-hour cache-write rate and the long-prompt prices when an override has them.

use serde_json::{Map, Value, json};

use super::{Extras, otlp_env};
use crate::config::managed::PolicyConfig;
use crate::config::{Config, PriceOverride, Prices};
use crate::models::{Catalog, builtin, normalize};

/// The extras for this config; `otlp_endpoint` is the public origin when forwarding is on.
pub fn for_config(config: &Config, otlp_endpoint: Option<&str>) -> Extras {
    let d = &config.telemetry.destinations;
    Extras {
        env: otlp_endpoint.map(|url| {
            otlp_env(
                url,
                [
                    d.iter().any(|x| x.metrics),
                    d.iter().any(|x| x.logs),
                    d.iter().any(|x| x.traces),
                ],
                &config.telemetry.resource_attributes,
            )
        }),
        model_pricing: model_pricing(config),
    }
}

/// The policies to serve: with telemetry env to push and no managed block, one empty
/// catch-all (so clients are told where to export), as the reference does.
pub fn served_policies(config: &Config, pushes_env: bool) -> Vec<PolicyConfig> {
    if config.policies.is_empty() && pushes_env {
        return vec![PolicyConfig::default()];
    }
    config.policies.clone()
}

/// Two ids name the same model (exactly, without a date, or as one built-in model).
fn same_model(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
        || normalize(a) == normalize(b)
        || builtin(a)
            .zip(builtin(b))
            .is_some_and(|(x, y)| x.id == y.id)
}

/// One `modelPricing.overrides` row, USD per million tokens, as the reference writes it:
/// `cacheWrite` is the 5-minute rate; `cacheWrite5m` and `cacheWrite1h` only when the two
/// differ; `longPrompt` when the override has one.
fn row(p: &Prices) -> Value {
    let usd = |nano: u64| json!(nano as f64 / 1000.0);
    let mut row = Map::new();
    row.insert("input".into(), usd(p.input));
    row.insert("output".into(), usd(p.output));
    row.insert("cacheRead".into(), usd(p.cache_read));
    row.insert("cacheWrite".into(), usd(p.cache_write_5m));
    if p.cache_write_1h != p.cache_write_5m {
        row.insert("cacheWrite5m".into(), usd(p.cache_write_5m));
        row.insert("cacheWrite1h".into(), usd(p.cache_write_1h));
    }
    if let Some(l) = &p.long_prompt {
        row.insert(
            "longPrompt".into(),
            json!({
                "abovePromptTokens": l.above_prompt_tokens,
                "input": usd(l.input),
                "output": usd(l.output),
                "cacheRead": usd(l.cache_read),
                "cacheWrite5m": usd(l.cache_write_5m),
                "cacheWrite1h": usd(l.cache_write_1h),
            }),
        );
    }
    Value::Object(row)
}

/// `pricing` as clients read it: `{multiplier?, overrides?: {model: row}}` (see [`row`]),
/// only when it changes something.
fn model_pricing(config: &Config) -> Option<Map<String, Value>> {
    let pricing = &config.pricing;
    let catalog = Catalog::new(&config.models, &config.upstreams);
    let mut ids: Vec<String> = Vec::new();
    let candidates = pricing
        .overrides
        .iter()
        .map(|o| builtin(&o.model).map_or(o.model.clone(), |b| b.id.to_owned()))
        .chain(config.models.rows.iter().map(|r| r.id.clone()));
    for id in candidates {
        if !ids.iter().any(|x| same_model(x, &id)) {
            ids.push(id);
        }
    }
    let mut overrides = Map::new();
    for id in ids {
        // The upstream a caller without groups reaches first.
        let Some((up, up_model)) = catalog
            .resolve(&id)
            .ok()
            .and_then(|r| r.targets.into_iter().next())
        else {
            continue;
        };
        let Some(name) = config.upstreams.get(up).map(|u| u.name.as_str()) else {
            continue;
        };
        let applies = |o: &&PriceOverride| o.upstream.as_deref().is_none_or(|u| u == name);
        let hit = pricing
            .overrides
            .iter()
            .filter(applies)
            .find(|o| same_model(&o.model, &id) || same_model(&o.model, &up_model));
        if let Some(o) = hit {
            overrides.insert(id, row(&o.price));
        }
    }
    let mut out = Map::new();
    if pricing.multiplier != 1.0 {
        out.insert("multiplier".into(), json!(pricing.multiplier));
    }
    if !overrides.is_empty() {
        out.insert("overrides".into(), Value::Object(overrides));
    }
    (!out.is_empty()).then_some(out)
}

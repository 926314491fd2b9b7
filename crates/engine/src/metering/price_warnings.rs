//! Startup warnings about prices (the file-only ones, such as a markup multiplier, are
//! `config::warnings`): a model a client can request that the meter has no exact price
//! for, and a `pricing.overrides` entry no request can ever be priced by. Both use the
//! pricing rule the recorder uses ([`Pricing::priced_as`], [`Pricing::tier_of`]) over
//! every place the catalog can send each requestable model.

use super::pricing::{PriceSource, PricedAs, Pricing, looks_like_claude};
use crate::config::Config;
use crate::config::warnings::ConfigWarning;
use crate::models::{Catalog, family};

/// `(requested id, upstream name, id sent there)` for every route a request can take.
fn routes(config: &Config, requested: &[String]) -> Vec<(String, String, String)> {
    let catalog = Catalog::new(&config.models, &config.upstreams);
    // Every group that gates an upstream: the routes of anyone at all.
    let groups: Vec<String> = config
        .upstreams
        .iter()
        .flat_map(|u| u.groups.iter().flatten().cloned())
        .collect();
    let mut out = Vec::new();
    for id in requested {
        let Ok(res) = catalog.resolve_for(id, &groups) else {
            continue;
        };
        for (i, served) in res.targets {
            if let Some(u) = config.upstreams.get(i) {
                out.push((id.clone(), u.name.clone(), served));
            }
        }
    }
    out
}

pub fn check(config: &Config) -> Vec<ConfigWarning> {
    let pricing = Pricing::new(config.pricing.clone());
    let mut out = Vec::new();
    unpriced(config, &pricing, &mut out);
    unused_overrides(config, &pricing, &mut out);
    out
}

fn fallback(config: &Config) -> &'static str {
    if config.pricing.default.is_some() {
        "pricing.default"
    } else {
        "the unknown-model default tier"
    }
}

fn unpriced(config: &Config, pricing: &Pricing, out: &mut Vec<ConfigWarning>) {
    for (j, row) in config.models.rows.iter().enumerate() {
        let mut unpriced: Vec<String> = Vec::new();
        for (requested, upstream, served) in routes(config, std::slice::from_ref(&row.id)) {
            let at = pricing.priced_as(&requested, Some(&upstream), Some(&served));
            if pricing.tier_of(&at).1 == PriceSource::Default && !unpriced.contains(&served) {
                unpriced.push(served);
            }
        }
        if !unpriced.is_empty() {
            out.push(ConfigWarning::at(
                &format!("models[{j}]"),
                format!(
                    "the spend meter has no exact price for {} (sent as {}): it is metered at {}. Price it with a pricing.overrides entry",
                    row.id,
                    unpriced.join(", "),
                    fallback(config)
                ),
            ));
        }
    }
    for (i, u) in config.upstreams.iter().enumerate() {
        for (fam, target) in &u.model_map {
            let at = PricedAs {
                model: target,
                upstream: Some(&u.name),
            };
            if !looks_like_claude(target) && pricing.tier_of(&at).1 == PriceSource::Default {
                out.push(ConfigWarning::at(
                    &format!("upstreams[{i}].model_map.{fam}"),
                    format!(
                        "the spend meter has no exact price for {target}: it is metered at {}. Price it with a pricing.overrides entry for upstream '{}'",
                        fallback(config),
                        u.name
                    ),
                ));
            }
        }
    }
}

fn unused_overrides(config: &Config, pricing: &Pricing, out: &mut Vec<ConfigWarning>) {
    let overrides = &config.pricing.overrides;
    if overrides.is_empty() {
        return;
    }
    let mut requested = crate::models::warnings::requestable(config);
    // An override may name a Claude id newer than the built-in table: requestable too.
    if config.models.auto_include_builtin {
        requested.extend(
            overrides
                .iter()
                .filter(|o| family(&o.model).is_some())
                .map(|o| o.model.clone()),
        );
    }
    let mut used = vec![false; overrides.len()];
    for (id, upstream, served) in routes(config, &requested) {
        let at = pricing.priced_as(&id, Some(&upstream), Some(&served));
        if let Some(k) = pricing.override_index(&at)
            && let Some(u) = used.get_mut(k)
        {
            *u = true;
        }
    }
    for (k, o) in overrides.iter().enumerate() {
        if used.get(k) == Some(&false) {
            let on = o
                .upstream
                .as_deref()
                .map(|u| format!(" on upstream '{u}'"))
                .unwrap_or_default();
            out.push(ConfigWarning::at(
                &format!("pricing.overrides[{k}]"),
                format!(
                    "the price for '{}'{on} never applies: no model a client can request there is priced by it (a typo, a model not in models[], or a more specific override covers it)",
                    o.model
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use crate::config::{Config, LoadContext};
    use crate::deps::{MapEnvironment, NoCredentialStore};

    fn warnings(yaml: &str) -> Vec<String> {
        let env = MapEnvironment::default();
        let ctx = LoadContext {
            env: &env,
            credentials: &NoCredentialStore,
            default_data_dir: std::env::temp_dir(),
        };
        let c = Config::from_yaml(yaml, &ctx).unwrap();
        super::check(&c).into_iter().map(|w| w.path).collect()
    }

    const HEAD: &str = "listen: {host: 127.0.0.1}\nupstreams: [{name: a, provider: anthropic, auth: {api_key: k}}]\n";

    #[test]
    fn a_requestable_model_without_an_exact_price() {
        assert_eq!(
            warnings(&format!(
                "{HEAD}models: [{{id: my-model, upstream_model: {{a: my-upstream-model}}}}, {{id: claude-sonnet-4-6, upstream_model: {{a: claude-sonnet-4-6}}}}]\n"
            )),
            ["models[0]"]
        );
        assert!(
            warnings(&format!(
                "{HEAD}models: [{{id: my-model, upstream_model: {{a: my-upstream-model}}}}]\npricing: {{overrides: [{{upstream: a, model: my-upstream-model, input: 1, output: 2}}]}}\n"
            ))
            .is_empty()
        );
    }

    #[test]
    fn a_model_map_target_without_a_price() {
        let w = warnings(
            "listen: {host: 127.0.0.1}\nupstreams: [{name: a, provider: anthropic, auth: {api_key: k}, model_map: {sonnet: deepseek-chat, opus: claude-opus-4-7}}]\n",
        );
        assert_eq!(w, ["upstreams[0].model_map.sonnet"]);
    }

    #[test]
    fn an_override_that_can_never_apply() {
        let w = warnings(&format!(
            "{HEAD}pricing: {{overrides: [{{upstream: a, model: never-model, input: 1, output: 2}}, {{upstream: a, model: claude-sonnet-4-6, input: 1, output: 2}}, {{model: claude-opus-9, input: 1, output: 2}}]}}\n"
        ));
        assert_eq!(w, ["pricing.overrides[0]"]);
    }
}

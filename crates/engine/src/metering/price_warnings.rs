//! Startup warnings about prices (the file-only ones, such as a markup multiplier, are
//! `config::warnings`): a model a client can request that the meter has no exact price
//! for, and a `pricing.overrides` entry no request can ever be priced by. Both use the
//! pricing rule the recorder uses ([`Pricing::priced_as`], [`Pricing::tier_of`]) over
//! every place the catalog can send each requestable model.
//!
//! Also the one `pricing` refusal that needs the model table ([`duplicate_overrides`]):
//! two overrides for one upstream naming the same built-in model under two spellings
//! (`claude-sonnet-4-5` and its dated, Bedrock or Vertex id), as the reference refuses them.

use super::pricing::{PriceSource, PricedAs, Pricing, looks_like_claude};
use crate::config::warnings::ConfigWarning;
use crate::config::{Config, ConfigError, ConfigIssue};
use crate::models::{Catalog, builtin, family};

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

/// The reference's key for an override's model: the built-in model it spells (under any
/// provider's id), else the id ignoring case.
fn model_key(id: &str) -> String {
    // `claude-sonnet-4-5[1m]` is its own key there, not the model it names.
    let known = (!id.contains('['))
        .then(|| builtin(&anthropic_spelling(id)))
        .flatten();
    match known {
        Some(b) => format!("builtin:{}", b.id),
        None => format!("string:{}", id.to_lowercase()),
    }
}

/// A Bedrock (`us.anthropic.claude-…-20250929-v1:0`) or Vertex (`claude-…@20250929`) id
/// as Anthropic spells it; any other id unchanged.
fn anthropic_spelling(id: &str) -> String {
    let lower = id.trim().to_ascii_lowercase();
    let after_profile = match lower.split_once('.') {
        Some((geo, rest)) if rest.starts_with("anthropic.") && !geo.contains('-') => rest,
        _ => lower.as_str(),
    };
    let bare = after_profile
        .strip_prefix("anthropic.")
        .unwrap_or(after_profile);
    let bare = match bare.rsplit_once("-v") {
        Some((head, version))
            if version
                .split_once(':')
                .is_some_and(|(a, b)| is_digits(a) && is_digits(b)) =>
        {
            head
        }
        _ => bare,
    };
    bare.replacen('@', "-", 1)
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// Overrides for one upstream that price the same model (ids equal ignoring case, or one
/// built-in model however spelt): refused at the later one, naming the earlier one's model.
pub fn duplicate_overrides(config: &Config) -> Result<(), ConfigError> {
    let overrides = &config.pricing.overrides;
    let keys: Vec<String> = overrides.iter().map(|o| model_key(&o.model)).collect();
    let mut issues = Vec::new();
    for (i, o) in overrides.iter().enumerate() {
        let earlier = (0..i).find(|&j| overrides[j].upstream == o.upstream && keys[j] == keys[i]);
        if let Some(j) = earlier {
            issues.push(ConfigIssue {
                path: format!("pricing.overrides[{i}]"),
                message: format!(
                    "duplicates the pricing override for '{}' on upstream '{}'",
                    overrides[j].model,
                    o.upstream.as_deref().unwrap_or("(any)")
                ),
            });
        }
    }
    ConfigError::from_issues(issues).map_or(Ok(()), Err)
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
                "{HEAD}models: [{{id: my-model, upstream_model: {{a: my-upstream-model}}}}]\npricing: {{overrides: [{{upstream: a, model: my-upstream-model, input: 1, output: 2, cache_write: 1}}]}}\n"
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

    /// Each pair was run through the reference's `--check config` as two overrides.
    #[test]
    fn duplicates_are_the_same_builtin_model_or_the_same_id_ignoring_case() {
        let refused = |a: &str, b: &str| {
            let yaml = format!(
                "{HEAD}pricing: {{overrides: [{{upstream: a, model: '{a}', input: 1, output: 2, cache_write: 1}}, {{upstream: a, model: '{b}', input: 1, output: 2, cache_write: 1}}]}}\n"
            );
            let env = MapEnvironment::default();
            let ctx = LoadContext {
                env: &env,
                credentials: &NoCredentialStore,
                default_data_dir: std::env::temp_dir(),
            };
            let c = Config::from_yaml(&yaml, &ctx).unwrap();
            super::duplicate_overrides(&c)
                .err()
                .map(|e| (e.path, e.message))
        };
        for (a, b) in [
            ("claude-sonnet-4-5", "claude-sonnet-4-5-20250929"),
            (
                "claude-sonnet-4-5",
                "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            ),
            ("claude-sonnet-4-5", "claude-sonnet-4-5@20250929"),
            ("Claude-Sonnet-4-5", "claude-sonnet-4-5-20250929"),
        ] {
            assert_eq!(
                refused(a, b),
                Some((
                    "pricing.overrides[1]".to_owned(),
                    format!("duplicates the pricing override for '{a}' on upstream 'a'")
                )),
                "{a} / {b}"
            );
        }
        for (a, b) in [
            ("deepseek-chat", "deepseek-chat-20250101"),
            ("claude-opus-9", "claude-opus-9-20270101"),
            ("claude-sonnet-4-5", "anthropic/claude-sonnet-4-5"),
            ("claude-sonnet-4-5[1m]", "claude-sonnet-4-5"),
        ] {
            assert_eq!(refused(a, b), None, "{a} / {b}");
        }
    }

    #[test]
    fn an_override_that_can_never_apply() {
        let w = warnings(&format!(
            "{HEAD}pricing: {{overrides: [{{upstream: a, model: never-model, input: 1, output: 2, cache_write: 1}}, {{upstream: a, model: claude-sonnet-4-6, input: 1, output: 2, cache_write: 1}}, {{model: claude-opus-9, input: 1, output: 2, cache_write: 1}}]}}\n"
        ));
        assert_eq!(w, ["pricing.overrides[0]"]);
    }
}

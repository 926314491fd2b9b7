//! Startup warnings about models and upstreams that need the built-in model table (the
//! file-only ones are `config::warnings`): an `upstreams[].models` entry that routes
//! nothing, a `models[].upstream_model` mapping the upstream's `models` list never lets
//! apply, and a Vertex upstream serving Sonnet 4 or 4.5 (no 1M context there).

use super::{BUILTIN, family, listed};
use crate::config::warnings::ConfigWarning;
use crate::config::{Config, Provider};

/// The model ids a client can ask for: the operator's rows, and the built-in ids when
/// they are included.
pub fn requestable(config: &Config) -> Vec<String> {
    let mut ids: Vec<String> = config.models.rows.iter().map(|r| r.id.clone()).collect();
    if config.models.auto_include_builtin {
        for b in BUILTIN {
            ids.push(b.id.to_owned());
            ids.extend(b.aliases.iter().map(|a| (*a).to_owned()));
        }
    }
    ids
}

pub fn check(config: &Config) -> Vec<ConfigWarning> {
    let ids = requestable(config);
    let mut out = Vec::new();
    routes_nothing(config, &ids, &mut out);
    mapping_never_applies(config, &mut out);
    vertex_sonnet_4(config, &ids, &mut out);
    out
}

fn routes_nothing(config: &Config, ids: &[String], out: &mut Vec<ConfigWarning>) {
    for (i, u) in config.upstreams.iter().enumerate() {
        for (k, entry) in u.models.iter().flatten().enumerate() {
            let pattern = std::slice::from_ref(entry);
            // Any Claude id of a known family is requestable when built-ins are included.
            let future_claude = config.models.auto_include_builtin
                && !entry.contains('*')
                && family(entry).is_some();
            if future_claude || ids.iter().any(|id| listed(pattern, id)) {
                continue;
            }
            out.push(ConfigWarning::at(
                &format!("upstreams[{i}].models[{k}]"),
                format!(
                    "upstream '{}' lists '{entry}', but no model a client can request matches it, so it routes nothing there. Check the spelling, list the model as clients name it, or add a models[] entry with upstream_model.{} set to the id this upstream takes",
                    u.name, u.name
                ),
            ));
        }
    }
}

fn mapping_never_applies(config: &Config, out: &mut Vec<ConfigWarning>) {
    for (j, row) in config.models.rows.iter().enumerate() {
        for name in row.upstream_model.keys() {
            let Some(u) = config.upstreams.iter().find(|u| &u.name == name) else {
                continue;
            };
            if u.models.as_ref().is_some_and(|m| !listed(m, &row.id)) {
                out.push(ConfigWarning::at(
                    &format!("models[{j}].upstream_model.{name}"),
                    format!(
                        "'{}' is not in upstream '{name}''s models, so this mapping never applies. Add '{}' to that upstream's models, or remove the mapping",
                        row.id, row.id
                    ),
                ));
            }
        }
    }
}

fn vertex_sonnet_4(config: &Config, ids: &[String], out: &mut Vec<ConfigWarning>) {
    let sonnet_4 = |id: &String| {
        super::builtin(id)
            .is_some_and(|b| matches!(b.id, "claude-sonnet-4-5" | "claude-sonnet-4-0"))
    };
    for (i, u) in config.upstreams.iter().enumerate() {
        if !matches!(u.provider, Provider::Vertex(_)) {
            continue;
        }
        let mut served: Vec<&str> = ids
            .iter()
            .filter(|id| sonnet_4(id) && u.models.as_ref().is_none_or(|m| listed(m, id)))
            .filter_map(|id| super::builtin(id).map(|b| b.id))
            .collect();
        served.dedup();
        if !served.is_empty() {
            out.push(ConfigWarning::at(
                &format!("upstreams[{i}]"),
                format!(
                    "vertex upstream '{}' serves {}: Sonnet 4 and 4.5 have no 1M context on Vertex, so requests with the context-1m beta (the [1m] suffix) for them are refused with a 400. Set models on this upstream to leave them out if other upstreams should serve them",
                    u.name,
                    served.join(", ")
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

    const HEAD: &str = "listen: {host: 127.0.0.1}\n";

    #[test]
    fn an_upstream_models_entry_that_routes_nothing() {
        let w = warnings(&format!(
            "{HEAD}upstreams:\n- {{name: a, provider: anthropic, auth: {{api_key: k}}, models: [claude-nonexistent, claude-sonnet-4-6, 'claude-opus-*', claude-opus-9, mine]}}\nmodels: [{{id: mine, upstream_model: {{a: mine}}}}]\n"
        ));
        assert_eq!(w, ["upstreams[0].models[0]"]);
        let w = warnings(&format!(
            "{HEAD}auto_include_builtin_models: false\nupstreams:\n- {{name: a, provider: anthropic, auth: {{api_key: k}}, models: [claude-opus-9, mine]}}\nmodels: [{{id: mine, upstream_model: {{a: mine}}}}]\n"
        ));
        assert_eq!(w, ["upstreams[0].models[0]"]);
    }

    #[test]
    fn an_upstream_model_mapping_the_models_list_excludes() {
        let yaml = |list: &str| {
            format!(
                "{HEAD}upstreams:\n- {{name: a, provider: anthropic, auth: {{api_key: k}}, models: [{list}]}}\nmodels: [{{id: claude-sonnet-4-6, upstream_model: {{a: other}}}}]\n"
            )
        };
        assert_eq!(
            warnings(&yaml("claude-opus-4-7")),
            ["models[0].upstream_model.a"]
        );
        assert!(warnings(&yaml("claude-opus-4-7, claude-sonnet-4-6")).is_empty());
    }

    #[test]
    fn vertex_serving_sonnet_4_or_4_5() {
        let vertex = |models: &str| {
            format!(
                "{HEAD}upstreams:\n- {{name: v, provider: vertex, project_id: p, region: us-east5{models}}}\n"
            )
        };
        assert_eq!(warnings(&vertex("")), ["upstreams[0]"]);
        assert!(warnings(&vertex(", models: [claude-sonnet-4-6, claude-opus-4-7]")).is_empty());
        assert!(
            warnings(
                "listen: {host: 127.0.0.1}\nupstreams: [{name: a, provider: anthropic, auth: {api_key: k}}]\n"
            )
            .is_empty()
        );
    }
}

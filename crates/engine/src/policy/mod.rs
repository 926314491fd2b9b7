//! Managed policy: which Claude Code settings (and Claude Desktop overlay) each signed-in
//! person gets, served at `/managed/settings` and `/user/bootstrap`, and the per-role model
//! allowlist enforced on inference and `/v1/models`.
//!
//! Policies match in order (groups: any of; email domain: exact); the first match wins and,
//! unless it is itself the catch-all (`match: {}`), is merged over the catch-all base
//! ([`merge`]). Every merged result is checked again and gets its checksum ([`checksum`])
//! once, at start.

pub mod bootstrap;
pub mod checksum;
pub mod desktop_session;
pub mod extras;
pub mod merge;
pub mod model_rules;
pub mod routes;
pub mod webhook;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::config::ConfigError;
use crate::config::managed::{PolicyConfig, check_settings};
use crate::identity::UserIdentity;
pub use model_rules::ModelRules;

/// One servable policy: the merged settings and what matches it.
#[derive(Debug, Clone)]
pub struct ResolvedPolicy {
    /// The first matching policy's index.
    pub index: usize,
    /// Every policy merged into this one (`layered`), else just `index`.
    pub indexes: Vec<usize>,
    pub uuid: String,
    pub checksum: String,
    pub settings: Value,
    pub desktop: Option<Map<String, Value>>,
    pub rules: ModelRules,
    /// Served to Claude Desktop sessions (`code:` with content, or `serve_to_desktop: true`).
    pub served_to_desktop: bool,
    /// Written under `code:` (Claude Desktop's Code tab).
    pub under_code: bool,
    groups: Option<Vec<String>>,
    email_domain: Option<String>,
}

impl ResolvedPolicy {
    /// Whom it is served to: its groups and email domain (`None`: any).
    pub fn audience(&self) -> (Option<&[String]>, Option<&str>) {
        (self.groups.as_deref(), self.email_domain.as_deref())
    }

    fn matches(&self, who: &UserIdentity) -> bool {
        let groups_ok = self
            .groups
            .as_ref()
            .is_none_or(|g| who.groups.iter().any(|x| g.contains(x)));
        let domain_ok = self.email_domain.as_ref().is_none_or(|d| {
            who.email
                .as_deref()
                .and_then(|e| e.rsplit_once('@'))
                .is_some_and(|(_, dom)| dom.eq_ignore_ascii_case(d))
        });
        groups_ok && domain_ok
    }

    /// The policy's `availableModels`, when it restricts models.
    pub fn available_models(&self) -> Option<Vec<String>> {
        self.rules.available.clone()
    }
}

/// What the gateway adds to every served policy.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// The OTLP variables when telemetry forwarding is on; the policy's own `env` wins.
    pub env: Option<Map<String, Value>>,
    /// `pricing` as `modelPricing`, for policies that do not set their own.
    pub model_pricing: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, Default)]
pub struct Policies {
    list: Vec<Arc<ResolvedPolicy>>,
    configs: Vec<PolicyConfig>,
    extras: Extras,
    /// `layered`: merged results per set of matching policies.
    layered: Arc<Mutex<HashMap<Vec<usize>, Arc<ResolvedPolicy>>>>,
}

/// Environment that points Claude Code's OpenTelemetry exporter at the gateway: each
/// exporter `otlp` when some destination takes that signal, else `none`.
pub fn otlp_env(
    public_url: &str,
    signals: [bool; 3],
    resource_attributes: &[(String, String)],
) -> Map<String, Value> {
    let on = |b: bool| if b { "otlp" } else { "none" };
    let mut env: Map<String, Value> = [
        ("CLAUDE_CODE_ENABLE_TELEMETRY", "1"),
        ("OTEL_METRICS_EXPORTER", on(signals[0])),
        ("OTEL_LOGS_EXPORTER", on(signals[1])),
        ("OTEL_TRACES_EXPORTER", on(signals[2])),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", public_url),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), Value::String(v.to_owned())))
    .collect();
    if !resource_attributes.is_empty() {
        let joined: Vec<String> = resource_attributes
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        env.insert(
            "OTEL_RESOURCE_ATTRIBUTES".into(),
            Value::String(joined.join(",")),
        );
    }
    env
}

/// Whether settings carry anything beyond machine-only keys and empty objects.
fn has_content(cli: &Map<String, Value>) -> bool {
    fn empty_tree(v: &Value) -> bool {
        v.as_object().is_some_and(|o| o.values().all(empty_tree))
    }
    cli.iter().any(|(k, v)| {
        !["managedSourcesBehavior", "wslInheritsWindowsSettings"].contains(&k.as_str())
            && !empty_tree(v)
    })
}

impl Policies {
    /// Merges and checks every policy.
    pub fn new(configs: &[PolicyConfig], extras: &Extras) -> Result<Self, ConfigError> {
        let base = configs.iter().find(|p| p.is_catch_all());
        let mut list = Vec::with_capacity(configs.len());
        for (i, p) in configs.iter().enumerate() {
            let (cli, desktop) = match base.filter(|_| !p.is_catch_all()) {
                Some(b) => (
                    merge::merge_cli(&b.cli, &p.cli),
                    merge::merge_desktop(b.desktop.as_ref(), p.desktop.as_ref()),
                ),
                None => (p.cli.clone(), p.desktop.clone()),
            };
            list.push(Arc::new(resolve(&[i], p, cli, desktop, extras)?));
        }
        if extras.model_pricing.is_some() {
            tracing::info!(
                "pricing: pushing modelPricing to clients in the managed policies that do not set their own"
            );
        }
        Ok(Self {
            list,
            configs: configs.to_vec(),
            extras: extras.clone(),
            layered: Arc::default(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Every policy as served on its own (each merged over the catch-all), in file order.
    pub fn all(&self) -> &[Arc<ResolvedPolicy>] {
        &self.list
    }

    /// `managed.policy_mode` as configured: `layered` or `first_match`.
    pub fn mode(&self) -> &'static str {
        if self.configs.iter().any(|c| c.layered) {
            "layered"
        } else {
            "first_match"
        }
    }

    /// The policy that applies to this person: the first match, or with `layered` every
    /// match (up to the catch-all) merged, earlier policies over later ones.
    pub fn matched(&self, who: &UserIdentity) -> Option<Arc<ResolvedPolicy>> {
        let mut hits = Vec::new();
        for (i, p) in self.list.iter().enumerate() {
            if p.matches(who) {
                hits.push(i);
                if !self
                    .configs
                    .get(i)
                    .is_some_and(|c| c.layered && !c.is_catch_all())
                {
                    break;
                }
            }
        }
        let first = *hits.first()?;
        // Only two or more layered (non-catch-all) matches merge; one match and the
        // catch-all is that policy, already merged over the base.
        let layered = |i: &usize| {
            self.configs
                .get(*i)
                .is_some_and(|c| c.layered && !c.is_catch_all())
        };
        if !hits.get(1).is_some_and(layered) {
            return self.list.get(first).cloned();
        }
        if let Ok(cache) = self.layered.lock()
            && let Some(hit) = cache.get(&hits)
        {
            return Some(hit.clone());
        }
        let merged = self.merge_layered(&hits)?;
        if let Ok(mut cache) = self.layered.lock() {
            if cache.len() >= 1024 {
                cache.clear();
            }
            cache.insert(hits, merged.clone());
        }
        Some(merged)
    }

    fn merge_layered(&self, hits: &[usize]) -> Option<Arc<ResolvedPolicy>> {
        let mut rev = hits.iter().rev().filter_map(|i| self.configs.get(*i));
        let last = rev.next()?;
        let (mut cli, mut desktop) = (last.cli.clone(), last.desktop.clone());
        for p in rev {
            cli = merge::merge_cli(&cli, &p.cli);
            desktop = merge::merge_desktop(desktop.as_ref(), p.desktop.as_ref());
        }
        let first = self.configs.get(*hits.first()?)?;
        // Every part passed the checks at start; a merge of them is served as is.
        resolve(hits, first, cli, desktop, &self.extras)
            .ok()
            .map(Arc::new)
    }
}

/// Adds the gateway's extras to merged settings, checks them and computes checksum and uuid.
fn resolve(
    indexes: &[usize],
    p: &PolicyConfig,
    mut cli: Map<String, Value>,
    desktop: Option<Map<String, Value>>,
    extras: &Extras,
) -> Result<ResolvedPolicy, ConfigError> {
    let index = indexes.first().copied().unwrap_or_default();
    let content = has_content(&cli);
    if let Some(extra) = &extras.env {
        let mut env = extra.clone();
        if let Some(Value::Object(own)) = cli.get("env") {
            env.extend(own.clone());
        }
        cli.insert("env".into(), Value::Object(env));
    }
    if let Some(pricing) = &extras.model_pricing {
        match cli.get("modelPricing") {
            None => {
                cli.insert("modelPricing".into(), Value::Object(pricing.clone()));
            }
            Some(Value::Object(own))
                if !own.is_empty()
                    && !own.contains_key("multiplier")
                    && !own.contains_key("overrides") =>
            {
                let mut m = own.clone();
                m.extend(pricing.clone());
                cli.insert("modelPricing".into(), Value::Object(m));
            }
            Some(_) => {}
        }
    }
    check_settings(&cli, &format!("managed.policies[{index}] (merged)"))?;
    let served_to_desktop = if p.under_code {
        content
    } else {
        p.serve_to_desktop == Some(true) && !cli.is_empty()
    };
    let settings = Value::Object(cli);
    let sum = checksum::checksum(&settings);
    let digest = Sha256::digest(format!("gatehouse-policy:{index}:{sum}").as_bytes());
    let uuid =
        uuid::Builder::from_random_bytes(digest[..16].try_into().unwrap_or_default()).into_uuid();
    Ok(ResolvedPolicy {
        index,
        indexes: indexes.to_vec(),
        uuid: uuid.to_string(),
        checksum: sum,
        rules: ModelRules::from_settings(&settings),
        settings,
        desktop,
        served_to_desktop,
        under_code: p.under_code,
        groups: p.groups.clone(),
        email_domain: p.email_domain.clone(),
    })
}

/// Whether `model` is in an `availableModels` list (prefix matching, as the reference's
/// default `availableModelsMatch`).
pub fn model_allowed(available: &[String], model: &str) -> bool {
    model_rules::allows(available, model, false)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn policy(groups: Option<&[&str]>, domain: Option<&str>, cli: Value) -> PolicyConfig {
        PolicyConfig {
            groups: groups.map(|g| g.iter().map(|s| (*s).to_owned()).collect()),
            email_domain: domain.map(str::to_owned),
            cli: cli.as_object().unwrap().clone(),
            ..PolicyConfig::default()
        }
    }

    fn who(email: &str, groups: &[&str]) -> UserIdentity {
        UserIdentity {
            sub: "s".into(),
            email: Some(email.into()),
            name: None,
            groups: groups.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn first_match_wins_with_the_base_merged_under() {
        let ps = Policies::new(
            &[
                policy(
                    Some(&["eng"]),
                    Some("corp.example"),
                    json!({"availableModels": ["opus"]}),
                ),
                policy(
                    Some(&["sales"]),
                    None,
                    json!({"availableModels": ["haiku"]}),
                ),
                policy(None, None, json!({"permissions": {"deny": ["WebFetch"]}})),
            ],
            &Extras::default(),
        )
        .unwrap();
        let eng = ps.matched(&who("a@Corp.Example", &["eng"])).unwrap();
        assert_eq!(eng.index, 0);
        assert_eq!(
            eng.settings,
            json!({"permissions": {"deny": ["WebFetch"]}, "availableModels": ["opus"]})
        );
        assert_eq!(
            ps.matched(&who("a@other.example", &["eng"])).unwrap().index,
            2,
            "domain must match too"
        );
        assert_eq!(
            ps.matched(&who("b@x.example", &["sales", "x"]))
                .unwrap()
                .index,
            1
        );
        let none = Policies::new(
            &[policy(Some(&["eng"]), None, json!({}))],
            &Extras::default(),
        )
        .unwrap();
        assert!(none.matched(&who("c@x", &[])).is_none());
        assert_ne!(ps.list[0].uuid, ps.list[1].uuid);
        assert_eq!(
            ps.list[0].checksum,
            checksum::checksum(&ps.list[0].settings)
        );
    }

    #[test]
    fn otlp_env_and_pricing_are_added_to_every_policy() {
        let env = otlp_env(
            "https://gw.example",
            [true, false, false],
            &[("team".into(), "eng".into())],
        );
        let pricing = json!({"multiplier": 0.5}).as_object().unwrap().clone();
        let extras = Extras {
            env: Some(env),
            model_pricing: Some(pricing),
        };
        let ps = Policies::new(
            &[
                policy(
                    Some(&["a"]),
                    None,
                    json!({"env": {"X": "1", "OTEL_LOGS_EXPORTER": "otlp"}, "modelPricing": {"multiplier": 2}}),
                ),
                policy(None, None, json!({"modelPricing": {"note": "x"}})),
            ],
            &extras,
        )
        .unwrap();
        let s = &ps.list[0].settings;
        assert_eq!(s["env"]["X"], "1");
        assert_eq!(
            s["env"]["OTEL_LOGS_EXPORTER"], "otlp",
            "the policy's own env wins"
        );
        assert_eq!(s["env"]["OTEL_TRACES_EXPORTER"], "none");
        assert_eq!(s["env"]["OTEL_METRICS_EXPORTER"], "otlp");
        assert_eq!(s["env"]["OTEL_RESOURCE_ATTRIBUTES"], "team=eng");
        assert_eq!(
            s["env"]["OTEL_EXPORTER_OTLP_ENDPOINT"],
            "https://gw.example"
        );
        assert_eq!(s["env"]["OTEL_EXPORTER_OTLP_PROTOCOL"], "http/protobuf");
        assert_eq!(
            s["modelPricing"],
            json!({"multiplier": 2}),
            "its own pricing stays"
        );
        assert_eq!(
            ps.list[1].settings["modelPricing"],
            json!({"note": "x", "multiplier": 0.5})
        );
    }

    #[test]
    fn layered_merges_every_match_and_code_reaches_desktop() {
        let mut a = policy(
            Some(&["a"]),
            None,
            json!({"deniedModels": ["opus"], "model": "a"}),
        );
        let mut b = policy(
            Some(&["b"]),
            None,
            json!({"deniedModels": ["haiku"], "model": "b", "permissions": {"deny": ["WebFetch"]}}),
        );
        let base = policy(None, None, json!({"permissions": {"deny": ["Bash"]}}));
        a.layered = true;
        b.layered = true;
        let ps = Policies::new(&[a.clone(), b.clone(), base.clone()], &Extras::default()).unwrap();
        let both = ps.matched(&who("x@y", &["a", "b"])).unwrap();
        assert_eq!(both.index, 0);
        assert_eq!(both.indexes, vec![0, 1, 2]);
        assert_eq!(both.settings["model"], "a", "earlier policies win");
        assert_eq!(both.settings["deniedModels"], json!(["haiku", "opus"]));
        assert_eq!(
            both.settings["permissions"]["deny"],
            json!(["Bash", "WebFetch"])
        );
        assert_eq!(both.checksum, checksum::checksum(&both.settings));
        assert!(
            Arc::ptr_eq(&both, &ps.matched(&who("x@y", &["a", "b"])).unwrap()),
            "cached"
        );
        assert_eq!(ps.matched(&who("x@y", &["b"])).unwrap().indexes, vec![1]);
        assert!(!both.served_to_desktop);

        a.layered = false;
        b.layered = false;
        let first = Policies::new(&[a.clone(), b, base], &Extras::default()).unwrap();
        assert_eq!(
            first.matched(&who("x@y", &["a", "b"])).unwrap().settings["model"],
            "a"
        );

        a.under_code = true;
        let mut empty = policy(
            None,
            None,
            json!({"managedSourcesBehavior": "x", "sandbox": {}}),
        );
        empty.under_code = true;
        let mut cli = policy(Some(&["c"]), None, json!({"model": "c"}));
        cli.serve_to_desktop = Some(true);
        let ps = Policies::new(&[a, cli, empty], &Extras::default()).unwrap();
        assert!(ps.list[0].served_to_desktop);
        assert!(ps.list[1].served_to_desktop, "serve_to_desktop: true");
        assert!(!ps.list[2].served_to_desktop, "no content");
    }

    #[test]
    fn model_allowlist_entries() {
        let list = vec!["opus".to_owned(), "claude-sonnet-4-6".to_owned()];
        assert!(model_allowed(&list, "claude-opus-4-8"));
        assert!(model_allowed(&list, "claude-sonnet-4-6-20260101"));
        assert!(!model_allowed(&list, "claude-sonnet-4-5"));
        assert!(!model_allowed(&list, "claude-haiku-4-5"));
    }
}

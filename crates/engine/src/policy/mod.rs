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
pub mod merge;
pub mod routes;
pub mod webhook;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::config::ConfigError;
use crate::config::managed::{PolicyConfig, check_settings};
use crate::identity::UserIdentity;

/// One servable policy: the merged settings and what matches it.
#[derive(Debug, Clone)]
pub struct ResolvedPolicy {
    pub index: usize,
    pub uuid: String,
    pub checksum: String,
    pub settings: Value,
    pub desktop: Option<Map<String, Value>>,
    groups: Option<Vec<String>>,
    email_domain: Option<String>,
}

impl ResolvedPolicy {
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
        self.settings
            .get("availableModels")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
    }
}

#[derive(Debug, Clone, Default)]
pub struct Policies {
    list: Vec<ResolvedPolicy>,
}

/// Environment that points Claude Code's OpenTelemetry exporter at the gateway.
pub fn otlp_env(public_url: &str) -> Map<String, Value> {
    [
        ("CLAUDE_CODE_ENABLE_TELEMETRY", "1"),
        ("OTEL_METRICS_EXPORTER", "otlp"),
        ("OTEL_LOGS_EXPORTER", "otlp"),
        ("OTEL_TRACES_EXPORTER", "otlp"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", public_url),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), Value::String(v.to_owned())))
    .collect()
}

impl Policies {
    /// Merges and checks every policy. `extra_env` (the OTLP variables when telemetry
    /// forwarding is on) is merged into every policy's `env`.
    pub fn new(
        configs: &[PolicyConfig],
        extra_env: Option<&Map<String, Value>>,
    ) -> Result<Self, ConfigError> {
        let base = configs.iter().find(|p| p.is_catch_all());
        if let Some(pos) = configs.iter().position(PolicyConfig::is_catch_all)
            && pos + 1 < configs.len()
        {
            tracing::warn!(
                index = pos,
                "managed.policies[{pos}] matches everyone but is not last: the policies after it are never matched (it is still merged under them as the base)"
            );
        }
        let mut list = Vec::with_capacity(configs.len());
        for (i, p) in configs.iter().enumerate() {
            let (mut cli, desktop) = match base.filter(|_| !p.is_catch_all()) {
                Some(b) => (
                    merge::merge_cli(&b.cli, &p.cli),
                    merge::merge_desktop(b.desktop.as_ref(), p.desktop.as_ref()),
                ),
                None => (p.cli.clone(), p.desktop.clone()),
            };
            if let Some(extra) = extra_env {
                let env = merge::merge_cli(
                    &cli,
                    &Map::from_iter([("env".to_owned(), Value::Object(extra.clone()))]),
                );
                cli = env;
            }
            check_settings(&cli, &format!("managed.policies[{i}] (merged)"))?;
            let settings = Value::Object(cli);
            let sum = checksum::checksum(&settings);
            let digest = Sha256::digest(format!("gatehouse-policy:{i}:{sum}").as_bytes());
            let uuid =
                uuid::Builder::from_random_bytes(digest[..16].try_into().unwrap_or_default())
                    .into_uuid();
            list.push(ResolvedPolicy {
                index: i,
                uuid: uuid.to_string(),
                checksum: sum,
                settings,
                desktop,
                groups: p.groups.clone(),
                email_domain: p.email_domain.clone(),
            });
        }
        Ok(Self { list })
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The first policy that matches this person.
    pub fn matched(&self, who: &UserIdentity) -> Option<&ResolvedPolicy> {
        self.list.iter().find(|p| p.matches(who))
    }
}

/// Whether `model` is in an `availableModels` list. Entries are full ids, ids without a
/// date suffix, or family aliases (`opus`, `sonnet`, `haiku`, ...).
pub fn model_allowed(available: &[String], model: &str) -> bool {
    let norm = crate::models::normalize(model);
    let family = crate::models::family(model);
    available.iter().any(|a| {
        let a_norm = crate::models::normalize(a);
        a == model || a_norm == norm || family.is_some_and(|f| a_norm == f)
    })
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
            desktop: None,
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
            None,
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
        let none = Policies::new(&[policy(Some(&["eng"]), None, json!({}))], None).unwrap();
        assert!(none.matched(&who("c@x", &[])).is_none());
        assert_ne!(ps.list[0].uuid, ps.list[1].uuid);
        assert_eq!(
            ps.list[0].checksum,
            checksum::checksum(&ps.list[0].settings)
        );
    }

    #[test]
    fn otlp_env_is_merged_into_every_policy() {
        let env = otlp_env("https://gw.example");
        let ps = Policies::new(
            &[policy(None, None, json!({"env": {"X": "1"}}))],
            Some(&env),
        )
        .unwrap();
        let s = &ps.list[0].settings;
        assert_eq!(s["env"]["X"], "1");
        assert_eq!(
            s["env"]["OTEL_EXPORTER_OTLP_ENDPOINT"],
            "https://gw.example"
        );
        assert_eq!(s["env"]["OTEL_EXPORTER_OTLP_PROTOCOL"], "http/protobuf");
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

//! `managed`: per-role Claude Code managed settings (and Claude Desktop overlays), matched by
//! groups and email domain. `managed.settings` (a legacy JSON file) is one catch-all policy.
//!
//! Validation here checks shape and the keys a gateway cannot serve; merging with the
//! catch-all base and the merged-result checks live in `crate::policy`.

use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::ConfigError;
use crate::deps::Environment;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawManaged {
    /// Path of a legacy `managed-settings.json`, served as the one catch-all policy.
    pub settings: Option<String>,
    #[serde(default)]
    pub policies: Vec<RawPolicy>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPolicy {
    #[serde(rename = "match")]
    pub match_: RawMatch,
    /// Claude Code `managed-settings.json` content for the matched users.
    pub cli: Option<Value>,
    /// Claude Desktop overlay; its presence enables `/user/bootstrap`.
    pub desktop: Option<Value>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawMatch {
    /// Any of these groups.
    pub groups: Option<Vec<String>>,
    /// Exact email domain (case-insensitive).
    pub email_domain: Option<String>,
}

/// A validated policy, before merging.
#[derive(Debug, Clone)]
pub struct PolicyConfig {
    pub groups: Option<Vec<String>>,
    /// Lower-case.
    pub email_domain: Option<String>,
    pub cli: Map<String, Value>,
    pub desktop: Option<Map<String, Value>>,
}

impl PolicyConfig {
    pub fn is_catch_all(&self) -> bool {
        self.groups.is_none() && self.email_domain.is_none()
    }
}

/// Settings keys a gateway cannot serve: MCP servers, and the keys that choose the login
/// method or gateway (Claude Code honours those only from the machine's own policy).
pub const UNSERVABLE_KEYS: &[&str] = &[
    "mcpServers",
    "forceLoginMethod",
    "forceLoginGatewayUrl",
    "forceLoginOrgUUID",
    "gatewayInternalNetworks",
];

/// Desktop overlay fields a gateway may serve; connection, credential and telemetry fields
/// are written by the gateway itself.
pub const DESKTOP_FIELDS: &[&str] = &[
    "disabledBuiltinTools",
    "builtinToolPolicy",
    "coworkEgressAllowedHosts",
];

pub fn validate(raw: &RawManaged, env: &dyn Environment) -> Result<Vec<PolicyConfig>, ConfigError> {
    let mut out = Vec::new();
    if let Some(path) = &raw.settings {
        if !raw.policies.is_empty() {
            return Err(ConfigError::at(
                "managed.settings",
                "use either `settings` (one file) or `policies`, not both",
            ));
        }
        let p = Path::new(path);
        if !p.is_absolute() {
            return Err(ConfigError::at(
                "managed.settings",
                "must be an absolute path",
            ));
        }
        let text = env
            .read_file(p)
            .map_err(|e| ConfigError::at("managed.settings", format!("cannot read {path}: {e}")))?;
        let value: Value = serde_json::from_str(&text).map_err(|e| {
            ConfigError::at("managed.settings", format!("{path} is not valid JSON: {e}"))
        })?;
        let cli = settings_object(&value, "managed.settings")?;
        out.push(PolicyConfig {
            groups: None,
            email_domain: None,
            cli,
            desktop: None,
        });
        return Ok(out);
    }
    for (i, p) in raw.policies.iter().enumerate() {
        let at = |f: &str| format!("managed.policies[{i}].{f}");
        if let Some(g) = &p.match_.groups
            && (g.is_empty() || g.iter().any(|x| x.trim().is_empty()))
        {
            return Err(ConfigError::at(
                &at("match.groups"),
                "must list non-empty group names (omit it to match any group)",
            ));
        }
        let domain = match &p.match_.email_domain {
            Some(d) if d.trim().is_empty() || d.contains('@') => {
                return Err(ConfigError::at(
                    &at("match.email_domain"),
                    "must be a bare domain such as corp.example",
                ));
            }
            Some(d) => Some(d.trim().to_ascii_lowercase()),
            None => None,
        };
        let cli = match &p.cli {
            Some(v) => settings_object(v, &at("cli"))?,
            None => Map::new(),
        };
        let desktop = match &p.desktop {
            None => None,
            Some(Value::Object(m)) => {
                for k in m.keys() {
                    if !DESKTOP_FIELDS.contains(&k.as_str()) {
                        return Err(ConfigError::at(
                            &at(&format!("desktop.{k}")),
                            format!(
                                "is not a field a gateway can serve to Claude Desktop (servable: {})",
                                DESKTOP_FIELDS.join(", ")
                            ),
                        ));
                    }
                }
                Some(m.clone())
            }
            Some(_) => return Err(ConfigError::at(&at("desktop"), "must be a mapping")),
        };
        if p.cli.is_none() && p.desktop.is_none() {
            return Err(ConfigError::at(
                &format!("managed.policies[{i}]"),
                "needs `cli`, `desktop` or both",
            ));
        }
        out.push(PolicyConfig {
            groups: p.match_.groups.clone(),
            email_domain: domain,
            cli,
            desktop,
        });
    }
    Ok(out)
}

fn settings_object(v: &Value, path: &str) -> Result<Map<String, Value>, ConfigError> {
    let Value::Object(m) = v else {
        return Err(ConfigError::at(
            path,
            "must be a mapping of Claude Code settings",
        ));
    };
    check_settings(m, path)?;
    Ok(m.clone())
}

/// Shape checks for the keys the gateway reads or merges; applied to each policy and again
/// to every merged result.
pub fn check_settings(m: &Map<String, Value>, path: &str) -> Result<(), ConfigError> {
    for k in UNSERVABLE_KEYS {
        if m.contains_key(*k) {
            return Err(ConfigError::at(
                &format!("{path}.{k}"),
                "cannot be served through a gateway",
            ));
        }
    }
    let string_map = |key: &str| -> Result<(), ConfigError> {
        match m.get(key) {
            None => Ok(()),
            Some(Value::Object(o)) if o.values().all(Value::is_string) => Ok(()),
            Some(_) => Err(ConfigError::at(
                &format!("{path}.{key}"),
                "must be a mapping of strings",
            )),
        }
    };
    string_map("env")?;
    string_map("modelOverrides")?;
    let string_list = |v: Option<&Value>, p: String| -> Result<(), ConfigError> {
        match v {
            None => Ok(()),
            Some(Value::Array(a)) if a.iter().all(Value::is_string) => Ok(()),
            Some(_) => Err(ConfigError::at(&p, "must be a list of strings")),
        }
    };
    string_list(m.get("availableModels"), format!("{path}.availableModels"))?;
    if let Some(p) = m.get("permissions") {
        let Value::Object(p) = p else {
            return Err(ConfigError::at(
                &format!("{path}.permissions"),
                "must be a mapping",
            ));
        };
        for list in ["allow", "ask", "deny", "additionalDirectories"] {
            string_list(p.get(list), format!("{path}.permissions.{list}"))?;
        }
    }
    if let Some(h) = m.get("hooks") {
        let Value::Object(h) = h else {
            return Err(ConfigError::at(
                &format!("{path}.hooks"),
                "must be a mapping of event -> list",
            ));
        };
        for (event, v) in h {
            if !v.is_array() {
                return Err(ConfigError::at(
                    &format!("{path}.hooks.{event}"),
                    "must be a list",
                ));
            }
        }
    }
    for list in [
        "disabledMcpjsonServers",
        "deniedMcpServers",
        "blockedMarketplaces",
    ] {
        if m.get(list).is_some_and(|v| !v.is_array()) {
            return Err(ConfigError::at(&format!("{path}.{list}"), "must be a list"));
        }
    }
    Ok(())
}

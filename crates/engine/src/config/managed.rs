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
    /// Path of a legacy `managed-settings.json`, served as the one catch-all policy. A
    /// missing file is empty settings; ignored when `policies` is set.
    pub settings: Option<String>,
    /// `first_match` (default): the first matching policy, merged over the catch-all.
    /// `layered`: every matching policy, merged in order over the catch-all.
    pub policy_mode: Option<PolicyMode>,
    pub policies: Option<Vec<RawPolicy>>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PolicyMode {
    #[default]
    FirstMatch,
    Layered,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPolicy {
    /// Who the policy is for; omitted or `{}` = everyone (the catch-all).
    #[serde(rename = "match", default)]
    pub match_: RawMatch,
    /// Claude Code settings that also reach Claude Desktop's Code tab. If any policy uses
    /// `code`, none may use `cli`/`settings`.
    pub code: Option<Value>,
    /// Claude Code `managed-settings.json` content for the matched users.
    pub cli: Option<Value>,
    /// Alias of `cli`.
    pub settings: Option<Value>,
    /// Claude Desktop overlay; its presence enables `/user/bootstrap`.
    pub desktop: Option<Value>,
    /// Serve this policy's Claude Code settings to Claude Desktop sessions too (ignored
    /// with `code`, which always reaches them).
    pub serve_to_desktop: Option<bool>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawMatch {
    /// Any of these groups.
    pub groups: Option<Vec<String>>,
    /// Exact email domain (trimmed, a leading `@` dropped, case-insensitive).
    pub email_domain: Option<String>,
}

/// A validated policy, before merging.
#[derive(Debug, Clone, Default)]
pub struct PolicyConfig {
    pub groups: Option<Vec<String>>,
    /// Lower-case.
    pub email_domain: Option<String>,
    pub cli: Map<String, Value>,
    pub desktop: Option<Map<String, Value>>,
    /// Written under `code:`: served to Claude Desktop sessions (the Code tab) too.
    pub under_code: bool,
    pub serve_to_desktop: Option<bool>,
    /// `managed.policy_mode: layered` (the same on every policy of a file).
    pub layered: bool,
    /// Read from the legacy `managed.settings` JSON file (the reference labels it
    /// `managed settings` in its messages).
    pub from_settings_file: bool,
}

impl PolicyConfig {
    pub fn is_catch_all(&self) -> bool {
        self.groups.is_none() && self.email_domain.is_none()
    }
}

pub fn validate(raw: &RawManaged, env: &dyn Environment) -> Result<Vec<PolicyConfig>, ConfigError> {
    let Some(policies) = &raw.policies else {
        return match &raw.settings {
            Some(path) => Ok(vec![PolicyConfig {
                cli: settings_file(path, env)?,
                from_settings_file: true,
                ..PolicyConfig::default()
            }]),
            None => Ok(Vec::new()),
        };
    };
    if raw.settings.is_some() {
        tracing::warn!("managed.settings is ignored because managed.policies is set");
    }
    let layered = raw.policy_mode == Some(PolicyMode::Layered);
    let any_code = policies.iter().any(|p| p.code.is_some());
    // Every policy is checked, so one refusal lists the problems of all of them.
    let mut out = Vec::new();
    let mut refused: Option<ConfigError> = None;
    for (i, p) in policies.iter().enumerate() {
        match policy(i, p, any_code, layered) {
            Ok(c) => out.push(c),
            Err(e) => {
                refused = Some(match refused {
                    Some(r) => r.and(e),
                    None => e,
                });
            }
        }
    }
    refused.map_or(Ok(out), Err)
}

/// `managed.settings`: a JSON file; a missing file is empty settings (as the reference).
fn settings_file(path: &str, env: &dyn Environment) -> Result<Map<String, Value>, ConfigError> {
    let text = match env.read_file(Path::new(path)) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
        Err(e) => {
            return Err(ConfigError::at(
                "managed.settings",
                format!("cannot read {path}: {e}"),
            ));
        }
    };
    // A file saved with a UTF-8 byte-order mark is read as the reference reads it.
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let value: Value = serde_json::from_str(text).map_err(|e| {
        ConfigError::at("managed.settings", format!("{path} is not valid JSON: {e}"))
    })?;
    settings_object(&value, "managed.settings")
}

fn policy(
    i: usize,
    p: &RawPolicy,
    any_code: bool,
    layered: bool,
) -> Result<PolicyConfig, ConfigError> {
    let at = |f: &str| format!("managed.policies[{i}].{f}");
    if any_code {
        for (name, block) in [("cli", &p.cli), ("settings", &p.settings)] {
            if block.is_some() {
                let why = if p.code.is_some() {
                    format!(
                        "this policy has a `code` block and a `{name}` block. Put all its settings into the one `code` block"
                    )
                } else {
                    format!(
                        "this file has a `code` block, so this `{name}` block's rules would not reach Claude Desktop's Code tab. Write every block under `code`, or every block under `cli` (terminal Claude Code only)"
                    )
                };
                return Err(ConfigError::at(&at(name), why));
            }
        }
    }
    if let Some(g) = &p.match_.groups
        && (g.is_empty() || g.iter().any(|x| x.trim().is_empty()))
    {
        return Err(ConfigError::at(
            &at("match.groups"),
            "must list non-empty group names (omit it to match any group)",
        ));
    }
    let email_domain = match &p.match_.email_domain {
        Some(d) => {
            Some(email_domain(d).map_err(|m| ConfigError::at(&at("match.email_domain"), m))?)
        }
        None => None,
    };
    let (name, block) = [
        ("code", &p.code),
        ("cli", &p.cli),
        ("settings", &p.settings),
    ]
    .into_iter()
    .find(|(_, b)| b.is_some())
    .unwrap_or(("cli", &None));
    let cli = match block {
        Some(v) => settings_object(v, &at(name))?,
        None => Map::new(),
    };
    let is_catch_all = p.match_.groups.is_none() && email_domain.is_none();
    if layered {
        super::managed_layered::check(&cli, &at(name), is_catch_all)?;
    }
    let desktop = match &p.desktop {
        None => None,
        Some(Value::Object(m)) => {
            let found = super::desktop_overlay::check(m, &at("desktop"));
            if !found.errors.is_empty() {
                return Err(refusal("", &found.errors));
            }
            Some(m.clone())
        }
        Some(_) => {
            return Err(ConfigError::at(
                &at("desktop"),
                "must be a mapping of Claude Desktop keys",
            ));
        }
    };
    Ok(PolicyConfig {
        groups: p.match_.groups.clone(),
        email_domain,
        cli,
        desktop,
        under_code: any_code,
        serve_to_desktop: p.serve_to_desktop,
        layered,
        from_settings_file: false,
    })
}

/// `match.email_domain` as the reference reads it: trimmed, a leading `@` dropped,
/// lower-cased; one bare domain must remain.
fn email_domain(raw: &str) -> Result<String, &'static str> {
    if raw.is_empty() {
        return Err(
            "is empty: an empty domain would match every signed-in user; set a domain or remove the key",
        );
    }
    let d = raw.trim();
    let d = d.strip_prefix('@').unwrap_or(d).to_lowercase();
    if d.is_empty() {
        return Err("is blank after normalization: set a domain or remove the key");
    }
    if d.chars().any(|c| c == '@' || c == ',' || c.is_whitespace()) {
        return Err("must be one bare domain such as acme.com (not an email address or a list)");
    }
    Ok(d)
}

fn settings_object(v: &Value, path: &str) -> Result<Map<String, Value>, ConfigError> {
    let Value::Object(m) = v else {
        return Err(ConfigError::at(
            path,
            "must be a mapping of Claude Code settings",
        ));
    };
    let issues = super::settings_schema::check_block(m);
    if !issues.is_empty() {
        return Err(refusal(path, &issues));
    }
    Ok(m.clone())
}

/// Every problem of one block in one error, each at its full path.
fn refusal(base: &str, issues: &[(String, String)]) -> ConfigError {
    let full = |p: &str| match (base.is_empty(), p.is_empty()) {
        (_, true) => base.to_owned(),
        (true, false) => p.to_owned(),
        (false, false) => format!("{base}.{p}"),
    };
    let all = issues
        .iter()
        .map(|(p, m)| super::ConfigIssue {
            path: full(p),
            message: m.clone(),
        })
        .collect();
    ConfigError::from_issues(all).unwrap_or_else(|| ConfigError::at(base, "refused"))
}

/// Shape checks for the keys the gateway itself reads or merges, applied to every merged
/// result (each block was checked against Claude Code's settings schema before).
pub fn check_settings(m: &Map<String, Value>, path: &str) -> Result<(), ConfigError> {
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
    string_map("modelOverrides")?;
    let string_list = |v: Option<&Value>, p: String| -> Result<(), ConfigError> {
        match v {
            None => Ok(()),
            Some(Value::Array(a)) if a.iter().all(Value::is_string) => Ok(()),
            Some(_) => Err(ConfigError::at(&p, "must be a list of strings")),
        }
    };
    string_list(m.get("availableModels"), format!("{path}.availableModels"))?;
    string_list(m.get("deniedModels"), format!("{path}.deniedModels"))?;
    if let Some(v) = m.get("availableModelsMatch")
        && !matches!(v.as_str(), Some("prefix" | "exact"))
    {
        return Err(ConfigError::at(
            &format!("{path}.availableModelsMatch"),
            "must be \"prefix\" or \"exact\"",
        ));
    }
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

#[cfg(test)]
#[path = "managed_tests.rs"]
mod tests;

//! `managed.policy_mode: layered`: every matching policy applies, merged. The reference
//! forbids what could let one matching policy undo another's restrictions: policy helpers,
//! hook-wide switches outside the catch-all, and `!`-prefixed path rules in `deny`/`ask`.

use serde_json::{Map, Value};

use super::ConfigError;

/// Keys whose output replaces or adds to the served settings.
const HELPER_KEYS: &[&str] = &["policyHelper", "policyHelpers"];
/// Keys that limit every hook a person is served; only the catch-all may set them.
const HOOK_WIDE_KEYS: &[&str] = &[
    "disableAllHooks",
    "allowedHttpHookUrls",
    "httpHookAllowedEnvVars",
];

/// A `Read(!...)` / `Edit(./!...)` rule takes paths back out of the rules before it.
fn carves_out(rule: &str) -> bool {
    ["Read(", "Edit("].iter().any(|p| {
        rule.strip_prefix(p)
            .map(|rest| rest.strip_prefix("./").unwrap_or(rest))
            .is_some_and(|rest| rest.starts_with('!'))
    })
}

/// Checks one policy's settings block (`path` names it) for layered mode.
pub fn check(cli: &Map<String, Value>, path: &str, catch_all: bool) -> Result<(), ConfigError> {
    for k in HELPER_KEYS {
        if cli.contains_key(*k) {
            return Err(ConfigError::at(
                &format!("{path}.{k}"),
                "can't be used with policy_mode: layered: a policy helper's output replaces or adds to the served settings, so it could drop another matching policy's deny rules. Remove it, or remove policy_mode",
            ));
        }
    }
    if !catch_all {
        for k in HOOK_WIDE_KEYS {
            if cli.contains_key(*k) {
                return Err(ConfigError::at(
                    &format!("{path}.{k}"),
                    "can't be used in this policy with policy_mode: layered: it limits every hook a person is served, so it could switch off another matching policy's hooks. Move it to a match: {} policy, or remove policy_mode",
                ));
            }
        }
    }
    for list in ["deny", "ask"] {
        let rules = cli
            .get("permissions")
            .and_then(|p| p.get(list))
            .and_then(Value::as_array);
        for rule in rules.into_iter().flatten().filter_map(Value::as_str) {
            if carves_out(rule) {
                return Err(ConfigError::at(
                    &format!("{path}.permissions.{list}"),
                    format!(
                        "\"{rule}\" can't be used with policy_mode: layered: a rule whose path starts with \"!\" takes paths back out of the rules before it, which under layered can be another matching policy's. Remove it and narrow the rule it carved out of, or remove policy_mode"
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn m(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn layered_restrictions() {
        assert!(check(&m(json!({"policyHelper": {}})), "p", true).is_err());
        assert!(check(&m(json!({"disableAllHooks": true})), "p", true).is_ok());
        let e = check(&m(json!({"disableAllHooks": true})), "p", false).unwrap_err();
        assert_eq!(e.path, "p.disableAllHooks");
        let e = check(
            &m(json!({"permissions": {"deny": ["Read(./!secret/**)"]}})),
            "p",
            true,
        )
        .unwrap_err();
        assert_eq!(e.path, "p.permissions.deny");
        assert!(
            check(
                &m(json!({"permissions": {"deny": ["Read(./x!)", "Bash(!x)"]}})),
                "p",
                false
            )
            .is_ok()
        );
    }
}

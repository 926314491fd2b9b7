//! Merging a matched role policy over the catch-all base, field family by field family:
//!
//! | field | rule |
//! |---|---|
//! | any other top-level key | the role's value wins |
//! | `env`, `modelOverrides`, `skillOverrides` | shallow merge, the role's keys win |
//! | `permissions.deny`, `permissions.ask` | union without duplicates |
//! | other `permissions.*` | the role's value wins |
//! | `hooks.<event>` | union without duplicates, per event |
//! | `disabledMcpjsonServers`, `deniedMcpServers`, `blockedMarketplaces`, `deniedModels` | union without duplicates |
//! | Desktop `disabledBuiltinTools` | union without duplicates |
//! | Desktop `builtinToolPolicy` | the role's entries, then every base entry that is not `allow` re-applied |
//!
//! So a role can add restrictions and change ordinary values, but never drop a base deny.

use serde_json::{Map, Value};

const SHALLOW: &[&str] = &["env", "modelOverrides", "skillOverrides"];
const UNION_LISTS: &[&str] = &[
    "disabledMcpjsonServers",
    "deniedMcpServers",
    "blockedMarketplaces",
    "deniedModels",
];
const UNION_PERMISSIONS: &[&str] = &["deny", "ask"];

fn union(base: Option<&Value>, role: Option<&Value>) -> Value {
    let mut out: Vec<Value> = Vec::new();
    for v in [base, role].into_iter().flatten() {
        if let Value::Array(items) = v {
            for item in items {
                if !out.contains(item) {
                    out.push(item.clone());
                }
            }
        }
    }
    Value::Array(out)
}

fn shallow(base: Option<&Value>, role: Option<&Value>) -> Value {
    let mut out = Map::new();
    for v in [base, role].into_iter().flatten() {
        if let Value::Object(m) = v {
            for (k, x) in m {
                out.insert(k.clone(), x.clone());
            }
        }
    }
    Value::Object(out)
}

/// Claude Code settings: `role` over `base`.
pub fn merge_cli(base: &Map<String, Value>, role: &Map<String, Value>) -> Map<String, Value> {
    let mut out = base.clone();
    for (k, v) in role {
        let merged = match k.as_str() {
            k if SHALLOW.contains(&k) => shallow(base.get(k), Some(v)),
            k if UNION_LISTS.contains(&k) => union(base.get(k), Some(v)),
            "permissions" => {
                let mut p = base
                    .get("permissions")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                if let Value::Object(rp) = v {
                    for (pk, pv) in rp {
                        let value = if UNION_PERMISSIONS.contains(&pk.as_str()) {
                            union(p.get(pk), Some(pv))
                        } else {
                            pv.clone()
                        };
                        p.insert(pk.clone(), value);
                    }
                }
                Value::Object(p)
            }
            "hooks" => {
                let mut h = base
                    .get("hooks")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                if let Value::Object(rh) = v {
                    for (event, list) in rh {
                        let value = union(h.get(event), Some(list));
                        h.insert(event.clone(), value);
                    }
                }
                Value::Object(h)
            }
            _ => v.clone(),
        };
        out.insert(k.clone(), merged);
    }
    out
}

/// Claude Desktop overlay: `role` over `base`, base restrictions re-applied last.
pub fn merge_desktop(
    base: Option<&Map<String, Value>>,
    role: Option<&Map<String, Value>>,
) -> Option<Map<String, Value>> {
    let (base, role) = match (base, role) {
        (None, None) => return None,
        (Some(b), None) => return Some(b.clone()),
        (None, Some(r)) => return Some(r.clone()),
        (Some(b), Some(r)) => (b, r),
    };
    let mut out = base.clone();
    for (k, v) in role {
        let merged = match k.as_str() {
            "disabledBuiltinTools" | "coworkEgressAllowedHosts" => union(base.get(k), Some(v)),
            "builtinToolPolicy" => {
                let mut p = v.as_object().cloned().unwrap_or_default();
                if let Some(Value::Object(bp)) = base.get(k) {
                    for (tool, setting) in bp {
                        if setting.as_str() != Some("allow") {
                            p.insert(tool.clone(), setting.clone());
                        }
                    }
                }
                Value::Object(p)
            }
            _ => v.clone(),
        };
        out.insert(k.clone(), merged);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn every_field_family() {
        let base = obj(json!({
            "model": "claude-sonnet-4-6",
            "cleanupPeriodDays": 30,
            "env": {"A": "base", "B": "base"},
            "modelOverrides": {"opus": "claude-opus-4-8"},
            "skillOverrides": {"x": "off"},
            "permissions": {"deny": ["WebFetch", "Bash(curl:*)"], "ask": ["Bash(git push:*)"], "allow": ["Read"], "defaultMode": "default"},
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}]},
            "disabledMcpjsonServers": ["a"],
            "deniedMcpServers": [{"serverName": "evil"}],
            "blockedMarketplaces": ["m1"],
            "deniedModels": ["haiku"]
        }));
        let role = obj(json!({
            "model": "claude-opus-4-8",
            "env": {"B": "role", "C": "role"},
            "modelOverrides": {"sonnet": "claude-sonnet-5"},
            "permissions": {"deny": ["WebFetch", "Write(/etc/**)"], "allow": ["Bash"], "defaultMode": "acceptEdits"},
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}, {"matcher": "Write"}], "Stop": [{"hooks": []}]},
            "disabledMcpjsonServers": ["b", "a"],
            "deniedMcpServers": [{"serverName": "evil"}, {"serverName": "worse"}],
            "blockedMarketplaces": ["m2"],
            "deniedModels": ["claude-opus-4-6", "haiku"],
            "availableModels": ["opus"]
        }));
        let m = Value::Object(merge_cli(&base, &role));
        assert_eq!(m["model"], "claude-opus-4-8");
        assert_eq!(m["cleanupPeriodDays"], 30);
        assert_eq!(m["env"], json!({"A": "base", "B": "role", "C": "role"}));
        assert_eq!(
            m["modelOverrides"],
            json!({"opus": "claude-opus-4-8", "sonnet": "claude-sonnet-5"})
        );
        assert_eq!(m["skillOverrides"], json!({"x": "off"}));
        assert_eq!(
            m["permissions"]["deny"],
            json!(["WebFetch", "Bash(curl:*)", "Write(/etc/**)"])
        );
        assert_eq!(m["permissions"]["ask"], json!(["Bash(git push:*)"]));
        assert_eq!(m["permissions"]["allow"], json!(["Bash"]));
        assert_eq!(m["permissions"]["defaultMode"], "acceptEdits");
        assert_eq!(m["hooks"]["PreToolUse"].as_array().unwrap().len(), 2);
        assert_eq!(m["hooks"]["Stop"], json!([{"hooks": []}]));
        assert_eq!(m["disabledMcpjsonServers"], json!(["a", "b"]));
        assert_eq!(
            m["deniedMcpServers"],
            json!([{"serverName": "evil"}, {"serverName": "worse"}])
        );
        assert_eq!(m["blockedMarketplaces"], json!(["m1", "m2"]));
        assert_eq!(m["availableModels"], json!(["opus"]));
        assert_eq!(m["deniedModels"], json!(["haiku", "claude-opus-4-6"]));
    }

    #[test]
    fn a_role_cannot_drop_a_base_deny() {
        let base = obj(json!({"permissions": {"deny": ["WebFetch"]}}));
        let role = obj(json!({"permissions": {"deny": []}}));
        assert_eq!(
            Value::Object(merge_cli(&base, &role))["permissions"]["deny"],
            json!(["WebFetch"])
        );
    }

    #[test]
    fn desktop_base_restrictions_come_back() {
        let base = obj(
            json!({"disabledBuiltinTools": ["computer"], "builtinToolPolicy": {"browser": "block", "files": "allow"}}),
        );
        let role = obj(
            json!({"disabledBuiltinTools": ["shell"], "builtinToolPolicy": {"browser": "allow", "files": "ask", "net": "allow"}}),
        );
        let m = Value::Object(merge_desktop(Some(&base), Some(&role)).unwrap());
        assert_eq!(m["disabledBuiltinTools"], json!(["computer", "shell"]));
        assert_eq!(
            m["builtinToolPolicy"],
            json!({"browser": "block", "files": "ask", "net": "allow"})
        );
        assert!(merge_desktop(None, None).is_none());
    }
}

//! A role's model rules as the reference gateway applies them on inference:
//! `availableModels` (with `availableModelsMatch: prefix | exact`) and `deniedModels`,
//! checked against the body's `model` and every `model` string nested in the body.

use serde_json::Value;

use crate::config::CLAUDE_FAMILIES;

/// Aliases whose model depends on the release or settings: ignored in `deniedModels`.
const MOVING_ALIASES: &[&str] = &[
    "default",
    "best",
    "opusplan",
    "sonnet[1m]",
    "opus[1m]",
    "haiku[1m]",
];

/// The rules of one resolved policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelRules {
    pub available: Option<Vec<String>>,
    pub exact: bool,
    pub denied: Vec<String>,
}

/// Why a model is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Denied,
    Unlisted,
}

impl ModelRules {
    pub fn from_settings(settings: &Value) -> Self {
        let strings = |k: &str| {
            settings.get(k).and_then(Value::as_array).map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
        };
        Self {
            available: strings("availableModels"),
            exact: settings.get("availableModelsMatch").and_then(Value::as_str) == Some("exact"),
            denied: strings("deniedModels").unwrap_or_default(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.available.is_none() && self.denied.is_empty()
    }

    pub fn check(&self, model: &str) -> Option<Refusal> {
        if self.denied.iter().any(|d| denies(d, model)) {
            return Some(Refusal::Denied);
        }
        match &self.available {
            Some(list) if !allows(list, model, self.exact) => Some(Refusal::Unlisted),
            _ => None,
        }
    }

    /// The reference's message for a refusal of `model`.
    pub fn message(refusal: Refusal, model: &str) -> String {
        let m = printable(model);
        match refusal {
            Refusal::Denied => format!("model {m} is blocked by your role's deniedModels denylist"),
            Refusal::Unlisted => {
                format!("model {m} is not in your role's availableModels allowlist")
            }
        }
    }

    /// The first nested `model` field (not the top-level one) these rules refuse, as the
    /// reference's `<path>: <reason>` message.
    pub fn check_nested(&self, body: &Value) -> Option<String> {
        let mut path = Vec::new();
        let mut fields = 0;
        walk(body, &mut path, &mut fields, &|m| {
            self.check(m).map(|r| Self::message(r, m))
        })
        .map(|(p, reason)| format!("{}: {reason}", printable(&p)))
    }
}

/// The reference's refusal message for a request body, if these rules refuse it: the
/// top-level `model` first, then nested `model` fields.
pub fn refusal(rules: &ModelRules, model: &str, body: &[u8]) -> Option<String> {
    if let Some(r) = rules.check(model) {
        return Some(ModelRules::message(r, model));
    }
    let value: Value = serde_json::from_slice(body).ok()?;
    rules.check_nested(&value)
}

/// Printable ASCII only, at most 128 characters (then `...`).
fn printable(s: &str) -> String {
    let t: String = s.chars().filter(|c| (' '..='~').contains(c)).collect();
    if t.len() > 128 {
        format!("{}...", &t[..128])
    } else {
        t
    }
}

/// Keys whose values are tool or schema data, not request structure.
const OPAQUE: &[&str] = &[
    "input",
    "input_schema",
    "input_examples",
    "output_schema",
    "output_examples",
    "schema",
    "tags",
    "classifier_context",
];

fn walk(
    v: &Value,
    path: &mut Vec<String>,
    fields: &mut usize,
    check: &dyn Fn(&str) -> Option<String>,
) -> Option<(String, String)> {
    if path.len() >= 1000 {
        return Some((
            path.join("."),
            "refused by this gateway: the request JSON is nested more than 1,000 levels deep"
                .into(),
        ));
    }
    let fallback = v.get("type").and_then(Value::as_str) == Some("fallback");
    let entries: Vec<(String, &Value)> = match v {
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, x)| (i.to_string(), x))
            .collect(),
        Value::Object(o) => o.iter().map(|(k, x)| (k.clone(), x)).collect(),
        _ => return None,
    };
    for (k, x) in entries {
        let here = || {
            [path.as_slice(), std::slice::from_ref(&k)]
                .concat()
                .join(".")
        };
        if k == "model" && !path.is_empty() {
            match x {
                Value::String(m) => {
                    *fields += 1;
                    if *fields > 100 {
                        return Some((here(), "refused by this gateway: the request names more than 100 models in `model` fields".into()));
                    }
                    if let Some(reason) = check(m) {
                        return Some((here(), reason));
                    }
                    continue;
                }
                Value::Object(_) => {}
                Value::Null => continue,
                _ => {
                    return Some((
                        here(),
                        "refused by this gateway: `model` must be a string".into(),
                    ));
                }
            }
        }
        let skip = OPAQUE.contains(&k.as_str()) || (fallback && (k == "from" || k == "to"));
        if (x.is_object() || x.is_array()) && !skip && !(k == "model" && path.is_empty()) {
            path.push(k);
            let hit = walk(x, path, fields, check);
            path.pop();
            if hit.is_some() {
                return hit;
            }
        }
    }
    None
}

fn lower(s: &str) -> String {
    let mut s = s.trim().to_ascii_lowercase();
    if let Some(i) = s.find('[') {
        s.truncate(i);
    }
    s.trim().to_owned()
}

fn is_family(s: &str) -> bool {
    CLAUDE_FAMILIES.contains(&s)
}

/// `id` starts with `prefix` at a `-` boundary.
fn extends(id: &str, prefix: &str) -> bool {
    id.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
}

/// The family word appears in `id` as a whole `-`-separated part.
fn in_family(id: &str, family: &str) -> bool {
    crate::models::family(id) == Some(family) || id.split(['-', '.', ':', '/']).any(|p| p == family)
}

/// A family alias is set aside when the list also names a model of that family.
fn shadowed(family: &str, list: &[String]) -> bool {
    list.iter().filter(|n| !is_family(n)).any(|n| {
        n.match_indices(family)
            .any(|(i, _)| matches!(n.as_bytes().get(i + family.len()), None | Some(b'-')))
    })
}

/// A parsed Claude model id: family, major and (optional) minor version.
#[derive(Debug, PartialEq, Eq)]
struct ModelId {
    family: String,
    major: u32,
    minor: Option<u32>,
}

/// Parses `claude-<family>-<major>[-<minor>]...`, ignoring a provider prefix, a date and
/// `-fast`/`-latest`/`-v1` tails.
fn parse(id: &str) -> Option<ModelId> {
    let from = id.find("claude-")?;
    let mut parts = id[from + "claude-".len()..].split(['-', ':', '@']);
    let family = parts.next().filter(|f| is_family(f))?.to_owned();
    let version = |p: Option<&str>| {
        p.filter(|p| (1..=2).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|p| p.parse().ok())
    };
    let major = version(parts.next())?;
    Some(ModelId {
        family,
        major,
        minor: version(parts.next()),
    })
}

/// `exact`: an id entry allows only its own version (dated and `-fast` spellings included).
fn exact_match(id: &str, entry: &str) -> bool {
    let strip = |s: &str| {
        let n = crate::models::normalize(s);
        n.strip_suffix("-fast").map(str::to_owned).unwrap_or(n)
    };
    match (parse(id), parse(entry)) {
        (Some(a), Some(b)) => a == b && (entry.ends_with("-latest") == id.ends_with("-latest")),
        _ => strip(id) == strip(entry),
    }
}

/// Whether an `availableModels` list allows `model` (the reference's matcher).
pub fn allows(list: &[String], model: &str, exact: bool) -> bool {
    if list.is_empty() {
        return false;
    }
    let list: Vec<String> = list.iter().map(|a| lower(a)).collect();
    let m = lower(model);
    if list.contains(&m) && (!is_family(&m) || !shadowed(&m, &list)) {
        return true;
    }
    if list
        .iter()
        .any(|a| is_family(a) && !shadowed(a, &list) && in_family(&m, a))
    {
        return true;
    }
    list.iter().filter(|a| !is_family(a)).any(|a| {
        if exact && !exact_match(&m, a) {
            return false;
        }
        extends(&m, a) || (!a.starts_with("claude-") && extends(&m, &format!("claude-{a}")))
    })
}

/// Whether one `deniedModels` entry blocks `model`.
pub fn denies(entry: &str, model: &str) -> bool {
    let e = lower(entry);
    let m = lower(model);
    if e.is_empty() || MOVING_ALIASES.contains(&e.as_str()) {
        return false;
    }
    if is_family(&e) {
        return in_family(&m, &e);
    }
    let spelled = if e.starts_with("claude-") || parse(&e).is_some() {
        e.clone()
    } else {
        format!("claude-{e}")
    };
    match (parse(&spelled), parse(&m)) {
        (Some(d), Some(id)) => {
            d.family == id.family
                && d.major == id.major
                && d.minor.is_none_or(|x| id.minor == Some(x))
        }
        (Some(_), None) => false,
        (None, _) => m == e,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn v(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn available_prefix_and_exact() {
        let l = v(&["claude-opus-5", "sonnet"]);
        assert!(allows(&l, "claude-opus-5-5", false));
        assert!(!allows(&l, "claude-opus-5-5", true));
        assert!(allows(&l, "claude-opus-5-20270101", true));
        assert!(allows(&l, "claude-opus-5-fast", true));
        assert!(allows(&l, "claude-sonnet-4-6", true));
        assert!(!allows(&l, "claude-haiku-4-5", false));
        assert!(!allows(&v(&[]), "claude-opus-5", false));
        // A family alias is set aside when the list names a model of the family.
        assert!(!allows(
            &v(&["opus", "claude-opus-4-6"]),
            "claude-opus-4-8",
            false
        ));
        assert!(allows(&v(&["opus-4-6"]), "claude-opus-4-6-20260101", false));
    }

    #[test]
    fn denied_entries() {
        assert!(denies("opus", "claude-opus-4-8"));
        assert!(denies(
            "claude-opus-5-5",
            "us.anthropic.claude-opus-5-5-20270101-v1:0"
        ));
        assert!(!denies("claude-opus-5-5", "claude-opus-5"));
        assert!(denies("claude-opus-5", "claude-opus-5-5"));
        assert!(denies("opus-4-6[1m]", "claude-opus-4-6"));
        assert!(!denies("default", "claude-opus-4-6"));
        assert!(!denies("", "claude-opus-4-6"));
        assert!(denies("my-model", "My-Model"));
        assert!(!denies("my-model", "my-model-2"));
    }

    #[test]
    fn nested_models_are_checked() {
        let r = ModelRules {
            available: None,
            exact: false,
            denied: v(&["haiku"]),
        };
        let body = json!({"model": "claude-opus-4-8", "tools": [{"input_schema": {"model": "claude-haiku-4-5"}}],
            "context_management": {"edits": [{"model": "claude-haiku-4-5"}]}});
        assert_eq!(
            r.check_nested(&body).unwrap(),
            "context_management.edits.0.model: model claude-haiku-4-5 is blocked by your role's deniedModels denylist"
        );
        assert!(
            r.check_nested(&json!({"model": "claude-haiku-4-5"}))
                .is_none(),
            "the top level is checked apart"
        );
        assert!(
            r.check_nested(&json!({"a": {"model": 3}}))
                .unwrap()
                .contains("`model` must be a string")
        );
    }
}

//! Claude Code's settings schema and the check the reference gateway runs on every managed
//! `cli` / `code` / `settings` block: keys Claude Code does not know, `mcpServers` (which
//! belongs in `managedMcpServers`), an alias and its canonical key set together, and values
//! of the wrong type, out of range or outside an enum.
//!
//! The schema is data (`settings_schema.json`), transcribed from the zod settings schema of
//! the pinned Claude Code; this module walks the JSON Schema subset that file uses.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::{Map, Value};

const DATA: &str = include_str!("settings_schema.json");

#[derive(Deserialize)]
struct Data {
    claude_code_version: String,
    aliases: Vec<Alias>,
    schema: Schema,
}

#[derive(Deserialize)]
struct Alias {
    alias: String,
    canonical: String,
}

/// One node of the schema subset.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Schema {
    #[serde(rename = "type")]
    ty: Option<String>,
    #[serde(rename = "enum")]
    one_of_values: Option<Vec<Value>>,
    #[serde(rename = "const")]
    constant: Option<Value>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    exclusive_minimum: Option<f64>,
    exclusive_maximum: Option<f64>,
    min_length: Option<usize>,
    max_length: Option<usize>,
    min_items: Option<usize>,
    max_items: Option<usize>,
    items: Option<Box<Schema>>,
    properties: Option<BTreeMap<String, Schema>>,
    #[serde(default)]
    required: Vec<String>,
    additional_properties: Option<Additional>,
    any_of: Option<Vec<Schema>>,
    discriminator: Option<String>,
    variants: Option<BTreeMap<String, Schema>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Additional {
    Allowed(bool),
    Checked(Box<Schema>),
}

/// A problem: the path below the block (`permissions.defaultMode`, `hooks.Stop[0]`) and
/// what is wrong there.
pub type Issue = (String, String);

fn data() -> Option<&'static Data> {
    static DATA_CELL: OnceLock<Option<Data>> = OnceLock::new();
    DATA_CELL
        .get_or_init(|| serde_json::from_str(DATA).ok())
        .as_ref()
}

/// The Claude Code version the schema was transcribed from.
pub fn claude_code_version() -> &'static str {
    data().map_or("unknown", |d| d.claude_code_version.as_str())
}

/// Every problem in one settings block, in the order the reference lists them.
pub fn check_block(block: &Map<String, Value>) -> Vec<Issue> {
    let Some(data) = data() else {
        return vec![(
            String::new(),
            "the bundled settings schema cannot be read".into(),
        )];
    };
    let mut issues = Vec::new();
    for a in &data.aliases {
        if block.contains_key(&a.alias) && block.get(&a.canonical).is_some_and(|v| !v.is_null()) {
            issues.push((
                a.alias.clone(),
                format!(
                    "this document sets both \"{}\" and \"{}\", which are the same setting; keep only \"{}\"",
                    a.alias, a.canonical, a.canonical
                ),
            ));
        }
    }
    let known = data.schema.properties.as_ref();
    for (key, value) in block {
        match known.and_then(|p| p.get(key)) {
            Some(schema) => walk(schema, value, key, &mut issues),
            None if key == "mcpServers" => issues.push((
                key.clone(),
                "not a managed-settings key; use \"managedMcpServers\" (http/sse servers only; same entry shape as .mcp.json)".into(),
            )),
            None => issues.push((
                key.clone(),
                format!(
                    "unknown settings key (Claude Code {}); fix the typo, or upgrade the gateway if the key was added in a newer Claude Code",
                    claude_code_version()
                ),
            )),
        }
    }
    issues
}

/// Whether `key` is a Claude Code setting.
pub fn is_setting(key: &str) -> bool {
    data()
        .and_then(|d| d.schema.properties.as_ref())
        .is_some_and(|p| p.contains_key(key))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_type(ty: &str, v: &Value) -> bool {
    match ty {
        "integer" => v.as_f64().is_some_and(|n| n.fract() == 0.0),
        "number" => v.is_number(),
        other => kind(v) == other,
    }
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn walk(s: &Schema, v: &Value, path: &str, out: &mut Vec<Issue>) {
    if let Some(alternatives) = &s.any_of {
        let fits = alternatives.iter().any(|alt| {
            let mut scratch = Vec::new();
            walk(alt, v, path, &mut scratch);
            scratch.is_empty()
        });
        if !fits {
            out.push((path.to_owned(), "Invalid input".into()));
        }
        return;
    }
    if let Some(ty) = &s.ty
        && !has_type(ty, v)
    {
        let want = if ty == "integer" { "int" } else { ty.as_str() };
        out.push((
            path.to_owned(),
            format!("Invalid input: expected {want}, received {}", kind(v)),
        ));
        return;
    }
    if let Some(c) = &s.constant
        && c != v
    {
        out.push((path.to_owned(), format!("Invalid input: expected {c}")));
        return;
    }
    if let Some(values) = &s.one_of_values
        && !values.contains(v)
    {
        let list: Vec<String> = values.iter().map(Value::to_string).collect();
        out.push((
            path.to_owned(),
            format!("Invalid option: expected one of {}", list.join("|")),
        ));
        return;
    }
    match v {
        Value::Number(n) => bounds(s, n.as_f64().unwrap_or_default(), path, out),
        Value::String(t) => lengths(
            s.min_length,
            s.max_length,
            t.chars().count(),
            "string",
            "characters",
            path,
            out,
        ),
        Value::Array(items) => {
            lengths(
                s.min_items,
                s.max_items,
                items.len(),
                "array",
                "items",
                path,
                out,
            );
            if let Some(item) = &s.items {
                for (i, x) in items.iter().enumerate() {
                    walk(item, x, &format!("{path}[{i}]"), out);
                }
            }
        }
        Value::Object(m) => object(s, m, path, out),
        _ => {}
    }
}

fn bounds(s: &Schema, n: f64, path: &str, out: &mut Vec<Issue>) {
    let low = [(s.minimum, ">=", n < s.minimum.unwrap_or(f64::MIN))]
        .into_iter()
        .chain([(
            s.exclusive_minimum,
            ">",
            n <= s.exclusive_minimum.unwrap_or(f64::MIN),
        )]);
    for (limit, op, broken) in low {
        if let Some(l) = limit
            && broken
        {
            out.push((
                path.to_owned(),
                format!("Too small: expected number to be {op}{l}"),
            ));
        }
    }
    let high = [(s.maximum, "<=", n > s.maximum.unwrap_or(f64::MAX))]
        .into_iter()
        .chain([(
            s.exclusive_maximum,
            "<",
            n >= s.exclusive_maximum.unwrap_or(f64::MAX),
        )]);
    for (limit, op, broken) in high {
        if let Some(l) = limit
            && broken
        {
            out.push((
                path.to_owned(),
                format!("Too big: expected number to be {op}{l}"),
            ));
        }
    }
}

fn lengths(
    min: Option<usize>,
    max: Option<usize>,
    len: usize,
    what: &str,
    unit: &str,
    path: &str,
    out: &mut Vec<Issue>,
) {
    if let Some(m) = min
        && len < m
    {
        out.push((
            path.to_owned(),
            format!("Too small: expected {what} to have >={m} {unit}"),
        ));
    }
    if let Some(m) = max
        && len > m
    {
        out.push((
            path.to_owned(),
            format!("Too big: expected {what} to have <={m} {unit}"),
        ));
    }
}

fn object(s: &Schema, m: &Map<String, Value>, path: &str, out: &mut Vec<Issue>) {
    if let (Some(key), Some(variants)) = (&s.discriminator, &s.variants) {
        let tag = m.get(key).and_then(Value::as_str).unwrap_or_default();
        match variants.get(tag) {
            Some(variant) => walk(variant, &Value::Object(m.clone()), path, out),
            None => {
                let names: Vec<String> = variants.keys().map(|k| format!("\"{k}\"")).collect();
                out.push((
                    child(path, key),
                    format!("Invalid input: expected one of {}", names.join("|")),
                ));
            }
        }
        return;
    }
    let props = s.properties.as_ref();
    for r in &s.required {
        if !m.contains_key(r) {
            let want = props
                .and_then(|p| p.get(r))
                .and_then(|p| p.ty.clone())
                .unwrap_or_else(|| "a value".into());
            out.push((
                child(path, r),
                format!("Invalid input: expected {want}, received undefined"),
            ));
        }
    }
    for (k, v) in m {
        if let Some(p) = props.and_then(|p| p.get(k)) {
            walk(p, v, &child(path, k), out);
            continue;
        }
        match &s.additional_properties {
            Some(Additional::Allowed(false)) => {
                out.push((path.to_owned(), format!("Unrecognized key: \"{k}\"")));
            }
            Some(Additional::Checked(p)) => walk(p, v, &child(path, k), out),
            Some(Additional::Allowed(true)) | None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn issues(v: Value) -> Vec<Issue> {
        check_block(v.as_object().unwrap())
    }

    #[test]
    fn the_data_file_loads() {
        assert!(data().is_some());
        assert_eq!(claude_code_version(), "2.1.332");
        assert!(is_setting("permissions") && is_setting("hooks") && !is_setting("mcpServers"));
    }

    #[test]
    fn a_rich_valid_block_passes() {
        let block = json!({
            "model": "claude-opus-4-8",
            "availableModels": ["opus", "sonnet"],
            "availableModelsMatch": "prefix",
            "env": {"A": "1", "B": 2},
            "permissions": {"defaultMode": "acceptEdits", "deny": ["Read(./.env)"], "ask": ["Bash(git push:*)"]},
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh", "timeout": 30}]}]},
            "sandbox": {"enabled": true, "network": {"allowedDomains": ["example.com"]}},
            "statusLine": {"type": "command", "command": "status.sh"},
            "cleanupPeriodDays": 30,
            "effortLevel": "not-a-level"
        });
        assert_eq!(issues(block), Vec::<Issue>::new());
    }

    #[test]
    fn each_kind_of_problem_is_named_by_its_path() {
        let found = issues(json!({
            "permissions": {"defaultMode": "wrong", "deny": [1]},
            "cleanupPeriodDays": 0,
            "hooks": {"PreToolUse": [{"hooks": [{"type": "command"}]}], "Bogus": []},
            "mcpServers": {},
            "bogusKey": 1,
            "includeCoAuthoredBy": "yes",
            "extraKnownMarketplaces": {},
            "additionalMarketplaces": {}
        }));
        let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
        for want in [
            "additionalMarketplaces",
            "permissions.defaultMode",
            "permissions.deny[0]",
            "cleanupPeriodDays",
            "hooks",
            "hooks.PreToolUse[0].hooks[0].command",
            "mcpServers",
            "bogusKey",
            "includeCoAuthoredBy",
        ] {
            assert!(paths.contains(&want), "{want} in {found:?}");
        }
        let mcp = found.iter().find(|(p, _)| p == "mcpServers").unwrap();
        assert!(mcp.1.contains("managedMcpServers"));
    }

    #[test]
    fn hook_types_are_a_closed_set() {
        let found =
            issues(json!({"hooks": {"Stop": [{"hooks": [{"type": "shell", "command": "x"}]}]}}));
        assert_eq!(found[0].0, "hooks.Stop[0].hooks[0].type");
        let ok = issues(
            json!({"hooks": {"Stop": [{"hooks": [{"type": "http", "url": "https://h.example.com"}]}]}}),
        );
        assert!(ok.is_empty(), "{ok:?}");
    }
}

//! `managedMcpServers` beyond the shape of `settings_schema.json`: the rules the reference's
//! settings schema runs on each server as code (a custom check, not data), and the
//! `${`-placeholder warning its gateway prints at start.
//!
//! A managed server must be an `http`/`sse` URL server: no `command`, `args`, `env` or
//! `headersHelper`; a valid `https://` URL; no control or invisible format characters in
//! any key or value; no `${VAR}` reference in a value (managed settings are not expanded).
//! A value that holds `${` but no such reference is served as written, with a warning.

use serde_json::{Map, Value};

use super::settings_schema::Issue;

/// Keys that would make a managed document name a program to run.
const PROGRAM_KEYS: &[&str] = &["command", "args", "env", "headersHelper"];
/// The transports a managed document may deliver.
const TRANSPORTS: &[&str] = &["http", "streamable-http", "sse"];
/// How deep the reference walks a server's keys and values (its `gFi`, depth > 4 stops).
const MAX_DEPTH: usize = 4;

/// The problems of one server entry at `path` (`managedMcpServers.<name>`); none for a
/// value that is not a mapping (the schema names that).
pub fn entry_issues(server: &Value, path: &str) -> Vec<Issue> {
    let Value::Object(m) = server else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for key in PROGRAM_KEYS.iter().filter(|k| m.contains_key(**k)) {
        out.push((format!("{path}.{key}"), format!("\"{key}\" is not allowed in managed settings: only http/sse URL servers can be delivered this way, and a managed settings document must not name a program to run")));
    }
    if !m
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| TRANSPORTS.contains(&t))
    {
        out.push((
            format!("{path}.type"),
            "managed settings can only deliver \"http\" or \"sse\" servers".into(),
        ));
    }
    if let Some(Value::String(u)) = m.get("url")
        && !is_https_url(u)
    {
        out.push((
            format!("{path}.url"),
            "managed settings servers must use a valid https:// url".into(),
        ));
    }
    for (at, text, is_key) in texts(m) {
        if text.chars().any(invisible) {
            out.push((format!("{path}.{at}"), "contains control or invisible format characters (in a key or a value); a managed settings document must not be able to print escape sequences".into()));
        } else if !is_key && has_variable(&text) {
            out.push((format!("{path}.{at}"), "${VAR} references are not expanded in managed settings; use a literal value (a managed settings document must not read the user's environment)".into()));
        }
    }
    out
}

/// Start-up warnings for one settings block at `at` (`managed.policies[0].cli`), named
/// `label` in the message (`managed settings` for the legacy file): every server value
/// that still holds `${` (a `${VAR}` reference was refused before, and in gateway.yaml
/// the loader has filled those in).
pub fn placeholder_warnings(
    block: &Map<String, Value>,
    at: &str,
    label: &str,
) -> Vec<(String, String)> {
    let Some(Value::Object(servers)) = block.get("managedMcpServers") else {
        return Vec::new();
    };
    texts(servers)
        .into_iter()
        .filter(|(_, text, is_key)| !is_key && text.contains("${"))
        .map(|(field, _, _)| {
            (
                format!("{at}.managedMcpServers.{field}"),
                format!("{label}: managedMcpServers.{field} contains a \"${{\" placeholder. Nothing fills it in, so Claude Code uses the text as written. Replace it with the actual value."),
            )
        })
        .collect()
}

/// Every key and string value below `m`, with its dotted path (array items by index),
/// keys first, as the reference walks them.
fn texts(m: &Map<String, Value>) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    collect(children(&Value::Object(m.clone())), "", 0, &mut out);
    out
}

/// A mapping's entries, or an array's items by index.
fn children(v: &Value) -> Vec<(String, &Value)> {
    match v {
        Value::Object(o) => o.iter().map(|(k, v)| (k.clone(), v)).collect(),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), v))
            .collect(),
        _ => Vec::new(),
    }
}

fn collect(
    entries: Vec<(String, &Value)>,
    prefix: &str,
    depth: usize,
    out: &mut Vec<(String, String, bool)>,
) {
    for (key, value) in entries {
        let shown: String = key.chars().map(escaped).collect();
        let at = if prefix.is_empty() {
            shown
        } else {
            format!("{prefix}.{shown}")
        };
        out.push((at.clone(), key, true));
        match value {
            Value::String(s) => out.push((at, s.clone(), false)),
            Value::Object(_) | Value::Array(_) if depth < MAX_DEPTH => {
                collect(children(value), &at, depth + 1, out);
            }
            _ => {}
        }
    }
}

/// A key's invisible character as the reference prints it in a path (`\u200b`).
fn escaped(c: char) -> String {
    if invisible(c) {
        format!("\\u{:04x}", u32::from(c))
    } else {
        c.to_string()
    }
}

/// Unicode control (Cc) and format (Cf) characters, and the line/paragraph separators.
fn invisible(c: char) -> bool {
    let n = u32::from(c);
    c.is_control()
        || matches!(
            n,
            0xAD | 0x600..=0x605
                | 0x61C
                | 0x6DD
                | 0x70F
                | 0x890..=0x891
                | 0x8E2
                | 0x180E
                | 0x200B..=0x200F
                | 0x2028..=0x202E
                | 0x2060..=0x2064
                | 0x2066..=0x206F
                | 0xFEFF
                | 0xFFF9..=0xFFFB
                | 0x110BD
                | 0x110CD
                | 0x13430..=0x1343F
                | 0x1BCA0..=0x1BCA3
                | 0x1D173..=0x1D17A
                | 0xE0001
                | 0xE0020..=0xE007F
        )
}

/// An absolute `https:` URL with a host, as the reference's `new URL(u)` check.
fn is_https_url(u: &str) -> bool {
    url::Url::parse(u)
        .is_ok_and(|p| p.scheme() == "https" && p.host_str().is_some_and(|h| !h.is_empty()))
}

/// Whether the text, up to its last `}`, holds `${NAME}` or `${NAME:-default}`.
fn has_variable(text: &str) -> bool {
    let end = text.rfind('}').map_or(0, |i| i + 1);
    let head = &text[..end];
    head.match_indices("${").any(|(i, _)| {
        let rest = &head[i + 2..];
        let name_len = rest
            .char_indices()
            .take_while(|(j, c)| {
                c.is_ascii_alphabetic() || *c == '_' || (*j > 0 && c.is_ascii_digit())
            })
            .count();
        if name_len == 0 {
            return false;
        }
        let after = &rest[name_len..];
        after.starts_with('}') || (after.starts_with(":-") && after[2..].contains('}'))
    })
}

#[cfg(test)]
#[path = "managed_mcp_tests.rs"]
mod tests;

//! The Desktop overlay's lists of sources, read entry by entry as the reference reads
//! them: `allowedPluginMarketplaces` (plugin marketplaces) and `codeAllowedRepositories`
//! (repositories). Claude Desktop drops an entry it cannot read, and the reference refuses
//! an overlay that would lose one, naming the entry.

use serde_json::{Map, Value};

/// Which list is read.
#[derive(Clone, Copy)]
pub(super) enum Entries {
    /// `{source: github, repo}`, `{source: git, url}` or `{source: url, url}` (https, or
    /// http on loopback).
    Marketplaces,
    /// `{source: github, repo}` or `{source: git, url}` with a repository after the host.
    Repositories,
}

/// Why the list cannot be read: `(None, why)` for the value as a whole, `(Some(i), why)`
/// for each entry Claude Desktop would drop (the reference names the entry, `key[i]`).
pub(super) fn unreadable(kind: Entries, v: &Value) -> Vec<(Option<usize>, String)> {
    let Some(items) = v.as_array() else {
        return vec![(
            None,
            "cannot be read: expected a list of source mappings".into(),
        )];
    };
    items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| {
            entry(kind, item).map(|why| {
                (
                    Some(i),
                    format!("Claude Desktop would drop this entry: it {why}"),
                )
            })
        })
        .collect()
}

/// Why one entry cannot be read.
fn entry(kind: Entries, item: &Value) -> Option<String> {
    let Some(m) = item.as_object() else {
        return Some("is not a mapping".into());
    };
    let source = m.get("source").and_then(Value::as_str).unwrap_or_default();
    match (kind, source) {
        (_, "github") => text(m, "repo").err(),
        (Entries::Marketplaces, "git") => text(m, "url").err(),
        (Entries::Marketplaces, "url") => text(m, "url").and_then(web_url).err(),
        (Entries::Repositories, "git") => text(m, "url").and_then(repository_url).err(),
        (Entries::Marketplaces, _) => Some("has no source of github, git or url".into()),
        (Entries::Repositories, _) => Some("has no source of github or git".into()),
    }
}

fn text<'a>(m: &'a Map<String, Value>, key: &str) -> Result<&'a str, String> {
    m.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("has no {key} string"))
}

/// A marketplace URL: https, or http on a loopback host.
fn web_url(u: &str) -> Result<&str, String> {
    let p = url::Url::parse(u).map_err(|_| format!("url {u:?} is not a URL"))?;
    let loopback = matches!(p.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
    match p.scheme() {
        "https" => Ok(u),
        "http" if loopback => Ok(u),
        _ => Err(format!("url {u:?} must use https (or http on loopback)")),
    }
}

/// A git remote that names a repository after its host: `https://host/org/repo` or
/// `git@host:org/repo`.
fn repository_url(u: &str) -> Result<&str, String> {
    let path = match url::Url::parse(u) {
        Ok(p) if p.host_str().is_some() => p.path().trim_matches('/').to_owned(),
        _ => u
            .split_once(':')
            .filter(|(host, _)| host.contains('@') || host.contains('.'))
            .map(|(_, path)| path.trim_matches('/').to_owned())
            .unwrap_or_default(),
    };
    if path.is_empty() {
        Err(format!("url {u:?} must name a repository after the host"))
    } else {
        Ok(u)
    }
}

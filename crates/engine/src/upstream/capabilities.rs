//! The capability table (`capabilities.json`, versioned, compiled in): per provider, which
//! `anthropic-beta` values stay in the header, move into the body's `anthropic_beta` or are
//! dropped, and which top-level body fields are dropped. Translations ask [`plan`]; what a
//! plan moves or drops is named in the request's `route_reason`.

use std::sync::LazyLock;

use http::HeaderMap;
use serde::Deserialize;

const TABLE_JSON: &str = include_str!("capabilities.json");

#[derive(Debug, Deserialize)]
pub struct Table {
    pub version: String,
    providers: std::collections::BTreeMap<String, ProviderCaps>,
    pub count_tokens: CountTokens,
}

#[derive(Debug, Deserialize)]
struct ProviderCaps {
    betas: BetaRules,
    drop_fields: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct BetaRules {
    default: Place,
    header: Vec<String>,
    body: Vec<String>,
    drop: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub struct CountTokens {
    pub bedrock_betas_kept: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Place {
    Header,
    Body,
    Drop,
}

/// The table, parsed once (a test proves it parses).
pub fn table() -> Option<&'static Table> {
    static TABLE: LazyLock<Option<Table>> = LazyLock::new(|| {
        serde_json::from_str(TABLE_JSON)
            .map_err(|e| tracing::error!(error = %e, "the capability table does not parse"))
            .ok()
    });
    TABLE.as_ref()
}

/// Where one provider sends a request's betas, and the body fields it drops.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Plan {
    pub header: Vec<String>,
    pub body: Vec<String>,
    pub dropped: Vec<String>,
    pub drop_fields: Vec<String>,
}

impl Plan {
    /// What the plan changed, for `route_reason` (empty when nothing moved).
    pub fn notes(&self, dropped_fields: &[String]) -> Vec<String> {
        let mut notes = Vec::new();
        if !self.body.is_empty() {
            notes.push(format!("betas to body: {}", self.body.join(",")));
        }
        if !self.dropped.is_empty() {
            notes.push(format!("betas dropped: {}", self.dropped.join(",")));
        }
        if !dropped_fields.is_empty() {
            notes.push(format!("fields dropped: {}", dropped_fields.join(",")));
        }
        notes
    }
}

fn matches(pattern: &str, beta: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => beta.starts_with(prefix),
        None => pattern == beta,
    }
}

/// The betas the caller sent (`anthropic-beta`, comma-separated, possibly repeated).
pub fn betas(headers: &HeaderMap) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in headers.get_all("anthropic-beta") {
        for b in v.to_str().unwrap_or_default().split(',') {
            let b = b.trim();
            if !b.is_empty() && !out.iter().any(|o| o == b) {
                out.push(b.to_owned());
            }
        }
    }
    out
}

/// Where `provider` sends each of `betas`.
pub fn plan(provider: &str, betas: &[String]) -> Plan {
    let Some(caps) = table().and_then(|t| t.providers.get(provider)) else {
        return Plan {
            header: betas.to_vec(),
            ..Plan::default()
        };
    };
    let r = &caps.betas;
    let mut plan = Plan {
        drop_fields: caps.drop_fields.clone(),
        ..Plan::default()
    };
    for b in betas {
        let listed = |list: &[String]| list.iter().any(|p| matches(p, b));
        let place = if listed(&r.drop) {
            Place::Drop
        } else if listed(&r.header) {
            Place::Header
        } else if listed(&r.body) {
            Place::Body
        } else {
            r.default
        };
        match place {
            Place::Header => plan.header.push(b.clone()),
            Place::Body => plan.body.push(b.clone()),
            Place::Drop => plan.dropped.push(b.clone()),
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn v(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_table_parses_and_is_versioned() {
        let t = table().unwrap();
        assert!(!t.version.is_empty());
        for p in ["anthropic", "bedrock", "vertex", "foundry"] {
            assert!(t.providers.contains_key(p), "{p}");
        }
    }

    #[test]
    fn bedrock_keeps_some_betas_in_the_header_and_moves_the_rest() {
        let sent = v(&[
            "claude-code-20250219",
            "interleaved-thinking-2025-05-14",
            "effort-2025-11-24",
            "request-tags-2026-08-21",
            "fine-grained-tool-streaming-2025-05-14",
        ]);
        let p = plan("bedrock", &sent);
        assert_eq!(p.header, v(&["claude-code-20250219", "effort-2025-11-24"]));
        assert_eq!(
            p.body,
            v(&[
                "interleaved-thinking-2025-05-14",
                "fine-grained-tool-streaming-2025-05-14"
            ])
        );
        assert_eq!(p.dropped, v(&["request-tags-2026-08-21"]));
        assert_eq!(p.drop_fields, v(&["tags"]));
    }

    #[test]
    fn vertex_drops_request_tags_and_foundry_keeps_everything() {
        let sent = v(&["claude-code-20250219", "request-tags-2026-08-21"]);
        let p = plan("vertex", &sent);
        assert_eq!(
            (p.header, p.dropped),
            (
                v(&["claude-code-20250219"]),
                v(&["request-tags-2026-08-21"])
            )
        );
        let f = plan("foundry", &sent);
        assert_eq!(f.header, sent);
        assert!(f.drop_fields.is_empty());
    }

    #[test]
    fn betas_are_split_and_deduplicated() {
        let mut h = HeaderMap::new();
        h.append("anthropic-beta", "a, b".parse().unwrap());
        h.append("anthropic-beta", "b,c".parse().unwrap());
        assert_eq!(betas(&h), v(&["a", "b", "c"]));
    }
}

//! The capability table (`capabilities.json`, versioned, compiled in): per provider, which
//! `anthropic-beta` values stay in the header, move into the body's `anthropic_beta` or are
//! dropped, which top-level body fields are dropped, and the largest `max_tokens` each
//! model takes there ([`output_limit`], [`over_output_limit`]). Translations ask [`plan`];
//! what a plan moves or drops, and a refused `max_tokens`, is named in the request's
//! `route_reason`.

use std::sync::LazyLock;

use http::HeaderMap;
use serde::Deserialize;

pub(crate) const TABLE_JSON: &str = include_str!("capabilities.json");

#[derive(Debug, Deserialize)]
pub struct Table {
    pub version: String,
    providers: std::collections::BTreeMap<String, ProviderCaps>,
    /// Named lists of per-model output limits, in match order.
    output_limits: std::collections::BTreeMap<String, Vec<OutputLimit>>,
    pub count_tokens: CountTokens,
}

#[derive(Debug, Deserialize)]
struct ProviderCaps {
    betas: BetaRules,
    drop_fields: Vec<String>,
    /// The `output_limits` list this provider's models follow; none: not checked here.
    #[serde(default)]
    output_limits: Option<String>,
}

#[derive(Debug, Deserialize)]
struct OutputLimit {
    model: String,
    max: u64,
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

/// `name` stands in `id` as a whole model name: after nothing or a separator (`.`, `/`,
/// `:`), before nothing, a date (`-20250514`), `@`, `-v` or `:`.
fn names(id: &str, name: &str) -> bool {
    id.match_indices(name).any(|(at, _)| {
        let before_ok = id[..at]
            .chars()
            .next_back()
            .is_none_or(|c| matches!(c, '.' | '/' | ':'));
        let rest = &id[at + name.len()..];
        let date = rest
            .strip_prefix('-')
            .is_some_and(|d| d.len() >= 8 && d.as_bytes()[..8].iter().all(u8::is_ascii_digit));
        let after_ok = rest.is_empty()
            || rest.starts_with('@')
            || rest.starts_with(':')
            || rest.starts_with("-v")
            || date;
        before_ok && after_ok
    })
}

/// The largest `max_tokens` `provider` takes for `model` (its own id), if the table knows.
pub fn output_limit(provider: &str, model: &str) -> Option<u64> {
    let t = table()?;
    let list = t.providers.get(provider)?.output_limits.as_ref()?;
    let model = model.to_ascii_lowercase();
    t.output_limits
        .get(list)?
        .iter()
        .find(|l| names(&model, &l.model))
        .map(|l| l.max)
}

/// A Messages body whose `max_tokens` is above what `provider` takes for `model`: the 400
/// the Anthropic API itself answers (`max_tokens: N > M, which is the maximum allowed
/// number of output tokens for <model>`; Claude Code lowers `max_tokens` on it and asks
/// again), with a note for `route_reason`. The upstream is not asked.
pub fn over_output_limit(provider: &str, model: &str, body: &[u8]) -> Option<super::Answer> {
    let limit = output_limit(provider, model)?;
    #[derive(Deserialize)]
    struct Head {
        max_tokens: Option<u64>,
    }
    let asked = serde_json::from_slice::<Head>(body).ok()?.max_tokens?;
    if asked <= limit {
        return None;
    }
    let message = format!(
        "max_tokens: {asked} > {limit}, which is the maximum allowed number of output tokens for {model}"
    );
    let mut answer = super::errors::envelope(
        http::StatusCode::BAD_REQUEST,
        "invalid_request_error",
        &message,
    );
    answer.notes.push(format!(
        "max_tokens {asked} above {provider}'s {limit} for this model"
    ));
    Some(answer)
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
        for p in [
            "anthropic",
            "bedrock",
            "vertex",
            "foundry",
            "anthropicGoogleCloud",
        ] {
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
        assert_eq!(p.body, v(&["interleaved-thinking-2025-05-14"]));
        // A beta Bedrock does not list is refused there ("invalid beta flag"): dropped.
        assert_eq!(
            p.dropped,
            v(&[
                "request-tags-2026-08-21",
                "fine-grained-tool-streaming-2025-05-14"
            ])
        );
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
    fn output_limits_follow_the_providers_model_ids() {
        let cases = [
            (
                "bedrock",
                "us.anthropic.claude-opus-4-1-20250805-v1:0",
                Some(32_000),
            ),
            (
                "bedrock",
                "anthropic.claude-sonnet-4-20250514-v1:0",
                Some(64_000),
            ),
            (
                "bedrock",
                "global.anthropic.claude-sonnet-4-6",
                Some(128_000),
            ),
            (
                "bedrock",
                "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-haiku-20241022-v1:0",
                Some(8_192),
            ),
            ("vertex", "claude-opus-4-5@20251101", Some(64_000)),
            ("vertex", "claude-opus-4@20250514", Some(32_000)),
            ("foundry", "claude-haiku-4-5", Some(64_000)),
            ("foundry", "Claude-Opus-4-0", Some(32_000)),
            // Unknown ids and look-alikes are not checked; nor is the Anthropic API.
            ("bedrock", "anthropic.claude-sonnet-4-9", None),
            ("vertex", "my-claude-opus-4-1", None),
            ("foundry", "claude-opus-4-10", None),
            ("anthropic", "claude-opus-4-1", None),
            ("openai", "claude-opus-4-1", None),
        ];
        for (provider, model, want) in cases {
            assert_eq!(output_limit(provider, model), want, "{provider} {model}");
        }
    }

    /// `tests/golden/capabilities/output_limits.cases.json` (provider, model id,
    /// `max_tokens`) → `output_limits.expected.json`: what each request gets before any
    /// upstream is asked (`null`: it is sent). `GOLDEN_BLESS=1` writes a missing expected
    /// file, to be reviewed before it is committed.
    #[tokio::test]
    async fn golden_output_limits() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/capabilities");
        let text = std::fs::read_to_string(dir.join("output_limits.cases.json")).unwrap();
        let cases: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
        let mut actual = Vec::new();
        for case in &cases {
            let body = serde_json::json!({
                "model": case["model"],
                "max_tokens": case["max_tokens"],
                "messages": [{"role": "user", "content": "hi"}],
            });
            let body = serde_json::to_vec(&body).unwrap();
            let provider = case["provider"].as_str().unwrap();
            let model = case["model"].as_str().unwrap();
            let outcome = match over_output_limit(provider, model, &body) {
                None => serde_json::Value::Null,
                Some(a) => {
                    let (status, notes) = (a.status.as_u16(), a.notes.clone());
                    let body: serde_json::Value =
                        serde_json::from_slice(&a.read_limited(4096).await).unwrap();
                    serde_json::json!({"status": status, "body": body, "notes": notes})
                }
            };
            actual.push(serde_json::json!({"case": case, "answer": outcome}));
        }
        let actual = serde_json::Value::Array(actual);
        let path = dir.join("output_limits.expected.json");
        if !path.exists() && std::env::var("GOLDEN_BLESS").is_ok() {
            let pretty = serde_json::to_string_pretty(&actual).unwrap();
            std::fs::write(&path, pretty + "\n").unwrap();
        }
        let expected: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(
            expected,
            actual,
            "actual:\n{}",
            serde_json::to_string_pretty(&actual).unwrap()
        );
    }

    #[test]
    fn betas_are_split_and_deduplicated() {
        let mut h = HeaderMap::new();
        h.append("anthropic-beta", "a, b".parse().unwrap());
        h.append("anthropic-beta", "b,c".parse().unwrap());
        assert_eq!(betas(&h), v(&["a", "b", "c"]));
    }
}

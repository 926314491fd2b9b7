//! What keeps a conversation faithful across upstreams (Gatehouse additions under
//! `routing`): conversation affinity, the capability table's operator entries and the
//! fallback models that shaping sends a request to when its upstreams cannot take it.
//!
//! ```yaml
//! routing:
//!   affinity:
//!     enabled: true                  # default true: a conversation stays on its upstream
//!     except_models: [claude-haiku-*]  # requested models routed per request instead
//!   fallback_models:
//!     images: claude-sonnet-4-6      # where image requests go when no candidate has vision
//!     long_context: claude-sonnet-4-6  # where inputs over every candidate's window go
//!   capabilities:                    # before the built-in table; the first entry that sets a field wins
//!     - upstream: deepseek           # optional: every upstream when absent
//!       model: deepseek-*            # optional: the upstream's model id, one `*`
//!       vision: false
//!       context_window: 128000
//!       max_output_tokens: 8192
//!       server_tools: []             # Anthropic server tools it runs itself
//! ```

use schemars::JsonSchema;
use serde::Deserialize;

use super::ConfigError;

/// `routing.affinity` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAffinity {
    /// Keep each conversation on the upstream (and pool key) that served it, chosen by
    /// rendezvous hashing among the healthy candidates (default true).
    pub enabled: Option<bool>,
    /// Requested model ids (case-insensitive, one `*`) routed per request instead.
    #[serde(default)]
    pub except_models: Vec<String>,
}

/// `routing.fallback_models` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawFallbackModels {
    /// The model a request with images goes to when none of its upstreams can read them
    /// (default: such a request is refused with a 400 naming the model).
    pub images: Option<String>,
    /// The model an input over every candidate's context window goes to (default: the
    /// request is answered `prompt is too long`, which makes Claude Code compact).
    pub long_context: Option<String>,
}

/// An Anthropic server tool an upstream may run itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ServerTool {
    WebSearch,
    WebFetch,
}

impl ServerTool {
    pub fn as_str(self) -> &'static str {
        match self {
            ServerTool::WebSearch => "web_search",
            ServerTool::WebFetch => "web_fetch",
        }
    }

    /// The tool a `tools[].type` names (`web_search_20250305`, `web_fetch_20250910`).
    pub fn of_type(kind: &str) -> Option<Self> {
        if kind.starts_with("web_search_") {
            Some(ServerTool::WebSearch)
        } else if kind.starts_with("web_fetch_") {
            Some(ServerTool::WebFetch)
        } else {
            None
        }
    }
}

/// The tool-call ids an upstream accepts (`routing.capabilities[].tool_ids`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolIds {
    /// Only ASCII letters and digits (Mistral); otherwise letters, digits, `_` and `-`.
    #[serde(default)]
    pub alphanumeric: bool,
    /// Exactly this many characters.
    pub length: Option<usize>,
    /// At most this many characters.
    pub max_length: Option<usize>,
}

impl ToolIds {
    /// Whether `id` is one the upstream takes as it is.
    pub fn accepts(&self, id: &str) -> bool {
        let chars_ok = id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || (!self.alphanumeric && (b == b'_' || b == b'-')));
        !id.is_empty()
            && chars_ok
            && self.length.is_none_or(|n| id.len() == n)
            && self.max_length.is_none_or(|n| id.len() <= n)
    }
}

/// One `routing.capabilities` entry as written.
#[derive(Debug, Default, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawCapability {
    /// The upstream's name (default: every upstream).
    pub upstream: Option<String>,
    /// The model id as the upstream names it (case-insensitive, one `*`; default: any).
    pub model: Option<String>,
    /// Whether the model reads images.
    pub vision: Option<bool>,
    /// The largest input, in tokens.
    pub context_window: Option<u64>,
    /// The largest `max_tokens`.
    pub max_output_tokens: Option<u64>,
    /// The Anthropic server tools the upstream runs itself for this model.
    pub server_tools: Option<Vec<ServerTool>>,
    /// The tool-call ids it accepts; others are rewritten (the same way in every turn).
    pub tool_ids: Option<ToolIds>,
}

/// Validated `routing.affinity`.
#[derive(Debug, Clone, PartialEq)]
pub struct Affinity {
    pub enabled: bool,
    pub except_models: Vec<String>,
}

impl Default for Affinity {
    fn default() -> Self {
        Affinity {
            enabled: true,
            except_models: Vec::new(),
        }
    }
}

impl Affinity {
    /// Whether conversations asking for `model` keep their upstream.
    pub fn applies(&self, model: &str) -> bool {
        self.enabled && !self.except_models.iter().any(|p| one_star(p, model))
    }
}

/// `pattern` (case-insensitive, at most one `*`) matches `id` whole.
pub fn one_star(pattern: &str, id: &str) -> bool {
    let (p, id) = (pattern.to_ascii_lowercase(), id.to_ascii_lowercase());
    match p.split_once('*') {
        Some((head, tail)) => {
            id.len() >= head.len() + tail.len() && id.starts_with(head) && id.ends_with(tail)
        }
        None => p == id,
    }
}

/// Validated `routing.fallback_models`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FallbackModels {
    pub images: Option<String>,
    pub long_context: Option<String>,
}

/// One validated capability entry.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CapabilityRule {
    pub upstream: Option<String>,
    pub model: Option<String>,
    pub vision: Option<bool>,
    pub context_window: Option<u64>,
    pub max_output_tokens: Option<u64>,
    pub server_tools: Option<Vec<ServerTool>>,
    pub tool_ids: Option<ToolIds>,
}

fn pattern(value: &str, path: &str) -> Result<String, ConfigError> {
    let stars = value.matches('*').count();
    if value.trim().is_empty() || value.trim() != value || stars > 1 {
        return Err(ConfigError::at(
            path,
            "a non-empty model id with at most one `*`",
        ));
    }
    Ok(value.to_owned())
}

pub fn affinity(raw: Option<&RawAffinity>) -> Result<Affinity, ConfigError> {
    let Some(raw) = raw else {
        return Ok(Affinity::default());
    };
    let except_models = raw
        .except_models
        .iter()
        .enumerate()
        .map(|(i, m)| pattern(m, &format!("routing.affinity.except_models[{i}]")))
        .collect::<Result<_, _>>()?;
    Ok(Affinity {
        enabled: raw.enabled.unwrap_or(true),
        except_models,
    })
}

pub fn fallback_models(raw: Option<&RawFallbackModels>) -> Result<FallbackModels, ConfigError> {
    let Some(raw) = raw else {
        return Ok(FallbackModels::default());
    };
    let model = |v: &Option<String>, key: &str| match v {
        Some(m) if m.trim().is_empty() || m.contains('*') => Err(ConfigError::at(
            &format!("routing.fallback_models.{key}"),
            "a model id (no `*`)",
        )),
        v => Ok(v.clone()),
    };
    Ok(FallbackModels {
        images: model(&raw.images, "images")?,
        long_context: model(&raw.long_context, "long_context")?,
    })
}

/// The largest context window an entry may name (tokens).
const MAX_WINDOW: u64 = 100_000_000;

pub fn capabilities(
    raw: &[RawCapability],
    upstream_names: &[&str],
) -> Result<Vec<CapabilityRule>, ConfigError> {
    let mut out = Vec::with_capacity(raw.len());
    for (i, c) in raw.iter().enumerate() {
        let path = format!("routing.capabilities[{i}]");
        if let Some(u) = &c.upstream
            && !upstream_names.contains(&u.as_str())
        {
            return Err(ConfigError::at(
                &format!("{path}.upstream"),
                format!("no upstream is named `{u}`"),
            ));
        }
        let model = match &c.model {
            Some(m) => Some(pattern(m, &format!("{path}.model"))?),
            None => None,
        };
        for (key, v) in [
            ("context_window", c.context_window),
            ("max_output_tokens", c.max_output_tokens),
        ] {
            if v.is_some_and(|n| n == 0 || n > MAX_WINDOW) {
                return Err(ConfigError::at(
                    &format!("{path}.{key}"),
                    format!("must be between 1 and {MAX_WINDOW}"),
                ));
            }
        }
        let sets_something = c.vision.is_some()
            || c.context_window.is_some()
            || c.max_output_tokens.is_some()
            || c.server_tools.is_some()
            || c.tool_ids.is_some();
        if !sets_something {
            return Err(ConfigError::at(
                &path,
                "an entry needs `vision`, `context_window`, `max_output_tokens`, `server_tools` or `tool_ids`",
            ));
        }
        if let Some(ids) = &c.tool_ids {
            let lengths = [ids.length, ids.max_length];
            if lengths.iter().flatten().any(|n| !(8..=256).contains(n)) {
                return Err(ConfigError::at(
                    &format!("{path}.tool_ids"),
                    "lengths must be between 8 and 256",
                ));
            }
        }
        out.push(CapabilityRule {
            upstream: c.upstream.clone(),
            model,
            vision: c.vision,
            context_window: c.context_window,
            max_output_tokens: c.max_output_tokens,
            server_tools: c.server_tools.clone(),
            tool_ids: c.tool_ids,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn affinity_defaults_on_and_skips_excepted_models() {
        let a = affinity(None).unwrap();
        assert!(a.applies("claude-sonnet-4-6"));
        let raw = RawAffinity {
            enabled: None,
            except_models: vec!["claude-haiku-*".into()],
        };
        let a = affinity(Some(&raw)).unwrap();
        assert!(!a.applies("claude-haiku-4-5"));
        assert!(a.applies("claude-opus-4-8"));
        let bad = RawAffinity {
            enabled: None,
            except_models: vec!["a*b*".into()],
        };
        let e = affinity(Some(&bad)).unwrap_err();
        assert_eq!(e.path, "routing.affinity.except_models[0]");
    }

    #[test]
    fn capability_entries_name_their_field() {
        let entry = |c: RawCapability| capabilities(&[c], &["deepseek"]);
        let e = entry(RawCapability {
            upstream: Some("nope".into()),
            vision: Some(false),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(e.path, "routing.capabilities[0].upstream");
        let e = entry(RawCapability {
            context_window: Some(0),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(e.path, "routing.capabilities[0].context_window");
        let e = entry(RawCapability {
            model: Some("x".into()),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(e.path, "routing.capabilities[0]");
        let ok = entry(RawCapability {
            upstream: Some("deepseek".into()),
            model: Some("deepseek-*".into()),
            vision: Some(false),
            context_window: Some(128_000),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(ok[0].context_window, Some(128_000));
    }

    #[test]
    fn fallback_models_are_plain_ids() {
        let raw = RawFallbackModels {
            images: Some("claude-*".into()),
            long_context: None,
        };
        let e = fallback_models(Some(&raw)).unwrap_err();
        assert_eq!(e.path, "routing.fallback_models.images");
    }
}

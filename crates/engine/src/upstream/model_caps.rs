//! What one upstream's model can take ([`ModelCaps`]): vision, context window, output
//! limit and the Anthropic server tools it runs itself. The operator's
//! `routing.capabilities` entries come first, then the built-in `models` list of
//! `capabilities.json`; each field comes from the first entry that sets it. A model no
//! entry describes is taken to read images and run no server tools, with no window the
//! gateway checks (its upstream answers for itself).

use serde::Deserialize;

use crate::config::shaping::{CapabilityRule, ServerTool, ToolIds};

/// One model's capabilities on one upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelCaps {
    pub vision: bool,
    pub context_window: Option<u64>,
    pub max_output_tokens: Option<u64>,
    pub server_tools: Vec<ServerTool>,
    /// The tool-call ids it takes, when it restricts them beyond Anthropic's pattern.
    pub tool_ids: Option<ToolIds>,
}

impl ModelCaps {
    pub fn runs(&self, tool: ServerTool) -> bool {
        self.server_tools.contains(&tool)
    }
}

/// A built-in entry of `capabilities.json`'s `models`.
#[derive(Debug, Deserialize)]
struct Builtin {
    model: String,
    #[serde(default)]
    providers: Vec<String>,
    vision: Option<bool>,
    context_window: Option<u64>,
    max_output_tokens: Option<u64>,
    server_tools: Option<Vec<ServerTool>>,
    tool_ids: Option<ToolIds>,
}

#[derive(Debug, Deserialize)]
struct Models {
    models: Vec<Builtin>,
}

fn builtin() -> &'static [Builtin] {
    use std::sync::LazyLock;
    static MODELS: LazyLock<Vec<Builtin>> = LazyLock::new(|| {
        serde_json::from_str::<Models>(super::capabilities::TABLE_JSON)
            .map(|m| m.models)
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "the capability table's models do not parse");
                Vec::new()
            })
    });
    &MODELS
}

/// Models remembered per upstream by [`Memo`] (past it, the upstream's memo starts over).
const MEMO_PER_UPSTREAM: usize = 1024;

/// [`lookup`] remembered per upstream and model: shaping asks for every leg of every
/// request, and a lookup walks the tables.
pub struct Memo {
    rules: Vec<CapabilityRule>,
    upstreams: Vec<(String, &'static str)>,
    memo: Vec<std::sync::RwLock<std::collections::HashMap<Box<str>, std::sync::Arc<ModelCaps>>>>,
}

impl Memo {
    pub fn new(rules: &[CapabilityRule], upstreams: &[crate::config::UpstreamConfig]) -> Self {
        Memo {
            rules: rules.to_vec(),
            upstreams: upstreams
                .iter()
                .map(|u| (u.name.clone(), u.provider.as_str()))
                .collect(),
            memo: upstreams.iter().map(|_| Default::default()).collect(),
        }
    }

    /// The capabilities of `model` on the upstream at `upstream` (its index).
    pub fn get(&self, upstream: usize, model: &str) -> std::sync::Arc<ModelCaps> {
        let (Some((name, provider)), Some(memo)) =
            (self.upstreams.get(upstream), self.memo.get(upstream))
        else {
            return std::sync::Arc::new(lookup(&self.rules, "", "", model));
        };
        if let Ok(m) = memo.read()
            && let Some(c) = m.get(model)
        {
            return c.clone();
        }
        let caps = std::sync::Arc::new(lookup(&self.rules, name, provider, model));
        if let Ok(mut m) = memo.write() {
            if m.len() >= MEMO_PER_UPSTREAM {
                m.clear();
            }
            m.insert(model.into(), caps.clone());
        }
        caps
    }
}

/// `pattern` (case-insensitive; each `*` any run of characters) matches `text` whole.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.to_ascii_lowercase(), text.to_ascii_lowercase());
    let parts: Vec<&str> = p.split('*').collect();
    if parts.len() == 1 {
        return p == t;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !t.starts_with(first) || t.len() < first.len() + last.len() || !t.ends_with(last) {
        return false;
    }
    let mut rest = &t[first.len()..t.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// Fields not set yet, filled by each entry in turn.
#[derive(Default)]
struct Partial {
    vision: Option<bool>,
    context_window: Option<u64>,
    max_output_tokens: Option<u64>,
    server_tools: Option<Vec<ServerTool>>,
    tool_ids: Option<ToolIds>,
}

impl Partial {
    fn fill(
        &mut self,
        (vision, window, output): (Option<bool>, Option<u64>, Option<u64>),
        tools: Option<&Vec<ServerTool>>,
        ids: Option<ToolIds>,
    ) {
        self.tool_ids = self.tool_ids.or(ids);
        self.vision = self.vision.or(vision);
        self.context_window = self.context_window.or(window);
        self.max_output_tokens = self.max_output_tokens.or(output);
        if self.server_tools.is_none() {
            self.server_tools = tools.cloned();
        }
    }
}

/// The capabilities of `model` (the upstream's id) on upstream `upstream` of `provider`.
pub fn lookup(rules: &[CapabilityRule], upstream: &str, provider: &str, model: &str) -> ModelCaps {
    let mut p = Partial::default();
    for r in rules {
        let upstream_fits = r.upstream.as_deref().is_none_or(|u| u == upstream);
        let model_fits = r
            .model
            .as_deref()
            .is_none_or(|m| crate::models::listed(&[m.to_owned()], model));
        if upstream_fits && model_fits {
            p.fill(
                (r.vision, r.context_window, r.max_output_tokens),
                r.server_tools.as_ref(),
                r.tool_ids,
            );
        }
    }
    for b in builtin() {
        let provider_fits = b.providers.is_empty() || b.providers.iter().any(|x| x == provider);
        if provider_fits && glob(&b.model, model) {
            p.fill(
                (b.vision, b.context_window, b.max_output_tokens),
                b.server_tools.as_ref(),
                b.tool_ids,
            );
        }
    }
    ModelCaps {
        vision: p.vision.unwrap_or(true),
        context_window: p.context_window,
        max_output_tokens: p.max_output_tokens,
        server_tools: p.server_tools.unwrap_or_default(),
        tool_ids: p.tool_ids,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_ids() {
        assert!(glob("*claude*", "us.anthropic.claude-sonnet-4-6-v1:0"));
        assert!(glob("deepseek-*", "DeepSeek-Chat"));
        assert!(!glob("deepseek-*", "my-deepseek-chat"));
        assert!(glob("glm-4.6", "glm-4.6"));
        assert!(!glob("glm-4.6", "glm-4.6v"));
        assert!(glob("*", "anything"));
    }

    #[test]
    fn built_in_defaults_by_provider_and_model() {
        let c = lookup(&[], "a", "anthropic", "claude-sonnet-4-6");
        assert!(c.vision && c.runs(ServerTool::WebSearch) && c.runs(ServerTool::WebFetch));
        assert_eq!(c.context_window, None);
        let v = lookup(&[], "v", "vertex", "claude-sonnet-4-6@20250929");
        assert!(v.runs(ServerTool::WebSearch) && !v.runs(ServerTool::WebFetch));
        let b = lookup(&[], "b", "bedrock", "us.anthropic.claude-sonnet-4-6-v1:0");
        assert!(b.vision && b.server_tools.is_empty());
        // A DeepSeek model behind an Anthropic-compatible endpoint runs no server tools.
        let d = lookup(&[], "deepseek", "anthropic", "deepseek-chat");
        assert!(!d.vision && d.server_tools.is_empty());
        assert_eq!(d.context_window, Some(131_072));
        let unknown = lookup(&[], "o", "openai", "some-local-model");
        assert!(unknown.vision && unknown.context_window.is_none());
    }

    #[test]
    fn operator_entries_win_field_by_field() {
        let rules = vec![
            CapabilityRule {
                upstream: Some("deepseek".into()),
                context_window: Some(64_000),
                ..CapabilityRule::default()
            },
            CapabilityRule {
                model: Some("deepseek-*".into()),
                server_tools: Some(vec![ServerTool::WebSearch]),
                ..CapabilityRule::default()
            },
        ];
        let d = lookup(&rules, "deepseek", "openai", "deepseek-chat");
        assert_eq!(d.context_window, Some(64_000));
        assert!(!d.vision, "the built-in entry still says no vision");
        assert!(d.runs(ServerTool::WebSearch));
        let other = lookup(&rules, "other", "openai", "deepseek-chat");
        assert_eq!(other.context_window, Some(131_072));
    }
}

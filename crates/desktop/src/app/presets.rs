//! Provider presets: third-party model providers a developer can put behind Claude Code
//! in one step — the endpoint filled in, the key to the keychain, and a model map from
//! the Claude families Claude Code asks for to the provider's own models (so `/v1/models`
//! keeps listing ids Claude Code accepts).
//!
//! Anthropic-compatible endpoints (DeepSeek, Kimi, GLM, Qwen, MiniMax, OpenRouter) are
//! `provider: anthropic` upstreams with a `base_url`; local servers (Ollama, LM Studio)
//! and any other OpenAI-compatible URL are `provider: openai` upstreams (Chat
//! Completions, translated). Base URLs are the ones each provider publishes for
//! Anthropic-style clients; the form lets the user change them.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// How a preset's upstream is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// The Messages API; the key as `Authorization: Bearer` (`bearer`) or `x-api-key`.
    Anthropic { bearer: bool },
    /// Chat Completions (`base_url` includes the version path), the key as a bearer token.
    OpenAi,
}

/// Whether a preset needs a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyNeed {
    Required,
    Optional,
    /// Local servers: no key.
    None,
}

#[derive(Debug)]
pub struct Preset {
    pub id: &'static str,
    pub label: &'static str,
    pub wire: Wire,
    /// Empty: the user gives it (any OpenAI-compatible URL).
    pub base_url: &'static str,
    pub key: KeyNeed,
    /// Claude family (or `*`) -> the provider's model; empty values must be filled in.
    pub models: &'static [(&'static str, &'static str)],
}

const BEARER: Wire = Wire::Anthropic { bearer: true };

pub const PRESETS: &[Preset] = &[
    Preset {
        id: "deepseek",
        label: "DeepSeek",
        wire: BEARER,
        base_url: "https://api.deepseek.com/anthropic",
        key: KeyNeed::Required,
        models: &[
            ("opus", "deepseek-reasoner"),
            ("sonnet", "deepseek-chat"),
            ("haiku", "deepseek-chat"),
        ],
    },
    Preset {
        id: "kimi",
        label: "Kimi (Moonshot)",
        wire: BEARER,
        base_url: "https://api.moonshot.ai/anthropic",
        key: KeyNeed::Required,
        models: &[
            ("opus", "kimi-k2-thinking"),
            ("sonnet", "kimi-k2-turbo-preview"),
            ("haiku", "kimi-k2-turbo-preview"),
        ],
    },
    Preset {
        id: "glm",
        label: "GLM (Z.ai)",
        wire: BEARER,
        base_url: "https://api.z.ai/api/anthropic",
        key: KeyNeed::Required,
        models: &[
            ("opus", "glm-4.6"),
            ("sonnet", "glm-4.6"),
            ("haiku", "glm-4.5-air"),
        ],
    },
    Preset {
        id: "qwen",
        label: "Qwen (Alibaba Model Studio)",
        wire: Wire::Anthropic { bearer: false },
        base_url: "https://dashscope-intl.aliyuncs.com/apps/anthropic",
        key: KeyNeed::Required,
        models: &[
            ("opus", "qwen3-max"),
            ("sonnet", "qwen3-coder-plus"),
            ("haiku", "qwen3-coder-flash"),
        ],
    },
    Preset {
        id: "minimax",
        label: "MiniMax",
        wire: BEARER,
        base_url: "https://api.minimax.io/anthropic",
        key: KeyNeed::Required,
        models: &[
            ("opus", "MiniMax-M2"),
            ("sonnet", "MiniMax-M2"),
            ("haiku", "MiniMax-M2"),
        ],
    },
    Preset {
        id: "openrouter",
        label: "OpenRouter",
        wire: BEARER,
        base_url: "https://openrouter.ai/api",
        key: KeyNeed::Required,
        models: &[
            ("opus", "anthropic/claude-opus-4.5"),
            ("sonnet", "anthropic/claude-sonnet-4.5"),
            ("haiku", "anthropic/claude-haiku-4.5"),
        ],
    },
    Preset {
        id: "ollama",
        label: "Ollama (local)",
        wire: Wire::OpenAi,
        base_url: "http://127.0.0.1:11434/v1",
        key: KeyNeed::None,
        models: &[("*", "")],
    },
    Preset {
        id: "lmstudio",
        label: "LM Studio (local)",
        wire: Wire::OpenAi,
        base_url: "http://127.0.0.1:1234/v1",
        key: KeyNeed::None,
        models: &[("*", "")],
    },
    Preset {
        id: "openai-compatible",
        label: "Any OpenAI-compatible URL",
        wire: Wire::OpenAi,
        base_url: "",
        key: KeyNeed::Optional,
        models: &[("opus", ""), ("sonnet", ""), ("haiku", "")],
    },
];

pub fn find(id: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.id == id)
}

impl Preset {
    /// The preset as the UI's form reads it.
    pub fn to_json(&self) -> Value {
        let models: BTreeMap<&str, &str> = self.models.iter().copied().collect();
        json!({
            "id": self.id,
            "label": self.label,
            "wire": match self.wire {
                Wire::Anthropic { .. } => "anthropic",
                Wire::OpenAi => "openai",
            },
            "base_url": self.base_url,
            "key": match self.key {
                KeyNeed::Required => "required",
                KeyNeed::Optional => "optional",
                KeyNeed::None => "none",
            },
            "models": models,
        })
    }
}

/// Every preset for the UI.
pub fn all_json() -> Value {
    Value::Array(PRESETS.iter().map(Preset::to_json).collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn presets_are_unique_and_well_formed() {
        let mut ids: Vec<&str> = PRESETS.iter().map(|p| p.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), PRESETS.len());
        for p in PRESETS {
            assert!(!p.models.is_empty(), "{}", p.id);
            if !p.base_url.is_empty() {
                let url = url::Url::parse(p.base_url).unwrap();
                let local = url.host_str() == Some("127.0.0.1");
                assert_eq!(local, p.key == KeyNeed::None, "{}", p.id);
                assert!(local || url.scheme() == "https", "{}", p.id);
            }
            for (family, _) in p.models {
                assert!(
                    *family == "*" || gatehouse_engine::config::CLAUDE_FAMILIES.contains(family),
                    "{}",
                    p.id
                );
            }
        }
    }
}

//! Built-in Claude model ids as each provider names them: the Anthropic id as is, Bedrock's
//! `anthropic.` ids (dated ones with `-v1:0`) behind a cross-region inference profile
//! prefix for the region's geography, Vertex's `@`-dated ids, Foundry's undated ids,
//! Bedrock Mantle's undated `anthropic.` ids (only the models Mantle serves; Claude
//! Platform on AWS takes Anthropic's ids). An operator's `models[].upstream_model` always
//! wins over these.

use crate::config::Provider;

use super::builtin;

/// How one upstream names built-in models.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdStyle {
    Anthropic,
    /// With the inference-profile prefix (`us.`, `eu.`, `apac.`), if the region has one.
    Bedrock {
        profile: Option<&'static str>,
    },
    Vertex,
    Foundry,
    /// `anthropic.<undated id>`, for the built-in models Mantle serves ([`MANTLE`]).
    Mantle,
}

/// The built-in models Bedrock Mantle serves (as Claude Code 2.1.333's table lists them);
/// a built-in model not here has no Mantle id. Ids the table does not know (newer models)
/// are passed on as `anthropic.<id>`.
const MANTLE: &[&str] = &[
    "claude-haiku-4-5",
    "claude-opus-4-7",
    "claude-opus-4-8",
    "claude-opus-5",
    "claude-opus-5-5",
    "claude-sonnet-5",
    "claude-sonnet-5-5",
    "claude-haiku-5-5",
    "claude-fable-5",
    "claude-fable-5-1",
    "claude-fable-5-2",
];

impl IdStyle {
    pub fn of(provider: &Provider) -> Self {
        match provider {
            // OpenAI-compatible upstreams get the requested id as is; operators map it with
            // `models[].upstream_model`.
            Provider::Anthropic | Provider::OpenAi(_) | Provider::AnthropicAws(_) => {
                IdStyle::Anthropic
            }
            // Claude Platform on Google Cloud takes Anthropic's own ids.
            Provider::AnthropicGoogleCloud(_) => IdStyle::Anthropic,
            Provider::Mantle(_) => IdStyle::Mantle,
            Provider::Bedrock(b) => IdStyle::Bedrock {
                profile: profile(&b.region),
            },
            Provider::Vertex(_) => IdStyle::Vertex,
            Provider::Foundry(_) => IdStyle::Foundry,
        }
    }

    /// Whether this provider has an id for `requested` (Mantle serves only some built-in
    /// models; every other provider all of them).
    pub fn serves(&self, requested: &str) -> bool {
        match self {
            IdStyle::Mantle => {
                let (undated, date) = split(requested);
                let known = builtin(&undated).is_some() || date.is_some();
                !known || MANTLE.contains(&undated.as_str())
            }
            _ => true,
        }
    }

    /// The id this upstream expects for `requested` (a built-in id or alias, or a Claude
    /// id of a known family).
    pub fn id_for(&self, requested: &str) -> String {
        let (undated, date) = split(requested);
        match self {
            IdStyle::Anthropic => requested.to_owned(),
            IdStyle::Mantle => format!("anthropic.{undated}"),
            IdStyle::Foundry => undated,
            IdStyle::Vertex => match date {
                Some(d) => format!("{undated}@{d}"),
                None => undated,
            },
            IdStyle::Bedrock { profile } => {
                let base = match date {
                    Some(d) => format!("anthropic.{undated}-{d}-v1:0"),
                    None => format!("anthropic.{undated}"),
                };
                match profile {
                    Some(p) => format!("{p}.{base}"),
                    None => base,
                }
            }
        }
    }
}

/// Bedrock's cross-region inference profile for a region's geography.
fn profile(region: &str) -> Option<&'static str> {
    if region.starts_with("us-") || region.starts_with("ca-") {
        Some("us")
    } else if region.starts_with("eu-") {
        Some("eu")
    } else if region.starts_with("ap-") {
        Some("apac")
    } else {
        None
    }
}

/// The undated id and the `YYYYMMDD` date a provider needs: the requested id's own date,
/// else the built-in model's dated alias (`claude-opus-4-5` -> `claude-opus-4-5-20251101`).
fn split(requested: &str) -> (String, Option<String>) {
    let dated = |id: &str| -> Option<(String, String)> {
        let (head, tail) = id.rsplit_once('-')?;
        (tail.len() == 8 && tail.bytes().all(|b| b.is_ascii_digit()))
            .then(|| (head.to_owned(), tail.to_owned()))
    };
    let lower = requested.trim().to_ascii_lowercase();
    let lower = lower.split('[').next().unwrap_or_default().to_owned();
    if let Some((head, date)) = dated(&lower) {
        return (head, Some(date));
    }
    match builtin(&lower).and_then(|b| b.aliases.iter().find_map(|a| dated(a))) {
        Some((head, date)) => (head, Some(date)),
        None => (lower, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_follow_each_wire() {
        let us = IdStyle::Bedrock {
            profile: profile("us-east-1"),
        };
        let eu = IdStyle::Bedrock {
            profile: profile("eu-west-1"),
        };
        let sa = IdStyle::Bedrock {
            profile: profile("sa-east-1"),
        };
        assert_eq!(us.id_for("claude-opus-4-8"), "us.anthropic.claude-opus-4-8");
        assert_eq!(
            us.id_for("claude-sonnet-4-20250514"),
            "us.anthropic.claude-sonnet-4-20250514-v1:0"
        );
        assert_eq!(
            eu.id_for("claude-opus-4-5"),
            "eu.anthropic.claude-opus-4-5-20251101-v1:0"
        );
        assert_eq!(sa.id_for("claude-opus-4-8"), "anthropic.claude-opus-4-8");
        assert_eq!(
            IdStyle::Vertex.id_for("claude-sonnet-4-20250514"),
            "claude-sonnet-4@20250514"
        );
        assert_eq!(IdStyle::Vertex.id_for("claude-opus-4-8"), "claude-opus-4-8");
        assert_eq!(
            IdStyle::Foundry.id_for("claude-sonnet-4-20250514"),
            "claude-sonnet-4"
        );
        assert_eq!(
            IdStyle::Anthropic.id_for("claude-opus-4-5"),
            "claude-opus-4-5"
        );
        assert_eq!(
            IdStyle::Mantle.id_for("claude-opus-4-8"),
            "anthropic.claude-opus-4-8"
        );
        assert_eq!(
            IdStyle::Mantle.id_for("claude-haiku-4-5-20251001"),
            "anthropic.claude-haiku-4-5"
        );
        assert!(IdStyle::Mantle.serves("claude-opus-4-8[1m]"));
        assert!(
            IdStyle::Mantle.serves("claude-opus-9"),
            "newer than the table"
        );
        assert!(!IdStyle::Mantle.serves("claude-sonnet-4-20250514"));
        assert!(!IdStyle::Mantle.serves("claude-sonnet-4-6"));
        assert!(IdStyle::Foundry.serves("claude-sonnet-4-20250514"));
    }
}

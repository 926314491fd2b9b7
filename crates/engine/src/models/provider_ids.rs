//! Model ids as each provider names them. A built-in model in the reference's table
//! ([`super::reference_ids`]) is sent under that table's id for the provider: the dated
//! first-party id on Anthropic, Claude Platform on AWS and on Google Cloud, Bedrock's id
//! behind the region's inference profile, Vertex's `@`-dated id, Foundry's undated one,
//! Mantle's `anthropic.` id; a provider with no id there does not serve it. Other Claude
//! ids (models newer than the table, Mythos) follow rules: Anthropic's id as requested,
//! Bedrock's `anthropic.` ids (dated ones with `-v1:0`) behind the profile, Vertex's
//! `@`-dated ids, Foundry's undated ids, Mantle's undated `anthropic.` ids. An OpenAI-
//! compatible upstream gets the id as requested. An operator's
//! `models[].upstream_model` always wins over these.
//!
//! One deliberate difference from the reference: outside the US and Canada the reference
//! sends Bedrock the bare in-region id (`anthropic.…`), which Bedrock refuses for the
//! models it serves only through cross-region inference profiles ("on-demand throughput
//! isn't supported"); Gatehouse sends the region's own profile (`eu.`, `apac.`) instead,
//! and the bare id where no profile exists (GovCloud, South America, …), as the
//! reference does.

use crate::config::Provider;

use super::builtin;
use super::reference_ids::{self, Ids};

/// How one upstream names models.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdStyle {
    Anthropic,
    AnthropicAws,
    AnthropicGoogleCloud,
    /// With the inference-profile prefix (`us.`, `eu.`, `apac.`), if the region has one.
    Bedrock {
        profile: Option<&'static str>,
    },
    Vertex,
    Foundry,
    /// `anthropic.<undated id>`, for the built-in models Mantle serves.
    Mantle,
    /// The id as requested (OpenAI-compatible upstreams; operators map ids themselves).
    AsRequested,
}

impl IdStyle {
    pub fn of(provider: &Provider) -> Self {
        match provider {
            Provider::Anthropic => IdStyle::Anthropic,
            Provider::AnthropicAws(_) => IdStyle::AnthropicAws,
            Provider::AnthropicGoogleCloud(_) => IdStyle::AnthropicGoogleCloud,
            Provider::OpenAi(_) => IdStyle::AsRequested,
            Provider::Mantle(_) => IdStyle::Mantle,
            Provider::Bedrock(b) => IdStyle::Bedrock {
                profile: profile(&b.region),
            },
            Provider::Vertex(_) => IdStyle::Vertex,
            Provider::Foundry(_) => IdStyle::Foundry,
        }
    }

    /// Whether this provider has an id for `requested`: the table's say for its models;
    /// else every provider but Mantle, which serves no other built-in model (ids the
    /// table and the built-in list do not know are passed on).
    pub fn serves(&self, requested: &str) -> bool {
        if *self == IdStyle::AsRequested {
            return true;
        }
        if let Some(row) = reference_ids::row(requested) {
            return self.in_table(row).is_some();
        }
        match self {
            IdStyle::Mantle => {
                let (undated, date) = split(requested);
                builtin(&undated).is_none() && date.is_none()
            }
            _ => true,
        }
    }

    /// The id this upstream expects for `requested` (a built-in id or alias, or a Claude
    /// id of a known family).
    pub fn id_for(&self, requested: &str) -> String {
        if *self == IdStyle::AsRequested {
            return requested.to_owned();
        }
        match reference_ids::row(requested).and_then(|r| self.in_table(r)) {
            Some(id) => id,
            None => self.by_rule(requested),
        }
    }

    /// The table's id of a model for this provider (`None`: not served there).
    fn in_table(&self, row: &Ids) -> Option<String> {
        match self {
            IdStyle::Anthropic => Some(row.first_party.to_owned()),
            IdStyle::AnthropicAws => row.anthropic_aws.map(str::to_owned),
            IdStyle::AnthropicGoogleCloud => row.anthropic_google_cloud.map(str::to_owned),
            IdStyle::Vertex => row.vertex.map(str::to_owned),
            IdStyle::Foundry => row.foundry.map(str::to_owned),
            IdStyle::Mantle => row.mantle.map(str::to_owned),
            IdStyle::AsRequested => None,
            IdStyle::Bedrock { profile } => {
                let bare = row.bedrock?.strip_prefix("us.")?;
                Some(match profile {
                    Some(p) => format!("{p}.{bare}"),
                    None => bare.to_owned(),
                })
            }
        }
    }

    /// The id of a Claude model the table does not know.
    fn by_rule(&self, requested: &str) -> String {
        let (undated, date) = split(requested);
        match self {
            IdStyle::Anthropic
            | IdStyle::AnthropicAws
            | IdStyle::AnthropicGoogleCloud
            | IdStyle::AsRequested => requested.to_owned(),
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

/// Whether `sent` is the first-party id of the built-in model `requested` names (an
/// answer under it names the same model, one the gateway serves).
pub fn same_first_party(requested: &str, sent: &str) -> bool {
    reference_ids::row(requested).is_some_and(|r| r.first_party.eq_ignore_ascii_case(sent))
}

/// Bedrock's cross-region inference profile for a region's geography.
fn profile(region: &str) -> Option<&'static str> {
    if region.starts_with("us-gov-") {
        None
    } else if region.starts_with("us-") || region.starts_with("ca-") {
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

    fn bedrock(region: &str) -> IdStyle {
        IdStyle::Bedrock {
            profile: profile(region),
        }
    }

    #[test]
    fn table_models_go_by_the_references_ids() {
        let a = IdStyle::Anthropic;
        assert_eq!(a.id_for("claude-sonnet-4-5"), "claude-sonnet-4-5-20250929");
        assert_eq!(a.id_for("claude-sonnet-4"), "claude-sonnet-4-20250514");
        assert_eq!(
            a.id_for("claude-haiku-4-5[1m]"),
            "claude-haiku-4-5-20251001"
        );
        assert_eq!(a.id_for("claude-opus-4-8"), "claude-opus-4-8");
        assert_eq!(
            IdStyle::AnthropicAws.id_for("claude-opus-4-5"),
            "claude-opus-4-5-20251101"
        );
        let gcp = IdStyle::AnthropicGoogleCloud;
        assert_eq!(gcp.id_for("claude-haiku-4-5"), "claude-haiku-4-5-20251001");
        assert!(
            !gcp.serves("claude-opus-4-1"),
            "older than the 4.5 generation"
        );
        assert!(gcp.serves("claude-opus-4-6"));
        assert_eq!(
            bedrock("us-east-1").id_for("claude-opus-4-6"),
            "us.anthropic.claude-opus-4-6-v1"
        );
        assert_eq!(
            bedrock("us-west-2").id_for("claude-3-5-sonnet"),
            "us.anthropic.claude-3-5-sonnet-20241022-v2:0"
        );
        assert_eq!(
            IdStyle::Vertex.id_for("claude-3-5-sonnet"),
            "claude-3-5-sonnet-v2@20241022"
        );
        assert_eq!(
            IdStyle::Foundry.id_for("claude-sonnet-4-0"),
            "claude-sonnet-4"
        );
        assert!(!IdStyle::Mantle.serves("claude-sonnet-4-5"));
        assert!(!IdStyle::Mantle.serves("claude-sonnet-4-20250514"));
        assert!(!IdStyle::Mantle.serves("claude-sonnet-4-6"));
        assert!(IdStyle::Mantle.serves("claude-opus-4-8[1m]"));
        assert_eq!(
            IdStyle::Mantle.id_for("claude-haiku-4-5-20251001"),
            "anthropic.claude-haiku-4-5"
        );
        assert_eq!(
            IdStyle::AsRequested.id_for("claude-sonnet-4-5"),
            "claude-sonnet-4-5"
        );
    }

    #[test]
    fn bedrock_profiles_follow_the_region() {
        assert_eq!(
            bedrock("ca-central-1").id_for("claude-sonnet-4-20250514"),
            "us.anthropic.claude-sonnet-4-20250514-v1:0"
        );
        assert_eq!(
            bedrock("eu-west-1").id_for("claude-opus-4-5"),
            "eu.anthropic.claude-opus-4-5-20251101-v1:0"
        );
        assert_eq!(
            bedrock("ap-northeast-1").id_for("claude-opus-4-6"),
            "apac.anthropic.claude-opus-4-6-v1"
        );
        assert_eq!(
            bedrock("sa-east-1").id_for("claude-opus-4-8"),
            "anthropic.claude-opus-4-8"
        );
        assert_eq!(
            bedrock("us-gov-west-1").id_for("claude-sonnet-4-5"),
            "anthropic.claude-sonnet-4-5-20250929-v1:0",
            "no us. profile in GovCloud"
        );
    }

    #[test]
    fn other_claude_ids_go_by_rule() {
        assert_eq!(IdStyle::Anthropic.id_for("claude-opus-9"), "claude-opus-9");
        assert_eq!(
            IdStyle::Anthropic.id_for("claude-mythos-5"),
            "claude-mythos-5"
        );
        assert_eq!(
            bedrock("us-east-1").id_for("claude-opus-9-20300101"),
            "us.anthropic.claude-opus-9-20300101-v1:0"
        );
        assert_eq!(
            IdStyle::Vertex.id_for("claude-opus-9-20300101"),
            "claude-opus-9@20300101"
        );
        assert_eq!(
            IdStyle::Foundry.id_for("claude-opus-9-20300101"),
            "claude-opus-9"
        );
        assert!(
            IdStyle::Mantle.serves("claude-opus-9"),
            "newer than the table"
        );
        assert!(!IdStyle::Mantle.serves("claude-mythos-5"));
        assert!(IdStyle::Foundry.serves("claude-mythos-5"));
    }

    #[test]
    fn the_first_party_id_names_the_same_model() {
        assert!(same_first_party(
            "claude-sonnet-4-5",
            "claude-sonnet-4-5-20250929"
        ));
        assert!(!same_first_party("claude-sonnet-4-5", "claude-sonnet-4-6"));
        assert!(!same_first_party("claude-opus-9", "claude-opus-9"));
    }
}

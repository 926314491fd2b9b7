//! The reference gateway's table of built-in Claude model ids per provider (Claude Code
//! 2.1.337's model catalog, as its gateway reads it: one row per catalog id it knows, the
//! id each provider is sent for it). A request for a row's model (by its id, a dated id or
//! any spelling in the row) reaches an upstream under that provider's id: the dated
//! first-party id on Anthropic (`claude-sonnet-4-5` is sent as
//! `claude-sonnet-4-5-20250929`), on Claude Platform on AWS and on Google Cloud; Bedrock's
//! id behind the `us.` inference profile (`-v1:0`, `-v2:0` or `-v1` as each model has it);
//! Vertex's `@`-dated id; Foundry's undated one; Mantle's `anthropic.` id. An empty entry:
//! that provider does not serve the model (Mantle serves only the newer models, Claude
//! Platform on Google Cloud none older than the 4.5 generation). Models not in the table
//! (newer ones, Mythos) follow [`super::provider_ids`]' rules instead.

/// One built-in model's ids; `None`: the provider does not serve it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ids {
    /// The built-in model's id ([`super::BUILTIN`]).
    pub model: &'static str,
    pub first_party: &'static str,
    /// With the `us.` cross-region inference profile.
    pub bedrock: Option<&'static str>,
    pub vertex: Option<&'static str>,
    pub foundry: Option<&'static str>,
    pub anthropic_aws: Option<&'static str>,
    pub anthropic_google_cloud: Option<&'static str>,
    pub mantle: Option<&'static str>,
}

impl Ids {
    /// Whether `id` (lower case) is one of this row's spellings.
    fn names(&self, id: &str) -> bool {
        [
            Some(self.model),
            Some(self.first_party),
            self.bedrock,
            self.vertex,
            self.foundry,
            self.anthropic_aws,
            self.anthropic_google_cloud,
            self.mantle,
        ]
        .into_iter()
        .flatten()
        .any(|s| s == id)
    }
}

/// `""` is a provider that does not serve the model.
const fn some(id: &'static str) -> Option<&'static str> {
    if id.is_empty() { None } else { Some(id) }
}

#[allow(clippy::too_many_arguments)]
const fn ids(
    model: &'static str,
    first_party: &'static str,
    bedrock: &'static str,
    vertex: &'static str,
    foundry: &'static str,
    anthropic_aws: &'static str,
    anthropic_google_cloud: &'static str,
    mantle: &'static str,
) -> Ids {
    Ids {
        model,
        first_party,
        bedrock: some(bedrock),
        vertex: some(vertex),
        foundry: some(foundry),
        anthropic_aws: some(anthropic_aws),
        anthropic_google_cloud: some(anthropic_google_cloud),
        mantle: some(mantle),
    }
}

/// The row of the built-in model `model` names exactly (its id, one of its aliases or any
/// provider's spelling of it; case-insensitive, a `[1m]` suffix aside). A date the model
/// does not have names no row.
pub fn row(model: &str) -> Option<&'static Ids> {
    let lower = model.trim().to_ascii_lowercase();
    let lower = lower.split('[').next().unwrap_or_default();
    let builtin = super::BUILTIN
        .iter()
        .find(|b| b.id == lower || b.aliases.contains(&lower))
        .map(|b| b.id);
    TABLE
        .iter()
        .find(|r| Some(r.model) == builtin || r.names(lower))
}

/// The table, newest first within each family (fields: model, first party, Bedrock, Vertex,
/// Foundry, Claude Platform on AWS, Claude Platform on Google Cloud, Mantle).
pub const TABLE: &[Ids] = &[
    ids(
        "claude-opus-5-5",
        "claude-opus-5-5",
        "us.anthropic.claude-opus-5-5",
        "claude-opus-5-5",
        "claude-opus-5-5",
        "claude-opus-5-5",
        "claude-opus-5-5",
        "anthropic.claude-opus-5-5",
    ),
    ids(
        "claude-opus-5",
        "claude-opus-5",
        "us.anthropic.claude-opus-5",
        "claude-opus-5",
        "claude-opus-5",
        "claude-opus-5",
        "claude-opus-5",
        "anthropic.claude-opus-5",
    ),
    ids(
        "claude-opus-4-8",
        "claude-opus-4-8",
        "us.anthropic.claude-opus-4-8",
        "claude-opus-4-8",
        "claude-opus-4-8",
        "claude-opus-4-8",
        "claude-opus-4-8",
        "anthropic.claude-opus-4-8",
    ),
    ids(
        "claude-opus-4-7",
        "claude-opus-4-7",
        "us.anthropic.claude-opus-4-7",
        "claude-opus-4-7",
        "claude-opus-4-7",
        "claude-opus-4-7",
        "claude-opus-4-7",
        "anthropic.claude-opus-4-7",
    ),
    ids(
        "claude-opus-4-6",
        "claude-opus-4-6",
        "us.anthropic.claude-opus-4-6-v1",
        "claude-opus-4-6",
        "claude-opus-4-6",
        "claude-opus-4-6",
        "claude-opus-4-6",
        "",
    ),
    ids(
        "claude-opus-4-5",
        "claude-opus-4-5-20251101",
        "us.anthropic.claude-opus-4-5-20251101-v1:0",
        "claude-opus-4-5@20251101",
        "claude-opus-4-5",
        "claude-opus-4-5-20251101",
        "claude-opus-4-5-20251101",
        "",
    ),
    ids(
        "claude-opus-4-1",
        "claude-opus-4-1-20250805",
        "us.anthropic.claude-opus-4-1-20250805-v1:0",
        "claude-opus-4-1@20250805",
        "claude-opus-4-1",
        "claude-opus-4-1-20250805",
        "",
        "",
    ),
    ids(
        "claude-opus-4-0",
        "claude-opus-4-20250514",
        "us.anthropic.claude-opus-4-20250514-v1:0",
        "claude-opus-4@20250514",
        "claude-opus-4",
        "claude-opus-4-20250514",
        "",
        "",
    ),
    ids(
        "claude-sonnet-5-5",
        "claude-sonnet-5-5",
        "us.anthropic.claude-sonnet-5-5",
        "claude-sonnet-5-5",
        "claude-sonnet-5-5",
        "claude-sonnet-5-5",
        "claude-sonnet-5-5",
        "anthropic.claude-sonnet-5-5",
    ),
    ids(
        "claude-sonnet-5",
        "claude-sonnet-5",
        "us.anthropic.claude-sonnet-5",
        "claude-sonnet-5",
        "claude-sonnet-5",
        "claude-sonnet-5",
        "claude-sonnet-5",
        "anthropic.claude-sonnet-5",
    ),
    ids(
        "claude-sonnet-4-6",
        "claude-sonnet-4-6",
        "us.anthropic.claude-sonnet-4-6",
        "claude-sonnet-4-6",
        "claude-sonnet-4-6",
        "claude-sonnet-4-6",
        "claude-sonnet-4-6",
        "",
    ),
    ids(
        "claude-sonnet-4-5",
        "claude-sonnet-4-5-20250929",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "claude-sonnet-4-5@20250929",
        "claude-sonnet-4-5",
        "claude-sonnet-4-5-20250929",
        "claude-sonnet-4-5-20250929",
        "",
    ),
    ids(
        "claude-sonnet-4-0",
        "claude-sonnet-4-20250514",
        "us.anthropic.claude-sonnet-4-20250514-v1:0",
        "claude-sonnet-4@20250514",
        "claude-sonnet-4",
        "claude-sonnet-4-20250514",
        "",
        "",
    ),
    ids(
        "claude-3-7-sonnet",
        "claude-3-7-sonnet-20250219",
        "us.anthropic.claude-3-7-sonnet-20250219-v1:0",
        "claude-3-7-sonnet@20250219",
        "claude-3-7-sonnet",
        "claude-3-7-sonnet-20250219",
        "",
        "",
    ),
    ids(
        "claude-3-5-sonnet",
        "claude-3-5-sonnet-20241022",
        "us.anthropic.claude-3-5-sonnet-20241022-v2:0",
        "claude-3-5-sonnet-v2@20241022",
        "claude-3-5-sonnet",
        "claude-3-5-sonnet-20241022",
        "",
        "",
    ),
    ids(
        "claude-haiku-5-5",
        "claude-haiku-5-5",
        "us.anthropic.claude-haiku-5-5",
        "claude-haiku-5-5",
        "claude-haiku-5-5",
        "claude-haiku-5-5",
        "claude-haiku-5-5",
        "anthropic.claude-haiku-5-5",
    ),
    ids(
        "claude-haiku-4-5",
        "claude-haiku-4-5-20251001",
        "us.anthropic.claude-haiku-4-5-20251001-v1:0",
        "claude-haiku-4-5@20251001",
        "claude-haiku-4-5",
        "claude-haiku-4-5-20251001",
        "claude-haiku-4-5-20251001",
        "anthropic.claude-haiku-4-5",
    ),
    ids(
        "claude-3-5-haiku",
        "claude-3-5-haiku-20241022",
        "us.anthropic.claude-3-5-haiku-20241022-v1:0",
        "claude-3-5-haiku@20241022",
        "claude-3-5-haiku",
        "claude-3-5-haiku-20241022",
        "",
        "",
    ),
    ids(
        "claude-fable-5-2",
        "claude-fable-5-2",
        "us.anthropic.claude-fable-5-2",
        "claude-fable-5-2",
        "claude-fable-5-2",
        "claude-fable-5-2",
        "claude-fable-5-2",
        "anthropic.claude-fable-5-2",
    ),
    ids(
        "claude-fable-5-1",
        "claude-fable-5-1",
        "us.anthropic.claude-fable-5-1",
        "claude-fable-5-1",
        "claude-fable-5-1",
        "claude-fable-5-1",
        "claude-fable-5-1",
        "anthropic.claude-fable-5-1",
    ),
    ids(
        "claude-fable-5",
        "claude-fable-5",
        "us.anthropic.claude-fable-5",
        "claude-fable-5",
        "claude-fable-5",
        "claude-fable-5",
        "claude-fable-5",
        "anthropic.claude-fable-5",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_a_builtin_model() {
        for r in TABLE {
            let b = super::super::builtin(r.model);
            assert_eq!(b.map(|b| b.id), Some(r.model), "{}", r.model);
            assert_eq!(row(r.first_party).map(|x| x.model), Some(r.model));
        }
    }

    #[test]
    fn any_spelling_finds_its_row() {
        let sonnet = |id| row(id).map(|r| r.model);
        assert_eq!(sonnet("claude-sonnet-4-5"), Some("claude-sonnet-4-5"));
        assert_eq!(
            sonnet("Claude-Sonnet-4-5-20250929"),
            Some("claude-sonnet-4-5")
        );
        assert_eq!(sonnet("claude-sonnet-4-5[1m]"), Some("claude-sonnet-4-5"));
        assert_eq!(sonnet("claude-sonnet-4"), Some("claude-sonnet-4-0"));
        assert_eq!(
            sonnet("us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
            Some("claude-sonnet-4-5")
        );
        assert_eq!(
            sonnet("claude-mythos-5"),
            None,
            "not in the reference's table"
        );
        assert_eq!(sonnet("claude-opus-9"), None);
        assert_eq!(sonnet("claude-sonnet-4-5-20990101"), None, "not its date");
    }
}

//! The model families a spend limit may name (a Gatehouse extension to the reference's
//! limits): a limit with `model: "opus"` binds only requests for an Opus model and counts
//! only Opus spend.
//!
//! A family is one of the Claude families the engine knows ([`crate::config::CLAUDE_FAMILIES`]:
//! `opus`, `sonnet`, `haiku`, `fable`, `mythos`), spelled exactly so; no other model ids or
//! patterns are accepted, so one limit always means one well-defined set of requests. A
//! request's family is that of the model id it asks for ([`crate::models::family`]: dated
//! ids, `[1m]` suffixes and built-in aliases included). An upstream's `model_map` changes
//! what is sent, not what was asked for: a `claude-sonnet-4-6` request served as another
//! model stays a Sonnet request. A model without a Claude family (an operator's `models[]`
//! row such as `gpt-4o`) is bound by the limits of every model only.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::config::CLAUDE_FAMILIES;

/// A Claude model family, one of [`CLAUDE_FAMILIES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Family(&'static str);

impl Family {
    /// Every family, in [`CLAUDE_FAMILIES`] order.
    pub fn all() -> impl Iterator<Item = Family> {
        CLAUDE_FAMILIES.iter().map(|f| Family(f))
    }

    /// The family a limit names: exactly one of [`CLAUDE_FAMILIES`].
    pub fn parse(s: &str) -> Option<Family> {
        CLAUDE_FAMILIES.iter().find(|f| **f == s).map(|f| Family(f))
    }

    /// The family of a requested model id, if it is a Claude model.
    pub fn of_model(id: &str) -> Option<Family> {
        crate::models::family(id).and_then(Family::parse)
    }

    pub fn as_str(self) -> &'static str {
        self.0
    }

    /// The family as people write it: `Opus`.
    pub fn label(self) -> String {
        let mut c = self.0.chars();
        c.next()
            .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
            .unwrap_or_default()
    }

    /// The accepted names, for error messages: `opus, sonnet, haiku, …`.
    pub fn one_of() -> String {
        CLAUDE_FAMILIES.join(", ")
    }
}

impl Serialize for Family {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

impl<'de> Deserialize<'de> for Family {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Family::parse(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("must be one of {}", Family::one_of())))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn families_are_the_engines_and_requests_map_to_them() {
        assert_eq!(Family::parse("opus").map(Family::as_str), Some("opus"));
        for no in ["Opus", "claude-opus-4-7", "opus*", "", "gpt"] {
            assert_eq!(Family::parse(no), None, "{no}");
        }
        assert_eq!(
            Family::of_model("claude-opus-4-7-20260101"),
            Family::parse("opus")
        );
        assert_eq!(
            Family::of_model("claude-sonnet-4-6[1m]"),
            Family::parse("sonnet")
        );
        assert_eq!(Family::of_model("gpt-4o"), None);
        assert_eq!(Family::parse("haiku").unwrap().label(), "Haiku");
        assert!(Family::one_of().starts_with("opus, sonnet, haiku"));
        assert_eq!(Family::all().count(), CLAUDE_FAMILIES.len());
        let j = serde_json::to_string(&Family::parse("opus")).unwrap();
        assert_eq!(j, "\"opus\"");
        assert_eq!(
            serde_json::from_str::<Family>(&j).unwrap(),
            Family::parse("opus").unwrap()
        );
        assert!(serde_json::from_str::<Family>("\"gpt\"").is_err());
    }
}

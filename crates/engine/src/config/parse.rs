//! The expanded YAML tree -> [`RawConfig`], reporting as many of serde's errors as it can.
//!
//! serde stops at the first error. To list more, as the reference does, a failing key is
//! taken out of the tree and the parse is tried again: an unknown key exactly (the file
//! means the same without it), a value of the wrong type when the key is optional (its
//! default stands in). The loop ends at an error nothing can be taken out for (a missing
//! required key, a bad list item) or when the parse succeeds. Only a file whose problems
//! were all unknown keys goes on to validation: there the pruned file is the file as meant,
//! while a pruned value would let validation judge a default the operator did not write.

use serde_path_to_error::Segment;
use serde_yaml_ng::Value;

use super::raw::RawConfig;
use super::{ConfigError, ConfigIssue};

/// At most this many serde errors are collected from one file.
const MAX_ISSUES: usize = 50;

/// What parsing gave.
pub enum Parsed {
    /// The file parsed as it is.
    Clean(RawConfig),
    /// Only unknown keys were wrong: their issues, and the file without them.
    UnknownKeys(Vec<ConfigIssue>, RawConfig),
    /// Other serde errors: every one found.
    Failed(ConfigError),
}

pub fn parse(mut tree: Value) -> Parsed {
    let mut issues: Vec<ConfigIssue> = Vec::new();
    let mut only_unknown = true;
    loop {
        let err = match serde_path_to_error::deserialize::<_, RawConfig>(tree.clone()) {
            Ok(raw) if issues.is_empty() => return Parsed::Clean(raw),
            Ok(raw) if only_unknown => return Parsed::UnknownKeys(issues, raw),
            Ok(_) => break,
            Err(e) => e,
        };
        let segments: Vec<Segment> = err.path().iter().cloned().collect();
        let issue = issue_of(err);
        // A key taken out earlier and now missing: the consequence, not a new problem.
        if issues.iter().any(|i| i.path == issue.path) {
            break;
        }
        let unknown = issue.message.starts_with("unknown field `");
        issues.push(issue);
        only_unknown &= unknown;
        if issues.len() >= MAX_ISSUES || !remove(&mut tree, &segments) {
            break;
        }
    }
    Parsed::Failed(ConfigError::from_issues(issues).unwrap_or_else(|| ConfigError::at("", "")))
}

/// serde's error as an issue; a missing key is named by its own path, as the reference
/// names it.
fn issue_of(e: serde_path_to_error::Error<serde_yaml_ng::Error>) -> ConfigIssue {
    let path = e.path().to_string();
    let path = if path == "." { String::new() } else { path };
    let message = e.into_inner().to_string();
    let path = match missing_field(&message) {
        Some(field) if path.is_empty() => field.to_owned(),
        Some(field) => format!("{path}.{field}"),
        None => path,
    };
    ConfigIssue { path, message }
}

/// The field of serde's "missing field `x`" message.
fn missing_field(message: &str) -> Option<&str> {
    message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next())
}

/// Takes the mapping entry at `path` out of `tree`; false when `path` does not end in a
/// mapping key that is there (a list item is left alone: the ones after it would move).
fn remove(tree: &mut Value, path: &[Segment]) -> bool {
    let Some((Segment::Map { key }, parents)) = path.split_last() else {
        return false;
    };
    let mut node = tree;
    for segment in parents {
        node = match (segment, node) {
            (Segment::Map { key }, Value::Mapping(m)) => match m.get_mut(key.as_str()) {
                Some(v) => v,
                None => return false,
            },
            (Segment::Seq { index }, Value::Sequence(items)) => match items.get_mut(*index) {
                Some(v) => v,
                None => return false,
            },
            (Segment::Enum { .. }, n) => n,
            _ => return false,
        };
    }
    match node {
        Value::Mapping(m) => m.remove(key.as_str()).is_some(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    fn parsed(yaml: &str) -> Parsed {
        parse(serde_yaml_ng::from_str(yaml).unwrap())
    }

    #[test]
    fn unknown_keys_at_several_levels_are_all_named_and_the_rest_parses() {
        let Parsed::UnknownKeys(issues, raw) =
            parsed("bogus: 1\nlisten: {port: 9000, nope: 2}\nstore: {what: 3}\n")
        else {
            panic!("expected unknown keys only");
        };
        let mut paths: Vec<_> = issues.iter().map(|i| i.path.as_str()).collect();
        paths.sort_unstable();
        assert_eq!(paths, ["bogus", "listen.nope", "store.what"], "{issues:?}");
        assert_eq!(raw.listen.port, Some(9000));
    }

    #[test]
    fn type_errors_in_optional_keys_are_all_named() {
        let Parsed::Failed(e) =
            parsed("listen: {port: [1]}\nlimits: {max_request_bytes: abc}\nextra: 1\n")
        else {
            panic!("expected a failure");
        };
        let paths: Vec<_> = e.issues().into_iter().map(|i| i.path).collect();
        assert_eq!(
            paths,
            ["listen.port", "limits.max_request_bytes", "extra"],
            "{e}"
        );
    }

    #[test]
    fn a_missing_required_key_ends_the_list_without_a_consequential_repeat() {
        let Parsed::Failed(e) = parsed("oidc: {issuer: [x], client_id: g}\n") else {
            panic!("expected a failure");
        };
        let paths: Vec<_> = e.issues().into_iter().map(|i| i.path).collect();
        assert_eq!(paths, ["oidc.issuer"], "{e}");
    }
}

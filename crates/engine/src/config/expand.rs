//! Reference expansion inside the parsed YAML tree, before typed deserialisation.
//!
//! - `${NAME}` (letters, digits, `_`) may appear anywhere inside a string; an undefined
//!   variable is an error. Any other `${...}`, and an unterminated `${`, is kept as text
//!   (as the reference does).
//! - `${file:/absolute/path}` is read (and trimmed) when it is the whole string.
//! - `${keyring:service/account}` must be the whole string; it is read from the injected
//!   credential store (the OS keychain on the desktop; refused on a headless server).
//!
//! Expansion recurses through sequences and mappings. Errors name the field path and the
//! reference, never the value it resolved to. The expander remembers what it resolved, so
//! a later type or validation error that would quote such a value is rewritten by [`hide`]
//! to name only the field path and the expected type.

use std::cell::RefCell;
use std::path::Path;

use serde_yaml_ng::Value;

use super::warnings::ConfigWarning;
use super::{ConfigError, ConfigIssue};
use crate::deps::{CredentialStore, Environment};
use crate::secret::Secret;

pub struct Expander<'a> {
    pub env: &'a dyn Environment,
    pub credentials: &'a dyn CredentialStore,
    /// Every value a reference resolved to (blank ones left out).
    resolved: RefCell<Vec<Secret>>,
    /// What expansion warns about (a reference kept as text).
    warnings: RefCell<Vec<ConfigWarning>>,
}

impl<'a> Expander<'a> {
    pub fn new(env: &'a dyn Environment, credentials: &'a dyn CredentialStore) -> Self {
        Self {
            env,
            credentials,
            resolved: RefCell::new(Vec::new()),
            warnings: RefCell::new(Vec::new()),
        }
    }

    /// Every value a reference resolved to, and the warnings expansion gave.
    pub fn into_parts(self) -> (Vec<Secret>, Vec<ConfigWarning>) {
        (self.resolved.into_inner(), self.warnings.into_inner())
    }

    fn remember(&self, value: &str) -> String {
        if !value.trim().is_empty() {
            self.resolved.borrow_mut().push(Secret::new(value));
        }
        value.to_owned()
    }

    /// Expands every string in `value` in place; every reference that fails is reported.
    pub fn expand(&self, value: &mut Value, path: &str) -> Result<(), ConfigError> {
        let mut issues = Vec::new();
        self.expand_into(value, path, &mut issues);
        ConfigError::from_issues(issues).map_or(Ok(()), Err)
    }

    fn expand_into(&self, value: &mut Value, path: &str, issues: &mut Vec<ConfigIssue>) {
        match value {
            Value::String(s) => {
                if s.contains("${") {
                    match self.expand_str(s, path) {
                        Ok(v) => *s = v,
                        Err(e) => issues.extend(e.issues()),
                    }
                }
            }
            Value::Sequence(items) => {
                for (i, item) in items.iter_mut().enumerate() {
                    self.expand_into(item, &format!("{path}[{i}]"), issues);
                }
            }
            Value::Mapping(map) => {
                for (k, v) in map.iter_mut() {
                    let key = match k {
                        Value::String(s) => s.clone(),
                        other => format!("{other:?}"),
                    };
                    let child = if path.is_empty() {
                        key
                    } else {
                        format!("{path}.{key}")
                    };
                    self.expand_into(v, &child, issues);
                }
            }
            Value::Tagged(tagged) => self.expand_into(&mut tagged.value, path, issues),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    fn expand_str(&self, s: &str, path: &str) -> Result<String, ConfigError> {
        if let Some(inner) = whole_reference(s) {
            if let Some(file) = inner.strip_prefix("file:") {
                return Ok(self.remember(&self.read_file(file.trim(), path)?));
            }
            if let Some(entry) = inner.strip_prefix("keyring:") {
                return Ok(self.remember(&self.read_keyring(entry.trim(), path)?));
            }
        }
        let mut out = String::with_capacity(s.len());
        let mut rest = s;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                // An unterminated `${` is text, as the reference leaves it.
                out.push_str(&rest[start..]);
                return Ok(out);
            };
            let name = &after[..end];
            if is_env_name(name) {
                let value = self.env.var(name).ok_or_else(|| {
                    ConfigError::at(path, format!("environment variable {name} is not set"))
                })?;
                out.push_str(&self.remember(&value));
            } else {
                // Anything else (`${file:...}` inside a longer string, `${a-b}`) stays
                // text, as in the reference; a reference meant whole is worth a warning.
                if name.starts_with("file:") || name.starts_with("keyring:") {
                    self.warnings.borrow_mut().push(ConfigWarning::at(
                        path,
                        format!(
                            "`${{{}:...}}` is only expanded as the whole value; here it is kept as text",
                            name.split(':').next().unwrap_or_default()
                        ),
                    ));
                }
                out.push_str(&rest[start..start + 2 + end + 1]);
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    fn read_file(&self, file: &str, path: &str) -> Result<String, ConfigError> {
        let p = Path::new(file);
        if !p.is_absolute() {
            return Err(ConfigError::at(
                path,
                format!("`${{file:{file}}}` must name an absolute path"),
            ));
        }
        self.env
            .read_file(p)
            .map(|s| s.trim().to_owned())
            .map_err(|e| ConfigError::at(path, format!("cannot read `${{file:{file}}}`: {e}")))
    }

    fn read_keyring(&self, entry: &str, path: &str) -> Result<String, ConfigError> {
        let (service, account) = entry
            .split_once('/')
            .ok_or_else(|| ConfigError::at(path, "`${keyring:...}` must be `service/account`"))?;
        match self.credentials.get(service, account) {
            Ok(Some(secret)) => Ok(secret.expose().to_owned()),
            Ok(None) => Err(ConfigError::at(
                path,
                format!("no keychain entry for `{service}/{account}`"),
            )),
            Err(e) => Err(ConfigError::at(
                path,
                format!("cannot read keychain entry `{service}/{account}`: {e}"),
            )),
        }
    }
}

/// `e` unchanged, unless its message quotes a value a reference resolved to: then only the
/// field path and, for a type error, the expected type are left.
pub fn hide(e: ConfigError, resolved: &[Secret]) -> ConfigError {
    e.map_messages(|issue| hide_issue(issue, resolved))
}

/// [`hide`] for one issue.
fn hide_issue(mut e: ConfigIssue, resolved: &[Secret]) -> ConfigIssue {
    // A value may be quoted as written, escaped as `{:?}` escapes it, or one line of it.
    let forms = |v: &str| -> Vec<String> {
        let mut out = vec![v.to_owned(), escaped(v)];
        out.extend(
            v.lines()
                .map(str::trim)
                .filter(|l| l.len() >= 4)
                .flat_map(|l| [l.to_owned(), escaped(l)]),
        );
        out
    };
    let quotes = |text: &str| {
        resolved
            .iter()
            .flat_map(|v| forms(v.expose()))
            .any(|f| !f.is_empty() && text.contains(f.as_str()))
    };
    // A key read through a reference is part of the path: the path names the reference's
    // place, never its value.
    if quotes(&e.path) {
        let mut all: Vec<String> = resolved.iter().flat_map(|v| forms(v.expose())).collect();
        all.sort_by_key(|f| std::cmp::Reverse(f.len()));
        for f in all.iter().filter(|f| !f.is_empty()) {
            e.path = e.path.replace(f.as_str(), "<reference>");
        }
    }
    if !quotes(&e.message) {
        return e;
    }
    let expected = e
        .message
        .rsplit_once(", expected ")
        .map(|(_, t)| t)
        .filter(|t| !quotes(t));
    e.message = match expected {
        Some(t) => format!("invalid value (read through a reference, not shown): expected {t}"),
        None => "invalid value (read through a reference, not shown)".to_owned(),
    };
    e
}

/// `v` as `{:?}` writes it inside its quotes.
fn escaped(v: &str) -> String {
    let quoted = format!("{v:?}");
    quoted[1..quoted.len() - 1].to_owned()
}

fn whole_reference(s: &str) -> Option<&str> {
    let inner = s.strip_prefix("${")?.strip_suffix('}')?;
    (!inner.contains("${") && !inner.contains('}')).then_some(inner)
}

/// A `${NAME}` the reference expands: letters, digits and `_` (a leading digit too).
fn is_env_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::deps::{MapEnvironment, NoCredentialStore};

    fn expand(yaml: &str, env: MapEnvironment) -> Result<Value, ConfigError> {
        let mut v: Value = serde_yaml_ng::from_str(yaml).unwrap();
        Expander::new(&env, &NoCredentialStore).expand(&mut v, "")?;
        Ok(v)
    }

    #[test]
    fn hide_keeps_the_path_and_the_expected_type_only() {
        let resolved = [Secret::new("sk-from-file")];
        let e = hide(
            ConfigError::at(
                "listen.port",
                "invalid type: string \"sk-from-file\", expected u16",
            ),
            &resolved,
        );
        assert_eq!(
            e.to_string(),
            "listen.port: invalid value (read through a reference, not shown): expected u16"
        );
        let e = hide(
            ConfigError::at("listen.host", "`sk-from-file` is not an IP address"),
            &resolved,
        );
        assert_eq!(
            e.to_string(),
            "listen.host: invalid value (read through a reference, not shown)"
        );
        let plain = ConfigError::at("listen.port", "invalid type: string \"x\", expected u16");
        assert_eq!(hide(plain.clone(), &resolved), plain);
    }

    #[test]
    fn env_inside_strings_and_nested() {
        let env = MapEnvironment::default()
            .with_var("HOST", "gw")
            .with_var("K", "v");
        let v = expand("a: https://${HOST}.example/${K}\nb: [{c: '${K}'}]", env).unwrap();
        assert_eq!(v["a"].as_str(), Some("https://gw.example/v"));
        assert_eq!(v["b"][0]["c"].as_str(), Some("v"));
    }

    #[test]
    fn what_the_reference_does_not_expand_stays_text() {
        let env = MapEnvironment::default().with_var("1ABC", "one");
        let v = expand("a: 'x${a-b}y'\nb: 'p${'\nc: '${1ABC}'", env).unwrap();
        assert_eq!(v["a"].as_str(), Some("x${a-b}y"));
        assert_eq!(v["b"].as_str(), Some("p${"));
        assert_eq!(v["c"].as_str(), Some("one"));
    }

    #[test]
    fn undefined_env_names_the_path() {
        let err = expand(
            "up: [{auth: {api_key: '${NOPE}'}}]",
            MapEnvironment::default(),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "up[0].auth.api_key: environment variable NOPE is not set"
        );
    }

    #[test]
    fn file_must_be_whole_and_absolute_and_is_trimmed() {
        let env = MapEnvironment::default().with_file("/run/k", "  secret\n");
        let v = expand("k: ${file:/run/k}", env.clone()).unwrap();
        assert_eq!(v["k"].as_str(), Some("secret"));
        // Inside a longer string it is text, as in the reference.
        let v = expand("k: x${file:/run/k}", env.clone()).unwrap();
        assert_eq!(v["k"].as_str(), Some("x${file:/run/k}"));
        let e = expand("k: ${file:run/k}", env.clone()).unwrap_err();
        assert!(e.to_string().contains("absolute"), "{e}");
        let e = expand("k: ${file:/missing}", env).unwrap_err();
        assert!(e.to_string().starts_with("k: cannot read"), "{e}");
    }

    #[test]
    fn keyring_without_store_is_a_clear_error() {
        let e = expand(
            "k: ${keyring:gatehouse/anthropic}",
            MapEnvironment::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("keychain entry `gatehouse/anthropic`"), "{e}");
    }

    #[test]
    fn error_never_contains_resolved_value() {
        let env = MapEnvironment::default().with_var("SECRET", "sk-very-secret");
        let e = expand("k: '${SECRET}${UNSET}'", env)
            .unwrap_err()
            .to_string();
        assert!(!e.contains("sk-very"), "{e}");
    }
}

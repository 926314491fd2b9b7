//! The small JSONPath subset (RFC 9535) of `oidc.groups_jsonpath`: `$` followed by
//! `.name`, `['name']`, `[*]` and `[?@.field=='value']` segments, starting with a name.
//! Groups are the string nodes selected (an array node contributes its strings).

use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Name(String),
    Wildcard,
    /// `[?@.field=='value']`: children whose `field` is the string `value`.
    Filter(String, String),
}

/// A parsed `groups_jsonpath`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath(Vec<Segment>);

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

/// Reads a quoted string (`'...'` or `"..."`, backslash escapes) at the start of `s`;
/// returns it and the rest.
fn quoted(s: &str) -> Option<(String, &str)> {
    let q = s.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let mut out = String::new();
    let mut chars = s[1..].char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => out.push(chars.next()?.1),
            c if c == q => return Some((out, &s[1 + i + 1..])),
            c => out.push(c),
        }
    }
    None
}

impl JsonPath {
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "{text:?} is not a JSONPath that the gateway reads: after $ it takes only .name (letters, digits and _, not starting with a digit), ['any other name'], [*] and [?@.field=='value'], and it must start with .name or ['name']"
            )
        };
        let mut rest = text.strip_prefix('$').ok_or_else(bad)?;
        let mut segs = Vec::new();
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix('.') {
                let end = r.find(['.', '[']).unwrap_or(r.len());
                if !is_ident(&r[..end]) {
                    return Err(bad());
                }
                segs.push(Segment::Name(r[..end].to_owned()));
                rest = &r[end..];
            } else if let Some(r) = rest.strip_prefix("[*]") {
                segs.push(Segment::Wildcard);
                rest = r;
            } else if let Some(r) = rest.strip_prefix("[?@.") {
                let end = r.find("==").ok_or_else(bad)?;
                let field = &r[..end];
                if !is_ident(field) {
                    return Err(bad());
                }
                let (value, r) = quoted(&r[end + 2..]).ok_or_else(bad)?;
                rest = r.strip_prefix(']').ok_or_else(bad)?;
                segs.push(Segment::Filter(field.to_owned(), value));
            } else if let Some(r) = rest.strip_prefix('[') {
                let (name, r) = quoted(r).ok_or_else(bad)?;
                rest = r.strip_prefix(']').ok_or_else(bad)?;
                segs.push(Segment::Name(name));
            } else {
                return Err(bad());
            }
        }
        match segs.first() {
            Some(Segment::Name(_)) => Ok(Self(segs)),
            _ => Err(bad()),
        }
    }

    /// The groups selected in `claims`; `None` when nothing is selected.
    pub fn groups(&self, claims: &Map<String, Value>) -> Option<Vec<String>> {
        let root = Value::Object(claims.clone());
        let mut nodes: Vec<&Value> = vec![&root];
        for seg in &self.0 {
            nodes = nodes.into_iter().flat_map(|n| step(n, seg)).collect();
        }
        if nodes.is_empty() {
            return None;
        }
        let mut out = Vec::new();
        for n in nodes {
            match n {
                Value::String(s) => out.push(s.clone()),
                Value::Array(items) => {
                    out.extend(items.iter().filter_map(|v| v.as_str().map(str::to_owned)));
                }
                _ => {}
            }
        }
        Some(out)
    }
}

fn children(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(a) => a.iter().collect(),
        Value::Object(o) => o.values().collect(),
        _ => Vec::new(),
    }
}

fn step<'a>(v: &'a Value, seg: &Segment) -> Vec<&'a Value> {
    match seg {
        Segment::Name(n) => v.get(n.as_str()).into_iter().collect(),
        Segment::Wildcard => children(v),
        Segment::Filter(field, value) => children(v)
            .into_iter()
            .filter(|c| c.get(field.as_str()).and_then(Value::as_str) == Some(value.as_str()))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::JsonPath;
    use serde_json::json;

    #[test]
    fn parses_the_subset_and_refuses_the_rest() {
        for ok in [
            "$.groups",
            "$['my claim'][*]",
            "$.roles[?@.kind=='group'].name",
            "$.a.b_2[*].c",
        ] {
            assert!(JsonPath::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            ".groups",
            "$[*]",
            "$",
            "$.1a",
            "$.a[0]",
            "$..a",
            "$.a[?@.k=='v'",
            "$.a[?@.k>'v']",
        ] {
            assert!(JsonPath::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn selects_groups_from_nested_claims() {
        let claims = json!({
            "memberships": [
                {"kind": "group", "name": "eng"},
                {"kind": "role", "name": "admin"},
                {"kind": "group", "name": "ops"}
            ],
            "realm_access": {"roles": ["a", "b"]}
        });
        let claims = claims.as_object().unwrap();
        let p = JsonPath::parse("$.memberships[?@.kind=='group'].name").unwrap();
        assert_eq!(p.groups(claims).unwrap(), ["eng", "ops"]);
        let p = JsonPath::parse("$['realm_access'].roles").unwrap();
        assert_eq!(p.groups(claims).unwrap(), ["a", "b"]);
        let p = JsonPath::parse("$.memberships[*].name").unwrap();
        assert_eq!(p.groups(claims).unwrap().len(), 3);
        assert!(
            JsonPath::parse("$.nothing")
                .unwrap()
                .groups(claims)
                .is_none()
        );
    }
}

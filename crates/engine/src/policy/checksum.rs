//! The managed-settings checksum, computed exactly as Claude Code computes it on its side:
//! `sha256:` + hex SHA-256 of the settings JSON with keys sorted at every level and no
//! whitespace (JavaScript `JSON.stringify` number and string forms), so a client's cached
//! `If-None-Match` compares equal across conforming gateways.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Canonical JSON: sorted keys, no whitespace, integral floats without a fraction.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write(v, &mut out);
    out
}

fn write(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|_| n.is_f64()) {
                if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 {
                    out.push_str(&format!("{}", f as i64));
                } else {
                    out.push_str(&n.to_string());
                }
            } else {
                out.push_str(&n.to_string());
            }
        }
        Value::String(s) => out.push_str(&Value::String(s.clone()).to_string()),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            // JavaScript sorts keys by UTF-16 code units.
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push(':');
                if let Some(x) = m.get(*k) {
                    write(x, out);
                }
            }
            out.push('}');
        }
    }
}

pub fn checksum(settings: &Value) -> String {
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(canonical_json(settings).as_bytes()))
    )
}

/// Whether an `If-None-Match` value names this checksum (quoted or not, weak or not).
pub fn if_none_match_hits(header: &str, checksum: &str) -> bool {
    header.split(',').map(str::trim).any(|t| {
        let t = t.strip_prefix("W/").unwrap_or(t);
        t.trim_matches('"') == checksum
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_form_matches_javascript() {
        let v = json!({"b": [1, 2.0, 0.5, {"z": null, "a": true}], "a": "x\"y\n\u{1b}é", "B": {}});
        assert_eq!(
            canonical_json(&v),
            r#"{"B":{},"a":"x\"y\n\u001bé","b":[1,2,0.5,{"a":true,"z":null}]}"#
        );
    }

    #[test]
    fn checksum_is_order_independent_and_known() {
        let a: Value =
            serde_json::from_str(r#"{"permissions":{"deny":["WebFetch"]},"env":{"A":"1"}}"#)
                .unwrap();
        let b: Value =
            serde_json::from_str(r#"{"env":{"A":"1"},"permissions":{"deny":["WebFetch"]}}"#)
                .unwrap();
        assert_eq!(checksum(&a), checksum(&b));
        // sha256 of {"env":{"A":"1"},"permissions":{"deny":["WebFetch"]}}
        let expected = format!(
            "sha256:{}",
            hex::encode(Sha256::digest(
                br#"{"env":{"A":"1"},"permissions":{"deny":["WebFetch"]}}"#
            ))
        );
        assert_eq!(checksum(&a), expected);
        assert_eq!(
            checksum(&json!({})),
            format!("sha256:{}", hex::encode(Sha256::digest(b"{}")))
        );
    }

    #[test]
    fn if_none_match_forms() {
        assert!(if_none_match_hits("\"sha256:ab\"", "sha256:ab"));
        assert!(if_none_match_hits("W/\"sha256:ab\", \"x\"", "sha256:ab"));
        assert!(if_none_match_hits("sha256:ab", "sha256:ab"));
        assert!(!if_none_match_hits("*", "sha256:ab"));
        assert!(!if_none_match_hits("\"sha256:ac\"", "sha256:ab"));
    }
}

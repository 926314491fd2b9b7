//! Top-level edits of a Messages body for providers whose wire differs (the model in the
//! URL, `anthropic_version` and `anthropic_beta` in the body, fields they refuse left out).
//! Values are kept as raw JSON slices, so everything not edited is copied byte for byte.

use std::borrow::Cow;

use bytes::Bytes;
use indexmap::IndexMap;
use serde_json::value::RawValue;

type TopLevel<'a> = IndexMap<Cow<'a, str>, &'a RawValue>;

/// The body without the `remove` keys, with each `(key, JSON value)` of `set` in place of
/// a key of that name (where it stood) or appended.
pub fn edit(bytes: &[u8], remove: &[&str], set: &[(&str, String)]) -> Result<Bytes, String> {
    let top: TopLevel<'_> = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(bytes.len() + 64);
    out.push(b'{');
    let mut first = true;
    let mut put = |out: &mut Vec<u8>, k: &str, v: &str| -> Result<(), String> {
        if !first {
            out.push(b',');
        }
        first = false;
        serde_json::to_writer(&mut *out, k).map_err(|e| e.to_string())?;
        out.push(b':');
        out.extend_from_slice(v.as_bytes());
        Ok(())
    };
    for (k, v) in &top {
        if remove.contains(&k.as_ref()) {
            continue;
        }
        match set.iter().find(|(s, _)| s == k) {
            Some((_, new)) => put(&mut out, k, new)?,
            None => put(&mut out, k, v.get())?,
        }
    }
    for (k, v) in set.iter().filter(|(k, _)| !top.contains_key(*k)) {
        put(&mut out, k, v)?;
    }
    out.push(b'}');
    Ok(Bytes::from(out))
}

/// The top-level keys present in `bytes` among `keys`.
pub fn present<'k>(bytes: &[u8], keys: &[&'k str]) -> Vec<&'k str> {
    let Ok(top) = serde_json::from_slice::<TopLevel<'_>>(bytes) else {
        return Vec::new();
    };
    keys.iter()
        .copied()
        .filter(|k| top.contains_key(*k))
        .collect()
}

/// A top-level value as its raw JSON text, when the key is there.
pub fn raw(bytes: &[u8], key: &str) -> Option<String> {
    serde_json::from_slice::<TopLevel<'_>>(bytes)
        .ok()
        .and_then(|top| top.get(key).map(|v| v.get().to_owned()))
}

/// A top-level array of strings (`anthropic_beta` a caller already put in the body).
pub fn strings(bytes: &[u8], key: &str) -> Vec<String> {
    raw(bytes, key)
        .and_then(|raw| serde_json::from_str::<Vec<String>>(&raw).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn edits_keep_the_rest_verbatim() {
        let body = br#"{"model":"m","tags":["x"],"messages":[{"role":"user","content":"hi \u00e9"}],"stream":true}"#;
        let out = edit(
            body,
            &["model", "tags"],
            &[("anthropic_version", "\"bedrock-2023-05-31\"".into())],
        )
        .unwrap();
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"messages":[{"role":"user","content":"hi \u00e9"}],"stream":true,"anthropic_version":"bedrock-2023-05-31"}"#
        );
        assert_eq!(present(body, &["tags", "metadata"]), ["tags"]);
        assert!(edit(b"[1]", &[], &[]).is_err());
    }

    #[test]
    fn strings_reads_an_array() {
        assert_eq!(
            strings(br#"{"anthropic_beta":["a","b"]}"#, "anthropic_beta"),
            ["a", "b"]
        );
        assert!(strings(br#"{"anthropic_beta":5}"#, "anthropic_beta").is_empty());
    }
}

//! The drop-in corpus covers the reference's whole config (issue 15): every key path in
//! `tests/config-corpus/KEYS.txt` (the reference gateway's schema, Claude Code 2.1.333, plus
//! the pricing keys 2.1.334 added) appears in at least one corpus file, so `config_corpus`
//! puts each key before both loaders. Paths are walked as the key list writes them: list items as `[]`, upstream
//! keys qualified by provider (`upstreams[].provider=bedrock.region`) unless every
//! provider has them; the inside of a free-form value (`headers`, `cli`, ...) is not walked.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};

use serde_yaml_ng::Value;

use super::config_corpus::{corpus, corpus_dir};

fn keys() -> BTreeSet<String> {
    std::fs::read_to_string(corpus_dir().join("KEYS.txt"))
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// Every key path in `v` under `prefix` that the key list knows.
fn walk(v: &Value, prefix: &str, keys: &BTreeSet<String>, out: &mut BTreeSet<String>) {
    match v {
        Value::Sequence(items) => {
            for item in items {
                walk(item, &format!("{prefix}[]"), keys, out);
            }
        }
        Value::Mapping(map) => {
            // An upstream's own keys are qualified by its provider.
            let provider = (prefix == "upstreams[]")
                .then(|| map.get("provider").and_then(Value::as_str))
                .flatten()
                .map(|p| format!("upstreams[].provider={p}"));
            if let Some(p) = &provider {
                out.insert(p.clone());
            }
            for (k, child) in map {
                let Some(k) = k.as_str() else { continue };
                let plain = if prefix.is_empty() {
                    k.to_owned()
                } else {
                    format!("{prefix}.{k}")
                };
                let path = match &provider {
                    Some(p) if !keys.contains(&plain) => format!("{p}.{k}"),
                    _ => plain,
                };
                if keys.contains(&path) {
                    out.insert(path.clone());
                    walk(child, &path, keys, out);
                }
            }
        }
        _ => {}
    }
}

#[test]
fn every_reference_key_path_is_in_the_corpus() {
    let keys = keys();
    assert_eq!(
        keys.len(),
        220,
        "the reference's 220 key paths (2.1.333's 211 and the nine pricing keys of 2.1.334)"
    );
    let files = corpus();
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        // A corpus file the YAML parser refuses on purpose covers nothing.
        let Ok(v) = serde_yaml_ng::from_str::<Value>(&text) else {
            continue;
        };
        let mut found = BTreeSet::new();
        walk(&v, "", &keys, &mut found);
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        for k in found {
            seen.entry(k).or_default().push(name.clone());
        }
    }
    let missing: Vec<&String> = keys.iter().filter(|k| !seen.contains_key(*k)).collect();
    assert!(
        missing.is_empty(),
        "{} of {} key paths are in no corpus file:\n{}",
        missing.len(),
        keys.len(),
        missing
            .iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

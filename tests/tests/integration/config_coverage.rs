//! The drop-in corpus covers the reference's whole config (issues 15 and 34): every key
//! path in `tests/config-corpus/KEYS.txt` (the reference gateway's schema: Claude Code 2.1.333's
//! keys and the pricing keys 2.1.334 added) has a valid case — it appears in an `ok_` corpus file,
//! which `config_corpus` gives both loaders — and an invalid one: this test takes the
//! first `ok_` file holding the key, replaces the key's value with one of the wrong type,
//! and runs the result through the reference's `--check config` and Gatehouse, which
//! must both refuse it at the same path ([`super::config_corpus::differ`]).
//!
//! Paths are walked as the key list writes them: list items as `[]`, upstream keys
//! qualified by provider (`upstreams[].provider=bedrock.region`) unless every provider
//! has them; the inside of a free-form value (`headers`, `cli`, ...) is not walked.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use serde_yaml_ng::Value;

use super::config_corpus::{Verdict, corpus, corpus_dir, differ, gatehouse, header, reference};

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

/// In `v` (under key path `prefix`), the first value at key path `target` replaced by one
/// of the wrong type; `at` receives its concrete path (`upstreams[0].region`). `false`
/// when `target` is not in `v`.
fn mutate(
    v: &mut Value,
    prefix: &str,
    here: &str,
    target: &str,
    keys: &BTreeSet<String>,
    at: &mut String,
) -> bool {
    match v {
        Value::Sequence(items) => items.iter_mut().enumerate().any(|(i, item)| {
            mutate(
                item,
                &format!("{prefix}[]"),
                &format!("{here}[{i}]"),
                target,
                keys,
                at,
            )
        }),
        Value::Mapping(map) => {
            let provider = (prefix == "upstreams[]")
                .then(|| map.get("provider").and_then(Value::as_str))
                .flatten()
                .map(|p| format!("upstreams[].provider={p}"));
            if provider.as_deref() == Some(target) {
                *at = format!("{here}.provider");
                map.insert("provider".into(), wrong_type(&Value::from("x")));
                return true;
            }
            for (k, child) in map.iter_mut() {
                let Some(k) = k.as_str().map(str::to_owned) else {
                    continue;
                };
                let plain = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                let path = match &provider {
                    Some(p) if !keys.contains(&plain) => format!("{p}.{k}"),
                    _ => plain,
                };
                let concrete = if here.is_empty() {
                    k.clone()
                } else {
                    format!("{here}.{k}")
                };
                if path == target {
                    *at = concrete;
                    *child = wrong_type(child);
                    return true;
                }
                if keys.contains(&path) && mutate(child, &path, &concrete, target, keys, at) {
                    return true;
                }
            }
            false
        }
        _ => false,
    }
}

/// A value no reference key of `v`'s kind takes: a mapping for a scalar or a list, a
/// number for a mapping.
fn wrong_type(v: &Value) -> Value {
    match v {
        Value::Mapping(_) => Value::from(12345),
        _ => {
            let mut m = serde_yaml_ng::Mapping::new();
            m.insert("not_this".into(), 1.into());
            Value::Mapping(m)
        }
    }
}

/// Every `ok_` corpus file with its text and parsed YAML.
fn ok_files() -> Vec<(PathBuf, String, Value)> {
    corpus()
        .into_iter()
        .filter(|f| f.file_name().unwrap().to_string_lossy().starts_with("ok_"))
        .filter_map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            let v = serde_yaml_ng::from_str::<Value>(&text).ok()?;
            Some((f, text, v))
        })
        .collect()
}

#[test]
fn every_reference_key_path_has_a_valid_case() {
    let keys = keys();
    let mut seen = BTreeSet::new();
    for (_, _, v) in ok_files() {
        walk(&v, "", &keys, &mut seen);
    }
    let missing: Vec<&str> = keys
        .iter()
        .filter(|k| !seen.contains(*k))
        .map(String::as_str)
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} key paths are in no ok_ corpus file:\n{}",
        missing.len(),
        keys.len(),
        missing.join("\n")
    );
}

/// One invalid case per key path, generated from the first `ok_` file holding it: both
/// the reference and Gatehouse refuse it, at the same path.
#[tokio::test]
async fn every_reference_key_path_has_an_invalid_case_refused_alike() {
    let keys = keys();
    let files = ok_files();
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let gate = Arc::new(tokio::sync::Semaphore::new(4));
    let mut runs = Vec::new();
    for (n, key) in keys.iter().enumerate() {
        let found = files.iter().find_map(|(f, text, v)| {
            let mut v = v.clone();
            let mut at = String::new();
            mutate(&mut v, "", "", key, &keys, &mut at).then_some((f, text, v, at))
        });
        let Some((f, text, v, at)) = found else {
            panic!("{key}: in no ok_ file (every_reference_key_path_has_a_valid_case)");
        };
        let env = header(text).env;
        let yaml = serde_yaml_ng::to_string(&v).unwrap();
        let file = dir.path().join(format!("mutant_{n}.yaml"));
        std::fs::write(&file, &yaml).unwrap();
        let name = format!(
            "{key} (at {at}, from {})",
            f.file_name().unwrap().to_string_lossy()
        );
        let (gate, home) = (gate.clone(), home.path().to_owned());
        runs.push(tokio::spawn(async move {
            let _permit = gate.acquire_owned().await.unwrap();
            let theirs = reference(&file, &env, &home).await;
            (name, yaml, env, theirs)
        }));
    }
    let (mut problems, total) = (Vec::new(), runs.len());
    for run in runs {
        let (name, yaml, env, theirs) = run.await.unwrap();
        let ours = gatehouse(&yaml, &env, data.path());
        if matches!(theirs, Verdict::Accepted) {
            problems.push(format!(
                "{name}: the reference accepts the wrong type; pick another"
            ));
            continue;
        }
        problems.extend(differ(&name, Some(false), &[], &theirs, &ours));
    }
    eprintln!(
        "config coverage: {} of {total} generated invalid cases agree",
        total - problems.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
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

//! Gatehouse knows every Claude Code settings key the pinned reference knows: the keys of
//! the settings schema in the reference binary (read statically out of its JavaScript, in
//! a few seconds) are each a key of `settings_schema.json`. When this fails, regenerate
//! that file with `scripts/settings_schema.mjs` (its header says how).
//!
//! Read statically: the schema builder (the function taking `{strictPolicyHelperKeys}`
//! that returns `{$schema:()=>…, key:()=>…}`) and its feature modules
//! (`buildGate:()=>!0,shape:()=>({…})`). Keys behind an environment gate
//! (`...process.env.X&&{key:()=>…}`) are left out, as the reference leaves them out when the
//! gate is off.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gatehouse_engine::config::settings_schema;

/// The keys at the top level of the object literal opening at `src[open]` (`{`); with
/// `lazy_only`, only those written `key:()=>`.
fn top_keys(src: &[u8], open: usize, lazy_only: bool) -> Vec<String> {
    let mut keys = Vec::new();
    let (mut depth, mut i) = (0usize, open);
    let mut template_at: Vec<usize> = Vec::new();
    let (mut in_template, mut expect_key) = (false, false);
    while i < src.len() {
        let c = src[i];
        if in_template {
            match c {
                b'\\' => i += 1,
                b'`' => in_template = false,
                b'$' if src.get(i + 1) == Some(&b'{') => {
                    template_at.push(depth);
                    depth += 1;
                    in_template = false;
                    i += 1;
                }
                _ => {}
            }
            i += 1;
            continue;
        }
        match c {
            b'"' | b'\'' => i = skip_string(src, i),
            b'`' => in_template = true,
            b'{' | b'(' | b'[' => {
                depth += 1;
                expect_key = depth == 1;
            }
            b'}' | b')' | b']' => {
                if c == b'}' && template_at.last() == Some(&(depth - 1)) {
                    template_at.pop();
                    in_template = true;
                }
                depth -= 1;
                if depth == 0 {
                    return keys;
                }
            }
            b',' if depth == 1 => expect_key = true,
            _ if expect_key && depth == 1 && is_ident(c) => {
                let end = (i..src.len()).find(|&j| !is_ident(src[j])).unwrap();
                let lazy = src[end..].starts_with(b":()=>");
                if src.get(end) == Some(&b':') && (lazy || !lazy_only) {
                    keys.push(String::from_utf8_lossy(&src[i..end]).into_owned());
                }
                expect_key = false;
                i = end;
                continue;
            }
            b' ' | b'\n' => {}
            _ => expect_key = false,
        }
        i += 1;
    }
    panic!("the object at {open} does not close");
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$'
}

/// The index after the string literal starting at `src[start]`.
fn skip_string(src: &[u8], start: usize) -> usize {
    let quote = src[start];
    let mut i = start + 1;
    while i < src.len() && src[i] != quote {
        i += if src[i] == b'\\' { 2 } else { 1 };
    }
    i
}

fn reference_keys() -> Vec<String> {
    let bytes = std::fs::read(gatehouse_tests::reference_claude())
        .expect("the reference (claude) is installed by scripts/test.sh");
    let text = String::from_utf8_lossy(&bytes);
    let builder = text
        .find(",{strictPolicyHelperKeys:")
        .expect("the reference's settings schema builder");
    let open = builder
        + text[builder..]
            .find("return{$schema:()=>")
            .expect("the builder returns {$schema:()=>…}")
        + "return".len();
    let src = text.as_bytes();
    let mut keys = top_keys(src, open, true);
    let mut from = 0;
    while let Some(at) = text[from..].find("buildGate:()=>!0,shape:()=>({") {
        let brace = from + at + "buildGate:()=>!0,shape:()=>(".len();
        keys.extend(top_keys(src, brace, false));
        from = brace;
    }
    keys
}

#[test]
fn gatehouse_knows_every_settings_key_of_the_pinned_reference() {
    let keys = reference_keys();
    assert!(keys.len() > 150, "the scan found too few keys: {keys:?}");
    assert!(keys.iter().any(|k| k == "permissions") && keys.iter().any(|k| k == "hooks"));
    let missing: Vec<&String> = keys
        .iter()
        .filter(|k| !settings_schema::is_setting(k))
        .collect();
    assert!(
        missing.is_empty(),
        "the pinned reference (Claude Code) knows settings keys settings_schema.json ({}) does not: {missing:?}; run scripts/settings_schema.mjs",
        settings_schema::claude_code_version()
    );
}

#[test]
fn the_scanner_reads_only_the_top_level_of_an_object() {
    let src = br#"x={a:()=>n(),b:()=>u({c:1,d:"}{"}),...q&&{e:()=>1},f:()=>`${ {g:1} }`,h:2}"#;
    assert_eq!(top_keys(src, 2, true), vec!["a", "b", "f"]);
    assert_eq!(top_keys(src, 2, false), vec!["a", "b", "f", "h"]);
}

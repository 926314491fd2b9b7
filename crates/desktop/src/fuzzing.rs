//! Bodies of the desktop crate's fuzz targets (`fuzz/fuzz_targets/`, cargo-fuzz) and of the
//! corpus regression tests (`crates/desktop/tests/fuzz_corpus.rs`): one function per
//! target, so the fuzzer and the normal test run drive the same entry points with the same
//! checks.
//!
//! Each function takes raw input bytes. The code under test must not panic on any input;
//! the functions here panic (assert) only when an invariant of that code breaks. Not part
//! of the crate's API.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use serde_json::{Map, Value};

use crate::bootstrap::{self, MAX_LOGIN_NOTICE_CHARS};
use crate::claude_settings::{
    ClaudeSettings, ConfigureOutcome, KEYS, Status, Target, UndoOutcome, parse_settings,
};

/// The bootstrap file's text, read as JSON and as YAML: either an error naming the file, or
/// a bootstrap whose URL and notice hold their rules (and, for JSON, the values written).
pub fn bootstrap(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for name in [
        "/etc/gatehouse/bootstrap.json",
        "/etc/gatehouse/bootstrap.yaml",
    ] {
        match bootstrap::parse(Path::new(name), text) {
            Err(e) => assert!(e.to_string().contains(name), "{e}"),
            Ok(b) => {
                check_bootstrap(&b);
                if name.ends_with(".json") {
                    check_bootstrap_values(&b, text);
                }
            }
        }
    }
}

fn check_bootstrap(b: &bootstrap::Bootstrap) {
    let u = &b.central_url;
    assert!(matches!(u.scheme(), "http" | "https"), "{u}");
    assert!(u.host_str().is_some_and(|h| !h.is_empty()), "{u}");
    assert!(u.username().is_empty() && u.password().is_none(), "{u}");
    assert!(u.query().is_none() && u.fragment().is_none(), "{u}");
    if let Some(n) = &b.login_notice {
        assert!(!n.is_empty() && n.trim() == n, "{n:?}");
        assert!(n.chars().count() <= MAX_LOGIN_NOTICE_CHARS);
        assert!(!n.chars().any(|c| c.is_control() && c != '\n'), "{n:?}");
    }
}

fn check_bootstrap_values(b: &bootstrap::Bootstrap, text: &str) {
    let doc: Value = serde_json::from_str(text).expect("accepted JSON parses");
    let flag = |k: &str, default: bool| doc.get(k).and_then(Value::as_bool).unwrap_or(default);
    assert_eq!(b.force_connected_mode, flag("force_connected_mode", false));
    assert_eq!(b.allow_local_providers, flag("allow_local_providers", true));
    assert_eq!(
        b.auto_configure_claude_code,
        flag("auto_configure_claude_code", false)
    );
}

/// The loopback URL and helper the `claude_settings` target configures.
const BASE_URL: &str = "http://127.0.0.1:8788";
const BINARY: &str = "/opt/Gate House/gatehouse";

/// Claude Code's settings merge on the bytes of a settings file, in `dir` (emptied first).
/// Bytes after a first 0xFF (never in UTF-8 text) are the user's edit between configure and
/// undo. A malformed file is refused and left as it was; otherwise configure keeps every key
/// Gatehouse does not own (value and order), is idempotent, and undo gives back the exact
/// bytes (no edit) or keeps every user key of the edit.
pub fn claude_settings(dir: &Path, data: &[u8]) {
    let (original, edit) = match data.iter().position(|&b| b == 0xFF) {
        Some(i) => (&data[..i], Some(&data[i + 1..])),
        None => (data, None),
    };
    let settings = ClaudeSettings::new(dir.join("settings.json"));
    for p in [
        settings.path().to_owned(),
        settings.backup_path(),
        settings.record_path(),
    ] {
        let _ = std::fs::remove_file(p);
    }
    std::fs::write(settings.path(), original).expect("write the settings file");
    let target = Target::new(BASE_URL, Path::new(BINARY)).expect("fixed target");
    let Some(before) = configure_checked(&settings, &target, original) else {
        return;
    };
    let written = std::fs::read(settings.path()).expect("the configured file");
    let after = parse_settings(&written).expect("Gatehouse wrote a settings file it can read");
    check_owned(&after, &target);
    check_kept(&before, &after, &[]);
    assert_eq!(
        settings.status(&target).expect("status"),
        Status::Configured
    );
    let again = settings.configure(&target).expect("configure again");
    assert_eq!(again, ConfigureOutcome::Unchanged);
    match edit {
        None => {
            assert_eq!(settings.undo().expect("undo"), UndoOutcome::Restored);
            let restored = std::fs::read(settings.path()).expect("the restored file");
            assert_eq!(restored, original, "undo did not give back the exact bytes");
        }
        Some(edit) => undo_after_edit(&settings, &written, edit),
    }
}

/// Configures; `Some(parsed original)` when the file was accepted.
fn configure_checked(
    s: &ClaudeSettings,
    t: &Target,
    original: &[u8],
) -> Option<Map<String, Value>> {
    let parsed = parse_settings(original);
    match s.configure(t) {
        Ok(_) => Some(parsed.expect("configure accepted a file parse_settings refuses")),
        Err(e) => {
            assert!(parsed.is_err(), "configure refused a readable file: {e}");
            assert_eq!(
                std::fs::read(s.path()).expect("still there"),
                original,
                "refused file changed"
            );
            assert!(!s.backup_path().exists() && !s.record_path().exists());
            None
        }
    }
}

fn check_owned(doc: &Map<String, Value>, t: &Target) {
    let env = doc
        .get("env")
        .and_then(Value::as_object)
        .expect("env object");
    assert_eq!(
        env.get("ANTHROPIC_BASE_URL"),
        Some(&Value::String(t.base_url.clone()))
    );
    assert_eq!(
        doc.get("apiKeyHelper"),
        Some(&Value::String(t.api_key_helper.clone()))
    );
    assert!(!env.contains_key("ANTHROPIC_AUTH_TOKEN") && !env.contains_key("ANTHROPIC_API_KEY"));
}

/// Every key of `before` that Gatehouse does not own is in `after` with the same value,
/// top-level keys in the same order; owned keys listed in `kept` kept their value too.
fn check_kept(before: &Map<String, Value>, after: &Map<String, Value>, kept: &[&str]) {
    let owned = |name: &str| KEYS.iter().any(|k| k.name() == name) && !kept.contains(&name);
    for (k, v) in before {
        if k == "env" {
            let user: Vec<_> = v
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(ek, _)| !owned(&format!("env.{ek}")))
                .collect();
            let a = after.get("env").and_then(Value::as_object);
            for (ek, ev) in user {
                assert_eq!(a.and_then(|a| a.get(ek)), Some(ev), "env.{ek} changed");
            }
        } else if k != "apiKeyHelper" || !owned(k) {
            assert_eq!(after.get(k), Some(v), "{k} changed");
        }
    }
    let order: Vec<&String> = after.keys().filter(|k| before.contains_key(*k)).collect();
    let kept_order: Vec<&String> = before.keys().filter(|k| after.contains_key(*k)).collect();
    assert_eq!(order, kept_order, "the key order changed");
}

fn undo_after_edit(settings: &ClaudeSettings, written: &[u8], edit: &[u8]) {
    std::fs::write(settings.path(), edit).expect("write the edit");
    let edited = parse_settings(edit);
    let outcome = settings.undo();
    let now = std::fs::read(settings.path()).ok();
    match (outcome, edited) {
        (Err(_), Err(_)) => assert_eq!(now.as_deref(), Some(edit), "a malformed edit was touched"),
        (Err(e), Ok(_)) => panic!("undo refused a readable edit: {e}"),
        (Ok(UndoOutcome::Restored), _) => assert_eq!(edit, written, "restored over an edit"),
        (Ok(UndoOutcome::Reverted { kept }), Ok(edited)) => {
            let now = parse_settings(&now.expect("a reverted file")).expect("readable");
            check_kept(&edited, &now, &kept);
        }
        (Ok(other), edited) => panic!("undo after an edit: {other:?} ({:?})", edited.err()),
    }
}

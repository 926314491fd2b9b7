//! Golden tests of the Claude Code settings merge: realistic settings files under
//! `tests/golden/claude_settings/<case>/` are configured, checked and undone, and each
//! result is compared byte for byte with the expected file beside it.
//!
//! A case holds `input.json` (absent: no settings file yet), `configured.json` (after
//! configure), and optionally `edited.json` (the user's later edit), `status-after-edit.json`,
//! `undone.json` and `kept.json` (the owned keys undo leaves as the user set them). Without
//! `edited.json`, undo must give back `input.json` byte for byte. `malformed/<name>.json`
//! files must be refused with the problem in `<name>.error` and left untouched.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use gatehouse_desktop::claude_settings::{
    ClaudeSettings, ConfigureOutcome, SettingsError, Status, Target, UndoOutcome, settings_path,
};

const BASE_URL: &str = "http://127.0.0.1:8788";
const BINARY: &str = "/home/dev/My Apps/gatehouse";

fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/claude_settings")
}

fn target() -> Target {
    Target::new(BASE_URL, Path::new(BINARY)).unwrap()
}

fn read(p: &Path) -> Option<Vec<u8>> {
    std::fs::read(p).ok()
}

fn text(p: &Path) -> String {
    String::from_utf8(std::fs::read(p).unwrap()).unwrap()
}

#[cfg(unix)]
fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[cfg(unix)]
fn set_mode(p: &Path, m: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
}

/// Every string in a settings document that looks like a credential.
fn credentials_in(doc: &serde_json::Value, out: &mut Vec<String>) {
    match doc {
        serde_json::Value::String(s) if s.starts_with("sk-") => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|v| credentials_in(v, out)),
        serde_json::Value::Object(o) => o.values().for_each(|v| credentials_in(v, out)),
        _ => {}
    }
}

fn run_case(case: &Path) {
    let name = case.file_name().unwrap().to_string_lossy().into_owned();
    let home = tempfile::tempdir().unwrap();
    // CLAUDE_CONFIG_DIR pointing at a directory that may not exist yet.
    let config_dir = home.path().join("cfg").join("claude");
    let path = settings_path(home.path(), Some(&config_dir));
    assert_eq!(path, config_dir.join("settings.json"));
    let settings = ClaudeSettings::new(&path);
    let input = read(&case.join("input.json"));
    if let Some(bytes) = &input {
        std::fs::create_dir_all(&config_dir).unwrap();
        std::fs::write(&path, bytes).unwrap();
        #[cfg(unix)]
        set_mode(&path, 0o640);
    }
    assert_eq!(
        settings.status(&target()).unwrap(),
        Status::NotConfigured,
        "{name}"
    );

    // Configure: the merged file, the backup of the exact bytes, a record.
    let outcome = settings.configure(&target()).unwrap();
    let expected_backup = input.as_ref().map(|_| settings.backup_path());
    assert_eq!(
        outcome,
        ConfigureOutcome::Written {
            backup: expected_backup
        },
        "{name}"
    );
    assert_eq!(
        text(&path),
        text(&case.join("configured.json")),
        "{name}: configured"
    );
    assert_eq!(read(&settings.backup_path()), input, "{name}: backup");
    assert!(settings.record_path().exists(), "{name}: record");
    #[cfg(unix)]
    {
        assert_eq!(
            mode(&path),
            if input.is_some() { 0o640 } else { 0o600 },
            "{name}"
        );
        assert_eq!(mode(&settings.record_path()), 0o600, "{name}");
        if input.is_some() {
            assert_eq!(mode(&settings.backup_path()), 0o600, "{name}");
        }
    }
    assert_eq!(
        settings.status(&target()).unwrap(),
        Status::Configured,
        "{name}"
    );

    // Configuring again changes nothing and keeps the first backup.
    assert_eq!(
        settings.configure(&target()).unwrap(),
        ConfigureOutcome::Unchanged,
        "{name}"
    );
    assert_eq!(read(&settings.backup_path()), input, "{name}: backup kept");

    let edited = case.join("edited.json");
    if edited.exists() {
        let edited_bytes = std::fs::read(&edited).unwrap();
        std::fs::write(&path, &edited_bytes).unwrap();
        let status = settings.status(&target()).unwrap();
        let expected: serde_json::Value =
            serde_json::from_str(&text(&case.join("status-after-edit.json"))).unwrap();
        let status_json = serde_json::to_value(&status).unwrap();
        assert_eq!(
            status_json, expected,
            "{name}: status after the user's edit"
        );
        let mut secrets = Vec::new();
        credentials_in(
            &serde_json::from_slice(&edited_bytes).unwrap(),
            &mut secrets,
        );
        let shown = format!("{status_json} {status:?} {}", describe(&status));
        for s in secrets {
            assert!(
                !shown.contains(&s),
                "{name}: status shows a credential: {shown}"
            );
        }
        let kept: Vec<String> = serde_json::from_str(&text(&case.join("kept.json"))).unwrap();
        match settings.undo().unwrap() {
            UndoOutcome::Reverted { kept: got } => assert_eq!(got, kept, "{name}: kept"),
            other => panic!("{name}: expected a key revert, got {other:?}"),
        }
        assert_eq!(
            text(&path),
            text(&case.join("undone.json")),
            "{name}: undone"
        );
    } else {
        assert_eq!(settings.undo().unwrap(), UndoOutcome::Restored, "{name}");
        assert_eq!(
            read(&path),
            input,
            "{name}: undo gives back the exact bytes"
        );
        #[cfg(unix)]
        if input.is_some() {
            assert_eq!(mode(&path), 0o640, "{name}");
        }
    }
    assert!(
        !settings.backup_path().exists(),
        "{name}: backup left behind"
    );
    assert!(
        !settings.record_path().exists(),
        "{name}: record left behind"
    );
    assert_eq!(
        settings.status(&target()).unwrap(),
        Status::NotConfigured,
        "{name}"
    );
    assert_eq!(
        settings.undo().unwrap(),
        UndoOutcome::NothingToUndo,
        "{name}"
    );
}

fn describe(status: &Status) -> String {
    match status {
        Status::Drifted { keys } => keys
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("; "),
        other => format!("{other:?}"),
    }
}

#[test]
fn merge_status_and_undo_match_the_golden_files() {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(golden())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && p.file_name().is_some_and(|n| n != "malformed"))
        .collect();
    cases.sort();
    assert!(cases.len() >= 6, "{cases:?}");
    for case in &cases {
        run_case(case);
    }
}

#[test]
fn drift_is_reported_with_expected_and_found_values() {
    let case = golden().join("drifted");
    let home = tempfile::tempdir().unwrap();
    let path = settings_path(home.path(), None);
    assert_eq!(path, home.path().join(".claude/settings.json"));
    let settings = ClaudeSettings::new(&path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::copy(case.join("input.json"), &path).unwrap();
    settings.configure(&target()).unwrap();
    std::fs::copy(case.join("edited.json"), &path).unwrap();
    let Status::Drifted { keys } = settings.status(&target()).unwrap() else {
        panic!("not drifted")
    };
    let lines: Vec<String> = keys.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        lines,
        [
            "env.ANTHROPIC_BASE_URL: expected \"http://127.0.0.1:8788\", found \"https://api.anthropic.com\"",
            "env.ANTHROPIC_API_KEY: expected absent, found set (value not shown)",
        ]
    );
    // The gateway moving to another port is drift too, until configure runs again.
    let moved = Target::new("http://127.0.0.1:9001", Path::new(BINARY)).unwrap();
    std::fs::copy(case.join("configured.json"), &path).unwrap();
    let Status::Drifted { keys } = settings.status(&moved).unwrap() else {
        panic!("not drifted")
    };
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].key, "env.ANTHROPIC_BASE_URL");
    settings.configure(&moved).unwrap();
    assert_eq!(settings.status(&moved).unwrap(), Status::Configured);
    // The first backup still holds the file from before Gatehouse.
    assert_eq!(
        std::fs::read(settings.backup_path()).unwrap(),
        std::fs::read(case.join("input.json")).unwrap()
    );
}

#[test]
fn malformed_files_are_left_untouched_with_a_clear_error() {
    let dir = golden().join("malformed");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let file = entry.unwrap().path();
        if file.extension().is_none_or(|e| e != "json") {
            continue;
        }
        n += 1;
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let problem = text(&file.with_extension("error"));
        let problem = problem.trim();
        let home = tempfile::tempdir().unwrap();
        let path = settings_path(home.path(), None);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let original = std::fs::read(&file).unwrap();
        std::fs::write(&path, &original).unwrap();
        let settings = ClaudeSettings::new(&path);
        let expected = format!(
            "Claude Code settings file {}: {problem}; the file was left unchanged",
            path.display()
        );
        for err in [
            settings.configure(&target()).unwrap_err(),
            settings.status(&target()).unwrap_err(),
        ] {
            assert!(
                matches!(err, SettingsError::Malformed { .. }),
                "{name}: {err:?}"
            );
            assert_eq!(err.to_string(), expected, "{name}");
        }
        assert_eq!(std::fs::read(&path).unwrap(), original, "{name}: touched");
        assert!(!settings.backup_path().exists(), "{name}");
        assert!(!settings.record_path().exists(), "{name}");
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{name}: stray files {names:?}");
    }
    assert!(n >= 6);
}

#[test]
fn a_file_broken_after_configure_is_not_undone_blindly() {
    let case = golden().join("full-user-settings");
    let home = tempfile::tempdir().unwrap();
    let path = settings_path(home.path(), None);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::copy(case.join("input.json"), &path).unwrap();
    let settings = ClaudeSettings::new(&path);
    settings.configure(&target()).unwrap();
    let broken = b"{\n  \"env\": {\n    \"ANTHROPIC_BASE_URL\": \"http://127.0.0.1:8788\"\n  \n";
    std::fs::write(&path, broken).unwrap();
    let err = settings.undo().unwrap_err().to_string();
    assert!(err.contains("invalid JSON"), "{err}");
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), broken);
    // Nothing is lost: the backup and the record stay for a later undo.
    assert!(settings.backup_path().exists());
    assert!(settings.record_path().exists());
    // The user fixes the file (by restoring what Gatehouse wrote); undo then works.
    std::fs::copy(case.join("configured.json"), &path).unwrap();
    assert_eq!(settings.undo().unwrap(), UndoOutcome::Restored);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        std::fs::read(case.join("input.json")).unwrap()
    );
}

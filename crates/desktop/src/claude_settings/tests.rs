//! Unit tests of the settings merge: key order, null versus absent, records, symlinks,
//! quoting and what drift may show.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

fn target() -> Target {
    Target::new(
        "http://127.0.0.1:8788/",
        Path::new("/usr/local/bin/gatehouse"),
    )
    .unwrap()
}

fn setup(contents: Option<&str>) -> (tempfile::TempDir, ClaudeSettings) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".claude/settings.json");
    if let Some(c) = contents {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, c).unwrap();
    }
    (dir, ClaudeSettings::new(path))
}

fn doc(s: &ClaudeSettings) -> Value {
    serde_json::from_slice(&std::fs::read(s.path()).unwrap()).unwrap()
}

#[test]
fn settings_path_prefers_claude_config_dir() {
    let home = Path::new("/home/dev");
    assert_eq!(
        settings_path(home, None),
        PathBuf::from("/home/dev/.claude/settings.json")
    );
    assert_eq!(
        settings_path(home, Some(Path::new("/cfg"))),
        PathBuf::from("/cfg/settings.json")
    );
    assert_eq!(
        settings_path(home, Some(Path::new(""))),
        PathBuf::from("/home/dev/.claude/settings.json")
    );
}

#[test]
fn target_quotes_the_binary_for_a_shell() {
    let t = target();
    assert_eq!(t.base_url, "http://127.0.0.1:8788");
    assert_eq!(t.api_key_helper, "/usr/local/bin/gatehouse token --local");
    let t = Target::new(
        "http://127.0.0.1:8788",
        Path::new("/opt/it's here/gatehouse"),
    )
    .unwrap();
    assert_eq!(
        t.api_key_helper,
        r#""/opt/it's here/gatehouse" token --local"#
    );
    assert_eq!(
        shlex::split(&t.api_key_helper).unwrap(),
        ["/opt/it's here/gatehouse", "token", "--local"]
    );
    // A real shell sees the path as one word, with nothing expanded.
    #[cfg(unix)]
    for path in [
        "/opt/$HOME `x`/gh",
        "/opt/it's here/gatehouse",
        "/opt/a\"b\\c/gh",
    ] {
        let t = Target::new("http://127.0.0.1:8788", Path::new(path)).unwrap();
        let word = t.api_key_helper.strip_suffix(" token --local").unwrap();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s' {word}"))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), path, "{word}");
    }
    for (url, bin, why) in [
        ("ftp://127.0.0.1:8788", "/bin/gatehouse", "must be http(s)"),
        ("not a url", "/bin/gatehouse", "is not a URL"),
        ("http://127.0.0.1:8788", "gatehouse", "is not absolute"),
    ] {
        let e = Target::new(url, Path::new(bin)).unwrap_err().to_string();
        assert!(e.contains(why), "{url} {bin}: {e}");
    }
}

#[test]
fn removals_keep_the_order_of_the_other_keys() {
    let (_d, s) = setup(Some(
        r#"{"env": {"A": "1", "ANTHROPIC_API_KEY": "sk-x", "B": "2", "ANTHROPIC_AUTH_TOKEN": "t", "C": "3"}}"#,
    ));
    s.configure(&target()).unwrap();
    let env = doc(&s)["env"].as_object().unwrap().clone();
    let keys: Vec<&str> = env.keys().map(String::as_str).collect();
    assert_eq!(keys, ["A", "B", "C", "ANTHROPIC_BASE_URL"]);
}

#[test]
fn a_null_previous_value_is_restored_as_null_not_removed() {
    let (_d, s) = setup(Some(
        r#"{"apiKeyHelper": null, "env": {"ANTHROPIC_BASE_URL": null}}"#,
    ));
    s.configure(&target()).unwrap();
    // A later edit elsewhere forces a key-by-key revert.
    let mut d = doc(&s);
    d["model"] = Value::String("opus".into());
    std::fs::write(s.path(), serde_json::to_vec(&d).unwrap()).unwrap();
    assert_eq!(s.undo().unwrap(), UndoOutcome::Reverted { kept: vec![] });
    assert_eq!(
        doc(&s),
        serde_json::json!({"apiKeyHelper": null, "env": {"ANTHROPIC_BASE_URL": null}, "model": "opus"})
    );
}

#[test]
fn an_env_created_by_gatehouse_goes_away_on_revert() {
    let (_d, s) = setup(Some(r#"{"model": "opus"}"#));
    s.configure(&target()).unwrap();
    let mut d = doc(&s);
    d["model"] = Value::String("sonnet".into());
    std::fs::write(s.path(), serde_json::to_vec(&d).unwrap()).unwrap();
    s.undo().unwrap();
    assert_eq!(doc(&s), serde_json::json!({"model": "sonnet"}));
}

#[test]
fn an_empty_file_counts_as_an_empty_object() {
    let (_d, s) = setup(Some("  \n"));
    s.configure(&target()).unwrap();
    assert_eq!(
        doc(&s)["env"]["ANTHROPIC_BASE_URL"],
        "http://127.0.0.1:8788"
    );
    s.undo().unwrap();
    assert_eq!(std::fs::read(s.path()).unwrap(), b"  \n");
}

#[test]
fn a_deleted_file_is_restored_from_the_backup() {
    let (_d, s) = setup(Some(r#"{"model": "opus"}"#));
    s.configure(&target()).unwrap();
    std::fs::remove_file(s.path()).unwrap();
    assert_eq!(s.undo().unwrap(), UndoOutcome::Restored);
    assert_eq!(std::fs::read(s.path()).unwrap(), br#"{"model": "opus"}"#);
}

#[test]
fn edits_between_two_configures_survive_undo() {
    let (_d, s) = setup(Some(r#"{"model": "opus"}"#));
    s.configure(&target()).unwrap();
    let mut d = doc(&s);
    d["model"] = Value::String("sonnet".into());
    std::fs::write(s.path(), serde_json::to_vec(&d).unwrap()).unwrap();
    // The gateway moved; configure again over the user's edit.
    let moved = Target::new(
        "http://127.0.0.1:9100",
        Path::new("/usr/local/bin/gatehouse"),
    )
    .unwrap();
    s.configure(&moved).unwrap();
    assert_eq!(
        std::fs::read(s.backup_path()).unwrap(),
        br#"{"model": "opus"}"#
    );
    // The file is exactly as Gatehouse last wrote it, but the backup lacks the edit.
    assert_eq!(s.undo().unwrap(), UndoOutcome::Reverted { kept: vec![] });
    assert_eq!(doc(&s), serde_json::json!({"model": "sonnet"}));
}

#[test]
fn a_corrupt_record_is_an_error_and_nothing_is_written() {
    let (_d, s) = setup(Some(r#"{"model": "opus"}"#));
    s.configure(&target()).unwrap();
    let written = std::fs::read(s.path()).unwrap();
    std::fs::write(s.record_path(), b"{").unwrap();
    for e in [s.undo().unwrap_err(), s.configure(&target()).unwrap_err()] {
        let e = e.to_string();
        assert!(e.contains("gatehouse-record.json is unreadable"), "{e}");
    }
    assert_eq!(std::fs::read(s.path()).unwrap(), written);
}

#[test]
fn record_holds_previous_values_of_the_owned_keys_only() {
    let (_d, s) = setup(Some(
        r#"{"env": {"ANTHROPIC_BASE_URL": "https://proxy.example", "OTHER": "x"}, "hooks": {}}"#,
    ));
    s.configure(&target()).unwrap();
    let record: Value = serde_json::from_slice(&std::fs::read(s.record_path()).unwrap()).unwrap();
    let keys = record["keys"].as_array().unwrap();
    let names: Vec<&str> = keys.iter().map(|k| k["key"].as_str().unwrap()).collect();
    assert_eq!(names, KEYS.map(Key::name));
    assert_eq!(
        keys[0]["previous"],
        serde_json::json!({"state": "present", "value": "https://proxy.example"})
    );
    assert_eq!(keys[1]["previous"], serde_json::json!({"state": "absent"}));
    assert_eq!(keys[2]["written"], serde_json::json!({"state": "absent"}));
    let text = String::from_utf8(std::fs::read(s.record_path()).unwrap()).unwrap();
    assert!(!text.contains("OTHER") && !text.contains("hooks"), "{text}");
}

#[cfg(unix)]
#[test]
fn a_symlinked_settings_file_is_written_through_the_link() {
    let (d, s) = setup(None);
    let real = d.path().join("dotfiles/claude-settings.json");
    std::fs::create_dir_all(real.parent().unwrap()).unwrap();
    std::fs::write(&real, r#"{"model": "opus"}"#).unwrap();
    std::fs::create_dir_all(s.path().parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&real, s.path()).unwrap();
    s.configure(&target()).unwrap();
    assert!(
        std::fs::symlink_metadata(s.path())
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let d2: Value = serde_json::from_slice(&std::fs::read(&real).unwrap()).unwrap();
    assert_eq!(d2["apiKeyHelper"], "/usr/local/bin/gatehouse token --local");
    // The backup and record sit beside the link, not in the dotfiles directory.
    assert!(s.backup_path().starts_with(d.path().join(".claude")));
    assert_eq!(
        std::fs::read_dir(real.parent().unwrap()).unwrap().count(),
        1
    );
    s.undo().unwrap();
    assert_eq!(std::fs::read(&real).unwrap(), br#"{"model": "opus"}"#);
    assert!(
        std::fs::symlink_metadata(s.path())
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn base_url_with_credentials_is_shown_without_them() {
    let found = Value::String("https://user:hunter2@proxy.example/x".into());
    assert_eq!(
        show(Key::BaseUrl, Some(&found)),
        Shown::Value("https://proxy.example/x".into())
    );
    assert_eq!(
        show(Key::BaseUrl, Some(&Value::String("sk-abc".into()))),
        Shown::Hidden
    );
    assert_eq!(
        show(Key::ApiKeyHelper, Some(&Value::String("echo sk".into()))),
        Shown::Hidden
    );
    assert_eq!(show(Key::AuthToken, None), Shown::Absent);
}

/// Found by the `claude_settings` fuzz target
/// (fuzz/corpus/claude_settings/crash-float-roundtrip.json): a number in the user's settings
/// came back from configure one bit off, because it was read with a fast, inexact float
/// parser. Numbers now keep their exact value.
#[test]
fn numbers_keep_their_exact_value() {
    let numbers = [
        "123456788901.225070",
        "0.1",
        "2.2250738585072011e-308",
        "1e23",
    ];
    let input = format!(
        "{{{}}}",
        numbers
            .iter()
            .enumerate()
            .map(|(i, n)| format!("\"n{i}\": {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let (_dir, s) = setup(Some(&input));
    s.configure(&target()).unwrap();
    let after = doc(&s);
    for (i, n) in numbers.iter().enumerate() {
        let exact: f64 = n.parse().unwrap();
        assert_eq!(after[format!("n{i}")].as_f64(), Some(exact), "{n}");
    }
}

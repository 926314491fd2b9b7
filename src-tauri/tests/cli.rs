//! The `gatehouse` binary as a user runs it: exit status 1 with a `gatehouse:` prefix on
//! bad configs, the embedded default printing what to give Claude Code, and a clean stop
//! on SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn gatehouse() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gatehouse"));
    c.env_clear().env("PATH", "/usr/bin:/bin");
    c
}

/// A refusal as the reference prints one: `gatehouse: ` and a JSON list of
/// `{code, message, path}`, every problem of the file at once.
fn issue_list(stderr: &str) -> Vec<serde_json::Value> {
    let json = stderr
        .strip_prefix("gatehouse: ")
        .unwrap_or_else(|| panic!("no prefix: {stderr}"));
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {stderr}"))
}

#[test]
fn bad_config_exits_1_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gateway.yaml");
    std::fs::write(&file, "listen: {host: 127.0.0.1}\nupstreams: [{name: a, provider: anthropic, base_url: 'ftp://x'}]\n").unwrap();
    for args in [
        vec!["check-config", file.to_str().unwrap()],
        vec!["serve", "--config", file.to_str().unwrap()],
    ] {
        let out = gatehouse().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        let issues = issue_list(&err);
        assert!(
            issues.iter().any(
                |i| i["path"] == serde_json::json!(["upstreams", 0, "base_url"])
                    && i["message"] == "URL scheme must be http or https"
            ),
            "{err}"
        );
    }
    std::fs::write(&file, "listen: {host: 127.0.0.1}\nupstreams: [{name: a, provider: anthropic}]\nstore: {postgres_url: 'postgres://gh:pw-not-shown@db/gh?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem'}\n").unwrap();
    let out = gatehouse()
        .args(["check-config", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let issues = issue_list(&err);
    assert!(
        issues.iter().any(
            |i| i["path"] == serde_json::json!(["store", "postgres_url"])
                && i["message"].as_str().is_some_and(|m| m.starts_with(
                    "TLS: sslrootcert: cannot read PEM certificates from /nonexistent/ca.pem"
                ))
        ),
        "{err}"
    );
    assert!(!err.contains("pw-not-shown"), "{err}");

    let out = gatehouse()
        .args(["check-config", "/nonexistent/gateway.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .starts_with("gatehouse: cannot read /nonexistent/gateway.yaml")
    );
}

#[test]
fn examples_pass_check_config() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = tempfile::tempdir().unwrap();
    let ci_key = dir.path().join("ci_key");
    std::fs::write(&ci_key, "ci-client-key-0123456789abcdef012345").unwrap();
    let out = gatehouse()
        .args([
            "check-config",
            root.join("examples/local.yaml").to_str().unwrap(),
        ])
        .env("ANTHROPIC_API_KEY", "sk-x")
        .env(
            "GATEHOUSE_CLIENT_KEY",
            "local-client-key-0123456789abcdef0123",
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("local.yaml: no errors found."));
    // The reference's spelling of the same check.
    let out = gatehouse()
        .args(["serve", "--check", "config", "--config"])
        .arg(root.join("examples/local.yaml"))
        .env("ANTHROPIC_API_KEY", "sk-x")
        .env(
            "GATEHOUSE_CLIENT_KEY",
            "local-client-key-0123456789abcdef0123",
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.ends_with("local.yaml: no errors found. This does not check the database, identity provider, upstreams, credentials, certificates, or listen address.\n"),
        "{stdout}"
    );
    let out = gatehouse()
        .args(["serve", "--check", "foo"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown --check foo. Available: config"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn schema_command_prints_the_committed_schema() {
    let out = gatehouse().arg("config-schema").output().unwrap();
    assert!(out.status.success());
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config.schema.json");
    let committed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root).unwrap()).unwrap();
    assert_eq!(printed, committed);
}

#[test]
fn embedded_default_prints_claude_code_settings_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = gatehouse()
        .args([
            "--data-dir",
            dir.path().to_str().unwrap(),
            "serve",
            "--port",
            "0",
        ])
        .env("HOME", dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let Some(Ok(line)) = lines.next() else { break };
        seen.push(line.clone());
        if line.contains("reset-local-key") {
            break;
        }
    }
    let text = seen.join("\n");
    assert!(
        text.contains("gatehouse: listening on http://127.0.0.1:"),
        "{text}"
    );
    assert!(
        text.contains("export ANTHROPIC_BASE_URL=http://127.0.0.1:"),
        "{text}"
    );
    let token_line = seen
        .iter()
        .find(|l| l.contains("ANTHROPIC_AUTH_TOKEN=gth_"))
        .expect("token printed");
    let token = token_line.split('=').nth(1).unwrap().to_owned();
    assert!(dir.path().join("gatehouse.db").exists());

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        assert!(
            Instant::now() < deadline,
            "gatehouse did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(code, Some(0));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.contains("set ANTHROPIC_API_KEY"), "{err}");
    assert!(
        !err.contains(&token),
        "the local key must not reach the logs"
    );
    let db = std::fs::read(dir.path().join("gatehouse.db")).unwrap();
    assert!(
        !db.windows(token.len()).any(|w| w == token.as_bytes()),
        "only a hash of the key is stored"
    );
}

#[test]
fn file_logs_rotate_into_the_configured_directory() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    let file = dir.path().join("gateway.yaml");
    std::fs::write(
        &file,
        format!(
            "listen: {{host: 127.0.0.1, port: 0}}\nstore: {{sqlite_path: \"{}\"}}\nupstreams: [{{name: a, provider: anthropic, base_url: 'http://127.0.0.1:9', auth: {{api_key: k}}}}]\nlogging: {{dir: \"{}\", rotation: daily}}\n",
            dir.path().join("g.db").display(),
            logs.display()
        ),
    )
    .unwrap();
    let mut child = gatehouse()
        .args(["serve", "--config", file.to_str().unwrap()])
        .env("CLAUDE_GATEWAY_ALLOW_LOOPBACK", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(
        first.starts_with("gatehouse: listening on http://127.0.0.1:"),
        "{first}"
    );
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "gatehouse did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
    let names: Vec<String> = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let events = names
        .iter()
        .find(|n| n.starts_with("events."))
        .expect("an events file");
    assert!(
        names.iter().any(|n| n.starts_with("gatehouse.")),
        "{names:?}"
    );
    let text = std::fs::read_to_string(logs.join(events)).unwrap();
    assert!(
        text.lines()
            .any(|l| l.contains("\"evt\":\"gateway.start\"")),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.contains("\"evt\":\"gateway.stop\"")),
        "{text}"
    );
}

/// `gatehouse statusline` with no gateway to ask (no keychain, a closed loopback port) or
/// a hostile status JSON still prints one short line, exits 0 and returns within a second:
/// Claude Code's footer never hangs on it. `usage export` with a bad date says why.
#[test]
fn statusline_falls_back_fast_and_usage_export_checks_its_words() {
    let dir = tempfile::tempdir().unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    for input in [
        r#"{"session_id":"4f0c2d9e-1b2a","model":{"id":"claude-sonnet-4-5"},"cwd":"/tmp"}"#
            .to_owned(),
        format!(
            r#"{{"session_id":"{}"}}"#,
            "\u{202e}<script>".repeat(10_000)
        ),
        "not json \u{0}\u{7}".to_owned(),
    ] {
        let started = Instant::now();
        let mut child = gatehouse()
            .args(["--data-dir", dir.path().to_str().unwrap(), "statusline"])
            .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
            .env("HOME", dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "took {:?}",
            started.elapsed()
        );
        assert_eq!(out.status.code(), Some(0));
        let line = String::from_utf8_lossy(&out.stdout);
        assert_eq!(line.trim(), "Gatehouse: not running", "{line}");
        assert!(!line.contains("script"));
    }
    let out = gatehouse()
        .args([
            "--data-dir",
            dir.path().to_str().unwrap(),
            "usage",
            "export",
            "--since",
            "2026-02-30",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("since must be a date as YYYY-MM-DD"));
}

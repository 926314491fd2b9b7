//! The real Claude Code CLI through the real `gatehouse serve` process (built binary, YAML
//! config) to the in-repo fake upstream.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use fake_upstream::{FakeConfig, FakeUpstream};
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, e2e_bin};
use tokio::io::AsyncBufReadExt;
use tokio::process::Command;

#[tokio::test]
async fn claude_p_through_gatehouse_serve() {
    let claude = e2e_bin("claude");
    assert!(claude.exists(), "run scripts/test.sh");
    let fake = FakeUpstream::start(FakeConfig {
        reply_text: "ANSWER-FROM-FAKE-UPSTREAM".into(),
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gateway.yaml");
    std::fs::write(
        &config,
        format!(
            "listen: {{host: 127.0.0.1, port: 0}}\nstore: {{sqlite_path: \"{}\"}}\nupstreams:\n  - {{name: primary, provider: anthropic, base_url: \"{}\", auth: {{api_key: \"${{OPERATOR_KEY}}\"}}}}\nclient_keys: [{{id: dev, key: \"${{CLIENT_KEY}}\"}}]\n",
            dir.path().join("g.db").display(),
            fake.url()
        ),
    )
    .unwrap();
    let mut serve = Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(["serve", "--config", config.to_str().unwrap()])
        .env_clear()
        // The fake upstream is on loopback: the reference's switch allows it.
        .env("CLAUDE_GATEWAY_ALLOW_LOOPBACK", "1")
        .env("PATH", "/usr/bin:/bin")
        .env("OPERATOR_KEY", OPERATOR_KEY)
        .env("CLIENT_KEY", CLIENT_KEY)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(serve.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let base = line
        .strip_prefix("gatehouse: listening on ")
        .expect("listening line")
        .to_owned();
    let home = tempfile::tempdir().unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        Command::new(&claude)
            .args(["-p", "Say the answer.", "--output-format", "json"])
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", home.path())
            .env("ANTHROPIC_BASE_URL", &base)
            .env("ANTHROPIC_API_KEY", CLIENT_KEY)
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("CLAUDE_CODE_MAX_RETRIES", "0")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert!(
        v["result"]
            .as_str()
            .unwrap()
            .contains("ANSWER-FROM-FAKE-UPSTREAM"),
        "{stdout}"
    );
    let reqs = fake.requests();
    assert!(!reqs.is_empty());
    for r in &reqs {
        assert!(
            r.headers
                .iter()
                .any(|(k, v)| k == "x-api-key" && v == OPERATOR_KEY)
        );
        assert!(r.headers.iter().all(|(_, v)| !v.contains(CLIENT_KEY)));
    }
    // Stop it and check the event stream on stderr: an inference event, no secret.
    let _ = Command::new("kill")
        .args(["-TERM", &serve.id().unwrap().to_string()])
        .status()
        .await;
    let out = tokio::time::timeout(Duration::from_secs(30), serve.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with('{') && l.contains("\"evt\":\"inference\"")),
        "{stderr}"
    );
    assert!(
        !stderr.contains(CLIENT_KEY)
            && !stderr.contains(OPERATOR_KEY)
            && !stderr.contains(&OPERATOR_KEY[..12])
    );
}

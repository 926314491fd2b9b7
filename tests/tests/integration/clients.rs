//! Real clients end to end: the Claude Code CLI (`claude -p`) and the official Anthropic
//! TypeScript SDK, through `gatehouse` to the fake upstream. `scripts/test.sh` installs
//! them (pinned) under `tests/e2e/node_modules`; a missing install fails the test.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Stdio;
use std::time::Duration;

use fake_upstream::FakeConfig;
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, TestGateway, base_yaml, e2e_bin, e2e_dir};
use tokio::process::Command;

const ANSWER: &str = "GATEHOUSE-E2E-OK from the fake upstream";

fn require(path: &std::path::Path) {
    assert!(
        path.exists(),
        "{} is missing: run scripts/test.sh (it installs tests/e2e with npm ci)",
        path.display()
    );
}

#[tokio::test]
async fn claude_code_print_mode_gets_the_upstream_answer() {
    let claude = e2e_bin("claude");
    require(&claude);
    let gw = TestGateway::start_with(
        FakeConfig {
            reply_text: ANSWER.into(),
            output_tokens: 4,
            ..FakeConfig::default()
        },
        base_yaml,
    )
    .await;
    let home = tempfile::tempdir().unwrap();
    let child = Command::new(&claude)
        .args([
            "-p",
            "Reply with the magic words.",
            "--output-format",
            "json",
        ])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home.path())
        .env("TERM", "dumb")
        .env("ANTHROPIC_BASE_URL", gw.handle.base_url())
        .env("ANTHROPIC_AUTH_TOKEN", CLIENT_KEY)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("claude -p finished within 120 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "claude failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(result["is_error"], false, "{stdout}");
    assert!(
        result["result"]
            .as_str()
            .unwrap()
            .contains("GATEHOUSE-E2E-OK"),
        "{stdout}"
    );

    let requests = gw.fake.requests();
    let inference: Vec<_> = requests
        .iter()
        .filter(|r| r.path == "/v1/messages")
        .collect();
    assert!(!inference.is_empty());
    for r in &requests {
        let keys: Vec<&str> = r
            .headers
            .iter()
            .filter(|(k, _)| k == "x-api-key")
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(
            keys,
            vec![OPERATOR_KEY],
            "the upstream sees the operator key only"
        );
        assert!(
            r.headers
                .iter()
                .all(|(k, v)| k != "authorization" && !v.contains(CLIENT_KEY))
        );
    }
    // Claude Code's betas and its attribution system block pass through unchanged.
    let beta = inference[0]
        .headers
        .iter()
        .find(|(k, _)| k == "anthropic-beta")
        .map(|(_, v)| v.clone());
    assert!(beta.unwrap_or_default().contains("claude-code-"));
    let rows = gw.usage_rows(inference.len()).await;
    assert!(
        rows.iter()
            .all(|r| r.principal == "key:tester" && r.status == 200)
    );
    assert!(
        rows.iter()
            .any(|r| r.output_tokens == 4 && r.cost_micro_usd > 0)
    );
}

#[tokio::test]
async fn anthropic_sdk_streams_through_the_gateway() {
    let node_modules = e2e_dir().join("node_modules/@anthropic-ai/sdk");
    require(&node_modules);
    let gw = TestGateway::start_with(
        FakeConfig {
            reply_text: "streamed through gatehouse".into(),
            output_tokens: 3,
            token_interval_ms: 10,
            ..FakeConfig::default()
        },
        base_yaml,
    )
    .await;
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        Command::new("node")
            .arg(e2e_dir().join("sdk_stream.mjs"))
            .current_dir(e2e_dir())
            .env("GATEHOUSE_URL", gw.handle.base_url())
            .env("GATEHOUSE_KEY", CLIENT_KEY)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("sdk script finished")
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(v["text"], "streamed through gatehouse");
    assert_eq!(v["stop_reason"], "end_turn");
    assert_eq!(v["usage"]["output_tokens"], 3);
    let events: Vec<&str> = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(events.first(), Some(&"message_start"));
    assert_eq!(events.last(), Some(&"message_stop"));
    assert_eq!(
        events
            .iter()
            .filter(|e| **e == "content_block_delta")
            .count(),
        3
    );
    assert_eq!(v["denied"]["status"], 401);
    assert_eq!(v["denied"]["type"], "authentication_error");
    let stainless = gw.fake.requests()[0]
        .headers
        .iter()
        .any(|(k, _)| k.starts_with("x-stainless-"));
    assert!(stainless, "SDK headers pass through");
}

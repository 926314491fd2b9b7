//! The Dashboard's Prompt cache section in headless Chromium after a real cache break: a
//! Claude Code-like conversation caches its prefix on `primary` for three turns, `primary`
//! answers 503, and the next turns fail over to `backup`, which has none of that cache.
//! Writes `dashboard-prompt-cache.png` (see [`super::screenshot_dir`]).

use fake_upstream::{FakeConfig, FakeUpstream, Fault};
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, TestGateway, load};
use serde_json::{Value, json};

use super::{grouped, line_of, screenshot_dir, snapshot};

/// Claude Code's system prompt stands in as this line, repeated (about 1,700 tokens, past
/// the 1,024 a prefix needs before it is cached).
pub(super) const SYSTEM: &str = "You are Claude Code, Anthropic's official CLI for Claude. ";

/// Turn `n` (from 1) of a Claude Code-like conversation: a long system prompt and the
/// history so far, the system prompt and the newest user message marked for caching as
/// Claude Code marks them.
pub(super) fn turn(system: &str, n: usize) -> Value {
    let mut messages = Vec::new();
    for t in 1..=n {
        let ask = format!(
            "Step {t}: {}",
            "read the module and explain what it does. ".repeat(40)
        );
        messages.push(json!({"role": "user", "content": [{"type": "text", "text": ask}]}));
        if t < n {
            messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": format!("Done with step {t}.")}]}));
        }
    }
    if let Some(last) = messages.last_mut() {
        last["content"][0]["cache_control"] = json!({"type": "ephemeral"});
    }
    json!({
        "model": "claude-sonnet-4-6",
        "max_tokens": 256,
        "system": [{"type": "text", "text": system.repeat(120), "cache_control": {"type": "ephemeral"}}],
        "messages": messages,
    })
}

/// Sends one turn of `session`; the upstream that answered it.
pub(super) async fn send(gw: &TestGateway, session: &str, body: Value) -> String {
    let resp = gw
        .messages(body)
        .header("x-claude-code-session-id", session)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let upstream = resp.headers()["x-gatehouse-upstream"]
        .to_str()
        .unwrap()
        .to_owned();
    let _ = resp.bytes().await;
    upstream
}

/// The cache-read share as the page shows it: one decimal, halves up, `—` without tokens.
fn share(t: &Value) -> String {
    let n = |k: &str| t[k].as_u64().unwrap() as f64;
    let prompt = n("cache_read_tokens") + n("cache_write_tokens") + n("uncached_tokens");
    if prompt == 0.0 {
        return "—".into();
    }
    format!(
        "{:.1}%",
        (n("cache_read_tokens") / prompt * 1000.0).round() / 10.0
    )
}

#[test]
fn share_rule() {
    let t = |read: u64, write: u64, uncached: u64| json!({"cache_read_tokens": read, "cache_write_tokens": write, "uncached_tokens": uncached});
    assert_eq!(share(&t(0, 0, 0)), "—");
    assert_eq!(share(&t(0, 0, 25)), "0.0%");
    assert_eq!(share(&t(1, 1, 0)), "50.0%");
    assert_eq!(share(&t(2, 1, 0)), "66.7%");
    assert_eq!(share(&t(999_999, 0, 1)), "100.0%");
}

#[tokio::test]
async fn browser_shows_prompt_cache_health_and_a_break() {
    use tokio::io::AsyncBufReadExt;
    let cached = FakeConfig {
        prompt_cache: true,
        ..FakeConfig::default()
    };
    let primary = FakeUpstream::start(cached.clone()).await.unwrap();
    let backup = FakeUpstream::start(cached).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        r#"
listen: {{host: 127.0.0.1, port: 0}}
store: {{sqlite_path: "{db}"}}
upstreams:
  - {{name: primary, provider: anthropic, base_url: "{p}", auth: {{api_key: "{OPERATOR_KEY}"}}}}
  - {{name: backup, provider: anthropic, base_url: "{b}", auth: {{api_key: "{OPERATOR_KEY}"}}}}
client_keys:
  - {{id: tester, key: "{CLIENT_KEY}"}}
routing: {{health: {{breaker_failures: 1, breaker_open_s: 60}}}}
"#,
        db = dir.path().join("gatehouse.db").display(),
        p = primary.url(),
        b = backup.url(),
    );
    let gw = TestGateway::start_config(load(&yaml, dir.path()), primary, dir).await;

    let session = "3f6c2a9e-8d41-4b7a-9c5e-1a2b3c4d5e6f";
    for n in 1..=3 {
        assert_eq!(send(&gw, session, turn(SYSTEM, n)).await, "primary");
    }
    gw.usage_rows(3).await;
    gw.fake.push_fault(Fault::Status {
        status: 503,
        retry_after: None,
        error_type: None,
        message: None,
    });
    // Turn 4 fails over and writes its prefix again on backup; the next turns read it there.
    for n in 4..=6 {
        assert_eq!(send(&gw, session, turn(SYSTEM, n)).await, "backup");
    }
    gw.usage_rows(6).await;
    let snap = snapshot(&gw, &[]).await;
    assert_eq!(snap["cache_breaks"].as_array().unwrap().len(), 1, "{snap}");
    let mut tallies = snap["prompt_cache"].as_array().unwrap().clone();
    // As the page lists them: upstreams in their configured order.
    tallies.sort_by_key(|t| t["upstream"] != "primary");
    assert_eq!(tallies.len(), 2, "{tallies:?}");
    assert!(
        tallies[0]["cache_read_tokens"].as_u64().unwrap() > 0,
        "turns 2 and 3 read primary's cache"
    );

    let shots = tempfile::tempdir().unwrap();
    let shot_dir = screenshot_dir(&shots);
    let mut child = tokio::process::Command::new("node")
        .arg(gatehouse_tests::e2e_dir().join("dashboard.mjs"))
        .current_dir(gatehouse_tests::e2e_dir())
        .env("BASE_URL", gw.handle.base_url())
        .env("PROMPT_CACHE", "1")
        .env("SCREENSHOT_DIR", &shot_dir)
        .env("TIMEOUT_SECS", "80")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let out = line_of(&mut lines).await;
    assert_eq!(out["phase"], "prompt_cache");
    let shown = &out["prompt_cache"];
    assert_eq!(shown["heading"], "Prompt cache");

    // A row per upstream and model, with the snapshot's figures.
    let rows = shown["tallies"].as_array().unwrap();
    assert_eq!(rows.len(), tallies.len(), "{shown}");
    for (row, t) in rows.iter().zip(&tallies) {
        assert_eq!(row["upstream"], t["upstream"]);
        assert_eq!(row["model"], "claude-sonnet-4-6");
        assert_eq!(row["turns"], "3");
        let figure = |k: &str| grouped(t[k].as_u64().unwrap());
        assert_eq!(row["read"], figure("cache_read_tokens"));
        assert_eq!(row["write"], figure("cache_write_tokens"));
        assert_eq!(row["uncached"], figure("uncached_tokens"));
        assert_eq!(row["ratio"], share(t));
    }
    let (on_primary, on_backup) = (&rows[0], &rows[1]);
    assert_eq!(on_backup["breaks"], "1", "turn 4 broke the cache on backup");
    assert_eq!(on_primary["breaks"], "0");
    assert_ne!(on_primary["ratio"], "0.0%");

    // The break itself: a short session id (the whole one in its tooltip), the cause in
    // words, the engine's explanation as a sentence.
    let listed = &snap["cache_breaks"][0];
    assert_eq!(listed["cause"], "upstream_switch");
    let breaks = shown["breaks"].as_array().unwrap();
    assert_eq!(breaks.len(), 1, "{shown}");
    let b = &breaks[0];
    assert_eq!(b["cause"], "upstream_switch");
    assert_eq!(b["label"], "Upstream switch");
    assert_eq!(b["session"], "3f6c2a9e");
    assert_eq!(b["session_title"], session);
    assert_eq!(b["model"], "claude-sonnet-4-6");
    assert_eq!(b["upstream"], "backup");
    assert_eq!(
        b["explanation"],
        "The conversation moved from upstream primary, whose cache it had."
    );
    assert_eq!(shown["empty"], Value::Null);
    assert_eq!(out["console_errors"], json!([]), "no console errors");
    assert_eq!(out["csp_violations"], json!([]), "no CSP violations");
    assert!(child.wait().await.unwrap().success());
    let png = std::fs::read(shot_dir.join("dashboard-prompt-cache.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000);
    drop(backup);
}

//! The desktop window's guided first run and its insight views in headless Chromium
//! (`tests/e2e/insight.mjs`), against an in-process standalone app on port 0 in front of
//! the fake upstream:
//!
//! - Get started on a fresh install: it opens by itself, a person adds an Anthropic key,
//!   tests it, sees what configuring Claude Code will change, configures it with the
//!   status line (checked in the settings file), and step 3 turns done when Claude Code's
//!   first request arrives through the gateway.
//! - Projects, Sessions, a session's main conversation against its subagent, the
//!   Dashboard's charts and the CSV export, after requests as Claude Code sends them from
//!   two projects whose transcripts sit in a fake Claude Code config dir, one session no
//!   transcript knows, and one request outside any session. What the page shows is
//!   checked against the app API.
//!
//! Screenshots go to `docs/screenshots/` with `GATEHOUSE_SCREENSHOTS=1`, else to a temp dir.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use fake_upstream::{FakeConfig, FakeUpstream};
use gatehouse_desktop::app::App;
use gatehouse_desktop::keychain::{LOCAL_TOKEN_ACCOUNT, SERVICE};
use gatehouse_engine::deps::{CredentialStore, MapEnvironment};
use gatehouse_tests::desktop::{Desk, DesktopParts, desktop_deps};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};

/// Any string is a key to the fake upstream.
const API_KEY: &str = "sk-ant-insight-browser-0123456789";
const CLIENT: &str = "claude-cli/2.1.337 (external, cli)";
const SONNET: &str = "claude-sonnet-4-6";
const HAIKU: &str = "claude-haiku-4-5";
/// Claude Code sessions: two in known projects, one no transcript knows.
const S1: &str = "7d1f3c2a-5b6e-4a8f-9c0d-1e2f3a4b5c6d";
const S2: &str = "a2b4c6d8-1357-4bdf-8e9a-0c1d2e3f4a5b";
const S3: &str = "f00dbabe-4242-4c4c-8d8d-123456789abc";

/// Usage that costs something and reads from the cache, so every chart has data.
fn usage() -> FakeConfig {
    FakeConfig {
        input_tokens: 2_000,
        output_tokens: 400,
        cache_read_input_tokens: 60_000,
        cache_creation_5m_tokens: 4_000,
        ..FakeConfig::default()
    }
}

/// A standalone app on a fresh data dir (home `<dir>/home`) in front of a fresh fake, with
/// `vars` in its environment.
async fn start_app(vars: &[(&str, &str)]) -> (FakeUpstream, tempfile::TempDir, DesktopParts, App) {
    let fake = FakeUpstream::start(usage()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut env = MapEnvironment::default()
        .with_var("GATEHOUSE_ANTHROPIC_BASE_URL", &fake.url())
        .with_var(
            "GATEHOUSE_BOOTSTRAP_FILE",
            dir.path().join("no-bootstrap.json").to_str().unwrap(),
        );
    for (k, v) in vars {
        env = env.with_var(k, v);
    }
    let (deps, parts) = desktop_deps(dir.path(), env);
    let app = App::start(deps).await.unwrap();
    (fake, dir, parts, app)
}

/// The token Claude Code presents (kept in the keychain).
fn local_token(parts: &DesktopParts) -> String {
    parts
        .keychain
        .get(SERVICE, LOCAL_TOKEN_ACCOUNT)
        .unwrap()
        .expect("the local token is in the keychain")
        .expose()
        .to_owned()
}

/// One request as Claude Code sends it: its user-agent, and its session (and agent) ids.
async fn claude_request(
    app: &App,
    token: &str,
    model: &str,
    session: Option<&str>,
    agent: Option<&str>,
) {
    let mut r = reqwest::Client::new()
        .post(format!("{}/v1/messages", app.base_url()))
        .bearer_auth(token)
        .header("user-agent", CLIENT)
        .json(&json!({"model": model, "max_tokens": 512,
                      "messages": [{"role": "user", "content": "hi"}]}));
    if let Some(s) = session {
        r = r.header("x-claude-code-session-id", s);
    }
    if let Some(a) = agent {
        r = r.header("x-claude-code-agent-id", a);
    }
    let r = r.send().await.unwrap();
    let status = r.status();
    let body = r.text().await.unwrap();
    assert_eq!(status, 200, "{body}");
}

/// Polls the app state (bounded) until `ok` holds; the listener is briefly closed while
/// the engine restarts, so a failed call is one more try.
async fn state_until(desk: &Desk, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..150 {
        let sent = desk
            .http
            .get(format!("{}/gatehouse/app/state", desk.app.base_url()))
            .header("x-gatehouse-app-token", &desk.token)
            .send()
            .await;
        if let Ok(r) = sent
            && r.status() == 200
            && let Ok(state) = r.json::<Value>().await
            && ok(&state)
        {
            return state;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

/// Polls an app API read (bounded) until `ok` holds; returns that answer.
async fn api_until(desk: &Desk, path: &str, ok: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..150 {
        let (status, v) = desk.call(reqwest::Method::GET, path, None).await;
        if status == 200 && ok(&v) {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {path} to show the requests");
}

/// Screenshots go to the repo's docs only when asked for (`GATEHOUSE_SCREENSHOTS=1`).
fn screenshot_dir(temp: &tempfile::TempDir) -> PathBuf {
    if std::env::var("GATEHOUSE_SCREENSHOTS").as_deref() == Ok("1") {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/screenshots")
    } else {
        temp.path().to_owned()
    }
}

/// `tests/e2e/insight.mjs` running: one JSON line per phase out, a line in to go on.
struct PageScript {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl PageScript {
    fn start(mode: &str, app: &App, shots: &Path, env: &[(&str, &str)]) -> Self {
        let mut child = tokio::process::Command::new("node")
            .arg(gatehouse_tests::e2e_dir().join("insight.mjs"))
            .current_dir(gatehouse_tests::e2e_dir())
            .env("MODE", mode)
            .env("APP_URL", app.dashboard_url())
            .env("SCREENSHOT_DIR", shots)
            .env("TIMEOUT_SECS", "150")
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs");
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Self { child, lines }
    }

    /// The next phase's line, which must be `phase` and not an error.
    async fn phase(&mut self, phase: &str) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(160), self.lines.next_line())
            .await
            .expect("the browser script answered in time")
            .unwrap()
            .expect("the browser script printed a line");
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line}"));
        assert!(v.get("error").is_none(), "browser: {v}");
        assert_eq!(v["phase"], phase, "{v}");
        v
    }

    async fn go_on(&mut self) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(b"go\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    async fn finish(mut self) {
        let status = tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("the browser script ended")
            .unwrap();
        assert!(status.success(), "the browser script failed: {status}");
    }
}

/// The page saw no console error and no CSP violation.
fn assert_clean(v: &Value) {
    assert_eq!(v["console_errors"], json!([]), "{v}");
    assert_eq!(v["csp_violations"], json!([]), "{v}");
}

/// Formats micro-USD the way a person reads it (the UI's rule, written again here).
fn money(micro: u64) -> String {
    if micro > 0 && micro < 10_000 {
        return "<$0.01".into();
    }
    let cents = (micro + 5_000) / 10_000;
    let dollars = (cents / 100).to_string();
    let mut grouped = String::new();
    for (i, c) in dollars.chars().enumerate() {
        if i > 0 && (dollars.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!("${grouped}.{:02}", cents % 100)
}

/// The rows of a CSV file (quoted cells with `""` inside allowed), header first.
fn csv_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let (mut cells, mut cell, mut quoted) = (vec![], String::new(), false);
            let mut chars = line.chars().peekable();
            while let Some(c) = chars.next() {
                match (c, quoted) {
                    ('"', true) if chars.peek() == Some(&'"') => {
                        cell.push('"');
                        chars.next();
                    }
                    ('"', _) => quoted = !quoted,
                    (',', false) => cells.push(std::mem::take(&mut cell)),
                    _ => cell.push(c),
                }
            }
            cells.push(cell);
            cells
        })
        .collect()
}

/// A Claude Code transcript for `session` run in `cwd`, under `<config>/projects`.
fn write_transcript(config: &Path, cwd: &str, session: &str) {
    let encoded: String = cwd
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let dir = config.join("projects").join(encoded);
    std::fs::create_dir_all(&dir).unwrap();
    let line = json!({"type": "user", "sessionId": session, "cwd": cwd,
                      "message": {"role": "user", "content": "hi"}});
    std::fs::write(dir.join(format!("{session}.jsonl")), format!("{line}\n")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_started_takes_a_fresh_install_to_claude_codes_first_request() {
    let (_fake, dir, parts, app) = start_app(&[]).await;
    let shots = tempfile::tempdir().unwrap();
    let mut page = PageScript::start(
        "setup",
        &app,
        &screenshot_dir(&shots),
        &[("API_KEY", API_KEY)],
    );

    // Steps 1 and 2 in the browser, until step 3 waits for Claude Code.
    let v = page.phase("configured").await;
    assert_eq!(
        v["opened"]["tab"], "tab-setup",
        "a fresh install opens on Get started"
    );
    assert_eq!(
        v["opened"]["steps"],
        json!({"1": "current", "2": "todo", "3": "todo"})
    );
    let test = v["test"]["result"].as_str().unwrap();
    assert!(test.starts_with("works (200)"), "{v}");
    assert!(v["summary"].as_str().unwrap().contains("anthropic"), "{v}");
    let base_url = v["preview"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"] == "env.ANTHROPIC_BASE_URL")
        .unwrap_or_else(|| panic!("the preview lists the base URL: {v}"));
    assert_eq!(base_url["from"], "not set");
    assert_eq!(base_url["to"], app.base_url());
    assert!(
        v["preview_with_statusline"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["key"] == "statusLine"),
        "ticking the status line lists it: {v}"
    );
    assert_eq!(
        v["steps"],
        json!({"1": "done", "2": "done", "3": "current"})
    );
    assert_eq!(v["first_request"], "waiting");
    assert!(parts.keychain.values().iter().any(|s| s == API_KEY));

    // Claude Code's settings point here, with Gatehouse's status line.
    let settings: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("home/.claude/settings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(settings["env"]["ANTHROPIC_BASE_URL"], app.base_url());
    let command = settings["statusLine"]["command"].as_str().unwrap();
    assert!(command.ends_with(" statusline"), "{settings}");

    // Claude Code's first request arrives; step 3 says so.
    let session = "0b5e8f2c-9d1a-4e3b-8c7f-6a5d4c3b2a19";
    claude_request(&app, &local_token(&parts), SONNET, Some(session), None).await;
    page.go_on().await;
    let v = page.phase("arrived").await;
    assert_eq!(v["arrived"]["model"], SONNET, "{v}");
    assert_eq!(v["steps"], json!({"1": "done", "2": "done", "3": "done"}));
    assert!(
        v["done"].as_str().unwrap().starts_with("You're set."),
        "{v}"
    );
    assert_clean(&v);
    page.finish().await;
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projects_sessions_charts_and_export_show_claude_codes_spend() {
    let claude = tempfile::tempdir().unwrap();
    let config = claude.path().join("claude");
    write_transcript(&config, "/home/ana/src/shop", S1);
    write_transcript(&config, "/home/ana/src/blog", S2);
    let (_fake, _dir, parts, app) =
        start_app(&[("CLAUDE_CONFIG_DIR", config.to_str().unwrap())]).await;
    let desk = Desk::new(&app);
    let (status, state) = desk
        .post(
            "providers",
            json!({"kind": "anthropic", "api_key": API_KEY}),
        )
        .await;
    assert_eq!(status, 200, "{state}");
    state_until(&desk, "the provider in use", |s| {
        s["providers"][0]["active"] == true
    })
    .await;

    // Claude Code at work: S1 in shop (one request by a subagent), S2 in blog, S3 in a
    // project no transcript knows, and one request outside any session.
    let token = local_token(&parts);
    let sent: [(&str, Option<&str>, Option<&str>); 8] = [
        (SONNET, Some(S1), None),
        (SONNET, Some(S1), None),
        (HAIKU, Some(S1), Some("a1")),
        (SONNET, Some(S1), None),
        (HAIKU, Some(S2), None),
        (HAIKU, Some(S2), None),
        (SONNET, Some(S3), None),
        (HAIKU, None, None),
    ];
    for (model, session, agent) in sent {
        claude_request(&app, &token, model, session, agent).await;
    }
    let in_sessions = sent.iter().filter(|(_, s, _)| s.is_some()).count() as u64;
    let sessions = api_until(&desk, "insight/sessions", |v| {
        let n: u64 = v["sessions"].as_array().map_or(0, |ss| {
            ss.iter().filter_map(|s| s["requests"].as_u64()).sum()
        });
        v["total"] == 3 && n == in_sessions
    })
    .await;
    let charts = api_until(&desk, "insight/charts", |v| {
        let n: u64 = v["today_by_hour"].as_array().map_or(0, |hs| {
            hs.iter().filter_map(|h| h["requests"].as_u64()).sum()
        });
        n == sent.len() as u64
    })
    .await;
    let (_, projects) = desk
        .call(reqwest::Method::GET, "insight/projects", None)
        .await;

    let shots = tempfile::tempdir().unwrap();
    let mut page = PageScript::start(
        "insight",
        &app,
        &screenshot_dir(&shots),
        &[("SESSION_ID", S1)],
    );
    let v = page.phase("insight").await;
    page.finish().await;
    assert_eq!(
        v["opened_on"], "tab-dashboard",
        "set up: no Get started first"
    );

    // Projects: shop and blog by name, S3's as an unknown project, costs as the API has them.
    let shown = v["projects"].as_array().unwrap();
    let names: Vec<&str> = shown.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(shown.len(), 3, "{names:?}");
    assert!(
        names.contains(&"shop") && names.contains(&"blog"),
        "{names:?}"
    );
    assert!(
        names.contains(&format!("unknown project (session {}…)", &S3[..8]).as_str()),
        "{names:?}"
    );
    let api_shop = projects["projects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["key"] == "/home/ana/src/shop")
        .unwrap_or_else(|| panic!("{projects}"));
    let shop = shown
        .iter()
        .find(|p| p["key"] == "/home/ana/src/shop")
        .unwrap();
    assert_eq!(
        shop["month"],
        money(api_shop["cost_month_micro_usd"].as_u64().unwrap()),
        "{shop}"
    );
    assert_ne!(shop["month"], "$0.00");
    assert_eq!(shop["sessions"], "1");

    // Sessions: the three, each with the API's cost.
    let rows = v["sessions"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{v}");
    for s in sessions["sessions"].as_array().unwrap() {
        let row = rows
            .iter()
            .find(|r| r["id"] == s["session_id"])
            .unwrap_or_else(|| panic!("{} is listed: {v}", s["session_id"]));
        assert_eq!(row["cost"], money(s["cost_micro_usd"].as_u64().unwrap()));
        assert_eq!(row["requests"], s["requests"].to_string());
    }
    let s1 = rows.iter().find(|r| r["id"] == S1).unwrap();
    assert_eq!(s1["project"], "shop");

    // S1's detail: the main conversation and the subagent a1.
    let d = &v["detail"];
    assert_eq!(d["id"], S1);
    assert_eq!(d["requests"], "4");
    let agents: Vec<(&str, &str, &str)> = d["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["kind"].as_str().unwrap(),
                a["agent_id"].as_str().unwrap(),
                a["requests"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(agents, [("main", "", "3"), ("subagent", "a1", "1")], "{d}");

    // Charts: drawn, with every request's cost (the one outside a session too).
    let c = &v["charts"];
    for id in ["spend", "hourly", "cache"] {
        assert_eq!(c[id]["present"], true, "{c}");
        assert_eq!(c[id]["canvas"], true, "{id} is drawn: {c}");
        assert_eq!(c[id]["empty"], false, "{c}");
    }
    let spent: u64 = charts["by_model"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["cost_micro_usd"].as_array().unwrap())
        .filter_map(Value::as_u64)
        .sum();
    assert_eq!(c["spend"]["total"], money(spent), "{c}");

    // The export: one CSV row per request, S1's among them.
    let e = &v["export"];
    let filename = e["filename"].as_str().unwrap();
    assert!(
        filename.starts_with("gatehouse-usage-raw-") && filename.ends_with(".csv"),
        "{filename}"
    );
    let csv = csv_rows(e["text"].as_str().unwrap());
    let header = &csv[0];
    assert_eq!(header[0], "at", "{header:?}");
    let sid = header.iter().position(|h| h == "session_id").unwrap();
    assert_eq!(csv.len() - 1, sent.len(), "{}", e["text"]);
    assert_eq!(csv[1..].iter().filter(|r| r[sid] == S1).count(), 4);
    assert_eq!(csv[1..].iter().filter(|r| r[sid].is_empty()).count(), 1);
    assert_clean(&v);
    app.shutdown().await;
}

#[test]
fn money_and_csv_rules() {
    assert_eq!(money(0), "$0.00");
    assert_eq!(money(9_999), "<$0.01");
    assert_eq!(money(1_234_567_890), "$1,234.57");
    assert_eq!(
        csv_rows("a,b\n\"x,\"\"y\"\"\",\n"),
        [vec!["a", "b"], vec!["x,\"y\"", ""]]
    );
}

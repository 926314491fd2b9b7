//! The desktop app service in standalone mode, in-process on port 0: the app API and its
//! token, a provider key kept in the keychain, personal budgets enforced by the engine's
//! spend reservations, pause, notifications, Claude Code set-up and undo, and no secret
//! outside the keychain.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use fake_upstream::{FakeConfig, FakeUpstream};
use gatehouse_desktop::app::App;
use gatehouse_engine::deps::{CredentialStore, MapEnvironment};
use gatehouse_tests::OPERATOR_KEY;
use gatehouse_tests::desktop::{Desk, DesktopParts, desktop_deps, run_page_script};
use serde_json::{Value, json};

fn sonnet(max_tokens: u64) -> Value {
    json!({"model": "claude-sonnet-4-6", "max_tokens": max_tokens, "stream": false,
           "messages": [{"role": "user", "content": "hi"}]})
}

/// The Anthropic provider pointed at the fake, and no IT bootstrap file.
fn standalone_env(fake: &FakeUpstream, dir: &std::path::Path) -> MapEnvironment {
    MapEnvironment::default()
        .with_var("GATEHOUSE_ANTHROPIC_BASE_URL", &fake.url())
        .with_var(
            "GATEHOUSE_BOOTSTRAP_FILE",
            dir.join("no-bootstrap.json").to_str().unwrap(),
        )
}

/// A standalone app on a fresh data dir, its gateway in front of a fresh fake.
async fn standalone_app() -> (FakeUpstream, tempfile::TempDir, DesktopParts, App) {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = standalone_env(&fake, dir.path());
    let (deps, parts) = desktop_deps(dir.path(), env);
    let app = App::start(deps).await.unwrap();
    (fake, dir, parts, app)
}

async fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..100 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_keys_budgets_pause_and_claude_code() {
    let (fake, dir, parts, app) = standalone_app().await;
    let url = app.dashboard_url();
    let desk = Desk::new(&app);
    assert!(
        !desk.token.is_empty(),
        "the window's URL carries the token: {url}"
    );

    // The app API answers only with this launch's token.
    for presented in [None, Some("wrong")] {
        let mut r = desk
            .http
            .get(format!("{}/gatehouse/app/state", app.base_url()));
        if let Some(t) = presented {
            r = r.header("x-gatehouse-app-token", t);
        }
        assert_eq!(r.send().await.unwrap().status(), 401);
    }
    let (status, state) = desk.call(reqwest::Method::GET, "state", None).await;
    assert_eq!(status, 200);
    assert_eq!(state["mode"], "standalone");
    // The team console is a server's: nothing of it on the desktop's loopback listener.
    // (The admin API has no way in here: no admin keys, groups or console sessions.)
    for (path, want) in [
        ("/console", 404),
        ("/console/login", 404),
        ("/v1/organizations/me", 401),
    ] {
        let r = desk.http.get(format!("{}{path}", app.base_url())).send();
        assert_eq!(r.await.unwrap().status(), want, "{path}");
    }
    assert_eq!(state["keychain"]["available"], true);
    assert_eq!(state["login"]["state"], "signed_out");
    assert_eq!(state["claude_code"]["status"], "not_configured");

    // The local token lives in the keychain; without a provider key inference says what to do.
    let local = parts
        .keychain
        .get("gatehouse", "local-token")
        .unwrap()
        .expect("local token in the keychain");
    let infer = |body: Value| {
        desk.http
            .post(format!("{}/v1/messages", app.base_url()))
            .bearer_auth(local.expose())
            .json(&body)
            .send()
    };
    let r = infer(sonnet(64)).await.unwrap();
    assert_eq!(r.status(), 503);
    assert!(r.text().await.unwrap().contains("Settings"));

    // Bad input is refused with a reason; nothing is stored.
    for (body, want) in [
        (json!({"kind": "bedrock", "api_key": "abcdefghijk"}), 400),
        (json!({"kind": "anthropic", "api_key": "short"}), 400),
        (json!({"kind": "anthropic"}), 400),
    ] {
        assert_eq!(desk.post("providers", body).await.0, want);
    }
    assert_eq!(
        desk.post("settings", json!({"mode": "sideways"})).await.0,
        400
    );
    assert_eq!(desk.post("settings", json!({"colour": "red"})).await.0, 400);
    assert_eq!(
        desk.post("settings", json!({"mode": "connected"})).await.0,
        400,
        "connected mode needs a central URL"
    );

    // A provider key goes to the keychain and the engine uses it.
    let (status, state) = desk
        .post(
            "providers",
            json!({"kind": "anthropic", "api_key": OPERATOR_KEY}),
        )
        .await;
    assert_eq!(status, 200, "{state}");
    assert_eq!(state["providers"][0]["key_stored"], true);
    let r = infer(sonnet(64)).await.unwrap();
    assert_eq!(r.status(), 200);
    let seen = fake.requests();
    let key = seen
        .last()
        .unwrap()
        .headers
        .iter()
        .find(|(k, _)| k == "x-api-key")
        .map(|(_, v)| v.clone());
    assert_eq!(key.as_deref(), Some(OPERATOR_KEY));

    // A personal daily budget of one cent: the worst case of a 4096-token answer does not fit.
    let (status, state) = desk
        .post("settings", json!({"budgets": {"daily_cents": 1}}))
        .await;
    assert_eq!(status, 200, "{state}");
    let before = fake.requests().len();
    let r = infer(sonnet(4096)).await.unwrap();
    assert_eq!(r.status(), 429);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["type"], "billing_error");
    assert_eq!(
        fake.requests().len(),
        before,
        "a refused request never leaves"
    );
    wait_for("the spend-block notification", || {
        parts
            .notes
            .taken()
            .iter()
            .any(|n| n.starts_with("Spend limit reached"))
    })
    .await;

    // Pause refuses inference locally; resume restores it. The window's live event stream
    // hears of the change (`app.state`).
    let mut live = desk
        .http
        .get(format!("{}/gatehouse/api/events", app.base_url()))
        .send()
        .await
        .unwrap();
    let (_, state) = desk.post("pause", json!({"paused": true})).await;
    let heard = tokio::time::timeout(Duration::from_secs(10), async {
        let mut seen = String::new();
        while let Ok(Some(chunk)) = live.chunk().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("\"app.state\"") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(heard, Ok(true), "app.state reaches the live stream");
    drop(live);
    assert_eq!(state["paused"], true);
    assert_eq!(infer(sonnet(16)).await.unwrap().status(), 503);
    assert!(app.status_line().await.contains("paused"));
    desk.post("pause", json!({"paused": false})).await;
    desk.post("settings", json!({"budgets": {}})).await;
    assert_eq!(infer(sonnet(16)).await.unwrap().status(), 200);

    // Start at login writes (and removes) the XDG autostart entry; a bad port is refused.
    let (status, state) = desk.post("settings", json!({"start_at_login": true})).await;
    assert_eq!(
        (status, &state["start_at_login"]),
        (200, &json!(true)),
        "{state}"
    );
    let entry = dir.path().join("home/.config/autostart/gatehouse.desktop");
    let text = std::fs::read_to_string(&entry).unwrap();
    assert!(
        text.contains("Exec=\"/usr/local/bin/gatehouse\" tray"),
        "{text}"
    );
    desk.post("settings", json!({"start_at_login": false}))
        .await;
    assert!(!entry.exists());
    assert_eq!(desk.post("settings", json!({"port": 80})).await.0, 400);
    let (_, state) = desk.post("settings", json!({"port": 9911})).await;
    assert_eq!(state["port"], 9911);

    // Claude Code: configured by merging, then undone.
    let settings = dir.path().join("home/.claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(
        &settings,
        r#"{"statusLine": {"type": "command", "command": "~/bin/status"}, "env": {"FOO": "1"}}"#,
    )
    .unwrap();
    let (status, state) = desk
        .post("claude-code", json!({"action": "configure"}))
        .await;
    assert_eq!(status, 200, "{state}");
    assert_eq!(state["claude_code"]["status"], "configured");
    let written: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    assert_eq!(written["env"]["ANTHROPIC_BASE_URL"], app.base_url());
    assert_eq!(written["env"]["FOO"], "1");
    assert_eq!(written["statusLine"]["command"], "~/bin/status");
    let (_, state) = desk.post("claude-code", json!({"action": "undo"})).await;
    assert_eq!(state["claude_code"]["status"], "not_configured");

    app.shutdown().await;

    // No secret outside the keychain: not in the data dir, not in any event.
    let secrets = parts.keychain.values();
    assert!(secrets.iter().any(|s| s == OPERATOR_KEY));
    let mut files = vec![];
    for e in std::fs::read_dir(dir.path().join("data")).unwrap() {
        files.push(std::fs::read(e.unwrap().path()).unwrap());
    }
    files.push(std::fs::read(&settings).unwrap());
    let events = serde_json::to_string(&parts.events.events()).unwrap();
    for s in &secrets {
        for f in &files {
            assert!(
                !f.windows(s.len()).any(|w| w == s.as_bytes()),
                "a secret reached a file"
            );
        }
        assert!(!events.contains(s.as_str()), "a secret reached an event");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_keychain_nothing_is_stored_and_a_bad_bootstrap_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let bootstrap = dir.path().join("bootstrap.json");
    let env = MapEnvironment::default()
        .with_var("GATEHOUSE_BOOTSTRAP_FILE", bootstrap.to_str().unwrap())
        .with_file(
            bootstrap.to_str().unwrap(),
            r#"{"central_url": "ftp://nope", "force_connected": true}"#,
        );
    let (mut deps, parts) = desktop_deps(dir.path(), env);
    deps.keychain = Err("no Secret Service on the session bus".into());
    let app = App::start(deps).await.unwrap();
    let desk = Desk::new(&app);
    let (_, state) = desk.call(reqwest::Method::GET, "state", None).await;
    assert_eq!(state["keychain"]["available"], false);
    assert!(
        state["keychain"]["error"]
            .as_str()
            .unwrap()
            .contains("Secret Service")
    );
    // The malformed bootstrap is shown (file and field), logged as an event, and nothing
    // it would have locked is locked.
    let err = state["bootstrap"]["error"].as_str().unwrap();
    assert!(err.contains("bootstrap.json"), "{err}");
    assert_eq!(state["locks"]["mode"], false);
    assert_eq!(parts.events.named("desktop.bootstrap_invalid").len(), 1);
    // A key cannot be stored anywhere: 503 with the reason, and not in the data dir.
    let (status, body) = desk
        .post(
            "providers",
            json!({"kind": "anthropic", "api_key": "sk-ant-never-stored-0123"}),
        )
        .await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["type"], "keychain_unavailable");
    app.shutdown().await;
    for e in std::fs::read_dir(dir.path().join("data")).unwrap() {
        let bytes = std::fs::read(e.unwrap().path()).unwrap();
        assert!(!bytes.windows(10).any(|w| w == b"sk-ant-nev"));
    }
}

/// Waits (bounded) until `n` providers are in use by the running engine.
async fn active_providers(desk: &Desk, n: usize) {
    for _ in 0..100 {
        // The listener is briefly closed while the engine restarts.
        let sent = desk
            .http
            .get(format!("{}/gatehouse/app/state", desk.app.base_url()))
            .header("x-gatehouse-app-token", &desk.token)
            .send()
            .await;
        let Ok(resp) = sent else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let status = resp.status().as_u16();
        let state: Value = resp.json().await.unwrap_or(Value::Null);
        let active = state["providers"]
            .as_array()
            .map_or(0, |ps| ps.iter().filter(|p| p["active"] == true).count());
        if status == 200 && active == n && state["providers"].as_array().map_or(0, Vec::len) == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the engine did not come up with {n} providers");
}

/// Cloud providers from the app: Bedrock with AWS keys and Vertex with a service-account
/// token kept in the keychain, the engine restarted with them, requests reaching each
/// provider's face of the fake, the Test button's real request and its result in the state,
/// and no secret outside the keychain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloud_providers_are_added_tested_and_used() {
    let (fake, dir, parts, app) = standalone_app().await;
    let desk = Desk::new(&app);
    const AWS_SECRET: &str = "desk-aws-secret-0123456789abcdef";
    const VERTEX_TOKEN: &str = "ya29.desk-vertex-token-0123456789";

    // The server's own rules refuse a bad region, resource or missing credential.
    for body in [
        json!({"kind": "bedrock", "region": "us east", "aws_access_key_id": "AKID", "aws_secret_access_key": "x"}),
        json!({"kind": "bedrock", "region": "us-east-1"}),
        json!({"kind": "foundry", "resource": "-bad-", "api_key": "abcdefghijk"}),
        json!({"kind": "vertex", "region": "us-east5", "project_id": "p", "service_account_json": "{\"type\":\"user\"}"}),
    ] {
        let (status, v) = desk.post("providers", body.clone()).await;
        assert_eq!(status, 400, "{body} -> {v}");
    }

    let fake_url = fake.url();
    let (status, state) = desk
        .post(
            "providers",
            json!({"kind": "bedrock", "region": "us-west-2", "base_url": fake_url,
            "aws_access_key_id": "AKIDDESK0001", "aws_secret_access_key": AWS_SECRET}),
        )
        .await;
    assert_eq!(status, 200, "{state}");
    active_providers(&desk, 1).await;
    let (status, state) = desk
        .post(
            "providers",
            json!({"kind": "vertex", "region": "us-east5", "project_id": "proj-d",
            "base_url": format!("{fake_url}/v1"), "access_token": VERTEX_TOKEN}),
        )
        .await;
    assert_eq!(status, 200, "{state}");
    let kinds: Vec<&str> = state["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["bedrock", "vertex"]);
    // The engine restarts with them after the answer; the state says when they are in use.
    active_providers(&desk, 2).await;

    // Test buttons: one real minimal request each, the result kept for the view.
    for name in ["bedrock", "vertex"] {
        let (status, state) = desk
            .post(&format!("providers/{name}/test"), json!({}))
            .await;
        assert_eq!(status, 200, "{state}");
        let p = state["providers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap()
            .clone();
        assert_eq!(p["last_test"]["ok"], true, "{p}");
        assert_eq!(p["last_test"]["status"], 200);
    }
    let paths: Vec<String> = fake.requests().iter().map(|r| r.path.clone()).collect();
    assert!(
        paths
            .iter()
            .any(|p| p == "/model/us.anthropic.claude-haiku-4-5-20251001-v1%3A0/invoke"),
        "{paths:?}"
    );
    assert!(
        paths
            .iter()
            .any(|p| p.ends_with("/models/claude-haiku-4-5@20251001:rawPredict")),
        "{paths:?}"
    );

    // Claude Code's requests (the local token) go to Bedrock: no Anthropic key is stored.
    let local = parts
        .keychain
        .get("gatehouse", "local-token")
        .unwrap()
        .unwrap();
    let before = fake.requests().len();
    let r = desk
        .http
        .post(format!("{}/v1/messages", app.base_url()))
        .bearer_auth(local.expose())
        .json(&sonnet(64))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-gatehouse-upstream"], "bedrock");
    let req = fake.requests()[before].clone();
    assert_eq!(req.path, "/model/us.anthropic.claude-sonnet-4-6/invoke");
    let auth = req
        .headers
        .iter()
        .find(|(k, _)| k == "authorization")
        .map(|(_, v)| v.clone())
        .unwrap();
    assert!(
        auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDDESK0001/"),
        "{auth}"
    );

    // Removing Bedrock leaves Vertex.
    let (status, _) = desk
        .call(reqwest::Method::DELETE, "providers/bedrock", None)
        .await;
    assert_eq!(status, 200);
    active_providers(&desk, 1).await;
    let r = desk
        .http
        .post(format!("{}/v1/messages", app.base_url()))
        .bearer_auth(local.expose())
        .json(&sonnet(64))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-gatehouse-upstream"], "vertex");
    app.shutdown().await;

    let secrets = parts.keychain.values();
    assert!(secrets.iter().any(|s| s.contains(VERTEX_TOKEN)));
    assert!(
        !secrets.iter().any(|s| s.contains(AWS_SECRET)),
        "a removed provider's key is deleted"
    );
    let events = serde_json::to_string(&parts.events.events()).unwrap();
    for e in std::fs::read_dir(dir.path().join("data")).unwrap() {
        let bytes = std::fs::read(e.unwrap().path()).unwrap();
        for s in [VERTEX_TOKEN, AWS_SECRET] {
            assert!(
                !bytes.windows(s.len()).any(|w| w == s.as_bytes()),
                "a secret reached a file"
            );
            assert!(!events.contains(s));
        }
    }
}

/// The Settings tab in headless Chromium: a Bedrock provider added through the form, its
/// secret in the keychain and nowhere in the page afterwards, and the Test button's result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cloud_provider_is_added_and_tested_in_the_settings_tab() {
    let (fake, _dir, parts, app) = standalone_app().await;
    const SECRET: &str = "ui-aws-secret-0123456789abcdef01";
    let fake_url = fake.url();
    let v = run_page_script(
        "cloud_provider.mjs",
        &app.dashboard_url(),
        &[
            ("REGION", "us-east-1"),
            ("KEY_ID", "AKIDUI000001"),
            ("SECRET", SECRET),
            ("ENDPOINT", &fake_url),
        ],
    )
    .await;
    assert!(
        v["test_result"]
            .as_str()
            .unwrap()
            .starts_with("works (200)"),
        "{v}"
    );
    assert_eq!(v["key_field_after"], "", "the page keeps no secret");
    assert_eq!(v["console_errors"], json!([]), "{v}");
    assert!(parts.keychain.values().iter().any(|s| s.contains(SECRET)));
    let auth = fake
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/model/"))
        .filter_map(|r| {
            r.headers
                .iter()
                .find(|(k, _)| k == "authorization")
                .map(|(_, v)| v.clone())
        })
        .next()
        .unwrap();
    assert!(
        auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDUI000001/"),
        "{auth}"
    );
    app.shutdown().await;
}

/// An upgrade keeps the tray's keychain entries and settings: the app's data written under
/// the previous release's schema (its last migration undone, as the earlier binary left
/// it) is opened by this one, which migrates it and finds the same local token, provider
/// key, budgets and mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_keeps_the_keychain_entries_and_the_settings() {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = standalone_env(&fake, dir.path());
    let (deps, parts) = desktop_deps(dir.path(), env.clone());
    let app = App::start(deps).await.unwrap();
    let desk = Desk::new(&app);
    let (status, _) = desk
        .post(
            "providers",
            json!({"kind": "anthropic", "api_key": OPERATOR_KEY}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, _) = desk
        .post("settings", json!({"budgets": {"daily_cents": 500}}))
        .await;
    assert_eq!(status, 200);
    let (_, before) = desk.call(reqwest::Method::GET, "state", None).await;
    let token = parts
        .keychain
        .get("gatehouse", "local-token")
        .unwrap()
        .unwrap();
    app.shutdown().await;

    // The database as the previous release left it: its newest migration not yet applied.
    let db = dir.path().join("data").join("gatehouse.db");
    let latest = gatehouse_engine::store::migrations::SQLITE.len() as i64;
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch(
            "DROP TABLE limit_buckets; DROP TABLE limit_slots;
             DELETE FROM _migrations WHERE version = 4;",
        )
        .unwrap();
    }

    // The new binary starts on the same data dir and keychain.
    let (mut deps, parts2) = desktop_deps(dir.path(), env);
    deps.keychain = Ok(parts.keychain.clone());
    deps.events = parts2.events.clone();
    let app = App::start(deps).await.unwrap();
    let desk = Desk::new(&app);
    let (_, after) = desk.call(reqwest::Method::GET, "state", None).await;
    assert_eq!(after["budgets"], before["budgets"]);
    assert_eq!(after["budgets"]["daily_cents"], 500, "{after}");
    assert_eq!(after["mode"], before["mode"]);
    assert_eq!(after["primary"], before["primary"]);
    assert_eq!(after["providers"][0]["key_stored"], true, "{after}");
    let same = parts
        .keychain
        .get("gatehouse", "local-token")
        .unwrap()
        .unwrap();
    assert_eq!(same.expose(), token.expose(), "the local token is kept");
    let version: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT MAX(version) FROM _migrations", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, latest, "migrated to this release's schema");
    // Claude Code's token still works, and the kept provider key reaches the upstream.
    let r = desk
        .http
        .post(format!("{}/v1/messages", app.base_url()))
        .bearer_auth(same.expose())
        .json(&sonnet(64))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let key = fake
        .requests()
        .last()
        .unwrap()
        .headers
        .iter()
        .find(|(k, _)| k == "x-api-key")
        .map(|(_, v)| v.clone());
    assert_eq!(key.as_deref(), Some(OPERATOR_KEY));
    app.shutdown().await;
}

/// Foundry with Microsoft Entra ID from the app: no key is asked for or stored (the
/// engine's Azure credential comes from the environment), and a key beside it is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foundry_with_entra_id_is_added_without_a_stored_key() {
    let (fake, _dir, parts, app) = standalone_app().await;
    let desk = Desk::new(&app);
    let base = format!("{}/anthropic", fake.url());
    let (status, v) = desk
        .post(
            "providers",
            json!({"kind": "foundry", "resource": "corp-ai", "base_url": base,
                   "api_key": "abcdefghijk", "use_azure_ad": true}),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    let (status, state) = desk
        .post(
            "providers",
            json!({"kind": "foundry", "resource": "corp-ai", "base_url": base, "use_azure_ad": true}),
        )
        .await;
    assert_eq!(status, 200, "{state}");
    active_providers(&desk, 1).await;
    assert!(
        parts
            .keychain
            .get("gatehouse", "provider:foundry")
            .unwrap()
            .is_none()
    );
}

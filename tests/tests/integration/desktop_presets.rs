//! Provider presets in the desktop app: a DeepSeek-style Anthropic-compatible provider
//! added in one step (its base URL pointed at the fake), its key in the keychain only,
//! Claude Code's model ids mapped to the provider's, `/v1/models` still listing Claude ids,
//! the Test button's real request, and "Use first" changing the order without touching
//! Claude Code's settings.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use fake_upstream::{FakeConfig, FakeUpstream};
use gatehouse_desktop::app::App;
use gatehouse_engine::deps::{CredentialStore, MapEnvironment};
use gatehouse_tests::desktop::{Desk, desktop_deps, run_page_script};
use serde_json::{Value, json};

const KEY: &str = "sk-deepseek-preset-key-0123456789abcdef";

/// The app state, `None` while the engine restarts (its listener is briefly closed).
async fn state(desk: &Desk) -> Option<Value> {
    let url = format!("{}/gatehouse/app/state", desk.app.base_url());
    let r = desk
        .http
        .get(url)
        .header("x-gatehouse-app-token", &desk.token)
        .send()
        .await
        .ok()?;
    (r.status() == 200).then_some(())?;
    r.json().await.ok()
}

/// Waits (bounded) until the restarted engine routes to `names`, in that order.
async fn routes_to(desk: &Desk, names: &[&str]) {
    for _ in 0..100 {
        if let Some(state) = state(desk).await
            && state["routing"] == json!(names)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the engine did not come up routing to {names:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preset_is_added_mapped_tested_and_made_primary() {
    let anthropic = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let deepseek = FakeUpstream::start(FakeConfig {
        reply_text: "from deepseek".into(),
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = MapEnvironment::default()
        .with_var("GATEHOUSE_ANTHROPIC_BASE_URL", &anthropic.url())
        .with_var("ANTHROPIC_API_KEY", "sk-ant-from-the-environment-0123")
        .with_var(
            "GATEHOUSE_BOOTSTRAP_FILE",
            dir.path().join("no-bootstrap.json").to_str().unwrap(),
        );
    let (deps, parts) = desktop_deps(dir.path(), env);
    let app = App::start(deps).await.unwrap();
    let token = app
        .dashboard_url()
        .split("#token=")
        .nth(1)
        .unwrap()
        .to_owned();
    let desk = Desk {
        app: app.clone(),
        token,
        http: reqwest::Client::new(),
    };
    let state = state(&desk).await.unwrap();
    let ids: Vec<&str> = state["presets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    for id in [
        "deepseek",
        "kimi",
        "glm",
        "qwen",
        "openrouter",
        "ollama",
        "lmstudio",
    ] {
        assert!(ids.contains(&id), "{ids:?}");
    }

    // A key is required, a model map must name real ids, the URL must be a URL.
    for body in [
        json!({"kind": "preset", "preset": "deepseek"}),
        json!({"kind": "preset", "preset": "deepseek", "api_key": KEY, "base_url": "not a url"}),
        json!({"kind": "preset", "preset": "nope", "api_key": KEY}),
        json!({"kind": "preset", "preset": "deepseek", "api_key": KEY, "models": {"sonnet": "deep seek"}}),
    ] {
        let (status, v) = desk.post("providers", body.clone()).await;
        assert_eq!(status, 400, "{body} -> {v}");
    }
    let (status, v) = desk
        .post(
            "providers",
            json!({"kind": "preset", "preset": "deepseek", "api_key": KEY,
                   "base_url": deepseek.url(), "models": {"opus": "deepseek-reasoner"}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    routes_to(&desk, &["anthropic", "deepseek"]).await;

    // The Test button: one real request, the haiku-tier model, the key as a bearer token.
    let (status, v) = desk.post("providers/deepseek/test", json!({})).await;
    assert_eq!(status, 200, "{v}");
    let p = v["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "deepseek")
        .unwrap()
        .clone();
    assert_eq!(p["last_test"]["ok"], true, "{p}");
    assert_eq!(p["key_stored"], true);
    assert_eq!(p["model_map"]["sonnet"], "deepseek-chat");
    let tested = deepseek.requests().last().unwrap().clone();
    assert_eq!(tested.body["model"], "deepseek-chat");
    assert!(
        tested
            .headers
            .iter()
            .any(|(k, v)| k == "authorization" && *v == format!("Bearer {KEY}"))
    );

    // "Use first": Claude Code's requests now go to DeepSeek, with its model ids.
    let (status, _) = desk.post("providers/deepseek/primary", json!({})).await;
    assert_eq!(status, 200);
    routes_to(&desk, &["deepseek", "anthropic"]).await;
    let local = parts
        .keychain
        .get("gatehouse", "local-token")
        .unwrap()
        .unwrap();
    let base = app.base_url();
    for (asked, sent) in [
        ("claude-sonnet-4-6", "deepseek-chat"),
        ("claude-opus-4-8", "deepseek-reasoner"),
    ] {
        let r = desk
            .http
            .post(format!("{base}/v1/messages"))
            .bearer_auth(local.expose())
            .json(&json!({"model": asked, "max_tokens": 16,
                          "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["x-gatehouse-upstream"], "deepseek");
        assert!(r.text().await.unwrap().contains("from deepseek"));
        assert_eq!(deepseek.requests().last().unwrap().body["model"], sent);
    }
    // Claude Code still sees Claude ids.
    let models: Value = desk
        .http
        .get(format!("{base}/v1/models"))
        .bearer_auth(local.expose())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let listed: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(
        listed.iter().all(|id| id.starts_with("claude-")),
        "{listed:?}"
    );
    assert!(
        anthropic.requests().is_empty(),
        "nothing reached the other provider"
    );
    // Claude Code's settings were never written.
    assert!(!dir.path().join("home/.claude/settings.json").exists());
    app.shutdown().await;

    // The key is in the keychain and in no file, event or page.
    assert!(parts.keychain.values().iter().any(|s| s == KEY));
    let events = serde_json::to_string(&parts.events.events()).unwrap();
    assert!(!events.contains(KEY));
    assert!(!v.to_string().contains(KEY));
    for e in std::fs::read_dir(dir.path().join("data")).unwrap() {
        let bytes = std::fs::read(e.unwrap().path()).unwrap();
        assert!(!bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()));
    }
}

/// Set in the throwaway Secret Service session the outer test starts.
const IN_SESSION: &str = "GATEHOUSE_TEST_KEYRING_SESSION";

/// The Settings tab in headless Chromium with the real Secret Service: a person picks the
/// DeepSeek preset, pastes a key and adds it; the key is then in gnome-keyring (looked up
/// with libsecret's `secret-tool`) and in no file, page or event. A test cannot move
/// itself onto a new session bus, so this one runs [`preset_in_the_secret_service`] again
/// inside `dbus-run-session` with an unlocked gnome-keyring.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preset_is_set_up_in_the_settings_tab_with_the_key_in_the_secret_service() {
    for tool in ["dbus-run-session", "gnome-keyring-daemon", "secret-tool"] {
        let found = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(found, "{tool} is missing: run scripts/setup.sh");
    }
    let home = tempfile::tempdir().unwrap();
    let runtime = home.path().join("run");
    std::fs::create_dir_all(&runtime).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let script = r#"eval "$(printf throwaway | gnome-keyring-daemon --unlock --components=secrets)"
exec "$0" --exact desktop_presets::preset_in_the_secret_service --ignored --nocapture"#;
    let run = tokio::process::Command::new("timeout")
        .args(["150", "dbus-run-session", "--", "bash", "-c", script])
        .arg(std::env::current_exe().unwrap())
        .env(IN_SESSION, home.path())
        .env("HOME", home.path())
        .env("XDG_DATA_HOME", home.path().join(".local/share"))
        .env("XDG_CONFIG_HOME", home.path().join(".config"))
        .env("XDG_RUNTIME_DIR", &runtime)
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let out = String::from_utf8_lossy(&run.stdout);
    let err = String::from_utf8_lossy(&run.stderr);
    if let Some(line) = err.lines().find(|l| l.starts_with("preset set up in")) {
        eprintln!("{line}");
    }
    assert!(
        run.status.success() && out.contains("1 passed"),
        "{out}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

/// Run only by the test above, inside its session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "runs inside the Secret Service session of the test above"]
async fn preset_in_the_secret_service() {
    let root =
        std::path::PathBuf::from(std::env::var(IN_SESSION).expect("started by the outer test"));
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let env = MapEnvironment::default()
        .with_var("GATEHOUSE_ANTHROPIC_BASE_URL", &fake.url())
        .with_var(
            "GATEHOUSE_BOOTSTRAP_FILE",
            root.join("no-bootstrap.json").to_str().unwrap(),
        );
    let (mut deps, parts) = desktop_deps(&root, env);
    let keyring = gatehouse_desktop::keychain::KeyringStore::native().unwrap();
    keyring.probe().unwrap();
    deps.keychain = Ok(std::sync::Arc::new(keyring));
    let app = App::start(deps).await.unwrap();
    let endpoint = fake.url();
    let v = run_page_script(
        "preset_provider.mjs",
        &app.dashboard_url(),
        &[
            ("PRESET", "deepseek"),
            ("KEY", KEY),
            ("ENDPOINT", &endpoint),
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
    assert_eq!(v["key_field_after"], "", "the form keeps no key");
    assert_eq!(v["key_in_page"], false);
    assert!(
        v["model_map"]
            .as_str()
            .unwrap()
            .contains("sonnet → deepseek-chat"),
        "{v}"
    );
    assert_eq!(v["console_errors"], json!([]));
    eprintln!("preset set up in {} s of page time", v["seconds"]);
    // The Test request carried the key as a bearer token.
    assert!(fake.requests().iter().any(|r| {
        r.headers
            .iter()
            .any(|(k, val)| k == "authorization" && *val == format!("Bearer {KEY}"))
    }));
    app.shutdown().await;

    // In the Secret Service, under the provider's account; nowhere else.
    let found = std::process::Command::new("secret-tool")
        .args([
            "lookup",
            "service",
            "gatehouse",
            "username",
            "provider:deepseek",
        ])
        .output()
        .unwrap();
    let stored = String::from_utf8_lossy(&found.stdout);
    assert_eq!(stored.trim(), KEY, "the key is in the Secret Service");
    let events = serde_json::to_string(&parts.events.events()).unwrap();
    assert!(!events.contains(KEY));
    let mut dirs = vec![root.join("data"), root.join("home")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries {
            let path = e.unwrap().path();
            if path.is_dir() {
                // gnome-keyring's own (encrypted) keyring file is the one allowed place.
                if !path.ends_with("keyrings") {
                    dirs.push(path);
                }
            } else {
                let bytes = std::fs::read(&path).unwrap();
                assert!(
                    !bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
                    "the key reached {}",
                    path.display()
                );
            }
        }
    }
}

/// An OpenAI-compatible preset (a local server, no key): Claude Code's requests are
/// translated to Chat Completions with the mapped model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_compatible_preset_serves_claude_codes_requests() {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = MapEnvironment::default()
        .with_var("GATEHOUSE_ANTHROPIC_BASE_URL", &fake.url())
        .with_var(
            "GATEHOUSE_BOOTSTRAP_FILE",
            dir.path().join("no-bootstrap.json").to_str().unwrap(),
        );
    let (deps, parts) = desktop_deps(dir.path(), env);
    let app = App::start(deps).await.unwrap();
    let token = app
        .dashboard_url()
        .split("#token=")
        .nth(1)
        .unwrap()
        .to_owned();
    let desk = Desk {
        app: app.clone(),
        token,
        http: reqwest::Client::new(),
    };
    // A local server's model must be named.
    let (status, _) = desk
        .post(
            "providers",
            json!({"kind": "preset", "preset": "ollama", "base_url": format!("{}/v1", fake.url())}),
        )
        .await;
    assert_eq!(status, 400);
    let (status, v) = desk
        .post(
            "providers",
            json!({"kind": "preset", "preset": "ollama", "base_url": format!("{}/v1", fake.url()),
                   "models": {"*": "qwen3-coder:30b"}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    routes_to(&desk, &["anthropic", "ollama"]).await;
    let (status, _) = desk.post("providers/ollama/primary", json!({})).await;
    assert_eq!(status, 200);
    routes_to(&desk, &["ollama", "anthropic"]).await;
    let local = parts
        .keychain
        .get("gatehouse", "local-token")
        .unwrap()
        .unwrap();
    let r = desk
        .http
        .post(format!("{}/v1/messages", app.base_url()))
        .bearer_auth(local.expose())
        .json(&json!({"model": "claude-sonnet-4-6", "max_tokens": 16,
                      "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-gatehouse-upstream"], "ollama");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["type"], "message", "an Anthropic message back: {v}");
    let sent = fake.requests().last().unwrap().clone();
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.body["model"], "qwen3-coder:30b");
    assert!(
        sent.headers.iter().all(|(k, _)| k != "authorization"),
        "no key for a local server"
    );
    app.shutdown().await;
}

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
use gatehouse_tests::desktop::desktop_deps;
use serde_json::{Value, json};

const KEY: &str = "sk-deepseek-preset-key-0123456789abcdef";

struct Desk {
    app: App,
    token: String,
    http: reqwest::Client,
}

impl Desk {
    async fn call(&self, method: reqwest::Method, path: &str, body: Value) -> (u16, Value) {
        let url = format!("{}/gatehouse/app/{path}", self.app.base_url());
        let r = self
            .http
            .request(method, url)
            .header("x-gatehouse-app-token", &self.token)
            .json(&body)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    async fn state(&self) -> Option<Value> {
        let url = format!("{}/gatehouse/app/state", self.app.base_url());
        let r = self
            .http
            .get(url)
            .header("x-gatehouse-app-token", &self.token)
            .send()
            .await
            .ok()?;
        (r.status() == 200).then_some(())?;
        r.json().await.ok()
    }

    /// Waits (bounded) until the restarted engine routes to `names`, in that order.
    async fn routes_to(&self, names: &[&str]) {
        for _ in 0..100 {
            if let Some(state) = self.state().await
                && state["routing"] == json!(names)
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the engine did not come up routing to {names:?}");
    }
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
    let token = app.dashboard_url().split("#token=").nth(1).unwrap().to_owned();
    let desk = Desk {
        app: app.clone(),
        token,
        http: reqwest::Client::new(),
    };
    let state = desk.state().await.unwrap();
    let ids: Vec<&str> = state["presets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    for id in ["deepseek", "kimi", "glm", "qwen", "openrouter", "ollama", "lmstudio"] {
        assert!(ids.contains(&id), "{ids:?}");
    }

    // A key is required, a model map must name real ids, the URL must be a URL.
    for body in [
        json!({"kind": "preset", "preset": "deepseek"}),
        json!({"kind": "preset", "preset": "deepseek", "api_key": KEY, "base_url": "not a url"}),
        json!({"kind": "preset", "preset": "nope", "api_key": KEY}),
        json!({"kind": "preset", "preset": "deepseek", "api_key": KEY, "models": {"sonnet": "deep seek"}}),
    ] {
        let (status, v) = desk.call(reqwest::Method::POST, "providers", body.clone()).await;
        assert_eq!(status, 400, "{body} -> {v}");
    }
    let (status, v) = desk
        .call(
            reqwest::Method::POST,
            "providers",
            json!({"kind": "preset", "preset": "deepseek", "api_key": KEY,
                   "base_url": deepseek.url(), "models": {"opus": "deepseek-reasoner"}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    desk.routes_to(&["anthropic", "deepseek"]).await;

    // The Test button: one real request, the haiku-tier model, the key as a bearer token.
    let (status, v) = desk
        .call(reqwest::Method::POST, "providers/deepseek/test", json!({}))
        .await;
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
    let (status, _) = desk
        .call(reqwest::Method::POST, "providers/deepseek/primary", json!({}))
        .await;
    assert_eq!(status, 200);
    desk.routes_to(&["deepseek", "anthropic"]).await;
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
    assert!(listed.iter().all(|id| id.starts_with("claude-")), "{listed:?}");
    assert!(anthropic.requests().is_empty(), "nothing reached the other provider");
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

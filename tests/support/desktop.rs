//! Support for the desktop app service tests: an in-memory keychain, and a notifier and a
//! browser opener that record what they were asked to do.

use std::path::Path;
use std::sync::{Arc, Mutex};

use gatehouse_desktop::app::{AppDeps, Opener};
use gatehouse_desktop::notifier::Notifier;
use gatehouse_engine::deps::MapEnvironment;
use gatehouse_engine::events::MemoryEventSink;

/// A keychain in memory (the real Secret Service is tested through the binary).
pub type MemoryKeychain = gatehouse_engine::deps::MemoryCredentials;

#[derive(Default)]
pub struct Recorder(pub Mutex<Vec<String>>);

impl Recorder {
    pub fn taken(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl Notifier for Recorder {
    fn show(&self, title: &str, body: &str) -> Result<(), String> {
        self.0.lock().unwrap().push(format!("{title}: {body}"));
        Ok(())
    }
}

impl Opener for Recorder {
    fn open(&self, url: &str) -> Result<(), String> {
        self.0.lock().unwrap().push(url.to_owned());
        Ok(())
    }
}

pub struct DesktopParts {
    pub keychain: Arc<MemoryKeychain>,
    pub events: Arc<MemoryEventSink>,
    pub notes: Arc<Recorder>,
    pub opened: Arc<Recorder>,
}

/// Deps for an in-process desktop app on port 0 with everything under `dir`.
pub fn desktop_deps(dir: &Path, env: MapEnvironment) -> (AppDeps, DesktopParts) {
    let parts = DesktopParts {
        keychain: Arc::new(MemoryKeychain::default()),
        events: Arc::new(MemoryEventSink::default()),
        notes: Arc::new(Recorder::default()),
        opened: Arc::new(Recorder::default()),
    };
    let deps = AppDeps {
        clock: Arc::new(gatehouse_engine::deps::SystemClock),
        data_dir: dir.join("data"),
        env: Arc::new(env),
        keychain: Ok(parts.keychain.clone()),
        events: parts.events.clone(),
        notifier: parts.notes.clone(),
        opener: parts.opened.clone(),
        home: dir.join("home"),
        gatehouse_exe: "/usr/local/bin/gatehouse".into(),
        port: Some(0),
    };
    (deps, parts)
}

/// The desktop app's API as its window calls it: `/gatehouse/app/*` with the per-launch
/// token from the window's URL.
pub struct Desk {
    pub app: gatehouse_desktop::app::App,
    pub token: String,
    pub http: reqwest::Client,
}

impl Desk {
    pub fn new(app: &gatehouse_desktop::app::App) -> Self {
        let url = app.dashboard_url();
        let token = url.split("#token=").nth(1).unwrap_or_default().to_owned();
        Self {
            app: app.clone(),
            token,
            http: reqwest::Client::new(),
        }
    }

    /// Status and JSON body (`Null` when there is none) of one app API call.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let url = format!("{}/gatehouse/app/{path}", self.app.base_url());
        let mut r = self
            .http
            .request(method, url)
            .header("x-gatehouse-app-token", &self.token);
        if let Some(b) = body {
            r = r.json(&b);
        }
        let r = r.send().await.expect("the app API answers");
        (
            r.status().as_u16(),
            r.json().await.unwrap_or(serde_json::Value::Null),
        )
    }

    pub async fn post(&self, path: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }
}

/// Runs a page script of `tests/e2e` (Chromium through playwright-core) against the app
/// window at `app_url`, with screenshots in `target/screenshots`, and returns the one
/// JSON line it prints; a failing script fails the test with its output.
pub async fn run_page_script(
    script: &str,
    app_url: &str,
    env: &[(&str, &str)],
) -> serde_json::Value {
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/screenshots");
    std::fs::create_dir_all(&shots).expect("a screenshot directory");
    let shots = shots.to_string_lossy().into_owned();
    let mut all = vec![
        ("APP_URL", app_url),
        ("SCREENSHOT_DIR", shots.as_str()),
        ("TIMEOUT_SECS", "60"),
    ];
    all.extend_from_slice(env);
    crate::node_json(script, &[], &all).await
}

//! Shared test support: start a real gateway in-process on port 0 in front of the in-repo
//! fake upstream, with its own temporary SQLite file and an in-memory event sink. Tests
//! run in parallel; nothing touches process-wide state (environment comes from a map).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use fake_upstream::{FakeConfig, FakeUpstream};
use gatehouse_engine::Handle;
use gatehouse_engine::config::{Config, LoadContext};
use gatehouse_engine::deps::{Deps, MapEnvironment, NoCredentialStore, SystemClock};
use gatehouse_engine::events::MemoryEventSink;
use gatehouse_engine::store::UsageRecord;

/// The key callers present in tests.
pub const CLIENT_KEY: &str = "test-client-key-0123456789abcdef0123456789";
/// The operator's upstream key the fake must see.
pub const OPERATOR_KEY: &str = "sk-operator-test-key-do-not-leak";

pub struct TestGateway {
    pub handle: Handle,
    pub fake: FakeUpstream,
    pub events: Arc<MemoryEventSink>,
    pub dir: tempfile::TempDir,
    pub client: reqwest::Client,
}

/// Base config: one upstream named `primary` pointing at `fake`, one client key.
pub fn base_yaml(fake_url: &str, db: &Path) -> String {
    format!(
        r#"
listen: {{host: 127.0.0.1, port: 0}}
store: {{sqlite_path: "{db}"}}
upstreams:
  - name: primary
    provider: anthropic
    base_url: "{fake_url}"
    auth: {{api_key: "{OPERATOR_KEY}"}}
client_keys:
  - {{id: tester, key: "{CLIENT_KEY}"}}
"#,
        db = db.display()
    )
}

pub fn load(yaml: &str, dir: &Path) -> Config {
    let env = MapEnvironment::default();
    Config::from_yaml(
        yaml,
        &LoadContext {
            env: &env,
            credentials: &NoCredentialStore,
            default_data_dir: dir.to_owned(),
        },
    )
    .unwrap_or_else(|e| panic!("config should load: {e}\n{yaml}"))
}

impl TestGateway {
    /// Gateway with the base config.
    pub async fn start() -> Self {
        Self::start_with(FakeConfig::default(), base_yaml).await
    }

    /// Gateway whose YAML is built from the fake's URL and a database path.
    pub async fn start_with(
        fake_config: FakeConfig,
        yaml: impl FnOnce(&str, &Path) -> String,
    ) -> Self {
        let fake = FakeUpstream::start(fake_config).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("gatehouse.db");
        let config = load(&yaml(&fake.url(), &db), dir.path());
        Self::start_config(config, fake, dir).await
    }

    pub async fn start_config(config: Config, fake: FakeUpstream, dir: tempfile::TempDir) -> Self {
        let events = Arc::new(MemoryEventSink::default());
        let deps = Deps {
            clock: Arc::new(SystemClock),
            env: Arc::new(MapEnvironment::default()),
            credentials: Arc::new(NoCredentialStore),
            events: events.clone(),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let handle = gatehouse_engine::server::start_on(listener, config, deps)
            .await
            .unwrap();
        Self {
            handle,
            fake,
            events,
            dir,
            client: reqwest::Client::builder().no_proxy().build().unwrap(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.handle.base_url(), path)
    }

    pub fn db_path(&self) -> PathBuf {
        self.dir.path().join("gatehouse.db")
    }

    /// A Messages request with the test client key.
    pub fn messages(&self, body: serde_json::Value) -> reqwest::RequestBuilder {
        self.client
            .post(self.url("/v1/messages?beta=true"))
            .header("x-api-key", CLIENT_KEY)
            .header("anthropic-version", "2023-06-01")
            .json(&body)
    }

    /// Waits (bounded) until `n` usage rows are stored, newest first.
    pub async fn usage_rows(&self, n: usize) -> Vec<UsageRecord> {
        let store = self.handle.store();
        for _ in 0..200 {
            let rows = store.recent_usage(1000).await.unwrap();
            if rows.len() >= n {
                return rows;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        panic!(
            "expected {n} usage rows, have {}",
            store.recent_usage(1000).await.unwrap().len()
        );
    }
}

pub fn sonnet(stream: bool) -> serde_json::Value {
    serde_json::json!({
        "model": "claude-sonnet-4-6",
        "max_tokens": 256,
        "stream": stream,
        "messages": [{"role": "user", "content": "hello"}]
    })
}

/// Path of a tool installed by `scripts/test.sh` under `tests/e2e/node_modules/.bin`.
pub fn e2e_bin(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("e2e/node_modules/.bin")
        .join(name)
}

pub fn e2e_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e")
}

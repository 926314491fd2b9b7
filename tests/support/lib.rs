//! Shared test support: start a real gateway in-process on port 0 in front of the in-repo
//! fake upstream, with its own temporary SQLite file and an in-memory event sink. Tests
//! run in parallel; nothing touches process-wide state (environment comes from a map).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod caps;
pub mod claude_session;
pub mod desktop;
pub mod matrix;
pub mod pg_cluster;
pub mod postgres;
pub mod postgres_tls;
pub mod replicas;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use fake_upstream::{FakeConfig, FakeUpstream, StreamRecord};
use gatehouse_engine::Handle;
use gatehouse_engine::config::{Config, LoadContext};
use gatehouse_engine::deps::{Deps, MapEnvironment, NoCredentialStore, SystemClock};
use gatehouse_engine::events::MemoryEventSink;
use gatehouse_engine::metering::usage::Usage;
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

/// Loads a test file. The fake upstreams, IdP and collectors listen on loopback, which a
/// gateway file may name only with the reference's `CLAUDE_GATEWAY_ALLOW_LOOPBACK`, set
/// here as a test setup sets it.
pub fn load(yaml: &str, dir: &Path) -> Config {
    let env = MapEnvironment::default().with_var("CLAUDE_GATEWAY_ALLOW_LOOPBACK", "1");
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

/// How test gateways serve connections: on two connection threads, as `gatehouse serve`
/// does on a two-core machine.
pub const SERVING: gatehouse_engine::Serving = gatehouse_engine::Serving {
    connection_threads: 2,
};

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
        Self::start_config_env(config, fake, dir, MapEnvironment::default()).await
    }

    /// As [`TestGateway::start_config`], with the gateway's environment.
    pub async fn start_config_env(
        config: Config,
        fake: FakeUpstream,
        dir: tempfile::TempDir,
        env: MapEnvironment,
    ) -> Self {
        let events = Arc::new(MemoryEventSink::default());
        let deps = Deps {
            clock: Arc::new(SystemClock),
            env: Arc::new(env),
            credentials: Arc::new(NoCredentialStore),
            events: events.clone(),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        // Served as `gatehouse serve` serves: on connection threads of their own.
        let handle = gatehouse_engine::server::start_on_with(listener, config, deps, SERVING)
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

    /// Asserts that none of `secrets` appears in the events or in the SQLite file.
    pub fn assert_no_secret(&self, secrets: &[&str]) {
        let events = format!("{:?}", self.events.events());
        let db = std::fs::read(self.db_path()).unwrap_or_default();
        let db = String::from_utf8_lossy(&db);
        for s in secrets {
            assert!(!events.contains(s), "a secret in events");
            assert!(!db.contains(s), "a secret in the database");
        }
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

/// Polls `check` every 20 ms until it holds; panics naming `what` after 30 s.
pub async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up waiting: {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
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

/// The fake upstream's stream record of the request whose `metadata.user_id` is `tag`.
pub fn stream_for(fake: &FakeUpstream, tag: &str) -> Option<StreamRecord> {
    let requests = fake.requests();
    fake.streams()
        .into_iter()
        .find(|s| requests[s.request_index].body["metadata"]["user_id"] == tag)
}

/// The usage the fake upstream reported for a stream: the final `message_delta` usage it
/// recorded, with the cache-write total split by TTL as its `message_start` (rendered from
/// the same `config`) split it.
pub fn reported_usage(record: &StreamRecord, config: &FakeConfig) -> Usage {
    let u = &record.usage;
    let n = |k: &str| u[k].as_u64().unwrap_or_else(|| panic!("no {k} in {u}"));
    let written = n("cache_creation_input_tokens");
    let one_hour = u64::from(config.cache_creation_1h_tokens);
    assert_eq!(
        written,
        u64::from(config.cache_creation_5m_tokens) + one_hour,
        "the fake reported another config's usage: {u}"
    );
    Usage {
        input_tokens: n("input_tokens"),
        output_tokens: n("output_tokens"),
        cache_read_tokens: n("cache_read_input_tokens"),
        cache_write_5m_tokens: written - one_hour,
        cache_write_1h_tokens: one_hour,
        web_search_requests: u["server_tool_use"]["web_search_requests"]
            .as_u64()
            .unwrap_or(0),
    }
}

/// The `gatehouse` binary next to the running test binary (`target/<profile>/deps/..`):
/// the tests crate cannot name another package's binary, and a workspace test run builds
/// it.
pub fn gatehouse_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test binary is in target/<profile>/deps")
        .join("gatehouse");
    assert!(
        bin.is_file(),
        "{} is missing: build it first (`cargo build -p gatehouse`; a workspace test run \
         builds it)",
        bin.display()
    );
    bin
}

/// Path of a tool installed by `scripts/test.sh` under `tests/e2e/node_modules/.bin`.
pub fn e2e_bin(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("e2e/node_modules/.bin")
        .join(name)
}

/// The pinned reference gateway: Claude Code 2.1.337's Linux binary
/// (`@anthropic-ai/claude-code-linux-x64`, installed under the alias
/// `claude-gateway-reference` by `scripts/test.sh`), run as `claude gateway`. The Claude
/// Code client the other tests drive is [`e2e_bin`]`("claude")`: the umbrella package,
/// whose newest release is still 2.1.332.
pub fn reference_claude() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/node_modules/claude-gateway-reference/claude")
}

pub fn e2e_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e")
}

/// A clock the test can move forward (device code and session expiry).
#[derive(Debug, Default)]
pub struct OffsetClock {
    offset_secs: std::sync::atomic::AtomicI64,
}

impl OffsetClock {
    pub fn advance(&self, secs: i64) {
        self.offset_secs
            .fetch_add(secs, std::sync::atomic::Ordering::SeqCst);
    }
}

impl gatehouse_engine::deps::Clock for OffsetClock {
    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        chrono::Utc::now()
            + chrono::Duration::seconds(self.offset_secs.load(std::sync::atomic::Ordering::SeqCst))
    }
}

pub const IDP_CLIENT_ID: &str = "gatehouse";
pub const IDP_CLIENT_SECRET: &str = "idp-client-secret-for-tests";
pub const SESSION_SECRET_A: &str = "session-secret-A-0123456789abcdefghijklmnop";
pub const SESSION_SECRET_B: &str = "session-secret-B-0123456789abcdefghijklmnop";
pub const PASSWORD: &str = "secret-password";

/// The real OIDC provider (npm `oidc-provider`) on loopback, stopped on drop.
pub struct Idp {
    pub issuer: String,
    _child: tokio::process::Child,
    http: reqwest::Client,
}

impl Idp {
    pub async fn start(redirect_uri: &str) -> Self {
        Self::start_with(redirect_uri, &[]).await
    }

    pub async fn start_with(redirect_uri: &str, env: &[(&str, &str)]) -> Self {
        // Node occasionally hangs before its first line on a loaded machine (seen: the main
        // thread parked on a lock before `listen`); a fixture that does not come up in 20 s
        // is killed and started again, at most three times.
        for attempt in 1..=3 {
            if let Some(idp) = Self::try_start(redirect_uri, env).await {
                return idp;
            }
            eprintln!("idp did not start (attempt {attempt}); starting it again");
        }
        panic!("the OIDC provider did not start in three attempts");
    }

    async fn try_start(redirect_uri: &str, env: &[(&str, &str)]) -> Option<Self> {
        use tokio::io::AsyncBufReadExt;
        let script = e2e_dir().join("idp.mjs");
        assert!(
            e2e_dir().join("node_modules/oidc-provider").exists(),
            "run scripts/test.sh (npm ci in tests/e2e)"
        );
        let mut cmd = tokio::process::Command::new("node");
        cmd.arg(script)
            .current_dir(e2e_dir())
            .env("IDP_PORT", "0")
            .env("IDP_CLIENT_ID", IDP_CLIENT_ID)
            .env("IDP_CLIENT_SECRET", IDP_CLIENT_SECRET)
            .env("IDP_REDIRECT_URIS", redirect_uri)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("node runs");
        let stdout = child.stdout.take()?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let line = match tokio::time::timeout(std::time::Duration::from_secs(20), lines.next_line())
            .await
        {
            Ok(Ok(Some(line))) => line,
            _ => {
                let _ = child.kill().await;
                return None;
            }
        };
        let issuer = line.trim().strip_prefix("idp listening on ")?.to_owned();
        Some(Self {
            issuer,
            _child: child,
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
        })
    }

    /// `GET /__test/stats`: token requests by grant type and status.
    pub async fn stats(&self) -> serde_json::Value {
        self.http
            .get(format!("{}/__test/stats", self.issuer))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    pub async fn control(&self, path: &str, body: serde_json::Value) {
        let r = self
            .http
            .post(format!("{}/__test/{path}", self.issuer))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(
            r.status().is_success(),
            "idp control {path}: {}",
            r.status()
        );
    }
}

/// A gateway with OIDC sign-in in front of the fake upstream and a real IdP.
pub struct SignInGateway {
    pub gw: TestGateway,
    pub idp: Idp,
    pub clock: Arc<OffsetClock>,
    pub origin: String,
}

/// `extra` is appended to the YAML (e.g. `rate_limits`); `secrets` are the session secrets.
/// The YAML of a sign-in gateway at `origin` (its `public_url`) with the IdP at `issuer`,
/// the fake upstream at `fake_url` and the given `store: {...}` line.
pub fn sign_in_yaml(
    origin: &str,
    issuer: &str,
    fake_url: &str,
    store: &str,
    secrets: &[&str],
    extra: &str,
) -> String {
    let upstreams = format!(
        "  - {{name: primary, provider: anthropic, base_url: \"{fake_url}\", auth: {{api_key: \"{OPERATOR_KEY}\"}}}}"
    );
    sign_in_yaml_with(origin, issuer, &upstreams, store, secrets, extra)
}

/// [`sign_in_yaml`] with its own `upstreams:` list items.
pub fn sign_in_yaml_with(
    origin: &str,
    issuer: &str,
    upstreams: &str,
    store: &str,
    secrets: &[&str],
    extra: &str,
) -> String {
    let listen = format!("host: 127.0.0.1, port: 0, public_url: \"{origin}\"");
    sign_in_yaml_listen(&listen, issuer, upstreams, store, secrets, extra)
}

/// [`sign_in_yaml_with`] with the whole `listen` block's keys given.
fn sign_in_yaml_listen(
    listen: &str,
    issuer: &str,
    upstreams: &str,
    store: &str,
    secrets: &[&str],
    extra: &str,
) -> String {
    let secrets = secrets
        .iter()
        .map(|s| format!("\"{s}\""))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        r#"
listen: {{{listen}}}
{store}
upstreams:
{upstreams}
client_keys: [{{id: tester, key: "{CLIENT_KEY}"}}]
session: {{jwt_secret: [{secrets}], ttl_hours: 1}}
oidc:
  issuer: "{issuer}"
  client_id: {IDP_CLIENT_ID}
  client_secret: {IDP_CLIENT_SECRET}
  allowed_email_domains: [corp.example]
  allowed_groups: [claude-users, engineering]
  login_notice: "Use your corp account."
  allow_loopback: true
{extra}"#
    )
}

pub async fn sign_in_gateway(secrets: &[&str], extra: &str) -> SignInGateway {
    let setup = |fake_url: &str| {
        let ups = format!(
            "  - {{name: primary, provider: anthropic, base_url: \"{fake_url}\", auth: {{api_key: \"{OPERATOR_KEY}\"}}}}"
        );
        (ups, MapEnvironment::default())
    };
    sign_in_gateway_with(secrets, extra, &setup).await
}

/// [`sign_in_gateway`] with its own upstream list and gateway environment, both made from
/// the fake's URL.
pub async fn sign_in_gateway_with(
    secrets: &[&str],
    extra: &str,
    setup: &dyn Fn(&str) -> (String, MapEnvironment),
) -> SignInGateway {
    start_sign_in_gateway(secrets, extra, setup, &SignInOptions::default()).await
}

/// What [`sign_in_gateway_opts`] changes of a [`sign_in_gateway`].
#[derive(Default)]
pub struct SignInOptions<'a> {
    /// The IdP's environment (e.g. `IDP_ROTATE_REFRESH=0`).
    pub idp_env: &'a [(&'a str, &'a str)],
    /// More `listen` keys (e.g. `trusted_proxies: [127.0.0.0/8]`).
    pub listen: &'a str,
    /// More `store` keys (e.g. `readiness_grace_seconds: 60`).
    pub store: &'a str,
    /// The SQLite file (default: in the gateway's temporary directory).
    pub db: Option<&'a Path>,
    /// `oidc` lines (indented two spaces) that replace `client_secret`, e.g. a
    /// `private_key_jwt` client assertion.
    pub client_auth: Option<&'a str>,
    /// The gateway's environment (variables and files), default empty.
    pub gateway_env: Option<MapEnvironment>,
    /// Changes to the loaded config before the gateway starts (seams that are not config
    /// keys, e.g. the Google directory's URL).
    pub configure: Option<&'a (dyn Fn(&mut Config) + Sync)>,
}

/// [`sign_in_gateway`] with its SQLite file at `db` (e.g. on a small disk).
pub async fn sign_in_gateway_at(secrets: &[&str], extra: &str, db: &Path) -> SignInGateway {
    let opts = SignInOptions {
        db: Some(db),
        ..Default::default()
    };
    sign_in_gateway_opts(secrets, extra, &opts).await
}

/// [`sign_in_gateway`] with [`SignInOptions`].
pub async fn sign_in_gateway_opts(
    secrets: &[&str],
    extra: &str,
    opts: &SignInOptions<'_>,
) -> SignInGateway {
    let setup = |fake_url: &str| {
        let ups = format!(
            "  - {{name: primary, provider: anthropic, base_url: \"{fake_url}\", auth: {{api_key: \"{OPERATOR_KEY}\"}}}}"
        );
        (ups, opts.gateway_env.clone().unwrap_or_default())
    };
    start_sign_in_gateway(secrets, extra, &setup, opts).await
}

async fn start_sign_in_gateway(
    secrets: &[&str],
    extra: &str,
    setup: &dyn Fn(&str) -> (String, MapEnvironment),
    opts: &SignInOptions<'_>,
) -> SignInGateway {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let idp = Idp::start_with(&format!("{origin}/oauth/callback"), opts.idp_env).await;
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = opts
        .db
        .map_or_else(|| dir.path().join("gatehouse.db"), Path::to_path_buf);
    let mut store = format!("sqlite_path: \"{}\"", db.display());
    if !opts.store.is_empty() {
        store = format!("{store}, {}", opts.store);
    }
    let store = format!("store: {{{store}}}");
    let (ups, env) = setup(&fake.url());
    let mut listen = format!("host: 127.0.0.1, port: 0, public_url: \"{origin}\"");
    if !opts.listen.is_empty() {
        listen = format!("{listen}, {}", opts.listen);
    }
    let mut yaml = sign_in_yaml_listen(&listen, &idp.issuer, &ups, &store, secrets, extra);
    if let Some(auth) = opts.client_auth {
        yaml = yaml.replace(&format!("  client_secret: {IDP_CLIENT_SECRET}\n"), auth);
    }
    let mut config = load(&yaml, dir.path());
    if let Some(configure) = opts.configure {
        configure(&mut config);
    }
    let clock = Arc::new(OffsetClock::default());
    let events = Arc::new(MemoryEventSink::default());
    let deps = Deps {
        clock: clock.clone(),
        env: Arc::new(env),
        credentials: Arc::new(NoCredentialStore),
        events: events.clone(),
    };
    let handle = gatehouse_engine::server::start_on(listener, config, deps)
        .await
        .unwrap();
    SignInGateway {
        gw: TestGateway {
            handle,
            fake,
            events,
            dir,
            client: reqwest::Client::builder()
                .no_proxy()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
        },
        idp,
        clock,
        origin,
    }
}

/// Runs the browser part of the device flow in headless Chromium (Playwright).
pub async fn browser_login(
    start_url: &str,
    login: &str,
    password: &str,
    screenshots: Option<&Path>,
) -> serde_json::Value {
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(e2e_dir().join("device_login.mjs"))
        .current_dir(e2e_dir())
        .env("START_URL", start_url)
        .env("LOGIN", login)
        .env("PASSWORD", password)
        .kill_on_drop(true);
    if let Some(dir) = screenshots {
        cmd.env("SCREENSHOT_DIR", dir);
    }
    let out = tokio::time::timeout(std::time::Duration::from_secs(90), cmd.output())
        .await
        .expect("browser login finished within 90 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|_| {
        panic!(
            "browser login printed no JSON: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The whole device flow for `login` (password [`PASSWORD`]): device authorization, the
/// browser part, then one token poll. Returns the poll's status and body, with the
/// browser's report under `page`.
pub async fn device_sign_in(s: &SignInGateway, login: &str) -> (u16, serde_json::Value) {
    let d: serde_json::Value =
        s.gw.client
            .post(s.gw.url("/oauth/device_authorization"))
            .form(&[("surface", "claude_code")])
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let page = browser_login(
        d["verification_uri_complete"].as_str().unwrap(),
        login,
        PASSWORD,
        None,
    )
    .await;
    s.clock.advance(6);
    let r =
        s.gw.client
            .post(s.gw.url("/oauth/token"))
            .form(&[
                ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
                ("device_code", d["device_code"].as_str().unwrap()),
            ])
            .send()
            .await
            .unwrap();
    let status = r.status().as_u16();
    let mut body: serde_json::Value = r.json().await.unwrap();
    body["page"] = page;
    (status, body)
}

/// Runs `openssl` with `args` (test keys and certificates); panics with its stderr.
pub fn openssl(args: &[&str]) {
    let out = std::process::Command::new("openssl")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A session token for `sub` signed with [`SESSION_SECRET_A`], as the gateway at `origin`
/// would mint it (for tests that need a signed-in person without the browser flow).
pub fn session_token(origin: &str, sub: &str, email: &str, groups: &[&str]) -> String {
    use gatehouse_engine::identity::keys::KeyRing;
    use gatehouse_engine::identity::session::{UserIdentity, mint};
    use gatehouse_engine::secret::Secret;
    let who = UserIdentity {
        sub: sub.into(),
        email: Some(email.into()),
        name: None,
        groups: groups.iter().map(|g| (*g).to_owned()).collect(),
    };
    mint(
        &KeyRing::new(&[Secret::new(SESSION_SECRET_A)]),
        origin,
        3600,
        chrono::Utc::now(),
        &who,
    )
    .map(|(t, _)| t)
    .unwrap()
}

/// Runs the real Claude Code CLI in print mode (`claude -p <prompt> --output-format json`)
/// with a clean environment: a PATH, `HOME`, no outside traffic, plus `env`. Bounded to
/// 120 s.
pub async fn claude_print(prompt: &str, home: &Path, env: &[(&str, &str)]) -> std::process::Output {
    let claude = e2e_bin("claude");
    assert!(
        claude.exists(),
        "{} is missing: run scripts/test.sh",
        claude.display()
    );
    let mut cmd = tokio::process::Command::new(&claude);
    cmd.args(["-p", prompt, "--output-format", "json"])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home)
        .env("TERM", "dumb")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    tokio::time::timeout(std::time::Duration::from_secs(120), cmd.output())
        .await
        .expect("claude finished within 120 s")
        .expect("claude ran")
}

/// [`claude_print`] in a fresh home that must succeed: the `result` text of its JSON
/// answer (asserted not an error). `label` starts every failure message.
pub async fn claude_answer(label: &str, prompt: &str, env: &[(&str, &str)]) -> String {
    let home = tempfile::tempdir().unwrap();
    let out = claude_print(prompt, home.path(), env).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{label}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{label}: not JSON ({e}): {stdout}"));
    assert_eq!(result["is_error"], false, "{label}: {stdout}");
    result["result"]
        .as_str()
        .unwrap_or_else(|| panic!("{label}: no result text: {stdout}"))
        .to_owned()
}

/// Runs a node script of `tests/e2e` with `args` and `env` (bounded to 90 s); its stdout
/// is one JSON line, returned parsed. A failing script fails the test with its output.
pub async fn node_json(script: &str, args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let out = tokio::process::Command::new("node")
        .arg(e2e_dir().join(script))
        .args(args)
        .current_dir(e2e_dir())
        .envs(env.iter().copied())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(90), out)
        .await
        .expect("the node script finished within 90 s")
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{script}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{script}: {e}: {stdout}"))
}

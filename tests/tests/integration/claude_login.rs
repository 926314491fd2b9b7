//! Claude Code's own `/login` against Gatehouse over HTTPS: the CLI is driven through a
//! pseudo-terminal (theme, connect, trust the certificate, confirm the account), headless
//! Chromium signs in at the IdP, and afterwards `claude -p` fetches `/managed/settings`
//! and runs inference with the stored gateway session.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use fake_upstream::{FakeConfig, FakeUpstream};
use gatehouse_tests::{
    IDP_CLIENT_ID, IDP_CLIENT_SECRET, Idp, OPERATOR_KEY, PASSWORD, SESSION_SECRET_A, TestGateway,
    e2e_bin, e2e_dir, load,
};
use tokio::io::AsyncBufReadExt;
use tokio::process::Command;

#[tokio::test]
async fn claude_code_login_then_managed_settings_and_inference() {
    let claude = e2e_bin("claude");
    assert!(claude.exists(), "run scripts/test.sh");
    let dir = tempfile::tempdir().unwrap();
    let mut params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("https://{}", listener.local_addr().unwrap());
    let idp = Idp::start(&format!("{origin}/oauth/callback")).await;
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let yaml = format!(
        r#"
listen: {{host: 127.0.0.1, port: 0, public_url: "{origin}", tls: {{cert: "{cert}", key: "{key}"}}}}
store: {{sqlite_path: "{db}"}}
upstreams: [{{name: primary, provider: anthropic, base_url: "{fake}", auth: {{api_key: "{OPERATOR_KEY}"}}}}]
session: {{jwt_secret: "{SESSION_SECRET_A}"}}
oidc: {{issuer: "{issuer}", client_id: {IDP_CLIENT_ID}, client_secret: {IDP_CLIENT_SECRET}, allow_loopback: true}}
managed:
  policies:
    - match: {{groups: [engineering]}}
      cli: {{env: {{GATEHOUSE_ROLE: engineering}}}}
    - match: {{}}
      cli: {{permissions: {{deny: [WebFetch]}}}}
"#,
        cert = std::fs::read_to_string(&cert_path)
            .unwrap()
            .replace('\n', "\\n"),
        key = std::fs::read_to_string(&key_path)
            .unwrap()
            .replace('\n', "\\n"),
        db = dir.path().join("g.db").display(),
        fake = fake.url(),
        issuer = idp.issuer,
    );
    let config = load(&yaml, dir.path());
    let events = Arc::new(gatehouse_engine::events::MemoryEventSink::default());
    let deps = gatehouse_engine::deps::Deps {
        clock: Arc::new(gatehouse_engine::deps::SystemClock),
        env: Arc::new(gatehouse_engine::deps::MapEnvironment::default()),
        credentials: Arc::new(gatehouse_engine::deps::NoCredentialStore),
        events: events.clone(),
    };
    let handle = gatehouse_engine::server::start_on(listener, config, deps)
        .await
        .unwrap();

    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".claude")).unwrap();
    std::fs::write(
        home.path().join(".claude/settings.json"),
        serde_json::json!({"forceLoginMethod": "gateway", "forceLoginGatewayUrl": origin})
            .to_string(),
    )
    .unwrap();
    let mut driver = Command::new("python3")
        .arg(e2e_dir().join("claude_login.py"))
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("CLAUDE", &claude)
        .env("CLAUDE_ENV_PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("CLAUDE_ENV_HOME", home.path())
        .env("CLAUDE_ENV_NODE_EXTRA_CA_CERTS", &cert_path)
        .env("CLAUDE_ENV_CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(driver.stdout.take().unwrap()).lines();
    let mut next = async || -> serde_json::Value {
        let line = tokio::time::timeout(Duration::from_secs(120), lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .expect("driver output");
        serde_json::from_str(&line).unwrap()
    };
    let first = next().await;
    let code = first["code"]
        .as_str()
        .unwrap_or_else(|| panic!("{first}"))
        .to_owned();
    let browser = Command::new("node")
        .arg(e2e_dir().join("device_login.mjs"))
        .current_dir(e2e_dir())
        .env("START_URL", format!("{origin}/device?user_code={code}"))
        .env("LOGIN", "alice")
        .env("PASSWORD", PASSWORD)
        .env("IGNORE_HTTPS_ERRORS", "1")
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let page: serde_json::Value = serde_json::from_slice(browser.stdout.trim_ascii()).unwrap();
    assert_eq!(page["result"], "Signed in", "{page}");
    let done = next().await;
    assert_eq!(done["done"], true, "{done}");
    let _ = driver.wait().await;

    // The stored gateway session now drives print mode: managed settings, then inference.
    for _ in 0..2 {
        let out = tokio::time::timeout(
            Duration::from_secs(120),
            Command::new(&claude)
                .args(["-p", "hello", "--output-format", "json"])
                .env_clear()
                .env("PATH", "/usr/local/bin:/usr/bin:/bin")
                .env("HOME", home.path())
                .env("NODE_EXTRA_CA_CERTS", &cert_path)
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
        assert!(stdout.contains("Hello from the fake upstream"), "{stdout}");
    }
    let served = events.named("managed.serve");
    // Claude Code 2.1.332 fetches at each start without If-None-Match (it sends one when it
    // polls during a long session), so each answer is a full 200.
    assert_eq!(
        served.len(),
        2,
        "Claude Code fetched its managed settings at each start"
    );
    assert!(
        served
            .iter()
            .all(|e| e["status"] == 200 && e["conditional"] == false)
    );
    assert!(
        served
            .iter()
            .all(|e| e["sub"] == "alice" && e["policy"] == 0)
    );
    let inference = events.named("inference");
    assert!(inference.len() >= 2 && inference.iter().all(|e| e["principal"] == "user:alice"));
    assert_eq!(events.named("session.mint")[0]["surface"], "claude_code");
    let gw = TestGateway {
        handle,
        fake,
        events,
        dir,
        client: reqwest::Client::new(),
    };
    drop((gw, idp));
}

//! `gatehouse status` against an in-process server: the human lines and `--json` carry
//! mode, listener, store, upstream health, today's usage, caps and sign-in; `--config`
//! finds the listener; nothing running is exit 1 with a sentence saying so.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Output};

use chrono::Utc;
use fake_upstream::FakeConfig;
use gatehouse_engine::spend::{Period, ScopeType};
use gatehouse_tests::{TestGateway, base_yaml, caps, sonnet};

fn gatehouse(args: &[&str]) -> Output {
    let data = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .env_clear()
        // The fake upstream is on loopback: the reference's switch allows it.
        .env("CLAUDE_GATEWAY_ALLOW_LOOPBACK", "1")
        .env("PATH", "/usr/bin:/bin")
        .arg("--data-dir")
        .arg(data.path())
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `gatehouse` off the async runtime (the gateway keeps serving meanwhile).
async fn run(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        gatehouse(&args.iter().map(String::as_str).collect::<Vec<_>>())
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_of_a_running_server_for_people_and_as_json() {
    let g = TestGateway::start_with(FakeConfig::default(), |fake, db| {
        format!("{}{}", base_yaml(fake, db), caps::ADMIN)
    })
    .await;
    g.handle
        .store()
        .upsert_limit(
            ScopeType::Organization,
            "",
            Period::Daily,
            Some(500),
            "ops",
            Utc::now(),
        )
        .await
        .unwrap();
    let r = g.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    g.usage_rows(1).await;
    let base = g.handle.base_url();
    let addr = g.handle.local_addr().to_string();

    let out = run(vec!["status".into(), "--url".into(), base.clone()]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    for want in [
        "(server)",
        &format!("Listener:  {addr}"),
        "Store:     sqlite, ready",
        "Upstreams: primary",
        "Today:     1 requests",
        "Caps:      organization daily $5.00",
        "Sign-in:   1 client key(s)",
    ] {
        assert!(said.contains(want), "{want:?} in\n{said}");
    }
    assert!(!said.contains(gatehouse_tests::CLIENT_KEY), "{said}");

    let out = run(vec!["status".into(), "--json".into(), "--url".into(), base]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["mode"], "server");
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(v["listener"]["address"], addr);
    assert_eq!(v["store"]["backend"], "sqlite");
    assert_eq!(v["store"]["ready"], true);
    assert_eq!(v["today"]["usage"]["requests"], 1);
    assert_eq!(v["upstreams"][0]["name"], "primary");
    assert_eq!(v["spend"]["caps_enforced"], true);
    assert_eq!(
        v["spend"]["organization_caps"][0],
        serde_json::json!({"period": "daily", "limit_micro_usd": 5_000_000})
    );

    // --config finds the listener (here: the running gateway's port).
    let file = g.dir.path().join("gateway.yaml");
    std::fs::write(
        &file,
        base_yaml(&g.fake.url(), &g.db_path()).replace(
            "port: 0",
            &format!("port: {}", g.handle.local_addr().port()),
        ),
    )
    .unwrap();
    let out = run(vec![
        "status".into(),
        "--json".into(),
        "--config".into(),
        file.display().to_string(),
    ])
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["listener"]["address"], addr);
}

#[test]
fn nothing_running_is_an_error_that_says_so() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let out = gatehouse(&["status", "--url", &url]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("gatehouse: no Gatehouse is running at {url}")),
        "{err}"
    );
}

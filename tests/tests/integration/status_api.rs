//! `GET /gatehouse/api/status` (what `gatehouse status` reads): open on loopback, and off
//! loopback (here: through a trusted proxy) only with an admin read or write key.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fake_upstream::FakeConfig;
use gatehouse_tests::{CLIENT_KEY, TestGateway, base_yaml, caps};

#[tokio::test]
async fn status_off_loopback_needs_an_admin_key() {
    let g = TestGateway::start_with(FakeConfig::default(), |fake, db| {
        base_yaml(fake, db).replace(
            "listen: {host: 127.0.0.1, port: 0}",
            "listen: {host: 127.0.0.1, port: 0, trusted_proxies: [127.0.0.0/8]}",
        ) + caps::ADMIN
    })
    .await;
    let url = g.url("/gatehouse/api/status");
    let get = |xff: Option<&str>, key: Option<&str>| {
        let mut r = g.client.get(&url);
        if let Some(ip) = xff {
            r = r.header("x-forwarded-for", ip);
        }
        if let Some(k) = key {
            r = r.header("x-api-key", k);
        }
        r.send()
    };
    let local = get(None, None).await.unwrap();
    assert_eq!(local.status(), 200);
    let body: serde_json::Value = local.json().await.unwrap();
    assert_eq!(body["mode"], "server");
    assert_eq!(body["sign_in"]["app"], serde_json::Value::Null);

    let remote = "203.0.113.9";
    assert_eq!(get(Some(remote), None).await.unwrap().status(), 401);
    assert_eq!(
        get(Some(remote), Some(CLIENT_KEY)).await.unwrap().status(),
        401
    );
    for key in [caps::READ_KEY, caps::WRITE_KEY] {
        let r = get(Some(remote), Some(key)).await.unwrap();
        assert_eq!(r.status(), 200);
        let text = r.text().await.unwrap();
        assert!(!text.contains(key) && !text.contains(CLIENT_KEY), "{text}");
    }
}

#[tokio::test]
async fn the_desktop_app_adds_its_mode_and_sign_in_state() {
    use gatehouse_desktop::app::App;
    use gatehouse_engine::deps::MapEnvironment;
    use gatehouse_tests::desktop::desktop_deps;

    let fake = fake_upstream::FakeUpstream::start(FakeConfig::default())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = MapEnvironment::default()
        .with_var("GATEHOUSE_ANTHROPIC_BASE_URL", &fake.url())
        .with_var(
            "GATEHOUSE_BOOTSTRAP_FILE",
            dir.path().join("no-bootstrap.json").to_str().unwrap(),
        );
    let (deps, parts) = desktop_deps(dir.path(), env);
    let app = App::start(deps).await.unwrap();
    let r = reqwest::Client::new()
        .get(format!("{}/gatehouse/api/status", app.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    let body: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["mode"], "desktop");
    assert_eq!(body["sign_in"]["local_key"], true);
    assert_eq!(
        body["sign_in"]["app"],
        serde_json::json!({"mode": "standalone", "sign_in": null, "central_url": null,
                           "tray": "setup_needed"})
    );
    for secret in parts.keychain.values() {
        assert!(!text.contains(&secret), "a keychain value in the status");
    }
    let token = app.dashboard_url();
    let token = token.split("#token=").nth(1).unwrap();
    assert!(!text.contains(token), "the app token in the status");
}

//! Connected desktop end to end: an IT bootstrap file names a central `gatehouse` (with a
//! real OIDC provider and a real browser sign-in), the tray engine goes straight to the
//! login prompt, signs in with the device flow, pulls the managed policy and the user's
//! caps, refuses locally what the policy refuses, and turns a spend block on the central
//! server into a notification.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use gatehouse_desktop::app::{App, LoginState};
use gatehouse_engine::deps::{CredentialStore, MapEnvironment};
use gatehouse_tests::desktop::desktop_deps;
use gatehouse_tests::{PASSWORD, SESSION_SECRET_A, browser_login, e2e_dir, sign_in_gateway};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

const CENTRAL: &str = r#"
admin:
  write_keys: [{id: ops, key: admin-write-key-0123456789abcdef0123456789}]
  blocked_message: Ask the platform team for more.
managed:
  policies:
    - match: {groups: [engineering]}
      cli:
        availableModels: [claude-sonnet-4-6]
"#;

fn msg(model: &str, max_tokens: u64) -> Value {
    json!({"model": model, "max_tokens": max_tokens, "stream": false,
           "messages": [{"role": "user", "content": "hi"}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_login_policy_caps_and_a_central_spend_block() {
    let central = sign_in_gateway(&[SESSION_SECRET_A], CENTRAL).await;
    let dir = tempfile::tempdir().unwrap();
    // The environment is passed in, file reads included: the bootstrap file lives in it.
    let bootstrap = dir.path().join("bootstrap.json");
    let doc = json!({"central_url": central.origin, "force_connected_mode": true,
                     "login_notice": "Use your corp account."})
    .to_string();
    let env = MapEnvironment::default()
        .with_var("GATEHOUSE_BOOTSTRAP_FILE", bootstrap.to_str().unwrap())
        .with_file(bootstrap.to_str().unwrap(), &doc);
    let (mut deps, parts) = desktop_deps(dir.path(), env);
    // One clock for the central server and the tray, so the test can move time for both.
    deps.clock = central.clock.clone();
    let app = App::start(deps).await.unwrap();
    let http = reqwest::Client::new();
    let token = app
        .dashboard_url()
        .split("#token=")
        .nth(1)
        .unwrap()
        .to_owned();
    let state = || async {
        http.get(format!("{}/gatehouse/app/state", app.base_url()))
            .header("x-gatehouse-app-token", &token)
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };

    // A fresh install goes straight to the login prompt for the named server; the mode is locked.
    let s = state().await;
    assert_eq!(s["mode"], "connected", "{s}");
    assert_eq!(s["locks"]["mode"], true);
    assert_eq!(s["central"]["url"], central.origin);
    assert_eq!(s["login"]["state"], "pending", "{s}");
    assert_eq!(s["login"]["login_notice"], "Use your corp account.");
    let user_code = s["login"]["user_code"].as_str().unwrap().to_owned();
    let complete = s["login"]["verification_uri_complete"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(complete.starts_with(&central.origin));
    // Switching to standalone is refused while the bootstrap forces connected mode.
    let r = http
        .post(format!("{}/gatehouse/app/settings", app.base_url()))
        .header("x-gatehouse-app-token", &token)
        .json(&json!({"mode": "standalone"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    // The button opens exactly the verification page, nothing else.
    let open = |url: String| {
        http.post(format!("{}/gatehouse/app/open", app.base_url()))
            .header("x-gatehouse-app-token", &token)
            .json(&json!({"url": url}))
            .send()
    };
    assert_eq!(
        open("https://evil.example/".into()).await.unwrap().status(),
        400
    );

    // The Login view in a real browser: it opens by itself on the pending sign-in, shows the
    // user code of this device flow, and its button opens the verification page.
    let shots = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/screenshots");
    let mut ui = tokio::process::Command::new("node")
        .arg(e2e_dir().join("app_login.mjs"))
        .current_dir(e2e_dir())
        .env("APP_URL", app.dashboard_url())
        .env("SCREENSHOT_DIR", &shots)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut ui_out = tokio::io::BufReader::new(ui.stdout.take().unwrap()).lines();
    let mut ui_in = ui.stdin.take().unwrap();
    let phase = |line: Option<String>| -> Value {
        serde_json::from_str(&line.unwrap_or_default()).unwrap_or(Value::Null)
    };
    let pending = phase(
        tokio::time::timeout(Duration::from_secs(60), ui_out.next_line())
            .await
            .unwrap()
            .unwrap(),
    );
    assert_eq!(pending["phase"], "pending", "{pending}");
    assert_eq!(pending["user_code"], user_code);
    assert_eq!(pending["login_tab_selected"], "true");
    assert_eq!(pending["notice"], "Use your corp account.");
    assert!(!pending["url_after"].as_str().unwrap().contains("token="));
    assert_eq!(parts.opened.taken(), vec![complete.clone()]);

    // The person signs in in a real browser; the app's poll picks the session up.
    let page = browser_login(&complete, "alice", PASSWORD, None).await;
    assert_eq!(page["result"], "Signed in", "{page}");
    assert_eq!(page["prefilled"], user_code);
    for _ in 0..300 {
        if app.login_state() == LoginState::SignedIn {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(app.login_state(), LoginState::SignedIn);
    ui_in.write_all(b"go\n").await.unwrap();
    let signed_in = phase(
        tokio::time::timeout(Duration::from_secs(60), ui_out.next_line())
            .await
            .unwrap()
            .unwrap(),
    );
    assert_eq!(signed_in["phase"], "signed_in", "{signed_in}");
    assert!(
        signed_in["user"]
            .as_str()
            .unwrap()
            .contains("alice@corp.example")
    );
    assert!(
        signed_in["groups"]
            .as_str()
            .unwrap()
            .contains("engineering")
    );
    assert_eq!(signed_in["console_errors"], json!([]));
    let _ = ui.wait().await;
    assert!(
        parts
            .keychain
            .get("gatehouse", "session")
            .unwrap()
            .is_some(),
        "the session is in the keychain"
    );

    // Policy and caps are pulled and shown.
    central_cap(&central, "500").await;
    app.sync_now().await;
    let s = state().await;
    assert_eq!(s["login"]["email"], "alice@corp.example");
    assert!(
        s["login"]["groups"]
            .as_array()
            .unwrap()
            .contains(&json!("engineering"))
    );
    assert_eq!(
        s["policy"]["available_models"],
        json!(["claude-sonnet-4-6"])
    );
    let daily = s["central_spend"]["limits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["period"] == "daily")
        .cloned()
        .unwrap();
    assert_eq!(daily["limit_micro_usd"], 5_000_000);

    // Inference goes to the central server with the session.
    let local = parts
        .keychain
        .get("gatehouse", "local-token")
        .unwrap()
        .unwrap();
    let infer = |body: Value| {
        http.post(format!("{}/v1/messages", app.base_url()))
            .bearer_auth(local.expose())
            .json(&body)
            .send()
    };
    let r = infer(msg("claude-sonnet-4-6", 64)).await.unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let upstream_seen = central.gw.fake.requests().len();
    assert_eq!(upstream_seen, 1);

    // What the cached policy refuses never leaves the laptop.
    let r = infer(msg("claude-haiku-4-5", 64)).await.unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("not allowed"));
    assert_eq!(central.gw.fake.requests().len(), upstream_seen);

    // A spend block on the central server: relayed, notified, and listed as a block.
    central_cap(&central, "0").await;
    let r = infer(msg("claude-sonnet-4-6", 64)).await.unwrap();
    assert_eq!(r.status(), 429);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["type"], "billing_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("platform team")
    );
    assert_eq!(central.gw.fake.requests().len(), upstream_seen);
    for _ in 0..100 {
        // The notification, and the event recorded right after it was shown.
        if parts
            .events
            .named("desktop.notify")
            .iter()
            .any(|e| e["kind"] == "spend_blocked")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        parts
            .notes
            .taken()
            .iter()
            .any(|n| n.contains("platform team")),
        "{:?}",
        parts.notes.taken()
    );
    let blocked = parts
        .events
        .named("desktop.notify")
        .into_iter()
        .any(|e| e["kind"] == "spend_blocked" && e["outcome"] == "shown");
    assert!(blocked);
    // ... and listed under Policy blocks (the dashboard's own API, loopback: details shown).
    let dash: Value = http
        .get(format!("{}/gatehouse/api/dashboard", app.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let layers: Vec<&str> = dash["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["layer"].as_str())
        .collect();
    assert_eq!(layers.first(), Some(&"spend"), "{dash}");
    assert!(
        layers.contains(&"policy"),
        "the local policy refusal is listed too: {dash}"
    );

    // Refresh before expiry: 56 minutes on (the session lasts an hour), the next sync
    // refreshes it, the keychain holds the new tokens, and inference goes on.
    central_cap(&central, "500").await;
    let first = parts.keychain.get("gatehouse", "session").unwrap().unwrap();
    central.clock.advance(56 * 60);
    app.sync_now().await;
    assert_eq!(app.login_state(), LoginState::SignedIn);
    let second = parts.keychain.get("gatehouse", "session").unwrap().unwrap();
    assert_ne!(first, second, "the session was refreshed");
    let r = infer(msg("claude-sonnet-4-6", 64)).await.unwrap();
    assert_eq!(r.status(), 200);

    // Deprovisioned at the IdP: the next refresh gets invalid_grant; the tray forgets the
    // session, asks to sign in again and notifies.
    central
        .idp
        .control("disable", json!({"account": "alice"}))
        .await;
    central.clock.advance(56 * 60);
    app.sync_now().await;
    assert!(
        matches!(app.login_state(), LoginState::Expired { .. }),
        "{:?}",
        app.login_state()
    );
    assert!(
        parts
            .keychain
            .get("gatehouse", "session")
            .unwrap()
            .is_none()
    );
    assert!(
        parts
            .notes
            .taken()
            .iter()
            .any(|n| n.contains("sign in again")),
        "{:?}",
        parts.notes.taken()
    );
    let s = state().await;
    assert_eq!(s["login"]["state"], "expired");

    // Log out revokes and forgets the session.
    app.logout().await.unwrap();
    assert!(
        parts
            .keychain
            .get("gatehouse", "session")
            .unwrap()
            .is_none()
    );
    let r = infer(msg("claude-sonnet-4-6", 64)).await.unwrap();
    assert_eq!(r.status(), 503);
    app.shutdown().await;
}

async fn central_cap(central: &gatehouse_tests::SignInGateway, cents: &str) {
    gatehouse_tests::caps::set_limit(
        &central.gw.client,
        &central.gw.url(""),
        json!({"scope": {"type": "organization"}, "amount": cents, "period": "daily"}),
    )
    .await;
}

/// A central server whose device-flow answers the test sets: `(device authorization,
/// token)` bodies, both answered with 200.
type Answers = std::sync::Arc<std::sync::Mutex<(Value, Value)>>;

async fn hostile_central(answers: Answers) -> String {
    use axum::routing::post;
    let device = {
        let a = answers.clone();
        move || async move { axum::Json(a.lock().unwrap().0.clone()) }
    };
    let token = move || async move { axum::Json(answers.lock().unwrap().1.clone()) };
    let app = axum::Router::new()
        .route("/oauth/device_authorization", post(device))
        .route("/oauth/token", post(token));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

fn device_answer(verification_uri: &str) -> Value {
    json!({"device_code": "dc", "user_code": "WDJB-MJHT", "verification_uri": verification_uri,
           "expires_in": 600, "interval": 1})
}

/// What a central server says is trusted no further than it must be: no cleartext central
/// URL off loopback, no verification page opened that is not https (or http on loopback),
/// and no `expires_in` (2^64 - 1, 1e300, negative) that panics the tray or the CLI client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_central_server_opens_nothing_and_panics_nothing() {
    use gatehouse_desktop::central::{CentralClient, MAX_TOKEN_SECS, Poll};
    let answers: Answers = Default::default();
    let central = hostile_central(answers.clone()).await;
    let clock = std::sync::Arc::new(gatehouse_engine::deps::SystemClock);
    let client = CentralClient::new(&central, reqwest::Client::new(), clock.clone()).unwrap();

    // A plain-http central off loopback is refused with the rule named.
    for url in ["http://gatehouse.corp.example", "http://10.1.2.3:8080"] {
        let e = CentralClient::new(url, reqwest::Client::new(), clock.clone())
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("plain http is allowed only for a loopback host"),
            "{e}"
        );
    }

    // A verification page that is not https (or http on loopback) is refused, not opened.
    for bad in [
        "javascript:alert(1)",
        "file:///etc/passwd",
        "http://phish.example/device",
    ] {
        answers.lock().unwrap().0 = device_answer(bad);
        let e = client.start_device().await.err().unwrap().to_string();
        assert!(e.contains("refusing to open"), "{bad}: {e}");
    }

    // Any lifetime: clamped to a year at most, never a panic.
    answers.lock().unwrap().0 = device_answer(&format!("{central}/device"));
    let start = client.start_device().await.unwrap();
    for (expires_in, most) in [
        (json!(18446744073709551615_u64), MAX_TOKEN_SECS),
        (json!(1e300), MAX_TOKEN_SECS),
        (json!(-5), 0),
    ] {
        answers.lock().unwrap().1 = json!({"access_token": "at", "expires_in": expires_in});
        let before = chrono::Utc::now();
        let Poll::Done(tokens) = client.poll(&start.device_code).await.unwrap() else {
            panic!("{expires_in}: not done");
        };
        let secs = (tokens.expires_at - before).num_seconds();
        assert!(
            (most - 5..=most + 5).contains(&secs),
            "{expires_in}: {secs}"
        );
    }

    // The tray: a bootstrap naming this server signs in (no panic on the huge lifetime),
    // and the app never opens a page the server names unless it passes the rule.
    answers.lock().unwrap().0 = device_answer("javascript:alert(1)");
    answers.lock().unwrap().1 =
        json!({"access_token": "at", "expires_in": 18446744073709551615_u64});
    let dir = tempfile::tempdir().unwrap();
    let bootstrap = dir.path().join("bootstrap.json");
    let doc = json!({"central_url": central, "force_connected_mode": true}).to_string();
    let env = MapEnvironment::default()
        .with_var("GATEHOUSE_BOOTSTRAP_FILE", bootstrap.to_str().unwrap())
        .with_file(bootstrap.to_str().unwrap(), &doc);
    let (deps, parts) = desktop_deps(dir.path(), env);
    let app = App::start(deps).await.unwrap();
    let e = app.login().await.err().unwrap().to_string();
    assert!(e.contains("refusing to open"), "{e}");
    assert!(app.open_verification("javascript:alert(1)").is_err());
    answers.lock().unwrap().0 = device_answer(&format!("{central}/device"));
    app.login().await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while app.login_state() != LoginState::SignedIn {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            app.login_state()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        parts.opened.taken().is_empty(),
        "{:?}",
        parts.opened.taken()
    );
    // Settings refuse a cleartext central URL off loopback too (IT's lock aside).
    let dir2 = tempfile::tempdir().unwrap();
    let (deps, _) = desktop_deps(dir2.path(), MapEnvironment::default());
    let standalone = App::start(deps).await.unwrap();
    let e = standalone
        .update_settings(&json!({"central_url": "http://gatehouse.corp.example"}))
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("plain http is allowed only for a loopback host"),
        "{e}"
    );
}

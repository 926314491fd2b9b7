//! The policy webhook: allow, block, and every way it can fail, in fail-closed and
//! fail-open configurations. A blocked request never reaches the upstream.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use fake_upstream::FakeConfig;
use gatehouse_tests::{TestGateway, base_yaml, sonnet};
use serde_json::{Value, json};

#[derive(Clone, Copy, Debug)]
enum Mode {
    Allow,
    Block,
    Hang,
    Status500,
    NotJson,
    NotObject,
    NoBlockField,
}

#[derive(Default)]
struct Hook {
    mode: Option<Mode>,
    seen: Vec<(HeaderMap, Value)>,
}

type Shared = Arc<Mutex<Hook>>;

async fn hook(State(h): State<Shared>, headers: HeaderMap, body: Bytes) -> (StatusCode, String) {
    let mode = {
        let mut g = h.lock().unwrap();
        g.seen.push((
            headers,
            serde_json::from_slice(&body).unwrap_or(Value::Null),
        ));
        g.mode.unwrap_or(Mode::Allow)
    };
    match mode {
        Mode::Allow => (StatusCode::OK, json!({"block": false}).to_string()),
        Mode::Block => (
            StatusCode::OK,
            json!({"block": true, "reason": "Uploading \u{1b}[31mcustomer data\u{202e} is not allowed\n", "rule_id": "dlp-7"}).to_string(),
        ),
        Mode::Hang => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            (StatusCode::OK, json!({"block": false}).to_string())
        }
        Mode::Status500 => (StatusCode::INTERNAL_SERVER_ERROR, "boom".into()),
        Mode::NotJson => (StatusCode::OK, "allow".into()),
        Mode::NotObject => (StatusCode::OK, "[false]".into()),
        Mode::NoBlockField => (StatusCode::OK, json!({"allow": true}).to_string()),
    }
}

async fn setup(fail_closed: bool) -> (TestGateway, Shared) {
    setup_cri(fail_closed, true).await
}

/// The webhook runs only while CRI is on (`cri.enabled`), as in the reference.
async fn setup_cri(fail_closed: bool, cri_enabled: bool) -> (TestGateway, Shared) {
    let state: Shared = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/check", listener.local_addr().unwrap());
    let app = Router::new()
        .route("/check", post(hook))
        .with_state(state.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    // A workload deployment (CRI on) has its `session`, as the reference requires.
    let session = if cri_enabled {
        "session: {jwt_secret: 0123456789abcdef0123456789abcdef0123}\n"
    } else {
        ""
    };
    let gw = TestGateway::start_with(FakeConfig::default(), move |f, db| {
        format!(
            "{}{session}cri:\n  enabled: {cri_enabled}\n  audience: [gw]\n  org_allowlist: [00000000-0000-0000-0000-000000000001]\n  jwks_url: \"http://127.0.0.1:9/jwks.json\"\n  allow_loopback_jwks: true\n  policy:\n    webhook: {{url: \"{url}\", timeout_ms: 300, fail_closed: {fail_closed}, allow_loopback: true}}\n",
            base_yaml(f, db)
        )
    })
    .await;
    (gw, state)
}

#[tokio::test]
async fn allow_and_block() {
    let (gw, hook) = setup(true).await;
    let r = gw
        .messages(sonnet(false))
        .header("anthropic-beta", "claude-code-20250219")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    {
        let h = hook.lock().unwrap();
        let (headers, body) = &h.seen[0];
        assert_eq!(body["path"], "/v1/messages");
        assert_eq!(body["query"], "?beta=true");
        assert_eq!(body["headers"]["anthropic-beta"], "claude-code-20250219");
        assert_eq!(body["body"], sonnet(false));
        assert_eq!(headers["x-principal-sub"], "key:tester");
        assert!(headers.get("x-request-id").is_some());
        assert!(headers.get("x-api-key").is_none() && headers.get("authorization").is_none());
    }
    hook.lock().unwrap().mode = Some(Mode::Block);
    let r = gw.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.headers()["x-should-retry"], "false");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "policy_blocked");
    assert_eq!(
        v["error"]["message"],
        "Uploading [31mcustomer data is not allowed"
    );
    assert_eq!(
        gw.fake.requests().len(),
        1,
        "the blocked request never reached the upstream"
    );
    let ev = &gw.events.named("policy.blocked")[0];
    assert_eq!(ev["rule_id"], "dlp-7");
}

#[tokio::test]
async fn the_webhook_is_inert_while_cri_is_off() {
    let (gw, hook) = setup_cri(true, false).await;
    hook.lock().unwrap().mode = Some(Mode::Block);
    let r = gw.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        hook.lock().unwrap().seen.is_empty(),
        "the webhook was not called"
    );
}

#[tokio::test]
async fn failures_fail_closed_by_default_and_open_when_configured() {
    for fail_closed in [true, false] {
        let (gw, hook) = setup(fail_closed).await;
        for mode in [
            Mode::Hang,
            Mode::Status500,
            Mode::NotJson,
            Mode::NotObject,
            Mode::NoBlockField,
        ] {
            hook.lock().unwrap().mode = Some(mode);
            let before = gw.fake.requests().len();
            let r = gw.messages(sonnet(false)).send().await.unwrap();
            if fail_closed {
                assert_eq!(r.status(), 400, "{mode:?}");
                let v: Value = r.json().await.unwrap();
                assert_eq!(
                    v["error"]["message"], "policy check unavailable",
                    "{mode:?}"
                );
                assert_eq!(
                    gw.fake.requests().len(),
                    before,
                    "{mode:?}: upstream not called"
                );
            } else {
                assert_eq!(r.status(), 200, "{mode:?}");
                assert_eq!(gw.fake.requests().len(), before + 1);
            }
        }
        let skipped = gw.events.named("policy.skipped").len();
        assert_eq!(skipped, if fail_closed { 0 } else { 5 });
    }
}

#[tokio::test]
async fn a_hung_webhook_is_skipped_after_a_few_failures_and_probed_later() {
    use gatehouse_engine::policy::webhook::{BREAKER_FAILURES, BREAKER_OPEN};
    let (gw, hook) = setup(false).await;
    hook.lock().unwrap().mode = Some(Mode::Hang);
    for _ in 0..8 {
        let r = gw.messages(sonnet(false)).send().await.unwrap();
        assert_eq!(r.status(), 200, "fail open");
    }
    let calls = hook.lock().unwrap().seen.len();
    assert_eq!(
        calls, BREAKER_FAILURES as usize,
        "after {BREAKER_FAILURES} failures the hung webhook is not called again"
    );
    let skipped = gw.events.named("policy.skipped");
    assert_eq!(skipped.len(), 8);
    assert!(
        skipped[7].to_string().contains("circuit open"),
        "{}",
        skipped[7]
    );
    // Once the open period has passed, one probe; it succeeds and the webhook is back.
    hook.lock().unwrap().mode = Some(Mode::Allow);
    tokio::time::sleep(BREAKER_OPEN + std::time::Duration::from_millis(300)).await;
    for _ in 0..2 {
        let r = gw.messages(sonnet(false)).send().await.unwrap();
        assert_eq!(r.status(), 200);
    }
    assert_eq!(hook.lock().unwrap().seen.len(), calls + 2);
    assert_eq!(gw.events.named("policy.skipped").len(), 8);
}

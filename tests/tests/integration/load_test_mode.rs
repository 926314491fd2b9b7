//! `load_test_mode` (issue 15): canned replies instead of upstream calls, made-up
//! developers through `x-load-test-user` that the spend checks see, a refusal to start on
//! a store that holds real spend, and Claude Code taking a canned reply as a real one.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use gatehouse_engine::deps::{Deps, MapEnvironment, NoCredentialStore, SystemClock};
use gatehouse_engine::events::MemoryEventSink;
use gatehouse_engine::server::StartError;
use gatehouse_tests::caps::{ADMIN, msg};
use gatehouse_tests::{
    CLIENT_KEY, SESSION_SECRET_A, TestGateway, base_yaml, load, sign_in_gateway,
};
use serde_json::{Value, json};

const LOAD_TEST: &str = "load_test_mode: {enabled: true, reply_tokens: 30, reply_seconds: 0.4}\n";

#[tokio::test]
async fn canned_replies_stand_in_for_the_upstream_and_made_up_developers_meet_caps() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], &format!("{ADMIN}\n{LOAD_TEST}")).await;
    let base = s.gw.url("");
    // Made-up developer 1 has a zero cap; developer 2 has none.
    gatehouse_tests::caps::set_limit(
        &s.gw.client,
        &base,
        json!({"scope": {"type": "user", "user_id": "alice+loadtest-1"}, "amount": "0",
               "period": "daily"}),
    )
    .await;
    let alice = gatehouse_tests::caps::token(&s.origin, "alice", &["engineering"]);
    let post = |user: &str, body: &Value| {
        s.gw.client
            .post(s.gw.url("/v1/messages"))
            .bearer_auth(&alice)
            .header("anthropic-version", "2023-06-01")
            .header("x-load-test-user", user)
            .json(body)
    };
    let refused = post("1", &msg(16)).send().await.unwrap();
    assert_eq!(
        refused.status(),
        429,
        "the spend check sees the made-up developer"
    );

    let mut streamed = msg(16);
    streamed["stream"] = json!(true);
    let started = Instant::now();
    let r = post("0000002", &streamed).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let text = r.text().await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "a streamed reply lasts reply_seconds"
    );
    let deltas = text.matches("event: content_block_delta").count();
    assert_eq!(deltas, 10, "one delta per three tokens: {text}");
    assert!(text.contains("\"id\":\"msg_loadtest\""), "{text}");
    assert!(text.contains("event: message_stop"), "{text}");

    let r = post("2", &msg(16)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["model"], "load-test");
    assert_eq!(v["usage"]["output_tokens"], 0);
    assert!(
        v["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("[Gatehouse is in load-test mode")
    );

    let r =
        s.gw.client
            .post(s.gw.url("/v1/messages/count_tokens"))
            .bearer_auth(&alice)
            .header("anthropic-version", "2023-06-01")
            .json(&msg(16))
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap(), json!({"input_tokens": 0}));

    for bad in ["abc", "12345678", "-1", ""] {
        let r = post(bad, &msg(16)).send().await.unwrap();
        assert_eq!(r.status(), 400, "{bad:?}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(
            v["error"]["message"],
            "x-load-test-user must be a whole number of at most 7 digits"
        );
    }
    assert!(
        s.gw.fake.requests().is_empty(),
        "nothing reached the upstream"
    );
    let rows = s.gw.usage_rows(3).await;
    let canned: Vec<_> = rows.iter().filter(|r| r.status == 200).collect();
    assert_eq!(canned.len(), 3);
    assert!(canned.iter().all(|r| r.cost_micro_usd == 0));
    assert!(
        canned
            .iter()
            .all(|r| r.route_reason.contains("load_test_mode"))
    );
    assert!(
        rows.iter()
            .any(|r| r.principal == "user:alice+loadtest-2" && r.stream),
        "{rows:?}"
    );
}

#[tokio::test]
async fn a_store_with_real_spend_is_refused() {
    let gw = TestGateway::start().await;
    let r = gw
        .messages(gatehouse_tests::sonnet(false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let rows = gw.usage_rows(1).await;
    assert!(rows[0].cost_micro_usd > 0, "test premise: priced usage");
    let db = gw.db_path();
    let fake_url = gw.fake.url();
    let dir = tempfile::tempdir().unwrap();
    gw.handle.shutdown().await;
    let config = load(
        &format!("{}{LOAD_TEST}", base_yaml(&fake_url, &db)),
        dir.path(),
    );
    let deps = Deps {
        clock: Arc::new(SystemClock),
        env: Arc::new(MapEnvironment::default()),
        credentials: Arc::new(NoCredentialStore),
        events: Arc::new(MemoryEventSink::default()),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let Err(e) = gatehouse_engine::server::start_on(listener, config, deps).await else {
        panic!("load_test_mode started on a store with real spend");
    };
    assert!(matches!(e, StartError::LoadTestRealSpend), "{e}");
    assert!(e.to_string().contains("its own empty database"), "{e}");
}

#[tokio::test]
async fn claude_code_takes_a_canned_reply() {
    let gw = TestGateway::start_with(Default::default(), |url, db| {
        format!("{}{LOAD_TEST}", base_yaml(url, db))
    })
    .await;
    let answer = gatehouse_tests::claude_answer(
        "claude -p",
        "Say hello.",
        &[
            ("ANTHROPIC_BASE_URL", gw.handle.base_url().as_str()),
            ("ANTHROPIC_AUTH_TOKEN", CLIENT_KEY),
        ],
    )
    .await;
    assert!(
        answer.contains("Gatehouse is in load-test mode"),
        "{answer}"
    );
    assert!(
        gw.fake.requests().is_empty(),
        "nothing reached the upstream"
    );
}

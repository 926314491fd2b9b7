//! `admin.billing_group_tag` through the gateway: the tag name rides in the session token
//! the real IdP sign-in mints, the person's group under that tag is recorded on the
//! `inference` event (or `billing_group_ignored` when they are not in it), and neither
//! `tags` nor the request-tags beta reaches the upstream.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use base64::Engine;
use gatehouse_tests::{SESSION_SECRET_A, device_sign_in, sign_in_gateway, sonnet};
use serde_json::{Value, json};

const BETA: &str = "request-tags-2026-08-21";

fn jwt_claims(token: &str) -> Value {
    let part = token.split('.').nth(1).unwrap();
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part)
            .unwrap(),
    )
    .unwrap()
}

#[tokio::test]
async fn the_billing_group_is_recorded_and_tags_never_reach_the_upstream() {
    let s = sign_in_gateway(
        &[SESSION_SECRET_A],
        "admin:\n  billing_group_tag: cost_center\n",
    )
    .await;
    let (status, body) = device_sign_in(&s, "alice").await;
    assert_eq!(status, 200, "{body}");
    let token = body["access_token"].as_str().unwrap().to_owned();
    assert_eq!(jwt_claims(&token)["billing_group_tag"], "cost_center");

    let send = |group: &str, betas: &str| {
        let mut b = sonnet(false);
        b["tags"] = json!({"cost_center": group, "other": "x"});
        s.gw.client
            .post(s.gw.url("/v1/messages"))
            .bearer_auth(&token)
            .header("anthropic-version", "2023-06-01")
            .header("anthropic-beta", betas)
            .json(&b)
            .send()
    };
    // alice is in `engineering`: her group is recorded.
    let r = send(
        "engineering",
        &format!("fine-grained-tool-streaming-2025-05-14,{BETA}"),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    // `sales` is not hers: the tag is ignored, and still stripped.
    let r = send("sales", BETA).await.unwrap();
    assert_eq!(r.status(), 200);

    let requests = s.gw.fake.requests();
    let sent: Vec<_> = requests
        .iter()
        .filter(|r| r.path == "/v1/messages")
        .collect();
    assert_eq!(sent.len(), 2);
    for r in &sent {
        assert!(
            r.body.get("tags").is_none(),
            "tags reached the upstream: {}",
            r.body
        );
        assert_eq!(r.body["model"], sonnet(false)["model"]);
        let betas: Vec<&str> = r
            .headers
            .iter()
            .filter(|(k, _)| k == "anthropic-beta")
            .map(|(_, v)| v.as_str())
            .collect();
        assert!(!betas.iter().any(|b| b.contains(BETA)), "{betas:?}");
    }
    let first_betas: Vec<&str> = sent[0]
        .headers
        .iter()
        .filter(|(k, _)| k == "anthropic-beta")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(first_betas, ["fine-grained-tool-streaming-2025-05-14"]);
    assert!(
        !sent[1].headers.iter().any(|(k, _)| k == "anthropic-beta"),
        "a header holding only the request-tags beta is dropped"
    );

    let mut inference = Vec::new();
    for _ in 0..200 {
        inference = s.gw.events.named("inference");
        if inference.len() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(inference.len(), 2, "{inference:?}");
    let by_group: Vec<(Value, Value)> = inference
        .iter()
        .map(|e| {
            (
                e["billing_group"].clone(),
                e["billing_group_ignored"].clone(),
            )
        })
        .collect();
    assert!(
        by_group.contains(&(json!("engineering"), Value::Null)),
        "{by_group:?}"
    );
    assert!(
        by_group.contains(&(Value::Null, json!(true))),
        "{by_group:?}"
    );
}

#[tokio::test]
async fn client_key_callers_keep_their_body() {
    let s = sign_in_gateway(
        &[SESSION_SECRET_A],
        "admin:\n  billing_group_tag: cost_center\n",
    )
    .await;
    let mut b = sonnet(false);
    b["tags"] = json!({"cost_center": "engineering"});
    let r =
        s.gw.messages(b)
            .header("anthropic-beta", BETA)
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 200);
    let sent = s.gw.fake.requests();
    let last = sent.iter().rfind(|r| r.path == "/v1/messages").unwrap();
    assert_eq!(last.body["tags"]["cost_center"], "engineering");
}

//! `user_profile_id` (2.1.336): for every provider but the raw Anthropic pass-through the
//! field leaves the body and reaches the upstream as `anthropic-user-profile-id`, as
//! Anthropic's provider SDKs send it; a value a header cannot hold is refused with the
//! reference's 400 before any upstream is called. The fake is strict, so Bedrock and Vertex
//! would refuse the field left in the body.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fake_upstream::{FakeConfig, RecordedRequest};
use gatehouse_tests::{CLIENT_KEY, TestGateway};
use serde_json::{Value, json};

const PROFILE: &str = "up_01JGATEHOUSE profile";

/// One upstream of each provider the fake speaks, by name.
fn upstreams() -> [(&'static str, &'static str); 7] {
    [
        (
            "mantle",
            "{name: mantle, provider: mantle, region: us-east-1, base_url: \"{fake}/anthropic\", models: [claude-opus-4-8], auth: {aws_access_key_id: AKIDMANTLE01, aws_secret_access_key: mantle-secret-0123456789}}",
        ),
        (
            "anthropicAws",
            "{name: platform, provider: anthropicAws, region: us-west-2, workspace_id: wrkspc_gh, base_url: \"{fake}\", auth: {api_key: aws-platform-key-0123}}",
        ),
        (
            "bedrock",
            "{name: bedrock, provider: bedrock, region: us-east-1, base_url: \"{fake}\", auth: {aws_access_key_id: AKIDFAKE0123, aws_secret_access_key: bedrock-secret-0123456789}}",
        ),
        (
            "vertex",
            "{name: vertex, provider: vertex, region: us-east5, project_id: proj-1, base_url: \"{fake}/v1\", auth: {access_token: ya29.vertex-token}}",
        ),
        (
            "foundry",
            "{name: foundry, provider: foundry, resource: corp-ai, base_url: \"{fake}/anthropic\", auth: {api_key: foundry-key-0123456}}",
        ),
        (
            "anthropicGoogleCloud",
            "{name: gcp, provider: anthropicGoogleCloud, project_id: proj-1, workspace_id: wrk-1, base_url: \"{fake}/v1/projects/proj-1/locations/global/workspaces/wrk-1/invoke\", auth: {access_token: ya29.gcp-token}}",
        ),
        (
            "anthropic",
            "{name: anthropic, provider: anthropic, base_url: \"{fake}\", auth: {api_key: sk-ant-operator-0123}}",
        ),
    ]
}

async fn gateway(upstream: &str) -> TestGateway {
    let upstream = upstream.to_owned();
    let strict = FakeConfig {
        strict: true,
        ..FakeConfig::default()
    };
    TestGateway::start_with(strict, move |url: &str, db| {
        format!(
            "listen: {{host: 127.0.0.1, port: 0}}\nstore: {{sqlite_path: \"{}\"}}\nupstreams:\n  - {}\nclient_keys: [{{id: tester, key: \"{CLIENT_KEY}\"}}]\n",
            db.display(),
            upstream.replace("{fake}", url)
        )
    })
    .await
}

fn ask(profile: Value) -> Value {
    json!({"model": "claude-opus-4-8", "max_tokens": 64, "user_profile_id": profile,
           "messages": [{"role": "user", "content": "hi"}]})
}

fn header<'a>(req: &'a RecordedRequest, name: &str) -> Option<&'a str> {
    req.headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[tokio::test]
async fn a_profile_id_reaches_each_provider_as_its_header() {
    for (provider, upstream) in upstreams() {
        let gw = gateway(upstream).await;
        let resp = gw.messages(ask(json!(PROFILE))).send().await.unwrap();
        let status = resp.status();
        assert_eq!(status, 200, "{provider}: {}", resp.text().await.unwrap());
        let requests = gw.fake.requests();
        let req = requests.last().unwrap();
        if provider == "anthropic" {
            // The raw pass-through: the body as the caller sent it.
            assert_eq!(req.body["user_profile_id"], PROFILE, "{provider}");
            assert_eq!(header(req, "anthropic-user-profile-id"), None, "{provider}");
        } else {
            assert!(
                req.body.get("user_profile_id").is_none(),
                "{provider}: {}",
                req.body
            );
            assert_eq!(
                header(req, "anthropic-user-profile-id"),
                Some(PROFILE),
                "{provider}"
            );
        }
    }
}

/// `null` leaves the body with no header; count_tokens moves the field too.
#[tokio::test]
async fn null_sends_no_header_and_count_tokens_moves_it_too() {
    let gw = gateway(upstreams()[3].1).await;
    let resp = gw.messages(ask(Value::Null)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let req = gw.fake.requests().pop().unwrap();
    assert!(req.body.get("user_profile_id").is_none(), "{}", req.body);
    assert_eq!(header(&req, "anthropic-user-profile-id"), None);
    let resp = gw
        .client
        .post(gw.url("/v1/messages/count_tokens"))
        .header("x-api-key", CLIENT_KEY)
        .json(
            &json!({"model": "claude-opus-4-8", "user_profile_id": "up_count",
                      "messages": [{"role": "user", "content": "hi"}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let req = gw.fake.requests().pop().unwrap();
    assert!(req.body.get("user_profile_id").is_none(), "{}", req.body);
    assert_eq!(header(&req, "anthropic-user-profile-id"), Some("up_count"));
}

/// A value a header cannot hold is refused as the reference refuses it, and no upstream
/// is called; the raw pass-through leaves it to the upstream.
#[tokio::test]
async fn what_a_header_cannot_hold_is_refused_before_any_upstream() {
    for (provider, upstream) in upstreams().into_iter().take(6) {
        let gw = gateway(upstream).await;
        for bad in [json!("up\n1"), json!("up_\u{1F600}"), json!(42)] {
            let resp = gw.messages(ask(bad.clone())).send().await.unwrap();
            assert_eq!(resp.status(), 400, "{provider}: {bad}");
            let v: Value = resp.json().await.unwrap();
            assert_eq!(
                v["error"],
                json!({"type": "invalid_request_error", "message": "user_profile_id: must be text that a header can hold"}),
                "{provider}: {bad}"
            );
        }
        assert!(gw.fake.requests().is_empty(), "{provider} was called");
    }
    let gw = gateway(upstreams()[6].1).await;
    let resp = gw.messages(ask(json!("up\n1"))).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(gw.fake.requests()[0].body["user_profile_id"], "up\n1");
}

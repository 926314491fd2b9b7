//! `upstreams[].forward_user_identity`: an operator's proxy sees who is asking (sub and
//! email, percent-encoded, as the reference sends them), a caller's spoofed identity
//! headers never pass, and a 429 for a person with an email is relayed instead of failed
//! over. (The startup refusals toward Anthropic-run hosts are config tests.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fake_upstream::Fault;
use gatehouse_engine::deps::MapEnvironment;
use gatehouse_tests::{
    CLIENT_KEY, OPERATOR_KEY, SESSION_SECRET_A, session_token, sign_in_gateway_with, sonnet,
};

fn header<'a>(req: &'a fake_upstream::RecordedRequest, name: &str) -> Option<&'a str> {
    req.headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

const IDENTITY_HEADERS: [&str; 3] = [
    "x-claude-gateway-user-id",
    "x-claude-gateway-user-email",
    "x-litellm-end-user-id",
];

#[tokio::test]
async fn the_proxy_sees_who_asks_and_their_own_429_is_relayed() {
    let setup = |fake: &str| {
        let ups = format!(
            "  - {{name: proxy, provider: anthropic, base_url: \"{fake}\", forward_user_identity: true, auth: {{api_key: \"{OPERATOR_KEY}\"}}}}\n  - {{name: spare, provider: anthropic, base_url: \"{fake}\", auth: {{api_key: \"{OPERATOR_KEY}\"}}}}"
        );
        (ups, MapEnvironment::default())
    };
    let s = sign_in_gateway_with(&[SESSION_SECRET_A], "", &setup).await;
    let gw = &s.gw;
    let token = session_token(&s.origin, "user 7/ü", "zoë@corp.example", &[]);
    let send = |auth: String| {
        gw.client
            .post(gw.url("/v1/messages"))
            .header("authorization", auth)
            .header("x-claude-gateway-user-email", "spoofed@evil.example")
            .header("x-litellm-end-user-id", "spoofed")
            .json(&sonnet(false))
            .send()
    };

    // A signed-in person: both identity headers, percent-encoded, never the caller's own.
    let r = send(format!("Bearer {token}")).await.unwrap();
    assert_eq!(r.status(), 200);
    let req = gw.fake.requests().pop().unwrap();
    assert_eq!(
        header(&req, "x-claude-gateway-user-id"),
        Some("user%207/%C3%BC")
    );
    assert_eq!(
        header(&req, "x-claude-gateway-user-email"),
        Some("zo%C3%AB@corp.example")
    );
    assert_eq!(
        header(&req, "x-litellm-end-user-id"),
        Some("zo%C3%AB@corp.example")
    );
    assert_eq!(header(&req, "x-api-key"), Some(OPERATOR_KEY));

    // The proxy's 429 is that person's limit: relayed, the spare upstream never asked.
    gw.fake.clear_records();
    gw.fake.push_fault(Fault::Status {
        status: 429,
        retry_after: Some(7),
        error_type: None,
        message: Some("end user budget exceeded".into()),
    });
    let r = send(format!("Bearer {token}")).await.unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["retry-after"], "7");
    assert_eq!(gw.fake.requests().len(), 1, "no failover to the spare");

    // A client key has no person behind it: no identity headers (the caller's spoofed
    // ones stay behind), and a 429 fails over as always.
    gw.fake.clear_records();
    gw.fake.push_fault(Fault::Status {
        status: 429,
        retry_after: None,
        error_type: None,
        message: None,
    });
    let r = send(format!("Bearer {CLIENT_KEY}")).await.unwrap();
    assert_eq!(r.status(), 200);
    let reqs = gw.fake.requests();
    assert_eq!(reqs.len(), 2, "failed over to the spare");
    for req in &reqs {
        for h in IDENTITY_HEADERS {
            assert_eq!(header(req, h), None, "{h}");
        }
    }
}

#[tokio::test]
async fn the_spare_without_forwarding_never_sees_identity_headers() {
    let setup = |fake: &str| {
        let ups = format!(
            "  - {{name: plain, provider: anthropic, base_url: \"{fake}\", auth: {{api_key: \"{OPERATOR_KEY}\"}}}}"
        );
        (ups, MapEnvironment::default())
    };
    let s = sign_in_gateway_with(&[SESSION_SECRET_A], "", &setup).await;
    let token = session_token(&s.origin, "u-1", "ana@corp.example", &[]);
    let r =
        s.gw.client
            .post(s.gw.url("/v1/messages"))
            .header("authorization", format!("Bearer {token}"))
            .header("x-claude-gateway-user-id", "spoofed")
            .json(&sonnet(false))
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 200);
    let req = s.gw.fake.requests().pop().unwrap();
    for h in IDENTITY_HEADERS {
        assert_eq!(header(&req, h), None, "{h}");
    }
}

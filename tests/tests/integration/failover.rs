//! Ordered failover across upstreams, with the seed's continue/stop rules, retained-error
//! priority and `route_reason`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use fake_upstream::{FakeConfig, FakeUpstream, Fault};
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, TestGateway, load, sonnet};

/// Two fakes behind one gateway: `a` first, then `b`.
async fn pair(ttfb_ms: u64) -> (TestGateway, FakeUpstream) {
    let b = FakeUpstream::start(FakeConfig {
        reply_text: "from b".into(),
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let b_url = b.url();
    let gw = TestGateway::start_with(FakeConfig::default(), |a_url: &str, db: &Path| {
        format!(
            r#"
listen: {{host: 127.0.0.1, port: 0}}
store: {{sqlite_path: "{db}"}}
timeouts: {{upstream_ttfb_ms: {ttfb_ms}}}
upstreams:
  - {{name: a, provider: anthropic, base_url: "{a_url}", auth: {{api_key: "{OPERATOR_KEY}"}}}}
  - {{name: b, provider: anthropic, base_url: "{b_url}", auth: {{auth_token: "b-token"}}}}
client_keys: [{{id: tester, key: "{CLIENT_KEY}"}}]
"#,
            db = db.display()
        )
    })
    .await;
    (gw, b)
}

async fn text(gw: &TestGateway) -> (u16, reqwest::header::HeaderMap, String) {
    let resp = gw.messages(sonnet(false)).send().await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.text().await.unwrap())
}

#[tokio::test]
async fn fails_over_on_each_retryable_status() {
    for status in [500, 502, 503, 529, 429, 401, 403, 404] {
        let (gw, b) = pair(120_000).await;
        gw.fake.push_fault(Fault::Status {
            status,
            retry_after: Some(1),
            error_type: None,
            message: None,
        });
        let (code, headers, body) = text(&gw).await;
        assert_eq!(code, 200, "after {status}");
        assert!(body.contains("from b"));
        assert_eq!(headers["x-gatehouse-upstream"], "b");
        assert_eq!(headers["x-gatehouse-failover-count"], "1");
        let rows = gw.usage_rows(1).await;
        assert_eq!(rows[0].upstream.as_deref(), Some("b"));
        assert_eq!(rows[0].route_reason, format!("b: after a={status}, ok 200"));
        // b got its own credential.
        let breq = &b.requests()[0];
        assert!(
            breq.headers
                .iter()
                .any(|(k, v)| k == "authorization" && v == "Bearer b-token")
        );
        assert!(breq.headers.iter().all(|(k, _)| k != "x-api-key"));
    }
}

#[tokio::test]
async fn network_errors_and_ttfb_timeout_fail_over() {
    let (gw, b) = pair(300).await;
    gw.fake.push_fault(Fault::ResetBeforeHeaders);
    let (code, _, body) = text(&gw).await;
    assert_eq!(code, 200);
    assert!(body.contains("from b"));
    gw.fake.push_fault(Fault::HangBeforeHeaders { ms: 2_000 });
    let (code, _, _) = text(&gw).await;
    assert_eq!(code, 200);
    let rows = gw.usage_rows(2).await;
    assert_eq!(rows[0].route_reason, "b: after a=ttfb timeout, ok 200");
    assert!(
        rows[1].route_reason.starts_with("b: after a=network error"),
        "{}",
        rows[1].route_reason
    );
    assert_eq!(b.requests().len(), 2);
    // The attempt given up at the first-byte timeout may have been served by `a`: it is
    // charged its worst case on top of b's reported usage, and the row says estimated. A
    // reset before any header was never served: only b's usage counts.
    let worst = gatehouse_tests::caps::worst_case(&sonnet(false));
    assert_eq!(rows[0].usage_source, "estimated");
    assert_eq!(rows[0].cost_micro_usd, rows[1].cost_micro_usd + worst);
    assert_eq!(rows[1].usage_source, "reported");
}

#[tokio::test]
async fn client_errors_never_fail_over_and_pass_through_verbatim() {
    for (status, msg) in [
        (400, "prompt is too long: 210000 tokens > 200000 maximum"),
        (413, "request too large"),
        (422, "unprocessable"),
    ] {
        let (gw, b) = pair(120_000).await;
        gw.fake.push_fault(Fault::Status {
            status,
            retry_after: None,
            error_type: None,
            message: Some(msg.into()),
        });
        let (code, headers, body) = text(&gw).await;
        assert_eq!(code, status);
        assert_eq!(headers["x-gatehouse-upstream"], "a");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            v["error"]["message"], msg,
            "upstream error body must pass unmodified"
        );
        assert!(b.requests().is_empty(), "{status} must not fail over");
    }
}

#[tokio::test]
async fn all_failed_is_502_and_429_is_retained_with_retry_after() {
    let (gw, b) = pair(120_000).await;
    gw.fake.push_fault(Fault::Status {
        status: 500,
        retry_after: None,
        error_type: None,
        message: None,
    });
    // b, the last candidate, is retried once after its 529 (routing.retry): it fails again.
    for _ in 0..2 {
        b.push_fault(Fault::Status {
            status: 529,
            retry_after: None,
            error_type: None,
            message: None,
        });
    }
    let (code, headers, body) = text(&gw).await;
    assert_eq!(code, 502);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["type"], "api_error");
    assert_eq!(v["error"]["message"], "all upstreams failed (3 attempted)");
    assert_eq!(headers["x-gatehouse-failover-count"], "2");

    // Upstream 401s are never relayed: the caller would take them for its own credential.
    gw.fake.push_fault(Fault::Status {
        status: 401,
        retry_after: None,
        error_type: None,
        message: None,
    });
    b.push_fault(Fault::Status {
        status: 403,
        retry_after: None,
        error_type: None,
        message: None,
    });
    let (code, _, body) = text(&gw).await;
    assert_eq!(code, 502);
    assert!(body.contains("all upstreams failed (2 attempted)"));
    // Last: b's 429 cools b down for its retry-after (17 s), which would skip it above.
    gw.fake.push_fault(Fault::Status {
        status: 529,
        retry_after: None,
        error_type: None,
        message: None,
    });
    b.push_fault(Fault::Status {
        status: 429,
        retry_after: Some(17),
        error_type: None,
        message: Some("rate limited at b".into()),
    });
    let (code, headers, body) = text(&gw).await;
    assert_eq!(code, 429);
    assert_eq!(headers["retry-after"], "17");
    assert!(body.contains("rate limited at b"));
    assert!(headers.get("anthropic-ratelimit-requests-limit").is_none());

    let rows = gw.usage_rows(3).await;
    assert_eq!(rows[1].route_reason, "all failed: a=401, b=403");
    assert_eq!(rows[1].status, 502);
    assert_eq!(rows[2].route_reason, "all failed: a=500, b=529, b=529");
}

#[tokio::test]
async fn unmapped_upstream_is_skipped_with_a_reason() {
    let b = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let a = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        r#"
listen: {{host: 127.0.0.1, port: 0}}
store: {{sqlite_path: "{db}"}}
upstreams:
  - {{name: a, provider: anthropic, base_url: "{a}", auth: {{api_key: k}}}}
  - {{name: b, provider: anthropic, base_url: "{b}", auth: {{api_key: k}}}}
models:
  - {{id: corp-model, upstream_model: {{b: corp-model-v2}}}}
client_keys: [{{id: tester, key: "{CLIENT_KEY}"}}]
"#,
        db = dir.path().join("g.db").display(),
        a = a.url(),
        b = b.url()
    );
    let config = load(&yaml, dir.path());
    let gw = TestGateway::start_config(config, a, dir).await;
    let mut body = sonnet(false);
    body["model"] = "corp-model".into();
    let resp = gw.messages(body).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(b.requests()[0].body["model"], "corp-model-v2");
    assert!(gw.fake.requests().is_empty());
    let rows = gw.usage_rows(1).await;
    assert_eq!(
        rows[0].route_reason,
        "b: after a=model not configured, ok 200"
    );
}

//! Bad input and edge guards: every refusal has its status, an Anthropic error envelope
//! where a client reads one, and never reaches the upstream.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};

use fake_upstream::FakeConfig;
use gatehouse_engine::config::embedded_default;
use gatehouse_engine::deps::MapEnvironment;
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, TestGateway, base_yaml, sonnet};

async fn with(extra: &str) -> TestGateway {
    let extra = extra.to_owned();
    TestGateway::start_with(FakeConfig::default(), move |f, db| {
        format!("{}{extra}", base_yaml(f, db))
    })
    .await
}

async fn error_of(resp: reqwest::Response) -> (u16, Option<String>, serde_json::Value) {
    let status = resp.status().as_u16();
    let retry = resp
        .headers()
        .get("x-should-retry")
        .map(|v| v.to_str().unwrap().to_owned());
    assert!(
        resp.headers().get("x-request-id").is_some(),
        "every response has x-request-id"
    );
    assert_eq!(resp.headers()["x-content-type-options"], "nosniff");
    let body = resp.json().await.unwrap_or(serde_json::Value::Null);
    (status, retry, body)
}

#[tokio::test]
async fn credentials_are_required_and_compared() {
    let gw = TestGateway::start().await;
    let resp = gw
        .client
        .post(gw.url("/v1/messages"))
        .json(&sonnet(false))
        .send()
        .await
        .unwrap();
    let (status, retry, body) = error_of(resp).await;
    assert_eq!((status, retry.as_deref()), (401, Some("false")));
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "authentication_error");

    let wrong = "test-client-key-0123456789abcdef012345678X";
    for req in [
        gw.client.post(gw.url("/v1/messages")).bearer_auth(wrong),
        gw.client
            .post(gw.url("/v1/messages"))
            .header("x-api-key", wrong),
        gw.client
            .post(gw.url("/v1/messages"))
            .header("authorization", format!("Basic {CLIENT_KEY}")),
    ] {
        let (status, retry, body) = error_of(req.json(&sonnet(false)).send().await.unwrap()).await;
        assert_eq!((status, retry.as_deref()), (401, Some("false")));
        assert_eq!(body["error"]["type"], "authentication_error");
    }
    let ok = gw
        .client
        .post(gw.url("/v1/messages"))
        .bearer_auth(CLIENT_KEY)
        .json(&sonnet(false))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(gw.fake.requests().len(), 1);
    let denied = gw.events.named("auth.denied");
    assert_eq!(denied.len(), 4);
    assert_eq!(denied[0]["reason"], "missing_credential");
    assert_eq!(denied[1]["reason"], "unknown_key");
    let all = serde_json::to_string(&gw.events.events()).unwrap();
    for secret in [
        CLIENT_KEY,
        wrong,
        OPERATOR_KEY,
        &CLIENT_KEY[..12],
        &OPERATOR_KEY[..12],
    ] {
        assert!(!all.contains(secret), "a secret (or part) reached an event");
    }
}

#[tokio::test]
async fn framing_limits() {
    let gw = with(
        "limits: {max_request_bytes: 2000, max_url_length: 200, max_request_header_bytes: 4000}\n",
    )
    .await;
    let long_url = gw.url(&format!("/v1/messages?x={}", "a".repeat(300)));
    let r = gw
        .client
        .post(long_url)
        .header("x-api-key", CLIENT_KEY)
        .json(&sonnet(false))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(r).await.0, 414);

    let r = gw
        .messages(sonnet(false))
        .header("x-padding", "p".repeat(5000))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(r).await.0, 431);

    let mut big = sonnet(false);
    big["messages"][0]["content"] = "x".repeat(3000).into();
    let r = gw.messages(big).send().await.unwrap();
    let (status, _, body) = error_of(r).await;
    assert_eq!(status, 413);
    assert_eq!(body["error"]["type"], "request_too_large");

    let chunks = futures_util::stream::iter(vec![Ok::<_, std::io::Error>(bytes::Bytes::from(
        sonnet(false).to_string(),
    ))]);
    let r = gw
        .client
        .post(gw.url("/v1/messages"))
        .header("x-api-key", CLIENT_KEY)
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(chunks))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(r).await.0, 411);
    assert!(
        gw.fake.requests().is_empty(),
        "nothing reached the upstream"
    );
}

/// A Content-Length that is not a number never reaches the upstream (hyper's parser refuses
/// it with 400 before the pipeline runs; the pipeline's own check answers 413).
#[tokio::test]
async fn malformed_content_length_is_refused_on_the_wire() {
    let gw = TestGateway::start().await;
    let addr = gw.handle.local_addr();
    for cl in ["-5", "abc", "1, 2"] {
        let raw = format!(
            "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: {CLIENT_KEY}\r\ncontent-length: {cl}\r\n\r\n{{}}"
        );
        let reply = tokio::task::spawn_blocking(move || {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .unwrap();
            s.write_all(raw.as_bytes()).unwrap();
            let mut buf = Vec::new();
            let _ = s.read_to_end(&mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        })
        .await
        .unwrap();
        let status: u16 = reply
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        assert!(
            status == 400 || status == 413,
            "content-length {cl}: {reply}"
        );
    }
    assert!(gw.fake.requests().is_empty());
}

#[tokio::test]
async fn bad_bodies_are_400() {
    let gw = TestGateway::start().await;
    for body in ["{", "[]", "{\"max_tokens\": 5}", "{\"model\": 7}", ""] {
        let r = gw
            .client
            .post(gw.url("/v1/messages"))
            .header("x-api-key", CLIENT_KEY)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let (status, retry, err) = error_of(r).await;
        assert_eq!((status, retry.as_deref()), (400, Some("false")), "{body}");
        assert_eq!(err["error"]["type"], "invalid_request_error");
    }
    let mut unknown = sonnet(false);
    unknown["model"] = "gpt-4o".into();
    let (status, _, err) = error_of(gw.messages(unknown).send().await.unwrap()).await;
    assert_eq!(status, 400);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not in the operator's model allowlist")
    );
    assert!(gw.fake.requests().is_empty());
}

#[tokio::test]
async fn routes_methods_and_public_pages() {
    let gw = TestGateway::start().await;
    let r = gw
        .client
        .get(gw.url("/v1/messages"))
        .header("x-api-key", CLIENT_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["allow"], "POST");
    assert_eq!(error_of(r).await.0, 405);
    let r = gw
        .client
        .get(gw.url("/v1/nothing"))
        .header("x-api-key", CLIENT_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(r).await.0, 404);
    let r = gw.client.get(gw.url("/v1/nothing")).send().await.unwrap();
    assert_eq!(error_of(r).await.0, 401, "unknown paths are not public");

    let r = gw.client.get(gw.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = gw.client.get(gw.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let page = gw.client.get(gw.url("/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"));
    let status = gw
        .client
        .get(gw.url("/gatehouse/api/dashboard"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(status.contains("primary"));
    assert!(!status.contains(OPERATOR_KEY) && !status.contains(&OPERATOR_KEY[..10]));
}

#[tokio::test]
async fn deny_before_health_allow_after_it() {
    let gw = with("access_control: {deny_cidrs: [127.0.0.0/8]}\n").await;
    for path in ["/healthz", "/readyz", "/v1/models"] {
        let r = gw
            .client
            .get(gw.url(path))
            .header("x-api-key", CLIENT_KEY)
            .send()
            .await
            .unwrap();
        assert_eq!(error_of(r).await.0, 403, "{path}");
    }
    let gw = with("access_control: {allow_cidrs: [10.0.0.0/8]}\n").await;
    assert_eq!(
        gw.client
            .get(gw.url("/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let r = gw
        .client
        .get(gw.url("/v1/models"))
        .header("x-api-key", CLIENT_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(r).await.0, 403);
    assert_eq!(gw.events.named("access.denied")[0]["reason"], "allow_cidr");
}

#[tokio::test]
async fn forwarded_for_only_from_trusted_proxies() {
    let trusted = TestGateway::start_with(FakeConfig::default(), |f, db| {
        base_yaml(f, db).replace(
            "listen: {host: 127.0.0.1, port: 0}",
            "listen: {host: 127.0.0.1, port: 0, trusted_proxies: [127.0.0.0/8]}\naccess_control: {allow_cidrs: [203.0.113.0/24]}",
        )
    })
    .await;
    let models = |gw: &TestGateway, xff: &str| {
        gw.client
            .get(gw.url("/v1/models"))
            .header("x-api-key", CLIENT_KEY)
            .header("x-forwarded-for", xff.to_owned())
            .send()
    };
    assert_eq!(models(&trusted, "203.0.113.7").await.unwrap().status(), 200);
    assert_eq!(
        models(&trusted, "198.51.100.1, 203.0.113.7")
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        models(&trusted, "203.0.113.7, 198.51.100.1")
            .await
            .unwrap()
            .status(),
        403
    );
    assert_eq!(models(&trusted, "not-an-ip").await.unwrap().status(), 403);
    let untrusted = with("access_control: {allow_cidrs: [203.0.113.0/24]}\n").await;
    assert_eq!(
        models(&untrusted, "203.0.113.7").await.unwrap().status(),
        403,
        "spoofed XFF must not count"
    );
}

#[tokio::test]
async fn loopback_listener_refuses_foreign_host_names() {
    let gw = TestGateway::start().await;
    let r = gw
        .client
        .get(gw.url("/v1/models"))
        .header("host", "evil.example")
        .header("x-api-key", CLIENT_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(r).await.0, 403);
    assert_eq!(
        gw.events.named("access.denied")[0]["reason"],
        "non_loopback_host"
    );
}

#[tokio::test]
async fn embedded_default_without_upstream_key_says_what_to_set() {
    let fake = fake_upstream::FakeUpstream::start(FakeConfig::default())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = MapEnvironment::default().with_var("GATEHOUSE_ANTHROPIC_BASE_URL", &fake.url());
    let config = embedded_default(&env, dir.path(), Some(0)).unwrap();
    let gw = TestGateway::start_config(config, fake, dir).await;
    let key = gw
        .handle
        .issued_local_key()
        .expect("first start issues a local key")
        .expose()
        .to_owned();
    assert!(key.starts_with("gth_") && key.len() > 40);
    assert_eq!(
        gw.client
            .get(gw.url("/v1/models"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let r = gw
        .client
        .post(gw.url("/v1/messages"))
        .bearer_auth(&key)
        .json(&sonnet(true))
        .send()
        .await
        .unwrap();
    let (status, retry, body) = error_of(r).await;
    assert_eq!((status, retry.as_deref()), (503, Some("false")));
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("set ANTHROPIC_API_KEY")
    );
    assert!(gw.fake.requests().is_empty());

    // A restart on the same database keeps the key and issues no new one.
    let TestGateway {
        handle, fake, dir, ..
    } = gw;
    handle.shutdown().await;
    let env = MapEnvironment::default()
        .with_var("GATEHOUSE_ANTHROPIC_BASE_URL", &fake.url())
        .with_var("ANTHROPIC_API_KEY", OPERATOR_KEY);
    let config = embedded_default(&env, dir.path(), Some(0)).unwrap();
    let gw = TestGateway::start_config(config, fake, dir).await;
    assert!(gw.handle.issued_local_key().is_none());
    let r = gw
        .client
        .post(gw.url("/v1/messages"))
        .bearer_auth(&key)
        .json(&sonnet(false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        gw.fake.requests()[0]
            .headers
            .iter()
            .any(|(k, v)| k == "x-api-key" && v == OPERATOR_KEY)
    );
}

/// `gatehouse serve` serves each connection on one of its connection threads: many
/// connections at once, streams and JSON, each answered in full and metered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_served_on_the_connection_threads() {
    let cfg = FakeConfig {
        output_tokens: 5,
        token_interval_ms: 5,
        ..FakeConfig::default()
    };
    let gw = std::sync::Arc::new(TestGateway::start_with(cfg, base_yaml).await);
    assert_eq!(gw.handle.connection_threads(), 2);
    let mut calls = Vec::new();
    for i in 0..12 {
        let gw = gw.clone();
        calls.push(tokio::spawn(async move {
            // A client of its own: one connection per call, spread over the threads.
            let client = reqwest::Client::builder().no_proxy().build().unwrap();
            let r = client
                .post(gw.url("/v1/messages"))
                .header("x-api-key", CLIENT_KEY)
                .header("anthropic-version", "2023-06-01")
                .json(&sonnet(i % 2 == 0))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            let text = r.text().await.unwrap();
            if i % 2 == 0 {
                assert!(text.contains("event: message_stop"), "{text}");
            } else {
                assert!(text.contains("\"output_tokens\""), "{text}");
            }
        }));
    }
    for c in calls {
        c.await.unwrap();
    }
    let rows = gw.usage_rows(12).await;
    assert_eq!(rows.len(), 12);
    assert!(rows.iter().all(|r| r.status == 200 && r.output_tokens > 0));
}

//! Cloud upstreams against the fake's cloud faces: Bedrock through the AWS SDK (SigV4 or a
//! bearer key, the event stream re-emitted as SSE with pings, betas moved by the
//! capability table, CountTokens, errors cleaned), Vertex (a fixed token or a
//! service-account key whose `token_uri` is the fake) and Foundry. The fake's faces are
//! themselves validated by Anthropic's official cloud SDKs (`cloud_sdks.mjs`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use fake_upstream::{FakeConfig, FakeUpstream, Fault};
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, TestGateway, sonnet};
use serde_json::{Value, json};

const AWS_SECRET: &str = "aws-secret-never-leaks-0123456789";
const BEARER: &str = "bedrock-api-key-never-leaks-0123";
const VERTEX_TOKEN: &str = "ya29.vertex-token-never-leaks";
const FOUNDRY_KEY: &str = "foundry-key-never-leaks-0123456";

/// A gateway whose only upstreams are the `upstreams` YAML lines (`{fake}` is the fake).
async fn gateway(fake: FakeConfig, upstreams: &'static str, extra: &'static str) -> TestGateway {
    TestGateway::start_with(fake, move |url: &str, db: &Path| {
        let ups = upstreams.replace("{fake}", url);
        format!(
            "listen: {{host: 127.0.0.1, port: 0}}\nstore: {{sqlite_path: \"{}\"}}\nupstreams:\n{ups}\nclient_keys: [{{id: tester, key: \"{CLIENT_KEY}\"}}]\n{extra}",
            db.display()
        )
    })
    .await
}

const BEDROCK_KEYS: &str = "  - {name: bedrock, provider: bedrock, region: us-east-1, base_url: \"{fake}\", auth: {aws_access_key_id: AKIDFAKE0123, aws_secret_access_key: aws-secret-never-leaks-0123456789}}";

fn header<'a>(req: &'a fake_upstream::RecordedRequest, name: &str) -> Option<&'a str> {
    req.headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// `(event names, text)` of an SSE body.
fn sse(body: &str) -> (Vec<String>, String) {
    let mut names = Vec::new();
    let mut text = String::new();
    for block in body.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let name = block
            .lines()
            .find_map(|l| l.strip_prefix("event: "))
            .unwrap_or_default();
        names.push(name.to_owned());
        if let Some(data) = block.lines().find_map(|l| l.strip_prefix("data: ")) {
            let v: Value = serde_json::from_str(data).unwrap();
            if let Some(t) = v["delta"]["text"].as_str() {
                text.push_str(t);
            }
        }
    }
    (names, text)
}

#[tokio::test]
async fn bedrock_streams_as_sse_with_betas_placed_by_the_table() {
    let gw = gateway(FakeConfig::default(), BEDROCK_KEYS, "").await;
    let mut body = sonnet(true);
    body["tags"] = json!(["team-a"]);
    let resp = gw
        .messages(body)
        .header(
            "anthropic-beta",
            "claude-code-20250219,interleaved-thinking-2025-05-14,request-tags-2026-08-21",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    assert_eq!(resp.headers()["x-gatehouse-upstream"], "bedrock");
    let (names, text) = sse(&resp.text().await.unwrap());
    assert_eq!(names.first().map(String::as_str), Some("message_start"));
    assert_eq!(names.last().map(String::as_str), Some("message_stop"));
    assert_eq!(text, FakeConfig::default().reply_text);

    let req = &gw.fake.requests()[0];
    assert_eq!(
        req.path,
        "/model/us.anthropic.claude-sonnet-4-6/invoke-with-response-stream"
    );
    assert!(
        header(req, "authorization")
            .unwrap()
            .starts_with("AWS4-HMAC-SHA256 Credential=AKIDFAKE0123/")
    );
    assert_eq!(header(req, "anthropic-beta"), Some("claude-code-20250219"));
    assert_eq!(req.body["anthropic_version"], "bedrock-2023-05-31");
    assert_eq!(
        req.body["anthropic_beta"],
        json!(["interleaved-thinking-2025-05-14"])
    );
    for gone in ["model", "stream", "tags"] {
        assert!(req.body.get(gone).is_none(), "{gone} sent to Bedrock");
    }
    let rows = gw.usage_rows(1).await;
    let cfg = FakeConfig::default();
    assert_eq!(rows[0].upstream.as_deref(), Some("bedrock"));
    assert_eq!(
        rows[0].upstream_model.as_deref(),
        Some("us.anthropic.claude-sonnet-4-6")
    );
    assert_eq!(rows[0].output_tokens, u64::from(cfg.output_tokens));
    assert_eq!(rows[0].input_tokens, u64::from(cfg.input_tokens));
    assert!(
        rows[0]
            .route_reason
            .contains("betas to body: interleaved-thinking-2025-05-14"),
        "{}",
        rows[0].route_reason
    );
    assert!(
        rows[0]
            .route_reason
            .contains("betas dropped: request-tags-2026-08-21")
    );
    assert!(rows[0].route_reason.contains("fields dropped: tags"));
    gw.assert_no_secret(&[AWS_SECRET]);
}

#[tokio::test]
async fn bedrock_json_bearer_key_and_count_tokens() {
    let gw = gateway(
        FakeConfig::default(),
        "  - {name: bedrock, provider: bedrock, region: eu-west-1, base_url: \"{fake}\", auth: {aws_bearer_token: bedrock-api-key-never-leaks-0123}}",
        "",
    )
    .await;
    let resp = gw.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["content"][0]["text"], FakeConfig::default().reply_text);
    let req = &gw.fake.requests()[0];
    assert_eq!(req.path, "/model/eu.anthropic.claude-sonnet-4-6/invoke");
    assert_eq!(
        header(req, "authorization"),
        Some(format!("Bearer {BEARER}").as_str())
    );

    let count = gw
        .client
        .post(gw.url("/v1/messages/count_tokens"))
        .header("x-api-key", CLIENT_KEY)
        .json(&json!({"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": "hi"}], "tools": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(count.status(), 200);
    let c: Value = count.json().await.unwrap();
    assert_eq!(c["input_tokens"], FakeConfig::default().input_tokens);
    let req = &gw.fake.requests()[1];
    assert_eq!(req.path, "/model/anthropic.claude-sonnet-4-6/count-tokens");
    gw.assert_no_secret(&[BEARER]);
}

#[tokio::test]
async fn a_failed_bedrock_count_skips_that_model_for_ten_minutes() {
    let gw = gateway(FakeConfig::default(), BEDROCK_KEYS, "").await;
    let count = |model: &'static str| {
        gw.client
            .post(gw.url("/v1/messages/count_tokens"))
            .header("x-api-key", CLIENT_KEY)
            .json(&json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}))
            .send()
    };
    gw.fake.push_fault(Fault::Status {
        status: 403,
        retry_after: None,
        error_type: None,
        message: Some("User arn:aws:iam::123456789012:user/gw is not authorized to perform: bedrock:CountTokens".into()),
    });
    let first = count("claude-sonnet-4-6").await.unwrap();
    assert_eq!(first.status(), 501);
    assert_eq!(gw.fake.requests().len(), 1);
    // Asked again at once: answered without a round trip to Bedrock.
    let again = count("claude-sonnet-4-6").await.unwrap();
    assert_eq!(again.status(), 501);
    assert_eq!(again.headers()["x-should-retry"], "false");
    let text = again.text().await.unwrap();
    assert!(
        text.contains("not_supported") && !text.contains("123456789012"),
        "{text}"
    );
    assert_eq!(
        gw.fake.requests().len(),
        1,
        "the skipped count reached Bedrock"
    );
    // Another model is counted as usual.
    let other = count("claude-haiku-4-5").await.unwrap();
    assert_eq!(other.status(), 200);
    assert_eq!(gw.fake.requests().len(), 2);
}

#[tokio::test]
async fn bedrock_refuses_a_max_tokens_above_the_models_limit_as_anthropic_does() {
    let gw = gateway(FakeConfig::default(), BEDROCK_KEYS, "").await;
    let mut body = sonnet(false);
    body["model"] = json!("claude-opus-4-1");
    body["max_tokens"] = json!(64000);
    let resp = gw.messages(body.clone()).send().await.unwrap();
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "invalid_request_error");
    // The sentence Claude Code's recovery parses (it lowers max_tokens and asks again).
    let message = v["error"]["message"].as_str().unwrap();
    let model = message
        .strip_prefix(
            "max_tokens: 64000 > 32000, which is the maximum allowed number of output tokens for ",
        )
        .unwrap_or_else(|| panic!("{message}"));
    assert!(model.starts_with("us.anthropic.claude-opus-4-1"), "{model}");
    assert!(gw.fake.requests().is_empty(), "Bedrock was not asked");
    let rows = gw.usage_rows(1).await;
    assert!(
        rows[0]
            .route_reason
            .contains("max_tokens 64000 above bedrock's 32000"),
        "{}",
        rows[0].route_reason
    );
    // Within the limit it goes through.
    body["max_tokens"] = json!(32000);
    let resp = gw.messages(body).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(gw.fake.requests().len(), 1);
}

#[tokio::test]
async fn bedrock_cannot_count_an_inference_profile_and_says_so() {
    let gw = gateway(
        FakeConfig::default(),
        BEDROCK_KEYS,
        "models:\n  - {id: corp-sonnet, upstream_model: {bedrock: \"arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/p1\"}}\n",
    )
    .await;
    let resp = gw
        .client
        .post(gw.url("/v1/messages/count_tokens"))
        .header("x-api-key", CLIENT_KEY)
        .json(&json!({"model": "corp-sonnet", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 501);
    assert_eq!(resp.headers()["x-should-retry"], "false");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "not_supported");
    assert!(gw.fake.requests().is_empty(), "nothing was sent to Bedrock");
}

#[tokio::test]
async fn bedrock_errors_are_cleaned_and_unknown_models_named() {
    let gw = gateway(
        FakeConfig::default(),
        BEDROCK_KEYS,
        "models:\n  - {id: corp-model, upstream_model: {bedrock: fake.unknown-model}}\n",
    )
    .await;
    gw.fake.push_fault(Fault::Status {
        status: 429,
        retry_after: None,
        error_type: None,
        message: None,
    });
    let resp = gw.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(resp.status(), 429);
    let text = resp.text().await.unwrap();
    assert!(
        !text.contains("123456789012"),
        "an account id reached the caller: {text}"
    );
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["error"]["type"], "rate_limit_error");

    let mut body = sonnet(false);
    body["model"] = json!("corp-model");
    let resp = gw.messages(body).send().await.unwrap();
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(
        v["error"]["message"],
        "model `fake.unknown-model` is not available on bedrock"
    );

    // A stream that fails mid-way ends with an error event, without the account id.
    gw.fake
        .push_fault(Fault::MidStreamError { after_deltas: 2 });
    let resp = gw.messages(sonnet(true)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    let (names, _) = sse(&text);
    assert_eq!(names.last().map(String::as_str), Some("error"));
    assert!(!text.contains("123456789012"));
}

#[tokio::test]
async fn bedrock_silence_gets_pings() {
    let gw = gateway(
        FakeConfig {
            first_token_delay_ms: 700,
            ..FakeConfig::default()
        },
        BEDROCK_KEYS,
        "timeouts: {stream_ping_ms: 200}\n",
    )
    .await;
    let resp = gw.messages(sonnet(true)).send().await.unwrap();
    let (names, text) = sse(&resp.text().await.unwrap());
    assert!(names.iter().any(|n| n == "ping"), "{names:?}");
    assert_eq!(text, FakeConfig::default().reply_text);
}

#[tokio::test]
async fn anthropic_529_fails_over_to_bedrock() {
    let bedrock_fake = FakeUpstream::start(FakeConfig {
        reply_text: "from bedrock".into(),
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let burl = bedrock_fake.url();
    let gw = TestGateway::start_with(FakeConfig::default(), move |url: &str, db: &Path| {
        format!(
            "listen: {{host: 127.0.0.1, port: 0}}\nstore: {{sqlite_path: \"{}\"}}\nupstreams:\n  - {{name: anthropic, provider: anthropic, base_url: \"{url}\", auth: {{api_key: \"{OPERATOR_KEY}\"}}}}\n  - {{name: bedrock, provider: bedrock, region: us-west-2, base_url: \"{burl}\", auth: {{aws_access_key_id: AKIDFAKE0123, aws_secret_access_key: {AWS_SECRET}}}}}\nclient_keys: [{{id: tester, key: \"{CLIENT_KEY}\"}}]\n",
            db.display()
        )
    })
    .await;
    gw.fake.push_fault(Fault::Status {
        status: 529,
        retry_after: None,
        error_type: None,
        message: None,
    });
    let resp = gw.messages(sonnet(true)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-gatehouse-upstream"], "bedrock");
    let (_, text) = sse(&resp.text().await.unwrap());
    assert_eq!(text, "from bedrock");
    let rows = gw.usage_rows(1).await;
    assert!(
        rows[0]
            .route_reason
            .starts_with("bedrock: after anthropic=529, ok 200"),
        "{}",
        rows[0].route_reason
    );
}

#[tokio::test]
async fn vertex_with_a_token_and_foundry_with_a_key() {
    let gw = gateway(
        FakeConfig::default(),
        "  - {name: vertex, provider: vertex, region: us-east5, project_id: proj-1, base_url: \"{fake}/v1\", auth: {access_token: ya29.vertex-token-never-leaks}}\n  - {name: foundry, provider: foundry, resource: corp-ai, base_url: \"{fake}/anthropic\", auth: {api_key: foundry-key-never-leaks-0123456}}",
        "",
    )
    .await;
    let mut body = sonnet(true);
    body["tags"] = json!(["x"]);
    let resp = gw
        .messages(body)
        .header(
            "anthropic-beta",
            "claude-code-20250219,request-tags-2026-08-21",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let (_, text) = sse(&resp.text().await.unwrap());
    assert_eq!(text, FakeConfig::default().reply_text);
    let req = &gw.fake.requests()[0];
    assert_eq!(
        req.path,
        "/v1/projects/proj-1/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-6:streamRawPredict"
    );
    assert_eq!(
        header(req, "authorization"),
        Some(format!("Bearer {VERTEX_TOKEN}").as_str())
    );
    assert_eq!(header(req, "anthropic-beta"), Some("claude-code-20250219"));
    assert_eq!(req.body["anthropic_version"], "vertex-2023-10-16");
    assert_eq!(req.body["stream"], true);
    assert!(req.body.get("model").is_none() && req.body.get("tags").is_none());

    let count = gw
        .client
        .post(gw.url("/v1/messages/count_tokens"))
        .header("x-api-key", CLIENT_KEY)
        .json(&json!({"model": "claude-sonnet-4-20250514", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(count.status(), 200);
    let req = &gw.fake.requests()[1];
    assert!(
        req.path
            .ends_with("/publishers/anthropic/models/count-tokens:rawPredict"),
        "{}",
        req.path
    );
    assert_eq!(req.body["model"], "claude-sonnet-4@20250514");

    // Vertex refuses: failover to Foundry, which gets its key as x-api-key.
    gw.fake.push_fault(Fault::Status {
        status: 503,
        retry_after: None,
        error_type: None,
        message: None,
    });
    let resp = gw.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-gatehouse-upstream"], "foundry");
    let req = gw.fake.requests().pop().unwrap();
    assert_eq!(req.path, "/anthropic/v1/messages");
    assert_eq!(header(&req, "x-api-key"), Some(FOUNDRY_KEY));
    assert_eq!(req.body["model"], "claude-sonnet-4-6");
    gw.assert_no_secret(&[VERTEX_TOKEN, FOUNDRY_KEY]);
}

/// A service-account key file (RSA, PKCS#8) whose `token_uri` is the fake's.
fn service_account_file(dir: &Path, token_uri: &str) -> std::path::PathBuf {
    let pem = dir.join("key.pem");
    let out = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
        ])
        .arg(&pem)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = json!({
        "type": "service_account",
        "project_id": "proj-1",
        "private_key_id": "k1",
        "private_key": std::fs::read_to_string(&pem).unwrap(),
        "client_email": "gatehouse@proj-1.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": token_uri,
    });
    let path = dir.join("sa.json");
    std::fs::write(&path, key.to_string()).unwrap();
    path
}

#[tokio::test]
async fn vertex_service_account_tokens_come_from_the_key_files_token_uri() {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sa = service_account_file(dir.path(), &format!("{}/token", fake.url()));
    let db = dir.path().join("gatehouse.db");
    let yaml = format!(
        "listen: {{host: 127.0.0.1, port: 0}}\nstore: {{sqlite_path: \"{}\"}}\nupstreams:\n  - {{name: vertex, provider: vertex, region: global, project_id: proj-1, base_url: \"{}/v1\", auth: {{service_account_json: \"{}\"}}}}\nclient_keys: [{{id: tester, key: \"{CLIENT_KEY}\"}}]\n",
        db.display(),
        fake.url(),
        sa.display()
    );
    let config = gatehouse_tests::load(&yaml, dir.path());
    let gw = TestGateway::start_config(config, fake, dir).await;
    for _ in 0..2 {
        let resp = gw.messages(sonnet(false)).send().await.unwrap();
        assert_eq!(resp.status(), 200);
    }
    let requests = gw.fake.requests();
    let token_calls: Vec<_> = requests.iter().filter(|r| r.path == "/token").collect();
    assert_eq!(token_calls.len(), 1, "the token is cached");
    let inference: Vec<_> = requests.iter().filter(|r| r.path != "/token").collect();
    assert_eq!(inference.len(), 2);
    let expected = format!(
        "Bearer fake-google-token-{}",
        FakeConfig::default().input_tokens
    );
    assert_eq!(
        header(inference[1], "authorization"),
        Some(expected.as_str())
    );
    assert!(
        inference[0]
            .path
            .starts_with("/v1/projects/proj-1/locations/global/")
    );
}

#[tokio::test]
async fn the_fake_cloud_faces_satisfy_the_official_sdks() {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let out = tokio::process::Command::new("node")
        .arg(gatehouse_tests::e2e_dir().join("cloud_sdks.mjs"))
        .env("FAKE_URL", fake.url())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), out)
        .await
        .unwrap()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let reply = FakeConfig::default().reply_text;
    for sdk in ["bedrock", "vertex", "foundry"] {
        let r = &v[sdk];
        assert_eq!(r["json_text"], reply.as_str(), "{sdk}: {r}");
        assert_eq!(r["stream_text"], reply.as_str(), "{sdk}: {r}");
        let events: Vec<&str> = r["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap())
            .collect();
        assert_eq!(events.first(), Some(&"message_start"), "{sdk}");
        assert_eq!(events.last(), Some(&"message_stop"), "{sdk}");
        assert_eq!(
            r["stream_usage"]["output_tokens"],
            FakeConfig::default().output_tokens,
            "{sdk}"
        );
    }
    assert_eq!(
        v["vertex"]["count"]["input_tokens"],
        FakeConfig::default().input_tokens
    );
    assert_eq!(
        v["foundry"]["count"]["input_tokens"],
        FakeConfig::default().input_tokens
    );
}

/// Claude Code (the CLI) through Gatehouse to each cloud face: its request reaches the
/// provider in the provider's shape and its answer comes back.
#[tokio::test]
async fn claude_code_works_through_bedrock_vertex_and_foundry() {
    for (name, upstream) in [
        ("bedrock", BEDROCK_KEYS),
        (
            "vertex",
            "  - {name: vertex, provider: vertex, region: us-east5, project_id: proj-1, base_url: \"{fake}/v1\", auth: {access_token: ya29.vertex-token-never-leaks}}",
        ),
        (
            "foundry",
            "  - {name: foundry, provider: foundry, resource: corp-ai, base_url: \"{fake}/anthropic\", auth: {api_key: foundry-key-never-leaks-0123456}}",
        ),
    ] {
        let gw = gateway(
            FakeConfig {
                reply_text: format!("CLOUD-{name}-OK"),
                ..FakeConfig::default()
            },
            upstream,
            "",
        )
        .await;
        let answer = gatehouse_tests::claude_answer(
            name,
            "Reply with the magic words.",
            &[
                ("ANTHROPIC_BASE_URL", gw.handle.base_url().as_str()),
                ("ANTHROPIC_AUTH_TOKEN", CLIENT_KEY),
                ("CLAUDE_CODE_MAX_RETRIES", "0"),
            ],
        )
        .await;
        assert!(answer.contains(&format!("CLOUD-{name}-OK")), "{answer}");
        let requests = gw.fake.requests();
        let expected = match name {
            "bedrock" => "/invoke-with-response-stream",
            "vertex" => ":streamRawPredict",
            _ => "/anthropic/v1/messages",
        };
        assert!(
            requests.iter().any(|r| r.path.ends_with(expected)),
            "{name}: {:?}",
            requests.iter().map(|r| &r.path).collect::<Vec<_>>()
        );
        let rows = gw.usage_rows(1).await;
        assert!(
            rows.iter().all(|r| r.upstream.as_deref() == Some(name)),
            "{name}"
        );
    }
}

#[tokio::test]
async fn bedrock_guardrail_headers_tags_and_refusals() {
    let gw = gateway(
        FakeConfig::default(),
        "  - {name: bedrock, provider: bedrock, region: us-east-1, base_url: \"{fake}\", guardrail: {id: gr-corp, version: \"3\", input_tagging: user_messages}, guardrail_trace: true, auth: {aws_access_key_id: AKIDFAKE0123, aws_secret_access_key: aws-secret-never-leaks-0123456789}}",
        "",
    )
    .await;
    let resp = gw.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let req = &gw.fake.requests()[0];
    assert_eq!(
        header(req, "x-amzn-bedrock-guardrailidentifier"),
        Some("gr-corp")
    );
    assert_eq!(header(req, "x-amzn-bedrock-guardrailversion"), Some("3"));
    assert_eq!(header(req, "x-amzn-bedrock-trace"), Some("ENABLED"));
    let suffix = req.body["amazon-bedrock-guardrailConfig"]["tagSuffix"]
        .as_str()
        .unwrap();
    let tag = format!("amazon-bedrock-guardrails-guardContent_{suffix}");
    assert_eq!(
        req.body["messages"][0]["content"],
        format!("<{tag}>hello</{tag}>")
    );

    let mut body = sonnet(false);
    body["amazon-bedrock-guardrailConfig"] = json!({"tagSuffix": "mine"});
    let resp = gw.messages(body).send().await.unwrap();
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("amazon-bedrock-guardrailConfig: not accepted")
    );
    assert_eq!(
        gw.fake.requests().len(),
        1,
        "a refused body never reaches Bedrock"
    );
}

#[tokio::test]
async fn bedrock_assume_role_signs_with_the_role_session() {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "listen: {{host: 127.0.0.1, port: 0}}\nstore: {{sqlite_path: \"{}\"}}\nupstreams:\n  - {{name: bedrock, provider: bedrock, region: us-east-1, base_url: \"{}\", assume_role: {{role_arn: \"arn:aws:iam::123456789012:role/claude\", external_id: ext-42}}, auth: {{aws_access_key_id: AKIDSOURCE01, aws_secret_access_key: {AWS_SECRET}}}}}\nclient_keys: [{{id: tester, key: \"{CLIENT_KEY}\"}}]\n",
        dir.path().join("gatehouse.db").display(),
        fake.url()
    );
    let config = gatehouse_tests::load(&yaml, dir.path());
    let env = gatehouse_engine::deps::MapEnvironment::default()
        .with_var("AWS_ENDPOINT_URL_STS", &fake.url());
    let gw = TestGateway::start_config_env(config, fake, dir, env).await;
    for _ in 0..2 {
        let resp = gw.messages(sonnet(false)).send().await.unwrap();
        assert_eq!(resp.status(), 200);
    }
    let requests = gw.fake.requests();
    let sts: Vec<_> = requests.iter().filter(|r| r.path == "/").collect();
    assert_eq!(sts.len(), 1, "the role's credentials are cached");
    let inferred = requests
        .iter()
        .filter(|r| r.path.starts_with("/model/"))
        .count();
    assert!(
        header(sts[0], "authorization")
            .unwrap()
            .contains("Credential=AKIDSOURCE01/"),
        "STS is called with the source keys"
    );
    let session_hex: String = "claude-apps-gateway"
        .bytes()
        .map(|b| format!("{b:02X}"))
        .collect();
    for r in requests.iter().filter(|r| r.path.starts_with("/model/")) {
        let auth = header(r, "authorization").unwrap();
        assert!(
            auth.contains(&format!("Credential=ASIA{session_hex}/")),
            "{auth}"
        );
        assert_eq!(
            header(r, "x-amz-security-token"),
            Some("fake-session-token")
        );
    }

    // Bedrock refuses the role's credentials once: new ones are fetched and the request is
    // sent again, before any failover.
    gw.fake.push_fault(Fault::Status {
        status: 403,
        retry_after: None,
        error_type: None,
        message: None,
    });
    let resp = gw.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let requests = gw.fake.requests();
    assert_eq!(
        requests.iter().filter(|r| r.path == "/").count(),
        2,
        "STS asked again"
    );
    assert_eq!(
        requests
            .iter()
            .filter(|r| r.path.starts_with("/model/"))
            .count(),
        inferred + 2
    );
    let rows = gw.usage_rows(3).await;
    assert_eq!(rows[0].status, 200);
}

/// Signed-in people on Bedrock: each gets a role session named after their email (so
/// CloudTrail shows who), and a person at their cap is refused before anything reaches AWS.
#[tokio::test]
async fn bedrock_role_sessions_per_person_and_caps_before_the_sdk() {
    use gatehouse_tests::caps::{ADMIN, msg, set_limit, token};
    let setup = |url: &str| {
        let ups = format!(
            "  - {{name: bedrock, provider: bedrock, region: us-east-1, base_url: \"{url}\", assume_role: {{role_arn: \"arn:aws:iam::123456789012:role/claude\", session_name: email}}, auth: {{aws_access_key_id: AKIDSOURCE01, aws_secret_access_key: {AWS_SECRET}}}}}"
        );
        let env =
            gatehouse_engine::deps::MapEnvironment::default().with_var("AWS_ENDPOINT_URL_STS", url);
        (ups, env)
    };
    let s =
        gatehouse_tests::sign_in_gateway_with(&[gatehouse_tests::SESSION_SECRET_A], ADMIN, &setup)
            .await;
    let base = s.gw.url("");
    let hex = |t: &str| t.bytes().map(|b| format!("{b:02X}")).collect::<String>();
    for who in ["alice", "bob"] {
        let t = token(&s.origin, who, &["engineering"]);
        let r = gatehouse_tests::caps::infer(&s.gw.client, &base, &t, &msg(16)).await;
        assert_eq!(r.status(), 200, "{who}");
        let req =
            s.gw.fake
                .requests()
                .into_iter()
                .rev()
                .find(|r| r.path.starts_with("/model/"))
                .unwrap();
        let auth = header(&req, "authorization").unwrap().to_owned();
        let session = hex(&format!("{who}@corp.example"));
        assert!(
            auth.contains(&format!("Credential=ASIA{session}/")),
            "{who}: {auth}"
        );
    }
    // A person with a zero cap: refused with the spend 429, nothing sent to STS or Bedrock.
    set_limit(
        &s.gw.client,
        &base,
        json!({"scope": {"type": "user", "user_id": "carol"}, "amount": "0", "period": "daily"}),
    )
    .await;
    let before = s.gw.fake.requests().len();
    let t = token(&s.origin, "carol", &["engineering"]);
    let r = gatehouse_tests::caps::infer(&s.gw.client, &base, &t, &msg(16)).await;
    assert_eq!(r.status(), 429);
    assert_eq!(
        s.gw.fake.requests().len(),
        before,
        "the refusal came before the SDK"
    );
}

/// `upstreams[].groups` and `models` narrow where requests go and what `/v1/models` lists:
/// a key caller (no groups) never reaches a group's upstream, and only the models an
/// upstream it can reach serves are listed. Extra `headers` reach the upstream.
#[tokio::test]
async fn upstream_groups_models_and_headers() {
    let gw = gateway(
        FakeConfig::default(),
        "  - {name: research, provider: anthropic, base_url: \"{fake}\", groups: [research], auth: {api_key: k-research-0123456789}}\n  - {name: haiku, provider: anthropic, base_url: \"{fake}\", models: [\"claude-haiku-*\"], headers: {x-team: platform}, auth: {api_key: k-haiku-0123456789}}",
        "",
    )
    .await;
    let list: Value = gw
        .client
        .get(gw.url("/v1/models"))
        .header("x-api-key", CLIENT_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(!ids.is_empty());
    assert!(
        ids.iter().all(|id| id.starts_with("claude-haiku-")),
        "{ids:?}"
    );

    let resp = gw.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(resp.status(), 400);
    assert!(gw.fake.requests().is_empty());
    let mut haiku = sonnet(false);
    haiku["model"] = json!("claude-haiku-4-5");
    let resp = gw.messages(haiku).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-gatehouse-upstream"], "haiku");
    let req = &gw.fake.requests()[0];
    assert_eq!(header(req, "x-team"), Some("platform"));
    assert_eq!(header(req, "x-api-key"), Some("k-haiku-0123456789"));
}

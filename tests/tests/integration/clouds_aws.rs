//! The Messages API on AWS against the fake's AWS faces: Bedrock Mantle (SigV4 for
//! `bedrock-mantle`, a Bedrock API key, an STS role; `anthropic.` model ids; the
//! request-tags beta and `tags` dropped) and Claude Platform on AWS (SigV4 for
//! `aws-external-anthropic` over the workspace header, or an API key; betas kept as sent).
//! The faces themselves are validated by Anthropic's own clients for them (`aws_sdks.mjs`),
//! and Claude Code runs through Gatehouse to each.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use fake_upstream::{FakeConfig, FakeUpstream, Fault, RecordedRequest};
use gatehouse_tests::{CLIENT_KEY, TestGateway};
use serde_json::{Value, json};

const AWS_SECRET: &str = "aws-secret-never-leaks-0123456789";
const SESSION_TOKEN: &str = "aws-session-token-never-leaks-0123";
const BEARER: &str = "ABSKbWFudGxlLWFwaS1rZXktbmV2ZXItbGVha3M";
const AWS_API_KEY: &str = "aws-platform-key-never-leaks-0123";

const MANTLE_KEYS: &str = "  - {name: mantle, provider: mantle, region: us-east-1, base_url: \"{fake}/anthropic\", models: [claude-opus-4-8, claude-haiku-4-5, claude-sonnet-4-20250514], auth: {aws_access_key_id: AKIDMANTLE01, aws_secret_access_key: aws-secret-never-leaks-0123456789, aws_session_token: aws-session-token-never-leaks-0123}}";
const PLATFORM_KEYS: &str = "  - {name: platform, provider: anthropicAws, region: us-west-2, workspace_id: wrkspc_gh, base_url: \"{fake}\", auth: {aws_access_key_id: AKIDPLATFORM01, aws_secret_access_key: aws-secret-never-leaks-0123456789}}";

async fn gateway(upstreams: &'static str) -> TestGateway {
    TestGateway::start_with(FakeConfig::default(), move |url: &str, db: &Path| {
        format!(
            "listen: {{host: 127.0.0.1, port: 0}}\nstore: {{sqlite_path: \"{}\"}}\nupstreams:\n{}\nclient_keys: [{{id: tester, key: \"{CLIENT_KEY}\"}}]\n",
            db.display(),
            upstreams.replace("{fake}", url)
        )
    })
    .await
}

fn header<'a>(req: &'a RecordedRequest, name: &str) -> Option<&'a str> {
    req.headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn opus(stream: bool) -> Value {
    json!({"model": "claude-opus-4-8", "max_tokens": 256, "stream": stream,
           "messages": [{"role": "user", "content": "hi"}]})
}

async fn count(gw: &TestGateway, model: &str) -> reqwest::Response {
    gw.client
        .post(gw.url("/v1/messages/count_tokens?beta=true"))
        .header("x-api-key", CLIENT_KEY)
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap()
}

/// The `Authorization` of a request signed for `service` in `region` with `key`.
fn assert_signed(req: &RecordedRequest, key: &str, region: &str, service: &str) {
    let auth = header(req, "authorization").unwrap();
    assert!(
        auth.starts_with(&format!("AWS4-HMAC-SHA256 Credential={key}/")),
        "{auth}"
    );
    assert!(
        auth.contains(&format!("/{region}/{service}/aws4_request")),
        "{auth}"
    );
    assert!(header(req, "x-amz-date").is_some());
}

/// Whether the request named its body's SHA-256 (the fake refuses one that is not the
/// body's, or a SigV4 request without it signed), and whether the signature covers it.
fn body_hash(req: &RecordedRequest) -> Option<bool> {
    let hash = header(req, "x-amz-content-sha256")?;
    assert!(
        hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()),
        "{hash}"
    );
    let auth = header(req, "authorization").unwrap_or_default();
    Some(auth.contains("x-amz-content-sha256"))
}

#[tokio::test]
async fn the_fake_aws_faces_satisfy_the_official_sdks() {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let v = gatehouse_tests::node_json("aws_sdks.mjs", &[], &[("FAKE_URL", &fake.url())]).await;
    let cfg = FakeConfig::default();
    for sdk in ["mantle", "mantle_session", "aws_sigv4", "aws_key"] {
        let r = &v[sdk];
        assert_eq!(r["json_text"], cfg.reply_text.as_str(), "{sdk}: {r}");
        assert_eq!(r["stream_text"], cfg.reply_text.as_str(), "{sdk}: {r}");
        let events = r["events"].as_array().unwrap();
        assert_eq!(events.first().unwrap(), "message_start", "{sdk}");
        assert_eq!(events.last().unwrap(), "message_stop", "{sdk}");
        assert_eq!(
            r["stream_usage"]["output_tokens"], cfg.output_tokens,
            "{sdk}"
        );
        assert_eq!(r["count"]["input_tokens"], cfg.input_tokens, "{sdk}");
    }
    // Each face refuses a request signed for the other's service.
    assert_eq!(v["mantle_signed_for_aws"], 403, "{v}");
    assert_eq!(v["aws_signed_for_mantle"], 403, "{v}");
    let requests = fake.requests();
    let mantle = requests
        .iter()
        .find(|r| r.path == "/anthropic/v1/messages")
        .unwrap();
    assert_signed(mantle, "AKIDFAKEFAKEFAKE", "us-east-1", "bedrock-mantle");
    // The official clients sign the body's hash too: the fake's check is theirs.
    assert_eq!(body_hash(mantle), Some(true));
    let platform = requests
        .iter()
        .find(|r| {
            r.path == "/v1/messages"
                && header(r, "authorization").is_some_and(|a| a.starts_with("AWS4-HMAC-SHA256 "))
        })
        .unwrap();
    assert_signed(
        platform,
        "AKIDFAKEFAKEFAKE",
        "us-west-2",
        "aws-external-anthropic",
    );
    assert_eq!(body_hash(platform), Some(true));
    assert_eq!(
        header(platform, "anthropic-workspace-id"),
        Some("wrkspc_fake")
    );
    let keyed = requests.iter().find(|r| {
        r.path == "/v1/messages" && header(r, "authorization") == Some("Bearer fake-aws-api-key")
    });
    assert!(
        keyed.is_some(),
        "AnthropicAws sends its API key as a bearer token"
    );
}

#[tokio::test]
async fn mantle_signs_for_its_service_and_drops_request_tags() {
    let gw = gateway(MANTLE_KEYS).await;
    let mut body = opus(true);
    body["tags"] = json!(["team-a"]);
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
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let text = resp.text().await.unwrap();
    assert!(text.contains("event: message_stop"), "{text}");

    let req = &gw.fake.requests()[0];
    assert_eq!(req.path, "/anthropic/v1/messages");
    assert_eq!(req.query.as_deref(), Some("beta=true"));
    assert_signed(req, "AKIDMANTLE01", "us-east-1", "bedrock-mantle");
    assert_eq!(body_hash(req), Some(true), "the body's hash, signed");
    assert_eq!(header(req, "x-amz-security-token"), Some(SESSION_TOKEN));
    assert_eq!(header(req, "anthropic-beta"), Some("claude-code-20250219"));
    assert_eq!(req.body["model"], "anthropic.claude-opus-4-8");
    assert_eq!(req.body["stream"], true);
    assert!(req.body.get("tags").is_none(), "tags sent to Mantle");
    let rows = gw.usage_rows(1).await;
    assert_eq!(rows[0].upstream.as_deref(), Some("mantle"));
    assert_eq!(
        rows[0].upstream_model.as_deref(),
        Some("anthropic.claude-opus-4-8")
    );
    assert!(
        rows[0]
            .route_reason
            .contains("betas dropped: request-tags-2026-08-21"),
        "{}",
        rows[0].route_reason
    );
    assert!(rows[0].route_reason.contains("fields dropped: tags"));

    // count_tokens: the SDK's count call, with the Mantle id.
    let c = count(&gw, "claude-haiku-4-5").await;
    assert_eq!(c.status(), 200);
    let c: Value = c.json().await.unwrap();
    assert_eq!(c["input_tokens"], FakeConfig::default().input_tokens);
    let req = &gw.fake.requests()[1];
    assert_eq!(req.path, "/anthropic/v1/messages/count_tokens");
    assert_eq!(req.body["model"], "anthropic.claude-haiku-4-5");
    assert_signed(req, "AKIDMANTLE01", "us-east-1", "bedrock-mantle");
    assert_eq!(body_hash(req), Some(true));

    // A model Mantle does not serve never reaches it.
    let mut old = opus(false);
    old["model"] = json!("claude-sonnet-4-20250514");
    let resp = gw.messages(old).send().await.unwrap();
    assert!(resp.status().is_client_error(), "{}", resp.status());
    assert_eq!(gw.fake.requests().len(), 2);
    gw.assert_no_secret(&[AWS_SECRET, SESSION_TOKEN]);
}

#[tokio::test]
async fn mantle_with_a_bedrock_api_key_and_errors_cleaned() {
    let gw = gateway(
        "  - {name: mantle, provider: mantle, region: eu-west-1, base_url: \"{fake}/anthropic\", models: [claude-opus-4-8], auth: {aws_bearer_token: ABSKbWFudGxlLWFwaS1rZXktbmV2ZXItbGVha3M}}",
    )
    .await;
    let resp = gw.messages(opus(false)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["content"][0]["text"], FakeConfig::default().reply_text);
    let req = &gw.fake.requests()[0];
    assert_eq!(
        header(req, "authorization"),
        Some(format!("Bearer {BEARER}").as_str())
    );
    assert!(header(req, "x-amz-date").is_none());
    // Mantle names the body's hash whatever its authentication (2.1.334).
    assert_eq!(body_hash(req), Some(false));

    // An account id in the provider's error stays in the operator log.
    let arn = "User: arn:aws:iam::123456789012:user/x is not authorized";
    for (status, error_type) in [(429, "rate_limit_error"), (403, "permission_error")] {
        gw.fake.push_fault(Fault::Status {
            status,
            retry_after: None,
            error_type: Some(error_type.into()),
            message: Some(arn.into()),
        });
        let resp = gw.messages(opus(false)).send().await.unwrap();
        assert!(!resp.status().is_success());
        let body = resp.text().await.unwrap();
        assert!(!body.contains("123456789012"), "{body}");
    }
    assert_eq!(
        gw.fake.requests().len(),
        3,
        "a fixed key is not asked again after a 403"
    );
    gw.assert_no_secret(&[BEARER]);
}

#[tokio::test]
async fn mantle_assume_role_signs_with_the_role_session_and_refreshes_once() {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "listen: {{host: 127.0.0.1, port: 0}}\nstore: {{sqlite_path: \"{}\"}}\nupstreams:\n  - {{name: mantle, provider: mantle, region: us-east-1, base_url: \"{}/anthropic\", models: [claude-opus-4-8], assume_role: {{role_arn: \"arn:aws:iam::123456789012:role/claude\", external_id: ext-42}}, auth: {{aws_access_key_id: AKIDSOURCE01, aws_secret_access_key: {AWS_SECRET}}}}}\nclient_keys: [{{id: tester, key: \"{CLIENT_KEY}\"}}]\n",
        dir.path().join("gatehouse.db").display(),
        fake.url()
    );
    let config = gatehouse_tests::load(&yaml, dir.path());
    let env = gatehouse_engine::deps::MapEnvironment::default()
        .with_var("AWS_ENDPOINT_URL_STS", &fake.url());
    let gw = TestGateway::start_config_env(config, fake, dir, env).await;
    for _ in 0..2 {
        let resp = gw.messages(opus(false)).send().await.unwrap();
        assert_eq!(resp.status(), 200);
    }
    let requests = gw.fake.requests();
    let sts: Vec<_> = requests.iter().filter(|r| r.path == "/").collect();
    assert_eq!(sts.len(), 1, "the role's credentials are cached");
    assert!(
        header(sts[0], "authorization")
            .unwrap()
            .contains("Credential=AKIDSOURCE01/")
    );
    let session_hex: String = "claude-apps-gateway"
        .bytes()
        .map(|b| format!("{b:02X}"))
        .collect();
    let inference = |rs: &[RecordedRequest]| {
        rs.iter()
            .filter(|r| r.path == "/anthropic/v1/messages")
            .count()
    };
    for r in requests
        .iter()
        .filter(|r| r.path == "/anthropic/v1/messages")
    {
        assert_signed(
            r,
            &format!("ASIA{session_hex}"),
            "us-east-1",
            "bedrock-mantle",
        );
        assert_eq!(
            header(r, "x-amz-security-token"),
            Some("fake-session-token")
        );
    }
    // Mantle refuses the role's credentials once: new ones, and the request again.
    gw.fake.push_fault(Fault::Status {
        status: 403,
        retry_after: None,
        error_type: None,
        message: None,
    });
    let resp = gw.messages(opus(false)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let after = gw.fake.requests();
    assert_eq!(
        after.iter().filter(|r| r.path == "/").count(),
        2,
        "STS asked again"
    );
    assert_eq!(inference(&after), inference(&requests) + 2);
    gw.assert_no_secret(&[AWS_SECRET]);
}

#[tokio::test]
async fn anthropic_aws_signs_the_workspace_and_keeps_betas() {
    let gw = gateway(PLATFORM_KEYS).await;
    let mut body = opus(true);
    body["tags"] = json!(["team-a"]);
    let betas = "claude-code-20250219,request-tags-2026-08-21";
    let resp = gw
        .messages(body)
        .header("anthropic-beta", betas)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.text().await.unwrap().contains("event: message_stop"));
    let req = &gw.fake.requests()[0];
    assert_eq!(req.path, "/v1/messages");
    assert_signed(req, "AKIDPLATFORM01", "us-west-2", "aws-external-anthropic");
    let auth = header(req, "authorization").unwrap();
    assert!(auth.contains("anthropic-workspace-id"), "{auth}");
    assert_eq!(body_hash(req), Some(true));
    assert_eq!(header(req, "anthropic-workspace-id"), Some("wrkspc_gh"));
    assert_eq!(header(req, "anthropic-beta"), Some(betas));
    assert_eq!(req.body["model"], "claude-opus-4-8");
    assert_eq!(req.body["tags"], json!(["team-a"]));
    let c = count(&gw, "claude-opus-4-8").await;
    assert_eq!(c.status(), 200);
    let req = &gw.fake.requests()[1];
    assert_eq!(req.path, "/v1/messages/count_tokens");
    assert_eq!(header(req, "anthropic-workspace-id"), Some("wrkspc_gh"));
    gw.assert_no_secret(&[AWS_SECRET]);
}

#[tokio::test]
async fn anthropic_aws_with_an_api_key() {
    let gw = gateway(
        "  - {name: platform, provider: anthropicAws, region: us-west-2, workspace_id: wrkspc_gh, base_url: \"{fake}\", auth: {api_key: aws-platform-key-never-leaks-0123}}",
    )
    .await;
    let resp = gw.messages(opus(false)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let c = count(&gw, "claude-opus-4-8").await;
    assert_eq!(c.status(), 200);
    // Sent as `AnthropicAws` 1.1.2 (on the Anthropic SDK 1.x) sends an API key.
    for req in gw.fake.requests() {
        assert_eq!(
            header(&req, "authorization"),
            Some(format!("Bearer {AWS_API_KEY}").as_str())
        );
        assert!(header(&req, "x-api-key").is_none());
        assert_eq!(body_hash(&req), None, "no body hash with an API key");
        assert_eq!(header(&req, "anthropic-workspace-id"), Some("wrkspc_gh"));
    }
    gw.assert_no_secret(&[AWS_API_KEY]);
}

/// Claude Code (the CLI) through Gatehouse to each AWS face: its streamed request reaches
/// the provider signed and in the provider's shape, and its answer comes back.
#[tokio::test]
async fn claude_code_works_through_mantle_and_anthropic_aws() {
    for (name, upstream, path) in [
        ("mantle", MANTLE_KEYS, "/anthropic/v1/messages"),
        ("platform", PLATFORM_KEYS, "/v1/messages"),
    ] {
        let gw = TestGateway::start_with(
            FakeConfig {
                reply_text: format!("CLOUD-{name}-OK"),
                ..FakeConfig::default()
            },
            move |url: &str, db: &Path| {
                format!(
                    "listen: {{host: 127.0.0.1, port: 0}}\nstore: {{sqlite_path: \"{}\"}}\nupstreams:\n{}\nclient_keys: [{{id: tester, key: \"{CLIENT_KEY}\"}}]\n",
                    db.display(),
                    upstream.replace("{fake}", url)
                )
            },
        )
        .await;
        let answer = gatehouse_tests::claude_answer(
            name,
            "Reply with the magic words.",
            &[
                ("ANTHROPIC_BASE_URL", gw.handle.base_url().as_str()),
                ("ANTHROPIC_AUTH_TOKEN", CLIENT_KEY),
                ("ANTHROPIC_MODEL", "claude-opus-4-8"),
                ("ANTHROPIC_SMALL_FAST_MODEL", "claude-haiku-4-5"),
                ("CLAUDE_CODE_MAX_RETRIES", "0"),
            ],
        )
        .await;
        assert!(answer.contains(&format!("CLOUD-{name}-OK")), "{answer}");
        let requests = gw.fake.requests();
        let streamed = requests
            .iter()
            .find(|r| r.path == path && r.body["stream"] == true)
            .unwrap_or_else(|| panic!("{name}: no streamed request"));
        assert!(
            header(streamed, "authorization")
                .unwrap()
                .starts_with("AWS4-HMAC-SHA256 "),
            "{name}"
        );
        let rows = gw.usage_rows(1).await;
        assert!(
            rows.iter().all(|r| r.upstream.as_deref() == Some(name)),
            "{name}"
        );
        gw.assert_no_secret(&[AWS_SECRET, SESSION_TOKEN]);
    }
}

//! Claude Platform on Google Cloud (`provider: anthropicGoogleCloud`) and workload-identity
//! federation with Anthropic (`provider: anthropic` with `auth.federation_rule_id`) against
//! the fake's platform faces: the fake is first validated by Anthropic's own SDKs
//! (`platform_sdks.mjs`: `AnthropicGoogleCloud` and the Anthropic SDK 1.x's federation
//! credentials), then Claude Code and plain HTTP callers go through Gatehouse to it. The
//! Google token, the identity JWT and the exchanged tokens never reach events or the
//! database.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use base64::Engine;
use fake_upstream::{FEDERATED_PREFIX, FakeConfig, RecordedRequest};
use gatehouse_tests::{CLIENT_KEY, TestGateway, sonnet};
use serde_json::{Value, json};

const GOOGLE_TOKEN: &str = "ya29.google-cloud-token-never-leaks";
const GOOGLE_PATH: &str = "/v1/projects/proj-1/locations/global/workspaces/wrk-1/invoke";
const ORG: &str = "00000000-0000-4000-8000-000000000000";

fn header<'a>(req: &'a RecordedRequest, name: &str) -> Option<&'a str> {
    req.headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// An identity token as a platform mounts it: a JWT (its signature is the IdP's business;
/// the exchange checks it).
fn jwt(subject: &str) -> String {
    let b64 = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    format!(
        "{}.{}.c2lnbmF0dXJlLW5ldmVyLWxlYWtz",
        b64(json!({"alg": "RS256", "typ": "JWT", "kid": "k1"})),
        b64(
            json!({"iss": "https://idp.example", "sub": subject, "aud": "https://api.anthropic.com"})
        )
    )
}

fn identity_file(dir: &Path, subject: &str) -> (PathBuf, String) {
    let path = dir.join("identity-token");
    let token = jwt(subject);
    std::fs::write(&path, format!("{token}\n")).unwrap();
    (path, token)
}

fn yaml(db: &Path, upstream: &str) -> String {
    format!(
        "listen: {{host: 127.0.0.1, port: 0}}\nstore: {{sqlite_path: \"{}\"}}\nupstreams:\n{upstream}\nclient_keys: [{{id: tester, key: \"{CLIENT_KEY}\"}}]\n",
        db.display()
    )
}

fn google_cloud(fake: &str) -> String {
    format!(
        "  - {{name: gcp, provider: anthropicGoogleCloud, project_id: proj-1, workspace_id: wrk-1, base_url: \"{fake}{GOOGLE_PATH}\", auth: {{access_token: {GOOGLE_TOKEN}}}}}"
    )
}

fn federation(fake: &str, rule: &str, file: &Path) -> String {
    format!(
        "  - {{name: fed, provider: anthropic, base_url: \"{fake}\", auth: {{federation_rule_id: {rule}, organization_id: \"{ORG}\", identity_token_file: \"{}\", workspace_id: wrkspc_1}}}}",
        file.display()
    )
}

fn exchanges(gw: &TestGateway) -> Vec<RecordedRequest> {
    gw.fake
        .requests()
        .into_iter()
        .filter(|r| r.path == "/v1/oauth/token")
        .collect()
}

#[tokio::test]
async fn the_fake_platform_faces_satisfy_the_official_sdks() {
    let fake = fake_upstream::FakeUpstream::start(FakeConfig::default())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (file, token) = identity_file(dir.path(), "sdk");
    // The first exchanged token is refused: the SDK drops it, exchanges again and retries.
    fake.refuse_key(&format!("{FEDERATED_PREFIX}1"), 401, None);
    let v = gatehouse_tests::node_json(
        "platform_sdks.mjs",
        &[],
        &[
            ("FAKE_URL", fake.url().as_str()),
            ("IDENTITY_TOKEN_FILE", file.to_str().unwrap()),
        ],
    )
    .await;
    let cfg = FakeConfig::default();
    for sdk in ["google_cloud", "federation"] {
        let r = &v[sdk];
        assert_eq!(r["json_text"], cfg.reply_text.as_str(), "{sdk}: {r}");
        assert_eq!(r["stream_text"], cfg.reply_text.as_str(), "{sdk}: {r}");
        assert_eq!(r["events"][0], "message_start", "{sdk}");
        assert_eq!(
            r["stream_usage"]["output_tokens"], cfg.output_tokens,
            "{sdk}"
        );
        assert_eq!(r["count"]["input_tokens"], cfg.input_tokens, "{sdk}");
    }
    let requests = fake.requests();
    let google: Vec<&RecordedRequest> = requests
        .iter()
        .filter(|r| r.path.starts_with("/v1/projects/"))
        .collect();
    assert_eq!(google.len(), 3);
    assert_eq!(
        google[2].path,
        "/v1/projects/fake-project/locations/global/workspaces/wrk-fake/invoke/v1/messages/count_tokens"
    );
    assert_eq!(
        header(google[0], "authorization"),
        Some("Bearer ya29.fake-google-token")
    );
    let exchanges: Vec<&RecordedRequest> = requests
        .iter()
        .filter(|r| r.path == "/v1/oauth/token")
        .collect();
    assert_eq!(
        exchanges.len(),
        2,
        "one exchange, and one more after the 401"
    );
    let body = &exchanges[0].body;
    assert_eq!(
        body["grant_type"],
        "urn:ietf:params:oauth:grant-type:jwt-bearer"
    );
    assert_eq!(body["assertion"], token.as_str());
    assert_eq!(body["federation_rule_id"], "fdrl_fake");
    assert_eq!(body["workspace_id"], "wrkspc_fake");
    assert_eq!(
        header(exchanges[0], "anthropic-beta"),
        Some("oauth-2025-04-20,oidc-federation-2026-04-01")
    );
    let last = requests.last().unwrap();
    assert_eq!(
        header(last, "authorization"),
        Some(format!("Bearer {FEDERATED_PREFIX}2").as_str())
    );
}

/// Claude Code (the CLI) through Gatehouse to Claude Platform on Google Cloud: a streamed
/// answer; then `count_tokens`, both on the workspace's path with the Google token.
#[tokio::test]
async fn claude_code_works_through_anthropic_google_cloud() {
    let gw = TestGateway::start_with(
        FakeConfig {
            reply_text: "CLOUD-gcp-OK".into(),
            ..FakeConfig::default()
        },
        |url, db| yaml(db, &google_cloud(url)),
    )
    .await;
    let out = claude(&gw).await;
    assert!(out.contains("CLOUD-gcp-OK"), "{out}");
    let requests = gw.fake.requests();
    let messages = requests
        .iter()
        .find(|r| r.path == format!("{GOOGLE_PATH}/v1/messages"))
        .unwrap_or_else(|| panic!("{:?}", requests.iter().map(|r| &r.path).collect::<Vec<_>>()));
    assert_eq!(
        header(messages, "authorization"),
        Some(format!("Bearer {GOOGLE_TOKEN}").as_str())
    );
    assert!(header(messages, "x-api-key").is_none());
    assert_eq!(messages.body["stream"], true);
    assert!(
        messages.body["model"]
            .as_str()
            .unwrap()
            .starts_with("claude-")
    );

    let count = gw
        .client
        .post(gw.url("/v1/messages/count_tokens"))
        .header("x-api-key", CLIENT_KEY)
        .header("anthropic-beta", "token-counting-2024-11-01")
        .json(&json!({"model": "claude-opus-4-8", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(count.status(), 200);
    let counted: Value = count.json().await.unwrap();
    assert_eq!(counted["input_tokens"], FakeConfig::default().input_tokens);
    let req = gw.fake.requests().pop().unwrap();
    assert_eq!(req.path, format!("{GOOGLE_PATH}/v1/messages/count_tokens"));
    assert_eq!(req.body["model"], "claude-opus-4-8");
    assert_eq!(
        header(&req, "anthropic-beta"),
        Some("token-counting-2024-11-01")
    );
    // A workspace in the body is the gateway's to refuse.
    let mut body = sonnet(false);
    body["workspace_id"] = json!("wrk-other");
    let resp = gw.messages(body).send().await.unwrap();
    assert_eq!(resp.status(), 400);
    gw.assert_no_secret(&[GOOGLE_TOKEN]);
}

/// Claude Code through Gatehouse to the Anthropic API with workload-identity federation:
/// the first exchanged token is refused (401), Gatehouse exchanges once more and the
/// answer arrives; later requests reuse the cached token.
#[tokio::test]
async fn federation_exchanges_caches_and_retries_once_after_a_401() {
    let dir = tempfile::tempdir().unwrap();
    let (file, first_jwt) = identity_file(dir.path(), "ci-runner");
    let f = file.clone();
    let gw = TestGateway::start_with(
        FakeConfig {
            reply_text: "FEDERATED-OK".into(),
            ..FakeConfig::default()
        },
        move |url, db| yaml(db, &federation(url, "fdrl_1", &f)),
    )
    .await;
    gw.fake
        .refuse_key(&format!("{FEDERATED_PREFIX}1"), 401, None);
    let out = claude(&gw).await;
    assert!(out.contains("FEDERATED-OK"), "{out}");
    let ex = exchanges(&gw);
    assert_eq!(ex.len(), 2, "one exchange and one after the 401");
    let body = &ex[0].body;
    assert_eq!(
        body["grant_type"],
        "urn:ietf:params:oauth:grant-type:jwt-bearer"
    );
    assert_eq!(
        body["assertion"],
        first_jwt.as_str(),
        "the file's JWT, trimmed"
    );
    assert_eq!(body["federation_rule_id"], "fdrl_1");
    assert_eq!(body["organization_id"], ORG);
    assert_eq!(body["workspace_id"], "wrkspc_1");
    assert!(body.get("service_account_id").is_none());
    assert_eq!(
        header(&ex[0], "anthropic-beta"),
        Some("oauth-2025-04-20,oidc-federation-2026-04-01")
    );
    let calls: Vec<RecordedRequest> = gw
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.path == "/v1/messages")
        .collect();
    assert_eq!(
        header(&calls[0], "authorization"),
        Some(format!("Bearer {FEDERATED_PREFIX}1").as_str())
    );
    let last = calls.last().unwrap();
    assert_eq!(
        header(last, "authorization"),
        Some(format!("Bearer {FEDERATED_PREFIX}2").as_str())
    );
    assert!(
        header(last, "anthropic-beta")
            .unwrap()
            .split(',')
            .any(|b| b == "oauth-2025-04-20")
    );
    assert!(header(last, "x-api-key").is_none());

    // Cached: no exchange for the next request.
    let resp = gw.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(exchanges(&gw).len(), 2);

    // The file rotates; the next exchange (after a refusal) presents the new JWT.
    let (_, second_jwt) = identity_file(dir.path(), "ci-runner-rotated");
    gw.fake
        .refuse_key(&format!("{FEDERATED_PREFIX}2"), 401, None);
    let resp = gw.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let ex = exchanges(&gw);
    assert_eq!(ex.len(), 3);
    assert_eq!(ex[2].body["assertion"], second_jwt.as_str());

    // Refused twice in a row: the 401 is the answer (one retry only).
    gw.fake
        .refuse_key(&format!("{FEDERATED_PREFIX}3"), 401, None);
    gw.fake
        .refuse_key(&format!("{FEDERATED_PREFIX}4"), 401, None);
    let resp = gw.messages(sonnet(false)).send().await.unwrap();
    assert!(!resp.status().is_success());
    assert_eq!(exchanges(&gw).len(), 4);

    let tokens: Vec<String> = (1..=4).map(|n| format!("{FEDERATED_PREFIX}{n}")).collect();
    let mut secrets: Vec<&str> = tokens.iter().map(String::as_str).collect();
    secrets.extend([first_jwt.as_str(), second_jwt.as_str()]);
    gw.assert_no_secret(&secrets);
}

/// A token with less than two minutes to live is exchanged again before it is used; an
/// unreadable identity file is a runtime error (the config loads, as in the reference).
#[tokio::test]
async fn federation_refreshes_before_expiry_and_reports_a_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let (file, _) = identity_file(dir.path(), "short");
    let f = file.clone();
    let gw = TestGateway::start_with(FakeConfig::default(), move |url, db| {
        yaml(db, &federation(url, "fdrl_short_life", &f))
    })
    .await;
    for _ in 0..2 {
        let resp = gw.messages(sonnet(false)).send().await.unwrap();
        assert_eq!(resp.status(), 200);
    }
    assert_eq!(
        exchanges(&gw).len(),
        2,
        "a 60 s token is refreshed before use"
    );

    std::fs::remove_file(&file).unwrap();
    let resp = gw.messages(sonnet(false)).send().await.unwrap();
    assert!(resp.status().is_server_error(), "{}", resp.status());
    let text = resp.text().await.unwrap();
    assert!(
        !text.contains("identity-token"),
        "the path stays with the operator: {text}"
    );
    assert_eq!(exchanges(&gw).len(), 2);
}

/// `claude -p` through `gw`; its answer (asserted a success).
async fn claude(gw: &TestGateway) -> String {
    gatehouse_tests::claude_answer(
        "claude -p",
        "Reply with the magic words.",
        &[
            ("ANTHROPIC_BASE_URL", gw.handle.base_url().as_str()),
            ("ANTHROPIC_AUTH_TOKEN", CLIENT_KEY),
            ("CLAUDE_CODE_MAX_RETRIES", "0"),
        ],
    )
    .await
}

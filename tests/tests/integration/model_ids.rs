//! Model ids on the wire: a request for a built-in alias reaches each provider under the
//! id the reference gateway's table gives it (`crates/engine/src/models/reference_ids.rs`),
//! checked on what the fake upstream received. On Anthropic the dated first-party id
//! (`claude-sonnet-4-5` is sent as `claude-sonnet-4-5-20250929`) and the answer keeps it,
//! as the reference's does; the other families where the table differs from plain rules:
//! Claude Platform on AWS and on Google Cloud (dated ids; Google Cloud serves nothing
//! older than the 4.5 generation), Bedrock (`-v1`, `-v2:0` suffixes) and Vertex
//! (`-v2@` for Sonnet 3.5). The reference itself (`claude gateway`, in front of a fake of
//! its own) is asked for the same ids on Anthropic and Bedrock, and must send the same;
//! the documented differences are checked as differences.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use fake_upstream::FakeConfig;
use gatehouse_tests::{CLIENT_KEY, TestGateway, base_yaml};
use serde_json::{Value, json};

/// A gateway whose only upstream is `upstream` (one YAML list item; `{fake}` is the fake).
async fn gateway(upstream: &'static str) -> TestGateway {
    TestGateway::start_with(FakeConfig::default(), move |url: &str, db: &Path| {
        format!(
            "listen: {{host: 127.0.0.1, port: 0}}\nstore: {{sqlite_path: \"{}\"}}\nupstreams:\n{}\nclient_keys: [{{id: tester, key: \"{CLIENT_KEY}\"}}]\n",
            db.display(),
            upstream.replace("{fake}", url)
        )
    })
    .await
}

fn ask(model: &str, stream: bool) -> Value {
    json!({"model": model, "max_tokens": 64, "stream": stream,
           "messages": [{"role": "user", "content": "hi"}]})
}

/// `(status, body)` of one request for `model`.
async fn send(gw: &TestGateway, model: &str, stream: bool) -> (u16, String) {
    let r = gw.messages(ask(model, stream)).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// The model of the last request the fake received: the body's `model`, else the path's
/// (Bedrock `/model/<id>/invoke`, Vertex `…/models/<id>:rawPredict`).
fn sent_model(gw: &TestGateway) -> String {
    sent_model_of(&gw.fake)
}

fn sent_model_of(fake: &fake_upstream::FakeUpstream) -> String {
    let req = fake.requests().pop().expect("the fake received a request");
    if let Some(m) = req.body["model"].as_str() {
        return m.to_owned();
    }
    // The SDK escapes `:` in the path (`-v1:0`).
    let path = req.path.replace("%3A", ":");
    if let Some(rest) = path.strip_prefix("/model/") {
        return rest.split('/').next().unwrap().to_owned();
    }
    let tail = path.rsplit("/models/").next().unwrap();
    tail.split(':').next().unwrap().to_owned()
}

#[tokio::test]
async fn an_alias_reaches_anthropic_as_its_dated_id_and_the_answer_keeps_it() {
    let gw = TestGateway::start_with(FakeConfig::default(), base_yaml).await;
    let (status, body) = send(&gw, "claude-sonnet-4-5", false).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(sent_model(&gw), "claude-sonnet-4-5-20250929");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["model"], "claude-sonnet-4-5-20250929");
    // Streamed: the first event names the dated id too.
    let (status, body) = send(&gw, "claude-haiku-4-5", true).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(sent_model(&gw), "claude-haiku-4-5-20251001");
    let start = body
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .unwrap();
    assert_eq!(start["message"]["model"], "claude-haiku-4-5-20251001");
    // Gatehouse's own short alias, an undated model and a dated id go as the table says.
    for (asked, sent) in [
        ("claude-sonnet-4", "claude-sonnet-4-20250514"),
        ("claude-opus-4-8", "claude-opus-4-8"),
        ("claude-opus-4-5-20251101", "claude-opus-4-5-20251101"),
    ] {
        let (status, body) = send(&gw, asked, false).await;
        assert_eq!(status, 200, "{asked}: {body}");
        assert_eq!(sent_model(&gw), sent, "{asked}");
    }
    let rows = gw.usage_rows(5).await;
    assert!(
        rows.iter()
            .any(|r| r.upstream_model.as_deref() == Some("claude-sonnet-4-5-20250929")),
        "the usage row names the id sent"
    );
}

#[tokio::test]
async fn claude_platform_on_aws_gets_the_dated_first_party_id() {
    let gw = gateway(
        "  - {name: platform, provider: anthropicAws, region: us-west-2, workspace_id: wrkspc_ids, base_url: \"{fake}\", auth: {api_key: aws-platform-key-never-leaks-0123}}",
    )
    .await;
    let (status, body) = send(&gw, "claude-opus-4-5", false).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(sent_model(&gw), "claude-opus-4-5-20251101");
}

#[tokio::test]
async fn claude_platform_on_google_cloud_gets_dated_ids_and_no_older_models() {
    let gw = gateway(
        "  - {name: gcp, provider: anthropicGoogleCloud, project_id: proj-1, workspace_id: wrk-1, base_url: \"{fake}/v1/projects/proj-1/locations/global/workspaces/wrk-1/invoke\", auth: {access_token: ya29.ids-token}}",
    )
    .await;
    let (status, body) = send(&gw, "claude-haiku-4-5", false).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(sent_model(&gw), "claude-haiku-4-5-20251001");
    let before = gw.fake.requests().len();
    let (status, body) = send(&gw, "claude-opus-4-1", false).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("not configured"), "{body}");
    assert_eq!(gw.fake.requests().len(), before, "nothing was sent");
}

#[tokio::test]
async fn bedrock_gets_each_models_own_version_suffix() {
    let gw = gateway(
        "  - {name: bedrock, provider: bedrock, region: us-east-1, base_url: \"{fake}\", auth: {aws_access_key_id: AKIDFAKE0123, aws_secret_access_key: aws-secret-never-leaks-0123456789}}",
    )
    .await;
    for (asked, sent) in [
        ("claude-opus-4-6", "us.anthropic.claude-opus-4-6-v1"),
        (
            "claude-3-5-sonnet",
            "us.anthropic.claude-3-5-sonnet-20241022-v2:0",
        ),
        (
            "claude-sonnet-4-5",
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        ),
    ] {
        let (status, body) = send(&gw, asked, false).await;
        assert_eq!(status, 200, "{asked}: {body}");
        assert_eq!(sent_model(&gw), sent, "{asked}");
        // The answer names the requested id (a Bedrock id is not one the gateway serves).
        let answer: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(answer["model"], asked);
    }
}

#[tokio::test]
async fn vertex_gets_sonnet_3_5_as_its_v2() {
    let gw = gateway(
        "  - {name: vertex, provider: vertex, region: us-east5, project_id: proj-1, base_url: \"{fake}/v1\", auth: {access_token: ya29.vertex-ids-token}}",
    )
    .await;
    for (asked, sent) in [
        ("claude-3-5-sonnet", "claude-3-5-sonnet-v2@20241022"),
        ("claude-sonnet-4-5", "claude-sonnet-4-5@20250929"),
    ] {
        let (status, body) = send(&gw, asked, false).await;
        assert_eq!(status, 200, "{asked}: {body}");
        assert_eq!(sent_model(&gw), sent, "{asked}");
    }
}

/// Requests for these ids go to the reference and to Gatehouse, each in front of its own
/// fake with the one upstream `upstream` (`{fake}` is that fake).
const ASKED: &[&str] = &[
    "claude-sonnet-4-5",
    "claude-sonnet-4-5-20250929",
    "claude-haiku-4-5",
    "claude-opus-4-5",
    "claude-opus-4-6",
    "claude-opus-4-1",
    "claude-opus-4-8",
    "claude-sonnet-4",
    "claude-3-7-sonnet",
    "claude-3-5-sonnet",
    "claude-3-5-haiku",
    "claude-sonnet-4-0",
    "claude-opus-4-0",
    "claude-haiku-4-5[1m]",
    "CLAUDE-HAIKU-4-5",
];

/// `(asked, status, id the fake received or "-", the answer's model)` per id in [`ASKED`].
async fn wire_ids(
    client: &reqwest::Client,
    base: &str,
    auth: (&str, &str),
    fake: &fake_upstream::FakeUpstream,
) -> Vec<(String, u16, String, Value)> {
    let mut out = Vec::new();
    for asked in ASKED {
        let before = fake.requests().len();
        let r = client
            .post(format!("{base}/v1/messages"))
            .header(auth.0, auth.1)
            .json(&ask(asked, false))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap_or(Value::Null);
        let sent = match fake.requests().len() > before {
            true => sent_model_of(fake),
            false => "-".to_owned(),
        };
        let model = if status == 200 {
            body["model"].clone()
        } else {
            Value::Null
        };
        out.push(((*asked).to_owned(), status, sent, model));
    }
    out
}

#[tokio::test]
async fn the_reference_sends_the_same_ids_to_anthropic_and_bedrock() {
    // On the reference's side, a session token it signed itself (no client keys there).
    use crate::admin_reference::{REFERENCE_SECRET, reference_token, start_reference};
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let token = reference_token("ada", &[], REFERENCE_SECRET);
    // The reference wants sign-in (or workload tokens only): a real IdP, never asked here.
    let idp = gatehouse_tests::Idp::start("http://127.0.0.1:9/oauth/callback").await;
    for upstream in [
        "  - {name: a, provider: anthropic, base_url: \"{fake}\", auth: {api_key: operator-key-not-secret}}",
        "  - {name: b, provider: bedrock, region: us-east-1, base_url: \"{fake}\", auth: {aws_access_key_id: AKIDFAKE0123, aws_secret_access_key: aws-secret-never-leaks-0123456789}}",
        "  - {name: b, provider: bedrock, region: eu-west-1, base_url: \"{fake}\", auth: {aws_access_key_id: AKIDFAKE0123, aws_secret_access_key: aws-secret-never-leaks-0123456789}}",
    ] {
        let fake = fake_upstream::FakeUpstream::start(FakeConfig::default())
            .await
            .unwrap();
        let ups = upstream.replace("{fake}", &fake.url());
        let reference = start_reference(&client, |port, db| {
            format!(
                "listen: {{host: 127.0.0.1, port: {port}}}\nupstreams:\n{ups}\nsession: {{jwt_secret: \"{REFERENCE_SECRET}\"}}\nstore: {{postgres_url: \"{db}\"}}\noidc: {{issuer: \"{}\", client_id: {}, client_secret: {}}}\n",
                idp.issuer,
                gatehouse_tests::IDP_CLIENT_ID,
                gatehouse_tests::IDP_CLIENT_SECRET,
            )
        })
        .await;
        let bearer = format!("Bearer {token}");
        let theirs = wire_ids(&client, &reference.base, ("authorization", &bearer), &fake).await;
        let gw = gateway(upstream).await;
        let ours = wire_ids(
            &client,
            &gw.handle.base_url(),
            ("x-api-key", CLIENT_KEY),
            &gw.fake,
        )
        .await;
        assert!(
            theirs.iter().any(|t| t.1 == 200),
            "the reference served: {theirs:?}"
        );
        for (t, o) in theirs.iter().zip(&ours) {
            if GATEHOUSE_ONLY.contains(&t.0.as_str()) {
                assert_eq!((t.1, o.1), (400, 200), "{t:?} {o:?}");
                continue;
            }
            // Bedrock's answers: the reference relays the provider's model, Gatehouse names
            // the requested id (README "Model ids").
            let bedrock = upstream.contains("bedrock");
            // In the EU the reference sends the bare in-region id, Gatehouse the EU profile.
            let eu = upstream.contains("eu-west-1");
            let answered = |x: &(String, u16, String, Value), sent: &str| {
                (
                    x.0.clone(),
                    x.1,
                    sent.to_owned(),
                    (!bedrock).then(|| x.3.clone()),
                )
            };
            let ours_sent = match eu {
                true => o.2.strip_prefix("eu.").unwrap_or("not the EU profile"),
                false => &o.2,
            };
            assert_eq!(answered(o, ours_sent), answered(t, &t.2), "{upstream}");
        }
    }
}

/// Spellings the reference refuses (`400`: not a model its table names exactly) and
/// Gatehouse serves as the model they name: Claude Code's catalog keys of the 4.0 models
/// and a `[1m]` suffix left on the id.
const GATEHOUSE_ONLY: &[&str] = &[
    "claude-sonnet-4-0",
    "claude-opus-4-0",
    "claude-haiku-4-5[1m]",
];

//! Foundry with `auth.use_azure_ad`: Gatehouse gets Entra ID tokens from the fake's https
//! token endpoint through `azure_identity` (client secret and workload identity, chosen from
//! the gateway's environment; the fake's certificate trusted through `SSL_CERT_FILE`) and
//! sends them to the Foundry face as `Authorization: Bearer`; the Foundry face accepts only
//! tokens the fake issued. The fake's Entra ID face is itself validated by Microsoft's
//! `@azure/identity` and the Foundry Bearer path by Anthropic's Foundry SDK
//! (`entra_sdks.mjs`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use fake_upstream::{FakeConfig, FakeUpstream, Fault};
use gatehouse_engine::deps::MapEnvironment;
use gatehouse_tests::{CLIENT_KEY, TestGateway, openssl, sonnet};
use serde_json::{Value, json};

const CLIENT_SECRET: &str = "entra-client-secret-never-leaks-42";
const CA_PATH: &str = "/entra/ca.pem";

/// A CA and a certificate for 127.0.0.1 it signed: `(ca pem, leaf chain pem, leaf key pem)`.
fn certificates(dir: &Path) -> (String, String, String) {
    let p = |n: &str| dir.join(n).display().to_string();
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=Gatehouse test Entra CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        "-keyout",
        &p("ca.key"),
        "-out",
        &p("ca.pem"),
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        &p("leaf.key"),
        "-out",
        &p("leaf.csr"),
    ]);
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        &p("leaf.csr"),
        "-CA",
        &p("ca.pem"),
        "-CAkey",
        &p("ca.key"),
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        &p("leaf.ext"),
        "-out",
        &p("leaf.pem"),
    ]);
    let read = |n: &str| std::fs::read_to_string(dir.join(n)).unwrap();
    (read("ca.pem"), read("leaf.pem"), read("leaf.key"))
}

/// The fake with its https listener: `(fake, https origin, ca pem)`.
async fn fake_with_entra(config: FakeConfig, dir: &Path) -> (FakeUpstream, String, String) {
    let (ca, leaf, key) = certificates(dir);
    let fake = FakeUpstream::start(config).await.unwrap();
    let https = fake.serve_tls(&leaf, &key).await.unwrap();
    (fake, https, ca)
}

/// A gateway whose only upstream is Foundry with Entra ID, its Azure settings in `env`.
async fn gateway(config: FakeConfig, env: &[(&str, &str)]) -> (TestGateway, String) {
    let certs = tempfile::tempdir().unwrap();
    let (fake, https, ca) = fake_with_entra(config, certs.path()).await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "listen: {{host: 127.0.0.1, port: 0}}\nstore: {{sqlite_path: \"{}\"}}\nupstreams:\n  - {{name: foundry, provider: foundry, resource: corp-ai, base_url: \"{}/anthropic\", auth: {{use_azure_ad: true}}}}\nclient_keys: [{{id: tester, key: \"{CLIENT_KEY}\"}}]\n",
        dir.path().join("gatehouse.db").display(),
        fake.url()
    );
    let config = gatehouse_tests::load(&yaml, dir.path());
    let mut map = MapEnvironment::default()
        .with_var("AZURE_AUTHORITY_HOST", &https)
        .with_var("SSL_CERT_FILE", CA_PATH)
        .with_file(CA_PATH, &ca);
    for (k, v) in env {
        map = map.with_var(k, v);
    }
    let gw = TestGateway::start_config_env(config, fake, dir, map).await;
    (gw, https)
}

const SECRET_ENV: [(&str, &str); 3] = [
    ("AZURE_TENANT_ID", "tenant-1"),
    ("AZURE_CLIENT_ID", "client-1"),
    ("AZURE_CLIENT_SECRET", CLIENT_SECRET),
];

fn header<'a>(req: &'a fake_upstream::RecordedRequest, name: &str) -> Option<&'a str> {
    req.headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn token_requests(fake: &FakeUpstream) -> usize {
    fake.requests()
        .iter()
        .filter(|r| r.path == "/tenant-1/oauth2/v2.0/token")
        .count()
}

fn foundry_bearers(fake: &FakeUpstream) -> Vec<String> {
    fake.requests()
        .iter()
        .filter(|r| r.path.starts_with("/anthropic/"))
        .filter_map(|r| header(r, "authorization").map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn the_fake_entra_id_satisfies_azure_identity_and_the_foundry_sdk() {
    let certs = tempfile::tempdir().unwrap();
    let (fake, https, _) = fake_with_entra(FakeConfig::default(), certs.path()).await;
    let token_file = certs.path().join("sa-token");
    std::fs::write(
        &token_file,
        "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzYSJ9.c2lnbmF0dXJl",
    )
    .unwrap();
    let ca = certs.path().join("ca.pem");
    let v = gatehouse_tests::node_json(
        "entra_sdks.mjs",
        &[],
        &[
            ("FAKE_URL", fake.url().as_str()),
            ("ENTRA_URL", https.as_str()),
            ("TOKEN_FILE", token_file.to_str().unwrap()),
            ("NODE_EXTRA_CA_CERTS", ca.to_str().unwrap()),
        ],
    )
    .await;
    let issued = fake.entra_tokens();
    assert_eq!(v["secret_token"], issued[0].as_str(), "{v}");
    assert_eq!(v["workload_token"], issued[1].as_str(), "{v}");
    assert!(v["secret_expires_in"].as_i64().unwrap() > 3000, "{v}");
    let reply = FakeConfig::default().reply_text;
    assert_eq!(v["json_text"], reply.as_str(), "{v}");
    assert_eq!(v["stream_text"], reply.as_str(), "{v}");
    assert_eq!(
        v["count"]["input_tokens"],
        FakeConfig::default().input_tokens
    );
    assert_eq!(v["bogus_status"], 401, "{v}");
    // The Foundry SDK sent tokens the fake issued (its provider asked the credential),
    // then the one it did not issue.
    let bearers = foundry_bearers(&fake);
    let (last, sdk) = bearers.split_last().unwrap();
    assert_eq!(last, "Bearer not-issued-by-entra");
    assert_eq!(sdk.len(), 3, "{bearers:?}");
    assert!(
        sdk.iter()
            .all(|b| issued.iter().any(|t| b == &format!("Bearer {t}"))),
        "{bearers:?} {issued:?}"
    );
}

/// Claude Code through Gatehouse to Foundry with Entra ID (client secret): a streamed
/// answer, then count_tokens, with one token fetched and reused.
#[tokio::test]
async fn claude_code_works_through_foundry_with_entra_id() {
    let (gw, _) = gateway(
        FakeConfig {
            reply_text: "CLOUD-foundry-entra-OK".into(),
            ..FakeConfig::default()
        },
        &SECRET_ENV,
    )
    .await;
    let answer = gatehouse_tests::claude_answer(
        "claude -p",
        "Reply with the magic words.",
        &[
            ("ANTHROPIC_BASE_URL", gw.handle.base_url().as_str()),
            ("ANTHROPIC_AUTH_TOKEN", CLIENT_KEY),
            ("CLAUDE_CODE_MAX_RETRIES", "0"),
        ],
    )
    .await;
    assert!(answer.contains("CLOUD-foundry-entra-OK"), "{answer}");
    let resp = gw
        .client
        .post(gw.url("/v1/messages/count_tokens"))
        .header("x-api-key", CLIENT_KEY)
        .header("anthropic-version", "2023-06-01")
        .json(
            &json!({"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": "hi"}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let count: Value = resp.json().await.unwrap();
    assert_eq!(count["input_tokens"], FakeConfig::default().input_tokens);

    let fake = &gw.fake;
    let issued = fake.entra_tokens();
    assert_eq!(issued.len(), 1, "one token, cached across requests");
    assert_eq!(token_requests(fake), 1);
    let bearers = foundry_bearers(fake);
    assert!(bearers.len() >= 2, "{bearers:?}");
    assert!(
        bearers
            .iter()
            .all(|b| b == &format!("Bearer {}", issued[0]))
    );
    assert!(
        fake.requests()
            .iter()
            .any(|r| r.path == "/anthropic/v1/messages/count_tokens")
    );
    gw.assert_no_secret(&[CLIENT_SECRET, &issued[0]]);
}

/// Foundry refuses the token (revoked): Gatehouse fetches a new one once and sends again;
/// when that one is refused too, the caller gets the cleaned 401 failure, not a loop.
#[tokio::test]
async fn a_refused_entra_token_is_fetched_anew_once() {
    let (gw, _) = gateway(FakeConfig::default(), &SECRET_ENV).await;
    let ask = sonnet(false);
    assert_eq!(gw.messages(ask.clone()).send().await.unwrap().status(), 200);
    let first = gw.fake.entra_tokens()[0].clone();
    gw.fake.refuse_key(&first, 401, None);

    let resp = gw.messages(ask.clone()).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let issued = gw.fake.entra_tokens();
    assert_eq!(issued.len(), 2);
    assert_eq!(token_requests(&gw.fake), 2);
    let bearers = foundry_bearers(&gw.fake);
    assert_eq!(
        bearers[1..],
        [format!("Bearer {first}"), format!("Bearer {}", issued[1])]
    );

    // The new token refused as well: one renewal, then the (cleaned) failure.
    for _ in 0..2 {
        gw.fake.push_fault(Fault::Status {
            status: 401,
            retry_after: None,
            error_type: None,
            message: None,
        });
    }
    let resp = gw.messages(ask).send().await.unwrap();
    let status = resp.status().as_u16();
    let body = resp.text().await.unwrap();
    // An upstream 401 is never relayed (the caller would take it for its own key).
    assert_eq!(status, 502, "{body}");
    assert_eq!(token_requests(&gw.fake), 3, "{status} {body}");
    assert_eq!(foundry_bearers(&gw.fake).len(), 5);
    assert!(!body.contains("fake-entra-token"), "{body}");
    gw.assert_no_secret(&[CLIENT_SECRET, &first, &issued[1]]);
}

/// Workload identity: the federated token file is sent as the client assertion.
#[tokio::test]
async fn workload_identity_signs_in_with_the_federated_token_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("azure-identity-token");
    std::fs::write(&file, "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ3b3JrbG9hZCJ9.c2ln").unwrap();
    let (gw, _) = gateway(
        FakeConfig::default(),
        &[
            ("AZURE_TENANT_ID", "tenant-1"),
            ("AZURE_CLIENT_ID", "client-1"),
            ("AZURE_FEDERATED_TOKEN_FILE", file.to_str().unwrap()),
        ],
    )
    .await;
    let ask = sonnet(false);
    let resp = gw.messages(ask).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let issued = gw.fake.entra_tokens();
    assert_eq!(issued.len(), 1);
    assert_eq!(foundry_bearers(&gw.fake), [format!("Bearer {}", issued[0])]);
}

//! HTTPS: the gateway serves TLS from a PEM certificate and key given by `${file:...}`,
//! with HSTS on every response; a plain-HTTP request to the TLS port gets no answer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fake_upstream::{FakeConfig, FakeUpstream};
use gatehouse_engine::config::{Config, LoadContext};
use gatehouse_engine::deps::{MapEnvironment, NoCredentialStore};
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, TestGateway, sonnet};

#[tokio::test]
async fn https_with_hsts() {
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let cert_pem = cert.cert.pem();
    let key_pem = cert.signing_key.serialize_pem();
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "listen: {{host: 127.0.0.1, port: 0, tls: {{cert: '${{file:/tls/cert.pem}}', key: '${{file:/tls/key.pem}}'}}}}\nstore: {{sqlite_path: \"{}\"}}\nupstreams: [{{name: p, provider: anthropic, base_url: \"{}\", auth: {{api_key: {OPERATOR_KEY}}}}}]\nclient_keys: [{{id: t, key: {CLIENT_KEY}}}]\n",
        dir.path().join("g.db").display(),
        fake.url()
    );
    let env = MapEnvironment::default()
        .with_var("CLAUDE_GATEWAY_ALLOW_LOOPBACK", "1")
        .with_file("/tls/cert.pem", &cert_pem)
        .with_file("/tls/key.pem", &key_pem);
    let config = Config::from_yaml(
        &yaml,
        &LoadContext {
            env: &env,
            credentials: &NoCredentialStore,
            default_data_dir: dir.path().into(),
        },
    )
    .unwrap();
    let gw = TestGateway::start_config(config, fake, dir).await;
    let port = gw.handle.local_addr().port();
    let client = reqwest::Client::builder()
        .no_proxy()
        .add_root_certificate(reqwest::Certificate::from_pem(cert_pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    let r = client
        .get(format!("https://localhost:{port}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["strict-transport-security"],
        "max-age=31536000; includeSubDomains"
    );
    let r = client
        .post(format!("https://127.0.0.1:{port}/v1/messages"))
        .header("x-api-key", CLIENT_KEY)
        .json(&sonnet(true))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("message_stop"));
    // Plain HTTP on the TLS port: no HTTP answer.
    let plain = gw
        .client
        .get(format!("http://127.0.0.1:{port}/healthz"))
        .send()
        .await;
    assert!(plain.is_err() || plain.unwrap().status() != 200);
    // A client that does not trust the certificate is refused by TLS itself.
    let strict = reqwest::Client::builder().no_proxy().build().unwrap();
    assert!(
        strict
            .get(format!("https://localhost:{port}/healthz"))
            .send()
            .await
            .is_err()
    );
    let TestGateway { handle, .. } = gw;
    handle.shutdown().await;
}

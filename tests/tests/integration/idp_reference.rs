//! The reference gateway's IdP knobs against the real OIDC provider (npm `oidc-provider`):
//! `private_key_jwt` with a certificate (the IdP checks the assertion's signature and its
//! `x5t` / `x5t#S256` thumbprints), `user_id_claim` and `groups_jsonpath` on nested claims.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use base64::Engine;
use gatehouse_tests::{
    SESSION_SECRET_A, SignInOptions, device_sign_in, sign_in_gateway_opts, sonnet,
};
use serde_json::Value;

/// A 2048-bit RSA key (PKCS#8 PEM) and a self-signed certificate for it, by openssl.
fn key_and_cert(dir: &std::path::Path) -> (String, String, std::path::PathBuf) {
    let key = dir.join("client-key.pem");
    let cert = dir.join("client-cert.pem");
    gatehouse_tests::openssl(&[
        "genpkey",
        "-algorithm",
        "RSA",
        "-pkeyopt",
        "rsa_keygen_bits:2048",
        "-out",
        key.to_str().unwrap(),
    ]);
    gatehouse_tests::openssl(&[
        "req",
        "-x509",
        "-key",
        key.to_str().unwrap(),
        "-subj",
        "/CN=gatehouse-test-client",
        "-days",
        "2",
        "-out",
        cert.to_str().unwrap(),
    ]);
    (
        std::fs::read_to_string(&key).unwrap(),
        std::fs::read_to_string(&cert).unwrap(),
        cert,
    )
}

/// A PEM text as a YAML block scalar at `indent` spaces.
fn block(pem: &str, indent: usize) -> String {
    let pad = " ".repeat(indent);
    let lines: Vec<String> = pem.trim().lines().map(|l| format!("{pad}{l}")).collect();
    format!("|\n{}", lines.join("\n"))
}

fn jwt_claims(token: &str) -> Value {
    let part = token.split('.').nth(1).unwrap();
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part)
            .unwrap(),
    )
    .unwrap()
}

#[tokio::test]
async fn private_key_jwt_signs_in_and_refreshes_with_the_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (key, cert, cert_path) = key_and_cert(dir.path());
    let auth = format!(
        "  token_endpoint_auth_method: private_key_jwt\n  client_assertion:\n    private_key_pem: {}\n    certificate_pem: {}\n",
        block(&key, 6),
        block(&cert, 6)
    );
    let opts = SignInOptions {
        idp_env: &[("IDP_CLIENT_CERT_PEM", cert_path.to_str().unwrap())],
        client_auth: Some(&auth),
        ..Default::default()
    };
    let s = sign_in_gateway_opts(&[SESSION_SECRET_A], "", &opts).await;
    let (status, body) = device_sign_in(&s, "alice").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["page"]["result"], "Signed in", "{body}");
    let stats = s.idp.stats().await;
    assert_eq!(stats["client_assertions"], 1, "{stats}");
    assert_eq!(stats["by_grant_type"]["authorization_code"], 1, "{stats}");
    let r =
        s.gw.client
            .post(s.gw.url("/v1/messages"))
            .bearer_auth(body["access_token"].as_str().unwrap())
            .json(&sonnet(false))
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 200);
    // The gateway's refresh goes to the IdP with a fresh assertion.
    let r =
        s.gw.client
            .post(s.gw.url("/oauth/token"))
            .form(&[
                ("grant_type", "refresh_token"),
                ("refresh_token", body["refresh_token"].as_str().unwrap()),
            ])
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let stats = s.idp.stats().await;
    assert_eq!(stats["client_assertions"], 2, "{stats}");
    assert_eq!(stats["by_grant_type"]["refresh_token"], 1, "{stats}");
}

#[tokio::test]
async fn a_wrong_certificate_is_refused_by_the_identity_provider() {
    let dir = tempfile::tempdir().unwrap();
    let (key, cert, _) = key_and_cert(dir.path());
    let other = tempfile::tempdir().unwrap();
    let (_, _, registered) = key_and_cert(other.path());
    let auth = format!(
        "  token_endpoint_auth_method: private_key_jwt\n  client_assertion:\n    private_key_pem: {}\n    certificate_pem: {}\n",
        block(&key, 6),
        block(&cert, 6)
    );
    let opts = SignInOptions {
        idp_env: &[("IDP_CLIENT_CERT_PEM", registered.to_str().unwrap())],
        client_auth: Some(&auth),
        ..Default::default()
    };
    let s = sign_in_gateway_opts(&[SESSION_SECRET_A], "", &opts).await;
    let (status, body) = device_sign_in(&s, "alice").await;
    assert_ne!(status, 200, "{body}");
    assert_ne!(body["page"]["result"], "Signed in", "{body}");
    let stats = s.idp.stats().await;
    assert_eq!(stats["client_assertions"], 0, "{stats}");
    assert_eq!(stats["by_status"]["401"], 1, "{stats}");
}

#[tokio::test]
async fn user_id_claim_and_groups_jsonpath_read_nested_claims() {
    let claims = r#"{"oid": "user-0001", "memberships": [{"kind": "group", "name": "claude-users"}, {"kind": "role", "name": "sales"}]}"#;
    let opts = SignInOptions {
        idp_env: &[("IDP_EXTRA_CLAIMS", claims)],
        ..Default::default()
    };
    let extra =
        "  user_id_claim: oid\n  groups_jsonpath: \"$.memberships[?@.kind=='group'].name\"\n";
    let s = sign_in_gateway_opts(&[SESSION_SECRET_A], extra, &opts).await;
    // bob's own `groups` claim is [sales], which `allowed_groups` refuses; the path reads
    // the memberships instead.
    let (status, body) = device_sign_in(&s, "bob").await;
    assert_eq!(status, 200, "{body}");
    let session = jwt_claims(body["access_token"].as_str().unwrap());
    assert_eq!(session["sub"], "user-0001", "{session}");
}

//! `oidc.google_groups` with the real IdP sign-in: the person's groups come from a fake
//! Admin SDK Directory API (in-process, port 0) reached with a token from a fake Google
//! token endpoint (the key file's loopback `token_uri`), and they decide who may sign in.
//! The fake token endpoint checks the service account's JWT assertion (signature, `sub` =
//! `admin_email`, scope, audience); the directory checks the access token and pages.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use gatehouse_engine::deps::MapEnvironment;
use gatehouse_tests::{SESSION_SECRET_A, SignInOptions, device_sign_in, sign_in_gateway_opts};
use serde_json::{Value, json};

const ADMIN: &str = "admin@corp.example";
const SA_EMAIL: &str = "gateway@proj.iam.gserviceaccount.com";
const TOKEN: &str = "ya29.fake-directory-token";

#[derive(Default)]
struct Fake {
    public_der: Vec<u8>,
    token_url: String,
    assertions: Vec<Value>,
    lookups: Vec<String>,
}

type Shared = Arc<Mutex<Fake>>;

fn pairs(text: &str) -> Vec<(String, String)> {
    url::form_urlencoded::parse(text.as_bytes())
        .into_owned()
        .collect()
}

async fn token(State(s): State<Shared>, body: String) -> Response {
    let form = pairs(&body);
    let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(
        get("grant_type").as_deref(),
        Some("urn:ietf:params:oauth:grant-type:jwt-bearer")
    );
    let assertion = get("assertion").unwrap();
    let mut fake = s.lock().unwrap();
    let key = jsonwebtoken::DecodingKey::from_rsa_der(&fake.public_der);
    let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    v.set_audience(&[fake.token_url.clone()]);
    v.set_issuer(&[SA_EMAIL]);
    let Ok(data) = jsonwebtoken::decode::<Value>(&assertion, &key, &v) else {
        return (StatusCode::BAD_REQUEST, "bad assertion").into_response();
    };
    fake.assertions.push(data.claims);
    axum::Json(json!({"access_token": TOKEN, "expires_in": 3600, "token_type": "Bearer"}))
        .into_response()
}

async fn groups(State(s): State<Shared>, headers: HeaderMap, uri: Uri) -> Response {
    let q = pairs(uri.query().unwrap_or_default());
    if headers.get("authorization").and_then(|v| v.to_str().ok())
        != Some(&format!("Bearer {TOKEN}"))
    {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(get("maxResults").as_deref(), Some("200"));
    let user = get("userKey").unwrap();
    s.lock().unwrap().lookups.push(user.clone());
    let body = match (user.as_str(), get("pageToken").as_deref()) {
        // bob's first page names a group allowed_groups refuses; the second one, one it admits.
        ("bob@corp.example", None) => {
            json!({"groups": [{"email": "Sales@corp.example"}], "nextPageToken": "p2"})
        }
        ("bob@corp.example", Some("p2")) => {
            json!({"groups": [{"email": "Claude-Users@corp.example"}]})
        }
        ("alice@corp.example", _) => json!({"groups": [{"email": "marketing@corp.example"}]}),
        _ => return (StatusCode::SERVICE_UNAVAILABLE, "directory down").into_response(),
    };
    axum::Json(body).into_response()
}

/// An RSA key (PKCS#8 PEM, as in Google's key files) and its public key (PKCS#1 DER).
fn key_pair(dir: &std::path::Path) -> (String, Vec<u8>) {
    let key = dir.join("sa-key.pem");
    let public = dir.join("sa-pub.der");
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
        "rsa",
        "-in",
        key.to_str().unwrap(),
        "-RSAPublicKey_out",
        "-outform",
        "DER",
        "-out",
        public.to_str().unwrap(),
    ]);
    (
        std::fs::read_to_string(&key).unwrap(),
        std::fs::read(&public).unwrap(),
    )
}

fn session_groups(token: &str) -> Value {
    let part = token.split('.').nth(1).unwrap();
    let claims: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part)
            .unwrap(),
    )
    .unwrap();
    claims["groups"].clone()
}

#[tokio::test]
async fn workspace_groups_from_the_directory_decide_who_signs_in() {
    let dir = tempfile::tempdir().unwrap();
    let (private_pem, public_der) = key_pair(dir.path());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let fake: Shared = Arc::new(Mutex::new(Fake {
        public_der,
        token_url: format!("{base}/token"),
        ..Default::default()
    }));
    let app = axum::Router::new()
        .route("/token", post(token))
        .route("/admin/directory/v1/groups", get(groups))
        .with_state(fake.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let key_file = json!({
        "type": "service_account",
        "client_email": SA_EMAIL,
        "private_key": private_pem,
        "token_uri": format!("{base}/token"),
    });
    let env = MapEnvironment::default().with_file("/secrets/sa.json", &key_file.to_string());
    let directory = url::Url::parse(&format!("{base}/admin/directory/v1/groups")).unwrap();
    let configure = move |c: &mut gatehouse_engine::Config| {
        let oidc = &mut c.identity.as_mut().unwrap().oidc;
        oidc.allowed_groups = vec!["claude-users@corp.example".into()];
        oidc.extras.google_groups.as_mut().unwrap().directory_url = directory.clone();
    };
    let opts = SignInOptions {
        gateway_env: Some(env),
        configure: Some(&configure),
        ..Default::default()
    };
    let extra = format!(
        "  google_groups: {{service_account_json_path: /secrets/sa.json, admin_email: {ADMIN}}}\n"
    );
    let s = sign_in_gateway_opts(&[SESSION_SECRET_A], &extra, &opts).await;

    // bob's ID token says [sales]; the directory (two pages) says he is a Claude user.
    let (status, body) = device_sign_in(&s, "bob").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        session_groups(body["access_token"].as_str().unwrap()),
        json!(["sales@corp.example", "claude-users@corp.example"])
    );
    // alice's ID token would admit her; the directory's answer does not.
    let (status, body) = device_sign_in(&s, "alice").await;
    assert_ne!(status, 200, "{body}");
    assert_ne!(body["page"]["result"], "Signed in", "{body}");
    // A directory that cannot answer refuses the sign-in (fail closed).
    let (status, body) = device_sign_in(&s, "carol").await;
    assert_ne!(status, 200, "{body}");

    let fake = fake.lock().unwrap();
    assert_eq!(
        fake.lookups,
        [
            "bob@corp.example",
            "bob@corp.example",
            "alice@corp.example",
            "carol@corp.example"
        ]
    );
    // One token for all lookups (cached), asked for as the Workspace admin.
    assert_eq!(fake.assertions.len(), 1, "{:?}", fake.assertions);
    let a = &fake.assertions[0];
    assert_eq!(a["sub"], ADMIN);
    assert_eq!(
        a["scope"],
        "https://www.googleapis.com/auth/admin.directory.group.readonly"
    );
    let denied: Vec<Value> = s.gw.events.named("device.callback");
    let reasons: Vec<&str> = denied.iter().filter_map(|e| e["reason"].as_str()).collect();
    assert!(reasons.contains(&"group_not_allowed"), "{denied:?}");
    assert!(reasons.contains(&"google_groups_unavailable"), "{denied:?}");
}

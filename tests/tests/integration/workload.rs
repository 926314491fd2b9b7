//! Workload-token admission: ES256 JWTs verified against the issuer's key set, served here
//! by a small loopback JWKS server the test controls (keys, Cache-Control, outages).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use fake_upstream::{FakeConfig, FakeUpstream, Fault};
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, TestGateway, sonnet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use p256::pkcs8::EncodePrivateKey;
use serde_json::{Value, json};

const ISSUER: &str = "http://127.0.0.1/cri-issuer";
const AUD: &str = "https://gatehouse.test";
const ORG: &str = "11111111-2222-3333-4444-555555555555";

struct Key {
    kid: String,
    encoding: EncodingKey,
    jwk: Value,
}

fn key(kid: &str) -> Key {
    let secret = p256::SecretKey::random(&mut p256::elliptic_curve::rand_core::OsRng);
    let der = secret.to_pkcs8_der().unwrap();
    let mut jwk: Value = serde_json::from_str(&secret.public_key().to_jwk_string()).unwrap();
    jwk["kid"] = kid.into();
    jwk["alg"] = "ES256".into();
    jwk["use"] = "sig".into();
    Key {
        kid: kid.to_owned(),
        encoding: EncodingKey::from_ec_der(der.as_bytes()),
        jwk,
    }
}

#[derive(Default)]
struct Jwks {
    keys: Vec<Value>,
    down: bool,
    fetches: usize,
}

type Shared = Arc<Mutex<Jwks>>;

async fn serve_jwks(State(s): State<Shared>) -> (StatusCode, HeaderMap, String) {
    let mut j = s.lock().unwrap();
    j.fetches += 1;
    let mut h = HeaderMap::new();
    h.insert("cache-control", "max-age=300".parse().unwrap());
    if j.down {
        return (StatusCode::SERVICE_UNAVAILABLE, h, "down".into());
    }
    (StatusCode::OK, h, json!({"keys": j.keys}).to_string())
}

struct Setup {
    gw: TestGateway,
    jwks: Shared,
    key: Key,
    clock: Arc<gatehouse_tests::OffsetClock>,
}

async fn setup(jwks_down_at_start: bool) -> Setup {
    setup_with(jwks_down_at_start, "  allow_loopback_jwks: true\n", &[]).await
}

/// [`setup`] with more `cri` keys (`cri_extra`, or a top-level block after a newline) and
/// the environment the configuration is loaded with.
async fn setup_with(jwks_down_at_start: bool, cri_extra: &str, env: &[(&str, &str)]) -> Setup {
    let key = key("k1");
    let jwks: Shared = Arc::new(Mutex::new(Jwks {
        keys: vec![key.jwk.clone()],
        down: jwks_down_at_start,
        fetches: 0,
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let jwks_url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    let app = Router::new()
        .route("/jwks.json", get(serve_jwks))
        .with_state(jwks.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        r#"
listen: {{host: 127.0.0.1, port: 0}}
store: {{sqlite_path: "{db}"}}
upstreams: [{{name: primary, provider: anthropic, base_url: "{fake}", auth: {{api_key: "{OPERATOR_KEY}"}}}}]
client_keys: [{{id: tester, key: "{CLIENT_KEY}"}}]
cri:
  enabled: true
  issuer: "{ISSUER}"
  jwks_url: "{jwks_url}"
  audience: ["{AUD}", "https://other-aud.test"]
  org_allowlist: ["{ORG}"]
{cri_extra}"#,
        db = dir.path().join("g.db").display(),
        fake = fake.url()
    );
    let load_env = env.iter().fold(
        gatehouse_engine::deps::MapEnvironment::default(),
        |e, (k, v)| e.with_var(k, v),
    );
    let config = gatehouse_engine::config::Config::from_yaml(
        &yaml,
        &gatehouse_engine::config::LoadContext {
            env: &load_env,
            credentials: &gatehouse_engine::deps::NoCredentialStore,
            default_data_dir: dir.path().to_owned(),
        },
    )
    .unwrap_or_else(|e| panic!("config should load: {e}\n{yaml}"));
    let clock = Arc::new(gatehouse_tests::OffsetClock::default());
    let events = Arc::new(gatehouse_engine::events::MemoryEventSink::default());
    let deps = gatehouse_engine::deps::Deps {
        clock: clock.clone(),
        env: Arc::new(gatehouse_engine::deps::MapEnvironment::default()),
        credentials: Arc::new(gatehouse_engine::deps::NoCredentialStore),
        events: events.clone(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let handle = gatehouse_engine::server::start_on(listener, config, deps)
        .await
        .unwrap();
    let gw = TestGateway {
        handle,
        fake,
        events,
        dir,
        client: reqwest::Client::builder().no_proxy().build().unwrap(),
    };
    Setup {
        gw,
        jwks,
        key,
        clock,
    }
}

fn token(key: &Key, patch: impl FnOnce(&mut Value, &mut Header)) -> String {
    let now = chrono::Utc::now().timestamp();
    let mut claims = json!({
        "iss": ISSUER, "aud": AUD, "sub": "agent-7", "org": ORG, "scope": "inference",
        "iat": now, "exp": now + 300, "act": {"sub": "user-1"}
    });
    let mut header = Header::new(Algorithm::ES256);
    header.typ = Some("cri+jwt".into());
    header.kid = Some(key.kid.clone());
    patch(&mut claims, &mut header);
    jsonwebtoken::encode(&header, &claims, &key.encoding).unwrap()
}

async fn infer(s: &Setup, t: &str, path: &str) -> reqwest::Response {
    s.gw.client
        .post(s.gw.url(path))
        .bearer_auth(t)
        .json(&sonnet(false))
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn valid_workload_tokens_reach_inference_only() {
    let s = setup(false).await;
    let ok = token(&s.key, |_, _| {});
    let r = infer(&s, &ok, "/v1/messages").await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        infer(&s, &ok, "/v1/messages/count_tokens").await.status(),
        200
    );
    let rows = s.gw.usage_rows(2).await;
    assert!(
        rows.iter()
            .all(|r| r.principal == format!("workload:{ORG}/agent-7"))
    );
    assert!(
        s.gw.fake
            .requests()
            .iter()
            .all(|r| r.headers.iter().all(|(_, v)| !v.contains(&ok))),
        "the workload token never reaches the upstream"
    );
    // Inference only.
    let r =
        s.gw.client
            .get(s.gw.url("/v1/models"))
            .bearer_auth(&ok)
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 401);
    // Within the 60 s clock tolerance.
    let late = token(&s.key, |c, _| {
        c["exp"] = (chrono::Utc::now().timestamp() - 30).into()
    });
    assert_eq!(infer(&s, &late, "/v1/messages").await.status(), 200);
}

#[tokio::test]
async fn forged_and_misaddressed_tokens_are_refused_with_reasons() {
    let s = setup(false).await;
    let other = key("k1");
    let now = chrono::Utc::now().timestamp();
    let cases: Vec<(String, &str)> = vec![
        (token(&other, |_, _| {}), "bad_signature"),
        (
            token(&s.key, |c, _| c["iss"] = "https://evil.example/cri".into()),
            "wrong_issuer",
        ),
        (
            token(&s.key, |c, _| c["aud"] = "https://elsewhere".into()),
            "wrong_audience",
        ),
        (
            token(&s.key, |c, _| {
                c["org"] = "99999999-0000-0000-0000-000000000000".into()
            }),
            "org_not_allowed",
        ),
        (
            token(&s.key, |c, _| c["scope"] = "admin".into()),
            "wrong_scope",
        ),
        (
            token(&s.key, |c, _| c["exp"] = (now - 120).into()),
            "expired",
        ),
        (
            token(&s.key, |c, _| c["nbf"] = (now + 600).into()),
            "not_yet_valid",
        ),
        (
            token(&s.key, |c, _| {
                c.as_object_mut().unwrap().remove("org");
            }),
            "missing_claim",
        ),
        (
            token(&s.key, |_, h| h.kid = Some("nope".into())),
            "unknown_kid",
        ),
    ];
    for (t, _) in &cases {
        let r = infer(&s, t, "/v1/messages").await;
        assert_eq!(r.status(), 401);
        assert_eq!(r.headers()["x-should-retry"], "false");
    }
    // HS256 with the cri typ, and alg none.
    let hs = {
        let mut h = Header::new(Algorithm::HS256);
        h.typ = Some("cri+jwt".into());
        h.kid = Some("k1".into());
        jsonwebtoken::encode(
            &h,
            &json!({"iss": ISSUER}),
            &EncodingKey::from_secret(b"guess"),
        )
        .unwrap()
    };
    assert_eq!(infer(&s, &hs, "/v1/messages").await.status(), 401);
    let reasons: Vec<String> =
        s.gw.events
            .named("auth.denied")
            .iter()
            .map(|e| e["reason"].as_str().unwrap().to_owned())
            .collect();
    let mut expected: Vec<String> = cases.iter().map(|(_, r)| (*r).to_owned()).collect();
    expected.push("bad_algorithm".into());
    assert_eq!(reasons, expected);
    assert!(s.gw.fake.requests().is_empty());
}

#[tokio::test]
async fn key_set_cache_refreshes_and_fails_closed() {
    let s = setup(true).await;
    let ok = token(&s.key, |_, _| {});
    // Never fetched: 503 with Retry-After, the client should retry, not re-authenticate.
    let r = infer(&s, &ok, "/v1/messages").await;
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "30");
    s.jwks.lock().unwrap().down = false;
    assert_eq!(infer(&s, &ok, "/v1/messages").await.status(), 200);

    // A new key appears: an unknown kid triggers one refresh.
    let k2 = key("k2");
    s.jwks.lock().unwrap().keys.push(k2.jwk.clone());
    assert_eq!(
        infer(&s, &token(&k2, |_, _| {}), "/v1/messages")
            .await
            .status(),
        200
    );
    // Another unknown kid within the cooldown does not fetch again.
    let before = s.jwks.lock().unwrap().fetches;
    let k3 = key("k3");
    assert_eq!(
        infer(&s, &token(&k3, |_, _| {}), "/v1/messages")
            .await
            .status(),
        401
    );
    assert_eq!(s.jwks.lock().unwrap().fetches, before);

    // Stale (past max-age 300 s) but under 6 h: still served while refreshing; the issuer is down.
    s.jwks.lock().unwrap().down = true;
    s.clock.advance(600);
    assert_eq!(infer(&s, &at(&s, 600), "/v1/messages").await.status(), 200);
    // Older than 6 h with the issuer down: fail closed.
    s.clock.advance(7 * 3600);
    assert_eq!(
        infer(&s, &at(&s, 600 + 7 * 3600), "/v1/messages")
            .await
            .status(),
        503
    );
    // The issuer is back: served again.
    s.jwks.lock().unwrap().down = false;
    assert_eq!(
        infer(&s, &at(&s, 600 + 7 * 3600), "/v1/messages")
            .await
            .status(),
        200
    );
}

/// A valid token for the gateway's clock moved `offset` seconds ahead.
fn at(s: &Setup, offset: i64) -> String {
    let now = (chrono::Utc::now() + chrono::Duration::seconds(offset)).timestamp();
    token(&s.key, |c, _| {
        c["iat"] = now.into();
        c["exp"] = (now + 300).into();
    })
}

#[tokio::test]
async fn upstream_errors_reach_workloads_as_capability_reasons() {
    let s = setup(false).await;
    let ok = token(&s.key, |_, _| {});
    s.gw.fake.push_fault(Fault::Status {
        status: 400,
        retry_after: None,
        error_type: None,
        message: Some("prompt is too long: 210000 tokens > 200000 maximum".into()),
    });
    let r = infer(&s, &ok, "/v1/messages").await;
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v,
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "capability_rejected: prompt_too_long"}})
    );
    s.gw.fake.push_fault(Fault::Status {
        status: 400,
        retry_after: None,
        error_type: None,
        message: Some(
            "model arn:aws:bedrock:us-east-1:123456789012:inference-profile/x is not available"
                .into(),
        ),
    });
    let v: Value = infer(&s, &ok, "/v1/messages").await.json().await.unwrap();
    assert_eq!(v["error"]["message"], "the upstream refused the request");
    assert!(!v.to_string().contains("123456789012"));
    // A person's client key still sees the upstream's own words.
    s.gw.fake.push_fault(Fault::Status {
        status: 400,
        retry_after: None,
        error_type: None,
        message: Some("prompt is too long: 5 tokens".into()),
    });
    let r =
        s.gw.client
            .post(s.gw.url("/v1/messages"))
            .header("x-api-key", CLIENT_KEY)
            .json(&sonnet(false))
            .send()
            .await
            .unwrap();
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["message"],
        "prompt is too long: 5 tokens"
    );
}

/// The classes of 2.1.334: an upstream refusing `thinking: {"type": "disabled"}` or a
/// deprecated `temperature` reaches a workload caller as its stable token (the client
/// resends without the field), and a signature complaint still wins over them.
#[tokio::test]
async fn thinking_off_and_temperature_refusals_reach_workloads_as_their_classes() {
    let s = setup(false).await;
    let ok = token(&s.key, |_, _| {});
    let cases = [
        (
            "thinking.type.disabled is not supported for this model. Use adaptive thinking.",
            "capability_rejected: thinking_disabled_unsupported",
        ),
        (
            "To turn thinking off on this model, send thinking.display = \"between_tools\" instead of \"disabled\"",
            "capability_rejected: thinking_disabled_unsupported",
        ),
        (
            "`temperature` is deprecated for this model.",
            "capability_rejected: temperature_unsupported",
        ),
        (
            "Invalid `signature` in `thinking` block; thinking.type.disabled is not supported for this model",
            "capability_rejected: thinking_signature",
        ),
    ];
    for (upstream, token_text) in cases {
        s.gw.fake.push_fault(Fault::Status {
            status: 400,
            retry_after: None,
            error_type: None,
            message: Some(upstream.into()),
        });
        let r = infer(&s, &ok, "/v1/messages").await;
        assert_eq!(r.status(), 400);
        let v: Value = r.json().await.unwrap();
        assert_eq!(
            v,
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": token_text}}),
            "{upstream}"
        );
    }
}

/// Every upstream error status a workload caller can see (relayed, or retained while the
/// router failed over) carries only the cleaned message: status, `error.type` and
/// `retry-after` kept, the account id and host in the upstream's words never.
#[tokio::test]
async fn upstream_errors_of_every_status_reach_workloads_clean() {
    let s = setup(false).await;
    let ok = token(&s.key, |_, _| {});
    let leaky = "account 123456789012 (arn:aws:iam::123456789012:role/gw) at api.internal.corp";
    let cases = [
        (
            404,
            "not_found_error",
            "the model or endpoint was not found upstream",
        ),
        (429, "rate_limit_error", "upstream rate limit exceeded"),
        (422, "invalid_request_error", "the upstream failed"),
        (
            413,
            "request_too_large",
            "the request is too large for the upstream",
        ),
    ];
    for (status, kind, sentence) in cases {
        s.gw.fake.push_fault(Fault::Status {
            status,
            retry_after: (status == 429).then_some(7),
            error_type: Some(kind.into()),
            message: Some(leaky.into()),
        });
        let r = infer(&s, &ok, "/v1/messages").await;
        assert_eq!(r.status(), status);
        if status == 429 {
            assert_eq!(r.headers()["retry-after"], "7");
        }
        let text = r.text().await.unwrap();
        assert!(!text.contains("123456789012"), "{status}: {text}");
        assert!(!text.contains("internal.corp"), "{status}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v,
            json!({"type": "error", "error": {"type": kind, "message": sentence}}),
            "{status}"
        );
    }
    // A person's client key still sees the raw Anthropic upstream's own words on a 404.
    s.gw.fake.push_fault(Fault::Status {
        status: 404,
        retry_after: None,
        error_type: None,
        message: Some("model: claude-nope".into()),
    });
    let r =
        s.gw.client
            .post(s.gw.url("/v1/messages"))
            .header("x-api-key", CLIENT_KEY)
            .json(&sonnet(false))
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["message"],
        "model: claude-nope"
    );
}

/// A P-384 key (ES384, through jsonwebtoken) and a P-521 key (ES512, signed here with
/// RustCrypto's `p521`, which jsonwebtoken cannot do).
fn es384_key(kid: &str) -> Key {
    use p384::pkcs8::EncodePrivateKey;
    let secret = p384::SecretKey::random(&mut p384::elliptic_curve::rand_core::OsRng);
    let der = secret.to_pkcs8_der().unwrap();
    let mut jwk: Value = serde_json::from_str(&secret.public_key().to_jwk_string()).unwrap();
    jwk["kid"] = kid.into();
    Key {
        kid: kid.to_owned(),
        encoding: EncodingKey::from_ec_der(der.as_bytes()),
        jwk,
    }
}

fn es512_token(key: &p521::ecdsa::SigningKey, kid: &str, alg: &str) -> String {
    use base64::Engine;
    use p521::ecdsa::signature::Signer;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let now = chrono::Utc::now().timestamp();
    let header = json!({"alg": alg, "typ": "cri+jwt", "kid": kid});
    let claims = json!({"iss": ISSUER, "aud": AUD, "sub": "agent-521", "org": ORG,
                        "scope": "inference", "iat": now, "exp": now + 300});
    let signed = format!(
        "{}.{}",
        b64.encode(header.to_string()),
        b64.encode(claims.to_string())
    );
    let sig: p521::ecdsa::Signature = key.sign(signed.as_bytes());
    format!("{signed}.{}", b64.encode(sig.to_bytes()))
}

fn es512_jwk(key: &p521::ecdsa::SigningKey, kid: &str) -> Value {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let point = p521::ecdsa::VerifyingKey::from(key).to_encoded_point(false);
    json!({"kty": "EC", "crv": "P-521", "kid": kid, "alg": "ES512", "use": "sig",
           "x": b64.encode(point.x().unwrap()), "y": b64.encode(point.y().unwrap())})
}

#[tokio::test]
async fn es384_and_es512_tokens_are_accepted_with_the_matching_curve_only() {
    let s = setup(false).await;
    let k384 = es384_key("k384");
    let k521 = p521::ecdsa::SigningKey::random(&mut p521::elliptic_curve::rand_core::OsRng);
    {
        let mut j = s.jwks.lock().unwrap();
        j.keys.push(k384.jwk.clone());
        j.keys.push(es512_jwk(&k521, "k521"));
        // Keys the reference skips: encryption use, a mismatched alg, no kid.
        let mut enc = es512_jwk(&k521, "enc");
        enc["use"] = "enc".into();
        let mut wrong_alg = k384.jwk.clone();
        wrong_alg["kid"] = "wrong-alg".into();
        wrong_alg["alg"] = "ES256".into();
        let mut no_kid = es512_jwk(&k521, "");
        no_kid.as_object_mut().unwrap().remove("kid");
        j.keys.extend([enc, wrong_alg, no_kid]);
    }
    // The set was fetched at start: an unknown kid refreshes it.
    let es384 = token(&k384, |_, h| h.alg = Algorithm::ES384);
    assert_eq!(infer(&s, &es384, "/v1/messages").await.status(), 200);
    let es512 = es512_token(&k521, "k521", "ES512");
    assert_eq!(infer(&s, &es512, "/v1/messages").await.status(), 200);
    let rows = s.gw.usage_rows(2).await;
    assert!(
        rows.iter()
            .any(|r| r.principal == format!("workload:{ORG}/agent-521"))
    );

    // The algorithm must match the key's curve; skipped keys are never used.
    let refused = [
        es512_token(&k521, "k384", "ES512"),
        token(&k384, |_, h| {
            h.alg = Algorithm::ES384;
            h.kid = Some("wrong-alg".into());
        }),
        es512_token(&k521, "enc", "ES512"),
    ];
    for t in &refused {
        assert_eq!(infer(&s, t, "/v1/messages").await.status(), 401);
    }
    let reasons: Vec<String> =
        s.gw.events
            .named("auth.denied")
            .iter()
            .map(|e| e["reason"].as_str().unwrap().to_owned())
            .collect();
    assert_eq!(reasons, ["bad_algorithm", "unknown_kid", "unknown_kid"]);
}

/// The reference's workload-only file: `session` and `cri` without `oidc`, the loopback key
/// set allowed by `CLAUDE_GATEWAY_ALLOW_LOOPBACK` (not Gatehouse's own key). Workload
/// callers work; discovery lists no sign-in endpoints; every sign-in route is 404.
#[tokio::test]
async fn a_workload_only_file_serves_workloads_and_no_sign_in() {
    let s = setup_with(
        false,
        "session: {jwt_secret: \"0123456789abcdef0123456789abcdef\"}\n",
        &[("CLAUDE_GATEWAY_ALLOW_LOOPBACK", "1")],
    )
    .await;
    let ok = token(&s.key, |_, _| {});
    assert_eq!(infer(&s, &ok, "/v1/messages").await.status(), 200);
    let r =
        s.gw.client
            .get(s.gw.url("/.well-known/oauth-authorization-server"))
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 200);
    let doc: Value = r.json().await.unwrap();
    assert_eq!(doc["grant_types_supported"], json!([]));
    assert_eq!(doc["cri_enabled"], true);
    assert!(
        doc.get("token_endpoint").is_none() && doc.get("device_authorization_endpoint").is_none()
    );
    assert_eq!(doc["issuer"], s.gw.url("").trim_end_matches('/'));
    for (method, path) in [
        ("POST", "/oauth/device_authorization"),
        ("POST", "/oauth/token"),
        ("GET", "/device"),
        ("GET", "/oauth/callback"),
    ] {
        let r =
            s.gw.client
                .request(method.parse().unwrap(), s.gw.url(path))
                .send()
                .await
                .unwrap();
        assert_eq!(r.status(), 404, "{method} {path}");
    }
}

/// Without `CLAUDE_GATEWAY_ALLOW_LOOPBACK` (or `allow_loopback_jwks`), a loopback key set
/// is refused at load, naming the key.
#[test]
fn a_loopback_key_set_needs_the_reference_switch() {
    let yaml = format!(
        "listen: {{host: 127.0.0.1, port: 0}}\nupstreams: [{{name: a, provider: anthropic}}]\ncri: {{enabled: true, issuer: \"{ISSUER}\", jwks_url: \"http://127.0.0.1:9/jwks.json\", audience: [a], org_allowlist: [o]}}\n"
    );
    let load_with = |env: gatehouse_engine::deps::MapEnvironment| {
        gatehouse_engine::config::Config::from_yaml(
            &yaml,
            &gatehouse_engine::config::LoadContext {
                env: &env,
                credentials: &gatehouse_engine::deps::NoCredentialStore,
                default_data_dir: std::env::temp_dir(),
            },
        )
    };
    let e = load_with(Default::default()).unwrap_err().to_string();
    assert!(
        e.contains("cri.issuer") || e.contains("cri.jwks_url"),
        "{e}"
    );
    let on = gatehouse_engine::deps::MapEnvironment::default()
        .with_var("CLAUDE_GATEWAY_ALLOW_LOOPBACK", "1");
    assert!(load_with(on).is_ok());
}

/// An `error` event inside a 200 stream gets a workload caller the same clean words as an
/// error answer (issue 35): the upstream's account details never reach it; a person's key
/// still sees the stream as the upstream sent it.
#[tokio::test]
async fn an_error_event_mid_stream_reaches_workloads_clean() {
    let s = setup(false).await;
    let ok = token(&s.key, |_, _| {});
    let leaky = "account 123456789012 (arn:aws:iam::123456789012:role/gw) is overloaded";
    s.gw.fake.set_config(FakeConfig {
        mid_stream_error_message: Some(leaky.into()),
        ..FakeConfig::default()
    });
    let mut body = sonnet(true);
    body["stream"] = true.into();
    s.gw.fake
        .push_fault(Fault::MidStreamError { after_deltas: 1 });
    let r =
        s.gw.client
            .post(s.gw.url("/v1/messages"))
            .bearer_auth(&ok)
            .json(&body)
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(!text.contains("123456789012"), "{text}");
    assert!(
        text.contains(r#"data: {"type":"error","error":{"type":"overloaded_error","message":"the upstream is overloaded"}}"#),
        "{text}"
    );
    assert!(
        text.contains("content_block_delta"),
        "the stream itself passes: {text}"
    );
}

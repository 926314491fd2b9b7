//! The requests [`super::aws_http`] builds for Mantle and Claude Platform on AWS: path,
//! headers and body, and the SigV4 signature over them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use url::Url;

use super::aws::sigv4::{Scope, sign_with};
use super::aws_http::{Auth, AwsHttp, CONTENT_SHA256, content_sha256};
use super::{Call, Operation, anthropic, capabilities};
use crate::config::CredentialScheme;
use crate::secret::Secret;

fn link(provider: &'static str, auth: Auth, fixed: Vec<(HeaderName, HeaderValue)>) -> AwsHttp {
    AwsHttp {
        client: reqwest::Client::new().into(),
        name: provider.to_owned(),
        base_url: Url::parse("https://example.test/anthropic/").unwrap(),
        provider,
        auth,
        fixed,
    }
}

fn caller_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("content-type", HeaderValue::from_static("application/json"));
    h.insert(
        "anthropic-beta",
        HeaderValue::from_static("claude-code-20250219,request-tags-2026-08-21"),
    );
    h.insert(
        "authorization",
        HeaderValue::from_static("Bearer caller-token"),
    );
    h.insert("x-api-key", HeaderValue::from_static("caller-key"));
    h.insert("x-stainless-lang", HeaderValue::from_static("js"));
    h.insert("cookie", HeaderValue::from_static("session=1"));
    h
}

const BODY: &str = r#"{"model":"anthropic.claude-opus-4-8","max_tokens":8,"tags":["team-a"],"messages":[{"role":"user","content":"hi"}]}"#;

fn call<'a>(headers: &'a HeaderMap, key: Option<&'a Secret>) -> Call<'a> {
    Call {
        op: Operation::Messages,
        query: Some("beta=true"),
        headers,
        model: "anthropic.claude-opus-4-8",
        body: Bytes::from_static(BODY.as_bytes()),
        stream: false,
        credential: key.map(|k| (CredentialScheme::Bearer, k)),
        extra_headers: &[],
        caller: None,
        affinity: None,
    }
}

#[test]
fn mantle_drops_request_tags_and_sends_its_bearer_key() {
    let l = link(
        "mantle",
        Auth::Bearer(Secret::new("bedrock-key")),
        Vec::new(),
    );
    let headers = caller_headers();
    let c = call(&headers, None);
    let plan = capabilities::plan("mantle", &capabilities::betas(c.headers));
    let out = l.headers(&c, &plan);
    assert_eq!(out["anthropic-beta"], "claude-code-20250219");
    assert_eq!(out["authorization"], "Bearer bedrock-key");
    assert_eq!(out["anthropic-version"], "2023-06-01");
    assert_eq!(out["x-stainless-lang"], "js");
    assert!(out.get("x-api-key").is_none() && out.get("cookie").is_none());
    let (body, dropped) = AwsHttp::payload(&c, &plan).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert!(v.get("tags").is_none());
    assert_eq!(v["model"], "anthropic.claude-opus-4-8");
    assert_eq!(dropped, vec!["tags".to_owned()]);
    assert_eq!(
        plan.notes(&dropped),
        vec![
            "betas dropped: request-tags-2026-08-21".to_owned(),
            "fields dropped: tags".to_owned()
        ]
    );
    assert_eq!(
        anthropic::url(&l.base_url, c.op, c.query).as_str(),
        "https://example.test/anthropic/v1/messages?beta=true"
    );
    let count = anthropic::url(&l.base_url, Operation::CountTokens, None);
    assert_eq!(
        count.as_str(),
        "https://example.test/anthropic/v1/messages/count_tokens"
    );
}

#[test]
fn anthropic_aws_keeps_betas_and_body_and_names_the_workspace() {
    let ws = vec![(
        HeaderName::from_static("anthropic-workspace-id"),
        HeaderValue::from_static("wrkspc_1"),
    )];
    let l = link("anthropicAws", Auth::Credential, ws);
    let headers = caller_headers();
    let key = Secret::new("platform-key");
    let c = call(&headers, Some(&key));
    let plan = capabilities::plan("anthropicAws", &capabilities::betas(c.headers));
    let out = l.headers(&c, &plan);
    assert_eq!(
        out["anthropic-beta"],
        "claude-code-20250219,request-tags-2026-08-21"
    );
    assert_eq!(out["authorization"], "Bearer platform-key");
    assert_eq!(out["anthropic-workspace-id"], "wrkspc_1");
    assert!(out.get("x-api-key").is_none());
    let (body, dropped) = AwsHttp::payload(&c, &plan).unwrap();
    assert_eq!(body, BODY.as_bytes());
    assert!(dropped.is_empty() && plan.notes(&dropped).is_empty());
}

/// A request signed at a fixed time with fixed keys: the scope, the signed headers (the
/// workspace among them, `user-agent` left out as SigV4 does) and the session token.
#[test]
fn sigv4_signs_every_header_for_the_service_and_region() {
    let creds = Credentials::new("AKIDEXAMPLE", "secret", Some("tok".into()), None, "test");
    let identity = Identity::from(creds);
    let fresh = || {
        let mut h = HeaderMap::new();
        h.insert("content-type", HeaderValue::from_static("application/json"));
        h.insert(
            "anthropic-workspace-id",
            HeaderValue::from_static("wrkspc_1"),
        );
        h.insert("user-agent", HeaderValue::from_static("claude-cli/2"));
        h
    };
    let mut headers = fresh();
    let at = Scope {
        service: "aws-external-anthropic",
        region: "us-west-2",
        time: SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600),
    };
    let url = Url::parse("https://aws-external-anthropic.us-west-2.api.aws/v1/messages").unwrap();
    sign_with(&identity, &at, &url, &mut headers, BODY.as_bytes()).unwrap();
    let auth = headers["authorization"].to_str().unwrap();
    assert!(headers["authorization"].is_sensitive());
    assert!(
        auth.starts_with(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/us-west-2/aws-external-anthropic/aws4_request, SignedHeaders=anthropic-workspace-id;content-type;host;x-amz-date;x-amz-security-token, Signature="
        ),
        "{auth}"
    );
    assert_eq!(headers["x-amz-date"], "20260101T000000Z");
    assert_eq!(headers["x-amz-security-token"], "tok");
    // The same request signed again is the same signature; another body is not.
    let mut again = fresh();
    sign_with(&identity, &at, &url, &mut again, BODY.as_bytes()).unwrap();
    assert_eq!(again["authorization"], headers["authorization"]);
    let mut other = fresh();
    sign_with(&identity, &at, &url, &mut other, b"{}").unwrap();
    assert_ne!(other["authorization"], headers["authorization"]);
}

/// 2.1.334: Mantle (any authentication) and SigV4-signed Claude Platform on AWS name the
/// body's SHA-256; a Platform request with an API key does not. The hash is signed with the
/// rest, and a header already set is kept.
#[test]
fn the_body_hash_is_sent_where_the_reference_sends_it() {
    let mantle = link("mantle", Auth::Bearer(Secret::new("k")), Vec::new());
    let keyed = link("anthropicAws", Auth::Credential, Vec::new());
    assert!(mantle.hashes_body());
    assert!(!keyed.hashes_body());
    let mut headers = HeaderMap::new();
    content_sha256(&mut headers, b"{}");
    assert_eq!(
        headers[CONTENT_SHA256],
        "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    );
    let mut preset = HeaderMap::new();
    preset.insert(CONTENT_SHA256, HeaderValue::from_static("UNSIGNED-PAYLOAD"));
    content_sha256(&mut preset, b"{}");
    assert_eq!(preset[CONTENT_SHA256], "UNSIGNED-PAYLOAD");

    let identity = Identity::from(Credentials::new("AKIDEXAMPLE", "secret", None, None, "t"));
    let at = Scope {
        service: "bedrock-mantle",
        region: "us-east-1",
        time: SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600),
    };
    let url = Url::parse("https://bedrock-mantle.us-east-1.api.aws/anthropic/v1/messages").unwrap();
    let mut signed = HeaderMap::new();
    content_sha256(&mut signed, BODY.as_bytes());
    sign_with(&identity, &at, &url, &mut signed, BODY.as_bytes()).unwrap();
    let auth = signed["authorization"].to_str().unwrap();
    assert!(
        auth.contains("SignedHeaders=host;x-amz-content-sha256;x-amz-date,"),
        "{auth}"
    );
}

//! The fake's faces of Anthropic's Messages API on AWS, as Anthropic's SDKs for them speak
//! it: Bedrock Mantle (`<prefix>/anthropic/v1/messages[/count_tokens]` signed with SigV4 for
//! the service `bedrock-mantle`, or a Bedrock API key — `ABSK…` or `bedrock-api-key-…` — as
//! a bearer token) and Claude Platform on AWS (`/v1/messages[/count_tokens]` naming its workspace in
//! `anthropic-workspace-id`, with an API key — a bearer token or `x-api-key` — or SigV4 for
//! `aws-external-anthropic` that signs the workspace header). A SigV4 `Authorization` must be well-formed: its credential
//! scope (`<key>/<yyyymmdd>/<region>/<service>/aws4_request`) names the face's service,
//! `host` and `x-amz-date` (and a session token, when sent) are signed, `x-amz-date` is
//! the scope's day, and `x-amz-content-sha256` is signed and is the hex SHA-256 of the body
//! (as the official clients' SigV4 sends it; an API-key request may leave it out, but one
//! it carries must be the body's). Mantle also refuses what the gateway must strip before
//! it: top-level `tags` and the request-tags beta. Answers are the Anthropic face's.

use http::{HeaderMap, Response, StatusCode};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::server::{Probe, Shared, error_response, inference};
use crate::sse::{Abort, FakeBody};
use crate::strict::{Family, claude_refusal};

/// Which AWS face a request is for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum AwsFace {
    Mantle,
    Platform,
}

const MANTLE_SERVICE: &str = "bedrock-mantle";
const PLATFORM_SERVICE: &str = "aws-external-anthropic";
const WORKSPACE: &str = "anthropic-workspace-id";
const REQUEST_TAGS_BETA: &str = "request-tags-2026-08-21";
const CONTENT_SHA256: &str = "x-amz-content-sha256";

fn text<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// The face and whether it is a count, for a path and its headers.
pub(crate) fn classify(path: &str, headers: &HeaderMap) -> Option<(AwsFace, bool)> {
    let count = |rest: &str| match rest {
        "" => Some(false),
        "/count_tokens" => Some(true),
        _ => None,
    };
    let auth = text(headers, "authorization");
    let signed = auth.starts_with("AWS4-HMAC-SHA256 ");
    if let Some((_, rest)) = path.rsplit_once("/anthropic/v1/messages")
        && (signed || bedrock_api_key(auth))
    {
        return count(rest).map(|c| (AwsFace::Mantle, c));
    }
    let rest = path.strip_prefix("/v1/messages")?;
    (signed || headers.contains_key(WORKSPACE))
        .then(|| count(rest).map(|c| (AwsFace::Platform, c)))
        .flatten()
}

/// A Bedrock API key as a bearer token: long-term keys start `ABSK`, short-term ones
/// `bedrock-api-key-` (Foundry's path is the same, so the key's shape tells them apart).
fn bedrock_api_key(authorization: &str) -> bool {
    authorization
        .strip_prefix("Bearer ")
        .is_some_and(|k| k.starts_with("ABSK") || k.starts_with("bedrock-api-key-"))
}

/// A SigV4 `Authorization` parsed: the credential scope and the signed header names.
struct SigV4 {
    service: String,
    signed: Vec<String>,
}

fn parse_sigv4(headers: &HeaderMap) -> Result<SigV4, String> {
    let auth = text(headers, "authorization");
    let rest = auth
        .strip_prefix("AWS4-HMAC-SHA256 ")
        .ok_or("not a SigV4 Authorization")?;
    let field = |name: &str| {
        rest.split(',')
            .map(str::trim)
            .find_map(|p| p.strip_prefix(name))
            .map(str::to_owned)
    };
    let credential = field("Credential=").ok_or("no Credential")?;
    let scope: Vec<&str> = credential.split('/').collect();
    let [key, day, region, service, "aws4_request"] = scope[..] else {
        return Err(format!("bad credential scope `{credential}`"));
    };
    if key.is_empty()
        || region.is_empty()
        || day.len() != 8
        || !day.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(format!("bad credential scope `{credential}`"));
    }
    let signed: Vec<String> = field("SignedHeaders=")
        .ok_or("no SignedHeaders")?
        .split(';')
        .map(str::to_owned)
        .collect();
    let signature = field("Signature=").ok_or("no Signature")?;
    if signature.len() != 64 || !signature.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("bad Signature".into());
    }
    for needed in ["host", "x-amz-date"] {
        if !signed.iter().any(|s| s == needed) {
            return Err(format!("{needed} is not signed"));
        }
    }
    if !text(headers, "x-amz-date").starts_with(day) {
        return Err("x-amz-date is not the credential scope's day".into());
    }
    if headers.contains_key("x-amz-security-token")
        && !signed.iter().any(|s| s == "x-amz-security-token")
    {
        return Err("x-amz-security-token is not signed".into());
    }
    Ok(SigV4 {
        service: service.to_owned(),
        signed,
    })
}

/// Why the body's hash is refused: a header that is not the body's SHA-256, or (`signed`)
/// one missing or left out of the signature.
fn hash_error(headers: &HeaderMap, body: &[u8], signed: Option<&[String]>) -> Option<String> {
    let Some(sent) = headers.get(CONTENT_SHA256) else {
        return signed.map(|_| format!("{CONTENT_SHA256} is missing"));
    };
    if signed.is_some_and(|s| !s.iter().any(|h| h == CONTENT_SHA256)) {
        return Some(format!("{CONTENT_SHA256} is not signed"));
    }
    (sent.as_bytes() != hex::encode(Sha256::digest(body)).as_bytes()).then(|| {
        format!("The provided '{CONTENT_SHA256}' header does not match what was computed.")
    })
}

/// Why the face refuses the request's authentication, if it does.
fn auth_error(face: AwsFace, headers: &HeaderMap, body: &[u8]) -> Option<String> {
    // An API key: `AnthropicAws` on the Anthropic SDK 1.x sends it as a bearer token, older
    // clients (the reference's bundled one) as `x-api-key`.
    let bearer = text(headers, "authorization").starts_with("Bearer ");
    if face == AwsFace::Platform && (bearer || !text(headers, "x-api-key").is_empty()) {
        return hash_error(headers, body, None);
    }
    if face == AwsFace::Mantle && bedrock_api_key(text(headers, "authorization")) {
        return hash_error(headers, body, None);
    }
    let sig = match parse_sigv4(headers) {
        Ok(s) => s,
        Err(why) => return Some(why),
    };
    if let Some(why) = hash_error(headers, body, Some(&sig.signed)) {
        return Some(why);
    }
    let service = match face {
        AwsFace::Mantle => MANTLE_SERVICE,
        AwsFace::Platform => PLATFORM_SERVICE,
    };
    if sig.service != service {
        return Some(format!(
            "Credential should be scoped to correct service: '{service}'"
        ));
    }
    if face == AwsFace::Platform && !sig.signed.iter().any(|s| s == WORKSPACE) {
        return Some(format!("{WORKSPACE} is not signed"));
    }
    None
}

/// Why the body or betas are refused, if they are.
fn shape_error(face: AwsFace, headers: &HeaderMap, body: &Value) -> Option<String> {
    if body.get("model").and_then(Value::as_str).is_none() {
        return Some("model: field required".into());
    }
    if face == AwsFace::Platform && text(headers, WORKSPACE).is_empty() {
        return Some(format!("{WORKSPACE}: header required"));
    }
    if face == AwsFace::Mantle {
        if body.get("tags").is_some() {
            return Some("tags: Extra inputs are not permitted".into());
        }
        let betas = headers
            .get_all("anthropic-beta")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect::<Vec<_>>()
            .join(",");
        if betas.split(',').any(|b| b.trim() == REQUEST_TAGS_BETA) {
            return Some(format!(
                "Unexpected value(s) `{REQUEST_TAGS_BETA}` for the `anthropic-beta` header"
            ));
        }
    }
    None
}

pub(crate) async fn serve(
    shared: &Shared,
    face: AwsFace,
    count: bool,
    headers: &HeaderMap,
    (body, raw): (&Value, &[u8]),
    index: usize,
) -> Result<Response<FakeBody>, Abort> {
    let bytes = raw.len();
    if let Some(why) = auth_error(face, headers, raw) {
        return Ok(error_response(
            StatusCode::FORBIDDEN,
            "permission_error",
            &why,
        ));
    }
    let strict = || {
        claude_refusal(
            shared,
            index,
            Family::Anthropic,
            headers,
            body,
            bytes,
            count,
        )
    };
    if let Some(why) = shape_error(face, headers, body).or_else(strict) {
        return Ok(error_response(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            &why,
        ));
    }
    inference(shared, count, index, Probe::of(body)).await
}

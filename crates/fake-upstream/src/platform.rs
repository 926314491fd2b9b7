//! The Anthropic-platform faces of the fake: Claude Platform on Google Cloud (the
//! first-party Messages API under
//! `/v1/projects/{project}/locations/{location}/workspaces/{workspace}/invoke`, with a
//! Google bearer token) and workload-identity federation's token exchange
//! (`POST /v1/oauth/token` with the jwt-bearer grant, as Anthropic's SDK sends it). Tokens
//! the exchange issues are `sk-ant-fed-<n>` (numbered from 1, so a test can refuse one
//! with [`crate::FakeUpstream::refuse_key`]); a `/v1/messages` call carrying such a token
//! must carry one that was issued, with the `oauth-2025-04-20` beta.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use base64::Engine;
use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};
use serde_json::{Value, json};

use crate::server::{Probe, Shared, error_response, inference, json_response};
use crate::sse::{Abort, FakeBody};

/// The grant type of the federation exchange.
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// Prefix of the tokens the exchange issues.
pub const FEDERATED_PREFIX: &str = "sk-ant-fed-";

/// A request for one of the platform faces.
pub(crate) enum Platform {
    TokenExchange,
    GoogleCloud { count: bool },
}

/// Tokens the federation exchange issued.
#[derive(Default)]
pub(crate) struct Issued {
    next: AtomicU64,
    tokens: Mutex<Vec<String>>,
}

impl Issued {
    fn issue(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let token = format!("{FEDERATED_PREFIX}{n}");
        self.tokens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(token.clone());
        token
    }

    fn knows(&self, token: &str) -> bool {
        self.tokens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|t| t == token)
    }
}

/// A name the Google Cloud path takes: `^[A-Za-z0-9_-]+$`.
fn id_ok(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

pub(crate) fn classify(path: &str) -> Option<Platform> {
    if path == "/v1/oauth/token" {
        return Some(Platform::TokenExchange);
    }
    let rest = path.strip_prefix("/v1/projects/")?;
    let parts: Vec<&str> = rest.splitn(7, '/').collect();
    let [
        project,
        "locations",
        location,
        "workspaces",
        workspace,
        "invoke",
        tail,
    ] = parts[..]
    else {
        return None;
    };
    if ![project, location, workspace].into_iter().all(id_ok) {
        return None;
    }
    match tail {
        "v1/messages" => Some(Platform::GoogleCloud { count: false }),
        "v1/messages/count_tokens" => Some(Platform::GoogleCloud { count: true }),
        _ => None,
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

fn betas(headers: &HeaderMap) -> Vec<String> {
    header(headers, "anthropic-beta")
        .split(',')
        .map(|b| b.trim().to_owned())
        .collect()
}

pub(crate) async fn serve(
    shared: &Shared,
    face: Platform,
    headers: &HeaderMap,
    raw: &[u8],
    index: usize,
) -> Result<Response<FakeBody>, Abort> {
    let body = serde_json::from_slice::<Value>(raw).unwrap_or(Value::Null);
    match face {
        Platform::TokenExchange => Ok(exchange(shared, headers, &body)),
        Platform::GoogleCloud { count } => {
            let bearer = header(headers, "authorization").strip_prefix("Bearer ");
            if bearer.is_none_or(str::is_empty) || headers.contains_key("x-api-key") {
                return Ok(error_response(
                    StatusCode::UNAUTHORIZED,
                    "authentication_error",
                    "a Google access token is required (Authorization: Bearer)",
                ));
            }
            if body["model"].as_str().is_none_or(str::is_empty) {
                return Ok(error_response(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    "model: Field required",
                ));
            }
            let family = crate::strict::Family::Anthropic;
            let bytes = raw.len();
            if let Some(why) =
                crate::strict::claude_refusal(shared, index, family, headers, &body, bytes, count)
            {
                return Ok(error_response(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    &why,
                ));
            }
            inference(shared, count, index, Probe::of(&body)).await
        }
    }
}

/// An OAuth error answer (RFC 6749 §5.2).
fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response<FakeBody> {
    let body = json!({"error": error, "error_description": description});
    json_response(status, Bytes::from(body.to_string()))
}

/// Whether `s` looks like a JWT: three base64url parts, the first a JSON header with `alg`.
fn is_jwt(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    let [head, payload, _sig] = parts[..] else {
        return false;
    };
    let decode = |p: &str| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(p)
            .ok()
    };
    let json = |p: &str| decode(p).and_then(|b| serde_json::from_slice::<Value>(&b).ok());
    json(head).is_some_and(|h| h["alg"].is_string()) && json(payload).is_some()
}

/// `POST /v1/oauth/token`: the jwt-bearer grant with the federation fields.
fn exchange(shared: &Shared, headers: &HeaderMap, body: &Value) -> Response<FakeBody> {
    if !header(headers, "content-type").starts_with("application/json") {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "JSON body expected",
        );
    }
    if !betas(headers)
        .iter()
        .any(|b| b == "oidc-federation-2026-04-01")
    {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "the oidc-federation-2026-04-01 beta is required",
        );
    }
    if body["grant_type"] != JWT_BEARER {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            "grant_type must be jwt-bearer",
        );
    }
    for field in ["federation_rule_id", "organization_id"] {
        if body[field].as_str().is_none_or(str::is_empty) {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                &format!("{field} is required"),
            );
        }
    }
    if !body["assertion"].as_str().is_some_and(is_jwt) {
        return oauth_error(
            StatusCode::UNAUTHORIZED,
            "invalid_grant",
            "the assertion is not a JWT",
        );
    }
    let token = shared.issued.issue();
    // A rule id starting `fdrl_short` gets a token with a minute to live (a test knob: a
    // client refreshes such a token before every use).
    let short = body["federation_rule_id"]
        .as_str()
        .is_some_and(|r| r.starts_with("fdrl_short"));
    let life = if short { 60 } else { 3600 };
    let answer = json!({"access_token": token, "token_type": "Bearer", "expires_in": life});
    json_response(StatusCode::OK, Bytes::from(answer.to_string()))
}

/// A `/v1/messages` call with a federated token: refused unless the exchange issued it and
/// the OAuth beta is there. `None`: not a federated token, or a good one.
pub(crate) fn federated_refusal(
    shared: &Shared,
    headers: &HeaderMap,
) -> Option<Response<FakeBody>> {
    let token = header(headers, "authorization").strip_prefix("Bearer ")?;
    if !token.starts_with(FEDERATED_PREFIX) {
        return None;
    }
    if !shared.issued.knows(token) {
        return Some(error_response(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid x-api-key",
        ));
    }
    if !betas(headers).iter().any(|b| b == "oauth-2025-04-20") {
        return Some(error_response(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "OAuth authentication is currently not supported.",
        ));
    }
    None
}

//! The fake's Microsoft Entra ID face: the OAuth 2.0 v2.0 token endpoint
//! (`POST /{tenant}/oauth2/v2.0/token`, client credentials with a `client_secret` or a
//! `client_assertion`, as client-secret and workload-identity credentials send them) and
//! the tenant's OpenID metadata (`GET /{tenant}/v2.0/.well-known/openid-configuration`,
//! which MSAL-based clients read first). Every token it issues is remembered with its
//! scope, so the Foundry face accepts only Bearer tokens this fake issued for
//! `https://cognitiveservices.azure.com/.default`. Entra ID requires https: serve this face
//! through [`crate::FakeUpstream::serve_tls`].

use std::sync::PoisonError;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use serde_json::json;

use crate::server::{Shared, json_response};
use crate::sse::FakeBody;

/// The scope Foundry tokens must be issued for.
pub const FOUNDRY_SCOPE: &str = "https://cognitiveservices.azure.com/.default";

const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

pub(crate) enum Entra {
    Token { tenant: String },
    Metadata { tenant: String },
}

pub(crate) fn classify(method: &Method, path: &str) -> Option<Entra> {
    let (tenant, rest) = path.strip_prefix('/')?.split_once('/')?;
    let tenant = tenant.to_owned();
    match (method, rest) {
        (&Method::POST, "oauth2/v2.0/token") => Some(Entra::Token { tenant }),
        (&Method::GET, "v2.0/.well-known/openid-configuration") => Some(Entra::Metadata { tenant }),
        _ => None,
    }
}

pub(crate) fn serve(shared: &Shared, entra: Entra, host: &str, body: &[u8]) -> Response<FakeBody> {
    match entra {
        Entra::Metadata { tenant } => {
            let base = format!("https://{host}/{tenant}");
            let doc = json!({
                "issuer": format!("{base}/v2.0"),
                "token_endpoint": format!("{base}/oauth2/v2.0/token"),
                "authorization_endpoint": format!("{base}/oauth2/v2.0/authorize"),
                "end_session_endpoint": format!("{base}/oauth2/v2.0/logout"),
                "jwks_uri": format!("{base}/discovery/v2.0/keys"),
                "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
            });
            json_response(StatusCode::OK, Bytes::from(doc.to_string()))
        }
        Entra::Token { tenant } => token(shared, &tenant, body),
    }
}

fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response<FakeBody> {
    let body = json!({"error": error, "error_description": description});
    json_response(status, Bytes::from(body.to_string()))
}

/// A client-credentials grant: a client id, a scope, and a secret or an assertion (a JWT).
fn token(shared: &Shared, tenant: &str, body: &[u8]) -> Response<FakeBody> {
    let form: Vec<(String, String)> = serde_urlencoded::from_bytes(body).unwrap_or_default();
    let get = |k: &str| {
        form.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or_default()
    };
    if get("grant_type") != "client_credentials" {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            "AADSTS70003: only client_credentials",
        );
    }
    if get("client_id").is_empty() || tenant.is_empty() {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "AADSTS900144: client_id is required",
        );
    }
    let scope = get("scope");
    if !scope.ends_with("/.default") {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_scope",
            "AADSTS1002012: the scope must end in /.default",
        );
    }
    let secret_ok = !get("client_secret").is_empty();
    let assertion = get("client_assertion");
    let assertion_ok = get("client_assertion_type") == ASSERTION_TYPE
        && assertion.split('.').count() == 3
        && assertion.split('.').all(|s| !s.is_empty());
    if !secret_ok && !assertion_ok {
        return oauth_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "AADSTS7000215: no client secret or assertion",
        );
    }
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let mut issued = shared
        .entra_tokens
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let token = format!("fake-entra-token-{}-{nanos:x}", issued.len() + 1);
    issued.push((token.clone(), scope.to_owned()));
    let body = json!({
        "token_type": "Bearer",
        "expires_in": 3599,
        "ext_expires_in": 3599,
        "access_token": token,
    });
    json_response(StatusCode::OK, Bytes::from(body.to_string()))
}

/// Whether `token` was issued here for the Foundry scope.
pub(crate) fn issued_for_foundry(shared: &Shared, token: &str) -> bool {
    shared
        .entra_tokens
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .any(|(t, s)| t == token && s == FOUNDRY_SCOPE)
}

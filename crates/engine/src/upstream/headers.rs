//! Header hygiene in both directions.
//!
//! Toward the upstream only a fixed set is kept (content-type, accept, accept-encoding,
//! user-agent, every `anthropic-*`, `x-stainless-*` and `x-claude-code-*`); the caller's
//! `Authorization` and `x-api-key` never pass, and the operator's credential is applied.
//! Toward the caller, hop-by-hop and infrastructure headers and the upstream's own
//! rate-limit headers are removed (a team quota must not reach a user as if it were theirs).
//! `content-length` is kept when the body passes through unchanged (the HTTP client drops
//! it itself when it decompresses), so small JSON answers are not re-framed as chunked.

use http::{HeaderMap, HeaderName, HeaderValue, header};

use crate::config::CredentialScheme;
use crate::secret::Secret;

fn keep_request(name: &str) -> bool {
    matches!(
        name,
        "content-type" | "accept" | "accept-encoding" | "user-agent"
    ) || name.starts_with("anthropic-")
        || name.starts_with("x-stainless-")
        || name.starts_with("x-claude-code-")
}

/// The beta an Anthropic OAuth token needs beside it.
pub const OAUTH_BETA: &str = "oauth-2025-04-20";

/// Adds `beta` to `anthropic-beta` unless it is there already.
fn add_beta(out: &mut HeaderMap, beta: &str) {
    let mut current = super::capabilities::betas(out);
    if current.iter().any(|b| b == beta) {
        return;
    }
    current.push(beta.to_owned());
    let joined = current.join(",");
    if let Ok(v) = HeaderValue::from_str(&joined) {
        out.insert(HeaderName::from_static("anthropic-beta"), v);
    }
}

/// The caller's `x-stainless-*` headers, for SDK-style upstreams that take nothing else of
/// the caller's but `anthropic-beta` (placed by the capability table).
pub fn copy_stainless(incoming: &HeaderMap, out: &mut HeaderMap) {
    for (name, value) in incoming {
        if name.as_str().starts_with("x-stainless-") {
            out.append(name.clone(), value.clone());
        }
    }
}

fn api_key(out: &mut HeaderMap, key: &crate::secret::Secret) {
    if let Ok(mut v) = HeaderValue::from_str(key.expose()) {
        v.set_sensitive(true);
        out.insert(HeaderName::from_static("x-api-key"), v);
    }
}

/// `Authorization: Bearer <token>`, marked sensitive.
pub fn bearer(out: &mut HeaderMap, token: &crate::secret::Secret) {
    if let Ok(mut v) = HeaderValue::from_str(&format!("Bearer {}", token.expose())) {
        v.set_sensitive(true);
        out.insert(header::AUTHORIZATION, v);
    }
}

/// Headers for the upstream request: the caller's allowed headers, then the credential
/// (`scheme` and the value read for this request).
pub fn to_upstream(
    incoming: &HeaderMap,
    credential: Option<(CredentialScheme, &Secret)>,
) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(incoming.len());
    for (name, value) in incoming {
        if keep_request(name.as_str()) {
            out.append(name.clone(), value.clone());
        }
    }
    match credential {
        Some((CredentialScheme::ApiKey, key)) => api_key(&mut out, key),
        Some((CredentialScheme::Bearer, token)) => bearer(&mut out, token),
        Some((CredentialScheme::OAuth, token)) => {
            bearer(&mut out, token);
            add_beta(&mut out, OAUTH_BETA);
        }
        None => {}
    }
    if !out.contains_key("anthropic-version") {
        out.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static("2023-06-01"),
        );
    }
    out
}

fn drop_response(name: &str) -> bool {
    matches!(
        name,
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "content-encoding"
            | "set-cookie"
            | "server"
            | "via"
            | "alt-svc"
            | "cf-ray"
            | "cf-cache-status"
            | "x-envoy-upstream-service-time"
            | "anthropic-organization-id"
            | "request-id"
            | "strict-transport-security"
            | "x-request-id"
            | "date"
    ) || name.starts_with("anthropic-ratelimit-")
        || name.starts_with("x-gatehouse-")
}

/// Headers for the caller's response.
pub fn to_caller(upstream: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(upstream.len());
    for (name, value) in upstream {
        if !drop_response(name.as_str()) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::secret::Secret;

    fn hm(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        m
    }

    #[test]
    fn request_side_keeps_the_list_and_swaps_credentials() {
        let incoming = hm(&[
            ("authorization", "Bearer caller-key"),
            ("x-api-key", "caller-key"),
            ("content-type", "application/json"),
            ("anthropic-beta", "a,b"),
            ("anthropic-version", "2023-06-01"),
            ("x-stainless-lang", "js"),
            ("x-claude-code-session-id", "s1"),
            ("cookie", "c=1"),
            ("x-forwarded-for", "1.2.3.4"),
            ("host", "gw"),
            ("x-app", "cli"),
        ]);
        let key = Secret::new("sk-operator");
        let out = to_upstream(&incoming, Some((CredentialScheme::ApiKey, &key)));
        assert_eq!(out["x-api-key"], "sk-operator");
        assert!(out.get("authorization").is_none());
        assert_eq!(out["anthropic-beta"], "a,b");
        assert_eq!(out["x-stainless-lang"], "js");
        assert_eq!(out["x-claude-code-session-id"], "s1");
        for gone in ["cookie", "x-forwarded-for", "host", "x-app"] {
            assert!(out.get(gone).is_none(), "{gone}");
        }
        let token = Secret::new("tok");
        let out = to_upstream(&incoming, Some((CredentialScheme::Bearer, &token)));
        assert_eq!(out["authorization"], "Bearer tok");
        assert!(out.get("x-api-key").is_none());
        assert!(to_upstream(&incoming, None).get("x-api-key").is_none());
        let oauth = Secret::new("oat");
        let out = to_upstream(&incoming, Some((CredentialScheme::OAuth, &oauth)));
        assert_eq!(out["authorization"], "Bearer oat");
        assert_eq!(out["anthropic-beta"], "a,b,oauth-2025-04-20");
    }

    #[test]
    fn response_side_strips_infrastructure_and_rate_limits() {
        let up = hm(&[
            ("content-type", "text/event-stream"),
            ("content-length", "10"),
            ("transfer-encoding", "chunked"),
            ("anthropic-ratelimit-tokens-remaining", "5"),
            ("anthropic-organization-id", "org"),
            ("cf-ray", "x"),
            ("via", "1.1 x"),
            ("request-id", "req_1"),
            ("retry-after", "3"),
            ("x-should-retry", "true"),
        ]);
        let out = to_caller(&up);
        let names: Vec<&str> = out.keys().map(|k| k.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "content-type",
                "content-length",
                "retry-after",
                "x-should-retry"
            ]
        );
    }
}
